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
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/clock.h>
#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/kvring.h>
#include <kvring/proc.h>

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

static struct kvrd srv;
static struct good_shm *good;
static pid_t good_pid;
/* The uid the good worker runs as (0: the test's own); a test that sets
 * it restarts the server under --group with that gid. */
static uid_t good_uid;

#define GOOD_CHUNKS 4
#define GOOD_BYTES  16384u

/* --xfer-ms and --lease-ms are short so that a stopped worker's holdings
 * are reclaimed within the test (regress_12_*). */
static const char *const srv_args[] = {
    "--stall-ms",
    "300",
    "--handshake-ms",
    "500",
    "--heartbeat-ms",
    "20",
    "--max-keys",
    "256",
    "--ring-bytes",
    "64K",
    "--xfer-ms",
    "2000",
    "--lease-ms",
    "2000",
    NULL,
};

static struct kvr_key good_key(uint64_t round, uint32_t i)
{
	struct kvr_key k = {.lo = 0x600d000000000000ull | i, .hi = round};

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
	struct kvr_xfer x = {0};
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
	struct kvr_client_opts o = {0};
	struct kvr_client *c;
	char err[200];
	uint64_t round = 1;

	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	if (good_uid) {
		gid_t g = (gid_t)good_uid;

		if (setgroups(1, &g) < 0 || setgid(g) < 0 ||
		    setuid(good_uid) < 0) {
			snprintf(good->err, sizeof(good->err),
				 "become uid %u: %s", (unsigned)good_uid,
				 strerror(errno));
			_exit(1);
		}
	}
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

static void good_start(void)
{
	fflush(NULL);
	good_pid = fork();
	cr_assert_geq(good_pid, 0, "fork");
	if (good_pid == 0)
		good_main();
}

static void setup(void)
{
	t_server_init(&srv);
	t_server_start(&srv, srv_args);
	good = t_shm_anon(sizeof(*good));
	good_start();
}

/*
 * For a test that needs other server options: stop the good worker and
 * the server, start a server with srv_args plus @extra, and a new good
 * worker against it.
 */
static void restart_with(const char *const *extra)
{
	const char *args[64];
	int n = 0;

	kill(good_pid, SIGKILL);
	waitpid(good_pid, NULL, 0);
	good_pid = 0;
	cr_assert_eq(t_server_stop(&srv), 0);
	t_server_cleanup(&srv);
	for (int i = 0; srv_args[i]; i++)
		args[n++] = srv_args[i];
	for (int i = 0; extra[i] && n < 63; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	t_server_init(&srv);
	t_server_start(&srv, args);
	memset(good, 0, sizeof(*good));
	good_start();
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
	struct progress_arg a = {good_rounds() + more};

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
	       T_GSTAT(&srv, used_bytes) == T_GSTAT(&srv, committed_bytes) &&
	       atomic_load(&srv.hdr->quar.xfers) == 0 &&
	       atomic_load(&srv.hdr->quar.detached) == 0;
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
	struct kvr_key k = {.lo = 0xbadbadbadull ^ i, .hi = i * 977};

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
	struct kvr_key k[3] = {bad_key(salt), bad_key(salt + 1),
			       bad_key(salt + 2)};
	uint64_t sz[3] = {8192, 12288, 20000};
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
	t_raw_call(r, KVR_OP_LOOKUP, 0, KVR_REQ_PIN, k, NULL, 2, &a, sizeof(a));
	cr_assert_eq(a.h.value, 2);
	cr_assert_neq(a.h.handle, 0, "no lease");
	t_raw_call(r, KVR_OP_PREPARE_RETRIEVE, 0, 0, k, NULL, 2, &a, sizeof(a));
	cr_assert_eq(a.h.count, 2);
	t_raw_call(r, KVR_OP_PREPARE_STORE, 0, 0, &k[2], &sz[2], 1, &a,
		   sizeof(a));
	cr_assert_eq(a.h.status, 0);
	cr_assert(
	    t_wait_until(chan_holds, r, 5000),
	    "hostile holdings not visible: reserved %llu pins %llu "
	    "leases %llu transfers %llu",
	    (unsigned long long)T_CSTAT(&srv, r->w.channel, reserved_bytes),
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
	cr_expect(t_server_log_has(&srv, reason), "the log does not say \"%s\"",
		  reason);
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

/* Publish a well-formed ping (encoded by kvr_req_encode) and ring. */
static int push_ping(struct t_raw *r, uint64_t req_id)
{
	struct kvr_req_view v = {.op = KVR_OP_PING, .hdr = {.req_id = req_id}};

	return t_raw_push(r, &v, true);
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

/* The server announced it sleeps on @arg's requests (struct t_raw). */
static bool server_sleeps_on(void *arg)
{
	struct t_raw *r = arg;

	return atomic_load_explicit(&r->ch->req_bell.sleeping,
				    memory_order_relaxed) != 0;
}

/*
 * The server finds requests by their header words and reads the tail
 * only in its re-check before it sleeps (docs/ring.md): a tail behind
 * what it took by header may be a store still on its way. So the tail
 * must go back below one the server has read: wait until it sleeps (its
 * re-check read the tail) before scribbling.
 */
Test(hostile, worker_is_cut_off_when_its_request_tail_goes_backwards)
{
	struct t_raw r;
	uint64_t tail;

	hostile_connect_and_hold(&r, 200);
	tail = atomic_load(&req_shm(&r)->tail);
	cr_assert_geq(tail, 64);
	cr_assert(t_wait_until(server_sleeps_on, &r, 10000),
		  "kvringd never went to sleep on the hostile channel");
	usleep(20000); /* past its re-check, into the kernel */
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
	struct t_raw r;
	uint64_t head;

	hostile_connect_and_hold(&r, 400);
	/* Claim to have consumed far more than the server ever wrote. */
	head = atomic_load(&resp_shm(&r)->head);
	atomic_store(&resp_shm(&r)->head, head + (1u << 20));
	/* Keep asking until the server needs the head: it must refuse it
	 * rather than overwrite answers it thinks were consumed. */
	for (int i = 0; i < 200000 && !t_raw_wait_hangup(&r, 0); i++) {
		if (push_ping(&r, (uint64_t)i + 1) < 0)
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
	uint32_t ops[] = {KVR_OP_COMMIT_STORE, KVR_OP_ABORT_STORE,
			  KVR_OP_COMMIT_RETRIEVE, KVR_OP_RELEASE};

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
	cr_expect_gt(
	    T_CSTAT(&srv, r.w.channel, errors[kvr_err_slot(-ENOENT)]) +
		T_CSTAT(&srv, r.w.channel, errors[kvr_err_slot(-EPERM)]),
	    0, "errors not counted on the channel");
	/* Still connected and served. */
	cr_expect_eq(
	    t_raw_call(&r, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a, sizeof(a)),
	    (int)sizeof(a.h));
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(T_GSTAT(&srv, protocol_errors), 0);
	t_raw_close(&r);
	expect_no_leak("after the hostile worker left");
	finish();
}

Test(hostile, worker_is_cut_off_when_it_floods_without_reading)
{
	struct t_raw r;
	uint64_t sent = 0;
	uint64_t t0;

	hostile_connect_and_hold(&r, 600);
	t0 = kvr_clock_now_ns();
	/* Push as fast as the ring takes it, retrying at once when full,
	 * never reading an answer; 20 s at most. */
	for (;;) {
		if ((sent & 255) == 0) {
			if (t_raw_wait_hangup(&r, 0))
				break;
			if (kvr_clock_now_ns() - t0 > 20 * KVR_CLOCK_NS_PER_S)
				break;
		}
		(void)push_ping(&r, ++sent);
	}
	expect_cut_off(&r, "unresponsive");
	expect_good_progress(20, "after the flood");
	expect_no_leak("after the flood");
	finish();
}

Test(hostile, worker_is_cut_off_when_it_never_reads_its_response_ring)
{
	struct t_raw r;

	hostile_connect_and_hold(&r, 700);
	/* Enough requests to fill the response ring, at a normal pace, then
	 * silence: a hung worker that still holds a reservation and pins. */
	for (uint32_t i = 0; i < r.w.resp_ring_cap / 40 + 64; i++) {
		while (push_ping(&r, 1000 + i) == -EAGAIN)
			usleep(1000);
	}
	expect_cut_off(&r, "unresponsive");
	expect_good_progress(20, "after the hung worker");
	expect_no_leak("after the hung worker");
	finish();
}

Test(hostile, worker_is_cut_off_when_it_claims_a_huge_key_count)
{
	struct kvr_req_view v = {.op = KVR_OP_LOOKUP, .hdr = {.req_id = 1}};
	struct t_raw r1, r2, r3;
	static char big[32 + 257 * sizeof(struct kvr_key)];
	static struct kvr_key k[257];
	static uint64_t sz[256];
	static struct kvr_key k3[256];
	union ans *a = malloc(sizeof(*a));
	_Alignas(8) char rec[32];

	/* 1: a count of 2^32-1 in a record that carries no keys at all: a
	 * good keyless lookup from the encoder, then the count damaged. */
	hostile_connect_and_hold(&r1, 800);
	cr_assert_eq(kvr_req_encode(&v, rec, sizeof(rec)), (int)sizeof(rec));
	((struct kvr_req_hdr *)(void *)rec)->count = UINT32_MAX;
	cr_assert_eq(push_raw(&r1, KVR_OP_LOOKUP, rec, sizeof(rec)), 0);
	expect_cut_off(&r1, "malformed request");
	/* 2: one key more than --max-keys 256, and all of them present (the
	 * protocol allows it, this server does not). */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r2), 0);
	for (uint32_t i = 0; i < 257; i++)
		k[i] = bad_key(900 + i);
	v.hdr.count = 257;
	v.keys = k;
	cr_assert_eq(kvr_req_encode(&v, big, sizeof(big)), (int)sizeof(big));
	cr_assert_eq(push_raw(&r2, KVR_OP_LOOKUP, big, sizeof(big)), 0);
	expect_cut_off(&r2, "malformed request");
	/* 3: a legal count of 256 keys with absurd sizes: answered per key
	 * (INVALID), not a protocol error, nothing reserved. */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r3), 0);
	for (uint32_t i = 0; i < 256; i++) {
		k3[i] = bad_key(2000 + i);
		sz[i] = i % 2 ? UINT64_MAX : 0;
	}
	cr_assert_gt(t_raw_call(&r3, KVR_OP_PREPARE_STORE, 0, 0, k3, sz, 256, a,
				sizeof(*a)),
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
	struct kvr_hello hello = {.magic = KVR_PROTO_MAGIC,
				  .version = KVR_PROTO_VERSION};
	struct kvr_frame f = {.len = sizeof(hello), .type = KVR_FRAME_HELLO};
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
	cr_assert_eq(
	    t_raw_send_frame(fd, KVR_FRAME_HELLO, &hello, sizeof(hello)), 0);
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
	struct kvr_hello hello = {.magic = KVR_PROTO_MAGIC,
				  .version = KVR_PROTO_VERSION + 1};
	struct kvr_welcome w;
	int fd, fds[T_RAW_FDS], nfds;
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

/* ---- issue 12: workers that attack the others ---- */

static const struct kvr_slot_desc *ans_slots(const union ans *a)
{
	return (const struct kvr_slot_desc *)(&a->h + 1);
}

/*
 * Observed on main: one prepare_store of a pool-sized key was accepted,
 * evicted every other worker's objects, and every other store got NOROOM
 * while the reservation lived. Now the per-key limit answers "quota", and
 * many large keys stop at the channel's reserve quota; the good worker
 * never notices.
 */
Test(hostile, regress_12_pool_sized_key_is_refused_by_quota_and_evicts_nobody)
{
	union ans *a = malloc(sizeof(*a));
	struct kvr_key k[8];
	uint64_t sz[8], quota, ok = 0, quota_n = 0;
	struct t_raw r;

	cr_assert_not_null(a);
	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0, "%s", r.w.reason);
	k[0] = bad_key(4000);
	sz[0] = r.w.pool_bytes;
	t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 1, a, sizeof(*a));
	cr_assert_eq(a->h.status, 0, "status %d", a->h.status);
	cr_assert_eq(a->h.count, 1);
	cr_expect_eq(ans_slots(a)[0].status, KVR_SLOT_QUOTA,
		     "a pool-sized key got status %d", ans_slots(a)[0].status);
	if (a->h.handle) /* main: it holds the whole pool; let it go */
		t_raw_call(&r, KVR_OP_ABORT_STORE, a->h.handle, 0, NULL, NULL,
			   0, a, sizeof(*a));
	expect_good_progress(20, "after the pool-sized key");
	/* Eight keys of an eighth of the pool each (the default per-key
	 * limit): only what fits in the 25% reserve quota is reserved. */
	quota = srv.hdr->quota_reserved_bytes;
	for (uint32_t i = 0; i < 8; i++) {
		k[i] = bad_key(4100 + i);
		sz[i] = r.w.pool_bytes / 8;
	}
	t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 8, a, sizeof(*a));
	cr_assert_eq(a->h.status, 0, "status %d", a->h.status);
	for (uint32_t i = 0; i < a->h.count; i++) {
		ok += ans_slots(a)[i].status == KVR_SLOT_OK;
		quota_n += ans_slots(a)[i].status == KVR_SLOT_QUOTA;
	}
	cr_expect_gt(quota, 0u, "no reserve quota in the header");
	cr_expect_leq(ok * (r.w.pool_bytes / 8), quota,
		      "%llu keys of %llu bytes reserved, quota %llu",
		      (unsigned long long)ok,
		      (unsigned long long)(r.w.pool_bytes / 8),
		      (unsigned long long)quota);
	cr_expect_eq(ok + quota_n, 8u);
	cr_expect_gt(T_CSTAT(&srv, r.w.channel, quota_denied) +
			 T_GSTAT(&srv, quota_denied),
		     0u, "quota refusals not counted");
	expect_good_progress(20, "while the hostile worker holds its quota");
	t_raw_call(&r, KVR_OP_ABORT_STORE, a->h.handle, 0, NULL, NULL, 0, a,
		   sizeof(*a));
	t_raw_close(&r);
	free(a);
	expect_no_leak("after the quota test");
	finish();
}

/* What a worker that stops itself reports back (t_shm_anon). */
struct stopper_shm {
	_Atomic uint32_t ready;
	uint32_t chan;
	int commit_store_rc;
	int commit_retrieve_rc;
	int connect_rc;
	char store_msg[200];
};

static struct kvr_key stop_key(uint32_t i)
{
	struct kvr_key k = {.lo = 0x5709000000000000ull | i, .hi = 77};

