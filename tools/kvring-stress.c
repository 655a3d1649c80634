/* SPDX-License-Identifier: MIT */
/*
 * kvring-stress: proves kvring's reliability promise under load and under
 * fault injection. It starts its own kvringd (or attaches to a running one
 * with --socket), forks N worker processes that run a random mix of lookup,
 * store, abort, retrieve and lease operations over a key space several
 * times larger than the pool (so eviction runs all the time), SIGKILLs
 * workers at random moments -- a share of them deliberately between the
 * prepare and the commit of a store or a retrieve -- and optionally the
 * server itself, and checks three things:
 *   - no corrupt byte is ever returned: every chunk's bytes are a pure
 *     function of its key, and every retrieved chunk is hashed (XXH3) in
 *     place while pinned and compared with the expected hash;
 *   - nothing leaks: after the last worker is gone, the server's control
 *     segment must show 0 reserved bytes, 0 pins, 0 leases, 0 transfers,
 *     and a pool whose used bytes are exactly its committed bytes;
 *   - nothing falls over: the server never dies unless we killed it, and
 *     no worker dies of anything but our SIGKILL.
 * Stores that are aborted, or killed before their commit, first fill their
 * slots with poison, so that if such a reservation were ever published a
 * later retrieve would see the poison and count it as corrupt.
 *
 * Per-worker results live in a shared anonymous mapping updated with
 * atomics as they happen, so the counts of a SIGKILLed worker survive it.
 * The results are printed as key=value lines, or with --json as one object
 * (docs/reliability.md lists the keys). Exit status: 0 every invariant
 * held, 1 an invariant failed or the run could not be set up, 2 usage.
 *
 * This file deliberately does not reach into the server's private state:
 * everything it checks is what a worker or the inspector can see.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include <kvring/error.h>
#include <kvring/kvring.h>
#include <kvring/layout.h>
#include <kvring/segment.h>

#ifndef KVR_VERSION
#define KVR_VERSION "0.1.0"
#endif

#define PROG   "kvring-stress"
#define SCHEMA 1

#define EXIT_OK	     0
#define EXIT_FAIL    1
#define EXIT_USAGE   2

#define MAX_WORKERS   256
#define MAX_CHUNKS    16	 /* keys per request: 1..16 */
#define NERRNO	      160	 /* errors counted by errno value */
#define RECENT	      1024	 /* shared ring of recently stored windows */
#define MAX_SRV_ARGS  32

/* Operations, as counted in ops_by_type. */
enum st_op {
	OP_LOOKUP,	   /* lookup without pin */
	OP_LOOKUP_PIN,	   /* lookup with pin, then release */
	OP_STORE,	   /* prepare_store, fill, commit */
	OP_ABORT,	   /* prepare_store, poison, abort */
	OP_RETRIEVE,	   /* prepare_retrieve, verify, commit */
	OP_LEASE_RETRIEVE, /* lookup+pin, redeem own lease, verify, commit */
	OP_LEASE_SHARED,   /* redeem a lease another worker made */
	OP_N,
};
static const char *const op_names[OP_N] = {
	"lookup", "lookup_pin", "store", "abort",
	"retrieve", "lease_retrieve", "lease_shared",
};

/* Where a worker is, published for the parent's targeted kills. */
enum st_phase {
	PH_IDLE = 0,
	PH_CONNECT = 1,
	PH_STORE_PREPARED = 2,	  /* reserved, not committed */
	PH_RETRIEVE_PREPARED = 3, /* pinned, not committed */
	PH_OTHER = 4,
};

/* Slot statuses of prepare_store answers (enum kvr_slot_status). */
#define NSLOT_ST 5
static const char *const slot_st_names[NSLOT_ST] = {
	"ok", "exists", "noroom", "busy", "invalid",
};

/*
 * struct st_wres_shm - one worker slot's results. A slot is run by one
 * process at a time (the parent reaps a victim before it forks the
 * replacement), so every counter has a single writer; relaxed atomics are
 * enough because the parent only needs each value untorn, and it reads the
 * final values after waitpid(), which orders everything the child did.
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
	_Atomic uint64_t lease_short;	 /* redeemed fewer than looked up */
	_Atomic uint32_t phase;		 /* enum st_phase */
	uint8_t pad[60];
};

/*
 * A lease offered by its maker for another worker to redeem. state: 0
 * empty, 1 being written by the maker, 2 full, 3 being taken (taker = slot
 * of the taker). The CAS on state is the lock; fields are written only by
 * whoever moved state to 1 or 3, and published by the release store of 2
 * or 0 (acquire CAS partners).
 */
struct st_mailbox_shm {
	_Atomic uint32_t state;
	_Atomic uint32_t taker;
	uint64_t lease;
	uint64_t base;
	uint32_t n;
	uint32_t hits;
};

/* Everything parent and workers share; one anonymous MAP_SHARED mapping. */
struct st_shared_shm {
	_Atomic uint32_t stop;	    /* parent -> workers: finish and exit */
	_Atomic uint64_t ops_total; /* for --ops */
	_Atomic uint64_t recent_pos;
	_Atomic uint64_t recent[RECENT]; /* base << 5 | n, 0 = empty */
	struct st_mailbox_shm mbox[MAX_WORKERS];
	struct st_wres_shm res[MAX_WORKERS];
};

/* Parsed command line; lives in main()'s frame for the whole run. */
struct opts {
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
	unsigned target_pct; /* share of kills aimed at prepared workers */
	unsigned inject_corrupt; /* self-test: damage every Nth store */
};

/* Parent-side run state. */
struct run {
	struct opts o;
	struct st_shared_shm *sh;
	uint64_t nkeys;
	pid_t wpid[MAX_WORKERS];
	uint32_t wgen[MAX_WORKERS];
	bool wkilled[MAX_WORKERS];
	pid_t srv_pid;	      /* 0: not ours or not running */
	bool srv_killed;      /* we SIGKILLed it: reaping it is expected */
	char sock[108];
	char name[64];
	char log_path[160];
	char own_log[160];
	/* Control segment mapping (read-only) of the current server. */
	struct kvr_seg ctl;
	const struct kvr_ctl_hdr_shm *hdr;
	uint64_t rng;
	uint64_t kills, kills_store, kills_retrieve, kills_other;
	uint64_t srv_kills, srv_restarts;
	uint64_t worker_crashes, workers_stuck;
	bool srv_crashed;
	int srv_exit; /* final exit status of our server, -1 unknown */
	uint64_t t0_ns;
	double elapsed_s;
};

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	g_interrupted = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000),
			       (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* splitmix64: the run's only PRNG (seeded, so schedules reproduce). */
static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

/* ==== Chunk contents: a pure function of (run seed, key id) ==== */

/* Seed of the key space; every worker derives the same keys from it. */
static uint64_t g_key_seed;
static uint64_t g_chunk_min, g_chunk_max;

static struct kvr_key key_of(uint64_t id)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(&id, sizeof(id), g_key_seed);
	struct kvr_key k = { .lo = h.low64, .hi = h.high64 };

	return k;
}

static uint64_t size_of(uint64_t id)
{
	uint64_t h = XXH3_64bits_withSeed(&id, sizeof(id), ~g_key_seed);

	return g_chunk_min + h % (g_chunk_max - g_chunk_min + 1);
}

/* Fill @len bytes at @p with key @id's content: the 16 key bytes, then a
 * splitmix64 stream seeded by the key. */
static void fill_chunk(void *p, uint64_t len, uint64_t id)
{
	struct kvr_key k = key_of(id);
	uint64_t s = k.lo ^ (k.hi << 17 | k.hi >> 47);
	unsigned char *b = p;
	uint64_t i = 0, w;

	memcpy(b, &k, len < sizeof(k) ? len : sizeof(k));
	i = len < sizeof(k) ? len : sizeof(k);
	for (; i + 8 <= len; i += 8) {
		w = rnd(&s);
		memcpy(b + i, &w, 8);
	}
	if (i < len) {
		w = rnd(&s);
		memcpy(b + i, &w, len - i);
	}
}

/* ==== Worker process ==== */

