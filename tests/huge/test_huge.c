/* SPDX-License-Identifier: MIT */
/*
 * Description: the huge-page pool, on real huge pages. Run through
 * kvr-huge-run (tests/huge/huge_run.c), which reserves pages in
 * vm.nr_hugepages, mounts a private hugetlbfs ($KVR_TEST_HUGE_DIR) and
 * restores the old reservation afterwards. Checks, with real kvringd and
 * worker processes: the named pool is a file on the hugetlbfs mount and
 * both the server and a worker map it with 2 MiB pages (KernelPageSize in
 * /proc/PID/smaps); the unnamed hugetlb memfd likewise; the demo's byte
 * verification passes on it; a worker SIGKILLed between prepare and
 * commit leaves no reservation; a SIGKILLed server's huge pool is swept
 * by the next server and its pages return to the free pool; require fails
 * with the reservation command when pages are short, and auto falls back
 * to 4 KiB pages with one line saying how many to reserve; a worker that
 * connects while the server still zeroes the pool maps only what the
 * server has zeroed (never zeroes a page itself) and gets exact bytes;
 * a store made during the zeroing is placed below the zeroed line when
 * there is room there, even where the plain best fit lies above it.
 * Every test skips, with the runner's reason, when the kernel refused the
 * reservation ($KVR_TEST_HUGE_SKIP).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>
#include <kvring/segment.h>

#include "t_raw.h"
#include "t_server.h"
#include "t_worker.h"
#include "huge_suite.h"

static struct kvrd srv;
static const char *hdir;
static char sizebuf[32];

static void setup(void)
{
	t_server_init(&srv);
}

static void teardown(void)
{
	char path[256];

	t_server_cleanup(&srv);
	if (hdir) {
		snprintf(path, sizeof(path), "%s/%s.pool", hdir, srv.name);
		unlink(path);
	}
}

TestSuite(huge, .init = setup, .fini = teardown, .timeout = 60);

/* The runner's mount, or skip with the runner's reason. */
static const char *huge_dir_or_skip(void)
{
	hdir = huge_mount_or_skip();
	return hdir;
}

/*
 * Call @fn(line, @arg) for each field line of /proc/@pid/smaps in a
 * mapping that contains @addr (when non-NULL) or whose header line
 * contains @needle, until @fn returns true.
 */
static void smaps_each(pid_t pid, const void *addr, const char *needle,
		       bool (*fn)(const char *line, void *arg), void *arg)
{
	char path[64], line[512];
	unsigned long lo, hi;
	bool in = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "re");
	cr_assert(f, "open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = addr
				 ? (uintptr_t)addr >= lo && (uintptr_t)addr < hi
				 : strstr(line, needle) != NULL;
			continue;
		}
		if (in && fn(line, arg))
			break;
	}
	fclose(f);
}

/* smaps_each: the mapping's KernelPageSize into *(unsigned long *)arg. */
static bool kernel_page_kb(const char *line, void *arg)
{
	return sscanf(line, "KernelPageSize: %lu kB", (unsigned long *)arg) ==
	       1;
}

/*
 * KernelPageSize (kB) of the mapping of @pid that contains @addr (when
 * non-NULL) or whose path contains @needle; 0 if none.
 */
static unsigned long page_kb(pid_t pid, const void *addr, const char *needle)
{
	unsigned long kb = 0;

	smaps_each(pid, addr, needle, kernel_page_kb, &kb);
	return kb;
}

static unsigned long long free_huge(void)
{
	struct kvr_hugetlb_info hi;

	cr_assert_eq(kvr_seg_hugetlb_info(&hi), 0);
	return hi.free_pages;
}

/* Huge pages in use on the runner's private mount (statfs of a mount
 * with size=): unlike the host's free count, no other process moves it. */
static unsigned long long mount_used(void)
{
	struct statfs sf;

	cr_assert_eq(statfs(hdir, &sf), 0);
	cr_assert_gt(sf.f_blocks, 0, "mount %s has no size limit", hdir);
	return (unsigned long long)(sf.f_blocks - sf.f_bfree);
}

