/* SPDX-License-Identifier: MIT */
/*
 * doorbell.h - eventfd doorbells with a "consumer is sleeping" flag, so that
 * a producer makes a system call only when its consumer is really blocked.
 *
 * This file owns the shared per-direction block (struct kvr_bell_shm, one per
 * ring, embedded in the control segment by layout.h) and the four steps of
 * the handshake: notify (producer), prepare_sleep / cancel_sleep / woken
 * (consumer). It deliberately knows nothing about rings: the caller publishes
 * to its queue before kvr_bell_notify() and re-checks its queue between
 * kvr_bell_prepare_sleep() and blocking. Blocking itself is done either with
 * kvr_bell_wait_fd() (poll(2), for simple callers) or through io_uring
 * (the server's own loop; tests/support/t_uwait.h in the tests). The full
 * argument is in
 * docs/doorbell.md.
 *
 * The handshake (labels F1/F2 are used in the code and docs/memory-order.md):
 *
 *   producer                              consumer, before blocking
 *   --------                              -------------------------
 *   publish to queue (ring's release R1)  store(sleeping, 1, relaxed)
 *   fence(seq_cst)                  F1    fence(seq_cst)                 F2
 *   if load(sleeping, relaxed)            if queue not empty: cancel_sleep
 *           write(efd, 1)                 else block on efd, then woken()
 *
 * Why no wake-up is lost. Each side stores one location and then loads the
 * other one (store->load, Dekker's pattern). Neither release/acquire nor the
 * x86 TSO model orders a store before a later load, which is why BOTH fences
 * are needed: with only one, both sides may read the old values ("queue
 * empty" and "not sleeping"), the consumer blocks and the producer skips the
 * write. With both, F1 and F2 are ordered in the single total order S of
 * seq_cst operations (C11 7.17.4p3 / [atomics.order]):
 *   - F2 before F1 in S: the producer's load after F1 sees sleeping == 1,
 *     or a later store to it, which the consumer makes only once this wait
 *     has returned; so it writes the eventfd, and the eventfd counter stays
 *     set until the consumer reads it, however late the consumer blocks;
 *   - F1 before F2 in S: the consumer's re-check after F2 sees the
 *     producer's publish, so it cancels instead of blocking.
 * There is no third case, so a consumer never blocks while work it has not
 * seen is pending and the producer stays silent.
 *
 * Trust: the block lives in shared memory that the peer can write. Any
 * non-zero "sleeping" counts as set; a peer that scribbles on the block can
 * cause extra eventfd writes or stall its own channel, nothing else. The
 * counters are statistics for kvring-inspect, never inputs to a decision.
 */
#ifndef KVRING_DOORBELL_H
#define KVRING_DOORBELL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shm atomics must be lock-free");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shm atomics must be lock-free");

/*
 * struct kvr_bell_shm - one direction's doorbell state, in shared memory.
 *
 * Owner: the control segment (one per ring, so two per channel); it lives as
 * long as the segment, formatted by kvr_bell_init() when the channel block is
 * formatted. Writers are fixed by role, which is what lets the counters use
 * plain relaxed load + store instead of read-modify-write:
 *   sleeping, sleeps, cancels  written by the consumer only (the side that
 *                              blocks on this bell);
 *   rung, suppressed           written by the producer only.
 * Exactly 64 bytes and 64-byte aligned (one cache line); the control segment
 * layout embeds it, so any change here is an ABI change (docs/layout.md).
 */
struct kvr_bell_shm {
	/* 1 while the consumer is in prepare_sleep..woken/cancel_sleep. */
	_Alignas(64) _Atomic uint32_t sleeping;
	uint32_t pad0;
	/* Notifies that found the consumer asleep and wrote the eventfd. */
	_Atomic uint64_t rung;
	/* Notifies that found it awake and made no system call. */
	_Atomic uint64_t suppressed;
	/* Times the consumer blocked and was woken (kvr_bell_woken()). */
	_Atomic uint64_t sleeps;
	/* Times the re-check found work after prepare_sleep (no block). */
	_Atomic uint64_t cancels;
	/* Zero; room for later counters without moving anything. */
	uint64_t reserved[3];
};

_Static_assert(sizeof(struct kvr_bell_shm) == 64,
	       "ABI: kvr_bell_shm is one cache line; update docs/layout.md");
_Static_assert(_Alignof(struct kvr_bell_shm) == 64,
	       "ABI: kvr_bell_shm starts a cache line");
_Static_assert(offsetof(struct kvr_bell_shm, sleeping) == 0, "ABI");
_Static_assert(offsetof(struct kvr_bell_shm, rung) == 8, "ABI");
_Static_assert(offsetof(struct kvr_bell_shm, suppressed) == 16, "ABI");
_Static_assert(offsetof(struct kvr_bell_shm, sleeps) == 24, "ABI");
_Static_assert(offsetof(struct kvr_bell_shm, cancels) == 32, "ABI");

