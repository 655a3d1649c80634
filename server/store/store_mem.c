/* SPDX-License-Identifier: MIT */
/*
 * store_mem.c - the heap memory of kvringd's storage engine: creating and
 * destroying a store, and the reservation step that grows its arrays (the
 * objects, the owners and their object lists, the lease heap, the id map,
 * plus the index's and allocator's own reserves) before a request changes
 * anything. Apart from an owner dropping an oversized list on recycle
 * (store_owner.c) and the audit's scratch, no other file of the engine
 * allocates or frees.
 *
 * Why reserve first: the contract says that on a negative return nothing
 * changed, even for -ENOMEM. A request that allocated as it went would have
 * to undo half-done work on a late failure (a reservation made, a victim
 * evicted, a pin taken), which is where bugs hide. Reserving all it may
 * need up front means every failure happens before the first state change,
 * and every step after it is infallible. It is also why the steady state
 * never calls malloc: the arrays only grow, so the reservation finds the
 * room already there. Not here: what the memory is used for. Also here:
 * the work a growth leaves for idle time (kvr_store_idle_step).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hugemem.h"
#include "store_int.h"

/* The object table's alignment: a huge page, so its pages can be huge. */
#define OBJ_TABLE_ALIGN ((size_t)2 << 20)

/*
 * Reserve address space for the largest object table the pool can ever
 * need (an object takes at least one allocation unit; at most MAX_SLOTS),
 * aligned to a huge page and advised for huge pages, and
 * make it s->obj. Nothing is backed until an entry is written
 * (obj_take()), so the reservation costs no memory, and growing the table
 * is a change of obj_cap: no remap, no copy. A realloc'd table, by
 * contrast, moves on growth, and the kernel splits its huge pages to
 * remap them (about 100 ms for 260 MB here, inside the request that needed
 * the room). Where the kernel refuses the reservation (strict overcommit
 * accounting, an address-space limit) s->obj stays NULL and the table is
 * malloc'd and realloc'd instead.
 */
static void obj_table_map(struct kvr_store *s)
{
	/* A full pool's request reserves its objects before it evicts: room
	 * for twice the units, which costs address space only. */
	uint64_t want = 2 * (s->pool_total >> s->unit_shift) + s->cfg.max_keys;
	uint64_t max = want < MAX_SLOTS ? want : MAX_SLOTS;
	size_t bytes, span, lead;
	uint8_t *p, *a;

	if (max > (SIZE_MAX / 2) / sizeof(struct obj))
		return;
	bytes = ((size_t)max * sizeof(struct obj) + OBJ_TABLE_ALIGN - 1) &
		~(OBJ_TABLE_ALIGN - 1);
	span = bytes + OBJ_TABLE_ALIGN;
	p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return;
	a = (uint8_t *)(((uintptr_t)p + OBJ_TABLE_ALIGN - 1) &
			~(uintptr_t)(OBJ_TABLE_ALIGN - 1));
	lead = (size_t)(a - p);
	if (lead)
		munmap(p, lead);
	if (span - lead > bytes)
		munmap(a + bytes, span - lead - bytes);
	kvr_hugemem_advise(a, bytes);
	s->obj = (struct obj *)(void *)a;
	s->obj_va_max = (uint32_t)max;
	s->obj_va_bytes = bytes;
}

/* Give back the object table, whichever way it was made. */
static void obj_table_free(struct kvr_store *s)
{
	if (s->obj_va_bytes)
		munmap(s->obj, s->obj_va_bytes);
	else
		free(s->obj);
	s->obj = NULL;
}

/*
 * Make sure @n more objects can be taken without allocating: grow the
 * array (doubling, so growth is amortised O(1)). The new entries are not
 * written: they lie above obj_fresh, where obj_take() finds them one at a
 * time, so a growth makes no pass over the new memory, which the request
 * that needed the room would otherwise wait for. In the reserved table
 * (obj_table_map) a growth is only the new capacity; a malloc'd one is
 * realloc'd. On failure the array is as it was.
 */
