/* SPDX-License-Identifier: MIT */
/*
 * test_disk_writeback.c - the write-back's promise of --disk-mode evict
 * ("a chunk evicted from the pool is written to disk first") when the
 * disk is smaller than the pool's churn: the disk's own LRU drops records
 * of chunks the pool still holds, and the pool must then count their
 * eviction as unsaved (or write them again), never evict them as saved.
 * Real kvringd, real files on the machine's disk.
 */
#include "disk_suite.h"

static struct wsrv s1;
static char dir[600];

static void teardown(void)
{
	dt_down(&s1, NULL, dir);
}

TestSuite(disk_writeback, .fini = teardown, .timeout = 180);

#define HOT0 900u /* the hot requests: HOT0, HOT0 + 1 */
#define HOTN (2u * DT_BATCH)

static struct kvr_key hot[HOTN]; /* their keys */

/* Store requests r0 .. r0+n-1 as fast as the worker can; with @touch,
 * look the hot chunks up in the pool before each, so the pool keeps
 * them at its head (a lookup touches its hits) while the disk does not
 * see them. */
static void stream(struct kvr_client *c, uint32_t r0, uint32_t n, bool touch)
{
	for (uint32_t r = r0; r < r0 + n; r++) {
		if (touch)
			cr_assert_eq(kvr_lookup(c, hot, HOTN, NULL), HOTN,
				     "the hot chunks left the pool at %u", r);
		(void)dt_store_all(c, r, 20000);
	}
}

/*
 * Hot chunks come back from the disk (each marked in the pool as having
 * a copy there), stay hot in the pool while the worker stores more than
 * the disk holds (the disk's LRU drops their records), then go cold and
 * are evicted. Each one must read back, or its eviction must have been
 * counted as unsaved: a chunk neither in the pool nor on disk that was
 * not counted is a broken promise.
 */
Test(disk_writeback, a_chunk_the_disk_dropped_is_not_evicted_as_saved)
{
	struct kvr_client *c;
	uint64_t unsaved;
	uint32_t hits;

	dt_scratch(dir, sizeof(dir));
	/* A pool of 96 chunks, more than the 64 the guard looks at, so
	 * that it leaves the hot ones alone; a disk of 97 records. */
	dt_start_pool(&s1, "96M", dir, "100M", "evict", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t r = 0; r < 2; r++) {
		struct kvr_key *k = dt_keys(c, HOT0 + r);

		memcpy(hot + r * DT_BATCH, k, DT_BATCH * sizeof(*hot));
		free(k);
	}
	dt_store(&s1, c, HOT0, true);
	dt_store(&s1, c, HOT0 + 1, true);
	/* 100 chunks more push the hot ones out of the pool to disk. */
	stream(c, 100, 25, false);
	cr_assert(t_wait_until(dt_idle, &s1, 10000));
	cr_assert_eq(kvr_lookup(c, hot, HOTN, NULL), 0,
		     "the hot chunks left the pool");
	cr_assert_eq(dt_read_each(c, HOT0, 2), HOTN,
		     "the hot chunks came back from the disk");
	/* 104 chunks, more than the disk holds, with the hot ones in use. */
	stream(c, 200, 26, true);
	cr_assert(t_wait_until(dt_idle, &s1, 10000));
	cr_assert_geq(T_DISK(&s1.t, evictions), HOTN,
		      "the disk's LRU dropped records: %llu",
		      (unsigned long long)T_DISK(&s1.t, evictions));
	/* Then they go cold: 100 chunks push them out of the pool. */
	stream(c, 300, 25, false);
	cr_assert(t_wait_until(dt_idle, &s1, 10000));
	unsaved = T_DISK(&s1.t, unsaved);
	hits = dt_read_each(c, HOT0, 2);
	cr_expect_leq(HOTN - hits, unsaved,
		      "%u hot chunks are neither in the pool nor on disk, but "
		      "only %llu evictions were counted as unsaved",
		      HOTN - hits, (unsigned long long)unsaved);
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}
