/* SPDX-License-Identifier: MIT */
/*
 * test_worker.c - libkvring against a real kvringd, shared-memory
 * transport: byte round trips of 1, 16 and 128 chunks, the idempotent
 * store (seed bug 1), abort, prefix lookup, leases redeemed by another
 * process, ping/stats, argument errors and close. Failure behaviour (server
 * stopped, killed, restarted) is in test_worker_fail.c, the copy transport
 * in test_worker_copy.c, async and threads in test_worker_async.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

TestSuite(worker, .init = setup, .fini = teardown, .timeout = 60);

/* Keys for request r with n chunks. */
static struct kvr_key *make_keys(struct kvr_client *c, uint32_t r, uint32_t n)
{
	uint32_t *t = malloc((size_t)n * 16 * sizeof(*t) + 4);
	struct kvr_key *k = calloc(n ? n : 1, sizeof(*k));
	long got;

	cr_assert(t && k);
	wsrv_tokens(r, t, (size_t)n * 16);
	got = kvr_client_keys(c, t, (size_t)n * 16, k, n);
	cr_assert_eq(got, (long)n, "keys: %ld", got);
	free(t);
	return k;
}

static void roundtrip(uint32_t n, uint64_t chunk_bytes)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, n, n);
	const struct kvr_client_info *i = kvr_client_info(c);

	cr_expect_eq(i->transport, KVR_TRANSPORT_SHM, "transport %u",
		     i->transport);
	cr_expect_gt(i->attach_ns, 0);
	cr_expect_neq(strstr(i->debug, "transport shm"), NULL, "%s", i->debug);
	cr_assert_eq(wsrv_store(c, k, n, chunk_bytes), n);
	cr_expect_eq(kvr_lookup(c, k, n, NULL), (long)n);
	cr_expect_eq(wsrv_retrieve_check(c, k, n, chunk_bytes), n);
	free(k);
	kvr_close(c);
}

Test(worker, bytes_round_trip_when_1_chunk)
{
	roundtrip(1, 256 * 1024);
}

Test(worker, bytes_round_trip_when_16_chunks)
{
	roundtrip(16, 256 * 1024);
}

Test(worker, bytes_round_trip_when_128_chunks)
{
	roundtrip(128, 64 * 1024);
}

Test(worker, bytes_round_trip_when_another_client_retrieves)
{
	struct kvr_client *a = wsrv_connect(&srv, 0, 5000);
	struct kvr_client *b = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(a, 7, 8);

	cr_assert_eq(wsrv_store(a, k, 8, 100000), 8);
	kvr_close(a);
	cr_expect_eq(wsrv_retrieve_check(b, k, 8, 100000), 8);
	free(k);
	kvr_close(b);
}

Test(worker, store_is_a_noop_when_keys_are_already_stored)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, 2, 4);
	uint64_t sizes[4] = {4096, 4096, 4096, 4096};
	struct kvr_xfer x;

	cr_assert_eq(wsrv_store(c, k, 4, 4096), 4);
	/* Seed bug 1: the same prompt again must succeed as a no-op. */
	cr_assert_eq(kvr_prepare_store(c, k, sizes, 4, &x), 0);
	cr_assert_eq(x.nslots, 4);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(x.slots[i].status, KVR_SLOT_EXISTS, "slot %d: %d",
			     i, x.slots[i].status);
	cr_expect_eq(kvr_commit_store(c, &x), 0, "%s", kvr_client_errmsg(c));
	cr_expect_eq(x.slots, NULL, "commit frees the slots");
	/* And from a second connection (a restarted worker). */
	kvr_close(c);
	c = wsrv_connect(&srv, 0, 5000);
	cr_expect_eq(wsrv_store(c, k, 4, 4096), 0);
	cr_expect_eq(wsrv_retrieve_check(c, k, 4, 4096), 4);
	free(k);
	kvr_close(c);
}

Test(worker, store_partly_new_when_some_keys_exist)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, 3, 6);

	cr_assert_eq(wsrv_store(c, k, 3, 8192), 3);
	cr_expect_eq(wsrv_store(c, k, 6, 8192), 3);
	cr_expect_eq(wsrv_retrieve_check(c, k, 6, 8192), 6);
	free(k);
	kvr_close(c);
}

Test(worker, nothing_is_stored_when_store_is_aborted)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, 4, 3);
	uint64_t sizes[3] = {4096, 4096, 4096};
	struct kvr_xfer x;

	cr_assert_eq(kvr_prepare_store(c, k, sizes, 3, &x), 0);
	cr_assert_eq(x.slots[0].status, KVR_SLOT_OK);
	memset(x.slots[0].ptr, 0x5a, 4096);
	cr_expect_eq(kvr_abort_store(c, &x), 0, "%s", kvr_client_errmsg(c));
	cr_expect_eq(kvr_lookup(c, k, 3, NULL), 0);
	/* The keys can be stored properly afterwards. */
	cr_expect_eq(wsrv_store(c, k, 3, 4096), 3);
	cr_expect_eq(wsrv_retrieve_check(c, k, 3, 4096), 3);
	free(k);
	kvr_close(c);
}

