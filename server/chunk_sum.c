/* SPDX-License-Identifier: MIT */
/*
 * chunk_sum.c - kvringd's side of per-chunk checksums (docs/reliability.md,
 * "Checksums"): the sums a worker sends with commit_store go to the
 * store, which keeps them with the objects and hands them back in
 * retrieve answers; and a worker's report that slots of its retrieve
 * failed their sum is checked here, against the sum the store keeps, by
 * hashing the slot's pool bytes, before the object is dropped.
 *
 * That re-check is the one place the event loop reads payload bytes, and
 * it runs only on a report, never on the hot path. It is what stops a
 * worker from deleting other workers' good chunks by calling them
 * corrupt (and then storing its own bytes under their keys). A worker
 * whose reports keep turning out false is re-checked at most
 * KVR_SUM_FALSE_MAX times; after that its reports are counted, not
 * checked, so it cannot make the loop hash the pool for it without end.
 * What the worker computes at commit is not trusted for anything but
 * itself: a wrong sum only makes that chunk fail every later check.
 */
#include <kvring/log.h>
#include <kvring/store.h>
#include <kvring/sum.h>

#include "chunk_sum.h"

int kvr__chunk_sum_store(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer,
			 uint32_t n)
{
	return kvr_store_set_sums(s->store, (uint32_t)c->chan, xfer, s->sizes,
				  n);
}

uint32_t kvr__chunk_sum_report(struct kvr_srv *s, struct kvr_conn *c,
			       uint64_t xfer, uint32_t n)
{
	uint32_t ch = (uint32_t)c->chan, dropped = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = s->sizes[i], len, sum;

		/* Only an object this transfer pins, with a sum: anything
		 * else is not this worker's to judge (ignored). */
		if (kvr_store_xfer_sum(s->store, ch, xfer, off, &len, &sum) < 0)
			continue;
		if (c->false_reports >= KVR_SUM_FALSE_MAX) {
			s->g.corrupt_unconfirmed++;
			continue;
		}
		/* The store checked [off, off+len) is one of its objects,
		 * so it lies inside the pool. */
		if (kvr_sum64((const char *)s->pool.base + off, (size_t)len) ==
		    sum) {
			c->false_reports++;
			s->g.corrupt_unconfirmed++;
			if (c->false_reports == KVR_SUM_FALSE_MAX)
				kvr_log_peer(
				    KVR_LOG_WARN, c->pid,
				    "channel %d (pid %d): %u corruption "
				    "reports whose bytes matched "
				    "their sum; its reports are no "
				    "longer checked",
				    c->chan, (int)c->pid, KVR_SUM_FALSE_MAX);
			continue;
		}
		if (kvr_store_drop_corrupt(s->store, ch, xfer, off) == 0)
			dropped++;
	}
	return dropped;
}
