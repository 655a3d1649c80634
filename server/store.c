/* SPDX-License-Identifier: MIT */
/*
 * store.c - kvringd's storage engine (contract in store.h, design in
 * docs/storage.md).
 *
 * The pieces:
 *  - objects (struct obj, an array with a free list): one per key that is
 *    RESERVED (a store transfer is filling it; never readable, never
 *    evictable) or COMMITTED (readable; evictable while unpinned);
 *  - owners (struct owner, an array with a free list): a store transfer,
 *    a retrieve transfer or a lease. Each owner belongs to one channel and
 *    holds the list of objects it reserved (store) or pinned (retrieve,
 *    lease), each object at most once. An object's pin count is the number
 *    of owners listing it, so releasing an owner can only drop its own pins;
 *  - per-channel lists of owners, so closing a channel releases exactly
 *    what it holds in O(what it holds);
 *  - the LRU list of COMMITTED objects with no pin (MRU at the head), from
 *    whose tail eviction takes victims; a pinned object is off the list and
 *    returns to its head when its last pin goes;
 *  - a min-heap of leases by deadline for kvr_store_expire();
 *  - a u64 map from transfer/lease id to owner; ids come from a 64-bit
 *    counter, so they are never reused.
 * Every request first checks its arguments and reserves all the memory it
 * may need (objects, index slots, allocator nodes, an owner and its list,
 * an id slot, a heap slot); only then does it change anything, and from
 * there on nothing can fail. That is how "on error nothing changed" holds
 * even for -ENOMEM, and why steady-state requests never call malloc.
 * Not here: the wire format, logging, the event loop (server/ loop code).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/error.h>

#include "alloc.h"
#include "index.h"
#include "store.h"

#define NIL UINT32_MAX
/* Largest array index we hand out (NIL is the "none" marker). */
#define MAX_SLOTS (UINT32_MAX - 1u)
/* An owner's object list above this many entries is freed on release, so a
 * few huge requests do not pin memory in every recycled owner. */
#define OWNER_KEEP_CAP 256u

enum obj_state { OBJ_FREE = 0, OBJ_RESERVED = 1, OBJ_COMMITTED = 2 };
enum own_kind { OWN_FREE = 0, OWN_STORE = 1, OWN_RETRIEVE = 2, OWN_LEASE = 3 };

/* One stored or reserved chunk. Owned by the store; dies when evicted,
 * aborted or when the store is destroyed. */
struct obj {
	uint64_t lo, hi; /* key */
	uint64_t off;	 /* slot in the pool */
	uint64_t len;	 /* requested bytes (the allocation is rounded) */
	uint64_t stamp;	 /* request that touched it last (see s->stamp) */
	uint32_t ns;
	uint32_t prev, next; /* LRU links; spare list via next */
	uint32_t pins;	     /* owners (retrieve/lease) listing it */
	uint32_t owner;	     /* RESERVED: its store transfer; else NIL */
	uint32_t state;	     /* enum obj_state */
};

/* A store transfer, retrieve transfer or lease. Owned by the store on
 * behalf of channel `ch`; dies on commit/abort/release/redeem/expiry/close
 * (a redeemed lease is re-typed into a retrieve transfer, not freed). */
struct owner {
	uint64_t id;	      /* 0 while on the spare list */
	uint64_t deadline_ns; /* lease: expiry */
	uint64_t created_ns;
	uint64_t bytes; /* store: rounded bytes reserved */
	uint32_t *objs; /* reserved or pinned objects, each once */
	uint32_t nr, cap;
	uint32_t ch;
	uint32_t prev, next; /* channel's owner list; spare list via next */
	uint32_t heap_pos;   /* lease: index in s->heap; else NIL */
	uint32_t kind;	     /* enum own_kind */
};

/* What one channel holds. */
struct chan {
	uint32_t head; /* owner list */
	uint32_t nr_xfers;
	uint32_t nr_leases;
	uint64_t reserved_bytes;
	uint64_t reserved_objects;
	uint64_t pins;
};

struct kvr_store {
	struct kvr_store_config cfg; /* with defaults filled in */
	pthread_t owner;	     /* the only thread that may call us */
	uint64_t lease_ns;
	uint64_t pool_total; /* managed bytes: largest valid object size */
	struct kvr_alloc alloc;
	struct kvr_index index;	  /* (ns, key) -> object */
	struct kvr_index_u64 ids; /* transfer/lease id -> owner */
	struct obj *obj;
	uint32_t obj_cap, obj_spare, obj_live;
	struct owner *own;
	uint32_t own_cap, own_spare, own_live;
	struct chan *chan;
	uint32_t *heap; /* leases, min-heap on deadline_ns */
	uint32_t heap_nr, heap_cap;
	uint32_t lru_head, lru_tail; /* head = most recently used */
	uint32_t *scratch;	     /* max_keys object numbers, per request */
	uint64_t next_id;
	/*
	 * Bumped once per keyed request. obj.stamp == stamp means "touched by
	 * the request in progress": used to pin an object once per owner even
	 * when a key repeats, and to keep eviction off the keys this very
	 * request answered EXISTS.
	 */
	uint64_t stamp;
	struct kvr_store_stats st; /* counters and gauges (alloc's on read) */
};

/*
 * DESIGN.md rule 3 says the pending-transfer tables cannot race because one
 * thread owns them. This makes the rule checked, not just stated: every
 * entry point asserts it runs on the thread that created the store, so a
 * future helper thread calling in aborts at once instead of corrupting the
 * tables silently (test_store proves it). pthread_self() is a TLS read.
 */
#define OWNER_ONLY(s) kvr_assert(pthread_equal(pthread_self(), (s)->owner))

/* ==== Arrays with spare lists ==== */

/* Make sure @n more objects can be taken without allocating. */
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
	if (ncap > SIZE_MAX / sizeof(*o))
		return -ENOMEM;
	o = realloc(s->obj, (size_t)ncap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->obj = o;
	for (uint64_t i = ncap; i-- > s->obj_cap;) {
		memset(&o[i], 0, sizeof(o[i]));
		o[i].next = s->obj_spare;
		o[i].owner = NIL;
		s->obj_spare = (uint32_t)i;
	}
	s->obj_cap = (uint32_t)ncap;
	return 0;
}

