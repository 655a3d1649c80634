/* SPDX-License-Identifier: MIT */
/*
 * l2_batch.c - one batch of commands on a lane: commands built from a job's
 * items, split per node, each node's share written as one pipeline
 * (writev straight from the pool), every node's before any reply is read,
 * then each node's replies read in order, with redirects followed for a
 * bounded number of rounds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/log.h>
#include <kvring/sum.h>

#include "l2_lane.h"

/* The command is finished, failed: its node is down or it ran out of
 * rounds. */
static void cmd_fail(struct cmd *c)
{
	c->done = true;
	c->res = KVR_L2_RES_FAIL;
}

/*
 * A SET's header needs the payload's sum before the payload is sent. Hash
 * it in pieces, and between pieces hand the socket what it takes of the
 * commands queued before this one, so Redis keeps receiving chunk i while
 * chunk i+1 is hashed (hashing everything first left Redis idle for the
 * whole hash: about a fifth of an upload's time at 6.6 GB/s).
 */
static int set_hdr(struct kvr_l2_lane *ln, struct node *n, struct cmd *c,
		   struct outq *q)
{
	const uint8_t *p = ln->pool + c->it->off;
	size_t len = c->it->len;

	if (c->it->has_sum) {
		/* The storer's sum (a worker with checksums): the value is
		 * checked on read against the bytes as the worker summed
		 * them, so a chunk damaged in the pool after its commit
		 * fails there instead of being uploaded as valid. */
		kvr_l2_hdr_make(c->hdr.ns_fp, &c->it->key, len, c->it->sum,
				&c->hdr);
		c->hdr_ready = true;
		return 0;
	}
	kvr_sum_reset(ln->sum);
	for (size_t at = 0; at < len;) {
		size_t step = len - at < PIECE ? len - at : PIECE;
		int rc;

		kvr_sum_update(ln->sum, p + at, step);
		at += step;
		rc = at < len ? kvr__l2_outq_pump(n->fd, q) : 0;
		if (rc < 0)
			return rc;
	}
	kvr_l2_hdr_make(c->hdr.ns_fp, &c->it->key, len, kvr_sum_digest(ln->sum),
			&c->hdr);
	c->hdr_ready = true;
	return 0;
}

/*
 * A SET through the temporary key (docs/l2.md "The upload sequence"):
 *   SET {K}:t:<tag> <zeroed header + payload> PX 60000
 *   EVAL <PUBLISH_LUA> 2 {K}:t:<tag> K <header> <64 + payload bytes>
 * (the script writes the header, renames to K and drops the TTL, only if
 * the temporary value is whole).
 * The payload goes out before its header is known, so each 256 KiB piece
 * is hashed right after the kernel copied it into the socket, while it is
 * still in cache: the chunk is read from memory once instead of twice.
 * Everything before this command is flushed first; the iovec queue
 * starts again empty after the payload.
 */
static int set_tmp_send(struct kvr_l2_lane *ln, struct node *n, struct cmd *c,
			struct outq *q)
{
	static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
	static const uint8_t zero_hdr[KVR_L2_HDR_BYTES];
	const char *ask = c->asking ? asking : "";
	uint8_t *p = ln->pool + c->it->off;
	size_t len = c->it->len;
	char vlen[24];
	int pl, rc;

