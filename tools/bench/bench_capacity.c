/* SPDX-License-Identifier: MIT */
/*
 * bench_capacity.c - kvring-bench scenario "capacity": how the storage
 * engine's costs grow with the number of objects it holds. Like `engine`
 * it drives kvringd's storage engine (server/store) in-process: the pool
 * is only arithmetic (nothing is mapped), so small chunks of many objects
 * cost no pool memory, only the engine's own metadata.
 *
 * For each size (default 10^4, 10^5, 10^6, 10^7 objects) it creates an
 * engine whose pool holds exactly that many chunks, fills it with one key
 * per request, and measures:
 *   meta       server metadata per object: the engine's heap in use
 *              (mallinfo2: uordblks + hblkhd) plus the object table entries
 *              it wrote in its own mapping (kvr_store_table_bytes), after
 *              the fill minus before
 *              create, over the objects; the RSS delta beside it
 *   store      prepare_store + commit_store of one new key: the last
 *              --samples stores of the fill (the engine nearly full)
 *   lookup     one resident key, picked at random (no pin)
 *   lookup16   one request of 16 distinct random resident keys, as an
 *              inference engine looks up a prompt's chunks; its p50 over
 *              16, per key. The engine prefetches the 16 keys' index
 *              slots, then their objects, so their misses overlap.
 *   evict      a store of a new key into the full engine, which evicts
 *              the least recently used object first
 *   stats      kvr_store_stats(): what kvringd computes to publish the
 *              stats block the inspector reads. The inspector's own
 *              snapshot reads a live server's control segment: --served
 *              measures it.
 *   miss       the memory floor, after the engine is destroyed: one
 *              dependent read (a pointer chase through a random cycle of
 *              its cache lines) of an array as large as the metadata
 *              (the heap delta, at least 64 bytes), advised for huge
 *              pages as the engine's arrays are (kvr_hugemem_advise)
 * Each request and each read is timed alone with the TSC (bench_ticks,
 * about 20 ns of its own, in both). Each size prints beside the first
 * size's figures as ratios (the target: flat within 1.5x), the metadata
 * beside 64 bytes/object, and lookup and store p50 above the first size's
 * in misses: (p50 - first size's p50) / miss. A lookup of one key waits on
 * two dependent reads of the metadata (its index slot, then the object
 * record the slot names, which holds the key to check), a store of a new
 * key on one, so where the metadata outgrows the caches those costs grow
 * with the miss, not with a structure that does more work.
 * It checks what the engine answers (placements, hits, evictions) and
 * exits 1 only when an answer is wrong, never because a figure is slow.
 *
 * With --served a second table follows (bench_capacity_served.c): per
 * size, a private kvringd whose pool holds exactly that many small chunks,
 * filled by one worker, and measured through its rings one key per
 * request: lookup and evicting store p50/p99 beside the same run's ping,
 * the inspector's snapshot of that server (attach, snapshot, JSON
 * overview, in-process), and kvringd's anonymous memory per object.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvring/store.h>

#include "bench_capacity.h"
#include "bench_common.h"
#include "store/hugemem.h"

int bench_capacity_main(int argc, char **argv);

#define CAP_MAX_SIZES	   CAP_SERVED_MAX_SIZES
#define CAP_META_TARGET	   64.0 /* bytes of metadata per object */
#define CAP_FLAT_TARGET	   1.5	/* largest / first size */
#define CAP_DEFAULT_SAMPLE 100000u
#define CAP_BATCH	   16u /* keys of a batched lookup */
#define CAP_LINE	   64u /* bytes of a cache line */

struct cap_opts {
	uint64_t sizes[CAP_MAX_SIZES];
	unsigned nsizes;
	uint64_t chunk_bytes;
	uint64_t samples;
	bool json;
	double sized;	     /* --sized F: engine sized for F x objects */
	bool served;	     /* --served: the served table too */
	const char *kvringd; /* --kvringd PATH for it */
	int cpu_client, cpu_server;
};

