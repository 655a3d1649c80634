/* SPDX-License-Identifier: MIT */
/*
 * Description: hostile handshakes: one abandoned half way, the wrong version,
 * sockets that stay silent, throwaway models filling the namespace table,
 * a forged creator pid that would get a live server swept.
 * Each against a real kvringd, beside a well-behaved worker
 * (hostile_suite.h).
 */
#include "hostile_suite.h"

static bool sock_closed(int fd)
{
	char b[512];
	ssize_t n;

	while ((n = recv(fd, b, sizeof(b), MSG_DONTWAIT)) > 0)
		;
	return n == 0 || (n < 0 && errno != EAGAIN);
}

static bool pending_gone(void *arg)
{
	(void)arg;
	return T_GSTAT(&srv, workers) == 1;
}

Test(hostile, server_cleans_up_when_worker_disconnects_mid_handshake)
{
	struct kvr_hello hello = {.magic = KVR_PROTO_MAGIC,
				  .version = KVR_PROTO_VERSION};
	struct kvr_frame f = {.len = sizeof(hello), .type = KVR_FRAME_HELLO};
	int fd;

	hello.pid = (int32_t)getpid();
	t_ns_default(&hello.ns);
	/* 1: half a hello, then gone. */
	fd = t_raw_sock(srv.sock);
	cr_assert_geq(fd, 0);
	cr_assert_eq(send(fd, &f, sizeof(f), MSG_NOSIGNAL), (ssize_t)sizeof(f));
	cr_assert_eq(send(fd, &hello, 40, MSG_NOSIGNAL), 40);
	usleep(50000);
	close(fd);
	/* 2: a whole hello, then gone before reading the welcome and its
	 * descriptors (the server has claimed a channel by then). */
	fd = t_raw_sock(srv.sock);
	cr_assert_eq(
	    t_raw_send_frame(fd, KVR_FRAME_HELLO, &hello, sizeof(hello)), 0);
	close(fd);
	/* 3: connected and silent: dropped at the handshake deadline. */
	fd = t_raw_sock(srv.sock);
	cr_assert_geq(fd, 0);
	expect_good_progress(10, "during the silent handshake");
	cr_expect(t_wait_until(pending_gone, NULL, 5000));
	usleep(700000); /* past --handshake-ms 500 */
	cr_expect(sock_closed(fd), "silent client not dropped");
	close(fd);
	cr_expect(t_server_log_has(&srv, "left during the handshake"));
	cr_expect(t_server_log_has(&srv, "handshake timeout"));
	expect_good_progress(20, "after the abandoned handshakes");
	expect_no_leak("after the abandoned handshakes");
	finish();
}

Test(hostile, worker_is_refused_when_hello_has_wrong_version)
{
	struct kvr_hello hello = {.magic = KVR_PROTO_MAGIC,
				  .version = KVR_PROTO_VERSION + 1};
	struct kvr_welcome w;
	int fd, fds[T_RAW_FDS], nfds;
	char b[8];

	hello.pid = (int32_t)getpid();
	t_ns_default(&hello.ns);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			hello.version = KVR_PROTO_VERSION;
			hello.magic = 0xdeadbeef;
		}
		fd = t_raw_hello(srv.sock, &hello, &w, fds, &nfds);
		cr_assert_geq(fd, 0, "pass %d: %d", pass, fd);
		cr_expect_lt(w.status, 0, "pass %d accepted", pass);
		if (pass == 0)
			cr_expect_eq(w.status, -EPROTO, "status %d", w.status);
		cr_expect_eq(nfds, 0, "a refusal carries no fds");
		cr_expect_neq(w.reason[0], 0, "no reason given");
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		cr_expect_eq(recv(fd, b, sizeof(b), 0), 0,
			     "socket left open after the refusal");
		close(fd);
	}
	cr_expect(t_server_log_has(&srv, "refused worker"));
	cr_expect_eq(T_GSTAT(&srv, handshake_refused), 2);
	expect_good_progress(20, "after the refusals");
	expect_no_leak("after the refusals");
	finish();
}

Test(hostile, silent_sockets_do_not_keep_a_worker_out)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char err[256] = "";
	uint64_t ns = 0;
	int fds[100], rc;

	expect_good_progress(10, "before");
	for (int i = 0; i < 100; i++) {
		fds[i] = t_raw_sock(srv.sock);
		cr_assert_geq(fds[i], 0, "socket %d: %d", i, fds[i]);
	}
	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	o.timeout_ms = (uint32_t)t_timeout_ms(100);
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_expect_eq(rc, 0, "connect beside 100 silent sockets: %d %s", rc,
		     err);
	if (rc == 0) {
		cr_expect_eq(kvr_ping(c, &ns), 0);
		kvr_close(c);
	}
	cr_expect(t_server_log_has(&srv, "dropped the oldest pending "
					 "handshake"));
	for (int i = 0; i < 100; i++)
		close(fds[i]);
	expect_good_progress(20, "after the silent sockets");
	expect_no_leak("after the silent sockets");
	finish();
}

