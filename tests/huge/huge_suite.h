/* SPDX-License-Identifier: MIT */
/*
 * huge_suite.h - what the huge-page suites (test_huge.c, test_huge_disk.c)
 * share: the private hugetlbfs mount that kvr-huge-run (huge_run.c)
 * prepared for them, or a skip that says why there is none.
 */
#ifndef KVR_HUGE_SUITE_H
#define KVR_HUGE_SUITE_H

#include <stdlib.h>

#include <criterion/criterion.h>

/* The runner's mount (KVR_TEST_HUGE_DIR), or skip the test with the
 * runner's reason (KVR_TEST_HUGE_SKIP) or because it was not run through
 * kvr-huge-run at all. */
static inline const char *huge_mount_or_skip(void)
{
	const char *why = getenv("KVR_TEST_HUGE_SKIP");
	const char *dir = getenv("KVR_TEST_HUGE_DIR");

	if (why && *why)
		cr_skip_test("huge pages unavailable: %s", why);
	if (!dir || !*dir)
		cr_skip_test("not run through kvr-huge-run "
			     "(KVR_TEST_HUGE_DIR unset)");
	return dir;
}

#endif
