/* SPDX-License-Identifier: MIT */
/*
 * t_raw.h - test helper: a worker that speaks kvring's protocol by hand
 * (socket, hello, welcome + fds, the rings) without libkvring, so that
 * integration tests can send what a correct library never would: a wrong
 * version, half a hello, garbage in the request ring. Set-up failures
 * abort; protocol outcomes are returned for the test to check.
 */
#ifndef KVR_T_RAW_H
#define KVR_T_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvring/layout.h>
#include <kvring/proto.h>
#include <kvring/ring.h>

/* Most fds a welcome carries: ctl, two doorbells, channel block, pool. */
#define T_RAW_FDS 5

struct t_raw {
	int sock;
	struct kvr_welcome w;
	int req_efd, resp_efd;
	void *ctl; /* read-only: the server gives a read-only descriptor */
	size_t ctl_bytes;
	int ctl_fd; /* that descriptor, kept open for tests that try it */
	void *pool; /* NULL under the copy transport */
	struct kvr_channel_shm *ch; /* our own block, read-write */
	size_t ch_bytes;
	struct kvr_ring req;  /* producer view */
	struct kvr_ring resp; /* consumer view */
	uint64_t next_id;
};

/* A valid test namespace ("t-model", 128 tokens per chunk). */
void t_ns_default(struct kvr_ns_desc *ns);

/* The same layout with 16 tokens per chunk (small chunks) under @model. */
void t_ns_small(struct kvr_ns_desc *ns, const char *model);

/* One layer, one KV head of one element, 16 tokens per chunk, under
 * @model: the smallest chunks, for tests that only count requests. */
void t_ns_tiny(struct kvr_ns_desc *ns, const char *model);

/* A model of @layers layers, @kv_heads KV heads of @head_size 2-byte
 * elements and @chunk_tokens tokens per chunk, under @model (one TP rank
 * of one). */
void t_ns_model(struct kvr_ns_desc *ns, const char *model, uint32_t layers,
		uint32_t kv_heads, uint32_t head_size, uint32_t chunk_tokens);

/* Connect to @path; the fd, or -errno. */
int t_raw_sock(const char *path);

/* Send a frame (header + body) on @fd; 0 or -errno. */
int t_raw_send_frame(int fd, uint32_t type, const void *body, size_t len);

/*
 * t_raw_read_welcome - read a WELCOME frame (and its fds, which are stored
 * in fds[] up to T_RAW_FDS, count in *nfds) within @timeout_ms. Returns 0,
 * -EPIPE if the server closed without one, -ETIMEDOUT.
 */
int t_raw_read_welcome(int fd, struct kvr_welcome *w, int *fds, int *nfds,
		       int timeout_ms);

/*
 * t_raw_hello - connect to @path, send @hello as it is and read the
 * WELCOME (as t_raw_read_welcome, 5 s). Returns the connected fd, or
 * -errno of the step that failed (said on stderr); maps nothing.
 */
int t_raw_hello(const char *path, const struct kvr_hello *hello,
		struct kvr_welcome *w, int *fds, int *nfds);

/*
 * t_raw_connect - full handshake with @hello_flags and the default
 * namespace; on status 0 maps the control segment and pool and attaches
 * the rings. Returns the welcome's status (0 or -errno); on a refusal
 * r->w.reason says why and nothing is mapped.
 */
int t_raw_connect(const char *path, uint32_t hello_flags, struct t_raw *r);

/* t_raw_connect with the namespace @ns instead of the default one. */
int t_raw_connect_ns(const char *path, uint32_t hello_flags,
		     const struct kvr_ns_desc *ns, struct t_raw *r);

/*
 * t_raw_push - encode @v with kvr_req_encode() straight into a claimed
 * request record, publish it and, when @bell, ring the doorbell (a test
 * that wants the server to find it late passes false). No answer is read.
 * Returns 0, or -EAGAIN when the ring is full. A request the encoder
 * refuses is a bug in the test: it aborts. To send a malformed record,
 * encode a good one and damage it, so only the damage is hand-made.
 */
int t_raw_push(struct t_raw *r, const struct kvr_req_view *v, bool bell);

/*
 * t_raw_call - put one request in the ring, ring the doorbell and wait up
 * to 5 s for the next answer, copied into @ans (@cap bytes). @keys/@sizes
 * may be NULL with n == 0. Returns the answer's length, -ETIMEDOUT, or
 * the ring's error.
 */
int t_raw_call(struct t_raw *r, uint32_t op, uint64_t handle, uint32_t flags,
	       const struct kvr_key *keys, const uint64_t *sizes, uint32_t n,
	       void *ans, size_t cap);

/*
 * t_raw_store - prepare a store of @n keys and commit it at once (the
 * slots keep whatever bytes the pool held), both answers in @ans (which
 * starts with a struct kvr_resp_hdr). Returns the commit's status, or
 * t_raw_call()'s error.
 */
int t_raw_store(struct t_raw *r, const struct kvr_key *keys,
		const uint64_t *sizes, uint32_t n, void *ans, size_t cap);

/* Wait up to @timeout_ms for the server to close our socket. */
bool t_raw_wait_hangup(struct t_raw *r, int timeout_ms);

/* Unmap and close everything; safe twice. */
void t_raw_close(struct t_raw *r);

#endif /* KVR_T_RAW_H */
