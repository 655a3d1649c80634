/* SPDX-License-Identifier: MIT */
/*
 * disp.h - request dispatch (disp.c): one validated request against the
 * store, and what a transport calls after a batch. Event-loop thread
 * only.
 */
#ifndef KVR_SERVER_DISP_H
#define KVR_SERVER_DISP_H

#include <stdbool.h>
#include <stdint.h>

#include "kvringd.h"

/*
 * kvr__disp_exec - run one validated request against the store and build
 * its answer in s->ans. Return the answer's length; *type_out gets the
 * answer's record type. Never fails: errors become the answer's status.
 */
size_t kvr__disp_exec(struct kvr_srv *s, struct kvr_conn *c,
		      const struct kvr_req_view *v, uint32_t *type_out);

/*
 * kvr__disp_batch_done - after a transport published a batch's answers
 * (@nop: how many of each op, NULL when it answered none): their
 * latencies into the histograms, then store-ahead's next staged slot.
 */
void kvr__disp_batch_done(struct kvr_srv *s, struct kvr_conn *c,
			  const uint8_t *nop);

/* kvr__disp_time_parked - a parked answer of @op was delivered: time its
 * request from when it was parked. */
void kvr__disp_time_parked(struct kvr_srv *s, struct kvr_conn *c, uint32_t op);

#endif /* KVR_SERVER_DISP_H */
