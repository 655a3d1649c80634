/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of server/store_l2.c's entry points for --l2-upload evict
 * (docs/l2.md, "Upload on eviction"): the coldest objects without a copy
 * in L2 are pinned, only within the eviction zone and without touching
 * recency; the ones marked saved wait at the LRU tail and are evicted
 * first; evictions of objects without a copy are counted; objects loaded
 * from L2 count as saved. The disk tier's write-back guard
 * (kvr_store_disk_guard, --disk-mode evict): eviction takes only objects
 * with a copy on disk or that the disk refused, clean ones first, and a
 * key that finds none answers NOROOM; a copy the disk dropped is
 * forgotten (kvr_store_disk_forget). Pool sizes are in units of U bytes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "store_suite.h"

#define L2 3u /* the L2 tier's channel */

TestSuite(store_l2, .fini = teardown, .timeout = 10);

static void mk(uint64_t units)
{
	struct kvr_store_config c = store_config(units);

	store_create(&c);
	cr_assert_eq(kvr_store_channel_trust(s, L2), 0);
}

/* Store and commit key @i (one unit) on channel 0; its slot status. */
static int store_status(uint64_t i)
{
	struct kvr_key k = K(i);
	uint64_t bytes = U, x;
	struct kvr_slot_desc d;

	int rc = kvr_store_prepare_store(s, 0, 0, &k, &bytes, 1, 0, &d, &x);

	cr_assert(rc == 0 || rc == 1, "prepare_store: %d", rc);
	if (rc == 1)
		cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	audit();
	return d.status;
}

/* The same, which must be stored. */
static void store1(uint64_t i)
{
	int st = store_status(i);

	cr_assert_eq(st, KVR_SLOT_OK, "key %llu: status %d",
		     (unsigned long long)i, st);
}

static bool has(uint64_t i)
{
	struct kvr_key k = K(i);

	return kvr_store_lookup(s, 0, 0, &k, 1, false, 0, NULL) == 1;
}

/* kvr_store_l2_cold with room for 16; returns the count. */
static int cold(uint64_t zone_units, struct kvr_key *keys, uint64_t *xfer)
{
	struct kvr_slot_desc slots[16];
	uint32_t ns = 99;
	int n = kvr_store_l2_cold(s, L2, 16, zone_units * U, 0, keys, slots,
				  &ns, xfer);

	if (n > 0)
		cr_expect_eq(ns, 0);
	audit();
	return n;
}

static bool same(struct kvr_key a, struct kvr_key b)
{
	return a.lo == b.lo && a.hi == b.hi;
}

Test(store_l2, cold_pins_only_the_oldest_objects_of_the_zone)
{
	struct kvr_key keys[16];
	uint64_t xfer = 0;
	uint8_t none[3] = {0};

	mk(16);
	for (uint64_t i = 1; i <= 8; i++)
		store1(i);
	cr_assert_eq(cold(3, keys, &xfer), 3);
	cr_expect_neq(xfer, 0);
	for (int i = 0; i < 3; i++)
		cr_expect(same(keys[i], K((uint64_t)i + 1)),
			  "keys[%d] is not key %d", i, i + 1);
	/* Pinned, not evictable, still readable. */
	cr_expect_eq(stats().pinned_objects, 3);
	cr_expect(has(1));
	cr_expect_eq(kvr_store_l2_saved(s, L2, xfer, none, 2), -EINVAL,
		     "count mismatch changes nothing");
	cr_expect_eq(kvr_store_l2_saved(s, 0, xfer, none, 3), -ENOENT,
		     "another channel's transfer reads as absent");
	cr_expect_eq(kvr_store_l2_saved(s, L2, xfer, none, 3), 0);
	cr_expect_eq(stats().pinned_objects, 0);
	cr_expect_eq(kvr_store_l2_saved(s, L2, xfer, none, 3), -ENOENT);
	audit();
}

