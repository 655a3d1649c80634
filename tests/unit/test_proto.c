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

/* ===== Encoders: encode -> parse -> equal ===== */

/* Flags that op may carry, the same list as lib/proto.c's op_flags (a
 * second copy on purpose: the test states the contract independently). */
static uint32_t legal_flags(uint32_t op)
{
	if (op == KVR_OP_LOOKUP)
		return KVR_REQ_PIN | KVR_REQ_L2;
	return 0;
}

static bool op_takes_keys(uint32_t op)
{
	return op == KVR_OP_LOOKUP || op == KVR_OP_PREPARE_STORE ||
	       op == KVR_OP_PREPARE_RETRIEVE;
}

/* True when two request views say the same thing, byte for byte: op, the
 * whole header, and the contents (not the addresses) of keys and sizes. */
static bool req_view_eq(const struct kvr_req_view *a,
			const struct kvr_req_view *b)
{
	uint32_t n = a->hdr.count;

	if (a->op != b->op || memcmp(&a->hdr, &b->hdr, sizeof(a->hdr)) != 0)
		return false;
	if ((a->keys == NULL) != (b->keys == NULL) ||
	    (a->sizes == NULL) != (b->sizes == NULL))
		return false;
	if (a->keys && memcmp(a->keys, b->keys, n * sizeof(*a->keys)) != 0)
		return false;
	if (a->sizes && memcmp(a->sizes, b->sizes, n * sizeof(*a->sizes)) != 0)
		return false;
	return true;
}

/* A request view of op whose every field holds a distinct, non-zero value
 * wherever the op allows one. */
static struct kvr_req_view sample_req(uint32_t op, const struct kvr_key *keys,
				      const uint64_t *sizes, uint32_t n)
{
	struct kvr_req_view v = {.op = op};

	v.hdr.req_id = 0x1122334455667700ull | op;
	v.hdr.handle = 0xa1b2c3d4e5f60000ull | op;
	v.hdr.flags = legal_flags(op);
	if (op_takes_keys(op)) {
		v.hdr.count = n;
		v.keys = keys;
		if (op == KVR_OP_PREPARE_STORE)
			v.sizes = sizes;
	}
	return v;
}

Test(proto, req_roundtrip_gives_equal_view_for_every_op)
{
	static uint8_t buf[65536];
	struct kvr_key keys[5];
	uint64_t sizes[5];

	for (uint32_t i = 0; i < 5; i++) {
		keys[i] = (struct kvr_key){.lo = 100 + i, .hi = ~(uint64_t)i};
		sizes[i] = 4096u << i;
	}
	for (uint32_t op = 1; op < KVR_OP__MAX; op++) {
		struct kvr_req_view in = sample_req(op, keys, sizes, 5);
		struct kvr_req_view out;
		int len;

		memset(buf, 0xee, sizeof(buf));
		len = kvr_req_encode(&in, buf, sizeof(buf));
		cr_assert_eq(len, (int)kvr_req_bytes(op, in.hdr.count),
			     "op %s: encode gave %d", kvr_op_name(op), len);
		cr_assert_eq(kvr_req_parse(op, buf, (size_t)len, 4096, &out), 0,
			     "op %s: encoded record does not parse",
			     kvr_op_name(op));
		cr_expect(req_view_eq(&in, &out), "op %s: round trip differs",
			  kvr_op_name(op));
		cr_expect_eq(buf[len], 0xee, "op %s: wrote past the record",
			     kvr_op_name(op));
	}
	/* Retrieve by lease: a handle, the flag, no keys. */
	struct kvr_req_view in = {
	    .op = KVR_OP_PREPARE_RETRIEVE,
	    .hdr = {.req_id = 3, .handle = 99, .flags = KVR_REQ_BY_LEASE}};
	struct kvr_req_view out;
	int len = kvr_req_encode(&in, buf, sizeof(buf));

	cr_assert_eq(len, 32);
	cr_assert_eq(kvr_req_parse(in.op, buf, (size_t)len, 16, &out), 0);
	cr_expect(req_view_eq(&in, &out), "by-lease round trip differs");
}

