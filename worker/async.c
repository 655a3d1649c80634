/* SPDX-License-Identifier: MIT */
/*
 * async.c - libkvring's asynchronous calls: kvr_submit_* queue a
 * request and return at once (-EAGAIN when the request ring stays full
 * after one drain of answers), and kvr_reap() collects completions, each
 * carrying the caller's data, waiting for at least min_wait of them with
 * the same bounded wait as the synchronous calls. kvr_submit_hold() and
 * kvr_submit_flush() let a batch of submits be published at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>

#include "client.h"

/* ---- asynchronous calls ---- */

/* An async submit never waits for room: the ring transport drains answers
 * once, then says -EAGAIN, and a socket send is bounded by its progress.
 * Neither reads the deadline, so none is computed: a clock read (a vDSO
 * call, 30-40 ns on a VM) per pipelined request bought nothing. */
static int do_submit(struct kvr_client *c, struct kvr__submit_req *s)
{
	s->kind = KVR_SUBMIT_ASYNC;
	return kvr__submit(c, s, UINT64_MAX, NULL);
}

int kvr_submit_lookup(struct kvr_client *c, const struct kvr_key *keys,
		      uint32_t n, bool pin, void *user)
{
	struct kvr__submit_req s = {.op = KVR_OP_LOOKUP,
				    .keys = keys,
				    .n = n,
				    .flags = pin ? KVR_REQ_PIN : 0,
				    .user = user};

	if (!c)
		return -EINVAL;
	return KVR_CLIENT_LOCKED(c, do_submit(c, &s));
}

int kvr_submit_lookup_l2(struct kvr_client *c, const struct kvr_key *keys,
			 uint32_t n, bool pin, void *user)
{
	struct kvr__submit_req s = {.op = KVR_OP_LOOKUP,
				    .keys = keys,
				    .n = n,
				    .flags =
					KVR_REQ_L2 | (pin ? KVR_REQ_PIN : 0),
				    .user = user};

	if (!c)
		return -EINVAL;
	return KVR_CLIENT_LOCKED(c, do_submit(c, &s));
}

/*
 * The prepares' common half: refuse a NULL xfer, start it empty (caller
 * memory only, so outside the lock: an empty xfer is freeable whatever
 * the submit does), then submit @s under the lock. -EINVAL for a NULL @c;
 * @who is the public function, named in the error as KVR_CLIENT_ARG_FAIL
 * does. A retrieve asks for the sums the connection's checksum mode (fixed
 * at connect) wants.
 */
static int submit_prepare(struct kvr_client *c, struct kvr__submit_req *s,
			  const char *who)
{
	if (!c)
		return -EINVAL;
	if (s->op == KVR_OP_PREPARE_RETRIEVE)
		s->flags = kvr__xfer_sum_retrieve_flags(c);
	if (!s->x)
		return KVR_CLIENT_LOCKED(
		    c, kvr__client_fail(c, -EINVAL, "%s: xfer is NULL", who));
	kvr__pend_xfer_init(s->x, s->op);
	return KVR_CLIENT_LOCKED(c, do_submit(c, s));
}

int kvr_submit_prepare_store(struct kvr_client *c, const struct kvr_key *keys,
			     const uint64_t *sizes, uint32_t n,
			     struct kvr_xfer *x, void *user)
{
	struct kvr__submit_req s = {.op = KVR_OP_PREPARE_STORE,
				    .keys = keys,
				    .sizes = sizes,
				    .n = n,
				    .x = x,
				    .user = user};

	return submit_prepare(c, &s, __func__);
}

int kvr_submit_prepare_retrieve(struct kvr_client *c,
				const struct kvr_key *keys, uint32_t n,
				struct kvr_xfer *x, void *user)
{
	struct kvr__submit_req s = {.op = KVR_OP_PREPARE_RETRIEVE,
				    .keys = keys,
				    .n = n,
				    .x = x,
				    .user = user};

	return submit_prepare(c, &s, __func__);
}

int kvr_submit_ping(struct kvr_client *c, void *user)
{
	struct kvr__submit_req s = {.op = KVR_OP_PING, .user = user};

	if (!c)
		return -EINVAL;
	return KVR_CLIENT_LOCKED(c, do_submit(c, &s));
}

/* A completion made here, status 0, that still comes out of kvr_reap()
 * like any other: nothing to ask kvringd. */
static int local_completion(struct kvr_client *c, uint32_t op,
			    struct kvr_xfer *x, void *user)
{
	struct kvr_completion e = {.user = user, .op = op, .xfer = x};

	if (kvr__pend_cq_reserve(c) < 0)
		return kvr__client_fail(c, -ENOMEM, "out of memory");
	kvr_xfer_free(x);
	kvr__pend_cq_push(c, &e);
	return 0;
}

/* Async commit/abort: a transfer with nothing reserved completes locally. */
static int do_submit_finish(struct kvr_client *c, uint32_t op, uint32_t want_op,
			    struct kvr_xfer *x, void *user)
{
	struct kvr__submit_req s = {
	    .op = op, .handle = x->id, .x = x, .user = user};

