/* SPDX-License-Identifier: MIT */
/*
 * Description: kvringd as a process: --help and usage errors, graceful
 * stop on SIGTERM/SIGINT (exit 0, segments and socket removed, requests
 * still in a ring answered -ESHUTDOWN), single instance per socket and per
 * segment name (the second refuses and the first keeps working), the
 * sweep of a SIGKILLed server's leftovers, the memfd pool backend, and
 * crash cleanup: a worker process SIGKILLed between prepare and commit
 * leaves no reservation or pin behind (read from the control segment);
 * the spinning loop's polling of hot and cold channels (requests found
 * without a doorbell), and the log line that names --objects when the
 * storage engine had to grow.
 * Workers here speak the protocol by hand (t_raw); libkvring workers are
 * in test_server_worker.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

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

TestSuite(server, .init = setup, .fini = teardown, .timeout = 30);

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void shm_path(char *buf, size_t n, const struct kvrd *t,
		     const char *suffix)
{
	snprintf(buf, n, "/dev/shm/%s%s", t->name, suffix);
}

static int run_and_wait(const char *const *argv)
{
	pid_t pid = t_server_spawn(&srv, argv);

	return t_server_wait_exit(pid, t_timeout_ms(10000));
}

Test(server, help_exits_zero_when_asked)
{
	const char *argv[] = {"kvringd", "--help", NULL};

	cr_expect_eq(run_and_wait(argv), 0);
	/* Every flag the issue asks for is documented. */
	const char *flags[] = {"--socket",   "--name",	      "--pool-size",
			       "--align",    "--max-workers", "--spin-us",
			       "--lease-ms", "--group",	      "--pool-backend",
			       "--log-level"};

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		cr_expect(t_server_log_has(&srv, flags[i]), "%s", flags[i]);
}

Test(server, exits_two_when_an_option_is_bad)
{
	const char *a1[] = {"kvringd", "--pool-size", "12Q", NULL};
	const char *a2[] = {"kvringd", "--bogus", NULL};
	const char *a3[] = {"kvringd", "--pool-backend", "disk", NULL};

	cr_expect_eq(run_and_wait(a1), 2);
	cr_expect_eq(run_and_wait(a2), 2);
	cr_expect_eq(run_and_wait(a3), 2);
	cr_expect(t_server_log_has(&srv, "invalid --pool-size '12Q'"));
}

Test(server, exits_zero_and_removes_files_when_sigterm)
{
	char ctl[128], pool[128];

	t_server_start(&srv, NULL);
	shm_path(ctl, sizeof(ctl), &srv, ".ctl");
	shm_path(pool, sizeof(pool), &srv, ".pool");
	cr_assert(exists(ctl) && exists(pool) && exists(srv.sock));
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect_not(exists(ctl), "%s left behind", ctl);
	cr_expect_not(exists(pool), "%s left behind", pool);
	cr_expect_not(exists(srv.sock), "%s left behind", srv.sock);
}

Test(server, exits_zero_when_sigint_with_a_worker_connected)
{
	struct t_raw r;
	char ctl[128];

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	kill(srv.pid, SIGINT);
	cr_expect_eq(t_server_wait_exit(srv.pid, t_timeout_ms(10000)), 0);
	srv.pid = 0;
	cr_expect(t_raw_wait_hangup(&r, 1000), "worker socket left open");
	shm_path(ctl, sizeof(ctl), &srv, ".ctl");
	cr_expect_not(exists(ctl));
	t_raw_close(&r);
}

