/* SPDX-License-Identifier: MIT */
/*
 * clock.h - the one monotonic clock and the one spin-wait hint that every
 * kvring program uses: kvringd's loop, libkvring's waits, the tools, the
 * tests and the benchmarks.
 *
 * This file owns two facts. Time is CLOCK_MONOTONIC in nanoseconds, a
 * uint64_t: the server stamps heartbeats and activity with it in shared
 * memory, and workers and the inspector subtract their own readings from
 * those stamps, so every process must read the same clock (CLOCK_MONOTONIC
 * is system-wide; it never jumps with settimeofday or NTP steps). A spin
 * loop pauses with kvr_clock_relax() between polls, which lets the sibling
 * hyperthread run and costs no system call.
 *
 * It deliberately does not own wall-clock formatting (log.c), the cheap
 * coarse deadline clock of libkvring's waits (worker/wait.c), or the
 * benchmarks' TSC ticks: those are choices of one caller each. Everything
 * here is static inline, so the hot paths that read the clock once per
 * pass (a vDSO call, no system call) pay no extra call.
 */
#ifndef KVRING_CLOCK_H
#define KVRING_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds per second, for converting to and from struct timespec. */
#define KVR_CLOCK_NS_PER_S 1000000000ull

/*
 * kvr_clock_ns - @clk read in nanoseconds. The two clocks kvring reads are
 * CLOCK_MONOTONIC (kvr_clock_now_ns) and CLOCK_REALTIME (kvr_clock_wall_ns).
 * Return: the time, or 0 if the kernel refused the clock (it never does for
 * those two; 0 reads as "long ago", which no deadline takes for "not yet").
 */
static inline uint64_t kvr_clock_ns(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * KVR_CLOCK_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/*
 * kvr_clock_now_ns - CLOCK_MONOTONIC in nanoseconds: the clock of every
 * deadline, age, heartbeat and latency in kvring. Readings of different
 * processes on one host are comparable.
 */
static inline uint64_t kvr_clock_now_ns(void)
{
	return kvr_clock_ns(CLOCK_MONOTONIC);
}

/*
 * kvr_clock_wall_ns - CLOCK_REALTIME in nanoseconds since the epoch. Only
 * for what a human reads as a date (the server's recorded start); never
 * for a deadline, since it jumps when the wall clock is set.
 */
static inline uint64_t kvr_clock_wall_ns(void)
{
	return kvr_clock_ns(CLOCK_REALTIME);
}

/*
 * kvr_clock_relax - one spin-wait pause: "pause" on x86, "yield" on arm64,
 * a compiler barrier elsewhere. The "memory" clobber makes the compiler
 * reload whatever the loop polls (the loads themselves still need their
 * own atomics: this orders nothing between threads).
 */
static inline void kvr_clock_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif /* KVRING_CLOCK_H */
