/* SPDX-License-Identifier: MIT */
/*
 * t_prom.h - test helper: run Prometheus's own checker, `promtool check
 * metrics`, on exposition text (Debian package prometheus, which
 * scripts/setup.sh installs). Tests call it besides their own validator;
 * a missing promtool fails them, never passes them.
 */
#ifndef KVR_T_PROM_H
#define KVR_T_PROM_H

#include <stddef.h>

/*
 * t_promtool_check - pipe @text into `promtool check metrics`.
 * Return: -1 when promtool is not in $PATH (@out says what to install),
 * else promtool's exit status (0: clean), with its output in @out (cut to
 * @n).
 */
int t_promtool_check(const char *text, char *out, size_t n);

#endif /* KVR_T_PROM_H */
