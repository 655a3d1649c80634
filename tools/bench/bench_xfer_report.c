/* SPDX-License-Identifier: MIT */
/*
 * bench_xfer_report.c - what the store and retrieve scenarios print: a
 * table per cell with its phases, or JSON lines, and the plots. Reads the
 * results bench_xfer.c filled; measures nothing.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench_common.h"
#include "bench_plot.h"
#include "bench_xfer.h"

/* ---- output -------------------------------------------------------------- */

void bench_xfer_print_header(const struct xfer_ctx *x)
{
	char pb[32];

	if (x->o.json)
		return;
	printf("# kvring-bench %s: cpu_client=%d cpu_server=%d pool=%s "
	       "server_spin_us=%u subjects: memcpy kvring kvring_sum%s "
	       "kvring_copy%s\n",
	       x->scenario, x->o.cpu_client, x->o.cpu_server,
	       bench_fmt_bytes(x->pool_bytes, pb, sizeof(pb)), XFER_SPIN_US,
	       x->retrieve ? " kvring_sum_copy"
			   : " kvring_sum_fill kvring_ahead",
	       x->zmq ? " zeromq" : " (zeromq skipped: built without libzmq)");
	printf("%-6s %6s %-12s %5s %10s %10s %8s %9s %9s %9s\n", "bytes",
	       "chunks", "subject", "reps", "p50_us", "p99_us", "GB/s",
	       "x_memcpy", "x_mc_cold", "x_zeromq");
}

/* The phases and the back-to-back run of subject @s (kvring_phases and
 * kvring_stream for kvring, kvring_ahead_phases and _stream for
 * kvring_ahead). */
static void print_phased(const struct xfer_ctx *x, unsigned si, unsigned ci,
			 int s)
{
	const struct cell *res = x->res[si][ci];
	const struct cell *mc = &res[S_MEMCPY], *mcc = &res[S_MCOLD];
	uint64_t b = x->sizes[si];
	uint32_t n = x->chunks[ci];
	char bs[32], sname[32], pname[32];

	snprintf(sname, sizeof(sname), "%s_stream", subj_name[s]);
	snprintf(pname, sizeof(pname), "%s_phases", subj_name[s]);
	if (res[s].stream && x->o.json) {
		const struct cell *c = &res[s];
		struct bench_json j;

		bench_json_begin(&j, x->scenario, sname);
		bench_json_u64(&j, "bytes", b);
		bench_json_u64(&j, "chunks", n);
		bench_json_u64(&j, "request_bytes", b * n);
		bench_json_u64(&j, "reps", c->stream_reps);
		bench_json_f64(&j, "p50_ns", c->stream_p50);
		bench_json_f64(&j, "memcpy_cold_p50_ns", c->stream_mc_p50);
		bench_json_f64(&j, "ratio_to_memcpy_cold_median",
			       c->stream_ratio_med);
		bench_json_f64(&j, "prepare_p50_ns", c->stream_ph[0]);
		bench_json_f64(&j, "copy_p50_ns", c->stream_ph[1]);
		bench_json_f64(&j, "commit_p50_ns", c->stream_ph[2]);
		bench_json_print(&j, stdout);
	}
	if (res[s].stream && !x->o.json) {
		const struct cell *c = &res[s];

		printf(
		    "%-6s %6u %-12s  p50 us: %s %.1f, memcpy_cold %.1f "
		    "(x memcpy_cold %.3f, median of pairs %.3f); prepare %.2f "
		    "+ copy %.1f + commit %.2f\n",
		    bench_fmt_bytes(b, bs, sizeof(bs)), n, sname, subj_name[s],
		    c->stream_p50 / 1e3, c->stream_mc_p50 / 1e3,
		    c->stream_p50 > 0 ? c->stream_mc_p50 / c->stream_p50 : 0.0,
		    c->stream_ratio_med, c->stream_ph[0] / 1e3,
		    c->stream_ph[1] / 1e3, c->stream_ph[2] / 1e3);
	}
	if (res[s].phases && !x->o.json) {
		const struct cell *c = &res[s];

		printf("%-6s %6u %-12s  p50 us: prepare %.2f + copy %.1f + "
		       "commit %.2f (memcpy %.1f, memcpy_cold %.1f)\n",
		       bench_fmt_bytes(b, bs, sizeof(bs)), n, pname,
		       c->phase_p50[0] / 1e3, c->phase_p50[1] / 1e3,
		       c->phase_p50[2] / 1e3, mc->p50 / 1e3,
		       mcc->done ? mcc->p50 / 1e3 : 0.0);
	}
}