static uint32_t obj_take(struct kvr_store *s)
{
	uint32_t x = s->obj_spare;

	s->obj_spare = s->obj[x].next;
	s->obj_live++;
	return x;
}

static void obj_give(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];

	o->state = OBJ_FREE;
	o->owner = NIL;
	o->pins = 0;
	o->prev = NIL;
	o->next = s->obj_spare;
	s->obj_spare = x;
	s->obj_live--;
}

/*
 * Make sure an owner with room for @n objects can be taken, and that the
 * id map and the lease heap can take one more entry each.
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

/* Take the reserved spare owner; not yet visible (no id, no channel). */
static uint32_t owner_take(struct kvr_store *s, uint32_t kind, uint32_t ch)
{
	uint32_t o = s->own_spare;
	struct owner *w = &s->own[o];

	s->own_spare = w->next;
	w->kind = kind;
	w->ch = ch;
	w->nr = 0;
	w->bytes = 0;
	w->id = 0;
	w->deadline_ns = 0;
	w->heap_pos = NIL;
	w->prev = w->next = NIL;
	s->own_live++;
	return o;
}

/* Give an owner that was never published back to the spare list. */
static void owner_untake(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];

	w->kind = OWN_FREE;
	w->next = s->own_spare;
	s->own_spare = o;
	s->own_live--;
}

/* Publish owner @o: new id, on its channel's list, counted. */
static void owner_publish(struct kvr_store *s, uint32_t o, uint64_t now_ns)
{
	struct owner *w = &s->own[o];
	struct chan *c = &s->chan[w->ch];

	w->id = s->next_id++;
	w->created_ns = now_ns;
	/* Cannot fail: owner_reserve() made room, and ids are never reused. */
	(void)kvr_index_u64_insert(&s->ids, w->id, o);
	w->prev = NIL;
	w->next = c->head;
	if (c->head != NIL)
		s->own[c->head].prev = o;
	c->head = o;
	if (w->kind == OWN_LEASE) {
		c->nr_leases++;
		s->st.leases++;
	} else {
		c->nr_xfers++;
		s->st.transfers++;
	}
}

/* Unpublish owner @o (id, channel list, counters); the inverse. */
static void owner_unpublish(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];
	struct chan *c = &s->chan[w->ch];

	(void)kvr_index_u64_remove(&s->ids, w->id);
	if (w->prev != NIL)
		s->own[w->prev].next = w->next;
	else
		c->head = w->next;
	if (w->next != NIL)
		s->own[w->next].prev = w->prev;
	if (w->kind == OWN_LEASE) {
		c->nr_leases--;
		s->st.leases--;
	} else {
		c->nr_xfers--;
		s->st.transfers--;
	}
	w->id = 0;
}

/* Unpublish and recycle owner @o, whose objects were already dealt with. */
static void owner_free(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];

	owner_unpublish(s, o);
	if (w->cap > OWNER_KEEP_CAP) {
		free(w->objs);
		w->objs = NULL;
		w->cap = 0;
	}
	w->nr = 0;
	owner_untake(s, o);
}

/* Find a published owner of @kind by id; NIL if none. */
static uint32_t owner_find(const struct kvr_store *s, uint64_t id,
			   uint32_t kind)
{
	uint32_t o;

	if (id == 0)
		return NIL;
	o = kvr_index_u64_find(&s->ids, id);
	if (o == NIL || s->own[o].kind != kind)
		return NIL;
	return o;
}

/* ==== Lease heap (min on deadline_ns) ==== */

static void heap_set(struct kvr_store *s, uint32_t i, uint32_t o)
{
	s->heap[i] = o;
	s->own[o].heap_pos = i;
}

static void heap_sift_up(struct kvr_store *s, uint32_t i)
{
	uint32_t o = s->heap[i];
	uint64_t d = s->own[o].deadline_ns;

	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (s->own[s->heap[p]].deadline_ns <= d)
			break;
		heap_set(s, i, s->heap[p]);
		i = p;
	}
	heap_set(s, i, o);
}

static void heap_sift_down(struct kvr_store *s, uint32_t i)
{
	uint32_t o = s->heap[i];
	uint64_t d = s->own[o].deadline_ns;

	for (;;) {
		uint64_t l = 2 * (uint64_t)i + 1, m;

		if (l >= s->heap_nr)
			break;
		m = l;
		if (l + 1 < s->heap_nr && s->own[s->heap[l + 1]].deadline_ns <
					      s->own[s->heap[l]].deadline_ns)
			m = l + 1;
		if (s->own[s->heap[m]].deadline_ns >= d)
			break;
		heap_set(s, i, s->heap[m]);
		i = (uint32_t)m;
	}
	heap_set(s, i, o);
}

/* Room was made by owner_reserve(). */
static void heap_push(struct kvr_store *s, uint32_t o)
{
	uint32_t i = s->heap_nr++;

	heap_set(s, i, o);
	heap_sift_up(s, i);
}

static void heap_remove(struct kvr_store *s, uint32_t o)
{
	uint32_t i = s->own[o].heap_pos;
	uint32_t last = s->heap[--s->heap_nr];

	s->own[o].heap_pos = NIL;
	if (last == o)
		return;
	heap_set(s, i, last);
	heap_sift_up(s, i);
	heap_sift_down(s, s->own[last].heap_pos);
}

/* ==== LRU and pins ==== */

static void lru_unlink(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];

	if (o->prev != NIL)
		s->obj[o->prev].next = o->next;
	else
		s->lru_head = o->next;
	if (o->next != NIL)
		s->obj[o->next].prev = o->prev;
	else
		s->lru_tail = o->prev;
	o->prev = o->next = NIL;
}

static void lru_push_head(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];

	o->prev = NIL;
	o->next = s->lru_head;
	if (s->lru_head != NIL)
		s->obj[s->lru_head].prev = x;
	else
		s->lru_tail = x;
	s->lru_head = x;
}

