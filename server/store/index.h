/* SPDX-License-Identifier: MIT */
/*
 * index.h - kvringd's private hash tables: the key index, which maps a
 * (namespace, 128-bit key) pair to an object number, and a small map from
 * a 64-bit integer to a 32-bit value, used for transfer/lease ids and for
 * the allocator's free extents.
 *
 * Both are open-addressing tables with linear probing and backward-shift
 * deletion (no tombstones), so a find costs one or two cache lines however
 * long the server has been running. The u64 map grows by rehashing all its
 * entries in one call; the key index grows incrementally (see struct
 * kvr_index). kvr_index_reserve()/kvr_index_u64_reserve() let a caller
 * make room *before* it starts changing anything, so that a request is
 * all-or-nothing. They know nothing about objects: values are opaque.
 *
 * The key index keeps 8 bytes per slot: a 32-bit tag (the top half of the
 * key's keyed hash, which also places the entry) and the value. The key
 * itself is stored once, by the caller, with the value it names: a find
 * asks the caller's match function whether the value under a matching tag
 * is really this key (one look at the caller's record, which a lookup reads
 * next anyway). Its table is 4/3 of the entries it was sized for, not a
 * power of two: a slot is placed by multiplying the tag by the size.
 *
 * Ownership: the caller owns the struct (init/fini); the table owns its
 * entry array. Not thread-safe: kvringd's event-loop thread is the only
 * user (DESIGN.md rule 3).
 */
#ifndef KVR_SERVER_INDEX_H
#define KVR_SERVER_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvring/proto.h> /* struct kvr_key */

/* The value find() returns when the key is absent; never a valid value. */
#define KVR_INDEX_NONE UINT32_MAX

/* One slot of the key index (8 bytes). val == KVR_INDEX_NONE: empty. */
struct kvr_index_ent {
	uint32_t tag; /* the top 32 bits of the key's hash */
	uint32_t val;
};

/*
 * kvr_index_match_fn - whether value @val, which the index holds under a
 * tag equal to (ns, *key)'s, was inserted for exactly (ns, *key). Called by
 * find, insert and remove; @ctx is what kvr_index_init() was given.
 */
typedef bool (*kvr_index_match_fn)(const void *ctx, uint32_t val, uint32_t ns,
				   const struct kvr_key *key);

/*
 * struct kvr_index - key index. All fields private.
 * The hash of (ns, key) is keyed by a per-server random seed: keys are
 * already XXH3 output, but a hostile worker chooses its keys, and a fixed,
 * public hash would let it pile every key into one probe run.
 *
 * Growth is incremental: a growth makes a table about twice as large
 * current and keeps the previous one as the old table; each later insert
 * or remove that succeeds moves a few entries (at most 8, passing at most
 * 16 empty slots) from the old table to the current one, and the old table
 * is freed once empty. While an old table exists, finds and removes look
 * in both. The larger table is allocated and filled with empty slots ahead
 * of the growth, 8 KiB per insert, by the inserts that bring the current
 * table close to full. So every call costs O(1) amortized and is bounded
 * by a constant number of probe runs, except a reserve that asks for more
 * than the prepared table holds (or comes before it is ready), which
 * allocates or fills the rest itself.
 */
struct kvr_index {
	struct kvr_index_ent *ent;     /* the current table */
	uint64_t slots;		       /* capacity: any size >= 16 */
	uint64_t count;		       /* live entries, both tables */
	struct kvr_index_ent *old_ent; /* being emptied into ent, or NULL */
	uint64_t old_slots;
	uint64_t mig;			/* old slots below this one are empty */
	struct kvr_index_ent *next_ent; /* the next growth's, or NULL */
	uint64_t next_slots;
	uint64_t next_done; /* next slots below this one are filled */
	uint64_t seed[3];
	kvr_index_match_fn match;
	const void *ctx;
};

/*
 * kvr_index_init - set up an empty key index.
 * @capacity_hint: number of entries expected (the table is sized so that
 *                 this many fit without a rehash); 0 picks a small table.
 * @seed: per-server secret (from getrandom() at start-up).
 * @match, @ctx: how a value is checked against a key (see above).
 * Return: 0, -EINVAL if @ix or @match is NULL, -ENOMEM.
 */
