/* SPDX-License-Identifier: MIT */
/*
 * kvring-inspect: a read-only window into a running kvringd. It maps the
 * server's control segment with O_RDONLY and PROT_READ and prints what the
 * header, the channel blocks, the doorbells and the rings say: an overview
 * (key=value lines or one JSON object), a live view with per-interval
 * rates (--watch), per-op latency tables (--latency), Prometheus text
 * exposition (also over HTTP: --serve), the kvring segments in a
 * directory (--list), a decode of the records in one channel's rings
 * (--dump), and an invariant check (--check, exit 3).
 *
 * This file only parses options, resolves the target and dispatches; the
 * work is in tools/inspect/ (see inspect.h for the map of modules). What
 * the tool as a whole deliberately does not do: it never writes to the
 * segment, never takes a lock, never sends a signal and never connects to
 * the server's socket, so it cannot perturb the server it looks at. Every
 * value it reads is untrusted: it is copied into a private snapshot first
 * and only the copy is rendered. The options and output keys are
 * documented in docs/man/kvring-inspect.1 and docs/inspect.md.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/parse.h>
#include <kvring/paths.h>

#include "inspect.h"

#include <kvring/version.h>
#define KVR_VERSION KVR_VERSION_STRING

static const struct option longopts[] = {
    {"name", required_argument, NULL, 'n'},
    {"socket", required_argument, NULL, 's'},
    {"dir", required_argument, NULL, 'd'},
    {"all", no_argument, NULL, 'a'},
    {"json", no_argument, NULL, 'j'},
    {"watch", optional_argument, NULL, 'w'},
    {"count", required_argument, NULL, 'c'},
    {"prometheus", no_argument, NULL, 'p'},
    {"list", no_argument, NULL, 'l'},
    {"dump", required_argument, NULL, 'D'},
    {"check", no_argument, NULL, 'C'},
    {"latency", no_argument, NULL, 'L'},
    {"channel", required_argument, NULL, 'N'},
    {"serve", required_argument, NULL, 'S'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The --help text. kvring-inspect(1) documents the same options; the
 * man_complete test holds the two together. */
static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " INS_PROG
	    " [TARGET] [--json] [--all] [--watch[=MS]] [--count N]\n"
	    "       " INS_PROG
	    " [TARGET] --prometheus | --check | --dump CHANNEL\n"
	    "       " INS_PROG " [TARGET] --latency [--channel N] [--json] "
	    "[--watch[=MS]]\n"
	    "       " INS_PROG " [TARGET] --serve ADDR:PORT\n"
	    "       " INS_PROG " --list [--dir DIR] [--json]\n"
	    "\n"
	    "Read-only view of a running kvringd (never writes, locks or "
	    "signals).\n"
	    "\n"
	    "TARGET (default: the server at $KVRING_SOCKET when it is set, "
	    "else this\n"
	    "uid's server, segment kvring-<uid>.ctl):\n"
	    "  -n, --name NAME      segment base name (kvringd --name), "
	    "NAME.ctl, or a\n"
	    "                       path to a control segment file\n"
	    "  -s, --socket PATH    the server listening on this Unix socket\n"
	    "  -d, --dir DIR        segment directory (default /dev/shm)\n"
	    "\n"
	    "Modes (default: overview as key=value lines):\n"
	    "  -j, --json           one JSON object (\"schema\": %d)\n"
	    "  -a, --all            include free channels\n"
	    "  -w, --watch[=MS]     refresh every MS ms (default 1000) with "
	    "rates\n"
	    "      --count N        with --watch: stop after N frames\n"
	    "  -p, --prometheus     Prometheus text exposition format\n"
	    "  -l, --list           list kvring segments in DIR, marking stale "
	    "ones\n"
	    "  -D, --dump CHANNEL   decode the records in a channel's rings\n"
	    "  -C, --check          verify invariants; exit 3 if any is "
	    "violated\n"
	    "  -L, --latency        per-op latency table: p50/p99/p99.9 of the "
	    "server's\n"
	    "                       time and of the workers' round trips\n"
	    "      --channel N      with --latency: channel N only\n"
	    "      --serve ADDR:PORT  serve --prometheus at http://ADDR:PORT/"
	    "metrics\n"
	    "                       (PORT or :PORT = 127.0.0.1; read-only)\n"
	    "  -h, --help           this text\n"
	    "  -V, --version        version and the segment ABI understood\n"
	    "\n"
	    "Exit status: 0 ok, 1 runtime error (no server, ABI mismatch),\n"
	    "2 usage error, 3 --check found a violation.\n",
	    INS_SCHEMA);
}

/* A uint32 in the shared grammar (lib/parse.c: decimal, optional K/M/G/T;
 * no sign, so "-1" never wraps). */
static int parse_u32(const char *s, uint32_t *out)
{
	return kvr_parse_u32(s, 0, UINT32_MAX, out) < 0 ? -EINVAL : 0;
}