/* Per-process worker state (private memory of one worker). */
struct worker {
	struct st_shared_shm *sh;
	struct st_wres_shm *res;
	const struct opts *o;
	unsigned slot;
	uint64_t rng;
	uint64_t nkeys;
	uint64_t *exp_hash; /* nkeys entries, 0 = not computed yet */
	unsigned char *scratch;
	struct kvr_client *c;
	uint64_t stores; /* committed by this process */
};

static void bump(_Atomic uint64_t *a, uint64_t v)
{
	/* Relaxed: single writer per slot, see struct st_wres_shm. */
	atomic_fetch_add_explicit(a, v, memory_order_relaxed);
}

static void set_phase(struct worker *w, enum st_phase ph)
{
	/* Relaxed: only a hint for the parent's choice of victim. */
	atomic_store_explicit(&w->res->phase, (uint32_t)ph,
			      memory_order_relaxed);
}

static void count_err(struct worker *w, int rc)
{
	unsigned e = (unsigned)-rc;

	bump(&w->res->errors[e < NERRNO ? e : 0], 1);
}

/* Errors after which this client is broken: reconnect. */
static bool conn_fatal(int rc)
{
	switch (-rc) {
	case EOWNERDEAD: case ETIMEDOUT: case EPROTO: case EPIPE:
	case ECONNRESET: case ESHUTDOWN: case ENOTCONN: case ECONNREFUSED:
	case EBADMSG:
		return true;
	default:
		return false;
	}
}

/* The expected XXH3 of key @id's chunk, computed once per process from
 * a freshly generated copy (never from pool memory) and cached. */
static uint64_t expected_hash(struct worker *w, uint64_t id)
{
	uint64_t h = w->exp_hash[id], len;

	if (h)
		return h;
	len = size_of(id);
	fill_chunk(w->scratch, len, id);
	h = XXH3_64bits(w->scratch, len);
	w->exp_hash[id] = h;
	return h;
}

/* Verify slot @s that must hold key @id; counts and prints a mismatch. */
static void verify_slot(struct worker *w, const struct kvr_slot *s,
			uint64_t id, const char *how)
{
	uint64_t want_len = size_of(id), want, got;
	struct kvr_key k;

	if (s->status != KVR_SLOT_OK || s->len != want_len || !s->ptr) {
		k = key_of(id);
		fprintf(stderr,
			PROG ": CORRUPT %s key id %" PRIu64 " (%016" PRIx64
			"%016" PRIx64 "): slot status %d len %" PRIu64
			", expected status 0 len %" PRIu64 "\n",
			how, id, k.hi, k.lo, s->status, s->len, want_len);
		bump(&w->res->corrupt_chunks, 1);
		return;
	}
	want = expected_hash(w, id);
	/* Hashed in place: the slot is pinned by our transfer, so nobody
	 * may write it now; a torn or reused slot shows up here. */
	got = XXH3_64bits(s->ptr, s->len);
	if (got != want) {
		k = key_of(id);
		fprintf(stderr,
			PROG ": CORRUPT %s key id %" PRIu64 " (%016" PRIx64
			"%016" PRIx64 ") len %" PRIu64 " off %" PRIu64
			": expected xxh3 %016" PRIx64 ", got %016" PRIx64 "\n",
			how, id, k.hi, k.lo, s->len, s->off, want, got);
		bump(&w->res->corrupt_chunks, 1);
		return;
	}
	bump(&w->res->verified_chunks, 1);
	bump(&w->res->verified_bytes, s->len);
}

/* Pause in a prepared phase now and then, so that the parent's targeted
 * kills find workers there. */
static void maybe_linger(struct worker *w)
{
	if (rnd_below(&w->rng, 8) == 0)
		sleep_us(500 + rnd_below(&w->rng, 2500));
}

/* A window of 1..16 consecutive key ids: with @recent, one that some
 * worker committed lately (so a retrieve likely hits), else random. */
static void pick_window(struct worker *w, bool recent, uint64_t *base,
			uint32_t *n)
{
	uint64_t e, pos;

	if (recent) {
		/* Relaxed: any entry is a valid window; staleness is fine. */
		pos = atomic_load_explicit(&w->sh->recent_pos,
					   memory_order_relaxed);
		if (pos) {
			e = atomic_load_explicit(
				&w->sh->recent[rnd_below(&w->rng,
							 pos < RECENT ? pos
								      : RECENT)],
				memory_order_relaxed);
			if (e) {
				*base = e >> 5;
				*n = (uint32_t)(e & 31);
				return;
			}
		}
	}
	*n = 1 + (uint32_t)rnd_below(&w->rng, MAX_CHUNKS);
	*base = rnd_below(&w->rng, w->nkeys - *n + 1);
}

static void keys_of(uint64_t base, uint32_t n, struct kvr_key *k,
		    uint64_t *sz)
{
	for (uint32_t i = 0; i < n; i++) {
		k[i] = key_of(base + i);
		if (sz)
			sz[i] = size_of(base + i);
	}
}

static int op_store(struct worker *w, bool abort_it)
{
	struct kvr_key k[MAX_CHUNKS];
	uint64_t sz[MAX_CHUNKS], base, pos, nok = 0, bytes = 0;
	struct kvr_xfer x = { 0 };
	bool linger = false;
	uint32_t n;
	int rc;

	pick_window(w, false, &base, &n);
	keys_of(base, n, k, sz);
	rc = kvr_prepare_store(w->c, k, sz, n, &x);
	if (rc < 0)
		return rc;
	set_phase(w, PH_STORE_PREPARED);
	if (!abort_it && rnd_below(&w->rng, 8) == 0)
		linger = true;
	for (uint32_t i = 0; i < x.nslots; i++) {
		const struct kvr_slot *s = &x.slots[i];
		int st = s->status;

		bump(&w->res->slot_st[st >= 0 && st < NSLOT_ST ? st : 4], 1);
		if (st != KVR_SLOT_OK)
			continue;
		/* Poison first when this store will be aborted or may be
		 * killed while it lingers: published poison is corruption. */
		if (abort_it || linger)
			memset(s->ptr, 0xa5, s->len);
		else
			fill_chunk(s->ptr, s->len, base + i);
	}
	if (abort_it) {
		maybe_linger(w);
		rc = kvr_abort_store(w->c, &x);
		set_phase(w, PH_OTHER);
		if (rc == 0)
			bump(&w->res->ops[OP_ABORT], 1);
		return rc;
	}
	if (linger) {
		sleep_us(500 + rnd_below(&w->rng, 2500));
		for (uint32_t i = 0; i < x.nslots; i++)
			if (x.slots[i].status == KVR_SLOT_OK)
				fill_chunk(x.slots[i].ptr, x.slots[i].len,
					   base + i);
	}
	/* Self-test of the checker: commit a damaged chunk on purpose. */
	if (w->o->inject_corrupt && w->slot == 0 &&
	    ++w->stores % w->o->inject_corrupt == 0)
		for (uint32_t i = 0; i < x.nslots; i++)
			if (x.slots[i].status == KVR_SLOT_OK) {
				((unsigned char *)x.slots[i].ptr)[x.slots[i].len / 2] ^= 1;
				break;
			}
	/* Counted before the commit: it frees the slot array. */
	for (uint32_t i = 0; i < x.nslots; i++)
		if (x.slots[i].status == KVR_SLOT_OK) {
			nok++;
			bytes += x.slots[i].len;
		}
	rc = kvr_commit_store(w->c, &x);
	set_phase(w, PH_OTHER);
	if (rc < 0)
		return rc;
	bump(&w->res->stored_chunks, nok);
	bump(&w->res->stored_bytes, bytes);
	/* Relaxed: the ring is a hint list of windows worth retrieving. */
	pos = atomic_fetch_add_explicit(&w->sh->recent_pos, 1,
					memory_order_relaxed);
	atomic_store_explicit(&w->sh->recent[pos % RECENT], base << 5 | n,
			      memory_order_relaxed);
	bump(&w->res->ops[OP_STORE], 1);
	return 0;
}

