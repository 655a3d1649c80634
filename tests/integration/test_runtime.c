/* SPDX-License-Identifier: MIT */
/*
 * Description: names nobody else can squat. A real kvringd with
 * no --socket puts its socket and lock in a private runtime directory
 * ($XDG_RUNTIME_DIR/kvring here, made 0700) and refuses one that another
 * uid owns or others can write; a lock file squatted in /tmp no longer
 * keeps it from starting; and a /dev/shm segment name held by another uid
 * makes it fall back to unnamed segments, with a clear log line, instead
 * of refusing to start. Observed on main: any local user could keep
 * kvringd from starting by creating /dev/shm/<name>.ctl first or by
 * taking the flock on <socket>.lock in /tmp. The directory is checked on
 * a descriptor (a symlink planted or swapped in at its name gets
 * nothing), and the socket and lock are removed only while they are
 * still the server's files. The tests that need another uid need root
 * and are skipped otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_raw.h"
#include "t_server.h"

#define OTHER_UID 65534u

static struct kvrd srv;
static char xdg[64];

static void rm_rf(const char *path)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	(void)!system(cmd);
}

static void setup(void)
{
	t_server_init(&srv);
	snprintf(xdg, sizeof(xdg), "/tmp/kvr-rt-XXXXXX");
	cr_assert_not_null(mkdtemp(xdg));
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	unsetenv("KVRING_SOCKET");
}

static void teardown(void)
{
	t_server_down(&srv);
	unsetenv("XDG_RUNTIME_DIR");
	rm_rf(xdg);
}

TestSuite(runtime, .init = setup, .fini = teardown, .timeout = 60);

static bool log_says_ready(void *arg)
{
	return t_server_log_has(arg, "kvringd ready");
}

/* Whether directory @d has no entries (a missing one counts as empty). */
static bool dir_is_empty(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *de;
	bool empty = true;

	if (!dp)
		return true;
	while ((de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	closedir(dp);
	return empty;
}

/* Started, or exited (a zombie waiting for t_server_wait_exit). */
static bool log_says_ready_or_no(void *arg)
{
	const struct kvrd *t = arg;
	char path[64], buf[256], *rp;
	FILE *f;
	size_t n;

	if (t_server_log_has(t, "kvringd ready"))
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)t->pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] == 'Z';
}

