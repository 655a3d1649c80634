/* SPDX-License-Identifier: MIT */
/*
 * obs.c - the cache counters and latency histograms: copying them out of
 * the control segment (the global observability region), the channel
 * directory (the namespace slots, abi 5.0) and each channel's block, the
 * hit ratios and quantiles the overview and --watch show, the
 * --latency table, and the Prometheus families for them (prom.c calls
 * ins_prom_obs()). Like every renderer it formats a snapshot; only
 * ins_obs_snap() reads the mapping.
 *
 * Quantiles come from <kvring/hist.h>: the midpoint of the bucket holding
 * the sample of rank ceil(q * count), so within 1/16 of the exact value.
 * Over an interval they come from the difference of two snapshots of the
 * same histogram; a channel re-claimed in between (another generation)
 * has no interval figures.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "inspect.h"

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static const double quantiles[] = {0.5, 0.99, 0.999};
static const char *const q_keys[] = {"p50_ns", "p99_ns", "p999_ns"};

/* Name of histogram op slot @k ("lookup", ..., "l2_write", "l2_read"). */
static const char *op_name(unsigned k)
{
	if (k < KVR_HIST_OPS)
		return kvr_op_name(k + 1);
	if (k == KVR_HIST_L2_WRITE)
		return "l2_write";
	if (k == KVR_HIST_L2_READ)
		return "l2_read";
	if (k == INS_HIST_DISK_WRITE)
		return "disk_write";
	if (k == INS_HIST_DISK_READ)
		return "disk_read";
	return "?";
}

static const char *const evict_names[KVR_EVICT_REASONS] = {
    "room", "quota", "namespace", "other"};

/* Relaxed: single-writer counters, each needs only to be untorn (as in
 * snapshot.c). */
