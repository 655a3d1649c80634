/* SPDX-License-Identifier: MIT */
/*
 * test_doorbell_2proc.c - races the doorbell handshake between a producer
 * and a consumer that really sleep, to catch lost wake-ups.
 *
 * The "queue" is deliberately not the project's ring: a produced/consumed
 * pair of free-running counters plus a small array of sequence stamps, in a
 * MAP_SHARED anonymous region next to the struct kvr_bell_shm, so only the
 * doorbell protocol is under test. The producer publishes bursts of 1..N
 * items (one notify per item) with random pauses between bursts (zero, a
 * busy wait around the consumer's spin time, or a sleep up to 2 ms); the
 * consumer drains, spins a configurable time, then goes through
 * prepare_sleep -> re-check -> wait -> woken.
 *
 * A lost wake-up is detected, never inferred from speed:
 *   - consumer: its wait timed out although a notify covering an item it has
 *     not consumed had already returned (the producer publishes "notified"
 *     after each notify) and the eventfd is still empty. With a correct
 *     protocol that notify either rang the eventfd or ran before the
 *     consumer's re-check, which would then have seen the item.
 *   - producer: a burst was not consumed within the (generous) deadline.
 * A dawdling variant sleeps inside the consumer's handshake to widen its
 * windows. The last test runs a deliberately broken consumer (no re-check)
 * to show that the detector fires. Knobs: KVR_STRESS_BURSTS (20000),
 * KVR_STRESS_SPIN_US (20), KVR_STRESS_SEED, KVR_TEST_TIMEOUT_MULT.
 */
#include <kvring/clock.h>
#include <kvring/doorbell.h>

#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t_uwait.h"

#define NSLOTS 64u /* stamp array; a burst never exceeds it */

/* Everything the two sides share. Lives in one MAP_SHARED mapping. */
struct st_shm {
	struct kvr_bell_shm bell;
	/* Producer-written line. */
	_Alignas(64) _Atomic uint64_t produced;
	_Atomic uint64_t notified; /* items covered by a returned notify */
	_Atomic uint64_t notifies; /* kvr_bell_notify() calls that returned */
	_Atomic uint32_t done;
	/* Consumer-written line. */
	_Alignas(64) _Atomic uint64_t consumed;
	_Atomic uint64_t prepares;
	_Atomic uint64_t idle_timeouts; /* timed out with nothing pending */
	_Atomic uint64_t late;		/* timed out, then found the ring */
	_Atomic uint64_t empty_wakes;	/* woke and found no new item */
	/* Failure report: the first side to fail owns msg. */
	_Alignas(64) _Atomic uint32_t failed;
	char msg[512];
	uint64_t slots[NSLOTS];
};

struct st_cfg {
	unsigned bursts;
	unsigned max_burst;
	unsigned spin_us;
	int consumer_wait_ms;
	int producer_wait_ms;
	bool use_uwait;	   /* else kvr_bell_wait_fd() */
	bool skip_recheck; /* the deliberately broken consumer */
	unsigned skip_delay_us;
	/* If set, a correct consumer sleeps this long at random inside its
	 * handshake: after prepare_sleep or after the re-check. */
	unsigned dawdle_us;
	uint64_t seed;
};

struct st_run {
	struct st_shm *sh;
	const struct st_cfg *cfg;
	int efd;
	pid_t peer; /* consumer pid when forked, 0 for threads */
};

/* ==== small helpers ==== */

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return dflt;
	v = strtoul(s, &end, 10);
	return (*end || v > 1000000000ul) ? dflt : (unsigned)v;
}

