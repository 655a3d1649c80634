/* SPDX-License-Identifier: MIT */
/*
 * bench_place.h - the placement probe of kvring-bench. The machine's two
 * vCPUs move between a "near" and a "far" placement on the host every few
 * seconds, and every figure where both sides busy-poll (ring, rtt_hot,
 * scale's one_active and pipelined cells, hist) follows it. So each such figure
 * is taken right after a short cache-line ping-pong (the probe: one line
 * each way, a value stored into one and echoed into the other, so every
 * scenario's probe moves the same lines; its p50 names the placement),
 * printed with it (JSON keys placement_floor_ns and
 * placement), and recorded here; at the end of a run bench_place_summary()
 * prints the median of each recorded figure per placement, and says so
 * plainly when the run saw only one placement.
 *
 * The threshold sits between the two modes this machine shows: a cache
 * line bounced between the two vCPUs costs about 80-170 ns at p50 near
 * and 300-570 ns far, so a p50 below BENCH_PLACE_NEAR_MAX_NS is "near".
 * The recorder is a process-wide table owned by the main process (forked
 * children never record); nothing here prints except the summary.
 */
#ifndef KVR_BENCH_PLACE_H
#define KVR_BENCH_PLACE_H

#include <stdbool.h>

#include "bench_common.h"
#include "bench_peers.h"

/* Probe p50 below this (ns) is "near", at or above it "far". */
#define BENCH_PLACE_NEAR_MAX_NS 230.0

/* Round trips of one probe (after as many again / 4 warm-up ones):
 * about 0.3 ms near, 1 ms far. */
#define BENCH_PLACE_PROBE_N 2000u

enum bench_placement {
	BENCH_PLACE_NEAR,
	BENCH_PLACE_FAR,
	BENCH_PLACE_MIXED,   /* a figure pooled over probes of both */
	BENCH_PLACE_UNKNOWN, /* the probe failed */
};

/* What one probe saw (or the pooled view of several). */
struct bench_place {
	double floor_ns; /* cache-line round trip p50, ns (0: unknown) */
	enum bench_placement where;
};

/* bench_place_of - the placement a probe p50 of @floor_ns names; counts
 * the probe for the summary (call it once per probe). */
struct bench_place bench_place_of(double floor_ns);

/* bench_place_name - "near", "far", "mixed" or "unknown". */
const char *bench_place_name(enum bench_placement w);

/*
 * bench_place_probe - BENCH_PLACE_PROBE_N cache-line round trips against
 * @peer (a running BENCH_PEER_CACHELINE peer), or, with @peer NULL, against
 * a cache-line peer forked for the probe on @cpu_server and stopped after
 * it. The caller runs on its client CPU and has nothing else spinning on
 * @cpu_server. Returns the placement; BENCH_PLACE_UNKNOWN if it failed.
 */
struct bench_place bench_place_probe(struct bench_peer *peer, int cpu_server);

/*
 * bench_place_pool - the view of @n probes together: the median floor,
 * and their placement if all agree, else BENCH_PLACE_MIXED.
 */
struct bench_place bench_place_pool(const struct bench_place *p, unsigned n);

/* bench_place_json - adds placement_floor_ns and placement to @j. */
void bench_place_json(struct bench_json *j, const struct bench_place *p);

/*
 * bench_place_record - remember that figure @figure (a dotted name such
 * as "rtt_hot.kvring.p50_ns") measured @value right after probe @p, for
 * the summary; @json says how the summary prints. Near and far only; a
 * value without a known placement is counted but not kept.
 */
void bench_place_record(const char *figure, double value,
			const struct bench_place *p, bool json);

/*
 * bench_place_summary - prints, if anything was recorded, the median of
 * each figure per placement (a text table, or one JSON line with scenario
 * "placement"), then forgets what was recorded.
 */
void bench_place_summary(void);

#endif /* KVR_BENCH_PLACE_H */
