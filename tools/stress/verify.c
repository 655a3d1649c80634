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
 * With checksums (--checksum) it also judges the library's own check
 * against this one, which knows the right bytes from the key alone: a
 * slot marked KVR_SLOT_CORRUPT must hold wrong bytes (else a false
 * alarm), and wrong bytes in a transfer whose every slot had a sum must
 * have been marked (else a miss). Either is a failure of the run.
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

enum st_vres st_verify_slot(struct st_worker *w, const struct kvr_slot *s,
			    uint64_t id, const char *how)
{
	uint64_t want_len = st_keys_size(id), want, got;
	bool flagged = s->status == KVR_SLOT_CORRUPT;
	struct kvr_key k;

	/* A retrieve answers only OK slots for hits (the library may have
	 * marked one CORRUPT since); anything else in a hit position, or a
	 * length not the key's, is already wrong. */
	if ((s->status != KVR_SLOT_OK && !flagged) || s->len != want_len ||
	    !s->ptr) {
		k = st_keys_key(id);
		fprintf(stderr,
			PROG ": CORRUPT %s key id %" PRIu64 " (%016" PRIx64
			     "%016" PRIx64 "): slot status %d len %" PRIu64
			     ", expected status 0 len %" PRIu64 "\n",
			how, id, k.hi, k.lo, s->status, s->len, want_len);
		st_bump(&w->res->corrupt_chunks, 1);
		return flagged ? ST_V_CAUGHT : ST_V_BAD;
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
			     "%s\n",
			how, id, k.hi, k.lo, s->len, s->off, want, got,
			flagged ? " (caught by its checksum)" : "");
		st_bump(&w->res->corrupt_chunks, 1);
		if (!flagged)
			return ST_V_BAD;
		st_bump(&w->res->sum_caught, 1);
		return ST_V_CAUGHT;
	}
	if (flagged) {
		/* The bytes are the key's: the library's check is wrong. */
		k = st_keys_key(id);
		fprintf(stderr,
			PROG ": CHECKSUM FALSE ALARM %s key id %" PRIu64
			     " (%016" PRIx64 "%016" PRIx64 ") len %" PRIu64
			     " off %" PRIu64 ": marked corrupt, but its xxh3 "
			     "%016" PRIx64 " is the key's\n",
			how, id, k.hi, k.lo, s->len, s->off, got);
		st_bump(&w->res->sum_false, 1);
		return ST_V_FALSE;
	}
	st_bump(&w->res->verified_chunks, 1);
	st_bump(&w->res->verified_bytes, s->len);
	if (w->sum != KVR_CHECKSUM_OFF)
		st_bump(&w->res->sum_verified, 1);
	return ST_V_OK;
}

void st_verify_missed(struct st_worker *w, struct kvr_xfer *x, uint32_t bad,
		      uint32_t unchecked, const char *how)
{
	long rc;

	if (!bad || w->sum == KVR_CHECKSUM_OFF)
		return;
	/* Rare (a corrupt chunk is already a failed run): ask the library
	 * now whether every slot had a sum. It re-hashes, and marks nothing
	 * new, since the bytes are pinned and were checked on arrival. */
	if (unchecked == UINT32_MAX) {
		rc = kvr_verify_retrieve(w->c, x, &unchecked);
		if (rc < 0)
			return;
	}
	if (unchecked)
		return; /* some slot had no sum: cannot tell whose it was */
	fprintf(stderr,
		PROG ": CHECKSUM MISSED %s: %u chunk(s) with wrong bytes "
		     "passed the library's check, every slot summed\n",
		how, bad);
	st_bump(&w->res->sum_missed, bad);
}
