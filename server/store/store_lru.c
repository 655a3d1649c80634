/* SPDX-License-Identifier: MIT */
/*
 * store_lru.c - the recency order of kvringd's storage engine and the
 * eviction that follows it. The LRU list holds exactly the COMMITTED
 * objects that no owner pins, most recently used at the head; eviction
 * takes victims from the tail, so by construction it can never take a
 * RESERVED object (being written) or a pinned one (being read or leased).
 *
 * The list primitives themselves (lru_unlink, lru_push_head, touch) and the
 * allocation fast path (place) are static inline in store_int.h, because
 * store.c and store_owner.c use them per key on the hot path. This file
 * holds what is not per-key-cheap: touching a whole prefix, and the
 * eviction loop that runs only when the pool is full. It does not decide
 * when an object becomes evictable: commit and the last unpin put it on
 * the list (store.c, store_owner.c).
 */
#include <errno.h>

#include "store_int.h"

/*
 * A request's hits are touched last to first, so keys[0] ends up the most
 * recently used: a prompt's prefix is worthless without its head, so the
 * tail of the chain must be evicted before the head.
 */
void kvr__store_lru_touch_prefix(struct kvr_store *s, uint32_t hits)
{
	for (uint32_t i = hits; i-- > 0;)
		touch(s, s->scratch[i]);
}

/*
 * Evict unpinned committed object @x (the LRU tail): it leaves the list,
 * the committed gauges and the index, and its slot goes back to the
 * allocator. Nothing else refers to it: no owner lists an unpinned
 * committed object.
 */
void kvr__store_lru_evict(struct kvr_store *s, uint32_t x)
{
	uint64_t b = obj_bytes(s, &s->obj[x]);

	lru_unlink(s, x);
	s->st.objects--;
	s->st.committed_bytes -= b;
	s->st.evictions++;
	s->st.evicted_bytes += b;
	if (!s->obj[x].l2)
		s->st.l2_unsaved_evictions++;
	if (!s->obj[x].disk)
		s->st.disk_unsaved_evictions++;
	obj_destroy(s, x);
}

/* LRU entries the disk guard looks at for a clean victim, at most. */
#define GUARD_WALK 64u

/*
 * The next victim: the LRU tail; under the disk guard (--disk-mode evict,
 * kvr_store_disk_guard) the coldest of the last GUARD_WALK objects that
 * the disk holds (or refused), so eviction drops clean chunks first and
 * never one the disk has not written yet. NIL: none (the caller answers
 * NOROOM: the worker is held back until the disk catches up). Never an
 * object stamped by the current request.
 */
static uint32_t victim(const struct kvr_store *s)
{
	uint32_t x = s->lru_tail;

	for (uint32_t walk = 0; x != NIL && walk < GUARD_WALK; walk++) {
		const struct obj *o = &s->obj[x];

		if (o->stamp == s->stamp)
			return NIL;
		if (!s->disk_guard || o->disk || o->disk_refused)
			return x;
		x = o->prev;
	}
	return NIL;
}

/*
 * place() could not allocate @len bytes: evict from the LRU tail one object
 * at a time, retrying the allocator after each victim, so that only as many
 * objects go as needed, in LRU order. The retry is skipped while the free
 * total is below @need (no extent can fit then); once it is enough, the
 * loop goes on evicting only while fragmentation leaves no single extent
 * large enough.
 *
 * It stops with -ENOSPC after max_evict_per_key victims, when the list is
 * empty, or when the tail carries the current request's stamp. Stamped
 * objects are the keys this request answered EXISTS: pass 1 of
 * prepare_store touched them, moving them to the head, and nothing has
 * been pushed since, so a stamped tail means nothing unstamped is left.
 * Evicting them would make the answer "already stored" a lie. Victims
 * evicted before a -ENOSPC stay evicted: they were the least useful, and
 * the request does not fail for it (this key just answers NOROOM), so the
 * all-or-nothing rule for errors is untouched. Under the disk guard the
 * victims are victim()'s, and a key with none answers NOROOM too
 * (counted in disk_held).
 */
int kvr__store_lru_make_room(struct kvr_store *s, uint64_t len, uint64_t need,
			     uint64_t *off)
{
	uint32_t budget = s->cfg.max_evict_per_key;

	for (;;) {
		uint32_t x = budget ? victim(s) : NIL;

		if (x == NIL) {
			if (budget && s->disk_guard && s->lru_tail != NIL &&
			    s->obj[s->lru_tail].stamp != s->stamp)
				s->st.disk_held++;
			return -ENOSPC;
		}
		kvr__store_lru_evict(s, x);
		budget--;
		if (kvr_alloc_free_bytes(&s->alloc) >= need &&
		    kvr_alloc_get(&s->alloc, len, off) == 0)
			return 0;
	}
}
