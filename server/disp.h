/* SPDX-License-Identifier: MIT */
/*
 * disp.h - request dispatch (disp.c): one validated request against the
 * store, and the drain of a channel's request ring. Event-loop thread
 * only.
 */
#ifndef KVR_SERVER_DISP_H
#define KVR_SERVER_DISP_H

#include <stdbool.h>
#include <stdint.h>

#include "srv.h"

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

/*
 * kvr__disp_ring_ops - the shared-memory ring transport: the loop drains
 * the request ring (kvr__disp_drain) of every connection it started;
 * the socket only reports hang-up or BYE; a graceful stop answers what is
 * left in the ring with -ESHUTDOWN.
 */
extern const struct kvr_conn_ops kvr__disp_ring_ops;

#endif /* KVR_SERVER_DISP_H */