	return k;
}

/*
 * A worker that holds everything a worker can hold (a lease, an open
 * retrieve with pins, an open store with a reservation) and then stops
 * itself with SIGSTOP. After SIGCONT it commits both transfers.
 */
static void stopper_main(struct stopper_shm *st)
{
	struct kvr_client_opts o = {0};
	struct kvr_key k[3] = {stop_key(0), stop_key(1), stop_key(2)};
	uint64_t sz[3] = {8192, 8192, 8192}, lease = 0;
	struct kvr_xfer xs = {0}, xr = {0};
	struct kvr_client *c;
	char err[200];

	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	st->connect_rc = kvr_connect(&o, &c, err, sizeof(err));
	if (st->connect_rc < 0)
		_exit(1);
	if (kvr_prepare_store(c, k, sz, 2, &xs) < 0 || xs.nslots != 2)
		_exit(2);
	for (uint32_t i = 0; i < 2; i++)
		memset(xs.slots[i].ptr, 0x5a, xs.slots[i].len);
	if (kvr_commit_store(c, &xs) < 0)
		_exit(3);
	if (kvr_lookup(c, k, 2, &lease) != 2 || !lease)
		_exit(4);
	if (kvr_prepare_retrieve(c, k, 2, &xr) < 0 || xr.nslots != 2)
		_exit(5);
	if (kvr_prepare_store(c, &k[2], &sz[2], 1, &xs) < 0 || xs.nslots != 1)
		_exit(6);
	memset(xs.slots[0].ptr, 0x5b, xs.slots[0].len);
	st->chan = kvr_client_info(c)->channel;
	atomic_store(&st->ready, 1);
	raise(SIGSTOP);
	st->commit_store_rc = kvr_commit_store(c, &xs);
	snprintf(st->store_msg, sizeof(st->store_msg), "%s",
		 kvr_client_errmsg(c));
	st->commit_retrieve_rc = kvr_commit_retrieve(c, &xr);
	kvr_close(c);
	_exit(0);
}

static bool stopper_ready(void *arg)
{
	return atomic_load(&((struct stopper_shm *)arg)->ready) != 0;
}

/* Its transfers reclaimed and its lease expired: what is left is its
 * quarantine, the reservation and the two pins it may still be using. */
static bool stopped_chan_holds_only_quarantine(void *arg)
{
	uint32_t ch = ((struct stopper_shm *)arg)->chan;

	return T_CSTAT(&srv, ch, leases) == 0 &&
	       T_CSTAT(&srv, ch, transfers) == 0 &&
	       T_CSTAT(&srv, ch, quar_slots) == 3 &&
	       T_CSTAT(&srv, ch, reserved_bytes) ==
		   T_CSTAT(&srv, ch, quar_bytes) - 2 * 8192u;
}

/* kvring-inspect's text output names the age of a holding and the quota. */
static void expect_inspector_shows_age(void)
{
	char cmd[512], line[512];
	bool age = false, quota = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-inspect --name %s 2>&1",
		 KVR_BIN_DIR, srv.name);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long v;
		const char *q = strstr(line, "oldest_holding_age_ms=");

