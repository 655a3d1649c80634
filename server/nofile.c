/* SPDX-License-Identifier: MIT */
/*
 * nofile.c - kvringd's open-file limit. Since ABI 3.0 every channel holds
 * one more descriptor in kvringd (its block memfd), so the common default
 * soft limit of 1024 no longer covers a large --max-workers: a connect
 * would fail deep in the claim with EMFILE. Instead the limit is settled
 * once at start: the soft limit is raised as far as the configuration
 * needs (the hard limit is the operator's and is never raised), and a
 * hard limit that cannot cover it stops the start with a sentence that
 * says which flag and which limit to change. This file does not count
 * descriptors at run time.
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include <kvring/log.h>

#include "nofile.h"
#include "kvringd.h"

/* Per channel: socket, pidfd, request and response eventfds, block. */
#define FDS_PER_CHANNEL 5u
/* Per pending handshake: socket, pidfd. */
#define FDS_PER_PENDING 2u
/* Everything else (stdio, directory, lock, listener, signalfd, timerfd,
 * io_uring, three segments and their read-only copies, prefault threads,
 * the log), with room to spare. */
#define FDS_BASE 64u
/* The L2 tier: its lanes' connections to every node, and a margin. */
#define FDS_L2 128u

uint64_t kvr__nofile_need(const struct kvr_config *cfg)
{
	uint64_t n = FDS_BASE;

	n += (uint64_t)cfg->max_workers * FDS_PER_CHANNEL;
	n += (uint64_t)KVR_SRV_PENDING_MAX * FDS_PER_PENDING;
	if (cfg->l2.kind)
		n += FDS_L2;
	return n;
}

int kvr__nofile_raise(const struct kvr_config *cfg)
{
	uint64_t need = kvr__nofile_need(cfg);
	struct rlimit rl;
	rlim_t old;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		kvr_log_err("read the open-file limit (RLIMIT_NOFILE): %s",
			    strerror(errno));
		return -errno;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
		kvr_log_err("open-file limit too low: --max-workers %u needs "
			    "about %llu descriptors, but the hard limit "
			    "(RLIMIT_NOFILE) is %llu; raise it (ulimit -n "
			    "%llu as root, or LimitNOFILE= in the systemd "
			    "unit) or start with a lower --max-workers",
			    cfg->max_workers, (unsigned long long)need,
			    (unsigned long long)rl.rlim_max,
			    (unsigned long long)need);
		return -EMFILE;
	}
	old = rl.rlim_cur;
	rl.rlim_cur = (rlim_t)need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		int rc = -errno;

		kvr_log_err("raise the open-file limit (RLIMIT_NOFILE) from "
			    "%llu to %llu: %s; raise it before starting "
			    "kvringd (ulimit -n %llu) or lower --max-workers",
			    (unsigned long long)old, (unsigned long long)need,
			    strerror(-rc), (unsigned long long)need);
		return rc;
	}
	kvr_log_info(
	    "open-file limit (RLIMIT_NOFILE) raised from %llu to "
	    "%llu for --max-workers %u (hard limit %llu)",
	    (unsigned long long)old, (unsigned long long)need, cfg->max_workers,
	    rl.rlim_max == RLIM_INFINITY ? 0ull
					 : (unsigned long long)rl.rlim_max);
	return 0;
}
