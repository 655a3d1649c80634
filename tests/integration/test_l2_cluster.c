/* SPDX-License-Identifier: MIT */
/*
 * test_l2_cluster.c - kvringd's L2 tier against a real 3-master Redis
 * Cluster started by the test (tests/support/t_redis.c: redis-server
 * --cluster-enabled yes on checked-free loopback ports, redis-cli
 * --cluster create): chunks spread over every master and read through by
 * a second kvringd ("two hosts on one machine", 4k tokens, every byte
 * checked), one master killed mid-traffic and restarted, and a slot
 * migrated under the servers' feet (ASK while it moves, MOVED after).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/clock.h>
#include <kvring/kvring.h>

#include "l2_suite.h"

#define CHUNK (32u << 10)

static struct t_cluster cl;
static bool cl_up;
static struct wsrv s1, s2, s3;

static void setup(void)
{
	l2t_need_redis();
	t_cluster_start(&cl);
	cl_up = true;
}

static void teardown(void)
{
	l2t_down(&s1);
	l2t_down(&s2);
	l2t_down(&s3);
	if (cl_up)
		t_cluster_stop(&cl);
}

TestSuite(l2_cluster, .init = setup, .fini = teardown, .timeout = 90);

/* An L2 server on the cluster, with a 500 ms I/O timeout, then @more. */
static void start_l2(struct wsrv *s, const char *const *more)
{
	const char *args[32] = {"--l2-io-ms", "500"};
	int n = 2;

	for (int i = 0; more && more[i]; i++) {
		cr_assert_lt(n, 31, "too many kvringd options");
		args[n++] = more[i];
	}
	args[n] = NULL;
	l2t_start(s, cl.url, args);
}

/* The Redis key of chunk key @k (found by its hex, fingerprint opaque). */
static void redis_key_of(const struct kvr_key *k, char *out, size_t n)
{
	if (l2t_cluster_find(&cl, k, out, n) < 0)
		cr_assert_fail("key %016llx%016llx on no node",
			       (unsigned long long)k->hi,
			       (unsigned long long)k->lo);
}

Test(l2_cluster, two_hosts_share_a_4k_token_request_through_the_cluster)
{
	/* 4096 tokens of 16-token chunks: 256 chunks. */
	const uint32_t n = 256;
	struct kvr_client *c1, *c2;
	struct kvr_key *k;
	long per[T_CLUSTER_N], sum = 0, hits;
	bool pending = true;

	start_l2(&s1, NULL);
	start_l2(&s2, NULL);
	c1 = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c1, 1, n);
	for (uint32_t i = 0; i < n; i += 64)
		cr_assert_eq(wsrv_store(c1, k + i, 64, CHUNK), 64);
	l2t_wait_ended(&s1, n);
	cr_expect_eq(T_L2(&s1.t, up_chunks), n, "failed %llu",
		     (unsigned long long)T_L2(&s1.t, up_failed));
	for (int i = 0; i < T_CLUSTER_N; i++) {
		per[i] = t_redis_int(&cl.node[i], "DBSIZE");
		cr_expect_gt(per[i], 0, "node %d holds no chunk", i);
		sum += per[i];
	}
	cr_expect_eq(sum, (long)n);
	cr_expect_geq(T_L2(&s1.t, slot_refresh), 1);
	cr_expect_eq(T_L2(&s1.t, nodes), 3);

	c2 = wsrv_connect(&s2, 0, 10000);
	cr_expect_eq(kvr_lookup(c2, k, n, NULL), 0);
	hits = kvr_lookup_l2(c2, k, n, NULL, &pending);
	if (pending) /* a slow machine: the loads finish after the answer */
		for (int i = 0; i < 100 && hits < (long)n; i++) {
			wsrv_sleep_ms(20);
			hits = kvr_lookup_l2(c2, k, n, NULL, &pending);
		}
	cr_assert_eq(hits, (long)n, "hits %ld: %s", hits,
		     kvr_client_errmsg(c2));
	/* Every byte of every chunk, as server 1's worker wrote it. */
	for (uint32_t i = 0; i < n; i += 64)
		cr_expect_eq(wsrv_retrieve_check(c2, k + i, 64, CHUNK), 64);
	cr_expect_eq(T_L2(&s2.t, down_chunks), n);
	cr_expect_eq(T_L2(&s2.t, corrupt), 0);
	l2t_end2(&s1, &s2, c1, c2, k);
}

/* The published state of the node at 127.0.0.1:@port (0 if not shown). */
static uint32_t node_state(struct wsrv *s, int port)
{
	char addr[48];

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	for (uint32_t i = 0; i < KVR_L2_SHM_NODES; i++)
		if (strcmp(s->t.hdr->l2.node[i].addr, addr) == 0)
			return T_L2(&s->t, node[i].state);
	return 0;
}

