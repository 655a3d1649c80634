/* SPDX-License-Identifier: MIT */

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/sum.h>

#include "l2_lane.h"

/* One job: room for its commands first (a job that cannot get it fails
 * whole, nothing sent), a slot-map refresh before a cluster lane's first
 * job, then the job's kind. */
static void run_job(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	if (kvr__l2_reserve(ln, j->n) < 0) {
		for (uint32_t i = 0; i < j->n; i++)
			j->it[i].res = KVR_L2_RES_FAIL;
		return;
	}
	if (ln->l2->cfg.kind == KVR_L2_CLUSTER && !ln->refreshed_ns)
		ln->need_refresh = true;
	switch (j->kind) {
	case KVR_L2_JOB_PUT:
		kvr__l2_run_put(ln, j);
		break;
	case KVR_L2_JOB_PROBE:
		kvr__l2_run_probe(ln, j);
		break;
	case KVR_L2_JOB_LOAD:
		kvr__l2_run_load(ln, j);
		break;
	}
}

/* The lane's thread: take jobs in order, run each, hand it back on the
 * done queue; leave when told to stop (what is queued then is failed by
 * kvr__l2_lane_destroy). */
static void *lane_main(void *arg)
{
	struct kvr_l2_lane *ln = arg;
	struct kvr_l2_job *j;

	for (;;) {
		pthread_mutex_lock(&ln->lock);
		while (!ln->stop && !ln->head)
			pthread_cond_wait(&ln->cv, &ln->lock);
		if (ln->stop) {
			pthread_mutex_unlock(&ln->lock);
			return NULL;
		}
		j = ln->head;
		ln->head = j->next;
		if (!ln->head)
			ln->tail = NULL;
		pthread_mutex_unlock(&ln->lock);
		j->next = NULL;
		run_job(ln, j);
		kvr__l2_done(ln->l2, j);
	}
}

/*
 * Everything a lane allocates is made here, before its thread runs: the
 * scratch for 64 commands, a node per seed, the payload hasher, and a
 * random tag that keeps its temporary keys apart from every other
 * lane's and server's.
 */
int kvr__l2_lane_create(struct kvr_l2 *l2, unsigned idx,
			struct kvr_l2_lane **out)
{
	struct kvr_l2_lane *ln = calloc(1, sizeof(*ln));
	int rc;

	if (!ln)
		return -ENOMEM;
	ln->l2 = l2;
	ln->idx = idx;
	ln->pool = (uint8_t *)(uintptr_t)l2->pool;
	for (uint32_t s = 0; s < KVR_L2_SLOTS; s++)
		ln->slot_node[s] = -1;
	pthread_mutex_init(&ln->lock, NULL);
	pthread_cond_init(&ln->cv, NULL);
	ln->sum = kvr_sum_create();
	if (getrandom(&ln->tag, sizeof(ln->tag), GRND_NONBLOCK) !=
	    sizeof(ln->tag))
		ln->tag = kvr_clock_now_ns() ^ ((uint64_t)getpid() << 40) ^ idx;
	rc = ln->sum ? kvr__l2_reserve(ln, 64) : -ENOMEM;
	for (uint32_t i = 0; rc == 0 && i < l2->cfg.nseeds; i++)
		if (kvr__l2_lane_node(ln, &l2->cfg.seeds[i]) < 0)
			rc = -ENOMEM;
	if (rc == 0) {
		rc = -pthread_create(&ln->th, NULL, lane_main, ln);
		ln->started = rc == 0;
	}
	if (rc < 0) {
		kvr__l2_lane_destroy(ln);
		return rc;
	}
	*out = ln;
	return 0;
}

/* Append @j to the queue and wake the thread (the loop's side, never
 * blocking for long: the lock is held only around the links). */
void kvr__l2_lane_submit(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&ln->lock);
	if (ln->tail)
		ln->tail->next = j;
	else
		ln->head = j;
	ln->tail = j;
	pthread_cond_signal(&ln->cv);
	pthread_mutex_unlock(&ln->lock);
}

/* Stop and join the thread, fail and hand back every job it did not
 * start (their owners end on the loop), then free the lane. */
void kvr__l2_lane_destroy(struct kvr_l2_lane *ln)
{
	struct kvr_l2_job *j, *next;

	if (!ln)
		return;
	pthread_mutex_lock(&ln->lock);
	ln->stop = true;
	pthread_cond_signal(&ln->cv);
	pthread_mutex_unlock(&ln->lock);
	if (ln->started)
		pthread_join(ln->th, NULL);
	for (j = ln->head; j; j = next) {
		next = j->next;
		for (uint32_t i = 0; i < j->n; i++)
			j->it[i].res = KVR_L2_RES_FAIL;
		kvr__l2_done(ln->l2, j);
	}
	for (uint32_t i = 0; i < KVR_L2_MAX_NODES; i++) {
		if (i < ln->nnodes && ln->nodes[i].fd >= 0)
			close(ln->nodes[i].fd);
		free(ln->nodes[i].rb.b);
		free(ln->nodes[i].q);
	}
	pthread_mutex_destroy(&ln->lock);
	pthread_cond_destroy(&ln->cv);
	free(ln->cmds);
	free(ln->keys);
	free(ln->iov);
	kvr_sum_destroy(ln->sum);
	free(ln);
}
