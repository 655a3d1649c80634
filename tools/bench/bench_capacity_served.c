/* SPDX-License-Identifier: MIT */
/*
 * bench_capacity_served.c - the served half of kvring-bench capacity
 * (--served): what a worker sees through a real kvringd as the cache
 * grows, and what the inspector's snapshot of that server costs.
 *
 * For each size N it starts a private kvringd (bench_server.c) with a pool
 * of exactly N chunks of --align A (A the smallest power of two >= 128
 * that makes the pool the 1 MiB kvringd asks for at least) and
 * --no-prefault, connects one worker without a pool pre-fault, fills N
 * new keys of A bytes, 256 keys per prepare + commit (no slot is written:
 * the engine, not the copy, is measured), and then, one key per request
 * through the rings, each request timed alone with the TSC:
 *   ping      kvr_ping(), the same run's round trip: the baseline
 *   lookup    kvr_lookup() of one random resident key (no pin)
 *   store     kvr_prepare_store() + kvr_commit_store() of one new key;
 *             the pool is full, so each one evicts one object (checked)
 *   inspect   what one `kvring-inspect --json` run does, in-process and
 *             without its start-up: attach the control segment read-only,
 *             take a snapshot (tools/inspect/snapshot.c), render the JSON
 *             overview into /dev/null, detach; the p50 of 21
 *   anon      kvringd's anonymous memory (smaps_rollup "Anonymous:") after
 *             the fill, over N: the engine's metadata and kvringd's fixed
 *             part, which weighs in at small N. The pool is a shm file,
 *             so it is not in it.
 *   fill      the fill's time and its longest request. kvringd runs
 *             with --objects N, sized for the count up front, so that
 *             the lookups measure a cache of that size and not one whose
 *             key index is still migrating to a larger table (without
 *             it the engine grows as objects arrive, a slice per
 *             request). kvringd beats every second (--heartbeat-ms
 *             1000), so a worker, which gives up on a heartbeat three
 *             periods old, rides out a loaded machine's stall and the
 *             stall is measured.
 * It checks what the server answers (placements, hits, object and
 * eviction counts) and fails only when an answer is wrong.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_capacity.h"
#include "bench_common.h"
#include "bench_server.h"
#include "inspect.h"

#define SRV_ALIGN_MIN	128u	   /* smallest --align tried */
#define SRV_POOL_MIN	(1u << 20) /* kvringd's smallest --pool-size */
#define SRV_FILL_BATCH	256u	   /* keys per fill request */
#define SRV_SERVER_SPIN 20000u	   /* kvringd --spin-us: hot */
#define SRV_CLIENT_SPIN 100000u	   /* the worker's spin: hot */
#define SRV_INSPECTS	21u	   /* snapshots per size */
#define SRV_WHO		"kvring-bench capacity --served"

/* What one size measured; latencies in ns. */
struct srv_result {
	uint64_t objects, align;
	double ping_p50;
	double lookup_p50, lookup_p99;
	double store_p50, store_p99;
	double inspect_p50_us;
	double anon_per_obj;
	double fill_s;
	double fill_max_ms; /* the fill's longest request */
};

/* The smallest --align >= SRV_ALIGN_MIN whose pool of @n is >= 1 MiB. */
static uint64_t srv_align(uint64_t n)
{
	uint64_t a = SRV_ALIGN_MIN;

	while (n * a < SRV_POOL_MIN)
		a <<= 1;
	return a;
}

/* "Anonymous:" of /proc/@pid/smaps_rollup in bytes; 0 if unreadable. */
static uint64_t srv_anon_bytes(pid_t pid)
{
	char path[64], line[256];
	unsigned long long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Anonymous: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024u;
}

static void srv_pcts(uint64_t *v, size_t n, double *p50, double *p99)
{
	bench_sort_u64(v, n);
	*p50 = bench_ticks_to_ns(bench_percentile(v, n, 50));
	*p99 = bench_ticks_to_ns(bench_percentile(v, n, 99));
}

/* kvr_stats() into *st; 0 or -1 (said). */
static int srv_stats(struct kvr_client *c, struct kvr_stats_wire *st)
{
	int rc = kvr_stats(c, st);

	if (rc < 0)
		fprintf(stderr, SRV_WHO ": stats: %s (%s)\n", strerror(-rc),
			kvr_client_errmsg(c));
	return rc < 0 ? -1 : 0;
}

/*
 * Stores keys [@first, @first + @n) of @a bytes in one prepare + commit;
 * every one must be placed. @ticks (may be NULL) gets the pair's time.
 * 0, or -1 (said).
 */
