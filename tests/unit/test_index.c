/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of server/store/index.c: the key index (ns, 128-bit key) -> value
 * and the u64 map. Basic contracts, namespace isolation, growth (and the
 * migration from the old table to the new one it starts), and random
 * insert/remove sequences checked against a plain array model (this is
 * what exercises backward-shift deletion inside long probe runs, and, from
 * small tables, finds, inserts and removes during migrations).
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

/* Entries of the old table (the one a growth is emptying), by looking. */
static uint64_t old_entries(void)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < ix.old_slots; i++)
		n += ix.old_ent[i].val != KVR_INDEX_NONE;
	return n;
}

/* Whether value @val sits in the old table. */
static bool in_old(uint32_t val)
{
	for (uint64_t i = 0; i < ix.old_slots; i++)
		if (ix.old_ent[i].val == val)
			return true;
	return false;
}

/*
 * Insert keys 0, 1, ... (value = number) until an insert starts a growth;
 * return how many were inserted.
 */
static uint32_t fill_until_growth(void)
{
	uint32_t n = 0;

	cr_assert(!kvr_index_migrating(&ix));
	while (!kvr_index_migrating(&ix)) {
		struct kvr_key k = key(n);

		cr_assert_lt(n, MAX_VAL - 1,
			     "no insert left a migration in progress");
		cr_assert_eq(ins(0, &k, n), 0);
		n++;
	}
	return n;
}

Test(index, finds_keys_in_both_tables_when_growth_in_progress)
{
	uint32_t n, gone = KVR_INDEX_NONE, news = 0, olds = 0;
	struct kvr_key k;

	cr_assert_eq(init(1000, 5), 0);
	n = fill_until_growth();
	cr_assert_gt(n, 1000u);
	cr_assert_not_null(ix.old_ent);
	for (uint32_t i = 0; i < n; i++) {
		k = key(i);
		cr_assert_eq(kvr_index_find(&ix, 0, &k), i, "key %u", i);
		cr_assert_eq(kvr_index_peek(&ix, 0, &k), i, "key %u", i);
		if (in_old(i)) {
			olds++;
			gone = i;
		} else {
			news++;
		}
	}
	cr_assert_gt(olds, 0u);
	cr_assert_gt(news, 0u);
	cr_assert_eq(olds, old_entries());
	cr_expect_eq(kvr_index_count(&ix), n);
	/* A key still in the old table: removed from there, found nowhere. */
	k = key(gone);
	cr_assert(in_old(gone));
	cr_assert_eq(kvr_index_remove(&ix, 0, &k), 0);
	cr_expect_eq(kvr_index_find(&ix, 0, &k), KVR_INDEX_NONE);
	cr_expect_eq(kvr_index_remove(&ix, 0, &k), -ENOENT);
	cr_expect(!in_old(gone));
	cr_expect_eq(kvr_index_count(&ix), n - 1);
	/* Inserting it again puts it in the current table. */
	cr_assert_eq(ins(0, &k, gone), 0);
	cr_expect(!in_old(gone));
	cr_expect_eq(kvr_index_find(&ix, 0, &k), gone);
	cr_expect_eq(ins(0, &k, gone), -EEXIST);
	/* A key still in the old table cannot be inserted twice either. */
	for (uint32_t i = 0; i < n; i++)
		if (in_old(i)) {
			k = key(i);
			cr_expect_eq(ins(0, &k, i), -EEXIST, "key %u", i);
			break;
		}
	cr_assert(kvr_index_migrating(&ix));
	/* A reserve that must grow again finishes this migration first. */
	cr_assert_eq(kvr_index_reserve(&ix, 4 * (uint64_t)n), 0);
	cr_assert(kvr_index_migrating(&ix));
	for (uint32_t i = 0; i < n; i++) {
		k = key(i);
		cr_assert_eq(kvr_index_find(&ix, 0, &k), i, "key %u", i);
	}
	cr_expect_eq(kvr_index_count(&ix), n);
}

