/* SPDX-License-Identifier: MIT */
/*
 * disk_suite.h - helpers of the disk tier suites (test_disk*.c): a
 * scratch directory on the machine's disk (under the test's working
 * directory, in the build tree; a tmpfs there fails the test, since the
 * suites exist to drive real files with O_DIRECT), kvringd with --disk,
 * the disk counters of the control header, and chunk batches stored and
 * read back bit-exact. Header-only, as worker_srv.h.
 */
#ifndef KVR_DISK_SUITE_H
#define KVR_DISK_SUITE_H

#include <ftw.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "l2_suite.h"

#define T_DISK(t, f)                                                           \
	atomic_load_explicit(&(t)->hdr->disk.f, memory_order_relaxed)

#define DT_CHUNK (1u << 20) /* every chunk: 1 MiB */
#define DT_BATCH 4u	    /* chunks per stored request */

/* A fresh private directory for --disk (0700), on a real disk. */
static inline void dt_scratch(char *dir, size_t n)
{
	struct statfs sf;
	char cwd[512];

	cr_assert(getcwd(cwd, sizeof(cwd)));
	snprintf(dir, n, "%s/kvr-disk-XXXXXX", cwd);
	cr_assert(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
	cr_assert_eq(statfs(dir, &sf), 0);
	cr_assert_neq((unsigned long)sf.f_type, (unsigned long)TMPFS_MAGIC,
		      "%s is on tmpfs: run the disk suites from a build "
		      "tree on a real file system",
		      dir);
}

static inline int dt_rm_one(const char *p, const struct stat *st, int flag,
			    struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

/* Remove @dir and everything in it (NULL or "" is fine). */
static inline void dt_rmrf(const char *dir)
{
	if (dir && dir[0])
		(void)nftw(dir, dt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* kvringd with a pool of @pool and --disk @dir of @size, mode @mode,
 * 1 MiB records, plus the NULL-terminated @more. */
static inline void dt_start_pool(struct wsrv *s, const char *pool,
				 const char *dir, const char *size,
				 const char *mode, const char *const *more)
{
	const char *args[48] = {"--pool-size",
				pool,
				"--allow-root",
				"--heartbeat-ms",
				"50",
				"--log-level",
				"info",
				"--max-keys",
				"1024",
				"--disk",
				dir,
				"--disk-size",
				size,
				"--disk-mode",
				mode,
				"--disk-chunk",
				"1M",
				L2T_QUOTAS_LIFTED};
	const int n = 23;

	wsrv_init(s, pool);
	wsrv_start_args(s, args, n, more);
}

/* The same with the suites' usual 32 MiB pool. */
static inline void dt_start(struct wsrv *s, const char *dir, const char *size,
			    const char *mode, const char *const *more)
{
	dt_start_pool(s, "32M", dir, size, mode, more);
}

static inline bool dt_idle(void *arg)
{
	const struct wsrv *s = arg;

	return T_DISK(&s->t, queue_depth) == 0;
}

static inline bool dt_rebuilt(void *arg)
{
	const struct wsrv *s = arg;

	return T_DISK(&s->t, rebuilt) == 1;
}

/* Keys of request @r (DT_BATCH chunks). The caller frees them. */
static inline struct kvr_key *dt_keys(struct kvr_client *c, uint32_t r)
{
	return l2t_keys_for(c, r, DT_BATCH);
}

/*
 * Store request @r as a worker that wants every chunk kept and never
 * waits for the disk: the keys answered KVR_SLOT_NOROOM (in --disk-mode
 * evict, the pool full of chunks the disk has not written yet) are
 * stored again 1 ms later, until every key is stored; the test fails if
 * one is still refused after @ms (scaled). Return the NOROOM answers.
 */
static inline uint32_t dt_store_all(struct kvr_client *c, uint32_t r, int ms)
{
	struct kvr_key *k = dt_keys(c, r), left[DT_BATCH];
	uint64_t sizes[DT_BATCH];
	uint32_t n = DT_BATCH, refused = 0;
	int waited = 0;

	memcpy(left, k, sizeof(left));
	free(k);
	for (uint32_t i = 0; i < DT_BATCH; i++)
		sizes[i] = DT_CHUNK;
	while (n > 0) {
		struct kvr_xfer x;
		uint32_t m = 0;
		int rc = kvr_prepare_store(c, left, sizes, n, &x);

		cr_assert_eq(rc, 0, "prepare_store: %d %s", rc,
			     kvr_client_errmsg(c));
		cr_assert_eq(x.nslots, n);
		for (uint32_t i = 0; i < n; i++) {
			int st = x.slots[i].status;

			if (st == KVR_SLOT_OK)
				wsrv_fill(&left[i], x.slots[i].ptr, DT_CHUNK);
			else if (st == KVR_SLOT_NOROOM)
				left[m++] = left[i];
			else
				cr_assert_eq(st, KVR_SLOT_EXISTS,
					     "request %u: slot status %d", r,
					     st);
		}
		rc = kvr_commit_store(c, &x);
		cr_assert_eq(rc, 0, "commit_store: %d %s", rc,
			     kvr_client_errmsg(c));
		refused += m;
		n = m;
		if (n == 0)
			break;
		cr_assert_lt(waited, t_timeout_ms(ms),
			     "request %u: %u chunks still refused (NOROOM) "
			     "after %d ms",
			     r, n, waited);
		wsrv_sleep_ms(1);
		waited++;
	}
	return refused;
}

/*
 * Store request @r as dt_store_all() does (a key held back while the
 * write-back saves its victim is stored again; the test fails if one is
 * still refused after 10 s) and, if @wait, wait until the disk is idle.
 */
static inline void dt_store(struct wsrv *s, struct kvr_client *c, uint32_t r,
			    bool wait)
{
	(void)dt_store_all(c, r, 10000);
	if (wait)
		cr_assert(t_wait_until(dt_idle, s, 10000), "queue %llu",
			  (unsigned long long)T_DISK(&s->t, queue_depth));
}

/*
 * Look @n keys up through the tiers until nothing is pending (the disk
 * read-through answers within its deadline, or says "ask again"), then
 * retrieve the hits and check every byte. Return the hits.
 */
static inline uint32_t dt_read_back(struct kvr_client *c,
				    const struct kvr_key *k, uint32_t n)
{
	/* Up to 5 s (scaled) for the reads to land: a loaded 2-vCPU machine
	 * can take seconds for a 4 MiB read-through under the sanitizers. */
	int tries = t_timeout_ms(5000) / 10;
	bool pending = true;
	long hits = 0;

	for (int i = 0; i < tries && pending; i++) {
		hits = kvr_lookup_l2(c, k, n, NULL, &pending);
		cr_assert_geq(hits, 0, "lookup_l2: %ld %s", hits,
			      kvr_client_errmsg(c));
		if (pending)
			wsrv_sleep_ms(10);
	}
	if (hits > 0)
		cr_assert_eq(
		    wsrv_retrieve_check(c, k, (uint32_t)hits, DT_CHUNK),
		    (uint32_t)hits);
	return (uint32_t)hits;
}

/* Request @r (DT_BATCH chunks) read back through the tiers; fail the
 * test unless every chunk comes back bit-exact. */
static inline void dt_read_request(struct kvr_client *c, uint32_t r)
{
	struct kvr_key *k = dt_keys(c, r);

	cr_expect_eq(dt_read_back(c, k, DT_BATCH), DT_BATCH, "request %u", r);
	free(k);
}

/* Read back requests r0 .. r0+n-1 one chunk at a time through the tiers:
 * each chunk is a hit checked byte for byte (dt_read_back) or a miss;
 * return the hits. */
static inline uint32_t dt_read_each(struct kvr_client *c, uint32_t r0,
				    uint32_t n)
{
	uint32_t hits = 0;

	for (uint32_t r = r0; r < r0 + n; r++) {
		struct kvr_key *k = dt_keys(c, r);

		for (uint32_t i = 0; i < DT_BATCH; i++)
			hits += dt_read_back(c, &k[i], 1);
		free(k);
	}
	return hits;
}

/* Run @cmd through the shell; fail the test with it if it fails. */
static inline void dt_sh(const char *cmd)
{
	int rc = system(cmd);

	cr_assert_eq(rc, 0, "'%s' failed (%d)", cmd, rc);
}

/*
 * A small ext4 file system of @size (e.g. "40M") made in an image under
 * the scratch directory @dir and loop-mounted, with mount options @opts
 * ("loop" plus any), at @mnt (@mlen bytes); the data directory for --disk
 * in it goes to @data (@dlen). Root only: the caller skips without it.
 * Undo with dt_unmount() in the suite's teardown, whatever happened.
 */
static inline void dt_loop_mount(const char *dir, const char *size,
				 const char *opts, char *mnt, size_t mlen,
				 char *data, size_t dlen)
{
	char cmd[4096], img[700];

	snprintf(img, sizeof(img), "%s/fs.img", dir);
	snprintf(mnt, mlen, "%s/mnt", dir);
	cr_assert_eq(mkdir(mnt, 0700), 0);
	snprintf(cmd, sizeof(cmd),
		 "truncate -s %s '%s' && mkfs.ext4 -q -F -m 0 '%s' && "
		 "mount -o %s '%s' '%s'",
		 size, img, img, opts, img, mnt);
	dt_sh(cmd);
	snprintf(data, dlen, "%s/kvr", mnt);
	cr_assert_eq(mkdir(data, 0700), 0);
}

/* dt_scratch() into @dir (@n bytes) and dt_loop_mount() there; the test
 * is skipped (and says why) when not run as root. */
static inline void dt_loop_scratch(char *dir, size_t n, const char *size,
				   const char *opts, char *mnt, size_t mlen,
				   char *data, size_t dlen)
{
	if (geteuid() != 0)
		cr_skip_test("loop-mounting an image needs root");
	dt_scratch(dir, n);
	dt_loop_mount(dir, size, opts, mnt, mlen, data, dlen);
}

/* Detach the mount dt_loop_mount() made (none: @mnt ""), then forget it. */
static inline void dt_unmount(char *mnt)
{
	if (mnt[0])
		(void)umount2(mnt, MNT_DETACH);
	mnt[0] = '\0';
}

/* A disk suite's .fini: stop server @s (when it runs), unmount @mnt (when
 * not NULL: dt_loop_mount), then remove the scratch @dir and forget it. */
static inline void dt_down(struct wsrv *s, char *mnt, char *dir)
{
	l2t_down(s);
	if (mnt)
		dt_unmount(mnt);
	dt_rmrf(dir);
	dir[0] = '\0';
}

#endif /* KVR_DISK_SUITE_H */
