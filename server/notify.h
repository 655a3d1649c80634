/* SPDX-License-Identifier: MIT */
/*
 * notify.h - kvringd's word to its service manager (systemd's sd_notify):
 * STATUS= lines while it starts, READY=1 once the socket accepts,
 * STOPPING=1 at SIGTERM. Without libsystemd at build time (KVR_HAVE_SYSTEMD
 * unset) every call is a no-op and the shipped unit is Type=simple.
 * Outside a notify service ($NOTIFY_SOCKET unset) sd_notify itself does
 * nothing, so the calls cost one getenv at start-up and shutdown only.
 */
#ifndef KVR_SERVER_NOTIFY_H
#define KVR_SERVER_NOTIFY_H

/* STATUS=<text>: shown by systemctl status. Printf format. */
void kvr__notify_status(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* The same with EXTEND_TIMEOUT_USEC=30 s: a start that makes progress
 * (the pool pre-fault) is not killed by TimeoutStartSec. */
void kvr__notify_progress(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* READY=1 with MAINPID and a STATUS naming the socket. Call only once the
 * listening socket accepts connections. */
void kvr__notify_ready(const char *socket_path);

/* STOPPING=1: the server is shutting down. */
void kvr__notify_stopping(void);

#endif /* KVR_SERVER_NOTIFY_H */
