/* SPDX-License-Identifier: MIT */
/*
 * Host facts about huge pages and the hugetlbfs side of named segments:
 * how many default-size huge pages are free (/proc/meminfo), whether a
 * directory is a hugetlbfs mount and which one to use, and the stale sweep
 * of pool files kept on such a mount while their .ctl lives in /dev/shm.
 * Creating and mapping a hugetlbfs file is in segment_map.c, next to the
 * tmpfs one, because both follow the same name rules.
 *
 * The sweep here judges a pool by its .ctl through kvr_seg_list(), so the
 * liveness rules of segment_sweep.c (what "owner alive" means) apply to
 * both directories alike; it adds only the cross-directory pairing.
 * Nothing here prints; failures return -errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <kvring/segment.h>
#include <kvring/unlink.h>

/* statfs f_type of hugetlbfs (linux/magic.h). */
#define HUGETLBFS_MAGIC_ 0x958458f6

int kvr_seg_hugetlb_info(struct kvr_hugetlb_info *out)
{
	unsigned long long total = 0, free_pages = 0, rsvd = 0, kb = 0;
	bool seen = false;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		seen |= sscanf(line, "HugePages_Total: %llu", &total) == 1;
		sscanf(line, "HugePages_Free: %llu", &free_pages);
		sscanf(line, "HugePages_Rsvd: %llu", &rsvd);
		sscanf(line, "Hugepagesize: %llu kB", &kb);
	}
	fclose(f);
	if (!seen || kb == 0)
		return -ENOENT;
	out->page_bytes = (size_t)kb * 1024u;
	out->total_pages = total;
	/* Reserved pages are promised to mappings already made. */
	out->free_pages = free_pages > rsvd ? free_pages - rsvd : 0;
	return 0;
}

uint64_t kvr_seg_huge_pages_for(uint64_t bytes, size_t page_bytes)
{
	if (page_bytes == 0)
		return 0;
	return bytes / page_bytes + (bytes % page_bytes != 0);
}

int kvr_seg_hugetlbfs_page(const char *dir, size_t *page_bytes)
{
	struct statfs sf;

	if (!dir || statfs(dir, &sf) < 0)
		return dir ? -errno : -EINVAL;
	if ((unsigned long)sf.f_type != (unsigned long)HUGETLBFS_MAGIC_)
		return -EINVAL;
	/* hugetlbfs reports its page size as the block size. */
	*page_bytes = (size_t)sf.f_bsize;
	return 0;
}

int kvr_seg_huge_dir_find(size_t page_bytes, char *buf, size_t n)
{
	char line[1024], dev[256], dir[512], type[64];
	struct kvr_hugetlb_info hi;
	int rc = -ENOENT;
	size_t hp = 0;
	FILE *f;

	if (page_bytes == 0) {
		if (kvr_seg_hugetlb_info(&hi) < 0)
			return -ENOENT;
		page_bytes = hi.page_bytes;
	}
	f = fopen("/proc/self/mounts", "re");
	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%255s %511s %63s", dev, dir, type) != 3 ||
		    strcmp(type, "hugetlbfs") != 0)
			continue;
		/* Mount points with spaces are octal-escaped: skip those. */
		if (strchr(dir, '\\'))
			continue;
		if (kvr_seg_hugetlbfs_page(dir, &hp) < 0 || hp != page_bytes ||
		    access(dir, W_OK | X_OK) < 0)
			continue;
		if (strlen(dir) >= n || strlen(dir) >= KVR_SEG_DIR_MAX) {
			rc = -EINVAL;
			continue;
		}
		memcpy(buf, dir, strlen(dir) + 1);
		rc = (int)strlen(dir);
		break;
	}
	fclose(f);
	return rc;
}

/* ---- The cross-directory sweep ---- */

/* What kvr_seg_list() saw in one directory, for one role. */
struct seen {
	enum kvr_seg_role role;
	struct kvr_seg_info *v;
	size_t n, cap;
};

