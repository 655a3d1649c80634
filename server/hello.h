/* SPDX-License-Identifier: MIT */
/*
 * hello.h - the handshake of a new worker socket (hello.c), from accept
 * to the welcome. Event-loop thread only.
 */
#ifndef KVR_SERVER_HELLO_H
#define KVR_SERVER_HELLO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvringd.h"

/* A new socket from accept: start its handshake (or refuse it). */
void kvr__hello_accepted(struct kvr_srv *s, int fd);

/* A HELLO connection's socket is readable. */
void kvr__hello_readable(struct kvr_srv *s, struct kvr_conn *c);

/* How a connection in the handshake is served (its socket's events go to
 * kvr__hello_readable); admission replaces it with the transport's. */
extern const struct kvr_conn_ops kvr__hello_ops;

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

#endif /* KVR_SERVER_HELLO_H */