/* Mark a use of committed object @x: to the LRU head if it is unpinned. */
static void touch(struct kvr_store *s, uint32_t x)
{
	if (s->obj[x].pins == 0 && s->lru_head != x) {
		lru_unlink(s, x);
		lru_push_head(s, x);
	}
}

/* Owner @o pins committed object @x (the caller ensures: not yet by @o). */
static void pin(struct kvr_store *s, uint32_t o, uint32_t x)
{
	struct owner *w = &s->own[o];
	struct obj *b = &s->obj[x];

	if (b->pins++ == 0) {
		lru_unlink(s, x);
		s->st.pinned_objects++;
	}
	s->st.pins++;
	s->chan[w->ch].pins++;
	w->objs[w->nr++] = x;
}

/*
 * Drop every pin of owner @o. Walking its list backwards and pushing each
 * newly unpinned object to the LRU head leaves the first key most recent.
 */
static uint64_t unpin_all(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];

	for (uint32_t i = w->nr; i-- > 0;) {
		uint32_t x = w->objs[i];

		if (--s->obj[x].pins == 0) {
			lru_push_head(s, x);
			s->st.pinned_objects--;
		}
	}
	s->st.pins -= w->nr;
	s->chan[w->ch].pins -= w->nr;
	return w->nr;
}

/* ==== Object lifecycle ==== */

static uint64_t obj_bytes(const struct kvr_store *s, const struct obj *o)
{
	return kvr_alloc_round(&s->alloc, o->len);
}

/* Remove a dead object from the index and the pool, recycle it. */
static void obj_destroy(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];
	struct kvr_key k = {o->lo, o->hi};

	(void)kvr_index_remove(&s->index, o->ns, &k);
	(void)kvr_alloc_put(&s->alloc, o->off, o->len);
	obj_give(s, x);
}

/* Evict unpinned committed object @x (the LRU tail). */
static void evict(struct kvr_store *s, uint32_t x)
{
	uint64_t b = obj_bytes(s, &s->obj[x]);

	lru_unlink(s, x);
	s->st.objects--;
	s->st.committed_bytes -= b;
	s->st.evictions++;
	s->st.evicted_bytes += b;
	obj_destroy(s, x);
}

/*
 * Find room for @len bytes, evicting from the LRU tail one object at a
 * time, and only while the allocator cannot place the request: first until
 * enough bytes are free in total, then until some extent is large enough
 * (fragmentation). At most max_evict_per_key victims; never a pinned or
 * reserved object (neither is on the LRU), nor one stamped by the current
 * request. Those sit at the head: touching moved them there and nothing
 * was pushed since, so a stamped tail means nothing else is left.
 * Return: 0 and *off, or -ENOSPC.
 */
static int place(struct kvr_store *s, uint64_t len, uint64_t *off)
{
	uint64_t need = kvr_alloc_round(&s->alloc, len);
	uint32_t budget = s->cfg.max_evict_per_key;

	for (;;) {
		if (kvr_alloc_free_bytes(&s->alloc) >= need &&
		    kvr_alloc_get(&s->alloc, len, off) == 0)
			return 0;
		if (budget == 0 || s->lru_tail == NIL ||
		    s->obj[s->lru_tail].stamp == s->stamp)
			return -ENOSPC;
		evict(s, s->lru_tail);
		budget--;
	}
}

/* Abort store transfer @o: free its reservations, never publish them. */
static uint64_t abort_xfer(struct kvr_store *s, uint32_t o, uint64_t *bytes)
{
	struct owner *w = &s->own[o];
	struct chan *c = &s->chan[w->ch];
	uint64_t n = w->nr;

	for (uint32_t i = 0; i < w->nr; i++)
		obj_destroy(s, w->objs[i]);
	s->st.reserved_objects -= n;
	s->st.reserved_bytes -= w->bytes;
	c->reserved_objects -= n;
	c->reserved_bytes -= w->bytes;
	*bytes = w->bytes;
	owner_free(s, o);
	return n;
}

/* Drop lease @o: off the heap, pins gone. */
static uint64_t drop_lease(struct kvr_store *s, uint32_t o)
{
	uint64_t n;

	heap_remove(s, o);
	n = unpin_all(s, o);
	owner_free(s, o);
	return n;
}

static uint64_t deadline(const struct kvr_store *s, uint64_t now_ns)
{
	return now_ns > UINT64_MAX - s->lease_ns ? UINT64_MAX
						 : now_ns + s->lease_ns;
}

/* ==== Create / destroy ==== */

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
	rc = -EINVAL;
	/* Bounds that keep every count inside its 32-bit field. */
	if (s->cfg.max_keys > (1u << 20) || s->cfg.max_channels > (1u << 20) ||
	    s->cfg.max_xfers_per_chan > (1u << 16) ||
	    s->cfg.max_leases_per_chan > (1u << 16))
		goto err_free;
	s->lease_ns = (uint64_t)s->cfg.lease_ms * 1000000u;
	s->lru_head = s->lru_tail = NIL;
	s->obj_spare = s->own_spare = NIL;
	s->next_id = 1;
	rc = kvr_alloc_init(&s->alloc, cfg->pool_bytes, s->cfg.align);
	if (rc < 0)
		goto err_free;
	s->pool_total = kvr_alloc_free_bytes(&s->alloc);
	hint = cfg->objects_hint;
	if (!hint) {
		/* Assume 64 KiB chunks until told otherwise; grows anyway. */
		hint = cfg->pool_bytes / 65536 + 64;
		if (hint > (1u << 20))
			hint = 1u << 20;
	}
	if (hint > MAX_SLOTS)
		hint = MAX_SLOTS;
	rc = kvr_index_init(&s->index, hint, cfg->hash_seed);
	if (rc < 0)
		goto err_alloc;
	rc = kvr_index_u64_init(&s->ids, 256, cfg->hash_seed ^ 0x1d5u);
	if (rc < 0)
		goto err_index;
	rc = -ENOMEM;
	s->chan = calloc(s->cfg.max_channels, sizeof(*s->chan));
	s->scratch = calloc(s->cfg.max_keys, sizeof(*s->scratch));
	if (!s->chan || !s->scratch)
		goto err_arrays;
	for (uint32_t c = 0; c < s->cfg.max_channels; c++)
		s->chan[c].head = NIL;
	rc = obj_reserve(s, (uint32_t)hint);
	if (rc < 0)
		goto err_arrays;
	*out = s;
	return 0;
