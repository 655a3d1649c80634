/* SPDX-License-Identifier: MIT */
/*
 * A small stand-in for <criterion/criterion.h>, used ONLY in the
 * ThreadSanitizer build (-DKVR_SANITIZE=thread). Criterion 2.4's BoxFort
 * arena cannot be mapped inside TSan's address-space layout (the test
 * binary aborts with "Could not initialize inheritable arena", upstream
 * Criterion issue #274), so the TSan build compiles the concurrent test
 * files against this header instead. It supports the subset of Criterion
 * our tests use: Test(), TestSuite() with .init/.fini/.timeout, cr_assert*
 * / cr_expect* comparisons, cr_skip. Each test runs in its own forked child
 * with an alarm for its timeout; a skipped test is reported as skipped,
 * never as passed. The closing line is "N passed, N failed, N skipped".
 */
#ifndef KVR_TSAN_CRITERION_SHIM_H
#define KVR_TSAN_CRITERION_SHIM_H

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct criterion_test_extra_data {
	void (*init)(void);
	void (*fini)(void);
	double timeout;
	int exit_code;
	int signal;
	bool disabled;
};

struct t_shim_suite {
	const char *name;
	struct criterion_test_extra_data d;
};

struct t_shim_test {
	const struct t_shim_suite *suite;
	const char *name;
	void (*fn)(void);
	struct criterion_test_extra_data d;
};

#define T_SHIM_MAX	 512
#define T_SHIM_SKIP_EXIT 77

static struct t_shim_test t_shim_tests[T_SHIM_MAX];
static int t_shim_nr;
static int t_shim_failed;

static inline void t_shim_register(const struct t_shim_suite *s,
				   const char *name, void (*fn)(void),
				   struct criterion_test_extra_data d)
{
	if (t_shim_nr >= T_SHIM_MAX) {
		fprintf(stderr, "criterion shim: more than %d tests\n",
			T_SHIM_MAX);
		abort();
	}
	t_shim_tests[t_shim_nr++] =
	    (struct t_shim_test){.suite = s, .name = name, .fn = fn, .d = d};
}

