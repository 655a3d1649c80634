/* SPDX-License-Identifier: MIT */
/*
 * worker_srv.h - test helpers for the libkvring integration suites
 * (tests/integration/test_worker*.c), on top of tests/support/t_server.h:
 * start a real kvringd on a private socket and segment name with the
 * options these suites need, stop it (SIGTERM), kill or freeze it, and
 * connect a client with a small test layout, plus deterministic chunk
 * bytes. Setup failures abort the test (tests/ convention). Header-only
 * with static functions, so each suite stays one file for the CMake glob.
 */
#ifndef KVR_WORKER_SRV_H
#define KVR_WORKER_SRV_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_raw.h"
#include "t_server.h"

/* A kvringd under test: t_server (tests/support) plus the options the
 * worker suites need. pid and sock mirror t.pid and t.sock. */
struct wsrv {
	struct kvrd t;
	pid_t pid;
	char sock[108];
	char pool[16]; /* --pool-size */
};

static inline void wsrv_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Names unique per test process and call. */
static inline void wsrv_init(struct wsrv *s, const char *pool)
{
	memset(s, 0, sizeof(*s));
	t_server_init(&s->t);
	snprintf(s->sock, sizeof(s->sock), "%s", s->t.sock);
	snprintf(s->pool, sizeof(s->pool), "%s", pool ? pool : "64M");
}

static inline bool wsrv_connectable(const struct wsrv *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	strcpy(sa.sun_path, s->sock);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Start kvringd (again, on the same names after a stop or kill); returns
 * once it accepts and its control segment says RUNNING. */
static inline void wsrv_start(struct wsrv *s)
{
	const char *args[] = {
	    "--pool-size", s->pool, "--allow-root", "--heartbeat-ms", "100",
	    "--max-keys",  "1024",  "--log-level",  "info",	      NULL};

	t_server_start(&s->t, args);
	s->pid = s->t.pid;
}

/* Start kvringd @s with the @n options in @args (room for 48), then the
 * NULL-ended @more (may be NULL): the suites' own option lists. */
static inline void wsrv_start_args(struct wsrv *s, const char **args, int n,
				   const char *const *more)
{
	for (int i = 0; more && more[i]; i++) {
		cr_assert_lt(n, 47, "too many kvringd options");
		args[n++] = more[i];
	}
	args[n] = NULL;
	t_server_start(&s->t, args);
	s->pid = s->t.pid;
}

/* SIGTERM (after SIGCONT, in case it is frozen) and reap. */
static inline int wsrv_stop(struct wsrv *s)
{
	int st;

	if (s->t.pid <= 0)
		return -1;
	kill(s->t.pid, SIGCONT);
	st = t_server_stop(&s->t);
	s->pid = 0;
	return st;
}

/* SIGKILL and reap. The listening socket can outlive the process for a
 * moment (io_uring releases the files its requests hold from a kernel
 * worker), so wait until connects are refused: a restart on the same
 * socket would otherwise see "another server listening". */
static inline void wsrv_kill(struct wsrv *s)
{
	if (s->t.pid <= 0)
		return;
	t_server_kill(&s->t);
	s->pid = 0;
	for (int i = 0; i < 300 && wsrv_connectable(s); i++)
		wsrv_sleep_ms(10);
}

/* Remove what a server of ours left (socket, lock, segments, log). */
static inline void wsrv_cleanup(struct wsrv *s)
{
	if (s->t.pid > 0)
		kill(s->t.pid, SIGCONT);
	t_server_cleanup(&s->t);
	s->pid = 0;
}

/* The usual per-test server (a suite's .init): a fresh 64 MiB kvringd. */
static inline void wsrv_up(struct wsrv *s)
{
	wsrv_init(s, "64M");
	wsrv_start(s);
}

/* Its end (the suite's .fini): SIGTERM, then remove what it left. */
static inline void wsrv_down(struct wsrv *s)
{
	wsrv_stop(s);
	wsrv_cleanup(s);
}

/*
 * t_connect_1x1 - a client of the plain t_server @t with a one-layer,
 * one-head layout (head size 64, 2-byte dtype, 16-token chunks) named
 * @model and a 10 s timeout; aborts the test if the connect fails.
 */
static inline struct kvr_client *t_connect_1x1(const struct kvrd *t,
					       const char *model)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char err[256];

	t_ns_small(&o.ns, model);
	o.ns.layers = 1;
	o.ns.kv_heads = 1;
	o.socket_path = t->sock;
	o.timeout_ms = 10000;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

/* The small layout the suites use: chunk bytes are chosen per call. */
static inline struct kvr_client_opts
wsrv_opts(const struct wsrv *s, int transport, uint32_t timeout_ms)
{
	struct kvr_client_opts o = {0};

	t_ns_small(&o.ns, "kvring-test-model");
	o.socket_path = s->sock;
	o.transport = transport;
	o.timeout_ms = timeout_ms;
	return o;
}

static inline struct kvr_client *
wsrv_connect(const struct wsrv *s, int transport, uint32_t timeout_ms)
{
	struct kvr_client_opts o = wsrv_opts(s, transport, timeout_ms);
	struct kvr_client *c = NULL;
	char err[256];
	int rc = kvr_connect(&o, &c, err, sizeof(err));

	cr_assert_eq(rc, 0, "connect %s: %d %s", s->sock, rc, err);
	return c;
}

/*
 * wsrv_expect_env_refused - with $@var set to @value, kvr_connect() is
 * refused: -EINVAL, no client, and an error message that contains @says
 * (the variable, so that the user knows what to fix). @var is unset after.
 */
static inline void wsrv_expect_env_refused(const struct wsrv *s,
					   const char *var, const char *value,
					   const char *says)
{
	struct kvr_client_opts o = wsrv_opts(s, 0, 5000);
	struct kvr_client *c = NULL;
	char err[256] = "";

	setenv(var, value, 1);
	cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -EINVAL);
	cr_expect_null(c);
	cr_expect(strstr(err, says), "%s=%s: %s", var, value, err);
	unsetenv(var);
}

