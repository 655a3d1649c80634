/* SPDX-License-Identifier: MIT */
/*
 * test_checksum.c - per-chunk XXH3-64 checksums (docs/reliability.md,
 * "Checksums") against a real kvringd: a worker in
 * another process writes into the pool bytes of a committed chunk behind
 * the server's back (the pool is shared memory, so a hostile neighbour
 * can), a checksumming reader gets KVR_SLOT_CORRUPT for exactly that
 * slot, and the server, after re-checking the bytes, drops the chunk and
 * counts it. Also: the explicit verify and its second call, the lease
 * path, a client without checksums (nothing summed, nothing verified), a
 * commit whose sum count is wrong (refused, nothing lost) and a report
 * that lies about a good chunk (the chunk stays). The same guarantees
 * over the copy transport (payload on the socket), whose worker sums its
 * private buffers while the server's pool is still shared with ring
 * workers that can write into it, and across transports.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_raw.h"
#include "worker_srv.h"

#define NCHUNK 3u
#define CHUNK  (64u << 10)

static struct wsrv srv;

static void setup(void)
{
	wsrv_init(&srv, "64M");
	wsrv_start(&srv);
	cr_assert_eq(t_server_map(&srv.t), 0, "map the control segment");
}

static void teardown(void)
{
	wsrv_stop(&srv);
	wsrv_cleanup(&srv);
}

TestSuite(checksum, .init = setup, .fini = teardown, .timeout = 60);

static struct kvr_client *connect_tp(uint32_t mode, int transport)
{
	struct kvr_client_opts o = wsrv_opts(&srv, transport, 5000);
	struct kvr_client *c = NULL;
	char err[256];
	int rc;

	o.checksum = mode;
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_assert_eq(rc, 0, "connect: %d %s", rc, err);
	cr_assert_eq(kvr_client_info(c)->transport,
		     (uint32_t)(transport ? transport : KVR_TRANSPORT_SHM));
	cr_assert_eq(kvr_client_info(c)->checksum,
		     mode ? mode : KVR_CHECKSUM_OFF);
	return c;
}

static struct kvr_client *connect_sum(uint32_t mode)
{
	return connect_tp(mode, 0);
}

static void make_keys(struct kvr_key *k, uint32_t n, uint64_t salt)
{
	for (uint32_t i = 0; i < n; i++)
		k[i] = (struct kvr_key){.lo = wsrv_mix(salt + i),
					.hi = wsrv_mix(~salt - i)};
}

static uint64_t gstat_dropped(void)
{
	return T_GSTAT(&srv.t, corrupt_dropped);
}

static bool dropped_is_one(void *arg)
{
	(void)arg;
	return gstat_dropped() == 1;
}

/* A neighbour flips a byte in the middle of chunk @victim in the pool. */
static void corrupt_in_child(const struct kvr_key *keys, uint32_t victim)
{
	wsrv_corrupt_in_child(&srv, keys, victim, CHUNK / 2, 0x5a);
}

/* NCHUNK chunks stored through @w under keys @k (from @salt), then chunk
 * @victim damaged by a neighbour (corrupt_in_child). */
static void store_corrupted(struct kvr_client *w, struct kvr_key *k,
			    uint64_t salt, uint32_t victim)
{
	make_keys(k, NCHUNK, salt);
	cr_assert_eq(wsrv_store(w, k, NCHUNK, CHUNK), NCHUNK);
	corrupt_in_child(k, victim);
}

/* Commit retrieve @x of @w, which held one corrupt chunk; the server
 * confirms the damage and drops that chunk. */
static void commit_then_dropped(struct kvr_client *w, struct kvr_xfer *x)
{
	cr_assert_eq(kvr_commit_retrieve(w, x), 0, "%s", kvr_client_errmsg(w));
	cr_assert(t_wait_until(dropped_is_one, NULL, t_timeout_ms(2000)),
		  "corrupt_dropped %llu", (unsigned long long)gstat_dropped());
}

/*
 * Store NCHUNK chunks through VERIFY worker @w (keys from @seed), let a
 * neighbour flip a byte of chunk 1 in the pool, and check what the worker
 * and the server make of it: the retrieve marks only chunk 1 corrupt, the
 * server confirms and drops it (lookups stop before it), and it can be
 * stored anew and read back clean. Closes @w.
 */
