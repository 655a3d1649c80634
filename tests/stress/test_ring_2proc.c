/* SPDX-License-Identifier: MIT */
/*
 * test_ring_2proc.c - stress of the SPSC ring with the producer and the
 * consumer running concurrently: in two processes (fork) over a /dev/shm
 * mapping, and in two threads of one process (so that ThreadSanitizer can
 * check the ring's acquire/release pairs; it cannot see across fork).
 * Every record carries its sequence number and the XXH3_64bits of the rest
 * of its payload; the consumer checks order, type, length and hash, and
 * prints expected and found values on a mismatch. Sizes (16..512 bytes)
 * and batch lengths on both sides vary pseudo-randomly, and the producer
 * pads lines after batches (its consumer takes line padding). Record counts
 * come from KVR_STRESS_RECORDS (default 10,000,000; threads use a fifth).
 *
 * Criterion cannot start under ThreadSanitizer (its BoxFort arena wants
 * fixed addresses that TSan reserves), so building this file with
 * -DKVR_RING_STRESS_MAIN replaces the Criterion tests by a plain main()
 * that runs the same two scenarios; docs/ring.md shows the command.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef KVR_RING_STRESS_MAIN
#include <criterion/criterion.h>
#endif
#include <xxhash.h>

#include <kvring/clock.h>
#include <kvring/ring.h>

#include "t_shm.h"

#define RING_CAP   (32u * 1024u)
#define MIN_LEN	   16u
#define MAX_LEN	   512u
#define POOL_BYTES (64u * 1024u)

/* Random bytes copied into payloads; identical in both processes. */
static uint8_t pool[POOL_BYTES + MAX_LEN];

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void pool_init(void)
{
	uint64_t s = 42;

	for (size_t i = 0; i < sizeof(pool); i += 8) {
		uint64_t v = splitmix64(&s);

		memcpy(pool + i, &v, 8);
	}
}

/* Length, type and payload source of record @seq, on both sides. */
struct shape {
	uint32_t len, type, src;
};

static struct shape shape_of(uint64_t seq)
{
	uint64_t s = seq * 0x2545f4914f6cdd1dull;
	uint64_t r = splitmix64(&s);

