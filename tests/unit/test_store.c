/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of server/store*.c, kvringd's storage engine: the object state
 * machine, idempotent stores, aborts and channel close never publishing,
 * owned pins and leases, exact LRU eviction, limits and bad ids changing
 * nothing, and a long random multi-channel run audited after every step.
 * Pool sizes are counted in units of U bytes so expectations are exact.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store_suite.h"

TestSuite(store, .fini = teardown, .timeout = 60);

static void mk(uint64_t units)
{
	struct kvr_store_config c = store_config(units);

	store_create(&c);
}

/* Prepare one key; return its slot, xfer in *xfer. */
static struct kvr_slot_desc prep1(uint32_t ch, uint32_t ns, uint64_t i,
				  uint64_t bytes, uint64_t *xfer)
{
	struct kvr_key k = K(i);
	struct kvr_slot_desc d;
	int rc = kvr_store_prepare_store(s, ch, ns, &k, &bytes, 1, 0, &d, xfer);

	cr_assert_geq(rc, 0, "prepare_store rc %d", rc);
	return d;
}

/* Store and commit one key of @bytes; assert it got a slot. */
static uint64_t store1(uint32_t ch, uint64_t i, uint64_t bytes)
{
	uint64_t x;
	struct kvr_slot_desc d = prep1(ch, 0, i, bytes, &x);

	cr_assert_eq(d.status, KVR_SLOT_OK, "key %llu status %d",
		     (unsigned long long)i, d.status);
	cr_assert_eq(kvr_store_commit_store(s, ch, x, 0), 0);
	audit();
	return d.off;
}

/* Is key i committed (lookup of one key, no pin)? */
static int has(uint32_t ns, uint64_t i)
{
	struct kvr_key k = K(i);

	return kvr_store_lookup(s, 0, ns, &k, 1, false, 0, NULL);
}

/* ---- State machine ---- */

Test(store, reserved_is_invisible_until_commit_when_storing)
{
	struct kvr_slot_desc d, r[1];
	struct kvr_key k = K(1);
	uint64_t x, rx;

	mk(10);
	d = prep1(0, 0, 1, 100, &x);
	cr_assert_eq(d.status, KVR_SLOT_OK);
	cr_expect_neq(x, 0u);
	cr_expect_eq(d.len, 100u, "len is the requested size");
	cr_expect_eq(d.off % U, 0u);
	audit();
	cr_expect_eq(has(0, 1), 0, "reserved object readable");
	cr_expect_eq(kvr_store_prepare_retrieve(s, 1, 0, &k, 1, 0, r, &rx), 0);
	cr_expect_eq(rx, 0u);
	cr_expect_eq(stats().reserved_objects, 1u);
	cr_expect_eq(stats().reserved_bytes, 2 * U);
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	audit();
	cr_expect_eq(has(0, 1), 1);
	cr_expect_eq(stats().objects, 1u);
	cr_expect_eq(stats().committed_bytes, 2 * U);
	cr_expect_eq(stats().reserved_bytes, 0u);
	cr_expect_eq(kvr_store_commit_store(s, 0, x, 0), -ENOENT,
		     "transfer survives commit");
}

Test(store, retrieve_returns_committed_slots_when_prefix_hits)
{
	struct kvr_key k[3] = {K(1), K(2), K(3)};
	struct kvr_slot_desc r[3];
	uint64_t o1, o2, rx;

	mk(10);
	o1 = store1(0, 1, 64);
	o2 = store1(0, 2, 65);
	memset(r, 0xee, sizeof(r));
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, k, 3, 0, r, &rx), 2);
	cr_expect_eq(r[0].off, o1);
	cr_expect_eq(r[0].len, 64u);
	cr_expect_eq(r[1].off, o2);
	cr_expect_eq(r[1].len, 65u);
	cr_expect_eq(r[0].status, KVR_SLOT_OK);
	cr_expect_eq(r[2].off, 0xeeeeeeeeeeeeeeeeull, "slot past hits written");
	cr_expect_eq(stats().pins, 2u);
	audit();
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, rx, 0), 0);
	cr_expect_eq(stats().pins, 0u);
	audit();
}

Test(store, lookup_counts_longest_prefix_when_gap_in_middle)
{
	struct kvr_key k[4] = {K(1), K(2), K(3), K(4)};

	mk(10);
	store1(0, 1, 64);
	store1(0, 2, 64);
	store1(0, 4, 64);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, k, 4, false, 0, NULL), 2);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, k + 2, 2, false, 0, NULL), 0);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, k, 0, false, 0, NULL), 0);
}

/* ---- Rule 1: idempotent store ---- */

Test(store, second_store_is_noop_success_when_keys_exist)
{
	struct kvr_key k[2] = {K(1), K(2)};
	uint64_t sz[2] = {100, 200}, x;
	struct kvr_slot_desc d[2];
	struct kvr_store_stats before;

	mk(10);
	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 2, 0, d, &x), 2);
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	before = stats();
	cr_assert_eq(kvr_store_prepare_store(s, 1, 0, k, sz, 2, 0, d, &x), 0);
	cr_expect_eq(d[0].status, KVR_SLOT_EXISTS);
	cr_expect_eq(d[1].status, KVR_SLOT_EXISTS);
	cr_expect_eq(x, 0u, "a transfer for nothing would leak");
	cr_expect_eq(stats().used_bytes, before.used_bytes);
	cr_expect_eq(stats().transfers, 0u);
	cr_expect_eq(stats().stores_skipped_existing, 2u);
	/* The worker may still call commit/abort with id 0: no-op success. */
	cr_expect_eq(kvr_store_commit_store(s, 1, 0, 0), 0);
	cr_expect_eq(kvr_store_abort_store(s, 1, 0, 0), 0);
	cr_expect_eq(kvr_store_commit_retrieve(s, 1, 0, 0), 0);
	audit();
}