/*
 * The round trip can fail: a change to any byte of an encoded record (a
 * field the encoder dropped or misplaced looks the same) either makes the
 * record unparsable or the parsed view unequal. So req_view_eq covers
 * every field, and the test above would see an encoder that lost one.
 */
Test(proto, req_roundtrip_notices_change_when_any_byte_differs)
{
	struct kvr_key keys[2] = {{1, 2}, {3, 4}};
	uint64_t sizes[2] = {4096, 8192};
	struct kvr_req_view in =
	    sample_req(KVR_OP_PREPARE_STORE, keys, sizes, 2);
	uint8_t buf[256];
	int len = kvr_req_encode(&in, buf, sizeof(buf));

	cr_assert_eq(len, 32 + 2 * 16 + 2 * 8);
	for (int i = 0; i < len; i++) {
		struct kvr_req_view out;
		int rc;

		buf[i] ^= 0x10;
		rc = kvr_req_parse(in.op, buf, (size_t)len, 4096, &out);
		cr_expect(rc < 0 || !req_view_eq(&in, &out),
			  "byte %d changed and the round trip did not notice",
			  i);
		buf[i] ^= 0x10;
	}
}

Test(proto, req_encode_refuses_what_parse_refuses_and_writes_nothing)
{
	struct kvr_key k = {1, 1};
	uint64_t sz = 64;
	uint8_t buf[128];
	struct kvr_req_view v;

	memset(buf, 0xab, sizeof(buf));
	v = (struct kvr_req_view){.op = KVR_OP_PING, .hdr = {.flags = 0x80}};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "flag");
	v = (struct kvr_req_view){.op = KVR_OP_PING, .hdr = {.reserved = 1}};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "rsvd");
	v = (struct kvr_req_view){
	    .op = KVR_OP_COMMIT_STORE, .hdr = {.count = 1}, .keys = &k};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "keys");
	v = (struct kvr_req_view){
	    .op = KVR_OP_PREPARE_RETRIEVE,
	    .hdr = {.count = 1, .flags = KVR_REQ_BY_LEASE},
	    .keys = &k};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "lease");
	v = (struct kvr_req_view){.op = KVR_OP_LOOKUP, .hdr = {.count = 1}};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "null");
	v = (struct kvr_req_view){
	    .op = KVR_OP_PREPARE_STORE, .hdr = {.count = 1}, .keys = &k};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "sizes");
	v = (struct kvr_req_view){.op = KVR_OP__MAX};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "op");
	v = (struct kvr_req_view){.op = KVR_OP_LOOKUP,
				  .hdr = {.count = KVR_MAX_KEYS_LIMIT + 1},
				  .keys = &k};
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL, "count");
	v = (struct kvr_req_view){.op = KVR_OP_PREPARE_STORE,
				  .hdr = {.count = 1},
				  .keys = &k,
				  .sizes = &sz};
	cr_expect_eq(kvr_req_encode(&v, buf, 32 + 16 + 7), -EMSGSIZE);
	cr_expect_eq(kvr_req_encode(&v, buf, 32 + 16 + 8), 32 + 16 + 8);
	for (size_t i = 32 + 16 + 8; i < sizeof(buf); i++)
		cr_expect_eq(buf[i], 0xab, "byte %zu written", i);
}

/* True when two answer views say the same thing: op, header, the slots'
 * contents (reserved included: the encoder writes it as 0), and the stats
 * body. */
