/* SPDX-License-Identifier: MIT */
/*
 * Description: kvringd's handshake and request protocol, spoken by hand
 * (tests/support/t_raw) against a real kvringd process: refusals (version,
 * garbage, uid, no free channel), handshake timeout, the request/answer
 * cycle through the rings and through the copy transport, and bad input
 * (garbage in the request ring, malformed records, a worker that never
 * reads its answers) cutting off only the offender. The same behaviours
 * through libkvring are in test_server_worker.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grp.h>
#include <stdio.h>

#include <criterion/criterion.h>
#include <xxhash.h>

#include <kvring/doorbell.h>

#include "t_raw.h"
#include "t_server.h"

static struct kvrd srv;

static void setup(void)
{
	t_server_init(&srv);
}

static void teardown(void)
{
	t_server_cleanup(&srv);
}

TestSuite(server_proto, .init = setup, .fini = teardown, .timeout = 30);

static struct kvr_key key_of(uint64_t i)
{
	struct kvr_key k = {.lo = 0x9e3779b97f4a7c15ull * (i + 1),
			    .hi = i ^ 0xabcdefull};
	return k;
}

/* An answer buffer big enough for every test here. */
union ans {
	struct kvr_resp_hdr h;
	char b[65536];
};

static const struct kvr_slot_desc *slots_of(const union ans *a)
{
	return (const struct kvr_slot_desc *)(&a->h + 1);
}

Test(server_proto, store_then_retrieve_returns_same_bytes_when_shm_transport)
{
	struct kvr_key k[3] = {key_of(1), key_of(2), key_of(3)};
	uint64_t sz[3] = {5000, 4096, 100};
	struct t_raw r;
	union ans a;
	uint64_t xfer;
	int len;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0, "%s", r.w.reason);
	cr_expect_eq(r.w.transport, KVR_TRANSPORT_SHM);
	cr_assert_not_null(r.pool);

	len =
	    t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 3, &a, sizeof(a));
	cr_assert_eq(len, (int)kvr_resp_bytes(3), "len %d", len);
	cr_assert_eq(a.h.status, 0);
	cr_expect_eq(a.h.req_id, 1);
	cr_assert_eq(a.h.count, 3);
	xfer = a.h.handle;
	cr_assert_neq(xfer, 0);
	for (int i = 0; i < 3; i++) {
		const struct kvr_slot_desc *s = &slots_of(&a)[i];

		cr_assert_eq(s->status, KVR_SLOT_OK);
		cr_assert_eq(s->len, sz[i]);
		memset((char *)r.pool + s->off, 'a' + i, s->len);
	}
	/* Reserved but not committed: not visible to lookup. */
	t_raw_call(&r, KVR_OP_LOOKUP, 0, 0, k, NULL, 3, &a, sizeof(a));
	cr_expect_eq(a.h.value, 0);
	t_raw_call(&r, KVR_OP_COMMIT_STORE, xfer, 0, NULL, NULL, 0, &a,
		   sizeof(a));
	cr_assert_eq(a.h.status, 0);
	t_raw_call(&r, KVR_OP_LOOKUP, 0, 0, k, NULL, 3, &a, sizeof(a));
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(a.h.value, 3);

	t_raw_call(&r, KVR_OP_PREPARE_RETRIEVE, 0, 0, k, NULL, 3, &a,
		   sizeof(a));
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(a.h.count, 3);
	for (int i = 0; i < 3; i++) {
		const struct kvr_slot_desc *s = &slots_of(&a)[i];
		const unsigned char *p = (const unsigned char *)r.pool + s->off;

		cr_assert_eq(s->len, sz[i]);
		for (uint64_t j = 0; j < s->len; j++)
			cr_assert_eq(p[j], 'a' + i, "slot %d byte %llu", i,
				     (unsigned long long)j);
	}
	xfer = a.h.handle;
	t_raw_call(&r, KVR_OP_COMMIT_RETRIEVE, xfer, 0, NULL, NULL, 0, &a,
		   sizeof(a));
	cr_expect_eq(a.h.status, 0);
	/* A transfer id used twice is an error answer, not a disconnect. */
	t_raw_call(&r, KVR_OP_COMMIT_RETRIEVE, xfer, 0, NULL, NULL, 0, &a,
		   sizeof(a));
	cr_expect_eq(a.h.status, -ENOENT);
	t_raw_call(&r, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a, sizeof(a));
	cr_expect_eq(a.h.status, 0);
	cr_expect_gt(a.h.value, 0);
	cr_expect_eq(T_CSTAT(&srv, r.w.channel, requests[KVR_OP_LOOKUP]), 2);
	t_raw_close(&r);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server_proto, store_is_noop_success_when_keys_exist)
{
	struct kvr_key k[2] = {key_of(7), key_of(8)};
	uint64_t sz[2] = {4096, 4096};
	struct t_raw r;
	union ans a;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	cr_assert_eq(t_raw_store(&r, k, sz, 2, &a, sizeof(a)), 0);
	t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 2, &a, sizeof(a));
	cr_assert_eq(a.h.status, 0);
	cr_expect_eq(a.h.handle, 0, "nothing reserved, no transfer");
	cr_expect_eq(slots_of(&a)[0].status, KVR_SLOT_EXISTS);
	cr_expect_eq(slots_of(&a)[1].status, KVR_SLOT_EXISTS);
	/* Committing "nothing" succeeds (the seed's bug 1). */
	t_raw_call(&r, KVR_OP_COMMIT_STORE, 0, 0, NULL, NULL, 0, &a, sizeof(a));
	cr_expect_eq(a.h.status, 0);
	t_raw_close(&r);
}

