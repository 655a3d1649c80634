/* SPDX-License-Identifier: MIT */
/*
 * bench_ring.c - the `ring` scenario of kvring-bench: the SPSC ring between
 * two processes (fork), pinned to two CPUs. It measures
 *   - the round trip of one record (ping on one ring, echoed back on a
 *     second ring) for 64-byte and 4 KiB payloads: p50, p99, p99.9;
 *   - one-way batched throughput for 64-byte and 4 KiB payloads;
 *   - a floor: two processes bouncing a counter on one shared cache line,
 *     with the same pinning, the cheapest possible round trip;
 *   - a second floor, "floor_2line": each side writes a 64-byte message
 *     line and then a flag on another line, which is the least any
 *     protocol that publishes data by a position (as the ring does) must
 *     move; the ring's overhead over this one is its own.
 * The VM flips between near and far core placement within seconds, so the
 * floor and the ring are measured alternately in several rounds and the
 * ratio is reported per round and overall. Every record carries its
 * sequence number (first and last word); a wrong one fails the run (exit
 * 1). A slow run never fails. This file owns the scenario's options,
 * setup, orchestration and reporting; the measurement loops of both
 * processes are in bench_ring_peer.c, shared helpers in bench_common.c.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kvring/ring.h>

#include "bench_common.h"
#include "bench_place.h"
#include "bench_ring.h"

#define SCENARIO "ring"

/* ---- reporting -------------------------------------------------------- */

struct lat {
	double p50, p99, p999;
};

/* Sorts @v (ticks) and returns its percentiles in ns. */
static struct lat lat_of(uint64_t *v, size_t n)
{
	bench_sort_u64(v, n);
	return (struct lat){
	    bench_ticks_to_ns(bench_percentile(v, n, 50)),
	    bench_ticks_to_ns(bench_percentile(v, n, 99)),
	    bench_ticks_to_ns(bench_percentile(v, n, 99.9)),
	};
}

static void print_header(const struct bench_ring_opts *o)
{
	if (o->json)
		return;
	printf("# kvring-bench ring: cpu_producer=%d cpu_consumer=%d "
	       "rounds=%u iters=%" PRIu64 " ring_bytes=%u bulk_bytes=%u "
	       "batch=%u sizes=",
	       o->cpu_p, o->cpu_c, o->rounds, o->iters, o->ring_bytes,
	       o->bulk_bytes, o->batch);
	for (unsigned i = 0; i < o->nr_sizes; i++)
		printf("%s%u", i ? "," : "", o->sizes[i]);
	printf("\n");
	printf("%-5s %-16s %-6s %5s %9s %9s %9s %7s %7s %12s %8s\n", "round",
	       "subject", "mode", "bytes", "p50_ns", "p99_ns", "p999_ns",
	       "ratio", "ratio2", "ops_per_s", "GB/s");
}

/* p50 ratios printed next to a latency; a negative value means "none". */
struct ratios {
	double floor;  /* to floor_cacheline of the same round (or pooled) */
	double floor2; /* to floor_2line of the same round (or pooled) */
	double median; /* median over rounds of the per-round floor ratio */
};

#define NO_RATIOS ((struct ratios){-1, -1, -1})

