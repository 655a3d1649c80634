/* SPDX-License-Identifier: MIT */
/*
 * test_doorbell.c - unit tests for lib/doorbell.c (suite "bell") and
 * lib/uwait.c (suite "uwait"), in one process: counters and eventfd effects
 * of each handshake step, the poll(2) wait, and the io_uring waiter's
 * wake/timeout/re-arm/drain behaviour. Races between two sides are the
 * business of tests/stress/test_doorbell_2proc.c. No timing assertions:
 * timeouts are only checked for their return code.
 */
#include <kvring/doorbell.h>

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include "t_uwait.h"

/* ==== helpers ==== */

static struct kvr_bell_shm bell;
static int efd = -1;

static void bell_setup(void)
{
	memset(&bell, 0xa5, sizeof(bell));
	kvr_bell_init(&bell);
	cr_assert_eq(kvr_bell_open(&efd), 0);
}

static void bell_teardown(void)
{
	if (efd >= 0)
		close(efd);
	efd = -1;
}

/* Signal the eventfd as a producer would, without the flag protocol. */
static void ring_raw(int fd)
{
	uint64_t one = 1;

	cr_assert_eq(write(fd, &one, sizeof(one)), (ssize_t)sizeof(one),
		     "write eventfd %d: %s", fd, strerror(errno));
}

/* The eventfd counter, read (and so emptied); 0 if it was empty. */
static uint64_t take(int fd)
{
	uint64_t v = 0;
	ssize_t n = read(fd, &v, sizeof(v));

	if (n < 0) {
		cr_assert_eq(errno, EAGAIN, "read eventfd: %s",
			     strerror(errno));
		return 0;
	}
	cr_assert_eq(n, (ssize_t)sizeof(v));
	return v;
}

static struct kvr_bell_stats stats(void)
{
	struct kvr_bell_stats s;

