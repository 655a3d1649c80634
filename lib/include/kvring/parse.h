/* SPDX-License-Identifier: MIT */
/*
 * Parsing of command-line values shared by kvringd and the tools, so that
 * "--pool-size 1G" means the same bytes, and "--iters 10K" the same count,
 * to every program. One grammar (docs/config.md, "Numbers and sizes"):
 * decimal digits, then optionally a binary multiple K, M, G or T (any
 * case, optionally followed by B or iB); no sign, no blank, no base
 * prefix, no overflow. A size is such a number that is not zero. Owns no
 * state and prints nothing; callers word their own usage errors.
 */
#ifndef KVRING_PARSE_H
#define KVRING_PARSE_H

#include <stddef.h>
#include <stdint.h>

/*
 * kvr_parse_size - parse a byte size: "123", "64K", "512M", "1G", "2T"
 * (binary multiples, case-insensitive, optional trailing "B" or "iB").
 * Return: 0 and *out set, or -EINVAL for garbage, a sign, zero or an
 * overflow (then *out is untouched).
 */
int kvr_parse_size(const char *s, uint64_t *out);

/*
 * kvr_parse_u64 - parse a number in the shared grammar ("250", "10K") and
 * check it lies in [@min, @max].
 * Return: 0 and *out set, or
 *   -EINVAL  not a number in the grammar (garbage, a sign, a blank, an
 *            unknown suffix, more than 64 bits)
 *   -ERANGE  a number, but below @min or above @max
 * On error *out is untouched.
 */
int kvr_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* kvr_parse_u64 for a 32-bit value; @max above UINT32_MAX is clamped. */
int kvr_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);

/*
 * kvr_parse_cpu - a CPU to pin to: a number in [0, 4095] in the shared
 * grammar, or "-1" for "do not pin" (the tools' default).
 * Return: 0 and *out set, -EINVAL, or -ERANGE; on error *out is untouched.
 */
int kvr_parse_cpu(const char *s, int *out);

/* Bytes of the longest kvr_format_size() text, NUL included. */
#define KVR_SIZE_STR_MAX 32

/*
 * kvr_format_size - @bytes in human units for messages, in the grammar
 * kvr_parse_size() reads back where it is exact: "64 GiB", "512 KiB",
 * "1.5 GiB" (one decimal when not a whole multiple), "4000 bytes" below
 * 1 KiB... Binary multiples, like every size kvring takes.
 * Return: @buf (NUL-terminated, cut to @n).
 */
const char *kvr_format_size(uint64_t bytes, char *buf, size_t n);

#endif /* KVRING_PARSE_H */
