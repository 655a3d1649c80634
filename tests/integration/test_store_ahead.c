/* SPDX-License-Identifier: MIT */
/*
 * test_store_ahead.c - store-ahead ($KVRING_STORE_AHEAD=1) against a real
 * kvringd: a one-key store after the first costs one round trip (the
 * channel's request counters show no prepare_store), another worker sees
 * the key as soon as kvr_commit_store returned, a key stored already is
 * rule 1's no-op and the next duplicate is asked for first, staged slots
 * are counted and freed when the worker closes or is killed, checksums
 * travel in the bind, quotas bound what is staged, and a hand-made worker
 * cannot publish a staged slot without a bind or bind what is not its own.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/doorbell.h>
#include <kvring/kvring.h>

#include "t_json.h"
#include "t_raw.h"
#include "worker_srv.h"

#define CHUNK (64u << 10)

static struct wsrv srv;

static void up(void)
{
	wsrv_up(&srv);
	cr_assert_eq(t_server_map(&srv.t), 0);
}

static void down(void)
{
	wsrv_down(&srv);
}

TestSuite(store_ahead, .init = up, .fini = down, .timeout = 60);

static struct kvr_key key(uint64_t i)
{
	return (struct kvr_key){i * 0x9E3779B97F4A7C15ull + 11, i ^ 0x5eed};
}

static struct kvr_client *connect_ahead(const char *mode)
{
	struct kvr_client *c;

	setenv("KVRING_STORE_AHEAD", mode, 1);
	c = wsrv_connect(&srv, 0, 5000);
	unsetenv("KVRING_STORE_AHEAD");
	return c;
}

/* Requests of @op the server handled on @c's channel (published after
 * each batch's answers, so waited for). */
struct req_wait {
	uint32_t ch, op;
	uint64_t want;
};

static bool reqs_reach(void *arg)
{
	struct req_wait *w = arg;

	return T_CSTAT(&srv.t, w->ch, requests[w->op]) >= w->want;
}

static uint64_t reqs(struct kvr_client *c, uint32_t op, uint64_t at_least)
{
	struct req_wait w = {kvr_client_info(c)->channel, op, at_least};

	t_wait_until(reqs_reach, &w, 2000);
	return T_CSTAT(&srv.t, w.ch, requests[op]);
}

/* One-key store of key(i); returns the slot status the prepare gave. */
static int store1(struct kvr_client *c, uint64_t i)
{
	struct kvr_key k = key(i);
	uint64_t size = CHUNK;
	struct kvr_xfer x;
	int rc, st;

	rc = kvr_prepare_store(c, &k, &size, 1, &x);
	cr_assert_eq(rc, 0, "prepare_store: %d %s", rc, kvr_client_errmsg(c));
	cr_assert_eq(x.nslots, 1u);
	st = x.slots[0].status;
	if (st == KVR_SLOT_OK)
		wsrv_fill(&k, x.slots[0].ptr, CHUNK);
	rc = kvr_commit_store(c, &x);
	cr_assert_eq(rc, 0, "commit_store: %d %s", rc, kvr_client_errmsg(c));
	return st;
}

static long lookup1(struct kvr_client *c, uint64_t i)
{
	struct kvr_key k = key(i);

	return kvr_lookup(c, &k, 1, NULL);
}

Test(store_ahead, prepares_without_waiting_for_kvringd_when_on)
{
	struct kvr_client *c = connect_ahead("1");
	struct kvr_client *other = wsrv_connect(&srv, 0, 5000);
	struct kvr_key k = key(1);
	uint64_t size = CHUNK;
	struct kvr_xfer x;
	int rc;

	cr_assert_eq(store1(c, 0), KVR_SLOT_OK); /* asks, gets a slot */
	/* kvringd frozen: a prepare that waited for it would time out. */
	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	rc = kvr_prepare_store(c, &k, &size, 1, &x);
	kill(srv.pid, SIGCONT);
	cr_assert_eq(rc, 0, "prepare_store: %d %s", rc, kvr_client_errmsg(c));
	cr_assert_eq(x.slots[0].status, KVR_SLOT_OK);
	wsrv_fill(&k, x.slots[0].ptr, CHUNK);
	cr_assert_eq(kvr_commit_store(c, &x), 0, "%s", kvr_client_errmsg(c));
	/* Published before the commit returned. */
	cr_expect_eq(lookup1(other, 1), 1);
	for (uint64_t i = 2; i < 10; i++) {
		cr_assert_eq(store1(c, i), KVR_SLOT_OK);
		cr_expect_eq(lookup1(other, i), 1, "key %llu not visible",
			     (unsigned long long)i);
	}
	cr_expect_eq(reqs(c, KVR_OP_COMMIT_STORE, 10), 10u);
	for (uint64_t i = 0; i < 10; i++) {
		k = key(i);
		cr_expect_eq(wsrv_retrieve_check(other, &k, 1, CHUNK), 1u);
	}
	kvr_close(other);
	kvr_close(c);
}

