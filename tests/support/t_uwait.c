/* SPDX-License-Identifier: MIT */
/*
 * t_uwait.c - test helper: waiting for doorbell eventfds with io_uring
 * multishot polls.
 *
 * This file owns a private io_uring and a small table of (eventfd, tag)
 * entries; the table index is the SQE/CQE user_data. It arms one multishot
 * POLL_ADD(POLLIN) per eventfd, re-arms a poll the kernel has finished, and
 * drains the eventfds that fired. It does not own the eventfds, does not
 * touch the sleeping flag (doorbell.c), and is not the server's loop (the
 * server runs the same pattern inside its own ring, server/loop.c).
 *
 * It lived in lib/ as kvr_uwait, but only the tests used it: kvringd waits
 * on every doorbell in the one io_uring that also carries its sockets,
 * pidfds, timer and signals, so a second ring per wait would cost it a
 * system call and an fd for nothing, and workers block in poll(2)
 * (kvr_bell_wait_fd). The tests keep it to drive the doorbell handshake
 * through io_uring the way the server does (test_doorbell, uwait suite,
 * and test_doorbell_2proc).
 *
 * Entry states: armed (a multishot poll is live in the kernel or queued in
 * the SQ), fired (a CQE said "readable" and the eventfd was not drained
 * yet). A queued re-arm is submitted just before the next block, in the same
 * wait call or the next one: a poll that is armed late still sees a write
 * made while it was unarmed, because arming checks readiness first.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvring/clock.h>

#include "t_uwait.h"

/* One watched eventfd. Owned by the t_uwait table. */
struct uw_ent {
	int fd;
	bool armed;
	bool fired;
	uint64_t tag;
};

/*
 * struct t_uwait - process-local; created by t_uwait_create(), dies in
 * t_uwait_destroy(). Used by one thread at a time.
 */
struct t_uwait {
	struct io_uring ring;
	struct uw_ent *ents;
	unsigned nr;
	unsigned cap;
	/* Where the next collect starts, so one busy fd cannot starve the
	 * others when max_tags is small. */
	unsigned next;
	/* Sticky error: once set, the waiter is broken. */
	int err;
	uint64_t rearms;
};

int t_uwait_create(unsigned entries, struct t_uwait **out)
{
	struct t_uwait *w;
	int rc;

	if (!out || entries == 0)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	rc = io_uring_queue_init(entries, &w->ring, 0);
	if (rc < 0)
		goto err_free;
	*out = w;
	return 0;
err_free:
	free(w);
	return rc;
}

void t_uwait_destroy(struct t_uwait *w)
{
	if (!w)
		return;
	/* Closing the ring cancels the polls; the eventfds are borrowed. */
	io_uring_queue_exit(&w->ring);
	free(w->ents);
	free(w);
}

uint64_t t_uwait_rearms(const struct t_uwait *w)
{
	return w ? w->rearms : 0;
}

/*
 * Queue a multishot poll for entry idx. Not submitted here. On error (the SQ
 * is full and submitting it fails) nothing is queued for idx.
 */