Test(server, answers_eshutdown_when_stopping_with_requests_in_ring)
{
	/* A long heartbeat keeps the loop asleep until the signal. */
	const char *args[] = {"--heartbeat-ms", "10000", NULL};
	struct kvr_req_view ping = {.op = KVR_OP_PING, .hdr = {.req_id = 77}};
	struct kvr_ring_rec rec;
	struct kvr_resp_hdr a;
	struct t_raw r;
	int rc = -EAGAIN;

	t_server_start(&srv, args);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	usleep(50000); /* let the server go to sleep (spin is 50 us) */
	/* Published without ringing the doorbell: the server, asleep,
	 * only finds it while stopping. */
	cr_assert_eq(t_raw_push(&r, &ping, false), 0);
	cr_expect_eq(t_server_stop(&srv), 0);
	/* The mapping outlives the unlinked segment. */
	for (int i = 0; i < 100 && rc == -EAGAIN; i++) {
		rc = kvr_ring_peek(&r.resp, &rec);
		if (rc == -EAGAIN)
			usleep(1000);
	}
	cr_assert_eq(rc, 0, "no answer to the in-flight request");
	memcpy(&a, rec.data, sizeof(a));
	cr_expect_eq(a.req_id, 77);
	cr_expect_eq(a.status, -ESHUTDOWN, "status %d", a.status);
	t_raw_close(&r);
}

/* kvringd run with @argv into @other's log exits 1 and logs @says. */
static void expect_refused(struct kvrd *other, const char *const *argv,
			   const char *says)
{
	cr_expect_eq(t_server_wait_exit(t_server_spawn(other, argv),
					t_timeout_ms(10000)),
		     1);
	cr_expect(t_server_log_has(other, says), "log lacks \"%s\"", says);
}

Test(server, second_server_refuses_when_socket_is_in_use)
{
	struct kvrd other;
	struct t_raw r;
	union {
		struct kvr_resp_hdr h;
		char b[256];
	} a;
	char ctl[128];
	const char *argv[] = {"kvringd",  "--socket",	 srv.sock, "--name",
			      other.name, "--pool-size", "16M",	   NULL};

	t_server_start(&srv, NULL);
	t_server_init(&other);
	argv[4] = other.name;
	expect_refused(&other, argv, "another kvringd");
	/* The first server and its files are untouched. */
	cr_expect(exists(srv.sock));
	shm_path(ctl, sizeof(ctl), &srv, ".ctl");
	cr_expect(exists(ctl));
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	cr_expect_eq(
	    t_raw_call(&r, KVR_OP_PING, 0, 0, NULL, NULL, 0, &a, sizeof(a)),
	    (int)sizeof(a.h));
	t_raw_close(&r);
	t_server_cleanup(&other);
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server, second_server_refuses_when_segment_name_is_in_use)
{
	struct kvrd other;
	struct t_raw r;
	char ctl[128], pool[128];
	const char *argv[] = {"kvringd", "--socket",	NULL,  "--name",
			      srv.name,	 "--pool-size", "16M", "--huge-pages",
			      "off",	 NULL};

	t_server_start(&srv, NULL);
	t_server_init(&other);
	argv[2] = other.sock;
	expect_refused(&other, argv, "belongs to a live kvringd");
	cr_expect_not(exists(other.sock), "refused server left its socket");
	shm_path(ctl, sizeof(ctl), &srv, ".ctl");
	shm_path(pool, sizeof(pool), &srv, ".pool");
	cr_expect(exists(ctl) && exists(pool));
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	t_raw_close(&r);
	t_server_cleanup(&other);
}

Test(server, stale_files_are_swept_when_previous_server_was_killed)
{
	char ctl[128], pool[128];

	t_server_start(&srv, NULL);
	t_server_kill(&srv);
	shm_path(ctl, sizeof(ctl), &srv, ".ctl");
	shm_path(pool, sizeof(pool), &srv, ".pool");
	cr_assert(exists(ctl) && exists(pool) && exists(srv.sock),
		  "SIGKILL should leave files behind");
	/* Same socket and name: the new server must clean up and start. */
	t_server_start(&srv, NULL);
	cr_expect(t_server_log_has(&srv, "removed stale segment"));
	cr_expect(t_server_log_has(&srv, "removed stale socket"));
	cr_expect_eq(t_server_stop(&srv), 0);
	cr_expect_not(exists(ctl));
}

