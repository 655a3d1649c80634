/* SPDX-License-Identifier: MIT */
/*
 * disk_srv.c - the disk tier on the event loop's side (docs/storage.md,
 * "The disk tier"): start-up and shutdown, the writes of chunks the pool
 * is about to evict (--disk-mode evict) or has just committed (commit),
 * the read-through of a lookup flagged KVR_REQ_L2, and the completions
 * of the tier's io_uring (server/disk/). Everything here runs on the loop
 * thread, which owns the store; the tier's I/O only moves bytes of slots
 * pinned or reserved here, under owners of the store channel ds->chan.
 *
 * Read-through, per lookup: the pool hits h; the disk index holds the
 * run keys[h..h+m); slots are reserved for it under a disk store
 * transfer; each is read straight into its slot and checked; those that
 * passed are published (kvr_store_disk_commit_mask), the others freed;
 * the worker is answered with a fresh lookup. Past the deadline
 * (--l2-deadline-ms) it gets what the pool holds by then, with
 * KVR_LOOKUP_L2_PENDING set ("ask again"), as from the L2 tier, which a
 * lookup tries next when the disk holds nothing after the pool's hits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/error.h>
#include <kvring/log.h>
#include <kvring/segment.h>

#include "chan.h"

#include "disk_srv.h"

#define QD	      32u /* I/Os in flight, at most */
#define RT_MAX	      16u /* read-throughs in flight */
#define JOB_MAX	      48u /* jobs (pins, loads) in flight */
#define COLD_JOB_MAX  8u  /* chunks per evict-mode write job */
#define COLD_EVERY_NS 2000000ull
#define COLD_HOLD_NS  100000000ull /* after a failed write */
#define DONE_MAX      64u
#define PUBLISH_NS    20000000ull  /* counters, when nothing completes */
#define CHECK_NS      100000000ull /* is the data file still there? */

enum { JOB_COLD = 1, JOB_COMMIT, JOB_LOAD };

/* One job: the chunks of one pin (writes) or one reservation (a load),
 * whose I/Os carry (job index << 32 | item). Owned by ds (array). */
struct djob {
	int kind; /* 0: free */
	uint32_t n, left;
	uint32_t sent; /* writes: items queued so far (job_pump) */
	uint64_t seq;  /* creation order: the oldest waiting job goes first */
	uint64_t fp;   /* writes: the namespace fingerprint */
	struct kvr_key *keys;	     /* writes: max_keys, the pinned chunks */
	struct kvr_slot_desc *slots; /* and their slots */
	uint64_t owner;		     /* the store transfer */
	uint64_t bytes;
	uint32_t rt, rt_gen; /* a load's read-through */
	uint8_t *keep;	     /* max_keys: saved, or verified */
	uint64_t *sums;	     /* max_keys: a load's sums, a write's sums */
};

/* One read-through in flight, as in l2_srv.c. */
struct drt {
	bool used, answered, done;
	uint32_t gen, conn, conn_gen, ns, n;
	bool pin;
	uint64_t req_id, deadline_ns;
	struct kvr_key *keys;
};

/*
 * struct kvr_dsrv - the tier's loop side. Owned by the server (s->disk),
 * created by kvr_dsrv_start(), freed by kvr_dsrv_destroy().
 */
