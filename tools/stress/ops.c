/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the plain operations one worker runs against kvringd: store,
 * abort, retrieve and lookup of a window of 1..16 consecutive keys, plus
 * the choice of that window and the commit of a prepared retrieve (shared
 * with lease.c). Each returns 0 when the operation completed and was
 * counted, or the library's -errno; worker.c counts the error and decides
 * whether to reconnect.
 *
 * This is also where the killer's targets are made. Between a prepare and
 * its commit the worker publishes a PREPARED phase and sometimes lingers
 * 0.5..3 ms, so that the parent's targeted SIGKILLs (killer.c) land
 * exactly where the server holds a reservation or a pin for a process
 * that will never come back. And it is where poison comes from: a store
 * that will be aborted, or that lingers (and so may be killed), first
 * fills its slots with 0xa5. The server must never publish such a
 * reservation; if it ever did, a later retrieve of that key would hash
 * poison (or the half-written real bytes) and verify.c would count it
 * corrupt. Without poison a leaked reservation could still hold an older,
 * correct copy of the chunk and the bug would pass unseen.
 *
 * It does not verify bytes itself (verify.c) and knows nothing of leases
 * (lease.c) or of the connection's life (worker.c).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <kvring/proto.h>

#include "stress.h"

/* Pause in a prepared phase now and then (one time in 8, 0.5..3 ms), so
 * that the parent's targeted kills find workers there. */
static void maybe_linger(struct st_worker *w)
{
	if (st_rnd_below(&w->rng, 8) == 0)
		st_sleep_us(500 + st_rnd_below(&w->rng, 2500));
}

/*
 * --stop-every: one prepared transfer in N stops this worker with SIGSTOP
 * (the parent resumes it --stop-ms later, beyond the server's --xfer-ms),
 * as a worker frozen by a debugger or a hung driver would be. Return
 * whether it stopped (batch.c stops with a whole batch held, too). The phase
 * says so first, so the parent knows whom to resume; it resumes only a process
 * it sees stopped.
 */
bool st_op_maybe_stop(struct st_worker *w)
{
	uint32_t ph;

	if (!w->o->stop_every || st_rnd_below(&w->rng, w->o->stop_every))
		return false;
	/* Relaxed: the parent reads these as hints, and checks /proc. */
	ph = atomic_load_explicit(&w->res->phase, memory_order_relaxed);
	atomic_store_explicit(&w->res->stop_ns, kvr_clock_now_ns(),
			      memory_order_relaxed);
	st_bump(&w->res->stops, 1);
	st_results_phase(w, PH_STOPPED);
	raise(SIGSTOP);
	st_results_phase(w, (enum st_phase)ph);
	return true;
}

/* After a stop, the commit must say the transfer expired: count which. */
static int after_stop(struct st_worker *w, int rc)
{
	if (rc == KVR_ERR_EXPIRED) {
		st_bump(&w->res->stop_expired, 1);
		return 0;
	}
	if (rc == 0) {
		fprintf(stderr,
			PROG ": a transfer held through a %u ms stop "
			     "was still open (--xfer-ms %u)\n",
			w->o->stop_ms, w->o->xfer_ms);
		st_bump(&w->res->stop_not_expired, 1);
	}
	return rc;
}

/* A window of 1..16 consecutive key ids: with @recent, one that some
 * worker committed lately (so a retrieve likely hits), else random. */
void st_op_pick_window(struct st_worker *w, bool recent, uint64_t *base,
		       uint32_t *n)
{
	uint64_t e, pos;

	if (recent) {
		/* Relaxed: any entry is a valid window; staleness is fine. */
		pos = atomic_load_explicit(&w->sh->recent_pos,
					   memory_order_relaxed);
		if (pos) {
			e = atomic_load_explicit(
			    &w->sh->recent[st_rnd_below(
				&w->rng, pos < RECENT ? pos : RECENT)],
			    memory_order_relaxed);
			if (e) {
				*base = e >> 5;
				*n = (uint32_t)(e & 31);
				return;
			}
		}
	}
	*n = 1 + (uint32_t)st_rnd_below(&w->rng, MAX_CHUNKS);
	*base = st_rnd_below(&w->rng, w->nkeys - *n + 1);
}

