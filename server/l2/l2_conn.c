/* SPDX-License-Identifier: MIT */
/*
 * l2_conn.c - connections of a lane: its node table, a socket per node (TCP or
 * UNIX, blocking with --l2-io-ms timeouts), AUTH, the buffered reader of
 * replies, the pipeline writer, and a node going down with its backoff.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/sum.h>

#include "l2_lane.h"

/*
 * The lane's index of node @a, added when new (a MOVED can name a node the
 * seeds did not). A new node starts disconnected with the shortest
 * backoff; it connects on first use. -ENOSPC past KVR_L2_MAX_NODES.
 */
int kvr__l2_lane_node(struct kvr_l2_lane *ln, const struct kvr_l2_addr *a)
{
	for (uint32_t i = 0; i < ln->nnodes; i++)
		if (strcmp(ln->nodes[i].a.host, a->host) == 0 &&
		    ln->nodes[i].a.port == a->port &&
		    strcmp(ln->nodes[i].a.path, a->path) == 0)
			return (int)i;
	if (ln->nnodes == KVR_L2_MAX_NODES)
		return -ENOSPC;
	/* Its queue and read buffer were sized by kvr__l2_reserve() already. */
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

/*
 * Node @n failed: close its socket, drop what its reader buffered, and
 * retry only after a backoff that doubles up to BACKOFF_MAX_MS (its
 * commands fail at once meanwhile). The tier logs the state change once;
 * in a cluster the slot map is asked again, since a failover moves slots.
 */
void kvr__l2_node_down(struct kvr_l2_lane *ln, struct node *n, const char *why)
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

/* @w bytes of the queue went out: skip the entries they covered and move
 * the start of a partly sent one. */
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
int kvr__l2_outq_flush(int fd, struct outq *q)
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
int kvr__l2_outq_pump(int fd, struct outq *q)
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

/* Send all of @iov (a command without payload pieces): the queue's flush
 * over a queue of @cnt entries. */
int kvr__l2_write_all(int fd, struct iovec *iov, int cnt)
{
	struct outq q = {iov, 0, (uint32_t)cnt};

	return kvr__l2_outq_flush(fd, &q);
}

/*
 * Read more of a reply into @n's buffer: rewind when it is empty, slide
 * the unread bytes to the front when the end is reached, and grow it
 * (doubling, up to RB_MAX) only when one reply line needs more. One recv
 * of what the socket has, bounded by SO_RCVTIMEO. Return: 0,
 * -ECONNRESET on EOF, -ETIMEDOUT past the timeout, -EBADMSG for a line
 * beyond RB_MAX, -ENOMEM, or -errno.
 */
int kvr__l2_rb_fill(struct node *n)
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
int kvr__l2_rb_line(struct node *n, struct kvr_l2_rline *l)
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
		rc = kvr__l2_rb_fill(n);
		if (rc < 0)
			return rc;
	}
}

/*
 * One recv(MSG_WAITALL) of up to @len bytes into @d, again after EINTR.
 * Return: the bytes received (> 0), -ECONNRESET when Redis closed,
 * -ETIMEDOUT when the socket's receive timeout passed, or -errno.
 */
static ssize_t recv_some(int fd, void *d, size_t len)
{
	for (;;) {
		ssize_t got = recv(fd, d, len, MSG_WAITALL);

		if (got > 0)
			return got;
		if (got == 0)
			return -ECONNRESET;
		if (errno != EINTR)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
	}
}

/* Exactly @len bytes into @dst (NULL: discard), buffered bytes first,
 * then straight from the socket: a payload lands in its pool slot. */
int kvr__l2_rb_read(struct node *n, void *dst, size_t len)
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
			rc = kvr__l2_rb_fill(n);
			if (rc < 0)
				return rc;
			take = rb->w - rb->r < len ? rb->w - rb->r : len;
			rb->r += take;
			len -= take;
			continue;
		}
		got = recv_some(n->fd, d, len);
		if (got < 0)
			return (int)got;
		d += got;
		len -= (size_t)got;
	}
	return 0;
}

/*
 * Exactly @len payload bytes into the pool at @dst, as kvr__l2_rb_read(),
 * hashed piece by piece as they land: each piece is hashed while it is in cache
 * and while Redis is already sending the next one. *sum: XXH3-64 of the
 * bytes as they sit in the slot.
 */
