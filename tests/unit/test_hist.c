/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/hist.c and <kvring/hist.h>: bucket bounds, and quantiles
 * checked against the exact quantiles of known samples (sorted, rank
 * ceil(q * n)), which the histogram must place in the same bucket.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/hist.h>

TestSuite(hist, .timeout = 10);

static struct kvr_hist_shm h;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The exact quantile: the sample of rank ceil(q * n) in sorted order. */
static uint64_t exact_q(uint64_t *v, size_t n, double q)
{
	size_t r = (size_t)(q * (double)n);

	if ((double)r < q * (double)n)
		r++;
	if (r == 0)
		r = 1;
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[r - 1];
}

static void fill(const uint64_t *v, size_t n, struct kvr_hist_snap *s)
{
	kvr_hist_reset(&h);
	for (size_t i = 0; i < n; i++)
		kvr_hist_add(&h, v[i], 1);
	kvr_hist_read(&h, s);
}

/* The quantile @q of snapshot @s falls in the bucket of @ns. A macro, so
 * that a failure names the line of the test. */
#define EXPECT_QUANTILE_BUCKET(s, q, ns)                                       \
	cr_expect_eq(kvr_hist_bucket(kvr_hist_quantile((s), (q))),             \
		     kvr_hist_bucket(ns), "quantile %g of %s", (double)(q),    \
		     #s)

Test(hist, bounds_tile_the_range_when_walked_in_order)
{
	cr_expect_eq(kvr_hist_lo(0), 0);
	for (unsigned i = 0; i + 1 < KVR_HIST_BUCKETS; i++) {
		uint64_t lo = kvr_hist_lo(i), hi = kvr_hist_hi(i);

		cr_assert_lt(lo, hi, "bucket %u: [%lu, %lu)", i,
			     (unsigned long)lo, (unsigned long)hi);
		cr_expect_eq(kvr_hist_bucket(lo), i, "lo of %u", i);
		cr_expect_eq(kvr_hist_bucket(hi - 1), i, "hi-1 of %u", i);
		cr_expect_eq(kvr_hist_bucket(hi), i + 1, "hi of %u", i);
		/* Log-linear: width at most 1/8 of the lower bound. */
		if (lo >= KVR_HIST_SUB)
			cr_expect_leq((hi - lo) * KVR_HIST_SUB, lo,
				      "bucket %u too wide", i);
	}
	cr_expect_eq(kvr_hist_lo(KVR_HIST_BUCKETS - 1),
		     KVR_HIST_TOP_NS - (KVR_HIST_TOP_NS >> 4));
	cr_expect_eq(kvr_hist_hi(KVR_HIST_BUCKETS - 1), UINT64_MAX);
}

Test(hist, covers_10ns_to_10s_when_values_are_in_range)
{
	/* 10 ns and 10 s land in distinct, non-overflow buckets. */
	cr_expect_eq(kvr_hist_lo(kvr_hist_bucket(10)), 10);
	cr_expect_lt(kvr_hist_bucket(10000000000ull), KVR_HIST_BUCKETS - 1);
	cr_expect_eq(kvr_hist_bucket(UINT64_MAX), KVR_HIST_BUCKETS - 1);
	cr_expect_eq(kvr_hist_bucket(KVR_HIST_TOP_NS), KVR_HIST_BUCKETS - 1);
}

Test(hist, quantile_is_exact_when_values_are_below_8ns)
{
	uint64_t v[] = {1, 2, 3, 4, 5, 6, 7, 7, 7, 0};
	struct kvr_hist_snap s;

	fill(v, 10, &s);
	cr_expect_eq(s.count, 10);
	/* Sorted: 0 1 2 3 4 5 6 7 7 7. */
	cr_expect_eq(kvr_hist_quantile(&s, 0.5), 4);
	cr_expect_eq(kvr_hist_quantile(&s, 0.1), 0);
	cr_expect_eq(kvr_hist_quantile(&s, 0.7), 6);
	cr_expect_eq(kvr_hist_quantile(&s, 0.8), 7);
	cr_expect_eq(kvr_hist_quantile(&s, 1.0), 7);
}

Test(hist, quantiles_share_the_exact_bucket_when_samples_are_known)
{
	enum { N = 10007 };
	static uint64_t v[N];
	const double qs[] = {0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0};
	struct kvr_hist_snap s;
	uint64_t x = 88172645463325252ull;

	/* Log-uniform from ~10 ns to ~10 s (xorshift64). */
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		v[i] = 10ull << (x % 30) | (x >> 40) % 1000;
	}
	fill(v, N, &s);
	cr_assert_eq(s.count, N);
	for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
		uint64_t want = exact_q(v, N, qs[k]);
		uint64_t got = kvr_hist_quantile(&s, qs[k]);

		cr_expect_eq(
		    kvr_hist_bucket(got), kvr_hist_bucket(want),
		    "q %.3f: got %lu (bucket %u), exact %lu (bucket %u)", qs[k],
		    (unsigned long)got, kvr_hist_bucket(got),
		    (unsigned long)want, kvr_hist_bucket(want));
		/* Midpoint of a <= 12.5% bucket: within 1/16 + rounding. */
		cr_expect_leq((got > want ? got - want : want - got) * 16,
			      want + 16, "q %.3f: %lu vs %lu", qs[k],
			      (unsigned long)got, (unsigned long)want);
	}
}

