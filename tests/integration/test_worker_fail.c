/* SPDX-License-Identifier: MIT */
/*
 * test_worker_fail.c - libkvring when kvringd is not well: frozen
 * (SIGSTOP), killed (SIGKILL), stopped cleanly (SIGTERM), restarted, or
 * never there. Every call must come back with the documented error instead
 * of hanging (DESIGN: "Server gone"); close must always work; a new
 * connection to a restarted server must work. No test asserts how fast a
 * call returns: only that it returned, and with which error.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "worker_srv.h"

static struct wsrv srv;

static void setup(void)
{
	wsrv_init(&srv, "32M");
	wsrv_start(&srv);
}

static void teardown(void)
{
	wsrv_stop(&srv);
	wsrv_cleanup(&srv);
}

TestSuite(worker_fail, .init = setup, .fini = teardown, .timeout = 60);

static void keys_for(struct kvr_client *c, uint32_t r, struct kvr_key *k,
		     uint32_t n)
{
	uint32_t t[16 * 16];

	cr_assert_leq(n, 16);
	wsrv_tokens(r, t, (size_t)n * 16);
	cr_assert_eq(kvr_client_keys(c, t, (size_t)n * 16, k, n), (long)n);
}

/* Store @n chunks of @k through @c, stop the server (SIGSTOP) and look
 * them up: the lookup's result. The caller sends SIGCONT. */
static long lookup_while_frozen(struct kvr_client *c, const struct kvr_key *k,
				uint32_t n)
{
	cr_assert_eq(wsrv_store(c, k, n, 4096), n);
	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	return kvr_lookup(c, k, n, NULL);
}

Test(worker_fail, call_returns_etimedout_when_server_is_stopped)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 1000);
	struct kvr_key k[4];
	long rc;

	keys_for(c, 1, k, 4);
	rc = lookup_while_frozen(c, k, 4);
	cr_expect_eq(rc, -ETIMEDOUT, "lookup while frozen: %ld (%s)", rc,
		     kvr_client_errmsg(c));
	cr_expect_neq(kvr_client_errmsg(c)[0], '\0');
	kill(srv.pid, SIGCONT);
	kvr_close(c);
}

Test(worker_fail, call_reports_stale_heartbeat_when_server_stays_stopped)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 3000);
	long rc;

	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	/* timeout 3 s > max(3 x 100 ms, 1 s): the heartbeat check fires
	 * first and breaks the client. */
	rc = kvr_ping(c, NULL);
	cr_expect_eq(rc, -ETIMEDOUT, "ping while frozen: %ld", rc);
	cr_expect_neq(strstr(kvr_client_errmsg(c), "heartbeat"), NULL, "%s",
		      kvr_client_errmsg(c));
	kill(srv.pid, SIGCONT);
	/* Broken: the same error comes back at once. */
	cr_expect_eq(kvr_ping(c, NULL), -ETIMEDOUT);
	kvr_close(c);
}

Test(worker_fail,
     connection_survives_when_server_resumes_before_heartbeat_is_stale)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 200);
	struct kvr_key k[2];
	long rc;

	keys_for(c, 2, k, 2);
	rc = lookup_while_frozen(c, k, 2);
	cr_expect_eq(rc, -ETIMEDOUT, "%ld", rc);
	kill(srv.pid, SIGCONT);
	/* The late answer is matched and dropped; the next call works. */
	rc = kvr_lookup(c, k, 2, NULL);
	cr_expect_eq(rc, 2, "lookup after resume: %ld (%s)", rc,
		     kvr_client_errmsg(c));
	kvr_close(c);
}

/* kvring.h: what a late answer to an abandoned call created on the server
 * is undone by the library. A reservation made while the caller had
 * already timed out must be aborted, not held until the channel closes. */
Test(worker_fail, late_reservation_is_undone_when_call_timed_out)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 200);
	const uint64_t sz[2] = {4096, 4096};
	struct kvr_stats_wire st;
	struct kvr_xfer x = {0};
	struct kvr_key k[2];
	long rc;

	keys_for(c, 7, k, 2);
	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	rc = kvr_prepare_store(c, k, sz, 2, &x);
	cr_expect_eq(rc, -ETIMEDOUT, "%ld", rc);
	kill(srv.pid, SIGCONT);
	/* The ping's wait takes the late answer (it comes first); the
	 * undo it owes goes out ahead of the stats request. */
	cr_assert_eq(kvr_ping(c, NULL), 0, "%s", kvr_client_errmsg(c));
	cr_assert_eq(kvr_stats(c, &st), 0, "%s", kvr_client_errmsg(c));
	cr_expect_eq(st.chan_reserved_bytes, 0, "late reservation kept");
	cr_expect_eq(st.reserved_bytes, 0);
	cr_expect_eq(st.chan_transfers, 0);
	kvr_xfer_free(&x);
	kvr_close(c);
}