Test(store, key_reserved_elsewhere_is_busy_when_stored_again)
{
	uint64_t x0, x1;
	struct kvr_slot_desc d;

	mk(10);
	d = prep1(0, 0, 1, 64, &x0);
	cr_assert_eq(d.status, KVR_SLOT_OK);
	d = prep1(1, 0, 1, 64, &x1);
	cr_expect_eq(d.status, KVR_SLOT_BUSY);
	cr_expect_eq(x1, 0u);
	d = prep1(0, 0, 1, 64, &x1);
	cr_expect_eq(d.status, KVR_SLOT_BUSY, "same channel, other transfer");
	cr_expect_eq(stats().reserved_objects, 1u);
	audit();
}

Test(store, duplicate_keys_get_one_slot_when_in_one_request)
{
	struct kvr_key k[3] = {K(1), K(1), K(2)};
	uint64_t sz[3] = {64, 64, 64}, x;
	struct kvr_slot_desc d[3];

	mk(10);
	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 3, 0, d, &x), 2);
	cr_expect_eq(d[0].status, KVR_SLOT_OK);
	cr_expect_eq(d[1].status, KVR_SLOT_BUSY);
	cr_expect_eq(d[2].status, KVR_SLOT_OK);
	cr_expect_eq(stats().used_bytes, 2 * U, "no double allocation");
	audit();
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	audit();
}

Test(store, duplicate_keys_pin_once_when_in_one_lookup)
{
	struct kvr_key k[3] = {K(1), K(1), K(2)};
	struct kvr_slot_desc r[3];
	uint64_t lease, rx;

	mk(10);
	store1(0, 1, 64);
	store1(0, 2, 64);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, k, 3, true, 0, &lease), 3);
	cr_expect_eq(stats().pins, 2u);
	audit();
	cr_assert_eq(
	    kvr_store_prepare_retrieve_lease(s, 1, lease, 0, r, 3, &rx), 2);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 2, 0, k, 3, 0, r, &rx), 3);
	cr_expect_eq(stats().pins, 4u);
	audit();
}

Test(store, sizes_zero_or_above_pool_are_invalid_when_preparing)
{
	struct kvr_key k[3] = {K(1), K(2), K(3)};
	uint64_t sz[3] = {0, 10 * U + 1, 10 * U}, x;
	struct kvr_slot_desc d[3];

	mk(10);
	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 3, 0, d, &x), 1);
	cr_expect_eq(d[0].status, KVR_SLOT_INVALID);
	cr_expect_eq(d[1].status, KVR_SLOT_INVALID);
	cr_expect_eq(d[2].status, KVR_SLOT_OK, "exactly the pool fits");
	cr_expect_eq(d[2].off, 0u);
	cr_expect_eq(stats().invalid_sizes, 2u);
	audit();
}

Test(store, namespaces_isolate_identical_keys_when_storing)
{
	uint64_t x;
	struct kvr_slot_desc d;

	mk(10);
	store1(0, 1, 64);
	cr_expect_eq(has(0, 1), 1);
	cr_expect_eq(has(7, 1), 0);
	d = prep1(0, 7, 1, 64, &x);
	cr_expect_eq(d.status, KVR_SLOT_OK, "ns 7 is another key space");
	cr_assert_eq(kvr_store_abort_store(s, 0, x, 0), 0);
	cr_expect_eq(has(0, 1), 1);
	audit();
}

/* ---- Abort and close never publish ---- */

Test(store, abort_frees_and_never_publishes_when_called)
{
	uint64_t x;
	struct kvr_slot_desc d;

	mk(10);
	d = prep1(0, 0, 1, 3 * U, &x);
	cr_assert_eq(d.status, KVR_SLOT_OK);
	cr_assert_eq(kvr_store_abort_store(s, 0, x, 0), 0);
	cr_expect_eq(has(0, 1), 0);
	cr_expect_eq(stats().used_bytes, 0u);
	cr_expect_eq(kvr_store_commit_store(s, 0, x, 0), -ENOENT);
	cr_expect_eq(kvr_store_abort_store(s, 0, x, 0), -ENOENT);
	cr_expect_eq(has(0, 1), 0, "commit after abort published");
	audit();
	/* The key can be stored afresh. */
	d = prep1(0, 0, 1, 3 * U, &x);
	cr_expect_eq(d.status, KVR_SLOT_OK);
}

