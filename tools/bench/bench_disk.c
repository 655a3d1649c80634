/* SPDX-License-Identifier: MIT */
/*
 * bench_disk.c - the disk scenario of kvring-bench: kvringd's disk tier
 * (docs/storage.md, "The disk tier") beside fio on the same file system,
 * in the same run, with the same chunk size and queue depth:
 *
 *   write_back  --disk-mode evict: a worker storing as fast as it can
 *             (NOROOM answers stored again): GB/s written back, the
 *             chunks the pool evicted and how many were on disk first
 *   write     a worker stores 2 MiB chunks into a kvringd with
 *             --disk-mode commit, at most 32 chunks ahead of the disk (a commit
 * of 16 and 16 more); GB/s of chunks written to disk, from the first commit to
 *             the last write (the disk's own counters), beside fio's
 *             O_DIRECT sequential write GB/s (bs 2M, iodepth 16,
 *             io_uring)
 *   read      16-chunk lookups of chunks the pool no longer holds, read
 *             through from disk (GB/s), and 1-chunk lookups (p50/p99 per
 *             2 MiB chunk), beside fio's O_DIRECT sequential read GB/s
 *   rtt_hot   another worker's ping round trip (p50), idle and while
 *             the write-back runs, then idle and while the read-through
 *             runs
 *   restart   kvringd stopped and started on the same --disk: time to
 *             serve, and the index rebuild in ms per GiB of disk
 *   write_fixed, read_fixed  write and read again on a huge-page pool,
 *             whose records move on registered buffers (or one line
 *             saying why not: no free huge pages, --reserve-huge)
 *
 * The data directory is --dir-like: $KVR_BENCH_DISK_DIR, else
 * kvr-bench-disk-<pid> in the working directory (refused on tmpfs). fio
 * is Debian's package (scripts/setup.sh bench); without it the fio
 * columns say so. Every chunk read back is compared with what was
 * stored: a wrong byte fails the run.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/kvring.h>

#include <kvring/segment.h>

#include "bench_attach.h"
#include "bench_common.h"
#include "bench_server.h"

#define CHUNK  ((uint64_t)2 << 20)
#define BATCH  16u /* chunks per request: the read-through queue depth */
#define FIO_QD "16"
#define AHEAD  16u /* chunks the worker stores ahead of the disk's writes */
#define LD(x)  atomic_load_explicit(&(x), memory_order_relaxed)

/* The run's state. Owned by bench_disk_main (stack). */
struct env {
	struct bench_run_opts o;
	struct bench_server srv;
	struct kvr_client *c;
	struct kvr_client *hot; /* another worker: ping round trips */
	char dir[512], data[544], fio_file[600];
	const char *mode; /* --disk-mode of the next start() */
	bool fixed;	  /* the next start() on a huge-page pool (run_fixed) */
	uint64_t disk_bytes, pool_bytes, nchunks;
	struct kvr_key *keys;
};

/* Chunk i's key and bytes: a pattern derived from i, so any chunk read
 * back can be checked. */
static void key_of(uint64_t i, struct kvr_key *k)
{
	k->lo = 0x6b76726469736b00ull ^ (i * 0x9e3779b97f4a7c15ull);
	k->hi = i + 1;
}

static void fill(uint64_t i, void *p)
{
	uint64_t *w = p;

	for (size_t k = 0; k < CHUNK / 8; k += 512)
		w[k] = i * 0x100000001b3ull + k;
}

static bool same(uint64_t i, const void *p)
{
	const uint64_t *w = p;

	for (size_t k = 0; k < CHUNK / 8; k += 512)
		if (w[k] != i * 0x100000001b3ull + k)
			return false;
	return true;
}

/* The monotonic clock in seconds (vDSO). */
static double now_s(void)
{
	return (double)kvr_clock_now_ns() / 1e9;
}

/* ---- another worker's hot round trip ---- */

#define RTT_MAX 200000u

/* The pinger: kvr_ping on e->hot until told to stop. Owned by run(). */
struct pinger {
	struct kvr_client *c;
	atomic_bool stop;
	double p99; /* us, set by p50_us() */
	uint64_t n, ns[RTT_MAX];
};