/* One latency line; @round 0 is "all rounds". */
static void print_lat(const struct bench_ring_opts *o, unsigned round,
		      const struct bench_place *pl, const char *subject,
		      uint32_t bytes, struct lat l, struct ratios ra)
{
	if (o->json) {
		struct bench_json j;

		bench_json_begin(&j, SCENARIO, subject);
		bench_json_str(&j, "mode", "rtt");
		bench_json_u64(&j, "round", round);
		bench_json_u64(&j, "bytes", bytes);
		bench_json_u64(&j, "samples",
			       o->iters * (round ? 1 : o->rounds));
		bench_json_f64(&j, "p50_ns", l.p50);
		bench_json_f64(&j, "p99_ns", l.p99);
		bench_json_f64(&j, "p999_ns", l.p999);
		bench_json_f64(&j, "ops_per_s", 1e9 / l.p50);
		if (ra.floor >= 0)
			bench_json_f64(&j, "ratio_to_floor", ra.floor);
		if (ra.floor2 >= 0)
			bench_json_f64(&j, "ratio_to_floor_2line", ra.floor2);
		if (ra.median >= 0)
			bench_json_f64(&j, "ratio_median_of_rounds", ra.median);
		bench_place_json(&j, pl);
		bench_json_print(&j, stdout);
		return;
	}
	char rnd[16], rat[16], rat2[16];

	snprintf(rnd, sizeof(rnd), round ? "%u" : "all", round);
	snprintf(rat, sizeof(rat), ra.floor >= 0 ? "%.2f" : "-", ra.floor);
	snprintf(rat2, sizeof(rat2), ra.floor2 >= 0 ? "%.2f" : "-", ra.floor2);
	printf("%-5s %-16s %-6s %5u %9.1f %9.1f %9.1f %7s %7s %12s %8s\n", rnd,
	       subject, "rtt", bytes, l.p50, l.p99, l.p999, rat, rat2, "-",
	       "-");
}

static void print_tput(const struct bench_ring_opts *o, unsigned round,
		       const struct bench_place *pl, uint32_t bytes, uint64_t n,
		       uint64_t ns)
{
	double ops = (double)n * 1e9 / (double)ns;
	double gbps = ops * bytes / 1e9;

	if (o->json) {
		struct bench_json j;

		bench_json_begin(&j, SCENARIO, "kvring");
		bench_json_str(&j, "mode", "oneway");
		bench_json_u64(&j, "round", round);
		bench_json_u64(&j, "bytes", bytes);
		bench_json_u64(&j, "records", n);
		bench_json_u64(&j, "batch", o->batch);
		bench_json_f64(&j, "ops_per_s", ops);
		bench_json_f64(&j, "gbps", gbps);
		bench_place_json(&j, pl);
		bench_json_print(&j, stdout);
		return;
	}
	char rnd[16];

	snprintf(rnd, sizeof(rnd), round ? "%u" : "all", round);
	printf("%-5s %-16s %-6s %5u %9s %9s %9s %7s %7s %12.4g %8.2f\n", rnd,
	       "kvring", "oneway", bytes, "-", "-", "-", "-", "-", ops, gbps);
}

/* Fewer records for big payloads: 4 KiB runs 1/16 of the 64-byte count. */
static uint64_t tput_div(uint32_t bytes)
{
	return bytes >= 512 ? bytes / 256 : 1;
}

/* ---- orchestration ---------------------------------------------------- */

struct results {
	uint64_t *floor;	    /* rounds * iters ticks */
	uint64_t *floor2;	    /* rounds * iters ticks */
	uint64_t *rtt[NR_SIZES];    /* rounds * iters ticks */
	uint64_t tput_ns[NR_SIZES]; /* summed over rounds */
	uint64_t tput_n[NR_SIZES];
	double *ratio[NR_SIZES]; /* per round */
	struct bench_place *pl;	 /* per round: the probe before it */
};

/*
 * The placement probe of a round: BENCH_PLACE_PROBE_N round trips of one
 * line each way with the child, the pattern of every other scenario's
 * probe peer (the child spins on the consumer CPU, where a probe peer
 * would compete with it), before the round's figures; its p50 names the
 * placement. @tmp holds the samples.
 */
static int ring_probe(struct bench_ring_side *s,
		      const struct bench_ring_opts *o, unsigned round,
		      struct bench_place *out, uint64_t *tmp)
{
	uint64_t n = BENCH_PLACE_PROBE_N;

	if (bench_ring_probe(s, n / 4, n, tmp) < 0)
		return -1;
	*out = bench_place_of(lat_of(tmp, n).p50);
	if (!o->json)
		printf("# round %u: placement %s (cache-line probe p50 %.0f "
		       "ns)\n",
		       round, bench_place_name(out->where), out->floor_ns);
	return 0;
}

