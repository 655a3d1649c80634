/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/proto.c: every request and answer a peer can send is
 * validated before use, and each kind of malformation is refused with its
 * documented code while the output stays untouched.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/error.h>
#include <kvring/proto.h>

TestSuite(proto, .timeout = 10);

/* A request record of op with n keys, built in buf; returns its length. */
static size_t mk_req(uint8_t *buf, uint32_t op, uint32_t n, uint32_t flags)
{
	struct kvr_req_hdr h = {
	    .req_id = 7, .handle = 0, .count = n, .flags = flags};
	size_t len = kvr_req_bytes(op, n);

	memset(buf, 0, len);
	memcpy(buf, &h, sizeof(h));
	return len;
}

Test(proto, parse_accepts_every_op_when_well_formed)
{
	static uint8_t buf[65536];
	struct kvr_req_view v;

	for (uint32_t op = 1; op < KVR_OP__MAX; op++) {
		bool keys = op == KVR_OP_LOOKUP || op == KVR_OP_PREPARE_STORE ||
			    op == KVR_OP_PREPARE_RETRIEVE;
		uint32_t n = keys ? 3 : 0;
		size_t len = mk_req(buf, op, n, 0);

		cr_expect_eq(kvr_req_parse(op, buf, len, 512, &v), 0,
			     "op %u (%s)", op, kvr_op_name(op));
		cr_expect_eq(v.op, op);
		cr_expect_eq(v.hdr.count, n);
		cr_expect_eq(v.sizes != NULL, op == KVR_OP_PREPARE_STORE);
	}
}

Test(proto, parse_points_keys_and_sizes_into_record_when_store)
{
	uint8_t buf[512];
	struct kvr_req_view v;
	size_t len = mk_req(buf, KVR_OP_PREPARE_STORE, 2, 0);
	struct kvr_key *k = (struct kvr_key *)(buf + 32);
	uint64_t *sz = (uint64_t *)(buf + 32 + 2 * 16);

	k[1].hi = 42;
	sz[1] = 4096;
	cr_assert_eq(kvr_req_parse(KVR_OP_PREPARE_STORE, buf, len, 16, &v), 0);
	cr_expect_eq(v.keys[1].hi, 42);
	cr_expect_eq(v.sizes[1], 4096);
}

Test(proto, parse_refuses_unknown_op_and_leaves_output_when_bad)
{
	uint8_t buf[64];
	struct kvr_req_view v = {.op = 99};
	size_t len = mk_req(buf, KVR_OP_PING, 0, 0);

	cr_expect_eq(kvr_req_parse(0, buf, len, 16, &v), -EBADMSG);
	cr_expect_eq(kvr_req_parse(KVR_OP__MAX, buf, len, 16, &v), -EBADMSG);
	cr_expect_eq(kvr_req_parse(0x7fff, buf, len, 16, &v), -EBADMSG);
	cr_expect_eq(v.op, 99, "output changed on failure");
}

Test(proto, parse_refuses_length_mismatch_when_count_lies)
{
	uint8_t buf[1024];
	struct kvr_req_view v;
	size_t len = mk_req(buf, KVR_OP_LOOKUP, 4, 0);

	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len - 8, 16, &v),
		     -EBADMSG);
	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len + 8, 16, &v),
		     -EBADMSG);
	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, 31, 16, &v), -EBADMSG);
	/* A count so large that count * 16 would wrap a 32-bit size. */
	((struct kvr_req_hdr *)buf)->count = 0x10000001u;
	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len, UINT32_MAX, &v),
		     -E2BIG);
}

Test(proto, parse_refuses_too_many_keys_when_above_limit)
{
	static uint8_t buf[65536];
	struct kvr_req_view v;
	size_t len = mk_req(buf, KVR_OP_LOOKUP, 17, 0);

	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len, 16, &v), -E2BIG);
	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len, 17, &v), 0);
}

