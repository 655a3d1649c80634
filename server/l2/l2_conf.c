/* SPDX-License-Identifier: MIT */
/*
 * l2_conf.c - the L2 tier's options: the --l2 URL grammar (redis://,
 * unix://, redis-cluster://), the key prefix and tenant salt, the limits,
 * and reading the secret from a file or the environment (never from the
 * command line, where ps(1) would show it). Fills struct kvr_l2_conf; owns
 * nothing at run time and opens no socket.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/log.h>
#include <kvring/parse.h>

#include <kvring/l2.h>

/* No tier (kind 0) until --l2, with the defaults of every other option. */
void kvr_l2_conf_defaults(struct kvr_l2_conf *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->prefix, KVR_L2_DEF_PREFIX);
	c->deadline_ms = KVR_L2_DEF_DEADLINE_MS;
	c->queue_jobs = KVR_L2_DEF_QUEUE;
	c->io_ms = KVR_L2_DEF_IO_MS;
}

/* "host:port" (host may be [v6]) into @a. */
static int parse_hostport(const char *s, size_t len, struct kvr_l2_addr *a)
{
	const char *colon = NULL;
	uint32_t port;
	char num[8];
	size_t hl, pl;

	for (size_t i = len; i-- > 0;)
		if (s[i] == ':') {
			colon = s + i;
			break;
		}
	if (!colon)
		return -EINVAL;
	hl = (size_t)(colon - s);
	pl = len - hl - 1;
	if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
		s++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(a->host) || pl == 0 || pl >= sizeof(num))
		return -EINVAL;
	memcpy(num, colon + 1, pl);
	num[pl] = '\0';
	if (kvr_parse_u32(num, 1, 65535, &port) < 0)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	memcpy(a->host, s, hl);
	a->port = (uint16_t)port;
	return 0;
}

/* --l2: a single node, a UNIX socket, or a cluster's seed nodes; a
 * password in the URL is refused, since the command line is readable by
 * every local user (use --l2-auth-file). */
int kvr_l2_parse_url(struct kvr_l2_conf *c, const char *url, const char **why)
{
	const char *p;
	size_t len = strlen(url);

	*why = "use redis://HOST:PORT, unix:///PATH or "
	       "redis-cluster://HOST:PORT,HOST:PORT,...";
	if (len == 0 || len >= sizeof(c->url))
		return -EINVAL;
	c->nseeds = 0;
	if (strncmp(url, "redis://", 8) == 0) {
		p = url + 8;
		if (strchr(p, '@')) {
			*why = "no password in the URL: use --l2-auth-file or "
			       "$" KVR_L2_AUTH_ENV;
			return -EINVAL;
		}
		if (parse_hostport(p, strlen(p), &c->seeds[0]) < 0)
			return -EINVAL;
		c->kind = KVR_L2_REDIS;
		c->nseeds = 1;
	} else if (strncmp(url, "unix://", 7) == 0) {
		p = url + 7;
		if (p[0] != '/' || strlen(p) >= sizeof(c->seeds[0].path)) {
			*why =
			    "unix:// needs an absolute path below 108 bytes, "
			    "e.g. unix:///run/redis.sock";
			return -EINVAL;
		}
		memset(&c->seeds[0], 0, sizeof(c->seeds[0]));
		strcpy(c->seeds[0].path, p);
		c->kind = KVR_L2_UNIX;
		c->nseeds = 1;
	} else if (strncmp(url, "redis-cluster://", 16) == 0) {
		p = url + 16;
		if (strchr(p, '@')) {
			*why = "no password in the URL: use --l2-auth-file or "
			       "$" KVR_L2_AUTH_ENV;
			return -EINVAL;
		}
		while (*p) {
			const char *e = strchr(p, ',');
			size_t l = e ? (size_t)(e - p) : strlen(p);

			if (c->nseeds == KVR_L2_MAX_SEEDS) {
				*why = "at most 16 seed nodes";
				return -EINVAL;
			}
			if (parse_hostport(p, l, &c->seeds[c->nseeds]) < 0)
				return -EINVAL;
			c->nseeds++;
			p += l;
			if (*p == ',')
				p++;
		}
		if (c->nseeds == 0)
			return -EINVAL;
		c->kind = KVR_L2_CLUSTER;
	} else {
		return -EINVAL;
	}
	strcpy(c->url, url);
	return 0;
}

/* The usage error of one --l2* option: what was given, and what works. */
static int bad(FILE *err, const char *opt, const char *val, const char *hint)
{
	fprintf(err, "kvringd: invalid --%s '%s': %s\n", opt, val ? val : "",
		hint);
	fprintf(err, "Try 'kvringd --help' for more information.\n");
	return -EINVAL;
}