/*
 * Observed on main: 256 connect/close cycles with throw-away model names
 * filled the namespace table until the server restarted; the next new
 * model got -ENOSPC. Now entries are counted by channels and objects and
 * freed when unused: ten times the table's size of throw-away names (some
 * of them leaving a cached object behind) still leave room.
 */
Test(hostile, throwaway_models_leave_room_for_a_new_one)
{
	struct kvr_ns_desc ns;
	struct t_raw r;
	union ans a;
	int rc;

	t_ns_default(&ns);
	for (uint32_t i = 0; i < 2560; i++) {
		snprintf(ns.model, sizeof(ns.model), "junk-%u", i);
		rc = t_raw_connect_ns(srv.sock, 0, &ns, &r);
		for (int tries = 0; rc == -EBUSY && tries < 100; tries++) {
			usleep(10000); /* last cycles' hang-ups still queued */
			rc = t_raw_connect_ns(srv.sock, 0, &ns, &r);
		}
		cr_assert_eq(rc, 0, "cycle %u: %d %s", i, rc, r.w.reason);
		if (i % 64 == 0) {
			struct kvr_key k = bad_key(7000 + i);
			uint64_t sz = 4096;

			t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, &k, &sz, 1,
				   &a, sizeof(a));
			cr_assert_eq(a.h.status, 0);
			t_raw_call(&r, KVR_OP_COMMIT_STORE, a.h.handle, 0, NULL,
				   NULL, 0, &a, sizeof(a));
		}
		t_raw_close(&r);
	}
	snprintf(ns.model, sizeof(ns.model), "a-new-model");
	rc = t_raw_connect_ns(srv.sock, 0, &ns, &r);
	cr_expect_eq(rc, 0, "a new model after the throw-away ones: %d %s", rc,
		     r.w.reason);
	if (rc == 0)
		t_raw_close(&r);
	expect_good_progress(20, "after the throw-away models");
	expect_no_leak("after the throw-away models");
	finish();
}

/*
 * Observed on main: a worker wrote a dead pid into the header's creator
 * pid, and a second kvringd with the same --name swept the live server's
 * segments as stale (and the first, at exit, unlinked the second's files
 * by name). Liveness is the live server's lock now, which no worker can
 * take away: the second server finds the name in use and does not start,
 * and the live server's segment is the same file afterwards.
 */
Test(hostile, forged_creator_pid_does_not_get_a_live_server_swept)
{
	struct kvrd b;
	struct kvr_seg_hdr_shm *h;
	struct stat before, after;
	char ctl_path[160];
	struct t_raw r;
	pid_t dead, pid;
	int st;

	dead = fork();
	cr_assert_geq(dead, 0);
	if (dead == 0)
		_exit(0);
	cr_assert_eq(waitpid(dead, NULL, 0), dead);
	snprintf(ctl_path, sizeof(ctl_path), "/dev/shm/%s", srv.ctl_name);
	cr_assert_eq(stat(ctl_path, &before), 0);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	/* A worker cannot write the header any more (abi 3.0; see
	 * worker_cannot_write_the_header): forge it out of band,
	 * as root, through a writable mapping of the file itself. */
	{
		int fd = open(ctl_path, O_RDWR | O_CLOEXEC);

		cr_assert_geq(fd, 0, "open %s as root: %s", ctl_path,
			      strerror(errno));
		h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, 0);
		close(fd);
		cr_assert_neq(h, MAP_FAILED);
	}
	h->creator_pid = (int32_t)dead;
	h->creator_start = 1;
	t_server_init(&b);
	{
		const char *argv[] = {
		    "kvringd",	    "--socket",	   b.sock, "--name",
		    srv.name,	    "--pool-size", "16M",  "--no-prefault",
		    "--huge-pages", "off",	   NULL};

		pid = t_server_spawn(&b, argv);
	}
	st = t_server_wait_exit(pid, t_timeout_ms(5000));
	cr_expect(st > 0 && st < 128,
		  "a second kvringd with the live server's name started "
		  "(status %d)",
		  st);
	if (!t_server_log_has(&b, "belongs to a live kvringd")) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "cat %s >&2", b.log_path);
		(void)!system(cmd);
		cr_expect_fail("the second server does not say the name is "
			       "taken");
	}
	cr_assert_eq(stat(ctl_path, &after), 0, "the live ctl was removed");
	cr_expect(before.st_ino == after.st_ino,
		  "the live server's ctl was replaced");
	munmap(h, sizeof(*h));
	t_raw_close(&r);
	/* Not t_server_cleanup(&b): its segment names are srv's. */
	unlink(b.sock);
	unlink(b.log_path);
	expect_good_progress(20, "after the forged pid");
	expect_no_leak("after the forged pid");
	finish();
}