Test(server, memfd_pool_is_passed_when_backend_is_memfd)
{
	const char *args[] = {"--pool-backend", "memfd", NULL};
	struct kvr_key k = {1, 2};
	uint64_t sz = 12345;
	union {
		struct kvr_resp_hdr h;
		char b[256];
	} a;
	struct kvr_slot_desc s;
	struct t_raw w1, w2;
	char pool[128];

	t_server_start(&srv, args);
	shm_path(pool, sizeof(pool), &srv, ".pool");
	cr_expect_not(exists(pool));
	cr_expect_eq(srv.hdr->pool_backend, KVR_POOL_MEMFD);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &w1), 0);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &w2), 0);
	cr_expect_eq(w1.w.transport, KVR_TRANSPORT_MEMFD);
	cr_assert_not_null(w1.pool);
	t_raw_call(&w1, KVR_OP_PREPARE_STORE, 0, 0, &k, &sz, 1, &a, sizeof(a));
	memcpy(&s, a.b + sizeof(a.h), sizeof(s));
	cr_assert_eq(s.status, KVR_SLOT_OK);
	memset((char *)w1.pool + s.off, 0x42, s.len);
	t_raw_call(&w1, KVR_OP_COMMIT_STORE, a.h.handle, 0, NULL, NULL, 0, &a,
		   sizeof(a));
	/* Another process-level mapping of the same memfd sees the bytes. */
	t_raw_call(&w2, KVR_OP_PREPARE_RETRIEVE, 0, 0, &k, NULL, 1, &a,
		   sizeof(a));
	cr_assert_eq(a.h.count, 1);
	memcpy(&s, a.b + sizeof(a.h), sizeof(s));
	cr_expect_eq(((unsigned char *)w2.pool)[s.off + s.len - 1], 0x42);
	t_raw_close(&w1);
	t_raw_close(&w2);
}

/* ---- crash cleanup with hand-written worker processes ---- */

static bool idle_and_empty(void *arg)
{
	struct kvrd *t = arg;

	return T_GSTAT(t, workers) == 0 && T_GSTAT(t, used_bytes) == 0 &&
	       T_GSTAT(t, reserved_bytes) == 0 && T_GSTAT(t, pins) == 0 &&
	       T_GSTAT(t, transfers) == 0;
}

static bool idle_with_objects(void *arg)
{
	struct kvrd *t = arg;

	return T_GSTAT(t, workers) == 0 && T_GSTAT(t, pins) == 0 &&
	       T_GSTAT(t, reserved_bytes) == 0 && T_GSTAT(t, transfers) == 0 &&
	       T_GSTAT(t, leases) == 0;
}

/* The global counters are mirrored when the loop goes idle or on a
 * heartbeat, so tests wait for them instead of reading them at once. */
static bool some_used(void *arg)
{
	return T_GSTAT((struct kvrd *)arg, used_bytes) > 0;
}

static bool four_pins(void *arg)
{
	return T_GSTAT((struct kvrd *)arg, pins) == 4;
}

/*
 * The server publishes a batch's answers before its channel counters
 * (server/disp.c: answers first), so a child that has its answer may find
 * the channel's counters a batch old: wait for them, as
 * test_server_worker does.
 */
static uint32_t counted_ch;

static bool chan_reserved(void *arg)
{
	return T_CSTAT((struct kvrd *)arg, counted_ch, reserved_bytes) > 0;
}

static bool chan_four_pins(void *arg)
{
	return T_CSTAT((struct kvrd *)arg, counted_ch, pins) == 4;
}

/* The four 64 KiB chunks the kill tests prepare, and their answer. */
static const struct kvr_key k4[4] = {{1, 1}, {2, 2}, {3, 3}, {4, 4}};
static const uint64_t sz4[4] = {65536, 65536, 65536, 65536};
union ans4 {
	struct kvr_resp_hdr h;
	char b[1024];
};

