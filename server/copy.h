/* SPDX-License-Identifier: MIT */
/*
 * copy.h - the copy transport (copy.c): requests, answers and payload
 * framed over the worker's socket. Event-loop thread only.
 */
#ifndef KVR_SERVER_COPY_H
#define KVR_SERVER_COPY_H

#include <stdbool.h>
#include <stdint.h>

#include "srv.h"

int kvr__copy_init(struct kvr_srv *s, struct kvr_conn *c);
void kvr__copy_fini(struct kvr_conn *c);

/* The copy connection's socket is readable: read and run frames. */
void kvr__copy_readable(struct kvr_srv *s, struct kvr_conn *c);

/* The copy connection's socket is writable: continue the send queue. */
void kvr__copy_writable(struct kvr_srv *s, struct kvr_conn *c);

#endif /* KVR_SERVER_COPY_H */
