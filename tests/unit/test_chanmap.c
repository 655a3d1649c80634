/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/chanmap.c: the control segment's read-only descriptor
 * (a sealed memfd and a named file, each tried the ways a worker would
 * try to write through it) and the worker's check of its two control
 * mappings against the welcome, one mismatch at a time. Segments are
 * real (memfd, a private directory under /dev/shm); no server runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/chanmap.h>

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/kvr-test-chanmap-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/t.ctl", dir);
	unlink(path);
	rmdir(dir);
}

TestSuite(chanmap, .init = setup, .fini = teardown, .timeout = 20);

/* The ways a worker holding @fd could try to write the segment. */
static void expect_no_write_through(int fd, size_t bytes, const char *what)
{
	char path[64];
	void *p;
	int rw;

	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_expect(p == MAP_FAILED && (errno == EACCES || errno == EPERM),
		  "%s: mapped writable (%s)", what,
		  p == MAP_FAILED ? strerror(errno) : "ok");
	if (p != MAP_FAILED)
		munmap(p, bytes);
	p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED, "%s: read-only map: %s", what,
		      strerror(errno));
	cr_expect_eq(mprotect(p, bytes, PROT_READ | PROT_WRITE), -1,
		     "%s: mprotect made it writable", what);
	cr_expect_eq(errno, EACCES, "%s: mprotect: %s", what, strerror(errno));
	munmap(p, bytes);
	cr_expect_eq(write(fd, "x", 1), -1, "%s: write(2) went through", what);
	/* Reopening it read-write: refused by the mode for anyone but root;
	 * for root (these tests), a sealed memfd still maps read-only. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rw = open(path, O_RDWR | O_CLOEXEC);
	if (rw >= 0) {
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, rw,
			 0);
		if (strcmp(what, "memfd") == 0)
			cr_expect(p == MAP_FAILED && errno == EPERM,
				  "memfd: reopened read-write and mapped "
				  "writable");
		if (p != MAP_FAILED)
			munmap(p, bytes);
		close(rw);
	} else {
		cr_expect(errno == EACCES, "%s: reopen: %s", what,
			  strerror(errno));
	}
}

Test(chanmap, memfd_descriptor_maps_only_read_only_when_sealed)
{
	struct kvr_err e = {0};
	struct kvr_seg s;
	bool sealed = false;
	volatile char *ro;
	int fd;

	cr_assert_eq(
	    kvr_seg_create_memfd("t.ctl", 65536, KVR_SEG_SEAL_LATER, &s, &e), 0,
	    "%s", e.msg);
	((char *)s.base)[100] = 1;
	fd = kvr_chanmap_ro_fd(&s, &sealed, &e);
	cr_assert_geq(fd, 0, "%s", e.msg);
	cr_expect(sealed, "this kernel has F_SEAL_FUTURE_WRITE (5.1)");
	cr_expect_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	expect_no_write_through(fd, 65536, "memfd");
	/* The creator's own mapping, made before the seal, still writes,
	 * and a reader sees it. */
	ro = mmap(NULL, 65536, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq((void *)ro, MAP_FAILED);
	((char *)s.base)[100] = 42;
	cr_expect_eq(ro[100], 42);
	munmap((void *)ro, 65536);
	close(fd);
	kvr_seg_destroy(&s);
}

Test(chanmap, named_descriptor_maps_only_read_only_when_reopened)
{
	struct kvr_err e = {0};
	struct kvr_seg s;
	bool sealed = true;
	int fd;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "t.ctl", 65536, 0400, (gid_t)-1, &s, &e), 0,
	    "%s", e.msg);
	fd = kvr_chanmap_ro_fd(&s, &sealed, &e);
	cr_assert_geq(fd, 0, "%s", e.msg);
	cr_expect(!sealed, "a named file cannot be sealed");
	cr_expect_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	expect_no_write_through(fd, 65536, "named");
	close(fd);
	kvr_seg_destroy(&s);
}

/* ---- kvr_chanmap_check ---- */

#define CH    2u
#define GEN   7u
#define RINGS 65536u

/* A consistent set: a formatted control segment, channel CH's block and
 * the welcome that announces them. */
struct set {
	struct kvr_ctl_geom g;
	struct kvr_ctl_hdr_shm *h;
	struct kvr_channel_shm *ch;
	struct kvr_welcome w;
};