	q->iov[q->k++] = (struct iovec){(void *)zero_hdr, sizeof(zero_hdr)};
	if (!c->hdr_ready) {
		rc = kvr__l2_outq_flush(n->fd, q);
		if (rc < 0)
			return rc;
		kvr_sum_reset(ln->sum);
		for (size_t at = 0; at < len;) {
			size_t step = len - at < PIECE ? len - at : PIECE;
			struct outq one = {q->iov, 0, 1};

			q->iov[0] = (struct iovec){p + at, step};
			rc = kvr__l2_outq_flush(n->fd, &one);
			if (rc < 0)
				return rc;
			kvr_sum_update(ln->sum, p + at, step);
			at += step;
		}
		kvr_l2_hdr_make(c->hdr.ns_fp, &c->it->key, len,
				kvr_sum_digest(ln->sum), &c->hdr);
		c->hdr_ready = true;
		q->at = q->k = 0;
	} else {
		q->iov[q->k++] = (struct iovec){p, len};
	}
	pl = snprintf(c->post, sizeof(c->post),
		      "\r\n$2\r\nPX\r\n$%zu\r\n%s\r\n%s*7\r\n$4\r\nEVAL"
		      "\r\n$%zu\r\n%s\r\n$1\r\n2\r\n$%zu\r\n%s\r\n$%zu\r\n%s"
		      "\r\n$%u\r\n",
		      sizeof(TMP_TTL_MS) - 1, TMP_TTL_MS, ask,
		      sizeof(PUBLISH_LUA) - 1, PUBLISH_LUA, c->tklen, c->tkey,
		      c->klen, c->key, KVR_L2_HDR_BYTES);
	if (pl < 0 || (size_t)pl >= sizeof(c->post))
		return -ENAMETOOLONG;
	c->post_len = (size_t)pl;
	snprintf(vlen, sizeof(vlen), "%llu",
		 (unsigned long long)(KVR_L2_HDR_BYTES + len));
	pl = snprintf(c->post2, sizeof(c->post2), "\r\n$%zu\r\n%s\r\n",
		      strlen(vlen), vlen);
	if (pl < 0 || (size_t)pl >= sizeof(c->post2))
		return -ENAMETOOLONG;
	c->post2_len = (size_t)pl;
	q->iov[q->k++] = (struct iovec){c->post, c->post_len};
	q->iov[q->k++] = (struct iovec){&c->hdr, sizeof(c->hdr)};
	q->iov[q->k++] = (struct iovec){c->post2, c->post2_len};
	return 0;
}

/* Build the iovecs of a node's pipeline and write it. */
static int send_node(struct kvr_l2_lane *ln, struct node *n)
{
	static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
	static char crlf[] = "\r\n";
	struct outq q = {ln->iov, 0, 0};

	for (uint32_t i = 0; i < n->nq; i++) {
		struct cmd *c = n->q[i];

		if (c->asking)
			q.iov[q.k++] =
			    (struct iovec){(void *)asking, sizeof(asking) - 1};
		q.iov[q.k++] = (struct iovec){c->pre, c->pre_len};
		if (c->op == C_SET && c->tmp) {
			int rc = set_tmp_send(ln, n, c, &q);

			if (rc < 0)
				return rc;
		} else if (c->op == C_SET) {
			if (!c->hdr_ready) {
				int rc = set_hdr(ln, n, c, &q);

				if (rc < 0)
					return rc;
			}
			q.iov[q.k++] = (struct iovec){&c->hdr, sizeof(c->hdr)};
			q.iov[q.k++] =
			    (struct iovec){ln->pool + c->it->off, c->it->len};
			q.iov[q.k++] = (struct iovec){crlf, 2};
			if (c->del_tmp && c->asking)
				q.iov[q.k++] = (struct iovec){
				    (void *)asking, sizeof(asking) - 1};
			if (c->del_tmp)
				q.iov[q.k++] =
				    (struct iovec){c->post, c->post_len};
		}
	}
	return kvr__l2_outq_flush(n->fd, &q);
}

/* Whether error text @s names a command the node refuses for good (ACL,
 * scripting disabled or unknown), rather than one failure. */
static bool refused_for_good(const char *s, size_t n)
{
	return (n >= 6 && memcmp(s, "NOPERM", 6) == 0) ||
	       (n >= 15 && memcmp(s, "ERR unknown com", 15) == 0);
}

/* "host:port" or the socket path of node @n, for log lines. */
static const char *node_name(const struct node *n, char *buf, size_t len)
{
	if (n->a.path[0])
		return n->a.path;
	snprintf(buf, len, "%s:%u", n->a.host, n->a.port);
	return buf;
}

/* What to do about an error reply whose first word is @w (len @n). */
static const char *refusal_hint(const char *w, size_t n)
{
	if (n == 6 && memcmp(w, "NOAUTH", 6) == 0)
		return ": put the password in --l2-auth-file or "
		       "$" KVR_L2_AUTH_ENV " and restart kvringd";
	if (n == 9 && memcmp(w, "WRONGPASS", 9) == 0)
		return ": check --l2-auth-file or $" KVR_L2_AUTH_ENV;
	if (n == 3 && memcmp(w, "OOM", 3) == 0)
		return ": Redis is at maxmemory with noeviction; raise "
		       "maxmemory or let it evict (docs/l2.md)";
	if (n == 8 && memcmp(w, "READONLY", 8) == 0)
		return ": --l2 names a replica; name the master";
	return "";
}