static int arm(struct t_uwait *w, unsigned idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	int rc;

	if (!sqe) {
		/* SQ full of earlier re-arms: push them out first. */
		rc = io_uring_submit(&w->ring);
		if (rc < 0)
			return rc;
		sqe = io_uring_get_sqe(&w->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_poll_multishot(sqe, w->ents[idx].fd, POLLIN);
	io_uring_sqe_set_data64(sqe, idx);
	w->ents[idx].armed = true;
	return 0;
}

/*
 * Is fd an eventfd? Only checked where /proc is available; without it the
 * caller's word is taken (draining a non-eventfd would eat its data).
 */
static bool looks_like_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return true;
	target[n] = '\0';
	return strcmp(target, "anon_inode:[eventfd]") == 0;
}

int t_uwait_add(struct t_uwait *w, int efd, uint64_t tag)
{
	unsigned idx;
	int fl, rc;

	if (!w)
		return -EINVAL;
	if (w->err)
		return w->err;
	if (efd < 0)
		return -EBADF;
	fl = fcntl(efd, F_GETFL);
	if (fl < 0)
		return -errno;
	/* Drains must not block: a stale CQE can point at an empty fd. */
	if (!(fl & O_NONBLOCK) || !looks_like_eventfd(efd))
		return -EINVAL;
	if (w->nr == w->cap) {
		unsigned cap = w->cap ? 2 * w->cap : 4;
		struct uw_ent *e;

		if (cap < w->cap)
			return -ENOMEM;
		e = realloc(w->ents, (size_t)cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		w->ents = e;
		w->cap = cap;
	}
	idx = w->nr;
	w->ents[idx] = (struct uw_ent){.fd = efd, .tag = tag};
	rc = arm(w, idx);
	if (rc < 0)
		return rc; /* nr unchanged: the entry does not exist */
	w->nr++;
	/*
	 * Submit now so the poll is live when we return. If this fails the
	 * SQE stays queued with an index we have published, and there is no
	 * way to take it back: the waiter is broken from here on.
	 */
	rc = io_uring_submit(&w->ring);
	if (rc < 0) {
		w->err = rc;
		return rc;
	}
	return 0;
}

/*
 * Move every available CQE into the entries' fired flags, and queue a
 * re-arm for each poll the kernel finished. Never blocks.
 */
static void reap(struct t_uwait *w)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;

	io_uring_for_each_cqe(&w->ring, head, cqe)
	{
		uint64_t idx = io_uring_cqe_get_data64(cqe);
		struct uw_ent *e;

		seen++;
		if (idx >= w->nr)
			continue; /* not ours; cannot happen, ignore */
		e = &w->ents[idx];
		/* No F_MORE: this was the poll's last CQE. */
		if (!(cqe->flags & IORING_CQE_F_MORE))
			e->armed = false;
		if (cqe->res < 0) {
			/* The kernel failed the poll itself (not a
			 * readiness event): nothing sensible to retry. */
			if (!w->err)
				w->err = cqe->res;
			continue;
		}
		/* res is the ready mask; POLLIN is the only event asked
		 * for, and POLLERR/POLLHUP also deserve a look. */
		e->fired = true;
	}
	io_uring_cq_advance(&w->ring, seen);
	if (w->err)
		return;
	for (unsigned i = 0; i < w->nr; i++) {
		if (w->ents[i].armed)
			continue;
		int rc = arm(w, i);

		if (rc < 0) {
			w->err = rc;
			return;
		}
		w->rearms++;
	}
}

/*
 * Drain fired entries into tags, at most max. A fired entry whose eventfd is
 * already empty had its write consumed by an earlier drain (its CQE was
 * stale): drop it silently. Return: tags written (>= 0) or a sticky -errno.
 */
static int collect(struct t_uwait *w, uint64_t *tags, unsigned max)
{
	unsigned n = 0;

	for (unsigned k = 0; k < w->nr && n < max; k++) {
		unsigned i = (w->next + k) % w->nr;
		struct uw_ent *e = &w->ents[i];
		uint64_t v;
		ssize_t r;

		if (!e->fired)
			continue;
		do
			r = read(e->fd, &v, sizeof(v));
		while (r < 0 && errno == EINTR);
		if (r < 0 && errno != EAGAIN) {
			/* Typically -EBADF: the caller closed an fd it
			 * lent us. Keep "fired" so nothing is forgotten. */
			w->err = -errno;
			break;
		}
		e->fired = false;
		if (r < 0)
			continue; /* stale CQE, eventfd empty */
		tags[n++] = e->tag;
		w->next = i + 1;
	}
	if (n > 0)
		return (int)n;
	return w->err;
}

int t_uwait_wait(struct t_uwait *w, int timeout_ms, uint64_t *tags,
		 unsigned max_tags)
{
	uint64_t deadline = 0;
	int rc;

	if (!w || !tags || max_tags == 0 || w->nr == 0)
		return -EINVAL;
	if (timeout_ms >= 0)
		deadline = kvr_clock_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		struct io_uring_cqe *cqe;

		/* Leftovers first: fired entries that did not fit last
		 * time, or CQEs posted since. */
		reap(w);
		rc = collect(w, tags,
			     max_tags > INT32_MAX ? INT32_MAX : max_tags);
		if (rc != 0)
			return rc;
		/* Nothing to report: make queued re-arms live, then block. */
		if (io_uring_sq_ready(&w->ring) > 0) {
			rc = io_uring_submit(&w->ring);
			if (rc < 0) {
				w->err = rc;
				return rc;
			}
		}
		if (timeout_ms < 0) {
			rc = io_uring_wait_cqe(&w->ring, &cqe);
		} else {
			uint64_t now = kvr_clock_now_ns();
			uint64_t left = deadline > now ? deadline - now : 0;
			struct __kernel_timespec ts;

			ts.tv_sec = (long long)(left / KVR_CLOCK_NS_PER_S);
			ts.tv_nsec = (long long)(left % KVR_CLOCK_NS_PER_S);
			rc = io_uring_wait_cqe_timeout(&w->ring, &cqe, &ts);
		}
		if (rc == -ETIME)
			return -ETIMEDOUT;
		if (rc == -EINTR)
			return -EINTR;
		if (rc < 0) {
			w->err = rc;
			return rc;
		}
		/* A CQE is there: loop to reap and drain it. */
	}
}
