/* SPDX-License-Identifier: MIT */
/*
 * test_log_debug.c - kvringd --log-level debug against a real kvringd and
 * a real worker: each connection (accepted, closed) and each request (op,
 * keys, outcome) gets a line, through the peer rate limit, so a thousand
 * pings write a bounded number of lines and a summary counts the rest;
 * at the default level none of those lines is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "worker_srv.h"

static struct kvrd srv;

static void teardown(void)
{
	t_server_down(&srv);
}

TestSuite(log_debug, .fini = teardown, .timeout = 60);

static struct kvr_client *start_and_connect(const char *level)
{
	const char *args[] = {
	    "--allow-root", "--heartbeat-ms", "20", "--log-level", level, NULL};

	t_server_init(&srv);
	t_server_start(&srv, args);
	return t_connect_1x1(&srv, "kvring-log-debug");
}

/* Lines of the server's log that contain @needle. */
static unsigned lines_with(const char *needle)
{
	FILE *f = fopen(srv.log_path, "r");
	char line[1024];
	unsigned n = 0;

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static char summary[96];

static bool summarized(void *arg)
{
	(void)arg;
	return lines_with(summary) > 0;
}

Test(log_debug, connections_and_requests_are_logged_rate_limited)
{
	struct kvr_client *c = start_and_connect("debug");
	struct kvr_key k[3] = {{1, 2}, {3, 4}, {5, 6}};
	char want[128];
	unsigned pings;

	cr_assert_eq(kvr_lookup(c, k, 3, NULL), 0);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	snprintf(want, sizeof(want), "accepted: pid %d uid %u", (int)getpid(),
		 (unsigned)getuid());
	cr_expect(t_server_log_has(&srv, want), "no '%s'", want);
	cr_expect_eq(lines_with(": lookup req "), 1);
	cr_expect(t_server_log_has(&srv, "3 keys, flags 0x0 -> ok, value 0"),
		  "the lookup's detail is not logged");
	pings = lines_with(": ping req ");
	cr_expect_geq(pings, 5, "%u ping lines", pings);
	cr_expect_leq(pings, 100, "%u ping lines: not rate-limited", pings);
	/* The held lines are counted in a summary once a token is back. */
	snprintf(summary, sizeof(summary), "similar lines from pid %d",
		 (int)getpid());
	cr_expect(t_wait_until(summarized, NULL, 5000),
		  "no summary of the held lines");
	kvr_close(c);
	snprintf(want, sizeof(want), "closed in state active");
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect(t_server_log_has(&srv, want), "no '%s'", want);
}

Test(log_debug, none_of_it_at_the_default_level)
{
	struct kvr_client *c = start_and_connect("info");

	for (int i = 0; i < 100; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	kvr_close(c);
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect_eq(lines_with(": ping req "), 0);
	cr_expect_eq(lines_with("accepted: pid"), 0);
	cr_expect(t_server_log_has(&srv, "worker connected"),
		  "the info lines are there");
}
