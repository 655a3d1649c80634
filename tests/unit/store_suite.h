/* SPDX-License-Identifier: MIT */
/*
 * store_suite.h - the set-up the storage-engine suites share
 * (tests/unit/test_store.c, test_store_isolation.c, test_store_l2.c): the
 * engine under test in the file-scope `s`, its teardown, a small default
 * configuration counted in units of U bytes so expectations are exact, the
 * key of sequence number i, the audit that must pass after every step that
 * changes state, and the global counters. Set-up failures fail the test
 * (Criterion asserts). Header-only with static inline functions, so each
 * suite stays one file for the CMake glob; not for any other suite.
 */
#ifndef KVR_STORE_SUITE_H
#define KVR_STORE_SUITE_H

#include <stdint.h>

#include <criterion/criterion.h>

#include <kvring/store.h>

#define U  64u	      /* bytes per pool unit */
#define MS 1000000ull /* ns per ms */

/* The engine of the running test; teardown() destroys it. */
static struct kvr_store *s;

static inline void teardown(void)
{
	kvr_store_destroy(s);
	s = NULL;
}

/* The suites' defaults: a pool of @units * U bytes, U-aligned, 4 channels,
 * 16 keys per request, 4 transfers and leases per channel, 100 ms leases,
 * a fixed hash seed. Callers change fields before store_create(). */
static inline struct kvr_store_config store_config(uint64_t units)
{
	struct kvr_store_config c = {
	    .pool_bytes = units * U,
	    .align = U,
	    .lease_ms = 100,
	    .max_channels = 4,
	    .max_keys = 16,
	    .max_xfers_per_chan = 4,
	    .max_leases_per_chan = 4,
	    .hash_seed = 0x5eed,
	};

	return c;
}

/* Create `s` from @c; fails the test if the engine refuses it. */
static inline void store_create(const struct kvr_store_config *c)
{
	int rc = kvr_store_create(c, &s);

	cr_assert_eq(rc, 0, "kvr_store_create: %d", rc);
}

/* Key @i: distinct for distinct i, well mixed. */
static inline struct kvr_key K(uint64_t i) {
	struct kvr_key k = {i * 0x9E3779B97F4A7C15ull + 1, i ^ 0xabcdef};

	return k;
}

/* The engine's own consistency audit; fails the test with its reason. */
static inline void
audit(void)
{
	char msg[256];
	int rc = kvr_store_audit(s, msg, sizeof(msg));

	cr_assert_eq(rc, 0, "audit: %s", msg);
}

static inline struct kvr_store_stats stats(void)
{
	struct kvr_store_stats st;

	kvr_store_stats(s, &st);
	return st;
}

#endif /* KVR_STORE_SUITE_H */
