/* SPDX-License-Identifier: MIT */
/*
 * bench_stamp.c - chunk stamps: every chunk a bench stores is one source
 * pattern stamped with its key (first and last word), so a retrieve can
 * check cheaply that it got the chunk it asked for, and byte for byte
 * when it must.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench_stamp.h"

void bench_stamp(void *chunk, uint64_t bytes, struct kvr_key key)
{
	memcpy(chunk, &key.lo, 8);
	memcpy((unsigned char *)chunk + bytes - 8, &key.hi, 8);
}

int bench_check(const void *chunk, uint64_t bytes, struct kvr_key key,
		const void *src, const char *what)
{
	const unsigned char *c = chunk, *s = src;
	uint64_t lo, hi;

	memcpy(&lo, c, 8);
	memcpy(&hi, c + bytes - 8, 8);
	if (lo != key.lo || hi != key.hi) {
		fprintf(stderr,
			"kvring-bench: %s: chunk stamp %016" PRIx64
			"/%016" PRIx64 ", expected %016" PRIx64 "/%016" PRIx64
			"\n",
			what, lo, hi, key.lo, key.hi);
		return -EBADMSG;
	}
	if (s && memcmp(c + 8, s + 8, bytes - 16) != 0) {
		for (uint64_t i = 8; i < bytes - 8; i++) {
			if (c[i] != s[i]) {
				fprintf(stderr,
					"kvring-bench: %s: byte %" PRIu64
					" is %#x, expected %#x\n",
					what, i, c[i], s[i]);
				break;
			}
		}
		return -EBADMSG;
	}
	return 0;
}

/* ---- helpers ---------------------------------------------------------- */