/* Verify and commit a prepared retrieve of keys [base, base + n). */
static int finish_retrieve(struct worker *w, struct kvr_xfer *x,
			   uint64_t base, uint32_t n, const char *how)
{
	set_phase(w, PH_RETRIEVE_PREPARED);
	if (x->nslots > n) {
		fprintf(stderr, PROG ": CORRUPT %s: %u slots for %u keys\n",
			how, x->nslots, n);
		bump(&w->res->corrupt_chunks, 1);
	}
	for (uint32_t i = 0; i < x->nslots && i < n; i++)
		verify_slot(w, &x->slots[i], base + i, how);
	maybe_linger(w);
	if (x->id == 0) {
		/* Nothing pinned, nothing to commit. */
		kvr_xfer_free(x);
		set_phase(w, PH_OTHER);
		return 0;
	}
	set_phase(w, PH_OTHER);
	return kvr_commit_retrieve(w->c, x);
}

static int op_retrieve(struct worker *w)
{
	struct kvr_key k[MAX_CHUNKS];
	struct kvr_xfer x = { 0 };
	uint64_t base;
	uint32_t n;
	int rc;

	pick_window(w, rnd_below(&w->rng, 4) != 0, &base, &n);
	keys_of(base, n, k, NULL);
	rc = kvr_prepare_retrieve(w->c, k, n, &x);
	if (rc < 0)
		return rc;
	rc = finish_retrieve(w, &x, base, n, "retrieve");
	if (rc == 0)
		bump(&w->res->ops[OP_RETRIEVE], 1);
	return rc;
}

static int op_lookup(struct worker *w)
{
	struct kvr_key k[MAX_CHUNKS];
	uint64_t base;
	uint32_t n;
	long hits;

	pick_window(w, rnd_below(&w->rng, 2) != 0, &base, &n);
	keys_of(base, n, k, NULL);
	hits = kvr_lookup(w->c, k, n, NULL);
	if (hits < 0)
		return (int)hits;
	if ((uint64_t)hits > n) {
		fprintf(stderr, PROG ": CORRUPT lookup: %ld hits for %u keys\n",
			hits, n);
		bump(&w->res->corrupt_chunks, 1);
	}
	bump(&w->res->ops[OP_LOOKUP], 1);
	return 0;
}

/* Take a lease another worker offered and redeem it; ENOENT is normal
 * (its maker died, or it expired). */
static int op_lease_shared(struct worker *w)
{
	unsigned nw = w->o->workers, from = (unsigned)rnd_below(&w->rng, nw);
	struct st_mailbox_shm *m = &w->sh->mbox[from];
	struct kvr_xfer x = { 0 };
	uint32_t expect = 2, n, hits;
	uint64_t lease, base;
	int rc;

	if (from == w->slot ||
	    !atomic_compare_exchange_strong_explicit(&m->state, &expect, 3,
						     memory_order_acquire,
						     memory_order_relaxed))
		return 1; /* nothing offered: caller picks another op */
	atomic_store_explicit(&m->taker, w->slot, memory_order_relaxed);
	lease = m->lease;
	base = m->base;
	n = m->n;
	hits = m->hits;
	/* Partner of the acquire CAS in offer_lease(): the box is free. */
	atomic_store_explicit(&m->state, 0, memory_order_release);
	rc = kvr_prepare_retrieve_lease(w->c, lease, &x);
	if (rc < 0) {
		if (rc == -ENOENT || rc == -EPERM || rc == -EACCES) {
			count_err(w, rc);
			return 0;
		}
		return rc;
	}
	if (x.nslots != hits)
		bump(&w->res->lease_short, 1);
	rc = finish_retrieve(w, &x, base, n, "lease_shared");
	if (rc == 0)
		bump(&w->res->ops[OP_LEASE_SHARED], 1);
	return rc;
}

/* Offer a lease in our mailbox; false if the box is busy. */
static bool offer_lease(struct worker *w, uint64_t lease, uint64_t base,
			uint32_t n, uint32_t hits)
{
	struct st_mailbox_shm *m = &w->sh->mbox[w->slot];
	uint32_t expect = 0;

	if (!atomic_compare_exchange_strong_explicit(&m->state, &expect, 1,
						     memory_order_acquire,
						     memory_order_relaxed))
		return false;
	m->lease = lease;
	m->base = base;
	m->n = n;
	m->hits = hits;
	/* Publishes the fields; pairs with the taker's acquire CAS. */
	atomic_store_explicit(&m->state, 2, memory_order_release);
	return true;
}

static int op_lease(struct worker *w)
{
	struct kvr_key k[MAX_CHUNKS];
	struct kvr_xfer x = { 0 };
	uint64_t base, lease = 0;
	uint32_t n, choice;
	long hits;
	int rc;

	pick_window(w, true, &base, &n);
	keys_of(base, n, k, NULL);
	hits = kvr_lookup(w->c, k, n, &lease);
	if (hits < 0)
		return (int)hits;
	if (hits == 0 || lease == 0) {
		bump(&w->res->ops[OP_LOOKUP_PIN], 1);
		return 0;
	}
	choice = (uint32_t)rnd_below(&w->rng, 3);
	if (choice == 0 && offer_lease(w, lease, base, n, (uint32_t)hits)) {
		/* Another worker may redeem it; if nobody does it dies with
		 * this channel or expires. */
		bump(&w->res->ops[OP_LOOKUP_PIN], 1);
		return 0;
	}
	if (choice == 1) {
		rc = kvr_release(w->c, lease);
		if (rc < 0)
			return rc;
		bump(&w->res->ops[OP_LOOKUP_PIN], 1);
		return 0;
	}
	rc = kvr_prepare_retrieve_lease(w->c, lease, &x);
	if (rc < 0)
		return rc;
	if (x.nslots != (uint32_t)hits)
		bump(&w->res->lease_short, 1);
	rc = finish_retrieve(w, &x, base, n, "lease_retrieve");
	if (rc == 0)
		bump(&w->res->ops[OP_LEASE_RETRIEVE], 1);
	return rc;
}

static int worker_connect(struct worker *w)
{
	struct kvr_client_opts co = { 0 };
	char err[256];
	int rc;

	set_phase(w, PH_CONNECT);
	co.socket_path = w->o->socket;
	snprintf(co.ns.model, sizeof(co.ns.model), "kvring-stress");
	co.ns.layers = 2;
	co.ns.kv_heads = 2;
	co.ns.head_size = 64;
	co.ns.dtype_bytes = 2;
	co.ns.tp_size = 1;
	co.ns.chunk_tokens = 256;
	co.transport = w->o->copy ? KVR_TRANSPORT_COPY : 0;
	co.no_prefault = w->o->no_prefault;
	while (!atomic_load_explicit(&w->sh->stop, memory_order_relaxed)) {
		rc = kvr_connect(&co, &w->c, err, sizeof(err));
		if (rc == 0) {
			set_phase(w, PH_IDLE);
			return 0;
		}
		count_err(w, rc);
		sleep_us(20000);
	}
	return -ESHUTDOWN;
}

static bool should_stop(struct worker *w)
{
	uint64_t total;

	/* Relaxed: stop is a plain flag; nothing is published with it. */
	if (atomic_load_explicit(&w->sh->stop, memory_order_relaxed))
		return true;
	if (!w->o->max_ops)
		return false;
	total = atomic_load_explicit(&w->sh->ops_total, memory_order_relaxed);
	return total >= w->o->max_ops;
}

