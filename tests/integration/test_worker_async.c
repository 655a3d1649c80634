/* SPDX-License-Identifier: MIT */
/*
 * test_worker_async.c - libkvring's asynchronous calls and its thread
 * rules: several requests in flight at once, each completion carrying the
 * caller's data and matched to the right xfer; a synchronous call made
 * while async requests are in flight leaves their completions queued; and
 * several threads hammering one client (a mutex serialises calls) never
 * mix up answers or bytes. Both transports run the pipeline. Held submits
 * (kvr_submit_hold): kvringd sees none of them until a flush, a reap, a
 * synchronous call or a full request ring publishes them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>
#include <kvring/layout.h>
#include <kvring/ring.h>

#include "worker_srv.h"

static struct wsrv srv;

static void setup(void)
{
	wsrv_up(&srv);
}

static void teardown(void)
{
	wsrv_down(&srv);
}

TestSuite(worker_async, .init = setup, .fini = teardown, .timeout = 90);

#define NREQ 8
#define NCH  4
#define CHB  16384

static void keys_for(struct kvr_client *c, uint32_t r, struct kvr_key *k,
		     uint32_t n)
{
	uint32_t t[16 * 16];

	wsrv_tokens(r, t, (size_t)n * 16);
	cr_assert_eq(kvr_client_keys(c, t, (size_t)n * 16, k, n), (long)n);
}

/* Reap exactly n completions, in any order, into out[user index]. */
static void reap_n(struct kvr_client *c, struct kvr_completion *by_user,
		   void *base, int n)
{
	int got = 0;

	while (got < n) {
		struct kvr_completion e[4];
		int r = kvr_reap(c, e, 4, 1, -1);

		cr_assert_gt(r, 0, "reap: %d %s", r, kvr_client_errmsg(c));
		for (int i = 0; i < r; i++) {
			long idx = (char *)e[i].user - (char *)base;

			cr_assert(idx >= 0 && idx < NREQ, "bad user %p",
				  e[i].user);
			by_user[idx] = e[i];
		}
		got += r;
	}
}

static void pipeline(int transport)
{
	struct kvr_client *c = wsrv_connect(&srv, transport, 5000);
	static char tag[NREQ]; /* user data: &tag[i] identifies request i */
	struct kvr_key k[NREQ][NCH];
	uint64_t sizes[NCH] = {CHB, CHB, CHB, CHB};
	struct kvr_xfer x[NREQ];
	struct kvr_completion done[NREQ];

	for (int r = 0; r < NREQ; r++)
		keys_for(c, 100 + (uint32_t)r, k[r], NCH);
	/* Prepare all stores at once. */
	for (int r = 0; r < NREQ; r++)
		cr_assert_eq(kvr_submit_prepare_store(c, k[r], sizes, NCH,
						      &x[r], &tag[r]),
			     0);
	cr_expect_eq(kvr_inflight(c), NREQ);
	reap_n(c, done, tag, NREQ);
	for (int r = 0; r < NREQ; r++) {
		cr_assert_eq(done[r].status, 0);
		cr_assert_eq(done[r].op, KVR_OP_PREPARE_STORE);
		cr_assert_eq(done[r].xfer, &x[r],
			     "completion %d carries xfer "
			     "%p, expected %p",
			     r, (void *)done[r].xfer, (void *)&x[r]);
		cr_assert_eq(x[r].nslots, NCH);
		for (int i = 0; i < NCH; i++) {
			cr_assert_eq(x[r].slots[i].status, KVR_SLOT_OK);
			wsrv_fill(&k[r][i], x[r].slots[i].ptr, CHB);
		}
	}
	/* A sync call in the middle of async traffic. */
	for (int r = 0; r < NREQ; r++)
		cr_assert_eq(kvr_submit_commit_store(c, &x[r], &tag[r]), 0);
	cr_expect_eq(kvr_ping(c, NULL), 0, "%s", kvr_client_errmsg(c));
	reap_n(c, done, tag, NREQ);
	for (int r = 0; r < NREQ; r++) {
		cr_expect_eq(done[r].status, 0);
		cr_expect_eq(done[r].op, KVR_OP_COMMIT_STORE);
		cr_expect_eq(x[r].slots, NULL, "commit freed the xfer");
	}
	/* Lookups carry their own hit counts back. */
	for (int r = 0; r < NREQ; r++)
		cr_assert_eq(kvr_submit_lookup(c, k[r], (uint32_t)(r % NCH) + 1,
					       false, &tag[r]),
			     0);
	reap_n(c, done, tag, NREQ);
	for (int r = 0; r < NREQ; r++)
		cr_expect_eq(done[r].value, r % NCH + 1, "lookup %d: %ld", r,
			     done[r].value);
	/* Retrieves, then verify and commit. */
	for (int r = 0; r < NREQ; r++)
		cr_assert_eq(
		    kvr_submit_prepare_retrieve(c, k[r], NCH, &x[r], &tag[r]),
		    0);
	reap_n(c, done, tag, NREQ);
	for (int r = 0; r < NREQ; r++) {
		cr_assert_eq(done[r].status, 0);
		cr_assert_eq(x[r].nslots, NCH);
		for (int i = 0; i < NCH; i++)
			cr_expect_eq(
			    wsrv_check(&k[r][i], x[r].slots[i].ptr, CHB), CHB,
			    "req %d chunk %d", r, i);
		cr_assert_eq(kvr_submit_commit_retrieve(c, &x[r], &tag[r]), 0);
	}
	reap_n(c, done, tag, NREQ);
	cr_expect_eq(kvr_inflight(c), 0);
	kvr_close(c);
}

