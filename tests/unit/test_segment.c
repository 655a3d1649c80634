/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for lib/segment.c: names, the header check, the three
 * backends, attach/open, prefault, teardown, and what happens when the
 * filesystem is too small (a 1 MiB tmpfs mounted by the test: ENOSPC with
 * numbers, no file left, no SIGBUS). Every test works in its own
 * temporary directory under /dev/shm, never among the real segments.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/proc.h>
#include <kvring/segment.h>

#include "t_dir.h"

static char dir[64];

static int dir_entries(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(dp);
	while ((de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(dp);
	return n;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/kvr-test-seg-XXXXXX");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static void teardown(void)
{
	t_dir_remove(dir);
}

TestSuite(segment, .init = setup, .fini = teardown, .timeout = 20);

static const char *path_of(const char *name)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

/* ==== names ==== */

Test(segment, name_valid_rejects_name_when_malformed)
{
	char long64[65];
	static const char *const bad[] = {"",	  "a/b",  "/a",	 "..",
					  ".",	  "x..y", "a b", "tab\t",
					  "a\nb", "é",	  "a*b", "a:b"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect(!kvr_seg_name_valid(bad[i]), "accepted \"%s\"",
			  bad[i]);
	memset(long64, 'a', 64);
	long64[64] = '\0';
	cr_expect(!kvr_seg_name_valid(long64), "accepted 64 chars");
	cr_expect(!kvr_seg_name_valid(NULL));
}

Test(segment, name_valid_accepts_name_when_well_formed)
{
	char max63[64];

	memset(max63, 'z', 63);
	max63[63] = '\0';
	cr_expect(kvr_seg_name_valid("kvring-0.ctl"));
	cr_expect(kvr_seg_name_valid("a"));
	cr_expect(kvr_seg_name_valid(".hidden"));
	cr_expect(kvr_seg_name_valid("A_b-9.x"));
	cr_expect(kvr_seg_name_valid(max63));
}

Test(segment, create_refuses_name_when_invalid)
{
	char long64[65];
	const char *bad[] = {"",	   "a/b",  "..", "x..y",
			     "with space", long64, NULL};
	struct kvr_seg s;
	struct kvr_err e;

	memset(long64, 'q', 64);
	long64[64] = '\0';
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kvr_err_clear(&e);
		cr_expect_eq(
		    kvr_seg_create_shm(dir, bad[i], 4096, 0, (gid_t)-1, &s, &e),
		    -EINVAL, "name \"%s\"", bad[i] ? bad[i] : "NULL");
		cr_expect_neq(e.msg[0], '\0', "no message for \"%s\"",
			      bad[i] ? bad[i] : "NULL");
	}
	cr_expect_eq(dir_entries(dir), 0, "a file was created");
}

Test(segment, default_base_and_pair_names_when_formed)
{
	char base[64], want[80], buf[64];

	cr_assert_gt(kvr_seg_default_base(base, sizeof(base)), 0);
	snprintf(want, sizeof(want), "kvring-%lu", (unsigned long)geteuid());
	cr_expect_str_eq(base, want);
	cr_expect_eq(kvr_seg_ctl_name(base, buf, sizeof(buf)),
		     (int)strlen(base) + 4);
	snprintf(want, sizeof(want), "%s.ctl", base);
	cr_expect_str_eq(buf, want);
	cr_expect_gt(kvr_seg_pool_name(base, buf, sizeof(buf)), 0);
	snprintf(want, sizeof(want), "%s.pool", base);
	cr_expect_str_eq(buf, want);
	cr_expect_eq(kvr_seg_default_base(buf, 4), -EINVAL);
	cr_expect_eq(kvr_seg_ctl_name("a/b", buf, sizeof(buf)), -EINVAL);
	cr_expect_eq(kvr_seg_pool_name(base, buf, 8), -EINVAL);
}

/* ==== create_shm ==== */

Test(segment, create_returns_eexist_when_name_exists)
{
	struct kvr_seg s = {.fd = -7};
	struct kvr_err e;
	char buf[16] = {0};
	struct stat st;
	int fd;

	fd = open(path_of("taken"), O_CREAT | O_EXCL | O_WRONLY, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "hello", 5), 5);
	close(fd);
	chmod(path_of("taken"), 0644);

	cr_expect_eq(
	    kvr_seg_create_shm(dir, "taken", 8192, 0, (gid_t)-1, &s, &e),
	    -EEXIST);
	cr_expect_not_null(strstr(e.msg, "already exists"), "msg: %s", e.msg);
	cr_expect_eq(s.fd, -7, "output touched on failure");
	/* The existing file is exactly as it was. */
	cr_assert_eq(stat(path_of("taken"), &st), 0);
	cr_expect_eq(st.st_size, 5);
	cr_expect_eq(st.st_mode & 0777, 0644u, "mode %o", st.st_mode & 0777);
	fd = open(path_of("taken"), O_RDONLY);
	cr_assert_eq(read(fd, buf, sizeof(buf)), 5);
	close(fd);
	cr_expect_str_eq(buf, "hello");
}

/*
 * The create-failure path removes the name only while it
 * is still the inode it created. The hook puts another file at the name
 * between the O_EXCL create and the step that fails (a pool far bigger
 * than /dev/shm); that file must survive, contents and all.
 */
static struct stat replaced;

static void replace_name(const char *path)
{
	char tmp[160];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.other", path);
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, "other", 5) == 5 && fstat(fd, &replaced) == 0)
		(void)rename(tmp, path);
	close(fd);
}

