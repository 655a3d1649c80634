/* SPDX-License-Identifier: MIT */
/*
 * Segment backends: a named file in a tmpfs or hugetlbfs directory, an
 * anonymous memfd (hugetlb or not), private anonymous memory; mapping a
 * received fd or a named file; and teardown. The header, names and
 * prefault are in segment.c, huge-page host facts in segment_huge.c.
 *
 * Two rules shape every function here. First, a full filesystem or memory
 * limit must show up as an error at creation, never as a SIGBUS when a
 * page is first touched later: so every page is reserved before the
 * segment is handed out (fallocate on tmpfs; on hugetlb the shared mmap
 * itself, see reserve_file). Second, no descriptor may outlive an
 * attach: attach closes the fd it was given whatever happens. Nothing here
 * prints; every failure returns -errno and explains itself in kvr_err, and
 * outputs stay untouched on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <kvring/parse.h>
#include <kvring/segment.h>
#include <kvring/unlink.h>

/* Mappings at least this big ask for transparent huge pages. */
#define THP_MIN_BYTES (2u << 20)

/* Host facts: page sizes, THP policy and free hugetlb pages. */

static size_t page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (size_t)p : 4096u;
}

static size_t round_up(size_t v, size_t align)
{
	return (v + align - 1) / align * align;
}

/*
 * Whether a sysfs THP policy file selects one of @ok (the selected word is
 * the one in brackets, e.g. "always [madvise] never").
 */
static bool thp_policy_allows(const char *path, const char *const *ok)
{
	char buf[256], *open_br, *close_br;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	open_br = strchr(buf, '[');
	close_br = open_br ? strchr(open_br, ']') : NULL;
	if (!close_br)
		return false;
	*close_br = '\0';
	for (; *ok; ok++)
		if (strcmp(open_br + 1, *ok) == 0)
			return true;
	return false;
}

/* Ask for THP on a shmem (shared=true) or anonymous mapping; best effort. */
static bool try_thp(void *base, size_t bytes, bool shared)
{
	static const char *const shmem_ok[] = {"always", "within_size",
					       "advise", "force", NULL};
	static const char *const anon_ok[] = {"always", "madvise", NULL};
	const char *path =
	    shared ? "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
		   : "/sys/kernel/mm/transparent_hugepage/enabled";

	if (bytes < THP_MIN_BYTES ||
	    !thp_policy_allows(path, shared ? shmem_ok : anon_ok))
		return false;
	return madvise(base, bytes, MADV_HUGEPAGE) == 0;
}

/*
 * Free hugetlb bytes of the default huge page size; *hp_bytes receives the
 * huge page size. Returns 0 when the kernel has none or none are free.
 */
static uint64_t hugetlb_free_bytes(size_t *hp_bytes)
{
	struct kvr_hugetlb_info hi;

	*hp_bytes = 0;
	if (kvr_seg_hugetlb_info(&hi) < 0)
		return 0;
	*hp_bytes = hi.page_bytes;
	return hi.free_pages * hi.page_bytes;
}

static void seg_empty(struct kvr_seg *s)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->live_fd = -1;
	s->backend = KVR_SEG_BACKEND_NONE;
}

/*
 * The liveness lock of a segment we just created at @path (fd @fd): a
 * second open of the same inode, with an OFD read lock on the whole file.
 * Its own open file description, never sent to a worker, so no worker can
 * unlock it (a worker holding the first fd shares the other description
 * only); the kernel drops it when we exit, however we exit.
 * Return: the fd, or -errno.
 */
static int take_live_lock(const char *path, int fd)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	struct stat a, b;
	int lfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (lfd < 0)
		return -errno;
	if (fstat(fd, &a) < 0 || fstat(lfd, &b) < 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino) {
		close(lfd);
		return -ESTALE; /* replaced between create and reopen */
	}
	if (fcntl(lfd, F_OFD_SETLK, &fl) < 0) {
		int rc = -errno;

		close(lfd);
		return rc;
	}
	return lfd;
}

const char *kvr_seg_backend_name(enum kvr_seg_backend b)
{
	switch (b) {
	case KVR_SEG_BACKEND_SHM:
		return "shm";
	case KVR_SEG_BACKEND_MEMFD:
		return "memfd";
	case KVR_SEG_BACKEND_PRIVATE:
		return "private";
	case KVR_SEG_BACKEND_FD:
		return "fd";
	case KVR_SEG_BACKEND_NONE:
	default:
		return "none";
	}
}