		if (q && sscanf(q, "oldest_holding_age_ms=%llu", &v) == 1 &&
		    v > 0)
			age = true;
		if (strstr(line, "quota.reserved_quota_bytes="))
			quota = true;
	}
	pclose(p);
	cr_expect(age, "kvring-inspect shows no holding age");
	cr_expect(quota, "kvring-inspect shows no quota");
}

/*
 * A worker stopped with SIGSTOP while it holds a reservation, a retrieve
 * and a lease: every open transfer has a deadline (--xfer-ms 2000 here,
 * --lease-ms 2000 for the lease). Past it the lease is gone and the
 * transfers are no longer open; their slots stay in quarantine, since the
 * worker may still be copying, until its late commits (which say the
 * transfers expired) answer for them.
 */
Test(hostile, stopped_worker_holds_only_quarantine_past_its_deadline)
{
	struct stopper_shm *st = t_shm_anon(sizeof(*st));
	struct kvr_key k2 = stop_key(2);
	union ans *a = malloc(sizeof(*a));
	struct t_raw r;
	pid_t pid;
	int wst = 0;

	cr_assert_not_null(a);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		stopper_main(st);
	if (!t_wait_until(stopper_ready, st, 10000)) {
		kill(pid, SIGKILL);
		waitpid(pid, &wst, 0);
		cr_assert_fail("stopper did not get its holdings (connect %d, "
			       "exit %d)",
			       st->connect_rc,
			       WIFEXITED(wst) ? WEXITSTATUS(wst) : -1);
	}
	cr_assert_eq(waitpid(pid, &wst, WUNTRACED), pid);
	cr_assert(WIFSTOPPED(wst), "stopper did not stop: %d", wst);
	/* What it holds is visible, with its age (the inspector's view). */
	cr_expect_gt(T_CSTAT(&srv, st->chan, oldest_ns), 0u,
		     "no age for the holdings");
	expect_inspector_shows_age();
	cr_expect(t_wait_until(stopped_chan_holds_only_quarantine, st, 10000),
		  "stopped worker holds: reserved %llu pins %llu leases %llu "
		  "transfers %llu quarantine %llu slots, %llu bytes",
		  (unsigned long long)T_CSTAT(&srv, st->chan, reserved_bytes),
		  (unsigned long long)T_CSTAT(&srv, st->chan, pins),
		  (unsigned long long)T_CSTAT(&srv, st->chan, leases),
		  (unsigned long long)T_CSTAT(&srv, st->chan, transfers),
		  (unsigned long long)T_CSTAT(&srv, st->chan, quar_slots),
		  (unsigned long long)T_CSTAT(&srv, st->chan, quar_bytes));
	cr_expect_eq(T_GSTAT(&srv, workers), 2u, "reclaimed by disconnecting");
	cr_expect_eq(T_CSTAT(&srv, st->chan, xfers_expired), 2u);
	cr_expect_eq(T_CSTAT(&srv, st->chan, pins), 2u);
	cr_expect_eq(atomic_load(&srv.hdr->quar.xfers), 2u);
	expect_good_progress(20, "while a worker is stopped");
	/* Its reservation was freed, never published. */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	t_raw_call(&r, KVR_OP_LOOKUP, 0, 0, &k2, NULL, 1, a, sizeof(*a));
	cr_expect_eq(a->h.value, 0u, "an expired reservation was published");
	t_raw_close(&r);
	kill(pid, SIGCONT);
	cr_assert_eq(waitpid(pid, &wst, 0), pid);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "stopper: %d", wst);
	cr_expect_eq(st->commit_store_rc, KVR_ERR_EXPIRED, "commit_store: %d",
		     st->commit_store_rc);
	cr_expect_not_null(strstr(st->store_msg, "expired"),
			   "the sentence does not say it expired: %s",
			   st->store_msg);
	cr_expect_not_null(strstr(kvr_strerror(KVR_ERR_EXPIRED), "expired"));
	cr_expect_eq(st->commit_retrieve_rc, KVR_ERR_EXPIRED,
		     "commit_retrieve: %d", st->commit_retrieve_rc);
	free(a);
	t_shm_unmap(st, sizeof(*st));
	expect_no_leak("after the stopped worker");
	finish();
}