__attribute__((format(printf, 5, 6))) static inline void
t_shim_fail(int fatal, const char *file, int line, const char *what,
	    const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: Assertion failed: %s", file, line, what);
	/* fmt always starts with a space (see T_SHIM_CHECK), so that a
	 * check without a message still has a non-empty format. */
	if (fmt[1]) {
		fputs(":", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	t_shim_failed = 1;
	if (fatal)
		_exit(1);
}

#define T_SHIM_CHECK(fatal, cond, what, ...)                                   \
	do {                                                                   \
		if (!(cond))                                                   \
			t_shim_fail(fatal, __FILE__, __LINE__, what,           \
				    " " __VA_ARGS__);                          \
	} while (0)

#define T_SHIM_CMP(fatal, a, op, b, ...)                                       \
	T_SHIM_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)

#define cr_assert(c, ...)	 T_SHIM_CHECK(1, c, #c, __VA_ARGS__)
#define cr_expect(c, ...)	 T_SHIM_CHECK(0, c, #c, __VA_ARGS__)
#define cr_assert_not(c, ...)	 T_SHIM_CHECK(1, !(c), "!" #c, __VA_ARGS__)
#define cr_expect_not(c, ...)	 T_SHIM_CHECK(0, !(c), "!" #c, __VA_ARGS__)
#define cr_assert_fail(...)	 T_SHIM_CHECK(1, 0, "fail", __VA_ARGS__)
#define cr_expect_fail(...)	 T_SHIM_CHECK(0, 0, "fail", __VA_ARGS__)
#define cr_assert_eq(a, b, ...)	 T_SHIM_CMP(1, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...)	 T_SHIM_CMP(0, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) T_SHIM_CMP(1, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) T_SHIM_CMP(0, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...)	 T_SHIM_CMP(1, a, <, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...)	 T_SHIM_CMP(0, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) T_SHIM_CMP(1, a, <=, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) T_SHIM_CMP(0, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...)	 T_SHIM_CMP(1, a, >, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...)	 T_SHIM_CMP(0, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) T_SHIM_CMP(1, a, >=, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) T_SHIM_CMP(0, a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...)                                                 \
	T_SHIM_CMP(1, (const void *)(p), ==, NULL, __VA_ARGS__)
#define cr_expect_null(p, ...)                                                 \
	T_SHIM_CMP(0, (const void *)(p), ==, NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...)                                             \
	T_SHIM_CMP(1, (const void *)(p), !=, NULL, __VA_ARGS__)
#define cr_expect_not_null(p, ...)                                             \
	T_SHIM_CMP(0, (const void *)(p), !=, NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...)                                            \
	T_SHIM_CHECK(1, strcmp(a, b) == 0, #a " == " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...)                                            \
	T_SHIM_CHECK(0, strcmp(a, b) == 0, #a " == " #b, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...)                                         \
	T_SHIM_CHECK(1, memcmp(a, b, n) == 0, #a " == " #b, __VA_ARGS__)
#define cr_expect_arr_eq(a, b, n, ...)                                         \
	T_SHIM_CHECK(0, memcmp(a, b, n) == 0, #a " == " #b, __VA_ARGS__)
#define cr_log_info(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))
#define cr_log_warn(...) cr_log_info(__VA_ARGS__)
#define cr_skip(...)                                                           \
	do {                                                                   \
		fprintf(stderr, "skipped: " __VA_ARGS__);                      \
		fputc('\n', stderr);                                           \
		_exit(T_SHIM_SKIP_EXIT);                                       \
	} while (0)
#define cr_skip_test(...) cr_skip(__VA_ARGS__)

#define TestSuite(s, ...)                                                      \
	static const struct t_shim_suite t_shim_suite_##s = {#s, {__VA_ARGS__}}

#define Test(s, n, ...)                                                        \
	static void t_shim_fn_##s##_##n(void);                                 \
	__attribute__((constructor)) static void t_shim_reg_##s##_##n(void)    \
	{                                                                      \
		t_shim_register(                                               \
		    &t_shim_suite_##s, #n, t_shim_fn_##s##_##n,                \
		    (struct criterion_test_extra_data){__VA_ARGS__});          \
	}                                                                      \
	static void t_shim_fn_##s##_##n(void)

/* Runs every registered test (or those whose name contains argv[1]). */
int main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0;
	const char *filter = NULL;

	for (int i = 1; i < argc; i++)
		if (argv[i][0] != '-')
			filter = argv[i];
	for (int i = 0; i < t_shim_nr; i++) {
		const struct t_shim_test *t = &t_shim_tests[i];
		void (*init)(void) = t->d.init ? t->d.init : t->suite->d.init;
		void (*fini)(void) = t->d.fini ? t->d.fini : t->suite->d.fini;
		double to =
		    t->d.timeout > 0 ? t->d.timeout : t->suite->d.timeout;
		const char *mult = getenv("KVR_TEST_TIMEOUT_MULT");
		int st = 0, want_exit = t->d.exit_code, want_sig = t->d.signal;
		pid_t pid;

		if (filter && !strstr(t->name, filter))
			continue;
		if (t->d.disabled || t->suite->d.disabled)
			continue;
		if (mult && atof(mult) > 0)
			to *= atof(mult);
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			if (to > 0)
				alarm((unsigned)(to + 0.999));
			if (init)
				init();
			t->fn();
			if (fini)
				fini();
			_exit(t_shim_failed);
		}
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == T_SHIM_SKIP_EXIT) {
			skipped++;
			fprintf(stderr, "[SKIP] %s::%s\n", t->suite->name,
				t->name);
			continue;
		}
		bool ok = want_sig
			      ? WIFSIGNALED(st) && WTERMSIG(st) == want_sig
			      : WIFEXITED(st) && WEXITSTATUS(st) == want_exit;
		if (!ok && WIFSIGNALED(st))
			fprintf(stderr, "%s::%s: killed by signal %d%s\n",
				t->suite->name, t->name, WTERMSIG(st),
				WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
		fprintf(stderr, "[%s] %s::%s\n", ok ? "PASS" : "FAIL",
			t->suite->name, t->name);
		ok ? passed++ : failed++;
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed != 0;
}

#endif /* KVR_TSAN_CRITERION_SHIM_H */
