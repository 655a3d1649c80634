/* SPDX-License-Identifier: MIT */
/*
 * index.c - the key index and the u64 map of kvringd (see index.h).
 *
 * Open addressing, linear probing, at most 3/4 full, backward-shift delete.
 * With linear probing a lookup touches consecutive memory, and backward
 * shift keeps probe runs as short as they were before the delete, so a
 * server that has inserted and deleted billions of keys probes as little as
 * a fresh one (tombstones would not). This file owns the tables only; what
 * the values mean is the caller's business (store.c, alloc.c).
 *
 * The key index grows incrementally. A growth allocates a table about twice as
 * large and makes it current; the previous one becomes the old table, and
 * entries move out of it a few at a time: each insert and each remove that
 * succeeds ends with a migration step, which works through the old table in
 * slot order from slot `mig`: it advances `mig` past an empty slot, and when
 * slot `mig` is occupied it moves the block of occupied slots starting there
 * into the current table (each entry placed by its tag, no key read), from the
 * block's last entry backwards, emptying each slot it moves; it stops after
 * KEY_MIG_MOVES moves or KEY_MIG_SLOTS empty slots. When `mig` reaches the end
 * the old table is freed. Finds, peeks, prefetches and removes look in the
 * current table, then in the old one; inserts go to the current one only, so a
 * key is in one table at a time, and the count is of both. The current table is
 * sized for the whole count, so the entries still to move always have room in
 * it.
 *
 * The larger table is made ready before it is needed: the inserts that bring
 * the current table close to full (as many as it takes to fill the next table
 * KEY_PREP_BYTES per insert, plus KEY_PREP_SLACK) allocate it and fill it with
 * the empty marker a slice per insert. The growth takes it, filling whatever
 * slice is left; a reserve too large for it allocates and fills a table of its
 * own, as a growth without a prepared table does. So the next table's memory is
 * held a little earlier than the growth, and only close to it: a table sized
 * for its entries up front (some 1.1 * 10^5 of them or more) never prepares one
 * while it holds no more than it was sized for.
 *
 * Why every entry not yet moved stays findable: a linear-probing table is valid
 * when each entry is reached from its home without crossing an empty slot. The
 * old table changes only in two ways, and both keep it valid: a remove's
 * backward-shift delete, and a migration step emptying the last slot of a block
 * of occupied slots (the slot before an empty one), which lies on no other
 * entry's path from its home. Slots [0, mig) of the old table are empty: a step
 * advances mig only past an empty slot, and no change writes an entry below
 * mig. A step only empties slots; a delete starts at an occupied slot, so at or
 * past mig, and moves entries only backwards within the run that follows the
 * hole, stopping at the run's first empty slot. The one backwards move that
 * goes to a higher index is across the wrap, from slot 0 upwards to the end of
 * the table: while mig is 0 that writes no slot below mig, and once mig > 0
 * slot 0 is empty, so no run crosses the wrap at all and every walk ends before
 * the end of the table. (So a block that starts at mig > 0 ends before the
 * table does; a block from slot 0 does too, as the table is never full.)
 *
 * Cost: a find or remove probes both tables while a migration runs (the old one
 * only for keys whose home there is not below mig); an insert or remove also
 * moves at most KEY_MIG_MOVES entries (each a place in the current table, one
 * probe run), after looking for the end of the block (a walk as long as a
 * delete's), and passes at most KEY_MIG_SLOTS empty slots; close to a growth an
 * insert also fills KEY_PREP_BYTES of the next table. A growth moves nothing,
 * and fills only what the inserts before it left (nothing, unless a reserve of
 * many entries came early); without a prepared table it allocates and fills
 * one. A migration takes at most (old entries / KEY_MIG_MOVES + old slots /
 * KEY_MIG_SLOTS) steps, under a fifth of the old slots at 3/4 load, while the
 * next growth comes after about 3/4 of the old slots in net inserts, each with
 * its step: the migration is over long before. A reserve that must grow while
 * one still runs (only one asking for about as many entries as are held, at
 * once) finishes it first, in that call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hugemem.h"
#include "index.h"

/* Smallest table, in slots (a power of two for the u64 map). */
#define MIN_SLOTS 16u