void bench_xfer_print_cell(const struct xfer_ctx *x, unsigned si, unsigned ci)
{
	const struct cell *res = x->res[si][ci];
	const struct cell *mc = &res[S_MEMCPY], *zq = &res[S_ZMQ];
	const struct cell *mcc = &res[S_MCOLD];
	uint64_t b = x->sizes[si];
	uint32_t n = x->chunks[ci];
	char bs[32];

	for (int s = 0; s < NR_SUBJ; s++) {
		const struct cell *c = &res[s];

		if (!c->done)
			continue;
		if (x->o.json) {
			struct bench_json j;

			bench_json_begin(&j, x->scenario, subj_name[s]);
			bench_json_u64(&j, "bytes", b);
			bench_json_u64(&j, "chunks", n);
			bench_json_u64(&j, "workers", 1);
			bench_json_u64(&j, "request_bytes", b * n);
			bench_json_u64(&j, "reps", c->reps);
			bench_json_bool(&j, "first_touch", false);
			bench_json_f64(&j, "p50_ns", c->p50);
			bench_json_f64(&j, "p99_ns", c->p99);
			bench_json_f64(&j, "p999_ns", c->p999);
			bench_json_f64(&j, "gbps", c->gbps);
			bench_json_f64(&j, "ops_per_s", c->ops);
			if (s != S_MEMCPY) {
				bench_json_f64(&j, "ratio_to_memcpy",
					       c->gbps / mc->gbps);
				bench_json_f64(&j, "ratio_to_memcpy_median",
					       c->ratio_med);
			}
			if (s != S_MEMCPY && s != S_MCOLD && mcc->done)
				bench_json_f64(&j, "ratio_to_memcpy_cold",
					       c->gbps / mcc->gbps);
			if (s != S_ZMQ && zq->done)
				bench_json_f64(&j, "ratio_to_zeromq",
					       c->gbps / zq->gbps);
			if (c->phases && subj_phased(s)) {
				bench_json_f64(&j, "prepare_p50_ns",
					       c->phase_p50[0]);
				bench_json_f64(&j, "copy_p50_ns",
					       c->phase_p50[1]);
				bench_json_f64(&j, "commit_p50_ns",
					       c->phase_p50[2]);
			}
			/* The cost of checksums: same run, interleaved. */
			if ((s == S_SUM || s == S_SUMF || s == S_SUMC ||
			     s == S_AHEAD) &&
			    res[S_KVRING].done)
				bench_json_f64(&j, "ratio_to_kvring",
					       c->gbps / res[S_KVRING].gbps);
			bench_json_print(&j, stdout);
		} else {
			char rm[16] = "-", rz[16] = "-", rc[16] = "-";

			if (s != S_MEMCPY)
				snprintf(rm, sizeof(rm), "%.3f",
					 c->gbps / mc->gbps);
			if (s != S_MEMCPY && s != S_MCOLD && mcc->done)
				snprintf(rc, sizeof(rc), "%.3f",
					 c->gbps / mcc->gbps);
			if (s != S_ZMQ && zq->done)
				snprintf(rz, sizeof(rz), "%.2f",
					 c->gbps / zq->gbps);
			printf("%-6s %6u %-12s %5" PRIu64
			       " %10.1f %10.1f %8.2f %9s %9s %9s\n",
			       bench_fmt_bytes(b, bs, sizeof(bs)), n,
			       subj_name[s], c->reps, c->p50 / 1e3,
			       c->p99 / 1e3, c->gbps, rm, rc, rz);
		}
	}
	for (int s = S_KVRING; s < NR_SUBJ; s++)
		if (subj_phased(s))
			print_phased(x, si, ci, s);
	if (res[S_KVRING].first) {
		const struct cell *c = &res[S_KVRING];

		if (x->o.json) {
			struct bench_json j;

			bench_json_begin(&j, x->scenario, "kvring");
			bench_json_u64(&j, "bytes", b);
			bench_json_u64(&j, "chunks", n);
			bench_json_u64(&j, "workers", 1);
			bench_json_u64(&j, "request_bytes", b * n);
			bench_json_u64(&j, "reps", 1);
			bench_json_bool(&j, "first_touch", true);
			bench_json_f64(&j, "gbps", c->first_gbps);
			bench_json_f64(&j, "gbps_second_store",
				       c->first_warm_gbps);
			bench_json_f64(&j, "ratio_to_memcpy",
				       c->first_gbps / mc->gbps);
			if (zq->done)
				bench_json_f64(&j, "ratio_to_zeromq",
					       c->first_gbps / zq->gbps);
			bench_json_f64(&j, "attach_ms", c->attach_ms);
			bench_json_f64(&j, "prefault_ms", c->prefault_ms);
			bench_json_print(&j, stdout);
		} else {
			printf(
			    "%-6s %6u %-12s %5s %10s %10s %8.2f %9.3f %9.3f %9s"
			    "  (first store of a fresh connection; "
			    "second %.2f GB/s; attach %.0f ms of which "
			    "pre-fault %.0f ms)\n",
			    bench_fmt_bytes(b, bs, sizeof(bs)), n,
			    "kvring_first", "1", "-", "-", c->first_gbps,
			    c->first_gbps / mc->gbps,
			    mcc->done ? c->first_gbps / mcc->gbps : 0.0, "-",
			    c->first_warm_gbps, c->attach_ms, c->prefault_ms);
		}
	}
}

