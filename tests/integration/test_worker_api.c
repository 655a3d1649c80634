/* SPDX-License-Identifier: MIT */
/*
 * test_worker_api.c - libkvring's API contract against a real kvringd:
 * kvr_client_errmsg() belongs to the call that just failed (and is empty
 * after a success), server errors become sentences naming the lease or
 * transfer, the options struct can grow (kvr_connect_sized), the wait for
 * a server that is still starting, and the exported symbols of the shared
 * library (kvr_strerror, kvr_version). Data paths are in test_worker.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/clock.h>
#include <kvring/kvring.h>

#include "worker_srv.h"

static struct wsrv srv;

static void setup(void)
{
	wsrv_up(&srv);
}

static void teardown(void)
{
	wsrv_down(&srv);
}

TestSuite(worker_api, .init = setup, .fini = teardown, .timeout = 60);

/* The report: a too-long lookup, then release() of a lease that
 * does not exist, described the lookup. */
Test(worker_api, errmsg_names_the_lease_when_release_follows_another_failure)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	uint32_t n = kvr_client_info(c)->max_keys + 1;
	struct kvr_key *k = calloc(n, sizeof(*k));

	cr_assert(k);
	cr_assert_eq(kvr_lookup(c, k, n, NULL), -E2BIG);
	cr_expect_neq(strstr(kvr_client_errmsg(c), "keys in one request"), NULL,
		      "%s", kvr_client_errmsg(c));
	cr_assert_eq(kvr_release(c, 123), -ENOENT);
	cr_expect_neq(
	    strstr(kvr_client_errmsg(c), "lease 123 is unknown or expired"),
	    NULL, "%s", kvr_client_errmsg(c));
	cr_expect_eq(strstr(kvr_client_errmsg(c), "keys in one request"), NULL,
		     "%s", kvr_client_errmsg(c));
	free(k);
	kvr_close(c);
}

Test(worker_api, errmsg_is_empty_when_the_call_after_a_failure_succeeds)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);

	cr_assert_eq(kvr_release(c, 77), -ENOENT);
	cr_assert_neq(kvr_client_errmsg(c)[0], '\0');
	cr_assert_eq(kvr_ping(c, NULL), 0);
	cr_expect_str_eq(kvr_client_errmsg(c), "");
	kvr_close(c);
}

Test(worker_api, errmsg_names_the_transfer_when_commit_finds_none)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);
	struct kvr_xfer x = {.id = 999, .op = KVR_OP_PREPARE_STORE};

	cr_assert_eq(kvr_commit_store(c, &x), -ENOENT);
	cr_expect_neq(
	    strstr(kvr_client_errmsg(c), "store transfer 999 is unknown"), NULL,
	    "%s", kvr_client_errmsg(c));
	kvr_close(c);
}

Test(worker_api, errmsg_names_the_argument_when_xfer_is_null)
{
	struct kvr_client *c = wsrv_connect(&srv, 0, 5000);

	cr_assert_eq(kvr_commit_store(c, NULL), -EINVAL);
	cr_expect_neq(strstr(kvr_client_errmsg(c), "xfer is NULL"), NULL, "%s",
		      kvr_client_errmsg(c));
	kvr_close(c);
}

Test(worker_api, connect_sized_refuses_when_an_unknown_field_is_set)
{
	struct {
		struct kvr_client_opts o;
		uint64_t newer_field;
	} big = {wsrv_opts(&srv, 0, 5000), 1};
	struct kvr_client *c = NULL;
	char err[256];

	cr_expect_eq(
	    kvr_connect_sized(&big.o, sizeof(big), &c, err, sizeof(err)),
	    -E2BIG);
	cr_expect_neq(strstr(err, "upgrade libkvring"), NULL, "%s", err);
	cr_expect_null(c);
	/* The same larger struct with its unknown field 0 is fine. */
	big.newer_field = 0;
	cr_assert_eq(
	    kvr_connect_sized(&big.o, sizeof(big), &c, err, sizeof(err)), 0,
	    "%s", err);
	kvr_close(c);
}

