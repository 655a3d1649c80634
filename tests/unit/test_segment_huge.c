/* SPDX-License-Identifier: MIT */
/*
 * Description: lib/segment_huge.c and the page-size prefault, without
 * huge pages (tests/huge/ runs them on real ones): the cross-directory
 * sweep of pool files against their .ctl in another directory (orphans
 * and dead owners removed, live owners, other prefixes, symlinks and
 * non-regular files kept), the page arithmetic, /proc/meminfo parsing,
 * a directory that is not hugetlbfs refused with a clear message, and
 * prefault_pages argument checks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/segment.h>

static char ctl_dir[64], pool_dir[64];

static void setup(void)
{
	snprintf(ctl_dir, sizeof(ctl_dir), "/tmp/kvr-sh-ctl.XXXXXX");
	snprintf(pool_dir, sizeof(pool_dir), "/tmp/kvr-sh-pool.XXXXXX");
	cr_assert(mkdtemp(ctl_dir) && mkdtemp(pool_dir));
}

static void rm_dir(const char *d)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", d);
	cr_assert_eq(system(cmd), 0);
}

static void teardown(void)
{
	rm_dir(ctl_dir);
	rm_dir(pool_dir);
}

TestSuite(segment_huge, .init = setup, .fini = teardown, .timeout = 10);

static void touch_file(const char *dir, const char *name)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0, "create %s", path);
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
}

static bool present(const char *dir, const char *name)
{
	char path[160];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* A .ctl in ctl_dir with a real header, created by this (live) process
 * or with a pid that cannot be alive. */
static void make_ctl(const char *base, bool live)
{
	char name[80];
	struct kvr_seg s;
	struct kvr_seg_hdr_shm *h;

	snprintf(name, sizeof(name), "%s.ctl", base);
	cr_assert_eq(
	    kvr_seg_create_shm(ctl_dir, name, 4096, 0, (gid_t)-1, &s, NULL), 0);
	h = s.base;
	kvr_seg_hdr_format(h, 1, 0, 4096, name, NULL);
	if (!live) {
		h->creator_pid = 0x3ffffff0; /* above any pid_max */
		h->creator_start = 1;
	}
	kvr_seg_hdr_publish(h);
	/* A live creator keeps its segment, and so its liveness lock
	 * (segment_map.c), until it exits; a dead one let go of it. */
	if (!live)
		kvr_seg_detach(&s);
}

/* Sweep pool_dir's "kvring-" pools (their .ctl in ctl_dir) into @r, and
 * expect @removed of them removed. */
static void expect_swept(struct kvr_sweep_report *r, int removed)
{
	int rc = kvr_seg_sweep_pools(pool_dir, ctl_dir, "kvring-", r);

	cr_expect_eq(rc, removed, "removed %d, want %d", rc, removed);
}

Test(segment_huge, sweep_removes_pool_when_ctl_is_missing_or_owner_dead)
{
	struct kvr_sweep_report r;

	touch_file(pool_dir, "kvring-a.pool"); /* orphan */
	make_ctl("kvring-b", false);
	touch_file(pool_dir, "kvring-b.pool"); /* dead owner */
	expect_swept(&r, 2);
	cr_expect_eq(r.removed, 2);
	cr_expect_not(present(pool_dir, "kvring-a.pool"));
	cr_expect_not(present(pool_dir, "kvring-b.pool"));
	/* The .ctl is kvr_seg_sweep()'s to remove, not ours. */
	cr_expect(present(ctl_dir, "kvring-b.ctl"));
}

