/* SPDX-License-Identifier: MIT */
/*
 * store.c - the requests of kvringd's storage engine (contract in store.h,
 * design in docs/storage.md): lookup, store (prepare/commit/abort),
 * retrieve (prepare, redeem a lease, commit), lease release,
 * expiry and the stats readers. Each entry point asserts it runs on the
 * store's owner thread, checks its arguments, runs the reservation step
 * (store_mem.c), and only then changes state through steps that cannot
 * fail, so that a negative return always means "nothing changed".
 *
 * What it does not hold: the state itself and the inline list helpers
 * (store_int.h), memory growth and create/destroy (store_mem.c), owner
 * bookkeeping, pins and the lease heap (store_owner.c), channels
 * (store_chan.c), the quarantine (store_quar.c), eviction (store_lru.c),
 * the audit (store_audit.c). Not in the engine at all: the
 * wire format, logging, the event loop and any byte of the pool.
 *
 * The objects this file makes and moves:
 *  - RESERVED: made by prepare_store under one store transfer; never
 *    readable, never evictable; becomes COMMITTED by commit_store of the
 *    same channel, or is destroyed by abort_store / channel_close;
 *  - COMMITTED: readable by lookup and retrieve; on the LRU list while no
 *    owner pins it, and evictable only then.
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"

/*
 * The checks every keyed request shares, after the owner-thread check
 * (OWNER_ONLY, when @s is set). The order fixes which error wins
 * when several apply (a bad channel before a too-long request).
 */
static int check_keys(const struct kvr_store *s, uint32_t ch, uint32_t ns,
		      const struct kvr_key *keys, uint32_t n)
{
	if (s)
		OWNER_ONLY(s);
	if (!s || ch >= s->cfg.max_channels || ns >= s->cfg.max_ns)
		return -EINVAL;
	if (n > s->cfg.max_keys)
		return -E2BIG;
	if (n && !keys)
		return -EINVAL;
	return 0;
}

/*
 * Fill s->scratch with the objects of the longest committed prefix of
 * keys[0..n); return its length. A RESERVED object ends the prefix like a
 * miss: its bytes may still be being written. Each key is read once (it
 * may live in shared memory a worker can still change; a changed key is
 * just another key).
 */
static uint32_t find_prefix(struct kvr_store *s, uint32_t ns,
			    const struct kvr_key *keys, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct kvr_key k;
		uint32_t x;

		if (i % PREFETCH_KEYS == 0)
			prefetch_keys(s, ns, keys, i, n);
		k = keys[i];
		x = kvr_index_find(&s->index, ns, &k);
		if (x == KVR_INDEX_NONE || s->obj[x].state != OBJ_COMMITTED)
			break;
		s->scratch[i] = x;
	}
	return i;
}

/*
 * The pin quota: how many of the @hits objects in s->scratch @ch may pin
 * before its pinned bytes pass quota_pinned_bytes. A key repeated in the
 * request is counted each time (it is pinned once): the cut errs on the
 * safe side. O(hits), the cost of pinning them anyway.
 */
static uint32_t pin_cut(struct kvr_store *s, uint32_t ch, uint32_t hits)
{
	uint64_t quota = s->cfg.quota_pinned_bytes, sum;
	uint64_t uquota = s->cfg.quota_uid_pinned_bytes, usum;
	struct uacct *u = kvr__store_ua(s, ch);

	if (s->chan[ch].trusted)
		return hits;
	if (!quota)
		quota = UINT64_MAX;
	if (!uquota || !s->chan[ch].uidx)
		uquota = UINT64_MAX;
	if (quota == UINT64_MAX && uquota == UINT64_MAX)
		return hits;
	sum = s->chan[ch].pinned_bytes;
	usum = u->pinned_bytes;
	for (uint32_t i = 0; i < hits; i++) {
		uint64_t b = obj_bytes(s, &s->obj[s->scratch[i]]);

		sum += b;
		usum += b;
		if (sum > quota || usum > uquota) {
			s->chan[ch].quota_denied++;
			s->st.quota_denied++;
			if (usum > uquota)
				u->quota_denied++;
			return i;
		}
	}
	return hits;
}

