/* SPDX-License-Identifier: MIT */
/*
 * report.c - everything the run prints about itself: the progress line on
 * a terminal, the verdict (each invariant of docs/reliability.md checked
 * once, each failure one "FAILED:" line on stderr), and the report on
 * stdout as key=value lines or, with --json, one object whose keys are a
 * stable interface (schema SCHEMA; add keys, never rename one without
 * bumping it).
 *
 * It reads the run totals (results.c), the parent's own counts (kills,
 * crashes, server exit) and the audit (audit.c); it measures nothing and
 * changes nothing, so its output is a pure function of those.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit.h"
#include "stress.h"

/* ops_by_type keys, in enum st_op order. */
static const char *const op_names[OP_N] = {
    "lookup",	      "lookup_pin",   "store", "abort",	      "retrieve",
    "lease_retrieve", "lease_shared", "batch", "ahead_store",
};

/* store_slots keys, in enum kvr_slot_status order. */
static const char *const slot_st_names[NSLOT_ST] = {
    "ok", "exists", "noroom", "busy", "invalid",
};

/* --checksum names, by KVR_CHECKSUM_* (ST_SUM_MIXED last). */
static const char *ahead_name(unsigned m)
{
	return m == ST_AHEAD_ON ? "on" : m == ST_AHEAD_OFF ? "off" : "mixed";
}

static const char *sum_name(unsigned m)
{
	switch (m) {
	case KVR_CHECKSUM_OFF:
		return "off";
	case KVR_CHECKSUM_ON:
		return "on";
	case KVR_CHECKSUM_VERIFY:
		return "verify";
	default:
		return "mixed";
	}
}

/* At most this many failures are listed (the first ones, in the order
 * the checks run below); the exit status does not depend on the cap. */
#define MAX_FAILS 8

/* "EOWNERDEAD" for EOWNERDEAD; bucket 0 (out of range) is "other". */
static const char *errno_name(int e)
{
	const char *n = e ? strerrorname_np(e) : NULL;

	return n ? n : "other";
}

/*
 * Called from the parent's loop every 250 ms on a terminal. It reads the
 * live shared counters (each untorn, the sum not a snapshot) and the
 * parent's own kill counts, and costs the workers nothing.
 */
void st_report_progress(const struct st_run *r, bool final)
{
	struct st_totals t;
	double el = (double)(kvr_clock_now_ns() - r->t0_ns) / 1e9;

	st_results_sum(r->sh, r->o.workers, &t);
	/* \r and trailing blanks: the line overwrites itself in place. */
	fprintf(stderr,
		"\r%s ops %" PRIu64 " (%.0f/s) verified %" PRIu64
		" corrupt %" PRIu64 " kills %" PRIu64 " server-kills %" PRIu64
		" elapsed %.0fs   %s",
		PROG, t.ops_total, el > 0 ? (double)t.ops_total / el : 0.0,
		t.verified_chunks, t.corrupt, r->kills, r->srv_kills, el,
		final ? "\n" : "");
}

/* What the verdict and both formats need, gathered once, so that the
 * two formats cannot disagree about a number. Lives on the caller's
 * stack for one report. */
struct facts {
	struct st_totals t;
	uint64_t leaked_res, leaked_pins, leaked_leases, leaked_xfers;
	uint64_t leaked_quar; /* quarantine left after every worker exited */
	char fails[MAX_FAILS][600];
	int nf;
};

/*
 * Every invariant of the run, checked in a fixed order. A failed audit
 * (no control segment) reports the leaks as 0, but "leak audit
 * impossible" fails the run, so a missing audit can never pass.
 */