/*
 * struct kvr_bell_stats - a process-local snapshot of the counters, for the
 * inspector and tests. Each field is read atomically, but the fields are not
 * one consistent cut (the writers keep going).
 */
struct kvr_bell_stats {
	uint64_t rung;
	uint64_t suppressed;
	uint64_t sleeps;
	uint64_t cancels;
	uint32_t sleeping;
};

/*
 * kvr_bell_init - format a doorbell block: not sleeping, counters zero.
 * Call once when the segment is formatted, before any peer can see it (the
 * segment's ready flag publishes it). Not for use on a live block.
 */
void kvr_bell_init(struct kvr_bell_shm *b);

/*
 * kvr_bell_open - create the eventfd behind a doorbell.
 * The fd is non-blocking (drains must never block), close-on-exec, counter 0,
 * not EFD_SEMAPHORE (one read empties it). The caller owns it and close(2)s
 * it; kvr_bell_wait_fd (and the tests' t_uwait) only borrow it.
 * Return: 0 and *efd_out set, or -errno from eventfd(2) (-EMFILE, -ENFILE,
 * -ENOMEM); on failure *efd_out is untouched. -EINVAL if efd_out is NULL.
 */
int kvr_bell_open(int *efd_out);

/*
 * kvr_bell_notify - wake the consumer if, and only if, it sleeps.
 * Producer side, one producer per bell. Call it AFTER the queue publish (the
 * ring's release store); one call may cover a whole batch. In the busy
 * steady state it costs a fence and two plain memory accesses, no system
 * call. F1 (seq_cst fence) pairs with F2 in kvr_bell_prepare_sleep().
 * Return: 1 if the eventfd was written (a full eventfd counter, EAGAIN,
 * counts as written: the consumer is already signalled), 0 if the consumer
 * was awake and nothing was written, or -errno from write(2) (-EBADF for a
 * bad efd); on error neither counter moves.
 */
int kvr_bell_notify(struct kvr_bell_shm *b, int efd);

/*
 * kvr_bell_prepare_sleep - announce that the consumer is about to block.
 * Consumer side. Stores sleeping = 1 then issues F2 (seq_cst fence; pairs
 * with F1 in kvr_bell_notify()). The caller MUST then re-check its queue:
 * if work is there, call kvr_bell_cancel_sleep() and process it; otherwise
 * block on the eventfd and call kvr_bell_woken() when the wait returns
 * (also after a timeout or a signal).
 */
void kvr_bell_prepare_sleep(struct kvr_bell_shm *b);

/*
 * kvr_bell_cancel_sleep - the re-check found work: do not block.
 * Consumer side, only after kvr_bell_prepare_sleep(). Clears the flag and
 * counts a cancel. A producer that saw the flag just before it was cleared
 * may still write the eventfd; the consumer's next wait then returns at once
 * (one spurious wake, which the re-check loop absorbs), nothing is lost.
 */
void kvr_bell_cancel_sleep(struct kvr_bell_shm *b);

/*
 * kvr_bell_woken - the consumer is awake again after blocking.
 * Consumer side. Clears the flag, counts a sleep and drains the eventfd with
 * one non-blocking read (empty is fine). Pass efd = -1 to skip the read when
 * the waiter already drained it (the tests' t_uwait_wait() does). The caller
 * must then look at its queue again: a wake-up only says "look", never "how
 * much". Return: 0, or -errno from read(2) other than EAGAIN (-EBADF); the flag
 * is cleared and the sleep counted either way.
 */
int kvr_bell_woken(struct kvr_bell_shm *b, int efd);

/*
 * kvr_bell_wait_fd - block until the eventfd is signalled, without io_uring.
 * For simple callers (a worker thread with one doorbell). Uses poll(2) for
 * POLLIN; does not read the eventfd (kvr_bell_woken() drains it). A negative
 * timeout_ms waits forever; 0 only checks.
 * Return: 0 if the eventfd is readable, -ETIMEDOUT if timeout_ms passed
 * first, -EINTR if a signal arrived (passed through so the caller can check
 * its stop flag; not retried here), -EBADF if efd is not open, -EIO if the
 * eventfd reports an error condition, or another -errno from poll(2).
 */
int kvr_bell_wait_fd(int efd, int timeout_ms);

/*
 * kvr_bell_stats - read the counters of a (possibly read-only) mapping.
 * Never writes to the block, so it works on a PROT_READ mapping.
 */
void kvr_bell_stats(const struct kvr_bell_shm *b, struct kvr_bell_stats *out);

#endif /* KVRING_DOORBELL_H */
