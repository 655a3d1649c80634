/* SPDX-License-Identifier: MIT */
/*
 * check.c - --check: every invariant a healthy control segment satisfies
 * (the list, with codes, is in docs/inspect.md), evaluated on snapshots,
 * and the verdict: exit 0, or exit 3 with one line per violation. It owns
 * the invariants and the rule for confirming a violation. It does not
 * re-validate the header (attach.c refuses an ABI or layout mismatch with
 * exit 1 before we get here: such a segment cannot be interpreted at all)
 * but it does report a bad geometry, which attach only records.
 *
 * The server keeps running while we read, and its counters are read one
 * at a time, so a sum or a difference of two counters can be off for an
 * instant without anything being wrong. A violation therefore counts only
 * if it shows up in every snapshot of a short series (run_check()); real
 * damage is there every time.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"

#define MAX_VIOL 256 /* more are dropped: the first ones tell the story */

/* Snapshots in the confirmation series, and the pause between them. */
#define CHECK_ROUNDS   5
#define CHECK_PAUSE_MS 20

/* A heartbeat counts as stale after this many periods, but never sooner
 * than CHECK_HB_MIN_MS: a short period would flag a busy machine. */
#define CHECK_HB_PERIODS 10ull
#define CHECK_HB_MIN_MS	 3000

/* One violation. @code names the invariant and, for a channel or ring,
 * which one ("ring:3:req_ring"); it is what is compared across
 * snapshots, since the message carries values that may change. */
struct viol {
	char code[64];
	char msg[320];
};

struct vlist {
	int n;
	struct viol v[MAX_VIOL];
};