/* Message for a failed reservation in a directory, with statvfs numbers. */
static int nospace(struct kvr_err *e, const char *path, const char *dir,
		   size_t need, uint64_t avail)
{
	char a[KVR_SIZE_STR_MAX], b[KVR_SIZE_STR_MAX];

	return kvr_err_set(e, -ENOSPC,
			   "create %s: needs %s (%zu bytes), %s available on "
			   "%s; enlarge %s (mount -o remount,size=...) or "
			   "lower --pool-size",
			   path, kvr_format_size(need, a, sizeof(a)), need,
			   kvr_format_size(avail, b, sizeof(b)), dir, dir);
}

/*
 * Reserve every page of a file (named or memfd). On tmpfs posix_fallocate
 * allocates them, so running out is ENOSPC here, not SIGBUS later.
 *
 * On hugetlb only the size is set here: the reservation is the shared
 * mmap that follows. A MAP_SHARED hugetlb mmap without MAP_NORESERVE
 * takes every huge page of the range out of the free pool into the
 * inode's reserve map (HugePages_Rsvd, and the mount's size= limit) or
 * fails with ENOMEM, and the reserve stays with the file until it is
 * removed, so no fault by any process that maps it later can SIGBUS.
 * fallocate would also zero every page, 150 ms to seconds per GiB, and
 * that must not sit between start and the socket: the zeroing happens at
 * first touch instead (kvringd's background pre-fault, or a worker's).
 * Returns 0 or a positive errno, as posix_fallocate does.
 */
static int reserve_file(int fd, size_t bytes, bool hugetlb)
{
	if (!hugetlb)
		return posix_fallocate(fd, 0, (off_t)bytes);
	return ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
}

/* Message for a hugetlb shortage: pages needed, free, and what to do. */
static int nohuge(struct kvr_err *e, const char *what, size_t bytes, size_t hp)
{
	struct kvr_hugetlb_info hi = {0};
	uint64_t need = kvr_seg_huge_pages_for(bytes, hp);

	(void)kvr_seg_hugetlb_info(&hi);
	return kvr_err_set(
	    e, -ENOSPC,
	    "create %s: needs %" PRIu64 " huge pages of %zu "
	    "KiB, %" PRIu64 " free; reserve more (echo %" PRIu64
	    " > /proc/sys/vm/nr_hugepages) or lower "
	    "--pool-size",
	    what, need, hp >> 10, hi.free_pages,
	    hi.total_pages + (need > hi.free_pages ? need - hi.free_pages : 0));
}

/* *dir, or the default directory when it is NULL; and -EINVAL (said: "@verb
 * segment NAME: invalid name@hint") when @name is not a segment name. */
static int name_check(const char **dir, const char *name, const char *verb,
		      const char *hint, struct kvr_err *e)
{
	if (!*dir)
		*dir = KVR_SEG_DEFAULT_DIR;
	if (!kvr_seg_name_valid(name))
		return kvr_err_set(e, -EINVAL,
				   "%s segment \"%.70s\": invalid name%s", verb,
				   name ? name : "(null)", hint);
	return 0;
}

/*
 * A named segment @dir/@name: tmpfs (hugetlb false) or hugetlbfs with
 * pages of @hp bytes (@bytes already rounded to them). The name checks,
 * O_EXCL and the exact mode are the same for both.
 */
void (*kvr__seg_create_hook)(const char *path);

static int create_named(const char *dir, const char *name, size_t bytes,
			mode_t mode, gid_t gid, bool hugetlb, size_t hp,
			struct kvr_seg *out, struct kvr_err *e)
{
	char path[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];
	struct statvfs vfs;
	struct kvr_seg s;
	uint64_t avail = 0;
	void *base;
	int fd, rc;

	rc = name_check(&dir, name, "create",
			" (1-63 of [A-Za-z0-9._-], no \"..\")", e);
	if (rc < 0)
		return rc;
	if (bytes == 0)
		return kvr_err_set(e, -EINVAL, "create %s: size is 0", name);
	if (mode == 0)
		mode = 0600;
	if (mode & ~(mode_t)0777)
		return kvr_err_set(e, -EINVAL,
				   "create %s: mode %o is not 0..0777", name,
				   (unsigned)mode);
	if (dir[0] == '\0' || strlen(dir) >= KVR_SEG_DIR_MAX)
		return kvr_err_set(e, -EINVAL,
				   "create %s: directory is empty or longer "
				   "than %d bytes",
				   name, KVR_SEG_DIR_MAX - 1);
	snprintf(path, sizeof(path), "%s/%s", dir, name);

