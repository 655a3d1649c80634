/* SPDX-License-Identifier: MIT */
/*
 * store_stage.c - store-ahead in kvringd's storage engine: a staged slot
 * is a reservation made before the worker knows which key it will hold,
 * so that its next one-key store needs one round trip (commit) instead of
 * two (prepare, commit). Design and trade-offs: docs/storage.md,
 * "Store-ahead"; the wire side: docs/protocol.md.
 *
 * A staged slot is an ordinary store transfer (OWN_STORE) with one
 * RESERVED object, reserved under a placeholder key and then taken out of
 * the index (nothing can find it), and its owner marked staged. Being a store
 * transfer, it is counted in the channel's and the uid's reserve quotas, has
 * the transfer deadline (expiry frees it, never publishes it), and is freed by
 * abort and by channel close exactly as any reservation. commit_store refuses a
 * staged transfer: the only way to publish its bytes is kvr_store_bind(), which
 * gives the object the worker's key, after which the transfer is a plain
 * one-key store the caller commits.
 *
 * What this file does not do: decide when to stage (kvringd's dispatch,
 * at the worker's request), publish (store.c's commit), or touch a byte
 * of the pool.
 */
#include <errno.h>

#include "store_int.h"

/* The high word of every placeholder key ("kvrstage"); the low word is a
 * sequence number. A real key equal to one is as likely as any XXH3-128
 * collision, and even then only makes staging try the next number. */
#define STAGE_KEY_HI 0x6576617473727668ull

int kvr_store_stage(struct kvr_store *s, uint32_t ch, uint32_t ns, uint64_t len,
		    uint64_t now_ns, struct kvr_slot_desc *out,
		    uint64_t *xfer_out)
{
	if (s)
		OWNER_ONLY(s);
	struct kvr_slot_desc d = {0, 0, KVR_SLOT_INVALID, 0};
	struct kvr_key ph;
	struct obj *b;
	uint64_t id = 0;
	uint32_t o;
	int rc = 0;

	if (!s || !out || !xfer_out || ch >= s->cfg.max_channels)
		return -EINVAL;
	if (s->chan[ch].nr_staged >= KVR_STORE_MAX_STAGED)
		return -EBUSY;
	/* Two tries: a placeholder that collides with a stored or reserved
	 * key answers EXISTS or BUSY and reserves nothing. */
	for (int tries = 0; tries < 2; tries++) {
		struct kvr_key k = {++s->stage_seq, STAGE_KEY_HI};

		rc = kvr_store_prepare_store(s, ch, ns, &k, &len, 1, now_ns, &d,
					     &id);
		if (rc < 0)
			return rc;
		if (d.status != KVR_SLOT_EXISTS && d.status != KVR_SLOT_BUSY)
			break;
	}
	*out = d;
	if (rc == 0)
		return 0; /* no room, quota, invalid size: nothing staged */
	o = owner_find(s, id, OWN_STORE);
	b = &s->obj[s->own[o].objs[0]];
	/* Out of the index until its bind: nothing may find it, and the
	 * bind then only inserts (one cold bucket less on the commit's
	 * round trip). obj_destroy() ignores the missing entry. */
	ph = (struct kvr_key){b->lo, b->hi};
	(void)kvr_index_remove(&s->index, ns, &ph);
	s->own[o].staged = 1;
	s->chan[ch].nr_staged++;
	s->chan[ch].stages++;
	s->st.stages++;
	s->st.staged++;
	*xfer_out = id;
	return 1;
}

/* The open store transfer @xfer of @ch: one id lookup on the commit's
 * path; only a miss asks kvr_store_check_store() which error it is. */
static int store_owner(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       uint32_t *o_out)
{
	uint32_t o =
	    ch < s->cfg.max_channels ? owner_find(s, xfer, OWN_STORE) : NIL;

	if (o == NIL || s->own[o].ch != ch) {
		int rc = kvr_store_check_store(s, ch, xfer);

		return rc < 0 ? rc : -ENOENT;
	}
	*o_out = o;
	return 0;
}

/* The staged owner @xfer of @ch, or a negative errno (as commit_store). */
static int staged_owner(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
			uint32_t *o_out)
{
	uint32_t o;
	int rc = store_owner(s, ch, xfer, &o);

	if (rc < 0)
		return rc;
	if (!s->own[o].staged || s->own[o].nr != 1)
		return -EINVAL;
	*o_out = o;
	return 0;
}

int kvr_store_stage_desc(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
			 struct kvr_slot_desc *out, uint64_t *deadline_out)
{
	if (s)
		OWNER_ONLY(s);
	const struct obj *b;
	uint32_t o;
	int rc;

	if (!s || !out || !deadline_out)
		return -EINVAL;
	rc = staged_owner(s, ch, xfer, &o);
	if (rc < 0)
		return rc;
	b = &s->obj[s->own[o].objs[0]];
	*out = (struct kvr_slot_desc){obj_off(s, b), b->len, KVR_SLOT_OK, 0};
	*deadline_out = s->own[o].deadline_ns;
	return 0;
}

/*
 * The key is the only change, and it comes after every check: the index
 * has room for one more entry first, so the insert cannot fail and a
 * failure leaves the staged slot as it was.
 */
int kvr_store_bind(struct kvr_store *s, uint32_t ch, uint64_t xfer,
		   const struct kvr_key *key, uint64_t len)
{
	if (s)
		OWNER_ONLY(s);
	struct kvr_key k;
	struct obj *b;
	uint32_t o, x;
	int rc;

	if (!s || !key)
		return -EINVAL;
	rc = staged_owner(s, ch, xfer, &o);
	if (rc < 0)
		return rc;
	k = *key; /* read once: it may come from shared memory */
	b = &s->obj[s->own[o].objs[0]];
	/* The slot was allocated for b->len: a store that rounds to another
	 * size would free the wrong extent later. */
	if (len == 0 || len > b->len ||
	    kvr_alloc_round(&s->alloc, len) !=
		kvr_alloc_round(&s->alloc, b->len))
		return -EINVAL;
	x = kvr_index_find(&s->index, b->ns, &k);
	if (x != KVR_INDEX_NONE) {
		/* Rule 1: stored already (or being stored by another
		 * transfer). The staged slot stays staged for the next. */
		if (s->obj[x].state == OBJ_COMMITTED) {
			touch(s, x);
			s->st.stores_skipped_existing++;
			s->st.binds_existing++;
			s->chan[ch].binds_existing++;
			return KVR_SLOT_EXISTS;
		}
		s->st.stores_busy++;
		return KVR_SLOT_BUSY;
	}
	rc = kvr_index_reserve(&s->index, 1);
	if (rc < 0)
		return rc;
	/* Cannot fail: room was reserved, and the key is absent. */
	(void)kvr_index_insert(&s->index, b->ns, &k, s->own[o].objs[0]);
	b->lo = k.lo;
	b->hi = k.hi;
	b->len = len & OBJ_LEN_MAX; /* <= b->len; same rounded bytes: the
				       owner's count holds */
	s->own[o].staged = 0;
	s->chan[ch].nr_staged--;
	s->chan[ch].binds++;
	s->st.binds++;
	s->st.staged--;
	return KVR_SLOT_OK;
}

uint64_t kvr_store_xfer_len(const struct kvr_store *s, uint32_t ch,
			    uint64_t xfer)
{
	if (s)
		OWNER_ONLY(s);
	uint32_t o;

	if (!s || store_owner(s, ch, xfer, &o) < 0)
		return 0;
	return s->own[o].nr ? s->obj[s->own[o].objs[0]].len : 0;
}
