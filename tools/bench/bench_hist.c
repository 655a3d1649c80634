/* SPDX-License-Identifier: MIT */
/*
 * bench_hist.c - the hist scenario of kvring-bench: what the latency
 * histograms and cache counters cost, measured against the
 * same build with them switched off, in one run. Two private kvringd
 * instances run side by side: "on" (the defaults: the server times every
 * request, the client one in 64) and "off" (kvringd --no-histograms,
 * client KVRING_RTT_SAMPLE=0). Each round measures, for
 * each side in turn (the first side alternates between rounds):
 *
 *   rtt_hot            --iters kvr_ping round trips, both sides spinning,
 *                      the p50 of the round
 *   pipelined_ping     kvr_submit_ping kept 256 deep for 0.3 s: ops/s
 *   pipelined_lookup   the same with 1-key lookups that miss (they bump
 *                      the cache counters too)
 *
 * and reports per round and as the median of the per-round ratios, beside
 * the pooled figures. Each round starts a fresh pair of servers and
 * clients, in alternating order, so that a process's placement is not
 * mistaken for the histograms' cost. After each side the bench waits for that
 * kvringd's spin to run out, so the two servers never spin at the same time.
 *
 * A failed call or a wrong answer exits 1; a slow figure never does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/kvring.h>

#include "bench_common.h"
#include "bench_place.h"
#include "bench_server.h"

#define HIST_SPIN_US   20000u	    /* kvringd --spin-us: hot */
#define HIST_CLIENT_US 100000u	    /* client spin before sleeping */
#define PIPE_NS	       300000000ull /* each pipelined cell */
#define PIPE_DEPTH     256u

enum { ON = 0, OFF = 1, SIDES = 2 };
static const char *const side_name[SIDES] = {"on", "off"};

struct side {
	struct bench_server srv;
	struct kvr_client *cli;
	uint64_t *all;			     /* rounds * iters RTT samples */
	double *p50, *ping_ops, *lookup_ops; /* per round */
	struct bench_place place[64];	     /* per round: probe before it */
};

static void nap_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/*
 * The placement probe before a side's cells: after @nap (the other side's
 * server was just started and may still spin) a short cache-line
 * ping-pong on the server CPU.
 */
static struct bench_place hist_probe(const struct bench_run_opts *o, bool nap)
{
	if (nap)
		nap_ms(HIST_SPIN_US / 1000 + 10);
	return bench_place_probe(NULL, o->cpu_server);
}

static int ping_rounds(struct side *s, uint64_t n, uint64_t *out)
{
	uint64_t last = 0;

	return bench_pings(s->cli, n, 0, "hist", &last, out);
}

/* @op kept PIPE_DEPTH deep for PIPE_NS; ops/s into *ops. */
static int pipelined(struct side *s, uint32_t op, double *ops)
{
	uint64_t count = 0, ns = 0;
	int rc =
	    bench_pipeline(s->cli, PIPE_DEPTH, op, false,
			   kvr_clock_now_ns() + PIPE_NS, "hist", &count, &ns);

	*ops = ns ? (double)count * 1e9 / (double)ns : 0;
	return rc;
}

static int start_side(const struct bench_run_opts *o, int k, struct side *s)
{
	struct bench_run_opts so = *o;
	int rc;

	so.no_histograms = k == OFF;
	rc = bench_server_start(&so, 64ull << 20, HIST_SPIN_US, 4, &s->srv);
	if (rc < 0)
		return rc;
	/* libkvring reads it at connect: "on" is the shipped default (one
	 * request in 64 timed), "off" times none. */
	if (k == OFF)
		setenv("KVRING_RTT_SAMPLE", "0", 1);
	else
		unsetenv("KVRING_RTT_SAMPLE");
	rc = bench_client_connect(&s->srv, 0, HIST_CLIENT_US, true, &s->cli);
	unsetenv("KVRING_RTT_SAMPLE");
	return rc;
}

static double pct(double on, double off)
{
	return off > 0 ? (on / off - 1.0) * 100.0 : 0.0;
}

/* Side @k's figures of round @r, for the per-placement summary. */
static void hist_record(const struct bench_run_opts *o, const struct side *s,
			int k, unsigned r)
{
	char name[64];

	snprintf(name, sizeof(name), "hist.%s.rtt_p50_ns", side_name[k]);
	bench_place_record(name, s->p50[r], &s->place[r], o->json);
	snprintf(name, sizeof(name), "hist.%s.pipelined_ping_ops_s",
		 side_name[k]);
	bench_place_record(name, s->ping_ops[r], &s->place[r], o->json);
	snprintf(name, sizeof(name), "hist.%s.pipelined_lookup_ops_s",
		 side_name[k]);
	bench_place_record(name, s->lookup_ops[r], &s->place[r], o->json);
}