/* Child: connect, @op a prepare (store of the 4 keys, or retrieve),
 * report the channel through @fd, then wait to be killed. */
static void child_prepare(int fd, uint32_t op)
{
	union ans4 a;
	struct t_raw r;
	uint32_t ch;

	if (t_raw_connect(srv.sock, 0, &r) < 0)
		_exit(2);
	t_raw_call(&r, op, 0, 0, k4, sz4, 4, &a, sizeof(a));
	ch = a.h.status == 0 && a.h.handle ? r.w.channel : UINT32_MAX;
	if (write(fd, &ch, sizeof(ch)) != sizeof(ch))
		_exit(3);
	pause();
	_exit(0);
}

static uint32_t fork_prepare(uint32_t op, pid_t *pid)
{
	int p[2];
	uint32_t ch = UINT32_MAX;

	cr_assert_eq(pipe(p), 0);
	*pid = fork();
	cr_assert_geq(*pid, 0);
	if (*pid == 0) {
		close(p[0]);
		child_prepare(p[1], op);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &ch, sizeof(ch)), (ssize_t)sizeof(ch));
	close(p[0]);
	return ch;
}

Test(server, nothing_leaks_when_worker_is_killed_between_prepare_and_commit)
{
	pid_t pid;
	uint32_t ch;

	t_server_start(&srv, NULL);
	ch = fork_prepare(KVR_OP_PREPARE_STORE, &pid);
	cr_assert_neq(ch, UINT32_MAX, "child could not prepare a store");
	counted_ch = ch;
	cr_expect(t_wait_until(chan_reserved, &srv, 5000),
		  "channel %u never showed the child's reservation", ch);
	cr_expect(t_wait_until(some_used, &srv, 5000));
	t_kill_reap(pid);
	cr_expect(t_wait_until(idle_and_empty, &srv, 5000),
		  "used %llu reserved %llu workers %llu",
		  (unsigned long long)T_GSTAT(&srv, used_bytes),
		  (unsigned long long)T_GSTAT(&srv, reserved_bytes),
		  (unsigned long long)T_GSTAT(&srv, workers));
	cr_expect_eq(T_CSTAT(&srv, ch, reserved_bytes), 0);
	cr_expect_eq(T_CSTAT(&srv, ch, transfers), 0);
	cr_expect_eq(atomic_load(&t_server_chan(&srv, ch)->state),
		     KVR_CHAN_FREE);
	cr_expect_eq(T_GSTAT(&srv, objects), 0, "a reservation was published");
	cr_expect_geq(T_GSTAT(&srv, disconnect_cleanups), 1);
	/* The channel is reusable. */
	ch = fork_prepare(KVR_OP_PREPARE_STORE, &pid);
	cr_expect_neq(ch, UINT32_MAX);
	t_kill_reap(pid);
	cr_expect(t_wait_until(idle_and_empty, &srv, 5000));
}

Test(server,
     nothing_leaks_when_worker_is_killed_between_prepare_and_commit_retrieve)
{
	union ans4 a;
	struct t_raw r;
	uint64_t used;
	pid_t pid;
	uint32_t ch;

	t_server_start(&srv, NULL);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	cr_assert_eq(t_raw_store(&r, k4, sz4, 4, &a, sizeof(a)), 0);
	t_raw_close(&r);
	cr_assert(t_wait_until(idle_with_objects, &srv, 5000));
	used = T_GSTAT(&srv, used_bytes);

	ch = fork_prepare(KVR_OP_PREPARE_RETRIEVE, &pid);
	cr_assert_neq(ch, UINT32_MAX, "child could not prepare a retrieve");
	counted_ch = ch;
	cr_expect(t_wait_until(chan_four_pins, &srv, 5000), "pins %llu",
		  (unsigned long long)T_CSTAT(&srv, ch, pins));
	cr_expect(t_wait_until(four_pins, &srv, 5000));
	t_kill_reap(pid);
	cr_expect(t_wait_until(idle_with_objects, &srv, 5000),
		  "pins %llu workers %llu",
		  (unsigned long long)T_GSTAT(&srv, pins),
		  (unsigned long long)T_GSTAT(&srv, workers));
	cr_expect_eq(T_CSTAT(&srv, ch, pins), 0);
	cr_expect_eq(T_GSTAT(&srv, objects), 4, "stored objects stay");
	cr_expect_eq(T_GSTAT(&srv, used_bytes), used);
}