static void worker_main(struct st_shared_shm *sh, const struct opts *o,
			unsigned slot, uint64_t seed, uint64_t nkeys)
{
	struct worker w = { .sh = sh, .res = &sh->res[slot], .o = o,
			    .slot = slot, .rng = seed, .nkeys = nkeys };
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
	 * The op mix, in percent: lookup 12, store 33, abort 8, retrieve 27,
	 * lookup with pin (then release / redeem / offer) 12, redeem a lease
	 * another worker offered 8 (a plain retrieve when none is offered).
	 * Stores dominate so that eviction never rests; retrieves mostly hit
	 * recently stored windows so that most of them verify something.
	 */
	while (!should_stop(&w)) {
		uint64_t r = rnd_below(&w.rng, 100);

		set_phase(&w, PH_OTHER);
		if (r < 12)
			rc = op_lookup(&w);
		else if (r < 45)
			rc = op_store(&w, false);
		else if (r < 53)
			rc = op_store(&w, true);
		else if (r < 80)
			rc = op_retrieve(&w);
		else if (r < 92)
			rc = op_lease(&w);
		else if ((rc = op_lease_shared(&w)) == 1)
			rc = op_retrieve(&w);
		set_phase(&w, PH_IDLE);
		if (rc == 0) {
			atomic_fetch_add_explicit(&sh->ops_total, 1,
						  memory_order_relaxed);
			continue;
		}
		/* A failed op is counted by errno; the connection is only
		 * replaced when the library says it is broken (server gone,
		 * restarted, or it sent something malformed). */
		count_err(&w, rc);
		if (conn_fatal(rc)) {
			kvr_close(w.c);
			w.c = NULL;
			bump(&w.res->reconnects, 1);
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

/* ==== Parent: server management ==== */

static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry '" PROG " --help'.\n");
	exit(EXIT_USAGE);
}

/* Find kvringd: --kvringd, else ../server/kvringd next to this binary,
 * else "kvringd" from PATH (execvp). */
static const char *find_kvringd(const struct opts *o, char *buf, size_t n)
{
	char self[PATH_MAX];
	ssize_t len;
	char *slash;

	if (o->kvringd)
		return o->kvringd;
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len > 0) {
		self[len] = 0;
		slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			if (snprintf(buf, n, "%s/../server/kvringd", self) <
				    (int)n &&
			    access(buf, X_OK) == 0)
				return buf;
		}
	}
	return "kvringd";
}

