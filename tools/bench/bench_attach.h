/* SPDX-License-Identifier: MIT */
/*
 * bench_attach.h - what the attach scenario's files share (private to
 * tools/bench/): its cells' results, the run's state, and the calls
 * between bench_attach.c (the runs), bench_attach_huge.c (the huge-page
 * reservation and MemAvailable) and bench_attach_report.c (table, JSON
 * lines and plot).
 */
#ifndef KVR_BENCH_ATTACH_H
#define KVR_BENCH_ATTACH_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_server.h"

#define NCHUNK	    8u
#define CHUNK_BYTES (2ull << 20)
#define REQ_BYTES   (NCHUNK * CHUNK_BYTES)
#define STEADY_REQS 10u
#define MAX_SIZES   6
#define NR_PATH	    "/proc/sys/vm/nr_hugepages"

enum { P_4K, P_HUGE, NR_PAGES };
static const char *const page_name[NR_PAGES] = {"4k", "huge"};

struct cell {
	bool done;
	char skip[160]; /* why not run, "" if run */
	uint64_t pool_bytes;
	double start_ms, srv_prefault_ms, attach_ms;
	double restart_ms, srv_reprefault_ms; /* the same server again */
	/* huge only: fork to the end of the background zeroing */
	double zeroed_ms, rezeroed_ms;
	/* huge only: a worker connecting right after a third start */
	bool dur_done, dur_pending, dur_follow;
	double dur_attach_ms, dur_first_gbps, dur_memcpy_gbps;
	double dur_follow_ms; /* connect to the end of the follower */
	double dur_req_gbps;  /* prepare + copy + commit */
	double dur_line_mib, dur_above_mib; /* zeroed line, bytes above */
	/* huge only: a store once the line has room for it, still zeroing */
	bool dur_room_done, dur_room_pending;
	double dur_room_gbps, dur_room_req_gbps, dur_room_memcpy_gbps;
	double dur_room_line_mib, dur_room_above_mib;
	double first_gbps, first_memcpy_gbps;
	double store_gbps, retr_gbps, memcpy_gbps;
	/* background pre-fault, 4 KiB only */
	bool bg_done, bg_pending;
	double bg_connect_ms, bg_first_gbps, bg_memcpy_gbps, bg_prefault_ms;
	double bg_req_gbps; /* prepare + copy + commit */
};

struct att {
	struct bench_run_opts o;
	double memset_ms_per_gib; /* floor: zeroing memory already mapped */
	bool reserve;
	uint64_t sizes[MAX_SIZES];
	unsigned nsizes, rounds;
	unsigned char *src, *dst;
	uint64_t seq;
	/* The last store_req(): its whole time and its slots' offsets. */
	uint64_t req_ns, last_off[NCHUNK];
	struct cell res[MAX_SIZES][NR_PAGES];
};

/* ---- units ---- */

static inline double gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0.0;
}

static inline double per_gib(double ms, uint64_t bytes)
{
	return ms * (double)(1ull << 30) / (double)bytes;
}

/* ---- bench_attach_huge.c ---- */

/*
 * bench_attach_reserve_huge - raise vm.nr_hugepages so that @pages are
 * free; the first raise arms the restore (at exit and on SIGINT, SIGTERM,
 * SIGHUP). 0 or -errno.
 */
int bench_attach_reserve_huge(uint64_t pages);
/* bench_attach_restore_huge - give back what was reserved (async-signal-
 * safe; a no-op when nothing was). */
void bench_attach_restore_huge(void);
/* bench_attach_mem_available - MemAvailable in bytes, 0 if unknown. */
uint64_t bench_attach_mem_available(void);

/* ---- bench_attach_report.c ---- */

/* One JSON line per cell (the keys docs/performance.md cites). */
void bench_attach_print_json(const struct att *a);
/* The table, with the memset floor and what "x mc" means. */
void bench_attach_print_table(const struct att *a);
/* attach.svg under a->o.plot_dir: attach and start per GiB by size. */
void bench_attach_plot(const struct att *a);

#endif /* KVR_BENCH_ATTACH_H */