/* @c's channel holds no reservation once its counters are published. */
struct chan_wait {
	uint32_t ch;
};

static bool chan_reserves_nothing(void *arg)
{
	struct chan_wait *w = arg;

	return T_CSTAT(&srv.t, w->ch, reserved_bytes) == 0 &&
	       T_CSTAT(&srv.t, w->ch, transfers) == 0;
}

/* Store chunks @first .. @first+@n-1 through @c, one request each, and
 * expect its channel to hold no reservation once they are committed (no
 * staged slot); @why names the case in the failure. */
static void expect_stores_unstaged(struct kvr_client *c, uint64_t first,
				   uint64_t n, const char *why)
{
	struct chan_wait w = {kvr_client_info(c)->channel};

	for (uint64_t i = first; i < first + n; i++)
		cr_assert_eq(store1(c, i), KVR_SLOT_OK);
	cr_assert_eq(reqs(c, KVR_OP_COMMIT_STORE, n), n);
	cr_expect(t_wait_until(chan_reserves_nothing, &w, 2000),
		  "%s: %llu bytes reserved", why,
		  (unsigned long long)T_CSTAT(&srv.t, w.ch, reserved_bytes));
}

Test(store_ahead, holds_nothing_at_rest_when_off)
{
	struct kvr_client *c = connect_ahead("0");

	expect_stores_unstaged(c, 0, 4, "store-ahead off");
	kvr_close(c);
}

Test(store_ahead, refuses_to_connect_when_the_variable_is_not_0_or_1)
{
	wsrv_expect_env_refused(&srv, "KVRING_STORE_AHEAD", "yes",
				"KVRING_STORE_AHEAD=yes");
}

/* opts.store_ahead, for engines that configure in code: it wins over
 * the variable both ways, is refused when unknown, and info says what is
 * in effect. */
Test(store_ahead, follows_the_option_over_the_variable)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	struct kvr_client *c = NULL;
	struct kvr_key k = key(41);
	uint64_t size = CHUNK;
	struct kvr_xfer x;
	char err[256] = "";
	int rc;

	/* On by the option alone: a prepare answered while kvringd is
	 * frozen is the staged path. */
	o.store_ahead = KVR_STORE_AHEAD_ON;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	cr_expect(kvr_client_info(c)->store_ahead);
	cr_assert_eq(store1(c, 40), KVR_SLOT_OK);
	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	rc = kvr_prepare_store(c, &k, &size, 1, &x);
	kill(srv.pid, SIGCONT);
	cr_assert_eq(rc, 0, "prepare_store: %d %s", rc, kvr_client_errmsg(c));
	wsrv_fill(&k, x.slots[0].ptr, CHUNK);
	cr_assert_eq(kvr_commit_store(c, &x), 0, "%s", kvr_client_errmsg(c));
	cr_expect_eq(lookup1(c, 41), 1);
	kvr_close(c);

	/* Off by the option although the variable says on. */
	setenv("KVRING_STORE_AHEAD", "1", 1);
	o.store_ahead = KVR_STORE_AHEAD_OFF;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	cr_expect(!kvr_client_info(c)->store_ahead);
	expect_stores_unstaged(
	    c, 42, 3, "a staged slot although opts.store_ahead is off");
	kvr_close(c);

	/* On, but under the copy transport: not in effect, and said so. */
	o.store_ahead = KVR_STORE_AHEAD_ON;
	o.transport = KVR_TRANSPORT_COPY;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	cr_expect(!kvr_client_info(c)->store_ahead);
	kvr_close(c);
	unsetenv("KVRING_STORE_AHEAD");

	/* Anything else is refused, with the value named. */
	o.transport = 0;
	o.store_ahead = 7;
	c = NULL;
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -EINVAL);
	cr_expect_null(c);
	cr_expect(strstr(err, "opts.store_ahead 7"), "%s", err);
}

static bool chan_holds_two_transfers(void *arg)
{
	struct chan_wait *w = arg;

	return T_CSTAT(&srv.t, w->ch, transfers) == 2;
}

/* kvr_xfer_free() of a staged xfer (no commit, no abort) gives the slot
 * back: the next store asks kvringd and gets a new staged slot, so the
 * one after is answered while kvringd is frozen. Until it did, the
 * library kept the freed slot as taken and never staged again. */