static int parse_ms(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	/* The shared number grammar (lib/parse.c). */
	return kvr_parse_u32(s, lo, hi, out) < 0 ? -EINVAL : 0;
}

/* A prefix or salt: printable, no space or brace (braces would make a hash
 * tag and pile every key of a host into one cluster slot). */
static bool printable(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '{' || s[i] == '}')
			return false;
	return true;
}

/* One --l2* option by its long name; each value checked here, so a bad
 * one stops kvringd at start with a sentence. */
int kvr_l2_conf_opt(struct kvr_l2_conf *c, const char *name, const char *arg,
		    FILE *err)
{
	const char *why;

	if (strcmp(name, "l2") == 0) {
		if (kvr_l2_parse_url(c, arg, &why) < 0)
			return bad(err, name, arg, why);
		return 0;
	}
	if (strcmp(name, "l2-auth-file") == 0) {
		if (!*arg || strlen(arg) >= sizeof(c->auth_file))
			return bad(err, name, arg, "use a path of 1-255 bytes");
		strcpy(c->auth_file, arg);
		return 0;
	}
	if (strcmp(name, "l2-prefix") == 0) {
		if (!printable(arg, sizeof(c->prefix)))
			return bad(err, name, arg,
				   "use up to 63 printable characters, no "
				   "space or brace");
		strcpy(c->prefix, arg);
		return 0;
	}
	if (strcmp(name, "l2-salt") == 0) {
		if (!printable(arg, sizeof(c->salt)))
			return bad(err, name, arg,
				   "use up to 63 printable characters, no "
				   "space or brace");
		strcpy(c->salt, arg);
		return 0;
	}
	if (strcmp(name, "l2-deadline-ms") == 0) {
		if (parse_ms(arg, 1, 60000, &c->deadline_ms) < 0)
			return bad(err, name, arg, "use 1-60000");
		return 0;
	}
	if (strcmp(name, "l2-queue") == 0) {
		if (parse_ms(arg, 1, 48, &c->queue_jobs) < 0)
			return bad(err, name, arg,
				   "use 1-48 upload jobs (commits) in flight");
		return 0;
	}
	if (strcmp(name, "l2-io-ms") == 0) {
		if (parse_ms(arg, 10, 600000, &c->io_ms) < 0)
			return bad(err, name, arg, "use 10-600000");
		return 0;
	}
	if (strcmp(name, "l2-required") == 0) {
		c->required = true;
		return 0;
	}
	if (strcmp(name, "l2-upload") == 0) {
		if (strcmp(arg, "commit") == 0)
			c->upload = KVR_L2_UP_COMMIT;
		else if (strcmp(arg, "none") == 0)
			c->upload = KVR_L2_UP_NONE;
		else if (strcmp(arg, "evict") == 0)
			c->upload = KVR_L2_UP_EVICT;
		else
			return bad(err, name, arg, "use commit, evict or none");
		return 0;
	}
	return 1;
}

/* Strip trailing CR/LF/space. */
static void chomp(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		s[--n] = '\0';
}

/* The AUTH user and password: --l2-auth-file's first line ("PASSWORD"
 * or "USER PASSWORD"), else $KVRING_L2_PASSWORD in the same form; none
 * of either is no AUTH. Never logged. */
int kvr_l2_read_secret(const struct kvr_l2_conf *c, char *user, size_t ulen,
		       char *pass, size_t plen)
{
	char line[512], *sp;
	const char *env;

	user[0] = pass[0] = '\0';
	if (c->auth_file[0]) {
		FILE *f = fopen(c->auth_file, "re");

		if (!f) {
			int e = errno;

			kvr_log_err("l2: read --l2-auth-file %s: %s; give a "
				    "readable file holding 'password' or "
				    "'user password'",
				    c->auth_file, strerror(e));
			return -e;
		}
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	} else if ((env = getenv(KVR_L2_AUTH_ENV)) && *env) {
		if (strlen(env) >= sizeof(line))
			return -ENAMETOOLONG;
		strcpy(line, env);
	} else {
		return 0;
	}
	chomp(line);
	sp = strchr(line, ' ');
	if (sp) {
		*sp++ = '\0';
		if (strlen(line) >= ulen || strlen(sp) >= plen)
			return -ENAMETOOLONG;
		strcpy(user, line);
		strcpy(pass, sp);
	} else {
		if (strlen(line) >= plen)
			return -ENAMETOOLONG;
		strcpy(pass, line);
	}
	return 0;
}
