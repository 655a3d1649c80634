/* SPDX-License-Identifier: MIT */
/*
 * stress.h - what the modules of kvring-stress share, and nothing else:
 * the limits, the operation and phase enums, the blocks that live in the
 * one shared anonymous mapping (results, phases, lease mailboxes, the
 * recent-window hint ring), the parent's run state, the worker's private
 * state, and each module's entry points. Small hot helpers (the PRNG, the
 * clock, counter bumps) are static inline here because the chunk filler
 * calls the PRNG once per 8 bytes.
 *
 * It is private to tools/kvring-stress.c and the .c files beside it; nothing
 * outside the tool includes it, and it includes nothing of the server's
 * private state: the tool checks only what a worker or the inspector sees.
 * Module map (one responsibility each):
 *   keys.c     the key space: keys, sizes and bytes as functions of an id
 *   verify.c   expected hashes and the in-place check of a pinned slot
 *   ops.c      store, abort, retrieve and lookup, as one worker runs them
 *   batch.c    async batches published at once (kvr_submit_hold/flush)
 *   lease.c    pinned lookups, leases, and the cross-worker mailbox
 *   worker.c   a worker process: connect, op mix, reconnect, exit
 *   results.c  the shared mapping and the sum of every slot's results
 *   server.c   our private kvringd's arguments, kills and restarts (the
 *              starting and stopping itself is tools/kvrd/kvrd.c's)
 *   fleet.c    the parent's view of the workers: fork, reap, respawn, stop
 *   killer.c   the fault schedule: which worker dies when, server kills
 *   audit.c    the leak and accounting audit after the workers are gone
 *   report.c   progress line, verdict, text and JSON report
 */
#ifndef KVR_STRESS_H
#define KVR_STRESS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <kvring/clock.h>
#include <kvring/kvring.h>
#include <kvring/layout.h>
#include <kvring/segment.h>

#include "kvrd.h"

#define PROG   "kvring-stress"
#define SCHEMA 1 /* of the JSON report; bump when a key changes meaning */

#define EXIT_OK	   0
#define EXIT_FAIL  1
#define EXIT_USAGE 2

#define MAX_WORKERS  256
#define MAX_CHUNKS   16	  /* keys per request: 1..16 */
#define NERRNO	     160  /* errors counted by errno value */
#define RECENT	     1024 /* shared ring of recently stored windows */
#define MAX_SRV_ARGS 32

/* The shared blocks are touched from several processes at once. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shm atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shm atomics must be lock-free");

/* Operations, as counted in ops_by_type (report.c names them). */
enum st_op {
	OP_LOOKUP,	   /* lookup without pin */
	OP_LOOKUP_PIN,	   /* lookup with pin, then release */
	OP_STORE,	   /* prepare_store, fill, commit */
	OP_ABORT,	   /* prepare_store, poison, abort */
	OP_RETRIEVE,	   /* prepare_retrieve, verify, commit */
	OP_LEASE_RETRIEVE, /* lookup+pin, redeem own lease, verify, commit */
	OP_LEASE_SHARED,   /* redeem a lease another worker made */
	OP_BATCH,	   /* held async prepares, then held commits */
	OP_AHEAD_STORE,	   /* one-key store of a store-ahead worker */
	OP_N,
};

/*
 * Where a worker is, published for the parent's targeted kills. The two
 * PREPARED phases are the window the killer aims at: the server holds a
 * reservation (store) or pins (retrieve) for this worker's channel, and
 * only its disconnect cleanup can give them back.
 */
enum st_phase {
	PH_IDLE = 0,
	PH_CONNECT = 1,
	PH_STORE_PREPARED = 2,	  /* reserved, not committed */
	PH_RETRIEVE_PREPARED = 3, /* pinned, not committed */
	PH_OTHER = 4,
	PH_STOPPED = 5, /* stopped itself holding a transfer (--stop-every) */
};

/* Slot statuses of prepare_store answers (enum kvr_slot_status). */
#define NSLOT_ST 5

