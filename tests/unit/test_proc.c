/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for lib/proc.c: /proc/PID/stat parsing (command names with
 * spaces and ')'), start-time identity against pid reuse, and liveness of
 * live, zombie and reaped processes.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/proc.h>

#include "t_server.h"

TestSuite(proc, .timeout = 10);

/* A stat line with the given comm, state S and start time 987654. */
static void make_line(char *buf, size_t n, const char *comm)
{
	snprintf(buf, n,
		 "4242 (%s) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 "
		 "20 0 1 0 987654 10000000 300 18446744073709551615 1 1 0 "
		 "0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
		 comm);
}

Test(proc, parses_start_time_when_comm_is_plain)
{
	char line[512], st = 0;
	uint64_t start = 0;

	make_line(line, sizeof(line), "kvringd");
	cr_assert_eq(kvr__proc_parse_stat(line, &st, &start), 0);
	cr_expect_eq(st, 'S');
	cr_expect_eq(start, 987654u, "start %llu", (unsigned long long)start);
}

Test(proc, parses_start_time_when_comm_has_spaces_and_parens)
{
	static const char *const comms[] = {"a b", "x) (y", ") S 1 2 3", "((",
					    "))"};
	char line[512], st = 0;
	uint64_t start = 0;

	for (size_t i = 0; i < sizeof(comms) / sizeof(comms[0]); i++) {
		make_line(line, sizeof(line), comms[i]);
		start = 0;
		cr_expect_eq(kvr__proc_parse_stat(line, &st, &start), 0,
			     "comm \"%s\"", comms[i]);
		cr_expect_eq(start, 987654u, "comm \"%s\": start %llu",
			     comms[i], (unsigned long long)start);
	}
}

Test(proc, rejects_line_when_malformed)
{
	static const char *const bad[] = {
	    "",
	    "4242 kvringd S 1",
	    "4242 (x) S 1 2 3",
	    "4242 (x)",
	    "4242 (x)  S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
	    "4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -5",
	    "4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 9z",
	};
	uint64_t start = 777;
	char st = '?';

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(kvr__proc_parse_stat(bad[i], &st, &start),
			     -EBADMSG, "line \"%s\"", bad[i]);
		cr_expect_eq(start, 777u, "output changed on failure");
	}
}

Test(proc, reports_self_alive_when_start_time_matches)
{
	uint64_t start = 0;

	cr_assert_eq(kvr_proc_start_time(getpid(), &start), 0);
	cr_expect_gt(start, 0u);
	cr_expect(kvr_proc_alive(getpid(), start));
	cr_expect(kvr_proc_alive(getpid(), 0), "0 means unknown start");
}

Test(proc, reports_dead_when_start_time_differs)
{
	uint64_t start = 0;

	/* Our pid with another start time: a reused pid. */
	cr_assert_eq(kvr_proc_start_time(getpid(), &start), 0);
	cr_expect(!kvr_proc_alive(getpid(), start + 1));
}

Test(proc, rejects_pid_when_not_positive)
{
	uint64_t start = 5;

	cr_expect_eq(kvr_proc_start_time(0, &start), -EINVAL);
	cr_expect_eq(kvr_proc_start_time(-1, &start), -EINVAL);
	cr_expect_eq(start, 5u);
	cr_expect(!kvr_proc_alive(0, 0));
	cr_expect(!kvr_proc_alive(-1, 0));
	cr_expect_eq(kvr_proc_state(0, &(char){'x'}), -EINVAL);
}

/* A forked child renames itself to @arg (its comm). */
static void rename_self(void *arg)
{
	prctl(PR_SET_NAME, (const char *)arg, 0, 0, 0);
}

/* Fork a child that renames itself to comm and waits for SIGKILL. */
static pid_t spawn_named(const char *comm)
{
	pid_t pid = t_fork_ready(rename_self, (void *)comm);

	cr_assert_gt(pid, 0, "fork a child named \"%s\"", comm);
	return pid;
}

Test(proc, reads_state_t_when_child_is_stopped)
{
	pid_t pid = spawn_named("st (x) y");
	char st = 0;

	cr_assert_eq(kvr_proc_state(pid, &st), 0);
	/* Running to its pause() or already in it: anything but stopped. */
	cr_expect(st == 'R' || st == 'S', "child not stopped yet reads '%c'",
		  st);
	cr_assert_eq(kill(pid, SIGSTOP), 0);
	/* The stop lands asynchronously; waitpid(WUNTRACED) says it has. */
	cr_assert_eq(waitpid(pid, NULL, WUNTRACED), pid);
	cr_assert_eq(kvr_proc_state(pid, &st), 0);
	cr_expect_eq(st, 'T', "stopped child reads '%c'", st);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	st = 'x';
	cr_expect_eq(kvr_proc_state(pid, &st), -ENOENT);
	cr_expect_eq(st, 'x', "untouched on failure");
}

Test(proc, reads_start_time_when_real_comm_has_parens)
{
	pid_t pid = spawn_named("x) (y z) S 9");
	uint64_t start = 0, self = 0;

	cr_expect_eq(kvr_proc_start_time(pid, &start), 0);
	cr_expect_eq(kvr_proc_start_time(getpid(), &self), 0);
	/* The child started after us: never an earlier tick. */
	cr_expect_geq(start, self, "child %llu, parent %llu",
		      (unsigned long long)start, (unsigned long long)self);
	cr_expect(kvr_proc_alive(pid, start));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

Test(proc, reports_dead_when_child_is_zombie_or_reaped)
{
	pid_t pid = spawn_named("victim");
	uint64_t start = 0;

	cr_assert_eq(kvr_proc_start_time(pid, &start), 0);
	kill(pid, SIGKILL);
	/* Wait until it is a zombie without reaping it. */
	siginfo_t si;
	cr_assert_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	cr_expect(!kvr_proc_alive(pid, start), "zombie counted as alive");
	cr_expect(!kvr_proc_alive(pid, 0), "zombie counted as alive");
	waitpid(pid, NULL, 0);
	cr_expect(!kvr_proc_alive(pid, start), "reaped child alive");
	cr_expect_eq(kvr_proc_start_time(pid, &start), -ENOENT);
}
