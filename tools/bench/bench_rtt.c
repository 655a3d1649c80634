/* SPDX-License-Identifier: MIT */
/*
 * bench_rtt.c - the rtt_hot and rtt_cold scenarios of kvring-bench: the
 * control round trip of kvring (kvr_ping: a 32-byte request and its
 * 32-byte answer through the channel's rings) beside its floors and peers
 * (bench_peers.h), all with 32-byte messages, the same pinning and the
 * same iteration count, in the same run.
 *
 *   rtt_hot   a private kvringd with --spin-us 20000 (it never sleeps
 *             while pings flow) and a client spinning 100 ms before it
 *             would sleep; the floor is floor_cacheline.
 *   rtt_cold  kvringd with --spin-us 0 (asleep after every batch, woken by
 *             the request doorbell) and a client that pauses --pause-us
 *             (default 1500) before each request and sleeps on its
 *             response doorbell after 1 us; every subject pauses the same
 *             way. The floor is floor_eventfd_uring.
 *
 * The VM moves its two vCPUs between near and far placements every few
 * seconds, so subjects run alternately in short rounds (floor, kvring,
 * then the others) and the kvring/floor ratio is reported per round and
 * as the median over rounds next to the pooled percentiles. After a hot
 * kvring round the bench waits for kvringd's spin to expire, so no
 * subject shares the server CPU with a spinning kvringd.
 *
 * A failed ping or an implausible answer (server clock going backwards)
 * exits 1; a slow figure never does. This file owns these two scenarios
 * only; peers are bench_peers.c, the server bench_server.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/kvring.h>

#include "bench_common.h"
#include "bench_peers.h"
#include "bench_place.h"
#include "bench_plot.h"
#include "bench_server.h"

#define HOT_SERVER_SPIN_US 20000u
#define HOT_CLIENT_SPIN_US 100000u

enum { SUBJ_KVRING = -1 };

/* One measured subject: a peer kind, or kvring itself. */
struct subject {
	int kind; /* enum bench_peer_kind, or SUBJ_KVRING */
	const char *name;
	struct bench_peer *peer;
	uint64_t *all;	   /* rounds * iters samples, ns */
	double *p50_round; /* per round */
};

struct rtt_ctx {
	const char *scenario;
	bool cold;
	struct bench_run_opts o;
	uint64_t iters, pause_ns;
	unsigned rounds;
	struct bench_server srv;
	struct kvr_client *cli;
	uint64_t last_server_ns;
	struct subject subj[6];
	unsigned nsubj;
	struct bench_place *place; /* rtt_hot: the probe of each round */
	int floor;		   /* index of the floor subject */
	int kv;			   /* index of kvring */
};

static int run_subject(struct rtt_ctx *x, struct subject *s, uint64_t n,
		       uint64_t *out)
{
	if (s->kind == SUBJ_KVRING)
		return bench_pings(x->cli, n, x->pause_ns, x->scenario,
				   &x->last_server_ns, out);
	return bench_peer_rtt(s->peer, n, x->pause_ns, out);
}

struct lat {
	double p50, p99, p999, mean;
};

static struct lat lat_sorted(const uint64_t *v, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	return (struct lat){(double)bench_percentile(v, n, 50),
			    (double)bench_percentile(v, n, 99),
			    (double)bench_percentile(v, n, 99.9),
			    n ? sum / (double)n : 0};
}

static void print_line(struct rtt_ctx *x, unsigned round, struct subject *s,
		       struct lat l, size_t samples)
{
	struct subject *fl = &x->subj[x->floor], *kv = &x->subj[x->kv];
	bool all = round == 0;
	double floor_p50 = all ? 0 : fl->p50_round[round - 1];
	double kv_p50 = all ? 0 : kv->p50_round[round - 1];

