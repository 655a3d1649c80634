/* SPDX-License-Identifier: MIT */
/*
 * doorbell.c - the eventfd doorbell handshake: notify on the producer side,
 * prepare_sleep / cancel_sleep / woken on the consumer side, plus eventfd
 * creation and a poll(2) wait. It owns no memory: the block is in the
 * caller's shared segment and the eventfd belongs to the caller. It does not
 * know about rings (the caller publishes and re-checks) and does not use
 * io_uring (the server's loop does; tests/support/t_uwait.c for the tests).
 * The proof that no wake-up is lost is in
 * <kvring/doorbell.h> and docs/doorbell.md; the fences are labelled F1/F2.
 */
#include <kvring/doorbell.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

/*
 * Bump a counter that has exactly one writer. A relaxed load plus a relaxed
 * store is a correct increment when nobody else stores to the location, and
 * it avoids a locked read-modify-write (a full barrier on x86) on the hot
 * path. The _Atomic type is still needed so that the inspector, reading from
 * another process, never sees a torn 64-bit value. If a peer scribbles on
 * the counter we only lose statistics.
 */
static void bump(_Atomic uint64_t *c)
{
	/* Relaxed: single writer; readers only want some recent value. */
	uint64_t v = atomic_load_explicit(c, memory_order_relaxed);

	atomic_store_explicit(c, v + 1, memory_order_relaxed);
}

void kvr_bell_init(struct kvr_bell_shm *b)
{
	/*
	 * Relaxed: the block is not visible to any peer yet; the segment's
	 * ready flag (a release store in the segment code) publishes it.
	 */
	atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
	b->pad0 = 0;
	atomic_store_explicit(&b->rung, 0, memory_order_relaxed);
	atomic_store_explicit(&b->suppressed, 0, memory_order_relaxed);
	atomic_store_explicit(&b->sleeps, 0, memory_order_relaxed);
	atomic_store_explicit(&b->cancels, 0, memory_order_relaxed);
	for (size_t i = 0; i < sizeof(b->reserved) / sizeof(b->reserved[0]);
	     i++)
		b->reserved[i] = 0;
}

int kvr_bell_open(int *efd_out)
{
	int fd;

	if (!efd_out)
		return -EINVAL;
	/*
	 * Non-blocking: every read we do is a drain that must not block when a
	 * previous drain already emptied the counter. Not EFD_SEMAPHORE: one
	 * read resets the counter, so a drain is a single system call.
	 */
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	*efd_out = fd;
	return 0;
}

int kvr_bell_notify(struct kvr_bell_shm *b, int efd)
{
	const uint64_t one = 1;
	uint32_t sleeping;
	ssize_t n;

	/*
	 * F1: orders the caller's queue publish (the ring's release store,
	 * sequenced before this call) before the load of "sleeping" below.
	 * Pairs with F2 in kvr_bell_prepare_sleep(). A release store alone
	 * does not stop a later load from being performed first (store
	 * buffering), which is exactly the lost wake-up.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	/* Relaxed: F1 provides the ordering; the value is only a hint to
	 * skip the system call, its correctness comes from the F1/F2 pair. */
	sleeping = atomic_load_explicit(&b->sleeping, memory_order_relaxed);
	if (!sleeping) {
		bump(&b->suppressed);
		return 0;
	}
	do
		n = write(efd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
	/*
	 * EAGAIN means the counter is at its maximum: the consumer has a
	 * pending wake-up already, which is all we wanted.
	 */
	if (n < 0 && errno != EAGAIN)
		return -errno;
	bump(&b->rung);
	return 1;
}

void kvr_bell_prepare_sleep(struct kvr_bell_shm *b)
{
	/* Relaxed: F2 right below orders it before the caller's re-check. */
	atomic_store_explicit(&b->sleeping, 1, memory_order_relaxed);
	/*
	 * F2: orders the store of "sleeping" before the caller's re-check of
	 * its queue (the loads after this call). Pairs with F1 in
	 * kvr_bell_notify(): either the producer sees sleeping == 1 or this
	 * side's re-check sees the producer's publish.
	 */
	atomic_thread_fence(memory_order_seq_cst);
}

void kvr_bell_cancel_sleep(struct kvr_bell_shm *b)
{
	/*
	 * Relaxed: clearing the flag late only lets the producer write the
	 * eventfd once more than needed; the consumer is awake and will
	 * absorb that as one spurious wake.
	 */
	atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
	bump(&b->cancels);
}

int kvr_bell_woken(struct kvr_bell_shm *b, int efd)
{
	uint64_t v;
	ssize_t n;

	/*
	 * Relaxed: as in cancel_sleep, a late clear costs at most one extra
	 * eventfd write. The queue data itself is ordered by the ring's own
	 * acquire/release pair, not by this flag.
	 */
	atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
	bump(&b->sleeps);
	if (efd < 0)
		return 0;
	/*
	 * The order of clear and drain does not matter for correctness: the
	 * caller re-checks its queue after this call, so a write that lands
	 * after the read only leaves the counter set and costs one spurious
	 * wake later. Clearing first shortens the window in which producers
	 * still make system calls. One read empties a non-semaphore eventfd.
	 */
	do
		n = read(efd, &v, sizeof(v));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

int kvr_bell_wait_fd(int efd, int timeout_ms)
{
	struct pollfd pfd = {.fd = efd, .events = POLLIN};
	int rc;

	if (efd < 0)
		return -EBADF;
	rc = poll(&pfd, 1, timeout_ms < 0 ? -1 : timeout_ms);
	if (rc < 0)
		return -errno; /* -EINTR is passed through on purpose */
	if (rc == 0)
		return -ETIMEDOUT;
	if (pfd.revents & POLLNVAL)
		return -EBADF;
	if (pfd.revents & POLLIN)
		return 0;
	/* POLLERR: an eventfd counter overflow, which write(2) cannot cause. */
	return -EIO;
}

void kvr_bell_stats(const struct kvr_bell_shm *b, struct kvr_bell_stats *out)
{
	/* Relaxed: statistics; each field is independent. */
	out->rung = atomic_load_explicit(&b->rung, memory_order_relaxed);
	out->suppressed =
	    atomic_load_explicit(&b->suppressed, memory_order_relaxed);
	out->sleeps = atomic_load_explicit(&b->sleeps, memory_order_relaxed);
	out->cancels = atomic_load_explicit(&b->cancels, memory_order_relaxed);
	out->sleeping =
	    atomic_load_explicit(&b->sleeping, memory_order_relaxed);
}