err_arrays:
	free(s->obj);
	free(s->chan);
	free(s->scratch);
	kvr_index_u64_fini(&s->ids);
err_index:
	kvr_index_fini(&s->index);
err_alloc:
	kvr_alloc_fini(&s->alloc);
err_free:
	free(s);
	return rc;
}

void kvr_store_destroy(struct kvr_store *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->own_cap; i++)
		free(s->own[i].objs);
	free(s->own);
	free(s->obj);
	free(s->chan);
	free(s->heap);
	free(s->scratch);
	kvr_index_u64_fini(&s->ids);
	kvr_index_fini(&s->index);
	kvr_alloc_fini(&s->alloc);
	free(s);
}

/* ==== Requests ==== */

/* Common checks of a keyed request. */
static int check_keys(const struct kvr_store *s, uint32_t ch,
		      const struct kvr_key *keys, uint32_t n)
{
	if (!s || ch >= s->cfg.max_channels)
		return -EINVAL;
	if (n > s->cfg.max_keys)
		return -E2BIG;
	if (n && !keys)
		return -EINVAL;
	return 0;
}

/*
 * Fill s->scratch with the objects of the longest committed prefix of
 * keys[0..n); return its length. Each key is read once (it may live in
 * shared memory a worker can still change; a changed key is just another
 * key).
 */
static uint32_t find_prefix(struct kvr_store *s, uint32_t ns,
			    const struct kvr_key *keys, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct kvr_key k = keys[i];
		uint32_t x = kvr_index_find(&s->index, ns, &k);

		if (x == KVR_INDEX_NONE || s->obj[x].state != OBJ_COMMITTED)
			break;
		s->scratch[i] = x;
	}
	return i;
}

/* Touch scratch[0..hits) last to first, so keys[0] is the most recent. */
static void touch_prefix(struct kvr_store *s, uint32_t hits)
{
	for (uint32_t i = hits; i-- > 0;)
		touch(s, s->scratch[i]);
}

/* Pin scratch[0..hits) under owner @o, each object once. */
static void pin_prefix(struct kvr_store *s, uint32_t o, uint32_t hits)
{
	for (uint32_t i = 0; i < hits; i++) {
		uint32_t x = s->scratch[i];

		if (s->obj[x].stamp == s->stamp)
			continue; /* a repeated key: already pinned by o */
		s->obj[x].stamp = s->stamp;
		pin(s, o, x);
	}
}

int kvr_store_lookup(struct kvr_store *s, uint32_t ch, uint32_t ns,
		     const struct kvr_key *keys, uint32_t n, bool pin_hits,
		     uint64_t now_ns, uint64_t *lease_out)
{
	if (s)
		OWNER_ONLY(s);
	uint32_t hits, o;
	int rc = check_keys(s, ch, keys, n);

	if (rc < 0)
		return rc;
	if (pin_hits) {
		if (!lease_out)
			return -EINVAL;
		if (s->chan[ch].nr_leases >= s->cfg.max_leases_per_chan)
			return -EBUSY;
		rc = owner_reserve(s, n ? n : 1);
		if (rc < 0)
			return rc;
	}
	hits = find_prefix(s, ns, keys, n);
	s->st.lookups++;
	s->st.lookup_keys += n;
	s->st.lookup_hits += hits;
	touch_prefix(s, hits);
	if (pin_hits && hits > 0) {
		s->stamp++;
		o = owner_take(s, OWN_LEASE, ch);
		pin_prefix(s, o, hits);
		owner_publish(s, o, now_ns);
		s->own[o].deadline_ns = deadline(s, now_ns);
		heap_push(s, o);
		s->st.leases_created++;
		*lease_out = s->own[o].id;
	} else if (lease_out) {
		*lease_out = 0;
	}
	return (int)hits;
}

int kvr_store_release_lease(struct kvr_store *s, uint32_t ch, uint64_t lease_id,
			    uint64_t now_ns)
{
	if (s)
		OWNER_ONLY(s);
	uint32_t o;

	if (!s || ch >= s->cfg.max_channels)
		return -EINVAL;
	o = owner_find(s, lease_id, OWN_LEASE);
	if (o == NIL || s->own[o].deadline_ns <= now_ns)
		return -ENOENT;
	if (s->own[o].ch != ch)
		return -EPERM;
	drop_lease(s, o);
	s->st.leases_released++;
	return 0;
}

int kvr_store_prepare_store(struct kvr_store *s, uint32_t ch, uint32_t ns,
			    const struct kvr_key *keys, const uint64_t *sizes,
			    uint32_t n, uint64_t now_ns,
			    struct kvr_slot_desc *out, uint64_t *xfer_out)
{
	if (s)
		OWNER_ONLY(s);
	uint64_t total;
	uint32_t o, i;
	struct owner *w;
	struct chan *c;
	int rc = check_keys(s, ch, keys, n);

	if (rc < 0)
		return rc;
	if (!xfer_out || (n && (!sizes || !out)))
		return -EINVAL;
	c = &s->chan[ch];
	if (c->nr_xfers >= s->cfg.max_xfers_per_chan)
		return -EBUSY;
	if (n == 0) {
		*xfer_out = 0;
		return 0;
	}
	/* Reserve everything n new objects could need; then nothing fails. */
	rc = obj_reserve(s, n);
	if (rc == 0)
		rc = kvr_index_reserve(&s->index, n);
	if (rc == 0)
		rc = kvr_alloc_reserve(&s->alloc, n);
	if (rc == 0)
		rc = owner_reserve(s, n);
	if (rc < 0)
		return rc;

