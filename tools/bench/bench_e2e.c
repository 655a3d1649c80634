/* SPDX-License-Identifier: MIT */
/*
 * bench_e2e.c - the e2e scenario of kvring-bench: prefix reuse end to end
 * (docs/performance.md, "End to end"). The measurement is Python with
 * torch (a Llama-style model, two engine processes, the vLLM connector
 * and a kvringd of its own): this file only runs tools/bench_e2e.py with
 * /usr/bin/python3, the options passed through, and $KVRINGD and
 * $KVRING_LIB pointing at this build's kvringd and libkvring when they
 * are unset. The script prints one JSON line per prompt length and exits
 * 1 when a load gave logits that differ from the full computation's; its
 * status is this scenario's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"

int bench_e2e_main(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: kvring-bench e2e [--tokens N,N,...] [--suffix N] "
	    "[--reps N]\n"
	    "                        [--layers N] [--dim N] [--heads N] "
	    "[--kv-heads N]\n"
	    "                        [--ffn N] [--vocab N] [--block-size N] "
	    "[--chunk-tokens N]\n"
	    "\n"
	    "Prefix reuse through the vLLM connector with a Llama-style "
	    "torch model:\n"
	    "engine A prefills N tokens and saves them, engine B loads the "
	    "prefix and\n"
	    "computes only the suffix; its logits must equal a full "
	    "computation's.\n"
	    "Runs %s/tools/bench_e2e.py (needs /usr/bin/python3 with "
	    "torch).\n",
	    KVR_SRC_DIR);
}

/* The build's own binaries (unset or empty variables only), for a script
 * that would otherwise search. */
static void default_env(const char *name, const char *path)
{
	const char *v = getenv(name);

	if ((!v || !*v) && access(path, R_OK) == 0)
		setenv(name, path, 1);
}

int bench_e2e_main(int argc, char **argv)
{
	char script[4096];
	char **args;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return BENCH_EXIT_OK;
		}
	snprintf(script, sizeof(script), "%s/tools/bench_e2e.py", KVR_SRC_DIR);
	default_env("KVRINGD", KVR_BUILD_DIR "/server/kvringd");
	default_env("KVRING_LIB", KVR_BUILD_DIR "/worker/libkvring.so");
	args = calloc((size_t)argc + 2, sizeof(*args));
	if (!args)
		return BENCH_EXIT_ERR;
	args[0] = (char *)"/usr/bin/python3";
	args[1] = script;
	for (int i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	fflush(NULL);
	execv(args[0], args);
	fprintf(stderr, "kvring-bench e2e: cannot run /usr/bin/python3 %s\n",
		script);
	free(args);
	return BENCH_EXIT_ERR;
}
