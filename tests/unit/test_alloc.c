/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of server/store/alloc.c, kvringd's pool allocator: argument
 * checks, alignment and rounding, best fit, coalescing, refusal of bad puts
 * without damage, and a long random mixed-size workload checked step by step
 * against a trivially correct bitmap model of the pool.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define U 64u /* unit used by most tests */

static struct kvr_alloc al;

static void audit_ok(const struct kvr_alloc *a)
{
	char msg[256];
	int rc = kvr_alloc_audit(a, msg, sizeof(msg));

	cr_assert_eq(rc, 0, "audit: %s", msg);
}

static void fini(void)
{
	kvr_alloc_fini(&al);
}

TestSuite(alloc, .fini = fini, .timeout = 30);

Test(alloc, init_rejects_bad_alignment_when_not_power_of_two_or_small)
{
	cr_expect_eq(kvr_alloc_init(&al, 1 << 20, 32), -EINVAL);
	cr_expect_eq(kvr_alloc_init(&al, 1 << 20, 96), -EINVAL);
	cr_expect_eq(kvr_alloc_init(&al, 1 << 20, 65), -EINVAL);
	cr_expect_eq(kvr_alloc_init(NULL, 1 << 20, 64), -EINVAL);
	cr_expect_eq(kvr_alloc_init(&al, 63, 64), -EINVAL);
}

Test(alloc, init_uses_4096_when_align_is_zero)
{
	uint64_t off;

	cr_assert_eq(kvr_alloc_init(&al, 1 << 20, 0), 0);
	cr_expect_eq(kvr_alloc_align(&al), 4096u);
	cr_assert_eq(kvr_alloc_get(&al, 1, &off), 0);
	cr_assert_eq(kvr_alloc_get(&al, 1, &off), 0);
	cr_expect_eq(off, 4096u);
	audit_ok(&al);
}

Test(alloc, tail_is_unused_when_pool_is_not_a_whole_number_of_units)
{
	struct kvr_alloc_stats st;
	uint64_t off;

	cr_assert_eq(kvr_alloc_init(&al, 10 * U + 63, U), 0);
	kvr_alloc_stats(&al, &st);
	cr_expect_eq(st.total_bytes, 10 * U);
	cr_expect_eq(kvr_alloc_get(&al, 10 * U + 1, &off), -ENOSPC);
	cr_expect_eq(kvr_alloc_get(&al, 10 * U, &off), 0);
	cr_expect_eq(off, 0u);
}

Test(alloc, get_rejects_zero_bytes_when_called)
{
	uint64_t off = 777;

	cr_assert_eq(kvr_alloc_init(&al, 10 * U, U), 0);
	cr_expect_eq(kvr_alloc_get(&al, 0, &off), -EINVAL);
	cr_expect_eq(kvr_alloc_get(&al, 1, NULL), -EINVAL);
	cr_expect_eq(off, 777u, "output touched on error");
}

Test(alloc, get_returns_enospc_when_larger_than_pool)
{
	uint64_t off = 777;

	cr_assert_eq(kvr_alloc_init(&al, 10 * U, U), 0);
	cr_expect_eq(kvr_alloc_get(&al, 10 * U + 1, &off), -ENOSPC);
	cr_expect_eq(kvr_alloc_get(&al, UINT64_MAX, &off), -ENOSPC);
	cr_expect_eq(off, 777u);
	audit_ok(&al);
}

Test(alloc, offsets_are_aligned_and_sizes_rounded_when_allocating)
{
	struct kvr_alloc_stats st;
	uint64_t a, b;

	cr_assert_eq(kvr_alloc_init(&al, 10 * U, U), 0);
	cr_assert_eq(kvr_alloc_get(&al, 1, &a), 0);
	cr_assert_eq(kvr_alloc_get(&al, U + 1, &b), 0);
	cr_expect_eq(a, 0u);
	cr_expect_eq(b, U);
	kvr_alloc_stats(&al, &st);
	cr_expect_eq(st.used_bytes, 3 * U);
	cr_expect_eq(kvr_alloc_round(&al, U + 1), 2 * U);
	cr_expect(kvr_alloc_owns(&al, b, U + 1));
	cr_expect(kvr_alloc_owns(&al, b, 2 * U));
	cr_expect(!kvr_alloc_owns(&al, b, 3 * U));
	audit_ok(&al);
}