/*
 * struct st_wres_shm - one worker slot's results. A slot is run by one
 * process at a time (the parent reaps a victim before it forks the
 * replacement), so every counter has a single writer; relaxed atomics are
 * enough because the parent only needs each value untorn, and it reads the
 * final values after waitpid(), which orders everything the child did.
 *
 * Why shared memory at all: a worker dies by SIGKILL at any instruction,
 * so it never gets to report. Counting into a MAP_SHARED page as things
 * happen means the counts of a killed worker are already where the parent
 * reads them; only the operation in flight at the kill is lost, and that
 * one was not counted as done. Owned by the parent (results.c maps it
 * before the first fork and unmaps it at exit).
 */
struct st_wres_shm {
	_Atomic uint64_t ops[OP_N];
	_Atomic uint64_t verified_chunks;
	_Atomic uint64_t verified_bytes;
	_Atomic uint64_t corrupt_chunks;
	_Atomic uint64_t stored_chunks;
	_Atomic uint64_t stored_bytes;
	_Atomic uint64_t slot_st[NSLOT_ST];
	_Atomic uint64_t errors[NERRNO]; /* by -rc; [0]: out of range */
	_Atomic uint64_t reconnects;
	_Atomic uint64_t lease_short; /* redeemed fewer than looked up */
	/* enum st_phase. Written by the worker (and by the parent to reset
	 * a reaped slot, when no worker runs there), read by the killer. */
	_Atomic uint32_t phase;
	/* 1 while the worker is inside a held batch (batch.c), read by the
	 * killer to count kills there; same single writer as phase. */
	_Atomic uint32_t in_batch;
	/* --stop-every: when it stopped itself (CLOCK_MONOTONIC; the parent
	 * resumes it --stop-ms later), how often, and what its commits
	 * answered after a stop: KVR_ERR_EXPIRED (right), or success (the
	 * server did not reclaim the transfer: a failure). */
	_Atomic uint64_t stop_ns;
	_Atomic uint64_t stops;
	_Atomic uint64_t stop_expired;
	_Atomic uint64_t stop_not_expired;
	/* Of the stops, those after which the worker went on using its
	 * slots before its late commit: it finished its copy into a store's
	 * slots, or read a retrieve's slots again (the quarantine keeps both
	 * from any other worker's chunk). */
	_Atomic uint64_t stop_resumed;
	/* --checksum (verify.c): slots the library marked KVR_SLOT_CORRUPT
	 * whose bytes really were wrong (caught) or were right (false: a
	 * bug); chunks with wrong bytes that passed a check with every slot
	 * summed (missed: a bug); slots an explicit verify could not check
	 * (stored without a sum); and chunks a checksumming worker read and
	 * the checker matched. */
	_Atomic uint64_t sum_caught;
	_Atomic uint64_t sum_false;
	_Atomic uint64_t sum_missed;
	_Atomic uint64_t sum_unchecked;
	_Atomic uint64_t sum_verified;
	/* OP_BATCH: async requests submitted under a hold (batch.c). */
	_Atomic uint64_t batch_reqs;
	uint8_t pad[8];
};

/* struct st_offer - one lease offer: the lease, the first key of what it
 * pins (base), the keys asked (n) and the hits it pinned. */
struct st_offer {
	uint64_t lease;
	uint64_t base;
	uint32_t n;
	uint32_t hits;
};

/*
 * struct st_mailbox_shm - a lease offered by its maker for another worker
 * to redeem (lease.c has the protocol and its labels). state: 0 empty,
 * 1 being written by the maker, 2 full, 3 being taken (taker = slot of the
 * taker). The CAS on state is the lock; the plain offer is written only
 * by whoever moved state to 1 or 3, and handed over by the release store
 * of 2 or 0. One box per worker slot, indexed by the maker's slot.
 */
struct st_mailbox_shm {
	_Atomic uint32_t state;
	_Atomic uint32_t taker;
	struct st_offer offer;
};

