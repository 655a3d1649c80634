/* SPDX-License-Identifier: MIT */
/*
 * t_raw.c - a hand-written kvring worker for protocol tests (t_raw.h).
 * Deliberately simple: it waits by polling with short sleeps rather than
 * with doorbells, since tests check answers, not latency.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP */
#endif
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <kvring/doorbell.h>

#include "t_raw.h"

void t_ns_default(struct kvr_ns_desc *ns)
{
	memset(ns, 0, sizeof(*ns));
	snprintf(ns->model, sizeof(ns->model), "t-model");
	ns->layers = 2;
	ns->kv_heads = 2;
	ns->head_size = 64;
	ns->dtype_bytes = 2;
	ns->tp_rank = 0;
	ns->tp_size = 1;
	ns->chunk_tokens = 128;
}

void t_ns_small(struct kvr_ns_desc *ns, const char *model)
{
	t_ns_default(ns);
	snprintf(ns->model, sizeof(ns->model), "%s", model);
	ns->chunk_tokens = 16;
}

void t_ns_model(struct kvr_ns_desc *ns, const char *model, uint32_t layers,
		uint32_t kv_heads, uint32_t head_size, uint32_t chunk_tokens)
{
	t_ns_default(ns);
	snprintf(ns->model, sizeof(ns->model), "%s", model);
	ns->layers = layers;
	ns->kv_heads = kv_heads;
	ns->head_size = head_size;
	ns->chunk_tokens = chunk_tokens;
}

void t_ns_tiny(struct kvr_ns_desc *ns, const char *model)
{
	t_ns_small(ns, model);
	ns->layers = ns->kv_heads = ns->head_size = 1;
}

