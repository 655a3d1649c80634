/* SPDX-License-Identifier: MIT */
/*
 * bench_scale.c - the scale scenario of kvring-bench: how kvringd's
 * control path behaves as workers are added, against one private kvringd
 * (one event-loop thread, --spin-us 20000, pinned to --cpu-server):
 *
 *   one_active   hot ping round trip of one spinning client while 0, 15
 *                or 63 other clients are connected and idle (1, 16, 64
 *                connected), alternated in rounds; ratio to 1 connected
 *                per round and as the median over rounds.
 *   all_active   1, 2, 16 and 64 worker processes pinging at once for a
 *                fixed time (each a separate process and connection, all
 *                pinned to --cpu-client, sleeping on their doorbell after
 *                the default 50 us spin); pooled round trip percentiles
 *                and the aggregate rate.
 *   store_pairs  the server's metadata path for stores: 1 and 2 worker
 *                processes each running synchronous prepare_store +
 *                commit_store pairs of one new 4 KiB key (nothing is
 *                copied: the bytes are not the point), pooled pair
 *                latency and pairs per second. The 64 MiB pool fills
 *                within the run, so LRU eviction is on the path too.
 *   pipelined    one client submitting pings (or 1-key lookups)
 *                asynchronously, up to --depth in flight, reaping
 *                completions in batches: the control operations per
 *                second one server thread answers. Held submits
 *                (kvr_submit_hold, published once per reap) alternated
 *                with publishing every submit (the _each rows). Also two
 *                client processes at once.
 *
 * Every ping answer is checked (status and a forward-moving server clock);
 * a wrong one exits 1, a slow one never does.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <kvring/kvring.h>

#include "bench_common.h"
#include "bench_place.h"
#include "bench_server.h"

#define SCENARIO       "scale"
#define SERVER_SPIN_US 20000u
#define CLIENT_SPIN_US 100000u
#define MAX_PROCS      64u
#define SAMPLE_BUDGET  (4u << 20) /* samples over all processes */

static const unsigned connected_set[] = {1, 16, 64};
static const unsigned active_set[] = {1, 2, 16, 64};

/* Shared block of the all_active and pipelined children. The parent
 * writes end_ns and then go (release); children read go (acquire). */
struct scale_shm {
	_Atomic uint32_t ready;
	_Atomic uint32_t go;
	_Atomic uint32_t done;
	uint32_t pad;
	uint64_t end_ns;
	uint64_t depth; /* pipelined */
	uint32_t op;	/* pipelined: KVR_OP_PING or KVR_OP_LOOKUP */
	uint32_t hold;	/* pipelined: 1 kvr_submit_hold, 0 publish each */
	struct {
		uint64_t count; /* operations completed */
		uint64_t nsamp; /* samples written */
		int64_t err;	/* 0 or -errno */
		uint64_t ns;	/* pipelined: elapsed */
	} proc[MAX_PROCS];
	uint64_t samples[]; /* MAX_PROCS slices of per_proc each */
};

struct scale_ctx {
	struct bench_run_opts o;
	struct bench_server srv;
	struct scale_shm *shm;
	size_t shm_bytes;
	uint64_t per_proc; /* sample slots per process */
	unsigned rounds;
	uint64_t iters;
	uint64_t active_ns;
	uint64_t depth;
	/* The placement of the busy-poll figure emit() prints (NULL: not a
	 * busy-poll figure); set by its caller. */
	const struct bench_place *pl;
};

struct lat {
	double p50, p99, p999;
};

static struct lat lat_of(uint64_t *v, size_t n)
{
	bench_sort_u64(v, n);
	return (struct lat){(double)bench_percentile(v, n, 50),
			    (double)bench_percentile(v, n, 99),
			    (double)bench_percentile(v, n, 99.9)};
}

