/* SPDX-License-Identifier: MIT */
/*
 * chan.h - what happens to one worker connection, from accept to cleanup:
 * the handshake (hello.c), the channel table and cleanup (chan.c), request
 * dispatch (disp.c) and the copy transport (copy.c). All functions run on
 * the event-loop thread only.
 */
#ifndef KVR_SERVER_CHAN_H
#define KVR_SERVER_CHAN_H

#include <stdbool.h>
#include <stdint.h>

#include "srv.h"

/* ---- chan.c ---- */

/* A free connection slot, or NULL when all are in use. */
struct kvr_conn *kvr__chan_conn_alloc(struct kvr_srv *s);

/* Claim a free channel for @c and format its block (rings, bells,
 * identity, counters). Return 0 or -EBUSY (all channels in use). */
int kvr__chan_claim(struct kvr_srv *s, struct kvr_conn *c);

/* Make @c active: add it to the active list, channel state ACTIVE. */
void kvr__chan_activate(struct kvr_srv *s, struct kvr_conn *c);

/*
 * kvr__chan_close - release everything @c holds: the store's channel
 * state (reservations freed, pins and owned leases dropped), the channel
 * block (back to FREE), io_uring polls and fds. Logs one line with @why
 * and what was released (@protocol_error counts it and logs at warn).
 * Idempotent: a FREE connection is left alone.
 */
void kvr__chan_close(struct kvr_srv *s, struct kvr_conn *c, const char *why,
		     bool protocol_error);

/* Cut off @c for bad input: log "<channel, pid>: <what>" and close. */
void kvr__chan_proto_error(struct kvr_srv *s, struct kvr_conn *c,
			   const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Publish @c's counters (local mirrors and the store's per-channel view)
 * to its channel block; relaxed single-writer stores. */
void kvr__chan_counters(struct kvr_srv *s, struct kvr_conn *c);

/* Publish the global counters to the control header. */
void kvr__chan_gstats(struct kvr_srv *s);

/* The socket of an ACTIVE connection is readable or hung up. */
void kvr__chan_sock_event(struct kvr_srv *s, struct kvr_conn *c);

/* ---- hello.c ---- */

/* A new socket from accept: start its handshake (or refuse it). */
void kvr__hello_accepted(struct kvr_srv *s, int fd);

/* A HELLO connection's socket is readable. */
void kvr__hello_readable(struct kvr_srv *s, struct kvr_conn *c);

/*
 * kvr__hello_victim - the pending handshake (state HELLO) to drop before
 * one more of @uid is admitted: @uid's oldest when it has
 * KVR_SRV_PENDING_PER_UID pending, else the oldest of all when @npending
 * reached KVR_SRV_PENDING_MAX, else NULL (room enough). Oldest is the
 * smallest accepted_ns. Pure: reads @conns[0..nconns) only (fuzzed by
 * tests/fuzz/fuzz_handshake.c).
 */
struct kvr_conn *kvr__hello_victim(struct kvr_conn *conns, uint32_t nconns,
				   uint32_t npending, uid_t uid);

/* Drop HELLO connections whose deadline passed. */
void kvr__hello_timeouts(struct kvr_srv *s, uint64_t now_ns);

/* A connection that registered namespace @ns_id closes: drop its
 * reference; the entry is freed once no channel and no object uses it. */
void kvr__hello_ns_put(struct kvr_srv *s, uint32_t ns_id);

/* ---- disp.c ---- */

/*
 * kvr__disp_exec - run one validated request against the store and build
 * its answer in s->ans. Return the answer's length; *type_out gets the
 * answer's record type. Never fails: errors become the answer's status.
 */
size_t kvr__disp_exec(struct kvr_srv *s, struct kvr_conn *c,
		      const struct kvr_req_view *v, uint32_t *type_out);

/*
 * kvr__disp_drain - take up to KVR_SRV_BATCH requests from @c's request
 * ring, answer them, and ring the response doorbell once. A malformed
 * request or a damaged ring disconnects @c.
 * Return: the number of requests handled (0: nothing to do or blocked).
 */
unsigned kvr__disp_drain(struct kvr_srv *s, struct kvr_conn *c);

/* Answer every request left in @c's ring with -ESHUTDOWN (graceful stop). */
void kvr__disp_shutdown(struct kvr_srv *s, struct kvr_conn *c);

/* Count one answer of @c for its op and status (local mirrors). */
/* kvr__disp_publish - make claimed answers visible and ring the worker
 * if it sleeps (for answers written later, l2_srv.c). */
void kvr__disp_publish(struct kvr_conn *c);

void kvr__disp_count(struct kvr_srv *s, struct kvr_conn *c, uint32_t op,
		     int status);

/* ---- sum.c: per-chunk checksums (docs/reliability.md) ---- */

/* Reports of one connection whose bytes matched are re-checked up to
 * this many times; later ones are counted and ignored, so a lying
 * worker cannot make the loop hash the pool for it without end. */
#define KVR_SUM_FALSE_MAX 8u

/*
 * kvr__sum_store - a commit_store carrying sums (KVR_REQ_SUMS): give the
 * transfer's reservations their sums (words already copied into s->sizes).
 * Return 0, or the store's -errno (-EINVAL: count is not the transfer's
 * reservation count; -ENOENT/-EPERM/KVR_ERR_EXPIRED as commit_store), and
 * then nothing changed.
 */
int kvr__sum_store(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer,
		   uint32_t n);

/*
 * kvr__sum_report - a commit_retrieve naming corrupt slots (offsets in
 * s->sizes, n of them): re-check each against the sum the store keeps by
 * hashing the pool bytes (the one place the loop reads a slot, and only
 * on a report), and drop the objects that fail. Before the commit itself.
 * Return: the number of objects dropped.
 */
uint32_t kvr__sum_report(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer,
			 uint32_t n);

/* ---- copy.c ---- */

int kvr__copy_init(struct kvr_srv *s, struct kvr_conn *c);
void kvr__copy_fini(struct kvr_conn *c);

/* The copy connection's socket is readable: read and run frames. */
void kvr__copy_readable(struct kvr_srv *s, struct kvr_conn *c);

/* The copy connection's socket is writable: continue the send queue. */
void kvr__copy_writable(struct kvr_srv *s, struct kvr_conn *c);

#endif /* KVR_SERVER_CHAN_H */
