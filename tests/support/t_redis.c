/* SPDX-License-Identifier: MIT */
/*
 * t_redis.c - real redis-server processes for the L2 suites (t_redis.h).
 * Ports come from a per-process pseudo-random range (21000..29999, bus
 * ports 31000..39999) and are bound once on 127.0.0.1 to check they are
 * free before redis-server gets them; every server listens on 127.0.0.1
 * only, saves nothing, and lives in a mkdtemp directory removed at stop.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t_redis.h"

static void die(const char *what)
{
	fprintf(stderr, "t_redis: %s\n", what);
	abort();
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

bool t_redis_available(void)
{
	return access("/usr/bin/redis-server", X_OK) == 0 &&
	       access("/usr/bin/redis-cli", X_OK) == 0;
}

static bool port_free(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return false;
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static int pick_port(bool bus)
{
	static unsigned next;

	if (!next)
		next = (unsigned)getpid() * 7919u + (unsigned)time(NULL);
	for (int tries = 0; tries < 200; tries++) {
		int p = 21000 + (int)(next++ * 37u % 9000u);

		if (port_free(p) && (!bus || port_free(p + 10000)))
			return p;
	}
	die("no free loopback port in 21000..29999");
	return -1;
}

int t_redis_cli(const struct t_redis *r, char *out, size_t n, const char *fmt,
		...)
{
	char args[4096], cmd[4300];
	va_list ap;
	FILE *f;
	size_t got = 0;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "redis-cli -h 127.0.0.1 -p %d %s 2>&1",
		 r->port, args);
	f = popen(cmd, "r");
	if (!f)
		die("popen redis-cli");
	if (out && n) {
		got = fread(out, 1, n - 1, f);
		out[got] = '\0';
		while (got && (out[got - 1] == '\n' || out[got - 1] == ' '))
			out[--got] = '\0';
	} else {
		char sink[256];

		while (fread(sink, 1, sizeof(sink), f) > 0)
			;
	}
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

long t_redis_int(const struct t_redis *r, const char *fmt, ...)
{
	char args[2048], out[256], *end;
	va_list ap;
	long v;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	t_redis_cli(r, out, sizeof(out), "%s", args);
	v = strtol(out, &end, 10);
	if (end == out) {
		fprintf(stderr, "t_redis: '%s' answered '%s'\n", args, out);
		abort();
	}
	return v;
}

static void spawn(struct t_redis *r)
{
	char port[16], *argv[64];
	int n = 0;
	char extra[256], *save = NULL;

	snprintf(port, sizeof(port), "%d", r->port);
	argv[n++] = "redis-server";
	argv[n++] = "--port";
	argv[n++] = port;
	argv[n++] = "--bind";
	argv[n++] = "127.0.0.1";
	argv[n++] = "--save";
	argv[n++] = "";
	argv[n++] = "--appendonly";
	argv[n++] = "no";
	argv[n++] = "--dir";
	argv[n++] = r->dir;
	argv[n++] = "--logfile";
	argv[n++] = r->log;
	argv[n++] = "--protected-mode";
	argv[n++] = "no";
	if (r->cluster) {
		argv[n++] = "--cluster-enabled";
		argv[n++] = "yes";
		argv[n++] = "--cluster-node-timeout";
		argv[n++] = "2000";
		argv[n++] = "--cluster-config-file";
		argv[n++] = "nodes.conf";
	}
	snprintf(extra, sizeof(extra), "%s", r->extra);
	for (char *w = strtok_r(extra, " ", &save); w && n < 62;
	     w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	argv[n] = NULL;
	r->pid = fork();
	if (r->pid < 0)
		die("fork");
	if (r->pid == 0) {
		/* A test that crashes skips its teardown: the server must not
		 * outlive it (it would keep a port and the test's pipes). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execvp("redis-server", argv);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		char out[64];

		if (t_redis_cli(r, out, sizeof(out), "PING") == 0 &&
		    strcmp(out, "PONG") == 0)
			return;
		sleep_ms(10);
	}
	die("redis-server did not answer PING within 4 s");
}

static void start(struct t_redis *r, const char *extra, bool cluster)
{
	memset(r, 0, sizeof(*r));
	r->cluster = cluster;
	snprintf(r->dir, sizeof(r->dir), "/tmp/kvr-redis-XXXXXX");
	if (!mkdtemp(r->dir))
		die("mkdtemp");
	snprintf(r->log, sizeof(r->log), "%s/redis.log", r->dir);
	snprintf(r->extra, sizeof(r->extra), "%s", extra ? extra : "");
	r->port = pick_port(cluster);
	spawn(r);
}

void t_redis_start(struct t_redis *r, const char *extra)
{
	start(r, extra, false);
}

void t_redis_restart(struct t_redis *r)
{
	if (r->pid)
		die("restart of a running redis-server");
	if (!port_free(r->port))
		die("port taken while redis-server was down");
	spawn(r);
}

static void reap(struct t_redis *r, int sig)
{
	int st;

	if (!r->pid)
		return;
	kill(r->pid, SIGCONT);
	kill(r->pid, sig);
	for (int i = 0; i < 500; i++) {
		if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
			r->pid = 0;
			return;
		}
		sleep_ms(10);
	}
	kill(r->pid, SIGKILL);
	waitpid(r->pid, &st, 0);
	r->pid = 0;
}

void t_redis_kill(struct t_redis *r)
{
	reap(r, SIGKILL);
}

void t_redis_stop(struct t_redis *r)
{
	char cmd[160];

	reap(r, SIGTERM);
	if (r->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "t_redis: could not remove %s\n",
				r->dir);
		r->dir[0] = '\0';
	}
}

/* Whether node @r (running) says cluster_state:ok. */
static bool node_ok(const struct t_redis *r)
{
	char out[4096];

	t_redis_cli(r, out, sizeof(out), "CLUSTER INFO");
	return strstr(out, "cluster_state:ok") != NULL;
}

