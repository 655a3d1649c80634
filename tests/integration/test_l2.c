/* SPDX-License-Identifier: MIT */
/*
 * test_l2.c - kvringd's L2 tier against a real standalone redis-server
 * (docs/l2.md): write-behind of committed chunks, read-through into a
 * second kvringd ("two hosts on one machine"), the value checks (a
 * corrupted value is a miss, counted and deleted), a hole ending the
 * prefix, EXISTS dedup, Redis down and back, maxmemory with noeviction,
 * the deadline's "ask again", and a worker killed while its lookup waits
 * on L2 (the server's shutdown self-check proves nothing leaked).
 * Redis Cluster is in test_l2_cluster.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "l2_suite.h"

#define CHUNK (64u << 10)

static struct t_redis rds;
static struct wsrv s1, s2;

static void setup(void)
{
	l2t_need_redis();
}

static void teardown(void)
{
	char cmd[400];

	/* KVR_L2_DEBUG=1 shows both servers' logs (debugging aid). */
	if (getenv("KVR_L2_DEBUG")) {
		snprintf(cmd, sizeof(cmd), "cat %s %s >&2", s1.t.log_path,
			 s2.t.log_path);
		if (system(cmd) != 0)
			fprintf(stderr, "no logs\n");
	}
	l2t_down(&s1);
	l2t_down(&s2);
	t_redis_stop(&rds);
}

TestSuite(l2, .init = setup, .fini = teardown, .timeout = 60);

static char url[128];

static void redis_up(const char *extra)
{
	t_redis_start(&rds, extra);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
}

static void wait_uploaded(struct wsrv *s, uint64_t n)
{
	l2t_wait_uploads(s, n, false);
}

/* The L2 key of chunk key @k for the test namespace, via a server's log-
 * free path: scan Redis for the key's hex (the fingerprint is opaque). */
static void redis_key_of(const struct kvr_key *k, char *out, size_t n)
{
	char pat[64], buf[4096];

	snprintf(pat, sizeof(pat), "*:%016llx%016llx",
		 (unsigned long long)k->hi, (unsigned long long)k->lo);
	t_redis_cli(&rds, buf, sizeof(buf), "--scan --pattern '%s'", pat);
	cr_assert(buf[0] && !strchr(buf, '\n') && strlen(buf) < n,
		  "scan for %s: '%s'", pat, buf);
	memcpy(out, buf, strlen(buf) + 1);
}

/* Server 1 stores @n chunks of request @r and waits until L2 has them. */
static struct kvr_key *store_on_s1(uint32_t r, uint32_t n)
{
	struct kvr_client *c = wsrv_connect(&s1, 0, 5000);
	struct kvr_key *k = l2t_keys_for(c, r, n);

	cr_assert_eq(wsrv_store(c, k, n, CHUNK), n);
	wait_uploaded(&s1, n);
	kvr_close(c);
	return k;
}

Test(l2, uploads_every_committed_chunk_with_a_header)
{
	struct kvr_key *k;
	char key[160], out[256];

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	k = store_on_s1(1, 8);
	cr_expect_eq(t_redis_int(&rds, "DBSIZE"), 8,
		     "dbsize %ld, up %llu exists %llu failed %llu",
		     t_redis_int(&rds, "DBSIZE"),
		     (unsigned long long)T_L2(&s1.t, up_chunks),
		     (unsigned long long)T_L2(&s1.t, up_exists),
		     (unsigned long long)T_L2(&s1.t, up_failed));
	cr_expect_eq(T_L2(&s1.t, up_bytes), 8ull * CHUNK);
	redis_key_of(&k[3], key, sizeof(key));
	cr_expect(strncmp(key, "kvr:", 4) == 0, "key %s", key);
	cr_expect_eq(t_redis_int(&rds, "STRLEN %s", key), 64 + CHUNK);
	t_redis_cli(&rds, out, sizeof(out), "GETRANGE %s 0 3", key);
	cr_expect_str_eq(out, "KVL2");
	cr_expect(t_server_log_has(&s1.t, "l2: redis at redis://127.0.0.1"));
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

/* What a worker sees once its commit is answered: the upload it queued is
 * already counted (queued, or done), so a caller that waits for an empty
 * queue waits for that upload too. The counters used to be published only
 * every 20 ms, and a test could see the queue empty before its own upload. */
Test(l2, commit_answer_comes_after_its_upload_is_counted)
{
	struct kvr_client *c;
	struct kvr_key *k;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 7, 8);
	for (uint32_t i = 0; i < 8; i++) {
		uint64_t seen;

		cr_assert_eq(wsrv_store(c, &k[i], 1, CHUNK), 1, "store %u", i);
		seen = T_L2(&s1.t, queue_depth) + T_L2(&s1.t, up_chunks) +
		       T_L2(&s1.t, up_exists) + T_L2(&s1.t, up_failed) +
		       T_L2(&s1.t, drops);
		cr_expect_geq(seen, i + 1,
			      "after commit %u: queue %llu, done %llu", i,
			      (unsigned long long)T_L2(&s1.t, queue_depth),
			      (unsigned long long)T_L2(&s1.t, up_chunks));
	}
	wait_uploaded(&s1, 8);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

/* Whether `kvring-inspect --name NAME @mode` prints a line holding @s. */
static bool inspect_has(struct wsrv *s, const char *mode, const char *needle)
{
	char cmd[512], line[512];
	bool found = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-inspect --name %s %s",
		 KVR_BIN_DIR, s->t.name, mode);
	f = popen(cmd, "r");
	cr_assert(f, "popen %s", cmd);
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, needle) != NULL;
	pclose(f);
	return found;
}

