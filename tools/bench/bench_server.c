/* SPDX-License-Identifier: MIT */
/*
 * bench_server.c - common options of the kvringd-backed scenarios, and a
 * private kvringd per scenario (see bench_server.h).
 *
 * A private server is started through the one private-kvringd helper
 * (tools/kvrd/kvrd.h), shared with kvring-stress and the test suites: a
 * socket and segment name derived from the bench's pid and a counter, so
 * two benches (or a bench and the test suite) never meet, its stderr in a
 * log file, and start-up waiting for the "kvringd ready" line there
 * (pre-faulting a pool of a few GiB takes seconds on a VM). This file adds
 * the bench's arguments and the pinning: kvringd has no pinning flag, so
 * every thread listed in /proc/PID/task is pinned with sched_setaffinity.
 * Nothing here measures anything.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvring/layout.h>

#include "bench_common.h"
#include "bench_server.h"

/* The long name of option value @val, for messages. */
static const char *bench_opt_name(const struct option *lo, int val)
{
	for (; lo->name; lo++)
		if (lo->val == val)
			return lo->name;
	return "?";
}

/* ---- options ---------------------------------------------------------- */

static void common_usage(FILE *f, const char *scenario, const char *extra)
{
	fprintf(
	    f,
	    "usage: kvring-bench %s [options]\n"
	    "\n"
	    "common options:\n"
	    "  --json              one JSON object per line and subject\n"
	    "  --quick             a short smoke run\n"
	    "  --plot DIR          write PNG plots (gnuplot) into DIR\n"
	    "  --cpu-client N      CPU of the bench client (default 0; -1: "
	    "none)\n"
	    "  --cpu-server N      CPU of kvringd and of every peer's server "
	    "side\n"
	    "                      (default 1; -1: none)\n"
	    "  --rounds N          alternating rounds\n"
	    "  --iters N           samples per subject per round\n"
	    "  --socket PATH       use a running kvringd (not pinned, its "
	    "own --spin-us)\n"
	    "  --kvringd PATH      kvringd binary to start (default: "
	    "$KVRINGD, else\n"
	    "                      kvringd beside this binary, else "
	    "../server/kvringd)\n"
	    "  --pool-size BYTES   pool of the private kvringd (K/M/G "
	    "suffix)\n"
	    "  --reserve-huge      (root) raise vm.nr_hugepages for "
	    "huge-page cells\n"
	    "                      (attach), restored at exit\n"
	    "  --no-histograms     kvringd --no-histograms, and clients "
	    "with\n"
	    "                      KVRING_RTT_SAMPLE=0 (no latency "
	    "histograms)\n"
	    "  -h, --help          show this help and exit\n",
	    scenario);
	if (extra)
		fputs(extra, f);
}

/* The common options' getopt_long values, above every short option. */
enum {
	O_JSON = 256,
	O_QUICK,
	O_PLOT,
	O_CPUC,
	O_CPUS,
	O_ROUNDS,
	O_ITERS,
	O_SOCKET,
	O_KVRINGD,
	O_POOL,
	O_PAUSE,
	O_SIZES,
	O_CHUNKS,
	O_ONLY,
	O_RESERVE_HUGE,
	O_NOHIST,
};

/*
 * set_opt - apply option @c (its argument in optarg) to @o. False when the
 * argument is out of its grammar or range (the caller names the option).
 */
static bool set_opt(struct bench_run_opts *o, int c)
{
	uint64_t v = 0;
	bool ok = true;

	switch (c) {
	case O_JSON:
		o->json = true;
		break;
	case O_QUICK:
		o->quick = true;
		break;
	case O_PLOT:
		o->plot_dir = optarg;
		break;
	case O_CPUC:
		ok = bench_parse_cpu(optarg, &o->cpu_client);
		break;
	case O_CPUS:
		ok = bench_parse_cpu(optarg, &o->cpu_server);
		break;
	case O_ROUNDS:
		ok = bench_parse_u64(optarg, 1, 100000, &v);
		o->rounds = (unsigned)v;
		break;
	case O_ITERS:
		ok = bench_parse_u64(optarg, 1, 100000000, &o->iters);
		break;
	case O_SOCKET:
		o->socket = optarg;
		break;
	case O_KVRINGD:
		o->kvringd = optarg;
		break;
	case O_POOL:
		ok = bench_parse_u64(optarg, 1u << 20, 1ull << 40,
				     &o->pool_bytes);
		break;
	case O_PAUSE:
		ok = bench_parse_u64(optarg, 1, 1000000, &o->pause_us);
		break;
	case O_SIZES:
		o->sizes = optarg;
		break;
	case O_CHUNKS:
		o->chunks = optarg;
		break;
	case O_ONLY:
		o->only = optarg;
		break;
	case O_RESERVE_HUGE:
		o->reserve_huge = true;
		break;
	case O_NOHIST:
		o->no_histograms = true;
		/* Clients read it at connect: none times a request. */
		setenv("KVRING_RTT_SAMPLE", "0", 1);
		break;
	}
	return ok;
}

