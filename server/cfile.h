/* SPDX-License-Identifier: MIT */
/*
 * kvringd's configuration file reader (--config FILE): opens the file
 * safely, splits it into "key = value" lines and hands each to a callback.
 * It knows nothing of the options themselves: config.c looks every key up
 * in the same long-option table getopt_long uses, so a new flag is a valid
 * key with no code here.
 *
 * The format (docs/config.md, "Configuration file"): one setting a line,
 * "key = value" or a bare "key" (a flag); blank lines and lines whose
 * first non-blank character is '#' are comments. There are no sections,
 * no quoting, no continuation lines and no inline comments: the value is
 * the rest of the line after '=', blanks trimmed at both ends.
 */
#ifndef KVR_SERVER_CFILE_H
#define KVR_SERVER_CFILE_H

#include <stdio.h>

/* Longest line accepted (a longer one is an error naming the line). */
#define KVR_CFILE_LINE_MAX 1024

/*
 * kvr_cfile_cb - one setting of the file: @key without dashes, @val the
 * trimmed value or NULL when the line held no '=' at all, @line counted
 * from 1. Returns 0, or a negative errno after printing (to the @err given
 * to kvr__cfile_read()) a message naming the file, the line and what to
 * do; the read stops there.
 */
typedef int kvr_cfile_cb(void *arg, const char *key, const char *val,
			 unsigned line);

/*
 * kvr__cfile_read - read @path and call @cb for every setting, in order.
 * Refused before any setting is applied: a path that is a symbolic link
 * or not a regular file, a file that its group or others may write, or
 * in a directory they may write (unless it is sticky, like /tmp), one
 * owned by neither root nor the caller's uid, a key given twice (both
 * lines named), a line too long, a key of characters other than
 * [a-z0-9-]. Every refusal is one message on @err naming the file, the
 * line when there is one, and what to do.
 * Return: 0, or a negative errno (-EINVAL for a bad line or a callback's
 * refusal, -EPERM for the file's permissions, -errno of open/read).
 */
int kvr__cfile_read(const char *path, kvr_cfile_cb *cb, void *arg, FILE *err);

#endif /* KVR_SERVER_CFILE_H */
