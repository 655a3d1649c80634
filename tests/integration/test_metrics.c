/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c - the cache counters and latency histograms
 * against a real kvringd and real workers: the honesty check (10 000
 * pings through a server slowed by --test-delay: every histogram counts
 * each ping once and its p50 falls within one bucket of what the client
 * measured itself), exact cache counters for a known store / lookup /
 * retrieve sequence, the worker's sampling, --no-histograms, and what
 * kvring-inspect makes of them (--latency, --json under --watch,
 * --prometheus) and kvring-stress --latency-plot. The HTTP endpoint is
 * test_metrics_http.c (optional
 * libmicrohttpd).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include <kvring/clock.h>
#include <kvring/hist.h>
#include <kvring/kvring.h>
#include <kvring/layout.h>

#include "worker_srv.h"

#define INSPECT KVR_BIN_DIR "/tools/kvring-inspect"

static struct kvrd srv;

static void start(const char *const *extra)
{
	const char *args[16] = {"--allow-root", "--spin-us", "2000",
				"--heartbeat-ms", "20"};
	int n = 5;

	for (int i = 0; extra && extra[i] && n < 15; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	t_server_init(&srv);
	t_server_start(&srv, args);
}

static void teardown(void)
{
	unsetenv("KVRING_RTT_SAMPLE");
	t_server_down(&srv);
}

TestSuite(metrics, .fini = teardown, .timeout = 120);

static struct kvr_client *connect_worker(uint32_t spin_us)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char err[256];
	int rc;

	t_ns_small(&o.ns, "kvring-metrics-model");
	o.ns.tp_rank = 1;
	o.ns.tp_size = 2;
	o.socket_path = srv.sock;
	o.spin_us = spin_us;
	o.timeout_ms = 10000;
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_assert_eq(rc, 0, "connect: %d %s", rc, err);
	return c;
}

static const struct kvr_ctl_obs_shm *gobs(void)
{
	return kvr_ctl_obs((void *)srv.ctl);
}

/* Namespace slot @i, in the channel directory the harness maps (abi
 * 5.0: no longer in the control segment workers map). */
static const struct kvr_ns_obs_shm *nsobs(uint32_t i)
{
	struct kvr_ctl_geom g;

	cr_assert_not_null(srv.dir, "the harness could not map the directory");
	cr_assert_eq(kvr_ctl_geom_compute(srv.hdr->max_channels,
					  srv.hdr->req_ring_cap,
					  srv.hdr->resp_ring_cap, &g),
		     0);
	return kvr_ns_obs(srv.dir, &g, i);
}

static const struct kvr_chan_obs_shm *cobs(const struct kvr_client *c)
{
	return kvr_chan_obs((struct kvr_channel_shm *)t_server_chan(
	    &srv, kvr_client_info((struct kvr_client *)c)->channel));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The server records a batch's times just after publishing its answers,
 * so a client can see its last answer a moment before the count moves. */
struct want_count {
	const struct kvr_hist_shm *h;
	uint64_t n;
};

static bool count_reached(void *arg)
{
	struct want_count *w = arg;

	return atomic_load(&w->h->count) >= w->n;
}

static void wait_count(const struct kvr_hist_shm *h, uint64_t n)
{
	struct want_count w = {h, n};

	(void)t_wait_until(count_reached, &w, 5000);
}

static unsigned bucket_gap(uint64_t a, uint64_t b)
{
	unsigned x = kvr_hist_bucket(a), y = kvr_hist_bucket(b);

	return x > y ? x - y : y - x;
}

/* Everything a command printed on stdout (popen: the arguments are ours). */
static char *run_out(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);

	cr_assert(p && buf, "popen %s", cmd);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert(buf);
		}
	}
	buf[len] = '\0';
	*status = pclose(p);
	return buf;
}

/* The value of a Prometheus sample line that starts with @series + " ". */
static bool prom_value(const char *text, const char *series, double *out)
{
	size_t n = strlen(series);

	for (const char *l = text; l && *l; l = strchr(l, '\n')) {
		if (*l == '\n')
			l++;
		if (strncmp(l, series, n) == 0 && l[n] == ' ')
			return sscanf(l + n + 1, "%lf", out) == 1;
	}
	return false;
}

