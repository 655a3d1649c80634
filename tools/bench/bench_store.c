/* SPDX-License-Identifier: MIT */
/*
 * bench_store.c - kvring-bench scenario "engine": the storage engine of
 * kvringd (server/store*.c) driven in-process, without rings, sockets or a
 * pool mapping, to show what one event-loop thread can do per second.
 *
 * It measures three request pairs/kinds, each timed per request with
 * CLOCK_MONOTONIC (so the numbers include ~20-40 ns of clock reads):
 *   store     prepare_store + commit_store of `batch` new keys
 *   lookup    lookup of `batch` resident keys (no pin)
 *   retrieve  prepare_retrieve + commit_retrieve of `batch` resident keys
 * The pool is only arithmetic here (nothing is mapped), so a 64 GiB pool
 * costs nothing; with more keys than fit, the store phase runs in steady
 * state with LRU eviction. It checks what it reads (hits and slot lengths)
 * and returns 1 when the engine answers wrongly, never because it is slow.
 *
 * Entry point: kvr_bench_store(argc, argv), called by kvring-bench's main
 * with argv[0] = the scenario name. It does not own main() or any other
 * scenario.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/clock.h>
#include <kvring/store.h>

#include "bench_common.h"

int kvr_bench_store(int argc, char **argv);

/* What one phase measured. */
struct bench_result {
	const char *op;
	uint64_t reqs;
	uint64_t keys;
	double secs;
	uint64_t p50_ns, p99_ns, max_ns;
};

struct bench_opts {
	uint64_t pool_bytes;
	uint64_t chunk_bytes;
	uint64_t keys;
	uint32_t batch;
	bool json;
};

static const struct option longopts[] = {
    {"pool-bytes", required_argument, NULL, 'p'},
    {"chunk-bytes", required_argument, NULL, 'c'},
    {"keys", required_argument, NULL, 'k'},
    {"batch", required_argument, NULL, 'b'},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: kvring-bench engine [--pool-bytes N] [--chunk-bytes N]\n"
	       "                           [--keys N] [--batch N] [--json]\n"
	       "  in-process kvringd storage engine: store / lookup / "
	       "retrieve pairs per second\n"
	       "  --pool-bytes N   pool size (default 64 GiB; nothing is "
	       "mapped)\n"
	       "  --chunk-bytes N  object size (default 262144)\n"
	       "  --keys N         keys stored (default 1048576)\n"
	       "  --batch N        keys per request (default 16)\n"
	       "  --json           one JSON object per line\n");
}

static void summarise(struct bench_result *r, uint64_t *lat, uint64_t n,
		      uint64_t t0, uint64_t t1)
{
	bench_sort_u64(lat, n);
	r->reqs = n;
	r->secs = (double)(t1 - t0) / 1e9;
	r->p50_ns = n ? lat[n / 2] : 0;
	r->p99_ns = n ? lat[n - 1 - n / 100] : 0;
	r->max_ns = n ? lat[n - 1] : 0;
}