/* 64x64->128 multiply, folded: the core of the hash (as in wyhash/mum). */
static inline uint64_t mum(uint64_t a, uint64_t b)
{
	__uint128_t p = (__uint128_t)a * b;

	return (uint64_t)p ^ (uint64_t)(p >> 64);
}

/* splitmix64: expands one seed into independent-looking words. */
static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/*
 * Slots needed for @n entries at <= 3/4 load, as a power of two, or 0 on
 * overflow. The caller treats 0 as -ENOMEM. (The u64 map's sizes.)
 */
static uint64_t slots_for(uint64_t n)
{
	uint64_t want, cap = MIN_SLOTS;

	if (n > (UINT64_MAX / 4) / 2)
		return 0;
	want = n + n / 3 + 1;
	while (cap < want)
		cap <<= 1;
	/* An entry array must stay addressable by size_t. */
	if (cap > SIZE_MAX / sizeof(struct kvr_index_u64_ent))
		return 0;
	return cap;
}

/* ==== Key index ==== */

/* Most slots a key table may have: a tag places an entry among 2^32. */
#define KEY_MAX_SLOTS ((uint64_t)UINT32_MAX + 1)

/* A migration step, per insert or remove, ends after this many empty old
 * slots passed or this many entries moved, whichever comes first. */
#define KEY_MIG_SLOTS 16u
#define KEY_MIG_MOVES 8u

/* The next table is filled this many bytes per insert, starting this many
 * inserts earlier than that alone needs (see key_prepare). */
#define KEY_PREP_BYTES 8192u
#define KEY_PREP_SLACK 1024u

/*
 * Slots for @n keys at <= 3/4 load: exactly 4/3 of them (no power of two,
 * so a table sized for its objects wastes nothing), at least MIN_SLOTS;
 * 0 when that is more than a tag can place.
 */
static uint64_t key_slots_for(uint64_t n)
{
	uint64_t want;

	if (n > KEY_MAX_SLOTS)
		return 0;
	/* 4/3, and a little over: a full store's next request (which
	 * reserves before it evicts) should not double the table. */
	want = n + (n + 2) / 3 + n / 64 + 64;
	if (want < MIN_SLOTS)
		want = MIN_SLOTS;
	return want > KEY_MAX_SLOTS ? 0 : want;
}

/* Entries a table of @slots holds before it must grow (3/4 load). */
static inline uint64_t key_limit(uint64_t slots)
{
	return slots / 4 * 3 + (slots % 4) * 3 / 4;
}

/*
 * Keyed hash of (ns, key), of which the tag is the top 32 bits. Two folded
 * multiplies: one mixes the two key halves with secret words, the second
 * folds in the namespace. Without the seed, choosing keys that collide is
 * no easier than guessing the seed.
 */
static inline uint32_t key_tag(const struct kvr_index *ix, uint32_t ns,
			       const struct kvr_key *key)
{
	uint64_t h = mum(key->lo ^ ix->seed[0], key->hi ^ ix->seed[1]);

	return (uint32_t)(mum(h ^ ((uint64_t)ns << 32 | ns), ix->seed[2]) >>
			  32);
}

/* The slot a tag's probe starts at: the tag scaled to the table. */
static inline uint64_t key_home(uint64_t slots, uint32_t tag)
{
	return ((uint64_t)tag * slots) >> 32;
}

static inline uint64_t key_next(uint64_t slots, uint64_t i)
{
	return i + 1 == slots ? 0 : i + 1;
}

/* A table of @slots, not yet filled (see key_fill). */
static struct kvr_index_ent *key_alloc_raw(uint64_t slots)
{
	size_t bytes = (size_t)slots * sizeof(struct kvr_index_ent);
	struct kvr_index_ent *e = malloc(bytes);

	if (e)
		kvr_hugemem_advise(e, bytes);
	return e;
}

/* Make slots [@from, @to) of @e empty: val == KVR_INDEX_NONE, which is
 * exactly what 0xff bytes give. */
static void key_fill(struct kvr_index_ent *e, uint64_t from, uint64_t to)
{
	memset(e + from, 0xff, (size_t)(to - from) * sizeof(*e));
}

static int key_alloc(struct kvr_index_ent **out, uint64_t slots)
{
	struct kvr_index_ent *e = key_alloc_raw(slots);

	if (!e)
		return -ENOMEM;
	key_fill(e, 0, slots);
	*out = e;
	return 0;
}

