/* SPDX-License-Identifier: MIT */
/*
 * kvr's wording for negative errno codes and the kvr_err detail buffer.
 * The table below is the code-side copy of docs/errors.md: change both
 * together. This file never prints, except kvr__assert_fail(), which is the
 * last word of a process whose own invariant broke.
 *
 * It deliberately owns no logging (log.c) and no new error codes.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvring/error.h>

/*
 * kvr's meaning of a code, or NULL when kvr gives it no special meaning.
 * Kept as one switch so docs/errors.md can be checked against it by eye.
 */
static const char *kvr_wording(int code)
{
	switch (code) {
	case 0:
		return "success";
	case EAGAIN:
		return "not ready yet (ring full or empty, or segment not "
		       "ready): retry or wait";
	case EINVAL:
		return "invalid argument (the caller broke the API contract)";
	case ENOMEM:
		return "out of memory in this process";
	case ENOSPC:
		return "chunk pool is full";
	case ERANGE:
		return "offset/length outside the pool";
	case EBADMSG:
		return "malformed record";
	case EPROTO:
		return "version or layout mismatch";
	case EOWNERDEAD:
		return "peer process is gone";
	case ETIMEDOUT:
		return "peer did not answer in time";
	case ECONNRESET:
		return "connection to the peer was lost";
	case ESHUTDOWN:
		return "server is shutting down";
	case EEXIST:
		return "already exists";
	case ENOENT:
		return "no such segment, key or object";
	case EMSGSIZE:
		return "message too large";
	case EPERM:
	case EACCES:
		return "permission denied (uid, gid or file mode)";
	case EBUSY:
		return "in use (pinned, leased or owned by a live process)";
	case ETIME:
		return "the transfer expired: kvringd reclaimed it at its "
		       "deadline (--xfer-ms); prepare it again";
	case EDQUOT:
		return "the channel's or its uid's quota is used up: commit "
		       "or release what it holds (kvringd --quota-pinned, "
		       "--quota-uid-pinned)";
	/* The ring's own damage codes (docs/ring.md). */
	case EILSEQ:
		return "ring position not 8-byte aligned (corrupt ring)";
	case ENOMSG:
		return "ring record of reserved type 0 (corrupt ring)";
	case EOVERFLOW:
		return "ring record runs past the published bytes (corrupt "
		       "ring)";
	default:
		return NULL;
	}
}

const char *kvr_strerror(int rc)
{
	/*
	 * One buffer per thread for codes nobody named: two threads
	 * formatting different unknown codes never see each other's text.
	 */
	static _Thread_local char unknown[48];
	/* -INT_MIN does not exist: test before negating, and treat it like
	 * any other unknown code. */
	int code = rc == INT_MIN ? -1 : rc < 0 ? -rc : rc;
	const char *s;

	s = kvr_wording(code);
	if (s)
		return s;
	/* glibc's description table: constant strings, thread-safe. */
	s = code > 0 ? strerrordesc_np(code) : NULL;
	if (s)
		return s;
	snprintf(unknown, sizeof(unknown), "unknown error %d", rc);
	return unknown;
}

int kvr_err_set(struct kvr_err *e, int code, const char *fmt, ...)
{
	int saved_errno = errno;
	va_list ap;
	int n;

	if (!e)
		return code;
	e->code = code;
	va_start(ap, fmt);
	n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	if (n < 0) {
		/* Only a broken format gets here; keep the code usable. */
		snprintf(e->msg, sizeof(e->msg), "%s", kvr_strerror(code));
	} else if ((size_t)n >= sizeof(e->msg)) {
		/* Cut: say so, so nobody mistakes the tail for the end. */
		memcpy(e->msg + sizeof(e->msg) - 4, "...", 4);
	}
	errno = saved_errno;
	return code;
}

void kvr_err_clear(struct kvr_err *e)
{
	if (!e)
		return;
	e->code = 0;
	e->msg[0] = '\0';
}

const char *kvr_err_str(const struct kvr_err *e, int rc)
{
	if (e && e->code == rc && rc != 0 && e->msg[0] != '\0')
		return e->msg;
	return kvr_strerror(rc);
}

void kvr__assert_fail(const char *expr, const char *file, int line)
{
	char buf[512];
	int n;

	n = snprintf(buf, sizeof(buf), "kvr assertion failed: %s at %s:%d\n",
		     expr, file, line);
	if (n > 0) {
		size_t len =
		    (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
		/* Best effort: we are about to abort either way. */
		ssize_t w = write(STDERR_FILENO, buf, len);
		(void)w;
	}
	abort();
}
