/* SPDX-License-Identifier: MIT */
/*
 * test_disk_inspect.c - the disk tier seen from outside: kvring-inspect's
 * JSON overview ("disk": mode, capacity and use, objects, reads, writes,
 * queue depth, corrupt, dropped, rebuild progress) and its Prometheus
 * families (kvring_disk_*), read from a real kvringd with --disk after
 * real writes and read-throughs; a server without --disk says "off". The
 * latency histograms of disk writes and read-through reads (op disk_write
 * and disk_read in "latency", --latency and kvring_op_latency_seconds)
 * hold one sample per chunk written or read. Under --watch, while a
 * worker writes and reads through, the disk object's write_gb_per_s and
 * read_gb_per_s are there and above zero. In --disk-mode evict, the
 * stores the write-back held back are counted in all three views.
 */
#include <pthread.h>

#include "inspect_suite.h"

#include "disk_suite.h"

static struct wsrv s1;
static char dir[600];

static bool one_miss(void *arg)
{
	const struct wsrv *s = arg;

	return T_DISK(&s->t, misses) == 1;
}

static void disk_down(void)
{
	dt_down(&s1, NULL, dir);
}

TestSuite(disk_inspect, .fini = disk_down, .timeout = 120);

/* kvring-inspect --prometheus on @s: it exits 0 and its text is a valid
 * exposition (our checker, and promtool when installed). */
static struct run run_prometheus(struct wsrv *s)
{
	char why[256] = "";
	struct run r = RUN("--name", s->t.name, "--prometheus");

	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_gt(prom_validate(r.out, why, sizeof(why)), 20,
		     "invalid exposition (%s)", why);
	expect_promtool_ok(r.out);
	return r;
}

Test(disk_inspect, json_and_prometheus_show_the_tier)
{
	struct kvr_client *c;
	struct kvr_key *k;
	struct t_json *j;
	struct run r;

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "64M", "commit", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	dt_store(&s1, c, 1, true);
	/* A second server would read them through; here, a miss. */
	k = dt_keys(c, 2);
	cr_expect_eq(dt_read_back(c, k, DT_BATCH), 0);
	free(k);
	/* Counters follow within a heartbeat. */
	cr_expect(t_wait_until(one_miss, &s1, 5000));

	r = RUN("--name", s1.t.name, "--json");
	cr_assert_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect_str_eq(JS(j, "disk.mode"), "commit");
	cr_expect_str_eq(JS(j, "disk.io"), "direct");
	cr_expect_eq(JN(j, "disk.write_chunks"), DT_BATCH);
	cr_expect_eq(JN(j, "disk.write_bytes"), DT_BATCH * DT_CHUNK);
	cr_expect_eq(JN(j, "disk.objects"), DT_BATCH);
	cr_expect_eq(JN(j, "disk.used_bytes"), DT_BATCH * DT_CHUNK);
	cr_expect_eq(JN(j, "disk.capacity_bytes"),
		     (long long)JN(j, "disk.records") * DT_CHUNK);
	cr_expect_eq(JN(j, "disk.misses"), 1);
	cr_expect_eq(JN(j, "disk.queue_depth"), 0);
	cr_expect_eq(JN(j, "disk.corrupt"), 0);
	cr_expect_str_eq(JS(j, "disk.rebuild.state"), "done");
	t_json_free(j);
	run_free(&r);

	r = run_prometheus(&s1);
	cr_expect(strstr(r.out, "\nkvring_disk_enabled 1\n"), "%s", r.out);
	cr_expect(strstr(r.out, "\nkvring_disk_write_chunks_total 4\n"), "%s",
		  r.out);
	cr_expect(strstr(r.out, "\nkvring_disk_objects 4\n"), "%s", r.out);
	run_free(&r);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");

	/* Without --disk. */
	wsrv_up(&s1);
	r = RUN("--name", s1.t.name, "--json");
	j = jparse_run(&r);
	cr_expect_str_eq(JS(j, "disk.mode"), "off");
	t_json_free(j);
	run_free(&r);
	r = RUN("--name", s1.t.name, "--prometheus");
	cr_expect(strstr(r.out, "\nkvring_disk_enabled 0\n"), "%s", r.out);
	run_free(&r);
}

static bool held_back(void *arg)
{
	const struct wsrv *s = arg;

	return T_DISK(&s->t, held) > 0;
}

