/* SPDX-License-Identifier: MIT */
/*
 * lease.c - leases in the stress run: a lookup with pin, after which the
 * worker (one time in three each) releases the lease, redeems it itself,
 * or offers it in its mailbox for another worker to redeem, and the
 * redemption of a lease another worker offered (the cross-process case:
 * the pins must survive from one connection to another, and die with
 * their maker's channel when the maker is killed).
 *
 * It owns the mailbox protocol (struct st_mailbox_shm in stress.h): one
 * box per worker slot, written by its maker, emptied by one taker, and
 * reset by the parent when either dies mid-way. A box holds no memory of
 * its own: the lease it names is the server's, so a box that is lost or
 * reset at worst lets that lease expire or die with its channel, which is
 * exactly what the leak audit must then see cleaned up.
 *
 * It does not verify bytes (verify.c) or commit retrieves itself
 * (ops.c st_op_finish_retrieve()).
 */
#include <errno.h>

#include "stress.h"

/* Mailbox states (struct st_mailbox_shm.state). */
enum { MB_EMPTY = 0, MB_WRITING = 1, MB_FULL = 2, MB_TAKING = 3 };

/*
 * Offer a lease in our own mailbox; false if the box is busy (still full,
 * or a taker is still reading our previous offer).
 */
static bool mbox_offer(struct st_mailbox_shm *m, const struct st_offer *of)
{
	uint32_t expect = MB_EMPTY;

	/* A-ST1: acquire; pairs with R-ST2 in mbox_take(): the last taker
	 * has finished reading the fields we are about to overwrite. */
	if (!atomic_compare_exchange_strong_explicit(
		&m->state, &expect, MB_WRITING, memory_order_acquire,
		memory_order_relaxed))
		return false;
	m->offer = *of;
	/* R-ST1: publishes the fields; pairs with A-ST2 in mbox_take(). */
	atomic_store_explicit(&m->state, MB_FULL, memory_order_release);
	return true;
}

/*
 * Take the offer in @m as worker @taker; false if nothing was offered. The
 * taker records itself before reading, so that if it is killed while it
 * holds the box the parent can tell whose box to reset.
 */
static bool mbox_take(struct st_mailbox_shm *m, unsigned taker,
		      struct st_offer *of)
{
	uint32_t expect = MB_FULL;

	/* A-ST2: acquire; pairs with R-ST1 in mbox_offer(): the fields
	 * read below are the ones the maker wrote before it set FULL. */
	if (!atomic_compare_exchange_strong_explicit(
		&m->state, &expect, MB_TAKING, memory_order_acquire,
		memory_order_relaxed))
		return false;
	/* Relaxed: read only by the parent's cleanup after some worker
	 * died, and what it needs is the value a dead taker left, which
	 * waitpid() ordered. A kill between the CAS and this store leaves
	 * a stale taker; see st_lease_cleanup() for what that costs. */
	atomic_store_explicit(&m->taker, taker, memory_order_relaxed);
	*of = m->offer;
	/* R-ST2: the box is free; pairs with A-ST1 in mbox_offer(), so the
	 * maker's next offer cannot overwrite what we are reading. */
	atomic_store_explicit(&m->state, MB_EMPTY, memory_order_release);
	return true;
}

/*
 * Take a lease another worker offered and redeem it. -ENOENT (its maker
 * died, or the lease expired), -EPERM and -EACCES are normal outcomes of a
 * race with the maker's death: counted by errno, but the operation counts
 * as done. Returns 1 when there was nothing to take (the caller then runs
 * a plain retrieve instead).
 */
int st_lease_op_shared(struct st_worker *w)
{
	unsigned nw = w->o->workers, from = (unsigned)st_rnd_below(&w->rng, nw);
	struct kvr_xfer x = {0};
	struct st_offer of;
	int rc;

	if (from == w->slot || !mbox_take(&w->sh->mbox[from], w->slot, &of))
		return 1; /* nothing offered: caller picks another op */
	rc = kvr_prepare_retrieve_lease(w->c, of.lease, &x);
	if (rc < 0) {
		if (rc == -ENOENT || rc == -EPERM || rc == -EACCES) {
			st_results_err(w, rc);
			return 0;
		}
		return rc;
	}
	/* The lease pinned the maker's hit prefix; fewer slots would mean
	 * the server lost part of a pin (reported as lease_short). */
	if (x.nslots != of.hits)
		st_bump(&w->res->lease_short, 1);
	rc = st_op_finish_retrieve(w, &x, of.base, of.n, "lease_shared");
	if (rc == 0)
		st_bump(&w->res->ops[OP_LEASE_SHARED], 1);
	return rc;
}

