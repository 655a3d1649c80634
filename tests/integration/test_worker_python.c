/* SPDX-License-Identifier: MIT */
/*
 * test_worker_python.c - runs the Python binding's suite
 * (tests/python/test_binding.py) with the system Python against this
 * build's libkvring.so and kvringd, so that ctest covers the binding
 * without a CMake rule of its own. Skipped when /usr/bin/python3 is
 * missing, and in sanitizer builds (an ASan libkvring.so cannot be loaded
 * into an uninstrumented interpreter).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#define PY "/usr/bin/python3"

TestSuite(worker_python, .timeout = 300);

Test(worker_python, binding_suite_passes_when_run_by_system_python)
{
	char cmd[1024];
	int st;

#ifdef KVR_SANITIZED
	cr_skip_test("sanitizer build: libkvring.so can't load into python3");
#endif
	if (access(PY, X_OK) != 0)
		cr_skip_test("%s not installed", PY);
	if (access(KVR_BIN_DIR "/worker/libkvring.so", R_OK) != 0)
		cr_skip_test("libkvring.so not built");
	snprintf(cmd, sizeof(cmd),
		 "KVRING_LIB=%s/worker/libkvring.so KVRINGD=%s/server/kvringd "
		 "%s %s/tests/python/test_binding.py 2>&1",
		 KVR_BIN_DIR, KVR_BIN_DIR, PY, KVR_SRC_DIR);
	st = system(cmd);
	cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "python binding suite failed (status 0x%x); run: %s", st,
		  cmd);
}
