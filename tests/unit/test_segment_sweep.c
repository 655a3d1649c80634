/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for lib/segment_sweep.c: the start-up sweep removes stale
 * segments of dead owners and orphan pools, and nothing else: live owners,
 * other prefixes, symlinks, other uids, directories, bad headers and
 * invalid names survive. Also kvr_seg_list(). Each test uses a private
 * directory under /dev/shm and the prefix "kvtest-".
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/proc.h>
#include <kvring/segment.h>

#include "t_dir.h"

#define PFX "kvtest-"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/kvr-test-sweep-XXXXXX");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

/* Liveness locks this test process holds (as a live server would). */
static int live_fds[8];
static int nlive;

static void teardown(void)
{
	while (nlive > 0)
		close(live_fds[--nlive]);
	t_dir_remove(dir);
}

TestSuite(sweep, .init = setup, .fini = teardown, .timeout = 20);

static const char *P(const char *name)
{
	static char p[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static bool exists(const char *name)
{
	struct stat st;

	return lstat(P(name), &st) == 0;
}

/* Write a published header claiming (pid, start) as its creator. */
static void write_ctl(const char *name, pid_t pid, uint64_t start)
{
	struct kvr_seg_hdr_shm h;
	int fd;

	kvr_seg_hdr_format(&h, 1, 0, sizeof(h), name, NULL);
	h.creator_pid = (int32_t)pid;
	h.creator_start = start;
	kvr_seg_hdr_publish(&h);
	fd = open(P(name), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "create %s: %s", name, strerror(errno));
	cr_assert_eq(write(fd, &h, sizeof(h)), (ssize_t)sizeof(h));
	close(fd);
}

/* A ctl of ours whose liveness lock we hold, as a running server does:
 * a second open of the file with an OFD read lock (segment_map.c). */
static void write_live_ctl(const char *name)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	uint64_t start;
	int fd;

	cr_assert_eq(kvr_proc_start_time(getpid(), &start), 0);
	write_ctl(name, getpid(), start);
	fd = open(P(name), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &fl), 0, "%s", strerror(errno));
	cr_assert_lt(nlive, 8);
	live_fds[nlive++] = fd;
}

static void write_file(const char *name, size_t bytes)
{
	int fd = open(P(name), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "create %s: %s", name, strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)bytes), 0);
	close(fd);
}

/* A (pid, start time) that names no live process: a reaped child's. */
static void dead_owner(pid_t *pid, uint64_t *start)
{
	int p[2];
	pid_t c;

	cr_assert_eq(pipe(p), 0);
	c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		uint64_t s = 0;

		kvr_proc_start_time(getpid(), &s);
		_exit(write(p[1], &s, sizeof(s)) == sizeof(s) ? 0 : 1);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], start, sizeof(*start)),
		     (ssize_t)sizeof(*start));
	close(p[0]);
	cr_assert_eq(waitpid(c, NULL, 0), c);
	*pid = c;
}

/* A published header at @name whose creator is dead (dead_owner()). */
static void write_dead_ctl(const char *name)
{
	uint64_t start;
	pid_t pid;

	dead_owner(&pid, &start);
	write_ctl(name, pid, start);
}

/* Give @name to uid and gid 65534 (nobody): not ours. Needs root. */
static void chown_nobody(const char *name)
{
	cr_assert_eq(chown(P(name), 65534, 65534), 0, "chown %s", name);
}

static void self_owner(pid_t *pid, uint64_t *start)
{
	*pid = getpid();
	cr_assert_eq(kvr_proc_start_time(*pid, start), 0);
}

static bool name_listed(const struct kvr_sweep_report *r, const char *n)
{
	for (unsigned i = 0; i < r->nr_removed_names; i++)
		if (strcmp(r->removed_names[i], n) == 0)
			return true;
	return false;
}