Test(alloc, whole_pool_is_usable_and_then_enospc_when_full)
{
	uint64_t off;

	cr_assert_eq(kvr_alloc_init(&al, 10 * U, U), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(kvr_alloc_get(&al, U, &off), 0, "get #%d", i);
	cr_expect_eq(kvr_alloc_get(&al, 1, &off), -ENOSPC);
	cr_expect_eq(kvr_alloc_largest_free(&al), 0u);
	audit_ok(&al);
}

Test(alloc, neighbours_coalesce_when_freed_in_any_order)
{
	struct kvr_alloc_stats st;
	uint64_t o[4];

	cr_assert_eq(kvr_alloc_init(&al, 10 * U, U), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(kvr_alloc_get(&al, 2 * U, &o[i]), 0);
	/* Free 1 and 3: two holes; then 2 joins them with the tail. */
	cr_assert_eq(kvr_alloc_put(&al, o[1], 2 * U), 0);
	cr_assert_eq(kvr_alloc_put(&al, o[3], 2 * U), 0);
	kvr_alloc_stats(&al, &st);
	cr_expect_eq(st.free_extents, 2u);
	cr_expect_eq(st.largest_free_bytes, 4 * U);
	cr_expect_eq(st.fragmentation, 1.0 - 4.0 / 6.0);
	audit_ok(&al);
	cr_assert_eq(kvr_alloc_put(&al, o[2], 2 * U), 0);
	kvr_alloc_stats(&al, &st);
	cr_expect_eq(st.free_extents, 1u);
	cr_expect_eq(st.largest_free_bytes, 8 * U);
	cr_assert_eq(kvr_alloc_put(&al, o[0], 2 * U), 0);
	kvr_alloc_stats(&al, &st);
	cr_expect_eq(st.free_extents, 1u);
	cr_expect_eq(st.free_bytes, 10 * U);
	cr_expect_eq(st.fragmentation, 0.0);
	audit_ok(&al);
}

Test(alloc, best_fit_is_chosen_when_several_holes_fit)
{
	uint64_t o[6], off;

	cr_assert_eq(kvr_alloc_init(&al, 20 * U, U), 0);
	/* Layout: [5][1][3][1][rest 10]; free the 5 and the 3. */
	cr_assert_eq(kvr_alloc_get(&al, 5 * U, &o[0]), 0);
	cr_assert_eq(kvr_alloc_get(&al, 1 * U, &o[1]), 0);
	cr_assert_eq(kvr_alloc_get(&al, 3 * U, &o[2]), 0);
	cr_assert_eq(kvr_alloc_get(&al, 1 * U, &o[3]), 0);
	cr_assert_eq(kvr_alloc_put(&al, o[0], 5 * U), 0);
	cr_assert_eq(kvr_alloc_put(&al, o[2], 3 * U), 0);
	cr_assert_eq(kvr_alloc_get(&al, 3 * U, &off), 0);
	cr_expect_eq(off, 6 * U, "3 units should take the 3-unit hole");
	cr_assert_eq(kvr_alloc_get(&al, 4 * U, &off), 0);
	cr_expect_eq(off, 0u, "4 units should take the 5-unit hole");
	audit_ok(&al);
}

Test(alloc, put_is_refused_without_damage_when_double_or_foreign)
{
	struct kvr_alloc_stats before, after;
	uint64_t a, b;

	cr_assert_eq(kvr_alloc_init(&al, 10 * U, U), 0);
	cr_assert_eq(kvr_alloc_get(&al, 2 * U, &a), 0);
	cr_assert_eq(kvr_alloc_get(&al, 2 * U, &b), 0);
	cr_assert_eq(kvr_alloc_put(&al, a, 2 * U), 0);
	kvr_alloc_stats(&al, &before);
	cr_expect_eq(kvr_alloc_put(&al, a, 2 * U), -EINVAL, "double put");
	cr_expect_eq(kvr_alloc_put(&al, 6 * U, U), -EINVAL, "never allocated");
	cr_expect_eq(kvr_alloc_put(&al, b + U, U), -EINVAL, "middle of extent");
	cr_expect_eq(kvr_alloc_put(&al, b, 3 * U), -EINVAL, "wrong length");
	cr_expect_eq(kvr_alloc_put(&al, b, U), -EINVAL, "short length");
	cr_expect_eq(kvr_alloc_put(&al, b + 1, 2 * U), -EINVAL, "unaligned");
	cr_expect_eq(kvr_alloc_put(&al, b, 0), -EINVAL, "zero length");
	cr_expect_eq(kvr_alloc_put(&al, UINT64_MAX - 63, U), -EINVAL);
	kvr_alloc_stats(&al, &after);
	cr_expect_eq(memcmp(&before, &after, sizeof(before)), 0);
	audit_ok(&al);
	cr_expect_eq(kvr_alloc_put(&al, b, 2 * U - 5), 0, "same rounding");
	audit_ok(&al);
}

/* A length that covers the extent and its used neighbour crosses a
 * boundary: refused, and the neighbour is untouched. */
Test(alloc, put_is_refused_when_length_spans_the_next_used_extent)
{
	uint64_t a, b, c;

	cr_assert_eq(kvr_alloc_init(&al, 10 * U, U), 0);
	cr_assert_eq(kvr_alloc_get(&al, 2 * U, &a), 0);
	cr_assert_eq(kvr_alloc_get(&al, U, &b), 0);
	cr_assert_eq(kvr_alloc_get(&al, 3 * U, &c), 0);
	cr_expect_eq(kvr_alloc_put(&al, a, 3 * U), -EINVAL);
	cr_expect_eq(kvr_alloc_put(&al, b, 4 * U), -EINVAL);
	cr_expect(kvr_alloc_owns(&al, b, U));
	cr_expect(!kvr_alloc_owns(&al, a, 3 * U));
	audit_ok(&al);
	cr_expect_eq(kvr_alloc_put(&al, b, U), 0, "between used: new node");
	audit_ok(&al);
	cr_expect_eq(kvr_alloc_put(&al, c, 3 * U), 0);
	cr_expect_eq(kvr_alloc_put(&al, a, 2 * U), 0);
	cr_expect_eq(kvr_alloc_largest_free(&al), 10 * U);
	audit_ok(&al);
}

Test(alloc, gets_do_not_fail_with_enomem_when_reserved)
{
	uint64_t off;

	cr_assert_eq(kvr_alloc_init(&al, 100000 * U, U), 0);
	cr_assert_eq(kvr_alloc_reserve(&al, 5000), 0);
	for (int i = 0; i < 5000; i++)
		cr_assert_eq(kvr_alloc_get(&al, U, &off), 0);
	audit_ok(&al);
}

/* ---- Random workload against a bitmap model ---- */

#define M_UNITS 2048u

struct model {
	uint8_t used[M_UNITS];
	uint64_t free_units;
};

/* Longest run of free units in the model, and the number of runs. */
static uint64_t model_runs(const struct model *m, uint64_t *nruns)
{
	uint64_t best = 0, run = 0, n = 0;

	for (uint32_t i = 0; i < M_UNITS; i++) {
		if (!m->used[i]) {
			if (run++ == 0)
				n++;
			if (run > best)
				best = run;
		} else {
			run = 0;
		}
	}
	*nruns = n;
	return best;
}

struct live {
	uint64_t off, bytes;
};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

Test(alloc, agrees_with_bitmap_model_when_random_mixed_sizes)
{
	static struct model m;
	static struct live lv[M_UNITS];
	uint32_t nlive = 0;
	uint64_t seed = 0x1234567887654321ull;
	uint64_t nspc = 0, gets = 0;

	memset(&m, 0, sizeof(m));
	m.free_units = M_UNITS;
	cr_assert_eq(kvr_alloc_init(&al, (uint64_t)M_UNITS * U, U), 0);
	for (uint32_t op = 0; op < 120000; op++) {
		uint64_t r = rnd(&seed);
		/* Bias towards gets when little is live, puts when much is. */
		int do_get =
		    nlive == 0 || (r % 100) < (nlive < 200 ? 60u : 45u);

		if (do_get) {
			/* Mixed sizes: mostly small, sometimes large. */
			uint64_t units = (r >> 8) % 8 == 0 ? 1 + (r >> 16) % 200
							   : 1 + (r >> 16) % 12;
			uint64_t bytes = units * U - (r >> 40) % U;
			uint64_t off = 0, nruns;
			int rc = kvr_alloc_get(&al, bytes, &off);

			gets++;
			if (rc == -ENOSPC) {
				nspc++;
				cr_assert_lt(model_runs(&m, &nruns), units,
					     "op %u: ENOSPC for %llu units but "
					     "model has a run that long",
					     op, (unsigned long long)units);
				continue;
			}
			cr_assert_eq(rc, 0, "op %u: get rc %d", op, rc);
			cr_assert_eq(off % U, 0u);
			cr_assert_leq(off / U + units, M_UNITS);
			for (uint64_t u = off / U; u < off / U + units; u++) {
				cr_assert(!m.used[u],
					  "op %u: unit %llu given "
					  "twice",
					  op, (unsigned long long)u);
				m.used[u] = 1;
			}
			m.free_units -= units;
			lv[nlive].off = off;
			lv[nlive].bytes = bytes;
			nlive++;
		} else {
			uint32_t i = (uint32_t)((r >> 8) % nlive);
			uint64_t units = (lv[i].bytes + U - 1) / U;

			cr_assert_eq(kvr_alloc_put(&al, lv[i].off, lv[i].bytes),
				     0, "op %u", op);
			for (uint64_t u = lv[i].off / U;
			     u < lv[i].off / U + units; u++)
				m.used[u] = 0;
			m.free_units += units;
			/* A second put of the same extent is refused. */
			if ((r >> 20) % 16 == 0)
				cr_assert_eq(
				    kvr_alloc_put(&al, lv[i].off, lv[i].bytes),
				    -EINVAL);
			lv[i] = lv[--nlive];
		}
		cr_assert_eq(kvr_alloc_free_bytes(&al), m.free_units * U,
			     "op %u", op);
		if (op % 97 == 0) {
			struct kvr_alloc_stats st;
			uint64_t nruns, best = model_runs(&m, &nruns);

			kvr_alloc_stats(&al, &st);
			cr_assert_eq(st.largest_free_bytes, best * U, "op %u",
				     op);
			cr_assert_eq(st.free_extents, nruns, "op %u", op);
			audit_ok(&al);
		}
	}
	/* The workload must really have hit the full-pool case. */
	cr_expect_gt(nspc, 100u, "only %llu ENOSPC in %llu gets",
		     (unsigned long long)nspc, (unsigned long long)gets);
	while (nlive) {
		nlive--;
		cr_assert_eq(kvr_alloc_put(&al, lv[nlive].off, lv[nlive].bytes),
			     0);
	}
	cr_expect_eq(kvr_alloc_free_bytes(&al), (uint64_t)M_UNITS * U);
	cr_expect_eq(kvr_alloc_largest_free(&al), (uint64_t)M_UNITS * U);
	audit_ok(&al);
}

Test(alloc, scales_when_pool_is_64gib_with_many_objects)
{
	const uint64_t pool = 64ull << 30, n = 200000;
	uint64_t *offs = malloc(n * sizeof(*offs));
	struct kvr_alloc_stats st;

	cr_assert(offs);
	cr_assert_eq(kvr_alloc_init(&al, pool, 4096), 0);
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(kvr_alloc_get(&al, 4096 * (1 + i % 64), &offs[i]),
			     0);
	/* Free every other one: 100k holes, none merge. */
	for (uint64_t i = 0; i < n; i += 2)
		cr_assert_eq(kvr_alloc_put(&al, offs[i], 4096 * (1 + i % 64)),
			     0);
	kvr_alloc_stats(&al, &st);
	cr_expect_eq(st.free_extents, n / 2 + 1);
	audit_ok(&al);
	for (uint64_t i = 1; i < n; i += 2)
		cr_assert_eq(kvr_alloc_put(&al, offs[i], 4096 * (1 + i % 64)),
			     0);
	kvr_alloc_stats(&al, &st);
	cr_expect_eq(st.free_extents, 1u);
	cr_expect_eq(st.free_bytes, pool);
	free(offs);
}

/*
 * The zeroed-line preference (prefer_below): a best fit above the line
 * gives way to the lowest free extent below it that is large enough; with
 * no such extent, or with the preference off, the best fit stands.
 */
Test(alloc, get_places_below_line_when_best_fit_lies_above_it)
{
	uint64_t a0, b, c, d, off;

	cr_assert_eq(kvr_alloc_init(&al, 256 * U, U), 0);
	cr_assert_eq(kvr_alloc_get(&al, 16 * U, &a0), 0); /* [0, 16) */
	cr_assert_eq(kvr_alloc_get(&al, U, &b), 0);	  /* [16, 17) */
	cr_assert_eq(kvr_alloc_get(&al, U, &c), 0);	  /* [17, 18) */
	cr_assert_eq(kvr_alloc_get(&al, U, &d), 0);	  /* [18, 19) */
	cr_assert_eq(kvr_alloc_put(&al, a0, 16 * U), 0);
	cr_assert_eq(kvr_alloc_put(&al, c, U), 0);
	/* Holes [0, 16) and [17, 18); the exact fit is the one at 17. */
	kvr_alloc_prefer_below(&al, 10 * U);
	cr_assert_eq(kvr_alloc_get(&al, U, &off), 0);
	cr_expect_eq(off, 0, "1 unit at unit %llu, line at 10",
		     (unsigned long long)(off / U));
	audit_ok(&al);
	/* 12 units do not fit below the line: best fit, [1, 13). */
	cr_assert_eq(kvr_alloc_get(&al, 12 * U, &off), 0);
	cr_expect_eq(off, U, "12 units at unit %llu",
		     (unsigned long long)(off / U));
	/* Off again (0, or a line past the end): exact best fit. */
	kvr_alloc_prefer_below(&al, 0);
	cr_assert_eq(kvr_alloc_get(&al, U, &off), 0);
	cr_expect_eq(off, 17 * U, "1 unit at unit %llu with no line",
		     (unsigned long long)(off / U));
	audit_ok(&al);
}

Test(alloc, get_is_best_fit_when_line_is_past_the_end)
{
	uint64_t a0, b, off;

	cr_assert_eq(kvr_alloc_init(&al, 64 * U, U), 0);
	cr_assert_eq(kvr_alloc_get(&al, 8 * U, &a0), 0);
	cr_assert_eq(kvr_alloc_get(&al, U, &b), 0);
	cr_assert_eq(kvr_alloc_put(&al, a0, 8 * U), 0);
	/* Holes [0, 8) and [9, 64): best fit for 2 units is at 0 anyway;
	 * for 9 it is the tail, and a line at the end changes neither. */
	kvr_alloc_prefer_below(&al, 64 * U);
	cr_assert_eq(kvr_alloc_get(&al, 9 * U, &off), 0);
	cr_expect_eq(off, 9 * U);
	cr_assert_eq(kvr_alloc_get(&al, 2 * U, &off), 0);
	cr_expect_eq(off, 0);
	audit_ok(&al);
}
