/* SPDX-License-Identifier: MIT */
/*
 * l2_srv.c - the L2 tier on the event loop's side (docs/l2.md): start-up
 * and shutdown of the lanes, write-behind after a worker's commit, the
 * read-through state machine of a lookup flagged KVR_REQ_L2, draining
 * the done queue the lanes fill (l2_tier.c); the counters the inspector
 * reads are published by l2_srv_pub.c. Everything here runs on the loop
 * thread, which owns the store; the lanes (server/l2/) only move bytes of spans
 * this file pinned or reserved for them, under owners of the store channel
 * s->l2->chan.
 *
 * Read-through, per lookup: L1 hits h; PROBE keys[h..n) (GETRANGE of the
 * header: present? how large? sane?); reserve slots for the contiguous
 * run of hits under an L2 store transfer; LOAD them (GET straight into
 * the slots, header and XXH3 checked in the lane); publish those that
 * passed (kvr_store_commit_store_mask), free the rest; answer with a
 * fresh lookup (pinned under the caller's lease if asked). Past the
 * deadline the worker gets what L1 holds by then with
 * KVR_LOOKUP_L2_PENDING set ("ask again"); the loads go on and publish
 * when they finish. A worker that goes away meanwhile just gets no
 * answer: nothing was pinned for it, and the L2 owners end as usual.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/error.h>
#include <kvring/hist.h>
#include <kvring/log.h>

#include "chan.h"

#include "l2_srv.h"

#define RT_MAX	   16u /* read-throughs in flight */
#define PUBLISH_NS 20000000ull

/* --l2-upload evict: chunks per upload job, how often the loop looks at
 * the pool's fill. */
#define COLD_JOB_MAX  16u
#define COLD_EVERY_NS 2000000ull
/* After an evict-mode upload failed, the zone is not tried again for this
 * long (the lane backs off the node too; without a pause the same cold
 * chunks would go round and round between the loop and a dead node). */
#define COLD_HOLD_NS 100000000ull

/* One read-through in flight. Owned by s->l2 (array), loop thread only. */
struct kvr_l2_rt {
	bool used;
	bool answered; /* the worker has its answer (deadline) */
	uint32_t gen;  /* bumped at every reuse: jobs carry it */
	uint32_t conn, conn_gen;
	uint64_t req_id;
	uint32_t ns;
	bool pin;
	uint32_t n, h0; /* keys asked, L1 hits at the start */
	uint64_t deadline_ns;
	struct kvr_key *keys;
};

static uint64_t last_pub_ns;

