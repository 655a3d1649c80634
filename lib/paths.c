/* SPDX-License-Identifier: MIT */
/*
 * The default socket path (see <kvring/paths.h>). Pure name computation
 * plus a stat(2) and a faccessat(2) probe (effective uid); creates nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

int kvr_find_kvringd(char *buf, size_t n)
{
	static const char *const rel[] = { "kvringd", "../server/kvringd" };
	char self[PATH_MAX], cand[PATH_MAX + 32];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (len <= 0)
		return -ENOENT;
	self[len] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		struct stat st;
		int w = snprintf(cand, sizeof(cand), "%s/%s", self, rel[i]);

		if (w < 0 || (size_t)w >= sizeof(cand) || (size_t)w >= n)
			continue;
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(cand, X_OK) == 0) {
			memcpy(buf, cand, (size_t)w + 1);
			return 0;
		}
	}
	return -ENOENT;
}
