/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - copying what the inspector shows out of the live mapping
 * into a struct ins_snap in private memory. Every renderer reads only the
 * copy: a value read twice from shared memory may differ between the two
 * reads (the server keeps running), and a value another process wrote is
 * untrusted, so it is read once here, under the SIGBUS guard, and from
 * then on it is plain data. This file decides how each field is read
 * (which atomic order, which re-reads); it does not judge the values
 * (check.c does) or format them (the renderers do).
 *
 * Consistency is per value, not per snapshot: counters are independent
 * relaxed loads, so a sum of them can be off for an instant while the
 * server updates them. --check allows for that by confirming violations
 * across several snapshots (check.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/clock.h>
#include <kvring/proc.h>

#include "inspect.h"

/*
 * Relaxed is enough for every counter: the server is each one's single
 * writer, an aligned 64-bit atomic load is never torn, and no counter is
 * used to decide whether other memory may be read.
 */
#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* Tries of the channel identity copy before the last copy is shown as is. */
#define CHAN_COPY_TRIES 8

/* Room for one snapshot's channels, sized from the validated geometry (one
 * dummy entry when the geometry is bad: only --check gets that far, and it
 * reads no channel). Return: a zeroed array for free(), or NULL. */
struct ins_chan_snap *ins_chan_alloc(const struct ins_attach *a)
{
	return calloc(a->geom_ok ? a->g.max_channels : 1,
		      sizeof(struct ins_chan_snap));
}

/*
 * One ring's positions and health, read with kvr_ring_check() (A4 in the
 * ring's memory-order list: head and tail are re-read until two reads
 * agree, so the pair is one the ring really had). The capacity passed is
 * OUR geometry's; a ring header that records another is -EPROTO.
 */
static void snap_ring(struct ins_ring_snap *r, const void *mem, uint32_t cap)
{
	r->cap = cap;
	r->rc = kvr_ring_check(mem, kvr_ring_shm_bytes(cap), cap, &r->s);
}

/*
 * Copies channel @i. The identity comes from the channel's directory
 * entry, in a memfd that only the server writes (abi 4.0; workers never
 * get it):
 * plain data the server writes while claiming the channel and publishes
 * with its release store of state (R-DIR1). So it is copied between two
 * reads of (state, generation) and copied again if either changed: a
 * seqlock read without the writer's cooperation. A channel that keeps
 * changing gets CHAN_COPY_TRIES attempts, then the last copy is shown as
 * is. Counters, bells and rings come from the channel's own block, mapped
 * through the server's descriptor (ins_chan_block); a block we may not
 * open (not root nor the server's uid) leaves them zero, with blk_rc
 * saying why.
 */
static void snap_chan(const struct ins_attach *a, uint32_t i,
		      struct ins_chan_snap *c)
{
	struct kvr_chan_dir_shm *d = kvr_chan_dir(a->dir.base, i);
	const struct kvr_channel_shm *ch;
	const char *base;
	uint32_t st, gen;

	memset(c, 0, sizeof(*c));
	for (int tries = 0; tries < CHAN_COPY_TRIES; tries++) {
		/*
		 * A-INS1: acquire on state, so the identity written before
		 * the server published the state is seen with it (pairs with
		 * R-DIR1/R-DIR2, the server's stores of state when it claims
		 * and frees the channel).
		 */
		st = atomic_load_explicit(&d->state, memory_order_acquire);
		gen =
		    atomic_load_explicit(&d->generation, memory_order_relaxed);
		c->pid = d->pid;
		c->uid = d->uid;
		c->gid = d->gid;
		c->pid_start = d->pid_start;
		c->ns_id = d->ns_id;
		c->transport = d->transport;
		c->connected_ns = d->connected_ns;
		/* A-INS1 (second half): orders the copies above before the
		 * re-read below, so an unchanged (state, generation)
		 * brackets all of them. */
		atomic_thread_fence(memory_order_acquire);
		if (st ==
			atomic_load_explicit(&d->state, memory_order_relaxed) &&
		    gen == atomic_load_explicit(&d->generation,
						memory_order_relaxed))
			break;
	}
	c->idx = i;
	c->state = st;
	c->generation = gen;
	/* By (pid, start time): a worker's pid reused by another process
	 * reads as dead. A free channel's pid is stale by definition. */
	c->alive = st != KVR_CHAN_FREE && kvr_proc_alive(c->pid, c->pid_start);
	c->req.cap = a->g.req_ring_cap;
	c->resp.cap = a->g.resp_ring_cap;
	if (st == KVR_CHAN_FREE) {
		/* No block: a free channel has none (abi 3.0). */
		c->req_ring_off = a->g.req_ring_off;
		c->resp_ring_off = a->g.resp_ring_off;
		c->req.rc = c->resp.rc = -ENOENT;
		return;
	}
	ch = ins_chan_block(a, i, gen, &c->blk_rc);
	if (!ch) {
		c->req_ring_off = a->g.req_ring_off;
		c->resp_ring_off = a->g.resp_ring_off;
		c->req.rc = c->resp.rc = c->blk_rc;
		return;
	}
	base = (const char *)ch;
	c->req_ring_off = ch->req_ring_off;
	c->resp_ring_off = ch->resp_ring_off;
	/* The model as the worker's block shows it: the server writes it
	 * there, the worker could overwrite only its own. */
	memcpy(&c->ns, &ch->ns, sizeof(c->ns));
	ins_copy_clean(c->ns.model, sizeof(c->ns.model), ch->ns.model,
		       sizeof(ch->ns.model));
	for (int k = 0; k < 16; k++)
		c->requests[k] = LD(ch->stats.requests[k]);
	for (int k = 0; k < KVR_ERR_SLOTS; k++)
		c->errors[k] = LD(ch->stats.errors[k]);
	c->reserved_bytes = LD(ch->stats.reserved_bytes);
	c->pins = LD(ch->stats.pins);
	c->leases = LD(ch->stats.leases);
	c->transfers = LD(ch->stats.transfers);
	c->last_activity_ns = LD(ch->stats.last_activity_ns);
	c->bytes_in = LD(ch->stats.bytes_in);
	c->bytes_out = LD(ch->stats.bytes_out);
	c->resp_ring_full = LD(ch->stats.resp_ring_full);
	c->pinned_bytes = LD(ch->stats.pinned_bytes);
	c->oldest_ns = LD(ch->stats.oldest_ns);
	c->quota_denied = LD(ch->stats.quota_denied);
	c->xfers_expired = LD(ch->stats.xfers_expired);
	c->quar_bytes = LD(ch->stats.quar_bytes);
	c->quar_slots = LD(ch->stats.quar_slots);
	kvr_bell_stats(&ch->req_bell, &c->req_bell);
	kvr_bell_stats(&ch->resp_bell, &c->resp_bell);
	/* Rings at the offsets WE computed, never the channel's own fields
	 * (--check compares those against ours). */
	snap_ring(&c->req, base + a->g.req_ring_off, a->g.req_ring_cap);
	snap_ring(&c->resp, base + a->g.resp_ring_off, a->g.resp_ring_cap);
	c->req.server_high_water = LD(ch->stats.req_high_water);
	c->resp.server_high_water = LD(ch->stats.resp_high_water);
}

/* The quarantine's counters (abi 5.3). */
static void snap_quar(struct ins_snap *s, struct kvr_quar_shm *q)
{
	s->quar.xfers = LD(q->xfers);
	s->quar.slots = LD(q->slots);
	s->quar.bytes = LD(q->bytes);
	s->quar.reclaimed = LD(q->reclaimed);
	for (unsigned k = 0; k < 3; k++)
		s->quar.released[k] = LD(q->released[k]);
	s->quar.detached = LD(q->detached);
}

/* The global counters, in struct kvr_gstats_shm order. */
static void snap_gstats(struct ins_snap *s, struct kvr_gstats_shm *g)
{
	s->used = LD(g->used_bytes);
	s->committed = LD(g->committed_bytes);
	s->reserved = LD(g->reserved_bytes);
	s->objects = LD(g->objects);
	s->reserved_objects = LD(g->reserved_objects);
	s->pins = LD(g->pins);
	s->pinned_bytes = LD(g->pinned_bytes);
	s->quota_denied = LD(g->quota_denied);
	s->xfers_expired = LD(g->xfers_expired);
	s->corrupt_dropped = LD(g->corrupt_dropped);
	s->corrupt_unconfirmed = LD(g->corrupt_unconfirmed);
	s->leases = LD(g->leases);
	s->transfers = LD(g->transfers);
	s->evictions = LD(g->evictions);
	s->evicted_bytes = LD(g->evicted_bytes);
	s->stores_skipped = LD(g->stores_skipped);
	s->no_room = LD(g->no_room);
	s->workers = LD(g->workers);
	s->connects = LD(g->connects);
	s->cleanups = LD(g->disconnect_cleanups);
	s->protocol_errors = LD(g->protocol_errors);
	s->handshake_refused = LD(g->handshake_refused);
	s->requests = LD(g->requests);
	s->leases_expired = LD(g->leases_expired);
	s->free_extents = LD(g->free_extents);
	s->largest_free = LD(g->largest_free);
	s->frag_ppm = LD(g->frag_ppm);
	s->loop_wakeups = LD(g->loop_wakeups);
}

/* The uids in use, from the directory's per-uid table (relaxed: each
 * value is only displayed; the server stores channels last). */
static void snap_uids(const struct ins_attach *a, struct ins_snap *s)
{
	for (uint32_t i = 0; i < a->g.max_channels; i++) {
		struct kvr_uid_use_shm *u = kvr_uid_use(a->dir.base, &a->g, i);
		struct ins_uid_snap *o;
		uint32_t n = LD(u->channels);

		if (!n)
			continue;
		if (s->nuid == INS_UIDS_MAX) {
			s->uids_omitted++;
			continue;
		}
		o = &s->uids[s->nuid++];
		o->channels = n;
		o->uid = LD(u->uid);
		o->reserved_bytes = LD(u->reserved_bytes);
		o->pinned_bytes = LD(u->pinned_bytes);
		o->quota_denied = LD(u->quota_denied);
	}
}

/*
 * Fills *s from the mapping. s->ch must have room for max_channels
 * entries (ins_chan_alloc()); it is kept, everything else is overwritten.
 * The header fields other than heartbeat and state are written once by
 * the server before `ready` (which attach checked with acquire), so plain
 * reads see their final values. Channels are read only when the geometry
 * was validated: otherwise their offsets mean nothing.
 * Return: 0, or -EFAULT if the mapping raised SIGBUS (message printed;
 * *s is then partly filled and must not be shown).
 */
int ins_snap_take(const struct ins_attach *a, struct ins_snap *s)
{
	struct kvr_ctl_hdr_shm *h = a->h;
	struct ins_chan_snap *ch = s->ch;

	memset(s, 0, sizeof(*s));
	s->ch = ch;
	ins_bus_armed = 1;
	if (sigsetjmp(ins_bus_jmp, 1)) {
		ins_bus_armed = 0;
		ins_err("read control segment: SIGBUS (the file was truncated "
			"under us); giving up");
		return -EFAULT;
	}
	/* The monotonic clock is the one the server stamps heartbeats and
	 * activity with, so ages are differences on it; the wall clock only
	 * gives the uptime, since the header records a wall-clock start. */
	s->mono_ns = kvr_clock_now_ns();
	s->real_ns = kvr_clock_wall_ns();
	s->pid = h->seg.creator_pid;
	s->pid_start = h->seg.creator_start;
	s->abi = h->seg.abi;
	memcpy(s->boot_id, h->seg.boot_id, 16);
	ins_copy_clean(s->seg_name, sizeof(s->seg_name), h->seg.name,
		       sizeof(h->seg.name));
	ins_copy_clean(s->pool_name, sizeof(s->pool_name), h->pool_name,
		       sizeof(h->pool_name));
	s->pool_bytes = h->pool_bytes;
	s->align = h->align;
	s->backend = h->pool_backend;
	s->max_channels = h->max_channels;
	s->req_cap = h->req_ring_cap;
	s->resp_cap = h->resp_ring_cap;
	s->max_keys = h->max_keys;
	s->lease_ms = h->lease_ms;
	s->heartbeat_ms = h->heartbeat_ms;
	s->quota_reserved = h->quota_reserved_bytes;
	s->quota_pinned = h->quota_pinned_bytes;
	s->max_key_bytes = h->max_key_bytes;
	s->quota_uid_reserved = h->quota_uid_reserved_bytes;
	s->quota_uid_pinned = h->quota_uid_pinned_bytes;
	s->xfer_ms = h->xfer_ms;
	s->uid = h->server_uid;
	s->start_real_ns = h->start_realtime_ns;
	s->heartbeat_ns = LD(h->heartbeat_ns);
	s->state = LD(h->state);
	snap_gstats(s, &h->stats);
	snap_quar(s, &h->quar);
	ins_l2_snap(h, &s->l2);
	ins_disk_snap(h, &s->disk);
	s->dir_rc = a->geom_ok ? a->dir_rc : 0;
	if (a->geom_ok && a->dir.base) {
		s->nchan = a->g.max_channels;
		for (uint32_t i = 0; i < s->nchan; i++)
			snap_chan(a, i, &s->ch[i]);
		snap_uids(a, s);
	}
	ins_obs_snap(a, s);
	ins_bus_armed = 0;
	/* After the reads: /proc is not the mapping and needs no guard. */
	s->alive = kvr_proc_alive(s->pid, s->pid_start);
	return 0;
}
