/* SPDX-License-Identifier: MIT */
/*
 * submit.c - how a request leaves libkvring: kvr__submit() checks it
 * against the client (broken, key count, table room), takes a pending
 * entry with a fresh req_id (the caller never sees ids), and writes the
 * request record into the request ring (then rings the server's doorbell
 * only if it sleeps) or, under the copy transport, sends it as a frame.
 * When the ring is full it drains answers, because the server may be
 * waiting for room in ours. Also the undos owed for abandoned calls
 * (queued by answer.c): sent first, at the start of the next submit.
 *
 * This file does not keep the pending table (pend.c), wait for answers
 * (wait.c) or interpret them (answer.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/doorbell.h>
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
		if (kvr__submit(c, &s, kvr__now_ns(), NULL) == -EAGAIN)
			break;
		done++;
	}
	memmove(c->undo, c->undo + done, (c->undo_n - done) * sizeof(*c->undo));
	c->undo_n -= done;
	c->undo_flushing = false;
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
	now = kvr__now_ns();
	if (now >= deadline)
		return kvr__client_fail(
		    c, -ETIMEDOUT,
		    "request ring full for %u ms: kvringd is not "
		    "consuming (stopped or overloaded?)",
		    c->timeout_ms);
	if (*last_alive == 0)
		*last_alive = now; /* first wait of this submit */
	if (now - *last_alive > (uint64_t)KVR_SLICE_MS * 1000000ull) {
		*last_alive = now;
		rc = kvr__wait_alive(c);
		if (rc < 0)
			return rc;
	}
	nanosleep(&(struct timespec){0, 50000}, NULL);
	return 0;
}

int kvr__submit(struct kvr_client *c, const struct kvr__submit_req *s,
		uint64_t deadline, uint64_t *id_out)
{
	struct kvr_req_hdr h = {0};
	struct kvr__pend *p;
	size_t len;
	void *dst = NULL;
	/* Set by the first wait for room: no clock read (a vDSO call, tens
	 * of ns on a VM) before the request is published. */
	uint64_t last_alive = 0;
	bool async_tried = false;
	uint64_t id;
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
	if ((s->n && !s->keys) ||
	    (s->op == KVR_OP_PREPARE_STORE && s->n && !s->sizes))
		return kvr__client_fail(c, -EINVAL, "%s: keys/sizes missing",
					kvr_op_name(s->op));
	if (kvr__pend_reserve(c) < 0 ||
	    (s->kind == KVR_SUBMIT_ASYNC && kvr__pend_cq_reserve(c) < 0))
		return kvr__client_fail(c, -ENOMEM, "out of memory");
	len = kvr_req_bytes(s->op, s->n);

	if (!c->copy) {
		/* Claim first, then take a req_id: an answer processed while
		 * we wait for room can't see a half-made entry. */
		for (;;) {
			rc =
			    kvr_ring_claim(&c->req, s->op, (uint32_t)len, &dst);
			if (rc == 0)
				break;
			/* A padding record may have been claimed: publish it.
			 */
			kvr_ring_commit(&c->req);
			if (rc == -EMSGSIZE)
				return kvr__client_fail(
				    c, -E2BIG,
				    "request of %zu bytes can't fit "
				    "the %u-byte request ring",
				    len, c->req.cap);
			if (rc != -EAGAIN)
				return kvr__client_break(
				    c, -EPROTO, "request ring damaged: %s",
				    kvr_strerror(rc));
			if (s->kind == KVR_SUBMIT_INTERNAL)
				return -EAGAIN;
			if (s->kind == KVR_SUBMIT_ASYNC && async_tried)
				return -EAGAIN; /* callers reap and retry */
			if (s->kind == KVR_SUBMIT_ASYNC) {
				/* Answers we consume may be what the server
				 * waits for before it takes more requests. */
				async_tried = true;
				rc = kvr__wait_drain(c);
			} else {
				rc = wait_room(c, deadline, &last_alive);
			}
			if (rc < 0)
				return rc;
		}
	}
	p = kvr__pend_new(c);
	if (!p) {
		/* Only reachable when internal requests filled the table
		 * during wait_room and it can't grow: give up the channel
		 * (a claimed record must not be left half-written). */
		return kvr__client_break(c, -ENOMEM, "out of memory");
	}
	id = p->req_id;
	p->op = s->op;
	p->nkeys =
	    s->op == KVR_OP_PREPARE_RETRIEVE && (s->flags & KVR_REQ_BY_LEASE)
		? c->info.max_keys
		: s->n;
	p->sync = s->kind == KVR_SUBMIT_SYNC;
	p->internal = s->kind == KVR_SUBMIT_INTERNAL;
	p->pin = (s->flags & KVR_REQ_PIN) != 0;
	p->l2 = (s->flags & KVR_REQ_L2) != 0;
	/* Round-trip sampling: one request in rtt_every pays a clock read
	 * here and one when its answer is matched (a CLOCK_MONOTONIC read
	 * costs 30-40 ns on our VMs, a tenth of a hot round trip, so not
	 * every request does). Internal undos are not the caller's round
	 * trips. */
	p->timed = false;
	if (c->obs && s->kind != KVR_SUBMIT_INTERNAL && --c->rtt_left == 0) {
		c->rtt_left = c->rtt_every;
		p->timed = true;
		p->sent_ns = kvr__now_ns();
	}
	p->user = s->user;
	p->x = s->x;
	p->stats = s->stats;
	if (s->kind == KVR_SUBMIT_ASYNC)
		c->pend_async++;

	h.req_id = id;
	h.handle = s->handle;
	h.count = s->n;
	h.flags = s->flags;
	if (!c->copy) {
		char *d = dst;

		memcpy(d, &h, sizeof(h));
		if (s->n)
			memcpy(d + sizeof(h), s->keys,
			       (size_t)s->n * sizeof(*s->keys));
		if (s->op == KVR_OP_PREPARE_STORE && s->n)
			memcpy(d + sizeof(h) + (size_t)s->n * sizeof(*s->keys),
			       s->sizes, (size_t)s->n * sizeof(uint64_t));
		kvr_ring_commit(&c->req);
		/* Rings only if the server sleeps (F1 inside). A failed write
		 * means the server is gone; the wait's checks report it. */
		(void)kvr_bell_notify(&c->ch->req_bell, c->req_efd);
	} else {
		char *buf = malloc(len);

		if (!buf) {
			kvr__pend_free(c, p);
			return kvr__client_fail(c, -ENOMEM, "out of memory");
		}
		memcpy(buf, &h, sizeof(h));
		if (s->n)
			memcpy(buf + sizeof(h), s->keys,
			       (size_t)s->n * sizeof(*s->keys));
		if (s->op == KVR_OP_PREPARE_STORE && s->n)
			memcpy(buf + sizeof(h) +
				   (size_t)s->n * sizeof(*s->keys),
			       s->sizes, (size_t)s->n * sizeof(uint64_t));
		p->state = KVR_PEND_SENDING;
		rc = kvr__sock_send(c, s->op, buf, len,
				    s->op == KVR_OP_COMMIT_STORE ? s->x : NULL);
		free(buf);
		if (rc < 0)
			return rc; /* broken: the entry was dropped silently */
		/* The answer may already have been handled during the send. */
		p = kvr__pend_find(c, id);
		if (p && p->state == KVR_PEND_SENDING)
			p->state = KVR_PEND_WAIT;
	}
	if (id_out)
		*id_out = id;
	return 0;
}
