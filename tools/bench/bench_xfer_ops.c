/* SPDX-License-Identifier: MIT */
/*
 * bench_xfer_ops.c - one timed request of each subject of the store and
 * retrieve scenarios (kvring through any of its clients, memcpy into the
 * same slots, memcpy into cold memory, zeromq), each stamping or checking
 * every chunk; bench_xfer.c runs them cell by cell.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/kvring.h>

#include "bench_common.h"
#include "bench_peers.h"
#include "bench_stamp.h"
#include "bench_xfer.h"

struct kvr_key bench_xfer_next_key(struct xfer_ctx *x)
{
	return bench_key(x->key_seq++);
}

int bench_xfer_fail(struct xfer_ctx *x, struct kvr_client *c, const char *what,
		    int rc)
{
	fprintf(stderr, "kvring-bench: %s: %s: %s (%s)\n", x->scenario, what,
		strerror(-rc), c ? kvr_client_errmsg(c) : "");
	return rc;
}

/* ---- one request per subject ------------------------------------------ */

/*
 * An untimed ping before each timed request: kvringd sleeps after 50 us
 * without work, and while the other subjects run it does; a worker that
 * streams requests finds it awake, and that is what is measured.
 */
int bench_xfer_wake(struct xfer_ctx *x, struct kvr_client *c)
{
	uint64_t sns;
	int rc = kvr_ping(c, &sns);

	return rc < 0 ? bench_xfer_fail(x, c, "ping", rc) : 0;
}

/*
 * A kvring store of @n fresh chunks of @b bytes through client @c; saves
 * the slot addresses in x->ptrs and the keys in x->keys. *ns: the request;
 * @ph (may be NULL): its prepare, copy and commit, in that order.
 */
int bench_xfer_kv_store_ph(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
			   uint32_t n, uint64_t *ns, uint64_t *ph)
{
	struct kvr_xfer xf;
	uint64_t t0, t1, t2;
	int rc;

	for (uint32_t i = 0; i < n; i++) {
		x->keys[i] = bench_xfer_next_key(x);
		x->sizesv[i] = b;
	}
	rc = bench_xfer_wake(x, c);
	if (rc < 0)
		return rc;
	t0 = kvr_clock_now_ns();
	rc = kvr_prepare_store(c, x->keys, x->sizesv, n, &xf);
	if (rc < 0)
		return bench_xfer_fail(x, c, "prepare_store", rc);
	t1 = kvr_clock_now_ns();
	for (uint32_t i = 0; i < xf.nslots; i++) {
		struct kvr_slot *s = &xf.slots[i];

		if (s->status != KVR_SLOT_OK || s->len != b) {
			fprintf(stderr,
				"kvring-bench: %s: slot %u of %u: "
				"status %d len %" PRIu64 " (pool too small "
				"for %u x %" PRIu64 "?)\n",
				x->scenario, i, n, s->status, s->len, n, b);
			kvr_abort_store(c, &xf);
			return -ENOSPC;
		}
		if (x->fill) {
			/* The stamp goes into the source: a filled slot is
			 * not written again (its sum is already made). */
			bench_stamp(x->src, b, x->keys[i]);
			rc = kvr_xfer_fill(c, &xf, i, x->src);
			if (rc < 0) {
				kvr_abort_store(c, &xf);
				return bench_xfer_fail(x, c, "store_fill", rc);
			}
		} else {
			memcpy(s->ptr, x->src, b);
			bench_stamp(s->ptr, b, x->keys[i]);
		}
		/* Pool addresses only: copy-transport buffers die at commit. */
		if (c == x->shm) {
			x->ptrs[i] = s->ptr;
			x->pkeys[i] = x->keys[i];
		}
	}
	t2 = kvr_clock_now_ns();
	rc = kvr_commit_store(c, &xf);
	*ns = kvr_clock_now_ns() - t0;
	if (ph) {
		ph[0] = t1 - t0;
		ph[1] = t2 - t1;
		ph[2] = t0 + *ns - t2;
	}
	if (rc < 0)
		return bench_xfer_fail(x, c, "commit_store", rc);
	return 0;
}

int bench_xfer_kv_store(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
			uint32_t n, uint64_t *ns)
{
	return bench_xfer_kv_store_ph(x, c, b, n, ns, NULL);
}

