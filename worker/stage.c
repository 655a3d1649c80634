/* SPDX-License-Identifier: MIT */
/*
 * stage.c - store-ahead, libkvring's side ($KVRING_STORE_AHEAD=1, ring
 * transport only; docs/protocol.md "Store-ahead"). kvringd hands this
 * channel one staged slot ahead of time, in the answer of a commit. A
 * one-key kvr_prepare_store() whose size is the staged slot's is then
 * answered here: it sends the key with a one-way "early bind" (a
 * prepare_store + BIND naming the staged slot) and returns at once, so
 * kvringd binds while the caller copies. kvr_commit_store() collects the
 * bind's answer (long there by then) and sends a plain commit of the now
 * bound transfer, whose answer carries the next staged slot: one round
 * trip on the caller's path. The store still returns only after kvringd
 * published it.
 *
 * What a staged prepare cannot know is whether the key is stored already:
 * the caller copies, and the bind answers "exists" (rule 1: the commit is
 * a success that stores nothing, the slot stays staged). So that
 * duplicate-heavy callers do not pay a copy per store, an "exists" answer
 * turns store-ahead off for the next prepares, which ask kvringd as usual
 * (and learn "exists" before copying), until one of them finds a new key.
 *
 * A staged slot is only used while at least half of its lifetime (the
 * transfer deadline, kvringd --xfer-ms) is left, so a store that takes
 * less than that cannot find it reclaimed. This file owns c->stage and
 * sends the early bind; ops.c and async.c send the commits it shapes, and
 * owe the aborts of the slots it gives back.
 *
 * A caller may also drop a staged xfer with kvr_xfer_free(), which knows
 * no client. So while a staged xfer is out, its client is listed by the
 * xfer's slots array (pend.c: one process-wide list under a mutex, skipped
 * by a count when empty); kvr_xfer_free() of a listed array marks the
 * stage dropped, and the client's next store call gives the slot back:
 * kept if its bind found the key stored (still staged), else an owed
 * abort.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/error.h>

#include "client.h"

/*
 * The staged xfer was dropped by kvr_xfer_free(): take its early bind's
 * answer if it is in (without waiting: kvringd may be slow or stopped),
 * keep the slot if it is still staged (the key was stored), and otherwise
 * owe its abort, which frees it bound or staged.
 */
static void reclaim(struct kvr_client *c)
{
	struct kvr__stage *g = &c->stage;
	struct kvr__pend *p;
	bool keep = false;

	if (!g->taken ||
	    !atomic_load_explicit(&g->dropped, memory_order_acquire))
		return;
	atomic_store_explicit(&g->dropped, false, memory_order_relaxed);
	g->taken = false;
	(void)kvr__wait_drain(c);
	p = kvr__pend_find(c, g->bind_req);
	g->bind_req = 0;
	if (p && p->state == KVR_PEND_DONE) {
		keep = p->status == 0 && !(p->value == 1 && p->handle == g->id);
		kvr__pend_free(c, p);
	} else if (p) {
		/* Its late answer is dropped. */
		p->state = KVR_PEND_ORPHAN;
		p->x = NULL;
	}
	if (!keep && !c->broken) {
		kvr__pend_owe(c, KVR_OP_PREPARE_STORE, g->id);
		g->id = 0;
	} else if (!keep) {
		g->id = 0;
	}
}

int kvr__stage_mode(const struct kvr_client_opts *o, char *errbuf,
		    size_t errlen)
{
	const char *e = getenv("KVRING_STORE_AHEAD");

	if (o->store_ahead == KVR_STORE_AHEAD_OFF ||
	    o->store_ahead == KVR_STORE_AHEAD_ON)
		return o->store_ahead == KVR_STORE_AHEAD_ON;
	if (o->store_ahead != 0) {
		snprintf(
		    errbuf, errlen,
		    "opts.store_ahead %u: expected 0 ($KVRING_STORE_AHEAD), "
		    "KVR_STORE_AHEAD_OFF or KVR_STORE_AHEAD_ON",
		    o->store_ahead);
		return -EINVAL;
	}
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
	c->info.store_ahead = on;
}

int kvr__stage_prepare(struct kvr_client *c, const struct kvr_key *keys,
		       const uint64_t *sizes, uint32_t n, struct kvr_xfer *x,
		       uint64_t *give_back)
{
	struct kvr__stage *g = &c->stage;
	struct kvr__submit_req bind = {.op = KVR_OP_PREPARE_STORE,
				       .flags = KVR_REQ_BIND,
				       .n = 1,
				       .kind = KVR_SUBMIT_SYNC};

	*give_back = 0;
	reclaim(c);
	if (!g->on || g->skip || !g->id || g->taken || n != 1 || !keys ||
	    !sizes || c->broken)
		return 0;
	if (sizes[0] != g->len ||
	    kvr_clock_ns(CLOCK_MONOTONIC_COARSE) >= g->use_before_ns) {
		/* Another size (the chunk size changed), or too old to be
		 * sure it outlives this store: give it back, ask kvringd as
		 * usual, and the commit asks for one of this size. */
		*give_back = g->id;
		g->id = 0;
		return 0;
	}
	x->slots = calloc(1, sizeof(*x->slots));
	if (!x->slots)
		return 0; /* the round trip will say -ENOMEM if it must */
	/* The early bind: sent, not waited for (kvr__stage_commit collects
	 * it). A ring that stays full, or a break: ask kvringd as usual. */
	bind.handle = g->id;
	bind.keys = keys;
	bind.sizes = sizes;
	if (kvr__submit(c, &bind, kvr__wait_deadline_ns(c->timeout_ms),
			&g->bind_req) < 0) {
		free(x->slots);
		x->slots = NULL;
		return 0;
	}
	x->op = KVR_OP_PREPARE_STORE;
	x->id = g->id;
	x->nslots = 1;
	x->slots[0].status = KVR_SLOT_OK;
	x->slots[0].off = g->off;
	x->slots[0].len = g->len;
	x->slots[0].ptr = (char *)c->pool.base + g->off;
	g->taken = true;
	g->hits++;
	kvr__pend_stage_add(c, x->slots);
	return 1;
}

