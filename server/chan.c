/* SPDX-License-Identifier: MIT */
/*
 * Connections and channels: the slot table of accepted sockets, the claim
 * and formatting of a channel block in the control segment, the list of
 * active channels the loop polls, the one cleanup path every disconnect
 * takes (hang-up, pidfd, protocol error, unresponsive worker, shutdown),
 * and the counters published to the control segment.
 *
 * Counters are written with relaxed stores by this thread only (single
 * writer; readers just need untorn values) from process-local mirrors: the
 * server never reads a counter back from shared memory to decide anything.
 * This file does not parse requests (disp.c) or handshakes (hello.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/doorbell.h>
#include <kvring/log.h>

#include "chan.h"
#include "ns.h"
#include "uring.h"

/* Relaxed store of a counter: single writer (this thread), see top. */
static inline void put(_Atomic uint64_t *a, uint64_t v)
{
	atomic_store_explicit(a, v, memory_order_relaxed);
}

/* Publish a private cache mirror word by word (same layout, asserted in
 * kvringd.h); relaxed single-writer stores as every counter here. */
static void put_cache(struct kvr_cache_shm *dst,
		      const struct kvr_cache_cnt *src)
{
	_Atomic uint64_t *d = (_Atomic uint64_t *)dst;
	const uint64_t *v = (const uint64_t *)src;

	for (size_t k = 0; k < sizeof(*src) / sizeof(*v); k++)
		put(&d[k], v[k]);
}

/* A channel's observability block starts from zero for every worker. The
 * worker-written half is reset too: no worker maps the block until the
 * welcome, which orders these stores before its first access. */
static void obs_reset(struct kvr_chan_obs_shm *o)
{
	put_cache(&o->cache, &(struct kvr_cache_cnt){0});
	atomic_store_explicit(&o->rtt_every, 0, memory_order_relaxed);
	for (unsigned k = 0; k < KVR_HIST_OPS; k++) {
		kvr_hist_reset(&o->server_lat[k]);
		kvr_hist_reset(&o->worker_rtt[k]);
	}
}

struct kvr_conn *kvr__chan_conn_alloc(struct kvr_srv *s)
{
	/* Linear scan: runs once per accept, never per request. */
	for (uint32_t i = 0; i < s->nconns; i++)
		if (s->conns[i].state == KVR_CONN_FREE)
			return &s->conns[i];
	return NULL;
}

/* A new memfd for channel @i's block: this claim's alone (abi 3.0). The
 * server touches every page now so that neither side faults later. */
static int blk_create(struct kvr_srv *s, uint32_t i, struct kvr_seg *out)
{
	struct kvr_err e = {0};
	char name[KVR_SEG_NAME_MAX + 1];
	int rc;

	snprintf(name, sizeof(name), "kvring-ch%u", i);
	rc = kvr_seg_create_memfd(name, s->geom.channel_bytes, 0, out, &e);
	if (rc < 0) {
		kvr_log_warn("channel %u: block memfd of %u bytes: %s", i,
			     s->geom.channel_bytes, kvr_err_str(&e, rc));
		return rc;
	}
	kvr_seg_prefault(out->base, out->bytes, true, NULL);
	return 0;
}

/*
 * The claim creates the channel's block, a memfd of its own that only
 * this worker will map (with the server), and writes all of it before the
 * worker can see it: the worker gets the block's fd only with the
 * WELCOME, which is sent after this returns, and the ring's own magic
 * store (R0) publishes each ring. A previous owner of channel i keeps at
 * most its old block, which nobody else maps any more. Identity lives in
 * the directory entry, in a memfd no worker is given (abi 4.0); the copy
 * in the block is the worker's own and never read back.
 * On error the channel stays FREE and nothing else changed.
 */
