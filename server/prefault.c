/* SPDX-License-Identifier: MIT */
/*
 * prefault.c - the background pre-fault of a huge-page pool. The pool's
 * pages are reserved when it is mapped (lib/segment_map.c), but a fresh
 * huge page is zeroed by the kernel at its first touch, and zeroing is
 * the whole cost of a huge-page start: 150 ms to several seconds per GiB
 * here. Doing it in line put all of that between the start and the
 * socket. Here one thread touches the pool, one read per huge page, while
 * the loop already accepts and serves.
 *
 * What that costs others: nothing on a worker's critical path. The
 * thread goes from offset 0 up and publishes how far it got in the
 * control header (pool_zeroed_bytes, abi 3.2); a worker that attaches
 * meanwhile pre-touches only the pages below that line, which the
 * kernel merely maps, and follows the line in a thread of its own for
 * the rest (worker/touch.c), so it never zeroes a page for us. The
 * allocator hands out a fresh pool from offset 0 up (lowest offset
 * first, alloc.c), i.e. the zeroed pages first, and before every
 * prepare_store the loop gives it the line (kvr__prefault_place), so a
 * free extent below it is taken before a best fit above it. Only a
 * store that outruns the zeroing (no room left below the line) gets
 * pages nobody touched yet; it faults them in itself, correct, only
 * slower (kvring-bench attach measures both).
 *
 * The thread reads one word per page and writes nothing, touches nothing
 * but the pool mapping and shares only the atomics below with the loop.
 * This file does not create the pool (srv.c does) and does not run on
 * 4 KiB pools, whose pages tmpfs zeroes at fallocate time anyway.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <kvring/clock.h>
#include <kvring/log.h>
#include <kvring/segment.h>
#include <kvring/store.h>

#include "notify.h"
#include "prefault.h"
#include "kvringd.h"

/* Bytes touched between looks at the stop flag and publications of the
 * progress: 16 MiB (8 huge pages, 2-80 ms of zeroing here), so a worker
 * waits at most about that long for the next pages it may touch. */
#define SLICE (16ull << 20)

/* At most one STATUS= line a second. */
#define STATUS_NS 1000000000ull

/*
 * struct kvr_prefault - the thread and what it shares with the loop.
 * Created by kvr__prefault_start(), freed by kvr__prefault_poll() once
 * joined or by kvr__prefault_stop(); owned by struct kvr_srv.
 */
struct kvr_prefault {
	pthread_t thread;
	unsigned char *base;	     /* the pool mapping (borrowed) */
	struct kvr_ctl_hdr_shm *hdr; /* progress for workers (borrowed) */
	size_t bytes, page_bytes;
	uint64_t t0_ns;
	uint64_t elapsed_ns;	     /* thread writes, before R-PF1 */
	_Atomic uint64_t done_bytes; /* progress, for STATUS only */
	_Atomic bool stop;	     /* loop -> thread: give up early */
	_Atomic bool finished;	     /* thread -> loop: R-PF1 / A-PF1 */
	uint64_t status_ns;	     /* loop only: last STATUS= line */
};

static void *prefault_main(void *arg)
{
	struct kvr_prefault *p = arg;

	for (size_t off = 0; off < p->bytes; off += SLICE) {
		size_t n = p->bytes - off < SLICE ? p->bytes - off : SLICE;

		/* Relaxed: a request to stop, no data rides on it. */
		if (atomic_load_explicit(&p->stop, memory_order_relaxed))
			break;
		/* A read fault on a shared hugetlb mapping allocates and
		 * zeroes the page like a write fault, and changes nothing. */
		kvr_seg_prefault_pages(p->base + off, n, p->page_bytes, false,
				       NULL);
		/* Relaxed: progress for a STATUS line, nothing more. */
		atomic_store_explicit(&p->done_bytes, off + n,
				      memory_order_relaxed);
		/* Relaxed: a hint, no data rides on it. A worker that reads
		 * an older value touches later, one that touched above it
		 * anyway only zeroes that page itself; the kernel's page
		 * cache, not this word, makes every touch correct. */
		atomic_store_explicit(&p->hdr->pool_zeroed_bytes, off + n,
				      memory_order_relaxed);
	}
	p->elapsed_ns = kvr_clock_now_ns() - p->t0_ns;
	/* R-PF1: elapsed_ns before finished; pairs with A-PF1 in
	 * kvr__prefault_poll(). */
	atomic_store_explicit(&p->finished, true, memory_order_release);
	return NULL;
}

