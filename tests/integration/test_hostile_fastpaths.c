/* SPDX-License-Identifier: MIT */
/*
 * Description: the fast paths under attack: store-ahead's staged slots and
 * binds across channels, and held batches of thousands freed when their worker
 * is killed.
 * Each against a real kvringd, beside a well-behaved worker
 * (hostile_suite.h).
 */
#include "hostile_suite.h"

#define SA_CHUNK 16384u

/* Hits of bad_key(i) seen by @r (same namespace as every raw worker). */
static uint64_t sa_lookup(struct t_raw *r, uint64_t i)
{
	struct kvr_key k = bad_key(i);
	union ans a;

	cr_assert_gt(
	    t_raw_call(r, KVR_OP_LOOKUP, 0, 0, &k, NULL, 1, &a, sizeof(a)), 0);
	cr_assert_eq(a.h.status, 0);
	return a.h.value;
}

/* A one-key store of bad_key(i) by @r whose commit asks for a staged
 * slot. Return the staged id (0: none came) and its slot in *sd. */
static uint64_t sa_store_and_stage(struct t_raw *r, uint64_t i,
				   struct kvr_slot_desc *sd)
{
	struct kvr_key k = bad_key(i);
	uint64_t sz = SA_CHUNK;
	union ans a;

	cr_assert_gt(t_raw_call(r, KVR_OP_PREPARE_STORE, 0, 0, &k, &sz, 1, &a,
				sizeof(a)),
		     0);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(ans_slots(&a)[0].status, KVR_SLOT_OK);
	memset((char *)r->pool + ans_slots(&a)[0].off, 0x42, SA_CHUNK);
	cr_assert_gt(t_raw_call(r, KVR_OP_COMMIT_STORE, a.h.handle,
				KVR_REQ_STAGE, NULL, NULL, 0, &a, sizeof(a)),
		     0);
	cr_assert_eq(a.h.status, 0);
	if (a.h.count != 1)
		return 0;
	*sd = ans_slots(&a)[0];
	return a.h.handle;
}

/* Commit @id with a bind of bad_key(i), @len bytes (@flags added to
 * KVR_REQ_BIND). Return the answer's status; *a holds the answer. */
static int sa_bind(struct t_raw *r, uint64_t id, uint32_t flags, uint64_t i,
		   uint64_t len, union ans *a)
{
	uint64_t w[KVR_BIND_WORDS] = {bad_key(i).lo, bad_key(i).hi, len};

	cr_assert_gt(t_raw_call(r, KVR_OP_COMMIT_STORE, id,
				KVR_REQ_BIND | flags, NULL, w, KVR_BIND_WORDS,
				a, sizeof(*a)),
		     0, "bind: no answer");
	return a->h.status;
}

/* A plain request on @r still gets its answer: the worker was not cut
 * off by what it tried. */
static void sa_expect_served(struct t_raw *r, const char *after)
{
	union ans a;

	cr_assert_gt(
	    t_raw_call(r, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a, sizeof(a)), 0,
	    "no answer after %s", after);
	cr_expect_eq(a.h.status, 0, "ping after %s", after);
}

/*
 * A staged id is a transfer of the channel it was handed to: another
 * worker that learns it (or guesses the spare's, the ids around it)
 * can neither bind, commit nor abort it, and the owner's bind still works.
 */