Test(worker_api, connect_sized_refuses_when_smaller_than_the_first_layout)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	struct kvr_client *c = NULL;
	char err[256];

	cr_expect_eq(kvr_connect_sized(&o, 8, &c, err, sizeof(err)), -EINVAL);
	cr_expect_neq(strstr(err, "smaller than the oldest layout"), NULL, "%s",
		      err);
}

/* What a 0.1 binary does: call the kvr_connect symbol with the old
 * struct. Garbage past the old struct's end must not be read. */
Test(worker_api, legacy_connect_symbol_ignores_bytes_past_the_old_struct)
{
	int (*legacy)(const struct kvr_client_opts *, struct kvr_client **,
		      char *, size_t) = (kvr_connect);
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	struct kvr_client *c = NULL;
	char err[256];

	memset(&o.connect_wait_ms, 0xff, sizeof(o.connect_wait_ms));
	cr_assert_eq(legacy(&o, &c, err, sizeof(err)), 0, "%s", err);
	kvr_close(c);
}

Test(worker_api, connect_fails_at_once_when_no_server_and_no_wait)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	struct kvr_client *c = NULL;
	char err[256];
	uint64_t t0;

	o.socket_path = "/tmp/kvring-test-nobody-here.sock";
	unsetenv("KVRING_CONNECT_WAIT_MS");
	t0 = kvr_clock_now_ns();
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -ENOENT);
	cr_expect_lt((kvr_clock_now_ns() - t0) / 1000000, 1000);
	cr_expect_eq(strstr(err, "waited"), NULL, "%s", err);
}

/* A typo in the wait must not silently mean "no wait": it is refused,
 * and the sentence names the variable and what it takes. */
Test(worker_api, connect_refuses_a_connect_wait_that_is_not_a_number)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	const char *bad[] = {"10s", "-1", " 5", "99999999999"};
	struct kvr_client *c = NULL;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("KVRING_CONNECT_WAIT_MS", bad[i], 1);
		cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -EINVAL,
			     "'%s' accepted", bad[i]);
		cr_expect_neq(strstr(err, "$KVRING_CONNECT_WAIT_MS"), NULL,
			      "'%s': %s", bad[i], err);
		cr_expect_null(c);
	}
	/* A plain number, and the option over the variable, still work. */
	setenv("KVRING_CONNECT_WAIT_MS", "100", 1);
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	kvr_close(c);
	c = NULL;
	setenv("KVRING_CONNECT_WAIT_MS", "10s", 1);
	o.connect_wait_ms = 100;
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	unsetenv("KVRING_CONNECT_WAIT_MS");
	kvr_close(c);
}

Test(worker_api, connect_says_how_long_it_waited_when_no_server_comes)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	struct kvr_client *c = NULL;
	char err[256];

	o.socket_path = "/tmp/kvring-test-nobody-here.sock";
	o.connect_wait_ms = 150;
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -ENOENT);
	cr_expect_neq(strstr(err, "waited 150 ms for kvringd to appear"), NULL,
		      "%s", err);
}

/*
 * A handshake kvringd drops before its welcome (its handshake table makes
 * room for a newer connection of the same uid, or the first-byte
 * deadline passed) is tried again: 64 workers started at once on a busy
 * host used to get -EPROTO "kvringd closed the socket". The front socket
 * here takes the first connection, reads its hello, moves the real
 * server's socket onto its own name and hangs up: exactly what a worker
 * sees when kvringd drops it, and its retry then reaches kvringd.
 */
struct front {
	int lfd;
	char path[128];
	const char *real;
	ssize_t hello;
};