	/* O_EXCL: never adopt or truncate a file someone else made. */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  mode);
	if (fd < 0) {
		rc = -errno;
		if (rc == -EEXIST)
			return kvr_err_set(e, rc,
					   "create %s: already exists (a live "
					   "server may own it; stale ones are "
					   "removed by the start-up sweep)",
					   path);
		return kvr_err_set(e, rc, "create %s: %s", path, strerror(-rc));
	}
	if (kvr__seg_create_hook)
		kvr__seg_create_hook(path);
	/* The umask may have narrowed mode; fchmod sets exactly it. */
	if (fchmod(fd, mode) < 0) {
		rc = kvr_err_set(e, -errno, "create %s: chmod %o: %s", path,
				 (unsigned)mode, strerror(errno));
		goto err_unlink;
	}
	if (gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) < 0) {
		rc = kvr_err_set(e, -errno, "create %s: chown to gid %lu: %s",
				 path, (unsigned long)gid, strerror(errno));
		goto err_unlink;
	}
	/*
	 * Cheap pre-check: a pool far bigger than the mount would otherwise
	 * make fallocate allocate (and then free) everything that is left.
	 * hugetlbfs has no meaningful statvfs without size=: the caller
	 * checks free huge pages instead.
	 */
	if (!hugetlb && fstatvfs(fd, &vfs) == 0) {
		avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
		if ((uint64_t)round_up(bytes, page_size()) > avail) {
			rc = nospace(e, path, dir, bytes, avail);
			goto err_unlink;
		}
	}
	/*
	 * Reserve every page now: on tmpfs this allocates them, so running
	 * out is ENOSPC here and not SIGBUS at first touch. posix_fallocate
	 * returns the error number instead of setting errno.
	 */
	rc = reserve_file(fd, bytes, hugetlb);
	if (rc != 0) {
		if (rc == ENOSPC && hugetlb) {
			rc = nohuge(e, path, bytes, hp);
		} else if (rc == ENOSPC) {
			if (fstatvfs(fd, &vfs) == 0)
				avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
			rc = nospace(e, path, dir, bytes, avail);
		} else {
			rc = kvr_err_set(e, -rc,
					 "create %s: reserve %zu bytes: %s",
					 path, bytes, strerror(rc));
		}
		goto err_unlink;
	}
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED && hugetlb && errno == ENOMEM) {
		/* The reservation (reserve_file) failed: pages are short. */
		rc = nohuge(e, path, bytes, hp);
		goto err_unlink;
	}
	if (base == MAP_FAILED) {
		rc = kvr_err_set(e, -errno, "create %s: mmap %zu bytes: %s",
				 path, bytes, strerror(errno));
		goto err_unlink;
	}

	seg_empty(&s);
	s.live_fd = take_live_lock(path, fd);
	if (s.live_fd < 0) {
		rc = kvr_err_set(e, s.live_fd, "create %s: liveness lock: %s",
				 path, strerror(-s.live_fd));
		munmap(base, bytes);
		goto err_unlink;
	}
	s.base = base;
	s.bytes = bytes;
	s.fd = fd;
	s.backend = KVR_SEG_BACKEND_SHM;
	s.owner = true;
	s.writable = true;
	s.hugetlb = hugetlb;
	s.huge = hugetlb || try_thp(base, bytes, true);
	s.page_bytes = hugetlb ? hp : page_size();
	snprintf(s.name, sizeof(s.name), "%s", name);
	snprintf(s.dir, sizeof(s.dir), "%s", dir);
	*out = s;
	return 0;

err_unlink:
	/*
	 * We made it with O_EXCL, but the name may have been replaced since
	 * (the directory is shared): remove it only while it is our inode.
	 */
	(void)kvr_unlink_same_fd(AT_FDCWD, path, fd);
	close(fd);
	return rc;
}

int kvr_seg_create_shm(const char *dir, const char *name, size_t bytes,
		       mode_t mode, gid_t gid, struct kvr_seg *out,
		       struct kvr_err *e)
{
	return create_named(dir, name, bytes, mode, gid, false, 0, out, e);
}