Test(sweep, removes_ctl_and_pool_when_owner_died)
{
	struct kvr_sweep_report r;
	pid_t c;
	int status;

	/*
	 * A real owner: the child creates the pair like a server would
	 * (.ctl first, header published) and dies without cleaning up.
	 */
	c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		struct kvr_seg ctl, pool;

		if (kvr_seg_create_shm(dir, PFX "a.ctl", 8192, 0, (gid_t)-1,
				       &ctl, NULL) < 0 ||
		    kvr_seg_create_shm(dir, PFX "a.pool", 65536, 0, (gid_t)-1,
				       &pool, NULL) < 0)
			_exit(1);
		kvr_seg_hdr_format(ctl.base, 1, 0, ctl.bytes, ctl.name, NULL);
		kvr_seg_hdr_publish(ctl.base);
		raise(SIGKILL);
	}
	cr_assert_eq(waitpid(c, &status, 0), c);
	cr_assert(WIFSIGNALED(status), "child setup failed");
	cr_assert(exists(PFX "a.ctl") && exists(PFX "a.pool"));

	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 2);
	cr_expect_eq(r.removed, 2u);
	cr_expect(!exists(PFX "a.ctl"), "stale .ctl kept");
	cr_expect(!exists(PFX "a.pool"), "stale .pool kept");
	cr_expect(name_listed(&r, PFX "a.ctl"));
	cr_expect(name_listed(&r, PFX "a.pool"));
	cr_expect_eq(r.kept_live + r.skipped + r.bad_header + r.errors, 0u);
}

Test(sweep, removes_ctl_when_owner_is_zombie)
{
	struct kvr_sweep_report r;
	uint64_t start = 0;
	siginfo_t si;
	pid_t c;
	int p[2];

	cr_assert_eq(pipe(p), 0);
	c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		uint64_t s = 0;

		kvr_proc_start_time(getpid(), &s);
		_exit(write(p[1], &s, sizeof(s)) == sizeof(s) ? 0 : 1);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &start, sizeof(start)), (ssize_t)sizeof(start));
	close(p[0]);
	/* Exited but not reaped: kill(pid, 0) still succeeds. */
	cr_assert_eq(waitid(P_PID, (id_t)c, &si, WEXITED | WNOWAIT), 0);
	write_ctl(PFX "z.ctl", c, start);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 1);
	cr_expect(!exists(PFX "z.ctl"));
	waitpid(c, NULL, 0);
}

Test(sweep, keeps_segment_when_owner_alive)
{
	struct kvr_sweep_report r;
	uint64_t start;
	pid_t pid;

	(void)pid;
	(void)start;
	write_live_ctl(PFX "live.ctl");
	write_file(PFX "live.pool", 65536);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists(PFX "live.ctl"));
	cr_expect(exists(PFX "live.pool"));
	cr_expect_eq(r.kept_live, 2u);
	cr_expect_eq(r.removed, 0u);
}

Test(sweep, removes_ctl_when_pid_reused_with_other_start_time)
{
	struct kvr_sweep_report r;
	uint64_t start;
	pid_t pid;

	/* Our own, live pid, but a start time that is not ours. */
	self_owner(&pid, &start);
	write_ctl(PFX "reuse.ctl", pid, start + 12345);
	write_file(PFX "reuse.pool", 4096);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 2);
	cr_expect(!exists(PFX "reuse.ctl"));
	cr_expect(!exists(PFX "reuse.pool"));
}

Test(sweep, keeps_file_when_prefix_differs)
{
	struct kvr_sweep_report r;

	write_dead_ctl("other-a.ctl");
	write_file("other-a.pool", 4096);
	write_file("kvtes.pool", 4096); /* a shorter near-miss */
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists("other-a.ctl"));
	cr_expect(exists("other-a.pool"));
	cr_expect(exists("kvtes.pool"));
	cr_expect_eq(r.removed + r.kept_live + r.skipped, 0u,
		     "foreign names were counted");
}

Test(sweep, keeps_symlink_and_target_when_name_matches)
{
	struct kvr_sweep_report r;

	/* Targets that would be removed if the sweep followed links. */
	write_dead_ctl("target.ctl");
	write_file("target.pool", 4096);
	cr_assert_eq(symlink(P("target.ctl"), P(PFX "l.ctl")), 0);
	cr_assert_eq(symlink(P("target.pool"), P(PFX "l.pool")), 0);
	cr_assert_eq(symlink(P("target.pool"), P(PFX "orph.pool")), 0);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists(PFX "l.ctl"), "symlink removed");
	cr_expect(exists(PFX "l.pool"), "symlink removed");
	cr_expect(exists(PFX "orph.pool"), "symlink removed");
	cr_expect(exists("target.ctl"), "target removed");
	cr_expect(exists("target.pool"), "target removed");
	cr_expect_eq(r.skipped, 3u, "skipped %u", r.skipped);
}

