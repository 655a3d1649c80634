/* SPDX-License-Identifier: MIT */
/*
 * errmsg.c - the sentence kvr_client_errmsg() gives about a call that
 * kvringd refused. An error code the server answered becomes a sentence that
 * names the op, the lease or transfer id, and the limit or the next step
 * ("lease 123 is unknown or expired: ..."), because a bare "no such object"
 * does not tell a worker which of its handles went stale.
 *
 * This file owns wording only: it never decides whether a call failed,
 * and it runs only on failure paths, never on a success's hot path. The
 * sticky error and the per-call bracket it fills live in client.c.
 */
#include <errno.h>
#include <stdio.h>

#include <kvring/error.h>

#include "client.h"

/* "lease 123" or "transfer 45": what the request's handle names. */
static const char *handle_kind(const struct kvr__submit_req *s)
{
	if (s->op == KVR_OP_RELEASE ||
	    (s->op == KVR_OP_PREPARE_RETRIEVE && (s->flags & KVR_REQ_BY_LEASE)))
		return "lease";
	if (s->op == KVR_OP_COMMIT_RETRIEVE)
		return "retrieve transfer";
	return "store transfer";
}

/* -ENOENT: which handle went stale, and how one gets a new one. */
static int enoent(struct kvr_client *c, const struct kvr__submit_req *s)
{
	unsigned long long h = (unsigned long long)s->handle;

	switch (s->op) {
	case KVR_OP_RELEASE:
	case KVR_OP_PREPARE_RETRIEVE:
		return kvr__client_fail(
		    c, -ENOENT,
		    "%s: lease %llu is unknown or expired, or not "
		    "this connection's (a lease lives for kvringd's "
		    "--lease-ms after the lookup; only its own "
		    "connection releases it, only the same uid and "
		    "model redeem it; look up with pin again)",
		    kvr_op_name(s->op), h);
	case KVR_OP_COMMIT_STORE:
	case KVR_OP_ABORT_STORE:
	case KVR_OP_COMMIT_RETRIEVE:
		return kvr__client_fail(
		    c, -ENOENT,
		    "%s: %s %llu is unknown to kvringd (already "
		    "committed or aborted, prepared on another "
		    "connection, or kvringd restarted): prepare "
		    "it again on this connection",
		    kvr_op_name(s->op), handle_kind(s), h);
	default:
		return kvr__client_fail(c, -ENOENT,
					"%s: kvringd knows no such object",
					kvr_op_name(s->op));
	}
}

/* -EBUSY: a per-connection limit was reached; name it and what frees it. */
static int ebusy(struct kvr_client *c, const struct kvr__submit_req *s)
{
	if (s->op == KVR_OP_LOOKUP)
		return kvr__client_fail(
		    c, -EBUSY,
		    "lookup with pin: this connection already "
		    "holds its limit of leases; release some (or "
		    "redeem them) first");
	if (s->op == KVR_OP_PREPARE_STORE || s->op == KVR_OP_PREPARE_RETRIEVE)
		return kvr__client_fail(
		    c, -EBUSY,
		    "%s: this connection already has its limit of "
		    "open transfers; commit or abort some first",
		    kvr_op_name(s->op));
	return kvr__client_fail(c, -EBUSY, "%s: %s %llu is in use",
				kvr_op_name(s->op), handle_kind(s),
				(unsigned long long)s->handle);
}

int kvr__errmsg_answer(struct kvr_client *c, const struct kvr__submit_req *s,
		       int st)
{
	unsigned long long h = (unsigned long long)s->handle;
	const char *op = kvr_op_name(s->op);

	switch (st) {
	case -ENOENT:
		return enoent(c, s);
	case -EPERM:
		return kvr__client_fail(
		    c, st,
		    "%s: %s %llu belongs to another connection; "
		    "only its owner can %s it%s",
		    op, handle_kind(s), h,
		    s->op == KVR_OP_RELEASE ? "release" : "finish",
		    s->op == KVR_OP_RELEASE
			? " (redeem it with prepare_retrieve_lease)"
			: "");
	case -EBUSY:
		return ebusy(c, s);
	case -E2BIG:
		return kvr__client_fail(
		    c, st,
		    "%s: %u keys in one request, kvringd takes at "
		    "most %u; split the request",
		    op, s->n, c->info.max_keys);
	case -EINVAL:
		if (s->op == KVR_OP_PREPARE_RETRIEVE &&
		    (s->flags & KVR_REQ_BY_LEASE))
			return kvr__client_fail(
			    c, st,
			    "%s: lease %llu pins more chunks than "
			    "one answer carries (max %u)",
			    op, h, c->info.max_keys);
		return kvr__client_fail(c, st,
					"%s: kvringd rejected the request as "
					"invalid (%u keys)",
					op, s->n);
	case -ENOMEM:
		return kvr__client_fail(
		    c, st,
		    "%s: kvringd is out of memory for its "
		    "bookkeeping; retry later or restart it with "
		    "more memory",
		    op);
	case -ENOSPC:
		return kvr__client_fail(
		    c, st,
		    "%s: the chunk pool is full of reserved or "
		    "pinned chunks; commit, abort or release some",
		    op);
	case -EDQUOT:
		return kvr__client_fail(
		    c, st,
		    "%s: this connection (or all connections of "
		    "its uid) would hold more pinned bytes than "
		    "kvringd's --quota-pinned (--quota-uid-pinned) "
		    "allows, even for the first chunk; commit "
		    "retrieves or release leases first (or raise "
		    "the quota)",
		    op);
	case KVR_ERR_EXPIRED:
		return kvr__client_fail(
		    c, st,
		    "%s: %s %llu expired: kvringd reclaimed it at "
		    "its deadline (--xfer-ms); prepare it again",
		    op, handle_kind(s), h);
	case -ESHUTDOWN:
		return kvr__client_fail(
		    c, st,
		    "%s: kvringd is shutting down; reconnect when "
		    "it is back",
		    op);
	default:
		return kvr__client_fail(c, st, "%s: kvringd answered: %s", op,
					kvr_strerror(st));
	}
}
