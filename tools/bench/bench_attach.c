/* SPDX-License-Identifier: MIT */
/*
 * bench_attach.c - the attach scenario of kvring-bench: what a pool costs
 * before the first byte moves, 4 KiB pages against huge pages, for pools
 * of 1, 4 and 16 GiB (--sizes), in one
 * run (each capped to a third of MemAvailable). Per cell (page size,
 * pool size) it reports
 *   server start   fork of kvringd to its "ready" line, per GiB, and the
 *                  pre-fault part of it (from the server's log), for a
 *                  first start and a restart on the same memory;
 *   worker attach  kvr_connect's map + pre-fault (info.attach_ns), the
 *                  median of --rounds fresh connections, per GiB;
 *   first store    8 x 2 MiB copied into the slots of a fresh connection's
 *                  first prepare_store, against memcpy of the same bytes
 *                  into the same slots right after;
 *   steady         store (prepare, copy, commit) and retrieve of 8 x 2 MiB,
 *                  the median of 10 requests, each against memcpy into the
 *                  same slots, interleaved request by request;
 *   zeroing        huge pages only: kvringd says ready before its pool is
 *                  zeroed (a background thread touches it, server/
 *                  prefault.c); fork to the end of that thread, per GiB,
 *                  for the start and the restart, and, on a third start,
 *                  a worker that connects at once: its attach per GiB,
 *                  whether the zeroing still ran when it connected,
 *                  whether its pre-fault then followed the server's
 *                  zeroing in a thread (abi 3.2, worker/touch.c) and
 *                  how long that thread took, and its first store
 *                  against memcpy, with the zeroed line just before it
 *                  and how many of its bytes lay above that line; then
 *                  a store into fresh slots once the line has passed
 *                  room for it, while the zeroing still runs ("room":
 *                  below the line, kvringd's allocator places it
 *                  there). A kvringd that
 *                  pre-faults in line (--kvringd of an older build, the
 *                  A/B baseline) gives zeroed == start;
 *   background     4 KiB only: --rounds connections with
 *                  prefault_background (medians): how long kvr_connect
 *                  took, the first store's GB/s while the pre-fault
 *                  thread still ran (and whether it did), and the
 *                  thread's total time.
 * Stores made while a pre-fault still runs also report their whole
 * request (prepare, copy, commit) as "request" GB/s, because the library
 * may do part of the work inside prepare (worker/touch.c touches a
 * prepare's slots first while its thread runs); the copy alone would then
 * flatter it.
 * Huge-page cells need free huge pages: with --reserve-huge (root) the
 * bench raises vm.nr_hugepages for them and restores the old value at
 * exit, on a signal too; otherwise a cell without enough free pages is
 * skipped with the command that would reserve them.
 *
 * Retrieved chunks are compared with the source byte for byte; wrong data
 * exits 1, slow figures never do.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include <kvring/kvring.h>
#include <kvring/layout.h>
#include <kvring/segment.h>

#include "bench_attach.h"
#include "bench_common.h"
#include "bench_plot.h"
#include "bench_server.h"

/* The server's "pool pre-faulted[ in the background]: N bytes in X ms"
 * figure, or 0. */
static double log_prefault_ms(const char *path)
{
	char line[512];
	double ms = 0;
	FILE *f = fopen(path, "re");
	const char *p;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (((p = strstr(line, "pool pre-faulted:")) ||
		     (p = strstr(line,
				 "pool pre-faulted in the background:"))) &&
		    (p = strstr(p, " bytes in ")))
			ms = strtod(p + 10, NULL);
	fclose(f);
	return ms;
}

