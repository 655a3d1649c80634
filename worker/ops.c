/* SPDX-License-Identifier: MIT */
/*
 * ops.c - libkvring's synchronous calls (lookup, release,
 * prepare/commit/abort store, prepare/commit retrieve, ping, stats). Each
 * takes the client's mutex, submits one request and waits, bounded, for its
 * own answer; completions of async requests that arrive meanwhile stay
 * queued for kvr_reap(). A call that runs past timeout_ms returns
 * -ETIMEDOUT and leaves its request as an orphan that answer.c undoes.
 * commit/abort always release the xfer's memory, and a transfer with
 * nothing reserved completes without a round trip (the idempotent store).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>

#include "client.h"

/* ---- synchronous calls ---- */

/* The wait of one sync call ends when its entry is answered, or gone (a
 * break freed it; call() tells the two apart). */
static bool sync_done(struct kvr_client *c, void *arg)
{
	struct kvr__pend *p = kvr__pend_find(c, *(uint64_t *)arg);

	return !p || p->state == KVR_PEND_DONE;
}

/* Submit and wait for this request's own answer. Return the answer's
 * status (0 or -errno), with *res holding its fields. */
static int call(struct kvr_client *c, struct kvr__submit_req *s,
		struct kvr__pend *res)
{
	uint64_t deadline = kvr__wait_deadline_ns(c->timeout_ms);
	struct kvr__pend *p;
	uint64_t id;
	int rc;

	/* One deadline for both halves: waiting for room in the request
	 * ring counts against the call's timeout too. */
	s->kind = KVR_SUBMIT_SYNC;
	rc = kvr__submit(c, s, deadline, &id);
	if (rc < 0)
		return rc;
	rc = kvr__wait(c, deadline, sync_done, &id);
	p = kvr__pend_find(c, id);
	if (rc == 0 && p) {
		/* A copy of the result: the entry is free for reuse at once. */
		*res = *p;
		kvr__pend_free(c, p);
		if (res->status < 0)
			return kvr__errmsg_answer(c, s, res->status);
		return 0;
	}
	if (rc == -ETIMEDOUT && p && !c->broken) {
		/* The request stays in flight; its late answer is undone and
		 * never touches the caller's memory. */
		p->state = KVR_PEND_ORPHAN;
		p->x = NULL;
		p->stats = NULL;
		return kvr__client_fail(
		    c, -ETIMEDOUT,
		    "kvringd did not answer %s within %u ms (the "
		    "connection stays usable; a late answer is "
		    "undone)",
		    kvr_op_name(s->op), c->timeout_ms);
	}
	/* Any other end (a break) leaves nothing to wait for. */
	if (p)
		kvr__pend_free(c, p);
	if (rc < 0)
		return rc;
	return c->broken ? c->broken : -EPROTO;
}

static long do_lookup(struct kvr_client *c, const struct kvr_key *keys,
		      uint32_t n, uint64_t *lease_out)
{
	struct kvr__submit_req s = {.op = KVR_OP_LOOKUP,
				    .keys = keys,
				    .n = n,
				    .flags = lease_out ? KVR_REQ_PIN : 0};
	struct kvr__pend r = {0};
	int rc = call(c, &s, &r);

	if (rc < 0)
		return rc;
	/* The answer's value is the hit prefix, its handle the lease (0
	 * when nothing was pinned). */
	if (lease_out)
		*lease_out = r.handle;
	return r.value;
}

long kvr_lookup(struct kvr_client *c, const struct kvr_key *keys, uint32_t n,
		uint64_t *lease_out)
{
	if (!c)
		return -EINVAL;
	return KVR_CLIENT_LOCKED(c, do_lookup(c, keys, n, lease_out));
}

static long do_lookup_l2(struct kvr_client *c, const struct kvr_key *keys,
			 uint32_t n, uint64_t *lease_out, bool *pending_out)
{
	struct kvr__submit_req s = {.op = KVR_OP_LOOKUP,
				    .keys = keys,
				    .n = n,
				    .flags = KVR_REQ_L2 |
					     (lease_out ? KVR_REQ_PIN : 0)};
	struct kvr__pend r = {0};
	int rc = call(c, &s, &r);

	if (rc < 0)
		return rc;
	if (lease_out)
		*lease_out = r.handle;
	/* Under L2 the value also says whether a read-through is still
	 * filling the pool: look up again later for the rest. */
	if (pending_out)
		*pending_out = ((uint64_t)r.value & KVR_LOOKUP_L2_PENDING) != 0;
	return (long)((uint64_t)r.value & KVR_LOOKUP_HITS_MASK);
}