static bool resp_view_eq(const struct kvr_resp_view *a,
			 const struct kvr_resp_view *b)
{
	if (a->op != b->op || memcmp(&a->hdr, &b->hdr, sizeof(a->hdr)) != 0)
		return false;
	if ((a->slots == NULL) != (b->slots == NULL) ||
	    (a->stats == NULL) != (b->stats == NULL))
		return false;
	if (a->slots &&
	    memcmp(a->slots, b->slots, a->hdr.count * sizeof(*a->slots)) != 0)
		return false;
	if (a->stats && memcmp(a->stats, b->stats, sizeof(*a->stats)) != 0)
		return false;
	return true;
}

/* An answer view to op with distinct non-zero values in every field. */
static struct kvr_resp_view sample_resp(uint32_t op,
					const struct kvr_slot_desc *slots,
					uint32_t n,
					const struct kvr_stats_wire *st)
{
	struct kvr_resp_view v = {.op = op};

	v.hdr.req_id = 0x0102030405060700ull | op;
	v.hdr.handle = 0x7000000000000000ull | op;
	v.hdr.status = op == KVR_OP_RELEASE ? -ENOENT : 0;
	v.hdr.value = 0x5555000000000000ull | op;
	if (op == KVR_OP_STATS) {
		v.stats = st;
	} else if (op == KVR_OP_PREPARE_STORE ||
		   op == KVR_OP_PREPARE_RETRIEVE) {
		v.hdr.count = n;
		v.slots = slots;
	}
	return v;
}

Test(proto, resp_roundtrip_gives_equal_view_for_every_op)
{
	static uint8_t buf[4096];
	struct kvr_slot_desc slots[KVR_SLOT__MAX];
	struct kvr_stats_wire st;
	uint64_t *stw = (uint64_t *)&st;

	for (uint32_t i = 0; i < KVR_SLOT__MAX; i++)
		slots[i] = (struct kvr_slot_desc){.off = 4096 * (i + 1),
						  .len = 64 * (i + 1),
						  .status = (int)i};
	for (size_t i = 0; i < sizeof(st) / sizeof(*stw); i++)
		stw[i] = 1000 + i;
	for (uint32_t op = 1; op < KVR_OP__MAX; op++) {
		struct kvr_resp_view in =
		    sample_resp(op, slots, KVR_SLOT__MAX, &st);
		struct kvr_resp_view out;
		int len;

		memset(buf, 0xee, sizeof(buf));
		len = kvr_resp_encode(&in, buf, sizeof(buf));
		cr_assert_eq(len, (int)kvr_resp_record_bytes(op, in.hdr.count),
			     "op %s: encode gave %d", kvr_op_name(op), len);
		cr_assert_eq(kvr_resp_parse_view(KVR_RESP_BIT | op, buf,
						 (size_t)len, 1 << 20, &out),
			     0, "op %s: encoded answer does not parse",
			     kvr_op_name(op));
		cr_expect(resp_view_eq(&in, &out), "op %s: round trip differs",
			  kvr_op_name(op));
		cr_expect_eq(buf[len], 0xee, "op %s: wrote past the record",
			     kvr_op_name(op));
	}
}

Test(proto, resp_roundtrip_notices_change_when_any_byte_differs)
{
	struct kvr_slot_desc slots[2] = {{4096, 64, KVR_SLOT_OK, 0},
					 {8192, 128, KVR_SLOT_EXISTS, 0}};
	struct kvr_resp_view in =
	    sample_resp(KVR_OP_PREPARE_STORE, slots, 2, NULL);
	uint8_t buf[256];
	int len = kvr_resp_encode(&in, buf, sizeof(buf));

	cr_assert_eq(len, 32 + 2 * 24);
	for (int i = 0; i < len; i++) {
		struct kvr_resp_view out;
		int rc;

		buf[i] ^= 0x01;
		rc = kvr_resp_parse_view(KVR_RESP_BIT | in.op, buf, (size_t)len,
					 1 << 20, &out);
		cr_expect(rc < 0 || !resp_view_eq(&in, &out),
			  "byte %d changed and the round trip did not notice",
			  i);
		buf[i] ^= 0x01;
	}
}