/* Whether @id is one of @ch's transfers that its deadline reclaimed. */
static bool was_expired(const struct kvr_store *s, uint32_t ch, uint64_t id)
{
	for (uint32_t i = 0; i < KVR_STORE_EXPIRED_MEMORY; i++)
		if (s->chan[ch].expired_ids[i] == id)
			return true;
	return false;
}

/*
 * Find the open transfer @xfer of @kind for channel @ch. Another channel's
 * id answers -ENOENT, exactly as an unknown id: a different answer would
 * tell a prober that the transfer exists (docs/reliability.md, "Threat
 * model").
 * Return: 0 and *o_out, or -EINVAL / -ENOENT / KVR_ERR_EXPIRED.
 */
static int xfer_lookup(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       uint32_t kind, uint32_t *o_out)
{
	uint32_t o;
	int rc = owner_find_for(s, ch, xfer, kind, &o);

	if (rc == -ENOENT && was_expired(s, ch, xfer))
		return KVR_ERR_EXPIRED;
	if (rc < 0)
		return rc;
	if (s->own[o].ch != ch)
		return -ENOENT;
	*o_out = o;
	return 0;
}

/*
 * The start of every call that ends a transfer: the owner-thread check
 * (OWNER_ONLY, when @s is set); xfer 0 (nothing was reserved or pinned)
 * has nothing to end; otherwise find the open
 * transfer, and answer for a missing one through the quarantine
 * (store_quar.c: a late call on an expired transfer frees its slots).
 * Return: 1 and *o_out, 0 for xfer 0, or a negative error to return.
 */
static int xfer_to_end(struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       uint32_t kind, uint32_t *o_out)
{
	int rc;

	if (s)
		OWNER_ONLY(s);
	if (s && ch < s->cfg.max_channels && xfer == 0)
		return 0;
	rc = xfer_lookup(s, ch, xfer, kind, o_out);
	return rc < 0 ? kvr__store_quar_answer(s, ch, xfer, kind, rc) : 1;
}

/*
 * The committed prefix of keys[0..n) (find_prefix, its length in
 * *found); with @pin, the owner that will pin it is reserved first and the
 * prefix is cut to what @ch may pin (pin_cut).
 * Return: the hits, or a negative error with nothing touched.
 */
static int prefix_hits(struct kvr_store *s, uint32_t ch, uint32_t ns,
		       const struct kvr_key *keys, uint32_t n, bool pin,
		       uint32_t *found)
{
	uint32_t hits, fit;
	int rc;

	if (pin) {
		rc = kvr__store_mem_reserve(s, 0, n ? n : 1);
		if (rc < 0)
			return rc;
	}
	hits = find_prefix(s, ns, keys, n);
	*found = hits;
	if (!pin || hits == 0)
		return (int)hits;
	fit = pin_cut(s, ch, hits);
	return fit ? (int)fit : -EDQUOT; /* nothing touched yet */
}

/*
 * Lookup never changes an object's state, only its recency, and with @pin
 * adds one owner. The owner is reserved before the index is read, so the
 * only failures come before the LRU is touched.
 */