/*
 * An error reply @l to command @c that is no redirect: counted by kind,
 * and logged. A refusal for good (an ACL) is logged once with what to
 * do; every other error is logged per kind (its first word: NOAUTH, OOM,
 * READONLY, ...) through the peer rate limit: a burst, then at most one
 * line a second for that kind, with a count of what it held back.
 */
static void count_refusal(struct kvr_l2_lane *ln, const struct node *n,
			  const struct cmd *c, const struct kvr_l2_rline *l)
{
	static const char *const names[] = {"EXISTS", "SET", "GETRANGE",
					    "GET",    "DEL", "CLUSTER"};
	bool oom = l->str_len >= 3 && memcmp(l->str, "OOM", 3) == 0;
	size_t w = 0;
	uint32_t h = 2166136261u; /* FNV-1a of the first word */
	char buf[288];

	count_err(ln, oom ? KVR_L2_ERR_OOM : KVR_L2_ERR_SERVER);
	if (!oom && refused_for_good(l->str, l->str_len)) {
		if (ln->told_refused)
			return;
		ln->told_refused = true;
		kvr_log_warn("l2: node %s refused %s (%.*s): those commands "
			     "fail (counted in errors.server) until the L2 "
			     "user may run the commands docs/l2.md lists "
			     "(\"Redis ACL\")",
			     node_name(n, buf, sizeof(buf)), names[c->op],
			     (int)(l->str_len > 120 ? 120 : l->str_len),
			     l->str);
		return;
	}
	while (w < l->str_len && w < 32 && l->str[w] != ' ')
		h = (h ^ (uint8_t)l->str[w++]) * 16777619u;
	/* The kind stands in for the peer: negative, so never a pid. */
	kvr_log_peer(KVR_LOG_WARN, -1 - (long)(h & 0x7fffffffu),
		     "l2: node %s answered %s with an error (%.*s), counted "
		     "in errors.%s%s",
		     node_name(n, buf, sizeof(buf)), names[c->op],
		     (int)(l->str_len > 120 ? 120 : l->str_len), l->str,
		     oom ? "oom" : "server", refusal_hint(l->str, w));
}

