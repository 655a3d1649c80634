/* SPDX-License-Identifier: MIT */
/*
 * t_json.c - see t_json.h. python3 flattens the document into lines
 * "<type>\t<path>\t<value>", type one of o (object, value = members),
 * a (array, value = elements), s (string, JSON-escaped value), i (integer),
 * f (other number), b (true/false), z (null). Keys containing a dot or a
 * tab cannot be addressed (kvring emits snake_case keys only).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_json.h"

/* Set-up failures abort (tests/support convention), with the reason. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "t_json: " __VA_ARGS__);               \
			fprintf(stderr, " (%s)\n", #cond);                     \
			abort();                                               \
		}                                                              \
	} while (0)

static const char flatten_py[] =
    "import json, sys\n"
    "def bad(c):\n"
    "    raise ValueError('non-standard constant ' + c)\n"
    "try:\n"
    "    doc = json.loads(sys.stdin.read(), parse_constant=bad)\n"
    "except ValueError as e:\n"
    "    sys.stdout.write('E\\t\\t' + str(e).replace('\\n', ' ') + '\\n')\n"
    "    sys.exit(0)\n"
    "out = []\n"
    "def walk(p, v):\n"
    "    if isinstance(v, dict):\n"
    "        out.append('o\\t%s\\t%d' % (p, len(v)))\n"
    "        for k, x in v.items():\n"
    "            walk(p + '.' + k if p else k, x)\n"
    "    elif isinstance(v, list):\n"
    "        out.append('a\\t%s\\t%d' % (p, len(v)))\n"
    "        for i, x in enumerate(v):\n"
    "            walk(p + '.' + str(i) if p else str(i), x)\n"
    "    elif isinstance(v, bool):\n"
    "        out.append('b\\t%s\\t%s' % (p, 'true' if v else 'false'))\n"
    "    elif v is None:\n"
    "        out.append('z\\t%s\\tnull' % p)\n"
    "    elif isinstance(v, int):\n"
    "        out.append('i\\t%s\\t%d' % (p, v))\n"
    "    elif isinstance(v, float):\n"
    "        out.append('f\\t%s\\t%r' % (p, v))\n"
    "    else:\n"
    "        out.append('s\\t%s\\t%s' % (p, json.dumps(v)[1:-1]))\n"
    "walk('', doc)\n"
    "sys.stdout.write('\\n'.join(out) + '\\n')\n";

struct node {
	char type;
	char *path;
	char *val;
};

struct t_json {
	struct node *n;
	size_t nr;
	char *buf; /* the flattened text; nodes point into it */
};

/* Run python3 on @text; its stdout, NUL-terminated, malloc'd. */
static char *flatten(const char *text)
{
	int in[2], out[2], st;
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	ssize_t r;
	pid_t pid;

	CHECK(buf, "out of memory");
	CHECK(pipe(in) == 0, "pipe failed");
	CHECK(pipe(out) == 0, "pipe failed");
	pid = fork();
	CHECK(pid >= 0, "fork failed");
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		/* The system interpreter, without site (-S) and PYTHON*
		 * variables (-E): json is stdlib, and start-up is 5x faster
		 * than through a version-manager shim found first in PATH. */
		if (access("/usr/bin/python3", X_OK) == 0)
			execl("/usr/bin/python3", "python3", "-E", "-S", "-c",
			      flatten_py, (char *)NULL);
		execlp("python3", "python3", "-E", "-S", "-c", flatten_py,
		       (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	/* python3 reads all of stdin before it writes: no deadlock. */
	signal(SIGPIPE, SIG_IGN);
	for (size_t off = 0, n = strlen(text); off < n; off += (size_t)r) {
		r = write(in[1], text + off, n - off);
		if (r <= 0)
			break;
	}
	close(in[1]);
	while ((r = read(out[0], buf + len, cap - len - 1)) > 0) {
		len += (size_t)r;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			CHECK(buf, "out of memory");
		}
	}
	buf[len] = '\0';
	close(out[0]);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "python3 (the JSON parser of the tests) failed: status %d", st);
	return buf;
}

struct t_json *t_json_parse(const char *text, char *why, size_t whylen)
{
	struct t_json *j = calloc(1, sizeof(*j));
	size_t cap = 64;
	char *line, *save = NULL;

	CHECK(j, "out of memory");
	j->buf = flatten(text ? text : "");
	if (j->buf[0] == 'E') {
		if (why && whylen)
			snprintf(why, whylen, "%s", j->buf + 3);
		t_json_free(j);
		return NULL;
	}
	j->n = malloc(cap * sizeof(*j->n));
	CHECK(j->n, "out of memory");
	for (line = strtok_r(j->buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *t1 = strchr(line, '\t'),
		     *t2 = t1 ? strchr(t1 + 1, '\t') : 0;

		CHECK(t1 && t2, "bad flattened line '%s'", line);
		*t1 = *t2 = '\0';
		if (j->nr == cap) {
			cap *= 2;
			j->n = realloc(j->n, cap * sizeof(*j->n));
			CHECK(j->n, "out of memory");
		}
		j->n[j->nr++] = (struct node){line[0], t1 + 1, t2 + 1};
	}
	return j;
}

bool t_json_valid(const char *text)
{
	struct t_json *j = t_json_parse(text, NULL, 0);

	t_json_free(j);
	return j != NULL;
}

void t_json_free(struct t_json *j)
{
	if (!j)
		return;
	free(j->n);
	free(j->buf);
	free(j);
}

static const struct node *get(const struct t_json *j, const char *path)
{
	for (size_t i = 0; j && i < j->nr; i++)
		if (strcmp(j->n[i].path, path) == 0)
			return &j->n[i];
	return NULL;
}

bool t_json_has(const struct t_json *j, const char *path)
{
	return get(j, path) != NULL;
}

long long t_json_int(const struct t_json *j, const char *path, long long dflt)
{
	const struct node *n = get(j, path);
	char *end;
	long long v;

	if (!n || n->type != 'i')
		return dflt;
	errno = 0;
	v = strtoll(n->val, &end, 10);
	return errno || *end ? dflt : v;
}

double t_json_num(const struct t_json *j, const char *path, double dflt)
{
	const struct node *n = get(j, path);
	char *end;
	double v;

	if (!n || (n->type != 'i' && n->type != 'f'))
		return dflt;
	errno = 0;
	v = strtod(n->val, &end);
	return errno || *end ? dflt : v;
}

const char *t_json_str(const struct t_json *j, const char *path)
{
	const struct node *n = get(j, path);

	/* JSON-escaped; kvring's strings here are plain ASCII. */
	return n && n->type == 's' ? n->val : NULL;
}

bool t_json_true(const struct t_json *j, const char *path)
{
	const struct node *n = get(j, path);

	return n && n->type == 'b' && strcmp(n->val, "true") == 0;
}

long t_json_count(const struct t_json *j, const char *path)
{
	const struct node *n = get(j, path);

	if (!n || (n->type != 'o' && n->type != 'a'))
		return -1;
	return strtol(n->val, NULL, 10);
}
