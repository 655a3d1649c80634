/* SPDX-License-Identifier: MIT */
/*
 * bench_xfer.c - the store and retrieve scenarios of kvring-bench: bulk
 * throughput of one request (prepare, copy, commit) of N chunks of B bytes
 * through kvring's shared pool, beside
 *   memcpy       the same bytes copied into (store) or out of (retrieve)
 *                the same slot addresses of the worker's own, pre-faulted
 *                mapping of the pool, without any protocol: the ceiling;
 *   kvring_copy  kvring's copy transport (payload over the Unix socket);
 *   zeromq       REQ/REP over ipc:// carrying the same bytes, the child
 *                copying each part into (or out of) its own pre-faulted
 *                pool, like the seed's Python path;
 *   kvring_sum   kvring with per-chunk checksums (KVR_CHECKSUM_VERIFY):
 *                an XXH3-64 of every chunk at commit_store, and every
 *                retrieved chunk checked against it on arrival. Beside
 *                "kvring" it is the cost of checksums;
 *                the retrieve scenario stores through it, so every chunk
 *                all subjects read carries a sum to check;
 *   kvring_sum_fill (store only) kvring_sum filling each slot with
 *                kvr_xfer_fill(), which sums while it copies, in pieces
 *                that stay in cache, instead of memcpy and a hash pass
 *                at commit: the A/B of that way, in the same run;
 *   kvring_sum_copy (retrieve only) a KVR_CHECKSUM_ON client reading
 *                each slot out with kvr_retrieve_copy(), which checks
 *                the sum while it copies, instead of a check pass on
 *                arrival (kvring_sum) and then the copy;
 *   kvring_ahead (store only) kvring with store-ahead
 *                ($KVRING_STORE_AHEAD=1): a one-key store is prepared
 *                from the slot kvringd staged in the last commit's
 *                answer, so it costs one round trip (the commit). With
 *                more chunks per request it is the default path. Its
 *                phases and back-to-back run are reported as for
 *                kvring (kvring_ahead_phases, kvring_ahead_stream).
 * Grid: --sizes (default 256K,2M,8M,32M) x --chunks (default 1,8,64),
 * each request measured alone (p50/p99 per request) and the subjects
 * interleaved request by request, so a VM placement change hits all of
 * them alike. The store scenario also measures the FIRST store of a fresh
 * connection (slots its mapping never touched, after the attach
 * pre-fault, which is reported separately) against a warm one, and
 * splits each timed kvring store into its phases (prepare round trip,
 * copy, commit round trip; p50 of each) so that what a store costs
 * beyond memcpy is named in every run. Then "kvring_stream": kvring
 * stores and memcpy_cold (the same copy into memory not touched for a
 * long time, as a fresh slot is) alternate back to back, without the
 * other subjects and pauses between them, as a worker streaming stores
 * would run; it shows what the protocol costs when neither side's caches
 * were emptied by the other subjects meanwhile. (memcpy into the slots
 * the store just wrote would be no baseline here: they are still in the
 * cache, and that copy runs several times faster than any store.)
 *
 * Every chunk is a copy of one source pattern stamped with its key (first
 * and last word). Retrieves check every stamp, and one request per cell
 * and subject is compared byte for byte; stored data is read back the
 * same way. Wrong data exits 1; slow figures never do.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <kvring/kvring.h>
#include <kvring/parse.h>

#include "bench_common.h"
#include "bench_peers.h"
#include "bench_plot.h"
#include "bench_server.h"

/*
 * kvringd's --spin-us here: long enough that the commit after copying
 * 2 MiB finds the server awake, as a worker streaming requests would;
 * the zeromq child, which shares the server CPU, runs only after it ran
 * out.
 */
#define XFER_SPIN_US 2000u

#define MAX_SIZES  8
#define MAX_CHUNKS 8

enum {
	S_MEMCPY,
	S_KVRING,
	S_COPY,
	S_ZMQ,
	S_MCOLD,
	S_SUM,
	S_SUMF,
	S_SUMC,
	S_AHEAD,
	NR_SUBJ
};
static const char *const subj_name[NR_SUBJ] = {
    "memcpy",	       "kvring",	  "kvring_copy",
    "zeromq",	       "memcpy_cold",	  "kvring_sum",
    "kvring_sum_fill", "kvring_sum_copy", "kvring_ahead"};

/* Subjects of one scenario only. */
static bool subj_in(bool retrieve, int s)
{
	return retrieve ? s != S_SUMF && s != S_AHEAD : s != S_SUMC;
}

/* The subjects whose phases and back-to-back run are reported. */
static bool subj_phased(int s)
{
	return s == S_KVRING || s == S_AHEAD;
}

/*
 * memcpy_cold: the same copy into (or out of) memory this process has not
 * touched for a long time, like a fresh slot, where "memcpy" reuses the
 * last kvring request's slots, still in the caches. A 256 MiB pre-faulted
 * region (8x the L3 here) is walked request by request. It separates what
 * the protocol costs from what a cold destination costs any copy.
 */
#define COLD_BYTES (256ull << 20)

/* Results of one cell (size, chunks) and subject. */
struct cell {
	bool done;
	uint64_t reps;
	double p50, p99, p999; /* ns per request */
	double gbps, ops;
	double ratio_med; /* median per-request memcpy_ns / ns */
	/* store, kvring only: p50 ns of prepare, copy and commit */
	bool phases;
	double phase_p50[3];
	/* store, kvring only: the back-to-back run (kvring_stream) */
	bool stream;
	uint64_t stream_reps;
	double stream_p50, stream_mc_p50, stream_ratio_med, stream_ph[3];
	/* store only: the first store of a fresh connection */
	bool first;
	double first_gbps, first_warm_gbps, attach_ms, prefault_ms;
};