static int srv_store(struct kvr_client *c, uint64_t first, uint32_t n,
		     uint64_t a, struct kvr_key *k, uint64_t *sizes,
		     uint64_t *ticks)
{
	struct kvr_xfer x;
	uint64_t t0;
	int rc;

	for (uint32_t i = 0; i < n; i++) {
		k[i] = bench_key(first + i);
		sizes[i] = a;
	}
	t0 = bench_ticks();
	rc = kvr_prepare_store(c, k, sizes, n, &x);
	if (rc >= 0) {
		for (uint32_t i = 0; i < x.nslots && rc >= 0; i++)
			if (x.slots[i].status != KVR_SLOT_OK)
				rc = -ENOSPC;
		if (rc >= 0 && x.nslots != n)
			rc = -EPROTO;
		if (rc >= 0)
			rc = kvr_commit_store(c, &x);
		else
			kvr_abort_store(c, &x);
	}
	if (ticks)
		*ticks = bench_ticks() - t0;
	if (rc < 0)
		fprintf(stderr,
			SRV_WHO ": store of %u new keys from key %" PRIu64
				": %s (%s)\n",
			n, first,
			rc == -ENOSPC ? "a key was not placed" : strerror(-rc),
			kvr_client_errmsg(c));
	return rc < 0 ? -1 : 0;
}

/* Fills keys [0, @n) of @a bytes, the longest request's time (ticks)
 * into *@longest; 0 or -1 (said). */
static int srv_fill(struct kvr_client *c, uint64_t n, uint64_t a,
		    uint64_t *longest)
{
	uint32_t batch = SRV_FILL_BATCH, max = kvr_client_info(c)->max_keys;
	struct kvr_key k[SRV_FILL_BATCH];
	uint64_t sizes[SRV_FILL_BATCH];

	if (max && batch > max)
		batch = max;
	for (uint64_t i = 0; i < n; i += batch) {
		uint32_t m = n - i < batch ? (uint32_t)(n - i) : batch;
		uint64_t t;

		if (srv_store(c, i, m, a, k, sizes, &t) < 0)
			return -1;
		if (t > *longest)
			*longest = t;
	}
	return 0;
}

/* @ns lookups of random resident keys of [0, @n) into @lat; 0 or -1. */
static int srv_lookups(struct kvr_client *c, uint64_t n, uint64_t *lat,
		       uint64_t ns, uint64_t *seed)
{
	for (uint64_t r = 0; r < ns; r++) {
		uint64_t i, t0;
		struct kvr_key k;
		long rc;

		*seed ^= *seed << 13;
		*seed ^= *seed >> 7;
		*seed ^= *seed << 17;
		i = *seed % n;
		k = bench_key(i);
		t0 = bench_ticks();
		rc = kvr_lookup(c, &k, 1, NULL);
		lat[r] = bench_ticks() - t0;
		if (rc != 1) {
			fprintf(stderr,
				SRV_WHO ": lookup of resident key %" PRIu64
					": %ld, want 1 hit (%s)\n",
				i, rc, kvr_client_errmsg(c));
			return -1;
		}
	}
	return 0;
}

/*
 * What one `kvring-inspect --json` run does once attached, timed
 * SRV_INSPECTS times: attach, snapshot, JSON overview into /dev/null,
 * detach. Its p50 in us into *p50; 0 or -1 (said).
 */
static int srv_inspect(const struct bench_server *s, double *p50)
{
	struct ins_snap *snap = calloc(1, sizeof(*snap));
	FILE *null = fopen("/dev/null", "w");
	uint64_t v[SRV_INSPECTS];
	struct ins_target t;
	int ret = -1;

	if (!snap || !null || ins_target_from_name(&t, NULL, s->d.name) < 0) {
		fprintf(stderr, SRV_WHO ": inspector setup failed\n");
		goto out;
	}
	for (unsigned i = 0; i < SRV_INSPECTS; i++) {
		struct kvr_err e = {0};
		struct ins_attach a;
		uint64_t t0 = bench_ticks();
		int rc = ins_attach_open(&t, &a, &e);

		if (rc < 0) {
			fprintf(stderr, SRV_WHO ": attach %s: %s\n", t.path,
				kvr_err_str(&e, rc));
			goto out;
		}
		memset(snap, 0, sizeof(*snap));
		snap->ch = a.geom_ok ? ins_chan_alloc(&a) : NULL;
		rc = snap->ch ? ins_snap_take(&a, snap) : -1;
		if (rc >= 0)
			ins_overview_emit(null, true, false, &t, snap, NULL);
		fflush(null);
		free(snap->ch);
		ins_attach_close(&a);
		v[i] = bench_ticks() - t0;
		if (rc < 0) {
			fprintf(stderr, SRV_WHO ": snapshot of %s failed\n",
				t.path);
			goto out;
		}
	}
	bench_sort_u64(v, SRV_INSPECTS);
	*p50 = bench_ticks_to_ns(v[SRV_INSPECTS / 2]) / 1000.0;
	ret = 0;
out:
	if (null)
		fclose(null);
	free(snap);
	return ret;
}

