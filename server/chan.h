/* SPDX-License-Identifier: MIT */
/*
 * chan.h - connections and channels (chan.c): the connection slots, the
 * claim of a channel block, the active list, the one cleanup path, and
 * the counters and answers published to the channel block. Event-loop
 * thread only.
 */
#ifndef KVR_SERVER_CHAN_H
#define KVR_SERVER_CHAN_H

#include <stdbool.h>
#include <stdint.h>

#include "kvringd.h"

/* A free connection slot, or NULL when all are in use. */
struct kvr_conn *kvr__chan_conn_alloc(struct kvr_srv *s);

/* Claim a free channel for @c and format its block (rings, bells,
 * identity, counters). Return 0 or -EBUSY (all channels in use). */
int kvr__chan_claim(struct kvr_srv *s, struct kvr_conn *c);

/* The process of detached channel @ch exited (its pidfd poll, tagged
 * with generation @gen, fired): release the quarantine it held and free
 * the channel (chan.c). */
void kvr__chan_detached_exit(struct kvr_srv *s, uint32_t ch, uint32_t gen);

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

/*
 * kvr__chan_counters_due - @c handled requests: its counters are to be
 * published, but not on the path of the next request. The loop calls
 * kvr__chan_counters_flush() once it has been idle for a few passes,
 * before it sleeps, and at least every KVR_SRV_COUNTERS_NS while it
 * stays busy.
 */
void kvr__chan_counters_due(struct kvr_srv *s, struct kvr_conn *c);

/* Publish the counters of every polled channel that has some due. */
void kvr__chan_counters_flush(struct kvr_srv *s);

/* Publish the global counters to the control header. */
void kvr__chan_gstats(struct kvr_srv *s);

/* Count one answer of @c for its op and status (local mirrors). */
void kvr__chan_count(struct kvr_srv *s, struct kvr_conn *c, uint32_t op,
		     int status);

/* kvr__chan_publish - make claimed answers in @c's response ring visible
 * and ring the worker if it sleeps (disp.c per batch; l2_srv.c for
 * answers written later). */
void kvr__chan_publish(struct kvr_conn *c);

#endif /* KVR_SERVER_CHAN_H */
