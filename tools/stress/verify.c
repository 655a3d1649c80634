/* SPDX-License-Identifier: MIT */
/*
 * verify.c - the checker: decides whether a slot the server handed to a
 * worker holds exactly the chunk of the key asked for. The expected XXH3
 * of a key is computed from a freshly generated copy (keys.c), never from
 * pool memory, and cached per process; the slot itself is hashed in place
 * while the worker's transfer still pins it. A wrong status, length or
 * hash counts as one corrupt chunk and prints one line with both values.
 *
 * What it can prove: every byte a worker was given matched its key at the
 * moment it was hashed, while the server promised nobody would write it.
 * A slot reused under a pin, a published aborted or orphaned reservation
 * (poison, see ops.c), a torn or half-written chunk, an answer for the
 * wrong key: each shows up here. What it cannot prove: anything about
 * chunks nobody retrieved, or a damage that happens after the commit of
 * the retrieve (the pin is gone then, so the bytes may legally change).
 *
 * It does not choose what to retrieve (ops.c, lease.c) nor commit.
 */
#include <inttypes.h>
#include <stdio.h>

#include <xxhash.h>

#include "stress.h"

/* The expected XXH3 of key @id's chunk, computed once per process from
 * a freshly generated copy (never from pool memory) and cached. A real
 * hash of 0 is simply recomputed every time; it costs nothing else. */
static uint64_t expected_hash(struct st_worker *w, uint64_t id)
{
	uint64_t h = w->exp_hash[id], len;

	if (h)
		return h;
	len = st_keys_size(id);
	st_keys_fill(w->scratch, len, id);
	h = XXH3_64bits(w->scratch, len);
	w->exp_hash[id] = h;
	return h;
}

void st_verify_slot(struct st_worker *w, const struct kvr_slot *s, uint64_t id,
		    const char *how)
{
	uint64_t want_len = st_keys_size(id), want, got;
	struct kvr_key k;

	/* A retrieve answers only OK slots for hits; anything else in a hit
	 * position, or a length not the key's, is already wrong. */
	if (s->status != KVR_SLOT_OK || s->len != want_len || !s->ptr) {
		k = st_keys_key(id);
		fprintf(stderr,
			PROG ": CORRUPT %s key id %" PRIu64 " (%016" PRIx64
			     "%016" PRIx64 "): slot status %d len %" PRIu64
			     ", expected status 0 len %" PRIu64 "\n",
			how, id, k.hi, k.lo, s->status, s->len, want_len);
		st_bump(&w->res->corrupt_chunks, 1);
		return;
	}
	want = expected_hash(w, id);
	/* Hashed in place: the slot is pinned by our transfer, so nobody
	 * may write it now; a torn or reused slot shows up here. */
	got = XXH3_64bits(s->ptr, s->len);
	if (got != want) {
		k = st_keys_key(id);
		fprintf(stderr,
			PROG ": CORRUPT %s key id %" PRIu64 " (%016" PRIx64
			     "%016" PRIx64 ") len %" PRIu64 " off %" PRIu64
			     ": expected xxh3 %016" PRIx64 ", got %016" PRIx64
			     "\n",
			how, id, k.hi, k.lo, s->len, s->off, want, got);
		st_bump(&w->res->corrupt_chunks, 1);
		return;
	}
	st_bump(&w->res->verified_chunks, 1);
	st_bump(&w->res->verified_bytes, s->len);
}