Test(server_proto, lease_made_by_one_worker_is_redeemed_by_another)
{
	struct kvr_key k = key_of(3);
	uint64_t sz = 8192;
	struct t_raw a1, a2;
	union ans a;
	uint64_t lease;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &a1), 0);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &a2), 0);
	cr_expect_neq(a1.w.channel, a2.w.channel);
	cr_expect_eq(a1.w.ns_id, a2.w.ns_id, "same layout, same namespace");
	t_raw_call(&a1, KVR_OP_PREPARE_STORE, 0, 0, &k, &sz, 1, &a, sizeof(a));
	t_raw_call(&a1, KVR_OP_COMMIT_STORE, a.h.handle, 0, NULL, NULL, 0, &a,
		   sizeof(a));
	t_raw_call(&a1, KVR_OP_LOOKUP, 0, KVR_REQ_PIN, &k, NULL, 1, &a,
		   sizeof(a));
	cr_assert_eq(a.h.value, 1);
	lease = a.h.handle;
	cr_assert_neq(lease, 0);
	/* Only the owner may release it; to anyone else it looks unknown ... */
	t_raw_call(&a2, KVR_OP_RELEASE, lease, 0, NULL, NULL, 0, &a, sizeof(a));
	cr_expect_eq(a.h.status, -ENOENT, "status %d", a.h.status);
	/* ... but anyone may redeem it. */
	t_raw_call(&a2, KVR_OP_PREPARE_RETRIEVE, lease, KVR_REQ_BY_LEASE, NULL,
		   NULL, 0, &a, sizeof(a));
	cr_assert_eq(a.h.status, 0);
	cr_expect_eq(a.h.count, 1);
	t_raw_call(&a2, KVR_OP_COMMIT_RETRIEVE, a.h.handle, 0, NULL, NULL, 0,
		   &a, sizeof(a));
	cr_expect_eq(a.h.status, 0);
	t_raw_close(&a1);
	t_raw_close(&a2);
}

static bool one_refused(void *arg)
{
	return T_GSTAT((struct kvrd *)arg, handshake_refused) == 1;
}