/*
 * struct st_shared_shm - everything parent and workers share: one
 * anonymous MAP_SHARED mapping made by the parent before the first fork,
 * inherited by every worker, unmapped by the parent at the end. No
 * pointers inside: every process sees it at the same address anyway, but
 * nothing here depends on that.
 */
struct st_shared_shm {
	_Atomic uint32_t stop;	    /* parent -> workers: finish and exit */
	_Atomic uint64_t ops_total; /* for --ops */
	_Atomic uint64_t recent_pos;
	_Atomic uint64_t recent[RECENT]; /* base << 5 | n, 0 = empty */
	struct st_mailbox_shm mbox[MAX_WORKERS];
	struct st_wres_shm res[MAX_WORKERS];
};

/* --checksum: KVR_CHECKSUM_OFF/_ON/_VERIFY for every worker, or MIXED
 * (the default): the worker slots cycle verify, on, off, verify, so that
 * checksumming readers meet chunks stored with and without sums. */
#define ST_SUM_MIXED 4u

/* --store-ahead: $KVRING_STORE_AHEAD of every worker, or MIXED (the
 * default): odd worker slots on, even ones off. */
#define ST_AHEAD_OFF   0u
#define ST_AHEAD_ON    1u
#define ST_AHEAD_MIXED 2u

/* Parsed command line; lives in the parent's struct st_run for the whole
 * run, and every forked worker inherits a copy. */
struct st_opts {
	const char *socket;   /* --socket: attach instead of starting one */
	const char *kvringd;  /* --kvringd */
	const char *name;     /* --name: segment base (attach mode audit) */
	const char *log_path; /* --server-log */
	const char *srv_args[MAX_SRV_ARGS];
	unsigned nsrv_args;
	unsigned workers;
	double seconds;
	uint64_t max_ops;
	unsigned kill_every_ms;
	bool kill_server;
	unsigned kill_server_every_ms;
	uint64_t pool_bytes;
	uint64_t keyspace_bytes;
	uint64_t chunk_min, chunk_max;
	uint64_t seed;
	bool json, copy, no_prefault, keep_log, quiet;
	unsigned target_pct;	  /* share of kills aimed at prepared workers */
	unsigned inject_corrupt;  /* self-test: damage every Nth store */
	unsigned stop_every;	  /* 1 in N prepared transfers SIGSTOPs */
	unsigned stop_ms;	  /* how long the parent leaves it stopped */
	unsigned xfer_ms;	  /* --xfer-ms given to our server */
	unsigned checksum;	  /* KVR_CHECKSUM_* or ST_SUM_MIXED */
	unsigned store_ahead;	  /* ST_AHEAD_* */
	const char *latency_plot; /* --latency-plot DIR (latplot.c) */
	const char *disk;	  /* --disk DIR: our server's disk tier */
};

/*
 * struct st_run - the parent's state for the whole run; allocated by
 * main() and freed at its end. Workers inherit a copy at fork but use only
 * o, sh and nkeys from it (through st_worker_main()'s arguments).
 */
struct st_run {
	struct st_opts o;
	struct st_shared_shm *sh;
	uint64_t nkeys;
	pid_t wpid[MAX_WORKERS];    /* 0: slot empty (reaped, not respawned) */
	uint32_t wgen[MAX_WORKERS]; /* incarnations forked into the slot */
	bool wkilled[MAX_WORKERS];  /* we SIGKILLed it: that death is ours */
	/* The server: ours (srv.pid while it runs, srv.log_path set) or the
	 * one --socket names (only sock, name, ctl_name set). srv.hdr is the
	 * read-only control segment mapping of the current one, if mapped. */
	struct kvrd srv;
	struct st_latplot *lp; /* --latency-plot state, NULL without it */
	uint64_t rng;	       /* the kill schedule's PRNG (killer.c) */
	uint64_t next_kill_ns, next_srv_kill_ns;
	uint64_t kills, kills_store, kills_retrieve, kills_other;
	uint64_t kills_ahead; /* victims connected with store-ahead */
	uint64_t kills_batch; /* victims inside a held batch */
	uint64_t srv_kills, srv_restarts;
	uint64_t worker_crashes, workers_stuck;
	bool srv_crashed;
	int srv_exit; /* final exit status of our server, -1 unknown */
	uint64_t t0_ns;
	double elapsed_s;
};