Test(sweep, keeps_file_when_uid_differs)
{
	struct kvr_sweep_report r;

	if (geteuid() != 0)
		cr_skip("chown to another uid needs root");
	write_dead_ctl(PFX "u.ctl");
	write_file(PFX "u.pool", 4096);
	write_file(PFX "uorph.pool", 4096);
	chown_nobody(PFX "u.ctl");
	chown_nobody(PFX "u.pool");
	chown_nobody(PFX "uorph.pool");
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists(PFX "u.ctl"));
	cr_expect(exists(PFX "u.pool"));
	cr_expect(exists(PFX "uorph.pool"));
	cr_expect_eq(r.skipped, 3u, "skipped %u", r.skipped);
}

Test(sweep, keeps_pool_of_other_uid_when_own_ctl_is_stale)
{
	struct kvr_sweep_report r;

	if (geteuid() != 0)
		cr_skip("chown to another uid needs root");
	write_dead_ctl(PFX "mix.ctl");
	write_file(PFX "mix.pool", 4096);
	chown_nobody(PFX "mix.pool");
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 1);
	cr_expect(!exists(PFX "mix.ctl"));
	cr_expect(exists(PFX "mix.pool"), "another uid's pool removed");
}

Test(sweep, keeps_directory_when_name_matches)
{
	struct kvr_sweep_report r;

	cr_assert_eq(mkdir(P(PFX "d.ctl"), 0700), 0);
	cr_assert_eq(mkdir(P(PFX "d2.pool"), 0700), 0);
	cr_assert_eq(mkfifo(P(PFX "f.ctl"), 0600), 0);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists(PFX "d.ctl"));
	cr_expect(exists(PFX "d2.pool"));
	cr_expect(exists(PFX "f.ctl"));
	cr_expect_eq(r.skipped, 3u, "skipped %u", r.skipped);
}

Test(sweep, removes_pool_when_ctl_missing)
{
	struct kvr_sweep_report r;

	write_file(PFX "orphan.pool", 65536);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 1);
	cr_expect(!exists(PFX "orphan.pool"));
	cr_expect(name_listed(&r, PFX "orphan.pool"));
}

Test(sweep, keeps_ctl_when_header_bad)
{
	struct kvr_sweep_report r;
	struct kvr_seg_hdr_shm h;
	uint64_t start;
	pid_t pid;
	int fd;

	dead_owner(&pid, &start);
	write_file(PFX "short.ctl", 100); /* smaller than a header */
	/* Full size, dead owner, but a foreign magic. */
	kvr_seg_hdr_format(&h, 1, 0, sizeof(h), "x", NULL);
	h.magic = 0xdeadbeefULL;
	h.creator_pid = pid;
	h.creator_start = start;
	fd = open(P(PFX "magic.ctl"), O_CREAT | O_EXCL | O_WRONLY, 0600);
	cr_assert_eq(write(fd, &h, sizeof(h)), (ssize_t)sizeof(h));
	close(fd);
	write_file(PFX "magic.pool", 4096);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists(PFX "short.ctl"));
	cr_expect(exists(PFX "magic.ctl"));
	cr_expect(exists(PFX "magic.pool"), "pool of a foreign .ctl removed");
	cr_expect_eq(r.bad_header, 2u);
	cr_expect_eq(r.nr_bad_names, 2u);
	cr_expect_str_eq(r.bad_names[0], PFX "magic.ctl");
	cr_expect_str_eq(r.bad_names[1], PFX "short.ctl");
}

Test(sweep, keeps_file_when_name_invalid)
{
	struct kvr_sweep_report r;

	write_file(PFX "a b.pool", 4096);  /* space: not a valid name */
	write_file(PFX "x..y.pool", 4096); /* ".." inside */
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists(PFX "a b.pool"));
	cr_expect(exists(PFX "x..y.pool"));
	cr_expect_eq(r.skipped, 2u);
}

Test(sweep, keeps_unpaired_name_when_not_ctl_or_pool)
{
	struct kvr_sweep_report r;

	write_file(PFX "notes", 10);
	write_file(PFX "x.sock", 10);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 0);
	cr_expect(exists(PFX "notes"));
	cr_expect(exists(PFX "x.sock"));
	cr_expect_eq(r.skipped, 2u);
}