Test(l2, inspector_and_prometheus_show_the_tier)
{
	char want[96];
	struct kvr_key *k;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	k = store_on_s1(30, 3);
	cr_expect(inspect_has(&s1, "", "l2.mode=redis"));
	cr_expect(inspect_has(&s1, "", "l2.upload_chunks=3"));
	snprintf(want, sizeof(want), "l2.nodes.0.addr=127.0.0.1:%d", rds.port);
	cr_expect(inspect_has(&s1, "", want));
	cr_expect(inspect_has(&s1, "", "l2.nodes.0.state=up"));
	/* One commit, one upload job, in the server's l2_write histogram. */
	cr_expect(inspect_has(&s1, "", "latency.l2_write.count=1"));
	cr_expect(inspect_has(&s1, "--prometheus",
			      "kvring_l2_chunks_total{direction=\"up\"} 3"));
	cr_expect(inspect_has(&s1, "--prometheus",
			      "kvring_l2_errors_total{kind=\"oom\"} 0"));
	free(k);
}

Test(l2, second_server_reads_every_chunk_through_l2)
{
	struct kvr_client *c;
	struct kvr_key *k;
	uint64_t lease = 0;
	bool pending = true;
	long hits;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	k = store_on_s1(2, 16);
	c = wsrv_connect(&s2, 0, 5000);
	cr_expect_eq(kvr_lookup(c, k, 16, NULL), 0, "plain lookup: L1 only");
	hits = kvr_lookup_l2(c, k, 16, &lease, &pending);
	cr_assert_eq(hits, 16, "lookup_l2: %ld %s", hits, kvr_client_errmsg(c));
	cr_expect(!pending);
	cr_expect_neq(lease, 0);
	cr_expect_eq(wsrv_retrieve_check(c, k, 16, CHUNK), 16);
	cr_expect_eq(kvr_release(c, lease), 0);
	cr_expect_eq(T_L2(&s2.t, down_chunks), 16);
	cr_expect_eq(T_L2(&s2.t, hits), 16);
	cr_expect_eq(T_L2(&s2.t, corrupt), 0);
	/* Loaded chunks are L1 now: a plain lookup finds them. */
	cr_expect_eq(kvr_lookup(c, k, 16, NULL), 16);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

Test(l2, corrupt_value_is_a_miss_counted_and_deleted)
{
	struct kvr_client *c;
	struct kvr_key *k;
	char key[160], out[64];

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	k = store_on_s1(3, 6);
	redis_key_of(&k[4], key, sizeof(key));
	/* One payload byte flipped: the header is intact, the sum is not. */
	t_redis_cli(&rds, out, sizeof(out), "SETRANGE %s 1000 Z", key);
	c = wsrv_connect(&s2, 0, 5000);
	cr_expect_eq(kvr_lookup_l2(c, k, 6, NULL, NULL), 4);
	cr_expect_eq(T_L2(&s2.t, corrupt), 1);
	cr_expect_eq(T_L2(&s2.t, deleted), 1);
	cr_expect_eq(t_redis_int(&rds, "EXISTS %s", key), 0);
	cr_expect_eq(wsrv_retrieve_check(c, k, 6, CHUNK), 4);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	free(k);
}

Test(l2, bad_header_is_a_miss_counted_and_deleted)
{
	struct kvr_client *c;
	struct kvr_key *k;
	char key[160], out[64];

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	k = store_on_s1(4, 3);
	redis_key_of(&k[0], key, sizeof(key));
	t_redis_cli(&rds, out, sizeof(out), "SET %s garbage", key);
	c = wsrv_connect(&s2, 0, 5000);
	cr_expect_eq(kvr_lookup_l2(c, k, 3, NULL, NULL), 0);
	cr_expect_eq(T_L2(&s2.t, corrupt), 1);
	cr_expect_eq(t_redis_int(&rds, "EXISTS %s", key), 0);
	kvr_close(c);
	free(k);
}

Test(l2, hole_in_l2_ends_the_prefix)
{
	struct kvr_client *c;
	struct kvr_key *k;
	char key[160];

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	k = store_on_s1(5, 8);
	redis_key_of(&k[3], key, sizeof(key));
	cr_assert_eq(t_redis_int(&rds, "DEL %s", key), 1);
	c = wsrv_connect(&s2, 0, 5000);
	{
		long h = kvr_lookup_l2(c, k, 8, NULL, NULL);

		cr_expect_eq(h, 3, "hits %ld (%s), holes %llu misses %llu", h,
			     kvr_client_errmsg(c),
			     (unsigned long long)T_L2(&s2.t, holes),
			     (unsigned long long)T_L2(&s2.t, misses));
	}
	cr_expect_eq(T_L2(&s2.t, holes), 1);
	cr_expect_eq(T_L2(&s2.t, down_chunks), 3);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	free(k);
}

Test(l2, chunk_already_in_l2_is_not_sent_again)
{
	struct kvr_client *c;
	struct kvr_key *k;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	k = store_on_s1(6, 5);
	c = wsrv_connect(&s2, 0, 5000);
	cr_assert_eq(wsrv_store(c, k, 5, CHUNK), 5);
	wait_uploaded(&s2, 5);
	cr_expect_eq(T_L2(&s2.t, up_exists), 5);
	cr_expect_eq(T_L2(&s2.t, up_chunks), 0);
	kvr_close(c);
	free(k);
}

Test(l2, redis_down_serves_l1_and_reconnects_when_back)
{
	const char *more[] = {"--l2-io-ms", "300", NULL};
	struct kvr_client *c;
	struct kvr_key *k, *k2, *k3;
	uint64_t before;
	uint32_t r = 100;

	redis_up(NULL);
	l2t_start(&s1, url, more);
	k = store_on_s1(7, 2);
	t_redis_kill(&rds);
	c = wsrv_connect(&s1, 0, 5000);
	k2 = l2t_keys_for(c, 8, 4);
	cr_assert_eq(wsrv_store(c, k2, 4, CHUNK), 4);
	/* L1 keeps serving; the read-through of a miss fails fast. */
	cr_expect_eq(kvr_lookup_l2(c, k2, 4, NULL, NULL), 4);
	k3 = l2t_keys_for(c, 9, 2);
	cr_expect_eq(kvr_lookup_l2(c, k3, 2, NULL, NULL), 0);
	for (int i = 0; i < 100 && T_L2(&s1.t, queue_depth); i++)
		wsrv_sleep_ms(20);
	wsrv_sleep_ms(100);
	cr_expect_gt(T_L2(&s1.t, up_failed), 0);
	cr_expect_gt(T_L2(&s1.t, errors[0]) + T_L2(&s1.t, errors[1]), 0);
	cr_expect(t_server_log_has(&s1.t, "down ("));
	cr_expect_eq(T_L2(&s1.t, node[0].state), 2);

	t_redis_restart(&rds);
	before = T_L2(&s1.t, up_chunks);
	/* New commits upload again once the backoff has run out. */
	for (int i = 0; i < 50 && T_L2(&s1.t, up_chunks) == before; i++) {
		struct kvr_key *kn = l2t_keys_for(c, r++, 1);

		cr_assert_eq(wsrv_store(c, kn, 1, CHUNK), 1);
		free(kn);
		wsrv_sleep_ms(100);
	}
	cr_expect_gt(T_L2(&s1.t, up_chunks), before);
	cr_expect_eq(T_L2(&s1.t, node[0].state), 1);
	cr_expect(t_server_log_has(&s1.t, " up"));
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
	free(k2);
	free(k3);
}

Test(l2, uploads_fail_counted_when_redis_is_full_with_noeviction)
{
	struct kvr_client *c;
	struct kvr_key *k;

	redis_up("--maxmemory 2mb --maxmemory-policy noeviction");
	l2t_start(&s1, url, NULL);
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 20, 64);
	for (uint32_t i = 0; i < 64; i += 8)
		cr_assert_eq(wsrv_store(c, k + i, 8, CHUNK), 8);
	wait_uploaded(&s1, 0);
	for (int i = 0;
	     i < 200 && T_L2(&s1.t, up_chunks) + T_L2(&s1.t, up_failed) < 64;
	     i++)
		wsrv_sleep_ms(10);
	cr_expect_gt(T_L2(&s1.t, up_failed), 0, "up %llu failed %llu",
		     (unsigned long long)T_L2(&s1.t, up_chunks),
		     (unsigned long long)T_L2(&s1.t, up_failed));
	cr_expect_gt(T_L2(&s1.t, errors[3]), 0, "OOM errors");
	cr_expect_gt(T_L2(&s1.t, up_chunks), 0);
	/* Nothing else broke: L1 serves every chunk, the node stays up. */
	cr_expect_eq(kvr_lookup(c, k, 64, NULL), 64);
	cr_expect_eq(wsrv_retrieve_check(c, k, 64, CHUNK), 64);
	cr_expect_eq(T_L2(&s1.t, node[0].state), 1);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

struct loaded {
	struct wsrv *s;
	uint64_t n;
};

static bool loads_done(void *arg)
{
	struct loaded *l = arg;

	return T_L2(&l->s->t, down_chunks) >= l->n &&
	       T_L2(&l->s->t, queue_depth) == 0;
}

Test(l2, deadline_answers_l1_prefix_and_says_ask_again)
{
	const char *more[] = {"--l2-deadline-ms", "100", NULL};
	struct loaded ld = {&s2, 4};
	struct kvr_client *c;
	struct kvr_key *k;
	bool pending = false;
	long hits;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, more);
	k = store_on_s1(21, 4);
	c = wsrv_connect(&s2, 0, 5000);
	kill(rds.pid, SIGSTOP); /* Redis stalls: the read-through waits */
	hits = kvr_lookup_l2(c, k, 4, NULL, &pending);
	cr_expect_eq(hits, 0);
	cr_expect(pending, "the answer says loads are in flight");
	cr_expect_eq(T_L2(&s2.t, rt_deadline), 1);
	kill(rds.pid, SIGCONT);
	/* The loads went on after the answer and published into L1. */
	cr_expect(t_wait_until(loads_done, &ld, 5000));
	cr_expect_eq(kvr_lookup(c, k, 4, NULL), 4);
	cr_expect_eq(wsrv_retrieve_check(c, k, 4, CHUNK), 4);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	free(k);
}

