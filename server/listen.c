/* SPDX-License-Identifier: MIT */
/*
 * The single-instance lock and the listening socket of kvringd. The lock
 * (<socket>.lock, flock, O_CLOEXEC) is taken before anything else and
 * decides who may touch the socket path; a socket file is replaced only
 * when nobody answers on it (a dead server's), and at exit only the very
 * file this server bound is unlinked. The lock and the socket are made
 * relative to a descriptor of their directory, opened and checked once
 * (kvr_runtime_dir_open), and every unlink is a same-inode one
 * (<kvring/unlink.h>). This file does not accept
 * connections (loop.c, hello.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <kvring/log.h>
#include <kvring/paths.h>
#include <kvring/unlink.h>

#include "listen.h"

/* The socket's name inside its directory (s->dir_fd). */
static const char *sock_base(const struct kvr_srv *s)
{
	const char *slash = strrchr(s->cfg.socket_path, '/');

	return slash ? slash + 1 : s->cfg.socket_path;
}

/* Path of the lock file that guards a socket path (for messages). */
static void lock_path(const struct kvr_srv *s, char *buf, size_t n)
{
	snprintf(buf, n, "%s.lock", s->cfg.socket_path);
}

/* Name of the lock file inside the socket's directory. */
static void lock_name(const struct kvr_srv *s, char *buf, size_t n)
{
	snprintf(buf, n, "%s.lock", sock_base(s));
}

/* Whether fd is still the file named @name in @dfd (not unlinked or
 * replaced). */
static bool lock_is_current(int fd, int dfd, const char *name)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 &&
	       fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/*
 * The socket's directory. The default one is our runtime directory, made
 * private here (kvr_runtime_dir_open: ours, 0700, nobody else may
 * write it), so no other user can take the socket's or the lock's name
 * first. A --socket or $KVRING_SOCKET in someone else's or a shared
 * directory is the operator's choice: it is used, with a warning.
 */
