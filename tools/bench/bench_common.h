/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - helpers shared by the kvring-bench scenarios: the
 * scenario table entry, a cheap calibrated clock, CPU pinning, percentiles,
 * a pre-touched shared mapping for fork()ed peers, child reaping and one-line
 * JSON output. Scenarios live in tools/bench/bench_<name>.c and are listed in
 * the table of kvring-bench.c. Nothing here knows a scenario.
 */
#ifndef KVR_BENCH_COMMON_H
#define KVR_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <kvring/proto.h>

#include "emit.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>

#include <kvring/clock.h>
#endif

/* Exit codes shared by every scenario (STYLE.md section 12). */
#define BENCH_EXIT_OK	 0
#define BENCH_EXIT_ERR	 1 /* runtime error, including wrong data */
#define BENCH_EXIT_USAGE 2

/*
 * One kvring-bench scenario. run() gets argv[0] = the scenario name and
 * parses the rest itself (getopt_long, optind already reset); it returns
 * a BENCH_EXIT_* code. Never fails because a figure is slow.
 */
struct bench_scenario {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
};

/* Scenario entry points (one per bench_<name>.c). */
int bench_ring_main(int argc, char **argv);

/* ---- clock ---- */

/*
 * bench_clock_init - calibrate bench_ticks() against kvr_clock_now_ns()
 * (about 20 ms). Call once before bench_ticks_to_ns(); fork()ed children
 * inherit the calibration.
 */
void bench_clock_init(void);

/*
 * bench_ticks - a cheap timestamp: the TSC on x86 (ordered after earlier
 * loads by lfence), CLOCK_MONOTONIC ns elsewhere. Only differences taken in
 * one process are meaningful.
 */
static inline uint64_t bench_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	_mm_lfence();
	return __rdtsc();
#else
	return kvr_clock_now_ns();
#endif
}

/* bench_ticks_to_ns - convert a bench_ticks() difference to ns. */
double bench_ticks_to_ns(uint64_t ticks);

/* ---- processes and memory ---- */

/* bench_pin_cpu - pin the calling thread to @cpu (< 0: no-op). 0 or -errno. */
int bench_pin_cpu(int cpu);

/* Option values shared by every scenario's parser, in the one grammar of
 * lib/parse.c (docs/config.md). bench_parse_u64 takes a number (decimal,
 * K/M/G/T binary, optional B or iB) within [min, max]; bench_parse_cpu a
 * CPU number or -1 (no pinning). Both return false, leaving *out
 * untouched, on anything else. */
bool bench_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
bool bench_parse_cpu(const char *s, int *out);

/* bench_sleep_ns - sleep @ns on CLOCK_MONOTONIC, resumed after a signal. */
void bench_sleep_ns(uint64_t ns);

/* bench_nr_cpus - online CPUs (>= 1). */
int bench_nr_cpus(void);

/*
 * bench_shm_map - @bytes of zeroed MAP_SHARED|MAP_ANONYMOUS memory, every
 * page written once so that no page fault lands in a measurement; shared
 * with children forked afterwards. NULL on failure (errno set).
 */
void *bench_shm_map(size_t bytes);

/* bench_shm_unmap - unmap what bench_shm_map() returned; NULL is fine. */
void bench_shm_unmap(void *p, size_t bytes);

/*
 * bench_wait_child - wait for @pid; returns its exit code, or 128 + signal
 * if it was killed, or -errno if waiting failed.
 */
int bench_wait_child(pid_t pid);

/* ---- statistics ---- */

/*
 * bench_mixed_key - key @i of a bench's key space: distinct for every @i
 * and well mixed (a splitmix step), as XXH3 output would be; hi is @i.
 */
struct kvr_key bench_mixed_key(uint64_t i);

/* bench_sort_u64 - sort ascending in place. */
void bench_sort_u64(uint64_t *v, size_t n);

/*
 * bench_percentile - nearest-rank percentile @p (0..100) of @n sorted
 * values; 0 when @n is 0.
 */
uint64_t bench_percentile(const uint64_t *sorted, size_t n, double p);

/* bench_median_f64 - median of @n doubles (sorts @v in place); 0 if n == 0. */
double bench_median_f64(double *v, size_t n);

/* ---- JSON lines ---- */

/*
 * struct bench_json - one JSON object being built on the stack, through
 * the tools' emitter (tools/common/emit.h), which escapes every key and
 * string; printed as one line by bench_json_print(). A member that does
 * not fit the buffer is dropped whole and the object still closes; the
 * objects written here are far shorter.
 */
struct bench_json {
	char buf[2048];
	struct kvr_em em;
};

/* Starts {"schema":1,"scenario":@scenario,"subject":@subject. */
void bench_json_begin(struct bench_json *j, const char *scenario,
		      const char *subject);
void bench_json_str(struct bench_json *j, const char *key, const char *val);
void bench_json_u64(struct bench_json *j, const char *key, uint64_t val);
void bench_json_i64(struct bench_json *j, const char *key, int64_t val);
void bench_json_f64(struct bench_json *j, const char *key, double val);
void bench_json_bool(struct bench_json *j, const char *key, bool val);
/* Closes the object and prints it as one line on @f, then flushes. */
void bench_json_print(struct bench_json *j, FILE *f);

#endif /* KVR_BENCH_COMMON_H */
