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
#include <unistd.h>

#include <kvring/kvring.h>
#include <kvring/parse.h>

#include "bench_common.h"
#include "bench_xfer.h"
#include "bench_peers.h"
#include "bench_plot.h"
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
	rc = bench_xfer_kv_store(x, fresh, b, n, &ns1);
	if (rc == 0)
		rc = bench_xfer_kv_store(x, fresh, b, n, &ns2);
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
 * back (the bench_xfer_wake ping before each store stays, untimed). @kv, @mc
 * and @ph are scratch of reps (3 x reps) entries.
 */
static int run_stream(struct xfer_ctx *x, struct kvr_client *cl, uint64_t b,
		      uint32_t n, uint64_t reps, struct cell *c, uint64_t *kv,
		      uint64_t *mc, uint64_t *ph)
{
	double *r = calloc(reps, sizeof(*r));
	uint64_t w;
	int rc = r ? bench_xfer_kv_store(x, cl, b, n, &w) : -ENOMEM;

	for (uint64_t i = 0; rc == 0 && i < reps; i++) {
		rc = bench_xfer_mc_cold(x, b, n, &mc[i]);
		if (rc == 0)
			rc = bench_xfer_kv_store_ph(x, cl, b, n, &kv[i],
						    &ph[3 * i]);
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

/*
 * The store scenario's warm-up of a cell: slots for memcpy, and the first
 * copy-transport and zeromq buffers. 0 or -errno.
 */
static int store_warm(struct xfer_ctx *x, uint64_t b, uint32_t n)
{
	uint64_t w;
	int rc;

	/* Warm-up: slots for memcpy, and the first copy-transport
	 * and zeromq buffers. */
	rc = bench_xfer_kv_store(x, x->shm, b, n, &w);
	if (rc == 0)
		rc = bench_xfer_kv_store(x, x->sum, b, n, &w);
	if (rc == 0) /* the first commit stages a slot */
		rc = bench_xfer_kv_store(x, x->ahead, b, n, &w);
	if (rc == 0)
		rc = bench_xfer_kv_store(x, x->copy, b, n, &w);
	if (rc == 0 && x->zmq)
		rc = bench_peer_zmq_store(x->zmq, x->src, b, x->keys, n);
	if (rc < 0)
		return rc;
	if (rc == 0)
		rc = bench_xfer_kv_store(x, x->shm, b, n, &w);
	return rc;
}

/*
 * Round @r of a store cell: every subject once, interleaved, into
 * ns[subject][r]; the kvring stores' phases into ph and pha (3 per
 * round). 0 or -errno.
 */
static int store_round(struct xfer_ctx *x, uint64_t b, uint32_t n, uint64_t r,
		       uint64_t **ns, uint64_t *ph, uint64_t *pha)
{
	int rc;

	/* Let the previous zeromq request's teardown (frees,
	 * unmaps) settle before the ceiling runs. */
	usleep(2000);
	rc = bench_xfer_mc_store(x, b, n, &ns[S_MEMCPY][r]);
	if (rc == 0)
		rc = bench_xfer_mc_cold(x, b, n, &ns[S_MCOLD][r]);
	/* kvring and kvring_ahead take turns going first:
	 * the second finds kvringd's caches warm from the
	 * first (measured: +0.03 of memcpy at 256K x 8, where
	 * both take the same path). */
	if (rc == 0 && r % 2)
		rc = bench_xfer_kv_store_ph(x, x->ahead, b, n, &ns[S_AHEAD][r],
					    &pha[3 * r]);
	if (rc == 0)
		rc = bench_xfer_kv_store_ph(x, x->shm, b, n, &ns[S_KVRING][r],
					    &ph[3 * r]);
	if (rc == 0 && r % 2 == 0)
		rc = bench_xfer_kv_store_ph(x, x->ahead, b, n, &ns[S_AHEAD][r],
					    &pha[3 * r]);
	if (rc == 0)
		rc = bench_xfer_kv_store(x, x->sum, b, n, &ns[S_SUM][r]);
	if (rc == 0) {
		x->fill = true;
		rc = bench_xfer_kv_store(x, x->sum, b, n, &ns[S_SUMF][r]);
		x->fill = false;
	}
	if (rc == 0)
		rc = bench_xfer_kv_store(x, x->copy, b, n, &ns[S_COPY][r]);
	if (rc == 0 && x->zmq) {
		uint64_t t0;

		/* kvringd's spin must not share the CPU. */
		usleep(XFER_SPIN_US + 1000);
		t0 = kvr_clock_now_ns();
		for (uint32_t i = 0; i < n; i++)
			x->keys[i] = bench_xfer_next_key(x);
		rc = bench_peer_zmq_store(x->zmq, x->src, b, x->keys, n);
		ns[S_ZMQ][r] = kvr_clock_now_ns() - t0;
		if (rc < 0)
			bench_xfer_fail(x, NULL, "zeromq store", rc);
	}
	return rc;
}

/* Read back what each path of a store cell stored last, every byte. */
static int store_read_back(struct xfer_ctx *x, uint64_t b, uint32_t n)
{
	uint64_t w;
	int rc = 0;

	if (x->zmq)
		rc = bench_peer_zmq_retrieve(x->zmq, x->dst, b, x->keys, n,
					     x->src);
	if (rc == 0) {
		rc = bench_xfer_kv_store(x, x->copy, b, n, &w);
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->shm, b, n, true, &w,
						    "read back copy store");
	}
	if (rc == 0) {
		rc = bench_xfer_kv_store(x, x->shm, b, n, &w);
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->shm, b, n, true, &w,
						    "read back store");
	}
	if (rc == 0) {
		rc = bench_xfer_kv_store(x, x->ahead, b, n, &w);
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(
			    x, x->shm, b, n, true, &w,
			    "read back store-ahead store");
	}
	/* A summed store, read back verified (every sum checked),
	 * both ways of filling it. */
	if (rc == 0) {
		rc = bench_xfer_kv_store(x, x->sum, b, n, &w);
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->sum, b, n, true, &w,
						    "read back summed store");
	}
	if (rc == 0) {
		x->fill = true;
		rc = bench_xfer_kv_store(x, x->sum, b, n, &w);
		x->fill = false;
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->sum, b, n, true, &w,
						    "read back filled store");
	}
	return rc;
}

