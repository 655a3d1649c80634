/* SPDX-License-Identifier: MIT */
/*
 * tport_ring.c - the ring transport, kvring's normal one: a request is a
 * record claimed in our channel's request ring, written in place and
 * committed (then the server's doorbell rung only if it sleeps); answers
 * are records in the response ring, copied out before they are parsed;
 * a transfer's slots point straight into the shared pool. It fills in the
 * operations table kvr__tport_ring; conn.c picks it once, at connect, when
 * the pool is mapped.
 *
 * The waiting follows the doorbell protocol (<kvring/doorbell.h>): spin on
 * the response ring for spin_us, then set our sleeping flag (F2), re-check
 * the ring, and only then block in poll(2) on the response eventfd and the
 * socket, for one slice at most. In the busy steady state no system call
 * is made. The socket carries nothing but BYE or EOF under this transport
 * (tport_sock.c reads them). This file does not choose request ids or
 * keep the pending table (submit.c, pend.c) or interpret answers
 * (answer.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/clock.h>
#include <kvring/doorbell.h>
#include <kvring/error.h>

#include "client.h"

/* Answers drained between two releases of response-ring room. */
#define RELEASE_BATCH 32

/* Wait (sync only) for the server to free room in the request ring. There
 * is no doorbell for "room": poll the ring with short naps, process
 * answers meanwhile (the server may wait for room in ours) and keep the
 * liveness checks running. */
static int wait_room(struct kvr_client *c, uint64_t deadline,
		     uint64_t *last_alive)
{
	uint64_t now;
	int rc;

	rc = kvr__wait_drain(c);
	if (rc < 0)
		return rc;
	now = kvr_clock_now_ns();
	if (now >= deadline)
		return kvr__client_fail(c, -ETIMEDOUT,
					"request ring full for %u ms: kvringd "
					"is not consuming (stopped or "
					"overloaded?)",
					c->timeout_ms);
	if (*last_alive == 0)
		*last_alive = now; /* first wait of this submit */
	if (now - *last_alive > (uint64_t)KVR_SLICE_MS * 1000000ull) {
		*last_alive = now;
		rc = kvr__client_alive(c);
		if (rc < 0)
			return rc;
	}
	nanosleep(&(struct timespec){0, 50000}, NULL);
	return 0;
}

/*
 * Claim a record of @len bytes in the request ring, waiting for room as
 * @s's kind allows: a sync request until @deadline, an async one through
 * one drain of answers, an internal one (an undo) not at all.
 * Return 0 and *dst, -EAGAIN (no room; async or internal), or -errno.
 */
static int claim(struct kvr_client *c, const struct kvr__submit_req *s,
		 size_t len, uint64_t deadline, void **dst)
{
	/* Set by the first wait for room: no clock read (a vDSO call, tens
	 * of ns on a VM) before the request is published. */
	uint64_t last_alive = 0;
	bool async_tried = false;
	int rc;

	for (;;) {
		rc = kvr_ring_claim(&c->req, s->op, (uint32_t)len, dst);
		if (rc == 0)
			return 0;
		/* A padding record may have been claimed: publish it. */
		kvr_ring_commit(&c->req);
		if (rc == -EMSGSIZE)
			return kvr__client_fail(
			    c, -E2BIG,
			    "request of %zu bytes can't fit "
			    "the %u-byte request ring",
			    len, c->req.cap);
		if (rc != -EAGAIN)
			return kvr__client_break(c, -EPROTO,
						 "request ring damaged: %s",
						 kvr_strerror(rc));
		if (s->kind == KVR_SUBMIT_INTERNAL)
			return -EAGAIN;
		if (s->kind == KVR_SUBMIT_ASYNC && async_tried)
			return -EAGAIN; /* callers reap and retry */
		if (s->kind == KVR_SUBMIT_ASYNC) {
			/* Answers we consume may be what the server waits
			 * for before it takes more requests. */
			async_tried = true;
			rc = kvr__wait_drain(c);
		} else {
			rc = wait_room(c, deadline, &last_alive);
		}
		if (rc < 0)
			return rc;
	}
}

/* ---- the operations (struct kvr__tport, client.h) ---- */

/* Publish every record claimed since the last commit (R3 and R1 of the
 * ring, once for the whole batch), then ring the server only if it
 * sleeps (F1 inside kvr_bell_notify, once per batch too). A failed write
 * means the server is gone; the wait's checks report it. */
static void ring_flush(struct kvr_client *c)
{
	kvr_ring_commit(&c->req);
	(void)kvr_bell_notify(&c->ch->req_bell, c->req_efd);
}

static int ring_send(struct kvr_client *c, const struct kvr__submit_req *s,
		     uint64_t deadline_ns, uint64_t *id_out)
{
	size_t len = kvr_req_bytes(s->op, s->n);
	struct kvr__pend *p;
	void *dst = NULL;
	int rc;

	/* Claim first, then take a req_id: an answer processed while we
	 * wait for room can't see a half-made entry. */
	rc = claim(c, s, len, deadline_ns, &dst);
	if (rc < 0)
		return rc;
	p = kvr__pend_open(c, s);
	if (!p) {
		/* Only reachable when internal requests filled the table
		 * during wait_room and it can't grow: give up the channel
		 * (a claimed record must not be left half-written). */
		return kvr__client_break(c, -ENOMEM, "out of memory");
	}
	rc = kvr__submit_encode(s, p->req_id, dst, len);
	if (rc < 0) {
		/* The claimed record can't be taken back or left garbage:
		 * give up the channel. Unreachable unless libkvring is wrong.
		 */
		kvr__pend_free(c, p);
		return kvr__client_break(c, -EINVAL,
					 "%s: libkvring built a request its "
					 "encoder refuses (%s); a libkvring "
					 "bug: please report it",
					 kvr_op_name(s->op), kvr_strerror(rc));
	}
	if (id_out)
		*id_out = p->req_id;
	/* Held (kvr_submit_hold): written, published later by ring_flush()
	 * together with the others, one commit and one F1 for all. The
	 * server cannot see it before: its header word stays zero (R3). */
	if (c->hold && s->kind == KVR_SUBMIT_ASYNC) {
		c->held++;
		return 0;
	}
	/* Anything else publishes now, and with it what was held. */
	c->held = 0;
	ring_flush(c);
	return 0;
}

