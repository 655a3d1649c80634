/* SPDX-License-Identifier: MIT */
/*
 * l2.c - kvring-inspect's view of the L2 tier (docs/l2.md): the copy of
 * the control header's l2 section into the snapshot, its key=value/JSON
 * object in the overview ("l2"), and its Prometheus families (kvring_l2_*).
 * Read-only like the rest of the tool; addresses are cleaned before they
 * are printed (the section is server-written, but the file is shared).
 */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "inspect.h"

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static const char *const err_names[INS_L2_ERRS] = {
    "connect", "io", "proto", "oom", "server", "redirect",
};

void ins_l2_snap(const struct kvr_ctl_hdr_shm *h, struct ins_l2_snap *o)
{
	const struct kvr_l2stats_shm *l = &h->l2;

	/* Relaxed: each counter stands alone (layout.h). */
	o->mode = LD(l->mode);
	o->nodes = LD(l->nodes);
	o->queue_depth = LD(l->queue_depth);
	o->drops = LD(l->drops);
	o->up_chunks = LD(l->up_chunks);
	o->up_bytes = LD(l->up_bytes);
	o->up_exists = LD(l->up_exists);
	o->up_failed = LD(l->up_failed);
	o->down_chunks = LD(l->down_chunks);
	o->down_bytes = LD(l->down_bytes);
	o->hits = LD(l->hits);
	o->misses = LD(l->misses);
	o->holes = LD(l->holes);
	o->corrupt = LD(l->corrupt);
	o->deleted = LD(l->deleted);
	o->rt_lookups = LD(l->rt_lookups);
	o->rt_deadline = LD(l->rt_deadline);
	o->moved = LD(l->moved);
	o->ask = LD(l->ask);
	o->slot_refresh = LD(l->slot_refresh);
	o->tryagain = LD(l->tryagain);
	o->state_changes = LD(l->state_changes);
	for (int i = 0; i < INS_L2_ERRS; i++)
		o->errors[i] = LD(l->errors[i]);
	for (uint32_t i = 0; i < KVR_L2_SHM_NODES; i++) {
		ins_copy_clean(o->node[i].addr, sizeof(o->node[i].addr),
			       l->node[i].addr, sizeof(l->node[i].addr));
		o->node[i].state = LD(l->node[i].state);
		o->node[i].errors = LD(l->node[i].errors);
	}
}

static const char *mode_name(uint32_t m)
{
	switch (m) {
	case 0:
		return "off";
	case 1:
		return "redis";
	case 2:
		return "unix";
	case 3:
		return "cluster";
	default:
		return "?";
	}
}

static const char *state_name(uint32_t s)
{
	return s == 1 ? "up" : s == 2 ? "down" : "unused";
}

void ins_l2_emit(struct kvr_em *e, const struct ins_l2_snap *l)
{
	kvr_em_obj(e, "l2");
	kvr_em_str(e, "mode", mode_name(l->mode));
	if (l->mode) {
		kvr_em_u64(e, "queue_depth", l->queue_depth);
		kvr_em_u64(e, "drops", l->drops);
		kvr_em_u64(e, "upload_chunks", l->up_chunks);
		kvr_em_u64(e, "upload_bytes", l->up_bytes);
		kvr_em_u64(e, "upload_skipped_present", l->up_exists);
		kvr_em_u64(e, "upload_failed", l->up_failed);
		kvr_em_u64(e, "load_chunks", l->down_chunks);
		kvr_em_u64(e, "load_bytes", l->down_bytes);
		kvr_em_u64(e, "hits", l->hits);
		kvr_em_u64(e, "misses", l->misses);
		kvr_em_u64(e, "holes", l->holes);
		kvr_em_u64(e, "corrupt", l->corrupt);
		kvr_em_u64(e, "corrupt_deleted", l->deleted);
		kvr_em_u64(e, "read_through_lookups", l->rt_lookups);
		kvr_em_u64(e, "read_through_deadline", l->rt_deadline);
		kvr_em_u64(e, "moved", l->moved);
		kvr_em_u64(e, "ask", l->ask);
		kvr_em_u64(e, "slot_refresh", l->slot_refresh);
		kvr_em_u64(e, "tryagain", l->tryagain);
		kvr_em_u64(e, "node_state_changes", l->state_changes);
		kvr_em_obj(e, "errors");
		for (int i = 0; i < INS_L2_ERRS; i++)
			kvr_em_u64(e, err_names[i], l->errors[i]);
		kvr_em_end(e);
		kvr_em_u64(e, "nodes_known", l->nodes);
		kvr_em_arr(e, "nodes");
		for (uint32_t i = 0; i < KVR_L2_SHM_NODES; i++) {
			if (!l->node[i].addr[0])
				continue;
			kvr_em_item(e, i);
			kvr_em_str(e, "addr", l->node[i].addr);
			kvr_em_str(e, "state", state_name(l->node[i].state));
			kvr_em_u64(e, "errors", l->node[i].errors);
			kvr_em_end(e);
		}
		kvr_em_end(e);
	}
	kvr_em_end(e);
}

