/* SPDX-License-Identifier: MIT */
/*
 * conn.c - a libkvring connection's life: connect to kvringd over its Unix
 * socket, send the hello (namespace), receive the welcome and its fds,
 * attach the control segment and the pool, and close.
 *
 * The seed's review is the checklist here. Every fd received for a segment
 * is closed right after mmap (kvr_seg_attach_fd takes ownership), so no fd
 * outlives the attach; the control segment is mapped read-only and only
 * our own channel's block read-write (abi 3.0); the geometry we trust is
 * the welcome's, checked against the header, and kept privately (the
 * header is never re-read for sizes); the transport ("is shared memory
 * active") is decided once, at connect, as the operations table c->tp
 * (tport_ring.c or tport_sock.c); close never fails, never blocks long,
 * and works after the server died. This file does not send requests
 * (submit.c) or wait for answers (wait.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <kvring/chanmap.h>
#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/keys.h>
#include <kvring/parse.h>
#include <kvring/paths.h>

#include "client.h"

/* Most fds a welcome carries: ctl (read-only), req eventfd, resp eventfd,
 * our channel's block, pool. */
#define WELCOME_FDS 5

int kvr_default_socket(char *buf, size_t n)
{
	return kvr_default_socket_path(buf, n);
}

/* Write errbuf (may be NULL) and return rc. */
static int cfail(char *errbuf, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int cfail(char *errbuf, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (errbuf && errlen) {
		va_start(ap, fmt);
		vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* Receive the welcome frame and whatever fds ride on it. The fds may
 * arrive with any of the recvmsg calls (stream sockets attach them to the
 * first byte of the sendmsg that carried them), so every read asks. */
static int recv_welcome(struct kvr_client *c, uint64_t deadline,
			struct kvr_welcome *w, int *fds, int *nfds)
{
	unsigned char buf[sizeof(struct kvr_frame) + sizeof(*w)];
	struct kvr_frame f;
	size_t got = 0, want = sizeof(f);

	while (got < want) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int) * WELCOME_FDS)];
		} cm;
		struct iovec iov = {buf + got, want - got};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cm.b,
				    .msg_controllen = sizeof(cm.b)};
		ssize_t r =
		    recvmsg(c->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = {c->sock, POLLIN, 0};
			uint64_t now = kvr_clock_now_ns();

			if (now >= deadline)
				return -ETIMEDOUT;
			poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
			continue;
		}
		if (r < 0)
			return -errno;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h;
		     h = CMSG_NXTHDR(&mh, h)) {
			size_t k;

			if (h->cmsg_level != SOL_SOCKET ||
			    h->cmsg_type != SCM_RIGHTS)
				continue;
			k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(h) + i * sizeof(int),
				       sizeof(fd));
				if (*nfds < WELCOME_FDS)
					fds[(*nfds)++] = fd;
				else
					close(fd); /* more than we expect */
			}
		}
		if (mh.msg_flags & MSG_CTRUNC)
			return -EBADMSG;
		if (r == 0)
			return -ECONNRESET;
		got += (size_t)r;
		if (got == sizeof(f) && want == sizeof(f)) {
			memcpy(&f, buf, sizeof(f));
			if (f.type != KVR_FRAME_WELCOME || f.len > sizeof(*w))
				return -EBADMSG;
			want += f.len;
		}
	}
	memset(w, 0, sizeof(*w));
	memcpy(w, buf + sizeof(f), got - sizeof(f));
	return (int)(got - sizeof(f));
}

/* Map the control segment read-only and our channel's block read-write,
 * check both against the welcome (kvr_chanmap_check) and attach the two
 * rings. Takes ownership of ctl_fd and blk_fd. The control descriptor is
 * read-only (and a memfd sealed), so this mapping can never be made
 * writable; nothing else of any other channel is mapped at all. */