/* Copy each answer out of the ring before parsing it: the ring is shared
 * memory the server could still write, and the validation must hold for
 * the bytes we then use. */
static int ring_drain(struct kvr_client *c)
{
	struct kvr_ring_rec rec;
	int rc = 0, n = 0;

	for (;;) {
		rc = kvr_ring_peek(&c->resp, &rec);
		if (rc == -EAGAIN) {
			rc = 0;
			break;
		}
		if (rc < 0) {
			kvr_ring_release(&c->resp);
			return kvr__client_break(c, -EPROTO,
						 "response ring damaged: %s",
						 kvr_strerror(rc));
		}
		if (rec.len > c->scratch_bytes) {
			void *s = realloc(c->scratch, rec.len);

			if (!s) {
				kvr_ring_release(&c->resp);
				return kvr__client_break(c, -ENOMEM,
							 "out of memory");
			}
			c->scratch = s;
			c->scratch_bytes = rec.len;
		}
		memcpy(c->scratch, rec.data, rec.len);
		rc = kvr__answer(c, rec.type, c->scratch, rec.len);
		if (rc < 0)
			break;
		/* Give room back in batches, but don't hold a whole ring. */
		if (++n % RELEASE_BATCH == 0)
			kvr_ring_release(&c->resp);
	}
	kvr_ring_release(&c->resp);
	return rc;
}

/* The socket stirred during a wait. Under this transport the only legal
 * traffic is BYE or EOF, reported after the ring was drained (answers
 * already published still count). */
static int on_sock(struct kvr_client *c, short revents)
{
	int rc;

	if (!(revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR)))
		return 0;
	rc = kvr__wait_drain(c);
	if (rc < 0)
		return rc;
	if (revents & POLLIN)
		return kvr__tport_sock_read_bye(c);
	return kvr__client_break(c, -EOWNERDEAD,
				 "kvringd (pid %d) closed the "
				 "connection",
				 (int)c->server_pid);
}

/* Spin, then sleep on the doorbell: see the file comment. */
static int ring_wait(struct kvr_client *c, uint64_t deadline_ns)
{
	struct pollfd p[2];
	int rc, slice;

	if (c->spin_us) {
		uint64_t end = 0, t;
		unsigned spins = 0;
		bool got;

		/* The hint is one relaxed load (the drain peeks with the
		 * acquire); the clock (a vDSO call, the top symbol of a hot
		 * round trip when read every iteration) only every 64th
		 * spin, the first time to set the end: a hot answer is seen
		 * without any. */
		while (!(got = kvr_ring_maybe_data(&c->resp))) {
			kvr_clock_relax();
			if (++spins % 64 != 0)
				continue;
			t = kvr_clock_now_ns();
			if (end == 0) {
				end = t + (uint64_t)c->spin_us * 1000ull;
				if (end > deadline_ns)
					end = deadline_ns;
			}
			if (t >= end)
				break;
		}
		if (got)
			return 1;
	}
	slice = kvr__client_slice_ms(deadline_ns);
	if (slice < 0)
		return slice;
	/* F2 inside; pairs with F1 in the server's notify. */
	kvr_bell_prepare_sleep(&c->ch->resp_bell);
	if (!kvr_ring_empty(&c->resp)) {
		kvr_bell_cancel_sleep(&c->ch->resp_bell);
		return 1;
	}
	p[0] = (struct pollfd){c->resp_efd, POLLIN, 0};
	p[1] = (struct pollfd){c->sock, POLLIN | POLLRDHUP, 0};
	rc = poll(p, 2, slice);
	(void)kvr_bell_woken(&c->ch->resp_bell, c->resp_efd);
	if (rc < 0 && errno != EINTR) {
		int e = -errno;

		return kvr__client_break(c, e, "poll: %s", kvr_strerror(e));
	}
	if (rc > 0)
		return on_sock(c, p[1].revents);
	return 0;
}

/* The slots are the pool's bytes: the answer's offsets were checked
 * against the pool by kvr_resp_parse. No payload follows. */
static int ring_slots(struct kvr_client *c, struct kvr_xfer *x, uint32_t op,
		      const struct kvr_resp_hdr *h,
		      const struct kvr_slot_desc *sd)
{
	if (!x)
		return 0;
	for (uint32_t i = 0; i < h->count; i++)
		if (sd[i].status == KVR_SLOT_OK)
			x->slots[i].ptr = (char *)c->pool.base + sd[i].off;
	if (op == KVR_OP_PREPARE_STORE)
		kvr__touch_slots(c, x); /* while a background pre-fault runs */
	return 0;
}

/* The pool mapping is this transport's: stop its pre-fault, let go of
 * the mapping (unmapped with the process's last client of it). */
static void ring_close(struct kvr_client *c)
{
	kvr__touch_stop(c); /* before the pool it touches is unmapped */
	kvr__poolmap_detach(c);
}

const struct kvr__tport kvr__tport_ring = {
    .name = "ring",
    .send = ring_send,
    .drain = ring_drain,
    .wait = ring_wait,
    .slots = ring_slots,
    .close = ring_close,
    .flush = ring_flush,
};