bool t_cluster_wait_ok(struct t_cluster *c, int ms)
{
	struct t_redis *all[2 * T_CLUSTER_N];

	for (int i = 0; i < T_CLUSTER_N; i++) {
		all[i] = &c->node[i];
		all[T_CLUSTER_N + i] = &c->replica[i];
	}
	for (int i = 0; i < 2 * T_CLUSTER_N; i++)
		for (int k = 0; all[i]->pid && !node_ok(all[i]); k++) {
			if (k * 10 >= ms)
				return false;
			sleep_ms(10);
		}
	return true;
}

/* The integer after @field ("name:") in @r's INFO replication; -1 when
 * it is not there. */
static long long info_repl(const struct t_redis *r, const char *field)
{
	char out[4096], *p;

	t_redis_cli(r, out, sizeof(out), "INFO replication");
	p = strstr(out, field);
	return p ? strtoll(p + strlen(field), NULL, 10) : -1;
}

bool t_cluster_wait_replicated(struct t_cluster *c, int ms)
{
	for (int i = 0; i < T_CLUSTER_N; i++) {
		long long want = info_repl(&c->node[i], "master_repl_offset:");
		bool ok = false;

		for (int k = 0; !ok; k++) {
			for (int r = 0; r < T_CLUSTER_N && !ok; r++)
				ok =
				    info_repl(&c->replica[r], "master_port:") ==
					c->node[i].port &&
				    info_repl(&c->replica[r],
					      "slave_repl_offset:") >= want;
			if (ok)
				break;
			if (k * 10 >= ms)
				return false;
			sleep_ms(10);
		}
	}
	return true;
}