Test(sweep, refuses_prefix_when_empty_or_invalid)
{
	struct kvr_sweep_report r;

	write_file(PFX "orphan.pool", 10);
	cr_expect_eq(kvr_seg_sweep(dir, "", &r), -EINVAL);
	cr_expect_eq(kvr_seg_sweep(dir, NULL, &r), -EINVAL);
	cr_expect_eq(kvr_seg_sweep(dir, "../", &r), -EINVAL);
	cr_expect(exists(PFX "orphan.pool"));
	cr_expect_eq(kvr_seg_sweep("/nonexistent-kvr-dir", PFX, &r), -ENOENT);
}

Test(sweep, counts_everything_when_directory_is_mixed)
{
	struct kvr_sweep_report r;
	uint64_t ds, ls;
	pid_t dp, lp;
	int rc;

	dead_owner(&dp, &ds);
	self_owner(&lp, &ls);
	for (int i = 0; i < 20; i++) {
		char n[64];

		snprintf(n, sizeof(n), PFX "dead%02d.ctl", i);
		write_ctl(n, dp, ds);
		snprintf(n, sizeof(n), PFX "dead%02d.pool", i);
		write_file(n, 4096);
	}
	write_live_ctl(PFX "live.ctl");
	rc = kvr_seg_sweep(dir, PFX, &r);
	cr_expect_eq(rc, 40);
	cr_expect_eq(r.removed, 40u);
	cr_expect_eq(r.nr_removed_names, (unsigned)KVR_SWEEP_MAX_NAMES);
	cr_expect_eq(r.kept_live, 1u);
	cr_expect(exists(PFX "live.ctl"));
}

/* ==== list ==== */

struct seen {
	int n;
	struct kvr_seg_info v[8];
};

static int collect_cb(void *arg, const struct kvr_seg_info *info)
{
	struct seen *s = arg;

	if (s->n < 8)
		s->v[s->n] = *info;
	s->n++;
	return 0;
}

static int stop_cb(void *arg, const struct kvr_seg_info *info)
{
	(void)info;
	(*(int *)arg)++;
	return -ECANCELED;
}

Test(sweep, list_reports_state_when_segments_mixed)
{
	struct seen s = {0};
	uint64_t ds, ls;
	pid_t dp, lp;
	int calls = 0;

	dead_owner(&dp, &ds);
	self_owner(&lp, &ls);
	write_live_ctl(PFX "a.ctl");
	write_file(PFX "a.pool", 8192);
	write_ctl(PFX "b.ctl", dp, ds);
	write_file(PFX "c.pool", 4096);
	cr_assert_eq(mkdir(P(PFX "d.ctl"), 0700), 0); /* not listed */
	write_file("zzz.pool", 10);		      /* not listed */

	cr_assert_eq(kvr_seg_list(dir, PFX, collect_cb, &s), 4);
	cr_assert_eq(s.n, 4);
	cr_expect_str_eq(s.v[0].name, PFX "a.ctl");
	cr_expect_eq(s.v[0].role, KVR_SEG_ROLE_CTL);
	cr_expect_eq(s.v[0].state, KVR_SEG_STATE_LIVE);
	cr_expect(s.v[0].has_hdr && s.v[0].ready);
	cr_expect_eq(s.v[0].owner_pid, (int32_t)lp);
	cr_expect_eq(s.v[0].abi, KVR_ABI);
	cr_expect_eq(s.v[0].bytes, 256u);
	cr_expect_eq(s.v[0].mode, 0600u);
	cr_expect_str_eq(s.v[1].name, PFX "a.pool");
	cr_expect_eq(s.v[1].role, KVR_SEG_ROLE_POOL);
	cr_expect_eq(s.v[1].state, KVR_SEG_STATE_LIVE);
	cr_expect_eq(s.v[1].owner_pid, (int32_t)lp);
	cr_expect_eq(s.v[1].bytes, 8192u);
	cr_expect_str_eq(s.v[2].name, PFX "b.ctl");
	cr_expect_eq(s.v[2].state, KVR_SEG_STATE_STALE);
	cr_expect_str_eq(s.v[3].name, PFX "c.pool");
	cr_expect_eq(s.v[3].state, KVR_SEG_STATE_ORPHAN);
	/* Listing changed nothing. */
	cr_expect(exists(PFX "b.ctl") && exists(PFX "c.pool"));
	/* A callback can stop the walk with its own code. */
	cr_expect_eq(kvr_seg_list(dir, PFX, stop_cb, &calls), -ECANCELED);
	cr_expect_eq(calls, 1);
	cr_expect_eq(kvr_seg_list(dir, "", collect_cb, &s), -EINVAL);
}