struct kvr_dsrv {
	struct kvr_disk *d;
	uint32_t chan; /* the store channel of its pins and loads */
	int mode;
	uint64_t deadline_ns;
	struct kvr_dsrv_ns ns; /* namespace fingerprints */
	struct kvr_key *keys;  /* scratch, max_keys */
	uint64_t *sizes;
	struct kvr_slot_desc *slots;
	/* A commit's keys (--disk-mode commit), noted before it. */
	struct kvr_key *ckeys;
	uint32_t cn, cns;
	struct djob job[JOB_MAX];
	struct drt rt[RT_MAX];
	uint32_t rt_busy;
	uint64_t cold_ns, cold_bytes, cold_hold_ns, unsaved_seen;
	uint64_t held_seen; /* the store's disk_held at the last cold_write */
	bool writable;	   /* the data file still has a name (kvr_disk_check) */
	uint64_t unsaved;  /* pool evictions without a disk copy */
	uint64_t pub_ns;   /* counters last published */
	uint64_t check_ns; /* the data file last checked (kvr_disk_check) */
	uint64_t job_seq;
	/* Bytes pinned by write jobs until written, and what was not even
	 * pinned (no job free, or the bound reached): dropped. */
	uint64_t pend_bytes, pend_max, dropped;
	struct kvr_disk_done done[DONE_MAX];
	/* The latency histograms' memfd (hdr->disk.hist_fd), and them in
	 * it; NULL with kvringd --histograms off. */
	struct kvr_seg hist_seg;
	struct kvr_disk_hist_shm *hist;
};

/* ---- helpers ---- */

static uint64_t ns_fp(struct kvr_srv *s, uint32_t ns)
{
	return kvr_dsrv_ns_fp(&s->disk->ns, ns);
}

static struct djob *job_new(struct kvr_dsrv *ds, int kind)
{
	for (uint32_t i = 0; i < JOB_MAX; i++)
		if (!ds->job[i].kind) {
			ds->job[i].kind = kind;
			ds->job[i].n = ds->job[i].left = 0;
			ds->job[i].sent = 0;
			ds->job[i].bytes = 0;
			ds->job[i].seq = ++ds->job_seq;
			return &ds->job[i];
		}
	return NULL;
}

static uint64_t tag(const struct kvr_dsrv *ds, const struct djob *j, uint32_t i)
{
	return (uint64_t)(j - ds->job) << 32 | i;
}

/* ---- writes ---- */

static void job_end(struct kvr_srv *s, struct djob *j);
static void publish(struct kvr_srv *s);

/*
 * Queue what the disk has room for of write job @j, from j->sent on; the
 * rest waits, pinned, for completions to make room (kvr_dsrv_poll pumps
 * again). A chunk already on disk counts as saved, one the tier refuses
 * otherwise as not saved.
 */
static void job_pump(struct kvr_srv *s, struct djob *j)
{
	struct kvr_dsrv *ds = s->disk;

	while (j->sent < j->n && kvr_disk_room(ds->d)) {
		uint32_t i = j->sent++;
		const struct kvr_slot_desc *sl = &j->slots[i];
		int rc = j->fp
			     ? kvr_disk_write(ds->d, j->fp, &j->keys[i],
					      (uint8_t *)s->pool.base + sl->off,
					      sl->len, j->sums[i],
					      sl->reserved & KVR_SLOT_F_SUM,
					      tag(ds, j, i))
			     : -EINVAL;

		j->keep[i] = rc == -EEXIST;
		if (rc < 0)
			j->left--;
	}
	if (!j->left)
		job_end(s, j);
}

/* Pump every write job that waits for room, oldest first. */
static void pump_all(struct kvr_srv *s)
{
	struct kvr_dsrv *ds = s->disk;

	while (kvr_disk_room(ds->d)) {
		struct djob *first = NULL;

		for (uint32_t i = 0; i < JOB_MAX; i++) {
			struct djob *j = &ds->job[i];

			if ((j->kind == JOB_COLD || j->kind == JOB_COMMIT) &&
			    j->sent < j->n && (!first || j->seq < first->seq))
				first = j;
		}
		if (!first)
			return;
		job_pump(s, first);
	}
}

/*
 * Queue the writes of the j->n chunks pinned under j->owner (keys and
 * slots in ds->keys / ds->slots, sums from the store's last pin): a chunk
 * already on disk counts as saved, one the tier refuses as not saved.
 */