Test(hostile, staged_slot_of_another_channel_is_unknown_when_its_id_is_known)
{
	struct t_raw r1, r2;
	struct kvr_slot_desc sd;
	union ans a;
	uint64_t id;

	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r1), 0, "%s", r1.w.reason);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r2), 0, "%s", r2.w.reason);
	id = sa_store_and_stage(&r1, 13000, &sd);
	cr_assert_neq(id, 0, "no staged slot handed out");
	cr_expect_eq(sa_bind(&r2, id, 0, 13001, SA_CHUNK, &a), -ENOENT,
		     "another channel's staged id was bound: %d", a.h.status);
	cr_expect_eq(sa_bind(&r2, id, KVR_REQ_STAGE, 13001, SA_CHUNK, &a),
		     -ENOENT);
	cr_assert_gt(t_raw_call(&r2, KVR_OP_COMMIT_STORE, id, 0, NULL, NULL, 0,
				&a, sizeof(a)),
		     0);
	cr_expect_lt(a.h.status, 0, "a plain commit of it was accepted");
	cr_assert_gt(t_raw_call(&r2, KVR_OP_ABORT_STORE, id, 0, NULL, NULL, 0,
				&a, sizeof(a)),
		     0);
	cr_expect_lt(a.h.status, 0, "an abort of it was accepted");
	/* r1's spare sits near its id: guessing it gets nothing either. */
	for (uint64_t d = 1; d <= 8; d++) {
		cr_expect_lt(sa_bind(&r2, id + d, 0, 13001, SA_CHUNK, &a), 0,
			     "id %llu + %llu was bound", (unsigned long long)id,
			     (unsigned long long)d);
		cr_expect_lt(sa_bind(&r2, id - d, 0, 13001, SA_CHUNK, &a), 0,
			     "id %llu - %llu was bound", (unsigned long long)id,
			     (unsigned long long)d);
	}
	sa_expect_served(&r2, "binding ids it never got");
	cr_expect_eq(sa_lookup(&r2, 13001), 0u, "something was published");
	/* The owner's slot is whole: its bind publishes. */
	memset((char *)r1.pool + sd.off, 0x43, SA_CHUNK);
	cr_expect_eq(sa_bind(&r1, id, 0, 13002, SA_CHUNK, &a), 0);
	cr_expect_eq(a.h.value & KVR_COMMIT_OUTCOME_MASK, KVR_SLOT_OK);
	cr_expect_eq(sa_lookup(&r2, 13002), 1u);
	t_raw_close(&r1);
	t_raw_close(&r2);
	expect_good_progress(20, "after the foreign binds");
	expect_no_leak("after the foreign binds");
	finish();
}

/*
 * The bind of a staged slot with a size the slot was not made for (0,
 * a size that rounds to fewer pages, one byte more), of a transfer that
 * is not staged, and with the slot's offset forged as its id: each is
 * refused, publishes nothing, and leaves both transfers usable.
 */
Test(hostile,
     bind_is_refused_when_its_size_or_its_transfer_is_not_the_staged_one)
{
	const uint64_t bad_len[] = {0, SA_CHUNK / 4, SA_CHUNK + 1, ~0ull};
	struct kvr_key k = bad_key(13110);
	uint64_t id, sz = SA_CHUNK, plain;
	struct kvr_slot_desc sd;
	struct t_raw r;
	union ans a;

	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0, "%s", r.w.reason);
	id = sa_store_and_stage(&r, 13100, &sd);
	cr_assert_neq(id, 0, "no staged slot handed out");
	for (unsigned i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++)
		cr_expect_eq(
		    sa_bind(&r, id, KVR_REQ_STAGE, 13101 + i, bad_len[i], &a),
		    -EINVAL, "bind of %llu bytes: %d",
		    (unsigned long long)bad_len[i], a.h.status);
	/* The slot's offset (or its id's neighbour) as a forged id. */
	if (sd.off != id)
		cr_expect_lt(
		    sa_bind(&r, sd.off, KVR_REQ_STAGE, 13105, SA_CHUNK, &a), 0);
	/* An ordinary open store is not a staged slot. */
	cr_assert_gt(t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, &k, &sz, 1, &a,
				sizeof(a)),
		     0);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(ans_slots(&a)[0].status, KVR_SLOT_OK);
	plain = a.h.handle;
	memset((char *)r.pool + ans_slots(&a)[0].off, 0x44, SA_CHUNK);
	cr_expect_eq(sa_bind(&r, plain, 0, 13106, SA_CHUNK, &a), -EINVAL,
		     "a plain transfer was bound: %d", a.h.status);
	sa_expect_served(&r, "the refused binds");
	for (uint64_t i = 13101; i <= 13106; i++)
		cr_expect_eq(sa_lookup(&r, i), 0u, "key %llu was published",
			     (unsigned long long)i);
	/* Both are still what they were. */
	cr_assert_gt(t_raw_call(&r, KVR_OP_COMMIT_STORE, plain, 0, NULL, NULL,
				0, &a, sizeof(a)),
		     0);
	cr_expect_eq(a.h.status, 0, "the plain store was damaged");
	cr_expect_eq(sa_lookup(&r, 13110), 1u);
	cr_expect_eq(sa_bind(&r, id, 0, 13107, SA_CHUNK, &a), 0,
		     "the staged slot was damaged");
	cr_expect_eq(sa_lookup(&r, 13107), 1u);
	t_raw_close(&r);
	expect_good_progress(20, "after the refused binds");
	expect_no_leak("after the refused binds");
	finish();
}

