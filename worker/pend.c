/* SPDX-License-Identifier: MIT */
/*
 * pend.c - libkvring's bookkeeping of requests in flight and how a
 * request leaves: the pending table (open addressing by req_id, at most
 * half full, so an answer finds its request in O(1) and an unknown req_id is
 * detected), the FIFO of async completions (reserved ahead, so pushing one
 * while answers are processed can never fail), and kvr__submit(), which
 * writes a request record into the request ring (then rings the server's
 * doorbell only if it sleeps) or, under the copy transport, sends it as a
 * frame. Request ids are chosen here; the caller never sees them.
 * This file does not wait for answers (wait.c) or interpret them
 * (answer.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>

#include "client.h"

/* ---- pending table ---- */

struct kvr__pend *kvr__pend_find(struct kvr_client *c, uint64_t id)
{
	struct kvr__pend *p;

	if (!c->pend || id == 0)
		return NULL;
	p = &c->pend[id & c->pend_mask];
	return p->state != PEND_FREE && p->req_id == id ? p : NULL;
}

/* Keep the table at most half full so a free slot is always near. Entries
 * keep their req_id: ids distinct modulo cap stay distinct modulo 2*cap. */
static int pend_reserve(struct kvr_client *c)
{
	struct kvr__pend *n;
	uint32_t ncap;

	if (c->pend_count + 2 <= c->pend_cap / 2)
		return 0;
	ncap = c->pend_cap ? c->pend_cap * 2 : 64;
	n = calloc(ncap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->pend_cap; i++)
		if (c->pend[i].state != PEND_FREE)
			n[c->pend[i].req_id & (ncap - 1)] = c->pend[i];
	free(c->pend);
	c->pend = n;
	c->pend_cap = ncap;
	c->pend_mask = ncap - 1;
	return 0;
}

/* A free entry with a fresh req_id; the table has room (pend_reserve). */
static struct kvr__pend *pend_new(struct kvr_client *c)
{
	struct kvr__pend *p;
	uint64_t id;

	if (c->pend_count + 1 >= c->pend_cap && pend_reserve(c) < 0)
		return NULL;
	for (;;) {
		id = c->next_id++;
		if (id == 0)
			continue;
		p = &c->pend[id & c->pend_mask];
		if (p->state == PEND_FREE)
			break;
	}
	memset(p, 0, sizeof(*p));
	p->req_id = id;
	p->state = PEND_WAIT;
	c->pend_count++;
	return p;
}

void kvr__pend_free(struct kvr_client *c, struct kvr__pend *p)
{
	if (!p->sync && !p->internal)
		c->pend_async--;
	p->state = PEND_FREE;
	p->req_id = 0;
	c->pend_count--;
}

/* ---- completion queue ---- */

uint32_t kvr__cq_count(const struct kvr_client *c)
{
	return c->cq_tail - c->cq_head;
}

/* Make room for every async request in flight plus one, so that pushing a
 * completion while answers are processed can never fail. */
