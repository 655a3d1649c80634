/* SPDX-License-Identifier: MIT */
/*
 * disk_hash.c - the disk tier's hashing thread: the XXH3-64 of a payload
 * the tier writes without a sum from the worker, and of every payload it
 * reads back, computed off the event loop (a 2 MiB sum is tens of
 * microseconds the loop would otherwise take from every other worker).
 *
 * The loop hands an I/O slot over with kvr__disk_hash_push() and gets it
 * back from kvr__disk_hash_pop() once io->sum is set; the thread rings
 * the tier's eventfd, the one the io_uring's completions ring, so the loop
 * polls nothing new. Both queues hold I/O slot indexes and are sized by
 * the queue depth, so they can never overflow. The thread reads only the
 * payload bytes it was given (a pool slot the caller keeps pinned or
 * reserved until the I/O's kvr_disk_done) and writes only io->sum: the
 * index, the records and the I/O slots' other fields stay the loop's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvring/log.h>

#include "disk_int.h"

/* One job: the payload to sum, into d->io[io].sum. */
struct hjob {
	const void *p;
	uint64_t len;
	uint32_t io;
};

/*
 * struct kvr__disk_hash - the thread and its two queues, rings of qd
 * entries under one lock. Owned by the tier (d->hasher).
 */
struct kvr__disk_hash {
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool stop;
	uint32_t cap;
	struct hjob *job; /* to hash: [jhead, jhead + njob) */
	uint32_t jhead, njob;
	uint32_t *done; /* hashed I/O slots: [dhead, dhead + ndone) */
	uint32_t dhead, ndone;
	/* ndone, readable without the lock: the loop looks at every pass
	 * and takes the lock only when a slot is back. */
	_Atomic uint32_t ready;
};

/* Ring the loop's eventfd: it polls it through its own io_uring. */
static void ring_bell(int efd)
{
	uint64_t one = 1;

	/* EAGAIN only at a count near 2^64: the loop is woken anyway. */
	if (write(efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		kvr_log_debug("disk: hash: write eventfd: %s", strerror(errno));
}

/* Take jobs in order until told to stop with none left: kvr_disk_close()
 * waits for every I/O slot, so nothing queued is abandoned. */
static void *hash_main(void *arg)
{
	struct kvr_disk *d = arg;
	struct kvr__disk_hash *h = d->hasher;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		struct hjob j;

		while (!h->njob && !h->stop)
			pthread_cond_wait(&h->cv, &h->lock);
		if (!h->njob)
			break;
		j = h->job[h->jhead];
		h->jhead = (h->jhead + 1) % h->cap;
		h->njob--;
		pthread_mutex_unlock(&h->lock);
		d->io[j.io].sum = kvr_disk_sum(j.p, j.len);
		pthread_mutex_lock(&h->lock);
		h->done[(h->dhead + h->ndone) % h->cap] = j.io;
		h->ndone++;
		atomic_store_explicit(&h->ready, h->ndone,
				      memory_order_release);
		ring_bell(d->efd);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* Free what kvr__disk_hash_start() made; the thread is not running. */
static void hash_free(struct kvr__disk_hash *h)
{
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->lock);
	free(h->job);
	free(h->done);
	free(h);
}

int kvr__disk_hash_start(struct kvr_disk *d)
{
	struct kvr__disk_hash *h = calloc(1, sizeof(*h));
	int rc = -ENOMEM;

	if (!h)
		return rc;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cv, NULL);
	h->cap = d->qd;
	h->job = calloc(h->cap, sizeof(*h->job));
	h->done = calloc(h->cap, sizeof(*h->done));
	d->hasher = h;
	if (h->job && h->done)
		rc = -pthread_create(&h->tid, NULL, hash_main, d);
	if (rc < 0) {
		d->hasher = NULL;
		hash_free(h);
	}
	return rc;
}

/* Called once no I/O slot is out, so no job is left: the thread sees the
 * flag with an empty queue and returns. */
void kvr__disk_hash_stop(struct kvr_disk *d)
{
	struct kvr__disk_hash *h = d->hasher;

	if (h && pthread_mutex_lock(&h->lock) == 0) {
		h->stop = true;
		pthread_mutex_unlock(&h->lock);
		pthread_cond_broadcast(&h->cv);
		pthread_join(h->tid, NULL);
		d->hasher = NULL;
		hash_free(h);
	}
}

/* Never full: every job holds one of the qd I/O slots. */
void kvr__disk_hash_push(struct kvr_disk *d, struct io *io, const void *p,
			 uint64_t len)
{
	struct kvr__disk_hash *h = d->hasher;

	pthread_mutex_lock(&h->lock);
	h->job[(h->jhead + h->njob) % h->cap] =
	    (struct hjob){.p = p, .len = len, .io = (uint32_t)(io - d->io)};
	h->njob++;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->lock);
}

struct io *kvr__disk_hash_pop(struct kvr_disk *d)
{
	struct kvr__disk_hash *h = d->hasher;
	struct io *io = NULL;

	if (!kvr__disk_hash_ready(d))
		return NULL;
	pthread_mutex_lock(&h->lock);
	if (h->ndone) {
		io = &d->io[h->done[h->dhead]];
		h->dhead = (h->dhead + 1) % h->cap;
		h->ndone--;
		atomic_store_explicit(&h->ready, h->ndone,
				      memory_order_relaxed);
	}
	pthread_mutex_unlock(&h->lock);
	return io;
}

bool kvr__disk_hash_ready(const struct kvr_disk *d)
{
	const struct kvr__disk_hash *h = d->hasher;

	/* Acquire: pairs with the thread's release, so a slot seen here is
	 * seen with its sum (the lock in pop orders it again anyway). */
	return h && atomic_load_explicit(&h->ready, memory_order_acquire);
}
