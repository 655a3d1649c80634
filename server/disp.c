/* SPDX-License-Identifier: MIT */
/*
 * Request dispatch: run each validated request (kvr_req_parse, by the
 * transport) against the storage engine and build exactly one answer
 * carrying its req_id; after a batch, time it and stage store-ahead's
 * next slot.
 *
 * Trust: a record lives in shared memory the worker can rewrite at any
 * moment, so keys and sizes are copied into private scratch buffers once,
 * after validation, and only the copies are used. A malformed record or a
 * damaged ring disconnects that worker (chan.c cleans up); semantic errors
 * (unknown transfer id, a lease of another channel, ...) are answered
 * with -errno and the worker carries on.
 *
 * Back-pressure: when an answer does not fit in the response ring it is
 * parked in the connection, and the channel consumes nothing more until
 * the worker makes room; answers are never dropped and no other channel
 * waits. The loop disconnects a worker that stays full past --stall-ms.
 *
 * Observability: each request bumps the private mirrors of the cache
 * counters (channel, namespace, global; chan.c publishes them), and each
 * published batch is timed into the server's latency histograms, per op,
 * in the channel block and globally. A batch costs one clock read, taken
 * after its answers are published (off the answer's path). Every record
 * of the batch is given the batch's time, from the newest clock reading
 * known to precede its read (the loop pass's, or the previous publish's;
 * while the loop spins, the start of the pass before the one that found
 * it, estimated from the measured length of an idle pass: lat_start())
 * to just after the publish: exact to about one loop pass for a batch of
 * one, an upper bound for the later records of a longer batch.
 * docs/inspect.md says so too.
 *
 * The transports feed it: the ring transport (tport_ring.c) drains the
 * request ring of each connection the loop serves, the copy transport
 * (tport_sock.c) reads requests from the socket. This file moves no
 * bytes of a ring or a socket itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <kvring/clock.h>
#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/hist.h>
#include <kvring/log.h>

#include "chan.h"
#include "disp.h"
#include "prefault.h"
#include "chunk_sum.h"

/* Which kvr_cache_cnt field cache_add() bumps (they are in this order). */
enum cache_field {
	CF_LOOKUPS,
	CF_LOOKUP_KEYS,
	CF_LOOKUP_HIT_KEYS,
	CF_LOOKUP_HIT_BYTES,
	CF_RETRIEVES,
	CF_RETRIEVE_KEYS,
	CF_RETRIEVE_HIT_KEYS,
	CF_RETRIEVE_BYTES,
	CF_STORE_KEYS_NEW,
	CF_STORE_BYTES_NEW,
	CF_STORE_KEYS_STORED,
	CF_STORE_BYTES_STORED,
	CF_STORE_KEYS_NO_ROOM,
	CF_STORE_KEYS_BUSY,
};

/* Add @v[0..k-1] to the @k cache counters from @f on, of the channel, its
 * namespace and the server (private mirrors; published per batch and per
 * heartbeat). One call per request: the namespace entry is found and the
 * dirty flags set once, not once per counter (callgrind: four single-field
 * calls cost 56 instructions of a lookup's ~470 on the server). */
static void cache_add(struct kvr_srv *s, struct kvr_conn *c, enum cache_field f,
		      const uint64_t *v, unsigned k)
{
	uint64_t *cc = (uint64_t *)&c->cache + f;
	uint64_t *sc = (uint64_t *)&s->cache + f;
	uint64_t *nc = NULL;

	if (c->ns_id >= 1 && c->ns_id <= KVR_SRV_NS_MAX) {
		struct kvr_ns_ent *ns = &s->ns[c->ns_id - 1];

		nc = (uint64_t *)&ns->cache + f;
		ns->dirty = true;
	}
	c->cache_dirty = true;
	for (unsigned i = 0; i < k; i++) {
		cc[i] += v[i];
		sc[i] += v[i];
		if (nc)
			nc[i] += v[i];
	}
}