struct xfer_ctx {
	const char *scenario;
	bool retrieve;
	struct bench_run_opts o;
	uint64_t sizes[MAX_SIZES];
	uint32_t chunks[MAX_CHUNKS];
	unsigned nsizes, nchunks;
	uint64_t pool_bytes, max_req;
	struct bench_server srv;
	struct kvr_client *shm, *copy;
	struct kvr_client *sum; /* shm with KVR_CHECKSUM_VERIFY */
	bool fill; /* kv_store fills with kvr_xfer_fill (kvring_sum_fill) */
	struct kvr_client *sum_on; /* KVR_CHECKSUM_ON: kvring_sum_copy */
	struct kvr_client *ahead;  /* store-ahead on: kvring_ahead */
	struct bench_peer *zmq;
	unsigned char *src, *dst; /* one chunk each, pre-faulted */
	unsigned char *cold;	  /* COLD_BYTES, pre-faulted (memcpy_cold) */
	uint64_t cold_off;
	uint64_t key_seq;
	struct cell res[MAX_SIZES][MAX_CHUNKS][NR_SUBJ];
	/* Per-request scratch. */
	struct kvr_key *keys;
	uint64_t *sizesv;
	void **ptrs; /* slot addresses of the last kvring (shm) request */
	struct kvr_key *pkeys; /* and their keys */
};

static int parse_list(const char *s, uint64_t *out, unsigned max, unsigned *n)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	*n = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		/* The one size grammar (lib/parse.c), as kvringd's. */
		if (kvr_parse_size(tok, &v) < 0 || *n == max)
			return -EINVAL;
		out[(*n)++] = v;
	}
	return *n ? 0 : -EINVAL;
}

static struct kvr_key next_key(struct xfer_ctx *x)
{
	return bench_key(x->key_seq++);
}