/*
 * A retrieve cell: the chunks stored once, with sums (kvring_sum checks
 * them; the other subjects ignore them), read by every subject, warm-up
 * requests byte for byte, then @reps interleaved rounds into ns[][r].
 */
static int retrieve_rounds(struct xfer_ctx *x, uint64_t b, uint32_t n,
			   uint64_t reps, uint64_t **ns)
{
	uint64_t w;
	int rc;

	/* Store the cell's chunks once, with sums (kvring_sum checks
	 * them; the other subjects ignore them); every subject reads
	 * them. */
	rc = bench_xfer_kv_store(x, x->sum, b, n, &w);
	if (rc == 0 && x->zmq)
		rc = bench_peer_zmq_store(x->zmq, x->src, b, x->keys, n);
	/* Warm-up requests compare every byte. */
	if (rc == 0)
		rc = bench_xfer_kv_retrieve(x, x->shm, b, n, true, &w,
					    "kvring retrieve");
	if (rc == 0)
		rc = bench_xfer_kv_retrieve(x, x->copy, b, n, true, &w,
					    "kvring_copy retrieve");
	if (rc == 0)
		rc = bench_xfer_kv_retrieve(x, x->sum, b, n, true, &w,
					    "kvring_sum retrieve");
	if (rc == 0)
		rc = bench_xfer_kv_retrieve(x, x->sum_on, b, n, true, &w,
					    "kvring_sum_copy retrieve");
	if (rc == 0 && x->zmq)
		rc = bench_peer_zmq_retrieve(x->zmq, x->dst, b, x->keys, n,
					     x->src);
	for (uint64_t r = 0; rc == 0 && r < reps; r++) {
		usleep(2000);
		rc = bench_xfer_mc_retrieve(x, b, n, &ns[S_MEMCPY][r]);
		if (rc == 0)
			rc = bench_xfer_mc_cold(x, b, n, &ns[S_MCOLD][r]);
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->shm, b, n, false,
						    &ns[S_KVRING][r],
						    "kvring retrieve");
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->sum, b, n, false,
						    &ns[S_SUM][r],
						    "kvring_sum retrieve");
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->sum_on, b, n, false,
						    &ns[S_SUMC][r],
						    "kvring_sum_copy retrieve");
		if (rc == 0)
			rc = bench_xfer_kv_retrieve(x, x->copy, b, n, false,
						    &ns[S_COPY][r],
						    "kvring_copy retrieve");
		if (rc == 0 && x->zmq) {
			uint64_t t0;

			usleep(XFER_SPIN_US + 1000);
			t0 = kvr_clock_now_ns();
			rc = bench_peer_zmq_retrieve(x->zmq, x->dst, b, x->keys,
						     n, NULL);
			ns[S_ZMQ][r] = kvr_clock_now_ns() - t0;
		}
	}
	return rc;
}

