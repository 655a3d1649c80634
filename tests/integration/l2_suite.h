/* SPDX-License-Identifier: MIT */
/*
 * l2_suite.h - what the L2 suites share (tests/integration/test_l2.c,
 * test_l2_cluster.c, test_l2_evict.c, test_l2_failover.c), on top of
 * worker_srv.h and t_redis.h: the skip when Redis is not installed, a
 * kvringd started with --l2 and the options every L2 test needs, the chunk
 * keys of a request, the L2 counters of the control header and the wait
 * for a server's uploads to end. Set-up failures fail the
 * test. Header-only with static functions, so each suite stays one file
 * for the CMake glob.
 */
#ifndef KVR_L2_SUITE_H
#define KVR_L2_SUITE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_redis.h"
#include "worker_srv.h"

/* An L2 counter of the server's control header (relaxed: a statistic). */
#define T_L2(t, f) atomic_load_explicit(&(t)->hdr->l2.f, memory_order_relaxed)

/* Suite .init: skip, saying what to install, when Redis is missing (the
 * test command makes that a configure error instead: KVR_REQUIRE_REDIS). */
static inline void l2t_need_redis(void)
{
	if (!t_redis_available())
		cr_skip_test("redis-server/redis-cli not installed "
			     "(scripts/setup.sh deps installs them)");
}

/* kvringd options that lift the per-channel quotas: the suites fill most
 * of a small pool on purpose. */
#define L2T_QUOTAS_LIFTED                                                      \
	"--quota-reserved", "100%", "--quota-pinned", "100%",                  \
	    "--max-key-bytes", "100%"

/*
 * Start kvringd @s with a 64 MiB pool, --l2 @url, a 50 ms heartbeat,
 * info logging and the per-channel quotas lifted (these tests fill most
 * of a small pool on purpose), then the NULL-ended @more (may be NULL).
 */
static inline void l2t_start(struct wsrv *s, const char *url,
			     const char *const *more)
{
	const char *args[48] = {"--pool-size",	  "64M",  "--allow-root",
				"--heartbeat-ms", "50",	  "--log-level",
				"info",		  "--l2", url,
				L2T_QUOTAS_LIFTED};
	const int n = 15;

	wsrv_init(s, "64M");
	wsrv_start_args(s, args, n, more);
}

/* The end of a test on two servers: close clients @c1 and @c2, stop @s2
 * then @s1 (each must exit 0: its self-check passed) and free keys @k. */
static inline void l2t_end2(struct wsrv *s1, struct wsrv *s2,
			    struct kvr_client *c1, struct kvr_client *c2,
			    struct kvr_key *k)
{
	kvr_close(c1);
	kvr_close(c2);
	cr_expect_eq(wsrv_stop(s2), 0, "self-check");
	cr_expect_eq(wsrv_stop(s1), 0, "self-check");
	free(k);
}

/* A suite's .fini for server @s: SIGTERM it if it runs, remove its files. */
static inline void l2t_down(struct wsrv *s)
{
	if (s->pid)
		wsrv_stop(s);
	wsrv_cleanup(s);
}

/* The keys of @n chunks of request @r (16 tokens each), as client @c
 * derives them. The caller frees the array. */
static inline struct kvr_key *l2t_keys_for(struct kvr_client *c, uint32_t r,
					   uint32_t n)
{
	uint32_t *t = malloc((size_t)n * 16 * sizeof(*t));
	struct kvr_key *k = calloc(n, sizeof(*k));

	cr_assert(t && k);
	wsrv_tokens(r, t, (size_t)n * 16);
	cr_assert_eq(kvr_client_keys(c, t, (size_t)n * 16, k, n), (long)n);
	free(t);
	return k;
}

/* A worker of @s with per-chunk checksums (KVR_CHECKSUM_ON). */
static inline struct kvr_client *l2t_connect_summing(const struct wsrv *s)
{
	struct kvr_client_opts o = wsrv_opts(s, 0, 5000);
	struct kvr_client *c = NULL;
	char err[256];
	int rc;

	o.checksum = KVR_CHECKSUM_ON;
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_assert_eq(rc, 0, "connect %s: %d %s", s->sock, rc, err);
	return c;
}

/* Uploads of server @s that ended: stored, found present, or failed. */
static inline uint64_t l2t_up_ended(const struct wsrv *s)
{
	return T_L2(&s->t, up_chunks) + T_L2(&s->t, up_exists) +
	       T_L2(&s->t, up_failed);
}

struct l2t_upwait {
	const struct wsrv *s;
	uint64_t want;
	bool failed_count; /* failed uploads count as ended */
};

static inline bool l2t_settled(void *arg)
{
	const struct l2t_upwait *w = arg;
	uint64_t ended = w->failed_count ? l2t_up_ended(w->s)
					 : T_L2(&w->s->t, up_chunks) +
					       T_L2(&w->s->t, up_exists);

	return ended >= w->want && T_L2(&w->s->t, queue_depth) == 0;
}

/*
 * Wait (10 s at most, else the test fails saying where the counters
 * stand) until @want uploads of @s have ended (failed ones included when
 * @failed_count, else only those stored or found present) and its queue
 * is empty. The server publishes counters after it answers, so a test
 * reads them only through a wait like this one.
 */
static inline void l2t_wait_uploads(const struct wsrv *s, uint64_t want,
				    bool failed_count)
{
	struct l2t_upwait w = {s, want, failed_count};

	cr_assert(t_wait_until(l2t_settled, &w, 10000),
		  "uploads: %llu done, %llu existed, %llu failed, queue %llu "
		  "(want %llu %s)",
		  (unsigned long long)T_L2(&s->t, up_chunks),
		  (unsigned long long)T_L2(&s->t, up_exists),
		  (unsigned long long)T_L2(&s->t, up_failed),
		  (unsigned long long)T_L2(&s->t, queue_depth),
		  (unsigned long long)want, failed_count ? "ended" : "stored");
}

/* l2t_wait_uploads counting failed uploads as ended. */
static inline void l2t_wait_ended(const struct wsrv *s, uint64_t want)
{
	l2t_wait_uploads(s, want, true);
}

/* The INFO commandstats calls of Redis command @cmd on @r (0 if never
 * called). */
static inline long l2t_redis_calls(const struct t_redis *r, const char *cmd)
{
	char out[8192], pat[64];
	const char *at;

	t_redis_cli(r, out, sizeof(out), "INFO commandstats");
	snprintf(pat, sizeof(pat), "cmdstat_%s:calls=", cmd);
	at = strstr(out, pat);
	return at ? strtol(at + strlen(pat), NULL, 10) : 0;
}

/*
 * l2t_cluster_find - find chunk key @k in @cl by its hex (the fingerprint
 * part of the Redis key is opaque): the Redis key goes to @out (the test
 * fails if it does not fit) and the index of the master it was found on
 * is returned; -1 when no master has it.
 */
static inline int l2t_cluster_find(const struct t_cluster *cl,
				   const struct kvr_key *k, char *out, size_t n)
{
	char pat[64], buf[2048];

	snprintf(pat, sizeof(pat), "*:%016llx%016llx",
		 (unsigned long long)k->hi, (unsigned long long)k->lo);
	for (int i = 0; i < T_CLUSTER_N; i++) {
		t_redis_cli(&cl->node[i], buf, sizeof(buf),
			    "--scan --pattern '%s'", pat);
		if (buf[0]) {
			cr_assert_lt(strlen(buf), n, "key %s too long", buf);
			memcpy(out, buf, strlen(buf) + 1);
			return i;
		}
	}
	return -1;
}

#endif /* KVR_L2_SUITE_H */
