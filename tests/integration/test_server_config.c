/* SPDX-License-Identifier: MIT */
/*
 * test_server_config.c - a real kvringd started from a --config file on
 * disk: the file's settings reach the running server (its control
 * segment's geometry), the file's own socket and name are used, flags on
 * the command line override it, and a bad file stops the start with exit
 * status 2 and a message naming the file and line; the shipped example
 * (docs/examples/kvringd.conf) is a valid file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "t_server.h"

static struct kvrd srv;
static char conf[200];

static void setup(void)
{
	t_server_init(&srv);
	snprintf(conf, sizeof(conf), "%s.conf", srv.log_path);
}

static void teardown(void)
{
	unlink(conf);
	t_server_cleanup(&srv);
}

TestSuite(server_config, .init = setup, .fini = teardown, .timeout = 60);

/* Write @text to the test's config file, owner-only. */
static void write_conf(const char *text)
{
	FILE *f = fopen(conf, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(conf, 0600), 0);
}

Test(server_config, file_settings_reach_the_running_server)
{
	/* t_server_start adds --socket/--name/--pool-size 64M as flags;
	 * --max-workers 5 here overrides the file's 3. */
	const char *args[] = {"--config", conf, "--max-workers", "5", NULL};

	write_conf("# kvringd test config\n"
		   "\n"
		   "max-workers = 3\n"
		   "max-keys = 17\n"
		   "lease-ms = 1234\n"
		   "heartbeat-ms=50\n"
		   "allow-root\n");
	t_server_start(&srv, args);
	cr_expect_eq(srv.hdr->max_keys, 17);
	cr_expect_eq(srv.hdr->lease_ms, 1234);
	cr_expect_eq(srv.hdr->heartbeat_ms, 50);
	cr_expect_eq(srv.hdr->max_channels, 5, "the flag overrides the file");
	cr_expect_eq(srv.hdr->pool_bytes, 64ull << 20);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server_config, a_bad_file_stops_the_start_naming_file_and_line)
{
	const char *argv[] = {"kvringd", "--config", conf,     "--socket",
			      srv.sock,	 "--name",   srv.name, NULL};
	char want[256];
	pid_t pid;

	write_conf("pool-size = 16M\nmax-wrokers = 3\n");
	pid = t_server_spawn(&srv, argv);
	cr_expect_eq(t_server_wait_exit(pid, t_timeout_ms(20000)), 2);
	snprintf(want, sizeof(want), "%s:2: unknown key 'max-wrokers'", conf);
	cr_expect(t_server_log_has(&srv, want), "no '%s' in the log", want);
	cr_expect(access(srv.sock, F_OK) != 0, "a socket was made");
}

Test(server_config, a_file_others_may_write_is_refused)
{
	const char *argv[] = {"kvringd", "--config", conf,     "--socket",
			      srv.sock,	 "--name",   srv.name, NULL};
	pid_t pid;

	write_conf("pool-size = 16M\n");
	cr_assert_eq(chmod(conf, 0666), 0);
	pid = t_server_spawn(&srv, argv);
	cr_expect_eq(t_server_wait_exit(pid, t_timeout_ms(20000)), 1);
	cr_expect(t_server_log_has(&srv, "chmod go-w"));
}

Test(server_config, the_shipped_example_is_a_valid_file)
{
	const char *argv[] = {"kvringd", "--config", conf, "--print-config",
			      NULL};
	char text[4096];
	size_t n;
	FILE *f = fopen(KVR_SRC_DIR "/docs/examples/kvringd.conf", "r");
	pid_t pid;

	/* A copy of our own: the checkout's mode is the umask's. */
	cr_assert_not_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	write_conf(text);
	pid = t_server_spawn(&srv, argv);
	cr_expect_eq(t_server_wait_exit(pid, t_timeout_ms(20000)), 0);
	cr_expect(t_server_log_has(&srv, "pool-size          = 4294967296"),
		  "the example's pool-size is not in --print-config");
	cr_expect(t_server_log_has(&srv, "histograms         = global"));
}
