/* SPDX-License-Identifier: MIT */
/*
 * xfer_sum.c - libkvring's per-chunk checksums (KVR_CHECKSUM_*, docs/
 * reliability.md "Checksums"): the mode chosen at connect, the XXH3-64 of
 * each OK slot computed at commit_store and sent in it, the sums a
 * retrieve answer carries kept beside the transfer's slots, the check of
 * a retrieve's bytes against them (kvr_verify_retrieve, and automatically
 * under KVR_CHECKSUM_VERIFY), and the offsets of corrupt slots sent with
 * commit_retrieve so that kvringd drops those objects.
 *
 * Why the worker sums: kvringd never reads the pool on the hot path
 * (DESIGN.md), and the bytes are in this process's cache right after it
 * wrote them. The server keeps each sum as an opaque value; a worker that
 * lies about it only makes its own chunk fail every later check.
 * This file does not move requests (pend.c) or match answers (answer.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/error.h>
#include <kvring/sum.h>

#include "client.h"

int kvr__xfer_sum_mode(const struct kvr_client_opts *o, char *errbuf,
		       size_t errlen)
{
	const char *env = getenv("KVRING_CHECKSUM");

	if (o->checksum >= KVR_CHECKSUM_OFF &&
	    o->checksum <= KVR_CHECKSUM_VERIFY)
		return (int)o->checksum;
	if (o->checksum != 0) {
		if (errbuf && errlen)
			snprintf(errbuf, errlen,
				 "opts.checksum %u: expected 0 (default), "
				 "KVR_CHECKSUM_OFF, _ON or _VERIFY",
				 o->checksum);
		return -EINVAL;
	}
	if (!env || !*env || !strcmp(env, "off"))
		return KVR_CHECKSUM_OFF;
	if (!strcmp(env, "on"))
		return KVR_CHECKSUM_ON;
	if (!strcmp(env, "verify"))
		return KVR_CHECKSUM_VERIFY;
	if (errbuf && errlen)
		snprintf(errbuf, errlen,
			 "KVRING_CHECKSUM=%s: expected off, on or verify", env);
	return -EINVAL;
}

uint32_t kvr__xfer_sum_retrieve_flags(const struct kvr_client *c)
{
	return c->checksum != KVR_CHECKSUM_OFF ? KVR_REQ_SUMS : 0;
}

/* Room for n words in c->sum_buf. */
static int words_reserve(struct kvr_client *c, uint32_t n)
{
	uint64_t *b;

	if (n <= c->sum_cap)
		return 0;
	b = realloc(c->sum_buf, (size_t)n * sizeof(*b));
	if (!b)
		return kvr__client_fail(c, -ENOMEM,
					"out of memory for %u checksums", n);
	c->sum_buf = b;
	c->sum_cap = n;
	return 0;
}

/* Forward: the block in x->priv (below). */
static uint64_t *kept_sums(const struct kvr_xfer *x);
static uint8_t *kept_has(const struct kvr_xfer *x);

int kvr__xfer_sum_commit(struct kvr_client *c, struct kvr_xfer *x,
			 struct kvr__submit_req *s)
{
	uint32_t n = 0;
	int rc;

	if (c->checksum == KVR_CHECKSUM_OFF || !x->slots)
		return 0;
	if (s->op != KVR_OP_COMMIT_STORE && s->op != KVR_OP_COMMIT_RETRIEVE)
		return 0;
	rc = words_reserve(c, x->nslots);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < x->nslots; i++) {
		const struct kvr_slot *sl = &x->slots[i];

		/* One sum per reservation, in slot order: what the server
		 * holds for this transfer (docs/protocol.md). */
		/* A slot kvr_xfer_fill() wrote has its sum already. */
		if (s->op == KVR_OP_COMMIT_STORE && sl->status == KVR_SLOT_OK)
			c->sum_buf[n++] =
			    x->priv && kept_has(x)[i]
				? kept_sums(x)[i]
				: kvr_sum64(sl->ptr, (size_t)sl->len);
		else if (s->op == KVR_OP_COMMIT_RETRIEVE &&
			 sl->status == KVR_SLOT_CORRUPT)
			c->sum_buf[n++] = sl->off;
	}
	if (n == 0)
		return 0; /* nothing to send: a plain commit */
	s->words = c->sum_buf;
	s->n = n;
	s->flags |=
	    s->op == KVR_OP_COMMIT_STORE ? KVR_REQ_SUMS : KVR_REQ_CORRUPT;
	return 0;
}