static void write_all(struct kvr_srv *s, struct djob *j, uint32_t ns)
{
	struct kvr_dsrv *ds = s->disk;
	const uint64_t *sums = kvr_store_last_sums(s->store);

	j->fp = ns_fp(s, ns);
	j->sent = 0;
	for (uint32_t i = 0; i < j->n; i++) {
		j->keys[i] = ds->keys[i];
		j->slots[i] = ds->slots[i];
		j->sums[i] = sums[i];
		j->keep[i] = 0;
		j->bytes += ds->slots[i].len;
	}
	ds->pend_bytes += j->bytes;
	if (j->kind == JOB_COLD)
		ds->cold_bytes += j->bytes; /* job_end takes them back */
	job_pump(s, j);
}
/*
 * --disk-mode evict's guard (kvr_store_disk_guard): on while the disk
 * takes writes, so that eviction takes only chunks already on disk and a
 * worker that stores faster than the disk writes gets NOROOM (it is held
 * to the disk's speed) instead of evicting unsaved chunks. Off for
 * COLD_HOLD_NS after a write failed (a full disk, an I/O error, a
 * read-only file system) and for good once the data file was deleted:
 * the pool then evicts unsaved chunks (counted) rather than wedge.
 */
static void guard(struct kvr_srv *s)
{
	const struct kvr_dsrv *ds = s->disk;

	kvr_store_disk_guard(s->store, ds->mode == KVR_DISK_EVICT &&
					   ds->writable &&
					   s->now_ns >= ds->cold_hold_ns);
}

/*
 * --disk-mode evict, the write-back, as the L2's upload on eviction: once
 * the pool is 7/8 full, the chunks in its coldest 1/8 without a copy on
 * disk are pinned, written, and sent back to the LRU tail marked as saved
 * (or refused, when the write failed), so eviction takes them first. Run
 * after every commit and every completion, it keeps the next victims on
 * disk ahead of need; the guard holds back what outruns it.
 */
static void cold_write(struct kvr_srv *s)
{
	struct kvr_dsrv *ds = s->disk;
	struct kvr_store_stats st;
	bool held;

	ds->cold_ns = s->now_ns;
	kvr_store_stats(s->store, &st);
	if (st.disk_unsaved_evictions > ds->unsaved_seen) {
		ds->unsaved += st.disk_unsaved_evictions - ds->unsaved_seen;
		ds->unsaved_seen = st.disk_unsaved_evictions;
	}
	/* A store held back by the guard needs the cold end written even
	 * when the pool is not 7/8 full (fragmentation, mixed chunk sizes):
	 * else the guard could wait on a write-back that never starts. */
	held = st.disk_held > ds->held_seen;
	ds->held_seen = st.disk_held;
	while (s->now_ns >= ds->cold_hold_ns &&
	       kvr_disk_room(ds->d) >= COLD_JOB_MAX &&
	       ds->cold_bytes < st.pool_bytes / 8 &&
	       (held || st.committed_bytes + st.reserved_bytes >=
			    st.pool_bytes / 8 * 7)) {
		struct djob *j = job_new(ds, JOB_COLD);
		uint32_t ns = 0;
		int n;

		if (!j)
			break;
		n = kvr_store_disk_cold(s->store, ds->chan, COLD_JOB_MAX,
					st.pool_bytes / 8 - ds->cold_bytes,
					s->now_ns, ds->keys, ds->slots, &ns,
					&j->owner);
		if (n <= 0) {
			j->kind = 0;
			break; /* the cold end is saved, or no room to pin */
		}
		j->n = j->left = (uint32_t)n;
		write_all(s, j, ns);
	}
	guard(s);
}

void kvr_dsrv_commit_keys(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer)
{
	struct kvr_dsrv *ds = s->disk;
	int nk;

	ds->cn = 0;
	if (ds->mode != KVR_DISK_COMMIT || !xfer)
		return;
	nk = kvr_store_xfer_keys(s->store, (uint32_t)c->chan, xfer, ds->ckeys,
				 s->max_keys, &ds->cns);
	ds->cn = nk > 0 ? (uint32_t)nk : 0;
}

