/* SPDX-License-Identifier: MIT */
/*
 * killer.c - the fault schedule: when a worker is SIGKILLed, which one,
 * and when our server is SIGKILLed and restarted. Worker kills come every
 * 0.5..1.5 x --kill-every ms; --target-pct of them aim at the window that
 * matters most, a worker between prepare and commit (it holds a
 * reservation or pins in the server that only the server's disconnect
 * cleanup can give back), and the rest hit a random worker wherever it is
 * (connecting, idle, mid-call). A server kill comes --kill-server-every
 * ms after the previous restart completed.
 *
 * How kills find the prepare/commit window: each worker publishes its
 * phase in its shared results slot (ops.c sets PH_STORE_PREPARED right
 * after prepare_store returns and PH_RETRIEVE_PREPARED while it verifies a
 * retrieve, and lingers there now and then). A targeted kill polls the
 * phases for up to 20 ms and shoots the first prepared worker it sees.
 * The phase may change between our read and the signal's arrival, so the
 * kills_by_phase split is approximate; it only reports how kills spread.
 *
 * Reproducibility: every choice here draws from r->rng, seeded from
 * --seed alone, in a fixed order (target?, random victim, a scan start
 * per try, then the next interval). With --target-pct 0 the seed fixes
 * every victim and interval. A targeted kill draws one number per 0.5 ms
 * try until it finds a prepared worker, which depends on timing, so with
 * targeting the later choices drift from run to run (as do the victims:
 * who is prepared at a given instant is timing too).
 *
 * It does not reap victims or fork replacements (fleet.c) and does not
 * start servers itself (server.c).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <kvring/proc.h>

#include "stress.h"

/* Pick a victim: a share of kills wait (up to 20 ms) for a worker that is
 * between prepare and commit; the others take any worker. */
static void kill_one(struct st_run *r)
{
	bool target = st_rnd_below(&r->rng, 100) < r->o.target_pct;
	unsigned victim = (unsigned)st_rnd_below(&r->rng, r->o.workers);
	uint32_t ph = PH_OTHER;

	for (int tries = 0; target && tries < 40; tries++) {
		unsigned start = (unsigned)st_rnd_below(&r->rng, r->o.workers);

		/* Scan from a random start so no slot is favoured. */
		for (unsigned k = 0; k < r->o.workers; k++) {
			unsigned i = (start + k) % r->o.workers;

			/* Relaxed: a hint, see st_results_phase(). */
			ph = atomic_load_explicit(&r->sh->res[i].phase,
						  memory_order_relaxed);
			if (r->wpid[i] > 0 && (ph == PH_STORE_PREPARED ||
					       ph == PH_RETRIEVE_PREPARED)) {
				victim = i;
				goto found;
			}
		}
		st_sleep_us(500);
	}
	/* Untargeted, or nobody was prepared within 20 ms: the random
	 * victim drawn above, wherever it is. Relaxed: a hint. */
	ph = atomic_load_explicit(&r->sh->res[victim].phase,
				  memory_order_relaxed);
found:
	/* The slot may be empty (its worker died and was not respawned).
	 * A worker stopped by --stop-every is left alone: its commit after
	 * the stop is what that test checks. */
	if (r->wpid[victim] <= 0 || ph == PH_STOPPED)
		return;
	if (kill(r->wpid[victim], SIGKILL) < 0)
		return;
	/* The phase read above may be a little stale; it is only used to
	 * report how the kills were spread. */
	r->wkilled[victim] = true;
	r->kills++;
	if (ph == PH_STORE_PREPARED)
		r->kills_store++;
	else if (ph == PH_RETRIEVE_PREPARED)
		r->kills_retrieve++;
	else
		r->kills_other++;
	/* A store-ahead worker holds a staged slot from its first one-key
	 * commit on, between stores too. Relaxed: a hint, like phase. */
	if (st_worker_ahead(&r->o, victim))
		r->kills_ahead++;
	if (atomic_load_explicit(&r->sh->res[victim].in_batch,
				 memory_order_relaxed))
		r->kills_batch++;
}

/* Whether @pid is in the stopped state ('T' in /proc/<pid>/stat). */
static bool proc_stopped(pid_t pid)
{
	char st;

	return kvr_proc_state(pid, &st) == 0 && st == 'T';
}

/*
 * --stop-every: a worker that stopped itself holding a transfer is
 * resumed --stop-ms after it stopped (longer than the server's
 * --xfer-ms, so its transfer must have been reclaimed meanwhile). Only a
 * process seen stopped is sent SIGCONT: one that announced the stop but
 * has not stopped yet would otherwise stop for good after it.
 */
void st_stopper_tick(struct st_run *r, uint64_t t_ns)
{
	uint64_t hold = (uint64_t)r->o.stop_ms * 1000000u, since;

	for (unsigned i = 0; r->o.stop_every && i < r->o.workers; i++) {
		/* Relaxed: hints; /proc says whether it really stopped. */
		if (r->wpid[i] <= 0 ||
		    atomic_load_explicit(&r->sh->res[i].phase,
					 memory_order_relaxed) != PH_STOPPED)
			continue;
		since = atomic_load_explicit(&r->sh->res[i].stop_ns,
					     memory_order_relaxed);
		if (t_ns - since >= hold && proc_stopped(r->wpid[i]))
			kill(r->wpid[i], SIGCONT);
	}
}

void st_killer_start(struct st_run *r)
{
	/* The first kills come one full period after the start. */
	r->next_kill_ns = r->t0_ns + (uint64_t)r->o.kill_every_ms * 1000000u;
	r->next_srv_kill_ns =
	    r->t0_ns + (uint64_t)r->o.kill_server_every_ms * 1000000u;
}

/*
 * Called from the parent's loop every ~2 ms, after reaping. A kill never
 * waits for the previous victim's replacement: the slot is simply empty
 * until fleet.c reaps and refills it, and kill_one() skips empty slots.
 */
void st_killer_tick(struct st_run *r, uint64_t t_ns)
{
	st_stopper_tick(r, t_ns);
	if (r->o.kill_every_ms && t_ns >= r->next_kill_ns) {
		kill_one(r);
		/* Jitter: the next kill comes after 0.5x .. 1.5x. */
		r->next_kill_ns =
		    t_ns + (uint64_t)r->o.kill_every_ms * 500000u +
		    st_rnd_below(&r->rng,
				 (uint64_t)r->o.kill_every_ms * 1000000u + 1);
	}
	if (r->o.kill_server && t_ns >= r->next_srv_kill_ns) {
		st_server_kill_restart(r);
		/* Counted from the restart, so a slow start-up does not
		 * bunch kills together. */
		r->next_srv_kill_ns =
		    kvr_clock_now_ns() +
		    (uint64_t)r->o.kill_server_every_ms * 1000000u;
	}
}