/* The fixed-size keys in turn from a random start: mostly keys not
 * stored (or long evicted), since a staged prepare cannot tell and the
 * library asks kvringd again after a duplicate. */
void st_op_pick_ahead(struct st_worker *w, uint64_t *base, uint32_t *n)
{
	uint64_t nfixed = (w->nkeys - 1) / ST_FIXED_EVERY + 1;

	if (!w->ahead_next)
		w->ahead_next = 1 + st_rnd_below(&w->rng, nfixed);
	*n = 1;
	*base = (w->ahead_next++ % nfixed) * ST_FIXED_EVERY;
}

/*
 * Store (or, with @abort_it, reserve and abort) a random window. A
 * store-ahead worker makes half of its stores one-key stores of a key of
 * the fixed size, which its staged slot fits: those prepares are answered
 * in the library and their commits bind (counted as OP_AHEAD_STORE), and
 * poison, lingering, kills and stops hit them as any store. Keys
 * already stored come back EXISTS, keys the pool has no room for NOROOM;
 * every answer is counted by status, and only OK slots are written.
 */
/*
 * A lingering store whose worker was stopped past the deadline: the
 * reservation was reclaimed, so the commit must answer EXPIRED (or, for a
 * store-ahead one-key store another worker stored already, rule 1's
 * success). Returns what after_stop() makes of the commit.
 */
static int store_after_stop(struct st_worker *w, struct kvr_xfer *x, bool ahead,
			    uint32_t n)
{
	int rc;

	/* Stopped past the deadline: the reservation was reclaimed.
	 * Every other time the worker resumes its copy first, as a
	 * paused process does, writing poison into the slots: their
	 * quarantine keeps them from every other chunk, and a chunk
	 * that got them would read as corrupt. Committing the poison
	 * must answer EXPIRED; published poison is corruption too. */
	if (st_rnd_below(&w->rng, 2) == 0) {
		for (uint32_t i = 0; i < x->nslots; i++)
			if (x->slots[i].status == KVR_SLOT_OK)
				memset(x->slots[i].ptr, 0xa5, x->slots[i].len);
		st_bump(&w->res->stop_resumed, 1);
	}
	rc = kvr_commit_store(w->c, x);
	st_results_phase(w, PH_OTHER);
	if (rc == 0 && ahead && n == 1 &&
	    strstr(kvr_client_errmsg(w->c), "stored already"))
		/* Store-ahead answered the prepare in the library, so
		 * a key another worker had stored shows only in the
		 * early bind, and the commit is rule 1's success that
		 * says it stored nothing (a lookup now may miss it:
		 * the key can be evicted meanwhile). */
		return 0;
	return after_stop(w, rc);
}