/* Store two chunks of 0x42 on @r and pin them under a lease. */
static uint64_t hold_lease(struct t_raw *r, uint64_t salt)
{
	struct kvr_key k[2] = {bad_key(salt), bad_key(salt + 1)};
	uint64_t sz[2] = {4096, 4096};
	union ans a;

	t_raw_call(r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 2, &a, sizeof(a));
	cr_assert_eq(a.h.status, 0);
	for (int i = 0; i < 2; i++)
		memset((char *)r->pool + ans_slots(&a)[i].off, 0x42, 4096);
	t_raw_call(r, KVR_OP_COMMIT_STORE, a.h.handle, 0, NULL, NULL, 0, &a,
		   sizeof(a));
	cr_assert_eq(a.h.status, 0);
	t_raw_call(r, KVR_OP_LOOKUP, 0, KVR_REQ_PIN, k, NULL, 2, &a, sizeof(a));
	cr_assert_eq(a.h.value, 2);
	cr_assert_neq(a.h.handle, 0u);
	return a.h.handle;
}

/* The lease's maker redeems it and finds its bytes. */
static void redeem_own(struct t_raw *r, uint64_t lease)
{
	union ans a;

	t_raw_call(r, KVR_OP_PREPARE_RETRIEVE, lease, KVR_REQ_BY_LEASE, NULL,
		   NULL, 0, &a, sizeof(a));
	cr_expect_eq(a.h.status, 0, "the maker cannot redeem: %d", a.h.status);
	cr_expect_eq(a.h.count, 2);
	for (uint32_t i = 0; a.h.status == 0 && i < a.h.count; i++) {
		const unsigned char *p =
		    (const unsigned char *)r->pool + ans_slots(&a)[i].off;

		for (uint32_t j = 0; j < 4096; j++)
			if (p[j] != 0x42) {
				cr_expect_fail("byte %u of slot %u is %#x", j,
					       i, p[j]);
				break;
			}
	}
	t_raw_call(r, KVR_OP_COMMIT_RETRIEVE, a.h.handle, 0, NULL, NULL, 0, &a,
		   sizeof(a));
}

/*
 * Observed on main: lease ids were sequential, and a worker of another
 * model redeemed a lease on its second guess. Now ids are 64 unguessable
 * bits, and a lease of another namespace is unknown even to a worker that
 * holds its id: the same -ENOENT as an id never issued.
 */
Test(hostile, regress_12_lease_of_another_model_is_unknown_when_guessed)
{
	struct kvr_ns_desc other;
	struct t_raw ra, rb;
	union ans *a = malloc(sizeof(*a));
	struct kvr_key kb = bad_key(5100);
	uint64_t sz = 4096, lease, mine, won = 0;
	int st_real, st_unknown;

	cr_assert_not_null(a);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &ra), 0);
	lease = hold_lease(&ra, 5000);
	t_ns_default(&other);
	snprintf(other.model, sizeof(other.model), "other-model");
	cr_assert_eq(t_raw_connect_ns(srv.sock, 0, &other, &rb), 0);
	/* Its own latest id is where a sequential guesser starts. */
	t_raw_call(&rb, KVR_OP_PREPARE_STORE, 0, 0, &kb, &sz, 1, a, sizeof(*a));
	cr_assert_eq(a->h.status, 0);
	mine = a->h.handle;
	for (uint64_t d = 1; d <= 2000; d++) {
		uint64_t guess[2] = {mine - d, mine + d};

		for (int i = 0; i < 2; i++) {
			t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, guess[i],
				   KVR_REQ_BY_LEASE, NULL, NULL, 0, a,
				   sizeof(*a));
			if (a->h.status == 0)
				won++;
		}
	}
	cr_expect_eq(won, 0u, "%llu guessed ids redeemed",
		     (unsigned long long)won);
	/* Even the real id: the answer of an unknown lease. */
	t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, lease, KVR_REQ_BY_LEASE, NULL,
		   NULL, 0, a, sizeof(*a));
	st_real = a->h.status;
	t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, lease ^ 0x8000000000000000ull,
		   KVR_REQ_BY_LEASE, NULL, NULL, 0, a, sizeof(*a));
	st_unknown = a->h.status;
	cr_expect_eq(st_real, -ENOENT, "another model's lease: %d", st_real);
	cr_expect_eq(st_real, st_unknown, "the answer tells the lease exists");
	t_raw_call(&rb, KVR_OP_RELEASE, lease, 0, NULL, NULL, 0, a, sizeof(*a));
	cr_expect_eq(a->h.status, -ENOENT, "release by a stranger: %d",
		     a->h.status);
	redeem_own(&ra, lease);
	t_raw_close(&rb);
	t_raw_close(&ra);
	free(a);
	expect_good_progress(20, "after the lease guessing");
	expect_no_leak("after the lease guessing");
	finish();
}