static void judge(const struct st_run *r, const struct st_audit *a,
		  struct facts *f)
{
#define FAIL(...)                                                              \
	do {                                                                   \
		if (f->nf < MAX_FAILS)                                         \
			snprintf(f->fails[f->nf++], sizeof(f->fails[0]),       \
				 __VA_ARGS__);                                 \
	} while (0)
	if (f->t.corrupt)
		FAIL("%" PRIu64 " corrupt chunks", f->t.corrupt);
	if (!a->have_ctl)
		FAIL("leak audit impossible: %s", a->why);
	if (f->leaked_res || f->leaked_pins || f->leaked_leases ||
	    f->leaked_xfers || f->leaked_quar)
		FAIL("leaked: %" PRIu64 " reserved bytes, %" PRIu64
		     " pins, %" PRIu64 " leases, %" PRIu64
		     " transfers, %" PRIu64 " quarantined bytes",
		     f->leaked_res, f->leaked_pins, f->leaked_leases,
		     f->leaked_xfers, f->leaked_quar);
	if (a->have_ctl && !a->workers_gone)
		FAIL("server still reports %" PRIu64 " workers after ours left",
		     ST_AUD(a, workers));
	if (a->have_ctl && !a->accounting_ok)
		FAIL("pool accounting: %s", a->why);
	if (r->srv_crashed)
		FAIL("kvringd died without being killed (or did not restart)");
	if (r->worker_crashes)
		FAIL("%" PRIu64 " workers died on their own",
		     r->worker_crashes);
	if (r->workers_stuck)
		FAIL("%" PRIu64 " workers did not stop within 15 s",
		     r->workers_stuck);
	if (f->t.sum_false)
		FAIL("%" PRIu64 " chunks marked corrupt by their checksum "
		     "held the right bytes",
		     f->t.sum_false);
	if (f->t.sum_missed)
		FAIL("%" PRIu64 " chunks with wrong bytes passed the checksum "
		     "check",
		     f->t.sum_missed);
	if (f->t.stop_not_expired)
		FAIL("%" PRIu64 " transfers held by a stopped worker were not "
		     "reclaimed by their deadline",
		     f->t.stop_not_expired);
	/* -1 (attach mode: not ours) is not a failure. */
	if (r->srv_exit > 0)
		FAIL("kvringd exit status %d after SIGTERM", r->srv_exit);
	/* A run that did nothing proved nothing. */
	if (f->t.ops_total == 0)
		FAIL("no operation completed");
#undef FAIL
}

/*
 * The JSON report, one object on one line, through the tools' emitter
 * (tools/common/emit.c), which escapes every key and string (errno names,
 * failure texts). The keys and their order are the schema-1 contract.
 */
