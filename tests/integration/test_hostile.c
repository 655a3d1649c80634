/* SPDX-License-Identifier: MIT */
/*
 * Description: hostile workers against a real kvringd, each alongside a
 * well-behaved worker (a forked process using libkvring) that stores,
 * retrieves and verifies bytes the whole time. A hostile worker speaks the
 * protocol by hand (tests/support/t_raw) and first takes real holdings (a
 * committed object, a lease with pins, an open retrieve and an open store
 * reservation), then misbehaves: random bytes as records, ring positions
 * moved backwards or past the capacity, a bogus response-ring head,
 * transfer ids it never got, a request flood without reading answers, a
 * stopped reader, absurd key counts, a handshake abandoned half way, a
 * handshake with the wrong version. For each mode the test checks that the
 * server cuts off (or refuses, or -- for ids it never got -- answers
 * errors to) that worker with a reason in its log, keeps serving the good
 * worker, and leaks nothing: with the good worker paused between
 * operations, every global holding counter is back to zero. A crash, a
 * hang (timeout), a leak or a stalled good worker fails the test.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/doorbell.h>
#include <kvring/kvring.h>

#include "t_raw.h"
#include "t_server.h"
#include "t_shm.h"

/* ---- the well-behaved worker ---- */

/*
 * Shared between the test and its good worker (t_shm_anon, survives the
 * fork). The worker is the only writer of rounds/failures/paused/err; the
 * test the only writer of stop/pause. Relaxed is enough for every field:
 * each is a lone flag or counter, and the test only needs to see values
 * eventually (it polls with t_wait_until); err is read after waitpid().
 */
struct good_shm {
	_Atomic uint32_t stop;
	_Atomic uint32_t pause;
	_Atomic uint32_t paused;
	_Atomic uint64_t rounds;
	_Atomic uint64_t failures;
	char err[256];
};

static struct t_server srv;
static struct good_shm *good;
static pid_t good_pid;

#define GOOD_CHUNKS 4
#define GOOD_BYTES  16384u

static const char *const srv_args[] = {
	"--stall-ms", "300", "--handshake-ms", "500", "--heartbeat-ms", "20",
	"--max-keys", "256", "--ring-bytes", "64K", NULL,
};

static struct kvr_key good_key(uint64_t round, uint32_t i)
{
	struct kvr_key k = { .lo = 0x600d000000000000ull | i, .hi = round };

	return k;
}

static unsigned char good_byte(uint64_t round, uint32_t i, uint64_t j)
{
	return (unsigned char)(round * 131 + i * 7 + j * 13 + (j >> 9));
}

static void good_fail(const char *what, long rc)
{
	if (!good->err[0])
		snprintf(good->err, sizeof(good->err), "%s: %ld", what, rc);
	atomic_fetch_add_explicit(&good->failures, 1, memory_order_relaxed);
}

static bool good_verify(const struct kvr_xfer *x, uint64_t round)
{
	if (x->nslots != GOOD_CHUNKS) {
		good_fail("retrieve: slots", (long)x->nslots);
		return false;
	}
	for (uint32_t i = 0; i < x->nslots; i++) {
		const unsigned char *p = x->slots[i].ptr;

		if (x->slots[i].len != GOOD_BYTES) {
			good_fail("retrieve: len", (long)x->slots[i].len);
			return false;
		}
		for (uint64_t j = 0; j < GOOD_BYTES; j++)
			if (p[j] != good_byte(round, i, j)) {
				good_fail("retrieve: byte differs at", (long)j);
				return false;
			}
	}
	return true;
}

/* One round: store 4 new chunks, retrieve and verify them, and every
 * fourth round also look them up with a pin and redeem the lease. */