static void neighbour_write_is_caught(struct kvr_client *w, uint32_t seed)
{
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;

	store_corrupted(w, k, seed, 1);

	/* Automatic mode: the statuses are set when the answer arrives. */
	cr_assert_eq(kvr_prepare_retrieve(w, k, NCHUNK, &x), 0, "%s",
		     kvr_client_errmsg(w));
	cr_assert_eq(x.nslots, NCHUNK);
	cr_expect_eq(x.slots[0].status, KVR_SLOT_OK);
	cr_expect_eq(x.slots[1].status, KVR_SLOT_CORRUPT);
	cr_expect_eq(x.slots[2].status, KVR_SLOT_OK);
	cr_expect_eq(wsrv_check(&k[0], x.slots[0].ptr, CHUNK), CHUNK);
	cr_expect_eq(wsrv_check(&k[2], x.slots[2].ptr, CHUNK), CHUNK);
	cr_assert_eq(kvr_commit_retrieve(w, &x), 0, "%s", kvr_client_errmsg(w));

	/* The server confirmed and dropped it: lookups stop before it. */
	cr_assert(t_wait_until(dropped_is_one, NULL, t_timeout_ms(2000)),
		  "corrupt_dropped %llu, expected 1",
		  (unsigned long long)gstat_dropped());
	cr_expect_eq(kvr_lookup(w, k, NCHUNK, NULL), 1);
	cr_expect_eq(T_GSTAT(&srv.t, corrupt_unconfirmed), 0u);

	/* It can be stored anew, and then reads back clean. */
	cr_expect_eq(wsrv_store(w, k, NCHUNK, CHUNK), 1u);
	cr_expect_eq(wsrv_retrieve_check(w, k, NCHUNK, CHUNK), NCHUNK);
	kvr_close(w);
}

Test(checksum, retrieve_reports_corrupt_when_a_neighbour_wrote_the_chunk)
{
	neighbour_write_is_caught(connect_sum(KVR_CHECKSUM_VERIFY), 1);
}

Test(checksum, verify_marks_the_slot_when_called_explicitly_and_again)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;
	uint32_t unchecked = 99;

	store_corrupted(w, k, 2, 2);

	cr_assert_eq(kvr_prepare_retrieve(w, k, NCHUNK, &x), 0);
	/* ON does not verify by itself. */
	cr_expect_eq(x.slots[2].status, KVR_SLOT_OK);
	cr_expect_eq(kvr_verify_retrieve(w, &x, &unchecked), 1);
	cr_expect_eq(unchecked, 0u);
	cr_expect_eq(x.slots[2].status, KVR_SLOT_CORRUPT);
	cr_expect_eq(x.slots[0].status, KVR_SLOT_OK);
	/* Second verify: the same answer, the slot stays corrupt. */
	cr_expect_eq(kvr_verify_retrieve(w, &x, NULL), 1);
	cr_expect_eq(x.slots[2].status, KVR_SLOT_CORRUPT);
	commit_then_dropped(w, &x);
	cr_expect_eq(kvr_lookup(w, k, NCHUNK, NULL), 2);
	kvr_close(w);
}

Test(checksum, lease_retrieve_is_verified_when_redeemed)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_VERIFY);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;
	uint64_t lease = 0;

	store_corrupted(w, k, 3, 0);
	cr_assert_eq(kvr_lookup(w, k, NCHUNK, &lease), NCHUNK);
	cr_assert_eq(kvr_prepare_retrieve_lease(w, lease, &x), 0);
	cr_assert_eq(x.nslots, NCHUNK);
	cr_expect_eq(x.slots[0].status, KVR_SLOT_CORRUPT);
	cr_expect_eq(x.slots[1].status, KVR_SLOT_OK);
	commit_then_dropped(w, &x);
	cr_expect_eq(kvr_lookup(w, k, NCHUNK, NULL), 0);
	kvr_close(w);
}

