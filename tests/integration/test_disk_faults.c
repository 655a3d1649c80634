/* SPDX-License-Identifier: MIT */
/*
 * test_disk_faults.c - the disk tier's file system fails under a running
 * kvringd (docs/storage.md, "The disk tier"):
 *  - it turns read-only: a 64 MiB ext4 image, loop-mounted with
 *    errors=remount-ro in the scratch directory (root only: the suite
 *    skips, and says so, without root), is switched to read-only by an
 *    ext4 error (/sys/fs/ext4/<dev>/trigger_fs_error; a plain `mount -o
 *    remount,ro` is refused while kvringd holds its data file open for
 *    writing, so the kernel's own error path is what turns a file system
 *    read-only under a server);
 *  - its directory is deleted (rm -rf).
 * Either way the writes are counted, the log says so once, the pool goes
 * on storing and serving byte for byte (in --disk-mode evict, a worker
 * storing as fast as it can is not held back for good), the chunks already on
 * disk are read through exact or missed, never wrong, and the self-check at
 * stop finds nothing left pinned.
 */
#include "inspect_suite.h"

#include "disk_suite.h"

static struct wsrv s1;
static char dir[600], mnt[700];

static void faults_down(void)
{
	dt_down(&s1, mnt, dir);
}

TestSuite(disk_faults, .fini = faults_down, .timeout = 120);