Test(segment, create_failure_leaves_name_alone_when_replaced_meanwhile)
{
	struct kvr_seg s = {.fd = -7};
	struct kvr_err e;
	char buf[16] = {0};
	struct stat st;
	int fd, rc;

	memset(&replaced, 0, sizeof(replaced));
	kvr__seg_create_hook = replace_name;
	rc = kvr_seg_create_shm(dir, "swapped", (size_t)1 << 50, 0, (gid_t)-1,
				&s, &e);
	kvr__seg_create_hook = NULL;
	cr_expect_eq(rc, -ENOSPC, "rc %d: %s", rc, e.msg);
	cr_assert_neq(replaced.st_ino, 0, "the hook did not replace the name");
	cr_assert_eq(lstat(path_of("swapped"), &st), 0,
		     "the failure path unlinked the file that replaced ours");
	cr_expect_eq(st.st_ino, replaced.st_ino);
	fd = open(path_of("swapped"), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_expect_eq(read(fd, buf, sizeof(buf)), 5);
	close(fd);
	cr_expect_str_eq(buf, "other");
}

/* Without a replacement, the same failure leaves no file behind. */
Test(segment, create_failure_removes_its_own_name_when_unchanged)
{
	struct kvr_seg s = {.fd = -7};
	struct kvr_err e;
	struct stat st;

	cr_expect_eq(kvr_seg_create_shm(dir, "mine", (size_t)1 << 50, 0,
					(gid_t)-1, &s, &e),
		     -ENOSPC);
	cr_expect_eq(lstat(path_of("mine"), &st), -1);
	cr_expect_eq(errno, ENOENT);
}

Test(segment, create_uses_mode_0600_when_mode_default)
{
	struct kvr_seg s;
	struct stat st;

	umask(0);
	cr_assert_eq(
	    kvr_seg_create_shm(dir, "m0", 4096, 0, (gid_t)-1, &s, NULL), 0);
	cr_assert_eq(fstat(kvr_seg_fd(&s), &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0600u, "mode %o", st.st_mode & 0777);
	cr_expect_eq(s.backend, KVR_SEG_BACKEND_SHM);
	cr_expect(s.owner);
	cr_expect_str_eq(kvr_seg_backend_name(s.backend), "shm");
	kvr_seg_destroy(&s);
}

Test(segment, create_uses_mode_0660_when_group_asked_despite_umask)
{
	struct kvr_seg s;
	struct stat st;

	if (geteuid() != 0)
		cr_skip("chown to a group we are not in needs root");
	umask(0077);
	cr_assert_eq(kvr_seg_create_shm(dir, "m1", 4096, 0660, 65534, &s, NULL),
		     0);
	cr_assert_eq(stat(path_of("m1"), &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0660u, "mode %o", st.st_mode & 0777);
	cr_expect_eq(st.st_gid, 65534u, "gid %u", (unsigned)st.st_gid);
	kvr_seg_destroy(&s);
}

Test(segment, create_refuses_mode_when_outside_0777)
{
	struct kvr_seg s;

	cr_expect_eq(
	    kvr_seg_create_shm(dir, "m2", 4096, 04755, (gid_t)-1, &s, NULL),
	    -EINVAL);
	cr_expect_eq(kvr_seg_create_shm(dir, "m3", 0, 0, (gid_t)-1, &s, NULL),
		     -EINVAL);
	cr_expect_eq(dir_entries(dir), 0);
}

Test(segment, create_reserves_pages_when_created)
{
	size_t bytes = 1u << 20;
	struct kvr_seg s;
	struct stat st;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "res", bytes, 0, (gid_t)-1, &s, NULL), 0);
	cr_assert_eq(fstat(s.fd, &st), 0);
	cr_expect_eq((size_t)st.st_size, bytes);
	/* fallocate allocated every block before anyone touched a page. */
	cr_expect_geq((size_t)st.st_blocks * 512u, bytes, "blocks %lld",
		      (long long)st.st_blocks);
	kvr_seg_destroy(&s);
}

/* ==== attach / open ==== */

Test(segment, attach_closes_fd_when_mapped)
{
	struct kvr_seg s, a;
	int fd;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "att", 8192, 0, (gid_t)-1, &s, NULL), 0);
	strcpy((char *)s.base, "shared");
	fd = open(path_of("att"), O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(
	    kvr_seg_attach_fd(fd, 8192, PROT_READ | PROT_WRITE, &a, NULL), 0);
	errno = 0;
	cr_expect_eq(fcntl(fd, F_GETFD), -1, "fd %d still open", fd);
	cr_expect_eq(errno, EBADF);
	cr_expect_eq(a.fd, -1);
	cr_expect_eq(kvr_seg_fd(&a), -EBADF);
	cr_expect_eq(a.backend, KVR_SEG_BACKEND_FD);
	cr_expect_str_eq((char *)a.base, "shared");
	strcpy((char *)a.base + 100, "back");
	cr_expect_str_eq((char *)s.base + 100, "back");
	kvr_seg_destroy(&a);
	/* The attacher's destroy never unlinks. */
	cr_expect_eq(access(path_of("att"), F_OK), 0);
	kvr_seg_destroy(&s);
}