Test(checksum, nothing_is_summed_or_verified_when_checksums_are_off)
{
	struct kvr_client *off = connect_sum(0); /* the default */
	struct kvr_client *on = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;
	uint32_t unchecked = 0;

	store_corrupted(off, k, 4, 1);

	/* Off: the slot looks fine, and verify says there is nothing. */
	cr_assert_eq(kvr_prepare_retrieve(off, k, NCHUNK, &x), 0);
	cr_expect_eq(x.slots[1].status, KVR_SLOT_OK);
	cr_expect_eq(kvr_verify_retrieve(off, &x, NULL), -ENODATA);
	cr_expect_neq(strstr(kvr_client_errmsg(off), "no checksums"), NULL,
		      "%s", kvr_client_errmsg(off));
	cr_assert_eq(kvr_commit_retrieve(off, &x), 0);

	/* The off client sent no sums: a checksumming reader can check
	 * nothing, and says so. */
	cr_assert_eq(kvr_prepare_retrieve(on, k, NCHUNK, &x), 0);
	cr_expect_eq(kvr_verify_retrieve(on, &x, &unchecked), 0);
	cr_expect_eq(unchecked, NCHUNK);
	cr_assert_eq(kvr_commit_retrieve(on, &x), 0);
	cr_expect_eq(gstat_dropped(), 0u);
	cr_expect_eq(kvr_lookup(off, k, NCHUNK, NULL), NCHUNK);
	kvr_close(on);
	kvr_close(off);
}

/* A raw worker in the same namespace as the libkvring clients. */
static void raw_connect(struct t_raw *r)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	int rc = t_raw_connect_ns(srv.sock, 0, &o.ns, r);

	cr_assert_eq(rc, 0, "raw connect: %d %s", rc, r->w.reason);
}

struct ans {
	struct kvr_resp_hdr h;
	struct kvr_slot_desc s[NCHUNK];
	uint64_t sums[NCHUNK];
};

Test(checksum, commit_is_refused_and_kept_when_the_sum_count_is_wrong)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key k[2];
	uint64_t sizes[2] = {4096, 4096}, sums[2];
	struct ans a;
	struct t_raw r;
	uint64_t xfer;
	int len;

	raw_connect(&r);
	make_keys(k, 2, 5);
	len = t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, k, sizes, 2, &a,
			 sizeof(a));
	cr_assert_eq(len, (int)kvr_resp_bytes(2));
	cr_assert_eq(a.h.status, 0);
	xfer = a.h.handle;
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(a.s[i].status, KVR_SLOT_OK);
		wsrv_fill(&k[i], (char *)r.pool + a.s[i].off, 4096);
		sums[i] = XXH3_64bits((char *)r.pool + a.s[i].off, 4096);
	}
	/* One sum for two reservations: refused, nothing published. */
	len = t_raw_call(&r, KVR_OP_COMMIT_STORE, xfer, KVR_REQ_SUMS, NULL,
			 sums, 1, &a, sizeof(a));
	cr_assert_eq(len, (int)sizeof(a.h));
	cr_expect_eq(a.h.status, -EINVAL);
	cr_expect_eq(kvr_lookup(w, k, 2, NULL), 0);
	/* The transfer is still open: the right count commits it. */
	len = t_raw_call(&r, KVR_OP_COMMIT_STORE, xfer, KVR_REQ_SUMS, NULL,
			 sums, 2, &a, sizeof(a));
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(kvr_lookup(w, k, 2, NULL), 2);
	/* And its sums are the ones a reader checks against. */
	cr_expect_eq(wsrv_retrieve_check(w, k, 2, 4096), 2u);
	t_raw_close(&r);
	kvr_close(w);
}

static bool unconfirmed_is_one(void *arg)
{
	(void)arg;
	return T_GSTAT(&srv.t, corrupt_unconfirmed) == 1;
}

