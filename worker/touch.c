/* SPDX-License-Identifier: MIT */
/*
 * touch.c - the worker's pre-fault of the pool it just mapped (DESIGN: no
 * page faults in the steady state): one atomic add of zero per page, at
 * the pool's own page size (one touch per 2 MiB huge page), either in
 * line inside kvr_connect or, on request, in a background thread so that
 * kvr_connect returns at once.
 *
 * The background thread never changes a byte (the add of zero), never
 * takes the client's lock and touches nothing but the pool mapping, so it
 * runs beside any call. Teardown stops and joins it before the pool is
 * unmapped; a forked child, which has no such thread, only forgets it.
 * A store would take the faults of pages the thread has not reached yet
 * inside its own copy; instead every prepare_store answer touches its
 * slots' pages above the thread's progress before the caller sees them
 * (kvr__touch_slots) with one MADV_POPULATE_WRITE, so the copy finds
 * them mapped. kvring-bench attach measures the first stores meanwhile.
 *
 * A huge-page pool that kvringd still zeroes in the background (the
 * control header's pool_zeroing, abi 3.2) is touched in line only below
 * the server's published pool_zeroed_bytes, where a touch merely maps a
 * page; a thread then follows that line up to the end (follow_main), so
 * the worker never zeroes a page on the server's behalf and kvr_connect
 * does not wait for the zeroing. Older servers leave pool_zeroing 0: the
 * whole pool is touched in line, as before.
 * This file does not map anything (conn.c does).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

/* Bytes touched between looks at the stop flag (64 MiB: ~15 ms on 4 KiB
 * pages here, so teardown waits at most that long). */
#define TOUCH_SLICE (64ull << 20)

static void *touch_main(void *arg)
{
	struct kvr_client *c = arg;
	unsigned char *p = c->pool.base;
	uint64_t t0 = kvr_clock_now_ns();

	for (size_t off = 0; off < c->pool.bytes; off += TOUCH_SLICE) {
		size_t n = c->pool.bytes - off < TOUCH_SLICE
			       ? c->pool.bytes - off
			       : TOUCH_SLICE;

		/* Relaxed: a request to stop early, no data rides on it. */
		if (atomic_load_explicit(&c->touch.stop, memory_order_relaxed))
			break;
		(void)kvr_seg_prefault_pages(p + off, n, c->pool.page_bytes,
					     true, NULL);
		/* Relaxed: a hint for kvr__touch_slots, which only touches
		 * more than it needs to when it reads an older value. */
		atomic_store_explicit(&c->touch.reached, off + n,
				      memory_order_relaxed);
	}
	c->touch.ns = kvr_clock_now_ns() - t0;
	/* R-TOUCH1: publish ns; pairs with A-TOUCH1 in kvr_prefault_status. */
	atomic_store_explicit(&c->touch.done, true, memory_order_release);
	return NULL;
}

/* How long the follower sleeps when the server has zeroed nothing new
 * (it publishes every 16 MiB, 2-80 ms of zeroing here). */
#define FOLLOW_SLEEP_NS 1000000L

/* The server's zeroed line, rounded down to whole pages of ours. */
static size_t zeroed_line(const struct kvr_client *c, size_t page)
{
	/* Relaxed: a hint for speed, no data rides on it (see
	 * docs/memory-order.md, "Background pool pre-fault"). */
	uint64_t z = atomic_load_explicit(&c->hdr->pool_zeroed_bytes,
					  memory_order_relaxed);

	if (z >= c->pool.bytes)
		return c->pool.bytes;
	return (size_t)z & ~(page - 1);
}

/*
 * The follower: touch the pages the server has zeroed since we looked,
 * up to the end of the pool, never above its line. Ends early on a stop
 * request or when the server stops (its thread then stops too, and the
 * line would not move again); what is left is faulted in by the stores
 * that reach it.
 */
static void *follow_main(void *arg)
{
	struct kvr_client *c = arg;
	size_t page = c->pool.page_bytes, from = c->touch.from;
	unsigned char *p = c->pool.base;
	uint64_t t0 = kvr_clock_now_ns();

	while (from < c->pool.bytes) {
		struct timespec ts = {0, FOLLOW_SLEEP_NS};
		size_t to = zeroed_line(c, page);

		/* Relaxed: a request to stop early, no data rides on it. */
		if (atomic_load_explicit(&c->touch.stop, memory_order_relaxed))
			break;
		if (to > from) {
			(void)kvr_seg_prefault_pages(p + from, to - from, page,
						     true, NULL);
			from = to;
			continue;
		}
		/* Relaxed: the server's run state, a hint as above. */
		if (atomic_load_explicit(&c->hdr->state,
					 memory_order_relaxed) ==
		    KVR_SERVER_STOPPING)
			break;
		nanosleep(&ts, NULL);
	}
	c->touch.ns = c->info.prefault_ns + (kvr_clock_now_ns() - t0);
	/* R-TOUCH1: publish ns; pairs with A-TOUCH1 in kvr_prefault_status. */
	atomic_store_explicit(&c->touch.done, true, memory_order_release);
	return NULL;
}

