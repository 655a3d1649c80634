/* SPDX-License-Identifier: MIT */
/*
 * kvringd's --help text (config_help.c), printed by config.c.
 */
#ifndef KVR_SERVER_CONFIG_HELP_H
#define KVR_SERVER_CONFIG_HELP_H

#include <stdio.h>

/* kvr__config_usage - print kvringd --help to @f. */
void kvr__config_usage(FILE *f);

#endif /* KVR_SERVER_CONFIG_HELP_H */
