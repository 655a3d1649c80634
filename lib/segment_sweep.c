/* SPDX-License-Identifier: MIT */
/*
 * The start-up sweep of stale segments (DESIGN rule 8) and the listing the
 * inspector's --list uses. Both classify directory entries the same way:
 * a "<base>.ctl" is live while its creator holds its liveness lock (an
 * OFD lock on a private open of the file, which no worker can take away;
 * the creator pid in the header is writable by every worker, so it only
 * decides for a header not yet published), a "<base>.pool" is judged by
 * its .ctl, or is an orphan when there is no .ctl.
 *
 * The sweep removes only what is provably ours and provably dead: name
 * prefix, valid name, regular file (never a symlink's target), our uid,
 * and an owner that is not alive. It relies on the server's ordering
 * contract (docs/segments.md): the .ctl is created before its .pool and
 * unlinked after it, so a .pool without a .ctl has no owner left.
 * Everything else is left alone and counted. Listing never modifies.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvring/proc.h>
#include <kvring/segment.h>
#include <kvring/unlink.h>

/* One directory entry kept between readdir and processing. */
struct entry {
	char name[KVR_SEG_NAME_MAX + 1];
};

struct entries {
	struct entry *v;
	size_t n, cap;
	unsigned nr_bad_names; /* prefix matched, name invalid: skipped */
};

static bool has_suffix(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls > lx && strcmp(s + ls - lx, suffix) == 0;
}

static enum kvr_seg_role role_of(const char *name)
{
	if (has_suffix(name, KVR_SEG_CTL_SUFFIX))
		return KVR_SEG_ROLE_CTL;
	if (has_suffix(name, KVR_SEG_POOL_SUFFIX))
		return KVR_SEG_ROLE_POOL;
	return KVR_SEG_ROLE_OTHER;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name,
		      ((const struct entry *)b)->name);
}

/*
 * Read the names in dfd that start with prefix, sorted. Names that match
 * the prefix but fail kvr_seg_name_valid() are only counted. The caller
 * frees es->v. Does not close dfd.
 */
static int collect(int dfd, const char *prefix, struct entries *es)
{
	size_t plen = strlen(prefix);
	struct dirent *d;
	DIR *dir;
	int fd2;

	memset(es, 0, sizeof(*es));
	/* fdopendir takes its fd; give it a duplicate and keep ours. */
	fd2 = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	if (fd2 < 0)
		return -errno;
	dir = fdopendir(fd2);
	if (!dir) {
		int rc = -errno;

		close(fd2);
		return rc;
	}
	rewinddir(dir);
	errno = 0;
	while ((d = readdir(dir)) != NULL) {
		if (strncmp(d->d_name, prefix, plen) != 0)
			continue;
		if (!kvr_seg_name_valid(d->d_name)) {
			es->nr_bad_names++;
			continue;
		}
		if (es->n == es->cap) {
			size_t cap = es->cap ? es->cap * 2 : 16;
			struct entry *v = realloc(es->v, cap * sizeof(*v));

			if (!v) {
				closedir(dir);
				free(es->v);
				es->v = NULL;
				return -ENOMEM;
			}
			es->v = v;
			es->cap = cap;
		}
		memcpy(es->v[es->n++].name, d->d_name, strlen(d->d_name) + 1);
	}
	closedir(dir);
	if (es->n > 1)
		qsort(es->v, es->n, sizeof(es->v[0]), cmp_entry);
	return 0;
}

/* "<base>.pool" -> "<base>.ctl" and back; false if it does not fit. */
/*
 * Open @dir (NULL: KVR_SEG_DEFAULT_DIR) and collect() its names under
 * @prefix into @es. Returns the directory's fd, which the caller closes
 * (and frees es->v), or -errno with nothing left open.
 */