/*
 * A huge-page pool the server is still zeroing: touch in line what is
 * zeroed, leave the rest to follow_main. Return true when the follower
 * runs; false when the caller should touch the whole pool in line (an
 * older server, the zeroing already over, or no thread).
 */
static bool touch_behind_server(struct kvr_client *c, size_t page)
{
	size_t line;

	if (!c->pool.hugetlb || !c->hdr || c->hdr->pool_zeroing != 1u)
		return false;
	line = zeroed_line(c, page);
	if (line >= c->pool.bytes)
		return false; /* all zeroed: the in-line touch only maps */
	(void)kvr_seg_prefault_pages(c->pool.base, line, page, true,
				     &c->info.prefault_ns);
	c->touch.from = line;
	if (pthread_create(&c->touch.thread, NULL, follow_main, c) != 0)
		return false; /* no thread (limits): the rest in line */
	c->touch.started = true;
	return true;
}

int kvr__touch_start(struct kvr_client *c, bool background)
{
	size_t page = c->pool.page_bytes ? c->pool.page_bytes : 4096u;
	int rc;

	atomic_init(&c->touch.stop, false);
	atomic_init(&c->touch.done, false);
	atomic_init(&c->touch.reached, 0);
	if (touch_behind_server(c, page))
		return 0;
	/* Huge pages attach in a few ms per GiB: no thread worth having. */
	if (background && !c->pool.hugetlb) {
		if (pthread_create(&c->touch.thread, NULL, touch_main, c) ==
		    0) {
			c->touch.started = true;
			c->touch.bg = true;
			return 0;
		}
		/* No thread (limits): touch in line, as without the option. */
	}
	rc = kvr_seg_prefault_pages(c->pool.base, c->pool.bytes, page, true,
				    &c->info.prefault_ns);
	c->touch.ns = c->info.prefault_ns;
	atomic_store_explicit(&c->touch.done, true, memory_order_relaxed);
	return rc;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/*
 * Map [off, off + len) of the pool writable in this process, changing no
 * byte. MADV_POPULATE_WRITE does it in one call; measured here it made a
 * first 16 MiB store during the background pre-fault 1.3-2.3x faster
 * (prepare + copy + commit) where one add of zero per page, a fault each,
 * gained nothing over the copy taking the faults itself
 * (docs/performance.md, "First stores during the zeroing and the
 * background pre-fault"). A kernel without it (EINVAL) gets the adds.
 */
static void populate(struct kvr_client *c, size_t off, size_t len, size_t page)
{
	unsigned char *p = (unsigned char *)c->pool.base + off;

	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return;
	(void)kvr_seg_prefault_pages(p, len, page, true, NULL);
}

void kvr__touch_slots(struct kvr_client *c, const struct kvr_xfer *x)
{
	size_t page = c->pool.page_bytes ? c->pool.page_bytes : 4096u;
	size_t reached;

	/* Relaxed: done only says whether to bother; a stale false costs a
	 * touch of pages already mapped, which changes nothing. */
	if (!c->touch.bg ||
	    atomic_load_explicit(&c->touch.done, memory_order_relaxed))
		return;
	/* Relaxed: a hint, as in touch_main. */
	reached = atomic_load_explicit(&c->touch.reached, memory_order_relaxed);
	for (uint32_t i = 0; i < x->nslots; i++) {
		const struct kvr_slot *s = &x->slots[i];
		size_t lo, hi;

		if (s->status != KVR_SLOT_OK || s->len == 0 ||
		    s->off >= c->pool.bytes || s->len > c->pool.bytes - s->off)
			continue; /* the answer was checked; be safe anyway */
		hi = (size_t)(s->off + s->len);
		if (hi <= reached)
			continue; /* the thread has been there */
		lo = (size_t)s->off > reached ? (size_t)s->off : reached;
		lo &= ~(page - 1);
		populate(c, lo, hi - lo, page);
	}
}

void kvr__touch_stop(struct kvr_client *c)
{
	if (!c->touch.started)
		return;
	c->touch.started = false;
	if (getpid() != c->owner_pid)
		return; /* a forked child: the thread is the parent's */
	/* Relaxed: the join below is the synchronisation. */
	atomic_store_explicit(&c->touch.stop, true, memory_order_relaxed);
	pthread_join(c->touch.thread, NULL);
}

int kvr_prefault_status(struct kvr_client *c, bool wait, uint64_t *prefault_ns)
{
	if (!c)
		return -EINVAL;
	if (!c->touch.started) {
		/* In line, never, or already joined: nothing runs. */
		if (prefault_ns)
			*prefault_ns = c->touch.ns;
		return 0;
	}
	if (wait && getpid() == c->owner_pid) {
		pthread_join(c->touch.thread, NULL);
		c->touch.started = false;
	}
	/* A-TOUCH1: pairs with R-TOUCH1 in touch_main; ns is then valid. */
	if (!atomic_load_explicit(&c->touch.done, memory_order_acquire))
		return -EINPROGRESS;
	if (prefault_ns)
		*prefault_ns = c->touch.ns;
	return 0;
}