void kvr_l2_bell(struct kvr_srv *s)
{
	uint64_t v;

	if (s->l2 && read(s->l2->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		kvr_log_debug("l2: read done eventfd: %s", strerror(errno));
}

/* ---- helpers ---- */

static uint64_t ns_fp(struct kvr_srv *s, uint32_t ns)
{
	struct kvr_l2 *l2 = s->l2;

	if (ns == 0 || ns > s->nns)
		return 0;
	if (!l2->fp[ns - 1])
		l2->fp[ns - 1] =
		    kvr_l2_ns_fp(&s->ns[ns - 1].desc, l2->cfg.salt) | 1;
	return l2->fp[ns - 1];
}

static struct kvr_l2_job *job_new(int kind, uint32_t n)
{
	struct kvr_l2_job *j = calloc(1, sizeof(*j) + n * sizeof(j->it[0]));

	if (j) {
		j->kind = kind;
		j->n = n;
	}
	return j;
}

static void submit(struct kvr_l2 *l2, struct kvr_l2_lane *ln,
		   struct kvr_l2_job *j)
{
	j->submit_ns = kvr_clock_now_ns();
	atomic_fetch_add_explicit(&l2->st.queue_depth, 1, memory_order_relaxed);
	kvr__l2_lane_submit(ln, j);
}

/* ---- write-behind ---- */

/*
 * The one counter a worker waits on after a commit, queue_depth, copied
 * to the header at once; the others follow with kvr_l2_publish() when a
 * job ends or every PUBLISH_NS. One relaxed store, no lock: it runs at
 * every commit that queues an upload.
 */
static void publish_queue(struct kvr_srv *s)
{
	atomic_store_explicit(
	    &s->hdr->l2.queue_depth,
	    atomic_load_explicit(&s->l2->st.queue_depth, memory_order_relaxed),
	    memory_order_relaxed);
}

/*
 * An upload job of the j->n chunks just pinned under @pin (namespace @ns):
 * keys and slots from l2->keys / l2->slots, and a chunk stored with a sum
 * (a worker with checksums) carries it, so the lane sends it rather than
 * hashing the chunk again. Return the job's bytes.
 */
static uint64_t put_job_fill(struct kvr_srv *s, struct kvr_l2_job *j,
			     uint32_t ns, uint64_t pin)
{
	const struct kvr_l2 *l2 = s->l2;
	const uint64_t *sums = kvr_store_last_sums(s->store);
	uint64_t bytes = 0;

	j->ns = ns;
	j->ns_fp = ns_fp(s, ns);
	j->owner = pin;
	for (uint32_t i = 0; i < j->n; i++) {
		j->it[i].key = l2->keys[i];
		j->it[i].off = l2->slots[i].off;
		j->it[i].len = l2->slots[i].len;
		if (l2->slots[i].reserved & KVR_SLOT_F_SUM) {
			j->it[i].has_sum = 1;
			j->it[i].sum = sums[i];
		}
		bytes += l2->slots[i].len;
	}
	return bytes;
}

static void cold_upload(struct kvr_srv *s);

int kvr_l2_commit_store(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer)
{
	struct kvr_l2 *l2 = s->l2;
	uint32_t ch = (uint32_t)c->chan, ns = 0;
	struct kvr_l2_job *j;
	uint64_t pin = 0;
	int nk, rc, hits;

	nk = xfer ? kvr_store_xfer_keys(s->store, ch, xfer, l2->keys,
					s->max_keys, &ns)
		  : 0;
	rc = kvr_store_commit_store(s->store, ch, xfer, s->now_ns);
	if (rc >= 0 && l2->cfg.upload == KVR_L2_UP_EVICT)
		cold_upload(s); /* this commit may have filled the pool */
	if (rc < 0 || nk <= 0 || l2->cfg.upload != KVR_L2_UP_COMMIT)
		return rc;
	if (l2->up_jobs >= l2->cfg.queue_jobs) {
		atomic_fetch_add_explicit(&l2->st.drops, (uint64_t)nk,
					  memory_order_relaxed);
		return rc;
	}
	/* The owned pin: a retrieve transfer of the L2 channel, so eviction
	 * cannot free a slot while its bytes are on the wire. */
	hits = kvr_store_prepare_retrieve(s->store, l2->chan, ns, l2->keys,
					  (uint32_t)nk, s->now_ns, l2->slots,
					  &pin);
	if (hits <= 0) {
		atomic_fetch_add_explicit(&l2->st.drops, (uint64_t)nk,
					  memory_order_relaxed);
		return rc;
	}
	j = job_new(KVR_L2_JOB_PUT, (uint32_t)hits);
	if (!j) {
		(void)kvr_store_commit_retrieve(s->store, l2->chan, pin,
						s->now_ns);
		atomic_fetch_add_explicit(&l2->st.drops, (uint64_t)nk,
					  memory_order_relaxed);
		return rc;
	}
	put_job_fill(s, j, ns, pin);
	l2->up_jobs++;
	submit(l2, l2->up, j);
	/* Before the answer: a worker that saw its commit sees the upload
	 * it queued (a wait for an empty queue includes it). */
	publish_queue(s);
	return rc;
}

/* ---- upload on eviction (--l2-upload evict) ---- */

/*
 * Nothing is uploaded at commit. Once the pool is 7/8 full, eviction is
 * near, and the eviction zone is the coldest 1/8 of the pool: the chunks
 * there without a copy in L2 (least recently used first, one namespace
 * per job) are pinned under L2 owners and uploaded, and when their job
 * ends they go back to the cold end of the LRU marked as saved
 * (kvr_store_l2_saved), so eviction takes saved chunks first. Chunks
 * outside the zone are never uploaded: they may still be used here.
 * Uploads in flight pin at most that 1/8 and --l2-queue jobs, so they
 * never take the room a worker's store needs. A chunk the workers push
 * out faster than the lane uploads is evicted unsaved: counted in drops,
 * as a commit-mode upload that found the queue full.
 */
static void cold_upload(struct kvr_srv *s)
{
	struct kvr_l2 *l2 = s->l2;
	struct kvr_store_stats st;
	uint32_t queued;

	if (!l2->up)
		return; /* stopping: the lanes are gone */
	l2->cold_ns = s->now_ns;
	kvr_store_stats(s->store, &st);
	queued = l2->up_jobs;
	if (st.l2_unsaved_evictions > l2->unsaved_seen) {
		atomic_fetch_add_explicit(
		    &l2->st.drops, st.l2_unsaved_evictions - l2->unsaved_seen,
		    memory_order_relaxed);
		l2->unsaved_seen = st.l2_unsaved_evictions;
	}
	while (
	    s->now_ns >= l2->cold_hold_ns && l2->up_jobs < l2->cfg.queue_jobs &&
	    l2->cold_bytes < st.pool_bytes / 8 &&
	    st.committed_bytes + st.reserved_bytes >= st.pool_bytes / 8 * 7) {
		struct kvr_l2_job *j;
		uint64_t pin = 0, bytes = 0;
		uint32_t ns = 0;
		int n = kvr_store_l2_cold(s->store, l2->chan, COLD_JOB_MAX,
					  st.pool_bytes / 8 - l2->cold_bytes,
					  s->now_ns, l2->keys, l2->slots, &ns,
					  &pin);

		if (n <= 0)
			break; /* the cold end is saved, or no room to pin */
		j = job_new(KVR_L2_JOB_PUT, (uint32_t)n);
		if (!j) {
			memset(l2->keep, 0, (size_t)n);
			(void)kvr_store_l2_saved(s->store, l2->chan, pin,
						 l2->keep, (uint32_t)n);
			break;
		}
		j->evict = 1;
		bytes = put_job_fill(s, j, ns, pin);
		l2->cold_bytes += bytes;
		l2->up_jobs++;
		submit(l2, l2->up, j);
	}
	/* As at commit: what was queued is counted before the loop answers
	 * the commit that started it. */
	if (l2->up_jobs != queued)
		publish_queue(s);
}

/* An evict-mode upload came back: mark what is in L2 now, unpin. */
static void on_cold_done(struct kvr_srv *s, struct kvr_l2_job *j)
{
	struct kvr_l2 *l2 = s->l2;

	for (uint32_t i = 0; i < j->n; i++) {
		l2->keep[i] = j->it[i].res == KVR_L2_RES_OK ||
			      j->it[i].res == KVR_L2_RES_EXISTS;
		l2->cold_bytes -= j->it[i].len;
		if (!l2->keep[i])
			l2->cold_hold_ns = s->now_ns + COLD_HOLD_NS;
	}
	(void)kvr_store_l2_saved(s->store, l2->chan, j->owner, l2->keep, j->n);
	cold_upload(s); /* the next batch, while the pool stays full */
}

/* ---- read-through ---- */

static struct kvr_l2_rt *rt_get(struct kvr_l2 *l2, const struct kvr_l2_job *j)
{
	struct kvr_l2_rt *rt = &l2->rt[j->rt];

	return rt->used && rt->gen == j->rt_gen ? rt : NULL;
}

/*
 * Answer the worker from L1 as it is now. Return 0, or -EAGAIN when its
 * response ring is full (nothing created: try again next pass).
 */
static int rt_answer(struct kvr_srv *s, struct kvr_l2_rt *rt, bool pending)
{
	struct kvr_conn *c = &s->conns[rt->conn];
	struct kvr_resp_hdr h;
	uint64_t lease = 0;
	void *p;
	int hits, rc;

	if (c->gen != rt->conn_gen || c->state != KVR_CONN_ACTIVE) {
		rt->answered = true; /* the worker is gone: nobody to tell */
		return 0;
	}
	/* Room first, so that a full ring costs nothing (no lease made and
	 * dropped); a parked answer goes out before ours. */
	if (c->blocked)
		return -EAGAIN;
	rc = kvr_ring_claim(&c->resp, KVR_RESP_BIT | KVR_OP_LOOKUP, sizeof(h),
			    &p);
	if (rc == -EAGAIN)
		rc = kvr_ring_claim(&c->resp, KVR_RESP_BIT | KVR_OP_LOOKUP,
				    sizeof(h), &p);
	if (rc == -EAGAIN)
		return rc;
	if (rc < 0) {
		/* A damaged ring: the dispatcher cuts the worker off. */
		rt->answered = true;
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
		if (pending && (uint32_t)hits < rt->n)
			h.value |= KVR_LOOKUP_L2_PENDING;
		h.handle = lease;
	}
	rc = kvr_resp_encode(
	    &(struct kvr_resp_view){.op = KVR_OP_LOOKUP, .hdr = h}, p,
	    sizeof(h));
	kvr_assert(rc == (int)sizeof(h)); /* a lookup answer has no slots */
	if (pending)
		atomic_fetch_add_explicit(&s->l2->st.rt_deadline, 1,
					  memory_order_relaxed);
	/* Counters first: a worker that has its answer sees them. */
	kvr_l2_publish(s);
	kvr__chan_publish(c);
	kvr__chan_count(s, c, KVR_OP_LOOKUP, h.status);
	rt->answered = true;
	return 0;
}

static void rt_free(struct kvr_l2 *l2, struct kvr_l2_rt *rt)
{
	rt->used = false;
	l2->rt_busy--;
}

/* The read-through has nothing more to load: answer (unless done). */
static void rt_finish(struct kvr_srv *s, struct kvr_l2_rt *rt)
{
	if (!rt->answered && rt_answer(s, rt, false) == -EAGAIN) {
		rt->deadline_ns = 1; /* retried by the deadline sweep */
		rt->h0 = UINT32_MAX; /* marks "all jobs done" */
		return;
	}
	rt_free(s->l2, rt);
}

bool kvr_l2_lookup(struct kvr_srv *s, struct kvr_conn *c,
		   const struct kvr_req_view *v)
{
	struct kvr_l2 *l2 = s->l2;
	uint32_t n = v->hdr.count, ch = (uint32_t)c->chan;
	struct kvr_l2_rt *rt = NULL;
	struct kvr_l2_job *j;
	int hits;

	if (!c->ops->late_answers || n == 0 || l2->rt_busy == l2->nrt)
		return false;
	hits = kvr_store_lookup(s->store, ch, c->ns_id, s->keys, n, false,
				s->now_ns, NULL);
	if (hits < 0 || (uint32_t)hits == n)
		return false;
	for (uint32_t i = 0; i < l2->nrt && !rt; i++)
		if (!l2->rt[i].used)
			rt = &l2->rt[i];
	j = job_new(KVR_L2_JOB_PROBE, n - (uint32_t)hits);
	if (!rt || !j) {
		free(j);
		return false;
	}
	rt->used = true;
	rt->answered = false;
	rt->gen++;
	rt->conn = c->idx;
	rt->conn_gen = c->gen;
	rt->req_id = v->hdr.req_id;
	rt->ns = c->ns_id;
	rt->pin = v->hdr.flags & KVR_REQ_PIN;
	rt->n = n;
	rt->h0 = (uint32_t)hits;
	rt->deadline_ns = s->now_ns + (uint64_t)l2->cfg.deadline_ms * 1000000u;
	memcpy(rt->keys, s->keys, (size_t)n * sizeof(*s->keys));
	l2->rt_busy++;
	j->ns = c->ns_id;
	j->ns_fp = ns_fp(s, c->ns_id);
	j->rt = (uint32_t)(rt - l2->rt);
	j->rt_gen = rt->gen;
	for (uint32_t i = 0; i < j->n; i++)
		j->it[i].key = s->keys[(uint32_t)hits + i];
	atomic_fetch_add_explicit(&l2->st.rt_lookups, 1, memory_order_relaxed);
	submit(l2, l2->down, j);
	return true;
}

/* A probe came back: reserve and load the contiguous run of hits. */
static void on_probe(struct kvr_srv *s, struct kvr_l2_job *j, bool stopping)
{
	struct kvr_l2 *l2 = s->l2;
	struct kvr_l2_rt *rt = rt_get(l2, j);
	struct kvr_l2_job *ld;
	uint32_t m = 0, nok = 0;
	uint64_t xfer = 0;
	int rc;

	for (uint32_t i = 0; i < j->n; i++)
		if (j->it[i].res == KVR_L2_RES_CORRUPT)
			atomic_fetch_add_explicit(&l2->st.corrupt, 1,
						  memory_order_relaxed);
	while (m < j->n && j->it[m].res == KVR_L2_RES_OK)
		m++;
	atomic_fetch_add_explicit(&l2->st.hits, m, memory_order_relaxed);
	if (m < j->n && j->it[m].res == KVR_L2_RES_MISS) {
		bool later = false;

		for (uint32_t i = m + 1; i < j->n; i++)
			later |= j->it[i].res == KVR_L2_RES_OK;
		atomic_fetch_add_explicit(later ? &l2->st.holes
						: &l2->st.misses,
					  1, memory_order_relaxed);
	}
	if (!rt)
		return;
	if (m == 0 || stopping) {
		rt_finish(s, rt);
		return;
	}
	for (uint32_t i = 0; i < m; i++) {
		l2->keys[i] = j->it[i].key;
		l2->sizes[i] = j->it[i].len;
	}
	rc = kvr_store_prepare_store(s->store, l2->chan, rt->ns, l2->keys,
				     l2->sizes, m, s->now_ns, l2->slots, &xfer);
	if (rc <= 0) {
		rt_finish(s, rt);
		return;
	}
	ld = job_new(KVR_L2_JOB_LOAD, (uint32_t)rc);
	if (!ld) {
		(void)kvr_store_abort_store(s->store, l2->chan, xfer,
					    s->now_ns);
		rt_finish(s, rt);
		return;
	}
	for (uint32_t i = 0; i < m; i++) {
		if (l2->slots[i].status != KVR_SLOT_OK)
			continue;
		ld->it[nok].key = l2->keys[i];
		ld->it[nok].off = l2->slots[i].off;
		ld->it[nok].len = l2->slots[i].len;
		nok++;
	}
	ld->ns = rt->ns;
	ld->ns_fp = j->ns_fp;
	ld->owner = xfer;
	ld->rt = j->rt;
	ld->rt_gen = j->rt_gen;
	submit(l2, l2->down, ld);
}

/* A load came back: publish what verified, free the rest, answer. */
static void on_load(struct kvr_srv *s, struct kvr_l2_job *j)
{
	struct kvr_l2 *l2 = s->l2;
	struct kvr_l2_rt *rt = rt_get(l2, j);
	int rc;

	for (uint32_t i = 0; i < j->n; i++) {
		l2->keep[i] = j->it[i].res == KVR_L2_RES_OK;
		/* The verified header's sum is the XXH3-64 of the bytes in
		 * the slot, the sum a worker with checksums computes: the L1
		 * object gets it, so a VERIFY worker can check the chunk. */
		l2->sizes[i] = j->it[i].has_sum ? j->it[i].sum : 0;
		if (j->it[i].res == KVR_L2_RES_CORRUPT)
			atomic_fetch_add_explicit(&l2->st.corrupt, 1,
						  memory_order_relaxed);
	}
	/* Every item is one reservation of the transfer, in order; only
	 * the verified ones are published (the others' sums mean nothing). */
	rc = kvr_store_set_sums(s->store, l2->chan, j->owner, l2->sizes, j->n);
	if (rc < 0)
		kvr_log_debug("l2: sums of a load: %s (published without)",
			      kvr_strerror(rc));
	(void)kvr_store_commit_store_mask(s->store, l2->chan, j->owner,
					  l2->keep, j->n, s->now_ns);
	if (rt)
		rt_finish(s, rt);
}

static void on_done(struct kvr_srv *s, struct kvr_l2_job *j, bool stopping)
{
	struct kvr_l2 *l2 = s->l2;

	atomic_fetch_sub_explicit(&l2->st.queue_depth, 1, memory_order_relaxed);
	/* Job latency, submit to done, in the server's global histograms
	 * (the loop is their single writer): uploads as l2_write, probes
	 * and loads as l2_read. */
	if (s->hist_on && s->obs && !stopping)
		kvr_hist_add(
		    &s->obs->lat[j->kind == KVR_L2_JOB_PUT ? KVR_HIST_L2_WRITE
							   : KVR_HIST_L2_READ],
		    kvr_clock_now_ns() - j->submit_ns, 1);
	switch (j->kind) {
	case KVR_L2_JOB_PUT:
		if (j->evict)
			on_cold_done(s, j);
		else
			(void)kvr_store_commit_retrieve(s->store, l2->chan,
							j->owner, s->now_ns);
		l2->up_jobs--;
		break;
	case KVR_L2_JOB_PROBE:
		on_probe(s, j, stopping);
		break;
	case KVR_L2_JOB_LOAD:
		on_load(s, j);
		break;
	}
	free(j);
	kvr_l2_publish(s);
}

static unsigned drain_done(struct kvr_srv *s, bool stopping)
{
	struct kvr_l2 *l2 = s->l2;
	struct kvr_l2_job *j, *next;
	unsigned n = 0;

	/* A-L2D: pairs with R-L2D in kvr__l2_done. */
	if (!atomic_load_explicit(&l2->done_n, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&l2->lock);
	j = l2->done_head;
	l2->done_head = l2->done_tail = NULL;
	atomic_store_explicit(&l2->done_n, 0, memory_order_relaxed);
	pthread_mutex_unlock(&l2->lock);
	for (; j; j = next, n++) {
		next = j->next;
		on_done(s, j, stopping);
	}
	return n;
}

unsigned kvr_l2_poll(struct kvr_srv *s)
{
	struct kvr_l2 *l2 = s->l2;
	unsigned work = drain_done(s, false);

	if (l2->cfg.upload == KVR_L2_UP_EVICT &&
	    s->now_ns - l2->cold_ns >= COLD_EVERY_NS)
		cold_upload(s);

	/* Deadlines, and answers that found a full ring. */
	if (l2->rt_busy)
		for (uint32_t i = 0; i < l2->nrt; i++) {
			struct kvr_l2_rt *rt = &l2->rt[i];

			if (!rt->used || rt->answered ||
			    s->now_ns < rt->deadline_ns)
				continue;
			if (rt_answer(s, rt, rt->h0 != UINT32_MAX) == 0) {
				work++;
				if (rt->h0 == UINT32_MAX)
					rt_free(l2, rt);
			}
		}
	if (s->now_ns - last_pub_ns > PUBLISH_NS) {
		last_pub_ns = s->now_ns;
		kvr_l2_publish(s);
	}
	return work;
}

uint64_t kvr_l2_sleep_ns(const struct kvr_srv *s)
{
	const struct kvr_l2 *l2 = s->l2;
	uint64_t first = UINT64_MAX;

	if (!l2 || !l2->rt_busy)
		return UINT64_MAX;
	/* Lane completions ring the done eventfd, which wakes the loop by
	 * itself: only a deadline (or an answer waiting for room in a full
	 * response ring, deadline 1) needs a timed wake-up. Waking every
	 * millisecond instead cost a read-through ~0.07 CPU-s per GB moved
	 * (each wake-up is followed by --spin-us of spinning). */
	for (uint32_t i = 0; i < l2->nrt; i++) {
		const struct kvr_l2_rt *rt = &l2->rt[i];

		if (rt->used && !rt->answered && rt->deadline_ns < first)
			first = rt->deadline_ns;
	}
	if (first == UINT64_MAX)
		return UINT64_MAX;
	if (first <= s->now_ns + KVR_L2_SLEEP_MIN_NS)
		return KVR_L2_SLEEP_MIN_NS;
	return first - s->now_ns;
}

/* ---- start and stop ---- */

static const char *kind_name(int k)
{
	switch (k) {
	case KVR_L2_REDIS:
		return "redis";
	case KVR_L2_UNIX:
		return "redis over a unix socket";
	case KVR_L2_CLUSTER:
		return "redis cluster";
	default:
		return "off";
	}
}

int kvr_l2_start(struct kvr_srv *s)
{
	const struct kvr_l2_conf *cf = &s->cfg.l2;
	struct kvr_l2 *l2;
	uint32_t mk = s->max_keys;
	int rc;

	if (cf->kind == KVR_L2_OFF)
		return 0;
	l2 = calloc(1, sizeof(*l2));
	if (!l2)
		return -ENOMEM;
	l2->cfg = *cf;
	l2->efd = -1;
	pthread_mutex_init(&l2->lock, NULL);
	s->l2 = l2;
	rc = kvr_l2_read_secret(cf, l2->user, sizeof(l2->user), l2->pass,
				sizeof(l2->pass));
	if (rc < 0)
		return rc;
	rc = kvr_l2_probe_log(cf, l2->user, l2->pass);
	if (rc < 0)
		return rc;
	l2->pool = s->pool.base;
	l2->pool_bytes = s->cfg.pool_bytes;
	l2->chan = s->cfg.max_workers; /* the extra store channel */
	rc = kvr_store_channel_trust(s->store, l2->chan);
	if (rc < 0)
		return rc;
	l2->nrt = RT_MAX;
	l2->rt = calloc(RT_MAX, sizeof(*l2->rt));
	l2->fp = calloc(KVR_SRV_NS_MAX, sizeof(*l2->fp));
	l2->keys = calloc(mk, sizeof(*l2->keys));
	l2->sizes = calloc(mk, sizeof(*l2->sizes));
	l2->slots = calloc(mk, sizeof(*l2->slots));
	l2->keep = calloc(mk, 1);
	if (!l2->rt || !l2->fp || !l2->keys || !l2->sizes || !l2->slots ||
	    !l2->keep)
		return -ENOMEM;
	for (uint32_t i = 0; i < RT_MAX; i++) {
		l2->rt[i].keys = calloc(mk, sizeof(struct kvr_key));
		if (!l2->rt[i].keys)
			return -ENOMEM;
	}
	l2->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l2->efd < 0)
		return -errno;
	rc = kvr__l2_lane_create(l2, 0, &l2->up);
	if (rc == 0)
		rc = kvr__l2_lane_create(l2, 1, &l2->down);
	if (rc < 0) {
		kvr_log_err("l2: start lanes: %s", kvr_strerror(rc));
		return rc;
	}
	kvr_log_info("l2: %s at %s (%u seed%s), key prefix '%s'%s, auth %s, "
		     "upload %s, queue %u commits, read-through deadline "
		     "%u ms, io timeout %u ms",
		     kind_name(cf->kind), cf->url, cf->nseeds,
		     cf->nseeds == 1 ? "" : "s", cf->prefix,
		     cf->salt[0] ? " with tenant salt" : "",
		     l2->pass[0] ? (cf->auth_file[0] ? "from --l2-auth-file"
						     : "from $" KVR_L2_AUTH_ENV)
				 : "none",
		     cf->upload == KVR_L2_UP_NONE ? "off (read-only)"
		     : cf->upload == KVR_L2_UP_EVICT
			 ? "only chunks about to be "
			   "evicted"
			 : "at every commit",
		     cf->queue_jobs, cf->deadline_ms, cf->io_ms);
	kvr_l2_publish(s);
	return 0;
}

void kvr_l2_stop(struct kvr_srv *s)
{
	struct kvr_l2 *l2 = s->l2;

	if (!l2)
		return;
	/* The lanes finish the job they run (bounded by --l2-io-ms per
	 * command) and hand back the queued ones unrun; then every owner
	 * they held ends here, before the shutdown self-check. */
	kvr__l2_lane_destroy(l2->down);
	l2->down = NULL;
	kvr__l2_lane_destroy(l2->up);
	l2->up = NULL;
	s->now_ns = kvr_clock_now_ns();
	while (drain_done(s, true) > 0)
		;
	for (uint32_t i = 0; i < l2->nrt; i++)
		if (l2->rt[i].used)
			rt_free(l2, &l2->rt[i]);
	kvr_l2_publish(s);
	kvr_log_info("l2: stopped: %llu chunks uploaded (%llu already "
		     "there, %llu failed, %llu dropped), %llu loaded, %llu "
		     "corrupt",
		     (unsigned long long)l2->st.up_chunks,
		     (unsigned long long)l2->st.up_exists,
		     (unsigned long long)l2->st.up_failed,
		     (unsigned long long)l2->st.drops,
		     (unsigned long long)l2->st.down_chunks,
		     (unsigned long long)l2->st.corrupt);
}

void kvr_l2_destroy(struct kvr_l2 *l2)
{
	if (!l2)
		return;
	kvr__l2_lane_destroy(l2->down);
	kvr__l2_lane_destroy(l2->up);
	/* Jobs the lanes handed back after the loop stopped: the store dies
	 * with the server, so only their memory is left to free. */
	for (struct kvr_l2_job *j = l2->done_head, *n; j; j = n) {
		n = j->next;
		free(j);
	}
	if (l2->efd >= 0)
		close(l2->efd);
	for (uint32_t i = 0; l2->rt && i < l2->nrt; i++)
		free(l2->rt[i].keys);
	explicit_bzero(l2->pass, sizeof(l2->pass));
	free(l2->rt);
	free(l2->fp);
	free(l2->keys);
	free(l2->sizes);
	free(l2->slots);
	free(l2->keep);
	pthread_mutex_destroy(&l2->lock);
	free(l2);
}