Test(server_proto, welcome_refuses_eproto_when_version_differs)
{
	struct kvr_hello h = {.magic = KVR_PROTO_MAGIC,
			      .version = KVR_PROTO_VERSION + 1};
	struct kvr_welcome w;
	int fds[T_RAW_FDS], nfds, fd;

	t_server_start(&srv, NULL);
	t_ns_default(&h.ns);
	fd = t_raw_sock(srv.sock);
	cr_assert_geq(fd, 0);
	/* A future hello may be longer: the version is still named. */
	char big[sizeof(h) + 16] = {0};

	memcpy(big, &h, sizeof(h));
	cr_assert_eq(t_raw_send_frame(fd, KVR_FRAME_HELLO, big, sizeof(big)),
		     0);
	cr_assert_eq(t_raw_read_welcome(fd, &w, fds, &nfds, 5000), 0);
	cr_expect_eq(w.status, -EPROTO);
	cr_expect_eq(nfds, 0);
	char want[64];

	snprintf(want, sizeof(want), "version %u", KVR_PROTO_VERSION + 1);
	cr_expect_not_null(strstr(w.reason, want), "%s", w.reason);
	snprintf(want, sizeof(want), "speaks %u", KVR_PROTO_VERSION);
	cr_expect_not_null(strstr(w.reason, want), "%s", w.reason);
	close(fd);
	cr_expect(t_wait_until(one_refused, &srv, 5000));
}

Test(server_proto, welcome_refuses_ebadmsg_when_hello_is_garbage)
{
	char junk[112];
	struct kvr_welcome w;
	int fds[T_RAW_FDS], nfds, fd;

	t_server_start(&srv, NULL);
	memset(junk, 0x5a, sizeof(junk));
	fd = t_raw_sock(srv.sock);
	cr_assert_eq(t_raw_send_frame(fd, KVR_FRAME_HELLO, junk, sizeof(junk)),
		     0);
	cr_assert_eq(t_raw_read_welcome(fd, &w, fds, &nfds, 5000), 0);
	cr_expect_eq(w.status, -EPROTO, "bad magic: %d %s", w.status, w.reason);
	close(fd);

	/* Not even a hello frame. */
	fd = t_raw_sock(srv.sock);
	cr_assert_eq(t_raw_send_frame(fd, 0x1234, junk, 16), 0);
	cr_assert_eq(t_raw_read_welcome(fd, &w, fds, &nfds, 5000), 0);
	cr_expect_eq(w.status, -EBADMSG);
	close(fd);

	/* A hello frame claiming a huge body. */
	fd = t_raw_sock(srv.sock);
	struct kvr_frame f = {.len = 1u << 30, .type = KVR_FRAME_HELLO};

	cr_assert_eq(send(fd, &f, sizeof(f), 0), (ssize_t)sizeof(f));
	cr_assert_eq(t_raw_read_welcome(fd, &w, fds, &nfds, 5000), 0);
	cr_expect_eq(w.status, -EBADMSG);
	close(fd);
}

Test(server_proto, client_is_dropped_when_hello_is_half_sent)
{
	const char *args[] = {"--handshake-ms", "200", NULL};
	struct kvr_hello h = {.magic = KVR_PROTO_MAGIC,
			      .version = KVR_PROTO_VERSION};
	struct kvr_frame f = {.len = sizeof(h), .type = KVR_FRAME_HELLO};
	struct t_raw r;
	struct kvr_welcome w;
	int fds[T_RAW_FDS], nfds, fd, silent;

	t_server_start(&srv, args);
	fd = t_raw_sock(srv.sock);
	silent = t_raw_sock(srv.sock); /* connects and sends nothing */
	cr_assert_eq(send(fd, &f, sizeof(f), 0), (ssize_t)sizeof(f));
	cr_assert_eq(send(fd, &h, 20, 0), 20);
	/* Dropped without a welcome. */
	cr_expect_eq(t_raw_read_welcome(fd, &w, fds, &nfds, t_timeout_ms(5000)),
		     -EPIPE);
	cr_expect_eq(
	    t_raw_read_welcome(silent, &w, fds, &nfds, t_timeout_ms(5000)),
	    -EPIPE);
	close(fd);
	close(silent);
	cr_expect(t_server_log_has(&srv, "handshake timeout"));
	/* The server carries on. */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	t_raw_close(&r);
	/* Mid-handshake disconnect. */
	fd = t_raw_sock(srv.sock);
	cr_assert_eq(send(fd, &f, sizeof(f), 0), (ssize_t)sizeof(f));
	close(fd);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	t_raw_close(&r);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server_proto, welcome_refuses_eacces_when_uid_differs)
{
	struct t_raw r;
	pid_t pid;
	int st;

	if (geteuid() != 0)
		cr_skip("needs root to run a client under another uid");
	t_server_start(&srv, NULL);
	/* Open the socket file to everyone so that only the server's own
	 * SO_PEERCRED check stands in the way. */
	cr_assert_eq(chmod(srv.sock, 0666), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(3);
		int rc = t_raw_connect(srv.sock, 0, &r);

		_exit(rc == -EACCES && strstr(r.w.reason, "uid 65534") ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	cr_expect_eq(T_GSTAT(&srv, workers), 0);
	/* Our own uid is still welcome. */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	t_raw_close(&r);
}

Test(server_proto, welcome_refuses_ebusy_when_all_channels_are_taken)
{
	const char *args[] = {"--max-workers", "1", NULL};
	struct t_raw r1, r2;

	t_server_start(&srv, args);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r1), 0);
	cr_expect_eq(t_raw_connect(srv.sock, 0, &r2), -EBUSY);
	cr_expect_not_null(strstr(r2.w.reason, "--max-workers"), "%s",
			   r2.w.reason);
	t_raw_close(&r2);
	t_raw_close(&r1);
}