Test(checksum, a_false_report_leaves_the_chunk_when_its_bytes_match)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key k[NCHUNK];
	struct ans a;
	struct t_raw r;
	uint64_t off;
	int len;

	make_keys(k, NCHUNK, 6);
	cr_assert_eq(wsrv_store(w, k, NCHUNK, CHUNK), NCHUNK);
	raw_connect(&r);
	len = t_raw_call(&r, KVR_OP_PREPARE_RETRIEVE, 0, KVR_REQ_SUMS, k, NULL,
			 NCHUNK, &a, sizeof(a));
	cr_assert_eq(len, (int)kvr_resp_sums_bytes(NCHUNK));
	cr_assert_eq(a.h.count, NCHUNK);
	cr_expect(a.s[1].reserved & KVR_SLOT_F_SUM);
	cr_expect_eq(a.sums[1],
		     XXH3_64bits((char *)r.pool + a.s[1].off, CHUNK));
	/* The lie: chunk 1 is fine, the report calls it corrupt. */
	off = a.s[1].off;
	len = t_raw_call(&r, KVR_OP_COMMIT_RETRIEVE, a.h.handle,
			 KVR_REQ_CORRUPT, NULL, &off, 1, &a, sizeof(a));
	cr_assert_eq(len, (int)sizeof(a.h));
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(a.h.value, 0u, "objects dropped");
	cr_expect_eq(kvr_lookup(w, k, NCHUNK, NULL), NCHUNK);
	cr_expect_eq(gstat_dropped(), 0u);
	cr_expect(t_wait_until(unconfirmed_is_one, NULL, t_timeout_ms(2000)),
		  "corrupt_unconfirmed %llu, expected 1",
		  (unsigned long long)T_GSTAT(&srv.t, corrupt_unconfirmed));
	t_raw_close(&r);
	kvr_close(w);
}

/* ---- the copy transport (payload over the socket) ---- */

Test(checksum, copy_retrieve_reports_corrupt_when_a_neighbour_wrote_the_chunk)
{
	/* Stored over the socket with its sums, reported over the socket;
	 * a ring neighbour flips the byte in the shared pool. */
	neighbour_write_is_caught(
	    connect_tp(KVR_CHECKSUM_VERIFY, KVR_TRANSPORT_COPY), 11);
}

Test(checksum, copy_verify_marks_the_slot_when_called_explicitly)
{
	struct kvr_client *w = connect_tp(KVR_CHECKSUM_ON, KVR_TRANSPORT_COPY);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;
	uint32_t unchecked = 99;

	store_corrupted(w, k, 12, 0);

	cr_assert_eq(kvr_prepare_retrieve(w, k, NCHUNK, &x), 0);
	cr_expect_eq(x.slots[0].status, KVR_SLOT_OK, "ON verifies on request");
	cr_expect_eq(kvr_verify_retrieve(w, &x, &unchecked), 1, "%s",
		     kvr_client_errmsg(w));
	cr_expect_eq(unchecked, 0u);
	cr_expect_eq(x.slots[0].status, KVR_SLOT_CORRUPT);
	cr_expect_eq(kvr_verify_retrieve(w, &x, NULL), 1);
	commit_then_dropped(w, &x);
	cr_expect_eq(kvr_lookup(w, k, NCHUNK, NULL), 0);
	kvr_close(w);
}

Test(checksum, sums_cross_transports_when_stored_by_one_and_read_by_the_other)
{
	struct kvr_client *cp = connect_tp(KVR_CHECKSUM_ON, KVR_TRANSPORT_COPY);
	struct kvr_client *sh = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key a[NCHUNK], b[NCHUNK];
	struct kvr_xfer x;
	uint32_t unchecked = 99;

	/* Sums sent over the socket are checked by a ring reader... */
	make_keys(a, NCHUNK, 130);
	cr_assert_eq(wsrv_store(cp, a, NCHUNK, CHUNK), NCHUNK);
	cr_assert_eq(kvr_prepare_retrieve(sh, a, NCHUNK, &x), 0);
	cr_expect_eq(kvr_verify_retrieve(sh, &x, &unchecked), 0);
	cr_expect_eq(unchecked, 0u, "copy-stored chunks carry their sums");
	cr_assert_eq(kvr_commit_retrieve(sh, &x), 0);

	/* ... and ring sums by a socket reader, which gets the bytes of
	 * its buffers checked. */
	make_keys(b, NCHUNK, 140);
	cr_assert_eq(wsrv_store(sh, b, NCHUNK, CHUNK), NCHUNK);
	unchecked = 99;
	cr_assert_eq(kvr_prepare_retrieve(cp, b, NCHUNK, &x), 0);
	cr_expect_eq(kvr_verify_retrieve(cp, &x, &unchecked), 0);
	cr_expect_eq(unchecked, 0u);
	for (uint32_t i = 0; i < NCHUNK; i++)
		cr_expect_eq(wsrv_check(&b[i], x.slots[i].ptr, CHUNK), CHUNK);
	cr_assert_eq(kvr_commit_retrieve(cp, &x), 0);
	cr_expect_eq(gstat_dropped(), 0u);
	kvr_close(sh);
	kvr_close(cp);
}

