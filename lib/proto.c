/* SPDX-License-Identifier: MIT */
/*
 * The one encoder and the one decoder of every protocol message, side by
 * side so they cannot drift: a request's rules live in req_hdr_check(),
 * which the encoder and kvr_req_parse() both call.
 *
 * Decoding validates what a peer sent: every length, count, flag and
 * reserved field is checked before anything else reads the message, and a
 * failure leaves the caller's output untouched. The server runs
 * kvr_req_parse() on every request, the worker kvr_resp_parse() on every
 * answer, and both sides the handshake checks. Encoding writes a record
 * into memory the caller gives (a claimed ring record or a socket buffer)
 * and refuses a message the decoder would refuse. This file does not move
 * bytes (rings/, the socket code) and does not decide answers (server/).
 */
#include <errno.h>
#include <string.h>

#include <kvring/error.h>
#include <kvring/proto.h>

/* Which flags each op may carry; anything else is a protocol error. */
static const uint32_t op_flags[KVR_OP__MAX] = {
    [KVR_OP_LOOKUP] = KVR_REQ_PIN | KVR_REQ_L2,
    [KVR_OP_PREPARE_STORE] = KVR_REQ_BIND,
    [KVR_OP_PREPARE_RETRIEVE] = KVR_REQ_BY_LEASE | KVR_REQ_SUMS,
    [KVR_OP_COMMIT_STORE] = KVR_REQ_SUMS | KVR_REQ_BIND | KVR_REQ_STAGE,
    [KVR_OP_COMMIT_RETRIEVE] = KVR_REQ_CORRUPT,
};

/* Ops whose request carries keys (count may be > 0). */
static bool op_has_keys(uint32_t op)
{
	return op == KVR_OP_LOOKUP || op == KVR_OP_PREPARE_STORE ||
	       op == KVR_OP_PREPARE_RETRIEVE;
}

/* A commit whose flag says u64 words follow (sums or offsets): then
 * count >= 1, and count 0 without the flag. */
static bool op_has_words(uint32_t op, uint32_t flags)
{
	return (op == KVR_OP_COMMIT_STORE &&
		(flags & (KVR_REQ_SUMS | KVR_REQ_BIND))) ||
	       (op == KVR_OP_COMMIT_RETRIEVE && (flags & KVR_REQ_CORRUPT));
}

/*
 * The rules of a request header for op (already known to be a valid op),
 * shared by the decoder and the encoder. Return 0, -EBADMSG (reserved set,
 * a flag the op does not take, keys where none belong, a checksum flag
 * without words) or -E2BIG (count above max_keys or the protocol's limit).
 */
static int req_hdr_check(uint32_t op, const struct kvr_req_hdr *h,
			 uint32_t max_keys)
{
	if (h->reserved != 0 || (h->flags & ~op_flags[op]) != 0)
		return -EBADMSG;
	if (!op_has_keys(op) && !op_has_words(op, h->flags) && h->count != 0)
		return -EBADMSG;
	if (op_has_words(op, h->flags) && h->count == 0)
		return -EBADMSG;
	if (h->count > max_keys || h->count > KVR_MAX_KEYS_LIMIT)
		return -E2BIG;
	if (op == KVR_OP_PREPARE_RETRIEVE && (h->flags & KVR_REQ_BY_LEASE) &&
	    h->count != 0)
		return -EBADMSG;
	/* An early bind (prepare_store + BIND) names one key and size. */
	if (op == KVR_OP_PREPARE_STORE && (h->flags & KVR_REQ_BIND) &&
	    h->count != 1)
		return -EBADMSG;
	/* A bind names one key and size, and with SUMS its one sum. */
	if (op == KVR_OP_COMMIT_STORE && (h->flags & KVR_REQ_BIND) &&
	    h->count != KVR_BIND_WORDS + ((h->flags & KVR_REQ_SUMS) ? 1u : 0u))
		return -EBADMSG;
	return 0;
}

int kvr_req_parse(uint32_t type, const void *rec, size_t len, uint32_t max_keys,
		  struct kvr_req_view *out)
{
	struct kvr_req_hdr h;
	const char *p = rec;
	int rc;