	if (all) {
		/* Pooled: ratios of pooled p50s. */
		struct lat lf = lat_sorted(fl->all, x->rounds * x->iters);
		struct lat lk = lat_sorted(kv->all, x->rounds * x->iters);

		floor_p50 = lf.p50;
		kv_p50 = lk.p50;
	}
	if (x->o.json) {
		struct bench_json j;

		bench_json_begin(&j, x->scenario, s->name);
		bench_json_u64(&j, "round", round);
		bench_json_u64(&j, "bytes", BENCH_MSG_BYTES);
		bench_json_u64(&j, "chunks", 0);
		bench_json_u64(&j, "workers", 1);
		bench_json_u64(&j, "samples", samples);
		bench_json_u64(&j, "pause_ns", x->pause_ns);
		bench_json_f64(&j, "p50_ns", l.p50);
		bench_json_f64(&j, "p99_ns", l.p99);
		bench_json_f64(&j, "p999_ns", l.p999);
		bench_json_f64(&j, "mean_ns", l.mean);
		bench_json_f64(&j, "ops_per_s", l.mean > 0 ? 1e9 / l.mean : 0);
		if (x->place) {
			struct bench_place pl =
			    all ? bench_place_pool(x->place, x->rounds)
				: x->place[round - 1];

			bench_place_json(&j, &pl);
		}
		if (s != fl)
			bench_json_f64(&j, "ratio_to_floor", l.p50 / floor_p50);
		if (s == kv) {
			for (unsigned i = 0; i < x->nsubj; i++) {
				struct subject *o = &x->subj[i];
				char key[64];
				struct lat lo;

				if (o == kv || o == fl)
					continue;
				lo = all ? lat_sorted(o->all,
						      x->rounds * x->iters)
					 : (struct lat){o->p50_round[round - 1],
							0, 0, 0};
				snprintf(key, sizeof(key), "ratio_to_%s",
					 o->name);
				bench_json_f64(&j, key, l.p50 / lo.p50);
			}
			if (all) {
				double *r = calloc(x->rounds, sizeof(*r));

				for (unsigned i = 0; r && i < x->rounds; i++)
					r[i] =
					    kv->p50_round[i] / fl->p50_round[i];
				if (r)
					bench_json_f64(
					    &j, "ratio_to_floor_median",
					    bench_median_f64(r, x->rounds));
				free(r);
			}
		} else if (s != fl) {
			bench_json_f64(&j, "ratio_to_kvring", l.p50 / kv_p50);
		}
		bench_json_print(&j, stdout);
		return;
	}
	char rnd[16], rf[16] = "-", rk[16] = "-";

	snprintf(rnd, sizeof(rnd), all ? "all" : "%u", round);
	if (s != fl)
		snprintf(rf, sizeof(rf), "%.2f", l.p50 / floor_p50);
	if (s != kv && s != fl)
		snprintf(rk, sizeof(rk), "%.1f", l.p50 / kv_p50);
	printf("%-5s %-20s %9.0f %9.0f %9.0f %9.0f %10s %10s\n", rnd, s->name,
	       l.p50, l.p99, l.p999, l.mean, rf, rk);
}

static void print_header(struct rtt_ctx *x)
{
	if (x->o.json)
		return;
	printf("# kvring-bench %s: cpu_client=%d cpu_server=%d rounds=%u "
	       "iters=%" PRIu64 " msg_bytes=%u pause_us=%" PRIu64
	       " server_spin_us=%s client_spin_us=%u\n",
	       x->scenario, x->o.cpu_client, x->o.cpu_server, x->rounds,
	       x->iters, BENCH_MSG_BYTES, x->pause_ns / 1000,
	       x->o.socket ? "(external)" : (x->cold ? "0" : "20000"),
	       x->cold ? 1u : HOT_CLIENT_SPIN_US);
	printf("# subjects:");
	for (unsigned i = 0; i < x->nsubj; i++)
		printf(" %s", x->subj[i].name);
	if (!bench_peer_built(BENCH_PEER_ZMQ))
		printf(" (zeromq skipped: built without libzmq)");
	printf("\n%-5s %-20s %9s %9s %9s %9s %10s %10s\n", "round", "subject",
	       "p50_ns", "p99_ns", "p999_ns", "mean_ns", "x_floor", "x_kvring");
}

/* Summary against the targets (text mode only). */
static void print_summary(struct rtt_ctx *x)
{
	struct subject *fl = &x->subj[x->floor], *kv = &x->subj[x->kv];
	size_t all = (size_t)x->rounds * x->iters;
	double *r = calloc(x->rounds, sizeof(*r)), med = 0;
	struct lat lk = lat_sorted(kv->all, all);

	for (unsigned i = 0; r && i < x->rounds; i++)
		r[i] = kv->p50_round[i] / fl->p50_round[i];
	if (r)
		med = bench_median_f64(r, x->rounds);
	free(r);
	if (x->o.json)
		return;
	printf("# %s: kvring p50 / %s p50: median of rounds %.2f, pooled "
	       "%.2f (target <= %.1f)\n",
	       x->scenario, fl->name, med,
	       lk.p50 / lat_sorted(fl->all, all).p50, x->cold ? 1.2 : 1.5);
	for (unsigned i = 0; i < x->nsubj; i++) {
		struct subject *s = &x->subj[i];

		if (s == fl || s == kv)
			continue;
		printf("# %s: %s p50 / kvring p50: %.1f\n", x->scenario,
		       s->name, lat_sorted(s->all, all).p50 / lk.p50);
	}
}