static int open_collect(const char *dir, const char *prefix, struct entries *es)
{
	int dfd, rc;

	dfd = open(dir ? dir : KVR_SEG_DEFAULT_DIR,
		   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	rc = collect(dfd, prefix, es);
	if (rc < 0) {
		close(dfd);
		return rc;
	}
	return dfd;
}

static bool sibling_name(const char *name, enum kvr_seg_role role,
			 char out[KVR_SEG_NAME_MAX + 1])
{
	const char *from =
	    role == KVR_SEG_ROLE_CTL ? KVR_SEG_CTL_SUFFIX : KVR_SEG_POOL_SUFFIX;
	const char *to =
	    role == KVR_SEG_ROLE_CTL ? KVR_SEG_POOL_SUFFIX : KVR_SEG_CTL_SUFFIX;
	size_t base = strlen(name) - strlen(from);

	if (base + strlen(to) > KVR_SEG_NAME_MAX)
		return false;
	memcpy(out, name, base);
	memcpy(out + base, to, strlen(to) + 1);
	return true;
}

/* The liveness lock's probe (<kvring/segment.h>): the sweep is what
 * reads it; segment_map.c takes the lock. */
int kvr_seg_live_locked(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

/*
 * Read the header of a .ctl that st describes, through an fd that must
 * still be the same file. Fills the header fields of info.
 * Returns 0 if it has a full header with our magic, -EBADMSG if not, or
 * -errno if it cannot be read.
 */
static int read_ctl_hdr(int dfd, const char *name, const struct stat *st,
			struct kvr_seg_info *info)
{
	struct kvr_seg_hdr_shm h;
	struct stat st2;
	ssize_t n;
	int fd;

	/* O_NONBLOCK: harmless for files, and a swapped-in FIFO can't hang. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st2) < 0 || st2.st_dev != st->st_dev ||
	    st2.st_ino != st->st_ino || !S_ISREG(st2.st_mode)) {
		close(fd);
		return -ESTALE; /* replaced since we looked: judge nothing */
	}
	n = pread(fd, &h, sizeof(h), 0);
	info->live_locked = kvr_seg_live_locked(fd) == 1;
	close(fd);
	if (n < 0)
		return -errno;
	/*
	 * A short file or a foreign magic: not ours for sure, or a creator
	 * between open(O_EXCL) and kvr_seg_hdr_format(). Either way: keep.
	 */
	if ((size_t)n < sizeof(h) || h.magic != KVR_SEG_MAGIC)
		return -EBADMSG;
	info->has_hdr = true;
	/* A private copy: this plain read of ready races with no one. */
	info->ready = atomic_load_explicit(&h.ready, memory_order_relaxed) ==
		      KVR_SEG_READY;
	info->abi = h.abi;
	info->kind = h.kind;
	info->owner_pid = h.creator_pid;
	info->owner_start = h.creator_start;
	return 0;
}

/*
 * The verdict on a .ctl whose header was read: live while the lock is
 * held. Without the lock, a published header means its server is gone
 * (it held the lock from creation until after it unlinked its names);
 * an unpublished one may be a server between create and lock, or one
 * that crashed there: only then does the creator (pid, start time)
 * decide, and no worker has ever seen that header to forge it.
 */
static enum kvr_seg_state ctl_state(const struct kvr_seg_info *c)
{
	if (c->live_locked)
		return KVR_SEG_STATE_LIVE;
	if (!c->ready && kvr_proc_alive(c->owner_pid, c->owner_start))
		return KVR_SEG_STATE_LIVE;
	return KVR_SEG_STATE_STALE;
}

/*
 * Classify one entry. Fills info (and *st). Returns 0, or -errno if the
 * entry vanished (st->st_mode is then 0) or cannot be examined (the state
 * is then UNKNOWN).
 * A .ctl is LIVE/STALE by its creator, UNKNOWN without a good header; a
 * .pool follows its .ctl, or is ORPHAN when no .ctl exists at all.
 */
static int classify(int dfd, const char *name, struct kvr_seg_info *info,
		    struct stat *st)
{
	char sib[KVR_SEG_NAME_MAX + 1];
	struct kvr_seg_info ctl;
	struct stat cst;
	int rc;

	memset(info, 0, sizeof(*info));
	memset(st, 0, sizeof(*st)); /* st_mode 0: "no such entry" */
	memcpy(info->name, name, strlen(name) + 1);
	info->role = role_of(name);
	info->state = KVR_SEG_STATE_UNKNOWN;
	if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	info->bytes = (uint64_t)st->st_size;
	info->uid = st->st_uid;
	info->mode = st->st_mode & 07777;
	if (!S_ISREG(st->st_mode))
		return 0;

	if (info->role == KVR_SEG_ROLE_CTL) {
		rc = read_ctl_hdr(dfd, name, st, info);
		if (rc < 0)
			return rc == -EBADMSG ? 0 : rc;
		info->state = ctl_state(info);
		return 0;
	}
	if (info->role != KVR_SEG_ROLE_POOL ||
	    !sibling_name(name, KVR_SEG_ROLE_POOL, sib))
		return 0;
	/* The ordering contract: no .ctl at all means nobody owns it. */
	if (fstatat(dfd, sib, &cst, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			info->state = KVR_SEG_STATE_ORPHAN;
		return 0;
	}
	/* A .ctl exists: the pool's fate is the .ctl's, judged there. */
	if (!S_ISREG(cst.st_mode) || cst.st_uid != st->st_uid)
		return 0;
	memset(&ctl, 0, sizeof(ctl));
	if (read_ctl_hdr(dfd, sib, &cst, &ctl) < 0)
		return 0;
	info->owner_pid = ctl.owner_pid;
	info->owner_start = ctl.owner_start;
	info->live_locked = ctl.live_locked;
	info->state = ctl_state(&ctl);
	return 0;
}

void kvr_sweep_note_name(char names[][KVR_SEG_NAME_MAX + 1], unsigned *nr,
			 const char *name)
{
	if (*nr >= KVR_SWEEP_MAX_NAMES)
		return;
	memcpy(names[*nr], name, strlen(name) + 1);
	(*nr)++;
}

/*
 * Unlink name if it is still the regular file of our uid that @was
 * describes (NULL: any regular file of ours). Returns 0, -ENOENT if already
 * gone, -ESTALE if it changed, or the unlinkat error.
 */
static int unlink_if_same(int dfd, const char *name, const struct stat *was)
{
	struct stat now;

	if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(now.st_mode) || now.st_uid != geteuid())
		return -ESTALE;
	/* The same-inode unlink, against what we judged or just saw. */
	return kvr_unlink_same(dfd, name, was ? was : &now);
}

static void count_removal(struct kvr_sweep_report *rep, const char *name,
			  int rc)
{
	if (rc == 0) {
		rep->removed++;
		kvr_sweep_note_name(rep->removed_names, &rep->nr_removed_names,
				    name);
	} else if (rc != -ENOENT) {
		rep->errors++;
	}
}

/* A stale .ctl: remove its pool first, the .ctl last (ordering contract). */
static void sweep_stale_ctl(int dfd, const char *name, const struct stat *st,
			    struct kvr_sweep_report *rep)
{
	char pool[KVR_SEG_NAME_MAX + 1];
	struct stat pst;

	if (sibling_name(name, KVR_SEG_ROLE_CTL, pool) &&
	    kvr_seg_name_valid(pool) &&
	    fstatat(dfd, pool, &pst, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(pst.st_mode) && pst.st_uid == geteuid())
		count_removal(rep, pool, unlink_if_same(dfd, pool, &pst));
	count_removal(rep, name, unlink_if_same(dfd, name, st));
}

int kvr_seg_sweep(const char *dir, const char *prefix,
		  struct kvr_sweep_report *rep)
{
	struct kvr_sweep_report local;
	struct kvr_seg_info info;
	struct entries es;
	struct stat st;
	uid_t me = geteuid();
	int dfd, rc;

	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	if (!kvr_seg_name_valid(prefix))
		return -EINVAL;
	dfd = open_collect(dir, prefix, &es);
	if (dfd < 0)
		return dfd;
	rep->skipped += es.nr_bad_names;

	/* Pass 1: control segments decide for themselves and their pools. */
	for (size_t i = 0; i < es.n; i++) {
		const char *name = es.v[i].name;

		if (role_of(name) != KVR_SEG_ROLE_CTL)
			continue;
		rc = classify(dfd, name, &info, &st);
		if (rc == -ENOENT && st.st_mode == 0)
			continue; /* vanished since readdir */
		if (rc < 0 || !S_ISREG(st.st_mode) || st.st_uid != me) {
			rep->skipped++;
		} else if (!info.has_hdr) {
			rep->bad_header++;
			kvr_sweep_note_name(rep->bad_names, &rep->nr_bad_names,
					    name);
		} else if (info.state == KVR_SEG_STATE_LIVE) {
			rep->kept_live++;
		} else {
			sweep_stale_ctl(dfd, name, &st, rep);
		}
	}
	/* Pass 2: pools still present, and everything else. */
	for (size_t i = 0; i < es.n; i++) {
		const char *name = es.v[i].name;
		enum kvr_seg_role role = role_of(name);

		if (role == KVR_SEG_ROLE_CTL)
			continue;
		if (role == KVR_SEG_ROLE_OTHER) {
			rep->skipped++;
			continue;
		}
		rc = classify(dfd, name, &info, &st);
		/* Gone: removed with its stale .ctl in pass 1 (counted). */
		if (st.st_mode == 0)
			continue;
		if (rc < 0 || !S_ISREG(st.st_mode) || st.st_uid != me)
			rep->skipped++;
		else if (info.state == KVR_SEG_STATE_ORPHAN)
			count_removal(rep, name,
				      unlink_if_same(dfd, name, &st));
		else if (info.state == KVR_SEG_STATE_LIVE)
			rep->kept_live++;
		else
			rep->skipped++; /* its .ctl is not ours to judge */
	}
	free(es.v);
	close(dfd);
	return (int)rep->removed;
}

/*
 * For kvr_seg_list(dir, NULL, ...): a name with KVR_SEG_PREFIX is kvring's
 * by convention; any other only with proof: a .ctl with kvring's magic and
 * a full header, or a .pool judged by such a .ctl (classify() sets
 * owner_pid and a live/stale state only then).
 */
static bool proven_ours(const struct kvr_seg_info *in)
{
	if (strncmp(in->name, KVR_SEG_PREFIX, strlen(KVR_SEG_PREFIX)) == 0)
		return true;
	if (in->role == KVR_SEG_ROLE_CTL)
		return in->has_hdr;
	return in->role == KVR_SEG_ROLE_POOL && in->owner_pid > 0 &&
	       (in->state == KVR_SEG_STATE_LIVE ||
		in->state == KVR_SEG_STATE_STALE);
}

int kvr_seg_list(const char *dir, const char *prefix, kvr_seg_list_cb *cb,
		 void *arg)
{
	struct kvr_seg_info info;
	struct entries es;
	struct stat st;
	int dfd, rc, count = 0;

	if ((prefix && !kvr_seg_name_valid(prefix)) || !cb)
		return -EINVAL;
	dfd = open_collect(dir, prefix ? prefix : "", &es);
	if (dfd < 0)
		return dfd;
	for (size_t i = 0; i < es.n; i++) {
		/* An unreadable header still lists, with state UNKNOWN. */
		(void)classify(dfd, es.v[i].name, &info, &st);
		if (!S_ISREG(st.st_mode))
			continue; /* not a file, or vanished since readdir */
		if (!prefix && !proven_ours(&info))
			continue; /* another program's file: not ours to show */
		rc = cb(arg, &info);
		if (rc < 0) {
			count = rc;
			break;
		}
		count++;
	}
	free(es.v);
	close(dfd);
	return count;
}
