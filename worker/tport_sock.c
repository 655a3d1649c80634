/* SPDX-License-Identifier: MIT */
/*
 * tport_sock.c - the socket transport (the "copy transport" of DESIGN):
 * every request and answer travels as a frame (struct kvr_frame + record
 * bytes) on the Unix socket, followed by the payload of a COMMIT_STORE
 * request or a PREPARE_RETRIEVE answer, and a transfer's slots are private
 * buffers: one malloc'd arena per transfer (kvr_xfer.priv), each OK slot
 * 64-byte aligned in it. It fills in the operations table kvr__tport_sock;
 * conn.c picks it once, at connect, when no pool can be shared.
 *
 * Also the bounded socket I/O both transports use: the hello frame
 * (kvr__tport_sock_frame) and the BYE / EOF that ends a connection under
 * the ring transport too (kvr__tport_sock_read_bye).
 *
 * Every read and write is non-blocking plus poll(2) with KVR_SLICE_MS
 * slices, so the liveness checks of wait.c run while bytes move, and the
 * deadline (the client timeout) restarts whenever bytes move, so a 512 MiB
 * payload is bounded by progress, not by size. While a send waits for
 * room, the answers kvringd sends us are read, so two full socket buffers
 * can't deadlock. A stream error in the middle of a frame breaks the
 * client: the stream can't be resynchronised. This file does not decide
 * what answers mean (answer.c) or which requests to send (submit.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <kvring/error.h>

#include "client.h"

#define SLOT_ALIGN 64u

/* Sum of the OK slots' lengths of a transfer: the payload that follows
 * its COMMIT_STORE request. */
static uint64_t ok_bytes(const struct kvr_xfer *x)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < x->nslots; i++)
		if (x->slots[i].status == KVR_SLOT_OK)
			sum += x->slots[i].len;
	return sum;
}

/* One arena for every OK slot of @x, each 64-byte aligned, behind @room
 * bytes kept for a retrieve's checksums (kvr__client_sum_room); it becomes
 * x->priv, which kvr_xfer_free() frees (NULL when there is no room and no
 * slot is OK or has bytes). Return 0 or -ENOMEM (@x untouched). */
static int arena_alloc(struct kvr_xfer *x, size_t room)
{
	uint64_t total = room, off = room;
	char *arena = NULL;

	for (uint32_t i = 0; i < x->nslots; i++)
		if (x->slots[i].status == KVR_SLOT_OK)
			total += (x->slots[i].len + SLOT_ALIGN - 1) &
				 ~(uint64_t)(SLOT_ALIGN - 1);
	if (total) {
		if (total > SIZE_MAX)
			return -ENOMEM;
		arena = aligned_alloc(SLOT_ALIGN, (size_t)total);
		if (!arena)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < x->nslots; i++) {
		if (x->slots[i].status != KVR_SLOT_OK)
			continue;
		/* No arena when every OK slot is empty: no pointer either. */
		x->slots[i].ptr = arena ? arena + off : NULL;
		off += (x->slots[i].len + SLOT_ALIGN - 1) &
		       ~(uint64_t)(SLOT_ALIGN - 1);
	}
	/* The sums' room starts zeroed: no slot has a kept sum yet. */
	if (room)
		memset(arena, 0, room);
	x->priv = arena;
	return 0;
}

static int read_frame(struct kvr_client *c);

static uint64_t deadline_from_now(const struct kvr_client *c)
{
	return kvr_clock_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
}

/* Wait for the socket to become ready for @ev, one slice at most, with the
 * liveness checks. With @answers, while a send waits, frames the server
 * sent us are read, so two full socket buffers can't deadlock us (never
 * in the middle of reading one: a frame is read whole). */
static int sock_poll(struct kvr_client *c, short ev, uint64_t deadline,
		     bool answers)
{
	struct pollfd p = {c->sock, (short)(ev | POLLRDHUP), 0};
	uint64_t now = kvr_clock_now_ns();
	int rc;

	if (now >= deadline)
		return kvr__client_break(
		    c, -ETIMEDOUT,
		    "kvringd moved no bytes on the socket for "
		    "%u ms",
		    c->timeout_ms);
	if (ev == POLLOUT && answers && !c->reading)
		p.events |= POLLIN;
	rc = poll(&p, 1, KVR_SLICE_MS);
	if (rc < 0 && errno != EINTR)
		return kvr__client_break(c, -EIO, "poll socket: %s",
					 kvr_strerror(-errno));
	if (rc > 0 && ev == POLLOUT && (p.revents & POLLIN)) {
		rc = read_frame(c);
		if (rc < 0)
			return rc;
	}
	return kvr__client_alive(c);
}

