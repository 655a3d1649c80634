/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/sum.c: kvr_sum64() is XXH3_64bits with seed 0, whichever
 * entry point (plain or x86 dispatch) computes it, at sizes around XXH3's
 * internal boundaries, so a worker and a server built either way agree.
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