/* What one size measured; latencies in ns. */
struct cap_result {
	uint64_t objects;
	double meta_per_obj, rss_per_obj;
	const char *meta_src; /* "mallinfo2", or "rss" where it says nothing */
	double lookup_p50, lookup_p99;
	double store_p50, store_p99;
	double evict_p50, evict_p99;
	double stats_ns;
	double lookup16_key_p50; /* a 16-key lookup's p50 over 16 */
	double miss_p50;	 /* one dependent read of the metadata's size */
	/* --sized: the fill left the key index migrating; its lookup p50
	 * and metadata then, and the idle steps that ended it (the figures
	 * above are the engine's after them). */
	bool moving;
	double moving_lookup_p50, moving_meta_per_obj;
	struct cap_idle idle;
};

/* The engine's heap in use (small chunks and mmap()ed ones), bytes. */
static uint64_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/* Resident set size from /proc/self/statm, bytes (0 if unreadable). */
static uint64_t rss_bytes(void)
{
	unsigned long long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu %llu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* p50 and p99 in ns of @n tick samples (sorted in place). */
static void cap_pcts(uint64_t *v, size_t n, double *p50, double *p99)
{
	bench_sort_u64(v, n);
	*p50 = bench_ticks_to_ns(bench_percentile(v, n, 50));
	*p99 = bench_ticks_to_ns(bench_percentile(v, n, 99));
}

/*
 * One store of key @i (timed into *ticks). @evicting: the engine is full
 * and exactly one object must go. 0, or -1 with the reason said.
 */
static int cap_store(struct kvr_store *s, uint64_t i, uint64_t chunk,
		     bool evicting, uint64_t *ticks)
{
	struct kvr_key k = bench_mixed_key(i);
	struct kvr_slot_desc out;
	uint64_t x, ev0 = 0, t0;
	struct kvr_store_stats st;
	int rc;

	if (evicting) {
		kvr_store_stats(s, &st);
		ev0 = st.evictions;
	}
	t0 = bench_ticks();
	rc = kvr_store_prepare_store(s, 0, 1, &k, &chunk, 1, i, &out, &x);
	if (rc == 1)
		rc = kvr_store_commit_store(s, 0, x, i);
	else if (rc >= 0)
		rc = -ENOSPC; /* a new key in a pool of its size: must fit */
	*ticks = bench_ticks() - t0;
	if (rc == 0 && evicting) {
		kvr_store_stats(s, &st);
		if (st.evictions != ev0 + 1)
			rc = -EPROTO;
	}
	if (rc < 0)
		fprintf(
		    stderr,
		    "kvring-bench capacity: store of key %" PRIu64 "%s: %s\n",
		    i, evicting ? " into the full engine" : "",
		    rc == -EPROTO ? "not exactly one eviction" : strerror(-rc));
	return rc < 0 ? -1 : 0;
}

/* Fill @n objects; the last @ns stores are timed into @lat. 0 or -1. */
static int cap_fill(struct kvr_store *s, uint64_t n, uint64_t chunk,
		    uint64_t *lat, uint64_t ns)
{
	uint64_t t;

	for (uint64_t i = 0; i < n; i++) {
		if (cap_store(s, i, chunk, false, &t) < 0)
			return -1;
		if (i >= n - ns)
			lat[i - (n - ns)] = t;
	}
	return 0;
}

/* @ns random lookups of resident keys [@lo, @hi), timed into @lat. */
static int cap_lookups(struct kvr_store *s, uint64_t lo, uint64_t hi,
		       uint64_t *lat, uint64_t ns, uint64_t *seed)
{
	for (uint64_t r = 0; r < ns; r++) {
		uint64_t i = lo + xorshift(seed) % (hi - lo), t0;
		struct kvr_key k = bench_mixed_key(i);
		int rc;

		t0 = bench_ticks();
		rc = kvr_store_lookup(s, 1, 1, &k, 1, false, i, NULL);
		lat[r] = bench_ticks() - t0;
		if (rc != 1) {
			fprintf(stderr,
				"kvring-bench capacity: lookup of resident "
				"key %" PRIu64 ": %d hits, want 1\n",
				i, rc);
			return -1;
		}
	}
	return 0;
}

/*
 * @ns lookups of CAP_BATCH distinct random resident keys of [0, @n) each
 * (n >= 100), one request timed into each of @lat.
 */
static int cap_lookups16(struct kvr_store *s, uint64_t n, uint64_t *lat,
			 uint64_t ns, uint64_t *seed)
{
	struct kvr_key k[CAP_BATCH];
	uint64_t id[CAP_BATCH];

	for (uint64_t r = 0; r < ns; r++) {
		uint64_t t0;
		int rc;

		for (unsigned j = 0; j < CAP_BATCH; j++) {
			unsigned d;

			do {
				id[j] = xorshift(seed) % n;
				for (d = 0; d < j && id[d] != id[j]; d++)
					;
			} while (d < j);
			k[j] = bench_mixed_key(id[j]);
		}
		t0 = bench_ticks();
		rc = kvr_store_lookup(s, 1, 1, k, CAP_BATCH, false, r, NULL);
		lat[r] = bench_ticks() - t0;
		if (rc != (int)CAP_BATCH) {
			fprintf(stderr,
				"kvring-bench capacity: lookup of %u resident "
				"keys from key %" PRIu64 ": %d hits, want %u\n",
				CAP_BATCH, id[0], rc, CAP_BATCH);
			return -1;
		}
	}
	return 0;
}

/* One cache line of the floor's array: where the chase goes next. */
struct cap_line {
	struct cap_line *next;
	char pad[CAP_LINE - sizeof(struct cap_line *)];
};

/*
 * The memory floor at @bytes of metadata into *p50 (ns): @ns dependent
 * reads, each timed alone with bench_ticks like a lookup (the clock's cost
 * is in both), of an array of @bytes advised for huge pages as the
 * engine's arrays are (kvr_hugemem_advise), its cache lines linked in one
 * random cycle, so each read is of a line not read for a whole cycle and
 * waits on the one before. 0, or -1 without memory for it (said).
 */
static int cap_miss(uint64_t bytes, uint64_t *lat, uint64_t ns, uint64_t *seed,
		    double *p50)
{
	uint64_t lines = (bytes + CAP_LINE - 1) / CAP_LINE, t0;
	struct cap_line *a = NULL, *p;
	uint32_t *perm = NULL;
	double p99;

	if (lines <= UINT32_MAX) {
		a = aligned_alloc(CAP_LINE, lines * CAP_LINE);
		perm = malloc(lines * sizeof(*perm));
	}
	if (!a || !perm) {
		fprintf(stderr,
			"kvring-bench capacity: %" PRIu64
			" bytes for the memory floor: %s\n",
			bytes, strerror(ENOMEM));
		free(a);
		free(perm);
		return -1;
	}
	kvr_hugemem_advise(a, lines * CAP_LINE); /* before the first touch */
	for (uint64_t i = 0; i < lines; i++)
		perm[i] = (uint32_t)i;
	/* Sattolo's shuffle: line i leads to perm[i], all in one cycle. */
	for (uint64_t i = lines - 1; i > 0; i--) {
		uint64_t j = xorshift(seed) % i;
		uint32_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint64_t i = 0; i < lines; i++)
		a[i].next = &a[perm[i]];
	free(perm);
	p = a;
	for (uint64_t r = 0; r < ns; r++) {
		t0 = bench_ticks();
		p = *(struct cap_line *volatile *)&p->next;
		lat[r] = bench_ticks() - t0;
	}
	__asm__ __volatile__("" : : "r"(p));
	free(a);
	cap_pcts(lat, ns, p50, &p99);
	return 0;
}

/* kvr_store_stats() cost: the median of 101 calls, ns. */
static double cap_stats_ns(const struct kvr_store *s)
{
	uint64_t v[101];
	struct kvr_store_stats st;

	for (unsigned i = 0; i < 101; i++) {
		uint64_t t0 = bench_ticks();

		kvr_store_stats(s, &st);
		v[i] = bench_ticks() - t0;
	}
	bench_sort_u64(v, 101);
	return bench_ticks_to_ns(v[50]);
}

/*
 * The engine's metadata per object into *r (heap in use and the object
 * table's own mapping, above @heap0; the RSS above @rss0 beside it).
 * Return: the bytes the memory floor reads (at least a line).
 */
static uint64_t cap_meta(const struct kvr_store *s, uint64_t heap0,
			 uint64_t rss0, struct cap_result *r)
{
	uint64_t n = r->objects, floor_bytes;
	/* The object table's own mapping is metadata the heap does not see. */
	uint64_t heap1 = heap_in_use() + kvr_store_table_bytes(s);

	r->meta_per_obj = (double)(heap1 - heap0) / (double)n;
	r->rss_per_obj = (double)(rss_bytes() - rss0) / (double)n;
	r->meta_src = "mallinfo2";
	floor_bytes = heap1 > heap0 ? heap1 - heap0 : 0;
	if (heap0 == 0 && heap1 == 0) {
		/* A sanitizer's allocator answers mallinfo2 with zeros. */
		r->meta_per_obj = r->rss_per_obj;
		r->meta_src = "rss";
		floor_bytes = r->rss_per_obj > 0
				  ? (uint64_t)(r->rss_per_obj * (double)n)
				  : 0;
	}
	return floor_bytes < CAP_LINE ? CAP_LINE : floor_bytes;
}

/* Everything for one size @n into *r. 0, or -1 (said). */
static int cap_one(const struct cap_opts *o, uint64_t n, struct cap_result *r)
{
	struct kvr_store_config cfg = {0};
	struct kvr_store *s = NULL;
	uint64_t ns = o->samples < n ? o->samples : n;
	uint64_t *lat = calloc(ns, sizeof(*lat));
	uint64_t heap0, rss0, floor_bytes, seed = 88172645463325252ull;
	double p99;
	int rc, ret = -1;

	*r = (struct cap_result){.objects = n};
	heap0 = heap_in_use();
	rss0 = rss_bytes();
	cfg.pool_bytes = n * o->chunk_bytes; /* full at exactly n objects */
	cfg.align = (uint32_t)o->chunk_bytes;
	cfg.max_keys = CAP_BATCH;
	cfg.objects_hint = o->sized < 1 ? (uint64_t)((double)n * o->sized) : n;
	cfg.hash_seed = 0x6b7672696e67ull;
	rc = kvr_store_create(&cfg, &s);
	if (rc < 0 || !lat) {
		fprintf(stderr,
			"kvring-bench capacity: %" PRIu64
			" objects: setup: %s\n",
			n, strerror(rc < 0 ? -rc : ENOMEM));
		goto out;
	}
	if (cap_fill(s, n, o->chunk_bytes, lat, ns) < 0)
		goto out;
	cap_pcts(lat, ns, &r->store_p50, &r->store_p99);
	floor_bytes = cap_meta(s, heap0, rss0, r);
	if (kvr_store_migrating(s)) {
		/* --sized: measured as the fill left it, then settled. */
		r->moving = true;
		r->moving_meta_per_obj = r->meta_per_obj;
		if (cap_lookups(s, 0, n, lat, ns, &seed) < 0)
			goto out;
		cap_pcts(lat, ns, &r->moving_lookup_p50, &p99);
		if (bench_cap_idle(s, &r->idle) < 0)
			goto out;
		floor_bytes = cap_meta(s, heap0, rss0, r);
	}
	if (cap_lookups(s, 0, n, lat, ns, &seed) < 0)
		goto out;
	cap_pcts(lat, ns, &r->lookup_p50, &r->lookup_p99);
	if (cap_lookups16(s, n, lat, ns, &seed) < 0)
		goto out;
	cap_pcts(lat, ns, &r->lookup16_key_p50, &p99);
	r->lookup16_key_p50 /= CAP_BATCH;
	r->stats_ns = cap_stats_ns(s);
	/* The engine is full: each new key evicts the oldest one. */
	for (uint64_t i = 0; i < ns; i++)
		if (cap_store(s, n + i, o->chunk_bytes, true, &lat[i]) < 0)
			goto out;
	cap_pcts(lat, ns, &r->evict_p50, &r->evict_p99);
	/* The floor after the engine is gone, so both are never resident. */
	kvr_store_destroy(s);
	s = NULL;
	if (cap_miss(floor_bytes, lat, ns, &seed, &r->miss_p50) < 0)
		goto out;
	ret = 0;
out:
	kvr_store_destroy(s);
	free(lat);
	return ret;
}

/* One ratio to the first size's figure ("-" where there is none). */
static void cap_cell(char *buf, size_t len, double v, double base)
{
	if (base > 0)
		snprintf(buf, len, "%.0f (%.2fx)", v, v / base);
	else
		snprintf(buf, len, "%.0f", v);
}

/*
 * Misses a p50 of @v costs above the first size's @base: the difference
 * over one dependent read at this size (@miss).
 */
static double cap_misses(double v, double base, double miss)
{
	return miss > 0 ? (v - base) / miss : 0;
}

static void cap_print_text(const struct cap_result *r,
			   const struct cap_result *b)
{
	const double v[6] = {r->lookup_p50, r->lookup_p99, r->store_p50,
			     r->store_p99,  r->evict_p50,  r->evict_p99};
	const double w[6] = {b->lookup_p50, b->lookup_p99, b->store_p50,
			     b->store_p99,  b->evict_p50,  b->evict_p99};
	char c[7][32];

	for (unsigned i = 0; i < 6; i++)
		cap_cell(c[i], sizeof(c[i]), v[i], r == b ? 0 : w[i]);
	cap_cell(c[6], sizeof(c[6]), r->lookup16_key_p50,
		 r == b ? 0 : b->lookup16_key_p50);
	printf("%9" PRIu64 " %6.1f %5.2f %6.1f %15s %15s %15s %15s %15s %15s "
	       "%7.0f %6.1f %11.1f %10.1f %15s\n",
	       r->objects, r->meta_per_obj, r->meta_per_obj / CAP_META_TARGET,
	       r->rss_per_obj, c[0], c[1], c[2], c[3], c[4], c[5], r->stats_ns,
	       r->miss_p50,
	       cap_misses(r->lookup_p50, b->lookup_p50, r->miss_p50),
	       cap_misses(r->store_p50, b->store_p50, r->miss_p50), c[6]);
}

/* --sized: the key index as the fill left it, and its idle steps. */
static void cap_print_idle(const struct cap_result *r)
{
	if (!r->moving) {
		printf("#   the fill left the key index settled (its last "
		       "growth's move ended before the fill did)\n");
		return;
	}
	printf("#   after the fill the key index was migrating: lookup_p50 "
	       "%.0f, meta_B %.1f; idle steps %" PRIu64 " (p50 %.0f, p99 "
	       "%.0f, max %.0f ns), %.1f ms; the row above is after them\n",
	       r->moving_lookup_p50, r->moving_meta_per_obj, r->idle.steps,
	       r->idle.step_p50_ns, r->idle.step_p99_ns, r->idle.step_max_ns,
	       r->idle.total_ms);
}

static void cap_print_json(const struct cap_opts *o, const struct cap_result *r,
			   const struct cap_result *b)
{
	struct bench_json j;

	bench_json_begin(&j, "capacity", "kvring");
	bench_json_u64(&j, "objects", r->objects);
	bench_json_u64(&j, "chunk_bytes", o->chunk_bytes);
	bench_json_u64(&j, "samples",
		       o->samples < r->objects ? o->samples : r->objects);
	bench_json_f64(&j, "meta_bytes_per_object", r->meta_per_obj);
	bench_json_str(&j, "meta_source", r->meta_src);
	bench_json_f64(&j, "meta_target_bytes", CAP_META_TARGET);
	bench_json_f64(&j, "rss_bytes_per_object", r->rss_per_obj);
	bench_json_f64(&j, "lookup_p50_ns", r->lookup_p50);
	bench_json_f64(&j, "lookup_p99_ns", r->lookup_p99);
	bench_json_f64(&j, "store_p50_ns", r->store_p50);
	bench_json_f64(&j, "store_p99_ns", r->store_p99);
	bench_json_f64(&j, "evict_p50_ns", r->evict_p50);
	bench_json_f64(&j, "evict_p99_ns", r->evict_p99);
	bench_json_f64(&j, "stats_ns", r->stats_ns);
	bench_json_u64(&j, "baseline_objects", b->objects);
	bench_json_f64(&j, "ratio_lookup_p50", r->lookup_p50 / b->lookup_p50);
	bench_json_f64(&j, "ratio_lookup_p99", r->lookup_p99 / b->lookup_p99);
	bench_json_f64(&j, "ratio_store_p50", r->store_p50 / b->store_p50);
	bench_json_f64(&j, "ratio_store_p99", r->store_p99 / b->store_p99);
	bench_json_f64(&j, "ratio_evict_p50", r->evict_p50 / b->evict_p50);
	bench_json_f64(&j, "ratio_evict_p99", r->evict_p99 / b->evict_p99);
	bench_json_f64(&j, "miss_p50_ns", r->miss_p50);
	bench_json_f64(&j, "lookup_misses",
		       cap_misses(r->lookup_p50, b->lookup_p50, r->miss_p50));
	bench_json_f64(&j, "store_misses",
		       cap_misses(r->store_p50, b->store_p50, r->miss_p50));
	bench_json_f64(&j, "lookup16_key_p50_ns", r->lookup16_key_p50);
	bench_json_f64(&j, "ratio_lookup16_key_p50",
		       r->lookup16_key_p50 / b->lookup16_key_p50);
	bench_json_f64(&j, "sized_fraction", o->sized);
	bench_json_bool(&j, "migrating_after_fill", r->moving);
	if (r->moving) {
		bench_json_f64(&j, "lookup_p50_ns_migrating",
			       r->moving_lookup_p50);
		bench_json_f64(&j, "meta_bytes_per_object_migrating",
			       r->moving_meta_per_obj);
		bench_json_u64(&j, "idle_steps", r->idle.steps);
		bench_json_f64(&j, "idle_step_p50_ns", r->idle.step_p50_ns);
		bench_json_f64(&j, "idle_step_p99_ns", r->idle.step_p99_ns);
		bench_json_f64(&j, "idle_step_max_ns", r->idle.step_max_ns);
		bench_json_f64(&j, "idle_ms", r->idle.total_ms);
	}
	bench_json_print(&j, stdout);
}

static void cap_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: kvring-bench capacity [--sizes LIST] [--chunk-bytes N]"
	    "\n                             [--samples N] [--sized F] [--json]"
	    " [--served]\n"
	    "                             [--kvringd PATH] [--cpu-client N]"
	    " [--cpu-server N]\n"
	    "  the storage engine in-process, filled with ever more "
	    "objects: metadata\n"
	    "  bytes per object, lookup / store / evicting store p50 and "
	    "p99 and a 16-key\n"
	    "  lookup's p50 per key, each size beside the first one, and "
	    "the memory\n"
	    "  floor: one dependent read over as much memory as the "
	    "metadata\n"
	    "  --sizes LIST     object counts, comma-separated, each "
	    "100..1e8, as 10000\n"
	    "                   or 1e4 (default 1e4,1e5,1e6,1e7)\n"
	    "  --chunk-bytes N  object size and slot alignment, a power "
	    "of two >= 64\n"
	    "                   (default 4096; nothing is mapped)\n"
	    "  --samples N      timed requests per figure and size "
	    "(default %u)\n"
	    "  --sized F        size the engine for F (0.05..1) of each "
	    "size's objects, so\n"
	    "                   the fill grows it; where the last growth "
	    "left the key\n"
	    "                   index migrating, lookups then, and the idle "
	    "steps that\n"
	    "                   end it (default 1: sized for all)\n"
	    "  --json           one JSON object per size\n"
	    "  --served         then, per size, a private kvringd with a "
	    "pool of that\n"
	    "                   many chunks, filled by one worker: lookup "
	    "and store\n"
	    "                   through the rings beside a ping, the "
	    "inspector's\n"
	    "                   snapshot, kvringd's memory per object\n"
	    "  --kvringd PATH   kvringd for --served (default: $KVRINGD, "
	    "else beside\n"
	    "                   this binary, else ../server/kvringd)\n"
	    "  --cpu-client N   CPU of the --served worker (default 0; -1: "
	    "none)\n"
	    "  --cpu-server N   CPU of the --served kvringd (default 1; -1: "
	    "none)\n"
	    "  -h, --help       show this help and exit\n",
	    CAP_DEFAULT_SAMPLE);
}