	if (c->broken)
		return c->broken;
	/* Nothing reserved (every key already stored, or none asked): the
	 * server has nothing to do, so the completion is made here, with
	 * status 0, and still comes out of kvr_reap() like any other. */
	if (x->id == 0 || (op == KVR_OP_ABORT_STORE && x->op == want_op &&
			   kvr__stage_abort(c, x)))
		/* (An abort of a staged slot, too: stage.c owes kvringd
		 * what it must be told.) */
		return local_completion(c, op, x, user);
	if (x->op != want_op)
		return kvr__client_fail(c, -EINVAL, "%s on a %s transfer",
					kvr_op_name(op), kvr_op_name(x->op));
	if (kvr__xfer_sum_commit(c, x, &s) < 0)
		return -ENOMEM;
	if (op == KVR_OP_COMMIT_STORE) {
		/* A staged slot: its early bind is collected first. */
		int rc = kvr__stage_commit(c, x, &s);

		if (rc < 0)
			return rc;
		if (rc == 1)
			return local_completion(c, op, x, user);
	}
	return do_submit(c, &s);
}

/* The finishes' common half: @c and @x checked (the error names @who,
 * the public call), then do_submit_finish under the lock. */
static int submit_finish(struct kvr_client *c, uint32_t op, uint32_t want_op,
			 struct kvr_xfer *x, void *user, const char *who)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_LOCKED(
		    c, kvr__client_fail(c, -EINVAL, "%s: xfer is NULL", who));
	return KVR_CLIENT_LOCKED(c, do_submit_finish(c, op, want_op, x, user));
}

int kvr_submit_commit_store(struct kvr_client *c, struct kvr_xfer *x,
			    void *user)
{
	return submit_finish(c, KVR_OP_COMMIT_STORE, KVR_OP_PREPARE_STORE, x,
			     user, __func__);
}

int kvr_submit_abort_store(struct kvr_client *c, struct kvr_xfer *x, void *user)
{
	return submit_finish(c, KVR_OP_ABORT_STORE, KVR_OP_PREPARE_STORE, x,
			     user, __func__);
}

int kvr_submit_commit_retrieve(struct kvr_client *c, struct kvr_xfer *x,
			       void *user)
{
	return submit_finish(c, KVR_OP_COMMIT_RETRIEVE, KVR_OP_PREPARE_RETRIEVE,
			     x, user, __func__);
}

/* ---- held submits: one publish for a batch ---- */

/* A hold changes no request and no answer, only when the server sees a
 * request: every async submit while it lasts skips the commit and the
 * doorbell check, and the first wait for answers (or the flush) does
 * both once for all of them. The fence inside the doorbell check (F1)
 * was the largest single cost of a pipelined submit (perf):
 * it waits for the record's store, whose line the server last read. */
int kvr_submit_hold(struct kvr_client *c)
{
	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	c->hold = true;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int kvr_submit_flush(struct kvr_client *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	c->hold = false;
	/* A broken client publishes nothing: its requests already have
	 * their completions (the break made them). */
	rc = c->broken;
	if (rc == 0)
		kvr__wait_publish(c);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* What kvr_reap() waits for: @want completions queued, or none left in
 * flight to wait for. */
struct reap_arg {
	uint32_t want;
};

static bool reap_done(struct kvr_client *c, void *arg)
{
	const struct reap_arg *a = arg;

	return kvr__pend_cq_count(c) >= a->want || c->pend_async == 0;
}

static int do_reap(struct kvr_client *c, struct kvr_completion *out,
		   unsigned max, unsigned min_wait, int timeout_ms)
{
	struct reap_arg a;
	uint32_t n = 0;
	int rc = 0;

	if (min_wait > max)
		min_wait = max;
	/* Never wait for more than can ever arrive. */
	if (min_wait > kvr__pend_cq_count(c) + c->pend_async)
		min_wait = kvr__pend_cq_count(c) + c->pend_async;
	a.want = min_wait;
	/* A broken client still hands out the completions it queued (the
	 * break made one for every request in flight). */
	if (!c->broken) {
		if (kvr__pend_cq_count(c) < min_wait && timeout_ms != 0) {
			uint64_t t = timeout_ms < 0 ? c->timeout_ms
						    : (uint64_t)timeout_ms;

			rc = kvr__wait(c, kvr_clock_now_ns() + t * 1000000ull,
				       reap_done, &a);
		} else {
			rc = kvr__wait_drain(c);
		}
	}
	/* FIFO: completions come out in the order their answers came. */
	while (n < max && kvr__pend_cq_count(c)) {
		out[n++] = c->cq[c->cq_head & (c->cq_cap - 1)];
		c->cq_head++;
	}
	if (n)
		return (int)n;
	if (c->broken)
		return c->broken;
	if (rc == -ETIMEDOUT && min_wait > 0)
		return kvr__client_fail(c, -ETIMEDOUT,
					"no completion within the "
					"reap timeout");
	return rc < 0 && rc != -ETIMEDOUT ? rc : 0;
}

int kvr_reap(struct kvr_client *c, struct kvr_completion *out, unsigned max,
	     unsigned min_wait, int timeout_ms)
{
	if (!c || (max && !out))
		return -EINVAL;
	return KVR_CLIENT_LOCKED(c, do_reap(c, out, max, min_wait, timeout_ms));
}

unsigned kvr_inflight(const struct kvr_client *c)
{
	/* Const for the caller; the mutex is the one thing we change. */
	struct kvr_client *m = (struct kvr_client *)c;
	unsigned n;

	if (!c)
		return 0;
	pthread_mutex_lock(&m->lock);
	n = kvr__pend_cq_count(m) + m->pend_async;
	pthread_mutex_unlock(&m->lock);
	return n;
}
