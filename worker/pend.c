/* SPDX-License-Identifier: MIT */
/*
 * pend.c - libkvring's bookkeeping of requests in flight: the pending
 * table (open addressing by req_id, at most half full, so an answer finds
 * its request in O(1) and an unknown req_id is detected), the FIFO of async
 * completions (reserved ahead, so pushing one while answers are processed can
 * never fail), the xfers' memory (and which store-ahead xfers callers
 * hold, for kvr_xfer_free()), and failing everything pending when the
 * client breaks. Request ids are chosen here; the caller never sees them. This
 * file calls no other file of worker/: it does not send (submit.c), wait for
 * answers (wait.c) or interpret them (answer.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	return p->state != KVR_PEND_FREE && p->req_id == id ? p : NULL;
}

/* Keep the table at most half full so a free slot is always near. Entries
 * keep their req_id: ids distinct modulo cap stay distinct modulo 2*cap. */
int kvr__pend_reserve(struct kvr_client *c)
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
		if (c->pend[i].state != KVR_PEND_FREE)
			n[c->pend[i].req_id & (ncap - 1)] = c->pend[i];
	free(c->pend);
	c->pend = n;
	c->pend_cap = ncap;
	c->pend_mask = ncap - 1;
	return 0;
}

/* A free entry with a fresh req_id; the table has room (kvr__pend_reserve). */
static struct kvr__pend *pend_new(struct kvr_client *c)
{
	struct kvr__pend *p;
	uint64_t id;

	if (c->pend_count + 1 >= c->pend_cap && kvr__pend_reserve(c) < 0)
		return NULL;
	/* Ids only grow (0 is skipped when they wrap): an entry whose id
	 * maps to a busy slot is simply passed over, which the table being
	 * at most half full keeps short. */
	for (;;) {
		id = c->next_id++;
		if (id == 0)
			continue;
		p = &c->pend[id & c->pend_mask];
		if (p->state == KVR_PEND_FREE)
			break;
	}
	memset(p, 0, sizeof(*p));
	p->req_id = id;
	p->state = KVR_PEND_WAIT;
	c->pend_count++;
	return p;
}

struct kvr__pend *kvr__pend_open(struct kvr_client *c,
				 const struct kvr__submit_req *s)
{
	struct kvr__pend *p = pend_new(c);

	if (!p)
		return NULL;
	p->op = s->op;
	/* What bounds the answer's slot count: a retrieve by lease may
	 * carry as many as the server allows. */
	p->nkeys =
	    s->op == KVR_OP_PREPARE_RETRIEVE && (s->flags & KVR_REQ_BY_LEASE)
		? c->info.max_keys
		: s->n;
	p->sync = s->kind == KVR_SUBMIT_SYNC;
	p->internal = s->kind == KVR_SUBMIT_INTERNAL;
	p->pin = (s->flags & KVR_REQ_PIN) != 0;
	p->l2 = (s->flags & KVR_REQ_L2) != 0;
	p->sums = (s->flags & KVR_REQ_SUMS) != 0;
	/* Store-ahead (stage.c): a commit whose answer may carry a slot. */
	p->bind = (s->flags & KVR_REQ_BIND) != 0;
	p->stage_ask =
	    s->op == KVR_OP_COMMIT_STORE && (s->flags & KVR_REQ_STAGE);
	/* Round-trip sampling: one request in rtt_every pays a clock read
	 * here and one when its answer is matched (a CLOCK_MONOTONIC read
	 * costs 30-40 ns on our VMs, a tenth of a hot round trip, so not
	 * every request does). Internal undos are not the caller's round
	 * trips. */
	p->timed = false;
	if (c->obs && s->kind != KVR_SUBMIT_INTERNAL && --c->rtt_left == 0) {
		c->rtt_left = c->rtt_every;
		p->timed = true;
		p->sent_ns = kvr_clock_now_ns();
	}
	p->user = s->user;
	p->x = s->x;
	p->stats = s->stats;
	if (s->kind == KVR_SUBMIT_ASYNC)
		c->pend_async++;
	return p;
}

/* The entry's slot is free again; its req_id is forgotten, so a late
 * answer to it breaks the client as one nobody asked for. */
void kvr__pend_free(struct kvr_client *c, struct kvr__pend *p)
{
	if (!p->sync && !p->internal)
		c->pend_async--;
	p->state = KVR_PEND_FREE;
	p->req_id = 0;
	c->pend_count--;
}

/* ---- completion queue ---- */

/* Free-running positions: the difference is the count, wrap included. */
uint32_t kvr__pend_cq_count(const struct kvr_client *c)
{
	return c->cq_tail - c->cq_head;
}

/* Make room for every async request in flight plus one, so that pushing a
 * completion while answers are processed can never fail. */