/*
 * wsrv_corrupt_in_child - the hostile neighbour: a separate process,
 * connected without checksums, finds where chunk @victim of @keys lives (a
 * retrieve of keys[0..victim] tells it), lets go of it and then XORs @mask
 * into its byte @off in the pool, behind the server's back. The test fails
 * unless the child did all of that.
 */
static inline void wsrv_corrupt_in_child(const struct wsrv *s,
					 const struct kvr_key *keys,
					 uint32_t victim, size_t off,
					 uint8_t mask)
{
	pid_t pid = fork();
	int st;

	cr_assert(pid >= 0);
	if (pid == 0) {
		struct kvr_client_opts o = wsrv_opts(s, 0, 5000);
		struct kvr_client *c = NULL;
		struct kvr_xfer x;
		uint8_t *p;

		o.checksum = KVR_CHECKSUM_OFF;
		if (kvr_connect(&o, &c, NULL, 0) < 0 ||
		    kvr_prepare_retrieve(c, keys, victim + 1, &x) < 0 ||
		    x.nslots != victim + 1)
			_exit(10);
		p = x.slots[victim].ptr;
		if (kvr_commit_retrieve(c, &x) < 0)
			_exit(11);
		p[off] ^= mask; /* after commit: nothing holds it */
		kvr_close(c);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "neighbour failed: status 0x%x", st);
}

/* Deterministic tokens: request r, token j. */
static inline void wsrv_tokens(uint32_t r, uint32_t *t, size_t n)
{
	for (size_t j = 0; j < n; j++)
		t[j] = (uint32_t)(r * 1000003u + j * 2654435761u);
}

static inline uint64_t wsrv_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Chunk bytes as a function of the key (so any process can check them). */
static inline void wsrv_fill(const struct kvr_key *k, void *dst, size_t n)
{
	unsigned char *d = dst;
	uint64_t seed = k->lo ^ wsrv_mix(k->hi);

	for (size_t i = 0; i < n; i++)
		d[i] = (unsigned char)(wsrv_mix(seed + i / 8) >> (8 * (i % 8)));
}

/* Index of the first byte that differs from wsrv_fill, or n. */
static inline size_t wsrv_check(const struct kvr_key *k, const void *src,
				size_t n)
{
	const unsigned char *s = src;
	uint64_t seed = k->lo ^ wsrv_mix(k->hi);

	for (size_t i = 0; i < n; i++)
		if (s[i] !=
		    (unsigned char)(wsrv_mix(seed + i / 8) >> (8 * (i % 8))))
			return i;
	return n;
}

/* Store n chunks of the given keys (each chunk_bytes), fill OK slots and
 * commit. Returns how many slots were OK (newly stored). */
static inline uint32_t wsrv_store(struct kvr_client *c,
				  const struct kvr_key *keys, uint32_t n,
				  uint64_t chunk_bytes)
{
	uint64_t *sizes = calloc(n ? n : 1, sizeof(*sizes));
	struct kvr_xfer x;
	uint32_t ok = 0;
	int rc;

	cr_assert(sizes);
	for (uint32_t i = 0; i < n; i++)
		sizes[i] = chunk_bytes;
	rc = kvr_prepare_store(c, keys, sizes, n, &x);
	cr_assert_eq(rc, 0, "prepare_store: %d %s", rc, kvr_client_errmsg(c));
	cr_assert_eq(x.nslots, n);
	for (uint32_t i = 0; i < n; i++) {
		if (x.slots[i].status != KVR_SLOT_OK)
			continue;
		cr_assert_eq(x.slots[i].len, chunk_bytes);
		wsrv_fill(&keys[i], x.slots[i].ptr, chunk_bytes);
		ok++;
	}
	rc = kvr_commit_store(c, &x);
	cr_assert_eq(rc, 0, "commit_store: %d %s", rc, kvr_client_errmsg(c));
	free(sizes);
	return ok;
}

/* Retrieve keys and verify every byte; returns the prefix length. */
static inline uint32_t wsrv_retrieve_check(struct kvr_client *c,
					   const struct kvr_key *keys,
					   uint32_t n, uint64_t chunk_bytes)
{
	struct kvr_xfer x;
	uint32_t got;
	int rc = kvr_prepare_retrieve(c, keys, n, &x);

	cr_assert_eq(rc, 0, "prepare_retrieve: %d %s", rc,
		     kvr_client_errmsg(c));
	got = x.nslots;
	for (uint32_t i = 0; i < x.nslots; i++) {
		size_t b;

		cr_assert_eq(x.slots[i].status, KVR_SLOT_OK);
		cr_assert_eq(x.slots[i].len, chunk_bytes, "slot %u: %llu bytes",
			     i, (unsigned long long)x.slots[i].len);
		b = wsrv_check(&keys[i], x.slots[i].ptr, chunk_bytes);
		cr_assert_eq(b, chunk_bytes, "chunk %u differs at byte %zu", i,
			     b);
	}
	rc = kvr_commit_retrieve(c, &x);
	cr_assert_eq(rc, 0, "commit_retrieve: %d %s", rc, kvr_client_errmsg(c));
	return got;
}

#endif /* KVR_WORKER_SRV_H */
