/* SPDX-License-Identifier: MIT */
/*
 * bench_attach_report.c - what the attach scenario prints: one JSON line
 * per cell, or a table with its floors, and the plot. Reads the results
 * bench_attach.c filled; measures nothing.
 */
#include <stdio.h>

#include "bench_attach.h"
#include "bench_common.h"
#include "bench_plot.h"

/* ---- output ---- */

void bench_attach_print_json(const struct att *a)
{
	char sz[16];

	for (unsigned si = 0; si < a->nsizes; si++)
		for (int p = 0; p < NR_PAGES; p++) {
			const struct cell *r = &a->res[si][p];
			struct bench_json j;

			bench_json_begin(&j, "attach", page_name[p]);
			bench_json_str(
			    &j, "pool",
			    bench_fmt_bytes(a->sizes[si], sz, sizeof(sz)));
			bench_json_u64(&j, "pool_bytes", r->pool_bytes);
			bench_json_bool(&j, "done", r->done);
			if (r->done) {
				bench_json_f64(
				    &j, "server_start_ms_per_gib",
				    per_gib(r->start_ms, r->pool_bytes));
				bench_json_f64(&j, "server_prefault_ms",
					       r->srv_prefault_ms);
				bench_json_f64(
				    &j, "server_restart_ms_per_gib",
				    per_gib(r->restart_ms, r->pool_bytes));
				bench_json_f64(&j, "server_reprefault_ms",
					       r->srv_reprefault_ms);
				bench_json_f64(
				    &j, "attach_ms_per_gib",
				    per_gib(r->attach_ms, r->pool_bytes));
				bench_json_f64(&j, "first_store_gbps",
					       r->first_gbps);
				bench_json_f64(&j, "first_memcpy_gbps",
					       r->first_memcpy_gbps);
				bench_json_f64(&j, "store_gbps", r->store_gbps);
				bench_json_f64(&j, "retrieve_gbps",
					       r->retr_gbps);
				bench_json_f64(&j, "memcpy_gbps",
					       r->memcpy_gbps);
			}
			if (r->done && p == P_HUGE) {
				bench_json_f64(
				    &j, "server_zeroed_ms_per_gib",
				    per_gib(r->zeroed_ms, r->pool_bytes));
				bench_json_f64(
				    &j, "server_rezeroed_ms_per_gib",
				    per_gib(r->rezeroed_ms, r->pool_bytes));
			}
			if (r->dur_done) {
				bench_json_bool(&j, "during_pending",
						r->dur_pending);
				bench_json_bool(&j, "during_follow",
						r->dur_follow);
				bench_json_f64(&j, "during_follow_ms",
					       r->dur_follow_ms);
				bench_json_f64(
				    &j, "during_attach_ms_per_gib",
				    per_gib(r->dur_attach_ms, r->pool_bytes));
				bench_json_f64(&j, "during_first_store_gbps",
					       r->dur_first_gbps);
				bench_json_f64(&j, "during_memcpy_gbps",
					       r->dur_memcpy_gbps);
				bench_json_f64(&j, "during_first_request_gbps",
					       r->dur_req_gbps);
				bench_json_f64(&j, "during_first_zeroed_mib",
					       r->dur_line_mib);
				bench_json_f64(&j,
					       "during_first_above_line_mib",
					       r->dur_above_mib);
			}
			if (r->dur_room_done) {
				bench_json_bool(&j, "during_room_pending",
						r->dur_room_pending);
				bench_json_f64(&j, "during_room_zeroed_mib",
					       r->dur_room_line_mib);
				bench_json_f64(&j, "during_room_above_line_mib",
					       r->dur_room_above_mib);
				bench_json_f64(&j, "during_room_store_gbps",
					       r->dur_room_gbps);
				bench_json_f64(&j, "during_room_request_gbps",
					       r->dur_room_req_gbps);
				bench_json_f64(&j, "during_room_memcpy_gbps",
					       r->dur_room_memcpy_gbps);
			}
			if (r->bg_done) {
				bench_json_f64(&j, "bg_connect_ms",
					       r->bg_connect_ms);
				bench_json_bool(&j, "bg_pending",
						r->bg_pending);
				bench_json_f64(&j, "bg_first_store_gbps",
					       r->bg_first_gbps);
				bench_json_f64(&j, "bg_memcpy_gbps",
					       r->bg_memcpy_gbps);
				bench_json_f64(&j, "bg_first_request_gbps",
					       r->bg_req_gbps);
				bench_json_f64(&j, "bg_prefault_ms",
					       r->bg_prefault_ms);
			}
			bench_json_print(&j, stdout);
		}
}