static void good_round(struct kvr_client *c, uint64_t round)
{
	struct kvr_key k[GOOD_CHUNKS];
	uint64_t sz[GOOD_CHUNKS], lease = 0;
	struct kvr_xfer x = { 0 };
	long rc;

	for (uint32_t i = 0; i < GOOD_CHUNKS; i++) {
		k[i] = good_key(round, i);
		sz[i] = GOOD_BYTES;
	}
	rc = kvr_prepare_store(c, k, sz, GOOD_CHUNKS, &x);
	if (rc < 0)
		return good_fail("prepare_store", rc);
	for (uint32_t i = 0; i < x.nslots; i++) {
		unsigned char *p = x.slots[i].ptr;

		if (x.slots[i].status != KVR_SLOT_OK) {
			kvr_abort_store(c, &x);
			return good_fail("prepare_store: slot status",
					 x.slots[i].status);
		}
		for (uint64_t j = 0; j < GOOD_BYTES; j++)
			p[j] = good_byte(round, i, j);
	}
	rc = kvr_commit_store(c, &x);
	if (rc < 0)
		return good_fail("commit_store", rc);
	rc = kvr_prepare_retrieve(c, k, GOOD_CHUNKS, &x);
	if (rc < 0)
		return good_fail("prepare_retrieve", rc);
	good_verify(&x, round);
	rc = kvr_commit_retrieve(c, &x);
	if (rc < 0)
		return good_fail("commit_retrieve", rc);
	if (round % 4)
		return;
	rc = kvr_lookup(c, k, GOOD_CHUNKS, &lease);
	if (rc != GOOD_CHUNKS || !lease)
		return good_fail("lookup with pin", rc);
	rc = kvr_prepare_retrieve_lease(c, lease, &x);
	if (rc < 0)
		return good_fail("prepare_retrieve_lease", rc);
	good_verify(&x, round);
	rc = kvr_commit_retrieve(c, &x);
	if (rc < 0)
		good_fail("commit_retrieve (lease)", rc);
}

static void good_main(void)
{
	struct kvr_client_opts o = { 0 };
	struct kvr_client *c;
	char err[200];
	uint64_t round = 1;

	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	if (kvr_connect(&o, &c, err, sizeof(err)) < 0) {
		snprintf(good->err, sizeof(good->err), "connect: %s", err);
		_exit(1);
	}
	while (!atomic_load_explicit(&good->stop, memory_order_relaxed)) {
		if (atomic_load_explicit(&good->pause, memory_order_relaxed)) {
			/* Between rounds: this channel holds nothing now. */
			atomic_store_explicit(&good->paused, 1,
					      memory_order_relaxed);
			usleep(1000);
			continue;
		}
		atomic_store_explicit(&good->paused, 0, memory_order_relaxed);
		good_round(c, round++);
		atomic_fetch_add_explicit(&good->rounds, 1,
					  memory_order_relaxed);
	}
	kvr_close(c);
	_exit(atomic_load(&good->failures) ? 1 : 0);
}

static void setup(void)
{
	t_server_init(&srv);
	t_server_start(&srv, srv_args);
	good = t_shm_anon(sizeof(*good));
	fflush(NULL);
	good_pid = fork();
	cr_assert_geq(good_pid, 0, "fork");
	if (good_pid == 0)
		good_main();
}

static void teardown(void)
{
	if (good_pid > 0) {
		kill(good_pid, SIGKILL);
		waitpid(good_pid, NULL, 0);
		good_pid = 0;
	}
	t_server_cleanup(&srv);
	t_shm_unmap(good, sizeof(*good));
}

TestSuite(hostile, .init = setup, .fini = teardown, .timeout = 60);

static uint64_t good_rounds(void)
{
	return atomic_load_explicit(&good->rounds, memory_order_relaxed);
}

struct progress_arg {
	uint64_t target;
};

static bool rounds_reached(void *arg)
{
	return good_rounds() >= ((struct progress_arg *)arg)->target ||
	       atomic_load(&good->failures) > 0;
}

/* The good worker makes @more rounds from now, without a failure. */
static void expect_good_progress(uint64_t more, const char *when)
{
	struct progress_arg a = { good_rounds() + more };

	cr_assert(t_wait_until(rounds_reached, &a, 10000),
		  "good worker stalled %s: %llu rounds, wanted %llu", when,
		  (unsigned long long)good_rounds(),
		  (unsigned long long)a.target);
	cr_assert_eq(atomic_load(&good->failures), 0,
		     "good worker failed %s: %s", when, good->err);
}

static bool good_is_paused(void *arg)
{
	(void)arg;
	return atomic_load_explicit(&good->paused, memory_order_relaxed);
}