	if (type == 0 || type >= KVR_OP__MAX || !rec)
		return -EBADMSG;
	if (len < sizeof(h))
		return -EBADMSG;
	/* One copy of the header: the peer may rewrite shared memory while
	 * we look, so every later decision uses this private copy. */
	memcpy(&h, rec, sizeof(h));
	rc = req_hdr_check(type, &h, max_keys);
	if (rc < 0)
		return rc;
	if (len != kvr_req_bytes(type, h.count))
		return -EBADMSG;

	out->op = type;
	out->hdr = h;
	out->keys = h.count && op_has_keys(type)
			? (const struct kvr_key *)(p + sizeof(h))
			: NULL;
	out->words = op_has_words(type, h.flags)
			 ? (const uint64_t *)(p + sizeof(h))
			 : NULL;
	out->sizes = type == KVR_OP_PREPARE_STORE && h.count
			 ? (const uint64_t *)(p + sizeof(h) +
					      h.count * sizeof(struct kvr_key))
			 : NULL;
	return 0;
}

int kvr_resp_parse(uint32_t type, const void *rec, size_t len,
		   uint64_t pool_bytes, struct kvr_resp_hdr *out_hdr,
		   const struct kvr_slot_desc **slots)
{
	struct kvr_resp_hdr h;
	const struct kvr_slot_desc *s;
	uint32_t op = type & ~KVR_RESP_BIT;

	if (!(type & KVR_RESP_BIT) || op == 0 || op >= KVR_OP__MAX || !rec)
		return -EBADMSG;
	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, rec, sizeof(h));
	if (op == KVR_OP_STATS) {
		if (h.count != 0 ||
		    len != sizeof(h) + sizeof(struct kvr_stats_wire))
			return -EBADMSG;
	} else if (len != kvr_resp_bytes(h.count) &&
		   (op != KVR_OP_PREPARE_RETRIEVE ||
		    len != kvr_resp_sums_bytes(h.count))) {
		/* Only a retrieve answer may carry sums after its slots. */
		return -EBADMSG;
	}
	s = (const struct kvr_slot_desc *)((const char *)rec + sizeof(h));
	for (uint32_t i = 0; i < h.count; i++) {
		if (s[i].status == KVR_SLOT_OK &&
		    !kvr_span_ok(s[i].off, s[i].len, pool_bytes))
			return -EBADMSG;
		if (s[i].status < KVR_SLOT_OK || s[i].status >= KVR_SLOT__MAX)
			return -EBADMSG;
	}
	*out_hdr = h;
	if (slots)
		*slots = h.count ? s : NULL;
	return 0;
}

int kvr_req_encode(const struct kvr_req_view *v, void *buf, size_t cap)
{
	char *p = buf;
	uint32_t n;
	size_t len, kb;

	if (!v || !buf || v->op == 0 || v->op >= KVR_OP__MAX)
		return -EINVAL;
	n = v->hdr.count;
	/* Same rules as the decoder, so an encoded record always parses. */
	if (req_hdr_check(v->op, &v->hdr, KVR_MAX_KEYS_LIMIT) < 0)
		return -EINVAL;
	if (op_has_words(v->op, v->hdr.flags)) {
		/* A commit's checksum words (sums or offsets). */
		if (!v->words)
			return -EINVAL;
	} else if (n &&
		   (!v->keys || (v->op == KVR_OP_PREPARE_STORE && !v->sizes))) {
		return -EINVAL;
	}
	len = kvr_req_bytes(v->op, n);
	if (cap < len)
		return -EMSGSIZE;
	kb = (size_t)n * sizeof(struct kvr_key);
	memcpy(p, &v->hdr, sizeof(v->hdr));
	if (n && op_has_words(v->op, v->hdr.flags))
		memcpy(p + sizeof(v->hdr), v->words,
		       (size_t)n * sizeof(uint64_t));
	else if (n)
		memcpy(p + sizeof(v->hdr), v->keys, kb);
	if (v->op == KVR_OP_PREPARE_STORE && n)
		memcpy(p + sizeof(v->hdr) + kb, v->sizes,
		       (size_t)n * sizeof(uint64_t));
	return (int)len; /* at most 32 + 4096 * 24 bytes */
}