/* Put an entry known to be absent into table @ent of @slots, which has
 * room; no growth. The tag places it: no key is read. */
static void key_place(struct kvr_index_ent *ent, uint64_t slots,
		      struct kvr_index_ent src)
{
	uint64_t i = key_home(slots, src.tag);

	while (ent[i].val != KVR_INDEX_NONE)
		i = key_next(slots, i);
	ent[i] = src;
}

/* The slot of table @ent (@slots) holding (ns, *key), whose tag is @tag,
 * or @slots when it is absent there. */
static uint64_t key_lookup(const struct kvr_index *ix,
			   const struct kvr_index_ent *ent, uint64_t slots,
			   uint32_t tag, uint32_t ns, const struct kvr_key *key)
{
	uint64_t i = key_home(slots, tag);

	for (;;) {
		const struct kvr_index_ent *e = &ent[i];

		if (e->val == KVR_INDEX_NONE)
			return slots;
		if (e->tag == tag && ix->match(ix->ctx, e->val, ns, key))
			return i;
		i = key_next(slots, i);
	}
}

/* Slots from @a forward to @b, around the end of the table. */
static inline uint64_t key_dist(uint64_t slots, uint64_t a, uint64_t b)
{
	return b >= a ? b - a : b + slots - a;
}

/*
 * Empty slot @i of table @ent (@slots) by backward shift: walk the run
 * after the hole; an entry may move back into the hole when its home slot
 * is not inside (hole, j], i.e. when the distance from its home to j is at
 * least the distance from the hole to j. The run ends at the first empty
 * slot. An entry's home comes from its tag: no key is read. Entries only
 * move to earlier positions of their own run, never past an empty slot.
 */
static void key_delete(struct kvr_index_ent *ent, uint64_t slots, uint64_t i)
{
	for (uint64_t j = i;;) {
		struct kvr_index_ent *e;
		uint64_t home;

		j = key_next(slots, j);
		e = &ent[j];
		if (e->val == KVR_INDEX_NONE)
			break;
		home = key_home(slots, e->tag);
		if (key_dist(slots, home, j) >= key_dist(slots, i, j)) {
			ent[i] = *e;
			i = j;
		}
	}
	ent[i].val = KVR_INDEX_NONE;
}

/*
 * Move entries of the old table into the current one, from slot mig on:
 * each block of occupied slots from its last entry back to its first.
 * Stop once @max_slots empty old slots were passed or @max_moves entries
 * moved; free the old table once every slot of it was passed. See the top
 * of this file for why every entry not yet moved stays where a probe of
 * the old table finds it.
 */
static void key_migrate(struct kvr_index *ix, uint64_t max_slots,
			uint64_t max_moves)
{
	struct kvr_index_ent *old = ix->old_ent;
	uint64_t empty = 0, moved = 0, last;

	if (!old)
		return;
	while (ix->mig < ix->old_slots && empty < max_slots &&
	       moved < max_moves) {
		if (old[ix->mig].val == KVR_INDEX_NONE) {
			ix->mig++;
			empty++;
			continue;
		}
		/* The last entry of the block: the next slot is empty, or
		 * is slot 0 around the wrap, which is empty once mig > 0
		 * (and a block from slot 0 ends before the table does). */
		last = ix->mig;
		while (last + 1 < ix->old_slots &&
		       old[last + 1].val != KVR_INDEX_NONE)
			last++;
		for (;;) {
			key_place(ix->ent, ix->slots, old[last]);
			old[last].val = KVR_INDEX_NONE;
			moved++;
			if (last == ix->mig || moved == max_moves)
				break;
			last--;
		}
	}
	if (ix->mig == ix->old_slots) {
		free(old);
		ix->old_ent = NULL;
		ix->old_slots = 0;
		ix->mig = 0;
	}
}

int kvr_index_init(struct kvr_index *ix, uint64_t capacity_hint, uint64_t seed,
		   kvr_index_match_fn match, const void *ctx)
{
	uint64_t slots = key_slots_for(capacity_hint);
	int rc;

	if (!ix || !match)
		return -EINVAL;
	if (!slots)
		return -ENOMEM;
	memset(ix, 0, sizeof(*ix));
	rc = key_alloc(&ix->ent, slots);
	if (rc < 0)
		return rc;
	ix->slots = slots;
	ix->match = match;
	ix->ctx = ctx;
	for (int i = 0; i < 3; i++)
		ix->seed[i] = splitmix(&seed) | 1;
	return 0;
}