long kvr_lookup_l2(struct kvr_client *c, const struct kvr_key *keys, uint32_t n,
		   uint64_t *lease_out, bool *pending_out)
{
	if (!c)
		return -EINVAL;
	return KVR_CLIENT_LOCKED(
	    c, do_lookup_l2(c, keys, n, lease_out, pending_out));
}

static int do_simple(struct kvr_client *c, uint32_t op, uint64_t handle,
		     struct kvr_xfer *x, struct kvr__pend *r)
{
	struct kvr__submit_req s = {.op = op, .handle = handle, .x = x};

	return call(c, &s, r);
}

static int do_release(struct kvr_client *c, uint64_t lease)
{
	struct kvr__pend r = {0};

	return do_simple(c, KVR_OP_RELEASE, lease, NULL, &r);
}

int kvr_release(struct kvr_client *c, uint64_t lease)
{
	if (!c)
		return -EINVAL;
	return KVR_CLIENT_LOCKED(c, do_release(c, lease));
}

static int do_prepare(struct kvr_client *c, uint32_t op,
		      const struct kvr_key *keys, const uint64_t *sizes,
		      uint32_t n, uint64_t lease, struct kvr_xfer *x)
{
	struct kvr__submit_req s = {.op = op,
				    .keys = keys,
				    .sizes = sizes,
				    .n = n,
				    .x = x,
				    .handle = lease,
				    .flags =
					(lease ? KVR_REQ_BY_LEASE : 0) |
					(op == KVR_OP_PREPARE_RETRIEVE
					     ? kvr__xfer_sum_retrieve_flags(c)
					     : 0)};
	struct kvr__pend r = {0};
	int rc;

	/* An empty xfer first: whatever happens, the caller may free it. */
	kvr__pend_xfer_init(x, op);
	if (n == 0 && !lease)
		return 0; /* nothing asked: an empty transfer */
	/* Store-ahead: a one-key store answered from the staged slot. */
	if (op == KVR_OP_PREPARE_STORE) {
		uint64_t stale;

		if (kvr__stage_prepare(c, keys, sizes, n, x, &stale)) {
			kvr__touch_slots(c, x); /* as ring_slots() does */
			return 0;
		}
		if (stale) /* sent before this prepare */
			kvr__pend_owe(c, KVR_OP_PREPARE_STORE, stale);
	}
	rc = call(c, &s, &r);
	/* A retrieve answer's value is the stored prefix (docs/protocol.md):
	 * more than the slots when the pin quota cut it. Say why, since the
	 * caller sees only fewer slots than a lookup reported. */
	if (rc == 0 && op == KVR_OP_PREPARE_RETRIEVE && !lease &&
	    r.value > (long)x->nslots)
		kvr__client_fail(
		    c, 0,
		    "prepare_retrieve: pinned %u of the %ld leading chunks "
		    "stored: the pins of this connection (open retrieves and "
		    "leases, each counted) reached kvringd's --quota-pinned, "
		    "or those of its uid --quota-uid-pinned; retrieve a "
		    "leased prefix through its lease "
		    "(kvr_prepare_retrieve_lease), or release leases and "
		    "commit retrieves first",
		    x->nslots, r.value);
	return rc;
}

int kvr_prepare_store(struct kvr_client *c, const struct kvr_key *keys,
		      const uint64_t *sizes, uint32_t n, struct kvr_xfer *x)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(
	    c, do_prepare(c, KVR_OP_PREPARE_STORE, keys, sizes, n, 0, x));
}

int kvr_prepare_retrieve(struct kvr_client *c, const struct kvr_key *keys,
			 uint32_t n, struct kvr_xfer *x)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(
	    c, do_prepare(c, KVR_OP_PREPARE_RETRIEVE, keys, NULL, n, 0, x));
}

int kvr_prepare_retrieve_lease(struct kvr_client *c, uint64_t lease,
			       struct kvr_xfer *x)
{
	if (!c)
		return -EINVAL;
	if (!x || !lease)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL or lease is 0");
	return KVR_CLIENT_LOCKED(
	    c, do_prepare(c, KVR_OP_PREPARE_RETRIEVE, NULL, NULL, 0, lease, x));
}

