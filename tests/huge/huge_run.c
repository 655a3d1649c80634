/* SPDX-License-Identifier: MIT */
/*
 * kvr-huge-run - run a test program with huge pages reserved and a private
 * hugetlbfs mount, and always give the host its old vm.nr_hugepages back.
 *
 *   kvr-huge-run [--pages N] -- PROGRAM [ARGS...]
 *
 * As root: takes an exclusive flock on /tmp/kvring-test-hugepages.lock (so
 * two suites on one host never interleave their save and restore), writes
 * the old value to a state file, raises nr_hugepages by N (default 64),
 * unshares its mount namespace and mounts a hugetlbfs on a fresh temporary
 * directory (visible to PROGRAM and its children only, gone with them),
 * runs PROGRAM with $KVR_TEST_HUGE_DIR set, then restores the old value
 * and removes the state file. The restore runs whatever PROGRAM does
 * (exit, crash, a signal to us is forwarded to it and waited for); if even
 * this runner is SIGKILLed, the next run finds the state file and restores
 * from it first.
 *
 * When the kernel refuses (not root, no hugetlb, or fewer pages granted
 * than asked), PROGRAM still runs, with $KVR_TEST_HUGE_SKIP saying why, so
 * its tests skip with that reason; the reason is printed here too. Exit
 * status: PROGRAM's, 77 (ctest's SKIP_RETURN_CODE) when it passed only
 * because everything skipped, or 1 if the restore failed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR_PATH	   "/proc/sys/vm/nr_hugepages"
#define LOCK_PATH  "/tmp/kvring-test-hugepages.lock"
#define STATE_PATH "/tmp/kvring-test-hugepages.saved"
#define PROG	   "kvr-huge-run"

static volatile sig_atomic_t child_pid;

static int read_ull(const char *path, unsigned long long *v)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%llu", v) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

static int write_ull(const char *path, unsigned long long v)
{
	char buf[32];
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_CREAT | O_TRUNC, 0600);
	int len = snprintf(buf, sizeof(buf), "%llu\n", v), rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)len) != len)
		rc = -errno ? -errno : -EIO;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* Free pages of the default size (HugePages_Free - HugePages_Rsvd). */
static unsigned long long free_pages(void)
{
	unsigned long long fr = 0, rs = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "HugePages_Free: %llu", &fr);
		sscanf(line, "HugePages_Rsvd: %llu", &rs);
	}
	fclose(f);
	return fr > rs ? fr - rs : 0;
}

/* Give nr_hugepages back the value in the state file, then drop it. */
static int restore_saved(void)
{
	unsigned long long old, now = 0;
	int rc;

	if (read_ull(STATE_PATH, &old) < 0)
		return 0; /* nothing saved: nothing to restore */
	/* A server that is still stopping holds its pages a moment: the
	 * kernel keeps pages in use, so retry for up to 5 s. */
	for (int tries = 0; tries < 50; tries++) {
		rc = write_ull(NR_PATH, old);
		if (rc == 0 && read_ull(NR_PATH, &now) == 0 && now != old)
			rc = -EBUSY; /* pages still in use */
		if (rc != -EBUSY)
			break;
		usleep(100000);
	}
	if (rc < 0) {
		fprintf(stderr,
			PROG ": restore " NR_PATH " to %llu: %s (now %llu); "
			     "run: echo %llu > " NR_PATH "\n",
			old, strerror(-rc), now, old);
		return rc;
	}
	unlink(STATE_PATH);
	fprintf(stderr, PROG ": restored " NR_PATH " to %llu\n", old);
	return 0;
}

/* Forward a signal to the program; we restore once it has gone. */
static void forward(int sig)
{
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
}

