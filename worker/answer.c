/* SPDX-License-Identifier: MIT */
/*
 * answer.c - libkvring's handling of kvringd's answers: validation
 * (kvr_resp_parse on a private copy, then the shape rules for the request
 * it answers), matching by req_id (an answer nobody asked for breaks the
 * client with -EPROTO), filling the caller's xfer (the slots' bytes come
 * from the transport: the pool, or private buffers with the payload read
 * from the socket), completing the request (sync: in its entry; async: a
 * completion), and owing an undo for what a request abandoned by a
 * timed-out sync call created on the server (a reservation, a pin, a
 * lease), so nothing leaks and no caller memory is touched after its call
 * returned. Both transports call kvr__answer with a private copy of the
 * record; it never sends (an undo is queued with kvr__pend_owe()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/hist.h>

#include "client.h"

/* ---- answers ---- */

/* The round trip of a timed request, into our channel block: one clock
 * read, on sampled answers only (kvr_hist_add is a few plain stores; we
 * are its only writer, under the client's mutex). */
static void record_rtt(struct kvr_client *c, const struct kvr__pend *p,
		       uint32_t op)
{
	uint64_t now = kvr_clock_now_ns();
	int k = kvr_hist_op_slot(op);

	if (k >= 0 && now > p->sent_ns)
		kvr_hist_add(&c->obs->worker_rtt[k], now - p->sent_ns,
			     c->rtt_every);
}

/* Build the caller's slot array from a validated answer: status, offset
 * and length; where each slot's bytes live is the transport's to say. */
static int fill_xfer(struct kvr_xfer *x, uint32_t op,
		     const struct kvr_resp_hdr *h,
		     const struct kvr_slot_desc *sd)
{
	x->op = op;
	x->id = h->handle;
	x->nslots = h->count;
	x->slots = calloc(h->count ? h->count : 1, sizeof(*x->slots));
	if (!x->slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < h->count; i++) {
		x->slots[i].status = sd[i].status;
		x->slots[i].off = sd[i].off;
		x->slots[i].len = sd[i].status == KVR_SLOT_OK ? sd[i].len : 0;
	}
	return 0;
}

/* The shape rules an answer must meet for the request it answers. */
static int check_shape(const struct kvr__pend *p, const struct kvr_resp_hdr *h,
		       const struct kvr_slot_desc *sd, bool sums,
		       const char **why)
{
	bool any_ok = false;

	if (h->status > 0) {
		*why = "positive status";
		return -EBADMSG;
	}
	if (h->status < 0)
		return 0; /* slots, if any, are ignored */
	for (uint32_t i = 0; i < h->count; i++)
		any_ok |= sd[i].status == KVR_SLOT_OK;
	switch (p->op) {
	case KVR_OP_LOOKUP:
		if ((h->value & KVR_LOOKUP_HITS_MASK) > p->nkeys || h->count) {
			*why = "lookup hits exceed the keys asked";
			return -EBADMSG;
		}
		if ((h->value & ~KVR_LOOKUP_HITS_MASK) &&
		    (!p->l2 || h->value != ((h->value & KVR_LOOKUP_HITS_MASK) |
					    KVR_LOOKUP_L2_PENDING))) {
			*why = "lookup answer flags not asked for";
			return -EBADMSG;
		}
		return 0;
	case KVR_OP_PREPARE_STORE:
		for (uint32_t i = 0; i < h->count; i++)
			if (sd[i].status == KVR_SLOT_CORRUPT) {
				*why = "store slot answered corrupt";
				return -EBADMSG;
			}
		if (h->count != p->nkeys || (any_ok && !h->handle)) {
			*why = "prepare_store slot count or transfer id";
			return -EBADMSG;
		}
		return 0;
	case KVR_OP_PREPARE_RETRIEVE:
		for (uint32_t i = 0; i < h->count; i++)
			if (sd[i].status != KVR_SLOT_OK) {
				*why = "retrieve slot not OK";
				return -EBADMSG;
			}
		if (h->count > p->nkeys || (h->count && !h->handle)) {
			*why = "retrieve slot count or transfer id";
			return -EBADMSG;
		}
		if (h->count && sums != p->sums) {
			*why = sums ? "retrieve answer carries checksums not "
				      "asked for"
				    : "retrieve answer lacks the checksums "
				      "asked for";
			return -EBADMSG;
		}
		return 0;
	case KVR_OP_COMMIT_STORE:
		/* Store-ahead (stage.c): at most one staged slot, asked for,
		 * and a bind's outcome is one of rule 1's. */
		if (h->count > ((p->bind || p->stage_ask) ? 1u : 0u) ||
		    (h->count && (!any_ok || !h->handle))) {
			*why = "unexpected slots";
			return -EBADMSG;
		}
		if ((h->value & KVR_COMMIT_OUTCOME_MASK) != KVR_SLOT_OK &&
		    (!p->bind ||
		     ((h->value & KVR_COMMIT_OUTCOME_MASK) != KVR_SLOT_EXISTS &&
		      (h->value & KVR_COMMIT_OUTCOME_MASK) != KVR_SLOT_BUSY))) {
			*why = "commit outcome";
			return -EBADMSG;
		}
		return 0;
	default:
		if (h->count) {
			*why = "unexpected slots";
			return -EBADMSG;
		}
		return 0;
	}
}

