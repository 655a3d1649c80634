/* SPDX-License-Identifier: MIT */
/*
 * bench_l2.h - what the l2 scenario's files share (private to
 * tools/bench/): bench_l2.c measures, bench_l2_redis.c starts the
 * redis-server processes and is the plain client measured beside kvringd,
 * bench_l2_report.c prints the throughput cells.
 */
#ifndef KVR_BENCH_L2_H
#define KVR_BENCH_L2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <kvring/clock.h>
#include <kvring/l2.h>
#include <kvring/layout.h>

#include "bench_server.h"

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static inline double now_s(void)
{
	return (double)kvr_clock_now_ns() / 1e9;
}

/* ---- a private redis-server ---- */

struct redis {
	pid_t pid;
	int port;
	char dir[64];
};

#define CLUSTER_N 3

/* ---- the plain pipelined client ---- */

struct plain {
	int fd;
	char *buf;
	size_t cap, r, w;
};

/*
 * The plain client of one target: one connection per node and, for a
 * cluster, the slot map (CLUSTER SLOTS), so each key goes to its master
 * as kvringd's lanes send it.
 */
struct pclient {
	struct plain n[CLUSTER_N];
	uint32_t nn;
	bool cluster;
	uint8_t slot_node[KVR_L2_SLOTS];
	uint32_t *idx; /* scratch: the nodes' shares, one after the other */
};

/* bench_l2_redis_start - a redis-server on the first free loopback port
 * from @from (a cluster node's bus port, +10000, free too), its files in
 * a private dir. 0 or -errno. */
int bench_l2_redis_start(struct redis *r, int from, bool cluster);
/* bench_l2_redis_stop - stop it and remove its dir. */
void bench_l2_redis_stop(struct redis *r);
/* bench_l2_cluster_start - CLUSTER_N masters on free ports, slots spread
 * by redis-cli --cluster create, the cluster ok on every node. 0 or
 * -errno (stopping the nodes is the caller's). */
int bench_l2_cluster_start(struct redis *rd);

/* bench_l2_pclient_open - one connection per node of @rd (@nn nodes; the
 * slot map when @cluster), room for @max_keys keys. 0 or -errno. */
int bench_l2_pclient_open(struct pclient *pc, const struct redis *rd,
			  uint32_t nn, bool cluster, uint32_t max_keys);
void bench_l2_pclient_close(struct pclient *pc);
/* Pipelined EXISTS then SET of @n values of @bytes each, value i at
 * @val + i * @bytes, each key to its node. 0 or -EIO. */
int bench_l2_pclient_put(struct pclient *pc, char (*keys)[KVR_L2_KEY_MAX],
			 uint32_t n, const char *val, size_t bytes);
/* Pipelined GET of @n keys, value i into @dst + i * @bytes. 0 or -EIO. */
int bench_l2_pclient_get(struct pclient *pc, char (*keys)[KVR_L2_KEY_MAX],
			 uint32_t n, char *dst, size_t bytes);
/* FLUSHALL on every node, so the next size starts empty. */
void bench_l2_pclient_flush(struct pclient *pc);

/* ---- what bench_l2.c measures and bench_l2_report.c prints ---- */

/* One target's run: options, the Redis side, both kvringd and their
 * workers, the plain client. */
struct env {
	struct bench_run_opts o;
	const char *target; /* "redis" or "cluster" */
	struct redis rd[CLUSTER_N];
	struct bench_server a, b;
	struct kvr_client *ca, *cb, *cping;
	struct kvr_client *csum; /* on server A, with per-chunk checksums */
	const struct kvr_l2stats_shm *la, *lb;
	void *ma, *mb;
	size_t na, nb;
	struct pclient pl;
	uint64_t seq;
	uint64_t ns_fp;
	uint64_t sizes[8]; /* --sizes: chunk sizes, smallest first */
	unsigned nsizes;
};

/* CPU spent per side over a cell's rounds, in ns. */
struct cpu_acc {
	uint64_t own, redis; /* kvringd's or the plain client's; Redis's */
};

/* The clocks of one timed step: wall time, the CPU of the side that
 * works (kvringd @pid, or with pid 0 the calling thread: the plain
 * client) and of every redis-server. */
struct meter {
	double t0;
	uint64_t own0, redis0;
	pid_t pid;
};

/* bench_l2_meter_start - start timing a step whose working side is
 * kvringd @pid (0: the calling thread, the plain client). */
void bench_l2_meter_start(const struct env *e, struct meter *m, pid_t pid);
/* bench_l2_meter_stop - the step moved @bytes: its CPU added to @acc,
 * its GB/s returned. */
double bench_l2_meter_stop(const struct env *e, const struct meter *m,
			   struct cpu_acc *acc, double bytes);
/* bench_l2_json_cell - one throughput cell as a JSON line (bench_l2.c). */
void bench_l2_json_cell(const struct env *e, const char *subject,
			const char *sums, uint64_t bytes, uint32_t n,
			int rounds, double gb_s, double plain_gb_s,
			const struct cpu_acc *k, const struct cpu_acc *p);

/*
 * bench_l2_print_size - one chunk size's figures, the medians of @rounds:
 * upload (rate @up, with the worker's sums @ups), read-through @rt, each
 * beside the plain client's (@upp, @rtp), and the CPU each side spent
 * (@cpu: upload, plain upload, read-through, plain read, upload with
 * sums).
 */
void bench_l2_print_size(const struct env *e, uint64_t bytes, uint32_t n,
			 int rounds, double *up, double *upp, double *rt,
			 double *rtp, double *ups, const struct cpu_acc *cpu);

#endif /* KVR_BENCH_L2_H */