int kvr_seg_create_hugetlbfs(const char *dir, const char *name, size_t bytes,
			     mode_t mode, gid_t gid, struct kvr_seg *out,
			     struct kvr_err *e)
{
	size_t hp = 0;
	int rc;

	if (!dir)
		return kvr_err_set(e, -EINVAL,
				   "create huge-page segment: no directory");
	rc = kvr_seg_hugetlbfs_page(dir, &hp);
	if (rc < 0)
		return kvr_err_set(e, rc == -EINVAL ? -EINVAL : rc,
				   "create huge-page segment in %s: %s", dir,
				   rc == -EINVAL ? "not a hugetlbfs mount "
						   "(mount -t hugetlbfs none "
						   "DIR)"
						 : strerror(-rc));
	if (bytes == 0 || bytes > SIZE_MAX - hp)
		return kvr_err_set(e, -EINVAL, "create %s: bad size %zu",
				   name ? name : "(null)", bytes);
	return create_named(dir, name, round_up(bytes, hp), mode, gid, true, hp,
			    out, e);
}

/*
 * One memfd attempt: create, size and reserve, seal, map. On failure
 * everything is undone and the message is in e.
 */
static int memfd_try(const char *name, size_t bytes, bool hugetlb,
		     bool seal_later, struct kvr_seg *s, struct kvr_err *e)
{
	unsigned mfd = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	void *base;
	int fd, rc;

	if (hugetlb)
		mfd |= MFD_HUGETLB;
	fd = memfd_create(name, mfd);
	if (fd < 0)
		return kvr_err_set(e, -errno, "create memfd %s: %s", name,
				   strerror(errno));
	/*
	 * Reserve every page (fallocate extends the size too). A hugetlb
	 * memfd only gets its size here; its mmap below reserves the pages
	 * (see reserve_file).
	 */
	rc = reserve_file(fd, bytes, hugetlb);
	if (rc != 0) {
		rc = kvr_err_set(e, -rc,
				 "create memfd %s: reserve %zu bytes%s: %s; "
				 "free memory or lower --pool-size",
				 name, bytes, hugetlb ? " of huge pages" : "",
				 strerror(rc));
		goto err_close;
	}
	/*
	 * No one holding this fd (a worker, say) may shrink it under the
	 * others' mappings (SIGBUS) or grow it; F_SEAL_SEAL stops anyone
	 * from adding seals, e.g. F_SEAL_FUTURE_WRITE against later workers.
	 * KVR_SEG_SEAL_LATER leaves F_SEAL_SEAL to kvr_chanmap_ro_fd(), which
	 * adds F_SEAL_FUTURE_WRITE with it before any worker gets the fd.
	 */
	if (seal_later)
		seals &= ~F_SEAL_SEAL;
	if (fcntl(fd, F_ADD_SEALS, seals) < 0) {
		rc = kvr_err_set(e, -errno, "create memfd %s: seal: %s", name,
				 strerror(errno));
		goto err_close;
	}
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED && hugetlb && errno == ENOMEM) {
		struct stat st;

		/* The reservation failed: the huge pages are short. */
		rc = nohuge(e, name, bytes,
			    fstat(fd, &st) == 0 ? (size_t)st.st_blksize
						: page_size());
		goto err_close;
	}
	if (base == MAP_FAILED) {
		rc = kvr_err_set(e, -errno,
				 "create memfd %s: mmap %zu bytes: %s", name,
				 bytes, strerror(errno));
		goto err_close;
	}
	seg_empty(s);
	s->base = base;
	s->bytes = bytes;
	s->fd = fd;
	s->backend = KVR_SEG_BACKEND_MEMFD;
	s->owner = true;
	s->writable = true;
	s->hugetlb = hugetlb;
	s->huge = hugetlb || try_thp(base, bytes, true);
	s->page_bytes = page_size();
	if (hugetlb) {
		struct stat st;

		/* A hugetlb memfd reports its page size as the block size. */
		s->page_bytes =
		    fstat(fd, &st) == 0 && (size_t)st.st_blksize > page_size()
			? (size_t)st.st_blksize
			: page_size();
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	return 0;

err_close:
	close(fd);
	return rc;
}

int kvr_seg_create_memfd(const char *name, size_t bytes, unsigned flags,
			 struct kvr_seg *out, struct kvr_err *e)
{
	struct kvr_seg s;
	int rc;