/* ==== The honesty check ==== */

/* Involuntary context switches of a process so far, from an open
 * /proc/<pid>/status (re-read from the start each time). */
static long nvcsw(int fd)
{
	char buf[4096], *p;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long v = -1;

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "nonvoluntary_ctxt_switches:");
	if (p)
		sscanf(p + 27, "%ld", &v);
	return v;
}

static int open_status(pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s", path);
	return fd;
}

/* The bucket the channel's server histogram gained since @before (the
 * server records a batch just after publishing it: wait for the count). */
static int new_bucket(const struct kvr_hist_shm *h, uint64_t want,
		      const uint64_t *before)
{
	struct want_count w = {h, want};

	(void)t_wait_until(count_reached, &w, 5000);
	for (unsigned i = 0; i < KVR_HIST_BUCKETS; i++)
		if (atomic_load_explicit(&h->buckets[i],
					 memory_order_relaxed) != before[i])
			return (int)i;
	return -1;
}

/*
 * The p50s of the client's and the server's figures over the @n pings
 * during which neither process was descheduled (the others compare
 * clocks that did not both run); refuses a run with fewer than @need.
 */
static void undisturbed_p50s(uint64_t *cl, uint64_t *sv, size_t n, int need,
			     uint64_t *cl_p50, uint64_t *sv_p50)
{
	cr_assert_geq(n, (size_t)need,
		      "only %zu pings (of the %d needed) ran without either "
		      "process being descheduled: this machine is too loaded "
		      "to compare latencies",
		      n, need);
	qsort(cl, n, sizeof(cl[0]), cmp_u64);
	qsort(sv, n, sizeof(sv[0]), cmp_u64);
	*cl_p50 = cl[(n + 1) / 2 - 1];
	*sv_p50 = sv[(n + 1) / 2 - 1];
}

