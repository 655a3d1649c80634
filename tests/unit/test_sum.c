/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/sum_xxh3.c: kvr_sum64() is XXH3_64bits with seed 0, whichever
 * entry point (plain or x86 dispatch) computes it, at sizes around XXH3's
 * internal boundaries, so a worker and a server built either way agree;
 * and the sum in pieces (kvr_sum_update, kvringd's L2 lanes) equals it.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <criterion/criterion.h>

#include <kvring/sum.h>

TestSuite(sum, .timeout = 10);

Test(sum, equals_xxh3_64_when_sizes_cross_its_boundaries)
{
	static const size_t sizes[] = {0,    1,	   3,	  4,	 8,	  16,
				       17,   128,  129,	  240,	 241,	  1024,
				       1025, 4095, 65536, 65537, 1u << 21};
	unsigned char *b = malloc(1u << 21);

	cr_assert(b);
	for (size_t i = 0; i < (1u << 21); i++)
		b[i] = (unsigned char)(i * 2654435761u >> 13);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		cr_expect_eq(kvr_sum64(b, sizes[i]), XXH3_64bits(b, sizes[i]),
			     "%zu bytes", sizes[i]);
	/* One byte changed in the middle changes the sum. */
	{
		uint64_t before = kvr_sum64(b, 1u << 21);

		b[(1u << 20) + 3] ^= 1;
		cr_expect_neq(kvr_sum64(b, 1u << 21), before);
	}
	free(b);
}

Test(sum, copy_gives_the_bytes_and_their_sum_when_sizes_cross_its_pieces)
{
	static const size_t sizes[] = {0,
				       1,
				       241,
				       KVR_SUM_PIECE - 1,
				       KVR_SUM_PIECE,
				       KVR_SUM_PIECE + 1,
				       2 * KVR_SUM_PIECE + 7,
				       (1u << 21) + 64};
	size_t max = (1u << 21) + 128;
	unsigned char *src = malloc(max), *dst = malloc(max);

	cr_assert(src && dst);
	for (size_t i = 0; i < max; i++)
		src[i] = (unsigned char)(i * 2654435761u >> 11);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		memset(dst, 0x5a, max);
		cr_expect_eq(kvr_sum64_copy(dst, src, n), XXH3_64bits(src, n),
			     "%zu bytes", n);
		cr_expect_eq(memcmp(dst, src, n), 0, "%zu bytes copied", n);
		cr_expect_eq(dst[n], 0x5a, "%zu bytes: one written too many",
			     n);
	}
	free(src);
	free(dst);
}

Test(sum, in_pieces_equals_one_call_when_pieces_cross_its_boundaries)
{
	/* Sizes around XXH3's 240-byte short path, 1 KiB stripe block and
	 * 256-byte streaming buffer, and a few MiB; pieces as small as a
	 * byte and as large as the lanes' 256 KiB. */
	static const size_t sizes[] = {
	    0,	  1,	17,    240,	 241,		1023,
	    1024, 1025, 65537, 1u << 20, (3u << 20) + 7};
	static const size_t pieces[] = {1, 63, 256, 4096, 262144};
	size_t max = (3u << 20) + 7;
	unsigned char *b = malloc(max);
	struct kvr_sum_state *st = kvr_sum_create();

	cr_assert(b && st);
	for (size_t i = 0; i < max; i++)
		b[i] = (unsigned char)(i * 7u + (i >> 11));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (size_t p = 0; p < sizeof(pieces) / sizeof(pieces[0]);
		     p++) {
			size_t n = sizes[i], step = pieces[p];

			if (n > (1u << 16) && step < 4096)
				continue; /* byte-sized pieces of MiB: slow */
			kvr_sum_reset(st);
			for (size_t at = 0; at < n; at += step)
				kvr_sum_update(st, b + at,
					       n - at < step ? n - at : step);
			cr_expect_eq(kvr_sum_digest(st), XXH3_64bits(b, n),
				     "%zu bytes in pieces of %zu", n, step);
		}
	kvr_sum_destroy(st);
	kvr_sum_destroy(NULL);
	free(b);
}
