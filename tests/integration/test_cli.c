/* SPDX-License-Identifier: MIT */
/*
 * test_cli.c - the command-line conventions every kvring tool shares
 * (STYLE.md section 12): a missing SCENARIO is a usage
 * error (exit 2), sizes follow kvringd's grammar everywhere (lib/parse.c)
 * and bad ones are named, kvring-bench's output keeps its contracts
 * (placement keys, the capacity lines), and kvring-inspect looks at the server
 * of $KVRING_SOCKET when told nothing else. Each case runs the real binary.
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

/* Counts the lines of @text holding @a and also @b (NULL: any). */
static int lines_with(const char *text, const char *a, const char *b)
{
	int n = 0;

	for (const char *l = text; l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char line[4096];

		if (len < sizeof(line)) {
			memcpy(line, l, len);
			line[len] = '\0';
			if (strstr(line, a) && (!b || strstr(line, b)))
				n++;
		}
		l = end ? end + 1 : NULL;
	}
	return n;
}

/* Every busy-poll line of ring names the placement its round's probe saw,
 * and the run ends with one summary line that counts those probes. */
Test(cli, bench_ring_names_the_placement_of_each_round)
{
	const char *argv[] = {BENCH,	 "ring",	   "--sizes",  "64",
			      "--iters", "2000",	   "--rounds", "2",
			      "--json",	 "--tput-records", "20000",    NULL};
	unsigned near = 99, far = 99;
	const char *sum;
	struct out o;
	int rtt;

	run(argv, NULL, &o);
	cr_assert_eq(o.status, 0, "exit %d: %s", o.status, o.text);
	rtt = lines_with(o.text, "\"mode\":\"rtt\"", NULL);
	cr_expect_eq(rtt, 9, "rtt lines: %d: %s", rtt, o.text);
	cr_expect_eq(
	    lines_with(o.text, "\"mode\":\"rtt\"", "\"placement_floor_ns\":"),
	    rtt, "%s", o.text);
	cr_expect_eq(
	    lines_with(o.text, "\"round\":1,", "\"placement\":\"n") +
		lines_with(o.text, "\"round\":1,", "\"placement\":\"far\""),
	    4, "round 1 lines not near/far: %s", o.text);
	sum = strstr(o.text, "\"scenario\":\"placement\"");
	cr_assert_neq(sum, NULL, "no summary: %s", o.text);
	cr_assert_neq(strstr(sum, "\"probes_near\":"), NULL, "%s", sum);
	sscanf(strstr(sum, "\"probes_near\":"), "\"probes_near\":%u", &near);
	cr_assert_neq(strstr(sum, "\"probes_far\":"), NULL, "%s", sum);
	sscanf(strstr(sum, "\"probes_far\":"), "\"probes_far\":%u", &far);
	cr_expect_eq(near + far, 2, "probes %u near + %u far: %s", near, far,
		     sum);
	cr_expect_neq(strstr(sum, "\"ring.kvring_64.ratio_to_floor."), NULL,
		      "%s", sum);
	cr_expect_neq(strstr(sum, near && far ? "\"single_placement\":false"
					      : "\"single_placement\":true"),
		      NULL, "%s", sum);
}

/* The number after the first "@key": in @text, or -1 when it is not there. */
static double first_value(const char *text, const char *key)
{
	char want[64];
	const char *p;
	double v = -1;

	snprintf(want, sizeof(want), "\"%s\":", key);
	p = strstr(text, want);
	if (p && sscanf(p + strlen(want), "%lf", &v) != 1)
		v = -1;
	return v;
}

/*
 * capacity prints one line per size, each beside the first size, with the
 * memory floor it measured and the lookups and stores in its misses.
 */
Test(cli, bench_capacity_reports_each_size_beside_the_first)
{
	const char *argv[] = {BENCH,	   "capacity", "--sizes", "1e3,4000",
			      "--samples", "200",      "--json",  NULL};
	double meta, miss;
	struct out o;

	run(argv, NULL, &o);
	cr_assert_eq(o.status, 0, "exit %d: %s", o.status, o.text);
	cr_expect_eq(lines_with(o.text, "\"scenario\":\"capacity\"",
				"\"baseline_objects\":1000,"),
		     2, "%s", o.text);
	cr_expect_eq(
	    lines_with(o.text, "\"objects\":4000,", "\"ratio_lookup_p99\":"), 1,
	    "%s", o.text);
	cr_expect_eq(
	    lines_with(o.text, "\"objects\":1000,", "\"ratio_evict_p50\":1,"),
	    1, "%s", o.text);
	cr_expect_eq(lines_with(o.text, "\"objects\":4000,",
				"\"ratio_lookup16_key_p50\":"),
		     1, "%s", o.text);
	/* The first size is its own baseline: no misses above it. */
	cr_expect_eq(
	    lines_with(o.text, "\"objects\":1000,", "\"lookup_misses\":0,"), 1,
	    "%s", o.text);
	miss = first_value(o.text, "miss_p50_ns");
	/* One read of memory, timed with the clock: never free. */
	cr_expect(miss > 0 && miss < 100000, "miss %f: %s", miss, o.text);
	meta = first_value(o.text, "meta_bytes_per_object");
	/* A 1000-object engine holds at least its object records. */
	cr_expect(meta >= 32 && meta < 100000, "meta %f: %s", meta, o.text);
}