/*
 * A bind of a key another channel is storing right now answers BUSY and
 * one of a key already stored EXISTS (rule 1: success, nothing stored):
 * the staged slot goes back to its worker under the same id, the other
 * worker's bytes are what a reader gets, and the slot still binds a new
 * key afterwards.
 */
Test(hostile, bind_of_a_key_being_stored_elsewhere_is_busy_and_keeps_the_slot)
{
	struct kvr_key k = bad_key(13400);
	const struct kvr_slot_desc *sl;
	uint64_t id, sz = SA_CHUNK, other;
	struct kvr_slot_desc sd;
	struct t_raw r1, r2;
	union ans a;

	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r1), 0, "%s", r1.w.reason);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r2), 0, "%s", r2.w.reason);
	id = sa_store_and_stage(&r1, 13401, &sd);
	cr_assert_neq(id, 0, "no staged slot handed out");
	/* r2 reserves the key and writes its bytes, not committed yet. */
	cr_assert_gt(t_raw_call(&r2, KVR_OP_PREPARE_STORE, 0, 0, &k, &sz, 1, &a,
				sizeof(a)),
		     0);
	cr_assert_eq(a.h.status, 0);
	sl = ans_slots(&a);
	cr_assert_eq(sl[0].status, KVR_SLOT_OK);
	memset((char *)r2.pool + sl[0].off, 0x77, SA_CHUNK);
	other = a.h.handle;
	memset((char *)r1.pool + sd.off, 0x11, SA_CHUNK);
	cr_expect_eq(sa_bind(&r1, id, 0, 13400, SA_CHUNK, &a), 0);
	cr_expect_eq(a.h.value & KVR_COMMIT_OUTCOME_MASK, KVR_SLOT_BUSY,
		     "bind of a reserved key: outcome %llu",
		     (unsigned long long)(a.h.value & KVR_COMMIT_OUTCOME_MASK));
	cr_expect_eq(a.h.count, 1u, "the staged slot did not come back");
	cr_expect_eq(a.h.handle, id, "another slot came back");
	cr_assert_gt(t_raw_call(&r2, KVR_OP_COMMIT_STORE, other, 0, NULL, NULL,
				0, &a, sizeof(a)),
		     0);
	cr_expect_eq(a.h.status, 0, "the other worker's store failed");
	cr_expect_eq(sa_bind(&r1, id, 0, 13400, SA_CHUNK, &a), 0);
	cr_expect_eq(a.h.value & KVR_COMMIT_OUTCOME_MASK, KVR_SLOT_EXISTS);
	cr_expect_eq(a.h.handle, id);
	/* A reader gets r2's bytes, not the staged slot's. */
	cr_assert_gt(t_raw_call(&r1, KVR_OP_PREPARE_RETRIEVE, 0, 0, &k, NULL, 1,
				&a, sizeof(a)),
		     0);
	cr_assert_eq(a.h.count, 1u);
	sl = ans_slots(&a);
	cr_expect_eq(sl[0].len, SA_CHUNK);
	for (uint64_t j = 0; j < SA_CHUNK; j += 997)
		cr_assert_eq(((unsigned char *)r1.pool)[sl[0].off + j], 0x77,
			     "byte %llu is not the committed store's",
			     (unsigned long long)j);
	other = a.h.handle;
	cr_assert_gt(t_raw_call(&r1, KVR_OP_COMMIT_RETRIEVE, other, 0, NULL,
				NULL, 0, &a, sizeof(a)),
		     0);
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(sa_bind(&r1, id, 0, 13402, SA_CHUNK, &a), 0);
	cr_expect_eq(a.h.value & KVR_COMMIT_OUTCOME_MASK, KVR_SLOT_OK,
		     "the slot no longer binds");
	cr_expect_eq(sa_lookup(&r2, 13402), 1u);
	t_raw_close(&r1);
	t_raw_close(&r2);
	expect_good_progress(20, "after the busy binds");
	expect_no_leak("after the busy binds");
	finish();
}

