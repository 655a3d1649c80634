/* SPDX-License-Identifier: MIT */
/*
 * prom.c - --prometheus: one snapshot in the Prometheus text exposition
 * format 0.0.4, for a node exporter textfile collector or a sidecar. It
 * owns the metric names, types and help texts (docs/inspect.md lists
 * them). It does not share the key=value/JSON emitter: the exposition
 * format groups samples by metric, not by object, and has its own
 * escaping rules. Like the other renderers it reads only the snapshot.
 *
 * Conventions kept here: every name starts with kvring_; counters end in
 * _total; each family gets exactly one HELP and one TYPE line, followed
 * by all of its samples (the format requires samples of one family to be
 * contiguous); per-channel samples carry the labels channel, model and
 * rank, and only kvring_channel_info carries the pid. The cache counters
 * and latency histograms are obs.c's (ins_prom_obs()).
 */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "inspect.h"

/* A family with a single unlabelled sample, as a double. */
static void prom_dbl(FILE *f, const char *name, const char *type,
		     const char *help, double v)
{
	ins_prom_head(f, name, type, help);
	fprintf(f, "%s %.6f\n", name, v);
}

#define CH_U64(field) offsetof(struct ins_chan_snap, field)

/*
 * Per-channel scalar metrics, read from struct ins_chan_snap by offset so
 * that each family is one table row rather than one more loop. Every
 * field named here must be a uint64_t (the loop copies 8 bytes).
 */
static const struct {
	const char *name, *type, *help;
	size_t off;
} chan_metrics[] = {
    {"kvring_channel_reserved_bytes", "gauge",
     "Bytes reserved by the channel's open store transfers.",
     CH_U64(reserved_bytes)},
    {"kvring_channel_pins", "gauge",
     "Object pins held by the channel (leases and retrieve transfers).",
     CH_U64(pins)},
    {"kvring_channel_leases", "gauge", "Leases owned by the channel.",
     CH_U64(leases)},
    {"kvring_channel_transfers", "gauge",
     "Open store and retrieve transfers of the channel.", CH_U64(transfers)},
    {"kvring_channel_copy_bytes_in_total", "counter",
     "Payload bytes received over the socket (copy transport).",
     CH_U64(bytes_in)},
    {"kvring_channel_copy_bytes_out_total", "counter",
     "Payload bytes sent over the socket (copy transport).", CH_U64(bytes_out)},
    {"kvring_channel_resp_ring_full_total", "counter",
     "Times an answer had to wait for room in the response ring.",
     CH_U64(resp_ring_full)},
    {"kvring_channel_quarantine_bytes", "gauge",
     "Bytes of the channel's transfers a deadline reclaimed, held until the "
     "worker answers or exits.",
     CH_U64(quar_bytes)},
    {"kvring_channel_quarantine_slots", "gauge",
     "Reservations and pins of the channel in quarantine.", CH_U64(quar_slots)},
};

/* Which value of a ring prom_rings() prints. */
enum ring_val { RV_CAP, RV_USED, RV_HIGH_WATER, RV_HEAD, RV_TAIL, RV_OK };

/* One metric family with a sample per shown channel and ring (label
 * ring="req" or "resp"). */
static void prom_rings(FILE *f, const struct ins_snap *s, bool all,
		       const char *name, const char *type, const char *help,
		       enum ring_val what)
{
	ins_prom_head(f, name, type, help);
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct ins_chan_snap *c = &s->ch[i];

		if (!ins_chan_shown(c, all))
			continue;
		for (int r = 0; r < 2; r++) {
			const struct ins_ring_snap *rs = r ? &c->resp : &c->req;
			uint64_t v =
			    what == RV_CAP	    ? rs->cap
			    : what == RV_USED	    ? rs->s.used_bytes
			    : what == RV_HIGH_WATER ? rs->server_high_water
			    : what == RV_HEAD	    ? rs->s.head
			    : what == RV_TAIL	    ? rs->s.tail
						    : (uint64_t)(rs->rc == 0);

			ins_prom_chan_open(f, name, c);
			fprintf(f, ",ring=\"%s\"} %" PRIu64 "\n",
				r ? "resp" : "req", v);
		}
	}
}

/* Which doorbell counter prom_bells() prints. */
enum bell_val { BV_RUNG, BV_SUPPRESSED, BV_SLEEPS };

