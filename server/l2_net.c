/* SPDX-License-Identifier: MIT */
/*
 * l2_net.c - an L2 lane: one thread, its own connections to Redis (one
 * node, or every master of a Redis Cluster), its own copy of the cluster
 * slot map, and a job queue the event loop fills. kvringd runs two lanes,
 * one for uploads and one for read-through, so a long upload never delays
 * a lookup that waits on L2.
 *
 * A job becomes a batch of commands. The batch is split per node, each
 * node's share is written as one pipeline (writev straight from the pool:
 * a SET sends the command prefix, the 64-byte header and the slot's
 * bytes, no copy), then its replies are read in order. A GET's payload is
 * read straight into its reserved pool slot. Payload sums are computed in
 * 256 KiB pieces overlapped with the transfer: a SET the lane hashes goes
 * to a temporary key and each piece is hashed right after it is sent, the
 * header following in a script that publishes it as K only if the whole
 * value arrived (set_tmp_send); a GET's sum as each piece lands. MOVED
 * updates the slot map (and asks for a CLUSTER SLOTS refresh), ASK resends once
 * with ASKING, each for a bounded number of rounds. A node that fails is closed
 * and marked down; it is retried after a backoff that doubles from 100 ms to 5
 * s, and its commands fail at once meanwhile (the loop carries on as L1 only).
 * Sockets are blocking with SO_RCVTIMEO/SO_SNDTIMEO (--l2-io-ms): this thread
 * may wait, the event loop never does.
 *
 * It never calls the store (DESIGN rule 3): the loop pinned or reserved
 * every span before submitting, and ends those owners when the job comes
 * back on the done queue.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/log.h>
#include <kvring/sum.h>

#include "l2_net.h"

#define RB_INIT	       (256u << 10)
#define RB_MAX	       (16u << 20)
#define ROUNDS_MAX     5
#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 5000u
/* Payload bytes are hashed in pieces this large: each piece is hashed
 * while it is still in cache, and between pieces the socket is fed. */
#define PIECE (256u << 10)
/* A value uploaded under its temporary key lives this long (ms) unless
 * the publish script behind it makes it the real key's value. */
#define TMP_TTL_MS "60000"

/*
 * The publish script of an upload through the temporary key (docs/l2.md,
 * "The upload sequence"): KEYS[1] the temporary key, KEYS[2] K, ARGV[1]
 * the real header, ARGV[2] the whole value's length. It publishes only a
 * temporary value of exactly that length, which only a SET that went
 * through can have left: a refused SET leaves no temporary key (or
 * another length), and then nothing is written, nothing is created and
 * the script answers 0. Atomic, as every script: no reader sees K half
 * made. 3.4 us of Redis CPU per call (warm, pipelined; measured with
 * INFO commandstats on 7.0), beside ~1 ms per 2 MiB chunk.
 */
#define PUBLISH_LUA                                                            \
	"local n=redis.call('STRLEN',KEYS[1]) "                                \
	"if n~=tonumber(ARGV[2]) then "                                        \
	"if n>0 then redis.call('DEL',KEYS[1]) end return 0 end "              \
	"redis.call('SETRANGE',KEYS[1],0,ARGV[1]) "                            \
	"redis.call('RENAME',KEYS[1],KEYS[2]) "                                \
	"redis.call('PERSIST',KEYS[2]) return 1"

enum cmd_op { C_EXISTS, C_SET, C_GETHDR, C_GET, C_DEL, C_SLOTS };

/* One command of a batch. Lives in the lane's scratch array. */
struct cmd {
	int op;
	struct kvr_l2_item *it;
	const char *key;
	size_t klen;
	struct kvr_l2_hdr hdr; /* SET: sent; GET/GETHDR: received */
	uint64_t sum;	       /* GET: XXH3-64 of what landed in the slot */
	size_t pre_len;
	int node; /* ASK target, else -1 */
	bool asking;
	bool done;
	bool hdr_ready; /* SET: hdr made (hashed once, even if resent) */
	bool tmp;	/* SET: through the temporary key (upload_tmp) */
	bool del_tmp;	/* SET: resent plain, DEL the temporary key after */
	int res;	/* enum kvr_l2_res once done */
	int64_t ival;
	size_t tklen, post_len, post2_len;
	char pre[224]; /* cmd_init clears everything before it */
	char tkey[KVR_L2_KEY_MAX + 24];
	char post[1024];
	char post2[64];
};

/* Buffered reader of one connection. */
struct rbuf {
	char *b;
	size_t cap, r, w;
};

