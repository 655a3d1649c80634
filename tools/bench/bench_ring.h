/* SPDX-License-Identifier: MIT */
/*
 * bench_ring.h - private to the `ring` scenario of kvring-bench: the
 * benchmark's shared control block, its options, each process's state, and
 * the measurement loops of bench_ring_peer.c used by bench_ring.c. Nothing
 * here is used by other scenarios.
 */
#ifndef KVR_BENCH_RING_H
#define KVR_BENCH_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <kvring/ring.h>

enum phase_kind { PH_FLOOR = 1, PH_FLOOR2, PH_RTT, PH_TPUT, PH_EXIT, PH_PROBE };

/*
 * The benchmark's own control block in the shared mapping; each hot field
 * on its own 128-byte block. The parent ("A", producer CPU) writes the
 * parameters, then cmd with release; the child ("B", consumer CPU) reads
 * cmd with acquire, runs the phase, writes its results, then ack with
 * release; the parent reads ack with acquire before reading results.
 */
struct bench_ring_ctl_shm {
	_Atomic uint32_t cmd; /* phase number, increasing */
	uint8_t pad0[124];
	_Atomic uint32_t ack; /* last phase the child finished */
	uint8_t pad1[124];
	_Atomic uint64_t line; /* the floor's cache line */
	uint8_t pad2[120];
	/* The two-line floor: a flag and a message line per direction. */
	_Atomic uint64_t flag_a;
	uint8_t pad3[120];
	_Atomic uint64_t msg_a[8];
	uint8_t pad4[64];
	_Atomic uint64_t flag_b;
	uint8_t pad5[120];
	_Atomic uint64_t msg_b[8];
	uint8_t pad6[64];
	/* Parameters (parent -> child), ordered by cmd. */
	uint32_t kind, bytes;
	uint64_t count;
	/* Results (child -> parent), ordered by ack. */
	uint64_t t_end_ns;
	int32_t err;
	uint64_t bad_seq, bad_expected, bad_found;
};

/* At most this many payload sizes (--sizes). */
#define NR_SIZES 8

struct bench_ring_opts {
	bool json;
	uint64_t iters;	       /* RTT samples per size per round */
	uint64_t tput_records; /* 64-byte records per round; 4 KiB: / 16 */
	unsigned rounds;
	int cpu_p, cpu_c;
	uint32_t ring_bytes;	  /* ping and pong rings */
	uint32_t bulk_bytes;	  /* throughput ring */
	uint32_t batch;		  /* records per commit/release in throughput */
	uint32_t sizes[NR_SIZES]; /* payload bytes, 8..MAX_BYTES */
	unsigned nr_sizes;
};

/* Process-local state of either side. */
struct bench_ring_side {
	struct bench_ring_ctl_shm *ctl;
	struct kvr_ring ping, pong, bulk; /* this side's views */
	unsigned char *src;		  /* payload source, 4 KiB */
	unsigned char *sink;		  /* payload sink, 4 KiB */
	pid_t child;			  /* parent only */
	bool reaped;			  /* parent: child already waited for */
};

#define MAX_BYTES 4096u

/* ---- measurement loops (bench_ring_peer.c) ---------------------------- */

/*
 * bench_ring_child_main - the child ("B", consumer CPU): pins itself, then
 * runs each phase the parent starts until PH_EXIT or a failure.
 * Return: BENCH_EXIT_OK or BENCH_EXIT_ERR.
 */
int bench_ring_child_main(struct bench_ring_side *s,
			  const struct bench_ring_opts *o);

/* bench_ring_phase_start - parent: start a phase in the child; its cmd. */
uint32_t bench_ring_phase_start(struct bench_ring_side *s, uint32_t kind,
				uint32_t bytes, uint64_t count);

/*
 * Parent side of each phase: @warm unrecorded iterations, then @n samples
 * in ticks in @out (throughput: *@ns from first claim to last record
 * consumed). Each returns 0, or -1 after printing what went wrong (wrong
 * data, a ring error, or the child died).
 */
int bench_ring_floor(struct bench_ring_side *s, uint64_t warm, uint64_t n,
		     uint64_t *out);
int bench_ring_floor2(struct bench_ring_side *s, uint64_t warm, uint64_t n,
		      uint64_t *out);
/* The placement probe's pattern (bench_place.h): one line each way, as
 * every other scenario's probe peer bounces it. */
int bench_ring_probe(struct bench_ring_side *s, uint64_t warm, uint64_t n,
		     uint64_t *out);
int bench_ring_rtt(struct bench_ring_side *s, uint32_t bytes, uint64_t warm,
		   uint64_t n, uint64_t *out);
int bench_ring_tput(struct bench_ring_side *s, uint32_t bytes, uint64_t n,
		    uint32_t batch, uint64_t *ns);

#endif /* KVR_BENCH_RING_H */