Test(store, close_frees_reservations_and_drops_pins_when_channel_dies)
{
	struct kvr_key k[2] = {K(1), K(2)};
	struct kvr_slot_desc r[2];
	struct kvr_store_released rel;
	struct kvr_store_chan_stats cs;
	uint64_t x, rx, lease;

	mk(10);
	store1(0, 1, 64);
	store1(0, 2, 64);
	/* Channel 1: a reservation, a retrieve transfer, a lease. */
	cr_assert_eq(prep1(1, 0, 3, 2 * U, &x).status, KVR_SLOT_OK);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, k, 2, 5, r, &rx), 2);
	cr_assert_eq(kvr_store_lookup(s, 1, 0, k, 1, true, 0, &lease), 1);
	cr_assert_eq(kvr_store_chan_stats(s, 1, &cs), 0);
	cr_expect_eq(cs.reserved_bytes, 2 * U);
	cr_expect_eq(cs.pins_held, 3u);
	cr_expect_eq(cs.leases_owned, 1u);
	cr_expect_eq(cs.transfers_open, 2u);
	audit();
	cr_assert_eq(kvr_store_channel_close(s, 1, 0, &rel), 0);
	cr_expect_eq(rel.store_xfers, 1u);
	cr_expect_eq(rel.retrieve_xfers, 1u);
	cr_expect_eq(rel.leases, 1u);
	cr_expect_eq(rel.objects_freed, 1u);
	cr_expect_eq(rel.bytes_freed, 2 * U);
	cr_expect_eq(rel.pins_dropped, 3u);
	cr_expect_eq(has(0, 3), 0, "close published a reservation");
	cr_expect_eq(stats().pins, 0u);
	cr_expect_eq(stats().used_bytes, 2 * U);
	cr_expect_eq(kvr_store_commit_store(s, 1, x, 0), -ENOENT);
	cr_expect_eq(kvr_store_commit_retrieve(s, 1, rx, 0), -ENOENT);
	cr_expect_eq(kvr_store_release_lease(s, 1, lease, 0), -ENOENT);
	audit();
	/* Rule 2: closing twice is harmless. */
	cr_assert_eq(kvr_store_channel_close(s, 1, 0, &rel), 0);
	cr_expect_eq(rel.objects_freed + rel.pins_dropped + rel.leases, 0u);
	cr_assert_eq(kvr_store_channel_close(s, 1, 0, NULL), 0);
	cr_assert_eq(kvr_store_chan_stats(s, 1, &cs), 0);
	cr_expect_eq(cs.transfers_open + cs.leases_owned, 0u);
	audit();
}

/* ---- Eviction ---- */

Test(store, eviction_takes_only_the_oldest_needed_when_pool_full)
{
	uint64_t x;
	struct kvr_slot_desc d;

	mk(10);
	/* [o1 0-2][o2 3-5][o3 6-8][free 9] */
	cr_assert_eq(store1(0, 1, 3 * U), 0u);
	cr_assert_eq(store1(0, 2, 3 * U), 3 * U);
	cr_assert_eq(store1(0, 3, 3 * U), 6 * U);
	/*
	 * 4 units: evicting o1 frees 0-2 (3 units, plus unit 9 apart: no
	 * extent of 4), so o2 goes too; then 0-5 fits. o3 stays.
	 */
	d = prep1(0, 0, 4, 4 * U, &x);
	cr_assert_eq(d.status, KVR_SLOT_OK);
	cr_expect_eq(d.off, 0u);
	cr_expect_eq(stats().evictions, 2u);
	cr_expect_eq(stats().evicted_bytes, 6 * U);
	cr_expect_eq(has(0, 1), 0);
	cr_expect_eq(has(0, 2), 0);
	cr_expect_eq(has(0, 3), 1);
	audit();
}

Test(store, eviction_follows_lru_order_when_object_touched)
{
	uint64_t x;
	struct kvr_slot_desc d;

	mk(10);
	store1(0, 1, 3 * U);
	store1(0, 2, 3 * U);
	store1(0, 3, 3 * U);
	cr_assert_eq(has(0, 1), 1); /* o1 becomes most recent */
	/* Oldest is now o2 (3-5): freeing it leaves 3 + 1; o3 next: 3-9. */
	d = prep1(0, 0, 4, 4 * U, &x);
	cr_assert_eq(d.status, KVR_SLOT_OK);
	cr_expect_eq(d.off, 3 * U);
	cr_expect_eq(stats().evictions, 2u);
	cr_expect_eq(has(0, 1), 1);
	cr_expect_eq(has(0, 2), 0);
	cr_expect_eq(has(0, 3), 0);
	audit();
}

Test(store, eviction_needs_no_victim_when_free_extent_fits)
{
	uint64_t x;

	mk(10);
	store1(0, 1, 3 * U);
	store1(0, 2, 3 * U);
	cr_assert_eq(prep1(0, 0, 3, 4 * U, &x).status, KVR_SLOT_OK);
	cr_expect_eq(stats().evictions, 0u);
}

Test(store, first_key_of_a_prefix_is_most_recent_when_committed)
{
	struct kvr_key k[3] = {K(1), K(2), K(3)};
	uint64_t sz[3] = {3 * U, 3 * U, 3 * U}, x;
	struct kvr_slot_desc d[3];

	mk(10);
	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 3, 0, d, &x), 3);
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	/* The tail of the prefix (K3, at 6-8) is the oldest: it goes and
	 * 6-9 fits 4 units. Had K1 been oldest, 0-2 would not have fit. */
	cr_assert_eq(prep1(0, 0, 9, 4 * U, &x).status, KVR_SLOT_OK);
	cr_expect_eq(stats().evictions, 1u);
	cr_expect_eq(has(0, 1), 1);
	cr_expect_eq(has(0, 2), 1);
	cr_expect_eq(has(0, 3), 0);
	audit();
}

Test(store, eviction_skips_pinned_and_reserved_when_making_room)
{
	struct kvr_key k1 = K(1);
	uint64_t lease, x2, x;
	struct kvr_slot_desc d;

	mk(10);
	store1(0, 1, 3 * U);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, &k1, 1, true, 0, &lease), 1);
	cr_assert_eq(prep1(1, 0, 2, 3 * U, &x2).status, KVR_SLOT_OK);
	store1(0, 3, 3 * U);
	/* Only o3 is evictable: it goes and 6-9 fits 4 units. */
	d = prep1(0, 0, 4, 4 * U, &x);
	cr_assert_eq(d.status, KVR_SLOT_OK);
	cr_expect_eq(d.off, 6 * U);
	cr_expect_eq(stats().evictions, 1u);
	cr_expect_eq(has(0, 1), 1, "pinned object evicted");
	audit();
	/* Now everything is pinned or reserved: no room, nothing evicted. */
	d = prep1(2, 0, 5, 1, &x);
	cr_expect_eq(d.status, KVR_SLOT_NOROOM);
	cr_expect_eq(x, 0u);
	cr_expect_eq(stats().evictions, 1u);
	cr_expect_eq(stats().no_room, 1u);
	cr_assert_eq(kvr_store_commit_store(s, 1, x2, 0), 0);
	cr_expect_eq(has(0, 2), 1, "reserved object lost");
	audit();
}

