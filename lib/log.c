/* SPDX-License-Identifier: MIT */
/*
 * The line logger of kvr's binaries. Each call formats the whole line
 * (timestamp, ident, pid, level letter, message, newline) into a stack
 * buffer and hands it to the kernel with one write(), which is what keeps
 * concurrent lines whole; there is no lock and no stdio buffering.
 *
 * This is the only file in lib/ that prints, and only binaries call it
 * (see <kvring/log.h>). It does not rotate, filter by module or rate-limit.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <kvring/log.h>

/*
 * Process-wide settings. Relaxed is enough for both atomics: each is a
 * single independent value, and a logger that picks up a new level or fd
 * one line late is still correct.
 */
static atomic_int log_level = KVR_LOG_INFO;
static atomic_int log_fd = STDERR_FILENO;
/* Written once at start-up by kvr_log_set_ident(), before threads log. */
static char log_ident[32] = "kvr";

static const char level_letter[] = {'E', 'W', 'I', 'D'};

void kvr_log_set_level(int level)
{
	if (level < KVR_LOG_ERR)
		level = KVR_LOG_ERR;
	if (level > KVR_LOG_DEBUG)
		level = KVR_LOG_DEBUG;
	/* Relaxed: see the comment at log_level. */
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

int kvr_log_get_level(void)
{
	/* Relaxed: see the comment at log_level. */
	return atomic_load_explicit(&log_level, memory_order_relaxed);
}

int kvr_log_enabled(int level)
{
	return level <= kvr_log_get_level();
}

int kvr_log_parse_level(const char *s)
{
	static const struct {
		const char *name;
		int level;
	} names[] = {
	    {"err", KVR_LOG_ERR},   {"error", KVR_LOG_ERR},
	    {"warn", KVR_LOG_WARN}, {"warning", KVR_LOG_WARN},
	    {"info", KVR_LOG_INFO}, {"debug", KVR_LOG_DEBUG},
	};

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(s, names[i].name) == 0)
			return names[i].level;
	return -EINVAL;
}

void kvr_log_set_ident(const char *ident)
{
	snprintf(log_ident, sizeof(log_ident), "%s", ident ? ident : "kvr");
}

int kvr_log_set_fd(int fd)
{
	/* Relaxed: see the comment at log_level. */
	return atomic_exchange_explicit(&log_fd, fd, memory_order_relaxed);
}

/* "2026-01-31T12:00:00.123Z" into buf (at least 25 bytes); returns length. */
static size_t format_time(char *buf, size_t n)
{
	struct timespec ts;
	struct tm tm;
	size_t len;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	len = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
	len += (size_t)snprintf(buf + len, n - len, ".%03ldZ",
				ts.tv_nsec / 1000000L);
	return len;
}

/* Write all of buf, retrying only on EINTR; errors are dropped. */
static void write_line(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		/* Short writes happen only past PIPE_BUF or on full disks. */
		buf += w;
		len -= (size_t)w;
	}
}

void kvr_log(int level, const char *fmt, ...)
{
	int saved_errno = errno;
	char line[KVR_LOG_LINE_MAX];
	size_t len, start, cap = sizeof(line) - 1; /* room for '\n' */
	va_list ap;
	int n;

	if (level < KVR_LOG_ERR || !kvr_log_enabled(level))
		return;
	if (level > KVR_LOG_DEBUG)
		level = KVR_LOG_DEBUG;

	len = format_time(line, cap);
	n = snprintf(line + len, cap - len, " %s[%ld] %c ", log_ident,
		     (long)getpid(), level_letter[level]);
	len += n > 0 ? (size_t)n : 0;
	if (len >= cap)
		len = cap - 1;
	start = len;

	va_start(ap, fmt);
	n = vsnprintf(line + len, cap - len, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= cap - len) {
		/* Cut: end with "..." so the reader knows. */
		len = cap - 1;
		memcpy(line + len - 3, "...", 3);
	} else {
		len += (size_t)n;
	}
	/* One event, one line: fold newlines and drop trailing ones. */
	while (len > start && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	for (size_t i = start; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len++] = '\n';

	/* Relaxed: see the comment at log_level. */
	write_line(atomic_load_explicit(&log_fd, memory_order_relaxed), line,
		   len);
	errno = saved_errno;
}