/* The writes a commit queued are counted before the worker has its
 * answer: one that waits for an idle disk after its commit sees them. */
static void publish_queue(struct kvr_srv *s)
{
	struct kvr_disk_stats st;

	kvr_disk_stats(s->disk->d, &st);
	atomic_store_explicit(&s->hdr->disk.queue_depth, st.queue_depth,
			      memory_order_relaxed);
}

void kvr_dsrv_commit_done(struct kvr_srv *s, int rc)
{
	struct kvr_dsrv *ds = s->disk;
	struct djob *j;
	int hits;

	if (rc < 0)
		return;
	if (ds->mode == KVR_DISK_EVICT) {
		cold_write(s); /* this commit may have filled the pool */
		publish_queue(s);
		return;
	}
	if (!ds->cn)
		return;
	j = ds->pend_bytes < ds->pend_max ? job_new(ds, JOB_COMMIT) : NULL;
	if (!j) {
		/* The disk is that far behind: this commit is not written. */
		ds->dropped += ds->cn;
		return;
	}
	/* The owned pin: eviction cannot free a slot the disk reads. */
	hits =
	    kvr_store_prepare_retrieve(s->store, ds->chan, ds->cns, ds->ckeys,
				       ds->cn, s->now_ns, ds->slots, &j->owner);
	if (hits <= 0) {
		j->kind = 0;
		ds->dropped += ds->cn;
		return;
	}
	memcpy(ds->keys, ds->ckeys, (size_t)hits * sizeof(*ds->keys));
	j->n = j->left = (uint32_t)hits;
	write_all(s, j, ds->cns);
	publish_queue(s);
}

/* ---- read-through ---- */

/* Answer the worker from the pool as it is now: 0, or -EAGAIN when its
 * response ring is full (try again next pass). As l2_srv.c's. */
static int rt_answer(struct kvr_srv *s, struct drt *rt, bool pending)
{
	struct kvr_conn *c = &s->conns[rt->conn];
	struct kvr_resp_hdr h;
	uint64_t lease = 0;
	void *p;
	int hits, rc;

	if (c->gen != rt->conn_gen || c->state != KVR_CONN_ACTIVE) {
		rt->answered = true; /* the worker is gone */
		return 0;
	}
	if (c->blocked)
		return -EAGAIN;
	rc = kvr_ring_claim(&c->resp, KVR_RESP_BIT | KVR_OP_LOOKUP, sizeof(h),
			    &p);
	if (rc == -EAGAIN)
		return rc;
	if (rc < 0) {
		rt->answered = true; /* a damaged ring: the dispatcher cuts */
		return 0;
	}
	memset(&h, 0, sizeof(h));
	h.req_id = rt->req_id;
	hits = kvr_store_lookup(s->store, (uint32_t)c->chan, rt->ns, rt->keys,
				rt->n, rt->pin, s->now_ns, &lease);
	if (hits < 0) {
		h.status = hits;
	} else {
		h.value = (uint64_t)hits;
		/* More may come: from this read-through (deadline), or
		 * from L2 at the next lookup. */
		if ((pending || s->l2) && (uint32_t)hits < rt->n)
			h.value |= KVR_LOOKUP_L2_PENDING;
		h.handle = lease;
	}
	rc = kvr_resp_encode(
	    &(struct kvr_resp_view){.op = KVR_OP_LOOKUP, .hdr = h}, p,
	    sizeof(h));
	kvr_assert(rc == (int)sizeof(h));
	/* Counters first: a worker that has its answer sees them. */
	publish(s);
	kvr__chan_publish(c);
	kvr__chan_count(s, c, KVR_OP_LOOKUP, h.status);
	rt->answered = true;
	return 0;
}

