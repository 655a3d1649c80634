/* SPDX-License-Identifier: MIT */
/*
 * uring.h - queueing operations on kvringd's io_uring (uring.c). The loop
 * (loop.c) owns the ring's completions; every file that waits on an fd
 * queues its poll here. Event-loop thread only.
 */
#ifndef KVR_SERVER_URING_H
#define KVR_SERVER_URING_H

#include <stdbool.h>
#include <stdint.h>

#include "kvringd.h"

/* A free submission entry; submits the queue first when it is full, and
 * asserts (kvr_assert) that one is then free. Never NULL. */
struct io_uring_sqe *kvr__uring_sqe(struct kvr_srv *s);

/*
 * kvr__uring_poll - queue a poll on @fd for @mask tagged @tag (multishot
 * or one-shot). kvr__uring_cancel - queue the removal of the poll tagged
 * @tag (its completion, if any, is then ignored by generation). Never
 * fail: when the submission queue is full they submit it first.
 */
void kvr__uring_poll(struct kvr_srv *s, int fd, unsigned mask, uint64_t tag,
		     bool multishot);
void kvr__uring_cancel(struct kvr_srv *s, uint64_t tag);

#endif /* KVR_SERVER_URING_H */