int kvr_store_lookup(struct kvr_store *s, uint32_t ch, uint32_t ns,
		     const struct kvr_key *keys, uint32_t n, bool pin_hits,
		     uint64_t now_ns, uint64_t *lease_out)
{
	uint32_t hits, found, o;
	int rc = check_keys(s, ch, ns, keys, n);

	if (rc < 0)
		return rc;
	if (pin_hits) {
		if (!lease_out)
			return -EINVAL;
		if (s->chan[ch].nr_leases >= s->cfg.max_leases_per_chan)
			return -EBUSY;
	}
	rc = prefix_hits(s, ch, ns, keys, n, pin_hits, &found);
	if (rc < 0)
		return rc;
	hits = (uint32_t)rc;
	s->st.lookups++;
	s->st.lookup_keys += n;
	s->st.lookup_hits += hits;
	/* Bytes of the hits, for the byte hit ratio (kvringd's counters). */
	s->last_hit_bytes = 0;
	for (uint32_t i = 0; i < hits; i++)
		s->last_hit_bytes += s->obj[s->scratch[i]].len;
	s->st.lookup_hit_bytes += s->last_hit_bytes;
	kvr__store_lru_touch_prefix(s, hits);
	if (pin_hits && hits > 0) {
		/* No lease for zero hits: there would be nothing to pin. */
		o = kvr__store_owner_pin_new(s, OWN_LEASE, ch, hits, now_ns);
		s->st.leases_created++;
		*lease_out = s->own[o].id;
	} else if (lease_out) {
		*lease_out = 0;
	}
	return (int)hits;
}

/*
 * A lease exists, for channel @ch, only if @ch has the lease's uid and
 * namespace. Anyone else gets the answer of an unknown lease, so probing
 * ids tells a stranger nothing (docs/reliability.md, "Threat model").
 */
static bool lease_visible(const struct kvr_store *s, uint32_t ch, uint32_t o)
{
	return s->own[o].uid == s->chan[ch].uid &&
	       s->own[o].ns == s->chan[ch].ns;
}

/*
 * A lease past its deadline is dead here even before expire() sweeps it:
 * the answer must not depend on when the loop last ran its timer.
 */
int kvr_store_release_lease(struct kvr_store *s, uint32_t ch, uint64_t lease_id,
			    uint64_t now_ns)
{
	uint32_t o;

	if (!kvr__store_chan_ok(s, ch))
		return -EINVAL;
	o = owner_find(s, lease_id, OWN_LEASE);
	if (o == NIL || s->own[o].deadline_ns <= now_ns ||
	    !lease_visible(s, ch, o) || s->own[o].ch != ch)
		return -ENOENT; /* "not yours" is "unknown": nothing leaks */
	kvr__store_owner_drop_lease(s, o);
	s->st.leases_released++;
	return 0;
}

/*
 * Pass 1 of prepare_store, last key to first: find every key (into
 * s->scratch), touch and stamp the ones already committed, so keys[0]
 * ends most recent and eviction in pass 2 can't take them (their answer
 * would be a lie). Windows of keys are prefetched from the back.
 */
static void mark_stored(struct kvr_store *s, uint32_t ns,
			const struct kvr_key *keys, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;) {
		struct kvr_key k;
		uint32_t x;

		if ((n - 1 - i) % PREFETCH_KEYS == 0)
			prefetch_keys(
			    s, ns, keys,
			    i + 1 > PREFETCH_KEYS ? i + 1 - PREFETCH_KEYS : 0,
			    i + 1);
		k = keys[i];
		x = kvr_index_find(&s->index, ns, &k);
		s->scratch[i] = x;
		if (x != KVR_INDEX_NONE && s->obj[x].state == OBJ_COMMITTED) {
			touch(s, x);
			s->obj[x].stamp = s->stamp;
		}
	}
}

/*
 * The one request that creates objects. Invariants it keeps: each new
 * object is RESERVED, indexed, holds exactly one allocation and is listed
 * by exactly one store transfer (this one); a key already COMMITTED or
 * RESERVED is not reserved again; eviction takes neither a pinned or
 * reserved object (they are off the LRU) nor one this request answers
 * EXISTS (stamped). Per-key outcomes are answers, not errors.
 */