static void *ping_loop(void *arg)
{
	struct pinger *p = arg;
	uint64_t t_ns;

	while (!atomic_load(&p->stop) && p->n < RTT_MAX) {
		uint64_t t0 = kvr_clock_now_ns();

		if (kvr_ping(p->c, &t_ns) < 0)
			break;
		p->ns[p->n++] = kvr_clock_now_ns() - t0;
	}
	return NULL;
}

/* p50 of @p's samples in us (sorts them; their p99 into p->p99). */
static double p50_us(struct pinger *p)
{
	bench_sort_u64(p->ns, p->n);
	p->p99 = p->n ? (double)bench_percentile(p->ns, p->n, 99) / 1e3 : 0;
	return p->n ? (double)bench_percentile(p->ns, p->n, 50) / 1e3 : 0;
}

/* Start pinging afresh; false when the thread could not start. */
static bool pings_start(struct pinger *p, pthread_t *th)
{
	p->n = 0;
	atomic_store(&p->stop, false);
	return pthread_create(th, NULL, ping_loop, p) == 0;
}

/* Stop the pinger started by pings_start(): its p50 in us. */
static double pings_stop(struct pinger *p, pthread_t th)
{
	atomic_store(&p->stop, true);
	pthread_join(th, NULL);
	return p50_us(p);
}

/* The rtt_hot line: another worker's ping p50 idle and during @phase
 * (JSON key @key), and the p99s (@p99[0] idle, @p99[1] during). */
static void rtt_report(const struct env *e, const char *phase, const char *key,
		       double idle_us, double busy_us, const double p99[2])
{
	if (e->o.json) {
		struct bench_json j;

		bench_json_begin(&j, "disk", "rtt_hot");
		bench_json_f64(&j, "idle_p50_us", idle_us);
		bench_json_f64(&j, key, busy_us);
		bench_json_f64(&j, "idle_p99_us", p99[0]);
		bench_json_f64(&j, "during_p99_us", p99[1]);
		bench_json_print(&j, stdout);
	} else {
		printf("rtt_hot  another worker's ping p50 %.1f us idle, %.1f "
		       "us during the %s (x%.2f)\n",
		       idle_us, busy_us, phase,
		       idle_us > 0 ? busy_us / idle_us : 0);
		printf("         p99 %.1f us idle, %.1f us during (x%.2f)\n",
		       p99[0], p99[1], p99[0] > 0 ? p99[1] / p99[0] : 0);
	}
}

/* ---- fio ---- */

/* fio's bw_bytes of direction @dir ("read"/"write") from its JSON, or a
 * negative value when fio is missing or failed. */
static double fio_run(const struct env *e, const char *rw, const char *dir)
{
	char cmd[1536], buf[65536];
	const char *p;
	size_t n;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "fio --name=kvr --filename='%s' --size=%" PRIu64
		 " --bs=2M --iodepth=" FIO_QD " --rw=%s --direct=1 "
		 "--ioengine=io_uring --output-format=json 2>/dev/null",
		 e->fio_file, e->nchunks * CHUNK, rw);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	if (pclose(f) != 0)
		return -1;
	p = strstr(buf, dir[0] == 'r' ? "\"read\" :" : "\"write\" :");
	p = p ? strstr(p, "\"bw_bytes\" :") : NULL;
	return p ? strtod(p + 12, NULL) : -1;
}

/* ---- the kvringd side ---- */

/*
 * Start the private kvringd on e->data (commit mode, 2 MiB records, the
 * pool and disk sizes of the run; read-throughs may take a minute before
 * "ask again"), map its control header for the disk counters, and
 * connect the worker. Return 0 or -errno (said on stderr).
 */
