/* SPDX-License-Identifier: MIT */
/*
 * t_shm.h - test helper: a shared memory region that survives fork(), for
 * tests whose producer and consumer run in different processes. Setup
 * failures print the reason and abort (tests/ convention: a helper that
 * cannot set up is not a test result). Not for library code.
 */
#ifndef KVR_T_SHM_H
#define KVR_T_SHM_H

#include <stddef.h>

/*
 * t_shm_anon - map @bytes of zeroed MAP_SHARED|MAP_ANONYMOUS memory,
 * page-aligned; children forked afterwards share it. Aborts on failure.
 */
void *t_shm_anon(size_t bytes);

/*
 * t_shm_devshm - create a uniquely named /dev/shm object (0600), size it to
 * @bytes, map it shared and unlink the name at once (so nothing is left
 * behind if the test dies); children forked afterwards share the mapping.
 * Aborts on failure.
 */
void *t_shm_devshm(size_t bytes);

/* t_shm_unmap - unmap a region from either function above; NULL is fine. */
void t_shm_unmap(void *base, size_t bytes);

#endif /* KVR_T_SHM_H */