int kvr_store_prepare_store(struct kvr_store *s, uint32_t ch, uint32_t ns,
			    const struct kvr_key *keys, const uint64_t *sizes,
			    uint32_t n, uint64_t now_ns,
			    struct kvr_slot_desc *out, uint64_t *xfer_out)
{
	uint64_t total, quota, uquota, max_key;
	uint32_t o, i;
	struct owner *w;
	struct chan *c;
	struct uacct *u;
	int rc = check_keys(s, ch, ns, keys, n);

	if (rc < 0)
		return rc;
	if (!xfer_out || (n && (!sizes || !out)))
		return -EINVAL;
	c = &s->chan[ch];
	if (chan_xfers(c) >= s->cfg.max_xfers_per_chan)
		return -EBUSY;
	if (n == 0) {
		*xfer_out = 0;
		return 0;
	}
	/*
	 * The all-or-nothing step, and why it comes first: from pass 1 on,
	 * this request touches the LRU, evicts, reserves slots and fills
	 * out[]; none of that could be undone cleanly if a later malloc
	 * failed (an evicted victim cannot come back). So every byte of heap
	 * that n new objects could need is reserved here, while nothing has
	 * changed yet; past this point nothing can fail.
	 */
	rc = kvr__store_mem_reserve(s, n, n);
	if (rc < 0)
		return rc;

	stamp_bump(s);
	mark_stored(s, ns, keys, n);
	/* Pass 2: answer each key, reserving the new ones. */
	o = owner_take(s, OWN_STORE, ch);
	w = &s->own[o];
	total = s->pool_total;
	/* The quota is checked before place(): a request it forbids must not
	 * evict anyone's objects. 0 means none (UINT64_MAX never binds). */
	quota = s->cfg.quota_reserved_bytes && !c->trusted
		    ? s->cfg.quota_reserved_bytes
		    : UINT64_MAX;
	/* The uid's aggregate binds opened channels only (entry 0 is the
	 * sink of channels never opened). The same invariant as for quota:
	 * u->reserved_bytes + w->bytes <= uquota, since only this test lets
	 * a uid's reservations grow. */
	u = kvr__store_ua(s, ch);
	uquota = s->cfg.quota_uid_reserved_bytes && !c->trusted && c->uidx
		     ? s->cfg.quota_uid_reserved_bytes
		     : UINT64_MAX;
	max_key = s->cfg.max_key_bytes ? s->cfg.max_key_bytes : total;
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
		} else if (len == 0 || len > total || len > OBJ_LEN_MAX) {
			d.status = KVR_SLOT_INVALID;
			s->st.invalid_sizes++;
		} else if (len > max_key ||
			   kvr_alloc_round(&s->alloc, len) >
			       quota - c->reserved_bytes - w->bytes) {
			/* c->reserved_bytes + w->bytes <= quota always holds
			 * (only this test lets them grow), so no underflow. */
			d.status = KVR_SLOT_QUOTA;
			s->st.quota_denied++;
			c->quota_denied++;
		} else if (kvr_alloc_round(&s->alloc, len) >
			   uquota - u->reserved_bytes - w->bytes) {
			/* The uid's channels together: the same answer, and
			 * nothing evicted for it either. */
			d.status = KVR_SLOT_QUOTA;
			s->st.quota_denied++;
			c->quota_denied++;
			u->quota_denied++;
		} else if (place(s, len, &d.off) < 0) {
			d.status = KVR_SLOT_NOROOM;
			s->st.no_room++;
		} else {
			struct obj *b;

			x = obj_take(s);
			b = &s->obj[x];
			b->lo = k.lo;
			b->hi = k.hi;
			b->ns = ns & OBJ_NS_MAX; /* ns < max_ns <= 2^20 */
			b->unit = (uint32_t)(d.off >> s->unit_shift);
			b->len = len & OBJ_LEN_MAX; /* checked above */
			b->stamp = s->stamp;
			b->owner = o; /* shares pins' word while RESERVED */
			b->prev = b->next = NIL;
			b->state = OBJ_RESERVED;
			b->summed = 0; /* until kvr_store_set_sums() */
			s->ns_objs[ns]++;
			/* Cannot fail: the index reserved room for n. */
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
	kvr__store_owner_publish(s, o, now_ns);
	s->st.reserved_objects += w->nr;
	s->st.reserved_bytes += w->bytes;
	c->reserved_objects += w->nr;
	c->reserved_bytes += w->bytes;
	kvr__store_ua(s, ch)->reserved_bytes += w->bytes;
	*xfer_out = w->id;
	return (int)w->nr;
}