int kvr__l2_rb_read_sum(struct kvr_l2_lane *ln, struct node *n, uint8_t *dst,
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
		ssize_t got = recv_some(n->fd, dst + at, want);

		if (got < 0)
			return (int)got;
		kvr_sum_update(ln->sum, dst + at, (size_t)got);
		at += (size_t)got;
	}
	*sum = kvr_sum_digest(ln->sum);
	return 0;
}

/* A whole reply of any shape, skipped. */
int kvr__l2_rb_skip_rest(struct node *n, const struct kvr_l2_rline *l)
{
	if (l->type == '$' && l->num >= 0)
		return kvr__l2_rb_read(n, NULL, (size_t)l->num + 2);
	if (l->type == '*' && l->num > 0) {
		for (int64_t i = 0; i < l->num; i++) {
			struct kvr_l2_rline e;
			int rc = kvr__l2_rb_line(n, &e);

			if (rc < 0)
				return rc;
			rc = kvr__l2_rb_skip_rest(n, &e);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/*
 * A blocking socket to @a: a UNIX path, or the first address of host:port
 * that connects within @io_ms (a non-blocking connect and a poll, so a
 * black-holed address costs the timeout, not the kernel's minutes).
 * TCP_NODELAY (a pipeline's last command must not wait), and @io_ms as
 * SO_RCVTIMEO and SO_SNDTIMEO for every later read and write.
 */
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
		/* -ENOENT, which a TCP connect never returns: the name
		 * did not resolve (the caller says so, not "no route"). */
		if (getaddrinfo(a->host, port, &hints, &res) != 0)
			return -ENOENT;
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
	rc = kvr__l2_write_all(n->fd, &iov, 1);
	explicit_bzero(buf, sizeof(buf));
	if (rc < 0)
		return rc;
	rc = kvr__l2_rb_line(n, &l);
	if (rc < 0)
		return rc;
	if (l.type != '+')
		return -EACCES;
	return 0;
}

/*
 * Without a password: PING once, so that a node that needs one reads as
 * down (NOAUTH) instead of up with every command refused. -EACCES for
 * NOAUTH; any other answer (PONG, or an ACL's refusal of PING itself)
 * means the node serves us.
 */
static int ping_noauth(struct node *n)
{
	static const char q[] = "*1\r\n$4\r\nPING\r\n";
	struct iovec iov = {(void *)q, sizeof(q) - 1};
	struct kvr_l2_rline l;
	int rc = kvr__l2_write_all(n->fd, &iov, 1);

	if (rc == 0)
		rc = kvr__l2_rb_line(n, &l);
	if (rc == 0)
		rc = kvr__l2_rb_skip_rest(n, &l);
	if (rc < 0)
		return rc;
	if (l.type == '-' && l.str_len >= 6 && memcmp(l.str, "NOAUTH", 6) == 0)
		return -EACCES;
	return 0;
}

/* Connected, or -EAGAIN while the node's backoff runs. */
int kvr__l2_ensure_conn(struct kvr_l2_lane *ln, struct node *n)
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
		if (fd == -ENOENT && !n->a.path[0])
			snprintf(why, sizeof(why),
				 "host name does not resolve");
		else
			snprintf(why, sizeof(why), "connect: %s",
				 strerror(-fd));
		kvr__l2_node_down(ln, n, why);
		return fd;
	}
	n->fd = fd;
	n->rb.r = n->rb.w = 0;
	if (ln->l2->pass[0]) {
		rc = do_auth(ln, n);
		if (rc < 0) {
			count_err(ln, KVR_L2_ERR_CONNECT);
			kvr__l2_node_down(
			    ln, n,
			    rc == -EACCES ? "AUTH refused: check the password "
					    "in --l2-auth-file or "
					    "$" KVR_L2_AUTH_ENV
					  : "AUTH failed");
			return rc;
		}
	} else {
		rc = ping_noauth(n);
		if (rc < 0) {
			count_err(ln, KVR_L2_ERR_CONNECT);
			kvr__l2_node_down(
			    ln, n,
			    rc == -EACCES
				? "NOAUTH: the node needs a password; "
				  "put it in --l2-auth-file or "
				  "$" KVR_L2_AUTH_ENV
				: "PING failed");
			return rc;
		}
	}
	n->backoff_ms = BACKOFF_MIN_MS;
	if (!n->was_up && n->id >= 0)
		kvr__l2_node_state(ln->l2, n->id, 1, "connected");
	n->was_up = true;
	return 0;
}
