/* SPDX-License-Identifier: MIT */
/*
 * test_metrics_http.c - kvring-inspect --serve against a real kvringd,
 * scraped by a real HTTP client (python3's urllib): /metrics answers 200
 * with the Prometheus text and its content type and changes between two
 * scrapes as the server works, other paths are 404, other methods 405, a
 * bad address is a usage error, the default address is loopback, and idle
 * or slow clients of one address neither block scrapes from another nor
 * stay connected for long.
 * Registered only when libmicrohttpd was found (tests/CMakeLists.txt).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "worker_srv.h"

#define INSPECT KVR_BIN_DIR "/tools/kvring-inspect"

static struct kvrd srv;
static pid_t serve_pid;

static void teardown(void)
{
	if (serve_pid > 0) {
		kill(serve_pid, SIGTERM);
		waitpid(serve_pid, NULL, 0);
		serve_pid = 0;
	}
	t_server_down(&srv);
}

TestSuite(metrics_http, .fini = teardown, .timeout = 60);

static void start_server(void)
{
	const char *args[] = {"--allow-root", "--heartbeat-ms", "20", NULL};

	t_server_init(&srv);
	t_server_start(&srv, args);
}

/* Start kvring-inspect --serve @addr; returns the URL it printed. */
static void start_serve(const char *addr, char *url, size_t n)
{
	int fds[2];
	FILE *f;
	char line[256];

	cr_assert_eq(pipe(fds), 0);
	serve_pid = fork();
	cr_assert_geq(serve_pid, 0);
	if (serve_pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(INSPECT, INSPECT, "--name", srv.name, "--serve", addr,
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	cr_assert(f);
	cr_assert(fgets(line, sizeof(line), f), "no line from --serve");
	fclose(f);
	cr_assert_eq(sscanf(line, "serving %255s", url), 1, "line: %s", line);
	(void)n;
}

/* Run python3 on @script with the URL as argv[1]; its stdout. */
static char *py(const char *script, const char *url, int *status)
{
	char cmd[4096];
	FILE *p;
	size_t cap = 1 << 20, len = 0, k;
	char *buf = malloc(cap);

	snprintf(cmd, sizeof(cmd), "python3 -c '%s' '%s'", script, url);
	p = popen(cmd, "r");
	cr_assert(p && buf);
	while ((k = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += k;
	buf[len] = '\0';
	*status = pclose(p);
	return buf;
}

/* GET the URL; print the status, the content type, then the body. */
static const char *get_py =
    "import sys, urllib.request\n"
    "r = urllib.request.urlopen(sys.argv[1], timeout=10)\n"
    "print(r.status)\n"
    "print(r.headers.get(\"Content-Type\"))\n"
    "sys.stdout.write(r.read().decode())\n";

/* The status of a GET of a path or of a POST, errors included. */
static const char *status_py =
    "import sys, urllib.request, urllib.error\n"
    "u = sys.argv[1]\n"
    "def st(req):\n"
    "    try:\n"
    "        return urllib.request.urlopen(req, timeout=10).status\n"
    "    except urllib.error.HTTPError as e:\n"
    "        return e.code\n"
    "print(st(u.replace(\"/metrics\", \"/nope\")))\n"
    "print(st(urllib.request.Request(u, data=b\"x\", method=\"POST\")))\n";

static double sample(const char *text, const char *series)
{
	const char *p = strstr(text, series);
	double v = -1;

	if (p && p[strlen(series)] == ' ')
		sscanf(p + strlen(series) + 1, "%lf", &v);
	return v;
}

Test(metrics_http, serves_fresh_metrics_when_scraped_twice)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char url[256], err[256];
	char *a, *b;
	int st;

	start_server();
	start_serve("127.0.0.1:0", url, sizeof(url));
	t_ns_tiny(&o.ns, "http-model");
	o.socket_path = srv.sock;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	a = py(get_py, url, &st);
	cr_assert_eq(st, 0, "python: %s", a);
	cr_expect_eq(strncmp(a, "200\ntext/plain; version=0.0.4;", 30), 0,
		     "%.80s", a);
	cr_expect(strstr(a, "# TYPE kvring_op_latency_seconds histogram\n"));
	cr_expect_eq(sample(a, "kvring_op_latency_seconds_count{op=\"ping\"}"),
		     10);
	for (int i = 0; i < 15; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	b = py(get_py, url, &st);
	cr_assert_eq(st, 0);
	cr_expect_eq(sample(b, "kvring_op_latency_seconds_count{op=\"ping\"}"),
		     25, "the second scrape must see the new pings");
	free(a);
	free(b);
	a = py(status_py, url, &st);
	cr_expect_eq(st, 0);
	cr_expect_str_eq(a, "404\n405\n");
	free(a);
	kvr_close(c);
}

Test(metrics_http, binds_loopback_when_only_a_port_is_given)
{
	char url[256];

	start_server();
	start_serve(":0", url, sizeof(url));
	cr_expect_eq(strncmp(url, "http://127.0.0.1:", 17), 0, "url %s", url);
}

Test(metrics_http, refuses_with_usage_error_when_address_is_garbage)
{
	char cmd[512];
	int st;

	start_server();
	snprintf(cmd, sizeof(cmd),
		 INSPECT " --name %s --serve 127.0.0.1:http99 2>/dev/null",
		 srv.name);
	st = system(cmd);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d", st);
}

/* A TCP connection from source address @src to the port of @url, or -1. */
static int tcp_from(const char *src, const char *url)
{
	struct sockaddr_in a = {.sin_family = AF_INET}, b = a;
	unsigned port = 0;
	int fd;

	cr_assert_eq(sscanf(url, "http://127.0.0.1:%u/", &port), 1, "%s", url);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	inet_pton(AF_INET, src, &a.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &b.sin_addr);
	b.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    connect(fd, (struct sockaddr *)&b, sizeof(b)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One scrape from 127.0.0.1 that must answer 200 within @ms. */
static bool scrape_ok(const char *url, int ms)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000};
	char buf[64] = {0};
	int fd = tcp_from("127.0.0.1", url);
	ssize_t n;

	if (fd < 0)
		return false;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1
		? recv(fd, buf, sizeof(buf) - 1, MSG_WAITALL)
		: -1;
	close(fd);
	return n > 12 && strncmp(buf, "HTTP/1.", 7) == 0 &&
	       strncmp(buf + 9, "200", 3) == 0;
}

/*
 * Idle and slow clients from one address (127.0.0.2: connected and
 * silent, or stuck half way through their headers) take at most that
 * address's share of the connections: scrapes from another address are
 * answered meanwhile, and the idle ones are dropped after a short timeout.
 */
Test(metrics_http, answers_scrapes_while_idle_clients_hold_connections)
{
	char url[256];
	int idle[32], answered = 0;

	start_server();
	start_serve("127.0.0.1:0", url, sizeof(url));
	for (int i = 0; i < 32; i++) {
		idle[i] = tcp_from("127.0.0.2", url);
		if (idle[i] >= 0 && i % 2)
			(void)!write(idle[i],
				     "GET /metrics HTTP/1.1\r\nHost:", 28);
	}
	for (int i = 0; i < 6; i++)
		answered += scrape_ok(url, 3000);
	cr_expect_eq(answered, 6, "%d of 6 scrapes answered", answered);
	/* The header timeout closes what stayed idle. */
	{
		char b;
		struct timeval tv = {.tv_sec = 6};

		setsockopt(idle[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		cr_expect_eq(recv(idle[0], &b, 1, 0), 0,
			     "an idle client was kept for 6 s");
	}
	for (int i = 0; i < 32; i++)
		if (idle[i] >= 0)
			close(idle[i]);
}
