/* SPDX-License-Identifier: MIT */
/*
 * store_l2.c - the storage-engine entry points the L2 tier needs
 * (server/l2/, server/l2_srv.c, docs/l2.md) and nothing else uses: reading the
 * keys of an open store transfer before it is committed (write-behind uploads
 * exactly what a worker committed), committing only some of a transfer's
 * reservations (a read-through load publishes the chunks that passed their
 * checks and frees the others, never publishing one that failed), and for
 * --l2-upload evict, pinning the coldest objects without a copy in L2 and
 * marking the ones whose upload succeeded (obj.l2), which then wait at the
 * LRU tail to be evicted first. The disk tier's twins (store_disk.c) share
 * the partial commit and the cold pins, marking obj.disk instead.
 *
 * Same rules as store.c: owner thread only, arguments checked first,
 * all-or-nothing. It does not hold the object states or owner bookkeeping
 * (store_int.h, store_owner.c) and never touches a pool byte.
 */
#include <errno.h>

#include "store_int.h"

/*
 * The start of every call here on an open transfer: the owner-thread check
 * (OWNER_ONLY, when @s is set), then transfer @xfer of @ch and @kind, as
 * store.c's xfer_lookup(): another channel's transfer is -ENOENT too, so a
 * caller cannot tell it from one that does not exist.
 * Return: 0 and *o_out, or -EINVAL / -ENOENT.
 */
static int find_xfer(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
		     uint32_t kind, uint32_t *o_out)
{
	int rc;

	if (s)
		OWNER_ONLY(s);
	rc = owner_find_for(s, ch, xfer, kind, o_out);
	if (rc < 0)
		return rc;
	return s->own[*o_out].ch == ch ? 0 : -ENOENT;
}

int kvr_store_channel_trust(struct kvr_store *s, uint32_t ch)
{
	if (!kvr__store_chan_ok(s, ch))
		return -EINVAL;
	s->chan[ch].trusted = true;
	return 0;
}

int kvr_store_xfer_keys(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
			struct kvr_key *keys, uint32_t max, uint32_t *ns_out)
{
	const struct owner *w;
	uint32_t o;
	int rc;

	rc = find_xfer(s, ch, xfer, OWN_STORE, &o);
	if (rc < 0)
		return rc;
	w = &s->own[o];
	if (!keys || !ns_out || max < w->nr)
		return -EINVAL;
	for (uint32_t i = 0; i < w->nr; i++) {
		const struct obj *x = &s->obj[w->objs[i]];

		keys[i].lo = x->lo;
		keys[i].hi = x->hi;
	}
	*ns_out = w->nr ? s->obj[w->objs[0]].ns : 0;
	return (int)w->nr;
}

/*
 * Kept objects are committed exactly as commit_store does (last to first,
 * onto the LRU head); the others are destroyed as abort_store does. The
 * owner is freed either way, so the transfer is gone on success.
 */
int kvr_store_commit_store_mask(struct kvr_store *s, uint32_t ch, uint64_t xfer,
				const uint8_t *keep, uint32_t n,
				uint64_t now_ns)
{
	return kvr__store_commit_mask(s, ch, xfer, keep, n, now_ns, false);
}

int kvr__store_commit_mask(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   const uint8_t *keep, uint32_t n, uint64_t now_ns,
			   bool disk)
{
	struct owner *w;
	struct chan *c;
	uint64_t kept = 0, kept_bytes = 0, gone = 0, gone_bytes = 0;
	uint32_t o;
	int rc;

	(void)now_ns;
	rc = find_xfer(s, ch, xfer, OWN_STORE, &o);
	if (rc < 0)
		return rc;
	w = &s->own[o];
	if (!keep || n != w->nr)
		return -EINVAL;
	c = &s->chan[ch];
	for (uint32_t i = w->nr; i-- > 0;) {
		uint32_t x = w->objs[i];
		uint64_t b = obj_bytes(s, &s->obj[x]);

		if (keep[i]) {
			s->obj[x].state = OBJ_COMMITTED;
			/* It came from there: a copy is there. */
			if (disk)
				s->obj[x].disk = 1;
			else
				s->obj[x].l2 = 1;
			s->obj[x].owner = NIL;
			lru_push_head(s, x);
			kept++;
			kept_bytes += b;
		} else {
			obj_destroy(s, x);
			gone++;
			gone_bytes += b;
		}
	}
	s->st.objects += kept;
	s->st.committed_bytes += kept_bytes;
	s->st.reserved_objects -= kept + gone;
	s->st.reserved_bytes -= kept_bytes + gone_bytes;
	c->reserved_objects -= kept + gone;
	c->reserved_bytes -= kept_bytes + gone_bytes;
	kvr__store_ua(s, ch)->reserved_bytes -= kept_bytes + gone_bytes;
	if (kept)
		s->st.commits++;
	else
		s->st.aborts++;
	kvr__store_owner_free(s, o);
	return (int)kept;
}