Test(checksum, copy_client_without_sums_reads_what_it_did_before)
{
	struct kvr_client *cp = connect_tp(0, KVR_TRANSPORT_COPY);
	struct kvr_client *on = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;
	uint32_t unchecked = 0;

	make_keys(k, NCHUNK, 15);
	cr_assert_eq(wsrv_store(cp, k, NCHUNK, CHUNK), NCHUNK);
	cr_expect_eq(wsrv_retrieve_check(cp, k, NCHUNK, CHUNK), NCHUNK);
	cr_assert_eq(kvr_prepare_retrieve(cp, k, NCHUNK, &x), 0);
	cr_expect_eq(kvr_verify_retrieve(cp, &x, NULL), -ENODATA);
	cr_assert_eq(kvr_commit_retrieve(cp, &x), 0);
	/* Nothing was summed on the way in. */
	cr_assert_eq(kvr_prepare_retrieve(on, k, NCHUNK, &x), 0);
	cr_expect_eq(kvr_verify_retrieve(on, &x, &unchecked), 0);
	cr_expect_eq(unchecked, NCHUNK);
	cr_assert_eq(kvr_commit_retrieve(on, &x), 0);
	kvr_close(on);
	kvr_close(cp);
}

/* ---- kvr_xfer_fill: the copy that sums as it goes ---- */

/* Prepare NCHUNK chunks of @k through @c and fill each with
 * kvr_xfer_fill() from a private buffer holding its key's bytes. */
static void store_by_fill(struct kvr_client *c, const struct kvr_key *k,
			  struct kvr_xfer *x)
{
	uint64_t sizes[NCHUNK];
	char *buf = malloc(CHUNK);

	cr_assert(buf);
	for (uint32_t i = 0; i < NCHUNK; i++)
		sizes[i] = CHUNK;
	cr_assert_eq(kvr_prepare_store(c, k, sizes, NCHUNK, x), 0, "%s",
		     kvr_client_errmsg(c));
	cr_assert_eq(x->nslots, NCHUNK);
	for (uint32_t i = 0; i < NCHUNK; i++) {
		cr_assert_eq(x->slots[i].status, KVR_SLOT_OK);
		wsrv_fill(&k[i], buf, CHUNK);
		cr_assert_eq(kvr_xfer_fill(c, x, i, buf), 0, "%s",
			     kvr_client_errmsg(c));
	}
	free(buf);
}

Test(checksum, filled_slots_carry_the_sum_of_their_bytes_over_both_transports)
{
	int tps[2] = {0, KVR_TRANSPORT_COPY};

	for (int t = 0; t < 2; t++) {
		struct kvr_client *w = connect_tp(KVR_CHECKSUM_ON, tps[t]);
		struct kvr_client *r = connect_sum(KVR_CHECKSUM_ON);
		struct kvr_key k[NCHUNK];
		struct kvr_xfer x;
		uint32_t unchecked = 99;

		make_keys(k, NCHUNK, 200 + 10 * (uint64_t)t);
		store_by_fill(w, k, &x);
		cr_assert_eq(kvr_commit_store(w, &x), 0, "%s",
			     kvr_client_errmsg(w));
		/* A reader checks them against the sums fill computed. */
		cr_assert_eq(kvr_prepare_retrieve(r, k, NCHUNK, &x), 0);
		cr_expect_eq(kvr_verify_retrieve(r, &x, &unchecked), 0,
			     "transport %d", tps[t]);
		cr_expect_eq(unchecked, 0u);
		for (uint32_t i = 0; i < NCHUNK; i++)
			cr_expect_eq(wsrv_check(&k[i], x.slots[i].ptr, CHUNK),
				     CHUNK);
		cr_assert_eq(kvr_commit_retrieve(r, &x), 0);
		kvr_close(r);
		kvr_close(w);
	}
}