Test(proto, parse_refuses_flags_and_reserved_when_not_allowed)
{
	uint8_t buf[256];
	struct kvr_req_view v;
	size_t len;

	len = mk_req(buf, KVR_OP_LOOKUP, 1, KVR_REQ_PIN);
	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len, 16, &v), 0);
	len = mk_req(buf, KVR_OP_LOOKUP, 1, KVR_REQ_BY_LEASE);
	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len, 16, &v), -EBADMSG);
	len = mk_req(buf, KVR_OP_PING, 0, 0x80);
	cr_expect_eq(kvr_req_parse(KVR_OP_PING, buf, len, 16, &v), -EBADMSG);
	len = mk_req(buf, KVR_OP_PING, 0, 0);
	((struct kvr_req_hdr *)buf)->reserved = 1;
	cr_expect_eq(kvr_req_parse(KVR_OP_PING, buf, len, 16, &v), -EBADMSG);
	/* Keys on an op that takes none. */
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 1, 0);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v),
		     -EBADMSG);
	/* Retrieve by lease must not also carry keys. */
	len = mk_req(buf, KVR_OP_PREPARE_RETRIEVE, 1, KVR_REQ_BY_LEASE);
	cr_expect_eq(kvr_req_parse(KVR_OP_PREPARE_RETRIEVE, buf, len, 16, &v),
		     -EBADMSG);
}

/* An answer with n slots at the given offsets/lengths. */
static size_t mk_resp(uint8_t *buf, uint32_t n, uint64_t off, uint64_t len,
		      int32_t st)
{
	struct kvr_resp_hdr h = {.req_id = 1, .count = n};
	struct kvr_slot_desc *s = (struct kvr_slot_desc *)(buf + sizeof(h));

	memcpy(buf, &h, sizeof(h));
	for (uint32_t i = 0; i < n; i++)
		s[i] = (struct kvr_slot_desc){
		    .off = off, .len = len, .status = st};
	return kvr_resp_bytes(n);
}

Test(proto, resp_parse_accepts_span_ending_at_pool_end)
{
	uint8_t buf[256];
	struct kvr_resp_hdr h;
	const struct kvr_slot_desc *s;
	size_t len = mk_resp(buf, 1, 4096, 4096, KVR_SLOT_OK);

	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_STORE, buf,
				    len, 8192, &h, &s),
		     0);
	cr_expect_eq(s[0].off, 4096);
}

Test(proto, resp_parse_refuses_span_one_byte_past_pool)
{
	uint8_t buf[256];
	struct kvr_resp_hdr h = {.req_id = 555};
	const struct kvr_slot_desc *s = NULL;
	size_t len = mk_resp(buf, 1, 4097, 4096, KVR_SLOT_OK);

	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_STORE, buf,
				    len, 8192, &h, &s),
		     -EBADMSG);
	cr_expect_eq(h.req_id, 555, "output changed on failure");
	cr_expect_null(s);
	/* Overflow bait: off + len wraps to a small number. */
	len = mk_resp(buf, 1, UINT64_MAX - 10, 4096, KVR_SLOT_OK);
	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_STORE, buf,
				    len, 8192, &h, &s),
		     -EBADMSG);
}

Test(proto, resp_parse_ignores_span_when_slot_not_ok)
{
	uint8_t buf[256];
	struct kvr_resp_hdr h;
	const struct kvr_slot_desc *s;
	size_t len = mk_resp(buf, 2, UINT64_MAX, 1, KVR_SLOT_EXISTS);

	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_STORE, buf,
				    len, 8192, &h, &s),
		     0);
	len = mk_resp(buf, 1, 0, 1, 77);
	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_STORE, buf,
				    len, 8192, &h, &s),
		     -EBADMSG, "unknown slot status accepted");
}