Test(proto, resp_encode_clears_reserved_when_slots_filled_in_place)
{
	_Alignas(8) uint8_t buf[256];
	struct kvr_slot_desc *s = kvr_resp_slots_at(buf);
	struct kvr_resp_view v = {.op = KVR_OP_PREPARE_RETRIEVE,
				  .hdr = {.req_id = 5, .count = 2},
				  .slots = s};
	struct kvr_resp_view out;

	memset(buf, 0xcd, sizeof(buf));
	s[0] = (struct kvr_slot_desc){0, 64, KVR_SLOT_OK, 0xdead};
	s[1] = (struct kvr_slot_desc){64, 64, KVR_SLOT_OK, 0xbeef};
	cr_assert_eq(kvr_resp_encode(&v, buf, sizeof(buf)), 32 + 2 * 24);
	cr_assert_eq(kvr_resp_parse_view(KVR_RESP_BIT | v.op, buf, 32 + 2 * 24,
					 4096, &out),
		     0);
	cr_expect_eq(out.hdr.req_id, 5);
	cr_expect_eq(out.slots[1].off, 64);
	cr_expect_eq(out.slots[0].reserved, 0, "reserved 0x%x",
		     out.slots[0].reserved);
	cr_expect_eq(out.slots[1].reserved, 0, "reserved 0x%x",
		     out.slots[1].reserved);
}

Test(proto, resp_encode_writes_stats_body_when_error_answer)
{
	uint8_t buf[256];
	struct kvr_resp_view v = {.op = KVR_OP_STATS,
				  .hdr = {.req_id = 8, .status = -ESHUTDOWN}};
	struct kvr_resp_view out;
	int len;

	memset(buf, 0xcd, sizeof(buf));
	len = kvr_resp_encode(&v, buf, sizeof(buf));
	cr_assert_eq(len, 32 + (int)sizeof(struct kvr_stats_wire));
	cr_assert_eq(kvr_resp_parse_view(KVR_RESP_BIT | KVR_OP_STATS, buf,
					 (size_t)len, 4096, &out),
		     0);
	cr_expect_eq(out.hdr.status, -ESHUTDOWN);
	cr_expect_eq(out.stats->pool_bytes, 0, "body not zeroed");
	cr_expect_eq(out.stats->chan_transfers, 0, "body not zeroed");
}

Test(proto, resp_encode_refuses_bad_answer_and_writes_nothing)
{
	struct kvr_slot_desc bad = {0, 64, KVR_SLOT__MAX, 0};
	struct kvr_slot_desc ok = {0, 64, KVR_SLOT_OK, 0};
	uint8_t buf[128];
	struct kvr_resp_view v;

	memset(buf, 0xab, sizeof(buf));
	v = (struct kvr_resp_view){
	    .op = KVR_OP_PREPARE_STORE, .hdr = {.count = 1}, .slots = &bad};
	cr_expect_eq(kvr_resp_encode(&v, buf, sizeof(buf)), -EINVAL, "status");
	v = (struct kvr_resp_view){
	    .op = KVR_OP_STATS, .hdr = {.count = 1}, .slots = &ok};
	cr_expect_eq(kvr_resp_encode(&v, buf, sizeof(buf)), -EINVAL, "stats");
	v = (struct kvr_resp_view){.op = KVR_OP_PREPARE_STORE,
				   .hdr = {.count = 1}};
	cr_expect_eq(kvr_resp_encode(&v, buf, sizeof(buf)), -EINVAL, "null");
	v = (struct kvr_resp_view){.op = 0};
	cr_expect_eq(kvr_resp_encode(&v, buf, sizeof(buf)), -EINVAL, "op");
	v = (struct kvr_resp_view){
	    .op = KVR_OP_PREPARE_STORE, .hdr = {.count = 1}, .slots = &ok};
	cr_expect_eq(kvr_resp_encode(&v, buf, 32 + 23), -EMSGSIZE);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_expect_eq(buf[i], 0xab, "byte %zu written", i);
}