Test(segment, attach_closes_fd_when_it_fails)
{
	struct kvr_seg s, a = {.fd = -7};
	struct kvr_err e;
	int fd;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "attf", 4096, 0, (gid_t)-1, &s, NULL), 0);
	/* Larger than the file: -ERANGE, fd closed, output untouched. */
	fd = open(path_of("attf"), O_RDWR | O_CLOEXEC);
	cr_expect_eq(kvr_seg_attach_fd(fd, 8192, PROT_READ, &a, &e), -ERANGE);
	cr_expect_not_null(strstr(e.msg, "4096"), "msg: %s", e.msg);
	cr_expect_eq(fcntl(fd, F_GETFD), -1, "fd left open after -ERANGE");
	cr_expect_eq(a.fd, -7);
	/* Bad prot: -EINVAL, fd closed. */
	fd = open(path_of("attf"), O_RDWR | O_CLOEXEC);
	cr_expect_eq(kvr_seg_attach_fd(fd, 4096, PROT_EXEC, &a, NULL), -EINVAL);
	cr_expect_eq(fcntl(fd, F_GETFD), -1, "fd left open after -EINVAL");
	/* Not a regular file: -EINVAL, fd closed. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_expect_eq(kvr_seg_attach_fd(fd, 4096, PROT_READ, &a, NULL), -EINVAL);
	cr_expect_eq(fcntl(fd, F_GETFD), -1, "fd left open after dir");
	cr_expect_eq(kvr_seg_attach_fd(-1, 4096, PROT_READ, &a, NULL), -EINVAL);
	kvr_seg_destroy(&s);
}

Test(segment, attach_maps_whole_file_when_bytes_zero)
{
	struct kvr_seg s, a;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "whole", 12288, 0, (gid_t)-1, &s, NULL), 0);
	cr_assert_eq(kvr_seg_attach_fd(open(path_of("whole"), O_RDONLY), 0,
				       PROT_READ, &a, NULL),
		     0);
	cr_expect_eq(a.bytes, 12288u);
	cr_expect(!a.writable);
	kvr_seg_destroy(&a);
	kvr_seg_destroy(&s);
}

Test(segment, open_name_maps_read_only_when_rdonly)
{
	struct kvr_seg s, r;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "ro", 4096, 0, (gid_t)-1, &s, NULL), 0);
	strcpy((char *)s.base, "inspect me");
	cr_assert_eq(kvr_seg_open_name(dir, "ro", true, &r, NULL), 0);
	cr_expect_eq(r.fd, -1, "fd kept after open_name");
	cr_expect_eq(r.bytes, 4096u);
	cr_expect(!r.owner);
	cr_expect_str_eq((char *)r.base, "inspect me");
	/* PROT_READ really: mprotect to write would be needed to store. */
	cr_expect(!r.writable);
	kvr_seg_destroy(&r);
	cr_expect_eq(access(path_of("ro"), F_OK), 0, "reader unlinked it");
	kvr_seg_destroy(&s);
}

