/* SPDX-License-Identifier: MIT */
/*
 * disk_file.c - the disk tier's directory and data file: the ownership,
 * mode and symlink checks of --disk DIR, the lock that keeps a second
 * kvringd out, opening the file with O_DIRECT (buffered where the file
 * system refuses it, said once), its preallocation and its superblock
 * (docs/layout.md, "Disk records"); the check that the file was not
 * deleted under the server; and the rate limit of the tier's error
 * lines. Runs at start and stop, for the log lines and for the check.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <kvring/clock.h>
#include <kvring/error.h>
#include <kvring/log.h>

#include "disk_int.h"

/* The superblock, at offset 0 of the data file (a 4 KiB block): the
 * geometry the records were written with. */
struct sb {
	uint32_t magic;	  /* KVR_DISK_SB_MAGIC */
	uint16_t version; /* KVR_DISK_VERSION */
	uint16_t zero;
	uint64_t rec_bytes;
	uint64_t nrec;
	uint64_t file_bytes;
	uint64_t sum; /* XXH3-64 of the 32 bytes above */
};

/* Error lines: one per kind every LOG_EVERY_NS. */
#define LOG_EVERY_NS 5000000000ull

/*
 * A deleted file keeps working through our fd: writes would go on filling
 * space nobody can see or reclaim until kvringd stops. So they are
 * refused from then on, while the records already written stay readable.
 * Logs once; later calls return false at once.
 */
bool kvr_disk_check(struct kvr_disk *d)
{
	struct stat st;

	if (d->gone)
		return false;
	/* A failing fstat says nothing about the name: keep writing. */
	if (fstat(d->fd, &st) < 0 || st.st_nlink > 0)
		return true;
	d->gone = true;
	d->st.deleted = 1;
	kvr_log_warn("disk: %s was deleted under the running server (its "
		     "directory removed?): the chunks already on disk are "
		     "still served from the open file, new writes are dropped "
		     "(counted), and its space comes back when kvringd stops; "
		     "restart kvringd to make a new one",
		     d->path);
	return false;
}

/* A failing disk fails every I/O and the counters say how many: the log
 * only needs to say that it happens and why, not once per chunk. */
void kvr__disk_log_err(struct kvr_disk *d, int kind, const char *what, int rc)
{
	uint64_t now = kvr_clock_now_ns();

	if (kind < 0 || kind > 3 ||
	    (d->log_ns[kind] && now - d->log_ns[kind] < LOG_EVERY_NS))
		return;
	d->log_ns[kind] = now;
	kvr_log_warn("disk: %s %s: %s (counted; the pool goes on without "
		     "it; lines like this at most every 5 s)",
		     what, d->path, strerror(-rc)); /* the kernel's words:
							kvr's ENOSPC means
							the pool */
}

/*
 * Open every component of the absolute @dir from "/", refusing a symlink
 * anywhere, and make the last one (mode 0700) if it is missing. The last
 * one must be ours and writable by nobody else. Return its fd or -errno.
 */