/* The huge-page tables: the zeroing after ready and a worker connecting
 * at once, then the stores made while the zeroing ran. */
static void print_huge(const struct att *a)
{
	char sz[16];

	printf("\nhuge pages, zeroing after ready (ms per GiB; zeroed: fork "
	       "to the end of the server's pre-fault) and a worker "
	       "connecting at once:\n");
	printf("%-5s %9s %9s %9s %9s %12s %8s %7s %10s %18s\n", "pool", "start",
	       "zeroed", "restart", "zeroed", "attach ms/G", "pending",
	       "follow", "follow ms", "first GB/s (x mc)");
	for (unsigned si = 0; si < a->nsizes; si++) {
		const struct cell *r = &a->res[si][P_HUGE];

		if (!r->done)
			continue;
		printf("%-5s %9.1f %9.1f %9.1f %9.1f %12.2f %8s %7s %10.1f "
		       "%10.2f (%.2f)\n",
		       bench_fmt_bytes(r->pool_bytes, sz, sizeof(sz)),
		       per_gib(r->start_ms, r->pool_bytes),
		       per_gib(r->zeroed_ms, r->pool_bytes),
		       per_gib(r->restart_ms, r->pool_bytes),
		       per_gib(r->rezeroed_ms, r->pool_bytes),
		       per_gib(r->dur_attach_ms, r->pool_bytes),
		       r->dur_pending ? "yes" : "no",
		       r->dur_follow ? "yes" : "no", r->dur_follow_ms,
		       r->dur_first_gbps,
		       r->dur_memcpy_gbps > 0
			   ? r->dur_first_gbps / r->dur_memcpy_gbps
			   : 0.0);
	}
	printf("\nhuge pages, stores during the zeroing (line: MiB zeroed "
	       "just before the store; above: MiB of its slots above that "
	       "line; req: prepare + copy + commit):\n");
	printf("%-5s %-6s %8s %8s %8s %18s %18s\n", "pool", "store", "line",
	       "above", "zeroing", "copy GB/s (x mc)", "req GB/s (x mc)");
	for (unsigned si = 0; si < a->nsizes; si++) {
		const struct cell *r = &a->res[si][P_HUGE];

		if (!r->dur_done)
			continue;
		bench_fmt_bytes(r->pool_bytes, sz, sizeof(sz));
		printf("%-5s %-6s %8.0f %8.0f %8s %10.2f (%.2f) %10.2f "
		       "(%.2f)\n",
		       sz, "first", r->dur_line_mib, r->dur_above_mib,
		       r->dur_pending ? "yes" : "no", r->dur_first_gbps,
		       r->dur_first_gbps / r->dur_memcpy_gbps, r->dur_req_gbps,
		       r->dur_req_gbps / r->dur_memcpy_gbps);
		if (r->dur_room_done)
			printf("%-5s %-6s %8.0f %8.0f %8s %10.2f (%.2f) %10.2f "
			       "(%.2f)\n",
			       sz, "room", r->dur_room_line_mib,
			       r->dur_room_above_mib,
			       r->dur_room_pending ? "yes" : "no",
			       r->dur_room_gbps,
			       r->dur_room_gbps / r->dur_room_memcpy_gbps,
			       r->dur_room_req_gbps,
			       r->dur_room_req_gbps / r->dur_room_memcpy_gbps);
	}
}