struct node {
	int id; /* in the tier's node table */
	struct kvr_l2_addr a;
	int fd;
	bool was_up;
	uint64_t retry_ns;
	uint32_t backoff_ms;
	struct rbuf rb;
	struct cmd **q; /* this round's share of the batch */
	uint32_t nq;
};

struct kvr_l2_lane {
	struct kvr_l2 *l2;
	unsigned idx;
	pthread_t th;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct kvr_l2_job *head, *tail;
	bool stop;
	uint8_t *pool;
	struct node nodes[KVR_L2_MAX_NODES];
	uint32_t nnodes;
	int16_t slot_node[KVR_L2_SLOTS]; /* lane node index, -1 unknown */
	bool need_refresh;
	uint64_t refreshed_ns;
	struct cmd *cmds;
	uint32_t cmd_cap;
	char *keys; /* KVR_L2_KEY_MAX per command */
	struct iovec *iov;
	uint32_t iov_cap;
	struct kvr_sum_state *sum; /* payload sums in pieces */
	uint64_t tag;		   /* this lane's part of temporary keys */
	bool no_eval;		   /* a node refused EVAL: plain SETs only */
	bool told_refused;	   /* a refused command was logged */
};

static void count_err(struct kvr_l2_lane *ln, int kind)
{
	/* Relaxed: independent counters for the inspector. */
	atomic_fetch_add_explicit(&ln->l2->st.errors[kind], 1,
				  memory_order_relaxed);
}

static void bump(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* ---- nodes and connections ---- */

static int lane_node(struct kvr_l2_lane *ln, const struct kvr_l2_addr *a)
{
	for (uint32_t i = 0; i < ln->nnodes; i++)
		if (strcmp(ln->nodes[i].a.host, a->host) == 0 &&
		    ln->nodes[i].a.port == a->port &&
		    strcmp(ln->nodes[i].a.path, a->path) == 0)
			return (int)i;
	if (ln->nnodes == KVR_L2_MAX_NODES)
		return -ENOSPC;
	/* Its queue and read buffer were sized by reserve() already. */
	struct node *n = &ln->nodes[ln->nnodes];

	n->a = *a;
	n->fd = -1;
	n->was_up = false;
	n->retry_ns = 0;
	n->nq = 0;
	n->rb.r = n->rb.w = 0;
	n->id = kvr__l2_node_id(ln->l2, a);
	n->backoff_ms = BACKOFF_MIN_MS;
	return (int)ln->nnodes++;
}

static void node_down(struct kvr_l2_lane *ln, struct node *n, const char *why)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
	n->rb.r = n->rb.w = 0;
	n->retry_ns = kvr_clock_now_ns() + (uint64_t)n->backoff_ms * 1000000ull;
	n->backoff_ms = n->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							   : n->backoff_ms * 2;
	if (n->id >= 0)
		kvr__l2_node_state(ln->l2, n->id, 2, why);
	n->was_up = false;
	if (ln->l2->cfg.kind == KVR_L2_CLUSTER)
		ln->need_refresh = true;
}

/*
 * The unsent part of a pipeline: iov[at..k). Entries before @at are
 * gone; the one at @at may be partly sent (its base and length moved).
 */
struct outq {
	struct iovec *iov;
	uint32_t at, k;
};

static void outq_sent(struct outq *q, size_t w)
{
	while (q->at < q->k && w >= q->iov[q->at].iov_len) {
		w -= q->iov[q->at].iov_len;
		q->at++;
	}
	if (q->at < q->k) {
		q->iov[q->at].iov_base = (char *)q->iov[q->at].iov_base + w;
		q->iov[q->at].iov_len -= w;
	}
}

/* Send the whole queue; blocks (bounded by SO_SNDTIMEO). */
static int outq_flush(int fd, struct outq *q)
{
	while (q->at < q->k) {
		uint32_t cnt = q->k - q->at;
		ssize_t w = writev(fd, q->iov + q->at,
				   cnt > IOV_MAX ? IOV_MAX : (int)cnt);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		outq_sent(q, (size_t)w);
	}
	return 0;
}

/* Send what the socket takes now, never waiting. <0: broken. */
static int outq_pump(int fd, struct outq *q)
{
	while (q->at < q->k) {
		uint32_t cnt = q->k - q->at;
		struct msghdr m = {.msg_iov = q->iov + q->at,
				   .msg_iovlen = cnt > IOV_MAX ? IOV_MAX : cnt};
		ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		outq_sent(q, (size_t)w);
	}
	return 0;
}

static int write_all(int fd, struct iovec *iov, int cnt)
{
	struct outq q = {iov, 0, (uint32_t)cnt};

	return outq_flush(fd, &q);
}