/* The per-key outcome of a prepare_store, in cache counters. */
static void count_store(struct kvr_srv *s, struct kvr_conn *c,
			const struct kvr_slot_desc *slots, uint32_t n)
{
	uint64_t kn = 0, bn = 0, ks = 0, bs = 0, nr = 0, busy = 0;

	for (uint32_t i = 0; i < n; i++) {
		switch (slots[i].status) {
		case KVR_SLOT_OK:
			kn++;
			bn += s->sizes[i];
			break;
		case KVR_SLOT_EXISTS:
			ks++;
			bs += s->sizes[i];
			break;
		case KVR_SLOT_NOROOM:
			nr++;
			break;
		case KVR_SLOT_BUSY:
			busy++;
			break;
		default:
			break;
		}
	}
	/* CF_STORE_KEYS_NEW .. CF_STORE_KEYS_BUSY, in that order. */
	cache_add(s, c, CF_STORE_KEYS_NEW,
		  (const uint64_t[]){kn, bn, ks, bs, nr, busy}, 6);
}

/* Slots handed out by a prepare_retrieve, in cache counters. */
static void count_retrieve(struct kvr_srv *s, struct kvr_conn *c,
			   const struct kvr_slot_desc *slots, uint32_t hits,
			   uint32_t asked)
{
	uint64_t b = 0;

	for (uint32_t i = 0; i < hits; i++)
		b += slots[i].len;
	/* CF_RETRIEVES .. CF_RETRIEVE_BYTES, in that order. */
	cache_add(s, c, CF_RETRIEVES, (const uint64_t[]){1, asked, hits, b}, 4);
}

/* --test-delay: sleep before answering. A sleep, not a spin, so that the
 * slowed server leaves its CPU to the client and to other processes; the
 * server's histogram times the sleep like any other work. Tests only; the
 * server logged it at start-up. */