Test(store, object_in_request_answered_exists_is_kept_when_evicting)
{
	struct kvr_key k[2] = {K(3), K(9)};
	uint64_t sz[2] = {3 * U, 10 * U}, x;
	struct kvr_slot_desc d[2];

	mk(10);
	store1(0, 1, 3 * U);
	store1(0, 2, 3 * U);
	store1(0, 3, 3 * U);
	/* K9 needs the whole pool: only possible by evicting K3, which the
	 * same answer reports as stored. K1 and K2 may go, K3 must not. */
	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 2, 0, d, &x), 0);
	cr_expect_eq(d[0].status, KVR_SLOT_EXISTS);
	cr_expect_eq(d[1].status, KVR_SLOT_NOROOM);
	cr_expect_eq(has(0, 3), 1);
	audit();
}

Test(store, pinned_object_stays_until_last_owner_releases_when_shared)
{
	struct kvr_key k1 = K(1);
	struct kvr_slot_desc r[1];
	uint64_t lease, rx, x;

	mk(4);
	store1(0, 1, 2 * U);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, &k1, 1, true, 0, &lease), 1);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, &k1, 1, 0, r, &rx), 1);
	cr_expect_eq(stats().pinned_objects, 1u);
	cr_expect_eq(stats().pinned_bytes, 2 * U, "one object, counted once");
	cr_expect_eq(stats().pins, 2u);
	cr_assert_eq(kvr_store_release_lease(s, 0, lease, 0), 0);
	cr_expect_eq(stats().pins, 1u);
	cr_expect_eq(stats().pinned_bytes, 2 * U);
	audit();
	cr_expect_eq(prep1(2, 0, 2, 4 * U, &x).status, KVR_SLOT_NOROOM,
		     "pinned by the retrieve transfer still");
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, rx, 0), 0);
	cr_expect_eq(stats().pinned_bytes, 0u);
	cr_expect_eq(prep1(2, 0, 2, 4 * U, &x).status, KVR_SLOT_OK);
	cr_expect_eq(has(0, 1), 0);
	audit();
}

Test(store, eviction_stops_at_budget_when_fragmented)
{
	struct kvr_store_config c = {
	    .pool_bytes = 10 * U,
	    .align = U,
	    .max_evict_per_key = 1,
	};
	uint64_t x;

	cr_assert_eq(kvr_store_create(&c, &s), 0);
	store1(0, 1, 3 * U);
	store1(0, 2, 3 * U);
	store1(0, 3, 3 * U);
	cr_expect_eq(prep1(0, 0, 4, 4 * U, &x).status, KVR_SLOT_NOROOM);
	cr_expect_eq(stats().evictions, 1u);
	audit();
}

/* ---- Leases ---- */

Test(store, lease_redeemed_by_other_channel_survives_when_maker_closes)
{
	struct kvr_key k[2] = {K(1), K(2)};
	struct kvr_slot_desc r[2];
	struct kvr_store_chan_stats cs;
	uint64_t lease, rx, o1, o2;

	mk(10);
	o1 = store1(0, 1, 64);
	o2 = store1(0, 2, 100);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, k, 2, true, 0, &lease), 2);
	cr_assert_neq(lease, 0u);
	cr_assert_eq(
	    kvr_store_prepare_retrieve_lease(s, 1, lease, 1, r, 2, &rx), 2);
	cr_expect_eq(r[0].off, o1);
	cr_expect_eq(r[1].off, o2);
	cr_expect_eq(r[1].len, 100u);
	cr_expect_neq(rx, lease, "ids are never reused");
	cr_expect_eq(stats().leases, 0u);
	cr_expect_eq(stats().leases_redeemed, 1u);
	audit();
	cr_assert_eq(kvr_store_channel_close(s, 0, 0, NULL), 0);
	cr_expect_eq(stats().pins, 2u, "maker's close dropped B's pins");
	cr_assert_eq(kvr_store_chan_stats(s, 1, &cs), 0);
	cr_expect_eq(cs.pins_held, 2u);
	audit();
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 2, lease, 1, r, 2, &rx),
	    -ENOENT, "a lease is redeemed once");
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, rx, 0), 0);
	cr_expect_eq(stats().pins, 0u);
	audit();
}

Test(store, lease_release_answers_unknown_when_not_owner)
{
	struct kvr_key k1 = K(1);
	struct kvr_store_stats before, after;
	uint64_t lease;

	mk(10);
	store1(0, 1, 64);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, &k1, 1, true, 0, &lease), 1);
	before = stats();
	cr_expect_eq(kvr_store_release_lease(s, 1, lease, 0), -ENOENT,
		     "another channel's lease must look unknown");
	after = stats();
	cr_expect_eq(memcmp(&before, &after, sizeof(before)), 0);
	cr_expect_eq(stats().pins, 1u);
	cr_expect_eq(stats().leases, 1u);
	cr_expect_eq(kvr_store_release_lease(s, 0, lease, 0), 0);
	cr_expect_eq(kvr_store_release_lease(s, 0, lease, 0), -ENOENT);
	cr_expect_eq(stats().pins, 0u);
	audit();
}