Test(l2, async_lookup_through_l2_completes_with_flags)
{
	struct kvr_client *c;
	struct kvr_key *k;
	struct kvr_completion e;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	k = store_on_s1(22, 5);
	c = wsrv_connect(&s2, 0, 5000);
	cr_assert_eq(kvr_submit_lookup_l2(c, k, 5, true, (void *)0x5), 0);
	cr_assert_eq(kvr_reap(c, &e, 1, 1, -1), 1);
	cr_expect_eq(e.status, 0);
	cr_expect_eq(e.value, 5);
	cr_expect_eq(e.flags, 0u);
	cr_expect_eq(e.user, (void *)0x5);
	cr_expect_neq(e.handle, 0, "pinned under a lease");
	cr_expect_eq(kvr_release(c, e.handle), 0);
	kvr_close(c);
	free(k);
}

Test(l2, worker_killed_while_lookup_waits_on_l2_leaks_nothing)
{
	const char *more[] = {"--l2-deadline-ms", "5000", NULL};
	struct loaded ld = {&s2, 6};
	struct kvr_client *c;
	struct kvr_key *k;
	pid_t child;
	int st;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, more);
	k = store_on_s1(23, 6);
	kill(rds.pid, SIGSTOP);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct kvr_client *w = wsrv_connect(&s2, 0, 10000);

		/* Waits on L2 until killed; pins under a lease if it ever
		 * got an answer. */
		kvr_lookup_l2(w, k, 6, &(uint64_t){0}, NULL);
		_exit(0);
	}
	wsrv_sleep_ms(400);
	cr_expect_eq(T_L2(&s2.t, rt_lookups), 1, "the lookup waits on L2");
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	kill(rds.pid, SIGCONT);
	cr_expect(t_wait_until(loads_done, &ld, 5000));
	c = wsrv_connect(&s2, 0, 5000);
	cr_expect_eq(kvr_lookup(c, k, 6, NULL), 6, "loads still published");
	kvr_close(c);
	/* Exit 0 means the self-check found no pin, lease or reservation. */
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	free(k);
}