static bool workers_zero(void *arg)
{
	return T_GSTAT((struct kvrd *)arg, workers) == 0;
}

Test(server_proto, worker_is_cut_off_when_it_writes_garbage_in_its_ring)
{
	struct t_raw bad, good;
	struct kvr_ring_shm *rs;
	union ans a;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &bad), 0);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &good), 0);
	cr_assert_eq(
	    t_raw_call(&good, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a, sizeof(a)),
	    (int)sizeof(a.h));

	/* Garbage bytes published as if they were a record. */
	rs = (struct kvr_ring_shm *)((char *)bad.ch + bad.ch->req_ring_off);
	memset(rs->data, 0xee, 256);
	atomic_store_explicit(&rs->tail, 256, memory_order_release);
	kvr_bell_notify(&bad.ch->req_bell, bad.req_efd);
	cr_expect(t_raw_wait_hangup(&bad, t_timeout_ms(5000)),
		  "the garbage writer was not disconnected");

	/* The other worker is unaffected. */
	for (int i = 0; i < 100; i++)
		cr_assert_eq(t_raw_call(&good, KVR_OP_PING, 0, 0, NULL, NULL, 0,
					&a, sizeof(a)),
			     (int)sizeof(a.h));
	cr_expect_eq(a.h.status, 0);
	cr_expect_eq(T_GSTAT(&srv, protocol_errors), 1);
	cr_expect(t_server_log_has(&srv, "protocol error"));
	cr_expect_eq(T_GSTAT(&srv, workers), 1);
	t_raw_close(&good);
	cr_expect(t_wait_until(workers_zero, &srv, 5000));
	t_raw_close(&bad);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server_proto, worker_is_cut_off_when_a_record_is_malformed)
{
	struct t_raw r, other;
	struct kvr_req_view ping = {.op = KVR_OP_PING, .hdr = {.req_id = 9}};
	union ans a;
	void *p;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &other), 0);
	/* A good ping from the encoder, then the damage: reserved set. */
	cr_assert_eq(kvr_ring_claim(&r.req, KVR_OP_PING, 32, &p), 0);
	cr_assert_eq(kvr_req_encode(&ping, p, 32), 32);
	((struct kvr_req_hdr *)p)->reserved = 1;
	kvr_ring_commit(&r.req);
	kvr_bell_notify(&r.ch->req_bell, r.req_efd);
	cr_expect(t_raw_wait_hangup(&r, t_timeout_ms(5000)));
	cr_expect(t_server_log_has(&srv, "malformed request"));
	cr_expect_eq(
	    t_raw_call(&other, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a, sizeof(a)),
	    (int)sizeof(a.h));
	t_raw_close(&r);
	t_raw_close(&other);
}

