/* SPDX-License-Identifier: MIT */
/*
 * test_l2_evict.c - kvringd's "upload only on eviction" mode
 * (--l2-upload evict, docs/l2.md) against a real redis-server: nothing is
 * uploaded while the pool has room; once it is full, the chunks next in
 * line for eviction are uploaded before they are evicted, so a second
 * kvringd reads them through L2 byte for byte; a chunk evicted without its
 * copy (Redis unreachable) is counted in drops, and no pin leaks (the
 * shutdown self-check). The commit-mode suite is test_l2.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "l2_suite.h"

#define CHUNK (1u << 20)
#define BATCH 4u /* chunks per store: a third of the eviction zone */

static struct t_redis rds;
static struct wsrv s1, s2;
static char url[128];

static void setup(void)
{
	l2t_need_redis();
}

static void teardown(void)
{
	l2t_down(&s1);
	l2t_down(&s2);
	t_redis_stop(&rds);
}

TestSuite(l2_evict, .init = setup, .fini = teardown, .timeout = 90);

/* kvringd with a 64 MiB pool, L2 at url, upload mode @mode. */
static void start(struct wsrv *s, const char *mode)
{
	const char *args[] = {"--l2-upload", mode, NULL};

	l2t_start(s, url, args);
}

static bool queue_empty(void *arg)
{
	const struct wsrv *s = arg;

	return T_L2(&s->t, queue_depth) == 0;
}

/* Store @batches requests of BATCH chunks on @s, from request id @r0, each
 * after the uploads the previous one started have ended. */
static void fill(struct wsrv *s, struct kvr_client *c, uint32_t r0,
		 uint32_t batches)
{
	for (uint32_t b = 0; b < batches; b++) {
		struct kvr_key *k = l2t_keys_for(c, r0 + b, BATCH);

		cr_assert_eq(wsrv_store(c, k, BATCH, CHUNK), BATCH,
			     "store batch %u: %s", b, kvr_client_errmsg(c));
		cr_assert(t_wait_until(queue_empty, s, 10000),
			  "batch %u: queue %llu", b,
			  (unsigned long long)T_L2(&s->t, queue_depth));
		free(k);
	}
}

Test(l2_evict, uploads_nothing_while_the_pool_has_room)
{
	struct kvr_client *c;
	struct kvr_key *k;

	t_redis_start(&rds, NULL);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
	start(&s1, "evict");
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 1, 16);
	cr_assert_eq(wsrv_store(c, k, 16, CHUNK), 16);
	/* Several of the loop's 2 ms looks at the pool's fill. */
	wsrv_sleep_ms(100);
	cr_expect_eq(T_L2(&s1.t, up_chunks), 0);
	cr_expect_eq(T_L2(&s1.t, queue_depth), 0);
	cr_expect_eq(t_redis_int(&rds, "DBSIZE"), 0,
		     "16 MiB of a 64 MiB pool: nothing is about to be evicted");
	cr_expect(t_server_log_has(&s1.t, "upload only chunks about to be "
					  "evicted"));
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

Test(l2_evict, uploads_cold_chunks_before_evicting_them)
{
	struct kvr_client *c1, *c2;
	struct kvr_key *k;
	uint64_t lease = 0, up;
	bool pending = true;
	long hits;

	t_redis_start(&rds, NULL);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
	start(&s1, "evict");
	start(&s2, "none");
	c1 = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c1, 1000, 16);
	cr_assert_eq(wsrv_store(c1, k, 16, CHUNK), 16);
	/* 80 MiB more through a 64 MiB pool: request 1000 goes first. */
	fill(&s1, c1, 2000, 20);
	cr_assert_eq(kvr_lookup(c1, k, 16, NULL), 0,
		     "request 1000 should be evicted from server 1");
	cr_expect_geq(T_GSTAT(&s1.t, evictions), 32);
	cr_expect_eq(T_L2(&s1.t, drops), 0,
		     "every evicted chunk was uploaded first");
	cr_expect_eq(T_L2(&s1.t, up_failed), 0);
	up = T_L2(&s1.t, up_chunks);
	cr_expect_geq(up, T_GSTAT(&s1.t, evictions),
		      "uploaded %llu, evicted %llu", (unsigned long long)up,
		      (unsigned long long)T_GSTAT(&s1.t, evictions));
	cr_expect_lt(up, 96,
		     "chunks far from eviction stay local (uploaded %llu)",
		     (unsigned long long)up);
	/* Another host finds request 1000 through L2, byte for byte. */
	c2 = wsrv_connect(&s2, 0, 5000);
	hits = kvr_lookup_l2(c2, k, 16, &lease, &pending);
	cr_assert_eq(hits, 16, "lookup_l2: %ld %s", hits,
		     kvr_client_errmsg(c2));
	cr_expect_eq(wsrv_retrieve_check(c2, k, 16, CHUNK), 16);
	cr_expect_eq(kvr_release(c2, lease), 0);
	cr_expect_eq(T_L2(&s2.t, corrupt), 0);
	l2t_end2(&s1, &s2, c1, c2, k);
}

