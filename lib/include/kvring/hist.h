/* SPDX-License-Identifier: MIT */
/*
 * hist.h - log-linear latency histograms that live in shared memory
 * (HdrHistogram style: a fixed number of buckets per power of two).
 *
 * Buckets: values 0..7 ns get one bucket each; from 8 ns on, every power
 * of two [2^e, 2^(e+1)) is split into KVR_HIST_SUB = 8 equal buckets, so
 * a bucket is at most 1/8 (12.5%) of its lower bound wide. 256 buckets
 * reach 2^34 ns (17.2 s); larger values land in the last bucket, which
 * therefore means "17.2 s or more". The range asked for (10 ns to 10 s)
 * is covered with room to spare.
 *
 * Concurrency: one writer per histogram (kvringd's loop thread for the
 * server's, the client's mutex holder for a worker's), any number of
 * lock-free readers in other processes. The writer bumps buckets and the
 * sum with relaxed load+store pairs (a single writer needs no RMW) and
 * then stores count with release (R-HIST1). A reader loads count with
 * acquire (A-HIST1) and then the buckets: it sees at least `count`
 * samples in them, maybe a few more written since. Readers that need a
 * self-consistent total use the sum of the buckets they read (exports do
 * this, so `_count` always equals the `+Inf` bucket).
 *
 * This file owns the bucket arithmetic, the writer, the reader's copy and
 * quantiles. It does not decide what is timed (server/disp.c,
 * worker/answer.c) or where histograms sit (<kvring/layout.h>).
 */
#ifndef KVRING_HIST_H
#define KVRING_HIST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define KVR_HIST_SUB_BITS 3u
#define KVR_HIST_SUB	  (1u << KVR_HIST_SUB_BITS) /* buckets per octave */
#define KVR_HIST_BUCKETS  256u
/* First value of the last bucket: 2^34 ns. */
#define KVR_HIST_TOP_NS (1ull << 34)

/*
 * struct kvr_hist_shm - one histogram in shared memory (2112 bytes, 33
 * cache lines). Lives in the control segment; written by exactly one
 * process (see <kvring/layout.h> for which), never freed on its own.
 */
struct kvr_hist_shm {
	_Atomic uint64_t count;	 /* 0: samples; stored last, release */
	_Atomic uint64_t sum_ns; /* 8: sum of the samples, ns */
	uint64_t pad[6];	 /* 16 .. 64 */
	_Atomic uint64_t buckets[KVR_HIST_BUCKETS]; /* 64 */
};
_Static_assert(sizeof(struct kvr_hist_shm) == 2112, "ABI: docs/layout.md");

/* A private copy of a histogram (what readers compute with). */
struct kvr_hist_snap {
	uint64_t count; /* sum of buckets[] (not the shared count) */
	uint64_t sum_ns;
	uint64_t buckets[KVR_HIST_BUCKETS];
};

/* kvr_hist_bucket - the bucket of value @v (ns). */
static inline unsigned kvr_hist_bucket(uint64_t v)
{
	unsigned e;

	if (v < KVR_HIST_SUB)
		return (unsigned)v;
	if (v >= KVR_HIST_TOP_NS)
		return KVR_HIST_BUCKETS - 1;
	e = 63u - (unsigned)__builtin_clzll(v); /* 3..33 */
	return KVR_HIST_SUB + (e - KVR_HIST_SUB_BITS) * KVR_HIST_SUB +
	       (unsigned)((v >> (e - KVR_HIST_SUB_BITS)) & (KVR_HIST_SUB - 1));
}

/* kvr_hist_lo - the smallest value of bucket @i (i < KVR_HIST_BUCKETS). */
uint64_t kvr_hist_lo(unsigned i);

/* kvr_hist_hi - one past the largest value of bucket @i; UINT64_MAX for
 * the last bucket, which is open-ended. */
uint64_t kvr_hist_hi(unsigned i);

/*
 * kvr_hist_add - record @n samples of value @v_ns. Single writer only
 * (see the top of this file); never fails, never blocks.
 */
static inline void kvr_hist_add(struct kvr_hist_shm *h, uint64_t v_ns,
				uint64_t n)
{
	_Atomic uint64_t *b = &h->buckets[kvr_hist_bucket(v_ns)];

	/* Relaxed: single writer; published by R-HIST1 below. */
	atomic_store_explicit(b,
			      atomic_load_explicit(b, memory_order_relaxed) + n,
			      memory_order_relaxed);
	atomic_store_explicit(
	    &h->sum_ns,
	    atomic_load_explicit(&h->sum_ns, memory_order_relaxed) + v_ns * n,
	    memory_order_relaxed);
	/* R-HIST1: the bucket and sum above before the new count; pairs
	 * with A-HIST1 in kvr_hist_read(). */
	atomic_store_explicit(
	    &h->count,
	    atomic_load_explicit(&h->count, memory_order_relaxed) + n,
	    memory_order_release);
}

/* kvr_hist_reset - zero a histogram. Only its writer may call it, and
 * only while no reader depends on its values going up (a channel being
 * claimed for a new worker). */
void kvr_hist_reset(struct kvr_hist_shm *h);

/*
 * kvr_hist_read - copy @h into @out without a lock. out->count is the sum
 * of the buckets copied, which is at least the count published when the
 * copy started. Safe on a mapping that is PROT_READ.
 */
void kvr_hist_read(const struct kvr_hist_shm *h, struct kvr_hist_snap *out);

/*
 * kvr_hist_diff - @out = @now - @then, bucket by bucket: the samples
 * recorded between two copies of one histogram. A bucket that went down
 * (the histogram was reset in between) makes the whole result empty and
 * the call return false.
 */
bool kvr_hist_diff(const struct kvr_hist_snap *now,
		   const struct kvr_hist_snap *then, struct kvr_hist_snap *out);

/* kvr_hist_merge - @acc += @h, bucket by bucket. */
void kvr_hist_merge(struct kvr_hist_snap *acc, const struct kvr_hist_snap *h);

/*
 * kvr_hist_quantile - the value at quantile @q (0 < q <= 1) of @s: the
 * bucket holding the sample of rank ceil(q * count) (ranks from 1), and
 * within it the midpoint (exact for the one-value buckets below 8 ns; the
 * last, open-ended bucket answers its lower bound). So the answer lies in
 * the same bucket as the exact sample quantile, at most 1/16 of the value
 * away from it.
 * Return: the value in ns, or 0 for an empty histogram.
 */
uint64_t kvr_hist_quantile(const struct kvr_hist_snap *s, double q);

/* kvr_hist_mean - sum / count in ns, 0 when empty. */
double kvr_hist_mean(const struct kvr_hist_snap *s);

#endif /* KVRING_HIST_H */