Test(store_ahead, stages_again_when_a_staged_xfer_is_freed)
{
	struct kvr_client *c = connect_ahead("1");
	struct chan_wait w = {kvr_client_info(c)->channel};
	struct kvr_key k = key(1);
	uint64_t size = CHUNK;
	struct kvr_xfer x;
	int rc;

	cr_assert_eq(store1(c, 0), KVR_SLOT_OK); /* asks, stages */
	cr_assert_eq(kvr_prepare_store(c, &k, &size, 1, &x), 0, "%s",
		     kvr_client_errmsg(c)); /* staged */
	wsrv_fill(&k, x.slots[0].ptr, CHUNK);
	kvr_xfer_free(&x); /* dropped: neither commit nor abort */
	cr_assert_eq(store1(c, 2), KVR_SLOT_OK);
	k = key(3);
	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	rc = kvr_prepare_store(c, &k, &size, 1, &x);
	kill(srv.pid, SIGCONT);
	cr_assert_eq(rc, 0, "prepare_store after a freed staged xfer: %d %s",
		     rc, kvr_client_errmsg(c));
	wsrv_fill(&k, x.slots[0].ptr, CHUNK);
	cr_assert_eq(kvr_commit_store(c, &x), 0, "%s", kvr_client_errmsg(c));
	/* The dropped key was never published, and its slot was freed: the
	 * channel holds only its new staged slot and kvringd's spare. */
	cr_expect_eq(lookup1(c, 1), 0);
	cr_expect_eq(lookup1(c, 3), 1);
	cr_expect(t_wait_until(chan_holds_two_transfers, &w, 2000),
		  "%llu transfers open, expected 2 staged slots (the "
		  "worker's and kvringd's spare)",
		  (unsigned long long)T_CSTAT(&srv.t, w.ch, transfers));
	kvr_close(c);
}

Test(store_ahead, stores_nothing_twice_and_asks_first_after_a_duplicate)
{
	struct kvr_client *c = connect_ahead("1");

	cr_assert_eq(store1(c, 1), KVR_SLOT_OK); /* asks, stages */
	cr_assert_eq(store1(c, 2), KVR_SLOT_OK); /* staged */
	cr_expect_str_eq(kvr_client_errmsg(c), "");
	/* Staged again: the copy is made, and the bind finds the key; the
	 * commit succeeds and says that it stored nothing. */
	cr_assert_eq(store1(c, 1), KVR_SLOT_OK);
	cr_expect(strstr(kvr_client_errmsg(c), "stored already"), "%s",
		  kvr_client_errmsg(c));
	cr_expect_eq(lookup1(c, 1), 1);
	/* The next duplicate is asked for first: EXISTS, no copy. */
	cr_expect_eq(store1(c, 2), KVR_SLOT_EXISTS);
	cr_expect_eq(store1(c, 1), KVR_SLOT_EXISTS);
	/* A new key asked for turns store-ahead back on. */
	cr_expect_eq(store1(c, 3), KVR_SLOT_OK);
	cr_expect_eq(store1(c, 4), KVR_SLOT_OK);
	for (uint64_t i = 1; i <= 4; i++) {
		struct kvr_key k = key(i);

		cr_expect_eq(wsrv_retrieve_check(c, &k, 1, CHUNK), 1u);
	}
	kvr_close(c);
}

Test(store_ahead, aborts_locally_and_publishes_nothing)
{
	struct kvr_client *c = connect_ahead("1");
	struct kvr_key k = key(9);
	uint64_t size = CHUNK;
	struct kvr_xfer x;

	cr_assert_eq(store1(c, 1), KVR_SLOT_OK);
	cr_assert_eq(kvr_prepare_store(c, &k, &size, 1, &x), 0);
	cr_assert_eq(x.slots[0].status, KVR_SLOT_OK);
	memset(x.slots[0].ptr, 0xee, CHUNK);
	cr_assert_eq(kvr_abort_store(c, &x), 0);
	cr_expect_eq(lookup1(c, 9), 0);
	cr_expect_eq(store1(c, 9), KVR_SLOT_OK, "the slot is staged again");
	k = key(9);
	cr_expect_eq(wsrv_retrieve_check(c, &k, 1, CHUNK), 1u);
	kvr_close(c);
}

/* The server's reserved bytes, through a stats call of @c. */
static uint64_t reserved(struct kvr_client *c)
{
	struct kvr_stats_wire st;

	cr_assert_eq(kvr_stats(c, &st), 0);
	return st.reserved_bytes;
}

