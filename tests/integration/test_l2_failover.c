/* SPDX-License-Identifier: MIT */
/*
 * test_l2_failover.c - kvringd's L2 tier against a real Redis Cluster with
 * replicas (3 masters, one replica each: redis-cli --cluster create
 * --cluster-replicas 1, tests/support/t_redis.c): a master is killed for
 * good, its replica takes over its slots, and kvringd follows the new slot
 * map on its own: chunks uploaded before the kill are read through from
 * the promoted replica byte for byte, and new uploads succeed again. The
 * 3-master cluster without replicas is test_l2_cluster.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_redis.h"
#include "worker_srv.h"

#define CHUNK (32u << 10)
#define N     32u

#define T_L2(t, f) atomic_load_explicit(&(t)->hdr->l2.f, memory_order_relaxed)

static struct t_cluster cl;
static bool cl_up;
static struct wsrv s1, s2;

static void setup(void)
{
	if (!t_redis_available())
		cr_skip_test("redis-server/redis-cli not installed "
			     "(scripts/setup.sh deps installs them)");
	t_cluster_start_replicas(&cl);
	cl_up = true;
}

static void teardown(void)
{
	if (s1.pid)
		wsrv_stop(&s1);
	if (s2.pid)
		wsrv_stop(&s2);
	wsrv_cleanup(&s1);
	wsrv_cleanup(&s2);
	if (cl_up)
		t_cluster_stop(&cl);
}

TestSuite(l2_failover, .init = setup, .fini = teardown, .timeout = 120);

static void start(struct wsrv *s)
{
	const char *args[] = {"--pool-size",  "64M",
			      "--allow-root", "--heartbeat-ms",
			      "50",	      "--log-level",
			      "info",	      "--l2",
			      cl.url,	      "--l2-io-ms",
			      "500",	      "--quota-reserved",
			      "100%",	      "--quota-pinned",
			      "100%",	      "--max-key-bytes",
			      "100%",	      NULL};

	wsrv_init(s, "64M");
	t_server_start(&s->t, args);
	s->pid = s->t.pid;
}

static struct kvr_key *keys_for(struct kvr_client *c, uint32_t r, uint32_t n)
{
	uint32_t *t = malloc((size_t)n * 16 * sizeof(*t));
	struct kvr_key *k = calloc(n, sizeof(*k));

	cr_assert(t && k);
	wsrv_tokens(r, t, (size_t)n * 16);
	cr_assert_eq(kvr_client_keys(c, t, (size_t)n * 16, k, n), (long)n);
	free(t);
	return k;
}

static struct wsrv *up_s;
static uint64_t up_want;

/* Uploads ended (stored, present or failed) reach up_want. */
static uint64_t up_ended(const struct wsrv *s)
{
	return T_L2(&s->t, up_chunks) + T_L2(&s->t, up_exists) +
	       T_L2(&s->t, up_failed);
}

static bool settled(void *arg)
{
	(void)arg;
	return up_ended(up_s) >= up_want && T_L2(&up_s->t, queue_depth) == 0;
}

static void wait_uploaded(struct wsrv *s, uint64_t want)
{
	up_s = s;
	up_want = want;
	cr_assert(t_wait_until(settled, NULL, 10000),
		  "uploads ended %llu of %llu", (unsigned long long)up_ended(s),
		  (unsigned long long)want);
}

/* The master holding chunk key @k's value (found by its hex). */
static int master_of(const struct kvr_key *k)
{
	char pat[64], key[256];

	snprintf(pat, sizeof(pat), "*:%016llx%016llx",
		 (unsigned long long)k->hi, (unsigned long long)k->lo);
	for (int i = 0; i < T_CLUSTER_N; i++) {
		t_redis_cli(&cl.node[i], key, sizeof(key),
			    "--scan --pattern '%s'", pat);
		if (key[0])
			return t_cluster_node_of(&cl, key);
	}
	cr_assert_fail("key %s on no master", pat);
	return -1;
}

Test(l2_failover, promoted_replica_serves_and_takes_uploads)
{
	struct kvr_client *c1, *c2;
	struct kvr_key *k;
	long hits = 0;
	bool pending = true, clean = false;
	int victim;

	start(&s1);
	start(&s2);
	c1 = wsrv_connect(&s1, 0, 5000);
	k = keys_for(c1, 1, N);
	cr_assert_eq(wsrv_store(c1, k, N, CHUNK), N);
	wait_uploaded(&s1, N);
	cr_assert_eq(T_L2(&s1.t, up_chunks), N, "failed %llu",
		     (unsigned long long)T_L2(&s1.t, up_failed));
	/* Every master's writes reached its replica before the kill. */
	for (int i = 0; i < T_CLUSTER_N; i++)
		cr_assert_eq(t_redis_int(&cl.node[i], "WAIT 1 5000"), 1,
			     "master %d: replica did not acknowledge", i);
	victim = master_of(&k[0]);
	cr_assert_geq(victim, 0);
	t_redis_kill(&cl.node[victim]);
	cr_assert(t_cluster_wait_ok(&cl, 30000),
		  "no replica took over master %d's slots", victim);

	/* Reads: a second kvringd gets every chunk, the promoted replica's
	 * share included, once the lanes have the new slot map. */
	c2 = wsrv_connect(&s2, 0, 5000);
	for (int i = 0; i < 150 && hits < (long)N; i++) {
		hits = kvr_lookup_l2(c2, k, N, NULL, &pending);
		if (hits < (long)N)
			wsrv_sleep_ms(100);
	}
	cr_assert_eq(hits, (long)N, "hits %ld after failover: %s", hits,
		     kvr_client_errmsg(c2));
	cr_expect_eq(wsrv_retrieve_check(c2, k, N, CHUNK), N);
	cr_expect_eq(T_L2(&s2.t, corrupt), 0);

	/* Writes: server 1 had the old master in its map; new commits
	 * upload without a failure once it follows the promotion. */
	for (uint32_t r = 100; r < 250 && !clean; r++) {
		struct kvr_key *kn = keys_for(c1, r, 16);
		uint64_t f0 = T_L2(&s1.t, up_failed), e0 = up_ended(&s1);

		cr_assert_eq(wsrv_store(c1, kn, 16, CHUNK), 16);
		wait_uploaded(&s1, e0 + 16);
		clean = T_L2(&s1.t, up_failed) == f0;
		free(kn);
		if (!clean)
			wsrv_sleep_ms(100);
	}
	cr_expect(clean, "uploads still fail after the failover (%llu)",
		  (unsigned long long)T_L2(&s1.t, up_failed));
	cr_expect_geq(T_L2(&s1.t, slot_refresh), 2, "the map was refreshed");
	kvr_close(c1);
	kvr_close(c2);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}
