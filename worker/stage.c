/* SPDX-License-Identifier: MIT */
/*
 * stage.c - store-ahead, libkvring's side ($KVRING_STORE_AHEAD=1, ring
 * transport only; docs/protocol.md "Store-ahead"). kvringd hands this
 * channel one staged slot ahead of time, in the answer of a commit. A
 * one-key kvr_prepare_store() whose size is the staged slot's is then
 * answered here, without a round trip, and its kvr_commit_store() sends
 * one record, "bind the staged slot to key K, size L (, sum) and commit
 * it", whose answer carries the next staged slot. The store still returns
 * only after kvringd published it.
 *
 * What a staged prepare cannot know is whether the key is stored already:
 * the caller copies, and the bind answers "exists" (rule 1: success,
 * nothing stored, the slot stays staged). So that duplicate-heavy callers
 * do not pay a copy per store, an "exists" answer turns store-ahead off
 * for the next prepares, which ask kvringd as usual (and learn "exists"
 * before copying), until one of them finds a new key.
 *
 * A staged slot is only used while at least half of its lifetime (the
 * transfer deadline, kvringd --xfer-ms) is left, so a store that takes
 * less than that cannot find it reclaimed. This file owns c->stage; it
 * sends nothing itself (ops.c and async.c send the commits it shapes,
 * and the undos of the slots it gives back are owed by its callers).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/error.h>

#include "client.h"

/* The coarse monotonic clock: a few ns, and precise to a few ms, which
 * is all a lifetime in ms needs. */
static uint64_t coarse_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int kvr__stage_mode(char *errbuf, size_t errlen)
{
	const char *e = getenv("KVRING_STORE_AHEAD");

	if (!e || !*e || strcmp(e, "0") == 0)
		return 0;
	if (strcmp(e, "1") == 0)
		return 1;
	snprintf(errbuf, errlen,
		 "$KVRING_STORE_AHEAD=%s: expected 0 or 1 (store-ahead off or "
		 "on, docs/config.md)",
		 e);
	return -EINVAL;
}

void kvr__stage_init(struct kvr_client *c, bool on)
{
	memset(&c->stage, 0, sizeof(c->stage));
	c->stage.on = on;
}

int kvr__stage_prepare(struct kvr_client *c, const struct kvr_key *keys,
		       const uint64_t *sizes, uint32_t n, struct kvr_xfer *x,
		       uint64_t *give_back)
{
	struct kvr__stage *g = &c->stage;

	*give_back = 0;
	if (!g->on || g->skip || !g->id || g->taken || n != 1 || !keys ||
	    !sizes || sizes[0] != g->len || c->broken)
		return 0;
	if (coarse_now_ns() >= g->use_before_ns) {
		/* Too old to be sure it outlives this store: give it back,
		 * and ask kvringd as usual. */
		*give_back = g->id;
		g->id = 0;
		return 0;
	}
	x->slots = calloc(1, sizeof(*x->slots));
	if (!x->slots)
		return 0; /* the round trip will say -ENOMEM if it must */
	x->op = KVR_OP_PREPARE_STORE;
	x->id = g->id;
	x->nslots = 1;
	x->slots[0].status = KVR_SLOT_OK;
	x->slots[0].off = g->off;
	x->slots[0].len = g->len;
	x->slots[0].ptr = (char *)c->pool.base + g->off;
	g->key = keys[0];
	g->taken = true;
	g->hits++;
	return 1;
}

/* Whether @x is the transfer a staged prepare answered. */
static bool is_staged(const struct kvr_client *c, const struct kvr_xfer *x)
{
	return c->stage.taken && x->id && x->id == c->stage.id;
}

void kvr__stage_commit(struct kvr_client *c, struct kvr_xfer *x,
		       struct kvr__submit_req *s)
{
	struct kvr__stage *g = &c->stage;

	if (!g->on)
		return;
	if (is_staged(c, x)) {
		/* kvr__sum_commit() put the one sum first, if summing. */
		g->words[0] = g->key.lo;
		g->words[1] = g->key.hi;
		g->words[2] = x->slots[0].len;
		g->words[KVR_BIND_WORDS] =
		    (s->flags & KVR_REQ_SUMS) && s->words ? s->words[0] : 0;
		s->words = g->words;
		s->n = KVR_BIND_WORDS + ((s->flags & KVR_REQ_SUMS) ? 1u : 0u);
		s->flags |= KVR_REQ_BIND;
		/* The answer brings a next slot, or this one back. */
		g->id = 0;
		g->taken = false;
	}
	if (!g->id && !g->asked && x->nslots == 1) {
		s->flags |= KVR_REQ_STAGE;
		g->asked = true;
	}
}

bool kvr__stage_abort(struct kvr_client *c, struct kvr_xfer *x)
{
	if (!is_staged(c, x))
		return false;
	/* Nothing to tell kvringd: the slot is still staged, and whatever
	 * the caller wrote into it is never published. */
	c->stage.taken = false;
	kvr_xfer_free(x);
	return true;
}

uint64_t kvr__stage_answer(struct kvr_client *c, const struct kvr__pend *p,
			   const struct kvr_resp_hdr *h,
			   const struct kvr_slot_desc *sd)
{
	struct kvr__stage *g = &c->stage;
	uint64_t ms;

	if (p->op == KVR_OP_PREPARE_STORE) {
		/* A prepare asked kvringd and found a new key: duplicates
		 * are over, stage again. */
		if (h->status == 0 && h->count == 1 &&
		    sd[0].status == KVR_SLOT_OK)
			g->skip = false;
		return 0;
	}
	if (p->op != KVR_OP_COMMIT_STORE || !(p->bind || p->stage_ask))
		return 0;
	if (p->stage_ask)
		g->asked = false;
	if (h->status == 0 && p->bind &&
	    (h->value & KVR_COMMIT_OUTCOME_MASK) != KVR_SLOT_OK) {
		g->skip = true; /* the copy was wasted: ask first next time */
		g->wasted++;
	}
	if (h->status != 0 || h->count != 1)
		return 0;
	if (g->id || g->taken || p->state == KVR_PEND_ORPHAN)
		return h->handle; /* one at a time: give the extra back */
	ms = h->value >> KVR_COMMIT_STAGE_MS_SHIFT;
	g->id = h->handle;
	g->off = sd[0].off;
	g->len = sd[0].len;
	g->use_before_ns = coarse_now_ns() + ms * 1000000ull / 2;
	return 0;
}
