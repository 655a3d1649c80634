/* SPDX-License-Identifier: MIT */
/*
 * overview.c - the default output, as key=value lines or one JSON object:
 * the server's identity and liveness, the pool, the global counters, the
 * per-interval rates under --watch, and one object per channel shown. It
 * renders a snapshot and nothing else: it never reads the mapping, and
 * the refresh loop that feeds it two snapshots lives in watch.c.
 *
 * The key names are the JSON schema (docs/inspect.md lists them): keys
 * are only ever added within schema 1, never renamed or removed, because
 * scripts and dashboards parse them.
 */
#include <stdio.h>

#include "inspect.h"

/*
 * Per-interval rates for --watch; NULL @prev means "first frame", which
 * has no rates object at all (rather than zeros that would read as an
 * idle server). Counters only grow while the server runs, and a restart
 * resets @prev (watch.c), so the differences do not wrap.
 */
static void emit_rates(struct kvr_em *e, const struct ins_snap *s,
		       const struct ins_snap *prev)
{
	double dt;

	if (!prev)
		return;
	dt = (double)(s->mono_ns - prev->mono_ns) / 1e9;
	if (dt <= 0)
		dt = 1e-9;
	kvr_em_obj(e, "rates");
	kvr_em_u64(e, "interval_ms", (s->mono_ns - prev->mono_ns) / 1000000);
	kvr_em_dbl(e, "requests_per_s",
		   (double)(s->requests - prev->requests) / dt);
	kvr_em_dbl(e, "evictions_per_s",
		   (double)(s->evictions - prev->evictions) / dt);
	kvr_em_dbl(e, "evicted_bytes_per_s",
		   (double)(s->evicted_bytes - prev->evicted_bytes) / dt);
	kvr_em_dbl(e, "connects_per_s",
		   (double)(s->connects - prev->connects) / dt);
	kvr_em_dbl(e, "no_room_per_s",
		   (double)(s->no_room - prev->no_room) / dt);
	ins_obs_emit_rates(e, s, prev);
	kvr_em_end(e);
}

/* A ring object: positions are free-running byte counters, so head and tail
 * only grow; used_bytes is their difference as kvr_ring_check() saw it. */
static void emit_ring(struct kvr_em *e, const char *k,
		      const struct ins_ring_snap *r)
{
	kvr_em_obj(e, k);
	kvr_em_u64(e, "capacity", r->cap);
	kvr_em_u64(e, "head", r->s.head);
	kvr_em_u64(e, "tail", r->s.tail);
	kvr_em_u64(e, "used_bytes", r->s.used_bytes);
	kvr_em_dbl(e, "occupancy",
		   r->cap ? (double)r->s.used_bytes / (double)r->cap : 0.0);
	/* The server's measurement; the ring header's own value is an
	 * upper bound (the producer computes it from its cached head). */
	kvr_em_u64(e, "high_water", r->server_high_water);
	kvr_em_u64(e, "ring_high_water", r->s.high_water);
	kvr_em_u64(e, "records", r->s.nr_records);
	kvr_em_str(e, "check", r->rc == 0 ? "ok" : kvr_strerror(r->rc));
	kvr_em_end(e);
}

/* A doorbell: rung + suppressed is the number of notifies; a high share of
 * suppressed means the peer was busy and no system call was needed. */
static void emit_bell(struct kvr_em *e, const char *k,
		      const struct kvr_bell_stats *b)
{
	kvr_em_obj(e, k);
	kvr_em_u64(e, "rung", b->rung);
	kvr_em_u64(e, "suppressed", b->suppressed);
	kvr_em_u64(e, "sleeps", b->sleeps);
	kvr_em_u64(e, "cancels", b->cancels);
	kvr_em_bool(e, "sleeping", b->sleeping != 0);
	kvr_em_end(e);
}

/* The worker's model layout, as it registered it in the handshake. */
static void emit_namespace(struct kvr_em *e, const struct ins_chan_snap *c)
{
	kvr_em_obj(e, "namespace");
	kvr_em_u64(e, "id", c->ns_id);
	kvr_em_str(e, "model", c->ns.model);
	kvr_em_u64(e, "layers", c->ns.layers);
	kvr_em_u64(e, "kv_heads", c->ns.kv_heads);
	kvr_em_u64(e, "head_size", c->ns.head_size);
	kvr_em_u64(e, "dtype_bytes", c->ns.dtype_bytes);
	kvr_em_u64(e, "tp_rank", c->ns.tp_rank);
	kvr_em_u64(e, "tp_size", c->ns.tp_size);
	kvr_em_u64(e, "chunk_tokens", c->ns.chunk_tokens);
	kvr_em_end(e);
}