	kvr_bell_stats(&bell, &s);
	return s;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* Deliver SIGALRM once after ms, with a handler and without SA_RESTART,
 * so a blocking call returns EINTR. */
static void alarm_in_ms(long ms)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	struct itimerval it = {
	    .it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
}

/* ==== bell: layout, open, init ==== */

TestSuite(bell, .init = bell_setup, .fini = bell_teardown, .timeout = 10);

Test(bell, init_zeroes_every_byte_when_formatting)
{
	const unsigned char *p = (const unsigned char *)&bell;

	for (size_t i = 0; i < sizeof(bell); i++)
		cr_expect_eq(p[i], 0, "byte %zu is 0x%02x", i, p[i]);
}

Test(bell, open_returns_nonblocking_cloexec_eventfd_when_called)
{
	int fl = fcntl(efd, F_GETFL);
	int fdfl = fcntl(efd, F_GETFD);
	char target[64] = {0};
	char path[64];

	cr_assert_geq(fl, 0);
	cr_expect(fl & O_NONBLOCK, "eventfd must be non-blocking");
	cr_expect(fdfl & FD_CLOEXEC, "eventfd must be close-on-exec");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", efd);
	if (readlink(path, target, sizeof(target) - 1) > 0)
		cr_expect_str_eq(target, "anon_inode:[eventfd]");
	cr_expect_eq(take(efd), 0, "a new eventfd starts empty");
}

Test(bell, open_returns_einval_when_out_is_null)
{
	cr_expect_eq(kvr_bell_open(NULL), -EINVAL);
}

/* ==== bell: producer side ==== */

Test(bell, notify_suppresses_write_when_consumer_awake)
{
	cr_expect_eq(kvr_bell_notify(&bell, efd), 0);
	cr_expect_eq(stats().suppressed, 1);
	cr_expect_eq(stats().rung, 0);
	cr_expect_eq(take(efd), 0, "no eventfd write may happen");
}

Test(bell, notify_writes_eventfd_when_consumer_sleeping)
{
	kvr_bell_prepare_sleep(&bell);
	cr_expect_eq(kvr_bell_notify(&bell, efd), 1);
	cr_expect_eq(stats().rung, 1);
	cr_expect_eq(stats().suppressed, 0);
	cr_expect_eq(kvr_bell_wait_fd(efd, 0), 0, "eventfd readable");
	cr_expect_eq(take(efd), 1);
}

Test(bell, notify_treats_any_nonzero_flag_as_sleeping_when_peer_writes_junk)
{
	atomic_store(&bell.sleeping, 0xdeadbeef);
	cr_expect_eq(kvr_bell_notify(&bell, efd), 1);
}

Test(bell, notify_counts_each_call_once_when_mixed)
{
	unsigned calls = 0, rung = 0;

	for (unsigned i = 0; i < 100; i++) {
		if (i % 3 == 0)
			kvr_bell_prepare_sleep(&bell);
		int rc = kvr_bell_notify(&bell, efd);

		cr_assert_geq(rc, 0);
		rung += (unsigned)rc;
		calls++;
		if (i % 3 == 0)
			kvr_bell_woken(&bell, efd);
	}
	cr_expect_eq(stats().rung + stats().suppressed, calls);
	cr_expect_eq(stats().rung, rung);
	cr_expect_eq(stats().rung, 34);
}

Test(bell, notify_returns_ebadf_and_counts_nothing_when_fd_bad)
{
	kvr_bell_prepare_sleep(&bell);
	cr_expect_eq(kvr_bell_notify(&bell, -1), -EBADF);
	cr_expect_eq(stats().rung, 0);
	cr_expect_eq(stats().suppressed, 0);
}

Test(bell, notify_reports_rung_when_eventfd_counter_is_full)
{
	uint64_t max = UINT64_MAX - 1; /* the largest value eventfd holds */

	cr_assert_eq(write(efd, &max, sizeof(max)), (ssize_t)sizeof(max));
	kvr_bell_prepare_sleep(&bell);
	cr_expect_eq(kvr_bell_notify(&bell, efd), 1,
		     "EAGAIN means already signalled, not an error");
	cr_expect_eq(stats().rung, 1);
}

/* ==== bell: consumer side ==== */

Test(bell, prepare_sleep_sets_flag_when_called)
{
	kvr_bell_prepare_sleep(&bell);
	cr_expect_eq(stats().sleeping, 1);
	cr_expect_eq(stats().sleeps, 0, "preparing is not sleeping");
}

Test(bell, cancel_sleep_clears_flag_and_counts_when_work_found)
{
	kvr_bell_prepare_sleep(&bell);
	kvr_bell_cancel_sleep(&bell);
	cr_expect_eq(stats().sleeping, 0);
	cr_expect_eq(stats().cancels, 1);
	cr_expect_eq(stats().sleeps, 0);
	cr_expect_eq(kvr_bell_notify(&bell, efd), 0, "awake again");
}

Test(bell, woken_clears_flag_and_drains_when_signalled)
{
	kvr_bell_prepare_sleep(&bell);
	cr_assert_eq(kvr_bell_notify(&bell, efd), 1);
	cr_assert_eq(kvr_bell_notify(&bell, efd), 1);
	cr_expect_eq(kvr_bell_woken(&bell, efd), 0);
	cr_expect_eq(stats().sleeping, 0);
	cr_expect_eq(stats().sleeps, 1);
	cr_expect_eq(kvr_bell_wait_fd(efd, 0), -ETIMEDOUT,
		     "one read must empty the eventfd");
}

Test(bell, woken_succeeds_when_eventfd_already_empty)
{
	kvr_bell_prepare_sleep(&bell);
	cr_expect_eq(kvr_bell_woken(&bell, efd), 0);
	cr_expect_eq(stats().sleeps, 1);
}

Test(bell, woken_leaves_eventfd_alone_when_efd_negative)
{
	kvr_bell_prepare_sleep(&bell);
	cr_assert_eq(kvr_bell_notify(&bell, efd), 1);
	cr_expect_eq(kvr_bell_woken(&bell, -1), 0);
	cr_expect_eq(stats().sleeping, 0);
	cr_expect_eq(take(efd), 1, "the signal must still be there");
}

Test(bell, woken_returns_ebadf_but_clears_flag_when_fd_closed)
{
	int fd;

	cr_assert_eq(kvr_bell_open(&fd), 0);
	close(fd);
	kvr_bell_prepare_sleep(&bell);
	cr_expect_eq(kvr_bell_woken(&bell, fd), -EBADF);
	cr_expect_eq(stats().sleeping, 0);
	cr_expect_eq(stats().sleeps, 1);
}

Test(bell, handshake_wakes_consumer_when_producer_publishes_after_recheck)
{
	/* One thread plays both sides in the order that would lose the
	 * wake-up without the flag: re-check empty, then publish. */
	_Atomic uint64_t produced = 0;
	uint64_t consumed = 0;

	kvr_bell_prepare_sleep(&bell);
	cr_assert_eq(atomic_load(&produced), consumed, "re-check: empty");
	atomic_store(&produced, 1);
	cr_expect_eq(kvr_bell_notify(&bell, efd), 1);
	cr_expect_eq(kvr_bell_wait_fd(efd, 1000), 0);
	cr_expect_eq(kvr_bell_woken(&bell, efd), 0);
	cr_expect_eq(atomic_load(&produced), 1);
}

/* ==== bell: poll(2) wait ==== */

Test(bell, wait_fd_returns_0_when_signalled)
{
	ring_raw(efd);
	cr_expect_eq(kvr_bell_wait_fd(efd, 1000), 0);
	cr_expect_eq(kvr_bell_wait_fd(efd, -1), 0, "still readable");
	cr_expect_eq(take(efd), 1, "wait_fd must not drain");
}

Test(bell, wait_fd_returns_etimedout_when_nothing_written)
{
	cr_expect_eq(kvr_bell_wait_fd(efd, 0), -ETIMEDOUT);
	cr_expect_eq(kvr_bell_wait_fd(efd, 20), -ETIMEDOUT);
}

Test(bell, wait_fd_returns_ebadf_when_fd_invalid)
{
	int fd;

	cr_expect_eq(kvr_bell_wait_fd(-1, 0), -EBADF);
	cr_assert_eq(kvr_bell_open(&fd), 0);
	close(fd);
	cr_expect_eq(kvr_bell_wait_fd(fd, 0), -EBADF);
}

Test(bell, wait_fd_returns_eintr_when_signal_arrives)
{
	alarm_in_ms(50);
	cr_expect_eq(kvr_bell_wait_fd(efd, 10000), -EINTR);
}

/* ==== uwait ==== */

static struct t_uwait *uw;

static void uw_setup(void)
{
	bell_setup();
	cr_assert_eq(t_uwait_create(8, &uw), 0);
}

static void uw_teardown(void)
{
	t_uwait_destroy(uw);
	uw = NULL;
	bell_teardown();
}

TestSuite(uwait, .init = uw_setup, .fini = uw_teardown, .timeout = 20);

Test(uwait, create_returns_einval_and_leaves_out_when_args_bad)
{
	struct t_uwait *w = (struct t_uwait *)&bell;

	cr_expect_eq(t_uwait_create(0, &w), -EINVAL);
	cr_expect_eq(w, (struct t_uwait *)&bell, "out untouched on error");
	cr_expect_eq(t_uwait_create(8, NULL), -EINVAL);
}

Test(uwait, destroy_accepts_null_when_called)
{
	t_uwait_destroy(NULL);
}

Test(uwait, wait_returns_tag_and_drains_when_eventfd_written)
{
	uint64_t tag = 0;

	cr_assert_eq(t_uwait_add(uw, efd, 42), 0);
	ring_raw(efd);
	cr_expect_eq(t_uwait_wait(uw, 5000, &tag, 1), 1);
	cr_expect_eq(tag, 42);
	cr_expect_eq(take(efd), 0, "wait must drain the eventfd");
}

Test(uwait, wait_returns_etimedout_when_nothing_written)
{
	uint64_t tag = 0;

	cr_assert_eq(t_uwait_add(uw, efd, 1), 0);
	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 1), -ETIMEDOUT);
	cr_expect_eq(t_uwait_wait(uw, 20, &tag, 1), -ETIMEDOUT);
}