Test(index, moves_few_entries_per_call_when_growth_in_progress)
{
	uint32_t n, calls = 0;
	uint64_t left, max_calls;

	cr_assert_eq(init(5000, 11), 0);
	n = fill_until_growth();
	/* The insert that grew the table placed its own key in the new one
	 * and moved at most 8 old entries. */
	left = old_entries();
	cr_assert_geq(left + 1 + 8, n,
		      "%lu of %u entries left in the old table",
		      (unsigned long)left, n);
	/* Each later insert or remove moves at most 8, and passes at most
	 * 16 empty slots: this many calls are enough to finish. */
	max_calls = left / 8 + ix.old_slots / 16 + 1;
	while (kvr_index_migrating(&ix)) {
		struct kvr_key k = key(n);
		uint64_t now;

		if (calls % 2) {
			cr_assert_eq(ins(0, &k, n), 0);
			n++;
		} else {
			k = key(calls);
			cr_assert_eq(kvr_index_remove(&ix, 0, &k), 0);
		}
		calls++;
		if (!kvr_index_migrating(&ix))
			break;
		now = old_entries();
		/* A remove may take one more out of the old table. */
		cr_assert_leq(left - now, 8u + (calls % 2), "call %u", calls);
		left = now;
		cr_assert_leq(calls, max_calls);
	}
	cr_assert_null(ix.old_ent);
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);
		bool removed = i < calls && i % 2 == 0;

		cr_assert_eq(kvr_index_find(&ix, 0, &k),
			     removed ? KVR_INDEX_NONE : i, "key %u", i);
	}
}

/*
 * A table only looked up in after a growth: the steps a caller gives it
 * (kvringd's idle passes) finish the migration alone, each moving at most
 * 8 entries, and every key stays found in between.
 */
Test(index, migrate_steps_finish_a_growth_without_inserts)
{
	uint32_t n, steps = 0;
	uint64_t left, now, max_steps;

	cr_assert_eq(init(5000, 13), 0);
	cr_expect(!kvr_index_migrate_step(&ix), "a step with no migration");
	n = fill_until_growth();
	left = old_entries();
	cr_assert_gt(left, 8u);
	max_steps = left / 8 + ix.old_slots / 16 + 1;
	while (kvr_index_migrate_step(&ix)) {
		steps++;
		now = old_entries();
		cr_assert_leq(left - now, 8u, "step %u", steps);
		left = now;
		cr_assert_leq(steps, max_steps);
		if (steps % 64 == 0)
			for (uint32_t i = 0; i < n; i++) {
				struct kvr_key k = key(i);

				cr_assert_eq(kvr_index_find(&ix, 0, &k), i,
					     "key %u after step %u", i, steps);
			}
	}
	cr_expect_gt(steps, 0u);
	cr_expect(!kvr_index_migrating(&ix));
	cr_assert_null(ix.old_ent);
	cr_expect_eq(kvr_index_count(&ix), n);
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);

		cr_assert_eq(kvr_index_find(&ix, 0, &k), i, "key %u", i);
	}
	cr_expect(!kvr_index_migrate_step(&ix), "a step after the end");
}

Test(index, growth_uses_table_filled_by_inserts_before_it)
{
	const uint32_t n = 150000;
	struct kvr_index_ent *next = NULL;
	uint64_t done = 0, slots = 0;
	uint32_t growths = 0;

	cr_assert_eq(init(0, 13), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);
		bool was = kvr_index_migrating(&ix);

		next = ix.next_ent;
		done = ix.next_done;
		slots = ix.next_slots;
		cr_assert_eq(ins(0, &k, i), 0);
		if (!was && kvr_index_migrating(&ix)) {
			/* This insert grew the table into the one the
			 * inserts before it had allocated and filled. */
			cr_assert_not_null(next, "key %u", i);
			cr_assert_eq(done, slots, "key %u", i);
			cr_assert_eq(ix.ent, next, "key %u", i);
			cr_assert_eq(ix.slots, slots);
			cr_assert_null(ix.next_ent);
			growths++;
		} else if (ix.next_ent && ix.next_ent == next) {
			/* A slice at a time. */
			cr_assert_leq(ix.next_done - done, 8192 / 8);
		}
	}
	cr_expect_geq(growths, 10u);
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);

		cr_assert_eq(kvr_index_find(&ix, 0, &k), i, "key %u", i);
	}
}

/* Insert keys 0, 1, ... into an index made with room for 20 000 until the
 * next growth's table is being prepared; returns how many. */
static uint32_t insert_until_prepared(void)
{
	uint32_t n = 0;

	while (!ix.next_ent) {
		struct kvr_key k = key(n);

		cr_assert_lt(n, 30000u, "no table was prepared");
		cr_assert_eq(ins(0, &k, n), 0);
		n++;
	}
	return n;
}

Test(index, growth_fills_rest_of_prepared_table_when_reserve_comes_early)
{
	struct kvr_index_ent *next;
	uint64_t extra;
	uint32_t n;

	cr_assert_eq(init(20000, 17), 0);
	n = insert_until_prepared();
	cr_assert_lt(ix.next_done, ix.next_slots);
	next = ix.next_ent;
	/* Room for more than the current table takes: grows now. */
	extra = ix.slots - n;
	cr_assert_eq(kvr_index_reserve(&ix, extra), 0);
	cr_assert(kvr_index_migrating(&ix));
	cr_assert_eq(ix.ent, next);
	for (uint32_t i = 0; i < extra; i++, n++) {
		struct kvr_key k = key(n);

		cr_assert_eq(ins(0, &k, n), 0);
	}
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);

		cr_assert_eq(kvr_index_find(&ix, 0, &k), i, "key %u", i);
	}
	cr_expect_eq(kvr_index_count(&ix), n);
}

