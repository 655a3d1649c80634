/* SPDX-License-Identifier: MIT */
/*
 * The default socket path (see <kvring/paths.h>). Pure name computation
 * plus a stat(2) and a faccessat(2) probe (effective uid); creates nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvring/paths.h>

/* Format into a scratch buffer first so that @buf stays untouched when it
 * is too small (outputs are untouched on failure, STYLE.md section 3). */
static int put(char *buf, size_t n, const char *tmp, int len)
{
	if (len < 0 || (size_t)len >= n)
		return -ENAMETOOLONG;
	memcpy(buf, tmp, (size_t)len + 1);
	return 0;
}

int kvr_default_socket_path(char *buf, size_t n)
{
	char tmp[KVR_SOCKET_PATH_MAX];
	struct stat st;
	int len;

	if (!buf)
		return -EINVAL;
	/* /run/kvring only when it is a directory we may create files in;
	 * otherwise every user falls back to a per-uid name under /tmp. */
	if (stat(KVR_RUN_DIR, &st) == 0 && S_ISDIR(st.st_mode) &&
	    faccessat(AT_FDCWD, KVR_RUN_DIR, W_OK | X_OK, AT_EACCESS) == 0)
		len = snprintf(tmp, sizeof(tmp), "%s/%u.sock", KVR_RUN_DIR,
			       (unsigned)geteuid());
	else
		len = snprintf(tmp, sizeof(tmp), "/tmp/%s%u.sock",
			       KVR_SOCKET_PREFIX, (unsigned)geteuid());
	return put(buf, n, tmp, len);
}