Test(store_l2, saved_objects_are_skipped_then_evicted_first)
{
	struct kvr_key keys[16];
	uint64_t xfer = 0;
	uint8_t mask[3] = {1, 1, 0};

	mk(8);
	for (uint64_t i = 1; i <= 8; i++)
		store1(i);
	cr_assert_eq(cold(3, keys, &xfer), 3);
	cr_assert_eq(kvr_store_l2_saved(s, L2, xfer, mask, 3), 0);
	/* Keys 1 and 2 are saved: the next look skips them, takes 3. */
	cr_assert_eq(cold(3, keys, &xfer), 1);
	cr_expect(same(keys[0], K(3)));
	mask[0] = 1;
	cr_assert_eq(kvr_store_l2_saved(s, L2, xfer, mask, 1), 0);
	/* A worker reads key 4: recency as usual, it moves to the head. */
	cr_assert(has(4));
	/* The pool is full: each store evicts the tail, saved copies
	 * first, then the oldest without a copy (key 5), counted. */
	store1(9);
	store1(10);
	store1(11);
	cr_expect_eq(stats().evictions, 3);
	cr_expect_eq(stats().l2_unsaved_evictions, 0);
	cr_expect(!has(1) && !has(2) && !has(3), "saved ones went first");
	store1(12);
	cr_expect_eq(stats().l2_unsaved_evictions, 1);
	cr_expect(!has(5) && has(4) && has(6), "then plain LRU order");
	audit();
}

/* kvr_store_disk_cold with room for 16, the whole pool as its zone. */
static int disk_cold(struct kvr_key *keys, uint64_t *xfer)
{
	struct kvr_slot_desc slots[16];
	uint32_t ns = 99;
	int n =
	    kvr_store_disk_cold(s, L2, 16, 64 * U, 0, keys, slots, &ns, xfer);

	audit();
	return n;
}

Test(store_l2, the_disk_guard_evicts_only_what_the_disk_holds)
{
	struct kvr_key keys[16];
	uint64_t xfer = 0;
	uint8_t mask[4] = {KVR_STORE_DISK_SAVED, KVR_STORE_DISK_REFUSED,
			   KVR_STORE_DISK_UNSAVED, KVR_STORE_DISK_UNSAVED};

	mk(4);
	kvr_store_disk_guard(s, true);
	for (uint64_t i = 1; i <= 4; i++)
		store1(i);
	/* Nothing on disk yet: the pool is full, and the guard says NOROOM
	 * rather than evict a chunk the disk has not written. */
	cr_expect_eq(store_status(5), KVR_SLOT_NOROOM);
	cr_expect_eq(stats().disk_held, 1);
	cr_expect_eq(stats().evictions, 0);
	/* Key 1 written, key 2 refused by the disk; 3 and 4 not yet. */
	cr_assert_eq(disk_cold(keys, &xfer), 4);
	cr_assert(same(keys[0], K(1)) && same(keys[1], K(2)));
	cr_assert_eq(kvr_store_disk_saved(s, L2, xfer, mask, 4, true), 0);
	audit();
	/* A worker reads key 1: it moves to the head, behind the unsaved
	 * 3 and 4; the guard still finds it, the refused 2 first. */
	cr_assert(has(1));
	store1(5);
	cr_expect(!has(2) && has(1), "the refused chunk first");
	store1(6);
	cr_expect(!has(1), "then the clean one, ahead of colder unsaved ones");
	cr_expect(has(3) && has(4), "never an unsaved one");
	cr_expect_eq(store_status(7), KVR_SLOT_NOROOM);
	cr_expect_eq(stats().disk_unsaved_evictions, 1, "the refused one");
	/* The guard off (a failing disk): plain LRU again, counted. The
	 * tail is 5: has() touched 3 and 4 after 5 and 6 were stored. */
	kvr_store_disk_guard(s, false);
	store1(7);
	cr_expect(!has(5) && has(6), "the LRU tail");
	cr_expect_eq(stats().disk_unsaved_evictions, 2);
	audit();
}

/* The disk dropped its copy of key 1 (kvr_store_disk_forget): the guard
 * no longer takes it as saved, and without the guard its eviction is
 * counted as unsaved. An absent key and a bad namespace change nothing. */
