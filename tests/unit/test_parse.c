/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/parse.c: the byte-size grammar every program shares.
 */
#include <errno.h>

#include <criterion/criterion.h>

#include <kvring/parse.h>

TestSuite(parse, .timeout = 10);

Test(parse, sizes_accept_binary_suffixes_when_valid)
{
	uint64_t v = 0;

	cr_expect_eq(kvr_parse_size("4096", &v), 0);
	cr_expect_eq(v, 4096);
	cr_expect_eq(kvr_parse_size("64K", &v), 0);
	cr_expect_eq(v, 64u << 10);
	cr_expect_eq(kvr_parse_size("512m", &v), 0);
	cr_expect_eq(v, 512ull << 20);
	cr_expect_eq(kvr_parse_size("3GiB", &v), 0);
	cr_expect_eq(v, 3ull << 30);
	cr_expect_eq(kvr_parse_size("2TB", &v), 0);
	cr_expect_eq(v, 2ull << 40);
}

Test(parse, sizes_are_rejected_when_malformed_or_overflowing)
{
	uint64_t v = 7;

	cr_expect_eq(kvr_parse_size("", &v), -EINVAL);
	cr_expect_eq(kvr_parse_size("0", &v), -EINVAL);
	cr_expect_eq(kvr_parse_size("-1G", &v), -EINVAL);
	cr_expect_eq(kvr_parse_size("12Q", &v), -EINVAL);
	cr_expect_eq(kvr_parse_size("1GX", &v), -EINVAL);
	cr_expect_eq(kvr_parse_size("99999999999T", &v), -EINVAL);
	cr_expect_eq(kvr_parse_size("18446744073709551616", &v),
		     -EINVAL);
	cr_expect_eq(v, 7, "output changed on failure");
}
