/* SPDX-License-Identifier: MIT */
/*
 * The copy transport: requests and answers travel as struct kvr_frame
 * messages on the worker's socket instead of through the rings, and so do
 * payload bytes, which the server receives straight into its pool at the
 * slots prepare_store reserved, and sends straight from the slots a
 * prepare_retrieve pinned. Used when the pool cannot be shared (private
 * backend) or when a worker asks for it; slow by design, logged loudly.
 *
 * Framing (docs/protocol.md): a COMMIT_STORE frame is the request record
 * (the 32-byte header, then with KVR_REQ_SUMS one u64 sum per OK slot)
 * followed by the payload of each KVR_SLOT_OK slot of that transfer, in
 * order; its payload must equal exactly what prepare_store reserved, or
 * the worker is cut off. The sums are the worker's, of its own buffers,
 * and go to the store exactly as over the ring (chunk_sum.c); kvringd does not
 * hash what it receives. A PREPARE_RETRIEVE answer frame is the answer record
 * followed by the bytes of each OK slot.
 *
 * One message is sent at a time per connection, with non-blocking sendmsg
 * continued on POLLOUT; while an answer is being sent no further request is
 * read, so the slots being sent stay pinned (the worker's commit_retrieve
 * waits in the socket) and a worker that never reads stalls only itself.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <kvring/error.h>

#include "chan.h"
#include "tport_sock.h"
#include "disp.h"
#include "uring.h"

static void copy_fini(struct kvr_srv *s, struct kvr_conn *c);

static int copy_init(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_copy *cp = calloc(1, sizeof(*cp));

	if (!cp)
		return -ENOMEM;
	cp->body_cap = kvr_req_bytes(KVR_OP_PREPARE_STORE, s->max_keys);
	cp->body = malloc(cp->body_cap);
	cp->tx_cap = sizeof(struct kvr_frame) + s->ans_cap;
	cp->tx = malloc(cp->tx_cap);
	cp->iov_cap = 1 + s->max_keys;
	cp->iov = calloc(cp->iov_cap, sizeof(*cp->iov));
	cp->nxf = KVR_STORE_DEF_MAX_XFERS;
	cp->xf = calloc(cp->nxf, sizeof(*cp->xf));
	c->cp = cp;
	if (!cp->body || !cp->tx || !cp->iov || !cp->xf) {
		copy_fini(s, c);
		return -ENOMEM;
	}
	return 0;
}

/* Its POLLOUT (if armed) removed, its buffers and transfers freed. */
static void copy_fini(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_copy *cp = c->cp;

	if (!cp)
		return;
	if (cp->tx_wait && s->ring_ok)
		kvr__uring_cancel(
		    s, kvr_tag_make(KVR_TAG_SOCK_OUT, c->idx, c->gen));
	for (uint32_t i = 0; cp->xf && i < cp->nxf; i++)
		free(cp->xf[i].slots);
	free(cp->xf);
	free(cp->iov);
	free(cp->tx);
	free(cp->body);
	free(cp);
	c->cp = NULL;
}

/* The table holds at most the store's per-channel transfer limit, so a
 * linear scan is a handful of compares; id 0 never matches. */
static struct kvr_cp_xfer *xf_find(struct kvr_copy *cp, uint64_t id)
{
	for (uint32_t i = 0; id && i < cp->nxf; i++)
		if (cp->xf[i].id == id)
			return &cp->xf[i];
	return NULL;
}

static void xf_drop(struct kvr_cp_xfer *x)
{
	if (!x)
		return;
	free(x->slots);
	memset(x, 0, sizeof(*x));
}

/* Remember where a copy store transfer's payload goes. */
static int xf_add(struct kvr_copy *cp, uint64_t id,
		  const struct kvr_slot_desc *sl, uint32_t n)
{
	struct kvr_cp_xfer *x = NULL;
	uint32_t k = 0;

	for (uint32_t i = 0; !x && i < cp->nxf; i++)
		if (cp->xf[i].id == 0)
			x = &cp->xf[i];
	if (!x)
		return -EBUSY;
	x->slots = malloc((n ? n : 1) * sizeof(*x->slots));
	if (!x->slots)
		return -ENOMEM;
	x->total = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (sl[i].status != KVR_SLOT_OK)
			continue;
		x->slots[k++] = sl[i];
		x->total += sl[i].len;
	}
	x->n = k;
	x->id = id;
	return 0;
}

