/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the isolation rules of server/store*.c: per
 * channel quotas on reserved and pinned bytes and the per-key size limit,
 * deadlines on open transfers (reclaimed, remembered as expired), leases
 * bound to their maker's uid and namespace, unguessable never-repeating
 * ids (server/store/store_id.c, checked against the cipher's published test
 * vector), and the per-namespace object counts that let kvringd free a
 * namespace entry. The audit runs after every step that changes state.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_id.h"
#include "store_suite.h"

TestSuite(store_isolation, .fini = teardown, .timeout = 30);

/* A pool of @units * U bytes with the given per-channel limits (bytes). */
static void mk(uint64_t units, uint64_t q_res, uint64_t q_pin, uint64_t maxk)
{
	struct kvr_store_config c = store_config(units);

	c.max_xfers_per_chan = 8;
	c.max_leases_per_chan = 8;
	c.quota_reserved_bytes = q_res;
	c.quota_pinned_bytes = q_pin;
	c.max_key_bytes = maxk;
	c.xfer_ms = 50;
	c.max_ns = 8;
	store_create(&c);
}

static struct kvr_store_chan_stats cstats(uint32_t ch)
{
	struct kvr_store_chan_stats cs;

	cr_assert_eq(kvr_store_chan_stats(s, ch, &cs), 0);
	return cs;
}

/* Store and commit keys [first, first + n) of @bytes each on @ch, ns 0. */
static void store_n(uint32_t ch, uint64_t first, uint32_t n, uint64_t bytes,
		    uint64_t now_ns)
{
	struct kvr_key k[16];
	uint64_t sz[16], x;
	struct kvr_slot_desc d[16];

	cr_assert_leq(n, 16);
	for (uint32_t i = 0; i < n; i++) {
		k[i] = K(first + i);
		sz[i] = bytes;
	}
	cr_assert_eq(kvr_store_prepare_store(s, ch, 0, k, sz, n, now_ns, d, &x),
		     (int)n);
	cr_assert_eq(kvr_store_commit_store(s, ch, x, now_ns), 0);
	audit();
}

Test(store_isolation,
     prepare_answers_quota_and_evicts_nothing_when_over_reserve_quota)
{
	struct kvr_key k[4] = {K(100), K(101), K(102), K(103)};
	uint64_t sz[4] = {3 * U, 3 * U, 3 * U, 3 * U}, x, x2 = 1, ev, objs;
	struct kvr_slot_desc d[4];

	/* 16 units; channel 0 fills 12 of them with committed objects, in
	 * requests within its own quota. */
	mk(16, 7 * U, 0, 0);
	store_n(0, 0, 3, 2 * U, 0);
	store_n(0, 3, 3, 2 * U, 0);
	/* Channel 1 may hold 7 units reserved: 2 keys of 3, not 3. Only 4
	 * units are free, so its second key needs evictions (allowed: it is
	 * within the quota). */
	cr_assert_eq(kvr_store_prepare_store(s, 1, 0, k, sz, 2, 0, d, &x), 2);
	cr_expect_eq(d[0].status, KVR_SLOT_OK);
	cr_expect_eq(d[1].status, KVR_SLOT_OK);
	ev = stats().evictions;
	objs = stats().objects;
	cr_expect_gt(ev, 0u);
	/* The next two, in a second open transfer, are over the quota: they
	 * answer "quota" and evict nothing although the pool is full. */
	cr_assert_eq(
	    kvr_store_prepare_store(s, 1, 0, &k[2], &sz[2], 2, 0, d, &x2), 0);
	cr_expect_eq(d[0].status, KVR_SLOT_QUOTA, "status %d", d[0].status);
	cr_expect_eq(d[1].status, KVR_SLOT_QUOTA, "status %d", d[1].status);
	cr_expect_eq(x2, 0u);
	cr_expect_eq(stats().evictions, ev, "evicted %llu, before %llu",
		     (unsigned long long)stats().evictions,
		     (unsigned long long)ev);
	cr_expect_eq(stats().objects, objs);
	cr_expect_eq(stats().quota_denied, 2u);
	cr_expect_eq(cstats(1).quota_denied, 2u);
	cr_expect_eq(cstats(1).reserved_bytes, 6 * U);
	audit();
	/* Committing frees the quota (reserved -> committed). */
	cr_assert_eq(kvr_store_commit_store(s, 1, x, 0), 0);
	cr_expect_eq(cstats(1).reserved_bytes, 0u);
	cr_assert_eq(
	    kvr_store_prepare_store(s, 1, 0, &k[2], &sz[2], 1, 0, d, &x), 1);
	audit();
}