Test(worker_fail, call_returns_eownerdead_when_server_is_killed)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key k[2];
	struct kvr_xfer x;
	long rc;

	keys_for(c, 3, k, 2);
	wsrv_kill(&srv);
	rc = kvr_lookup(c, k, 2, NULL);
	cr_expect_eq(rc, -EOWNERDEAD, "lookup after kill: %ld (%s)", rc,
		     kvr_client_errmsg(c));
	cr_expect_neq(strstr(kvr_client_errmsg(c), "closed the connection"),
		      NULL, "%s", kvr_client_errmsg(c));
	/* Every later call: the same error, no wait. */
	cr_expect_eq(kvr_ping(c, NULL), -EOWNERDEAD);
	cr_expect_eq(kvr_prepare_retrieve(c, k, 2, &x), -EOWNERDEAD);
	cr_expect_eq(x.nslots, 0);
	kvr_close(c);
}

Test(worker_fail, close_returns_when_server_was_killed)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_client *d = wsrv_connect(&srv, 0, 5000);

	wsrv_kill(&srv);
	kvr_close(c); /* without any call after the kill */
	cr_expect_eq(kvr_ping(d, NULL), -EOWNERDEAD);
	kvr_close(d);
}

Test(worker_fail, pending_transfer_fails_when_server_dies_mid_store)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key k[3];
	uint64_t sizes[3] = {4096, 4096, 4096};
	struct kvr_xfer x;

	keys_for(c, 4, k, 3);
	cr_assert_eq(kvr_prepare_store(c, k, sizes, 3, &x), 0);
	wsrv_kill(&srv);
	/* The slots stay mapped until close: writing them is still safe. */
	memset(x.slots[0].ptr, 1, 4096);
	cr_expect_eq(kvr_commit_store(c, &x), -EOWNERDEAD);
	cr_expect_eq(x.slots, NULL, "commit frees the transfer either way");
	kvr_close(c);
}

Test(worker_fail, reconnect_works_when_server_is_restarted)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_key k[4];
	uint8_t boot[16];

	keys_for(c, 5, k, 4);
	cr_assert_eq(wsrv_store(c, k, 4, 4096), 4);
	memcpy(boot, kvr_client_info(c)->boot_id, 16);
	wsrv_kill(&srv);
	wsrv_start(&srv);
	cr_expect_eq(kvr_lookup(c, k, 4, NULL), -EOWNERDEAD);
	kvr_close(c);

	c = wsrv_connect(&srv, 0, 5000);
	cr_expect_neq(memcmp(boot, kvr_client_info(c)->boot_id, 16), 0,
		      "a new server has a new boot id");
	/* The cache died with the old server; store again and read back. */
	cr_expect_eq(kvr_lookup(c, k, 4, NULL), 0);
	cr_expect_eq(wsrv_store(c, k, 4, 4096), 4);
	cr_expect_eq(wsrv_retrieve_check(c, k, 4, 4096), 4);
	kvr_close(c);
}

Test(worker_fail, call_returns_eownerdead_when_server_is_terminated)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	long rc;

	wsrv_stop(&srv);
	rc = kvr_ping(c, NULL);
	cr_expect_eq(rc, -EOWNERDEAD, "ping after SIGTERM: %ld (%s)", rc,
		     kvr_client_errmsg(c));
	kvr_close(c);
}

Test(worker_fail, connect_returns_enoent_when_no_server_listens)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 1000);
	struct kvr_client *c = NULL;
	char err[256] = "";
	int rc;

	wsrv_stop(&srv);
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_expect(rc == -ENOENT || rc == -ECONNREFUSED, "connect: %d %s", rc,
		  err);
	cr_expect_eq(c, NULL);
	cr_expect_neq(strstr(err, srv.sock), NULL, "%s", err);
}
