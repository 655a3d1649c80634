/* SPDX-License-Identifier: MIT */
/*
 * test_l2_probe.c - kvringd's start-up probe of its L2 nodes against real
 * Redis servers and real sockets: a password that is missing (NOAUTH) or
 * wrong (WRONGPASS), a port nobody listens on (refused), a name under
 * .invalid (unresolvable), a listener that never answers (timeout), a
 * real three-master cluster (every master probed, the slot map whole).
 * Each node's state is logged with its reason before "kvringd ready";
 * --l2-required turns a failed probe into exit status 1 with a line that
 * names the node and what to do. At run time a lane without a password
 * finds such a node down (NOAUTH), not up, and error replies (-OOM on
 * every upload) are logged per kind, rate-limited, not only counted.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "l2_suite.h"

static struct t_redis rds;
static struct wsrv s1;
static char url[128];
static int silent_fd = -1;

static void setup(void)
{
	l2t_need_redis();
	memset(&s1, 0, sizeof(s1));
	wsrv_init(&s1, "64M");
}

static void teardown(void)
{
	l2t_down(&s1);
	if (rds.pid)
		t_redis_stop(&rds);
	if (silent_fd >= 0)
		close(silent_fd);
	silent_fd = -1;
	unsetenv("KVRING_L2_PASSWORD");
}

TestSuite(l2_probe, .init = setup, .fini = teardown, .timeout = 120);

/* A real Redis that needs password "sekret" (set once it answered). */
static void redis_with_password(void)
{
	char out[64];

	t_redis_start(&rds, NULL);
	t_redis_cli(&rds, out, sizeof(out), "CONFIG SET requirepass sekret");
	cr_assert_str_eq(out, "OK", "CONFIG SET requirepass: %s", out);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
}

/* The whole log of server @t (a real file the server wrote). */
static char *log_text(const struct kvrd *t)
{
	FILE *f = fopen(t->log_path, "r");
	char *buf = calloc(1, 1 << 20);

	cr_assert(f && buf);
	(void)!fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	return buf;
}

/* Whether @a comes before @b in @text (both present). */
static bool before(const char *text, const char *a, const char *b)
{
	const char *pa = strstr(text, a), *pb = strstr(text, b);

	return pa && pb && pa < pb;
}

/*
 * Run kvringd with --l2 @l2 and @more until it exits (a failed start) and
 * return its status; its log stays in s1.t.
 */
static int start_fails(const char *l2, const char *const *more)
{
	const char *argv[32] = {"kvringd", "--socket",	    s1.t.sock,
				"--name",  s1.t.name,	    "--pool-size",
				"16M",	   "--no-prefault", "--huge-pages",
				"off",	   "--l2",	    l2};
	int n = 12;
	pid_t pid;

	for (int i = 0; more && more[i]; i++)
		argv[n++] = more[i];
	argv[n] = NULL;
	pid = t_server_spawn(&s1.t, argv);
	return t_server_wait_exit(pid, t_timeout_ms(20000));
}

Test(l2_probe, missing_password_is_logged_as_noauth_before_ready)
{
	struct kvr_client *c;
	struct kvr_key *k;
	char *log, want[160];

	redis_with_password();
	l2t_start(&s1, url, NULL);
	log = log_text(&s1.t);
	snprintf(want, sizeof(want), "l2: probe 127.0.0.1:%d: NOAUTH",
		 rds.port);
	cr_expect(before(log, want, "kvringd ready"),
		  "no '%s' before ready in:\n%s", want, log);
	cr_expect_not_null(strstr(log, "--l2-auth-file or $KVRING_L2_PASSWORD"),
			   "%s", log);
	cr_expect_not_null(strstr(log, "0 of 1 nodes usable at start"), "%s",
			   log);
	free(log);
	/* At run time the lanes find the node down for the same reason,
	 * never "up" with every command refused. */
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 7, 4);
	cr_assert_eq(wsrv_store(c, k, 4, 4096), 4);
	l2t_wait_ended(&s1, 4);
	cr_expect_eq(T_L2(&s1.t, up_failed), 4);
	cr_expect(t_server_log_has(&s1.t, "down (NOAUTH: the node needs a "
					  "password"),
		  "the lane does not say why the node is down");
	snprintf(want, sizeof(want), "l2: node 127.0.0.1:%d up", rds.port);
	cr_expect(!t_server_log_has(&s1.t, want), "'%s' in the log", want);
	kvr_close(c);
	free(k);
	cr_expect_eq(wsrv_stop(&s1), 0);
}

