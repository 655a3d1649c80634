/* SPDX-License-Identifier: MIT */
/*
 * test_huge_disk.c - the disk tier on a huge-page pool (docs/storage.md,
 * "The disk tier"): kvringd registers the hugetlb pool and the I/O slots'
 * header blocks with the tier's io_uring, and records move by
 * WRITE_FIXED / READ_FIXED. Checked with real kvringd processes and real
 * files in a scratch directory under the build tree: the log and the
 * disk section say registered buffers, the chunks a first server wrote
 * are read through by a second one (its pool empty) byte for byte, and
 * the same on 4 KiB pages keeps the plain path. Run through kvr-huge-run
 * (tests/huge/huge_run.c), which reserves the pages and gives the host
 * its old vm.nr_hugepages back; skips, with the runner's reason, where
 * the kernel refused.
 */
#include "../integration/disk_suite.h"
#include "huge_suite.h"

static struct wsrv s1;
static char dir[600];
static const char *hdir;

static void huge_disk_down(void)
{
	dt_down(&s1, NULL, dir);
}

TestSuite(huge_disk, .fini = huge_disk_down, .timeout = 120);

/* The runner's mount, or skip with the runner's reason. */
static void huge_or_skip(void)
{
	hdir = huge_mount_or_skip();
}

/* Store requests 0..3 on a first server, read them through from disk on
 * a second one, both with @more; return what the disk section said. */
static uint32_t write_then_read(const char *const *more)
{
	struct kvr_client *c;
	uint32_t fixed;

	dt_start(&s1, dir, "64M", "commit", more);
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t r = 0; r < 4; r++)
		dt_store(&s1, c, r, true);
	cr_assert_eq(T_DISK(&s1.t, writes), 4 * DT_BATCH);
	cr_expect_eq(T_DISK(&s1.t, io_errors), 0);
	kvr_close(c);
	cr_assert_eq(wsrv_stop(&s1), 0, "self-check");
	wsrv_cleanup(&s1);

	dt_start(&s1, dir, "64M", "commit", more);
	fixed = s1.t.hdr->disk.fixed;
	cr_assert(t_wait_until(dt_rebuilt, &s1, 10000), "rebuilt");
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t r = 0; r < 4; r++) {
		struct kvr_key *k = dt_keys(c, r);

		cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH,
			     "request %u", r);
		free(k);
	}
	cr_expect_eq(T_DISK(&s1.t, reads), 4 * DT_BATCH);
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	cr_expect_eq(T_DISK(&s1.t, io_errors), 0);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
	return fixed;
}

Test(huge_disk, a_huge_page_pool_moves_records_on_registered_buffers)
{
	const char *more[] = {"--huge-pages", "require", "--huge-dir", NULL,
			      NULL};

	huge_or_skip();
	more[3] = hdir;
	dt_scratch(dir, sizeof(dir));
	cr_expect_eq(write_then_read(more), 1u, "registered buffers");
	cr_expect(t_server_log_has(&s1.t, "O_DIRECT I/O on registered "
					  "buffers"));
}

Test(huge_disk, small_pages_keep_the_plain_path)
{
	const char *more[] = {"--huge-pages", "off", NULL};

	huge_or_skip();
	dt_scratch(dir, sizeof(dir));
	cr_expect_eq(write_then_read(more), 0u, "no registered buffers");
	cr_expect(!t_server_log_has(&s1.t, "registered buffers"));
}