/*
 * Publish a store transfer: RESERVED -> COMMITTED, onto the LRU head, the
 * reserved gauges move to the committed ones. Only now may a lookup see the
 * objects, so a reader can never see bytes still being written.
 */
int kvr_store_commit_store(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   uint64_t now_ns)
{
	struct owner *w;
	struct chan *c;
	uint32_t o = NIL; /* set by xfer_to_end() when it returns > 0 */
	int rc;

	(void)now_ns;
	rc = xfer_to_end(s, ch, xfer, OWN_STORE, &o);
	if (rc <= 0)
		return rc;
	w = &s->own[o];
	/* A staged slot's object sits under a placeholder key: only a bind
	 * (store_stage.c) names it, so it is never published as it is. */
	if (w->staged)
		return -EINVAL;
	c = &s->chan[ch];
	/* Last to first, so that keys[0] ends up most recently used. */
	for (uint32_t i = w->nr; i-- > 0;) {
		uint32_t x = w->objs[i];

		s->obj[x].state = OBJ_COMMITTED;
		s->obj[x].pins = 0; /* was its owner: now no pin */
		lru_push_head(s, x);
	}
	s->st.objects += w->nr;
	s->st.committed_bytes += w->bytes;
	s->st.reserved_objects -= w->nr;
	s->st.reserved_bytes -= w->bytes;
	c->reserved_objects -= w->nr;
	c->reserved_bytes -= w->bytes;
	kvr__store_ua(s, ch)->reserved_bytes -= w->bytes;
	s->st.commits++;
	kvr__store_owner_free(s, o);
	return 0;
}

int kvr_store_check_store(const struct kvr_store *s, uint32_t ch, uint64_t xfer)
{
	if (s)
		OWNER_ONLY(s);
	uint32_t o;

	return xfer_lookup(s, ch, xfer, OWN_STORE, &o);
}

/* Reservations of an aborted transfer are freed and never published. */
int kvr_store_abort_store(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			  uint64_t now_ns)
{
	uint64_t bytes;
	uint32_t o = NIL; /* set by xfer_to_end() when it returns > 0 */
	int rc;

	(void)now_ns;
	rc = xfer_to_end(s, ch, xfer, OWN_STORE, &o);
	if (rc <= 0)
		return rc;
	kvr__store_owner_abort(s, o, &bytes);
	s->st.aborts++;
	return 0;
}

/*
 * Pin the committed prefix under a new retrieve transfer. The owner is
 * reserved before anything is read or touched, for the same reason as in
 * prepare_store; with zero hits it simply stays spare.
 */