static void busy_us(unsigned us)
{
	uint64_t end = kvr_clock_now_ns() + (uint64_t)us * 1000;

	while (kvr_clock_now_ns() < end)
		;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = {.tv_sec = us / 1000000,
			      .tv_nsec = (long)(us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static uint64_t rnd(uint64_t *s)
{
	/* xorshift64*: plenty for picking sizes and pauses. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static uint64_t stamp(uint64_t seq)
{
	return seq * 0x9e3779b97f4a7c15ull ^ 0x5bd1e995u;
}

/* Record the first failure; later ones are dropped. */
__attribute__((format(printf, 2, 3))) static void st_fail(struct st_shm *sh,
							  const char *fmt, ...)
{
	uint32_t zero = 0;
	va_list ap;

	if (!atomic_compare_exchange_strong(&sh->failed, &zero, 1))
		return;
	va_start(ap, fmt);
	vsnprintf(sh->msg, sizeof(sh->msg), fmt, ap);
	va_end(ap);
	/* 2 = message complete; read after join/waitpid anyway. */
	atomic_store_explicit(&sh->failed, 2, memory_order_release);
}

static bool failed(struct st_shm *sh)
{
	/* Relaxed: only a stop hint; the message is read after join. */
	return atomic_load_explicit(&sh->failed, memory_order_relaxed) != 0;
}

/*
 * A failure was flagged, maybe by the other process, which may still be
 * writing its message (failed 1, not yet 2): wait up to a second for it
 * before that process is killed. Without this, a kill that landed
 * between st_fail's claim and its message left the negative control
 * with an empty message under load ("message: ").
 */
static void wait_message(struct st_shm *sh)
{
	uint64_t until = kvr_clock_now_ns() + 1000000000ull;

	/* Acquire: pairs with st_fail's release of 2; the message is
	 * complete once 2 is seen. */
	while (atomic_load_explicit(&sh->failed, memory_order_acquire) == 1 &&
	       kvr_clock_now_ns() < until)
		usleep(1000);
}

static void bump(_Atomic uint64_t *c)
{
	/* Relaxed: single writer, read after join/waitpid. */
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* ==== consumer ==== */

/* Is there something to do: an item, or the stop flag? */
static bool has_work(struct st_shm *sh, uint64_t c)
{
	/* A1: pairs with R1 in producer(): the stamps are visible. */
	return atomic_load_explicit(&sh->produced, memory_order_acquire) != c ||
	       atomic_load_explicit(&sh->done, memory_order_acquire);
}

/* Spin up to spin_us for work. Return: true if work showed up. */
static bool spin_for_work(struct st_shm *sh, uint64_t c, unsigned spin_us)
{
	uint64_t end = kvr_clock_now_ns() + (uint64_t)spin_us * 1000;

	do {
		if (has_work(sh, c))
			return true;
	} while (kvr_clock_now_ns() < end);
	return false;
}

/* Wait on the eventfd. Return: 1 signalled, 0 timed out, -errno. */
static int wait_bell(struct t_uwait *w, int efd, int timeout_ms)
{
	uint64_t tag;
	int rc;

	if (w)
		rc = t_uwait_wait(w, timeout_ms, &tag, 1);
	else
		rc = kvr_bell_wait_fd(efd, timeout_ms);
	if (rc == -ETIMEDOUT)
		return 0;
	if (rc == -EINTR)
		return 1; /* harmless: treated as a (spurious) wake */
	return rc < 0 ? rc : 1;
}

static void consumer(struct st_run *run)
{
	struct st_shm *sh = run->sh;
	const struct st_cfg *cfg = run->cfg;
	struct t_uwait *w = NULL;
	uint64_t seed = (cfg->seed ^ 0xc0ffee) | 1;
	bool dawdle = cfg->dawdle_us > 0;
	uint64_t c = 0;
	int rc;

	if (cfg->use_uwait) {
		rc = t_uwait_create(8, &w);
		if (rc == 0)
			rc = t_uwait_add(w, run->efd, 1);
		if (rc < 0) {
			st_fail(sh, "consumer: uwait setup: %s", strerror(-rc));
			t_uwait_destroy(w);
			return;
		}
	}
	while (!failed(sh)) {
		/* A1: pairs with R1 in producer(). */
		uint64_t p =
		    atomic_load_explicit(&sh->produced, memory_order_acquire);

		if (p != c) {
			if (p - c > NSLOTS) {
				st_fail(sh,
					"consumer: %llu items pending, "
					"more than %u slots",
					(unsigned long long)(p - c), NSLOTS);
				break;
			}
			for (; c != p; c++) {
				uint64_t got = sh->slots[c % NSLOTS];

				if (got != stamp(c)) {
					st_fail(sh,
						"consumer: item %llu "
						"stamp %#llx, expected "
						"%#llx",
						(unsigned long long)c,
						(unsigned long long)got,
						(unsigned long long)stamp(c));
					goto out;
				}
			}
			/* R2: pairs with A2 in producer(). */
			atomic_store_explicit(&sh->consumed, c,
					      memory_order_release);
			continue;
		}
		/* Stop only when drained: done is set after the last burst
		 * was consumed, so nothing can follow it. */
		if (atomic_load_explicit(&sh->done, memory_order_acquire))
			break;
		if (spin_for_work(sh, c, cfg->spin_us))
			continue;

		if (!cfg->skip_recheck) {
			unsigned where =
			    dawdle ? (unsigned)(rnd(&seed) % 3) : 0;

			kvr_bell_prepare_sleep(&sh->bell);
			/* Widen the window between flag and re-check: the
			 * producer publishes while the flag is already set. */
			if (where == 1)
				sleep_us(cfg->dawdle_us);
			/* The re-check that F2 makes safe. */
			if (has_work(sh, c)) {
				kvr_bell_cancel_sleep(&sh->bell);
				bump(&sh->prepares);
				continue;
			}
			/* Widen the window between re-check and block: the
			 * ring lands before the consumer waits. */
			if (where == 2)
				sleep_us(cfg->dawdle_us);
		} else {
			/* Broken on purpose: the emptiness check above is
			 * stale by now and is not repeated. Sleeping (not
			 * spinning) here matters: after a wake-up the
			 * scheduler often puts both sides on one CPU, and a
			 * spin would keep the producer out of the window. */
			sleep_us(cfg->skip_delay_us);
			kvr_bell_prepare_sleep(&sh->bell);
		}
		bump(&sh->prepares);

		rc = wait_bell(w, run->efd, cfg->consumer_wait_ms);
		if (rc < 0) {
			st_fail(sh, "consumer: wait: %s", strerror(-rc));
			kvr_bell_woken(&sh->bell, w ? -1 : run->efd);
			break;
		}
		if (rc == 0) {
			/* A3: pairs with R3 in producer(): if that notify
			 * returned, its eventfd write (if any) is done. */
			uint64_t nt = atomic_load_explicit(
			    &sh->notified, memory_order_acquire);

			if (nt <= c) {
				bump(&sh->idle_timeouts);
			} else if (wait_bell(w, run->efd, 0) == 1) {
				bump(&sh->late);
			} else {
				st_fail(sh,
					"lost wake-up: consumer slept %d ms "
					"while item %llu was published and "
					"notified (notified=%llu consumed=%llu "
					"rung=%llu suppressed=%llu), eventfd "
					"empty",
					cfg->consumer_wait_ms,
					(unsigned long long)c,
					(unsigned long long)nt,
					(unsigned long long)c,
					(unsigned long long)atomic_load(
					    &sh->bell.rung),
					(unsigned long long)atomic_load(
					    &sh->bell.suppressed));
				kvr_bell_woken(&sh->bell, w ? -1 : run->efd);
				break;
			}
		}
		kvr_bell_woken(&sh->bell, w ? -1 : run->efd);
		if (!has_work(sh, c))
			bump(&sh->empty_wakes);
	}
out:
	t_uwait_destroy(w);
}

/* ==== producer ==== */

static bool peer_alive(struct st_run *run)
{
	int status;

	if (run->peer <= 0 || waitpid(run->peer, &status, WNOHANG) == 0)
		return true;
	run->peer = -1; /* reaped; the caller reports */
	st_fail(run->sh, "consumer exited early (status %#x)", status);
	return false;
}

static void notify(struct st_run *run, uint64_t covered)
{
	struct st_shm *sh = run->sh;
	int rc = kvr_bell_notify(&sh->bell, run->efd);

	if (rc < 0)
		st_fail(sh, "producer: notify: %s", strerror(-rc));
	bump(&sh->notifies);
	/* R3: pairs with A3 in consumer(). */
	atomic_store_explicit(&sh->notified, covered, memory_order_release);
}

/*
 * The pause decides which path the next notify takes: none (consumer still
 * draining or spinning: suppressed), about the consumer's spin time (the
 * publish races its prepare_sleep/re-check: the interesting case), or a
 * real sleep of up to 2 ms (consumer blocked: rung).
 */
static void pause_between_bursts(const struct st_cfg *cfg, uint64_t *seed)
{
	unsigned r = (unsigned)(rnd(seed) % 20);
	unsigned spin = cfg->spin_us;

	if (r < 7)
		return;
	if (r < 11) {
		busy_us((unsigned)(rnd(seed) % (4 * spin + 1)));
	} else if (r < 16) {
		/* spin-3 .. spin+3 us: aim at the flag/re-check window. */
		unsigned lo = spin > 3 ? spin - 3 : 0;

		busy_us(lo + (unsigned)(rnd(seed) % 7));
	} else {
		sleep_us((unsigned)(rnd(seed) % 2001));
	}
}

static void producer(struct st_run *run)
{
	struct st_shm *sh = run->sh;
	const struct st_cfg *cfg = run->cfg;
	uint64_t seed = cfg->seed | 1;
	uint64_t p = 0;

	for (unsigned b = 0; b < cfg->bursts && !failed(sh); b++) {
		unsigned k = 1 + (unsigned)(rnd(&seed) % cfg->max_burst);
		uint64_t deadline;
		unsigned n = 0;

		for (unsigned j = 0; j < k; j++) {
			sh->slots[p % NSLOTS] = stamp(p);
			p++;
			/* R1: publish the stamp; pairs with A1. */
			atomic_store_explicit(&sh->produced, p,
					      memory_order_release);
			notify(run, p);
			/* Sometimes dawdle inside a burst, to land in the
			 * consumer's prepare/re-check window. */
			if (rnd(&seed) % 8 == 0)
				busy_us((unsigned)(rnd(&seed) %
						   (2 * cfg->spin_us + 1)));
		}
		deadline = kvr_clock_now_ns() +
			   (uint64_t)cfg->producer_wait_ms * 1000000;
		/* A2: pairs with R2 in consumer(). */
		while (atomic_load_explicit(&sh->consumed,
					    memory_order_acquire) != p) {
			if (failed(sh))
				break;
			if (++n % 1024 == 0) {
				if (!peer_alive(run))
					break;
				if (kvr_clock_now_ns() > deadline) {
					st_fail(sh,
						"lost wake-up: burst %u (%u "
						"items) not consumed after %d "
						"ms (produced=%llu consumed="
						"%llu sleeping=%u rung=%llu "
						"suppressed=%llu)",
						b, k, cfg->producer_wait_ms,
						(unsigned long long)p,
						(unsigned long long)atomic_load(
						    &sh->consumed),
						atomic_load(&sh->bell.sleeping),
						(unsigned long long)atomic_load(
						    &sh->bell.rung),
						(unsigned long long)atomic_load(
						    &sh->bell.suppressed));
					break;
				}
			}
			sched_yield();
		}
		pause_between_bursts(cfg, &seed);
	}
	atomic_store_explicit(&sh->done, 1, memory_order_release);
	notify(run, p);
}

/* ==== harness ==== */

static struct st_cfg default_cfg(void)
{
	unsigned mult = env_uint("KVR_TEST_TIMEOUT_MULT", 1);
	struct st_cfg cfg = {
	    .bursts = env_uint("KVR_STRESS_BURSTS", 20000),
	    .max_burst = 32,
	    .spin_us = env_uint("KVR_STRESS_SPIN_US", 20),
	    .consumer_wait_ms = 2000 * (int)(mult ? mult : 1),
	    .producer_wait_ms = 5000 * (int)(mult ? mult : 1),
	    .use_uwait = true,
	    .seed = env_uint("KVR_STRESS_SEED", 0),
	};

	if (!cfg.seed)
		cfg.seed = kvr_clock_now_ns();
	return cfg;
}

static struct st_shm *map_shm(void)
{
	void *p = mmap(NULL, sizeof(struct st_shm), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	kvr_bell_init(&((struct st_shm *)p)->bell);
	return p;
}

static void *consumer_thread(void *arg)
{
	consumer(arg);
	return NULL;
}

/* Run producer and consumer; return the shared block for checks. */
static struct st_shm *run_pair(const struct st_cfg *cfg, bool fork_it)
{
	struct st_shm *sh = map_shm();
	struct st_run run = {.sh = sh, .cfg = cfg};
	uint64_t t0 = kvr_clock_now_ns();

	cr_assert_eq(kvr_bell_open(&run.efd), 0);
	if (fork_it) {
		pid_t pid = fork();

		cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			consumer(&run);
			_exit(atomic_load(&sh->failed) ? 1 : 0);
		}
		run.peer = pid;
		producer(&run);
		if (run.peer > 0) {
			int status;

			if (failed(sh)) {
				wait_message(sh);
				kill(run.peer, SIGKILL);
			}
			cr_assert_eq(waitpid(run.peer, &status, 0), run.peer);
			if (!failed(sh))
				cr_expect(WIFEXITED(status) &&
					      WEXITSTATUS(status) == 0,
					  "consumer status %#x", status);
		}
	} else {
		pthread_t t;

		cr_assert_eq(pthread_create(&t, NULL, consumer_thread, &run),
			     0);
		producer(&run);
		cr_assert_eq(pthread_join(t, NULL), 0);
	}
	close(run.efd);

	struct kvr_bell_stats s;

	kvr_bell_stats(&sh->bell, &s);
	fprintf(stderr,
		"doorbell stress (%s, %s%s): seed=%llu bursts=%u items=%llu "
		"notifies=%llu rung=%llu suppressed=%llu sleeps=%llu "
		"cancels=%llu idle_timeouts=%llu late=%llu empty_wakes=%llu "
		"seconds=%.2f\n",
		fork_it ? "2 processes" : "2 threads",
		cfg->use_uwait ? "io_uring" : "poll",
		cfg->skip_recheck ? ", broken consumer"
		: cfg->dawdle_us  ? ", dawdling consumer"
				  : "",
		(unsigned long long)cfg->seed, cfg->bursts,
		(unsigned long long)atomic_load(&sh->produced),
		(unsigned long long)atomic_load(&sh->notifies),
		(unsigned long long)s.rung, (unsigned long long)s.suppressed,
		(unsigned long long)s.sleeps, (unsigned long long)s.cancels,
		(unsigned long long)atomic_load(&sh->idle_timeouts),
		(unsigned long long)atomic_load(&sh->late),
		(unsigned long long)atomic_load(&sh->empty_wakes),
		(double)(kvr_clock_now_ns() - t0) / 1e9);
	return sh;
}

/* Expect counter @a plus counter @b to be counter @sum; the failure names
 * all three with their values. */
static void expect_sum(const char *an, uint64_t a, const char *bn, uint64_t b,
		       const char *sn, uint64_t sum)
{
	cr_expect_eq(a + b, sum, "%s %llu + %s %llu != %s %llu", an,
		     (unsigned long long)a, bn, (unsigned long long)b, sn,
		     (unsigned long long)sum);
}

/* The checks every correct run must pass. */
static void expect_clean(struct st_shm *sh, const struct st_cfg *cfg)
{
	struct kvr_bell_stats s;

	kvr_bell_stats(&sh->bell, &s);
	cr_assert_eq(atomic_load(&sh->failed), 0, "%s (seed %llu)", sh->msg,
		     (unsigned long long)cfg->seed);
	cr_expect_eq(atomic_load(&sh->consumed), atomic_load(&sh->produced),
		     "consumed %llu of %llu",
		     (unsigned long long)atomic_load(&sh->consumed),
		     (unsigned long long)atomic_load(&sh->produced));
	expect_sum("rung", s.rung, "suppressed", s.suppressed, "notifies",
		   atomic_load(&sh->notifies));
	cr_expect_gt(s.rung, 0, "the ringing path was never taken");
	cr_expect_gt(s.suppressed, 0, "the suppressed path was never taken");
	expect_sum("sleeps", s.sleeps, "cancels", s.cancels, "prepares",
		   atomic_load(&sh->prepares));
	cr_expect_eq(s.sleeping, 0, "consumer left its flag set");
	munmap(sh, sizeof(*sh));
}

/* Stress timeouts: 20000 bursts take ~5 s; sanitizers are slower. */
TestSuite(doorbell_2proc, .timeout = 300);

Test(doorbell_2proc, loses_no_wakeup_when_processes_race_with_io_uring)
{
	struct st_cfg cfg = default_cfg();

	expect_clean(run_pair(&cfg, true), &cfg);
}

Test(doorbell_2proc, loses_no_wakeup_when_processes_race_with_poll)
{
	struct st_cfg cfg = default_cfg();

	cfg.use_uwait = false;
	cfg.bursts = cfg.bursts / 4 + 1;
	expect_clean(run_pair(&cfg, true), &cfg);
}

Test(doorbell_2proc, loses_no_wakeup_when_threads_race_with_io_uring)
{
	/* Mostly here for ThreadSanitizer, which sees threads only. */
	struct st_cfg cfg = default_cfg();

	cfg.bursts = cfg.bursts / 2 + 1;

	expect_clean(run_pair(&cfg, false), &cfg);
}

Test(doorbell_2proc, loses_no_wakeup_when_consumer_dawdles_in_handshake)
{
	/* Publishes land between the flag and the re-check (cancel path)
	 * and between the re-check and the block (ring before wait). */
	struct st_cfg cfg = default_cfg();
	struct st_shm *sh;
	struct kvr_bell_stats s;

	cfg.dawdle_us = 100;
	cfg.bursts = cfg.bursts / 4 + 1;
	sh = run_pair(&cfg, true);
	kvr_bell_stats(&sh->bell, &s);
	cr_expect_gt(s.cancels, 0, "the re-check never caught a publish");
	expect_clean(sh, &cfg);
}

Test(doorbell_2proc, detects_lost_wakeup_when_consumer_skips_recheck)
{
	/* The negative control: without the re-check a wake-up is lost as
	 * soon as a publish lands between the consumer's last look and its
	 * flag store. The detector must say so, quickly. */
	struct st_cfg cfg = default_cfg();
	struct st_shm *sh;

	cfg.skip_recheck = true;
	cfg.skip_delay_us = 200;
	cfg.spin_us = 0;
	cfg.max_burst = 1;
	cfg.bursts = 5000;
	cfg.consumer_wait_ms = 100;
	sh = run_pair(&cfg, true);
	cr_expect_neq(atomic_load(&sh->failed), 0,
		      "a consumer without re-check survived %u bursts: the "
		      "detector is blind",
		      cfg.bursts);
	cr_expect(strstr(sh->msg, "lost wake-up") != NULL, "message: %s",
		  sh->msg);
	munmap(sh, sizeof(*sh));
}