/* rtt_hot: round @r's placement, and its busy-poll figures recorded for
 * the per-placement summary. */
static void rtt_place_round(struct rtt_ctx *x, unsigned r)
{
	const struct bench_place *pl = &x->place[r - 1];
	double fl = x->subj[x->floor].p50_round[r - 1];
	double kv = x->subj[x->kv].p50_round[r - 1];

	if (!x->o.json)
		printf("# round %u: placement %s (cache-line probe p50 %.0f "
		       "ns)\n",
		       r, bench_place_name(pl->where), pl->floor_ns);
	bench_place_record("rtt_hot.floor_cacheline.p50_ns", fl, pl, x->o.json);
	bench_place_record("rtt_hot.kvring.p50_ns", kv, pl, x->o.json);
	bench_place_record("rtt_hot.kvring.ratio_to_floor", kv / fl, pl,
			   x->o.json);
}

static int rtt_plot(struct rtt_ctx *x)
{
	struct bench_plot_cdf c[6];
	char name[64], title[160];

	for (unsigned i = 0; i < x->nsubj; i++)
		c[i] = (struct bench_plot_cdf){x->subj[i].name, x->subj[i].all,
					       (size_t)x->rounds * x->iters};
	snprintf(name, sizeof(name), "%s_cdf", x->scenario);
	snprintf(title, sizeof(title),
		 "%s: 32-byte round trip, %u rounds x %" PRIu64
		 " per subject%s",
		 x->scenario, x->rounds, x->iters,
		 x->cold ? " (client pauses, server asleep)"
			 : " (both sides spinning)");
	return bench_plot_cdfs(x->o.plot_dir, name, title, c, x->nsubj);
}

static int add_peer(struct rtt_ctx *x, enum bench_peer_kind k)
{
	struct subject *s = &x->subj[x->nsubj];
	int rc;

	if (!bench_peer_built(k))
		return 0;
	rc = bench_peer_start(k, x->o.cpu_server, 0, &s->peer);
	if (rc < 0) {
		fprintf(stderr, "kvring-bench: %s: start %s: %s\n", x->scenario,
			bench_peer_subject(k), strerror(-rc));
		return rc;
	}
	s->kind = (int)k;
	s->name = bench_peer_subject(k);
	x->nsubj++;
	return 0;
}

/* The per-subject sample arrays, and rtt_hot's probes; 0 or -ENOMEM. */
static int rtt_alloc(struct rtt_ctx *x)
{
	bool oom = false;

	if (!x->cold) {
		x->place = calloc(x->rounds, sizeof(*x->place));
		oom |= !x->place;
	}
	for (unsigned i = 0; i < x->nsubj; i++) {
		x->subj[i].all =
		    calloc((size_t)x->rounds * x->iters, sizeof(uint64_t));
		x->subj[i].p50_round = calloc(x->rounds, sizeof(double));
		if (!x->subj[i].all || !x->subj[i].p50_round)
			oom = true;
	}
	return oom ? -ENOMEM : 0;
}

