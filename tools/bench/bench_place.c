/* SPDX-License-Identifier: MIT */
/*
 * bench_place.c - the placement probe and the per-placement summary of
 * kvring-bench (bench_place.h says what and why). The recorder keeps, per
 * figure name, the values seen near and far in growing arrays; the
 * summary sorts each to take its median. It sits above bench_peers.c and
 * bench_common.c and below the scenarios that probe.
 */
#include <stdlib.h>
#include <string.h>

#include "bench_place.h"

/* One recorded figure: its values per placement (near, far). */
struct place_fig {
	char name[80];
	double *v[2];
	size_t n[2], cap[2];
};

#define PLACE_MAX_FIGS 96u

/* The process-wide recorder (the main process only). */
static struct {
	struct place_fig fig[PLACE_MAX_FIGS];
	unsigned nfig;
	unsigned probes[2]; /* distinct probes seen, near and far */
	unsigned unknown;   /* values recorded without a placement */
	bool json;
	bool dropped; /* a figure did not fit the table */
} rec;

struct bench_place bench_place_of(double floor_ns)
{
	enum bench_placement w = floor_ns < BENCH_PLACE_NEAR_MAX_NS
				     ? BENCH_PLACE_NEAR
				     : BENCH_PLACE_FAR;

	if (!(floor_ns > 0))
		return (struct bench_place){0, BENCH_PLACE_UNKNOWN};
	rec.probes[w]++; /* every probe of the run passes here once */
	return (struct bench_place){floor_ns, w};
}

const char *bench_place_name(enum bench_placement w)
{
	static const char *const names[] = {"near", "far", "mixed", "unknown"};

	return (unsigned)w < 4 ? names[w] : "unknown";
}

struct bench_place bench_place_probe(struct bench_peer *peer, int cpu_server)
{
	uint64_t n = BENCH_PLACE_PROBE_N, warm = n / 4;
	uint64_t *v = calloc(n + warm, sizeof(*v));
	struct bench_peer *own = NULL;
	double p50 = 0;

	if (!v)
		return bench_place_of(0);
	if (!peer &&
	    bench_peer_start(BENCH_PEER_CACHELINE, cpu_server, 0, &own) == 0)
		peer = own;
	/* The warm-up wakes the child and settles the line; then the probe. */
	if (peer && bench_peer_rtt(peer, warm, 0, v) == 0 &&
	    bench_peer_rtt(peer, n, 0, v) == 0) {
		bench_sort_u64(v, n);
		p50 = (double)bench_percentile(v, n, 50);
	}
	bench_peer_stop(own);
	free(v);
	return bench_place_of(p50);
}

struct bench_place bench_place_pool(const struct bench_place *p, unsigned n)
{
	double f[64];
	unsigned k = 0;
	enum bench_placement w = BENCH_PLACE_UNKNOWN;

	for (unsigned i = 0; i < n && k < 64; i++) {
		if (p[i].where == BENCH_PLACE_UNKNOWN)
			continue;
		if (w == BENCH_PLACE_UNKNOWN)
			w = p[i].where;
		else if (w != p[i].where)
			w = BENCH_PLACE_MIXED;
		f[k++] = p[i].floor_ns;
	}
	return (struct bench_place){k ? bench_median_f64(f, k) : 0, w};
}

void bench_place_json(struct bench_json *j, const struct bench_place *p)
{
	if (p->floor_ns > 0)
		bench_json_f64(j, "placement_floor_ns", p->floor_ns);
	bench_json_str(j, "placement", bench_place_name(p->where));
}

static struct place_fig *fig_find(const char *name)
{
	for (unsigned i = 0; i < rec.nfig; i++)
		if (strcmp(rec.fig[i].name, name) == 0)
			return &rec.fig[i];
	if (rec.nfig == PLACE_MAX_FIGS) {
		rec.dropped = true;
		return NULL;
	}
	struct place_fig *f = &rec.fig[rec.nfig++];