static void print_json(const struct st_run *r, const struct st_audit *a,
		       const struct facts *f)
{
	const struct st_opts *o = &r->o;
	const struct st_totals *t = &f->t;
	struct kvr_em e;

	kvr_em_init(&e, stdout, true);
	kvr_em_i64(&e, "schema", SCHEMA);
	kvr_em_u64(&e, "seed", o->seed);
	kvr_em_u64(&e, "workers", o->workers);
	kvr_em_fixed(&e, "seconds", r->elapsed_s, 3);
	kvr_em_u64(&e, "ops", t->ops_total);
	kvr_em_fixed(
	    &e, "ops_per_s",
	    r->elapsed_s > 0 ? (double)t->ops_total / r->elapsed_s : 0.0, 1);
	kvr_em_obj(&e, "ops_by_type");
	for (int i = 0; i < OP_N; i++)
		kvr_em_u64(&e, op_names[i], t->ops[i]);
	kvr_em_end(&e);
	kvr_em_u64(&e, "verified_chunks", t->verified_chunks);
	kvr_em_u64(&e, "verified_bytes", t->verified_bytes);
	kvr_em_u64(&e, "corrupt_chunks", t->corrupt);
	kvr_em_str(&e, "checksum", sum_name(o->checksum));
	kvr_em_u64(&e, "checksum_verified", t->sum_verified);
	kvr_em_u64(&e, "checksum_caught", t->sum_caught);
	kvr_em_u64(&e, "checksum_false", t->sum_false);
	kvr_em_u64(&e, "checksum_missed", t->sum_missed);
	kvr_em_u64(&e, "checksum_unchecked", t->sum_unchecked);
	kvr_em_str(&e, "store_ahead", ahead_name(o->store_ahead));
	kvr_em_u64(&e, "batch_requests", t->batch_reqs);
	/* The final server's counters (0 without an audit). */
	kvr_em_u64(&e, "corrupt_dropped",
		   a->have_ctl ? ST_AUD(a, corrupt_dropped) : 0);
	kvr_em_u64(&e, "corrupt_unconfirmed",
		   a->have_ctl ? ST_AUD(a, corrupt_unconfirmed) : 0);
	kvr_em_u64(&e, "stored_chunks", t->stored_chunks);
	kvr_em_u64(&e, "stored_bytes", t->stored_bytes);
	kvr_em_obj(&e, "store_slots");
	for (int i = 0; i < NSLOT_ST; i++)
		kvr_em_u64(&e, slot_st_names[i], t->slot_st[i]);
	kvr_em_end(&e);
	kvr_em_u64(&e, "kills", r->kills);
	kvr_em_obj(&e, "kills_by_phase");
	kvr_em_u64(&e, "store_prepared", r->kills_store);
	kvr_em_u64(&e, "retrieve_prepared", r->kills_retrieve);
	kvr_em_u64(&e, "other", r->kills_other);
	kvr_em_end(&e);
	kvr_em_u64(&e, "kills_store_ahead", r->kills_ahead);
	kvr_em_u64(&e, "kills_in_batch", r->kills_batch);
	kvr_em_u64(&e, "server_kills", r->srv_kills);
	kvr_em_u64(&e, "server_restarts", r->srv_restarts);
	kvr_em_u64(&e, "reconnects", t->reconnects);
	kvr_em_u64(&e, "lease_short", t->lease_short);
	kvr_em_u64(&e, "stops", t->stops);
	kvr_em_u64(&e, "stops_expired", t->stop_expired);
	kvr_em_u64(&e, "stops_resumed_copying", t->stop_resumed);
	/* Only the errno values that occurred, by name. */
	kvr_em_obj(&e, "errors");
	for (int i = 0; i < NERRNO; i++)
		if (t->errors[i])
			kvr_em_u64(&e, errno_name(i), t->errors[i]);
	kvr_em_end(&e);
	kvr_em_u64(&e, "leaked_reserved_bytes", f->leaked_res);
	kvr_em_u64(&e, "leaked_pins", f->leaked_pins);
	kvr_em_u64(&e, "leaked_leases", f->leaked_leases);
	kvr_em_u64(&e, "leaked_transfers", f->leaked_xfers);
	kvr_em_u64(&e, "leaked_quarantine_bytes", f->leaked_quar);
	kvr_em_bool(&e, "pool_accounting_ok", a->have_ctl && a->accounting_ok);
	/* "pool" is left out when the audit could not map the segment. */
	if (a->have_ctl) {
		kvr_em_obj(&e, "pool");
		kvr_em_u64(&e, "pool_bytes", a->pool_bytes);
		kvr_em_u64(&e, "used_bytes", ST_AUD(a, used_bytes));
		kvr_em_u64(&e, "committed_bytes", ST_AUD(a, committed_bytes));
		kvr_em_u64(&e, "objects", ST_AUD(a, objects));
		kvr_em_u64(&e, "evictions", ST_AUD(a, evictions));
		kvr_em_u64(&e, "no_room", ST_AUD(a, no_room));
		kvr_em_u64(&e, "protocol_errors", ST_AUD(a, protocol_errors));
		kvr_em_u64(&e, "disconnect_cleanups",
			   ST_AUD(a, disconnect_cleanups));
		kvr_em_end(&e);
	}
	kvr_em_bool(&e, "server_crashed", r->srv_crashed);
	kvr_em_u64(&e, "worker_crashes", r->worker_crashes);
	kvr_em_u64(&e, "workers_stuck", r->workers_stuck);
	kvr_em_i64(&e, "server_exit", r->srv_exit);
	kvr_em_bool(&e, "ok", f->nf == 0);
	kvr_em_arr(&e, "failures");
	for (int i = 0; i < f->nf; i++)
		kvr_em_str(&e, NULL, f->fails[i]);
	kvr_em_end(&e);
	kvr_em_finish(&e);
}

/*
 * The text report: a subset of the JSON keys, one key=value a line, meant
 * for a human or a grep (ok=1 is the verdict). Scripts should use --json,
 * which has every key.
 */