Test(segment, open_name_refuses_when_symlink_or_not_file)
{
	struct kvr_seg s, r;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "real", 4096, 0, (gid_t)-1, &s, NULL), 0);
	char target[256];

	snprintf(target, sizeof(target), "%s", path_of("real"));
	cr_assert_eq(symlink(target, path_of("link")), 0);
	cr_expect_eq(kvr_seg_open_name(dir, "link", true, &r, NULL), -ELOOP);
	cr_assert_eq(mkfifo(path_of("fifo"), 0600), 0);
	cr_expect_eq(kvr_seg_open_name(dir, "fifo", true, &r, NULL), -EINVAL);
	cr_expect_eq(kvr_seg_open_name(dir, "absent", true, &r, NULL), -ENOENT);
	cr_assert_eq(close(open(path_of("empty"), O_CREAT | O_WRONLY, 0600)),
		     0);
	cr_expect_eq(kvr_seg_open_name(dir, "empty", true, &r, NULL), -ERANGE);
	kvr_seg_destroy(&s);
}

/* ==== prefault ==== */

Test(segment, prefault_preserves_contents_when_other_mapping_wrote)
{
	size_t bytes = 64u << 10;
	struct kvr_seg s, other;
	uint64_t ns = 0;
	unsigned char *o;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "pf", bytes, 0, (gid_t)-1, &s, NULL), 0);
	cr_assert_eq(kvr_seg_open_name(dir, "pf", false, &other, NULL), 0);
	o = other.base;
	for (size_t i = 0; i < bytes; i++)
		o[i] = (unsigned char)(i * 131u + 7u);
	cr_assert_eq(kvr_seg_prefault(s.base, bytes, true, &ns), 0);
	cr_assert_eq(kvr_seg_prefault(s.base, bytes, false, NULL), 0);
	for (size_t i = 0; i < bytes; i++)
		if (((unsigned char *)s.base)[i] !=
		    (unsigned char)(i * 131u + 7u))
			cr_assert_fail("byte %zu changed to %u", i,
				       ((unsigned char *)s.base)[i]);
	cr_expect_gt(ns, 0u);
	kvr_seg_destroy(&other);
	kvr_seg_destroy(&s);
}

