/* SPDX-License-Identifier: MIT */
/*
 * tport_sock.h - the copy transport (tport_sock.c): requests, answers and
 * payload framed over the worker's socket. Event-loop thread only.
 */
#ifndef KVR_SERVER_TPORT_SOCK_H
#define KVR_SERVER_TPORT_SOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "kvringd.h"

/*
 * kvr__tport_sock_ops - the copy transport, for a worker that asked for it or a
 * server-private pool: requests, answers and payload are frames on the
 * socket (readable runs them, writable continues the send queue); the
 * server copies payload between the socket and its pool.
 */
extern const struct kvr_conn_ops kvr__tport_sock_ops;

#endif /* KVR_SERVER_TPORT_SOCK_H */
