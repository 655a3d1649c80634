/* SPDX-License-Identifier: MIT */
/*
 * bench_l2.c - the l2 scenario of kvring-bench: kvringd's L2 tier
 * (docs/l2.md) against a private redis-server this bench starts on a free
 * loopback port, then against a private 3-master Redis Cluster (started
 * with redis-server --cluster-enabled yes and redis-cli --cluster create
 * on free loopback ports), beside a plain client in the same run. Each
 * JSON line says which ("target": "redis" or "cluster"). For 2, 8 and
 * 32 MiB chunks:
 *
 *   upload         a worker commits N chunks on server A; time until A's
 *                  write-behind reports them all in Redis, against the
 *                  plain client's pipelined EXISTS + SET of the same bytes
 *                  to the same server (ratio_to_plain_client);
 *   read_through   server B answers a lookup_l2 of those N chunks (probe,
 *                  GET into its pool, verify, publish), against the plain
 *                  client's pipelined GET of the same keys into a buffer;
 *
 * then the hot round trip (kvr_ping p50) on server A while an upload
 * flows, against idle, and a read-through lookup of 16 chunks against a
 * lookup that hits L1 on the same server.
 *
 * The plain client is written here (no hiredis on purpose, see docs/l2.md):
 * one pipeline per batch and node, the way kvringd's lanes send them (on
 * a cluster: keys routed by hash slot from CLUSTER SLOTS, one connection
 * per master, every node's share sent before any reply is read), under
 * keys of its own. Who goes first alternates by round, and an untimed
 * plain read precedes the timed reads. Chunk bytes are checked after
 * every read-through: a mismatch exits 1; slow figures never do. The machine is
 * shared and has 2 cores: read the figures as same-run ratios, not absolutes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/kvring.h>
#include <kvring/layout.h>
#include <kvring/parse.h>

#include <kvring/l2.h>

#include "bench_common.h"
#include "bench_l2.h"
#include "bench_server.h"

int bench_l2_main(int argc, char **argv);

#define BATCH_BYTES (256ull << 20) /* bytes per size and round */

#define L2_HELP                                                                \
	"l2 options:\n"                                                        \
	"  --only T            one target: redis (one redis-server) or "       \
	"cluster\n"                                                            \
	"                      (3 masters); default both\n"                    \
	"  --sizes LIST        chunk sizes of the upload and read-through "    \
	"cells,\n"                                                             \
	"                      smallest first (default 2M,8M,32M)\n"

/* ---- helpers on the kvring side ---- */

/* The l2 section of a private server's control segment, read-only. */
static const struct kvr_l2stats_shm *map_l2(const struct bench_server *s,
					    void **map, size_t *len)
{
	const struct kvr_ctl_hdr_shm *h = bench_server_map_ctl(s, map, len);

	return h ? &h->l2 : NULL;
}

/* Relaxed: the server's counters, read for a report; each value only
 * needs to be untorn, and nothing else is read through them. */
static uint64_t ld(const _Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static void fill(const struct kvr_key *k, unsigned char *d, size_t n)
{
	uint64_t x = k->lo ^ k->hi;

	for (size_t i = 0; i + 8 <= n; i += 8) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		memcpy(d + i, &x, 8);
	}
}

/* Store n chunks (prepare + fill); commit is the caller's, timed. */
static int prepare_fill(struct kvr_client *c, const struct kvr_key *keys,
			uint32_t n, uint64_t bytes, struct kvr_xfer *x)
{
	uint64_t *sz = malloc(n * sizeof(*sz));
	int rc;

	if (!sz)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		sz[i] = bytes;
	rc = kvr_prepare_store(c, keys, sz, n, x);
	free(sz);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < x->nslots; i++) {
		if (x->slots[i].status != KVR_SLOT_OK) {
			kvr_abort_store(c, x);
			return -ENOSPC;
		}
		fill(&keys[i], x->slots[i].ptr, bytes);
	}
	return 0;
}