/* Records one violation; @code identifies it across snapshots. */
static void __attribute__((format(printf, 3, 4)))
viol(struct vlist *l, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (l->n >= MAX_VIOL)
		return;
	snprintf(l->v[l->n].code, sizeof(l->v[l->n].code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(l->v[l->n].msg, sizeof(l->v[l->n].msg), fmt, ap);
	va_end(ap);
	l->n++;
}

/*
 * A ring's invariants: kvr_ring_check() passed, high-water marks within
 * capacity, and positions not behind @base (an earlier snapshot of the
 * same claim, or NULL), since head and tail are free-running counters
 * that only ever grow.
 */
static void check_ring(struct vlist *l, const struct ins_chan_snap *c,
		       const char *name, const struct ins_ring_snap *r,
		       const struct ins_ring_snap *base)
{
	char code[64];

	snprintf(code, sizeof(code), "ring:%u:%s", c->idx, name);
	/* -EBUSY: the positions kept moving for all of kvr_ring_check()'s
	 * re-reads. A busy ring, not a damaged one. */
	if (r->rc == -EBUSY)
		return;
	if (r->rc < 0)
		viol(l, code,
		     "channel %u %s: %s (head %" PRIu64 ", tail %" PRIu64
		     ", capacity %u, bad record at %" PRIu64 ")",
		     c->idx, name, kvr_strerror(r->rc), r->s.head, r->s.tail,
		     r->cap, r->s.bad_pos);
	if (r->rc == 0 && r->s.high_water > r->cap)
		viol(l, code,
		     "channel %u %s: ring high water %" PRIu64
		     " exceeds capacity %u",
		     c->idx, name, r->s.high_water, r->cap);
	if (r->server_high_water > r->cap)
		viol(l, code,
		     "channel %u %s: server high water %" PRIu64
		     " exceeds capacity %u",
		     c->idx, name, r->server_high_water, r->cap);
	if (base && base->rc == 0 && r->rc == 0 &&
	    (r->s.head < base->s.head || r->s.tail < base->s.tail))
		viol(l, code,
		     "channel %u %s: positions went backwards: head %" PRIu64
		     " -> %" PRIu64 ", tail %" PRIu64 " -> %" PRIu64,
		     c->idx, name, base->s.head, r->s.head, base->s.tail,
		     r->s.tail);
}

/* The server-wide invariants: liveness, enums, the heartbeat, and the
 * pool counters against each other. */
static void check_server(const struct ins_snap *s, struct vlist *l)
{
	uint64_t hb_age = ins_age_ns(s->mono_ns, s->heartbeat_ns) / 1000000;
	uint64_t hb_max = s->heartbeat_ms * CHECK_HB_PERIODS;

	if (!s->alive)
		viol(l, "server_dead",
		     "server pid %d is not alive: the segment is stale",
		     s->pid);
	if (s->state > KVR_SERVER_STOPPING)
		viol(l, "server_state", "server state %u is invalid", s->state);
	if (s->backend < KVR_POOL_SHM || s->backend > KVR_POOL_PRIVATE)
		viol(l, "pool_backend", "pool backend %u is invalid",
		     s->backend);
	if (hb_max < CHECK_HB_MIN_MS)
		hb_max = CHECK_HB_MIN_MS;
	/* Only a running, live server must beat: one starting or stopping
	 * may legitimately pause, and a dead one is server_dead. */
	if (s->alive && s->state == KVR_SERVER_RUNNING && hb_age > hb_max)
		viol(l, "heartbeat",
		     "heartbeat is %" PRIu64 " ms old, period %u ms: the "
		     "server loop is stuck",
		     hb_age, s->heartbeat_ms);
	if (s->used > s->pool_bytes)
		viol(l, "used_le_pool",
		     "used bytes %" PRIu64 " exceed the pool's %" PRIu64,
		     s->used, s->pool_bytes);
	if (s->reserved > s->used)
		viol(l, "reserved_le_used",
		     "reserved bytes %" PRIu64 " exceed used bytes %" PRIu64,
		     s->reserved, s->used);
	if (s->committed + s->reserved != s->used)
		viol(l, "used_sum",
		     "used bytes %" PRIu64 " != committed %" PRIu64
		     " + reserved %" PRIu64,
		     s->used, s->committed, s->reserved);
	if (s->pinned_bytes > s->committed)
		viol(l, "pinned_le_committed",
		     "pinned bytes %" PRIu64 " exceed committed bytes %" PRIu64,
		     s->pinned_bytes, s->committed);
	if ((s->objects == 0) != (s->committed == 0))
		viol(l, "objects_bytes",
		     "%" PRIu64 " objects but %" PRIu64 " committed bytes",
		     s->objects, s->committed);
	if (s->frag_ppm > 1000000)
		viol(l, "fragmentation",
		     "fragmentation %" PRIu64 " ppm exceeds 1000000",
		     s->frag_ppm);
	/* Free bytes computed without wrapping when used > pool (that case
	 * is used_le_pool above). */
	if (s->largest_free >
	    s->pool_bytes -
		(s->used <= s->pool_bytes ? s->used : s->pool_bytes))
		viol(l, "largest_free",
		     "largest free extent %" PRIu64 " exceeds free bytes",
		     s->largest_free);
}

/* Running sums over the channels in use, compared with the globals. */
struct chan_sums {
	uint64_t res, pins, leases, xfer;
	uint32_t active, in_use;
};

/*
 * Channel @i's invariants. @bc is the same channel in the baseline
 * snapshot if it still has the same generation (the same claim), else
 * NULL: positions of a re-claimed channel start over and may not be
 * compared. A free channel must hold nothing, since the server frees a
 * channel only once its counters read zero (R-CH2); anything left is a
 * leak.
 */
static void check_chan(const struct ins_attach *a,
		       const struct ins_chan_snap *c,
		       const struct ins_chan_snap *bc, uint32_t i,
		       struct chan_sums *sum, struct vlist *l)
{
	char code[64];

	snprintf(code, sizeof(code), "chan:%u", i);
	if (c->state > KVR_CHAN_CLOSING) {
		viol(l, code, "channel %u: state %u is invalid", i, c->state);
		return;
	}
	if (c->state == KVR_CHAN_FREE) {
		if (c->reserved_bytes || c->pins || c->leases || c->transfers)
			viol(l, code,
			     "channel %u is free but holds %" PRIu64
			     " reserved bytes, %" PRIu64 " pins, %" PRIu64
			     " leases, %" PRIu64 " transfers (leak)",
			     i, c->reserved_bytes, c->pins, c->leases,
			     c->transfers);
		return;
	}
	sum->in_use++;
	sum->active += c->state == KVR_CHAN_ACTIVE;
	if (c->blk_rc < 0) {
		/* Nothing of the block to judge (abi 3.0: its own memfd). */
		viol(l, code,
		     "channel %u: its block cannot be read (%s); run "
		     "kvring-inspect as root or as kvringd's uid",
		     i, kvr_strerror(c->blk_rc));
		return;
	}
	if (c->transport < KVR_TRANSPORT_SHM ||
	    c->transport > KVR_TRANSPORT_COPY)
		viol(l, code, "channel %u: transport %u is invalid", i,
		     c->transport);
	/* The server records where it put the rings; they must be where
	 * our own geometry says, which is where snapshot.c read them. */
	if (c->req_ring_off != a->g.req_ring_off ||
	    c->resp_ring_off != a->g.resp_ring_off)
		viol(l, code, "channel %u: ring offsets %u/%u, expected %u/%u",
		     i, c->req_ring_off, c->resp_ring_off, a->g.req_ring_off,
		     a->g.resp_ring_off);
	if (c->req_bell.sleeping > 1 || c->resp_bell.sleeping > 1)
		viol(l, code,
		     "channel %u: doorbell sleeping flags %u/%u are not 0 or 1",
		     i, c->req_bell.sleeping, c->resp_bell.sleeping);
	check_ring(l, c, "req_ring", &c->req, bc ? &bc->req : NULL);
	check_ring(l, c, "resp_ring", &c->resp, bc ? &bc->resp : NULL);
	sum->res += c->reserved_bytes;
	sum->pins += c->pins;
	sum->leases += c->leases;
	sum->xfer += c->transfers;
}

/*
 * Every invariant, on snapshot @s, appended to @l. @base is the baseline
 * snapshot (positions must not go backwards between the two). With a bad
 * geometry no channel can be located, so only the geometry itself and
 * the server-wide invariants are reported.
 */
static void check_snap(const struct ins_attach *a, const struct ins_snap *s,
		       const struct ins_snap *base, struct vlist *l)
{
	struct chan_sums sum = {0};

	check_server(s, l);
	if (!a->geom_ok) {
		viol(l, "geometry", "%s", a->geom_err);
		return;
	}
	if (s->dir_rc < 0) {
		/* No channel to judge (abi 4.0: the directory is a memfd
		 * only root and the server's uid may open). */
		viol(l, "directory",
		     "the channel directory cannot be read (%s); run "
		     "kvring-inspect as root or as kvringd's uid",
		     kvr_strerror(s->dir_rc));
		return;
	}
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct ins_chan_snap *c = &s->ch[i];
		const struct ins_chan_snap *bc =
		    base && base->ch[i].generation == c->generation
			? &base->ch[i]
			: NULL;

		check_chan(a, c, bc, i, &sum, l);
	}
	/* workers counts channels in use; a claim or a cleanup in progress
	 * may or may not be counted yet, so accept the range. */
	if (s->workers < sum.active || s->workers > sum.in_use)
		viol(l, "workers",
		     "workers %" PRIu64 " but %u channels active and %u in "
		     "use",
		     s->workers, sum.active, sum.in_use);
	/* The server publishes channel counters after each batch and the
	 * global ones when its loop sleeps, so the two never have to agree
	 * exactly; channels holding more than the whole server is what a
	 * leak or damage looks like. */
	if (sum.res > s->reserved)
		viol(l, "sum_reserved",
		     "channels hold %" PRIu64
		     " reserved bytes, global %" PRIu64,
		     sum.res, s->reserved);
	if (sum.pins > s->pins)
		viol(l, "sum_pins",
		     "channels hold %" PRIu64 " pins, global %" PRIu64,
		     sum.pins, s->pins);
	if (sum.leases > s->leases)
		viol(l, "sum_leases",
		     "channels hold %" PRIu64 " leases, global %" PRIu64,
		     sum.leases, s->leases);
	if (sum.xfer > s->transfers)
		viol(l, "sum_transfers",
		     "channels hold %" PRIu64 " transfers, global %" PRIu64,
		     sum.xfer, s->transfers);
}

/* Keeps in @cur only the violations whose code is also in @prev, in
 * @cur's order. */
static void viol_intersect(struct vlist *cur, const struct vlist *prev)
{
	int n = 0;

	for (int i = 0; i < cur->n; i++) {
		bool keep = false;

		for (int j = 0; j < prev->n && !keep; j++)
			keep = strcmp(cur->v[i].code, prev->v[j].code) == 0;
		if (keep)
			cur->v[n++] = cur->v[i];
	}
	cur->n = n;
}

/* Prints the verdict: the confirmed violations, then the summary. */
static void print_verdict(const struct ins_opts *o, const struct vlist *l)
{
	struct kvr_em e;

	kvr_em_init(&e, stdout, o->json);
	if (o->json) {
		kvr_em_u64(&e, "schema", INS_SCHEMA);
		kvr_em_bool(&e, "ok", l->n == 0);
		kvr_em_arr(&e, "violations");
		for (int i = 0; i < l->n; i++) {
			kvr_em_item(&e, (uint32_t)i);
			kvr_em_str(&e, "code", l->v[i].code);
			kvr_em_str(&e, "message", l->v[i].msg);
			kvr_em_end(&e);
		}
		kvr_em_end(&e);
		kvr_em_finish(&e);
	} else {
		for (int i = 0; i < l->n; i++)
			printf("violation=%s message=\"%s\"\n", l->v[i].code,
			       l->v[i].msg);
		if (l->n)
			printf("check=failed violations=%d\n", l->n);
		else
			printf("check=ok\n");
	}
}

/*
 * How a violation is confirmed: a baseline snapshot first, then up to
 * CHECK_ROUNDS more, CHECK_PAUSE_MS apart. Each round checks its snapshot
 * against the baseline and keeps only the codes that were also found in
 * the round before (viol_intersect()), so what survives was seen in every
 * round so far. The series stops early as soon as nothing survives: a
 * transient mismatch between two counters disappears within one round,
 * while damage shows up every time and is reported with the messages of
 * the last round. @s and @base are the caller's snapshot buffers.
 * Return: INS_EXIT_OK, INS_EXIT_CHECK, or INS_EXIT_RUNTIME (SIGBUS, out
 * of memory; printed).
 */
int ins_check_run(const struct ins_opts *o, const struct ins_attach *a,
		  struct ins_snap *s, struct ins_snap *base)
{
	/* Two lists of 256 entries: on the heap, not the stack. */
	struct vlist *cur = calloc(2, sizeof(*cur)), *prev;
	int rc;

	if (!cur) {
		ins_err("check: out of memory");
		return INS_EXIT_RUNTIME;
	}
	prev = cur + 1;
	if (ins_snap_take(a, base) < 0)
		goto fault;
	for (int i = 0; i < CHECK_ROUNDS; i++) {
		ins_sleep_ms(CHECK_PAUSE_MS);
		if (ins_snap_take(a, s) < 0)
			goto fault;
		*prev = *cur;
		cur->n = 0;
		check_snap(a, s, base, cur);
		if (i > 0)
			viol_intersect(cur, prev);
		if (cur->n == 0)
			break;
	}
	print_verdict(o, cur);
	rc = cur->n ? INS_EXIT_CHECK : INS_EXIT_OK;
	free(cur);
	return rc;
fault:
	free(cur);
	return INS_EXIT_RUNTIME;
}
