/* SPDX-License-Identifier: MIT */
/*
 * client.c - the client object itself: its birth with the options'
 * defaults (kvr__client_create), its death (kvr__client_destroy, which
 * releases whatever a connection attempt got as far as acquiring), and
 * its sticky error. A failure leaves one sentence in c->errmsg
 * (kvr__client_fail); a fatal one also latches in c->broken
 * (kvr__client_break), fails every pending request, and from then on
 * every call returns it at once. kvr__client_call_begin/end bracket each
 * public call so that kvr_client_errmsg() speaks of the last call only.
 * Also the small public getters that read the client without a round trip.
 *
 * This file does not speak the protocol (conn.c), send (submit.c) or wait
 * (wait.c); it calls only into pend.c (to fail what is pending) and the
 * transport's close.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <kvring/error.h>
#include <kvring/keys.h>

#include "client.h"

int kvr__client_create(const struct kvr_client_opts *o, struct kvr_client **out)
{
	struct kvr_client *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	/* -1 everywhere: destroy closes only what was really opened. */
	c->sock = c->req_efd = c->resp_efd = -1;
	c->ctl.fd = c->pool.fd = c->blk.fd = -1;
	c->ctl.live_fd = c->pool.live_fd = c->blk.live_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	c->ns = o->ns;
	c->spin_us = o->spin_us ? o->spin_us : 50;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : 5000;
	c->next_id = 1; /* 0 is never a request id (kvr__pend_find) */
	c->owner_pid = getpid();
	*out = c;
	return 0;
}

void kvr__client_destroy(struct kvr_client *c)
{
	if (!c)
		return;
	kvr__pend_stage_fini(c);
	/* The transport's own: the pool mapping and its pre-fault, or the
	 * send buffer. Chosen at the welcome; nothing before it is. */
	if (c->tp)
		c->tp->close(c);
	if (c->sock >= 0)
		close(c->sock);
	if (c->req_efd >= 0)
		close(c->req_efd);
	if (c->resp_efd >= 0)
		close(c->resp_efd);
	kvr_seg_detach(&c->blk);
	kvr_seg_detach(&c->ctl);
	free(c->pend);
	free(c->cq);
	free(c->scratch);
	free(c->undo);
	free(c->sum_buf);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int kvr__client_fail(struct kvr_client *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	return rc;
}

int kvr__client_break(struct kvr_client *c, int rc, const char *fmt, ...)
{
	va_list ap;

	/* The first fatal error wins: later ones are consequences. */
	if (c->broken)
		return c->broken;
	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	c->broken = rc;
	/* Sync waiters see it in their entry, async callers as completions. */
	kvr__pend_fail_all(c);
	return rc;
}

void kvr__client_call_begin(struct kvr_client *c)
{
	if (!c->broken)
		c->errmsg[0] = '\0';
}

void kvr__client_call_end(struct kvr_client *c, long rc)
{
	if (rc < 0 && c->errmsg[0] == '\0')
		kvr__client_fail(c, (int)rc, "%s", kvr_strerror((int)rc));
}

const struct kvr_client_info *kvr_client_info(const struct kvr_client *c)
{
	return c ? &c->info : NULL;
}

const char *kvr_client_errmsg(const struct kvr_client *c)
{
	return c ? c->errmsg : "";
}

long kvr_client_keys(const struct kvr_client *c, const uint32_t *tokens,
		     size_t ntokens, struct kvr_key *out, size_t max_keys)
{
	if (!c)
		return -EINVAL;
	/* The namespace is immutable after connect: no lock needed. */
	return kvr_keys_from_tokens(&c->ns, tokens, ntokens, out, max_keys);
}

int kvr__client_slice_ms(uint64_t deadline_ns)
{
	uint64_t now = kvr_clock_now_ns(), left_ms;

	if (now >= deadline_ns)
		return -ETIMEDOUT;
	/* Rounded up: a wait never ends just before its deadline. */
	left_ms = (deadline_ns - now) / 1000000ull + 1;
	return left_ms < KVR_SLICE_MS ? (int)left_ms : KVR_SLICE_MS;
}

int kvr__client_alive(struct kvr_client *c)
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
	now = kvr_clock_now_ns();
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

size_t kvr__client_sum_room(const struct kvr_client *c, uint32_t op, uint32_t n)
{
	if (c->checksum == KVR_CHECKSUM_OFF || n == 0 ||
	    (op != KVR_OP_PREPARE_RETRIEVE && op != KVR_OP_PREPARE_STORE))
		return 0;
	return ((size_t)n * (sizeof(uint64_t) + 1) + 63) & ~(size_t)63;
}
