/* SPDX-License-Identifier: MIT */
/*
 * Description: a hostile worker that damages its own rings or requests: random
 * bytes as records, ring positions moved backwards or past the capacity, a
 * bogus response-ring head, transfer ids it never got, a request flood
 * without reading answers, a reader that stopped, absurd key counts.
 * Each against a real kvringd, beside a well-behaved worker
 * (hostile_suite.h).
 */
#include "hostile_suite.h"

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
	expect_cut_off_and_clean(&r, "request ring damaged",
				 "after the random bytes");
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
	expect_cut_off_and_clean(&r, "request ring damaged",
				 "after the tail went backwards");
	finish();
}

Test(hostile, worker_is_cut_off_when_its_request_tail_passes_capacity)
{
	struct t_raw r;
	uint64_t head;

	hostile_connect_and_hold(&r, 300);
	head = atomic_load(&req_shm(&r)->head);
	scribble_tail(&r, head + r.w.req_ring_cap + 4096);
	expect_cut_off_and_clean(&r, "request ring damaged",
				 "after the tail passed the capacity");
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
	expect_cut_off_and_clean(&r, "protocol error", "after the bogus head");
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
	expect_cut_off_and_clean(&r, "unresponsive", "after the flood");
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
	expect_cut_off_and_clean(&r, "unresponsive", "after the hung worker");
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
