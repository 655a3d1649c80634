/* SPDX-License-Identifier: MIT */
/*
 * t_shm.c - shared regions for fork()-based tests (see t_shm.h). Owns the
 * naming of test objects under /dev/shm ("/kvr-t-<pid>-<n>"); it does not
 * own any segment format. Every setup failure aborts with a message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MAP_ANONYMOUS, O_CLOEXEC under -std=c11 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "t_shm.h"

static _Atomic unsigned t_shm_seq;

static void t_shm_die(const char *what, int err)
{
	fprintf(stderr, "t_shm: %s: %s\n", what, strerror(err));
	abort();
}

void *t_shm_anon(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		t_shm_die("mmap anonymous shared", errno);
	return p;
}

void *t_shm_devshm(size_t bytes)
{
	char name[64];
	void *p;
	int fd, err;

	snprintf(name, sizeof(name), "/kvr-t-%ld-%u", (long)getpid(),
		 atomic_fetch_add(&t_shm_seq, 1));
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		t_shm_die("shm_open", errno);
	/* The mapping keeps the object alive; the name is not needed. */
	shm_unlink(name);
	if (ftruncate(fd, (off_t)bytes) < 0) {
		err = errno;
		close(fd);
		t_shm_die("ftruncate", err);
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (p == MAP_FAILED)
		t_shm_die("mmap /dev/shm", err);
	return p;
}

void t_shm_unmap(void *base, size_t bytes)
{
	if (base)
		munmap(base, bytes);
}
