/* SPDX-License-Identifier: MIT */
/*
 * Command-line value parsing shared by kvringd and the tools (see
 * <kvring/parse.h>). Owns nothing but the grammar of a size.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <kvring/parse.h>

int kvr_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	/* Accept "64K", "64KB" and "64KiB" alike: all binary multiples. */
	if (shift && (strcasecmp(end, "ib") == 0 || strcasecmp(end, "b") == 0))
		end += strlen(end);
	if (*end != '\0' || v == 0)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *kvr_format_size(uint64_t bytes, char *buf, size_t n)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	unsigned u = 0;
	uint64_t div = 1024;

	if (bytes < 1024) {
		snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
		return buf;
	}
	while (u + 1 < sizeof(unit) / sizeof(unit[0]) && bytes / div >= 1024) {
		div <<= 10;
		u++;
	}
	if (bytes % div == 0)
		snprintf(buf, n, "%llu %s", (unsigned long long)(bytes / div),
			 unit[u]);
	else
		snprintf(buf, n, "%.1f %s", (double)bytes / (double)div,
			 unit[u]);
	return buf;
}
