/* SPDX-License-Identifier: MIT */
/*
 * Log-linear histograms: bucket bounds, the reader's lock-free copy,
 * differences of copies and quantiles. The writer and the bucket index
 * are inline in <kvring/hist.h> because they run on the server's and the
 * worker's hot paths. This file does not know where histograms live or
 * what they time.
 */
#include <string.h>

#include <kvring/hist.h>

uint64_t kvr_hist_lo(unsigned i)
{
	unsigned e, m;

	if (i < KVR_HIST_SUB)
		return i;
	if (i >= KVR_HIST_BUCKETS)
		return UINT64_MAX;
	e = (i - KVR_HIST_SUB) / KVR_HIST_SUB + KVR_HIST_SUB_BITS;
	m = (i - KVR_HIST_SUB) % KVR_HIST_SUB;
	return (1ull << e) + ((uint64_t)m << (e - KVR_HIST_SUB_BITS));
}

uint64_t kvr_hist_hi(unsigned i)
{
	if (i + 1 >= KVR_HIST_BUCKETS)
		return UINT64_MAX;
	return kvr_hist_lo(i + 1);
}

void kvr_hist_reset(struct kvr_hist_shm *h)
{
	/* Relaxed: only the writer calls this, before it publishes the
	 * channel that holds @h again (the channel's own release). */
	atomic_store_explicit(&h->count, 0, memory_order_relaxed);
	atomic_store_explicit(&h->sum_ns, 0, memory_order_relaxed);
	for (unsigned i = 0; i < KVR_HIST_BUCKETS; i++)
		atomic_store_explicit(&h->buckets[i], 0, memory_order_relaxed);
}

void kvr_hist_read(const struct kvr_hist_shm *h, struct kvr_hist_snap *out)
{
	uint64_t n = 0;

	/* A-HIST1: pairs with R-HIST1 in kvr_hist_add(); every sample
	 * counted by then is in the buckets read below. The acquire load
	 * through a const pointer is fine on a read-only mapping: it is a
	 * plain load on every target we build for. */
	(void)atomic_load_explicit((_Atomic uint64_t *)&h->count,
				   memory_order_acquire);
	out->sum_ns = atomic_load_explicit((_Atomic uint64_t *)&h->sum_ns,
					   memory_order_relaxed);
	for (unsigned i = 0; i < KVR_HIST_BUCKETS; i++) {
		/* Relaxed: ordered after A-HIST1; each value only grows. */
		out->buckets[i] = atomic_load_explicit(
		    (_Atomic uint64_t *)&h->buckets[i], memory_order_relaxed);
		n += out->buckets[i];
	}
	out->count = n;
}

bool kvr_hist_diff(const struct kvr_hist_snap *now,
		   const struct kvr_hist_snap *then, struct kvr_hist_snap *out)
{
	for (unsigned i = 0; i < KVR_HIST_BUCKETS; i++) {
		if (now->buckets[i] < then->buckets[i]) {
			memset(out, 0, sizeof(*out));
			return false;
		}
		out->buckets[i] = now->buckets[i] - then->buckets[i];
	}
	out->count = now->count >= then->count ? now->count - then->count : 0;
	out->sum_ns =
	    now->sum_ns >= then->sum_ns ? now->sum_ns - then->sum_ns : 0;
	return true;
}

void kvr_hist_merge(struct kvr_hist_snap *acc, const struct kvr_hist_snap *h)
{
	for (unsigned i = 0; i < KVR_HIST_BUCKETS; i++)
		acc->buckets[i] += h->buckets[i];
	acc->count += h->count;
	acc->sum_ns += h->sum_ns;
}

uint64_t kvr_hist_quantile(const struct kvr_hist_snap *s, double q)
{
	uint64_t rank, seen = 0, lo, hi;
	double r;

	if (!s->count)
		return 0;
	if (!(q > 0.0))
		q = 0.0;
	if (q > 1.0)
		q = 1.0;
	/* ceil() without libm. */
	r = q * (double)s->count;
	rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < KVR_HIST_BUCKETS; i++) {
		seen += s->buckets[i];
		if (seen < rank)
			continue;
		lo = kvr_hist_lo(i);
		hi = kvr_hist_hi(i);
		if (hi == UINT64_MAX)
			return lo;
		return lo + (hi - lo - 1) / 2;
	}
	/* count above the buckets' sum (a caller-built snapshot): the
	 * largest bucket in use is the best answer there is. */
	for (unsigned i = KVR_HIST_BUCKETS; i-- > 0;)
		if (s->buckets[i])
			return kvr_hist_lo(i);
	return 0;
}

double kvr_hist_mean(const struct kvr_hist_snap *s)
{
	return s->count ? (double)s->sum_ns / (double)s->count : 0.0;
}