static int start(struct env *e)
{
	char dsize[32];
	const char *extra[] = {"--disk",
			       e->data,
			       "--disk-size",
			       dsize,
			       "--disk-mode",
			       e->mode,
			       "--disk-chunk",
			       "2M",
			       "--quota-reserved",
			       "100%",
			       "--quota-pinned",
			       "100%",
			       "--max-key-bytes",
			       "100%",
			       "--l2-deadline-ms",
			       "60000",
			       NULL, /* --huge-pages require (e->fixed) */
			       NULL,
			       NULL};
	struct kvr_client_opts co;
	char err[256] = "";
	int rc;

	snprintf(dsize, sizeof(dsize), "%" PRIu64, e->disk_bytes);
	if (e->fixed) {
		size_t i = 0;

		while (extra[i])
			i++;
		extra[i] = "--huge-pages"; /* the two NULLs kept for it */
		extra[i + 1] = "require";
	}
	rc = bench_server_start_args(&e->o, e->pool_bytes, 50, 8, extra,
				     &e->srv);
	if (rc < 0)
		return rc;
	/* The disk's counters, read from the control header. */
	if (!e->srv.d.hdr && (rc = kvrd_map(&e->srv.d, 0)) < 0) {
		fprintf(stderr,
			"kvring-bench disk: map the control segment: "
			"%s\n",
			strerror(-rc));
		return rc;
	}
	bench_client_opts(&e->srv, &co);
	co.spin_us = 50;
	rc = kvr_connect(&co, &e->c, err, sizeof(err));
	if (rc == 0)
		rc = kvr_connect(&co, &e->hot, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "kvring-bench disk: connect: %s\n", err);
	return rc;
}

/* Close the worker and SIGTERM the server (its disk file stays). */
static void stop(struct env *e)
{
	kvr_close(e->c);
	kvr_close(e->hot);
	e->c = e->hot = NULL;
	bench_server_stop(&e->srv);
}

/*
 * Store chunks [i0, i0 + n) in one request. With @held, as a worker that
 * wants every chunk kept: those answered NOROOM (in evict mode, the
 * write-back holding the worker to the disk's speed) are stored again
 * 100 us later, counted in *@held. Return 0 or -errno.
 */
static int store_held(struct env *e, uint64_t i0, uint32_t n, uint64_t *held)
{
	uint64_t sz[BATCH], idx[BATCH];
	struct kvr_key k[BATCH];

	for (uint32_t j = 0; j < n; j++)
		idx[j] = i0 + j;
	while (n > 0) {
		struct kvr_xfer x;
		uint32_t m = 0;
		int rc;

		for (uint32_t j = 0; j < n; j++) {
			k[j] = e->keys[idx[j]];
			sz[j] = CHUNK;
		}
		rc = kvr_prepare_store(e->c, k, sz, n, &x);
		if (rc < 0)
			return rc;
		for (uint32_t j = 0; j < x.nslots; j++)
			if (x.slots[j].status == KVR_SLOT_OK)
				fill(idx[j], x.slots[j].ptr);
			else if (x.slots[j].status == KVR_SLOT_NOROOM)
				idx[m++] = idx[j];
		rc = kvr_commit_store(e->c, &x);
		if (rc < 0 || !held)
			return rc;
		*held += m;
		n = m;
		if (n)
			usleep(100);
	}
	return 0;
}

/* Store chunks [i0, i0 + n) in one request, once. */
static int store(struct env *e, uint64_t i0, uint32_t n)
{
	return store_held(e, i0, n, NULL);
}

/* Look chunks [i0, i0 + n) up through the tiers until the read-through
 * answered (no "ask again"), retrieve and check them. Return the hits,
 * or -1 on a wrong byte. */
static long read_through(struct env *e, uint64_t i0, uint32_t n)
{
	bool pending = true;
	struct kvr_xfer x;
	long hits = 0;

	while (pending) {
		hits = kvr_lookup_l2(e->c, &e->keys[i0], n, NULL, &pending);
		if (hits < 0)
			return hits;
	}
	if (hits == 0 ||
	    kvr_prepare_retrieve(e->c, &e->keys[i0], (uint32_t)hits, &x) < 0)
		return hits;
	for (uint32_t k = 0; k < x.nslots; k++)
		if (!same(i0 + k, x.slots[k].ptr)) {
			fprintf(stderr,
				"kvring-bench disk: chunk %" PRIu64
				" read back wrong\n",
				i0 + k);
			return -1;
		}
	hits = (long)x.nslots; /* the commit clears x */
	(void)kvr_commit_retrieve(e->c, &x);
	return hits;
}

/* One result: a table row, or a JSON line with --json. fio_gbs < 0: fio
 * was not there; p50_us 0: no latency for this subject. */