Test(store_isolation, prepare_answers_quota_when_key_is_above_max_key_bytes)
{
	struct kvr_key k = K(1);
	uint64_t sz = 16 * U, x = 1;
	struct kvr_slot_desc d;

	/* A pool-sized key: reservable by size, not by the per-key limit. */
	mk(16, 0, 0, 4 * U);
	store_n(0, 10, 4, 2 * U, 0);
	cr_assert_eq(kvr_store_prepare_store(s, 1, 0, &k, &sz, 1, 0, &d, &x),
		     0);
	cr_expect_eq(d.status, KVR_SLOT_QUOTA, "status %d", d.status);
	cr_expect_eq(x, 0u, "a transfer for nothing");
	cr_expect_eq(stats().evictions, 0u);
	cr_expect_eq(stats().objects, 4u, "others' objects were evicted");
	sz = 4 * U;
	cr_assert_eq(kvr_store_prepare_store(s, 1, 0, &k, &sz, 1, 0, &d, &x),
		     1);
	cr_expect_eq(d.status, KVR_SLOT_OK);
	audit();
}

Test(store_isolation, pins_stop_at_pin_quota_when_lookup_or_retrieve_pins)
{
	struct kvr_key k[4] = {K(0), K(1), K(2), K(3)};
	struct kvr_slot_desc d[4];
	uint64_t lease = 0, rx = 0;

	mk(16, 0, 5 * U, 0);
	store_n(0, 0, 4, 2 * U, 0);
	/* 5 units of pins: two 2-unit objects fit, the third does not. */
	cr_expect_eq(kvr_store_lookup(s, 1, 0, k, 4, true, 0, &lease), 2);
	cr_expect_neq(lease, 0u);
	cr_expect_eq(cstats(1).pinned_bytes, 4 * U);
	audit();
	/* One unit left: nothing fits, an error rather than "no hit". */
	cr_expect_eq(kvr_store_prepare_retrieve(s, 1, 0, k, 4, 0, d, &rx),
		     -EDQUOT);
	cr_expect_eq(rx, 0u);
	/* Another channel has its own quota. */
	cr_expect_eq(kvr_store_prepare_retrieve(s, 2, 0, k, 4, 0, d, &rx), 2);
	cr_expect_eq(cstats(2).pinned_bytes, 4 * U);
	/* Redeeming moves the pins: channel 2 is full, channel 3 is not. */
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 2, lease, 0, d, 4, &rx),
	    -EDQUOT);
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 3, lease, 0, d, 4, &rx), 2);
	cr_expect_eq(cstats(1).pinned_bytes, 0u);
	cr_expect_eq(cstats(3).pinned_bytes, 4 * U);
	cr_expect_geq(stats().quota_denied, 3u);
	audit();
}