void bench_xfer_plot(const struct xfer_ctx *x)
{
	struct bench_plot_line l[NR_SUBJ + 3];
	double xs[NR_SUBJ + 3][MAX_SIZES], ys[NR_SUBJ + 3][MAX_SIZES];
	char titles[NR_SUBJ + 3][64], name[64], title[128];
	unsigned mid = x->nchunks / 2, nl = 0;

	/* Every subject at the middle chunk count... */
	for (int s = 0; s < NR_SUBJ; s++) {
		if ((s == S_ZMQ && !x->zmq) || !subj_in(x->retrieve, s))
			continue;
		for (unsigned i = 0; i < x->nsizes; i++) {
			xs[nl][i] = (double)x->sizes[i];
			ys[nl][i] = x->res[i][mid][s].gbps;
		}
		snprintf(titles[nl], sizeof(titles[nl]), "%s, %u chunks",
			 subj_name[s], x->chunks[mid]);
		l[nl] = (struct bench_plot_line){titles[nl], xs[nl], ys[nl],
						 x->nsizes, false};
		nl++;
	}
	/* ...kvring at the smallest and largest chunk counts... */
	for (unsigned k = 0; k < x->nchunks; k += x->nchunks - 1) {
		if (k == mid)
			goto next;
		for (unsigned i = 0; i < x->nsizes; i++) {
			xs[nl][i] = (double)x->sizes[i];
			ys[nl][i] = x->res[i][k][S_KVRING].gbps;
		}
		snprintf(titles[nl], sizeof(titles[nl]), "kvring, %u chunks",
			 x->chunks[k]);
		l[nl] = (struct bench_plot_line){titles[nl], xs[nl], ys[nl],
						 x->nsizes, true};
		nl++;
	next:
		if (x->nchunks == 1)
			break;
	}
	/* ...and the first store of a fresh connection. */
	if (!x->retrieve) {
		for (unsigned i = 0; i < x->nsizes; i++) {
			xs[nl][i] = (double)x->sizes[i];
			ys[nl][i] = x->res[i][mid][S_KVRING].first_gbps;
		}
		snprintf(titles[nl], sizeof(titles[nl]),
			 "kvring first store, %u chunks", x->chunks[mid]);
		l[nl] = (struct bench_plot_line){titles[nl], xs[nl], ys[nl],
						 x->nsizes, true};
		nl++;
	}
	snprintf(name, sizeof(name), "%s_gbps", x->scenario);
	snprintf(title, sizeof(title),
		 "%s throughput per request (prepare, copy, commit) vs chunk "
		 "size",
		 x->scenario);
	bench_plot_lines(x->o.plot_dir, name, title, "chunk size (bytes)",
			 "GB/s", l, nl);
}
