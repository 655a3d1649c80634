/* SPDX-License-Identifier: MIT */
/*
 * The chunk checksum of <kvring/sum.h>. xxHash's plain entry points are
 * built for SSE2; Debian's libxxhash also has x86 dispatch entry points
 * that pick AVX2 or AVX-512 at run time and return the same values
 * (server/l2_fmt.c measured 6.6 against 10.8 GB/s on our VMs). A checksum
 * pass over every stored and retrieved chunk is what checksums cost, so
 * the faster one is used when the header is there, for the one-call sum
 * and the sum in pieces alike (kvringd's L2 lanes). Owns nothing else.
 */
#include <string.h>

/* The streaming state on our stack (kvr_sum64_copy): its layout is the
 * header's, which is the installed library's. */
#define XXH_STATIC_LINKING_ONLY 1
#include <xxhash.h>
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#define XXH_DISPATCH_DISABLE_REPLACE 1
#include <xxh_x86dispatch.h>
#define SUM64	     XXH3_64bits_dispatch
#define SUM64_UPDATE XXH3_64bits_update_dispatch
#endif
#endif
#ifndef SUM64
#define SUM64	     XXH3_64bits
#define SUM64_UPDATE XXH3_64bits_update
#endif

#include <kvring/sum.h>

uint64_t kvr_sum64(const void *p, size_t len)
{
	return SUM64(p, len);
}

/*
 * Copy and sum in pieces: each piece is hashed right after its memcpy,
 * while the bytes just written are still in this core's cache, so the
 * sum costs one more pass over the cache instead of one more pass over
 * memory (a 2 MiB or 32 MiB chunk does not stay in cache whole). The
 * streaming XXH3 gives exactly the one-shot value.
 */
uint64_t kvr_sum64_copy(void *dst, const void *src, size_t len)
{
	XXH3_state_t st;
	size_t off = 0;

	if (len <= KVR_SUM_PIECE) {
		memcpy(dst, src, len);
		return SUM64(dst, len);
	}
	(void)XXH3_64bits_reset(&st);
	while (off < len) {
		size_t n =
		    len - off < KVR_SUM_PIECE ? len - off : KVR_SUM_PIECE;

		memcpy((char *)dst + off, (const char *)src + off, n);
		(void)SUM64_UPDATE(&st, (const char *)dst + off, n);
		off += n;
	}
	return XXH3_64bits_digest(&st);
}

/* The state is xxHash's own, behind our name: callers never see it. */
struct kvr_sum_state *kvr_sum_create(void)
{
	return (struct kvr_sum_state *)XXH3_createState();
}

void kvr_sum_destroy(struct kvr_sum_state *st)
{
	if (st)
		XXH3_freeState((XXH3_state_t *)st);
}

void kvr_sum_reset(struct kvr_sum_state *st)
{
	(void)XXH3_64bits_reset((XXH3_state_t *)st);
}

void kvr_sum_update(struct kvr_sum_state *st, const void *p, size_t len)
{
	(void)SUM64_UPDATE((XXH3_state_t *)st, p, len);
}

uint64_t kvr_sum_digest(const struct kvr_sum_state *st)
{
	return XXH3_64bits_digest((const XXH3_state_t *)st);
}