static void rt_finish(struct kvr_srv *s, struct drt *rt)
{
	rt->done = true;
	if (!rt->answered && rt_answer(s, rt, false) == -EAGAIN) {
		rt->deadline_ns = 1; /* retried by the deadline sweep */
		return;
	}
	rt->used = false;
	s->disk->rt_busy--;
}

bool kvr_dsrv_lookup(struct kvr_srv *s, struct kvr_conn *c,
		     const struct kvr_req_view *v)
{
	struct kvr_dsrv *ds = s->disk;
	uint32_t n = v->hdr.count, ch = (uint32_t)c->chan, m = 0, k = 0;
	struct drt *rt = NULL;
	struct djob *j;
	uint64_t fp = ns_fp(s, c->ns_id), xfer = 0;
	int hits, rc;

	if (!c->ops->late_answers || n == 0 || ds->rt_busy == RT_MAX || !fp)
		return false;
	hits = kvr_store_lookup(s->store, ch, c->ns_id, s->keys, n, false,
				s->now_ns, NULL);
	if (hits < 0 || (uint32_t)hits == n)
		return false;
	/* The run of chunks after the pool's hits that the disk holds. */
	while ((uint32_t)hits + m < n &&
	       kvr_disk_find(ds->d, fp, &s->keys[(uint32_t)hits + m],
			     &ds->sizes[m])) {
		ds->keys[m] = s->keys[(uint32_t)hits + m];
		m++;
	}
	if (m == 0 || kvr_disk_room(ds->d) < m)
		return false;
	for (uint32_t i = 0; i < RT_MAX && !rt; i++)
		if (!ds->rt[i].used)
			rt = &ds->rt[i];
	j = job_new(ds, JOB_LOAD);
	if (!j)
		return false;
	rc = kvr_store_prepare_store(s->store, ds->chan, c->ns_id, ds->keys,
				     ds->sizes, m, s->now_ns, ds->slots, &xfer);
	if (rc <= 0) {
		j->kind = 0;
		return false;
	}
	rt->used = true;
	rt->answered = rt->done = false;
	rt->gen++;
	rt->conn = c->idx;
	rt->conn_gen = c->gen;
	rt->req_id = v->hdr.req_id;
	rt->ns = c->ns_id;
	rt->pin = v->hdr.flags & KVR_REQ_PIN;
	rt->n = n;
	rt->deadline_ns = s->now_ns + ds->deadline_ns;
	memcpy(rt->keys, s->keys, (size_t)n * sizeof(*s->keys));
	ds->rt_busy++;
	j->owner = xfer;
	j->rt = (uint32_t)(rt - ds->rt);
	j->rt_gen = rt->gen;
	j->n = j->left = (uint32_t)rc;
	/* Reservations are numbered in the order of the OK slots. */
	for (uint32_t i = 0; i < m; i++) {
		const struct kvr_slot_desc *sl = &ds->slots[i];

		if (sl->status != KVR_SLOT_OK)
			continue;
		j->keep[k] = 0;
		j->sums[k] = 0;
		if (kvr_disk_read(ds->d, fp, &ds->keys[i],
				  (uint8_t *)s->pool.base + sl->off, sl->len,
				  tag(ds, j, k)) < 0)
			j->left--;
		k++;
	}
	if (!j->left)
		job_end(s, j);
	return true;
}

/* ---- completions ---- */