int bench_run_opts_parse(int argc, char **argv, const char *scenario,
			 const char *extra_help, struct bench_run_opts *o)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, O_JSON},
	    {"quick", no_argument, NULL, O_QUICK},
	    {"plot", required_argument, NULL, O_PLOT},
	    {"cpu-client", required_argument, NULL, O_CPUC},
	    {"cpu-server", required_argument, NULL, O_CPUS},
	    {"rounds", required_argument, NULL, O_ROUNDS},
	    {"iters", required_argument, NULL, O_ITERS},
	    {"socket", required_argument, NULL, O_SOCKET},
	    {"kvringd", required_argument, NULL, O_KVRINGD},
	    {"pool-size", required_argument, NULL, O_POOL},
	    {"pause-us", required_argument, NULL, O_PAUSE},
	    {"sizes", required_argument, NULL, O_SIZES},
	    {"chunks", required_argument, NULL, O_CHUNKS},
	    {"only", required_argument, NULL, O_ONLY},
	    {"reserve-huge", no_argument, NULL, O_RESERVE_HUGE},
	    {"no-histograms", no_argument, NULL, O_NOHIST},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->cpu_client = 0;
	o->cpu_server = bench_nr_cpus() > 1 ? 1 : -1;
	/* 0 re-initialises getopt: "all" parses several argvs in turn. */
	optind = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case 'h':
			common_usage(stdout, scenario, extra_help);
			return 1;
		case '?':
			common_usage(stderr, scenario, extra_help);
			return 2;
		default:
			ok = set_opt(o, c);
		}
		if (!ok) {
			/* Name the option and the grammar (lib/parse.c). */
			fprintf(stderr,
				"kvring-bench: %s: --%s: bad value '%s' "
				"(a number, optionally with K, M, G or T, "
				"e.g. 64M or 1GiB, within the option's "
				"range; see --help)\n",
				scenario, bench_opt_name(longopts, c), optarg);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvring-bench: %s: unexpected '%s'\n", scenario,
			argv[optind]);
		return 2;
	}
	return 0;
}

/* ---- the private server ----------------------------------------------- */

/*
 * Whether @bin has per-channel quotas (kvringd since 0.2). A bench
 * is one worker moving requests of up to the whole pool, which the
 * default quotas (a quarter of the pool) would refuse, so those builds get
 * them lifted; an older kvringd, named for an A/B run, must not be given
 * options it does not know.
 */
static bool kvringd_has_opt(const char *bin, const char *opt)
{
	char cmd[PATH_MAX + 32], line[256];
	bool yes = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' --help 2>/dev/null", bin);
	p = popen(cmd, "r");
	if (!p)
		return false;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, opt))
			yes = true;
	pclose(p);
	return yes;
}

int bench_pin_pid(pid_t pid, int cpu)
{
	char dir[64];
	cpu_set_t set;
	struct dirent *d;
	DIR *dp;
	int rc = 0;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	dp = opendir(dir);
	if (!dp)
		return sched_setaffinity(pid, sizeof(set), &set) < 0 ? -errno
								     : 0;
	while ((d = readdir(dp))) {
		long tid = strtol(d->d_name, NULL, 10);

		if (tid <= 0)
			continue;
		if (sched_setaffinity((pid_t)tid, sizeof(set), &set) < 0)
			rc = -errno;
	}
	closedir(dp);
	return rc;
}

int bench_server_start(const struct bench_run_opts *o, uint64_t pool_bytes,
		       uint32_t spin_us, uint32_t max_workers,
		       struct bench_server *s)
{
	return bench_server_start_args(o, pool_bytes, spin_us, max_workers,
				       NULL, s);
}