/* Round @round's busy-poll figures, for the per-placement summary. */
static void ring_record(const struct bench_ring_opts *o,
			const struct results *r, unsigned round,
			double floor_p50, const double *p50)
{
	const struct bench_place *pl = &r->pl[round - 1];
	char name[64];

	bench_place_record("ring.floor_cacheline.p50_ns", floor_p50, pl,
			   o->json);
	for (unsigned i = 0; i < o->nr_sizes; i++) {
		snprintf(name, sizeof(name), "ring.kvring_%u.p50_ns",
			 o->sizes[i]);
		bench_place_record(name, p50[i], pl, o->json);
		snprintf(name, sizeof(name), "ring.kvring_%u.ratio_to_floor",
			 o->sizes[i]);
		bench_place_record(name, r->ratio[i][round - 1], pl, o->json);
	}
}

static int parent_main(struct bench_ring_side *s,
		       const struct bench_ring_opts *o)
{
	uint64_t warm = o->iters / 10 + 100, *tmp;
	size_t per = o->iters, all = per * o->rounds;
	struct results r = {0};
	struct bench_place *pl, all_pl;
	double p50[NR_SIZES];
	char name[64];
	int rc = -1, i;

	tmp = calloc(all > BENCH_PLACE_PROBE_N ? all : BENCH_PLACE_PROBE_N,
		     sizeof(*tmp));
	r.floor = calloc(all, sizeof(*r.floor));
	r.floor2 = calloc(all, sizeof(*r.floor2));
	for (i = 0; i < (int)o->nr_sizes; i++) {
		r.rtt[i] = calloc(all, sizeof(*r.rtt[i]));
		r.ratio[i] = calloc(o->rounds, sizeof(double));
		if (!r.rtt[i] || !r.ratio[i])
			goto out;
	}
	r.pl = pl = calloc(o->rounds, sizeof(*pl));
	if (!tmp || !r.floor || !r.floor2 || !pl)
		goto out;
	print_header(o);

	for (unsigned round = 1; round <= o->rounds; round++) {
		uint64_t *fl = r.floor + (round - 1) * per;
		uint64_t *fl2 = r.floor2 + (round - 1) * per;
		struct lat lf, lf2, lr;

		/* The probe, the floors, then the ring, back to back. */
		if (ring_probe(s, o, round, &pl[round - 1], tmp) < 0 ||
		    bench_ring_floor(s, warm, per, fl) < 0)
			goto out;
		memcpy(tmp, fl, per * sizeof(*tmp));
		lf = lat_of(tmp, per);
		print_lat(o, round, &pl[round - 1], "floor_cacheline", 8, lf,
			  NO_RATIOS);
		if (bench_ring_floor2(s, warm, per, fl2) < 0)
			goto out;
		memcpy(tmp, fl2, per * sizeof(*tmp));
		lf2 = lat_of(tmp, per);
		print_lat(o, round, &pl[round - 1], "floor_2line", 64, lf2,
			  (struct ratios){lf2.p50 / lf.p50, -1, -1});
		for (i = 0; i < (int)o->nr_sizes; i++) {
			uint64_t *rt = r.rtt[i] + (round - 1) * per;

			if (bench_ring_rtt(s, o->sizes[i], warm, per, rt) < 0)
				goto out;
			memcpy(tmp, rt, per * sizeof(*tmp));
			lr = lat_of(tmp, per);
			r.ratio[i][round - 1] = lr.p50 / lf.p50;
			p50[i] = lr.p50;
			print_lat(o, round, &pl[round - 1], "kvring",
				  o->sizes[i], lr,
				  (struct ratios){r.ratio[i][round - 1],
						  lr.p50 / lf2.p50, -1});
		}
		for (i = 0; i < (int)o->nr_sizes; i++) {
			uint64_t n = o->tput_records / tput_div(o->sizes[i]);
			uint64_t ns;

			if (bench_ring_tput(s, o->sizes[i], n, o->batch, &ns) <
			    0)
				goto out;
			r.tput_ns[i] += ns;
			r.tput_n[i] += n;
			print_tput(o, round, &pl[round - 1], o->sizes[i], n,
				   ns);
			snprintf(name, sizeof(name),
				 "ring.kvring_%u.oneway_ops_s", o->sizes[i]);
			bench_place_record(name, (double)n * 1e9 / (double)ns,
					   &pl[round - 1], o->json);
		}
		ring_record(o, &r, round, lf.p50, p50);
	}
	all_pl = bench_place_pool(pl, o->rounds);

	/* Overall: pooled samples of every round. */
	struct lat lf = lat_of(r.floor, all);
	struct lat lf2 = lat_of(r.floor2, all);

	print_lat(o, 0, &all_pl, "floor_cacheline", 8, lf, NO_RATIOS);
	print_lat(o, 0, &all_pl, "floor_2line", 64, lf2,
		  (struct ratios){lf2.p50 / lf.p50, -1, -1});
	for (i = 0; i < (int)o->nr_sizes; i++) {
		struct lat lr = lat_of(r.rtt[i], all);

		print_lat(
		    o, 0, &all_pl, "kvring", o->sizes[i], lr,
		    (struct ratios){lr.p50 / lf.p50, lr.p50 / lf2.p50,
				    bench_median_f64(r.ratio[i], o->rounds)});
	}
	for (i = 0; i < (int)o->nr_sizes; i++)
		print_tput(o, 0, &all_pl, o->sizes[i], r.tput_n[i],
			   r.tput_ns[i]);
	rc = 0;
out:
	if (rc < 0 && !r.floor)
		fprintf(stderr, "kvring-bench: ring: out of memory\n");
	free(tmp);
	free(r.pl);
	free(r.floor);
	free(r.floor2);
	for (i = 0; i < (int)o->nr_sizes; i++) {
		free(r.rtt[i]);
		free(r.ratio[i]);
	}
	return rc;
}