Test(segment, prefault_loses_no_store_when_other_process_writes)
{
	enum { PAGES = 256, ROUNDS = 2000 };
	size_t bytes = PAGES * 4096u;
	struct kvr_seg s;
	pid_t pid;
	int status;

	cr_assert_eq(kvr_seg_create_memfd("pfrace", bytes, 0, &s, NULL), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* The child keeps storing round numbers into each page. */
		for (uint64_t r = 1; r <= ROUNDS; r++)
			for (size_t pg = 0; pg < PAGES; pg++)
				atomic_store_explicit(
				    (_Atomic uint64_t *)((char *)s.base +
							 pg * 4096u),
				    r, memory_order_relaxed);
		_exit(0);
	}
	/* Meanwhile the parent prefaults again and again. */
	for (int i = 0; i < 50; i++)
		kvr_seg_prefault(s.base, bytes, true, NULL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (size_t pg = 0; pg < PAGES; pg++) {
		uint64_t v = atomic_load_explicit(
		    (_Atomic uint64_t *)((char *)s.base + pg * 4096u),
		    memory_order_relaxed);
		cr_expect_eq(v, (uint64_t)ROUNDS, "page %zu holds %llu", pg,
			     (unsigned long long)v);
	}
	kvr_seg_destroy(&s);
}

Test(segment, prefault_rejects_base_when_null_or_misaligned)
{
	uint64_t w[2];

	cr_expect_eq(kvr_seg_prefault(NULL, 4096, true, NULL), -EINVAL);
	cr_expect_eq(kvr_seg_prefault((char *)w + 1, 8, false, NULL), -EINVAL);
	cr_expect_eq(kvr_seg_prefault(NULL, 0, true, NULL), 0);
}

/* ==== memfd / private ==== */

Test(segment, memfd_refuses_resize_when_sealed)
{
	size_t bytes = 1u << 20;
	struct kvr_seg s;
	int seals;

	cr_assert_eq(kvr_seg_create_memfd("sealed", bytes, 0, &s, NULL), 0);
	cr_expect_eq(s.backend, KVR_SEG_BACKEND_MEMFD);
	cr_assert_geq(s.fd, 0);
	seals = fcntl(s.fd, F_GET_SEALS);
	cr_expect_eq(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, "seals 0x%x",
		     seals);
	errno = 0;
	cr_expect_eq(ftruncate(s.fd, 4096), -1, "shrink allowed");
	cr_expect_eq(errno, EPERM, "errno %d", errno);
	errno = 0;
	cr_expect_eq(ftruncate(s.fd, (off_t)bytes * 2), -1, "grow allowed");
	cr_expect_eq(errno, EPERM);
	cr_expect_eq(fcntl(s.fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1,
		     "a holder could add seals");
	/* A worker's view through the same fd sees our bytes. */
	struct kvr_seg w;
	((char *)s.base)[bytes - 1] = 'k';
	cr_assert_eq(kvr_seg_attach_fd(dup(s.fd), bytes, PROT_READ | PROT_WRITE,
				       &w, NULL),
		     0);
	cr_expect_eq(((char *)w.base)[bytes - 1], 'k');
	kvr_seg_destroy(&w);
	kvr_seg_destroy(&s);
}

Test(segment, memfd_falls_back_when_hugetlb_short)
{
	size_t bytes = (2u << 20) + 4096u;
	struct kvr_seg s;

	/* With or without huge pages on this host, creation succeeds. */
	cr_assert_eq(
	    kvr_seg_create_memfd("hp", bytes, KVR_SEG_TRY_HUGETLB, &s, NULL),
	    0);
	cr_expect_geq(s.bytes, bytes);
	if (!s.hugetlb)
		cr_expect_eq(s.bytes, bytes, "rounded without hugetlb");
	cr_expect_eq(kvr_seg_prefault(s.base, s.bytes, true, NULL), 0);
	kvr_seg_destroy(&s);
	cr_expect_eq(kvr_seg_create_memfd("hp", bytes, 0x80, &s, NULL),
		     -EINVAL);
}

Test(segment, private_is_usable_when_created)
{
	struct kvr_seg s;

	cr_assert_eq(kvr_seg_create_private(3u << 20, &s, NULL), 0);
	cr_expect_eq(s.backend, KVR_SEG_BACKEND_PRIVATE);
	cr_expect_eq(s.fd, -1);
	cr_expect_eq(kvr_seg_prefault(s.base, s.bytes, true, NULL), 0);
	memset(s.base, 0xab, s.bytes);
	kvr_seg_destroy(&s);
	cr_expect_eq(kvr_seg_create_private(0, &s, NULL), -EINVAL);
}

/* ==== teardown ==== */

Test(segment, destroy_is_harmless_when_called_twice)
{
	struct kvr_seg s;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "dd", 4096, 0, (gid_t)-1, &s, NULL), 0);
	kvr_seg_destroy(&s);
	cr_expect_eq(access(path_of("dd"), F_OK), -1, "owner left the file");
	cr_expect_null(s.base);
	cr_expect_eq(s.fd, -1);
	kvr_seg_destroy(&s);
	kvr_seg_detach(&s);
	kvr_seg_destroy(NULL);
	kvr_seg_detach(NULL);
}

Test(segment, detach_keeps_file_when_owner)
{
	struct kvr_seg s;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "keep", 4096, 0, (gid_t)-1, &s, NULL), 0);
	kvr_seg_detach(&s);
	cr_expect_null(s.base);
	cr_expect_eq(s.fd, -1);
	cr_expect_eq(access(path_of("keep"), F_OK), 0);
}

/* ==== header ==== */

#define KIND 0x51u
#define HASH 0x1234abcd5678ef90ULL

struct hdr_seg {
	struct kvr_seg_hdr_shm h;
	char rest[256];
};

static void format_ready(struct hdr_seg *m)
{
	kvr_seg_hdr_format(&m->h, KIND, HASH, sizeof(*m), "kvring-0.ctl", NULL);
	kvr_seg_hdr_publish(&m->h);
}

