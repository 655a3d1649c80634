/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for lib/log.c: the exact line format (checked with a POSIX
 * regex), level filtering, level parsing, one line per event, truncation,
 * and whole lines when threads log at once. stderr is redirected to a
 * pipe or file for each test and restored afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/log.h>

static int saved_stderr = -1;

/* Point fd 2 at a fresh pipe; returns the read end. */
static int capture_stderr(void)
{
	int p[2];

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0, "pipe: %s", strerror(errno));
	saved_stderr = dup(STDERR_FILENO);
	cr_assert_geq(saved_stderr, 0);
	cr_assert_eq(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
	close(p[1]);
	return p[0];
}

/* Restore fd 2 and read everything the pipe holds into buf. */
static size_t release_stderr(int rd, char *buf, size_t n)
{
	size_t len = 0;
	ssize_t r;

	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	saved_stderr = -1;
	while (len < n - 1 && (r = read(rd, buf + len, n - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = '\0';
	close(rd);
	return len;
}

static void setup(void)
{
	kvr_log_set_ident("kvringd");
	kvr_log_set_level(KVR_LOG_INFO);
}

TestSuite(log, .init = setup, .timeout = 10);

/* Whether line (without its newline) matches the STYLE.md format. */
static bool line_ok(const char *line, char letter, const char *msg)
{
	char pat[512];
	regex_t re;
	bool ok;

	snprintf(pat, sizeof(pat),
		 "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
		 "\\.[0-9]{3}Z kvringd\\[%ld\\] %c %s$",
		 (long)getpid(), letter, msg);
	cr_assert_eq(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB), 0);
	ok = regexec(&re, line, 0, NULL, 0) == 0;
	regfree(&re);
	return ok;
}

Test(log, writes_one_formatted_line_when_level_enabled)
{
	char buf[4096];
	int rd = capture_stderr();
	size_t len;

	kvr_log_warn("pool: %d%% full", 93);
	len = release_stderr(rd, buf, sizeof(buf));
	cr_assert_gt(len, 0u, "nothing written");
	cr_assert_eq(buf[len - 1], '\n', "no newline: \"%s\"", buf);
	buf[len - 1] = '\0';
	cr_expect_null(strchr(buf, '\n'), "more than one line: \"%s\"", buf);
	cr_expect(line_ok(buf, 'W', "pool: 93% full"), "bad line: \"%s\"", buf);
}

Test(log, uses_level_letters_when_each_level_logs)
{
	char buf[4096], *save = NULL, *l;
	const char letters[] = "EWID";
	int rd, i = 0;

	kvr_log_set_level(KVR_LOG_DEBUG);
	rd = capture_stderr();
	kvr_log_err("m");
	kvr_log_warn("m");
	kvr_log_info("m");
	kvr_log_debug("m");
	release_stderr(rd, buf, sizeof(buf));
	for (l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		cr_expect(line_ok(l, letters[i++], "m"), "line %d: \"%s\"", i,
			  l);
	cr_expect_eq(i, 4, "got %d lines", i);
}

Test(log, drops_message_when_level_below_threshold)
{
	char buf[4096];
	int rd;

	kvr_log_set_level(KVR_LOG_WARN);
	cr_expect_eq(kvr_log_get_level(), KVR_LOG_WARN);
	cr_expect(!kvr_log_enabled(KVR_LOG_INFO));
	rd = capture_stderr();
	kvr_log_info("hidden");
	kvr_log_debug("hidden");
	kvr_log_err("shown");
	release_stderr(rd, buf, sizeof(buf));
	cr_expect_null(strstr(buf, "hidden"), "filtered line leaked: %s", buf);
	cr_expect_not_null(strstr(buf, " E shown\n"), "got: %s", buf);
}

Test(log, clamps_level_when_out_of_range)
{
	kvr_log_set_level(99);
	cr_expect_eq(kvr_log_get_level(), KVR_LOG_DEBUG);
	kvr_log_set_level(-5);
	cr_expect_eq(kvr_log_get_level(), KVR_LOG_ERR);
}

Test(log, parses_level_when_name_known)
{
	cr_expect_eq(kvr_log_parse_level("debug"), KVR_LOG_DEBUG);
	cr_expect_eq(kvr_log_parse_level("info"), KVR_LOG_INFO);
	cr_expect_eq(kvr_log_parse_level("warn"), KVR_LOG_WARN);
	cr_expect_eq(kvr_log_parse_level("WARNING"), KVR_LOG_WARN);
	cr_expect_eq(kvr_log_parse_level("err"), KVR_LOG_ERR);
	cr_expect_eq(kvr_log_parse_level("error"), KVR_LOG_ERR);
}

Test(log, rejects_level_when_name_unknown)
{
	cr_expect_eq(kvr_log_parse_level("verbose"), -EINVAL);
	cr_expect_eq(kvr_log_parse_level(""), -EINVAL);
	cr_expect_eq(kvr_log_parse_level(NULL), -EINVAL);
}

Test(log, folds_newlines_when_message_has_them)
{
	char buf[4096];
	size_t len;
	int rd = capture_stderr();

	kvr_log_info("a\nb\r\nc\n\n");
	len = release_stderr(rd, buf, sizeof(buf));
	cr_assert_gt(len, 0u);
	buf[len - 1] = '\0';
	cr_expect_null(strchr(buf, '\n'), "more than one line: %s", buf);
	cr_expect(line_ok(buf, 'I', "a b  c"), "got: \"%s\"", buf);
}

Test(log, cuts_line_when_message_too_long)
{
	char *big = malloc(10000), buf[8192];
	size_t len;
	int rd;

	cr_assert_not_null(big);
	memset(big, 'z', 9999);
	big[9999] = '\0';
	rd = capture_stderr();
	kvr_log_info("%s", big);
	len = release_stderr(rd, buf, sizeof(buf));
	free(big);
	cr_expect_leq(len, (size_t)KVR_LOG_LINE_MAX, "len %zu", len);
	cr_assert_gt(len, 5u);
	cr_expect_str_eq(buf + len - 4, "...\n");
}

Test(log, keeps_errno_when_logging)
{
	int rd = capture_stderr();
	char buf[512];

	errno = EOWNERDEAD;
	kvr_log_err("x");
	cr_expect_eq(errno, EOWNERDEAD);
	release_stderr(rd, buf, sizeof(buf));
}

Test(log, writes_to_given_fd_when_fd_set)
{
	char buf[512];
	int p[2], old;
	ssize_t n;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	old = kvr_log_set_fd(p[1]);
	cr_expect_eq(old, STDERR_FILENO);
	kvr_log_info("to fd");
	cr_expect_eq(kvr_log_set_fd(old), p[1]);
	close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	cr_assert_gt(n, 0);
	buf[n - 1] = '\0';
	cr_expect(line_ok(buf, 'I', "to fd"), "got: \"%s\"", buf);
	close(p[0]);
}

#define NTHREADS 4
#define NLINES	 500

static void *log_loop(void *p)
{
	long id = (long)(intptr_t)p;

	for (int i = 0; i < NLINES; i++)
		kvr_log_info("thread %ld line %d %s", id, i,
			     "padding-padding-padding-padding-padding");
	return NULL;
}

Test(log, keeps_lines_whole_when_threads_log_at_once)
{
	char path[] = "/tmp/kvr-log-XXXXXX", *buf, *save = NULL, *l;
	pthread_t t[NTHREADS];
	int fd, old, lines = 0, bad = 0;
	off_t size;

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	/* O_APPEND: the kernel picks each write's offset atomically. */
	cr_assert_eq(fcntl(fd, F_SETFL, O_APPEND), 0);
	old = kvr_log_set_fd(fd);
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, log_loop, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	kvr_log_set_fd(old);

	size = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)size + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(pread(fd, buf, (size_t)size, 0), size);
	buf[size] = '\0';
	close(fd);
	for (l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		lines++;
		if (!line_ok(l, 'I',
			     "thread [0-9] line [0-9]+ padding-padding-"
			     "padding-padding-padding"))
			bad++;
	}
	free(buf);
	cr_expect_eq(lines, NTHREADS * NLINES, "got %d lines", lines);
	cr_expect_eq(bad, 0, "%d mangled lines", bad);
}

/* A pipe as the log fd, with $JOURNAL_STREAM set to @stream (NULL: that
 * pipe's own "<dev>:<ino>"); every level logs "m" once; returns what came. */
static void log_levels_to_pipe(const char *stream, char *buf, size_t n)
{
	char own[64];
	struct stat st;
	ssize_t r;
	int p[2], old;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(fstat(p[1], &st), 0);
	snprintf(own, sizeof(own), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", stream ? stream : own, 1);
	kvr_log_set_level(KVR_LOG_DEBUG);
	old = kvr_log_set_fd(p[1]);
	kvr_log_err("m");
	kvr_log_warn("m");
	kvr_log_info("m");
	kvr_log_debug("m");
	kvr_log_set_fd(old);
	unsetenv("JOURNAL_STREAM");
	close(p[1]);
	r = read(p[0], buf, n - 1);
	cr_assert_gt(r, 0);
	buf[r] = '\0';
	close(p[0]);
}

Test(log, writes_journald_priorities_when_journal_stream_is_the_log_fd)
{
	char buf[1024];

	log_levels_to_pipe(NULL, buf, sizeof(buf));
	cr_expect_str_eq(buf, "<3>m\n<4>m\n<6>m\n<7>m\n");
}

Test(log, writes_plain_lines_when_journal_stream_is_another_file)
{
	char buf[1024], *save = NULL, *l;
	const char letters[] = "EWID";
	int i = 0;

	log_levels_to_pipe("1:2", buf, sizeof(buf));
	for (l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		cr_expect(line_ok(l, letters[i++], "m"), "line %d: \"%s\"", i,
			  l);
	cr_expect_eq(i, 4, "got %d lines", i);
}

/* Lines of @buf that contain @needle. */
static unsigned count_lines(const char *buf, const char *needle)
{
	unsigned n = 0;

	for (const char *p = buf; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* kvr_log_peer's format strings: each literal is a call site. */
static void peer_line(long pid)
{
	kvr_log_peer(KVR_LOG_WARN, pid, "bad hello from pid %ld", pid);
}

Test(log, limits_lines_per_peer_and_call_site_when_a_peer_floods)
{
	static char buf[1 << 16];
	int rd = capture_stderr();

	for (int i = 0; i < 500; i++) {
		peer_line(1001);
		peer_line(1002);
	}
	kvr_log_peer(KVR_LOG_WARN, 1001, "another line of pid %d", 1001);
	release_stderr(rd, buf, sizeof(buf));
	/* Each pair its burst (one refill at most, on a slow machine);
	 * another call site of the same peer is not held back. */
	cr_expect_geq(count_lines(buf, "bad hello from pid 1001"),
		      KVR_LOG_PEER_BURST);
	cr_expect_leq(count_lines(buf, "bad hello from pid 1001"),
		      KVR_LOG_PEER_BURST + 1);
	cr_expect_geq(count_lines(buf, "bad hello from pid 1002"),
		      KVR_LOG_PEER_BURST);
	cr_expect_eq(count_lines(buf, "another line of pid 1001"), 1u);
	cr_expect_geq(kvr_log_peer_suppressed(), 2 * (500 - 11));
}

Test(log, counts_what_it_held_back_in_one_line_when_the_peer_may_write)
{
	static char buf[1 << 16];
	int rd = capture_stderr();

	for (int i = 0; i < 100; i++)
		peer_line(2001);
	usleep((KVR_LOG_PEER_MS + 100) * 1000);
	kvr_log_peer_flush();
	release_stderr(rd, buf, sizeof(buf));
	cr_expect_eq(count_lines(buf, "from pid 2001 (log rate limit"), 1u,
		     "%s", buf);
	cr_expect_neq(strstr(buf, "suppressed 9"), NULL, "%s", buf);
}