Test(worker_async, completions_match_requests_when_pipelined_over_shm)
{
	pipeline(0);
}

Test(worker_async, completions_match_requests_when_pipelined_over_copy)
{
	pipeline(KVR_TRANSPORT_COPY);
}

Test(worker_async, reap_returns_zero_when_nothing_is_in_flight)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_completion e;
	struct kvr_xfer x = {0};

	cr_expect_eq(kvr_reap(c, &e, 1, 1, 100), 0);
	cr_expect_eq(kvr_reap(c, &e, 1, 0, 0), 0);
	/* A commit of an empty transfer completes without the server. */
	cr_expect_eq(kvr_submit_commit_store(c, &x, &x), 0);
	cr_expect_eq(kvr_reap(c, &e, 1, 1, 0), 1);
	cr_expect_eq(e.user, &x);
	cr_expect_eq(e.status, 0);
	kvr_close(c);
}

Test(worker_async, pending_requests_complete_with_error_when_server_dies)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_completion e[4];
	int tags[3], n = 0, r;

	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(kvr_submit_ping(c, &tags[i]), 0);
	wsrv_kill(&srv);
	while ((r = kvr_reap(c, e, 4, 1, -1)) > 0) {
		for (int i = 0; i < r; i++)
			cr_expect_eq(e[i].status, -EOWNERDEAD);
		n += r;
	}
	cr_expect_eq(n, 3, "every request completed");
	cr_expect_eq(r, -EOWNERDEAD);
	kvr_close(c);
}

struct thr {
	struct kvr_client *c;
	int id;
	int errors;
};

