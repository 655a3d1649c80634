/* SPDX-License-Identifier: MIT */
/*
 * disk.c - kvring-inspect's view of the disk tier (docs/storage.md, "The
 * disk tier"): the copy of the control header's disk section into the
 * snapshot, its key=value/JSON object in the overview ("disk"), and its
 * Prometheus families (kvring_disk_*). Throughput is the rate of the byte
 * counters: under --watch, the disk object's write_gb_per_s and
 * read_gb_per_s over the frame's interval (as the "rates" object's); in
 * Prometheus, rate() of the byte counters.
 */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include <kvring/chanmap.h>

#include "inspect.h"

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void ins_disk_snap(const struct kvr_ctl_hdr_shm *h, struct ins_disk_snap *o)
{
	const struct kvr_disk_shm *d = &h->disk;

	/* Relaxed: each counter stands alone (layout.h). */
	o->mode = d->mode;
	o->direct = d->direct;
	o->fixed = d->fixed;
	o->rebuilt = LD(d->rebuilt);
	o->capacity_bytes = LD(d->capacity_bytes);
	o->used_bytes = LD(d->used_bytes);
	o->objects = LD(d->objects);
	o->records = LD(d->records);
	o->hits = LD(d->hits);
	o->misses = LD(d->misses);
	o->reads = LD(d->reads);
	o->read_bytes = LD(d->read_bytes);
	o->writes = LD(d->writes);
	o->write_bytes = LD(d->write_bytes);
	o->queue_depth = LD(d->queue_depth);
	o->corrupt = LD(d->corrupt);
	o->dropped = LD(d->dropped);
	o->io_errors = LD(d->io_errors);
	o->no_space = LD(d->no_space);
	o->evictions = LD(d->evictions);
	o->scanned = LD(d->scanned);
	o->scan_total = LD(d->scan_total);
	o->unsaved = LD(d->unsaved);
	o->rebuild_ns = LD(d->rebuild_ns);
	o->deleted = LD(d->deleted);
	o->held = LD(d->held); /* abi 5.6; 0 from an older server */
}

void ins_disk_hist(const struct ins_attach *a, struct ins_snap *s)
{
	const struct kvr_disk_shm *d = &a->h->disk;
	const struct kvr_disk_hist_shm *h;
	struct kvr_seg m = {.fd = -1};
	struct kvr_err e = {0};
	uint32_t bytes;

	memset(&s->lat[INS_HIST_DISK_WRITE], 0,
	       KVR_DISK_HISTS * sizeof(s->lat[0]));
	/* A-DHIST1: pairs with R-DHIST1 in kvringd's hist_open(). */
	bytes =
	    atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&d->hist_bytes,
				 memory_order_acquire);
	if (bytes < sizeof(*h) || d->hist_fd < 0)
		return;
	/* Not allowed (the directory's rule) or gone: nothing to show. */
	if (kvr_chanmap_open_disk_hist(a->h->seg.creator_pid, d->hist_fd,
				       sizeof(*h), &m, &e) < 0)
		return;
	h = m.base;
	kvr_hist_read(&h->lat[KVR_DISK_HIST_WRITE],
		      &s->lat[INS_HIST_DISK_WRITE]);
	kvr_hist_read(&h->lat[KVR_DISK_HIST_READ], &s->lat[INS_HIST_DISK_READ]);
	kvr_seg_detach(&m);
}

static const char *mode_name(uint32_t m)
{
	return m == 0 ? "off" : m == 1 ? "evict" : m == 2 ? "commit" : "?";
}

/* Decimal GB/s of a byte counter that went from @b0 to @b1 in @dt s. */
static double gb_per_s(uint64_t b0, uint64_t b1, double dt)
{
	return b1 > b0 && dt > 0 ? (double)(b1 - b0) / dt / 1e9 : 0.0;
}

void ins_disk_emit(struct kvr_em *e, const struct ins_disk_snap *d,
		   const struct ins_disk_snap *prev, double dt)
{
	kvr_em_obj(e, "disk");
	kvr_em_str(e, "mode", mode_name(d->mode));
	if (d->mode) {
		kvr_em_str(e, "io", d->direct ? "direct" : "buffered");
		kvr_em_bool(e, "registered_buffers", d->fixed != 0);
		kvr_em_u64(e, "capacity_bytes", d->capacity_bytes);
		kvr_em_u64(e, "used_bytes", d->used_bytes);
		kvr_em_u64(e, "objects", d->objects);
		kvr_em_u64(e, "records", d->records);
		kvr_em_u64(e, "hits", d->hits);
		kvr_em_u64(e, "misses", d->misses);
		kvr_em_u64(e, "read_chunks", d->reads);
		kvr_em_u64(e, "read_bytes", d->read_bytes);
		kvr_em_u64(e, "write_chunks", d->writes);
		kvr_em_u64(e, "write_bytes", d->write_bytes);
		/* --watch: the rates since the previous frame. */
		if (prev && prev->mode) {
			kvr_em_dbl(
			    e, "write_gb_per_s",
			    gb_per_s(prev->write_bytes, d->write_bytes, dt));
			kvr_em_dbl(
			    e, "read_gb_per_s",
			    gb_per_s(prev->read_bytes, d->read_bytes, dt));
		}
		kvr_em_u64(e, "queue_depth", d->queue_depth);
		kvr_em_u64(e, "corrupt", d->corrupt);
		kvr_em_u64(e, "dropped_writes", d->dropped);
		kvr_em_u64(e, "io_errors", d->io_errors);
		kvr_em_u64(e, "no_space", d->no_space);
		kvr_em_u64(e, "evictions", d->evictions);
		kvr_em_u64(e, "pool_evictions_unsaved", d->unsaved);
		kvr_em_u64(e, "stores_held", d->held);
		kvr_em_bool(e, "file_deleted", d->deleted != 0);
		kvr_em_obj(e, "rebuild");
		kvr_em_str(e, "state", d->rebuilt ? "done" : "running");
		kvr_em_u64(e, "scanned", d->scanned);
		kvr_em_u64(e, "total", d->scan_total);
		kvr_em_u64(e, "ns", d->rebuild_ns);
		kvr_em_end(e);
	}
	kvr_em_end(e);
}