Test(store_isolation,
     store_reservation_is_quarantined_and_commit_says_expired_at_deadline)
{
	struct kvr_key k = K(5);
	uint64_t sz = 2 * U, x = 0, other = 0, again = 0;
	struct kvr_slot_desc d, d2;

	mk(16, 0, 0, 0);
	cr_assert_eq(
	    kvr_store_prepare_store(s, 1, 0, &k, &sz, 1, 10 * MS, &d, &x), 1);
	cr_assert_eq(kvr_store_prepare_store(s, 2, 0, (struct kvr_key[]){K(6)},
					     &sz, 1, 30 * MS, &d2, &other),
		     1);
	cr_expect_eq(cstats(1).oldest_ns, 10 * MS);
	cr_expect_eq(kvr_store_next_expiry(s), 60 * MS);
	cr_expect_eq(kvr_store_expire(s, 59 * MS, 0), 0);
	cr_expect_eq(kvr_store_expire(s, 60 * MS, 0), 1);
	/* No longer an open transfer, but its slot is held, and charged. */
	cr_expect_eq(cstats(1).transfers_open, 0u);
	cr_expect_eq(cstats(1).quar_xfers, 1u);
	cr_expect_eq(cstats(1).quar_slots, 1u);
	cr_expect_eq(cstats(1).quar_bytes, 2 * U);
	cr_expect_eq(cstats(1).reserved_bytes, 2 * U, "off the quota");
	cr_expect_eq(cstats(1).xfers_expired, 1u);
	cr_expect_eq(stats().quar_reclaimed, 1u);
	cr_expect_eq(stats().reserved_objects, 2u, "channel 2's is kept");
	cr_expect_eq(stats().xfers_expired, 1u);
	cr_expect_eq(kvr_store_next_expiry(s), 80 * MS, "out of the queue");
	audit();
	/* Never published: the key is not stored, and another channel may
	 * store it, into another slot. */
	cr_expect_eq(kvr_store_lookup(s, 0, 0, &k, 1, false, 60 * MS, NULL), 0);
	cr_assert_eq(
	    kvr_store_prepare_store(s, 3, 0, &k, &sz, 1, 60 * MS, &d2, &again),
	    1);
	cr_expect_neq(d2.off, d.off, "a quarantined slot was given out");
	cr_expect_eq(kvr_store_check_store(s, 1, x), KVR_ERR_EXPIRED);
	audit();
	/* The late commit is the worker answering: the slot comes back,
	 * and nothing of channel 3's is touched. */
	cr_expect_eq(kvr_store_commit_store(s, 1, x, 61 * MS), KVR_ERR_EXPIRED);
	cr_expect_eq(cstats(1).quar_xfers, 0u);
	cr_expect_eq(cstats(1).reserved_bytes, 0u);
	cr_expect_eq(cstats(1).oldest_ns, 0u);
	cr_expect_eq(stats().quar_released[0], 1u);
	cr_expect_eq(kvr_store_abort_store(s, 1, x, 61 * MS), KVR_ERR_EXPIRED);
	cr_expect_eq(kvr_store_commit_store(s, 3, again, 61 * MS), 0);
	cr_expect_eq(kvr_store_lookup(s, 0, 0, &k, 1, false, 61 * MS, NULL), 1);
	audit();
	/* The expired id is the channel's own business only. */
	cr_expect_eq(kvr_store_commit_store(s, 2, x, 61 * MS), -ENOENT);
	/* Closing forgets it: a new worker on channel 1 is someone else. */
	cr_assert_eq(kvr_store_channel_close(s, 1, 62 * MS, NULL), 0);
	cr_expect_eq(kvr_store_commit_store(s, 1, x, 62 * MS), -ENOENT);
	cr_expect_eq(kvr_store_commit_store(s, 2, other, 62 * MS), 0);
	audit();
}

