/* SPDX-License-Identifier: MIT */
/*
 * kvring-stress: proves kvring's reliability promise under load and under
 * fault injection. It starts its own kvringd (or attaches to a running one
 * with --socket), forks N worker processes that run a random mix of lookup,
 * store, abort, retrieve and lease operations over a key space several
 * times larger than the pool (so eviction runs all the time), SIGKILLs
 * workers at random moments -- a share of them deliberately between the
 * prepare and the commit of a store or a retrieve -- and optionally the
 * server itself, and checks three things:
 *   - no corrupt byte is ever returned: every chunk's bytes are a pure
 *     function of its key, and every retrieved chunk is hashed (XXH3) in
 *     place while pinned and compared with the expected hash;
 *   - nothing leaks: after the last worker is gone, the server's control
 *     segment must show 0 reserved bytes, 0 pins, 0 leases, 0 transfers,
 *     and a pool whose used bytes are exactly its committed bytes;
 *   - nothing falls over: the server never dies unless we killed it, and
 *     no worker dies of anything but our SIGKILL.
 * Exit status: 0 every invariant held, 1 an invariant failed or the run
 * could not be set up, 2 usage. docs/reliability.md is the user's manual.
 *
 * This file owns only the command line and the orchestration: set up,
 * run the parent's loop (reap, kill on schedule, show progress) until the
 * time or op budget is spent, stop the workers, audit, stop the server,
 * report, clean up. Each step is a module in tools/stress/ (stress.h has
 * the map). Like all of them, it deliberately does not reach into the
 * server's private state: everything checked is what a worker or the
 * inspector can see.
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvring/parse.h>

#include "stress.h"

#include <kvring/version.h>
#define KVR_VERSION KVR_VERSION_STRING

/* Set by SIGINT/SIGTERM: the parent's loop then stops the run in order
 * (workers stopped, audit, report) instead of dying with children left. */
static volatile sig_atomic_t g_interrupted;

/* SIGINT and SIGTERM: only the flag, which is all a handler may safely
 * touch; run_loop() polls it between ticks. */
static void on_sigint(int sig)
{
	(void)sig;
	g_interrupted = 1;
}

/* Print a usage error (@fmt takes one string) and exit 2. */
static _Noreturn void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry '" PROG " --help'.\n");
	exit(EXIT_USAGE);
}

/* Long options without a short form; above any char getopt returns. */
enum {
	OPT_KILL_SERVER = 0x100,
	OPT_KILL_SERVER_EVERY,
	OPT_KVRINGD,
	OPT_DISK,
	OPT_SERVER_ARG,
	OPT_SERVER_LOG,
	OPT_KEYSPACE,
	OPT_CHUNK_MIN,
	OPT_CHUNK_MAX,
	OPT_COPY,
	OPT_NO_PREFAULT,
	OPT_KEEP_LOG,
	OPT_TARGET_PCT,
	OPT_INJECT_CORRUPT,
	OPT_STOP_EVERY,
	OPT_STOP_MS,
	OPT_LATENCY_PLOT,
	OPT_CHECKSUM,
	OPT_STORE_AHEAD,
};