/* What the worker of another uid saw. */
struct stranger_shm {
	int connect_rc;
	int redeem_rc;
	int release_rc;
};

/*
 * Observed on main: under --group, another uid redeemed a lease and read
 * its bytes, and the owner then got -ENOENT. The --group policy
 * (docs/reliability.md): members share the cache by key, but a lease is
 * redeemable only by channels of the uid that made it.
 */
Test(hostile, regress_12_lease_of_another_uid_is_unknown_under_group)
{
	static const char *const extra[] = {"--group", "65534", NULL};
	struct stranger_shm *st;
	struct t_raw ra;
	uint64_t lease;
	pid_t pid;
	int wst = 0;

	if (geteuid() != 0)
		cr_skip("needs root to run a worker as another uid");
	restart_with(extra);
	st = t_shm_anon(sizeof(*st));
	cr_assert_eq(t_raw_connect(srv.sock, 0, &ra), 0, "%s", ra.w.reason);
	lease = hold_lease(&ra, 6000);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		gid_t g = 65534;
		struct t_raw rb;
		union ans a;

		if (setgroups(1, &g) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(10);
		st->connect_rc = t_raw_connect(srv.sock, 0, &rb);
		if (st->connect_rc < 0)
			_exit(0);
		t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, lease,
			   KVR_REQ_BY_LEASE, NULL, NULL, 0, &a, sizeof(a));
		st->redeem_rc = a.h.status;
		t_raw_call(&rb, KVR_OP_RELEASE, lease, 0, NULL, NULL, 0, &a,
			   sizeof(a));
		st->release_rc = a.h.status;
		t_raw_close(&rb);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &wst, 0), pid);
	cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "stranger: %d", wst);
	cr_assert_eq(st->connect_rc, 0, "the group member was refused: %d",
		     st->connect_rc);
	cr_expect_eq(st->redeem_rc, -ENOENT, "another uid redeemed: %d",
		     st->redeem_rc);
	cr_expect_eq(st->release_rc, -ENOENT, "another uid released: %d",
		     st->release_rc);
	redeem_own(&ra, lease);
	t_raw_close(&ra);
	t_shm_unmap(st, sizeof(*st));
	expect_good_progress(20, "after the stranger");
	expect_no_leak("after the stranger");
	finish();
}

/*
 * Observed on main: 32 sockets that connect and say nothing filled the
 * handshake table; no legitimate connect succeeded until they timed out.
 * Now a uid has few pending handshakes and the oldest goes first: with
 * 100 silent sockets open, a connect with a 100 ms bound succeeds.
 */
Test(hostile, regress_12_silent_sockets_do_not_keep_a_worker_out)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char err[256] = "";
	uint64_t ns = 0;
	int fds[100], rc;

	expect_good_progress(10, "before");
	for (int i = 0; i < 100; i++) {
		fds[i] = t_raw_sock(srv.sock);
		cr_assert_geq(fds[i], 0, "socket %d: %d", i, fds[i]);
	}
	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	o.timeout_ms = (uint32_t)t_timeout_ms(100);
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_expect_eq(rc, 0, "connect beside 100 silent sockets: %d %s", rc,
		     err);
	if (rc == 0) {
		cr_expect_eq(kvr_ping(c, &ns), 0);
		kvr_close(c);
	}
	cr_expect(t_server_log_has(&srv, "dropped the oldest pending "
					 "handshake"));
	for (int i = 0; i < 100; i++)
		close(fds[i]);
	expect_good_progress(20, "after the silent sockets");
	expect_no_leak("after the silent sockets");
	finish();
}

/*
 * Observed on main: 256 connect/close cycles with throw-away model names
 * filled the namespace table until the server restarted; the next new
 * model got -ENOSPC. Now entries are counted by channels and objects and
 * freed when unused: ten times the table's size of throw-away names (some
 * of them leaving a cached object behind) still leave room.
 */
Test(hostile, regress_12_throwaway_models_leave_room_for_a_new_one)
{
	struct kvr_ns_desc ns;
	struct t_raw r;
	union ans a;
	int rc;

	t_ns_default(&ns);
	for (uint32_t i = 0; i < 2560; i++) {
		snprintf(ns.model, sizeof(ns.model), "junk-%u", i);
		rc = t_raw_connect_ns(srv.sock, 0, &ns, &r);
		for (int tries = 0; rc == -EBUSY && tries < 100; tries++) {
			usleep(10000); /* last cycles' hang-ups still queued */
			rc = t_raw_connect_ns(srv.sock, 0, &ns, &r);
		}
		cr_assert_eq(rc, 0, "cycle %u: %d %s", i, rc, r.w.reason);
		if (i % 64 == 0) {
			struct kvr_key k = bad_key(7000 + i);
			uint64_t sz = 4096;

			t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, &k, &sz, 1,
				   &a, sizeof(a));
			cr_assert_eq(a.h.status, 0);
			t_raw_call(&r, KVR_OP_COMMIT_STORE, a.h.handle, 0, NULL,
				   NULL, 0, &a, sizeof(a));
		}
		t_raw_close(&r);
	}
	snprintf(ns.model, sizeof(ns.model), "a-new-model");
	rc = t_raw_connect_ns(srv.sock, 0, &ns, &r);
	cr_expect_eq(rc, 0, "a new model after the throw-away ones: %d %s", rc,
		     r.w.reason);
	if (rc == 0)
		t_raw_close(&r);
	expect_good_progress(20, "after the throw-away models");
	expect_no_leak("after the throw-away models");
	finish();
}

/*
 * Observed on main: a worker wrote a dead pid into the header's creator
 * pid, and a second kvringd with the same --name swept the live server's
 * segments as stale (and the first, at exit, unlinked the second's files
 * by name). Liveness is the live server's lock now, which no worker can
 * take away: the second server finds the name in use and does not start,
 * and the live server's segment is the same file afterwards.
 */