/* Whether the server's log has @needle. */
static bool log_has(const char *path, const char *needle)
{
	char line[512];
	bool found = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

#define BG_DONE "pool pre-faulted in the background:"

/*
 * Wait (up to 10 minutes) for the end of the server's background zeroing
 * and return kvr_clock_now_ns() then; a server that pre-faulted in line (an
 * older kvringd, or 4 KiB pages) returns 0 at once.
 */
static uint64_t wait_zeroed(const struct bench_server *s)
{
	for (unsigned i = 0; i < 120000; i++) {
		if (log_has(s->d.log_path, BG_DONE))
			return kvr_clock_now_ns();
		if (log_has(s->d.log_path, "pool pre-faulted:"))
			return 0;
		usleep(5000);
	}
	return 0;
}

static int connect_opts(const struct bench_server *s, bool background,
			struct kvr_client **out)
{
	struct kvr_client_opts co;
	char err[256] = "";
	int rc;

	bench_client_opts(s, &co);
	co.prefault_background = background;
	rc = kvr_connect(&co, out, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "kvring-bench: attach: connect %s: %s\n",
			s->d.sock, err);
	return rc;
}

/*
 * One store request of NCHUNK fresh keys: prepare, copy (timed: *copy_ns),
 * commit. *memcpy_ns gets memcpy of the same bytes into the same slots
 * right after (the baseline). Keys are att->seq.. (advanced).
 */
static int store_req(struct att *a, struct kvr_client *c, uint64_t *copy_ns,
		     uint64_t *memcpy_ns, uint64_t *first_seq)
{
	struct kvr_key keys[NCHUNK];
	uint64_t sizes[NCHUNK], t0;
	struct kvr_xfer x = {0};
	void *ptr[NCHUNK];
	int rc;

	uint64_t t_req;

	*first_seq = a->seq;
	for (unsigned i = 0; i < NCHUNK; i++) {
		keys[i] = bench_key(a->seq++);
		sizes[i] = CHUNK_BYTES;
	}
	t_req = kvr_clock_now_ns();
	rc = kvr_prepare_store(c, keys, sizes, NCHUNK, &x);
	if (rc < 0 || x.nslots != NCHUNK) {
		fprintf(stderr, "kvring-bench: attach: prepare_store: %d %s\n",
			rc, kvr_client_errmsg(c));
		return rc < 0 ? rc : -ENOSPC;
	}
	for (unsigned i = 0; i < NCHUNK; i++)
		if (x.slots[i].status != KVR_SLOT_OK) {
			kvr_abort_store(c, &x);
			fprintf(stderr, "kvring-bench: attach: no slot\n");
			return -ENOSPC;
		}
	t0 = kvr_clock_now_ns();
	for (unsigned i = 0; i < NCHUNK; i++) {
		ptr[i] = x.slots[i].ptr;
		memcpy(ptr[i], a->src, CHUNK_BYTES);
	}
	*copy_ns = kvr_clock_now_ns() - t0;
	for (unsigned i = 0; i < NCHUNK; i++)
		a->last_off[i] = x.slots[i].off;
	rc = kvr_commit_store(c, &x);
	a->req_ns = kvr_clock_now_ns() - t_req;
	if (rc < 0)
		return rc;
	/* Same bytes again: the stored chunks do not change. */
	t0 = kvr_clock_now_ns();
	for (unsigned i = 0; i < NCHUNK; i++)
		memcpy(ptr[i], a->src, CHUNK_BYTES);
	*memcpy_ns = kvr_clock_now_ns() - t0;
	return 0;
}

/* Retrieve the request stored from key @seq: copy out, check. */
static int retrieve_req(struct att *a, struct kvr_client *c, uint64_t seq,
			uint64_t *copy_ns)
{
	struct kvr_key keys[NCHUNK];
	struct kvr_xfer x = {0};
	uint64_t t0;
	int rc;

	for (unsigned i = 0; i < NCHUNK; i++)
		keys[i] = bench_key(seq + i);
	rc = kvr_prepare_retrieve(c, keys, NCHUNK, &x);
	if (rc < 0 || x.nslots != NCHUNK) {
		fprintf(stderr,
			"kvring-bench: attach: retrieve got %u of %u "
			"chunks (%d)\n",
			x.nslots, NCHUNK, rc);
		return -EBADMSG;
	}
	t0 = kvr_clock_now_ns();
	for (unsigned i = 0; i < NCHUNK; i++)
		memcpy(a->dst + (size_t)i * CHUNK_BYTES, x.slots[i].ptr,
		       CHUNK_BYTES);
	*copy_ns = kvr_clock_now_ns() - t0;
	rc = kvr_commit_retrieve(c, &x);
	for (unsigned i = 0; i < NCHUNK; i++)
		if (memcmp(a->dst + (size_t)i * CHUNK_BYTES, a->src,
			   CHUNK_BYTES) != 0) {
			fprintf(stderr,
				"kvring-bench: attach: chunk %u of "
				"key %" PRIu64 " differs from what was "
				"stored\n",
				i, seq + i);
			return -EBADMSG;
		}
	return rc;
}

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_dbl);
	return n ? v[n / 2] : 0;
}