	if (!kvr_seg_name_valid(name))
		return kvr_err_set(e, -EINVAL,
				   "create memfd \"%.70s\": invalid name",
				   name ? name : "(null)");
	if (bytes == 0 ||
	    (flags & ~(KVR_SEG_TRY_HUGETLB | KVR_SEG_NEED_HUGETLB |
		       KVR_SEG_SEAL_LATER)))
		return kvr_err_set(e, -EINVAL,
				   "create memfd %s: size 0 or unknown flags "
				   "0x%x",
				   name, flags);
	if (flags & (KVR_SEG_TRY_HUGETLB | KVR_SEG_NEED_HUGETLB)) {
		size_t hp;
		uint64_t free_bytes = hugetlb_free_bytes(&hp);

		/* Only when the free huge pages cover it: else no attempt. */
		if (hp > 0 && bytes <= SIZE_MAX - hp &&
		    free_bytes >= round_up(bytes, hp)) {
			rc = memfd_try(name, round_up(bytes, hp), true,
				       flags & KVR_SEG_SEAL_LATER, &s,
				       (flags & KVR_SEG_NEED_HUGETLB) ? e
								      : NULL);
			if (rc == 0) {
				*out = s;
				return 0;
			}
			if (flags & KVR_SEG_NEED_HUGETLB)
				return rc;
		} else if (flags & KVR_SEG_NEED_HUGETLB) {
			if (hp == 0)
				return kvr_err_set(
				    e, -ENOSYS,
				    "create memfd %s: the kernel "
				    "has no huge pages",
				    name);
			return nohuge(e, name, bytes, hp);
		}
		/* Fall back to normal pages; the caller logs which it got. */
	}
	rc = memfd_try(name, bytes, false, flags & KVR_SEG_SEAL_LATER, &s, e);
	if (rc < 0)
		return rc;
	*out = s;
	return 0;
}

int kvr_seg_create_private(size_t bytes, struct kvr_seg *out, struct kvr_err *e)
{
	struct kvr_seg s;
	void *base;

	if (bytes == 0)
		return kvr_err_set(e, -EINVAL,
				   "create private pool: size is 0");
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return kvr_err_set(e, -errno,
				   "create private pool: mmap %zu bytes: %s",
				   bytes, strerror(errno));
	seg_empty(&s);
	s.base = base;
	s.bytes = bytes;
	s.backend = KVR_SEG_BACKEND_PRIVATE;
	s.owner = true;
	s.writable = true;
	s.page_bytes = page_size();
	s.huge = try_thp(base, bytes, false);
	*out = s;
	return 0;
}

int kvr_seg_attach_fd(int fd, size_t bytes, int prot, struct kvr_seg *out,
		      struct kvr_err *e)
{
	struct kvr_seg s;
	struct stat st;
	void *base;
	int rc;

	if (fd < 0)
		return kvr_err_set(e, -EINVAL, "attach fd %d: not a descriptor",
				   fd);
	if (prot != PROT_READ && prot != (PROT_READ | PROT_WRITE)) {
		rc = kvr_err_set(e, -EINVAL, "attach fd %d: prot 0x%x", fd,
				 (unsigned)prot);
		goto out_close;
	}
	if (fstat(fd, &st) < 0) {
		rc = kvr_err_set(e, -errno, "attach fd %d: fstat: %s", fd,
				 strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = kvr_err_set(e, -EINVAL,
				 "attach fd %d: not a regular file (mode 0%o)",
				 fd, (unsigned)st.st_mode);
		goto out_close;
	}
	if (bytes == 0)
		bytes = (size_t)st.st_size;
	if (st.st_size <= 0 || (uint64_t)st.st_size < (uint64_t)bytes) {
		rc = kvr_err_set(e, -ERANGE,
				 "attach fd %d: file has %lld bytes, need %zu",
				 fd, (long long)st.st_size, bytes);
		goto out_close;
	}
	/*
	 * A hugetlb mapping can only be unmapped in whole huge pages: map a
	 * length rounded up to the file's page size (the file holds it).
	 */
	if ((size_t)st.st_blksize > page_size() &&
	    bytes <= SIZE_MAX - (size_t)st.st_blksize &&
	    (uint64_t)round_up(bytes, (size_t)st.st_blksize) <=
		(uint64_t)st.st_size)
		bytes = round_up(bytes, (size_t)st.st_blksize);
	base = mmap(NULL, bytes, prot, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = kvr_err_set(e, -errno, "attach fd %d: mmap %zu bytes: %s",
				 fd, bytes, strerror(errno));
		goto out_close;
	}
	seg_empty(&s);
	s.base = base;
	s.bytes = bytes;
	s.backend = KVR_SEG_BACKEND_FD;
	s.writable = (prot & PROT_WRITE) != 0;
	/* hugetlbfs reports its page size as the block size. */
	s.hugetlb = (size_t)st.st_blksize > page_size();
	s.huge = s.hugetlb;
	s.page_bytes = s.hugetlb ? (size_t)st.st_blksize : page_size();
	*out = s;
	rc = 0;
out_close:
	/* Ownership of fd was ours from the first line: close it always. */
	close(fd);
	return rc;
}

int kvr_seg_open_name(const char *dir, const char *name, bool rdonly,
		      struct kvr_seg *out, struct kvr_err *e)
{
	char path[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];
	int prot = rdonly ? PROT_READ : PROT_READ | PROT_WRITE;
	struct kvr_seg s;
	struct stat st;
	void *base;
	int fd, rc;