/* The channel of *arg holds exactly two staged slots' bytes. */
static bool chan_reserves_two(void *arg)
{
	const struct t_raw *r = arg;

	return T_CSTAT(&srv, r->w.channel, reserved_bytes) == 2 * SA_CHUNK;
}

/*
 * A worker that asks for a staged slot with every commit and never binds
 * one gets two (the one handed out, the spare) and then none: its
 * reservations stop at two chunks whatever it asks.
 */
Test(hostile, staged_slots_stop_at_two_when_a_worker_asks_and_never_binds)
{
	uint64_t ids[12] = {0};
	struct kvr_slot_desc sd;
	unsigned handed = 0;
	struct t_raw r;

	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0, "%s", r.w.reason);
	for (unsigned i = 0; i < 12; i++) {
		ids[i] = sa_store_and_stage(&r, 13200 + i, &sd);
		if (!ids[i])
			continue;
		handed++;
		for (unsigned j = 0; j < i; j++)
			cr_expect_neq(ids[j], ids[i], "id handed out twice");
	}
	cr_expect_leq(handed, 2u, "%u staged slots handed out", handed);
	cr_expect_geq(handed, 1u, "no staged slot handed out");
	cr_expect(
	    t_wait_until(chan_reserves_two, &r, 5000),
	    "reserved %llu bytes, want two staged chunks",
	    (unsigned long long)T_CSTAT(&srv, r.w.channel, reserved_bytes));
	for (unsigned i = 0; i < 12; i++)
		cr_expect_eq(sa_lookup(&r, 13200 + i), 1u);
	t_raw_close(&r);
	expect_good_progress(20, "after the unbound slots");
	expect_no_leak("after the unbound slots");
	finish();
}

/* What the holder of a big held batch reports (t_shm_anon). */
struct holder_shm {
	_Atomic uint32_t ready;
	uint32_t chan;
	uint32_t submitted;
	uint32_t full; /* -EAGAIN answers: the ring filled and published */
	int rc;	       /* the first unexpected error, or 0 */
};

#define HOLD_N 4000u

/*
 * A libkvring worker with store-ahead on that holds a staged slot, a
 * staged prepare, leases and reservations, then holds a batch of
 * HOLD_N async requests it never flushes (each full ring publishes
 * what it holds; the tail stays held), and waits to be killed.
 */
static void holder_main(struct holder_shm *h)
{
	struct kvr_client_opts o = {0};
	struct kvr_completion comp[256];
	struct kvr_xfer *xs, x0 = {0}, x1 = {0};
	struct kvr_key k = bad_key(13300), k2 = bad_key(13301);
	uint64_t sz = SA_CHUNK;
	struct kvr_client *c;
	char err[200];

	setenv("KVRING_STORE_AHEAD", "1", 1);
	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	h->rc = kvr_connect(&o, &c, err, sizeof(err));
	xs = calloc(HOLD_N, sizeof(*xs));
	if (h->rc < 0 || !xs)
		_exit(1);
	/* The first store asks for a slot, the second uses it, and a
	 * third prepare takes the next staged slot and is left open. */
	for (int i = 0; i < 2; i++) {
		struct kvr_key ki = i ? k2 : k;

		if ((h->rc = kvr_prepare_store(c, &ki, &sz, 1, &x0)) < 0)
			_exit(2);
		memset(x0.slots[0].ptr, 0x61, SA_CHUNK);
		if ((h->rc = kvr_commit_store(c, &x0)) < 0)
			_exit(3);
	}
	k = bad_key(13302);
	if ((h->rc = kvr_prepare_store(c, &k, &sz, 1, &x1)) < 0)
		_exit(4);
	memset(x1.slots[0].ptr, 0x62, SA_CHUNK);
	h->chan = kvr_client_info(c)->channel;
	kvr_submit_hold(c);
	for (uint32_t i = 0; i < HOLD_N; i++) {
		struct kvr_key ks[2] = {bad_key(13300), bad_key(13301)};
		struct kvr_key kn = bad_key(20000 + i);
		uint64_t s4 = 4096;
		int rc;

		switch (i % 3) {
		case 0:
			rc = kvr_submit_lookup(c, ks, 2, true, NULL);
			break;
		case 1:
			rc = kvr_submit_prepare_store(c, &kn, &s4, 1, &xs[i],
						      NULL);
			break;
		default:
			rc =
			    kvr_submit_prepare_retrieve(c, ks, 2, &xs[i], NULL);
			break;
		}
		if (rc == -EAGAIN) {
			/* Full: the ring published what it held. Reap
			 * some answers (keeping what they hold) and go
			 * on holding. */
			h->full++;
			if (kvr_reap(c, comp, 256, 1, 5000) < 0)
				_exit(5);
			i--;
			continue;
		}
		if (rc < 0) {
			h->rc = rc;
			_exit(6);
		}
		h->submitted++;
	}
	atomic_store(&h->ready, 1);
	for (;;)
		pause();
}

