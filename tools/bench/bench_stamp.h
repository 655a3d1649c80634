/* SPDX-License-Identifier: MIT */
/*
 * bench_stamp.h - chunk stamps shared by the scenarios that move chunks
 * (bench_xfer*.c) and the peers that echo them (bench_peers.c).
 */
#ifndef KVR_BENCH_STAMP_H
#define KVR_BENCH_STAMP_H

#include <stdint.h>

#include <kvring/kvring.h>

/* bench_stamp - key.lo into the first word of the chunk, key.hi into the
 * last (chunks are >= 16 bytes). */
void bench_stamp(void *chunk, uint64_t bytes, struct kvr_key key);

/*
 * bench_check - the stamps of @chunk match @key and, with @src non-NULL,
 * every byte between them matches @src. Return 0 or -EBADMSG (the first
 * difference printed on stderr, prefixed by @what).
 */
int bench_check(const void *chunk, uint64_t bytes, struct kvr_key key,
		const void *src, const char *what);

#endif /* KVR_BENCH_STAMP_H */
