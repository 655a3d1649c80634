/* SPDX-License-Identifier: MIT */
/*
 * store_owner.c - the owners of kvringd's storage engine: leases, store
 * transfers and retrieve transfers. An owner belongs to one channel and
 * lists the objects it reserved (store) or pinned (retrieve, lease), each
 * at most once. This file publishes owners (id, channel list, counters),
 * pins and unpins objects on their behalf, keeps the lease min-heap, and
 * ends owners: abort, drop, redeem, recycle.
 *
 * What it does not do: allocate (store_mem.c reserves every owner, list,
 * id slot and heap slot before a request changes anything, so nothing here
 * can fail), check arguments or ids of callers (store.c), or choose what
 * to evict (store_lru.c). Pins are *owned* so that releasing an owner can
 * only ever drop its own pins: an object's pin count is, at all times, the
 * number of owners listing it (audit A4).
 */
#include <stdlib.h>

#include "store_int.h"

/* ==== Publishing ==== */

/* A transfer's deadline: creation + xfer_ms, saturating at the top. */
static uint64_t xfer_deadline(const struct kvr_store *s, uint64_t now_ns)
{
	return now_ns > UINT64_MAX - s->xfer_ns ? UINT64_MAX
						: now_ns + s->xfer_ns;
}

/*
 * Append transfer @o to the queue. Every transfer lives xfer_ms from its
 * publication and now_ns never goes backwards (the loop's monotonic clock),
 * so the tail is always the latest deadline: O(1) where a heap would cost
 * O(log n) on every prepare.
 */
static void xq_push(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];

	w->xnext = NIL;
	w->xprev = s->xq_tail;
	if (s->xq_tail != NIL)
		s->own[s->xq_tail].xnext = o;
	else
		s->xq_head = o;
	s->xq_tail = o;
}

void kvr__store_xq_unlink(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];

	if (w->xprev != NIL)
		s->own[w->xprev].xnext = w->xnext;
	else
		s->xq_head = w->xnext;
	if (w->xnext != NIL)
		s->own[w->xnext].xprev = w->xprev;
	else
		s->xq_tail = w->xprev;
	w->xprev = w->xnext = NIL;
}

/*
 * Publishing makes an owner visible by id and on its channel's list, and
 * counts it; it is always the last step of a request, after the owner's
 * list is complete. The id is a fresh output of the id cipher (store_id.h):
 * never 0, never issued before, not predictable from earlier ids, so a
 * stale id can never name a newer owner and nobody can guess a lease.
 * A transfer also joins the deadline queue.
 */
void kvr__store_owner_publish(struct kvr_store *s, uint32_t o, uint64_t now_ns)
{
	struct owner *w = &s->own[o];
	struct chan *c = &s->chan[w->ch];

	w->id = kvr_store_id_next(&s->ids_gen);
	w->created_ns = now_ns;
	if (w->kind != OWN_LEASE && c->trusted) {
		w->deadline_ns = UINT64_MAX; /* kvr_store_channel_trust() */
	} else if (w->kind != OWN_LEASE) {
		w->deadline_ns = xfer_deadline(s, now_ns);
		xq_push(s, o);
	}
	/* Cannot fail: the reservation step made room, ids are never reused. */
	(void)kvr_index_u64_insert(&s->ids, w->id, o);
	w->prev = NIL;
	w->next = c->head;
	if (c->head != NIL)
		s->own[c->head].prev = o;
	else
		c->tail = o; /* the list's tail is its oldest owner */
	c->head = o;
	if (w->kind == OWN_LEASE) {
		c->nr_leases++;
		s->st.leases++;
	} else {
		c->nr_xfers++;
		s->st.transfers++;
	}
}

/*
 * The inverse of publishing: id, channel list and counters. It frees room
 * in the id map, which is what lets redeem publish again without memory.
 */
