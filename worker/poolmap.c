/* SPDX-License-Identifier: MIT */
/*
 * poolmap.c - one mapping of a pool per process. Every client of a
 * process that kvringd hands the same pool file (same device and inode,
 * same length) uses the one mapping the first of them made, so that a
 * second kvr_connect maps nothing and pre-faults nothing: the pages are
 * this process's already (DESIGN: "No page faults in the steady state"),
 * and a device registration of the mapping (cudaHostRegister, made once
 * per process by the Python layer) covers every client's slots.
 *
 * A process-wide list of mappings, each with a count of the clients using
 * it, under one mutex (connect and close only: nothing on a request's
 * path). A client keeps a copy of its mapping's struct kvr_seg in c->pool
 * for the fast paths; the list entry owns the mapping and unmaps it when
 * the last client lets go. A forked child never shares a mapping its
 * parent made (it connects anew and maps anew; closing a client inherited
 * from the parent only drops the child's copy of it), and the mutex is
 * taken around fork() so that a child never inherits it locked.
 * This file does not pre-fault (touch.c does) nor decide which transport
 * maps a pool (conn.c does).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"

/* One pool mapping and the clients of this process that use it. Owned by
 * the list; freed when refs drops to 0. */
struct poolmap {
	dev_t dev;
	ino_t ino;
	size_t bytes;
	pid_t pid;     /* the process that mapped it */
	unsigned refs; /* clients using it */
	struct kvr_seg seg;
	struct poolmap *next;
};

static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct poolmap *maps; /* under maps_lock */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void before_fork(void)
{
	pthread_mutex_lock(&maps_lock);
}

static void after_fork(void)
{
	pthread_mutex_unlock(&maps_lock);
}

static void register_atfork(void)
{
	(void)pthread_atfork(before_fork, after_fork, after_fork);
}

/* The live mapping of (dev, ino, bytes) made by this process, or NULL.
 * Under maps_lock. */
static struct poolmap *find(dev_t dev, ino_t ino, size_t bytes, pid_t pid)
{
	for (struct poolmap *m = maps; m; m = m->next)
		if (m->dev == dev && m->ino == ino && m->bytes == bytes &&
		    m->pid == pid)
			return m;
	return NULL;
}

int kvr__poolmap_attach(struct kvr_client *c, int fd, size_t bytes,
			bool *shared, struct kvr_err *e)
{
	pid_t pid = getpid();
	struct poolmap *m;
	struct stat st;
	int rc;

	(void)pthread_once(&atfork_once, register_atfork);
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	pthread_mutex_lock(&maps_lock);
	m = find(st.st_dev, st.st_ino, bytes, pid);
	if (m) {
		/* The same file of the same length: the same memory. */
		m->refs++;
		c->pool = m->seg;
		pthread_mutex_unlock(&maps_lock);
		close(fd);
		*shared = true;
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&maps_lock);
		close(fd);
		return -ENOMEM;
	}
	/* Takes fd, closed on success and failure alike. */
	rc = kvr_seg_attach_fd(fd, bytes, PROT_READ | PROT_WRITE, &m->seg, e);
	if (rc < 0) {
		pthread_mutex_unlock(&maps_lock);
		free(m);
		return rc;
	}
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->bytes = bytes;
	m->pid = pid;
	m->refs = 1;
	m->next = maps;
	maps = m;
	c->pool = m->seg;
	pthread_mutex_unlock(&maps_lock);
	*shared = false;
	return 0;
}

void kvr__poolmap_detach(struct kvr_client *c)
{
	struct poolmap **pp, *m = NULL;
	bool listed = false;

	if (!c->pool.base)
		return;
	pthread_mutex_lock(&maps_lock);
	for (pp = &maps; *pp; pp = &(*pp)->next)
		if ((*pp)->seg.base == c->pool.base) {
			m = *pp;
			listed = true;
			break;
		}
	if (m && --m->refs == 0)
		*pp = m->next;
	else
		m = NULL; /* still used by another client */
	pthread_mutex_unlock(&maps_lock);
	if (m) {
		kvr_seg_detach(&m->seg);
		free(m);
	} else if (!listed) {
		/* Not from the list (cannot happen): unmap it as before. */
		kvr_seg_detach(&c->pool);
	}
	/* This client's copy: forget it (the list owned the mapping). */
	c->pool = (struct kvr_seg){.fd = -1, .live_fd = -1};
}
