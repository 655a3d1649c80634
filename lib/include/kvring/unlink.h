/* SPDX-License-Identifier: MIT */
/*
 * Same-inode unlinks: a name kvringd created is removed
 * only while it still is the inode it created. Another server, or another
 * user, may have taken the name since (after a sweep, or between a create
 * and a failing step), and that file is not ours to remove. Every unlink
 * of a segment, socket or lock name in lib/ and server/ goes through
 * kvr_unlink_same().
 */
#ifndef KVRING_UNLINK_H
#define KVRING_UNLINK_H

#include <sys/stat.h>

/*
 * kvr_unlink_same - unlink @name, relative to @dfd (AT_FDCWD for a path),
 * only while it is the inode @was describes (same st_dev and st_ino, same
 * file type). @name is looked at without following a final symlink, and
 * unlinkat(2) removes a link, never its target. A window remains between
 * the look and the unlink; it is as small as one fstatat.
 * Return: 0 when removed, -ENOENT when already gone, -ESTALE when the name
 * is now another file, -EINVAL for a NULL argument, or unlinkat's -errno.
 */
int kvr_unlink_same(int dfd, const char *name, const struct stat *was);

/*
 * kvr_unlink_same_fd - kvr_unlink_same() for the inode open at @fd: the
 * usual case of a file created with O_EXCL and still open. Return: as
 * kvr_unlink_same(), or fstat's -errno.
 */
int kvr_unlink_same_fd(int dfd, const char *name, int fd);

#endif /* KVRING_UNLINK_H */