static void emit(const struct scale_ctx *x, const char *mode,
		 unsigned connected, unsigned active, unsigned round,
		 const struct lat *l, double ops, double ratio,
		 double ratio_med, double ratio_each)
{
	if (x->o.json) {
		struct bench_json j;

		bench_json_begin(&j, SCENARIO, "kvring");
		bench_json_str(&j, "mode", mode);
		bench_json_u64(&j, "round", round);
		bench_json_u64(&j, "bytes", 32);
		bench_json_u64(&j, "chunks", 0);
		bench_json_u64(&j, "workers", connected);
		bench_json_u64(&j, "active", active);
		if (l) {
			bench_json_f64(&j, "p50_ns", l->p50);
			bench_json_f64(&j, "p99_ns", l->p99);
			bench_json_f64(&j, "p999_ns", l->p999);
		}
		if (ops > 0)
			bench_json_f64(&j, "ops_per_s", ops);
		if (ratio > 0)
			bench_json_f64(&j, "ratio_to_1_worker", ratio);
		if (ratio_med > 0)
			bench_json_f64(&j, "ratio_to_1_worker_median",
				       ratio_med);
		if (ratio_each > 0)
			bench_json_f64(&j, "ratio_to_each", ratio_each);
		if (x->pl)
			bench_place_json(&j, x->pl);
		bench_json_print(&j, stdout);
		return;
	}
	char rnd[16], r1[16] = "-", r2[16] = "-", ob[24] = "-";

	snprintf(rnd, sizeof(rnd), round ? "%u" : "all", round);
	if (ratio > 0)
		snprintf(r1, sizeof(r1), "%.3f", ratio);
	if (ratio_med > 0)
		snprintf(r2, sizeof(r2), "%.3f", ratio_med);
	if (ops > 0)
		snprintf(ob, sizeof(ob), "%.4g", ops);
	if (l)
		printf("%-21s %5s %9u %6u %9.0f %9.0f %10.0f %12s %8s %8s\n",
		       mode, rnd, connected, active, l->p50, l->p99, l->p999,
		       ob, r1, r2);
	else
		printf("%-21s %5s %9u %6u %9s %9s %10s %12s %8s %8s\n", mode,
		       rnd, connected, active, "-", "-", "-", ob, r1, r2);
}

/* ---- one_active -----------------------------------------------------------
 */

/*
 * The placement probe before a busy-poll cell: first the server's spin
 * after the last request runs out (it would share the server CPU with
 * the probe's echo child), then a short cache-line ping-pong.
 */
static struct bench_place scale_probe(struct scale_ctx *x, const char *what)
{
	struct bench_place p;

	bench_sleep_ns((SERVER_SPIN_US + 10000ull) * 1000ull);
	p = bench_place_probe(NULL, x->o.cpu_server);
	if (!x->o.json)
		printf("# scale: %s: placement %s (cache-line probe p50 %.0f "
		       "ns)\n",
		       what, bench_place_name(p.where), p.floor_ns);
	return p;
}

/* Records one_active's round figures for the per-placement summary. */
static void one_active_record(const struct scale_ctx *x, unsigned k, double p50,
			      double ratio)
{
	char name[64];

	snprintf(name, sizeof(name), "scale.one_active_%u.p50_ns",
		 connected_set[k]);
	bench_place_record(name, p50, x->pl, x->o.json);
	if (k) {
		snprintf(name, sizeof(name),
			 "scale.one_active_%u.ratio_to_1_worker",
			 connected_set[k]);
		bench_place_record(name, ratio, x->pl, x->o.json);
	}
}