/*
 * One channel object. @pc is the same channel in the previous --watch
 * frame; its rate is shown only while the channel keeps its generation,
 * because a re-claimed channel belongs to another worker and restarts its
 * counters, and the difference would be meaningless (or wrap).
 */
static void emit_chan(struct kvr_em *e, const struct ins_snap *s,
		      const struct ins_chan_snap *c,
		      const struct ins_chan_snap *pc, double dt)
{
	char op[32];

	kvr_em_item(e, c->idx);
	kvr_em_u64(e, "index", c->idx);
	kvr_em_str(e, "state", ins_chan_state_name(c->state));
	kvr_em_i64(e, "pid", c->pid);
	kvr_em_bool(e, "pid_alive", c->alive);
	kvr_em_u64(e, "uid", c->uid);
	kvr_em_u64(e, "generation", c->generation);
	kvr_em_str(e, "transport", ins_transport_name(c->transport));
	emit_namespace(e, c);
	kvr_em_u64(e, "connected_s",
		   ins_age_ns(s->mono_ns, c->connected_ns) / INS_NSEC);
	kvr_em_u64(e, "last_activity_age_ms",
		   ins_age_ns(s->mono_ns, c->last_activity_ns) / 1000000);
	emit_ring(e, "req_ring", &c->req);
	emit_ring(e, "resp_ring", &c->resp);
	kvr_em_obj(e, "doorbells");
	emit_bell(e, "req", &c->req_bell);
	emit_bell(e, "resp", &c->resp_bell);
	kvr_em_end(e);
	kvr_em_u64(e, "requests", ins_chan_requests(c));
	if (pc && pc->generation == c->generation && dt > 0)
		kvr_em_dbl(
		    e, "requests_per_s",
		    (double)(ins_chan_requests(c) - ins_chan_requests(pc)) /
			dt);
	/* Index 0 is no operation and error slot 0 is success: skipped. */
	kvr_em_obj(e, "requests_by_op");
	for (uint32_t k = 1; k < KVR_OP__MAX; k++) {
		snprintf(op, sizeof(op), "%s", kvr_op_name(k));
		kvr_em_u64(e, op, c->requests[k]);
	}
	kvr_em_end(e);
	kvr_em_obj(e, "errors_by_code");
	for (unsigned k = 1; k < KVR_ERR_SLOTS; k++)
		kvr_em_u64(e, kvr_err_slot_name(k), c->errors[k]);
	kvr_em_end(e);
	kvr_em_u64(e, "reserved_bytes", c->reserved_bytes);
	kvr_em_u64(e, "pins", c->pins);
	kvr_em_u64(e, "leases", c->leases);
	kvr_em_u64(e, "transfers", c->transfers);
	kvr_em_u64(e, "bytes_in", c->bytes_in);
	kvr_em_u64(e, "bytes_out", c->bytes_out);
	kvr_em_u64(e, "resp_ring_full", c->resp_ring_full);
	/* What it holds against its quotas, and for how long. */
	kvr_em_obj(e, "quota");
	kvr_em_u64(e, "reserved_bytes", c->reserved_bytes);
	kvr_em_u64(e, "reserved_quota_bytes", s->quota_reserved);
	kvr_em_u64(e, "pinned_bytes", c->pinned_bytes);
	kvr_em_u64(e, "pinned_quota_bytes", s->quota_pinned);
	kvr_em_u64(e, "denied", c->quota_denied);
	kvr_em_end(e);
	kvr_em_u64(e, "oldest_holding_age_ms",
		   c->oldest_ns ? ins_age_ns(s->mono_ns, c->oldest_ns) / 1000000
				: 0);
	kvr_em_u64(e, "xfer_deadline_ms", s->xfer_ms);
	kvr_em_u64(e, "xfers_expired", c->xfers_expired);
	/* Of what it holds, what its deadline put in quarantine. */
	kvr_em_obj(e, "quarantine");
	kvr_em_u64(e, "bytes", c->quar_bytes);
	kvr_em_u64(e, "slots", c->quar_slots);
	kvr_em_end(e);
	ins_obs_emit_chan(e, c, pc);
	kvr_em_end(e);
}