/* p50 of @iters pings in ns. */
static uint64_t ping_p50(struct kvr_client *c, uint32_t iters, uint64_t *buf)
{
	for (uint32_t i = 0; i < iters; i++) {
		uint64_t t0 = kvr_clock_now_ns(), srv;

		kvr_ping(c, &srv);
		buf[i] = kvr_clock_now_ns() - t0;
	}
	bench_sort_u64(buf, iters);
	return buf[iters / 2];
}

static void wait_uploaded(struct env *e, uint64_t target)
{
	for (int i = 0; i < 60000; i++) {
		if (ld(&e->la->up_chunks) + ld(&e->la->up_exists) +
			ld(&e->la->up_failed) >=
		    target)
			return;
		sched_yield();
		if (i > 1000)
			sleep_ms(1);
	}
}

/* One throughput cell as a JSON line: @subject ("upload" or
 * "read_through") beside the plain client of the same rounds; @sums says
 * who computed the payload sums ("server": the lane hashes; "worker": a
 * worker with checksums sent them with its commit). */
void bench_l2_json_cell(const struct env *e, const char *subject,
			const char *sums, uint64_t bytes, uint32_t n,
			int rounds, double gb_s, double plain_gb_s,
			const struct cpu_acc *k, const struct cpu_acc *p)
{
	/* CPU ms per GB moved, over all rounds. */
	double gb = (double)rounds * n * (double)bytes / 1e9;
	struct bench_json j;

	bench_json_begin(&j, "l2", subject);
	bench_json_str(&j, "target", e->target);
	bench_json_str(&j, "sums", sums);
	bench_json_u64(&j, "chunk_bytes", bytes);
	bench_json_u64(&j, "chunks", n);
	bench_json_i64(&j, "rounds", rounds);
	bench_json_f64(&j, "gb_s", gb_s);
	bench_json_f64(&j, "plain_client_gb_s", plain_gb_s);
	bench_json_f64(&j, "ratio_to_plain_client",
		       plain_gb_s > 0 ? gb_s / plain_gb_s : 0);
	bench_json_f64(&j, "kvringd_cpu_ms_per_gb", (double)k->own / 1e6 / gb);
	bench_json_f64(&j, "redis_cpu_ms_per_gb", (double)k->redis / 1e6 / gb);
	bench_json_f64(&j, "plain_client_cpu_ms_per_gb",
		       (double)p->own / 1e6 / gb);
	bench_json_f64(&j, "plain_redis_cpu_ms_per_gb",
		       (double)p->redis / 1e6 / gb);
	bench_json_print(&j, stdout);
}

/* Read the @n chunks server B read through, each compared with the
 * bytes fill() gives its key (@buf: scratch of @bytes). 0 or -1 (said). */
static int verify_read(struct env *e, const struct kvr_key *keys, uint32_t n,
		       uint64_t bytes, char *buf)
{
	struct kvr_xfer rx;

	if (kvr_prepare_retrieve(e->cb, keys, n, &rx) < 0 || rx.nslots != n)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		fill(&keys[i], (unsigned char *)buf, bytes);
		if (memcmp(rx.slots[i].ptr, buf, bytes) != 0) {
			fprintf(stderr,
				"kvring-bench l2: chunk %u "
				"read through differs\n",
				i);
			kvr_commit_retrieve(e->cb, &rx);
			return -1;
		}
	}
	kvr_commit_retrieve(e->cb, &rx);
	return 0;
}

/* One size's rounds: the keys, the plain client's keys in Redis (its
 * own: kvringd's hold the namespace's fingerprint) and buffer,
 * the figures per round and the CPU per cell (upload, plain upload,
 * read-through, plain read, upload with sums: print_size's order). */
struct size_run {
	struct env *e;
	uint64_t bytes;
	uint32_t n;
	struct kvr_key *keys;
	char (*rk)[KVR_L2_KEY_MAX];
	char *buf;
	double up[8], upp[8], rt[8], rtp[8], ups[8];
	struct cpu_acc cpu[5];
};