Test(l2_evict, chunk_damaged_in_the_pool_is_uploaded_with_its_storers_sum)
{
	/* As test_l2's commit-mode case: a worker with checksums stored
	 * request 4000, then one of its chunks changes in the pool. It is
	 * uploaded only when it nears eviction, with the sum the worker sent,
	 * so the other host finds it corrupt instead of serving it. */
	uint64_t sizes[BATCH] = {CHUNK, CHUNK, CHUNK, CHUNK};
	struct kvr_client *c1, *cs, *c2;
	unsigned char *slot2;
	struct kvr_key *k;
	struct kvr_xfer x;

	t_redis_start(&rds, NULL);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
	start(&s1, "evict");
	start(&s2, "none");
	cs = l2t_connect_summing(&s1);
	k = l2t_keys_for(cs, 4000, BATCH);
	cr_assert_eq(kvr_prepare_store(cs, k, sizes, BATCH, &x), 0);
	for (uint32_t i = 0; i < BATCH; i++) {
		cr_assert_eq(x.slots[i].status, KVR_SLOT_OK);
		wsrv_fill(&k[i], x.slots[i].ptr, CHUNK);
	}
	slot2 = x.slots[2].ptr; /* the pool stays mapped after the commit */
	cr_assert_eq(kvr_commit_store(cs, &x), 0, "%s", kvr_client_errmsg(cs));
	slot2[4096] ^= 0x5a;
	/* 80 MiB more through the 64 MiB pool: request 4000 goes first. */
	c1 = wsrv_connect(&s1, 0, 5000);
	fill(&s1, c1, 5000, 20);
	cr_assert_eq(kvr_lookup(c1, k, BATCH, NULL), 0,
		     "request 4000 should be evicted from server 1");
	c2 = wsrv_connect(&s2, 0, 5000);
	cr_expect_eq(kvr_lookup_l2(c2, k, BATCH, NULL, NULL), 2,
		     "the prefix ends at the damaged chunk");
	cr_expect_eq(T_L2(&s2.t, corrupt), 1);
	cr_expect_eq(wsrv_retrieve_check(c2, k, BATCH, CHUNK), 2);
	kvr_close(c2);
	kvr_close(c1);
	kvr_close(cs);
	cr_expect_eq(wsrv_stop(&s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	free(k);
}

static bool drops_match(void *arg)
{
	const struct wsrv *s = arg;

	return T_L2(&s->t, drops) == T_GSTAT(&s->t, evictions);
}

Test(l2_evict, chunk_evicted_without_its_copy_is_counted_in_drops)
{
	struct kvr_client *c;

	/* A port Redis just left: every upload fails to connect. */
	t_redis_start(&rds, NULL);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
	t_redis_stop(&rds);
	start(&s1, "evict");
	c = wsrv_connect(&s1, 0, 5000);
	fill(&s1, c, 3000, 24);
	cr_expect_geq(T_GSTAT(&s1.t, evictions), 24);
	/* The loop adds unsaved evictions to drops when it next looks. */
	cr_expect(t_wait_until(drops_match, &s1, 5000));
	cr_expect_eq(T_L2(&s1.t, up_chunks), 0);
	cr_expect_gt(T_L2(&s1.t, up_failed), 0);
	cr_expect_eq(T_L2(&s1.t, drops), T_GSTAT(&s1.t, evictions),
		     "drops %llu, evictions %llu",
		     (unsigned long long)T_L2(&s1.t, drops),
		     (unsigned long long)T_GSTAT(&s1.t, evictions));
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check: no pin left behind");
}
