/* SPDX-License-Identifier: MIT */
/*
 * frame.c - the Unix socket's wire, as both transports and the handshake
 * use it: a frame is struct kvr_frame (length, type) and its record,
 * followed by the payload of a COMMIT_STORE request or of a
 * PREPARE_RETRIEVE answer (the socket transport), and nothing but the
 * hello (conn.c) and BYE or EOF under the ring transport.
 *
 * Every read and write is non-blocking plus poll(2) in KVR_SLICE_MS
 * slices, so the liveness checks (kvr__client_alive) run while bytes
 * move, and the deadline (the client timeout) restarts whenever bytes
 * move, so a 512 MiB payload is bounded by progress, not by size. A frame
 * is always read whole: an answer's record and its payload are read into
 * memory of their own (struct kvr__frame_rx, the payload in an arena laid
 * out for the transfer's slots) and queued; the socket transport hands
 * them up one by one. While a send waits for room, the frames kvringd
 * sends us are read onto that queue, so two full socket buffers cannot
 * deadlock. A stream error in the middle of a frame breaks the client:
 * the stream cannot be resynchronised.
 *
 * This file does not decide what answers mean (answer.c) or what to send
 * (submit.c); it never calls either.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <kvring/error.h>

#include "client.h"

#define SLOT_ALIGN 64u

static uint64_t aligned(uint64_t n)
{
	return (n + SLOT_ALIGN - 1) & ~(uint64_t)(SLOT_ALIGN - 1);
}

void *kvr__frame_arena(size_t room, const struct kvr_slot_desc *sd, uint32_t n,
		       int *rc)
{
	uint64_t total = room;
	char *arena;

	*rc = 0;
	for (uint32_t i = 0; i < n; i++)
		if (sd[i].status == KVR_SLOT_OK)
			total += aligned(sd[i].len);
	if (total == 0)
		return NULL;
	arena =
	    total > SIZE_MAX ? NULL : aligned_alloc(SLOT_ALIGN, (size_t)total);
	if (!arena) {
		*rc = -ENOMEM;
		return NULL;
	}
	/* The sums' room starts zeroed: no slot has a kept sum yet. */
	memset(arena, 0, room);
	return arena;
}

void kvr__frame_arena_give(struct kvr_xfer *x, void *arena, size_t room)
{
	uint64_t off = room;

	for (uint32_t i = 0; i < x->nslots; i++) {
		if (x->slots[i].status != KVR_SLOT_OK)
			continue;
		/* No arena when every OK slot is empty: no pointer either. */
		x->slots[i].ptr = arena ? (char *)arena + off : NULL;
		off += aligned(x->slots[i].len);
	}
	x->priv = arena;
}

void kvr__frame_rx_free(struct kvr__frame_rx *f)
{
	if (!f)
		return;
	free(f->arena);
	free(f);
}

int kvr__frame_readable(const struct kvr_client *c)
{
	struct pollfd p = {c->sock, POLLIN | POLLRDHUP, 0};

	return poll(&p, 1, 0) > 0 &&
	       (p.revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR));
}

static uint64_t deadline_from_now(const struct kvr_client *c)
{
	return kvr_clock_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
}

/* Wait for the socket to become ready for @ev, one slice at most, with the
 * liveness checks. Sending (@ev POLLOUT), frames kvringd sent us are read
 * onto the queue meanwhile (a read never waits for a send). */
static int sock_poll(struct kvr_client *c, short ev, uint64_t deadline)
{
	struct pollfd p = {c->sock, (short)(ev | POLLRDHUP), 0};
	int rc;

	if (kvr_clock_now_ns() >= deadline)
		return kvr__client_break(
		    c, -ETIMEDOUT,
		    "kvringd moved no bytes on the socket for "
		    "%u ms",
		    c->timeout_ms);
	if (ev == POLLOUT)
		p.events |= POLLIN;
	rc = poll(&p, 1, KVR_SLICE_MS);
	if (rc < 0 && errno != EINTR)
		return kvr__client_break(c, -EIO, "poll socket: %s",
					 kvr_strerror(-errno));
	if (rc > 0 && ev == POLLOUT && (p.revents & POLLIN)) {
		rc = kvr__frame_recv(c, true);
		if (rc < 0)
			return rc;
	}
	return kvr__client_alive(c);
}