static void owner_unpublish(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];
	struct chan *c = &s->chan[w->ch];

	(void)kvr_index_u64_remove(&s->ids, w->id);
	/* A quarantined transfer left the queue when it entered quarantine. */
	if ((w->kind == OWN_STORE || w->kind == OWN_RETRIEVE) && !c->trusted)
		kvr__store_xq_unlink(s, o);
	if (w->prev != NIL)
		s->own[w->prev].next = w->next;
	else
		c->head = w->next;
	if (w->next != NIL)
		s->own[w->next].prev = w->prev;
	else
		c->tail = w->prev;
	if (w->kind == OWN_LEASE) {
		c->nr_leases--;
		s->st.leases--;
	} else if (w->kind == OWN_QUAR) {
		c->nr_quar--;
		s->st.quar_xfers--;
	} else {
		c->nr_xfers--;
		s->st.transfers--;
	}
	w->id = 0;
}

/*
 * Recycle an owner whose objects were already committed, freed or unpinned.
 * Its object list is kept for the next request unless it is unusually
 * large: a few huge requests must not leave every spare owner fat.
 */
void kvr__store_owner_free(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];

	/* A staged slot freed unbound (abort, expiry, close). */
	if (w->staged) {
		s->chan[w->ch].nr_staged--;
		s->st.staged--;
		w->staged = 0;
	}
	owner_unpublish(s, o);
	if (w->cap > OWNER_KEEP_CAP) {
		free(w->objs);
		w->objs = NULL;
		w->cap = 0;
	}
	w->nr = 0;
	owner_untake(s, o);
}

/* ==== Lease heap (min on deadline_ns) ==== */

/*
 * A binary min-heap of lease owners by deadline, so kvr_store_expire()
 * finds the next expired lease in O(1) and drops it in O(log L). Each lease
 * records its position (heap_pos), which lets release and redeem take a
 * lease out of the middle in O(log L) too. Invariant (audit A6): every
 * live lease is in the heap at heap_pos, nothing else is, and a parent's
 * deadline is <= its children's.
 */

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
		/* 64-bit child index: 2i + 1 overflows 32 bits near the top. */
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

/* Room was made by kvr__store_mem_reserve(). */
static void heap_push(struct kvr_store *s, uint32_t o)
{
	uint32_t i = s->heap_nr++;

	heap_set(s, i, o);
	heap_sift_up(s, i);
}

/*
 * Take lease @o out of the heap wherever it is: the last entry fills its
 * hole and moves up or down, whichever restores the order (only one of the
 * two sifts moves it).
 */
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

/* A lease made at @now_ns dies at now + lease_ms, saturating at the top. */
static uint64_t deadline(const struct kvr_store *s, uint64_t now_ns)
{
	return now_ns > UINT64_MAX - s->lease_ns ? UINT64_MAX
						 : now_ns + s->lease_ns;
}

/* ==== Pins ==== */

/*
 * Owner @o pins committed object @x; the caller ensures @o does not list it
 * yet. The first pin takes the object off the LRU list, which is what makes
 * a pinned object impossible to evict: eviction only looks at the list.
 */
static void pin(struct kvr_store *s, uint32_t o, uint32_t x)
{
	struct owner *w = &s->own[o];
	struct obj *b = &s->obj[x];

	if (b->pins++ == 0) {
		lru_unlink(s, x);
		s->st.pinned_objects++;
		s->st.pinned_bytes += obj_bytes(s, b);
	}
	s->st.pins++;
	s->chan[w->ch].pins++;
	/* Per owner, so the channel's pinned bytes move with the owner. */
	w->bytes += obj_bytes(s, b);
	w->objs[w->nr++] = x;
}

/*
 * A lookup with pin, or a retrieve, ends here with its hits in s->scratch.
 * The stamp is bumped first so that a key repeated in the request finds
 * its object already stamped and is pinned once, keeping "an owner lists
 * an object at most once" (A4). The owner is published only when complete.
 */
