/* SPDX-License-Identifier: MIT */
/*
 * Description: a real kvringd with real worker processes linked against
 * libkvring: store, lookup and retrieve with byte comparison (shared
 * memory and copy transports); the seed's scenario (the server stays up,
 * a worker process stores a prompt and exits, a new worker process stores
 * the same prompt: success with nothing re-written, then retrieves the
 * same bytes); a worker SIGKILLed between prepare and commit, or between
 * prepare_retrieve and commit_retrieve, leaves no reservation or pin
 * (counters read from the control segment); and a worker that writes
 * garbage into its request ring is cut off while a libkvring worker keeps
 * working.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/mman.h>
#include <criterion/criterion.h>

#include <kvring/doorbell.h>
#include <kvring/kvring.h>

#include "t_raw.h"
#include "t_server.h"
#include "t_worker.h"

static struct kvrd srv;

static void setup(void)
{
	t_server_init(&srv);
}

static void teardown(void)
{
	t_server_cleanup(&srv);
}

TestSuite(server_worker, .init = setup, .fini = teardown, .timeout = 30);

#define NTOK	(128 * 6) /* six full chunks */
#define CHUNK_B 40000u	  /* bytes per chunk (not page-sized on purpose) */

static uint32_t tokens[NTOK];

static void make_prompt(uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++)
		tokens[i] = seed * 100003u + i * 7u;
}

/* The byte a worker writes at @i of chunk @k: depends on the key, so a
 * chunk read back under the wrong key shows. */
static unsigned char pattern(const struct kvr_key *k, uint64_t i)
{
	return (unsigned char)(k->lo >> (i % 8 * 8)) ^ (unsigned char)(i * 31);
}

static struct kvr_client *connect_worker(int transport)
{
	struct kvr_client_opts o;

	t_worker_opts(&o, &srv);
	o.transport = transport;
	o.no_prefault = true;
	return t_worker_connect(&o);
}

/* Store the prompt's chunks; returns how many were written (OK slots). */
static int store_prompt(struct kvr_client *c, struct kvr_key *keys,
			uint32_t *n_out)
{
	uint64_t sizes[16];
	struct kvr_xfer x = {0};
	long n = kvr_client_keys(c, tokens, NTOK, keys, 16);
	int written = 0, rc;

	cr_assert_eq(n, NTOK / 128);
	for (long i = 0; i < n; i++)
		sizes[i] = CHUNK_B;
	rc = kvr_prepare_store(c, keys, sizes, (uint32_t)n, &x);
	cr_assert_eq(rc, 0, "prepare_store: %d %s", rc, kvr_client_errmsg(c));
	cr_assert_eq(x.nslots, (uint32_t)n);
	for (uint32_t i = 0; i < x.nslots; i++) {
		unsigned char *p = x.slots[i].ptr;

		if (x.slots[i].status != KVR_SLOT_OK)
			continue;
		cr_assert_eq(x.slots[i].len, CHUNK_B);
		for (uint64_t j = 0; j < CHUNK_B; j++)
			p[j] = pattern(&keys[i], j);
		written++;
	}
	rc = kvr_commit_store(c, &x);
	cr_assert_eq(rc, 0, "commit_store: %d %s", rc, kvr_client_errmsg(c));
	kvr_xfer_free(&x);
	*n_out = (uint32_t)n;
	return written;
}

/* Retrieve @n keys and compare every byte. */
static void retrieve_and_check(struct kvr_client *c, const struct kvr_key *keys,
			       uint32_t n)
{
	struct kvr_xfer x = {0};
	int rc;

	cr_assert_eq(kvr_lookup(c, keys, n, NULL), n);
	rc = kvr_prepare_retrieve(c, keys, n, &x);
	cr_assert_eq(rc, 0, "prepare_retrieve: %d %s", rc,
		     kvr_client_errmsg(c));
	cr_assert_eq(x.nslots, n);
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *p = x.slots[i].ptr;

		cr_assert_eq(x.slots[i].len, CHUNK_B);
		for (uint64_t j = 0; j < CHUNK_B; j++)
			cr_assert_eq(p[j], pattern(&keys[i], j),
				     "chunk %u byte %llu", i,
				     (unsigned long long)j);
	}
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);
	kvr_xfer_free(&x);
}

static void roundtrip(int transport)
{
	struct kvr_key keys[16];
	struct kvr_client *c;
	uint32_t n;

	make_prompt(1);
	c = connect_worker(transport);
	cr_assert_eq(store_prompt(c, keys, &n), (int)n);
	retrieve_and_check(c, keys, n);
	kvr_close(c);
}