static bool holder_ready(void *arg)
{
	return atomic_load(&((struct holder_shm *)arg)->ready) != 0;
}

static bool holder_chan_holds(void *arg)
{
	uint32_t ch = ((struct holder_shm *)arg)->chan;

	return T_CSTAT(&srv, ch, reserved_bytes) > 0 &&
	       T_CSTAT(&srv, ch, pins) > 0 && T_CSTAT(&srv, ch, leases) > 0;
}

/*
 * What kvring-inspect shows with the good worker paused between rounds:
 * one worker, nothing reserved, pinned, leased or in transfer.
 */
static void expect_inspector_shows_nothing_held(void)
{
	static const char *const keys[] = {"reserved_bytes", "reserved_objects",
					   "pins", "leases", "transfers"};
	const char *out;

	atomic_store(&good->pause, 1);
	cr_assert(t_wait_until(good_is_paused, NULL, 10000),
		  "good worker did not pause");
	cr_expect(t_wait_until(only_good_and_nothing_held, NULL, 5000));
	out = hostile_inspect();
	for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_expect_eq(inspect_first(out, keys[i]), 0u,
			     "kvring-inspect shows %s=%llu", keys[i],
			     (unsigned long long)inspect_first(out, keys[i]));
	cr_expect_eq(inspect_first(out, "workers"), 1u,
		     "kvring-inspect shows workers=%llu",
		     (unsigned long long)inspect_first(out, "workers"));
	atomic_store(&good->paused, 0);
	atomic_store(&good->pause, 0);
}

/*
 * kill -9 of a worker holding a staged slot, an open staged prepare, the
 * leases, pins and reservations of thousands of async requests, and a
 * held batch not yet published: kvringd frees all of it, the good worker
 * never notices, and nothing leaks.
 */
Test(hostile, held_batch_of_thousands_is_freed_when_its_worker_is_killed)
{
	struct holder_shm *h = t_shm_anon(sizeof(*h));
	pid_t pid;
	int st = 0;

	expect_good_progress(10, "before");
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		holder_main(h);
	if (!t_wait_until(holder_ready, h, 30000)) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		cr_assert_fail(
		    "holder did not get ready: status %d rc %d (%s), "
		    "%u submitted",
		    st, h->rc, strerror(-h->rc), h->submitted);
	}
	cr_expect_eq(h->submitted, HOLD_N);
	cr_expect_gt(h->full, 0u, "the ring never filled: not a big batch");
	cr_expect(t_wait_until(holder_chan_holds, h, 5000),
		  "the holder holds nothing: reserved %llu pins %llu leases "
		  "%llu",
		  (unsigned long long)T_CSTAT(&srv, h->chan, reserved_bytes),
		  (unsigned long long)T_CSTAT(&srv, h->chan, pins),
		  (unsigned long long)T_CSTAT(&srv, h->chan, leases));
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	expect_good_progress(20, "after the kill");
	expect_no_leak("after the kill of a held batch");
	expect_inspector_shows_nothing_held();
	t_shm_unmap(h, sizeof(*h));
	finish();
}