static void *hammer(void *arg)
{
	struct thr *t = arg;
	uint64_t sizes[2] = {8192, 8192};

	for (int it = 0; it < 40; it++) {
		struct kvr_key k[2];
		uint32_t tok[32];
		struct kvr_xfer x;

		wsrv_tokens((uint32_t)(t->id * 1000 + it), tok, 32);
		if (kvr_client_keys(t->c, tok, 32, k, 2) != 2)
			t->errors++;
		if (kvr_prepare_store(t->c, k, sizes, 2, &x) < 0) {
			t->errors++;
			continue;
		}
		for (uint32_t i = 0; i < x.nslots; i++)
			if (x.slots[i].status == KVR_SLOT_OK)
				wsrv_fill(&k[i], x.slots[i].ptr, 8192);
		if (kvr_commit_store(t->c, &x) < 0)
			t->errors++;
		if (kvr_lookup(t->c, k, 2, NULL) != 2)
			t->errors++;
		if (kvr_prepare_retrieve(t->c, k, 2, &x) < 0 || x.nslots != 2) {
			t->errors++;
			kvr_xfer_free(&x);
			continue;
		}
		for (uint32_t i = 0; i < 2; i++)
			if (wsrv_check(&k[i], x.slots[i].ptr, 8192) != 8192)
				t->errors++;
		if (kvr_commit_retrieve(t->c, &x) < 0)
			t->errors++;
	}
	return NULL;
}