uint32_t kvr__store_owner_pin_new(struct kvr_store *s, uint32_t kind,
				  uint32_t ch, uint32_t hits, uint64_t now_ns)
{
	uint32_t o;

	stamp_bump(s);
	o = owner_take(s, kind, ch);
	for (uint32_t i = 0; i < hits; i++) {
		uint32_t x = s->scratch[i];

		if (s->obj[x].stamp == s->stamp)
			continue; /* a repeated key: already pinned by o */
		s->obj[x].stamp = s->stamp;
		pin(s, o, x);
	}
	s->chan[ch].pinned_bytes += s->own[o].bytes;
	kvr__store_ua(s, ch)->pinned_bytes += s->own[o].bytes;
	s->own[o].ns = s->chan[ch].ns;
	s->own[o].uid = s->chan[ch].uid;
	kvr__store_owner_publish(s, o, now_ns);
	if (kind == OWN_LEASE) {
		s->own[o].deadline_ns = deadline(s, now_ns);
		heap_push(s, o);
	}
	return o;
}

/*
 * Drop every pin of owner @o and nobody else's. Walking its list backwards
 * and pushing each newly unpinned object to the LRU head leaves the first
 * key most recent (it was just read, and a prefix needs its head most).
 */
static uint64_t unpin_all(struct kvr_store *s, uint32_t o, bool cold)
{
	struct owner *w = &s->own[o];

	for (uint32_t i = w->nr; i-- > 0;) {
		uint32_t x = w->objs[i];

		if (--s->obj[x].pins == 0) {
			s->st.pinned_objects--;
			s->st.pinned_bytes -= obj_bytes(s, &s->obj[x]);
			if (s->obj[x].state == OBJ_DOOMED)
				kvr__store_sum_free(s, x); /* corrupt: gone */
			else if (cold)
				lru_push_tail(s, x);
			else
				lru_push_head(s, x);
		}
	}
	s->st.pins -= w->nr;
	s->chan[w->ch].pins -= w->nr;
	s->chan[w->ch].pinned_bytes -= w->bytes;
	kvr__store_ua(s, w->ch)->pinned_bytes -= w->bytes;
	w->bytes = 0;
	return w->nr;
}

uint64_t kvr__store_owner_unpin_all(struct kvr_store *s, uint32_t o)
{
	return unpin_all(s, o, false);
}

uint64_t kvr__store_owner_unpin_all_cold(struct kvr_store *s, uint32_t o)
{
	return unpin_all(s, o, true);
}

/* ==== Ending an owner ==== */

/* Release, expiry and channel close all end a lease this same way. */
uint64_t kvr__store_owner_drop_lease(struct kvr_store *s, uint32_t o)
{
	uint64_t n;

	heap_remove(s, o);
	n = kvr__store_owner_unpin_all(s, o);
	kvr__store_owner_free(s, o);
	return n;
}

/*
 * Abort a store transfer: its reserved objects were never readable, so they
 * are destroyed outright (slot and index entry freed) and never published;
 * the reserved gauges of the store and of the channel shrink by the same
 * amount they grew in prepare_store.
 */
uint64_t kvr__store_owner_abort(struct kvr_store *s, uint32_t o,
				uint64_t *bytes)
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
	kvr__store_ua(s, w->ch)->reserved_bytes -= w->bytes;
	*bytes = w->bytes;
	kvr__store_owner_free(s, o);
	return n;
}

/*
 * Re-type lease @o into a retrieve transfer of @ch: the same owner keeps
 * the same pins, so no object's pin count moves at all. Only its id,
 * channel and kind change, and the pins move from the lender's per-channel
 * count to the redeemer's (so the lender closing later does not drop them).
 * The id map loses one entry before it gains one, so publishing cannot
 * need memory.
 */
void kvr__store_owner_redeem(struct kvr_store *s, uint32_t o, uint32_t ch,
			     uint64_t now_ns)
{
	struct owner *w = &s->own[o];

	heap_remove(s, o);
	owner_unpublish(s, o);
	s->chan[w->ch].pins -= w->nr;
	s->chan[w->ch].pinned_bytes -= w->bytes;
	kvr__store_ua(s, w->ch)->pinned_bytes -= w->bytes;
	w->kind = OWN_RETRIEVE;
	w->ch = ch;
	s->chan[ch].pins += w->nr;
	s->chan[ch].pinned_bytes += w->bytes;
	kvr__store_ua(s, ch)->pinned_bytes += w->bytes;
	kvr__store_owner_publish(s, o, now_ns);
}
