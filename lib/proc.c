/* SPDX-License-Identifier: MIT */
/*
 * Process liveness by (pid, start time), read from /proc/PID/stat.
 * Reads only; never signals anything (kill(pid, 0) sends no signal).
 *
 * The stat line is "pid (comm) state ppid ... starttime ..." where comm is
 * whatever the process put there with prctl(PR_SET_NAME), spaces and
 * parentheses included. The only safe anchor is the last ')' of the line:
 * the fields after it are numbers and one state letter.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvring/proc.h>

/* The start time is field 22 (man 5 proc); field 3 is the state. */
#define STAT_FIELD_STARTTIME 22

int kvr__proc_parse_stat(const char *line, char *state, uint64_t *start)
{
	const char *p = strrchr(line, ')');
	unsigned long long v;
	char st;
	char *end;

	if (!p)
		return -EBADMSG;
	p++;
	/* Field 3: one space, then the state letter. */
	if (p[0] != ' ' || p[1] == '\0' || p[1] == ' ')
		return -EBADMSG;
	st = p[1];
	p += 2;
	/* Skip fields 4..21: each is " <token>". */
	for (int field = 4; field < STAT_FIELD_STARTTIME; field++) {
		if (*p != ' ')
			return -EBADMSG;
		p++;
		if (*p == ' ' || *p == '\0' || *p == '\n')
			return -EBADMSG;
		while (*p != ' ' && *p != '\0' && *p != '\n')
			p++;
	}
	/* Field 22: a plain unsigned decimal. */
	if (*p != ' ' || p[1] < '0' || p[1] > '9')
		return -EBADMSG;
	errno = 0;
	v = strtoull(p + 1, &end, 10);
	if (errno != 0 || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -EBADMSG;
	*state = st;
	*start = (uint64_t)v;
	return 0;
}

/* Read /proc/PID/stat and parse it. Outputs untouched on failure. */
static int read_stat(pid_t pid, char *state, uint64_t *start)
{
	/* comm is at most 16 bytes but names can be escaped; 4 KiB is ample. */
	char path[64], buf[4096];
	size_t len = 0;
	int fd, rc;

	if (pid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ESRCH ? -ENOENT : -errno;
	while (len < sizeof(buf) - 1) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno == ESRCH ? -ENOENT : -errno;
			close(fd);
			return rc;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return kvr__proc_parse_stat(buf, state, start);
}

/* Both leave their output untouched on failure, as read_stat() does. */
int kvr_proc_start_time(pid_t pid, uint64_t *out)
{
	char state;

	return read_stat(pid, &state, out);
}

int kvr_proc_state(pid_t pid, char *state)
{
	uint64_t start;

	return read_stat(pid, state, &start);
}

bool kvr_proc_alive(pid_t pid, uint64_t start_time)
{
	uint64_t now_start;
	char state;
	int rc;

	if (pid <= 0)
		return false;
	/* EPERM: it exists but belongs to someone else; still "exists". */
	if (kill(pid, 0) < 0 && errno != EPERM)
		return false;
	rc = read_stat(pid, &state, &now_start);
	if (rc == -ENOENT)
		return false; /* exited between kill() and open() */
	if (rc < 0)
		return true; /* exists, details unknown: keep, never guess dead
			      */
	/* A zombie has exited; only its exit status is left to collect. */
	if (state == 'Z' || state == 'X' || state == 'x')
		return false;
	return start_time == 0 || now_start == start_time;
}