static struct kvr_client *watcher;

static bool nothing_reserved(void *arg)
{
	(void)arg;
	return reserved(watcher) == 0;
}

Test(store_ahead, frees_the_staged_slots_when_the_worker_closes)
{
	struct kvr_client *c = connect_ahead("1");

	watcher = wsrv_connect(&srv, 0, 5000);
	for (uint64_t i = 0; i < 3; i++)
		cr_assert_eq(store1(c, i), KVR_SLOT_OK);
	cr_expect_gt(reserved(watcher), 0u, "staged slots are reservations");
	kvr_close(c);
	cr_expect(t_wait_until(nothing_reserved, NULL, 3000),
		  "%llu bytes still reserved after close",
		  (unsigned long long)reserved(watcher));
	for (uint64_t i = 0; i < 3; i++)
		cr_expect_eq(lookup1(watcher, i), 1);
	kvr_close(watcher);
}

/* A forked worker: three chunks stored with store-ahead on, so that it
 * holds staged slots when it is killed. */
static void stage_three(void *arg)
{
	struct kvr_client *c = connect_ahead("1");

	(void)arg;
	for (uint64_t i = 0; i < 3; i++)
		store1(c, i);
}

Test(store_ahead, frees_the_staged_slots_when_the_worker_is_killed)
{
	pid_t pid = t_fork_ready(stage_three, NULL);

	cr_assert_gt(pid, 0, "fork a storing worker");
	watcher = wsrv_connect(&srv, 0, 5000);
	cr_expect_gt(reserved(watcher), 0u);
	t_kill_reap(pid);
	cr_expect(t_wait_until(nothing_reserved, NULL, 3000),
		  "%llu bytes still reserved after kill -9",
		  (unsigned long long)reserved(watcher));
	kvr_close(watcher);
}

Test(store_ahead, sends_the_checksum_in_the_bind)
{
	struct kvr_client *c;
	struct kvr_key k = key(2);
	struct kvr_xfer x;

	setenv("KVRING_CHECKSUM", "verify", 1);
	c = connect_ahead("1");
	cr_assert_eq(store1(c, 1), KVR_SLOT_OK);
	cr_assert_eq(store1(c, 2), KVR_SLOT_OK); /* bound, with its sum */
	cr_expect_eq(wsrv_retrieve_check(c, &k, 1, CHUNK), 1u);
	/* Damage it in the pool: only a kept sum can tell. */
	cr_assert_eq(kvr_prepare_retrieve(c, &k, 1, &x), 0);
	cr_assert_eq(x.nslots, 1u);
	((unsigned char *)x.slots[0].ptr)[100] ^= 0x5a;
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);
	cr_assert_eq(kvr_prepare_retrieve(c, &k, 1, &x), 0);
	cr_expect_eq(x.slots[0].status, KVR_SLOT_CORRUPT,
		     "a bound chunk's sum caught the damage");
	kvr_commit_retrieve(c, &x);
	kvr_close(c);
}

Test(store_ahead, is_off_under_the_copy_transport)
{
	struct kvr_client *c;

	setenv("KVRING_STORE_AHEAD", "1", 1);
	c = wsrv_connect(&srv, KVR_TRANSPORT_COPY, 5000);
	expect_stores_unstaged(c, 0, 3,
			       "a staged slot under the copy transport");
	for (uint64_t i = 0; i < 3; i++) {
		struct kvr_key k = key(i);

		cr_expect_eq(wsrv_retrieve_check(c, &k, 1, CHUNK), 1u);
	}
	kvr_close(c);
}

/* ---- a hand-made worker ---- */

static struct t_raw raw;

/* Answer header (and first slot) of the last t_raw_call. */
struct ans {
	struct kvr_resp_hdr h;
	struct kvr_slot_desc sd[2];
};

static int raw_call(uint32_t op, uint64_t handle, uint32_t flags,
		    const struct kvr_key *keys, const uint64_t *words,
		    uint32_t n, struct ans *a)
{
	memset(a, 0, sizeof(*a));
	return t_raw_call(&raw, op, handle, flags, keys, words, n, a,
			  sizeof(*a));
}

/* Hits of key(i) in the hand-made worker's namespace (its own model). */
static uint64_t raw_lookup1(uint64_t i)
{
	struct kvr_key k = key(i);
	struct ans a;

	cr_assert_gt(raw_call(KVR_OP_LOOKUP, 0, 0, &k, NULL, 1, &a), 0);
	cr_assert_eq(a.h.status, 0);
	return a.h.value;
}