/* Every I/O of @j ended: end its store owner, answer a read-through. */
static void job_end(struct kvr_srv *s, struct djob *j)
{
	struct kvr_dsrv *ds = s->disk;
	int rc;

	if (j->kind != JOB_LOAD)
		ds->pend_bytes -= j->bytes;
	switch (j->kind) {
	case JOB_COLD:
		ds->cold_bytes -= j->bytes;
		for (uint32_t i = 0; i < j->n; i++)
			if (!j->keep[i]) {
				ds->cold_hold_ns = s->now_ns + COLD_HOLD_NS;
				j->keep[i] = KVR_STORE_DISK_REFUSED;
			}
		(void)kvr_store_disk_saved(s->store, ds->chan, j->owner,
					   j->keep, j->n, true);
		kvr_dsrv_ns_recheck(&ds->ns, ds->d, j->fp, j->keys, j->keep,
				    j->n);
		guard(s);
		break;
	case JOB_COMMIT:
		(void)kvr_store_disk_saved(s->store, ds->chan, j->owner,
					   j->keep, j->n, false);
		kvr_dsrv_ns_recheck(&ds->ns, ds->d, j->fp, j->keys, j->keep,
				    j->n);
		break;
	case JOB_LOAD:
		/* The verified header's sum is the XXH3-64 of the slot's
		 * bytes: the object gets it, as from a worker with sums. */
		rc = kvr_store_set_sums(s->store, ds->chan, j->owner, j->sums,
					j->n);
		if (rc < 0)
			kvr_log_debug("disk: sums of a load: %s",
				      kvr_strerror(rc));
		(void)kvr_store_disk_commit_mask(s->store, ds->chan, j->owner,
						 j->keep, j->n, s->now_ns);
		if (ds->rt[j->rt].used && ds->rt[j->rt].gen == j->rt_gen)
			rt_finish(s, &ds->rt[j->rt]);
		break;
	}
	j->kind = 0;
}

static void on_done(struct kvr_srv *s, const struct kvr_disk_done *dn)
{
	struct kvr_dsrv *ds = s->disk;
	struct djob *j = &ds->job[dn->tag >> 32];
	uint32_t i = (uint32_t)dn->tag;

	/* Submit to completion, failed I/Os included (their time is the
	 * disk's too); the loop is the histograms' single writer. */
	if (ds->hist)
		kvr_hist_add(&ds->hist->lat[dn->kind == KVR_DISK_IO_WRITE
						? KVR_DISK_HIST_WRITE
						: KVR_DISK_HIST_READ],
			     dn->ns, 1);
	j->keep[i] = dn->rc == 0;
	if (j->kind == JOB_LOAD)
		j->sums[i] = dn->sum;
	if (--j->left == 0)
		job_end(s, j);
}

void kvr_dsrv_bell(struct kvr_srv *s)
{
	if (s->disk)
		kvr_disk_bell(s->disk->d);
}

int kvr_dsrv_efd(const struct kvr_dsrv *ds)
{
	return kvr_disk_efd(ds->d);
}

static unsigned drain(struct kvr_srv *s)
{
	struct kvr_dsrv *ds = s->disk;
	unsigned n, work = 0;

	do {
		n = kvr_disk_poll(ds->d, ds->done, DONE_MAX);
		for (unsigned i = 0; i < n; i++)
			on_done(s, &ds->done[i]);
		work += n;
	} while (n == DONE_MAX);
	return work;
}

unsigned kvr_dsrv_poll(struct kvr_srv *s)
{
	struct kvr_dsrv *ds = s->disk;
	unsigned work = drain(s);

	if (s->now_ns - ds->check_ns >= CHECK_NS) {
		ds->check_ns = s->now_ns;
		ds->writable = kvr_disk_check(ds->d);
		if (!ds->writable)
			publish(s);
	}
	pump_all(s);
	if (ds->mode == KVR_DISK_EVICT &&
	    (work || s->now_ns - ds->cold_ns >= COLD_EVERY_NS))
		cold_write(s);
	if (work || s->now_ns - ds->pub_ns >= PUBLISH_NS)
		publish(s);
	for (uint32_t i = 0; ds->rt_busy && i < RT_MAX; i++) {
		struct drt *rt = &ds->rt[i];

		if (!rt->used || rt->answered || s->now_ns < rt->deadline_ns)
			continue;
		if (rt_answer(s, rt, !rt->done) == 0) {
			work++;
			if (rt->done) {
				rt->used = false;
				ds->rt_busy--;
			}
		}
	}
	return work;
}

