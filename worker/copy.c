/* SPDX-License-Identifier: MIT */
/*
 * copy.c - libkvring's side of the Unix socket after the handshake: frames
 * (struct kvr_frame + record bytes) for every request and answer under the
 * copy transport, the payload that follows a COMMIT_STORE request or a
 * PREPARE_RETRIEVE answer, and the BYE / EOF that ends a connection under
 * either transport. Also the copy transport's private slot buffers: one
 * malloc'd arena per transfer, each OK slot 64-byte aligned in it.
 *
 * Every read and write is non-blocking plus poll(2) with KVR_SLICE_MS
 * slices, so the liveness checks of wait.c run while bytes move, and the
 * deadline (the client timeout) restarts whenever bytes move, so a 512 MiB
 * payload is bounded by progress, not by size. A stream error in the middle
 * of a frame breaks the client: the stream can't be resynchronised.
 * This file does not decide what answers mean (ops.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <kvring/error.h>

#include "client.h"

#define SLOT_ALIGN 64u

uint64_t kvr__ok_bytes(const struct kvr_xfer *x)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < x->nslots; i++)
		if (x->slots[i].status == KVR_SLOT_OK)
			sum += x->slots[i].len;
	return sum;
}

int kvr__copy_alloc(struct kvr_xfer *x)
{
	struct kvr__copybuf *cb;
	uint64_t total = 0, off = 0;

	for (uint32_t i = 0; i < x->nslots; i++)
		if (x->slots[i].status == KVR_SLOT_OK)
			total += (x->slots[i].len + SLOT_ALIGN - 1) &
				 ~(uint64_t)(SLOT_ALIGN - 1);
	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	if (total) {
		if (total > SIZE_MAX ||
		    !(cb->arena = aligned_alloc(SLOT_ALIGN, (size_t)total))) {
			free(cb);
			return -ENOMEM;
		}
	}
	cb->bytes = total;
	for (uint32_t i = 0; i < x->nslots; i++) {
		if (x->slots[i].status != KVR_SLOT_OK)
			continue;
		x->slots[i].ptr = (char *)cb->arena + off;
		off += (x->slots[i].len + SLOT_ALIGN - 1) &
		       ~(uint64_t)(SLOT_ALIGN - 1);
	}
	x->priv = cb;
	return 0;
}

static uint64_t deadline_from_now(const struct kvr_client *c)
{
	return kvr__now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
}

/* Wait for the socket to become ready for @ev, one slice at most, with the
 * liveness checks. While a send waits, frames the server sent us are read
 * (copy transport) so two full socket buffers can't deadlock us. */
static int sock_poll(struct kvr_client *c, short ev, uint64_t deadline)
{
	struct pollfd p = {c->sock, (short)(ev | POLLRDHUP), 0};
	uint64_t now = kvr__now_ns();
	int rc;

	if (now >= deadline)
		return kvr__client_break(
		    c, -ETIMEDOUT,
		    "kvringd moved no bytes on the socket for "
		    "%u ms",
		    c->timeout_ms);
	if (ev == POLLOUT && c->copy && !c->reading)
		p.events |= POLLIN;
	rc = poll(&p, 1, KVR_SLICE_MS);
	if (rc < 0 && errno != EINTR)
		return kvr__client_break(c, -EIO, "poll socket: %s",
					 kvr_strerror(-errno));
	if (rc > 0 && ev == POLLOUT && (p.revents & POLLIN)) {
		rc = kvr__sock_read_frame(c);
		if (rc < 0)
			return rc;
	}
	return kvr__wait_alive(c);
}

static int send_all(struct kvr_client *c, const void *buf, size_t n)
{
	const char *p = buf;
	uint64_t deadline = deadline_from_now(c);

	while (n) {
		ssize_t r = send(c->sock, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r > 0) {
			p += r;
			n -= (size_t)r;
			deadline = deadline_from_now(c);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			int rc = sock_poll(c, POLLOUT, deadline);

			if (rc < 0)
				return rc;
			continue;
		}
		return kvr__client_break(
		    c, -EOWNERDEAD,
		    "kvringd (pid %d) closed the connection "
		    "(send: %s)",
		    (int)c->server_pid,
		    r < 0 ? kvr_strerror(-errno) : "0 bytes");
	}
	return 0;
}