static int attach_ctl(struct kvr_client *c, const struct kvr_welcome *w,
		      int ctl_fd, int blk_fd, char *errbuf, size_t errlen)
{
	struct kvr_err e = {0};
	char *chb;
	int rc;

	if (w->ctl_bytes > SIZE_MAX || w->channel_bytes > SIZE_MAX ||
	    w->ctl_bytes == 0 || w->channel_bytes == 0) {
		close(ctl_fd);
		close(blk_fd);
		return cfail(errbuf, errlen, -EPROTO,
			     "welcome: control segment %llu bytes, channel "
			     "block %llu bytes",
			     (unsigned long long)w->ctl_bytes,
			     (unsigned long long)w->channel_bytes);
	}
	rc = kvr_seg_attach_fd(ctl_fd, (size_t)w->ctl_bytes, PROT_READ, &c->ctl,
			       &e);
	if (rc < 0) {
		close(blk_fd);
		return cfail(errbuf, errlen, rc, "attach control segment: %s",
			     kvr_err_str(&e, rc));
	}
	rc = kvr_seg_attach_fd(blk_fd, (size_t)w->channel_bytes,
			       PROT_READ | PROT_WRITE, &c->blk, &e);
	if (rc < 0)
		return cfail(errbuf, errlen, rc, "attach channel %u block: %s",
			     w->channel, kvr_err_str(&e, rc));
	rc = kvr_chanmap_check(w, c->ctl.base, c->ctl.bytes, c->blk.base,
			       c->blk.bytes, &c->geom, &c->generation, &e);
	if (rc < 0)
		return cfail(errbuf, errlen, rc, "%s", kvr_err_str(&e, rc));
	c->hdr = c->ctl.base;
	c->ch = c->blk.base;
	chb = (char *)c->ch;
	rc = kvr_ring_attach_producer(&c->req, chb + c->geom.req_ring_off,
				      kvr_ring_shm_bytes(w->req_ring_cap),
				      w->req_ring_cap);
	if (rc == 0)
		rc = kvr_ring_attach_consumer(
		    &c->resp, chb + c->geom.resp_ring_off,
		    kvr_ring_shm_bytes(w->resp_ring_cap), w->resp_ring_cap);
	if (rc < 0)
		return cfail(errbuf, errlen, rc, "attach channel %u rings: %s",
			     w->channel, kvr_strerror(rc));
	return 0;
}

/* Map the pool read-write and pre-fault every page (DESIGN: no page
 * faults in the steady state), unless another client of this process
 * mapped it already (poolmap.c). Takes ownership of pool_fd. */
static int attach_pool(struct kvr_client *c, const struct kvr_welcome *w,
		       int pool_fd, const struct kvr_client_opts *o,
		       char *errbuf, size_t errlen)
{
	struct kvr_err e = {0};
	bool shared = false;
	int rc;

	if (w->pool_bytes > SIZE_MAX) {
		close(pool_fd);
		return cfail(errbuf, errlen, -ERANGE, "pool too large");
	}
	/* Another client of this process may have mapped this pool: then
	 * its mapping is ours too, and its pages are faulted in already. */
	rc =
	    kvr__poolmap_attach(c, pool_fd, (size_t)w->pool_bytes, &shared, &e);
	if (rc < 0)
		return cfail(errbuf, errlen, rc, "attach pool: %s",
			     kvr_err_str(&e, rc));
	c->pool_shared = shared;
	if (!o->no_prefault && !shared) {
		/* One touch per page of the pool's size (touch.c), in line or
		 * in the background when the caller asked for it. */
		rc = kvr__touch_start(c, o->prefault_background);
		if (rc < 0)
			return cfail(errbuf, errlen, rc, "prefault pool: %s",
				     kvr_strerror(rc));
	}
	return 0;
}

static int resolve_path(const struct kvr_client_opts *o, struct sockaddr_un *sa,
			char *errbuf, size_t errlen)
{
	const char *p = o->socket_path;
	char def[KVR_SOCKET_PATH_MAX];

	if (!p || !*p)
		p = getenv("KVRING_SOCKET");
	if (!p || !*p) {
		if (kvr_default_socket_path(def, sizeof(def)) < 0)
			return cfail(errbuf, errlen, -ENAMETOOLONG,
				     "default socket path too long");
		p = def;
	}
	if (strlen(p) >= sizeof(sa->sun_path))
		return cfail(errbuf, errlen, -ENAMETOOLONG,
			     "socket path %s: longer than %zu bytes", p,
			     sizeof(sa->sun_path) - 1);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	strcpy(sa->sun_path, p);
	return 0;
}