uint64_t kvr_dsrv_sleep_ns(const struct kvr_srv *s)
{
	const struct kvr_dsrv *ds = s->disk;
	uint64_t first = UINT64_MAX;

	for (uint32_t i = 0; ds && ds->rt_busy && i < RT_MAX; i++)
		if (ds->rt[i].used && !ds->rt[i].answered &&
		    ds->rt[i].deadline_ns < first)
			first = ds->rt[i].deadline_ns;
	if (first == UINT64_MAX)
		return UINT64_MAX;
	if (first <= s->now_ns + KVR_L2_SLEEP_MIN_NS)
		return KVR_L2_SLEEP_MIN_NS;
	return first - s->now_ns;
}

/* ---- counters ---- */

/* Copy the tier's counters into the control header (disk_srv_pub.c). */
static void publish(struct kvr_srv *s)
{
	struct kvr_dsrv *ds = s->disk;

	ds->pub_ns = s->now_ns;
	kvr_dsrv_publish(s, ds->d, ds->dropped, ds->unsaved);
}

/* ---- start and stop ---- */

int kvr_dsrv_start(struct kvr_srv *s)
{
	const struct kvr_disk_conf *cf = &s->cfg.disk;
	struct kvr_disk_stats st;
	struct kvr_dsrv *ds;
	uint32_t mk = s->max_keys;
	char err[512] = "";
	int rc;

	if (!cf->dir[0])
		return 0;
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	s->disk = ds;
	ds->hist_seg.fd = -1;
	if (kvr_dsrv_ns_init(&ds->ns, s) < 0)
		return -ENOMEM;
	ds->mode = cf->mode;
	ds->writable = true;
	/* Write-through may fall behind the workers by a quarter of the
	 * pool, pinned; past that, commits are not written (dropped). */
	ds->pend_max = s->cfg.pool_bytes / 4;
	ds->deadline_ns = (uint64_t)s->cfg.l2.deadline_ms * 1000000u;
	/* The last store channel: after the workers' and the L2's. */
	ds->chan = s->cfg.max_workers + (s->cfg.l2.kind ? 1u : 0u);
	rc = kvr_store_channel_trust(s->store, ds->chan);
	if (rc < 0)
		return rc;
	ds->keys = calloc(mk, sizeof(*ds->keys));
	ds->ckeys = calloc(mk, sizeof(*ds->ckeys));
	ds->sizes = calloc(mk, sizeof(*ds->sizes));
	ds->slots = calloc(mk, sizeof(*ds->slots));
	if (!ds->keys || !ds->ckeys || !ds->sizes || !ds->slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < JOB_MAX; i++) {
		ds->job[i].keep = calloc(mk, 1);
		ds->job[i].sums = calloc(mk, sizeof(uint64_t));
		ds->job[i].keys = calloc(mk, sizeof(struct kvr_key));
		ds->job[i].slots = calloc(mk, sizeof(struct kvr_slot_desc));
		if (!ds->job[i].keep || !ds->job[i].sums || !ds->job[i].keys ||
		    !ds->job[i].slots)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < RT_MAX; i++) {
		ds->rt[i].keys = calloc(mk, sizeof(struct kvr_key));
		if (!ds->rt[i].keys)
			return -ENOMEM;
	}
	rc = kvr_disk_open(cf, QD, &ds->d, err, sizeof(err));
	if (rc < 0) {
		kvr_log_err("start-up: %s", err[0] ? err : kvr_strerror(rc));
		return rc;
	}
	/* A chunk the disk drops loses its mark in the pool. */
	kvr_disk_on_drop(ds->d, kvr_dsrv_ns_dropped, &ds->ns);
	ds->hist = kvr_dsrv_hist_open(s, &ds->hist_seg);
	/* A huge-page pool can be registered with the ring once: records
	 * then move by READ_FIXED / WRITE_FIXED. Else, or refused: the
	 * vectored path, said once. */
	if (s->pool.hugetlb &&
	    (rc = kvr_disk_register(ds->d, s->pool.base, s->pool.bytes, err,
				    sizeof(err))) < 0)
		kvr_log_info("disk: no registered buffers (%s); records move "
			     "by plain reads and writes",
			     err[0] ? err : kvr_strerror(rc));
	kvr_disk_stats(ds->d, &st);
	s->hdr->disk.mode = cf->mode == KVR_DISK_COMMIT ? 2u : 1u;
	s->hdr->disk.direct = st.direct ? 1u : 0u;
	s->hdr->disk.fixed = st.fixed ? 1u : 0u;
	publish(s);
	kvr_log_info(
	    "disk: %s, %llu records of up to %llu bytes (%llu "
	    "bytes), %s, %s I/O%s, %s",
	    kvr_disk_path(ds->d), (unsigned long long)st.records,
	    (unsigned long long)cf->chunk_bytes,
	    (unsigned long long)st.capacity_bytes,
	    cf->mode == KVR_DISK_COMMIT ? "write every commit"
					: "write chunks about to be evicted",
	    st.direct ? "O_DIRECT" : "buffered",
	    st.fixed ? " on registered buffers" : "",
	    st.rebuilt ? "empty" : "rebuilding its index while serving");
	return 0;
}