Test(segment_huge, sweep_keeps_pool_when_owner_lives_or_file_is_not_ours)
{
	char target[160], link[160];
	struct kvr_sweep_report r;

	make_ctl("kvring-live", true);
	touch_file(pool_dir, "kvring-live.pool");
	touch_file(pool_dir, "other-x.pool");  /* outside the prefix */
	touch_file(pool_dir, "kvring-c.data"); /* not a pool */
	/* A symlink named like an orphan pool: never followed or removed. */
	snprintf(target, sizeof(target), "%s/kvring-live.pool", pool_dir);
	snprintf(link, sizeof(link), "%s/kvring-sym.pool", pool_dir);
	cr_assert_eq(symlink(target, link), 0);
	snprintf(link, sizeof(link), "%s/kvring-dir.pool", pool_dir);
	cr_assert_eq(mkdir(link, 0700), 0);
	expect_swept(&r, 0);
	cr_expect_eq(r.kept_live, 1);
	cr_expect(present(pool_dir, "kvring-live.pool"));
	cr_expect(present(pool_dir, "other-x.pool"));
	cr_expect(present(pool_dir, "kvring-c.data"));
	cr_expect(present(pool_dir, "kvring-sym.pool"));
	cr_expect(present(pool_dir, "kvring-dir.pool"));
}

Test(segment_huge, sweep_returns_einval_when_prefix_or_dir_is_missing)
{
	cr_expect_eq(kvr_seg_sweep_pools(pool_dir, ctl_dir, "", NULL), -EINVAL);
	cr_expect_eq(kvr_seg_sweep_pools(NULL, ctl_dir, "kvring-", NULL),
		     -EINVAL);
	cr_expect_lt(
	    kvr_seg_sweep_pools("/nonexistent-kvr", ctl_dir, "kvring-", NULL),
	    0);
}

Test(segment_huge, pages_for_rounds_up_when_size_is_not_a_multiple)
{
	cr_expect_eq(kvr_seg_huge_pages_for(0, 2u << 20), 0);
	cr_expect_eq(kvr_seg_huge_pages_for(1, 2u << 20), 1);
	cr_expect_eq(kvr_seg_huge_pages_for(2u << 20, 2u << 20), 1);
	cr_expect_eq(kvr_seg_huge_pages_for((2u << 20) + 1, 2u << 20), 2);
	cr_expect_eq(kvr_seg_huge_pages_for(1ull << 30, 2u << 20), 512);
	cr_expect_eq(kvr_seg_huge_pages_for(100, 0), 0);
}

Test(segment_huge, hugetlb_info_reads_page_size_when_kernel_has_hugetlb)
{
	struct kvr_hugetlb_info hi = {0};
	int rc = kvr_seg_hugetlb_info(&hi);

	if (rc == -ENOENT)
		cr_skip_test("kernel without hugetlb (no HugePages_Total)");
	cr_assert_eq(rc, 0);
	cr_expect_geq(hi.page_bytes, 2u << 20, "%zu", hi.page_bytes);
	cr_expect_leq(hi.free_pages, hi.total_pages);
}

Test(segment_huge, create_hugetlbfs_refuses_dir_when_not_hugetlbfs)
{
	struct kvr_err e = {0};
	struct kvr_seg s = {.fd = -1};
	int rc;

	rc = kvr_seg_create_hugetlbfs(pool_dir, "kvring-x.pool", 1 << 20, 0,
				      (gid_t)-1, &s, &e);
	cr_expect_eq(rc, -EINVAL);
	cr_expect(strstr(e.msg, "not a hugetlbfs mount"), "%s", e.msg);
	cr_expect_null(s.base, "output touched on failure");
	cr_expect_not(present(pool_dir, "kvring-x.pool"));
}

Test(segment_huge, prefault_pages_refuses_stride_when_not_power_of_two)
{
	void *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	cr_expect_eq(kvr_seg_prefault_pages(p, 1 << 20, 3 << 12, true, NULL),
		     -EINVAL);
	cr_expect_eq(kvr_seg_prefault_pages(p, 1 << 20, 2048, true, NULL),
		     -EINVAL);
	cr_expect_eq(kvr_seg_prefault_pages(p, 1 << 20, 1 << 16, true, NULL),
		     0);
	munmap(p, 1 << 20);
}