/* Which transport the caller wants: 0 auto, KVR_TRANSPORT_COPY forced. */
static int want_transport(const struct kvr_client_opts *o, char *errbuf,
			  size_t errlen)
{
	const char *env = getenv("KVRING_TRANSPORT");

	if (env && *env) {
		if (!strcmp(env, "copy"))
			return KVR_TRANSPORT_COPY;
		if (strcmp(env, "auto") && strcmp(env, "shm"))
			return cfail(errbuf, errlen, -EINVAL,
				     "KVRING_TRANSPORT=%s: expected copy, "
				     "shm or auto",
				     env);
	}
	if (o->transport == 0 || o->transport == KVR_TRANSPORT_SHM ||
	    o->transport == KVR_TRANSPORT_MEMFD)
		return 0;
	if (o->transport == KVR_TRANSPORT_COPY)
		return KVR_TRANSPORT_COPY;
	return cfail(errbuf, errlen, -EINVAL, "opts.transport %d: unknown",
		     o->transport);
}

static void describe(struct kvr_client *c)
{
	struct kvr_client_info *i = &c->info;
	const char *t = i->transport == KVR_TRANSPORT_COPY    ? "copy"
			: i->transport == KVR_TRANSPORT_MEMFD ? "memfd"
							      : "shm";

	snprintf(
	    i->debug, sizeof(i->debug),
	    "transport %s, pool %s %llu bytes (%zu KiB pages), channel %u, "
	    "attach %.1f ms (prefault %s%.1f ms%s), kvringd pid %d%s",
	    t, i->pool_name[0] ? i->pool_name : "(anonymous)",
	    (unsigned long long)i->pool_bytes,
	    c->pool.page_bytes ? c->pool.page_bytes >> 10 : 0, i->channel,
	    (double)i->attach_ns / 1e6,
	    c->touch.started ? "in background, so far " : "",
	    (double)i->prefault_ns / 1e6, c->pool_shared ? ", shared" : "",
	    (int)i->server_pid,
	    c->tp == &kvr__tport_sock
		? "; payload travels over the socket (slow)"
		: "");
}

/*
 * Whether the kvringd at the other end of @sock may have our bytes. Its
 * uid comes from the kernel (SO_PEERCRED, taken when it called listen),
 * not from anything it says. Trusted: our effective uid, root (who can
 * read our memory anyway), the caller's opts->trust_server_uid, and
 * $KVRING_SERVER_UID (a decimal uid) for the Python and C defaults.
 * Return: 0 and *pid_out, or -EACCES with the reason in errbuf.
 */
static int check_server_uid(int sock, const struct kvr_client_opts *o,
			    pid_t *pid_out, char *errbuf, size_t errlen)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	uid_t me = geteuid();
	const char *env = getenv("KVRING_SERVER_UID");
	uint32_t trusted_env = 0;
	bool have_env = false;

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return cfail(errbuf, errlen, -EACCES,
			     "cannot tell which uid kvringd runs as "
			     "(SO_PEERCRED: %s); refusing to send it chunks",
			     strerror(errno));
	if (env && *env) {
		/* lib/parse.c's grammar: digits first, so
		 * "-18446744073709486082" (strtoul's 65534) is refused, not
		 * trusted. */
		have_env = kvr_parse_u32(env, 0, UINT32_MAX, &trusted_env) == 0;
		if (!have_env)
			return cfail(
			    errbuf, errlen, -EINVAL,
			    "$KVRING_SERVER_UID '%s' is not a uid; set "
			    "it to a decimal number or unset it",
			    env);
	}
	*pid_out = cred.pid;
	if (cred.uid == me || cred.uid == 0 ||
	    (o->trust_server_uid && cred.uid == o->trust_server_uid) ||
	    (have_env && cred.uid == (uid_t)trusted_env))
		return 0;
	return cfail(errbuf, errlen, -EACCES,
		     "kvringd (pid %d) runs as uid %u, this worker as uid %u: "
		     "refusing to hand it chunks; run kvringd as uid %u or "
		     "root, or trust uid %u with $KVRING_SERVER_UID=%u "
		     "(opts.trust_server_uid)",
		     (int)cred.pid, (unsigned)cred.uid, (unsigned)me,
		     (unsigned)me, (unsigned)cred.uid, (unsigned)cred.uid);
}