static pid_t spawn_server(struct run *r)
{
	char pool[32], maxw[16], binbuf[PATH_MAX];
	const char *argv[16 + MAX_SRV_ARGS];
	const char *bin = find_kvringd(&r->o, binbuf, sizeof(binbuf));
	unsigned n = 0;
	pid_t pid;

	snprintf(pool, sizeof(pool), "%" PRIu64, r->o.pool_bytes);
	snprintf(maxw, sizeof(maxw), "%u", r->o.workers * 2 + 8);
	argv[n++] = "kvringd";
	argv[n++] = "--socket";
	argv[n++] = r->sock;
	argv[n++] = "--name";
	argv[n++] = r->name;
	argv[n++] = "--pool-size";
	argv[n++] = pool;
	argv[n++] = "--max-workers";
	argv[n++] = maxw;
	for (unsigned i = 0; i < r->o.nsrv_args; i++)
		argv[n++] = r->o.srv_args[i];
	argv[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(r->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);

		/* Own process group: a terminal's Ctrl-C stops the run in
		 * order, it does not kill the server before the audit. */
		setpgid(0, 0);
		signal(SIGINT, SIG_DFL);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		if (strchr(bin, '/'))
			execv(bin, (char *const *)argv);
		else
			execvp(bin, (char *const *)argv);
		fprintf(stderr, PROG ": exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	return pid;
}

static void ctl_unmap(struct run *r)
{
	if (r->ctl.base)
		kvr_seg_detach(&r->ctl);
	memset(&r->ctl, 0, sizeof(r->ctl));
	r->ctl.fd = -1;
	r->hdr = NULL;
}

/* Map the control segment read-only; if @creator is not 0 only a segment
 * that process created and that says RUNNING counts. */
static int ctl_map(struct run *r, pid_t creator)
{
	char ctl_name[96];
	int rc;

	ctl_unmap(r);
	snprintf(ctl_name, sizeof(ctl_name), "%s" KVR_SEG_CTL_SUFFIX, r->name);
	rc = kvr_seg_open_name(NULL, ctl_name, true, &r->ctl, NULL);
	if (rc < 0)
		return rc;
	rc = kvr_seg_hdr_check(r->ctl.base, r->ctl.bytes, KVR_SEG_KIND_CONTROL,
			       kvr_layout_hash(), NULL);
	if (rc == 0) {
		r->hdr = r->ctl.base;
		if ((creator && r->hdr->seg.creator_pid != creator) ||
		    atomic_load_explicit(&r->hdr->state,
					 memory_order_acquire) !=
			    KVR_SERVER_RUNNING)
			rc = -EAGAIN;
	}
	if (rc < 0)
		ctl_unmap(r);
	return rc;
}

static void print_log_tail(const struct run *r)
{
	char cmd[256];

	if (!r->log_path[0])
		return;
	fprintf(stderr, PROG ": last lines of the server log %s:\n",
		r->log_path);
	snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", r->log_path);
	if (system(cmd) < 0)
		perror(PROG ": system");
}

/* Start our server and wait (10 s) until its segment says RUNNING. */
static int start_server(struct run *r)
{
	int st;

	r->srv_pid = spawn_server(r);
	if (r->srv_pid < 0)
		return r->srv_pid;
	r->srv_killed = false;
	for (int waited = 0; waited < 10000; waited += 5) {
		if (waitpid(r->srv_pid, &st, WNOHANG) == r->srv_pid) {
			fprintf(stderr, PROG ": kvringd exited during start-up "
					"(status %d)\n", st);
			r->srv_pid = 0;
			print_log_tail(r);
			return -ECHILD;
		}
		if (ctl_map(r, r->srv_pid) == 0)
			return 0;
		sleep_us(5000);
	}
	fprintf(stderr, PROG ": kvringd did not come up within 10 s\n");
	print_log_tail(r);
	kill(r->srv_pid, SIGKILL);
	waitpid(r->srv_pid, NULL, 0);
	r->srv_pid = 0;
	return -ETIMEDOUT;
}

static void kill_and_restart_server(struct run *r)
{
	/* Restarted at once, the way a supervisor would: the new server
	 * must cope with the dead one's socket and segments itself. */
	kill(r->srv_pid, SIGKILL);
	waitpid(r->srv_pid, NULL, 0);
	r->srv_kills++;
	r->srv_pid = 0;
	ctl_unmap(r);
	if (start_server(r) == 0)
		r->srv_restarts++;
	else
		r->srv_crashed = true; /* cannot restart: ends the run */
}

/* ==== Parent: workers ==== */

static int spawn_worker(struct run *r, unsigned slot)
{
	uint64_t seed = r->o.seed * 0x100000001b3ull ^
			((uint64_t)slot << 40 | r->wgen[slot]);
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		worker_main(r->sh, &r->o, slot, rnd(&seed), r->nkeys);
	r->wpid[slot] = pid;
	r->wkilled[slot] = false;
	r->wgen[slot]++;
	return 0;
}

/* Free whatever the dead worker of @slot left half-done in mailboxes. */
static void mailbox_cleanup(struct run *r, unsigned slot)
{
	struct st_mailbox_shm *m = &r->sh->mbox[slot];
	uint32_t e;

	/* Its own box: a lease of a dead channel is dead too. */
	e = 1;
	atomic_compare_exchange_strong(&m->state, &e, 0);
	e = 2;
	atomic_compare_exchange_strong(&m->state, &e, 0);
	/* Boxes it was taking from. */
	for (unsigned i = 0; i < r->o.workers; i++) {
		e = 3;
		if (atomic_load(&r->sh->mbox[i].taker) == slot)
			atomic_compare_exchange_strong(&r->sh->mbox[i].state,
						       &e, 0);
	}
}

static int slot_of(const struct run *r, pid_t pid)
{
	for (unsigned i = 0; i < r->o.workers; i++)
		if (r->wpid[i] == pid)
			return (int)i;
	return -1;
}

/* Pick a victim: a share of kills wait (up to 20 ms) for a worker that is
 * between prepare and commit; the others take any worker. */
static void kill_one(struct run *r)
{
	bool target = rnd_below(&r->rng, 100) < r->o.target_pct;
	unsigned victim = (unsigned)rnd_below(&r->rng, r->o.workers);
	uint32_t ph = PH_OTHER;

	for (int tries = 0; target && tries < 40; tries++) {
		unsigned start = (unsigned)rnd_below(&r->rng, r->o.workers);

		for (unsigned k = 0; k < r->o.workers; k++) {
			unsigned i = (start + k) % r->o.workers;

			ph = atomic_load_explicit(&r->sh->res[i].phase,
						  memory_order_relaxed);
			if (r->wpid[i] > 0 && (ph == PH_STORE_PREPARED ||
					       ph == PH_RETRIEVE_PREPARED)) {
				victim = i;
				goto found;
			}
		}
		sleep_us(500);
	}
	ph = atomic_load_explicit(&r->sh->res[victim].phase,
				  memory_order_relaxed);
found:
	if (r->wpid[victim] <= 0)
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
}

static bool stopping(const struct run *r)
{
	return atomic_load_explicit(&r->sh->stop, memory_order_relaxed) != 0;
}

/* Reap every child that exited; respawn workers unless stopping. */
static void reap(struct run *r)
{
	pid_t pid;
	int st, slot;

	/*
	 * Expected deaths: a worker we SIGKILLed, a worker that exited 0
	 * after the stop flag, the server after kill_and_restart_server()
	 * (reaped there, so never seen here). Anything else -- a worker
	 * dying of SIGSEGV or a sanitizer report, the server exiting on its
	 * own -- is an invariant failure.
	 */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		if (pid == r->srv_pid) {
			r->srv_pid = 0;
			r->srv_crashed = true;
			fprintf(stderr,
				PROG ": kvringd (pid %d) died without being "
				"killed: %s %d\n",
				(int)pid,
				WIFSIGNALED(st) ? "signal" : "exit status",
				WIFSIGNALED(st) ? WTERMSIG(st)
						: WEXITSTATUS(st));
			print_log_tail(r);
			continue;
		}
		slot = slot_of(r, pid);
		if (slot < 0)
			continue;
		r->wpid[slot] = 0;
		mailbox_cleanup(r, (unsigned)slot);
		atomic_store_explicit(&r->sh->res[slot].phase, PH_IDLE,
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
		if (!stopping(r) && spawn_worker(r, (unsigned)slot) < 0)
			fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
	}
}

/* ==== Results ==== */

struct totals {
	uint64_t ops[OP_N], ops_total;
	uint64_t verified_chunks, verified_bytes, corrupt, stored_chunks,
		stored_bytes, slot_st[NSLOT_ST], errors[NERRNO], reconnects,
		lease_short;
};

static void sum_results(const struct run *r, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned s = 0; s < r->o.workers; s++) {
		const struct st_wres_shm *w = &r->sh->res[s];

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
#undef LD
	}
}

static const char *errno_name(int e)
{
	const char *n = e ? strerrorname_np(e) : NULL;

	return n ? n : "other";
}

static void progress(const struct run *r, bool final)
{
	struct totals t;
	double el = (double)(now_ns() - r->t0_ns) / 1e9;

	sum_results(r, &t);
	fprintf(stderr,
		"\r%s ops %" PRIu64 " (%.0f/s) verified %" PRIu64
		" corrupt %" PRIu64 " kills %" PRIu64 " server-kills %" PRIu64
		" elapsed %.0fs   %s",
		PROG, t.ops_total, el > 0 ? (double)t.ops_total / el : 0.0,
		t.verified_chunks, t.corrupt, r->kills, r->srv_kills, el,
		final ? "\n" : "");
}

/* What the leak audit saw. */
struct audit {
	bool have_ctl, have_stats, workers_gone;
	struct kvr_gstats_shm g; /* plain copy (atomics read one by one) */
	uint64_t pool_bytes;
	struct kvr_stats_wire w;
	bool accounting_ok;
	char why[512];
};

static void snap_gstats(const struct kvr_ctl_hdr_shm *h,
			struct kvr_gstats_shm *g)
{
	const _Atomic uint64_t *src = (const _Atomic uint64_t *)&h->stats;
	_Atomic uint64_t *dst = (_Atomic uint64_t *)g;

	for (size_t i = 0; i < sizeof(*g) / sizeof(*src); i++)
		atomic_store_explicit(&dst[i],
				      atomic_load_explicit(&src[i],
							   memory_order_relaxed),
				      memory_order_relaxed);
}

#define G(a, f) atomic_load_explicit(&(a)->g.f, memory_order_relaxed)

static bool quiet_now(const struct kvr_ctl_hdr_shm *h)
{
	struct kvr_gstats_shm g;

	snap_gstats(h, &g);
	return atomic_load(&g.workers) == 0 &&
	       atomic_load(&g.reserved_bytes) == 0 &&
	       atomic_load(&g.pins) == 0 && atomic_load(&g.leases) == 0 &&
	       atomic_load(&g.transfers) == 0;
}

/*
 * The leak audit, after every worker of ours is gone: wait (5 s at most)
 * until the server reports no workers and nothing held, then one more
 * heartbeat so the counters are fresh, then read them; then ask the server
 * itself (KVR_OP_STATS) over a fresh connection and cross-check.
 */
static void run_audit(struct run *r, struct audit *a)
{
	struct kvr_client_opts co = { 0 };
	struct kvr_client *c = NULL;
	char err[256];
	uint32_t hb_ms;

	memset(a, 0, sizeof(*a));
	/* Attach mode maps the segment only now; ours is mapped already
	 * (and was re-mapped after every restart). */
	if (!r->hdr && ctl_map(r, 0) < 0) {
		snprintf(a->why, sizeof(a->why),
			 "cannot map the control segment %s.ctl", r->name);
		return;
	}
	hb_ms = r->hdr->heartbeat_ms ? r->hdr->heartbeat_ms : 100;
	/* The condition we wait for is the success condition, so a leak
	 * only costs this timeout; the values are read again afterwards. */
	for (int waited = 0; waited < 5000; waited += 10) {
		if (quiet_now(r->hdr))
			break;
		sleep_us(10000);
	}
	/* The server refreshes its global counters at least every
	 * heartbeat: wait two so that what we read is current. */
	sleep_us(2000ull * hb_ms + 50000);
	snap_gstats(r->hdr, &a->g);
	a->have_ctl = true;
	a->pool_bytes = r->hdr->pool_bytes;
	a->workers_gone = G(a, workers) == 0;

	co.socket_path = r->o.socket ? r->o.socket : r->sock;
	snprintf(co.ns.model, sizeof(co.ns.model), "kvring-stress");
	co.ns.layers = 2;
	co.ns.kv_heads = 2;
	co.ns.head_size = 64;
	co.ns.dtype_bytes = 2;
	co.ns.tp_size = 1;
	co.ns.chunk_tokens = 256;
	co.no_prefault = true;
	if (kvr_connect(&co, &c, err, sizeof(err)) == 0) {
		a->have_stats = kvr_stats(c, &a->w) == 0;
		kvr_close(c);
	}

	/* Pool accounting: nothing reserved, so used must be exactly the
	 * committed bytes; the server's own answer must agree with its
	 * counters, and the free space it reports must fit. */
	a->accounting_ok = true;
	if (G(a, used_bytes) != G(a, committed_bytes) ||
	    G(a, reserved_objects) != 0) {
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "used_bytes %" PRIu64 " != committed_bytes %" PRIu64
			 " (reserved objects %" PRIu64 ")",
			 G(a, used_bytes), G(a, committed_bytes),
			 G(a, reserved_objects));
	} else if (G(a, used_bytes) > a->pool_bytes ||
		   G(a, largest_free) > a->pool_bytes - G(a, used_bytes)) {
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "used %" PRIu64 " + largest free %" PRIu64
			 " exceed the pool (%" PRIu64 ")",
			 G(a, used_bytes), G(a, largest_free), a->pool_bytes);
	} else if (!a->have_stats) {
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "could not ask the server for its stats: %s", err);
	} else if (a->w.used_bytes != G(a, used_bytes) ||
		   a->w.objects != G(a, objects) ||
		   a->w.reserved_bytes != 0 || a->w.pins != 0 ||
		   a->w.leases != 0) {
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "stats answer (used %" PRIu64 ", objects %" PRIu64
			 ", reserved %" PRIu64 ", pins %" PRIu64
			 ", leases %" PRIu64 ") disagrees with the segment "
			 "(used %" PRIu64 ", objects %" PRIu64 ")",
			 a->w.used_bytes, a->w.objects, a->w.reserved_bytes,
			 a->w.pins, a->w.leases, G(a, used_bytes),
			 G(a, objects));
	}
}

/* JSON string output for the few strings we print (no control chars
 * can appear in them except from errno names, which are plain). */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		if ((unsigned char)*s >= 0x20)
			putchar(*s);
	}
	putchar('"');
}