Test(l2, demo_second_host_gets_every_chunk_through_l2)
{
	char cmd[768], line[512];
	bool ok = false, through = false;
	FILE *f;
	int st;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	/* 16 chunks x 256 tokens: a 4k-token request, 2 layers. */
	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-demo -s %s -P %s -l 2 2>&1",
		 KVR_BIN_DIR, s1.sock, s2.sock);
	f = popen(cmd, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f)) {
		fputs(line, stderr); /* shown if the test fails */
		through |= strstr(line, "16 through L2") != NULL;
		ok |= strstr(line, "second host verify: all") != NULL;
	}
	st = pclose(f);
	cr_expect_eq(st, 0, "kvring-demo exit status %d", st);
	cr_expect(through && ok);
	cr_expect_eq(T_L2(&s2.t, down_chunks), 16);
}

static bool no_pins(void *arg)
{
	return T_GSTAT(&((struct wsrv *)arg)->t, pins) == 0;
}

Test(l2, upload_pins_outlive_the_transfer_deadline_when_redis_stalls)
{
	/* The L2 channel's pins (and reservations) must not be reclaimed
	 * by --xfer-ms while a lane may still be reading (or writing) their
	 * slots: eviction could reuse a slot under a send. */
	const char *more[] = {"--xfer-ms", "100", "--stall-ms", "50", NULL};
	struct kvr_client *c;
	struct kvr_key *k;

	redis_up(NULL);
	l2t_start(&s1, url, more);
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 24, 4);
	kill(rds.pid, SIGSTOP); /* the upload stalls in the lane */
	cr_assert_eq(wsrv_store(c, k, 4, CHUNK), 4);
	wsrv_sleep_ms(400); /* 4 x --xfer-ms; heartbeats run the expiry */
	cr_expect_eq(T_GSTAT(&s1.t, pins), 4, "the upload's pins are held");
	kill(rds.pid, SIGCONT);
	wait_uploaded(&s1, 4);
	cr_expect_eq(T_L2(&s1.t, up_chunks), 4);
	cr_expect(t_wait_until(no_pins, &s1, 2000), "unpinned after upload");
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