Test(metrics, histograms_count_every_ping_and_agree_with_the_client_when_slowed)
{
	enum { PINGS = 10000 };
	const char *extra[] = {"--test-delay", "ping:50", NULL};
	static uint64_t rtt[PINGS], cl[PINGS], sv_mid[PINGS];
	static uint64_t before[KVR_HIST_BUCKETS];
	struct kvr_hist_snap g, ch, wk;
	const struct kvr_hist_shm *sh;
	struct kvr_client *c;
	uint64_t client_p50, cl_p50, sv_p50;
	size_t n = 0;
	int k = kvr_hist_op_slot(KVR_OP_PING), me, sv;

	start(extra);
	cr_assert(t_server_log_has(&srv, "--test-delay"),
		  "the server must say the knob is on");
	setenv("KVRING_RTT_SAMPLE", "1", 1);
	/* The client spins through the whole delay: a doorbell sleep would
	 * add a wake-up to its figure that the server never sees. The server
	 * sleeps through it, so the two do not compete for the CPUs. */
	c = connect_worker(5000);
	sh = &cobs(c)->server_lat[k];
	me = open_status(getpid());
	sv = open_status(srv.pid);
	for (int i = 0; i < PINGS; i++) {
		long a0 = nvcsw(me), b0 = nvcsw(sv), a1, b1;
		uint64_t t0, svns;
		int rc, bk;

		for (unsigned j = 0; j < KVR_HIST_BUCKETS; j++)
			before[j] = atomic_load_explicit(&sh->buckets[j],
							 memory_order_relaxed);
		t0 = kvr_clock_now_ns();
		rc = kvr_ping(c, &svns);
		rtt[i] = kvr_clock_now_ns() - t0;
		a1 = nvcsw(me);
		b1 = nvcsw(sv);
		cr_assert_eq(rc, 0, "ping %d: %d", i, rc);
		/* Which bucket this very ping landed in. */
		bk = new_bucket(sh, (uint64_t)i + 1, before);
		cr_assert_geq(bk, 0, "ping %d left no sample", i);
		/*
		 * A ping during which the scheduler took either process off
		 * its CPU may have waited where only the client's clock runs
		 * (the server's loop times from its own pass). Those pings
		 * count in every histogram, but the p50 comparison is made
		 * over the others, the server's side of it from the very
		 * buckets those pings landed in.
		 */
		if (a0 >= 0 && a0 == a1 && b0 >= 0 && b0 == b1) {
			cl[n] = rtt[i];
			sv_mid[n] = kvr_hist_lo((unsigned)bk) +
				    (kvr_hist_hi((unsigned)bk) -
				     kvr_hist_lo((unsigned)bk) - 1) /
					2;
			n++;
		}
	}
	close(me);
	close(sv);
	qsort(rtt, PINGS, sizeof(rtt[0]), cmp_u64);
	client_p50 = rtt[PINGS / 2 - 1]; /* rank ceil(0.5 * n) */
	undisturbed_p50s(cl, sv_mid, n, PINGS / 10, &cl_p50, &sv_p50);
	wait_count(&gobs()->lat[k], PINGS);

	kvr_hist_read(&gobs()->lat[k], &g);
	kvr_hist_read(sh, &ch);
	kvr_hist_read(&cobs(c)->worker_rtt[k], &wk);
	cr_log_info("p50: all %d pings: client %lu ns, server %lu ns, worker "
		    "%lu ns; %zu undisturbed: client %lu ns, server %lu ns",
		    PINGS, (unsigned long)client_p50,
		    (unsigned long)kvr_hist_quantile(&ch, 0.5),
		    (unsigned long)kvr_hist_quantile(&wk, 0.5), n,
		    (unsigned long)cl_p50, (unsigned long)sv_p50);
	cr_expect_eq(g.count, PINGS, "global server ping count %lu",
		     (unsigned long)g.count);
	cr_expect_eq(ch.count, PINGS, "channel server ping count %lu",
		     (unsigned long)ch.count);
	cr_expect_eq(wk.count, PINGS, "worker ping count %lu",
		     (unsigned long)wk.count);
	/* Nothing else was asked, so nothing else was timed. */
	for (unsigned op = 0; op < KVR_HIST_OPS; op++)
		if ((int)op != k)
			cr_expect_eq(atomic_load(&gobs()->lat[op].count), 0,
				     "op slot %u timed", op);
	cr_expect_geq(kvr_hist_quantile(&ch, 0.5), 50000,
		      "the server's p50 %lu ns is below the 50 us delay",
		      (unsigned long)kvr_hist_quantile(&ch, 0.5));
	cr_expect_leq(bucket_gap(sv_p50, cl_p50), 1,
		      "server p50 %lu ns vs client p50 %lu ns over the %zu "
		      "undisturbed pings",
		      (unsigned long)sv_p50, (unsigned long)cl_p50, n);
	/* The worker timed the same calls as the client, disturbed or not. */
	cr_expect_leq(bucket_gap(kvr_hist_quantile(&wk, 0.5), client_p50), 1,
		      "worker p50 %lu ns vs client p50 %lu ns",
		      (unsigned long)kvr_hist_quantile(&wk, 0.5),
		      (unsigned long)client_p50);
	kvr_close(c);
}

/*
 * The server's time of a request is inside the client's round trip of
 * it, so its p50 cannot be above the client's. kvringd spinning between
 * pings reads its clock only every few loop passes; before it estimated
 * where in that run of passes a request arrived, a hot ping that took it
 * ~0.1 us was counted from the last clock reading, ~1 us earlier, and
 * the server's p50 came out at 2-3x the whole round trip.
 */
