/* SPDX-License-Identifier: MIT */
/*
 * test_disk_enospc.c - a full file system under the disk tier: a 40 MiB
 * ext4 image, loop-mounted in the scratch directory (root only: the
 * suite skips, and says so, without root), under a --disk-size of 96M.
 * The data file cannot be preallocated (said in the log), the writes
 * that find no room fail with ENOSPC, are counted and logged, and the
 * pool goes on storing and serving byte for byte; the self-check at
 * stop finds nothing left pinned. The mount is undone in every path.
 * A key held back (NOROOM) while the write-back still tries to save its
 * victim is stored again (dt_store): a full disk must never hold one
 * for good.
 */
#include "disk_suite.h"

static struct wsrv s1;
static char dir[600], mnt[700];

static void teardown(void)
{
	dt_down(&s1, mnt, dir);
}

TestSuite(disk_enospc, .fini = teardown, .timeout = 120);

Test(disk_enospc, a_full_disk_keeps_the_pool_working)
{
	char data[720];
	struct kvr_client *c;
	struct kvr_key *k;

	dt_loop_scratch(dir, sizeof(dir), "40M", "loop", mnt, sizeof(mnt), data,
			sizeof(data));

	dt_start(&s1, data, "96M", "evict", NULL);
	cr_expect(t_server_log_has(&s1.t, "using a sparse file"));
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t r = 0; r < 24; r++)
		dt_store(&s1, c, 300 + r, true);
	cr_expect_gt(T_DISK(&s1.t, no_space), 0, "writes found it full");
	cr_expect_gt(T_DISK(&s1.t, dropped), 0);
	cr_expect_gt(T_DISK(&s1.t, writes), 0, "what fitted was written");
	cr_expect(t_server_log_has(&s1.t, "No space left on device"));
	/* The pool is unharmed: the newest request is there, exact. */
	k = dt_keys(c, 323);
	cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH);
	free(k);
	/* And stores go on. */
	dt_store(&s1, c, 400, true);
	k = dt_keys(c, 400);
	cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH);
	free(k);
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}
