/* SPDX-License-Identifier: MIT */
/*
 * l2_suite.h - what the L2 suites share (tests/integration/test_l2.c,
 * test_l2_cluster.c, test_l2_evict.c), on top of worker_srv.h and
 * t_redis.h: the skip when Redis is not installed, a kvringd started with
 * --l2 and the options every L2 test needs, the chunk keys of a request,
 * and the L2 counters of the control header. Set-up failures fail the
 * test. Header-only with static functions, so each suite stays one file
 * for the CMake glob.
 */
#ifndef KVR_L2_SUITE_H
#define KVR_L2_SUITE_H

#include <stdlib.h>

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

/*
 * Start kvringd @s with a 64 MiB pool, --l2 @url, a 50 ms heartbeat,
 * info logging and the per-channel quotas lifted (these tests fill most
 * of a small pool on purpose), then the NULL-ended @more (may be NULL).
 */
static inline void l2t_start(struct wsrv *s, const char *url,
			     const char *const *more)
{
	const char *args[48] = {"--pool-size",
				"64M",
				"--allow-root",
				"--heartbeat-ms",
				"50",
				"--log-level",
				"info",
				"--l2",
				url,
				"--quota-reserved",
				"100%",
				"--quota-pinned",
				"100%",
				"--max-key-bytes",
				"100%"};
	int n = 15;

	wsrv_init(s, "64M");
	for (int i = 0; more && more[i]; i++) {
		cr_assert_lt(n, 47, "too many kvringd options");
		args[n++] = more[i];
	}
	args[n] = NULL;
	t_server_start(&s->t, args);
	s->pid = s->t.pid;
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

#endif /* KVR_L2_SUITE_H */
