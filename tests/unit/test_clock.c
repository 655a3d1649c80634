/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for <kvring/clock.h>: the monotonic clock is the kernel's
 * CLOCK_MONOTONIC in ns (so stamps written by one process are comparable
 * in another), it never goes backwards, it advances by at least a slept
 * interval, and the wall clock is CLOCK_REALTIME. kvr_clock_relax() has no
 * observable result beyond returning; it is exercised by the spin loops.
 */
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/clock.h>

TestSuite(clock, .timeout = 10);

static uint64_t ts_ns(clockid_t clk)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(clk, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

Test(clock, now_ns_lies_between_two_clock_monotonic_reads)
{
	uint64_t a = ts_ns(CLOCK_MONOTONIC);
	uint64_t n = kvr_clock_now_ns();
	uint64_t b = ts_ns(CLOCK_MONOTONIC);

	cr_expect(a <= n && n <= b,
		  "CLOCK_MONOTONIC %llu, then now_ns %llu, "
		  "then CLOCK_MONOTONIC %llu",
		  (unsigned long long)a, (unsigned long long)n,
		  (unsigned long long)b);
}

Test(clock, wall_ns_lies_between_two_clock_realtime_reads)
{
	uint64_t a = ts_ns(CLOCK_REALTIME);
	uint64_t n = kvr_clock_wall_ns();
	uint64_t b = ts_ns(CLOCK_REALTIME);

	cr_expect(a <= n && n <= b,
		  "CLOCK_REALTIME %llu, then wall_ns %llu, then %llu",
		  (unsigned long long)a, (unsigned long long)n,
		  (unsigned long long)b);
}

Test(clock, now_ns_never_goes_backwards_when_read_in_a_tight_loop)
{
	uint64_t prev = kvr_clock_now_ns();

	for (int i = 0; i < 100000; i++) {
		uint64_t t = kvr_clock_now_ns();

		cr_assert_geq(t, prev, "read %d: %llu after %llu", i,
			      (unsigned long long)t, (unsigned long long)prev);
		prev = t;
		kvr_clock_relax();
	}
}

Test(clock, now_ns_advances_at_least_the_slept_time_when_sleeping)
{
	struct timespec d = {.tv_sec = 0, .tv_nsec = 20000000};
	uint64_t t0 = kvr_clock_now_ns(), dt;

	cr_assert_eq(nanosleep(&d, NULL), 0);
	dt = kvr_clock_now_ns() - t0;
	/* A lower bound only: nanosleep never returns early, however busy
	 * the machine is; how late it returns is not this test's business. */
	cr_expect_geq(dt, 20000000u, "slept 20 ms, clock moved %llu ns",
		      (unsigned long long)dt);
}

/* The property the server's heartbeat relies on: a stamp taken in another
 * process falls between this process's readings before and after it. */
Test(clock, now_ns_orders_with_another_process_when_stamped_there)
{
	int fds[2], st = 0;
	uint64_t before, after, child = 0;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	before = kvr_clock_now_ns();
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		uint64_t t = kvr_clock_now_ns();

		_exit(write(fds[1], &t, sizeof(t)) == sizeof(t) ? 0 : 1);
	}
	cr_assert_eq(read(fds[0], &child, sizeof(child)), sizeof(child));
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	after = kvr_clock_now_ns();
	cr_expect(before <= child && child <= after,
		  "parent %llu, child %llu, parent %llu",
		  (unsigned long long)before, (unsigned long long)child,
		  (unsigned long long)after);
	close(fds[0]);
	close(fds[1]);
}
