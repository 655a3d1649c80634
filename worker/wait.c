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
 * The waiting itself follows the doorbell protocol (<kvring/doorbell.h>):
 * spin on the response ring for spin_us, then set our sleeping flag
 * (prepare_sleep, F2), re-check the ring, and only then block in poll(2) on
 * the response eventfd and the socket, for one slice at most. In the busy
 * steady state no system call is made. This file does not build requests
 * or interpret answers (ops.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>

#include "client.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

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
			return kvr__now_ns() +
			       (uint64_t)timeout_ms * 1000000ull;
		atomic_store_explicit(&res_ns, res, memory_order_relaxed);
	}
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	/* The coarse clock lags CLOCK_MONOTONIC by less than one tick: add
	 * one, so the deadline never comes before timeout_ms has passed. */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
	       res + (uint64_t)timeout_ms * 1000000ull;
}

/* Copy each answer out of the ring before parsing it: the ring is shared
 * memory the server could still write, and the validation must hold for
 * the bytes we then use. */
static int drain_ring(struct kvr_client *c)
{
	struct kvr_ring_rec rec;
	int rc = 0, n = 0;

	for (;;) {
		rc = kvr_ring_peek(&c->resp, &rec);
		if (rc == -EAGAIN) {
			rc = 0;
			break;
		}
		if (rc < 0) {
			kvr_ring_release(&c->resp);
			return kvr__client_break(c, -EPROTO,
						 "response ring damaged: %s",
						 kvr_strerror(rc));
		}
		if (rec.len > c->scratch_bytes) {
			void *s = realloc(c->scratch, rec.len);

			if (!s) {
				kvr_ring_release(&c->resp);
				return kvr__client_break(c, -ENOMEM,
							 "out of memory");
			}
			c->scratch = s;
			c->scratch_bytes = rec.len;
		}
		memcpy(c->scratch, rec.data, rec.len);
		rc = kvr__answer(c, rec.type, c->scratch, rec.len, 0);
		if (rc < 0)
			break;
		/* Give room back in batches, but don't hold a whole ring. */
		if (++n % 32 == 0)
			kvr_ring_release(&c->resp);
	}
	kvr_ring_release(&c->resp);
	return rc;
}

/* Copy transport: handle every frame that is already (at least partly)
 * readable; kvr__sock_read_frame finishes a started frame, bounded. */
static int drain_sock(struct kvr_client *c)
{
	for (;;) {
		struct pollfd p = {c->sock, POLLIN | POLLRDHUP, 0};
		int rc;

		if (poll(&p, 1, 0) <= 0 ||
		    !(p.revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR)))
			return 0;
		rc = kvr__sock_read_frame(c);
		if (rc < 0)
			return rc;
	}
}

int kvr__wait_drain(struct kvr_client *c)
{
	if (c->broken)
		return c->broken;
	if (c->reading)
		return 0; /* nested inside a frame read: finish that first */
	return c->copy ? drain_sock(c) : drain_ring(c);
}

int kvr__wait_alive(struct kvr_client *c)
{
	uint64_t hb, now, stale_ms, age_ms;
	uint32_t st;

	if (c->broken)
		return c->broken;
	if (!c->hdr)
		return 0; /* still in the handshake: nothing mapped yet */
	/* Relaxed: each is one self-contained value written by the server's
	 * single loop thread; we need it untorn, not ordered with anything. */
	hb = atomic_load_explicit(&c->hdr->heartbeat_ns, memory_order_relaxed);
	now = kvr__now_ns();
	stale_ms = 3ull * c->heartbeat_ms;
	if (stale_ms < KVR_HB_MIN_STALE_MS)
		stale_ms = KVR_HB_MIN_STALE_MS;
	if (hb && now > hb) {
		age_ms = (now - hb) / 1000000ull;
		if (age_ms > stale_ms)
			return kvr__client_break(
			    c, -ETIMEDOUT,
			    "kvringd stopped answering (heartbeat "
			    "%.1f s old); is it stopped or "
			    "overloaded?",
			    (double)age_ms / 1e3);
	}
	if (memcmp(c->hdr->seg.boot_id, c->info.boot_id, 16) != 0)
		return kvr__client_break(c, -EOWNERDEAD,
					 "kvringd restarted (boot id changed); "
					 "reconnect");
	st = atomic_load_explicit(&c->ch->state, memory_order_relaxed);
	if (c->ch->generation != c->generation || st == KVR_CHAN_FREE)
		return kvr__client_break(c, -EOWNERDEAD,
					 "kvringd (pid %d) dropped channel %u",
					 (int)c->server_pid, c->info.channel);
	return 0;
}