/*
 * Move exactly @n bytes: from @out to the socket, or from the socket into
 * @in (exactly one of them is non-NULL; @in NULL with @out NULL skips @n
 * bytes), bounded by the client timeout (reset by progress) and the
 * server's liveness. A peer that closes, or any other failure, breaks the
 * client: the stream would be out of step.
 */
static int sock_all(struct kvr_client *c, const void *out, void *in, size_t n)
{
	static char sink[65536]; /* skipped bytes: never read back */
	uint64_t deadline = deadline_from_now(c);
	size_t done = 0;

	while (done < n) {
		size_t k = n - done;
		ssize_t r;

		if (!out && !in && k > sizeof(sink))
			k = sizeof(sink);
		r = out ? send(c->sock, (const char *)out + done, k,
			       MSG_DONTWAIT | MSG_NOSIGNAL)
			: recv(c->sock, in ? (char *)in + done : sink, k,
			       MSG_DONTWAIT);
		if (r > 0) {
			done += (size_t)r;
			deadline = deadline_from_now(c);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			int rc = sock_poll(c, out ? POLLOUT : POLLIN, deadline);

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

int kvr__frame_send(struct kvr_client *c, uint32_t type, const void *rec,
		    size_t len, const struct kvr_xfer *payload)
{
	uint64_t bytes = 0;
	struct kvr_frame f;
	int rc;

	if (c->broken)
		return c->broken;
	for (uint32_t i = 0; payload && i < payload->nslots; i++)
		if (payload->slots[i].status == KVR_SLOT_OK)
			bytes += payload->slots[i].len;
	if (len + bytes > UINT32_MAX)
		return kvr__client_fail(c, -E2BIG,
					"frame of %llu bytes exceeds 4 GiB",
					(unsigned long long)(len + bytes));
	f.len = (uint32_t)(len + bytes);
	f.type = type;
	rc = sock_all(c, &f, NULL, sizeof(f));
	if (rc == 0 && len)
		rc = sock_all(c, rec, NULL, len);
	for (uint32_t i = 0; rc == 0 && payload && i < payload->nslots; i++) {
		const struct kvr_slot *s = &payload->slots[i];

		if (s->status == KVR_SLOT_OK && s->len)
			rc = sock_all(c, s->ptr, NULL, (size_t)s->len);
	}
	return rc;
}

/* Read the payload that follows a retrieve answer (@f, already read)
 * into an arena laid out for its OK slots, or skip it when there is no
 * memory for one (the stream must stay in step either way). */
static int read_payload(struct kvr_client *c, struct kvr__frame_rx *f)
{
	const struct kvr_resp_hdr *h = (const void *)f->rec;
	const struct kvr_slot_desc *sd = (const void *)(h + 1);
	size_t room =
	    kvr__client_sum_room(c, KVR_OP_PREPARE_RETRIEVE, h->count);
	char *dst;
	int rc;

	f->arena = kvr__frame_arena(room, sd, h->count, &f->arena_rc);
	dst = f->arena ? (char *)f->arena + room : NULL;
	for (uint32_t i = 0; i < h->count; i++) {
		if (sd[i].status != KVR_SLOT_OK)
			continue;
		rc = sock_all(c, NULL, dst, (size_t)sd[i].len);
		if (rc < 0)
			return rc;
		if (dst)
			dst += aligned(sd[i].len);
	}
	return 0;
}

/* Read one answer frame (its header @fh read) whole onto the queue. */
static int read_answer(struct kvr_client *c, const struct kvr_frame *fh)
{
	struct kvr_resp_hdr h;
	struct kvr__frame_rx *f;
	uint32_t op = fh->type & ~KVR_RESP_BIT;
	uint64_t payload = 0;
	size_t rec, cap;
	int rc;

	/* Only answers may follow the welcome: a frame of any other type,
	 * or one too short for an answer's head, is a confused server. */
	if (!(fh->type & KVR_RESP_BIT) || op == 0 || op >= KVR_OP__MAX ||
	    fh->len < sizeof(h))
		return kvr__client_break(c, -EPROTO,
					 "unexpected frame type 0x%x "
					 "(%u bytes) from kvringd",
					 fh->type, fh->len);
	rc = sock_all(c, NULL, &h, sizeof(h));
	if (rc < 0)
		return rc;
	if (h.count > KVR_MAX_KEYS_LIMIT)
		return kvr__client_break(c, -EBADMSG, "answer with %u slots",
					 h.count);
	/* The record's length follows from its head: a stats answer carries
	 * its body, every other one its slots (answer.c checks that a
	 * retrieve's sums were asked for). */
	rec = op == KVR_OP_STATS ? sizeof(h) + sizeof(struct kvr_stats_wire)
				 : kvr_resp_bytes(h.count);
	if (rec > fh->len)
		return kvr__client_break(c, -EBADMSG,
					 "answer frame of %u bytes, "
					 "record needs %zu",
					 fh->len, rec);
	/* Room for a retrieve's sums, in case they follow the slots. */
	cap = op == KVR_OP_PREPARE_RETRIEVE && h.status == 0 && h.count
		  ? kvr_resp_sums_bytes(h.count)
		  : rec;
	f = malloc(sizeof(*f) + cap);
	if (!f)
		return kvr__client_break(c, -ENOMEM, "out of memory");
	*f = (struct kvr__frame_rx){.type = fh->type};
	memcpy(f->rec, &h, sizeof(h));
	rc = sock_all(c, NULL, (char *)f->rec + sizeof(h), rec - sizeof(h));
	if (rc == 0 && op == KVR_OP_PREPARE_RETRIEVE && h.status == 0) {
		const struct kvr_slot_desc *sd =
		    (const void *)((const char *)f->rec + sizeof(h));

		for (uint32_t i = 0; i < h.count; i++)
			if (sd[i].status == KVR_SLOT_OK)
				payload += sd[i].len;
		/* Asked with KVR_REQ_SUMS, the record goes on with one u64
		 * sum per slot (the frame's length says so). */
		if (cap > rec && payload <= UINT32_MAX &&
		    fh->len == cap + payload) {
			rc = sock_all(c, NULL, (char *)f->rec + rec, cap - rec);
			rec = cap;
		}
	}
	f->len = (uint32_t)rec;
	/* What follows the record must be exactly the OK slots' bytes, or
	 * the stream is out of step. */
	if (rc == 0 && (payload > UINT32_MAX || rec + payload != fh->len))
		rc = kvr__client_break(c, -EBADMSG,
				       "answer frame of %u bytes, "
				       "record %zu + payload %llu",
				       fh->len, rec,
				       (unsigned long long)payload);
	if (rc == 0 && payload)
		rc = read_payload(c, f);
	if (rc < 0) {
		kvr__frame_rx_free(f);
		return rc;
	}
	if (c->rx_tail)
		c->rx_tail->next = f;
	else
		c->rx_head = f;
	c->rx_tail = f;
	return 0;
}

int kvr__frame_recv(struct kvr_client *c, bool answers)
{
	struct kvr_frame f;
	int rc;

	if (c->broken)
		return c->broken;
	rc = sock_all(c, NULL, &f, sizeof(f));
	if (rc < 0)
		return rc;
	if (f.type == KVR_FRAME_BYE)
		return kvr__client_break(c, -EOWNERDEAD,
					 "kvringd (pid %d) closed the "
					 "connection (it is shutting down)",
					 (int)c->server_pid);
	if (answers)
		return read_answer(c, &f);
	return kvr__client_break(c, -EPROTO,
				 "unexpected frame type 0x%x on the "
				 "socket under the shm transport",
				 f.type);
}