/*
 * Move exactly @n bytes: from @out to the socket, or from the socket into
 * @in (exactly one of them is non-NULL), bounded by the client timeout
 * (reset by progress) and the server's liveness. @answers: see sock_poll
 * (sending only). A peer that closes, or any other failure, breaks the
 * client: the stream would be out of step.
 */
static int sock_all(struct kvr_client *c, const void *out, void *in, size_t n,
		    bool answers)
{
	uint64_t deadline = deadline_from_now(c);
	size_t done = 0;

	while (done < n) {
		ssize_t r = out ? send(c->sock, (const char *)out + done,
				       n - done, MSG_DONTWAIT | MSG_NOSIGNAL)
				: recv(c->sock, (char *)in + done, n - done,
				       MSG_DONTWAIT);

		if (r > 0) {
			done += (size_t)r;
			deadline = deadline_from_now(c);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			int rc = sock_poll(c, out ? POLLOUT : POLLIN, deadline,
					   out && answers);

			if (rc < 0)
				return rc;
			continue;
		}
		if (!out)
			return kvr__client_break(
			    c, -EOWNERDEAD,
			    "kvringd (pid %d) closed the connection",
			    (int)c->server_pid);
		return kvr__client_break(
		    c, -EOWNERDEAD,
		    "kvringd (pid %d) closed the connection "
		    "(send: %s)",
		    (int)c->server_pid,
		    r < 0 ? kvr_strerror(-errno) : "0 bytes");
	}
	return 0;
}

static int send_all(struct kvr_client *c, const void *buf, size_t n,
		    bool answers)
{
	return sock_all(c, buf, NULL, n, answers);
}

/* Send one frame: header, rec, then (payload_of non-NULL) the bytes of
 * each OK slot of that transfer, all of it, bounded by the client timeout
 * (reset by progress). Any failure breaks the client (the stream would be
 * out of step). @answers: see sock_poll. */
static int frame_send(struct kvr_client *c, uint32_t type, const void *rec,
		      size_t len, const struct kvr_xfer *payload_of,
		      bool answers)
{
	uint64_t payload = payload_of ? ok_bytes(payload_of) : 0;
	struct kvr_frame f;
	int rc;

	if (c->broken)
		return c->broken;
	if (len + payload > UINT32_MAX)
		return kvr__client_fail(c, -E2BIG,
					"frame of %llu bytes exceeds 4 GiB",
					(unsigned long long)(len + payload));
	f.len = (uint32_t)(len + payload);
	f.type = type;
	rc = send_all(c, &f, sizeof(f), answers);
	if (rc == 0 && len)
		rc = send_all(c, rec, len, answers);
	for (uint32_t i = 0; rc == 0 && payload_of && i < payload_of->nslots;
	     i++) {
		const struct kvr_slot *s = &payload_of->slots[i];

		if (s->status == KVR_SLOT_OK && s->len)
			rc = send_all(c, s->ptr, (size_t)s->len, answers);
	}
	return rc;
}

int kvr__tport_sock_frame(struct kvr_client *c, uint32_t type, const void *rec,
			  size_t len)
{
	return frame_send(c, type, rec, len, NULL, false);
}

/* Read exactly n bytes (bounded by the client timeout + liveness). */
static int read_full(struct kvr_client *c, void *buf, size_t n)
{
	return sock_all(c, NULL, buf, n, false);
}

/* Grow the scratch buffer to @need bytes, keeping what it holds. */
static int scratch_grow(struct kvr_client *c, size_t need)
{
	void *s;

	if (need <= c->scratch_bytes)
		return 0;
	s = realloc(c->scratch, need);
	if (!s)
		return kvr__client_break(c, -ENOMEM, "out of memory");
	c->scratch = s;
	c->scratch_bytes = need;
	return 0;
}

/* Read the @more bytes of sums that follow a retrieve answer's slots into
 * the scratch buffer, behind the @rec bytes of record already there. */
static int read_sums(struct kvr_client *c, size_t rec, size_t more)
{
	int rc = scratch_grow(c, rec + more);

	if (rc < 0)
		return rc;
	return read_full(c, (char *)c->scratch + rec, more);
}

/* Read one answer frame's record into the scratch buffer and hand it to
 * kvr__answer, which reads the payload that follows (retrieve) itself. */