static void report(const struct env *e, const char *subject, double gbs,
		   double fio_gbs, double p50_us, double p99_us)
{
	if (e->o.json) {
		struct bench_json j;

		bench_json_begin(&j, "disk", subject);
		bench_json_f64(&j, "gb_per_s", gbs);
		if (fio_gbs >= 0)
			bench_json_f64(&j, "fio_gb_per_s", fio_gbs);
		if (p50_us > 0) {
			bench_json_f64(&j, "p50_us_per_chunk", p50_us);
			bench_json_f64(&j, "p99_us_per_chunk", p99_us);
		}
		bench_json_print(&j, stdout);
		return;
	}
	printf("%-8s %7.2f GB/s", subject, gbs);
	if (fio_gbs >= 0)
		printf("   fio %7.2f GB/s   ratio %.2f", fio_gbs,
		       fio_gbs > 0 ? gbs / fio_gbs : 0);
	else
		printf("   fio: not installed (scripts/setup.sh bench)");
	if (p50_us > 0)
		printf("   p50 %.0f us  p99 %.0f us per 2 MiB chunk", p50_us,
		       p99_us);
	printf("\n");
}

/*
 * write-back: a fresh file and --disk-mode evict; the worker stores every
 * chunk as fast as it can, storing again 100 us later each chunk answered
 * NOROOM (the write-back's guard holding it to the disk's speed). The
 * tier writes the pool's cold end ahead of eviction: GB/s from the first
 * write to the last, the chunks the pool evicted and how many of them
 * were on disk first, and the NOROOM answers.
 */
static int write_back(struct env *e)
{
	const struct kvr_ctl_hdr_shm *h;
	uint64_t held = 0, evicted, unsaved;
	double t = 0, gbs, idle_us = 0, p99[2] = {0, 0};
	struct pinger *pg = calloc(1, sizeof(*pg));
	bool pinging = false;
	pthread_t th;
	int rc = 1;

	e->mode = "evict";
	if (!pg || start(e) < 0)
		goto out;
	h = e->srv.d.hdr;
	/* Another worker pings, idle and then while the disk writes. */
	pg->c = e->hot;
	if (pings_start(pg, &th)) {
		usleep(300000);
		idle_us = pings_stop(pg, th);
		p99[0] = pg->p99;
		pinging = pings_start(pg, &th);
	}
	for (uint64_t i = 0; i < e->nchunks; i += BATCH) {
		if (store_held(e, i, BATCH, &held) < 0)
			goto out;
		if (t == 0 && LD(h->disk.writes))
			t = now_s();
	}
	while (LD(h->disk.queue_depth))
		usleep(200);
	t = t > 0 ? now_s() - t : 0;
	gbs = t > 0 ? (double)LD(h->disk.write_bytes) / t / 1e9 : 0;
	if (pinging) {
		double busy_us = pings_stop(pg, th);

		p99[1] = pg->p99;
		rtt_report(e, "write-back", "during_write_back_p50_us", idle_us,
			   busy_us, p99);
		pinging = false;
	}
	/* Counters follow within a heartbeat (50 ms). */
	usleep(100000);
	evicted = LD(h->stats.evictions);
	unsaved = LD(h->disk.unsaved);
	if (e->o.json) {
		struct bench_json j;

		bench_json_begin(&j, "disk", "write_back");
		bench_json_f64(&j, "gb_per_s", gbs);
		bench_json_u64(&j, "chunks_written", LD(h->disk.writes));
		bench_json_u64(&j, "pool_evictions", evicted);
		bench_json_u64(&j, "evicted_unsaved", unsaved);
		bench_json_u64(&j, "noroom_retries", held);
		bench_json_print(&j, stdout);
	} else {
		printf("write_back %5.2f GB/s   %" PRIu64 " chunks written, "
		       "%" PRIu64 " of the %" PRIu64 " chunks the pool "
		       "evicted on disk first (%" PRIu64 " unsaved), %" PRIu64
		       " stores answered NOROOM and retried\n",
		       gbs, (uint64_t)LD(h->disk.writes),
		       evicted > unsaved ? evicted - unsaved : 0, evicted,
		       unsaved, held);
	}
	rc = 0;
out:
	if (pinging)
		(void)pings_stop(pg, th);
	free(pg);
	stop(e);
	/* The next part starts from an empty file. */
	snprintf(e->fio_file, sizeof(e->fio_file), "%.540s/kvring-disk.dat",
		 e->data);
	unlink(e->fio_file);
	snprintf(e->fio_file, sizeof(e->fio_file), "%.512s/fio.dat", e->dir);
	e->mode = "commit";
	return rc;
}