Test(metrics, server_time_of_a_hot_ping_fits_in_the_clients_round_trip)
{
	/* Up to PINGS pings, until WANT of them ran undisturbed: a busy
	 * neighbour (another test on the other CPU) costs time, not a
	 * verdict. */
	enum { PINGS = 20000, WANT = 1000 };
	static uint64_t cl[WANT], sv_lo[WANT], before[KVR_HIST_BUCKETS];
	const struct kvr_hist_shm *sh;
	struct kvr_client *c;
	uint64_t cl_p50, sv_p50;
	size_t n = 0;
	int k = kvr_hist_op_slot(KVR_OP_PING), me, sv;

	start(NULL); /* --spin-us 2000: the server spins between pings */
	c = connect_worker(5000);
	sh = &cobs(c)->server_lat[k];
	me = open_status(getpid());
	sv = open_status(srv.pid);
	for (int i = 0; i < PINGS && n < WANT; i++) {
		uint64_t t0, rtt, svns, gap = kvr_clock_now_ns() + 3000;
		long a0, b0;
		int rc, bk;

		for (unsigned j = 0; j < KVR_HIST_BUCKETS; j++)
			before[j] = atomic_load_explicit(&sh->buckets[j],
							 memory_order_relaxed);
		/* Idle 3 us, so that the server runs idle passes between
		 * pings, as it does for any worker not pipelining. */
		while (kvr_clock_now_ns() < gap)
			kvr_clock_relax();
		a0 = nvcsw(me);
		b0 = nvcsw(sv);
		t0 = kvr_clock_now_ns();
		rc = kvr_ping(c, &svns);
		rtt = kvr_clock_now_ns() - t0;
		cr_assert_eq(rc, 0, "ping %d: %d", i, rc);
		bk = new_bucket(sh, (uint64_t)i + 1, before);
		cr_assert_geq(bk, 0, "ping %d left no sample", i);
		/* Only pings during which neither process was descheduled:
		 * the others compare clocks that did not both run. */
		if (a0 >= 0 && a0 == nvcsw(me) && b0 >= 0 && b0 == nvcsw(sv)) {
			cl[n] = rtt;
			sv_lo[n] = kvr_hist_lo((unsigned)bk);
			n++;
		}
	}
	close(me);
	close(sv);
	undisturbed_p50s(cl, sv_lo, n, WANT / 4, &cl_p50, &sv_p50);
	cr_log_info("%zu undisturbed hot pings: client p50 %lu ns, server "
		    "p50 at least %lu ns",
		    n, (unsigned long)cl_p50, (unsigned long)sv_p50);
	cr_expect_leq(sv_p50, cl_p50,
		      "the server's p50 (at least %lu ns) is above the "
		      "client's whole round trip (%lu ns) over %zu pings",
		      (unsigned long)sv_p50, (unsigned long)cl_p50, n);
	kvr_close(c);
}

/* ==== Cache counters ==== */

static struct kvr_key *keys_for(struct kvr_client *c, uint32_t n)
{
	uint32_t *t = malloc((size_t)n * 16 * sizeof(*t));
	struct kvr_key *k = calloc(n, sizeof(*k));

	cr_assert(t && k);
	wsrv_tokens(7, t, (size_t)n * 16);
	cr_assert_eq(kvr_client_keys(c, t, (size_t)n * 16, k, n), (long)n);
	free(t);
	return k;
}

struct want_cache {
	const struct kvr_cache_shm *c;
	uint64_t lookup_keys, retrieve_bytes;
};

static bool cache_published(void *arg)
{
	struct want_cache *w = arg;

	return atomic_load(&w->c->lookup_keys) == w->lookup_keys &&
	       atomic_load(&w->c->retrieve_bytes) == w->retrieve_bytes;
}