Test(uwait, wait_reports_write_when_made_before_add)
{
	uint64_t tag = 0;

	ring_raw(efd);
	cr_assert_eq(t_uwait_add(uw, efd, 7), 0);
	cr_expect_eq(t_uwait_wait(uw, 5000, &tag, 1), 1);
	cr_expect_eq(tag, 7);
}

Test(uwait, wait_reports_distinct_tags_when_two_eventfds_fire)
{
	uint64_t tags[4];
	bool seen11 = false, seen22 = false;
	int efd2;

	cr_assert_eq(kvr_bell_open(&efd2), 0);
	cr_assert_eq(t_uwait_add(uw, efd, 11), 0);
	cr_assert_eq(t_uwait_add(uw, efd2, 22), 0);

	ring_raw(efd);
	ring_raw(efd2);
	/* Both may come in one call or in two; each exactly once. */
	while (!(seen11 && seen22)) {
		int n = t_uwait_wait(uw, 5000, tags, 4);

		cr_assert_gt(n, 0, "wait: %d", n);
		for (int i = 0; i < n; i++) {
			cr_assert(tags[i] == 11 || tags[i] == 22,
				  "unknown tag %llu",
				  (unsigned long long)tags[i]);
			bool *s = tags[i] == 11 ? &seen11 : &seen22;

			cr_assert(!*s, "tag %llu reported twice",
				  (unsigned long long)tags[i]);
			*s = true;
		}
	}
	cr_expect_eq(t_uwait_wait(uw, 0, tags, 4), -ETIMEDOUT);

	ring_raw(efd2);
	cr_expect_eq(t_uwait_wait(uw, 5000, tags, 4), 1);
	cr_expect_eq(tags[0], 22, "only the second doorbell rang");
	close(efd2);
}

