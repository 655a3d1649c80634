/* SPDX-License-Identifier: MIT */
/*
 * test_store_stage.c - store-ahead in the storage engine
 * (server/store/store_stage.c): a staged slot is a reservation like any
 * other (counted, quota-checked, freed by abort, close and expiry, never
 * published by them), commit_store refuses it until kvr_store_bind() gives
 * it a key, and a bind of a key already stored is rule 1's no-op that
 * leaves the slot staged. The audit runs after every step that changes
 * state.
 */
#include <errno.h>

#include <criterion/criterion.h>

#include <kvring/proto.h>
#include <kvring/store.h>

#include "store_suite.h"

static void setup(void)
{
	struct kvr_store_config c = store_config(16);

	store_create(&c);
	cr_assert_eq(kvr_store_channel_open(s, 0, 0, 1000), 0);
	cr_assert_eq(kvr_store_channel_open(s, 1, 0, 1000), 0);
}

TestSuite(store_stage, .init = setup, .fini = teardown, .timeout = 10);

/* Stage one slot of @len bytes on @ch; fails the test if none. */
static uint64_t stage(uint32_t ch, uint64_t len, struct kvr_slot_desc *d)
{
	uint64_t id = 0;
	int rc = kvr_store_stage(s, ch, 0, len, 0, d, &id);

	cr_assert_eq(rc, 1, "stage: %d (slot status %d)", rc, d->status);
	cr_assert_neq(id, 0);
	cr_assert_eq(d->status, KVR_SLOT_OK);
	cr_assert_eq(d->len, len);
	audit();
	return id;
}

/* A one-key store through the usual two calls. */
static void store_key(uint32_t ch, struct kvr_key k, uint64_t len)
{
	struct kvr_slot_desc d;
	uint64_t id;

	cr_assert_eq(kvr_store_prepare_store(s, ch, 0, &k, &len, 1, 0, &d, &id),
		     1);
	cr_assert_eq(kvr_store_commit_store(s, ch, id, 0), 0);
	audit();
}

static int lookup(uint32_t ch, struct kvr_key k)
{
	return kvr_store_lookup(s, ch, 0, &k, 1, false, 0, NULL);
}

Test(store_stage, holds_a_counted_reservation_when_staged)
{
	struct kvr_store_chan_stats cs;
	struct kvr_slot_desc d;

	stage(0, 3 * U, &d);
	cr_assert_eq(kvr_store_chan_stats(s, 0, &cs), 0);
	cr_expect_eq(cs.reserved_bytes, 3 * U);
	cr_expect_eq(cs.transfers_open, 1u);
	cr_expect_eq(stats().reserved_bytes, 3 * U);
	cr_expect_eq(stats().objects, 0u, "a staged slot is not an object");
	cr_expect_eq(stats().stages, 1u);
}

Test(store_stage, commit_store_refuses_it_when_not_bound)
{
	struct kvr_slot_desc d;
	uint64_t id = stage(0, 2 * U, &d);

	cr_expect_eq(kvr_store_commit_store(s, 0, id, 0), -EINVAL);
	audit();
	cr_expect_eq(stats().objects, 0u, "nothing was published");
	cr_expect_eq(stats().reserved_bytes, 2 * U, "and it stays staged");
}

Test(store_stage, publishes_the_key_when_bound_and_committed)
{
	struct kvr_slot_desc d;
	uint64_t id = stage(0, 2 * U, &d);

	cr_assert_eq(lookup(1, K(7)), 0);
	cr_assert_eq(kvr_store_bind(s, 0, id,
				    &(struct kvr_key){K(7).lo, K(7).hi},
				    2 * U - 5),
		     KVR_SLOT_OK);
	audit();
	cr_expect_eq(lookup(1, K(7)), 0, "bound but not committed: unseen");
	cr_assert_eq(kvr_store_commit_store(s, 0, id, 0), 0);
	audit();
	cr_expect_eq(lookup(1, K(7)), 1, "another channel sees it");
	cr_expect_eq(stats().reserved_bytes, 0u);
	cr_expect_eq(stats().objects, 1u);
	cr_expect_eq(stats().binds, 1u);
}

