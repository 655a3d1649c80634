/* SPDX-License-Identifier: MIT */
/*
 * loop.h - kvringd's event loop (one thread, io_uring) and the helpers the
 * other server files use to queue io_uring operations. The loop owns the
 * ring, the spin-then-sleep policy, housekeeping and the graceful stop;
 * what happens on each event lives in hello.c, chan.c, disp.c, tport_ring.c and
 * tport_sock.c.
 * Queueing an operation is uring.h's.
 */
#ifndef KVR_SERVER_LOOP_H
#define KVR_SERVER_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "kvringd.h"

/*
 * kvr_loop_run - run until SIGTERM/SIGINT, then stop gracefully: stop
 * accepting, answer requests already in the rings with -ESHUTDOWN, close
 * every worker. The caller then calls kvr_srv_destroy().
 * Return: 0 after a signal, -ENOTRECOVERABLE when the shutdown self-check
 * (store audit, nothing held with every worker gone) failed, or -errno if
 * io_uring failed.
 */
int kvr_loop_run(struct kvr_srv *s);

#endif /* KVR_SERVER_LOOP_H */