	return (struct shape){
	    .len = MIN_LEN + (uint32_t)(r % (MAX_LEN - MIN_LEN + 1)),
	    .type = 1 + (uint32_t)(seq % KVR_RING_TYPE_MAX),
	    .src = (uint32_t)(r >> 32) % POOL_BYTES,
	};
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

/* Pause one spin; every 1024th spin gives the core to the peer process. */
static void backoff(unsigned *spins)
{
	kvr_clock_relax();
	if (++*spins % 1024 == 0)
		sched_yield();
}

/*
 * Produces @n records into @r; returns 0 or a negative errno. Commits after
 * a pseudo-random batch of 1..32 records, and before waiting when full.
 */
static int produce(struct kvr_ring *r, uint64_t n)
{
	uint64_t rs = 7, batch_left = 1;
	unsigned spins = 0;

	for (uint64_t seq = 0; seq < n;) {
		struct shape sh = shape_of(seq);
		uint8_t *p;
		void *out;
		int rc = kvr_ring_claim(r, sh.type, sh.len, &out);

		if (rc == -EAGAIN) {
			kvr_ring_commit(r);
			backoff(&spins);
			continue;
		}
		if (rc < 0)
			return rc;
		p = out;
		memcpy(p + 16, pool + sh.src, sh.len - 16);
		uint64_t h = XXH3_64bits(p + 16, sh.len - 16);

		memcpy(p, &seq, 8);
		memcpy(p + 8, &h, 8);
		seq++;
		if (--batch_left == 0) {
			kvr_ring_commit(r);
			batch_left = 1 + splitmix64(&rs) % 32;
		}
	}
	kvr_ring_commit(r);
	return 0;
}

/* What the consumer found wrong; printed by the test with both values. */
struct verdict {
	int rc;
	const char *what;
	uint64_t seq, expected, found;
};

/*
 * Consumes and verifies @n records from @r. @alive is polled while the ring
 * is empty so that a dead producer fails the test instead of hanging it.
 */
static struct verdict consume(struct kvr_ring *r, uint64_t n,
			      bool (*alive)(void *), void *arg)
{
	uint64_t rs = 11, batch_left = 1;
	unsigned spins = 0;

	for (uint64_t seq = 0; seq < n;) {
		struct kvr_ring_rec rec;
		struct shape sh;
		uint64_t got_seq, got_h, h;
		int rc = kvr_ring_peek(r, &rec);

		if (rc == -EAGAIN) {
			kvr_ring_release(r);
			backoff(&spins);
			if (spins % (1u << 20) == 0 && !alive(arg) &&
			    kvr_ring_empty(r))
				return (struct verdict){-EPIPE, "producer died",
							seq, n, seq};
			continue;
		}
		if (rc < 0)
			return (struct verdict){rc, "peek", seq, 0, 0};
		sh = shape_of(seq);
		if (rec.len != sh.len)
			return (struct verdict){-EBADMSG, "len", seq, sh.len,
						rec.len};
		if (rec.type != sh.type)
			return (struct verdict){-EBADMSG, "type", seq, sh.type,
						rec.type};
		memcpy(&got_seq, rec.data, 8);
		memcpy(&got_h, (const uint8_t *)rec.data + 8, 8);
		if (got_seq != seq)
			return (struct verdict){-EBADMSG, "seq", seq, seq,
						got_seq};
		h = XXH3_64bits((const uint8_t *)rec.data + 16, rec.len - 16);
		if (h != got_h)
			return (struct verdict){-EBADMSG, "xxh3", seq, got_h,
						h};
		seq++;
		if (--batch_left == 0) {
			kvr_ring_release(r);
			batch_left = 1 + splitmix64(&rs) % 32;
		}
	}
	kvr_ring_release(r);
	if (!kvr_ring_empty(r))
		return (struct verdict){-EBADMSG, "extra records", n, 0, 1};
	return (struct verdict){0, NULL, n, 0, 0};
}

/* ---- two processes ---------------------------------------------------- */

static bool child_alive(void *arg)
{
	pid_t pid = *(pid_t *)arg;

	return waitpid(pid, NULL, WNOHANG) == 0;
}

/*
 * Producer in a forked child, consumer here, over a /dev/shm mapping.
 * *@status gets the child's wait status (0 if it was reaped early).
 */
static struct verdict run_2proc(uint64_t n, int *status)
{
	size_t bytes = kvr_ring_shm_bytes(RING_CAP);
	void *mem = t_shm_devshm(bytes);
	struct kvr_ring cons;
	struct verdict v;
	pid_t pid;
	int rc;

	*status = 0;
	pool_init();
	rc = kvr_ring_format(mem, bytes, RING_CAP);
	if (rc == 0)
		rc = kvr_ring_attach_consumer(&cons, mem, bytes, RING_CAP);
	if (rc < 0)
		return (struct verdict){rc, "format/attach", 0, 0, 0};
	fflush(NULL); /* nothing buffered may be written twice */
	pid = fork();
	if (pid < 0)
		return (struct verdict){-errno, "fork", 0, 0, 0};
	if (pid == 0) {
		struct kvr_ring prod;

		rc = kvr_ring_attach_producer(&prod, mem, bytes, RING_CAP);
		if (rc == 0)
			rc = produce(&prod, n);
		if (rc < 0)
			fprintf(stderr, "producer: %s\n", strerror(-rc));
		_exit(rc < 0 ? 1 : 0);
	}
	v = consume(&cons, n, child_alive, &pid);
	if (v.rc < 0)
		kill(pid, SIGKILL); /* only our own child, by pid */
	waitpid(pid, status, 0);
	t_shm_unmap(mem, bytes);
	return v;
}

/* ---- two threads ------------------------------------------------------ */

struct thr {
	struct kvr_ring prod;
	uint64_t n;
	int rc;
	_Atomic bool done;
};

static void *producer_thread(void *arg)
{
	struct thr *t = arg;

	t->rc = produce(&t->prod, t->n);
	atomic_store_explicit(&t->done, true, memory_order_release);
	return NULL;
}

static bool thread_alive(void *arg)
{
	struct thr *t = arg;

	return !atomic_load_explicit(&t->done, memory_order_acquire);
}

/*
 * Producer thread and consumer thread in this process. On a consumer
 * failure the producer may wait on a full ring forever: it is detached and
 * the process is expected to end (the test fails).
 */
static struct verdict run_threads(uint64_t n, int *prod_rc)
{
	size_t bytes = kvr_ring_shm_bytes(RING_CAP);
	void *mem = t_shm_anon(bytes);
	static struct thr t;
	struct kvr_ring cons;
	struct verdict v;
	pthread_t tid;
	int rc;