/* One connection attempt. *pool_failed tells the caller that only the
 * pool mapping failed, so a retry with the copy transport may work. */
static int connect_once(const struct kvr_client_opts *o, bool want_copy,
			struct kvr_client **out, bool *pool_failed,
			char *errbuf, size_t errlen)
{
	struct kvr_client *c;
	struct sockaddr_un sa;
	struct kvr_welcome w;
	struct kvr_hello h;
	struct kvr_err e = {0};
	int fds[WELCOME_FDS] = {-1, -1, -1, -1, -1};
	int nfds = 0, rc, need;
	uint64_t t0, deadline;

	rc = resolve_path(o, &sa, errbuf, errlen);
	if (rc < 0)
		return rc;
	if (kvr__client_create(o, &c) < 0)
		return cfail(errbuf, errlen, -ENOMEM, "out of memory");
	/* One deadline for the whole handshake, whatever the server does. */
	deadline = kvr_clock_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;

	c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->sock < 0) {
		rc = -errno;
		kvr__client_destroy(c);
		return cfail(errbuf, errlen, rc, "socket: %s", strerror(-rc));
	}
	if (connect(c->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		kvr__client_destroy(c);
		return cfail(errbuf, errlen, rc,
			     "connect %s: %s (is kvringd running? start it, "
			     "or set KVRING_SOCKET)",
			     sa.sun_path, strerror(-rc));
	}
	/* Before a byte is sent: the hello already says which model we
	 * serve, and the fds we would map carry our chunks. */
	rc = check_server_uid(c->sock, o, &c->server_pid, errbuf, errlen);
	if (rc < 0) {
		kvr__client_destroy(c);
		return rc;
	}

	kvr_hello_init(&h, &o->ns, want_copy ? KVR_HELLO_WANT_COPY : 0,
		       (int32_t)getpid());
	/* A server that closes before its welcome dropped this handshake
	 * (its handshake table makes room for newer ones, or the first-byte
	 * deadline passed): -ECONNABORTED, which kvr_connect tries again. */
	rc = kvr__frame_send(c, KVR_FRAME_HELLO, &h, sizeof(h), NULL);
	if (rc < 0) {
		rc =
		    cfail(errbuf, errlen,
			  rc == -EPIPE || rc == -ECONNRESET || rc == -EOWNERDEAD
			      ? -ECONNABORTED
			      : rc,
			  "send hello to %s: %s", sa.sun_path, c->errmsg);
		kvr__client_destroy(c);
		return rc;
	}
	rc = recv_welcome(c, deadline, &w, fds, &nfds);
	if (rc < 0) {
		close_fds(fds, nfds);
		kvr__client_destroy(c);
		return cfail(
		    errbuf, errlen, rc == -ECONNRESET ? -ECONNABORTED : rc,
		    "handshake with %s: %s", sa.sun_path,
		    rc == -ECONNRESET ? "kvringd closed the socket before its "
					"welcome"
				      : kvr_strerror(rc));
	}
	rc = kvr_welcome_check(&w, (size_t)rc, &e);
	if (rc == 0 && w.status < 0)
		rc = cfail(errbuf, errlen, w.status, "kvringd refused: %s",
			   w.reason[0] ? w.reason : kvr_strerror(w.status));
	else if (rc < 0)
		rc = cfail(errbuf, errlen, rc, "%s", kvr_err_str(&e, rc));
	/* ctl, req eventfd, resp eventfd, our channel's block, and the pool
	 * unless the server chose the socket transport; anything else is a
	 * confused server. */
	need = w.transport == KVR_TRANSPORT_COPY ? 4 : 5;
	if (rc == 0 && (nfds != need || w.channel >= 4096))
		rc = cfail(errbuf, errlen, -EPROTO,
			   "welcome carried %d fds, expected %d", nfds, need);
	if (rc < 0) {
		close_fds(fds, nfds);
		kvr__client_destroy(c);
		return rc;
	}
	/* The decision "is shared memory active" is made here, once: from
	 * now on every path that differs calls through c->tp, and what the
	 * transport acquires (the pool mapping) it releases in tp->close. */
	c->tp = w.transport == KVR_TRANSPORT_COPY ? &kvr__tport_sock
						  : &kvr__tport_ring;
	c->req_efd = fds[1];
	c->resp_efd = fds[2];
	fds[1] = fds[2] = -1;
	/* Drains of the response eventfd must never block. */
	fcntl(c->resp_efd, F_SETFL, fcntl(c->resp_efd, F_GETFL) | O_NONBLOCK);

	/* attach_ns covers the mappings and the pre-fault (when in line):
	 * what kvr_client_info() reports as the cost of attaching. */
	t0 = kvr_clock_now_ns();
	rc = attach_ctl(c, &w, fds[0], fds[3], errbuf, errlen);
	fds[0] = fds[3] = -1; /* closed by the attach, whatever happened */
	if (rc == 0 && need == 5) {
		rc = attach_pool(c, &w, fds[4], o, errbuf, errlen);
		fds[4] = -1;
		if (rc < 0 && rc != -EPROTO)
			*pool_failed = true;
	}
	if (rc < 0) {
		close_fds(fds, nfds);
		kvr__client_destroy(c);
		return rc;
	}
	c->info.attach_ns = kvr_clock_now_ns() - t0;
	c->info.transport = w.transport;
	c->info.channel = w.channel;
	c->info.pool_bytes = w.pool_bytes;
	c->info.align = w.align;
	c->info.max_keys = w.max_keys;
	memcpy(c->info.boot_id, w.boot_id, sizeof(w.boot_id));
	memcpy(c->info.pool_name, w.pool_name, sizeof(c->info.pool_name));
	c->info.pool_name[sizeof(c->info.pool_name) - 1] = '\0';
	c->info.server_pid = (int32_t)c->server_pid;
	c->info.heartbeat_ms = w.heartbeat_ms;
	c->heartbeat_ms = w.heartbeat_ms;
	describe(c);
	*out = c;
	return 0;
}