/* The ceiling: the same bytes into the last kvring request's slots. */
int bench_xfer_mc_store(struct xfer_ctx *x, uint64_t b, uint32_t n,
			uint64_t *ns)
{
	uint64_t t0 = kvr_clock_now_ns();

	/* Same bytes and stamps as the store that made these slots. */
	for (uint32_t i = 0; i < n; i++) {
		memcpy(x->ptrs[i], x->src, b);
		bench_stamp(x->ptrs[i], b, x->pkeys[i]);
	}
	*ns = kvr_clock_now_ns() - t0;
	return 0;
}

/*
 * The next cold span of @b bytes (one chunk): the region is walked chunk
 * by chunk and wraps, so a request larger than the region reuses it from
 * the start (by then it is far past any cache). NULL if one chunk alone
 * is larger than the region (the subject is then skipped).
 */
static unsigned char *cold_chunk(struct xfer_ctx *x, uint64_t b)
{
	uint64_t step = (b + 4095) & ~4095ull;

	if (step > COLD_BYTES)
		return NULL;
	if (x->cold_off + step > COLD_BYTES)
		x->cold_off = 0;
	x->cold_off += step;
	return x->cold + x->cold_off - step;
}

int bench_xfer_mc_cold(struct xfer_ctx *x, uint64_t b, uint32_t n, uint64_t *ns)
{
	uint64_t t0 = kvr_clock_now_ns();

	for (uint32_t i = 0; i < n; i++) {
		unsigned char *d = cold_chunk(x, b);

		if (!d)
			return -EINVAL;
		if (x->retrieve) {
			memcpy(x->dst, d, b);
		} else {
			memcpy(d, x->src, b);
			bench_stamp(d, b, x->pkeys[i]);
		}
	}
	*ns = kvr_clock_now_ns() - t0;
	return 0;
}

/* Retrieve the keys in x->keys through @c into x->dst, checking stamps
 * (and every byte with @full); saves slot addresses for bench_xfer_mc_retrieve.
 */
int bench_xfer_kv_retrieve(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
			   uint32_t n, bool full, uint64_t *ns,
			   const char *what)
{
	struct kvr_xfer xf;
	uint64_t t0;
	int rc, bad = 0;

	rc = bench_xfer_wake(x, c);
	if (rc < 0)
		return rc;
	t0 = kvr_clock_now_ns();
	rc = kvr_prepare_retrieve(c, x->keys, n, &xf);
	if (rc < 0)
		return bench_xfer_fail(x, c, "prepare_retrieve", rc);
	if (xf.nslots != n) {
		fprintf(stderr,
			"kvring-bench: %s: %s: %u of %u chunks "
			"found\n",
			x->scenario, what, xf.nslots, n);
		kvr_commit_retrieve(c, &xf);
		return -EBADMSG;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_slot *s = &xf.slots[i];

		if (s->status != KVR_SLOT_OK || s->len != b) {
			bad = -EBADMSG;
			break;
		}
		if (c == x->sum_on) {
			/* Checked while copied; 1: it failed its sum. */
			if (kvr_retrieve_copy(c, &xf, i, x->dst) != 0) {
				fprintf(stderr,
					"kvring-bench: %s: %s: chunk %u "
					"fails its checksum\n",
					x->scenario, what, i);
				bad = -EBADMSG;
				break;
			}
		} else {
			memcpy(x->dst, s->ptr, b);
		}
		if (c == x->shm)
			x->ptrs[i] = s->ptr;
		if (!bad)
			bad = bench_check(x->dst, b, x->keys[i],
					  full ? x->src : NULL, what);
	}
	rc = kvr_commit_retrieve(c, &xf);
	*ns = kvr_clock_now_ns() - t0;
	if (bad)
		return bad;
	if (rc < 0)
		return bench_xfer_fail(x, c, "commit_retrieve", rc);
	return 0;
}

/* The ceiling: memcpy out of the same slot addresses (checked too). */
int bench_xfer_mc_retrieve(struct xfer_ctx *x, uint64_t b, uint32_t n,
			   uint64_t *ns)
{
	uint64_t t0 = kvr_clock_now_ns();
	int bad = 0;

	for (uint32_t i = 0; i < n; i++) {
		memcpy(x->dst, x->ptrs[i], b);
		if (!bad)
			bad = bench_check(x->dst, b, x->keys[i], NULL,
					  "memcpy retrieve");
	}
	*ns = kvr_clock_now_ns() - t0;
	return bad;
}

/* ---- one cell ------------------------------------------------------------ */