Test(server_proto, worker_is_cut_off_when_it_never_reads_answers)
{
	const char *args[] = {"--stall-ms", "200",	  "--ring-bytes",
			      "64K",	    "--max-keys", "256",
			      NULL};
	struct kvr_req_view ping = {.op = KVR_OP_PING};
	struct t_raw r;
	int sent = 0;

	t_server_start(&srv, args);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	/* Keep publishing pings and never consume an answer. */
	for (int i = 0; i < 20000 && !t_raw_wait_hangup(&r, 0); i++) {
		ping.hdr.req_id = (uint64_t)i + 1;
		if (t_raw_push(&r, &ping, true) == 0) {
			sent++;
		} else {
			usleep(1000);
		}
	}
	cr_expect(t_raw_wait_hangup(&r, t_timeout_ms(5000)));
	cr_expect_gt(sent, 1000, "sent %d", sent);
	cr_expect(t_server_log_has(&srv, "unresponsive"));
	t_raw_close(&r);
}

/* ---- copy transport, by hand ---- */

static void read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (char *)buf + got, len - got, 0);

		cr_assert_gt(n, 0, "server closed the copy socket");
		got += (size_t)n;
	}
}

/* Send a request frame (the record kvr_req_encode() makes of @v, then an
 * optional payload), read the answer frame header and record; payload
 * bytes, if any, follow on the socket. */
static void copy_call(int fd, const struct kvr_req_view *v, const void *payload,
		      size_t payload_len, struct kvr_frame *fr_out,
		      union ans *a)
{
	struct kvr_frame f = {.type = v->op};
	char rec[4096];
	int len = kvr_req_encode(v, rec, sizeof(rec));

	cr_assert_gt(len, 0, "encode %s: %d", kvr_op_name(v->op), len);
	f.len = (uint32_t)((size_t)len + payload_len);
	cr_assert_eq(send(fd, &f, sizeof(f), 0), (ssize_t)sizeof(f));
	cr_assert_eq(send(fd, rec, (size_t)len, 0), (ssize_t)len);
	if (payload_len)
		cr_assert_eq(send(fd, payload, payload_len, 0),
			     (ssize_t)payload_len);
	read_full(fd, fr_out, sizeof(*fr_out));
	cr_assert_eq(fr_out->type, KVR_RESP_BIT | v->op);
	read_full(fd, &a->h, sizeof(a->h));
	if (a->h.count)
		read_full(fd, (char *)&a->h + sizeof(a->h),
			  a->h.count * sizeof(struct kvr_slot_desc));
}

static void copy_roundtrip(struct t_raw *r)
{
	struct kvr_key k[2] = {key_of(11), key_of(12)};
	uint64_t sz[2] = {3000, 70000};
	char *payload, *back;
	struct kvr_req_view v = {.op = KVR_OP_PREPARE_STORE,
				 .hdr = {.req_id = 1, .count = 2},
				 .keys = k,
				 .sizes = sz};
	struct kvr_frame fr;
	union ans a;
	uint64_t xfer;

	payload = malloc(sz[0] + sz[1]);
	back = malloc(sz[0] + sz[1]);
	for (uint64_t i = 0; i < sz[0] + sz[1]; i++)
		payload[i] = (char)(i * 7 + 3);
	copy_call(r->sock, &v, NULL, 0, &fr, &a);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(a.h.count, 2);
	cr_assert_eq(slots_of(&a)[1].status, KVR_SLOT_OK);
	xfer = a.h.handle;
	v = (struct kvr_req_view){.op = KVR_OP_COMMIT_STORE,
				  .hdr = {.req_id = 2, .handle = xfer}};
	copy_call(r->sock, &v, payload, sz[0] + sz[1], &fr, &a);
	cr_assert_eq(a.h.status, 0, "commit: %d", a.h.status);
	v = (struct kvr_req_view){.op = KVR_OP_PREPARE_RETRIEVE,
				  .hdr = {.req_id = 3, .count = 2},
				  .keys = k};
	copy_call(r->sock, &v, NULL, 0, &fr, &a);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(a.h.count, 2);
	cr_assert_eq(fr.len, kvr_resp_bytes(2) + sz[0] + sz[1]);
	read_full(r->sock, back, sz[0] + sz[1]);
	cr_expect_eq(memcmp(payload, back, sz[0] + sz[1]), 0,
		     "retrieved bytes differ");
	v = (struct kvr_req_view){.op = KVR_OP_COMMIT_RETRIEVE,
				  .hdr = {.req_id = 4, .handle = a.h.handle}};
	copy_call(r->sock, &v, NULL, 0, &fr, &a);
	cr_expect_eq(a.h.status, 0);
	free(payload);
	free(back);
}