/*
 * Lookup with pin over a recently stored window, then one of: offer the
 * lease (if our box is free), release it, or redeem it ourselves and
 * verify. A lookup that hits nothing makes no lease and counts as a plain
 * pinned lookup.
 */
int st_lease_op(struct st_worker *w)
{
	struct kvr_key k[MAX_CHUNKS];
	struct kvr_xfer x = {0};
	uint64_t base, lease = 0;
	uint32_t n, choice;
	long hits;
	int rc;

	st_op_pick_window(w, true, &base, &n);
	st_keys_window(base, n, k, NULL);
	hits = kvr_lookup(w->c, k, n, &lease);
	if (hits < 0)
		return (int)hits;
	if (hits == 0 || lease == 0) {
		st_bump(&w->res->ops[OP_LOOKUP_PIN], 1);
		return 0;
	}
	choice = (uint32_t)st_rnd_below(&w->rng, 3);
	if (choice == 0) {
		struct st_offer of = {.lease = lease,
				      .base = base,
				      .n = n,
				      .hits = (uint32_t)hits};

		if (mbox_offer(&w->sh->mbox[w->slot], &of)) {
			/* Another worker may redeem it; if nobody does it
			 * dies with this channel or expires. */
			st_bump(&w->res->ops[OP_LOOKUP_PIN], 1);
			return 0;
		}
		/* Box busy: fall through and redeem it ourselves. */
	}
	if (choice == 1) {
		rc = kvr_release(w->c, lease);
		if (rc < 0)
			return rc;
		st_bump(&w->res->ops[OP_LOOKUP_PIN], 1);
		return 0;
	}
	rc = kvr_prepare_retrieve_lease(w->c, lease, &x);
	if (rc < 0)
		return rc;
	if (x.nslots != (uint32_t)hits)
		st_bump(&w->res->lease_short, 1);
	rc = st_op_finish_retrieve(w, &x, base, n, "lease_retrieve");
	if (rc == 0)
		st_bump(&w->res->ops[OP_LEASE_RETRIEVE], 1);
	return rc;
}

/*
 * The parent, after reaping the worker of @slot (so everything that worker
 * did is ordered before us by waitpid()): reset the boxes it left
 * half-done. Its own box, WRITING or FULL: a lease of a dead channel is
 * dead too, and a box left WRITING would stay locked for the slot's next
 * worker. Boxes it was TAKING from: the taker will never free them.
 *
 * S-ST1: these CASes and the taker load are seq_cst, as they always were;
 * their release half pairs with A-ST1 of the box's next maker, though they
 * publish nothing (the fields of an EMPTY box are never read). Relaxed
 * would be as good, since waitpid() already ordered the dead worker's
 * accesses before ours.
 *
 * Known narrow race, kept as it was: a taker killed between its CAS
 * (A-ST2) and its taker store leaves the box TAKING with a stale taker
 * slot. If that stale slot is someone else's, the box stays TAKING (its
 * maker then redeems or releases its leases itself) until that slot's
 * worker dies. If it is the slot of a worker that died earlier and a live
 * taker has just claimed the box, the parent may reset it under the live
 * taker, whose read of the fields could then race the maker's next offer.
 */
void st_lease_cleanup(struct st_shared_shm *sh, unsigned nworkers,
		      unsigned slot)
{
	struct st_mailbox_shm *m = &sh->mbox[slot];
	uint32_t e;

	/* Its own box: a lease of a dead channel is dead too. S-ST1: every
	 * access below is seq_cst; see docs/memory-order.md for why relaxed
	 * would do (waitpid already ordered the dead worker). */
	e = MB_WRITING;
	atomic_compare_exchange_strong_explicit(&m->state, &e, MB_EMPTY,
						memory_order_seq_cst,
						memory_order_seq_cst);
	e = MB_FULL;
	atomic_compare_exchange_strong_explicit(&m->state, &e, MB_EMPTY,
						memory_order_seq_cst,
						memory_order_seq_cst);
	/* Boxes it was taking from. */
	for (unsigned i = 0; i < nworkers; i++) {
		e = MB_TAKING;
		if (atomic_load_explicit(&sh->mbox[i].taker,
					 memory_order_seq_cst) == slot)
			atomic_compare_exchange_strong_explicit(
			    &sh->mbox[i].state, &e, MB_EMPTY,
			    memory_order_seq_cst, memory_order_seq_cst);
	}
}