/* Doorbell counters per shown channel and ring. */
static void prom_bells(FILE *f, const struct ins_snap *s, bool all,
		       const char *name, const char *help, enum bell_val what)
{
	ins_prom_head(f, name, "counter", help);
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct ins_chan_snap *c = &s->ch[i];

		if (!ins_chan_shown(c, all))
			continue;
		for (int r = 0; r < 2; r++) {
			const struct kvr_bell_stats *b =
			    r ? &c->resp_bell : &c->req_bell;
			uint64_t v = what == BV_RUNG	     ? b->rung
				     : what == BV_SUPPRESSED ? b->suppressed
							     : b->sleeps;

			ins_prom_chan_open(f, name, c);
			fprintf(f, ",ring=\"%s\"} %" PRIu64 "\n",
				r ? "resp" : "req", v);
		}
	}
}

/* kvring_server_info: a constant 1 whose labels carry the identity, the
 * usual Prometheus idiom for string-valued facts. */
static void prom_server_info(FILE *f, const struct ins_target *t,
			     const struct ins_snap *s)
{
	char boot[33];

	ins_hex16(boot, s->boot_id);
	ins_prom_head(f, "kvring_server_info", "gauge",
		      "Constant 1; labels describe the server.");
	fprintf(f, "kvring_server_info{segment=\"");
	/* The path comes from argv and is not cleaned: escape it. */
	ins_prom_lv(f, t->path);
	fprintf(f,
		"\",boot_id=\"%s\",pool_backend=\"%s\",state=\"%s\","
		"abi=\"%u.%u\",pid=\"%" PRId32 "\"} 1\n",
		boot, ins_backend_name(s->backend),
		ins_server_state_name(s->state), s->abi >> 16, s->abi & 0xffffu,
		s->pid);
}

/* The server-wide gauges and counters, one sample each. */
/* The quarantine (abi 5.3): now, and how it was released, by way. */
static void prom_quar(FILE *f, const struct ins_quar *q)
{
	static const char *const way[3] = {"answered", "gone",
					   "exited_after_close"};

	ins_prom_u64(
	    f, "kvring_quarantine_transfers", "gauge",
	    "Transfers a deadline reclaimed while their worker may still "
	    "copy, held until it answers or exits.",
	    q->xfers);
	ins_prom_u64(f, "kvring_quarantine_slots", "gauge",
		     "Reservations and pins held in quarantine.", q->slots);
	ins_prom_u64(f, "kvring_quarantine_bytes", "gauge",
		     "Rounded bytes held in quarantine.", q->bytes);
	ins_prom_u64(f, "kvring_quarantine_reclaimed_total", "counter",
		     "Transfers put in quarantine.", q->reclaimed);
	ins_prom_head(
	    f, "kvring_quarantine_released_total", "counter",
	    "Quarantined transfers released: the worker answered, its "
	    "process was gone at the close, or it exited after closing.");
	for (unsigned k = 0; k < 3; k++)
		fprintf(f,
			"kvring_quarantine_released_total{way=\"%s\"} %" PRIu64
			"\n",
			way[k], q->released[k]);
	ins_prom_u64(
	    f, "kvring_quarantine_detached_channels", "gauge",
	    "Closed channels kept for the quarantine of a live process.",
	    q->detached);
}

/* A server-wide series that is one uint64_t field of the snapshot. */
struct prom_field {
	const char *name, *type, *help;
	size_t off; /* offsetof(struct ins_snap, the field) */
};

/* An entry for @field. prom_fields() reads it as uint64_t, so a field of
 * another size fails to compile (PROM_U64_ONLY: a negative array size). */
#define PROM_U64_ONLY(field)                                                   \
	(0 * sizeof(char[sizeof(((struct ins_snap *)0)->field) == 8 ? 1 : -1]))
#define PROM_FIELD(name, type, help, field)                                    \
	{                                                                      \
		name, type, help,                                              \
		    offsetof(struct ins_snap, field) + PROM_U64_ONLY(field)    \
	}

/* Pool bytes by state, after used and free. */
static const struct prom_field prom_pool_fields[] = {
    PROM_FIELD("kvring_pool_committed_bytes", "gauge",
	       "Pool bytes of committed (readable) objects.", committed),
    PROM_FIELD("kvring_pool_reserved_bytes", "gauge",
	       "Pool bytes reserved by open store transfers.", reserved),
    PROM_FIELD("kvring_pool_pinned_bytes", "gauge",
	       "Pool bytes of pinned objects.", pinned_bytes),
};