/* commit_store / abort_store / commit_retrieve: the transfer's memory is
 * freed whatever the outcome (the server drops it too on failure). */
static int do_finish(struct kvr_client *c, uint32_t op, uint32_t want_op,
		     struct kvr_xfer *x)
{
	struct kvr__submit_req s = {.op = op, .handle = x->id, .x = x};
	struct kvr__pend r = {0};
	int rc;

	if (x->id == 0) {
		kvr_xfer_free(x); /* nothing reserved: idempotent no-op */
		return 0;
	}
	if (x->op != want_op)
		return kvr__client_fail(c, -EINVAL, "%s on a %s transfer",
					kvr_op_name(op), kvr_op_name(x->op));
	if (op == KVR_OP_ABORT_STORE && kvr__stage_abort(c, x))
		return 0; /* a staged slot stays staged: nothing to send */
	/* x rides along: a commit_store sends its slots' bytes under the
	 * socket transport, and the answer frees its memory. Checksums: the
	 * sums of a store, the corrupt slots of a retrieve (xfer_sum.c). A
	 * staged slot is bound by its commit (stage.c). */
	rc = kvr__xfer_sum_commit(c, x, &s);
	if (rc == 0 && op == KVR_OP_COMMIT_STORE &&
	    (rc = kvr__stage_commit(c, x, &s)) == 1) {
		kvr_xfer_free(x); /* rule 1: stored already, a success */
		return 0;
	}
	if (rc == 0)
		rc = call(c, &s, &r);
	if (rc == KVR_ERR_EXPIRED)
		/* Say it in words: a store was not published, and bytes read
		 * through a retrieve may have been overwritten meanwhile. */
		kvr__client_fail(c, rc, "%s of transfer %llu: %s%s",
				 kvr_op_name(op), (unsigned long long)x->id,
				 kvr_strerror(rc),
				 op == KVR_OP_COMMIT_RETRIEVE
				     ? " (the bytes read may have been "
				       "overwritten: discard them)"
				     : " (nothing was stored)");
	kvr_xfer_free(x);
	return rc;
}

int kvr_commit_store(struct kvr_client *c, struct kvr_xfer *x)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(
	    c, do_finish(c, KVR_OP_COMMIT_STORE, KVR_OP_PREPARE_STORE, x));
}

int kvr_abort_store(struct kvr_client *c, struct kvr_xfer *x)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(
	    c, do_finish(c, KVR_OP_ABORT_STORE, KVR_OP_PREPARE_STORE, x));
}

int kvr_commit_retrieve(struct kvr_client *c, struct kvr_xfer *x)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(c, do_finish(c, KVR_OP_COMMIT_RETRIEVE,
					      KVR_OP_PREPARE_RETRIEVE, x));
}

static int do_ping(struct kvr_client *c, uint64_t *server_ns)
{
	struct kvr__pend r = {0};
	int rc = do_simple(c, KVR_OP_PING, 0, NULL, &r);

	/* A ping's value is kvringd's clock when it answered. */
	if (rc == 0 && server_ns)
		*server_ns = (uint64_t)r.value;
	return rc;
}

int kvr_ping(struct kvr_client *c, uint64_t *server_ns)
{
	if (!c)
		return -EINVAL;
	return KVR_CLIENT_LOCKED(c, do_ping(c, server_ns));
}

static int do_stats(struct kvr_client *c, struct kvr_stats_wire *out)
{
	struct kvr_stats_wire tmp;
	struct kvr__submit_req s = {.op = KVR_OP_STATS, .stats = &tmp};
	struct kvr__pend r = {0};
	int rc = call(c, &s, &r);

	/* Through tmp, so *out stays untouched on failure (and a timed-out
	 * call's late answer can't write the caller's memory). */
	if (rc == 0)
		*out = tmp;
	return rc;
}

int kvr_stats(struct kvr_client *c, struct kvr_stats_wire *out)
{
	if (!c)
		return -EINVAL;
	if (!out)
		return KVR_CLIENT_ARG_FAIL(c, "out is NULL");
	return KVR_CLIENT_LOCKED(c, do_stats(c, out));
}