int bench_server_start_args(const struct bench_run_opts *o, uint64_t pool_bytes,
			    uint32_t spin_us, uint32_t max_workers,
			    const char *const *extra, struct bench_server *s)
{
	/* Ready when the log says so, not when the control segment does:
	 * an A/B run may start an older kvringd of another layout. The
	 * pre-fault of a pool of a few GiB takes seconds on a VM. */
	struct kvrd_opts ko = {
	    .prog = "kvring-bench",
	    .bin = o->kvringd,
	    .tag = "kvrb",
	    .ready = KVRD_READY_LOG,
	    .start_timeout_ms = 120000,
	};
	char pool[32], spin[16], workers[16], all[] = "100%";
	const char *argv[44];
	int na = 0, rc;

	memset(s, 0, sizeof(*s));
	if (o->socket) {
		/* A running server: its own pinning and spin time. */
		snprintf(s->d.sock, sizeof(s->d.sock), "%s", o->socket);
		return 0;
	}
	kvrd_init(&s->d, &ko);
	snprintf(pool, sizeof(pool), "%" PRIu64, pool_bytes);
	snprintf(spin, sizeof(spin), "%u", spin_us);
	snprintf(workers, sizeof(workers), "%u", max_workers);
	s->spin_us = spin_us;
	argv[na++] = "--pool-size";
	argv[na++] = pool;
	argv[na++] = "--spin-us";
	argv[na++] = spin;
	argv[na++] = "--max-workers";
	argv[na++] = workers;
	argv[na++] = "--log-level";
	argv[na++] = "info";
	if (kvringd_has_opt(s->d.bin, "--quota-reserved")) {
		argv[na++] = "--quota-reserved";
		argv[na++] = all;
		argv[na++] = "--quota-pinned";
		argv[na++] = all;
		argv[na++] = "--max-key-bytes";
		argv[na++] = all;
	}
	/* The per-uid ones too (ABI 4.1): a multi-worker cell is one uid. */
	if (kvringd_has_opt(s->d.bin, "--quota-uid-reserved")) {
		argv[na++] = "--quota-uid-reserved";
		argv[na++] = all;
		argv[na++] = "--quota-uid-pinned";
		argv[na++] = all;
	}
	for (int i = 0; extra && extra[i] && na < 41; i++)
		argv[na++] = extra[i];
	/* The histogram switch (bench_hist.c runs both sides). */
	if (o->no_histograms)
		argv[na++] = "--no-histograms";
	argv[na] = NULL;

	/* The reason and the log's tail are on stderr when this fails. */
	rc = kvrd_start(&s->d, argv);
	if (rc < 0) {
		kvrd_cleanup(&s->d, false);
		return rc;
	}
	/* Pinned after start-up: the pre-fault may use any CPU. */
	if (bench_pin_pid(s->d.pid, o->cpu_server) < 0)
		fprintf(stderr, "kvring-bench: pin kvringd to cpu %d failed\n",
			o->cpu_server);
	return 0;
}

void bench_server_stop(struct bench_server *s)
{
	int rc;

	if (!s || s->d.pid <= 0)
		return;
	rc = kvrd_stop(&s->d, 10000);
	if (rc == 0) {
		kvrd_cleanup(&s->d, true);
		return;
	}
	if (rc < 0)
		fprintf(stderr, "kvring-bench: kvringd ignored SIGTERM for "
				"10 s and was killed\n");
	else
		fprintf(stderr, "kvring-bench: kvringd exit status %d\n", rc);
	fprintf(stderr, "kvring-bench: kvringd log kept at %s\n",
		s->d.log_path);
	kvrd_cleanup(&s->d, false);
}

/* ---- clients ---------------------------------------------------------- */

void bench_client_opts(const struct bench_server *s, struct kvr_client_opts *co)
{
	memset(co, 0, sizeof(*co));
	co->socket_path = s->d.sock;
	snprintf(co->ns.model, sizeof(co->ns.model), "kvring-bench");
	co->ns.layers = 1;
	co->ns.kv_heads = 1;
	co->ns.head_size = 128;
	co->ns.dtype_bytes = 2;
	co->ns.tp_rank = 0;
	co->ns.tp_size = 1;
	co->ns.chunk_tokens = 256;
	co->spin_us = 1;
	co->timeout_ms = 120000;
}

int bench_client_connect(const struct bench_server *s, int transport,
			 uint32_t spin_us, bool no_prefault,
			 struct kvr_client **out)
{
	struct kvr_client_opts co;
	char err[256] = "";
	int rc;

