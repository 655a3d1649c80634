/* SPDX-License-Identifier: MIT */
/*
 * kvrd.h - a private kvringd for the programs that test kvring: the
 * Criterion suites (tests/support/t_server.c), kvring-bench and
 * kvring-stress. One way to start one, for all three.
 *
 * This file owns the child's life: private names (socket, segment base,
 * log file) derived from our pid and a counter, so that two test processes,
 * two benches or a bench beside the suite never meet; fork and exec with
 * the child's stdout and stderr in the log; the child dies with us
 * (PR_SET_PDEATHSIG: SIGTERM, a clean stop, if we die first); waiting until
 * the server is ready; stopping it (SIGTERM, then SIGKILL after a timeout)
 * or killing it; removing what it left under the private names; and a
 * read-only mapping of its control segment.
 *
 * It does not choose the server's options beyond --socket and --name (the
 * callers do: the tests turn huge pages off, the bench lifts quotas), does
 * not pin CPUs (the bench does) and does not decide when to kill a server
 * (kvring-stress's killer does). Errors return -errno and print one line
 * naming what failed to stderr, prefixed with opts.prog, followed by the
 * tail of the server's log; the tests' wrappers then abort.
 */
#ifndef KVR_TOOLS_KVRD_H
#define KVR_TOOLS_KVRD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kvring/layout.h>

/* How kvrd_start() knows the server is ready. */
enum kvrd_ready {
	/* Its control segment, created by our child, says RUNNING; then it
	 * stays mapped read-only (hdr). Needs a kvringd of this layout. */
	KVRD_READY_CTL = 0,
	/* Its log holds the "kvringd ready" line. Works with any kvringd
	 * version, e.g. an older build in an A/B benchmark; nothing is
	 * mapped. */
	KVRD_READY_LOG,
};

/*
 * struct kvrd_opts - how to start a private kvringd. Borrowed by
 * kvrd_init() and kvrd_start() (the strings must live as long as the
 * struct kvrd). Zero means the default.
 */
struct kvrd_opts {
	const char *prog; /* message prefix; default "kvrd" */
	/* The binary; default $KVRINGD, else kvr_find_kvringd() (beside
	 * this program, or ../server/ in a build tree), else "kvringd"
	 * from $PATH. */
	const char *bin;
	/* Names: /tmp/<tag>-<pid>[-<seq>].sock, segment base
	 * <tag>-<pid>[-<seq>], log /tmp/<tag>-<pid>[-<seq>].log, where
	 * -<seq> is left out for the process's first server. Default "kvrd". */
	const char *tag;
	const char *log_path;  /* the log instead of the /tmp one */
	enum kvrd_ready ready; /* default KVRD_READY_CTL */
	int start_timeout_ms;  /* default 10000 */
	bool own_pgrp;	       /* child in its own process group, so a
				  terminal's Ctrl-C reaches only us */
};

/*
 * struct kvrd - one private kvringd. Owned by the caller (stack, static or
 * embedded); kvrd_cleanup() releases everything. Fields are read-only for
 * callers. pid 0 means "not running"; the names stay across restarts, so a
 * restarted server meets what the last one left (as under a supervisor).
 */
struct kvrd {
	pid_t pid;	    /* our child, 0 when none */
	char sock[108];	    /* socket path (--socket) */
	char name[64];	    /* segment base name (--name) */
	char ctl_name[80];  /* <name>.ctl */
	char log_path[160]; /* the child's stdout and stderr */
	void *ctl;	    /* read-only mapping of the control segment */
	size_t ctl_bytes;
	const struct kvr_ctl_hdr_shm *hdr; /* == ctl, NULL if unmapped */
	void *dir; /* read-only channel directory (abi 4.0), or NULL */
	size_t dir_bytes;
	struct kvrd_opts o; /* as given to kvrd_init() */
	char bin[4096];	    /* the binary to exec */
	long log_off; /* log size at the last start: where "ready" is sought */
};

/*
 * kvrd_init - pick @d's private names and binary from @o (may be NULL for
 * all defaults) and truncate the log; starts nothing. Names are unique per
 * process and call.
 */
void kvrd_init(struct kvrd *d, const struct kvrd_opts *o);

/*
 * kvrd_start - start kvringd with --socket and --name from @d, then the
 * NULL-terminated @args (may be NULL), and wait up to start_timeout_ms
 * until it is ready (enum kvrd_ready). A mapping left by a previous server
 * is dropped first.
 * Return: 0; -ECHILD if it exited during start-up, -ETIMEDOUT if it was not
 * ready in time (it is then SIGKILLed), or the -errno of fork. On failure
 * pid is 0 and the reason and the log's tail are on stderr.
 */
int kvrd_start(struct kvrd *d, const char *const *args);

/*
 * kvrd_spawn - fork and exec @d's binary with exactly @argv (argv[0] is
 * what the child sees as its name) and the log as its stdout and stderr,
 * without waiting and without recording the pid in @d.
 * Return: the child's pid, or -errno if fork failed (an exec failure is
 * the child exiting 127).
 */
pid_t kvrd_spawn(struct kvrd *d, const char *const *argv);

/*
 * kvrd_wait_exit - reap @pid within @timeout_ms (SIGKILLed after that).
 * Return: its exit status, 128 + the signal that ended it, or -1 if it had
 * to be killed or is not our child.
 */
int kvrd_wait_exit(pid_t pid, int timeout_ms);

/* kvrd_stop - SIGTERM our server and kvrd_wait_exit() it; pid becomes 0.
 * Return: as kvrd_wait_exit(), or -1 if none was running. */
int kvrd_stop(struct kvrd *d, int timeout_ms);

/* kvrd_kill - SIGKILL and reap our server (no-op if none); its socket and
 * segments stay behind, as after a crash. */
void kvrd_kill(struct kvrd *d);

/*
 * kvrd_map - (re)map the control segment read-only and check its header
 * (magic, ABI, layout hash; the check's acquire on `ready` orders the
 * geometry fields). With @creator != 0, a segment another process created
 * (a killed predecessor's) or one not RUNNING yet is -EAGAIN.
 * Return: 0 (hdr set), or -errno (unmapped).
 */
int kvrd_map(struct kvrd *d, pid_t creator);

/* kvrd_unmap - drop the control segment mapping (no-op if none). */
void kvrd_unmap(struct kvrd *d);

/*
 * kvrd_cleanup - kill a server still running, unmap, and remove what it
 * may have left under the private names: the socket, its lock file, both
 * segments, and with @remove_log the log. Safe twice, and on a struct
 * kvrd_init() never saw (zeroed).
 */
void kvrd_cleanup(struct kvrd *d, bool remove_log);

/* kvrd_log_tail - print the log's last @lines lines to stderr. */
void kvrd_log_tail(const struct kvrd *d, unsigned lines);

/* kvrd_log_has - whether the log holds @needle (on one line). */
bool kvrd_log_has(const struct kvrd *d, const char *needle);

#endif /* KVR_TOOLS_KVRD_H */