void bench_attach_print_table(const struct att *a)
{
	char sz[16];

	printf("attach: %u fresh connections per cell (median), requests of "
	       "%u x 2 MiB\n\n",
	       a->rounds, NCHUNK);
	printf("%-5s %-5s %11s %11s %11s %18s %18s %18s\n", "pages", "pool",
	       "start ms/G", "restart", "attach ms/G", "first GB/s (x mc)",
	       "store GB/s (x mc)", "retr GB/s (x mc)");
	for (unsigned si = 0; si < a->nsizes; si++)
		for (int p = 0; p < NR_PAGES; p++) {
			const struct cell *r = &a->res[si][p];

			bench_fmt_bytes(r->pool_bytes, sz, sizeof(sz));
			if (!r->done) {
				printf("%-5s %-5s skipped: %s\n", page_name[p],
				       sz, r->skip[0] ? r->skip : "failed");
				continue;
			}
			printf("%-5s %-5s %11.1f %11.1f %11.2f %10.2f (%.2f) "
			       "%10.2f (%.2f) %10.2f (%.2f)\n",
			       page_name[p], sz,
			       per_gib(r->start_ms, r->pool_bytes),
			       per_gib(r->restart_ms, r->pool_bytes),
			       per_gib(r->attach_ms, r->pool_bytes),
			       r->first_gbps,
			       r->first_gbps / r->first_memcpy_gbps,
			       r->store_gbps, r->store_gbps / r->memcpy_gbps,
			       r->retr_gbps, r->retr_gbps / r->memcpy_gbps);
		}
	printf("\nserver pre-fault alone (ms, from its log): ");
	for (unsigned si = 0; si < a->nsizes; si++)
		for (int p = 0; p < NR_PAGES; p++) {
			const struct cell *r = &a->res[si][p];

			if (r->done)
				printf(
				    "%s %s %.1f / restart %.1f; ", page_name[p],
				    bench_fmt_bytes(r->pool_bytes, sz,
						    sizeof(sz)),
				    r->srv_prefault_ms, r->srv_reprefault_ms);
		}
	printf("\n");
	print_huge(a);
	printf("\nbackground pre-fault (4 KiB pages, "
	       "prefault_background=true):\n");
	printf("%-5s %14s %20s %18s %9s %16s\n", "pool", "connect ms",
	       "first GB/s (x mc)", "req GB/s (x mc)", "pending",
	       "pre-fault ms");
	for (unsigned si = 0; si < a->nsizes; si++) {
		const struct cell *r = &a->res[si][P_4K];

		if (!r->bg_done)
			continue;
		printf("%-5s %14.2f %12.2f (%.2f) %10.2f (%.2f) %9s %16.1f\n",
		       bench_fmt_bytes(r->pool_bytes, sz, sizeof(sz)),
		       r->bg_connect_ms, r->bg_first_gbps,
		       r->bg_first_gbps / r->bg_memcpy_gbps, r->bg_req_gbps,
		       r->bg_req_gbps / r->bg_memcpy_gbps,
		       r->bg_pending ? "yes" : "no", r->bg_prefault_ms);
	}
	printf("\nfloor: memset of memory already mapped, %.1f ms per GiB "
	       "(a fresh huge page must be zeroed by the kernel at least this "
	       "fast; it dominates a huge-page server start)\n",
	       a->memset_ms_per_gib);
	printf("\nx mc: GB/s over memcpy of the same bytes into the same slots "
	       "in the same cell.\n");
}

void bench_attach_plot(const struct att *a)
{
	double x[NR_PAGES][MAX_SIZES], ya[NR_PAGES][MAX_SIZES],
	    ys[NR_PAGES][MAX_SIZES], yr[NR_PAGES][MAX_SIZES];
	double xd[MAX_SIZES], yd[MAX_SIZES];
	struct bench_plot_line l[3 * NR_PAGES + 1];
	static const char *const t_att[NR_PAGES] = {"worker attach, 4 KiB",
						    "worker attach, huge"};
	static const char *const t_srv[NR_PAGES] = {"server start, 4 KiB",
						    "server start, huge"};
	static const char *const t_rst[NR_PAGES] = {"server restart, 4 KiB",
						    "server restart, huge"};
	size_t n[NR_PAGES] = {0}, nd = 0;

	for (int p = 0; p < NR_PAGES; p++)
		for (unsigned si = 0; si < a->nsizes; si++) {
			const struct cell *r = &a->res[si][p];

			if (!r->done)
				continue;
			x[p][n[p]] = (double)r->pool_bytes;
			ya[p][n[p]] = per_gib(r->attach_ms, r->pool_bytes);
			ys[p][n[p]] = per_gib(r->start_ms, r->pool_bytes);
			yr[p][n[p]] = per_gib(r->restart_ms, r->pool_bytes);
			n[p]++;
			if (r->dur_done) {
				xd[nd] = (double)r->pool_bytes;
				yd[nd++] =
				    per_gib(r->dur_attach_ms, r->pool_bytes);
			}
		}
	for (int p = 0; p < NR_PAGES; p++) {
		l[p] = (struct bench_plot_line){t_att[p], x[p], ya[p], n[p],
						false};
		l[NR_PAGES + p] =
		    (struct bench_plot_line){t_srv[p], x[p], ys[p], n[p], true};
		l[2 * NR_PAGES + p] =
		    (struct bench_plot_line){t_rst[p], x[p], yr[p], n[p], true};
	}
	l[3 * NR_PAGES] = (struct bench_plot_line){
	    "worker attach, huge, during the zeroing", xd, yd, nd, false};
	bench_plot_lines_xtics(a->o.plot_dir, "attach",
			       "Pool attach and server start per GiB",
			       "pool size", "ms per GiB (log)",
			       "('512M' 536870912, '1G' 1073741824, '2G' "
			       "2147483648, '4G' 4294967296, '8G' 8589934592, "
			       "'16G' 17179869184, '32G' 34359738368)",
			       true, l, 3 * NR_PAGES + 1);
}