/* ---- options and setup ------------------------------------------------ */

static void ring_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: kvring-bench ring [options]\n"
	    "\n"
	    "Round trip (64 B, 4 KiB) and one-way throughput of the SPSC "
	    "ring between\ntwo processes, next to two floors measured in "
	    "the same rounds: a counter\nbounced on one cache line, and a "
	    "64-byte line plus a flag line each way.\n"
	    "\n"
	    "options:\n"
	    "  --json                one JSON object per line and subject\n"
	    "  --iters N             round trips per size per round "
	    "(default 100000)\n"
	    "  --rounds N            alternating rounds (default 5)\n"
	    "  --tput-records N      64-byte records per throughput round "
	    "(default 5000000;\n"
	    "                        4 KiB rounds use N/16)\n"
	    "  --batch N             records per commit/release "
	    "(default 64)\n"
	    "  --sizes LIST          payload bytes, comma-separated, 16..4096 "
	    "(default 64,4096)\n"
	    "  --ring-bytes N        ping/pong ring capacity "
	    "(default 65536)\n"
	    "  --bulk-bytes N        throughput ring capacity "
	    "(default 262144)\n"
	    "  --cpu-producer N      CPU of the parent (default 0)\n"
	    "  --cpu-consumer N      CPU of the child (default 1; -1: "
	    "no pinning)\n"
	    "  -h, --help            show this help and exit\n");
}

/* "64,4096": 1..NR_SIZES payload sizes, each 16..MAX_BYTES. */
static bool parse_sizes(const char *arg, struct bench_ring_opts *o)
{
	char buf[128], *save = NULL, *tok;
	unsigned n = 0;
	uint64_t v;

	if (strlen(arg) >= sizeof(buf))
		return false;
	strcpy(buf, arg);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == NR_SIZES || !bench_parse_u64(tok, 16, MAX_BYTES, &v))
			return false;
		o->sizes[n++] = (uint32_t)v;
	}
	o->nr_sizes = n;
	return n > 0;
}