/* Append to @args at *n: a pool of @pool bytes that must be on huge
 * pages, in the suite's hugetlbfs mount. */
static void push_huge_pool(const char **args, int *n, const char *pool)
{
	static const char *const fixed[] = {"--huge-pages", "require",
					    "--huge-dir"};

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		args[(*n)++] = fixed[i];
	args[(*n)++] = hdir;
	args[(*n)++] = "--pool-size";
	args[(*n)++] = pool;
}

static void start_huge_opt(const char *pool, const char *extra, const char *opt)
{
	const char *args[24];
	int n = 0;

	/* One worker moves most of a small pool here (the demo stores 64 of
	 * 96 MiB in one request): lift the per-channel quotas, which
	 * default to a quarter of the pool. */
	args[n++] = "--quota-reserved";
	args[n++] = "100%";
	args[n++] = "--max-key-bytes";
	args[n++] = "100%";
	args[n++] = "--quota-pinned";
	args[n++] = "100%";
	args[n++] = "--quota-uid-reserved";
	args[n++] = "100%";
	args[n++] = "--quota-uid-pinned";
	args[n++] = "100%";
	push_huge_pool(args, &n, pool);
	if (extra) {
		args[n++] = "--pool-backend";
		args[n++] = extra;
	}
	if (opt)
		args[n++] = opt;
	args[n] = NULL;
	t_server_start(&srv, args);
}

static void start_huge(const char *pool, const char *extra)
{
	start_huge_opt(pool, extra, NULL);
}

static struct kvr_client *connect_worker(bool prefault)
{
	struct kvr_client_opts o;

	t_worker_opts(&o, &srv);
	o.no_prefault = !prefault;
	return t_worker_connect(&o);
}

/* Prepare one chunk; its slot's address is inside the pool mapping. */
static void *one_slot(struct kvr_client *c, uint64_t seed, struct kvr_xfer *x)
{
	struct kvr_key k = {seed, seed * 7 + 1};
	uint64_t sz = 256 << 10;

	cr_assert_eq(kvr_prepare_store(c, &k, &sz, 1, x), 0);
	cr_assert_eq(x->nslots, 1);
	cr_assert_not_null(x->slots[0].ptr);
	return x->slots[0].ptr;
}

Test(huge, server_and_worker_map_named_pool_with_huge_pages_when_reserved)
{
	char path[256];
	struct kvr_xfer x = {0};
	struct kvr_client *c;
	struct stat st;
	void *p;

	huge_dir_or_skip();
	start_huge("32M", NULL);
	snprintf(path, sizeof(path), "%s/%s.pool", hdir, srv.name);
	cr_assert_eq(stat(path, &st), 0, "no named pool %s", path);
	cr_expect_eq(st.st_mode & 0777, 0600);
	cr_expect_eq(st.st_size, 32 << 20);
	cr_expect_eq(srv.hdr->pool_backend, KVR_POOL_SHM);
	cr_expect(t_server_log_has(&srv, "huge pages"));
	c = connect_worker(true);
	cr_expect(strstr(kvr_client_info(c)->debug, "2048 KiB pages"), "%s",
		  kvr_client_info(c)->debug);
	p = one_slot(c, 1, &x);
	memset(p, 0x5a, 256 << 10);
	cr_expect_eq(page_kb(getpid(), p, NULL), 2048,
		     "worker's pool mapping is not on 2 MiB pages");
	cr_expect_eq(page_kb(srv.pid, NULL, path), 2048,
		     "server's pool mapping is not on 2 MiB pages");
	cr_expect_eq(kvr_commit_store(c, &x), 0);
	kvr_close(c);
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect_neq(stat(path, &st), 0, "pool left behind after a stop");
}