/* Object, pin, lease and channel counts. */
static const struct prom_field prom_count_fields[] = {
    PROM_FIELD("kvring_pool_free_extents", "gauge",
	       "Number of free extents in the pool.", free_extents),
    PROM_FIELD("kvring_objects", "gauge", "Committed objects.", objects),
    PROM_FIELD("kvring_reserved_objects", "gauge",
	       "Objects reserved but not committed.", reserved_objects),
    PROM_FIELD("kvring_pins", "gauge", "(object, owner) pin pairs.", pins),
    PROM_FIELD("kvring_leases", "gauge", "Live leases.", leases),
    PROM_FIELD("kvring_transfers", "gauge",
	       "Open store and retrieve transfers.", transfers),
    PROM_FIELD("kvring_workers", "gauge", "Channels in use.", workers),
};

/* Server-wide counters since the start. */
static const struct prom_field prom_total_fields[] = {
    PROM_FIELD("kvring_evictions_total", "counter",
	       "Objects evicted to make room.", evictions),
    PROM_FIELD("kvring_evicted_bytes_total", "counter",
	       "Bytes evicted to make room.", evicted_bytes),
    PROM_FIELD("kvring_stores_skipped_total", "counter",
	       "Keys a store skipped because they were already stored.",
	       stores_skipped),
    PROM_FIELD("kvring_no_room_total", "counter", "Keys answered no-room.",
	       no_room),
    PROM_FIELD("kvring_requests_total", "counter",
	       "Requests served (all channels, all time).", requests),
    PROM_FIELD("kvring_connects_total", "counter",
	       "Workers that completed the handshake.", connects),
    PROM_FIELD("kvring_disconnect_cleanups_total", "counter",
	       "Channels cleaned up after a disconnect.", cleanups),
    PROM_FIELD("kvring_protocol_errors_total", "counter",
	       "Workers disconnected for breaking the protocol.",
	       protocol_errors),
    PROM_FIELD("kvring_handshake_refused_total", "counter",
	       "Handshakes refused.", handshake_refused),
    PROM_FIELD("kvring_leases_expired_total", "counter", "Leases that expired.",
	       leases_expired),
    PROM_FIELD("kvring_loop_wakeups_total", "counter",
	       "Times the server loop slept and woke.", loop_wakeups),
    PROM_FIELD("kvring_corrupt_dropped_total", "counter",
	       "Chunks that failed their checksum, confirmed by the server and "
	       "dropped.",
	       corrupt_dropped),
    PROM_FIELD("kvring_corrupt_unconfirmed_total", "counter",
	       "Chunks reported corrupt whose bytes matched their sum.",
	       corrupt_unconfirmed),
};

/* One series per entry of @tab, in its order. */
static void prom_fields(FILE *f, const struct ins_snap *s,
			const struct prom_field *tab, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ins_prom_u64(f, tab[i].name, tab[i].type, tab[i].help,
			     *(const uint64_t *)((const char *)s + tab[i].off));
}

static void prom_server(FILE *f, const struct ins_snap *s)
{
	ins_prom_u64(f, "kvring_server_up", "gauge",
		     "1 if the server process that owns the segment is alive.",
		     s->alive);
	ins_prom_u64(f, "kvring_server_uptime_seconds", "gauge",
		     "Seconds since the server started.", ins_uptime_s(s));
	/* Ages in seconds, as floats: Prometheus' base unit for time. */
	prom_dbl(f, "kvring_server_heartbeat_age_seconds", "gauge",
		 "Seconds since the server's last heartbeat.",
		 (double)ins_age_ns(s->mono_ns, s->heartbeat_ns) / 1e9);
	ins_prom_u64(f, "kvring_pool_bytes", "gauge", "Size of the chunk pool.",
		     s->pool_bytes);
	ins_prom_u64(f, "kvring_pool_used_bytes", "gauge",
		     "Pool bytes reserved or committed.", s->used);
	ins_prom_u64(f, "kvring_pool_free_bytes", "gauge", "Pool bytes free.",
		     s->pool_bytes > s->used ? s->pool_bytes - s->used : 0);
	prom_fields(f, s, prom_pool_fields,
		    sizeof(prom_pool_fields) / sizeof(prom_pool_fields[0]));
	prom_dbl(f, "kvring_pool_fragmentation_ratio", "gauge",
		 "1 - largest free extent / free bytes.",
		 (double)s->frag_ppm / 1e6);
	prom_fields(f, s, prom_count_fields,
		    sizeof(prom_count_fields) / sizeof(prom_count_fields[0]));
	ins_prom_u64(f, "kvring_max_workers", "gauge", "Channels available.",
		     s->max_channels);
	prom_fields(f, s, prom_total_fields,
		    sizeof(prom_total_fields) / sizeof(prom_total_fields[0]));
	prom_quar(f, &s->quar);
	ins_prom_u64(
	    f, "kvring_inspect_directory_readable", "gauge",
	    "0 when the channel directory could not be read (run as root "
	    "or kvringd's uid): channel, uid and namespace series are "
	    "then missing, not zero.",
	    s->dir_rc == 0);
}