static void test_delay(const struct kvr_srv *s)
{
	struct timespec ts = {0, (long)s->cfg.test_delay_us * 1000L};

	if (s->cfg.test_delay_us >= 1000000u)
		ts = (struct timespec){1, 0};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * When the first record of the batch being published was read, at the
 * latest: the newest clock reading known to precede it (this loop pass's
 * start, or this pass's previous publish). While the loop spins it reads
 * the clock only every few passes (loop.c), and the record arrived after
 * the previous pass looked, so the start of that pass is estimated from
 * the measured length of an idle pass: it is then exact to about one
 * pass, not to CLOCK_EVERY of them.
 */
static uint64_t lat_start(const struct kvr_srv *s)
{
	uint64_t t0 = s->now_ns;

	if (s->stale_passes > 1)
		t0 += (uint64_t)(s->stale_passes - 1) * s->pass_ns;
	return t0 > s->lat_mark_ns ? t0 : s->lat_mark_ns;
}

/* Time @n answers of @op, published just before @t1, from @t0: into
 * the global histogram and, with --histograms per-channel, the
 * channel's. */
static void hist_record(struct kvr_srv *s, struct kvr_conn *c, uint32_t op,
			uint64_t n, uint64_t t0, uint64_t t1)
{
	int k = kvr_hist_op_slot(op);

	if (k >= 0 && n) {
		if (s->chan_hist_on)
			kvr_hist_add(&c->obs->server_lat[k], t1 - t0, n);
		kvr_hist_add(&s->obs->lat[k], t1 - t0, n);
	}
}

/* KVR_OP_STATS: the global counters plus what the asking channel holds. */
static void fill_stats(struct kvr_srv *s, struct kvr_conn *c,
		       struct kvr_stats_wire *w)
{
	struct kvr_store_stats st;
	struct kvr_store_chan_stats cs = {0};

	kvr_store_stats(s->store, &st);
	kvr_store_chan_stats(s->store, (uint32_t)c->chan, &cs);
	memset(w, 0, sizeof(*w));
	w->pool_bytes = st.pool_bytes;
	w->used_bytes = st.used_bytes;
	w->reserved_bytes = st.reserved_bytes;
	w->objects = st.objects;
	w->pins = st.pins;
	w->leases = st.leases;
	w->evictions = st.evictions;
	w->workers = s->nactive;
	w->chan_reserved_bytes = cs.reserved_bytes;
	w->chan_pins = cs.pins_held;
	w->chan_leases = cs.leases_owned;
	w->chan_transfers = cs.transfers_open;
}

/* A commit_store: sums first (@nsums of them in s->sizes), since a wrong
 * count changes nothing, not even the transfer, which stays open for a
 * correct commit; then the commit, and with L2 the queued upload. */
static int commit_store(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer,
			uint32_t nsums)
{
	int rc;

	if (nsums && (rc = kvr__chunk_sum_store(s, c, xfer, nsums)) < 0) {
		/* A commit is its worker answering for the transfer, even
		 * one its deadline put in quarantine (store_quar.c). */
		(void)kvr_store_settle(s->store, (uint32_t)c->chan, xfer);
		return rc;
	}
	if (s->disk)
		kvr_dsrv_commit_keys(s, c, xfer);
	if (s->l2) /* write-behind: commit, then queue the upload */
		rc = kvr_l2_commit_store(s, c, xfer);
	else
		rc = kvr_store_commit_store(s->store, (uint32_t)c->chan, xfer,
					    s->now_ns);
	if (s->disk) /* write-through, or the pool's cold end written */
		kvr_dsrv_commit_done(s, rc);
	return rc;
}

/*
 * The early bind (docs/protocol.md, "Store-ahead"): staged slot @xfer gets
 * the request's one key and size, answered like a one-key prepare_store
 * (OK: *id_out = @xfer, to commit; EXISTS or BUSY: *id_out = 0, the slot
 * stays staged). Return the OK count (0 or 1) or -errno.
 */
static int prepare_bind(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer,
			struct kvr_slot_desc *slots, uint64_t *id_out)
{
	uint32_t ch = (uint32_t)c->chan;
	struct kvr_slot_desc d;
	uint64_t deadline;
	int rc;

	if (c->transport == KVR_TRANSPORT_COPY)
		return -EOPNOTSUPP;
	rc = kvr_store_stage_desc(s->store, ch, xfer, &d, &deadline);
	if (rc < 0)
		return rc;
	rc = kvr_store_bind(s->store, ch, xfer, &s->keys[0], s->sizes[0]);
	if (rc < 0)
		return rc;
	slots[0] = (struct kvr_slot_desc){0, 0, rc, 0};
	*id_out = 0;
	if (rc != KVR_SLOT_OK)
		return 0;
	slots[0].off = d.off;
	slots[0].len = s->sizes[0];
	*id_out = xfer;
	return 1;
}

/* Put staged slot @id into the answer: count 1, its id, and its lifetime
 * in ms in value's high word (saturated; a trusted channel's never ends). */
static void answer_stage(struct kvr_srv *s, struct kvr_resp_view *rv,
			 uint64_t id, const struct kvr_slot_desc *d,
			 uint64_t deadline_ns)
{
	uint64_t ms =
	    deadline_ns > s->now_ns ? (deadline_ns - s->now_ns) / 1000000u : 0;

	if (ms > UINT32_MAX)
		ms = UINT32_MAX;
	*(struct kvr_slot_desc *)rv->slots = *d;
	rv->hdr.handle = id;
	rv->hdr.count = 1;
	rv->hdr.value |= ms << KVR_COMMIT_STAGE_MS_SHIFT;
}

/*
 * Hand the worker a staged slot of @len bytes: the spare staged after an
 * earlier batch when it is still there and that size (else it is given
 * back and one is staged in line), and ask for a new spare after the
 * publish. A channel so holds at most two staged slots: the worker's and
 * the spare.
 */
static void hand_stage(struct kvr_srv *s, struct kvr_conn *c, uint64_t len,
		       struct kvr_resp_view *rv)
{
	uint32_t ch = (uint32_t)c->chan;
	uint64_t id = c->stage_spare, deadline = 0;
	struct kvr_slot_desc d;

	c->stage_spare = 0;
	if (id && (kvr_store_stage_desc(s->store, ch, id, &d, &deadline) < 0 ||
		   d.len != len)) {
		/* Reclaimed at its deadline, or another size: not that one
		 * (an abort of a reclaimed id is a harmless error). */
		(void)kvr_store_abort_store(s->store, ch, id, s->now_ns);
		id = 0;
	}
	if (!id && s->prefault)
		kvr__prefault_place(s);
	if (!id && (kvr_store_stage(s->store, ch, c->ns_id, len, s->now_ns, &d,
				    &id) <= 0 ||
		    kvr_store_stage_desc(s->store, ch, id, &d, &deadline) < 0))
		id = 0;
	if (id)
		answer_stage(s, rv, id, &d, deadline);
	c->stage_len = len;
}

/*
 * Store-ahead (docs/protocol.md): a commit_store that binds a staged slot
 * (KVR_REQ_BIND) and/or asks for the next one (KVR_REQ_STAGE). Only the
 * ring transport: the copy transport's payload follows a prepare's slots,
 * which a staged slot never had. The commit's own outcome is the answer's
 * status; a slot that could not be staged only leaves count 0.
 */
static int commit_ahead(struct kvr_srv *s, struct kvr_conn *c,
			const struct kvr_req_view *v, struct kvr_resp_view *rv)
{
	uint32_t ch = (uint32_t)c->chan, flags = v->hdr.flags;
	uint64_t xfer = v->hdr.handle, len, deadline = 0;
	struct kvr_slot_desc d;
	int rc;

	if (c->transport == KVR_TRANSPORT_COPY)
		return -EOPNOTSUPP;
	if (flags & KVR_REQ_BIND) {
		/* s->sizes holds the words: key lo, key hi, size (, sum). */
		struct kvr_key k = {s->sizes[0], s->sizes[1]};

		len = s->sizes[2];
		rc = kvr_store_bind(s->store, ch, xfer, &k, len);
		if (rc < 0) {
			/* The commit answers for a quarantined slot. */
			(void)kvr_store_settle(s->store, ch, xfer);
			return rc;
		}
		rv->hdr.value = (uint64_t)rc;
		if (rc != KVR_SLOT_OK) {
			/* Rule 1: nothing stored; the slot stays staged and
			 * goes back to the worker for its next store. */
			cache_add(
			    s, c, CF_STORE_KEYS_STORED,
			    (const uint64_t[]){rc == KVR_SLOT_EXISTS,
					       rc == KVR_SLOT_EXISTS ? len : 0},
			    2);
			if (rc == KVR_SLOT_BUSY)
				cache_add(s, c, CF_STORE_KEYS_BUSY,
					  (const uint64_t[]){1}, 1);
			if (kvr_store_stage_desc(s->store, ch, xfer, &d,
						 &deadline) == 0)
				answer_stage(s, rv, xfer, &d, deadline);
			return 0;
		}
		if (flags & KVR_REQ_SUMS)
			s->sizes[0] = s->sizes[KVR_BIND_WORDS];
		/* Cannot fail on a transfer just bound (one reservation,
		 * one sum); an error still comes back as the status. */
		rc = commit_store(s, c, xfer, flags & KVR_REQ_SUMS ? 1 : 0);
		if (rc < 0)
			return rc;
		cache_add(s, c, CF_STORE_KEYS_NEW, (const uint64_t[]){1, len},
			  2);
	} else {
		len = kvr_store_xfer_len(s->store, ch, xfer);
		rc = commit_store(s, c, xfer, v->words ? v->hdr.count : 0);
		if (rc < 0)
			return rc;
	}
	if ((flags & KVR_REQ_STAGE) && len)
		hand_stage(s, c, len, rv);
	return 0;
}

/*
 * After a batch's answers are published: stage the spare that the next
 * commit asking for a slot hands out, so that its answer waits only for
 * the bind and the commit. Nothing staged (no room, quota): the next
 * commit stages in line, or goes without.
 */
static void stage_spare(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_slot_desc d;
	uint64_t id = 0;

	if (s->prefault) /* still zeroing: below its line first */
		kvr__prefault_place(s);
	if (!c->stage_spare &&
	    kvr_store_stage(s->store, (uint32_t)c->chan, c->ns_id, c->stage_len,
			    s->now_ns, &d, &id) > 0)
		c->stage_spare = id;
	c->stage_len = 0;
}

size_t kvr__disp_exec(struct kvr_srv *s, struct kvr_conn *c,
		      const struct kvr_req_view *v, uint32_t *type_out)
{
	/* The store writes slots in place, where the encoder expects them. */
	struct kvr_slot_desc *slots = kvr_resp_slots_at(s->ans);
	struct kvr_resp_view rv = {.op = v->op, .slots = slots};
	struct kvr_resp_hdr *r = &rv.hdr;
	struct kvr_stats_wire stats;
	uint32_t n = v->hdr.count, ch = (uint32_t)c->chan, ns = c->ns_id;
	uint64_t id = 0, now = s->now_ns;
	int rc = 0, len;

	r->req_id = v->hdr.req_id;
	*type_out = KVR_RESP_BIT | v->op;
	/* Private copies: the worker may rewrite the ring under us. */
	if (n && v->keys)
		memcpy(s->keys, v->keys, (size_t)n * sizeof(*s->keys));
	if (n && v->sizes)
		memcpy(s->sizes, v->sizes, (size_t)n * sizeof(*s->sizes));
	/* A commit's sums or offsets (chunk_sum.c) go to the same scratch. */
	if (n && v->words)
		memcpy(s->sizes, v->words, (size_t)n * sizeof(*s->sizes));
	if (s->stopping) {
		rc = -ESHUTDOWN;
		goto out;
	}
	if (v->op == s->cfg.test_delay_op)
		test_delay(s);

	switch (v->op) {
	case KVR_OP_LOOKUP:
		/* Read-through: answered later by disk_srv.c or l2_srv.c
		 * (length 0); the disk first, the L2 if the disk holds
		 * nothing after the pool's hits. */
		if (s->disk && (v->hdr.flags & KVR_REQ_L2) &&
		    kvr_dsrv_lookup(s, c, v))
			return 0;
		if (s->l2 && (v->hdr.flags & KVR_REQ_L2) &&
		    kvr_l2_lookup(s, c, v))
			return 0;
		rc = kvr_store_lookup(s->store, ch, ns, s->keys, n,
				      v->hdr.flags & KVR_REQ_PIN, now, &id);
		if (rc >= 0) {
			r->value = (uint64_t)rc;
			r->handle = id;
			/* CF_LOOKUPS .. CF_LOOKUP_HIT_BYTES, in order. */
			cache_add(s, c, CF_LOOKUPS,
				  (const uint64_t[]){
				      1, n, (uint64_t)rc,
				      kvr_store_last_hit_bytes(s->store)},
				  4);
		}
		break;
	case KVR_OP_RELEASE:
		rc = kvr_store_release_lease(s->store, ch, v->hdr.handle, now);
		break;
	case KVR_OP_PREPARE_STORE:
		if (v->hdr.flags & KVR_REQ_BIND) {
			rc = prepare_bind(s, c, v->hdr.handle, slots, &id);
			goto prepared;
		}
		if (s->prefault) /* still zeroing: below its line first */
			kvr__prefault_place(s);
		rc = kvr_store_prepare_store(s->store, ch, ns, s->keys,
					     s->sizes, n, now, slots, &id);
	prepared:
		if (rc >= 0) {
			r->value = (uint64_t)rc;
			r->handle = id;
			r->count = n;
			count_store(s, c, slots, n);
		}
		break;
	case KVR_OP_COMMIT_STORE:
		if (v->hdr.flags & (KVR_REQ_BIND | KVR_REQ_STAGE)) {
			rc = commit_ahead(s, c, v, &rv);
			break;
		}
		rc = commit_store(s, c, v->hdr.handle, v->words ? n : 0);
		break;
	case KVR_OP_ABORT_STORE:
		rc = kvr_store_abort_store(s->store, ch, v->hdr.handle, now);
		break;
	case KVR_OP_PREPARE_RETRIEVE:
		if (v->hdr.flags & KVR_REQ_BY_LEASE)
			rc = kvr_store_prepare_retrieve_lease(
			    s->store, ch, v->hdr.handle, now, slots,
			    s->max_keys, &id);
		else
			rc = kvr_store_prepare_retrieve(
			    s->store, ch, ns, s->keys, n, now, slots, &id);
		if (rc >= 0) {
			/* value: the stored prefix, which the pin quota may
			 * have cut to count (docs/protocol.md). */
			r->value = v->hdr.flags & KVR_REQ_BY_LEASE
				       ? (uint64_t)rc
				       : kvr_store_last_stored(s->store);
			r->handle = id;
			r->count = (uint32_t)rc;
			count_retrieve(s, c, slots, (uint32_t)rc,
				       v->hdr.flags & KVR_REQ_BY_LEASE ? 0 : n);
		}
		break;
	case KVR_OP_COMMIT_RETRIEVE:
		/* Corrupt slots are judged while this transfer still pins
		 * them; value says how many objects were dropped. */
		if (v->words)
			r->value =
			    kvr__chunk_sum_report(s, c, v->hdr.handle, n);
		rc =
		    kvr_store_commit_retrieve(s->store, ch, v->hdr.handle, now);
		break;
	case KVR_OP_PING:
		r->value = now;
		break;
	case KVR_OP_STATS:
		fill_stats(s, c, &stats);
		rv.stats = &stats;
		break;
	default:
		rc = -EBADMSG; /* unreachable: kvr_req_parse checked op */
		break;
	}
out:
	r->status = rc < 0 ? rc : 0;
	if (rc < 0)
		r->count = 0;
	/* Asked for sums: slot flags say which have one, and the sums
	 * follow the slots (docs/protocol.md). */
	if (v->op == KVR_OP_PREPARE_RETRIEVE && (v->hdr.flags & KVR_REQ_SUMS) &&
	    r->count)
		rv.sums = kvr_store_last_sums(s->store);
	/* A stats answer always has its body (zeros on error), as
	 * kvr_resp_parse() requires. s->ans holds the largest answer, and
	 * the store only writes valid slot statuses: encoding cannot fail. */
	len = kvr_resp_encode(&rv, s->ans, s->ans_cap);
	kvr_assert(len > 0);
	kvr__chan_count(s, c, v->op, r->status);
	/* --log-level debug: each request, through the peer rate limit (a
	 * burst per worker, then one line a second, and a count). The
	 * level is fixed at start: a load of our own config, no call. */
	if (s->cfg.log_level >= KVR_LOG_DEBUG)
		kvr_log_peer(KVR_LOG_DEBUG, c->pid,
			     "channel %d pid %d: %s req %llu, %u keys, flags "
			     "0x%x -> %s, value %llu, count %u",
			     c->chan, (int)c->pid, kvr_op_name(v->op),
			     (unsigned long long)v->hdr.req_id, n,
			     (unsigned)v->hdr.flags,
			     rc < 0 ? kvr_strerror(rc) : "ok",
			     (unsigned long long)r->value, r->count);
	return (size_t)len;
}

/*
 * After a batch's answers are published (@nop: answers by op, NULL when
 * none): time them, with one clock read, into the channel's and the
 * global histograms; then, with store-ahead, stage the next slot.
 */
void kvr__disp_batch_done(struct kvr_srv *s, struct kvr_conn *c,
			  const uint8_t *nop)
{
	if (nop && s->hist_on) {
		uint64_t t0 = lat_start(s), t1 = kvr_clock_now_ns();

		if (t0 > t1) /* a pass estimate too long */
			t0 = s->now_ns > s->lat_mark_ns ? s->now_ns
							: s->lat_mark_ns;
		s->lat_mark_ns = t1;
		for (uint32_t op = 1; op < KVR_OP__MAX; op++)
			if (nop[op])
				hist_record(s, c, op, nop[op], t0,
					    s->lat_mark_ns);
	}
	if (c->stage_len)
		stage_spare(s, c);
}

void kvr__disp_time_parked(struct kvr_srv *s, struct kvr_conn *c, uint32_t op)
{
	if (s->hist_on) {
		s->lat_mark_ns = kvr_clock_now_ns();
		hist_record(s, c, op, 1, c->blocked_since_ns, s->lat_mark_ns);
	}
}