/* Only the good worker is connected, and it holds nothing. */
static bool only_good_and_nothing_held(void *arg)
{
	(void)arg;
	return T_GSTAT(&srv, workers) == 1 &&
	       T_GSTAT(&srv, reserved_bytes) == 0 &&
	       T_GSTAT(&srv, reserved_objects) == 0 &&
	       T_GSTAT(&srv, pins) == 0 && T_GSTAT(&srv, leases) == 0 &&
	       T_GSTAT(&srv, transfers) == 0 &&
	       T_GSTAT(&srv, used_bytes) == T_GSTAT(&srv, committed_bytes);
}

/*
 * The leak check: pause the good worker between rounds (so its own
 * holdings are zero), then every global holding counter must be zero and
 * only one worker connected. Then let it run again.
 */
static void expect_no_leak(const char *when)
{
	atomic_store(&good->pause, 1);
	cr_assert(t_wait_until(good_is_paused, NULL, 10000),
		  "good worker did not pause");
	cr_expect(t_wait_until(only_good_and_nothing_held, NULL, 5000),
		  "leak %s: workers %llu reserved %llu bytes (%llu objects) "
		  "pins %llu leases %llu transfers %llu used %llu committed "
		  "%llu",
		  when, (unsigned long long)T_GSTAT(&srv, workers),
		  (unsigned long long)T_GSTAT(&srv, reserved_bytes),
		  (unsigned long long)T_GSTAT(&srv, reserved_objects),
		  (unsigned long long)T_GSTAT(&srv, pins),
		  (unsigned long long)T_GSTAT(&srv, leases),
		  (unsigned long long)T_GSTAT(&srv, transfers),
		  (unsigned long long)T_GSTAT(&srv, used_bytes),
		  (unsigned long long)T_GSTAT(&srv, committed_bytes));
	atomic_store(&good->paused, 0);
	atomic_store(&good->pause, 0);
}

/* End of every test: the good worker stops cleanly, without a failure,
 * and the server exits 0 on SIGTERM (it did not crash meanwhile). */
static void finish(void)
{
	int st = 0;

	expect_good_progress(20, "at the end");
	atomic_store(&good->stop, 1);
	cr_assert_eq(waitpid(good_pid, &st, 0), good_pid);
	good_pid = 0;
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "good worker: status %d, %s", st, good->err);
	cr_expect_eq(t_server_stop(&srv), 0, "kvringd did not exit cleanly");
}

/* ---- the hostile worker's tools ---- */

union ans {
	struct kvr_resp_hdr h;
	char b[65536];
};

static struct kvr_key bad_key(uint64_t i)
{
	struct kvr_key k = { .lo = 0xbadbadbadull ^ i, .hi = i * 977 };

	return k;
}

static bool chan_holds(void *arg)
{
	const struct t_raw *r = arg;
	uint32_t ch = r->w.channel;

	return T_CSTAT(&srv, ch, reserved_bytes) > 0 &&
	       T_CSTAT(&srv, ch, pins) >= 4 && T_CSTAT(&srv, ch, leases) == 1 &&
	       T_CSTAT(&srv, ch, transfers) == 2;
}

/*
 * Connect a hostile worker and have it take real holdings: two committed
 * objects, a lease pinning them, an open retrieve pinning them again, and
 * an open store reservation. After it is cut off, all of it must be gone.
 */
