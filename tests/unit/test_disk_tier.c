/* SPDX-License-Identifier: MIT */
/*
 * test_disk_tier.c - the disk tier's library (server/disk/, <kvring/disk.h>)
 * on a real file under the build tree: records written from aligned
 * buffers are found and read back byte for byte; a reopened file is
 * rebuilt by the scan; writes while the scan runs take unscanned records
 * and the scan still ends; a full file reuses its least recently used
 * record; a record changed on disk is refused and leaves the index;
 * closing with writes and reads still queued or being summed waits for
 * them, and the writes land whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/disk.h>

#define CH (64u << 10) /* --disk-chunk 64K */

static char dir[600];
static void *buf[8];

static int rm_one(const char *p, const struct stat *st, int fl, struct FTW *f)
{
	(void)st;
	(void)fl;
	(void)f;
	return remove(p);
}

static void setup(void)
{
	char cwd[512];

	cr_assert(getcwd(cwd, sizeof(cwd)));
	snprintf(dir, sizeof(dir), "%s/kvr-disk-unit-XXXXXX", cwd);
	cr_assert(mkdtemp(dir));
	for (int i = 0; i < 8; i++)
		cr_assert_eq(posix_memalign(&buf[i], 4096, CH), 0);
}

static void teardown(void)
{
	for (int i = 0; i < 8; i++)
		free(buf[i]);
	(void)nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(disk_tier, .init = setup, .fini = teardown, .timeout = 60);

static struct kvr_disk *open_tier(void)
{
	struct kvr_disk_conf cf;
	struct kvr_disk *d = NULL;
	char err[512] = "";

	kvr_disk_conf_defaults(&cf);
	snprintf(cf.dir, sizeof(cf.dir), "%s/d", dir);
	cf.size_bytes = 16u << 20;
	cf.chunk_bytes = CH;
	cr_assert_eq(kvr_disk_open(&cf, 8, &d, err, sizeof(err)), 0, "%s", err);
	return d;
}

static struct kvr_key key(uint64_t i)
{
	return (struct kvr_key){.lo = i * 7919 + 1, .hi = i};
}

static void pattern(uint64_t i, void *p)
{
	for (size_t k = 0; k < CH; k++)
		((unsigned char *)p)[k] = (unsigned char)(i * 31 + k * 7);
}

/* Collect completions until nothing is in flight; return the failures
 * among them. */
static unsigned settle(struct kvr_disk *d)
{
	struct kvr_disk_done dd[16];
	struct kvr_disk_stats st;
	unsigned bad = 0;

	for (;;) {
		unsigned n = kvr_disk_poll(d, dd, 16);

		for (unsigned i = 0; i < n; i++)
			bad += dd[i].rc != 0;
		kvr_disk_stats(d, &st);
		if (!st.queue_depth && !n && st.rebuilt)
			return bad;
		if (st.queue_depth)
			kvr_disk_wait(d);
	}
}

/* Write chunk @i (its pattern) and wait for it. */
static int put(struct kvr_disk *d, uint64_t i)
{
	struct kvr_key k = key(i);
	int rc;

	pattern(i, buf[0]);
	rc = kvr_disk_write(d, 42, &k, buf[0], CH, 0, false, i);
	if (rc == 0 && settle(d))
		rc = -EIO;
	return rc;
}

/* Read chunk @i back; 0 and the bytes checked, or the read's error. */
static int get(struct kvr_disk *d, uint64_t i)
{
	struct kvr_disk_done dd;
	struct kvr_key k = key(i);
	int rc = kvr_disk_read(d, 42, &k, buf[1], CH, i);

	if (rc < 0)
		return rc;
	while (kvr_disk_poll(d, &dd, 1) == 0)
		kvr_disk_wait(d);
	if (dd.rc == 0) {
		pattern(i, buf[2]);
		cr_assert_eq(memcmp(buf[1], buf[2], CH), 0, "chunk %llu",
			     (unsigned long long)i);
	}
	return dd.rc;
}

Test(disk_tier, written_records_read_back_and_survive_a_reopen)
{
	struct kvr_disk_stats st;
	struct kvr_disk *d = open_tier();
	uint64_t len = 0;

	for (uint64_t i = 0; i < 20; i++)
		cr_assert_eq(put(d, i), 0);
	cr_expect_eq(kvr_disk_write(d, 42, &(struct kvr_key){1, 0}, buf[0], CH,
				    0, false, 0),
		     -EEXIST, "already on disk");
	for (uint64_t i = 0; i < 20; i++)
		cr_expect_eq(get(d, i), 0);
	cr_expect(kvr_disk_find(d, 42, &(struct kvr_key){1, 0}, &len));
	cr_expect_eq(len, CH);
	cr_expect_not(kvr_disk_has(d, 43, &(struct kvr_key){1, 0}),
		      "another namespace");
	kvr_disk_close(d);

	d = open_tier();
	kvr_disk_stats(d, &st);
	cr_expect_not(st.rebuilt, "a kept file is scanned");
	cr_expect_eq(settle(d), 0);
	kvr_disk_stats(d, &st);
	cr_expect_eq(st.objects, 20);
	cr_expect_eq(st.scanned, st.scan_total);
	cr_expect_eq(st.corrupt, 0);
	for (uint64_t i = 0; i < 20; i++)
		cr_expect_eq(get(d, i), 0);
	kvr_disk_close(d);
}

Test(disk_tier, writes_during_the_scan_and_a_full_file)
{
	struct kvr_disk_stats st;
	struct kvr_disk *d = open_tier();
	uint64_t n;

	kvr_disk_stats(d, &st);
	n = st.records;
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(put(d, i), 0, "record %llu",
			     (unsigned long long)i);
	kvr_disk_stats(d, &st);
	cr_expect_eq(st.objects, n);
	/* Full: the next write reuses the least recently used record; chunk
	 * 0 was just read, so chunk 1 goes. */
	cr_expect_eq(get(d, 0), 0);
	cr_expect_eq(put(d, 1000), 0);
	kvr_disk_stats(d, &st);
	cr_expect_eq(st.evictions, 1);
	cr_expect(kvr_disk_has(d, 42, &(struct kvr_key){key(0).lo, 0}));
	cr_expect_not(kvr_disk_has(d, 42, &(struct kvr_key){key(1).lo, 1}));
	kvr_disk_close(d);

	/* Reopened full: writes before the scan got far take unscanned
	 * records (losing what they held), and the scan still ends. */
	d = open_tier();
	for (uint64_t i = 2000; i < 2006; i++) {
		struct kvr_key k = key(i);

		pattern(i, buf[0]);
		cr_assert_eq(kvr_disk_write(d, 42, &k, buf[0], CH, 0, false, i),
			     0);
		cr_assert_eq(settle(d), 0);
	}
	kvr_disk_stats(d, &st);
	cr_expect(st.rebuilt);
	cr_expect_eq(st.objects, n, "old records and the new ones");
	for (uint64_t i = 2000; i < 2006; i++) {
		int rc = get(d, i);

		cr_expect_eq(rc, 0, "chunk %llu: %d", (unsigned long long)i,
			     rc);
	}
	kvr_disk_close(d);
}

Test(disk_tier, a_changed_record_is_refused_and_dropped)
{
	struct kvr_disk_stats st;
	struct kvr_disk *d = open_tier();
	char path[700];
	unsigned char b;
	int fd;

	cr_assert_eq(put(d, 7), 0);
	/* Record 0's payload, one byte flipped behind the tier's back. */
	snprintf(path, sizeof(path), "%s/d/" KVR_DISK_FILE, dir);
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &b, 1, 4096 + 4096 + 100), 1);
	b ^= 1;
	cr_assert_eq(pwrite(fd, &b, 1, 4096 + 4096 + 100), 1);
	close(fd);
	cr_expect_eq(get(d, 7), -EBADMSG);
	kvr_disk_stats(d, &st);
	cr_expect_eq(st.corrupt, 1);
	cr_expect_eq(st.objects, 0);
	cr_expect_eq(kvr_disk_read(d, 42, &(struct kvr_key){key(7).lo, 7},
				   buf[1], CH, 0),
		     -ENOENT, "never offered again");
	kvr_disk_close(d);
}