/* Publish a ping on @r without a doorbell: only the loop's polling can
 * find it. Returns its req_id (0 if the ring is full). */
static uint64_t push_unrung(struct t_raw *r)
{
	uint64_t id = r->next_id++;
	struct kvr_req_view v = {.op = KVR_OP_PING, .hdr = {.req_id = id}};

	return t_raw_push(r, &v, false) == 0 ? id : 0;
}

/* Wait up to 2 s for the answer to ping @id on @r: 0, -ETIMEDOUT, -EPROTO
 * (another answer) or the ring's error. */
static int await_pong(struct t_raw *r, uint64_t id)
{
	struct kvr_ring_rec rec;
	struct kvr_resp_hdr a;
	int rc;

	if (id == 0)
		return -EAGAIN;
	for (int i = 0; i < 200000; i++) {
		rc = kvr_ring_peek(&r->resp, &rec);
		if (rc == -EAGAIN) {
			if (i > 1000)
				usleep(10);
			continue;
		}
		if (rc < 0)
			return rc;
		memcpy(&a, rec.data, sizeof(a));
		kvr_ring_release(&r->resp);
		return a.req_id == id && a.status == 0 ? 0 : -EPROTO;
	}
	return -ETIMEDOUT;
}

static int ping_unrung(struct t_raw *r)
{
	return await_pong(r, push_unrung(r));
}

/*
 * The spinning loop polls hot channels on every pass and cold ones a few
 * at a time, round robin: a request published without a doorbell is found
 * on a channel never used, one quiet past the hot window, one in use, two
 * at once, and after channels around it closed (moving the polled list
 * under the round-robin cursor).
 */
Test(server, finds_unrung_requests_on_cold_and_hot_channels)
{
	/* Spinning 1 s after the last work: the loop never sleeps, so no
	 * doorbell and no sleep's full scan helps it. */
	const char *args[] = {"--spin-us", "1000000", NULL};
	enum { N = 24 };
	struct t_raw r[N];
	uint64_t id;

	t_server_start(&srv, args);
	for (int i = 0; i < N; i++)
		cr_assert_eq(t_raw_connect(srv.sock, 0, &r[i]), 0, "conn %d",
			     i);
	for (int round = 0; round < 2; round++) {
		usleep(5000); /* past the 2 ms hot window: all cold */
		for (int i = N; i-- > 0;) {
			cr_expect_eq(ping_unrung(&r[i]), 0, "round %d, cold %d",
				     round, i);
			cr_expect_eq(ping_unrung(&r[i]), 0, "round %d, hot %d",
				     round, i);
		}
	}
	usleep(5000);
	id = push_unrung(&r[4]);
	cr_expect_eq(ping_unrung(&r[17]), 0, "second of two at once");
	cr_expect_eq(await_pong(&r[4], id), 0, "first of two at once");
	for (int i = 0; i < N; i += 3)
		t_raw_close(&r[i]);
	usleep(5000);
	for (int i = 0; i < N; i++)
		if (i % 3)
			cr_expect_eq(ping_unrung(&r[i]), 0, "after closes, %d",
				     i);
	for (int i = 0; i < N; i++)
		t_raw_close(&r[i]);
}

static bool log_names_objects(void *arg)
{
	(void)arg;
	return t_server_log_has(&srv, "start kvringd with --objects N");
}

/*
 * The storage engine grew its arrays: kvringd says so at the next
 * heartbeat, with the option that sizes it up front. Sized by --objects,
 * the same stores grow nothing and say nothing.
 */
