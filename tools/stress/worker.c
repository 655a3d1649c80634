/* SPDX-License-Identifier: MIT */
/*
 * worker.c - one worker process, from fork to _exit: it connects as a
 * libkvring client, runs the seeded op mix until the parent raises the
 * stop flag (or the --ops budget is spent), counts every failed call by
 * errno, reconnects when the library says the connection is broken (the
 * server was killed and restarted, or it cut us off), and on stop closes
 * its client cleanly and exits 0. It also publishes its phase, the hint
 * the killer uses to aim.
 *
 * A worker may be SIGKILLed at any instruction; nothing here tries to
 * survive that. Everything that must outlive it is already in the shared
 * mapping (results.c), and everything it held in the server must be freed
 * by the server's own disconnect cleanup: that is what the run tests.
 *
 * It does not implement the operations (ops.c, lease.c) and never touches
 * another slot's results.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "stress.h"

uint32_t st_worker_sum(const struct st_opts *o, unsigned slot)
{
	static const uint32_t cycle[4] = {KVR_CHECKSUM_VERIFY, KVR_CHECKSUM_ON,
					  KVR_CHECKSUM_OFF,
					  KVR_CHECKSUM_VERIFY};

	return o->checksum == ST_SUM_MIXED ? cycle[slot % 4] : o->checksum;
}

bool st_worker_ahead(const struct st_opts *o, unsigned slot)
{
	return o->store_ahead == ST_AHEAD_MIXED ? (slot & 1) != 0
						: o->store_ahead == ST_AHEAD_ON;
}

/*
 * Connect, retrying every 20 ms (each failure counted, e.g. ECONNREFUSED
 * while a killed server is being restarted) until it works or the parent
 * says stop. Return: 0, or -ESHUTDOWN when told to stop first.
 */
static int worker_connect(struct st_worker *w)
{
	struct kvr_client_opts co = {0};
	char err[256];
	int rc;

	st_results_phase(w, PH_CONNECT);
	st_keys_client_opts(&co, w->o->socket);
	co.transport = w->o->copy ? KVR_TRANSPORT_COPY : 0;
	co.no_prefault = w->o->no_prefault;
	co.checksum = w->sum;
	/* Store-ahead has no client option: the library reads it from the
	 * environment at connect (docs/config.md). */
	setenv("KVRING_STORE_AHEAD", w->ahead ? "1" : "0", 1);
	/* Relaxed: stop is a plain flag, see should_stop(). */
	while (!atomic_load_explicit(&w->sh->stop, memory_order_relaxed)) {
		rc = kvr_connect(&co, &w->c, err, sizeof(err));
		if (rc == 0) {
			st_results_phase(w, PH_IDLE);
			return 0;
		}
		st_results_err(w, rc);
		st_sleep_us(20000);
	}
	return -ESHUTDOWN;
}

static bool should_stop(struct st_worker *w)
{
	uint64_t total;

	/* Relaxed: stop is a plain flag; nothing is published with it (the
	 * parent reads our results only after waitpid()). */
	if (atomic_load_explicit(&w->sh->stop, memory_order_relaxed))
		return true;
	if (!w->o->max_ops)
		return false;
	/* Relaxed: a budget, overshooting by a few operations is fine. */
	total = atomic_load_explicit(&w->sh->ops_total, memory_order_relaxed);
	return total >= w->o->max_ops;
}

/*
 * The worker's life. @seed is this incarnation's own PRNG seed (fleet.c
 * derives it from the run seed, the slot and the generation), so a
 * replacement does not replay its victim's operations.
 */
void st_worker_main(struct st_shared_shm *sh, const struct st_opts *o,
		    unsigned slot, uint64_t seed, uint64_t nkeys)
{
	struct st_worker w = {.sh = sh,
			      .res = &sh->res[slot],
			      .o = o,
			      .slot = slot,
			      .rng = seed,
			      .nkeys = nkeys,
			      .sum = st_worker_sum(o, slot),
			      .ahead = st_worker_ahead(o, slot)};
	int rc;

	signal(SIGINT, SIG_IGN); /* the parent decides when we stop */
	w.exp_hash = calloc(nkeys, sizeof(*w.exp_hash));
	w.scratch = malloc(o->chunk_max);
	if (!w.exp_hash || !w.scratch) {
		fprintf(stderr, PROG ": worker %u: out of memory\n", slot);
		_exit(3);
	}
	if (worker_connect(&w) < 0)
		_exit(0);
	/*
	 * The op mix, in percent: lookup 7, held async batch 5, store 33
	 * (a store-ahead worker: half of them one-key stores a staged slot
	 * fits), abort 8, retrieve 27, lookup with pin (then release /
	 * redeem / offer) 12, redeem a lease another worker offered 8 (a
	 * plain retrieve when none is offered). Stores dominate so that
	 * eviction never rests; retrieves mostly hit recently stored windows
	 * so that most of them verify something.
	 */
	while (!should_stop(&w)) {
		uint64_t r = st_rnd_below(&w.rng, 100);

		st_results_phase(&w, PH_OTHER);
		if (r < 7)
			rc = st_op_lookup(&w);
		else if (r < 12)
			rc = st_batch_op(&w);
		else if (r < 45)
			rc = st_op_store(&w, false);
		else if (r < 53)
			rc = st_op_store(&w, true);
		else if (r < 80)
			rc = st_op_retrieve(&w);
		else if (r < 92)
			rc = st_lease_op(&w);
		else if ((rc = st_lease_op_shared(&w)) == 1)
			rc = st_op_retrieve(&w);
		st_results_phase(&w, PH_IDLE);
		if (rc == 0) {
			/* Relaxed: a budget counter, see should_stop(). */
			atomic_fetch_add_explicit(&sh->ops_total, 1,
						  memory_order_relaxed);
			continue;
		}
		/* A failed op is counted by errno; the connection is only
		 * replaced when the library says it is broken (server gone,
		 * restarted, or it sent something malformed). */
		st_results_err(&w, rc);
		if (st_results_fatal(rc)) {
			kvr_close(w.c);
			w.c = NULL;
			st_bump(&w.res->reconnects, 1);
			if (worker_connect(&w) < 0)
				break;
		}
	}
	/* A worker that was told to stop closes cleanly: whatever it still
	 * holds (an offered lease) dies with its channel. */
	kvr_close(w.c);
	free(w.exp_hash);
	free(w.scratch);
	_exit(0);
}
