/* SPDX-License-Identifier: MIT */
/*
 * t_dir.c - clearing a test's scratch folder (t_dir.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "t_dir.h"

void t_dir_empty(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *de;

	if (!dp)
		return;
	while ((de = readdir(dp)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dirfd(dp), de->d_name, 0) < 0)
			unlinkat(dirfd(dp), de->d_name, AT_REMOVEDIR);
	}
	closedir(dp);
}

void t_dir_remove(const char *d)
{
	t_dir_empty(d);
	rmdir(d);
}
