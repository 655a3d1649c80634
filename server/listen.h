/* SPDX-License-Identifier: MIT */
/*
 * listen.h - kvringd's single-instance lock and listening socket
 * (listen.c). Called by srv.c at start-up and teardown only.
 */
#ifndef KVR_SERVER_LISTEN_H
#define KVR_SERVER_LISTEN_H

#include "kvringd.h"

/*
 * kvr__listen_lock - take <socket>.lock (flock, non-blocking) and write our
 * pid into it. Return 0, or -EADDRINUSE when another kvringd holds it (the
 * log names its pid), or -errno from open.
 */
int kvr__listen_lock(struct kvr_srv *s);

/*
 * kvr__listen_open - bind and listen on the socket path (0600, or 0660 and
 * the group with --group). An existing socket file nobody answers on is
 * replaced; one that answers makes us refuse (-EADDRINUSE); a non-socket
 * file too (-EEXIST). Return 0 or -errno, with the reason logged.
 */
int kvr__listen_open(struct kvr_srv *s);

/* kvr__listen_remove - unlink the socket path if it is still the file we
 * bound. Idempotent. */
void kvr__listen_remove(struct kvr_srv *s);

/* kvr__listen_unlock - unlink <socket>.lock (if it is still ours) and drop
 * the lock; at exit and after a failed start. No-op when not held. */
void kvr__listen_unlock(struct kvr_srv *s);

#endif /* KVR_SERVER_LISTEN_H */