static void hostile_connect_and_hold(struct t_raw *r, uint64_t salt)
{
	struct kvr_key k[3] = { bad_key(salt), bad_key(salt + 1),
				bad_key(salt + 2) };
	uint64_t sz[3] = { 8192, 12288, 20000 };
	const struct kvr_slot_desc *sl;
	union ans a;
	uint64_t x;

	cr_assert_eq(t_raw_connect(srv.sock, 0, r), 0, "%s", r->w.reason);
	cr_assert_not_null(r->pool);
	t_raw_call(r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 2, &a, sizeof(a));
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(a.h.count, 2);
	sl = (const struct kvr_slot_desc *)(&a.h + 1);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(sl[i].status, KVR_SLOT_OK);
		memset((char *)r->pool + sl[i].off, 0x42, sl[i].len);
	}
	x = a.h.handle;
	t_raw_call(r, KVR_OP_COMMIT_STORE, x, 0, NULL, NULL, 0, &a, sizeof(a));
	cr_assert_eq(a.h.status, 0);
	t_raw_call(r, KVR_OP_LOOKUP, 0, KVR_REQ_PIN, k, NULL, 2, &a,
		   sizeof(a));
	cr_assert_eq(a.h.value, 2);
	cr_assert_neq(a.h.handle, 0, "no lease");
	t_raw_call(r, KVR_OP_PREPARE_RETRIEVE, 0, 0, k, NULL, 2, &a,
		   sizeof(a));
	cr_assert_eq(a.h.count, 2);
	t_raw_call(r, KVR_OP_PREPARE_STORE, 0, 0, &k[2], &sz[2], 1, &a,
		   sizeof(a));
	cr_assert_eq(a.h.status, 0);
	cr_assert(t_wait_until(chan_holds, r, 5000),
		  "hostile holdings not visible: reserved %llu pins %llu "
		  "leases %llu transfers %llu",
		  (unsigned long long)T_CSTAT(&srv, r->w.channel,
					      reserved_bytes),
		  (unsigned long long)T_CSTAT(&srv, r->w.channel, pins),
		  (unsigned long long)T_CSTAT(&srv, r->w.channel, leases),
		  (unsigned long long)T_CSTAT(&srv, r->w.channel, transfers));
}

static struct kvr_ring_shm *req_shm(struct t_raw *r)
{
	return (struct kvr_ring_shm *)((char *)r->ch + r->ch->req_ring_off);
}

static struct kvr_ring_shm *resp_shm(struct t_raw *r)
{
	return (struct kvr_ring_shm *)((char *)r->ch + r->ch->resp_ring_off);
}

/* Publish a raw tail value on our request ring and ring the bell. */
static void scribble_tail(struct t_raw *r, uint64_t tail)
{
	/* Release: like a real publish, so the server reads our bytes. */
	atomic_store_explicit(&req_shm(r)->tail, tail, memory_order_release);
	kvr_bell_notify(&r->ch->req_bell, r->req_efd);
}

/* Wait for the server to cut @r off; the log must say @reason. */
static void expect_cut_off(struct t_raw *r, const char *reason)
{
	cr_expect(t_raw_wait_hangup(r, t_timeout_ms(10000)),
		  "the hostile worker was not disconnected");
	cr_expect(t_server_log_has(&srv, reason),
		  "the log does not say \"%s\"", reason);
	t_raw_close(r);
}

/* Send one request of @op with @h as header and nothing after it. */
static int push_raw(struct t_raw *r, uint32_t op, const void *body,
		    uint32_t len)
{
	void *p;
	int rc = kvr_ring_claim(&r->req, op, len, &p);

	if (rc < 0)
		return rc;
	memcpy(p, body, len);
	kvr_ring_commit(&r->req);
	kvr_bell_notify(&r->ch->req_bell, r->req_efd);
	return 0;
}

/* ---- the modes ---- */

Test(hostile, worker_is_cut_off_when_it_writes_random_bytes_as_records)
{
	struct t_raw r;
	struct kvr_ring_shm *rs;
	uint64_t pos, off, len, seed = 12345;

	expect_good_progress(10, "before");
	hostile_connect_and_hold(&r, 100);
	rs = req_shm(&r);
	pos = atomic_load(&rs->tail);
	off = pos & (r.w.req_ring_cap - 1);
	len = r.w.req_ring_cap - off < 4096 ? r.w.req_ring_cap - off : 4096;
	for (uint64_t i = 0; i < len; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		rs->data[off + i] = (unsigned char)(seed >> 56);
	}
	scribble_tail(&r, pos + len);
	expect_cut_off(&r, "request ring damaged");
	expect_good_progress(20, "after the random bytes");
	expect_no_leak("after the random bytes");
	cr_expect_eq(T_GSTAT(&srv, protocol_errors), 1);
	finish();
}