/* Listen on the server's socket path plus @suffix. */
static void front_listen(struct front *f, const char *suffix)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(f->path, sizeof(f->path), "%s%s", f->real, suffix);

	cr_assert(n > 0 && (size_t)n < sizeof(sa.sun_path), "path %s", f->path);
	memcpy(sa.sun_path, f->path, (size_t)n + 1);
	unlink(f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(f->lfd, 0);
	cr_assert_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0,
		     "bind %s: %s", f->path, strerror(errno));
	cr_assert_eq(listen(f->lfd, 8), 0);
}

static void *front_main(void *arg)
{
	struct front *f = arg;
	char b[64];
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	f->hello = recv(fd, b, sizeof(b), 0);
	if (rename(f->real, f->path) != 0)
		f->hello = -1;
	close(fd);
	return NULL;
}

/* kvr_connect through a front socket (the server's path + @suffix) served
 * by @fn on a thread; the front is closed when the connect returns. */
static int connect_via(struct front *f, const char *suffix, void *(*fn)(void *),
		       struct kvr_client **c, char *err, size_t errlen)
{
	struct kvr_client_opts o = wsrv_opts(&srv, 0, 5000);
	pthread_t th;
	int rc;

	front_listen(f, suffix);
	cr_assert_eq(pthread_create(&th, NULL, fn, f), 0);
	o.socket_path = f->path;
	rc = kvr_connect(&o, c, err, errlen);
	shutdown(f->lfd, SHUT_RDWR); /* ends an accept loop */
	pthread_join(th, NULL);
	close(f->lfd);
	return rc;
}

Test(worker_api, connect_tries_again_when_kvringd_drops_the_handshake)
{
	struct front f = {.real = srv.sock};
	struct kvr_client *c = NULL;
	char err[256];
	int rc = connect_via(&f, ".front", front_main, &c, err, sizeof(err));

	cr_expect_gt(f.hello, 0, "the front saw no hello");
	cr_expect_eq(rc, 0, "connect after a dropped handshake: %d %s", rc,
		     err);
	if (rc == 0) {
		cr_expect_eq(kvr_ping(c, NULL), 0, "%s", kvr_client_errmsg(c));
		kvr_close(c);
	}
	/* Give kvringd its socket's name back for the suite's teardown. */
	cr_expect_eq(rename(f.path, srv.sock), 0, "%s", strerror(errno));
}

/* A server that drops every handshake: the error says so, with the code
 * callers always got (-EPROTO), after a bounded number of tries. */
static void *drop_all_main(void *arg)
{
	struct front *f = arg;
	char b[64];
	int fd;

	while ((fd = accept(f->lfd, NULL, NULL)) >= 0) {
		(void)recv(fd, b, sizeof(b), 0);
		f->hello++;
		close(fd);
	}
	return NULL;
}

Test(worker_api, connect_gives_up_when_every_handshake_is_dropped)
{
	struct front f = {.real = srv.sock};
	struct kvr_client *c = NULL;
	char err[256];
	int rc = connect_via(&f, ".drop", drop_all_main, &c, err, sizeof(err));

	unlink(f.path);
	cr_expect_eq(rc, -EPROTO, "%d %s", rc, err);
	cr_expect_null(c);
	cr_expect_eq(f.hello, 5, "attempts: %zd", f.hello);
	cr_expect_neq(strstr(err, "dropped in the handshake 5 times"), NULL,
		      "%s", err);
}

/* The service race: a worker started beside kvringd, before its socket
 * exists. With the wait it connects once the server is up. */
static struct wsrv late; /* started by the thread below */
static atomic_bool late_done;

/* The thread that forks kvringd must outlive it: t_server_spawn() asks
 * for PR_SET_PDEATHSIG, which fires when the forking *thread* exits. */
static void *start_later(void *arg)
{
	(void)arg;
	wsrv_sleep_ms(300);
	wsrv_start(&late);
	while (!atomic_load(&late_done))
		wsrv_sleep_ms(5);
	wsrv_stop(&late);
	return NULL;
}