/* Bytes of the last store_req()'s slots that lie at or above @line. */
static uint64_t above_line(const struct att *a, uint64_t line)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < NCHUNK; i++) {
		uint64_t lo = a->last_off[i], hi = lo + CHUNK_BYTES;

		if (hi > line)
			n += hi - (lo > line ? lo : line);
	}
	return n;
}

/* Relaxed: the server's zeroed line, a figure for the report. */
static uint64_t line_of(const struct kvr_ctl_hdr_shm *h)
{
	return h ? atomic_load_explicit(&h->pool_zeroed_bytes,
					memory_order_relaxed)
		 : 0;
}

#define MIB_F(b) ((double)(b) / (double)(1u << 20))

/*
 * The background-prefault connections (4 KiB cells): --rounds fresh ones
 * (each maps the pool anew, so each first store meets untouched pages),
 * the median of each figure; pending if the thread still ran after any
 * first store.
 */
static int run_background(struct att *a, const struct bench_server *s,
			  struct cell *r)
{
	double conn[16], first[16], req[16], mc[16], pf[16];
	unsigned rounds = a->rounds < 16 ? a->rounds : 16, i;
	struct kvr_client *c;
	cpu_set_t all, mine;
	uint64_t t0, copy_ns, mc_ns, seq, ns = 0;
	int rc = 0;

	/* The pre-fault thread inherits our affinity: let it use every CPU
	 * (as an unpinned worker's would), then pin this thread back. */
	sched_getaffinity(0, sizeof(mine), &mine);
	CPU_ZERO(&all);
	for (int k = 0; k < bench_nr_cpus(); k++)
		CPU_SET(k, &all);
	for (i = 0; i < rounds && rc == 0; i++) {
		sched_setaffinity(0, sizeof(all), &all);
		t0 = kvr_clock_now_ns();
		rc = connect_opts(s, true, &c);
		conn[i] = (double)(kvr_clock_now_ns() - t0) / 1e6;
		sched_setaffinity(0, sizeof(mine), &mine);
		if (rc < 0)
			return rc;
		rc = store_req(a, c, &copy_ns, &mc_ns, &seq);
		if (kvr_prefault_status(c, false, NULL) == -EINPROGRESS)
			r->bg_pending = true;
		first[i] = gbps(REQ_BYTES, copy_ns);
		req[i] = gbps(REQ_BYTES, a->req_ns);
		mc[i] = gbps(REQ_BYTES, mc_ns);
		kvr_prefault_status(c, true, &ns);
		pf[i] = (double)ns / 1e6;
		kvr_close(c);
	}
	if (rc < 0)
		return rc;
	r->bg_connect_ms = median(conn, rounds);
	r->bg_first_gbps = median(first, rounds);
	r->bg_req_gbps = median(req, rounds);
	r->bg_memcpy_gbps = median(mc, rounds);
	r->bg_prefault_ms = median(pf, rounds);
	r->bg_done = true;
	return 0;
}

/*
 * Huge pages: a worker that connects the moment kvringd says ready, while
 * its background zeroing may still run; then wait for the zeroing.
 */
/*
 * Huge pages, still zeroing: once the first store is in, wait (1 ms steps,
 * at most 10 s) until the zeroed line has room for another request above
 * the first one's slots, then store into fresh slots. A line that reaches
 * the end first leaves room_pending false: the zeroing outran us.
 */
static int run_room(struct att *a, struct kvr_client *c,
		    const struct kvr_ctl_hdr_shm *h, struct cell *r)
{
	uint64_t hi = 0, line, copy_ns, mc_ns, seq;
	int rc;

	for (unsigned i = 0; i < NCHUNK; i++)
		if (a->last_off[i] + CHUNK_BYTES > hi)
			hi = a->last_off[i] + CHUNK_BYTES;
	for (unsigned i = 0; i < 10000 && line_of(h) < hi + REQ_BYTES; i++)
		usleep(1000);
	line = line_of(h);
	rc = store_req(a, c, &copy_ns, &mc_ns, &seq);
	if (rc < 0)
		return rc;
	r->dur_room_pending = line < r->pool_bytes;
	r->dur_room_line_mib = MIB_F(line);
	r->dur_room_above_mib = MIB_F(above_line(a, line));
	r->dur_room_gbps = gbps(REQ_BYTES, copy_ns);
	r->dur_room_req_gbps = gbps(REQ_BYTES, a->req_ns);
	r->dur_room_memcpy_gbps = gbps(REQ_BYTES, mc_ns);
	rc = retrieve_req(a, c, seq, &copy_ns);
	r->dur_room_done = rc == 0;
	return rc;
}