/*
 * The sums of a retrieve (or of a store's slots kvr_xfer_fill() wrote),
 * at the start of x->priv (which kvr_xfer_free() frees): nslots u64
 * sums, then nslots bytes saying which slot has one. Under the ring
 * transport that is the whole block; the socket transport reserves
 * kvr__client_sum_room() bytes for them in front of its slot buffers, zeroed.
 */
static uint64_t *kept_sums(const struct kvr_xfer *x)
{
	return x->priv;
}

static uint8_t *kept_has(const struct kvr_xfer *x)
{
	return (uint8_t *)(kept_sums(x) + x->nslots);
}

int kvr__xfer_sum_keep(struct kvr_xfer *x, const struct kvr_slot_desc *sd,
		       const uint64_t *sums, uint32_t n)
{
	uint64_t *ks;
	uint8_t *has;

	if (n != x->nslots)
		return -EINVAL; /* not this retrieve's answer: a bug */
	/* The socket transport reserved the room (kvr__client_sum_room); the
	 * ring transport has nothing else in priv. */
	ks = x->priv;
	if (!ks) {
		ks = malloc((size_t)(n ? n : 1) * (sizeof(*ks) + 1));
		if (!ks)
			return -ENOMEM;
		x->priv = ks;
	}
	has = kept_has(x);
	for (uint32_t i = 0; i < n; i++) {
		/* A slot without the flag was stored without a sum. */
		ks[i] = sums[i];
		has[i] = (sd[i].reserved & KVR_SLOT_F_SUM) != 0;
	}
	return 0;
}

long kvr__xfer_sum_verify(struct kvr_xfer *x, uint32_t *unchecked)
{
	uint32_t bad = 0, none = 0;

	for (uint32_t i = 0; i < x->nslots; i++) {
		struct kvr_slot *sl = &x->slots[i];

		if (sl->status == KVR_SLOT_CORRUPT) {
			bad++; /* sticky: a second verify reads nothing */
			continue;
		}
		if (sl->status != KVR_SLOT_OK)
			continue;
		if (!x->priv || !kept_has(x)[i]) {
			none++;
			continue;
		}
		if (kvr_sum64(sl->ptr, (size_t)sl->len) != kept_sums(x)[i]) {
			sl->status = KVR_SLOT_CORRUPT;
			bad++;
		}
	}
	if (unchecked)
		*unchecked = none;
	return bad;
}

static long do_verify(struct kvr_client *c, struct kvr_xfer *x,
		      uint32_t *unchecked)
{
	long bad;

	if (x->op != KVR_OP_PREPARE_RETRIEVE)
		return kvr__client_fail(
		    c, -EINVAL,
		    "kvr_verify_retrieve on a %s transfer: only "
		    "a prepared retrieve can be verified",
		    kvr_op_name(x->op));
	if (c->checksum == KVR_CHECKSUM_OFF)
		return kvr__client_fail(
		    c, -ENODATA,
		    "kvr_verify_retrieve: this client has no "
		    "checksums (connect with opts.checksum "
		    "KVR_CHECKSUM_ON or $KVRING_CHECKSUM=on)");
	/* A positive count is a success: the slots say which. */
	bad = kvr__xfer_sum_verify(x, unchecked);
	return bad;
}

long kvr_verify_retrieve(struct kvr_client *c, struct kvr_xfer *x,
			 uint32_t *unchecked)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(c, do_verify(c, x, unchecked));
}

/*
 * Whether @fn (kvr_xfer_fill, kvr_retrieve_copy) may use slot @i of @x: a
 * transfer of @op with such a slot, whose status is OK. Else -EINVAL, said:
 * only a prepared @use; a slot not OK ends in @not_ok, or in @corrupt when
 * it failed its checksum.
 */