static int report(struct run *r, const struct audit *a)
{
	const struct opts *o = &r->o;
	char fails[8][600];
	int nf = 0;
	struct totals t;
	uint64_t leaked_res = a->have_ctl ? G(a, reserved_bytes) : 0;
	uint64_t leaked_pins = a->have_ctl ? G(a, pins) : 0;
	uint64_t leaked_leases = a->have_ctl ? G(a, leases) : 0;
	uint64_t leaked_xfers = a->have_ctl ? G(a, transfers) : 0;
	bool first;

	sum_results(r, &t);
	/* Every invariant of the run, each with its own line on stderr. */
#define FAIL(...)                                                            \
	do {                                                                 \
		if (nf < 8)                                                  \
			snprintf(fails[nf++], sizeof(fails[0]), __VA_ARGS__); \
	} while (0)
	if (t.corrupt)
		FAIL("%" PRIu64 " corrupt chunks", t.corrupt);
	if (!a->have_ctl)
		FAIL("leak audit impossible: %s", a->why);
	if (leaked_res || leaked_pins || leaked_leases || leaked_xfers)
		FAIL("leaked: %" PRIu64 " reserved bytes, %" PRIu64
		     " pins, %" PRIu64 " leases, %" PRIu64 " transfers",
		     leaked_res, leaked_pins, leaked_leases, leaked_xfers);
	if (a->have_ctl && !a->workers_gone)
		FAIL("server still reports %" PRIu64 " workers after ours left",
		     G(a, workers));
	if (a->have_ctl && !a->accounting_ok)
		FAIL("pool accounting: %s", a->why);
	if (r->srv_crashed)
		FAIL("kvringd died without being killed (or did not restart)");
	if (r->worker_crashes)
		FAIL("%" PRIu64 " workers died on their own", r->worker_crashes);
	if (r->workers_stuck)
		FAIL("%" PRIu64 " workers did not stop within 15 s",
		     r->workers_stuck);
	if (r->srv_exit > 0)
		FAIL("kvringd exit status %d after SIGTERM", r->srv_exit);
	if (t.ops_total == 0)
		FAIL("no operation completed");
#undef FAIL

	/* The JSON keys are a stable interface (docs/reliability.md);
	 * add keys, never rename them without bumping SCHEMA. */
	if (o->json) {
		printf("{\"schema\":%d,\"seed\":%" PRIu64 ",\"workers\":%u,"
		       "\"seconds\":%.3f,\"ops\":%" PRIu64
		       ",\"ops_per_s\":%.1f,\"ops_by_type\":{",
		       SCHEMA, o->seed, o->workers, r->elapsed_s, t.ops_total,
		       r->elapsed_s > 0 ? (double)t.ops_total / r->elapsed_s
					: 0.0);
		for (int i = 0; i < OP_N; i++)
			printf("%s\"%s\":%" PRIu64, i ? "," : "", op_names[i],
			       t.ops[i]);
		printf("},\"verified_chunks\":%" PRIu64
		       ",\"verified_bytes\":%" PRIu64
		       ",\"corrupt_chunks\":%" PRIu64
		       ",\"stored_chunks\":%" PRIu64
		       ",\"stored_bytes\":%" PRIu64 ",\"store_slots\":{",
		       t.verified_chunks, t.verified_bytes, t.corrupt,
		       t.stored_chunks, t.stored_bytes);
		for (int i = 0; i < NSLOT_ST; i++)
			printf("%s\"%s\":%" PRIu64, i ? "," : "",
			       slot_st_names[i], t.slot_st[i]);
		printf("},\"kills\":%" PRIu64 ",\"kills_by_phase\":{"
		       "\"store_prepared\":%" PRIu64
		       ",\"retrieve_prepared\":%" PRIu64 ",\"other\":%" PRIu64
		       "},\"server_kills\":%" PRIu64
		       ",\"server_restarts\":%" PRIu64
		       ",\"reconnects\":%" PRIu64 ",\"lease_short\":%" PRIu64
		       ",\"errors\":{",
		       r->kills, r->kills_store, r->kills_retrieve,
		       r->kills_other, r->srv_kills, r->srv_restarts,
		       t.reconnects, t.lease_short);
		first = true;
		for (int i = 0; i < NERRNO; i++) {
			if (!t.errors[i])
				continue;
			printf("%s", first ? "" : ",");
			json_str(errno_name(i));
			printf(":%" PRIu64, t.errors[i]);
			first = false;
		}
		printf("},\"leaked_reserved_bytes\":%" PRIu64
		       ",\"leaked_pins\":%" PRIu64 ",\"leaked_leases\":%" PRIu64
		       ",\"leaked_transfers\":%" PRIu64
		       ",\"pool_accounting_ok\":%s",
		       leaked_res, leaked_pins, leaked_leases, leaked_xfers,
		       a->have_ctl && a->accounting_ok ? "true" : "false");
		if (a->have_ctl)
			printf(",\"pool\":{\"pool_bytes\":%" PRIu64
			       ",\"used_bytes\":%" PRIu64
			       ",\"committed_bytes\":%" PRIu64
			       ",\"objects\":%" PRIu64 ",\"evictions\":%" PRIu64
			       ",\"no_room\":%" PRIu64
			       ",\"protocol_errors\":%" PRIu64
			       ",\"disconnect_cleanups\":%" PRIu64 "}",
			       a->pool_bytes, G(a, used_bytes),
			       G(a, committed_bytes), G(a, objects),
			       G(a, evictions), G(a, no_room),
			       G(a, protocol_errors),
			       G(a, disconnect_cleanups));
		printf(",\"server_crashed\":%s,\"worker_crashes\":%" PRIu64
		       ",\"workers_stuck\":%" PRIu64 ",\"server_exit\":%d,"
		       "\"ok\":%s,\"failures\":[",
		       r->srv_crashed ? "true" : "false", r->worker_crashes,
		       r->workers_stuck, r->srv_exit, nf ? "false" : "true");
		for (int i = 0; i < nf; i++) {
			printf("%s", i ? "," : "");
			json_str(fails[i]);
		}
		printf("]}\n");
	} else {
		printf("seed=%" PRIu64 "\nworkers=%u\nseconds=%.3f\nops=%" PRIu64
		       "\nops_per_s=%.1f\n",
		       o->seed, o->workers, r->elapsed_s, t.ops_total,
		       r->elapsed_s > 0 ? (double)t.ops_total / r->elapsed_s
					: 0.0);
		for (int i = 0; i < OP_N; i++)
			printf("ops_%s=%" PRIu64 "\n", op_names[i], t.ops[i]);
		printf("verified_chunks=%" PRIu64 "\nverified_bytes=%" PRIu64
		       "\ncorrupt_chunks=%" PRIu64 "\nstored_chunks=%" PRIu64
		       "\n",
		       t.verified_chunks, t.verified_bytes, t.corrupt,
		       t.stored_chunks);
		for (int i = 0; i < NSLOT_ST; i++)
			printf("store_slots_%s=%" PRIu64 "\n", slot_st_names[i],
			       t.slot_st[i]);
		printf("kills=%" PRIu64 "\nkills_store_prepared=%" PRIu64
		       "\nkills_retrieve_prepared=%" PRIu64
		       "\nserver_kills=%" PRIu64 "\nreconnects=%" PRIu64 "\n",
		       r->kills, r->kills_store, r->kills_retrieve,
		       r->srv_kills, t.reconnects);
		for (int i = 0; i < NERRNO; i++)
			if (t.errors[i])
				printf("errors_%s=%" PRIu64 "\n",
				       errno_name(i), t.errors[i]);
		printf("leaked_reserved_bytes=%" PRIu64 "\nleaked_pins=%" PRIu64
		       "\nleaked_leases=%" PRIu64
		       "\nleaked_transfers=%" PRIu64
		       "\npool_accounting_ok=%d\n",
		       leaked_res, leaked_pins, leaked_leases, leaked_xfers,
		       a->have_ctl && a->accounting_ok);
		if (a->have_ctl)
			printf("pool_bytes=%" PRIu64 "\nused_bytes=%" PRIu64
			       "\nobjects=%" PRIu64 "\nevictions=%" PRIu64 "\n",
			       a->pool_bytes, G(a, used_bytes), G(a, objects),
			       G(a, evictions));
		printf("ok=%d\n", nf == 0);
	}
	fflush(stdout);
	for (int i = 0; i < nf; i++)
		fprintf(stderr, PROG ": FAILED: %s\n", fails[i]);
	return nf ? EXIT_FAIL : EXIT_OK;
}