Test(server_proto, copy_transport_moves_bytes_when_worker_asks_for_it)
{
	struct t_raw r;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, KVR_HELLO_WANT_COPY, &r), 0);
	cr_expect_eq(r.w.transport, KVR_TRANSPORT_COPY);
	cr_expect_null(r.pool, "no pool fd under the copy transport");
	copy_roundtrip(&r);
	cr_expect(t_server_log_has(&srv, "COPY transport"));
	t_raw_close(&r);
}

Test(server_proto, copy_transport_is_used_when_pool_is_private)
{
	const char *args[] = {"--pool-backend", "private", NULL};
	struct t_raw r;

	t_server_start(&srv, args);
	cr_expect_eq(srv.hdr->pool_backend, KVR_POOL_PRIVATE);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	cr_expect_eq(r.w.transport, KVR_TRANSPORT_COPY);
	copy_roundtrip(&r);
	t_raw_close(&r);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server_proto, copy_worker_is_cut_off_when_commit_length_is_wrong)
{
	struct kvr_key k = key_of(5);
	uint64_t sz = 1000;
	struct kvr_req_view v = {.op = KVR_OP_PREPARE_STORE,
				 .hdr = {.req_id = 1, .count = 1},
				 .keys = &k,
				 .sizes = &sz};
	char rec[32];
	struct kvr_frame fr = {0};
	union ans a;
	struct t_raw r;
	char pay[10] = {0};

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, KVR_HELLO_WANT_COPY, &r), 0);
	copy_call(r.sock, &v, NULL, 0, &fr, &a);
	cr_assert_eq(a.h.status, 0);
	v = (struct kvr_req_view){.op = KVR_OP_COMMIT_STORE,
				  .hdr = {.req_id = 2, .handle = a.h.handle}};
	cr_assert_eq(kvr_req_encode(&v, rec, sizeof(rec)), (int)sizeof(rec));
	fr.type = KVR_OP_COMMIT_STORE;
	fr.len = sizeof(rec) + sizeof(pay); /* 10 bytes, 1000 reserved */
	cr_assert_eq(send(r.sock, &fr, sizeof(fr), 0), (ssize_t)sizeof(fr));
	cr_assert_eq(send(r.sock, rec, sizeof(rec), 0), (ssize_t)sizeof(rec));
	(void)!send(r.sock, pay, sizeof(pay), MSG_NOSIGNAL);
	cr_expect(t_raw_wait_hangup(&r, t_timeout_ms(5000)));
	cr_expect(t_server_log_has(&srv, "carries 10 payload bytes"));
	cr_expect(t_wait_until(workers_zero, &srv, 5000));
	cr_expect_eq(T_GSTAT(&srv, reserved_bytes), 0,
		     "the reservation must be freed");
	t_raw_close(&r);
}

/* A copy-transport prepare_store of one 1000-byte chunk; its transfer. */
static uint64_t copy_reserve(struct t_raw *r, struct kvr_key *k)
{
	uint64_t sz = 1000;
	struct kvr_req_view v = {.op = KVR_OP_PREPARE_STORE,
				 .hdr = {.req_id = 1, .count = 1},
				 .keys = k,
				 .sizes = &sz};
	struct kvr_frame fr = {0};
	union ans a;

	copy_call(r->sock, &v, NULL, 0, &fr, &a);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(slots_of(&a)[0].status, KVR_SLOT_OK);
	return a.h.handle;
}