static int run_during(struct att *a, const struct bench_server *s,
		      struct cell *r)
{
	struct kvr_client *c;
	uint64_t copy_ns, mc_ns, seq, t0, line, ns = 0;
	const struct kvr_ctl_hdr_shm *h;
	void *map = NULL;
	size_t map_len = 0;
	int rc;

	r->dur_pending = !log_has(s->d.log_path, BG_DONE) &&
			 !log_has(s->d.log_path, "pool pre-faulted:");
	h = bench_server_map_ctl(s, &map, &map_len);
	t0 = kvr_clock_now_ns();
	rc = connect_opts(s, false, &c);
	if (rc < 0)
		goto out;
	r->dur_attach_ms = (double)kvr_client_info(c)->attach_ns / 1e6;
	/* The pre-touch of the rest follows the server's zeroing. */
	r->dur_follow = kvr_prefault_status(c, false, NULL) == -EINPROGRESS;
	line = line_of(h);
	rc = store_req(a, c, &copy_ns, &mc_ns, &seq);
	if (rc == 0) {
		r->dur_first_gbps = gbps(REQ_BYTES, copy_ns);
		r->dur_req_gbps = gbps(REQ_BYTES, a->req_ns);
		r->dur_memcpy_gbps = gbps(REQ_BYTES, mc_ns);
		r->dur_line_mib = MIB_F(line);
		r->dur_above_mib = MIB_F(above_line(a, line));
		rc = retrieve_req(a, c, seq, &copy_ns);
	}
	if (rc == 0 && h)
		rc = run_room(a, c, h, r);
	if (rc == 0) {
		kvr_prefault_status(c, true, &ns);
		r->dur_follow_ms = (double)(kvr_clock_now_ns() - t0) / 1e6;
	}
	kvr_close(c);
	wait_zeroed(s);
	r->dur_done = rc == 0;
out:
	if (h)
		munmap(map, map_len);
	return rc;
}

/* One cell: a private kvringd with @pool_bytes on @pages. */
static int run_cell(struct att *a, unsigned si, int pages)
{
	static const char *const huge_args[] = {"--huge-pages", "require",
						NULL};
	static const char *const small_args[] = {"--huge-pages", "off", NULL};
	struct cell *r = &a->res[si][pages];
	double att[16], st[STEADY_REQS], rt[STEADY_REQS], mc[STEADY_REQS];
	uint64_t t0, copy_ns, mc_ns, seq, seqs[STEADY_REQS];
	struct bench_server s;
	struct kvr_client *c;
	unsigned rounds = a->rounds < 16 ? a->rounds : 16;
	int rc;

	/*
	 * Started twice: on this VM the first use of memory the host has
	 * not backed yet (fresh huge pages just reserved, or shmem pages
	 * the guest gave back) costs several us per 4 KiB on the host side,
	 * whatever the page size; a restart on memory already used once is
	 * what a kvringd restart on a host with pages reserved at boot sees.
	 */
	for (int k = 0; k < (pages == P_HUGE ? 3 : 2); k++) {
		uint64_t tz;

		t0 = kvr_clock_now_ns();
		rc = bench_server_start_args(
		    &a->o, r->pool_bytes, 50, 64,
		    pages == P_HUGE ? huge_args : small_args, &s);
		if (rc < 0)
			return rc;
		if (k == 0) {
			r->start_ms = (double)(kvr_clock_now_ns() - t0) / 1e6;
			tz = wait_zeroed(&s);
			r->zeroed_ms =
			    tz ? (double)(tz - t0) / 1e6 : r->start_ms;
			r->srv_prefault_ms = log_prefault_ms(s.d.log_path);
			bench_server_stop(&s);
		} else if (k == 1) {
			r->restart_ms = (double)(kvr_clock_now_ns() - t0) / 1e6;
			tz = wait_zeroed(&s);
			r->rezeroed_ms =
			    tz ? (double)(tz - t0) / 1e6 : r->restart_ms;
			r->srv_reprefault_ms = log_prefault_ms(s.d.log_path);
			if (pages == P_HUGE)
				bench_server_stop(&s);
		} else {
			/* Pinned like the other connections. */
			bench_pin_cpu(a->o.cpu_client);
			rc = run_during(a, &s, r);
			if (rc < 0)
				goto out;
		}
	}
	bench_pin_cpu(a->o.cpu_client);

	/* Fresh connections: the attach, and the first one's first store. */
	for (unsigned i = 0; i < rounds; i++) {
		rc = connect_opts(&s, false, &c);
		if (rc < 0)
			goto out;
		att[i] = (double)kvr_client_info(c)->attach_ns / 1e6;
		if (i == 0) {
			/* Warm this CPU up with the same copy elsewhere, so
			 * the first store is not also the first big copy
			 * after a quiet spell (the baseline never is). */
			for (unsigned w = 0; w < NCHUNK; w++)
				memcpy(a->dst + (size_t)w * CHUNK_BYTES, a->src,
				       CHUNK_BYTES);
			rc = store_req(a, c, &copy_ns, &mc_ns, &seq);
			r->first_gbps = gbps(REQ_BYTES, copy_ns);
			r->first_memcpy_gbps = gbps(REQ_BYTES, mc_ns);
			if (rc == 0)
				rc = retrieve_req(a, c, seq, &copy_ns);
			/* Steady state on the same connection. */
			for (unsigned k = 0; rc == 0 && k < STEADY_REQS; k++) {
				rc =
				    store_req(a, c, &copy_ns, &mc_ns, &seqs[k]);
				st[k] = gbps(REQ_BYTES, copy_ns);
				mc[k] = gbps(REQ_BYTES, mc_ns);
			}
			for (unsigned k = 0; rc == 0 && k < STEADY_REQS; k++) {
				rc = retrieve_req(a, c, seqs[k], &copy_ns);
				rt[k] = gbps(REQ_BYTES, copy_ns);
			}
		}
		kvr_close(c);
		if (rc < 0)
			goto out;
	}
	r->attach_ms = median(att, rounds);
	r->store_gbps = median(st, STEADY_REQS);
	r->retr_gbps = median(rt, STEADY_REQS);
	r->memcpy_gbps = median(mc, STEADY_REQS);
	if (pages == P_4K)
		rc = run_background(a, &s, r);
	r->done = rc == 0;
out:
	bench_server_stop(&s);
	return rc;
}

