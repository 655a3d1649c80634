/* SPDX-License-Identifier: MIT */
/*
 * test_server_start.c - what kvringd leaves at its socket path: nothing
 * after a clean stop, nothing after a start that failed once it held the
 * lock (the issue: <socket>.lock stayed behind), and a lock file left by a
 * SIGKILLed server is taken over by the next one.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
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
	 * the control segment were made. */
	const char *argv[] = {"kvringd", "--socket",	 srv.sock,
			      "--name",	 srv.name,	 "--pool-size",
			      "64T",	 "--allow-root", "--no-prefault",
			      NULL};
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
