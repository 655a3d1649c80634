/* SPDX-License-Identifier: MIT */
/*
 * bench_server.h - what the kvring-bench scenarios that talk to a real
 * kvringd share: the common command-line options (--json, --quick,
 * --plot, pinning, rounds, --socket, --kvringd), a private kvringd started
 * for one scenario (fork/exec with its own socket and segment name, pinned
 * with sched_setaffinity on every one of its threads, stopped with
 * SIGTERM), and the connection options every bench client uses.
 *
 * It does not measure anything and knows no scenario: bench_rtt.c,
 * bench_xfer.c and bench_scale.c do.
 */
#ifndef KVR_BENCH_SERVER_H
#define KVR_BENCH_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <kvring/kvring.h>

#include "kvrd.h"

/* Scenario entry points of the kvringd-backed scenarios (argv[0] is the
 * scenario name; BENCH_EXIT_* codes). "all" runs every scenario. */
int bench_rtt_hot_main(int argc, char **argv);
int bench_rtt_cold_main(int argc, char **argv);
int bench_store_main(int argc, char **argv);
int bench_retrieve_main(int argc, char **argv);
int bench_scale_main(int argc, char **argv);
int bench_attach_main(int argc, char **argv);
int bench_all_main(int argc, char **argv);
int bench_hist_main(int argc, char **argv);

/*
 * struct bench_run_opts - options shared by rtt_hot, rtt_cold, store,
 * retrieve and scale. Filled by bench_run_opts_parse() from argv; each
 * scenario reads what it needs. Owned by the scenario's stack frame.
 */
struct bench_run_opts {
	bool json;	      /* --json: JSON lines instead of tables */
	bool quick;	      /* --quick: a ~30 s smoke run in all */
	const char *plot_dir; /* --plot DIR: PNGs (NULL: none) */
	const char *socket;   /* --socket PATH: use a running kvringd */
	const char *kvringd;  /* --kvringd PATH: binary to start */
	int cpu_client;	      /* --cpu-client N (-1: no pinning) */
	int cpu_server;	      /* --cpu-server N (-1: no pinning) */
	unsigned rounds;      /* --rounds N (0: scenario default) */
	uint64_t iters;	      /* --iters N (0: scenario default) */
	uint64_t pool_bytes;  /* --pool-size N (0: scenario default) */
	uint64_t pause_us;    /* --pause-us N (rtt_cold; 0: default) */
	const char *sizes;    /* --sizes LIST (store/retrieve) */
	const char *chunks;   /* --chunks LIST (store/retrieve) */
	const char *only;     /* --only PART (scale: one_active,
				 all_active or pipelined) */
	bool reserve_huge;    /* --reserve-huge (attach) */
	bool no_histograms;   /* --no-histograms: private kvringd and
				 clients record no latency histograms */
};

/*
 * bench_run_opts_parse - parse the common options of @scenario from argv
 * (argv[0] is the scenario name). @extra_help is printed under the common
 * options by --help (may be NULL).
 * Return: 0 to run, 1 when --help was printed (exit 0), 2 on a usage
 * error (already reported on stderr).
 */
int bench_run_opts_parse(int argc, char **argv, const char *scenario,
			 const char *extra_help, struct bench_run_opts *o);

/*
 * struct bench_server - one kvringd used by a scenario: either a private
 * child (pid > 0) with its own socket, segment name and log file, or a
 * running one reached through --socket (pid 0). Owned by the scenario;
 * bench_server_stop() ends it.
 */
struct bench_server {
	/* A private child (d.pid > 0) started through tools/kvrd/kvrd.h, or
	 * only d.sock for an external one. */
	struct kvrd d;
	uint32_t spin_us; /* --spin-us given to a private server */
};

/*
 * bench_server_start - start a private kvringd (or adopt o->socket) with
 * @pool_bytes of pool, --spin-us @spin_us and --max-workers @max_workers,
 * pin it to o->cpu_server, and wait (up to 120 s) until it says it is
 * ready. The binary is o->kvringd, else $KVRINGD, else
 * <dir of /proc/self/exe>/../server/kvringd, else kvringd in $PATH.
 * Return: 0, or -errno with the reason (and the server's log) on stderr.
 */