/* The parts, in order, on one server and one file; 0, or 1 when
 * something failed or a chunk came back wrong. */
/* Write every chunk through, 16 per request, paced to the disk, and
 * report the rate beside fio's sequential O_DIRECT writes. */
static int phase_write(struct env *e)
{
	const struct kvr_ctl_hdr_shm *h = e->srv.d.hdr;
	double t, w_gbs, fio_w;

	t = now_s();
	for (uint64_t i = 0; i < e->nchunks; i += BATCH) {
		if (store(e, i, BATCH) < 0) {
			fprintf(stderr, "kvring-bench disk: store failed\n");
			return 1;
		}
		/* Paced to the disk: at most AHEAD chunks not yet written
		 * (the tier drops what falls too far behind). */
		while (i + BATCH >
		       LD(h->disk.writes) + LD(h->disk.dropped) + AHEAD)
			usleep(50);
	}
	while (LD(h->disk.queue_depth) ||
	       LD(h->disk.writes) + LD(h->disk.dropped) < e->nchunks)
		usleep(200);
	t = now_s() - t;
	w_gbs = (double)LD(h->disk.write_bytes) / t / 1e9;
	if (!e->o.json)
		printf("         %" PRIu64 " chunks written, %" PRIu64
		       " dropped, %" PRIu64 " on disk, %.2f s\n",
		       (uint64_t)LD(h->disk.writes),
		       (uint64_t)LD(h->disk.dropped),
		       (uint64_t)LD(h->disk.objects), t);
	fio_w = fio_run(e, "write", "write");
	report(e, e->fixed ? "write_fixed" : "write", w_gbs,
	       fio_w < 0 ? -1 : fio_w / 1e9, 0, 0);
	return 0;
}

/* Another worker's ping p50 (us) over 0.3 s idle; *@ok false when its
 * thread could not start. */
static double idle_pings(struct pinger *pg, bool *ok)
{
	pthread_t th;

	*ok = pthread_create(&th, NULL, ping_loop, pg) == 0;
	if (!*ok)
		return 0;
	usleep(300000);
	atomic_store(&pg->stop, true);
	pthread_join(th, NULL);
	return p50_us(pg);
}

/* Read the oldest half back through the disk, 16 at a time, while
 * another worker pings; report its ping p50 idle and during. Return the
 * read-through GB/s, or a negative value on failure. */
static double phase_read(struct env *e)
{
	struct pinger *pg = calloc(1, sizeof(*pg));
	double idle_us, busy_us, t, p99[2];
	uint64_t n1 = 0;
	pthread_t th;
	long got = 0;
	bool ok;

	if (!pg)
		return -1;
	pg->c = e->hot;
	idle_us = idle_pings(pg, &ok);
	p99[0] = pg->p99;
	pg->n = 0;
	atomic_store(&pg->stop, false);
	if (!ok || pthread_create(&th, NULL, ping_loop, pg) != 0) {
		free(pg);
		return -1;
	}
	t = now_s();
	for (uint64_t i = 0; i + BATCH <= e->nchunks / 2; i += BATCH) {
		got = read_through(e, i, BATCH);
		if (got < 0)
			break;
		n1 += (uint64_t)got;
	}
	t = now_s() - t;
	atomic_store(&pg->stop, true);
	pthread_join(th, NULL);
	busy_us = p50_us(pg);
	p99[1] = pg->p99;
	free(pg);
	if (got < 0)
		return -1;
	rtt_report(e, "read-through", "during_read_through_p50_us", idle_us,
		   busy_us, p99);
	return (double)n1 * CHUNK / t / 1e9;
}