/* kvringd with @extra after --name and a small pool, no --socket. */
static pid_t spawn_default(const char *const *extra)
{
	const char *argv[24] = {"kvringd",	"--name", srv.name,
				"--pool-size",	"16M",	  "--no-prefault",
				"--huge-pages", "off"};
	int n = 8;

	for (int i = 0; extra && extra[i] && n < 23; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	return t_server_spawn(&srv, argv);
}

/* A store and a byte-checked retrieve through the default socket. */
static void worker_round_trip(const char *sock)
{
	struct kvr_client_opts o = {0};
	struct kvr_key k = {0x1234, 0x5678};
	uint64_t sz = 8192;
	struct kvr_xfer x = {0};
	struct kvr_client *c;
	char err[256];

	o.socket_path = sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(kvr_prepare_store(c, &k, &sz, 1, &x), 0);
	cr_assert_eq(x.nslots, 1);
	memset(x.slots[0].ptr, 0x77, 8192);
	cr_assert_eq(kvr_commit_store(c, &x), 0);
	cr_assert_eq(kvr_prepare_retrieve(c, &k, 1, &x), 0);
	cr_assert_eq(x.nslots, 1);
	cr_expect_eq(((unsigned char *)x.slots[0].ptr)[8191], 0x77);
	cr_expect_eq(kvr_commit_retrieve(c, &x), 0);
	kvr_close(c);
}

Test(runtime, default_socket_and_lock_live_in_a_private_runtime_dir)
{
	char dir[128], sock[160], lock[170];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/kvring", xdg);
	snprintf(sock, sizeof(sock), "%s/kvringd.sock", dir);
	snprintf(lock, sizeof(lock), "%s.lock", sock);
	srv.pid = spawn_default(NULL);
	cr_assert(t_wait_until(log_says_ready, &srv, 10000), "not started");
	cr_assert_eq(lstat(dir, &st), 0);
	cr_expect(S_ISDIR(st.st_mode));
	cr_expect_eq(st.st_mode & 07777, 0700, "mode %o", st.st_mode & 07777);
	cr_expect_eq(st.st_uid, geteuid());
	cr_expect_eq(lstat(sock, &st), 0, "no socket at %s", sock);
	cr_expect_eq(lstat(lock, &st), 0, "no lock at %s", lock);
	/* A worker with no socket configured finds it. */
	worker_round_trip(NULL);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(runtime, runtime_dir_someone_else_owns_or_can_write_is_refused)
{
	char dir[128], msg[256];
	int st;

	snprintf(dir, sizeof(dir), "%s/kvring", xdg);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(chmod(dir, 0777), 0);
	srv.pid = spawn_default(NULL);
	st = t_server_wait_exit(srv.pid, t_timeout_ms(10000));
	srv.pid = 0;
	cr_expect_eq(st, 1, "started in a world-writable runtime dir: %d", st);
	cr_expect(t_server_log_has(&srv, "writable by nobody else"));
	/* The sentence names the path, what was found, what to do. */
	snprintf(msg, sizeof(msg),
		 "runtime directory %s is owned by uid %u with mode "
		 "0777",
		 dir, (unsigned)geteuid());
	cr_expect(t_server_log_has(&srv, msg), "log lacks \"%s\"", msg);
	cr_expect(t_server_log_has(&srv, "remove it, or pick a "
					 "--socket"));
	if (geteuid() != 0)
		return;
	cr_assert_eq(chmod(dir, 0700), 0);
	cr_assert_eq(chown(dir, OTHER_UID, OTHER_UID), 0);
	srv.pid = spawn_default(NULL);
	st = t_server_wait_exit(srv.pid, t_timeout_ms(10000));
	srv.pid = 0;
	cr_expect_eq(st, 1, "started in another uid's runtime dir: %d", st);
	cr_expect(t_server_log_has(&srv, "owned by uid 65534 with mode 0700"));
}

/*
 * A symlink planted where the runtime directory goes
 * (pointing at a directory the planter controls) is refused, and the
 * sentence names the path, what is there (owner, mode) and what to do.
 * Nothing is created in the symlink's target.
 */
Test(runtime,
     symlink_in_place_of_the_runtime_dir_is_refused_with_owner_and_mode)
{
	char dir[128], evil[128], msg[256];
	struct stat st;
	int rc;

	snprintf(dir, sizeof(dir), "%s/kvring", xdg);
	snprintf(evil, sizeof(evil), "%s/evil", xdg);
	cr_assert_eq(mkdir(evil, 0700), 0);
	cr_assert_eq(symlink(evil, dir), 0);
	cr_assert_eq(lstat(dir, &st), 0);
	srv.pid = spawn_default(NULL);
	rc = t_server_wait_exit(srv.pid, t_timeout_ms(10000));
	srv.pid = 0;
	cr_expect_eq(rc, 1, "started through a symlinked runtime dir: %d", rc);
	snprintf(msg, sizeof(msg),
		 "runtime directory %s is a symlink owned by uid %u with mode "
		 "%04o",
		 dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	cr_expect(t_server_log_has(&srv, msg), "log lacks \"%s\"", msg);
	cr_expect(t_server_log_has(&srv, "remove it"));
	cr_expect_eq(dir_is_empty(evil), true, "%s got files", evil);
}

/*
 * The check-then-use race: a process swaps the runtime
 * directory with a symlink to its own directory, again and again, while
 * kvringd starts. kvringd checked the directory by path and then created
 * its lock and socket by path, so a swap between the two put them in the
 * swapper's directory. Now everything goes through the descriptor it
 * checked: it either refuses the symlink or works in the real directory,
 * and the swapper's directory stays empty.
 */
Test(runtime, runtime_dir_swapped_for_a_symlink_during_start_gets_nothing)
{
	char dir[128], evil[128], link[128];
	int ready = 0, refused = 0;
	pid_t swapper;

	snprintf(dir, sizeof(dir), "%s/kvring", xdg);
	snprintf(evil, sizeof(evil), "%s/evil", xdg);
	snprintf(link, sizeof(link), "%s/kvring.link", xdg);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(mkdir(evil, 0700), 0);
	cr_assert_eq(symlink(evil, link), 0);
	fflush(NULL);
	swapper = fork();
	cr_assert_geq(swapper, 0);
	if (swapper == 0) {
		for (;;)
			(void)renameat2(AT_FDCWD, dir, AT_FDCWD, link,
					RENAME_EXCHANGE);
	}
	for (int i = 0; i < 12 && dir_is_empty(evil); i++) {
		int rc;

		(void)!truncate(srv.log_path, 0);
		srv.pid = spawn_default(NULL);
		if (t_wait_until(log_says_ready_or_no, &srv, 10000) &&
		    t_server_log_has(&srv, "kvringd ready")) {
			ready++;
			rc = t_server_stop(&srv);
		} else {
			refused++;
			rc = t_server_wait_exit(srv.pid, t_timeout_ms(10000));
		}
		srv.pid = 0;
		(void)rc;
	}
	kill(swapper, SIGKILL);
	waitpid(swapper, NULL, 0);
	cr_expect_eq(dir_is_empty(evil), true,
		     "kvringd created files in the swapped-in directory %s "
		     "(%d ready, %d refused)",
		     evil, ready, refused);
	cr_log_info("%d starts ready, %d refused", ready, refused);
}

/*
 * Same-inode unlinks for the socket and the lock: files
 * that replaced them while the server ran are left alone when it stops.
 */
Test(runtime, stopping_server_leaves_files_that_replaced_its_socket_and_lock)
{
	char dir[128], sock[160], lock[170], tmp[180];
	struct stat a, b, st;
	int fd;

	snprintf(dir, sizeof(dir), "%s/kvring", xdg);
	snprintf(sock, sizeof(sock), "%s/kvringd.sock", dir);
	snprintf(lock, sizeof(lock), "%s.lock", sock);
	srv.pid = spawn_default(NULL);
	cr_assert(t_wait_until(log_says_ready, &srv, 10000), "not started");
	snprintf(tmp, sizeof(tmp), "%s/other", dir);
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &a), 0);
	close(fd);
	cr_assert_eq(rename(tmp, sock), 0);
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &b), 0);
	close(fd);
	cr_assert_eq(rename(tmp, lock), 0);
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect_eq(lstat(sock, &st), 0, "the replacing socket file is gone");
	cr_expect_eq(st.st_ino, a.st_ino);
	cr_expect_eq(lstat(lock, &st), 0, "the replacing lock file is gone");
	cr_expect_eq(st.st_ino, b.st_ino);
}