static void snap_cache(const struct kvr_cache_shm *src, struct ins_cache *dst)
{
	const _Atomic uint64_t *a = (const _Atomic uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;

	_Static_assert(sizeof(*dst) == sizeof(*src), "ins_cache mirrors shm");
	for (size_t k = 0; k < sizeof(*dst) / sizeof(*d); k++)
		d[k] = atomic_load_explicit((_Atomic uint64_t *)&a[k],
					    memory_order_relaxed);
}

static void snap_stage(const struct kvr_stage_shm *src, struct ins_stage *d)
{
	d->staged = LD(src->staged);
	d->stages = LD(src->stages);
	d->binds = LD(src->binds);
	d->binds_existing = LD(src->binds_existing);
}

void ins_obs_snap(const struct ins_attach *a, struct ins_snap *s)
{
	struct kvr_ctl_obs_shm *o = kvr_ctl_obs(a->h);

	/* Written once before `ready` (acquired at attach): plain reads. */
	s->obs_ok = o->hist_ops == KVR_HIST_GOPS &&
		    o->hist_buckets == KVR_HIST_BUCKETS &&
		    o->ns_slots == KVR_NS_OBS_MAX;
	if (!s->obs_ok)
		return;
	s->obs_flags = o->flags;
	snap_cache(&o->cache, &s->cache);
	snap_stage(&o->stage, &s->stage);
	for (unsigned k = 0; k < KVR_EVICT_REASONS; k++) {
		s->evictions_by[k] = LD(o->evictions[k]);
		s->evicted_bytes_by[k] = LD(o->evicted_bytes[k]);
	}
	for (unsigned k = 0; k < KVR_HIST_GOPS; k++)
		kvr_hist_read(&o->lat[k], &s->lat[k]);
	ins_disk_hist(a, s);
	s->nns = 0;
	/* The namespace slots live in the channel directory (abi 5.0):
	 * without it (not root nor kvringd's uid; attach said so once)
	 * there are none to show, only the global counters above. */
	for (unsigned i = 0; a->geom_ok && a->dir.base && i < KVR_NS_OBS_MAX;
	     i++) {
		struct ins_ns_snap *n = &s->ns[s->nns];
		struct kvr_ns_obs_shm *src = kvr_ns_obs(a->dir.base, &a->g, i);
		uint32_t g1, g2, id;

		/* A-OBS1: pairs with R-OBS1 in kvringd's put_ns(). An odd
		 * generation, or one that moved while we copied, means the
		 * slot was being rewritten for another model: skipped this
		 * snapshot (the next one sees it settled). */
		g1 = atomic_load_explicit(&src->gen, memory_order_acquire);
		id = LD(src->id);
		if (id == 0 || (g1 & 1u))
			continue;
		memcpy(&n->desc, &src->desc, sizeof(n->desc));
		snap_cache(&src->cache, &n->cache);
		/* A-OBS1 (second half): the copies before the re-read. */
		atomic_thread_fence(memory_order_acquire);
		g2 = LD(src->gen);
		if (g1 != g2)
			continue;
		n->id = id;
		ins_copy_clean(n->desc.model, sizeof(n->desc.model),
			       src->desc.model, sizeof(src->desc.model));
		s->nns++;
	}
	for (uint32_t i = 0; i < s->nchan; i++) {
		struct ins_chan_snap *c = &s->ch[i];
		const struct kvr_channel_shm *blk;
		struct kvr_chan_obs_shm *co;
		int brc;

		memset(&c->cache, 0, sizeof(c->cache));
		memset(&c->stage, 0, sizeof(c->stage));
		memset(c->srv, 0, sizeof(c->srv));
		memset(c->wrk, 0, sizeof(c->wrk));
		c->rtt_every = 0;
		/* A free channel's figures belong to a worker that left. */
		if (c->state == KVR_CHAN_FREE)
			continue;
		/* The block snap_chan() mapped for this generation. */
		blk = ins_chan_block(a, i, c->generation, &brc);
		if (!blk)
			continue;
		co = kvr_chan_obs((struct kvr_channel_shm *)(uintptr_t)blk);
		snap_cache(&co->cache, &c->cache);
		c->rtt_every = LD(co->rtt_every);
		snap_stage(&co->stage, &c->stage);
		for (unsigned k = 0; k < KVR_HIST_OPS; k++) {
			kvr_hist_read(&co->server_lat[k], &c->srv[k]);
			kvr_hist_read(&co->worker_rtt[k], &c->wrk[k]);
		}
	}
}

/* ==== Ratios ==== */

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* Bytes served from the cache against bytes workers had to store because
 * the cache did not have them: retrieve_bytes / (retrieve + new store). */
static double byte_hit_ratio(const struct ins_cache *c)
{
	return ratio(c->retrieve_bytes, c->retrieve_bytes + c->store_bytes_new);
}

/* The difference of two cache copies (counters only grow; a reset makes
 * the later one smaller and the difference 0). */
static void cache_diff(const struct ins_cache *a, const struct ins_cache *b,
		       struct ins_cache *out)
{
	const uint64_t *x = (const uint64_t *)a, *y = (const uint64_t *)b;
	uint64_t *d = (uint64_t *)out;

	for (size_t k = 0; k < sizeof(*out) / sizeof(*d); k++)
		d[k] = x[k] >= y[k] ? x[k] - y[k] : 0;
}

static void emit_cache(struct kvr_em *e, const char *k,
		       const struct ins_cache *c)
{
	kvr_em_obj(e, k);
	kvr_em_u64(e, "lookups", c->lookups);
	kvr_em_u64(e, "lookup_keys", c->lookup_keys);
	kvr_em_u64(e, "lookup_hit_keys", c->lookup_hit_keys);
	kvr_em_u64(e, "lookup_hit_bytes", c->lookup_hit_bytes);
	kvr_em_dbl(e, "hit_ratio", ratio(c->lookup_hit_keys, c->lookup_keys));
	kvr_em_u64(e, "retrieves", c->retrieves);
	kvr_em_u64(e, "retrieve_keys", c->retrieve_keys);
	kvr_em_u64(e, "retrieve_hit_keys", c->retrieve_hit_keys);
	kvr_em_u64(e, "retrieve_bytes", c->retrieve_bytes);
	kvr_em_u64(e, "store_keys_new", c->store_keys_new);
	kvr_em_u64(e, "store_bytes_new", c->store_bytes_new);
	kvr_em_u64(e, "store_keys_stored", c->store_keys_stored);
	kvr_em_u64(e, "store_bytes_stored", c->store_bytes_stored);
	kvr_em_u64(e, "store_keys_no_room", c->store_keys_no_room);
	kvr_em_u64(e, "store_keys_busy", c->store_keys_busy);
	kvr_em_dbl(e, "byte_hit_ratio", byte_hit_ratio(c));
	kvr_em_end(e);
}

/* ==== Latency objects ==== */

static void emit_quantiles(struct kvr_em *e, const struct kvr_hist_snap *h)
{
	kvr_em_u64(e, "count", h->count);
	for (unsigned q = 0; q < 3; q++)
		kvr_em_u64(e, q_keys[q], kvr_hist_quantile(h, quantiles[q]));
	kvr_em_dbl(e, "mean_ns", kvr_hist_mean(h));
}

/*
 * One object per op slot with samples: count, p50/p99/p999 and mean since
 * start and, with @prev (same histogram one frame earlier), an "interval"
 * object with the same figures over the frame.
 */
static void emit_lat(struct kvr_em *e, const char *k,
		     const struct kvr_hist_snap *h,
		     const struct kvr_hist_snap *prev, unsigned n)
{
	kvr_em_obj(e, k);
	for (unsigned i = 0; i < n; i++) {
		struct kvr_hist_snap d;

		if (!h[i].count)
			continue;
		kvr_em_obj(e, op_name(i));
		emit_quantiles(e, &h[i]);
		if (prev && kvr_hist_diff(&h[i], &prev[i], &d)) {
			kvr_em_obj(e, "interval");
			emit_quantiles(e, &d);
			kvr_em_end(e);
		}
		kvr_em_end(e);
	}
	kvr_em_end(e);
}

/* Store-ahead's counters, as one object (docs/inspect.md). */
static void emit_stage(struct kvr_em *e, const struct ins_stage *g)
{
	kvr_em_obj(e, "store_ahead");
	kvr_em_u64(e, "staged", g->staged);
	kvr_em_u64(e, "stages", g->stages);
	kvr_em_u64(e, "binds", g->binds);
	kvr_em_u64(e, "binds_existing", g->binds_existing);
	kvr_em_end(e);
}

void ins_obs_emit_server(struct kvr_em *e, const struct ins_snap *s,
			 const struct ins_snap *prev)
{
	if (!s->obs_ok)
		return;
	emit_cache(e, "cache", &s->cache);
	kvr_em_obj(e, "evictions_by_reason");
	for (unsigned k = 0; k < KVR_EVICT_REASONS; k++)
		kvr_em_u64(e, evict_names[k], s->evictions_by[k]);
	kvr_em_end(e);
	kvr_em_obj(e, "evicted_bytes_by_reason");
	for (unsigned k = 0; k < KVR_EVICT_REASONS; k++)
		kvr_em_u64(e, evict_names[k], s->evicted_bytes_by[k]);
	kvr_em_end(e);
	emit_stage(e, &s->stage);
	kvr_em_bool(e, "server_histograms",
		    (s->obs_flags & KVR_OBS_SERVER_HIST) != 0);
	/* What the server keeps (kvringd --histograms): an empty channel
	 * "latency" then means "not kept", not "no requests". */
	kvr_em_str(e, "histograms",
		   !(s->obs_flags & KVR_OBS_SERVER_HIST) ? "off"
		   : s->obs_flags & KVR_OBS_NO_CHAN_HIST ? "global"
							 : "per-channel");
	emit_lat(e, "latency", s->lat, prev && prev->obs_ok ? prev->lat : NULL,
		 INS_HIST_N);
	kvr_em_arr(e, "namespaces");
	for (uint32_t i = 0; i < s->nns; i++) {
		const struct ins_ns_snap *n = &s->ns[i];

		kvr_em_item(e, i);
		kvr_em_u64(e, "id", n->id);
		kvr_em_str(e, "model", n->desc.model);
		kvr_em_u64(e, "tp_rank", n->desc.tp_rank);
		kvr_em_u64(e, "tp_size", n->desc.tp_size);
		emit_cache(e, "cache", &n->cache);
		kvr_em_end(e);
	}
	kvr_em_end(e);
}

void ins_obs_emit_rates(struct kvr_em *e, const struct ins_snap *s,
			const struct ins_snap *prev)
{
	struct ins_cache d;

	if (!s->obs_ok || !prev->obs_ok)
		return;
	cache_diff(&s->cache, &prev->cache, &d);
	kvr_em_dbl(e, "hit_ratio", ratio(d.lookup_hit_keys, d.lookup_keys));
	kvr_em_dbl(e, "byte_hit_ratio", byte_hit_ratio(&d));
	kvr_em_u64(e, "lookup_keys", d.lookup_keys);
	kvr_em_u64(e, "retrieve_bytes", d.retrieve_bytes);
	kvr_em_u64(e, "store_bytes_new", d.store_bytes_new);
}

void ins_obs_emit_chan(struct kvr_em *e, const struct ins_chan_snap *c,
		       const struct ins_chan_snap *pc)
{
	bool same =
	    pc && pc->generation == c->generation && pc->state != KVR_CHAN_FREE;

	emit_cache(e, "cache", &c->cache);
	emit_stage(e, &c->stage);
	emit_lat(e, "latency", c->srv, same ? pc->srv : NULL, KVR_HIST_OPS);
	kvr_em_u64(e, "rtt_sample_every", c->rtt_every);
	emit_lat(e, "rtt", c->wrk, same ? pc->wrk : NULL, KVR_HIST_OPS);
}

/* ==== --latency ==== */

/* A duration for the table: ns, us, ms or s with 3 significant digits. */
static const char *fmt_ns(char *b, size_t n, uint64_t ns)
{
	if (ns < 1000)
		snprintf(b, n, "%" PRIu64 "ns", ns);
	else if (ns < 1000000)
		snprintf(b, n, "%.3gus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(b, n, "%.3gms", (double)ns / 1e6);
	else
		snprintf(b, n, "%.3gs", (double)ns / 1e9);
	return b;
}

static void table_rows(FILE *f, const char *side, const struct kvr_hist_snap *h,
		       unsigned n)
{
	char b[4][24];

	for (unsigned i = 0; i < n; i++) {
		if (!h[i].count)
			continue;
		fprintf(f, "%-7s %-17s %12" PRIu64 " %9s %9s %9s %9s\n", side,
			op_name(i), h[i].count,
			fmt_ns(b[0], 24, kvr_hist_quantile(&h[i], 0.5)),
			fmt_ns(b[1], 24, kvr_hist_quantile(&h[i], 0.99)),
			fmt_ns(b[2], 24, kvr_hist_quantile(&h[i], 0.999)),
			fmt_ns(b[3], 24, (uint64_t)kvr_hist_mean(&h[i])));
	}
}

/* What --latency shows: the server's histograms (global, or the channel's)
 * and the workers' round trips (all channels in use merged, or the one). */
struct lat_view {
	struct kvr_hist_snap srv[INS_HIST_N];
	struct kvr_hist_snap wrk[KVR_HIST_OPS];
	unsigned nsrv;
};

static void lat_view(const struct ins_opts *o, const struct ins_snap *s,
		     struct lat_view *v)
{
	memset(v, 0, sizeof(*v));
	if (o->have_channel) {
		const struct ins_chan_snap *c = &s->ch[o->channel];

		memcpy(v->srv, c->srv, sizeof(c->srv));
		memcpy(v->wrk, c->wrk, sizeof(c->wrk));
		v->nsrv = KVR_HIST_OPS;
		return;
	}
	memcpy(v->srv, s->lat, sizeof(s->lat));
	v->nsrv = INS_HIST_N;
	for (uint32_t i = 0; i < s->nchan; i++)
		for (unsigned k = 0; k < KVR_HIST_OPS; k++)
			kvr_hist_merge(&v->wrk[k], &s->ch[i].wrk[k]);
}

/* @d = @a - @b per op; false when any histogram went backwards (restart,
 * or a channel re-claimed by another worker). */
static bool view_diff(const struct lat_view *a, const struct lat_view *b,
		      struct lat_view *d)
{
	bool ok = true;

	d->nsrv = a->nsrv;
	for (unsigned k = 0; k < a->nsrv; k++)
		ok &= kvr_hist_diff(&a->srv[k], &b->srv[k], &d->srv[k]);
	for (unsigned k = 0; k < KVR_HIST_OPS; k++)
		ok &= kvr_hist_diff(&a->wrk[k], &b->wrk[k], &d->wrk[k]);
	return ok;
}

static void json_side(struct kvr_em *e, const char *k,
		      const struct kvr_hist_snap *h,
		      const struct kvr_hist_snap *d, unsigned n)
{
	emit_lat(e, k, h, NULL, n);
	if (!d)
		return;
	/* The interval as its own object keyed like the first. */
	{
		char key[40];

		snprintf(key, sizeof(key), "%s_interval", k);
		emit_lat(e, key, d, NULL, n);
	}
}

void ins_latency_emit(FILE *f, const struct ins_opts *o,
		      const struct ins_snap *s, const struct ins_snap *prev)
{
	static struct lat_view v, pv, d;
	bool have_d = false;
	double dt = prev ? (double)(s->mono_ns - prev->mono_ns) / 1e9 : 0.0;

	lat_view(o, s, &v);
	if (prev) {
		lat_view(o, prev, &pv);
		have_d = view_diff(&v, &pv, &d) &&
			 (!o->have_channel || prev->ch[o->channel].generation ==
						  s->ch[o->channel].generation);
	}
	if (o->json) {
		struct kvr_em e;

		kvr_em_init(&e, f, true);
		kvr_em_u64(&e, "schema", INS_SCHEMA);
		kvr_em_str(&e, "scope", o->have_channel ? "channel" : "server");
		if (o->have_channel) {
			kvr_em_u64(&e, "channel", o->channel);
			kvr_em_str(
			    &e, "channel_state",
			    ins_chan_state_name(s->ch[o->channel].state));
			kvr_em_u64(&e, "rtt_sample_every",
				   s->ch[o->channel].rtt_every);
		}
		if (have_d)
			kvr_em_u64(&e, "interval_ms",
				   (s->mono_ns - prev->mono_ns) / 1000000);
		json_side(&e, "server", v.srv, have_d ? d.srv : NULL, v.nsrv);
		json_side(&e, "worker", v.wrk, have_d ? d.wrk : NULL,
			  KVR_HIST_OPS);
		kvr_em_finish(&e);
		return;
	}
	if (o->have_channel)
		fprintf(f, "channel %u (%s, pid %d, model %s, rank %u)\n",
			o->channel,
			ins_chan_state_name(s->ch[o->channel].state),
			s->ch[o->channel].pid, s->ch[o->channel].ns.model,
			s->ch[o->channel].ns.tp_rank);
	fputs("server = from reading the request to publishing its answer; "
	      "worker = round trip seen by libkvring\n",
	      f);
	if (have_d && dt > 0) {
		fprintf(f, "last %.1f s:\n", dt);
		fprintf(f, "%-7s %-17s %12s %9s %9s %9s %9s\n", "side", "op",
			"count", "p50", "p99", "p99.9", "mean");
		table_rows(f, "server", d.srv, d.nsrv);
		table_rows(f, "worker", d.wrk, KVR_HIST_OPS);
		fputs("since start:\n", f);
	}
	fprintf(f, "%-7s %-17s %12s %9s %9s %9s %9s\n", "side", "op", "count",
		"p50", "p99", "p99.9", "mean");
	table_rows(f, "server", v.srv, v.nsrv);
	table_rows(f, "worker", v.wrk, KVR_HIST_OPS);
	fflush(f);
}

/* ==== Prometheus ==== */

/* Finite `le` bounds: every power of two from 2^6 ns (64 ns) to 2^34 ns
 * (17.2 s). Each is a bucket's lower bound, so the cumulative count below
 * it is exact (a sample of exactly 2^e ns counts in the next bound). */
#define PROM_LE_FIRST 6u
#define PROM_LE_LAST  34u

/* One histogram's samples, with the labels in @labels ("" or "a=\"b\","). */
static void prom_hist(FILE *f, const char *name, const char *labels,
		      const struct kvr_hist_snap *h)
{
	uint64_t cum = 0;
	unsigned i = 0;

	for (unsigned e = PROM_LE_FIRST; e <= PROM_LE_LAST; e++) {
		unsigned stop = kvr_hist_bucket(1ull << e);

		for (; i < stop; i++)
			cum += h->buckets[i];
		fprintf(f, "%s_bucket{%sle=\"%.12g\"} %" PRIu64 "\n", name,
			labels, (double)(1ull << e) / 1e9, cum);
	}
	fprintf(f, "%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n", name, labels,
		h->count);
	/* Drop the trailing comma for the _sum/_count label sets. */
	{
		char l[512];
		size_t n = strlen(labels);

		snprintf(l, sizeof(l), "%.*s", n ? (int)n - 1 : 0, labels);
		fprintf(f, "%s_sum%s%s%s %.9f\n", name, n ? "{" : "", l,
			n ? "}" : "", (double)h->sum_ns / 1e9);
		fprintf(f, "%s_count%s%s%s %" PRIu64 "\n", name, n ? "{" : "",
			l, n ? "}" : "", h->count);
	}
}

/* The per-channel label set as a string, for prom_hist(): the same labels
 * as ins_prom_chan_open(). The model went through ins_copy_clean(),
 * which leaves no quote, backslash or newline to escape. */
static void chan_labels(char *b, size_t n, const struct ins_chan_snap *c,
			const char *op)
{
	snprintf(b, n,
		 "channel=\"%" PRIu32 "\",model=\"%s\",rank=\"%u\",op=\"%s\",",
		 c->idx, c->ns.model, c->ns.tp_rank, op);
}

/* Cache counter families: name suffix, help, field offset. */
#define CF(x) offsetof(struct ins_cache, x)
static const struct {
	const char *name, *help;
	size_t off;
} cache_metrics[] = {
    {"lookups_total", "Lookups answered.", CF(lookups)},
    {"lookup_keys_total", "Keys asked by lookups.", CF(lookup_keys)},
    {"lookup_hit_keys_total", "Keys found (longest stored prefix).",
     CF(lookup_hit_keys)},
    {"lookup_hit_bytes_total", "Bytes of the keys lookups found.",
     CF(lookup_hit_bytes)},
    {"retrieves_total", "prepare_retrieve requests answered.", CF(retrieves)},
    {"retrieve_keys_total", "Keys asked by retrieves (0 when by lease).",
     CF(retrieve_keys)},
    {"retrieve_hit_keys_total", "Chunks handed out by retrieves.",
     CF(retrieve_hit_keys)},
    {"retrieve_bytes_total", "Bytes handed out by retrieves.",
     CF(retrieve_bytes)},
};

/* Store outcomes: one family, label result. */
static const struct {
	const char *result;
	size_t keys, bytes; /* bytes: SIZE_MAX when not counted */
} store_results[] = {
    {"new", CF(store_keys_new), CF(store_bytes_new)},
    {"stored", CF(store_keys_stored), CF(store_bytes_stored)},
    {"no_room", CF(store_keys_no_room), SIZE_MAX},
    {"busy", CF(store_keys_busy), SIZE_MAX},
};

static uint64_t cache_at(const struct ins_cache *c, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)c + off, sizeof(v));
	return v;
}