int kvr_store_prepare_retrieve(struct kvr_store *s, uint32_t ch, uint32_t ns,
			       const struct kvr_key *keys, uint32_t n,
			       uint64_t now_ns, struct kvr_slot_desc *out,
			       uint64_t *xfer_out)
{
	uint32_t hits, o;
	int rc = check_keys(s, ch, ns, keys, n);

	if (rc < 0)
		return rc;
	if (!xfer_out || (n && !out))
		return -EINVAL;
	if (chan_xfers(&s->chan[ch]) >= s->cfg.max_xfers_per_chan)
		return -EBUSY;
	/* s->last_stored: kvr_store_last_stored(). */
	rc = prefix_hits(s, ch, ns, keys, n, true, &s->last_stored);
	if (rc < 0)
		return rc;
	hits = (uint32_t)rc;
	s->st.retrieves++;
	if (hits == 0) {
		*xfer_out = 0;
		return 0;
	}
	kvr__store_lru_touch_prefix(s, hits);
	o = kvr__store_owner_pin_new(s, OWN_RETRIEVE, ch, hits, now_ns);
	for (uint32_t i = 0; i < hits; i++) {
		const struct obj *b = &s->obj[s->scratch[i]];
		struct kvr_slot_desc d = {obj_off(s, b), b->len, KVR_SLOT_OK,
					  b->summed ? KVR_SLOT_F_SUM : 0};

		out[i] = d;
		s->last_sums[i] = b->sum; /* kvr_store_last_sums() */
	}
	*xfer_out = s->own[o].id;
	return (int)hits;
}

/*
 * Redeem a lease: any channel may, and the lease's owner record becomes the
 * redeemer's retrieve transfer with its pins untouched. Nothing is reserved:
 * re-typing needs no memory (store_owner.c says why), so every check here
 * comes before the first change.
 */
int kvr_store_prepare_retrieve_lease(struct kvr_store *s, uint32_t ch,
				     uint64_t lease_id, uint64_t now_ns,
				     struct kvr_slot_desc *out, uint32_t max,
				     uint64_t *xfer_out)
{
	if (s)
		OWNER_ONLY(s);
	struct owner *w;
	uint32_t o;

	if (!s || ch >= s->cfg.max_channels || !out || !xfer_out)
		return -EINVAL;
	o = owner_find(s, lease_id, OWN_LEASE);
	if (o == NIL || s->own[o].deadline_ns <= now_ns ||
	    !lease_visible(s, ch, o))
		return -ENOENT;
	w = &s->own[o];
	if (max < w->nr)
		return -EINVAL;
	if (chan_xfers(&s->chan[ch]) >= s->cfg.max_xfers_per_chan)
		return -EBUSY;
	/* The lender's own channel already counts these pins. */
	if (s->cfg.quota_pinned_bytes && w->ch != ch &&
	    w->bytes > s->cfg.quota_pinned_bytes - s->chan[ch].pinned_bytes) {
		s->chan[ch].quota_denied++;
		s->st.quota_denied++;
		return -EDQUOT;
	}
	/* A lease is redeemed by its own uid (lease_visible), whose
	 * aggregate already holds these pins; only another entry (a channel
	 * never opened) could grow, and that one binds no quota. */
	kvr__store_owner_redeem(s, o, ch, now_ns);
	s->st.leases_redeemed++;
	s->st.retrieves++;
	for (uint32_t i = 0; i < w->nr; i++) {
		const struct obj *b = &s->obj[w->objs[i]];
		struct kvr_slot_desc d = {obj_off(s, b), b->len, KVR_SLOT_OK,
					  b->summed ? KVR_SLOT_F_SUM : 0};

		out[i] = d;
		s->last_sums[i] = b->sum; /* max >= w->nr, checked above */
	}
	*xfer_out = w->id;
	return (int)w->nr;
}

/* The reads are done: drop this transfer's pins, and nobody else's. */
int kvr_store_commit_retrieve(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			      uint64_t now_ns)
{
	uint32_t o = NIL; /* set by xfer_to_end() when it returns > 0 */
	int rc;

	(void)now_ns;
	rc = xfer_to_end(s, ch, xfer, OWN_RETRIEVE, &o);
	if (rc <= 0)
		return rc;
	kvr__store_owner_unpin_all(s, o);
	kvr__store_owner_free(s, o);
	s->st.retrieve_commits++;
	return 0;
}

/*
 * Reclaim transfer @o at its deadline into quarantine (store_quar.c), and
 * remember its id on its channel so a late call can be told why.
 */