/* Read one command's reply. <0: the connection is broken. */
static int read_one(struct kvr_l2_lane *ln, struct node *n, struct cmd *c)
{
	struct kvr_l2_rline l;
	struct kvr_l2_addr to;
	uint32_t slot;
	int rc, kind;

	if (c->asking) {
		rc = kvr__l2_rb_line(n, &l);
		if (rc < 0)
			return rc;
		rc = kvr__l2_rb_skip_rest(n, &l);
		if (rc < 0)
			return rc;
		c->asking = false;
	}
	rc = kvr__l2_rb_line(n, &l);
	if (rc < 0)
		return rc;
	if (l.type == '-') {
		kind = kvr_l2_resp_redirect(l.str, l.str_len, &slot, &to);
		if (kind > 0) {
			int id = kvr__l2_lane_node(ln, &to);

			if (id < 0) {
				cmd_fail(c);
				return 0;
			}
			if (kind == 1) {
				ln->slot_node[slot] = (int16_t)id;
				ln->need_refresh = true;
				bump(&ln->l2->st.moved, 1);
			} else {
				c->asking = true;
				c->node = id;
				bump(&ln->l2->st.ask, 1);
			}
			return 0; /* stays pending: next round */
		}
		count_refusal(ln, n, c, &l);
		cmd_fail(c);
		return 0;
	}
	c->done = true;
	c->res = KVR_L2_RES_OK;
	switch (c->op) {
	case C_EXISTS:
	case C_DEL:
		if (l.type != ':')
			goto proto;
		c->ival = l.num;
		return 0;
	case C_SET:
		if (l.type != '+')
			goto proto;
		return 0;
	case C_GETHDR:
		if (l.type != '$')
			goto proto;
		if (l.num <= 0) {
			/* GETRANGE of a missing key: "$0" and an empty line */
			c->res = KVR_L2_RES_MISS;
			return l.num == 0 ? kvr__l2_rb_read(n, NULL, 2) : 0;
		}
		if (l.num != KVR_L2_HDR_BYTES) {
			c->res = KVR_L2_RES_CORRUPT;
			return kvr__l2_rb_read(n, NULL, (size_t)l.num + 2);
		}
		rc = kvr__l2_rb_read(n, &c->hdr, sizeof(c->hdr));
		if (rc == 0)
			rc = kvr__l2_rb_read(n, NULL, 2);
		return rc;
	case C_GET:
		if (l.type != '$')
			goto proto;
		if (l.num < 0) {
			c->res = KVR_L2_RES_MISS;
			return 0;
		}
		if ((uint64_t)l.num != KVR_L2_HDR_BYTES + c->it->len) {
			c->res = KVR_L2_RES_CORRUPT;
			return kvr__l2_rb_read(n, NULL, (size_t)l.num + 2);
		}
		rc = kvr__l2_rb_read(n, &c->hdr, sizeof(c->hdr));
		if (rc == 0)
			rc = kvr__l2_rb_read_sum(ln, n, ln->pool + c->it->off,
						 c->it->len, &c->sum);
		if (rc == 0)
			rc = kvr__l2_rb_read(n, NULL, 2);
		return rc;
	default:
		break;
	}
proto:
	count_err(ln, KVR_L2_ERR_PROTO);
	cmd_fail(c);
	rc = kvr__l2_rb_skip_rest(n, &l);
	return rc;
}

/*
 * A command's replies. A SET through the temporary key has two (each
 * behind an ASKING reply when asked to): the SET's decides a redirect or
 * an error as for any command (after a redirected or refused SET the
 * script went to the same slot, found no whole temporary value and did
 * nothing; its reply is skipped). Then the publish script must answer :1.
 * :0 says the temporary value was not whole (nothing was published): the
 * chunk counts as failed. An error (TRYAGAIN while the slot migrates;
 * NOPERM when the ACL user may not run EVAL) sends the chunk again as a
 * plain SET of K (counted in `tryagain`); after a NOPERM or an unknown
 * EVAL this lane sends every chunk that way (logged once).
 */
static int read_reply(struct kvr_l2_lane *ln, struct node *n, struct cmd *c)
{
	bool ask = c->asking, ok;
	struct kvr_l2_rline l;
	char buf[288];
	int rc = read_one(ln, n, c);

	if (rc == 0 && c->op == C_SET && c->del_tmp) {
		/* The DEL behind a resent SET: its answer changes nothing
		 * (a temporary key it missed expires). */
		for (int i = ask ? 0 : 1; rc == 0 && i < 2; i++) {
			rc = kvr__l2_rb_line(n, &l);
			if (rc == 0)
				rc = kvr__l2_rb_skip_rest(n, &l);
		}
		return rc;
	}
	if (rc < 0 || c->op != C_SET || !c->tmp)
		return rc;
	ok = c->done && c->res == KVR_L2_RES_OK;
	if (ask) {
		rc = kvr__l2_rb_line(n, &l);
		if (rc == 0)
			rc = kvr__l2_rb_skip_rest(n, &l);
		if (rc < 0)
			return rc;
	}
	rc = kvr__l2_rb_line(n, &l);
	if (rc < 0)
		return rc;
	if (ok && l.type == '-') {
		if (refused_for_good(l.str, l.str_len) && !ln->no_eval) {
			ln->no_eval = true;
			kvr_log_warn("l2: node %s refused the publish script "
				     "(%.*s): uploads now hash each chunk "
				     "before sending it, which is slower; let "
				     "the L2 user run EVAL (docs/l2.md, "
				     "\"Redis ACL\")",
				     node_name(n, buf, sizeof(buf)),
				     (int)(l.str_len > 120 ? 120 : l.str_len),
				     l.str);
		}
		kvr__l2_cmd_resend_plain(c, ask);
		bump(&ln->l2->st.tryagain, 1);
	} else if (ok && (l.type != ':' || l.num != 1)) {
		/* :0 (the temporary value was not whole), or a shape no
		 * script of ours answers. */
		count_err(ln,
			  l.type == ':' ? KVR_L2_ERR_SERVER : KVR_L2_ERR_PROTO);
		cmd_fail(c);
	}
	return kvr__l2_rb_skip_rest(n, &l);
}

