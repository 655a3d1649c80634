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

#include "l2_suite.h"

#define CHUNK (32u << 10)
#define N     32u

static struct t_cluster cl;
static bool cl_up;
static struct wsrv s1, s2;

static void setup(void)
{
	l2t_need_redis();
	t_cluster_start_replicas(&cl);
	cl_up = true;
}

static void teardown(void)
{
	l2t_down(&s1);
	l2t_down(&s2);
	if (cl_up)
		t_cluster_stop(&cl);
}

TestSuite(l2_failover, .init = setup, .fini = teardown, .timeout = 120);

/* An L2 server on the cluster, with a 500 ms I/O timeout. */
static void start(struct wsrv *s)
{
	const char *args[] = {"--l2-io-ms", "500", NULL};

	l2t_start(s, cl.url, args);
}

/* The master holding chunk key @k's value (found by its hex). */
static int master_of(const struct kvr_key *k)
{
	char key[256];

	if (l2t_cluster_find(&cl, k, key, sizeof(key)) < 0)
		cr_assert_fail("key %016llx%016llx on no master",
			       (unsigned long long)k->hi,
			       (unsigned long long)k->lo);
	return t_cluster_node_of(&cl, key);
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
	k = l2t_keys_for(c1, 1, N);
	cr_assert_eq(wsrv_store(c1, k, N, CHUNK), N);
	l2t_wait_ended(&s1, N);
	cr_assert_eq(T_L2(&s1.t, up_chunks), N, "failed %llu",
		     (unsigned long long)T_L2(&s1.t, up_failed));
	/* Every master's writes reached its replica before the kill (by
	 * replication offset: WAIT on a new connection covers nothing). */
	cr_assert(t_cluster_wait_replicated(&cl, 5000),
		  "a replica did not catch up with its master");
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
		struct kvr_key *kn = l2t_keys_for(c1, r, 16);
		uint64_t f0 = T_L2(&s1.t, up_failed), e0 = l2t_up_ended(&s1);

		cr_assert_eq(wsrv_store(c1, kn, 16, CHUNK), 16);
		l2t_wait_ended(&s1, e0 + 16);
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
