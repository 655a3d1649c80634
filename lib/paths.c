/* SPDX-License-Identifier: MIT */
/*
 * The default socket path and its runtime directory (see
 * <kvring/paths.h>): name computation with stat(2) and faccessat(2)
 * probes (effective uid), and the server's creation and check of the
 * directory, through a descriptor (kvr_runtime_dir_open) that every later
 * use goes through.
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

/*
 * Split @dir into its parent directory (@parent) and its last component
 * (@base), both NUL-terminated. Trailing slashes are ignored; "/" itself
 * has no last component. Return: false when it does not fit or has none.
 */
static bool split_dir(const char *dir, char *parent, size_t pn, char *base,
		      size_t bn)
{
	size_t len = strlen(dir), at;

	while (len > 1 && dir[len - 1] == '/')
		len--;
	at = len;
	while (at > 0 && dir[at - 1] != '/')
		at--;
	if (at == len || len - at >= bn || at + 2 > pn)
		return false;
	memcpy(base, dir + at, len - at);
	base[len - at] = '\0';
	if (at == 0) {
		snprintf(parent, pn, ".");
	} else {
		size_t plen = at > 1 ? at - 1 : 1; /* keep "/" as the root */

		memcpy(parent, dir, plen);
		parent[plen] = '\0';
	}
	return true;
}

/* What a name that is not a usable directory is, for the refusal. */
static void refuse_not_dir(int pfd, const char *base, const char *dir,
			   char *why, size_t why_len)
{
	struct stat st;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
		snprintf(why, why_len,
			 "runtime directory %s is a %s owned by uid %u with "
			 "mode %04o, not a directory (someone may have put it "
			 "there to take kvringd's socket): remove it, or pick "
			 "a --socket in a private directory",
			 dir, S_ISLNK(st.st_mode) ? "symlink" : "file",
			 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	else
		snprintf(why, why_len,
			 "runtime directory %s is not a directory: remove it, "
			 "or pick a --socket in a private directory",
			 dir);
}

int kvr_runtime_dir_open(const char *dir, unsigned gid, char *why,
			 size_t why_len)
{
	bool group = gid != (unsigned)-1, made = false;
	mode_t mode = group ? 0750 : 0700;
	char parent[PATH_MAX], base[NAME_MAX + 1];
	struct stat st;
	int pfd, fd, rc;

	if (why_len)
		why[0] = '\0';
	if (!dir || !*dir)
		return -EINVAL;
	if (!split_dir(dir, parent, sizeof(parent), base, sizeof(base))) {
		snprintf(why, why_len,
			 "runtime directory %s: not a directory name kvringd "
			 "can create; pick a --socket in a private directory",
			 dir);
		return -EINVAL;
	}
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		rc = -errno;
		snprintf(why, why_len,
			 "open %s (the parent of runtime directory %s): %s; "
			 "create it or pick a --socket",
			 parent, dir, strerror(-rc));
		return rc;
	}
	if (mkdirat(pfd, base, mode) == 0) {
		made = true;
	} else if (errno != EEXIST) {
		rc = -errno;
		snprintf(why, why_len,
			 "create runtime directory %s: %s; create it (mode "
			 "0700, owned by uid %u) or pick a --socket",
			 dir, strerror(-rc), (unsigned)geteuid());
		close(pfd);
		return rc;
	}
	/*
	 * From here on only the descriptor counts: O_NOFOLLOW refuses a
	 * symlink planted at the name, and every check and every later use
	 * (the lock, the socket) goes through this fd, so a directory
	 * swapped in after the check is never the one used.
	 */
	fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP || rc == -ENOTDIR) {
			refuse_not_dir(pfd, base, dir, why, why_len);
			rc = -ENOTDIR;
		} else {
			snprintf(why, why_len, "open runtime directory %s: %s",
				 dir, strerror(-rc));
		}
		close(pfd);
		return rc;
	}
	close(pfd);
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(why, why_len, "runtime directory %s: %s", dir,
			 strerror(-rc));
		close(fd);
		return rc;
	}
	/* mkdir applies the umask: set exactly what we want, on the fd. */
	if (made && st.st_uid == geteuid() &&
	    ((group && fchown(fd, (uid_t)-1, (gid_t)gid) < 0) ||
	     fchmod(fd, mode) < 0 || fstat(fd, &st) < 0)) {
		rc = -errno;
		snprintf(why, why_len, "set up runtime directory %s: %s", dir,
			 strerror(-rc));
		close(fd);
		return rc;
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
		close(fd);
		return -EPERM;
	}
	return fd;
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