/* One chunk at a time, from the newer half the reads above pushed out of
 * the pool: the latency of one 2 MiB read-through, reported with the
 * read rate @r_gbs beside fio's sequential reads. */
static int phase_latency(struct env *e, double r_gbs)
{
	double fio_r = fio_run(e, "read", "read");
	uint64_t *lat = calloc(e->nchunks, sizeof(*lat)), n1 = 0, t0;
	long got;

	for (uint64_t i = e->nchunks / 2;
	     lat && i < e->nchunks / 2 + 64 && i < e->nchunks; i++) {
		t0 = kvr_clock_now_ns();
		got = read_through(e, i, 1);
		if (got < 0) {
			free(lat);
			return 1;
		}
		if (got == 1)
			lat[n1++] = kvr_clock_now_ns() - t0;
	}
	bench_sort_u64(lat, n1);
	report(e, e->fixed ? "read_fixed" : "read", r_gbs,
	       fio_r < 0 ? -1 : fio_r / 1e9,
	       n1 ? (double)bench_percentile(lat, n1, 50) / 1e3 : 0,
	       n1 ? (double)bench_percentile(lat, n1, 99) / 1e3 : 0);
	free(lat);
	return 0;
}

/* Restart on the same disk: time to serving, and the index rebuild's
 * rate per GiB of disk. */
static int phase_restart(struct env *e)
{
	const struct kvr_ctl_hdr_shm *h;
	double t, ready_s, rebuild_s, gib = (double)e->disk_bytes / (1u << 30);

	stop(e);
	t = now_s();
	if (start(e) < 0)
		return 1;
	ready_s = now_s() - t;
	h = e->srv.d.hdr;
	while (!LD(h->disk.rebuilt))
		usleep(100);
	/* The scan's own time, from the tier's open to its last header. */
	rebuild_s = (double)LD(h->disk.rebuild_ns) / 1e9;
	if (e->o.json) {
		struct bench_json j;

		bench_json_begin(&j, "disk", "restart");
		bench_json_f64(&j, "serving_ms", ready_s * 1e3);
		bench_json_f64(&j, "rebuild_ms_per_gib", rebuild_s * 1e3 / gib);
		bench_json_u64(&j, "objects", LD(h->disk.objects));
		bench_json_print(&j, stdout);
	} else {
		printf("restart  serving %.0f ms after the start (pool set-up "
		       "included), index rebuilt in %.1f ms per GiB of disk "
		       "(%.1f GiB/s), %" PRIu64 " chunks\n",
		       ready_s * 1e3, rebuild_s * 1e3 / gib,
		       rebuild_s > 0 ? gib / rebuild_s : 0,
		       (uint64_t)LD(h->disk.objects));
	}
	return 0;
}

static int run(struct env *e)
{
	double r_gbs;

	if (start(e) < 0 || phase_write(e) != 0)
		return 1;
	r_gbs = phase_read(e);
	if (r_gbs < 0 || phase_latency(e, r_gbs) != 0)
		return 1;
	return phase_restart(e);
}

/* Why write_fixed / read_fixed were not measured: one line (a JSON
 * object with --json). */
static void fixed_skipped(const struct env *e, const char *why)
{
	struct bench_json j;

	if (!e->o.json) {
		printf("registered buffers: not measured: %s\n", why);
		return;
	}
	bench_json_begin(&j, "disk", "registered_buffers");
	bench_json_bool(&j, "measured", false);
	bench_json_str(&j, "why", why);
	bench_json_print(&j, stdout);
}

/*
 * The write-through and read-through phases again on a huge-page pool
 * (kvringd --huge-pages require), whose records move on buffers
 * registered with the tier's io_uring (WRITE_FIXED / READ_FIXED), from a
 * fresh file: subjects write_fixed and read_fixed beside fio again, to
 * compare with write and read above. Without enough free huge pages (as
 * root, --reserve-huge raises vm.nr_hugepages for the run and gives it
 * back at exit), or when kvringd did not register them, one line says
 * why and the run goes on.
 */