static int run(char **argv)
{
	struct sigaction sa;
	int st;
	pid_t pid;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror(PROG ": fork");
		return 1;
	}
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, PROG ": exec %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	child_pid = pid;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	child_pid = 0;
	if (WIFSIGNALED(st)) {
		fprintf(stderr, PROG ": %s killed by signal %d\n", argv[0],
			WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}

/* A private hugetlbfs mount on a fresh directory, limited to @pages (so
 * its statfs counts only what the tests put there); "" if impossible. */
static void mount_private(unsigned long long pages, char *dir, size_t n,
			  char *why, size_t wn)
{
	char tmpl[] = "/tmp/kvring-huge.XXXXXX", opts[64];

	dir[0] = '\0';
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		snprintf(why, wn, "unshare mount namespace: %s",
			 strerror(errno));
		return;
	}
	if (!mkdtemp(tmpl)) {
		snprintf(why, wn, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(opts, sizeof(opts), "mode=0700,nr_inodes=1024,size=%lluM",
		 pages * 2);
	if (mount("none", tmpl, "hugetlbfs", MS_NOSUID | MS_NODEV, opts) < 0) {
		snprintf(why, wn, "mount -t hugetlbfs %s: %s", tmpl,
			 strerror(errno));
		rmdir(tmpl);
		return;
	}
	snprintf(dir, n, "%s", tmpl);
}

int main(int argc, char **argv)
{
	unsigned long long pages = 64, old = 0, got;
	char dir[64] = "", why[256] = "";
	int i, lock = -1, rc, st;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--pages") == 0 && i + 1 < argc)
			pages = strtoull(argv[++i], NULL, 10);
		else {
			fprintf(stderr,
				"usage: " PROG " [--pages N] -- PROGRAM ...\n");
			return 2;
		}
	}
	if (i + 1 >= argc || pages == 0 || pages > 100000) {
		fprintf(stderr, "usage: " PROG " [--pages N] -- PROGRAM ...\n");
		return 2;
	}
	argv += i + 1;

	if (geteuid() != 0) {
		snprintf(why, sizeof(why), "not root: cannot write " NR_PATH);
	} else if ((lock = open(LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC,
				0600)) < 0 ||
		   flock(lock, LOCK_EX) < 0) {
		snprintf(why, sizeof(why), "lock %s: %s", LOCK_PATH,
			 strerror(errno));
	} else if (restore_saved() < 0) {
		snprintf(why, sizeof(why),
			 "a previous run's reservation could not be undone");
	} else if ((rc = read_ull(NR_PATH, &old)) < 0) {
		snprintf(why, sizeof(why), "read %s: %s (no hugetlb)", NR_PATH,
			 strerror(-rc));
	} else if ((rc = write_ull(STATE_PATH, old)) < 0) {
		snprintf(why, sizeof(why), "save state in %s: %s", STATE_PATH,
			 strerror(-rc));
	} else {
		/* From here on the state file promises a restore. */
		rc = write_ull(NR_PATH, old + pages);
		got = free_pages();
		if (rc < 0)
			snprintf(why, sizeof(why),
				 "the kernel refused %llu huge pages: %s",
				 old + pages, strerror(-rc));
		else if (got < pages)
			snprintf(why, sizeof(why),
				 "the kernel granted %llu free huge pages of "
				 "%llu asked (memory fragmented?)",
				 got, pages);
		else
			mount_private(pages, dir, sizeof(dir), why,
				      sizeof(why));
	}
	if (why[0]) {
		fprintf(stderr, PROG ": huge-page tests will SKIP: %s\n", why);
		setenv("KVR_TEST_HUGE_SKIP", why, 1);
	} else {
		fprintf(stderr,
			PROG ": reserved %llu huge pages (nr_hugepages %llu -> "
			     "%llu), hugetlbfs on %s\n",
			pages, old, old + pages, dir);
		setenv("KVR_TEST_HUGE_DIR", dir, 1);
	}
	st = run(argv);
	if (dir[0]) {
		umount2(dir, MNT_DETACH);
		rmdir(dir);
	}
	if (lock >= 0 && restore_saved() < 0)
		st = 1;
	if (lock >= 0)
		close(lock); /* releases the flock */
	/* Skipped is not passed: ctest shows it as "Not Run (skipped)". */
	if (why[0] && st == 0)
		return 77;
	return st;
}
