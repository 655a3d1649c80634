/* SPDX-License-Identifier: MIT */
/*
 * disk_srv.h - the disk tier on the event loop's side (disk_srv.c): start
 * and stop, the writes of evicted or committed chunks, read-through
 * lookups, the completion bell and the counters (docs/storage.md, "The
 * disk tier"). Loop thread only. kvringd.h includes it, so the loop, the
 * dispatcher and start-up see these calls.
 */
#ifndef KVR_SERVER_DISK_SRV_H
#define KVR_SERVER_DISK_SRV_H

#include <stdbool.h>
#include <stdint.h>

#include <kvring/disk.h>

struct kvr_srv;
struct kvr_conn;
struct kvr_req_view;
struct kvr_dsrv;

/*
 * kvr_dsrv_start - when --disk is given: open the tier (checks, lock,
 * file, the rebuild scan begins), log once what is used. Return: 0 (also
 * when the tier is off), or -errno with the reason logged.
 */
int kvr_dsrv_start(struct kvr_srv *s);

/* kvr_dsrv_stop - at shutdown, before the self-check: wait for the I/O in
 * flight and end every owner its jobs held; log the totals. */
void kvr_dsrv_stop(struct kvr_srv *s);

/* kvr_dsrv_destroy - close the file and free the tier; NULL-safe. */
void kvr_dsrv_destroy(struct kvr_dsrv *ds);

/* kvr_dsrv_efd - the completion eventfd the loop polls. */
int kvr_dsrv_efd(const struct kvr_dsrv *ds);

/* kvr_dsrv_bell - that eventfd became readable. */
void kvr_dsrv_bell(struct kvr_srv *s);

/* kvr_dsrv_poll - each loop pass: finished I/O, the rebuild scan,
 * evict-mode writes, deadlines. Return: work done (0 when idle). */
unsigned kvr_dsrv_poll(struct kvr_srv *s);

/* kvr_dsrv_sleep_ns - how long the loop may sleep for the tier: the time
 * to the nearest read-through deadline, or UINT64_MAX. */
uint64_t kvr_dsrv_sleep_ns(const struct kvr_srv *s);

/*
 * kvr_dsrv_lookup - a lookup flagged KVR_REQ_L2 with keys in s->keys: if
 * the chunks after the pool's hits are on disk, reserve slots, start
 * their reads and return true (the answer comes later); false: nothing
 * on disk for it (the L2 tier, or a plain answer, goes next).
 */
bool kvr_dsrv_lookup(struct kvr_srv *s, struct kvr_conn *c,
		     const struct kvr_req_view *v);

/*
 * kvr_dsrv_commit_keys - before a worker's commit of store transfer
 * @xfer: with --disk-mode commit, note its keys (the transfer is gone
 * after the commit).
 */
void kvr_dsrv_commit_keys(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer);

/*
 * kvr_dsrv_commit_done - after that commit, which returned @rc: with
 * --disk-mode commit, pin the noted chunks and write them; with evict,
 * the commit may have filled the pool: write the coldest chunks.
 */
void kvr_dsrv_commit_done(struct kvr_srv *s, int rc);

/* ---- disk_srv_ns.c (disk_srv.c's callees) ---- */

/*
 * struct kvr_dsrv_ns - the namespaces' fingerprints on disk, by namespace
 * id - 1 (0: not made yet). Owned by struct kvr_dsrv; @fp holds
 * KVR_SRV_NS_MAX entries.
 */
struct kvr_dsrv_ns {
	struct kvr_srv *s;
	uint64_t *fp;
};

/* kvr_dsrv_ns_init - an empty table for server @s: 0 or -ENOMEM. */
int kvr_dsrv_ns_init(struct kvr_dsrv_ns *n, struct kvr_srv *s);

/* kvr_dsrv_ns_fini - free the table; a zeroed one is fine. */
void kvr_dsrv_ns_fini(struct kvr_dsrv_ns *n);

/* kvr_dsrv_ns_fp - namespace @ns's fingerprint (never 0), made the first
 * time; 0 for an unknown @ns. */
uint64_t kvr_dsrv_ns_fp(struct kvr_dsrv_ns *n, uint32_t ns);

/*
 * kvr_dsrv_ns_dropped - the tier's kvr_disk_on_drop() function (@arg: the
 * struct kvr_dsrv_ns): the disk no longer holds (@fp, @k), so a resident
 * object of that key forgets its mark of a copy on disk
 * (kvr_store_disk_forget).
 */
void kvr_dsrv_ns_dropped(void *arg, uint64_t fp, const struct kvr_key *k);

/*
 * kvr_dsrv_ns_recheck - after a write job's chunks were marked
 * (kvr_store_disk_saved): each of the @cnt @keys marked saved in @keep
 * whose record already left the disk (taken by a later write while the
 * job's other writes ran) is forgotten as by kvr_dsrv_ns_dropped.
 */
void kvr_dsrv_ns_recheck(struct kvr_dsrv_ns *n, const struct kvr_disk *d,
			 uint64_t fp, const struct kvr_key *keys,
			 const uint8_t *keep, uint32_t cnt);

/* ---- disk_srv_pub.c (disk_srv.c's callees) ---- */

/* kvr_dsrv_publish - copy @d's counters, plus the loop side's @dropped
 * writes and pool evictions @unsaved, into the control header's disk
 * section (relaxed stores: each counter stands alone). */
void kvr_dsrv_publish(struct kvr_srv *s, const struct kvr_disk *d,
		      uint64_t dropped, uint64_t unsaved);

struct kvr_seg;
/*
 * kvr_dsrv_hist_open - unless kvringd --histograms off: create the disk
 * histograms' memfd in @seg (struct kvr_disk_hist_shm) and name it in the
 * header (R-DHIST1). Without it the tier still runs (one log line).
 * Return: the histograms, or NULL (kvr_seg_destroy() @seg either way).
 */
struct kvr_disk_hist_shm *kvr_dsrv_hist_open(struct kvr_srv *s,
					     struct kvr_seg *seg);

#endif /* KVR_SERVER_DISK_SRV_H */
