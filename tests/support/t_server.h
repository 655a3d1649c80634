/* SPDX-License-Identifier: MIT */
/*
 * t_server.h - test helper: a real kvringd on a private socket path and
 * segment name, through the one private-kvringd helper that kvring-bench
 * and kvring-stress use too (tools/kvrd/kvrd.h, struct kvrd). This file
 * adds only the tests' conventions: small pages and a small pool unless a
 * test asks otherwise, timeouts scaled by $KVR_TEST_TIMEOUT_MULT, and
 * set-up failures that print the reason with the server's log and abort
 * (tests/ convention). Not for library code.
 *
 * The server's stderr goes to a log file (srv->log_path) that tests can grep
 * with t_server_log_has(); the file is removed by t_server_cleanup()
 * unless $KVR_KEEP_LOGS is set.
 */
#ifndef KVR_T_SERVER_H
#define KVR_T_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kvring/layout.h>

#include "kvrd.h"

/*
 * t_server_init - pick a unique socket path and segment name (per test
 * process and call); starts nothing. Call t_server_start() next.
 */
void t_server_init(struct kvrd *t);

/*
 * t_server_start - start kvringd with --socket/--name from @t,
 * --no-prefault, --huge-pages off (a later --huge-pages in @args wins), a
 * small pool (--pool-size 64M unless @args gives one), plus the
 * NULL-terminated @args (may be NULL). Waits (up to 10 s, scaled) until
 * the control segment our child created says RUNNING, then keeps it
 * mapped. Aborts if the server does not come up.
 */
void t_server_start(struct kvrd *t, const char *const *args);

/*
 * t_server_spawn - start kvringd with exactly @argv (argv[0] ignored) and
 * its stderr in @t's log, without waiting. Returns the pid.
 */
pid_t t_server_spawn(struct kvrd *t, const char *const *argv);

/*
 * t_server_spawn_as - start kvringd as @uid (and group @uid): argv[0] is
 * the binary, @argv exactly its arguments, its stderr in @t's log. Sets
 * t->pid and returns it without waiting; needs root. The child exits 126
 * if it cannot take the uid, 127 if the exec fails.
 */
pid_t t_server_spawn_as(struct kvrd *t, const char *const *argv, uid_t uid);

/* t_kill_reap - SIGKILL the child @pid and reap it (a worker the test
 * kills in the middle of something). */
void t_kill_reap(pid_t pid);

/* t_fork_ready - fork a child that runs @child(@arg), says it is done and
 * then waits to be killed (t_kill_reap); return its pid once it has said
 * so, or -1 (nothing left running) when the fork or the child failed. */
pid_t t_fork_ready(void (*child)(void *arg), void *arg);

/* t_server_wait_exit - reap @pid; the exit status, or 128+signal, or -1
 * if it does not exit within @timeout_ms (it is then SIGKILLed). */
int t_server_wait_exit(pid_t pid, int timeout_ms);

/* t_server_stop - SIGTERM and wait; returns the exit status (see above). */
int t_server_stop(struct kvrd *t);

/* t_server_kill - SIGKILL and reap; segments and socket stay behind. */
void t_server_kill(struct kvrd *t);

/* t_server_cleanup - unmap, remove leftovers (socket, lock, segments,
 * log). Safe after stop or kill, and twice. */
void t_server_cleanup(struct kvrd *t);

/* t_server_down - a suite's .fini for one plain server: SIGTERM if it
 * still runs, then t_server_cleanup(). */
void t_server_down(struct kvrd *t);

/* t_server_map - (re)map the control segment read-only; 0 or -errno. */
int t_server_map(struct kvrd *t);

/* A global counter, read with a relaxed load (fields of kvr_gstats_shm). */
#define T_GSTAT(t, field)                                                      \
	atomic_load_explicit(&(t)->hdr->stats.field, memory_order_relaxed)

/* Channel block @i, mapped read-only from the server's fd through /proc
 * (abi 3.0: each block is a memfd of its own); a free channel reads as
 * an all-zero block (state FREE). */
const struct kvr_channel_shm *t_server_chan(const struct kvrd *t, uint32_t i);

/* A channel counter (fields of kvr_cstats_shm). */
#define T_CSTAT(t, i, field)                                                   \
	atomic_load_explicit(&t_server_chan((t), (i))->stats.field,            \
			     memory_order_relaxed)

/*
 * t_wait_until - poll @cond(@arg) every 5 ms until it is true or
 * @timeout_ms passed (scaled by $KVR_TEST_TIMEOUT_MULT). Returns the last
 * value of @cond. A condition, not a timed assertion: the timeout only
 * bounds how long a failing test hangs.
 */
bool t_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms);

/* Whether the server's log contains @needle. */
bool t_server_log_has(const struct kvrd *t, const char *needle);

/* Path of the kvringd binary under test: $KVRINGD, else the build's. */
const char *t_server_bin(void);

/* Scale a timeout by $KVR_TEST_TIMEOUT_MULT (default 1). */
int t_timeout_ms(int ms);

#endif /* KVR_T_SERVER_H */
