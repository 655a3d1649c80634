/* SPDX-License-Identifier: MIT */
/*
 * submit.c - how a request leaves libkvring, under either transport:
 * kvr__submit() checks it against the client (broken, key count, table
 * room), claims room for its record from the transport, waiting for room
 * as the request's kind allows, takes a pending entry with a fresh req_id
 * (the caller never sees ids), encodes the record into the room and
 * commits it (or, under kvr_submit_hold(), leaves it for one commit of the
 * whole batch). Also the undos owed for what nobody will use (an
 * abandoned call's answer, a staged slot given back): queued by
 * kvr__pend_owe() (pend.c), sent first, at the start of the next submit.
 *
 * This file does not keep the pending table (pend.c), move bytes (the
 * transports) or interpret answers (answer.c, reached through wait.c).
 */
#include <errno.h>
#include <time.h>
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

/* Write @s's request record, kvr_req_bytes() long, at @dst (kvr_req_encode,
 * the inverse of the server's parser). Return 0, or -EINVAL/-EMSGSIZE when
 * the encoder refuses it: never for what kvr__submit() let through, so a
 * libkvring bug. */
static int encode(const struct kvr__submit_req *s, uint64_t req_id, void *dst,
		  size_t cap)
{
	struct kvr_req_view v = {
	    .op = s->op,
	    .hdr = {.req_id = req_id,
		    .handle = s->handle,
		    .count = s->n,
		    .flags = s->flags},
	    .keys = s->keys,
	    .sizes = s->op == KVR_OP_PREPARE_STORE ? s->sizes : NULL,
	    .words = s->words, /* a commit's sums or offsets (xfer_sum.c) */
	};
	int rc = kvr_req_encode(&v, dst, cap);

	return rc < 0 ? rc : 0;
}

/* Wait (sync only) for the server to free room in the request ring. There
 * is no doorbell for "room": poll the ring with short naps, process
 * answers meanwhile (the server may wait for room in ours) and keep the
 * liveness checks running. */
static int wait_room(struct kvr_client *c, uint64_t deadline,
		     uint64_t *last_alive)
{
	uint64_t now;
	int rc;

	rc = kvr__wait_drain(c);
	if (rc < 0)
		return rc;
	now = kvr_clock_now_ns();
	if (now >= deadline)
		return kvr__client_fail(c, -ETIMEDOUT,
					"request ring full for %u ms: kvringd "
					"is not consuming (stopped or "
					"overloaded?)",
					c->timeout_ms);
	if (*last_alive == 0)
		*last_alive = now; /* first wait of this submit */
	if (now - *last_alive > (uint64_t)KVR_SLICE_MS * 1000000ull) {
		*last_alive = now;
		rc = kvr__client_alive(c);
		if (rc < 0)
			return rc;
	}
	nanosleep(&(struct timespec){0, 50000}, NULL);
	return 0;
}

/*
 * Claim room for a record of @len bytes, waiting for room as @s's kind
 * allows: a sync request until @deadline, an async one through one drain
 * of answers, an internal one (an undo) not at all.
 * Return 0 and *dst, -EAGAIN (no room; async or internal), or -errno.
 */
static int claim(struct kvr_client *c, const struct kvr__submit_req *s,
		 size_t len, uint64_t deadline, void **dst)
{
	/* Set by the first wait for room: no clock read (a vDSO call, tens
	 * of ns on a VM) before the request is published. */
	uint64_t last_alive = 0;
	bool async_tried = false;
	int rc;

	for (;;) {
		rc = c->tp->claim(c, s->op, len, dst);
		if (rc != -EAGAIN)
			return rc;
		if (s->kind == KVR_SUBMIT_INTERNAL)
			return -EAGAIN;
		if (s->kind == KVR_SUBMIT_ASYNC && async_tried)
			return -EAGAIN; /* callers reap and retry */
		if (s->kind == KVR_SUBMIT_ASYNC) {
			/* Answers we consume may be what the server waits
			 * for before it takes more requests. */
			async_tried = true;
			rc = kvr__wait_drain(c);
		} else {
			rc = wait_room(c, deadline, &last_alive);
		}
		if (rc < 0)
			return rc;
	}
}

int kvr__submit(struct kvr_client *c, const struct kvr__submit_req *s,
		uint64_t deadline, uint64_t *id_out)
{
	struct kvr__pend *p;
	void *dst = NULL;
	size_t len;
	int rc;

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
	/* Claim first, then take a req_id: an answer processed while we
	 * wait for room can't see a half-made entry. */
	len = kvr_req_bytes(s->op, s->n);
	rc = claim(c, s, len, deadline, &dst);
	if (rc < 0)
		return rc;
	p = kvr__pend_open(c, s);
	if (!p) {
		/* Only reachable when internal requests filled the table
		 * during wait_room and it can't grow: give up the channel
		 * (a claimed record must not be left half-written). */
		return kvr__client_break(c, -ENOMEM, "out of memory");
	}
	rc = encode(s, p->req_id, dst, len);
	if (rc < 0) {
		/* The claimed room can't be taken back or left garbage:
		 * give up the channel. Unreachable unless libkvring is
		 * wrong. */
		kvr__pend_free(c, p);
		return kvr__client_break(c, -EINVAL,
					 "%s: libkvring built a request its "
					 "encoder refuses (%s); a libkvring "
					 "bug: please report it",
					 kvr_op_name(s->op), kvr_strerror(rc));
	}
	if (id_out)
		*id_out = p->req_id;
	/* Held (kvr_submit_hold): written, published later with the others
	 * by one commit (kvr__wait_publish). The server cannot see it
	 * before: under the ring its header word stays zero (R3). */
	if (c->hold && s->kind == KVR_SUBMIT_ASYNC && c->tp->batches) {
		c->held++;
		return 0;
	}
	/* Anything else goes now, and with it what was held. The entry is
	 * SENDING meanwhile: a break in the middle of a socket send drops
	 * it silently, since the caller gets the error from here. No answer
	 * is handled during a commit, so p stays valid. */
	c->held = 0;
	p->state = KVR_PEND_SENDING;
	rc = c->tp->commit(c, s->op == KVR_OP_COMMIT_STORE ? s->x : NULL);
	if (rc < 0)
		return rc;
	p->state = KVR_PEND_WAIT;
	return 0;
}