/* Best of 3 memsets of 256 MiB already mapped, in ms per GiB. */
static double memset_floor(void)
{
	const size_t n = 256u << 20;
	unsigned char *p = bench_shm_map(n);
	uint64_t best = UINT64_MAX;

	if (!p)
		return 0;
	for (int i = 0; i < 3; i++) {
		uint64_t t0 = kvr_clock_now_ns(), dt;

		memset(p, i, n);
		__asm__ volatile("" : : "r"(p) : "memory");
		dt = kvr_clock_now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	bench_shm_unmap(p, n);
	return per_gib((double)best / 1e6, n);
}

/* ---- main ---- */

static int parse_sizes(struct att *a, const char *list)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", list);
	a->nsizes = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (a->nsizes == MAX_SIZES ||
		    !bench_parse_u64(tok, 64ull << 20, 1ull << 40, &v))
			return -EINVAL;
		a->sizes[a->nsizes++] = v;
	}
	return a->nsizes ? 0 : -EINVAL;
}

/* Each pool size capped to a third of MemAvailable; returns the largest. */
static uint64_t cap_sizes(struct att *a)
{
	uint64_t cap, need = 0;

	/* A third of what is available now: the pool (twice over while
	 * the huge pages of a cell are reserved beside the page cache of
	 * the last 4 KiB one), the bench's buffers and every other process
	 * on the host must fit. */
	cap =
	    bench_attach_mem_available() / 3 / (512ull << 20) * (512ull << 20);
	for (unsigned si = 0; si < a->nsizes; si++) {
		if (a->sizes[si] > cap) {
			fprintf(stderr,
				"kvring-bench: attach: pool %" PRIu64
				" MiB capped to %" PRIu64
				" MiB (a third of MemAvailable)\n",
				a->sizes[si] >> 20, cap >> 20);
			a->sizes[si] = cap;
		}
		if (a->sizes[si] > need)
			need = a->sizes[si];
	}
	return need;
}

/*
 * Whether the huge-page cell @r can run: free huge pages for its pool
 * (reserved again right before it with --reserve-huge); if not, r->skip
 * says why and how to reserve them.
 */