Test(proto, resp_parse_refuses_request_type_when_answer_expected)
{
	uint8_t buf[256];
	struct kvr_resp_hdr h;
	size_t len = mk_resp(buf, 0, 0, 0, 0);

	cr_expect_eq(kvr_resp_parse(KVR_OP_PING, buf, len, 8192, &h, NULL),
		     -EBADMSG);
	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PING, buf, len, 8192,
				    &h, NULL),
		     0);
	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PING, buf, len - 1,
				    8192, &h, NULL),
		     -EBADMSG);
}

static struct kvr_hello good_hello(void)
{
	struct kvr_hello h = {
	    .magic = KVR_PROTO_MAGIC, .version = KVR_PROTO_VERSION, .pid = 1};

	strcpy(h.ns.model, "llama-3-8b");
	h.ns.layers = 32;
	h.ns.kv_heads = 8;
	h.ns.head_size = 128;
	h.ns.dtype_bytes = 2;
	h.ns.tp_size = 1;
	h.ns.chunk_tokens = 256;
	return h;
}

Test(proto, hello_check_names_both_versions_when_mismatch)
{
	struct kvr_hello h = good_hello();
	struct kvr_err e = {0};

	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), 0);
	h.version = KVR_PROTO_VERSION + 1;
	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), -EPROTO);
	char want[64];

	snprintf(want, sizeof(want), "version %u", KVR_PROTO_VERSION + 1);
	cr_expect(strstr(e.msg, want) != NULL, "msg: %s", e.msg);
	snprintf(want, sizeof(want), "expected %u", KVR_PROTO_VERSION);
	cr_expect(strstr(e.msg, want) != NULL, "msg: %s", e.msg);
}

Test(proto, hello_check_refuses_garbage_when_malformed)
{
	struct kvr_hello h = good_hello();
	struct kvr_err e = {0};

	cr_expect_eq(kvr_hello_check(&h, sizeof(h) - 1, &e), -EBADMSG);
	h.magic = 0xdeadbeef;
	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), -EPROTO);
	h = good_hello();
	memset(h.ns.model, 'a', sizeof(h.ns.model));
	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), -EBADMSG);
	h = good_hello();
	h.ns.model[3] = '\n';
	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), -EBADMSG);
	h = good_hello();
	h.ns.tp_rank = 1;
	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), -EBADMSG);
	h = good_hello();
	h.flags = 0x10;
	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), -EBADMSG);
}

Test(proto, welcome_check_refuses_bad_geometry_when_status_ok)
{
	struct kvr_welcome w = {.magic = KVR_PROTO_MAGIC,
				.version = KVR_PROTO_VERSION,
				.transport = KVR_TRANSPORT_SHM,
				.pool_bytes = 1 << 20,
				.align = 4096,
				.max_keys = 256};
	struct kvr_err e = {0};

	cr_expect_eq(kvr_welcome_check(&w, sizeof(w), &e), 0);
	w.align = 100;
	cr_expect_eq(kvr_welcome_check(&w, sizeof(w), &e), -EBADMSG);
	w.align = 4096;
	w.transport = 9;
	cr_expect_eq(kvr_welcome_check(&w, sizeof(w), &e), -EBADMSG);
	/* A refusal carries no geometry and is still well-formed. */
	w.status = -EBUSY;
	cr_expect_eq(kvr_welcome_check(&w, sizeof(w), &e), 0);
	memset(w.reason, 'x', sizeof(w.reason));
	cr_expect_eq(kvr_welcome_check(&w, sizeof(w), &e), -EBADMSG);
}

Test(proto, op_name_names_every_op_when_known)
{
	cr_expect_str_eq(kvr_op_name(KVR_OP_LOOKUP), "lookup");
	cr_expect_str_eq(kvr_op_name(KVR_RESP_BIT | KVR_OP_COMMIT_RETRIEVE),
			 "commit_retrieve");
	cr_expect_str_eq(kvr_op_name(0), "?");
	cr_expect_str_eq(kvr_op_name(1000), "?");
}
