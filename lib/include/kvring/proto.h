/* SPDX-License-Identifier: MIT */
/*
 * kvring wire protocol: the records that travel on a channel's request and
 * response rings (shared-memory transport) or, framed, over the Unix socket
 * (handshake always; every request and answer under the copy transport).
 *
 * This header owns the byte layout of every message and the validation of
 * what a peer sent. It does not own how messages move (rings/, the socket
 * code in server/ and worker/) or what the server does with them (server/).
 * docs/protocol.md repeats every struct as a byte table; change both, and
 * bump KVR_PROTO_VERSION, in the same commit.
 *
 * All integers are little-endian host order (client and server share one
 * host). Every record is 8-byte aligned and has a fixed header followed by
 * arrays whose length the header's count field gives.
 */
#ifndef KVRING_PROTO_H
#define KVRING_PROTO_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* C++ spells C11's _Static_assert static_assert; the define is undone at
 * the end of this header, so it never leaks into a C++ program. */
#if defined(__cplusplus) && !defined(_Static_assert)
#define _Static_assert static_assert
#define KVR__UNDEF_STATIC_ASSERT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Version 3: channel block fd (abi 3.0); 4: per-chunk checksums (SUMS,
 * CORRUPT, KVR_SLOT_F_SUM); 5: checksums over the copy transport too (a
 * COMMIT_STORE frame's sums sit between its header and its payload); 6:
 * ring consumers poll the next record's header word and zero what they
 * release (docs/ring.md); 7: store-ahead, a commit_store that binds a
 * staged slot (KVR_REQ_BIND) or asks for one (KVR_REQ_STAGE). */
#define KVR_PROTO_MAGIC	  0x4b565250u /* "KVRP" */
#define KVR_PROTO_VERSION 7u

/* A chunk key: 128 bits of XXH3-128 output, see <kvring/keys.h>. */
struct kvr_key {
	uint64_t lo;
	uint64_t hi;
};
_Static_assert(sizeof(struct kvr_key) == 16, "ABI: update docs/protocol.md");

/* Operations. The ring record type of a request is the op; of its answer
 * KVR_RESP_BIT | op. 0 and the ring's own padding type are never used. */
enum kvr_op {
	KVR_OP_LOOKUP = 1,	     /* keys[count], flags: KVR_REQ_PIN */
	KVR_OP_RELEASE = 2,	     /* handle = lease id */
	KVR_OP_PREPARE_STORE = 3,    /* keys[count], then sizes[count] (u64) */
	KVR_OP_COMMIT_STORE = 4,     /* handle = transfer id (+payload: copy);
					with KVR_REQ_SUMS, sums[count] (u64) */
	KVR_OP_ABORT_STORE = 5,	     /* handle = transfer id */
	KVR_OP_PREPARE_RETRIEVE = 6, /* keys[count], or handle = lease id
					with KVR_REQ_BY_LEASE and count 0 */
	KVR_OP_COMMIT_RETRIEVE = 7,  /* handle = transfer id; with
					KVR_REQ_CORRUPT, offs[count] (u64) */
	KVR_OP_PING = 8,	     /* nothing; answer value = server time */
	KVR_OP_STATS = 9, /* nothing; answer carries kvr_stats_wire */
	KVR_OP__MAX = 10,
};
#define KVR_RESP_BIT 0x100u

/* Request flags. Any bit not listed is a protocol error. */
#define KVR_REQ_PIN	 0x1u /* lookup: pin the hit prefix under a lease */
#define KVR_REQ_BY_LEASE 0x2u /* prepare_retrieve: redeem handle (a lease) */
#define KVR_REQ_L2	 0x4u /* lookup: read through the L2 tier (docs/l2.md) */
/*
 * Per-chunk checksums (docs/reliability.md, "Checksums"). The worker
 * computes XXH3-64 of each slot; the server keeps it with the object and
 * never computes it on the hot path.
 *   commit_store + SUMS: count = the transfer's KVR_SLOT_OK slots, and
 *     count u64 sums follow the header, one per OK slot in slot order.
 *     A count that is not the transfer's reservation count is answered
 *     -EINVAL and nothing changes (the transfer stays open).
 *   prepare_retrieve + SUMS: the answer carries, after its slots, count
 *     u64 sums; a slot whose object was stored with a sum has
 *     KVR_SLOT_F_SUM in its flags (else its sum is 0 and means nothing).
 *   commit_retrieve + CORRUPT: count u64 pool offsets follow, the slots
 *     of this transfer whose bytes failed their sum at the worker. The
 *     server re-checks each against the sum it keeps and drops the
 *     objects that really fail (answer value = how many).
 */
#define KVR_REQ_SUMS	0x8u
#define KVR_REQ_CORRUPT 0x10u
/*
 * Store-ahead (docs/protocol.md, "Store-ahead"; ring transport only, the
 * copy transport answers -EOPNOTSUPP).
 *   commit_store + STAGE: after the commit, stage one slot for the next
 *     store (the size of this transfer's first object; with BIND, the
 *     bound size). The answer then carries it: count 1, the slot OK,
 *     handle its id, value bits 32..63 its lifetime in ms. No room, a
 *     quota or too many transfers: count 0, and the commit still stands.
 *   prepare_store + BIND (the early bind): handle is a staged slot, count
 *     1: the key and size it is for. kvringd gives the slot that key and
 *     size but does not commit it: the answer is a prepare's, one slot,
 *     OK with handle = the staged id (now a plain store transfer: commit
 *     or abort it), or EXISTS / BUSY with handle 0 (rule 1; the slot
 *     stays staged). libkvring sends it at the local prepare, without
 *     waiting, so the bind overlaps the caller's copy.
 *   commit_store + BIND: handle is a staged slot, and the words are
 *     KVR_BIND_WORDS u64 (key lo, key hi, size), plus the sum with SUMS.
 *     The server gives the slot that key and size and commits it. Value
 *     bits 0..7 say what happened: KVR_SLOT_OK (stored), KVR_SLOT_EXISTS
 *     or KVR_SLOT_BUSY (not stored: rule 1; the slot stays staged and
 *     the answer carries it again, as for STAGE).
 */
#define KVR_REQ_BIND   0x20u
#define KVR_REQ_STAGE  0x40u
#define KVR_BIND_WORDS 3u
#define KVR_REQ_FLAGS_ALL                                                      \
	(KVR_REQ_PIN | KVR_REQ_BY_LEASE | KVR_REQ_L2 | KVR_REQ_SUMS |          \
	 KVR_REQ_CORRUPT | KVR_REQ_BIND | KVR_REQ_STAGE)
/* In a commit_store answer's value: the bind outcome, and the lifetime of
 * the staged slot it carries. */
#define KVR_COMMIT_OUTCOME_MASK	  0xffull
#define KVR_COMMIT_STAGE_MS_SHIFT 32

/* In a lookup answer's value: bits 0..31 are the hits; this bit says L2
 * loads for keys past them are still in flight, so asking again soon may
 * find more (vLLM's "ask again"). Only set for KVR_REQ_L2 lookups. */
#define KVR_LOOKUP_L2_PENDING (1ull << 32)
#define KVR_LOOKUP_HITS_MASK  0xffffffffull

/* The fixed head of every request record (32 bytes). */
struct kvr_req_hdr {
	uint64_t req_id;   /* chosen by the worker, echoed in the answer */
	uint64_t handle;   /* transfer id or lease id, when the op takes one */
	uint32_t count;	   /* number of keys that follow */
	uint32_t flags;	   /* KVR_REQ_* */
	uint64_t reserved; /* must be 0 */
};
_Static_assert(sizeof(struct kvr_req_hdr) == 32, "ABI: docs/protocol.md");

/* The fixed head of every answer record (32 bytes). */
struct kvr_resp_hdr {
	uint64_t req_id; /* the request's req_id */
	uint64_t handle; /* transfer id or lease id created, else 0 */
	int32_t status;	 /* 0 or -errno (docs/errors.md) */
	uint32_t count;	 /* number of kvr_slot_desc that follow */
	uint64_t value;	 /* lookup: hits; ping: server CLOCK_MONOTONIC ns */
};
_Static_assert(sizeof(struct kvr_resp_hdr) == 32, "ABI: docs/protocol.md");

/* Per-key outcome in prepare_store / prepare_retrieve answers. */
enum kvr_slot_status {
	KVR_SLOT_OK = 0,     /* store: fill [off, off+len); retrieve: read it */
	KVR_SLOT_EXISTS = 1, /* store: already stored, nothing to write */
	KVR_SLOT_NOROOM = 2, /* store: pool full of reserved/pinned objects */
	KVR_SLOT_BUSY = 3,   /* store: another transfer is storing this key */
	KVR_SLOT_INVALID = 4, /* store: size 0 or larger than the pool */
	KVR_SLOT_QUOTA = 5,   /* store: the channel's reserve quota or the
				 per-key size limit forbids it (nothing was
				 evicted for it); retrieve: never */
	KVR_SLOT_CORRUPT = 6, /* retrieve: the bytes fail the XXH3-64 their
				 storer sent (set by libkvring's verify,
				 never sent by the server) */
	KVR_SLOT__MAX = 7,    /* first value that is not a status */
};

/*
 * The answer to a commit or abort of a transfer the server reclaimed at
 * its deadline (kvringd --xfer-ms): a store's reservation was freed and
 * never published, a retrieve's pins were dropped (bytes read through it
 * may have been overwritten since). Distinct from -ENOENT (an id the
 * server never gave this channel) so the worker can say which it was.
 */
#define KVR_ERR_EXPIRED (-ETIME)

/* One slot of an answer (24 bytes). off/len are relative to the pool base. */
struct kvr_slot_desc {
	uint64_t off;
	uint64_t len;
	int32_t status;	   /* enum kvr_slot_status */
	uint32_t reserved; /* 0; retrieve answers to SUMS: KVR_SLOT_F_* */
};
/* In a retrieve answer's slot (asked with KVR_REQ_SUMS): it has a sum. */
#define KVR_SLOT_F_SUM 0x1u
_Static_assert(sizeof(struct kvr_slot_desc) == 24, "ABI: docs/protocol.md");

/* KVR_OP_STATS answer body: a snapshot of the server's global counters. */
struct kvr_stats_wire {
	uint64_t pool_bytes;
	uint64_t used_bytes;
	uint64_t reserved_bytes;
	uint64_t objects;
	uint64_t pins;
	uint64_t leases;
	uint64_t evictions;
	uint64_t workers;
	uint64_t chan_reserved_bytes; /* held by the asking channel */
	uint64_t chan_pins;
	uint64_t chan_leases;
	uint64_t chan_transfers;
};

/* Largest key count any request may carry; the server may set lower. */
#define KVR_MAX_KEYS_LIMIT 4096u

/* Bytes of a request / answer record for n keys / slots. */
static inline size_t kvr_req_bytes(uint32_t op, uint32_t n)
{
	/* Commit ops carry u64 words (sums, offsets); the others keys. */
	size_t each = op == KVR_OP_COMMIT_STORE || op == KVR_OP_COMMIT_RETRIEVE
			  ? sizeof(uint64_t)
			  : sizeof(struct kvr_key);
	size_t b = sizeof(struct kvr_req_hdr) + (size_t)n * each;

	if (op == KVR_OP_PREPARE_STORE)
		b += (size_t)n * sizeof(uint64_t);
	return b;
}

static inline size_t kvr_resp_bytes(uint32_t n)
{
	return sizeof(struct kvr_resp_hdr) +
	       (size_t)n * sizeof(struct kvr_slot_desc);
}

/* Bytes of a retrieve answer for n slots that carries sums (KVR_REQ_SUMS):
 * the u64 sums follow the slots. */
static inline size_t kvr_resp_sums_bytes(uint32_t n)
{
	return kvr_resp_bytes(n) + (size_t)n * sizeof(uint64_t);
}

/*
 * A validated, read-in-place view of one request. Pointers point into the
 * record the caller passed (ring memory or a socket buffer).
 * Danger: when the record lives in shared memory, the peer can still change
 * the bytes after validation. kvr_req_parse() therefore copies the header;
 * keys and sizes are read in place, and the server must treat each key and
 * size as a value read once (a changed key is just another key, a changed
 * size is re-checked where it is used).
 */
struct kvr_req_view {
	uint32_t op;
	struct kvr_req_hdr hdr; /* private copy */
	const struct kvr_key *keys;
	const uint64_t *sizes; /* prepare_store only, else NULL */
	const uint64_t *words; /* commit ops: sums (commit_store + SUMS) or
				  offsets (commit_retrieve + CORRUPT) */
};

/*
 * kvr_req_parse - validate one request record.
 * @type: the ring record type (the op); @rec/@len: the record body.
 * @max_keys: the server's per-request key limit.
 * Return: 0 and *out filled, or
 *   -EBADMSG  unknown op, length does not match count, reserved field set,
 *             unknown flag, a flag the op does not take
 *   -E2BIG    count above max_keys
 * On error *out is untouched.
 */
int kvr_req_parse(uint32_t type, const void *rec, size_t len, uint32_t max_keys,
		  struct kvr_req_view *out);

/*
 * kvr_resp_parse - validate one answer record against what the worker asked.
 * @type/@rec/@len: the record; out_hdr receives a private copy, *slots
 * points into the record. Return 0, or -EBADMSG when the type is not an
 * answer, the length does not match count, or a slot lies outside
 * [0, pool_bytes) (checked overflow-free) — an answer can't point a worker
 * outside the pool.
 */
int kvr_resp_parse(uint32_t type, const void *rec, size_t len,
		   uint64_t pool_bytes, struct kvr_resp_hdr *out_hdr,
		   const struct kvr_slot_desc **slots);

/*
 * kvr_req_encode - write one request record: the inverse of kvr_req_parse().
 * @v: what to send: v->op, v->hdr (req_id, handle, count, flags; reserved
 *     must be 0), v->keys (count entries), v->sizes (prepare_store only).
 * @buf/@cap: where; exactly kvr_req_bytes(op, count) bytes are written, so
 *     a ring claim of that length (or a socket buffer) can be the target.
 * The encoder refuses what kvr_req_parse() would refuse (it shares the same
 * rules), so whatever it writes parses back to an equal view.
 * Return: the record's length in bytes (> 0), or
 *   -EINVAL   unknown op, a flag the op does not take, keys on an op that
 *             takes none, keys with KVR_REQ_BY_LEASE, reserved set, count
 *             above KVR_MAX_KEYS_LIMIT, keys or sizes NULL with count > 0
 *   -EMSGSIZE cap is smaller than the record
 * On error nothing is written.
 */
int kvr_req_encode(const struct kvr_req_view *v, void *buf, size_t cap);

/*
 * A validated view of one answer, the unit kvr_resp_encode() writes and
 * kvr_resp_parse_view() reads. Pointers point into the record (parse) or
 * at the caller's arrays (encode).
 */
struct kvr_resp_view {
	uint32_t op;			    /* the request's op (no RESP_BIT) */
	struct kvr_resp_hdr hdr;	    /* private copy */
	const struct kvr_slot_desc *slots;  /* hdr.count entries, or NULL */
	const struct kvr_stats_wire *stats; /* KVR_OP_STATS only, else NULL */
	const uint64_t *sums; /* a retrieve answer to KVR_REQ_SUMS: count
				 sums after the slots, else NULL */
};

/* Bytes of the answer record to op carrying n slots: a stats answer always
 * carries its kvr_stats_wire body (and no slots), every other answer
 * kvr_resp_bytes(n). */
static inline size_t kvr_resp_record_bytes(uint32_t op, uint32_t n)
{
	if (op == KVR_OP_STATS)
		return sizeof(struct kvr_resp_hdr) +
		       sizeof(struct kvr_stats_wire);
	return kvr_resp_bytes(n);
}

/* Where the slot array of the answer record at rec starts: a producer may
 * fill slots there in place and pass the same pointer as v->slots. */
static inline struct kvr_slot_desc *kvr_resp_slots_at(void *rec)
{
	return (struct kvr_slot_desc *)((char *)rec +
					sizeof(struct kvr_resp_hdr));
}

/*
 * kvr_resp_encode - write one answer record: the inverse of
 * kvr_resp_parse_view(). The record type to send it under is
 * KVR_RESP_BIT | v->op.
 * @v: v->hdr is written as given; v->slots (hdr.count entries) follow with
 *     each slot's reserved field written as 0 (a retrieve with v->sums:
 *     only its KVR_SLOT_F_SUM bit kept, and the sums written after the
 *     slots, kvr_resp_sums_bytes(count) in all); v->slots may be
 *     kvr_resp_slots_at(buf) (filled in place). A stats answer writes
 *     *v->stats, or zeros when v->stats is NULL (an error answer still has
 *     the body's length, so the worker can parse it).
 * @buf/@cap: where; kvr_resp_record_bytes(op, count) bytes are written.
 * Return: the record's length in bytes (> 0), or
 *   -EINVAL   unknown op, slots on a stats answer, count above
 *             KVR_MAX_KEYS_LIMIT, slots NULL with count > 0, a slot status
 *             that is not an enum kvr_slot_status
 *   -EMSGSIZE cap is smaller than the record
 * On error nothing is written. Slot spans are not checked against the
 * pool here (the encoder does not know it); kvr_resp_parse_view() does.
 */
int kvr_resp_encode(const struct kvr_resp_view *v, void *buf, size_t cap);

/*
 * kvr_resp_parse_view - kvr_resp_parse() that also points v->stats at a
 * stats answer's body, and v->sums at a retrieve answer's sums (when its
 * length says it carries them). Same checks, same codes; on error *out is
 * untouched.
 */
int kvr_resp_parse_view(uint32_t type, const void *rec, size_t len,
			uint64_t pool_bytes, struct kvr_resp_view *out);

/* Name of an op for logs and the inspector ("lookup", ...), or "?". */
const char *kvr_op_name(uint32_t op);

/* True when [off, off+len) lies inside a pool of pool_bytes (no overflow). */
static inline bool kvr_span_ok(uint64_t off, uint64_t len, uint64_t pool_bytes)
{
	return len <= pool_bytes && off <= pool_bytes - len;
}

/* ===== Handshake over the Unix socket (always) ===== */

/* Framing on the socket: every message is a kvr_frame followed by len
 * bytes. Under the copy transport the same frames carry requests (type =
 * op), answers (type = KVR_RESP_BIT | op) and, right after a COMMIT_STORE
 * request or a PREPARE_RETRIEVE answer, the payload of each KVR_SLOT_OK slot
 * in order (counted in len). */
struct kvr_frame {
	uint32_t len; /* bytes after this header */
	uint32_t
	    type; /* KVR_FRAME_HELLO, KVR_FRAME_WELCOME, or a record type */
};
#define KVR_FRAME_HELLO	  0x4801u
#define KVR_FRAME_WELCOME 0x5701u
#define KVR_FRAME_BYE	  0x4201u /* either side: orderly close */

/* The model layout a worker registers; fixes the key namespace. */
struct kvr_ns_desc {
	char model[64]; /* NUL-terminated, printable */
	uint32_t layers;
	uint32_t kv_heads;
	uint32_t head_size;
	uint32_t dtype_bytes; /* bytes per element: 1, 2 or 4 */
	uint32_t tp_rank;
	uint32_t tp_size;
	uint32_t chunk_tokens;
	uint32_t reserved; /* must be 0 */
};
_Static_assert(sizeof(struct kvr_ns_desc) == 96, "ABI: docs/protocol.md");

#define KVR_HELLO_WANT_COPY 0x1u /* ask for the copy transport */

struct kvr_hello {
	uint32_t magic;	  /* KVR_PROTO_MAGIC */
	uint32_t version; /* KVR_PROTO_VERSION */
	uint32_t flags;	  /* KVR_HELLO_* */
	int32_t pid;	  /* informational; the server trusts SO_PEERCRED */
	struct kvr_ns_desc ns;
};
_Static_assert(sizeof(struct kvr_hello) == 112, "ABI: docs/protocol.md");

enum kvr_transport {
	KVR_TRANSPORT_SHM = 1, /* pool mapped by the worker (named /dev/shm) */
	KVR_TRANSPORT_MEMFD =
	    2, /* pool mapped by the worker (anonymous memfd) */
	KVR_TRANSPORT_COPY = 3, /* payload over the socket */
};

/*
 * The server's answer. With status 0 it carries, via SCM_RIGHTS, in order:
 * the control segment fd, the request-doorbell eventfd, the
 * response-doorbell eventfd, and (transport SHM or MEMFD) the pool fd.
 * Under the copy transport only the first three. With status < 0, no fds,
 * and reason says why.
 */
struct kvr_welcome {
	uint32_t magic;
	uint32_t version;
	int32_t status;	    /* 0 or -errno */
	uint32_t transport; /* enum kvr_transport */
	uint32_t channel;   /* channel index in the control segment */
	uint32_t ns_id;
	uint64_t pool_bytes;
	uint64_t ctl_bytes;	/* size of the control segment */
	uint64_t channel_bytes; /* size of this channel's block (its own fd) */
	uint32_t align;		/* slot alignment */
	uint32_t max_keys;	/* per-request key limit */
	uint32_t req_ring_cap;	/* bytes */
	uint32_t resp_ring_cap; /* bytes */
	uint32_t heartbeat_ms;	/* server heartbeat period */
	uint32_t lease_ms;
	uint8_t boot_id[16]; /* random per server start */
	char pool_name[64];  /* "" for memfd/private */
	char reason[128];    /* status < 0: what was wrong, what to do */
};
_Static_assert(sizeof(struct kvr_welcome) == 280, "ABI: docs/protocol.md");

/*
 * kvr_hello_init - fill a HELLO: magic, version, @flags (KVR_HELLO_*),
 * @pid and the namespace @ns; everything else zero. The namespace is sent
 * as given: the server's kvr_hello_check() judges it and answers a refusal
 * that says what was wrong.
 */
void kvr_hello_init(struct kvr_hello *h, const struct kvr_ns_desc *ns,
		    uint32_t flags, int32_t pid);

/*
 * kvr_welcome_init - start a WELCOME: zero, then magic, version, @status
 * and @boot_id (16 bytes, may be NULL). A refusal (status < 0) then only
 * needs its reason; an acceptance its geometry and transport.
 */
void kvr_welcome_init(struct kvr_welcome *w, int32_t status,
		      const uint8_t *boot_id);

/*
 * kvr_hello_check / kvr_welcome_check - validate a handshake message
 * received from the peer (len is what arrived). Return 0, -EBADMSG on a
 * short/garbled message, -EPROTO on a magic or version mismatch (the
 * message says both versions when e is given, via kvr_err_set()).
 */
struct kvr_err;
int kvr_hello_check(const void *msg, size_t len, struct kvr_err *e);
int kvr_welcome_check(const void *msg, size_t len, struct kvr_err *e);

#ifdef __cplusplus
}
#endif

#ifdef KVR__UNDEF_STATIC_ASSERT
#undef _Static_assert
#undef KVR__UNDEF_STATIC_ASSERT
#endif

#endif /* KVRING_PROTO_H */