int kvr__chan_claim(struct kvr_srv *s, struct kvr_conn *c)
{
	const struct kvr_ctl_geom *g = &s->geom;
	struct kvr_channel_shm *shm;
	struct kvr_chan_dir_shm *d;
	_Atomic uint64_t *ctr;
	size_t req_bytes = kvr_ring_shm_bytes(g->req_ring_cap);
	size_t resp_bytes = kvr_ring_shm_bytes(g->resp_ring_cap);
	char *req_mem, *resp_mem;
	uint32_t i, gen;
	int rc;

	for (i = 0; i < g->max_channels; i++)
		if (s->chan_conn[i] == -1)
			break;
	if (i == g->max_channels)
		return -EBUSY;
	rc = blk_create(s, i, &c->blk);
	if (rc < 0)
		return rc;
	/* A private counter, never one read back from shared memory. */
	gen = ++s->chan_gen;
	if (gen == 0)
		gen = ++s->chan_gen;

	/* Our own geometry (never the header's) sizes the block. */
	shm = c->blk.base;
	atomic_store_explicit(&shm->state, KVR_CHAN_HANDSHAKE,
			      memory_order_relaxed);
	shm->generation = gen;
	shm->pid = c->pid;
	shm->uid = c->uid;
	shm->gid = c->gid;
	shm->pid_start = c->pid_start;
	shm->ns_id = c->ns_id;
	shm->transport = c->transport;
	shm->connected_ns = s->now_ns;
	shm->req_ring_off = g->req_ring_off;
	shm->resp_ring_off = g->resp_ring_off;
	/* The channel's counters start from zero for every new worker. All
	 * of kvr_cstats_shm is _Atomic uint64_t, so it is walked as such. */
	ctr = (_Atomic uint64_t *)&shm->stats;
	for (size_t k = 0; k < sizeof(shm->stats) / sizeof(*ctr); k++)
		put(&ctr[k], 0);
	obs_reset(kvr_chan_obs(shm));
	kvr_bell_init(&shm->req_bell);
	kvr_bell_init(&shm->resp_bell);

	/* Fresh rings in a fresh block. The worker sees them only after
	 * the welcome (sendmsg orders it). */
	req_mem = (char *)shm + g->req_ring_off;
	resp_mem = (char *)shm + g->resp_ring_off;
	rc = kvr_ring_format(req_mem, req_bytes, g->req_ring_cap);
	if (rc == 0)
		rc = kvr_ring_format(resp_mem, resp_bytes, g->resp_ring_cap);
	if (rc == 0)
		rc = kvr_ring_attach_consumer(&c->req, req_mem, req_bytes,
					      g->req_ring_cap);
	if (rc == 0)
		rc = kvr_ring_attach_producer(&c->resp, resp_mem, resp_bytes,
					      g->resp_ring_cap);
	c->resp_synced = false;
	if (rc < 0) {
		kvr_seg_destroy(&c->blk);
		return rc;
	}
	memcpy(&shm->ns, &s->ns[c->ns_id - 1].desc, sizeof(shm->ns));

	/* The directory entry: what the inspector trusts.
	 * Still HANDSHAKE; kvr__chan_activate() publishes it (R-DIR1). */
	d = kvr_chan_dir(s->chan_dir.base, i);
	atomic_store_explicit(&d->state, KVR_CHAN_HANDSHAKE,
			      memory_order_relaxed);
	atomic_store_explicit(&d->generation, gen, memory_order_relaxed);
	d->fd = c->blk.fd;
	d->pid = c->pid;
	d->uid = c->uid;
	d->gid = c->gid;
	d->pid_start = c->pid_start;
	d->ns_id = c->ns_id;
	d->transport = c->transport;
	d->connected_ns = s->now_ns;

	s->chan_conn[i] = (int32_t)c->idx;
	c->chan = (int32_t)i;
	c->shm = shm;
	c->dir = d;
	memset(c->n_req, 0, sizeof(c->n_req));
	memset(c->n_err, 0, sizeof(c->n_err));
	c->req_hw = c->resp_hw = c->resp_full = c->bytes_in = c->bytes_out = 0;
	c->obs = kvr_chan_obs(shm);
	memset(&c->cache, 0, sizeof(c->cache));
	c->cache_dirty = false;
	c->false_reports = 0;
	c->stage_spare = c->stage_len = 0; /* the store freed the spare */
	return 0;
}