Test(hostile, worker_is_cut_off_when_its_request_tail_goes_backwards)
{
	struct t_raw r;
	uint64_t tail;

	hostile_connect_and_hold(&r, 200);
	tail = atomic_load(&req_shm(&r)->tail);
	cr_assert_geq(tail, 64);
	scribble_tail(&r, tail - 64);
	expect_cut_off(&r, "request ring damaged");
	expect_good_progress(20, "after the tail went backwards");
	expect_no_leak("after the tail went backwards");
	finish();
}

Test(hostile, worker_is_cut_off_when_its_request_tail_passes_capacity)
{
	struct t_raw r;
	uint64_t head;

	hostile_connect_and_hold(&r, 300);
	head = atomic_load(&req_shm(&r)->head);
	scribble_tail(&r, head + r.w.req_ring_cap + 4096);
	expect_cut_off(&r, "request ring damaged");
	expect_good_progress(20, "after the tail passed the capacity");
	expect_no_leak("after the tail passed the capacity");
	finish();
}

Test(hostile, worker_is_cut_off_when_its_response_head_is_bogus)
{
	struct kvr_req_hdr h = { 0 };
	struct t_raw r;
	uint64_t head;

	hostile_connect_and_hold(&r, 400);
	/* Claim to have consumed far more than the server ever wrote. */
	head = atomic_load(&resp_shm(&r)->head);
	atomic_store(&resp_shm(&r)->head, head + (1u << 20));
	/* Keep asking until the server needs the head: it must refuse it
	 * rather than overwrite answers it thinks were consumed. */
	for (int i = 0; i < 200000 && !t_raw_wait_hangup(&r, 0); i++) {
		h.req_id = (uint64_t)i + 1;
		if (push_raw(&r, KVR_OP_PING, &h, sizeof(h)) < 0)
			usleep(200);
	}
	expect_cut_off(&r, "protocol error");
	expect_good_progress(20, "after the bogus head");
	expect_no_leak("after the bogus head");
	finish();
}

Test(hostile, worker_gets_errors_not_cut_off_when_it_commits_ids_it_never_got)
{
	struct t_raw r;
	union ans a;
	uint64_t errs = 0, own;
	uint32_t ops[] = { KVR_OP_COMMIT_STORE, KVR_OP_ABORT_STORE,
			   KVR_OP_COMMIT_RETRIEVE, KVR_OP_RELEASE };

	hostile_connect_and_hold(&r, 500);
	/* Every small id (the good worker's live transfers and leases are
	 * among them), and a few large ones: none may be ours to use. The
	 * hostile worker's own open ids are skipped: its last prepare_store
	 * answer and its lease are the ones it did get. */
	t_raw_call(&r, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a, sizeof(a));
	for (uint64_t id = 1; id < 600; id++) {
		for (unsigned k = 0; k < 4; k++) {
			int len = t_raw_call(&r, ops[k], id, 0, NULL, NULL, 0,
					     &a, sizeof(a));

			cr_assert_geq(len, (int)sizeof(a.h), "no answer");
			if (a.h.status < 0)
				errs++;
		}
		/* Redeeming a lease id that was never handed out. */
		t_raw_call(&r, KVR_OP_PREPARE_RETRIEVE, id + 1000000,
			   KVR_REQ_BY_LEASE, NULL, NULL, 0, &a, sizeof(a));
		cr_expect_lt(a.h.status, 0, "lease %llu redeemed",
			     (unsigned long long)(id + 1000000));
	}
	own = 4 * 599 - errs;
	/* At most the hostile's own ids (2 transfers, 1 lease: each may be
	 * hit by two ops at most) succeed; the good worker saw nothing. */
	cr_expect_leq(own, 6, "%llu foreign ids accepted",
		      (unsigned long long)own);
	expect_good_progress(20, "after the foreign commits");
	cr_expect_gt(T_CSTAT(&srv, r.w.channel, errors[kvr_err_slot(-ENOENT)]) +
			     T_CSTAT(&srv, r.w.channel,
				     errors[kvr_err_slot(-EPERM)]),
		     0, "errors not counted on the channel");
	/* Still connected and served. */
	cr_expect_eq(t_raw_call(&r, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a,
				sizeof(a)),
		     (int)sizeof(a.h));
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(T_GSTAT(&srv, protocol_errors), 0);
	t_raw_close(&r);
	expect_no_leak("after the hostile worker left");
	finish();
}