/* Server-wide and per-namespace cache families for one field table. */
static void prom_cache(FILE *f, bool all, const struct ins_snap *s)
{
	char name[96];

	for (size_t m = 0; m < sizeof(cache_metrics) / sizeof(cache_metrics[0]);
	     m++) {
		snprintf(name, sizeof(name), "kvring_%s",
			 cache_metrics[m].name);
		ins_prom_head(f, name, "counter", cache_metrics[m].help);
		fprintf(f, "%s %" PRIu64 "\n", name,
			cache_at(&s->cache, cache_metrics[m].off));
		snprintf(name, sizeof(name), "kvring_namespace_%s",
			 cache_metrics[m].name);
		ins_prom_head(f, name, "counter", cache_metrics[m].help);
		for (uint32_t i = 0; i < s->nns; i++) {
			fprintf(f, "%s{namespace=\"%u\",model=\"", name,
				s->ns[i].id);
			ins_prom_lv(f, s->ns[i].desc.model);
			fprintf(
			    f, "\",rank=\"%u\"} %" PRIu64 "\n",
			    s->ns[i].desc.tp_rank,
			    cache_at(&s->ns[i].cache, cache_metrics[m].off));
		}
		snprintf(name, sizeof(name), "kvring_channel_%s",
			 cache_metrics[m].name);
		ins_prom_head(f, name, "counter", cache_metrics[m].help);
		for (uint32_t i = 0; i < s->nchan; i++) {
			if (!ins_chan_shown(&s->ch[i], all))
				continue;
			ins_prom_chan_u64(
			    f, name, &s->ch[i],
			    cache_at(&s->ch[i].cache, cache_metrics[m].off));
		}
	}
	for (int bytes = 0; bytes < 2; bytes++) {
		const char *fam = bytes ? "kvring_store_bytes_total"
					: "kvring_store_keys_total";

		ins_prom_head(f, fam, "counter",
			      bytes ? "Bytes asked to be stored, by outcome: "
				      "new (a slot was reserved) or stored "
				      "(already in the cache)."
				    : "Keys asked to be stored, by outcome.");
		for (size_t r = 0;
		     r < sizeof(store_results) / sizeof(store_results[0]);
		     r++) {
			size_t off = bytes ? store_results[r].bytes
					   : store_results[r].keys;

			if (off == SIZE_MAX)
				continue;
			fprintf(f, "%s{result=\"%s\"} %" PRIu64 "\n", fam,
				store_results[r].result,
				cache_at(&s->cache, off));
		}
	}
	ins_prom_head(f, "kvring_evictions_by_reason_total", "counter",
		      "Objects evicted, by reason (room: LRU victim of a "
		      "store; namespace: its model's slot was reused).");
	for (unsigned k = 0; k < KVR_EVICT_REASONS; k++)
		fprintf(f,
			"kvring_evictions_by_reason_total{reason=\"%s\"} "
			"%" PRIu64 "\n",
			evict_names[k], s->evictions_by[k]);
	ins_prom_head(f, "kvring_evicted_bytes_by_reason_total", "counter",
		      "Bytes evicted, by reason.");
	for (unsigned k = 0; k < KVR_EVICT_REASONS; k++)
		fprintf(f,
			"kvring_evicted_bytes_by_reason_total{reason="
			"\"%s\"} %" PRIu64 "\n",
			evict_names[k], s->evicted_bytes_by[k]);
}