static void print_result(const struct bench_opts *o,
			 const struct bench_result *r)
{
	double ops = r->secs > 0 ? (double)r->reqs / r->secs : 0;
	double kps = r->secs > 0 ? (double)r->keys / r->secs : 0;

	if (o->json) {
		/* Its own shape (no "schema"), kept as it always was. */
		struct kvr_em e;

		kvr_em_init(&e, stdout, true);
		kvr_em_str(&e, "scenario", "engine");
		kvr_em_str(&e, "subject", "kvring");
		kvr_em_str(&e, "op", r->op);
		kvr_em_u64(&e, "batch", o->batch);
		kvr_em_u64(&e, "chunk_bytes", o->chunk_bytes);
		kvr_em_u64(&e, "requests", r->reqs);
		kvr_em_fixed(&e, "ops_per_s", ops, 0);
		kvr_em_fixed(&e, "keys_per_s", kps, 0);
		kvr_em_u64(&e, "p50_ns", r->p50_ns);
		kvr_em_u64(&e, "p99_ns", r->p99_ns);
		kvr_em_u64(&e, "max_ns", r->max_ns);
		kvr_em_finish(&e);
	} else {
		printf("%-9s %10llu %14.0f %14.0f %9llu %9llu %9llu\n", r->op,
		       (unsigned long long)r->reqs, ops, kps,
		       (unsigned long long)r->p50_ns,
		       (unsigned long long)r->p99_ns,
		       (unsigned long long)r->max_ns);
	}
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	uint64_t v;
	int c;

	/* glibc: 0 re-initialises getopt after the caller's own parsing. */
	optind = 0;
	while ((c = getopt_long(argc, argv, "p:c:k:b:jh", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'p':
			if (!bench_parse_u64(optarg, 1, UINT64_MAX,
					     &o->pool_bytes))
				return 2;
			break;
		case 'c':
			if (!bench_parse_u64(optarg, 1, UINT64_MAX,
					     &o->chunk_bytes))
				return 2;
			break;
		case 'k':
			if (!bench_parse_u64(optarg, 1, UINT64_MAX, &o->keys))
				return 2;
			break;
		case 'b':
			if (!bench_parse_u64(optarg, 1, UINT64_MAX, &v) ||
			    v > KVR_MAX_KEYS_LIMIT)
				return 2;
			o->batch = (uint32_t)v;
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			return 2;
		}
	}
	if (optind < argc || o->chunk_bytes > o->pool_bytes)
		return 2;
	return 0;
}

/* Build the keys of request r (keys r*batch .. r*batch+batch-1). */
static void fill_keys(struct kvr_key *k, uint64_t first, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		k[i] = bench_mixed_key(first + i);
}

/* A random one of the last @rresident of @nreq requests stored (xorshift
 * of *seed), so that lookups and retrieves hit resident keys. */
static uint64_t pick_resident(uint64_t *seed, uint64_t nreq, uint64_t rresident)
{
	*seed ^= *seed << 13;
	*seed ^= *seed >> 7;
	*seed ^= *seed << 17;
	return nreq - 1 - *seed % rresident;
}

/* Phase 2: @nreq lookups of random resident requests (of the last
 * @rresident stored), timed one by one into @lat. 0 or -1 (said). */
static int lookup_phase(struct kvr_store *s, const struct bench_opts *o,
			struct kvr_key *k, uint64_t *lat, uint64_t nreq,
			uint64_t rresident, uint64_t *seed,
			struct bench_result *res)
{
	uint64_t t0, t1;
	int rc;

	*res = (struct bench_result){.op = "lookup", .keys = nreq * o->batch};
	t0 = kvr_clock_now_ns();
	for (uint64_t r = 0; r < nreq; r++) {
		uint64_t pick, a, b;

		pick = pick_resident(seed, nreq, rresident);
		fill_keys(k, pick * o->batch, o->batch);
		a = kvr_clock_now_ns();
		rc = kvr_store_lookup(s, 1, 1, k, o->batch, false, a, NULL);
		b = kvr_clock_now_ns();
		if (rc != (int)o->batch) {
			fprintf(stderr,
				"kvring-bench engine: lookup of "
				"resident request %llu: %d hits, want %u\n",
				(unsigned long long)pick, rc, o->batch);
			return -1;
		}
		lat[r] = b - a;
	}
	t1 = kvr_clock_now_ns();
	summarise(res, lat, nreq, t0, t1);
	return 0;
}

/* Phase 3: @nreq retrieve pairs of random resident requests, timed one
 * by one into @lat. 0 or -1 (said). */
static int retrieve_phase(struct kvr_store *s, const struct bench_opts *o,
			  struct kvr_key *k, struct kvr_slot_desc *out,
			  uint64_t *lat, uint64_t nreq, uint64_t rresident,
			  uint64_t *seed, struct bench_result *res)
{
	uint64_t t0, t1, x;
	int rc;

	*res = (struct bench_result){.op = "retrieve", .keys = nreq * o->batch};
	t0 = kvr_clock_now_ns();
	for (uint64_t r = 0; r < nreq; r++) {
		uint64_t pick, a, b;

		pick = pick_resident(seed, nreq, rresident);
		fill_keys(k, pick * o->batch, o->batch);
		a = kvr_clock_now_ns();
		rc = kvr_store_prepare_retrieve(s, 2, 1, k, o->batch, a, out,
						&x);
		if (rc == (int)o->batch)
			rc = kvr_store_commit_retrieve(s, 2, x, a);
		else if (rc >= 0)
			rc = -EIO;
		b = kvr_clock_now_ns();
		if (rc < 0 || out[0].len != o->chunk_bytes) {
			fprintf(stderr,
				"kvring-bench engine: retrieve of "
				"resident request %llu: %s\n",
				(unsigned long long)pick,
				rc < 0 ? strerror(-rc) : "wrong slot length");
			return -1;
		}
		lat[r] = b - a;
	}
	t1 = kvr_clock_now_ns();
	summarise(res, lat, nreq, t0, t1);
	return 0;
}

int kvr_bench_store(int argc, char **argv)
{
	struct bench_opts o = {
	    .pool_bytes = 64ull << 30,
	    .chunk_bytes = 256 << 10,
	    .keys = 1u << 20,
	    .batch = 16,
	};
	struct kvr_store_config cfg = {0};
	struct kvr_store *s = NULL;
	struct kvr_key *k = NULL;
	uint64_t *sizes = NULL, *lat = NULL;
	struct kvr_slot_desc *out = NULL;
	struct bench_result res[3];
	uint64_t nreq, resident, rresident, x, t0, t1,
	    seed = 88172645463325252ull;
	int rc = parse_opts(argc, argv, &o), ret = 1;

	if (rc < 0)
		return 0;
	if (rc) {
		usage(stderr);
		return 2;
	}
	nreq = o.keys / o.batch;
	/* Objects that stay resident: what fits, minus one request's worth. */
	resident = o.pool_bytes / o.chunk_bytes;
	if (resident > o.keys)
		resident = o.keys;
	rresident = resident > o.batch ? resident / o.batch - 1 : 0;
	if (nreq == 0 || rresident == 0) {
		fprintf(stderr, "kvring-bench engine: --keys must cover at "
				"least two requests that fit the pool\n");
		return 2;
	}
	cfg.pool_bytes = o.pool_bytes;
	cfg.max_keys = o.batch;
	cfg.objects_hint = resident + o.batch;
	cfg.hash_seed = 0x6b7672696e67ull;
	rc = kvr_store_create(&cfg, &s);
	k = calloc(o.batch, sizeof(*k));
	sizes = calloc(o.batch, sizeof(*sizes));
	out = calloc(o.batch, sizeof(*out));
	lat = calloc(nreq, sizeof(*lat));
	if (rc < 0 || !k || !sizes || !out || !lat) {
		fprintf(stderr, "kvring-bench engine: setup: %s\n",
			strerror(rc < 0 ? -rc : ENOMEM));
		goto out;
	}
	for (uint32_t i = 0; i < o.batch; i++)
		sizes[i] = o.chunk_bytes;

	/* Phase 1: store pairs; beyond `resident` keys every store evicts. */
	res[0] = (struct bench_result){.op = "store", .keys = nreq * o.batch};
	t0 = kvr_clock_now_ns();
	for (uint64_t r = 0; r < nreq; r++) {
		uint64_t a = kvr_clock_now_ns(), b;

		fill_keys(k, r * o.batch, o.batch);
		rc = kvr_store_prepare_store(s, 0, 1, k, sizes, o.batch, a, out,
					     &x);
		if (rc == (int)o.batch)
			rc = kvr_store_commit_store(s, 0, x, a);
		else if (rc >= 0)
			rc = -EIO; /* every key is new: all must be placed */
		b = kvr_clock_now_ns();
		if (rc < 0) {
			fprintf(stderr,
				"kvring-bench engine: store request "
				"%llu: %s\n",
				(unsigned long long)r, strerror(-rc));
			goto out;
		}
		lat[r] = b - a;
	}
	t1 = kvr_clock_now_ns();
	summarise(&res[0], lat, nreq, t0, t1);

	if (lookup_phase(s, &o, k, lat, nreq, rresident, &seed, &res[1]) < 0 ||
	    retrieve_phase(s, &o, k, out, lat, nreq, rresident, &seed,
			   &res[2]) < 0)
		goto out;

	if (!o.json)
		printf("%-9s %10s %14s %14s %9s %9s %9s\n", "op", "requests",
		       "ops_per_s", "keys_per_s", "p50_ns", "p99_ns", "max_ns");
	for (int i = 0; i < 3; i++)
		print_result(&o, &res[i]);
	if (!o.json) {
		struct kvr_store_stats st;

		kvr_store_stats(s, &st);
		printf("batch=%u chunk_bytes=%llu objects=%llu evictions=%llu "
		       "fragmentation=%.3f\n",
		       o.batch, (unsigned long long)o.chunk_bytes,
		       (unsigned long long)st.objects,
		       (unsigned long long)st.evictions, st.fragmentation);
	}
	ret = 0;
out:
	free(k);
	free(sizes);
	free(out);
	free(lat);
	kvr_store_destroy(s);
	return ret;
}