int kvr__sock_send(struct kvr_client *c, uint32_t type, const void *rec,
		   size_t len, const struct kvr_xfer *payload_of)
{
	uint64_t payload = payload_of ? kvr__ok_bytes(payload_of) : 0;
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
	rc = send_all(c, &f, sizeof(f));
	if (rc == 0 && len)
		rc = send_all(c, rec, len);
	for (uint32_t i = 0; rc == 0 && payload_of && i < payload_of->nslots;
	     i++) {
		const struct kvr_slot *s = &payload_of->slots[i];

		if (s->status == KVR_SLOT_OK && s->len)
			rc = send_all(c, s->ptr, (size_t)s->len);
	}
	return rc;
}

int kvr__sock_read_full(struct kvr_client *c, void *buf, size_t n)
{
	char *p = buf;
	uint64_t deadline = deadline_from_now(c);

	while (n) {
		ssize_t r = recv(c->sock, p, n, MSG_DONTWAIT);

		if (r > 0) {
			p += r;
			n -= (size_t)r;
			deadline = deadline_from_now(c);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			int rc = sock_poll(c, POLLIN, deadline);

			if (rc < 0)
				return rc;
			continue;
		}
		return kvr__client_break(
		    c, -EOWNERDEAD, "kvringd (pid %d) closed the connection",
		    (int)c->server_pid);
	}
	return 0;
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

	if (!(f->type & KVR_RESP_BIT) || op == 0 || op >= KVR_OP__MAX ||
	    f->len < sizeof(h))
		return kvr__client_break(c, -EPROTO,
					 "unexpected frame type 0x%x "
					 "(%u bytes) from kvringd",
					 f->type, f->len);
	rc = kvr__sock_read_full(c, &h, sizeof(h));
	if (rc < 0)
		return rc;
	if (h.count > KVR_MAX_KEYS_LIMIT)
		return kvr__client_break(c, -EBADMSG, "answer with %u slots",
					 h.count);
	rec = op == KVR_OP_STATS ? sizeof(h) + sizeof(struct kvr_stats_wire)
				 : kvr_resp_bytes(h.count);
	if (rec > f->len)
		return kvr__client_break(c, -EBADMSG,
					 "answer frame of %u bytes, "
					 "record needs %zu",
					 f->len, rec);
	if (rec > c->scratch_bytes) {
		void *s = realloc(c->scratch, rec);

		if (!s)
			return kvr__client_break(c, -ENOMEM, "out of memory");
		c->scratch = s;
		c->scratch_bytes = rec;
	}
	memcpy(c->scratch, &h, sizeof(h));
	rc = kvr__sock_read_full(c, (char *)c->scratch + sizeof(h),
				 rec - sizeof(h));
	if (rc < 0)
		return rc;
	if (op == KVR_OP_PREPARE_RETRIEVE && h.status == 0) {
		const struct kvr_slot_desc *sd =
		    (const void *)((char *)c->scratch + sizeof(h));

		for (uint32_t i = 0; i < h.count; i++)
			if (sd[i].status == KVR_SLOT_OK)
				payload += sd[i].len;
	}
	if (payload > UINT32_MAX || rec + payload != f->len)
		return kvr__client_break(c, -EBADMSG,
					 "answer frame of %u bytes, "
					 "record %zu + payload %llu",
					 f->len, rec,
					 (unsigned long long)payload);
	return kvr__answer(c, f->type, c->scratch, rec, 1);
}

int kvr__sock_read_frame(struct kvr_client *c)
{
	struct kvr_frame f;
	int rc;

	if (c->broken)
		return c->broken;
	c->reading = true;
	rc = kvr__sock_read_full(c, &f, sizeof(f));
	if (rc == 0) {
		if (f.type == KVR_FRAME_BYE)
			rc = kvr__client_break(
			    c, -EOWNERDEAD,
			    "kvringd (pid %d) closed the connection "
			    "(it is shutting down)",
			    (int)c->server_pid);
		else if (!c->copy)
			rc = kvr__client_break(
			    c, -EPROTO,
			    "unexpected frame type 0x%x on the "
			    "socket under the shm transport",
			    f.type);
		else
			rc = read_answer(c, &f);
	}
	c->reading = false;
	return rc;
}
