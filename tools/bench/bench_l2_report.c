/* SPDX-License-Identifier: MIT */
/*
 * bench_l2_report.c - the l2 scenario's figures: the clocks of one timed
 * step (wall time, and the CPU of each side from /proc), and one size's
 * throughput cells (medians of the rounds, the plain client's figures
 * beside kvringd's, CPU per GB of each side) as a table or JSON lines.
 */
#include <dirent.h>
#include <stdio.h>
#include <time.h>

#include "bench_common.h"
#include "bench_l2.h"

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n ? v[n / 2] : 0;
}

/* @ns of CPU per GB moved, in ms. */
static double ms_gb(uint64_t ns, double gb)
{
	return (double)ns / 1e6 / gb;
}

/*
 * CPU time (ns) every thread of process @pid has run, from the first
 * field of /proc/PID/task/TID/schedstat (nanoseconds on a CPU, exact, not
 * ticks); 0 if unreadable. The throughput cells add it up per side
 * (kvringd, redis-server, the plain client's thread), so where the time
 * goes shows even when the shared machine's load moves the GB/s.
 */
static uint64_t proc_cpu_ns(pid_t pid)
{
	char dir[64], path[384];
	struct dirent *d;
	uint64_t sum = 0;
	DIR *dp;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	dp = opendir(dir);
	if (!dp)
		return 0;
	while ((d = readdir(dp))) {
		unsigned long long run = 0;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/schedstat", dir, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &run) == 1)
			sum += run;
		fclose(f);
	}
	closedir(dp);
	return sum;
}

/* CPU time of the calling thread (the plain client). */
static uint64_t self_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU of every redis-server of the run (one, or the cluster's masters). */
static uint64_t redis_cpu_ns(const struct env *e)
{
	uint64_t sum = 0;

	for (int i = 0; i < CLUSTER_N; i++)
		if (e->rd[i].pid > 0)
			sum += proc_cpu_ns(e->rd[i].pid);
	return sum;
}

static uint64_t meter_own(const struct meter *m)
{
	return m->pid > 0 ? proc_cpu_ns(m->pid) : self_cpu_ns();
}

void bench_l2_meter_start(const struct env *e, struct meter *m, pid_t pid)
{
	m->pid = pid;
	m->t0 = now_s();
	m->own0 = meter_own(m);
	m->redis0 = redis_cpu_ns(e);
}

/* The step moved @bytes: its CPU added to @acc, its GB/s returned. */
double bench_l2_meter_stop(const struct env *e, const struct meter *m,
			   struct cpu_acc *acc, double bytes)
{
	double dt = now_s() - m->t0;

	acc->own += meter_own(m) - m->own0;
	acc->redis += redis_cpu_ns(e) - m->redis0;
	return bytes / dt / 1e9;
}

/*
 * One chunk size's figures, the medians of @rounds: upload (rate @up,
 * with the worker's sums @ups), read-through @rt, each beside the plain
 * client's (@upp, @rtp), and the CPU each side spent (@cpu, in the order
 * run_size() fills it).
 */
void bench_l2_print_size(const struct env *e, uint64_t bytes, uint32_t n,
			 int rounds, double *up, double *upp, double *rt,
			 double *rtp, double *ups, const struct cpu_acc *cpu)
{
	double u = median(up, rounds), pu = median(upp, rounds);
	double t = median(rt, rounds), pt = median(rtp, rounds);
	double us = median(ups, rounds);
	char sz[16];

	bench_fmt_bytes(bytes, sz, sizeof(sz));
	if (e->o.json) {
		bench_l2_json_cell(e, "upload", "server", bytes, n, rounds, u,
				   pu, &cpu[0], &cpu[1]);
		bench_l2_json_cell(e, "upload", "worker", bytes, n, rounds, us,
				   pu, &cpu[4], &cpu[1]);
		bench_l2_json_cell(e, "read_through", "server", bytes, n,
				   rounds, t, pt, &cpu[2], &cpu[3]);
	} else {
		printf("%-6s x%-4u upload %6.2f GB/s  plain %6.2f GB/s  "
		       "ratio %.2f | read-through %6.2f GB/s  plain "
		       "%6.2f GB/s  ratio %.2f\n",
		       sz, n, u, pu, pu > 0 ? u / pu : 0, t, pt,
		       pt > 0 ? t / pt : 0);
		double gb = (double)rounds * n * (double)bytes / 1e9;

		printf("%-6s x%-4u upload with the worker's sums %6.2f "
		       "GB/s  ratio %.2f\n",
		       sz, n, us, pu > 0 ? us / pu : 0);
		printf("%-6s CPU ms/GB kvringd+redis vs plain+redis: "
		       "upload %.0f+%.0f vs %.0f+%.0f, with sums "
		       "%.0f+%.0f, read-through %.0f+%.0f vs %.0f+%.0f\n",
		       sz, ms_gb(cpu[0].own, gb), ms_gb(cpu[0].redis, gb),
		       ms_gb(cpu[1].own, gb), ms_gb(cpu[1].redis, gb),
		       ms_gb(cpu[4].own, gb), ms_gb(cpu[4].redis, gb),
		       ms_gb(cpu[2].own, gb), ms_gb(cpu[2].redis, gb),
		       ms_gb(cpu[3].own, gb), ms_gb(cpu[3].redis, gb));
	}
}
