/* SPDX-License-Identifier: MIT */
/*
 * Description: the answers kvringd's dispatcher (server/disp.c) writes, in
 * process: for every op, running or stopping, the record
 * kvr__disp_exec() leaves in s->ans must be one the worker's decoder
 * (kvr_resp_parse_view) accepts, with the status and fields the request
 * earned. A real storage engine answers; there is no socket or ring.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/proto.h>
#include <kvring/store.h>

#include "disp.h"
#include "kvringd.h"

#define MAX_KEYS 8u
#define POOL	 (1u << 20)

TestSuite(disp, .timeout = 10);

static struct kvr_srv *s;
static struct kvr_conn *c;
static struct kvr_key keys[MAX_KEYS];
static uint64_t sizes[MAX_KEYS];
static uint8_t ans[sizeof(struct kvr_resp_hdr) +
		   MAX_KEYS * sizeof(struct kvr_slot_desc) +
		   sizeof(struct kvr_stats_wire)];

/* One server with one ACTIVE channel (0) in namespace 1. */
static void setup(void)
{
	struct kvr_store_config cfg = {
	    .pool_bytes = POOL,
	    .align = 64,
	    .max_channels = 1,
	    .max_keys = MAX_KEYS,
	    .hash_seed = 7,
	};

	s = calloc(1, sizeof(*s));
	c = calloc(1, sizeof(*c));
	cr_assert(s && c);
	s->ns = calloc(KVR_SRV_NS_MAX, sizeof(*s->ns));
	cr_assert(s->ns);
	cr_assert_eq(kvr_store_create(&cfg, &s->store), 0);
	s->keys = keys;
	s->sizes = sizes;
	s->ans = ans;
	s->ans_cap = sizeof(ans);
	s->max_keys = MAX_KEYS;
	s->now_ns = 1000000000ull;
	s->nactive = 1;
	c->chan = 0;
	c->state = KVR_CONN_ACTIVE;
	c->ns_id = 1;
	s->ns[0].used = true;
	s->ns[0].id = 1;
	cr_assert_eq(kvr_store_channel_open(s->store, 0, 1, 1000), 0);
}

static void teardown(void)
{
	kvr_store_destroy(s->store);
	free(s->ns);
	free(s);
	free(c);
}

/* Run @op with @n keys (sizes 4096) through the dispatcher and decode
 * the answer as a worker does; fail the test if it does not decode. */
static struct kvr_resp_view run(uint32_t op, uint32_t n)
{
	struct kvr_req_view v = {.op = op};
	struct kvr_resp_view out;
	uint32_t type = 0;
	size_t len;

	for (uint32_t i = 0; i < n; i++) {
		keys[i].lo = 100 + i;
		keys[i].hi = 7;
		sizes[i] = 4096;
	}
	v.hdr.req_id = 0x1234 + op;
	v.hdr.count = n;
	v.keys = n ? keys : NULL;
	v.sizes = op == KVR_OP_PREPARE_STORE ? sizes : NULL;
	len = kvr__disp_exec(s, c, &v, &type);
	cr_assert_eq(type, KVR_RESP_BIT | op, "answer type to %s",
		     kvr_op_name(op));
	cr_assert_eq(kvr_resp_parse_view(type, ans, len, POOL, &out), 0,
		     "the worker rejects the %zu-byte answer to %s", len,
		     kvr_op_name(op));
	cr_assert_eq(out.hdr.req_id, v.hdr.req_id);
	return out;
}

Test(disp, every_answer_decodes_with_eshutdown_when_stopping, .init = setup,
     .fini = teardown)
{
	static const uint32_t ops[] = {
	    KVR_OP_LOOKUP,	    KVR_OP_RELEASE,	KVR_OP_PREPARE_STORE,
	    KVR_OP_COMMIT_STORE,    KVR_OP_ABORT_STORE, KVR_OP_PREPARE_RETRIEVE,
	    KVR_OP_COMMIT_RETRIEVE, KVR_OP_PING,	KVR_OP_STATS,
	};

	s->stopping = true;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		uint32_t n = ops[i] == KVR_OP_LOOKUP ||
				     ops[i] == KVR_OP_PREPARE_STORE ||
				     ops[i] == KVR_OP_PREPARE_RETRIEVE
				 ? 2
				 : 0;
		struct kvr_resp_view r = run(ops[i], n);

		cr_assert_eq(r.hdr.status, -ESHUTDOWN, "status of %s",
			     kvr_op_name(ops[i]));
		cr_assert_eq(r.hdr.count, 0, "slots in the %s refusal",
			     kvr_op_name(ops[i]));
	}
}

Test(disp, stats_answer_carries_pool_and_channel_figures_when_running,
     .init = setup, .fini = teardown)
{
	struct kvr_resp_view r;

	r = run(KVR_OP_PREPARE_STORE, 2);
	cr_assert_eq(r.hdr.status, 0);
	cr_assert_eq(r.hdr.count, 2);
	r = run(KVR_OP_STATS, 0);
	cr_assert_eq(r.hdr.status, 0);
	cr_assert_not_null(r.stats);
	cr_assert_eq(r.stats->pool_bytes, POOL);
	cr_assert_eq(r.stats->workers, 1);
	cr_assert_eq(r.stats->chan_transfers, 1, "the open store transfer");
	cr_assert_geq(r.stats->chan_reserved_bytes, 2 * 4096);
}

Test(disp, store_answer_has_one_slot_per_key_inside_pool_when_room,
     .init = setup, .fini = teardown)
{
	struct kvr_resp_view r = run(KVR_OP_PREPARE_STORE, 3);

	cr_assert_eq(r.hdr.status, 0);
	cr_assert_eq(r.hdr.count, 3);
	cr_assert_neq(r.hdr.handle, 0, "a transfer id");
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(r.slots[i].status, KVR_SLOT_OK);
		cr_assert_eq(r.slots[i].len, 4096);
		cr_assert_eq(r.slots[i].reserved, 0);
	}
}