static int open_dir(const char *dir, char *err, size_t errlen)
{
	char buf[sizeof(((struct kvr_disk_conf *)0)->dir)];
	char *save = NULL, *comp;
	struct stat st;
	int fd, nfd;

	snprintf(buf, sizeof(buf), "%s", dir);
	/*
	 * One component at a time, each looked up and opened (O_NOFOLLOW)
	 * through the fd of the one before, so a symlink is refused, not
	 * followed. The server truncates and overwrites its data file: a
	 * planted link would aim that at another file.
	 */
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (comp = strtok_r(buf, "/", &save); comp;
	     comp = strtok_r(NULL, "/", &save)) {
		bool last = save == NULL || *save == '\0';

		if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT && last &&
			    mkdirat(fd, comp, 0700) == 0 &&
			    fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0)
				goto open_it;
			snprintf(err, errlen,
				 "--disk %s: '%s' cannot be used: %s (create "
				 "the directory's parent first)",
				 dir, comp, strerror(errno));
			close(fd);
			return -ENOENT;
		}
	open_it:
		if (S_ISLNK(st.st_mode)) {
			snprintf(err, errlen,
				 "--disk %s: '%s' is a symlink; give the real "
				 "path (symlinks are refused anywhere in it)",
				 dir, comp);
			close(fd);
			return -ELOOP;
		}
		nfd = openat(fd, comp,
			     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (nfd < 0) {
			snprintf(err, errlen, "--disk %s: open '%s': %s", dir,
				 comp, strerror(errno));
			return -errno;
		}
		fd = nfd;
	}
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -errno;
	}
	/* Records are served to workers as hits: whoever can write into DIR
	 * could plant chunks, so DIR must be the server's alone. */
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "--disk %s is owned by uid %u, not by this server's "
			 "uid %u: chown it to the server's user",
			 dir, (unsigned)st.st_uid, (unsigned)geteuid());
		close(fd);
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen,
			 "--disk %s is writable by its group or others (mode "
			 "%03o): chmod go-w it, the cache must be the "
			 "server's alone",
			 dir, (unsigned)(st.st_mode & 0777));
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* The superblock of this geometry, in the 4 KiB aligned @blk. */
static void sb_make(const struct kvr_disk *d, void *blk)
{
	struct sb *b = blk;

	memset(blk, 0, KVR_DISK_BLOCK);
	b->magic = KVR_DISK_SB_MAGIC;
	b->version = KVR_DISK_VERSION;
	b->rec_bytes = d->rec_bytes;
	b->nrec = d->nrec;
	b->file_bytes = d->cf.size_bytes;
	b->sum = XXH3_64bits(b, offsetof(struct sb, sum));
}

/*
 * Truncate, preallocate and write a fresh superblock. Truncating zeroes
 * every old record, so no header of another geometry survives to be
 * indexed; preallocating spares later writes a full file system. The
 * superblock is synced before any record is written: a crash before that
 * leaves a file the next start formats again. Return: 1 or -errno.
 */
static int format(struct kvr_disk *d, void *blk, const char *why)
{
	int rc;

	kvr_log_info("disk: formatting %s (%s): %llu records of %llu bytes",
		     d->path, why, (unsigned long long)d->nrec,
		     (unsigned long long)d->rec_bytes);
	if (ftruncate(d->fd, 0) < 0)
		return -errno;
	rc = fallocate(d->fd, 0, 0, (off_t)d->cf.size_bytes);
	if (rc < 0) {
		rc = -errno;
		/* A file system without fallocate, or too little room: a
		 * sparse file, whose writes may fail later (counted). */
		kvr_log_warn("disk: preallocate %llu bytes of %s: %s; using "
			     "a sparse file, writes that find no room are "
			     "dropped and counted",
			     (unsigned long long)d->cf.size_bytes, d->path,
			     strerror(-rc));
		if (ftruncate(d->fd, (off_t)d->cf.size_bytes) < 0)
			return -errno;
	}
	sb_make(d, blk);
	if (pwrite(d->fd, blk, KVR_DISK_BLOCK, 0) != KVR_DISK_BLOCK)
		return errno ? -errno : -EIO;
	if (fdatasync(d->fd) < 0)
		return -errno;
	return 1;
}

/* Keep the file if its superblock says this geometry; else format it:
 * records of another size sit at other offsets, so none could be used.
 * Return 0 (kept: scan it), 1 (formatted: empty) or -errno. */