static int one_active(struct scale_ctx *x)
{
	const unsigned nc = sizeof(connected_set) / sizeof(connected_set[0]);
	struct kvr_client *main_c = NULL, *idle[MAX_PROCS] = {0};
	uint64_t *all[3] = {0}, *tmp = NULL, last = 0;
	double *p50[3] = {0};
	struct bench_place *place = NULL, all_pl;
	uint64_t warm = x->iters / 10 + 10;
	int rc = -ENOMEM;

	for (unsigned k = 0; k < nc; k++) {
		all[k] = calloc((size_t)x->rounds * x->iters, sizeof(uint64_t));
		p50[k] = calloc(x->rounds, sizeof(double));
		if (!all[k] || !p50[k])
			goto out;
	}
	tmp = calloc(x->iters + warm, sizeof(uint64_t));
	place = calloc(x->rounds, sizeof(*place));
	if (!tmp || !place)
		goto out;
	rc = bench_client_connect(&x->srv, 0, CLIENT_SPIN_US, true, &main_c);
	if (rc < 0)
		goto out;
	for (unsigned r = 1; r <= x->rounds; r++) {
		char what[32];

		snprintf(what, sizeof(what), "one_active round %u", r);
		place[r - 1] = scale_probe(x, what);
		x->pl = &place[r - 1];
		for (unsigned k = 0; k < nc; k++) {
			unsigned want = connected_set[k] - 1;
			uint64_t *dst = all[k] + (size_t)(r - 1) * x->iters;
			struct lat l;

			for (unsigned i = 0; i < want; i++) {
				rc = bench_client_connect(&x->srv, 0, 50, true,
							  &idle[i]);
				if (rc < 0)
					goto out;
			}
			rc =
			    bench_pings(main_c, warm, 0, SCENARIO, &last, NULL);
			if (rc == 0)
				rc = bench_pings(main_c, x->iters, 0, SCENARIO,
						 &last, dst);
			for (unsigned i = 0; i < want; i++) {
				kvr_close(idle[i]);
				idle[i] = NULL;
			}
			if (rc < 0)
				goto out;
			memcpy(tmp, dst, x->iters * sizeof(*tmp));
			l = lat_of(tmp, x->iters);
			p50[k][r - 1] = l.p50;
			emit(x, "one_active", connected_set[k], 1, r, &l, 0,
			     k ? l.p50 / p50[0][r - 1] : 0, 0, 0);
			one_active_record(x, k, l.p50,
					  k ? l.p50 / p50[0][r - 1] : 0);
		}
	}
	all_pl = bench_place_pool(place, x->rounds);
	x->pl = &all_pl;
	for (unsigned k = 0; k < nc; k++) {
		size_t n = (size_t)x->rounds * x->iters;
		struct lat l = lat_of(all[k], n), l1 = lat_of(all[0], n);
		double med = 0;

		if (k) {
			double *rr = calloc(x->rounds, sizeof(double));

			for (unsigned r = 0; rr && r < x->rounds; r++)
				rr[r] = p50[k][r] / p50[0][r];
			med = rr ? bench_median_f64(rr, x->rounds) : 0;
			free(rr);
		}
		emit(x, "one_active", connected_set[k], 1, 0, &l, 0,
		     k ? l.p50 / l1.p50 : 0, med, 0);
		if (k == nc - 1 && !x->o.json)
			printf("# scale: hot p50 with %u connected / with 1: "
			       "median of rounds %.3f, pooled %.3f (target "
			       "<= 1.1)\n",
			       connected_set[k], med, l.p50 / l1.p50);
	}
	rc = 0;
out:
	x->pl = NULL;
	free(place);
	for (unsigned i = 0; i < MAX_PROCS; i++)
		kvr_close(idle[i]);
	kvr_close(main_c);
	for (unsigned k = 0; k < nc; k++) {
		free(all[k]);
		free(p50[k]);
	}
	free(tmp);
	return rc;
}

/* ---- children: all_active and pipelined ------------------------------------
 */

/*
 * The start every child shares: die with the parent, pin, connect with
 * client spin @spin_us, count itself ready (exit 1 with its error when the
 * connect failed) and wait for go. Returns the connected client.
 */
