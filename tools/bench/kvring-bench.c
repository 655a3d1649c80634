/* SPDX-License-Identifier: MIT */
/*
 * kvring-bench.c - main of kvring-bench: `kvring-bench SCENARIO [options]`.
 * Owns the scenario table and the top-level options only; each scenario
 * (tools/bench/bench_<name>.c) parses its own options, runs, prints a table
 * or JSON lines, and exits 1 only if data was wrong or a step failed,
 * never because a figure is slow. To add a scenario, write its
 * bench_<name>.c, declare its entry point (here or in bench_common.h) and
 * add one line to the table below.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <kvring/version.h>

#include "bench_common.h"
#include "bench_place.h"
#include "bench_server.h"

/*
 * Scenarios owned by other files of tools/bench/ (bench_rtt.c, bench_xfer.c,
 * bench_scale.c, bench_server.c, bench_store.c). They are referenced weakly
 * so that this main links whether or not those files are part of the
 * build; a missing one shows as "not built". The ring is always here.
 */
#define BENCH_WEAK __attribute__((weak))
int bench_rtt_hot_main(int argc, char **argv) BENCH_WEAK;
int bench_rtt_cold_main(int argc, char **argv) BENCH_WEAK;
int bench_store_main(int argc, char **argv) BENCH_WEAK;
int bench_retrieve_main(int argc, char **argv) BENCH_WEAK;
int bench_scale_main(int argc, char **argv) BENCH_WEAK;
int bench_all_main(int argc, char **argv) BENCH_WEAK;
int bench_attach_main(int argc, char **argv) BENCH_WEAK;
int bench_hist_main(int argc, char **argv) BENCH_WEAK;
int kvr_bench_store(int argc, char **argv) BENCH_WEAK;
int bench_kv_main(int argc, char **argv) BENCH_WEAK;
int bench_l2_main(int argc, char **argv) BENCH_WEAK;
int bench_e2e_main(int argc, char **argv) BENCH_WEAK;
int bench_disk_main(int argc, char **argv) BENCH_WEAK;
int bench_capacity_main(int argc, char **argv) BENCH_WEAK;

static const struct bench_scenario scenarios[] = {
    {"ring", "SPSC ring round trip and one-way throughput vs cache-line floors",
     bench_ring_main},
    {"rtt_hot", "control round trip through kvringd, both sides spinning",
     bench_rtt_hot_main},
    {"rtt_cold", "control round trip through kvringd, woken by doorbells",
     bench_rtt_cold_main},
    {"store", "bulk store of N chunks through the shared pool",
     bench_store_main},
    {"retrieve", "bulk retrieve of N chunks through the shared pool",
     bench_retrieve_main},
    {"scale", "kvringd control path as workers are added", bench_scale_main},
    {"engine", "kvringd storage engine in-process: store, lookup, retrieve",
     kvr_bench_store},
    {"capacity", "storage engine costs at 1e4..1e7 objects, in-process",
     bench_capacity_main},
    {"attach", "pool attach and server start, 4 KiB vs huge pages",
     bench_attach_main},
    {"kv", "paged-KV gather/scatter vs memcpy and torch indexing",
     bench_kv_main},
    {"hist", "latency histograms on vs off: hot RTT p50, pipelined ops/s",
     bench_hist_main},
    {"l2", "L2 tier on a private redis-server vs a plain pipelined client",
     bench_l2_main},
    {"disk", "disk tier: write-back, read-through, restart, beside fio",
     bench_disk_main},
    {"e2e", "prefix reuse through the vLLM connector, Llama-style torch model",
     bench_e2e_main},
    {"all", "every scenario in one run", bench_all_main},
};

#define NR_SCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: kvring-bench [-h] [-V] SCENARIO [options]\n"
	       "       kvring-bench SCENARIO --help\n"
	       "\n"
	       "Benchmarks print figures; they exit 1 only if data was wrong.\n"
	       "\n"
	       "scenarios:\n");
	for (size_t i = 0; i < NR_SCENARIOS; i++)
		fprintf(f, "  %-10s %s%s\n", scenarios[i].name,
			scenarios[i].summary,
			scenarios[i].run ? "" : " (not built)");
	fprintf(f, "\n"
		   "options:\n"
		   "  -h, --help     show this help and exit\n"
		   "  -V, --version  show the version and exit\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	/* "+": stop at the scenario name; its options are its own. */
	while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return BENCH_EXIT_OK;
		case 'V':
			printf("kvring-bench %s\n", KVR_VERSION_STRING);
			return BENCH_EXIT_OK;
		default:
			usage(stderr);
			return BENCH_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		/* The usage line says SCENARIO is required: the whole suite
		 * takes minutes, so it runs only when asked ("all"). */
		fprintf(stderr, "kvring-bench: missing SCENARIO (try "
				"'kvring-bench all' for the whole suite)\n");
		usage(stderr);
		return BENCH_EXIT_USAGE;
	}
	for (size_t i = 0; i < NR_SCENARIOS; i++) {
		if (strcmp(argv[optind], scenarios[i].name) == 0) {
			char **sargv = argv + optind;
			int sargc = argc - optind;

			if (!scenarios[i].run) {
				fprintf(stderr,
					"kvring-bench: scenario '%s' is not "
					"built into this binary\n",
					scenarios[i].name);
				return BENCH_EXIT_ERR;
			}
			optind = 1; /* the scenario parses from its argv[1] */
			int rc = scenarios[i].run(sargc, sargv);

			/* Busy-poll figures per placement, if any were taken.
			 */
			bench_place_summary();
			return rc;
		}
	}
	fprintf(stderr, "kvring-bench: unknown scenario '%s'\n", argv[optind]);
	usage(stderr);
	return BENCH_EXIT_USAGE;
}
