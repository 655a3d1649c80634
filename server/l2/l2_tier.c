/* SPDX-License-Identifier: MIT */
/*
 * l2_tier.c - the part of the L2 tier both sides touch (l2.h): the node
 * table the inspector shows (any thread, under l2->lock; states are
 * atomics) and the done queue, on which a lane thread hands a finished
 * job back and rings the eventfd the loop polls. l2_srv.c drains it.
 * Nothing here calls the store or the network, so the lanes (l2_lane.c)
 * and the loop side (l2_srv.c) both use it without using each other.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <kvring/log.h>

#include <kvring/l2.h>

/* ---- node table (any thread, under l2->lock) ---- */

/* The tier's node table is shared by both lanes (under the lock): a node
 * is named "host:port" or its socket path, found or added, never
 * removed, so an index stays valid for the server's life. */
int kvr__l2_node_id(struct kvr_l2 *l2, const struct kvr_l2_addr *a)
{
	char addr[272];
	int id = -ENOSPC;

	if (a->path[0])
		snprintf(addr, sizeof(addr), "%s", a->path);
	else
		snprintf(addr, sizeof(addr), "%s:%u", a->host, a->port);
	pthread_mutex_lock(&l2->lock);
	for (uint32_t i = 0; i < l2->nnodes; i++)
		if (strcmp(l2->nodes[i].addr, addr) == 0)
			id = (int)i;
	if (id < 0 && l2->nnodes < KVR_L2_MAX_NODES) {
		id = (int)l2->nnodes++;
		strcpy(l2->nodes[id].addr, addr);
	}
	pthread_mutex_unlock(&l2->lock);
	return id;
}

/* A lane saw node @id go up (1) or down (2): errors counted, and the
 * transition logged once whichever lane sees it first. */
void kvr__l2_node_state(struct kvr_l2 *l2, int id, uint32_t state,
			const char *why)
{
	struct kvr_l2_node_pub *n = &l2->nodes[id];
	/* Relaxed exchange: it only decides who logs the transition. Both
	 * lanes may report the same change; the first one logs it. */
	uint32_t old =
	    atomic_exchange_explicit(&n->state, state, memory_order_relaxed);

	if (state == 2)
		atomic_fetch_add_explicit(&n->errors, 1, memory_order_relaxed);
	if (old == state)
		return;
	atomic_fetch_add_explicit(&l2->st.state_changes, 1,
				  memory_order_relaxed);
	if (state == 1)
		kvr_log_info("l2: node %s up", n->addr);
	else
		kvr_log_warn("l2: node %s down (%s): serving from L1 only for "
			     "its keys, retrying with backoff",
			     n->addr, why);
}

/* ---- done queue ---- */

/* A lane hands a finished job back: onto the done queue, and the loop's
 * eventfd rung so it drains the queue on its next pass. */
void kvr__l2_done(struct kvr_l2 *l2, struct kvr_l2_job *j)
{
	uint64_t one = 1;

	j->next = NULL;
	pthread_mutex_lock(&l2->lock);
	if (l2->done_tail)
		l2->done_tail->next = j;
	else
		l2->done_head = j;
	l2->done_tail = j;
	/* R-L2D: the job's results before the count; pairs with A-L2D in
	 * kvr_l2_poll (the mutex orders them too; the count lets the loop
	 * skip the lock on an idle pass). */
	atomic_fetch_add_explicit(&l2->done_n, 1, memory_order_release);
	pthread_mutex_unlock(&l2->lock);
	if (write(l2->efd, &one, sizeof(one)) < 0) {
		/* The counter overflowing is the only failure: the loop has
		 * a wake-up pending anyway. */
	}
}