Test(l2_cluster, node_killed_mid_traffic_then_back)
{
	struct kvr_client *c;
	struct kvr_key *k;
	uint32_t r = 100;

	start_l2(&s1, NULL);
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 2, 32);
	cr_assert_eq(wsrv_store(c, k, 32, CHUNK), 32);
	l2t_wait_ended(&s1, 32);
	t_redis_kill(&cl.node[1]);
	/* Traffic goes on: L1 serves, uploads to the dead master fail. */
	for (uint32_t i = 0; i < 4; i++) {
		struct kvr_key *kn = l2t_keys_for(c, 10 + i, 16);

		cr_assert_eq(wsrv_store(c, kn, 16, CHUNK), 16);
		cr_expect_eq(kvr_lookup(c, kn, 16, NULL), 16);
		free(kn);
	}
	l2t_wait_ended(&s1, 32 + 64);
	cr_expect_gt(T_L2(&s1.t, up_failed), 0);
	cr_expect_gt(T_L2(&s1.t, up_chunks), 32,
		     "the live masters still "
		     "take their share");
	cr_expect(t_server_log_has(&s1.t, "down ("));
	cr_expect_eq(kvr_lookup(c, k, 32, NULL), 32);

	cr_expect_eq(node_state(&s1, cl.node[1].port), 2, "marked down");

	t_redis_restart(&cl.node[1]);
	/* Once its backoff runs out the node is used again: new commits
	 * upload without a failure. */
	for (int i = 0; i < 60; i++) {
		struct kvr_key *kn = l2t_keys_for(c, r++, 8);
		uint64_t f0 = T_L2(&s1.t, up_failed);

		cr_assert_eq(wsrv_store(c, kn, 8, CHUNK), 8);
		free(kn);
		l2t_wait_ended(&s1, 0);
		if (node_state(&s1, cl.node[1].port) == 1 &&
		    T_L2(&s1.t, up_failed) == f0)
			break;
		wsrv_sleep_ms(100);
	}
	cr_expect_eq(node_state(&s1, cl.node[1].port), 1, "up again");
	cr_expect(t_server_log_has(&s1.t, " up"));
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

/*
 * A batch is written to every master before any reply is read: with the
 * first seed's master frozen (SIGSTOP), the other two get their share of
 * an upload's EXISTS while the lane still waits for the frozen one's
 * replies (its 20 s --l2-io-ms has not run out: no I/O error counted).
 * Driven one node after the other, the lane sent them nothing before
 * that timeout. Thawed, the node answers and every chunk is uploaded.
 */
Test(l2_cluster, every_master_gets_its_share_while_another_is_frozen)
{
	const char *more[] = {"--l2-io-ms", "20000", NULL};
	long before[T_CLUSTER_N] = {0};
	struct kvr_client *c;
	struct kvr_key *k, *kn;
	uint64_t io;
	bool sent = false;

	l2t_start(&s1, cl.url, more);
	c = wsrv_connect(&s1, 0, 5000);
	/* A first upload: the lane reads the slot map, connects each node. */
	k = l2t_keys_for(c, 1, 16);
	cr_assert_eq(wsrv_store(c, k, 16, CHUNK), 16);
	l2t_wait_ended(&s1, 16);
	for (int i = 1; i < T_CLUSTER_N; i++)
		before[i] = l2t_redis_calls(&cl.node[i], "exists");
	kill(cl.node[0].pid, SIGSTOP); /* the lane's first node */
	kn = l2t_keys_for(c, 2, 32);
	cr_assert_eq(wsrv_store(c, kn, 32, CHUNK), 32);
	/* Up to 15 s, short of the 20 s timeout on the frozen node. */
	for (uint64_t end = kvr_clock_now_ns() + 15000000000ull;
	     !sent && kvr_clock_now_ns() < end;) {
		sent = true;
		for (int i = 1; i < T_CLUSTER_N; i++)
			if (l2t_redis_calls(&cl.node[i], "exists") <= before[i])
				sent = false;
		if (!sent)
			wsrv_sleep_ms(10);
	}
	io = T_L2(&s1.t, errors[1]); /* io */
	kill(cl.node[0].pid, SIGCONT);
	cr_expect(sent, "the live masters got no EXISTS while the first one "
			"was frozen");
	cr_expect_eq(io, 0, "the lane gave up on the frozen node first");
	l2t_wait_ended(&s1, 48);
	cr_expect_eq(T_L2(&s1.t, up_chunks), 48, "failed %llu",
		     (unsigned long long)T_L2(&s1.t, up_failed));
	cr_expect_eq(kvr_lookup(c, kn, 32, NULL), 32);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
	free(kn);
}