static void expire_xfer(struct kvr_store *s, uint32_t o)
{
	struct chan *c = &s->chan[s->own[o].ch];

	c->expired_ids[c->expired_pos++ % KVR_STORE_EXPIRED_MEMORY] =
	    s->own[o].id;
	c->xfers_expired++;
	s->st.xfers_expired++;
	if (s->own[o].kind == OWN_STORE)
		s->st.store_xfers_expired++;
	kvr__store_quar_take(s, o);
}

uint64_t kvr_store_ns_objects(const struct kvr_store *s, uint32_t ns)
{
	if (s)
		OWNER_ONLY(s);
	return s && ns < s->cfg.max_ns ? s->ns_objs[ns] : 0;
}

/* A walk of every object: only ever run when a namespace must be freed. */
uint64_t kvr_store_ns_evict(struct kvr_store *s, uint32_t ns)
{
	if (s)
		OWNER_ONLY(s);
	if (!s || ns >= s->cfg.max_ns)
		return 0;
	for (uint32_t x = 0; x < s->obj_fresh && s->ns_objs[ns]; x++) {
		struct obj *b = &s->obj[x];

		if (b->state == OBJ_COMMITTED && b->ns == ns && b->pins == 0) {
			/* Counted apart from the evictions that made room. */
			s->st.ns_evictions++;
			s->st.ns_evicted_bytes += obj_bytes(s, b);
			kvr__store_lru_evict(s, x);
		}
	}
	return s->ns_objs[ns];
}

/*
 * Earliest deadline first, from the heap top. The budget bounds the work
 * of one housekeeping tick; leases left over are still dead to release and
 * redeem (they check the deadline), only their pins linger until next time.
 */
int kvr_store_expire(struct kvr_store *s, uint64_t now_ns, uint32_t budget)
{
	if (s)
		OWNER_ONLY(s);
	int n = 0;

	if (!s)
		return -EINVAL;
	while (s->heap_nr && s->own[s->heap[0]].deadline_ns <= now_ns &&
	       (budget == 0 || (uint32_t)n < budget) && n < INT32_MAX) {
		kvr__store_owner_drop_lease(s, s->heap[0]);
		s->st.leases_expired++;
		n++;
	}
	while (s->xq_head != NIL && s->own[s->xq_head].deadline_ns <= now_ns &&
	       (budget == 0 || (uint32_t)n < budget) && n < INT32_MAX) {
		expire_xfer(s, s->xq_head);
		n++;
	}
	return n;
}

uint64_t kvr_store_next_expiry(const struct kvr_store *s)
{
	if (s)
		OWNER_ONLY(s);
	uint64_t l = s->heap_nr ? s->own[s->heap[0]].deadline_ns : UINT64_MAX;
	uint64_t x =
	    s->xq_head != NIL ? s->own[s->xq_head].deadline_ns : UINT64_MAX;

	return l < x ? l : x;
}

/* ==== Stats ==== */

/*
 * The store keeps its own counters in s->st as it goes; the allocator's
 * figures are read on demand (largest free extent and fragmentation cost
 * O(log n), too much to keep current on every get and put).
 */
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

uint64_t kvr_store_capacity(const struct kvr_store *s)
{
	if (s)
		OWNER_ONLY(s);
	return s->obj_cap;
}

uint64_t kvr_store_table_bytes(const struct kvr_store *s)
{
	if (s)
		OWNER_ONLY(s);
	return s->obj_va_bytes ? (uint64_t)s->obj_fresh * sizeof(struct obj)
			       : 0;
}

uint64_t kvr_store_last_hit_bytes(const struct kvr_store *s)
{
	return s->last_hit_bytes;
}

void kvr_store_prefer_below(struct kvr_store *s, uint64_t zeroed_bytes)
{
	kvr_alloc_prefer_below(&s->alloc, zeroed_bytes);
}

uint32_t kvr_store_last_stored(const struct kvr_store *s)
{
	return s->last_stored;
}
