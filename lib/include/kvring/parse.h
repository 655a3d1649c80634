/* SPDX-License-Identifier: MIT */
/*
 * Parsing of command-line values shared by kvringd and the tools, so that
 * "--pool-size 1G" means the same bytes to every program. Owns no state and
 * prints nothing; callers word their own usage errors.
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
