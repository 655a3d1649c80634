/* SPDX-License-Identifier: MIT */
/*
 * test_disk.c - kvringd's disk tier (--disk, docs/storage.md "The disk
 * tier") on real files of the machine's disk: a working set four times
 * the pool is written back as the pool evicts it and read back through
 * the disk byte for byte, also when the worker stores it as fast as it
 * can (the write-back holds it back rather than evict unsaved chunks),
 * and when a chunk larger than the free space is held back before the
 * pool was full enough for the write-back to start;
 * --disk-mode commit writes every commit; a second kvringd on the same
 * directory, a directory others can write and a symlink in the path are refused
 * with a sentence. Restarts, torn and corrupt records are
 * test_disk_restart.c's; a full file system is test_disk_enospc.c's.
 */
#include <kvring/clock.h>

#include "disk_suite.h"

static struct wsrv s1, s2;
static char dir[600];

static void teardown(void)
{
	l2t_down(&s1);
	dt_down(&s2, NULL, dir);
}

TestSuite(disk, .fini = teardown, .timeout = 120);

/*
 * 32 requests of 4 MiB (4x the 32 MiB pool) from request @r0 on, into
 * the evict-mode server s1: after each, the disk idle again (@fast
 * false), or stored as fast as the worker can with the NOROOM answers
 * stored again (@fast). Every chunk the pool evicted was on disk first,
 * and every request reads back bit-exact, most through the disk.
 */
static void working_set_4x(uint32_t r0, bool fast)
{
	struct kvr_client *c = wsrv_connect(&s1, 0, 5000);
	uint32_t r, reqs = 32, held = 0;

	for (r = r0; r < r0 + reqs; r++)
		if (fast)
			held += dt_store_all(c, r, 20000);
		else
			dt_store(&s1, c, r, true);
	cr_assert(t_wait_until(dt_idle, &s1, 10000));
	cr_expect_geq(T_GSTAT(&s1.t, evictions), 64,
		      "the pool had to evict most of the working set");
	cr_expect_eq(T_DISK(&s1.t, unsaved), 0,
		     "every chunk the pool evicted was on disk first (%llu of "
		     "%llu were not; %u stores held back)",
		     (unsigned long long)T_DISK(&s1.t, unsaved),
		     (unsigned long long)T_GSTAT(&s1.t, evictions), held);
	cr_expect_eq(T_DISK(&s1.t, dropped), 0);
	/* Every request, oldest first: most come from the disk. */
	for (r = r0; r < r0 + reqs; r++)
		dt_read_request(c, r);
	cr_expect_geq(T_DISK(&s1.t, reads), 64, "read through: %llu",
		      (unsigned long long)T_DISK(&s1.t, reads));
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	cr_expect_eq(T_DISK(&s1.t, io_errors), 0);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

Test(disk, working_set_4x_the_pool_reads_back_bit_exact)
{
	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "192M", "evict", NULL);
	cr_expect(t_server_log_has(&s1.t, "O_DIRECT I/O"));
	cr_expect_eq(s1.t.hdr->disk.mode, 1u);
	working_set_4x(100, false);
}

/*
 * --disk-mode evict under a worker that stores the same working set as
 * fast as it can, never waiting for the disk: the write-back holds it
 * back with NOROOM instead of evicting unsaved chunks, so nothing is
 * lost.
 */
Test(disk, a_worker_storing_as_fast_as_it_can_loses_no_chunk)
{
	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "192M", "evict", NULL);
	working_set_4x(600, true);
}

/*
 * The write-back also starts below 7/8 full once a store is held back:
 * 24 MiB of 1 MiB chunks leave 8 MiB of the 32 MiB pool free, and a
 * 12 MiB chunk then needs victims the disk has not written (the pool was
 * never full enough for the write-back to run). It is stored once they
 * are written, and nothing is evicted unsaved.
 */
Test(disk, a_chunk_larger_than_the_free_space_starts_the_write_back)
{
	const uint64_t big = 12u << 20;
	struct kvr_client *c;
	struct kvr_key *k;
	uint32_t stored = 0;

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "192M", "evict", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	for (uint32_t r = 0; r < 6; r++)
		dt_store(&s1, c, 700 + r, true);
	cr_expect_eq(T_DISK(&s1.t, writes), 0, "nothing written back yet");
	k = dt_keys(c, 800);
	for (int ms = 0; ms < t_timeout_ms(10000) && stored == 0; ms += 10) {
		stored = wsrv_store(c, k, 1, big);
		if (!stored)
			wsrv_sleep_ms(10);
	}
	cr_assert_eq(stored, 1, "the 12 MiB chunk was never stored");
	cr_expect_geq(T_DISK(&s1.t, writes), 4, "the cold end was written");
	cr_expect_eq(T_DISK(&s1.t, unsaved), 0);
	cr_expect_eq(wsrv_retrieve_check(c, k, 1, big), 1);
	free(k);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

Test(disk, commit_mode_writes_every_commit)
{
	struct kvr_client *c;

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "64M", "commit", NULL);
	cr_expect_eq(s1.t.hdr->disk.mode, 2u);
	c = wsrv_connect(&s1, 0, 5000);
	dt_store(&s1, c, 1, true);
	dt_store(&s1, c, 2, true);
	cr_expect_eq(T_DISK(&s1.t, writes), 2 * DT_BATCH);
	cr_expect_eq(T_DISK(&s1.t, objects), 2 * DT_BATCH);
	cr_expect_eq(T_DISK(&s1.t, used_bytes), 2ull * DT_BATCH * DT_CHUNK);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}