Test(index, growth_allocates_anew_when_reserve_exceeds_prepared_table)
{
	const uint32_t extra = 150000;
	struct kvr_index_ent *next, *grown;
	uint32_t n;

	cr_assert_eq(init(20000, 19), 0);
	n = insert_until_prepared();
	next = ix.next_ent;
	cr_assert_lt(ix.next_slots / 4 * 3, n + extra);
	cr_assert_eq(kvr_index_reserve(&ix, extra), 0);
	grown = ix.ent;
	cr_assert_neq(grown, next);
	cr_assert_null(ix.next_ent);
	/* What was reserved fits without another growth. */
	for (uint32_t i = 0; i < extra; i++, n++) {
		struct kvr_key k = key(n);

		cr_assert_eq(ins(0, &k, n), 0);
	}
	cr_expect_eq(ix.ent, grown, "table was reallocated");
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_key k = key(i);

		cr_assert_eq(kvr_index_find(&ix, 0, &k), i, "key %u", i);
	}
}

/*
 * Growth after growth from a small table, with inserts, removes and finds
 * of keys in both tables while each migration runs, against a model.
 */
Test(index, agrees_with_model_when_ops_interleave_with_migrations)
{
	enum { UNIV = 40000, ROUNDS = 8, OPS = 60000 };
	static bool model[UNIV]; /* the value of key i is i */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint32_t growths = 0, migrating_ops = 0;
	uint32_t old_finds = 0, old_removes = 0, old_inserts = 0;

	for (uint32_t round = 0; round < ROUNDS; round++) {
		uint64_t cnt = 0;
		bool was = false;

		memset(model, 0, sizeof(model));
		kvr_index_fini(&ix);
		cr_assert_eq(init(round % 2 ? 0 : 100, round), 0);
		for (uint32_t op = 0; op < OPS; op++) {
			uint32_t i, r, v;
			struct kvr_key k;
			bool look = false;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			i = (uint32_t)(x % UNIV);
			r = (uint32_t)(x >> 40) % 16;
			k = key(i / 2);
			/* Now and then, see which table the key is in
			 * (a scan of the old one). */
			if (kvr_index_migrating(&ix)) {
				migrating_ops++;
				look = model[i] && op % 4 == 0 && in_old(i);
			}
			if (r < 9) { /* inserts win: the table keeps growing */
				int rc = ins(i % 2, &k, i);

				cr_assert_eq(rc, model[i] ? -EEXIST : 0,
					     "round %u op %u", round, op);
				old_inserts += look;
				cnt += !model[i];
				model[i] = true;
			} else if (r < 14) {
				int rc = kvr_index_remove(&ix, i % 2, &k);

				cr_assert_eq(rc, model[i] ? 0 : -ENOENT,
					     "round %u op %u", round, op);
				old_removes += look;
				cnt -= model[i];
				model[i] = false;
			} else {
				old_finds += look;
			}
			v = kvr_index_find(&ix, i % 2, &k);
			cr_assert_eq(v, model[i] ? i : KVR_INDEX_NONE,
				     "round %u op %u", round, op);
			/* And one other key, present or not. */
			i = (uint32_t)((x >> 20) % UNIV);
			k = key(i / 2);
			v = kvr_index_find(&ix, i % 2, &k);
			cr_assert_eq(v, model[i] ? i : KVR_INDEX_NONE,
				     "round %u op %u key %u", round, op, i);
			cr_assert_eq(kvr_index_count(&ix), cnt);
			if (kvr_index_migrating(&ix) && !was)
				growths++;
			was = kvr_index_migrating(&ix);
			if (op % 5000 == 0 || (was && op % 97 == 0))
				for (uint32_t j = 0; j < UNIV; j++) {
					k = key(j / 2);
					v = kvr_index_find(&ix, j % 2, &k);
					cr_assert_eq(
					    v, model[j] ? j : KVR_INDEX_NONE,
					    "round %u op %u key %u", round, op,
					    j);
				}
		}
	}
	/* The sequence did what it is for. */
	cr_expect_geq(growths, 5 * ROUNDS, "%u growths", growths);
	cr_expect_geq(migrating_ops, 10000u);
	cr_expect_geq(old_finds, 100u);
	cr_expect_geq(old_removes, 100u);
	cr_expect_geq(old_inserts, 100u);
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