/* Whether @x is the transfer a staged prepare answered. */
static bool is_staged(const struct kvr_client *c, const struct kvr_xfer *x)
{
	return c->stage.taken && x->id && x->id == c->stage.id;
}

/* The wait for the early bind's answer ends when it is answered, or gone
 * (a break freed it). */
static bool bind_done(struct kvr_client *c, void *arg)
{
	struct kvr__pend *p = kvr__pend_find(c, *(uint64_t *)arg);

	return !p || p->state == KVR_PEND_DONE;
}

/*
 * Collect the early bind of the taken staged slot. Return 0 with *bound
 * (true: the slot is a plain transfer of the key now; false: the key was
 * stored already or being stored, the slot still staged), or -errno (the
 * bind failed, or no answer in time: then an abort of the slot is owed,
 * which frees it whichever it is).
 */
static int bind_result(struct kvr_client *c, bool *bound)
{
	struct kvr__stage *g = &c->stage;
	uint64_t id = g->bind_req, xfer = g->id;
	struct kvr__pend *p;
	int rc;

	g->bind_req = 0;
	g->taken = false;
	kvr__pend_stage_del(c);
	rc = kvr__wait(c, kvr__wait_deadline_ns(c->timeout_ms), bind_done, &id);
	p = kvr__pend_find(c, id);
	if (rc == 0 && p) {
		int st = p->status;

		*bound = st == 0 && p->value == 1 && p->handle == xfer;
		kvr__pend_free(c, p);
		if (st == 0)
			return 0;
		g->id = 0;
		return kvr__client_fail(c, st,
					"store-ahead: kvringd refused to bind "
					"staged slot %llu: %s",
					(unsigned long long)xfer,
					kvr_strerror(st));
	}
	g->id = 0;
	if (rc == -ETIMEDOUT && p && !c->broken) {
		/* Its late answer is dropped; the abort frees the slot. */
		p->state = KVR_PEND_ORPHAN;
		p->x = NULL;
		kvr__pend_owe(c, KVR_OP_PREPARE_STORE, xfer);
		return kvr__client_fail(
		    c, -ETIMEDOUT,
		    "kvringd did not answer the store-ahead "
		    "bind within %u ms (nothing was stored)",
		    c->timeout_ms);
	}
	if (p)
		kvr__pend_free(c, p);
	if (rc < 0)
		return rc;
	return c->broken ? c->broken : -EPROTO;
}

int kvr__stage_commit(struct kvr_client *c, struct kvr_xfer *x,
		      struct kvr__submit_req *s)
{
	struct kvr__stage *g = &c->stage;
	bool bound = false;

	if (!g->on)
		return 0;
	reclaim(c);
	if (is_staged(c, x)) {
		int rc = bind_result(c, &bound);

		if (rc < 0)
			return rc;
		if (!bound) {
			/* Rule 1: nothing to store, and the copy was wasted:
			 * ask kvringd first for the next ones. */
			g->skip = true;
			g->wasted++;
			/* Said, not an error: the caller learns why nothing
			 * was stored though its prepare gave it a slot. */
			kvr__client_fail(
			    c, 0,
			    "store-ahead: the key was stored "
			    "already, so nothing was stored (rule "
			    "1; the copy was not needed); the next "
			    "one-key prepares ask kvringd first");
			return 1;
		}
		g->id = 0; /* a plain transfer now: s commits it */
	}
	if (!g->id && !g->asked && x->nslots == 1) {
		s->flags |= KVR_REQ_STAGE;
		g->asked = true;
	}
	return 0;
}

bool kvr__stage_abort(struct kvr_client *c, struct kvr_xfer *x)
{
	bool bound = false;

	if (!is_staged(c, x))
		return false;
	/* Whatever the caller wrote is never published. A slot still staged
	 * (the key was stored) stays ours; a bound one, or one whose bind
	 * failed, is given back with an owed abort. */
	if (bind_result(c, &bound) == 0 && bound) {
		kvr__pend_owe(c, KVR_OP_PREPARE_STORE, c->stage.id);
		c->stage.id = 0;
	}
	kvr_xfer_free(x);
	return true;
}