static int open_socket_dir(struct kvr_srv *s)
{
	char dir[PATH_MAX], why[512];
	struct stat st;
	char *slash;
	int fd, rc;

	snprintf(dir, sizeof(dir), "%s", s->cfg.socket_path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (s->cfg.socket_default) {
		fd = kvr_runtime_dir_open(
		    dir,
		    s->cfg.have_group ? (unsigned)s->cfg.gid : (unsigned)-1,
		    why, sizeof(why));
		if (fd < 0) {
			kvr_log_err("%s", why);
			return fd;
		}
		s->dir_fd = fd;
		return 0;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		kvr_log_err("open socket directory %s: %s; create it or pick "
			    "another --socket",
			    dir, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & 02) && st.st_uid != geteuid())
		kvr_log_warn(
		    "socket directory %s is writable by other users: "
		    "one of them can take the socket's or %s.lock's "
		    "name first and keep kvringd from starting; prefer "
		    "the default runtime directory (docs/config.md)",
		    dir, s->cfg.socket_path);
	s->dir_fd = fd;
	return 0;
}

/*
 * Take the single-instance lock. The lock, not the socket file, decides
 * who may touch the socket path: a second server fails here before it
 * looks at the socket or any segment, so it cannot unlink a live server's
 * files. The holder writes its pid into the file for the refusal message.
 * The holder unlinks the file when it stops or fails to start
 * (kvr__listen_unlock), while still holding it; so a server that won the
 * flock checks that its fd is still the file at the path, and starts over
 * on the new file when the previous holder unlinked it meanwhile.
 */
int kvr__listen_lock(struct kvr_srv *s)
{
	char path[PATH_MAX], name[NAME_MAX + 8], pidbuf[32] = "";
	ssize_t n;
	int fd, len;

	len = open_socket_dir(s);
	if (len < 0)
		return len;
	lock_path(s, path, sizeof(path));
	lock_name(s, name, sizeof(name));
again:
	fd = openat(s->dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		    0600);
	if (fd < 0) {
		int rc = -errno;

		kvr_log_err("open lock file %s: %s; check the directory's "
			    "permissions or pick another --socket",
			    path, strerror(-rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int rc = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;

		n = pread(fd, pidbuf, sizeof(pidbuf) - 1, 0);
		pidbuf[n > 0 ? n : 0] = '\0';
		pidbuf[strcspn(pidbuf, "\n")] = '\0';
		kvr_log_err("another kvringd (pid %s) is serving socket %s: "
			    "stop it first, or start this one with another "
			    "--socket and --name",
			    pidbuf[0] ? pidbuf : "?", s->cfg.socket_path);
		close(fd);
		return rc;
	}
	if (!lock_is_current(fd, s->dir_fd, name)) {
		close(fd); /* the previous holder removed it as it stopped */
		goto again;
	}
	len = snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) == 0 && pwrite(fd, pidbuf, (size_t)len, 0) < 0)
		kvr_log_warn("write lock file %s: %s", path, strerror(errno));
	s->lock_fd = fd;
	return 0;
}

/* Whether a server is listening on the socket at @path. */
static bool socket_live(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	bool live;

	if (fd < 0)
		return false;
	/* EAGAIN means a full backlog: somebody is listening. */
	live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ||
	       errno == EAGAIN || errno == EINPROGRESS;
	close(fd);
	return live;
}

/* Bind and listen on the socket path; a dead socket file is replaced. */
int kvr__listen_open(struct kvr_srv *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = s->cfg.socket_path, *base = sock_base(s);
	mode_t old_mask;
	struct stat st;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		kvr_log_err("socket path %s: longer than %zu bytes; pick a "
			    "shorter --socket",
			    path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	/* Bound and probed through the directory we checked, never through
	 * a path someone could redirect since (kvr_runtime_dir_open). */
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s",
		     s->dir_fd, base) >= (int)sizeof(sa.sun_path)) {
		kvr_log_err("socket name %s: too long to bind through "
			    "/proc/self/fd; pick a shorter --socket",
			    base);
		return -ENAMETOOLONG;
	}
	if (fstatat(s->dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			kvr_log_err(
			    "socket path %s exists and is not a socket; "
			    "remove it or pick another --socket",
			    path);
			return -EEXIST;
		}
		/* A SIGKILLed server's socket can accept for a moment after
		 * its death (the kernel tears its io_uring down
		 * asynchronously); we hold the lock, so give it 2 s. */
		for (int i = 0; i < 40 && socket_live(&sa); i++)
			usleep(50000);
		if (socket_live(&sa)) {
			kvr_log_err("a server is already listening on %s (not "
				    "holding %s.lock): stop it first or pick "
				    "another --socket",
				    path, path);
			return -EADDRINUSE;
		}
		/* We hold the lock and nobody answers: a dead server's. */
		rc = kvr_unlink_same(s->dir_fd, base, &st);
		if (rc == -ESTALE) {
			kvr_log_err("socket path %s changed while kvringd "
				    "looked at it; someone else is using it: "
				    "find out who, or pick another --socket",
				    path);
			return -EADDRINUSE;
		}
		if (rc < 0 && rc != -ENOENT) {
			kvr_log_err("remove stale socket %s: %s", path,
				    strerror(-rc));
			return rc;
		}
		kvr_log_info("removed stale socket %s", path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* The umask makes the socket owner-only from its first instant;
	 * with --group it is widened to 0660 below. */
	old_mask = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (rc < 0) {
		rc = -errno;
		kvr_log_err("bind %s: %s; check the directory exists and is "
			    "writable, or pick another --socket",
			    path, strerror(-rc));
		close(fd);
		return rc;
	}
	s->have_socket = true;
	s->listen_fd = fd;
	/* Remember which file we bound, to unlink only that one at exit. */
	if (fstatat(s->dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		s->sock_ino = st.st_ino;
		s->sock_dev = st.st_dev;
	}
	if (s->cfg.have_group &&
	    (fchownat(s->dir_fd, base, (uid_t)-1, s->cfg.gid,
		      AT_SYMLINK_NOFOLLOW) < 0 ||
	     fchmodat(s->dir_fd, base, 0660, 0) < 0)) {
		rc = -errno;
		kvr_log_err("share socket %s with group %s: %s", path,
			    s->cfg.group, strerror(-rc));
		return rc;
	}
	if (listen(fd, 128) < 0) {
		rc = -errno;
		kvr_log_err("listen %s: %s", path, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Unlink our socket path, but only if it still is the socket we bound. */
void kvr__listen_remove(struct kvr_srv *s)
{
	struct stat mine = {.st_mode = S_IFSOCK};

	if (!s->have_socket)
		return;
	mine.st_ino = s->sock_ino;
	mine.st_dev = s->sock_dev;
	if (s->dir_fd >= 0 &&
	    kvr_unlink_same(s->dir_fd, sock_base(s), &mine) == 0)
		kvr_log_info("removed socket %s", s->cfg.socket_path);
	s->have_socket = false;
}

/*
 * Remove the lock file and drop the lock, at exit or after a failed start:
 * a stopped server leaves nothing at its socket path. Unlinked while still
 * held, so a server waiting on the same path re-opens (kvr__listen_lock).
 */
void kvr__listen_unlock(struct kvr_srv *s)
{
	char path[PATH_MAX], name[NAME_MAX + 8];
	int rc;

	if (s->lock_fd >= 0) {
		lock_path(s, path, sizeof(path));
		lock_name(s, name, sizeof(name));
		rc = kvr_unlink_same_fd(s->dir_fd, name, s->lock_fd);
		if (rc < 0 && rc != -ENOENT && rc != -ESTALE)
			kvr_log_warn("remove lock file %s: %s", path,
				     strerror(-rc));
		close(s->lock_fd);
		s->lock_fd = -1;
	}
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	s->dir_fd = -1;
}