	s->stamp++;
	/*
	 * Pass 1, last key to first: touch and stamp the keys already
	 * committed, so keys[0] ends most recent and eviction in pass 2 can't
	 * take them (their answer would be a lie).
	 */
	for (i = n; i-- > 0;) {
		struct kvr_key k = keys[i];
		uint32_t x = kvr_index_find(&s->index, ns, &k);

		s->scratch[i] = x;
		if (x != KVR_INDEX_NONE && s->obj[x].state == OBJ_COMMITTED) {
			touch(s, x);
			s->obj[x].stamp = s->stamp;
		}
	}
	/* Pass 2: answer each key, reserving the new ones. */
	o = owner_take(s, OWN_STORE, ch);
	w = &s->own[o];
	total = s->pool_total;
	for (i = 0; i < n; i++) {
		struct kvr_slot_desc d = {0, 0, KVR_SLOT_OK, 0};
		struct kvr_key k = keys[i];
		uint64_t len = sizes[i]; /* read once: may be shared memory */
		uint32_t x = s->scratch[i];

		/* Absent in pass 1, but an earlier duplicate may have
		 * reserved it since. */
		if (x == KVR_INDEX_NONE)
			x = kvr_index_find(&s->index, ns, &k);
		if (x != KVR_INDEX_NONE) {
			if (s->obj[x].state == OBJ_COMMITTED) {
				d.status = KVR_SLOT_EXISTS;
				s->st.stores_skipped_existing++;
			} else {
				d.status = KVR_SLOT_BUSY;
				s->st.stores_busy++;
			}
		} else if (len == 0 || len > total) {
			d.status = KVR_SLOT_INVALID;
			s->st.invalid_sizes++;
		} else if (place(s, len, &d.off) < 0) {
			d.status = KVR_SLOT_NOROOM;
			s->st.no_room++;
		} else {
			struct obj *b;

			x = obj_take(s);
			b = &s->obj[x];
			b->lo = k.lo;
			b->hi = k.hi;
			b->ns = ns;
			b->off = d.off;
			b->len = len;
			b->stamp = s->stamp;
			b->pins = 0;
			b->owner = o;
			b->prev = b->next = NIL;
			b->state = OBJ_RESERVED;
			(void)kvr_index_insert(&s->index, ns, &k, x);
			w->objs[w->nr++] = x;
			w->bytes += obj_bytes(s, b);
			d.len = len;
			s->st.stores_reserved++;
		}
		out[i] = d;
	}
	if (w->nr == 0) {
		/* Nothing to commit: no transfer at all (seed bug 1). */
		owner_untake(s, o);
		*xfer_out = 0;
		return 0;
	}
	owner_publish(s, o, now_ns);
	s->st.reserved_objects += w->nr;
	s->st.reserved_bytes += w->bytes;
	c->reserved_objects += w->nr;
	c->reserved_bytes += w->bytes;
	*xfer_out = w->id;
	return (int)w->nr;
}

/* Look up store transfer @xfer for channel @ch: owner, or -errno. */
static int xfer_lookup(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       uint32_t kind, uint32_t *o_out)
{
	uint32_t o;

	if (!s || ch >= s->cfg.max_channels)
		return -EINVAL;
	o = owner_find(s, xfer, kind);
	if (o == NIL)
		return -ENOENT;
	if (s->own[o].ch != ch)
		return -EPERM;
	*o_out = o;
	return 0;
}

int kvr_store_commit_store(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   uint64_t now_ns)
{
	if (s)
		OWNER_ONLY(s);
	struct owner *w;
	struct chan *c;
	uint32_t o;
	int rc;

	(void)now_ns;
	if (s && ch < s->cfg.max_channels && xfer == 0)
		return 0;
	rc = xfer_lookup(s, ch, xfer, OWN_STORE, &o);
	if (rc < 0)
		return rc;
	w = &s->own[o];
	c = &s->chan[ch];
	/* Last to first, so that keys[0] ends up most recently used. */
	for (uint32_t i = w->nr; i-- > 0;) {
		uint32_t x = w->objs[i];

		s->obj[x].state = OBJ_COMMITTED;
		s->obj[x].owner = NIL;
		lru_push_head(s, x);
	}
	s->st.objects += w->nr;
	s->st.committed_bytes += w->bytes;
	s->st.reserved_objects -= w->nr;
	s->st.reserved_bytes -= w->bytes;
	c->reserved_objects -= w->nr;
	c->reserved_bytes -= w->bytes;
	s->st.commits++;
	owner_free(s, o);
	return 0;
}

int kvr_store_abort_store(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			  uint64_t now_ns)
{
	if (s)
		OWNER_ONLY(s);
	uint64_t bytes;
	uint32_t o;
	int rc;

	(void)now_ns;
	if (s && ch < s->cfg.max_channels && xfer == 0)
		return 0;
	rc = xfer_lookup(s, ch, xfer, OWN_STORE, &o);
	if (rc < 0)
		return rc;
	abort_xfer(s, o, &bytes);
	s->st.aborts++;
	return 0;
}

int kvr_store_prepare_retrieve(struct kvr_store *s, uint32_t ch, uint32_t ns,
			       const struct kvr_key *keys, uint32_t n,
			       uint64_t now_ns, struct kvr_slot_desc *out,
			       uint64_t *xfer_out)
{
	if (s)
		OWNER_ONLY(s);
	uint32_t hits, o;
	int rc = check_keys(s, ch, keys, n);

	if (rc < 0)
		return rc;
	if (!xfer_out || (n && !out))
		return -EINVAL;
	if (s->chan[ch].nr_xfers >= s->cfg.max_xfers_per_chan)
		return -EBUSY;
	rc = owner_reserve(s, n ? n : 1);
	if (rc < 0)
		return rc;
	hits = find_prefix(s, ns, keys, n);
	s->st.retrieves++;
	if (hits == 0) {
		*xfer_out = 0;
		return 0;
	}
	touch_prefix(s, hits);
	s->stamp++;
	o = owner_take(s, OWN_RETRIEVE, ch);
	pin_prefix(s, o, hits);
	owner_publish(s, o, now_ns);
	for (uint32_t i = 0; i < hits; i++) {
		const struct obj *b = &s->obj[s->scratch[i]];
		struct kvr_slot_desc d = {b->off, b->len, KVR_SLOT_OK, 0};

		out[i] = d;
	}
	*xfer_out = s->own[o].id;
	return (int)hits;
}

