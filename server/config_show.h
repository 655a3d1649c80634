/* SPDX-License-Identifier: MIT */
/*
 * kvringd --print-config: every effective setting, one a line, with where
 * it came from. A table over struct kvr_config (config.h) keyed by the
 * long option's name; it only reads the struct.
 */
#ifndef KVR_SERVER_CONFIG_SHOW_H
#define KVR_SERVER_CONFIG_SHOW_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"

/*
 * kvr_config_show_value - write setting @key's effective value in @cfg to
 * @buf (at most @len bytes, NUL-terminated), as the config file would
 * spell it. Return: true, or false when no row of the table knows @key
 * (a new option without its row; the config test fails on that).
 */
bool kvr_config_show_value(const struct kvr_config *cfg, const char *key,
			   char *buf, size_t len);

/*
 * kvr_config_print - write every setting (kvr_config_key_settable()) of
 * @cfg to @out as "key = value" followed, past the value's column, by its
 * source: "default", "FILE:LINE", "flag" or "environment".
 */
void kvr_config_print(const struct kvr_config *cfg, FILE *out);

#endif /* KVR_SERVER_CONFIG_SHOW_H */
