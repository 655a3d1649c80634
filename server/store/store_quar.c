/* SPDX-License-Identifier: MIT */
/*
 * store_quar.c - the quarantine of kvringd's storage engine. A transfer's
 * deadline takes it away from a worker that stopped answering (SIGSTOP, a
 * frozen cgroup, a page-fault storm, a device copy that outlives its
 * deadline), but that worker may still be copying into its store slots or
 * out of its retrieve slots when it resumes. So the slots are not given to
 * anyone until the worker can no longer touch them:
 *  - it answered for the transfer (a late commit or abort, which it only
 *    sends after its copy; answered KVR_ERR_EXPIRED), or
 *  - its process is gone when its channel closes, or
 *  - its channel closed while the process lived (detached), and the
 *    process then exited.
 *
 * A quarantined transfer is the same owner re-typed OWN_QUAR, with what it
 * was in qkind. It keeps its objects, its id and its place on its
 * channel's list, so its bytes still count against the channel's and the
 * uid's quotas (reserved_* and pinned_bytes are unchanged) and a worker
 * stopped for ever holds at most its quota. It leaves the deadline queue
 * and no longer counts as an open transfer. A store transfer's objects
 * leave the index (nothing was published; another worker may store the
 * same keys into other slots) but keep their slots, off the LRU, so
 * eviction cannot take them; a retrieve transfer's pins stay, so its
 * objects stay readable and unevictable.
 *
 * What it does not do: decide when a process is gone (kvringd watches its
 * pidfd and calls kvr_store_channel_detach / _close), or log.
 */
#include <errno.h>

#include "store_int.h"

void kvr__store_quar_take(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];
	struct chan *c = &s->chan[w->ch];

	kvr__store_xq_unlink(s, o);
	c->nr_xfers--;
	s->st.transfers--;
	if (w->staged) {
		c->nr_staged--;
		s->st.staged--;
		w->staged = 0;
	}
	if (w->kind == OWN_STORE) {
		/* Out of the index: the keys are free for other stores. A
		 * staged slot's placeholder was never in it, and another
		 * object may sit under the key only if this one is not. */
		for (uint32_t i = 0; i < w->nr; i++) {
			uint32_t x = w->objs[i];
			struct kvr_key k = {s->obj[x].lo, s->obj[x].hi};

			if (kvr_index_find(&s->index, s->obj[x].ns, &k) == x)
				(void)kvr_index_remove(&s->index, s->obj[x].ns,
						       &k);
		}
	}
	w->qkind = w->kind;
	w->kind = OWN_QUAR;
	c->nr_quar++;
	c->quar_slots += w->nr;
	c->quar_bytes += w->bytes;
	s->st.quar_xfers++;
	s->st.quar_slots += w->nr;
	s->st.quar_bytes += w->bytes;
	s->st.quar_reclaimed++;
}

uint64_t kvr__store_quar_free(struct kvr_store *s, uint32_t o,
			      enum quar_why why, uint64_t *bytes)
{
	struct owner *w = &s->own[o];
	struct chan *c = &s->chan[w->ch];
	uint64_t n = w->nr, b = w->bytes;

	c->quar_slots -= n;
	c->quar_bytes -= b;
	s->st.quar_slots -= n;
	s->st.quar_bytes -= b;
	s->st.quar_released[why]++;
	if (w->qkind == OWN_STORE) {
		/* Never published and no longer indexed: the slot goes
		 * back to the allocator by offset, never by key (the key
		 * may belong to another object by now). */
		for (uint32_t i = 0; i < w->nr; i++) {
			struct obj *x = &s->obj[w->objs[i]];

			(void)kvr_alloc_put(&s->alloc, obj_off(s, x), x->len);
			obj_give(s, w->objs[i]);
		}
		s->st.reserved_objects -= n;
		s->st.reserved_bytes -= b;
		c->reserved_objects -= n;
		c->reserved_bytes -= b;
		kvr__store_ua(s, w->ch)->reserved_bytes -= b;
	} else {
		kvr__store_owner_unpin_all(s, o);
	}
	kvr__store_owner_free(s, o);
	if (bytes)
		*bytes = b;
	return n;
}

/* The quarantine owner @xfer of @ch, or NIL. */
static uint32_t quar_find(const struct kvr_store *s, uint32_t ch, uint64_t xfer)
{
	uint32_t o = owner_find(s, xfer, OWN_QUAR);

	return o != NIL && s->own[o].ch == ch ? o : NIL;
}

int kvr__store_quar_answer(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   uint32_t kind, int rc)
{
	uint32_t o = quar_find(s, ch, xfer);

	if (o == NIL || s->own[o].qkind != kind)
		return rc;
	kvr__store_quar_free(s, o, QUAR_ANSWERED, NULL);
	return KVR_ERR_EXPIRED;
}

int kvr_store_settle(struct kvr_store *s, uint32_t ch, uint64_t xfer)
{
	uint32_t o;

	if (!kvr__store_chan_ok(s, ch))
		return -EINVAL;
	o = quar_find(s, ch, xfer);
	if (o == NIL)
		return 0;
	kvr__store_quar_free(s, o, QUAR_ANSWERED, NULL);
	return 1;
}