static void connects_when_server_appears(bool from_env)
{
	struct kvr_client_opts o;
	struct kvr_client *c = NULL;
	char err[256];
	pthread_t th;
	int rc;

	wsrv_init(&late, "64M"); /* names only: no server yet */
	o = wsrv_opts(&late, 0, 5000);
	if (from_env)
		setenv("KVRING_CONNECT_WAIT_MS", "10000", 1);
	else
		o.connect_wait_ms = 10000;
	atomic_store(&late_done, false);
	cr_assert_eq(pthread_create(&th, NULL, start_later, NULL), 0);
	rc = kvr_connect(&o, &c, err, sizeof(err));
	unsetenv("KVRING_CONNECT_WAIT_MS");
	if (rc == 0) {
		int prc = kvr_ping(c, NULL);

		cr_expect_eq(prc, 0, "ping: %d %s", prc, kvr_client_errmsg(c));
		kvr_close(c);
	}
	atomic_store(&late_done, true);
	pthread_join(th, NULL);
	wsrv_cleanup(&late);
	cr_expect_eq(rc, 0, "%d %s", rc, err);
}

Test(worker_api, connect_waits_when_the_server_appears_later)
{
	connects_when_server_appears(false);
}

Test(worker_api, connect_waits_when_the_env_asks_for_it)
{
	connects_when_server_appears(true);
}

/* The installed library's exports (the issue: kvr_strerror was
 * documented but hidden). */
Test(worker_api, shared_library_exports_strerror_and_version)
{
	void *h = dlopen(KVR_BIN_DIR "/worker/libkvring.so", RTLD_NOW);
	const char *(*se)(int);
	const char *(*ver)(void);

	cr_assert(h, "dlopen: %s", dlerror());
	se = (const char *(*)(int))dlsym(h, "kvr_strerror");
	ver = (const char *(*)(void))dlsym(h, "kvr_version");
	cr_assert(se && ver, "kvr_strerror %p kvr_version %p", (void *)se,
		  (void *)ver);
	cr_expect_str_eq(se(-ENOSPC), "chunk pool is full");
	cr_expect_str_eq(ver(), KVR_VERSION_STRING);
	cr_expect(dlsym(h, "kvr_connect_sized") != NULL);
	cr_expect(dlsym(h, "kvr_keys_from_tokens") != NULL);
	dlclose(h);
}

Test(worker_api, version_matches_the_header_when_linked_statically)
{
	cr_expect_str_eq(kvr_version(), KVR_VERSION_STRING);
	cr_expect_eq(kvr_version_number(), KVR_VERSION_NUMBER);
	cr_expect_eq(KVR_VERSION_NUMBER >> 16, KVR_VERSION_MAJOR);
}

/* A quota refusal names the flag to look at (-EDQUOT from --quota-pinned). */
Test(worker_api, errmsg_names_the_quota_when_a_pin_is_over_it)
{
	const char *args[] = {
	    "--allow-root", "--pool-size",  "64M", "--quota-pinned",
	    "4K",	    "--huge-pages", "off", NULL};
	struct wsrv q;
	struct kvr_client *c;
	struct kvr_key k[1];
	uint32_t t[16];
	uint64_t lease = 0;

	wsrv_init(&q, "64M");
	t_server_start(&q.t, args);
	c = wsrv_connect(&q, 0, 5000);
	wsrv_tokens(1, t, 16);
	cr_assert_eq(kvr_client_keys(c, t, 16, k, 1), 1);
	cr_assert_eq(wsrv_store(c, k, 1, 64 * 1024), 1);
	cr_assert_eq(kvr_lookup(c, k, 1, &lease), -EDQUOT, "%s",
		     kvr_client_errmsg(c));
	cr_expect_neq(strstr(kvr_client_errmsg(c), "--quota-pinned"), NULL,
		      "%s", kvr_client_errmsg(c));
	kvr_close(c);
	t_server_stop(&q.t);
	t_server_cleanup(&q.t);
}