Test(store_isolation, retrieve_stays_pinned_in_quarantine_until_its_late_commit)
{
	struct kvr_key k = K(0), big = K(9);
	struct kvr_slot_desc d;
	uint64_t rx = 0, sz = 16 * U, x = 0;

	mk(16, 0, 0, 0);
	store_n(0, 0, 1, 2 * U, 0);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, &k, 1, 0, &d, &rx), 1);
	cr_expect_eq(stats().pins, 1u);
	cr_expect_eq(kvr_store_expire(s, 50 * MS, 0), 1);
	/* The reader may still be reading: its pin stays, still charged. */
	cr_expect_eq(stats().pins, 1u);
	cr_expect_eq(cstats(1).pinned_bytes, 2 * U);
	cr_expect_eq(cstats(1).quar_bytes, 2 * U);
	cr_expect_eq(cstats(1).transfers_open, 0u);
	audit();
	/* Others still read it, and nobody evicts it. */
	cr_expect_eq(kvr_store_lookup(s, 0, 0, &k, 1, false, 51 * MS, NULL), 1);
	cr_expect_eq(
	    kvr_store_prepare_store(s, 2, 0, &big, &sz, 1, 51 * MS, &d, &x), 0);
	cr_expect_eq(d.status, KVR_SLOT_NOROOM);
	cr_expect_eq(stats().evictions, 0u);
	cr_expect_eq(kvr_store_commit_retrieve(s, 1, rx, 51 * MS),
		     KVR_ERR_EXPIRED);
	cr_expect_eq(stats().pins, 0u);
	cr_expect_eq(stats().quar_released[0], 1u);
	/* Unpinned means evictable again: a pool-wide store takes its room. */
	cr_expect_eq(
	    kvr_store_prepare_store(s, 2, 0, &big, &sz, 1, 51 * MS, &d, &x), 1);
	cr_expect_eq(stats().evictions, 1u);
	audit();
}

Test(store_isolation, quarantine_counts_against_the_reserve_quota)
{
	struct kvr_key k[3] = {K(1), K(2), K(3)};
	uint64_t sz[2] = {U, U}, x = 0, y = 0;
	struct kvr_slot_desc d[2];

	mk(16, 2 * U, 0, 0);
	cr_assert_eq(kvr_store_prepare_store(s, 1, 0, k, sz, 2, 0, d, &x), 2);
	cr_assert_eq(kvr_store_expire(s, 50 * MS, 0), 1);
	cr_expect_eq(cstats(1).quar_bytes, 2 * U);
	cr_expect_eq(
	    kvr_store_prepare_store(s, 1, 0, &k[2], sz, 1, 51 * MS, d, &y), 0);
	cr_expect_eq(d[0].status, KVR_SLOT_QUOTA,
		     "a stopped worker holds "
		     "more than its quota");
	cr_expect_eq(kvr_store_abort_store(s, 1, x, 52 * MS), KVR_ERR_EXPIRED);
	cr_expect_eq(
	    kvr_store_prepare_store(s, 1, 0, &k[2], sz, 1, 52 * MS, d, &y), 1);
	audit();
}

Test(store_isolation, close_and_detach_end_the_quarantine_by_why)
{
	struct kvr_key k[2] = {K(1), K(2)};
	uint64_t sz = U, x = 0, y = 0;
	struct kvr_store_released rel = {0};
	struct kvr_slot_desc d;

	mk(16, 0, 0, 0);
	cr_assert_eq(kvr_store_channel_open(s, 1, 0, 1000), 0);
	cr_assert_eq(kvr_store_channel_open(s, 2, 0, 1000), 0);
	cr_assert_eq(kvr_store_prepare_store(s, 1, 0, &k[0], &sz, 1, 0, &d, &x),
		     1);
	cr_assert_eq(kvr_store_prepare_store(s, 2, 0, &k[1], &sz, 1, 0, &d, &y),
		     1);
	cr_assert_eq(kvr_store_expire(s, 50 * MS, 0), 2);
	/* Channel 1's process is gone when it closes: released at once. */
	cr_assert_eq(kvr_store_channel_close(s, 1, 51 * MS, &rel), 0);
	cr_expect_eq(rel.quar_xfers, 1u);
	cr_expect_eq(rel.quar_bytes, U);
	cr_expect_eq(stats().quar_released[1], 1u);
	/* Channel 2 closed while its process lives: kept, still the uid's. */
	cr_expect_eq(kvr_store_channel_detach(s, 2, 51 * MS, &rel), 1);
	cr_expect_eq(rel.quar_kept, 1u);
	cr_expect_eq(stats().detached, 1u);
	cr_expect_eq(stats().quar_bytes, U);
	cr_expect_eq(stats().used_bytes, U);
	cr_expect_eq(kvr_store_channel_open(s, 2, 0, 1001), -EBUSY);
	audit();
	/* Its process exited. */
	cr_assert_eq(kvr_store_channel_close(s, 2, 52 * MS, &rel), 0);
	cr_expect_eq(rel.quar_xfers, 1u);
	cr_expect_eq(stats().quar_released[2], 1u);
	cr_expect_eq(stats().detached, 0u);
	cr_expect_eq(stats().used_bytes, 0u);
	cr_expect_eq(kvr_store_channel_open(s, 2, 0, 1001), 0);
	/* Detach with nothing in quarantine is a plain close. */
	cr_expect_eq(kvr_store_channel_detach(s, 2, 53 * MS, &rel), 0);
	cr_expect_eq(stats().detached, 0u);
	audit();
}

