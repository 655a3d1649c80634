/* SPDX-License-Identifier: MIT */
/*
 * nofile.h - kvringd's open-file limit (RLIMIT_NOFILE), checked and raised
 * once at start, before anything is created. Owns the estimate of how
 * many descriptors --max-workers needs; nothing else.
 */
#ifndef KVR_SRV_NOFILE_H
#define KVR_SRV_NOFILE_H

#include <stdint.h>

#include "config.h"

/*
 * kvr__nofile_need - descriptors kvringd may hold with @cfg: per channel
 * its socket, pidfd, two doorbell eventfds and its block memfd; per
 * pending handshake a socket and a pidfd; a fixed base (stdio, the
 * runtime directory, lock, listening socket, signalfd, timerfd, io_uring,
 * the control, pool and directory segments, threads) and, with --l2, the
 * tier's connections.
 */
uint64_t kvr__nofile_need(const struct kvr_config *cfg);

/*
 * kvr__nofile_raise - make the soft RLIMIT_NOFILE cover
 * kvr__nofile_need(@cfg): raised toward the hard limit (never above it,
 * which stays the operator's), logged once when raised.
 * Return: 0; -EMFILE when the hard limit is too low (logged: a sentence
 * naming --max-workers and `ulimit -n`); -errno of getrlimit/setrlimit.
 */
int kvr__nofile_raise(const struct kvr_config *cfg);

#endif /* KVR_SRV_NOFILE_H */