/* A usage error: one line naming the problem, a hint, exit status 2. */
static int usage_err(const char *fmt, const char *arg)
{
	fputs(INS_PROG ": ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry '" INS_PROG " --help'.\n", stderr);
	return INS_EXIT_USAGE;
}

/*
 * Combinations that are refused rather than guessed at: the modes
 * exclude each other, --watch refreshes only the overview, and --list
 * reads a directory, not a server. Return: -1 if @o is coherent, else
 * exit status 2 (message printed).
 */
static int check_combination(const struct ins_opts *o, int modes)
{
	if (modes > 1)
		return usage_err("%s", "--prometheus, --list, --dump, --check, "
				       "--latency and --serve exclude each "
				       "other");
	if (o->have_channel && o->mode != INS_MODE_LATENCY)
		return usage_err("%s", "--channel needs --latency");
	if (o->json && o->mode == INS_MODE_SERVE)
		return usage_err("%s", "--serve speaks Prometheus text, not "
				       "--json");
	if (o->name && o->socket)
		return usage_err("%s",
				 "--name and --socket exclude each other");
	if (o->watch && o->mode != INS_MODE_OVERVIEW &&
	    o->mode != INS_MODE_LATENCY)
		return usage_err("%s", "--watch refreshes the overview or "
				       "--latency only");
	if (o->count && !o->watch)
		return usage_err("%s", "--count needs --watch");
	if (o->json && o->mode == INS_MODE_PROM)
		return usage_err("%s", "--json and --prometheus exclude each "
				       "other");
	if (o->mode == INS_MODE_LIST && (o->name || o->socket))
		return usage_err("%s", "--list takes --dir, not a server");
	return -1;
}

/*
 * Fills @o. Return: -1 to go on, or an exit status (help and version print
 * and exit 0 directly; usage errors return 2). Values are checked as they
 * are parsed, combinations afterwards (check_combination()).
 */
