/* SPDX-License-Identifier: MIT */
/*
 * The ring transport: the shared-memory request and response rings of a
 * channel block. The loop drains the request ring of every connection it
 * serves in batches (kvr__tport_ring_drain): each record is validated
 * (kvr_req_parse), run by the dispatcher (disp.c) and answered with one
 * record in the response ring, and the worker's response doorbell is rung
 * once per batch, only if it sleeps. The socket then only reports hang-up
 * or BYE.
 *
 * Back-pressure: when an answer does not fit in the response ring it is
 * parked in the connection, and the channel consumes nothing more until
 * the worker makes room; answers are never dropped and no other channel
 * waits. The loop disconnects a worker that stays full past --stall-ms.
 *
 * Trust: the worker can rewrite its ring positions and records at any
 * moment; a damaged ring or a malformed record disconnects that worker
 * (chan.c cleans up) after the earlier records of the batch were
 * answered. The copy transport is tport_sock.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <kvring/error.h>

#include "chan.h"
#include "disp.h"
#include "tport_ring.h"

/*
 * What a ring error says about the worker's writes: on the request ring
 * (@resp false) the worker owns the tail and the records, on the response
 * ring (@resp true) the head. Other errors are said as they are.
 */
static const char *ring_damage(int rc, bool resp)
{
	static const struct {
		int rc;
		const char *req, *resp;
	} says[] = {
	    {-EPROTO, "tail moved backwards", "head moved backwards"},
	    {-ERANGE, "tail more than the capacity ahead of the head",
	     "head ahead of what the server published"},
	    {-EILSEQ, "tail not 8-byte aligned", "head not 8-byte aligned"},
	    {-EBADMSG, "record header fails its check (garbage)", NULL},
	    {-ENOMSG, "record of reserved type 0", NULL},
	    {-EOVERFLOW, "record runs past the tail or the ring's end", NULL},
	};

	for (size_t i = 0; i < sizeof(says) / sizeof(says[0]); i++)
		if (says[i].rc == rc && (resp ? says[i].resp : says[i].req))
			return resp ? says[i].resp : says[i].req;
	return kvr_strerror(rc);
}

static uint64_t chan_requests(const struct kvr_conn *c)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < 16; i++)
		n += c->n_req[i];
	return n;
}

/* Write one answer record. A claim at the ring's end may place a padding
 * record and answer -EAGAIN although room waits at the start: one more
 * claim takes it. Nothing is committed or rung here: the caller parks the
 * answer and publishes once (a stalled worker must not cost a fence and
 * an eventfd write on every loop pass). */
static int put_answer(struct kvr_conn *c, uint32_t type, const void *buf,
		      size_t len)
{
	void *p;
	int rc;

	rc = kvr_ring_claim(&c->resp, type, (uint32_t)len, &p);
	if (rc == -EAGAIN)
		rc = kvr_ring_claim(&c->resp, type, (uint32_t)len, &p);
	if (rc < 0)
		return rc;
	memcpy(p, buf, len);
	return 0;
}

/* Make a batch of answers visible with one release store (R1 of the
 * ring) and wake the worker only if it announced it sleeps. */
static void publish(struct kvr_conn *c)
{
	kvr__chan_publish(c);
}

/* Retry the parked answer. Return true when the channel may go on. */
static bool flush_pending(struct kvr_srv *s, struct kvr_conn *c)
{
	int rc = put_answer(c, c->pend_type, c->pend, c->pend_len);

	if (rc == -EAGAIN)
		return false;
	if (rc < 0) {
		kvr__chan_proto_error(s, c, "response ring damaged: %s",
				      kvr_strerror(rc));
		return false;
	}
	c->blocked = false;
	publish(c);
	/* The parked request was read before it was parked. */
	kvr__disp_time_parked(s, c, c->pend_type & ~KVR_RESP_BIT);
	return true;
}

/* Park the answer in s->ans: the response ring is full. */
static int park(struct kvr_srv *s, struct kvr_conn *c, uint32_t type,
		size_t len)
{
	if (!c->pend) {
		c->pend = malloc(s->ans_cap);
		if (!c->pend)
			return -ENOMEM;
	}
	memcpy(c->pend, s->ans, len);
	c->pend_len = len;
	c->pend_type = type;
	c->blocked = true;
	c->blocked_since_ns = s->now_ns;
	c->resp_full++;
	return 0;
}

/*
 * Every record is handled completely (parsed, executed, answered) before
 * the next is looked at, so a malformed record later in the batch cannot
 * undo the effects of earlier, valid ones: they are answered, and only
 * then is the worker cut off. A parked answer means the request it
 * answers was executed already; the channel resumes by delivering it.
 */