/*
 * ring_parse - the ring scenario's options into @o (its defaults already
 * there). 0 to run, 1 after --help, 2 on a bad option (said on stderr).
 */
static int ring_parse(int argc, char **argv, struct bench_ring_opts *o)
{
	enum {
		O_JSON = 256,
		O_ITERS,
		O_ROUNDS,
		O_TPUT,
		O_BATCH,
		O_RING,
		O_BULK,
		O_CPUP,
		O_CPUC,
		O_SIZES
	};
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, O_JSON},
	    {"iters", required_argument, NULL, O_ITERS},
	    {"rounds", required_argument, NULL, O_ROUNDS},
	    {"tput-records", required_argument, NULL, O_TPUT},
	    {"batch", required_argument, NULL, O_BATCH},
	    {"ring-bytes", required_argument, NULL, O_RING},
	    {"bulk-bytes", required_argument, NULL, O_BULK},
	    {"cpu-producer", required_argument, NULL, O_CPUP},
	    {"cpu-consumer", required_argument, NULL, O_CPUC},
	    {"sizes", required_argument, NULL, O_SIZES},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case O_JSON:
			o->json = true;
			break;
		case O_ITERS:
			ok = bench_parse_u64(optarg, 1, 100000000, &o->iters);
			break;
		case O_ROUNDS:
			ok = bench_parse_u64(optarg, 1, 1000, &v);
			o->rounds = (unsigned)v;
			break;
		case O_TPUT:
			ok = bench_parse_u64(optarg, 16, UINT64_MAX / 2,
					     &o->tput_records);
			break;
		case O_BATCH:
			ok = bench_parse_u64(optarg, 1, 1u << 20, &v);
			o->batch = (uint32_t)v;
			break;
		case O_RING:
		case O_BULK:
			ok = bench_parse_u64(optarg, 2 * (MAX_BYTES + 8),
					     KVR_RING_MAX_CAP, &v) &&
			     (v & (v - 1)) == 0;
			if (c == O_RING)
				o->ring_bytes = (uint32_t)v;
			else
				o->bulk_bytes = (uint32_t)v;
			break;
		case O_CPUP:
			ok = bench_parse_cpu(optarg, &o->cpu_p);
			break;
		case O_CPUC:
			ok = bench_parse_cpu(optarg, &o->cpu_c);
			break;
		case O_SIZES:
			ok = parse_sizes(optarg, o);
			break;
		case 'h':
			ring_usage(stdout);
			return 1;
		default:
			ring_usage(stderr);
			return 2;
		}
		if (!ok) {
			fprintf(stderr, "kvring-bench: ring: bad value '%s'\n",
				optarg);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvring-bench: ring: unexpected '%s'\n",
			argv[optind]);
		return 2;
	}
	return 0;
}