Test(huge, unnamed_memfd_pool_uses_huge_pages_when_backend_is_memfd)
{
	struct kvr_xfer x = {0};
	struct kvr_client *c;
	char needle[96];
	void *p;

	huge_dir_or_skip();
	start_huge("32M", "memfd");
	cr_expect_eq(srv.hdr->pool_backend, KVR_POOL_MEMFD);
	c = connect_worker(true);
	p = one_slot(c, 2, &x);
	cr_expect_eq(page_kb(getpid(), p, NULL), 2048);
	snprintf(needle, sizeof(needle), "memfd:%s.pool", srv.name);
	cr_expect_eq(page_kb(srv.pid, NULL, needle), 2048,
		     "server's memfd pool is not on 2 MiB pages");
	cr_expect_eq(kvr_abort_store(c, &x), 0);
	kvr_close(c);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(huge, demo_verifies_every_byte_when_pool_is_on_huge_pages)
{
	char cmd[512];
	FILE *f;
	char line[256];
	bool verified = false;
	int st;

	huge_dir_or_skip();
	start_huge("96M", NULL);
	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-demo --socket %s 2>&1",
		 KVR_BIN_DIR, srv.sock);
	f = popen(cmd, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "verify: all") && strstr(line, "match"))
			verified = true;
	st = pclose(f);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "demo failed: %d", st);
	cr_expect(verified, "demo did not verify its bytes");
	cr_expect_eq(t_server_stop(&srv), 0);
}

static int ready_pipe[2];

static bool store_released(void *arg)
{
	struct kvrd *t = arg;

	return T_GSTAT(t, workers) == 0 && T_GSTAT(t, used_bytes) == 0 &&
	       T_GSTAT(t, reserved_bytes) == 0 && T_GSTAT(t, transfers) == 0;
}

static bool store_reserved(void *arg)
{
	return T_GSTAT((struct kvrd *)arg, reserved_bytes) > 0;
}