static double size_bytes(const struct size_run *z)
{
	return (double)z->n * (double)z->bytes;
}

static uint64_t up_total(const struct env *e)
{
	return ld(&e->la->up_chunks) + ld(&e->la->up_exists) +
	       ld(&e->la->up_failed);
}

/* kvring upload of round @r: commit on server A, then wait for its
 * write-behind. */
static int size_up_kvr(struct size_run *z, int r)
{
	struct env *e = z->e;
	uint64_t base = up_total(e);
	struct kvr_xfer x;
	struct meter m;

	if (prepare_fill(e->ca, z->keys, z->n, z->bytes, &x) < 0) {
		fprintf(stderr, "kvring-bench l2: store failed\n");
		return -1;
	}
	bench_l2_meter_start(e, &m, e->a.d.pid);
	if (kvr_commit_store(e->ca, &x) < 0)
		return -1;
	wait_uploaded(e, base + z->n);
	z->up[r] = bench_l2_meter_stop(e, &m, &z->cpu[0], size_bytes(z));
	return 0;
}

/*
 * The plain client's upload (@up: the same bytes, distinct per chunk as
 * kvringd reads them, same pipeline shape, under keys of its own) or GET
 * of what it uploaded; timed into *@rate and @acc unless @rate is NULL.
 */
static int size_plain(struct size_run *z, bool up, double *rate,
		      struct cpu_acc *acc)
{
	struct meter m;
	int rc;

	if (up)
		for (uint32_t i = 0; i < z->n; i++)
			fill(&z->keys[i],
			     (unsigned char *)z->buf + (size_t)i * z->bytes,
			     z->bytes);
	bench_l2_meter_start(z->e, &m, 0);
	rc =
	    up ? bench_l2_pclient_put(&z->e->pl, z->rk, z->n, z->buf, z->bytes)
	       : bench_l2_pclient_get(&z->e->pl, z->rk, z->n, z->buf, z->bytes);
	if (rc < 0) {
		fprintf(stderr,
			"kvring-bench l2: the plain client's %s failed\n",
			up ? "upload" : "GET");
		return -1;
	}
	if (rate)
		*rate = bench_l2_meter_stop(z->e, &m, acc, size_bytes(z));
	return 0;
}

/* Read-through on server B, then every chunk checked. */
static int size_rt_kvr(struct size_run *z, int r)
{
	struct env *e = z->e;
	struct meter m;
	bool pending;
	long hits;

	bench_l2_meter_start(e, &m, e->b.d.pid);
	hits = kvr_lookup_l2(e->cb, z->keys, z->n, NULL, &pending);
	z->rt[r] = bench_l2_meter_stop(e, &m, &z->cpu[2], size_bytes(z));
	if (hits != (long)z->n) {
		fprintf(stderr,
			"kvring-bench l2: read-through found %ld of %u (%s)\n",
			hits, z->n, pending ? "deadline" : "missing");
		return -1;
	}
	return verify_read(e, z->keys, z->n, z->bytes, z->buf);
}

/*
 * kvring upload of chunks a worker with checksums stored: the lane sends
 * the worker's sums instead of hashing (docs/l2.md, "Checksums"). Timed
 * from the commit's answer, since the worker hashes its chunks before it
 * sends the commit.
 */
static int size_up_sums(struct size_run *z, int r)
{
	struct env *e = z->e;
	uint64_t base = up_total(e);
	struct kvr_xfer x;
	struct meter m;

	for (uint32_t i = 0; i < z->n; i++)
		z->keys[i] = bench_key(e->seq++);
	if (prepare_fill(e->csum, z->keys, z->n, z->bytes, &x) < 0 ||
	    kvr_commit_store(e->csum, &x) < 0) {
		fprintf(stderr, "kvring-bench l2: store with sums failed\n");
		return -1;
	}
	bench_l2_meter_start(e, &m, e->a.d.pid);
	wait_uploaded(e, base + z->n);
	z->ups[r] = bench_l2_meter_stop(e, &m, &z->cpu[4], size_bytes(z));
	return 0;
}

