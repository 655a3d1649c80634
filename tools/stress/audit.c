/* SPDX-License-Identifier: MIT */
/*
 * audit.c - the leak and accounting audit, run once after every worker of
 * ours is gone. It reads the server's global counters from its control
 * segment (mapped read-only, as kvring-inspect does) and asks the server
 * itself for KVR_OP_STATS over a fresh connection, then records what it
 * saw in struct st_audit; report.c turns that into verdicts.
 *
 * What it can prove: at a quiet moment after the run, the server holds no
 * reservation, pin, lease or transfer for anybody, its pool's used bytes
 * are exactly its committed bytes, the free space it reports fits in the
 * pool, and its own stats answer agrees with its segment. Since every
 * killed worker held something at some point (a share of them in the
 * prepare/commit window), counters at zero mean the disconnect cleanup
 * gave everything back. What it cannot prove: that the committed objects
 * are the right ones (retrieves checked those, verify.c), that nothing
 * leaked and was later reclaimed by accident (eviction or lease expiry
 * would hide such a leak, so a leak only shows if it outlives the run), or
 * anything at all if another client uses the same server (attach mode):
 * its holdings look like leaks.
 *
 * It never writes to the segment and does not judge (report.c does).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "stress.h"

/*
 * Copy the global counters one by one. Relaxed: each counter has a single
 * writer (the server's loop) and we need each value untorn, not a
 * snapshot; the audit waits for quiet first, so they no longer move.
 */
static void snap_gstats(const struct kvr_ctl_hdr_shm *h,
			struct kvr_gstats_shm *g)
{
	const _Atomic uint64_t *src = (const _Atomic uint64_t *)&h->stats;
	_Atomic uint64_t *dst = (_Atomic uint64_t *)g;

	/* struct kvr_gstats_shm is only _Atomic uint64_t fields (layout.h,
	 * 256 bytes), so it can be walked as an array of them. */
	for (size_t i = 0; i < sizeof(*g) / sizeof(*src); i++) {
		uint64_t v =
		    atomic_load_explicit(&src[i], memory_order_relaxed);

		atomic_store_explicit(&dst[i], v, memory_order_relaxed);
	}
}

/* True when the server shows no worker and holds nothing. */
static bool quiet_now(const struct kvr_ctl_hdr_shm *h)
{
	struct st_audit q;

	snap_gstats(h, &q.g);
	return ST_AUD(&q, workers) == 0 && ST_AUD(&q, reserved_bytes) == 0 &&
	       ST_AUD(&q, pins) == 0 && ST_AUD(&q, leases) == 0 &&
	       ST_AUD(&q, transfers) == 0;
}

/*
 * Pool accounting: nothing reserved, so used must be exactly the committed
 * bytes; the server's own answer must agree with its counters, and the
 * free space it reports must fit. @err is the stats connection's error.
 */
static void check_accounting(struct st_audit *a, const char *err)
{
	a->accounting_ok = true;
	if (ST_AUD(a, used_bytes) != ST_AUD(a, committed_bytes) ||
	    ST_AUD(a, reserved_objects) != 0) {
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "used_bytes %" PRIu64 " != committed_bytes %" PRIu64
			 " (reserved objects %" PRIu64 ")",
			 ST_AUD(a, used_bytes), ST_AUD(a, committed_bytes),
			 ST_AUD(a, reserved_objects));
	} else if (ST_AUD(a, used_bytes) > a->pool_bytes ||
		   ST_AUD(a, largest_free) >
		       a->pool_bytes - ST_AUD(a, used_bytes)) {
		/* Written so it cannot overflow: used is checked first. */
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "used %" PRIu64 " + largest free %" PRIu64
			 " exceed the pool (%" PRIu64 ")",
			 ST_AUD(a, used_bytes), ST_AUD(a, largest_free),
			 a->pool_bytes);
	} else if (!a->have_stats) {
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "could not ask the server for its stats: %s", err);
	} else if (a->w.used_bytes != ST_AUD(a, used_bytes) ||
		   a->w.objects != ST_AUD(a, objects) ||
		   a->w.reserved_bytes != 0 || a->w.pins != 0 ||
		   a->w.leases != 0) {
		a->accounting_ok = false;
		snprintf(a->why, sizeof(a->why),
			 "stats answer (used %" PRIu64 ", objects %" PRIu64
			 ", reserved %" PRIu64 ", pins %" PRIu64
			 ", leases %" PRIu64 ") disagrees with the segment "
			 "(used %" PRIu64 ", objects %" PRIu64 ")",
			 a->w.used_bytes, a->w.objects, a->w.reserved_bytes,
			 a->w.pins, a->w.leases, ST_AUD(a, used_bytes),
			 ST_AUD(a, objects));
	}
}

/*
 * The leak audit, after every worker of ours is gone: wait (5 s at most)
 * until the server reports no workers and nothing held, then one more
 * heartbeat so the counters are fresh, then read them; then ask the server
 * itself (KVR_OP_STATS) over a fresh connection and cross-check. On a
 * mapping failure only a->why is set (have_ctl stays false).
 */
void st_audit_run(struct st_run *r, struct st_audit *a)
{
	struct kvr_client_opts co = {0};
	struct kvr_client *c = NULL;
	char err[256];
	uint32_t hb_ms;

	memset(a, 0, sizeof(*a));
	/* Attach mode maps the segment only now; ours is mapped already
	 * (and was re-mapped after every restart). */
	if (!r->srv.hdr && kvrd_map(&r->srv, 0) < 0) {
		snprintf(a->why, sizeof(a->why),
			 "cannot map the control segment %s", r->srv.ctl_name);
		return;
	}
	hb_ms = r->srv.hdr->heartbeat_ms ? r->srv.hdr->heartbeat_ms : 100;
	/* The condition we wait for is the success condition, so a leak
	 * only costs this timeout; the values are read again afterwards. */
	for (int waited = 0; waited < 5000; waited += 10) {
		if (quiet_now(r->srv.hdr))
			break;
		st_sleep_us(10000);
	}
	/* The server refreshes its global counters at least every
	 * heartbeat: wait two so that what we read is current. */
	st_sleep_us(2000ull * hb_ms + 50000);
	snap_gstats(r->srv.hdr, &a->g);
	a->quar_bytes =
	    atomic_load_explicit(&r->srv.hdr->quar.bytes, memory_order_relaxed);
	a->disk_writes = atomic_load_explicit(&r->srv.hdr->disk.writes,
					      memory_order_relaxed);
	a->disk_reads =
	    atomic_load_explicit(&r->srv.hdr->disk.reads, memory_order_relaxed);
	a->disk_corrupt = atomic_load_explicit(&r->srv.hdr->disk.corrupt,
					       memory_order_relaxed);
	a->disk_dropped = atomic_load_explicit(&r->srv.hdr->disk.dropped,
					       memory_order_relaxed);
	a->have_ctl = true;
	a->pool_bytes = r->srv.hdr->pool_bytes;
	a->workers_gone = ST_AUD(a, workers) == 0;

	/* This connection is itself a worker while it lasts; it is closed
	 * before anything is judged, and it never holds anything. */
	st_keys_client_opts(&co, r->o.socket ? r->o.socket : r->srv.sock);
	co.no_prefault = true;
	if (kvr_connect(&co, &c, err, sizeof(err)) == 0) {
		a->have_stats = kvr_stats(c, &a->w) == 0;
		kvr_close(c);
	}
	check_accounting(a, err);
}
