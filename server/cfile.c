/* SPDX-License-Identifier: MIT */
/*
 * The --config file reader (cfile.h): safe open, line splitting, duplicate
 * keys. The whole file is read and checked before the first callback, so
 * a file with one bad line changes nothing.
 *
 * Why not libinih: the format is one "key = value" a line with no
 * sections, and inih would accept sections, continuation lines and inline
 * comments that then need refusing; its handler sees no line number unless
 * the library was built with INI_HANDLER_LINENO. Splitting a line at '='
 * is the whole parser.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfile.h"

/* The largest file read: far more than every option once. */
#define CFILE_BYTES_MAX (256u << 10)

/* One setting found in the file; key and val point into the buffer. */
struct setting {
	const char *key;
	const char *val; /* NULL: no '=' on the line */
	unsigned line;
};

/* Print "kvringd: PATH[:LINE]: " and then the message. */
static int fail(FILE *err, const char *path, unsigned line, int rc,
		const char *msg, const char *what)
{
	if (line)
		fprintf(err, "kvringd: %s:%u: %s%s\n", path, line, msg, what);
	else
		fprintf(err, "kvringd: %s: %s%s\n", path, msg, what);
	return rc;
}

/*
 * Refuse a file whose directory others may write without the sticky bit:
 * they could replace the file between two starts. (/tmp, sticky, is
 * fine: only the file's owner may replace it there.)
 */
static int dir_checked(const char *path, FILE *err)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat st;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) < 0)
		return 0; /* the file opened: nothing more to say */
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		fprintf(err,
			"kvringd: %s: its directory %s may be written by its "
			"group or others (mode %04o), who could replace the "
			"file; run 'chmod go-w %s' or move the file\n",
			path, dir, (unsigned)(st.st_mode & 07777), dir);
		return -EPERM;
	}
	return 0;
}

/* The file's fd, after refusing a link, a non-file and loose permissions. */
static int open_checked(const char *path, FILE *err)
{
	struct stat st;
	char hint[160];
	int rc, fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0 && errno == ELOOP)
		return fail(err, path, 0, -EPERM, "is a symbolic link",
			    "; give --config the file it points to (kvringd "
			    "checks that file's owner and mode)");
	if (fd < 0) {
		rc = -errno;
		fprintf(err,
			"kvringd: cannot open config file %s: %s; create it "
			"(docs/config.md, \"Configuration file\") or drop "
			"--config\n",
			path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, path, 0, -EINVAL, "is not a regular file",
			    "; give --config a file");
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		close(fd);
		snprintf(hint, sizeof(hint),
			 " (mode %04o); run 'chmod go-w %s'",
			 (unsigned)(st.st_mode & 07777), path);
		return fail(err, path, 0, -EPERM,
			    "its group or others may write it, so they could "
			    "choose kvringd's settings",
			    hint);
	}
	rc = dir_checked(path, err);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		close(fd);
		snprintf(hint, sizeof(hint),
			 " (uid %u); make root or uid %u its owner",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		return fail(err, path, 0, -EPERM, "is owned by another user",
			    hint);
	}
	return fd;
}

/* The whole file, NUL-terminated, in a malloc'd buffer. */
static int slurp(int fd, const char *path, char **out, FILE *err)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			char *nb;

			if (cap >= CFILE_BYTES_MAX) {
				free(buf);
				return fail(err, path, 0, -EFBIG,
					    "is larger than 256 KiB",
					    "; a kvringd config holds one line "
					    "per option");
			}
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = -errno;

			free(buf);
			fprintf(err, "kvringd: reading %s: %s\n", path,
				strerror(-rc));
			return rc;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (memchr(buf, '\0', len)) {
		free(buf);
		return fail(err, path, 0, -EINVAL, "holds a NUL byte",
			    "; a kvringd config is plain text");
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Trim blanks at both ends of [s, e) in place; the trimmed start. */
static char *trim(char *s, char *e)
{
	while (s < e && blank(*s))
		s++;
	while (e > s && blank(e[-1]))
		e--;
	*e = '\0';
	return s;
}

/* Split one line (NUL-terminated, no '\n') into @st; 1 if it is a
 * comment or blank, 0 for a setting, or a usage error. */
static int split(char *l, unsigned line, struct setting *st, const char *path,
		 FILE *err)
{
	char *eq, *key;

	l = trim(l, l + strlen(l));
	if (!*l || *l == '#')
		return 1;
	if (strlen(l) >= KVR_CFILE_LINE_MAX)
		return fail(err, path, line, -EINVAL, "line too long",
			    "; a value is at most 1023 bytes");
	eq = strchr(l, '=');
	key = trim(l, eq ? eq : l + strlen(l));
	if (!*key)
		return fail(err, path, line, -EINVAL, "no key before '='",
			    "; write 'key = value', key a long flag name "
			    "without the dashes (kvringd --help)");
	for (const char *k = key; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
		      *k == '-'))
			return fail(err, path, line, -EINVAL,
				    "a key is a long flag name without the "
				    "dashes, lower case",
				    "; write 'key = value' (e.g. 'pool-size "
				    "= 4G'); no sections, no quotes");
	st->key = key;
	st->val = eq ? trim(eq + 1, eq + 1 + strlen(eq + 1)) : NULL;
	st->line = line;
	return 0;
}

/* Split the buffer into settings; refuse a duplicate key. */
static int parse(char *buf, struct setting **out, size_t *nout,
		 const char *path, FILE *err)
{
	struct setting *v = NULL;
	size_t n = 0, cap = 0;
	unsigned line = 0;
	char *l = buf, *nl;
	int rc = 0;

	for (; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		line++;
		if (n == cap) {
			struct setting *nv;

			cap = cap ? cap * 2 : 32;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		rc = split(l, line, &v[n], path, err);
		if (rc < 0)
			break;
		if (rc == 1) {
			rc = 0;
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			if (strcmp(v[i].key, v[n].key) != 0)
				continue;
			fprintf(err,
				"kvringd: %s:%u: '%s' is given twice (first "
				"on line %u); keep one of the two lines\n",
				path, line, v[n].key, v[i].line);
			rc = -EINVAL;
			break;
		}
		if (rc < 0)
			break;
		n++;
	}
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*nout = n;
	return 0;
}

int kvr__cfile_read(const char *path, kvr_cfile_cb *cb, void *arg, FILE *err)
{
	struct setting *v = NULL;
	size_t n = 0;
	char *buf = NULL;
	int fd, rc;

	fd = open_checked(path, err);
	if (fd < 0)
		return fd;
	rc = slurp(fd, path, &buf, err);
	close(fd);
	if (rc < 0)
		return rc;
	rc = parse(buf, &v, &n, path, err);
	/* Apply only a file that parsed whole. */
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = cb(arg, v[i].key, v[i].val, v[i].line);
	free(v);
	free(buf);
	return rc;
}