/* Everything for one size @n into *r; 0 or -1 (said). */
static int srv_one(const struct cap_served_opts *o, uint64_t n,
		   struct srv_result *r)
{
	uint64_t ns = o->samples, a = srv_align(n), t0, last = 0, fill_max = 0;
	uint64_t seed = 88172645463325252ull, *lat = calloc(ns, sizeof(*lat));
	struct bench_run_opts ro = {.cpu_client = -1};
	/* A worker gives up on a server whose heartbeat is 3 periods old
	 * (1 s at least); the fill's longest request is reported, not
	 * failed, so the period is 1 s. */
	const char *extra[] = {
	    "--align",	      NULL,   "--objects", NULL, "--no-prefault",
	    "--heartbeat-ms", "1000", NULL};
	char align[24], objects[24];
	struct bench_server srv;
	struct kvr_client *c = NULL;
	struct kvr_stats_wire st;
	struct kvr_key k;
	uint64_t sz;
	int ret = -1;

	*r = (struct srv_result){.objects = n, .align = a};
	snprintf(align, sizeof(align), "%" PRIu64, a);
	extra[1] = align;
	snprintf(objects, sizeof(objects), "%" PRIu64, n);
	extra[3] = objects;
	ro.cpu_server = o->cpu_server;
	ro.kvringd = o->kvringd;
	if (!lat) {
		fprintf(stderr, SRV_WHO ": %s\n", strerror(ENOMEM));
		return -1;
	}
	if (bench_server_start_args(&ro, n * a, SRV_SERVER_SPIN, 4, extra,
				    &srv) < 0) {
		free(lat);
		return -1;
	}
	if (bench_client_connect(&srv, 0, SRV_CLIENT_SPIN, true, &c) < 0)
		goto out;
	t0 = bench_ticks();
	if (srv_fill(c, n, a, &fill_max) < 0)
		goto out;
	r->fill_s = bench_ticks_to_ns(bench_ticks() - t0) / 1e9;
	r->fill_max_ms = bench_ticks_to_ns(fill_max) / 1e6;
	/* All of it: with --objects the engine's arrays are made (and
	 * written) at start, before any worker could connect. */
	r->anon_per_obj = (double)srv_anon_bytes(srv.d.pid) / (double)n;
	if (srv_stats(c, &st) < 0)
		goto out;
	if (st.objects != n || st.evictions != 0) {
		fprintf(stderr,
			SRV_WHO ": after filling %" PRIu64 " keys the server "
				"holds %" PRIu64 " objects with %" PRIu64
				" evictions, want %" PRIu64 " and 0\n",
			n, st.objects, st.evictions, n);
		goto out;
	}
	if (bench_pings(c, ns, 0, SRV_WHO, &last, lat) < 0)
		goto out;
	bench_sort_u64(lat, ns);
	r->ping_p50 = (double)bench_percentile(lat, ns, 50);
	if (srv_lookups(c, n, lat, ns, &seed) < 0)
		goto out;
	srv_pcts(lat, ns, &r->lookup_p50, &r->lookup_p99);
	if (srv_inspect(&srv, &r->inspect_p50_us) < 0)
		goto out;
	/* The pool is full: each new key evicts one object. */
	for (uint64_t i = 0; i < ns; i++)
		if (srv_store(c, n + i, 1, a, &k, &sz, &lat[i]) < 0)
			goto out;
	srv_pcts(lat, ns, &r->store_p50, &r->store_p99);
	if (srv_stats(c, &st) < 0)
		goto out;
	if (st.objects != n || st.evictions != ns) {
		fprintf(stderr,
			SRV_WHO ": after %" PRIu64 " stores into the full "
				"pool the server holds %" PRIu64 " objects "
				"with %" PRIu64 " evictions, want %" PRIu64
				" and %" PRIu64 "\n",
			ns, st.objects, st.evictions, n, ns);
		goto out;
	}
	ret = 0;
out:
	if (c)
		kvr_close(c);
	bench_server_stop(&srv);
	free(lat);
	return ret;
}

static void srv_cell(char *buf, size_t len, double v, double base)
{
	if (base > 0)
		snprintf(buf, len, "%.0f (%.2fx)", v, v / base);
	else
		snprintf(buf, len, "%.0f", v);
}