Test(server_proto, copy_commit_carries_sums_between_record_and_payload)
{
	struct kvr_key k = key_of(21);
	char pay[1000];
	uint64_t sum;
	struct kvr_req_view v;
	struct kvr_frame fr = {0};
	union ans a;
	struct t_raw r;
	const uint64_t *sums;

	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (char)(i * 13 + 1);
	sum = XXH3_64bits(pay, sizeof(pay));
	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, KVR_HELLO_WANT_COPY, &r), 0);
	v = (struct kvr_req_view){.op = KVR_OP_COMMIT_STORE,
				  .hdr = {.req_id = 2,
					  .handle = copy_reserve(&r, &k),
					  .count = 1,
					  .flags = KVR_REQ_SUMS},
				  .words = &sum};
	copy_call(r.sock, &v, pay, sizeof(pay), &fr, &a);
	cr_assert_eq(a.h.status, 0);
	/* The server kept the worker's sum and answers it, ahead of the
	 * payload, to a retrieve that asks for sums. */
	v = (struct kvr_req_view){
	    .op = KVR_OP_PREPARE_RETRIEVE,
	    .hdr = {.req_id = 3, .count = 1, .flags = KVR_REQ_SUMS},
	    .keys = &k};
	copy_call(r.sock, &v, NULL, 0, &fr, &a);
	cr_assert_eq(a.h.status, 0);
	cr_assert_eq(a.h.count, 1);
	cr_assert_eq(fr.len, kvr_resp_sums_bytes(1) + sizeof(pay));
	read_full(r.sock, (char *)&a + kvr_resp_bytes(1), sizeof(uint64_t));
	sums = (const uint64_t *)((const char *)&a + kvr_resp_bytes(1));
	cr_expect(slots_of(&a)[0].reserved & KVR_SLOT_F_SUM);
	cr_expect_eq(sums[0], sum, "sum %llx, sent %llx",
		     (unsigned long long)sums[0], (unsigned long long)sum);
	t_raw_close(&r);
}

Test(server_proto, copy_worker_is_cut_off_when_commit_sums_overrun_the_frame)
{
	struct kvr_key k = key_of(22);
	uint64_t xfer;
	struct kvr_req_hdr h = {
	    .req_id = 2, .count = 200, .flags = KVR_REQ_SUMS};
	struct kvr_frame fr = {.type = KVR_OP_COMMIT_STORE};
	char pay[1000] = {0};
	struct t_raw r;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, KVR_HELLO_WANT_COPY, &r), 0);
	xfer = copy_reserve(&r, &k);
	/* 200 sums (1600 bytes) announced in a frame of 1032: the header
	 * is all the record there can be, and it does not parse. (A count
	 * the frame can hold eats into the payload, which then falls short
	 * of the reservation: cut off as well.) */
	h.handle = xfer;
	fr.len = sizeof(h) + sizeof(pay);
	cr_assert_eq(send(r.sock, &fr, sizeof(fr), 0), (ssize_t)sizeof(fr));
	cr_assert_eq(send(r.sock, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	(void)!send(r.sock, pay, sizeof(pay), MSG_NOSIGNAL);
	cr_expect(t_raw_wait_hangup(&r, t_timeout_ms(5000)));
	cr_expect(t_server_log_has(&srv, "malformed commit_store request"));
	cr_expect(t_wait_until(workers_zero, &srv, 5000));
	cr_expect_eq(T_GSTAT(&srv, reserved_bytes), 0,
		     "the reservation must be freed");
	t_raw_close(&r);
}

Test(server_proto, peer_of_the_group_is_accepted_when_group_is_set)
{
	const char *args[] = {"--group", "65534", NULL};
	char ctl[128];
	struct stat st;
	struct t_raw r;
	pid_t pid;
	int wst;

	if (geteuid() != 0)
		cr_skip("needs root to run a client under another uid");
	t_server_start(&srv, args);
	cr_assert_eq(stat(srv.sock, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0660, "socket mode %o", st.st_mode);
	cr_expect_eq(st.st_gid, 65534);
	snprintf(ctl, sizeof(ctl), "/dev/shm/%s.ctl", srv.name);
	cr_assert_eq(stat(ctl, &st), 0);
	/* abi 3.0: no write bit for anyone; the group reads it. */
	cr_expect_eq(st.st_mode & 0777, 0440, "ctl mode %o", st.st_mode);
	cr_expect_eq(st.st_gid, 65534);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		union ans a;

		if (setgroups(0, NULL) < 0 ||
		    setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(3);
		if (t_raw_connect(srv.sock, 0, &r) != 0)
			_exit(1);
		if (t_raw_call(&r, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a,
			       sizeof(a)) != (int)sizeof(a.h))
			_exit(2);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &wst, 0), pid);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "child status %d",
		  wst);
}
