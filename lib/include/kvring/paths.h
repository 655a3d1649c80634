/* SPDX-License-Identifier: MIT */
/*
 * The default Unix socket path of a kvringd instance, derived from the
 * effective uid so that two users on one host never collide. kvringd and
 * libkvring both call it, so a worker started with no configuration finds
 * the server its own user started with no flags. The segment base name
 * ("kvring-<uid>") is kvr_seg_default_base() in <kvring/segment.h>.
 *
 * This file only computes names. It creates nothing (kvringd creates
 * /run/kvring itself when it runs as root), and it does not read
 * $KVRING_SOCKET: callers apply their own overrides first.
 */
#ifndef KVRING_PATHS_H
#define KVRING_PATHS_H

#include <stddef.h>

/* Directory used for sockets when it exists and the caller may write it. */
#define KVR_RUN_DIR "/run/kvring"
/* Prefix of the fallback socket name under /tmp. */
#define KVR_SOCKET_PREFIX "kvring-"
/* sizeof(sockaddr_un.sun_path) on Linux, terminating NUL included. */
#define KVR_SOCKET_PATH_MAX 108

/*
 * kvr_default_socket_path - the default socket path of the calling uid:
 * KVR_RUN_DIR "/<euid>.sock" when KVR_RUN_DIR is a directory the caller can
 * write and search, else "/tmp/kvring-<euid>.sock".
 * Return: 0 and @buf filled (NUL-terminated), -EINVAL if @buf is NULL,
 * -ENAMETOOLONG if @n is too small (@buf then untouched).
 */
int kvr_default_socket_path(char *buf, size_t n);

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
