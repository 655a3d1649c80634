/* SPDX-License-Identifier: MIT */
/*
 * bench_capacity_idle.c - the idle half of kvring-bench capacity --sized:
 * an engine sized for fewer objects than a fill stores grows on the way,
 * and the last growth leaves its key index migrating; this runs the steps
 * kvringd's loop runs when idle (kvr_store_idle_step) until the migration
 * is over, each one timed. Owns nothing past the call.
 */
#include <stdio.h>
#include <stdlib.h>

#include <kvring/store.h>

#include "bench_capacity.h"
#include "bench_common.h"

/* Steps timed one by one; a longer migration is timed in total only. */
#define IDLE_TIMED_MAX 8000000u

int bench_cap_idle(struct kvr_store *s, struct cap_idle *out)
{
	uint64_t *lat = malloc(IDLE_TIMED_MAX * sizeof(*lat));
	uint64_t t0, t1, begin, n = 0;
	bool more = true;

	*out = (struct cap_idle){0};
	if (!lat) {
		fprintf(stderr, "kvring-bench capacity: idle steps: out of "
				"memory for their timings\n");
		return -1;
	}
	begin = bench_ticks();
	while (more) {
		t0 = bench_ticks();
		more = kvr_store_idle_step(s);
		t1 = bench_ticks();
		if (n < IDLE_TIMED_MAX)
			lat[n] = t1 - t0;
		n++;
	}
	out->total_ms = bench_ticks_to_ns(bench_ticks() - begin) / 1e6;
	out->steps = n;
	if (n > IDLE_TIMED_MAX)
		n = IDLE_TIMED_MAX;
	bench_sort_u64(lat, n);
	out->step_p50_ns = bench_ticks_to_ns(bench_percentile(lat, n, 50));
	out->step_p99_ns = bench_ticks_to_ns(bench_percentile(lat, n, 99));
	out->step_max_ns = bench_ticks_to_ns(lat[n - 1]);
	free(lat);
	return 0;
}