/* kvring_store_ahead_*: the server's total, and one per channel. */
static const struct {
	const char *name, *type, *help;
	size_t off;
} stage_metrics[] = {
    {"staged", "gauge", "Staged slots held now (store-ahead).",
     offsetof(struct ins_stage, staged)},
    {"stages_total", "counter", "Slots staged for store-ahead.",
     offsetof(struct ins_stage, stages)},
    {"binds_total", "counter",
     "Staged slots bound to a key (the store went ahead).",
     offsetof(struct ins_stage, binds)},
    {"binds_existing_total", "counter",
     "Binds that found the key stored already (nothing stored, the slot "
     "stayed staged).",
     offsetof(struct ins_stage, binds_existing)},
};

static uint64_t stage_at(const struct ins_stage *g, size_t off)
{
	return *(const uint64_t *)(const void *)((const char *)g + off);
}

static void prom_stage(FILE *f, bool all, const struct ins_snap *s)
{
	char name[96];

	for (size_t m = 0; m < sizeof(stage_metrics) / sizeof(stage_metrics[0]);
	     m++) {
		snprintf(name, sizeof(name), "kvring_store_ahead_%s",
			 stage_metrics[m].name);
		ins_prom_head(f, name, stage_metrics[m].type,
			      stage_metrics[m].help);
		fprintf(f, "%s %" PRIu64 "\n", name,
			stage_at(&s->stage, stage_metrics[m].off));
		snprintf(name, sizeof(name), "kvring_channel_store_ahead_%s",
			 stage_metrics[m].name);
		ins_prom_head(f, name, stage_metrics[m].type,
			      stage_metrics[m].help);
		for (uint32_t i = 0; i < s->nchan; i++) {
			if (!ins_chan_shown(&s->ch[i], all))
				continue;
			ins_prom_chan_u64(
			    f, name, &s->ch[i],
			    stage_at(&s->ch[i].stage, stage_metrics[m].off));
		}
	}
}