Test(hostile, regress_12_forged_creator_pid_does_not_get_a_live_server_swept)
{
	struct kvrd b;
	struct kvr_seg_hdr_shm *h;
	struct stat before, after;
	char ctl_path[160];
	struct t_raw r;
	pid_t dead, pid;
	int st;

	dead = fork();
	cr_assert_geq(dead, 0);
	if (dead == 0)
		_exit(0);
	cr_assert_eq(waitpid(dead, NULL, 0), dead);
	snprintf(ctl_path, sizeof(ctl_path), "/dev/shm/%s", srv.ctl_name);
	cr_assert_eq(stat(ctl_path, &before), 0);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	/* A worker cannot write the header any more (abi 3.0; see
	 * regress_12_worker_cannot_write_the_header): forge it out of band,
	 * as root, through a writable mapping of the file itself. */
	{
		int fd = open(ctl_path, O_RDWR | O_CLOEXEC);

		cr_assert_geq(fd, 0, "open %s as root: %s", ctl_path,
			      strerror(errno));
		h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, 0);
		close(fd);
		cr_assert_neq(h, MAP_FAILED);
	}
	h->creator_pid = (int32_t)dead;
	h->creator_start = 1;
	t_server_init(&b);
	{
		const char *argv[] = {
		    "kvringd",	    "--socket",	   b.sock, "--name",
		    srv.name,	    "--pool-size", "16M",  "--no-prefault",
		    "--huge-pages", "off",	   NULL};

		pid = t_server_spawn(&b, argv);
	}
	st = t_server_wait_exit(pid, t_timeout_ms(5000));
	cr_expect(st > 0 && st < 128,
		  "a second kvringd with the live server's name started "
		  "(status %d)",
		  st);
	if (!t_server_log_has(&b, "belongs to a live kvringd")) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "cat %s >&2", b.log_path);
		(void)!system(cmd);
		cr_expect_fail("the second server does not say the name is "
			       "taken");
	}
	cr_assert_eq(stat(ctl_path, &after), 0, "the live ctl was removed");
	cr_expect(before.st_ino == after.st_ino,
		  "the live server's ctl was replaced");
	munmap(h, sizeof(*h));
	t_raw_close(&r);
	/* Not t_server_cleanup(&b): its segment names are srv's. */
	unlink(b.sock);
	unlink(b.log_path);
	expect_good_progress(20, "after the forged pid");
	expect_no_leak("after the forged pid");
	finish();
}

/* ---- issue 12 item 1: a worker reaches only its own channel ---- */

/*
 * Runs @fn in a forked child and returns its wait status. A write through
 * a read-only mapping kills the child with SIGSEGV, not the test.
 */
static int in_child(void (*fn)(struct t_raw *), struct t_raw *r)
{
	pid_t pid;
	int st = 0;

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		fn(r);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return st;
}

static void xor_boot_id(struct t_raw *r)
{
	struct kvr_seg_hdr_shm *h = r->ctl;

	h->boot_id[0] ^= 0x5a;
}

/*
 * Observed on main: one byte XORed into the shared header's boot id broke
 * every connected worker, and every later kvr_connect failed with -EPROTO
 * (saying "pool 67108864, expected 67108864 bytes") until the server
 * restarted. Now the control segment is mapped read-only from a
 * read-only descriptor: the write faults in the hostile worker alone, the
 * header is unchanged, the good worker goes on, and a new worker
 * connects.
 */
Test(hostile, regress_12_worker_cannot_write_the_header)
{
	uint8_t boot[16];
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char err[256] = "";
	struct t_raw r;
	int st, rc;

	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0, "%s", r.w.reason);
	memcpy(boot, srv.hdr->seg.boot_id, sizeof(boot));
	st = in_child(xor_boot_id, &r);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		  "a worker wrote the header's boot id (status 0x%x)", st);
	cr_expect(memcmp(boot, srv.hdr->seg.boot_id, sizeof(boot)) == 0,
		  "the header's boot id changed");
	expect_good_progress(20, "after the header write");
	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_expect_eq(rc, 0, "a new worker cannot connect: %d %s", rc, err);
	kvr_close(c);
	t_raw_close(&r);
	expect_no_leak("after the header write");
	finish();
}

/* Writes garbage over every byte of the control mapping past the segment
 * header: on main that held every channel's block, rings included. */
static void scribble_control(struct t_raw *r)
{
	char *p = (char *)r->ctl + sizeof(struct kvr_ctl_hdr_shm);

	for (size_t i = 0; i + sizeof(struct kvr_ctl_hdr_shm) < r->ctl_bytes;
	     i++)
		p[i] = (char)(0xa5 ^ i);
}

/*
 * Observed on main: every worker mapped the whole control segment
 * read-write, so one could write into any other worker's request ring;
 * garbage there got the victim disconnected, and a forged ABORT_STORE
 * was executed as the neighbour. Now the only control memory a worker can
 * write is its own channel block: writing anywhere else it has mapped
 * faults in the hostile worker, and the good worker (the neighbour) never
 * notices. The hostile worker also holds real things, which stay its own.
 */
Test(hostile, regress_12_worker_cannot_write_another_channel)
{
	struct t_raw r;
	int st;

	expect_good_progress(10, "before");
	hostile_connect_and_hold(&r, 1200);
	st = in_child(scribble_control, &r);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		  "a worker wrote over the control segment past its header "
		  "(status 0x%x)",
		  st);
	expect_good_progress(20, "after the scribble");
	cr_expect(!t_server_log_has(&srv, "protocol error"),
		  "someone was cut off for bytes it did not write");
	/* The hostile worker's own channel still serves it. */
	cr_expect(chan_holds(&r), "the hostile worker's holdings moved");
	t_raw_close(&r);
	expect_no_leak("after the scribble");
	finish();
}

/*
 * The control descriptor itself cannot give a writable mapping: neither
 * mmap(PROT_WRITE, MAP_SHARED) of it nor mprotect(PROT_WRITE) of a
 * read-only mapping made from it (EACCES; EPERM from a sealed memfd),
 * even for root, who bypasses file modes. On main it was read-write.
 */
Test(hostile, regress_12_control_descriptor_cannot_be_made_writable)
{
	struct kvr_hello h = {0};
	struct kvr_welcome w;
	int fd, fds[T_RAW_FDS], nfds = 0;
	void *p;

	fd = t_raw_sock(srv.sock);
	cr_assert_geq(fd, 0);
	h.magic = KVR_PROTO_MAGIC;
	h.version = KVR_PROTO_VERSION;
	h.pid = (int32_t)getpid();
	t_ns_default(&h.ns);
	cr_assert_eq(t_raw_send_frame(fd, KVR_FRAME_HELLO, &h, sizeof(h)), 0);
	cr_assert_eq(t_raw_read_welcome(fd, &w, fds, &nfds, 5000), 0);
	cr_assert_eq(w.status, 0, "%s", w.reason);
	cr_assert_geq(nfds, 1);
	p = mmap(NULL, (size_t)w.ctl_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fds[0], 0);
	cr_expect(p == MAP_FAILED && (errno == EACCES || errno == EPERM),
		  "the control descriptor mapped writable (%s)",
		  p == MAP_FAILED ? strerror(errno) : "mapped");
	if (p != MAP_FAILED)
		munmap(p, (size_t)w.ctl_bytes);
	p = mmap(NULL, (size_t)w.ctl_bytes, PROT_READ, MAP_SHARED, fds[0], 0);
	cr_assert_neq(p, MAP_FAILED, "read-only map: %s", strerror(errno));
	cr_expect(mprotect(p, (size_t)w.ctl_bytes, PROT_READ | PROT_WRITE) <
			  0 &&
		      errno == EACCES,
		  "mprotect made the control mapping writable");
	munmap(p, (size_t)w.ctl_bytes);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	close(fd);
	expect_good_progress(20, "after the attempts");
	expect_no_leak("after the attempts");
	finish();
}