void kvr__chan_activate(struct kvr_srv *s, struct kvr_conn *c)
{
	c->state = KVR_CONN_ACTIVE;
	c->active_pos = s->nactive;
	s->active[s->nactive++] = c->idx;
	/* R-CH1: the identity fields above are visible to a reader whose
	 * acquire load of state sees ACTIVE (the worker, for its block). */
	atomic_store_explicit(&c->shm->state, KVR_CHAN_ACTIVE,
			      memory_order_release);
	/* R-DIR1: the directory entry's fields (kvr__chan_claim) before
	 * its state; pairs with A-DIR1 in kvring-inspect. */
	atomic_store_explicit(&c->dir->state, KVR_CHAN_ACTIVE,
			      memory_order_release);
	s->g.connects++;
	kvr__chan_counters(s, c);
	kvr__chan_gstats(s);
}

/* Remove @c from the active list in O(1) (the last entry moves in). */
static void deactivate(struct kvr_srv *s, struct kvr_conn *c)
{
	uint32_t pos = c->active_pos, last;

	if (pos >= s->nactive || s->active[pos] != c->idx)
		return;
	last = s->active[--s->nactive];
	s->active[pos] = last;
	s->conns[last].active_pos = pos;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* A uid's aggregate into its entry of the per-uid table (abi 4.1), in
 * the directory memfd no worker maps. Relaxed: display only. */
static void uid_put(struct kvr_srv *s, const struct kvr_store_uid_stats *us)
{
	struct kvr_uid_use_shm *u;

	if (!s->chan_dir.base || us->slot >= s->geom.max_channels)
		return;
	u = kvr_uid_use(s->chan_dir.base, &s->geom, us->slot);
	atomic_store_explicit(&u->uid, us->uid, memory_order_relaxed);
	put(&u->reserved_bytes, us->reserved_bytes);
	put(&u->pinned_bytes, us->pinned_bytes);
	put(&u->quota_denied, us->quota_denied);
	atomic_store_explicit(&u->channels, us->channels, memory_order_relaxed);
}

/*
 * Whether @c's process is gone, so that it can no longer write the pool.
 * A readable pidfd says it exited. Without a pidfd (kernels before 5.3)
 * the server cannot watch the process after its socket closed, so it
 * takes the close for the end (docs/reliability.md says so).
 */
static bool process_gone(const struct kvr_conn *c)
{
	struct pollfd p = {.fd = c->pidfd, .events = POLLIN};

	return c->pidfd < 0 || poll(&p, 1, 0) != 0;
}

/* Release the store's state of the channel and log what it held. */
static void release_channel(struct kvr_srv *s, struct kvr_conn *c,
			    const char *why, bool protocol_error)
{
	struct kvr_store_released rel = {0};
	struct kvr_channel_shm *shm = c->shm;
	struct kvr_store_uid_stats us;
	bool had_uid;
	int rc;

	atomic_store_explicit(&shm->state, KVR_CHAN_CLOSING,
			      memory_order_relaxed);
	atomic_store_explicit(&c->dir->state, KVR_CHAN_CLOSING,
			      memory_order_relaxed);
	had_uid = kvr_store_uid_stats(s->store, (uint32_t)c->chan, &us) == 0;
	/* A live process may still copy into the slots of its quarantine:
	 * those stay until it exits (store_quar.c). */
	if (process_gone(c))
		rc = kvr_store_channel_close(s->store, (uint32_t)c->chan,
					     s->now_ns, &rel);
	else
		rc = kvr_store_channel_detach(s->store, (uint32_t)c->chan,
					      s->now_ns, &rel);
	c->detach = rc > 0;
	/* Its uid now holds less, or (its last channel) the entry is free. */
	if (had_uid && kvr_store_uid_slot_stats(s->store, us.slot, &us) == 0)
		uid_put(s, &us);
	kvr_log_peer(
	    protocol_error ? KVR_LOG_WARN : KVR_LOG_INFO, c->pid,
	    "worker disconnected: channel %d pid %d (%s)%s; released %llu "
	    "store transfers (%llu reservations, %llu bytes), %llu "
	    "retrieve transfers, %llu pins, %llu leases, %llu quarantined "
	    "transfers (%llu bytes)%s",
	    c->chan, (int)c->pid, why, rc < 0 ? " [store: bad channel]" : "",
	    (unsigned long long)rel.store_xfers,
	    (unsigned long long)rel.objects_freed,
	    (unsigned long long)rel.bytes_freed,
	    (unsigned long long)rel.retrieve_xfers,
	    (unsigned long long)rel.pins_dropped,
	    (unsigned long long)rel.leases, (unsigned long long)rel.quar_xfers,
	    (unsigned long long)rel.quar_bytes,
	    c->detach ? "; its quarantine stays until the process exits" : "");
	kvr__chan_counters(s, c);
	/* R-CH2: counters above (all zero holdings now) before FREE. */
	atomic_store_explicit(&shm->state, KVR_CHAN_FREE, memory_order_release);
	/* R-DIR2: FREE before the block's fd is closed (and its number
	 * reused): a reader that saw another state re-checks it (A-DIR1). */
	atomic_store_explicit(&c->dir->state, KVR_CHAN_FREE,
			      memory_order_release);
	c->dir->fd = -1;
	/* The worker keeps its own mapping (and sees FREE in it); ours
	 * and our fd go now. */
	kvr_seg_destroy(&c->blk);
	s->chan_conn[c->chan] = c->detach ? KVR_CHAN_DETACHED : -1;
	s->g.disconnect_cleanups++;
}

/* Keep watching @c's process for the quarantine its channel still holds:
 * the pidfd moves from the connection to the channel's detached entry. */
static void detach(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_detached *d = &s->detached[c->chan];

	d->pidfd = c->pidfd;
	d->pid = c->pid;
	d->gen = ++s->detached_gen;
	c->pidfd = -1;
	if (s->ring_ok)
		kvr__uring_poll(
		    s, d->pidfd, POLLIN,
		    kvr_tag_make(KVR_TAG_DETACHED, (uint32_t)c->chan, d->gen),
		    false);
}

void kvr__chan_detached_exit(struct kvr_srv *s, uint32_t ch, uint32_t gen)
{
	struct kvr_store_released rel = {0};
	struct kvr_store_uid_stats us;
	struct kvr_detached *d;
	bool had_uid;

	if (ch >= s->geom.max_channels || s->detached[ch].pidfd < 0 ||
	    s->detached[ch].gen != gen)
		return;
	d = &s->detached[ch];
	if (s->now_ns == 0)
		s->now_ns = kvr_clock_now_ns();
	had_uid = kvr_store_uid_stats(s->store, ch, &us) == 0;
	(void)kvr_store_channel_close(s->store, ch, s->now_ns, &rel);
	if (had_uid && kvr_store_uid_slot_stats(s->store, us.slot, &us) == 0)
		uid_put(s, &us);
	kvr_log_peer(KVR_LOG_INFO, d->pid,
		     "pid %d exited: the quarantine of its closed channel %u "
		     "is free again (%llu transfers, %llu bytes)",
		     (int)d->pid, ch, (unsigned long long)rel.quar_xfers,
		     (unsigned long long)rel.quar_bytes);
	close(d->pidfd);
	d->pidfd = -1;
	s->chan_conn[ch] = -1;
	kvr__chan_gstats(s);
}

/*
 * The single cleanup path. Order matters: the store releases the channel
 * first (so its counters read zero before the block says FREE), then the
 * connection leaves the active list (so no later pass drains its ring),
 * then polls are removed and fds closed (so the worker sees the hang-up),
 * and last the slot's generation moves on (so late completions for this
 * connection are ignored). Safe to call from any handler, any number of
 * times.
 */
void kvr__chan_close(struct kvr_srv *s, struct kvr_conn *c, const char *why,
		     bool protocol_error)
{
	uint32_t gen = c->gen;

	if (c->state == KVR_CONN_FREE)
		return;
	if (s->now_ns == 0)
		s->now_ns = kvr_clock_now_ns();
	kvr_log_peer(KVR_LOG_DEBUG, c->pid,
		     "connection %u (channel %d, pid %d) closed in state %s: "
		     "%s",
		     c->idx, c->chan, (int)c->pid,
		     c->state == KVR_CONN_HELLO ? "hello" : "active",
		     why ? why : "-");
	if (protocol_error)
		s->g.protocol_errors++;
	if (c->chan >= 0)
		release_channel(s, c, why, protocol_error);
	/* After the store let go of its objects' pins and reservations. */
	kvr__ns_put(s, c->ns_id);
	c->ns_id = 0;
	if (c->state == KVR_CONN_HELLO)
		s->npending--;
	if (c->state == KVR_CONN_ACTIVE)
		deactivate(s, c);
	/* The transport's part: out of the polled list (no later pass
	 * drains its ring), its own polls removed, its state freed. */
	c->ops->fini(s, c);
	/* A poll holds a reference to its file: remove every poll so that
	 * the close below really closes (the worker sees the hang-up).
	 * Their completions carry the old generation and are ignored. */
	if (s->ring_ok) {
		kvr__uring_cancel(s, kvr_tag_make(KVR_TAG_SOCK, c->idx, gen));
		if (c->pidfd >= 0)
			kvr__uring_cancel(
			    s, kvr_tag_make(KVR_TAG_PIDFD, c->idx, gen));
		if (c->req_efd >= 0)
			kvr__uring_cancel(
			    s, kvr_tag_make(KVR_TAG_BELL, c->idx, gen));
	}
	if (c->detach)
		detach(s, c);
	c->detach = false;
	c->expired_seen = 0;
	close_fd(&c->sock);
	close_fd(&c->pidfd);
	close_fd(&c->req_efd);
	close_fd(&c->resp_efd);
	free(c->pend);
	c->pend = NULL;
	c->pend_len = 0;
	c->blocked = false;
	c->chan = -1;
	c->shm = NULL;
	c->dir = NULL;
	c->obs = NULL;
	c->ops = NULL;
	c->transport = 0;
	c->hlen = 0;
	c->pid = 0;
	c->gen++;
	c->state = KVR_CONN_FREE;
	kvr__chan_gstats(s);
}

void kvr__chan_proto_error(struct kvr_srv *s, struct kvr_conn *c,
			   const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	kvr_log_peer(KVR_LOG_WARN, c->pid,
		     "protocol error: channel %d pid %d uid %u: %s; "
		     "disconnecting it (other workers are not affected)",
		     c->chan, (int)c->pid, (unsigned)c->uid, what);
	kvr__chan_close(s, c, "protocol error", true);
}

/* Runs once per idle stretch of the loop (kvr__chan_counters_flush), at
 * connect, close and lease expiry, not per request or per batch: about
 * thirty relaxed stores to lines only this thread writes, and the store's
 * per-channel view, which costs O(1) (plain counters of the store), some
 * 340 instructions in all (callgrind), as much as a whole request. */
void kvr__chan_counters(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_store_uid_stats us;
	struct kvr_cstats_shm *st;
	struct kvr_store_chan_stats cs = {0};

	c->counters_due = false;
	if (!c->shm || c->chan < 0)
		return;
	st = &c->shm->stats;
	for (unsigned i = 1; i < KVR_OP__MAX; i++)
		put(&st->requests[i], c->n_req[i]);
	for (unsigned i = 0; i < KVR_ERR_SLOTS; i++)
		put(&st->errors[i], c->n_err[i]);
	kvr_store_chan_stats(s->store, (uint32_t)c->chan, &cs);
	put(&st->reserved_bytes, cs.reserved_bytes);
	put(&st->pins, cs.pins_held);
	put(&st->leases, cs.leases_owned);
	put(&st->transfers, cs.transfers_open);
	put(&st->req_high_water, c->req_hw);
	put(&st->resp_high_water, c->resp_hw);
	put(&st->last_activity_ns, s->now_ns);
	put(&st->bytes_in, c->bytes_in);
	put(&st->bytes_out, c->bytes_out);
	put(&st->resp_ring_full, c->resp_full);
	put(&st->pinned_bytes, cs.pinned_bytes);
	put(&st->oldest_ns, cs.oldest_ns);
	put(&st->quota_denied, cs.quota_denied);
	put(&st->xfers_expired, cs.xfers_expired);
	put(&st->quar_bytes, cs.quar_bytes);
	put(&st->quar_slots, cs.quar_slots);
	if (kvr_store_uid_stats(s->store, (uint32_t)c->chan, &us) == 0)
		uid_put(s, &us);
	if (c->obs) {
		put(&c->obs->stage.staged, cs.staged);
		put(&c->obs->stage.stages, cs.stages);
		put(&c->obs->stage.binds, cs.binds);
		put(&c->obs->stage.binds_existing, cs.binds_existing);
	}
	if (c->cache_dirty && c->obs) {
		put_cache(&c->obs->cache, &c->cache);
		c->cache_dirty = false;
	}
}

void kvr__chan_counters_due(struct kvr_srv *s, struct kvr_conn *c)
{
	c->counters_due = true;
	s->counters_due = true;
}

/* O(polled channels), once per idle stretch or per KVR_SRV_COUNTERS_NS:
 * never per request. Channels of the copy transport publish their own
 * (tport_sock.c). A channel closed meanwhile published at its close. */
void kvr__chan_counters_flush(struct kvr_srv *s)
{
	for (uint32_t i = 0; i < s->npolled; i++) {
		struct kvr_conn *c = &s->conns[s->polled[i]];

		if (c->counters_due)
			kvr__chan_counters(s, c);
	}
	s->counters_due = false;
	s->counters_ns = s->now_ns;
}

/*
 * The per-namespace counters that changed, in the directory memfd (abi
 * 5.0): a worker sees its own namespace in its own block and no other
 * tenant's model or counters. A slot is (re)written whole
 * when its namespace is registered, which may be a freed id reused for
 * another model: generation odd, description, counters and id, then the
 * generation even with release (R-OBS1; kvring-inspect retries or skips
 * a slot whose generation moved while it copied it, A-OBS1). Later
 * counter updates are plain relaxed stores, as everywhere here.
 */
static void put_ns(struct kvr_srv *s)
{
	if (!s->chan_dir.base)
		return;
	for (uint32_t i = 0; i < KVR_SRV_NS_MAX && i < KVR_NS_OBS_MAX; i++) {
		struct kvr_ns_ent *ns = &s->ns[i];
		struct kvr_ns_obs_shm *o;

		if (!ns->used || (!ns->dirty && ns->published))
			continue;
		o = kvr_ns_obs(s->chan_dir.base, &s->geom, i);
		if (!ns->published) {
			atomic_store_explicit(&o->gen, ++ns->obs_gen,
					      memory_order_relaxed);
			/* The odd generation before the slot's new bytes. */
			atomic_thread_fence(memory_order_release);
			memcpy(&o->desc, &ns->desc, sizeof(o->desc));
			put_cache(&o->cache, &ns->cache);
			atomic_store_explicit(&o->id, ns->id,
					      memory_order_relaxed);
			/* R-OBS1: the slot's bytes before the even
			 * generation. */
			atomic_store_explicit(&o->gen, ++ns->obs_gen,
					      memory_order_release);
			ns->published = true;
		} else {
			put_cache(&o->cache, &ns->cache);
		}
		ns->dirty = false;
	}
}

/* Runs when the loop goes to sleep, on every heartbeat and at every
 * disconnect, never per request: kvr_store_stats() is O(log n). */
void kvr__chan_gstats(struct kvr_srv *s)
{
	struct kvr_gstats_shm *g;
	struct kvr_store_stats st;

	if (!s->hdr || !s->store)
		return;
	g = &s->hdr->stats;
	kvr_store_stats(s->store, &st);
	put(&g->used_bytes, st.used_bytes);
	put(&g->committed_bytes, st.committed_bytes);
	put(&g->reserved_bytes, st.reserved_bytes);
	put(&g->objects, st.objects);
	put(&g->reserved_objects, st.reserved_objects);
	put(&g->pins, st.pins);
	put(&g->pinned_bytes, st.pinned_bytes);
	put(&g->leases, st.leases);
	put(&g->transfers, st.transfers);
	put(&g->evictions, st.evictions);
	put(&g->evicted_bytes, st.evicted_bytes);
	put(&g->stores_skipped, st.stores_skipped_existing);
	put(&g->no_room, st.no_room);
	put(&g->workers, s->nactive);
	put(&g->connects, s->g.connects);
	put(&g->disconnect_cleanups, s->g.disconnect_cleanups);
	put(&g->protocol_errors, s->g.protocol_errors);
	put(&g->handshake_refused, s->g.handshake_refused);
	put(&g->requests, s->g.requests);
	put(&g->leases_expired, st.leases_expired);
	put(&g->free_extents, st.free_extents);
	put(&g->largest_free, st.largest_free_bytes);
	put(&g->frag_ppm, (uint64_t)(st.fragmentation * 1e6));
	put(&g->loop_wakeups, s->g.loop_wakeups);
	put(&g->quota_denied, st.quota_denied);
	put(&g->xfers_expired, st.xfers_expired);
	put(&g->corrupt_dropped, st.corrupt_dropped);
	put(&g->corrupt_unconfirmed, s->g.corrupt_unconfirmed);
	put(&s->hdr->quar.xfers, st.quar_xfers);
	put(&s->hdr->quar.slots, st.quar_slots);
	put(&s->hdr->quar.bytes, st.quar_bytes);
	put(&s->hdr->quar.reclaimed, st.quar_reclaimed);
	for (unsigned k = 0; k < 3; k++)
		put(&s->hdr->quar.released[k], st.quar_released[k]);
	put(&s->hdr->quar.detached, st.detached);
	if (!s->obs)
		return;
	put_cache(&s->obs->cache, &s->cache);
	put(&s->obs->stage.staged, st.staged);
	put(&s->obs->stage.stages, st.stages);
	put(&s->obs->stage.binds, st.binds);
	put(&s->obs->stage.binds_existing, st.binds_existing);
	/* The store's evictions split by reason: a namespace freed for
	 * another model, and the rest (LRU victims that made room). */
	put(&s->obs->evictions[KVR_EVICT_ROOM], st.evictions - st.ns_evictions);
	put(&s->obs->evicted_bytes[KVR_EVICT_ROOM],
	    st.evicted_bytes - st.ns_evicted_bytes);
	put(&s->obs->evictions[KVR_EVICT_NAMESPACE], st.ns_evictions);
	put(&s->obs->evicted_bytes[KVR_EVICT_NAMESPACE], st.ns_evicted_bytes);
	put_ns(s);
}

void kvr__chan_count(struct kvr_srv *s, struct kvr_conn *c, uint32_t op,
		     int status)
{
	if (op < 16)
		c->n_req[op]++;
	c->n_err[kvr_err_slot(status)]++;
	s->g.requests++;
}

void kvr__chan_publish(struct kvr_conn *c)
{
	kvr_ring_commit(&c->resp);
	/* Not kvr_ring_used(): as producer our cached view of the worker's
	 * head may be a lap old and would overstate occupancy. */
	c->resp_hw = kvr_ring_high_water(&c->resp);
	/* F1 inside: pairs with the worker's F2 before it sleeps. */
	(void)kvr_bell_notify(&c->shm->resp_bell, c->resp_efd);
}
