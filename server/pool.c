/* SPDX-License-Identifier: MIT */
/*
 * The pool's placement: which backend holds the chunk bytes (huge pages on
 * a hugetlbfs mount or in a hugetlb memfd, a named /dev/shm file, an
 * anonymous memfd, or the server-private pool of the copy transport),
 * tried in order, each failure logged, the memory checked first; then the
 * pre-fault, in line with progress for the service manager or left to the
 * background zeroing of a huge-page pool (prefault.c). DESIGN rule 9: the
 * transport in use is logged with the pool's name and size.
 *
 * It only creates the pool; srv.c formats the control segment that
 * describes it and tears it down.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <kvring/clock.h>
#include <kvring/error.h>
#include <kvring/log.h>
#include <kvring/parse.h>

#include "notify.h"
#include "pool.h"
#include "prefault.h"

/* Names as the options and the logs spell them. */
static const char *backend_name(int b)
{
	return b == KVR_POOL_SHM     ? "shm"
	       : b == KVR_POOL_MEMFD ? "memfd"
				     : "private";
}

/* Bytes of memory the kernel could still give us (MemAvailable plus
 * SwapFree), or UINT64_MAX when /proc/meminfo cannot be read. */
static uint64_t mem_available(void)
{
	unsigned long long kb, total = 0;
	char line[256];
	int found = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 ||
		    sscanf(line, "SwapFree: %llu kB", &kb) == 1) {
			total += kb;
			found++;
		}
	}
	fclose(f);
	return found ? (uint64_t)total * 1024u : UINT64_MAX;
}

/* Try one pool backend; log the attempt's failure. */
static int try_pool(struct kvr_srv *s, int b, const char *pool_name)
{
	mode_t mode = s->cfg.have_group ? 0660 : 0600;
	gid_t gid = s->cfg.have_group ? s->cfg.gid : (gid_t)-1;
	size_t bytes = (size_t)s->cfg.pool_bytes;
	struct kvr_err e = {0};
	uint64_t avail = mem_available();
	char h1[KVR_SIZE_STR_MAX], h2[KVR_SIZE_STR_MAX];
	int rc;

	/* Reserving more than the host has does not fail cleanly: the
	 * kernel's OOM killer ends the process in the middle of fallocate.
	 * Refuse first, whatever the backend (all of them are RAM). */
	if (s->cfg.pool_bytes > avail) {
		kvr_log_warn("pool backend %s (%s): only %s of memory "
			     "available; lower --pool-size",
			     backend_name(b),
			     kvr_format_size(s->cfg.pool_bytes, h1, sizeof(h1)),
			     kvr_format_size(avail, h2, sizeof(h2)));
		return -ENOMEM;
	}
	if (b == KVR_POOL_SHM)
		rc = kvr_seg_create_shm(NULL, pool_name, bytes, mode, gid,
					&s->pool, &e);
	else if (b == KVR_POOL_MEMFD)
		rc = kvr_seg_create_memfd(pool_name, bytes, 0, &s->pool, &e);
	else
		rc = kvr_seg_create_private(bytes, &s->pool, &e);
	if (rc < 0)
		kvr_log_warn("pool backend %s (%s): %s", backend_name(b),
			     kvr_format_size(s->cfg.pool_bytes, h1, sizeof(h1)),
			     kvr_err_str(&e, rc));
	return rc;
}

/* The hugetlbfs mount for named huge-page pools: --huge-dir, else the
 * first writable one of the default page size; "" if there is none. */
const char *kvr__pool_huge_dir(const struct kvr_srv *s, char *buf, size_t n)
{
	if (s->cfg.huge_dir[0])
		return s->cfg.huge_dir;
	return kvr_seg_huge_dir_find(0, buf, n) > 0 ? buf : "";
}

/*
 * The pool on huge pages: a named file on a hugetlbfs mount (inspectable,
 * swept like /dev/shm), else an unnamed hugetlb memfd. Only tried when the
 * free pages cover the whole pool; otherwise one line says how many pages
 * to reserve and how (info under auto, error under require).
 */