int kvr__answer(struct kvr_client *c, uint32_t type, const void *rec,
		size_t len)
{
	const struct kvr_slot_desc *sd = NULL;
	const uint64_t *sums = NULL;
	struct kvr_resp_hdr h;
	struct kvr__pend *p;
	struct kvr_completion e;
	const char *why = "";
	uint32_t op = type & ~KVR_RESP_BIT;
	int rc, st;

	/* Every slot inside the pool, the length matching the count: after
	 * this, sd[] may be used (it lives in our private copy). */
	rc = kvr_resp_parse(type, rec, len, c->info.pool_bytes, &h, &sd);
	if (rc < 0)
		return kvr__client_break(
		    c, -EBADMSG,
		    "bad answer from kvringd (type 0x%x, %zu "
		    "bytes): a slot outside the pool or a length "
		    "that does not match",
		    type, len);
	/* An answer must match a request we sent, as the same op. */
	p = kvr__pend_find(c, h.req_id);
	if (!p || p->op != op)
		return kvr__client_break(
		    c, -EPROTO,
		    "kvringd answered request id %llu (%s) that "
		    "this client %s",
		    (unsigned long long)h.req_id, kvr_op_name(op),
		    p ? "sent as another op" : "never sent");
	/* A retrieve asked with KVR_REQ_SUMS: the sums follow the slots. */
	if (op == KVR_OP_PREPARE_RETRIEVE && h.count &&
	    len == kvr_resp_sums_bytes(h.count))
		sums = (const uint64_t *)((const char *)rec +
					  kvr_resp_bytes(h.count));
	rc = check_shape(p, &h, sd, sums != NULL, &why);
	if (rc < 0)
		return kvr__client_break(c, rc,
					 "bad %s answer from kvringd: %s",
					 kvr_op_name(op), why);
	st = h.status;
	if (p->timed)
		record_rtt(c, p, op);
	if (op == KVR_OP_COMMIT_STORE || op == KVR_OP_PREPARE_STORE) {
		uint64_t extra = kvr__stage_answer(c, p, &h, sd);

		if (extra) /* a staged slot nobody will use */
			kvr__pend_owe(c, KVR_OP_PREPARE_STORE, extra);
	}

	/* Nobody wants the slots; a payload that follows them (the socket
	 * transport's retrieve) is read into the void. */
	if (p->state == KVR_PEND_ORPHAN || (p->internal)) {
		if (op == KVR_OP_PREPARE_RETRIEVE && st == 0) {
			rc = c->tp->slots(c, NULL, op, &h, sd);
			if (rc < 0)
				return rc;
		}
		p = kvr__pend_find(c, h.req_id);
		if (p) {
			bool orphan = p->state == KVR_PEND_ORPHAN;

			kvr__pend_free(c, p);
			if (orphan && st == 0)
				kvr__pend_owe(c, op, h.handle);
		}
		return 0;
	}

	if (st == 0 &&
	    (op == KVR_OP_PREPARE_STORE || op == KVR_OP_PREPARE_RETRIEVE)) {
		struct kvr_xfer *x = p->x;
		int sr;

		if (x)
			rc = fill_xfer(x, op, &h, sd);
		/* The transport gives the slots their bytes: the pool, or
		 * private buffers with a retrieve's payload read into them
		 * from the socket (into the void when there is no xfer or no
		 * memory: the stream must stay in step). */
		sr = c->tp->slots(c, rc == 0 ? x : NULL, op, &h, sd);
		if (c->broken)
			return c->broken; /* the payload read failed */
		if (rc == 0 && sr < 0 && x) {
			/* No memory for the buffers (the socket transport). */
			free(x->slots);
			x->slots = NULL;
			x->nslots = 0;
			x->id = 0;
			rc = sr;
		}
		/* Checksums (either transport; the socket's slots() left
		 * room for them in x->priv): kept beside the slots, and
		 * under KVR_CHECKSUM_VERIFY checked before the caller sees
		 * a byte. */
		if (rc == 0 && x && sums) {
			rc = kvr__xfer_sum_keep(x, sd, sums, h.count);
			if (rc == 0 && c->checksum == KVR_CHECKSUM_VERIFY)
				(void)kvr__xfer_sum_verify(x, NULL);
			if (rc < 0) {
				free(x->slots);
				x->slots = NULL;
				x->nslots = 0;
				x->id = 0;
			}
		}
		/* p is still ours: only a break (handled above) frees
		 * entries, and nothing here grows the table. */
		if (rc < 0) {
			/* No memory for the slots: undo on the server. */
			st = -ENOMEM;
			kvr__pend_owe(c, op, h.handle);
		}
	}
	if (op == KVR_OP_STATS && st == 0 && p->stats)
		memcpy(p->stats, (const char *)rec + sizeof(h),
		       sizeof(*p->stats));
	if (op == KVR_OP_COMMIT_STORE || op == KVR_OP_ABORT_STORE ||
	    op == KVR_OP_COMMIT_RETRIEVE)
		kvr_xfer_free(p->x);

	if (p->sync) {
		p->state = KVR_PEND_DONE;
		p->status = st;
		p->value = (long)h.value;
		p->handle = h.handle;
		return 0;
	}
	/* Async: the completion carries what the caller needs, and the
	 * entry is freed before the completion is queued (room reserved). */
	e.user = p->user;
	e.op = op;
	e.status = st;
	e.value =
	    op == KVR_OP_LOOKUP ? (long)(h.value & KVR_LOOKUP_HITS_MASK) : 0;
	e.flags = op == KVR_OP_LOOKUP && (h.value & KVR_LOOKUP_L2_PENDING)
		      ? KVR_COMPLETION_L2_PENDING
		      : 0;
	e.handle = h.handle;
	e.xfer = p->x;
	kvr__pend_free(c, p);
	kvr__pend_cq_push(c, &e);
	return 0;
}