static void print_text(const struct st_run *r, const struct st_audit *a,
		       const struct facts *f)
{
	const struct st_opts *o = &r->o;
	const struct st_totals *t = &f->t;

	printf("seed=%" PRIu64 "\nworkers=%u\nseconds=%.3f\nops=%" PRIu64
	       "\nops_per_s=%.1f\n",
	       o->seed, o->workers, r->elapsed_s, t->ops_total,
	       r->elapsed_s > 0 ? (double)t->ops_total / r->elapsed_s : 0.0);
	for (int i = 0; i < OP_N; i++)
		printf("ops_%s=%" PRIu64 "\n", op_names[i], t->ops[i]);
	printf("verified_chunks=%" PRIu64 "\nverified_bytes=%" PRIu64
	       "\ncorrupt_chunks=%" PRIu64 "\nstored_chunks=%" PRIu64 "\n",
	       t->verified_chunks, t->verified_bytes, t->corrupt,
	       t->stored_chunks);
	printf("checksum=%s\nchecksum_verified=%" PRIu64
	       "\nchecksum_caught=%" PRIu64 "\nchecksum_false=%" PRIu64
	       "\nchecksum_missed=%" PRIu64 "\ncorrupt_dropped=%" PRIu64
	       "\ncorrupt_unconfirmed=%" PRIu64 "\n",
	       sum_name(o->checksum), t->sum_verified, t->sum_caught,
	       t->sum_false, t->sum_missed,
	       a->have_ctl ? ST_AUD(a, corrupt_dropped) : 0,
	       a->have_ctl ? ST_AUD(a, corrupt_unconfirmed) : 0);
	printf("store_ahead=%s\nbatch_requests=%" PRIu64 "\n",
	       ahead_name(o->store_ahead), t->batch_reqs);
	for (int i = 0; i < NSLOT_ST; i++)
		printf("store_slots_%s=%" PRIu64 "\n", slot_st_names[i],
		       t->slot_st[i]);
	printf("kills=%" PRIu64 "\nkills_store_prepared=%" PRIu64
	       "\nkills_retrieve_prepared=%" PRIu64 "\nserver_kills=%" PRIu64
	       "\nreconnects=%" PRIu64 "\n",
	       r->kills, r->kills_store, r->kills_retrieve, r->srv_kills,
	       t->reconnects);
	printf("kills_store_ahead=%" PRIu64 "\nkills_in_batch=%" PRIu64 "\n",
	       r->kills_ahead, r->kills_batch);
	printf("stops=%" PRIu64 "\nstops_expired=%" PRIu64
	       "\nstops_resumed_copying=%" PRIu64 "\n",
	       t->stops, t->stop_expired, t->stop_resumed);
	for (int i = 0; i < NERRNO; i++)
		if (t->errors[i])
			printf("errors_%s=%" PRIu64 "\n", errno_name(i),
			       t->errors[i]);
	printf("leaked_reserved_bytes=%" PRIu64 "\nleaked_pins=%" PRIu64
	       "\nleaked_leases=%" PRIu64 "\nleaked_transfers=%" PRIu64
	       "\nleaked_quarantine_bytes=%" PRIu64 "\npool_accounting_ok=%d\n",
	       f->leaked_res, f->leaked_pins, f->leaked_leases, f->leaked_xfers,
	       f->leaked_quar, a->have_ctl && a->accounting_ok);
	if (a->have_ctl)
		printf("pool_bytes=%" PRIu64 "\nused_bytes=%" PRIu64
		       "\nobjects=%" PRIu64 "\nevictions=%" PRIu64 "\n",
		       a->pool_bytes, ST_AUD(a, used_bytes), ST_AUD(a, objects),
		       ST_AUD(a, evictions));
	/* The disk tier's own view (the chunks it served were checked by
	 * the retrieves above). */
	if (r->o.disk && a->have_ctl)
		printf("disk_writes=%" PRIu64 "\ndisk_reads=%" PRIu64
		       "\ndisk_corrupt_records=%" PRIu64
		       "\ndisk_dropped_writes=%" PRIu64 "\n",
		       a->disk_writes, a->disk_reads, a->disk_corrupt,
		       a->disk_dropped);
	printf("ok=%d\n", f->nf == 0);
}

int st_report_print(const struct st_run *r, const struct st_audit *a)
{
	struct facts f;

	memset(&f, 0, sizeof(f));
	st_results_sum(r->sh, r->o.workers, &f.t);
	/* The leak counters are the audit's global counters; all must be 0
	 * (reported as 0 when there was no audit, which fails anyway). */
	f.leaked_res = a->have_ctl ? ST_AUD(a, reserved_bytes) : 0;
	f.leaked_pins = a->have_ctl ? ST_AUD(a, pins) : 0;
	f.leaked_leases = a->have_ctl ? ST_AUD(a, leases) : 0;
	f.leaked_xfers = a->have_ctl ? ST_AUD(a, transfers) : 0;
	f.leaked_quar = a->have_ctl ? a->quar_bytes : 0;
	judge(r, a, &f);
	if (r->o.json)
		print_json(r, a, &f);
	else
		print_text(r, a, &f);
	fflush(stdout);
	/* After the report, so a reader of stderr sees them last. */
	for (int i = 0; i < f.nf; i++)
		fprintf(stderr, PROG ": FAILED: %s\n", f.fails[i]);
	return f.nf ? EXIT_FAIL : EXIT_OK;
}