/*
 * Whether the channel directory could be read. Without it (not root nor
 * kvringd's uid, abi 4.0/5.0) `channels`, `uids` and `namespaces` are
 * empty because they are hidden, not because there are none: a reader of
 * the JSON learns that here, not only from the warning on stderr.
 */
static void emit_directory(struct kvr_em *e, const struct ins_snap *s)
{
	char why[256];

	kvr_em_bool(e, "directory_readable", s->dir_rc == 0);
	if (s->dir_rc == 0)
		return;
	snprintf(why, sizeof(why),
		 "channels, uids and namespaces hidden: the channel "
		 "directory cannot be read (%s); run kvring-inspect as root "
		 "or as kvringd's uid %d",
		 kvr_strerror(s->dir_rc), (int)s->uid);
	kvr_em_str(e, "directory_error", why);
}

/* The server's identity, the pool and the global counters. */
static void emit_server(struct kvr_em *e, const struct ins_target *t,
			const struct ins_snap *s)
{
	char boot[33], abi[24];

	ins_hex16(boot, s->boot_id);
	kvr_em_u64(e, "schema", INS_SCHEMA);
	kvr_em_str(e, "segment", t->path);
	snprintf(abi, sizeof(abi), "%u.%u", s->abi >> 16, s->abi & 0xffffu);
	kvr_em_str(e, "abi", abi);
	kvr_em_i64(e, "server_pid", s->pid);
	kvr_em_bool(e, "server_alive", s->alive);
	kvr_em_str(e, "server_state", ins_server_state_name(s->state));
	kvr_em_str(e, "boot_id", boot);
	kvr_em_u64(e, "uptime_s", ins_uptime_s(s));
	kvr_em_u64(e, "heartbeat_age_ms",
		   ins_age_ns(s->mono_ns, s->heartbeat_ns) / 1000000);
	kvr_em_u64(e, "heartbeat_ms", s->heartbeat_ms);
	kvr_em_str(e, "pool_backend", ins_backend_name(s->backend));
	kvr_em_str(e, "pool_name", s->pool_name);
	kvr_em_u64(e, "pool_bytes", s->pool_bytes);
	kvr_em_u64(e, "pool_used_bytes", s->used);
	/* Clamped: a damaged header must not print a huge wrapped value. */
	kvr_em_u64(e, "pool_free_bytes",
		   s->pool_bytes > s->used ? s->pool_bytes - s->used : 0);
	kvr_em_u64(e, "committed_bytes", s->committed);
	kvr_em_u64(e, "reserved_bytes", s->reserved);
	kvr_em_u64(e, "pinned_bytes", s->pinned_bytes);
	kvr_em_dbl(e, "fragmentation", (double)s->frag_ppm / 1e6);
	kvr_em_u64(e, "free_extents", s->free_extents);
	kvr_em_u64(e, "largest_free_bytes", s->largest_free);
	kvr_em_u64(e, "align", s->align);
	kvr_em_u64(e, "objects", s->objects);
	kvr_em_u64(e, "reserved_objects", s->reserved_objects);
	kvr_em_u64(e, "pins", s->pins);
	kvr_em_u64(e, "leases", s->leases);
	kvr_em_u64(e, "transfers", s->transfers);
	kvr_em_u64(e, "evictions", s->evictions);
	kvr_em_u64(e, "evicted_bytes", s->evicted_bytes);
	kvr_em_u64(e, "stores_skipped", s->stores_skipped);
	kvr_em_u64(e, "no_room", s->no_room);
	kvr_em_u64(e, "requests", s->requests);
	kvr_em_u64(e, "workers", s->workers);
	kvr_em_u64(e, "max_workers", s->max_channels);
	kvr_em_u64(e, "connects", s->connects);
	kvr_em_u64(e, "disconnect_cleanups", s->cleanups);
	kvr_em_u64(e, "protocol_errors", s->protocol_errors);
	kvr_em_u64(e, "handshake_refused", s->handshake_refused);
	kvr_em_u64(e, "leases_expired", s->leases_expired);
	kvr_em_u64(e, "loop_wakeups", s->loop_wakeups);
	kvr_em_u64(e, "lease_ms", s->lease_ms);
	kvr_em_u64(e, "xfer_ms", s->xfer_ms);
	kvr_em_u64(e, "quota_reserved_bytes", s->quota_reserved);
	kvr_em_u64(e, "quota_pinned_bytes", s->quota_pinned);
	kvr_em_u64(e, "max_key_bytes", s->max_key_bytes);
	kvr_em_u64(e, "quota_uid_reserved_bytes", s->quota_uid_reserved);
	kvr_em_u64(e, "quota_uid_pinned_bytes", s->quota_uid_pinned);
	kvr_em_u64(e, "quota_denied", s->quota_denied);
	kvr_em_u64(e, "xfers_expired", s->xfers_expired);
	kvr_em_u64(e, "corrupt_dropped", s->corrupt_dropped);
	kvr_em_u64(e, "corrupt_unconfirmed", s->corrupt_unconfirmed);
	/* Slots a deadline took from a worker that may still copy, held
	 * until it answers or exits (docs/storage.md, "Quarantine"). */
	kvr_em_obj(e, "quarantine");
	kvr_em_u64(e, "transfers", s->quar.xfers);
	kvr_em_u64(e, "slots", s->quar.slots);
	kvr_em_u64(e, "bytes", s->quar.bytes);
	kvr_em_u64(e, "reclaimed", s->quar.reclaimed);
	kvr_em_u64(e, "released_answered", s->quar.released[0]);
	kvr_em_u64(e, "released_gone", s->quar.released[1]);
	kvr_em_u64(e, "released_exited_after_close", s->quar.released[2]);
	kvr_em_u64(e, "detached_channels", s->quar.detached);
	kvr_em_end(e);
	kvr_em_u64(e, "max_keys", s->max_keys);
	emit_directory(e, s);
}