/* $KVRING_RTT_SAMPLE: time one op in N into the channel's worker_rtt
 * histograms (0 turns it off). Return N, RTT_SAMPLE_UNSET when it is not
 * set (the default then depends on the server), or -EINVAL (message
 * set). */
#define RTT_SAMPLE_UNSET (1 << 30)
static int rtt_sample_env(char *errbuf, size_t errlen)
{
	const char *env = getenv("KVRING_RTT_SAMPLE");
	uint32_t v;

	if (!env || !*env)
		return RTT_SAMPLE_UNSET;
	if (kvr_parse_u32(env, 0, 1000000, &v) < 0)
		return cfail(errbuf, errlen, -EINVAL,
			     "KVRING_RTT_SAMPLE=%s: expected a number of ops "
			     "0-1000000 (1 = time every op, 0 = none)",
			     env);
	return (int)v;
}

/* Start publishing round trips into our channel block (shared-memory
 * transport; the copy transport has no channel block of its own to
 * write). rtt_every is ours, written once, relaxed: the inspector reads
 * it only to say how the worker samples. */
static void rtt_start(struct kvr_client *c, uint32_t every)
{
	if (!c->ch || c->tp != &kvr__tport_ring)
		return;
	/* Not asked for: sampled by default, unless the server keeps no
	 * per-channel histograms (kvringd --histograms global or off). */
	if (every == RTT_SAMPLE_UNSET)
		every = kvr_ctl_obs(c->hdr)->flags & KVR_OBS_NO_CHAN_HIST
			    ? 0
			    : KVR_RTT_SAMPLE_DEF;
	if (every == 0)
		return;
	c->obs = kvr_chan_obs(c->ch);
	c->rtt_every = c->rtt_left = every;
	atomic_store_explicit(&c->obs->rtt_every, every, memory_order_relaxed);
}