Test(hostile, worker_is_cut_off_when_it_floods_without_reading)
{
	struct kvr_req_hdr h = { 0 };
	struct t_raw r;
	uint64_t sent = 0;
	struct timespec t0, t;

	hostile_connect_and_hold(&r, 600);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Push as fast as the ring takes it, retrying at once when full,
	 * never reading an answer; 20 s at most. */
	for (;;) {
		if ((sent & 255) == 0) {
			if (t_raw_wait_hangup(&r, 0))
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 20)
				break;
		}
		h.req_id = ++sent;
		(void)push_raw(&r, KVR_OP_PING, &h, sizeof(h));
	}
	expect_cut_off(&r, "unresponsive");
	expect_good_progress(20, "after the flood");
	expect_no_leak("after the flood");
	finish();
}

Test(hostile, worker_is_cut_off_when_it_never_reads_its_response_ring)
{
	struct kvr_req_hdr h = { 0 };
	struct t_raw r;

	hostile_connect_and_hold(&r, 700);
	/* Enough requests to fill the response ring, at a normal pace, then
	 * silence: a hung worker that still holds a reservation and pins. */
	for (uint32_t i = 0; i < r.w.resp_ring_cap / 40 + 64; i++) {
		h.req_id = 1000 + i;
		while (push_raw(&r, KVR_OP_PING, &h, sizeof(h)) == -EAGAIN)
			usleep(1000);
	}
	expect_cut_off(&r, "unresponsive");
	expect_good_progress(20, "after the hung worker");
	expect_no_leak("after the hung worker");
	finish();
}

Test(hostile, worker_is_cut_off_when_it_claims_a_huge_key_count)
{
	struct kvr_req_hdr h = { .req_id = 1, .count = UINT32_MAX };
	struct t_raw r1, r2, r3;
	static char big[sizeof(struct kvr_req_hdr) +
			257 * sizeof(struct kvr_key)];
	struct kvr_key *k = (struct kvr_key *)(big + sizeof(h));
	static uint64_t sz[256];
	static struct kvr_key k3[256];
	union ans *a = malloc(sizeof(*a));

	/* 1: a count of 2^32-1 in a record that carries no keys at all. */
	hostile_connect_and_hold(&r1, 800);
	cr_assert_eq(push_raw(&r1, KVR_OP_LOOKUP, &h, sizeof(h)), 0);
	expect_cut_off(&r1, "malformed request");
	/* 2: one key more than --max-keys 256, and all of them present. */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r2), 0);
	h.count = 257;
	memcpy(big, &h, sizeof(h));
	for (uint32_t i = 0; i < 257; i++)
		k[i] = bad_key(900 + i);
	cr_assert_eq(push_raw(&r2, KVR_OP_LOOKUP, big, sizeof(big)), 0);
	expect_cut_off(&r2, "malformed request");
	/* 3: a legal count of 256 keys with absurd sizes: answered per key
	 * (INVALID), not a protocol error, nothing reserved. */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r3), 0);
	for (uint32_t i = 0; i < 256; i++) {
		k3[i] = bad_key(2000 + i);
		sz[i] = i % 2 ? UINT64_MAX : 0;
	}
	cr_assert_gt(t_raw_call(&r3, KVR_OP_PREPARE_STORE, 0, 0, k3, sz, 256,
				a, sizeof(*a)),
		     0);
	if (a->h.status == 0) {
		const struct kvr_slot_desc *sl =
			(const struct kvr_slot_desc *)(&a->h + 1);

		for (uint32_t i = 0; i < a->h.count; i++)
			cr_expect_eq(sl[i].status, KVR_SLOT_INVALID,
				     "key %u size %llu: status %d", i,
				     (unsigned long long)sz[i], sl[i].status);
		t_raw_call(&r3, KVR_OP_ABORT_STORE, a->h.handle, 0, NULL, NULL,
			   0, a, sizeof(*a));
	}
	cr_expect(!t_raw_wait_hangup(&r3, 100), "sane request cut off");
	t_raw_close(&r3);
	free(a);
	expect_good_progress(20, "after the huge counts");
	expect_no_leak("after the huge counts");
	cr_expect_eq(T_GSTAT(&srv, protocol_errors), 2);
	finish();
}