static int fail(struct xfer_ctx *x, struct kvr_client *c, const char *what,
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
static int wake(struct xfer_ctx *x, struct kvr_client *c)
{
	uint64_t sns;
	int rc = kvr_ping(c, &sns);

	return rc < 0 ? fail(x, c, "ping", rc) : 0;
}

/*
 * A kvring store of @n fresh chunks of @b bytes through client @c; saves
 * the slot addresses in x->ptrs and the keys in x->keys. *ns: the request;
 * @ph (may be NULL): its prepare, copy and commit, in that order.
 */
static int kv_store_ph(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
		       uint32_t n, uint64_t *ns, uint64_t *ph)
{
	struct kvr_xfer xf;
	uint64_t t0, t1, t2;
	int rc;

	for (uint32_t i = 0; i < n; i++) {
		x->keys[i] = next_key(x);
		x->sizesv[i] = b;
	}
	rc = wake(x, c);
	if (rc < 0)
		return rc;
	t0 = kvr_clock_now_ns();
	rc = kvr_prepare_store(c, x->keys, x->sizesv, n, &xf);
	if (rc < 0)
		return fail(x, c, "prepare_store", rc);
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
				return fail(x, c, "store_fill", rc);
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
		return fail(x, c, "commit_store", rc);
	return 0;
}

static int kv_store(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
		    uint32_t n, uint64_t *ns)
{
	return kv_store_ph(x, c, b, n, ns, NULL);
}

/* The ceiling: the same bytes into the last kvring request's slots. */
static int mc_store(struct xfer_ctx *x, uint64_t b, uint32_t n, uint64_t *ns)
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

static int mc_cold_store(struct xfer_ctx *x, uint64_t b, uint32_t n,
			 uint64_t *ns)
{
	uint64_t t0 = kvr_clock_now_ns();

	for (uint32_t i = 0; i < n; i++) {
		unsigned char *d = cold_chunk(x, b);

		if (!d)
			return -EINVAL;
		memcpy(d, x->src, b);
		bench_stamp(d, b, x->pkeys[i]);
	}
	*ns = kvr_clock_now_ns() - t0;
	return 0;
}

static int mc_cold_retrieve(struct xfer_ctx *x, uint64_t b, uint32_t n,
			    uint64_t *ns)
{
	uint64_t t0 = kvr_clock_now_ns();

	for (uint32_t i = 0; i < n; i++) {
		unsigned char *d = cold_chunk(x, b);

		if (!d)
			return -EINVAL;
		memcpy(x->dst, d, b);
	}
	*ns = kvr_clock_now_ns() - t0;
	return 0;
}

/* Retrieve the keys in x->keys through @c into x->dst, checking stamps
 * (and every byte with @full); saves slot addresses for mc_retrieve. */
static int kv_retrieve(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
		       uint32_t n, bool full, uint64_t *ns, const char *what)
{
	struct kvr_xfer xf;
	uint64_t t0;
	int rc, bad = 0;

	rc = wake(x, c);
	if (rc < 0)
		return rc;
	t0 = kvr_clock_now_ns();
	rc = kvr_prepare_retrieve(c, x->keys, n, &xf);
	if (rc < 0)
		return fail(x, c, "prepare_retrieve", rc);
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
		return fail(x, c, "commit_retrieve", rc);
	return 0;
}

/* The ceiling: memcpy out of the same slot addresses (checked too). */
static int mc_retrieve(struct xfer_ctx *x, uint64_t b, uint32_t n, uint64_t *ns)
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

static double gbps_of(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0;
}

static void summarize(struct cell *c, uint64_t *ns, uint64_t reps,
		      uint64_t req_bytes, const uint64_t *mc_ns)
{
	uint64_t total = 0;
	double *r = calloc(reps, sizeof(*r));

	for (uint64_t i = 0; i < reps; i++) {
		total += ns[i];
		if (r)
			r[i] = ns[i] ? (double)mc_ns[i] / (double)ns[i] : 0;
	}
	c->ratio_med = r ? bench_median_f64(r, reps) : 0;
	free(r);
	bench_sort_u64(ns, reps);
	c->done = true;
	c->reps = reps;
	c->p50 = (double)bench_percentile(ns, reps, 50);
	c->p99 = (double)bench_percentile(ns, reps, 99);
	c->p999 = (double)bench_percentile(ns, reps, 99.9);
	c->gbps = gbps_of(req_bytes * reps, total);
	c->ops = total ? (double)reps * 1e9 / (double)total : 0;
}

/* The first store of a fresh connection, then a warm one on it. */
static int first_touch(struct xfer_ctx *x, uint64_t b, uint32_t n,
		       struct cell *c)
{
	struct kvr_client *fresh = NULL;
	const struct kvr_client_info *info;
	uint64_t ns1, ns2;
	int rc;

	rc = bench_client_connect(&x->srv, 0, 50, false, &fresh);
	if (rc < 0)
		return rc;
	info = kvr_client_info(fresh);
	c->attach_ms = (double)info->attach_ns / 1e6;
	c->prefault_ms = (double)info->prefault_ns / 1e6;
	rc = kv_store(x, fresh, b, n, &ns1);
	if (rc == 0)
		rc = kv_store(x, fresh, b, n, &ns2);
	kvr_close(fresh);
	if (rc < 0)
		return rc;
	c->first = true;
	c->first_gbps = gbps_of(b * n, ns1);
	c->first_warm_gbps = gbps_of(b * n, ns2);
	return 0;
}

/* p50 of the @k-th of every 3 entries of @ph, sorted into @tmp. */
static double phase_p50(const uint64_t *ph, int k, uint64_t reps, uint64_t *tmp)
{
	for (uint64_t r = 0; r < reps; r++)
		tmp[r] = ph[3 * r + (uint64_t)k];
	bench_sort_u64(tmp, reps);
	return (double)bench_percentile(tmp, reps, 50);
}

/*
 * kvring_stream: @reps pairs of memcpy_cold and a kvring store, back to
 * back (the wake ping before each store stays, untimed). @kv, @mc and @ph
 * are scratch of reps (3 x reps) entries.
 */
static int run_stream(struct xfer_ctx *x, struct kvr_client *cl, uint64_t b,
		      uint32_t n, uint64_t reps, struct cell *c, uint64_t *kv,
		      uint64_t *mc, uint64_t *ph)
{
	double *r = calloc(reps, sizeof(*r));
	uint64_t w;
	int rc = r ? kv_store(x, cl, b, n, &w) : -ENOMEM;

	for (uint64_t i = 0; rc == 0 && i < reps; i++) {
		rc = mc_cold_store(x, b, n, &mc[i]);
		if (rc == 0)
			rc = kv_store_ph(x, cl, b, n, &kv[i], &ph[3 * i]);
		if (rc == 0)
			r[i] = kv[i] ? (double)mc[i] / (double)kv[i] : 0;
	}
	if (rc == 0) {
		bench_sort_u64(kv, reps);
		c->stream_p50 = (double)bench_percentile(kv, reps, 50);
		c->stream_ratio_med = bench_median_f64(r, reps);
		for (int k = 0; k < 3; k++)
			c->stream_ph[k] = phase_p50(ph, k, reps, kv);
		bench_sort_u64(mc, reps);
		c->stream_mc_p50 = (double)bench_percentile(mc, reps, 50);
		c->stream_reps = reps;
		c->stream = true;
	}
	free(r);
	return rc;
}

static uint64_t reps_for(const struct xfer_ctx *x, uint64_t req)
{
	uint64_t target = x->o.quick ? (64ull << 20) : (1ull << 30);
	uint64_t lo = x->o.quick ? 2 : 3, hi = x->o.quick ? 20 : 200;
	uint64_t r = x->o.iters ? x->o.iters : target / req;

	if (x->o.iters)
		return r;
	return r < lo ? lo : (r > hi ? hi : r);
}

static int run_cell(struct xfer_ctx *x, unsigned si, unsigned ci)
{
	uint64_t b = x->sizes[si], req;
	uint32_t n = x->chunks[ci];
	uint64_t reps, *ns[NR_SUBJ], w, *ph = NULL, *pha = NULL;
	struct cell *res = x->res[si][ci];
	int rc = -ENOMEM;

	req = b * n;
	reps = reps_for(x, req);
	for (int s = 0; s < NR_SUBJ; s++)
		ns[s] = calloc(reps, sizeof(uint64_t));
	for (int s = 0; s < NR_SUBJ; s++)
		if (!ns[s])
			goto out;
	/* The kvring stores' phases, 3 per request. */
	ph = calloc(reps * 3, sizeof(uint64_t));
	pha = calloc(reps * 3, sizeof(uint64_t)); /* kvring_ahead's */
	if (!ph || !pha)
		goto out;

	if (!x->retrieve) {
		/* Warm-up: slots for memcpy, and the first copy-transport
		 * and zeromq buffers. */
		rc = kv_store(x, x->shm, b, n, &w);
		if (rc == 0)
			rc = kv_store(x, x->sum, b, n, &w);
		if (rc == 0) /* the first commit stages a slot */
			rc = kv_store(x, x->ahead, b, n, &w);
		if (rc == 0)
			rc = kv_store(x, x->copy, b, n, &w);
		if (rc == 0 && x->zmq)
			rc =
			    bench_peer_zmq_store(x->zmq, x->src, b, x->keys, n);
		if (rc < 0)
			goto out;
		if (rc == 0)
			rc = kv_store(x, x->shm, b, n, &w);
		for (uint64_t r = 0; rc == 0 && r < reps; r++) {
			/* Let the previous zeromq request's teardown (frees,
			 * unmaps) settle before the ceiling runs. */
			usleep(2000);
			rc = mc_store(x, b, n, &ns[S_MEMCPY][r]);
			if (rc == 0)
				rc = mc_cold_store(x, b, n, &ns[S_MCOLD][r]);
			/* kvring and kvring_ahead take turns going first:
			 * the second finds kvringd's caches warm from the
			 * first (measured: +0.03 of memcpy at 256K x 8, where
			 * both take the same path). */
			if (rc == 0 && r % 2)
				rc = kv_store_ph(x, x->ahead, b, n,
						 &ns[S_AHEAD][r], &pha[3 * r]);
			if (rc == 0)
				rc = kv_store_ph(x, x->shm, b, n,
						 &ns[S_KVRING][r], &ph[3 * r]);
			if (rc == 0 && r % 2 == 0)
				rc = kv_store_ph(x, x->ahead, b, n,
						 &ns[S_AHEAD][r], &pha[3 * r]);
			if (rc == 0)
				rc = kv_store(x, x->sum, b, n, &ns[S_SUM][r]);
			if (rc == 0) {
				x->fill = true;
				rc = kv_store(x, x->sum, b, n, &ns[S_SUMF][r]);
				x->fill = false;
			}
			if (rc == 0)
				rc = kv_store(x, x->copy, b, n, &ns[S_COPY][r]);
			if (rc == 0 && x->zmq) {
				uint64_t t0;

				/* kvringd's spin must not share the CPU. */
				usleep(XFER_SPIN_US + 1000);
				t0 = kvr_clock_now_ns();
				for (uint32_t i = 0; i < n; i++)
					x->keys[i] = next_key(x);
				rc = bench_peer_zmq_store(x->zmq, x->src, b,
							  x->keys, n);
				ns[S_ZMQ][r] = kvr_clock_now_ns() - t0;
				if (rc < 0)
					fail(x, NULL, "zeromq store", rc);
			}
		}
		/* Read back what each path stored last, every byte. */
		if (rc == 0 && x->zmq)
			rc = bench_peer_zmq_retrieve(x->zmq, x->dst, b, x->keys,
						     n, x->src);
		if (rc == 0) {
			rc = kv_store(x, x->copy, b, n, &w);
			if (rc == 0)
				rc = kv_retrieve(x, x->shm, b, n, true, &w,
						 "read back copy store");
		}
		if (rc == 0) {
			rc = kv_store(x, x->shm, b, n, &w);
			if (rc == 0)
				rc = kv_retrieve(x, x->shm, b, n, true, &w,
						 "read back store");
		}
		if (rc == 0) {
			rc = kv_store(x, x->ahead, b, n, &w);
			if (rc == 0)
				rc = kv_retrieve(x, x->shm, b, n, true, &w,
						 "read back store-ahead store");
		}
		/* A summed store, read back verified (every sum checked),
		 * both ways of filling it. */
		if (rc == 0) {
			rc = kv_store(x, x->sum, b, n, &w);
			if (rc == 0)
				rc = kv_retrieve(x, x->sum, b, n, true, &w,
						 "read back summed store");
		}
		if (rc == 0) {
			x->fill = true;
			rc = kv_store(x, x->sum, b, n, &w);
			x->fill = false;
			if (rc == 0)
				rc = kv_retrieve(x, x->sum, b, n, true, &w,
						 "read back filled store");
		}
	} else {
		/* Store the cell's chunks once, with sums (kvring_sum checks
		 * them; the other subjects ignore them); every subject reads
		 * them. */
		rc = kv_store(x, x->sum, b, n, &w);
		if (rc == 0 && x->zmq)
			rc =
			    bench_peer_zmq_store(x->zmq, x->src, b, x->keys, n);
		/* Warm-up requests compare every byte. */
		if (rc == 0)
			rc = kv_retrieve(x, x->shm, b, n, true, &w,
					 "kvring retrieve");
		if (rc == 0)
			rc = kv_retrieve(x, x->copy, b, n, true, &w,
					 "kvring_copy retrieve");
		if (rc == 0)
			rc = kv_retrieve(x, x->sum, b, n, true, &w,
					 "kvring_sum retrieve");
		if (rc == 0)
			rc = kv_retrieve(x, x->sum_on, b, n, true, &w,
					 "kvring_sum_copy retrieve");
		if (rc == 0 && x->zmq)
			rc = bench_peer_zmq_retrieve(x->zmq, x->dst, b, x->keys,
						     n, x->src);
		for (uint64_t r = 0; rc == 0 && r < reps; r++) {
			usleep(2000);
			rc = mc_retrieve(x, b, n, &ns[S_MEMCPY][r]);
			if (rc == 0)
				rc = mc_cold_retrieve(x, b, n, &ns[S_MCOLD][r]);
			if (rc == 0)
				rc = kv_retrieve(x, x->shm, b, n, false,
						 &ns[S_KVRING][r],
						 "kvring retrieve");
			if (rc == 0)
				rc = kv_retrieve(x, x->sum, b, n, false,
						 &ns[S_SUM][r],
						 "kvring_sum retrieve");
			if (rc == 0)
				rc = kv_retrieve(x, x->sum_on, b, n, false,
						 &ns[S_SUMC][r],
						 "kvring_sum_copy retrieve");
			if (rc == 0)
				rc = kv_retrieve(x, x->copy, b, n, false,
						 &ns[S_COPY][r],
						 "kvring_copy retrieve");
			if (rc == 0 && x->zmq) {
				uint64_t t0;

				usleep(XFER_SPIN_US + 1000);
				t0 = kvr_clock_now_ns();
				rc = bench_peer_zmq_retrieve(x->zmq, x->dst, b,
							     x->keys, n, NULL);
				ns[S_ZMQ][r] = kvr_clock_now_ns() - t0;
			}
		}
	}
	if (rc < 0)
		goto out;
	for (int s = 0; s < NR_SUBJ; s++)
		if ((s != S_ZMQ || x->zmq) && subj_in(x->retrieve, s))
			summarize(&res[s], ns[s], reps, req, ns[S_MEMCPY]);
	if (!x->retrieve) {
		/* Each phase's p50 on its own (they need not add up to the
		 * request's p50). ns[] are free for reuse now. */
		for (int k = 0; k < 3; k++) {
			res[S_KVRING].phase_p50[k] =
			    phase_p50(ph, k, reps, ns[S_MEMCPY]);
			res[S_AHEAD].phase_p50[k] =
			    phase_p50(pha, k, reps, ns[S_MEMCPY]);
		}
		res[S_KVRING].phases = true;
		res[S_AHEAD].phases = true;
		rc = run_stream(x, x->shm, b, n, reps, &res[S_KVRING],
				ns[S_KVRING], ns[S_MEMCPY], ph);
		if (rc == 0)
			rc = run_stream(x, x->ahead, b, n, reps, &res[S_AHEAD],
					ns[S_KVRING], ns[S_MEMCPY], ph);
		if (rc < 0)
			goto out;
	}
	/* Fresh connections for the first-touch store (8-ish chunks). */
	if (!x->retrieve && ci == x->nchunks / 2)
		rc = first_touch(x, b, n, &res[S_KVRING]);
out:
	if (rc == -ENOMEM)
		fprintf(stderr, "kvring-bench: %s: out of memory\n",
			x->scenario);
	for (int s = 0; s < NR_SUBJ; s++)
		free(ns[s]);
	free(ph);
	free(pha);
	return rc;
}

/* ---- output -------------------------------------------------------------- */

static void print_header(const struct xfer_ctx *x)
{
	char pb[32];

	if (x->o.json)
		return;
	printf("# kvring-bench %s: cpu_client=%d cpu_server=%d pool=%s "
	       "server_spin_us=%u subjects: memcpy kvring kvring_sum%s "
	       "kvring_copy%s\n",
	       x->scenario, x->o.cpu_client, x->o.cpu_server,
	       bench_fmt_bytes(x->pool_bytes, pb, sizeof(pb)), XFER_SPIN_US,
	       x->retrieve ? " kvring_sum_copy"
			   : " kvring_sum_fill kvring_ahead",
	       x->zmq ? " zeromq" : " (zeromq skipped: built without libzmq)");
	printf("%-6s %6s %-12s %5s %10s %10s %8s %9s %9s %9s\n", "bytes",
	       "chunks", "subject", "reps", "p50_us", "p99_us", "GB/s",
	       "x_memcpy", "x_mc_cold", "x_zeromq");
}

/* The phases and the back-to-back run of subject @s (kvring_phases and
 * kvring_stream for kvring, kvring_ahead_phases and _stream for
 * kvring_ahead). */
static void print_phased(const struct xfer_ctx *x, unsigned si, unsigned ci,
			 int s)
{
	const struct cell *res = x->res[si][ci];
	const struct cell *mc = &res[S_MEMCPY], *mcc = &res[S_MCOLD];
	uint64_t b = x->sizes[si];
	uint32_t n = x->chunks[ci];
	char bs[32], sname[32], pname[32];

	snprintf(sname, sizeof(sname), "%s_stream", subj_name[s]);
	snprintf(pname, sizeof(pname), "%s_phases", subj_name[s]);
	if (res[s].stream && x->o.json) {
		const struct cell *c = &res[s];
		struct bench_json j;

		bench_json_begin(&j, x->scenario, sname);
		bench_json_u64(&j, "bytes", b);
		bench_json_u64(&j, "chunks", n);
		bench_json_u64(&j, "request_bytes", b * n);
		bench_json_u64(&j, "reps", c->stream_reps);
		bench_json_f64(&j, "p50_ns", c->stream_p50);
		bench_json_f64(&j, "memcpy_cold_p50_ns", c->stream_mc_p50);
		bench_json_f64(&j, "ratio_to_memcpy_cold_median",
			       c->stream_ratio_med);
		bench_json_f64(&j, "prepare_p50_ns", c->stream_ph[0]);
		bench_json_f64(&j, "copy_p50_ns", c->stream_ph[1]);
		bench_json_f64(&j, "commit_p50_ns", c->stream_ph[2]);
		bench_json_print(&j, stdout);
	}
	if (res[s].stream && !x->o.json) {
		const struct cell *c = &res[s];

		printf(
		    "%-6s %6u %-12s  p50 us: %s %.1f, memcpy_cold %.1f "
		    "(x memcpy_cold %.3f, median of pairs %.3f); prepare %.2f "
		    "+ copy %.1f + commit %.2f\n",
		    bench_fmt_bytes(b, bs, sizeof(bs)), n, sname, subj_name[s],
		    c->stream_p50 / 1e3, c->stream_mc_p50 / 1e3,
		    c->stream_p50 > 0 ? c->stream_mc_p50 / c->stream_p50 : 0.0,
		    c->stream_ratio_med, c->stream_ph[0] / 1e3,
		    c->stream_ph[1] / 1e3, c->stream_ph[2] / 1e3);
	}
	if (res[s].phases && !x->o.json) {
		const struct cell *c = &res[s];

		printf("%-6s %6u %-12s  p50 us: prepare %.2f + copy %.1f + "
		       "commit %.2f (memcpy %.1f, memcpy_cold %.1f)\n",
		       bench_fmt_bytes(b, bs, sizeof(bs)), n, pname,
		       c->phase_p50[0] / 1e3, c->phase_p50[1] / 1e3,
		       c->phase_p50[2] / 1e3, mc->p50 / 1e3,
		       mcc->done ? mcc->p50 / 1e3 : 0.0);
	}
}

static void print_cell(const struct xfer_ctx *x, unsigned si, unsigned ci)
{
	const struct cell *res = x->res[si][ci];
	const struct cell *mc = &res[S_MEMCPY], *zq = &res[S_ZMQ];
	const struct cell *mcc = &res[S_MCOLD];
	uint64_t b = x->sizes[si];
	uint32_t n = x->chunks[ci];
	char bs[32];

	for (int s = 0; s < NR_SUBJ; s++) {
		const struct cell *c = &res[s];

		if (!c->done)
			continue;
		if (x->o.json) {
			struct bench_json j;

			bench_json_begin(&j, x->scenario, subj_name[s]);
			bench_json_u64(&j, "bytes", b);
			bench_json_u64(&j, "chunks", n);
			bench_json_u64(&j, "workers", 1);
			bench_json_u64(&j, "request_bytes", b * n);
			bench_json_u64(&j, "reps", c->reps);
			bench_json_bool(&j, "first_touch", false);
			bench_json_f64(&j, "p50_ns", c->p50);
			bench_json_f64(&j, "p99_ns", c->p99);
			bench_json_f64(&j, "p999_ns", c->p999);
			bench_json_f64(&j, "gbps", c->gbps);
			bench_json_f64(&j, "ops_per_s", c->ops);
			if (s != S_MEMCPY) {
				bench_json_f64(&j, "ratio_to_memcpy",
					       c->gbps / mc->gbps);
				bench_json_f64(&j, "ratio_to_memcpy_median",
					       c->ratio_med);
			}
			if (s != S_MEMCPY && s != S_MCOLD && mcc->done)
				bench_json_f64(&j, "ratio_to_memcpy_cold",
					       c->gbps / mcc->gbps);
			if (s != S_ZMQ && zq->done)
				bench_json_f64(&j, "ratio_to_zeromq",
					       c->gbps / zq->gbps);
			if (c->phases && subj_phased(s)) {
				bench_json_f64(&j, "prepare_p50_ns",
					       c->phase_p50[0]);
				bench_json_f64(&j, "copy_p50_ns",
					       c->phase_p50[1]);
				bench_json_f64(&j, "commit_p50_ns",
					       c->phase_p50[2]);
			}
			/* The cost of checksums: same run, interleaved. */
			if ((s == S_SUM || s == S_SUMF || s == S_SUMC ||
			     s == S_AHEAD) &&
			    res[S_KVRING].done)
				bench_json_f64(&j, "ratio_to_kvring",
					       c->gbps / res[S_KVRING].gbps);
			bench_json_print(&j, stdout);
		} else {
			char rm[16] = "-", rz[16] = "-", rc[16] = "-";

			if (s != S_MEMCPY)
				snprintf(rm, sizeof(rm), "%.3f",
					 c->gbps / mc->gbps);
			if (s != S_MEMCPY && s != S_MCOLD && mcc->done)
				snprintf(rc, sizeof(rc), "%.3f",
					 c->gbps / mcc->gbps);
			if (s != S_ZMQ && zq->done)
				snprintf(rz, sizeof(rz), "%.2f",
					 c->gbps / zq->gbps);
			printf("%-6s %6u %-12s %5" PRIu64
			       " %10.1f %10.1f %8.2f %9s %9s %9s\n",
			       bench_fmt_bytes(b, bs, sizeof(bs)), n,
			       subj_name[s], c->reps, c->p50 / 1e3,
			       c->p99 / 1e3, c->gbps, rm, rc, rz);
		}
	}
	for (int s = S_KVRING; s < NR_SUBJ; s++)
		if (subj_phased(s))
			print_phased(x, si, ci, s);
	if (res[S_KVRING].first) {
		const struct cell *c = &res[S_KVRING];

		if (x->o.json) {
			struct bench_json j;

			bench_json_begin(&j, x->scenario, "kvring");
			bench_json_u64(&j, "bytes", b);
			bench_json_u64(&j, "chunks", n);
			bench_json_u64(&j, "workers", 1);
			bench_json_u64(&j, "request_bytes", b * n);
			bench_json_u64(&j, "reps", 1);
			bench_json_bool(&j, "first_touch", true);
			bench_json_f64(&j, "gbps", c->first_gbps);
			bench_json_f64(&j, "gbps_second_store",
				       c->first_warm_gbps);
			bench_json_f64(&j, "ratio_to_memcpy",
				       c->first_gbps / mc->gbps);
			if (zq->done)
				bench_json_f64(&j, "ratio_to_zeromq",
					       c->first_gbps / zq->gbps);
			bench_json_f64(&j, "attach_ms", c->attach_ms);
			bench_json_f64(&j, "prefault_ms", c->prefault_ms);
			bench_json_print(&j, stdout);
		} else {
			printf(
			    "%-6s %6u %-12s %5s %10s %10s %8.2f %9.3f %9.3f %9s"
			    "  (first store of a fresh connection; "
			    "second %.2f GB/s; attach %.0f ms of which "
			    "pre-fault %.0f ms)\n",
			    bench_fmt_bytes(b, bs, sizeof(bs)), n,
			    "kvring_first", "1", "-", "-", c->first_gbps,
			    c->first_gbps / mc->gbps,
			    mcc->done ? c->first_gbps / mcc->gbps : 0.0, "-",
			    c->first_warm_gbps, c->attach_ms, c->prefault_ms);
		}
	}
}

static void xfer_plot(const struct xfer_ctx *x)
{
	struct bench_plot_line l[NR_SUBJ + 3];
	double xs[NR_SUBJ + 3][MAX_SIZES], ys[NR_SUBJ + 3][MAX_SIZES];
	char titles[NR_SUBJ + 3][64], name[64], title[128];
	unsigned mid = x->nchunks / 2, nl = 0;

	/* Every subject at the middle chunk count... */
	for (int s = 0; s < NR_SUBJ; s++) {
		if ((s == S_ZMQ && !x->zmq) || !subj_in(x->retrieve, s))
			continue;
		for (unsigned i = 0; i < x->nsizes; i++) {
			xs[nl][i] = (double)x->sizes[i];
			ys[nl][i] = x->res[i][mid][s].gbps;
		}
		snprintf(titles[nl], sizeof(titles[nl]), "%s, %u chunks",
			 subj_name[s], x->chunks[mid]);
		l[nl] = (struct bench_plot_line){titles[nl], xs[nl], ys[nl],
						 x->nsizes, false};
		nl++;
	}
	/* ...kvring at the smallest and largest chunk counts... */
	for (unsigned k = 0; k < x->nchunks; k += x->nchunks - 1) {
		if (k == mid)
			goto next;
		for (unsigned i = 0; i < x->nsizes; i++) {
			xs[nl][i] = (double)x->sizes[i];
			ys[nl][i] = x->res[i][k][S_KVRING].gbps;
		}
		snprintf(titles[nl], sizeof(titles[nl]), "kvring, %u chunks",
			 x->chunks[k]);
		l[nl] = (struct bench_plot_line){titles[nl], xs[nl], ys[nl],
						 x->nsizes, true};
		nl++;
	next:
		if (x->nchunks == 1)
			break;
	}
	/* ...and the first store of a fresh connection. */
	if (!x->retrieve) {
		for (unsigned i = 0; i < x->nsizes; i++) {
			xs[nl][i] = (double)x->sizes[i];
			ys[nl][i] = x->res[i][mid][S_KVRING].first_gbps;
		}
		snprintf(titles[nl], sizeof(titles[nl]),
			 "kvring first store, %u chunks", x->chunks[mid]);
		l[nl] = (struct bench_plot_line){titles[nl], xs[nl], ys[nl],
						 x->nsizes, true};
		nl++;
	}
	snprintf(name, sizeof(name), "%s_gbps", x->scenario);
	snprintf(title, sizeof(title),
		 "%s throughput per request (prepare, copy, commit) vs chunk "
		 "size",
		 x->scenario);
	bench_plot_lines(x->o.plot_dir, name, title, "chunk size (bytes)",
			 "GB/s", l, nl);
}

/* ---- entry ----------------------------------------------------------------
 */

/* The kvring_sum subject's client: x->shm's options plus checksums. */
static int connect_sum(struct xfer_ctx *x)
{
	struct kvr_client_opts co;
	char err[256] = "";
	int rc;

	bench_client_opts(&x->srv, &co);
	co.spin_us = 50;
	co.checksum = KVR_CHECKSUM_VERIFY;
	rc = kvr_connect(&co, &x->sum, err, sizeof(err));
	co.checksum = KVR_CHECKSUM_ON;
	if (rc == 0)
		rc = kvr_connect(&co, &x->sum_on, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr,
			"kvring-bench: %s: connect with checksums: %s\n",
			x->scenario, err);
		return rc;
	}
	/* kvring_ahead: store-ahead is asked for by the environment at
	 * connect (docs/config.md), so only this client has it. */
	co.checksum = 0;
	setenv("KVRING_STORE_AHEAD", "1", 1);
	rc = kvr_connect(&co, &x->ahead, err, sizeof(err));
	unsetenv("KVRING_STORE_AHEAD");
	if (rc < 0)
		fprintf(stderr,
			"kvring-bench: %s: connect with store-ahead: %s\n",
			x->scenario, err);
	return rc;
}