/*
 * One round. Who goes first alternates (plain client first in odd
 * rounds), and an untimed plain GET of 256 MiB runs before the timed
 * reads: the first big read after an upload found Redis's output
 * buffers cold and ran 1.3-1.7x slower than the same read right after
 * it, whichever side read first.
 */
static int size_round(struct size_run *z, int r)
{
	bool plain_first = r & 1;

	for (uint32_t i = 0; i < z->n; i++) {
		z->keys[i] = bench_key(z->e->seq++);
		kvr_l2_key("kvrbench:", 1, &z->keys[i], z->rk[i],
			   KVR_L2_KEY_MAX);
	}
	if ((plain_first && size_plain(z, true, &z->upp[r], &z->cpu[1]) < 0) ||
	    size_up_kvr(z, r) < 0 ||
	    (!plain_first && size_plain(z, true, &z->upp[r], &z->cpu[1]) < 0))
		return -1;
	if (size_plain(z, false, NULL, NULL) < 0) /* the warm-up */
		return -1;
	if ((plain_first && size_plain(z, false, &z->rtp[r], &z->cpu[3]) < 0) ||
	    size_rt_kvr(z, r) < 0 ||
	    (!plain_first && size_plain(z, false, &z->rtp[r], &z->cpu[3]) < 0))
		return -1;
	if (size_up_sums(z, r) < 0)
		return -1;
	bench_l2_pclient_flush(&z->e->pl);
	return 0;
}

static int run_size(struct env *e, uint64_t bytes, int rounds)
{
	struct size_run *z = calloc(1, sizeof(*z));
	int ret = 1;

	if (!z)
		return 1;
	z->e = e;
	z->bytes = bytes;
	z->n = (uint32_t)(BATCH_BYTES / bytes);
	z->keys = calloc(z->n, sizeof(*z->keys));
	z->rk = calloc(z->n, KVR_L2_KEY_MAX);
	z->buf = malloc((size_t)z->n * bytes);
	if (!z->keys || !z->rk || !z->buf)
		goto out;
	if (rounds > 8)
		rounds = 8;
	for (int r = 0; r < rounds; r++)
		if (size_round(z, r) < 0)
			goto out;
	bench_l2_print_size(e, bytes, z->n, rounds, z->up, z->upp, z->rt,
			    z->rtp, z->ups, z->cpu);
	ret = 0;
out:
	free(z->keys);
	free(z->rk);
	free(z->buf);
	free(z);
	return ret;
}

/* Pin thread @tid alone (not its process) to @cpu; < 0: no-op. A
 * process's main thread has the process id as its thread id. */
static int pin_thread(pid_t tid, int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(tid, sizeof(set), &set) < 0 ? -errno : 0;
}

/*
 * Hot ping p50 idle, then while an upload of 256 MiB flows. The pinging
 * thread runs on --cpu-client and server A's loop on --cpu-server, as in
 * rtt_hot: unpinned, the scheduler often puts both spinning sides on one
 * CPU, and each ping then waits out the other's spin (~100 us).
 */