/* The per-channel families that are not rings or doorbells. The model
 * name went through ins_copy_clean() but is escaped anyway: the label
 * syntax is this file's contract, not the cleaner's. */
static void prom_channels(FILE *f, const struct ins_snap *s, bool all)
{
	ins_prom_head(
	    f, "kvring_channel_info", "gauge",
	    "Constant 1 per channel shown; labels describe the worker.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct ins_chan_snap *c = &s->ch[i];

		if (!ins_chan_shown(c, all))
			continue;
		ins_prom_chan_open(f, "kvring_channel_info", c);
		fprintf(f,
			",pid=\"%" PRId32 "\",state=\"%s\",transport=\"%s\","
			"tp_rank=\"%u\",tp_size=\"%u\",namespace=\"%u\"} 1\n",
			c->pid, ins_chan_state_name(c->state),
			ins_transport_name(c->transport), c->ns.tp_rank,
			c->ns.tp_size, c->ns_id);
	}
	ins_prom_head(f, "kvring_channel_worker_up", "gauge",
		      "1 if the channel's worker process is alive.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!ins_chan_shown(&s->ch[i], all))
			continue;
		ins_prom_chan_u64(f, "kvring_channel_worker_up", &s->ch[i],
				  s->ch[i].alive ? 1 : 0);
	}
	ins_prom_head(f, "kvring_channel_last_activity_age_seconds", "gauge",
		      "Seconds since the channel's last request.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!ins_chan_shown(&s->ch[i], all))
			continue;
		ins_prom_chan_open(
		    f, "kvring_channel_last_activity_age_seconds", &s->ch[i]);
		fprintf(
		    f, "} %.3f\n",
		    (double)ins_age_ns(s->mono_ns, s->ch[i].last_activity_ns) /
			1e9);
	}
	for (size_t m = 0; m < sizeof(chan_metrics) / sizeof(chan_metrics[0]);
	     m++) {
		ins_prom_head(f, chan_metrics[m].name, chan_metrics[m].type,
			      chan_metrics[m].help);
		for (uint32_t i = 0; i < s->nchan; i++) {
			const struct ins_chan_snap *c = &s->ch[i];
			uint64_t v;

			if (!ins_chan_shown(c, all))
				continue;
			memcpy(&v, (const char *)c + chan_metrics[m].off,
			       sizeof(v));
			ins_prom_chan_u64(f, chan_metrics[m].name, c, v);
		}
	}
}

/* Requests by operation and answers by error code, per channel; index 0
 * (no operation, success) is skipped as in the overview. */
static void prom_ops(FILE *f, const struct ins_snap *s, bool all)
{
	ins_prom_head(f, "kvring_channel_requests_total", "counter",
		      "Requests by operation.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!ins_chan_shown(&s->ch[i], all))
			continue;
		for (uint32_t k = 1; k < KVR_OP__MAX; k++) {
			ins_prom_chan_open(f, "kvring_channel_requests_total",
					   &s->ch[i]);
			fprintf(f, ",op=\"%s\"} %" PRIu64 "\n", kvr_op_name(k),
				s->ch[i].requests[k]);
		}
	}
	ins_prom_head(f, "kvring_channel_errors_total", "counter",
		      "Answers with an error, by error code.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!ins_chan_shown(&s->ch[i], all))
			continue;
		for (unsigned k = 1; k < KVR_ERR_SLOTS; k++) {
			ins_prom_chan_open(f, "kvring_channel_errors_total",
					   &s->ch[i]);
			fprintf(f, ",code=\"%s\"} %" PRIu64 "\n",
				kvr_err_slot_name(k), s->ch[i].errors[k]);
		}
	}
}