	snprintf(f->name, sizeof(f->name), "%s", name);
	return f;
}

void bench_place_record(const char *figure, double value,
			const struct bench_place *p, bool json)
{
	unsigned w = (unsigned)p->where;
	struct place_fig *f;

	rec.json = json;
	if (w > BENCH_PLACE_FAR) {
		rec.unknown++;
		return;
	}
	f = fig_find(figure);
	if (!f)
		return;
	if (f->n[w] == f->cap[w]) {
		size_t cap = f->cap[w] ? 2 * f->cap[w] : 16;
		double *nv = realloc(f->v[w], cap * sizeof(*nv));

		if (!nv)
			return;
		f->v[w] = nv;
		f->cap[w] = cap;
	}
	f->v[w][f->n[w]++] = value;
}

/* The one-line verdict on what the run saw. */
static const char *place_verdict(void)
{
	if (rec.probes[0] && rec.probes[1])
		return "both placements";
	if (rec.probes[0])
		return "only the near placement: no far figure";
	if (rec.probes[1])
		return "only the far placement: no near figure";
	return "no placement known";
}

static void summary_json(void)
{
	struct kvr_em e;
	char key[96];

	kvr_em_init(&e, stdout, true);
	kvr_em_u64(&e, "schema", 1);
	kvr_em_str(&e, "scenario", "placement");
	kvr_em_str(&e, "subject", "summary");
	kvr_em_fixed(&e, "near_max_ns", BENCH_PLACE_NEAR_MAX_NS, 0);
	kvr_em_u64(&e, "probes_near", rec.probes[0]);
	kvr_em_u64(&e, "probes_far", rec.probes[1]);
	kvr_em_bool(&e, "single_placement", !(rec.probes[0] && rec.probes[1]));
	kvr_em_str(&e, "seen", place_verdict());
	for (unsigned i = 0; i < rec.nfig; i++) {
		struct place_fig *f = &rec.fig[i];

		for (unsigned w = 0; w < 2; w++) {
			if (!f->n[w])
				continue;
			snprintf(key, sizeof(key), "%s.%s", f->name,
				 bench_place_name((enum bench_placement)w));
			kvr_em_g(&e, key, bench_median_f64(f->v[w], f->n[w]));
		}
	}
	kvr_em_finish(&e);
}

static void summary_text(void)
{
	char cell[2][64];

	printf("\n# placement: near = cache-line p50 < %.0f ns, far = at or "
	       "above; probes: %u near, %u far\n",
	       BENCH_PLACE_NEAR_MAX_NS, rec.probes[0], rec.probes[1]);
	printf("# placement: this run saw %s\n", place_verdict());
	printf("%-44s %16s %16s\n", "figure (median per placement)", "near (n)",
	       "far (n)");
	for (unsigned i = 0; i < rec.nfig; i++) {
		struct place_fig *f = &rec.fig[i];

		for (unsigned w = 0; w < 2; w++) {
			if (f->n[w])
				snprintf(cell[w], sizeof(cell[w]), "%.4g (%zu)",
					 bench_median_f64(f->v[w], f->n[w]),
					 f->n[w]);
			else
				snprintf(cell[w], sizeof(cell[w]), "-");
		}
		printf("%-44s %16s %16s\n", f->name, cell[0], cell[1]);
	}
	if (rec.unknown)
		printf("# placement: %u figure(s) without a placement (probe "
		       "failed) left out\n",
		       rec.unknown);
	if (rec.dropped)
		printf("# placement: more than %u figures: the rest left "
		       "out\n",
		       PLACE_MAX_FIGS);
}

void bench_place_summary(void)
{
	if (rec.nfig == 0 && rec.unknown == 0)
		return;
	if (rec.json)
		summary_json();
	else
		summary_text();
	fflush(stdout);
	for (unsigned i = 0; i < rec.nfig; i++) {
		free(rec.fig[i].v[0]);
		free(rec.fig[i].v[1]);
	}
	memset(&rec, 0, sizeof(rec));
}
