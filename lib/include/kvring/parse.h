/* SPDX-License-Identifier: MIT */
/*
 * Parsing of command-line values shared by kvringd and the tools, so that
 * "--pool-size 1G" means the same bytes to every program. Owns no state and
 * prints nothing; callers word their own usage errors.
 */
#ifndef KVRING_PARSE_H
#define KVRING_PARSE_H

#include <stdint.h>

/*
 * kvr_parse_size - parse a byte size: "123", "64K", "512M", "1G", "2T"
 * (binary multiples, case-insensitive, optional trailing "B" or "iB").
 * Return: 0 and *out set, or -EINVAL for garbage, a sign, zero or an
 * overflow (then *out is untouched).
 */
int kvr_parse_size(const char *s, uint64_t *out);

#endif /* KVRING_PARSE_H */