/* A counter with a direction label: up (to Redis) and down (from it). */
static void dir(FILE *f, const char *name, const char *help, uint64_t up,
		uint64_t down)
{
	ins_prom_head(f, name, "counter", help);
	fprintf(f, "%s{direction=\"up\"} %" PRIu64 "\n", name, up);
	fprintf(f, "%s{direction=\"down\"} %" PRIu64 "\n", name, down);
}

/* The unlabelled counters after the two direction families, in order. */
static const struct {
	const char *name, *help;
	size_t off; /* of the uint64_t in struct ins_l2_snap */
} counters[] = {
    {"kvring_l2_upload_skipped_total",
     "Uploads skipped: EXISTS said the chunk is in L2.",
     offsetof(struct ins_l2_snap, up_exists)},
    {"kvring_l2_upload_failed_total",
     "Uploads that failed (node down, -OOM, I/O).",
     offsetof(struct ins_l2_snap, up_failed)},
    {"kvring_l2_hits_total", "Read-through keys found in L2.",
     offsetof(struct ins_l2_snap, hits)},
    {"kvring_l2_misses_total", "Read-throughs that ended on a key L2 lacks.",
     offsetof(struct ins_l2_snap, misses)},
    {"kvring_l2_holes_total",
     "Read-throughs that ended on a hole (L2 had later keys).",
     offsetof(struct ins_l2_snap, holes)},
    {"kvring_l2_corrupt_total",
     "Values that failed a check (never served; deleted).",
     offsetof(struct ins_l2_snap, corrupt)},
    {"kvring_l2_read_through_total", "Lookups that waited on L2.",
     offsetof(struct ins_l2_snap, rt_lookups)},
    {"kvring_l2_deadline_total",
     "Read-through lookups answered at the deadline (ask again).",
     offsetof(struct ins_l2_snap, rt_deadline)},
};

void ins_l2_prom(FILE *f, const struct ins_l2_snap *l)
{
	ins_prom_u64(
	    f, "kvring_l2_enabled", "gauge",
	    "1 if kvringd runs with --l2 (mode: 1 redis, 2 unix, 3 cluster).",
	    l->mode != 0);
	if (!l->mode)
		return;
	ins_prom_u64(f, "kvring_l2_mode", "gauge",
		     "1 redis, 2 unix, 3 cluster.", l->mode);
	ins_prom_u64(f, "kvring_l2_queue_depth", "gauge",
		     "L2 jobs queued or running.", l->queue_depth);
	ins_prom_u64(f, "kvring_l2_drops_total", "counter",
		     "Chunks not uploaded because the upload queue was full.",
		     l->drops);
	dir(f, "kvring_l2_chunks_total",
	    "Chunks uploaded (up) and loaded and verified (down).",
	    l->up_chunks, l->down_chunks);
	dir(f, "kvring_l2_bytes_total", "Payload bytes per direction.",
	    l->up_bytes, l->down_bytes);
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		uint64_t v;

		memcpy(&v, (const char *)l + counters[i].off, sizeof(v));
		ins_prom_u64(f, counters[i].name, "counter", counters[i].help,
			     v);
	}
	ins_prom_head(f, "kvring_l2_redirects_total", "counter",
		      "Redis Cluster redirects followed, by kind.");
	fprintf(f, "kvring_l2_redirects_total{kind=\"moved\"} %" PRIu64 "\n",
		l->moved);
	fprintf(f, "kvring_l2_redirects_total{kind=\"ask\"} %" PRIu64 "\n",
		l->ask);
	fprintf(f, "kvring_l2_redirects_total{kind=\"tryagain\"} %" PRIu64 "\n",
		l->tryagain);
	ins_prom_head(f, "kvring_l2_errors_total", "counter",
		      "L2 errors by kind.");
	for (int i = 0; i < INS_L2_ERRS; i++)
		fprintf(f, "kvring_l2_errors_total{kind=\"%s\"} %" PRIu64 "\n",
			err_names[i], l->errors[i]);
	ins_prom_head(f, "kvring_l2_node_up", "gauge",
		      "1 if the node is up, 0 if down (first 4 nodes).");
	for (uint32_t i = 0; i < KVR_L2_SHM_NODES; i++)
		if (l->node[i].addr[0])
			fprintf(f, "kvring_l2_node_up{node=\"%s\"} %d\n",
				l->node[i].addr, l->node[i].state == 1);
}