static int run_rtt(struct env *e)
{
	const uint32_t iters = 20000, n = 32;
	const uint64_t bytes = 8ull << 20;
	uint64_t *lat = malloc(iters * sizeof(*lat)), idle, busy, base;
	uint64_t idle_before, idle_after;
	cpu_set_t saved;
	bool pinned;
	struct kvr_key keys[32];
	struct kvr_xfer x;
	uint32_t done = 0;
	int ret = 1;

	if (!lat)
		return 1;
	pinned = sched_getaffinity(0, sizeof(saved), &saved) == 0 &&
		 bench_pin_cpu(e->o.cpu_client) == 0;
	ping_p50(e->cping, 2000, lat); /* warm-up */
	idle_before = ping_p50(e->cping, iters, lat);
	for (uint32_t i = 0; i < n; i++)
		keys[i] = bench_key(e->seq++);
	base = ld(&e->la->up_chunks) + ld(&e->la->up_exists) +
	       ld(&e->la->up_failed);
	if (prepare_fill(e->ca, keys, n, bytes, &x) < 0 ||
	    kvr_commit_store(e->ca, &x) < 0)
		goto out;
	/* Pings only while the upload is still flowing. */
	for (; done < iters; done++) {
		uint64_t t0 = kvr_clock_now_ns(), srv;

		if (ld(&e->la->up_chunks) + ld(&e->la->up_exists) +
			ld(&e->la->up_failed) >=
		    base + n)
			break;
		kvr_ping(e->cping, &srv);
		lat[done] = kvr_clock_now_ns() - t0;
	}
	wait_uploaded(e, base + n);
	/* Idle again once the upload is over: on a loaded 2-core machine
	 * the idle loop sometimes goes to sleep between pings (p50 ~100 us,
	 * a wake-up, nothing to do with L2), so idle is the better of the
	 * two; both are printed. */
	idle_after = ping_p50(e->cping, iters, lat);
	idle = idle_after < idle_before ? idle_after : idle_before;
	if (done < 100) {
		fprintf(stderr,
			"kvring-bench l2: upload too short to measure "
			"pings during it (%u pings)\n",
			done);
		busy = 0;
	} else {
		bench_sort_u64(lat, done);
		busy = lat[done / 2];
	}
	if (e->o.json) {
		struct bench_json j;

		bench_json_begin(&j, "l2", "rtt_hot");
		bench_json_str(&j, "target", e->target);
		bench_json_u64(&j, "idle_p50_ns", idle);
		bench_json_u64(&j, "idle_before_p50_ns", idle_before);
		bench_json_u64(&j, "idle_after_p50_ns", idle_after);
		bench_json_u64(&j, "l2_traffic_p50_ns", busy);
		bench_json_u64(&j, "pings_during_traffic", done);
		bench_json_f64(&j, "ratio",
			       idle ? (double)busy / (double)idle : 0);
		bench_json_print(&j, stdout);
	} else
		printf("hot ping p50: idle %" PRIu64 " ns (before %" PRIu64
		       ", after %" PRIu64
		       "), during an 8 MiB x 32 upload %" PRIu64
		       " ns (%u pings), ratio %.2f\n",
		       idle, idle_before, idle_after, busy, done,
		       idle ? (double)busy / (double)idle : 0);
	ret = 0;
out:
	if (pinned)
		(void)sched_setaffinity(0, sizeof(saved), &saved);
	free(lat);
	return ret;
}

/* A read-through lookup of 16 chunks vs an L1 hit of the same 16. */
static int run_lookup16(struct env *e, uint64_t bytes)
{
	struct kvr_key keys[16];
	struct kvr_xfer x;
	double t0, l2_us, l1_us;
	uint64_t base = ld(&e->la->up_chunks) + ld(&e->la->up_exists) +
			ld(&e->la->up_failed);
	char sz[16];
	long hits;

	for (int i = 0; i < 16; i++)
		keys[i] = bench_key(e->seq++);
	if (prepare_fill(e->ca, keys, 16, bytes, &x) < 0 ||
	    kvr_commit_store(e->ca, &x) < 0)
		return 1;
	wait_uploaded(e, base + 16);
	t0 = now_s();
	hits = kvr_lookup_l2(e->cb, keys, 16, NULL, NULL);
	l2_us = (now_s() - t0) * 1e6;
	t0 = now_s();
	hits += kvr_lookup(e->cb, keys, 16, NULL);
	l1_us = (now_s() - t0) * 1e6;
	if (hits != 32) {
		fprintf(stderr, "kvring-bench l2: lookup16 hits %ld of 32\n",
			hits);
		return 1;
	}
	bench_fmt_bytes(bytes, sz, sizeof(sz));
	if (e->o.json) {
		struct bench_json j;

		bench_json_begin(&j, "l2", "lookup16");
		bench_json_str(&j, "target", e->target);
		bench_json_u64(&j, "chunk_bytes", bytes);
		bench_json_f64(&j, "read_through_us", l2_us);
		bench_json_f64(&j, "l1_hit_us", l1_us);
		bench_json_f64(&j, "ratio", l1_us > 0 ? l2_us / l1_us : 0);
		bench_json_print(&j, stdout);
	} else
		printf("lookup of 16 x %s: through L2 %.1f us, L1 hit %.1f us "
		       "(%.0fx)\n",
		       sz, l2_us, l1_us, l1_us > 0 ? l2_us / l1_us : 0);
	return 0;
}