Test(store_stage, bind_is_a_no_op_when_the_key_is_stored)
{
	struct kvr_slot_desc d, d2;
	uint64_t id, dl;
	struct kvr_key k = K(3);

	store_key(1, k, 2 * U);
	id = stage(0, 2 * U, &d);
	cr_expect_eq(kvr_store_bind(s, 0, id, &k, 2 * U), KVR_SLOT_EXISTS);
	audit();
	cr_expect_eq(stats().objects, 1u);
	cr_expect_eq(stats().binds_existing, 1u);
	/* The slot is still staged, where it was, for the next store. */
	cr_assert_eq(kvr_store_stage_desc(s, 0, id, &d2, &dl), 0);
	cr_expect_eq(d2.off, d.off);
	cr_expect_eq(kvr_store_commit_store(s, 0, id, 0), -EINVAL);
}

Test(store_stage, bind_says_busy_when_another_transfer_reserves_the_key)
{
	struct kvr_slot_desc d, r;
	struct kvr_key k = K(4);
	uint64_t id, other, len = 2 * U;

	cr_assert_eq(
	    kvr_store_prepare_store(s, 1, 0, &k, &len, 1, 0, &r, &other), 1);
	id = stage(0, len, &d);
	cr_expect_eq(kvr_store_bind(s, 0, id, &k, len), KVR_SLOT_BUSY);
	audit();
}

Test(store_stage, bind_refuses_a_size_or_id_it_cannot_take)
{
	struct kvr_slot_desc d;
	struct kvr_key k = K(5);
	uint64_t id = stage(0, 2 * U, &d);

	cr_expect_eq(kvr_store_bind(s, 0, id, &k, 2 * U + 1), -EINVAL,
		     "larger than staged");
	cr_expect_eq(kvr_store_bind(s, 0, id, &k, U), -EINVAL,
		     "another rounded size");
	cr_expect_eq(kvr_store_bind(s, 0, id, &k, 0), -EINVAL);
	cr_expect_eq(kvr_store_bind(s, 1, id, &k, 2 * U), -ENOENT,
		     "another channel's staged slot is unknown to it");
	cr_expect_eq(kvr_store_bind(s, 0, id ^ 1, &k, 2 * U), -ENOENT);
	audit();
	cr_expect_eq(lookup(0, k), 0);
	cr_expect_eq(stats().reserved_bytes, 2 * U, "still staged");
}

Test(store_stage, bind_refuses_a_plain_store_transfer)
{
	struct kvr_slot_desc d;
	struct kvr_key k = K(6), k2 = K(60);
	uint64_t id, len = U;

	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, &k, &len, 1, 0, &d, &id),
		     1);
	cr_expect_eq(kvr_store_bind(s, 0, id, &k2, U), -EINVAL);
	audit();
	cr_expect_eq(kvr_store_commit_store(s, 0, id, 0), 0);
	cr_expect_eq(lookup(0, k), 1);
	cr_expect_eq(lookup(0, k2), 0);
}

Test(store_stage, channel_close_frees_it_when_never_bound)
{
	struct kvr_store_released rel;
	struct kvr_slot_desc d;

	stage(0, 4 * U, &d);
	cr_assert_eq(kvr_store_channel_close(s, 0, 0, &rel), 0);
	audit();
	cr_expect_eq(rel.store_xfers, 1u);
	cr_expect_eq(stats().reserved_bytes, 0u);
	cr_expect_eq(stats().used_bytes, 0u, "the slot went back to the pool");
	cr_expect_eq(stats().objects, 0u);
}

Test(store_stage, abort_frees_it_and_publishes_nothing)
{
	struct kvr_slot_desc d;
	uint64_t id = stage(0, 4 * U, &d);

	cr_assert_eq(kvr_store_abort_store(s, 0, id, 0), 0);
	audit();
	cr_expect_eq(stats().used_bytes, 0u);
	cr_expect_eq(stats().objects, 0u);
}

Test(store_stage, expiry_quarantines_it_until_the_late_abort)
{
	struct kvr_store_config c = store_config(16);
	struct kvr_slot_desc d;
	struct kvr_key k = K(8);
	uint64_t id = 0;

	teardown();
	c.xfer_ms = 50;
	store_create(&c);
	cr_assert_eq(kvr_store_stage(s, 0, 0, 2 * U, 1 * MS, &d, &id), 1);
	cr_assert_eq(kvr_store_expire(s, 100 * MS, 0), 1);
	audit();
	cr_expect_eq(stats().store_xfers_expired, 1u);
	cr_expect_eq(stats().staged, 0u);
	cr_expect_eq(stats().quar_bytes, 2 * U, "the worker may be copying");
	cr_expect_eq(stats().objects, 0u, "expiry never publishes");
	/* The early bind comes during the copy: not an answer. */
	cr_expect_eq(kvr_store_bind(s, 0, id, &k, 2 * U), KVR_ERR_EXPIRED);
	cr_expect_eq(stats().quar_bytes, 2 * U);
	cr_expect_eq(lookup(0, k), 0);
	cr_expect_eq(kvr_store_abort_store(s, 0, id, 101 * MS),
		     KVR_ERR_EXPIRED);
	cr_expect_eq(stats().used_bytes, 0u);
	cr_expect_eq(stats().quar_released[0], 1u);
	audit();
}

