/* SPDX-License-Identifier: MIT */
/*
 * test_cli.c - the command-line conventions every kvring tool shares
 * (STYLE.md section 12): a missing SCENARIO is a usage
 * error (exit 2), sizes follow kvringd's grammar everywhere (lib/parse.c)
 * and bad ones are named, and kvring-inspect looks at the server of
 * $KVRING_SOCKET when told nothing else. Each case runs the real binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "t_server.h"

struct out {
	int status;
	char text[16384]; /* stdout and stderr, interleaved */
};

/* Run argv (argv[0] a path) with @env_sock as $KVRING_SOCKET (NULL:
 * unset); capture both streams. */
static void run(const char *const *argv, const char *env_sock, struct out *o)
{
	int p[2], st;
	size_t len = 0;
	ssize_t r;
	pid_t pid;

	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		if (env_sock)
			setenv("KVRING_SOCKET", env_sock, 1);
		else
			unsetenv("KVRING_SOCKET");
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	while (len < sizeof(o->text) - 1 &&
	       (r = read(p[0], o->text + len, sizeof(o->text) - 1 - len)) > 0)
		len += (size_t)r;
	o->text[len] = '\0';
	close(p[0]);
	waitpid(pid, &st, 0);
	o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define BENCH	KVR_BIN_DIR "/tools/kvring-bench"
#define INSPECT KVR_BIN_DIR "/tools/kvring-inspect"
#define STRESS	KVR_BIN_DIR "/tools/kvring-stress"

TestSuite(cli, .timeout = 60);

/* The bench cases need kvring-bench, built with -DKVR_BUILD_BENCH=ON (the
 * test command does); without it they are not registered. */
#ifdef KVR_HAVE_BENCH
Test(cli, bench_prints_usage_and_exits_2_when_scenario_is_missing)
{
	const char *argv[] = {BENCH, NULL};
	struct out o;

	run(argv, NULL, &o);
	cr_expect_eq(o.status, 2, "exit %d: %s", o.status, o.text);
	cr_expect_neq(strstr(o.text, "missing SCENARIO"), NULL, "%s", o.text);
	cr_expect_neq(strstr(o.text, "usage: kvring-bench"), NULL, "%s",
		      o.text);
}

/* "1GiB" was rejected by the bench's own parser; --help after the option
 * exits 0 only if the value parsed. */
Test(cli, bench_takes_kvringd_sizes_when_given_gib)
{
	const char *argv[] = {BENCH,  "store",	"--pool-size",
			      "1GiB", "--help", NULL};
	struct out o;

	run(argv, NULL, &o);
	cr_expect_eq(o.status, 0, "exit %d: %s", o.status, o.text);
}

Test(cli, bench_names_the_option_when_a_size_is_bad)
{
	const char *argv[] = {BENCH, "store", "--pool-size", "010Q", NULL};
	struct out o;

	run(argv, NULL, &o);
	cr_expect_eq(o.status, 2, "exit %d: %s", o.status, o.text);
	cr_expect_neq(strstr(o.text, "--pool-size: bad value '010Q'"), NULL,
		      "%s", o.text);
}

/* The bench read CPUs with strtol base 0: "0x1" was CPU 1 and "010" CPU
 * 8, unlike every other number. Now one grammar: decimal only. */
Test(cli, bench_refuses_a_base_prefix_when_a_cpu_is_given)
{
	const char *hex[] = {BENCH, "ring",   "--cpu-producer",
			     "0x1", "--help", NULL};
	const char *dec[] = {BENCH, "ring",   "--cpu-producer",
			     "-1",  "--help", NULL};
	struct out o;

	run(hex, NULL, &o);
	cr_expect_eq(o.status, 2, "exit %d: %s", o.status, o.text);
	cr_expect_neq(strstr(o.text, "0x1"), NULL, "value not named: %s",
		      o.text);
	run(dec, NULL, &o);
	cr_expect_eq(o.status, 0, "exit %d: %s", o.status, o.text);
}
#endif /* KVR_HAVE_BENCH */

/* kvring-stress's own parse_num refused "10K", which the bench took. */
Test(cli, stress_takes_binary_multiples_when_a_count_is_suffixed)
{
	const char *ok[] = {STRESS, "--ops", "10K", "--help", NULL};
	const char *bad[] = {STRESS, "--ops", "-1", NULL};
	struct out o;

	run(ok, NULL, &o);
	cr_expect_eq(o.status, 0, "exit %d: %s", o.status, o.text);
	run(bad, NULL, &o);
	cr_expect_eq(o.status, 2, "exit %d: %s", o.status, o.text);
	cr_expect_neq(strstr(o.text, "bad number \"-1\""), NULL, "%s", o.text);
}

Test(cli, inspect_reads_the_server_of_kvring_socket_when_no_target)
{
	struct kvrd srv;
	const char *args[] = {"--allow-root", NULL};
	const char *argv[] = {INSPECT, "--json", NULL};
	char want[64];
	struct out o;

	t_server_init(&srv);
	t_server_start(&srv, args);
	run(argv, srv.sock, &o);
	snprintf(want, sizeof(want), "\"server_pid\":%d", (int)srv.pid);
	cr_expect_eq(o.status, 0, "exit %d: %s", o.status, o.text);
	cr_expect_neq(strstr(o.text, want), NULL, "want %s in %s", want,
		      o.text);
	t_server_stop(&srv);
	t_server_cleanup(&srv);
}

Test(cli, inspect_fails_naming_the_socket_when_kvring_socket_has_no_server)
{
	const char *argv[] = {INSPECT, NULL};
	struct out o;

	run(argv, "/tmp/kvring-test-cli-nobody.sock", &o);
	cr_expect_eq(o.status, 1, "exit %d: %s", o.status, o.text);
	cr_expect_neq(strstr(o.text, "/tmp/kvring-test-cli-nobody.sock"), NULL,
		      "%s", o.text);
}