Test(proto, hello_init_gives_a_hello_check_accepts)
{
	struct kvr_hello want = good_hello(), h;
	struct kvr_err e = {0};

	memset(&h, 0x5a, sizeof(h));
	kvr_hello_init(&h, &want.ns, KVR_HELLO_WANT_COPY, 1);
	cr_expect_eq(kvr_hello_check(&h, sizeof(h), &e), 0, "%s", e.msg);
	want.flags = KVR_HELLO_WANT_COPY;
	cr_expect_eq(memcmp(&h, &want, sizeof(h)), 0, "hello differs");
}

Test(proto, welcome_init_gives_a_refusal_welcome_check_accepts)
{
	uint8_t boot[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	struct kvr_welcome w;
	struct kvr_err e = {0};

	memset(&w, 0x5a, sizeof(w));
	kvr_welcome_init(&w, -EBUSY, boot);
	snprintf(w.reason, sizeof(w.reason), "server full");
	cr_expect_eq(kvr_welcome_check(&w, sizeof(w), &e), 0, "%s", e.msg);
	cr_expect_eq(w.status, -EBUSY);
	cr_expect_eq(memcmp(w.boot_id, boot, 16), 0);
	cr_expect_eq(w.pool_name[0], '\0', "pool_name not zeroed");
	cr_expect_eq(w.pool_bytes, 0, "pool_bytes not zeroed");
}

Test(proto, parse_points_words_into_record_when_a_commit_carries_sums)
{
	uint8_t buf[256];
	struct kvr_req_view v;
	size_t len = mk_req(buf, KVR_OP_COMMIT_STORE, 2, KVR_REQ_SUMS);
	uint64_t *w = (uint64_t *)(buf + 32);

	cr_assert_eq(len, 32u + 2 * 8);
	w[1] = 0xfeedull;
	cr_assert_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v), 0);
	cr_expect_eq(v.words, (const uint64_t *)(buf + 32));
	cr_expect_eq(v.words[1], 0xfeedull);
	cr_expect_null(v.keys);
	/* The same for a commit_retrieve naming corrupt slots. */
	len = mk_req(buf, KVR_OP_COMMIT_RETRIEVE, 1, KVR_REQ_CORRUPT);
	cr_assert_eq(kvr_req_parse(KVR_OP_COMMIT_RETRIEVE, buf, len, 16, &v),
		     0);
	cr_expect_not_null(v.words);
	/* Without the flag a commit carries nothing. */
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 0, 0);
	cr_assert_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v), 0);
	cr_expect_null(v.words);
}

Test(proto, parse_refuses_checksum_words_when_count_or_flag_is_wrong)
{
	uint8_t buf[256];
	struct kvr_req_view v;
	size_t len;

	/* The flag with no word, words without the flag. */
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 0, KVR_REQ_SUMS);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v),
		     -EBADMSG);
	len = mk_req(buf, KVR_OP_COMMIT_RETRIEVE, 0, KVR_REQ_CORRUPT);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_RETRIEVE, buf, len, 16, &v),
		     -EBADMSG);
	/* The wrong flag for the op. */
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 1, KVR_REQ_CORRUPT);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v),
		     -EBADMSG);
	len = mk_req(buf, KVR_OP_LOOKUP, 1, KVR_REQ_SUMS);
	cr_expect_eq(kvr_req_parse(KVR_OP_LOOKUP, buf, len, 16, &v), -EBADMSG);
	/* A length that is not count words. */
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 2, KVR_REQ_SUMS);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len - 8, 16, &v),
		     -EBADMSG);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 1, &v),
		     -E2BIG);
}