int kvr_store_prepare_retrieve_lease(struct kvr_store *s, uint32_t ch,
				     uint64_t lease_id, uint64_t now_ns,
				     struct kvr_slot_desc *out, uint32_t max,
				     uint64_t *xfer_out)
{
	if (s)
		OWNER_ONLY(s);
	struct owner *w;
	struct chan *from;
	uint32_t o;

	if (!s || ch >= s->cfg.max_channels || !out || !xfer_out)
		return -EINVAL;
	o = owner_find(s, lease_id, OWN_LEASE);
	if (o == NIL || s->own[o].deadline_ns <= now_ns)
		return -ENOENT;
	w = &s->own[o];
	if (max < w->nr)
		return -EINVAL;
	if (s->chan[ch].nr_xfers >= s->cfg.max_xfers_per_chan)
		return -EBUSY;
	/*
	 * Re-type the lease into a retrieve transfer of @ch: the same owner
	 * keeps the same pins, so no object's pin count moves at all. Only
	 * its id, channel and kind change. The id map loses one entry before
	 * it gains one, so publishing cannot need memory.
	 */
	heap_remove(s, o);
	owner_unpublish(s, o);
	from = &s->chan[w->ch];
	from->pins -= w->nr;
	w->kind = OWN_RETRIEVE;
	w->ch = ch;
	s->chan[ch].pins += w->nr;
	owner_publish(s, o, now_ns);
	s->st.leases_redeemed++;
	s->st.retrieves++;
	for (uint32_t i = 0; i < w->nr; i++) {
		const struct obj *b = &s->obj[w->objs[i]];
		struct kvr_slot_desc d = {b->off, b->len, KVR_SLOT_OK, 0};

		out[i] = d;
	}
	*xfer_out = w->id;
	return (int)w->nr;
}

int kvr_store_commit_retrieve(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			      uint64_t now_ns)
{
	if (s)
		OWNER_ONLY(s);
	uint32_t o;
	int rc;

	(void)now_ns;
	if (s && ch < s->cfg.max_channels && xfer == 0)
		return 0;
	rc = xfer_lookup(s, ch, xfer, OWN_RETRIEVE, &o);
	if (rc < 0)
		return rc;
	unpin_all(s, o);
	owner_free(s, o);
	s->st.retrieve_commits++;
	return 0;
}

int kvr_store_channel_close(struct kvr_store *s, uint32_t ch, uint64_t now_ns,
			    struct kvr_store_released *rel_out)
{
	if (s)
		OWNER_ONLY(s);
	struct kvr_store_released rel = {0};
	struct chan *c;

	(void)now_ns;
	if (!s || ch >= s->cfg.max_channels)
		return -EINVAL;
	c = &s->chan[ch];
	while (c->head != NIL) {
		uint32_t o = c->head;
		uint64_t bytes;

		switch (s->own[o].kind) {
		case OWN_STORE:
			rel.objects_freed += abort_xfer(s, o, &bytes);
			rel.bytes_freed += bytes;
			rel.store_xfers++;
			s->st.aborts++;
			break;
		case OWN_RETRIEVE:
			rel.pins_dropped += unpin_all(s, o);
			owner_free(s, o);
			rel.retrieve_xfers++;
			break;
		default: /* OWN_LEASE */
			rel.pins_dropped += drop_lease(s, o);
			rel.leases++;
			break;
		}
	}
	s->st.channel_closes++;
	if (rel_out)
		*rel_out = rel;
	return 0;
}

int kvr_store_expire(struct kvr_store *s, uint64_t now_ns, uint32_t budget)
{
	if (s)
		OWNER_ONLY(s);
	int n = 0;

	if (!s)
		return -EINVAL;
	while (s->heap_nr && s->own[s->heap[0]].deadline_ns <= now_ns &&
	       (budget == 0 || (uint32_t)n < budget) && n < INT32_MAX) {
		drop_lease(s, s->heap[0]);
		s->st.leases_expired++;
		n++;
	}
	return n;
}

uint64_t kvr_store_next_expiry(const struct kvr_store *s)
{
	if (s)
		OWNER_ONLY(s);
	return s->heap_nr ? s->own[s->heap[0]].deadline_ns : UINT64_MAX;
}

/* ==== Stats ==== */

void kvr_store_stats(const struct kvr_store *s, struct kvr_store_stats *out)
{
	if (s)
		OWNER_ONLY(s);
	struct kvr_store_stats st = s->st;
	struct kvr_alloc_stats as;

	kvr_alloc_stats(&s->alloc, &as);
	st.pool_bytes = as.total_bytes;
	st.used_bytes = as.used_bytes;
	st.free_bytes = as.free_bytes;
	st.largest_free_bytes = as.largest_free_bytes;
	st.free_extents = as.free_extents;
	st.fragmentation = as.fragmentation;
	*out = st;
}

int kvr_store_chan_stats(const struct kvr_store *s, uint32_t ch,
			 struct kvr_store_chan_stats *out)
{
	if (s)
		OWNER_ONLY(s);
	struct kvr_store_chan_stats cs = {0};
	const struct chan *c;

	if (!s || !out || ch >= s->cfg.max_channels)
		return -EINVAL;
	c = &s->chan[ch];
	cs.reserved_bytes = c->reserved_bytes;
	cs.reserved_objects = c->reserved_objects;
	cs.pins_held = c->pins;
	cs.leases_owned = c->nr_leases;
	cs.transfers_open = c->nr_xfers;
	for (uint32_t o = c->head; o != NIL; o = s->own[o].next) {
		const struct owner *w = &s->own[o];

		if (w->kind != OWN_LEASE && (cs.oldest_xfer_ns == 0 ||
					     w->created_ns < cs.oldest_xfer_ns))
			cs.oldest_xfer_ns = w->created_ns;
	}
	*out = cs;
	return 0;
}

uint32_t kvr_store_align(const struct kvr_store *s)
{
	if (s)
		OWNER_ONLY(s);
	return kvr_alloc_align(&s->alloc);
}

uint32_t kvr_store_max_keys(const struct kvr_store *s)
{
	if (s)
		OWNER_ONLY(s);
	return s->cfg.max_keys;
}