/* One count of --sizes: "10000" or "1e4"; 100..1e8. */
static bool cap_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long m = strtoull(s, &end, 10), v = m;

	if (end == s)
		return false;
	if (*end == 'e' || *end == 'E') {
		unsigned long long e = strtoull(end + 1, &end, 10);

		if (e > 8)
			return false;
		while (e--)
			v *= 10;
	}
	if (*end || v < 100 || v > 100000000ull)
		return false;
	*out = v;
	return true;
}

static bool cap_parse_sizes(const char *arg, struct cap_opts *o)
{
	char buf[256], *save = NULL, *tok;

	if (strlen(arg) >= sizeof(buf))
		return false;
	strcpy(buf, arg);
	o->nsizes = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == CAP_MAX_SIZES ||
		    !cap_parse_size(tok, &o->sizes[o->nsizes]))
			return false;
		o->nsizes++;
	}
	return o->nsizes > 0;
}

/* 0: run; 1: --help printed; 2: usage error (said). */
static int cap_parse(int argc, char **argv, struct cap_opts *o)
{
	static const struct option longopts[] = {
	    {"sizes", required_argument, NULL, 's'},
	    {"chunk-bytes", required_argument, NULL, 'c'},
	    {"samples", required_argument, NULL, 'n'},
	    {"sized", required_argument, NULL, 'z'},
	    {"json", no_argument, NULL, 'j'},
	    {"served", no_argument, NULL, 'S'},
	    {"kvringd", required_argument, NULL, 'K'},
	    {"cpu-client", required_argument, NULL, 'C'},
	    {"cpu-server", required_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "s:c:n:z:jSK:C:V:h", longopts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			if (!cap_parse_sizes(optarg, o)) {
				fprintf(stderr,
					"kvring-bench capacity: --sizes '%s': "
					"want up to %u comma-separated counts "
					"of 100..1e8, as 1e4,1e5 or 10000\n",
					optarg, CAP_MAX_SIZES);
				return 2;
			}
			break;
		case 'c':
			if (!bench_parse_u64(optarg, 64, 1u << 30,
					     &o->chunk_bytes) ||
			    (o->chunk_bytes & (o->chunk_bytes - 1))) {
				fprintf(stderr,
					"kvring-bench capacity: --chunk-bytes "
					"'%s': want a power of two from 64 to "
					"1G\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			if (!bench_parse_u64(optarg, 100, 100000000ull,
					     &o->samples)) {
				fprintf(stderr,
					"kvring-bench capacity: --samples "
					"'%s': want a count from 100 to 1e8\n",
					optarg);
				return 2;
			}
			break;
		case 'z': {
			char *end;

			o->sized = strtod(optarg, &end);
			if (end == optarg || *end || !(o->sized >= 0.05) ||
			    o->sized > 1) {
				fprintf(stderr,
					"kvring-bench capacity: --sized '%s': "
					"want a fraction of the objects from "
					"0.05 to 1, as 0.9\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'j':
			o->json = true;
			break;
		case 'S':
			o->served = true;
			break;
		case 'K':
			o->kvringd = optarg;
			break;
		case 'C':
		case 'V':
			if (!bench_parse_cpu(optarg, c == 'C'
							 ? &o->cpu_client
							 : &o->cpu_server)) {
				fprintf(stderr,
					"kvring-bench capacity: --%s '%s': "
					"want a CPU number, or -1\n",
					c == 'C' ? "cpu-client" : "cpu-server",
					optarg);
				return 2;
			}
			break;
		case 'h':
			cap_usage(stdout);
			return 1;
		default:
			cap_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvring-bench capacity: unexpected '%s'\n",
			argv[optind]);
		cap_usage(stderr);
		return 2;
	}
	return 0;
}

int bench_capacity_main(int argc, char **argv)
{
	struct cap_opts o = {
	    .sizes = {10000, 100000, 1000000, 10000000},
	    .nsizes = 4,
	    .chunk_bytes = 4096,
	    .samples = CAP_DEFAULT_SAMPLE,
	    .sized = 1,
	    .cpu_client = 0,
	    .cpu_server = bench_nr_cpus() > 1 ? 1 : -1,
	};
	struct cap_served_opts so = {0};
	struct cap_result res[CAP_MAX_SIZES];
	int rc = cap_parse(argc, argv, &o);

	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	bench_clock_init();
	if (!o.json)
		printf("# kvring-bench capacity: chunk_bytes=%" PRIu64
		       " samples=%" PRIu64 "; meta = engine heap in use "
		       "(mallinfo2) and object table written, per object, "
		       "target <= %.0f B; latencies "
		       "in ns, (Nx) = ratio to %" PRIu64
		       " objects, target <= %.1fx\n"
		       "# the inspector's snapshot needs a live server: "
		       "--served measures it; stats_ns is kvr_store_stats()\n"
		       "# miss = one dependent read over an array of meta_B x "
		       "objects on huge pages; lookup_miss, store_miss = p50 "
		       "above the first size's, in misses; lookup16_key = a "
		       "%u-key lookup's p50 per key\n"
		       "%9s %6s %5s %6s %15s %15s %15s %15s %15s %15s %7s %6s "
		       "%11s %10s %15s\n",
		       o.chunk_bytes, o.samples, CAP_META_TARGET, o.sizes[0],
		       CAP_FLAT_TARGET, CAP_BATCH, "objects", "meta_B", "x64",
		       "rss_B", "lookup_p50", "lookup_p99", "store_p50",
		       "store_p99", "evict_p50", "evict_p99", "stats", "miss",
		       "lookup_miss", "store_miss", "lookup16_key");
	for (unsigned i = 0; i < o.nsizes; i++) {
		if (cap_one(&o, o.sizes[i], &res[i]) < 0)
			return BENCH_EXIT_ERR;
		if (o.json)
			cap_print_json(&o, &res[i], &res[0]);
		else
			cap_print_text(&res[i], &res[0]);
		if (!o.json && o.sized < 1)
			cap_print_idle(&res[i]);
		if (!o.json && strcmp(res[i].meta_src, "mallinfo2") != 0)
			printf("# meta_B of %" PRIu64 " objects is the RSS "
			       "delta: mallinfo2 reports nothing here (a "
			       "sanitizer's allocator?)\n",
			       res[i].objects);
		fflush(stdout);
	}
	if (!o.served)
		return BENCH_EXIT_OK;
	memcpy(so.sizes, o.sizes, sizeof(so.sizes));
	so.nsizes = o.nsizes;
	so.samples = o.samples;
	so.json = o.json;
	so.kvringd = o.kvringd;
	so.cpu_client = o.cpu_client;
	so.cpu_server = o.cpu_server;
	if (!o.json)
		printf("\n");
	return bench_capacity_served(&so) < 0 ? BENCH_EXIT_ERR : BENCH_EXIT_OK;
}