Test(proto, resp_parse_takes_sums_only_when_the_answer_is_a_retrieve)
{
	uint8_t buf[512];
	struct kvr_resp_hdr h;
	size_t len = mk_resp(buf, 2, 0, 64, KVR_SLOT_OK);

	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_RETRIEVE, buf,
				    kvr_resp_sums_bytes(2), 4096, &h, NULL),
		     0);
	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_STORE, buf,
				    kvr_resp_sums_bytes(2), 4096, &h, NULL),
		     -EBADMSG);
	cr_expect_eq(kvr_resp_parse(KVR_RESP_BIT | KVR_OP_PREPARE_RETRIEVE, buf,
				    kvr_resp_sums_bytes(2) - 8, 4096, &h, NULL),
		     -EBADMSG);
	(void)len;
}

Test(proto, encode_then_parse_keeps_sums_when_a_retrieve_carries_them)
{
	uint8_t buf[512];
	struct kvr_slot_desc sl[2] = {
	    {.off = 0,
	     .len = 64,
	     .status = KVR_SLOT_OK,
	     .reserved = KVR_SLOT_F_SUM | 0x80},
	    {.off = 64, .len = 64, .status = KVR_SLOT_OK, .reserved = 0}};
	uint64_t sums[2] = {0x1111, 0};
	struct kvr_resp_view v = {.op = KVR_OP_PREPARE_RETRIEVE,
				  .hdr = {.req_id = 3, .handle = 9, .count = 2},
				  .slots = sl,
				  .sums = sums},
			     got;
	int len = kvr_resp_encode(&v, buf, sizeof(buf));

	cr_assert_eq(len, (int)kvr_resp_sums_bytes(2));
	cr_assert_eq(kvr_resp_parse_view(KVR_RESP_BIT | KVR_OP_PREPARE_RETRIEVE,
					 buf, (size_t)len, 4096, &got),
		     0);
	cr_assert_not_null(got.sums);
	cr_expect_eq(got.sums[0], 0x1111u);
	/* Only the known flag survives the encoder. */
	cr_expect_eq(got.slots[0].reserved, KVR_SLOT_F_SUM);
	cr_expect_eq(got.slots[1].reserved, 0u);
	/* Sums belong to retrieve answers only. */
	v.op = KVR_OP_PREPARE_STORE;
	cr_expect_eq(kvr_resp_encode(&v, buf, sizeof(buf)), -EINVAL);
	/* Without sums the slot flags are cleared, as always. */
	v.op = KVR_OP_PREPARE_RETRIEVE;
	v.sums = NULL;
	len = kvr_resp_encode(&v, buf, sizeof(buf));
	cr_assert_eq(len, (int)kvr_resp_bytes(2));
	cr_assert_eq(kvr_resp_parse_view(KVR_RESP_BIT | KVR_OP_PREPARE_RETRIEVE,
					 buf, (size_t)len, 4096, &got),
		     0);
	cr_expect_null(got.sums);
	cr_expect_eq(got.slots[0].reserved, 0u);
}

Test(proto, encode_then_parse_keeps_words_when_a_commit_carries_sums)
{
	uint8_t buf[256];
	uint64_t w[3] = {7, 8, 9};
	struct kvr_req_view v = {.op = KVR_OP_COMMIT_STORE,
				 .hdr = {.req_id = 1,
					 .handle = 5,
					 .count = 3,
					 .flags = KVR_REQ_SUMS},
				 .words = w},
			    got;
	int len = kvr_req_encode(&v, buf, sizeof(buf));

	cr_assert_eq(len, (int)kvr_req_bytes(KVR_OP_COMMIT_STORE, 3));
	cr_assert_eq(
	    kvr_req_parse(KVR_OP_COMMIT_STORE, buf, (size_t)len, 16, &got), 0);
	cr_expect_eq(got.words[2], 9u);
	/* The flag without words to write is the caller's bug. */
	v.words = NULL;
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL);
}

