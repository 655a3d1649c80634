/* SPDX-License-Identifier: MIT */
/*
 * bench_plot.h - `--plot DIR` of kvring-bench: write gnuplot data files
 * and a script into DIR, then run gnuplot (pngcairo, else png) to make
 * DIR/<name>.png. Without gnuplot the data and script stay and a note
 * says so; a plot never fails a benchmark.
 */
#ifndef KVR_BENCH_PLOT_H
#define KVR_BENCH_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One latency distribution: @n samples in ns, sorted ascending. */
struct bench_plot_cdf {
	const char *title;
	const uint64_t *sorted_ns;
	size_t n;
};

/*
 * bench_plot_cdfs - DIR/<name>.png: the CDFs of @nr distributions
 * (log x axis in ns). Return 0, or -errno if a file could not be written
 * (reported on stderr); a missing gnuplot is only a note.
 */
int bench_plot_cdfs(const char *dir, const char *name, const char *title,
		    const struct bench_plot_cdf *c, size_t nr);

/* One line of a y-versus-x plot; points with y <= 0 are skipped. */
struct bench_plot_line {
	const char *title;
	const double *x, *y;
	size_t n;
	bool dashed;
};

/*
 * bench_plot_lines - DIR/<name>.png: @nr lines, x (bytes) on a log2 axis
 * labelled 256K..64M, y linear from 0. Return as bench_plot_cdfs().
 */
int bench_plot_lines(const char *dir, const char *name, const char *title,
		     const char *xlabel, const char *ylabel,
		     const struct bench_plot_line *l, size_t nr);

/*
 * bench_plot_lines_xtics - bench_plot_lines() with the x tics given as a
 * gnuplot list ("('1G' 1073741824, ...)") and, with @logy, a log y axis.
 */
int bench_plot_lines_xtics(const char *dir, const char *name, const char *title,
			   const char *xlabel, const char *ylabel,
			   const char *xtics, bool logy,
			   const struct bench_plot_line *l, size_t nr);

#endif /* KVR_BENCH_PLOT_H */