/* Every flag the tool has; docs/reliability.md lists them too. */
static const struct option longopts[] = {
    {"socket", required_argument, NULL, 's'},
    {"name", required_argument, NULL, 'n'},
    {"workers", required_argument, NULL, 'w'},
    {"seconds", required_argument, NULL, 't'},
    {"ops", required_argument, NULL, 'o'},
    {"kill-every", required_argument, NULL, 'k'},
    {"kill-server", no_argument, NULL, OPT_KILL_SERVER},
    {"kill-server-every", required_argument, NULL, OPT_KILL_SERVER_EVERY},
    {"target-pct", required_argument, NULL, OPT_TARGET_PCT},
    {"inject-corrupt", required_argument, NULL, OPT_INJECT_CORRUPT},
    {"checksum", required_argument, NULL, OPT_CHECKSUM},
    {"store-ahead", required_argument, NULL, OPT_STORE_AHEAD},
    {"stop-every", required_argument, NULL, OPT_STOP_EVERY},
    {"stop-ms", required_argument, NULL, OPT_STOP_MS},
    {"pool-size", required_argument, NULL, 'p'},
    {"keyspace", required_argument, NULL, OPT_KEYSPACE},
    {"chunk-min", required_argument, NULL, OPT_CHUNK_MIN},
    {"chunk-max", required_argument, NULL, OPT_CHUNK_MAX},
    {"seed", required_argument, NULL, 'S'},
    {"kvringd", required_argument, NULL, OPT_KVRINGD},
    {"disk", required_argument, NULL, OPT_DISK},
    {"server-arg", required_argument, NULL, OPT_SERVER_ARG},
    {"server-log", required_argument, NULL, OPT_SERVER_LOG},
    {"keep-log", no_argument, NULL, OPT_KEEP_LOG},
    {"latency-plot", required_argument, NULL, OPT_LATENCY_PLOT},
    {"copy", no_argument, NULL, OPT_COPY},
    {"no-prefault", no_argument, NULL, OPT_NO_PREFAULT},
    {"json", no_argument, NULL, 'j'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG " [OPTION]...\n"
	    "Hammer a kvringd with worker processes doing lookups, stores, "
	    "aborts,\n"
	    "retrieves and leases, kill them (and optionally the server) at "
	    "random,\n"
	    "verify every retrieved byte and audit the server for leaks at the "
	    "end.\n"
	    "\n"
	    "  -s, --socket PATH        use the kvringd listening on PATH "
	    "(default:\n"
	    "                           start a private one with its own "
	    "socket/name)\n"
	    "  -n, --name NAME          segment base name of that server, for "
	    "the\n"
	    "                           leak audit (default: kvring-<uid>)\n"
	    "  -w, --workers N          worker processes (1-%d). Default: 4\n"
	    "  -t, --seconds S          run time. Default: 10 (unless --ops)\n"
	    "  -o, --ops N              stop after N operations\n"
	    "  -k, --kill-every MS      SIGKILL a random worker every MS ms "
	    "(0: never)\n"
	    "      --target-pct P       share of kills aimed at a worker "
	    "between\n"
	    "                           prepare and commit. Default: 50\n"
	    "      --kill-server        also SIGKILL and restart kvringd (own "
	    "server)\n"
	    "      --kill-server-every MS  Default: 20 x --kill-every, at "
	    "least 2000\n"
	    "  -p, --pool-size SIZE     pool of the server we start (K/M/G). "
	    "Default: 64M\n"
	    "      --keyspace SIZE      bytes of distinct chunks. Default: 8 x "
	    "pool\n"
	    "      --chunk-min SIZE     Default: 4K\n"
	    "      --chunk-max SIZE     Default: 256K\n"
	    "  -S, --seed N             seed of keys, op mix and kill "
	    "schedule. Default: 1\n"
	    "      --kvringd PATH       server binary. Default: $KVRINGD, else "
	    "kvringd\n"
	    "                           beside this program, else "
	    "../server/kvringd\n"
	    "                           from it, else kvringd from PATH\n"
	    "      --disk DIR           give our server a disk tier in DIR "
	    "(keyspace +\n"
	    "                           pool bytes, evict mode); lookups "
	    "read through it\n"
	    "      --server-arg ARG     extra argument for kvringd "
	    "(repeatable)\n"
	    "      --server-log PATH    kvringd's stderr. Default: /tmp/" PROG
	    "-<pid>.log,\n"
	    "                           removed after a successful run\n"
	    "      --keep-log           keep the server log even when all is "
	    "well\n"
	    "      --latency-plot DIR   sample the server's latency histograms "
	    "every\n"
	    "                           second and draw DIR/latency_cdf.png "
	    "and\n"
	    "                           DIR/latency_time.png (gnuplot; data "
	    "kept)\n"
	    "      --copy               workers use the copy transport\n"
	    "      --no-prefault        workers skip the pool pre-fault at "
	    "attach\n"
	    "      --inject-corrupt N   self-test: worker 0 flips a byte in "
	    "every Nth\n"
	    "                           store it commits, right after the "
	    "commit\n"
	    "                           (the run must then fail)\n"
	    "      --checksum MODE      per-chunk checksums of the workers: "
	    "off, on\n"
	    "                           (sum, verify explicitly), verify "
	    "(automatic)\n"
	    "                           or mixed (worker slots cycle verify, "
	    "on, off,\n"
	    "                           verify). Default: mixed\n"
	    "      --store-ahead MODE   $KVRING_STORE_AHEAD of the workers: "
	    "off, on or\n"
	    "                           mixed (odd worker slots on). "
	    "Default: mixed\n"
	    "      --stop-every N       one lingering prepared store or "
	    "verified\n"
	    "                           retrieve in N SIGSTOPs its worker; we "
	    "resume it\n"
	    "                           --stop-ms later, and its commit must "
	    "answer\n"
	    "                           \"expired\" (our kvringd gets "
	    "--xfer-ms of 3/5\n"
	    "                           of it). Default: 0 (never)\n"
	    "      --stop-ms MS         how long a stopped worker stays "
	    "stopped\n"
	    "                           (500-600000). Default: 2500\n"
	    "  -j, --json               print one JSON object (schema 1)\n"
	    "  -q, --quiet              no progress line\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            version and segment ABI\n"
	    "\n"
	    "Exit status: 0 all invariants held (no corrupt chunk, nothing "
	    "leaked,\n"
	    "pool accounting consistent, no unexpected crash), 1 an invariant "
	    "failed\n"
	    "or the run could not start, 2 usage error.\n",
	    MAX_WORKERS);
}

