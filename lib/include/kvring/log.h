/* SPDX-License-Identifier: MIT */
/*
 * One-line-per-event logging for kvr's *binaries* (kvringd and the tools).
 * A line looks like
 *
 *   2026-01-31T12:00:00.123Z kvringd[4242] W pool: 93% full
 *
 * (UTC time with milliseconds, ident, pid, one level letter E/W/I/D, the
 * message) and reaches the log fd (stderr by default) in a single write(),
 * so lines from threads and processes sharing the fd never interleave
 * (up to PIPE_BUF bytes on a pipe).
 *
 * When $JOURNAL_STREAM says the log fd is journald's stream (a systemd
 * service), a line is "<N>message" instead: N is the syslog priority of the
 * level (E 3, W 4, I 6, D 7), and journald adds time, ident and pid.
 *
 * rings/, the library code in lib/ and worker/ never call this: they return
 * a code and fill a struct kvr_err, and the binary decides what to log.
 * Don't log per chunk; bump a counter in the segment's stats block instead.
 */
#ifndef KVRING_LOG_H
#define KVRING_LOG_H

#include <stdarg.h>

/* Levels, most severe first; a message is written when level <= current. */
enum kvr_log_level {
	KVR_LOG_ERR = 0,
	KVR_LOG_WARN = 1,
	KVR_LOG_INFO = 2,
	KVR_LOG_DEBUG = 3,
};

/* Longest line written, newline included; longer messages end in "...". */
#define KVR_LOG_LINE_MAX 2048

/*
 * kvr_log - write one line at @level if @level is enabled.
 * Thread-safe, async-signal-unsafe (it formats with vsnprintf). Newlines
 * inside the message become spaces so that one event stays one line.
 * Preserves errno. Write errors are ignored: logging never fails a caller.
 */
void kvr_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* kvr_log with a va_list. */
void kvr_logv(int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#define kvr_log_err(...)   kvr_log(KVR_LOG_ERR, __VA_ARGS__)
#define kvr_log_warn(...)  kvr_log(KVR_LOG_WARN, __VA_ARGS__)
#define kvr_log_info(...)  kvr_log(KVR_LOG_INFO, __VA_ARGS__)
#define kvr_log_debug(...) kvr_log(KVR_LOG_DEBUG, __VA_ARGS__)

/*
 * kvr_log_set_level - write messages up to @level (clamped to
 * KVR_LOG_ERR..KVR_LOG_DEBUG). The default is KVR_LOG_INFO.
 * Thread-safe (a relaxed atomic: a level change needs no ordering).
 */
void kvr_log_set_level(int level);

/* kvr_log_get_level - the current level. */
int kvr_log_get_level(void);

/*
 * kvr_log_enabled - whether a message at @level would be written; use it to
 * skip building an expensive message.
 */
int kvr_log_enabled(int level);

/*
 * kvr_log_parse_level - parse "err" (or "error"), "warn" (or "warning"),
 * "info", "debug"; case-insensitive.
 * Return: the level (>= 0), or -EINVAL for anything else or NULL.
 */
int kvr_log_parse_level(const char *s);

/*
 * kvr_log_set_ident - name shown before "[pid]" (default "kvr"); copied,
 * cut to 31 bytes. Call it once at start-up, before other threads log.
 */
void kvr_log_set_ident(const char *ident);

/*
 * kvr_log_set_fd - send lines to @fd instead of stderr (fd 2 is the
 * default). The fd is borrowed, never closed. Thread-safe.
 * Return: the previous fd.
 */
int kvr_log_set_fd(int fd);

/*
 * Lines a peer can cause (a worker, a client of the socket) are limited,
 * so that a flood of bad handshakes or requests cannot grow the log
 * without bound (log_limit.c; docs/config.md, "Log rate limit"). Each
 * (peer, call site) pair may write a burst of KVR_LOG_PEER_BURST lines,
 * then one per KVR_LOG_PEER_MS; the lines it may not write are counted,
 * and one "suppressed N similar lines from pid P" line says so once the
 * pair may write again (or at the next kvr_log_peer_flush()). All peers
 * together may write KVR_LOG_PEERS_BURST lines, then KVR_LOG_PEERS_PER_S
 * a second, so that many peers cannot flood either. Thread-safe (a
 * mutex: these lines are rare by design).
 */
#define KVR_LOG_PEER_BURST  10u
#define KVR_LOG_PEER_MS	    1000u
#define KVR_LOG_PEERS_BURST 200u
#define KVR_LOG_PEERS_PER_S 20u

/* kvr_log at @level, limited per (@peer, the call site's @fmt). @peer is
 * the peer's pid (0: a peer not known yet, such as a failed accept), or a
 * negative number naming a kind of event that is no process (the L2
 * tier's error replies, by kind); its summary then names no pid. */
void kvr_log_peer(int level, long peer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Write the pending "suppressed" lines of pairs that may write again, and
 * forget quiet pairs; kvringd calls it every heartbeat. */
void kvr_log_peer_flush(void);

/* Lines kvr_log_peer() did not write, since start (for the inspector). */
unsigned long long kvr_log_peer_suppressed(void);

#endif /* KVRING_LOG_H */