static struct kvr_client *child_join(struct scale_ctx *x, unsigned idx,
				     uint32_t spin_us)
{
	struct scale_shm *s = x->shm;
	struct kvr_client *c = NULL;
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	bench_pin_cpu(x->o.cpu_client);
	rc = bench_client_connect(&x->srv, 0, spin_us, true, &c);
	if (rc < 0) {
		s->proc[idx].err = rc;
		/* R-BS1: err before ready; pairs with A-BS1 in
		 * run_children(). */
		atomic_fetch_add_explicit(&s->ready, 1, memory_order_release);
		_exit(1);
	}
	/* R-BS1: pairs with A-BS1 in run_children(). */
	atomic_fetch_add_explicit(&s->ready, 1, memory_order_release);
	/* A-BS2: end_ns was written before go; pairs with R-BS2 in
	 * run_children(). */
	while (!atomic_load_explicit(&s->go, memory_order_acquire))
		usleep(100);
	return c;
}

static void child_active(struct scale_ctx *x, unsigned idx)
{
	struct scale_shm *s = x->shm;
	uint64_t *samp = s->samples + idx * x->per_proc, n = 0, last = 0;
	struct kvr_client *c;
	int rc = 0;

	c = child_join(x, idx, 50);
	while (kvr_clock_now_ns() < s->end_ns) {
		uint64_t v;

		rc = bench_pings(c, 1, 0, SCENARIO, &last, &v);
		if (rc < 0) {
			s->proc[idx].err = rc;
			break;
		}
		if (n < x->per_proc)
			samp[n] = v;
		n++;
	}
	s->proc[idx].count = n;
	s->proc[idx].nsamp = n < x->per_proc ? n : x->per_proc;
	kvr_close(c);
	/* R-BS3: the results before done. Nothing reads done today: the
	 * parent reads the results after waitpid(), which orders them. */
	atomic_fetch_add_explicit(&s->done, 1, memory_order_release);
	_exit(rc < 0 ? 1 : 0);
}

/* Synchronous prepare+commit pairs of fresh keys until end_ns. */
static void child_store(struct scale_ctx *x, unsigned idx)
{
	struct scale_shm *s = x->shm;
	uint64_t *samp = s->samples + idx * x->per_proc, n = 0;
	const uint64_t size = 4096;
	struct kvr_client *c;
	int rc = 0;

	c = child_join(x, idx, CLIENT_SPIN_US);
	while (kvr_clock_now_ns() < s->end_ns) {
		/* Distinct key spaces per process: every prepare reserves. */
		struct kvr_key k = bench_key((uint64_t)(idx + 1) << 40 | n);
		struct kvr_xfer xf = {0};
		uint64_t t0 = kvr_clock_now_ns();

		rc = kvr_prepare_store(c, &k, &size, 1, &xf);
		if (rc == 0 &&
		    (xf.nslots != 1 || xf.slots[0].status != KVR_SLOT_OK ||
		     xf.slots[0].len != size))
			rc = -EBADMSG; /* a fresh key must get a slot */
		if (rc == 0)
			rc = kvr_commit_store(c, &xf);
		if (rc < 0) {
			fprintf(stderr,
				"kvring-bench: scale: store pair: %s "
				"(%s)\n",
				strerror(-rc), kvr_client_errmsg(c));
			kvr_xfer_free(&xf);
			s->proc[idx].err = rc;
			break;
		}
		if (n < x->per_proc)
			samp[n] = kvr_clock_now_ns() - t0;
		n++;
	}
	s->proc[idx].count = n;
	s->proc[idx].nsamp = n < x->per_proc ? n : x->per_proc;
	kvr_close(c);
	_exit(rc < 0 ? 1 : 0);
}

static void child_pipe(struct scale_ctx *x, unsigned idx)
{
	struct scale_shm *s = x->shm;
	struct kvr_client *c;
	int rc = 0;

	c = child_join(x, idx, CLIENT_SPIN_US);
	rc = bench_pipeline(c, s->depth, s->op, s->hold != 0, s->end_ns,
			    SCENARIO, &s->proc[idx].count, &s->proc[idx].ns);
	s->proc[idx].err = rc;
	kvr_close(c);
	_exit(rc < 0 ? 1 : 0);
}