static int obj_reserve(struct kvr_store *s, uint32_t n)
{
	uint64_t need = (uint64_t)s->obj_live + n, ncap;
	struct obj *o;

	if (need <= s->obj_cap)
		return 0;
	if (need > MAX_SLOTS)
		return -ENOMEM;
	ncap = (uint64_t)s->obj_cap * 2;
	if (ncap < need)
		ncap = need;
	if (ncap > MAX_SLOTS)
		ncap = MAX_SLOTS;
	if (s->obj_va_bytes) {
		/* Reserved up front (obj_table_map): nothing to move. */
		if (need > s->obj_va_max)
			return -ENOMEM;
		if (ncap > s->obj_va_max)
			ncap = s->obj_va_max;
		s->obj_cap = (uint32_t)ncap;
		return 0;
	}
	if (ncap > SIZE_MAX / sizeof(*o))
		return -ENOMEM;
	o = realloc(s->obj, (size_t)ncap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->obj = o;
	kvr_hugemem_advise(o, (size_t)ncap * sizeof(*o));
	s->obj_cap = (uint32_t)ncap;
	return 0;
}

/*
 * Make sure an owner with room for @n objects can be taken (the spare at
 * the head of the list is the one owner_take() will hand out, so only its
 * list needs growing), and that the id map and the lease heap can take one
 * more entry each. A growth that succeeded before a later -ENOMEM is kept:
 * it is invisible spare capacity.
 */
static int owner_reserve(struct kvr_store *s, uint32_t n)
{
	struct owner *w;
	int rc;

	if (s->own_spare == NIL) {
		uint64_t ncap = s->own_cap ? (uint64_t)s->own_cap * 2 : 16;

		if (ncap > MAX_SLOTS || ncap > SIZE_MAX / sizeof(*w))
			return -ENOMEM;
		w = realloc(s->own, (size_t)ncap * sizeof(*w));
		if (!w)
			return -ENOMEM;
		s->own = w;
		for (uint64_t i = ncap; i-- > s->own_cap;) {
			memset(&w[i], 0, sizeof(w[i]));
			w[i].heap_pos = NIL;
			w[i].next = s->own_spare;
			s->own_spare = (uint32_t)i;
		}
		s->own_cap = (uint32_t)ncap;
	}
	w = &s->own[s->own_spare];
	if (w->cap < n) {
		uint32_t *objs = realloc(w->objs, (size_t)n * sizeof(*objs));

		if (!objs)
			return -ENOMEM;
		w->objs = objs;
		w->cap = n;
	}
	if (s->heap_nr == s->heap_cap) {
		uint64_t ncap = s->heap_cap ? (uint64_t)s->heap_cap * 2 : 16;
		uint32_t *h;

		if (ncap > MAX_SLOTS)
			return -ENOMEM;
		h = realloc(s->heap, (size_t)ncap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		s->heap = h;
		s->heap_cap = (uint32_t)ncap;
	}
	rc = kvr_index_u64_reserve(&s->ids, 1);
	return rc;
}

/*
 * Objects first, then their index entries and allocator nodes, then the
 * owner: the order does not matter for correctness (each part is kept on
 * failure as spare capacity), only that all of it comes before any change.
 */
int kvr__store_mem_reserve(struct kvr_store *s, uint32_t nr_objs,
			   uint32_t owner_objs)
{
	int rc = 0;

	if (nr_objs) {
		rc = obj_reserve(s, nr_objs);
		if (rc == 0)
			rc = kvr_index_reserve(&s->index, nr_objs);
		if (rc == 0)
			rc = kvr_alloc_reserve(&s->alloc, nr_objs);
	}
	if (rc == 0)
		rc = owner_reserve(s, owner_objs);
	return rc;
}

void kvr__store_stamp_wrap(struct kvr_store *s)
{
	for (uint32_t x = 0; x < s->obj_fresh; x++)
		s->obj[x].stamp = 0;
	s->stamp = 1;
}

bool kvr__store_key_match(const void *ctx, uint32_t val, uint32_t ns,
			  const struct kvr_key *key)
{
	const struct obj *o = &((const struct kvr_store *)ctx)->obj[val];

	return o->lo == key->lo && o->hi == key->hi && o->ns == ns;
}

/* ==== Create / destroy ==== */

/*
 * The id cipher's key: the server's getrandom key, or for a store created
 * without one (unit tests) a key spread from hash_seed, so tests stay
 * reproducible. Either way ids look random and never repeat.
 */
static void init_ids(struct kvr_store *s)
{
	uint32_t key[4];
	uint64_t x = s->cfg.hash_seed ^ 0x6a09e667f3bcc909ull;

	memcpy(key, s->cfg.id_key, sizeof(key));
	if (!(key[0] | key[1] | key[2] | key[3])) {
		for (int i = 0; i < 4; i++) {
			/* splitmix64 step: any seed gives a full key. */
			x += 0x9e3779b97f4a7c15ull;
			uint64_t z = x;

			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			key[i] = (uint32_t)(z ^ (z >> 31));
		}
	}
	kvr_store_id_init(&s->ids_gen, key);
}

/*
 * Fill in the defaults, check the limits that keep every count inside its
 * 32-bit field, then build the parts in order and unwind in reverse on
 * failure. The calling thread becomes the store's only owner (OWNER_ONLY).
 */
int kvr_store_create(const struct kvr_store_config *cfg, struct kvr_store **out)
{
	struct kvr_store *s;
	uint64_t hint;
	int rc;

	if (!cfg || !out || cfg->reserved)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->owner = pthread_self();
	if (!s->cfg.align)
		s->cfg.align = KVR_STORE_DEF_ALIGN;
	if (!s->cfg.lease_ms)
		s->cfg.lease_ms = KVR_STORE_DEF_LEASE_MS;
	if (!s->cfg.max_channels)
		s->cfg.max_channels = KVR_STORE_DEF_MAX_CHANNELS;
	if (!s->cfg.max_keys)
		s->cfg.max_keys = KVR_STORE_DEF_MAX_KEYS;
	if (!s->cfg.max_xfers_per_chan)
		s->cfg.max_xfers_per_chan = KVR_STORE_DEF_MAX_XFERS;
	if (!s->cfg.max_leases_per_chan)
		s->cfg.max_leases_per_chan = KVR_STORE_DEF_MAX_LEASES;
	if (!s->cfg.max_evict_per_key)
		s->cfg.max_evict_per_key = KVR_STORE_DEF_EVICT_PER_KEY;
	if (!s->cfg.xfer_ms)
		s->cfg.xfer_ms = KVR_STORE_DEF_XFER_MS;
	if (!s->cfg.max_ns)
		s->cfg.max_ns = KVR_STORE_DEF_MAX_NS;
	rc = -EINVAL;
	/* Bounds that keep every count inside its 32-bit field. */
	if (s->cfg.max_keys > (1u << 20) || s->cfg.max_channels > (1u << 20) ||
	    s->cfg.max_xfers_per_chan > (1u << 16) ||
	    s->cfg.max_leases_per_chan > (1u << 16) ||
	    s->cfg.max_ns > (1u << 20))
		goto err_free;
	s->lease_ns = (uint64_t)s->cfg.lease_ms * 1000000u;
	s->xfer_ns = (uint64_t)s->cfg.xfer_ms * 1000000u;
	s->lru_head = s->lru_tail = NIL;
	s->obj_spare = s->own_spare = NIL;
	s->xq_head = s->xq_tail = NIL;
	init_ids(s);
	rc = kvr_alloc_init(&s->alloc, cfg->pool_bytes, s->cfg.align);
	if (rc < 0)
		goto err_free;
	s->pool_total = kvr_alloc_free_bytes(&s->alloc);
	s->unit_shift = (uint32_t)__builtin_ctz(kvr_alloc_align(&s->alloc));
	/* obj.unit is 32 bits: 16 TiB of pool at the default 4 KiB align. */
	rc = -EINVAL;
	if ((s->pool_total >> s->unit_shift) > UINT32_MAX)
		goto err_alloc;
	hint = cfg->objects_hint;
	if (!hint) {
		/* Assume 64 KiB chunks until told otherwise; grows anyway. */
		hint = cfg->pool_bytes / 65536 + 64;
		if (hint > (1u << 20))
			hint = 1u << 20;
	}
	if (hint > MAX_SLOTS)
		hint = MAX_SLOTS;
	rc = kvr_index_init(&s->index, hint, cfg->hash_seed,
			    kvr__store_key_match, s);
	if (rc < 0)
		goto err_alloc;
	/* A different seed, so id-map and key-index collisions don't align. */
	rc = kvr_index_u64_init(&s->ids, 256, cfg->hash_seed ^ 0x1d5u);
	if (rc < 0)
		goto err_index;
	rc = -ENOMEM;
	s->chan = calloc(s->cfg.max_channels, sizeof(*s->chan));
	s->uacct = calloc((size_t)s->cfg.max_channels + 1, sizeof(*s->uacct));
	s->scratch = calloc(s->cfg.max_keys, sizeof(*s->scratch));
	s->ns_objs = calloc(s->cfg.max_ns, sizeof(*s->ns_objs));
	s->last_sums = calloc(s->cfg.max_keys, sizeof(*s->last_sums));
	s->audit = calloc(1, sizeof(*s->audit));
	if (!s->chan || !s->uacct || !s->scratch || !s->ns_objs ||
	    !s->last_sums || !s->audit)
		goto err_arrays;
	for (uint32_t c = 0; c < s->cfg.max_channels; c++)
		s->chan[c].head = s->chan[c].tail = NIL;
	obj_table_map(s);
	/* No more objects than that can ever be live. */
	if (s->obj_va_bytes && hint > s->obj_va_max)
		hint = s->obj_va_max;
	rc = obj_reserve(s, (uint32_t)hint);
	if (rc < 0)
		goto err_arrays;
	*out = s;
	return 0;
err_arrays:
	obj_table_free(s);
	free(s->ns_objs);
	free(s->chan);
	free(s->uacct);
	free(s->scratch);
	free(s->last_sums);
	free(s->audit);
	kvr_index_u64_fini(&s->ids);
err_index:
	kvr_index_fini(&s->index);
err_alloc:
	kvr_alloc_fini(&s->alloc);
err_free:
	free(s);
	return rc;
}

/*
 * Everything the store holds is heap memory it allocated; nothing is
 * shared with a peer, so there is nothing to hand back or wait for.
 */
void kvr_store_destroy(struct kvr_store *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->own_cap; i++)
		free(s->own[i].objs);
	free(s->own);
	obj_table_free(s);
	free(s->ns_objs);
	free(s->chan);
	free(s->uacct);
	free(s->heap);
	free(s->scratch);
	free(s->last_sums);
	kvr__store_audit_free(s->audit);
	kvr_index_u64_fini(&s->ids);
	kvr_index_fini(&s->index);
	kvr_alloc_fini(&s->alloc);
	free(s);
}

/*
 * A growth of the key index leaves its old table to empty step by step;
 * inserts and removes take a step each, and so does each call here, so a
 * cache that is only looked up in (every lookup probing both tables for
 * keys not moved yet) still finishes. Freeing the old table at the last
 * step is the only allocator call.
 */
bool kvr_store_idle_step(struct kvr_store *s)
{
	OWNER_ONLY(s);
	return kvr_index_migrate_step(&s->index);
}

bool kvr_store_migrating(const struct kvr_store *s)
{
	OWNER_ONLY(s);
	return kvr_index_migrating(&s->index);
}