int bench_ring_main(int argc, char **argv)
{
	struct bench_ring_opts o = {
	    .iters = 100000,
	    .tput_records = 5000000,
	    .rounds = 5,
	    .cpu_p = 0,
	    .cpu_c = bench_nr_cpus() > 1 ? 1 : -1,
	    .ring_bytes = 65536,
	    .bulk_bytes = 262144,
	    .batch = 64,
	    .sizes = {64, 4096},
	    .nr_sizes = 2,
	};
	int c = ring_parse(argc, argv, &o);

	if (c)
		return c == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;

	/* One mapping: control block, ping, pong, bulk, each page-aligned. */
	size_t off_ping = 4096;
	size_t off_pong =
	    off_ping +
	    ((kvr_ring_shm_bytes(o.ring_bytes) + 4095) & ~(size_t)4095);
	size_t off_bulk =
	    off_pong +
	    ((kvr_ring_shm_bytes(o.ring_bytes) + 4095) & ~(size_t)4095);
	size_t total = off_bulk + ((kvr_ring_shm_bytes(o.bulk_bytes) + 4095) &
				   ~(size_t)4095);
	unsigned char *mem = bench_shm_map(total);
	struct bench_ring_side s = {0};
	int rc, status;

	_Static_assert(sizeof(struct bench_ring_ctl_shm) <= 4096,
		       "control block fits");
	if (!mem) {
		fprintf(stderr, "kvring-bench: ring: map %zu bytes: %s\n",
			total, strerror(errno));
		return BENCH_EXIT_ERR;
	}
	s.ctl = (struct bench_ring_ctl_shm *)(void *)mem;
	s.src = aligned_alloc(64, MAX_BYTES);
	s.sink = aligned_alloc(64, MAX_BYTES);
	if (!s.src || !s.sink) {
		fprintf(stderr, "kvring-bench: ring: out of memory\n");
		return BENCH_EXIT_ERR;
	}
	for (uint32_t i = 0; i < MAX_BYTES; i++)
		s.src[i] = (unsigned char)(i * 131u + 7u);
	rc = kvr_ring_format(mem + off_ping, total - off_ping, o.ring_bytes);
	if (rc == 0)
		rc = kvr_ring_format(mem + off_pong, total - off_pong,
				     o.ring_bytes);
	if (rc == 0)
		rc = kvr_ring_format(mem + off_bulk, total - off_bulk,
				     o.bulk_bytes);
	if (rc < 0) {
		fprintf(stderr, "kvring-bench: ring: format: %s\n",
			strerror(-rc));
		return BENCH_EXIT_ERR;
	}
	bench_clock_init();
	fflush(stdout);

	s.child = fork();
	if (s.child < 0) {
		fprintf(stderr, "kvring-bench: ring: fork: %s\n",
			strerror(errno));
		return BENCH_EXIT_ERR;
	}
	if (s.child == 0) {
		/* B: consumer of ping and bulk, producer of pong. */
		rc = kvr_ring_attach_consumer(&s.ping, mem + off_ping,
					      total - off_ping, o.ring_bytes);
		if (rc == 0)
			rc = kvr_ring_attach_producer(&s.pong, mem + off_pong,
						      total - off_pong,
						      o.ring_bytes);
		if (rc == 0)
			rc = kvr_ring_attach_consumer(&s.bulk, mem + off_bulk,
						      total - off_bulk,
						      o.bulk_bytes);
		_exit(rc < 0 ? BENCH_EXIT_ERR : bench_ring_child_main(&s, &o));
	}

	/* A: producer of ping and bulk, consumer of pong. */
	rc = bench_pin_cpu(o.cpu_p);
	if (rc < 0)
		fprintf(stderr, "kvring-bench: ring: pin cpu %d: %s\n", o.cpu_p,
			strerror(-rc));
	if (rc == 0)
		rc = kvr_ring_attach_producer(&s.ping, mem + off_ping,
					      total - off_ping, o.ring_bytes);
	if (rc == 0)
		rc = kvr_ring_attach_consumer(&s.pong, mem + off_pong,
					      total - off_pong, o.ring_bytes);
	if (rc == 0)
		rc = kvr_ring_attach_producer(&s.bulk, mem + off_bulk,
					      total - off_bulk, o.bulk_bytes);
	if (rc == 0)
		rc = parent_main(&s, &o);
	if (rc == 0)
		bench_ring_phase_start(&s, PH_EXIT, 0, 0);
	else if (!s.reaped)
		kill(s.child, SIGKILL); /* our own child, by pid */
	status = s.reaped ? 1 : bench_wait_child(s.child);
	if (rc == 0 && status != 0)
		fprintf(stderr, "kvring-bench: ring: child exited with %d\n",
			status);
	free(s.src);
	free(s.sink);
	bench_shm_unmap(mem, total);
	return rc == 0 && status == 0 ? BENCH_EXIT_OK : BENCH_EXIT_ERR;
}
