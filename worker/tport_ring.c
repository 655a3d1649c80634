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
 * (frame.c reads them). This file only moves records: it does not build
 * requests or wait for room (submit.c), or interpret answers (answer.c,
 * which wait.c hands them to).
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

/* ---- the operations (struct kvr__tport, client.h) ---- */

/* A record claimed in the request ring. A failed claim may leave a
 * padding record claimed: it is published at once, so that the server
 * frees its room. */
static int ring_claim(struct kvr_client *c, uint32_t op, size_t len, void **dst)
{
	int rc = kvr_ring_claim(&c->req, op, (uint32_t)len, dst);

	if (rc == 0) {
		c->ring_asked++;
		return 0;
	}
	kvr_ring_commit(&c->req);
	if (rc == -EMSGSIZE)
		return kvr__client_fail(c, -E2BIG,
					"request of %zu bytes can't fit "
					"the %u-byte request ring",
					len, c->req.cap);
	if (rc != -EAGAIN)
		return kvr__client_break(c, -EPROTO, "request ring damaged: %s",
					 kvr_strerror(rc));
	return -EAGAIN;
}

/* The answers a drain left unreleased (ring_receive), if any. */
static void give_back(struct kvr_client *c)
{
	if (!c->resp_deferred)
		return;
	c->resp_deferred = false;
	kvr_ring_release(&c->resp);
	c->resp_taken = 0;
}

/* Publish every record claimed since the last commit (R3 and R1 of the
 * ring, once for the whole batch), then ring the server only if it
 * sleeps (F1 inside kvr_bell_notify, once per batch too). A failed write
 * means the server is gone; the wait's checks report it. */
static int ring_commit(struct kvr_client *c, const struct kvr_xfer *payload)
{
	(void)payload; /* the slots are the pool's: nothing follows */
	kvr_ring_commit(&c->req);
	(void)kvr_bell_notify(&c->ch->req_bell, c->req_efd);
	/* The answers drained before this request are given back only now
	 * (ring_receive): their zeroing stores would otherwise sit ahead of
	 * the request's in the store buffer, and under x86's store order the
	 * request is seen only once the worker owns the answer's line again,
	 * one more cross-core transfer per round trip. */
	give_back(c);
	return 0;
}

/* The socket stirred during a wait (@revents). Under this transport the
 * only legal traffic is BYE or EOF, reported once the ring is drained
 * (answers already published still count). */
static int sock_event(struct kvr_client *c, short revents)
{
	if (revents & POLLIN)
		return kvr__frame_recv(c, false);
	return kvr__client_break(c, -EOWNERDEAD,
				 "kvringd (pid %d) closed the "
				 "connection",
				 (int)c->server_pid);
}

/* Copy each answer out of the ring before handing it up: the ring is
 * shared memory the server could still write, and the validation must
 * hold for the bytes then used. Room goes back in batches, and when the
 * ring is drained: at once while answers are due, else at the next
 * commit or wait (ring_commit, ring_wait), not on the way to the
 * caller. */
static int ring_receive(struct kvr_client *c, struct kvr__rec *r)
{
	struct kvr_ring_rec rec;
	int rc;

	if (c->resp_taken >= RELEASE_BATCH) {
		kvr_ring_release(&c->resp);
		c->resp_taken = 0;
	}
	rc = kvr_ring_peek(&c->resp, &rec);
	if (rc == -EAGAIN) {
		short ev = c->sock_event;

		/* Drained. With an answer still due the server may wait for
		 * room: give it back now. With none, at the next request's
		 * commit (ring_commit says why) or wait. */
		if (c->ring_asked != c->ring_answered) {
			kvr_ring_release(&c->resp);
			c->resp_taken = 0;
		} else {
			c->resp_deferred = true;
		}
		c->sock_event = 0;
		return ev ? sock_event(c, ev) : 0;
	}
	if (rc < 0) {
		kvr_ring_release(&c->resp);
		return kvr__client_break(
		    c, -EPROTO, "response ring damaged: %s", kvr_strerror(rc));
	}
	if (rec.len > c->scratch_bytes) {
		void *s = realloc(c->scratch, rec.len);

		if (!s) {
			kvr_ring_release(&c->resp);
			return kvr__client_break(c, -ENOMEM, "out of memory");
		}
		c->scratch = s;
		c->scratch_bytes = rec.len;
	}
	memcpy(c->scratch, rec.data, rec.len);
	c->resp_taken++;
	c->ring_answered++;
	*r = (struct kvr__rec){
	    .data = c->scratch, .len = rec.len, .type = rec.type};
	return 1;
}

/* Spin, then sleep on the doorbell: see the file comment. */
static int ring_wait(struct kvr_client *c, uint64_t deadline_ns)
{
	struct pollfd p[2];
	int rc, slice;

	/* Room for the server's next answers before we wait for them. */
	give_back(c);
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
	if (rc > 0 &&
	    (p[1].revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR))) {
		c->sock_event = p[1].revents; /* receive reports it */
		return 1;
	}
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
    .batches = true,
    .claim = ring_claim,
    .commit = ring_commit,
    .receive = ring_receive,
    .wait = ring_wait,
    .slots = ring_slots,
    .close = ring_close,
};