/* ---- what a worker can read ---- */

/* One shared mapping of this process, from /proc/self/maps. */
struct shmap {
	uintptr_t lo, hi;
	char name[128];
};

/* Every shared mapping this process holds now; returns how many. */
static int shared_maps(struct shmap *out, int max)
{
	char line[512], perms[8];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	cr_assert_not_null(f, "open /proc/self/maps: %s", strerror(errno));
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int off = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms,
			   &off) < 3 ||
		    perms[3] != 's' || perms[0] != 'r')
			continue;
		out[n].lo = lo;
		out[n].hi = hi;
		snprintf(out[n].name, sizeof(out[n].name), "%s",
			 off ? line + off : "");
		out[n].name[strcspn(out[n].name, "\n")] = '\0';
		n++;
	}
	fclose(f);
	return n;
}

/* Whether @m (same range) is among the @nb mappings of @before. */
static bool mapped_before(const struct shmap *before, int nb,
			  const struct shmap *m)
{
	for (int j = 0; j < nb; j++)
		if (before[j].lo == m->lo && before[j].hi == m->hi)
			return true;
	return false;
}

/* Offset of the first @len-byte, @align-aligned copy of @pat in [lo, hi),
 * or -1. */
static long find_pattern(uintptr_t lo, uintptr_t hi, const void *pat,
			 size_t len, size_t align)
{
	for (uintptr_t p = lo; p + len <= hi; p += align)
		if (memcmp((const void *)p, pat, len) == 0)
			return (long)(p - lo);
	return -1;
}

/*
 * Observed on main: every worker could read the whole channel directory
 * in its read-only control mapping: every other channel's pid, uid,
 * pid start time, namespace and transport. The rule is that a worker
 * never sees what is not its own. A worker connected with libkvring
 * scans every shared mapping kvr_connect gave it (control segment, its
 * block, the pool) for the good worker's (pid, uid) pair and its start
 * time, and finds neither; its own pair, in its own block, it does find
 * (so the scan can see a pair at all).
 */
Test(hostile, regress_12_worker_cannot_read_another_channels_identity)
{
	struct shmap before[256], after[256];
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	int32_t theirs[2] = {(int32_t)good_pid, (int32_t)getuid()};
	int32_t mine[2] = {(int32_t)getpid(), (int32_t)getuid()};
	uint64_t their_start = 0;
	char err[256] = "";
	int nb, na, scanned = 0;
	bool own_found = false;

	expect_good_progress(10, "before");
	cr_assert_eq(kvr_proc_start_time(good_pid, &their_start), 0);
	/* Only what kvr_connect maps counts: the test's own harness maps
	 * the directory and other blocks on purpose (t_server_chan). */
	nb = shared_maps(before, 256);
	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	na = shared_maps(after, 256);
	for (int i = 0; i < na; i++) {
		long at;

		if (mapped_before(before, nb, &after[i]))
			continue;
		scanned++;
		at = find_pattern(after[i].lo, after[i].hi, theirs,
				  sizeof(theirs), 4);
		cr_expect_eq(at, -1,
			     "the good worker's pid %d and uid %d are readable "
			     "at +%ld of %s",
			     theirs[0], theirs[1], at, after[i].name);
		at = find_pattern(after[i].lo, after[i].hi, &their_start,
				  sizeof(their_start), 8);
		cr_expect_eq(at, -1,
			     "the good worker's start time %llu is readable at "
			     "+%ld of %s",
			     (unsigned long long)their_start, at,
			     after[i].name);
		if (find_pattern(after[i].lo, after[i].hi, mine, sizeof(mine),
				 4) >= 0)
			own_found = true;
	}
	cr_expect_geq(scanned, 2, "kvr_connect mapped %d new shared regions",
		      scanned);
	cr_expect(own_found, "the scan did not find our own pid and uid");
	kvr_close(c);
	expect_good_progress(20, "after the scan");
	expect_no_leak("after the scan");
	finish();
}

/* kvring-inspect --prometheus has a per-namespace line (kvring_namespace_*)
 * for model @model: the server published that namespace's slot. */
static bool inspector_has_namespace(void *model)
{
	char cmd[512], line[1024], want[160];
	bool found = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "%s/tools/kvring-inspect --name %s --prometheus 2>/dev/null",
		 KVR_BIN_DIR, srv.name);
	snprintf(want, sizeof(want), "model=\"%s\"", (const char *)model);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p))
		if (strncmp(line, "kvring_namespace_", 17) == 0 &&
		    strstr(line, want))
			found = true;
	pclose(p);
	return found;
}

/*
 * Observed on main (abi 4.1): the control segment every worker maps
 * read-only held every namespace's slot: each tenant's model name,
 * layout, tp rank and cache counters. The rule is that a worker never
 * sees what is not its own. Tenant B connects with a model of its own
 * and the server publishes B's namespace (the inspector, as root, shows
 * it); then a worker of tenant A connects with libkvring and scans every
 * shared mapping kvr_connect gave it (control segment, its block, the
 * pool) for B's model name, and does not find it. Its own model name,
 * in its own block, it does find (so the scan can see a name at all).
 */
