/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for lib/error.c: kvr's wording of each project-wide code
 * (docs/errors.md), the fallback for other codes, thread safety of the
 * fallback buffer, the kvr_err detail buffer, and kvr_assert().
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/error.h>

TestSuite(error, .timeout = 10);

Test(error, strerror_uses_kvr_wording_when_code_is_kvr_code)
{
	static const struct {
		int rc;
		const char *want;
	} t[] = {
	    {-ENOSPC, "chunk pool is full"},
	    {-ERANGE, "offset/length outside the pool"},
	    {-EBADMSG, "malformed record"},
	    {-EPROTO, "version or layout mismatch"},
	    {-EOWNERDEAD, "peer process is gone"},
	    {-ESHUTDOWN, "server is shutting down"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		cr_expect_str_eq(kvr_strerror(t[i].rc), t[i].want,
				 "code %d: got \"%s\"", t[i].rc,
				 kvr_strerror(t[i].rc));
}

Test(error, strerror_differs_from_libc_when_code_is_in_table)
{
	static const int codes[] = {
	    EAGAIN, EINVAL,	ENOMEM,	   ENOSPC,     ERANGE,	  EBADMSG,
	    EPROTO, EOWNERDEAD, ETIMEDOUT, ECONNRESET, ESHUTDOWN, EEXIST,
	    ENOENT, EMSGSIZE,	EPERM,	   EACCES,     EBUSY,
	};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = kvr_strerror(-codes[i]);

		cr_assert_not_null(s);
		cr_expect_gt(strlen(s), 0u, "code %d has empty text", codes[i]);
		/* A table entry has kvr's own words, not libc's. */
		cr_expect_str_neq(s, strerrordesc_np(codes[i]),
				  "code %d falls back to libc", codes[i]);
	}
}

Test(error, strerror_accepts_positive_code_when_given_errno)
{
	cr_expect_str_eq(kvr_strerror(ENOSPC), kvr_strerror(-ENOSPC));
	cr_expect_str_eq(kvr_strerror(0), "success");
}

Test(error, strerror_falls_back_to_libc_when_code_not_in_table)
{
	cr_expect_str_eq(kvr_strerror(-ENOTTY), strerrordesc_np(ENOTTY));
}

Test(error, strerror_names_code_when_code_unknown)
{
	cr_expect_str_eq(kvr_strerror(-99999), "unknown error -99999");
	cr_expect_str_eq(kvr_strerror(-2147483647 - 1),
			 "unknown error -2147483648");
}

struct unk_arg {
	int code;
	int bad;
};

static void *unknown_loop(void *p)
{
	struct unk_arg *a = p;
	char want[48];

	snprintf(want, sizeof(want), "unknown error %d", a->code);
	for (int i = 0; i < 20000; i++)
		if (strcmp(kvr_strerror(a->code), want) != 0)
			a->bad++;
	return NULL;
}

Test(error, strerror_keeps_text_per_thread_when_threads_race)
{
	struct unk_arg a[2] = {{-90001, 0}, {-90002, 0}};
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, unknown_loop, &a[i]),
			     0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_expect_eq(a[0].bad, 0, "thread 0 saw %d foreign texts", a[0].bad);
	cr_expect_eq(a[1].bad, 0, "thread 1 saw %d foreign texts", a[1].bad);
}

Test(error, err_set_formats_message_when_buffer_given)
{
	struct kvr_err e;
	int rc;

	kvr_err_clear(&e);
	errno = EINTR;
	rc = kvr_err_set(&e, -ENOSPC, "create %s: needs %d bytes", "x", 42);
	cr_expect_eq(rc, -ENOSPC);
	cr_expect_eq(e.code, -ENOSPC);
	cr_expect_str_eq(e.msg, "create x: needs 42 bytes");
	cr_expect_eq(errno, EINTR, "errno changed to %d", errno);
	cr_expect_str_eq(kvr_err_str(&e, -ENOSPC), e.msg);
	/* A different code than the recorded one gets the generic text. */
	cr_expect_str_eq(kvr_err_str(&e, -EINVAL), kvr_strerror(-EINVAL));
	cr_expect_str_eq(kvr_err_str(NULL, -EPROTO), kvr_strerror(-EPROTO));
}

Test(error, err_set_returns_code_when_buffer_null)
{
	cr_expect_eq(kvr_err_set(NULL, -EPROTO, "abi %d.%d", 3, 1), -EPROTO);
	kvr_err_clear(NULL); /* must not crash */
}

Test(error, err_set_cuts_with_ellipsis_when_message_too_long)
{
	char big[600];
	struct kvr_err e;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	kvr_err_set(&e, -EINVAL, "x%s", big);
	cr_expect_eq(strlen(e.msg), KVR_ERR_MSG_MAX - 1, "len %zu",
		     strlen(e.msg));
	cr_expect_str_eq(e.msg + KVR_ERR_MSG_MAX - 4, "...");
	cr_expect_eq(e.msg[0], 'x');
}

Test(error, err_set_keeps_message_whole_when_it_just_fits)
{
	char fit[KVR_ERR_MSG_MAX];
	struct kvr_err e;

	memset(fit, 'b', sizeof(fit) - 1);
	fit[sizeof(fit) - 1] = '\0';
	kvr_err_set(&e, -EINVAL, "%s", fit);
	cr_expect_str_eq(e.msg, fit);
}

Test(error, assert_aborts_when_invariant_broken, .signal = SIGABRT)
{
	int two = 2;

	/* stderr gets one line; Criterion only checks the signal. */
	kvr_assert(two == 3);
}

Test(error, assert_passes_when_invariant_holds)
{
	int two = 2;

	kvr_assert(two == 2);
	cr_expect_eq(two, 2);
}