static int rb_fill(struct node *n)
{
	struct rbuf *rb = &n->rb;
	ssize_t got;

	if (rb->r == rb->w)
		rb->r = rb->w = 0;
	if (rb->w == rb->cap && rb->r > 0) {
		memmove(rb->b, rb->b + rb->r, rb->w - rb->r);
		rb->w -= rb->r;
		rb->r = 0;
	}
	if (rb->w == rb->cap) {
		size_t cap = rb->cap ? rb->cap * 2 : RB_INIT;
		char *b;

		if (cap > RB_MAX)
			return -EBADMSG;
		b = realloc(rb->b, cap);
		if (!b)
			return -ENOMEM;
		rb->b = b;
		rb->cap = cap;
	}
	do
		got = recv(n->fd, rb->b + rb->w, rb->cap - rb->w, 0);
	while (got < 0 && errno == EINTR);
	if (got == 0)
		return -ECONNRESET;
	if (got < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	rb->w += (size_t)got;
	return 0;
}

/* The next reply line; its text stays valid until the next read. */
static int rb_line(struct node *n, struct kvr_l2_rline *l)
{
	for (;;) {
		long u =
		    kvr_l2_resp_line(n->rb.b + n->rb.r, n->rb.w - n->rb.r, l);
		int rc;

		if (u > 0) {
			n->rb.r += (size_t)u;
			return 0;
		}
		if (u != -EAGAIN)
			return -EBADMSG;
		rc = rb_fill(n);
		if (rc < 0)
			return rc;
	}
}

/* Exactly @len bytes into @dst (NULL: discard), buffered bytes first,
 * then straight from the socket: a payload lands in its pool slot. */
static int rb_read(struct node *n, void *dst, size_t len)
{
	struct rbuf *rb = &n->rb;
	size_t have = rb->w - rb->r, take = have < len ? have : len;
	char *d = dst;

	if (d)
		memcpy(d, rb->b + rb->r, take);
	rb->r += take;
	len -= take;
	if (d)
		d += take;
	while (len > 0) {
		ssize_t got;
		int rc;

		if (!d) {
			rc = rb_fill(n);
			if (rc < 0)
				return rc;
			take = rb->w - rb->r < len ? rb->w - rb->r : len;
			rb->r += take;
			len -= take;
			continue;
		}
		got = recv(n->fd, d, len, MSG_WAITALL);
		if (got == 0)
			return -ECONNRESET;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		d += got;
		len -= (size_t)got;
	}
	return 0;
}

/*
 * Exactly @len payload bytes into the pool at @dst, as rb_read(), hashed
 * piece by piece as they land: each piece is hashed while it is in cache
 * and while Redis is already sending the next one. *sum: XXH3-64 of the
 * bytes as they sit in the slot.
 */
static int rb_read_sum(struct kvr_l2_lane *ln, struct node *n, uint8_t *dst,
		       size_t len, uint64_t *sum)
{
	struct rbuf *rb = &n->rb;
	size_t have = rb->w - rb->r, take = have < len ? have : len;

	kvr_sum_reset(ln->sum);
	memcpy(dst, rb->b + rb->r, take);
	kvr_sum_update(ln->sum, dst, take);
	rb->r += take;
	for (size_t at = take; at < len;) {
		size_t want = len - at < PIECE ? len - at : PIECE;
		ssize_t got = recv(n->fd, dst + at, want, MSG_WAITALL);

		if (got == 0)
			return -ECONNRESET;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		kvr_sum_update(ln->sum, dst + at, (size_t)got);
		at += (size_t)got;
	}
	*sum = kvr_sum_digest(ln->sum);
	return 0;
}

/* A whole reply of any shape, skipped. */
static int rb_skip_rest(struct node *n, const struct kvr_l2_rline *l)
{
	if (l->type == '$' && l->num >= 0)
		return rb_read(n, NULL, (size_t)l->num + 2);
	if (l->type == '*' && l->num > 0) {
		for (int64_t i = 0; i < l->num; i++) {
			struct kvr_l2_rline e;
			int rc = rb_line(n, &e);

			if (rc < 0)
				return rc;
			rc = rb_skip_rest(n, &e);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int open_sock(const struct kvr_l2_addr *a, uint32_t io_ms)
{
	struct timeval tv = {.tv_sec = io_ms / 1000,
			     .tv_usec = (io_ms % 1000) * 1000};
	struct pollfd pfd;
	int fd = -1, rc, one = 1, err = 0;
	socklen_t el = sizeof(err);

	if (a->path[0]) {
		struct sockaddr_un un = {.sun_family = AF_UNIX};

		strcpy(un.sun_path, a->path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
			rc = -errno;
			close(fd);
			return rc;
		}
	} else {
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
					 .ai_flags = AI_NUMERICSERV};
		struct addrinfo *res;
		char port[8];

		snprintf(port, sizeof(port), "%u", a->port);
		if (getaddrinfo(a->host, port, &hints, &res) != 0)
			return -EHOSTUNREACH;
		fd = socket(res->ai_family,
			    SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			freeaddrinfo(res);
			return -errno;
		}
		rc = connect(fd, res->ai_addr, res->ai_addrlen);
		freeaddrinfo(res);
		if (rc < 0 && errno != EINPROGRESS) {
			rc = -errno;
			close(fd);
			return rc;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (rc < 0) {
			rc = poll(&pfd, 1, (int)io_ms);
			if (rc <= 0 ||
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) <
				0 ||
			    err) {
				close(fd);
				return err ? -err : -ETIMEDOUT;
			}
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
		/* Back to blocking: this thread waits, bounded below. */
		rc = fcntl(fd, F_GETFL);
		if (rc < 0 || fcntl(fd, F_SETFL, rc & ~O_NONBLOCK) < 0) {
			close(fd);
			return -errno;
		}
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Send AUTH and read its +OK. */
static int do_auth(struct kvr_l2_lane *ln, struct node *n)
{
	struct kvr_l2 *l2 = ln->l2;
	char buf[512];
	struct iovec iov;
	struct kvr_l2_rline l;
	int len, rc;

	if (l2->user[0])
		len = snprintf(
		    buf, sizeof(buf),
		    "*3\r\n$4\r\nAUTH\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
		    strlen(l2->user), l2->user, strlen(l2->pass), l2->pass);
	else
		len = snprintf(buf, sizeof(buf),
			       "*2\r\n$4\r\nAUTH\r\n$%zu\r\n%s\r\n",
			       strlen(l2->pass), l2->pass);
	if (len < 0 || (size_t)len >= sizeof(buf))
		return -ENAMETOOLONG;
	iov.iov_base = buf;
	iov.iov_len = (size_t)len;
	rc = write_all(n->fd, &iov, 1);
	explicit_bzero(buf, sizeof(buf));
	if (rc < 0)
		return rc;
	rc = rb_line(n, &l);
	if (rc < 0)
		return rc;
	if (l.type != '+')
		return -EACCES;
	return 0;
}

/* Connected, or -EAGAIN while the node's backoff runs. */
static int ensure_conn(struct kvr_l2_lane *ln, struct node *n)
{
	int fd, rc;
	char why[96];

	if (n->fd >= 0)
		return 0;
	if (kvr_clock_now_ns() < n->retry_ns)
		return -EAGAIN;
	if (!n->rb.b) {
		n->rb.b = malloc(RB_INIT);
		if (!n->rb.b)
			return -ENOMEM;
		n->rb.cap = RB_INIT;
	}
	fd = open_sock(&n->a, ln->l2->cfg.io_ms);
	if (fd < 0) {
		count_err(ln, KVR_L2_ERR_CONNECT);
		snprintf(why, sizeof(why), "connect: %s", strerror(-fd));
		node_down(ln, n, why);
		return fd;
	}
	n->fd = fd;
	n->rb.r = n->rb.w = 0;
	if (ln->l2->pass[0]) {
		rc = do_auth(ln, n);
		if (rc < 0) {
			count_err(ln, KVR_L2_ERR_CONNECT);
			node_down(ln, n,
				  rc == -EACCES
				      ? "AUTH refused: check the password "
					"in --l2-auth-file or "
					"$" KVR_L2_AUTH_ENV
				      : "AUTH failed");
			return rc;
		}
	}
	n->backoff_ms = BACKOFF_MIN_MS;
	if (!n->was_up && n->id >= 0)
		kvr__l2_node_state(ln->l2, n->id, 1, "connected");
	n->was_up = true;
	return 0;
}

/* ---- cluster slot map ---- */

/* CLUSTER SLOTS from the first node that answers; rebuilds the map. */
static void refresh_slots(struct kvr_l2_lane *ln)
{
	static const char q[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
	struct kvr_l2_range r[256];
	uint64_t now = kvr_clock_now_ns();

	if (now - ln->refreshed_ns < 50000000ull && ln->refreshed_ns)
		return; /* at most 20 refreshes a second */
	ln->refreshed_ns = now;
	for (uint32_t i = 0; i < ln->nnodes; i++) {
		struct node *n = &ln->nodes[i];
		struct iovec iov = {(void *)q, sizeof(q) - 1};
		long span;
		int nr, rc;

		if (ensure_conn(ln, n) < 0)
			continue;
		rc = write_all(n->fd, &iov, 1);
		for (span = -EAGAIN; rc == 0 && span == -EAGAIN;) {
			span = kvr_l2_resp_span(n->rb.b + n->rb.r,
						n->rb.w - n->rb.r);
			if (span == -EAGAIN)
				rc = rb_fill(n);
		}
		if (rc < 0 || span < 0) {
			count_err(ln,
				  rc < 0 ? KVR_L2_ERR_IO : KVR_L2_ERR_PROTO);
			node_down(ln, n, "CLUSTER SLOTS failed");
			continue;
		}
		nr = kvr_l2_resp_slots(n->rb.b + n->rb.r, (size_t)span, r, 256);
		n->rb.r += (size_t)span;
		if (nr <= 0) {
			count_err(ln, KVR_L2_ERR_PROTO);
			continue;
		}
		for (uint32_t s = 0; s < KVR_L2_SLOTS; s++)
			ln->slot_node[s] = -1;
		for (int k = 0; k < nr; k++) {
			struct kvr_l2_addr a = {.port = r[k].port};
			int id;

			/* An empty host means "the address you reached me
			 * at" (cluster-announce default). */
			strcpy(a.host, r[k].host[0] ? r[k].host : n->a.host);
			id = lane_node(ln, &a);
			if (id < 0)
				continue;
			for (uint32_t s = r[k].lo; s <= r[k].hi; s++)
				ln->slot_node[s] = (int16_t)id;
		}
		bump(&ln->l2->st.slot_refresh, 1);
		ln->need_refresh = false;
		return;
	}
}

/* ---- one batch of commands ---- */

static int pick_node(struct kvr_l2_lane *ln, struct cmd *c)
{
	int16_t id;

	if (ln->l2->cfg.kind != KVR_L2_CLUSTER)
		return 0;
	if (c->asking && c->node >= 0)
		return c->node;
	id = ln->slot_node[kvr_l2_slot(c->key, c->klen)];
	return id >= 0 ? id : 0;
}

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
		rc = at < len ? outq_pump(n->fd, q) : 0;
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
		rc = outq_flush(n->fd, q);
		if (rc < 0)
			return rc;
		kvr_sum_reset(ln->sum);
		for (size_t at = 0; at < len;) {
			size_t step = len - at < PIECE ? len - at : PIECE;
			struct outq one = {q->iov, 0, 1};

			q->iov[0] = (struct iovec){p + at, step};
			rc = outq_flush(n->fd, &one);
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
	return outq_flush(n->fd, &q);
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

/* An error reply @l to command @c that is no redirect: counted by kind,
 * and, the first time a node refuses a command for good, logged once
 * with what to do. */
static void count_refusal(struct kvr_l2_lane *ln, const struct node *n,
			  const struct cmd *c, const struct kvr_l2_rline *l)
{
	static const char *const names[] = {"EXISTS", "SET", "GETRANGE",
					    "GET",    "DEL", "CLUSTER"};
	bool oom = l->str_len >= 3 && memcmp(l->str, "OOM", 3) == 0;
	char buf[288];

	count_err(ln, oom ? KVR_L2_ERR_OOM : KVR_L2_ERR_SERVER);
	if (oom || ln->told_refused || !refused_for_good(l->str, l->str_len))
		return;
	ln->told_refused = true;
	kvr_log_warn("l2: node %s refused %s (%.*s): those commands fail "
		     "(counted in errors.server) until the L2 user may run "
		     "the commands docs/l2.md lists (\"Redis ACL\")",
		     node_name(n, buf, sizeof(buf)), names[c->op],
		     (int)(l->str_len > 120 ? 120 : l->str_len), l->str);
}

/* Read one command's reply. <0: the connection is broken. */
static int read_one(struct kvr_l2_lane *ln, struct node *n, struct cmd *c)
{
	struct kvr_l2_rline l;
	struct kvr_l2_addr to;
	uint32_t slot;
	int rc, kind;

	if (c->asking) {
		rc = rb_line(n, &l);
		if (rc < 0)
			return rc;
		rc = rb_skip_rest(n, &l);
		if (rc < 0)
			return rc;
		c->asking = false;
	}
	rc = rb_line(n, &l);
	if (rc < 0)
		return rc;
	if (l.type == '-') {
		kind = kvr_l2_resp_redirect(l.str, l.str_len, &slot, &to);
		if (kind > 0) {
			int id = lane_node(ln, &to);

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
			return l.num == 0 ? rb_read(n, NULL, 2) : 0;
		}
		if (l.num != KVR_L2_HDR_BYTES) {
			c->res = KVR_L2_RES_CORRUPT;
			return rb_read(n, NULL, (size_t)l.num + 2);
		}
		rc = rb_read(n, &c->hdr, sizeof(c->hdr));
		if (rc == 0)
			rc = rb_read(n, NULL, 2);
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
			return rb_read(n, NULL, (size_t)l.num + 2);
		}
		rc = rb_read(n, &c->hdr, sizeof(c->hdr));
		if (rc == 0)
			rc = rb_read_sum(ln, n, ln->pool + c->it->off,
					 c->it->len, &c->sum);
		if (rc == 0)
			rc = rb_read(n, NULL, 2);
		return rc;
	default:
		break;
	}
proto:
	count_err(ln, KVR_L2_ERR_PROTO);
	cmd_fail(c);
	rc = rb_skip_rest(n, &l);
	return rc;
}

/*
 * A chunk whose publish script was not run (TRYAGAIN while its slot
 * migrates, or a node that refuses scripts) is sent again, in the next
 * round, as one plain SET of K with the header its first send computed,
 * to the node that answered (ASKING again if it was asked to), followed
 * by a DEL of the temporary key its first SET left there.
 */
static void cmd_resend_plain(struct cmd *c, bool ask)
{
	int pl = snprintf(c->pre, sizeof(c->pre),
			  "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%llu\r\n", c->klen,
			  c->key,
			  (unsigned long long)(KVR_L2_HDR_BYTES + c->it->len));

	c->pre_len = (size_t)pl;
	pl = snprintf(c->post, sizeof(c->post),
		      "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", c->tklen, c->tkey);
	c->post_len = (size_t)pl;
	c->del_tmp = true;
	c->tmp = false;
	c->done = false;
	c->asking = ask;
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
			rc = rb_line(n, &l);
			if (rc == 0)
				rc = rb_skip_rest(n, &l);
		}
		return rc;
	}
	if (rc < 0 || c->op != C_SET || !c->tmp)
		return rc;
	ok = c->done && c->res == KVR_L2_RES_OK;
	if (ask) {
		rc = rb_line(n, &l);
		if (rc == 0)
			rc = rb_skip_rest(n, &l);
		if (rc < 0)
			return rc;
	}
	rc = rb_line(n, &l);
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
		cmd_resend_plain(c, ask);
		bump(&ln->l2->st.tryagain, 1);
	} else if (ok && (l.type != ':' || l.num != 1)) {
		/* :0 (the temporary value was not whole), or a shape no
		 * script of ours answers. */
		count_err(ln,
			  l.type == ':' ? KVR_L2_ERR_SERVER : KVR_L2_ERR_PROTO);
		cmd_fail(c);
	}
	return rb_skip_rest(n, &l);
}

/*
 * Run cmds[0..nc) to completion: each ends done with a result. Rounds
 * repeat only for redirected commands.
 */
static void run_batch(struct kvr_l2_lane *ln, struct cmd *cmds, uint32_t nc)
{
	for (int round = 0; round < ROUNDS_MAX; round++) {
		bool pending = false;

		if (ln->need_refresh)
			refresh_slots(ln);
		for (uint32_t i = 0; i < ln->nnodes; i++)
			ln->nodes[i].nq = 0;
		for (uint32_t i = 0; i < nc; i++) {
			struct cmd *c = &cmds[i];
			struct node *n;
			int id;

			if (c->done)
				continue;
			id = pick_node(ln, c);
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
		for (uint32_t i = 0; i < ln->nnodes; i++) {
			struct node *n = &ln->nodes[i];
			uint32_t k = 0;
			int rc;

			if (!n->nq)
				continue;
			rc = ensure_conn(ln, n);
			/* A cluster node in its backoff may have been replaced
			 * by a promoted replica: ask the map again (at most 20
			 * times a second) rather than wait for its retry. */
			if (rc == -EAGAIN && ln->l2->cfg.kind == KVR_L2_CLUSTER)
				ln->need_refresh = true;
			if (rc == 0) {
				rc = send_node(ln, n);
				for (; rc == 0 && k < n->nq; k++)
					rc = read_reply(ln, n, n->q[k]);
				if (rc < 0) {
					char why[96];

					count_err(ln, rc == -EBADMSG
							  ? KVR_L2_ERR_PROTO
							  : KVR_L2_ERR_IO);
					snprintf(why, sizeof(why), "%s",
						 strerror(-rc));
					node_down(ln, n, why);
					if (k > 0)
						k--; /* the one that broke */
				}
			}
			if (rc < 0)
				for (; k < n->nq; k++)
					cmd_fail(n->q[k]);
		}
	}
	for (uint32_t i = 0; i < nc; i++)
		if (!cmds[i].done) {
			count_err(ln, KVR_L2_ERR_REDIRECT);
			cmd_fail(&cmds[i]);
		}
}

/* Room for @n commands (and their iovecs and per-node queues). */
static int reserve(struct kvr_l2_lane *ln, uint32_t n)
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
static void cmd_init(struct kvr_l2_lane *ln, struct cmd *c, int op,
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

/* Delete the keys of items marked corrupt (a value never served twice). */
static void delete_corrupt(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	uint32_t nc = 0;

	for (uint32_t i = 0; i < j->n; i++)
		if (j->it[i].res == KVR_L2_RES_CORRUPT)
			cmd_init(ln, &ln->cmds[nc++], C_DEL, j, &j->it[i], i);
	if (!nc)
		return;
	run_batch(ln, ln->cmds, nc);
	for (uint32_t i = 0; i < nc; i++)
		if (ln->cmds[i].res == KVR_L2_RES_OK && ln->cmds[i].ival > 0)
			bump(&ln->l2->st.deleted, 1);
}

static void run_put(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	uint32_t nc = 0;
	uint64_t bytes = 0, done = 0, exist = 0, fail = 0;

	for (uint32_t i = 0; i < j->n; i++)
		cmd_init(ln, &ln->cmds[i], C_EXISTS, j, &j->it[i], i);
	run_batch(ln, ln->cmds, j->n);
	for (uint32_t i = 0; i < j->n; i++) {
		struct cmd *c = &ln->cmds[i];

		if (c->res != KVR_L2_RES_OK)
			j->it[i].res = KVR_L2_RES_FAIL;
		else if (c->ival > 0)
			j->it[i].res = KVR_L2_RES_EXISTS;
		else
			j->it[i].res = -1; /* to send */
	}
	for (uint32_t i = 0; i < j->n; i++)
		if (j->it[i].res == -1)
			cmd_init(ln, &ln->cmds[nc++], C_SET, j, &j->it[i], i);
	run_batch(ln, ln->cmds, nc);
	for (uint32_t i = 0; i < nc; i++) {
		struct cmd *c = &ln->cmds[i];

		c->it->res =
		    c->res == KVR_L2_RES_OK ? KVR_L2_RES_OK : KVR_L2_RES_FAIL;
	}
	for (uint32_t i = 0; i < j->n; i++) {
		if (j->it[i].res == KVR_L2_RES_OK) {
			done++;
			bytes += j->it[i].len;
		} else if (j->it[i].res == KVR_L2_RES_EXISTS) {
			exist++;
		} else {
			fail++;
		}
	}
	bump(&ln->l2->st.up_chunks, done);
	bump(&ln->l2->st.up_bytes, bytes);
	bump(&ln->l2->st.up_exists, exist);
	bump(&ln->l2->st.up_failed, fail);
}

static void run_probe(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	for (uint32_t i = 0; i < j->n; i++)
		cmd_init(ln, &ln->cmds[i], C_GETHDR, j, &j->it[i], i);
	run_batch(ln, ln->cmds, j->n);
	for (uint32_t i = 0; i < j->n; i++) {
		struct cmd *c = &ln->cmds[i];
		struct kvr_l2_item *it = &j->it[i];

		it->res = c->res;
		if (c->res == KVR_L2_RES_OK) {
			if (kvr_l2_hdr_check(&c->hdr, j->ns_fp, &it->key) < 0 ||
			    c->hdr.len == 0)
				it->res = KVR_L2_RES_CORRUPT;
			else
				it->len = c->hdr.len;
		}
	}
	delete_corrupt(ln, j);
}

static void run_load(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	uint64_t bytes = 0, n = 0;

	for (uint32_t i = 0; i < j->n; i++)
		cmd_init(ln, &ln->cmds[i], C_GET, j, &j->it[i], i);
	run_batch(ln, ln->cmds, j->n);
	for (uint32_t i = 0; i < j->n; i++) {
		struct cmd *c = &ln->cmds[i];
		struct kvr_l2_item *it = &j->it[i];

		it->res = c->res;
		if (c->res != KVR_L2_RES_OK)
			continue;
		/* Verified before the loop may publish it: the header must
		 * name this key and namespace, and the bytes that landed in
		 * the slot must hash to the header's sum. */
		if (kvr_l2_hdr_check(&c->hdr, j->ns_fp, &it->key) < 0 ||
		    c->hdr.len != it->len || c->sum != c->hdr.sum) {
			it->res = KVR_L2_RES_CORRUPT;
			continue;
		}
		it->sum = c->sum;
		it->has_sum = 1;
		n++;
		bytes += it->len;
	}
	bump(&ln->l2->st.down_chunks, n);
	bump(&ln->l2->st.down_bytes, bytes);
	delete_corrupt(ln, j);
}

static void run_job(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	if (reserve(ln, j->n) < 0) {
		for (uint32_t i = 0; i < j->n; i++)
			j->it[i].res = KVR_L2_RES_FAIL;
		return;
	}
	if (ln->l2->cfg.kind == KVR_L2_CLUSTER && !ln->refreshed_ns)
		ln->need_refresh = true;
	switch (j->kind) {
	case KVR_L2_JOB_PUT:
		run_put(ln, j);
		break;
	case KVR_L2_JOB_PROBE:
		run_probe(ln, j);
		break;
	case KVR_L2_JOB_LOAD:
		run_load(ln, j);
		break;
	}
}

static void *lane_main(void *arg)
{
	struct kvr_l2_lane *ln = arg;
	struct kvr_l2_job *j;

	for (;;) {
		pthread_mutex_lock(&ln->lock);
		while (!ln->stop && !ln->head)
			pthread_cond_wait(&ln->cv, &ln->lock);
		if (ln->stop) {
			pthread_mutex_unlock(&ln->lock);
			return NULL;
		}
		j = ln->head;
		ln->head = j->next;
		if (!ln->head)
			ln->tail = NULL;
		pthread_mutex_unlock(&ln->lock);
		j->next = NULL;
		run_job(ln, j);
		kvr__l2_done(ln->l2, j);
	}
}

int kvr__l2_lane_create(struct kvr_l2 *l2, unsigned idx,
			struct kvr_l2_lane **out)
{
	struct kvr_l2_lane *ln = calloc(1, sizeof(*ln));
	int rc;

	if (!ln)
		return -ENOMEM;
	ln->l2 = l2;
	ln->idx = idx;
	ln->pool = (uint8_t *)(uintptr_t)l2->pool;
	for (uint32_t s = 0; s < KVR_L2_SLOTS; s++)
		ln->slot_node[s] = -1;
	pthread_mutex_init(&ln->lock, NULL);
	pthread_cond_init(&ln->cv, NULL);
	ln->sum = kvr_sum_create();
	if (getrandom(&ln->tag, sizeof(ln->tag), GRND_NONBLOCK) !=
	    sizeof(ln->tag))
		ln->tag = kvr_clock_now_ns() ^ ((uint64_t)getpid() << 40) ^ idx;
	rc = ln->sum ? reserve(ln, 64) : -ENOMEM;
	for (uint32_t i = 0; rc == 0 && i < l2->cfg.nseeds; i++)
		if (lane_node(ln, &l2->cfg.seeds[i]) < 0)
			rc = -ENOMEM;
	if (rc == 0) {
		rc = -pthread_create(&ln->th, NULL, lane_main, ln);
		ln->started = rc == 0;
	}
	if (rc < 0) {
		kvr__l2_lane_destroy(ln);
		return rc;
	}
	*out = ln;
	return 0;
}

void kvr__l2_lane_submit(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&ln->lock);
	if (ln->tail)
		ln->tail->next = j;
	else
		ln->head = j;
	ln->tail = j;
	pthread_cond_signal(&ln->cv);
	pthread_mutex_unlock(&ln->lock);
}

void kvr__l2_lane_destroy(struct kvr_l2_lane *ln)
{
	struct kvr_l2_job *j, *next;

	if (!ln)
		return;
	pthread_mutex_lock(&ln->lock);
	ln->stop = true;
	pthread_cond_signal(&ln->cv);
	pthread_mutex_unlock(&ln->lock);
	if (ln->started)
		pthread_join(ln->th, NULL);
	for (j = ln->head; j; j = next) {
		next = j->next;
		for (uint32_t i = 0; i < j->n; i++)
			j->it[i].res = KVR_L2_RES_FAIL;
		kvr__l2_done(ln->l2, j);
	}
	for (uint32_t i = 0; i < KVR_L2_MAX_NODES; i++) {
		if (i < ln->nnodes && ln->nodes[i].fd >= 0)
			close(ln->nodes[i].fd);
		free(ln->nodes[i].rb.b);
		free(ln->nodes[i].q);
	}
	pthread_mutex_destroy(&ln->lock);
	pthread_cond_destroy(&ln->cv);
	free(ln->cmds);
	free(ln->keys);
	free(ln->iov);
	kvr_sum_destroy(ln->sum);
	free(ln);
}
