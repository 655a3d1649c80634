/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/parse.c: the number and byte-size grammar every program
 * shares.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

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
	cr_expect_eq(kvr_parse_size("18446744073709551616", &v), -EINVAL);
	cr_expect_eq(v, 7, "output changed on failure");
}

Test(parse, formats_sizes_in_human_units_when_reporting)
{
	char b[KVR_SIZE_STR_MAX];

	cr_expect_str_eq(kvr_format_size(0, b, sizeof(b)), "0 bytes");
	cr_expect_str_eq(kvr_format_size(1023, b, sizeof(b)), "1023 bytes");
	cr_expect_str_eq(kvr_format_size(1024, b, sizeof(b)), "1 KiB");
	cr_expect_str_eq(kvr_format_size(64ull << 30, b, sizeof(b)), "64 GiB");
	cr_expect_str_eq(kvr_format_size(3ull << 29, b, sizeof(b)), "1.5 GiB");
	cr_expect_str_eq(kvr_format_size(52428800, b, sizeof(b)), "50 MiB");
	cr_expect_str_eq(kvr_format_size(UINT64_MAX, b, sizeof(b)),
			 "16384.0 PiB");
}

Test(parse, reads_back_what_it_formats_when_exact)
{
	const uint64_t v[] = {1024, 4096, 64ull << 20, 1ull << 30, 2ull << 40};
	char b[KVR_SIZE_STR_MAX], t[KVR_SIZE_STR_MAX];
	uint64_t got;

	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *sp;

		kvr_format_size(v[i], b, sizeof(b));
		/* "64 MiB" -> "64MiB": the option grammar has no space. */
		snprintf(t, sizeof(t), "%s", b);
		sp = strchr(t, ' ');
		cr_assert(sp);
		memmove(sp, sp + 1, strlen(sp));
		cr_expect_eq(kvr_parse_size(t, &got), 0, "%s", t);
		cr_expect_eq(got, v[i], "%s", t);
	}
}

/* The bench used base 0 (the issue): "010M" was octal 8 MiB there. */
Test(parse, sizes_are_decimal_when_they_have_a_leading_zero)
{
	uint64_t v = 0;

	cr_expect_eq(kvr_parse_size("010M", &v), 0);
	cr_expect_eq(v, 10ull << 20);
	cr_expect_eq(kvr_parse_size("1GiB", &v), 0);
	cr_expect_eq(v, 1ull << 30);
	cr_expect_eq(kvr_parse_size("0x10", &v), -EINVAL);
}

/* ===== Numbers: the same grammar, a range instead of "not zero" ===== */

Test(parse, numbers_take_the_size_grammar_when_in_range)
{
	uint64_t v = 0;
	uint32_t w = 0;

	cr_expect_eq(kvr_parse_u64("0", 0, 10, &v), 0, "0 is a number");
	cr_expect_eq(v, 0);
	cr_expect_eq(kvr_parse_u64("250", 1, 1000, &v), 0);
	cr_expect_eq(v, 250);
	cr_expect_eq(kvr_parse_u64("10K", 1, UINT64_MAX, &v), 0);
	cr_expect_eq(v, 10240, "K is binary for counts too");
	cr_expect_eq(kvr_parse_u64("007", 0, 10, &v), 0);
	cr_expect_eq(v, 7, "a leading zero is decimal, not octal");
	cr_expect_eq(kvr_parse_u64("18446744073709551615", 0, UINT64_MAX, &v),
		     0);
	cr_expect_eq(v, UINT64_MAX);
	cr_expect_eq(kvr_parse_u32("4294967295", 0, UINT32_MAX, &w), 0);
	cr_expect_eq(w, UINT32_MAX);
}

Test(parse, numbers_name_range_apart_from_garbage_when_refused)
{
	uint64_t v = 7;
	uint32_t w = 9;

	cr_expect_eq(kvr_parse_u64("11", 1, 10, &v), -ERANGE);
	cr_expect_eq(kvr_parse_u64("0", 1, 10, &v), -ERANGE);
	cr_expect_eq(kvr_parse_u32("4294967296", 0, UINT32_MAX, &w), -ERANGE);
	cr_expect_eq(kvr_parse_u64("-1", 0, UINT64_MAX, &v), -EINVAL,
		     "strtoull would wrap -1");
	cr_expect_eq(kvr_parse_u64("+1", 0, 10, &v), -EINVAL);
	cr_expect_eq(kvr_parse_u64(" 1", 0, 10, &v), -EINVAL, "a blank");
	cr_expect_eq(kvr_parse_u64("1 ", 0, 10, &v), -EINVAL, "a blank");
	cr_expect_eq(kvr_parse_u64("0x1", 0, 10, &v), -EINVAL, "a base");
	cr_expect_eq(kvr_parse_u64("", 0, 10, &v), -EINVAL);
	cr_expect_eq(kvr_parse_u64(NULL, 0, 10, &v), -EINVAL);
	cr_expect_eq(kvr_parse_u64("1.5", 0, 10, &v), -EINVAL);
	cr_expect_eq(kvr_parse_u64("18446744073709551616", 0, UINT64_MAX, &v),
		     -EINVAL, "more than 64 bits");
	cr_expect_eq(v, 7, "output changed on failure");
	cr_expect_eq(w, 9, "output changed on failure");
}

Test(parse, cpu_is_minus_one_or_a_number_when_valid)
{
	int c = 5;

	cr_expect_eq(kvr_parse_cpu("-1", &c), 0);
	cr_expect_eq(c, -1);
	cr_expect_eq(kvr_parse_cpu("3", &c), 0);
	cr_expect_eq(c, 3);
	cr_expect_eq(kvr_parse_cpu("4096", &c), -ERANGE);
	cr_expect_eq(kvr_parse_cpu("-2", &c), -EINVAL);
	cr_expect_eq(kvr_parse_cpu("x", &c), -EINVAL);
	cr_expect_eq(c, 3, "output changed on failure");
}

Test(parse, sizes_refuse_a_blank_when_leading)
{
	uint64_t v = 7;

	cr_expect_eq(kvr_parse_size(" 4K", &v), -EINVAL);
	cr_expect_eq(kvr_parse_size("+4K", &v), -EINVAL);
	cr_expect_eq(v, 7, "output changed on failure");
}