Test(segment, hdr_format_records_creator_when_formatted)
{
	uint8_t boot[16] = {1, 2,  3,  4,  5,  6,  7,  8,
			    9, 10, 11, 12, 13, 14, 15, 16};
	struct hdr_seg m;
	uint64_t start = 0;

	memset(&m, 0xee, sizeof(m));
	kvr_seg_hdr_format(&m.h, KIND, HASH, sizeof(m), "kvring-0.ctl", boot);
	cr_expect_eq(m.h.magic, KVR_SEG_MAGIC);
	cr_expect_eq(m.h.abi, (uint32_t)(KVR_ABI_MAJOR << 16 | KVR_ABI_MINOR));
	cr_expect_eq(m.h.creator_pid, (int32_t)getpid());
	cr_assert_eq(kvr_proc_start_time(getpid(), &start), 0);
	cr_expect_eq(m.h.creator_start, start);
	cr_expect_eq(m.h.hdr_bytes, 256u);
	cr_expect_eq(memcmp(m.h.boot_id, boot, 16), 0);
	cr_expect_str_eq(m.h.name, "kvring-0.ctl");
	cr_expect_eq(atomic_load(&m.h.ready), 0u, "ready before publish");
	for (size_t i = 0; i < sizeof(m.h.reserved) / 8; i++)
		cr_expect_eq(m.h.reserved[i], 0u);
}

Test(segment, hdr_check_returns_eagain_when_not_ready)
{
	struct hdr_seg m;
	struct kvr_err e;

	kvr_seg_hdr_format(&m.h, KIND, HASH, sizeof(m), "x", NULL);
	cr_expect_eq(kvr_seg_hdr_check(&m.h, sizeof(m), KIND, HASH, &e),
		     -EAGAIN);
	kvr_seg_hdr_publish(&m.h);
	cr_expect_eq(kvr_seg_hdr_check(&m.h, sizeof(m), KIND, HASH, &e), 0);
}

/* Checking @m for @kind and @hash fails with -EPROTO, and the message
 * names @a and, unless NULL, @b (what was found, what was expected). */
static void expect_hdr_eproto(const struct hdr_seg *m, uint32_t kind,
			      uint64_t hash, const char *a, const char *b)
{
	struct kvr_err e;

	cr_expect_eq(kvr_seg_hdr_check(&m->h, sizeof(*m), kind, hash, &e),
		     -EPROTO);
	cr_expect_not_null(strstr(e.msg, a), "%s", e.msg);
	if (b)
		cr_expect_not_null(strstr(e.msg, b), "%s", e.msg);
}

Test(segment, hdr_check_returns_eproto_when_magic_wrong)
{
	struct hdr_seg m;

	format_ready(&m);
	m.h.magic = 0x1122334455667788ULL;
	expect_hdr_eproto(&m, KIND, HASH, "1122334455667788",
			  "4b56524e47435431");
}

Test(segment, hdr_check_returns_eproto_when_abi_major_differs)
{
	struct hdr_seg m;
	char want[64];

	/* One major ahead of ours, whatever ours is. */
	format_ready(&m);
	m.h.abi = (uint32_t)(KVR_ABI_MAJOR + 1) << 16 | 1u;
	snprintf(want, sizeof(want), "abi %d.1, expected %d.x",
		 KVR_ABI_MAJOR + 1, KVR_ABI_MAJOR);
	expect_hdr_eproto(&m, KIND, HASH, want, NULL);
}

Test(segment, hdr_check_accepts_header_when_only_minor_newer)
{
	struct hdr_seg m;

	format_ready(&m);
	m.h.abi = (uint32_t)KVR_ABI_MAJOR << 16 | 7u;
	cr_expect_eq(kvr_seg_hdr_check(&m.h, sizeof(m), KIND, HASH, NULL), 0);
}

Test(segment, hdr_check_returns_eproto_when_layout_hash_differs)
{
	struct hdr_seg m;

	format_ready(&m);
	expect_hdr_eproto(&m, KIND, 0x77ULL, "1234abcd5678ef90",
			  "0000000000000077");
}

Test(segment, hdr_check_returns_eproto_when_kind_differs)
{
	struct hdr_seg m;

	format_ready(&m);
	expect_hdr_eproto(&m, KIND + 1, HASH, "kind 81, expected 82", NULL);
}

