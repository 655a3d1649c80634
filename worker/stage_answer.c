/* SPDX-License-Identifier: MIT */
/*
 * stage_answer.c - what kvringd's answers tell store-ahead (stage.c): a
 * commit's answer may carry the next staged slot for this channel, a
 * bind's answer says how the early bind went, and a prepare that found a
 * new key ends a run of duplicates. Called by answer.c for every
 * validated prepare_store and commit_store answer, orphans included; it
 * only updates c->stage and never sends: a staged slot nobody can use is
 * returned, for the caller to owe its abort.
 */
#include <time.h>

#include <kvring/clock.h>

#include "client.h"

uint64_t kvr__stage_answer(struct kvr_client *c, const struct kvr__pend *p,
			   const struct kvr_resp_hdr *h,
			   const struct kvr_slot_desc *sd)
{
	struct kvr__stage *g = &c->stage;
	uint64_t ms;

	if (p->op == KVR_OP_PREPARE_STORE) {
		/* A prepare asked kvringd and found a new key: duplicates
		 * are over, stage again. */
		if (!p->bind && h->status == 0 && h->count == 1 &&
		    sd[0].status == KVR_SLOT_OK)
			g->skip = false;
		return 0;
	}
	if (p->op != KVR_OP_COMMIT_STORE || !(p->bind || p->stage_ask))
		return 0;
	if (p->stage_ask)
		g->asked = false;
	if (h->status != 0 || h->count != 1)
		return 0;
	if (g->id || g->taken || p->state == KVR_PEND_ORPHAN)
		return h->handle; /* one at a time: give the extra back */
	ms = h->value >> KVR_COMMIT_STAGE_MS_SHIFT;
	g->id = h->handle;
	g->off = sd[0].off;
	g->len = sd[0].len;
	g->use_before_ns =
	    kvr_clock_ns(CLOCK_MONOTONIC_COARSE) + ms * 1000000ull / 2;
	return 0;
}