static int try_huge(struct kvr_srv *s, const char *pool_name)
{
	mode_t mode = s->cfg.have_group ? 0660 : 0600;
	gid_t gid = s->cfg.have_group ? s->cfg.gid : (gid_t)-1;
	bool req = s->cfg.huge_pages == KVR_HUGE_REQUIRE;
	struct kvr_hugetlb_info hi = {0};
	struct kvr_err e = {0};
	char dbuf[KVR_SEG_DIR_MAX];
	const char *dir;
	uint64_t need;
	int rc;

	if (kvr_seg_hugetlb_info(&hi) < 0) {
		kvr_log(req ? KVR_LOG_ERR : KVR_LOG_INFO,
			"huge pages: this kernel has none (no HugePages_* in "
			"/proc/meminfo); %s",
			req ? "drop --huge-pages require"
			    : "using 4 KiB pages");
		return -ENOSYS;
	}
	need = kvr_seg_huge_pages_for(s->cfg.pool_bytes, hi.page_bytes);
	if (hi.free_pages < need) {
		/* The one line auto promises: how many, and how. */
		kvr_log(
		    req ? KVR_LOG_ERR : KVR_LOG_INFO,
		    "huge pages: pool needs %llu pages of %zu KiB, %llu free; "
		    "%s; reserve them before start: echo %llu > "
		    "/proc/sys/vm/nr_hugepages (sysctl vm.nr_hugepages=%llu; "
		    "docs/config.md)",
		    (unsigned long long)need, hi.page_bytes >> 10,
		    (unsigned long long)hi.free_pages,
		    req ? "--huge-pages require" : "using 4 KiB pages",
		    (unsigned long long)(hi.total_pages + need - hi.free_pages),
		    (unsigned long long)(hi.total_pages + need -
					 hi.free_pages));
		return -ENOSPC;
	}
	/* Named only when the .ctl is named too: the sweep pairs them. */
	if (s->cfg.pool_backend != KVR_POOL_MEMFD &&
	    s->ctl.backend == KVR_SEG_BACKEND_SHM) {
		dir = kvr__pool_huge_dir(s, dbuf, sizeof(dbuf));
		if (dir[0]) {
			rc = kvr_seg_create_hugetlbfs(dir, pool_name,
						      (size_t)s->cfg.pool_bytes,
						      mode, gid, &s->pool, &e);
			if (rc == 0) {
				s->backend = KVR_POOL_SHM;
				return 0;
			}
			kvr_log_warn("pool on hugetlbfs %s: %s", dir,
				     kvr_err_str(&e, rc));
			if (rc == -EEXIST)
				return rc;
		} else {
			kvr_log_info("huge pages: no writable hugetlbfs mount "
				     "of %zu KiB pages, so the pool is an "
				     "unnamed memfd (to name it: mount -t "
				     "hugetlbfs -o pagesize=%zuK none "
				     "/dev/hugepages, or --huge-dir)",
				     hi.page_bytes >> 10, hi.page_bytes >> 10);
		}
	}
	if (s->cfg.pool_backend == KVR_POOL_SHM)
		return -ENOENT;
	rc = kvr_seg_create_memfd(pool_name, (size_t)s->cfg.pool_bytes,
				  KVR_SEG_NEED_HUGETLB, &s->pool, &e);
	if (rc == 0) {
		s->backend = KVR_POOL_MEMFD;
		return 0;
	}
	kvr_log(req ? KVR_LOG_ERR : KVR_LOG_WARN,
		"pool on a hugetlb memfd: %s%s", kvr_err_str(&e, rc),
		req ? "" : "; using 4 KiB pages");
	return rc;
}

/* Pre-fault step: small enough that progress shows every second or so
 * even at 0.3 GB/s, large enough that the loop costs nothing. */
#define PREFAULT_STEP (256ull << 20)

/*
 * Touch the whole pool in steps and, during a long pre-fault (minutes for
 * a large pool of 4 KiB pages on a VM), tell the service manager how far
 * it got: STATUS= at the start and then at most once a second. The socket
 * does not exist yet, so a worker waiting for it (connect_wait_ms) and
 * systemd (Type=notify, READY=1 comes later from the loop) both wait.
 */
static void prefault_pool(struct kvr_srv *s, uint64_t *elapsed_ns)
{
	char *base = s->pool.base;
	uint64_t t0 = kvr_clock_now_ns(), last = t0, step_ns;
	size_t done = 0, total = s->pool.bytes;
	size_t page = s->pool.page_bytes ? s->pool.page_bytes : 4096;
	size_t stepb = PREFAULT_STEP % page ? page : PREFAULT_STEP;

	kvr__notify_progress("pre-faulting pool: 0 of %.1f GiB",
			     (double)total / (double)(1ull << 30));
	while (done < total) {
		size_t n = total - done < stepb ? total - done : stepb;

		kvr_seg_prefault_pages(base + done, n, page, true, &step_ns);
		done += n;
		if (kvr_clock_now_ns() - last >= 1000000000ull &&
		    done < total) {
			last = kvr_clock_now_ns();
			kvr__notify_progress(
			    "pre-faulting pool: %.1f of %.1f GiB (%.0f%%)",
			    (double)done / (double)(1ull << 30),
			    (double)total / (double)(1ull << 30),
			    100.0 * (double)done / (double)total);
		}
	}
	*elapsed_ns = kvr_clock_now_ns() - t0;
	kvr__notify_status("pool pre-faulted, opening socket");
}