/* ==== Command line ==== */

enum {
	OPT_KILL_SERVER = 0x100,
	OPT_KILL_SERVER_EVERY,
	OPT_KVRINGD,
	OPT_SERVER_ARG,
	OPT_SERVER_LOG,
	OPT_KEYSPACE,
	OPT_CHUNK_MIN,
	OPT_CHUNK_MAX,
	OPT_COPY,
	OPT_NO_PREFAULT,
	OPT_KEEP_LOG,
	OPT_TARGET_PCT,
	OPT_INJECT_CORRUPT,
};

static const struct option longopts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "name", required_argument, NULL, 'n' },
	{ "workers", required_argument, NULL, 'w' },
	{ "seconds", required_argument, NULL, 't' },
	{ "ops", required_argument, NULL, 'o' },
	{ "kill-every", required_argument, NULL, 'k' },
	{ "kill-server", no_argument, NULL, OPT_KILL_SERVER },
	{ "kill-server-every", required_argument, NULL, OPT_KILL_SERVER_EVERY },
	{ "target-pct", required_argument, NULL, OPT_TARGET_PCT },
	{ "inject-corrupt", required_argument, NULL, OPT_INJECT_CORRUPT },
	{ "pool-size", required_argument, NULL, 'p' },
	{ "keyspace", required_argument, NULL, OPT_KEYSPACE },
	{ "chunk-min", required_argument, NULL, OPT_CHUNK_MIN },
	{ "chunk-max", required_argument, NULL, OPT_CHUNK_MAX },
	{ "seed", required_argument, NULL, 'S' },
	{ "kvringd", required_argument, NULL, OPT_KVRINGD },
	{ "server-arg", required_argument, NULL, OPT_SERVER_ARG },
	{ "server-log", required_argument, NULL, OPT_SERVER_LOG },
	{ "keep-log", no_argument, NULL, OPT_KEEP_LOG },
	{ "copy", no_argument, NULL, OPT_COPY },
	{ "no-prefault", no_argument, NULL, OPT_NO_PREFAULT },
	{ "json", no_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: " PROG " [OPTION]...\n"
"Hammer a kvringd with worker processes doing lookups, stores, aborts,\n"
"retrieves and leases, kill them (and optionally the server) at random,\n"
"verify every retrieved byte and audit the server for leaks at the end.\n"
"\n"
"  -s, --socket PATH        use the kvringd listening on PATH (default:\n"
"                           start a private one with its own socket/name)\n"
"  -n, --name NAME          segment base name of that server, for the\n"
"                           leak audit (default: kvring-<uid>)\n"
"  -w, --workers N          worker processes (1-%d). Default: 4\n"
"  -t, --seconds S          run time. Default: 10 (unless --ops)\n"
"  -o, --ops N              stop after N operations\n"
"  -k, --kill-every MS      SIGKILL a random worker every MS ms (0: never)\n"
"      --target-pct P       share of kills aimed at a worker between\n"
"                           prepare and commit. Default: 50\n"
"      --kill-server        also SIGKILL and restart kvringd (own server)\n"
"      --kill-server-every MS  Default: 20 x --kill-every, at least 2000\n"
"  -p, --pool-size SIZE     pool of the server we start (K/M/G). Default: 64M\n"
"      --keyspace SIZE      bytes of distinct chunks. Default: 8 x pool\n"
"      --chunk-min SIZE     Default: 4K\n"
"      --chunk-max SIZE     Default: 256K\n"
"  -S, --seed N             seed of keys, op mix and kill schedule. Default: 1\n"
"      --kvringd PATH       server binary. Default: ../server/kvringd next\n"
"                           to this program, else kvringd from PATH\n"
"      --server-arg ARG     extra argument for kvringd (repeatable)\n"
"      --server-log PATH    kvringd's stderr. Default: /tmp/" PROG
"-<pid>.log,\n"
"                           removed after a successful run\n"
"      --keep-log           keep the server log even when all is well\n"
"      --copy               workers use the copy transport\n"
"      --no-prefault        workers skip the pool pre-fault at attach\n"
"      --inject-corrupt N   self-test: worker 0 flips a byte in every Nth\n"
"                           store it commits (the run must then fail)\n"
"  -j, --json               print one JSON object (schema 1)\n"
"  -q, --quiet              no progress line\n"
"  -h, --help               this help\n"
"  -V, --version            version and segment ABI\n"
"\n"
"Exit status: 0 all invariants held (no corrupt chunk, nothing leaked,\n"
"pool accounting consistent, no unexpected crash), 1 an invariant failed\n"
"or the run could not start, 2 usage error.\n",
		MAX_WORKERS);
}

static uint64_t parse_size(const char *opt, const char *s)
{
	unsigned long long v;
	char *end;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		die_usage("bad size \"%s\"", s);
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		die_usage("bad size \"%s\"", s);
	(void)opt;
	return (uint64_t)v << shift;
}

static uint64_t parse_num(const char *s, uint64_t max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > max)
		die_usage("bad number \"%s\"", s);
	return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	bool have_seconds = false;
	int c;

	memset(o, 0, sizeof(*o));
	o->workers = 4;
	o->seconds = 10;
	o->pool_bytes = 64ull << 20;
	o->chunk_min = 4096;
	o->chunk_max = 256 * 1024;
	o->seed = 1;
	o->target_pct = 50;
	while ((c = getopt_long(argc, argv, "s:n:w:t:o:k:p:S:jqhV", longopts,
				NULL)) != -1) {
		switch (c) {
		case 's': o->socket = optarg; break;
		case 'n': o->name = optarg; break;
		case 'w':
			o->workers = (unsigned)parse_num(optarg, MAX_WORKERS);
			if (!o->workers)
				die_usage("--workers must be 1..256, got %s",
					  optarg);
			break;
		case 't': {
			char *end;

			o->seconds = strtod(optarg, &end);
			if (*end || end == optarg || !(o->seconds > 0))
				die_usage("bad --seconds \"%s\"", optarg);
			have_seconds = true;
			break;
		}
		case 'o': o->max_ops = parse_num(optarg, UINT64_MAX); break;
		case 'k':
			o->kill_every_ms = (unsigned)parse_num(optarg, 3600000);
			break;
		case OPT_KILL_SERVER: o->kill_server = true; break;
		case OPT_KILL_SERVER_EVERY:
			o->kill_server_every_ms =
				(unsigned)parse_num(optarg, 3600000);
			if (o->kill_server_every_ms < 100)
				die_usage("--kill-server-every: at least 100, "
					  "got %s", optarg);
			break;
		case OPT_TARGET_PCT:
			o->target_pct = (unsigned)parse_num(optarg, 100);
			break;
		case OPT_INJECT_CORRUPT:
			o->inject_corrupt = (unsigned)parse_num(optarg, 1u << 30);
			break;
		case 'p': o->pool_bytes = parse_size("--pool-size", optarg); break;
		case OPT_KEYSPACE:
			o->keyspace_bytes = parse_size("--keyspace", optarg);
			break;
		case OPT_CHUNK_MIN:
			o->chunk_min = parse_size("--chunk-min", optarg);
			break;
		case OPT_CHUNK_MAX:
			o->chunk_max = parse_size("--chunk-max", optarg);
			break;
		case 'S': o->seed = parse_num(optarg, UINT64_MAX); break;
		case OPT_KVRINGD: o->kvringd = optarg; break;
		case OPT_SERVER_ARG:
			if (o->nsrv_args >= MAX_SRV_ARGS)
				die_usage("too many --server-arg (max %s)",
					  "32");
			o->srv_args[o->nsrv_args++] = optarg;
			break;
		case OPT_SERVER_LOG: o->log_path = optarg; break;
		case OPT_KEEP_LOG: o->keep_log = true; break;
		case OPT_COPY: o->copy = true; break;
		case OPT_NO_PREFAULT: o->no_prefault = true; break;
		case 'j': o->json = true; break;
		case 'q': o->quiet = true; break;
		case 'h': usage(stdout); exit(EXIT_OK);
		case 'V':
			printf(PROG " %s (segment abi %d.%d)\n", KVR_VERSION,
			       KVR_ABI_MAJOR, KVR_ABI_MINOR);
			exit(EXIT_OK);
		default:
			fprintf(stderr, "Try '" PROG " --help'.\n");
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument \"%s\"", argv[optind]);
	if (o->max_ops && !have_seconds)
		o->seconds = 1e9; /* --ops alone: run until the count */
	if (o->chunk_min < 16 || o->chunk_min > o->chunk_max)
		die_usage("--chunk-min must be >= 16 and <= --chunk-max%s", "");
	if (o->chunk_max > o->pool_bytes / 4)
		die_usage("--chunk-max must be at most a quarter of the pool%s",
			  "");
	if (!o->keyspace_bytes)
		o->keyspace_bytes = o->pool_bytes * 8;
	if (o->kill_server && o->socket)
		die_usage("--kill-server needs a server of our own (no "
			  "--socket)%s", "");
	if (o->kill_server && !o->kill_server_every_ms) {
		o->kill_server_every_ms = o->kill_every_ms * 20;
		if (o->kill_server_every_ms < 2000)
			o->kill_server_every_ms = 2000;
	}
}