Test(uwait, wait_keeps_unreported_tags_when_max_tags_is_small)
{
	int fds[3];
	unsigned seen = 0;
	uint64_t tag;

	for (int i = 0; i < 3; i++) {
		cr_assert_eq(kvr_bell_open(&fds[i]), 0);
		cr_assert_eq(t_uwait_add(uw, fds[i], (uint64_t)i), 0);
		ring_raw(fds[i]);
	}
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(t_uwait_wait(uw, 5000, &tag, 1), 1);
		cr_assert_lt(tag, 3);
		cr_expect_eq(seen & (1u << tag), 0, "tag %llu twice",
			     (unsigned long long)tag);
		seen |= 1u << tag;
	}
	cr_expect_eq(seen, 7);
	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 1), -ETIMEDOUT);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

Test(uwait, wait_does_not_wake_when_eventfd_drained_by_someone_else)
{
	uint64_t tag;

	cr_assert_eq(t_uwait_add(uw, efd, 5), 0);
	/* The write posts a CQE; draining it elsewhere (as
	 * kvr_bell_woken(b, efd) would) leaves that CQE stale. */
	ring_raw(efd);
	cr_assert_eq(take(efd), 1);
	cr_expect_eq(t_uwait_wait(uw, 20, &tag, 1), -ETIMEDOUT,
		     "a stale CQE must not be reported as a wake-up");
	ring_raw(efd);
	cr_expect_eq(t_uwait_wait(uw, 5000, &tag, 1), 1,
		     "and the poll must still be armed");
}

Test(uwait, wait_catches_write_when_it_lands_between_drain_and_next_wait)
{
	uint64_t tag;

	cr_assert_eq(t_uwait_add(uw, efd, 9), 0);
	ring_raw(efd);
	cr_assert_eq(t_uwait_wait(uw, 5000, &tag, 1), 1);
	/* Drained; the caller is "between waits" now. */
	ring_raw(efd);
	ring_raw(efd);
	cr_expect_eq(t_uwait_wait(uw, 5000, &tag, 1), 1);
	cr_expect_eq(tag, 9);
	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 1), -ETIMEDOUT,
		     "two writes before one wait are one wake-up");
}

Test(uwait, wait_keeps_working_when_cycled_10000_times)
{
	uint64_t tag;

	cr_assert_eq(t_uwait_add(uw, efd, 3), 0);
	for (unsigned i = 0; i < 10000; i++) {
		ring_raw(efd);
		cr_assert_eq(t_uwait_wait(uw, 5000, &tag, 1), 1, "cycle %u", i);
		cr_assert_eq(tag, 3);
	}
	cr_expect_eq(take(efd), 0);
	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 1), -ETIMEDOUT);
}

