/* SPDX-License-Identifier: MIT */
/*
 * batch.c - the held async batch of one worker (kvr_submit_hold and
 * kvr_submit_flush): 2..16 prepares, stores and retrieves of windows,
 * written into the request ring under one hold and published at once;
 * then every store slot filled and every retrieve slot checked byte for
 * byte; then all the commits under a second hold. Between the two holds
 * the worker holds the reservations and pins of the whole batch, and it
 * says so (PREPARED phase) and sometimes lingers, so that the killer's
 * SIGKILLs land there; and one time in eight it lingers with the commits
 * held but not published, so that a kill leaves kvringd a channel whose
 * last batch it never saw. Store slots are poisoned first, as in ops.c:
 * a reservation the server published after such a kill shows up as
 * corruption. Under --stop-every a lingering batch may SIGSTOP itself
 * there, holding everything past the deadline: it then writes nothing
 * more, and every commit of a transfer it held must answer expired.
 *
 * It does not judge the bytes itself (verify.c, through
 * st_op_check_retrieve) and knows nothing of the connection's life
 * (worker.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stress.h"

#define BATCH_MAX 16

/* One request of the batch: its window and its transfer. */
struct breq {
	struct kvr_xfer x;
	uint64_t base;
	uint32_t n;
	bool store;
	bool prepared;	/* its prepare completed with status 0 */
	bool committed; /* its commit completed with status 0 */
	bool had_id;	/* a server transfer (an id) when it was committed */
	uint64_t nok, bytes; /* store: slots (bytes) it writes */
};

/*
 * Reap until nothing we submitted is in flight, marking each request of
 * @q prepared or committed as its answer says. Completions carry the
 * request's index + 1. Every error is counted; the return is the first
 * one that broke the connection, or 0.
 */
static int reap_all(struct st_worker *w, struct breq *q, uint32_t nq,
		    bool stopped)
{
	struct kvr_completion comp[BATCH_MAX];
	int fatal = 0;

	while (kvr_inflight(w->c) > 0) {
		int got = kvr_reap(w->c, comp, BATCH_MAX, 1, -1);

		if (got < 0) {
			/* Timed out or broken: the client is unusable for
			 * this batch; worker.c reconnects on a fatal one. */
			return got;
		}
		for (int i = 0; i < got; i++) {
			uintptr_t j = (uintptr_t)comp[i].user;
			bool commit = comp[i].op == KVR_OP_COMMIT_STORE ||
				      comp[i].op == KVR_OP_COMMIT_RETRIEVE;

			if (stopped && commit && j && j <= nq &&
			    q[j - 1].had_id) {
				/* Held through the stop: reclaimed, so the
				 * commit must say so (ops.c after_stop). */
				if (comp[i].status == KVR_ERR_EXPIRED) {
					st_bump(&w->res->stop_expired, 1);
					continue;
				}
				if (comp[i].status == 0) {
					fprintf(stderr,
						PROG ": a batch held through a "
						     "%u ms stop was still "
						     "open (--xfer-ms %u)\n",
						w->o->stop_ms, w->o->xfer_ms);
					st_bump(&w->res->stop_not_expired, 1);
				}
			}
			if (comp[i].status < 0) {
				st_results_err(w, comp[i].status);
				if (!fatal && st_results_fatal(comp[i].status))
					fatal = comp[i].status;
			} else if (j && j <= nq) {
				if (comp[i].op == KVR_OP_PREPARE_STORE ||
				    comp[i].op == KVR_OP_PREPARE_RETRIEVE)
					q[j - 1].prepared = true;
				else
					q[j - 1].committed = true;
			}
		}
	}
	return fatal;
}

/* Under a hold: submit what @submit does for each request; a full ring
 * (-EAGAIN) ends the batch early. Return the number submitted, or a
 * fatal -errno. */
static int submit_prepares(struct st_worker *w, struct breq *q, uint32_t m)
{
	struct kvr_key k[MAX_CHUNKS];
	uint64_t sz[MAX_CHUNKS];
	uint32_t i;
	int rc = 0;

	for (i = 0; i < m; i++) {
		void *user = (void *)(uintptr_t)(i + 1);

		st_keys_window(q[i].base, q[i].n, k, sz);
		rc = q[i].store ? kvr_submit_prepare_store(w->c, k, sz, q[i].n,
							   &q[i].x, user)
				: kvr_submit_prepare_retrieve(w->c, k, q[i].n,
							      &q[i].x, user);
		if (rc < 0)
			break;
	}
	if (rc < 0 && rc != -EAGAIN && i == 0)
		return rc;
	return (int)i;
}

static int batch_run(struct st_worker *w);

int st_batch_op(struct st_worker *w)
{
	int rc;

	/* Relaxed: a hint for the killer's report, like the phase. */
	atomic_store_explicit(&w->res->in_batch, 1, memory_order_relaxed);
	rc = batch_run(w);
	atomic_store_explicit(&w->res->in_batch, 0, memory_order_relaxed);
	return rc;
}

/*
 * Submit the commit of every prepared request of @q, held (the caller
 * flushes); a full ring publishes what was held, and the requests are
 * reaped to make room. 0, or the error that broke the connection.
 */
