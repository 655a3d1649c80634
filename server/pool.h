/* SPDX-License-Identifier: MIT */
/*
 * pool.h - the pool's placement (pool.c): its backend and its pre-fault,
 * at start-up. Event-loop thread only, before the loop runs.
 */
#ifndef KVR_SERVER_POOL_H
#define KVR_SERVER_POOL_H

#include <stddef.h>

#include "kvringd.h"

/*
 * kvr__pool_create - the pool: huge pages first (unless --huge-pages off
 * or a private pool), then the configured backend, or shm -> memfd ->
 * private; pre-faulted unless --no-prefault. Logs the transport in use.
 * Return: 0 (s->pool, s->backend set), or -errno after logging why.
 */
int kvr__pool_create(struct kvr_srv *s);

/* kvr__pool_huge_dir - the hugetlbfs mount for named huge-page pools:
 * --huge-dir, else the first one found, else "" (none). */
const char *kvr__pool_huge_dir(const struct kvr_srv *s, char *buf, size_t n);

#endif /* KVR_SERVER_POOL_H */