static void srv_print_text(const struct srv_result *r,
			   const struct srv_result *b)
{
	char lk[32], st[32], in[32];

	srv_cell(lk, sizeof(lk), r->lookup_p50, r == b ? 0 : b->lookup_p50);
	srv_cell(st, sizeof(st), r->store_p50, r == b ? 0 : b->store_p50);
	srv_cell(in, sizeof(in), r->inspect_p50_us,
		 r == b ? 0 : b->inspect_p50_us);
	printf("%9" PRIu64 " %5" PRIu64 " %8.0f %15s %8.2f %10.0f %15s %9.0f "
	       "%14s %7.1f %6.1f %11.1f\n",
	       r->objects, r->align, r->ping_p50, lk,
	       r->lookup_p50 / r->ping_p50, r->lookup_p99, st, r->store_p99, in,
	       r->anon_per_obj, r->fill_s, r->fill_max_ms);
}

static void srv_print_json(const struct cap_served_opts *o,
			   const struct srv_result *r,
			   const struct srv_result *b)
{
	struct bench_json j;

	bench_json_begin(&j, "capacity_served", "kvring");
	bench_json_u64(&j, "objects", r->objects);
	bench_json_u64(&j, "align_bytes", r->align);
	bench_json_u64(&j, "samples", o->samples);
	bench_json_f64(&j, "ping_p50_ns", r->ping_p50);
	bench_json_f64(&j, "lookup_p50_ns", r->lookup_p50);
	bench_json_f64(&j, "lookup_p99_ns", r->lookup_p99);
	bench_json_f64(&j, "store_p50_ns", r->store_p50);
	bench_json_f64(&j, "store_p99_ns", r->store_p99);
	bench_json_bool(&j, "store_evicts", true);
	bench_json_u64(&j, "baseline_objects", b->objects);
	bench_json_f64(&j, "ratio_lookup_p50", r->lookup_p50 / b->lookup_p50);
	bench_json_f64(&j, "ratio_store_p50", r->store_p50 / b->store_p50);
	bench_json_f64(&j, "ratio_lookup_p99", r->lookup_p99 / b->lookup_p99);
	bench_json_f64(&j, "ratio_store_p99", r->store_p99 / b->store_p99);
	bench_json_f64(&j, "ratio_ping_p50", r->ping_p50 / b->ping_p50);
	bench_json_f64(&j, "lookup_over_ping", r->lookup_p50 / r->ping_p50);
	bench_json_f64(&j, "store_over_ping", r->store_p50 / r->ping_p50);
	bench_json_u64(&j, "inspect_snapshots", SRV_INSPECTS);
	bench_json_f64(&j, "inspect_snapshot_p50_us", r->inspect_p50_us);
	bench_json_f64(&j, "ratio_inspect_snapshot_p50",
		       r->inspect_p50_us / b->inspect_p50_us);
	bench_json_f64(&j, "kvringd_anon_bytes_per_object", r->anon_per_obj);
	bench_json_f64(&j, "fill_s", r->fill_s);
	bench_json_f64(&j, "fill_max_request_ms", r->fill_max_ms);
	bench_json_print(&j, stdout);
}

int bench_capacity_served(const struct cap_served_opts *o)
{
	struct srv_result res[CAP_SERVED_MAX_SIZES];

	if (o->cpu_client >= 0 && bench_pin_cpu(o->cpu_client) < 0)
		fprintf(stderr, SRV_WHO ": pin to cpu %d failed\n",
			o->cpu_client);
	if (!o->json)
		printf("# kvring-bench capacity --served: a private kvringd "
		       "per size (pool of exactly that many chunks of align "
		       "bytes, --objects that many, --no-prefault), one "
		       "worker; samples=%" PRIu64
		       "; latencies in ns, one key per request, timed alone; "
		       "(Nx) = ratio to %" PRIu64 " objects\n"
		       "# ping = the same run's round trip; lookup/ping = "
		       "lookup p50 over it; store = prepare + commit of a new "
		       "key into the full pool: each evicts one object\n"
		       "# inspect_us = attach + snapshot + JSON overview + "
		       "detach, as one kvring-inspect --json run less its "
		       "start-up, p50 of %u; anon_B = kvringd's anonymous "
		       "memory after the fill, per object\n"
		       "# fill_s = the fill, %u keys a request; fill_max_ms "
		       "= its longest request (kvringd's --heartbeat-ms is "
		       "1000, so a worker waits 3 s before it gives up)\n"
		       "%9s %5s %8s %15s %8s %10s %15s %9s %14s %7s %6s "
		       "%11s\n",
		       o->samples, o->sizes[0], SRV_INSPECTS, SRV_FILL_BATCH,
		       "objects", "align", "ping_p50", "lookup_p50", "lkp/ping",
		       "lookup_p99", "store_p50", "store_p99", "inspect_us",
		       "anon_B", "fill_s", "fill_max_ms");
	for (unsigned i = 0; i < o->nsizes; i++) {
		if (srv_one(o, o->sizes[i], &res[i]) < 0)
			return -1;
		if (o->json)
			srv_print_json(o, &res[i], &res[0]);
		else
			srv_print_text(&res[i], &res[0]);
		fflush(stdout);
	}
	return 0;
}