static int read_answer(struct kvr_client *c, const struct kvr_frame *f)
{
	struct kvr_resp_hdr h;
	uint32_t op = f->type & ~KVR_RESP_BIT;
	size_t rec;
	uint64_t payload = 0;
	int rc;

	/* Only answers may follow the welcome: a frame of any other type,
	 * or one too short for an answer's head, is a confused server. */
	if (!(f->type & KVR_RESP_BIT) || op == 0 || op >= KVR_OP__MAX ||
	    f->len < sizeof(h))
		return kvr__client_break(c, -EPROTO,
					 "unexpected frame type 0x%x "
					 "(%u bytes) from kvringd",
					 f->type, f->len);
	rc = read_full(c, &h, sizeof(h));
	if (rc < 0)
		return rc;
	if (h.count > KVR_MAX_KEYS_LIMIT)
		return kvr__client_break(c, -EBADMSG, "answer with %u slots",
					 h.count);
	/* The record's length follows from its head: a stats answer carries
	 * its body, every other one its slots. */
	rec = op == KVR_OP_STATS ? sizeof(h) + sizeof(struct kvr_stats_wire)
				 : kvr_resp_bytes(h.count);
	if (rec > f->len)
		return kvr__client_break(c, -EBADMSG,
					 "answer frame of %u bytes, "
					 "record needs %zu",
					 f->len, rec);
	/* One answer at a time in the client's scratch buffer, which only
	 * grows (a frame is read whole before the next). */
	rc = scratch_grow(c, rec);
	if (rc < 0)
		return rc;
	memcpy(c->scratch, &h, sizeof(h));
	rc = read_full(c, (char *)c->scratch + sizeof(h), rec - sizeof(h));
	if (rc < 0)
		return rc;
	if (op == KVR_OP_PREPARE_RETRIEVE && h.status == 0) {
		const struct kvr_slot_desc *sd =
		    (const void *)((char *)c->scratch + sizeof(h));

		for (uint32_t i = 0; i < h.count; i++)
			if (sd[i].status == KVR_SLOT_OK)
				payload += sd[i].len;
		/* Asked with KVR_REQ_SUMS, the record goes on with one u64
		 * sum per slot (the frame's length says so); kvr__answer
		 * checks that we asked for them. */
		if (h.count && payload <= UINT32_MAX &&
		    f->len == kvr_resp_sums_bytes(h.count) + payload) {
			size_t more = kvr_resp_sums_bytes(h.count) - rec;

			rc = read_sums(c, rec, more);
			if (rc < 0)
				return rc;
			rec += more;
		}
	}
	/* What follows the record must be exactly the OK slots' bytes, or
	 * the stream is out of step before kvr__answer reads the payload. */
	if (payload > UINT32_MAX || rec + payload != f->len)
		return kvr__client_break(c, -EBADMSG,
					 "answer frame of %u bytes, "
					 "record %zu + payload %llu",
					 f->len, rec,
					 (unsigned long long)payload);
	return kvr__answer(c, f->type, c->scratch, rec);
}

/*
 * Read one frame header and handle it: BYE breaks the client (kvringd is
 * shutting down); anything else is an answer (its payload included) when
 * @answers, else a protocol error (under the shm transport only BYE may
 * come on the socket). Blocks until the whole frame is in, bounded.
 * Return 0 or a fatal -errno (client broken).
 */
static int frame_recv(struct kvr_client *c, bool answers)
{
	struct kvr_frame f;
	int rc;

	if (c->broken)
		return c->broken;
	c->reading = true;
	rc = read_full(c, &f, sizeof(f));
	if (rc == 0) {
		if (f.type == KVR_FRAME_BYE)
			rc = kvr__client_break(
			    c, -EOWNERDEAD,
			    "kvringd (pid %d) closed the connection "
			    "(it is shutting down)",
			    (int)c->server_pid);
		else if (answers)
			rc = read_answer(c, &f);
		else
			rc = kvr__client_break(
			    c, -EPROTO,
			    "unexpected frame type 0x%x on the "
			    "socket under the shm transport",
			    f.type);
	}
	c->reading = false;
	return rc;
}

/* An answer frame (its payload included) or BYE. */
static int read_frame(struct kvr_client *c)
{
	return frame_recv(c, true);
}

int kvr__tport_sock_read_bye(struct kvr_client *c)
{
	return frame_recv(c, false);
}

/* Read the payload that follows a retrieve answer into the transfer's
 * buffers, or into the void when nobody wants it (an orphan, or no
 * memory for the buffers): the stream must stay in step either way. */
static int read_payload(struct kvr_client *c, struct kvr_xfer *x,
			const struct kvr_slot_desc *sd, uint32_t n)
{
	static char sink[65536];
	int rc;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t left = sd[i].len;
		char *dst = x ? x->slots[i].ptr : NULL;

		if (sd[i].status != KVR_SLOT_OK)
			continue;
		while (left) {
			size_t k =
			    dst ? (size_t)left
				: (size_t)(left < sizeof(sink) ? left
							       : sizeof(sink));

			rc = read_full(c, dst ? dst : sink, k);
			if (rc < 0)
				return rc;
			left -= k;
			if (dst)
				dst += k;
		}
	}
	return 0;
}