	t.n = n;
	t.rc = 0;
	atomic_store(&t.done, false);
	pool_init();
	rc = kvr_ring_format(mem, bytes, RING_CAP);
	if (rc == 0)
		rc = kvr_ring_attach_producer(&t.prod, mem, bytes, RING_CAP);
	if (rc == 0)
		rc = kvr_ring_attach_consumer(&cons, mem, bytes, RING_CAP);
	/* The consumer attached second: the producer learns that it takes
	 * line padding, as kvringd does at a channel's first request. */
	kvr_ring_producer_sync(&t.prod);
	if (rc == 0)
		rc = -pthread_create(&tid, NULL, producer_thread, &t);
	if (rc < 0)
		return (struct verdict){rc, "setup", 0, 0, 0};
	v = consume(&cons, n, thread_alive, &t);
	if (v.rc < 0) {
		pthread_detach(tid);
		return v;
	}
	pthread_join(tid, NULL);
	*prod_rc = t.rc;
	t_shm_unmap(mem, bytes);
	return v;
}

static uint64_t records(void)
{
	return env_u64("KVR_STRESS_RECORDS", 10000000);
}

#ifndef KVR_RING_STRESS_MAIN

static void expect_verdict(struct verdict v, uint64_t n)
{
	cr_assert_eq(v.rc, 0,
		     "%s at seq %" PRIu64 ": expected %#" PRIx64
		     ", found %#" PRIx64 " (rc %d: %s)",
		     v.what, v.seq, v.expected, v.found, v.rc, strerror(-v.rc));
	cr_expect_eq(v.seq, n);
}

TestSuite(ring_2proc, .timeout = 300);

Test(ring_2proc, records_arrive_intact_and_in_order_when_in_two_processes)
{
	uint64_t n = records();
	int status;
	struct verdict v = run_2proc(n, &status);

	expect_verdict(v, n);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "producer status %#x", status);
}

Test(ring_2proc, records_arrive_intact_and_in_order_when_in_two_threads)
{
	uint64_t n = records() / 5;
	int prod_rc = 0;
	struct verdict v = run_threads(n, &prod_rc);

	expect_verdict(v, n);
	cr_expect_eq(prod_rc, 0, "producer: %d", prod_rc);
}

#else /* KVR_RING_STRESS_MAIN: for ThreadSanitizer, without Criterion */

static int report(const char *name, struct verdict v, int extra)
{
	if (v.rc < 0 || extra) {
		fprintf(stderr,
			"%s: FAIL %s at seq %" PRIu64 ": expected %#" PRIx64
			", found %#" PRIx64 " (rc %d, extra %d)\n",
			name, v.what ? v.what : "producer", v.seq, v.expected,
			v.found, v.rc, extra);
		return 1;
	}
	printf("%s: ok, %" PRIu64 " records\n", name, v.seq);
	return 0;
}

int main(int argc, char **argv)
{
	int fails = 0, status, prod_rc = 0;
	bool only_threads = argc > 1 && strcmp(argv[1], "threads") == 0;
	struct verdict v;

	v = run_threads(records() / 5, &prod_rc);
	fails += report("two_threads", v, prod_rc);
	if (!only_threads) {
		v = run_2proc(records(), &status);
		fails +=
		    report("two_processes", v,
			   !(WIFEXITED(status) && WEXITSTATUS(status) == 0));
	}
	return fails ? 1 : 0;
}

#endif
