/* SPDX-License-Identifier: MIT */
/*
 * test_disk_l2.c - the tiers in order (docs/architecture.md, "Tiers"):
 * pool, then disk, then Redis. A kvringd with both --disk and --l2 reads
 * the chunks of a request its disk holds through the disk, says "ask
 * again" for the rest, and the next lookup reads those through the L2,
 * all of it byte for byte; a request the disk lacks goes to the L2 at
 * once. Against a real redis-server (skipped, saying so, without one).
 */
#include "disk_suite.h"

static struct t_redis rds;
static struct wsrv a, b;
static char dir[600], url[128];

static void setup(void)
{
	l2t_need_redis();
}

static void teardown(void)
{
	l2t_down(&a);
	l2t_down(&b);
	t_redis_stop(&rds);
	dt_rmrf(dir);
	dir[0] = '\0';
}

TestSuite(disk_l2, .init = setup, .fini = teardown, .timeout = 120);

/* Server b: the disk in commit mode, L2 read-only. */
static void start_b(void)
{
	const char *more[] = {"--l2", url, "--l2-upload", "none", NULL};

	dt_start(&b, dir, "64M", "commit", more);
}

Test(disk_l2, the_disk_first_then_redis)
{
	struct kvr_client *c;
	struct kvr_key *k, *k2;
	bool pending = false;
	long hits;

	t_redis_start(&rds, NULL);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
	dt_scratch(dir, sizeof(dir));
	/* Server a puts requests 1 and 2 in Redis. */
	l2t_start(&a, url, NULL);
	c = wsrv_connect(&a, 0, 5000);
	k = dt_keys(c, 1);
	k2 = dt_keys(c, 2);
	cr_assert_eq(wsrv_store(c, k, DT_BATCH, DT_CHUNK), DT_BATCH);
	cr_assert_eq(wsrv_store(c, k2, DT_BATCH, DT_CHUNK), DT_BATCH);
	l2t_wait_ended(&a, 2 * DT_BATCH);
	kvr_close(c);
	cr_assert_eq(wsrv_stop(&a), 0);

	/* Server b writes the first two chunks of request 1 to its disk,
	 * then restarts: its pool is empty, its disk is not. */
	start_b();
	c = wsrv_connect(&b, 0, 5000);
	cr_assert_eq(wsrv_store(c, k, 2, DT_CHUNK), 2);
	cr_assert(t_wait_until(dt_idle, &b, 10000));
	cr_assert_eq(T_DISK(&b.t, writes), 2);
	kvr_close(c);
	cr_assert_eq(wsrv_stop(&b), 0);
	wsrv_cleanup(&b);
	start_b();
	cr_assert(t_wait_until(dt_rebuilt, &b, 10000));
	c = wsrv_connect(&b, 0, 5000);

	/* The disk answers first, and says there may be more. */
	hits = kvr_lookup_l2(c, k, DT_BATCH, NULL, &pending);
	cr_expect_eq(hits, 2, "from the disk: %ld", hits);
	cr_expect(pending, "the L2 may hold the rest: ask again");
	cr_expect_eq(T_DISK(&b.t, reads), 2);
	cr_expect_eq(T_L2(&b.t, down_chunks), 0, "Redis not asked yet");
	/* The next lookup: nothing more on disk, the L2 reads through. */
	cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH);
	cr_expect_eq(T_DISK(&b.t, reads), 2);
	cr_expect_eq(T_L2(&b.t, down_chunks), 2, "the rest from Redis");
	/* Request 2: nothing on disk, straight to the L2. */
	cr_expect_eq(dt_read_back(c, k2, DT_BATCH), DT_BATCH);
	cr_expect_eq(T_L2(&b.t, down_chunks), 2 + DT_BATCH);
	cr_expect_eq(T_DISK(&b.t, corrupt), 0);
	cr_expect_eq(T_L2(&b.t, corrupt), 0);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&b), 0, "self-check");
	free(k);
	free(k2);
}