Test(store, lease_expires_when_deadline_passes)
{
	struct kvr_key k1 = K(1);
	struct kvr_slot_desc r[1];
	uint64_t lease, l2, rx;

	mk(10);
	store1(0, 1, 64);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, &k1, 1, true, 10 * MS, &lease),
		     1);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, &k1, 1, true, 20 * MS, &l2), 1);
	cr_expect_eq(kvr_store_next_expiry(s), 110 * MS);
	cr_expect_eq(kvr_store_expire(s, 109 * MS, 0), 0);
	cr_expect_eq(stats().leases, 2u);
	/* Past its deadline a lease is dead even before the sweep. */
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 1, lease, 110 * MS, r, 1, &rx),
	    -ENOENT);
	cr_expect_eq(kvr_store_release_lease(s, 0, lease, 110 * MS), -ENOENT);
	cr_expect_eq(kvr_store_expire(s, 110 * MS, 0), 1);
	cr_expect_eq(stats().leases, 1u);
	cr_expect_eq(stats().pins, 1u);
	audit();
	cr_expect_eq(kvr_store_expire(s, 1000 * MS, 0), 1);
	cr_expect_eq(stats().pins, 0u);
	cr_expect_eq(stats().leases_expired, 2u);
	cr_expect_eq(kvr_store_next_expiry(s), UINT64_MAX);
	audit();
}

Test(store, expire_respects_budget_when_many_leases_due)
{
	struct kvr_key k1 = K(1);
	uint64_t lease;

	mk(10);
	store1(0, 1, 64);
	for (uint32_t ch = 0; ch < 4; ch++)
		for (int i = 0; i < 4; i++)
			cr_assert_eq(kvr_store_lookup(
					 s, ch, 0, &k1, 1, true,
					 (uint64_t)(i * 4 + ch) * MS, &lease),
				     1);
	cr_expect_eq(kvr_store_expire(s, 10000 * MS, 5), 5);
	audit();
	cr_expect_eq(kvr_store_expire(s, 10000 * MS, 0), 11);
	cr_expect_eq(stats().pins, 0u);
	audit();
}

Test(store, lookup_without_hits_makes_no_lease_when_pinning)
{
	struct kvr_key k1 = K(1);
	uint64_t lease = 99;

	mk(10);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, &k1, 1, true, 0, &lease), 0);
	cr_expect_eq(lease, 0u);
	cr_expect_eq(stats().leases, 0u);
}

/* ---- Ownership of transfers, bad ids, limits: nothing changes ---- */

Test(store, foreign_or_unknown_ids_change_nothing_when_used)
{
	struct kvr_key k1 = K(1);
	struct kvr_slot_desc r[1];
	struct kvr_store_stats before, after;
	uint64_t xs, rx, lease;

	mk(10);
	store1(0, 1, 64);
	cr_assert_eq(prep1(0, 0, 2, 64, &xs).status, KVR_SLOT_OK);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 0, 0, &k1, 1, 0, r, &rx), 1);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, &k1, 1, true, 0, &lease), 1);
	before = stats();
	/* Other channel's transfers. */
	cr_expect_eq(kvr_store_commit_store(s, 1, xs, 0), -ENOENT);
	cr_expect_eq(kvr_store_abort_store(s, 1, xs, 0), -ENOENT);
	cr_expect_eq(kvr_store_commit_retrieve(s, 1, rx, 0), -ENOENT);
	cr_expect_eq(kvr_store_check_store(s, 1, xs), -ENOENT);
	/* Unknown ids. */
	cr_expect_eq(kvr_store_commit_store(s, 0, 12345, 0), -ENOENT);
	cr_expect_eq(kvr_store_abort_store(s, 0, UINT64_MAX, 0), -ENOENT);
	cr_expect_eq(kvr_store_commit_retrieve(s, 0, 777, 0), -ENOENT);
	cr_expect_eq(kvr_store_release_lease(s, 0, 0, 0), -ENOENT);
	/* Ids of the wrong kind. */
	cr_expect_eq(kvr_store_commit_store(s, 0, rx, 0), -ENOENT);
	cr_expect_eq(kvr_store_commit_store(s, 0, lease, 0), -ENOENT);
	cr_expect_eq(kvr_store_commit_retrieve(s, 0, xs, 0), -ENOENT);
	cr_expect_eq(kvr_store_commit_retrieve(s, 0, lease, 0), -ENOENT);
	cr_expect_eq(kvr_store_release_lease(s, 0, rx, 0), -ENOENT);
	cr_expect_eq(kvr_store_prepare_retrieve_lease(s, 0, xs, 0, r, 1, &rx),
		     -ENOENT);
	/* Bad channel ids. */
	cr_expect_eq(kvr_store_commit_store(s, 4, xs, 0), -EINVAL);
	cr_expect_eq(kvr_store_commit_store(s, 4, 0, 0), -EINVAL);
	cr_expect_eq(kvr_store_channel_close(s, 4, 0, NULL), -EINVAL);
	cr_expect_eq(kvr_store_lookup(s, UINT32_MAX, 0, &k1, 1, false, 0, NULL),
		     -EINVAL);
	after = stats();
	cr_expect_eq(memcmp(&before, &after, sizeof(before)), 0,
		     "a refused call changed the counters");
	audit();
	cr_expect_eq(has(0, 2), 0);
	cr_expect_eq(kvr_store_commit_store(s, 0, xs, 0), 0);
	cr_expect_eq(has(0, 2), 1);
}