/*
 * Node @n broke at its @k-th command (@rc < 0): counted, the node marked
 * down, and its commands from the one that broke on failed.
 */
static void node_broke(struct kvr_l2_lane *ln, struct node *n, uint32_t k,
		       int rc)
{
	char why[96];

	count_err(ln, rc == -EBADMSG ? KVR_L2_ERR_PROTO : KVR_L2_ERR_IO);
	snprintf(why, sizeof(why), "%s", strerror(-rc));
	kvr__l2_node_down(ln, n, why);
	for (; k < n->nq; k++)
		cmd_fail(n->q[k]);
}

/*
 * One round's sends: every node's share written as one pipeline, all of
 * them before any reply is read, so each node works on its share while
 * the lane writes the next node's and reads the previous one's replies
 * (a GET's node fills its socket with values, a SET's node drains its
 * payloads). Driven one node after the other, a node sat idle until the
 * lane reached it and then started cold, and a stalled node held back
 * every node after it for up to --l2-io-ms. Replies never block a send: they
 * are small (a SET's), or Redis holds them in its output buffer (a
 * GET's). A node that cannot be reached or written fails its share and
 * gets nq 0, so the reads skip it.
 */
static void send_round(struct kvr_l2_lane *ln)
{
	for (uint32_t i = 0; i < ln->nnodes; i++) {
		struct node *n = &ln->nodes[i];
		int rc;

		if (!n->nq)
			continue;
		rc = kvr__l2_ensure_conn(ln, n);
		/* A cluster node in its backoff may have been replaced by a
		 * promoted replica: ask the map again (at most 20 times a
		 * second) rather than wait for its retry. */
		if (rc == -EAGAIN && ln->l2->cfg.kind == KVR_L2_CLUSTER)
			ln->need_refresh = true;
		if (rc == 0) {
			rc = send_node(ln, n);
			if (rc < 0)
				node_broke(ln, n, 0, rc);
		} else {
			for (uint32_t k = 0; k < n->nq; k++)
				cmd_fail(n->q[k]);
		}
		if (rc < 0)
			n->nq = 0;
	}
}

/*
 * Run cmds[0..nc) to completion: each ends done with a result. Rounds
 * repeat only for redirected commands.
 */
void kvr__l2_run_batch(struct kvr_l2_lane *ln, struct cmd *cmds, uint32_t nc)
{
	for (int round = 0; round < ROUNDS_MAX; round++) {
		bool pending = false;

		if (ln->need_refresh)
			kvr__l2_refresh_slots(ln);
		for (uint32_t i = 0; i < ln->nnodes; i++)
			ln->nodes[i].nq = 0;
		for (uint32_t i = 0; i < nc; i++) {
			struct cmd *c = &cmds[i];
			struct node *n;
			int id;

			if (c->done)
				continue;
			id = kvr__l2_pick_node(ln, c);
			if (id < 0 || (uint32_t)id >= ln->nnodes) {
				cmd_fail(c);
				continue;
			}
			n = &ln->nodes[id];
			n->q[n->nq++] = c;
			pending = true;
		}
		if (!pending)
			return;
		send_round(ln);
		for (uint32_t i = 0; i < ln->nnodes; i++) {
			struct node *n = &ln->nodes[i];
			int rc = 0;
			uint32_t k = 0;

			for (; rc == 0 && k < n->nq; k++)
				rc = read_reply(ln, n, n->q[k]);
			if (rc < 0)
				node_broke(ln, n, k - 1, rc);
		}
	}
	for (uint32_t i = 0; i < nc; i++)
		if (!cmds[i].done) {
			count_err(ln, KVR_L2_ERR_REDIRECT);
			cmd_fail(&cmds[i]);
		}
}