int bench_server_start(const struct bench_run_opts *o, uint64_t pool_bytes,
		       uint32_t spin_us, uint32_t max_workers,
		       struct bench_server *s);

/* bench_server_start_args - bench_server_start() with @extra (NULL or a
 * NULL-terminated list) appended to kvringd's arguments, e.g.
 * {"--huge-pages", "require", NULL}. */
int bench_server_start_args(const struct bench_run_opts *o, uint64_t pool_bytes,
			    uint32_t spin_us, uint32_t max_workers,
			    const char *const *extra, struct bench_server *s);

/* bench_server_stop - SIGTERM a private server and reap it (SIGKILL after
 * 10 s); removes its log unless it failed. External servers are left. */
void bench_server_stop(struct bench_server *s);

/* bench_pin_pid - pin every thread of @pid to @cpu (< 0: no-op).
 * Return 0 or -errno. */
int bench_pin_pid(pid_t pid, int cpu);

/*
 * bench_client_opts - fill @co for a bench worker of @s: namespace
 * "kvring-bench", spin 1 us, a 120 s timeout on every call, everything
 * else zero. Scenarios adjust fields before kvr_connect().
 */
void bench_client_opts(const struct bench_server *s,
		       struct kvr_client_opts *co);

/*
 * bench_client_connect - connect to @s as a bench worker (namespace
 * "kvring-bench"), with @transport (0 auto or KVR_TRANSPORT_COPY),
 * client spin @spin_us (>= 1) and a 120 s timeout on every call.
 * @no_prefault skips the pool pre-fault (idle scale workers only).
 * Return 0 and *out, or -errno with the reason on stderr.
 */
int bench_client_connect(const struct bench_server *s, int transport,
			 uint32_t spin_us, bool no_prefault,
			 struct kvr_client **out);

/*
 * bench_server_map_ctl - map the control segment of the private server
 * @s read-only (its header: counters, the zeroed line, the l2 section);
 * *map and *len for munmap. NULL, and *map NULL, when it cannot be mapped
 * or is shorter than the header.
 */
const struct kvr_ctl_hdr_shm *bench_server_map_ctl(const struct bench_server *s,
						   void **map, size_t *len);

/*
 * bench_pings - the hot round-trip cell: @n pings on @c, one at a time,
 * each timed alone with bench_ticks() (after a pause of @pause_ns when
 * non-zero) and checked: an error, or a server time of 0 or before
 * *last_server (updated), fails it, said on stderr prefixed by @who.
 * With @out non-NULL the samples land there in ns. 0, -EBADMSG or -errno.
 */
int bench_pings(struct kvr_client *c, uint64_t n, uint64_t pause_ns,
		const char *who, uint64_t *last_server, uint64_t *out);

/*
 * bench_pipeline - keep up to @depth pings or 1-key lookups (@op, of a
 * key never stored) in flight on @c until @end_ns, every completion
 * checked (a failure is said on stderr, prefixed by @who). With @hold the
 * submits between two reaps are held (kvr_submit_hold) and published
 * together by the reap; without, each submit publishes its own request.
 * The count in flight is kept here, as a pipelining caller would. 0 with
 * *count completions in *ns, -EBADMSG on a wrong answer, or -errno.
 */
int bench_pipeline(struct kvr_client *c, uint64_t depth, uint32_t op, bool hold,
		   uint64_t end_ns, const char *who, uint64_t *count,
		   uint64_t *ns);

/* bench_key - a unique, well-mixed 128-bit key for sequence number @seq
 * (splitmix64 of the bench's pid and @seq). */
struct kvr_key bench_key(uint64_t seq);

/* bench_fmt_bytes - "256K", "2M", "32M", "1G" for a power-of-two size. */
const char *bench_fmt_bytes(uint64_t bytes, char *buf, size_t n);

#endif /* KVR_BENCH_SERVER_H */
