/* SPDX-License-Identifier: MIT */
/*
 * The default socket path and its runtime directory (see
 * <kvring/paths.h>): name computation with stat(2) and faccessat(2)
 * probes (effective uid), and the server's creation and check of the
 * directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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
	char tmp[KVR_SOCKET_PATH_MAX], mine[64];
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	unsigned uid = (unsigned)geteuid();
	struct stat st;
	int len;

	if (!buf)
		return -EINVAL;
	snprintf(mine, sizeof(mine), "%s/%u", KVR_RUN_DIR, uid);
	if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 &&
	    S_ISDIR(st.st_mode) && st.st_uid == geteuid())
		len = snprintf(tmp, sizeof(tmp), "%s/kvring/%s", xdg,
			       KVR_SOCKET_NAME);
	else if ((stat(mine, &st) == 0 && S_ISDIR(st.st_mode)) ||
		 (stat(KVR_RUN_DIR, &st) == 0 && S_ISDIR(st.st_mode) &&
		  faccessat(AT_FDCWD, KVR_RUN_DIR, W_OK | X_OK, AT_EACCESS) ==
		      0))
		len =
		    snprintf(tmp, sizeof(tmp), "%s/%s", mine, KVR_SOCKET_NAME);
	else
		len = snprintf(tmp, sizeof(tmp), "/tmp/%s%u/%s",
			       KVR_SOCKET_PREFIX, uid, KVR_SOCKET_NAME);
	return put(buf, n, tmp, len);
}

int kvr_runtime_dir_prepare(const char *dir, unsigned gid, char *why,
			    size_t why_len)
{
	bool group = gid != (unsigned)-1;
	mode_t mode = group ? 0750 : 0700;
	struct stat st;
	int rc;

	if (why_len)
		why[0] = '\0';
	if (!dir || !*dir)
		return -EINVAL;
	if (mkdir(dir, mode) == 0) {
		/* mkdir applies the umask: set exactly what we want. */
		if ((group && chown(dir, (uid_t)-1, (gid_t)gid) < 0) ||
		    chmod(dir, mode) < 0) {
			rc = -errno;
			snprintf(why, why_len,
				 "set up runtime directory %s: %s", dir,
				 strerror(-rc));
			return rc;
		}
	} else if (errno != EEXIST) {
		rc = -errno;
		snprintf(why, why_len,
			 "create runtime directory %s: %s; create it (mode "
			 "0700, owned by uid %u) or pick a --socket",
			 dir, strerror(-rc), (unsigned)geteuid());
		return rc;
	}
	if (lstat(dir, &st) < 0) {
		rc = -errno;
		snprintf(why, why_len, "runtime directory %s: %s", dir,
			 strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, why_len,
			 "runtime directory %s is not a directory (a symlink "
			 "or a file someone put there); remove it",
			 dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(
		    why, why_len,
		    "runtime directory %s is owned by uid %u with mode "
		    "%04o; kvringd needs it owned by uid %u and writable by "
		    "nobody else (another user could take the socket or "
		    "its lock): remove it, or pick a --socket in a private "
		    "directory",
		    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
		    (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}

int kvr_find_kvringd(char *buf, size_t n)
{
	static const char *const rel[] = {"kvringd", "../server/kvringd"};
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
