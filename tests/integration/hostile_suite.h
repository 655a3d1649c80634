/* SPDX-License-Identifier: MIT */
/*
 * hostile_suite.h - the set-up of the hostile suites (test_hostile_*.c):
 * a real kvringd, a well-behaved worker (a forked process using
 * libkvring) that stores, retrieves and verifies bytes the whole time, and
 * the hostile worker's tools (a worker speaking the protocol by hand
 * through tests/support/t_raw, taking real holdings before it
 * misbehaves). Each suite checks that the server cuts off, refuses or
 * answers errors to the hostile worker, keeps serving the good one, and
 * leaks nothing: with the good worker paused between operations, every
 * global holding counter is back to zero. Header-only with static inline
 * functions, so each suite stays one file for the CMake glob.
 */
#ifndef KVR_HOSTILE_SUITE_H
#define KVR_HOSTILE_SUITE_H

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
 * are reclaimed within the test (the holdings suite). */
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

static inline struct kvr_key good_key(uint64_t round, uint32_t i)
{
	struct kvr_key k = {.lo = 0x600d000000000000ull | i, .hi = round};

	return k;
}

static inline unsigned char good_byte(uint64_t round, uint32_t i, uint64_t j)
{
	return (unsigned char)(round * 131 + i * 7 + j * 13 + (j >> 9));
}

static inline void good_fail(const char *what, long rc)
{
	if (!good->err[0])
		snprintf(good->err, sizeof(good->err), "%s: %ld", what, rc);
	atomic_fetch_add_explicit(&good->failures, 1, memory_order_relaxed);
}

static inline bool good_verify(const struct kvr_xfer *x, uint64_t round)
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
static inline void good_round(struct kvr_client *c, uint64_t round)
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

static inline void good_main(void)
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

static inline void good_start(void)
{
	fflush(NULL);
	good_pid = fork();
	cr_assert_geq(good_pid, 0, "fork");
	if (good_pid == 0)
		good_main();
}

static inline void setup(void)
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
static inline void restart_with(const char *const *extra)
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

static inline void teardown(void)
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

static inline uint64_t good_rounds(void)
{
	return atomic_load_explicit(&good->rounds, memory_order_relaxed);
}

struct progress_arg {
	uint64_t target;
};

static inline bool rounds_reached(void *arg)
{
	return good_rounds() >= ((struct progress_arg *)arg)->target ||
	       atomic_load(&good->failures) > 0;
}

/* The good worker makes @more rounds from now, without a failure. */
static inline void expect_good_progress(uint64_t more, const char *when)
{
	struct progress_arg a = {good_rounds() + more};

	cr_assert(t_wait_until(rounds_reached, &a, 10000),
		  "good worker stalled %s: %llu rounds, wanted %llu", when,
		  (unsigned long long)good_rounds(),
		  (unsigned long long)a.target);
	cr_assert_eq(atomic_load(&good->failures), 0,
		     "good worker failed %s: %s", when, good->err);
}

static inline bool good_is_paused(void *arg)
{
	(void)arg;
	return atomic_load_explicit(&good->paused, memory_order_relaxed);
}

/* Only the good worker is connected, and it holds nothing. */
static inline bool only_good_and_nothing_held(void *arg)
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
static inline void expect_no_leak(const char *when)
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
static inline void finish(void)
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

static inline struct kvr_key bad_key(uint64_t i)
{
	struct kvr_key k = {.lo = 0xbadbadbadull ^ i, .hi = i * 977};

	return k;
}

static inline bool chan_holds(void *arg)
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
static inline void hostile_connect_and_hold(struct t_raw *r, uint64_t salt)
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

static inline struct kvr_ring_shm *req_shm(struct t_raw *r)
{
	return (struct kvr_ring_shm *)((char *)r->ch + r->ch->req_ring_off);
}

static inline struct kvr_ring_shm *resp_shm(struct t_raw *r)
{
	return (struct kvr_ring_shm *)((char *)r->ch + r->ch->resp_ring_off);
}

/* Publish a raw tail value on our request ring and ring the bell. */
static inline void scribble_tail(struct t_raw *r, uint64_t tail)
{
	/* Release: like a real publish, so the server reads our bytes. */
	atomic_store_explicit(&req_shm(r)->tail, tail, memory_order_release);
	kvr_bell_notify(&r->ch->req_bell, r->req_efd);
}

/* Wait for the server to cut @r off; the log must say @reason. */
static inline void expect_cut_off(struct t_raw *r, const char *reason)
{
	cr_expect(t_raw_wait_hangup(r, t_timeout_ms(10000)),
		  "the hostile worker was not disconnected");
	cr_expect(t_server_log_has(&srv, reason), "the log does not say \"%s\"",
		  reason);
	t_raw_close(r);
}

/*
 * The outcome every ring attack must have: @r is cut off with @reason in
 * the log, the good worker makes 20 more rounds and nothing leaks; @after
 * names the attack in the failure messages.
 */
static inline void expect_cut_off_and_clean(struct t_raw *r, const char *reason,
					    const char *after)
{
	expect_cut_off(r, reason);
	expect_good_progress(20, after);
	expect_no_leak(after);
}

/* Send one request of @op with @h as header and nothing after it. */
static inline int push_raw(struct t_raw *r, uint32_t op, const void *body,
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
static inline int push_ping(struct t_raw *r, uint64_t req_id)
{
	struct kvr_req_view v = {.op = KVR_OP_PING, .hdr = {.req_id = req_id}};

	return t_raw_push(r, &v, true);
}

/* The slots of an answer, after its header. */
static inline const struct kvr_slot_desc *ans_slots(const union ans *a)
{
	return (const struct kvr_slot_desc *)(&a->h + 1);
}

/* ---- what kvring-inspect shows ---- */

/*
 * hostile_inspect - kvring-inspect's text output (stdout and stderr) for
 * the suite's server, in a buffer the next call overwrites.
 */
static inline const char *hostile_inspect(void)
{
	static char out[1 << 16];
	char cmd[512];
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-inspect --name %s 2>&1",
		 KVR_BIN_DIR, srv.name);
	p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s: %s", cmd, strerror(errno));
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	pclose(p);
	return out;
}

/* The line of @out after the one at @p, or NULL past the last. */
static inline const char *inspect_next_line(const char *p)
{
	p = strchr(p, '\n');
	return p && p[1] ? p + 1 : NULL;
}

/* The value of the first line "@key=N" of kvring-inspect's text output
 * (the server-wide section comes first), or UINT64_MAX if none. */
static inline uint64_t inspect_first(const char *out, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = *out ? out : NULL; p; p = inspect_next_line(p))
		if (!strncmp(p, key, kl) && p[kl] == '=')
			return strtoull(p + kl + 1, NULL, 10);
	return UINT64_MAX;
}

/* Whether some line of @out is "@key=@want". */
static inline bool inspect_has(const char *out, const char *key,
			       unsigned long long want)
{
	size_t kl = strlen(key);
	unsigned long long v;

	for (const char *p = *out ? out : NULL; p; p = inspect_next_line(p))
		if (!strncmp(p, key, kl) && p[kl] == '=' &&
		    sscanf(p + kl + 1, "%llu", &v) == 1 && v == want)
			return true;
	return false;
}

#endif /* KVR_HOSTILE_SUITE_H */