Test(hostile, regress_12_worker_cannot_read_another_namespaces_model)
{
	static char theirs[] = "tenant-b-secret-model";
	static const char mine[] = "tenant-a-own-model";
	struct shmap before[256], after[256];
	struct kvr_client_opts o = {0};
	struct kvr_client *a = NULL, *b = NULL;
	char err[256] = "";
	int nb, na, scanned = 0;
	bool own_found = false;

	expect_good_progress(10, "before");
	o.socket_path = srv.sock;
	o.no_prefault = true;
	t_ns_default(&o.ns);
	snprintf(o.ns.model, sizeof(o.ns.model), "%s", theirs);
	cr_assert_eq(kvr_connect(&o, &b, err, sizeof(err)), 0, "B: %s", err);
	cr_assert(t_wait_until(inspector_has_namespace, theirs, 5000),
		  "the inspector never showed namespace %s", theirs);
	/* Only what A's kvr_connect maps counts: B's own mappings, and
	 * the harness's, are before. */
	nb = shared_maps(before, 256);
	snprintf(o.ns.model, sizeof(o.ns.model), "%s", mine);
	cr_assert_eq(kvr_connect(&o, &a, err, sizeof(err)), 0, "A: %s", err);
	na = shared_maps(after, 256);
	for (int i = 0; i < na; i++) {
		long at;

		if (mapped_before(before, nb, &after[i]))
			continue;
		scanned++;
		at = find_pattern(after[i].lo, after[i].hi, theirs,
				  sizeof(theirs), 1);
		cr_expect_eq(at, -1,
			     "tenant B's model name \"%s\" is readable at +%ld "
			     "of %s",
			     theirs, at, after[i].name);
		if (find_pattern(after[i].lo, after[i].hi, mine, sizeof(mine),
				 1) >= 0)
			own_found = true;
	}
	cr_expect_geq(scanned, 2, "kvr_connect mapped %d new shared regions",
		      scanned);
	cr_expect(own_found, "the scan did not find our own model name");
	kvr_close(a);
	kvr_close(b);
	expect_good_progress(20, "after the scan");
	expect_no_leak("after the scan");
	finish();
}

/* kvring-inspect's text output shows @key=@want for some line. */
static bool inspector_shows(const char *key, unsigned long long want)
{
	char cmd[512], line[512];
	bool found = false;
	size_t n = strlen(key);
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-inspect --name %s 2>&1",
		 KVR_BIN_DIR, srv.name);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long v;

		if (strncmp(line, key, n) == 0 && line[n] == '=' &&
		    sscanf(line + n + 1, "%llu", &v) == 1 && v == want)
			found = true;
	}
	pclose(p);
	return found;
}

/*
 * Observed on main: quotas were per channel only, so one uid multiplied
 * its caps by opening channels. Here one uid opens three channels; each
 * asks for a quarter of the pool (two keys of an eighth: within its
 * channel's 25%), together three quarters, past the uid's default 50%.
 * The third gets "quota" for both keys and evicts nobody, while a good
 * worker of another uid (65534, admitted by --group) keeps storing and
 * verifying its bytes; the inspector shows the uid's use against its cap.
 */
Test(hostile, regress_12_uid_quota_binds_all_channels_of_one_uid)
{
	static const char *const extra[] = {"--group", "65534", NULL};
	union ans *a = malloc(sizeof(*a));
	uint64_t handle[3] = {0}, sz[2], ev, pool, uquota;
	uint32_t ok[3] = {0}, quota[3] = {0};
	struct t_raw r[3];

	cr_assert_not_null(a);
	if (geteuid() != 0)
		cr_skip("needs root to run the good worker as another uid");
	good_uid = 65534;
	restart_with(extra);
	expect_good_progress(10, "before");
	ev = T_GSTAT(&srv, evictions);
	for (int c = 0; c < 3; c++) {
		struct kvr_key k[2] = {bad_key(7000 + 10 * (uint64_t)c),
				       bad_key(7001 + 10 * (uint64_t)c)};

		cr_assert_eq(t_raw_connect(srv.sock, 0, &r[c]), 0, "%s",
			     r[c].w.reason);
		sz[0] = sz[1] = r[c].w.pool_bytes / 8;
		t_raw_call(&r[c], KVR_OP_PREPARE_STORE, 0, 0, k, sz, 2, a,
			   sizeof(*a));
		cr_assert_eq(a->h.status, 0, "channel %d: status %d", c,
			     a->h.status);
		handle[c] = a->h.handle;
		for (uint32_t i = 0; i < a->h.count; i++) {
			ok[c] += ans_slots(a)[i].status == KVR_SLOT_OK;
			quota[c] += ans_slots(a)[i].status == KVR_SLOT_QUOTA;
		}
	}
	pool = r[0].w.pool_bytes;
	uquota = srv.hdr->quota_uid_reserved_bytes;
	cr_expect_eq(ok[0] + ok[1], 4u, "the first two channels: %u + %u OK",
		     ok[0], ok[1]);
	cr_expect_eq(quota[2], 2u,
		     "the third channel of one uid got %u OK and %u quota "
		     "(uid quota %llu of a %llu-byte pool)",
		     ok[2], quota[2], (unsigned long long)uquota,
		     (unsigned long long)pool);
	cr_expect_eq(T_GSTAT(&srv, evictions), ev,
		     "objects were evicted for the refused keys");
	expect_good_progress(20, "while one uid holds its uid quota");
	cr_expect(inspector_shows("uids.0.channels", 3),
		  "kvring-inspect does not show 3 channels for uid 0");
	cr_expect(inspector_shows("uids.0.reserved_bytes", pool / 4 * 2),
		  "kvring-inspect does not show uid 0's reserved bytes");
	cr_expect(inspector_shows("uids.0.reserved_quota_bytes", uquota),
		  "kvring-inspect does not show the uid quota");
	cr_expect(inspector_shows("uids.65534.channels", 1),
		  "kvring-inspect does not show the good worker's uid");
	for (int c = 0; c < 3; c++) {
		if (handle[c])
			t_raw_call(&r[c], KVR_OP_ABORT_STORE, handle[c], 0,
				   NULL, NULL, 0, a, sizeof(*a));
		t_raw_close(&r[c]);
	}
	free(a);
	expect_no_leak("after the uid quota test");
	finish();
}

/* ---- issue 13: the new fast paths (store-ahead, held batches) ---- */

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

/* The value of the first line "@key=N" of kvring-inspect's text output
 * (the server-wide section comes first), or UINT64_MAX if none. */
static uint64_t inspect_first(const char *out, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = out; p && *p;
	     p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (!strncmp(p, key, kl) && p[kl] == '=')
			return strtoull(p + kl + 1, NULL, 10);
	return UINT64_MAX;
}

/*
 * What kvring-inspect shows with the good worker paused between rounds:
 * one worker, nothing reserved, pinned, leased or in transfer.
 */
static void expect_inspector_shows_nothing_held(void)
{
	static const char *const keys[] = {"reserved_bytes", "reserved_objects",
					   "pins", "leases", "transfers"};
	static char out[1 << 16];
	char cmd[512];
	size_t n;
	FILE *p;

	atomic_store(&good->pause, 1);
	cr_assert(t_wait_until(good_is_paused, NULL, 10000),
		  "good worker did not pause");
	cr_expect(t_wait_until(only_good_and_nothing_held, NULL, 5000));
	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-inspect --name %s 2>&1",
		 KVR_BIN_DIR, srv.name);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	pclose(p);
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
