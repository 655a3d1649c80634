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

/*
 * kvr__copy_ops - the copy transport, for a worker that asked for it or a
 * server-private pool: requests, answers and payload are frames on the
 * socket (readable runs them, writable continues the send queue); the
 * server copies payload between the socket and its pool.
 */
extern const struct kvr_conn_ops kvr__copy_ops;

#endif /* KVR_SERVER_COPY_H */
