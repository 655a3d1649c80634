/* SPDX-License-Identifier: MIT */
/*
 * bench_capacity.h - what kvring-bench capacity (bench_capacity.c) hands
 * its served half (bench_capacity_served.c, --served) and its idle steps
 * (bench_capacity_idle.c, --sized).
 */
#ifndef KVR_BENCH_CAPACITY_H
#define KVR_BENCH_CAPACITY_H

#include <stdbool.h>
#include <stdint.h>

#define CAP_SERVED_MAX_SIZES 8u

/* The options of the served table, filled by bench_capacity.c. */
struct cap_served_opts {
	uint64_t sizes[CAP_SERVED_MAX_SIZES];
	unsigned nsizes;
	uint64_t samples;    /* timed requests per figure and size */
	bool json;	     /* JSON lines instead of a table */
	const char *kvringd; /* --kvringd PATH (NULL: the default) */
	int cpu_client;	     /* --cpu-client N (-1: no pinning) */
	int cpu_server;	     /* --cpu-server N (-1: no pinning) */
};

/*
 * bench_capacity_served - for each size, a private kvringd holding that
 * many objects, measured through one worker's rings, and the inspector's
 * snapshot of it; printed as a table or JSON lines.
 * Return: 0, or -1 when a step failed or an answer was wrong (said).
 */
int bench_capacity_served(const struct cap_served_opts *o);

struct kvr_store;

/* What the idle steps that ended a key index's migration took. */
struct cap_idle {
	uint64_t steps;
	double step_p50_ns, step_p99_ns, step_max_ns;
	double total_ms; /* the whole run of steps, clock reads included */
};

/*
 * bench_cap_idle - run kvr_store_idle_step() on @s until it says nothing
 * is left (at least once), each call timed, into *out.
 * Return: 0, or -1 (said).
 */
int bench_cap_idle(struct kvr_store *s, struct cap_idle *out);

#endif /* KVR_BENCH_CAPACITY_H */