static int note_entry(void *arg, const struct kvr_seg_info *info)
{
	struct seen *sn = arg;
	struct kvr_seg_info *nv;

	if (info->role != sn->role)
		return 0;
	if (sn->n == sn->cap) {
		size_t cap = sn->cap ? sn->cap * 2 : 16;

		nv = realloc(sn->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		sn->v = nv;
		sn->cap = cap;
	}
	sn->v[sn->n++] = *info;
	return 0;
}

static const struct kvr_seg_info *find_name(const struct seen *sn,
					    const char *name)
{
	for (size_t i = 0; i < sn->n; i++)
		if (strcmp(sn->v[i].name, name) == 0)
			return &sn->v[i];
	return NULL;
}

/*
 * Whether the pool's .ctl forbids removing it: present now and not judged
 * STALE (live, unknown, or created after the listing). Absent means no
 * live owner: a server creates its .ctl before the pool and removes it
 * after. Anything we cannot tell keeps the pool.
 */
static bool ctl_keeps(const char *ctl_dir, const char *ctl,
		      const struct seen *ctls)
{
	char path[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];
	const struct kvr_seg_info *seen = find_name(ctls, ctl);
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", ctl_dir, ctl);
	if (lstat(path, &st) < 0)
		return errno != ENOENT;
	return !seen || seen->state != KVR_SEG_STATE_STALE;
}

/* "<base>.pool" -> "<base>.ctl" in @ctl (false if it does not fit). */
static bool ctl_of(const char *pool, char *ctl, size_t n)
{
	size_t lp = strlen(pool), ls = strlen(KVR_SEG_POOL_SUFFIX);

	if (lp <= ls || strcmp(pool + lp - ls, KVR_SEG_POOL_SUFFIX) != 0 ||
	    lp - ls + strlen(KVR_SEG_CTL_SUFFIX) >= n)
		return false;
	memcpy(ctl, pool, lp - ls);
	strcpy(ctl + lp - ls, KVR_SEG_CTL_SUFFIX);
	return kvr_seg_name_valid(ctl);
}

/* Judge and maybe remove one pool file; updates @r. */
static int sweep_one(int dfd, const char *ctl_dir,
		     const struct kvr_seg_info *pool, const struct seen *ctls,
		     struct kvr_sweep_report *r)
{
	char ctl[KVR_SEG_NAME_MAX + 1];
	struct stat was;

	if (fstatat(dfd, pool->name, &was, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* gone meanwhile */
	if (!S_ISREG(was.st_mode) || was.st_uid != geteuid() ||
	    !ctl_of(pool->name, ctl, sizeof(ctl))) {
		r->skipped++;
		return 0;
	}
	if (ctl_keeps(ctl_dir, ctl, ctls)) {
		r->kept_live++;
		return 0;
	}
	/* Still the same regular file of ours (the same-inode unlink). */
	switch (kvr_unlink_same(dfd, pool->name, &was)) {
	case 0:
		break;
	case -ENOENT:
	case -ESTALE:
		r->skipped++;
		return 0;
	default:
		r->errors++;
		return 0;
	}
	r->removed++;
	kvr_sweep_note_name(r->removed_names, &r->nr_removed_names, pool->name);
	return 1;
}

int kvr_seg_sweep_pools(const char *pool_dir, const char *ctl_dir,
			const char *prefix, struct kvr_sweep_report *rep)
{
	struct seen ctls = {.role = KVR_SEG_ROLE_CTL};
	struct seen pools = {.role = KVR_SEG_ROLE_POOL};
	struct kvr_sweep_report r;
	int rc, dfd, removed = 0;

	if (!ctl_dir)
		ctl_dir = KVR_SEG_DEFAULT_DIR;
	if (!pool_dir || !prefix || !prefix[0])
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	/* The .ctl files first, so a pool is never judged without them. */
	rc = kvr_seg_list(ctl_dir, prefix, note_entry, &ctls);
	if (rc < 0)
		goto out;
	rc = kvr_seg_list(pool_dir, prefix, note_entry, &pools);
	if (rc < 0)
		goto out;
	dfd = open(pool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		goto out;
	}
	for (size_t i = 0; i < pools.n; i++)
		removed += sweep_one(dfd, ctl_dir, &pools.v[i], &ctls, &r);
	close(dfd);
	rc = removed;
out:
	free(ctls.v);
	free(pools.v);
	if (rep)
		*rep = r;
	return rc;
}