/* A worker of @s with per-chunk checksums (KVR_CHECKSUM_ON). */
static int connect_summing(const struct bench_server *s,
			   struct kvr_client **out)
{
	struct kvr_client_opts co;
	char err[256] = "";
	int rc;

	bench_client_opts(s, &co);
	co.spin_us = 50;
	co.checksum = KVR_CHECKSUM_ON;
	rc = kvr_connect(&co, out, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr,
			"kvring-bench l2: connect %s with checksums: "
			"%s (%s)\n",
			s->d.sock, err, strerror(-rc));
	return rc;
}

/* Both kvringd, their clients and the plain client against @url, then
 * every subject; all of it stopped again. */
static int run_target(struct env *e, const char *url, uint32_t nn, int rounds)
{
	const char *extra[] = {"--l2",
			       url,
			       "--l2-prefix",
			       "kvrbench:",
			       "--l2-deadline-ms",
			       "60000",
			       "--l2-io-ms",
			       "30000",
			       NULL};
	struct bench_run_opts so;
	int rc = 1;

	e->o.socket = NULL; /* always private servers: they need --l2 */
	/* Started unpinned: bench_server_start_args() pins every thread of
	 * kvringd, which would put both servers' L2 lanes on one CPU while
	 * the plain client and redis-server may use both. Only server A's
	 * event loop (its main thread) is pinned, for the round trips. */
	so = e->o;
	so.cpu_server = -1;
	if (bench_server_start_args(&so, 1ull << 30, 50, 8, extra, &e->a) < 0 ||
	    bench_server_start_args(&so, 1ull << 30, 50, 8, extra, &e->b) < 0)
		goto out;
	if (pin_thread(e->a.d.pid, e->o.cpu_server) < 0)
		fprintf(
		    stderr,
		    "kvring-bench l2: pin kvringd's loop to cpu %d failed\n",
		    e->o.cpu_server);
	if (bench_client_connect(&e->a, 0, 50, false, &e->ca) < 0 ||
	    bench_client_connect(&e->b, 0, 50, false, &e->cb) < 0 ||
	    bench_client_connect(&e->a, 0, 50, true, &e->cping) < 0 ||
	    connect_summing(&e->a, &e->csum) < 0)
		goto out;
	e->la = map_l2(&e->a, &e->ma, &e->na);
	e->lb = map_l2(&e->b, &e->mb, &e->nb);
	if (!e->la || !e->lb ||
	    bench_l2_pclient_open(&e->pl, e->rd, nn, nn > 1,
				  (uint32_t)(BATCH_BYTES / e->sizes[0])) < 0) {
		fprintf(stderr, "kvring-bench l2: %s: set-up failed\n",
			e->target);
		goto out;
	}
	if (!e->o.json)
		printf("kvring-bench l2: %s %s, two kvringd (1 GiB pools), %d "
		       "round(s), median; 2-core shared machine: compare "
		       "within the run\n",
		       e->target, url, rounds);
	for (unsigned i = 0; i < e->nsizes; i++)
		if (run_size(e, e->sizes[i], rounds) != 0)
			goto out;
	if (run_rtt(e) != 0 || run_lookup16(e, 2ull << 20) != 0)
		goto out;
	rc = 0;
out:
	kvr_close(e->ca);
	kvr_close(e->cb);
	kvr_close(e->cping);
	kvr_close(e->csum);
	e->ca = e->cb = e->cping = e->csum = NULL;
	if (e->ma)
		munmap(e->ma, e->na);
	if (e->mb)
		munmap(e->mb, e->nb);
	e->ma = e->mb = NULL;
	bench_l2_pclient_close(&e->pl);
	bench_server_stop(&e->a);
	bench_server_stop(&e->b);
	return rc;
}

