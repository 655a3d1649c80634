/* SPDX-License-Identifier: MIT */
/*
 * test_worker_copy.c - the copy transport (payload over the Unix socket):
 * the same API gives byte-identical results, also across transports (store
 * through one, retrieve through the other), whether copy is asked for in
 * the options or forced with KVRING_TRANSPORT=copy, and the transport is
 * reported in kvr_client_info (DESIGN rule 9).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "worker_srv.h"

static struct wsrv srv;

static void setup(void)
{
	unsetenv("KVRING_TRANSPORT");
	wsrv_up(&srv);
}

static void teardown(void)
{
	wsrv_down(&srv);
}

TestSuite(worker_copy, .init = setup, .fini = teardown, .timeout = 60);

static void keys_for(struct kvr_client *c, uint32_t r, struct kvr_key *k,
		     uint32_t n)
{
	uint32_t *t = malloc((size_t)n * 16 * sizeof(*t));

	cr_assert(t);
	wsrv_tokens(r, t, (size_t)n * 16);
	cr_assert_eq(kvr_client_keys(c, t, (size_t)n * 16, k, n), (long)n);
	free(t);
}

Test(worker_copy, bytes_round_trip_when_transport_is_copy)
{
	struct kvr_client *c = wsrv_connect(&srv, KVR_TRANSPORT_COPY, 5000);
	const struct kvr_client_info *i = kvr_client_info(c);
	struct kvr_key k[16];

	cr_expect_eq(i->transport, KVR_TRANSPORT_COPY);
	cr_expect_neq(strstr(i->debug, "transport copy"), NULL, "%s", i->debug);
	keys_for(c, 1, k, 16);
	cr_assert_eq(wsrv_store(c, k, 16, 300000), 16);
	cr_expect_eq(kvr_lookup(c, k, 16, NULL), 16);
	cr_expect_eq(wsrv_retrieve_check(c, k, 16, 300000), 16);
	/* Idempotent through copy too. */
	cr_expect_eq(wsrv_store(c, k, 16, 300000), 0);
	kvr_close(c);
}

/* Eight chunks of @bytes (keys from request @r) stored through @from read
 * back intact through @to. */
static void expect_bytes_cross(struct kvr_client *from, struct kvr_client *to,
			       uint32_t r, uint64_t bytes)
{
	struct kvr_key k[8];

	keys_for(from, r, k, 8);
	cr_assert_eq(wsrv_store(from, k, 8, bytes), 8);
	cr_expect_eq(wsrv_retrieve_check(to, k, 8, bytes), 8);
}

Test(worker_copy, bytes_match_when_stored_by_copy_and_retrieved_by_shm)
{
	struct kvr_client *cp = wsrv_connect(&srv, KVR_TRANSPORT_COPY, 5000);
	struct kvr_client *sh = wsrv_connect(&srv, 0, 5000);

	cr_assert_eq(kvr_client_info(sh)->transport, KVR_TRANSPORT_SHM);
	expect_bytes_cross(cp, sh, 2, 123457);
	kvr_close(sh);
	kvr_close(cp);
}

Test(worker_copy, bytes_match_when_stored_by_shm_and_retrieved_by_copy)
{
	struct kvr_client *cp = wsrv_connect(&srv, KVR_TRANSPORT_COPY, 5000);
	struct kvr_client *sh = wsrv_connect(&srv, 0, 5000);

	expect_bytes_cross(sh, cp, 3, 65536);
	kvr_close(sh);
	kvr_close(cp);
}

Test(worker_copy, copy_is_used_when_environment_forces_it)
{
	struct kvr_client *c;

	setenv("KVRING_TRANSPORT", "copy", 1);
	c = wsrv_connect(&srv, 0, 5000);
	cr_expect_eq(kvr_client_info(c)->transport, KVR_TRANSPORT_COPY);
	kvr_close(c);
	unsetenv("KVRING_TRANSPORT");
}

Test(worker_copy, connect_returns_einval_when_environment_is_garbage)
{
	wsrv_expect_env_refused(&srv, "KVRING_TRANSPORT", "carrier-pigeon",
				"KVRING_TRANSPORT");
}

Test(worker_copy, abort_and_prefix_work_when_transport_is_copy)
{
	struct kvr_client *c = wsrv_connect(&srv, KVR_TRANSPORT_COPY, 5000);
	struct kvr_key k[12];
	uint64_t sizes[2] = {4096, 4096};
	struct kvr_xfer x;

	keys_for(c, 4, k, 12);
	cr_assert_eq(kvr_prepare_store(c, k + 10, sizes, 2, &x), 0);
	cr_expect_eq(kvr_abort_store(c, &x), 0, "%s", kvr_client_errmsg(c));
	cr_assert_eq(wsrv_store(c, k, 10, 4096), 10);
	cr_expect_eq(kvr_lookup(c, k, 12, NULL), 10);
	cr_expect_eq(wsrv_retrieve_check(c, k, 12, 4096), 10);
	kvr_close(c);
}

Test(worker_copy, call_returns_eownerdead_when_server_is_killed_under_copy)
{
	struct kvr_client *c = wsrv_connect(&srv, KVR_TRANSPORT_COPY, 5000);
	long rc;

	wsrv_kill(&srv);
	rc = kvr_ping(c, NULL);
	cr_expect_eq(rc, -EOWNERDEAD, "%ld %s", rc, kvr_client_errmsg(c));
	kvr_close(c);
}