Test(server_worker, retrieve_returns_stored_bytes_when_shared_memory)
{
	t_server_start(&srv, NULL);
	roundtrip(0);
	cr_expect(t_server_log_has(&srv, "transport shm"));
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server_worker, retrieve_returns_stored_bytes_when_copy_transport)
{
	t_server_start(&srv, NULL);
	roundtrip(KVR_TRANSPORT_COPY);
	cr_expect(t_server_log_has(&srv, "COPY transport"));
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(server_worker, retrieve_returns_stored_bytes_when_pool_is_private)
{
	const char *args[] = {"--pool-backend", "private", NULL};

	t_server_start(&srv, args);
	roundtrip(0);
	cr_expect(t_server_log_has(&srv, "transport copy: pool is "
					 "server-private"));
	cr_expect_eq(t_server_stop(&srv), 0);
}

/*
 * Run @fn in a child process; its exit status, or 1 when fn did not return.
 * A failed cr_assert in the child unwinds through Criterion's machinery,
 * whose exit status is not ours to rely on: the child marks a shared word
 * only after fn returned, and anything else counts as a failure.
 */
static int in_child(void (*fn)(void))
{
	_Atomic int *finished;
	pid_t pid;
	int st, rc;

	finished = mmap(NULL, sizeof(*finished), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(finished, MAP_FAILED);
	atomic_store(finished, 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		fn();
		atomic_store(finished, 1);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (rc == 0 && !atomic_load(finished))
		rc = 1;
	munmap((void *)finished, sizeof(*finished));
	return rc;
}

static void first_worker(void)
{
	struct kvr_key keys[16];
	struct kvr_client *c = connect_worker(0);
	uint32_t n;

	if (store_prompt(c, keys, &n) != (int)n)
		_exit(1);
	kvr_close(c);
}

static void second_worker(void)
{
	struct kvr_key keys[16];
	struct kvr_client *c = connect_worker(0);
	uint32_t n;

	/* Same prompt again: success, nothing to write (seed bug 1). */
	if (store_prompt(c, keys, &n) != 0)
		_exit(1);
	retrieve_and_check(c, keys, n);
	kvr_close(c);
	kvr_close(NULL);
}

static bool pins_released(void *arg)
{
	struct kvrd *t = arg;

	return T_GSTAT(t, workers) == 0 && T_GSTAT(t, pins) == 0 &&
	       T_GSTAT(t, transfers) == 0;
}

Test(server_worker, same_prompt_from_new_worker_succeeds_when_already_stored)
{
	t_server_start(&srv, NULL);
	make_prompt(42);
	cr_assert_eq(in_child(first_worker), 0, "first worker failed");
	cr_assert_eq(in_child(second_worker), 0, "second worker failed");
	cr_assert(t_wait_until(pins_released, &srv, 5000));
	cr_expect_eq(T_GSTAT(&srv, stores_skipped), NTOK / 128);
	cr_expect_eq(T_GSTAT(&srv, objects), NTOK / 128);
	cr_expect_eq(T_GSTAT(&srv, protocol_errors), 0);
	cr_expect_eq(t_server_stop(&srv), 0);
}

/* ---- SIGKILL in the middle of a transfer ---- */

static int ready_pipe[2];

static void report_channel(struct kvr_client *c)
{
	uint32_t ch = kvr_client_info(c)->channel;

	if (write(ready_pipe[1], &ch, sizeof(ch)) != sizeof(ch))
		_exit(3);
	pause();
}

static void killed_in_store(void)
{
	struct kvr_key keys[16];
	uint64_t sizes[16];
	struct kvr_xfer x = {0};
	struct kvr_client *c = connect_worker(0);
	long n = kvr_client_keys(c, tokens, NTOK, keys, 16);

	for (long i = 0; i < n; i++)
		sizes[i] = CHUNK_B;
	if (kvr_prepare_store(c, keys, sizes, (uint32_t)n, &x) < 0)
		_exit(2);
	/* Half-written slots, never committed. */
	memset(x.slots[0].ptr, 0xcc, 100);
	report_channel(c);
}

static void killed_in_retrieve(void)
{
	struct kvr_key keys[16];
	struct kvr_xfer x = {0};
	struct kvr_client *c = connect_worker(0);
	long n = kvr_client_keys(c, tokens, NTOK, keys, 16);

	if (kvr_prepare_retrieve(c, keys, (uint32_t)n, &x) < 0 ||
	    x.nslots != (uint32_t)n)
		_exit(2);
	report_channel(c);
}

static uint32_t fork_and_wait_ready(void (*fn)(void), pid_t *pid)
{
	uint32_t ch = UINT32_MAX;

	cr_assert_eq(pipe(ready_pipe), 0);
	fflush(NULL);
	*pid = fork();
	cr_assert_geq(*pid, 0);
	if (*pid == 0) {
		close(ready_pipe[0]);
		fn();
		_exit(0);
	}
	close(ready_pipe[1]);
	cr_assert_eq(read(ready_pipe[0], &ch, sizeof(ch)), (ssize_t)sizeof(ch),
		     "child failed before it was ready");
	close(ready_pipe[0]);
	return ch;
}

static bool store_released(void *arg)
{
	struct kvrd *t = arg;

	return T_GSTAT(t, workers) == 0 && T_GSTAT(t, used_bytes) == 0 &&
	       T_GSTAT(t, reserved_bytes) == 0 && T_GSTAT(t, transfers) == 0;
}

/* What chan_holds() waits for: channel @ch holds a reservation, or
 * pins when @pins. */
struct chan_hold {
	uint32_t ch;
	bool pins;
};

static bool chan_holds(void *arg)
{
	const struct chan_hold *h = arg;

	return h->pins ? T_CSTAT(&srv, h->ch, pins) > 0
		       : T_CSTAT(&srv, h->ch, reserved_bytes) > 0;
}

Test(server_worker, reservations_are_freed_when_worker_dies_before_commit)
{
	pid_t pid;
	uint32_t ch;

	t_server_start(&srv, NULL);
	make_prompt(5);
	ch = fork_and_wait_ready(killed_in_store, &pid);
	cr_assert_lt(ch, 64);
	/* The channel counters follow the answers by up to one batch
	 * (server/tport_ring.c: answers first), so wait for them to show it. */
	cr_expect(
	    t_wait_until(chan_holds, &(struct chan_hold){ch, false}, 5000),
	    "channel %u never showed the reservation", ch);
	t_kill_reap(pid);
	cr_expect(t_wait_until(store_released, &srv, 5000),
		  "used %llu reserved %llu",
		  (unsigned long long)T_GSTAT(&srv, used_bytes),
		  (unsigned long long)T_GSTAT(&srv, reserved_bytes));
	cr_expect_eq(T_CSTAT(&srv, ch, reserved_bytes), 0);
	cr_expect_eq(T_CSTAT(&srv, ch, pins), 0);
	cr_expect_eq(T_GSTAT(&srv, objects), 0, "a reservation was published");
	/* The abandoned keys can be stored by someone else. */
	roundtrip(0);
}

Test(server_worker, pins_are_dropped_when_worker_dies_before_commit_retrieve)
{
	uint64_t used;
	pid_t pid;
	uint32_t ch;

	t_server_start(&srv, NULL);
	make_prompt(6);
	cr_assert_eq(in_child(first_worker), 0);
	cr_assert(t_wait_until(pins_released, &srv, 5000));
	used = T_GSTAT(&srv, used_bytes);
	ch = fork_and_wait_ready(killed_in_retrieve, &pid);
	cr_assert_lt(ch, 64);
	/* The channel's counters are published after the answer the worker
	 * reported ready on: wait for them, as for reservations above. */
	cr_expect(
	    t_wait_until(chan_holds, &(struct chan_hold){ch, true}, 5000));
	cr_expect_eq(T_CSTAT(&srv, ch, pins), NTOK / 128);
	t_kill_reap(pid);
	cr_expect(t_wait_until(pins_released, &srv, 5000), "pins %llu",
		  (unsigned long long)T_GSTAT(&srv, pins));
	cr_expect_eq(T_CSTAT(&srv, ch, pins), 0);
	cr_expect_eq(T_GSTAT(&srv, used_bytes), used, "pool bytes changed");
	cr_expect_eq(T_GSTAT(&srv, objects), NTOK / 128);
}

Test(server_worker, other_worker_carries_on_when_one_writes_garbage)
{
	struct kvr_key keys[16];
	struct kvr_ring_shm *rs;
	struct kvr_client *c;
	struct t_raw bad;
	uint32_t n;
	uint64_t ns;

	t_server_start(&srv, NULL);
	make_prompt(9);
	c = connect_worker(0);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &bad), 0);
	cr_assert_eq(store_prompt(c, keys, &n), (int)n);

	/* A wild tail: far beyond what the ring can hold. */
	rs = (struct kvr_ring_shm *)((char *)bad.ch + bad.ch->req_ring_off);
	atomic_store_explicit(&rs->tail, 1ull << 40, memory_order_release);
	kvr_bell_notify(&bad.ch->req_bell, bad.req_efd);
	cr_expect(t_raw_wait_hangup(&bad, t_timeout_ms(5000)));

	for (int i = 0; i < 20; i++)
		retrieve_and_check(c, keys, n);
	cr_expect_eq(kvr_ping(c, &ns), 0);
	cr_expect_eq(T_GSTAT(&srv, protocol_errors), 1);
	cr_expect(t_server_log_has(&srv, "request ring damaged"));
	kvr_close(c);
	t_raw_close(&bad);
	cr_expect_eq(t_server_stop(&srv), 0);
}