int kvr__prefault_start(struct kvr_srv *s)
{
	struct kvr_prefault *p;
	int rc;

	if (s->prefault || !s->pool.base || !s->pool.hugetlb)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->base = s->pool.base;
	/* The control segment exists before the pool (srv.c), and
	 * format_ctl() leaves pool_zeroed_bytes alone. */
	p->hdr = s->ctl.base;
	p->bytes = s->pool.bytes;
	p->page_bytes = s->pool.page_bytes;
	p->t0_ns = kvr_clock_now_ns();
	atomic_init(&p->done_bytes, 0);
	atomic_init(&p->stop, false);
	atomic_init(&p->finished, false);
	rc = pthread_create(&p->thread, NULL, prefault_main, p);
	if (rc != 0) {
		free(p);
		return -rc;
	}
	s->prefault = p;
	kvr_log_info("pool pre-fault runs in the background: %zu pages of "
		     "%zu KiB, the socket opens now",
		     p->bytes / p->page_bytes, p->page_bytes >> 10);
	return 0;
}

void kvr__prefault_place(struct kvr_srv *s)
{
	struct kvr_prefault *p = s->prefault;

	if (!p)
		return;
	/* Relaxed: a hint for placement, no data rides on it (as for the
	 * workers' pool_zeroed_bytes): an older value only places lower. */
	kvr_store_prefer_below(
	    s->store,
	    atomic_load_explicit(&p->done_bytes, memory_order_relaxed));
}

bool kvr__prefault_running(const struct kvr_srv *s)
{
	return s->prefault != NULL;
}

void kvr__prefault_poll(struct kvr_srv *s)
{
	struct kvr_prefault *p = s->prefault;
	uint64_t now = kvr_clock_now_ns();
	double gib = (double)(1ull << 30);

	if (!p)
		return;
	/* A-PF1: pairs with R-PF1; elapsed_ns is then final. */
	if (!atomic_load_explicit(&p->finished, memory_order_acquire)) {
		/* Relaxed: an estimate for a human. */
		uint64_t done =
		    atomic_load_explicit(&p->done_bytes, memory_order_relaxed);

		/* Slots the loop places outside a prepare_store (store-ahead
		 * stages them at commit) get a line at most one heartbeat
		 * old: lower than the real one, so still zeroed. */
		kvr__prefault_place(s);
		if (now - p->status_ns < STATUS_NS)
			return;
		p->status_ns = now;
		kvr__notify_status("serving on %s; pre-faulting pool in the "
				   "background: %.1f of %.1f GiB (%.0f%%)",
				   s->cfg.socket_path, (double)done / gib,
				   (double)p->bytes / gib,
				   100.0 * (double)done / (double)p->bytes);
		return;
	}
	pthread_join(p->thread, NULL);
	kvr_log_info("pool pre-faulted in the background: %zu bytes in %.1f "
		     "ms (%.2f GB/s, %zu KiB pages)",
		     p->bytes, (double)p->elapsed_ns / 1e6,
		     p->elapsed_ns ? (double)p->bytes / (double)p->elapsed_ns
				   : 0.0,
		     p->page_bytes >> 10);
	kvr__notify_status("serving on %s; pool pre-faulted",
			   s->cfg.socket_path);
	/* All zeroed: placement is plain best fit again. */
	kvr_store_prefer_below(s->store, 0);
	free(p);
	s->prefault = NULL;
}

void kvr__prefault_stop(struct kvr_srv *s)
{
	struct kvr_prefault *p = s->prefault;

	if (!p)
		return;
	/* Relaxed: the join below is the synchronisation. */
	atomic_store_explicit(&p->stop, true, memory_order_relaxed);
	pthread_join(p->thread, NULL);
	free(p);
	s->prefault = NULL;
}