Test(proto, parse_takes_a_bind_only_with_its_key_size_and_sum)
{
	uint8_t buf[256];
	struct kvr_req_view v;
	size_t len;

	/* Key lo, key hi, size; and with SUMS the sum after them. */
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 3, KVR_REQ_BIND);
	cr_assert_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v), 0);
	cr_expect_eq(v.words, (const uint64_t *)(buf + 32));
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 4,
		     KVR_REQ_BIND | KVR_REQ_SUMS | KVR_REQ_STAGE);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v), 0);
	/* Any other count is malformed, with or without SUMS. */
	for (uint32_t n = 0; n < 6; n++) {
		len = mk_req(buf, KVR_OP_COMMIT_STORE, n, KVR_REQ_BIND);
		cr_expect_eq(
		    kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v),
		    n == 3 ? 0 : -EBADMSG, "count %u", n);
		len = mk_req(buf, KVR_OP_COMMIT_STORE, n,
			     KVR_REQ_BIND | KVR_REQ_SUMS);
		cr_expect_eq(
		    kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v),
		    n == 4 ? 0 : -EBADMSG, "count %u with sums", n);
	}
	/* STAGE alone carries nothing; neither flag goes on another op. */
	len = mk_req(buf, KVR_OP_COMMIT_STORE, 0, KVR_REQ_STAGE);
	cr_expect_eq(kvr_req_parse(KVR_OP_COMMIT_STORE, buf, len, 16, &v), 0);
	cr_expect_null(v.words);
	len = mk_req(buf, KVR_OP_PREPARE_STORE, 1, KVR_REQ_STAGE);
	cr_expect_eq(kvr_req_parse(KVR_OP_PREPARE_STORE, buf, len, 16, &v),
		     -EBADMSG);
	len = mk_req(buf, KVR_OP_ABORT_STORE, 0, KVR_REQ_BIND);
	cr_expect_eq(kvr_req_parse(KVR_OP_ABORT_STORE, buf, len, 16, &v),
		     -EBADMSG);
}

Test(proto, encode_refuses_a_bind_that_parse_would_refuse)
{
	uint8_t buf[256];
	uint64_t w[4] = {1, 2, 4096, 0xabc};
	struct kvr_req_view v = {.op = KVR_OP_COMMIT_STORE,
				 .hdr = {.req_id = 1,
					 .handle = 5,
					 .count = 4,
					 .flags = KVR_REQ_BIND | KVR_REQ_SUMS},
				 .words = w},
			    got;
	int len = kvr_req_encode(&v, buf, sizeof(buf));

	cr_assert_eq(len, (int)kvr_req_bytes(KVR_OP_COMMIT_STORE, 4));
	cr_assert_eq(
	    kvr_req_parse(KVR_OP_COMMIT_STORE, buf, (size_t)len, 16, &got), 0);
	cr_expect_eq(got.words[3], 0xabcu);
	v.hdr.count = 3; /* the sum left out */
	cr_expect_eq(kvr_req_encode(&v, buf, sizeof(buf)), -EINVAL);
}

Test(proto, parse_takes_an_early_bind_only_for_one_key)
{
	uint8_t buf[256];
	struct kvr_req_view v;
	size_t len;

	for (uint32_t n = 0; n < 3; n++) {
		len = mk_req(buf, KVR_OP_PREPARE_STORE, n, KVR_REQ_BIND);
		cr_expect_eq(
		    kvr_req_parse(KVR_OP_PREPARE_STORE, buf, len, 16, &v),
		    n == 1 ? 0 : -EBADMSG, "count %u", n);
	}
	len = mk_req(buf, KVR_OP_PREPARE_STORE, 1, KVR_REQ_BIND);
	cr_assert_eq(kvr_req_parse(KVR_OP_PREPARE_STORE, buf, len, 16, &v), 0);
	cr_expect_not_null(v.keys);
	cr_expect_not_null(v.sizes);
	cr_expect_null(v.words);
}