int st_op_store(struct st_worker *w, bool abort_it)
{
	struct kvr_key k[MAX_CHUNKS];
	uint64_t sz[MAX_CHUNKS], base, pos, nok = 0, bytes = 0;
	struct kvr_xfer x = {0};
	bool linger = false, inject, shared;
	unsigned char *victim = NULL;
	bool ahead = w->ahead && st_rnd_below(&w->rng, 2) == 0;
	uint32_t n;
	int rc;

	if (ahead)
		st_op_pick_ahead(w, &base, &n);
	else
		st_op_pick_window(w, false, &base, &n);
	st_keys_window(base, n, k, sz);
	rc = kvr_prepare_store(w->c, k, sz, n, &x);
	if (rc < 0)
		return rc;
	st_results_phase(w, PH_STORE_PREPARED);
	/* One committed store in eight lingers in the prepared window. */
	if (!abort_it && st_rnd_below(&w->rng, 8) == 0)
		linger = true;
	for (uint32_t i = 0; i < x.nslots; i++) {
		const struct kvr_slot *s = &x.slots[i];
		int st = s->status;

		st_bump(&w->res->slot_st[st >= 0 && st < NSLOT_ST ? st : 4], 1);
		if (st != KVR_SLOT_OK)
			continue;
		/* Poison first when this store will be aborted or may be
		 * killed while it lingers: published poison is corruption. */
		if (abort_it || linger) {
			memset(s->ptr, 0xa5, s->len);
		} else if (w->sum != KVR_CHECKSUM_OFF && ((base + i) & 1)) {
			/* Odd keys of a summing worker: kvr_xfer_fill(),
			 * whose sum is made while copying (its own path to
			 * the commit, judged by every reader). */
			st_keys_fill(w->scratch, s->len, base + i);
			rc = kvr_xfer_fill(w->c, &x, i, w->scratch);
			if (rc < 0) {
				(void)kvr_abort_store(w->c, &x);
				return rc;
			}
		} else {
			st_keys_fill(s->ptr, s->len, base + i);
		}
	}
	if (abort_it) {
		maybe_linger(w);
		rc = kvr_abort_store(w->c, &x);
		st_results_phase(w, PH_OTHER);
		if (rc == 0)
			st_bump(&w->res->ops[OP_ABORT], 1);
		return rc;
	}
	if (linger && x.id && st_op_maybe_stop(w))
		return store_after_stop(w, &x, ahead, n);
	if (linger) {
		/* A kill during this sleep leaves a poisoned reservation for
		 * the server's disconnect cleanup to throw away. */
		st_sleep_us(500 + st_rnd_below(&w->rng, 2500));
		for (uint32_t i = 0; i < x.nslots; i++)
			if (x.slots[i].status == KVR_SLOT_OK)
				st_keys_fill(x.slots[i].ptr, x.slots[i].len,
					     base + i);
	}
	/*
	 * Self-test of the checkers (--inject-corrupt): damage one chunk on
	 * purpose. In the shared pool the byte is flipped right after the
	 * commit, as a neighbour writing into the pool would: every
	 * reader's hash must catch it, and a checksumming reader's library
	 * too (the sum is of the good bytes). Under the copy transport the
	 * slot is our private buffer, freed by the commit, so the byte is
	 * flipped before it: only the readers' hash can see that one. A
	 * store-ahead worker damages only its one-key stores, the ones a
	 * staged slot answers and a bind publishes.
	 */
	inject = w->o->inject_corrupt && w->slot == 0 && (!w->ahead || ahead) &&
		 ++w->stores % w->o->inject_corrupt == 0;
	shared = kvr_client_info(w->c)->transport != KVR_TRANSPORT_COPY;
	/* Counted before the commit: it frees the slot array. */
	for (uint32_t i = 0; i < x.nslots; i++)
		if (x.slots[i].status == KVR_SLOT_OK) {
			if (!nok && inject) {
				victim = (unsigned char *)x.slots[i].ptr +
					 x.slots[i].len / 2;
				if (!shared)
					*victim ^= 1;
			}
			nok++;
			bytes += x.slots[i].len;
		}
	rc = kvr_commit_store(w->c, &x);
	st_results_phase(w, PH_OTHER);
	if (rc < 0)
		return rc;
	if (victim && shared)
		*victim ^= 1; /* the pool mapping outlives the transfer */
	st_bump(&w->res->stored_chunks, nok);
	st_bump(&w->res->stored_bytes, bytes);
	/* Relaxed: the ring is a hint list of windows worth retrieving; a
	 * reader that sees a torn pair (new pos, old entry) just retrieves
	 * an older window. The window is packed as base << 5 | n (n <= 16). */
	pos = atomic_fetch_add_explicit(&w->sh->recent_pos, 1,
					memory_order_relaxed);
	atomic_store_explicit(&w->sh->recent[pos % RECENT], base << 5 | n,
			      memory_order_relaxed);
	st_bump(&w->res->ops[ahead ? OP_AHEAD_STORE : OP_STORE], 1);
	return 0;
}

/*
 * Verify and commit a prepared retrieve of keys [base, base + n). The
 * answer covers the leading hits only, so slot i is key base + i; more
 * slots than keys is itself a corrupt answer. The phase says PREPARED
 * for the whole check, and the linger keeps the pins a little longer, so
 * the killer can catch us holding them.
 */
