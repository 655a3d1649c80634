/* SPDX-License-Identifier: MIT */
/*
 * store_chan.c - channels of kvringd's storage engine: a worker's channel
 * opened (bound to its namespace and uid), closed (everything it holds
 * released, its quarantine too once its process is gone), detached (a
 * closed channel whose live process may still write the slots of its
 * quarantine), and what it holds (kvr_store_chan_stats).
 *
 * What it does not do: end an owner itself (store_owner.c, store_quar.c)
 * or decide whether a process is gone (kvringd watches its pidfd).
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"

/* End owner @o of a channel being closed, counted in @rel. */
static void release_owner(struct kvr_store *s, uint32_t o, enum quar_why why,
			  struct kvr_store_released *rel)
{
	uint64_t bytes;

	switch (s->own[o].kind) {
	case OWN_STORE:
		rel->objects_freed += kvr__store_owner_abort(s, o, &bytes);
		rel->bytes_freed += bytes;
		rel->store_xfers++;
		s->st.aborts++;
		break;
	case OWN_RETRIEVE:
		rel->pins_dropped += kvr__store_owner_unpin_all(s, o);
		kvr__store_owner_free(s, o);
		rel->retrieve_xfers++;
		break;
	case OWN_QUAR:
		kvr__store_quar_free(s, o, why, &bytes);
		rel->quar_xfers++;
		rel->quar_bytes += bytes;
		break;
	default: /* OWN_LEASE */
		rel->pins_dropped += kvr__store_owner_drop_lease(s, o);
		rel->leases++;
		break;
	}
}

/*
 * Release everything the channel holds, in O(what it holds): its owner
 * list is exactly its store transfers, retrieve transfers, leases and
 * quarantine. Each iteration frees the list head, so the loop ends and a
 * second call finds the list empty (idempotent). A lease this channel made
 * but another redeemed is on the redeemer's list now, so it is not touched.
 */
int kvr_store_channel_close(struct kvr_store *s, uint32_t ch, uint64_t now_ns,
			    struct kvr_store_released *rel_out)
{
	struct kvr_store_released rel = {0};
	struct chan *c;

	(void)now_ns;
	if (!kvr__store_chan_ok(s, ch))
		return -EINVAL;
	c = &s->chan[ch];
	while (c->head != NIL)
		release_owner(s, c->head,
			      c->detached ? QUAR_CLOSED : QUAR_EXITED, &rel);
	if (c->detached) {
		c->detached = false;
		s->st.detached--;
	}
	s->st.channel_closes++;
	/* The next worker on this channel is someone else; it holds nothing
	 * now, so its uid's aggregate loses nothing more by the unbind. */
	kvr__store_uid_unbind(s, ch);
	c->ns = c->uid = 0;
	memset(c->expired_ids, 0, sizeof(c->expired_ids));
	c->expired_pos = 0;
	c->quota_denied = c->xfers_expired = 0;
	c->stages = c->binds = c->binds_existing = 0;
	if (rel_out)
		*rel_out = rel;
	return 0;
}

/*
 * Everything but the quarantine goes as in channel_close; the channel
 * keeps its uid binding, so the quarantine stays charged to the uid until
 * the close that ends it.
 */
int kvr_store_channel_detach(struct kvr_store *s, uint32_t ch, uint64_t now_ns,
			     struct kvr_store_released *rel_out)
{
	struct kvr_store_released rel = {0};
	struct chan *c;
	uint32_t o;

	if (!kvr__store_chan_ok(s, ch))
		return -EINVAL;
	c = &s->chan[ch];
	if (c->nr_quar == 0)
		return kvr_store_channel_close(s, ch, now_ns, rel_out);
	for (o = c->head; o != NIL;) {
		uint32_t next = s->own[o].next;

		if (s->own[o].kind != OWN_QUAR)
			release_owner(s, o, QUAR_EXITED, &rel);
		o = next;
	}
	rel.quar_kept = c->nr_quar;
	if (!c->detached) {
		c->detached = true;
		s->st.detached++;
	}
	if (rel_out)
		*rel_out = rel;
	return (int)c->nr_quar;
}

int kvr_store_channel_open(struct kvr_store *s, uint32_t ch, uint32_t ns,
			   uint32_t uid)
{
	if (s)
		OWNER_ONLY(s);
	if (!s || ch >= s->cfg.max_channels || ns >= s->cfg.max_ns)
		return -EINVAL;
	if (s->chan[ch].detached)
		return -EBUSY;
	s->chan[ch].ns = ns;
	s->chan[ch].uid = uid;
	kvr__store_uid_bind(s, ch, uid);
	return 0;
}

/* O(1): kvringd calls this after every batch of requests. */
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
	cs.pinned_bytes = c->pinned_bytes;
	cs.oldest_ns = c->tail != NIL ? s->own[c->tail].created_ns : 0;
	cs.quota_denied = c->quota_denied;
	cs.xfers_expired = c->xfers_expired;
	cs.staged = c->nr_staged;
	cs.stages = c->stages;
	cs.binds = c->binds;
	cs.binds_existing = c->binds_existing;
	cs.quar_xfers = c->nr_quar;
	cs.quar_slots = c->quar_slots;
	cs.quar_bytes = c->quar_bytes;
	*out = cs;
	return 0;
}