/* A byte size in kvringd's grammar (kvr_parse_size: K/M/G/T binary
 * multiples, optional "B"/"iB"); anything else is a usage error that names
 * the option. */
static uint64_t parse_size(const char *opt, const char *s)
{
	uint64_t v;

	(void)opt; /* die_usage() shows the value, which is enough */
	if (kvr_parse_size(s, &v) < 0)
		die_usage("bad size \"%s\" (examples: 4096, 64K, 1G)", s);
	return v;
}

/* A number in [0, @max] in the shared grammar (kvr_parse_u64: decimal,
 * optional K/M/G/T binary multiples); anything else is a usage error. */
static uint64_t parse_num(const char *s, uint64_t max)
{
	uint64_t v;

	if (kvr_parse_u64(s, 0, max, &v) < 0)
		die_usage("bad number \"%s\" (decimal digits, K/M/G/T "
			  "allowed; see --help for the range)",
			  s);
	return v;
}

/*
 * Parse the command line into @o, defaults first; exits 2 on a usage error
 * and 0 after --help or --version. Derived defaults come last, because
 * they depend on several flags: --keyspace (8 x pool), the server kill
 * period (20 x --kill-every, at least 2 s) and, with --ops alone, an
 * unbounded run time.
 */
/* --workers: 1..MAX_WORKERS; anything else exits 2. */
static unsigned parse_workers(const char *arg)
{
	unsigned v = (unsigned)parse_num(arg, MAX_WORKERS);

	if (!v)
		die_usage("--workers must be 1..256, got %s", arg);
	return v;
}

/* --seconds: a positive number of seconds; anything else exits 2. */
static double parse_seconds(const char *arg)
{
	char *end;
	double v = strtod(arg, &end);

	if (*end || end == arg || !(v > 0))
		die_usage("bad --seconds \"%s\"", arg);
	return v;
}

/* Option @opt's number @arg within [@min, @max] (parse_num's grammar);
 * below @min exits 2 naming the least value. */
static unsigned parse_at_least(const char *opt, const char *arg, unsigned min,
			       uint64_t max)
{
	unsigned v = (unsigned)parse_num(arg, max);
	char fmt[96];

	if (v < min) {
		snprintf(fmt, sizeof(fmt), "%s: at least %u, got %%s", opt,
			 min);
		die_usage(fmt, arg);
	}
	return v;
}