Test(disk, a_second_server_on_the_directory_is_refused)
{
	pid_t pid;

	dt_scratch(dir, sizeof(dir));
	dt_start(&s1, dir, "64M", "evict", NULL);
	wsrv_init(&s2, "32M");
	{
		const char *argv[] = {"kvringd", "--socket",	 s2.t.sock,
				      "--name",	 s2.t.name,	 "--pool-size",
				      "32M",	 "--allow-root", "--disk",
				      dir,	 "--disk-size",	 "64M",
				      NULL};

		pid = t_server_spawn(&s2.t, argv);
	}
	cr_expect_neq(t_server_wait_exit(pid, 10000), 0);
	cr_expect(t_server_log_has(&s2.t, "is in use by another kvringd"));
	cr_expect_eq(wsrv_stop(&s1), 0, "the first one is unharmed");
}

/* kvringd on @d must refuse to start, saying @why. */
static void refused(const char *d, const char *why)
{
	const char *argv[] = {
	    "kvringd",	   "--socket", s2.t.sock,      "--name", s2.t.name,
	    "--pool-size", "32M",      "--allow-root", "--disk", d,
	    NULL};
	pid_t pid;

	wsrv_init(&s2, "32M");
	pid = t_server_spawn(&s2.t, argv);
	cr_expect_neq(t_server_wait_exit(pid, 10000), 0, "%s", d);
	cr_expect(t_server_log_has(&s2.t, why), "%s: no '%s'", d, why);
	wsrv_cleanup(&s2);
}

Test(disk, unsafe_directories_are_refused)
{
	char p[700], l[700];

	dt_scratch(dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/open", dir);
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(chmod(p, 0777), 0);
	refused(p, "is writable by its group or others");
	snprintf(l, sizeof(l), "%s/link", dir);
	cr_assert_eq(symlink(p, l), 0);
	cr_assert_eq(chmod(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/link/sub", dir);
	refused(p, "is a symlink");
	refused("relative/dir", "give an absolute directory path");
}

/*
 * A worker that floods lookups of chunks the pool evicted to disk (every
 * one a read-through) next to a worker whose chunks are in the pool: the
 * second one's stores, lookups and retrieves all succeed, byte for byte,
 * while the first keeps the disk busy, and the flood is served too.
 */
Test(disk, a_worker_flooding_disk_misses_leaves_the_others_working)
{
	struct kvr_client *c;
	uint32_t r, full = 0, reqs = 32; /* 128 MiB: twice the pool */
	pid_t pid;
	int st;

	dt_scratch(dir, sizeof(dir));
	dt_start_pool(&s1, "64M", dir, "192M", "evict", NULL);
	c = wsrv_connect(&s1, 0, 5000);
	for (r = 0; r < reqs; r++)
		dt_store(&s1, c, 500 + r, true);
	kvr_close(c);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* The flood: the oldest 64 MiB, over and over, 1.5 s: more
		 * than the pool has besides the other worker's 16 MiB, so
		 * every pass reads through from disk again. */
		struct kvr_client *f = wsrv_connect(&s1, 0, 5000);
		uint64_t end = kvr_clock_now_ns() + 1500000000ull, got = 0;

		for (r = 0; kvr_clock_now_ns() < end; r = (r + 1) % 16) {
			struct kvr_key *k = dt_keys(f, 500 + r);
			bool pending;
			long h = kvr_lookup_l2(f, k, DT_BATCH, NULL, &pending);

			free(k);
			if (h < 0)
				_exit(2);
			got += (uint64_t)h;
		}
		kvr_close(f);
		_exit(got > 0 ? 0 : 3);
	}
	/* The other worker: 40 rounds of lookup, store what is missing
	 * (the flood may have pushed it out: a cache owes nobody room),
	 * retrieve and check. Every call must succeed. */
	c = wsrv_connect(&s1, 0, 5000);
	for (r = 0; r < 40; r++) {
		struct kvr_key *k = dt_keys(c, 900 + r % 4);
		long hits = kvr_lookup(c, k, DT_BATCH, NULL);

		cr_assert_geq(hits, 0, "round %u: %s", r, kvr_client_errmsg(c));
		if (hits < (long)DT_BATCH)
			(void)wsrv_store(c, k, DT_BATCH, DT_CHUNK);
		/* What it gets is checked byte for byte (inside). */
		if (wsrv_retrieve_check(c, k, DT_BATCH, DT_CHUNK) == DT_BATCH)
			full++;
		free(k);
	}
	cr_expect_gt(full, 0, "its requests were served whole");
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the flooding worker: status %d", st);
	cr_expect_gt(T_DISK(&s1.t, reads), 0, "the flood read the disk");
	cr_expect_eq(T_DISK(&s1.t, corrupt), 0);
	kvr_close(c);
	cr_expect_eq(wsrv_stop(&s1), 0, "self-check");
}
