/* SPDX-License-Identifier: MIT */
/*
 * submit.c - how a request leaves libkvring, the part both transports
 * share: kvr__submit() checks it against the client (broken, key count,
 * table room) and hands it to the transport's send, which takes a pending
 * entry with a fresh req_id from kvr__pend_open() (the caller never sees
 * ids) and writes the record's bytes with kvr__submit_encode(), in the
 * ring or in a frame. Also the undos owed for what nobody will use (an
 * abandoned call's answer, a staged slot given back): queued by
 * kvr__pend_owe() (pend.c), sent first, at the start of the next submit.
 *
 * This file does not keep the pending table (pend.c), wait for room or
 * answers (tport_*.c, wait.c) or interpret answers (answer.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/error.h>

#include "client.h"

/*
 * Send the undos (abort_store, commit_retrieve, release) owed for answers
 * to abandoned calls, while the request ring takes them; the rest stay
 * queued for the next submit. Never re-entered: an undo's own submit does
 * not flush.
 */
static void undo_flush(struct kvr_client *c)
{
	uint32_t done = 0;

	if (c->undo_flushing)
		return;
	c->undo_flushing = true;
	while (done < c->undo_n && !c->broken) {
		struct kvr__submit_req s = {.kind = KVR_SUBMIT_INTERNAL,
					    .op = c->undo[done].op,
					    .handle = c->undo[done].handle};

		/* -EAGAIN: the ring is full, keep the rest for next time.
		 * Any other error broke the client, which frees all. */
		if (kvr__submit(c, &s, kvr_clock_now_ns(), NULL) == -EAGAIN)
			break;
		done++;
	}
	memmove(c->undo, c->undo + done, (c->undo_n - done) * sizeof(*c->undo));
	c->undo_n -= done;
	c->undo_flushing = false;
}

int kvr__submit_encode(const struct kvr__submit_req *s, uint64_t req_id,
		       void *dst, size_t cap)
{
	struct kvr_req_view v = {
	    .op = s->op,
	    .hdr = {.req_id = req_id,
		    .handle = s->handle,
		    .count = s->n,
		    .flags = s->flags},
	    .keys = s->keys,
	    .sizes = s->op == KVR_OP_PREPARE_STORE ? s->sizes : NULL,
	    .words = s->words, /* a commit's sums or offsets (sum.c) */
	};
	int rc = kvr_req_encode(&v, dst, cap);

	return rc < 0 ? rc : 0;
}

int kvr__submit(struct kvr_client *c, const struct kvr__submit_req *s,
		uint64_t deadline, uint64_t *id_out)
{
	if (c->broken)
		return c->broken;
	/* Owed undos first, so they are not starved by new work. */
	if (c->undo_n && !c->undo_flushing) {
		undo_flush(c);
		if (c->broken)
			return c->broken;
	}
	if (s->n > c->info.max_keys)
		return kvr__client_fail(c, -E2BIG,
					"%u keys in one request, the "
					"server takes at most %u",
					s->n, c->info.max_keys);
	if ((s->n && !s->keys && !s->words) ||
	    (s->op == KVR_OP_PREPARE_STORE && s->n && !s->sizes))
		return kvr__client_fail(c, -EINVAL, "%s: keys/sizes missing",
					kvr_op_name(s->op));
	if (kvr__pend_reserve(c) < 0 ||
	    (s->kind == KVR_SUBMIT_ASYNC && kvr__pend_cq_reserve(c) < 0))
		return kvr__client_fail(c, -ENOMEM, "out of memory");
	/* The ring claims room (draining answers when it is full) or the
	 * socket sends a frame: chosen once, at connect. */
	return c->tp->send(c, s, deadline, id_out);
}