unsigned kvr__tport_ring_drain(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_ring_rec rec;
	struct kvr_req_view v;
	unsigned handled = 0, answered = 0;
	uint8_t nop[KVR_OP__MAX] = {0}; /* answers in this batch, by op */
	uint32_t type;
	uint64_t used;
	size_t len;
	int rc;

	if (c->blocked && !flush_pending(s, c))
		return 0;
	while (handled < KVR_SRV_BATCH) {
		rc = kvr_ring_peek(&c->req, &rec);
		if (rc == -EAGAIN)
			break;
		if (rc < 0) {
			if (answered)
				publish(c);
			kvr__chan_proto_error(
			    s, c,
			    "request ring damaged (%s) after "
			    "%llu requests",
			    ring_damage(rc, false),
			    (unsigned long long)chan_requests(c));
			return handled;
		}
		if (!c->resp_synced) {
			kvr_ring_producer_sync(&c->resp);
			c->resp_synced = true;
		}
		used = kvr_ring_used(&c->req);
		if (used > c->req_hw)
			c->req_hw = used;
		rc =
		    kvr_req_parse(rec.type, rec.data, rec.len, s->max_keys, &v);
		if (rc < 0) {
			if (answered)
				publish(c);
			kvr__chan_proto_error(
			    s, c,
			    "malformed request: type %u (%s), "
			    "%u bytes: %s",
			    rec.type, kvr_op_name(rec.type), rec.len,
			    kvr_strerror(rc));
			return handled;
		}
		handled++;
		len = kvr__disp_exec(s, c, &v, &type);
		if (len == 0)
			continue; /* an L2 read-through answers later */
		rc = put_answer(c, type, s->ans, len);
		if (rc == -EAGAIN) {
			rc = park(s, c, type, len);
			if (rc == 0)
				break;
		}
		if (rc < 0) {
			kvr__chan_proto_error(s, c,
					      "cannot answer: response ring "
					      "damaged by the worker (%s)",
					      ring_damage(rc, true));
			return handled;
		}
		answered++;
		nop[v.op]++; /* v.op < KVR_OP__MAX: kvr_req_parse checked */
	}
	/* Answers first: the channel counters (some thirty stores and a
	 * store-stats call) are for the inspector and must not sit on every
	 * round trip's critical path, nor between a batch and the next:
	 * they are only marked due here, and the loop publishes them once
	 * it idles (at most KVR_SRV_COUNTERS_NS later). A worker that reads
	 * its answer may see older counters for that moment; nothing
	 * decides on them.
	 * The release below zeroes the requests' bytes, stores that would
	 * otherwise be ahead of the answer's in the store buffer. */
	if (answered)
		publish(c);
	/* Their latencies; store-ahead's next staged slot after them. */
	kvr__disp_batch_done(s, c, answered ? nop : NULL);
	/* One release for the whole batch (R2 in the ring). */
	kvr_ring_release(&c->req);
	/* The channel's counters: published when the loop idles. */
	if (handled)
		kvr__chan_counters_due(s, c);
	return handled;
}

/* ---- The operations (struct kvr_conn_ops) ---- */

/* Nothing to set up: the channel block holds the rings (chan.c). */
static int ring_init(struct kvr_srv *s, struct kvr_conn *c)
{
	(void)s;
	(void)c;
	return 0;
}

/* Join the channels the loop drains (loop.c drain_all, sleep_once). */
static void ring_start(struct kvr_srv *s, struct kvr_conn *c)
{
	c->polled_pos = s->npolled;
	s->polled[s->npolled++] = c->idx;
	c->hot_pos = KVR_SRV_NOT_HOT; /* until a full scan finds a request */
}

void kvr__tport_ring_heat(struct kvr_srv *s, struct kvr_conn *c)
{
	c->hot_pos = s->nhot;
	s->hot[s->nhot++] = c->idx;
}

void kvr__tport_ring_cool(struct kvr_srv *s, struct kvr_conn *c)
{
	uint32_t pos = c->hot_pos, last;

	if (pos >= s->nhot || s->hot[pos] != c->idx)
		return;
	c->hot_pos = KVR_SRV_NOT_HOT;
	last = s->hot[--s->nhot];
	if (last != c->idx) {
		s->hot[pos] = last;
		s->conns[last].hot_pos = pos;
	}
}

/* Leave that list in O(1) (the last entry moves in); idempotent. */
static void ring_fini(struct kvr_srv *s, struct kvr_conn *c)
{
	uint32_t pos = c->polled_pos, last;

	if (pos >= s->npolled || s->polled[pos] != c->idx)
		return;
	kvr__tport_ring_cool(s, c);
	last = s->polled[--s->npolled];
	s->polled[pos] = last;
	s->conns[last].polled_pos = pos;
}

/* After the welcome the socket carries nothing but an optional BYE; it
 * is there to report hang-up. */
static void ring_readable(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_frame f;
	ssize_t n;

	n = recv(c->sock, &f, sizeof(f), MSG_DONTWAIT);
	if (n == 0) {
		kvr__chan_close(s, c, "socket hang-up", false);
	} else if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			kvr__chan_close(s, c, strerror(errno), false);
	} else if (n == (ssize_t)sizeof(f) && f.type == KVR_FRAME_BYE &&
		   f.len == 0) {
		kvr__chan_close(s, c, "worker said bye", false);
	} else {
		kvr__chan_proto_error(s, c,
				      "unexpected %zd bytes on the socket "
				      "(shared-memory transport)",
				      n);
	}
}

/* The ring transport never arms a POLLOUT. */
static void ring_writable(struct kvr_srv *s, struct kvr_conn *c)
{
	(void)s;
	(void)c;
}

/* Its response ring stayed full (an answer parked) for too long. */
static bool ring_stalled(const struct kvr_conn *c, uint64_t now_ns,
			 uint64_t stall_ns)
{
	return c->blocked && now_ns - c->blocked_since_ns > stall_ns;
}

static void ring_shutdown(struct kvr_srv *s, struct kvr_conn *c)
{
	/* s->stopping makes every answer -ESHUTDOWN. Bounded: a full
	 * response ring or a worker that keeps writing stops the loop. */
	for (int i = 0; i < 64 && c->state == KVR_CONN_ACTIVE; i++)
		if (kvr__tport_ring_drain(s, c) == 0)
			break;
}

const struct kvr_conn_ops kvr__tport_ring_ops = {
    .init = ring_init,
    .start = ring_start,
    .readable = ring_readable,
    .writable = ring_writable,
    .stalled = ring_stalled,
    .shutdown = ring_shutdown,
    .fini = ring_fini,
    .late_answers = true,
};
