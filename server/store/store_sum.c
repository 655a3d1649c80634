/* SPDX-License-Identifier: MIT */
/*
 * store_sum.c - the storage engine's part of per-chunk checksums: each
 * object keeps the XXH3-64 its storer sent with commit_store (an opaque
 * value: the store never reads the pool), retrieve answers hand it back,
 * and an object the server found corrupt is "doomed": hidden from every
 * lookup at once and freed when its last pin drops. Checking bytes is not
 * done here (server/chunk_sum.c does that, on a report only).
 */
#include <errno.h>

#include "store_int.h"

int kvr_store_set_sums(struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       const uint64_t *sums, uint32_t n)
{
	if (s)
		OWNER_ONLY(s);
	struct owner *w;
	uint32_t o;

	if (!s || ch >= s->cfg.max_channels || !sums)
		return -EINVAL;
	o = owner_find(s, xfer, OWN_STORE);
	if (o == NIL || s->own[o].ch != ch) {
		for (uint32_t i = 0; i < KVR_STORE_EXPIRED_MEMORY; i++)
			if (xfer && s->chan[ch].expired_ids[i] == xfer)
				return KVR_ERR_EXPIRED;
		return -ENOENT;
	}
	w = &s->own[o];
	if (n != w->nr)
		return -EINVAL; /* nothing changed: the commit may retry */
	for (uint32_t i = 0; i < n; i++) {
		struct obj *b = &s->obj[w->objs[i]];

		b->sum = sums[i];
		b->summed = 1;
	}
	return 0;
}

const uint64_t *kvr_store_last_sums(const struct kvr_store *s)
{
	return s->last_sums;
}

/* The object of retrieve transfer @xfer (of @ch) at @off, or NIL. */
static uint32_t xfer_obj(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
			 uint64_t off)
{
	const struct owner *w;
	uint32_t o = owner_find(s, xfer, OWN_RETRIEVE);

	if (o == NIL || s->own[o].ch != ch)
		return NIL;
	w = &s->own[o];
	for (uint32_t i = 0; i < w->nr; i++)
		if (obj_off(s, &s->obj[w->objs[i]]) == off)
			return w->objs[i];
	return NIL;
}

int kvr_store_xfer_sum(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       uint64_t off, uint64_t *len_out, uint64_t *sum_out)
{
	if (s)
		OWNER_ONLY(s);
	uint32_t x;

	if (!s || ch >= s->cfg.max_channels || !len_out || !sum_out)
		return -EINVAL;
	x = xfer_obj(s, ch, xfer, off);
	if (x == NIL)
		return -ENOENT;
	if (!s->obj[x].summed)
		return -ENODATA;
	*len_out = s->obj[x].len;
	*sum_out = s->obj[x].sum;
	return 0;
}

/*
 * Doomed, not freed: the object is pinned (by @xfer at least), and a pin
 * is a promise that its slot is not reused while the holder reads it. It
 * leaves the committed view at once (a lookup stops at it, a store of its
 * key is BUSY, not EXISTS) and its slot returns when the last pin drops.
 */
int kvr_store_drop_corrupt(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   uint64_t off)
{
	uint32_t x;

	if (!kvr__store_chan_ok(s, ch))
		return -EINVAL;
	x = xfer_obj(s, ch, xfer, off);
	if (x == NIL)
		return -ENOENT;
	if (s->obj[x].state == OBJ_DOOMED)
		return -EALREADY;
	s->obj[x].state = OBJ_DOOMED;
	s->st.corrupt_dropped++;
	return 0;
}

void kvr__store_sum_free(struct kvr_store *s, uint32_t x)
{
	uint64_t b = obj_bytes(s, &s->obj[x]);

	/* It left the pinned gauges in unpin_all; now the committed ones. */
	s->st.objects--;
	s->st.committed_bytes -= b;
	obj_destroy(s, x);
}