Test(checksum, commit_sends_the_fill_sum_when_the_slot_changed_after_it)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_client *r = connect_sum(KVR_CHECKSUM_VERIFY);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;

	/* The contract's other side: commit does not hash a filled slot
	 * again, so a write after the fill makes the chunk fail. */
	make_keys(k, NCHUNK, 300);
	store_by_fill(w, k, &x);
	((unsigned char *)x.slots[1].ptr)[7] ^= 0x01;
	cr_assert_eq(kvr_commit_store(w, &x), 0);
	cr_assert_eq(kvr_prepare_retrieve(r, k, NCHUNK, &x), 0);
	cr_expect_eq(x.slots[0].status, KVR_SLOT_OK);
	cr_expect_eq(x.slots[1].status, KVR_SLOT_CORRUPT);
	cr_expect_eq(x.slots[2].status, KVR_SLOT_OK);
	cr_assert_eq(kvr_commit_retrieve(r, &x), 0);
	kvr_close(r);
	kvr_close(w);
}

Test(checksum, fill_is_refused_when_the_slot_is_not_a_prepared_ok_store)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key k[NCHUNK + 1];
	struct kvr_xfer x;
	char buf[64] = {0};

	make_keys(k, NCHUNK + 1, 400);
	cr_assert_eq(wsrv_store(w, k, 1, CHUNK), 1u);
	store_by_fill(w, &k[1], &x); /* fills slots of k[1..3]: fine */
	cr_expect_eq(kvr_xfer_fill(w, &x, NCHUNK, buf), -EINVAL);
	cr_expect_neq(strstr(kvr_client_errmsg(w), "kvr_xfer_fill"), NULL, "%s",
		      kvr_client_errmsg(w));
	cr_expect_eq(kvr_xfer_fill(w, NULL, 0, buf), -EINVAL);
	cr_assert_eq(kvr_commit_store(w, &x), 0);
	/* A retrieve's slots are not for writing. */
	cr_assert_eq(kvr_prepare_retrieve(w, k, 1, &x), 0);
	cr_expect_eq(kvr_xfer_fill(w, &x, 0, buf), -EINVAL);
	cr_assert_eq(kvr_commit_retrieve(w, &x), 0);
	/* A key already stored answers EXISTS: no slot to fill. */
	{
		uint64_t sz = CHUNK;

		cr_assert_eq(kvr_prepare_store(w, k, &sz, 1, &x), 0);
		cr_assert_eq(x.slots[0].status, KVR_SLOT_EXISTS);
		cr_expect_eq(kvr_xfer_fill(w, &x, 0, buf), -EINVAL);
		cr_expect_neq(strstr(kvr_client_errmsg(w), "not OK"), NULL,
			      "%s", kvr_client_errmsg(w));
		cr_assert_eq(kvr_commit_store(w, &x), 0);
	}
	kvr_close(w);
}

/* ---- kvr_retrieve_copy: the copy that checks as it goes ---- */

/* The counter passed *(uint64_t *)arg. */
static bool dropped_reaches(void *arg)
{
	return gstat_dropped() > *(const uint64_t *)arg;
}