	rc = name_check(&dir, name, "open", "", e);
	if (rc < 0)
		return rc;
	if (dir[0] == '\0' || strlen(dir) >= KVR_SEG_DIR_MAX)
		return kvr_err_set(e, -EINVAL, "open %s: bad directory", name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	/* O_NONBLOCK: a FIFO planted under our name must not hang us. */
	fd = open(path, (rdonly ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC |
			    O_NONBLOCK);
	if (fd < 0)
		return kvr_err_set(e, -errno, "open %s: %s", path,
				   strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = kvr_err_set(e, -errno, "open %s: fstat: %s", path,
				 strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = kvr_err_set(e, -EINVAL, "open %s: not a regular file",
				 path);
		goto out_close;
	}
	if (st.st_size <= 0) {
		rc = kvr_err_set(e, -ERANGE, "open %s: empty file", path);
		goto out_close;
	}
	base = mmap(NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = kvr_err_set(e, -errno, "open %s: mmap: %s", path,
				 strerror(errno));
		goto out_close;
	}
	seg_empty(&s);
	s.base = base;
	s.bytes = (size_t)st.st_size;
	s.backend = KVR_SEG_BACKEND_SHM;
	s.writable = !rdonly;
	s.hugetlb = (size_t)st.st_blksize > page_size();
	s.page_bytes = s.hugetlb ? (size_t)st.st_blksize : page_size();
	snprintf(s.name, sizeof(s.name), "%s", name);
	snprintf(s.dir, sizeof(s.dir), "%s", dir);
	*out = s;
	rc = 0;
out_close:
	close(fd);
	return rc;
}

static void seg_release(struct kvr_seg *s, bool may_unlink)
{
	char path[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];

	if (!s)
		return;
	struct stat mine;
	bool named = s->owner && s->backend == KVR_SEG_BACKEND_SHM &&
		     s->name[0] != '\0' && s->dir[0] != '\0';
	bool have_mine = false;

	if (s->base)
		munmap(s->base, s->bytes);
	if (s->fd >= 0) {
		have_mine = named && fstat(s->fd, &mine) == 0;
		close(s->fd);
	}
	if (may_unlink && named) {
		snprintf(path, sizeof(path), "%s/%s", s->dir, s->name);
		/*
		 * Only while the name is still the inode we created: another
		 * server may have taken the name since (after a sweep that
		 * wrongly judged us dead), and its file is not ours to
		 * remove. ENOENT (swept already) is fine.
		 */
		if (have_mine)
			(void)kvr_unlink_same(AT_FDCWD, path, &mine);
	}
	/* Last: we are alive (for the sweep) until our names are gone. */
	if (named && s->live_fd >= 0)
		close(s->live_fd);
	/* Leave an empty handle: a second call finds nothing to do. */
	seg_empty(s);
}

void kvr_seg_destroy(struct kvr_seg *s)
{
	seg_release(s, true);
}

void kvr_seg_detach(struct kvr_seg *s)
{
	seg_release(s, false);
}

int kvr_seg_fd(const struct kvr_seg *s)
{
	return s && s->fd >= 0 ? s->fd : -EBADF;
}