int kvr_index_init(struct kvr_index *ix, uint64_t capacity_hint, uint64_t seed,
		   kvr_index_match_fn match, const void *ctx);

/* kvr_index_fini - free the table; accepts NULL and a zeroed struct. */
void kvr_index_fini(struct kvr_index *ix);

/*
 * kvr_index_reserve - make sure @extra more inserts cannot fail.
 * Return: 0, or -ENOMEM (nothing changed).
 */
int kvr_index_reserve(struct kvr_index *ix, uint64_t extra);

/* kvr_index_find - the value stored for (ns, *key), or KVR_INDEX_NONE. */
uint32_t kvr_index_find(const struct kvr_index *ix, uint32_t ns,
			const struct kvr_key *key);

/*
 * kvr_index_prefetch - start loading the slot where (ns, *key)'s probe
 * begins, so a find for it a little later does not wait on memory: a
 * request of n keys prefetches all n before it finds the first.
 */
void kvr_index_prefetch(const struct kvr_index *ix, uint32_t ns,
			const struct kvr_key *key);

/*
 * kvr_index_peek - the first value under (ns, *key)'s tag, not checked
 * against the key (no match call), or KVR_INDEX_NONE: what to prefetch
 * before the find that checks it.
 */
uint32_t kvr_index_peek(const struct kvr_index *ix, uint32_t ns,
			const struct kvr_key *key);

/*
 * kvr_index_insert - add (ns, *key) -> val.
 * Return: 0, -EEXIST if the key is present (nothing changed), -EINVAL if
 * val is KVR_INDEX_NONE, -ENOMEM if the table had to grow and could not.
 */
int kvr_index_insert(struct kvr_index *ix, uint32_t ns,
		     const struct kvr_key *key, uint32_t val);

/*
 * kvr_index_remove - delete (ns, *key).
 * Return: 0, or -ENOENT if absent. Never allocates.
 */
int kvr_index_remove(struct kvr_index *ix, uint32_t ns,
		     const struct kvr_key *key);

/* kvr_index_count - number of live entries. */
uint64_t kvr_index_count(const struct kvr_index *ix);

/*
 * kvr_index_migrating - whether entries of a previous, smaller table are
 * still to move into the current one (the last growth is not finished).
 */
bool kvr_index_migrating(const struct kvr_index *ix);

/*
 * kvr_index_migrate_step - one step of a running migration, the step an
 * insert or remove takes (at most 8 entries moved, 16 empty slots passed);
 * for a caller with idle time, so that a table only looked up in still
 * finishes its migration. Return: whether the migration still runs after
 * it (false: none ran, or this step ended it and freed the old table).
 */
bool kvr_index_migrate_step(struct kvr_index *ix);

/* ---- u64 -> u32 map ---------------------------------------------------- */

/* One slot of the u64 map; val == KVR_INDEX_NONE: empty. */
struct kvr_index_u64_ent {
	uint64_t key;
	uint32_t val;
	uint32_t pad;
};

/* struct kvr_index_u64 - integer map. All fields private. */
struct kvr_index_u64 {
	struct kvr_index_u64_ent *ent;
	uint64_t mask;
	uint64_t count;
	uint64_t seed;
};

/* Same contracts as the key index functions above. */
int kvr_index_u64_init(struct kvr_index_u64 *m, uint64_t capacity_hint,
		       uint64_t seed);
void kvr_index_u64_fini(struct kvr_index_u64 *m);
int kvr_index_u64_reserve(struct kvr_index_u64 *m, uint64_t extra);
uint32_t kvr_index_u64_find(const struct kvr_index_u64 *m, uint64_t key);
int kvr_index_u64_insert(struct kvr_index_u64 *m, uint64_t key, uint32_t val);
int kvr_index_u64_remove(struct kvr_index_u64 *m, uint64_t key);
uint64_t kvr_index_u64_count(const struct kvr_index_u64 *m);

#endif /* KVR_SERVER_INDEX_H */