/*
 * struct st_worker - one worker process's private state, on the stack of
 * st_worker_main() in the child; dies with the process.
 */
struct st_worker {
	struct st_shared_shm *sh;
	struct st_wres_shm *res; /* &sh->res[slot] */
	const struct st_opts *o;
	unsigned slot;
	uint64_t rng;
	uint64_t nkeys;
	uint64_t *exp_hash;	/* nkeys entries, 0 = not computed yet */
	unsigned char *scratch; /* chunk_max bytes, for expected hashes */
	struct kvr_client *c;
	uint64_t stores;     /* committed by this process */
	uint32_t sum;	     /* this slot's KVR_CHECKSUM_* (st_worker_sum) */
	bool ahead;	     /* connected with $KVRING_STORE_AHEAD=1 */
	uint64_t ahead_next; /* st_op_pick_ahead()'s cursor */
};

/* Per-run totals: the sum of every slot's struct st_wres_shm. */
struct st_totals {
	uint64_t ops[OP_N], ops_total;
	uint64_t verified_chunks, verified_bytes, corrupt, stored_chunks,
	    stored_bytes, slot_st[NSLOT_ST], errors[NERRNO], reconnects,
	    lease_short, stops, stop_expired, stop_not_expired, stop_resumed;
	uint64_t sum_caught, sum_false, sum_missed, sum_unchecked, sum_verified;
	uint64_t batch_reqs;
};

/* What the leak audit saw (audit.c fills it, report.c judges it). */
struct st_audit {
	bool have_ctl, have_stats, workers_gone;
	struct kvr_gstats_shm g; /* plain copy (atomics read one by one) */
	uint64_t quar_bytes;	 /* the quarantine's bytes (abi 5.3) */
	uint64_t pool_bytes;
	/* The disk tier's (abi 5.4): chunks written and read through,
	 * records that failed a check, writes dropped. */
	uint64_t disk_writes, disk_reads, disk_corrupt, disk_dropped;
	struct kvr_stats_wire w;
	bool accounting_ok;
	char why[512];
};

/* One field of the audit's private copy of the global counters. Relaxed:
 * the copy is ours alone; the type is atomic only because it mirrors the
 * segment's struct. */
#define ST_AUD(a, f) atomic_load_explicit(&(a)->g.f, memory_order_relaxed)

/* ---- Small helpers (inline: the PRNG is on the chunk fill path) ---- */

/* Sleep @us microseconds, resuming after signals (Ctrl-C only sets a
 * flag, the loops check it). */