/* Create the cluster over node[] (and replica[] when @replicas). */
static void create(struct t_cluster *c, bool replicas)
{
	char cmd[512], out[4096];
	int at = 0;

	at = snprintf(cmd, sizeof(cmd), "--cluster create");
	for (int i = 0; i < T_CLUSTER_N; i++)
		at += snprintf(cmd + at, sizeof(cmd) - (size_t)at,
			       " 127.0.0.1:%d", c->node[i].port);
	for (int i = 0; replicas && i < T_CLUSTER_N; i++)
		at += snprintf(cmd + at, sizeof(cmd) - (size_t)at,
			       " 127.0.0.1:%d", c->replica[i].port);
	snprintf(cmd + at, sizeof(cmd) - (size_t)at,
		 " --cluster-replicas %d --cluster-yes", replicas ? 1 : 0);
	if (t_redis_cli(&c->node[0], out, sizeof(out), "%s", cmd) != 0) {
		fprintf(stderr, "t_redis: cluster create: %s\n", out);
		abort();
	}
	if (!t_cluster_wait_ok(c, 5000))
		die("cluster not ok within 5 s");
}

/* ROLE's first word is "master" for @r. */
static bool is_master(const struct t_redis *r)
{
	char out[256];

	t_redis_cli(r, out, sizeof(out), "ROLE");
	return strncmp(out, "master", 6) == 0;
}

void t_cluster_start_replicas(struct t_cluster *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < T_CLUSTER_N; i++) {
		start(&c->node[i], NULL, true);
		start(&c->replica[i], NULL, true);
	}
	create(c, true);
	/* redis-cli picks the masters; put them in node[]. */
	for (int i = 0; i < T_CLUSTER_N; i++)
		for (int j = 0; !is_master(&c->node[i]) && j < T_CLUSTER_N; j++)
			if (is_master(&c->replica[j])) {
				struct t_redis t = c->node[i];

				c->node[i] = c->replica[j];
				c->replica[j] = t;
			}
	for (int i = 0; i < T_CLUSTER_N; i++)
		for (int k = 0;; k++) {
			char out[4096];

			t_redis_cli(&c->replica[i], out, sizeof(out),
				    "INFO replication");
			if (strstr(out, "master_link_status:up"))
				break;
			if (k == 1000)
				die("replica not linked within 10 s");
			sleep_ms(10);
		}
	snprintf(c->url, sizeof(c->url),
		 "redis-cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
		 c->node[0].port, c->node[1].port, c->node[2].port);
}

void t_cluster_start(struct t_cluster *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < T_CLUSTER_N; i++)
		start(&c->node[i], NULL, true);
	create(c, false);
	snprintf(c->url, sizeof(c->url),
		 "redis-cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
		 c->node[0].port, c->node[1].port, c->node[2].port);
}

void t_cluster_stop(struct t_cluster *c)
{
	for (int i = 0; i < T_CLUSTER_N; i++) {
		t_redis_stop(&c->node[i]);
		t_redis_stop(&c->replica[i]);
	}
}

int t_cluster_node_of(struct t_cluster *c, const char *key)
{
	long slot = t_redis_int(&c->node[0], "CLUSTER KEYSLOT '%s'", key);

	for (int i = 0; i < T_CLUSTER_N; i++) {
		char out[4096], *line, *save = NULL;

		/* CLUSTER SHARDS is newer than some redis-cli; ask each
		 * node which slots it owns itself via CLUSTER NODES. */
		t_redis_cli(&c->node[i], out, sizeof(out), "CLUSTER NODES");
		for (line = strtok_r(out, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			char *tok, *s2 = NULL;
			int field = 0;

			if (!strstr(line, "myself"))
				continue;
			for (tok = strtok_r(line, " ", &s2); tok;
			     tok = strtok_r(NULL, " ", &s2), field++) {
				long lo, hi;

				if (field < 8)
					continue;
				if (sscanf(tok, "%ld-%ld", &lo, &hi) == 2) {
					if (slot >= lo && slot <= hi)
						return i;
				} else if (sscanf(tok, "%ld", &lo) == 1 &&
					   lo == slot) {
					return i;
				}
			}
		}
	}
	return -1;
}