int t_raw_sock(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int t_raw_send_frame(int fd, uint32_t type, const void *body, size_t len)
{
	struct kvr_frame f = {.len = (uint32_t)len, .type = type};
	struct iovec iov[2] = {{&f, sizeof(f)}, {(void *)body, len}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};

	if (sendmsg(fd, &m, MSG_NOSIGNAL) != (ssize_t)(sizeof(f) + len))
		return -errno ? -errno : -EIO;
	return 0;
}

int t_raw_read_welcome(int fd, struct kvr_welcome *w, int *fds, int *nfds,
		       int timeout_ms)
{
	char buf[sizeof(struct kvr_frame) + sizeof(*w)];
	union {
		char b[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.b,
			   .msg_controllen = sizeof(u.b)};
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct cmsghdr *cm;
	size_t got = 0;
	ssize_t n;

	*nfds = 0;
	while (got < sizeof(buf)) {
		if (poll(&p, 1, timeout_ms) <= 0)
			return -ETIMEDOUT;
		iov.iov_base = buf + got;
		iov.iov_len = sizeof(buf) - got;
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
		if (n <= 0)
			return -EPIPE;
		for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			int k =
			    (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int i = 0; i < k && *nfds < T_RAW_FDS; i++)
				memcpy(&fds[(*nfds)++],
				       CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(int));
		}
		m.msg_controllen = 0;
		m.msg_control = NULL;
		got += (size_t)n;
	}
	memcpy(w, buf + sizeof(struct kvr_frame), sizeof(*w));
	return 0;
}

static void *map_fd(int fd, size_t bytes, int prot, bool keep)
{
	void *p = mmap(NULL, bytes, prot, MAP_SHARED, fd, 0);

	if (!keep)
		close(fd);
	if (p == MAP_FAILED) {
		perror("t_raw: mmap");
		abort();
	}
	return p;
}

int t_raw_connect(const char *path, uint32_t hello_flags, struct t_raw *r)
{
	struct kvr_ns_desc ns;

	t_ns_default(&ns);
	return t_raw_connect_ns(path, hello_flags, &ns, r);
}

int t_raw_hello(const char *path, const struct kvr_hello *hello,
		struct kvr_welcome *w, int *fds, int *nfds)
{
	int fd = t_raw_sock(path), rc;

	if (fd < 0) {
		fprintf(stderr, "t_raw: connect %s: %s\n", path, strerror(-fd));
		return fd;
	}
	rc = t_raw_send_frame(fd, KVR_FRAME_HELLO, hello, sizeof(*hello));
	if (rc == 0)
		rc = t_raw_read_welcome(fd, w, fds, nfds, 5000);
	if (rc < 0) {
		fprintf(stderr, "t_raw: HELLO to %s: %s\n", path,
			strerror(-rc));
		close(fd);
		return rc;
	}
	return fd;
}

int t_raw_connect_ns(const char *path, uint32_t hello_flags,
		     const struct kvr_ns_desc *ns, struct t_raw *r)
{
	struct kvr_hello h = {0};
	int fds[T_RAW_FDS], nfds, rc;

	memset(r, 0, sizeof(*r));
	r->sock = r->req_efd = r->resp_efd = r->ctl_fd = -1;
	r->next_id = 1;
	r->sock = t_raw_sock(path);
	if (r->sock < 0) {
		fprintf(stderr, "t_raw: connect %s: %s\n", path,
			strerror(-r->sock));
		abort();
	}
	h.magic = KVR_PROTO_MAGIC;
	h.version = KVR_PROTO_VERSION;
	h.flags = hello_flags;
	h.pid = (int32_t)getpid();
	h.ns = *ns;
	if (t_raw_send_frame(r->sock, KVR_FRAME_HELLO, &h, sizeof(h)) < 0)
		abort();
	rc = t_raw_read_welcome(r->sock, &r->w, fds, &nfds, 5000);
	if (rc < 0)
		return rc;
	if (r->w.status < 0) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return r->w.status;
	}
	if (nfds < 4) {
		fprintf(stderr, "t_raw: welcome brought %d fds\n", nfds);
		abort();
	}
	/* The control segment only maps read-only (abi 3.0). */
	r->ctl_bytes = r->w.ctl_bytes;
	r->ctl_fd = fds[0];
	r->ctl = map_fd(fds[0], r->ctl_bytes, PROT_READ, true);
	r->req_efd = fds[1];
	r->resp_efd = fds[2];
	r->ch_bytes = r->w.channel_bytes;
	r->ch = map_fd(fds[3], r->ch_bytes, PROT_READ | PROT_WRITE, false);
	if (nfds > 4)
		r->pool = map_fd(fds[4], r->w.pool_bytes,
				 PROT_READ | PROT_WRITE, false);
	rc = kvr_ring_attach_producer(
	    &r->req, (char *)r->ch + r->ch->req_ring_off,
	    kvr_ring_shm_bytes(r->w.req_ring_cap), r->w.req_ring_cap);
	if (rc == 0)
		rc = kvr_ring_attach_consumer(
		    &r->resp, (char *)r->ch + r->ch->resp_ring_off,
		    kvr_ring_shm_bytes(r->w.resp_ring_cap), r->w.resp_ring_cap);
	if (rc < 0) {
		fprintf(stderr, "t_raw: attach rings: %d\n", rc);
		abort();
	}
	return 0;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

int t_raw_push(struct t_raw *r, const struct kvr_req_view *v, bool bell)
{
	size_t len = kvr_req_bytes(v->op, v->hdr.count);
	void *slot;
	int rc;

	rc = kvr_ring_claim(&r->req, v->op, (uint32_t)len, &slot);
	if (rc < 0)
		return rc;
	rc = kvr_req_encode(v, slot, len);
	if (rc < 0) {
		/* Never publish a half-made record: a refused encode is a
		 * bug in the test, so stop it here. */
		fprintf(stderr, "t_raw: encode %s: %s\n", kvr_op_name(v->op),
			strerror(-rc));
		abort();
	}
	kvr_ring_commit(&r->req);
	if (bell)
		kvr_bell_notify(&r->ch->req_bell, r->req_efd);
	return 0;
}

int t_raw_call(struct t_raw *r, uint32_t op, uint64_t handle, uint32_t flags,
	       const struct kvr_key *keys, const uint64_t *sizes, uint32_t n,
	       void *ans, size_t cap)
{
	struct kvr_req_view v = {.op = op,
				 .hdr = {.req_id = r->next_id++,
					 .handle = handle,
					 .count = n,
					 .flags = flags},
				 .keys = keys,
				 .sizes = sizes};
	struct kvr_ring_rec rec;
	int rc;

	/* Commit ops carry u64 words (checksums, offsets): passed as sizes. */
	if (op == KVR_OP_COMMIT_STORE || op == KVR_OP_COMMIT_RETRIEVE) {
		v.words = sizes;
		v.sizes = NULL;
	}
	rc = t_raw_push(r, &v, true);
	if (rc < 0)
		return rc;
	for (int i = 0; i < 500000; i++) {
		rc = kvr_ring_peek(&r->resp, &rec);
		if (rc == 0) {
			size_t l = rec.len < cap ? rec.len : cap;

			memcpy(ans, rec.data, l);
			kvr_ring_release(&r->resp);
			return (int)rec.len;
		}
		if (rc != -EAGAIN)
			return rc;
		sleep_us(i < 1000 ? 0 : 10);
	}
	return -ETIMEDOUT;
}

int t_raw_store(struct t_raw *r, const struct kvr_key *keys,
		const uint64_t *sizes, uint32_t n, void *ans, size_t cap)
{
	const struct kvr_resp_hdr *h = ans;
	int rc;

	rc =
	    t_raw_call(r, KVR_OP_PREPARE_STORE, 0, 0, keys, sizes, n, ans, cap);
	if (rc < 0)
		return rc;
	rc = t_raw_call(r, KVR_OP_COMMIT_STORE, h->handle, 0, NULL, NULL, 0,
			ans, cap);
	return rc < 0 ? rc : h->status;
}

bool t_raw_wait_hangup(struct t_raw *r, int timeout_ms)
{
	struct pollfd p = {.fd = r->sock, .events = POLLIN | POLLRDHUP};
	char b[64];

	int waited = 0;

	do {
		if (poll(&p, 1, timeout_ms ? 10 : 0) > 0) {
			ssize_t n = recv(r->sock, b, sizeof(b), MSG_DONTWAIT);

			if (n == 0 || (n < 0 && errno != EAGAIN))
				return true;
		}
		waited += 10;
	} while (waited < timeout_ms);
	return false;
}

void t_raw_close(struct t_raw *r)
{
	if (r->ctl)
		munmap(r->ctl, r->ctl_bytes);
	if (r->ch)
		munmap(r->ch, r->ch_bytes);
	if (r->ctl_fd >= 0)
		close(r->ctl_fd);
	if (r->pool)
		munmap(r->pool, r->w.pool_bytes);
	if (r->sock >= 0)
		close(r->sock);
	if (r->req_efd >= 0)
		close(r->req_efd);
	if (r->resp_efd >= 0)
		close(r->resp_efd);
	r->ctl = r->pool = NULL;
	r->ch = NULL;
	r->sock = r->req_efd = r->resp_efd = r->ctl_fd = -1;
}