/* Store key(i) by hand, asking for a staged slot; returns its id. */
static uint64_t raw_store_and_stage(uint64_t i, uint64_t size,
				    struct kvr_slot_desc *staged)
{
	struct kvr_key k = key(i);
	struct ans a;

	cr_assert_gt(raw_call(KVR_OP_PREPARE_STORE, 0, 0, &k, &size, 1, &a), 0);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(a.sd[0].status, KVR_SLOT_OK);
	cr_assert_gt(raw_call(KVR_OP_COMMIT_STORE, a.h.handle, KVR_REQ_STAGE,
			      NULL, NULL, 0, &a),
		     0);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(a.h.count, 1u, "a staged slot comes back");
	cr_assert_neq(a.h.handle, 0);
	cr_expect_gt(a.h.value >> KVR_COMMIT_STAGE_MS_SHIFT, 0u,
		     "with its lifetime");
	*staged = a.sd[0];
	return a.h.handle;
}

Test(store_ahead, publishes_a_staged_slot_only_through_a_bind)
{
	struct kvr_slot_desc sd;
	struct ans a;
	uint64_t id, w[3];

	cr_assert_eq(t_raw_connect(srv.sock, 0, &raw), 0);
	id = raw_store_and_stage(1, CHUNK, &sd);
	cr_expect_eq(sd.len, CHUNK);
	/* A plain commit of it is refused, and publishes nothing. */
	cr_assert_gt(raw_call(KVR_OP_COMMIT_STORE, id, 0, NULL, NULL, 0, &a),
		     0);
	cr_expect_eq(a.h.status, -EINVAL);
	/* A size it cannot take: refused, still staged. */
	w[0] = key(2).lo;
	w[1] = key(2).hi;
	w[2] = CHUNK * 2;
	cr_assert_gt(
	    raw_call(KVR_OP_COMMIT_STORE, id, KVR_REQ_BIND, NULL, w, 3, &a), 0);
	cr_expect_eq(a.h.status, -EINVAL);
	cr_expect_eq(raw_lookup1(2), 0);
	/* The bind names it, commits it and answers its outcome. */
	w[2] = CHUNK;
	memset((char *)raw.pool + sd.off, 0x42, CHUNK);
	cr_assert_gt(
	    raw_call(KVR_OP_COMMIT_STORE, id, KVR_REQ_BIND, NULL, w, 3, &a), 0);
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(a.h.value & KVR_COMMIT_OUTCOME_MASK, KVR_SLOT_OK);
	cr_expect_eq(a.h.count, 0u, "no new slot asked for");
	cr_expect_eq(raw_lookup1(2), 1);
	/* Binding again: the id is gone. */
	cr_assert_gt(
	    raw_call(KVR_OP_COMMIT_STORE, id, KVR_REQ_BIND, NULL, w, 3, &a), 0);
	cr_expect_eq(a.h.status, -ENOENT);
	t_raw_close(&raw);
}

Test(store_ahead, answers_a_forged_staged_id_and_cuts_off_a_malformed_bind)
{
	struct kvr_client *c = connect_ahead("1");
	struct kvr_slot_desc sd;
	struct ans a;
	uint64_t id, w[3] = {key(5).lo, key(5).hi, CHUNK};

	cr_assert_eq(store1(c, 1), KVR_SLOT_OK);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &raw), 0);
	id = raw_store_and_stage(2, CHUNK, &sd);
	/* An id that is nobody's, and another worker's (the library's
	 * staged slot lives on another channel): both unknown here. */
	cr_assert_gt(raw_call(KVR_OP_COMMIT_STORE, id ^ 0x10000, KVR_REQ_BIND,
			      NULL, w, 3, &a),
		     0);
	cr_expect_eq(a.h.status, -ENOENT);
	cr_assert_gt(raw_call(KVR_OP_PING, 0, 0, NULL, NULL, 0, &a), 0);
	cr_expect_eq(a.h.status, 0, "the worker carries on");
	cr_expect_eq(raw_lookup1(5), 0u);
	/* A bind whose count leaves out its size is malformed: a good bind
	 * from the encoder, then the count damaged. Cut off. */
	{
		struct kvr_req_view v = {.op = KVR_OP_COMMIT_STORE,
					 .hdr = {.req_id = 99,
						 .handle = id,
						 .count = 3,
						 .flags = KVR_REQ_BIND},
					 .words = w};
		_Alignas(8) char rec[32 + 3 * 8];
		void *p;

		cr_assert_eq(kvr_req_encode(&v, rec, sizeof(rec)),
			     (int)sizeof(rec));
		((struct kvr_req_hdr *)(void *)rec)->count = 2;
		cr_assert_eq(kvr_ring_claim(&raw.req, KVR_OP_COMMIT_STORE,
					    32 + 2 * 8, &p),
			     0);
		memcpy(p, rec, 32 + 2 * 8);
		kvr_ring_commit(&raw.req);
		kvr_bell_notify(&raw.ch->req_bell, raw.req_efd);
		cr_expect(t_raw_wait_hangup(&raw, t_timeout_ms(10000)),
			  "a malformed bind did not cut the worker off");
		cr_expect(t_server_log_has(&srv.t, "malformed request"));
	}
	t_raw_close(&raw);
	/* The library's worker is untouched. */
	cr_expect_eq(store1(c, 3), KVR_SLOT_OK);
	cr_expect_eq(lookup1(c, 3), 1);
	kvr_close(c);
}