/* The value of Prometheus sample @name (no labels); -1 if absent. */
static long long prom_value(const char *out, const char *name)
{
	char pat[160];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s ", name);
	p = strstr(out, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/*
 * --disk-mode evict under a worker that stores as fast as it can: the
 * write-back guard holds stores back (NOROOM) until the disk has written
 * the pool's cold end, and the inspector shows how many, in the text
 * view, the JSON (disk.stores_held) and Prometheus
 * (kvring_disk_stores_held_total), all the server's count.
 */
Test(disk_inspect, stores_held_back_by_the_write_back_are_shown)
{
	struct kvr_client *c;
	uint32_t refused = 0;
	long long held;
	struct t_json *j;
	struct run r;

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "192M", "evict", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	/* Up to 4x the 32 MiB pool, until one store was held back. */
	for (uint32_t r0 = 0; r0 < 32 && !refused; r0++)
		refused += dt_store_all(c, 400 + r0, 20000);
	cr_assert_gt(refused, 0, "no store was ever held back");
	cr_assert(t_wait_until(held_back, &s1, 5000), "held %llu",
		  (unsigned long long)T_DISK(&s1.t, held));
	cr_assert(t_wait_until(dt_idle, &s1, 10000));
	kvr_close(c);
	held = (long long)T_DISK(&s1.t, held);

	r = RUN("--name", s1.t.name, "--json");
	cr_assert_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect_str_eq(JS(j, "disk.mode"), "evict");
	cr_expect_eq(JN(j, "disk.stores_held"), held);
	cr_expect_geq(JN(j, "disk.stores_held"), refused);
	t_json_free(j);
	run_free(&r);

	r = run_prometheus(&s1);
	cr_expect_eq(prom_value(r.out, "kvring_disk_stores_held_total"), held,
		     "%s", r.out);
	cr_expect(strstr(r.out, "# TYPE kvring_disk_stores_held_total "
				"counter\n"));
	run_free(&r);

	r = RUN("--name", s1.t.name);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "stores_held="), "%s", r.out);
	run_free(&r);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

/* The Prometheus sample line of @name for @op, its value; -1 if absent. */
static long long prom_op(const char *out, const char *name, const char *op)
{
	char pat[160];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s{op=\"%s\"} ", name, op);
	p = strstr(out, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* s1 again on the disk in dir, with @more: once it has rebuilt its index,
 * request 1 (stored by the server before) reads back whole from disk.
 * Return its client. */
static struct kvr_client *restart_and_read_back(const char *const *more)
{
	struct kvr_client *c;
	struct kvr_key *k;

	dt_start(&s1, dir, "64M", "commit", more);
	cr_assert(t_wait_until(dt_rebuilt, &s1, 10000), "rebuilt");
	c = wsrv_connect(&s1, 0, 5000);
	k = dt_keys(c, 1);
	cr_assert_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH);
	free(k);
	return c;
}

Test(disk_inspect, latency_histograms_of_disk_writes_and_reads)
{
	struct kvr_client *c;
	struct t_json *j;
	struct run r;
	long long w, rd;

	/* Chunks on disk from a first server; the second reads them
	 * through (its pool starts empty) and writes new ones. */
	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "64M", "commit", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	dt_store(&s1, c, 1, true);
	kvr_close(c);
	cr_assert_eq(wsrv_stop(&s1), 0, "self-check");
	wsrv_cleanup(&s1);

	c = restart_and_read_back(NULL);
	dt_store(&s1, c, 2, true);
	cr_assert_eq(T_DISK(&s1.t, reads), DT_BATCH);
	cr_assert_eq(T_DISK(&s1.t, writes), DT_BATCH);
	cr_expect_gt(atomic_load(&s1.t.hdr->disk.hist_bytes), 0);

	r = RUN("--name", s1.t.name, "--json");
	cr_assert_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	/* One sample per chunk, each above a microsecond (a real I/O). */
	cr_expect_eq(JN(j, "latency.disk_write.count"), DT_BATCH);
	cr_expect_eq(JN(j, "latency.disk_read.count"), DT_BATCH);
	cr_expect_gt(JN(j, "latency.disk_write.p50_ns"), 1000);
	cr_expect_gt(JN(j, "latency.disk_read.p99_ns"), 1000);
	t_json_free(j);
	run_free(&r);

	r = RUN("--name", s1.t.name, "--latency");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "disk_write"), "%s", r.out);
	cr_expect(strstr(r.out, "disk_read"), "%s", r.out);
	run_free(&r);

	r = run_prometheus(&s1);
	w = prom_op(r.out, "kvring_op_latency_seconds_count", "disk_write");
	rd = prom_op(r.out, "kvring_op_latency_seconds_count", "disk_read");
	cr_expect_eq(w, DT_BATCH, "%s", r.out);
	cr_expect_eq(rd, DT_BATCH, "%s", r.out);
	run_free(&r);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	wsrv_cleanup(&s1);

	/* kvringd --histograms off keeps none: no memfd, no disk ops. */
	{
		const char *const off[] = {"--histograms", "off", NULL};

		c = restart_and_read_back(off);
	}
	cr_expect_eq(atomic_load(&s1.t.hdr->disk.hist_bytes), 0);
	r = RUN("--name", s1.t.name, "--json");
	cr_assert_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect(!t_json_has(j, "latency.disk_read"), "%s", r.out);
	t_json_free(j);
	run_free(&r);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

/*
 * A write and read-through load on its own worker until told to stop.
 * Criterion asserts stay on the main thread: the first error is kept
 * for it. Owned by the test (stack).
 */
struct load {
	struct kvr_client *c;
	atomic_bool stop;
	uint32_t rounds;
	long err;
};

/* The keys of request @r on @c (no asserts: the load thread's). */
static long load_keys(struct kvr_client *c, uint32_t r, struct kvr_key *k)
{
	uint32_t t[DT_BATCH * 16];

	wsrv_tokens(r, t, DT_BATCH * 16);
	return kvr_client_keys(c, t, DT_BATCH * 16, k, DT_BATCH);
}

/* Each round stores request r (written through: commit mode) and looks
 * request r - 12 up through the tiers: 48 MiB ago, out of the 32 MiB
 * pool, so it is read through from disk. */
static void *load_run(void *arg)
{
	struct load *l = arg;
	uint64_t sizes[DT_BATCH];
	long rc = 0;

	for (uint32_t i = 0; i < DT_BATCH; i++)
		sizes[i] = DT_CHUNK;
	for (uint32_t r = 112; rc >= 0 && !atomic_load(&l->stop); r++) {
		struct kvr_key k[DT_BATCH];
		struct kvr_xfer x;
		bool pending = true;

		rc = load_keys(l->c, r, k);
		if (rc >= 0)
			rc = kvr_prepare_store(l->c, k, sizes, DT_BATCH, &x);
		for (uint32_t i = 0; rc >= 0 && i < x.nslots; i++)
			if (x.slots[i].status == KVR_SLOT_OK)
				wsrv_fill(&k[i], x.slots[i].ptr, DT_CHUNK);
		if (rc >= 0)
			rc = kvr_commit_store(l->c, &x);
		if (rc >= 0)
			rc = load_keys(l->c, r - 12, k);
		for (int i = 0; rc >= 0 && pending && i < 1000; i++) {
			rc = kvr_lookup_l2(l->c, k, DT_BATCH, NULL, &pending);
			if (rc >= 0 && pending)
				wsrv_sleep_ms(1);
		}
		l->rounds++;
	}
	l->err = rc < 0 ? rc : 0;
	return NULL;
}

Test(disk_inspect, watch_shows_disk_gb_per_s_under_load)
{
	struct load l = {.err = 0};
	struct kvr_client *c;
	struct t_json *j;
	pthread_t th;
	struct run r;
	char *second;

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "192M", "commit", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t q = 100; q < 112; q++)
		dt_store(&s1, c, q, true);
	l.c = wsrv_connect(&s1, 0, 5000);
	atomic_init(&l.stop, false);
	cr_assert_eq(pthread_create(&th, NULL, load_run, &l), 0);
	r = RUN("--name", s1.t.name, "--json", "--watch=500", "--count", "2");
	atomic_store(&l.stop, true);
	pthread_join(th, NULL);
	cr_assert_eq(l.err, 0, "load: %ld %s", l.err, kvr_client_errmsg(l.c));
	cr_assert_gt(l.rounds, 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	second = strchr(r.out, '\n');
	cr_assert(second && second[1], "two frames: %s", r.out);
	j = jparse(second + 1);
	cr_expect_gt(t_json_num(j, "disk.write_gb_per_s", -1), 0, "%s",
		     second + 1);
	cr_expect_gt(t_json_num(j, "disk.read_gb_per_s", -1), 0, "%s",
		     second + 1);
	t_json_free(j);
	/* The first frame has no interval: no rates. */
	*second = '\0';
	j = jparse(r.out);
	cr_expect(!t_json_has(j, "disk.write_gb_per_s"), "%s", r.out);
	t_json_free(j);
	run_free(&r);
	kvr_close(l.c);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}
