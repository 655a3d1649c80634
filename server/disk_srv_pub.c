/* SPDX-License-Identifier: MIT */
/*
 * disk_srv_pub.c - the disk tier's side of the control header: its
 * counters, copied from the tier's (server/disk/) and the store's
 * write-back guard (disk_held, ABI 5.6) into the header's disk section, and the
 * memfd of its latency histograms, named there (ABI 5.5), both read by
 * kvring-inspect. Loop thread only: disk_srv.c calls these at start, after
 * completions, every few ms and at stop.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <kvring/error.h>
#include <kvring/log.h>
#include <kvring/segment.h>

#include "kvringd.h"

void kvr_dsrv_publish(struct kvr_srv *s, const struct kvr_disk *d,
		      uint64_t dropped, uint64_t unsaved)
{
	struct kvr_disk_shm *o = &s->hdr->disk;
	struct kvr_store_stats sst;
	struct kvr_disk_stats st;

	kvr_disk_stats(d, &st);
	kvr_store_stats(s->store, &sst);
#define PUT(f, v) atomic_store_explicit(&o->f, (v), memory_order_relaxed)
	/* Relaxed throughout: each counter stands alone (layout.h). */
	PUT(capacity_bytes, st.capacity_bytes);
	PUT(used_bytes, st.used_bytes);
	PUT(objects, st.objects);
	PUT(records, st.records);
	PUT(hits, st.hits);
	PUT(misses, st.misses);
	PUT(reads, st.reads);
	PUT(read_bytes, st.read_bytes);
	PUT(writes, st.writes);
	PUT(write_bytes, st.write_bytes);
	PUT(queue_depth, st.queue_depth);
	PUT(corrupt, st.corrupt);
	PUT(dropped, st.dropped + dropped);
	PUT(io_errors, st.io_errors);
	PUT(no_space, st.no_space);
	PUT(evictions, st.evictions);
	PUT(scanned, st.scanned);
	PUT(scan_total, st.scan_total);
	PUT(rebuilt, st.rebuilt ? 1u : 0u);
	PUT(unsaved, unsaved);
	PUT(rebuild_ns, st.rebuild_ns);
	PUT(deleted, st.deleted);
	PUT(held, sst.disk_held); /* abi 5.6 */
#undef PUT
}

/*
 * The latency histograms in a memfd of their own (layout.h, abi 5.5),
 * named in the header for the inspector (R-DHIST1: the fd before the
 * size, release). Without them the tier still runs: one log line.
 */
struct kvr_disk_hist_shm *kvr_dsrv_hist_open(struct kvr_srv *s,
					     struct kvr_seg *seg)
{
	struct kvr_disk_shm *o = &s->hdr->disk;
	struct kvr_err e = {0};
	int rc;

	if (!s->hist_on)
		return NULL;
	rc = kvr_seg_create_memfd("kvring-disk-hist",
				  sizeof(struct kvr_disk_hist_shm), 0, seg, &e);
	if (rc < 0) {
		kvr_log_warn("disk: no latency histograms (memfd of %zu "
			     "bytes: %s); the counters are kept",
			     sizeof(struct kvr_disk_hist_shm),
			     kvr_err_str(&e, rc));
		return NULL;
	}
	if (fchmod(seg->fd, 0400) < 0)
		kvr_log_warn("disk histograms: chmod 0400: %s",
			     strerror(errno));
	o->hist_fd = seg->fd;
	atomic_store_explicit(&o->hist_bytes,
			      (uint32_t)sizeof(struct kvr_disk_hist_shm),
			      memory_order_release);
	return seg->base;
}