/* Socket events during a wait. Under the shared-memory transport the only
 * legal traffic is BYE or EOF, both reported by kvr__sock_read_frame after
 * the ring was drained (answers already published still count). */
static int on_sock(struct kvr_client *c, short revents)
{
	int rc;

	if (!(revents & (POLLIN | POLLHUP | POLLRDHUP | POLLERR)))
		return 0;
	rc = kvr__wait_drain(c);
	if (rc < 0)
		return rc;
	if (c->copy)
		return 0;
	if (revents & POLLIN)
		return kvr__sock_read_frame(c);
	return kvr__client_break(c, -EOWNERDEAD,
				 "kvringd (pid %d) closed the "
				 "connection",
				 (int)c->server_pid);
}

int kvr__wait(struct kvr_client *c, uint64_t deadline_ns,
	      bool (*done)(struct kvr_client *c, void *arg), void *arg)
{
	for (;;) {
		struct pollfd p[2];
		uint64_t now, left_ms;
		int np = 0, rc, slice;

		rc = kvr__wait_drain(c);
		if (c->broken)
			return c->broken;
		if (rc < 0)
			return rc;
		if (done(c, arg))
			return 0;

		if (!c->copy && c->spin_us) {
			uint64_t end = 0, t;
			unsigned spins = 0;
			bool got;

			/* The hint is one relaxed load (the drain above peeks
			 * with the acquire); the clock (a vDSO call, the top
			 * symbol of a hot round trip when read every
			 * iteration) only every 64th spin, the first time to
			 * set the end: a hot answer is seen without any. */
			while (!(got = kvr_ring_maybe_data(&c->resp))) {
				cpu_relax();
				if (++spins % 64 != 0)
					continue;
				t = kvr__now_ns();
				if (end == 0) {
					end =
					    t + (uint64_t)c->spin_us * 1000ull;
					if (end > deadline_ns)
						end = deadline_ns;
				}
				if (t >= end)
					break;
			}
			if (got)
				continue;
		}
		now = kvr__now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;

		left_ms = (deadline_ns - now) / 1000000ull + 1;
		slice = left_ms < KVR_SLICE_MS ? (int)left_ms : KVR_SLICE_MS;
		if (!c->copy) {
			/* F2 inside; pairs with F1 in the server's notify. */
			kvr_bell_prepare_sleep(&c->ch->resp_bell);
			if (!kvr_ring_empty(&c->resp)) {
				kvr_bell_cancel_sleep(&c->ch->resp_bell);
				continue;
			}
			p[np++] = (struct pollfd){c->resp_efd, POLLIN, 0};
		}
		p[np++] = (struct pollfd){c->sock, POLLIN | POLLRDHUP, 0};
		rc = poll(p, (nfds_t)np, slice);
		if (!c->copy)
			(void)kvr_bell_woken(&c->ch->resp_bell, c->resp_efd);
		if (rc < 0 && errno != EINTR) {
			int e = -errno;

			return kvr__client_break(c, e, "poll: %s",
						 kvr_strerror(e));
		}
		if (rc > 0) {
			rc = on_sock(c, p[np - 1].revents);
			if (rc < 0)
				return rc;
		}
		rc = kvr__wait_alive(c);
		if (rc < 0)
			return rc;
	}
}