void kvr_index_fini(struct kvr_index *ix)
{
	if (!ix)
		return;
	free(ix->ent);
	free(ix->old_ent);
	free(ix->next_ent);
	ix->ent = NULL;
	ix->old_ent = NULL;
	ix->next_ent = NULL;
	ix->next_slots = 0;
	ix->next_done = 0;
	ix->count = 0;
	ix->slots = 0;
	ix->old_slots = 0;
	ix->mig = 0;
}

/* Slots of the table a growth to hold @need entries allocates. */
static uint64_t key_grow_slots(const struct kvr_index *ix, uint64_t need)
{
	/* Grow at least twofold, so that growth costs O(1) per insert. */
	if (need < ix->slots / 4 * 3 * 2)
		need = ix->slots / 4 * 3 * 2;
	return key_slots_for(need);
}

/*
 * Prepare the table of the next growth ahead of it: once the inserts left
 * before the current table is full are about as many as it takes to fill
 * the next one KEY_PREP_BYTES at a time (plus KEY_PREP_SLACK, for reserves
 * of a whole request), allocate it, and fill a slice of it per call. Not
 * while a migration runs (it ends long before), and nothing is lost when
 * the allocation fails: the growth tries again.
 */
static void key_prepare(struct kvr_index *ix)
{
	uint64_t limit = key_limit(ix->slots), slots, to;

	if (ix->old_ent)
		return;
	if (!ix->next_ent) {
		slots = key_grow_slots(ix, limit + 1);
		if (!slots || ix->count + KEY_PREP_SLACK +
				      slots * sizeof(struct kvr_index_ent) /
					  KEY_PREP_BYTES <
				  limit)
			return;
		ix->next_ent = key_alloc_raw(slots);
		if (!ix->next_ent)
			return;
		ix->next_slots = slots;
		ix->next_done = 0;
	}
	to = ix->next_done + KEY_PREP_BYTES / sizeof(struct kvr_index_ent);
	if (to > ix->next_slots)
		to = ix->next_slots;
	key_fill(ix->next_ent, ix->next_done, to);
	ix->next_done = to;
}

int kvr_index_reserve(struct kvr_index *ix, uint64_t extra)
{
	struct kvr_index_ent *e;
	uint64_t need, slots;
	int rc;

	if (extra > UINT64_MAX - ix->count)
		return -ENOMEM;
	/* The count includes the entries still in the old table: all of
	 * them end up in the current one. */
	need = ix->count + extra;
	/* Fits at <= 3/4 load already? */
	if (need <= key_limit(ix->slots))
		return 0;
	slots = key_grow_slots(ix, need);
	if (!slots)
		return -ENOMEM;
	if (ix->next_ent && ix->next_slots >= slots) {
		/* The table the last inserts prepared: fill what is left. */
		e = ix->next_ent;
		slots = ix->next_slots;
		key_fill(e, ix->next_done, slots);
		ix->next_ent = NULL;
	} else {
		rc = key_alloc(&e, slots);
		if (rc < 0)
			return rc;
		free(ix->next_ent); /* too small for this reserve */
		ix->next_ent = NULL;
	}
	ix->next_slots = 0;
	ix->next_done = 0;
	/* Only one old table at a time: one still being emptied is emptied
	 * now, into the current table, which has room for all entries. */
	key_migrate(ix, UINT64_MAX, UINT64_MAX);
	ix->old_ent = ix->ent;
	ix->old_slots = ix->slots;
	ix->mig = 0;
	ix->ent = e;
	ix->slots = slots;
	return 0;
}

/*
 * Whether the entry under @tag may be in the old table: not when there is
 * none, nor when its home there is below mig. An entry at slot p >= mig
 * is reached from its home through occupied slots only, so a home below
 * mig would put the empty slot mig - 1 (or, around the wrap, the empty
 * slot 0) on that path. Saves a probe of the old table (a cache miss) for
 * the keys whose old part is already emptied.
 */
static inline bool key_maybe_old(const struct kvr_index *ix, uint32_t tag)
{
	return ix->old_ent && key_home(ix->old_slots, tag) >= ix->mig;
}

