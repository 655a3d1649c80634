/* SPDX-License-Identifier: MIT */
/*
 * bench_l2.h - what the l2 scenario's files share (private to
 * tools/bench/): bench_l2.c measures, bench_l2_redis.c starts the
 * redis-server processes and is the plain client measured beside kvringd.
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
	uint32_t *idx; /* scratch: one node's share */
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

#endif /* KVR_BENCH_L2_H */