int kvr__cq_reserve(struct kvr_client *c)
{
	uint32_t need = kvr__cq_count(c) + c->pend_async + 1, ncap;
	struct kvr_completion *n;

	if (need <= c->cq_cap)
		return 0;
	ncap = c->cq_cap ? c->cq_cap : 16;
	while (ncap < need)
		ncap *= 2;
	n = malloc(ncap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (uint32_t i = 0; i < kvr__cq_count(c); i++)
		n[i] = c->cq[(c->cq_head + i) & (c->cq_cap - 1)];
	c->cq_tail = kvr__cq_count(c);
	c->cq_head = 0;
	free(c->cq);
	c->cq = n;
	c->cq_cap = ncap;
	return 0;
}

void kvr__cq_push(struct kvr_client *c, const struct kvr_completion *e)
{
	c->cq[c->cq_tail & (c->cq_cap - 1)] = *e;
	c->cq_tail++;
}

/* ---- xfers ---- */

void kvr_xfer_free(struct kvr_xfer *x)
{
	struct kvr__copybuf *cb;

	if (!x)
		return;
	cb = x->priv;
	if (cb) {
		free(cb->arena);
		free(cb);
	}
	free(x->slots);
	x->slots = NULL;
	x->priv = NULL;
	x->nslots = 0;
	x->id = 0;
}

void kvr__xfer_init(struct kvr_xfer *x, uint32_t op)
{
	memset(x, 0, sizeof(*x));
	x->op = op;
}

/* ---- submit ---- */

/* Wait (sync only) for the server to free room in the request ring. There
 * is no doorbell for "room": poll the ring with short naps, process
 * answers meanwhile (the server may wait for room in ours) and keep the
 * liveness checks running. */
static int wait_room(struct kvr_client *c, uint64_t deadline,
		     uint64_t *last_alive)
{
	uint64_t now;
	int rc;

	rc = kvr__drain(c);
	if (rc < 0)
		return rc;
	now = kvr__now_ns();
	if (now >= deadline)
		return kvr__fail(c, -ETIMEDOUT,
				 "request ring full for %u ms: kvringd is not "
				 "consuming (stopped or overloaded?)",
				 c->timeout_ms);
	if (*last_alive == 0)
		*last_alive = now; /* first wait of this submit */
	if (now - *last_alive > (uint64_t)KVR_SLICE_MS * 1000000ull) {
		*last_alive = now;
		rc = kvr__alive(c);
		if (rc < 0)
			return rc;
	}
	nanosleep(&(struct timespec){0, 50000}, NULL);
	return 0;
}

int kvr__submit(struct kvr_client *c, const struct sub *s, uint64_t deadline,
		uint64_t *id_out)
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
		kvr__undo_flush(c);
		if (c->broken)
			return c->broken;
	}
	if (s->n > c->info.max_keys)
		return kvr__fail(c, -E2BIG,
				 "%u keys in one request, the "
				 "server takes at most %u",
				 s->n, c->info.max_keys);
	if ((s->n && !s->keys) ||
	    (s->op == KVR_OP_PREPARE_STORE && s->n && !s->sizes))
		return kvr__fail(c, -EINVAL, "%s: keys/sizes missing",
				 kvr_op_name(s->op));
	if (pend_reserve(c) < 0 ||
	    (s->kind == SUB_ASYNC && kvr__cq_reserve(c) < 0))
		return kvr__fail(c, -ENOMEM, "out of memory");
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
				return kvr__fail(
				    c, -E2BIG,
				    "request of %zu bytes can't fit "
				    "the %u-byte request ring",
				    len, c->req.cap);
			if (rc != -EAGAIN)
				return kvr__break(c, -EPROTO,
						  "request ring damaged: %s",
						  kvr_strerror(rc));
			if (s->kind == SUB_INTERNAL)
				return -EAGAIN;
			if (s->kind == SUB_ASYNC && async_tried)
				return -EAGAIN; /* callers reap and retry */
			if (s->kind == SUB_ASYNC) {
				/* Answers we consume may be what the server
				 * waits for before it takes more requests. */
				async_tried = true;
				rc = kvr__drain(c);
			} else {
				rc = wait_room(c, deadline, &last_alive);
			}
			if (rc < 0)
				return rc;
		}
	}
	p = pend_new(c);
	if (!p) {
		/* Only reachable when internal requests filled the table
		 * during wait_room and it can't grow: give up the channel
		 * (a claimed record must not be left half-written). */
		return kvr__break(c, -ENOMEM, "out of memory");
	}
	id = p->req_id;
	p->op = s->op;
	p->nkeys =
	    s->op == KVR_OP_PREPARE_RETRIEVE && (s->flags & KVR_REQ_BY_LEASE)
		? c->info.max_keys
		: s->n;
	p->sync = s->kind == SUB_SYNC;
	p->internal = s->kind == SUB_INTERNAL;
	p->pin = (s->flags & KVR_REQ_PIN) != 0;
	p->l2 = (s->flags & KVR_REQ_L2) != 0;
	/* Round-trip sampling: one request in rtt_every pays a clock read
	 * here and one when its answer is matched (a CLOCK_MONOTONIC read
	 * costs 30-40 ns on our VMs, a tenth of a hot round trip, so not
	 * every request does). Internal undos are not the caller's round
	 * trips. */
	p->timed = false;
	if (c->obs && s->kind != SUB_INTERNAL && --c->rtt_left == 0) {
		c->rtt_left = c->rtt_every;
		p->timed = true;
		p->sent_ns = kvr__now_ns();
	}
	p->user = s->user;
	p->x = s->x;
	p->stats = s->stats;
	if (s->kind == SUB_ASYNC)
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
			return kvr__fail(c, -ENOMEM, "out of memory");
		}
		memcpy(buf, &h, sizeof(h));
		if (s->n)
			memcpy(buf + sizeof(h), s->keys,
			       (size_t)s->n * sizeof(*s->keys));
		if (s->op == KVR_OP_PREPARE_STORE && s->n)
			memcpy(buf + sizeof(h) +
				   (size_t)s->n * sizeof(*s->keys),
			       s->sizes, (size_t)s->n * sizeof(uint64_t));
		p->state = PEND_SENDING;
		rc = kvr__sock_send(c, s->op, buf, len,
				    s->op == KVR_OP_COMMIT_STORE ? s->x : NULL);
		free(buf);
		if (rc < 0)
			return rc; /* broken: the entry was dropped silently */
		/* The answer may already have been handled during the send. */
		p = kvr__pend_find(c, id);
		if (p && p->state == PEND_SENDING)
			p->state = PEND_WAIT;
	}
	if (id_out)
		*id_out = id;
	return 0;
}
