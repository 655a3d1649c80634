/* SPDX-License-Identifier: MIT */
/*
 * test_disk_restart.c - the disk tier survives kvringd (docs/storage.md,
 * "The disk tier"): after a stop, and after a SIGKILL in the middle of
 * heavy writes, a kvringd started on the same --disk rebuilds its index
 * while it serves and reads back every chunk the first one reported
 * written, byte for byte, never a torn one; a byte flipped in a record's
 * payload or header makes that chunk a counted miss while the others
 * load.
 */
#include <fcntl.h>

#include "disk_suite.h"

static struct wsrv s1;
static char dir[600];

static void teardown(void)
{
	dt_down(&s1, NULL, dir);
}

TestSuite(disk_restart, .fini = teardown, .timeout = 120);

Test(disk_restart, a_restarted_server_serves_the_disk)
{
	struct kvr_client *c;
	uint64_t objects;

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "96M", "commit", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t r = 0; r < 8; r++)
		dt_store(&s1, c, 10 + r, true);
	objects = T_DISK(&s1.t, objects);
	cr_assert_eq(objects, 8 * DT_BATCH);
	kvr_close(c);
	cr_assert_eq(wsrv_stop(&s1), 0, "self-check");
	wsrv_cleanup(&s1);

	dt_start(&s1, dir, "96M", "commit", NULL);
	cr_assert(t_wait_until(dt_rebuilt, &s1, 10000), "rebuilt");
	cr_expect_eq(T_DISK(&s1.t, scanned), T_DISK(&s1.t, scan_total));
	cr_expect_eq(T_DISK(&s1.t, objects), objects);
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	cr_expect(t_server_log_has(&s1.t, "rebuilding its index while "
					  "serving"));
	c = wsrv_connect(&s1, 0, 5000);
	cr_expect_eq(T_GSTAT(&s1.t, objects), 0, "the pool starts empty");
	for (uint32_t r = 0; r < 8; r++) {
		struct kvr_key *k = dt_keys(c, 10 + r);

		cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH,
			     "request %u", r);
		free(k);
	}
	cr_expect_eq(T_DISK(&s1.t, reads), 8 * DT_BATCH);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

Test(disk_restart, sigkill_during_writes_loses_only_writes_in_flight)
{
	struct kvr_client *c;
	uint64_t acked, inflight;
	uint32_t reqs = 24;

	dt_scratch(dir, sizeof(dir));
	dt_start_pool(&s1, "128M", dir, "128M", "commit", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	/* No waiting: the disk writes behind the worker's commits. */
	for (uint32_t r = 0; r < reqs; r++)
		dt_store(&s1, c, 200 + r, false);
	acked = T_DISK(&s1.t, writes);
	inflight = T_DISK(&s1.t, queue_depth);
	wsrv_kill(&s1);
	kvr_close(c);
	wsrv_cleanup(&s1);
	cr_log_info("killed with %llu chunks written, %llu in flight",
		    (unsigned long long)acked, (unsigned long long)inflight);

	dt_start_pool(&s1, "128M", dir, "128M", "commit", NULL);
	cr_assert(t_wait_until(dt_rebuilt, &s1, 10000), "rebuilt");
	cr_expect_geq(T_DISK(&s1.t, objects), acked);
	c = wsrv_connect(&s1, 0, 5000);
	/* Every hit is checked byte for byte: nothing torn is served. */
	cr_expect_geq(dt_read_each(c, 200, reqs), acked);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

/* Flip one byte of @file at @off. */
static void flip(const char *file, off_t off)
{
	int fd = open(file, O_RDWR);
	unsigned char b;

	cr_assert_geq(fd, 0, "%s: %s", file, strerror(errno));
	cr_assert_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x40;
	cr_assert_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

Test(disk_restart, a_flipped_byte_is_a_counted_miss)
{
	const off_t rec = 4096 + (1 << 20); /* header block + payload */
	struct kvr_client *c;
	char file[700];

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "64M", "commit", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	dt_store(&s1, c, 1, true);
	dt_store(&s1, c, 2, true);
	cr_assert_eq(T_DISK(&s1.t, objects), 2 * DT_BATCH);
	kvr_close(c);
	cr_assert_eq(wsrv_stop(&s1), 0, "self-check");
	wsrv_cleanup(&s1);

	/* Record 2's payload (found at its read-through), record 5's
	 * header (found by the rebuild). */
	snprintf(file, sizeof(file), "%s/kvring-disk.dat", dir);
	flip(file, 4096 + 2 * rec + 4096 + 12345);
	flip(file, 4096 + 5 * rec + 20);
	dt_start(&s1, dir, "64M", "commit", NULL);
	cr_assert(t_wait_until(dt_rebuilt, &s1, 10000), "rebuilt");
	cr_expect_eq(T_DISK(&s1.t, corrupt), 1, "the header, at the scan");
	cr_expect_eq(T_DISK(&s1.t, objects), 2 * DT_BATCH - 1);
	c = wsrv_connect(&s1, 0, 5000);
	cr_expect_eq(dt_read_each(c, 1, 2), 2 * DT_BATCH - 2,
		     "the others load, byte for byte");
	cr_expect_eq(T_DISK(&s1.t, corrupt), 2, "and the payload, at its read");
	cr_expect_eq(T_DISK(&s1.t, objects), 2 * DT_BATCH - 2,
		     "a corrupt record leaves the index");
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}