/* Option defaults: 4 workers for 10 s on a private 64 MiB pool. */
static void set_defaults(struct st_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->workers = 4;
	o->seconds = 10;
	o->pool_bytes = 64ull << 20;
	o->chunk_min = 4096;
	o->chunk_max = 256 * 1024;
	o->seed = 1;
	o->target_pct = 50;
	o->stop_ms = 2500;
	o->checksum = ST_SUM_MIXED;
	o->store_ahead = ST_AHEAD_MIXED;
}

/* --checksum off|on|verify|mixed; anything else exits 2. */
static int parse_checksum(const char *arg)
{
	if (!strcmp(arg, "off"))
		return KVR_CHECKSUM_OFF;
	if (!strcmp(arg, "on"))
		return KVR_CHECKSUM_ON;
	if (!strcmp(arg, "verify"))
		return KVR_CHECKSUM_VERIFY;
	if (!strcmp(arg, "mixed"))
		return ST_SUM_MIXED;
	die_usage("--checksum must be off, on, verify or mixed, got \"%s\"",
		  arg);
}

/* --store-ahead off|on|mixed; anything else exits 2. */
static int parse_store_ahead(const char *arg)
{
	if (!strcmp(arg, "off"))
		return ST_AHEAD_OFF;
	if (!strcmp(arg, "on"))
		return ST_AHEAD_ON;
	if (!strcmp(arg, "mixed"))
		return ST_AHEAD_MIXED;
	die_usage("--store-ahead must be off, on or "
		  "mixed, got \"%s\"",
		  arg);
}

/* The checks and derived values that need every option: exits 2 on a
 * combination that cannot run. */
static void check_opts(struct st_opts *o, bool have_seconds)
{
	if (o->max_ops && !have_seconds)
		o->seconds = 1e9; /* --ops alone: run until the count */
	/* Every chunk starts with its whole 16-byte key (keys.c). */
	if (o->chunk_min < 16 || o->chunk_min > o->chunk_max)
		die_usage("--chunk-min must be >= 16 and <= --chunk-max%s", "");
	/* Several chunks must fit beside the pinned ones, or stores would
	 * mostly answer NOROOM and eviction would not be exercised. */
	if (o->chunk_max > o->pool_bytes / 4)
		die_usage("--chunk-max must be at most a quarter of the pool%s",
			  "");
	/* 8 x the pool: most keys cannot be resident, so stores evict
	 * all the time and retrieves race eviction. */
	if (!o->keyspace_bytes)
		o->keyspace_bytes = o->pool_bytes * 8;
	/* A stop must outlast the server's transfer deadline, which only a
	 * server of ours is guaranteed to have. */
	if (o->stop_every && o->socket)
		die_usage("--stop-every needs a server of our own (no "
			  "--socket)%s",
			  "");
	o->xfer_ms = o->stop_ms / 5 * 3;
	/* A server we did not start has no supervisor of ours. */
	if (o->kill_server && o->socket)
		die_usage("--kill-server needs a server of our own (no "
			  "--socket)%s",
			  "");
	/* Rarer than worker kills: each restart costs the workers a
	 * reconnect and the pool its contents. */
	if (o->kill_server && !o->kill_server_every_ms) {
		o->kill_server_every_ms = o->kill_every_ms * 20;
		if (o->kill_server_every_ms < 2000)
			o->kill_server_every_ms = 2000;
	}
}

/* The options about the server kvring-stress starts (and kills): true
 * when @c was one of them. */
static bool parse_server_opt(int c, struct st_opts *o)
{
	switch (c) {
	case OPT_KILL_SERVER:
		o->kill_server = true;
		return true;
	case OPT_KILL_SERVER_EVERY:
		o->kill_server_every_ms =
		    parse_at_least("--kill-server-every", optarg, 100, 3600000);
		return true;
	case OPT_KVRINGD:
		o->kvringd = optarg;
		return true;
	case OPT_DISK:
		o->disk = optarg;
		return true;
	case OPT_SERVER_ARG:
		/* Passed after ours, so they may override them. */
		if (o->nsrv_args >= MAX_SRV_ARGS)
			die_usage("too many --server-arg (max %s)", "32");
		o->srv_args[o->nsrv_args++] = optarg;
		return true;
	case OPT_SERVER_LOG:
		o->log_path = optarg;
		return true;
	case OPT_KEEP_LOG:
		o->keep_log = true;
		return true;
	default:
		return false;
	}
}