int kvr_resp_encode(const struct kvr_resp_view *v, void *buf, size_t cap)
{
	struct kvr_slot_desc *d;
	uint32_t n;
	size_t len;
	bool sums;

	if (!v || !buf || v->op == 0 || v->op >= KVR_OP__MAX)
		return -EINVAL;
	n = v->hdr.count;
	if (n > KVR_MAX_KEYS_LIMIT || (n && !v->slots) ||
	    (v->op == KVR_OP_STATS && n != 0))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (v->slots[i].status < KVR_SLOT_OK ||
		    v->slots[i].status >= KVR_SLOT__MAX)
			return -EINVAL;
	sums = v->sums && v->op == KVR_OP_PREPARE_RETRIEVE;
	if (v->sums && !sums)
		return -EINVAL; /* only a retrieve answer carries sums */
	len = sums ? kvr_resp_sums_bytes(n) : kvr_resp_record_bytes(v->op, n);
	if (cap < len)
		return -EMSGSIZE;
	/* Slots first: they may already sit in place at buf + 32, and the
	 * header write must not come before they are read. Element by
	 * element, so in place (d == v->slots) is well defined. */
	d = kvr_resp_slots_at(buf);
	for (uint32_t i = 0; i < n; i++) {
		struct kvr_slot_desc sd = v->slots[i];

		sd.reserved = sums ? sd.reserved & KVR_SLOT_F_SUM : 0;
		d[i] = sd;
	}
	if (sums && n)
		memmove(d + n, v->sums, (size_t)n * sizeof(uint64_t));
	memcpy(buf, &v->hdr, sizeof(v->hdr));
	if (v->op == KVR_OP_STATS) {
		if (v->stats && (const void *)v->stats != (const void *)d)
			memcpy(d, v->stats, sizeof(*v->stats));
		else if (!v->stats)
			memset(d, 0, sizeof(struct kvr_stats_wire));
	}
	return (int)len;
}

int kvr_resp_parse_view(uint32_t type, const void *rec, size_t len,
			uint64_t pool_bytes, struct kvr_resp_view *out)
{
	struct kvr_resp_hdr h;
	const struct kvr_slot_desc *s = NULL;
	uint32_t op = type & ~KVR_RESP_BIT;
	int rc;

	rc = kvr_resp_parse(type, rec, len, pool_bytes, &h, &s);
	if (rc < 0)
		return rc;
	out->op = op;
	out->hdr = h;
	out->slots = s;
	out->stats =
	    op == KVR_OP_STATS
		? (const struct kvr_stats_wire *)((const char *)rec + sizeof(h))
		: NULL;
	/* kvr_resp_parse accepted this length only for a retrieve. */
	out->sums = h.count && len == kvr_resp_sums_bytes(h.count) &&
			    op == KVR_OP_PREPARE_RETRIEVE
			? (const uint64_t *)((const char *)rec +
					     kvr_resp_bytes(h.count))
			: NULL;
	return 0;
}

const char *kvr_op_name(uint32_t op)
{
	static const char *const names[KVR_OP__MAX] = {
	    [KVR_OP_LOOKUP] = "lookup",
	    [KVR_OP_RELEASE] = "release",
	    [KVR_OP_PREPARE_STORE] = "prepare_store",
	    [KVR_OP_COMMIT_STORE] = "commit_store",
	    [KVR_OP_ABORT_STORE] = "abort_store",
	    [KVR_OP_PREPARE_RETRIEVE] = "prepare_retrieve",
	    [KVR_OP_COMMIT_RETRIEVE] = "commit_retrieve",
	    [KVR_OP_PING] = "ping",
	    [KVR_OP_STATS] = "stats",
	};

	op &= ~KVR_RESP_BIT;
	if (op == 0 || op >= KVR_OP__MAX)
		return "?";
	return names[op];
}

/* Common magic/version check for both handshake directions. */
static int check_magic_version(uint32_t magic, uint32_t version,
			       const char *what, struct kvr_err *e)
{
	if (magic != KVR_PROTO_MAGIC) {
		kvr_err_set(e, -EPROTO,
			    "%s: bad magic 0x%08x, expected 0x%08x: the peer "
			    "is not a kvring %s",
			    what, magic, KVR_PROTO_MAGIC,
			    strcmp(what, "hello") == 0 ? "worker" : "server");
		return -EPROTO;
	}
	if (version != KVR_PROTO_VERSION) {
		kvr_err_set(e, -EPROTO,
			    "%s: protocol version %u, expected %u: upgrade the "
			    "older of libkvring and kvringd",
			    what, version, KVR_PROTO_VERSION);
		return -EPROTO;
	}
	return 0;
}

