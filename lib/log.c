/* SPDX-License-Identifier: MIT */
/*
 * The line logger of kvr's binaries. Each call formats the whole line
 * (timestamp, ident, pid, level letter, message, newline) into a stack
 * buffer and hands it to the kernel with one write(), which is what keeps
 * concurrent lines whole; there is no lock and no stdio buffering.
 *
 * Under systemd ($JOURNAL_STREAM names the log fd) a line is "<N>message"
 * instead, N the syslog priority of its level, so journalctl -p works.
 *
 * This is the only file in lib/ that prints, and only binaries call it
 * (see <kvring/log.h>). It does not rotate or filter by module; the rate
 * limit of lines a peer can cause is log_limit.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
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
/* syslog priorities of the levels: LOG_ERR, LOG_WARNING, LOG_INFO,
 * LOG_DEBUG, written as "<N>" for journald (sd-daemon(3)). */
static const char level_prio[] = {'3', '4', '6', '7'};

/*
 * Journal mode: -1 not decided yet, 0 plain lines, 1 journald lines. Decided
 * on the first line after start-up or a kvr_log_set_fd(), by the rule of
 * systemd.exec(5): $JOURNAL_STREAM names "<dev>:<ino>" of the stream
 * journald gave us, and only a log fd that *is* that stream gets prefixes
 * (a child whose stderr was redirected to a file must not). Relaxed: a
 * racing first line decides the same value twice.
 */
static atomic_int log_journal = -1;

static int journal_decide(int fd)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return 0;
	if (fstat(fd, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

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
	/* Relaxed: see the comment at log_level and log_journal. */
	atomic_store_explicit(&log_journal, -1, memory_order_relaxed);
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
	va_list ap;

	va_start(ap, fmt);
	kvr_logv(level, fmt, ap);
	va_end(ap);
}

void kvr_logv(int level, const char *fmt, va_list ap)
{
	int saved_errno = errno;
	char line[KVR_LOG_LINE_MAX];
	size_t len, start, cap = sizeof(line) - 1; /* room for '\n' */
	int n, fd, journal;

	if (level < KVR_LOG_ERR || !kvr_log_enabled(level))
		return;
	if (level > KVR_LOG_DEBUG)
		level = KVR_LOG_DEBUG;

	/* Relaxed: see the comment at log_level. */
	fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
	/* Relaxed: see the comment at log_journal. */
	journal = atomic_load_explicit(&log_journal, memory_order_relaxed);
	if (journal < 0) {
		journal = journal_decide(fd);
		atomic_store_explicit(&log_journal, journal,
				      memory_order_relaxed);
	}
	if (journal) {
		/* journald stamps time, ident and pid itself; the level
		 * becomes the entry's priority ("<4>pool: 93% full"). */
		n = snprintf(line, cap, "<%c>", level_prio[level]);
		len = n > 0 ? (size_t)n : 0;
	} else {
		len = format_time(line, cap);
		n = snprintf(line + len, cap - len, " %s[%ld] %c ", log_ident,
			     (long)getpid(), level_letter[level]);
		len += n > 0 ? (size_t)n : 0;
	}
	if (len >= cap)
		len = cap - 1;
	start = len;

	n = vsnprintf(line + len, cap - len, fmt, ap);
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

	write_line(fd, line, len);
	errno = saved_errno;
}