void ins_prom_obs(FILE *f, bool all, const struct ins_snap *s)
{
	char labels[512];

	if (!s->obs_ok)
		return;
	prom_cache(f, all, s);
	prom_stage(f, all, s);
	/* kvringd --histograms off keeps none: no family rather than
	 * zeros that read as "no requests". */
	if (s->obs_flags & KVR_OBS_SERVER_HIST)
		ins_prom_head(f, "kvring_op_latency_seconds", "histogram",
			      "Server time per request, from reading it to "
			      "publishing its answer, all channels.");
	for (unsigned k = 0; k < INS_HIST_N; k++) {
		if (!(s->obs_flags & KVR_OBS_SERVER_HIST))
			break;
		/* The L2's and the disk's slots only once the tier exists
		 * and writes them. */
		if (k >= KVR_HIST_OPS && !s->lat[k].count)
			continue;
		snprintf(labels, sizeof(labels), "op=\"%s\",", op_name(k));
		prom_hist(f, "kvring_op_latency_seconds", labels, &s->lat[k]);
	}
	/* Per channel, only the ops the worker used: a histogram is 32
	 * series, and most workers use five of the nine ops. */
	ins_prom_head(f, "kvring_channel_op_latency_seconds", "histogram",
		      "Server time per request of this channel.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!ins_chan_shown(&s->ch[i], all))
			continue;
		for (unsigned k = 0; k < KVR_HIST_OPS; k++) {
			if (!s->ch[i].srv[k].count)
				continue;
			chan_labels(labels, sizeof(labels), &s->ch[i],
				    op_name(k));
			prom_hist(f, "kvring_channel_op_latency_seconds",
				  labels, &s->ch[i].srv[k]);
		}
	}
	ins_prom_head(f, "kvring_channel_rtt_seconds", "histogram",
		      "Round trip per request as libkvring saw it (each timed "
		      "op counts as rtt_sample_every ops).");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!ins_chan_shown(&s->ch[i], all))
			continue;
		for (unsigned k = 0; k < KVR_HIST_OPS; k++) {
			if (!s->ch[i].wrk[k].count)
				continue;
			chan_labels(labels, sizeof(labels), &s->ch[i],
				    op_name(k));
			prom_hist(f, "kvring_channel_rtt_seconds", labels,
				  &s->ch[i].wrk[k]);
		}
	}
	ins_prom_head(f, "kvring_channel_rtt_sample_every", "gauge",
		      "The worker times one request in N (0: not recording).");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!ins_chan_shown(&s->ch[i], all))
			continue;
		ins_prom_chan_u64(f, "kvring_channel_rtt_sample_every",
				  &s->ch[i], s->ch[i].rtt_every);
	}
}