static int superblock(struct kvr_disk *d)
{
	struct stat st;
	void *blk = NULL;
	int rc;

	/* Block aligned: an O_DIRECT fd refuses any other buffer (EINVAL). */
	if (posix_memalign(&blk, KVR_DISK_BLOCK, KVR_DISK_BLOCK))
		return -ENOMEM;
	if (fstat(d->fd, &st) < 0) {
		rc = -errno;
	} else if ((uint64_t)st.st_size < KVR_DISK_BLOCK) {
		rc = format(d, blk, "new");
	} else if (pread(d->fd, blk, KVR_DISK_BLOCK, 0) != KVR_DISK_BLOCK) {
		rc = format(d, blk, "its superblock cannot be read");
	} else {
		struct sb want;
		void *mine = NULL;

		/* Byte for byte against the one this geometry would write. */
		memcpy(&want, blk, sizeof(want));
		sb_make(d, blk);
		mine = blk;
		if (memcmp(&want, mine, sizeof(want)) != 0)
			rc = format(d, blk,
				    "written with another --disk-size or "
				    "--disk-chunk, or not a kvring disk file");
		else if ((uint64_t)st.st_size != d->cf.size_bytes)
			rc = format(d, blk, "its size changed");
		else
			rc = 0;
	}
	free(blk);
	return rc;
}

/* Open DIR and the data file, then keep or format it. Return: 0 (kept:
 * scan it), 1 (formatted: all free) or -errno with a sentence in @err;
 * the fds opened so far stay in @d for kvr__disk_file_close(). */
int kvr__disk_file_open(struct kvr_disk *d, char *err, size_t errlen)
{
	const int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
	struct stat st;
	int rc;

	d->dirfd = open_dir(d->cf.dir, err, errlen);
	if (d->dirfd < 0)
		return d->dirfd;
	snprintf(d->path, sizeof(d->path), "%s/%s", d->cf.dir, KVR_DISK_FILE);
	/* O_PATH fds cannot openat() a file for I/O by name on every
	 * kernel: reopen the directory for that, checked the same. */
	rc = openat(d->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rc < 0)
		goto fail_errno;
	close(d->dirfd);
	d->dirfd = rc;
	d->direct = true;
	/* O_DIRECT, so the page cache holds no second copy of each chunk; a
	 * file system without it (tmpfs) answers EINVAL: buffered then. */
	d->fd = openat(d->dirfd, KVR_DISK_FILE, flags | O_DIRECT, 0600);
	if (d->fd < 0 && errno == EINVAL) {
		d->direct = false;
		d->fd = openat(d->dirfd, KVR_DISK_FILE, flags, 0600);
		if (d->fd >= 0)
			kvr_log_info("disk: the file system of %s refuses "
				     "O_DIRECT: buffered I/O (the page cache "
				     "holds a second copy)",
				     d->cf.dir);
	}
	if (d->fd < 0)
		goto fail_errno;
	/*
	 * Two servers on one file would overwrite each other's records and
	 * serve chunks changed underneath them. Locked before anything is
	 * read or formatted, so a second server reads and formats nothing;
	 * the lock goes with the fd, so a killed server leaves none behind.
	 */
	if (flock(d->fd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		if (rc == -EWOULDBLOCK) {
			snprintf(err, errlen,
				 "--disk %s is in use by another kvringd (it "
				 "holds the lock on %s): give each server a "
				 "directory of its own",
				 d->cf.dir, d->path);
			return -EBUSY;
		}
		snprintf(err, errlen, "--disk: lock %s: %s", d->path,
			 strerror(-rc));
		return rc;
	}
	if (fstat(d->fd, &st) < 0)
		goto fail_errno;
	/* The file may predate this start: refuse one another user made. */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "--disk: %s is not a regular file of this server's "
			 "uid %u: remove it",
			 d->path, (unsigned)geteuid());
		return -EPERM;
	}
	if ((st.st_mode & 0777) != 0600 && fchmod(d->fd, 0600) < 0)
		goto fail_errno;
	rc = superblock(d);
	if (rc < 0) {
		snprintf(err, errlen, "--disk: set up %s: %s", d->path,
			 strerror(-rc));
		return rc;
	}
	return rc;
fail_errno:
	rc = -errno;
	snprintf(err, errlen, "--disk: open %s: %s", d->path, strerror(errno));
	return rc;
}

void kvr__disk_file_close(struct kvr_disk *d)
{
	if (d->fd >= 0)
		close(d->fd); /* drops the lock */
	if (d->dirfd >= 0)
		close(d->dirfd);
	d->fd = d->dirfd = -1;
}
