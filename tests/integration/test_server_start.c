/* SPDX-License-Identifier: MIT */
/*
 * test_server_start.c - what kvringd leaves at its socket path: nothing
 * after a clean stop, nothing after a start that failed once it held the
 * lock (the issue: <socket>.lock stayed behind), and a lock file left by a
 * SIGKILLed server is taken over by the next one. And its open-file limit:
 * raised as --max-workers needs, or a clear refusal. And its exit when no
 * memory is left for the shutdown self-check's object walk.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "t_server.h"

static struct kvrd srv;

static void setup(void)
{
	t_server_init(&srv);
}

static void teardown(void)
{
	t_server_cleanup(&srv);
}

TestSuite(server_start, .init = setup, .fini = teardown, .timeout = 60);

static bool exists(const char *fmt, const char *a)
{
	char p[256];

	snprintf(p, sizeof(p), fmt, a);
	return access(p, F_OK) == 0;
}

Test(server_start, leaves_nothing_when_stopped_cleanly)
{
	const char *args[] = {"--allow-root", NULL};

	t_server_start(&srv, args);
	cr_assert(exists("%s.lock", srv.sock));
	cr_assert_eq(t_server_stop(&srv), 0);
	cr_expect(!exists("%s", srv.sock), "socket left behind");
	cr_expect(!exists("%s.lock", srv.sock), "lock file left behind");
	cr_expect(!exists("/dev/shm/%s.ctl", srv.name), "ctl left behind");
	cr_expect(!exists("/dev/shm/%s.pool", srv.name), "pool left behind");
}

Test(server_start, removes_what_it_created_when_the_start_fails)
{
	/* 64 TiB cannot be reserved: the start fails after the lock and
	 * the control segment were made. (2 MiB slots: at the default
	 * 4 KiB, 64 TiB is more slots than the config accepts.) */
	const char *argv[] = {"kvringd",      "--socket",      srv.sock,
			      "--name",	      srv.name,	       "--pool-size",
			      "64T",	      "--align",       "2M",
			      "--allow-root", "--no-prefault", NULL};
	pid_t pid = t_server_spawn(&srv, argv);

	cr_expect_eq(t_server_wait_exit(pid, t_timeout_ms(20000)), 1);
	cr_expect(t_server_log_has(&srv, "no pool backend works"),
		  "the start did not fail where the test expects");
	cr_expect(!exists("%s.lock", srv.sock), "lock file left behind");
	cr_expect(!exists("%s", srv.sock), "socket left behind");
	cr_expect(!exists("/dev/shm/%s.ctl", srv.name), "ctl left behind");
	cr_expect(!exists("/dev/shm/%s.pool", srv.name), "pool left behind");
}

Test(server_start, takes_over_the_lock_file_when_its_holder_was_killed)
{
	const char *args[] = {"--allow-root", NULL};

	t_server_start(&srv, args);
	t_server_kill(&srv);
	cr_assert(exists("%s.lock", srv.sock), "SIGKILL leaves the lock");
	/* The socket may outlive the process a moment (io_uring). */
	usleep(200000);
	t_server_start(&srv, args);
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect(!exists("%s.lock", srv.sock), "lock file left behind");
}

Test(server_start, refuses_and_keeps_the_live_lock_when_a_second_starts)
{
	const char *args[] = {"--allow-root", NULL};
	const char *argv[] = {"kvringd",
			      "--socket",
			      srv.sock,
			      "--name",
			      "kvring-tsecond",
			      "--allow-root",
			      "--no-prefault",
			      "--pool-size",
			      "64M",
			      NULL};
	pid_t pid;

	t_server_start(&srv, args);
	pid = t_server_spawn(&srv, argv);
	cr_expect_eq(t_server_wait_exit(pid, t_timeout_ms(20000)), 1);
	/* The loser must not remove the winner's lock. */
	cr_expect(exists("%s.lock", srv.sock), "live server's lock removed");
	cr_expect_eq(t_server_stop(&srv), 0);
}

/* The soft open-file limit of process @pid, from /proc/<pid>/limits. */
/* The first number after @field at the start of a line of
 * /proc/@pid/@file, or -1 when no line has it. */
static long long proc_value(pid_t pid, const char *file, const char *field)
{
	char path[64], line[256];
	size_t len = strlen(field);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	f = fopen(path, "r");
	cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, len) == 0)
			sscanf(line + len, "%lld", &v);
	fclose(f);
	return v;
}

static long long soft_nofile(pid_t pid)
{
	return proc_value(pid, "limits", "Max open files");
}