/* ---- the operations (struct kvr__tport, client.h) ---- */

/* The request goes out as one frame, with the payload of a commit_store
 * behind it. The entry is SENDING meanwhile: its answer may be handled
 * while the send waits for room (sock_poll), and a break in the middle
 * drops the entry silently, since the caller gets the error from here. */
static int sock_send(struct kvr_client *c, const struct kvr__submit_req *s,
		     uint64_t deadline_ns, uint64_t *id_out)
{
	size_t len = kvr_req_bytes(s->op, s->n);
	struct kvr__pend *p;
	uint64_t id;
	int rc;

	(void)deadline_ns; /* a send is bounded by its progress instead */
	/* One send buffer per client, kept: nothing sends while a frame is
	 * being sent (answer.c only queues undos). */
	if (len > c->tx_bytes) {
		void *b = realloc(c->tx, len);

		if (!b)
			return kvr__client_fail(c, -ENOMEM, "out of memory");
		c->tx = b;
		c->tx_bytes = len;
	}
	p = kvr__pend_open(c, s);
	if (!p)
		return kvr__client_break(c, -ENOMEM, "out of memory");
	id = p->req_id;
	rc = kvr__submit_encode(s, id, c->tx, c->tx_bytes);
	if (rc < 0) {
		/* Nothing went out: this call fails, the connection stays. */
		kvr__pend_free(c, p);
		return kvr__client_fail(c, -EINVAL,
					"%s: libkvring built a request its "
					"encoder refuses (%s); a libkvring "
					"bug: please report it",
					kvr_op_name(s->op), kvr_strerror(rc));
	}
	p->state = KVR_PEND_SENDING;
	rc = frame_send(c, s->op, c->tx, len,
			s->op == KVR_OP_COMMIT_STORE ? s->x : NULL, true);
	if (rc < 0)
		return rc; /* broken: the entry was dropped silently */
	/* The answer may already have been handled during the send. */
	p = kvr__pend_find(c, id);
	if (p && p->state == KVR_PEND_SENDING)
		p->state = KVR_PEND_WAIT;
	if (id_out)
		*id_out = id;
	return 0;
}

/* Handle every frame that is already (at least partly) readable;
 * read_frame finishes a started frame, bounded. */
static int sock_drain(struct kvr_client *c)
{
	if (c->reading)
		return 0; /* nested inside a frame read: finish that first */
	for (;;) {
		struct pollfd p = {c->sock, POLLIN | POLLRDHUP, 0};
		int rc;

		if (poll(&p, 1, 0) <= 0 ||
		    !(p.revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR)))
			return 0;
		rc = read_frame(c);
		if (rc < 0)
			return rc;
	}
}

/* No spinning and no doorbell: answers arrive on the socket, so sleep in
 * poll(2) on it for one slice and read what came. */
static int sock_wait(struct kvr_client *c, uint64_t deadline_ns)
{
	struct pollfd p = {c->sock, POLLIN | POLLRDHUP, 0};
	int rc, slice = kvr__client_slice_ms(deadline_ns);

	if (slice < 0)
		return slice;
	rc = poll(&p, 1, slice);
	if (rc < 0 && errno != EINTR) {
		int e = -errno;

		return kvr__client_break(c, e, "poll: %s", kvr_strerror(e));
	}
	if (rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR)))
		return kvr__wait_drain(c);
	return 0;
}

/* The slots get private buffers; a retrieve's payload follows its answer
 * on the socket and is read into them now. */
static int sock_slots(struct kvr_client *c, struct kvr_xfer *x, uint32_t op,
		      const struct kvr_resp_hdr *h,
		      const struct kvr_slot_desc *sd)
{
	int rc = x ? arena_alloc(x, kvr__client_sum_room(c, op, h->count)) : 0;
	int rr;

	if (op != KVR_OP_PREPARE_RETRIEVE)
		return rc;
	rr = read_payload(c, rc == 0 ? x : NULL, sd, h->count);
	return rr < 0 ? rr : rc;
}

static void sock_close(struct kvr_client *c)
{
	free(c->tx);
	c->tx = NULL;
	c->tx_bytes = 0;
}

const struct kvr__tport kvr__tport_sock = {
    .name = "socket",
    .send = sock_send,
    .drain = sock_drain,
    .wait = sock_wait,
    .slots = sock_slots,
    .close = sock_close,
};