bool kvr_index_migrating(const struct kvr_index *ix)
{
	return ix->old_ent != NULL;
}

bool kvr_index_migrate_step(struct kvr_index *ix)
{
	key_migrate(ix, KEY_MIG_SLOTS, KEY_MIG_MOVES);
	return ix->old_ent != NULL;
}

uint32_t kvr_index_find(const struct kvr_index *ix, uint32_t ns,
			const struct kvr_key *key)
{
	uint32_t tag = key_tag(ix, ns, key);
	uint64_t i = key_lookup(ix, ix->ent, ix->slots, tag, ns, key);

	if (i < ix->slots)
		return ix->ent[i].val;
	if (!key_maybe_old(ix, tag))
		return KVR_INDEX_NONE;
	i = key_lookup(ix, ix->old_ent, ix->old_slots, tag, ns, key);
	return i < ix->old_slots ? ix->old_ent[i].val : KVR_INDEX_NONE;
}

void kvr_index_prefetch(const struct kvr_index *ix, uint32_t ns,
			const struct kvr_key *key)
{
	uint32_t tag = key_tag(ix, ns, key);

	__builtin_prefetch(&ix->ent[key_home(ix->slots, tag)]);
	if (key_maybe_old(ix, tag))
		__builtin_prefetch(&ix->old_ent[key_home(ix->old_slots, tag)]);
}

/* The first value under @tag in table @ent (@slots), or KVR_INDEX_NONE. */
static uint32_t key_peek(const struct kvr_index_ent *ent, uint64_t slots,
			 uint32_t tag)
{
	uint64_t i = key_home(slots, tag);

	for (;;) {
		const struct kvr_index_ent *e = &ent[i];

		if (e->val == KVR_INDEX_NONE || e->tag == tag)
			return e->val;
		i = key_next(slots, i);
	}
}

uint32_t kvr_index_peek(const struct kvr_index *ix, uint32_t ns,
			const struct kvr_key *key)
{
	uint32_t tag = key_tag(ix, ns, key);
	uint32_t v = key_peek(ix->ent, ix->slots, tag);

	if (v == KVR_INDEX_NONE && key_maybe_old(ix, tag))
		v = key_peek(ix->old_ent, ix->old_slots, tag);
	return v;
}

int kvr_index_insert(struct kvr_index *ix, uint32_t ns,
		     const struct kvr_key *key, uint32_t val)
{
	struct kvr_index_ent n = {key_tag(ix, ns, key), val};
	int rc;

	if (val == KVR_INDEX_NONE)
		return -EINVAL;
	if (kvr_index_find(ix, ns, key) != KVR_INDEX_NONE)
		return -EEXIST;
	rc = kvr_index_reserve(ix, 1);
	if (rc < 0)
		return rc;
	key_place(ix->ent, ix->slots, n);
	ix->count++;
	key_migrate(ix, KEY_MIG_SLOTS, KEY_MIG_MOVES);
	key_prepare(ix);
	return 0;
}

int kvr_index_remove(struct kvr_index *ix, uint32_t ns,
		     const struct kvr_key *key)
{
	uint32_t tag = key_tag(ix, ns, key);
	uint64_t i = key_lookup(ix, ix->ent, ix->slots, tag, ns, key);

	if (i < ix->slots) {
		key_delete(ix->ent, ix->slots, i);
	} else {
		if (!key_maybe_old(ix, tag))
			return -ENOENT;
		i = key_lookup(ix, ix->old_ent, ix->old_slots, tag, ns, key);
		if (i == ix->old_slots)
			return -ENOENT;
		key_delete(ix->old_ent, ix->old_slots, i);
	}
	ix->count--;
	key_migrate(ix, KEY_MIG_SLOTS, KEY_MIG_MOVES);
	return 0;
}

uint64_t kvr_index_count(const struct kvr_index *ix)
{
	return ix->count;
}

/* ==== u64 map ==== */

/* Ids and offsets are sequential; one keyed multiply spreads them. */
static inline uint64_t u64_hash(const struct kvr_index_u64 *m, uint64_t k)
{
	return mum(k ^ m->seed, 0x9E3779B97F4A7C15ull);
}