void kvr_hello_init(struct kvr_hello *h, const struct kvr_ns_desc *ns,
		    uint32_t flags, int32_t pid)
{
	memset(h, 0, sizeof(*h));
	h->magic = KVR_PROTO_MAGIC;
	h->version = KVR_PROTO_VERSION;
	h->flags = flags;
	h->pid = pid;
	if (ns)
		h->ns = *ns;
}

void kvr_welcome_init(struct kvr_welcome *w, int32_t status,
		      const uint8_t *boot_id)
{
	memset(w, 0, sizeof(*w));
	w->magic = KVR_PROTO_MAGIC;
	w->version = KVR_PROTO_VERSION;
	w->status = status;
	if (boot_id)
		memcpy(w->boot_id, boot_id, sizeof(w->boot_id));
}

int kvr_hello_check(const void *msg, size_t len, struct kvr_err *e)
{
	struct kvr_hello h;
	size_t mlen;

	if (!msg || len != sizeof(h)) {
		kvr_err_set(e, -EBADMSG, "hello: %zu bytes, expected %zu", len,
			    sizeof(h));
		return -EBADMSG;
	}
	memcpy(&h, msg, sizeof(h));
	if (check_magic_version(h.magic, h.version, "hello", e) < 0)
		return -EPROTO;
	if (h.flags & ~KVR_HELLO_WANT_COPY) {
		kvr_err_set(e, -EBADMSG, "hello: unknown flags 0x%x", h.flags);
		return -EBADMSG;
	}
	mlen = strnlen(h.ns.model, sizeof(h.ns.model));
	if (mlen == 0 || mlen == sizeof(h.ns.model)) {
		kvr_err_set(e, -EBADMSG,
			    "hello: model name empty or not terminated within "
			    "%zu bytes",
			    sizeof(h.ns.model));
		return -EBADMSG;
	}
	for (size_t i = 0; i < mlen; i++) {
		unsigned char c = (unsigned char)h.ns.model[i];

		if (c < 0x20 || c > 0x7e) {
			kvr_err_set(e, -EBADMSG,
				    "hello: model name has byte 0x%02x at %zu; "
				    "use printable ASCII",
				    c, i);
			return -EBADMSG;
		}
	}
	if (h.ns.chunk_tokens == 0 || h.ns.reserved != 0 || h.ns.tp_size == 0 ||
	    h.ns.tp_rank >= h.ns.tp_size) {
		kvr_err_set(e, -EBADMSG,
			    "hello: bad layout (chunk_tokens %u, tp_rank %u of "
			    "tp_size %u, reserved %u)",
			    h.ns.chunk_tokens, h.ns.tp_rank, h.ns.tp_size,
			    h.ns.reserved);
		return -EBADMSG;
	}
	return 0;
}

int kvr_welcome_check(const void *msg, size_t len, struct kvr_err *e)
{
	struct kvr_welcome w;

	if (!msg || len != sizeof(w)) {
		kvr_err_set(e, -EBADMSG, "welcome: %zu bytes, expected %zu",
			    len, sizeof(w));
		return -EBADMSG;
	}
	memcpy(&w, msg, sizeof(w));
	if (check_magic_version(w.magic, w.version, "welcome", e) < 0)
		return -EPROTO;
	if (w.reason[sizeof(w.reason) - 1] != '\0' ||
	    w.pool_name[sizeof(w.pool_name) - 1] != '\0') {
		kvr_err_set(e, -EBADMSG, "welcome: unterminated string");
		return -EBADMSG;
	}
	if (w.status < 0)
		return 0; /* a refusal: the caller reports w.reason */
	if (w.transport < KVR_TRANSPORT_SHM ||
	    w.transport > KVR_TRANSPORT_COPY || w.max_keys == 0 ||
	    w.max_keys > KVR_MAX_KEYS_LIMIT || w.align < 64 ||
	    (w.align & (w.align - 1)) != 0 || w.pool_bytes == 0) {
		kvr_err_set(e, -EBADMSG,
			    "welcome: bad geometry (transport %u, max_keys %u, "
			    "align %u, pool %llu bytes)",
			    w.transport, w.max_keys, w.align,
			    (unsigned long long)w.pool_bytes);
		return -EBADMSG;
	}
	return 0;
}
