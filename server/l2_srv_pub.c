/* SPDX-License-Identifier: MIT */
/*
 * l2_srv_pub.c - the L2 tier's counters and node states, published from
 * the tier's own counters (relaxed atomics the lanes bump) into the
 * control header's l2 section, which kvring-inspect reads. The loop calls
 * it every few ms while jobs run (l2_srv.c) and at shutdown.
 */
#include <string.h>

#include "kvringd.h"
#include "l2_srv.h"

void kvr_l2_publish(struct kvr_srv *s)
{
	struct kvr_l2 *l2 = s->l2;
	struct kvr_l2stats_shm *o = &s->hdr->l2;
	const struct kvr_l2_stats *st = &l2->st;
	uint32_t nn;

#define CP(dst, src)                                                           \
	atomic_store_explicit(                                                 \
	    &o->dst, atomic_load_explicit(&st->src, memory_order_relaxed),     \
	    memory_order_relaxed)
	/* Relaxed throughout: each counter stands alone (layout.h). */
	atomic_store_explicit(&o->mode, (uint32_t)l2->cfg.kind,
			      memory_order_relaxed);
	CP(queue_depth, queue_depth);
	CP(drops, drops);
	CP(up_chunks, up_chunks);
	CP(up_bytes, up_bytes);
	CP(up_exists, up_exists);
	CP(up_failed, up_failed);
	CP(down_chunks, down_chunks);
	CP(down_bytes, down_bytes);
	CP(hits, hits);
	CP(misses, misses);
	CP(holes, holes);
	CP(corrupt, corrupt);
	CP(deleted, deleted);
	CP(rt_lookups, rt_lookups);
	CP(rt_deadline, rt_deadline);
	CP(moved, moved);
	CP(ask, ask);
	CP(slot_refresh, slot_refresh);
	CP(tryagain, tryagain);
	CP(state_changes, state_changes);
	for (int i = 0; i < KVR_L2_ERR__N; i++)
		CP(errors[i], errors[i]);
#undef CP
	pthread_mutex_lock(&l2->lock);
	nn = l2->nnodes;
	pthread_mutex_unlock(&l2->lock);
	atomic_store_explicit(&o->nodes, nn, memory_order_relaxed);
	for (uint32_t i = 0; i < nn && i < KVR_L2_SHM_NODES; i++) {
		struct kvr_l2node_shm *d = &o->node[i];

		if (!d->addr[0]) {
			size_t al =
			    strnlen(l2->nodes[i].addr, sizeof(d->addr) - 1);

			memcpy(d->addr, l2->nodes[i].addr, al);
		}
		atomic_store_explicit(
		    &d->state,
		    atomic_load_explicit(&l2->nodes[i].state,
					 memory_order_relaxed),
		    memory_order_relaxed);
		atomic_store_explicit(
		    &d->errors,
		    atomic_load_explicit(&l2->nodes[i].errors,
					 memory_order_relaxed),
		    memory_order_relaxed);
	}
}