	bench_client_opts(s, &co);
	co.transport = transport;
	if (spin_us)
		co.spin_us = spin_us;
	co.no_prefault = no_prefault;
	/* -EBUSY: too many handshakes at once (64 workers starting
	 * together); the server asks us to retry. */
	for (int tries = 0; tries < 400; tries++) {
		rc = kvr_connect(&co, out, err, sizeof(err));
		if (rc != -EBUSY)
			break;
		usleep(5000);
	}
	if (rc < 0)
		fprintf(stderr, "kvring-bench: connect %s: %s (%s)\n",
			s->d.sock, err, strerror(-rc));
	return rc;
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct kvr_key bench_key(uint64_t seq)
{
	/* The pid keeps two bench runs against one server apart. */
	uint64_t base = splitmix64((uint64_t)getpid() << 32);

	return (struct kvr_key){splitmix64(base ^ (2 * seq)),
				splitmix64(base ^ (2 * seq + 1))};
}

const char *bench_fmt_bytes(uint64_t bytes, char *buf, size_t n)
{
	if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0)
		snprintf(buf, n, "%" PRIu64 "G", bytes >> 30);
	else if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
		snprintf(buf, n, "%" PRIu64 "M", bytes >> 20);
	else if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0)
		snprintf(buf, n, "%" PRIu64 "K", bytes >> 10);
	else
		snprintf(buf, n, "%" PRIu64, bytes);
	return buf;
}

const struct kvr_ctl_hdr_shm *bench_server_map_ctl(const struct bench_server *s,
						   void **map, size_t *len)
{
	char path[128];
	struct stat st;
	int fd;

	*map = NULL;
	snprintf(path, sizeof(path), "/dev/shm/%s.ctl", s->d.name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 ||
	    (size_t)st.st_size < sizeof(struct kvr_ctl_hdr_shm)) {
		close(fd);
		return NULL;
	}
	*len = (size_t)st.st_size;
	*map = mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (*map == MAP_FAILED) {
		*map = NULL;
		return NULL;
	}
	return *map;
}

int bench_pipeline(struct kvr_client *c, uint64_t depth, uint32_t op, bool hold,
		   uint64_t end_ns, const char *who, uint64_t *count,
		   uint64_t *ns)
{
	struct kvr_completion comp[256];
	struct kvr_key key = bench_key(~0ull); /* never stored: a miss */
	uint64_t t0 = kvr_clock_now_ns(), done = 0, sent = 0;
	int rc = 0;

	if (hold && (rc = kvr_submit_hold(c)) < 0)
		goto err;
	for (;;) {
		bool stop = kvr_clock_now_ns() >= end_ns;

		while (!stop && sent - done < depth) {
			rc = op == KVR_OP_PING
				 ? kvr_submit_ping(c, NULL)
				 : kvr_submit_lookup(c, &key, 1, false, NULL);
			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				goto err;
			sent++;
		}
		if (stop && sent == done)
			break;
		rc = kvr_reap(c, comp, 256, 1, -1);
		if (rc < 0)
			goto err;
		for (int i = 0; i < rc; i++) {
			if (comp[i].status != 0 || comp[i].op != op ||
			    (op == KVR_OP_LOOKUP && comp[i].value != 0)) {
				fprintf(stderr,
					"kvring-bench: %s: "
					"completion op %u status %d value "
					"%ld\n",
					who, comp[i].op, comp[i].status,
					comp[i].value);
				return -EBADMSG;
			}
		}
		done += (uint64_t)rc;
	}
	if (hold && (rc = kvr_submit_flush(c)) < 0)
		goto err;
	if (kvr_inflight(c) != 0) {
		fprintf(stderr,
			"kvring-bench: %s: pipelined: %u requests "
			"still in flight after the last reap\n",
			who, kvr_inflight(c));
		return -EBADMSG;
	}
	*count = done;
	*ns = kvr_clock_now_ns() - t0;
	return 0;
err:
	fprintf(stderr, "kvring-bench: %s: pipelined: %s (%s)\n", who,
		strerror(-rc), kvr_client_errmsg(c));
	return rc;
}

int bench_pings(struct kvr_client *c, uint64_t n, uint64_t pause_ns,
		const char *who, uint64_t *last_server, uint64_t *out)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t sns = 0, t0;
		int rc;

		if (pause_ns)
			bench_sleep_ns(pause_ns);
		t0 = bench_ticks();
		rc = kvr_ping(c, &sns);
		if (out)
			out[i] = bench_ticks() - t0;
		if (rc < 0) {
			fprintf(stderr, "kvring-bench: %s: ping: %s (%s)\n",
				who, strerror(-rc), kvr_client_errmsg(c));
			return rc;
		}
		/* The server's CLOCK_MONOTONIC must move forward. */
		if (sns == 0 || sns < *last_server) {
			fprintf(stderr,
				"kvring-bench: %s: ping answer has server "
				"time %" PRIu64 " after %" PRIu64 "\n",
				who, sns, *last_server);
			return -EBADMSG;
		}
		*last_server = sns;
	}
	if (out)
		for (uint64_t i = 0; i < n; i++)
			out[i] = (uint64_t)bench_ticks_to_ns(out[i]);
	return 0;
}