Test(store, limits_refuse_whole_request_when_exceeded)
{
	struct kvr_key k[17];
	uint64_t sz[17], x = 0xabc, lease = 0xabc;
	struct kvr_slot_desc d[17], dd;
	struct kvr_store_stats before, after;

	mk(100);
	for (int i = 0; i < 17; i++) {
		k[i] = K((uint64_t)i);
		sz[i] = 64;
	}
	memset(&dd, 0x5a, sizeof(dd));
	for (int i = 0; i < 17; i++)
		d[i] = dd;
	cr_expect_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 17, 0, d, &x),
		     -E2BIG);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, k, 17, false, 0, NULL), -E2BIG);
	cr_expect_eq(kvr_store_prepare_retrieve(s, 0, 0, k, 17, 0, d, &x),
		     -E2BIG);
	cr_expect_eq(memcmp(&d[0], &dd, sizeof(dd)), 0, "output touched");
	cr_expect_eq(x, 0xabcu);
	cr_expect_eq(kvr_store_prepare_store(s, 0, 0, NULL, sz, 1, 0, d, &x),
		     -EINVAL);
	cr_expect_eq(kvr_store_prepare_store(s, 0, 0, k, NULL, 1, 0, d, &x),
		     -EINVAL);
	cr_expect_eq(kvr_store_prepare_store(s, 0, 0, k, sz, 1, 0, NULL, &x),
		     -EINVAL);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, k, 1, true, 0, NULL), -EINVAL);
	/* Transfers per channel: 4. */
	for (int i = 0; i < 4; i++)
		cr_assert_eq(
		    kvr_store_prepare_store(s, 0, 0, &k[i], sz, 1, 0, d, &x),
		    1);
	before = stats();
	cr_expect_eq(kvr_store_prepare_store(s, 0, 0, &k[4], sz, 1, 0, d, &x),
		     -EBUSY);
	cr_expect_eq(kvr_store_prepare_retrieve(s, 0, 0, k, 1, 0, d, &x),
		     -EBUSY);
	after = stats();
	cr_expect_eq(memcmp(&before, &after, sizeof(before)), 0);
	/* Other channels are not affected. */
	cr_expect_eq(kvr_store_prepare_store(s, 1, 0, &k[4], sz, 1, 0, d, &x),
		     1);
	cr_assert_eq(kvr_store_commit_store(s, 1, x, 0), 0);
	/* Leases per channel: 4. */
	for (int i = 0; i < 4; i++)
		cr_assert_eq(
		    kvr_store_lookup(s, 2, 0, &k[4], 1, true, 0, &lease), 1);
	lease = 0xabc;
	cr_expect_eq(kvr_store_lookup(s, 2, 0, &k[4], 1, true, 0, &lease),
		     -EBUSY);
	cr_expect_eq(lease, 0xabcu);
	cr_expect_eq(kvr_store_lookup(s, 2, 0, &k[4], 1, false, 0, NULL), 1,
		     "a plain lookup needs no lease");
	audit();
}

Test(store, redeem_is_refused_when_output_too_small_or_channel_full)
{
	struct kvr_key k[2] = {K(1), K(2)};
	struct kvr_slot_desc r[2];
	uint64_t lease, x;

	mk(10);
	store1(0, 1, 64);
	store1(0, 2, 64);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, k, 2, true, 0, &lease), 2);
	cr_expect_eq(kvr_store_prepare_retrieve_lease(s, 1, lease, 0, r, 1, &x),
		     -EINVAL);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(
		    kvr_store_prepare_retrieve(s, 1, 0, k, 1, 0, r, &x), 1);
	cr_expect_eq(kvr_store_prepare_retrieve_lease(s, 1, lease, 0, r, 2, &x),
		     -EBUSY);
	cr_expect_eq(stats().leases, 1u, "lease consumed by a refused redeem");
	audit();
}

Test(store, create_rejects_bad_config_when_given)
{
	struct kvr_store_config c = {.pool_bytes = 1 << 20};

	c.align = 100;
	cr_expect_eq(kvr_store_create(&c, &s), -EINVAL);
	c.align = 0;
	c.reserved = 1;
	cr_expect_eq(kvr_store_create(&c, &s), -EINVAL);
	c.reserved = 0;
	c.pool_bytes = 100;
	cr_expect_eq(kvr_store_create(&c, &s), -EINVAL, "pool < one unit");
	cr_expect_eq(kvr_store_create(NULL, &s), -EINVAL);
	cr_expect_null(s);
	c.pool_bytes = 1 << 20;
	cr_assert_eq(kvr_store_create(&c, &s), 0);
	cr_expect_eq(kvr_store_align(s), 4096u);
	cr_expect_eq(kvr_store_max_keys(s), KVR_MAX_KEYS_LIMIT);
}

