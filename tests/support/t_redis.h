/* SPDX-License-Identifier: MIT */
/*
 * t_redis.h - test helper: run real redis-server processes for the L2
 * suites, standalone or as a 3-master Redis Cluster, on loopback ports
 * this helper checked are free (and, for a cluster, their bus ports +10000
 * too), with their files in a private temp directory; drive them with
 * redis-cli; stop, kill, freeze and restart them. Touches no other address.
 * Set-up failures print the reason and abort (tests/ convention).
 */
#ifndef KVR_T_REDIS_H
#define KVR_T_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct t_redis {
	pid_t pid; /* 0 when not running */
	int port;
	bool cluster; /* --cluster-enabled yes */
	char dir[96]; /* private working directory */
	char log[128];
	char extra[256]; /* extra redis-server arguments, space-separated */
};

#define T_CLUSTER_N 3

struct t_cluster {
	struct t_redis node[T_CLUSTER_N];    /* the masters */
	struct t_redis replica[T_CLUSTER_N]; /* t_cluster_start_replicas */
	char url[128]; /* redis-cluster://127.0.0.1:p1,... (masters) */
};

/* Whether redis-server and redis-cli are installed (else cr_skip). */
bool t_redis_available(void);

/* t_redis_start - a standalone server on a free port (@extra: more
 * arguments, may be NULL), ready (PING answers) on return. */
void t_redis_start(struct t_redis *r, const char *extra);

/* t_redis_restart - start again on the same port and directory. */
void t_redis_restart(struct t_redis *r);

/* t_redis_stop - SHUTDOWN NOSAVE through SIGTERM, reap, remove files. */
void t_redis_stop(struct t_redis *r);

/* t_redis_kill - SIGKILL and reap (files stay for a restart). */
void t_redis_kill(struct t_redis *r);

/*
 * t_redis_cli - run redis-cli -p PORT @args (a shell word list, quoted by
 * the caller) and put its trimmed stdout in @out. Returns its exit status.
 */
int t_redis_cli(const struct t_redis *r, char *out, size_t n, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));

/* An integer reply of redis-cli (aborts if it is not one). */
long t_redis_int(const struct t_redis *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* t_cluster_start - 3 masters, slots spread by redis-cli --cluster create,
 * every node agreeing that the cluster is ok on return. */
void t_cluster_start(struct t_cluster *c);

/* t_cluster_start_replicas - the same with one replica per master
 * (redis-cli --cluster create --cluster-replicas 1): node[] are the
 * masters, replica[] the replicas (in no particular pairing), every node
 * agreeing that the cluster is ok and every replica linked on return. */
void t_cluster_start_replicas(struct t_cluster *c);

/* t_cluster_wait_replicated - wait until each master's replica has
 * received everything its master had when called (the replica's
 * slave_repl_offset reaches the master's master_repl_offset), at most
 * @ms; false when one did not. WAIT on a fresh connection cannot say
 * this: it only covers the writes of its own connection. */
bool t_cluster_wait_replicated(struct t_cluster *c, int ms);

/* t_cluster_wait_ok - wait until every running node says cluster_state:ok
 * (after a failover: a replica took over a killed master's slots).
 * Returns false after @ms. */
bool t_cluster_wait_ok(struct t_cluster *c, int ms);

/* t_cluster_stop - stop every node and remove their files. */
void t_cluster_stop(struct t_cluster *c);

/* Index of the node serving @key (CLUSTER KEYSLOT + CLUSTER SLOTS). */
int t_cluster_node_of(struct t_cluster *c, const char *key);

#endif /* KVR_T_REDIS_H */