/* ==== Audit ==== */

#define FAIL(...)                                                              \
	do {                                                                   \
		if (msg_len)                                                   \
			snprintf(msg, msg_len, __VA_ARGS__);                   \
		rc = -ENOTRECOVERABLE;                                         \
		goto out;                                                      \
	} while (0)

/* Scratch of the audit: per object and per channel tallies. */
struct audit_tally {
	uint32_t *pins;	    /* per object: owners listing it */
	uint32_t *seen;	    /* per object: last owner + 1 that listed it */
	uint32_t *holders;  /* per object: store transfers listing it */
	struct chan *chans; /* recomputed per-channel counters */
};

/*
 * The invariants (docs/storage.md, "What the audit checks"):
 *  A1 the allocator's own audit passes;
 *  A2 every live object is in the index under its key and the index holds
 *     nothing else; its slot is exactly one live allocation; sum of rounded
 *     sizes == allocator used bytes == committed + reserved gauges;
 *  A3 a RESERVED object has no pin, is on no list but its store transfer's,
 *     and is listed by exactly that one transfer;
 *  A4 every pin is owned: an object's pin count == the number of retrieve
 *     transfers and leases listing it; an owner lists an object at most
 *     once and only COMMITTED objects;
 *  A5 the LRU list holds exactly the COMMITTED objects with no pin, and its
 *     links are consistent;
 *  A6 every owner is reachable by its id and on its channel's list, leases
 *     are in the heap at their recorded position, the heap is ordered;
 *  A7 per-channel and global gauges equal the recomputed values.
 */