/* CLUSTER MYID of node i. */
static void node_id(int i, char *out, size_t n)
{
	t_redis_cli(&cl.node[i], out, n, "CLUSTER MYID");
	cr_assert(strlen(out) == 40, "node id '%s'", out);
}

Test(l2_cluster, slot_migrated_mid_run_is_followed_by_ask_then_moved)
{
	struct kvr_client *c1, *c2, *c3;
	struct kvr_key *k, *warm;
	char key[160], src_id[64], dst_id[64], out[256];
	long slot, hits;
	int src, dst;

	start_l2(&s1, NULL);
	start_l2(&s2, NULL);
	start_l2(&s3, NULL);
	c1 = wsrv_connect(&s1, 0, 5000);
	c2 = wsrv_connect(&s2, 0, 5000);
	c3 = wsrv_connect(&s3, 0, 5000);
	k = l2t_keys_for(c1, 3, 8);
	cr_assert_eq(wsrv_store(c1, k, 8, CHUNK), 8);
	l2t_wait_ended(&s1, 8);
	/* s2 and s3 load their slot maps now, before the move. */
	warm = l2t_keys_for(c2, 4, 1);
	cr_expect_eq(kvr_lookup_l2(c2, warm, 1, NULL, NULL), 0);
	cr_expect_eq(kvr_lookup_l2(c3, warm, 1, NULL, NULL), 0);

	redis_key_of(&k[0], key, sizeof(key));
	slot = t_redis_int(&cl.node[0], "CLUSTER KEYSLOT %s", key);
	src = t_cluster_node_of(&cl, key);
	cr_assert_geq(src, 0);
	dst = (src + 1) % T_CLUSTER_N;
	node_id(src, src_id, sizeof(src_id));
	node_id(dst, dst_id, sizeof(dst_id));
	/* Half-way: the key already moved, the slot is still the source's,
	 * so the source answers ASK. */
	t_redis_cli(&cl.node[dst], out, sizeof(out),
		    "CLUSTER SETSLOT %ld IMPORTING %s", slot, src_id);
	t_redis_cli(&cl.node[src], out, sizeof(out),
		    "CLUSTER SETSLOT %ld MIGRATING %s", slot, dst_id);
	t_redis_cli(&cl.node[src], out, sizeof(out),
		    "MIGRATE 127.0.0.1 %d %s 0 5000", cl.node[dst].port, key);
	cr_assert_str_eq(out, "OK", "MIGRATE: %s", out);
	hits = kvr_lookup_l2(c3, k, 8, NULL, NULL);
	cr_expect_eq(hits, 8, "hits %ld during the migration", hits);
	cr_expect_geq(T_L2(&s3.t, ask), 1);
	cr_expect_eq(wsrv_retrieve_check(c3, k, 8, CHUNK), 8);

	/* Done: every node says the slot is the destination's; s2's map
	 * still says source, which now answers MOVED. */
	for (int i = 0; i < T_CLUSTER_N; i++)
		t_redis_cli(&cl.node[i], out, sizeof(out),
			    "CLUSTER SETSLOT %ld NODE %s", slot, dst_id);
	hits = kvr_lookup_l2(c2, k, 8, NULL, NULL);
	cr_expect_eq(hits, 8, "hits %ld after the migration", hits);
	cr_expect_geq(T_L2(&s2.t, moved), 1);
	cr_expect_eq(wsrv_retrieve_check(c2, k, 8, CHUNK), 8);
	kvr_close(c1);
	kvr_close(c2);
	kvr_close(c3);
	cr_expect_eq(wsrv_stop(&s3), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	free(k);
	free(warm);
}

/*
 * Uploads into a slot that is migrating end published, never lost or
 * corrupt. Eight chunks whose slots are each put half-way through a move
 * (IMPORTING on the destination, MIGRATING on the source, the chunk not
 * yet anywhere) are uploaded: the source answers ASK to the temporary
 * key's SET, the destination takes it but answers TRYAGAIN to the publish
 * script (two keys, K not there yet), and the lane sends the chunk again
 * as one SET of K behind ASKING. Before, the chunk's upload failed and
 * was never tried again. Four of them come with the worker's sums and
 * go as one SET of K from the start: ASK alone serves them, no TRYAGAIN.
 * A second server reads all eight through during the migration, byte
 * for byte, and once the slots are the destination's a third server,
 * whose map is fresh, finds them there.
 */
Test(l2_cluster, upload_into_a_migrating_slot_is_published_after_tryagain)
{
	struct kvr_client *c1, *c2, *c3, *cs;
	struct kvr_key *warm, *k;
	char wkey[160], key[200], src_id[64], dst_id[64], out[256], *colon;
	long slot[8], hits;
	int dst[8];

	start_l2(&s1, NULL);
	start_l2(&s2, NULL);
	c1 = wsrv_connect(&s1, 0, 5000);
	c2 = wsrv_connect(&s2, 0, 5000);
	/* One chunk first: its Redis key gives the namespace's prefix. */
	warm = l2t_keys_for(c1, 40, 1);
	cr_assert_eq(wsrv_store(c1, warm, 1, CHUNK), 1);
	l2t_wait_ended(&s1, 1);
	redis_key_of(&warm[0], wkey, sizeof(wkey));
	colon = strrchr(wkey, ':');
	cr_assert(colon, "key %s", wkey);
	colon[1] = '\0';
	cr_expect_eq(kvr_lookup_l2(c2, warm, 1, NULL, NULL), 1, "s2 warm");

	k = l2t_keys_for(c1, 41, 8);
	for (int i = 0; i < 8; i++) {
		int src;

		snprintf(key, sizeof(key), "%s%016llx%016llx", wkey,
			 (unsigned long long)k[i].hi,
			 (unsigned long long)k[i].lo);
		slot[i] = t_redis_int(&cl.node[0], "CLUSTER KEYSLOT %s", key);
		src = t_cluster_node_of(&cl, key);
		cr_assert_geq(src, 0);
		dst[i] = (src + 1) % T_CLUSTER_N;
		node_id(src, src_id, sizeof(src_id));
		node_id(dst[i], dst_id, sizeof(dst_id));
		t_redis_cli(&cl.node[dst[i]], out, sizeof(out),
			    "CLUSTER SETSLOT %ld IMPORTING %s", slot[i],
			    src_id);
		cr_assert_str_eq(out, "OK", "IMPORTING: %s", out);
		t_redis_cli(&cl.node[src], out, sizeof(out),
			    "CLUSTER SETSLOT %ld MIGRATING %s", slot[i],
			    dst_id);
		cr_assert_str_eq(out, "OK", "MIGRATING: %s", out);
	}
	/* Four the lane hashes (temporary key, script), four stored with
	 * the worker's sums (one plain SET K, which ASK alone serves). */
	cr_assert_eq(wsrv_store(c1, k, 4, CHUNK), 4);
	cs = l2t_connect_summing(&s1);
	cr_assert_eq(wsrv_store(cs, k + 4, 4, CHUNK), 4);
	l2t_wait_ended(&s1, 9);
	cr_expect_eq(T_L2(&s1.t, up_failed), 0, "an upload was lost");
	cr_expect_eq(T_L2(&s1.t, up_chunks), 9);
	cr_expect_geq(T_L2(&s1.t, ask), 8, "ASK followed");
	cr_expect_eq(T_L2(&s1.t, tryagain), 4, "TRYAGAIN: the hashed four");

	/* During the migration: ASK to the destination, every byte. */
	hits = kvr_lookup_l2(c2, k, 8, NULL, NULL);
	cr_expect_eq(hits, 8, "hits %ld during the migration", hits);
	cr_expect_eq(wsrv_retrieve_check(c2, k, 8, CHUNK), 8);
	cr_expect_eq(T_L2(&s2.t, corrupt), 0);

	/* Done: the destination owns each slot and holds each chunk. */
	for (int i = 0; i < 8; i++) {
		node_id(dst[i], dst_id, sizeof(dst_id));
		for (int n = 0; n < T_CLUSTER_N; n++)
			t_redis_cli(&cl.node[n], out, sizeof(out),
				    "CLUSTER SETSLOT %ld NODE %s", slot[i],
				    dst_id);
	}
	start_l2(&s3, NULL);
	c3 = wsrv_connect(&s3, 0, 5000);
	hits = kvr_lookup_l2(c3, k, 8, NULL, NULL);
	cr_expect_eq(hits, 8, "hits %ld after the migration", hits);
	cr_expect_eq(wsrv_retrieve_check(c3, k, 8, CHUNK), 8);
	cr_expect_eq(T_L2(&s3.t, corrupt), 0);
	/* The temporary keys the first SETs left were deleted. */
	for (int n = 0; n < T_CLUSTER_N; n++) {
		t_redis_cli(&cl.node[n], out, sizeof(out),
			    "--scan --pattern '*}:t:*'");
		cr_expect_str_eq(out, "", "node %d keeps %s", n, out);
	}
	kvr_close(cs);
	kvr_close(c1);
	kvr_close(c2);
	kvr_close(c3);
	cr_expect_eq(wsrv_stop(&s3), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(warm);
	free(k);
}
