/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of server/store/index.c: the key index (ns, 128-bit key) -> value
 * and the u64 map. Basic contracts, namespace isolation, growth, and random
 * insert/remove sequences checked against a plain array model (this is
 * what exercises backward-shift deletion inside long probe runs).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

static struct kvr_index ix;
static struct kvr_index_u64 mp;

/* The caller's records the key index checks its tag matches against:
 * here, the (ns, key) each value was last inserted for. */
enum { MAX_VAL = 200001 };
static struct {
	uint32_t ns;
	struct kvr_key key;
} rec[MAX_VAL];

static bool rec_match(const void *ctx, uint32_t val, uint32_t ns,
		      const struct kvr_key *key)
{
	(void)ctx;
	cr_assert_lt(val, MAX_VAL, "value %u was never inserted", val);
	return rec[val].ns == ns && rec[val].key.lo == key->lo &&
	       rec[val].key.hi == key->hi;
}

static int init(uint64_t hint, uint64_t seed)
{
	return kvr_index_init(&ix, hint, seed, rec_match, NULL);
}

/* Insert (ns, *k) -> val, recording the key under val first (as the
 * storage engine writes an object's key before it indexes it). */
static int ins(uint32_t ns, const struct kvr_key *k, uint32_t val)
{
	if (val < MAX_VAL) {
		rec[val].ns = ns;
		rec[val].key = *k;
	}
	return kvr_index_insert(&ix, ns, k, val);
}

static void fini(void)
{
	memset(rec, 0, sizeof(rec));
	kvr_index_fini(&ix);
	kvr_index_u64_fini(&mp);
}

TestSuite(index, .fini = fini, .timeout = 30);

static struct kvr_key key(uint64_t i)
{
	struct kvr_key k = {i * 0x9E3779B97F4A7C15ull, ~i};

	return k;
}

Test(index, find_returns_value_when_inserted)
{
	struct kvr_key k = key(1), k2 = key(2);

	cr_assert_eq(init(0, 42), 0);
	cr_expect_eq(kvr_index_find(&ix, 0, &k), KVR_INDEX_NONE);
	cr_assert_eq(ins(0, &k, 7), 0);
	cr_expect_eq(kvr_index_find(&ix, 0, &k), 7u);
	cr_expect_eq(kvr_index_find(&ix, 0, &k2), KVR_INDEX_NONE);
	cr_expect_eq(kvr_index_count(&ix), 1u);
}

Test(index, insert_returns_eexist_when_key_present)
{
	struct kvr_key k = key(1);

	cr_assert_eq(init(0, 42), 0);
	cr_assert_eq(ins(3, &k, 7), 0);
	cr_expect_eq(ins(3, &k, 8), -EEXIST);
	cr_expect_eq(kvr_index_find(&ix, 3, &k), 7u);
	k = key(9);
	cr_expect_eq(ins(3, &k, KVR_INDEX_NONE), -EINVAL);
	cr_expect_eq(kvr_index_count(&ix), 1u);
}

Test(index, namespaces_are_distinct_when_keys_are_identical)
{
	struct kvr_key k = key(5);

	cr_assert_eq(init(0, 42), 0);
	cr_assert_eq(ins(1, &k, 10), 0);
	cr_assert_eq(ins(2, &k, 20), 0);
	cr_expect_eq(kvr_index_find(&ix, 1, &k), 10u);
	cr_expect_eq(kvr_index_find(&ix, 2, &k), 20u);
	cr_expect_eq(kvr_index_find(&ix, 3, &k), KVR_INDEX_NONE);
	cr_assert_eq(kvr_index_remove(&ix, 1, &k), 0);
	cr_expect_eq(kvr_index_find(&ix, 2, &k), 20u);
}

Test(index, remove_returns_enoent_when_absent)
{
	struct kvr_key k = key(1);

	cr_assert_eq(init(0, 42), 0);
	cr_expect_eq(kvr_index_remove(&ix, 0, &k), -ENOENT);
	cr_assert_eq(ins(0, &k, 1), 0);
	cr_expect_eq(kvr_index_remove(&ix, 0, &k), 0);
	cr_expect_eq(kvr_index_remove(&ix, 0, &k), -ENOENT);
	cr_expect_eq(kvr_index_count(&ix), 0u);
}