Test(l2, chunk_loaded_from_l2_carries_its_sum_for_verify_workers)
{
	/* The L2 header's payload sum is verified against the bytes as they
	 * land, and it is the same XXH3-64 a worker computes: the L1 object
	 * gets it, so a worker with checksums can check what L2 brought. */
	struct kvr_client *c;
	struct kvr_key *k;
	struct kvr_xfer x;
	uint32_t unchecked = 99;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	k = store_on_s1(30, 8); /* a worker without checksums stored them */
	c = l2t_connect_summing(&s2);
	cr_assert_eq(kvr_lookup_l2(c, k, 8, NULL, NULL), 8, "lookup_l2: %s",
		     kvr_client_errmsg(c));
	cr_assert_eq(kvr_prepare_retrieve(c, k, 8, &x), 0);
	cr_assert_eq(x.nslots, 8);
	cr_expect_eq(kvr_verify_retrieve(c, &x, &unchecked), 0,
		     "no slot fails its sum");
	cr_expect_eq(unchecked, 0, "%u of 8 slots had no sum to check",
		     unchecked);
	cr_expect_eq(kvr_commit_retrieve(c, &x), 0);
	cr_expect_eq(wsrv_retrieve_check(c, k, 8, CHUNK), 8);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

Test(l2, chunk_damaged_in_the_pool_after_commit_is_never_served_from_l2)
{
	/* A worker with checksums summed chunk 1 at commit; then its bytes
	 * change in the pool (memory damage, a stray write) before the
	 * upload reads them. The upload sends the worker's sum, not one of
	 * the damaged bytes, so the second host finds the value corrupt: a
	 * miss, counted and deleted, never the damaged bytes. */
	uint64_t sizes[4] = {CHUNK, CHUNK, CHUNK, CHUNK};
	struct kvr_client *c1, *c2;
	unsigned char *slot1;
	struct kvr_key *k;
	struct kvr_xfer x;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	c1 = l2t_connect_summing(&s1);
	k = l2t_keys_for(c1, 31, 4);
	cr_assert_eq(kvr_prepare_store(c1, k, sizes, 4, &x), 0);
	cr_assert_eq(x.nslots, 4);
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert_eq(x.slots[i].status, KVR_SLOT_OK);
		wsrv_fill(&k[i], x.slots[i].ptr, CHUNK);
	}
	slot1 = x.slots[1].ptr;
	kill(rds.pid, SIGSTOP); /* the upload waits until the damage */
	cr_assert_eq(kvr_commit_store(c1, &x), 0, "%s", kvr_client_errmsg(c1));
	slot1[1000] ^= 0x5a;
	kill(rds.pid, SIGCONT);
	wait_uploaded(&s1, 4);

	c2 = wsrv_connect(&s2, 0, 5000);
	cr_expect_eq(kvr_lookup_l2(c2, k, 4, NULL, NULL), 1,
		     "the prefix ends at the damaged chunk");
	cr_expect_eq(T_L2(&s2.t, corrupt), 1);
	cr_expect_eq(T_L2(&s2.t, deleted), 1);
	cr_expect_eq(wsrv_retrieve_check(c2, k, 4, CHUNK), 1);
	l2t_end2(&s1, &s2, c1, c2, k);
}