static int parse_args(int argc, char **argv, struct ins_opts *o)
{
	int c, modes = 0;

	memset(o, 0, sizeof(*o));
	o->watch_ms = 1000;
	while ((c = getopt_long(argc, argv, "n:s:d:ajw::pD:lCLhV", longopts,
				NULL)) != -1) {
		uint32_t v;

		switch (c) {
		case 'n':
			o->name = optarg;
			break;
		case 's':
			o->socket = optarg;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 'a':
			o->all = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'w':
			/* Optional argument: only "--watch=MS" or "-wMS"
			 * carries one; a separate word is not taken. */
			o->watch = true;
			if (optarg && (parse_u32(optarg, &o->watch_ms) < 0 ||
				       o->watch_ms == 0))
				return usage_err("--watch: bad interval \"%s\" "
						 "(milliseconds > 0)",
						 optarg);
			break;
		case 'c':
			if (parse_u32(optarg, &v) < 0 || v == 0)
				return usage_err("--count: bad number \"%s\"",
						 optarg);
			o->count = v;
			break;
		case 'p':
			o->mode = INS_MODE_PROM;
			modes++;
			break;
		case 'l':
			o->mode = INS_MODE_LIST;
			modes++;
			break;
		case 'D':
			if (parse_u32(optarg, &o->dump_channel) < 0)
				return usage_err("--dump: bad channel \"%s\"",
						 optarg);
			o->mode = INS_MODE_DUMP;
			modes++;
			break;
		case 'C':
			o->mode = INS_MODE_CHECK;
			modes++;
			break;
		case 'L':
			o->mode = INS_MODE_LATENCY;
			modes++;
			break;
		case 'N':
			if (parse_u32(optarg, &o->channel) < 0)
				return usage_err(
				    "--channel: bad channel \"%s\"", optarg);
			o->have_channel = true;
			break;
		case 'S':
			if (!*optarg)
				return usage_err("%s", "--serve: empty address "
						       "(try 127.0.0.1:9464)");
			o->serve = optarg;
			o->mode = INS_MODE_SERVE;
			modes++;
			break;
		case 'h':
			usage(stdout);
			exit(INS_EXIT_OK);
		case 'V':
			printf(INS_PROG " %s (segment abi %d.%d, layout hash "
					"0x%016" PRIx64 ", json schema %d)\n",
			       KVR_VERSION, KVR_ABI_MAJOR, KVR_ABI_MINOR,
			       kvr_layout_hash(), INS_SCHEMA);
			exit(INS_EXIT_OK);
		default:
			/* getopt_long has already named the option. */
			usage(stderr);
			return INS_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return usage_err("unexpected argument \"%s\"", argv[optind]);
	return check_combination(o, modes);
}

/*
 * The control segment to read: --name, --socket, the server at
 * $KVRING_SOCKET, or the segment a kvringd started by this user without
 * --name uses. Return: -1 with *t set, or
 * an exit status (message printed). A bad --name is a usage error; a
 * socket nobody listens on is a runtime one.
 */
static int resolve_target(const struct ins_opts *o, struct ins_target *t)
{
	char base_name[64], ctl[KVR_SEG_NAME_MAX + 1];
	const char *env;

	if (o->name)
		return ins_target_from_name(t, o->dir, o->name) < 0
			   ? INS_EXIT_USAGE
			   : -1;
	if (o->socket)
		return ins_target_from_socket(t, o->dir, o->socket) < 0
			   ? INS_EXIT_RUNTIME
			   : -1;
	/* The same default as the workers': $KVRING_SOCKET names the server
	 * they connect to, so the inspector looks at that one. */
	env = getenv("KVRING_SOCKET");
	if (env && *env)
		return ins_target_from_socket(t, o->dir, env) < 0
			   ? INS_EXIT_RUNTIME
			   : -1;
	if (kvr_seg_default_base(base_name, sizeof(base_name)) < 0 ||
	    kvr_seg_ctl_name(base_name, ctl, sizeof(ctl)) < 0) {
		ins_err("cannot compute the default segment name");
		return INS_EXIT_RUNTIME;
	}
	ins_target_set(t, o->dir, ctl);
	return -1;
}

/*
 * Attaches to @t and refuses what this mode cannot use. Every mode but
 * --check needs a valid geometry to locate channels; --check reports a
 * bad one as a violation instead. Return: -1 with *a attached, or an exit
 * status (message printed, nothing left mapped).
 */
static int attach(const struct ins_opts *o, const struct ins_target *t,
		  struct ins_attach *a)
{
	struct kvr_err e = {0};
	int rc;

	rc = ins_attach_open(t, a, &e);
	if (rc == -ENOENT) {
		ins_err("no server: %s does not exist (is kvringd running? "
			"try --list, --name or --socket)",
			t->path);
		return INS_EXIT_RUNTIME;
	}
	if (rc < 0) {
		ins_err("attach %s: %s (this " INS_PROG " reads abi %d.%d)",
			t->path, kvr_err_str(&e, rc), KVR_ABI_MAJOR,
			KVR_ABI_MINOR);
		return INS_EXIT_RUNTIME;
	}
	if (!a->geom_ok && o->mode != INS_MODE_CHECK) {
		ins_err("attach %s: %s", t->path, a->geom_err);
		ins_attach_close(a);
		return INS_EXIT_RUNTIME;
	}
	/* Checked only now: the channel count comes from the segment. */
	if (o->mode == INS_MODE_DUMP && o->dump_channel >= a->g.max_channels) {
		ins_err("--dump: channel %u out of range (the server has %u)",
			o->dump_channel, a->g.max_channels);
		ins_attach_close(a);
		return INS_EXIT_USAGE;
	}
	if (o->have_channel && o->channel >= a->g.max_channels) {
		ins_err("--channel: channel %u out of range (the server has "
			"%u)",
			o->channel, a->g.max_channels);
		ins_attach_close(a);
		return INS_EXIT_USAGE;
	}
	return -1;
}

/*
 * Parse, resolve the target, attach read-only, take a snapshot and render
 * it in the chosen mode. --list needs no target; --watch and --check take
 * their own snapshots. Attach failures are exit 1; --check's verdict is 0
 * or 3.
 */
int main(int argc, char **argv)
{
	struct ins_snap s = {0}, base = {0};
	struct ins_attach a;
	struct ins_target t;
	struct ins_opts o;
	int rc;

	rc = parse_args(argc, argv, &o);
	if (rc >= 0)
		return rc;
	ins_signals_install();
	if (o.mode == INS_MODE_LIST)
		return ins_list_run(&o);
	rc = resolve_target(&o, &t);
	if (rc >= 0)
		return rc;
	rc = attach(&o, &t, &a);
	if (rc >= 0)
		return rc;
	if (o.watch) {
		rc = ins_watch_run(&o, &t, &a);
		ins_attach_close(&a);
		return rc;
	}
	if (o.mode == INS_MODE_SERVE) {
		rc = ins_serve_run(&o, &t, &a);
		ins_attach_close(&a);
		return rc;
	}
	s.ch = ins_chan_alloc(&a);
	base.ch = ins_chan_alloc(&a);
	if (!s.ch || !base.ch) {
		ins_err("out of memory");
		rc = INS_EXIT_RUNTIME;
		goto out;
	}
	if (o.mode == INS_MODE_CHECK) {
		rc = ins_check_run(&o, &a, &s, &base);
		goto out;
	}
	if (ins_snap_take(&a, &s) < 0) {
		rc = INS_EXIT_RUNTIME;
		goto out;
	}
	rc = INS_EXIT_OK;
	if (o.mode == INS_MODE_PROM)
		ins_prom_emit(stdout, o.all, &t, &s);
	else if (o.mode == INS_MODE_DUMP)
		rc = ins_dump_run(&o, &a, &s);
	else if (o.mode == INS_MODE_LATENCY)
		ins_latency_emit(stdout, &o, &s, NULL);
	else
		ins_overview_emit(stdout, o.json, o.all, &t, &s, NULL);
out:
	free(s.ch);
	free(base.ch);
	ins_attach_close(&a);
	return rc;
}