/* Restart the suite's kvringd with @extra options (NULL-terminated). */
static void restart_with(const char *const *extra)
{
	const char *args[32] = {
	    "--pool-size", srv.pool,	  "--allow-root", "--heartbeat-ms",
	    "100",	   "--log-level", "info"};
	int n = 7;

	wsrv_stop(&srv);
	while (*extra && n < 31)
		args[n++] = *extra++;
	args[n] = NULL;
	t_server_start(&srv.t, args);
	srv.pid = srv.t.pid;
	cr_assert_eq(t_server_map(&srv.t), 0);
}

static bool expired_some(void *arg)
{
	(void)arg;
	return T_GSTAT(&srv.t, xfers_expired) > 0;
}

Test(store_ahead, stores_on_when_the_staged_slot_outlived_half_its_life)
{
	struct kvr_client *c;

	restart_with((const char *const[]){"--xfer-ms", "600", "--stall-ms",
					   "200", NULL});
	c = connect_ahead("1");
	cr_assert_eq(store1(c, 1), KVR_SLOT_OK); /* asks, gets a slot */
	cr_assert_eq(store1(c, 2), KVR_SLOT_OK); /* staged */
	/* Past both staged slots' deadline: kvringd reclaims them. */
	wsrv_sleep_ms(900);
	cr_expect(t_wait_until(expired_some, NULL, 2000),
		  "kvringd reclaimed no staged slot");
	cr_assert_eq(store1(c, 3), KVR_SLOT_OK, "asked kvringd instead");
	for (uint64_t i = 1; i <= 3; i++) {
		struct kvr_key k = key(i);

		cr_expect_eq(wsrv_retrieve_check(c, &k, 1, CHUNK), 1u);
	}
	kvr_close(c);
}

Test(store_ahead, never_publishes_a_staged_slot_its_deadline_reclaimed)
{
	struct kvr_slot_desc sd;
	struct ans a;
	uint64_t id, w[3] = {key(7).lo, key(7).hi, CHUNK};

	restart_with((const char *const[]){"--xfer-ms", "300", "--stall-ms",
					   "100", NULL});
	cr_assert_eq(t_raw_connect(srv.sock, 0, &raw), 0);
	id = raw_store_and_stage(1, CHUNK, &sd);
	wsrv_sleep_ms(600);
	cr_assert_gt(
	    raw_call(KVR_OP_COMMIT_STORE, id, KVR_REQ_BIND, NULL, w, 3, &a), 0);
	cr_expect_eq(a.h.status, KVR_ERR_EXPIRED);
	cr_expect_eq(raw_lookup1(7), 0u, "nothing was published");
	cr_expect_eq(raw_lookup1(1), 1u);
	t_raw_close(&raw);
}

Test(store_ahead, stages_no_more_than_the_reserve_quota_allows)
{
	struct kvr_client *c;
	uint32_t ch;

	/* Room for one staged 64 KiB chunk, not for a second. */
	restart_with((const char *const[]){"--quota-reserved", "96K", NULL});
	c = connect_ahead("1");
	ch = kvr_client_info(c)->channel;
	for (uint64_t i = 0; i < 6; i++) {
		cr_assert_eq(store1(c, i), KVR_SLOT_OK);
		cr_expect_leq(T_CSTAT(&srv.t, ch, reserved_bytes), 96u << 10);
	}
	cr_expect_gt(T_CSTAT(&srv.t, ch, quota_denied), 0u,
		     "the spare was refused");
	for (uint64_t i = 0; i < 6; i++) {
		struct kvr_key k = key(i);

		cr_expect_eq(wsrv_retrieve_check(c, &k, 1, CHUNK), 1u);
	}
	kvr_close(c);
}