/* The disk's families after kvring_disk_enabled, in order. */
static const struct {
	const char *name, *type, *help;
	size_t off; /* of the uint64_t in struct ins_disk_snap */
} fams[] = {
    {"kvring_disk_capacity_bytes", "gauge",
     "Payload bytes the disk tier can hold.",
     offsetof(struct ins_disk_snap, capacity_bytes)},
    {"kvring_disk_used_bytes", "gauge", "Payload bytes of chunks on disk.",
     offsetof(struct ins_disk_snap, used_bytes)},
    {"kvring_disk_objects", "gauge", "Chunks on disk.",
     offsetof(struct ins_disk_snap, objects)},
    {"kvring_disk_hits_total", "counter", "Read-through lookups the disk held.",
     offsetof(struct ins_disk_snap, hits)},
    {"kvring_disk_misses_total", "counter",
     "Read-through lookups the disk lacked.",
     offsetof(struct ins_disk_snap, misses)},
    {"kvring_disk_read_chunks_total", "counter",
     "Chunks read through from disk and verified.",
     offsetof(struct ins_disk_snap, reads)},
    {"kvring_disk_read_bytes_total", "counter",
     "Payload bytes read through from disk.",
     offsetof(struct ins_disk_snap, read_bytes)},
    {"kvring_disk_write_chunks_total", "counter", "Chunks written to disk.",
     offsetof(struct ins_disk_snap, writes)},
    {"kvring_disk_write_bytes_total", "counter",
     "Payload bytes written to disk.",
     offsetof(struct ins_disk_snap, write_bytes)},
    {"kvring_disk_queue_depth", "gauge", "Disk I/Os in flight.",
     offsetof(struct ins_disk_snap, queue_depth)},
    {"kvring_disk_corrupt_total", "counter",
     "Records that failed a check (never served).",
     offsetof(struct ins_disk_snap, corrupt)},
    {"kvring_disk_dropped_writes_total", "counter",
     "Writes not done (queue full, too large, full disk, I/O error).",
     offsetof(struct ins_disk_snap, dropped)},
    {"kvring_disk_io_errors_total", "counter",
     "Disk reads or writes the kernel failed.",
     offsetof(struct ins_disk_snap, io_errors)},
    {"kvring_disk_no_space_total", "counter",
     "Disk writes that found the file system full.",
     offsetof(struct ins_disk_snap, no_space)},
    {"kvring_disk_evictions_total", "counter", "Records the disk's LRU reused.",
     offsetof(struct ins_disk_snap, evictions)},
    {"kvring_disk_pool_evictions_unsaved_total", "counter",
     "Chunks the pool evicted with no copy on disk.",
     offsetof(struct ins_disk_snap, unsaved)},
    {"kvring_disk_stores_held_total", "counter",
     "Keys answered NOROOM until the write-back had written the pool's "
     "cold end (--disk-mode evict).",
     offsetof(struct ins_disk_snap, held)},
    {"kvring_disk_file_deleted", "gauge",
     "1 once the data file was deleted under the server (writes dropped "
     "until a restart).",
     offsetof(struct ins_disk_snap, deleted)},
    {"kvring_disk_rebuild_scanned_records", "gauge",
     "Records the rebuild scan has read.",
     offsetof(struct ins_disk_snap, scanned)},
    {"kvring_disk_rebuild_records", "gauge", "Records the rebuild scan reads.",
     offsetof(struct ins_disk_snap, scan_total)},
};

void ins_disk_prom(FILE *f, const struct ins_disk_snap *d)
{
	ins_prom_u64(f, "kvring_disk_enabled", "gauge",
		     "1 if kvringd runs with --disk (mode: 1 evict, 2 commit).",
		     d->mode != 0);
	if (!d->mode)
		return;
	ins_prom_u64(f, "kvring_disk_mode", "gauge", "1 evict, 2 commit.",
		     d->mode);
	ins_prom_u64(f, "kvring_disk_direct", "gauge",
		     "1 with O_DIRECT, 0 buffered.", d->direct);
	ins_prom_u64(f, "kvring_disk_registered_buffers", "gauge",
		     "1 when records move on buffers registered with the "
		     "io_uring (a huge-page pool).",
		     d->fixed);
	ins_prom_u64(f, "kvring_disk_rebuild_done", "gauge",
		     "1 once the index rebuild at start has ended.",
		     d->rebuilt);
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		uint64_t v;

		memcpy(&v, (const char *)d + fams[i].off, sizeof(v));
		ins_prom_u64(f, fams[i].name, fams[i].type, fams[i].help, v);
	}
}