/* Round @r's figures of both sides: one JSON line or table row each. */
static void print_round(const struct bench_run_opts *o, const struct side *sd,
			unsigned r)
{
	for (int k = 0; k < SIDES; k++) {
		if (o->json) {
			struct bench_json jj;

			bench_json_begin(&jj, "hist", side_name[k]);
			bench_json_u64(&jj, "round", r + 1);
			bench_json_f64(&jj, "rtt_p50_ns", sd[k].p50[r]);
			bench_json_f64(&jj, "pipelined_ping_ops_s",
				       sd[k].ping_ops[r]);
			bench_json_f64(&jj, "pipelined_lookup_ops_s",
				       sd[k].lookup_ops[r]);
			bench_place_json(&jj, &sd[k].place[r]);
			bench_json_print(&jj, stdout);
		} else {
			printf("%-5u %-4s %10.0f %14.0f %16.0f %-4s %5.0f\n",
			       r + 1, side_name[k], sd[k].p50[r],
			       sd[k].ping_ops[r], sd[k].lookup_ops[r],
			       bench_place_name(sd[k].place[r].where),
			       sd[k].place[r].floor_ns);
		}
		hist_record(o, &sd[k], k, r);
	}
}

/*
 * The summary: per side the pooled p50 of every round's pings and the
 * medians of the rounds' ops/s, beside the median of the rounds' on/off
 * ratios (@r_p50, @r_ping, @r_look). Sorts sd[].all and the ratios.
 */
static void print_summary(const struct bench_run_opts *o, struct side *sd,
			  double *r_p50, double *r_ping, double *r_look,
			  unsigned rounds, uint64_t iters)
{
	double pooled[SIDES], ping_med[SIDES], look_med[SIDES];
	double m_p50, m_ping, m_look;

	for (int k = 0; k < SIDES; k++) {
		bench_sort_u64(sd[k].all, rounds * iters);
		pooled[k] = (double)sd[k].all[(rounds * iters + 1) / 2 - 1];
		ping_med[k] = bench_median_f64(sd[k].ping_ops, rounds);
		look_med[k] = bench_median_f64(sd[k].lookup_ops, rounds);
	}
	m_p50 = bench_median_f64(r_p50, rounds);
	m_ping = bench_median_f64(r_ping, rounds);
	m_look = bench_median_f64(r_look, rounds);
	if (o->json) {
		struct bench_json jj;

		bench_json_begin(&jj, "hist", "summary");
		bench_json_f64(&jj, "rtt_p50_ns_on", pooled[ON]);
		bench_json_f64(&jj, "rtt_p50_ns_off", pooled[OFF]);
		bench_json_f64(&jj, "rtt_p50_ratio_median", m_p50);
		bench_json_f64(&jj, "ping_ops_s_on", ping_med[ON]);
		bench_json_f64(&jj, "ping_ops_s_off", ping_med[OFF]);
		bench_json_f64(&jj, "ping_ops_ratio_median", m_ping);
		bench_json_f64(&jj, "lookup_ops_s_on", look_med[ON]);
		bench_json_f64(&jj, "lookup_ops_s_off", look_med[OFF]);
		bench_json_f64(&jj, "lookup_ops_ratio_median", m_look);
		bench_json_print(&jj, stdout);
	} else {
		printf("\n%-22s %12s %12s %9s %22s\n", "figure", "on", "off",
		       "on/off", "median of round ratios");
		printf("%-22s %12.0f %12.0f %+8.1f%% %+21.1f%%\n",
		       "rtt_hot p50 ns (pooled)", pooled[ON], pooled[OFF],
		       pct(pooled[ON], pooled[OFF]), (m_p50 - 1) * 100);
		printf("%-22s %12.0f %12.0f %+8.1f%% %+21.1f%%\n",
		       "pipelined ping ops/s", ping_med[ON], ping_med[OFF],
		       pct(ping_med[ON], ping_med[OFF]), (m_ping - 1) * 100);
		printf("%-22s %12.0f %12.0f %+8.1f%% %+21.1f%%\n",
		       "pipelined lookup ops/s", look_med[ON], look_med[OFF],
		       pct(look_med[ON], look_med[OFF]), (m_look - 1) * 100);
		printf("(ops/s: medians of rounds. Budget: p50 at most "
		       "3%% higher, ops/s at most 3%% lower.)\n");
	}
}

