/* SPDX-License-Identifier: MIT */
/*
 * l2_net.h - an L2 lane (l2_net.c): one thread with its own connections
 * to Redis, its own cluster slot map and a job queue the event loop fills
 * (docs/l2.md, "Design"). Only l2_srv.c starts, feeds and stops lanes; a
 * lane hands each job back through kvr__l2_done() (l2.h).
 */
#ifndef KVR_SERVER_L2_NET_H
#define KVR_SERVER_L2_NET_H

#include "l2.h"

struct kvr_l2_lane;

/*
 * kvr__l2_lane_create - a lane thread with its own connections to the
 * configured nodes. Connects lazily. Return: 0 and *out, or -errno.
 */
int kvr__l2_lane_create(struct kvr_l2 *l2, unsigned idx,
			struct kvr_l2_lane **out);

/* Queue a job (never blocks: the loop bounded the count already). */
void kvr__l2_lane_submit(struct kvr_l2_lane *ln, struct kvr_l2_job *j);

/*
 * kvr__l2_lane_destroy - stop the thread after the job it is running (a
 * bounded socket timeout at worst), then hand every job still queued to
 * the done queue unrun (items KVR_L2_RES_FAIL), close its sockets.
 */
void kvr__l2_lane_destroy(struct kvr_l2_lane *ln);

#endif /* KVR_SERVER_L2_NET_H */
