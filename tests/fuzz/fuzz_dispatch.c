/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the server's request dispatch and storage engine,
 * driven in-process by a script of requests from four channels. Each input
 * is read as a sequence of steps; a step either builds one request record
 * (op, flags, count, handle and keys chosen by the input, the handle often
 * one the server really handed out, to any channel) and runs it exactly as
 * kvringd does -- kvr_req_parse(), then kvr__disp_exec() --, or closes a
 * channel (a worker hung up), or moves the clock (leases expire).
 *
 * Store-ahead (protocol 7): the channels are ring-transport channels, so
 * a commit_store may ask for a staged slot (KVR_REQ_STAGE) or bind one
 * (KVR_REQ_BIND). One kind of step builds such a commit on purpose: its
 * words are a key of the alphabet and a size that is often the last
 * staged slot's (so binds succeed) and otherwise an edge, sometimes with
 * a sum, sometimes with a count one off; its handle is a staged id any
 * channel was handed, another recorded id, or a forged one. Another kind
 * ends a batch as kvringd's drain does, staging the channel's spare.
 *
 * After every step the target checks what a worker can observe: the
 * answer has the length of the form its request asked for (derived from
 * the op and flags, as libkvring does: a stats body, sums after a
 * retrieve's slots, slots and nothing else), passes libkvring's decoder
 * (every OK slot inside the pool), and meets the shape rules libkvring
 * checks (no positive status, slot counts per op, the lookup's hit and
 * "L2 pending" bits, a commit's staged slot and bind outcome). It then
 * runs kvr_store_audit(), which walks every object, pin, lease, transfer
 * and the allocator. At the end every channel
 * closes and the store must hold nothing: no reservation, pin, lease or
 * transfer, and used bytes equal committed bytes. Any violation aborts, so
 * libFuzzer reports it with the input that led there.
 *
 * This target does not cover the rings (fuzz_ring) or the record decoding
 * alone (fuzz_req); it covers what happens to the server's state after a
 * record passed decoding.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/proto.h>
#include <kvring/store.h>

#include "disp.h"
#include "tport_ring.h"
#include "kvringd.h"
#include "fuzz.h"

#define NCHAN	 4u
#define MAX_KEYS 32u
#define POOL	 (1u << 20)
#define NHANDLES 16u

/* The input, consumed byte by byte; zeros once it runs out. */
struct in {
	const uint8_t *p;
	size_t left;
};

static uint8_t u8(struct in *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

static uint64_t u64(struct in *in)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)u8(in) << (8 * i);
	return v;
}

static void fail(const char *what, unsigned long long a, const char *msg)
{
	fprintf(stderr, "fuzz_dispatch: %s (%llu) %s\n", what, a,
		msg ? msg : "");
	abort();
}

/* Sizes that hit the interesting edges: 0, tiny, unaligned, the pool,
 * beyond the pool, and huge. */
static uint64_t pick_size(struct in *in)
{
	static const uint64_t edge[] = {0,	   1,	 63,	   64,
					4095,	   4096, 65536,	   POOL / 2,
					POOL - 64, POOL, POOL + 1, UINT64_MAX};
	uint8_t b = u8(in);

	if (b < 128)
		return edge[b % (sizeof(edge) / sizeof(edge[0]))];
	return (uint64_t)b * 977;
}

static void audit(struct kvr_store *st, const char *when)
{
	char msg[256];
	int rc = kvr_store_audit(st, msg, sizeof(msg));

	if (rc < 0)
		fail(when, (unsigned long long)-rc, msg);
}

/* The store's tables are sized for OBJECTS_HINT objects (see
 * reset_store()); true once a step of this input may have grown them. */
#define OBJECTS_HINT 32u
static bool tables_grown;

/* Before a step that may create up to n objects: the store grows its
 * tables when the objects it holds and those asked for exceed them. */
static void note_growth(const struct kvr_store *st, uint32_t n)
{
	if (kvr_store_ns_objects(st, 1) + kvr_store_ns_objects(st, 2) + n >
	    OBJECTS_HINT)
		tables_grown = true;
}

/* The length of the last staged slot an answer handed out: a bind that
 * names it fits (0: none yet). */
static uint64_t last_stage_len;

/*
 * The answer forms, and the request flags each op's answer depends on.
 * Adding an op or a request flag to the protocol breaks the build here,
 * so that its answer form is taught to answer_bytes() and check_answer()
 * before the target runs; a form they do not know fails at the first
 * request that asks for it.
 */
_Static_assert(KVR_OP__MAX == 10, "an op's answer form: fuzz_dispatch.c");
_Static_assert(KVR_REQ_FLAGS_ALL == 0x7fu,
	       "a flag's answer form: fuzz_dispatch.c");

/*
 * The length of the answer to v that carries r->count slots, derived from
 * the request alone, as libkvring's answer.c derives what it waits for:
 * a stats answer has its body; a retrieve asked with KVR_REQ_SUMS has a
 * sum after each slot (when it has slots); every other answer is its
 * header and its slots. A lookup with KVR_REQ_L2 may also be answered
 * later (length 0) by a server with an L2 tier: this one has none.
 */
static size_t answer_bytes(const struct kvr_req_view *v,
			   const struct kvr_resp_hdr *r)
{
	switch (v->op) {
	case KVR_OP_STATS:
		return sizeof(*r) + sizeof(struct kvr_stats_wire);
	case KVR_OP_PREPARE_RETRIEVE:
		if ((v->hdr.flags & KVR_REQ_SUMS) && r->count)
			return kvr_resp_sums_bytes(r->count);
		return kvr_resp_bytes(r->count);
	case KVR_OP_LOOKUP:
	case KVR_OP_RELEASE:
	case KVR_OP_PREPARE_STORE:
	case KVR_OP_COMMIT_STORE:
	case KVR_OP_ABORT_STORE:
	case KVR_OP_COMMIT_RETRIEVE:
	case KVR_OP_PING:
		return kvr_resp_bytes(r->count);
	default:
		fail("op with no known answer form", v->op, NULL);
		return 0;
	}
}

/*
 * What a worker may rely on in the answer to v, beyond its length: the
 * shape rules of libkvring's check_shape() (answer.c) for the op, each
 * slot's flags word, and the staged slot of a store-ahead commit. The
 * answer has already passed kvr_resp_parse_view(): slots inside the pool,
 * statuses known.
 */
static void check_answer(const struct kvr_req_view *v,
			 const struct kvr_resp_view *a)
{
	const struct kvr_resp_hdr *r = &a->hdr;
	uint32_t flags = v->hdr.flags, outcome, f_ok = 0;
	bool any_ok = false;

	if (r->status > 0)
		fail("positive status", (unsigned long long)r->status, NULL);
	if (r->status < 0 && r->count)
		fail("slots on an error answer", r->count, NULL);
	if ((a->sums != NULL) != (v->op == KVR_OP_PREPARE_RETRIEVE &&
				  (flags & KVR_REQ_SUMS) && r->count))
		fail("sums carried or missing", r->count, NULL);
	/* A slot's flags word: KVR_SLOT_F_SUM in a sums answer, else 0. */
	if (a->sums)
		f_ok = KVR_SLOT_F_SUM;
	for (uint32_t i = 0; i < r->count; i++) {
		any_ok |= a->slots[i].status == KVR_SLOT_OK;
		if (a->slots[i].reserved & ~f_ok)
			fail("slot flags", a->slots[i].reserved, NULL);
	}
	if (r->status < 0)
		return;
	switch (v->op) {
	case KVR_OP_LOOKUP:
		/* Hits in bits 0..31; the L2 "ask again" bit only when the
		 * lookup asked to read through L2 (there is no L2 here). */
		if (r->count ||
		    (r->value & KVR_LOOKUP_HITS_MASK) > v->hdr.count)
			fail("lookup hits or slots", r->value, NULL);
		if (r->value & ~KVR_LOOKUP_HITS_MASK)
			fail(flags & KVR_REQ_L2
				 ? "lookup L2 pending without an L2 tier"
				 : "lookup answer flags not asked for",
			     r->value, NULL);
		break;
	case KVR_OP_PREPARE_STORE:
		/* One slot per key (the early bind: its one), each with a
		 * store status; any OK slot comes with a transfer id. */
		if (r->count != v->hdr.count || (any_ok && !r->handle))
			fail("prepare_store slot count or transfer id",
			     r->count, NULL);
		for (uint32_t i = 0; i < r->count; i++)
			if (a->slots[i].status == KVR_SLOT_CORRUPT)
				fail("store slot answered corrupt", i, NULL);
		break;
	case KVR_OP_PREPARE_RETRIEVE:
		/* Only OK slots, at most one per key (a lease: any count),
		 * and a transfer id when there are any. */
		if ((r->count > v->hdr.count && !(flags & KVR_REQ_BY_LEASE)) ||
		    (r->count && !r->handle))
			fail("retrieve slot count or transfer id", r->count,
			     NULL);
		for (uint32_t i = 0; i < r->count; i++)
			if (a->slots[i].status != KVR_SLOT_OK)
				fail("retrieve slot not OK", i, NULL);
		break;
	case KVR_OP_COMMIT_STORE:
		/* At most the one staged slot, only when it asked for one or
		 * bound one, OK and named by the handle; a bind's outcome is
		 * one of rule 1's, a plain commit's OK. */
		if (r->count >
		    (flags & (KVR_REQ_STAGE | KVR_REQ_BIND) ? 1u : 0u))
			fail("staged slot nobody asked for", r->count, NULL);
		if (r->count && (!any_ok || !r->handle))
			fail("staged slot not OK or without its id", r->count,
			     NULL);
		outcome = (uint32_t)(r->value & KVR_COMMIT_OUTCOME_MASK);
		if (outcome != KVR_SLOT_OK &&
		    (!(flags & KVR_REQ_BIND) ||
		     (outcome != KVR_SLOT_EXISTS && outcome != KVR_SLOT_BUSY)))
			fail("commit outcome", outcome, NULL);
		if (r->count)
			last_stage_len = a->slots[0].len;
		break;
	default:
		/* Release, abort, commit_retrieve, ping, stats: no slots. */
		if (r->count)
			fail("slots on an answer that has none", r->count,
			     NULL);
		break;
	}
}

/* Run one request record through parse + exec and check the answer as a
 * worker would: its type, its length for the form the request asked for,
 * the worker's own decoder, then the shape rules. */
static void run_request(struct kvr_srv *s, struct kvr_conn *c, const void *rec,
			size_t len, uint32_t op, uint64_t *handles,
			unsigned *nh)
{
	const struct kvr_resp_hdr *r = (const struct kvr_resp_hdr *)s->ans;
	struct kvr_resp_view a;
	struct kvr_req_view v;
	uint32_t type;
	size_t alen;
	int rc;

	if (kvr_req_parse(op, rec, len, s->max_keys, &v) < 0)
		return; /* kvringd disconnects here; nothing reached the store
			 */
	alen = kvr__disp_exec(s, c, &v, &type);
	if (type != (KVR_RESP_BIT | op))
		fail("answer type", type, NULL);
	if (alen > s->ans_cap)
		fail("answer longer than the buffer", alen, NULL);
	if (alen != answer_bytes(&v, r))
		fail("answer length vs the form its request asked for", alen,
		     kvr_op_name(op));
	rc = kvr_resp_parse_view(type, s->ans, alen, POOL, &a);
	if (rc < 0)
		fail("the worker's decoder refuses the answer",
		     (unsigned long long)-rc, kvr_op_name(op));
	check_answer(&v, &a);
	if (r->handle) {
		handles[*nh % NHANDLES] = r->handle;
		(*nh)++;
	}
}

/*
 * One commit_store with KVR_REQ_BIND and/or KVR_REQ_STAGE (and maybe
 * KVR_REQ_SUMS): the handle a recorded id (often a staged one, of any
 * channel) or forged, the bind words a key of the alphabet and a size
 * (the last staged slot's, or an edge), the count right or one off.
 */
static void bind_step(struct kvr_srv *s, struct kvr_conn *c, struct in *in,
		      uint64_t *handles, unsigned *nh, unsigned step)
{
	static uint64_t rec[(sizeof(struct kvr_req_hdr) + 8 * 8) / 8];
	struct kvr_req_hdr h = {0};
	uint8_t b = u8(in);
	uint64_t w[KVR_BIND_WORDS + 1];
	uint32_t n = 0;
	size_t len;

	h.req_id = step;
	h.flags = (b & 1 ? KVR_REQ_BIND : 0) | (b & 2 ? KVR_REQ_STAGE : 0) |
		  (b & 4 ? KVR_REQ_SUMS : 0);
	if (!(h.flags & (KVR_REQ_BIND | KVR_REQ_STAGE)))
		h.flags |= KVR_REQ_BIND;
	if ((b & 8) || !*nh)
		h.handle = u64(in); /* forged */
	else
		h.handle = handles[u8(in) % (*nh < NHANDLES ? *nh : NHANDLES)];
	if (h.flags & KVR_REQ_BIND) {
		w[0] = u8(in) % 24u; /* key lo, as the other steps' keys */
		w[1] = 7;
		w[2] =
		    (b & 16) && last_stage_len ? last_stage_len : pick_size(in);
		n = KVR_BIND_WORDS;
		if (h.flags & KVR_REQ_SUMS)
			w[n++] = u64(in);
	} else if (h.flags & KVR_REQ_SUMS) {
		w[n++] = u64(in); /* a plain commit's one sum */
	}
	if (b & 32)
		n = n ? n - 1 : 1; /* a count one off: refused by the parse */
	h.count = n;
	len = kvr_req_bytes(KVR_OP_COMMIT_STORE, n);
	if (len > sizeof(rec))
		return;
	memcpy(rec, &h, sizeof(h));
	for (uint32_t i = 0; i < n && i < KVR_BIND_WORDS + 1; i++)
		memcpy((uint8_t *)rec + sizeof(h) + i * 8, &w[i], 8);
	run_request(s, c, rec, len, KVR_OP_COMMIT_STORE, handles, nh);
}

/*
 * The store lives across inputs: creating one (and freeing it) per input
 * cost more than most inputs' steps, as ASan keeps freed memory in
 * quarantine and every new store faulted in fresh pages. After an input,
 * every channel is closed and both namespaces are evicted, which must
 * leave the store exactly as created: reset_store() proves it with the
 * audit, the global gauges against those of the new store, and every
 * channel's gauges at zero; anything left behind aborts like any other
 * finding. What an emptied store keeps is invisible to requests, so an
 * input replayed alone behaves as it did in the run: its id counter (a
 * handle an earlier input saw is no longer live, and a forged 64-bit
 * handle matches a live id of either store by chance alone), the capacity
 * of its tables, and the monotonic event counters (a stats answer's
 * values are not checked). The server and connection structs, and the
 * namespace entries dispatch uses, are zeroed per input.
 *
 * The store's object table and index are sized for OBJECTS_HINT objects
 * and grow past it, never shrink, and the audit after every step walks
 * them whole: an input during which the objects held plus those a step
 * asked for exceeded OBJECTS_HINT is followed by a new store, so that one
 * large input does not slow every later one.
 */
static struct kvr_store *store;
static struct kvr_store_stats store_new; /* the gauges of the new store */
static struct kvr_srv srv;
static struct kvr_conn conns[NCHAN];
/* The namespace table the channels' ns_id index (cache counters). */
static struct kvr_ns_ent ns_tab[KVR_SRV_NS_MAX];

static struct kvr_store *store_get(void)
{
	struct kvr_store_config cfg = {
	    .pool_bytes = POOL,
	    .align = 64,
	    .lease_ms = 1000,
	    .max_channels = NCHAN,
	    .max_keys = MAX_KEYS,
	    .max_xfers_per_chan = 8,
	    .max_leases_per_chan = 4,
	    .hash_seed = 42,
	    /* Namespaces 1 and 2 only (kvringd has KVR_SRV_NS_MAX): the
	     * audit walks every namespace's count. */
	    .max_ns = 3,
	    .objects_hint = OBJECTS_HINT,
	};

	if (!store) {
		if (kvr_store_create(&cfg, &store) < 0)
			abort();
		kvr_store_stats(store, &store_new);
	}
	return store;
}

/* The gauges of two stats snapshots (what the store holds now), equal. */
static bool gauges_equal(const struct kvr_store_stats *a,
			 const struct kvr_store_stats *b)
{
	return a->pool_bytes == b->pool_bytes &&
	       a->used_bytes == b->used_bytes &&
	       a->committed_bytes == b->committed_bytes &&
	       a->reserved_bytes == b->reserved_bytes &&
	       a->free_bytes == b->free_bytes &&
	       a->largest_free_bytes == b->largest_free_bytes &&
	       a->free_extents == b->free_extents && a->objects == b->objects &&
	       a->reserved_objects == b->reserved_objects &&
	       a->pinned_objects == b->pinned_objects &&
	       a->pinned_bytes == b->pinned_bytes && a->pins == b->pins &&
	       a->leases == b->leases && a->transfers == b->transfers &&
	       a->staged == b->staged;
}

/*
 * Empty the store for the next input (every channel is closed already):
 * evict both namespaces, then prove that nothing is left: the audit
 * passes, the gauges are the new store's (no object, one free extent the
 * size of the pool), every channel holds nothing.
 */
static void reset_store(struct kvr_store *st)
{
	struct kvr_store_stats now;
	struct kvr_store_chan_stats cs;

	for (uint32_t n = 1; n < 3; n++)
		if (kvr_store_ns_evict(st, n) || kvr_store_ns_objects(st, n))
			fail("objects left after evicting namespace", n, NULL);
	audit(st, "after the reset");
	kvr_store_stats(st, &now);
	if (!gauges_equal(&now, &store_new))
		fail("reset store differs from a new one: used bytes",
		     now.used_bytes, NULL);
	for (uint32_t i = 0; i < NCHAN; i++) {
		if (kvr_store_chan_stats(st, i, &cs) < 0)
			fail("channel stats", i, NULL);
		if (cs.reserved_bytes || cs.reserved_objects || cs.pins_held ||
		    cs.leases_owned || cs.transfers_open || cs.pinned_bytes ||
		    cs.oldest_ns || cs.staged)
			fail("channel holds something after the reset", i,
			     NULL);
	}
	if (tables_grown) {
		kvr_store_destroy(store);
		store = NULL;
		tables_grown = false;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t
	    rec_buf[(sizeof(struct kvr_req_hdr) + (MAX_KEYS + 2) * 24) / 8 + 1];
	static struct kvr_key keys[MAX_KEYS];
	static uint64_t sizes[MAX_KEYS];
	/* Room for the largest answer, as kvringd sizes it (srv.c): a
	 * retrieve of MAX_KEYS slots with their sums, or a stats answer. */
	static uint8_t
	    ans[sizeof(struct kvr_resp_hdr) +
		MAX_KEYS * (sizeof(struct kvr_slot_desc) + sizeof(uint64_t)) +
		sizeof(struct kvr_stats_wire)];
	struct kvr_srv *s = &srv;
	struct in in = {data, size};
	uint64_t handles[NHANDLES] = {0};
	struct kvr_store_stats stt;
	unsigned nh = 0;

	memset(&srv, 0, sizeof(srv));
	memset(conns, 0, sizeof(conns));
	/* Dispatch touches only the entries of its channels' namespaces. */
	memset(ns_tab, 0, 2 * sizeof(ns_tab[0]));
	s->store = store_get();
	s->ns = ns_tab;
	s->keys = keys;
	s->sizes = sizes;
	s->ans = ans;
	s->ans_cap = sizeof(ans);
	s->max_keys = MAX_KEYS;
	s->now_ns = 1000000000ull;
	s->nactive = NCHAN;
	for (uint32_t i = 0; i < NCHAN; i++) {
		conns[i].idx = i;
		conns[i].chan = (int32_t)i;
		conns[i].state = KVR_CONN_ACTIVE;
		conns[i].ns_id = 1 + (i & 1);	     /* two namespaces */
		conns[i].ops = &kvr__tport_ring_ops; /* store-ahead needs it */
	}
	last_stage_len = 0;

	for (unsigned step = 0; in.left && step < 512; step++) {
		uint8_t b = u8(&in);
		struct kvr_conn *c = &conns[b & (NCHAN - 1)];
		unsigned kind = (b >> 2) % 14;
		struct kvr_req_hdr h = {0};
		uint8_t *rec = (uint8_t *)rec_buf;
		uint32_t op, n;
		size_t len;

		if (kind == 10) { /* the worker of this channel hung up */
			kvr_store_channel_close(s->store, (uint32_t)c->chan,
						s->now_ns, NULL);
			/* As chan.c at the channel's reuse: the spare is gone.
			 */
			c->stage_spare = c->stage_len = 0;
			audit(s->store, "after channel close");
			continue;
		}
		if (kind == 12) { /* a bind and/or a stage, built on purpose */
			note_growth(s->store, 1);
			bind_step(s, c, &in, handles, &nh, step);
			audit(s->store, "after a bind");
			s->now_ns += 1000;
			continue;
		}
		if (kind == 13) { /* end of a batch: the spare (as disp.c) */
			struct kvr_slot_desc d;
			uint64_t id = 0;

			note_growth(s->store, 1);
			if (c->stage_len && !c->stage_spare &&
			    kvr_store_stage(s->store, (uint32_t)c->chan,
					    c->ns_id, c->stage_len, s->now_ns,
					    &d, &id) > 0) {
				c->stage_spare = id;
				handles[nh % NHANDLES] =
				    id; /* a leak for a spy */
				nh++;
			}
			c->stage_len = 0;
			audit(s->store, "after staging a spare");
			continue;
		}
		if (kind == 11) { /* time passes: leases may expire */
			s->now_ns += (uint64_t)u8(&in) * 20000000ull;
			kvr_store_expire(s->store, s->now_ns, 0);
			audit(s->store, "after expiry");
			continue;
		}
		op = kind == 0	? KVR_OP_STATS
		     : kind > 8 ? KVR_OP_PREPARE_STORE
				: kind;
		n = u8(&in);
		n = n < 200 ? n % (MAX_KEYS + 1) : n; /* sometimes too many */
		h.req_id = step;
		h.count = n;
		b = u8(&in);
		h.flags = b & 3u;
		if (b & 0x80)
			h.flags |= (uint32_t)u8(&in) << 2; /* unknown bits */
		if (b & 0x40)
			h.handle = u64(&in); /* any id at all */
		else if (nh)
			h.handle =
			    handles[u8(&in) % (nh < NHANDLES ? nh : NHANDLES)];
		if (b & 0x20)
			h.reserved = 1;
		/* Keys from a small alphabet so that requests collide. */
		len = kvr_req_bytes(op, n <= MAX_KEYS + 1 ? n : 0);
		if (len > sizeof(rec_buf))
			continue;
		memcpy(rec, &h, sizeof(h));
		for (uint32_t i = 0; i < n && n <= MAX_KEYS + 1; i++) {
			struct kvr_key k = {.lo = u8(&in) % 24u, .hi = 7};

			memcpy(rec + sizeof(h) + i * sizeof(k), &k, sizeof(k));
		}
		if (op == KVR_OP_PREPARE_STORE && n <= MAX_KEYS + 1)
			for (uint32_t i = 0; i < n; i++) {
				uint64_t sz = pick_size(&in);

				memcpy(rec + sizeof(h) +
					   n * sizeof(struct kvr_key) +
					   i * sizeof(sz),
				       &sz, sizeof(sz));
			}
		/* Sometimes a record shorter or longer than its count says. */
		if ((b & 0x18) == 0x18 && len >= 8)
			len -= 8;
		note_growth(s->store, n <= MAX_KEYS ? n : MAX_KEYS);
		run_request(s, c, rec, len, op, handles, &nh);
		audit(s->store, "after a request");
		s->now_ns += 1000;
	}

	/* Every worker leaves: nothing may stay held. */
	for (uint32_t i = 0; i < NCHAN; i++)
		kvr_store_channel_close(s->store, i, s->now_ns, NULL);
	audit(s->store, "after all channels closed");
	kvr_store_stats(s->store, &stt);
	if (stt.reserved_bytes || stt.reserved_objects || stt.pins ||
	    stt.leases || stt.transfers)
		fail("leak after every channel closed", stt.reserved_bytes,
		     NULL);
	if (stt.used_bytes != stt.committed_bytes)
		fail("used != committed after close", stt.used_bytes, NULL);
	reset_store(s->store);
	return 0;
}
