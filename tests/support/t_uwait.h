/* SPDX-License-Identifier: MIT */
/*
 * t_uwait.h - test helper: wait for any of several doorbell eventfds
 * through io_uring (why it is a test helper: t_uwait.c).
 *
 * A t_uwait is a private io_uring with one multishot POLL_ADD (POLLIN) per
 * registered eventfd. It owns the ring and nothing else: the eventfds are
 * borrowed and must stay open until t_uwait_destroy(). It is the waiting
 * half of the doorbell handshake in <kvring/doorbell.h>; the flag protocol
 * (prepare_sleep, re-check, wait, woken) stays with the caller.
 *
 * How it avoids both lost and spurious wake-ups (details in docs/doorbell.md):
 *   - every eventfd write wakes the poll and posts a CQE while the poll is
 *     armed; when the kernel ends a multishot (a CQE without
 *     IORING_CQE_F_MORE, e.g. after a CQ overflow) the poll is re-armed, and
 *     a fresh poll checks readiness at once, so a write made while it was
 *     unarmed posts a CQE as soon as it is armed again;
 *   - after the CQEs are reaped, each fired eventfd is drained with one
 *     non-blocking read. Reading does not signal POLLIN, so draining itself
 *     posts nothing;
 *   - a CQE whose eventfd turns out to be empty (its write was already
 *     consumed by an earlier drain) is stale: it is dropped and the wait goes
 *     on, so the caller never sees a wake with nothing behind it and never
 *     spins on one.
 * Single-threaded: one thread uses a given t_uwait at a time. Create it in
 * the process that uses it (not before fork()).
 */
#ifndef KVR_T_UWAIT_H
#define KVR_T_UWAIT_H

#include <stdint.h>

/* Opaque; created by t_uwait_create(), freed by t_uwait_destroy(). */
struct t_uwait;

/*
 * t_uwait_create - set up an io_uring for doorbell waiting.
 * entries is the submission queue size (a power of two is not required;
 * io_uring rounds up); 8 is plenty, since the only submissions are the
 * (re-)arms of the polls. Any number of eventfds may be added regardless.
 * Return: 0 and *out set, or -errno (-ENOMEM; -EINVAL if out is NULL or
 * entries is 0 or too large; -ENOSYS/-EPERM when io_uring is unavailable or
 * forbidden); on failure *out is untouched.
 */
int t_uwait_create(unsigned entries, struct t_uwait **out);

/*
 * t_uwait_add - watch one doorbell eventfd; tag is what wait reports.
 * The fd must be an open, non-blocking, non-semaphore eventfd (as made by
 * kvr_bell_open()) and must stay open until t_uwait_destroy(). The poll is
 * armed and submitted before this returns, so a write made after the call
 * is never missed, and one made before it (counter already non-zero) is
 * reported by the first wait. Tags need not be unique.
 * Return: 0, or -EBADF (fd not open), -EINVAL (w NULL, fd blocking, or not
 * an eventfd), -ENOMEM, or -errno from io_uring_submit(); on failure the
 * waiter is unchanged.
 */
int t_uwait_add(struct t_uwait *w, int efd, uint64_t tag);

/*
 * t_uwait_wait - block until at least one doorbell fired, or timeout.
 * Writes the tags of fired doorbells to tags[0..n) and drains each of those
 * eventfds (so pass efd = -1 to kvr_bell_woken()). A doorbell that fired but
 * did not fit in max_tags is neither drained nor forgotten: the next call
 * reports it without blocking. timeout_ms < 0 waits forever, 0 only checks.
 * Return: the number of tags n > 0; -ETIMEDOUT when none fired in time;
 * -EINTR when a signal interrupted the wait (nothing is lost: call again);
 * -EINVAL if w or tags is NULL, max_tags is 0 or no eventfd was added;
 * -EBADF if an added eventfd was closed; another -errno if a poll failed
 * in the kernel. After an error other than -ETIMEDOUT/-EINTR the waiter is
 * broken and keeps returning that error: destroy it.
 */
int t_uwait_wait(struct t_uwait *w, int timeout_ms, uint64_t *tags,
		 unsigned max_tags);

/*
 * t_uwait_rearms - how many times a finished multishot poll was re-armed.
 * Statistics and tests; 0 in the usual case, where the kernel keeps each
 * multishot poll alive forever.
 */
uint64_t t_uwait_rearms(const struct t_uwait *w);

/*
 * t_uwait_destroy - tear down the ring (cancelling the polls). The borrowed
 * eventfds stay open. Accepts NULL.
 */
void t_uwait_destroy(struct t_uwait *w);

#endif /* KVR_T_UWAIT_H */