Test(huge, reservation_is_freed_when_worker_dies_before_commit)
{
	struct kvr_xfer x = {0};
	pid_t pid;
	char ok = 0;

	huge_dir_or_skip();
	start_huge("32M", NULL);
	cr_assert_eq(pipe(ready_pipe), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct kvr_client *c = connect_worker(true);
		void *p = one_slot(c, 3, &x);

		memset(p, 0xcc, 4096); /* half-written, never committed */
		if (write(ready_pipe[1], "r", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	close(ready_pipe[1]);
	cr_assert_eq(read(ready_pipe[0], &ok, 1), 1, "worker failed");
	close(ready_pipe[0]);
	/* Global counters are published by the loop's housekeeping. */
	cr_expect(t_wait_until(store_reserved, &srv, t_timeout_ms(5000)),
		  "the child's reservation never showed");
	t_kill_reap(pid);
	cr_expect(t_wait_until(store_released, &srv, t_timeout_ms(5000)),
		  "reserved %llu",
		  (unsigned long long)T_GSTAT(&srv, reserved_bytes));
	cr_expect_eq(T_GSTAT(&srv, objects), 0, "a reservation was published");
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(huge, stale_huge_pool_is_swept_when_previous_server_was_killed)
{
	unsigned long long before;
	char path[256], want[300];
	struct stat st;

	huge_dir_or_skip();
	before = mount_used();
	start_huge("32M", NULL);
	cr_expect_eq(mount_used(), before + 16);
	t_server_kill(&srv);
	snprintf(path, sizeof(path), "%s/%s.pool", hdir, srv.name);
	cr_assert_eq(stat(path, &st), 0, "SIGKILL should leave the pool");
	cr_expect_eq(mount_used(), before + 16, "pages freed without a sweep");
	start_huge("32M", NULL);
	snprintf(want, sizeof(want), "removed stale segment %s", path);
	cr_expect(t_server_log_has(&srv, want), "log lacks '%s'", want);
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect_eq(mount_used(), before, "huge pages leaked");
}

Test(huge, live_server_pool_is_kept_when_another_server_sweeps)
{
	struct kvrd other;
	char path[256];
	struct stat st;

	huge_dir_or_skip();
	start_huge("16M", NULL);
	t_server_init(&other);
	{
		const char *args[] = {
		    "--huge-pages", "require", "--huge-dir", hdir,
		    "--pool-size",  "16M",     NULL};

		t_server_start(&other, args);
	}
	snprintf(path, sizeof(path), "%s/%s.pool", hdir, srv.name);
	cr_expect_eq(stat(path, &st), 0, "a live server's pool was swept");
	cr_expect_eq(t_server_stop(&other), 0);
	t_server_cleanup(&other);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(huge, require_fails_with_reserve_command_when_pages_are_short)
{
	const char *argv[16];
	unsigned long long fr;
	int n = 0;

	huge_dir_or_skip();
	fr = free_huge();
	/* Twice what is free, and at least 2 MiB more. */
	snprintf(sizebuf, sizeof(sizebuf), "%lluM", fr * 2 * 2 + 2);
	argv[n++] = "kvringd";
	argv[n++] = "--socket";
	argv[n++] = srv.sock;
	argv[n++] = "--name";
	argv[n++] = srv.name;
	push_huge_pool(argv, &n, sizebuf);
	argv[n] = NULL;
	srv.pid = t_server_spawn(&srv, argv);
	cr_expect_neq(t_server_wait_exit(srv.pid, t_timeout_ms(10000)), 0);
	srv.pid = 0;
	cr_expect(t_server_log_has(&srv, "/proc/sys/vm/nr_hugepages"),
		  "no reservation command in the log");
	cr_expect(t_server_log_has(&srv, "--huge-pages require"));
}

Test(huge, auto_falls_back_to_small_pages_with_one_hint_when_pages_are_short)
{
	/* auto spelled out: t_server_start() defaults to off. */
	const char *args[] = {"--huge-pages", "auto",  "--huge-dir", NULL,
			      "--pool-size",  sizebuf, NULL};
	struct kvr_xfer x = {0};
	struct kvr_client *c;
	unsigned long long fr, used;
	char line[512], needle[96];
	int hints = 0;
	FILE *f;
	void *p;

	args[3] = huge_dir_or_skip();
	used = mount_used();
	fr = free_huge();
	snprintf(sizebuf, sizeof(sizebuf), "%lluM", fr * 2 + 64);
	t_server_start(&srv, args);
	f = fopen(srv.log_path, "re");
	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		hints += strstr(line, "echo ") &&
			 strstr(line, "/proc/sys/vm/nr_hugepages") &&
			 strstr(line, "using 4 KiB pages");
	fclose(f);
	cr_expect_eq(hints, 1, "expected one reservation hint, got %d", hints);
	cr_expect_eq(mount_used(), used, "a fallback pool took huge pages");
	snprintf(needle, sizeof(needle), "%s.pool", srv.name);
	cr_expect_eq(page_kb(srv.pid, NULL, needle), 4,
		     "the fallback pool is not on 4 KiB pages");
	c = connect_worker(false);
	p = one_slot(c, 4, &x);
	memset(p, 1, 4096);
	cr_expect_eq(page_kb(getpid(), p, NULL), 4);
	cr_expect_eq(kvr_abort_store(c, &x), 0);
	kvr_close(c);
	cr_expect_eq(t_server_stop(&srv), 0);
}

/* smaps_each: adds the mapping's hugetlb kB (shared or private) to
 * *(unsigned long long *)arg; never stops the walk. */
static bool add_hugetlb_kb(const char *line, void *arg)
{
	unsigned long long v;

	if (sscanf(line, "Shared_Hugetlb: %llu kB", &v) == 1 ||
	    sscanf(line, "Private_Hugetlb: %llu kB", &v) == 1)
		*(unsigned long long *)arg += v;
	return false;
}

/*
 * Huge-page bytes of @pid's mapping whose path contains @needle that are
 * in its page tables (Shared_Hugetlb + Private_Hugetlb in smaps, kB): how
 * far that process's own touches got.
 */
static unsigned long long mapped_huge_kb(pid_t pid, const char *needle)
{
	unsigned long long kb = 0;

	smaps_each(pid, NULL, needle, add_hugetlb_kb, &kb);
	return kb;
}

static bool prefault_logged(void *arg)
{
	return t_server_log_has(arg, "pool pre-faulted in the background");
}

/*
 * The server says ready before its pool is zeroed (the kernel zeroes a
 * huge page at its first touch, up to seconds per GiB): a worker that
 * connects at once is served, and its bytes come back exact, while the
 * server's pre-fault thread has not mapped the whole pool yet. 512 MiB
 * take at least ~75 ms to zero even at memset speed; the worker's part
 * below (no pre-fault of its own, four 2 MiB chunks) takes a few ms.
 */
/* Store four 2 MiB chunks (pattern and keys from @seed) through @c and
 * read them back, checking every byte. */
static void store_and_check(struct kvr_client *c, unsigned seed)
{
	enum { N = 4, CH = 2 << 20 };
	struct kvr_xfer x = {0}, r = {0};
	struct kvr_key keys[N];
	uint64_t sizes[N];
	unsigned char *src = malloc((size_t)N * CH);

	cr_assert_not_null(src);
	for (size_t i = 0; i < (size_t)N * CH; i++)
		src[i] = (unsigned char)(i * 2654435761u >> (seed % 16));
	for (unsigned i = 0; i < N; i++) {
		keys[i] = (struct kvr_key){seed + i, 0x79b9 * (i + 1) + seed};
		sizes[i] = CH;
	}
	cr_assert_eq(kvr_prepare_store(c, keys, sizes, N, &x), 0, "%s",
		     kvr_client_errmsg(c));
	cr_assert_eq(x.nslots, N);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(x.slots[i].status, KVR_SLOT_OK);
		memcpy(x.slots[i].ptr, src + (size_t)i * CH, CH);
	}
	cr_assert_eq(kvr_commit_store(c, &x), 0);
	cr_assert_eq(kvr_prepare_retrieve(c, keys, N, &r), 0);
	cr_assert_eq(r.nslots, N, "retrieved %u of %d chunks", r.nslots, N);
	for (unsigned i = 0; i < N; i++)
		cr_expect_eq(memcmp(r.slots[i].ptr, src + (size_t)i * CH, CH),
			     0, "chunk %u differs from what was stored", i);
	cr_expect_eq(kvr_commit_retrieve(c, &r), 0);
	free(src);
}

Test(huge, serves_exact_bytes_when_background_prefault_still_runs)
{
	const unsigned long long pool_kb = 512ull << 10;
	struct kvr_client *c;
	unsigned long long during, after;
	char path[256];

	huge_dir_or_skip();
	/* t_server_start() passes --no-prefault: undo it. */
	start_huge_opt("512M", NULL, "--prefault");
	snprintf(path, sizeof(path), "%s/%s.pool", hdir, srv.name);
	c = connect_worker(false);
	store_and_check(c, 0x9e37);
	/* Only now look: all of the above ran while the server's thread
	 * had not mapped the whole pool (an in-line pre-fault has mapped
	 * all of it before the socket exists). */
	during = mapped_huge_kb(srv.pid, path);
	cr_expect_lt(during, pool_kb,
		     "server had mapped %llu of %llu kB before the first "
		     "request was answered: its pre-fault was not in the "
		     "background",
		     during, pool_kb);
	cr_expect_not(prefault_logged(&srv),
		      "pre-fault finished before the first request");
	/* And it does finish, with the whole pool on huge pages. */
	cr_expect(t_wait_until(prefault_logged, &srv, t_timeout_ms(30000)),
		  "no 'pool pre-faulted in the background' line");
	after = mapped_huge_kb(srv.pid, path);
	cr_expect_eq(after, pool_kb, "server mapped %llu of %llu kB", after,
		     pool_kb);
	kvr_close(c);
	cr_expect_eq(t_server_stop(&srv), 0);
}

/* The server's published zeroed line (control header, abi 3.2). */
static uint64_t zeroed_line(void)
{
	return atomic_load_explicit(&srv.hdr->pool_zeroed_bytes,
				    memory_order_relaxed);
}

/*
 * A worker that connects while the server still zeroes its huge pages
 * must not zero them for it: its attach pre-touches
 * only the pages below the line the server publishes (pool_zeroed_bytes)
 * and a thread follows that line. So when kvr_connect returns, the worker
 * has mapped no more of the pool than that line; before, its attach
 * touched every page, zeroing those the server had not reached, and
 * returned only when the whole pool was mapped. Read the worker first:
 * the line only grows. The check needs the zeroing to be still running
 * when it is made (512 MiB take ~100 ms here, a connect a few ms); a
 * start whose zeroing was over is tried again, at most 5 times. Then
 * the bytes come back exact, and once the zeroing is over the follower
 * has mapped the whole pool.
 */
Test(huge, worker_attach_does_not_zero_pages_when_server_still_zeroes)
{
	const unsigned long long pool_kb = 512ull << 10;
	uint64_t ns = 0, line = 0;
	struct kvr_client *c = NULL;
	unsigned long long worker_kb = 0;
	int tries;
	char path[256];

	huge_dir_or_skip();
	for (tries = 0; tries < 5; tries++) {
		start_huge_opt("512M", NULL, "--prefault");
		cr_assert_eq(srv.hdr->pool_zeroing, 1u,
			     "the server does not say it zeroes in the "
			     "background");
		snprintf(path, sizeof(path), "%s/%s.pool", hdir, srv.name);
		c = connect_worker(true);
		worker_kb = mapped_huge_kb(getpid(), path);
		line = zeroed_line();
		if (line < pool_kb << 10)
			break; /* still zeroing: the check below means it */
		kvr_close(c);
		cr_assert_eq(t_server_stop(&srv), 0);
	}
	cr_assert_lt(tries, 5,
		     "the server's zeroing was over before the check in 5 "
		     "starts: this machine zeroes 512 MiB faster than a "
		     "connect");
	cr_expect_leq(worker_kb, line >> 10,
		      "kvr_connect returned with %llu kB of the pool mapped "
		      "while the server had zeroed %llu kB: the worker "
		      "zeroed pages itself",
		      worker_kb, (unsigned long long)(line >> 10));
	store_and_check(c, 0x51ed);
	/* The follower ends once the server's line reaches the end. */
	cr_expect(t_wait_until(prefault_logged, &srv, t_timeout_ms(30000)),
		  "no 'pool pre-faulted in the background' line");
	cr_expect_eq(kvr_prefault_status(c, true, &ns), 0);
	worker_kb = mapped_huge_kb(getpid(), path);
	cr_expect_eq(worker_kb, pool_kb,
		     "after the zeroing the worker mapped %llu of %llu kB",
		     worker_kb, pool_kb);
	kvr_close(c);
	cr_expect_eq(t_server_stop(&srv), 0);
}

/* Reserve one chunk of @bytes under key @seed; its slot's offset. */
static uint64_t reserve_one(struct kvr_client *c, uint64_t seed, uint64_t bytes,
			    struct kvr_xfer *x)
{
	struct kvr_key k = {seed, seed * 11 + 3};

	cr_assert_eq(kvr_prepare_store(c, &k, &bytes, 1, x), 0, "%s",
		     kvr_client_errmsg(c));
	cr_assert_eq(x->nslots, 1);
	cr_assert_eq(x->slots[0].status, KVR_SLOT_OK, "no slot of %llu MiB",
		     (unsigned long long)(bytes >> 20));
	return x->slots[0].off;
}

static bool line_passed_a_slice(void *arg)
{
	(void)arg;
	return zeroed_line() >= 16u << 20; /* the thread's first slice */
}

/*
 * A store made while the server still zeroes its huge pages goes below
 * the zeroed line when there is room there: its pages
 * are then zeroed already and it never waits for the kernel. The pool is
 * laid out so that the allocator's plain best fit lies above the line:
 * a 4 MiB hole at offset 0 and an exact 2 MiB hole near the end (H, at
 * 484 MiB, reserved and aborted), so a 2 MiB chunk's best fit is H. Once
 * the line has passed its first 16 MiB slice and while it is still below
 * H, the chunk must land in the low hole; before, it landed in H, which
 * nobody had zeroed. The check means something only if the line stayed
 * in [16 MiB, 486 MiB) around that prepare; a start whose zeroing ran
 * past it is tried again, at most 5 times. The chunk's bytes come back
 * exact.
 */
Test(huge, first_store_lands_below_zeroed_line_when_room_exists_there)
{
	enum { MIB = 1 << 20 };
	struct kvr_xfer a = {0}, g = {0}, h = {0}, k = {0}, s = {0}, r = {0};
	uint64_t off = 0, before = 0, after = 0, hoff = 0;
	struct kvr_client *c = NULL;
	struct kvr_key key = {5, 5 * 11 + 3}; /* reserve_one()'s seed 5 */
	uint64_t sz = 2 * MIB;
	unsigned char *src;
	int tries;

	huge_dir_or_skip();
	src = malloc(sz);
	cr_assert_not_null(src);
	for (size_t i = 0; i < sz; i++)
		src[i] = (unsigned char)(i * 2246822519u >> 13);
	for (tries = 0; tries < 5; tries++) {
		start_huge_opt("512M", NULL, "--prefault");
		cr_assert_eq(srv.hdr->pool_zeroing, 1u,
			     "the server does not say it zeroes in the "
			     "background");
		c = connect_worker(false);
		cr_expect_eq(reserve_one(c, 1, 4 * MIB, &a), 0);
		cr_expect_eq(reserve_one(c, 2, 480 * MIB, &g), 4 * MIB);
		hoff = reserve_one(c, 3, 2 * MIB, &h);
		cr_expect_eq(hoff, 484 * MIB);
		reserve_one(c, 4, 2 * MIB,
			    &k); /* keeps H apart from the tail */
		cr_assert_eq(kvr_abort_store(c, &a), 0);
		cr_assert_eq(kvr_abort_store(c, &h), 0);
		/* Wait until the thread's first slice is in the line. */
		t_wait_until(line_passed_a_slice, NULL, t_timeout_ms(10000));
		before = zeroed_line();
		off = reserve_one(c, 5, sz, &s);
		after = zeroed_line();
		if (before >= 16u * MIB && after < hoff + sz)
			break; /* the line stayed between the two holes */
		kvr_abort_store(c, &s);
		kvr_abort_store(c, &g);
		kvr_abort_store(c, &k);
		kvr_close(c);
		cr_assert_eq(t_server_stop(&srv), 0);
	}
	cr_assert_lt(tries, 5,
		     "in 5 starts the zeroed line never stayed between 16 "
		     "MiB and %llu MiB around one prepare (last: %llu .. %llu "
		     "MiB): this machine zeroes 512 MiB faster than a "
		     "prepare",
		     (unsigned long long)((hoff + sz) / MIB),
		     (unsigned long long)(before / MIB),
		     (unsigned long long)(after / MIB));
	cr_expect_leq(off + sz, before,
		      "2 MiB placed at %llu MiB while the server had zeroed "
		      "%llu MiB and the hole at 0 was free: the store would "
		      "wait for the zeroing of its own pages",
		      (unsigned long long)(off / MIB),
		      (unsigned long long)(before / MIB));
	cr_log_info("start %d: 2 MiB at %llu MiB, zeroed line %llu .. %llu "
		    "MiB around the prepare",
		    tries + 1, (unsigned long long)(off / MIB),
		    (unsigned long long)(before / MIB),
		    (unsigned long long)(after / MIB));
	/* Exact bytes, written while the zeroing still runs. */
	memcpy(s.slots[0].ptr, src, sz);
	cr_assert_eq(kvr_commit_store(c, &s), 0);
	cr_assert_eq(kvr_prepare_retrieve(c, &key, 1, &r), 0);
	cr_assert_eq(r.nslots, 1, "the stored chunk is not there");
	cr_expect_eq(memcmp(r.slots[0].ptr, src, sz), 0,
		     "the chunk stored during the zeroing differs");
	cr_expect_eq(kvr_commit_retrieve(c, &r), 0);
	kvr_abort_store(c, &g);
	kvr_abort_store(c, &k);
	kvr_close(c);
	free(src);
	cr_expect_eq(t_server_stop(&srv), 0);
}