/* LRU entries one call looks at, at most: bounds the walk when the cold
 * end holds many small objects. */
#define COLD_WALK_MAX 4096u

/*
 * Candidates are collected in s->scratch while walking from the tail
 * (pin_new takes them from there); pinning comes after the walk, because
 * it unlinks objects from the list being walked.
 */
int kvr_store_l2_cold(struct kvr_store *s, uint32_t ch, uint32_t max,
		      uint64_t zone_bytes, uint64_t now_ns,
		      struct kvr_key *keys, struct kvr_slot_desc *slots,
		      uint32_t *ns_out, uint64_t *xfer_out)
{
	return kvr__store_cold_pin(s, ch, max, zone_bytes, now_ns, keys, slots,
				   ns_out, xfer_out, false);
}

int kvr__store_cold_pin(struct kvr_store *s, uint32_t ch, uint32_t max,
			uint64_t zone_bytes, uint64_t now_ns,
			struct kvr_key *keys, struct kvr_slot_desc *slots,
			uint32_t *ns_out, uint64_t *xfer_out, bool disk)
{
	const struct owner *w;
	uint32_t k = 0, ns = 0, o, x, walk = COLD_WALK_MAX;
	uint64_t seen = 0;
	int rc;

	if (s)
		OWNER_ONLY(s);
	if (!s || ch >= s->cfg.max_channels || !keys || !slots || !ns_out ||
	    !xfer_out || max == 0 || max > s->cfg.max_keys)
		return -EINVAL;
	if (chan_xfers(&s->chan[ch]) >= s->cfg.max_xfers_per_chan)
		return -EBUSY;
	rc = kvr__store_mem_reserve(s, 0, max);
	if (rc < 0)
		return rc;
	for (x = s->lru_tail;
	     x != NIL && walk > 0 && k < max && seen < zone_bytes;
	     x = s->obj[x].prev, walk--) {
		seen += obj_bytes(s, &s->obj[x]);
		if ((disk ? s->obj[x].disk || s->obj[x].disk_refused
			  : s->obj[x].l2) ||
		    (k > 0 && s->obj[x].ns != ns))
			continue;
		ns = s->obj[x].ns;
		s->scratch[k++] = x;
	}
	*xfer_out = 0;
	if (k == 0)
		return 0;
	s->st.retrieves++;
	o = kvr__store_owner_pin_new(s, OWN_RETRIEVE, ch, k, now_ns);
	w = &s->own[o];
	for (uint32_t i = 0; i < w->nr; i++) {
		const struct obj *b = &s->obj[w->objs[i]];
		struct kvr_slot_desc d = {b->off, b->len, KVR_SLOT_OK,
					  b->summed ? KVR_SLOT_F_SUM : 0};

		keys[i].lo = b->lo;
		keys[i].hi = b->hi;
		slots[i] = d;
		s->last_sums[i] =
		    b->sum; /* kvr_store_last_sums(); max <= max_keys */
	}
	*ns_out = ns;
	*xfer_out = w->id;
	return (int)w->nr;
}

int kvr_store_l2_saved(struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       const uint8_t *saved, uint32_t n)
{
	return kvr__store_cold_saved(s, ch, xfer, saved, n, false, true);
}

int kvr__store_cold_saved(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			  const uint8_t *saved, uint32_t n, bool disk,
			  bool cold)
{
	uint32_t o, *objs;
	int rc = find_xfer(s, ch, xfer, OWN_RETRIEVE, &o);

	if (rc < 0)
		return rc;
	if (!saved || n != s->own[o].nr)
		return -EINVAL;
	objs = s->own[o].objs;
	for (uint32_t i = 0; i < n; i++)
		if (saved[i] == KVR_STORE_DISK_REFUSED && disk)
			s->obj[objs[i]].disk_refused = 1;
		else if (saved[i] && disk)
			s->obj[objs[i]].disk = 1;
		else if (saved[i])
			s->obj[objs[i]].l2 = 1;
	if (cold)
		kvr__store_owner_unpin_all_cold(s, o);
	else
		kvr__store_owner_unpin_all(s, o);
	kvr__store_owner_free(s, o);
	s->st.retrieve_commits++;
	return 0;
}
