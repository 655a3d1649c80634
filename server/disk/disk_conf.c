/* SPDX-License-Identifier: MIT */
/*
 * disk_conf.c - the --disk* options of kvringd (docs/config.md): their
 * defaults, one option at a time, and the check of them together. Pure:
 * no file is looked at here (kvr_disk_open() checks the directory).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <kvring/disk.h>
#include <kvring/parse.h>

/* The tier starts off (dir ""): only --disk turns it on. */
void kvr_disk_conf_defaults(struct kvr_disk_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->size_bytes = KVR_DISK_DEF_SIZE;
	c->chunk_bytes = KVR_DISK_DEF_CHUNK;
	c->mode = KVR_DISK_EVICT;
}

/* One option, checked alone so the message names it; limits that tie
 * two options wait for kvr_disk_conf_check(). On error @c is unchanged. */
int kvr_disk_conf_opt(struct kvr_disk_conf *c, const char *name,
		      const char *val, char *err, size_t errlen)
{
	uint64_t v;

	if (strcmp(name, "disk") == 0) {
		/* Absolute only: kvr_disk_open() walks the path from "/",
		 * one component at a time, to check each for a symlink. */
		if (!val || val[0] != '/' || strlen(val) >= sizeof(c->dir)) {
			snprintf(err, errlen,
				 "--disk '%s': give an absolute directory "
				 "path (at most %zu bytes)",
				 val ? val : "", sizeof(c->dir) - 1);
			return -EINVAL;
		}
		strcpy(c->dir, val);
		return 0;
	}
	if (strcmp(name, "disk-mode") == 0) {
		if (val && strcmp(val, "evict") == 0)
			c->mode = KVR_DISK_EVICT;
		else if (val && strcmp(val, "commit") == 0)
			c->mode = KVR_DISK_COMMIT;
		else {
			snprintf(err, errlen,
				 "--disk-mode '%s': use evict (write chunks "
				 "the pool evicts) or commit (write every "
				 "commit)",
				 val ? val : "");
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(name, "disk-size") == 0 || strcmp(name, "disk-chunk") == 0) {
		/* A chunk is a record's payload, moved with O_DIRECT: a
		 * multiple of the 4 KiB block. */
		bool chunk = name[5] == 'c';

		if (!val || kvr_parse_size(val, &v) < 0 ||
		    (chunk && (v == 0 || v > KVR_DISK_MAX_CHUNK ||
			       v % KVR_DISK_BLOCK)) ||
		    (!chunk && v < KVR_DISK_MIN_SIZE)) {
			if (chunk)
				snprintf(err, errlen,
					 "--disk-chunk '%s': give a size, a "
					 "multiple of 4K up to 256M, such as "
					 "2M",
					 val ? val : "");
			else
				snprintf(err, errlen,
					 "--disk-size '%s': give a size of at "
					 "least 16M, such as 64G",
					 val ? val : "");
			return -EINVAL;
		}
		if (chunk)
			c->chunk_bytes = v;
		else
			c->size_bytes = v;
		return 0;
	}
	snprintf(err, errlen, "unknown disk option --%s", name);
	return -EINVAL;
}

/* The options together, once all are parsed, so that their order on the
 * command line does not matter. */
int kvr_disk_conf_check(const struct kvr_disk_conf *c, char *err, size_t errlen)
{
	uint64_t rec = KVR_DISK_BLOCK + c->chunk_bytes;

	if (!c->dir[0])
		return 0;
	/* The superblock plus at least four records: a smaller file could
	 * not hold a request's prefix of chunks. */
	if (c->size_bytes < KVR_DISK_BLOCK + 4 * rec) {
		snprintf(err, errlen,
			 "--disk-size %llu holds fewer than 4 records of "
			 "--disk-chunk %llu bytes: give a larger --disk-size "
			 "or a smaller --disk-chunk",
			 (unsigned long long)c->size_bytes,
			 (unsigned long long)c->chunk_bytes);
		return -EINVAL;
	}
	return 0;
}