Test(store_ahead, binds_early_then_commits_the_bound_slot_plainly)
{
	struct kvr_slot_desc sd;
	struct kvr_key k = key(3), k1 = key(1);
	uint64_t id, size = CHUNK;
	struct ans a;

	cr_assert_eq(t_raw_connect(srv.sock, 0, &raw), 0);
	id = raw_store_and_stage(1, CHUNK, &sd);
	/* The early bind of a stored key: EXISTS, no transfer, still
	 * staged (a plain commit of it is still refused). */
	cr_assert_gt(
	    raw_call(KVR_OP_PREPARE_STORE, id, KVR_REQ_BIND, &k1, &size, 1, &a),
	    0);
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(a.sd[0].status, KVR_SLOT_EXISTS);
	cr_expect_eq(a.h.handle, 0u);
	cr_assert_gt(raw_call(KVR_OP_COMMIT_STORE, id, 0, NULL, NULL, 0, &a),
		     0);
	cr_expect_eq(a.h.status, -EINVAL);
	/* A new key: the staged slot, now a plain transfer of it. */
	cr_assert_gt(
	    raw_call(KVR_OP_PREPARE_STORE, id, KVR_REQ_BIND, &k, &size, 1, &a),
	    0);
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(a.sd[0].status, KVR_SLOT_OK);
	cr_expect_eq(a.sd[0].off, sd.off);
	cr_expect_eq(a.h.handle, id);
	cr_expect_eq(raw_lookup1(3), 0u, "bound is not published");
	cr_assert_gt(raw_call(KVR_OP_COMMIT_STORE, id, 0, NULL, NULL, 0, &a),
		     0);
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(raw_lookup1(3), 1u);
	/* Another id, or the same one again: unknown. */
	cr_assert_gt(
	    raw_call(KVR_OP_PREPARE_STORE, id, KVR_REQ_BIND, &k, &size, 1, &a),
	    0);
	cr_expect_eq(a.h.status, -ENOENT);
	t_raw_close(&raw);
}

/* A one-key store of key(i), @size bytes, prepared while kvringd is
 * frozen: only a staged prepare can answer then. Returns the prepare's
 * code (a prepare that waits for kvringd times out after 300 ms). */
static int store_frozen(uint64_t i, uint64_t size)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 300);
	static struct kvr_client *c;
	struct kvr_key k = key(i);
	struct kvr_xfer x;
	char err[256];
	int rc;

	if (!c) {
		setenv("KVRING_STORE_AHEAD", "1", 1);
		cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s",
			     err);
	}
	kill(srv.pid, SIGSTOP);
	rc = kvr_prepare_store(c, &k, &size, 1, &x);
	kill(srv.pid, SIGCONT);
	if (rc == 0) {
		cr_assert_eq(x.slots[0].status, KVR_SLOT_OK);
		wsrv_fill(&k, x.slots[0].ptr, size);
		cr_assert_eq(kvr_commit_store(c, &x), 0, "%s",
			     kvr_client_errmsg(c));
	} else {
		/* Not staged: store it the usual way to go on. The timed
		 * out prepare reserved the key; the abort the library owes
		 * for it goes out with the next request, so a retry finds
		 * the key free. */
		for (int t = 0; t < 20; t++) {
			cr_assert_eq(kvr_prepare_store(c, &k, &size, 1, &x), 0);
			if (x.slots[0].status == KVR_SLOT_OK)
				break;
			cr_assert_eq(kvr_commit_store(c, &x), 0);
			wsrv_sleep_ms(10);
		}
		cr_assert_eq(x.slots[0].status, KVR_SLOT_OK);
		wsrv_fill(&k, x.slots[0].ptr, size);
		cr_assert_eq(kvr_commit_store(c, &x), 0);
	}
	return rc;
}

Test(store_ahead, stages_again_when_the_chunk_size_changes)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);

	cr_expect_neq(store_frozen(1, CHUNK), 0, "the first store asks");
	cr_expect_eq(store_frozen(2, CHUNK), 0, "then it is staged");
	cr_expect_neq(store_frozen(3, 2 * CHUNK), 0, "another size asks");
	cr_expect_eq(store_frozen(4, 2 * CHUNK), 0, "and is staged again");
	cr_expect_eq(store_frozen(5, 2 * CHUNK), 0);
	for (uint64_t i = 1; i <= 5; i++) {
		struct kvr_key k = key(i);

		cr_expect_eq(
		    wsrv_retrieve_check(c, &k, 1, i < 3 ? CHUNK : 2 * CHUNK),
		    1u);
	}
	kvr_close(c);
}