Test(metrics, cache_counters_are_exact_when_a_known_sequence_runs)
{
	struct kvr_client *c;
	struct kvr_key *k;
	struct kvr_xfer x;
	struct want_cache w;
	uint64_t lease;
	const uint64_t B = 4096;
	const struct kvr_cache_shm *views[3];

	start(NULL);
	c = connect_worker(0);
	k = keys_for(c, 8);
	/* 4 new; then 4 already stored and 2 new; 8 asked, 6 found. */
	cr_assert_eq(wsrv_store(c, k, 4, B), 4);
	cr_assert_eq(wsrv_store(c, k, 6, 2 * B), 2);
	cr_assert_eq(kvr_lookup(c, k, 8, NULL), 6);
	cr_assert_eq(kvr_prepare_retrieve(c, k, 8, &x), 0);
	cr_assert_eq(x.nslots, 6);
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);
	/* A lookup with a pin, redeemed by lease: asks no keys itself. */
	cr_assert_eq(kvr_lookup(c, k, 2, &lease), 2);
	cr_assert_eq(kvr_prepare_retrieve_lease(c, lease, &x), 0);
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);

	views[0] = &cobs(c)->cache;
	views[1] = &gobs()->cache;
	views[2] = &nsobs(0)->cache;
	for (int v = 0; v < 3; v++) {
		const struct kvr_cache_shm *cc = views[v];

		/* Channel counters go out per batch, global and namespace
		 * ones at the next loop sleep or heartbeat. */
		w.c = cc;
		w.lookup_keys = 10;
		w.retrieve_bytes = 4 * B + 2 * (2 * B) + 2 * B;
		cr_assert(t_wait_until(cache_published, &w, 5000),
			  "view %d: lookup_keys %lu retrieve_bytes %lu", v,
			  (unsigned long)atomic_load(&cc->lookup_keys),
			  (unsigned long)atomic_load(&cc->retrieve_bytes));
		cr_expect_eq(atomic_load(&cc->lookups), 2, "view %d", v);
		cr_expect_eq(atomic_load(&cc->lookup_hit_keys), 8, "view %d",
			     v);
		/* Stored sizes: keys 0-3 hold B, keys 4-5 hold 2B. */
		cr_expect_eq(atomic_load(&cc->lookup_hit_bytes),
			     4 * B + 2 * 2 * B + 2 * B, "view %d", v);
		cr_expect_eq(atomic_load(&cc->retrieves), 2, "view %d", v);
		cr_expect_eq(atomic_load(&cc->retrieve_keys), 8, "view %d", v);
		cr_expect_eq(atomic_load(&cc->retrieve_hit_keys), 8, "view %d",
			     v);
		cr_expect_eq(atomic_load(&cc->store_keys_new), 6, "view %d", v);
		cr_expect_eq(atomic_load(&cc->store_bytes_new),
			     4 * B + 2 * 2 * B, "view %d", v);
		cr_expect_eq(atomic_load(&cc->store_keys_stored), 4, "view %d",
			     v);
		cr_expect_eq(atomic_load(&cc->store_bytes_stored), 4 * 2 * B,
			     "view %d", v);
		cr_expect_eq(atomic_load(&cc->store_keys_no_room), 0);
	}
	cr_expect_eq(atomic_load(&nsobs(0)->id), 1);
	cr_expect_str_eq(nsobs(0)->desc.model, "kvring-metrics-model");
	cr_expect_eq(nsobs(0)->desc.tp_rank, 1);
	free(k);
	kvr_close(c);
}

/* ==== Worker sampling and the switches ==== */

Test(metrics, worker_times_one_in_n_and_weights_it_when_rtt_sample_is_n)
{
	struct kvr_client *c;
	int k = kvr_hist_op_slot(KVR_OP_PING);

	start(NULL);
	setenv("KVRING_RTT_SAMPLE", "10", 1);
	c = connect_worker(0);
	for (int i = 0; i < 995; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	cr_expect_eq(atomic_load(&cobs(c)->rtt_every), 10);
	wait_count(&cobs(c)->server_lat[k], 995);
	/* 99 timed pings, each standing for 10. */
	cr_expect_eq(atomic_load(&cobs(c)->worker_rtt[k].count), 990);
	cr_expect_eq(atomic_load(&cobs(c)->server_lat[k].count), 995);
	kvr_close(c);
}

Test(metrics, connect_is_refused_with_the_name_when_rtt_sample_is_garbage)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char err[256];

	start(NULL);
	setenv("KVRING_RTT_SAMPLE", "often", 1);
	t_ns_tiny(&o.ns, "m");
	o.socket_path = srv.sock;
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "KVRING_RTT_SAMPLE=often"), "message: %s", err);
	cr_expect_null(c);
}