Test(l2, read_through_waiting_on_l2_sleeps_until_its_deadline)
{
	/* While a read-through waits on a stalled Redis, the loop has
	 * nothing to do until the lane answers (the done eventfd wakes it)
	 * or the deadline comes. It used to wake every millisecond, and
	 * spin --spin-us after each wake-up, for the whole wait. */
	const char *more[] = {"--l2-deadline-ms", "600", "--l2-io-ms", "5000",
			      NULL};
	struct kvr_client *c;
	struct kvr_key *k;
	bool pending = false;
	uint64_t w0, woke;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, more);
	k = store_on_s1(32, 4);
	c = wsrv_connect(&s2, 0, 5000);
	kill(rds.pid, SIGSTOP); /* Redis stalls: the read-through waits */
	w0 = T_GSTAT(&s2.t, loop_wakeups);
	cr_expect_eq(kvr_lookup_l2(c, k, 4, NULL, &pending), 0);
	woke = T_GSTAT(&s2.t, loop_wakeups) - w0;
	kill(rds.pid, SIGCONT);
	cr_expect(pending, "answered at the deadline");
	/* 600 ms: 12 heartbeats of 50 ms, the request, the deadline; one
	 * wake-up per millisecond would be ~600. */
	cr_expect_lt(woke, 150, "the loop woke %llu times in a 600 ms wait",
		     (unsigned long long)woke);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

/*
 * An upload whose lane hashes goes through a temporary key ("{K}:t:<tag>",
 * SET, SETRANGE of the header, RENAME to K, PERSIST): a second server that
 * reads the chunks through while they are being uploaded gets each one
 * either as a miss or byte-exact, never a corrupt value, and once the
 * uploads ended no temporary key is left and K has no TTL. Chunks of
 * 1 MiB + 4 KiB: five 256 KiB pieces, the last one short.
 */
Test(l2, reader_never_sees_a_temporary_upload_key)
{
	const uint64_t big = (1u << 20) + (4u << 10);
	const uint32_t n = 16;
	struct kvr_client *c1, *c2;
	struct kvr_key *k;
	char key[160], out[4096];
	long hits = 0, rounds = 0;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, NULL);
	c1 = wsrv_connect(&s1, 0, 5000);
	c2 = wsrv_connect(&s2, 0, 5000);
	k = l2t_keys_for(c1, 9, n);
	cr_assert_eq(wsrv_store(c1, k, n, big), n);
	/* No wait: s2 reads through while s1's lane is still uploading. */
	while (hits < (long)n && rounds++ < 2000) {
		uint64_t lease = 0;
		bool pending = true;

		hits = kvr_lookup_l2(c2, k, n, &lease, &pending);
		cr_assert_geq(hits, 0, "lookup_l2: %s", kvr_client_errmsg(c2));
		if (hits > 0) {
			uint32_t got =
			    wsrv_retrieve_check(c2, k, (uint32_t)hits, big);

			cr_assert_eq(got, (uint32_t)hits,
				     "retrieved %u of %ld hits (round %ld)",
				     got, hits, rounds);
		}
		if (lease)
			cr_expect_eq(kvr_release(c2, lease), 0);
	}
	cr_expect_eq(hits, (long)n, "hits %ld after %ld rounds", hits, rounds);
	cr_expect_eq(T_L2(&s2.t, corrupt), 0, "a reader saw a partial value");
	l2t_wait_ended(&s1, n);
	cr_expect_eq(T_L2(&s1.t, up_failed), 0);
	t_redis_cli(&rds, out, sizeof(out), "--scan --pattern '*}:t:*'");
	cr_expect_str_eq(out, "", "temporary keys left: %s", out);
	cr_expect_eq(t_redis_int(&rds, "DBSIZE"), (long)n);
	redis_key_of(&k[5], key, sizeof(key));
	cr_expect_eq(t_redis_int(&rds, "TTL %s", key), -1, "K keeps a TTL");
	cr_expect_eq(t_redis_int(&rds, "STRLEN %s", key), 64 + (long)big);
	t_redis_cli(&rds, out, sizeof(out), "GETRANGE %s 0 3", key);
	cr_expect_str_eq(out, "KVL2");
	/* It went the temporary way: one RENAME and one PERSIST per chunk
	 * (server 2's uploads of what it loaded are EXISTS hits). */
	cr_expect_eq(l2t_redis_calls(&rds, "rename"), (long)n);
	cr_expect_eq(l2t_redis_calls(&rds, "persist"), (long)n);
	l2t_end2(&s1, &s2, c1, c2, k);
}