int kvr__pend_cq_reserve(struct kvr_client *c)
{
	uint32_t need = kvr__pend_cq_count(c) + c->pend_async + 1, ncap;
	struct kvr_completion *n;

	if (need <= c->cq_cap)
		return 0;
	ncap = c->cq_cap ? c->cq_cap : 16;
	while (ncap < need)
		ncap *= 2;
	n = malloc(ncap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	/* Unrolled into the new array from position 0, oldest first. */
	for (uint32_t i = 0; i < kvr__pend_cq_count(c); i++)
		n[i] = c->cq[(c->cq_head + i) & (c->cq_cap - 1)];
	c->cq_tail = kvr__pend_cq_count(c);
	c->cq_head = 0;
	free(c->cq);
	c->cq = n;
	c->cq_cap = ncap;
	return 0;
}

void kvr__pend_cq_push(struct kvr_client *c, const struct kvr_completion *e)
{
	c->cq[c->cq_tail & (c->cq_cap - 1)] = *e;
	c->cq_tail++;
}

/* ---- xfers ---- */

/* The staged xfers callers hold, by client (stage.c's top): so that
 * kvr_xfer_free(), which knows no client, can tell one it was dropped. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvr__stage *reg_head;
static _Atomic unsigned reg_count;

void kvr__pend_stage_add(struct kvr_client *c, const struct kvr_slot *slots)
{
	struct kvr__stage *g = &c->stage;

	pthread_mutex_lock(&reg_lock);
	g->reg_slots = slots;
	g->reg_next = reg_head;
	reg_head = g;
	atomic_fetch_add_explicit(&reg_count, 1, memory_order_relaxed);
	pthread_mutex_unlock(&reg_lock);
}

/* Under reg_lock. */
static void reg_unlink(struct kvr__stage *g)
{
	for (struct kvr__stage **pp = &reg_head; *pp; pp = &(*pp)->reg_next) {
		if (*pp == g) {
			*pp = g->reg_next;
			g->reg_next = NULL;
			g->reg_slots = NULL;
			atomic_fetch_sub_explicit(&reg_count, 1,
						  memory_order_relaxed);
			return;
		}
	}
}

void kvr__pend_stage_del(struct kvr_client *c)
{
	struct kvr__stage *g = &c->stage;

	pthread_mutex_lock(&reg_lock);
	reg_unlink(g);
	pthread_mutex_unlock(&reg_lock);
}

static void stage_xfer_freed(const struct kvr_xfer *x)
{
	if (!x->slots || x->nslots != 1 ||
	    !atomic_load_explicit(&reg_count, memory_order_relaxed))
		return;
	pthread_mutex_lock(&reg_lock);
	for (struct kvr__stage *g = reg_head; g; g = g->reg_next) {
		if (g->reg_slots == x->slots) {
			reg_unlink(g);
			atomic_store_explicit(&g->dropped, true,
					      memory_order_release);
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

void kvr__pend_stage_fini(struct kvr_client *c)
{
	/* A forked child's copy of the lock may have been held by another
	 * parent thread at fork(): only tried there (as kvr_close() does not
	 * take the client's lock). */
	if (getpid() != c->owner_pid) {
		if (pthread_mutex_trylock(&reg_lock) == 0) {
			reg_unlink(&c->stage);
			pthread_mutex_unlock(&reg_lock);
		}
		return;
	}
	kvr__pend_stage_del(c);
}

void kvr_xfer_free(struct kvr_xfer *x)
{
	if (!x)
		return;
	/* A staged xfer dropped without commit or abort (stage.c). */
	stage_xfer_freed(x);
	/* The socket transport's buffers (tport_sock.c), or under the ring
	 * transport a retrieve's checksums (xfer_sum.c): one block either way.
	 */
	free(x->priv);
	free(x->slots);
	x->slots = NULL;
	x->priv = NULL;
	x->nslots = 0;
	x->id = 0;
}

void kvr__pend_xfer_init(struct kvr_xfer *x, uint32_t op)
{
	memset(x, 0, sizeof(*x));
	x->op = op;
}

/* Fail every pending request with c->broken (kvr__client_break): sync
 * waiters find it in their entry, async requests become completions. */
void kvr__pend_fail_all(struct kvr_client *c)
{
	for (uint32_t i = 0; i < c->pend_cap; i++) {
		struct kvr__pend *p = &c->pend[i];
		struct kvr_completion e;

		switch (p->state) {
		case KVR_PEND_FREE:
			continue;
		case KVR_PEND_SENDING:
		case KVR_PEND_ORPHAN:
			kvr__pend_free(c, p);
			continue;
		default:
			break;
		}
		if (p->internal) {
			kvr__pend_free(c, p);
			continue;
		}
		if (p->sync) {
			if (p->state == KVR_PEND_WAIT) {
				p->state = KVR_PEND_DONE;
				p->status = c->broken;
			}
			continue;
		}
		if (p->op == KVR_OP_COMMIT_STORE ||
		    p->op == KVR_OP_ABORT_STORE ||
		    p->op == KVR_OP_COMMIT_RETRIEVE)
			kvr_xfer_free(p->x);
		memset(&e, 0, sizeof(e));
		e.user = p->user;
		e.op = p->op;
		e.status = c->broken;
		e.xfer = p->x;
		kvr__pend_free(c, p);
		kvr__pend_cq_push(c, &e);
	}
}

/*
 * Owe an undo for what an abandoned request created on the server. Only
 * queued here: answer.c calls it while an answer is handled, possibly
 * while a sync call waits for room, where sending would re-enter submit.
 * kvr__submit() sends it at the start of the next request (submit.c,
 * undo_flush). Only when the queue cannot grow (out of memory) is it
 * dropped; the server still frees it when this channel closes.
 */
void kvr__pend_owe(struct kvr_client *c, uint32_t op, uint64_t handle)
{
	uint32_t uop;

	if (!handle || c->broken)
		return;
	if (op == KVR_OP_PREPARE_STORE)
		uop = KVR_OP_ABORT_STORE;
	else if (op == KVR_OP_PREPARE_RETRIEVE)
		uop = KVR_OP_COMMIT_RETRIEVE;
	else if (op == KVR_OP_LOOKUP)
		uop = KVR_OP_RELEASE;
	else
		return;
	if (c->undo_n == c->undo_cap) {
		uint32_t cap = c->undo_cap ? 2 * c->undo_cap : 16;
		struct kvr__pend_undo *q = realloc(c->undo, cap * sizeof(*q));

		if (!q)
			return;
		c->undo = q;
		c->undo_cap = cap;
	}
	c->undo[c->undo_n++] =
	    (struct kvr__pend_undo){.op = uop, .handle = handle};
}