int bench_hist_main(int argc, char **argv)
{
	static const char extra[] =
	    "\nhist: kvringd and libkvring with latency histograms on against "
	    "off\n(--no-histograms), in the same run: hot RTT p50 and "
	    "pipelined ops/s.\nDefaults: --rounds 8 --iters 20000.\n";
	struct bench_run_opts o;
	struct side sd[SIDES] = {0};
	double r_p50[64], r_ping[64], r_look[64];
	uint64_t iters;
	unsigned rounds;
	int rc;

	rc = bench_run_opts_parse(argc, argv, "hist", extra, &o);
	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	if (o.socket) {
		fprintf(stderr, "kvring-bench: hist starts its own two "
				"kvringd; --socket does not apply\n");
		return BENCH_EXIT_USAGE;
	}
	rounds = o.rounds ? o.rounds : o.quick ? 3 : 8;
	if (rounds > 64)
		rounds = 64;
	iters = o.iters ? o.iters : o.quick ? 5000 : 20000;
	bench_clock_init();
	bench_pin_cpu(o.cpu_client);
	for (int k = 0; k < SIDES; k++) {
		sd[k].all = calloc(rounds * iters, sizeof(uint64_t));
		sd[k].p50 = calloc(rounds, sizeof(double));
		sd[k].ping_ops = calloc(rounds, sizeof(double));
		sd[k].lookup_ops = calloc(rounds, sizeof(double));
		if (!sd[k].all || !sd[k].p50 || !sd[k].ping_ops ||
		    !sd[k].lookup_ops) {
			fprintf(stderr, "kvring-bench: hist: out of memory\n");
			rc = -ENOMEM;
			goto out;
		}
	}
	if (!o.json)
		printf("hist: histograms on vs off, %u rounds of %" PRIu64
		       " pings, pipelined %u deep for %.1f s per cell\n"
		       "%-5s %-4s %10s %14s %16s %-4s %5s\n",
		       rounds, iters, PIPE_DEPTH, (double)PIPE_NS / 1e9,
		       "round", "side", "rtt_p50_ns", "ping_ops_s",
		       "lookup_ops_s", "place", "floor");
	for (unsigned r = 0; r < rounds; r++) {
		/* Fresh servers and clients every round, started in
		 * alternating order: two kvringd processes differ by their
		 * placement (which vCPU pair, which memory) by more than the
		 * histograms cost, and a new pair per round averages that
		 * out instead of crediting it to one side. */
		for (int j = 0; j < SIDES; j++) {
			int k = (int)((r + (unsigned)j) % SIDES);

			rc = start_side(&o, k, &sd[k]);
			if (rc < 0)
				goto out;
		}
		for (int j = 0; j < SIDES; j++) {
			int k = (int)((r + (unsigned)j) % SIDES);
			struct side *s = &sd[k];
			uint64_t *v = s->all + (uint64_t)r * iters;
			static uint64_t *tmp;

			s->place[r] = hist_probe(&o, j == 0);
			rc = ping_rounds(s, iters, v);
			if (rc == 0)
				rc = pipelined(s, KVR_OP_PING, &s->ping_ops[r]);
			if (rc == 0)
				rc = pipelined(s, KVR_OP_LOOKUP,
					       &s->lookup_ops[r]);
			if (rc < 0)
				goto out;
			tmp = realloc(tmp, iters * sizeof(*tmp));
			if (!tmp) {
				rc = -ENOMEM;
				goto out;
			}
			memcpy(tmp, v, iters * sizeof(*tmp));
			bench_sort_u64(tmp, iters);
			s->p50[r] = (double)tmp[(iters + 1) / 2 - 1];
			/* Let this kvringd's spin run out before the other
			 * side: never two spinning servers. */
			nap_ms(HIST_SPIN_US / 1000 + 10);
		}
		for (int k = 0; k < SIDES; k++) {
			kvr_close(sd[k].cli);
			sd[k].cli = NULL;
			bench_server_stop(&sd[k].srv);
		}
		print_round(&o, sd, r);
		r_p50[r] = sd[ON].p50[r] / sd[OFF].p50[r];
		r_ping[r] = sd[ON].ping_ops[r] / sd[OFF].ping_ops[r];
		r_look[r] = sd[ON].lookup_ops[r] / sd[OFF].lookup_ops[r];
	}
	print_summary(&o, sd, r_p50, r_ping, r_look, rounds, iters);
	rc = 0;
out:
	for (int k = 0; k < SIDES; k++) {
		if (sd[k].cli)
			kvr_close(sd[k].cli);
		bench_server_stop(&sd[k].srv);
		free(sd[k].all);
		free(sd[k].p50);
		free(sd[k].ping_ops);
		free(sd[k].lookup_ops);
	}
	return rc < 0 ? BENCH_EXIT_ERR : BENCH_EXIT_OK;
}