Test(metrics, nothing_is_timed_but_caches_count_when_no_histograms)
{
	const char *extra[] = {"--no-histograms", NULL};
	struct kvr_client *c;
	struct kvr_key *k;

	start(extra);
	setenv("KVRING_RTT_SAMPLE", "0", 1);
	c = connect_worker(0);
	k = keys_for(c, 2);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	cr_assert_eq(kvr_lookup(c, k, 2, NULL), 0);
	cr_expect_eq(gobs()->flags & KVR_OBS_SERVER_HIST, 0);
	for (unsigned op = 0; op < KVR_HIST_GOPS; op++)
		cr_expect_eq(atomic_load(&gobs()->lat[op].count), 0, "op %u",
			     op);
	cr_expect_eq(atomic_load(&cobs(c)->rtt_every), 0);
	cr_expect_eq(
	    atomic_load(
		&cobs(c)->worker_rtt[kvr_hist_op_slot(KVR_OP_PING)].count),
	    0);
	/* The cache counters do not depend on the histograms. */
	struct want_cache w = {&cobs(c)->cache, 2, 0};

	cr_expect(t_wait_until(cache_published, &w, 5000));
	free(k);
	kvr_close(c);
}

/* ==== What kvring-inspect makes of it ==== */

Test(metrics, inspector_shows_latency_and_prometheus_when_pings_ran)
{
	struct kvr_client *c;
	char cmd[512], series[256];
	char *out;
	int st;
	double v, inf, cnt, prev = -1;
	unsigned ch;

	start(NULL);
	setenv("KVRING_RTT_SAMPLE", "1", 1);
	c = connect_worker(0);
	ch = kvr_client_info(c)->channel;
	for (int i = 0; i < 500; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	wait_count(&gobs()->lat[kvr_hist_op_slot(KVR_OP_PING)], 500);

	{
		char path[160], sh[300];

		/* Say what became of the segment rather than fail below
		 * with "no server". */
		snprintf(path, sizeof(path), "/dev/shm/%s", srv.ctl_name);
		if (access(path, F_OK) != 0) {
			snprintf(sh, sizeof(sh),
				 "ls -la /dev/shm >&2; cat %s >&2",
				 srv.log_path);
			(void)!system(sh);
			cr_assert_fail("%s gone (server pid %d)", path,
				       srv.pid);
		}
	}
	/* --latency --channel N: one table row per side for ping. */
	snprintf(cmd, sizeof(cmd), INSPECT " --name %s --latency --channel %u",
		 srv.name, ch);
	out = run_out(cmd, &st);
	cr_expect_eq(st, 0, "%s", out);
	cr_expect(strstr(out, "server  ping"), "%s", out);
	cr_expect(strstr(out, "worker  ping"), "%s", out);
	cr_expect(strstr(out, "  500 "), "500 pings in: %s", out);
	free(out);

	/* --json under --watch: the second frame has interval figures. */
	snprintf(cmd, sizeof(cmd),
		 INSPECT " --name %s --json --watch=100 --count 2", srv.name);
	out = run_out(cmd, &st);
	cr_expect_eq(st, 0);
	cr_expect(strstr(out, "\"latency\":{\"ping\":{\"count\":500"), "%s",
		  out);
	cr_expect(strstr(out, "\"interval\":{\"count\":0"), "no interval: %s",
		  out);
	cr_expect(strstr(out, "\"hit_ratio\":"), "no hit ratio: %s", out);
	free(out);

	/* --prometheus: a real histogram family, no pid but on _info. */
	snprintf(cmd, sizeof(cmd), INSPECT " --name %s --prometheus", srv.name);
	out = run_out(cmd, &st);
	cr_expect_eq(st, 0);
	cr_expect(strstr(out, "# TYPE kvring_op_latency_seconds histogram\n"));
	for (unsigned e = 6; e <= 34; e++) {
		snprintf(series, sizeof(series),
			 "kvring_op_latency_seconds_bucket{op=\"ping\",le=\"%."
			 "12g\"}",
			 (double)(1ull << e) / 1e9);
		cr_assert(prom_value(out, series, &v), "missing %s", series);
		cr_expect_geq(v, prev, "%s went down", series);
		prev = v;
	}
	cr_assert(prom_value(out,
			     "kvring_op_latency_seconds_bucket{op=\"ping\","
			     "le=\"+Inf\"}",
			     &inf));
	cr_assert(prom_value(
	    out, "kvring_op_latency_seconds_count{op=\"ping\"}", &cnt));
	cr_expect_eq(inf, 500);
	cr_expect_eq(cnt, 500);
	cr_expect_geq(inf, prev);
	snprintf(series, sizeof(series),
		 "kvring_channel_rtt_seconds_count{channel=\"%u\",model="
		 "\"kvring-metrics-model\",rank=\"1\",op=\"ping\"}",
		 ch);
	cr_expect(prom_value(out, series, &v) && v == 500, "%s", series);
	for (const char *l = out; *l; l = strchr(l, '\n') + 1) {
		if (strstr(l, "pid=\"") &&
		    strstr(l, "pid=\"") < strchr(l, '\n'))
			cr_expect(strncmp(l, "kvring_channel_info{", 20) == 0 ||
				      strncmp(l, "kvring_server_info{", 19) ==
					  0,
				  "pid label outside _info: %.120s", l);
		if (!strchr(l, '\n'))
			break;
	}
	free(out);
	kvr_close(c);
}

Test(metrics, promtool_accepts_the_exposition)
{
	char cmd[512];
	char *out;
	int st;

	/* Never a skip: scripts/setup.sh installs prometheus (promtool). */
	cr_assert_eq(system("command -v promtool >/dev/null 2>&1"), 0,
		     "promtool is not installed: apt-get install prometheus "
		     "(or scripts/setup.sh deps)");
	start(NULL);
	snprintf(cmd, sizeof(cmd),
		 INSPECT
		 " --name %s --prometheus | promtool check metrics 2>&1",
		 srv.name);
	out = run_out(cmd, &st);
	cr_expect_eq(st, 0, "promtool: %s", out);
	free(out);
}

/* ==== kvring-stress --latency-plot ==== */

Test(metrics, stress_writes_latency_plot_data_when_asked)
{
	char dir[] = "/tmp/kvr-latplot-XXXXXX", cmd[512], path[600];
	char *out;
	int st, blocks = 0;
	FILE *f;
	char line[256];
	double last = -1, v;

	cr_assert(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 KVR_BIN_DIR
		 "/tools/kvring-stress --workers 2 --seconds 2 "
		 "--pool-size 32M --seed 5 --quiet --kvringd " KVR_BIN_DIR
		 "/server/kvringd --latency-plot %s 2>&1",
		 dir);
	out = run_out(cmd, &st);
	cr_expect_eq(st, 0, "kvring-stress: %s", out);
	free(out);
	snprintf(path, sizeof(path), "%s/latency_cdf.dat", dir);
	f = fopen(path, "r");
	cr_assert(f, "no %s", path);
	/* Each op's block is a CDF: it ends at exactly 1. */
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "# op ", 5)) {
			if (blocks)
				cr_expect_eq(last, 1.0, "block %d ends at %f",
					     blocks, last);
			blocks++;
		} else if (sscanf(line, "%*f %lf", &v) == 1) {
			/* Cumulative within a block. */
			if (blocks && last >= 0 && last < 1.0)
				cr_expect_geq(v, last, "fraction %f after %f",
					      v, last);
			last = v;
		}
	}
	fclose(f);
	cr_expect_eq(last, 1.0, "the last block ends at %f", last);
	cr_expect_geq(blocks, 4,
		      "stress uses at least lookup, prepare and "
		      "commit store, prepare retrieve: %d ops",
		      blocks);
	snprintf(path, sizeof(path), "%s/latency.gp", dir);
	cr_expect_eq(access(path, R_OK), 0, "no %s", path);
	snprintf(path, sizeof(path), "%s/latency_time.dat", dir);
	cr_expect_eq(access(path, R_OK), 0, "no %s", path);
	if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
		snprintf(path, sizeof(path), "%s/latency_cdf.png", dir);
		cr_expect_eq(access(path, R_OK), 0, "gnuplot drew no %s", path);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
}