/*
 * Redis user "kvr" with every command but those @minus names, and its
 * --l2-auth-file in the Redis helper's private directory (path in @auth).
 */
static void acl_user(const char *minus, char *auth, size_t n)
{
	char out[256];
	FILE *f;

	t_redis_cli(&rds, out, sizeof(out),
		    "ACL SETUSER kvr on '>kvr-pw' '~*' '&*' +@all %s", minus);
	cr_assert_str_eq(out, "OK", "ACL SETUSER: %s", out);
	snprintf(auth, n, "%s/l2.auth", rds.dir);
	f = fopen(auth, "w");
	cr_assert(f && fputs("kvr kvr-pw\n", f) >= 0 && fclose(f) == 0);
}

/*
 * A refused SET publishes nothing. The L2 user may run every command but
 * SET (an ACL), so a server-hashed upload's SET of the temporary key is
 * refused (NOPERM) while what follows it in the pipeline is accepted. The
 * sequence before the publish script (SETRANGE, RENAME, PERSIST) then
 * created a 64-byte value from the SETRANGE alone and published it as K;
 * the script finds no whole temporary value and writes nothing. The
 * failures are counted, logged once with what to do, and a reader finds
 * misses, never a corrupt value.
 */
Test(l2, refused_set_publishes_nothing)
{
	struct kvr_client *c1, *c2;
	struct kvr_key *k;
	char auth[160], out[4096];
	const char *more[] = {"--l2-auth-file", auth, NULL};
	long hits;

	redis_up(NULL);
	acl_user("-set", auth, sizeof(auth));
	l2t_start(&s1, url, more);
	l2t_start(&s2, url, NULL);
	c1 = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c1, 30, 8);
	cr_assert_eq(wsrv_store(c1, k, 8, CHUNK), 8);
	l2t_wait_ended(&s1, 8);
	cr_expect_eq(T_L2(&s1.t, up_failed), 8);
	cr_expect_eq(T_L2(&s1.t, up_chunks), 0);
	cr_expect_geq(T_L2(&s1.t, errors[4]), 8, "server errors");
	t_redis_cli(&rds, out, sizeof(out), "--scan --pattern '*'");
	cr_expect_str_eq(out, "", "a refused SET published: %s", out);
	cr_expect(t_server_log_has(&s1.t, "refused SET (NOPERM"),
		  "the refusal is logged with what to do");
	/* A second host finds nothing, and nothing corrupt. */
	c2 = wsrv_connect(&s2, 0, 5000);
	hits = kvr_lookup_l2(c2, k, 8, NULL, NULL);
	cr_expect_eq(hits, 0, "hits %ld", hits);
	cr_expect_eq(T_L2(&s2.t, corrupt), 0);
	/* L1 still serves every chunk. */
	cr_expect_eq(wsrv_retrieve_check(c1, k, 8, CHUNK), 8);
	l2t_end2(&s1, &s2, c1, c2, k);
}

/*
 * A node that refuses the publish script (an ACL user without EVAL) still
 * gets every chunk: the first upload's script is refused, the chunks are
 * sent again as one plain SET each (counted in tryagain), the lane logs
 * once what to do and sends later chunks as plain SETs from the start.
 */