void kvr_dsrv_stop(struct kvr_srv *s)
{
	struct kvr_dsrv *ds = s->disk;
	struct kvr_store_stats sst;
	struct kvr_disk_stats st;

	if (!ds || !ds->d)
		return;
	/* Writes still waiting for room are not queued any more; every pin
	 * and reservation the I/O held ends before the check. */
	for (uint32_t i = 0; i < JOB_MAX; i++) {
		struct djob *j = &ds->job[i];

		if ((j->kind == JOB_COLD || j->kind == JOB_COMMIT) &&
		    j->sent < j->n) {
			ds->dropped += j->n - j->sent;
			j->left -= j->n - j->sent;
			j->sent = j->n;
			if (!j->left)
				job_end(s, j);
		}
	}
	for (;;) {
		kvr_disk_stats(ds->d, &st);
		if (!st.queue_depth)
			break;
		kvr_disk_wait(ds->d);
		(void)drain(s);
	}
	for (uint32_t i = 0; i < RT_MAX; i++)
		ds->rt[i].used = false;
	ds->rt_busy = 0;
	publish(s);
	kvr_store_stats(s->store, &sst);
	kvr_log_info(
	    "disk: stopped: %llu chunks on disk, %llu written, %llu "
	    "read through, %llu corrupt, %llu dropped (%llu evicted "
	    "from the pool unsaved, %llu stores held back for the "
	    "write-back), %llu I/O errors, %llu full",
	    (unsigned long long)st.objects, (unsigned long long)st.writes,
	    (unsigned long long)st.reads, (unsigned long long)st.corrupt,
	    (unsigned long long)st.dropped, (unsigned long long)ds->unsaved,
	    (unsigned long long)sst.disk_held, (unsigned long long)st.io_errors,
	    (unsigned long long)st.no_space);
}

void kvr_dsrv_destroy(struct kvr_dsrv *ds)
{
	if (!ds)
		return;
	kvr_disk_close(ds->d);
	for (uint32_t i = 0; i < JOB_MAX; i++) {
		free(ds->job[i].keep);
		free(ds->job[i].sums);
		free(ds->job[i].keys);
		free(ds->job[i].slots);
	}
	for (uint32_t i = 0; i < RT_MAX; i++)
		free(ds->rt[i].keys);
	free(ds->keys);
	free(ds->ckeys);
	free(ds->sizes);
	free(ds->slots);
	kvr_seg_destroy(&ds->hist_seg);
	kvr_dsrv_ns_fini(&ds->ns);
	free(ds);
}