/* ==== main ==== */

static int setup_names(struct run *r)
{
	char pool_base[64];

	if (r->o.socket) {
		if (r->o.name)
			snprintf(r->name, sizeof(r->name), "%s", r->o.name);
		else if (kvr_seg_default_base(pool_base, sizeof(pool_base)) == 0)
			snprintf(r->name, sizeof(r->name), "%s", pool_base);
		snprintf(r->sock, sizeof(r->sock), "%s", r->o.socket);
		return 0;
	}
	snprintf(r->sock, sizeof(r->sock), "/tmp/kvring-stress-%d.sock",
		 (int)getpid());
	snprintf(r->name, sizeof(r->name), "kvring-stress-%d", (int)getpid());
	if (r->o.log_path)
		snprintf(r->log_path, sizeof(r->log_path), "%s", r->o.log_path);
	else
		snprintf(r->log_path, sizeof(r->log_path),
			 "/tmp/kvring-stress-%d.log", (int)getpid());
	unlink(r->log_path);
	r->o.socket = r->sock;
	return start_server(r);
}

/*
 * Our private server is gone (stopped, or crashed): remove what it may
 * have left under its private names -- the socket, the lock file kvringd
 * keeps by design, and after a crash its segments. Never used in attach
 * mode, where nothing here is ours.
 */
static void remove_server_files(const struct run *r)
{
	char path[192];

	unlink(r->sock);
	snprintf(path, sizeof(path), "%s.lock", r->sock);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s" KVR_SEG_CTL_SUFFIX, r->name);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s" KVR_SEG_POOL_SUFFIX,
		 r->name);
	unlink(path);
}

/* Tell the workers to stop and wait for them (15 s, then SIGKILL). */
static void stop_workers(struct run *r)
{
	uint64_t deadline;
	unsigned alive;

	atomic_store_explicit(&r->sh->stop, 1, memory_order_relaxed);
	deadline = now_ns() + 15000000000ull;
	for (;;) {
		reap(r);
		alive = 0;
		for (unsigned i = 0; i < r->o.workers; i++)
			alive += r->wpid[i] > 0;
		if (!alive)
			break;
		if (now_ns() > deadline) {
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
		sleep_us(2000);
	}
}

int main(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	struct audit a;
	uint64_t next_kill, next_srv_kill, next_prog, end_ns, t;
	bool tty;
	int rc;

	if (!r)
		return EXIT_FAIL;
	parse_opts(argc, argv, &r->o);
	r->ctl.fd = -1;
	r->srv_exit = -1;
	r->rng = r->o.seed ^ 0x5eedull;
	g_key_seed = r->o.seed;
	g_chunk_min = r->o.chunk_min;
	g_chunk_max = r->o.chunk_max;
	r->nkeys = r->o.keyspace_bytes / ((r->o.chunk_min + r->o.chunk_max) / 2);
	if (r->nkeys < 2 * MAX_CHUNKS)
		r->nkeys = 2 * MAX_CHUNKS;
	if (r->nkeys > ((uint64_t)1 << 40))
		die_usage("--keyspace too large%s", "");
	r->sh = mmap(NULL, sizeof(*r->sh), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r->sh == MAP_FAILED) {
		fprintf(stderr, PROG ": mmap results: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	signal(SIGPIPE, SIG_IGN);
	if (setup_names(r) < 0)
		return EXIT_FAIL;
	tty = isatty(STDERR_FILENO) && !r->o.quiet;

	r->t0_ns = now_ns();
	for (unsigned i = 0; i < r->o.workers; i++)
		if (spawn_worker(r, i) < 0) {
			fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
			r->worker_crashes++;
		}
	/* The parent's loop: reap and replace, kill on schedule, show
	 * progress, until the time or op budget is spent or Ctrl-C. */
	end_ns = r->t0_ns + (uint64_t)(r->o.seconds * 1e9);
	next_kill = r->t0_ns + (uint64_t)r->o.kill_every_ms * 1000000u;
	next_srv_kill = r->t0_ns + (uint64_t)r->o.kill_server_every_ms * 1000000u;
	next_prog = r->t0_ns;
	for (;;) {
		reap(r);
		t = now_ns();
		if (g_interrupted || r->srv_crashed || t >= end_ns)
			break;
		if (r->o.max_ops &&
		    atomic_load(&r->sh->ops_total) >= r->o.max_ops)
			break;
		if (r->o.kill_every_ms && t >= next_kill) {
			kill_one(r);
			/* Jitter: the next kill comes after 0.5x .. 1.5x. */
			next_kill = t + (uint64_t)r->o.kill_every_ms * 500000u +
				    rnd_below(&r->rng,
					      (uint64_t)r->o.kill_every_ms *
						      1000000u + 1);
		}
		if (r->o.kill_server && t >= next_srv_kill) {
			kill_and_restart_server(r);
			next_srv_kill = now_ns() +
				(uint64_t)r->o.kill_server_every_ms * 1000000u;
		}
		if (tty && t >= next_prog) {
			progress(r, false);
			next_prog = t + 250000000u;
		}
		sleep_us(2000);
	}
	stop_workers(r);
	r->elapsed_s = (double)(now_ns() - r->t0_ns) / 1e9;
	if (tty)
		progress(r, true);

	/* The audit needs a live server; a crashed one already failed. */
	if (!r->srv_crashed) {
		run_audit(r, &a);
	} else {
		memset(&a, 0, sizeof(a));
		snprintf(a.why, sizeof(a.why), "the server is gone");
	}
	ctl_unmap(r);
	/* Our server must also stop cleanly: exit 0 on SIGTERM. */
	if (r->srv_pid > 0) {
		int st;

		kill(r->srv_pid, SIGTERM);
		r->srv_exit = -1;
		for (int waited = 0; waited < 10000; waited += 5) {
			if (waitpid(r->srv_pid, &st, WNOHANG) == r->srv_pid) {
				r->srv_exit = WIFEXITED(st)
						      ? WEXITSTATUS(st)
						      : 128 + WTERMSIG(st);
				break;
			}
			sleep_us(5000);
		}
		if (r->srv_exit < 0) {
			kill(r->srv_pid, SIGKILL);
			waitpid(r->srv_pid, NULL, 0);
			r->srv_exit = 255;
		}
		r->srv_pid = 0;
	}
	rc = report(r, &a);
	/* Own server (a log path is set only then), now dead for sure. */
	if (r->log_path[0])
		remove_server_files(r);
	if (r->log_path[0]) {
		if (rc != EXIT_OK || r->o.keep_log)
			fprintf(stderr, PROG ": server log kept: %s\n",
				r->log_path);
		else
			unlink(r->log_path);
	}
	munmap(r->sh, sizeof(*r->sh));
	free(r);
	return rc;
}
