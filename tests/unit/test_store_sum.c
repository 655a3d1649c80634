/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the storage engine's per-chunk checksums (store_sum.c):
 * sums given to a store transfer come back with every retrieve of its
 * objects (keys or lease), a wrong count changes nothing, and an object
 * found corrupt is hidden at once, stays readable to whoever still pins
 * it, and is freed with its last pin. The audit runs after each step.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <kvring/store.h>

#define U 64u

static struct kvr_store *s;

static void setup(void)
{
	struct kvr_store_config c = {
	    .pool_bytes = 64 * U,
	    .align = U,
	    .max_channels = 4,
	    .max_keys = 16,
	    .hash_seed = 0x5eed,
	    .max_ns = 4,
	};

	cr_assert_eq(kvr_store_create(&c, &s), 0);
}

static void teardown(void)
{
	kvr_store_destroy(s);
	s = NULL;
}

TestSuite(store_sum, .init = setup, .fini = teardown, .timeout = 30);

static struct kvr_key K(uint64_t i) {
	struct kvr_key k = {i * 0x9E3779B97F4A7C15ull + 7, i ^ 0x1234};

	return k;
}

static void
audit(void)
{
	char msg[256];
	int rc = kvr_store_audit(s, msg, sizeof(msg));

	cr_assert_eq(rc, 0, "audit: %s", msg);
}

/* Store keys 0..n-1 (U bytes each) with sums 100+i from channel 0. */
static void store_summed(uint32_t n)
{
	struct kvr_key k[8];
	uint64_t sz[8], sums[8], x;
	struct kvr_slot_desc d[8];

	for (uint32_t i = 0; i < n; i++) {
		k[i] = K(i);
		sz[i] = U;
		sums[i] = 100 + i;
	}
	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, k, sz, n, 1, d, &x),
		     (int)n);
	cr_assert_eq(kvr_store_set_sums(s, 0, x, sums, n), 0);
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 2), 0);
	audit();
}

static uint64_t dropped(void)
{
	struct kvr_store_stats st;

	kvr_store_stats(s, &st);
	return st.corrupt_dropped;
}

Test(store_sum, retrieve_hands_back_the_sums_when_stored_with_them)
{
	struct kvr_key k[3] = {K(0), K(1), K(2)};
	struct kvr_slot_desc d[3];
	uint64_t x, lease;

	store_summed(3);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, k, 3, 3, d, &x), 3);
	for (int i = 0; i < 3; i++) {
		cr_expect_eq(d[i].reserved, KVR_SLOT_F_SUM, "slot %d", i);
		cr_expect_eq(kvr_store_last_sums(s)[i], 100u + (unsigned)i);
	}
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, x, 4), 0);
	/* The lease path too. */
	cr_assert_eq(kvr_store_lookup(s, 1, 0, k, 3, true, 5, &lease), 3);
	cr_assert_eq(
	    kvr_store_prepare_retrieve_lease(s, 1, lease, 6, d, 16, &x), 3);
	cr_expect_eq(kvr_store_last_sums(s)[2], 102u);
	cr_expect_eq(d[2].reserved, KVR_SLOT_F_SUM);
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, x, 7), 0);
	audit();
}

Test(store_sum, set_sums_changes_nothing_when_the_count_is_wrong)
{
	struct kvr_key k[2] = {K(0), K(1)};
	uint64_t sz[2] = {U, U}, sums[2] = {1, 2}, x, y;
	struct kvr_slot_desc d[2];

	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 2, 1, d, &x), 2);
	cr_expect_eq(kvr_store_set_sums(s, 0, x, sums, 1), -EINVAL);
	cr_expect_eq(kvr_store_set_sums(s, 1, x, sums, 2), -ENOENT,
		     "another channel's transfer");
	cr_expect_eq(kvr_store_set_sums(s, 0, x + 1, sums, 2), -ENOENT);
	audit();
	/* Still open, still unsummed: a plain commit stores it unsummed. */
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 2), 0);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 0, 0, k, 2, 3, d, &y), 2);
	cr_expect_eq(d[0].reserved, 0u);
	cr_expect_eq(d[1].reserved, 0u);
	cr_assert_eq(kvr_store_commit_retrieve(s, 0, y, 4), 0);
	audit();
}

Test(store_sum, corrupt_object_is_hidden_at_once_and_freed_with_its_last_pin)
{
	struct kvr_key k[3] = {K(0), K(1), K(2)};
	struct kvr_slot_desc d[3], e[3];
	uint64_t x, y, len, sum, lease, sz = U;
	struct kvr_store_stats st;

	store_summed(3);
	/* Two holders of object 1: a retrieve of channel 1, a lease of 2. */
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, k, 3, 3, d, &x), 3);
	cr_assert_eq(kvr_store_lookup(s, 2, 0, k, 3, true, 3, &lease), 3);
	cr_assert_eq(kvr_store_xfer_sum(s, 1, x, d[1].off, &len, &sum), 0);
	cr_expect_eq(len, U);
	cr_expect_eq(sum, 101u);
	cr_expect_eq(kvr_store_xfer_sum(s, 2, x, d[1].off, &len, &sum), -ENOENT,
		     "not channel 2's transfer");
	cr_expect_eq(kvr_store_xfer_sum(s, 1, x, d[1].off + 1, &len, &sum),
		     -ENOENT, "no object there");

	cr_assert_eq(kvr_store_drop_corrupt(s, 1, x, d[1].off), 0);
	cr_expect_eq(kvr_store_drop_corrupt(s, 1, x, d[1].off), -EALREADY);
	cr_expect_eq(dropped(), 1u);
	audit();
	/* Hidden: lookups stop before it, a store of its key is BUSY. */
	cr_expect_eq(kvr_store_lookup(s, 3, 0, k, 3, false, 4, NULL), 1);
	cr_assert_eq(kvr_store_prepare_store(s, 3, 0, &k[1], &sz, 1, 4, e, &y),
		     0);
	cr_expect_eq(e[0].status, KVR_SLOT_BUSY);

	/* The retrieve ends: the lease still pins it, so it stays. */
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, x, 5), 0);
	audit();
	kvr_store_stats(s, &st);
	cr_expect_eq(st.objects, 3u);
	/* The lease goes: its last pin, so its slot is freed. */
	cr_assert_eq(kvr_store_release_lease(s, 2, lease, 6), 0);
	audit();
	kvr_store_stats(s, &st);
	cr_expect_eq(st.objects, 2u);
	cr_expect_eq(st.pinned_objects, 0u);
	/* And the key can be stored anew. */
	cr_assert_eq(kvr_store_prepare_store(s, 3, 0, &k[1], &sz, 1, 7, e, &y),
		     1);
	cr_expect_eq(e[0].status, KVR_SLOT_OK);
	cr_assert_eq(kvr_store_commit_store(s, 3, y, 8), 0);
	cr_expect_eq(kvr_store_lookup(s, 3, 0, k, 3, false, 9, NULL), 3);
	audit();
}

Test(store_sum, channel_close_frees_a_corrupt_object_it_pinned)
{
	struct kvr_key k[2] = {K(0), K(1)};
	struct kvr_slot_desc d[2];
	struct kvr_store_stats st;
	uint64_t x;

	store_summed(2);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, k, 2, 3, d, &x), 2);
	cr_assert_eq(kvr_store_drop_corrupt(s, 1, x, d[0].off), 0);
	cr_assert_eq(kvr_store_channel_close(s, 1, 4, NULL), 0);
	audit();
	kvr_store_stats(s, &st);
	cr_expect_eq(st.objects, 1u);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, k, 2, false, 5, NULL), 0);
}
