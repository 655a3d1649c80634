/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for lib/unlink.c, the one same-inode unlink: a name is removed
 * only while it is the inode we were given, never a file that replaced it, and
 * never through a symlink.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/unlink.h>

static char dir[64];
static int dfd = -1;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kvr-unlink-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);
}

static void teardown(void)
{
	char cmd[128];

	close(dfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)!system(cmd);
}

TestSuite(unlink, .init = setup, .fini = teardown, .timeout = 10);

static int make(const char *name)
{
	int fd = openat(dfd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "create %s: %s", name, strerror(errno));
	return fd;
}

Test(unlink, removes_name_when_still_the_same_inode)
{
	int fd = make("a");
	struct stat st;

	cr_expect_eq(kvr_unlink_same_fd(dfd, "a", fd), 0);
	cr_expect_eq(fstatat(dfd, "a", &st, AT_SYMLINK_NOFOLLOW), -1);
	close(fd);
}

Test(unlink, leaves_name_alone_when_another_file_replaced_it)
{
	int fd = make("a"), other = make("b");
	struct stat st, ost;

	cr_assert_eq(fstat(other, &ost), 0);
	cr_assert_eq(renameat(dfd, "b", dfd, "a"), 0);
	cr_expect_eq(kvr_unlink_same_fd(dfd, "a", fd), -ESTALE);
	cr_assert_eq(fstatat(dfd, "a", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_expect_eq(st.st_ino, ost.st_ino);
	close(fd);
	close(other);
}

Test(unlink, leaves_symlink_and_target_alone_when_name_became_a_link)
{
	int fd = make("target");
	struct stat was, st;

	cr_assert_eq(fstat(fd, &was), 0);
	cr_assert_eq(renameat(dfd, "target", dfd, "kept"), 0);
	cr_assert_eq(symlinkat("kept", dfd, "target"), 0);
	cr_expect_eq(kvr_unlink_same(dfd, "target", &was), -ESTALE);
	cr_expect_eq(fstatat(dfd, "target", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_expect_eq(fstatat(dfd, "kept", &st, 0), 0);
	close(fd);
}

Test(unlink, returns_enoent_when_already_gone)
{
	int fd = make("a");

	cr_assert_eq(unlinkat(dfd, "a", 0), 0);
	cr_expect_eq(kvr_unlink_same_fd(dfd, "a", fd), -ENOENT);
	cr_expect_eq(kvr_unlink_same(dfd, NULL, NULL), -EINVAL);
	close(fd);
}
