/* SPDX-License-Identifier: MIT */
/*
 * The chunk checksum of <kvring/sum.h>. xxHash's plain entry points are
 * built for SSE2; Debian's libxxhash also has x86 dispatch entry points
 * that pick AVX2 or AVX-512 at run time and return the same values
 * (server/l2_fmt.c measured 6.6 against 10.8 GB/s on our VMs). A checksum
 * pass over every stored and retrieved chunk is what checksums cost, so
 * the faster one is used when the header is there. Owns nothing else.
 */
#include <xxhash.h>
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#define XXH_DISPATCH_DISABLE_REPLACE 1
#include <xxh_x86dispatch.h>
#define SUM64 XXH3_64bits_dispatch
#endif
#endif
#ifndef SUM64
#define SUM64 XXH3_64bits
#endif

#include <kvring/sum.h>

uint64_t kvr_sum64(const void *p, size_t len)
{
	return SUM64(p, len);
}
