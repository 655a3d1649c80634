/* SPDX-License-Identifier: MIT */
/*
 * The default Unix socket path of a kvringd instance, derived from the
 * effective uid so that two users on one host never collide. kvringd and
 * libkvring both call it, so a worker started with no configuration finds
 * the server its own user started with no flags. The segment base name
 * ("kvring-<uid>") is kvr_seg_default_base() in <kvring/segment.h>.
 *
 * The socket and its lock live in a runtime directory owned by the
 * server's uid and writable by nobody else (in a shared directory any
 * local user could take the lock file's name first).
 * kvr_default_socket_path() only computes names; kvr_runtime_dir_open()
 * (kvringd) creates and checks the directory. Neither reads
 * $KVRING_SOCKET: callers apply their own overrides first.
 */
#ifndef KVRING_PATHS_H
#define KVRING_PATHS_H

#include <stddef.h>

/* Directory used for sockets when it exists and the caller may write it. */
#define KVR_RUN_DIR "/run/kvring"
/* Prefix of the fallback runtime directory under /tmp. */
#define KVR_SOCKET_PREFIX "kvring-"
/* The socket's name inside its runtime directory. */
#define KVR_SOCKET_NAME "kvringd.sock"
/* sizeof(sockaddr_un.sun_path) on Linux, terminating NUL included. */
#define KVR_SOCKET_PATH_MAX 108

/*
 * kvr_default_socket_path - the default socket path of the calling uid,
 * "<runtime dir>/kvringd.sock", where the runtime directory is the first
 * of: "$XDG_RUNTIME_DIR/kvring" when $XDG_RUNTIME_DIR is an absolute path
 * to a directory the caller owns (a login session's private directory);
 * KVR_RUN_DIR "/<euid>" when it exists, or when KVR_RUN_DIR is a
 * directory the caller can write and search; else "/tmp/kvring-<euid>".
 * Return: 0 and @buf filled (NUL-terminated), -EINVAL if @buf is NULL,
 * -ENAMETOOLONG if @n is too small (@buf then untouched).
 */
int kvr_default_socket_path(char *buf, size_t n);

/*
 * kvr_runtime_dir_open - make sure the directory @dir that will hold
 * kvringd's socket and lock is private to us, without a race: create it
 * (mode 0700, or 0750 with group @gid when @gid != (gid_t)-1) with
 * mkdirat() under its parent if it does not exist, open it with
 * O_DIRECTORY | O_NOFOLLOW, and make every check (a real directory owned
 * by our effective uid that neither group nor others can write; with
 * @gid, the group may enter it) and the mode fix-up on that descriptor
 * (fstat, fchmod, fchown). The caller creates the socket
 * and the lock relative to it (openat, unlinkat, bind through
 * /proc/self/fd/N), so a symlink or another directory swapped in at the
 * name after the check is never used. A symlink at the name is refused
 * (-ENOTDIR) with its owner and mode in @why.
 * Return: the directory's fd (O_CLOEXEC, the caller closes it), or -errno
 * with what was wrong (and what to do) in @why (NUL-terminated, @why_len
 * bytes): -EPERM for a directory someone else owns or others can write,
 * -ENOTDIR, or mkdir's error.
 */
int kvr_runtime_dir_open(const char *dir, unsigned gid, char *why,
			 size_t why_len);

/*
 * kvr_find_kvringd - the kvringd a tool (kvring-stress, kvring-bench)
 * starts when not told which: "kvringd" in the directory of the running
 * program first (an installed tree: <prefix>/bin), then
 * "../server/kvringd" from it (a build tree). Only an executable file
 * counts.
 * Return: 0 and @buf filled, or -ENOENT when neither exists (then the
 * caller falls back to "kvringd" from $PATH; @buf untouched).
 */
int kvr_find_kvringd(char *buf, size_t n);

#endif /* KVRING_PATHS_H */