/*
 * The value of @key on the capacity_served line of @objects (a line that
 * starts "...\"objects\":N,"), or -1 when there is no such line or key.
 */
static double served_value(const char *text, const char *objects,
			   const char *key)
{
	for (const char *l = text; l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char line[4096], want[64];
		const char *p;
		double v = -1;

		if (len < sizeof(line)) {
			memcpy(line, l, len);
			line[len] = '\0';
			snprintf(want, sizeof(want), "\"%s\":", key);
			if (strstr(line, "\"scenario\":\"capacity_served\"") &&
			    strstr(line, objects) && (p = strstr(line, want)) &&
			    sscanf(p + strlen(want), "%lf", &v) == 1)
				return v;
		}
		l = end ? end + 1 : NULL;
	}
	return -1;
}

/*
 * capacity --served adds, after the engine's lines, one line per size
 * measured through a private kvringd: lookups and stores beside a ping,
 * the inspector's snapshot and kvringd's memory, each size beside the
 * first one.
 */
Test(cli, bench_capacity_served_reports_each_size_through_kvringd)
{
	const char *argv[] = {BENCH,	 "capacity", "--served",
			      "--sizes", "1e3,4000", "--samples",
			      "200",	 "--json",   NULL};
	static const char *const keys[] = {
	    "ping_p50_ns",
	    "lookup_p50_ns",
	    "lookup_p99_ns",
	    "store_p50_ns",
	    "store_p99_ns",
	    "lookup_over_ping",
	    "inspect_snapshot_p50_us",
	    "kvringd_anon_bytes_per_object",
	    "align_bytes",
	    "ratio_lookup_p50",
	    "ratio_store_p50",
	};
	static const char *const sizes[] = {"\"objects\":1000,",
					    "\"objects\":4000,"};
	struct out o;

	run(argv, NULL, &o);
	cr_assert_eq(o.status, 0, "exit %d: %s", o.status, o.text);
	cr_expect_eq(lines_with(o.text, "\"scenario\":\"capacity\"", NULL), 2,
		     "%s", o.text);
	cr_expect_eq(lines_with(o.text, "\"scenario\":\"capacity_served\"",
				"\"baseline_objects\":1000,"),
		     2, "%s", o.text);
	for (unsigned s = 0; s < 2; s++)
		for (unsigned k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			double v = served_value(o.text, sizes[s], keys[k]);

			cr_expect(v > 0, "%s %s: %f: %s", sizes[s], keys[k], v,
				  o.text);
		}
	/* The first size is its own baseline. */
	cr_expect_eq(served_value(o.text, sizes[0], "ratio_lookup_p50"), 1.0,
		     "%s", o.text);
	cr_expect_eq(served_value(o.text, sizes[0], "ratio_store_p50"), 1.0,
		     "%s", o.text);
	/* A pool of exactly N chunks of at least 128 bytes, >= 1 MiB. */
	cr_expect_eq(served_value(o.text, sizes[0], "align_bytes"), 2048.0,
		     "%s", o.text);
	cr_expect_eq(served_value(o.text, sizes[1], "align_bytes"), 512.0, "%s",
		     o.text);
}

/*
 * capacity --sized 0.9 sizes the engine for 3 600 of 4 000 objects: the
 * key index grows near the end of the fill, still migrating when the fill
 * ends; the line says so, with the lookups then and the idle steps that
 * ended the move. Sized for all, no migration is left.
 */
Test(cli, bench_capacity_sized_reports_the_migration_and_its_idle_steps)
{
	const char *argv[] = {BENCH,	 "capacity", "--sizes",	  "4000",
			      "--sized", "0.9",	     "--samples", "200",
			      "--json",	 NULL};
	const char *whole[] = {BENCH,	    "capacity", "--sizes", "4000",
			       "--samples", "200",	"--json",  NULL};
	double steps, p50;
	struct out o;

	run(argv, NULL, &o);
	cr_assert_eq(o.status, 0, "exit %d: %s", o.status, o.text);
	cr_expect_eq(lines_with(o.text, "\"sized_fraction\":0.9,",
				"\"migrating_after_fill\":true,"),
		     1, "%s", o.text);
	steps = first_value(o.text, "idle_steps");
	/* About 3 690 old entries, at most 8 moved a step: at most 2 472 by
	 * the 309 inserts after the growth, the rest by idle steps. */
	cr_expect(steps >= 100 && steps < 10000, "steps %f: %s", steps, o.text);
	p50 = first_value(o.text, "lookup_p50_ns_migrating");
	cr_expect(p50 > 0 && p50 < 1000000, "p50 %f: %s", p50, o.text);
	run(whole, NULL, &o);
	cr_assert_eq(o.status, 0, "exit %d: %s", o.status, o.text);
	cr_expect_eq(lines_with(o.text, "\"sized_fraction\":1,",
				"\"migrating_after_fill\":false"),
		     1, "%s", o.text);
	cr_expect_eq(strstr(o.text, "\"idle_steps\":"), NULL, "%s", o.text);
}

Test(cli, bench_capacity_names_a_bad_size)
{
	const char *argv[] = {BENCH, "capacity", "--sizes", "1e3,1e9", NULL};
	struct out o;

	run(argv, NULL, &o);
	cr_expect_eq(o.status, 2, "exit %d: %s", o.status, o.text);
	cr_expect_neq(strstr(o.text, "--sizes '1e3,1e9'"), NULL, "%s", o.text);
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