/* Room for @n commands (and their iovecs and per-node queues). */
int kvr__l2_reserve(struct kvr_l2_lane *ln, uint32_t n)
{
	if (n <= ln->cmd_cap)
		return 0;
	struct cmd *c = realloc(ln->cmds, n * sizeof(*c));

	if (!c)
		return -ENOMEM;
	ln->cmds = c;
	char *k = realloc(ln->keys, (size_t)n * KVR_L2_KEY_MAX);

	if (!k)
		return -ENOMEM;
	ln->keys = k;
	struct iovec *v = realloc(ln->iov, (size_t)n * 8 * sizeof(*v));

	if (!v)
		return -ENOMEM;
	ln->iov = v;
	for (uint32_t i = 0; i < KVR_L2_MAX_NODES; i++) {
		struct cmd **q = realloc(ln->nodes[i].q, n * sizeof(*q));

		if (!q)
			return -ENOMEM;
		ln->nodes[i].q = q;
	}
	ln->cmd_cap = n;
	return 0;
}

/*
 * The temporary key of a SET: "{K}:t:<lane tag>". The hash tag is K's
 * whole text (a prefix has no braces, l2_conf.c), so it is in K's cluster
 * slot and RENAME is never CROSSSLOT; checked anyway, false sends the SET
 * straight to K. The lane's random tag keeps two servers uploading the
 * same chunk from writing one temporary key.
 */
static bool set_tmp_key(struct kvr_l2_lane *ln, struct cmd *c)
{
	int tl = snprintf(c->tkey, sizeof(c->tkey), "{%s}:t:%016llx", c->key,
			  (unsigned long long)ln->tag);

	if (tl < 0 || (size_t)tl >= sizeof(c->tkey) ||
	    kvr_l2_slot(c->tkey, (size_t)tl) != kvr_l2_slot(c->key, c->klen))
		return false;
	c->tklen = (size_t)tl;
	c->tmp = true;
	return true;
}

/* A command for item @it of job @j. */
void kvr__l2_cmd_init(struct kvr_l2_lane *ln, struct cmd *c, int op,
		      const struct kvr_l2_job *j, struct kvr_l2_item *it,
		      uint32_t i)
{
	char *key = ln->keys + (size_t)i * KVR_L2_KEY_MAX;
	int kl = kvr_l2_key(ln->l2->cfg.prefix, j->ns_fp, &it->key, key,
			    KVR_L2_KEY_MAX);
	int pl = 0;

	memset(c, 0, offsetof(struct cmd, pre));
	c->op = op;
	c->it = it;
	c->key = key;
	c->klen = (size_t)kl;
	c->node = -1;
	switch (op) {
	case C_EXISTS:
		pl = snprintf(c->pre, sizeof(c->pre),
			      "*2\r\n$6\r\nEXISTS\r\n$%d\r\n%s\r\n", kl, key);
		break;
	case C_DEL:
		pl = snprintf(c->pre, sizeof(c->pre),
			      "*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n", kl, key);
		break;
	case C_GET:
		pl = snprintf(c->pre, sizeof(c->pre),
			      "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kl, key);
		break;
	case C_GETHDR:
		pl = snprintf(c->pre, sizeof(c->pre),
			      "*4\r\n$8\r\nGETRANGE\r\n$%d\r\n%s\r\n$1\r\n0\r\n"
			      "$2\r\n%u\r\n",
			      kl, key, KVR_L2_HDR_BYTES - 1);
		break;
	case C_SET:
		/* The header is made when the command is sent (set_hdr, or
		 * set_tmp_send after the payload when the lane hashes). */
		c->hdr.ns_fp = j->ns_fp;
		if (!it->has_sum && !ln->no_eval && set_tmp_key(ln, c)) {
			pl = snprintf(
			    c->pre, sizeof(c->pre),
			    "*5\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%llu"
			    "\r\n",
			    c->tklen, c->tkey,
			    (unsigned long long)(KVR_L2_HDR_BYTES + it->len));
			break;
		}
		pl = snprintf(c->pre, sizeof(c->pre),
			      "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%llu\r\n", kl,
			      key,
			      (unsigned long long)(KVR_L2_HDR_BYTES + it->len));
		break;
	}
	c->pre_len = (size_t)pl;
}