Test(store_isolation, lease_is_unknown_when_redeemed_by_other_uid_or_namespace)
{
	struct kvr_key k = K(0);
	struct kvr_slot_desc d;
	uint64_t lease = 0, rx = 0;

	mk(16, 0, 0, 0);
	cr_assert_eq(kvr_store_channel_open(s, 0, 0, 1000), 0);
	cr_assert_eq(kvr_store_channel_open(s, 1, 0, 1001), 0); /* other uid */
	cr_assert_eq(kvr_store_channel_open(s, 2, 3, 1000), 0); /* other ns */
	cr_assert_eq(kvr_store_channel_open(s, 3, 0, 1000), 0); /* same both */
	cr_expect_eq(kvr_store_channel_open(s, 0, 8, 1000), -EINVAL);
	store_n(0, 0, 1, 2 * U, 0);
	cr_assert_eq(kvr_store_lookup(s, 0, 0, &k, 1, true, 0, &lease), 1);
	/* The answer for a real lease of someone else is the answer for an
	 * id that was never issued. */
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 1, lease, 0, &d, 1, &rx),
	    -ENOENT);
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 2, lease, 0, &d, 1, &rx),
	    -ENOENT);
	cr_expect_eq(kvr_store_release_lease(s, 1, lease, 0), -ENOENT);
	cr_expect_eq(kvr_store_release_lease(s, 2, lease, 0), -ENOENT);
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 1, lease ^ 1, 0, &d, 1, &rx),
	    -ENOENT);
	cr_expect_eq(stats().leases, 1u, "a stranger changed the lease");
	/* Its maker's uid in its namespace redeems it. */
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 3, lease, 0, &d, 1, &rx), 1);
	cr_expect_eq(kvr_store_commit_retrieve(s, 3, rx, 0), 0);
	audit();
}

