/* SPDX-License-Identifier: MIT */
/*
 * bench_l2_report.c - the l2 scenario's report: one size's throughput
 * cells (medians of the rounds, the plain client's figures beside
 * kvringd's, CPU per GB of each side) as a table or as JSON lines.
 */
#include <stdio.h>

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

/* One throughput cell as a JSON line: @subject ("upload" or
 * "read_through") beside the plain client of the same rounds; @sums says
 * who computed the payload sums ("server": the lane hashes; "worker": a
 * worker with checksums sent them with its commit). */
static void json_cell(const struct env *e, const char *subject,
		      const char *sums, uint64_t bytes, uint32_t n, int rounds,
		      double gb_s, double plain_gb_s, const struct cpu_acc *k,
		      const struct cpu_acc *p)
{
	/* CPU ms per GB moved, over all rounds. */
	double gb = (double)rounds * n * (double)bytes / 1e9;
	struct bench_json j;

	bench_json_begin(&j, "l2", subject);
	bench_json_str(&j, "target", e->target);
	bench_json_str(&j, "sums", sums);
	bench_json_u64(&j, "chunk_bytes", bytes);
	bench_json_u64(&j, "chunks", n);
	bench_json_i64(&j, "rounds", rounds);
	bench_json_f64(&j, "gb_s", gb_s);
	bench_json_f64(&j, "plain_client_gb_s", plain_gb_s);
	bench_json_f64(&j, "ratio_to_plain_client",
		       plain_gb_s > 0 ? gb_s / plain_gb_s : 0);
	bench_json_f64(&j, "kvringd_cpu_ms_per_gb", (double)k->own / 1e6 / gb);
	bench_json_f64(&j, "redis_cpu_ms_per_gb", (double)k->redis / 1e6 / gb);
	bench_json_f64(&j, "plain_client_cpu_ms_per_gb",
		       (double)p->own / 1e6 / gb);
	bench_json_f64(&j, "plain_redis_cpu_ms_per_gb",
		       (double)p->redis / 1e6 / gb);
	bench_json_print(&j, stdout);
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
		json_cell(e, "upload", "server", bytes, n, rounds, u, pu,
			  &cpu[0], &cpu[1]);
		json_cell(e, "upload", "worker", bytes, n, rounds, us, pu,
			  &cpu[4], &cpu[1]);
		json_cell(e, "read_through", "server", bytes, n, rounds, t, pt,
			  &cpu[2], &cpu[3]);
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