static int xfer_main(int argc, char **argv, bool retrieve)
{
	struct xfer_ctx *x = calloc(1, sizeof(*x));
	uint64_t list[MAX_CHUNKS], max_b = 0;
	unsigned n;
	int rc, ret = BENCH_EXIT_ERR;

	if (!x)
		return BENCH_EXIT_ERR;
	x->scenario = retrieve ? "retrieve" : "store";
	x->retrieve = retrieve;
	rc = bench_run_opts_parse(
	    argc, argv, x->scenario,
	    "  --sizes LIST        chunk sizes (default 256K,2M,8M,32M)\n"
	    "  --chunks LIST       chunks per request (default 1,8,64)\n"
	    "  --iters N           requests per cell and subject (default: "
	    "1 GiB worth,\n"
	    "                      3..200)\n"
	    "  a cell is skipped when chunks x size exceeds the pool less "
	    "64 MiB;\n"
	    "  the default pool (1 GiB + 128 MiB) skips 64 x 32M: add "
	    "--pool-size 2176M\n",
	    &x->o);
	if (rc) {
		free(x);
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	}
	if (parse_list(x->o.sizes
			   ? x->o.sizes
			   : (x->o.quick ? "256K,2M,32M" : "256K,2M,8M,32M"),
		       x->sizes, MAX_SIZES, &x->nsizes) < 0 ||
	    parse_list(x->o.chunks ? x->o.chunks
				   : (x->o.quick ? "1,8" : "1,8,64"),
		       list, MAX_CHUNKS, &n) < 0) {
		fprintf(stderr, "kvring-bench: %s: bad --sizes or --chunks\n",
			x->scenario);
		free(x);
		return BENCH_EXIT_USAGE;
	}
	x->nchunks = n;
	for (unsigned i = 0; i < n; i++) {
		if (list[i] > 1024 || x->sizes[0] < 16) {
			fprintf(stderr,
				"kvring-bench: %s: chunks 1..1024, "
				"sizes >= 16\n",
				x->scenario);
			free(x);
			return BENCH_EXIT_USAGE;
		}
		x->chunks[i] = (uint32_t)list[i];
	}
	for (unsigned i = 0; i < x->nsizes; i++) {
		if (x->sizes[i] > max_b)
			max_b = x->sizes[i];
		for (unsigned k = 0; k < x->nchunks; k++)
			if (x->sizes[i] * x->chunks[k] > x->max_req)
				x->max_req = x->sizes[i] * x->chunks[k];
	}
	/* Default pool: the largest request up to 1 GiB (so 64 x 32 MiB
	 * runs only with --pool-size >= 2112M: it alone takes minutes
	 * through the slow peers), plus room. */
	x->pool_bytes =
	    x->o.pool_bytes
		? x->o.pool_bytes
		: (x->max_req < (1ull << 30) ? x->max_req : (1ull << 30)) +
		      (128ull << 20);
	if (x->max_req + (64ull << 20) > x->pool_bytes)
		x->max_req = x->pool_bytes > (128ull << 20)
				 ? x->pool_bytes - (64ull << 20)
				 : x->pool_bytes / 2;

	bench_clock_init();
	if (bench_pin_cpu(x->o.cpu_client) < 0)
		fprintf(stderr, "kvring-bench: %s: cannot pin to cpu %d\n",
			x->scenario, x->o.cpu_client);
	x->src = aligned_alloc(4096, (max_b + 4095) & ~4095ull);
	x->dst = aligned_alloc(4096, (max_b + 4095) & ~4095ull);
	x->cold = bench_shm_map(COLD_BYTES);
	x->keys = calloc(1024, sizeof(*x->keys));
	x->sizesv = calloc(1024, sizeof(*x->sizesv));
	x->ptrs = calloc(1024, sizeof(*x->ptrs));
	x->pkeys = calloc(1024, sizeof(*x->pkeys));
	if (!x->src || !x->dst || !x->cold || !x->keys || !x->sizesv ||
	    !x->ptrs || !x->pkeys) {
		fprintf(stderr, "kvring-bench: %s: out of memory\n",
			x->scenario);
		goto out;
	}
	for (uint64_t i = 0; i < max_b; i++)
		x->src[i] = (unsigned char)(i * 131u + (i >> 12) + 7u);
	memset(x->dst, 0, max_b);

	if (bench_peer_built(BENCH_PEER_ZMQ) &&
	    bench_peer_start(BENCH_PEER_ZMQ, x->o.cpu_server, x->max_req,
			     &x->zmq) < 0) {
		fprintf(stderr,
			"kvring-bench: %s: zeromq peer failed to "
			"start\n",
			x->scenario);
		goto out;
	}
	if (bench_server_start(&x->o, x->pool_bytes, XFER_SPIN_US, 8, &x->srv) <
		0 ||
	    bench_client_connect(&x->srv, 0, 50, false, &x->shm) < 0 ||
	    bench_client_connect(&x->srv, KVR_TRANSPORT_COPY, 50, false,
				 &x->copy) < 0 ||
	    connect_sum(x) < 0)
		goto out;
	print_header(x);
	for (unsigned si = 0; si < x->nsizes; si++) {
		for (unsigned ci = 0; ci < x->nchunks; ci++) {
			uint64_t req = x->sizes[si] * x->chunks[ci];

			if (req + (64ull << 20) > x->pool_bytes)
				continue;
			if (run_cell(x, si, ci) < 0)
				goto out;
			print_cell(x, si, ci);
		}
	}
	if (x->o.plot_dir)
		xfer_plot(x);
	ret = BENCH_EXIT_OK;
out:
	kvr_close(x->shm);
	kvr_close(x->sum);
	kvr_close(x->sum_on);
	kvr_close(x->ahead);
	kvr_close(x->copy);
	bench_server_stop(&x->srv);
	bench_peer_stop(x->zmq);
	free(x->src);
	free(x->dst);
	bench_shm_unmap(x->cold, COLD_BYTES);
	free(x->keys);
	free(x->sizesv);
	free(x->ptrs);
	free(x->pkeys);
	free(x);
	return ret;
}

int bench_store_main(int argc, char **argv)
{
	return xfer_main(argc, argv, false);
}

int bench_retrieve_main(int argc, char **argv)
{
	return xfer_main(argc, argv, true);
}