/* Each uid's use of the pool against the uid quotas: all its
 * channels together. */
static void emit_uids(struct kvr_em *e, const struct ins_snap *s)
{
	kvr_em_u64(e, "uids_omitted", s->uids_omitted);
	kvr_em_arr(e, "uids");
	for (uint32_t i = 0; i < s->nuid; i++) {
		const struct ins_uid_snap *u = &s->uids[i];

		kvr_em_item(e, u->uid);
		kvr_em_u64(e, "uid", u->uid);
		kvr_em_u64(e, "channels", u->channels);
		kvr_em_u64(e, "reserved_bytes", u->reserved_bytes);
		kvr_em_u64(e, "reserved_quota_bytes", s->quota_uid_reserved);
		kvr_em_u64(e, "pinned_bytes", u->pinned_bytes);
		kvr_em_u64(e, "pinned_quota_bytes", s->quota_uid_pinned);
		kvr_em_u64(e, "quota_denied", u->quota_denied);
		kvr_em_end(e);
	}
	kvr_em_end(e);
}

/*
 * The overview of snapshot @s of target @t, on @f. @prev is the previous
 * --watch frame (NULL otherwise): with it the output gains rates. Free
 * channels are left out unless @all.
 */
void ins_overview_emit(FILE *f, bool json, bool all, const struct ins_target *t,
		       const struct ins_snap *s, const struct ins_snap *prev)
{
	double dt = prev ? (double)(s->mono_ns - prev->mono_ns) / 1e9 : 0.0;
	struct kvr_em e;

	kvr_em_init(&e, f, json);
	emit_server(&e, t, s);
	ins_obs_emit_server(&e, s, prev);
	emit_rates(&e, s, prev);
	ins_l2_emit(&e, &s->l2);
	ins_disk_emit(&e, &s->disk, prev ? &prev->disk : NULL, dt);
	emit_uids(&e, s);
	kvr_em_arr(&e, "channels");
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct ins_chan_snap *c = &s->ch[i];

		if (!ins_chan_shown(c, all))
			continue;
		emit_chan(&e, s, c,
			  prev && i < prev->nchan ? &prev->ch[i] : NULL, dt);
	}
	kvr_em_end(&e);
	kvr_em_finish(&e);
}