/* Resident bytes of this process (/proc/self/statm), or 0. */
static uint64_t resident_bytes(void)
{
	unsigned long long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu %llu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * The object table is not written when it is made or grown, only as its
 * entries are handed out: an engine sized for 4 Mi objects (a 208 MiB
 * table beside a 45 MiB key index, which is written) is resident for the
 * index and little else, and fills and audits as before.
 */
Test(store, sizing_for_many_objects_writes_none_of_their_entries)
{
	struct kvr_store_config c = {
	    .pool_bytes = 4ull << 30, .align = 1024, .objects_hint = 4u << 20};
	uint64_t before = resident_bytes(), grown;

	cr_assert_gt(before, 0, "no /proc/self/statm");
	cr_assert_eq(kvr_store_create(&c, &s), 0);
	grown = resident_bytes() - before;
	cr_expect_lt(grown, 100ull << 20, "%llu bytes resident after create",
		     (unsigned long long)grown);
	for (uint64_t i = 0; i < 1000; i++) {
		struct kvr_key k = {i + 1, 9};
		uint64_t sz = 1024;
		struct kvr_slot_desc d;
		uint64_t x;

		cr_assert_eq(
		    kvr_store_prepare_store(s, 0, 1, &k, &sz, 1, 0, &d, &x), 1);
		cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	}
	cr_expect_eq(stats().objects, 1000u);
	audit();
}

/* ---- Random multi-channel run, audited after every step ---- */

#define R_KEYS	48
#define R_CHANS 3
#define R_OPEN	16

/* What the test knows: slots of committed keys, open transfers. */
struct r_xfer {
	uint64_t id;
	uint32_t kind; /* 1 store, 2 retrieve, 3 lease */
	uint32_t n;
	uint64_t deadline_ns; /* lease */
	uint64_t key[8];
	struct kvr_slot_desc slot[8];
};

struct r_model {
	struct r_xfer open[R_CHANS][R_OPEN];
	uint32_t nopen[R_CHANS];
	struct kvr_slot_desc committed[R_KEYS]; /* last commit of key */
};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static int overlaps(const struct kvr_slot_desc *a,
		    const struct kvr_slot_desc *b)
{
	uint64_t ae = a->off + (a->len + U - 1) / U * U;
	uint64_t be = b->off + (b->len + U - 1) / U * U;

	return a->off < be && b->off < ae;
}

/* A new reservation must not overlap any slot someone holds. */
static void check_fresh(const struct r_model *m, const struct kvr_slot_desc *d)
{
	for (int c = 0; c < R_CHANS; c++)
		for (uint32_t j = 0; j < m->nopen[c]; j++)
			for (uint32_t i = 0; i < m->open[c][j].n; i++) {
				const struct r_xfer *t = &m->open[c][j];

				if (t->slot[i].status != KVR_SLOT_OK)
					continue;
				cr_assert(!overlaps(d, &t->slot[i]),
					  "slot %llu+%llu handed out while "
					  "held at %llu+%llu",
					  (unsigned long long)d->off,
					  (unsigned long long)d->len,
					  (unsigned long long)t->slot[i].off,
					  (unsigned long long)t->slot[i].len);
			}
}

static void r_forget(struct r_model *m, uint32_t c, uint32_t j)
{
	m->open[c][j] = m->open[c][--m->nopen[c]];
}

Test(store, invariants_hold_when_random_ops_on_three_channels)
{
	static struct r_model m;
	uint64_t x = 0x9e3779b97f4a7c15ull, now = 0;
	uint64_t counts[10] = {0};

	memset(&m, 0, sizeof(m));
	mk(80);
	for (uint32_t step = 0; step < 25000; step++) {
		uint64_t r = rnd(&x);
		uint32_t c = (uint32_t)(r % R_CHANS);
		uint32_t op = (uint32_t)((r >> 8) % 100);
		uint32_t n = 1 + (uint32_t)((r >> 16) % 8);
		uint32_t first = (uint32_t)((r >> 24) % R_KEYS);
		struct kvr_key k[8];
		uint64_t key[8], sz[8], id;
		struct kvr_slot_desc d[8];
		int rc;

		now += (r >> 40) % MS;
		for (uint32_t i = 0; i < n; i++) {
			/* Mostly chains from `first`; sometimes a repeat. */
			key[i] = (r >> (32 + i)) % 13 == 0
				     ? first
				     : (first + i) % R_KEYS;
			k[i] = K(key[i]);
			sz[i] = 1 + (rnd(&x) % (3 * U));
		}
		if (op < 30 && m.nopen[c] < R_OPEN) {
			/* prepare_store; keys % 7 == 0 are always aborted. */
			rc = kvr_store_prepare_store(s, c, 0, k, sz, n, now, d,
						     &id);
			if (rc == -EBUSY)
				continue;
			cr_assert_geq(rc, 0, "step %u rc %d", step, rc);
			counts[0]++;
			for (uint32_t i = 0; i < n; i++)
				if (d[i].status == KVR_SLOT_OK) {
					cr_assert_eq(d[i].len, sz[i]);
					cr_assert_eq(d[i].off % U, 0u);
					check_fresh(&m, &d[i]);
				}
			if (id) {
				struct r_xfer *t = &m.open[c][m.nopen[c]++];

				t->id = id;
				t->kind = 1;
				t->n = n;
				memcpy(t->key, key, sizeof(key));
				memcpy(t->slot, d, sizeof(d));
			}
		} else if (op < 45 && m.nopen[c]) {
			/* commit or abort one of c's store transfers. */
			uint32_t j = (uint32_t)((r >> 32) % m.nopen[c]);
			struct r_xfer *t = &m.open[c][j];
			int doomed = 0;

			if (t->kind != 1)
				continue;
			for (uint32_t i = 0; i < t->n; i++)
				if (t->slot[i].status == KVR_SLOT_OK &&
				    t->key[i] % 7 == 0)
					doomed = 1;
			if (doomed || (r >> 50) % 4 == 0) {
				cr_assert_eq(
				    kvr_store_abort_store(s, c, t->id, now), 0);
				counts[1]++;
			} else {
				cr_assert_eq(
				    kvr_store_commit_store(s, c, t->id, now),
				    0);
				for (uint32_t i = 0; i < t->n; i++)
					if (t->slot[i].status == KVR_SLOT_OK)
						m.committed[t->key[i]] =
						    t->slot[i];
				counts[2]++;
			}
			r_forget(&m, c, j);
		} else if (op < 60 && m.nopen[c] < R_OPEN) {
			/* prepare_retrieve: slots must be the committed ones.
			 */
			rc = kvr_store_prepare_retrieve(s, c, 0, k, n, now, d,
							&id);
			if (rc == -EBUSY)
				continue;
			cr_assert_geq(rc, 0);
			for (int i = 0; i < rc; i++) {
				cr_assert_neq(key[i] % 7, 0u,
					      "aborted key %llu readable",
					      (unsigned long long)key[i]);
				cr_assert_eq(d[i].off, m.committed[key[i]].off);
				cr_assert_eq(d[i].len, m.committed[key[i]].len);
			}
			if (id) {
				struct r_xfer *t = &m.open[c][m.nopen[c]++];

				t->id = id;
				t->kind = 2;
				t->n = (uint32_t)rc;
				memcpy(t->key, key, sizeof(key));
				memcpy(t->slot, d, sizeof(d));
			}
			counts[3]++;
		} else if (op < 70 && m.nopen[c]) {
			/* commit_retrieve, or release a lease. */
			uint32_t j = (uint32_t)((r >> 32) % m.nopen[c]), tries;
			struct r_xfer *t = NULL;

			for (tries = 0; tries < m.nopen[c]; tries++) {
				t = &m.open[c][(j + tries) % m.nopen[c]];
				if (t->kind != 1)
					break;
			}
			if (tries == m.nopen[c])
				continue;
			j = (j + tries) % m.nopen[c];
			if (t->kind == 2) {
				cr_assert_eq(
				    kvr_store_commit_retrieve(s, c, t->id, now),
				    0);
			} else {
				rc = kvr_store_release_lease(s, c, t->id, now);
				cr_assert(rc == 0 || (rc == -ENOENT &&
						      now >= t->deadline_ns),
					  "release rc %d", rc);
			}
			r_forget(&m, c, j);
			counts[4]++;
		} else if (op < 82 && m.nopen[c] < R_OPEN) {
			/* lookup, pinned half the time. */
			uint64_t lease = 0;
			int pin = (r >> 33) & 1;

			rc = kvr_store_lookup(s, c, 0, k, n, pin, now, &lease);
			if (rc == -EBUSY)
				continue;
			cr_assert_geq(rc, 0);
			for (int i = 0; i < rc; i++)
				cr_assert_neq(key[i] % 7, 0u);
			if (lease) {
				struct r_xfer *t = &m.open[c][m.nopen[c]++];

				memset(t, 0, sizeof(*t));
				t->id = lease;
				t->kind = 3;
				t->deadline_ns = now + 100 * MS;
			}
			counts[5]++;
		} else if (op < 90 && m.nopen[c] < R_OPEN) {
			/* Redeem a lease of some channel (maybe another). */
			uint32_t oc = (uint32_t)((r >> 34) % R_CHANS), j;
			struct r_xfer *t;

			for (j = 0; j < m.nopen[oc]; j++)
				if (m.open[oc][j].kind == 3)
					break;
			if (j == m.nopen[oc])
				continue;
			t = &m.open[oc][j];
			rc = kvr_store_prepare_retrieve_lease(s, c, t->id, now,
							      d, 8, &id);
			if (rc == -EBUSY)
				continue;
			cr_assert(rc > 0 ||
				      (rc == -ENOENT && now >= t->deadline_ns),
				  "redeem rc %d", rc);
			r_forget(&m, oc, j);
			if (rc == -ENOENT)
				continue; /* expired */
			cr_assert_gt(rc, 0, "redeem rc %d", rc);
			t = &m.open[c][m.nopen[c]++];
			memset(t, 0, sizeof(*t));
			t->id = id;
			t->kind = 2;
			t->n = (uint32_t)rc;
			memcpy(t->slot, d, sizeof(d));
			counts[6]++;
		} else if (op < 93) {
			/* Channel death: everything it holds goes. */
			cr_assert_eq(kvr_store_channel_close(s, c, now, NULL),
				     0);
			m.nopen[c] = 0;
			counts[7]++;
		} else if (op < 97) {
			/* Foreign ids are refused. */
			uint32_t oc = (c + 1) % R_CHANS;

			if (m.nopen[oc]) {
				struct r_xfer *t = &m.open[oc][0];

				if (t->kind == 1)
					cr_assert_eq(kvr_store_commit_store(
							 s, c, t->id, now),
						     -ENOENT);
				else if (t->kind == 2)
					cr_assert_eq(kvr_store_commit_retrieve(
							 s, c, t->id, now),
						     -ENOENT);
			}
			counts[8]++;
		} else {
			int e = kvr_store_expire(s, now, 2);

			cr_assert_geq(e, 0);
			/* Forget leases that are now gone (any -ENOENT). */
			counts[9]++;
		}
		audit();
	}
	/* Every op kind really ran. */
	for (int i = 0; i < 10; i++)
		cr_log_info("op kind %d: %llu", i,
			    (unsigned long long)counts[i]);
	for (int i = 0; i < 10; i++)
		cr_expect_gt(counts[i], 50u, "op kind %d ran %llu times", i,
			     (unsigned long long)counts[i]);
	cr_expect_gt(stats().evictions, 100u);
	for (uint32_t c = 0; c < R_CHANS; c++)
		cr_assert_eq(kvr_store_channel_close(s, c, now, NULL), 0);
	cr_expect_eq(stats().pins, 0u);
	cr_expect_eq(stats().reserved_bytes, 0u);
	cr_expect_eq(stats().transfers + stats().leases, 0u);
	audit();
}

/* ==== Rule 3: one thread owns the tables, and that is enforced ==== */

static void *lookup_from_other_thread(void *arg)
{
	struct kvr_key k = K(1);

	(void)arg;
	/* Must abort inside: the store belongs to the creating thread. */
	kvr_store_lookup(s, 0, 1, &k, 1, false, 0, NULL);
	return NULL;
}

Test(store, aborts_when_called_from_a_second_thread, .signal = SIGABRT)
{
	pthread_t t;
	struct kvr_key k = K(1);

	mk(16);
	/* The owner may call. */
	cr_assert_eq(kvr_store_lookup(s, 0, 1, &k, 1, false, 0, NULL), 0);
	cr_assert_eq(pthread_create(&t, NULL, lookup_from_other_thread, NULL),
		     0);
	pthread_join(t, NULL);
	cr_assert_fail("a call from a second thread returned instead of "
		       "aborting");
}