Test(server, logs_growth_of_the_engine_with_the_option_that_avoids_it)
{
	/* 1 MiB of 64-byte slots: room made for 80 objects at start. */
	const char *grows[] = {"--pool-size", "1M", "--align", "64", NULL};
	const char *sized[] = {"--pool-size", "1M",    "--align", "64",
			       "--objects",   "16384", NULL};
	const char *const *args[] = {grows, sized};
	enum { N = 400 };
	static struct kvr_key keys[N];
	static uint64_t sizes[N];
	static char ans[N * 64 + 256];
	struct t_raw r;

	for (uint32_t i = 0; i < N; i++) {
		keys[i] = (struct kvr_key){i + 1, 7};
		sizes[i] = 64;
	}
	for (int run = 0; run < 2; run++) {
		t_server_start(&srv, args[run]);
		cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
		cr_assert_eq(t_raw_store(&r, keys, sizes, N, ans, sizeof(ans)),
			     0, "run %d", run);
		if (run == 0) {
			cr_expect(t_wait_until(log_names_objects, NULL, 3000),
				  "no growth logged");
			cr_expect(t_server_log_has(&srv, "grew to room for"));
		} else {
			usleep(300000); /* three heartbeats */
			cr_expect_not(log_names_objects(NULL),
				      "growth logged when sized by --objects");
		}
		t_raw_close(&r);
		cr_expect_eq(t_server_stop(&srv), 0);
		t_server_cleanup(&srv);
		t_server_init(&srv);
	}
}

static bool log_says_migration_over(void *arg)
{
	(void)arg;
	return t_server_log_has(&srv, "key index finished moving");
}

/*
 * A growth of the key index leaves its old table to empty a few entries
 * per insert; a cache only looked up in after it must not probe two
 * tables for ever. 64 MiB of 4 KiB slots: the engine starts sized for
 * 64 KiB chunks plus 64, 1 088 objects, and its index grows when the
 * 1 150th key arrives. 1 000 keys in one request, then one key a request
 * up to 1 160: the growth comes with 10 inserts after it, each moving 8
 * of 1 149 old entries. Then nothing but lookups: kvringd's idle passes
 * must finish the move (and say so), and every key must still be found.
 */
Test(server, finishes_the_key_index_migration_when_only_looked_up_in)
{
	const char *args[] = {"--pool-size", "64M", "--align", "4096", NULL};
	enum { N = 1160, FIRST = 1000 };
	static struct kvr_key keys[N];
	static uint64_t sizes[N];
	static char ans[N * 64 + 256];
	const struct kvr_resp_hdr *h = (const void *)ans;
	struct t_raw r;

	for (uint32_t i = 0; i < N; i++) {
		keys[i] = (struct kvr_key){i + 1, 11};
		sizes[i] = 4096;
	}
	t_server_start(&srv, args);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	cr_assert_eq(t_raw_store(&r, keys, sizes, FIRST, ans, sizeof(ans)), 0);
	for (uint32_t i = FIRST; i < N; i++)
		cr_assert_eq(
		    t_raw_store(&r, &keys[i], &sizes[i], 1, ans, sizeof(ans)),
		    0, "key %u", i);
	cr_assert(t_wait_until(log_names_objects, NULL, 3000),
		  "no growth logged");
	cr_expect(t_wait_until(log_says_migration_over, NULL, 3000),
		  "the index's migration did not end without inserts");
	for (uint32_t i = 0; i < N; i += 100) {
		cr_assert_geq(t_raw_call(&r, KVR_OP_LOOKUP, 0, 0, &keys[i],
					 NULL, N - i < 100 ? N - i : 100, ans,
					 sizeof(ans)),
			      (int)sizeof(*h));
		cr_expect_eq((uint32_t)h->value, N - i < 100 ? N - i : 100,
			     "hits from key %u", i);
	}
	t_raw_close(&r);
	cr_expect_eq(t_server_stop(&srv), 0);
}
