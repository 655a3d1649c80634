/* SPDX-License-Identifier: MIT */
/*
 * Queueing io_uring operations on kvringd's one ring: a free submission
 * entry, a poll, a poll removal. Every server file that waits on an fd
 * (hello.c, chan.c, tport_sock.c, loop.c) queues through here; what happens on
 * each completion is loop.c's. Nothing here submits unless the queue is
 * full, and nothing fails (a full queue is submitted first).
 */
#include <kvring/error.h>

#include "uring.h"

struct io_uring_sqe *kvr__uring_sqe(struct kvr_srv *s)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

	if (!sqe) {
		io_uring_submit(&s->ring);
		sqe = io_uring_get_sqe(&s->ring);
	}
	kvr_assert(sqe != NULL);
	return sqe;
}

void kvr__uring_poll(struct kvr_srv *s, int fd, unsigned mask, uint64_t tag,
		     bool multishot)
{
	struct io_uring_sqe *sqe = kvr__uring_sqe(s);

	if (multishot)
		io_uring_prep_poll_multishot(sqe, fd, mask);
	else
		io_uring_prep_poll_add(sqe, fd, mask);
	io_uring_sqe_set_data64(sqe, tag);
}

void kvr__uring_cancel(struct kvr_srv *s, uint64_t tag)
{
	struct io_uring_sqe *sqe = kvr__uring_sqe(s);

	io_uring_prep_poll_remove(sqe, tag);
	io_uring_sqe_set_data64(sqe, kvr_tag_make(KVR_TAG_NONE, 0, 0));
}