/* Count the lines of @t's log that contain @needle. */
static unsigned log_lines(const struct kvrd *t, const char *needle)
{
	char *log = log_text(t), *p = log;
	unsigned n = 0;

	while ((p = strstr(p, needle))) {
		n++;
		p++;
	}
	free(log);
	return n;
}

static bool oom_summarized(void *arg)
{
	return t_server_log_has(arg, "similar lines (log rate limit; they "
				     "began \"l2: node %s answered %s with");
}

Test(l2_probe, error_replies_at_run_time_are_logged_per_kind_rate_limited)
{
	struct kvr_client *c;
	struct kvr_key *k;
	char out[64];
	unsigned lines;

	t_redis_start(&rds, NULL);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rds.port);
	/* Every write refused with -OOM from now on. */
	t_redis_cli(&rds, out, sizeof(out),
		    "CONFIG SET maxmemory-policy "
		    "noeviction");
	t_redis_cli(&rds, out, sizeof(out), "CONFIG SET maxmemory 1");
	cr_assert_str_eq(out, "OK");
	l2t_start(&s1, url, NULL);
	c = wsrv_connect(&s1, 0, 5000);
	k = l2t_keys_for(c, 11, 48);
	/* In rounds of 8 commits, well inside --l2-queue: none dropped. */
	for (int i = 0; i < 48; i++) {
		cr_assert_eq(wsrv_store(c, &k[i], 1, 4096), 1);
		if (i % 8 == 7)
			l2t_wait_ended(&s1, (uint64_t)i + 1);
	}
	cr_expect_eq(T_L2(&s1.t, up_failed), 48);
	cr_expect_geq(T_L2(&s1.t, errors[3]), 48, "errors.oom");
	lines = log_lines(&s1.t, "with an error (OOM");
	cr_expect_geq(lines, 1, "the OOM replies were only counted");
	cr_expect_leq(lines, 20, "%u lines: not rate-limited", lines);
	cr_expect(t_server_log_has(&s1.t, "raise maxmemory"),
		  "no hint with the OOM line");
	/* The held lines are counted once a token is back (heartbeat). */
	cr_expect(t_wait_until(oom_summarized, &s1.t, 5000),
		  "no summary of the held OOM lines");
	kvr_close(c);
	free(k);
	cr_expect_eq(wsrv_stop(&s1), 0);
}

Test(l2_probe, wrong_password_with_l2_required_stops_the_start)
{
	const char *more[] = {"--l2-required", NULL};
	char want[160];

	redis_with_password();
	setenv("KVRING_L2_PASSWORD", "not-it", 1);
	cr_expect_eq(start_fails(url, more), 1);
	snprintf(want, sizeof(want), "l2: probe 127.0.0.1:%d: WRONGPASS",
		 rds.port);
	cr_expect(t_server_log_has(&s1.t, want), "no '%s'", want);
	snprintf(want, sizeof(want),
		 "--l2-required is set: not starting. Fix 127.0.0.1:%d",
		 rds.port);
	cr_expect(t_server_log_has(&s1.t, want), "no '%s'", want);
	cr_expect(t_server_log_has(&s1.t, "drop --l2-required"));
	cr_expect(!t_server_log_has(&s1.t, "kvringd ready"));
}

