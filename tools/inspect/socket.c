/* SPDX-License-Identifier: MIT */
/*
 * socket.c - resolving --socket PATH to the control segment of the server
 * listening there, without connecting to it. The control header records
 * no socket path, and a connect would be a handshake the server has to
 * answer and a channel it has to allocate, which the inspector promises
 * never to cause. So the answer comes from /proc: the kernel's table of
 * Unix sockets gives the inode of the listening socket bound to PATH, and
 * the segment whose live creator holds that inode among its fds is the
 * one. kvringd binds its socket through its checked directory's
 * descriptor, so the kernel's name for it is "/proc/self/fd/N/<base>":
 * such a name counts when the server's fd N is the asked path's
 * directory. This file only finds the file name; attach.c maps and validates
 * it. It needs the right to read the server's /proc/<pid>/fd (same uid or
 * root) and sees only this network and pid namespace.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvring/proc.h>

#include "inspect.h"

/* __SO_ACCEPTCON in /proc/net/unix's Flags column: a listening socket. */
#define SO_ACCEPTCON_FLAG 0x10000ul

/*
 * A listening socket that may be the one at the path asked about: its
 * inode, and for a name kvringd bound through its checked directory
 * ("/proc/self/fd/<dirfd>/<base>", docs/config.md) the directory
 * descriptor that must, in the server's /proc/<pid>/fd, lead to the
 * asked path's directory (-1 for a name that matched as it is).
 */
struct cand {
	unsigned long ino;
	int dirfd;
};

/* Directory and last component of @path after realpath() of the
 * directory (the socket itself need not resolve). False if unusable. */
static bool split_want(const char *path, char *dir, size_t dn,
		       const char **base)
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash) {
		*base = path;
		return getcwd(dir, dn) != NULL;
	}
	*base = slash + 1;
	if (slash == path)
		snprintf(tmp, sizeof(tmp), "/");
	else
		snprintf(tmp, sizeof(tmp), "%.*s", (int)(slash - path), path);
	return realpath(tmp, dir) != NULL && strlen(dir) < dn;
}

/*
 * Listening Unix sockets that may be bound to @path, at most @max of
 * them. A socket's bound name is compared as given, and both names are
 * also compared after realpath(), so "./x.sock" finds "/tmp/x.sock". A
 * name of the form "/proc/self/fd/N/<base>" with @path's last component
 * is a candidate too; pid_holds_socket() decides by the server's fd N.
 * Return: the number found (>= 0), or -errno if /proc/net/unix is
 * unreadable.
 */
static int listening_inodes(const char *path, struct cand *c, int max)
{
	char line[4096 + 128], rp[PATH_MAX], want[PATH_MAX], wdir[PATH_MAX];
	FILE *f = fopen("/proc/net/unix", "r");
	const char *wbase = NULL;
	bool have_dir;
	int n = 0;

	if (!f)
		return -errno;
	if (!realpath(path, want))
		snprintf(want, sizeof(want), "%s", path);
	have_dir = split_want(path, wdir, sizeof(wdir), &wbase);
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long refc, proto, flags, type, st, inode;
		char p[4096];
		int off = 0, dfd = -1, end = 0;

		/* "Num: RefCount Protocol Flags Type St Inode Path"; the
		 * header line and unbound sockets (no path) are skipped. */
		p[0] = '\0';
		if (sscanf(line, "%*[0-9a-fA-F]: %lx %lx %lx %lx %lx %lu %n",
			   &refc, &proto, &flags, &type, &st, &inode, &off) < 6)
			continue;
		if (!(flags & SO_ACCEPTCON_FLAG) || off <= 0)
			continue;
		if (sscanf(line + off, "%4095s", p) != 1)
			continue;
		if (strcmp(p, path) == 0 || strcmp(p, want) == 0 ||
		    (realpath(p, rp) && strcmp(rp, want) == 0)) {
			c[n++] = (struct cand){.ino = inode, .dirfd = -1};
			continue;
		}
		if (have_dir &&
		    sscanf(p, "/proc/self/fd/%d/%n", &dfd, &end) == 1 &&
		    end > 0 && dfd >= 0 && strcmp(p + end, wbase) == 0)
			c[n++] = (struct cand){.ino = inode, .dirfd = dfd};
	}
	fclose(f);
	return n;
}