Test(uwait, wait_rearms_polls_when_completion_queue_overflows)
{
	/* A 1-entry ring has a 2-entry CQ. Five writes to each of eight
	 * eventfds post far more CQEs than that, so the kernel ends
	 * multishot polls (a final CQE without IORING_CQE_F_MORE) and the
	 * waiter must re-arm them to keep hearing those doorbells. */
	struct t_uwait *w;
	int fds[8];
	uint64_t tags[8];

	cr_assert_eq(t_uwait_create(1, &w), 0);
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(kvr_bell_open(&fds[i]), 0);
		cr_assert_eq(t_uwait_add(w, fds[i], (uint64_t)i), 0);
	}
	for (int round = 0; round < 50; round++) {
		unsigned seen = 0;

		for (int i = 0; i < 8; i++)
			for (int k = 0; k < 5; k++)
				ring_raw(fds[i]);
		while (seen != 0xff) {
			int n = t_uwait_wait(w, 5000, tags, 8);

			cr_assert_gt(n, 0, "round %d: wait %d, seen 0x%x",
				     round, n, seen);
			for (int j = 0; j < n; j++) {
				cr_assert_lt(tags[j], 8);
				cr_assert_eq(seen & (1u << tags[j]), 0,
					     "round %d: tag %llu twice", round,
					     (unsigned long long)tags[j]);
				seen |= 1u << tags[j];
			}
		}
		cr_assert_eq(t_uwait_wait(w, 0, tags, 8), -ETIMEDOUT,
			     "round %d: spurious wake after all drained",
			     round);
	}
	uint64_t rearms = t_uwait_rearms(w);

	t_uwait_destroy(w);
	for (int i = 0; i < 8; i++)
		close(fds[i]);
	if (rearms == 0)
		cr_skip("kernel never ended a multishot poll on CQ overflow; "
			"re-arm path not exercised (all other checks passed)");
}

Test(uwait, add_returns_ebadf_when_fd_invalid)
{
	int fd;

	cr_expect_eq(t_uwait_add(uw, -1, 0), -EBADF);
	cr_assert_eq(kvr_bell_open(&fd), 0);
	close(fd);
	cr_expect_eq(t_uwait_add(uw, fd, 0), -EBADF);
	cr_expect_eq(t_uwait_add(NULL, efd, 0), -EINVAL);
}

Test(uwait, add_returns_einval_when_fd_blocking_or_not_eventfd)
{
	int blocking = eventfd(0, EFD_CLOEXEC);
	int p[2];

	cr_assert_geq(blocking, 0);
	cr_expect_eq(t_uwait_add(uw, blocking, 0), -EINVAL);
	cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	cr_expect_eq(t_uwait_add(uw, p[0], 0), -EINVAL);
	close(blocking);
	close(p[0]);
	close(p[1]);
}

Test(uwait, wait_returns_einval_when_arguments_bad)
{
	uint64_t tag;

	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 1), -EINVAL,
		     "nothing added yet");
	cr_assert_eq(t_uwait_add(uw, efd, 0), 0);
	cr_expect_eq(t_uwait_wait(uw, 0, NULL, 1), -EINVAL);
	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 0), -EINVAL);
	cr_expect_eq(t_uwait_wait(NULL, 0, &tag, 1), -EINVAL);
}

Test(uwait, wait_returns_ebadf_when_eventfd_closed_after_add)
{
	uint64_t tag;
	int fd;

	cr_assert_eq(kvr_bell_open(&fd), 0);
	cr_assert_eq(t_uwait_add(uw, fd, 1), 0);
	ring_raw(fd);
	close(fd); /* breaks the contract: fds must outlive the waiter */
	cr_expect_eq(t_uwait_wait(uw, 5000, &tag, 1), -EBADF);
	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 1), -EBADF, "sticky");
}

Test(uwait, wait_returns_eintr_and_recovers_when_signal_arrives)
{
	uint64_t tag;

	cr_assert_eq(t_uwait_add(uw, efd, 4), 0);
	alarm_in_ms(50);
	cr_expect_eq(t_uwait_wait(uw, 10000, &tag, 1), -EINTR);
	ring_raw(efd);
	cr_expect_eq(t_uwait_wait(uw, 5000, &tag, 1), 1);
	cr_expect_eq(tag, 4);
}

Test(uwait, handshake_wakes_waiter_when_consumer_sleeps)
{
	uint64_t tag;

	cr_assert_eq(t_uwait_add(uw, efd, 1), 0);
	kvr_bell_prepare_sleep(&bell);
	cr_assert_eq(kvr_bell_notify(&bell, efd), 1);
	cr_expect_eq(t_uwait_wait(uw, 5000, &tag, 1), 1);
	cr_expect_eq(kvr_bell_woken(&bell, -1), 0);
	cr_expect_eq(kvr_bell_notify(&bell, efd), 0, "awake: suppressed");
	cr_expect_eq(t_uwait_wait(uw, 0, &tag, 1), -ETIMEDOUT);
}
