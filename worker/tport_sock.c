/* SPDX-License-Identifier: MIT */
/*
 * tport_sock.c - the socket transport (the "copy transport" of DESIGN):
 * every request and answer travels as a frame on the Unix socket
 * (frame.c), followed by the payload of a COMMIT_STORE request or a
 * PREPARE_RETRIEVE answer, and a transfer's slots are private buffers:
 * one malloc'd arena per transfer (kvr_xfer.priv), each OK slot 64-byte
 * aligned in it. It fills in the operations table kvr__tport_sock; conn.c
 * picks it once, at connect, when no pool can be shared.
 *
 * A claim is room in the one send buffer, a commit sends it as a frame;
 * answers are read whole, payload included, and handed up one at a time,
 * oldest first (those read while a send waited for room queue up in
 * front). This file only moves bytes: it does not build requests
 * (submit.c) or decide what answers mean (answer.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/error.h>

#include "client.h"

/* One send buffer per client, kept and grown: a request is claimed in
 * it, then sent whole by commit before the next claim. */
static int sock_claim(struct kvr_client *c, uint32_t op, size_t len, void **dst)
{
	if (len > c->tx_bytes) {
		void *b = realloc(c->tx, len);

		if (!b)
			return kvr__client_fail(c, -ENOMEM, "out of memory");
		c->tx = b;
		c->tx_bytes = len;
	}
	c->tx_len = len;
	c->tx_op = op;
	*dst = c->tx;
	return 0;
}

/* The claimed request goes out as one frame, with the payload of a
 * commit_store behind it; nothing claimed (a publish of held requests,
 * which this transport never holds) sends nothing. */
static int sock_commit(struct kvr_client *c, const struct kvr_xfer *payload)
{
	size_t len = c->tx_len;

	if (len == 0)
		return 0;
	c->tx_len = 0;
	return kvr__frame_send(c, c->tx_op, c->tx, len, payload);
}

/* The oldest answer read whole, reading one from the socket when none is
 * queued and one is there. The one handed up before is freed now, with
 * its payload unless slots took it. */
static int sock_receive(struct kvr_client *c, struct kvr__rec *r)
{
	struct kvr__frame_rx *f;
	int rc;

	kvr__frame_rx_free(c->rx_cur);
	c->rx_cur = NULL;
	if (!c->rx_head) {
		if (!kvr__frame_readable(c))
			return 0;
		rc = kvr__frame_recv(c, true);
		if (rc < 0)
			return rc;
	}
	f = c->rx_head;
	c->rx_head = f->next;
	if (!c->rx_head)
		c->rx_tail = NULL;
	f->next = NULL;
	c->rx_cur = f;
	*r = (struct kvr__rec){.data = f->rec, .len = f->len, .type = f->type};
	return 1;
}

/* No spinning and no doorbell: answers arrive on the socket, so sleep in
 * poll(2) on it for one slice. Answers already queued need no wait. */
static int sock_wait(struct kvr_client *c, uint64_t deadline_ns)
{
	struct pollfd p = {c->sock, POLLIN | POLLRDHUP, 0};
	int rc, slice = kvr__client_slice_ms(deadline_ns);

	if (slice < 0)
		return slice;
	if (c->rx_head)
		return 1;
	rc = poll(&p, 1, slice);
	if (rc < 0 && errno != EINTR) {
		int e = -errno;

		return kvr__client_break(c, e, "poll: %s", kvr_strerror(e));
	}
	return rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR));
}

/* The slots get private buffers: a store's are new, a retrieve's are the
 * arena its payload was read into with the answer. */
static int sock_slots(struct kvr_client *c, struct kvr_xfer *x, uint32_t op,
		      const struct kvr_resp_hdr *h,
		      const struct kvr_slot_desc *sd)
{
	size_t room = kvr__client_sum_room(c, op, h->count);
	struct kvr__frame_rx *f = c->rx_cur;
	void *arena;
	int rc;

	if (op == KVR_OP_PREPARE_RETRIEVE) {
		if (!f)
			return kvr__client_break(c, -EPROTO,
						 "retrieve slots asked for "
						 "with no answer received");
		arena = f->arena;
		rc = f->arena_rc;
		f->arena = NULL;
	} else {
		arena = x ? kvr__frame_arena(room, sd, h->count, &rc) : NULL;
	}
	if (!x) {
		free(arena); /* nobody wants them: not an error */
		return 0;
	}
	if (rc == 0)
		kvr__frame_arena_give(x, arena, room);
	return rc;
}

static void sock_close(struct kvr_client *c)
{
	struct kvr__frame_rx *f = c->rx_head, *next;

	for (; f; f = next) {
		next = f->next;
		kvr__frame_rx_free(f);
	}
	c->rx_head = c->rx_tail = NULL;
	kvr__frame_rx_free(c->rx_cur);
	c->rx_cur = NULL;
	free(c->tx);
	c->tx = NULL;
	c->tx_bytes = c->tx_len = 0;
}

const struct kvr__tport kvr__tport_sock = {
    .name = "socket",
    .batches = false,
    .claim = sock_claim,
    .commit = sock_commit,
    .receive = sock_receive,
    .wait = sock_wait,
    .slots = sock_slots,
    .close = sock_close,
};