/* Whether process @pid's fd @fd is the directory @dir. */
static bool pid_fd_is_dir(pid_t pid, int fd, const char *dir)
{
	char lpath[64], link[PATH_MAX];
	ssize_t len;

	snprintf(lpath, sizeof(lpath), "/proc/%d/fd/%d", (int)pid, fd);
	len = readlink(lpath, link, sizeof(link) - 1);
	if (len <= 0)
		return false;
	link[len] = '\0';
	return strcmp(link, dir) == 0;
}

/* Whether process @pid holds one of the @n candidate sockets among its
 * fds (each fd's link reads "socket:[<inode>]"), and for a name bound
 * through a directory fd, holds that fd on @wdir. Unreadable: false. */
static bool pid_holds_socket(pid_t pid, const struct cand *c, int n,
			     const char *wdir)
{
	char dpath[64], lpath[320], link[64];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(dpath, sizeof(dpath), "/proc/%d/fd", (int)pid);
	d = opendir(dpath);
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		ssize_t len;
		unsigned long v;

		snprintf(lpath, sizeof(lpath), "%s/%s", dpath, de->d_name);
		len = readlink(lpath, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &v) != 1)
			continue;
		for (int i = 0; i < n && !found; i++)
			found = v == c[i].ino &&
				(c[i].dirfd < 0 ||
				 pid_fd_is_dir(pid, c[i].dirfd, wdir));
	}
	closedir(d);
	return found;
}

/*
 * Whether the control segment file @p was created by a live process that
 * holds one of the socket inodes. The header is read with a plain pread,
 * not mapped: magic and creator pid keep their offsets in every ABI, so
 * a segment of any version can be matched here (and then refused cleanly
 * by the attach). Liveness is checked by (pid, start time) first, so a
 * dead server's pid reused by another process is not asked about.
 */
static bool segment_owns_socket(const char *p, const struct cand *c, int n,
				const char *wdir)
{
	struct kvr_seg_hdr_shm h;
	bool owns;
	int fd;

	fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	owns = pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	       h.magic == KVR_SEG_MAGIC &&
	       kvr_proc_alive(h.creator_pid, h.creator_start) &&
	       pid_holds_socket(h.creator_pid, c, n, wdir);
	close(fd);
	return owns;
}

/*
 * Resolves --socket: the inodes of the listening sockets bound to @path,
 * then the first "*.ctl" file in @dir (NULL: /dev/shm) whose live creator
 * holds one of them.
 * Return: 0 and *t set, or -ENOENT / -errno (message printed) with *t
 * untouched.
 */
int ins_target_from_socket(struct ins_target *t, const char *dir,
			   const char *path)
{
	const char *d_name = dir ? dir : KVR_SEG_DEFAULT_DIR;
	char wdir[PATH_MAX] = "";
	const char *wbase;
	struct cand c[8];
	struct dirent *de;
	int n, found = 0;
	DIR *d;

	if (!split_want(path, wdir, sizeof(wdir), &wbase))
		wdir[0] = '\0';
	n = listening_inodes(path, c, 8);
	if (n <= 0) {
		ins_err("socket %s: no listening Unix socket bound to that "
			"path (is kvringd running?)",
			path);
		return -ENOENT;
	}
	d = opendir(d_name);
	if (!d) {
		int rc = -errno;

		ins_err("open %s: %s", d_name, strerror(-rc));
		return rc;
	}
	while (!found && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char p[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];

		if (len < 5 || strcmp(de->d_name + len - 4, ".ctl") != 0 ||
		    !kvr_seg_name_valid(de->d_name))
			continue;
		snprintf(p, sizeof(p), "%s/%s", d_name, de->d_name);
		if (segment_owns_socket(p, c, n, wdir)) {
			ins_target_set(t, dir, de->d_name);
			found = 1;
		}
	}
	closedir(d);
	if (!found) {
		ins_err("socket %s: no control segment in %s belongs to the "
			"process listening there (try --name)",
			path, d_name);
		return -ENOENT;
	}
	return 0;
}