static int slot_check(struct kvr_client *c, const struct kvr_xfer *x,
		      uint32_t i, uint32_t op, const char *fn, const char *use,
		      const char *not_ok, const char *corrupt)
{
	int st;

	if (x->op != op || !x->slots || i >= x->nslots)
		return kvr__client_fail(c, -EINVAL,
					"%s: slot %u of a %s transfer of %u "
					"slots: only a prepared %s",
					fn, i, kvr_op_name(x->op), x->nslots,
					use);
	st = x->slots[i].status;
	if (st != KVR_SLOT_OK)
		return kvr__client_fail(
		    c, -EINVAL, "%s: slot %u has status %d, not OK%s", fn, i,
		    st, st == KVR_SLOT_CORRUPT ? corrupt : not_ok);
	return 0;
}

static int do_fill(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
		   const void *src)
{
	struct kvr_slot *sl;
	int rc =
	    slot_check(c, x, i, KVR_OP_PREPARE_STORE, "kvr_xfer_fill",
		       "store's slots can be filled",
		       ": nothing to write there", ": nothing to write there");

	if (rc < 0)
		return rc;
	sl = &x->slots[i];
	if (c->checksum == KVR_CHECKSUM_OFF) {
		memcpy(sl->ptr, src, (size_t)sl->len);
		return 0;
	}
	return kvr__xfer_sum_slot_set(
	    c, x, i, kvr_sum64_copy(sl->ptr, src, (size_t)sl->len));
}

int kvr__xfer_sum_slot_set(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
			   uint64_t sum)
{
	/* The ring transport's store has no block yet; the socket's
	 * reserved (and zeroed) its room in front of the buffers. */
	if (!x->priv) {
		x->priv = calloc(x->nslots, sizeof(uint64_t) + 1);
		if (!x->priv)
			return kvr__client_fail(c, -ENOMEM,
						"out of memory for %u "
						"checksums",
						x->nslots);
	}
	kept_sums(x)[i] = sum;
	kept_has(x)[i] = 1;
	return 0;
}

bool kvr__xfer_sum_slot_get(const struct kvr_xfer *x, uint32_t i, uint64_t *sum)
{
	if (!x->priv || i >= x->nslots || !kept_has(x)[i])
		return false;
	*sum = kept_sums(x)[i];
	return true;
}

int kvr_xfer_fill(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
		  const void *src)
{
	if (!c)
		return -EINVAL;
	if (!x || !src)
		return KVR_CLIENT_ARG_FAIL(c, "xfer and src are required");
	return KVR_CLIENT_LOCKED(c, do_fill(c, x, i, src));
}

int kvr_store_fill(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
		   const void *src)
{
	return kvr_xfer_fill(c, x, i, src);
}

static int do_copy(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
		   void *dst)
{
	struct kvr_slot *sl;
	int rc =
	    slot_check(c, x, i, KVR_OP_PREPARE_RETRIEVE, "kvr_retrieve_copy",
		       "retrieve's slots can be copied out", "",
		       ": it failed its checksum, do not use its bytes");

	if (rc < 0)
		return rc;
	sl = &x->slots[i];
	/* VERIFY checked it on arrival; off and unsummed slots have
	 * nothing to check against. */
	if (c->checksum != KVR_CHECKSUM_ON || !x->priv || !kept_has(x)[i]) {
		memcpy(dst, sl->ptr, (size_t)sl->len);
		return 0;
	}
	if (kvr_sum64_copy(dst, sl->ptr, (size_t)sl->len) == kept_sums(x)[i])
		return 0;
	sl->status = KVR_SLOT_CORRUPT;
	return 1;
}

int kvr_retrieve_copy(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
		      void *dst)
{
	if (!c)
		return -EINVAL;
	if (!x || !dst)
		return KVR_CLIENT_ARG_FAIL(c, "xfer and dst are required");
	return KVR_CLIENT_LOCKED(c, do_copy(c, x, i, dst));
}