Test(store_l2, a_copy_the_disk_dropped_is_forgotten)
{
	struct kvr_key keys[16], k1 = K(1), k9 = K(9);
	uint64_t xfer = 0;
	uint8_t mask[2] = {KVR_STORE_DISK_SAVED, KVR_STORE_DISK_SAVED};

	mk(2);
	kvr_store_disk_guard(s, true);
	store1(1);
	store1(2);
	cr_assert_eq(disk_cold(keys, &xfer), 2);
	cr_assert_eq(kvr_store_disk_saved(s, L2, xfer, mask, 2, true), 0);
	cr_expect_eq(kvr_store_disk_forget(s, 0, &k1), 1);
	cr_expect_eq(kvr_store_disk_forget(s, 0, &k1), 0, "already clear");
	cr_expect_eq(kvr_store_disk_forget(s, 0, &k9), 0, "not resident");
	cr_expect_eq(kvr_store_disk_forget(s, 1u << 30, &k1), -EINVAL);
	cr_expect_eq(kvr_store_disk_forget(s, 0, NULL), -EINVAL);
	audit();
	/* Key 1 is the LRU tail, but only key 2 is on disk. */
	store1(3);
	cr_expect(has(1) && !has(2), "the guard skipped the forgotten copy");
	cr_expect_eq(stats().disk_unsaved_evictions, 0);
	cr_expect_eq(store_status(4), KVR_SLOT_NOROOM);
	kvr_store_disk_guard(s, false);
	store1(4);
	cr_expect_eq(stats().disk_unsaved_evictions, 1,
		     "its eviction is counted as unsaved");
	audit();
}

Test(store_l2, cold_finds_nothing_when_the_zone_is_saved)
{
	struct kvr_key keys[16];
	uint64_t xfer = 7;
	uint8_t all[2] = {1, 1};

	mk(8);
	cr_expect_eq(cold(4, keys, &xfer), 0, "empty store");
	cr_expect_eq(xfer, 0);
	store1(1);
	store1(2);
	store1(3);
	cr_assert_eq(cold(2, keys, &xfer), 2);
	cr_assert_eq(kvr_store_l2_saved(s, L2, xfer, all, 2), 0);
	cr_expect_eq(cold(2, keys, &xfer), 0, "the coldest 2 units are saved");
	cr_expect_eq(cold(3, keys, &xfer), 1, "a wider zone reaches key 3");
	cr_expect_eq(kvr_store_l2_cold(s, L2, 0, U, 0, keys,
				       (struct kvr_slot_desc[16]){0},
				       (uint32_t[1]){0}, &xfer),
		     -EINVAL);
}

Test(store_l2, objects_loaded_from_l2_count_as_saved)
{
	struct kvr_key k[2] = {K(1), K(2)};
	uint64_t bytes[2] = {U, U}, x;
	struct kvr_slot_desc d[2];
	uint8_t keep[2] = {1, 1};

	mk(2);
	cr_assert_eq(kvr_store_prepare_store(s, L2, 0, k, bytes, 2, 0, d, &x),
		     2);
	cr_assert_eq(kvr_store_commit_store_mask(s, L2, x, keep, 2, 0), 2);
	store1(3);
	store1(4);
	cr_expect_eq(stats().evictions, 2);
	cr_expect_eq(stats().l2_unsaved_evictions, 0);
	audit();
}

/*
 * Another channel's open transfer answers exactly as a transfer that does
 * not exist: a worker cannot learn that another one has a store open.
 */
Test(store_l2, another_channels_transfer_reads_as_absent)
{
	struct kvr_key k = K(7), keys[1];
	uint64_t bytes = U, x;
	struct kvr_slot_desc d;
	uint8_t keep = 1;
	uint32_t ns;

	mk(8);
	cr_assert_eq(kvr_store_prepare_store(s, 0, 0, &k, &bytes, 1, 0, &d, &x),
		     1);
	cr_expect_eq(kvr_store_xfer_keys(s, 1, x, keys, 1, &ns), -ENOENT);
	cr_expect_eq(kvr_store_xfer_keys(s, 1, x + 1000, keys, 1, &ns),
		     -ENOENT);
	cr_expect_eq(kvr_store_commit_store_mask(s, 1, x, &keep, 1, 0),
		     -ENOENT);
	cr_assert_eq(kvr_store_xfer_keys(s, 0, x, keys, 1, &ns), 1);
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	cr_assert(has(7));
}