/*
 * --sizes (chunk sizes of the throughput cells, smallest first, 64 KiB to
 * 256 MiB; default 2M,8M,32M) into e->sizes. 0, or -1 said on stderr.
 */
static int parse_sizes(struct env *e)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", e->o.sizes ? e->o.sizes : "2M,8M,32M");
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (kvr_parse_size(tok, &v) < 0 || v < (64u << 10) ||
		    v > BATCH_BYTES ||
		    (e->nsizes && v <= e->sizes[e->nsizes - 1]) ||
		    e->nsizes == sizeof(e->sizes) / sizeof(e->sizes[0])) {
			fprintf(stderr,
				"kvring-bench l2: --sizes: bad '%s' (up to 8 "
				"sizes, smallest first, each 64K to 256M, "
				"e.g. 2M,32M)\n",
				tok);
			return -1;
		}
		e->sizes[e->nsizes++] = v;
	}
	return e->nsizes ? 0 : -1;
}

int bench_l2_main(int argc, char **argv)
{
	struct env e = {0};
	char url[128];
	int rc = 1, rounds, at;

	/* 1: --help was printed (exit 0), 2: a usage error. */
	rc = bench_run_opts_parse(argc, argv, "l2", L2_HELP, &e.o);
	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	if (e.o.only && strcmp(e.o.only, "redis") != 0 &&
	    strcmp(e.o.only, "cluster") != 0) {
		fprintf(stderr,
			"kvring-bench l2: --only: bad '%s' (redis or "
			"cluster)\n",
			e.o.only);
		return BENCH_EXIT_USAGE;
	}
	if (parse_sizes(&e) < 0)
		return BENCH_EXIT_USAGE;
	rc = 1;
	rounds = e.o.rounds ? (int)e.o.rounds : (e.o.quick ? 1 : 3);
	/* A standalone redis-server... */
	e.target = "redis";
	if (e.o.only && strcmp(e.o.only, "cluster") == 0)
		goto cluster;
	if (bench_l2_redis_start(&e.rd[0], 26000 + (int)(getpid() % 1000),
				 false) < 0)
		goto out;
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", e.rd[0].port);
	if (run_target(&e, url, 1, rounds) != 0)
		goto out;
	bench_l2_redis_stop(&e.rd[0]);
	memset(&e.rd[0], 0, sizeof(e.rd[0]));
	/* ...then a 3-master cluster, in the same run. */
	if (e.o.only && strcmp(e.o.only, "redis") == 0) {
		rc = 0;
		goto out;
	}
cluster:
	e.target = "cluster";
	if (bench_l2_cluster_start(e.rd) < 0)
		goto out;
	at = snprintf(url, sizeof(url), "redis-cluster://");
	for (int i = 0; i < CLUSTER_N; i++)
		at += snprintf(url + at, sizeof(url) - (size_t)at,
			       "%s127.0.0.1:%d", i ? "," : "", e.rd[i].port);
	if (run_target(&e, url, CLUSTER_N, rounds) != 0)
		goto out;
	rc = 0;
out:
	for (int i = 0; i < CLUSTER_N; i++)
		bench_l2_redis_stop(&e.rd[i]);
	return rc;
}