Test(segment, hdr_check_returns_erange_when_size_differs)
{
	struct hdr_seg m;
	struct kvr_err e;

	format_ready(&m);
	cr_expect_eq(kvr_seg_hdr_check(&m.h, sizeof(m) - 8, KIND, HASH, &e),
		     -ERANGE);
	cr_expect_not_null(strstr(e.msg, "512"), "%s", e.msg);
	cr_expect_eq(kvr_seg_hdr_check(&m.h, 100, KIND, HASH, &e), -ERANGE);
	m.h.hdr_bytes = 12;
	cr_expect_eq(kvr_seg_hdr_check(&m.h, sizeof(m), KIND, HASH, &e),
		     -EPROTO);
}

Test(segment, hdr_check_validates_header_when_in_real_segment)
{
	struct kvr_seg s, r;
	struct kvr_err e;

	cr_assert_eq(
	    kvr_seg_create_shm(dir, "hdr.ctl", 65536, 0, (gid_t)-1, &s, NULL),
	    0);
	kvr_seg_hdr_format(s.base, KIND, HASH, s.bytes, s.name, NULL);
	cr_assert_eq(kvr_seg_open_name(dir, "hdr.ctl", true, &r, NULL), 0);
	cr_expect_eq(kvr_seg_hdr_check(r.base, r.bytes, KIND, HASH, &e),
		     -EAGAIN);
	kvr_seg_hdr_publish(s.base);
	cr_expect_eq(kvr_seg_hdr_check(r.base, r.bytes, KIND, HASH, &e), 0,
		     "%s", e.msg);
	kvr_seg_destroy(&r);
	kvr_seg_destroy(&s);
}

/* ==== small filesystem: ENOSPC, never SIGBUS ==== */

static char mnt[64];

static void mount_setup(void)
{
	snprintf(mnt, sizeof(mnt), "/tmp/kvr-test-tmpfs-XXXXXX");
	cr_assert_not_null(mkdtemp(mnt));
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0700") < 0) {
		int err = errno;

		rmdir(mnt);
		mnt[0] = '\0';
		if (err == EPERM)
			cr_skip(
			    "mount tmpfs needs CAP_SYS_ADMIN (run as root)");
		cr_assert_fail("mount tmpfs: %s", strerror(err));
	}
}

static void mount_teardown(void)
{
	if (mnt[0] == '\0')
		return;
	t_dir_empty(mnt);
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}

TestSuite(segment_small_fs, .init = mount_setup, .fini = mount_teardown,
	  .timeout = 20);

Test(segment_small_fs, create_returns_enospc_when_filesystem_too_small)
{
	struct kvr_seg s = {.fd = -7};
	struct kvr_err e;
	char path[128];

	kvr_err_clear(&e);
	cr_expect_eq(
	    kvr_seg_create_shm(mnt, "big.pool", 8u << 20, 0, (gid_t)-1, &s, &e),
	    -ENOSPC);
	cr_expect_eq(e.code, -ENOSPC);
	cr_expect_not_null(strstr(e.msg, "needs 8 MiB (8388608 bytes)"), "%s",
			   e.msg);
	cr_expect_not_null(strstr(e.msg, "1 MiB available"), "%s", e.msg);
	cr_expect_not_null(strstr(e.msg, "--pool-size"), "%s", e.msg);
	snprintf(path, sizeof(path), "%s/big.pool", mnt);
	cr_expect_eq(access(path, F_OK), -1, "file left behind");
	cr_expect_eq(s.fd, -7);
	/* Still here, so no SIGBUS; and the mount is whole again. */
	cr_expect_eq(dir_entries(mnt), 0);
}

Test(segment_small_fs, create_succeeds_and_pages_write_when_it_fits)
{
	size_t bytes = 512u << 10;
	struct kvr_seg s, big;
	struct kvr_err e;

	cr_assert_eq(
	    kvr_seg_create_shm(mnt, "half.pool", bytes, 0, (gid_t)-1, &s, &e),
	    0, "%s", e.msg);
	cr_expect_eq(kvr_seg_prefault(s.base, bytes, true, NULL), 0);
	memset(s.base, 0x5a, bytes);
	cr_expect_eq(((unsigned char *)s.base)[bytes - 1], 0x5a);
	/* What is left cannot hold another 600 KiB: refused, not SIGBUS. */
	cr_expect_eq(kvr_seg_create_shm(mnt, "more.pool", 600u << 10, 0,
					(gid_t)-1, &big, &e),
		     -ENOSPC);
	kvr_seg_destroy(&s);
}