/* kvr_disk_close() with a full queue of writes whose payloads are still
 * being summed, and then of reads still in flight or being checked:
 * every write ends on disk with its sum (the reopened file reads back
 * exact), and closing waits for the reads without leaking a slot. */
Test(disk_tier, close_waits_for_writes_and_reads_still_being_summed)
{
	struct kvr_disk_stats st;
	struct kvr_disk *d = open_tier();

	for (uint64_t i = 0; i < 8; i++) {
		struct kvr_key k = key(100 + i);

		pattern(100 + i, buf[i]);
		cr_assert_eq(kvr_disk_write(d, 42, &k, buf[i], CH, 0, false, i),
			     0);
	}
	kvr_disk_stats(d, &st);
	cr_expect_eq(st.queue_depth, 8, "all queued, none collected");
	cr_expect_eq(kvr_disk_room(d), 0);
	kvr_disk_close(d);

	d = open_tier();
	cr_expect_eq(settle(d), 0);
	kvr_disk_stats(d, &st);
	cr_expect_eq(st.objects, 8);
	cr_expect_eq(st.corrupt, 0);
	for (uint64_t i = 0; i < 8; i++)
		cr_expect_eq(get(d, 100 + i), 0, "chunk %llu",
			     (unsigned long long)(100 + i));
	for (uint64_t i = 0; i < 8; i++) {
		struct kvr_key k = key(100 + i);

		cr_assert_eq(kvr_disk_read(d, 42, &k, buf[i], CH, i), 0);
	}
	kvr_disk_close(d);
}