Test(l2, node_refusing_the_publish_script_gets_plain_sets)
{
	struct kvr_client *c;
	struct kvr_key *k;
	char auth[160], key[160], out[256];
	const char *more[] = {"--l2-auth-file", auth, NULL};
	uint64_t resent;

	redis_up(NULL);
	acl_user("-eval", auth, sizeof(auth));
	l2t_start(&s1, url, more);
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 31, 16);
	cr_assert_eq(wsrv_store(c, k, 8, CHUNK), 8);
	l2t_wait_ended(&s1, 8);
	resent = T_L2(&s1.t, tryagain);
	cr_expect_eq(resent, 8, "resent %llu", (unsigned long long)resent);
	cr_expect(t_server_log_has(&s1.t, "refused the publish script"));
	cr_assert_eq(wsrv_store(c, k + 8, 8, CHUNK), 8);
	l2t_wait_ended(&s1, 16);
	cr_expect_eq(T_L2(&s1.t, up_chunks), 16);
	cr_expect_eq(T_L2(&s1.t, up_failed), 0);
	cr_expect_eq(T_L2(&s1.t, tryagain), resent, "EVAL sent again");
	cr_expect(inspect_has(&s1, "", "l2.tryagain=8"));
	cr_expect(
	    inspect_has(&s1, "--prometheus",
			"kvring_l2_redirects_total{kind=\"tryagain\"} 8"));
	cr_expect_eq(t_redis_int(&rds, "DBSIZE"), 16);
	redis_key_of(&k[11], key, sizeof(key));
	cr_expect_eq(t_redis_int(&rds, "STRLEN %s", key), 64 + CHUNK);
	t_redis_cli(&rds, out, sizeof(out), "GETRANGE %s 0 3", key);
	cr_expect_str_eq(out, "KVL2");
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

/*
 * A lookup can report more chunks than the retrieve after it gets, by
 * design, and the retrieve says why. A read-through lookup with a lease
 * pins its 24 chunks; retrieving them again by keys pins them a second
 * time (pins count per owner), and the uid's pin quota (40 MiB here;
 * the 75% default cut a 24-chunk version of an earlier test at 23) cuts
 * the retrieve at 16. The call succeeds with 16 slots, and its message
 * names the quota and the way out; through the lease all 24 come.
 */
Test(l2, retrieve_cut_by_the_pin_quota_after_a_pinned_lookup_says_why)
{
	const uint64_t mb = 1u << 20;
	const char *more[] = {"--quota-uid-pinned", "40M", NULL};
	struct kvr_client *c2;
	struct kvr_key *k;
	struct kvr_xfer x;
	uint64_t lease = 0;
	bool pending = true;
	long hits = 0;
	int rc;

	redis_up(NULL);
	l2t_start(&s1, url, NULL);
	l2t_start(&s2, url, more);
	{
		struct kvr_client *c1 = wsrv_connect(&s1, 0, 5000);

		k = l2t_keys_for(c1, 32, 24);
		cr_assert_eq(wsrv_store(c1, k, 24, mb), 24);
		kvr_close(c1);
	}
	wait_uploaded(&s1, 24);
	c2 = wsrv_connect(&s2, 0, 5000);
	for (int i = 0; i < 200 && hits < 24; i++) {
		if (lease)
			cr_assert_eq(kvr_release(c2, lease), 0);
		lease = 0;
		hits = kvr_lookup_l2(c2, k, 24, &lease, &pending);
		if (hits < 24)
			wsrv_sleep_ms(10);
	}
	cr_assert_eq(hits, 24, "hits %ld: %s", hits, kvr_client_errmsg(c2));
	rc = kvr_prepare_retrieve(c2, k, 24, &x);
	cr_assert_eq(rc, 0, "prepare_retrieve: %s", kvr_client_errmsg(c2));
	cr_expect_eq(x.nslots, 16, "slots %u", x.nslots);
	cr_expect(strstr(kvr_client_errmsg(c2),
			 "pinned 16 of the 24 leading chunks stored") &&
		      strstr(kvr_client_errmsg(c2), "--quota-uid-pinned") &&
		      strstr(kvr_client_errmsg(c2), "through its lease"),
		  "message: '%s'", kvr_client_errmsg(c2));
	cr_expect_eq(kvr_commit_retrieve(c2, &x), 0);
	/* Through the lease: its own pins, every chunk, every byte. */
	rc = kvr_prepare_retrieve_lease(c2, lease, &x);
	cr_assert_eq(rc, 0, "redeem: %s", kvr_client_errmsg(c2));
	cr_expect_eq(x.nslots, 24, "slots %u", x.nslots);
	cr_expect_str_eq(kvr_client_errmsg(c2), "");
	for (uint32_t i = 0; i < x.nslots; i++)
		cr_expect_eq(wsrv_check(&k[i], x.slots[i].ptr, mb), mb,
			     "chunk %u", i);
	cr_expect_eq(kvr_commit_retrieve(c2, &x), 0);
	kvr_close(c2);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}