/* ==== What kvring-inspect shows of store-ahead ==== */

/* kvring-inspect --json on this test's kvringd, parsed (python3's json). */
static struct t_json *inspect_json(void)
{
	char cmd[512], why[256] = "", *out = NULL;
	size_t cap = 0, n = 0;
	struct t_json *j;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-inspect --name '%s' --json",
		 KVR_BIN_DIR, srv.t.name);
	f = popen(cmd, "r");
	cr_assert(f, "%s", cmd);
	for (;;) {
		if (cap - n < 4096) {
			cap = cap ? 2 * cap : 65536;
			out = realloc(out, cap);
			cr_assert(out);
		}
		size_t r = fread(out + n, 1, cap - n - 1, f);

		if (r == 0)
			break;
		n += r;
	}
	out[n] = '\0';
	cr_assert_eq(pclose(f), 0, "%s failed: %s", cmd, out);
	j = t_json_parse(out, why, sizeof(why));
	cr_assert(j, "kvring-inspect --json: %s", why);
	free(out);
	return j;
}

/* The global and channel counters kvringd published reach @want
 * (published lazily: after a batch, on every sleep). */
struct stage_want {
	uint64_t staged, stages, binds, binds_existing;
	uint32_t ch;
};

static bool stage_counts_are(void *arg)
{
	const struct stage_want *w = arg;
	struct kvr_ctl_obs_shm *o = kvr_ctl_obs((void *)srv.t.hdr);
	struct kvr_stage_shm *g = &o->stage;
	struct kvr_stage_shm *c =
	    &kvr_chan_obs((struct kvr_channel_shm *)(uintptr_t)t_server_chan(
			      &srv.t, w->ch))
		 ->stage;

	return atomic_load(&g->staged) == w->staged &&
	       atomic_load(&g->stages) == w->stages &&
	       atomic_load(&g->binds) == w->binds &&
	       atomic_load(&g->binds_existing) == w->binds_existing &&
	       atomic_load(&c->staged) == w->staged &&
	       atomic_load(&c->stages) == w->stages &&
	       atomic_load(&c->binds) == w->binds &&
	       atomic_load(&c->binds_existing) == w->binds_existing;
}

/* The JSON's store_ahead objects, server-wide and of channel 0 (the only
 * one shown), say @w exactly. */
static void expect_json_stage(const struct stage_want *w, const char *when)
{
	struct t_json *j = inspect_json();
	const char *base[] = {"store_ahead", "channels.0.store_ahead"};
	char path[96];

	cr_expect_eq(t_json_count(j, "channels"), 1, "%s", when);
	for (int b = 0; b < 2; b++) {
		const struct {
			const char *k;
			uint64_t v;
		} f[] = {{"staged", w->staged},
			 {"stages", w->stages},
			 {"binds", w->binds},
			 {"binds_existing", w->binds_existing}};

		for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
			snprintf(path, sizeof(path), "%s.%s", base[b], f[i].k);
			cr_expect_eq(t_json_int(j, path, -1), (long long)f[i].v,
				     "%s: %s", when, path);
		}
	}
	t_json_free(j);
}

/* kvringd publishes store-ahead's counters, and kvring-inspect shows
 * them: N new one-key stores bind N - 1 staged slots (the first asks),
 * each commit stages one in line or takes the spare staged after the
 * last batch, and a duplicate's bind finds its key stored. */
Test(store_ahead, shows_its_counters_in_the_inspector)
{
	struct kvr_client *c = connect_ahead("1");
	struct stage_want w = {.ch = kvr_client_info(c)->channel};
	const uint64_t n = 5;

	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(store1(c, i), KVR_SLOT_OK);
	cr_assert_eq(store1(c, 1), KVR_SLOT_OK); /* staged: bind finds it */
	w.staged = 2; /* the worker's and the spare */
	w.stages = n + 1;
	w.binds = n - 1;
	w.binds_existing = 1;
	cr_expect(
	    t_wait_until(stage_counts_are, &w, 2000),
	    "published: staged %llu stages %llu binds %llu existing %llu",
	    (unsigned long long)kvr_ctl_obs((void *)srv.t.hdr)->stage.staged,
	    (unsigned long long)kvr_ctl_obs((void *)srv.t.hdr)->stage.stages,
	    (unsigned long long)kvr_ctl_obs((void *)srv.t.hdr)->stage.binds,
	    (unsigned long long)kvr_ctl_obs((void *)srv.t.hdr)
		->stage.binds_existing);
	expect_json_stage(&w, "after the stores");
	kvr_close(c);
}