Test(hist, quantile_of_three_samples_is_the_middle_when_q_is_half)
{
	uint64_t v[] = {1000, 50000, 3000000};
	struct kvr_hist_snap s;
	uint64_t p50;

	fill(v, 3, &s);
	p50 = kvr_hist_quantile(&s, 0.5);
	cr_expect_eq(kvr_hist_bucket(p50), kvr_hist_bucket(50000), "p50 %lu",
		     (unsigned long)p50);
	EXPECT_QUANTILE_BUCKET(&s, 0.34, 50000);
	EXPECT_QUANTILE_BUCKET(&s, 0.33, 1000);
	cr_expect_eq(s.sum_ns, 1000 + 50000 + 3000000);
	cr_expect_eq(kvr_hist_mean(&s), (1000 + 50000 + 3000000) / 3.0);
}

Test(hist, quantile_is_zero_when_empty)
{
	struct kvr_hist_snap s;

	kvr_hist_reset(&h);
	kvr_hist_read(&h, &s);
	cr_expect_eq(s.count, 0);
	cr_expect_eq(kvr_hist_quantile(&s, 0.99), 0);
	cr_expect_eq(kvr_hist_mean(&s), 0.0);
}

Test(hist, add_with_weight_counts_n_samples_when_n_above_one)
{
	struct kvr_hist_snap s;

	kvr_hist_reset(&h);
	kvr_hist_add(&h, 700, 5);
	kvr_hist_add(&h, 90000, 5);
	kvr_hist_read(&h, &s);
	cr_expect_eq(s.count, 10);
	cr_expect_eq(atomic_load(&h.count), 10);
	cr_expect_eq(s.sum_ns, 5 * 700 + 5 * 90000);
	EXPECT_QUANTILE_BUCKET(&s, 0.5, 700);
	EXPECT_QUANTILE_BUCKET(&s, 0.51, 90000);
}

Test(hist, diff_holds_only_the_interval_when_snapshots_differ)
{
	struct kvr_hist_snap a, b, d;

	kvr_hist_reset(&h);
	for (int i = 0; i < 100; i++)
		kvr_hist_add(&h, 1000, 1);
	kvr_hist_read(&h, &a);
	for (int i = 0; i < 10; i++)
		kvr_hist_add(&h, 1000000, 1);
	kvr_hist_read(&h, &b);
	cr_assert(kvr_hist_diff(&b, &a, &d));
	cr_expect_eq(d.count, 10);
	EXPECT_QUANTILE_BUCKET(&d, 0.5, 1000000);
	/* Since start, the p50 is still the 1 us bulk. */
	EXPECT_QUANTILE_BUCKET(&b, 0.5, 1000);
}

Test(hist, diff_is_empty_when_the_histogram_was_reset)
{
	struct kvr_hist_snap a, b, d;

	kvr_hist_reset(&h);
	kvr_hist_add(&h, 1000, 3);
	kvr_hist_read(&h, &a);
	kvr_hist_reset(&h);
	kvr_hist_add(&h, 5000, 1);
	kvr_hist_read(&h, &b);
	cr_expect_not(kvr_hist_diff(&b, &a, &d));
	cr_expect_eq(d.count, 0);
}

Test(hist, merge_adds_bucketwise_when_two_channels_combine)
{
	struct kvr_hist_snap a, b;

	kvr_hist_reset(&h);
	kvr_hist_add(&h, 100, 2);
	kvr_hist_read(&h, &a);
	kvr_hist_reset(&h);
	kvr_hist_add(&h, 100, 1);
	kvr_hist_add(&h, 200, 1);
	kvr_hist_read(&h, &b);
	kvr_hist_merge(&a, &b);
	cr_expect_eq(a.count, 4);
	cr_expect_eq(a.buckets[kvr_hist_bucket(100)], 3);
	cr_expect_eq(a.sum_ns, 500);
}
