/* SPDX-License-Identifier: MIT */
/*
 * hugemem.h - the one memory hint of kvringd's storage engine: its largest
 * arrays (the objects, the key index's slots, the allocator's bitmap) are
 * read at random, one cache line per request, so with ten million objects
 * every access would miss the TLB as well as the caches on 4 KiB pages.
 * kvr_hugemem_advise() asks the kernel for transparent huge pages on the
 * page-aligned inside of such an array; it is a hint, and where the kernel
 * says no (THP off, not Linux, a sanitizer's allocator) the array works the
 * same on small pages. The memory itself still comes from malloc/realloc,
 * so the heap statistics keep counting it.
 */
#ifndef KVR_SERVER_HUGEMEM_H
#define KVR_SERVER_HUGEMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* Smaller arrays fit the TLB's reach on small pages: not worth a call. */
#define KVR_HUGEMEM_MIN ((size_t)4 << 20)

/*
 * kvr_hugemem_advise - ask for huge pages on [@p, @p + @bytes); call it
 * before the first touch of new memory (a fault then maps a huge page).
 * Never fails: the answer is ignored.
 */
static inline void kvr_hugemem_advise(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	const uintptr_t page = 4096;
	uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + bytes) & ~(page - 1);

	if (bytes >= KVR_HUGEMEM_MIN && hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
	(void)p;
	(void)bytes;
#endif
}

#endif /* KVR_SERVER_HUGEMEM_H */
