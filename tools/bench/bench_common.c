/* SPDX-License-Identifier: MIT */
/*
 * bench_common.c - shared helpers of kvring-bench (see bench_common.h):
 * clock calibration, pinning, shared memory, child reaping, percentiles and
 * JSON lines. No scenario logic lives here.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kvring/parse.h>

#include "bench_common.h"

/* ns per tick; 1.0 until calibrated (and when ticks are ns already). */
static double ns_per_tick = 1.0;

void bench_clock_init(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint64_t t0 = kvr_clock_now_ns(), c0 = bench_ticks(), t1, c1;

	/* 20 ms is enough for a few ppm; the VM's TSC is invariant. */
	do {
		t1 = kvr_clock_now_ns();
	} while (t1 - t0 < 20000000ull);
	c1 = bench_ticks();
	if (c1 > c0)
		ns_per_tick = (double)(t1 - t0) / (double)(c1 - c0);
#endif
}

double bench_ticks_to_ns(uint64_t ticks)
{
	return (double)ticks * ns_per_tick;
}

int bench_pin_cpu(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		return -errno;
	return 0;
}

int bench_nr_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (int)n;
}

void *bench_shm_map(size_t bytes)
{
	unsigned char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	long page = sysconf(_SC_PAGESIZE);

	if (p == MAP_FAILED)
		return NULL;
	/* Touch every page now: first touches cost microseconds on VMs. */
	for (size_t off = 0; off < bytes; off += (size_t)page)
		p[off] = 0;
	return p;
}

void bench_shm_unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

int bench_wait_child(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

struct kvr_key bench_mixed_key(uint64_t i)
{
	uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
	struct kvr_key k;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	k.lo = z ^ (z >> 27);
	k.hi = i;
	return k;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_f64(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void bench_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

uint64_t bench_percentile(const uint64_t *sorted, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	/* Nearest rank: the smallest value with at least p% at or below. */
	rank = (size_t)ceil(p / 100.0 * (double)n);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

double bench_median_f64(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_f64);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The bench's JSON lines are the shared emitter's (tools/common/emit.c)
 * into the object's own buffer, so a line is printed whole or not at
 * all. */
void bench_json_begin(struct bench_json *j, const char *scenario,
		      const char *subject)
{
	kvr_em_init_buf(&j->em, j->buf, sizeof(j->buf), true);
	kvr_em_i64(&j->em, "schema", 1);
	kvr_em_str(&j->em, "scenario", scenario);
	kvr_em_str(&j->em, "subject", subject);
}

void bench_json_str(struct bench_json *j, const char *key, const char *val)
{
	kvr_em_str(&j->em, key, val);
}

void bench_json_u64(struct bench_json *j, const char *key, uint64_t val)
{
	kvr_em_u64(&j->em, key, val);
}

void bench_json_i64(struct bench_json *j, const char *key, int64_t val)
{
	kvr_em_i64(&j->em, key, val);
}

void bench_json_f64(struct bench_json *j, const char *key, double val)
{
	/* Six significant digits; null when not finite (JSON has no NaN). */
	kvr_em_g(&j->em, key, val);
}

void bench_json_bool(struct bench_json *j, const char *key, bool val)
{
	kvr_em_bool(&j->em, key, val);
}

void bench_json_print(struct bench_json *j, FILE *f)
{
	kvr_em_finish(&j->em); /* "}\n" into the buffer */
	fputs(j->buf, f);
	fflush(f);
}

bool bench_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;

	/* The shared grammar (lib/parse.c): decimal, K/M/G/T binary, an
	 * optional B or iB, so "010M" is 10 MiB here too and "1GiB" works. */
	if (kvr_parse_u64(s, min, max, &v) < 0)
		return false;
	*out = v;
	return true;
}

bool bench_parse_cpu(const char *s, int *out)
{
	/* -1 (do not pin) or a decimal CPU number, as every tool reads it;
	 * the bench once took base 0, where "010" was CPU 8. */
	return kvr_parse_cpu(s, out) == 0;
}

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull),
			      (long)(ns % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}