/* Send what is queued; arm POLLOUT when the socket is full.
 * Return 1 when everything went, 0 when waiting, or -errno. */
static int tx_push(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_copy *cp = c->cp;
	struct msghdr m = {0};
	ssize_t n;

	while (cp->iov_pos < cp->niov) {
		m.msg_iov = &cp->iov[cp->iov_pos];
		m.msg_iovlen = cp->niov - cp->iov_pos;
		if (m.msg_iovlen > IOV_MAX)
			m.msg_iovlen = IOV_MAX;
		n = sendmsg(c->sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			cp->tx_wait = true;
			cp->tx_since_ns = s->now_ns;
			kvr__uring_poll(
			    s, c->sock, POLLOUT,
			    kvr_tag_make(KVR_TAG_SOCK_OUT, c->idx, c->gen),
			    false);
			return 0;
		}
		/* Advance over what went; a partial iov is trimmed in place. */
		while (n > 0) {
			struct iovec *v = &cp->iov[cp->iov_pos];

			if ((size_t)n < v->iov_len) {
				v->iov_base = (char *)v->iov_base + n;
				v->iov_len -= (size_t)n;
				n = 0;
			} else {
				n -= (ssize_t)v->iov_len;
				cp->iov_pos++;
			}
		}
	}
	cp->niov = cp->iov_pos = 0;
	return 1;
}

/* Queue the answer in s->ans (and the slots' bytes for a retrieve). */
static void queue_answer(struct kvr_srv *s, struct kvr_conn *c, uint32_t type,
			 size_t len)
{
	struct kvr_copy *cp = c->cp;
	const struct kvr_resp_hdr *r = (const void *)s->ans;
	const struct kvr_slot_desc *sl = (const void *)(r + 1);
	struct kvr_frame f = {.type = type};
	uint64_t payload = 0;

	cp->niov = 1;
	cp->iov_pos = 0;
	if (type == (KVR_RESP_BIT | KVR_OP_PREPARE_RETRIEVE) && r->status == 0)
		for (uint32_t i = 0; i < r->count; i++) {
			if (sl[i].status != KVR_SLOT_OK || !sl[i].len)
				continue;
			cp->iov[cp->niov].iov_base =
			    (char *)s->pool.base + sl[i].off;
			cp->iov[cp->niov++].iov_len = sl[i].len;
			payload += sl[i].len;
		}
	f.len = (uint32_t)(len + payload);
	memcpy(cp->tx, &f, sizeof(f));
	memcpy(cp->tx + sizeof(f), s->ans, len);
	cp->iov[0].iov_base = cp->tx;
	cp->iov[0].iov_len = sizeof(f) + len;
	c->bytes_out += payload;
}

/* Run the request in cp->body and queue its answer. */
static void run(struct kvr_srv *s, struct kvr_conn *c,
		const struct kvr_req_view *v)
{
	struct kvr_copy *cp = c->cp;
	const struct kvr_resp_hdr *r = (const struct kvr_resp_hdr *)s->ans;
	uint32_t type;
	size_t len = kvr__disp_exec(s, c, v, &type);
	int xrc;

	if (v->op == KVR_OP_PREPARE_STORE && r->status == 0 && r->handle &&
	    (xrc = xf_add(cp, r->handle, kvr_resp_slots_at(s->ans), r->count)) <
		0) {
		/* Cannot track where its payload goes: give it back, and say
		 * why (-EBUSY: too many open stores, -ENOMEM: no memory). */
		struct kvr_resp_view rv = {.op = v->op, .hdr = *r};

		(void)kvr_store_abort_store(s->store, (uint32_t)c->chan,
					    r->handle, s->now_ns);
		rv.hdr.status = xrc;
		rv.hdr.handle = 0;
		rv.hdr.count = 0;
		xrc = kvr_resp_encode(&rv, s->ans, s->ans_cap);
		kvr_assert(xrc > 0); /* a header-only answer always fits */
		len = (size_t)xrc;
	}
	if ((v->op == KVR_OP_COMMIT_STORE || v->op == KVR_OP_ABORT_STORE) &&
	    (r->status == 0 || r->status == -ENOENT ||
	     r->status == KVR_ERR_EXPIRED))
		xf_drop(xf_find(cp, v->hdr.handle));
	queue_answer(s, c, type, len);
}