Test(worker, lookup_returns_stored_prefix_when_more_keys_are_asked)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, 5, 12);
	struct kvr_xfer x;

	cr_assert_eq(wsrv_store(c, k, 10, 4096), 10);
	cr_expect_eq(kvr_lookup(c, k, 12, NULL), 10);
	cr_expect_eq(kvr_lookup(c, k, 5, NULL), 5);
	cr_expect_eq(kvr_lookup(c, k + 10, 2, NULL), 0);
	/* Retrieve pins the same prefix. */
	cr_assert_eq(kvr_prepare_retrieve(c, k, 12, &x), 0);
	cr_expect_eq(x.nslots, 10);
	cr_expect_eq(kvr_commit_retrieve(c, &x), 0);
	free(k);
	kvr_close(c);
}

Test(worker, retrieve_is_empty_when_nothing_is_stored)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, 6, 3);
	struct kvr_xfer x;

	cr_assert_eq(kvr_prepare_retrieve(c, k, 3, &x), 0);
	cr_expect_eq(x.nslots, 0);
	cr_expect_eq(kvr_commit_retrieve(c, &x), 0);
	free(k);
	kvr_close(c);
}

Test(worker, lease_is_redeemed_when_another_process_retrieves)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, 8, 6);
	uint64_t lease = 0;
	pid_t pid;
	int st;

	cr_assert_eq(wsrv_store(c, k, 6, 32768), 6);
	cr_assert_eq(kvr_lookup(c, k, 6, &lease), 6);
	cr_assert_neq(lease, 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* Another process (a worker redeeming a scheduler's lease). */
		struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
		struct kvr_client *w = NULL;
		struct kvr_xfer x;
		int bad = 0;

		if (kvr_connect(&o, &w, NULL, 0) < 0)
			_exit(10);
		if (kvr_prepare_retrieve_lease(w, lease, &x) < 0)
			_exit(11);
		if (x.nslots != 6)
			_exit(12);
		for (uint32_t i = 0; i < x.nslots; i++)
			bad |=
			    wsrv_check(&k[i], x.slots[i].ptr, 32768) != 32768;
		if (kvr_commit_retrieve(w, &x) < 0)
			_exit(13);
		kvr_close(w);
		_exit(bad ? 14 : 0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "child status 0x%x (10 connect, 11 redeem, 12 count, 13 "
		  "commit, 14 bytes)",
		  st);
	/* The lease was taken over: releasing it now finds nothing. */
	cr_expect_eq(kvr_release(c, lease), -ENOENT);
	free(k);
	kvr_close(c);
}

Test(worker, release_drops_lease_when_called_once)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key *k = make_keys(c, 9, 2);
	uint64_t lease = 0;

	cr_assert_eq(wsrv_store(c, k, 2, 4096), 2);
	cr_assert_eq(kvr_lookup(c, k, 2, &lease), 2);
	cr_expect_eq(kvr_release(c, lease), 0, "%s", kvr_client_errmsg(c));
	cr_expect_eq(kvr_release(c, lease), -ENOENT);
	free(k);
	kvr_close(c);
}

Test(worker, ping_and_stats_answer_when_connected)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_stats_wire st;
	uint64_t ns = 0;

	cr_expect_eq(kvr_ping(c, &ns), 0, "%s", kvr_client_errmsg(c));
	cr_expect_gt(ns, 0);
	cr_expect_eq(kvr_stats(c, &st), 0, "%s", kvr_client_errmsg(c));
	cr_expect_eq(st.pool_bytes, kvr_client_info(c)->pool_bytes);
	cr_expect_geq(st.workers, 1);
	kvr_close(c);
}

Test(worker, calls_return_einval_when_arguments_are_bad)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key k[2] = {{1, 2}, {3, 4}};
	static struct kvr_key many[1025];
	struct kvr_xfer x;

	cr_expect_eq(kvr_prepare_store(c, k, NULL, 2, &x), -EINVAL);
	cr_expect_eq(kvr_prepare_store(c, k, NULL, 2, NULL), -EINVAL);
	cr_expect_eq(kvr_lookup(NULL, k, 2, NULL), -EINVAL);
	cr_expect_eq(kvr_lookup(c, many, 1025, NULL), -E2BIG);
	cr_expect_eq(kvr_prepare_retrieve_lease(c, 0, &x), -EINVAL);
	/* The client is still fine. */
	cr_expect_eq(kvr_lookup(c, k, 2, NULL), 0);
	kvr_close(c);
}

Test(worker, connect_returns_einval_when_namespace_is_bad)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	struct kvr_client *c = NULL;
	char err[256] = "";

	o.ns.chunk_tokens = 0;
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -EINVAL);
	cr_expect_eq(c, NULL);
	cr_expect_neq(err[0], '\0');
}

Test(worker, close_is_harmless_when_null_or_after_use)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);

	kvr_close(c);
	kvr_close(NULL);
	/* The server dropped the channel: a new client gets it back. */
	c = wsrv_connect(&srv, 0, 5000);
	cr_expect_eq(kvr_ping(c, NULL), 0);
	kvr_close(c);
}

Test(worker, pool_is_shared_when_two_clients_attach)
{
	struct kvr_client *a = wsrv_connect(&srv, 0, 5000);
	struct kvr_client *b = wsrv_connect(&srv, 0, 5000);

	cr_expect_str_eq(kvr_client_info(a)->pool_name,
			 kvr_client_info(b)->pool_name);
	cr_expect_neq(kvr_client_info(a)->channel, kvr_client_info(b)->channel);
	kvr_close(b);
	kvr_close(a);
}