/*
 * The pool: huge pages first (unless --huge-pages off or a private pool),
 * then the configured backend, or shm -> memfd -> private.
 */
int kvr__pool_create(struct kvr_srv *s)
{
	static const int order[] = {KVR_POOL_SHM, KVR_POOL_MEMFD,
				    KVR_POOL_PRIVATE};
	char pool_name[KVR_SEG_NAME_MAX + 1];
	uint64_t ns = 0;
	int rc = -EINVAL;

	if (kvr_seg_pool_name(s->cfg.name, pool_name, sizeof(pool_name)) < 0)
		return -EINVAL;
	if (s->cfg.huge_pages != KVR_HUGE_OFF &&
	    s->cfg.pool_backend != KVR_POOL_PRIVATE) {
		char hb[KVR_SIZE_STR_MAX];

		rc = try_huge(s, pool_name);
		if (rc < 0 &&
		    (s->cfg.huge_pages == KVR_HUGE_REQUIRE || rc == -EEXIST)) {
			if (rc != -EEXIST)
				kvr_log_err("no huge-page pool for %s under "
					    "--huge-pages require",
					    kvr_format_size(s->cfg.pool_bytes,
							    hb, sizeof(hb)));
			return rc;
		}
	}
	for (unsigned i = 0; rc < 0 && i < 3; i++) {
		if (s->cfg.pool_backend && order[i] != s->cfg.pool_backend)
			continue;
		/* A named pool beside an unnamed .ctl would look orphaned
		 * to the next server's sweep (the pair goes together). */
		if (order[i] == KVR_POOL_SHM && !s->cfg.pool_backend &&
		    s->ctl.backend != KVR_SEG_BACKEND_SHM)
			continue;
		rc = try_pool(s, order[i], pool_name);
		if (rc == 0) {
			s->backend = order[i];
			break;
		}
		/* A memfd that could not reserve its pages means the memory
		 * is not there: a private pool would only be OOM-killed while
		 * being pre-faulted. Stop here with a clear message. */
		if (order[i] == KVR_POOL_MEMFD && !s->cfg.pool_backend &&
		    (rc == -ENOMEM || rc == -ENOSPC))
			break;
	}
	if (rc < 0) {
		char h[KVR_SIZE_STR_MAX];

		kvr_log_err("no pool backend works for %s (%llu bytes): lower "
			    "--pool-size, enlarge /dev/shm, or try "
			    "--pool-backend memfd",
			    kvr_format_size(s->cfg.pool_bytes, h, sizeof(h)),
			    (unsigned long long)s->cfg.pool_bytes);
		return rc;
	}
	/* Huge pages: reserved by the mmap, zeroed at first touch, so the
	 * touch (the zeroing) runs beside the loop (prefault.c). */
	if (!s->cfg.no_prefault && s->pool.hugetlb &&
	    kvr__prefault_start(s) == 0) {
		kvr__notify_status("pool reserved, pre-fault in the "
				   "background, opening socket");
	} else if (!s->cfg.no_prefault) {
		/* One touch per page of the pool's own size. */
		prefault_pool(s, &ns);
		kvr_log_info("pool pre-faulted: %llu bytes in %.1f ms "
			     "(%.2f GB/s, %zu KiB pages)",
			     (unsigned long long)s->pool.bytes,
			     (double)ns / 1e6,
			     ns ? (double)s->pool.bytes / (double)ns : 0.0,
			     s->pool.page_bytes >> 10);
	}
	/* DESIGN rule 9: the transport, the pool's name and its size. */
	if (s->backend == KVR_POOL_PRIVATE)
		kvr_log_warn("transport copy: pool is server-private (%llu "
			     "bytes); every payload byte travels over the "
			     "socket, expect much lower throughput",
			     (unsigned long long)s->cfg.pool_bytes);
	else
		kvr_log_info("transport %s: pool %s%s%s (%llu bytes, %s)",
			     backend_name(s->backend),
			     s->backend == KVR_POOL_SHM ? s->pool.dir
							: "memfd:",
			     s->backend == KVR_POOL_SHM ? "/" : "", pool_name,
			     (unsigned long long)s->cfg.pool_bytes,
			     s->pool.hugetlb ? "huge pages" : "4 KiB pages");
	return 0;
}
