/* SPDX-License-Identifier: MIT */
/*
 * store_l2.c - the two storage-engine entry points the L2 tier needs
 * (server/l2*.c, docs/l2.md) and nothing else uses: reading the keys of an
 * open store transfer before it is committed (write-behind uploads exactly
 * what a worker committed), and committing only some of a transfer's
 * reservations (a read-through load publishes the chunks that passed their
 * checks and frees the others, never publishing one that failed).
 *
 * Same rules as store.c: owner thread only, arguments checked first,
 * all-or-nothing. It does not hold the object states or owner bookkeeping
 * (store_int.h, store_owner.c) and never touches a pool byte.
 */
#include <errno.h>

#include "store_int.h"

/* The open store transfer @xfer of @ch, as store.c's xfer_lookup(). */
static int find_store_xfer(const struct kvr_store *s, uint32_t ch,
			   uint64_t xfer, uint32_t *o_out)
{
	uint32_t o;

	if (!s || ch >= s->cfg.max_channels)
		return -EINVAL;
	o = owner_find(s, xfer, OWN_STORE);
	if (o == NIL)
		return -ENOENT;
	if (s->own[o].ch != ch)
		return -EPERM;
	*o_out = o;
	return 0;
}

int kvr_store_channel_trust(struct kvr_store *s, uint32_t ch)
{
	if (s)
		OWNER_ONLY(s);
	if (!s || ch >= s->cfg.max_channels)
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

	if (s)
		OWNER_ONLY(s);
	rc = find_store_xfer(s, ch, xfer, &o);
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
	struct owner *w;
	struct chan *c;
	uint64_t kept = 0, kept_bytes = 0, gone = 0, gone_bytes = 0;
	uint32_t o;
	int rc;

	(void)now_ns;
	if (s)
		OWNER_ONLY(s);
	rc = find_store_xfer(s, ch, xfer, &o);
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
	if (kept)
		s->st.commits++;
	else
		s->st.aborts++;
	kvr__store_owner_free(s, o);
	return (int)kept;
}