/* Speck64/128's test vector from the designers' paper (appendix C). */
Test(store_isolation, id_cipher_matches_speck64_128_test_vector)
{
	const uint32_t key[4] = {0x03020100, 0x0b0a0908, 0x13121110,
				 0x1b1a1918};
	struct kvr_store_id g;

	kvr_store_id_init(&g, key);
	cr_expect_eq(kvr_store_id_encrypt(&g, 0x3b7265747475432dull),
		     0x8c6fa548454e028bull, "got %016llx",
		     (unsigned long long)kvr_store_id_encrypt(
			 &g, 0x3b7265747475432dull));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

Test(store_isolation, ids_never_repeat_and_are_not_sequential_when_issued)
{
	const uint32_t key[4] = {1, 2, 3, 4};
	enum { N = 200000 };
	uint64_t *ids = malloc(N * sizeof(*ids));
	struct kvr_store_id g;
	uint32_t near = 0;

	cr_assert_not_null(ids);
	kvr_store_id_init(&g, key);
	for (uint32_t i = 0; i < N; i++) {
		ids[i] = kvr_store_id_next(&g);
		cr_assert_neq(ids[i], 0u);
		/* The next id is nowhere near the previous one. */
		if (i &&
		    (ids[i] - ids[i - 1] < 1024 || ids[i - 1] - ids[i] < 1024))
			near++;
	}
	cr_expect_eq(near, 0u, "%u consecutive ids within 1024", near);
	qsort(ids, N, sizeof(*ids), cmp_u64);
	for (uint32_t i = 1; i < N; i++)
		cr_assert_neq(ids[i], ids[i - 1], "id %016llx issued twice",
			      (unsigned long long)ids[i]);
	free(ids);
}

Test(store_isolation, namespace_counts_follow_objects_and_evict_frees_unpinned)
{
	struct kvr_key k[3] = {K(0), K(1), K(2)};
	uint64_t sz[3] = {U, U, U}, x, rx;
	struct kvr_slot_desc d[3];

	mk(16, 0, 0, 0);
	cr_assert_eq(kvr_store_prepare_store(s, 0, 5, k, sz, 3, 0, d, &x), 3);
	cr_expect_eq(kvr_store_ns_objects(s, 5), 3u, "reserved ones count");
	cr_expect_eq(kvr_store_ns_objects(s, 0), 0u);
	cr_expect_eq(kvr_store_ns_objects(s, 99), 0u);
	cr_assert_eq(kvr_store_commit_store(s, 0, x, 0), 0);
	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 5, k, 1, 0, d, &rx), 1);
	/* The pinned object stays; the two others go. */
	cr_expect_eq(kvr_store_ns_evict(s, 5), 1u);
	cr_expect_eq(kvr_store_ns_objects(s, 5), 1u);
	/* Counted as namespace evictions, inside the evictions. */
	cr_expect_eq(stats().ns_evictions, 2u);
	cr_expect_eq(stats().evictions, 2u);
	cr_expect_eq(stats().ns_evicted_bytes, stats().evicted_bytes);
	audit();
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, rx, 0), 0);
	cr_expect_eq(kvr_store_ns_evict(s, 5), 0u);
	cr_expect_eq(kvr_store_ns_objects(s, 5), 0u);
	cr_expect_eq(stats().objects, 0u);
	/* An ns beyond max_ns is refused, not counted out of bounds. */
	cr_expect_eq(kvr_store_prepare_store(s, 0, 8, k, sz, 1, 0, d, &x),
		     -EINVAL);
	audit();
}

/* What the uid of @ch holds over all its channels. */
static struct kvr_store_uid_stats ustats(uint32_t ch)
{
	struct kvr_store_uid_stats us;

	cr_assert_eq(kvr_store_uid_stats(s, ch, &us), 0);
	return us;
}

/* A pool of 16 units, per-channel quotas of 6 units reserved and pinned,
 * per-uid quotas of 8: channels 0-2 are uid 1000, channel 3 uid 2000,
 * channel 4 never opened. */
static void mk_uids(void)
{
	struct kvr_store_config c = store_config(16);

	c.max_xfers_per_chan = 8;
	c.max_leases_per_chan = 8;
	c.quota_reserved_bytes = 6 * U;
	c.quota_pinned_bytes = 6 * U;
	c.quota_uid_reserved_bytes = 8 * U;
	c.quota_uid_pinned_bytes = 8 * U;
	c.max_channels = 5; /* 4: never opened, bound by no uid */
	c.xfer_ms = 50;
	c.max_ns = 8;
	store_create(&c);
	for (uint32_t ch = 0; ch < 3; ch++)
		cr_assert_eq(kvr_store_channel_open(s, ch, 0, 1000), 0);
	cr_assert_eq(kvr_store_channel_open(s, 3, 0, 2000), 0);
}