/*
 * The /tmp attack of the old default (/tmp/kvring-<uid>.sock and its
 * lock): a server running as OTHER_UID, with no runtime directory of its
 * own, while someone holds the flock on /tmp/kvring-65534.sock.lock.
 */
Test(runtime, squatted_lock_in_tmp_does_not_keep_the_server_down)
{
	const char *old_lock = "/tmp/kvring-65534.sock.lock";
	const char *argv[] = {t_server_bin(), "--name", srv.name,
			      "--pool-size",  "16M",	"--no-prefault",
			      "--huge-pages", "off",	NULL};
	int fd, st;

	if (geteuid() != 0)
		cr_skip("needs root to run kvringd as another uid");
	if (access("/tmp/kvring-65534", F_OK) == 0)
		cr_skip("/tmp/kvring-65534 exists (a uid 65534 server?)");
	fd = open(old_lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(flock(fd, LOCK_EX | LOCK_NB), 0, "lock %s", old_lock);
	unsetenv("XDG_RUNTIME_DIR"); /* kvringd then takes the /tmp path */
	t_server_spawn_as(&srv, argv, OTHER_UID);
	cr_expect(t_wait_until(log_says_ready, &srv, 10000),
		  "kvringd as uid %u did not start beside a squatted lock",
		  OTHER_UID);
	st = t_server_stop(&srv);
	cr_expect_eq(st, 0, "exit %d", st);
	close(fd);
	unlink(old_lock);
	rm_rf("/tmp/kvring-65534");
}

/* Another uid created our segment names under /dev/shm first. */
Test(runtime, squatted_segment_name_falls_back_to_unnamed_segments)
{
	char ctl[160], pool[160];
	struct stat before, after;
	int fd, st;

	if (geteuid() != 0)
		cr_skip("needs root to create a file as another uid");
	snprintf(ctl, sizeof(ctl), "/dev/shm/%s.ctl", srv.name);
	snprintf(pool, sizeof(pool), "/dev/shm/%s.pool", srv.name);
	fd = open(ctl, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchown(fd, OTHER_UID, OTHER_UID), 0);
	close(fd);
	cr_assert_eq(stat(ctl, &before), 0);
	{
		const char *extra[] = {"--socket", srv.sock, NULL};

		srv.pid = spawn_default(extra);
	}
	cr_expect(t_wait_until(log_says_ready, &srv, 10000),
		  "kvringd did not start beside a squatted segment name");
	cr_expect(t_server_log_has(&srv, "is held by uid 65534"),
		  "no clear line about the squatted name");
	if (srv.pid > 0 && t_server_log_has(&srv, "kvringd ready"))
		worker_round_trip(srv.sock);
	st = t_server_stop(&srv);
	cr_expect_eq(st, 0, "exit %d", st);
	/* The squatter's file is not ours: left as it was. */
	cr_assert_eq(stat(ctl, &after), 0, "the squatter's file was removed");
	cr_expect_eq(before.st_ino, after.st_ino);
	cr_expect_neq(access(pool, F_OK), 0, "a named pool was left behind");
	unlink(ctl);
}