static int run_cell(struct xfer_ctx *x, unsigned si, unsigned ci)
{
	uint64_t b = x->sizes[si], req;
	uint32_t n = x->chunks[ci];
	uint64_t reps, *ns[NR_SUBJ], *ph = NULL, *pha = NULL;
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
		rc = store_warm(x, b, n);
		for (uint64_t r = 0; rc == 0 && r < reps; r++)
			rc = store_round(x, b, n, r, ns, ph, pha);
		if (rc == 0)
			rc = store_read_back(x, b, n);
	} else {
		rc = retrieve_rounds(x, b, n, reps, ns);
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

/*
 * The grid of --sizes x --chunks (the --quick one by default), the largest
 * chunk in *max_b, and the pool: the largest request up to 1 GiB plus
 * room, unless --pool-size says. 0, or -EINVAL with the reason on stderr.
 */
static int xfer_grid(struct xfer_ctx *x, uint64_t *max_b)
{
	uint64_t list[MAX_CHUNKS];
	unsigned n;

	if (parse_list(x->o.sizes
			   ? x->o.sizes
			   : (x->o.quick ? "256K,2M,32M" : "256K,2M,8M,32M"),
		       x->sizes, MAX_SIZES, &x->nsizes) < 0 ||
	    parse_list(x->o.chunks ? x->o.chunks
				   : (x->o.quick ? "1,8" : "1,8,64"),
		       list, MAX_CHUNKS, &n) < 0) {
		fprintf(stderr, "kvring-bench: %s: bad --sizes or --chunks\n",
			x->scenario);
		return -EINVAL;
	}
	x->nchunks = n;
	for (unsigned i = 0; i < n; i++) {
		if (list[i] > 1024 || x->sizes[0] < 16) {
			fprintf(stderr,
				"kvring-bench: %s: chunks 1..1024, "
				"sizes >= 16\n",
				x->scenario);
			return -EINVAL;
		}
		x->chunks[i] = (uint32_t)list[i];
	}
	for (unsigned i = 0; i < x->nsizes; i++) {
		if (x->sizes[i] > *max_b)
			*max_b = x->sizes[i];
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
	return 0;
}

static int xfer_main(int argc, char **argv, bool retrieve)
{
	struct xfer_ctx *x = calloc(1, sizeof(*x));
	uint64_t max_b = 0;
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
	if (xfer_grid(x, &max_b) < 0) {
		free(x);
		return BENCH_EXIT_USAGE;
	}
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
	bench_xfer_print_header(x);
	for (unsigned si = 0; si < x->nsizes; si++) {
		for (unsigned ci = 0; ci < x->nchunks; ci++) {
			uint64_t req = x->sizes[si] * x->chunks[ci];

			if (req + (64ull << 20) > x->pool_bytes)
				continue;
			if (run_cell(x, si, ci) < 0)
				goto out;
			bench_xfer_print_cell(x, si, ci);
		}
	}
	if (x->o.plot_dir)
		bench_xfer_plot(x);
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