/* Lines of kvringd's log that hold @needle. */
static unsigned log_count(const char *needle)
{
	char line[4096];
	unsigned n = 0;
	FILE *f = fopen(s1.t.log_path, "r");

	cr_assert(f, "open %s: %s", s1.t.log_path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/* Store requests r0 .. r0+n-1 (the disk is idle after each). */
static void store_n(struct kvr_client *c, uint32_t r0, uint32_t n)
{
	for (uint32_t r = r0; r < r0 + n; r++)
		dt_store(&s1, c, r, true);
}

/*
 * A 32 MiB pool under a 48 MiB disk in commit mode: requests 0..5 (24
 * MiB) are on disk; 8 more (32 MiB) push the first ones out of the pool,
 * so reading them back goes to disk. Returns the client.
 */
static struct kvr_client *fill(const char *data)
{
	struct kvr_client *c;

	dt_start(&s1, data, "48M", "commit", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	store_n(c, 0, 6);
	cr_assert_eq(T_DISK(&s1.t, writes), 6 * DT_BATCH);
	return c;
}

/* After the fault: more stores, the pool's and the disk's chunks read
 * back (exact or missed), and the counters. */
static void after_fault(struct kvr_client *c, uint64_t writes0)
{
	uint64_t reads0 = T_DISK(&s1.t, reads);
	struct kvr_key *k;

	store_n(c, 100, 8);
	cr_expect_gt(T_DISK(&s1.t, dropped), 0, "writes counted as dropped");
	/* The pool goes on: the newest request is there, exact. */
	k = dt_keys(c, 107);
	cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH);
	free(k);
	/* The first requests left the pool; the disk still holds them
	 * (no write replaced them) and serves them exact: dt_read_each checks
	 * every byte. */
	cr_expect_eq(dt_read_each(c, 0, 6), 6 * DT_BATCH);
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	cr_expect_gt(T_DISK(&s1.t, reads), reads0, "read through from disk");
	cr_expect_geq(T_DISK(&s1.t, writes), writes0);
	/* And stores go on. */
	dt_store(&s1, c, 200, true);
	k = dt_keys(c, 200);
	cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH);
	free(k);
}

/* The scratch file system of dt_loop_mount (errors=remount-ro) turned
 * read-only under the server by an ext4 error. */
static void turn_read_only(void)
{
	char cmd[4096], dev[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "basename \"$(findmnt -no SOURCE '%s')\"",
		 mnt);
	p = popen(cmd, "r");
	cr_assert(p && fgets(dev, sizeof(dev), p), "loop device of %s", mnt);
	pclose(p);
	dev[strcspn(dev, "\n")] = '\0';
	snprintf(cmd, sizeof(cmd),
		 "echo kvring-test > /sys/fs/ext4/%s/trigger_fs_error && "
		 "grep -q ' %s .*ro[,.]' /proc/mounts",
		 dev, mnt);
	dt_sh(cmd);
}

Test(disk_faults, a_file_system_turned_read_only_keeps_the_pool_working)
{
	char data[720];
	struct kvr_client *c;
	uint64_t writes0;

	dt_loop_scratch(dir, sizeof(dir), "64M", "loop,errors=remount-ro", mnt,
			sizeof(mnt), data, sizeof(data));
	c = fill(data);
	writes0 = T_DISK(&s1.t, writes);
	turn_read_only();

	after_fault(c, writes0);
	cr_expect_gt(T_DISK(&s1.t, io_errors), 0, "writes failed: EROFS");
	cr_expect_eq(T_DISK(&s1.t, writes), writes0, "nothing written");
	/* One line for the burst (rate-limited: 5 s per kind). */
	cr_expect_eq(log_count("Read-only file system"), 1, "log lines");
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

/*
 * --disk-mode evict holds a worker that stores faster than the disk
 * writes (NOROOM until the write-back catches up); once the file system
 * turns read-only the writes fail, and the pool must not wedge: every
 * store of a worker storing as fast as it can still goes through, the
 * pool evicting unsaved chunks (counted) instead.
 */
Test(disk_faults, a_failing_disk_never_holds_a_fast_worker_for_good)
{
	char data[720];
	struct kvr_client *c;

	dt_loop_scratch(dir, sizeof(dir), "64M", "loop,errors=remount-ro", mnt,
			sizeof(mnt), data, sizeof(data));
	dt_start(&s1, data, "48M", "evict", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t r = 0; r < 12; r++)
		(void)dt_store_all(c, r, 20000);
	cr_assert(t_wait_until(dt_idle, &s1, 10000));
	cr_expect_gt(T_DISK(&s1.t, writes), 0, "written back before");
	turn_read_only();
	/* Three pools' worth more, each store given 20 s at most. */
	for (uint32_t r = 100; r < 124; r++)
		(void)dt_store_all(c, r, 20000);
	cr_expect_gt(T_DISK(&s1.t, io_errors), 0, "writes failed: EROFS");
	cr_expect_gt(T_DISK(&s1.t, unsaved), 0,
		     "the pool evicted unsaved chunks, counted");
	dt_read_request(c, 123);
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

static bool deleted(void *arg)
{
	const struct wsrv *s = arg;

	return T_DISK(&s->t, deleted) == 1;
}

Test(disk_faults, a_deleted_directory_keeps_the_pool_working)
{
	char data[720];
	struct kvr_client *c;
	struct t_json *j;
	uint64_t writes0;
	struct run r;

	dt_scratch(dir, sizeof(dir));
	snprintf(data, sizeof(data), "%s/kvr", dir);
	cr_assert_eq(mkdir(data, 0700), 0);
	c = fill(data);
	writes0 = T_DISK(&s1.t, writes);
	dt_rmrf(data);
	cr_assert_neq(access(data, F_OK), 0, "%s removed", data);
	/* kvringd looks every 100 ms. */
	cr_expect(t_wait_until(deleted, &s1, 5000), "deleted is counted");

	after_fault(c, writes0);
	cr_expect_eq(log_count("was deleted"), 1, "one log line");
	cr_expect_eq(T_DISK(&s1.t, deleted), 1, "counted");
	r = RUN("--name", s1.t.name, "--json");
	cr_assert_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect(t_json_true(j, "disk.file_deleted"));
	t_json_free(j);
	run_free(&r);
	r = RUN("--name", s1.t.name, "--prometheus");
	cr_expect(strstr(r.out, "\nkvring_disk_file_deleted 1\n"), "%s", r.out);
	run_free(&r);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}