/* Forks @n children running @fn, starts them together for @run_ns. */
static int run_children(struct scale_ctx *x, unsigned n,
			void (*fn)(struct scale_ctx *, unsigned),
			uint64_t run_ns)
{
	struct scale_shm *s = x->shm;
	pid_t pids[MAX_PROCS];
	int rc = 0;

	/* Relaxed: no child exists yet; fork() orders these for them. */
	atomic_store_explicit(&s->ready, 0, memory_order_relaxed);
	atomic_store_explicit(&s->go, 0, memory_order_relaxed);
	atomic_store_explicit(&s->done, 0, memory_order_relaxed);
	memset(s->proc, 0, sizeof(s->proc));
	fflush(NULL);
	for (unsigned i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			fn(x, i);
		if (pids[i] < 0) {
			rc = -errno;
			n = i;
			break;
		}
	}
	if (rc == 0) {
		uint64_t t0 = kvr_clock_now_ns();

		/* A-BS1: pairs with R-BS1 in each child. */
		while (atomic_load_explicit(&s->ready, memory_order_acquire) <
		       n) {
			if (kvr_clock_now_ns() - t0 > 60ull * 1000000000ull) {
				rc = -ETIMEDOUT;
				break;
			}
			usleep(1000);
		}
	}
	s->end_ns = kvr_clock_now_ns() + run_ns + 2000000ull;
	/* R-BS2: end_ns and parameters before go; pairs with A-BS2 in
	 * each child. */
	atomic_store_explicit(&s->go, 1, memory_order_release);
	for (unsigned i = 0; i < n; i++) {
		int st = bench_wait_child(pids[i]);

		if (st != 0 && rc == 0)
			rc = s->proc[i].err ? (int)s->proc[i].err : -ECHILD;
	}
	return rc;
}

/*
 * One cell of @n children running @child for active_ns: every child's
 * samples pooled into one latency, their completions summed into ops/s,
 * emitted as @mode with @n workers all active.
 */
static int pooled_cell(struct scale_ctx *x, unsigned n,
		       void (*child)(struct scale_ctx *, unsigned),
		       const char *mode)
{
	uint64_t total = 0, ns = 0, *pool = x->shm->samples;
	struct lat l;
	int rc;

	x->per_proc = SAMPLE_BUDGET / n;
	rc = run_children(x, n, child, x->active_ns);
	if (rc < 0) {
		fprintf(stderr,
			"kvring-bench: scale: %s with %u workers failed: %s\n",
			mode, n, strerror(-rc));
		return rc;
	}
	/* Compact every child's samples into one pooled array. */
	for (unsigned i = 0; i < n; i++) {
		memmove(pool + ns, x->shm->samples + i * x->per_proc,
			x->shm->proc[i].nsamp * sizeof(uint64_t));
		ns += x->shm->proc[i].nsamp;
		total += x->shm->proc[i].count;
	}
	l = lat_of(pool, ns);
	emit(x, mode, n, n, 0, &l, (double)total * 1e9 / (double)x->active_ns,
	     0, 0, 0);
	return 0;
}