static void set_make(struct set *t)
{
	const uint8_t boot[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

	memset(t, 0, sizeof(*t));
	cr_assert_eq(kvr_ctl_geom_compute(8, RINGS, RINGS, &t->g), 0);
	t->h = aligned_alloc(4096, t->g.ctl_bytes);
	t->ch = aligned_alloc(4096, t->g.channel_bytes);
	cr_assert(t->h && t->ch);
	memset(t->h, 0, t->g.ctl_bytes);
	memset(t->ch, 0, t->g.channel_bytes);
	kvr_seg_hdr_format(&t->h->seg, KVR_SEG_KIND_CONTROL, kvr_layout_hash(),
			   t->g.ctl_bytes, "t.ctl", boot);
	t->h->pool_bytes = 1u << 26;
	t->h->max_channels = 8;
	t->h->channel_bytes = t->g.channel_bytes;
	t->h->dir_fd = 3;
	t->h->dir_bytes = t->g.dir_bytes;
	t->h->req_ring_cap = t->h->resp_ring_cap = RINGS;
	kvr_seg_hdr_publish(&t->h->seg);
	atomic_store(&t->ch->state, KVR_CHAN_ACTIVE);
	t->ch->generation = GEN;
	t->ch->req_ring_off = t->g.req_ring_off;
	t->ch->resp_ring_off = t->g.resp_ring_off;
	t->w.channel = CH;
	t->w.req_ring_cap = t->w.resp_ring_cap = RINGS;
	t->w.ctl_bytes = t->g.ctl_bytes;
	t->w.channel_bytes = t->g.channel_bytes;
	t->w.pool_bytes = 1u << 26;
	memcpy(t->w.boot_id, boot, 16);
}

static void set_free(struct set *t)
{
	free(t->h);
	free(t->ch);
}

static int set_check(struct set *t, struct kvr_err *e)
{
	struct kvr_ctl_geom g = {0};
	uint32_t gen = 0;

	return kvr_chanmap_check(&t->w, t->h, t->g.ctl_bytes, t->ch,
				 t->g.channel_bytes, &g, &gen, e);
}

Test(chanmap, check_accepts_a_consistent_set_when_nothing_differs)
{
	struct kvr_err e = {0};
	struct kvr_ctl_geom g = {0};
	uint32_t gen = 0;
	struct set t;

	set_make(&t);
	cr_expect_eq(kvr_chanmap_check(&t.w, t.h, t.g.ctl_bytes, t.ch,
				       t.g.channel_bytes, &g, &gen, &e),
		     0, "%s", e.msg);
	cr_expect_eq(gen, GEN);
	cr_expect_eq(g.req_ring_off, t.g.req_ring_off);
	cr_expect_eq(g.ctl_bytes, t.g.ctl_bytes);
	set_free(&t);
}

/* The message the issue found wrong: a changed boot id said "pool
 * 67108864, expected 67108864 bytes". Now it names the boot id. */
Test(chanmap, check_names_the_boot_id_when_it_differs)
{
	struct kvr_err e = {0};
	struct set t;

	set_make(&t);
	t.w.boot_id[0] ^= 1;
	cr_expect_eq(set_check(&t, &e), -EPROTO);
	cr_expect(strstr(e.msg, "boot id"), "%s", e.msg);
	cr_expect(!strstr(e.msg, "pool"), "%s", e.msg);
	set_free(&t);
}

Test(chanmap, check_refuses_each_mismatch_with_its_name)
{
	struct kvr_err e = {0};
	struct set t;

	set_make(&t);
	t.w.pool_bytes++;
	cr_expect_eq(set_check(&t, &e), -EPROTO);
	cr_expect(strstr(e.msg, "pool"), "%s", e.msg);
	set_free(&t);

	set_make(&t);
	t.ch->generation = 0; /* a block no claim made */
	cr_expect_eq(set_check(&t, &e), -EPROTO);
	cr_expect(strstr(e.msg, "generation 0"), "%s", e.msg);
	set_free(&t);

	set_make(&t);
	atomic_store(&t.ch->state, KVR_CHAN_FREE);
	cr_expect_eq(set_check(&t, &e), -EPROTO);
	cr_expect(strstr(e.msg, "block state 0"), "%s", e.msg);
	set_free(&t);

	set_make(&t);
	t.ch->resp_ring_off += 128;
	cr_expect_eq(set_check(&t, &e), -EPROTO);
	cr_expect(strstr(e.msg, "ring offsets"), "%s", e.msg);
	set_free(&t);

	set_make(&t);
	t.w.channel_bytes += 4096;
	cr_expect_eq(set_check(&t, &e), -EPROTO);
	cr_expect(strstr(e.msg, "channel block"), "%s", e.msg);
	set_free(&t);

	set_make(&t);
	t.w.channel = 8; /* past max_channels */
	t.w.ctl_bytes = t.g.ctl_bytes;
	cr_expect_eq(set_check(&t, &e), -EPROTO);
	set_free(&t);
}

Test(chanmap, check_waits_when_the_header_is_not_ready)
{
	struct kvr_err e = {0};
	struct set t;

	set_make(&t);
	atomic_store(&t.h->seg.ready, 0);
	cr_expect_eq(set_check(&t, &e), -EAGAIN, "%s", e.msg);
	set_free(&t);
}

Test(chanmap, open_block_is_refused_when_the_fd_is_not_there)
{
	struct kvr_err e = {0};
	struct kvr_seg s;

	cr_expect_eq(kvr_chanmap_open_block(getpid(), 999999, 4096, &s, &e),
		     -ENOENT, "%s", e.msg);
	cr_expect_eq(kvr_chanmap_open_block(0, 3, 4096, &s, &e), -EINVAL);
	cr_expect_eq(kvr_chanmap_open_dir(getpid(), 999999, 4096, &s, &e),
		     -ENOENT, "%s", e.msg);
	cr_expect(strstr(e.msg, "channel directory"), "%s", e.msg);
}
