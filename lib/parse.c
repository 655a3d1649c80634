/* SPDX-License-Identifier: MIT */
/*
 * Command-line value parsing shared by kvringd and the tools (see
 * <kvring/parse.h>). Owns the one grammar of a number and of a size, and
 * the human form of a size in messages; no program keeps its own strtoul.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <kvring/parse.h>

/* The grammar itself: digits, an optional binary multiple, nothing else.
 * Return 0 and *out, or -EINVAL; no range check beyond 64 bits. */
static int parse_number(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	/* strtoull would skip blanks and take "-1" as 2^64-1: demand that
	 * the text start with a digit. */
	if (!s || *s < '0' || *s > '9')
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
	if (*end != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int kvr_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (parse_number(s, &v) < 0)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int kvr_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int rc = kvr_parse_u64(s, min, max, &v);

	if (rc < 0)
		return rc;
	*out = (uint32_t)v;
	return 0;
}

int kvr_parse_cpu(const char *s, int *out)
{
	uint32_t v;
	int rc;

	if (s && strcmp(s, "-1") == 0) {
		*out = -1;
		return 0;
	}
	rc = kvr_parse_u32(s, 0, 4095, &v);
	if (rc < 0)
		return rc;
	*out = (int)v;
	return 0;
}

int kvr_parse_size(const char *s, uint64_t *out)
{
	/* A size is a number that is not zero; -ERANGE (zero) stays
	 * -EINVAL, as this function always answered. */
	return kvr_parse_u64(s, 1, UINT64_MAX, out) < 0 ? -EINVAL : 0;
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
