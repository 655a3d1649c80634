/* SPDX-License-Identifier: MIT */
/*
 * l2_srv.h - the L2 tier on the event loop's side (l2_srv.c): start and
 * stop, write-behind at commit, read-through lookups, the done queue's
 * bell and the counters (docs/l2.md). Loop thread only. srv.h includes
 * it, so the loop, the dispatcher and start-up see these calls.
 */
#ifndef KVR_SERVER_L2_SRV_H
#define KVR_SERVER_L2_SRV_H

#include <stdbool.h>
#include <stdint.h>

#include <kvring/l2.h>

struct kvr_srv;
struct kvr_conn;
struct kvr_req_view;

/*
 * kvr_l2_start - when --l2 is given: read the secret, start both lanes,
 * log once what is used. Return: 0 (also when L2 is off), or -errno with
 * the reason logged.
 */
int kvr_l2_start(struct kvr_srv *s);

/*
 * kvr_l2_stop - at shutdown, before the self-check: stop the lanes and end
 * every owner their jobs held (uploads unpinned, loads freed unpublished).
 */
void kvr_l2_stop(struct kvr_srv *s);

/* kvr_l2_destroy - free the tier; NULL-safe. */
void kvr_l2_destroy(struct kvr_l2 *l2);

/* kvr_l2_poll - each loop pass: finished jobs, deadlines, late answers.
 * Return: work done (0 when idle). */
unsigned kvr_l2_poll(struct kvr_srv *s);

/* The shortest sleep kvr_l2_sleep_ns() asks for: deadlines are kept to
 * within a millisecond. */
#define KVR_L2_SLEEP_MIN_NS 1000000ull

/*
 * kvr_l2_sleep_ns - how long the loop may sleep for the L2 tier's sake:
 * UINT64_MAX when no read-through waits for a deadline, else the time
 * until the nearest one (at least KVR_L2_SLEEP_MIN_NS). Lane completions
 * wake the loop through the done eventfd, whatever this says.
 */
uint64_t kvr_l2_sleep_ns(const struct kvr_srv *s);

/* kvr_l2_bell - the done-queue eventfd became readable. */
void kvr_l2_bell(struct kvr_srv *s);

/*
 * kvr_l2_lookup - a lookup flagged KVR_REQ_L2 with keys in s->keys: if
 * part of the prefix may be in L2, start a read-through and return true
 * (the answer comes later); false: answer now as a plain lookup.
 */
bool kvr_l2_lookup(struct kvr_srv *s, struct kvr_conn *c,
		   const struct kvr_req_view *v);

/*
 * kvr_l2_commit_store - commit_store with write-behind: the transfer's
 * keys are read, it is committed, and its chunks are pinned under an L2
 * owner and queued for upload (or dropped, counted, if the queue is
 * full). Return: what kvr_store_commit_store() returned.
 */
int kvr_l2_commit_store(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer);

/* kvr_l2_publish - copy the counters into the control segment. */
void kvr_l2_publish(struct kvr_srv *s);

#endif /* KVR_SERVER_L2_SRV_H */
