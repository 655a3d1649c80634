/* SPDX-License-Identifier: MIT */
/*
 * fleet.c - the parent's side of the worker processes: forking a worker
 * into a slot, reaping every child that exits (workers and our server),
 * judging each death as expected or a crash, forking replacements into
 * the same slot, and the orderly stop at the end (flag, 15 s grace, then
 * SIGKILL counted as stuck).
 *
 * A slot is run by one process at a time: the replacement is forked only
 * after its predecessor was reaped and its mailboxes reset, which is what
 * makes every result counter single-writer (stress.h). Expected deaths
 * are exactly two: our SIGKILL of a worker we marked, and exit 0 after the
 * stop flag. Anything else (SIGSEGV, a sanitizer's exit, our server
 * exiting on its own) fails the run.
 *
 * It does not choose victims (killer.c) nor run workers (worker.c).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stress.h"

/*
 * Fork the next incarnation of @slot. Its PRNG seed mixes the run seed,
 * the slot and the generation, so that each incarnation runs its own
 * reproducible sequence instead of replaying its victim's.
 */
int st_fleet_spawn(struct st_run *r, unsigned slot)
{
	uint64_t seed = r->o.seed * 0x100000001b3ull ^
			((uint64_t)slot << 40 | r->wgen[slot]);
	pid_t pid;

	/* No buffered output may be duplicated into the child. */
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		st_worker_main(r->sh, &r->o, slot, st_rnd(&seed), r->nkeys);
	r->wpid[slot] = pid;
	r->wkilled[slot] = false;
	r->wgen[slot]++;
	return 0;
}

static int slot_of(const struct st_run *r, pid_t pid)
{
	for (unsigned i = 0; i < r->o.workers; i++)
		if (r->wpid[i] == pid)
			return (int)i;
	return -1;
}

static bool stopping(const struct st_run *r)
{
	/* Relaxed: only the parent writes stop, and this is the parent. */
	return atomic_load_explicit(&r->sh->stop, memory_order_relaxed) != 0;
}

void st_fleet_reap(struct st_run *r)
{
	pid_t pid;
	int st, slot;

	/*
	 * Expected deaths: a worker we SIGKILLed, a worker that exited 0
	 * after the stop flag, the server after st_server_kill_restart()
	 * (reaped there, so never seen here). Anything else -- a worker
	 * dying of SIGSEGV or a sanitizer report, the server exiting on its
	 * own -- is an invariant failure.
	 */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		if (pid == r->srv.pid) {
			r->srv.pid = 0;
			r->srv_crashed = true;
			fprintf(stderr,
				PROG ": kvringd (pid %d) died without being "
				     "killed: %s %d\n",
				(int)pid,
				WIFSIGNALED(st) ? "signal" : "exit status",
				WIFSIGNALED(st) ? WTERMSIG(st)
						: WEXITSTATUS(st));
			kvrd_log_tail(&r->srv, 20);
			continue;
		}
		slot = slot_of(r, pid);
		if (slot < 0)
			continue;
		r->wpid[slot] = 0;
		st_lease_cleanup(r->sh, r->o.workers, (unsigned)slot);
		/* Relaxed: no worker runs in this slot until we fork one,
		 * and fork() orders this store before the child starts. */
		atomic_store_explicit(&r->sh->res[slot].phase, PH_IDLE,
				      memory_order_relaxed);
		atomic_store_explicit(&r->sh->res[slot].in_batch, 0,
				      memory_order_relaxed);
		if (!(r->wkilled[slot] && WIFSIGNALED(st) &&
		      WTERMSIG(st) == SIGKILL) &&
		    !(WIFEXITED(st) && WEXITSTATUS(st) == 0 && stopping(r))) {
			r->worker_crashes++;
			fprintf(stderr,
				PROG ": worker %d (pid %d) died on its own: "
				     "%s %d\n",
				slot, (int)pid,
				WIFSIGNALED(st) ? "signal" : "exit status",
				WIFSIGNALED(st) ? WTERMSIG(st)
						: WEXITSTATUS(st));
		}
		if (!stopping(r) && st_fleet_spawn(r, (unsigned)slot) < 0)
			fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
	}
}

/*
 * Raise the stop flag and reap until every worker is gone. Each worker
 * finishes its current operation and closes its client, so the server
 * sees orderly disconnects; one that has not exited after 15 s is killed
 * and counted as stuck (a hang in the library or the server).
 */
void st_fleet_stop(struct st_run *r)
{
	uint64_t deadline;
	unsigned alive;

	/* Relaxed: a plain flag; nothing is published with it, and the
	 * results are read after waitpid(). */
	atomic_store_explicit(&r->sh->stop, 1, memory_order_relaxed);
	deadline = kvr_clock_now_ns() + 15000000000ull;
	for (;;) {
		st_fleet_reap(r);
		st_stopper_tick(
		    r, kvr_clock_now_ns()); /* stopped ones must finish */
		alive = 0;
		for (unsigned i = 0; i < r->o.workers; i++)
			alive += r->wpid[i] > 0;
		if (!alive)
			break;
		if (kvr_clock_now_ns() > deadline) {
			for (unsigned i = 0; i < r->o.workers; i++)
				if (r->wpid[i] > 0) {
					fprintf(stderr,
						PROG ": worker %u (pid %d) "
						     "stuck, killing it\n",
						i, (int)r->wpid[i]);
					r->workers_stuck++;
					r->wkilled[i] = true;
					kill(r->wpid[i], SIGKILL);
				}
			deadline = UINT64_MAX;
		}
		st_sleep_us(2000);
	}
}