static int all_active(struct scale_ctx *x)
{
	const unsigned na = sizeof(active_set) / sizeof(active_set[0]);

	for (unsigned k = 0; k < na; k++) {
		int rc =
		    pooled_cell(x, active_set[k], child_active, "all_active");

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* One pipelined run of @procs clients for @ns; the summed ops/s. */
static int pipe_run(struct scale_ctx *x, const char *mode, uint32_t op,
		    unsigned procs, uint32_t hold, uint64_t ns, double *ops)
{
	int rc;

	x->shm->depth = x->depth;
	x->shm->op = op;
	x->shm->hold = hold;
	rc = run_children(x, procs, child_pipe, ns);
	if (rc < 0) {
		fprintf(stderr, "kvring-bench: scale: %s failed: %s\n", mode,
			strerror(-rc));
		return rc;
	}
	*ops = 0;
	for (unsigned i = 0; i < procs; i++)
		if (x->shm->proc[i].ns)
			*ops += (double)x->shm->proc[i].count * 1e9 /
				(double)x->shm->proc[i].ns;
	return 0;
}

/*
 * The one-client cells alternate held submits (kvr_submit_hold, the
 * pipelined_ping/_lookup rows) with publishing every submit (the _each
 * rows, the same-run baseline), PIPE_ROUNDS times each for a fifth of the
 * time, so that a neighbour's load hits both alike; each row is the
 * median over its rounds, and a held row carries the median of the
 * per-round ratios to its _each row (ratio_to_each). Two clients at
 * once run held, once.
 */
#define PIPE_ROUNDS 5u

/* One pipelined round's figures, for the per-placement summary. */
static void pipe_record(const struct scale_ctx *x, const char *mode,
			double held, double each, double ratio,
			const struct bench_place *pl)
{
	char name[64];

	snprintf(name, sizeof(name), "scale.%s.ops_s", mode);
	bench_place_record(name, held, pl, x->o.json);
	snprintf(name, sizeof(name), "scale.%s_each.ops_s", mode);
	bench_place_record(name, each, pl, x->o.json);
	snprintf(name, sizeof(name), "scale.%s.ratio_to_each", mode);
	bench_place_record(name, ratio, pl, x->o.json);
}

static int pipelined(struct scale_ctx *x)
{
	static const struct {
		const char *mode, *each;
		uint32_t op;
	} cells[] = {
	    {"pipelined_ping", "pipelined_ping_each", KVR_OP_PING},
	    {"pipelined_lookup", "pipelined_lookup_each", KVR_OP_LOOKUP},
	};
	uint64_t ns = x->active_ns / PIPE_ROUNDS;

	for (unsigned k = 0; k < sizeof(cells) / sizeof(cells[0]); k++) {
		double held[PIPE_ROUNDS], each[PIPE_ROUNDS], ratio[PIPE_ROUNDS],
		    mh, me, mr;
		struct bench_place place[PIPE_ROUNDS], pl;
		int rc;

		for (unsigned r = 0; r < PIPE_ROUNDS; r++) {
			place[r] = scale_probe(x, cells[k].mode);
			rc = pipe_run(x, cells[k].mode, cells[k].op, 1, 1, ns,
				      &held[r]);
			if (rc == 0)
				rc = pipe_run(x, cells[k].each, cells[k].op, 1,
					      0, ns, &each[r]);
			if (rc < 0)
				return rc;
			ratio[r] = each[r] > 0 ? held[r] / each[r] : 0;
			pipe_record(x, cells[k].mode, held[r], each[r],
				    ratio[r], &place[r]);
		}
		mh = bench_median_f64(held, PIPE_ROUNDS);
		me = bench_median_f64(each, PIPE_ROUNDS);
		mr = bench_median_f64(ratio, PIPE_ROUNDS);
		/* The medians carry the pooled placement of their rounds. */
		pl = bench_place_pool(place, PIPE_ROUNDS);
		x->pl = &pl;
		emit(x, cells[k].mode, 1, 1, 0, NULL, mh, 0, 0, mr);
		emit(x, cells[k].each, 1, 1, 0, NULL, me, 0, 0, 0);
		x->pl = NULL;
		if (!x->o.json)
			printf("# scale: %s with 1 client, depth %" PRIu64
			       ": %.3g server ops/s with held submits "
			       "published per reap, %.3g publishing each "
			       "submit (median of %u alternated rounds; "
			       "held/each %.3f; target >= 1e7 lookups)\n",
			       cells[k].mode, x->depth, mh, me, PIPE_ROUNDS,
			       mr);
	}
	{
		double ops;
		struct bench_place pl = scale_probe(x, "pipelined_ping x2");
		int rc = pipe_run(x, "pipelined_ping", KVR_OP_PING, 2, 1,
				  x->active_ns, &ops);

		if (rc < 0)
			return rc;
		x->pl = &pl;
		emit(x, "pipelined_ping", 2, 2, 0, NULL, ops, 0, 0, 0);
		x->pl = NULL;
		bench_place_record("scale.pipelined_ping_2_clients.ops_s", ops,
				   &pl, x->o.json);
		if (!x->o.json)
			printf("# scale: pipelined_ping with 2 clients, depth "
			       "%" PRIu64 ", held submits: %.3g server "
			       "ops/s\n",
			       x->depth, ops);
	}
	return 0;
}

static int store_pairs(struct scale_ctx *x)
{
	for (unsigned n = 1; n <= 2; n++) {
		int rc = pooled_cell(x, n, child_store, "store_pairs");

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* --only PART: run one part of the scenario. */
static bool want(const struct scale_ctx *x, const char *part)
{
	return !x->o.only || strcmp(x->o.only, part) == 0;
}

int bench_scale_main(int argc, char **argv)
{
	struct scale_ctx x;
	int rc, ret = BENCH_EXIT_ERR;

	memset(&x, 0, sizeof(x));
	rc = bench_run_opts_parse(
	    argc, argv, SCENARIO,
	    "  --only PART         one_active, all_active, "
	    "store_pairs or pipelined\n"
	    "  (one_active: --rounds, --iters; "
	    "all_active and pipelined run 1 s each, "
	    "0.3 s with --quick)\n",
	    &x.o);
	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	x.rounds = x.o.rounds ? x.o.rounds : (x.o.quick ? 3 : 8);
	x.iters = x.o.iters ? x.o.iters : (x.o.quick ? 5000 : 20000);
	x.active_ns = x.o.quick ? 300000000ull : 1000000000ull;
	x.depth = 256;
	bench_clock_init();
	if (bench_pin_cpu(x.o.cpu_client) < 0)
		fprintf(stderr, "kvring-bench: scale: cannot pin to cpu %d\n",
			x.o.cpu_client);
	x.shm_bytes =
	    sizeof(struct scale_shm) + (size_t)SAMPLE_BUDGET * sizeof(uint64_t);
	x.shm = bench_shm_map(x.shm_bytes);
	if (!x.shm) {
		fprintf(stderr, "kvring-bench: scale: out of memory\n");
		return BENCH_EXIT_ERR;
	}
	if (bench_server_start(&x.o, 64ull << 20, SERVER_SPIN_US, MAX_PROCS + 8,
			       &x.srv) < 0)
		goto out;
	if (!x.o.json) {
		printf("# kvring-bench scale: cpu_client=%d cpu_server=%d "
		       "rounds=%u iters=%" PRIu64 " server_spin_us=%u "
		       "(all clients on cpu_client)\n",
		       x.o.cpu_client, x.o.cpu_server, x.rounds, x.iters,
		       SERVER_SPIN_US);
		printf("%-21s %5s %9s %6s %9s %9s %10s %12s %8s %8s\n", "mode",
		       "round", "connected", "active", "p50_ns", "p99_ns",
		       "p999_ns", "ops_per_s", "x_1", "x_1_med");
	}
	/* Children first: forked before this process holds a client. */
	if ((want(&x, "all_active") && all_active(&x) < 0) ||
	    (want(&x, "store_pairs") && store_pairs(&x) < 0) ||
	    (want(&x, "pipelined") && pipelined(&x) < 0) ||
	    (want(&x, "one_active") && one_active(&x) < 0))
		goto out;
	ret = BENCH_EXIT_OK;
out:
	bench_server_stop(&x.srv);
	bench_shm_unmap(x.shm, x.shm_bytes);
	return ret;
}