static inline void st_sleep_us(uint64_t us)
{
	struct timespec ts = {(time_t)(us / 1000000),
			      (long)(us % 1000000) * 1000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* splitmix64: the run's only PRNG (seeded, so schedules reproduce). */
static inline uint64_t st_rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A value in [0, n); 0 when n is 0. The modulo bias is irrelevant here. */
static inline uint64_t st_rnd_below(uint64_t *s, uint64_t n)
{
	return n ? st_rnd(s) % n : 0;
}

/* Add @v to one of our slot's result counters. */
static inline void st_bump(_Atomic uint64_t *a, uint64_t v)
{
	/* Relaxed: single writer per slot, see struct st_wres_shm. */
	atomic_fetch_add_explicit(a, v, memory_order_relaxed);
}

/* ---- keys.c: the key space ---- */

/* Fix the run's key seed and chunk size range; call once in the parent
 * before the first fork, so every worker derives the same keys. */
void st_keys_setup(uint64_t seed, uint64_t chunk_min, uint64_t chunk_max);
/* The 128-bit key of key id @id. */
struct kvr_key st_keys_key(uint64_t id);
/* The chunk size of key id @id, in [chunk_min, chunk_max]; every id that
 * is a multiple of ST_FIXED_EVERY has the same one (store-ahead's staged
 * slots fit only the size they were made for). */
#define ST_FIXED_EVERY 8u
uint64_t st_keys_size(uint64_t id);
/* Write key @id's content into @len bytes at @p (any @len). */
void st_keys_fill(void *p, uint64_t len, uint64_t id);
/* Keys and (if @sz) sizes of the window [base, base + n). */
void st_keys_window(uint64_t base, uint32_t n, struct kvr_key *k, uint64_t *sz);
/* The connection options every stress client uses: its namespace, and
 * @socket. Everything else stays 0 (the caller sets transport/prefault). */
void st_keys_client_opts(struct kvr_client_opts *co, const char *socket);

/* ---- verify.c: checking what the server hands out ---- */

/* What st_verify_slot() found. */
enum st_vres {
	ST_V_OK,     /* the right bytes, and the library agreed */
	ST_V_BAD,    /* wrong bytes (or status, length), library said OK */
	ST_V_CAUGHT, /* wrong bytes, and the library said CORRUPT */
	ST_V_FALSE,  /* the library said CORRUPT, the bytes are right */
};
/* Check slot @s, which must hold key @id, in place; count it verified or
 * corrupt (printing the mismatch). @how names the operation. A slot the
 * library marked KVR_SLOT_CORRUPT (checksums) is hashed all the same, to
 * tell a caught damage from a false alarm. */
enum st_vres st_verify_slot(struct st_worker *w, const struct kvr_slot *s,
			    uint64_t id, const char *how);
/* After the slots of a retrieve were checked: @bad of them had wrong
 * bytes the library did not flag. With checksums on and every slot of
 * the transfer summed (@unchecked 0; UINT32_MAX: not known yet, ask the
 * library), that is a missed damage: counted, and printed. */
void st_verify_missed(struct st_worker *w, struct kvr_xfer *x, uint32_t bad,
		      uint32_t unchecked, const char *how);

/* ---- ops.c: the plain operations (0 done and counted, or -errno) ---- */

int st_op_store(struct st_worker *w, bool abort_it);
int st_op_retrieve(struct st_worker *w);
int st_op_lookup(struct st_worker *w);
/* Pick a window: with @recent one some worker committed lately. */
void st_op_pick_window(struct st_worker *w, bool recent, uint64_t *base,
		       uint32_t *n);
/* Check the slots of a prepared retrieve of keys [base, base + n) (every
 * byte, and the checksums the way this worker's mode asks). */
void st_op_check_retrieve(struct st_worker *w, struct kvr_xfer *x,
			  uint64_t base, uint32_t n, const char *how);
/* --stop-every: one call in N SIGSTOPs this worker (the parent resumes
 * it --stop-ms later, past the transfer deadline); whether it did. */
bool st_op_maybe_stop(struct st_worker *w);
/* Store-ahead workers: the window of a one-key store of a fixed-size key
 * (keys.c), which a staged slot fits. */
void st_op_pick_ahead(struct st_worker *w, uint64_t *base, uint32_t *n);
/* Verify and commit a prepared retrieve of keys [base, base + n). */
int st_op_finish_retrieve(struct st_worker *w, struct kvr_xfer *x,
			  uint64_t base, uint32_t n, const char *how);

/* ---- batch.c: held async batches ---- */

/* Submit 2..16 prepares (stores and retrieves of windows) under one
 * hold, flush, check and fill what came back, then the commits under
 * another hold. 0, or the first fatal -errno. */
int st_batch_op(struct st_worker *w);

/* ---- lease.c: leases and the mailbox ---- */

/* Lookup with pin, then release, redeem or offer the lease. */
int st_lease_op(struct st_worker *w);
/* Redeem a lease another worker offered; 1 when none was offered. */
int st_lease_op_shared(struct st_worker *w);
/* Parent, after reaping the worker of @slot: free the mailboxes it left
 * half-done (its own box, and any box it was taking from). */
void st_lease_cleanup(struct st_shared_shm *sh, unsigned nworkers,
		      unsigned slot);

/* ---- worker.c: one worker process ---- */

/* Run worker @slot until told to stop; never returns (_exit). */
_Noreturn void st_worker_main(struct st_shared_shm *sh, const struct st_opts *o,
			      unsigned slot, uint64_t seed, uint64_t nkeys);
/* The KVR_CHECKSUM_* mode of worker slot @slot under @o->checksum. */
uint32_t st_worker_sum(const struct st_opts *o, unsigned slot);
/* Whether worker slot @slot uses store-ahead under @o->store_ahead. */
bool st_worker_ahead(const struct st_opts *o, unsigned slot);

/* ---- results.c: the shared mapping and its totals ---- */

/* Map the shared block (zeroed). Return: 0 or -errno; *out untouched on
 * failure. */
int st_results_map(struct st_shared_shm **out);
/* Unmap it; accepts NULL. */
void st_results_unmap(struct st_shared_shm *sh);
/* Sum the results of the first @nworkers slots into @t. */
void st_results_sum(const struct st_shared_shm *sh, unsigned nworkers,
		    struct st_totals *t);
/* A worker publishes its phase for the killer. */
void st_results_phase(struct st_worker *w, enum st_phase ph);
/* A worker counts a failed call by errno in its results. */
void st_results_err(struct st_worker *w, int rc);
/* Errors after which this client is broken: reconnect. Anything else is a
 * per-request answer (no room, unknown lease, ...) on a healthy channel. */
bool st_results_fatal(int rc);

/* ---- server.c: our private kvringd and its control segment ---- */

/* Pick socket and segment names; with no --socket, start our server.
 * Return: 0 or -errno (the reason was printed). */
int st_server_setup(struct st_run *r);
/* SIGKILL our server and restart it at once (counts both; a failed
 * restart sets srv_crashed, which ends the run). */
void st_server_kill_restart(struct st_run *r);
/* SIGTERM our server and record its exit status in srv_exit. */
void st_server_stop(struct st_run *r);

/* ---- latplot.c: --latency-plot DIR ---- */
struct st_latplot;
/* Allocate the sampler; 0 or -ENOMEM. */
int st_latplot_init(struct st_run *r);
/* Sample the server's histograms if a second has passed (no-op without
 * --latency-plot). */
void st_latplot_tick(struct st_run *r, uint64_t now_ns);
/* Write the data, the gnuplot script and (gnuplot permitting) the PNGs;
 * 0, or -errno (message printed). A missing gnuplot is a note only. */
int st_latplot_write(struct st_run *r);
void st_latplot_free(struct st_run *r);

/* ---- fleet.c: the parent's worker processes ---- */

/* Fork the worker of @slot (next incarnation). Return: 0 or -errno. */
int st_fleet_spawn(struct st_run *r, unsigned slot);
/* Reap every exited child; judge the death; respawn unless stopping. */
void st_fleet_reap(struct st_run *r);
/* Tell the workers to stop and wait for them (15 s, then SIGKILL). */
void st_fleet_stop(struct st_run *r);

/* ---- killer.c: the fault schedule ---- */

/* Schedule the first worker and server kills relative to r->t0_ns. */
void st_killer_start(struct st_run *r);
/* At time @t_ns: kill a worker and/or the server if one is due. */
/* Resume workers stopped by --stop-every once --stop-ms passed. */
void st_stopper_tick(struct st_run *r, uint64_t t_ns);
void st_killer_tick(struct st_run *r, uint64_t t_ns);

/* ---- audit.c: the leak audit ---- */

/* After every worker of ours is gone: fill @a (a->why on a problem). */
void st_audit_run(struct st_run *r, struct st_audit *a);

/* ---- report.c: what the run prints ---- */

/* The progress line on stderr (a terminal); @final ends it. */
void st_report_progress(const struct st_run *r, bool final);
/* Judge every invariant, print the report; Return: EXIT_OK or EXIT_FAIL. */
int st_report_print(const struct st_run *r, const struct st_audit *a);

#endif /* KVR_STRESS_H */
