/* SPDX-License-Identifier: MIT */
/*
 * tport_ring.h - the shared-memory ring transport (tport_ring.c): the
 * drain of a channel's request ring and the transport's operations.
 * Event-loop thread only.
 */
#ifndef KVR_SERVER_TPORT_RING_H
#define KVR_SERVER_TPORT_RING_H

#include "kvringd.h"

/*
 * kvr__tport_ring_drain - take up to KVR_SRV_BATCH requests from @c's
 * request ring, answer them, and ring the response doorbell once. A
 * malformed request or a damaged ring disconnects @c.
 * Return: the number of requests handled (0: nothing to do or blocked).
 */
unsigned kvr__tport_ring_drain(struct kvr_srv *s, struct kvr_conn *c);

/*
 * kvr__tport_ring_heat - put polled channel @c on the hot list
 * (kvr_srv.hot), which the loop polls on every pass; it is not on it.
 * kvr__tport_ring_cool - take @c off it, if it is on it. Both O(1); a
 * channel leaves the hot list before it leaves the polled list.
 */
void kvr__tport_ring_heat(struct kvr_srv *s, struct kvr_conn *c);
void kvr__tport_ring_cool(struct kvr_srv *s, struct kvr_conn *c);

/*
 * kvr__tport_ring_ops - the shared-memory ring transport: the loop drains
 * the request ring (kvr__tport_ring_drain) of every connection it
 * started; the socket only reports hang-up or BYE; a graceful stop
 * answers what is left in the ring with -ESHUTDOWN.
 */
extern const struct kvr_conn_ops kvr__tport_ring_ops;

#endif /* KVR_SERVER_TPORT_RING_H */