Test(worker_async, answers_stay_matched_when_threads_share_one_client)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 10000);
	struct thr t[4];
	pthread_t th[4];

	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){.c = c, .id = i};
		cr_assert_eq(pthread_create(&th[i], NULL, hammer, &t[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		cr_expect_eq(t[i].errors, 0, "thread %d: %d errors (%s)", i,
			     t[i].errors, kvr_client_errmsg(c));
	}
	kvr_close(c);
}

/* ---- held submits (kvr_submit_hold / kvr_submit_flush) ---- */

/* The channel's published ping count, and its request ring's tail, as
 * kvringd and the ring show them (read-only mappings of the server's). */
static uint64_t pings_seen(uint32_t ch)
{
	return T_CSTAT(&srv.t, ch, requests[KVR_OP_PING]);
}

static uint64_t req_tail(uint32_t ch)
{
	const struct kvr_channel_shm *b = t_server_chan(&srv.t, ch);
	const struct kvr_ring_shm *r =
	    (const void *)((const char *)b + b->req_ring_off);

	return atomic_load_explicit(&r->tail, memory_order_relaxed);
}

static uint32_t held_ch;

static bool pings_answered_4(void *arg)
{
	(void)arg;
	return pings_seen(held_ch) >= 4;
}

static bool pings_answered_3(void *arg)
{
	(void)arg;
	return pings_seen(held_ch) >= 3;
}

static bool some_pings_answered(void *arg)
{
	(void)arg;
	return pings_seen(held_ch) > 0;
}

static struct kvr_client *held_client(int transport)
{
	struct kvr_client *c = wsrv_connect(&srv, transport, 5000);

	cr_assert_eq(t_server_map(&srv.t), 0, "map the control segment");
	held_ch = kvr_client_info(c)->channel;
	return c;
}

/* Reap exactly @n pings, each with status 0 and the user data given. */
static void reap_pings(struct kvr_client *c, int *tags, int n, int min_wait,
		       int timeout_ms)
{
	struct kvr_completion e[8];
	int got = 0, r;

	while (got < n) {
		r = kvr_reap(c, e, 8, (unsigned)min_wait, timeout_ms);
		cr_assert_gt(r, 0, "reap after %d of %d: %d (%s)", got, n, r,
			     kvr_client_errmsg(c));
		for (int i = 0; i < r; i++) {
			cr_expect_eq(e[i].op, KVR_OP_PING);
			cr_expect_eq(e[i].status, 0);
			cr_expect_eq(e[i].user, &tags[got + i],
				     "completion %d in submit order", got + i);
		}
		got += r;
	}
	cr_expect_eq(got, n);
}

Test(worker_async, held_requests_stay_unseen_until_flush)
{
	struct kvr_client *c = held_client(0);
	uint64_t tail0 = req_tail(held_ch);
	int tags[4];

	cr_assert_eq(kvr_submit_hold(c), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(kvr_submit_ping(c, &tags[i]), 0);
	cr_expect_eq(kvr_inflight(c), 4);
	/* kvringd spins on this ring for --spin-us: 50 ms is ample time to
	 * answer a published request. Nothing was published. */
	wsrv_sleep_ms(50);
	cr_expect_eq(req_tail(held_ch), tail0, "tail moved during the hold");
	cr_expect_eq(pings_seen(held_ch), 0,
		     "kvringd answered %llu held pings before the flush",
		     (unsigned long long)pings_seen(held_ch));
	cr_assert_eq(kvr_submit_flush(c), 0, "%s", kvr_client_errmsg(c));
	cr_expect(t_wait_until(pings_answered_4, NULL, 5000),
		  "after the flush kvringd counted %llu of 4 pings",
		  (unsigned long long)pings_seen(held_ch));
	cr_expect_gt(req_tail(held_ch), tail0);
	reap_pings(c, tags, 4, 4, 5000);
	cr_expect_eq(kvr_inflight(c), 0);
	kvr_close(c);
}

Test(worker_async, reap_publishes_held_requests_when_not_flushed)
{
	struct kvr_client *c = held_client(0);
	int tags[6];

	cr_assert_eq(kvr_submit_hold(c), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(kvr_submit_ping(c, &tags[i]), 0);
	/* No flush: the reap publishes them, or it would wait in vain. */
	reap_pings(c, tags, 3, 3, 5000);
	/* The hold lasts: the next ones are held again ... */
	for (int i = 3; i < 6; i++)
		cr_assert_eq(kvr_submit_ping(c, &tags[i]), 0);
	cr_expect(t_wait_until(pings_answered_3, NULL, 5000));
	wsrv_sleep_ms(30);
	cr_expect_eq(pings_seen(held_ch), 3, "pings counted: %llu",
		     (unsigned long long)pings_seen(held_ch));
	/* ... and a reap that does not wait publishes them too. */
	cr_expect_eq(kvr_reap(c, NULL, 0, 0, 0), 0);
	reap_pings(c, tags + 3, 3, 3, 5000);
	cr_expect_eq(kvr_submit_flush(c), 0);
	kvr_close(c);
}

Test(worker_async, sync_call_publishes_held_requests_first)
{
	struct kvr_client *c = held_client(0);
	uint64_t sns = 0;
	int tags[2];

	cr_assert_eq(kvr_submit_hold(c), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(kvr_submit_ping(c, &tags[i]), 0);
	cr_assert_eq(kvr_ping(c, &sns), 0, "%s", kvr_client_errmsg(c));
	cr_expect_gt(sns, 0);
	/* Answered in order: the held pings' completions are queued. */
	reap_pings(c, tags, 2, 0, 0);
	kvr_close(c);
}

Test(worker_async, full_request_ring_publishes_held_requests)
{
	struct kvr_client *c = held_client(0);
	static int tags[16384];
	int n = 0, rc = 0;

	cr_assert_eq(kvr_submit_hold(c), 0);
	/* A ping is 40 bytes of ring: the 128 KiB request ring fills after
	 * 3276 of them. The held ones must then go out: the submit that
	 * finds no room publishes them and drains answers once before it
	 * says -EAGAIN (or goes on, if kvringd was quick enough). */
	while (n < 16384 && (rc = kvr_submit_ping(c, &tags[n])) == 0)
		n++;
	cr_assert(rc == 0 || rc == -EAGAIN, "submit %d: %d (%s)", n, rc,
		  kvr_client_errmsg(c));
	cr_expect_geq(n, 3276, "only %d held pings fitted", n);
	/* No flush, no reap: kvringd must be answering them. */
	cr_expect(t_wait_until(some_pings_answered, NULL, 5000),
		  "%d held pings filled the ring, kvringd saw none", n);
	reap_pings(c, tags, n, 1, 5000);
	kvr_close(c);
}

Test(worker_async, hold_changes_nothing_over_copy)
{
	struct kvr_client *c = held_client(KVR_TRANSPORT_COPY);
	int tags[3];

	cr_assert_eq(kvr_submit_hold(c), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(kvr_submit_ping(c, &tags[i]), 0);
	/* Sent at once: kvringd counts them without a flush or reap. */
	cr_expect(t_wait_until(some_pings_answered, NULL, 5000),
		  "the copy transport held a request");
	reap_pings(c, tags, 3, 3, 5000);
	cr_expect_eq(kvr_submit_flush(c), 0);
	kvr_close(c);
}

Test(worker_async, hold_and_flush_refuse_a_null_client)
{
	cr_expect_eq(kvr_submit_hold(NULL), -EINVAL);
	cr_expect_eq(kvr_submit_flush(NULL), -EINVAL);
}

Test(worker_async, submits_refuse_a_null_xfer_and_name_the_call)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key k = {1, 2};
	uint64_t size = 4096;
	const char *msg;

	cr_expect_eq(kvr_submit_prepare_store(NULL, &k, &size, 1, NULL, NULL),
		     -EINVAL);
	cr_expect_eq(kvr_submit_prepare_store(c, &k, &size, 1, NULL, NULL),
		     -EINVAL);
	msg = kvr_client_errmsg(c);
	cr_expect(strstr(msg, "kvr_submit_prepare_store: xfer is NULL"), "%s",
		  msg);
	cr_expect_eq(kvr_submit_prepare_retrieve(c, &k, 1, NULL, NULL),
		     -EINVAL);
	msg = kvr_client_errmsg(c);
	cr_expect(strstr(msg, "kvr_submit_prepare_retrieve: xfer is NULL"),
		  "%s", msg);
	cr_expect_eq(kvr_submit_commit_store(NULL, NULL, NULL), -EINVAL);
	cr_expect_eq(kvr_submit_abort_store(c, NULL, NULL), -EINVAL);
	msg = kvr_client_errmsg(c);
	cr_expect(strstr(msg, "kvr_submit_abort_store: xfer is NULL"), "%s",
		  msg);
	/* A refused argument leaves the client usable. */
	cr_expect_eq(kvr_ping(c, NULL), 0);
	kvr_close(c);
}

/* ---- channel counters while the channel stays busy ---- */

struct busy {
	struct kvr_client *c;
	_Atomic bool stop;
	int err;
};

/* Held pings, 64 in flight, until told to stop. */
static void *keep_busy(void *arg)
{
	struct busy *b = arg;
	struct kvr_completion e[64];
	unsigned inflight = 0;

	kvr_submit_hold(b->c);
	while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
		int r;

		while (inflight < 64 && kvr_submit_ping(b->c, NULL) == 0)
			inflight++;
		r = kvr_reap(b->c, e, 64, 1, -1);
		if (r < 0) {
			b->err = r;
			break;
		}
		inflight -= (unsigned)r;
	}
	while (inflight > 0) {
		int r = kvr_reap(b->c, e, 64, 1, -1);

		if (r <= 0)
			break;
		inflight -= (unsigned)r;
	}
	kvr_submit_flush(b->c);
	return NULL;
}

static uint64_t busy_mark;

static bool pings_past_mark(void *arg)
{
	(void)arg;
	return pings_seen(held_ch) > busy_mark;
}

/* kvringd publishes a channel's counters when its loop idles, not after
 * every batch: they must still arrive, and keep moving, while a client
 * keeps the loop busy without a pause. */
Test(worker_async, channel_counters_move_while_the_channel_stays_busy)
{
	struct busy b = {.c = held_client(0)};
	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, keep_busy, &b), 0);
	for (int i = 0; i < 3; i++) {
		busy_mark = pings_seen(held_ch);
		cr_expect(t_wait_until(pings_past_mark, NULL, 5000),
			  "round %d: counter stuck at %llu while pings flow", i,
			  (unsigned long long)busy_mark);
	}
	atomic_store_explicit(&b.stop, true, memory_order_relaxed);
	pthread_join(th, NULL);
	cr_expect_eq(b.err, 0, "pinging thread: %d (%s)", b.err,
		     kvr_client_errmsg(b.c));
	kvr_close(b.c);
}