/* One connection attempt with options already copied and checked for size
 * (connect.c owns the public entry points and the wait for kvringd). */
int kvr__conn_attempt(const struct kvr_client_opts *o, struct kvr_client **out,
		      char *errbuf, size_t errlen)
{
	struct kvr_key nsk;
	bool pool_failed = false;
	int rc, t, every, sum, ahead;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!o || !out)
		return cfail(errbuf, errlen, -EINVAL,
			     "opts and out are required");
	if (kvr_ns_key(&o->ns, &nsk) < 0 || o->ns.layers == 0 ||
	    o->ns.kv_heads == 0 || o->ns.head_size == 0 ||
	    (o->ns.dtype_bytes != 1 && o->ns.dtype_bytes != 2 &&
	     o->ns.dtype_bytes != 4) ||
	    o->ns.tp_size == 0 || o->ns.tp_rank >= o->ns.tp_size)
		return cfail(
		    errbuf, errlen, -EINVAL,
		    "bad namespace: model must be 1..63 chars, layers, "
		    "kv_heads, head_size, chunk_tokens > 0, dtype_bytes "
		    "1/2/4, tp_rank < tp_size, reserved 0");
	t = want_transport(o, errbuf, errlen);
	if (t < 0)
		return t;
	sum = kvr__xfer_sum_mode(o, errbuf, errlen);
	if (sum < 0)
		return sum;
	every = rtt_sample_env(errbuf, errlen);
	if (every < 0)
		return every;
	ahead = kvr__stage_mode(o, errbuf, errlen);
	if (ahead < 0)
		return ahead;
	rc = connect_once(o, t == KVR_TRANSPORT_COPY, out, &pool_failed, errbuf,
			  errlen);
	if (rc < 0 && pool_failed)
		/* The pool could not be mapped here (e.g. a memfd we may not
		 * map): the same API still works over the socket. */
		rc = connect_once(o, true, out, &pool_failed, errbuf, errlen);
	if (rc == 0) {
		rtt_start(*out, (uint32_t)every);
		/* The same under both transports: over the socket the sums
		 * cover our private buffers, and the server's pool may
		 * still be shared with ring workers (docs/reliability.md). */
		(*out)->checksum = (uint32_t)sum;
		(*out)->info.checksum = (uint32_t)sum;
		/* Store-ahead: once, now the transport is known. */
		kvr__stage_init(*out, ahead && (*out)->tp == &kvr__tport_ring);
	}
	return rc;
}

void kvr_close(struct kvr_client *c)
{
	struct kvr_frame f = {.len = 0, .type = KVR_FRAME_BYE};

	if (!c)
		return;
	/* A forked child's copy of the mutex may have been held by another
	 * parent thread at fork(): it must not be taken, and the child says
	 * nothing to the server anyway. */
	if (getpid() != c->owner_pid) {
		kvr__client_destroy(c);
		return;
	}
	pthread_mutex_lock(&c->lock);
	/* Best effort, never blocking: a dead server or a full socket just
	 * means the server learns of the close from the hang-up. A broken
	 * copy stream may be mid-frame, so say nothing then. A forked child
	 * closing its inherited copy must not end the parent's channel. */
	if (c->sock >= 0 && !c->broken && getpid() == c->owner_pid)
		(void)!send(c->sock, &f, sizeof(f),
			    MSG_DONTWAIT | MSG_NOSIGNAL);
	pthread_mutex_unlock(&c->lock);
	kvr__client_destroy(c);
}