/* recv() into @buf; 1 got everything, 0 try later, <0 closed. */
static int rx(struct kvr_srv *s, struct kvr_conn *c, void *buf, size_t want,
	      size_t *got)
{
	ssize_t n;

	while (*got < want) {
		n = recv(c->sock, (char *)buf + *got, want - *got,
			 MSG_DONTWAIT);
		if (n > 0) {
			*got += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		kvr__chan_close(
		    s, c, n == 0 ? "socket hang-up" : strerror(errno), false);
		return -1;
	}
	return 1;
}

/*
 * The request record's length within the current frame: the whole frame,
 * except for a commit_store, whose payload follows its record. That one
 * is its 32-byte header and, once the header is in and names KVR_REQ_SUMS,
 * the count words it announces. A count the frame (or max_keys) cannot
 * hold leaves the record at 32 bytes, which kvr_req_parse() then refuses,
 * so a lying header never makes us read past its frame.
 */
static size_t body_bytes(const struct kvr_srv *s, const struct kvr_copy *cp)
{
	struct kvr_req_hdr h;
	size_t b;

	if (cp->fr.type != KVR_OP_COMMIT_STORE)
		return cp->fr.len;
	if (cp->got < sizeof(h))
		return sizeof(h);
	memcpy(&h, cp->body, sizeof(h));
	if (!(h.flags & KVR_REQ_SUMS) || h.count == 0 || h.count > s->max_keys)
		return sizeof(h);
	b = kvr_req_bytes(KVR_OP_COMMIT_STORE, h.count);
	return b <= cp->fr.len ? b : sizeof(h);
}

/* A frame header arrived: check it and pick the body length. */
static int on_frame(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_copy *cp = c->cp;
	uint32_t t = cp->fr.type;

	if (t == KVR_FRAME_BYE && cp->fr.len == 0) {
		kvr__chan_close(s, c, "worker said bye", false);
		return -1;
	}
	if (t == 0 || t >= KVR_OP__MAX) {
		kvr__chan_proto_error(s, c,
				      "copy transport: unknown frame "
				      "type 0x%x",
				      t);
		return -1;
	}
	if (t == KVR_OP_COMMIT_STORE ? cp->fr.len < sizeof(struct kvr_req_hdr)
				     : cp->fr.len > cp->body_cap) {
		kvr__chan_proto_error(s, c,
				      "copy transport: %s frame of %u "
				      "bytes",
				      kvr_op_name(t), cp->fr.len);
		return -1;
	}
	cp->rx = KVR_CP_RX_BODY;
	cp->got = 0;
	return 0;
}

/* The request record arrived: run it or start receiving its payload. */
static int on_body(struct kvr_srv *s, struct kvr_conn *c, size_t blen)
{
	struct kvr_copy *cp = c->cp;
	struct kvr_req_view v;
	uint64_t expect;
	int rc;

	rc = kvr_req_parse(cp->fr.type, cp->body, blen, s->max_keys, &v);
	if (rc < 0) {
		kvr__chan_proto_error(s, c,
				      "malformed %s request (%zu bytes): "
				      "%s",
				      kvr_op_name(cp->fr.type), blen,
				      kvr_strerror(rc));
		return -1;
	}
	if (v.op == KVR_OP_COMMIT_STORE) {
		cp->px = xf_find(cp, v.hdr.handle);
		expect = cp->px ? cp->px->total : 0;
		if (cp->fr.len - blen != expect) {
			kvr__chan_proto_error(s, c,
					      "commit_store of transfer %llu "
					      "carries %zu payload bytes, %llu "
					      "reserved",
					      (unsigned long long)v.hdr.handle,
					      cp->fr.len - blen,
					      (unsigned long long)expect);
			return -1;
		}
		if (expect) {
			cp->rx = KVR_CP_RX_PAYLOAD;
			cp->pslot = 0;
			cp->poff = 0;
			return 0;
		}
	}
	run(s, c, &v);
	cp->rx = KVR_CP_RX_FRAME;
	cp->got = 0;
	return 0;
}

/* Read @want bytes (of which *got came already) and throw them away. */
static int rx_discard(struct kvr_srv *s, struct kvr_conn *c, size_t want,
		      size_t *got)
{
	char buf[4096];

	while (*got < want) {
		size_t part = want - *got, g = 0;
		int rc;

		if (part > sizeof(buf))
			part = sizeof(buf);
		rc = rx(s, c, buf, part, &g);
		*got += g;
		if (rc <= 0)
			return rc;
	}
	return 1;
}

/* Receive payload straight into the reserved slots of cp->px.
 * Return 1 when the commit ran, 0 to wait for more bytes, -1 closed. */
static int on_payload(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_copy *cp = c->cp;
	struct kvr_req_view v;
	int rc;

	while (cp->pslot < cp->px->n) {
		const struct kvr_slot_desc *sl = &cp->px->slots[cp->pslot];
		size_t got = (size_t)cp->poff;

		/* Checked before every read: the transfer's deadline may
		 * have reclaimed it (kvr_store_expire), and its slots may
		 * be another transfer's now. Its bytes then go nowhere;
		 * the commit below answers KVR_ERR_EXPIRED. */
		if (kvr_store_check_store(s->store, (uint32_t)c->chan,
					  cp->px->id) == 0)
			rc = rx(s, c, (char *)s->pool.base + sl->off, sl->len,
				&got);
		else
			rc = rx_discard(s, c, sl->len, &got);
		c->bytes_in += got - cp->poff;
		cp->poff = got;
		if (rc <= 0)
			return rc < 0 ? -1 : 0;
		cp->pslot++;
		cp->poff = 0;
	}
	/* All bytes are in: the record (private buffer, cp->got bytes of
	 * it as on_body() parsed it) was valid. */
	if (kvr_req_parse(KVR_OP_COMMIT_STORE, cp->body, body_bytes(s, cp),
			  s->max_keys, &v) < 0)
		return -1;
	run(s, c, &v);
	cp->rx = KVR_CP_RX_FRAME;
	cp->got = 0;
	return 1;
}

/*
 * Drive the receive state machine until the socket is empty, an answer is
 * queued and cannot be sent yet, or the connection is gone. The generation
 * check ends the loop when a handler closed (and maybe reused) the slot.
 */
static void copy_readable(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_copy *cp = c->cp;
	uint32_t gen = c->gen;
	size_t blen;
	int rc;

	/* Stop at a queued answer: it must go before the next request. */
	while (c->gen == gen && c->state == KVR_CONN_ACTIVE && !cp->niov) {
		switch (cp->rx) {
		case KVR_CP_RX_FRAME:
			rc = rx(s, c, &cp->fr, sizeof(cp->fr), &cp->got);
			if (rc > 0)
				rc = on_frame(s, c) < 0 ? -1 : 1;
			break;
		case KVR_CP_RX_BODY:
			blen = body_bytes(s, cp);
			rc = rx(s, c, cp->body, blen, &cp->got);
			/* A commit_store's header may name sums: read them
			 * before the record is complete. */
			if (rc > 0 && body_bytes(s, cp) != blen)
				break;
			if (rc > 0)
				rc = on_body(s, c, blen) < 0 ? -1 : 1;
			break;
		default:
			rc = on_payload(s, c);
			break;
		}
		if (rc <= 0)
			return;
		if (cp->niov) {
			kvr__chan_counters(s, c);
			rc = tx_push(s, c);
			if (rc < 0) {
				kvr__chan_close(s, c, kvr_strerror(rc), false);
				return;
			}
		}
	}
}

static void copy_writable(struct kvr_srv *s, struct kvr_conn *c)
{
	int rc;

	c->cp->tx_wait = false;
	rc = tx_push(s, c);
	if (rc < 0) {
		kvr__chan_close(s, c, kvr_strerror(rc), false);
		return;
	}
	if (rc > 0)
		copy_readable(s, c); /* data may wait without a wake-up */
}

/* Nothing to do once active: the socket's POLLIN is armed since accept. */
static void copy_start(struct kvr_srv *s, struct kvr_conn *c)
{
	(void)s;
	(void)c;
}

/* A send has waited for room in the socket for too long. */
static bool copy_stalled(const struct kvr_conn *c, uint64_t now_ns,
			 uint64_t stall_ns)
{
	return c->cp->tx_wait && now_ns - c->cp->tx_since_ns > stall_ns;
}

/* Nothing is queued: every frame is answered as it is read. */
static void copy_shutdown(struct kvr_srv *s, struct kvr_conn *c)
{
	(void)s;
	(void)c;
}

const struct kvr_conn_ops kvr__tport_sock_ops = {
    .init = copy_init,
    .start = copy_start,
    .readable = copy_readable,
    .writable = copy_writable,
    .stalled = copy_stalled,
    .shutdown = copy_shutdown,
    .fini = copy_fini,
    .late_answers = false,
};
