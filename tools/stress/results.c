/* SPDX-License-Identifier: MIT */
/*
 * results.c - the block parent and workers share (struct st_shared_shm in
 * stress.h): the stop flag, the --ops budget, the recent-window hints, the
 * lease mailboxes, and per worker slot its phase and result counters. This
 * file maps it and sums the per-slot results into run totals.
 *
 * Why one shared anonymous mapping: workers are SIGKILLed at arbitrary
 * instructions and cannot report on their way out, so they count into
 * MAP_SHARED memory as they go, and the counts of a killed worker are
 * already in the parent's view. The mapping is anonymous (inherited over
 * fork, never named), so nothing is left behind in /dev/shm whatever
 * happens to the run. Slots are reused across incarnations: a replacement
 * adds to its victim's counts, which is what per-run totals want.
 *
 * The workers' side of it is here too: their phase, their error counts,
 * and which errors break a connection (ops.c, lease.c, batch.c and
 * worker.c call them, so they sit below all four). It judges no counter
 * (report.c).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "stress.h"

int st_results_map(struct st_shared_shm **out)
{
	/* Anonymous mappings are zero-filled: every counter starts at 0,
	 * every phase PH_IDLE, every mailbox empty, stop clear. */
	void *p =
	    mmap(NULL, sizeof(struct st_shared_shm), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

void st_results_unmap(struct st_shared_shm *sh)
{
	if (sh)
		munmap(sh, sizeof(*sh));
}

/*
 * Sum the first @nworkers slots. Called while workers run (the progress
 * line: each value is untorn but the sum is not a snapshot) and after the
 * last worker was reaped (the report: waitpid() ordered every worker's
 * writes before these loads, so the sum is exact).
 */
void st_results_sum(const struct st_shared_shm *sh, unsigned nworkers,
		    struct st_totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned s = 0; s < nworkers; s++) {
		const struct st_wres_shm *w = &sh->res[s];

/* Relaxed: single-writer counters, see struct st_wres_shm. */
#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)
		for (int i = 0; i < OP_N; i++) {
			t->ops[i] += LD(w->ops[i]);
			t->ops_total += LD(w->ops[i]);
		}
		t->verified_chunks += LD(w->verified_chunks);
		t->verified_bytes += LD(w->verified_bytes);
		t->corrupt += LD(w->corrupt_chunks);
		t->stored_chunks += LD(w->stored_chunks);
		t->stored_bytes += LD(w->stored_bytes);
		for (int i = 0; i < NSLOT_ST; i++)
			t->slot_st[i] += LD(w->slot_st[i]);
		for (int i = 0; i < NERRNO; i++)
			t->errors[i] += LD(w->errors[i]);
		t->reconnects += LD(w->reconnects);
		t->lease_short += LD(w->lease_short);
		t->stops += LD(w->stops);
		t->stop_expired += LD(w->stop_expired);
		t->stop_not_expired += LD(w->stop_not_expired);
		t->stop_resumed += LD(w->stop_resumed);
		t->sum_caught += LD(w->sum_caught);
		t->sum_false += LD(w->sum_false);
		t->sum_missed += LD(w->sum_missed);
		t->sum_unchecked += LD(w->sum_unchecked);
		t->sum_verified += LD(w->sum_verified);
		t->batch_reqs += LD(w->batch_reqs);
#undef LD
	}
}

void st_results_phase(struct st_worker *w, enum st_phase ph)
{
	/* Relaxed: only a hint for the parent's choice of victim; a stale
	 * read just makes one kill land elsewhere or be reported under
	 * another phase. Nothing is published with it. */
	atomic_store_explicit(&w->res->phase, (uint32_t)ph,
			      memory_order_relaxed);
}

void st_results_err(struct st_worker *w, int rc)
{
	unsigned e = (unsigned)-rc;

	/* errno values beyond the table share bucket 0 ("other"). */
	st_bump(&w->res->errors[e < NERRNO ? e : 0], 1);
}

bool st_results_fatal(int rc)
{
	switch (-rc) {
	case EOWNERDEAD:
	case ETIMEDOUT:
	case EPROTO:
	case EPIPE:
	case ECONNRESET:
	case ESHUTDOWN:
	case ENOTCONN:
	case ECONNREFUSED:
	case EBADMSG:
		return true;
	default:
		return false;
	}
}
