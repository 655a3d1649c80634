/* SPDX-License-Identifier: MIT */
/*
 * config_suite.h - what the kvringd option suites (test_config.c,
 * test_config_file.c) share: parse an argument list the way kvringd's
 * main does, in-process.
 */
#ifndef KVR_CONFIG_SUITE_H
#define KVR_CONFIG_SUITE_H

#include <stdio.h>

#include "config.h"

/* Parse "kvringd ARGS..." (@args NULL-terminated, at most 30) into @c:
 * usage text goes to /dev/null, usage errors to @err (/dev/null too when
 * NULL). Return kvr_config_parse()'s answer. */
static inline int cfg_parse(struct kvr_config *c, const char *const *args,
			    FILE *err)
{
	char *argv[32];
	int argc = 0, rc;
	FILE *null = fopen("/dev/null", "w");

	argv[argc++] = (char *)"kvringd";
	for (int i = 0; args && args[i]; i++)
		argv[argc++] = (char *)args[i];
	argv[argc] = NULL;
	rc = kvr_config_parse(argc, argv, c, null, err ? err : null);
	fclose(null);
	return rc;
}

#endif
