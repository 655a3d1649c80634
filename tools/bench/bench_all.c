/* SPDX-License-Identifier: MIT */
/*
 * bench_all.c - the scenario "all": ring, rtt_hot, rtt_cold, store,
 * retrieve, scale, attach and engine in turn, one run, the common options
 * passed on to each. It sits above the scenarios; nothing calls back up.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include <kvring/clock.h>

#include "bench_common.h"
#include "bench_server.h"

int kvr_bench_store(int argc, char **argv) __attribute__((weak));

/* Runs scenario @fn with @args (NULL-terminated, args[0] its name) under
 * a "## scenario" heading (unless @json; @first has no blank line before
 * it); returns its exit code, and keeps the worst one in *worst. */
static int run_one(int (*fn)(int, char **), char **args, bool json, bool first,
		   int *worst)
{
	int n = 0, rc;

	while (args[n])
		n++;
	if (!json)
		printf("%s## scenario %s\n", first ? "" : "\n", args[0]);
	fflush(NULL);
	optind = 0;
	rc = fn(n, args);
	if (rc > *worst)
		*worst = rc;
	return rc;
}

int bench_all_main(int argc, char **argv)
{
	static int (*const mine[])(int, char **) = {
	    bench_rtt_hot_main,	 bench_rtt_cold_main, bench_store_main,
	    bench_retrieve_main, bench_scale_main,    bench_attach_main,
	};
	static const char *const mine_names[] = {
	    "rtt_hot", "rtt_cold", "store", "retrieve", "scale", "attach"};
	struct bench_run_opts o;
	char cpu_p[16], cpu_c[16];
	char *ring[16], *engine[8];
	int k = 0, rc, worst = BENCH_EXIT_OK;
	uint64_t t0 = kvr_clock_now_ns();

	rc = bench_run_opts_parse(argc, argv, "all",
				  "  runs ring, rtt_hot, rtt_cold, store, "
				  "retrieve, scale, attach and engine in\n"
				  "  turn, passing these options on\n",
				  &o);
	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;

	/* ring has its own option names. */
	snprintf(cpu_p, sizeof(cpu_p), "%d", o.cpu_client);
	snprintf(cpu_c, sizeof(cpu_c), "%d", o.cpu_server);
	ring[k++] = "ring";
	ring[k++] = "--cpu-producer";
	ring[k++] = cpu_p;
	ring[k++] = "--cpu-consumer";
	ring[k++] = cpu_c;
	if (o.json)
		ring[k++] = "--json";
	if (o.quick) {
		ring[k++] = "--iters";
		ring[k++] = "20000";
		ring[k++] = "--rounds";
		ring[k++] = "3";
		ring[k++] = "--tput-records";
		ring[k++] = "1000000";
	}
	ring[k] = NULL;
	run_one(bench_ring_main, ring, o.json, true, &worst);

	for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
		char *args[argc + 1];

		args[0] = (char *)mine_names[i];
		for (int a = 1; a < argc; a++)
			args[a] = argv[a];
		args[argc] = NULL;
		rc = run_one(mine[i], args, o.json, false, &worst);
		if (rc != BENCH_EXIT_OK)
			fprintf(stderr, "kvring-bench: all: %s exited %d\n",
				mine_names[i], rc);
	}

	if (kvr_bench_store) {
		k = 0;
		engine[k++] = "engine";
		if (o.json)
			engine[k++] = "--json";
		if (o.quick) {
			engine[k++] = "--keys";
			engine[k++] = "65536";
		}
		engine[k] = NULL;
		run_one(kvr_bench_store, engine, o.json, false, &worst);
	}
	if (!o.json)
		printf("\n## all scenarios: %.0f s, exit %d\n",
		       (double)(kvr_clock_now_ns() - t0) / 1e9, worst);
	return worst;
}