static int run_fixed(struct env *e)
{
	uint64_t pages = e->pool_bytes / (2u << 20) + 8;
	struct kvr_hugetlb_info hi = {0};
	char why[200];
	double r_gbs;

	if (e->o.reserve_huge)
		(void)bench_attach_reserve_huge(pages);
	if (kvr_seg_hugetlb_info(&hi) < 0 || hi.page_bytes != (2u << 20) ||
	    hi.free_pages < pages) {
		snprintf(why, sizeof(why),
			 "%" PRIu64 " free 2 MiB huge pages, %" PRIu64
			 " needed for the pool (as root: --reserve-huge)",
			 hi.free_pages, pages);
		fixed_skipped(e, why);
		return 0;
	}
	stop(e);
	snprintf(why, sizeof(why), "%.180s/kvring-disk.dat", e->data);
	unlink(why);
	e->fixed = true;
	if (start(e) < 0)
		return 1;
	if (!e->srv.d.hdr->disk.fixed) {
		fixed_skipped(e, "kvringd did not register the huge-page pool "
				 "(its log says why)");
		return 0;
	}
	if (phase_write(e) != 0)
		return 1;
	r_gbs = phase_read(e);
	if (r_gbs < 0)
		return 1;
	return phase_latency(e, r_gbs);
}

int bench_disk_main(int argc, char **argv);

int bench_disk_main(int argc, char **argv)
{
	struct env e = {0};
	const char *d = getenv("KVR_BENCH_DISK_DIR");
	char cwd[448];
	struct statfs sf;
	int rc;

	/* 1: --help was printed (exit 0), 2: a usage error. */
	rc = bench_run_opts_parse(argc, argv, "disk",
				  "  the data directory: $KVR_BENCH_DISK_DIR, "
				  "else ./kvr-bench-disk-<pid>\n",
				  &e.o);
	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	bench_clock_init();
	if (d && *d)
		snprintf(e.dir, sizeof(e.dir), "%.500s", d);
	else if (!getcwd(cwd, sizeof(cwd)))
		return 1;
	else
		snprintf(e.dir, sizeof(e.dir), "%s/kvr-bench-disk-%d", cwd,
			 (int)getpid());
	if (mkdir(e.dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "kvring-bench disk: mkdir %s: %s\n", e.dir,
			strerror(errno));
		return 1;
	}
	if (statfs(e.dir, &sf) == 0 && sf.f_type == TMPFS_MAGIC)
		fprintf(stderr,
			"kvring-bench disk: %s is on tmpfs: the "
			"figures are the page cache's\n",
			e.dir);
	snprintf(e.data, sizeof(e.data), "%.512s/kvr", e.dir);
	snprintf(e.fio_file, sizeof(e.fio_file), "%.512s/fio.dat", e.dir);
	/* A pool of an eighth of the disk (or --pool-size): most chunks
	 * read back come from the disk, not from the pool. */
	e.pool_bytes = e.o.pool_bytes ? e.o.pool_bytes : 256ull << 20;
	e.mode = "commit";
	e.disk_bytes = e.o.quick ? 1ull << 30 : 4ull << 30;
	e.nchunks = (e.disk_bytes / (CHUNK + 4096) - 2) / BATCH * BATCH;
	e.keys = calloc(e.nchunks, sizeof(*e.keys));
	if (!e.keys)
		return 1;
	for (uint64_t i = 0; i < e.nchunks; i++)
		key_of(i, &e.keys[i]);
	if (!e.o.json)
		printf("disk tier: %" PRIu64 " MiB file, %" PRIu64
		       " chunks of 2 MiB, %" PRIu64 " MiB pool, in %s; fio "
		       "bs 2M iodepth " FIO_QD " O_DIRECT io_uring\n",
		       e.disk_bytes >> 20, e.nchunks, e.pool_bytes >> 20,
		       e.dir);
	rc = write_back(&e);
	if (rc == 0)
		rc = run(&e);
	if (rc == 0)
		rc = run_fixed(&e);
	/* Everything the run made goes: the server, fio's file, the disk
	 * tier's file and both directories. */
	stop(&e);
	unlink(e.fio_file);
	snprintf(e.fio_file, sizeof(e.fio_file), "%.540s/kvring-disk.dat",
		 e.data);
	unlink(e.fio_file);
	rmdir(e.data);
	rmdir(e.dir);
	free(e.keys);
	return rc;
}