static int rtt_main(int argc, char **argv, bool cold)
{
	struct rtt_ctx x = {.scenario = cold ? "rtt_cold" : "rtt_hot",
			    .cold = cold};
	uint64_t *tmp = NULL, warm;
	int rc, ret = BENCH_EXIT_ERR;

	rc = bench_run_opts_parse(
	    argc, argv, x.scenario,
	    "  --pause-us N        rtt_cold: client pause before each "
	    "request (1500)\n",
	    &x.o);
	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	x.rounds = x.o.rounds ? x.o.rounds : (x.o.quick ? 3 : 10);
	if (cold)
		x.iters = x.o.iters ? x.o.iters : (x.o.quick ? 40 : 300);
	else
		x.iters = x.o.iters ? x.o.iters : (x.o.quick ? 2000 : 20000);
	x.pause_ns = cold ? (x.o.pause_us ? x.o.pause_us : 1500) * 1000 : 0;
	warm = x.iters / 10 + 10;

	bench_clock_init();
	if (bench_pin_cpu(x.o.cpu_client) < 0)
		fprintf(stderr, "kvring-bench: %s: cannot pin to cpu %d\n",
			x.scenario, x.o.cpu_client);

	/* Subjects: the floor first, kvring second, then the peers. */
	x.floor = 0;
	x.kv = 1;
	if (add_peer(&x, cold ? BENCH_PEER_EVENTFD_URING
			      : BENCH_PEER_CACHELINE) < 0)
		goto out;
	x.subj[x.nsubj++] =
	    (struct subject){.kind = SUBJ_KVRING, .name = "kvring"};
	if ((!cold && add_peer(&x, BENCH_PEER_EVENTFD_URING) < 0) ||
	    add_peer(&x, BENCH_PEER_UDS) < 0 ||
	    add_peer(&x, BENCH_PEER_ZMQ) < 0)
		goto out;

	if (bench_server_start(&x.o, 64ull << 20, cold ? 0 : HOT_SERVER_SPIN_US,
			       4, &x.srv) < 0)
		goto out;
	if (bench_client_connect(&x.srv, 0, cold ? 1 : HOT_CLIENT_SPIN_US,
				 false, &x.cli) < 0)
		goto out;

	tmp = calloc(x.iters + warm, sizeof(*tmp));
	if (!tmp || rtt_alloc(&x) < 0) {
		fprintf(stderr, "kvring-bench: %s: out of memory\n",
			x.scenario);
		goto out;
	}
	print_header(&x);

	for (unsigned r = 1; r <= x.rounds; r++) {
		/* rtt_hot: the placement first (the floor's own peer). */
		if (x.place)
			x.place[r - 1] =
			    bench_place_probe(x.subj[x.floor].peer, -1);
		for (unsigned i = 0; i < x.nsubj; i++) {
			struct subject *s = &x.subj[i];
			uint64_t *dst = s->all + (size_t)(r - 1) * x.iters;
			struct lat l;

			/* Warm-up samples are measured and dropped. */
			if (run_subject(&x, s, warm, tmp) < 0 ||
			    run_subject(&x, s, x.iters, dst) < 0)
				goto out;
			memcpy(tmp, dst, x.iters * sizeof(*tmp));
			bench_sort_u64(tmp, x.iters);
			l = lat_sorted(tmp, x.iters);
			s->p50_round[r - 1] = l.p50;
			/* Let a hot kvringd's spin run out before others. */
			if (s->kind == SUBJ_KVRING && !cold)
				bench_sleep_ns((HOT_SERVER_SPIN_US + 10000ull) *
					       1000ull);
		}
		for (unsigned i = 0; i < x.nsubj; i++) {
			struct subject *s = &x.subj[i];
			struct lat l;

			memcpy(tmp, s->all + (size_t)(r - 1) * x.iters,
			       x.iters * sizeof(*tmp));
			bench_sort_u64(tmp, x.iters);
			l = lat_sorted(tmp, x.iters);
			print_line(&x, r, s, l, x.iters);
		}
		if (x.place)
			rtt_place_round(&x, r);
		fflush(stdout);
	}
	for (unsigned i = 0; i < x.nsubj; i++)
		bench_sort_u64(x.subj[i].all, (size_t)x.rounds * x.iters);
	for (unsigned i = 0; i < x.nsubj; i++)
		print_line(
		    &x, 0, &x.subj[i],
		    lat_sorted(x.subj[i].all, (size_t)x.rounds * x.iters),
		    (size_t)x.rounds * x.iters);
	print_summary(&x);
	if (x.o.plot_dir)
		rtt_plot(&x);
	ret = BENCH_EXIT_OK;
out:
	kvr_close(x.cli);
	bench_server_stop(&x.srv);
	for (unsigned i = 0; i < x.nsubj; i++) {
		bench_peer_stop(x.subj[i].peer);
		free(x.subj[i].all);
		free(x.subj[i].p50_round);
	}
	free(tmp);
	free(x.place);
	return ret;
}

int bench_rtt_hot_main(int argc, char **argv)
{
	return rtt_main(argc, argv, false);
}

int bench_rtt_cold_main(int argc, char **argv)
{
	return rtt_main(argc, argv, true);
}
