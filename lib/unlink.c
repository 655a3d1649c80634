/* SPDX-License-Identifier: MIT */
/*
 * Same-inode unlinks (<kvring/unlink.h>): the one place where a name
 * kvringd created is compared with the inode it created before it is
 * removed. Used by segment creation and destruction, the start-up sweep
 * and the server's socket and lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvring/unlink.h>

int kvr_unlink_same(int dfd, const char *name, const struct stat *was)
{
	struct stat now;

	if (!name || !was)
		return -EINVAL;
	if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (now.st_dev != was->st_dev || now.st_ino != was->st_ino ||
	    (now.st_mode & S_IFMT) != (was->st_mode & S_IFMT))
		return -ESTALE;
	if (unlinkat(dfd, name, 0) < 0)
		return -errno;
	return 0;
}

int kvr_unlink_same_fd(int dfd, const char *name, int fd)
{
	struct stat was;

	if (fstat(fd, &was) < 0)
		return -errno;
	return kvr_unlink_same(dfd, name, &was);
}
