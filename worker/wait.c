/* SPDX-License-Identifier: MIT */
/*
 * wait.c - how a libkvring call waits for kvringd, and how it notices that
 * kvringd is gone. Every wait is bounded twice: by the call's own deadline
 * (timeout_ms, not fatal: the connection stays usable) and by liveness
 * checks made at least every KVR_SLICE_MS (fatal: the client is broken and
 * every later call returns the same error at once):
 *   - the socket hung up            -> -EOWNERDEAD
 *   - the heartbeat in the control header is older than
 *     max(3 heartbeat periods, 1 s)  -> -ETIMEDOUT
 *   - the boot id changed, or our channel was reassigned -> -EOWNERDEAD
 *
 * The waiting itself is the transport's (struct kvr__tport): the ring
 * spins, then sleeps on its doorbell (tport_ring.c); the socket sleeps in
 * poll(2) (tport_sock.c); either for one slice at most, after which this
 * loop runs the liveness checks (kvr__client_alive, client.c). The drain
 * loop is here too: every answer the transport receives is handed to
 * answer.c. This file does not send requests (submit.c) or decide what an
 * answer means (answer.c).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include <kvring/error.h>

#include "client.h"

uint64_t kvr__wait_deadline_ns(uint32_t timeout_ms)
{
	static _Atomic uint64_t res_ns; /* the coarse clock's tick, once */
	struct timespec ts;
	uint64_t res = atomic_load_explicit(&res_ns, memory_order_relaxed);

	/* Relaxed: every thread computes the same value; any one will do. */
	if (res == 0) {
		res = clock_getres(CLOCK_MONOTONIC_COARSE, &ts) == 0
			  ? (uint64_t)ts.tv_sec * 1000000000ull +
				(uint64_t)ts.tv_nsec
			  : 0;
		if (res == 0 || res > 100000000ull)
			return kvr_clock_now_ns() +
			       (uint64_t)timeout_ms * 1000000ull;
		atomic_store_explicit(&res_ns, res, memory_order_relaxed);
	}
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	/* The coarse clock lags CLOCK_MONOTONIC by less than one tick: add
	 * one, so the deadline never comes before timeout_ms has passed. */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
	       res + (uint64_t)timeout_ms * 1000000ull;
}

void kvr__wait_publish(struct kvr_client *c)
{
	if (c->held == 0)
		return;
	/* Commit never fails under the ring, the one transport that holds. */
	(void)c->tp->commit(c, NULL);
	c->held = 0;
}

int kvr__wait_drain(struct kvr_client *c)
{
	if (c->broken)
		return c->broken;
	/* An answer can only come to a request the server saw. */
	kvr__wait_publish(c);
	/* Every answer the transport has now, each in private memory. */
	for (;;) {
		struct kvr__rec r;
		int rc = c->tp->receive(c, &r);

		if (rc <= 0)
			return rc;
		rc = kvr__answer(c, r.type, r.data, r.len);
		if (rc < 0)
			return rc;
	}
}

int kvr__wait(struct kvr_client *c, uint64_t deadline_ns,
	      bool (*done)(struct kvr_client *c, void *arg), void *arg)
{
	for (;;) {
		int rc = kvr__wait_drain(c);

		if (c->broken)
			return c->broken;
		if (rc < 0)
			return rc;
		if (done(c, arg))
			return 0;
		/* The transport's own way to wait (spin then doorbell, or
		 * poll on the socket); 1: an answer is there already. */
		rc = c->tp->wait(c, deadline_ns);
		if (rc == 1)
			continue;
		if (rc < 0)
			return rc;
		rc = kvr__client_alive(c);
		if (rc < 0)
			return rc;
	}
}