/*
 * The whole exposition of snapshot @s. It is metric-major: each family's
 * HELP and TYPE, then all of its samples, so that no name is announced
 * twice. Channels are included as in the overview (in use, or all with
 * @all). Flushes, so a scraper reading a pipe gets the whole text.
 */
/* Each uid's use against the uid quotas (abi 4.1): all its channels. */
static void prom_uids(FILE *f, const struct ins_snap *s)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
	    {"kvring_uid_channels", "gauge", "Channels open by the uid."},
	    {"kvring_uid_reserved_bytes", "gauge",
	     "Bytes all channels of the uid hold reserved."},
	    {"kvring_uid_pinned_bytes", "gauge",
	     "Bytes all channels of the uid hold pinned."},
	    {"kvring_uid_quota_denied_total", "counter",
	     "Keys and pins the uid quotas refused (while the uid stays)."},
	};

	ins_prom_u64(f, "kvring_quota_uid_reserved_bytes", "gauge",
		     "Reserved bytes one uid may hold over all its channels "
		     "(--quota-uid-reserved; 0: none).",
		     s->quota_uid_reserved);
	ins_prom_u64(f, "kvring_quota_uid_pinned_bytes", "gauge",
		     "Pinned bytes one uid may hold over all its channels "
		     "(--quota-uid-pinned; 0: none).",
		     s->quota_uid_pinned);
	for (size_t m = 0; m < sizeof(fam) / sizeof(fam[0]); m++) {
		ins_prom_head(f, fam[m].name, fam[m].type, fam[m].help);
		for (uint32_t i = 0; i < s->nuid; i++) {
			const struct ins_uid_snap *u = &s->uids[i];
			uint64_t v = m == 0   ? u->channels
				     : m == 1 ? u->reserved_bytes
				     : m == 2 ? u->pinned_bytes
					      : u->quota_denied;

			fprintf(f, "%s{uid=\"%" PRIu32 "\"} %" PRIu64 "\n",
				fam[m].name, u->uid, v);
		}
	}
}

void ins_prom_emit(FILE *f, bool all, const struct ins_target *t,
		   const struct ins_snap *s)
{
	prom_server_info(f, t, s);
	prom_server(f, s);
	ins_l2_prom(f, &s->l2);
	ins_disk_prom(f, &s->disk);
	prom_channels(f, s, all);
	prom_uids(f, s);
	prom_ops(f, s, all);
	prom_rings(f, s, all, "kvring_channel_ring_capacity_bytes", "gauge",
		   "Ring data capacity.", RV_CAP);
	prom_rings(f, s, all, "kvring_channel_ring_used_bytes", "gauge",
		   "Bytes between head and tail.", RV_USED);
	prom_rings(f, s, all, "kvring_channel_ring_high_water_bytes", "gauge",
		   "Most bytes ever in flight in the ring.", RV_HIGH_WATER);
	/* Head and tail are free-running byte counts that only grow, so
	 * they are counters: rate() of them is the ring's throughput. */
	prom_rings(f, s, all, "kvring_channel_ring_consumed_bytes_total",
		   "counter", "Ring head: bytes ever released by the consumer.",
		   RV_HEAD);
	prom_rings(f, s, all, "kvring_channel_ring_produced_bytes_total",
		   "counter",
		   "Ring tail: bytes ever published by the producer.", RV_TAIL);
	prom_rings(f, s, all, "kvring_channel_ring_ok", "gauge",
		   "1 if kvr_ring_check() found the ring well-formed.", RV_OK);
	prom_bells(f, s, all, "kvring_channel_doorbell_rung_total",
		   "Notifies that found the consumer asleep (eventfd written).",
		   BV_RUNG);
	prom_bells(f, s, all, "kvring_channel_doorbell_suppressed_total",
		   "Notifies that found the consumer awake (no system call).",
		   BV_SUPPRESSED);
	prom_bells(f, s, all, "kvring_channel_doorbell_sleeps_total",
		   "Times the consumer blocked on the doorbell.", BV_SLEEPS);
	ins_prom_obs(f, all, s);
	fflush(f);
}
