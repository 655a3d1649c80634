/* SPDX-License-Identifier: MIT */
/*
 * <kvring/sum.h> - the XXH3-64 of a chunk's bytes, as per-chunk checksums
 * use it (docs/reliability.md, "Checksums"): libkvring sums each slot at
 * commit and checks retrieves, kvringd re-checks a reported slot. One
 * function, so both sides compute the same value the same fast way.
 */
#ifndef KVRING_SUM_H
#define KVRING_SUM_H

#include <stddef.h>
#include <stdint.h>

/*
 * kvr_sum64 - XXH3_64bits(p, len) with seed 0: the same value on every
 * machine, computed with xxHash's x86 dispatch (AVX2/AVX-512 where the
 * CPU has them) when the library provides it. Never fails; len 0 is fine.
 */
uint64_t kvr_sum64(const void *p, size_t len);

/* kvr_sum64_copy works in pieces of this many bytes: small enough to stay
 * in a core's L2 between the copy and the hash of a piece. */
#define KVR_SUM_PIECE (128u << 10)

/*
 * kvr_sum64_copy - memcpy(dst, src, len) and return kvr_sum64(dst, len),
 * hashing each KVR_SUM_PIECE piece right after copying it, while it is
 * in cache (one pass over memory instead of two). The ranges must not
 * overlap. Never fails.
 */
uint64_t kvr_sum64_copy(void *dst, const void *src, size_t len);

/*
 * The same sum fed in pieces, for bytes hashed while they are sent or as
 * they land (kvringd's L2 lanes: each piece is hashed while it is still
 * in cache): reset, update any number of times, digest. The digest equals
 * kvr_sum64() of the pieces concatenated, through the same dispatch.
 * kvr_sum_create returns NULL when out of memory; destroy is NULL-safe.
 * One state per thread (it is not shared).
 */
struct kvr_sum_state;
struct kvr_sum_state *kvr_sum_create(void);
void kvr_sum_destroy(struct kvr_sum_state *st);
void kvr_sum_reset(struct kvr_sum_state *st);
void kvr_sum_update(struct kvr_sum_state *st, const void *p, size_t len);
uint64_t kvr_sum_digest(const struct kvr_sum_state *st);

#endif /* KVRING_SUM_H */