void st_op_check_retrieve(struct st_worker *w, struct kvr_xfer *x,
			  uint64_t base, uint32_t n, const char *how)
{
	uint32_t unchecked = UINT32_MAX, bad = 0;

	if (x->nslots > n) {
		fprintf(stderr, PROG ": CORRUPT %s: %u slots for %u keys\n",
			how, x->nslots, n);
		st_bump(&w->res->corrupt_chunks, 1);
	}
	/* Checksums on: the explicit check, before anything is used (under
	 * VERIFY the library ran it when the answer came). */
	if (w->sum == KVR_CHECKSUM_ON && x->nslots) {
		long v = kvr_verify_retrieve(w->c, x, &unchecked);

		/* It fails only on a bug (a retrieve of a summing client);
		 * counted by errno, and the transfer is still committed. */
		if (v < 0) {
			st_results_err(w, (int)v);
			unchecked = UINT32_MAX;
		} else {
			st_bump(&w->res->sum_unchecked, unchecked);
		}
	}
	for (uint32_t i = 0; i < x->nslots && i < n; i++)
		bad +=
		    st_verify_slot(w, &x->slots[i], base + i, how) == ST_V_BAD;
	st_verify_missed(w, x, bad, unchecked, how);
}

int st_op_finish_retrieve(struct st_worker *w, struct kvr_xfer *x,
			  uint64_t base, uint32_t n, const char *how)
{
	st_results_phase(w, PH_RETRIEVE_PREPARED);
	st_op_check_retrieve(w, x, base, n, how);
	maybe_linger(w);
	if (x->id == 0) {
		/* Nothing pinned, nothing to commit. */
		kvr_xfer_free(x);
		st_results_phase(w, PH_OTHER);
		return 0;
	}
	/* Verified while pinned; a stop now outlives the pin's transfer,
	 * whose slots stay in quarantine: every other time the worker reads
	 * them again, and must find the same bytes. */
	if (st_op_maybe_stop(w)) {
		int rc;

		if (st_rnd_below(&w->rng, 2) == 0) {
			st_op_check_retrieve(w, x, base, n, how);
			st_bump(&w->res->stop_resumed, 1);
		}
		rc = kvr_commit_retrieve(w->c, x);

		st_results_phase(w, PH_OTHER);
		return after_stop(w, rc);
	}
	st_results_phase(w, PH_OTHER);
	return kvr_commit_retrieve(w->c, x);
}

/* Retrieve a window: three times in four a recently stored one, so that
 * most retrieves hit and verify something despite constant eviction. */
int st_op_retrieve(struct st_worker *w)
{
	struct kvr_key k[MAX_CHUNKS];
	struct kvr_xfer x = {0};
	uint64_t base;
	uint32_t n;
	int rc;

	st_op_pick_window(w, st_rnd_below(&w->rng, 4) != 0, &base, &n);
	st_keys_window(base, n, k, NULL);
	rc = kvr_prepare_retrieve(w->c, k, n, &x);
	if (rc < 0)
		return rc;
	rc = st_op_finish_retrieve(w, &x, base, n, "retrieve");
	if (rc == 0)
		st_bump(&w->res->ops[OP_RETRIEVE], 1);
	return rc;
}

/* Lookup without pin: all the worker can check is that the hit count is
 * not larger than the window. With --disk it reads through the tiers, so
 * chunks come back from disk into the pool, where retrieves check them
 * byte for byte. */
int st_op_lookup(struct st_worker *w)
{
	struct kvr_key k[MAX_CHUNKS];
	bool pending = false;
	uint64_t base;
	uint32_t n;
	long hits;

	st_op_pick_window(w, st_rnd_below(&w->rng, 2) != 0, &base, &n);
	st_keys_window(base, n, k, NULL);
	hits = w->o->disk ? kvr_lookup_l2(w->c, k, n, NULL, &pending)
			  : kvr_lookup(w->c, k, n, NULL);
	if (hits < 0)
		return (int)hits;
	if ((uint64_t)hits > n) {
		fprintf(stderr, PROG ": CORRUPT lookup: %ld hits for %u keys\n",
			hits, n);
		st_bump(&w->res->corrupt_chunks, 1);
	}
	st_bump(&w->res->ops[OP_LOOKUP], 1);
	return 0;
}