/*
 * Each channel holds five descriptors in kvringd (socket, pidfd, two
 * eventfds, its block memfd), so --max-workers 64 needs about 450. Under
 * a soft limit of 64 with room in the hard limit, kvringd raises the soft
 * limit itself and says so once; on main it kept 64 (and a later connect
 * would have failed with EMFILE).
 */
Test(server_start, raises_its_open_file_limit_when_max_workers_needs_it)
{
	const char *args[] = {"--allow-root", "--max-workers", "64", NULL};
	struct rlimit old, low;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 1024)
		cr_skip("the hard open-file limit here is %llu",
			(unsigned long long)old.rlim_max);
	low = old;
	low.rlim_cur = 64;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0, "%s", strerror(errno));
	t_server_start(&srv, args);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	cr_expect_geq(soft_nofile(srv.pid), 64 * 5,
		      "kvringd kept a soft limit of %lld",
		      soft_nofile(srv.pid));
	cr_expect(t_server_log_has(&srv, "open-file limit (RLIMIT_NOFILE) "
					 "raised from 64"),
		  "kvringd did not say it raised the limit");
	cr_expect_eq(t_server_stop(&srv), 0);
}

/*
 * A hard limit of 64 cannot cover --max-workers 64: kvringd refuses to
 * start, with a sentence naming the flag and `ulimit -n`, and leaves
 * nothing behind. On main it started and ran out of descriptors later.
 */
Test(server_start, refuses_to_start_when_the_hard_open_file_limit_is_too_low)
{
	const char *argv[] = {"kvringd",       "--socket",     srv.sock,
			      "--name",	       srv.name,       "--pool-size",
			      "16M",	       "--allow-root", "--no-prefault",
			      "--max-workers", "64",	       NULL};
	struct rlimit lim = {64, 64};
	pid_t pid;

	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0, "%s", strerror(errno));
	pid = t_server_spawn(&srv, argv);
	cr_expect_eq(t_server_wait_exit(pid, t_timeout_ms(20000)), 1,
		     "kvringd did not refuse to start");
	cr_expect(t_server_log_has(&srv, "--max-workers 64 needs about"),
		  "the refusal does not name --max-workers");
	cr_expect(t_server_log_has(&srv, "ulimit -n"),
		  "the refusal does not name ulimit -n");
	cr_expect(!exists("%s", srv.sock), "socket left behind");
	cr_expect(!exists("%s.lock", srv.sock), "lock file left behind");
	cr_expect(!exists("/dev/shm/%s.ctl", srv.name), "ctl left behind");
}

/* The address space @pid maps (VmSize), in bytes. */
static unsigned long long vm_bytes(pid_t pid)
{
	long long kib = proc_value(pid, "status", "VmSize:");

	cr_assert_gt(kib, 0, "no VmSize in /proc/%d/status", (int)pid);
	return (unsigned long long)kib << 10;
}

/*
 * The self-check's object walk needs scratch in proportion to the object
 * table (12 bytes per object of capacity: 48 MB at --objects 4M), taken at
 * exit. With an address-space limit 2 MiB above what kvringd maps, that
 * scratch does not fit: kvringd must say the walk was skipped and why,
 * still check its counters, and exit 0, not report a kvringd bug (exit
 * status KVR_EXIT_SELFCHECK) with an empty reason.
 */
Test(server_start, skips_the_object_walk_at_exit_when_no_memory_is_left_for_it)
{
	const char *args[] = {"--pool-size", "1G",	"--align", "256",
			      "--objects",   "4000000", NULL};
	const char *asan = getenv("ASAN_OPTIONS");
	char opts[512];
	struct rlimit lim;

	/* Under ASan a malloc that fails aborts by default; kvringd's own
	 * answer to it is what is tested. (Read by the child at its start;
	 * Criterion runs each test in a process of its own.) */
	snprintf(opts, sizeof(opts), "%s%sallocator_may_return_null=1",
		 asan ? asan : "", asan && *asan ? ":" : "");
	cr_assert_eq(setenv("ASAN_OPTIONS", opts, 1), 0);
	t_server_start(&srv, args);
	lim.rlim_cur = lim.rlim_max = vm_bytes(srv.pid) + (2u << 20);
	cr_assert_eq(prlimit(srv.pid, RLIMIT_AS, &lim, NULL), 0, "prlimit: %s",
		     strerror(errno));
	cr_expect_eq(t_server_stop(&srv), 0, "exit status");
	cr_expect(t_server_log_has(&srv, "the object walk is skipped, no "
					 "memory for the audit's scratch: "),
		  "no warning naming the skipped walk and its cause");
	cr_expect(t_server_log_has(&srv, "self-check at shutdown: ok"),
		  "the counters were not checked");
	cr_expect(!t_server_log_has(&srv, "store audit failed"),
		  "a missing scratch reported as a failed audit");
}