Test(checksum, retrieve_copy_marks_the_slot_when_its_bytes_fail_their_sum)
{
	int tps[2] = {0, KVR_TRANSPORT_COPY};

	for (int t = 0; t < 2; t++) {
		struct kvr_client *w = connect_tp(KVR_CHECKSUM_ON, tps[t]);
		struct kvr_key k[NCHUNK];
		struct kvr_xfer x;
		char *dst = malloc(CHUNK);
		uint64_t before = gstat_dropped();

		cr_assert(dst);
		make_keys(k, NCHUNK, 500 + 10 * (uint64_t)t);
		cr_assert_eq(wsrv_store(w, k, NCHUNK, CHUNK), NCHUNK);
		corrupt_in_child(k, 1);
		cr_assert_eq(kvr_prepare_retrieve(w, k, NCHUNK, &x), 0);
		cr_expect_eq(kvr_retrieve_copy(w, &x, 0, dst), 0, "%s",
			     kvr_client_errmsg(w));
		cr_expect_eq(wsrv_check(&k[0], dst, CHUNK), CHUNK);
		cr_expect_eq(kvr_retrieve_copy(w, &x, 1, dst), 1,
			     "transport %d: the flipped chunk", tps[t]);
		cr_expect_eq(x.slots[1].status, KVR_SLOT_CORRUPT);
		/* Marked: not copied again, and said why. */
		cr_expect_eq(kvr_retrieve_copy(w, &x, 1, dst), -EINVAL);
		cr_expect_neq(strstr(kvr_client_errmsg(w), "checksum"), NULL,
			      "%s", kvr_client_errmsg(w));
		cr_expect_eq(kvr_retrieve_copy(w, &x, 2, dst), 0);
		cr_expect_eq(kvr_retrieve_copy(w, &x, NCHUNK, dst), -EINVAL);
		/* verify() agrees, and the commit reports it. */
		cr_expect_eq(kvr_verify_retrieve(w, &x, NULL), 1);
		cr_assert_eq(kvr_commit_retrieve(w, &x), 0);
		cr_expect(
		    t_wait_until(dropped_reaches, &before, t_timeout_ms(2000)),
		    "corrupt_dropped %llu, expected %llu",
		    (unsigned long long)gstat_dropped(),
		    (unsigned long long)before + 1);
		cr_expect_eq(kvr_lookup(w, k, NCHUNK, NULL), 1);
		free(dst);
		kvr_close(w);
	}
}

Test(checksum, retrieve_copy_is_a_memcpy_when_verify_already_checked)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_VERIFY);
	struct kvr_client *off = connect_sum(KVR_CHECKSUM_OFF);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;
	char *dst = malloc(CHUNK);

	cr_assert(dst);
	store_corrupted(w, k, 600, 2);
	cr_assert_eq(kvr_prepare_retrieve(w, k, NCHUNK, &x), 0);
	cr_expect_eq(kvr_retrieve_copy(w, &x, 0, dst), 0);
	cr_expect_eq(wsrv_check(&k[0], dst, CHUNK), CHUNK);
	/* Found on arrival: not handed out. */
	cr_expect_eq(kvr_retrieve_copy(w, &x, 2, dst), -EINVAL);
	cr_assert_eq(kvr_commit_retrieve(w, &x), 0);
	/* Without checksums it copies what is there. */
	cr_assert_eq(kvr_prepare_retrieve(off, k, 2, &x), 0);
	cr_expect_eq(kvr_retrieve_copy(off, &x, 1, dst), 0);
	cr_expect_eq(wsrv_check(&k[1], dst, CHUNK), CHUNK);
	cr_assert_eq(kvr_commit_retrieve(off, &x), 0);
	free(dst);
	kvr_close(off);
	kvr_close(w);
}

Test(checksum, kvr_store_fill_the_older_name_fills_and_sums_the_same)
{
	struct kvr_client *w = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_client *r = connect_sum(KVR_CHECKSUM_ON);
	struct kvr_key k;
	struct kvr_xfer x;
	uint64_t sz = CHUNK;
	uint32_t unchecked = 1;
	char *buf = malloc(CHUNK);

	cr_assert(buf);
	make_keys(&k, 1, 470);
	wsrv_fill(&k, buf, CHUNK);
	cr_assert_eq(kvr_prepare_store(w, &k, &sz, 1, &x), 0);
	cr_assert_eq(x.slots[0].status, KVR_SLOT_OK);
	cr_assert_eq(kvr_store_fill(w, &x, 0, buf), 0, "%s",
		     kvr_client_errmsg(w));
	cr_assert_eq(kvr_commit_store(w, &x), 0);
	cr_assert_eq(kvr_prepare_retrieve(r, &k, 1, &x), 0);
	cr_assert_eq(x.nslots, 1u);
	cr_expect_eq(memcmp(x.slots[0].ptr, buf, CHUNK), 0);
	/* The sum was kept at the fill: the reader checks it. */
	cr_expect_eq(kvr_verify_retrieve(r, &x, &unchecked), 0);
	cr_expect_eq(unchecked, 0u);
	cr_assert_eq(kvr_commit_retrieve(r, &x), 0);
	free(buf);
	kvr_close(r);
	kvr_close(w);
}
