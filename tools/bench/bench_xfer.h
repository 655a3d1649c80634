/* SPDX-License-Identifier: MIT */
/*
 * bench_xfer.h - what the store and retrieve scenarios' files share
 * (private to tools/bench/): the subjects, one cell's results, the run's
 * state, and the calls between bench_xfer.c (the grid and its cells),
 * bench_xfer_ops.c (one timed request per subject) and
 * bench_xfer_report.c (table, JSON lines and plots).
 */
#ifndef KVR_BENCH_XFER_H
#define KVR_BENCH_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include <kvring/kvring.h>

#include "bench_peers.h"
#include "bench_server.h"

#include "bench_server.h"

/*
 * kvringd's --spin-us here: long enough that the commit after copying
 * 2 MiB finds the server awake, as a worker streaming requests would;
 * the zeromq child, which shares the server CPU, runs only after it ran
 * out.
 */
#define XFER_SPIN_US 2000u

#define MAX_SIZES  8
#define MAX_CHUNKS 8

enum {
	S_MEMCPY,
	S_KVRING,
	S_COPY,
	S_ZMQ,
	S_MCOLD,
	S_SUM,
	S_SUMF,
	S_SUMC,
	S_AHEAD,
	NR_SUBJ
};
static const char *const subj_name[NR_SUBJ] = {
    "memcpy",	       "kvring",	  "kvring_copy",
    "zeromq",	       "memcpy_cold",	  "kvring_sum",
    "kvring_sum_fill", "kvring_sum_copy", "kvring_ahead"};

/* Subjects of one scenario only. */
static inline bool subj_in(bool retrieve, int s)
{
	return retrieve ? s != S_SUMF && s != S_AHEAD : s != S_SUMC;
}

/* The subjects whose phases and back-to-back run are reported. */
static inline bool subj_phased(int s)
{
	return s == S_KVRING || s == S_AHEAD;
}

/*
 * memcpy_cold: the same copy into (or out of) memory this process has not
 * touched for a long time, like a fresh slot, where "memcpy" reuses the
 * last kvring request's slots, still in the caches. A 256 MiB pre-faulted
 * region (8x the L3 here) is walked request by request. It separates what
 * the protocol costs from what a cold destination costs any copy.
 */
#define COLD_BYTES (256ull << 20)

/* Results of one cell (size, chunks) and subject. */
struct cell {
	bool done;
	uint64_t reps;
	double p50, p99, p999; /* ns per request */
	double gbps, ops;
	double ratio_med; /* median per-request memcpy_ns / ns */
	/* store, kvring only: p50 ns of prepare, copy and commit */
	bool phases;
	double phase_p50[3];
	/* store, kvring only: the back-to-back run (kvring_stream) */
	bool stream;
	uint64_t stream_reps;
	double stream_p50, stream_mc_p50, stream_ratio_med, stream_ph[3];
	/* store only: the first store of a fresh connection */
	bool first;
	double first_gbps, first_warm_gbps, attach_ms, prefault_ms;
};

struct xfer_ctx {
	const char *scenario;
	bool retrieve;
	struct bench_run_opts o;
	uint64_t sizes[MAX_SIZES];
	uint32_t chunks[MAX_CHUNKS];
	unsigned nsizes, nchunks;
	uint64_t pool_bytes, max_req;
	struct bench_server srv;
	struct kvr_client *shm, *copy;
	struct kvr_client *sum; /* shm with KVR_CHECKSUM_VERIFY */
	bool fill; /* kv_store fills with kvr_xfer_fill (kvring_sum_fill) */
	struct kvr_client *sum_on; /* KVR_CHECKSUM_ON: kvring_sum_copy */
	struct kvr_client *ahead;  /* store-ahead on: kvring_ahead */
	struct bench_peer *zmq;
	unsigned char *src, *dst; /* one chunk each, pre-faulted */
	unsigned char *cold;	  /* COLD_BYTES, pre-faulted (memcpy_cold) */
	uint64_t cold_off;
	uint64_t key_seq;
	struct cell res[MAX_SIZES][MAX_CHUNKS][NR_SUBJ];
	/* Per-request scratch. */
	struct kvr_key *keys;
	uint64_t *sizesv;
	void **ptrs; /* slot addresses of the last kvring (shm) request */
	struct kvr_key *pkeys; /* and their keys */
};

/* ---- bench_xfer_ops.c: one request per subject ---- */

/* The run's next unique key (bench_key of a running sequence). */
struct kvr_key bench_xfer_next_key(struct xfer_ctx *x);

/* Say @what failed with @rc (and @c's last error) on stderr; returns @rc. */
int bench_xfer_fail(struct xfer_ctx *x, struct kvr_client *c, const char *what,
		    int rc);

/*
 * An untimed ping before each timed request: kvringd sleeps after 50 us
 * without work, and while the other subjects run it does; a worker that
 * streams requests finds it awake, and that is what is measured.
 */
int bench_xfer_wake(struct xfer_ctx *x, struct kvr_client *c);

/*
 * A kvring store of @n fresh chunks of @b bytes through client @c; saves
 * the slot addresses in x->ptrs and the keys in x->keys. *ns: the request;
 * @ph (may be NULL): its prepare, copy and commit, in that order.
 */
int bench_xfer_kv_store_ph(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
			   uint32_t n, uint64_t *ns, uint64_t *ph);
/* The same without the phases (x->fill: fill each slot with
 * kvr_xfer_fill instead of memcpy). */
int bench_xfer_kv_store(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
			uint32_t n, uint64_t *ns);

/* The ceiling: the same bytes into the last kvring request's slots. */
int bench_xfer_mc_store(struct xfer_ctx *x, uint64_t b, uint32_t n,
			uint64_t *ns);

/* memcpy_cold: the same copies into (store, each chunk stamped) or out
 * of (retrieve) memory not touched for long, as a fresh slot is (x->cold,
 * walked request by request). */
int bench_xfer_mc_cold(struct xfer_ctx *x, uint64_t b, uint32_t n,
		       uint64_t *ns);

/* Retrieve the keys in x->keys through @c into x->dst, checking stamps
 * (and every byte with @full); saves slot addresses for bench_xfer_mc_retrieve.
 */
int bench_xfer_kv_retrieve(struct xfer_ctx *x, struct kvr_client *c, uint64_t b,
			   uint32_t n, bool full, uint64_t *ns,
			   const char *what);

/* The ceiling: memcpy out of the same slot addresses (checked too). */
int bench_xfer_mc_retrieve(struct xfer_ctx *x, uint64_t b, uint32_t n,
			   uint64_t *ns);

/* ---- bench_xfer_report.c ---- */

/* The table's header (nothing with --json). */
void bench_xfer_print_header(const struct xfer_ctx *x);
/* Cell (size @si, chunks @ci): a table row per subject with its phases,
 * or one JSON line per subject. */
void bench_xfer_print_cell(const struct xfer_ctx *x, unsigned si, unsigned ci);
/* The plot <scenario>_gbps under x->o.plot_dir: GB/s by chunk size. */
void bench_xfer_plot(const struct xfer_ctx *x);

#endif /* KVR_BENCH_XFER_H */
