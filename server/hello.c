/* SPDX-License-Identifier: MIT */
/*
 * The handshake of a new worker socket: read one HELLO frame (bounded size,
 * bounded time), check its version and fields, check the peer's
 * credentials (SO_PEERCRED uid, --group gid, SO_PEERGROUPS), register its
 * namespace, claim a channel, open its doorbells and a pidfd, and send the
 * WELCOME with the fds (SCM_RIGHTS): the control segment read-only, the
 * two doorbells, the channel's own block and the pool.
 * Any refusal sends a WELCOME with a negative status and a reason that
 * says what to do, then closes: a caller never learns of it by timing out.
 *
 * This file does not serve requests (disp.c, tport_ring.c, tport_sock.c) or
 * clean up after a worker (chan.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/log.h>
#include <kvring/proc.h>

#include "chan.h"
#include "tport_sock.h"
#include "tport_ring.h"
#include "hello.h"
#include "ns.h"
#include "uring.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

/* Send one frame with optional fds; the socket is non-blocking and fresh,
 * so a welcome (304 bytes) always fits in its buffer. */
static int send_frame(int sock, uint32_t type, const void *body, size_t len,
		      const int *fds, unsigned nfds)
{
	struct kvr_frame f = {.len = (uint32_t)len, .type = type};
	struct iovec iov[2] = {{&f, sizeof(f)}, {(void *)body, len}};
	union {
		char buf[CMSG_SPACE(5 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
	struct cmsghdr *cm;
	ssize_t n;

	if (nfds) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	n = sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return n == (ssize_t)(sizeof(f) + len) ? 0 : -EAGAIN;
}

/* The fields every WELCOME carries, refusal or not: a worker checks magic
 * and version before it believes the status (kvr_welcome_init, the one
 * builder, beside its decoder in lib/proto.c). */
static void welcome_base(const struct kvr_srv *s, struct kvr_welcome *w)
{
	kvr_welcome_init(w, 0, s->boot_id);
}

/* Refuse @c: a WELCOME with @status and the reason, then close. */
static void refuse(struct kvr_srv *s, struct kvr_conn *c, int status,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void refuse(struct kvr_srv *s, struct kvr_conn *c, int status,
		   const char *fmt, ...)
{
	struct kvr_welcome w;
	va_list ap;

	welcome_base(s, &w);
	w.status = status;
	va_start(ap, fmt);
	vsnprintf(w.reason, sizeof(w.reason), fmt, ap);
	va_end(ap);
	kvr_log_peer(KVR_LOG_WARN, c->pid,
		     "refused worker pid %d uid %u: %s (%s)", (int)c->pid,
		     (unsigned)c->uid, w.reason, kvr_strerror(status));
	(void)send_frame(c->sock, KVR_FRAME_WELCOME, &w, sizeof(w), NULL, 0);
	s->g.handshake_refused++;
	kvr__chan_close(s, c, "refused", false);
}

/*
 * Make room for one more handshake of @uid: a uid at its own limit
 * (KVR_SRV_PENDING_PER_UID) loses its oldest pending socket, and a full
 * table (KVR_SRV_PENDING_MAX) loses the oldest pending socket of anyone.
 * A silent or slow peer therefore never keeps a new one out; it can only
 * push out its own (or, once the table is full, the oldest) handshakes,
 * and real clients finish theirs within microseconds. O(connections),
 * once per accept, never per request.
 */
struct kvr_conn *kvr__hello_victim(struct kvr_conn *conns, uint32_t nconns,
				   uint32_t npending, uid_t uid)
{
	struct kvr_conn *old_uid = NULL, *old_any = NULL;
	uint32_t n_uid = 0;

	for (uint32_t i = 0; i < nconns; i++) {
		struct kvr_conn *c = &conns[i];

		if (c->state != KVR_CONN_HELLO)
			continue;
		if (!old_any || c->accepted_ns < old_any->accepted_ns)
			old_any = c;
		if (c->uid != uid)
			continue;
		n_uid++;
		if (!old_uid || c->accepted_ns < old_uid->accepted_ns)
			old_uid = c;
	}
	if (n_uid >= KVR_SRV_PENDING_PER_UID)
		return old_uid;
	if (npending >= KVR_SRV_PENDING_MAX)
		return old_any;
	return NULL;
}

static void make_pending_room(struct kvr_srv *s, uid_t uid)
{
	struct kvr_conn *victim;
	char b;

	/* Each pass ends one pending handshake (served or dropped), so the
	 * bound only guards against a bug. */
	for (uint32_t pass = 0; pass <= KVR_SRV_PENDING_MAX; pass++) {
		victim =
		    kvr__hello_victim(s->conns, s->nconns, s->npending, uid);
		if (!victim)
			return;
		/* A hello already waiting in the victim's socket (its poll
		 * completion is just not reaped yet) is served now rather
		 * than thrown away: only the silent are dropped. */
		if (victim->hlen == 0 &&
		    recv(victim->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
			kvr__hello_readable(s, victim);
			continue;
		}
		kvr_log_peer(
		    KVR_LOG_WARN, victim->pid,
		    "handshake table: dropped the oldest pending "
		    "handshake (pid %d uid %u, %zu bytes of hello in "
		    "%llu ms) to admit a new connection of uid %u",
		    (int)victim->pid, (unsigned)victim->uid, victim->hlen,
		    (unsigned long long)((s->now_ns - victim->accepted_ns) /
					 1000000u),
		    (unsigned)uid);
		s->g.handshake_refused++;
		kvr__chan_close(s, victim, "handshake dropped for a newer one",
				false);
	}
}

/*
 * A socket from the multishot accept. Connections in the handshake are
 * limited per uid and in total (make_pending_room) so that a flood of
 * silent clients cannot take every slot; each gets a first-byte deadline
 * and a whole-hello deadline that housekeeping enforces. The credentials
 * are read first: SO_PEERCRED describes the process that called connect(),
 * which is the one the server will watch and the uid the limit counts.
 */
void kvr__hello_accepted(struct kvr_srv *s, int fd)
{
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);
	struct kvr_conn *c = NULL;

	/* The credentials of the process that called connect(). */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		cred.pid = 0;
		cred.uid = (uid_t)-1;
		cred.gid = (gid_t)-1;
	}
	if (!s->stopping) {
		make_pending_room(s, cred.uid);
		c = kvr__chan_conn_alloc(s);
	}
	if (!c) {
		/* No slot: say so instead of letting the client time out. */
		struct kvr_welcome w;

		welcome_base(s, &w);
		w.status = s->stopping ? -ESHUTDOWN : -EBUSY;
		snprintf(w.reason, sizeof(w.reason), "%s",
			 s->stopping ? "kvringd is shutting down"
				     : "too many connections in progress; "
				       "retry, or raise --max-workers");
		(void)send_frame(fd, KVR_FRAME_WELCOME, &w, sizeof(w), NULL, 0);
		s->g.handshake_refused++;
		close(fd);
		return;
	}
	c->sock = fd;
	c->pid = cred.pid;
	c->uid = cred.uid;
	c->gid = cred.gid;
	c->hlen = 0;
	c->deadline_ns = s->now_ns + (uint64_t)s->cfg.handshake_ms * 1000000u;
	c->accepted_ns = s->now_ns;
	c->ns_id = 0;
	c->ops = &kvr__hello_ops;
	c->state = KVR_CONN_HELLO;
	s->npending++;
	kvr_log_peer(KVR_LOG_DEBUG, c->pid,
		     "connection %u accepted: pid %d uid %u gid %u, hello "
		     "expected within %u ms",
		     c->idx, (int)c->pid, (unsigned)c->uid, (unsigned)c->gid,
		     s->cfg.handshake_ms);
	kvr__uring_poll(s, fd, POLLIN | POLLRDHUP,
			kvr_tag_make(KVR_TAG_SOCK, c->idx, c->gen), true);
}

/* Whether the peer is in @gid through its supplementary groups. */
static bool peer_in_group(int sock, gid_t gid)
{
	gid_t groups[256];
	socklen_t len = sizeof(groups);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return false;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/*
 * The access rule (docs/config.md): same uid as the server, or root with
 * --allow-root, or a member of --group. The socket file's mode is a first
 * barrier; this check holds even if someone loosens it.
 */
static bool peer_allowed(const struct kvr_srv *s, const struct kvr_conn *c)
{
	if (c->uid == s->uid)
		return true;
	if (s->cfg.allow_root && c->uid == 0)
		return true;
	if (s->cfg.have_group &&
	    (c->gid == s->cfg.gid || peer_in_group(c->sock, s->cfg.gid)))
		return true;
	return false;
}

/* A pidfd turns the worker's exit into a poll event at once, even if it
 * leaked its socket to a child. Old kernels return -ENOSYS: the socket
 * hang-up then stands alone, which is as quick for a dead process. */
static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	long fd = syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0)
		return (int)fd;
	return -errno;
#else
	(void)pid;
	return -ENOSYS;
#endif
}

static const char *transport_name(uint32_t transport)
{
	switch (transport) {
	case KVR_TRANSPORT_COPY:
		return "copy";
	case KVR_TRANSPORT_MEMFD:
		return "memfd";
	default:
		return "shm";
	}
}

/* Everything after a valid hello from an allowed peer. */
static void admit(struct kvr_srv *s, struct kvr_conn *c,
		  const struct kvr_hello *h)
{
	struct kvr_welcome w;
	int fds[5], rc;
	unsigned nfds = 4;
	bool copy;

	c->ns_id = kvr__ns_register(s, &h->ns);
	if (!c->ns_id) {
		refuse(s, c, -ENOSPC,
		       "all %u model layouts kvringd can hold are in use by "
		       "connected workers or pinned objects; retry when one "
		       "disconnects",
		       KVR_SRV_NS_MAX);
		return;
	}
	/* The one place the transport is decided (DESIGN rule 4): from
	 * here on the connection is served through c->ops. */
	copy =
	    (h->flags & KVR_HELLO_WANT_COPY) || s->backend == KVR_POOL_PRIVATE;
	c->ops = copy ? &kvr__tport_sock_ops : &kvr__tport_ring_ops;
	c->transport = copy			      ? KVR_TRANSPORT_COPY
		       : s->backend == KVR_POOL_MEMFD ? KVR_TRANSPORT_MEMFD
						      : KVR_TRANSPORT_SHM;
	if (kvr_proc_start_time(c->pid, &c->pid_start) < 0)
		c->pid_start = 0;
	rc = kvr_bell_open(&c->req_efd);
	if (rc == 0)
		rc = kvr_bell_open(&c->resp_efd);
	if (rc == 0)
		rc = c->ops->init(s, c);
	if (rc < 0) {
		refuse(s, c, rc, "server out of resources (%s)",
		       kvr_strerror(rc));
		return;
	}
	c->pidfd = open_pidfd(c->pid);
	if (c->pidfd < 0) {
		kvr_log_debug("pidfd for pid %d: %s; relying on socket "
			      "hang-up",
			      (int)c->pid, kvr_strerror(c->pidfd));
		c->pidfd = -1;
	}
	rc = kvr__chan_claim(s, c);
	if (rc < 0 && rc != -EBUSY) {
		refuse(s, c, rc,
		       "server out of resources for a channel block (%s); "
		       "free memory or lower --ring-bytes",
		       kvr_strerror(rc));
		return;
	}
	if (rc < 0) {
		refuse(s, c, -EBUSY,
		       "all %u channels are in use; retry later or raise "
		       "--max-workers",
		       s->geom.max_channels);
		return;
	}
	/* Leases bind to who the server established this peer is. */
	(void)kvr_store_channel_open(s->store, (uint32_t)c->chan, c->ns_id,
				     (uint32_t)c->uid);

	welcome_base(s, &w);
	w.status = 0;
	w.transport = c->shm->transport;
	w.channel = (uint32_t)c->chan;
	w.ns_id = c->ns_id;
	w.pool_bytes = s->cfg.pool_bytes;
	w.ctl_bytes = s->ctl.bytes;
	w.channel_bytes = s->geom.channel_bytes;
	w.align = kvr_store_align(s->store);
	w.max_keys = s->max_keys;
	w.req_ring_cap = s->geom.req_ring_cap;
	w.resp_ring_cap = s->geom.resp_ring_cap;
	w.heartbeat_ms = s->cfg.heartbeat_ms;
	w.lease_ms = s->cfg.lease_ms;
	if (s->backend == KVR_POOL_SHM && !copy)
		snprintf(w.pool_name, sizeof(w.pool_name), "%s", s->pool.name);
	/* The control segment read-only, the doorbells, this channel's own
	 * block, and the pool (docs/protocol.md, "Welcome"). */
	fds[0] = s->ctl_ro_fd;
	fds[1] = c->req_efd;
	fds[2] = c->resp_efd;
	fds[3] = kvr_seg_fd(&c->blk);
	if (!copy)
		fds[nfds++] = kvr_seg_fd(&s->pool);
	rc = send_frame(c->sock, KVR_FRAME_WELCOME, &w, sizeof(w), fds, nfds);
	if (rc < 0) {
		kvr__chan_close(s, c, "welcome could not be sent", false);
		return;
	}
	s->npending--;
	kvr__chan_activate(s, c);
	c->ops->start(s, c);
	kvr__uring_poll(s, c->req_efd, POLLIN,
			kvr_tag_make(KVR_TAG_BELL, c->idx, c->gen), true);
	if (c->pidfd >= 0)
		kvr__uring_poll(s, c->pidfd, POLLIN,
				kvr_tag_make(KVR_TAG_PIDFD, c->idx, c->gen),
				false);
	kvr_log_peer(KVR_LOG_INFO, c->pid,
		     "worker connected: channel %d pid %d uid %u model '%s' "
		     "(namespace %u), transport %s, pool %s (%llu bytes)",
		     c->chan, (int)c->pid, (unsigned)c->uid, h->ns.model,
		     c->ns_id, transport_name(c->transport),
		     s->backend == KVR_POOL_SHM	    ? s->pool.name
		     : s->backend == KVR_POOL_MEMFD ? "memfd"
						    : "private",
		     (unsigned long long)s->cfg.pool_bytes);
	if (copy)
		kvr_log_peer(KVR_LOG_WARN, c->pid,
			     "channel %d (pid %d) uses the COPY transport: "
			     "payload travels over the socket into the "
			     "server's %s pool of %llu bytes; expect much "
			     "lower throughput than shared memory",
			     c->chan, (int)c->pid,
			     s->backend == KVR_POOL_PRIVATE ? "private"
							    : "shared",
			     (unsigned long long)s->cfg.pool_bytes);
}

/* A complete HELLO frame body is in c->hbuf. */
static void handle_hello(struct kvr_srv *s, struct kvr_conn *c,
			 const uint8_t *body, size_t len)
{
	struct kvr_err e = {0};
	struct kvr_hello h;
	uint32_t mv[2];
	int rc;

	rc = kvr_hello_check(body, len, &e);
	if (rc < 0 && len >= sizeof(mv)) {
		/* A hello of another size may be another version: name both
		 * versions rather than complain about the size. */
		memcpy(mv, body, sizeof(mv));
		if (mv[0] == KVR_PROTO_MAGIC && mv[1] != KVR_PROTO_VERSION) {
			refuse(s, c, -EPROTO,
			       "protocol version %u, kvringd speaks %u: "
			       "upgrade the older of libkvring and kvringd",
			       mv[1], KVR_PROTO_VERSION);
			return;
		}
	}
	if (rc < 0) {
		refuse(s, c, rc, "%s", e.msg[0] ? e.msg : "bad hello");
		return;
	}
	memcpy(&h, body, sizeof(h));
	if (!peer_allowed(s, c)) {
		refuse(s, c, -EACCES,
		       "uid %u is not allowed: kvringd runs as uid %u; run the "
		       "worker as that user or start kvringd with --group",
		       (unsigned)c->uid, (unsigned)s->uid);
		return;
	}
	admit(s, c, &h);
}

/*
 * Read the hello incrementally: the frame header first, then exactly the
 * body it announces (bounded by KVR_SRV_HELLO_MAX), never more, so bytes
 * a worker sends after its hello stay in the socket. A slow client is not
 * waited for here: the poll brings us back, and the deadline drops it.
 */
void kvr__hello_readable(struct kvr_srv *s, struct kvr_conn *c)
{
	const size_t fh = sizeof(struct kvr_frame);
	struct kvr_frame f;
	size_t need;
	ssize_t n;

	for (;;) {
		need = fh;
		if (c->hlen >= fh) {
			memcpy(&f, c->hbuf, fh);
			if (f.type != KVR_FRAME_HELLO) {
				refuse(s, c, -EBADMSG,
				       "expected a hello frame (type 0x%x), "
				       "got type 0x%x",
				       KVR_FRAME_HELLO, f.type);
				return;
			}
			if (f.len > KVR_SRV_HELLO_MAX) {
				refuse(s, c, -EBADMSG,
				       "hello of %u bytes, at most %u accepted",
				       f.len, KVR_SRV_HELLO_MAX);
				return;
			}
			need = fh + f.len;
			if (c->hlen == need) {
				handle_hello(s, c, c->hbuf + fh, f.len);
				return;
			}
		}
		n = recv(c->sock, c->hbuf + c->hlen, need - c->hlen,
			 MSG_DONTWAIT);
		if (n > 0) {
			c->hlen += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		kvr_log_peer(KVR_LOG_INFO, c->pid,
			     "client pid %d left during the handshake (%zu "
			     "bytes of hello received)",
			     (int)c->pid, c->hlen);
		kvr__chan_close(s, c, "hang-up in handshake", false);
		return;
	}
}

/* Called every heartbeat; O(connection slots) only while some client is
 * in the handshake. */
void kvr__hello_timeouts(struct kvr_srv *s, uint64_t now_ns)
{
	uint64_t first_ns = (uint64_t)KVR_SRV_FIRST_BYTE_MS * 1000000u;

	if (!s->npending)
		return;
	if (first_ns > (uint64_t)s->cfg.handshake_ms * 1000000u)
		first_ns = (uint64_t)s->cfg.handshake_ms * 1000000u;
	for (uint32_t i = 0; i < s->nconns; i++) {
		struct kvr_conn *c = &s->conns[i];

		if (c->state != KVR_CONN_HELLO)
			continue;
		if (c->hlen == 0 && now_ns >= c->accepted_ns + first_ns) {
			kvr_log_peer(
			    KVR_LOG_WARN, c->pid,
			    "handshake timeout: client pid %d uid %u "
			    "sent no byte within %llu ms of connecting; "
			    "dropped",
			    (int)c->pid, (unsigned)c->uid,
			    (unsigned long long)(first_ns / 1000000u));
			s->g.handshake_refused++;
			kvr__chan_close(s, c, "handshake timeout", false);
			continue;
		}
		if (now_ns < c->deadline_ns)
			continue;
		kvr_log_peer(KVR_LOG_WARN, c->pid,
			     "handshake timeout: client pid %d uid %u sent %zu "
			     "bytes of its hello in %u ms; dropped",
			     (int)c->pid, (unsigned)c->uid, c->hlen,
			     s->cfg.handshake_ms);
		s->g.handshake_refused++;
		kvr__chan_close(s, c, "handshake timeout", false);
	}
}

/* ---- Operations of a connection in the handshake ---- */

/* Never called: a HELLO connection is not admitted, active or polled. */
static int hello_init(struct kvr_srv *s, struct kvr_conn *c)
{
	(void)s;
	(void)c;
	return 0;
}

static void hello_nop(struct kvr_srv *s, struct kvr_conn *c)
{
	(void)s;
	(void)c;
}

/* Its deadline is kvr__hello_timeouts()'s, not a stall. */
static bool hello_stalled(const struct kvr_conn *c, uint64_t now_ns,
			  uint64_t stall_ns)
{
	(void)c;
	(void)now_ns;
	(void)stall_ns;
	return false;
}

const struct kvr_conn_ops kvr__hello_ops = {
    .init = hello_init,
    .start = hello_nop,
    .readable = kvr__hello_readable,
    .writable = hello_nop,
    .stalled = hello_stalled,
    .shutdown = hello_nop,
    .fini = hello_nop,
    .late_answers = false,
};