Test(store_stage, stages_nothing_when_the_quota_forbids_it)
{
	struct kvr_store_config c = store_config(16);
	struct kvr_slot_desc d;
	uint64_t id = 0;

	teardown();
	c.quota_reserved_bytes = 2 * U;
	store_create(&c);
	cr_expect_eq(kvr_store_stage(s, 0, 0, 3 * U, 0, &d, &id), 0);
	cr_expect_eq(d.status, KVR_SLOT_QUOTA);
	cr_expect_eq(id, 0u);
	audit();
	cr_expect_eq(stats().reserved_bytes, 0u);
	cr_expect_eq(stats().stages, 0u);
}

Test(store_stage, stages_nothing_when_the_pool_is_all_reserved)
{
	struct kvr_slot_desc d;
	struct kvr_key k = K(9);
	uint64_t id = 0, other, len = 16 * U;

	cr_assert_eq(
	    kvr_store_prepare_store(s, 1, 0, &k, &len, 1, 0, &d, &other), 1);
	cr_expect_eq(kvr_store_stage(s, 0, 0, U, 0, &d, &id), 0);
	cr_expect_eq(d.status, KVR_SLOT_NOROOM);
	audit();
}

Test(store_stage, evicts_like_a_store_when_the_pool_is_full_of_objects)
{
	struct kvr_slot_desc d;

	for (uint64_t i = 0; i < 4; i++)
		store_key(1, K(100 + i), 4 * U);
	stage(0, 4 * U, &d);
	cr_expect_eq(stats().evictions, 1u);
	cr_expect_eq(lookup(0, K(100)), 0, "the least recent went");
}

Test(store_stage, keeps_the_sum_given_after_the_bind)
{
	struct kvr_slot_desc d;
	struct kvr_key k = K(11);
	uint64_t id = stage(0, U, &d), sum = 0x1234, tx;
	struct kvr_slot_desc out;
	uint32_t flags;

	cr_assert_eq(kvr_store_bind(s, 0, id, &k, U), KVR_SLOT_OK);
	cr_assert_eq(kvr_store_set_sums(s, 0, id, &sum, 1), 0);
	cr_assert_eq(kvr_store_commit_store(s, 0, id, 0), 0);
	audit();
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, &k, 1, 0, &out, &tx),
		     1);
	flags = out.reserved;
	cr_expect(flags & KVR_SLOT_F_SUM);
	cr_expect_eq(kvr_store_last_sums(s)[0], sum);
}

Test(store_stage, has_a_limit_of_its_own_beside_the_transfer_limit)
{
	struct kvr_slot_desc d;
	struct kvr_key k = K(20);
	uint64_t id = 0, xf, len = U;

	stage(0, U, &d);
	stage(0, U, &d);
	cr_expect_eq(kvr_store_stage(s, 0, 0, U, 0, &d, &id), -EBUSY,
		     "at most KVR_STORE_MAX_STAGED");
	/* The channel keeps its full limit of 4 transfers for its own. */
	for (uint64_t i = 0; i < 4; i++) {
		k = K(20 + i);
		cr_expect_eq(
		    kvr_store_prepare_store(s, 0, 0, &k, &len, 1, 0, &d, &xf),
		    1, "transfer %llu", (unsigned long long)i);
	}
	k = K(30);
	cr_expect_eq(kvr_store_prepare_store(s, 0, 0, &k, &len, 1, 0, &d, &xf),
		     -EBUSY);
	audit();
}

Test(store_stage, cannot_be_found_even_by_its_placeholder_key)
{
	/* The first placeholder: sequence 1 under "kvrstage" (store_stage.c).
	 */
	struct kvr_key ph = {1, 0x6576617473727668ull};
	struct kvr_slot_desc d, r;
	uint64_t len = U, xf;

	stage(0, U, &d);
	cr_expect_eq(lookup(0, ph), 0);
	/* Nor does it block a store of that key: the key is not taken. */
	cr_expect_eq(kvr_store_prepare_store(s, 0, 0, &ph, &len, 1, 0, &r, &xf),
		     1);
	cr_expect_eq(r.status, KVR_SLOT_OK);
	audit();
}