Test(l2_probe, right_password_with_l2_required_starts)
{
	const char *more[] = {"--l2-required", NULL};
	char want[160];

	redis_with_password();
	setenv("KVRING_L2_PASSWORD", "sekret", 1);
	l2t_start(&s1, url, more);
	snprintf(want, sizeof(want),
		 "l2: probe 127.0.0.1:%d: up (AUTH accepted, PING answered",
		 rds.port);
	cr_expect(t_server_log_has(&s1.t, want), "no '%s'", want);
	cr_expect_eq(wsrv_stop(&s1), 0);
}

Test(l2_probe, refused_port_is_named_and_fails_a_required_start)
{
	const char *more[] = {"--l2-required", NULL};
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* A port that was free a moment ago and has no listener. */
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sl) == 0 &&
		  getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	close(fd);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%u", ntohs(sa.sin_port));
	cr_expect_eq(start_fails(url, more), 1);
	cr_expect(t_server_log_has(&s1.t, ": refused (connect: Connection "
					  "refused): nothing listens there"));
}

Test(l2_probe, unresolvable_name_is_said_so_and_starts_without_required)
{
	const char *more[] = {"--l2-required", NULL};
	char *log;

	cr_expect_eq(start_fails("redis://kvring-l2-probe.invalid:6379", more),
		     1);
	cr_expect(t_server_log_has(&s1.t, "l2: probe kvring-l2-probe.invalid:"
					  "6379: unresolvable"));
	cr_expect(!t_server_log_has(&s1.t, "No route to host"));
	/* Without --l2-required the server starts and says why L2 is down. */
	t_server_cleanup(&s1.t);
	wsrv_init(&s1, "64M");
	l2t_start(&s1, "redis://kvring-l2-probe.invalid:6379", NULL);
	log = log_text(&s1.t);
	cr_expect(before(log, "unresolvable", "kvringd ready"), "%s", log);
	free(log);
	/* A lane that tries the node later says the same, not "No route
	 * to host". */
	{
		struct kvr_client *c = wsrv_connect(&s1, 0, 5000);
		struct kvr_key *k = l2t_keys_for(c, 9, 2);

		cr_assert_eq(wsrv_store(c, k, 2, 4096), 2);
		l2t_wait_ended(&s1, 2);
		kvr_close(c);
		free(k);
	}
	cr_expect(t_server_log_has(&s1.t, "(host name does not resolve)"));
	cr_expect(!t_server_log_has(&s1.t, "No route to host"));
	cr_expect_eq(wsrv_stop(&s1), 0);
}

Test(l2_probe, silent_node_times_out_within_the_io_deadline)
{
	const char *more[] = {"--l2-required", "--l2-io-ms", "300", NULL};
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);

	/* Listening, never accepting, never answering: the connection
	 * completes in the kernel's backlog and the PING gets no reply. */
	silent_fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(silent_fd >= 0 &&
		  bind(silent_fd, (struct sockaddr *)&sa, sl) == 0 &&
		  listen(silent_fd, 8) == 0 &&
		  getsockname(silent_fd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%u", ntohs(sa.sin_port));
	cr_expect_eq(start_fails(url, more), 1);
	cr_expect(t_server_log_has(&s1.t, ": timeout ("),
		  "the silent node is not reported as a timeout");
}

Test(l2_probe, cluster_masters_are_all_probed_and_the_map_is_whole)
{
	const char *more[] = {"--l2-required", NULL};
	struct t_cluster cl;
	char seed[64], want[96];

	memset(&cl, 0, sizeof(cl));
	t_cluster_start(&cl);
	/* One seed: the other masters come from its slot map. */
	snprintf(seed, sizeof(seed), "redis-cluster://127.0.0.1:%d",
		 cl.node[0].port);
	l2t_start(&s1, seed, more);
	for (int i = 0; i < T_CLUSTER_N; i++) {
		snprintf(want, sizeof(want), "l2: probe 127.0.0.1:%d: up",
			 cl.node[i].port);
		cr_expect(t_server_log_has(&s1.t, want), "no '%s'", want);
	}
	cr_expect(t_server_log_has(&s1.t, "slot map assigns 16384 of 16384"));
	cr_expect_eq(wsrv_stop(&s1), 0);
	t_cluster_stop(&cl);
}