int kvr_store_audit(const struct kvr_store *s, char *msg, size_t msg_len)
{
	if (s)
		OWNER_ONLY(s);
	struct audit_tally t = {0};
	uint64_t committed_b = 0, reserved_b = 0, committed_n = 0;
	uint64_t reserved_n = 0, pinned_n = 0, pins_n = 0, lru_n = 0;
	uint64_t lru_want = 0, owners = 0, leases = 0, xfers = 0, spare = 0;
	uint32_t x, prev;
	int rc;

	if (!s)
		return -EINVAL;
	if (msg_len)
		msg[0] = '\0';
	rc = kvr_alloc_audit(&s->alloc, msg, msg_len); /* A1 */
	if (rc < 0)
		return rc;
	t.pins = calloc(s->obj_cap + 1u, sizeof(*t.pins));
	t.seen = calloc(s->obj_cap + 1u, sizeof(*t.seen));
	t.holders = calloc(s->obj_cap + 1u, sizeof(*t.holders));
	t.chans = calloc(s->cfg.max_channels, sizeof(*t.chans));
	rc = -ENOMEM;
	if (!t.pins || !t.seen || !t.holders || !t.chans)
		goto out;
	rc = 0;

	/* A6, A3, A4: walk each channel's owners. */
	for (uint32_t c = 0; c < s->cfg.max_channels; c++) {
		prev = NIL;
		for (uint32_t o = s->chan[c].head; o != NIL;
		     prev = o, o = s->own[o].next) {
			const struct owner *w = &s->own[o];

			if (o >= s->own_cap || owners > s->own_live)
				FAIL("owner list of ch %u corrupt", c);
			owners++;
			if (w->prev != prev || w->ch != c)
				FAIL("owner %u: links/ch %u on ch %u list", o,
				     w->ch, c);
			if (w->kind == OWN_FREE || w->id == 0 ||
			    w->id >= s->next_id ||
			    kvr_index_u64_find(&s->ids, w->id) != o)
				FAIL("owner %u (id %llu kind %u) not findable",
				     o, (unsigned long long)w->id, w->kind);
			if (w->kind == OWN_LEASE) {
				leases++;
				t.chans[c].nr_leases++;
				if (w->heap_pos >= s->heap_nr ||
				    s->heap[w->heap_pos] != o)
					FAIL("lease %llu not in heap",
					     (unsigned long long)w->id);
			} else {
				xfers++;
				t.chans[c].nr_xfers++;
				if (w->heap_pos != NIL)
					FAIL("transfer %llu in lease heap",
					     (unsigned long long)w->id);
			}
			if (w->nr == 0 || w->nr > w->cap)
				FAIL("owner %llu lists %u objects (cap %u)",
				     (unsigned long long)w->id, w->nr, w->cap);
			for (uint32_t i = 0; i < w->nr; i++) {
				uint32_t b = w->objs[i];

				if (b >= s->obj_cap)
					FAIL("owner %llu lists bad object %u",
					     (unsigned long long)w->id, b);
				if (t.seen[b] == o + 1)
					FAIL("owner %llu lists object %u twice",
					     (unsigned long long)w->id, b);
				t.seen[b] = o + 1;
				if (w->kind == OWN_STORE) {
					if (s->obj[b].state != OBJ_RESERVED ||
					    s->obj[b].owner != o)
						FAIL("store %llu lists object "
						     "%u in state %u owner %u",
						     (unsigned long long)w->id,
						     b, s->obj[b].state,
						     s->obj[b].owner);
					t.holders[b]++;
					t.chans[c].reserved_objects++;
				} else {
					if (s->obj[b].state != OBJ_COMMITTED)
						FAIL("owner %llu pins object "
						     "%u in state %u",
						     (unsigned long long)w->id,
						     b, s->obj[b].state);
					t.pins[b]++;
					t.chans[c].pins++;
				}
			}
			if (w->kind == OWN_STORE) {
				uint64_t sum = 0;

				for (uint32_t i = 0; i < w->nr; i++)
					sum +=
					    obj_bytes(s, &s->obj[w->objs[i]]);
				if (sum != w->bytes)
					FAIL("store %llu: bytes %llu, objects "
					     "sum to %llu",
					     (unsigned long long)w->id,
					     (unsigned long long)w->bytes,
					     (unsigned long long)sum);
				t.chans[c].reserved_bytes += w->bytes;
			}
		}
		if (t.chans[c].nr_xfers != s->chan[c].nr_xfers ||
		    t.chans[c].nr_leases != s->chan[c].nr_leases ||
		    t.chans[c].pins != s->chan[c].pins ||
		    t.chans[c].reserved_objects !=
			s->chan[c].reserved_objects ||
		    t.chans[c].reserved_bytes != s->chan[c].reserved_bytes)
			FAIL("ch %u counters xfers %u/%u leases %u/%u pins "
			     "%llu/%llu reserved %llu/%llu (walked/recorded)",
			     c, t.chans[c].nr_xfers, s->chan[c].nr_xfers,
			     t.chans[c].nr_leases, s->chan[c].nr_leases,
			     (unsigned long long)t.chans[c].pins,
			     (unsigned long long)s->chan[c].pins,
			     (unsigned long long)t.chans[c].reserved_bytes,
			     (unsigned long long)s->chan[c].reserved_bytes);
	}
	if (owners != s->own_live || owners != kvr_index_u64_count(&s->ids))
		FAIL("owners: %llu on channel lists, %u live, %llu ids",
		     (unsigned long long)owners, s->own_live,
		     (unsigned long long)kvr_index_u64_count(&s->ids));
	if (leases != s->heap_nr || leases != s->st.leases ||
	    xfers != s->st.transfers)
		FAIL("leases %llu heap %u gauge %llu, transfers %llu gauge "
		     "%llu",
		     (unsigned long long)leases, s->heap_nr,
		     (unsigned long long)s->st.leases,
		     (unsigned long long)xfers,
		     (unsigned long long)s->st.transfers);
	for (uint32_t i = 1; i < s->heap_nr; i++)
		if (s->own[s->heap[(i - 1) / 2]].deadline_ns >
		    s->own[s->heap[i]].deadline_ns)
			FAIL("lease heap out of order at %u", i);

	/* A2, A3, A4: every object slot. */
	for (x = 0; x < s->obj_cap; x++) {
		const struct obj *b = &s->obj[x];
		struct kvr_key k = {b->lo, b->hi};

		if (b->state == OBJ_FREE) {
			spare++;
			continue;
		}
		if (b->state != OBJ_RESERVED && b->state != OBJ_COMMITTED)
			FAIL("object %u in state %u", x, b->state);
		if (kvr_index_find(&s->index, b->ns, &k) != x)
			FAIL("object %u (ns %u key %016llx%016llx) not indexed",
			     x, b->ns, (unsigned long long)b->hi,
			     (unsigned long long)b->lo);
		if (!kvr_alloc_owns(&s->alloc, b->off, b->len) ||
		    b->off % s->cfg.align)
			FAIL("object %u slot %llu+%llu is not one allocation",
			     x, (unsigned long long)b->off,
			     (unsigned long long)b->len);
		if (b->pins != t.pins[x])
			FAIL("object %u: pin count %u, %u owners pin it", x,
			     b->pins, t.pins[x]);
		pins_n += b->pins;
		if (b->state == OBJ_RESERVED) {
			if (b->pins || t.holders[x] != 1)
				FAIL("reserved object %u: %u pins, %u "
				     "transfers",
				     x, b->pins, t.holders[x]);
			reserved_n++;
			reserved_b += obj_bytes(s, b);
		} else {
			if (b->owner != NIL || t.holders[x])
				FAIL("committed object %u held by a store "
				     "transfer",
				     x);
			committed_n++;
			committed_b += obj_bytes(s, b);
			if (b->pins)
				pinned_n++;
			else
				lru_want++;
		}
	}
	if (committed_n + reserved_n != s->obj_live ||
	    spare != s->obj_cap - s->obj_live ||
	    kvr_index_count(&s->index) != s->obj_live)
		FAIL("objects: %llu live walked, %u recorded, %llu indexed",
		     (unsigned long long)(committed_n + reserved_n),
		     s->obj_live,
		     (unsigned long long)kvr_index_count(&s->index));
	{
		struct kvr_alloc_stats as;

		kvr_alloc_stats(&s->alloc, &as);
		if (committed_b + reserved_b != as.used_bytes)
			FAIL("objects hold %llu bytes, allocator used %llu",
			     (unsigned long long)(committed_b + reserved_b),
			     (unsigned long long)as.used_bytes);
	}
	if (committed_n != s->st.objects ||
	    reserved_n != s->st.reserved_objects ||
	    committed_b != s->st.committed_bytes ||
	    reserved_b != s->st.reserved_bytes ||
	    pinned_n != s->st.pinned_objects || pins_n != s->st.pins)
		FAIL("gauges: objects %llu/%llu reserved %llu/%llu bytes "
		     "%llu/%llu+%llu/%llu pinned %llu/%llu pins %llu/%llu",
		     (unsigned long long)committed_n,
		     (unsigned long long)s->st.objects,
		     (unsigned long long)reserved_n,
		     (unsigned long long)s->st.reserved_objects,
		     (unsigned long long)committed_b,
		     (unsigned long long)s->st.committed_bytes,
		     (unsigned long long)reserved_b,
		     (unsigned long long)s->st.reserved_bytes,
		     (unsigned long long)pinned_n,
		     (unsigned long long)s->st.pinned_objects,
		     (unsigned long long)pins_n,
		     (unsigned long long)s->st.pins);

	/* A5: the LRU list. */
	prev = NIL;
	for (x = s->lru_head; x != NIL; prev = x, x = s->obj[x].next) {
		if (x >= s->obj_cap || lru_n >= lru_want)
			FAIL("lru list too long or corrupt at %u", x);
		if (s->obj[x].prev != prev)
			FAIL("lru object %u prev %u, expected %u", x,
			     s->obj[x].prev, prev);
		if (s->obj[x].state != OBJ_COMMITTED || s->obj[x].pins)
			FAIL("lru object %u: state %u pins %u", x,
			     s->obj[x].state, s->obj[x].pins);
		lru_n++;
	}
	if (prev != s->lru_tail || lru_n != lru_want)
		FAIL("lru holds %llu objects, %llu committed unpinned",
		     (unsigned long long)lru_n, (unsigned long long)lru_want);
out:
	free(t.pins);
	free(t.seen);
	free(t.holders);
	free(t.chans);
	return rc;
}
