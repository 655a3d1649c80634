/* SPDX-License-Identifier: MIT */
/*
 * notify.c - the service-manager side of kvringd's start-up and shutdown
 * (see notify.h). It uses libsystemd's sd_notify() rather than writing
 * the datagram protocol by hand: libsystemd is a kept Debian library, it
 * knows the abstract-namespace and vsock forms of $NOTIFY_SOCKET, and it
 * is what systemd's own documentation asks daemons to use.
 *
 * This file decides nothing about readiness: the loop calls
 * kvr__notify_ready() after listen() and after the accept is armed
 * (loop.c), and srv.c reports pre-fault progress. Failures to notify are
 * logged at debug level and otherwise ignored: a daemon must not stop
 * because its supervisor did not listen.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <kvring/log.h>

#include "notify.h"

#ifdef KVR_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static void send_state(const char *state)
{
	int rc = sd_notify(0, state);

	if (rc < 0)
		kvr_log_debug("sd_notify: %d", rc);
}
#else
static void send_state(const char *state)
{
	(void)state;
}
#endif

void kvr__notify_status(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "STATUS=");
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	send_state(buf);
}

void kvr__notify_progress(const char *fmt, ...)
{
	static const char extend[] = "EXTEND_TIMEOUT_USEC=30000000\nSTATUS=";
	char buf[256];
	va_list ap;

	memcpy(buf, extend, sizeof(extend));
	va_start(ap, fmt);
	vsnprintf(buf + sizeof(extend) - 1, sizeof(buf) - sizeof(extend) + 1,
		  fmt, ap);
	va_end(ap);
	send_state(buf);
}

void kvr__notify_ready(const char *socket_path)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "READY=1\nMAINPID=%d\nSTATUS=serving on %s",
		 (int)getpid(), socket_path);
	send_state(buf);
}

void kvr__notify_stopping(void)
{
	send_state("STOPPING=1\nSTATUS=stopping");
}