/*
 * A worker wrote a dead pid into the header's creator pid, and a
 * second kvringd with the same --name swept the live server's segments.
 * The lock decides now: a published header naming a dead creator is kept
 * while its lock is held, and one naming a live creator is stale without
 * it (the pid is worker-writable). An unpublished header (a server between
 * create and lock) still goes by its creator.
 */
Test(sweep, lock_decides_liveness_not_the_forgeable_pid)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	struct kvr_sweep_report r;
	struct kvr_seg_hdr_shm h;
	uint64_t ds, ls;
	pid_t dp, lp;
	int fd;

	dead_owner(&dp, &ds);
	self_owner(&lp, &ls);
	/* Live server, pid forged dead: kept. */
	write_ctl(PFX "forged.ctl", dp, ds);
	write_file(PFX "forged.pool", 8192);
	fd = open(P(PFX "forged.ctl"), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &fl), 0);
	live_fds[nlive++] = fd;
	/* Dead server, pid forged live (or reused): removed. */
	write_ctl(PFX "claim.ctl", lp, ls);
	/* Not yet published, creator alive: kept. */
	kvr_seg_hdr_format(&h, 1, 0, sizeof(h), PFX "young.ctl", NULL);
	h.creator_pid = (int32_t)lp;
	h.creator_start = ls;
	fd = open(P(PFX "young.ctl"), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
		  0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, &h, sizeof(h)), (ssize_t)sizeof(h));
	close(fd);
	cr_expect_eq(kvr_seg_sweep(dir, PFX, &r), 1);
	cr_expect(exists(PFX "forged.ctl"), "a live server's ctl was swept");
	cr_expect(exists(PFX "forged.pool"), "a live server's pool was swept");
	cr_expect(!exists(PFX "claim.ctl"), "an unlocked ctl was kept");
	cr_expect(exists(PFX "young.ctl"), "a ctl being created was swept");
	cr_expect_eq(r.kept_live, 3u, "kept %u", r.kept_live);
}

/* The creator's own lock, from kvr_seg_create_shm(), and its release. */
Test(sweep, created_segment_is_locked_until_destroyed)
{
	struct kvr_seg s;
	int fd, rc;

	cr_assert_eq(kvr_seg_create_shm(dir, PFX "own.ctl", 8192, 0, (gid_t)-1,
					&s, NULL),
		     0);
	fd = open(P(PFX "own.ctl"), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	rc = kvr_seg_live_locked(fd);
	cr_expect_eq(rc, 1, "created segment not locked: %d", rc);
	/* The fd we would pass to a worker cannot unlock it. */
	{
		struct flock un = {.l_type = F_UNLCK, .l_whence = SEEK_SET};

		(void)fcntl(kvr_seg_fd(&s), F_OFD_SETLK, &un);
		cr_expect_eq(kvr_seg_live_locked(fd), 1,
			     "the shared fd dropped the lock");
	}
	kvr_seg_destroy(&s);
	cr_expect(!exists(PFX "own.ctl"));
	cr_expect_eq(kvr_seg_live_locked(fd), 0);
	close(fd);
}

/*
 * When the first server exited, it unlinked a second server's
 * files by name. A server removes a name only while it is still the
 * inode it created.
 */
Test(sweep, destroy_leaves_a_name_that_is_someone_elses_now)
{
	struct kvr_seg s;

	cr_assert_eq(kvr_seg_create_shm(dir, PFX "taken.ctl", 8192, 0,
					(gid_t)-1, &s, NULL),
		     0);
	/* Another server's file under the same name. */
	cr_assert_eq(unlink(P(PFX "taken.ctl")), 0);
	write_file(PFX "taken.ctl", 4096);
	kvr_seg_destroy(&s);
	cr_expect(exists(PFX "taken.ctl"), "another server's file was removed");
}
