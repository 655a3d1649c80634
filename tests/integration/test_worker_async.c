/* SPDX-License-Identifier: MIT */
/*
 * test_worker_async.c - libkvring's asynchronous calls and its thread
 * rules: several requests in flight at once, each completion carrying the
 * caller's data and matched to the right xfer; a synchronous call made
 * while async requests are in flight leaves their completions queued; and
 * several threads hammering one client (a mutex serialises calls) never
 * mix up answers or bytes. Both transports run the pipeline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

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
