/* SPDX-License-Identifier: MIT */
/*
 * Process liveness for shared-memory owners. A pid alone names a process
 * only until it is reused, so kvr identifies a process by (pid, start
 * time): the start time is field 22 of /proc/PID/stat, in clock ticks since
 * boot, and a reused pid gets a later one (LMDB's reader check has the same
 * idea). Used by the stale-segment sweep, the inspector's alive/dead column
 * and the server's worker bookkeeping.
 *
 * This file does not watch processes (pidfds belong to the server) and
 * knows nothing about segments. Pids are those of the caller's pid
 * namespace: a header written in another namespace cannot be checked here.
 */
#ifndef KVRING_PROC_H
#define KVRING_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * kvr_proc_start_time - start time of a running process.
 * @pid: the process (> 0).
 * @out: receives the start time in clock ticks since boot; untouched on
 *       failure.
 * Parses /proc/PID/stat robustly: the command name may hold spaces and
 * ')' so the fields are counted from the *last* ')'.
 * Return: 0; -EINVAL for pid <= 0; -ENOENT if no such process;
 * -EBADMSG if the stat line cannot be parsed; another -errno from open/read.
 */
int kvr_proc_start_time(pid_t pid, uint64_t *out);

/*
 * kvr_proc_state - the state letter of a process (field 3 of
 * /proc/PID/stat: 'R', 'S', 'D', 'T' stopped, 'Z' zombie...).
 * Return: 0 and *state set; the errors of kvr_proc_start_time() (then
 * *state is untouched).
 */
int kvr_proc_state(pid_t pid, char *state);

/*
 * kvr_proc_alive - whether (@pid, @start_time) still names a live process.
 * Alive means: the pid exists (kill(pid, 0) succeeds or fails with EPERM),
 * it is not a zombie, and its start time equals @start_time. A
 * @start_time of 0 means "unknown" and skips the comparison (existence
 * only). If the start time cannot be read although the pid exists (for
 * example /proc is not mounted) the answer is "alive": when in doubt, keep.
 * Return: true if alive, false otherwise (also for pid <= 0).
 */
bool kvr_proc_alive(pid_t pid, uint64_t start_time);

/*
 * kvr__proc_parse_stat - internal, exposed for tests: parse the text of a
 * /proc/PID/stat line. On success stores the state letter (field 3) in
 * *state and the start time (field 22) in *start.
 * Return: 0, or -EBADMSG if the line is malformed (outputs untouched).
 */
int kvr__proc_parse_stat(const char *line, char *state, uint64_t *start);

#endif /* KVRING_PROC_H */