Test(index, find_misses_when_record_under_tag_holds_another_key)
{
	struct kvr_key k = key(4), other = key(5);

	cr_assert_eq(init(0, 42), 0);
	cr_assert_eq(ins(0, &k, 3), 0);
	cr_assert_eq(kvr_index_peek(&ix, 0, &k), 3u);
	/* The record now says value 3 is another key: the tag still
	 * matches, the key does not, so neither find nor remove take it. */
	rec[3].key = other;
	cr_expect_eq(kvr_index_find(&ix, 0, &k), KVR_INDEX_NONE);
	cr_expect_eq(kvr_index_remove(&ix, 0, &k), -ENOENT);
	cr_expect_eq(kvr_index_count(&ix), 1u);
}

Test(index, all_entries_survive_when_table_grows)
{
	const uint32_t n = 100000;

	cr_assert_eq(init(0, 99), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);

		cr_assert_eq(ins(i % 3, &k, i), 0);
	}
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);

		cr_assert_eq(kvr_index_find(&ix, i % 3, &k), i, "key %u", i);
		cr_assert_eq(kvr_index_find(&ix, (i + 1) % 3, &k),
			     KVR_INDEX_NONE);
	}
	cr_expect_eq(kvr_index_count(&ix), n);
}

Test(index, reserve_prevents_growth_when_inserting_reserved_count)
{
	struct kvr_index_ent *before;

	cr_assert_eq(init(0, 1), 0);
	cr_assert_eq(kvr_index_reserve(&ix, 1000), 0);
	before = ix.ent;
	for (uint32_t i = 0; i < 1000; i++) {
		struct kvr_key k = key(i);

		cr_assert_eq(ins(0, &k, i), 0);
	}
	cr_expect_eq(ix.ent, before, "table was reallocated");
}

/* Small universe, random insert/remove: long runs, many shifts. */
Test(index, agrees_with_model_when_random_inserts_and_removes)
{
	enum { UNIV = 3000 };
	static uint32_t model[UNIV]; /* value + 1, 0 = absent */
	uint64_t x = 0xdeadbeefcafef00dull;

	memset(model, 0, sizeof(model));
	cr_assert_eq(init(0, 7), 0);
	for (uint32_t op = 0; op < 200000; op++) {
		uint32_t i;
		struct kvr_key k;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (uint32_t)(x % UNIV);
		k = key(i / 2);
		/* Two namespaces share each key value. */
		if ((x >> 32) % 2) {
			int rc = ins(i % 2, &k, op);

			cr_assert_eq(rc, model[i] ? -EEXIST : 0, "op %u", op);
			if (!model[i])
				model[i] = op + 1;
		} else {
			int rc = kvr_index_remove(&ix, i % 2, &k);

			cr_assert_eq(rc, model[i] ? 0 : -ENOENT, "op %u", op);
			model[i] = 0;
		}
		if (op % 1000 == 0) {
			uint64_t cnt = 0;

			for (uint32_t j = 0; j < UNIV; j++) {
				struct kvr_key kj = key(j / 2);
				uint32_t v = kvr_index_find(&ix, j % 2, &kj);

				cr_assert_eq(
				    v, model[j] ? model[j] - 1 : KVR_INDEX_NONE,
				    "op %u key %u", op, j);
				cnt += model[j] != 0;
			}
			cr_assert_eq(kvr_index_count(&ix), cnt);
		}
	}
}

Test(index, u64_map_agrees_with_model_when_random_ops)
{
	enum { UNIV = 5000 };
	static uint32_t model[UNIV];
	uint64_t x = 0x0123456789abcdefull;

	memset(model, 0, sizeof(model));
	cr_assert_eq(kvr_index_u64_init(&mp, 0, 3), 0);
	cr_expect_eq(kvr_index_u64_insert(&mp, 1, KVR_INDEX_NONE), -EINVAL);
	for (uint32_t op = 0; op < 200000; op++) {
		uint64_t k;
		uint32_t i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (uint32_t)(x % UNIV);
		k = (uint64_t)i << 12; /* sequential-ish, like offsets */
		if ((x >> 32) % 3) {
			int rc = kvr_index_u64_insert(&mp, k, op);

			cr_assert_eq(rc, model[i] ? -EEXIST : 0, "op %u", op);
			if (!model[i])
				model[i] = op + 1;
		} else {
			int rc = kvr_index_u64_remove(&mp, k);

			cr_assert_eq(rc, model[i] ? 0 : -ENOENT, "op %u", op);
			model[i] = 0;
		}
		if (op % 1000 == 0)
			for (uint32_t j = 0; j < UNIV; j++)
				cr_assert_eq(
				    kvr_index_u64_find(&mp, (uint64_t)j << 12),
				    model[j] ? model[j] - 1 : KVR_INDEX_NONE);
	}
}