static bool huge_ready(struct att *a, struct cell *r,
		       struct kvr_hugetlb_info *hi)
{
	uint64_t pages;

	/* Again right before the cell: any kvringd
	 * on the host in auto mode takes free pages. */
	if (a->reserve && hi->page_bytes) {
		pages = kvr_seg_huge_pages_for(r->pool_bytes, hi->page_bytes);
		(void)bench_attach_reserve_huge(pages + 64);
	}
	(void)kvr_seg_hugetlb_info(hi);
	pages = kvr_seg_huge_pages_for(r->pool_bytes, hi->page_bytes);
	if (!hi->page_bytes || hi->free_pages < pages) {
		snprintf(r->skip, sizeof(r->skip),
			 "needs %" PRIu64 " free huge pages, %" PRIu64
			 " free (echo %" PRIu64 " > " NR_PATH ")",
			 pages, hi->free_pages,
			 hi->total_pages + pages - hi->free_pages);
		return false;
	}
	return true;
}

int bench_attach_main(int argc, char **argv)
{
	static const char extra[] =
	    "attach options (after the common ones):\n"
	    "  --sizes LIST        pool sizes (default 1G,4G,16G; --quick: "
	    "1G), each\n"
	    "                      capped to a third of MemAvailable\n"
	    "  --rounds N          fresh connections per cell (default 3)\n"
	    "  --reserve-huge      (root) raise vm.nr_hugepages so the "
	    "huge-page cells\n"
	    "                      run; the old value is restored at exit\n";
	struct att *a;
	uint64_t need;
	struct kvr_hugetlb_info hi = {0};
	int rc, exit_rc = BENCH_EXIT_OK;

	a = calloc(1, sizeof(*a));
	if (!a)
		return BENCH_EXIT_ERR;
	rc = bench_run_opts_parse(argc, argv, "attach", extra, &a->o);
	if (rc) {
		free(a);
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	}
	if (parse_sizes(a, a->o.sizes	? a->o.sizes
			   : a->o.quick ? "1G"
					: "1G,4G,16G") < 0) {
		fprintf(stderr, "kvring-bench: attach: bad --sizes\n");
		free(a);
		return BENCH_EXIT_USAGE;
	}
	a->rounds = a->o.rounds ? a->o.rounds : 3;
	a->reserve = a->o.reserve_huge;
	bench_clock_init();
	a->src = bench_shm_map(CHUNK_BYTES);
	a->dst = bench_shm_map(REQ_BYTES);
	if (!a->src || !a->dst) {
		free(a);
		return BENCH_EXIT_ERR;
	}
	for (size_t i = 0; i < CHUNK_BYTES; i++)
		a->src[i] = (unsigned char)(i * 131 + (i >> 12));
	a->memset_ms_per_gib = memset_floor();
	need = cap_sizes(a);
	(void)kvr_seg_hugetlb_info(&hi);
	if (a->reserve && hi.page_bytes) {
		uint64_t pages = kvr_seg_huge_pages_for(need, hi.page_bytes);

		/* A margin: other kvringds on the host (auto takes free huge
		 * pages) must not leave a cell short. */
		rc = bench_attach_reserve_huge(
		    pages + (pages / 4 > 64 ? pages / 4 : 64));
		if (rc < 0)
			fprintf(
			    stderr,
			    "kvring-bench: attach: reserve huge pages: %s\n",
			    strerror(-rc));
	}
	for (unsigned si = 0; si < a->nsizes; si++) {
		for (int p = 0; p < NR_PAGES; p++) {
			struct cell *r = &a->res[si][p];

			r->pool_bytes = a->sizes[si];
			if (p == P_HUGE && !huge_ready(a, r, &hi))
				continue;
			rc = run_cell(a, si, p);
			if (rc == -EBADMSG)
				exit_rc = BENCH_EXIT_ERR;
		}
	}
	bench_attach_restore_huge();
	if (a->o.json) {
		struct bench_json j;

		bench_json_begin(&j, "attach", "floor_memset");
		bench_json_f64(&j, "ms_per_gib", a->memset_ms_per_gib);
		bench_json_print(&j, stdout);
		bench_attach_print_json(a);
	} else {
		bench_attach_print_table(a);
	}
	if (a->o.plot_dir)
		bench_attach_plot(a);
	bench_shm_unmap(a->src, CHUNK_BYTES);
	bench_shm_unmap(a->dst, REQ_BYTES);
	free(a);
	return exit_rc;
}