Test(store_isolation,
     prepare_answers_quota_when_a_uids_channels_together_pass_its_quota)
{
	struct kvr_key k[3] = {K(200), K(201), K(202)};
	uint64_t sz[3] = {4 * U, 4 * U, 4 * U}, x0, x1, x2 = 1, x3;
	struct kvr_slot_desc d[3];

	mk_uids();
	/* Each channel is within its own 6 units; the uid's 8 are full
	 * after two of them. */
	cr_assert_eq(
	    kvr_store_prepare_store(s, 0, 0, &k[0], &sz[0], 1, 0, d, &x0), 1);
	cr_assert_eq(
	    kvr_store_prepare_store(s, 1, 0, &k[1], &sz[1], 1, 0, d, &x1), 1);
	cr_expect_eq(ustats(0).reserved_bytes, 8 * U);
	cr_expect_eq(ustats(2).channels, 3u);
	cr_assert_eq(
	    kvr_store_prepare_store(s, 2, 0, &k[2], &sz[2], 1, 0, d, &x2), 0);
	cr_expect_eq(d[0].status, KVR_SLOT_QUOTA, "status %d", d[0].status);
	cr_expect_eq(x2, 0u);
	cr_expect_eq(ustats(2).quota_denied, 1u);
	cr_expect_eq(cstats(2).quota_denied, 1u);
	audit();
	/* Another uid has its own aggregate: its 4 units fit. */
	cr_assert_eq(
	    kvr_store_prepare_store(s, 3, 0, &k[2], &sz[2], 1, 0, d, &x3), 1);
	cr_expect_eq(ustats(3).reserved_bytes, 4 * U);
	cr_expect_eq(ustats(3).quota_denied, 0u);
	/* A commit frees the uid's quota as it frees the channel's. */
	cr_assert_eq(kvr_store_commit_store(s, 0, x0, 0), 0);
	cr_expect_eq(ustats(1).reserved_bytes, 4 * U);
	cr_assert_eq(kvr_store_abort_store(s, 3, x3, 0), 0);
	cr_assert_eq(
	    kvr_store_prepare_store(s, 2, 0, &k[2], &sz[2], 1, 0, d, &x2), 1);
	audit();
	/* Closing a channel releases its share, and the last channel of a
	 * uid frees the uid's entry. */
	cr_assert_eq(kvr_store_channel_close(s, 1, 0, NULL), 0);
	cr_expect_eq(ustats(0).reserved_bytes, 4 * U);
	cr_expect_eq(ustats(0).channels, 2u);
	cr_assert_eq(kvr_store_channel_close(s, 3, 0, NULL), 0);
	cr_expect_eq(
	    kvr_store_uid_stats(s, 3, &(struct kvr_store_uid_stats){0}),
	    -ENOENT);
	audit();
}

Test(store_isolation, pins_stop_at_uid_pin_quota_when_its_channels_pin)
{
	struct kvr_key k[4] = {K(0), K(1), K(2), K(3)};
	struct kvr_slot_desc d[4];
	uint64_t lease = 0, rx = 0;

	mk_uids();
	store_n(4, 0, 2, 2 * U, 0);
	store_n(4, 2, 2, 2 * U, 0);
	/* Channel 0 pins 6 units (its own quota), channel 1 then only the
	 * 2 the uid has left, channel 2 none; channel 3 (another uid) 6. */
	cr_expect_eq(kvr_store_lookup(s, 0, 0, k, 4, true, 0, &lease), 3);
	cr_expect_eq(kvr_store_prepare_retrieve(s, 1, 0, k, 4, 0, d, &rx), 1);
	cr_expect_eq(ustats(1).pinned_bytes, 8 * U);
	cr_expect_eq(kvr_store_prepare_retrieve(s, 2, 0, k, 4, 0, d, &rx),
		     -EDQUOT);
	cr_expect_geq(ustats(2).quota_denied, 2u);
	cr_expect_eq(kvr_store_prepare_retrieve(s, 3, 0, k, 4, 0, d, &rx), 3);
	cr_expect_eq(ustats(3).pinned_bytes, 6 * U);
	audit();
	/* Redeeming within the uid moves pins, not the uid's total. */
	cr_expect_eq(
	    kvr_store_prepare_retrieve_lease(s, 2, lease, 0, d, 4, &rx), 3);
	cr_expect_eq(ustats(2).pinned_bytes, 8 * U);
	audit();
}