static int submit_commits(struct st_worker *w, struct breq *q, uint32_t m,
			  bool stopped)
{
	int rc = 0;

	/* The commits, held; sometimes the worker lingers before the
	 * flush, so a kill finds them written but never published. */
	(void)kvr_submit_hold(w->c);
	for (uint32_t i = 0; i < m; i++) {
		void *user = (void *)(uintptr_t)(i + 1);

		if (!q[i].prepared)
			continue;
		q[i].had_id = q[i].x.id != 0;
		rc = q[i].store
			 ? kvr_submit_commit_store(w->c, &q[i].x, user)
			 : kvr_submit_commit_retrieve(w->c, &q[i].x, user);
		if (rc == -EAGAIN) {
			/* The full ring published what was held: make room
			 * and submit this one again. */
			rc = kvr_submit_flush(w->c);
			if (rc == 0)
				rc = reap_all(w, q, m, stopped);
			if (rc < 0)
				break;
			(void)kvr_submit_hold(w->c);
			i--;
			continue;
		}
		if (rc < 0)
			break;
	}
	return rc;
}

static int batch_run(struct st_worker *w)
{
	struct breq q[BATCH_MAX];
	uint32_t m = 2 + (uint32_t)st_rnd_below(&w->rng, BATCH_MAX - 1);
	bool any_store = false, linger, stopped = false;
	int rc, nsub;

	memset(q, 0, sizeof(q));
	for (uint32_t i = 0; i < m; i++) {
		q[i].store = st_rnd_below(&w->rng, 2) == 0;
		if (q[i].store && w->ahead && st_rnd_below(&w->rng, 2) == 0)
			st_op_pick_ahead(w, &q[i].base, &q[i].n);
		else
			st_op_pick_window(w, !q[i].store, &q[i].base, &q[i].n);
		any_store |= q[i].store;
	}
	(void)kvr_submit_hold(w->c);
	nsub = submit_prepares(w, q, m);
	rc = kvr_submit_flush(w->c);
	if (nsub < 0 || rc < 0) {
		int r2 = reap_all(w, q, m, false);

		return nsub < 0 ? nsub : (rc < 0 ? rc : r2);
	}
	st_bump(&w->res->batch_reqs, (uint64_t)nsub);
	m = (uint32_t)nsub;
	rc = reap_all(w, q, m, false);
	if (rc < 0)
		return rc;
	st_results_phase(w,
			 any_store ? PH_STORE_PREPARED : PH_RETRIEVE_PREPARED);
	linger = st_rnd_below(&w->rng, 8) == 0;
	/* Stores: poison, then (after a possible linger in which a kill
	 * leaves the poison reserved) the real bytes. Retrieves: checked
	 * while pinned. */
	for (uint32_t i = 0; i < m; i++) {
		struct kvr_xfer *x = &q[i].x;

		if (!q[i].prepared)
			continue;
		if (!q[i].store) {
			st_op_check_retrieve(w, x, q[i].base, q[i].n,
					     "batch retrieve");
			continue;
		}
		for (uint32_t s = 0; s < x->nslots; s++) {
			int st = x->slots[s].status;

			st_bump(
			    &w->res->slot_st[st >= 0 && st < NSLOT_ST ? st : 4],
			    1);
			if (st != KVR_SLOT_OK)
				continue;
			memset(x->slots[s].ptr, 0xa5, x->slots[s].len);
			q[i].nok++;
			q[i].bytes += x->slots[s].len;
		}
	}
	if (linger && !(stopped = st_op_maybe_stop(w)))
		st_sleep_us(500 + st_rnd_below(&w->rng, 2500));
	/* Stopped past the deadline: the slots may be someone else's now,
	 * so nothing more is written, and the poison is committed. */
	for (uint32_t i = 0; i < m && !stopped; i++)
		if (q[i].prepared && q[i].store)
			for (uint32_t s = 0; s < q[i].x.nslots; s++)
				if (q[i].x.slots[s].status == KVR_SLOT_OK)
					st_keys_fill(q[i].x.slots[s].ptr,
						     q[i].x.slots[s].len,
						     q[i].base + s);
	rc = submit_commits(w, q, m, stopped);
	if (rc == 0 && st_rnd_below(&w->rng, 8) == 0)
		st_sleep_us(500 + st_rnd_below(&w->rng, 2500));
	if (rc == 0)
		rc = kvr_submit_flush(w->c);
	else
		(void)kvr_submit_flush(w->c);
	{
		int r2 = reap_all(w, q, m, stopped);

		if (rc == 0)
			rc = r2;
	}
	st_results_phase(w, PH_OTHER);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < m; i++)
		if (q[i].committed && q[i].store && q[i].nok) {
			uint64_t pos = atomic_fetch_add_explicit(
			    &w->sh->recent_pos, 1, memory_order_relaxed);

			st_bump(&w->res->stored_chunks, q[i].nok);
			st_bump(&w->res->stored_bytes, q[i].bytes);
			/* Relaxed: a hint list, see st_op_store(). */
			atomic_store_explicit(&w->sh->recent[pos % RECENT],
					      q[i].base << 5 | q[i].n,
					      memory_order_relaxed);
		}
	st_bump(&w->res->ops[OP_BATCH], 1);
	return 0;
}