static int u64_alloc(struct kvr_index_u64_ent **out, uint64_t slots)
{
	struct kvr_index_u64_ent *e = malloc((size_t)slots * sizeof(*e));

	if (!e)
		return -ENOMEM;
	memset(e, 0xff, (size_t)slots * sizeof(*e));
	*out = e;
	return 0;
}

static void u64_place(struct kvr_index_u64 *m,
		      const struct kvr_index_u64_ent *src)
{
	uint64_t i = u64_hash(m, src->key) & m->mask;

	while (m->ent[i].val != KVR_INDEX_NONE)
		i = (i + 1) & m->mask;
	m->ent[i] = *src;
}

static int u64_resize(struct kvr_index_u64 *m, uint64_t slots)
{
	struct kvr_index_u64_ent *old = m->ent;
	uint64_t old_slots = m->mask + 1;
	struct kvr_index_u64_ent *e;
	int rc = u64_alloc(&e, slots);

	if (rc < 0)
		return rc;
	m->ent = e;
	m->mask = slots - 1;
	for (uint64_t i = 0; i < old_slots; i++)
		if (old[i].val != KVR_INDEX_NONE)
			u64_place(m, &old[i]);
	free(old);
	return 0;
}

int kvr_index_u64_init(struct kvr_index_u64 *m, uint64_t capacity_hint,
		       uint64_t seed)
{
	uint64_t slots = slots_for(capacity_hint);
	int rc;

	if (!m)
		return -EINVAL;
	if (!slots)
		return -ENOMEM;
	memset(m, 0, sizeof(*m));
	rc = u64_alloc(&m->ent, slots);
	if (rc < 0)
		return rc;
	m->mask = slots - 1;
	m->seed = splitmix(&seed);
	return 0;
}

void kvr_index_u64_fini(struct kvr_index_u64 *m)
{
	if (!m)
		return;
	free(m->ent);
	m->ent = NULL;
	m->count = 0;
	m->mask = 0;
}

int kvr_index_u64_reserve(struct kvr_index_u64 *m, uint64_t extra)
{
	uint64_t need, slots;

	if (extra > UINT64_MAX - m->count)
		return -ENOMEM;
	need = m->count + extra;
	if (need <= (m->mask + 1) / 4 * 3)
		return 0;
	slots = slots_for(need);
	if (!slots)
		return -ENOMEM;
	return u64_resize(m, slots);
}

uint32_t kvr_index_u64_find(const struct kvr_index_u64 *m, uint64_t key)
{
	uint64_t i = u64_hash(m, key) & m->mask;

	for (;;) {
		const struct kvr_index_u64_ent *e = &m->ent[i];

		if (e->val == KVR_INDEX_NONE)
			return KVR_INDEX_NONE;
		if (e->key == key)
			return e->val;
		i = (i + 1) & m->mask;
	}
}

int kvr_index_u64_insert(struct kvr_index_u64 *m, uint64_t key, uint32_t val)
{
	struct kvr_index_u64_ent n = {key, val, 0};
	int rc;

	if (val == KVR_INDEX_NONE)
		return -EINVAL;
	if (kvr_index_u64_find(m, key) != KVR_INDEX_NONE)
		return -EEXIST;
	rc = kvr_index_u64_reserve(m, 1);
	if (rc < 0)
		return rc;
	u64_place(m, &n);
	m->count++;
	return 0;
}

int kvr_index_u64_remove(struct kvr_index_u64 *m, uint64_t key)
{
	uint64_t mask = m->mask;
	uint64_t i = u64_hash(m, key) & mask;
	uint64_t j;

	for (;;) {
		const struct kvr_index_u64_ent *e = &m->ent[i];

		if (e->val == KVR_INDEX_NONE)
			return -ENOENT;
		if (e->key == key)
			break;
		i = (i + 1) & mask;
	}
	/* Backward shift, as in kvr_index_remove(). */
	for (j = i;;) {
		struct kvr_index_u64_ent *e;
		uint64_t home;

		j = (j + 1) & mask;
		e = &m->ent[j];
		if (e->val == KVR_INDEX_NONE)
			break;
		home = u64_hash(m, e->key) & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->ent[i] = *e;
			i = j;
		}
	}
	m->ent[i].val = KVR_INDEX_NONE;
	m->count--;
	return 0;
}

uint64_t kvr_index_u64_count(const struct kvr_index_u64 *m)
{
	return m->count;
}