/*
 * Fill @o from the command line over set_defaults(). A bad value exits 2
 * through die_usage() with the option named; --help and --version exit 0.
 * Options are documented in kvring-stress(1), held to --help by the
 * man_complete test.
 */
static void parse_opts(int argc, char **argv, struct st_opts *o)
{
	bool have_seconds = false;
	int c;

	set_defaults(o);
	while ((c = getopt_long(argc, argv, "s:n:w:t:o:k:p:S:jqhV", longopts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			o->socket = optarg;
			break;
		case 'n':
			o->name = optarg;
			break;
		case 'w':
			o->workers = parse_workers(optarg);
			break;
		case 't':
			o->seconds = parse_seconds(optarg);
			have_seconds = true;
			break;
		case 'o':
			o->max_ops = parse_num(optarg, UINT64_MAX);
			break;
		case 'k':
			o->kill_every_ms = (unsigned)parse_num(optarg, 3600000);
			break;
		case OPT_TARGET_PCT:
			o->target_pct = (unsigned)parse_num(optarg, 100);
			break;
		case OPT_STOP_EVERY:
			o->stop_every = (unsigned)parse_num(optarg, 1u << 30);
			break;
		case OPT_STOP_MS:
			o->stop_ms =
			    parse_at_least("--stop-ms", optarg, 500, 600000);
			break;
		case OPT_INJECT_CORRUPT:
			o->inject_corrupt =
			    (unsigned)parse_num(optarg, 1u << 30);
			break;
		case 'p':
			o->pool_bytes = parse_size("--pool-size", optarg);
			break;
		case OPT_KEYSPACE:
			o->keyspace_bytes = parse_size("--keyspace", optarg);
			break;
		case OPT_CHUNK_MIN:
			o->chunk_min = parse_size("--chunk-min", optarg);
			break;
		case OPT_CHUNK_MAX:
			o->chunk_max = parse_size("--chunk-max", optarg);
			break;
		case 'S':
			o->seed = parse_num(optarg, UINT64_MAX);
			break;
		case OPT_LATENCY_PLOT:
			o->latency_plot = optarg;
			break;
		case OPT_COPY:
			o->copy = true;
			break;
		case OPT_CHECKSUM:
			o->checksum = parse_checksum(optarg);
			break;
		case OPT_STORE_AHEAD:
			o->store_ahead = parse_store_ahead(optarg);
			break;
		case OPT_NO_PREFAULT:
			o->no_prefault = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		/* --help and --version succeed: output on stdout, exit 0. */
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		case 'V':
			printf(PROG " %s (segment abi %d.%d)\n", KVR_VERSION,
			       KVR_ABI_MAJOR, KVR_ABI_MINOR);
			exit(EXIT_OK);
		default:
			if (parse_server_opt(c, o))
				break;
			fprintf(stderr, "Try '" PROG " --help'.\n");
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument \"%s\"", argv[optind]);
	check_opts(o, have_seconds);
}

/*
 * Derived run constants, in the parent before any fork. The key count is
 * the key space in bytes over the mean chunk size, at least two full
 * windows so that random windows do not all overlap.
 */
static void setup_run(struct st_run *r)
{
	r->srv_exit = -1;
	/* The kill schedule's own stream; workers derive theirs per slot
	 * and generation (fleet.c), so both are fixed by --seed. */
	r->rng = r->o.seed ^ 0x5eedull;
	st_keys_setup(r->o.seed, r->o.chunk_min, r->o.chunk_max);
	r->nkeys =
	    r->o.keyspace_bytes / ((r->o.chunk_min + r->o.chunk_max) / 2);
	if (r->nkeys < 2 * MAX_CHUNKS)
		r->nkeys = 2 * MAX_CHUNKS;
	/* Each worker keeps an 8-byte expected hash per key. */
	if (r->nkeys > ((uint64_t)1 << 40))
		die_usage("--keyspace too large%s", "");
}

/*
 * The parent's loop: reap and replace, kill on schedule, show progress,
 * until the time or op budget is spent, Ctrl-C, or our server died on its
 * own (nothing more to learn then). It polls every 2 ms rather than
 * sleeping in waitpid() because the kill schedule needs the clock too.
 */
static void run_loop(struct st_run *r, bool tty)
{
	uint64_t end_ns, next_prog, t;

	end_ns = r->t0_ns + (uint64_t)(r->o.seconds * 1e9);
	st_killer_start(r);
	next_prog = r->t0_ns;
	for (;;) {
		st_fleet_reap(r);
		t = kvr_clock_now_ns();
		if (g_interrupted || r->srv_crashed || t >= end_ns)
			break;
		/* Relaxed: a budget, as in the workers' should_stop(). */
		if (r->o.max_ops &&
		    atomic_load_explicit(&r->sh->ops_total,
					 memory_order_relaxed) >= r->o.max_ops)
			break;
		st_killer_tick(r, t);
		st_latplot_tick(r, t);
		if (tty && t >= next_prog) {
			st_report_progress(r, false);
			next_prog = t + 250000000u;
		}
		st_sleep_us(2000);
	}
}

/*
 * One run: its own kvringd (or the one --socket names), a fleet of forked
 * workers storing and checking stamped chunks for --seconds while the
 * killer, if asked, SIGKILLs them; then the fleet stopped, the audit of the
 * server's books (corrupt and leaked must both be 0), the report, and the
 * server stopped. Exit status: EXIT_OK only when the audit and every
 * worker agree (docs/reliability.md).
 */
int main(int argc, char **argv)
{
	struct st_run *r = calloc(1, sizeof(*r));
	struct st_audit a;
	bool tty;
	int rc;

	if (!r)
		return EXIT_FAIL;
	parse_opts(argc, argv, &r->o);
	setup_run(r);
	rc = st_results_map(&r->sh);
	if (rc < 0) {
		fprintf(stderr, PROG ": mmap results: %s\n", strerror(-rc));
		return EXIT_FAIL;
	}
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	/* A write to a dead server's socket must be an error, not death. */
	signal(SIGPIPE, SIG_IGN);
	if (st_server_setup(r) < 0)
		return EXIT_FAIL;
	if (r->o.latency_plot && st_latplot_init(r) < 0) {
		fprintf(stderr, PROG ": --latency-plot: out of memory\n");
		return EXIT_FAIL;
	}
	tty = isatty(STDERR_FILENO) && !r->o.quiet;

	r->t0_ns = kvr_clock_now_ns();
	for (unsigned i = 0; i < r->o.workers; i++)
		if (st_fleet_spawn(r, i) < 0) {
			fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
			r->worker_crashes++;
		}
	run_loop(r, tty);
	st_fleet_stop(r);
	r->elapsed_s = (double)(kvr_clock_now_ns() - r->t0_ns) / 1e9;
	if (tty)
		st_report_progress(r, true);

	/* The audit needs a live server; a crashed one already failed. */
	if (!r->srv_crashed) {
		st_audit_run(r, &a);
	} else {
		memset(&a, 0, sizeof(a));
		snprintf(a.why, sizeof(a.why), "the server is gone");
	}
	/* Before the unmap: the plot reads the server's histograms. */
	if (!r->srv_crashed)
		(void)st_latplot_write(r);
	st_latplot_free(r);
	kvrd_unmap(&r->srv);
	/* Our server must also stop cleanly: exit 0 on SIGTERM. */
	st_server_stop(r);
	rc = st_report_print(r, &a);
	/* Own server (a log path is set only then), now dead for sure. */
	if (r->srv.log_path[0]) {
		bool keep = rc != EXIT_OK || r->o.keep_log;

		kvrd_cleanup(&r->srv, !keep);
		if (keep)
			fprintf(stderr, PROG ": server log kept: %s\n",
				r->srv.log_path);
	}
	st_results_unmap(r->sh);
	free(r);
	return rc;
}