/* Whether the server closed @fd (a refusal's welcome may come first). */
static bool sock_closed(int fd)
{
	char b[512];
	ssize_t n;

	while ((n = recv(fd, b, sizeof(b), MSG_DONTWAIT)) > 0)
		;
	return n == 0 || (n < 0 && errno != EAGAIN);
}

static bool pending_gone(void *arg)
{
	(void)arg;
	return T_GSTAT(&srv, workers) == 1;
}

Test(hostile, server_cleans_up_when_worker_disconnects_mid_handshake)
{
	struct kvr_hello hello = { .magic = KVR_PROTO_MAGIC,
				   .version = KVR_PROTO_VERSION };
	struct kvr_frame f = { .len = sizeof(hello), .type = KVR_FRAME_HELLO };
	int fd;

	hello.pid = (int32_t)getpid();
	t_ns_default(&hello.ns);
	/* 1: half a hello, then gone. */
	fd = t_raw_sock(srv.sock);
	cr_assert_geq(fd, 0);
	cr_assert_eq(send(fd, &f, sizeof(f), MSG_NOSIGNAL), (ssize_t)sizeof(f));
	cr_assert_eq(send(fd, &hello, 40, MSG_NOSIGNAL), 40);
	usleep(50000);
	close(fd);
	/* 2: a whole hello, then gone before reading the welcome and its
	 * descriptors (the server has claimed a channel by then). */
	fd = t_raw_sock(srv.sock);
	cr_assert_eq(t_raw_send_frame(fd, KVR_FRAME_HELLO, &hello,
				      sizeof(hello)),
		     0);
	close(fd);
	/* 3: connected and silent: dropped at the handshake deadline. */
	fd = t_raw_sock(srv.sock);
	cr_assert_geq(fd, 0);
	expect_good_progress(10, "during the silent handshake");
	cr_expect(t_wait_until(pending_gone, NULL, 5000));
	usleep(700000); /* past --handshake-ms 500 */
	cr_expect(sock_closed(fd), "silent client not dropped");
	close(fd);
	cr_expect(t_server_log_has(&srv, "left during the handshake"));
	cr_expect(t_server_log_has(&srv, "handshake timeout"));
	expect_good_progress(20, "after the abandoned handshakes");
	expect_no_leak("after the abandoned handshakes");
	finish();
}

Test(hostile, worker_is_refused_when_hello_has_wrong_version)
{
	struct kvr_hello hello = { .magic = KVR_PROTO_MAGIC,
				   .version = KVR_PROTO_VERSION + 1 };
	struct kvr_welcome w;
	int fd, fds[4], nfds;
	char b[8];

	hello.pid = (int32_t)getpid();
	t_ns_default(&hello.ns);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			hello.version = KVR_PROTO_VERSION;
			hello.magic = 0xdeadbeef;
		}
		fd = t_raw_sock(srv.sock);
		cr_assert_geq(fd, 0);
		cr_assert_eq(t_raw_send_frame(fd, KVR_FRAME_HELLO, &hello,
					      sizeof(hello)),
			     0);
		cr_assert_eq(t_raw_read_welcome(fd, &w, fds, &nfds, 5000), 0);
		cr_expect_lt(w.status, 0, "pass %d accepted", pass);
		if (pass == 0)
			cr_expect_eq(w.status, -EPROTO, "status %d", w.status);
		cr_expect_eq(nfds, 0, "a refusal carries no fds");
		cr_expect_neq(w.reason[0], 0, "no reason given");
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		cr_expect_eq(recv(fd, b, sizeof(b), 0), 0,
			     "socket left open after the refusal");
		close(fd);
	}
	cr_expect(t_server_log_has(&srv, "refused worker"));
	cr_expect_eq(T_GSTAT(&srv, handshake_refused), 2);
	expect_good_progress(20, "after the refusals");
	expect_no_leak("after the refusals");
	finish();
}
