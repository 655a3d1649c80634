/* SPDX-License-Identifier: MIT */
/*
 * kvring-inspect: a read-only window into a running kvringd. It maps the
 * server's control segment with O_RDONLY and PROT_READ, closes the fd, and
 * prints what the header, the channel blocks, the doorbells and the rings
 * say: an overview (text key=value lines or one JSON object), a live view
 * with per-interval rates (--watch), Prometheus text exposition, the list of
 * kvring segments in a directory, a decode of the records sitting in one
 * channel's rings (--dump), and an invariant check (--check, exit 3).
 *
 * What this file deliberately does not do: it never writes to the segment,
 * never takes a lock, never sends a signal and never connects to the
 * server's socket, so it cannot perturb the server it looks at. Every value
 * it reads is untrusted: it is copied into a private snapshot first (the
 * same way the server treats worker input) and only the copy is rendered.
 * Rings are validated with kvr_ring_check(); records are decoded from a
 * private copy of the ring bytes with the ring's own consumer code.
 * The options and output keys are documented in docs/man/kvring-inspect.1.md
 * and docs/inspect.md.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/layout.h>
#include <kvring/paths.h>
#include <kvring/proc.h>
#include <kvring/proto.h>
#include <kvring/ring.h>
#include <kvring/segment.h>

#ifndef KVR_VERSION
#define KVR_VERSION "0.1.0"
#endif

#define PROG   "kvring-inspect"
#define SCHEMA 1

/* Exit codes (STYLE.md section 12). */
#define EXIT_OK	     0
#define EXIT_RUNTIME 1
#define EXIT_USAGE   2
#define EXIT_CHECK   3

#define NSEC	 1000000000ull
#define MAX_VIOL 256

enum mode { MODE_OVERVIEW, MODE_PROM, MODE_LIST, MODE_DUMP, MODE_CHECK };

/* Parsed command line; lives in main()'s frame for the whole run. */
struct opts {
	enum mode mode;
	const char *name;   /* --name: base, base.ctl, or a path */
	const char *socket; /* --socket */
	const char *dir;    /* --dir, NULL = /dev/shm */
	bool json, all, watch;
	uint32_t watch_ms;
	long count; /* --count: frames in --watch, 0 = forever */
	uint32_t dump_channel;
};

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
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG
	    " [TARGET] [--json] [--all] [--watch[=MS]] [--count N]\n"
	    "       " PROG " [TARGET] --prometheus | --check | --dump CHANNEL\n"
	    "       " PROG " --list [--dir DIR] [--json]\n"
	    "\n"
	    "Read-only view of a running kvringd (never writes, locks or "
	    "signals).\n"
	    "\n"
	    "TARGET (default: this uid's server, segment kvring-<uid>.ctl):\n"
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
	    "  -h, --help           this text\n"
	    "  -V, --version        version and the segment ABI understood\n"
	    "\n"
	    "Exit status: 0 ok, 1 runtime error (no server, ABI mismatch),\n"
	    "2 usage error, 3 --check found a violation.\n",
	    SCHEMA);
}

/* Errors go to stderr prefixed with the tool's name (STYLE.md 12). */
static void __attribute__((format(printf, 1, 2))) err(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	/* EINTR ends the sleep early on purpose: SIGINT stops --watch. */
	nanosleep(&ts, NULL);
}

/* ==== SIGBUS and SIGINT ==== */

/*
 * A tmpfs file that is unlinked but still mapped stays readable, and the
 * server never truncates its segments, so SIGBUS should not happen. If
 * something truncates the file anyway, reading past its new end raises
 * SIGBUS; the handler jumps back to the snapshot code, which reports it
 * instead of dumping core. Only reads of the mapping run while armed.
 */
static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;
static volatile sig_atomic_t stop_flag;

static void on_sigbus(int sig)
{
	if (bus_armed)
		siglongjmp(bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_sigint(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void install_handlers(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	/* No SA_RESTART: SIGINT must interrupt the --watch sleep. */
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* ==== Output emitter: the same keys as JSON or as key=value lines ==== */

#define EM_DEPTH 8

/*
 * One emitter per printed object. In JSON mode it writes one line; in text
 * mode every scalar becomes "<path>=<value>\n" where path joins the keys of
 * the enclosing objects with dots (channels.3.req_ring.head=128), so the
 * two modes share one vocabulary and text lines grep well.
 */
struct em {
	FILE *f;
	bool json;
	int depth;
	bool comma[EM_DEPTH];
	char close[EM_DEPTH];
	size_t plen[EM_DEPTH];
	char prefix[256];
};

/* Starts an object on @f; JSON mode opens the brace at once. */
static void em_init(struct em *e, FILE *f, bool json)
{
	memset(e, 0, sizeof(*e));
	e->f = f;
	e->json = json;
	if (json)
		fputc('{', f);
}

/* Ends the object; JSON objects end with a newline, so under --watch each
 * frame is exactly one line. Flushes, so a pipe reader sees whole frames. */
static void em_finish(struct em *e)
{
	if (e->json)
		fputs("}\n", e->f);
	fflush(e->f);
}

/* A JSON string literal. Control bytes and non-ASCII are escaped as \u00XX:
 * strings from the segment were already cleaned, but paths given on the
 * command line may hold anything. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Writes the separator and key of the next member (JSON) or the path. */
static void em_key(struct em *e, const char *k)
{
	if (e->json) {
		if (e->comma[e->depth])
			fputc(',', e->f);
		e->comma[e->depth] = true;
		if (k) {
			json_str(e->f, k);
			fputc(':', e->f);
		}
	} else {
		fprintf(e->f, "%s%s=", e->prefix, k ? k : "");
	}
}

/* Opens a nested object or array named @k: JSON writes the key and the
 * bracket, text mode appends "k." to the path prefix. Depth is bounded by
 * EM_DEPTH; our output nests at most five levels. */
static void em_push(struct em *e, const char *k, char open, char close)
{
	if (e->json) {
		em_key(e, k);
		fputc(open, e->f);
	} else {
		size_t n = strlen(e->prefix);

		snprintf(e->prefix + n, sizeof(e->prefix) - n, "%s.", k);
	}
	if (e->depth + 1 < EM_DEPTH)
		e->depth++;
	e->comma[e->depth] = false;
	e->close[e->depth] = close;
	e->plen[e->depth] = e->json ? 0 : strlen(e->prefix);
}

static void em_obj(struct em *e, const char *k)
{
	em_push(e, k, '{', '}');
}

static void em_arr(struct em *e, const char *k)
{
	em_push(e, k, '[', ']');
}

/* An object element of an array; text mode names it by @idx. */
static void em_item(struct em *e, uint32_t idx)
{
	char k[16];

	if (e->json) {
		em_push(e, NULL, '{', '}');
		return;
	}
	snprintf(k, sizeof(k), "%" PRIu32, idx);
	em_push(e, k, '{', '}');
}

/* Closes the innermost object or array (text: drops its path component). */
static void em_end(struct em *e)
{
	if (e->json)
		fputc(e->close[e->depth], e->f);
	if (e->depth > 0)
		e->depth--;
	if (!e->json) {
		/* Drop the last path component. */
		size_t n = strlen(e->prefix);

		if (n > 0)
			n--;
		while (n > 0 && e->prefix[n - 1] != '.')
			n--;
		e->prefix[n] = '\0';
	}
}

/* Scalars: one member in JSON, one "path.k=value" line in text. */
static void em_u64(struct em *e, const char *k, uint64_t v)
{
	em_key(e, k);
	fprintf(e->f, "%" PRIu64 "%s", v, e->json ? "" : "\n");
}

static void em_i64(struct em *e, const char *k, int64_t v)
{
	em_key(e, k);
	fprintf(e->f, "%" PRId64 "%s", v, e->json ? "" : "\n");
}

static void em_dbl(struct em *e, const char *k, double v)
{
	em_key(e, k);
	fprintf(e->f, "%.4f%s", v, e->json ? "" : "\n");
}

static void em_bool(struct em *e, const char *k, bool v)
{
	em_key(e, k);
	fprintf(e->f, "%s%s", v ? "true" : "false", e->json ? "" : "\n");
}

/* Text mode prints the string raw: callers pass sanitized strings. */
static void em_str(struct em *e, const char *k, const char *v)
{
	em_key(e, k);
	if (e->json)
		json_str(e->f, v);
	else
		fprintf(e->f, "%s\n", v);
}

/* ==== Names of enum values ==== */

/* Every enum read from the segment is untrusted: a value out of range is
 * shown as "invalid" rather than indexing past a table (--check reports it). */
static const char *server_state_name(uint32_t s)
{
	static const char *const n[] = {"starting", "running", "stopping"};

	return s < 3 ? n[s] : "invalid";
}

static const char *chan_state_name(uint32_t s)
{
	static const char *const n[] = {"free", "handshake", "active",
					"closing"};

	return s < 4 ? n[s] : "invalid";
}

static const char *backend_name(uint32_t b)
{
	static const char *const n[] = {"none", "shm", "memfd", "private"};

	return b < 4 ? n[b] : "invalid";
}

static const char *transport_name(uint32_t t)
{
	static const char *const n[] = {"none", "shm", "memfd", "copy"};

	return t < 4 ? n[t] : "invalid";
}

static const char *slot_status_name(int32_t s)
{
	static const char *const n[] = {"ok", "exists", "noroom", "busy",
					"invalid"};

	return s >= 0 && s < 5 ? n[s] : "unknown";
}

/* Copies a fixed-size shared string, forcing a NUL and replacing anything
 * that is not printable ASCII, so no peer can inject escapes or newlines. */
static void copy_clean(char *dst, size_t n, const char *src, size_t srcn)
{
	size_t i;

	for (i = 0; i + 1 < n && i < srcn && src[i]; i++)
		dst[i] = isprint((unsigned char)src[i]) && src[i] != '"' &&
				 src[i] != '\\'
			     ? src[i]
			     : '?';
	dst[i] = '\0';
}

/* The 16-byte boot id as 32 lowercase hex digits. */
static void hex16(char out[33], const uint8_t id[16])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* ==== Attaching ==== */

/* Where the control segment is: @dir/@name. */
struct target {
	char dir[KVR_SEG_DIR_MAX];
	char name[KVR_SEG_NAME_MAX + 1];
	char path[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];
};

/* A read-only attachment. Owned by the caller; at_detach() ends it. */
struct attach {
	struct kvr_seg seg;
	struct kvr_ctl_hdr_shm *h; /* seg.base: never written (PROT_READ) */
	struct kvr_ctl_geom g;	   /* recomputed privately from the caps */
	dev_t dev;
	ino_t ino;
	bool geom_ok;
	char geom_err[256];
};

/* Fills a target from a directory (NULL: /dev/shm) and a file name. */
static void set_target(struct target *t, const char *dir, const char *name)
{
	snprintf(t->dir, sizeof(t->dir), "%s", dir ? dir : KVR_SEG_DEFAULT_DIR);
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->path, sizeof(t->path), "%s/%s", t->dir, t->name);
}

/*
 * Turns --name into a target: a path (contains '/') names the file itself;
 * otherwise "X.ctl" is taken as is and anything else is a base name.
 * Return: 0, or -EINVAL (message printed) for a name that cannot be one.
 */
static int target_from_name(struct target *t, const char *dir, const char *name)
{
	char buf[KVR_SEG_NAME_MAX + 1], dbuf[KVR_SEG_DIR_MAX];
	const char *slash = strrchr(name, '/');
	size_t n;

	if (slash) {
		n = (size_t)(slash - name);
		if (n >= sizeof(dbuf))
			goto bad;
		memcpy(dbuf, name, n);
		dbuf[n] = '\0';
		if (n == 0)
			snprintf(dbuf, sizeof(dbuf), "/");
		dir = dbuf;
		name = slash + 1;
	}
	n = strlen(name);
	if (n > 4 && strcmp(name + n - 4, KVR_SEG_CTL_SUFFIX) == 0) {
		if (n >= sizeof(buf))
			goto bad;
		memcpy(buf, name, n + 1);
	} else if (kvr_seg_ctl_name(name, buf, sizeof(buf)) < 0) {
		goto bad;
	}
	if (!kvr_seg_name_valid(buf))
		goto bad;
	set_target(t, dir, buf);
	return 0;
bad:
	err("invalid segment name \"%s\"", name);
	return -EINVAL;
}

/*
 * Maps the target read-only and validates its header. The header check
 * (magic, ABI, layout hash, size) is final: a mismatch is refused. The
 * geometry check is recorded in a->geom_ok so that --check can report it
 * as a violation while the other modes refuse it.
 * Return: 0, or -errno with the reason in *e.
 */
static int at_open(const struct target *t, struct attach *a, struct kvr_err *e)
{
	const struct kvr_ctl_hdr_shm *h;
	struct kvr_ctl_geom g;
	struct stat st;
	volatile int tries = 0;
	int rc;

	memset(a, 0, sizeof(*a));
retry:
	rc = kvr_seg_open_name(t->dir, t->name, true, &a->seg, e);
	if (rc < 0)
		return rc;
	if (stat(t->path, &st) == 0) {
		a->dev = st.st_dev;
		a->ino = st.st_ino;
	}
	h = a->seg.base;
	bus_armed = 1;
	if (sigsetjmp(bus_jmp, 1)) {
		bus_armed = 0;
		kvr_seg_detach(&a->seg);
		return kvr_err_set(e, -EFAULT,
				   "read %s: SIGBUS (the file shrank under "
				   "us: truncated by someone)",
				   t->path);
	}
	rc = kvr_seg_hdr_check(&h->seg, a->seg.bytes, KVR_SEG_KIND_CONTROL,
			       kvr_layout_hash(), e);
	if (rc == -EAGAIN && ++tries < 50) {
		/* The server is still formatting it: give it a second. */
		bus_armed = 0;
		kvr_seg_detach(&a->seg);
		sleep_ms(20);
		goto retry;
	}
	if (rc < 0) {
		bus_armed = 0;
		kvr_seg_detach(&a->seg);
		return rc;
	}
	a->h = a->seg.base;
	/*
	 * The geometry is recomputed from the capacities, never taken from
	 * the header's offsets: a header that disagrees with the arithmetic
	 * is damaged, and the computed geometry must fit in the mapping.
	 */
	rc = kvr_ctl_geom_compute(h->max_channels, h->req_ring_cap,
				  h->resp_ring_cap, &g);
	bus_armed = 0;
	a->geom_ok = true;
	if (rc < 0) {
		snprintf(a->geom_err, sizeof(a->geom_err),
			 "header geometry invalid: max_channels %u, rings "
			 "%u/%u bytes",
			 h->max_channels, h->req_ring_cap, h->resp_ring_cap);
		a->geom_ok = false;
	} else if (g.channels_off != h->channels_off ||
		   g.channel_bytes != h->channel_bytes ||
		   g.ctl_bytes > a->seg.bytes) {
		snprintf(a->geom_err, sizeof(a->geom_err),
			 "header geometry inconsistent: channels_off %" PRIu64
			 " (expected %" PRIu64 "), channel_bytes %u "
			 "(expected %u), needs %" PRIu64 " bytes, file has %zu",
			 h->channels_off, g.channels_off, h->channel_bytes,
			 g.channel_bytes, g.ctl_bytes, a->seg.bytes);
		a->geom_ok = false;
	}
	if (a->geom_ok)
		a->g = g;
	return 0;
}

/* Unmaps; the segment itself is never touched (we do not own it). */
static void at_close(struct attach *a)
{
	kvr_seg_detach(&a->seg);
	a->h = NULL;
}

/* ==== --socket: which server listens there ==== */

/* Inodes of listening Unix sockets bound to @path (/proc/net/unix). */
static int listening_inodes(const char *path, unsigned long *ino, int max)
{
	char line[4096 + 128], rp[PATH_MAX], want[PATH_MAX];
	FILE *f = fopen("/proc/net/unix", "r");
	int n = 0;

	if (!f)
		return -errno;
	if (!realpath(path, want))
		snprintf(want, sizeof(want), "%s", path);
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long refc, proto, flags, type, st, inode;
		char p[4096];
		int off = 0;

		p[0] = '\0';
		if (sscanf(line, "%*[0-9a-fA-F]: %lx %lx %lx %lx %lx %lu %n",
			   &refc, &proto, &flags, &type, &st, &inode, &off) < 6)
			continue;
		/* __SO_ACCEPTCON (0x10000): a listening socket. */
		if (!(flags & 0x10000) || off <= 0)
			continue;
		if (sscanf(line + off, "%4095s", p) != 1)
			continue;
		if (strcmp(p, path) == 0 || strcmp(p, want) == 0 ||
		    (realpath(p, rp) && strcmp(rp, want) == 0))
			ino[n++] = inode;
	}
	fclose(f);
	return n;
}

/* Whether process @pid holds one of the socket inodes among its fds. */
static bool pid_holds_socket(pid_t pid, const unsigned long *ino, int n)
{
	char dpath[64], lpath[320], link[64];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(dpath, sizeof(dpath), "/proc/%d/fd", (int)pid);
	d = opendir(dpath);
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		ssize_t len;
		unsigned long v;

		snprintf(lpath, sizeof(lpath), "%s/%s", dpath, de->d_name);
		len = readlink(lpath, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &v) != 1)
			continue;
		for (int i = 0; i < n; i++)
			found = found || v == ino[i];
	}
	closedir(d);
	return found;
}

/*
 * Resolves --socket without connecting (a connect would be a handshake
 * the server has to answer): finds the inodes of the listening sockets
 * bound to @path in /proc/net/unix, then the control segment in @dir whose
 * live creator holds one of them among its fds.
 * Return: 0 and *t set, or -ENOENT (message printed).
 */
static int target_from_socket(struct target *t, const char *dir,
			      const char *path)
{
	unsigned long ino[8];
	struct dirent *de;
	int n, found = 0;
	DIR *d;

	n = listening_inodes(path, ino, 8);
	if (n <= 0) {
		err("socket %s: no listening Unix socket bound to that path "
		    "(is kvringd running?)",
		    path);
		return -ENOENT;
	}
	d = opendir(dir ? dir : KVR_SEG_DEFAULT_DIR);
	if (!d) {
		err("open %s: %s", dir ? dir : KVR_SEG_DEFAULT_DIR,
		    strerror(errno));
		return -errno;
	}
	while (!found && (de = readdir(d))) {
		struct kvr_seg_hdr_shm h;
		size_t len = strlen(de->d_name);
		char p[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];
		int fd;

		if (len < 5 || strcmp(de->d_name + len - 4, ".ctl") != 0 ||
		    !kvr_seg_name_valid(de->d_name))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir ? dir : KVR_SEG_DEFAULT_DIR,
			 de->d_name);
		/* A plain read of the header: magic and creator pid keep
		 * their offsets in every ABI, so any version can be matched
		 * (and then refused cleanly by the attach). */
		fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		    h.magic == KVR_SEG_MAGIC &&
		    kvr_proc_alive(h.creator_pid, h.creator_start) &&
		    pid_holds_socket(h.creator_pid, ino, n)) {
			set_target(t, dir, de->d_name);
			found = 1;
		}
		close(fd);
	}
	closedir(d);
	if (!found) {
		err("socket %s: no control segment in %s belongs to the "
		    "process listening there (try --name)",
		    path, dir ? dir : KVR_SEG_DEFAULT_DIR);
		return -ENOENT;
	}
	return 0;
}

/* ==== Snapshot: a private copy of everything rendered ==== */

struct ring_snap {
	int rc; /* kvr_ring_check() result */
	uint32_t cap;
	struct kvr_ring_snapshot s;
	uint64_t server_high_water; /* from the channel counters */
};

struct chan_snap {
	uint32_t idx, state, generation, transport, ns_id, uid, gid;
	uint32_t req_ring_off, resp_ring_off;
	int32_t pid;
	bool alive;
	uint64_t pid_start, connected_ns;
	struct kvr_ns_desc ns; /* model cleaned by copy_clean() */
	uint64_t requests[16], errors[KVR_ERR_SLOTS];
	uint64_t reserved_bytes, pins, leases, transfers, last_activity_ns;
	uint64_t bytes_in, bytes_out, resp_ring_full;
	struct kvr_bell_stats req_bell, resp_bell;
	struct ring_snap req, resp;
};

struct snap {
	uint64_t mono_ns, real_ns; /* when it was taken */
	int32_t pid;
	bool alive;
	uint64_t pid_start;
	uint8_t boot_id[16];
	char seg_name[64], pool_name[64];
	uint32_t abi, align, backend, max_channels, req_cap, resp_cap;
	uint32_t max_keys, lease_ms, heartbeat_ms, state;
	int32_t uid;
	uint64_t pool_bytes, start_real_ns, heartbeat_ns;
	/* Global counters, in struct kvr_gstats_shm order. */
	uint64_t used, committed, reserved, objects, reserved_objects, pins;
	uint64_t pinned_bytes, leases, transfers, evictions, evicted_bytes;
	uint64_t stores_skipped, no_room, workers, connects, cleanups;
	uint64_t protocol_errors, handshake_refused, requests, leases_expired;
	uint64_t free_extents, largest_free, frag_ppm, loop_wakeups;
	uint32_t nchan; /* entries in ch (max_channels when geometry ok) */
	struct chan_snap *ch;
};

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* One ring's positions and health, read with kvr_ring_check() (A4 in the
 * ring's memory-order list: head and tail re-read until they agree). The
 * capacity passed is OUR geometry's; a ring that records another is -EPROTO. */
static void snap_ring(struct ring_snap *r, const void *mem, uint32_t cap)
{
	r->cap = cap;
	r->rc = kvr_ring_check(mem, kvr_ring_shm_bytes(cap), cap, &r->s);
}

/*
 * Copies channel @i. The identity fields are plain data the server writes
 * while claiming the channel, so they are copied between two reads of
 * (generation, state) and copied again if either changed (a seqlock read
 * without the writer's cooperation: at worst a few retries, then the last
 * copy is shown as is).
 */
static void snap_chan(const struct attach *a, uint32_t i, struct chan_snap *c)
{
	struct kvr_channel_shm *ch = kvr_ctl_channel(a->h, &a->g, i);
	const char *base = (const char *)ch;
	uint32_t st, gen;

	for (int tries = 0; tries < 8; tries++) {
		/*
		 * A-INS1: acquire on state, so the identity written before
		 * the server published the state is seen with it (pairs with
		 * the server's store of state when it claims the channel).
		 */
		st = atomic_load_explicit(&ch->state, memory_order_acquire);
		gen = ch->generation;
		c->pid = ch->pid;
		c->uid = ch->uid;
		c->gid = ch->gid;
		c->pid_start = ch->pid_start;
		c->ns_id = ch->ns_id;
		c->transport = ch->transport;
		c->connected_ns = ch->connected_ns;
		c->req_ring_off = ch->req_ring_off;
		c->resp_ring_off = ch->resp_ring_off;
		memcpy(&c->ns, &ch->ns, sizeof(c->ns));
		atomic_thread_fence(memory_order_acquire);
		if (st == atomic_load_explicit(&ch->state,
					       memory_order_relaxed) &&
		    gen == ch->generation)
			break;
	}
	c->idx = i;
	c->state = st;
	c->generation = gen;
	copy_clean(c->ns.model, sizeof(c->ns.model), ch->ns.model,
		   sizeof(ch->ns.model));
	/* Counters: relaxed, each untorn; single writer (the server). */
	for (int k = 0; k < 16; k++)
		c->requests[k] = LD(ch->stats.requests[k]);
	for (int k = 0; k < KVR_ERR_SLOTS; k++)
		c->errors[k] = LD(ch->stats.errors[k]);
	c->reserved_bytes = LD(ch->stats.reserved_bytes);
	c->pins = LD(ch->stats.pins);
	c->leases = LD(ch->stats.leases);
	c->transfers = LD(ch->stats.transfers);
	c->last_activity_ns = LD(ch->stats.last_activity_ns);
	c->bytes_in = LD(ch->stats.bytes_in);
	c->bytes_out = LD(ch->stats.bytes_out);
	c->resp_ring_full = LD(ch->stats.resp_ring_full);
	kvr_bell_stats(&ch->req_bell, &c->req_bell);
	kvr_bell_stats(&ch->resp_bell, &c->resp_bell);
	c->alive = st != KVR_CHAN_FREE && kvr_proc_alive(c->pid, c->pid_start);
	/* Rings at the offsets WE computed, never the header's. */
	snap_ring(&c->req, base + a->g.req_ring_off, a->g.req_ring_cap);
	snap_ring(&c->resp, base + a->g.resp_ring_off, a->g.resp_ring_cap);
	c->req.server_high_water = LD(ch->stats.req_high_water);
	c->resp.server_high_water = LD(ch->stats.resp_high_water);
}

/*
 * Fills *s from the mapping. ch must have room for max_channels entries
 * (allocated by the caller from the validated geometry).
 * Return: 0, or -EFAULT if the mapping raised SIGBUS (message printed).
 */
static int snap_take(const struct attach *a, struct snap *s)
{
	struct kvr_ctl_hdr_shm *h = a->h;
	struct kvr_gstats_shm *g = &h->stats;
	struct chan_snap *ch = s->ch;

	memset(s, 0, sizeof(*s));
	s->ch = ch;
	bus_armed = 1;
	if (sigsetjmp(bus_jmp, 1)) {
		bus_armed = 0;
		err("read control segment: SIGBUS (the file was truncated "
		    "under us); giving up");
		return -EFAULT;
	}
	s->mono_ns = now_ns(CLOCK_MONOTONIC);
	s->real_ns = now_ns(CLOCK_REALTIME);
	s->pid = h->seg.creator_pid;
	s->pid_start = h->seg.creator_start;
	s->abi = h->seg.abi;
	memcpy(s->boot_id, h->seg.boot_id, 16);
	copy_clean(s->seg_name, sizeof(s->seg_name), h->seg.name,
		   sizeof(h->seg.name));
	copy_clean(s->pool_name, sizeof(s->pool_name), h->pool_name,
		   sizeof(h->pool_name));
	s->pool_bytes = h->pool_bytes;
	s->align = h->align;
	s->backend = h->pool_backend;
	s->max_channels = h->max_channels;
	s->req_cap = h->req_ring_cap;
	s->resp_cap = h->resp_ring_cap;
	s->max_keys = h->max_keys;
	s->lease_ms = h->lease_ms;
	s->heartbeat_ms = h->heartbeat_ms;
	s->uid = h->server_uid;
	s->start_real_ns = h->start_realtime_ns;
	s->heartbeat_ns = LD(h->heartbeat_ns);
	s->state = LD(h->state);
	s->used = LD(g->used_bytes);
	s->committed = LD(g->committed_bytes);
	s->reserved = LD(g->reserved_bytes);
	s->objects = LD(g->objects);
	s->reserved_objects = LD(g->reserved_objects);
	s->pins = LD(g->pins);
	s->pinned_bytes = LD(g->pinned_bytes);
	s->leases = LD(g->leases);
	s->transfers = LD(g->transfers);
	s->evictions = LD(g->evictions);
	s->evicted_bytes = LD(g->evicted_bytes);
	s->stores_skipped = LD(g->stores_skipped);
	s->no_room = LD(g->no_room);
	s->workers = LD(g->workers);
	s->connects = LD(g->connects);
	s->cleanups = LD(g->disconnect_cleanups);
	s->protocol_errors = LD(g->protocol_errors);
	s->handshake_refused = LD(g->handshake_refused);
	s->requests = LD(g->requests);
	s->leases_expired = LD(g->leases_expired);
	s->free_extents = LD(g->free_extents);
	s->largest_free = LD(g->largest_free);
	s->frag_ppm = LD(g->frag_ppm);
	s->loop_wakeups = LD(g->loop_wakeups);
	if (a->geom_ok) {
		s->nchan = a->g.max_channels;
		for (uint32_t i = 0; i < s->nchan; i++)
			snap_chan(a, i, &s->ch[i]);
	}
	bus_armed = 0;
	s->alive = kvr_proc_alive(s->pid, s->pid_start);
	return 0;
}

/* now - then, or 0 when "then" is unset (0) or in the future (a clock read
 * in another process a moment after ours). */
static uint64_t age_ns(uint64_t now, uint64_t then)
{
	return then && now > then ? now - then : 0;
}

static uint64_t chan_requests(const struct chan_snap *c)
{
	uint64_t n = 0;

	for (int k = 0; k < 16; k++)
		n += c->requests[k];
	return n;
}

/* ==== Overview (text and JSON) ==== */

/* Per-interval rates for --watch; NULL prev means "first frame". */
static void emit_rates(struct em *e, const struct snap *s,
		       const struct snap *prev)
{
	double dt;

	if (!prev)
		return;
	dt = (double)(s->mono_ns - prev->mono_ns) / 1e9;
	if (dt <= 0)
		dt = 1e-9;
	em_obj(e, "rates");
	em_u64(e, "interval_ms", (s->mono_ns - prev->mono_ns) / 1000000);
	em_dbl(e, "requests_per_s",
	       (double)(s->requests - prev->requests) / dt);
	em_dbl(e, "evictions_per_s",
	       (double)(s->evictions - prev->evictions) / dt);
	em_dbl(e, "evicted_bytes_per_s",
	       (double)(s->evicted_bytes - prev->evicted_bytes) / dt);
	em_dbl(e, "connects_per_s",
	       (double)(s->connects - prev->connects) / dt);
	em_dbl(e, "no_room_per_s", (double)(s->no_room - prev->no_room) / dt);
	em_end(e);
}

/* A ring object: positions are free-running byte counters, so head and tail
 * only grow; used_bytes is their difference as kvr_ring_check() saw it. */
static void emit_ring(struct em *e, const char *k, const struct ring_snap *r)
{
	em_obj(e, k);
	em_u64(e, "capacity", r->cap);
	em_u64(e, "head", r->s.head);
	em_u64(e, "tail", r->s.tail);
	em_u64(e, "used_bytes", r->s.used_bytes);
	em_dbl(e, "occupancy",
	       r->cap ? (double)r->s.used_bytes / (double)r->cap : 0.0);
	/* The server's measurement; the ring header's own value is an
	 * upper bound (the producer computes it from its cached head). */
	em_u64(e, "high_water", r->server_high_water);
	em_u64(e, "ring_high_water", r->s.high_water);
	em_u64(e, "records", r->s.nr_records);
	em_str(e, "check", r->rc == 0 ? "ok" : kvr_strerror(r->rc));
	em_end(e);
}

/* A doorbell: rung + suppressed is the number of notifies; a high share of
 * suppressed means the peer was busy and no system call was needed. */
static void emit_bell(struct em *e, const char *k,
		      const struct kvr_bell_stats *b)
{
	em_obj(e, k);
	em_u64(e, "rung", b->rung);
	em_u64(e, "suppressed", b->suppressed);
	em_u64(e, "sleeps", b->sleeps);
	em_u64(e, "cancels", b->cancels);
	em_bool(e, "sleeping", b->sleeping != 0);
	em_end(e);
}

/* One channel object. @pc is the same channel in the previous --watch
 * frame; its rate is shown only while the channel keeps its generation (a
 * re-claimed channel restarts its counters). */
static void emit_chan(struct em *e, const struct snap *s,
		      const struct chan_snap *c, const struct chan_snap *pc,
		      double dt)
{
	char op[32];

	em_item(e, c->idx);
	em_u64(e, "index", c->idx);
	em_str(e, "state", chan_state_name(c->state));
	em_i64(e, "pid", c->pid);
	em_bool(e, "pid_alive", c->alive);
	em_u64(e, "uid", c->uid);
	em_u64(e, "generation", c->generation);
	em_str(e, "transport", transport_name(c->transport));
	em_obj(e, "namespace");
	em_u64(e, "id", c->ns_id);
	em_str(e, "model", c->ns.model);
	em_u64(e, "layers", c->ns.layers);
	em_u64(e, "kv_heads", c->ns.kv_heads);
	em_u64(e, "head_size", c->ns.head_size);
	em_u64(e, "dtype_bytes", c->ns.dtype_bytes);
	em_u64(e, "tp_rank", c->ns.tp_rank);
	em_u64(e, "tp_size", c->ns.tp_size);
	em_u64(e, "chunk_tokens", c->ns.chunk_tokens);
	em_end(e);
	em_u64(e, "connected_s", age_ns(s->mono_ns, c->connected_ns) / NSEC);
	em_u64(e, "last_activity_age_ms",
	       age_ns(s->mono_ns, c->last_activity_ns) / 1000000);
	emit_ring(e, "req_ring", &c->req);
	emit_ring(e, "resp_ring", &c->resp);
	em_obj(e, "doorbells");
	emit_bell(e, "req", &c->req_bell);
	emit_bell(e, "resp", &c->resp_bell);
	em_end(e);
	em_u64(e, "requests", chan_requests(c));
	if (pc && pc->generation == c->generation && dt > 0)
		em_dbl(e, "requests_per_s",
		       (double)(chan_requests(c) - chan_requests(pc)) / dt);
	em_obj(e, "requests_by_op");
	for (uint32_t k = 1; k < KVR_OP__MAX; k++) {
		snprintf(op, sizeof(op), "%s", kvr_op_name(k));
		em_u64(e, op, c->requests[k]);
	}
	em_end(e);
	em_obj(e, "errors_by_code");
	for (unsigned k = 1; k < KVR_ERR_SLOTS; k++)
		em_u64(e, kvr_err_slot_name(k), c->errors[k]);
	em_end(e);
	em_u64(e, "reserved_bytes", c->reserved_bytes);
	em_u64(e, "pins", c->pins);
	em_u64(e, "leases", c->leases);
	em_u64(e, "transfers", c->transfers);
	em_u64(e, "bytes_in", c->bytes_in);
	em_u64(e, "bytes_out", c->bytes_out);
	em_u64(e, "resp_ring_full", c->resp_ring_full);
	em_end(e);
}

/* The default output: server, pool, global counters, rates (under --watch)
 * and the channels. Key names are the schema: add keys, never rename. */
static void emit_overview(FILE *f, bool json, bool all, const struct target *t,
			  const struct snap *s, const struct snap *prev)
{
	char boot[33], abi[24];
	struct em e;

	hex16(boot, s->boot_id);
	em_init(&e, f, json);
	em_u64(&e, "schema", SCHEMA);
	em_str(&e, "segment", t->path);
	snprintf(abi, sizeof(abi), "%u.%u", s->abi >> 16, s->abi & 0xffffu);
	em_str(&e, "abi", abi);
	em_i64(&e, "server_pid", s->pid);
	em_bool(&e, "server_alive", s->alive);
	em_str(&e, "server_state", server_state_name(s->state));
	em_str(&e, "boot_id", boot);
	em_u64(&e, "uptime_s",
	       s->start_real_ns && s->real_ns > s->start_real_ns
		   ? (s->real_ns - s->start_real_ns) / NSEC
		   : 0);
	em_u64(&e, "heartbeat_age_ms",
	       age_ns(s->mono_ns, s->heartbeat_ns) / 1000000);
	em_u64(&e, "heartbeat_ms", s->heartbeat_ms);
	em_str(&e, "pool_backend", backend_name(s->backend));
	em_str(&e, "pool_name", s->pool_name);
	em_u64(&e, "pool_bytes", s->pool_bytes);
	em_u64(&e, "pool_used_bytes", s->used);
	em_u64(&e, "pool_free_bytes",
	       s->pool_bytes > s->used ? s->pool_bytes - s->used : 0);
	em_u64(&e, "committed_bytes", s->committed);
	em_u64(&e, "reserved_bytes", s->reserved);
	em_u64(&e, "pinned_bytes", s->pinned_bytes);
	em_dbl(&e, "fragmentation", (double)s->frag_ppm / 1e6);
	em_u64(&e, "free_extents", s->free_extents);
	em_u64(&e, "largest_free_bytes", s->largest_free);
	em_u64(&e, "align", s->align);
	em_u64(&e, "objects", s->objects);
	em_u64(&e, "reserved_objects", s->reserved_objects);
	em_u64(&e, "pins", s->pins);
	em_u64(&e, "leases", s->leases);
	em_u64(&e, "transfers", s->transfers);
	em_u64(&e, "evictions", s->evictions);
	em_u64(&e, "evicted_bytes", s->evicted_bytes);
	em_u64(&e, "stores_skipped", s->stores_skipped);
	em_u64(&e, "no_room", s->no_room);
	em_u64(&e, "requests", s->requests);
	em_u64(&e, "workers", s->workers);
	em_u64(&e, "max_workers", s->max_channels);
	em_u64(&e, "connects", s->connects);
	em_u64(&e, "disconnect_cleanups", s->cleanups);
	em_u64(&e, "protocol_errors", s->protocol_errors);
	em_u64(&e, "handshake_refused", s->handshake_refused);
	em_u64(&e, "leases_expired", s->leases_expired);
	em_u64(&e, "loop_wakeups", s->loop_wakeups);
	em_u64(&e, "lease_ms", s->lease_ms);
	em_u64(&e, "max_keys", s->max_keys);
	emit_rates(&e, s, prev);
	em_arr(&e, "channels");
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct chan_snap *c = &s->ch[i];

		if (!all && c->state == KVR_CHAN_FREE)
			continue;
		emit_chan(
		    &e, s, c, prev && i < prev->nchan ? &prev->ch[i] : NULL,
		    prev ? (double)(s->mono_ns - prev->mono_ns) / 1e9 : 0.0);
	}
	em_end(&e);
	em_finish(&e);
}

/* ==== --prometheus: text exposition format 0.0.4 ==== */

/* Label values escape backslash, double quote and newline. */
static void prom_lv(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* One HELP and one TYPE line per metric name, before its samples. */
static void prom_head(FILE *f, const char *name, const char *type,
		      const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_u64(FILE *f, const char *name, const char *type,
		     const char *help, uint64_t v)
{
	prom_head(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

static void prom_dbl(FILE *f, const char *name, const char *type,
		     const char *help, double v)
{
	prom_head(f, name, type, help);
	fprintf(f, "%s %.6f\n", name, v);
}

/* The labels every per-channel sample carries. */
static void prom_chan_labels(FILE *f, const struct chan_snap *c)
{
	fprintf(f, "channel=\"%" PRIu32 "\",pid=\"%" PRId32 "\"", c->idx,
		c->pid);
}

#define CH_U64(field) offsetof(struct chan_snap, field)

/* Per-channel scalar metrics, read from struct chan_snap by offset. */
static const struct {
	const char *name, *type, *help;
	size_t off;
} chan_metrics[] = {
    {"kvring_channel_reserved_bytes", "gauge",
     "Bytes reserved by the channel's open store transfers.",
     CH_U64(reserved_bytes)},
    {"kvring_channel_pins", "gauge",
     "Object pins held by the channel (leases and retrieve transfers).",
     CH_U64(pins)},
    {"kvring_channel_leases", "gauge", "Leases owned by the channel.",
     CH_U64(leases)},
    {"kvring_channel_transfers", "gauge",
     "Open store and retrieve transfers of the channel.", CH_U64(transfers)},
    {"kvring_channel_copy_bytes_in_total", "counter",
     "Payload bytes received over the socket (copy transport).",
     CH_U64(bytes_in)},
    {"kvring_channel_copy_bytes_out_total", "counter",
     "Payload bytes sent over the socket (copy transport).", CH_U64(bytes_out)},
    {"kvring_channel_resp_ring_full_total", "counter",
     "Times an answer had to wait for room in the response ring.",
     CH_U64(resp_ring_full)},
};

/* Which channels the outputs include: in use, or all with --all. */
static bool shown(const struct chan_snap *c, bool all)
{
	return all || c->state != KVR_CHAN_FREE;
}

/* One metric family with a sample per shown channel and ring; @what picks
 * the value (0 capacity, 1 used, 2 high water, 3 head, 4 tail, 5 ok). */
static void prom_rings(FILE *f, const struct snap *s, bool all,
		       const char *name, const char *type, const char *help,
		       int what)
{
	prom_head(f, name, type, help);
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct chan_snap *c = &s->ch[i];

		if (!shown(c, all))
			continue;
		for (int r = 0; r < 2; r++) {
			const struct ring_snap *rs = r ? &c->resp : &c->req;
			uint64_t v = what == 0	 ? rs->cap
				     : what == 1 ? rs->s.used_bytes
				     : what == 2 ? rs->server_high_water
				     : what == 3 ? rs->s.head
				     : what == 4 ? rs->s.tail
						 : (uint64_t)(rs->rc == 0);

			fprintf(f, "%s{", name);
			prom_chan_labels(f, c);
			fprintf(f, ",ring=\"%s\"} %" PRIu64 "\n",
				r ? "resp" : "req", v);
		}
	}
}

/* Doorbell counters per channel and ring; @what: 0 rung, 1 suppressed,
 * 2 sleeps. */
static void prom_bells(FILE *f, const struct snap *s, bool all,
		       const char *name, const char *help, int what)
{
	prom_head(f, name, "counter", help);
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct chan_snap *c = &s->ch[i];

		if (!shown(c, all))
			continue;
		for (int r = 0; r < 2; r++) {
			const struct kvr_bell_stats *b =
			    r ? &c->resp_bell : &c->req_bell;
			uint64_t v = what == 0	 ? b->rung
				     : what == 1 ? b->suppressed
						 : b->sleeps;

			fprintf(f, "%s{", name);
			prom_chan_labels(f, c);
			fprintf(f, ",ring=\"%s\"} %" PRIu64 "\n",
				r ? "resp" : "req", v);
		}
	}
}

/*
 * The exposition is metric-major: each family's HELP and TYPE, then all of
 * its samples, so that no name is announced twice and samples of one
 * family are contiguous, as the text format requires. Counters end in
 * _total; label values are escaped by prom_lv().
 */
static void emit_prometheus(FILE *f, bool all, const struct target *t,
			    const struct snap *s)
{
	char boot[33];

	hex16(boot, s->boot_id);
	prom_head(f, "kvring_server_info", "gauge",
		  "Constant 1; labels describe the server.");
	fprintf(f, "kvring_server_info{segment=\"");
	prom_lv(f, t->path);
	fprintf(f,
		"\",boot_id=\"%s\",pool_backend=\"%s\",state=\"%s\","
		"abi=\"%u.%u\",pid=\"%" PRId32 "\"} 1\n",
		boot, backend_name(s->backend), server_state_name(s->state),
		s->abi >> 16, s->abi & 0xffffu, s->pid);
	prom_u64(f, "kvring_server_up", "gauge",
		 "1 if the server process that owns the segment is alive.",
		 s->alive);
	prom_u64(f, "kvring_server_uptime_seconds", "gauge",
		 "Seconds since the server started.",
		 s->start_real_ns && s->real_ns > s->start_real_ns
		     ? (s->real_ns - s->start_real_ns) / NSEC
		     : 0);
	prom_dbl(f, "kvring_server_heartbeat_age_seconds", "gauge",
		 "Seconds since the server's last heartbeat.",
		 (double)age_ns(s->mono_ns, s->heartbeat_ns) / 1e9);
	prom_u64(f, "kvring_pool_bytes", "gauge", "Size of the chunk pool.",
		 s->pool_bytes);
	prom_u64(f, "kvring_pool_used_bytes", "gauge",
		 "Pool bytes reserved or committed.", s->used);
	prom_u64(f, "kvring_pool_free_bytes", "gauge", "Pool bytes free.",
		 s->pool_bytes > s->used ? s->pool_bytes - s->used : 0);
	prom_u64(f, "kvring_pool_committed_bytes", "gauge",
		 "Pool bytes of committed (readable) objects.", s->committed);
	prom_u64(f, "kvring_pool_reserved_bytes", "gauge",
		 "Pool bytes reserved by open store transfers.", s->reserved);
	prom_u64(f, "kvring_pool_pinned_bytes", "gauge",
		 "Pool bytes of pinned objects.", s->pinned_bytes);
	prom_dbl(f, "kvring_pool_fragmentation_ratio", "gauge",
		 "1 - largest free extent / free bytes.",
		 (double)s->frag_ppm / 1e6);
	prom_u64(f, "kvring_pool_free_extents", "gauge",
		 "Number of free extents in the pool.", s->free_extents);
	prom_u64(f, "kvring_objects", "gauge", "Committed objects.",
		 s->objects);
	prom_u64(f, "kvring_reserved_objects", "gauge",
		 "Objects reserved but not committed.", s->reserved_objects);
	prom_u64(f, "kvring_pins", "gauge", "(object, owner) pin pairs.",
		 s->pins);
	prom_u64(f, "kvring_leases", "gauge", "Live leases.", s->leases);
	prom_u64(f, "kvring_transfers", "gauge",
		 "Open store and retrieve transfers.", s->transfers);
	prom_u64(f, "kvring_workers", "gauge", "Channels in use.", s->workers);
	prom_u64(f, "kvring_max_workers", "gauge", "Channels available.",
		 s->max_channels);
	prom_u64(f, "kvring_evictions_total", "counter",
		 "Objects evicted to make room.", s->evictions);
	prom_u64(f, "kvring_evicted_bytes_total", "counter",
		 "Bytes evicted to make room.", s->evicted_bytes);
	prom_u64(f, "kvring_stores_skipped_total", "counter",
		 "Keys a store skipped because they were already stored.",
		 s->stores_skipped);
	prom_u64(f, "kvring_no_room_total", "counter", "Keys answered no-room.",
		 s->no_room);
	prom_u64(f, "kvring_requests_total", "counter",
		 "Requests served (all channels, all time).", s->requests);
	prom_u64(f, "kvring_connects_total", "counter",
		 "Workers that completed the handshake.", s->connects);
	prom_u64(f, "kvring_disconnect_cleanups_total", "counter",
		 "Channels cleaned up after a disconnect.", s->cleanups);
	prom_u64(f, "kvring_protocol_errors_total", "counter",
		 "Workers disconnected for breaking the protocol.",
		 s->protocol_errors);
	prom_u64(f, "kvring_handshake_refused_total", "counter",
		 "Handshakes refused.", s->handshake_refused);
	prom_u64(f, "kvring_leases_expired_total", "counter",
		 "Leases that expired.", s->leases_expired);
	prom_u64(f, "kvring_loop_wakeups_total", "counter",
		 "Times the server loop slept and woke.", s->loop_wakeups);

	prom_head(f, "kvring_channel_info", "gauge",
		  "Constant 1 per channel shown; labels describe the worker.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct chan_snap *c = &s->ch[i];

		if (!shown(c, all))
			continue;
		fprintf(f, "kvring_channel_info{");
		prom_chan_labels(f, c);
		fprintf(f, ",state=\"%s\",transport=\"%s\",model=\"",
			chan_state_name(c->state),
			transport_name(c->transport));
		prom_lv(f, c->ns.model);
		fprintf(f, "\",tp_rank=\"%u\",tp_size=\"%u\"} 1\n",
			c->ns.tp_rank, c->ns.tp_size);
	}
	prom_head(f, "kvring_channel_worker_up", "gauge",
		  "1 if the channel's worker process is alive.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!shown(&s->ch[i], all))
			continue;
		fprintf(f, "kvring_channel_worker_up{");
		prom_chan_labels(f, &s->ch[i]);
		fprintf(f, "} %d\n", s->ch[i].alive ? 1 : 0);
	}
	prom_head(f, "kvring_channel_last_activity_age_seconds", "gauge",
		  "Seconds since the channel's last request.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!shown(&s->ch[i], all))
			continue;
		fprintf(f, "kvring_channel_last_activity_age_seconds{");
		prom_chan_labels(f, &s->ch[i]);
		fprintf(f, "} %.3f\n",
			(double)age_ns(s->mono_ns, s->ch[i].last_activity_ns) /
			    1e9);
	}
	for (size_t m = 0; m < sizeof(chan_metrics) / sizeof(chan_metrics[0]);
	     m++) {
		prom_head(f, chan_metrics[m].name, chan_metrics[m].type,
			  chan_metrics[m].help);
		for (uint32_t i = 0; i < s->nchan; i++) {
			const struct chan_snap *c = &s->ch[i];
			uint64_t v;

			if (!shown(c, all))
				continue;
			memcpy(&v, (const char *)c + chan_metrics[m].off,
			       sizeof(v));
			fprintf(f, "%s{", chan_metrics[m].name);
			prom_chan_labels(f, c);
			fprintf(f, "} %" PRIu64 "\n", v);
		}
	}
	prom_head(f, "kvring_channel_requests_total", "counter",
		  "Requests by operation.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!shown(&s->ch[i], all))
			continue;
		for (uint32_t k = 1; k < KVR_OP__MAX; k++) {
			fprintf(f, "kvring_channel_requests_total{");
			prom_chan_labels(f, &s->ch[i]);
			fprintf(f, ",op=\"%s\"} %" PRIu64 "\n", kvr_op_name(k),
				s->ch[i].requests[k]);
		}
	}
	prom_head(f, "kvring_channel_errors_total", "counter",
		  "Answers with an error, by error code.");
	for (uint32_t i = 0; i < s->nchan; i++) {
		if (!shown(&s->ch[i], all))
			continue;
		for (unsigned k = 1; k < KVR_ERR_SLOTS; k++) {
			fprintf(f, "kvring_channel_errors_total{");
			prom_chan_labels(f, &s->ch[i]);
			fprintf(f, ",code=\"%s\"} %" PRIu64 "\n",
				kvr_err_slot_name(k), s->ch[i].errors[k]);
		}
	}
	prom_rings(f, s, all, "kvring_channel_ring_capacity_bytes", "gauge",
		   "Ring data capacity.", 0);
	prom_rings(f, s, all, "kvring_channel_ring_used_bytes", "gauge",
		   "Bytes between head and tail.", 1);
	prom_rings(f, s, all, "kvring_channel_ring_high_water_bytes", "gauge",
		   "Most bytes ever in flight in the ring.", 2);
	prom_rings(f, s, all, "kvring_channel_ring_consumed_bytes_total",
		   "counter", "Ring head: bytes ever released by the consumer.",
		   3);
	prom_rings(f, s, all, "kvring_channel_ring_produced_bytes_total",
		   "counter",
		   "Ring tail: bytes ever published by the producer.", 4);
	prom_rings(f, s, all, "kvring_channel_ring_ok", "gauge",
		   "1 if kvr_ring_check() found the ring well-formed.", 5);
	prom_bells(f, s, all, "kvring_channel_doorbell_rung_total",
		   "Notifies that found the consumer asleep (eventfd written).",
		   0);
	prom_bells(f, s, all, "kvring_channel_doorbell_suppressed_total",
		   "Notifies that found the consumer awake (no system call).",
		   1);
	prom_bells(f, s, all, "kvring_channel_doorbell_sleeps_total",
		   "Times the consumer blocked on the doorbell.", 2);
	fflush(f);
}

/* ==== --list ==== */

static const char *role_name(enum kvr_seg_role r)
{
	return r == KVR_SEG_ROLE_CTL	? "ctl"
	       : r == KVR_SEG_ROLE_POOL ? "pool"
					: "other";
}

static const char *seg_state_name(enum kvr_seg_state s)
{
	static const char *const n[] = {"unknown", "live", "stale", "orphan"};

	return (unsigned)s < 4 ? n[s] : "invalid";
}

struct list_ctx {
	struct em e;
	bool json;
	uint32_t n, stale;
};

/* Prints one segment (kvr_seg_list() callback); never fails. */
static int list_cb(void *arg, const struct kvr_seg_info *in)
{
	struct list_ctx *l = arg;
	char name[KVR_SEG_NAME_MAX + 1], abi[24] = "";

	copy_clean(name, sizeof(name), in->name, sizeof(in->name));
	if (in->has_hdr)
		snprintf(abi, sizeof(abi), "%u.%u", in->abi >> 16,
			 in->abi & 0xffffu);
	if (in->state == KVR_SEG_STATE_STALE ||
	    in->state == KVR_SEG_STATE_ORPHAN)
		l->stale++;
	if (!l->json) {
		/* One line per segment: grep by name or by state=stale. */
		printf("name=%s role=%s state=%s bytes=%" PRIu64
		       " owner_pid=%" PRId32 " uid=%u mode=%04o abi=%s\n",
		       name, role_name(in->role), seg_state_name(in->state),
		       in->bytes, in->owner_pid, (unsigned)in->uid,
		       (unsigned)in->mode & 07777, in->has_hdr ? abi : "-");
	} else {
		em_item(&l->e, l->n);
		em_str(&l->e, "name", name);
		em_str(&l->e, "role", role_name(in->role));
		em_str(&l->e, "state", seg_state_name(in->state));
		em_bool(&l->e, "stale",
			in->state == KVR_SEG_STATE_STALE ||
			    in->state == KVR_SEG_STATE_ORPHAN);
		em_u64(&l->e, "bytes", in->bytes);
		em_i64(&l->e, "owner_pid", in->owner_pid);
		em_u64(&l->e, "uid", (uint64_t)in->uid);
		em_u64(&l->e, "mode", (uint64_t)in->mode & 07777);
		em_bool(&l->e, "ready", in->ready);
		em_str(&l->e, "abi", abi);
		em_end(&l->e);
	}
	l->n++;
	return 0;
}

/*
 * --list: every kvring segment in the directory with its state, read by
 * kvr_seg_list() without mapping anything. Stale and orphan segments are
 * counted; deciding to remove them is kvringd's sweep's job, not ours.
 */
static int run_list(const struct opts *o)
{
	const char *dir = o->dir ? o->dir : KVR_SEG_DEFAULT_DIR;
	struct list_ctx l = {.json = o->json};
	int rc;

	if (o->json) {
		em_init(&l.e, stdout, true);
		em_u64(&l.e, "schema", SCHEMA);
		em_str(&l.e, "dir", dir);
		em_arr(&l.e, "segments");
	}
	rc = kvr_seg_list(dir, KVR_SEG_PREFIX, list_cb, &l);
	if (rc < 0) {
		if (o->json)
			putchar('\n');
		err("list %s: %s", dir, kvr_strerror(rc));
		return EXIT_RUNTIME;
	}
	if (o->json) {
		em_end(&l.e);
		em_u64(&l.e, "nr_segments", l.n);
		em_u64(&l.e, "nr_stale", l.stale);
		em_finish(&l.e);
	} else {
		printf("segments=%u stale=%u dir=%s\n", l.n, l.stale, dir);
	}
	return EXIT_OK;
}

/* ==== --dump: decode the records between head and tail ==== */

/*
 * Copies the ring at @mem into @buf with positions that describe only
 * records which were intact during the copy: the producer may overwrite a
 * byte only after the consumer released it, so every record at or after
 * the head read AFTER the copy was complete while we copied.
 * Return: kvr_ring_check()'s result for the live ring.
 */
static int ring_copy(const void *mem, uint32_t cap, unsigned char *buf,
		     struct kvr_ring_snapshot *snap)
{
	const struct kvr_ring_shm *live = mem;
	struct kvr_ring_shm *cp = (struct kvr_ring_shm *)buf;
	size_t bytes = kvr_ring_shm_bytes(cap);
	uint64_t h2 = 0;
	int rc = -EBUSY;

	for (int tries = 0; tries < 16; tries++) {
		rc = kvr_ring_check(mem, bytes, cap, snap);
		if (rc == -EINVAL || rc == -EPROTO || rc == -EBUSY)
			return rc;
		memcpy(buf, mem, bytes);
		/* A-INS2: acquire, pairs with the consumer's release of head
		 * (R2 in kvr_ring_release): bytes it released may be reused
		 * by the producer from here on, so later reads are suspect. */
		h2 = atomic_load_explicit(
		    (_Atomic uint64_t *)(uintptr_t)&live->head,
		    memory_order_acquire);
		if (h2 == snap->head)
			break;
	}
	if (h2 - snap->head > snap->tail - snap->head)
		return -EBUSY; /* the consumer passed our tail: too busy */
	snap->head = h2;
	snap->used_bytes = snap->tail - h2;
	/* Our private copy: point it at the intact window. */
	atomic_store_explicit(&cp->head, h2, memory_order_relaxed);
	atomic_store_explicit(&cp->tail, snap->tail, memory_order_relaxed);
	return rc;
}

/* A key as 32 hex digits, high half first. */
static void key_hex(char out[40], const struct kvr_key *k)
{
	snprintf(out, 40, "%016" PRIx64 "%016" PRIx64, k->hi, k->lo);
}

/* Decodes one record of the private copy and prints it. */
static void dump_rec(struct em *e, bool json, const char *ring, bool resp,
		     uint64_t off, const struct kvr_ring_rec *rec,
		     const struct snap *s, uint32_t nr)
{
	struct kvr_req_view rv;
	struct kvr_resp_hdr rh;
	const struct kvr_slot_desc *slots = NULL;
	uint32_t op = resp ? rec->type & ~KVR_RESP_BIT : rec->type;
	uint32_t max_keys = s->max_keys && s->max_keys < KVR_MAX_KEYS_LIMIT
				? s->max_keys
				: KVR_MAX_KEYS_LIMIT;
	char key[40];
	int rc;

	rc = resp
		 ? kvr_resp_parse(rec->type, rec->data, rec->len, s->pool_bytes,
				  &rh, &slots)
		 : kvr_req_parse(rec->type, rec->data, rec->len, max_keys, &rv);
	if (json) {
		em_item(e, nr);
		em_u64(e, "offset", off);
		em_u64(e, "type", rec->type);
		em_str(e, "op", kvr_op_name(op));
		em_u64(e, "len", rec->len);
		em_bool(e, "valid", rc == 0);
		if (rc < 0)
			em_str(e, "error", kvr_strerror(rc));
	} else {
		printf("ring=%s offset=%" PRIu64 " type=0x%x op=%s len=%u",
		       ring, off, rec->type, kvr_op_name(op), rec->len);
		if (rc < 0)
			printf(" valid=false error=\"%s\"\n", kvr_strerror(rc));
	}
	if (rc < 0) {
		if (json)
			em_end(e);
		return;
	}
	if (!resp) {
		if (json) {
			em_u64(e, "req_id", rv.hdr.req_id);
			em_u64(e, "handle", rv.hdr.handle);
			em_u64(e, "count", rv.hdr.count);
			em_u64(e, "flags", rv.hdr.flags);
		} else {
			printf(" req_id=%" PRIu64 " handle=%" PRIu64
			       " count=%u flags=0x%x",
			       rv.hdr.req_id, rv.hdr.handle, rv.hdr.count,
			       rv.hdr.flags);
		}
		if (rv.hdr.count > 0) {
			struct kvr_key k0;

			memcpy(&k0, rv.keys, sizeof(k0));
			key_hex(key, &k0);
			if (json)
				em_str(e, "first_key", key);
			else
				printf(" first_key=%s", key);
		}
		if (json)
			em_end(e);
		else
			putchar('\n');
		return;
	}
	if (json) {
		em_u64(e, "req_id", rh.req_id);
		em_u64(e, "handle", rh.handle);
		em_i64(e, "status", rh.status);
		em_str(e, "status_name",
		       kvr_err_slot_name(kvr_err_slot(rh.status)));
		em_u64(e, "count", rh.count);
		em_u64(e, "value", rh.value);
		em_arr(e, "slots");
	} else {
		printf(" req_id=%" PRIu64 " handle=%" PRIu64
		       " status=%d status_name=%s count=%u value=%" PRIu64 "\n",
		       rh.req_id, rh.handle, rh.status,
		       kvr_err_slot_name(kvr_err_slot(rh.status)), rh.count,
		       rh.value);
	}
	for (uint32_t i = 0; i < rh.count; i++) {
		struct kvr_slot_desc sd;

		memcpy(&sd, &slots[i], sizeof(sd));
		if (json) {
			em_item(e, i);
			em_u64(e, "off", sd.off);
			em_u64(e, "len", sd.len);
			em_str(e, "status", slot_status_name(sd.status));
			em_end(e);
		} else {
			printf("ring=%s offset=%" PRIu64 " slot=%u off=%" PRIu64
			       " len=%" PRIu64 " status=%s\n",
			       ring, off, i, sd.off, sd.len,
			       slot_status_name(sd.status));
		}
	}
	if (json) {
		em_end(e);
		em_end(e);
	}
}

/* Dumps one ring. Return: 0, or the ring's error (printed). */
static int dump_ring(struct em *e, bool json, const char *name, bool resp,
		     const void *mem, uint32_t cap, const struct snap *s)
{
	size_t bytes = kvr_ring_shm_bytes(cap);
	unsigned char *buf = aligned_alloc(128, (bytes + 127) / 128 * 128);
	struct kvr_ring_snapshot snap;
	struct kvr_ring_rec rec;
	struct kvr_ring r;
	uint32_t nr = 0;
	int rc, prc = 0;

	if (!buf) {
		err("dump: out of memory");
		return -ENOMEM;
	}
	memset(&snap, 0, sizeof(snap));
	bus_armed = 1;
	if (sigsetjmp(bus_jmp, 1)) {
		bus_armed = 0;
		free(buf);
		err("dump: SIGBUS reading the ring (file truncated)");
		return -EFAULT;
	}
	rc = ring_copy(mem, cap, buf, &snap);
	bus_armed = 0;
	if (json) {
		em_obj(e, resp ? "resp_ring" : "req_ring");
		em_u64(e, "capacity", cap);
		em_u64(e, "head", snap.head);
		em_u64(e, "tail", snap.tail);
		em_u64(e, "used_bytes", snap.used_bytes);
		em_u64(e, "ring_high_water", snap.high_water);
		em_str(e, "check", rc == 0 ? "ok" : kvr_strerror(rc));
		em_arr(e, "records");
	} else {
		printf("ring=%s capacity=%u head=%" PRIu64 " tail=%" PRIu64
		       " used_bytes=%" PRIu64 " check=\"%s\"\n",
		       name, cap, snap.head, snap.tail, snap.used_bytes,
		       rc == 0 ? "ok" : kvr_strerror(rc));
	}
	/* Walk the private copy with the ring's own consumer code; a damaged
	 * ring is walked up to the first bad record. */
	if (rc != -EINVAL && rc != -EPROTO && rc != -EBUSY)
		prc = kvr_ring_attach_consumer(&r, buf, bytes, cap);
	else
		prc = rc;
	while (prc == 0) {
		prc = kvr_ring_peek(&r, &rec);
		if (prc < 0)
			break;
		dump_rec(e, json, name, resp,
			 (uint64_t)((const unsigned char *)rec.data - r.data -
				    KVR_RING_HDR_BYTES),
			 &rec, s, nr++);
	}
	if (prc == -EAGAIN)
		prc = 0;
	if (json) {
		em_end(e);
		em_u64(e, "nr_records", nr);
		if (prc < 0)
			em_str(e, "walk_error", kvr_strerror(prc));
		em_end(e);
	} else if (prc < 0) {
		printf("ring=%s walk_error=\"%s\"\n", name, kvr_strerror(prc));
	}
	free(buf);
	return rc < 0 ? rc : prc;
}

/* --dump CHANNEL: a header line, then both rings. A damaged ring is shown
 * up to its first bad record and is not an error here (--check is). */
static int run_dump(const struct opts *o, const struct attach *a,
		    const struct snap *s)
{
	const struct chan_snap *c = &s->ch[o->dump_channel];
	const char *base =
	    (const char *)kvr_ctl_channel(a->h, &a->g, o->dump_channel);
	struct em e;
	int rc1, rc2;

	em_init(&e, stdout, o->json);
	if (o->json) {
		em_u64(&e, "schema", SCHEMA);
		em_u64(&e, "channel", c->idx);
		em_str(&e, "state", chan_state_name(c->state));
		em_i64(&e, "pid", c->pid);
		em_bool(&e, "pid_alive", c->alive);
	} else {
		printf("channel=%u state=%s pid=%d pid_alive=%s\n", c->idx,
		       chan_state_name(c->state), c->pid,
		       c->alive ? "true" : "false");
	}
	rc1 = dump_ring(&e, o->json, "req", false, base + a->g.req_ring_off,
			a->g.req_ring_cap, s);
	rc2 = dump_ring(&e, o->json, "resp", true, base + a->g.resp_ring_off,
			a->g.resp_ring_cap, s);
	if (o->json)
		em_finish(&e);
	return rc1 == -EFAULT || rc2 == -EFAULT || rc1 == -ENOMEM ? EXIT_RUNTIME
								  : EXIT_OK;
}

/* ==== --check ==== */

struct viol {
	char code[64];
	char msg[320];
};

struct vlist {
	int n;
	struct viol v[MAX_VIOL];
};

/* Records one violation; @code identifies it across snapshots. */
static void __attribute__((format(printf, 3, 4)))
viol(struct vlist *l, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (l->n >= MAX_VIOL)
		return;
	snprintf(l->v[l->n].code, sizeof(l->v[l->n].code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(l->v[l->n].msg, sizeof(l->v[l->n].msg), fmt, ap);
	va_end(ap);
	l->n++;
}

/* A ring's invariants: kvr_ring_check() passed, high-water marks within
 * capacity, and positions not behind @base (an earlier snapshot of the same
 * claim), since head and tail only ever grow. */
static void check_ring(struct vlist *l, const struct chan_snap *c,
		       const char *name, const struct ring_snap *r,
		       const struct ring_snap *base)
{
	char code[64];

	snprintf(code, sizeof(code), "ring:%u:%s", c->idx, name);
	if (r->rc == -EBUSY)
		return; /* positions kept moving: busy, not damaged */
	if (r->rc < 0)
		viol(l, code,
		     "channel %u %s: %s (head %" PRIu64 ", tail %" PRIu64
		     ", capacity %u, bad record at %" PRIu64 ")",
		     c->idx, name, kvr_strerror(r->rc), r->s.head, r->s.tail,
		     r->cap, r->s.bad_pos);
	if (r->rc == 0 && r->s.high_water > r->cap)
		viol(l, code,
		     "channel %u %s: ring high water %" PRIu64
		     " exceeds capacity %u",
		     c->idx, name, r->s.high_water, r->cap);
	if (r->server_high_water > r->cap)
		viol(l, code,
		     "channel %u %s: server high water %" PRIu64
		     " exceeds capacity %u",
		     c->idx, name, r->server_high_water, r->cap);
	/* Monotonic: against the first snapshot of the same claim. */
	if (base && base->rc == 0 && r->rc == 0 &&
	    (r->s.head < base->s.head || r->s.tail < base->s.tail))
		viol(l, code,
		     "channel %u %s: positions went backwards: head %" PRIu64
		     " -> %" PRIu64 ", tail %" PRIu64 " -> %" PRIu64,
		     c->idx, name, base->s.head, r->s.head, base->s.tail,
		     r->s.tail);
}

/*
 * Every invariant the control segment must satisfy. @base is an earlier
 * snapshot (positions must not go backwards between the two).
 */
static void check_snap(const struct attach *a, const struct snap *s,
		       const struct snap *base, struct vlist *l)
{
	uint64_t sum_res = 0, sum_pins = 0, sum_leases = 0, sum_xfer = 0;
	uint32_t active = 0, in_use = 0;
	uint64_t hb_age = age_ns(s->mono_ns, s->heartbeat_ns) / 1000000;
	uint64_t hb_max = s->heartbeat_ms * 10ull;

	if (!s->alive)
		viol(l, "server_dead",
		     "server pid %d is not alive: the segment is stale",
		     s->pid);
	if (s->state > KVR_SERVER_STOPPING)
		viol(l, "server_state", "server state %u is invalid", s->state);
	if (s->backend < KVR_POOL_SHM || s->backend > KVR_POOL_PRIVATE)
		viol(l, "pool_backend", "pool backend %u is invalid",
		     s->backend);
	if (hb_max < 3000)
		hb_max = 3000;
	if (s->alive && s->state == KVR_SERVER_RUNNING && hb_age > hb_max)
		viol(l, "heartbeat",
		     "heartbeat is %" PRIu64 " ms old, period %u ms: the "
		     "server loop is stuck",
		     hb_age, s->heartbeat_ms);
	if (s->used > s->pool_bytes)
		viol(l, "used_le_pool",
		     "used bytes %" PRIu64 " exceed the pool's %" PRIu64,
		     s->used, s->pool_bytes);
	if (s->reserved > s->used)
		viol(l, "reserved_le_used",
		     "reserved bytes %" PRIu64 " exceed used bytes %" PRIu64,
		     s->reserved, s->used);
	if (s->committed + s->reserved != s->used)
		viol(l, "used_sum",
		     "used bytes %" PRIu64 " != committed %" PRIu64
		     " + reserved %" PRIu64,
		     s->used, s->committed, s->reserved);
	if (s->pinned_bytes > s->committed)
		viol(l, "pinned_le_committed",
		     "pinned bytes %" PRIu64 " exceed committed bytes %" PRIu64,
		     s->pinned_bytes, s->committed);
	if ((s->objects == 0) != (s->committed == 0))
		viol(l, "objects_bytes",
		     "%" PRIu64 " objects but %" PRIu64 " committed bytes",
		     s->objects, s->committed);
	if (s->frag_ppm > 1000000)
		viol(l, "fragmentation",
		     "fragmentation %" PRIu64 " ppm exceeds 1000000",
		     s->frag_ppm);
	if (s->largest_free >
	    s->pool_bytes -
		(s->used <= s->pool_bytes ? s->used : s->pool_bytes))
		viol(l, "largest_free",
		     "largest free extent %" PRIu64 " exceeds free bytes",
		     s->largest_free);
	if (!a->geom_ok) {
		viol(l, "geometry", "%s", a->geom_err);
		return;
	}
	for (uint32_t i = 0; i < s->nchan; i++) {
		const struct chan_snap *c = &s->ch[i];
		const struct chan_snap *bc =
		    base && base->ch[i].generation == c->generation
			? &base->ch[i]
			: NULL;
		char code[64];

		snprintf(code, sizeof(code), "chan:%u", i);
		if (c->state > KVR_CHAN_CLOSING) {
			viol(l, code, "channel %u: state %u is invalid", i,
			     c->state);
			continue;
		}
		if (c->state == KVR_CHAN_FREE) {
			if (c->reserved_bytes || c->pins || c->leases ||
			    c->transfers)
				viol(l, code,
				     "channel %u is free but holds %" PRIu64
				     " reserved bytes, %" PRIu64
				     " pins, %" PRIu64 " leases, %" PRIu64
				     " transfers (leak)",
				     i, c->reserved_bytes, c->pins, c->leases,
				     c->transfers);
			continue;
		}
		in_use++;
		active += c->state == KVR_CHAN_ACTIVE;
		if (c->transport < KVR_TRANSPORT_SHM ||
		    c->transport > KVR_TRANSPORT_COPY)
			viol(l, code, "channel %u: transport %u is invalid", i,
			     c->transport);
		if (c->req_ring_off != a->g.req_ring_off ||
		    c->resp_ring_off != a->g.resp_ring_off)
			viol(l, code,
			     "channel %u: ring offsets %u/%u, expected %u/%u",
			     i, c->req_ring_off, c->resp_ring_off,
			     a->g.req_ring_off, a->g.resp_ring_off);
		if (c->req_bell.sleeping > 1 || c->resp_bell.sleeping > 1)
			viol(l, code,
			     "channel %u: doorbell sleeping flags %u/%u are "
			     "not 0 or 1",
			     i, c->req_bell.sleeping, c->resp_bell.sleeping);
		check_ring(l, c, "req_ring", &c->req, bc ? &bc->req : NULL);
		check_ring(l, c, "resp_ring", &c->resp, bc ? &bc->resp : NULL);
		sum_res += c->reserved_bytes;
		sum_pins += c->pins;
		sum_leases += c->leases;
		sum_xfer += c->transfers;
	}
	/* workers counts channels in use; a claim or a cleanup in progress
	 * may or may not be counted yet, so accept the range. */
	if (s->workers < active || s->workers > in_use)
		viol(l, "workers",
		     "workers %" PRIu64 " but %u channels active and %u in "
		     "use",
		     s->workers, active, in_use);
	if (sum_res > s->reserved)
		viol(l, "sum_reserved",
		     "channels hold %" PRIu64
		     " reserved bytes, global %" PRIu64,
		     sum_res, s->reserved);
	if (sum_pins > s->pins)
		viol(l, "sum_pins",
		     "channels hold %" PRIu64 " pins, global %" PRIu64,
		     sum_pins, s->pins);
	if (sum_leases > s->leases)
		viol(l, "sum_leases",
		     "channels hold %" PRIu64 " leases, global %" PRIu64,
		     sum_leases, s->leases);
	if (sum_xfer > s->transfers)
		viol(l, "sum_transfers",
		     "channels hold %" PRIu64 " transfers, global %" PRIu64,
		     sum_xfer, s->transfers);
}

/* Keeps in @cur only the violations whose code is also in @prev. */
static void viol_intersect(struct vlist *cur, const struct vlist *prev)
{
	int n = 0;

	for (int i = 0; i < cur->n; i++) {
		bool keep = false;

		for (int j = 0; j < prev->n && !keep; j++)
			keep = strcmp(cur->v[i].code, prev->v[j].code) == 0;
		if (keep)
			cur->v[n++] = cur->v[i];
	}
	cur->n = n;
}

/*
 * Counters are single values read one by one from a server that keeps
 * running, so a sum or a difference can be off for an instant. A
 * violation is reported only if it is seen in every one of up to five
 * snapshots taken 20 ms apart; a corrupted segment shows it every time.
 */
static int run_check(const struct opts *o, const struct attach *a,
		     struct snap *s, struct snap *base)
{
	struct vlist *cur = calloc(2, sizeof(*cur)), *prev = cur + 1;
	struct em e;
	int rc;

	if (!cur) {
		err("check: out of memory");
		return EXIT_RUNTIME;
	}
	if (snap_take(a, base) < 0)
		goto fault;
	for (int i = 0; i < 5; i++) {
		sleep_ms(20);
		if (snap_take(a, s) < 0)
			goto fault;
		*prev = *cur;
		cur->n = 0;
		check_snap(a, s, base, cur);
		if (i > 0)
			viol_intersect(cur, prev);
		if (cur->n == 0)
			break;
	}
	em_init(&e, stdout, o->json);
	if (o->json) {
		em_u64(&e, "schema", SCHEMA);
		em_bool(&e, "ok", cur->n == 0);
		em_arr(&e, "violations");
		for (int i = 0; i < cur->n; i++) {
			em_item(&e, (uint32_t)i);
			em_str(&e, "code", cur->v[i].code);
			em_str(&e, "message", cur->v[i].msg);
			em_end(&e);
		}
		em_end(&e);
		em_finish(&e);
	} else {
		for (int i = 0; i < cur->n; i++)
			printf("violation=%s message=\"%s\"\n", cur->v[i].code,
			       cur->v[i].msg);
		if (cur->n)
			printf("check=failed violations=%d\n", cur->n);
		else
			printf("check=ok\n");
	}
	rc = cur->n ? EXIT_CHECK : EXIT_OK;
	free(cur);
	return rc;
fault:
	free(cur);
	return EXIT_RUNTIME;
}

/* ==== --watch ==== */

/* Room for one snapshot's channels, sized from the validated geometry. */
static struct chan_snap *chan_alloc(const struct attach *a)
{
	return calloc(a->geom_ok ? a->g.max_channels : 1,
		      sizeof(struct chan_snap));
}

/*
 * Redraws the overview every watch_ms until SIGINT (exit 0) or --count
 * frames. Each frame first looks at the file name: if it now names
 * another file, the server restarted (re-attach and say so; rates start
 * over); if it is gone, the server stopped (say so once, keep showing the
 * old mapping, which stays valid, until a new segment appears).
 */
static int run_watch(const struct opts *o, const struct target *t,
		     struct attach *a)
{
	struct snap sn[2] = {0};
	struct snap *cur = &sn[0], *prev = NULL;
	bool tty = isatty(STDOUT_FILENO), gone = false;
	int rc = EXIT_OK;

	sn[0].ch = chan_alloc(a);
	sn[1].ch = chan_alloc(a);
	if (!sn[0].ch || !sn[1].ch) {
		err("out of memory");
		rc = EXIT_RUNTIME;
		goto out;
	}
	for (long frame = 0; !stop_flag; frame++) {
		struct stat st;

		if (stat(t->path, &st) < 0) {
			if (!gone)
				err("segment %s removed: the server stopped; "
				    "waiting for it to come back",
				    t->path);
			gone = true;
		} else if (st.st_ino != a->ino || st.st_dev != a->dev) {
			struct attach na;
			struct kvr_err e = {0};
			struct chan_snap *c0, *c1;

			if (at_open(t, &na, &e) == 0 && na.geom_ok &&
			    (c0 = chan_alloc(&na)) && (c1 = chan_alloc(&na))) {
				char ob[33], nb[33];

				hex16(ob, a->h->seg.boot_id);
				hex16(nb, na.h->seg.boot_id);
				err("server restarted: pid %d -> %d, boot id "
				    "%s -> %s",
				    cur->pid, na.h->seg.creator_pid, ob, nb);
				at_close(a);
				*a = na;
				free(sn[0].ch);
				free(sn[1].ch);
				sn[0].ch = c0;
				sn[1].ch = c1;
				prev = NULL;
				cur = &sn[0];
				gone = false;
			} else if (na.h) {
				at_close(&na);
			}
		}
		if (snap_take(a, cur) < 0) {
			rc = EXIT_RUNTIME;
			break;
		}
		if (tty && !o->json)
			fputs("\033[H\033[2J", stdout);
		emit_overview(stdout, o->json, o->all, t, cur, prev);
		prev = cur;
		cur = cur == &sn[0] ? &sn[1] : &sn[0];
		if (o->count > 0 && frame + 1 >= o->count)
			break;
		sleep_ms(o->watch_ms);
	}
out:
	free(sn[0].ch);
	free(sn[1].ch);
	return rc;
}

/* ==== main ==== */

/* A decimal uint32; rejects signs, garbage and overflow. */
static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > UINT32_MAX || s[0] == '-')
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* A usage error: one line naming the problem, a hint, exit status 2. */
static int usage_err(const char *fmt, const char *arg)
{
	fputs(PROG ": ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry '" PROG " --help'.\n", stderr);
	return EXIT_USAGE;
}

/*
 * Fills @o. Return: -1 to go on, or an exit status (help and version print
 * and exit 0 directly; usage errors return 2). Modes exclude each other;
 * --watch refreshes only the overview.
 */
static int parse_args(int argc, char **argv, struct opts *o)
{
	int c, modes = 0;

	memset(o, 0, sizeof(*o));
	o->watch_ms = 1000;
	while ((c = getopt_long(argc, argv, "n:s:d:ajw::pD:lChV", longopts,
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
			o->mode = MODE_PROM;
			modes++;
			break;
		case 'l':
			o->mode = MODE_LIST;
			modes++;
			break;
		case 'D':
			if (parse_u32(optarg, &o->dump_channel) < 0)
				return usage_err("--dump: bad channel \"%s\"",
						 optarg);
			o->mode = MODE_DUMP;
			modes++;
			break;
		case 'C':
			o->mode = MODE_CHECK;
			modes++;
			break;
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		case 'V':
			printf(PROG " %s (segment abi %d.%d, layout hash "
				    "0x%016" PRIx64 ", json schema %d)\n",
			       KVR_VERSION, KVR_ABI_MAJOR, KVR_ABI_MINOR,
			       kvr_layout_hash(), SCHEMA);
			exit(EXIT_OK);
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return usage_err("unexpected argument \"%s\"", argv[optind]);
	if (modes > 1)
		return usage_err("%s", "--prometheus, --list, --dump and "
				       "--check exclude each other");
	if (o->name && o->socket)
		return usage_err("%s",
				 "--name and --socket exclude each other");
	if (o->watch && o->mode != MODE_OVERVIEW)
		return usage_err("%s", "--watch only refreshes the overview");
	if (o->count && !o->watch)
		return usage_err("%s", "--count needs --watch");
	if (o->json && o->mode == MODE_PROM)
		return usage_err("%s", "--json and --prometheus exclude each "
				       "other");
	if (o->mode == MODE_LIST && (o->name || o->socket))
		return usage_err("%s", "--list takes --dir, not a server");
	return -1; /* go on */
}

/*
 * Parse, resolve the target (--name, --socket or the uid's default), attach
 * read-only, take a snapshot and render it in the chosen mode. Attach
 * failures are exit 1; --check's verdict is 0 or 3.
 */
int main(int argc, char **argv)
{
	struct snap s = {0}, base = {0};
	struct kvr_err e = {0};
	struct attach a;
	struct target t;
	struct opts o;
	int rc;

	rc = parse_args(argc, argv, &o);
	if (rc >= 0)
		return rc;
	install_handlers();
	if (o.mode == MODE_LIST)
		return run_list(&o);

	if (o.name) {
		if (target_from_name(&t, o.dir, o.name) < 0)
			return EXIT_USAGE;
	} else if (o.socket) {
		if (target_from_socket(&t, o.dir, o.socket) < 0)
			return EXIT_RUNTIME;
	} else {
		char base_name[64], ctl[KVR_SEG_NAME_MAX + 1];

		if (kvr_seg_default_base(base_name, sizeof(base_name)) < 0 ||
		    kvr_seg_ctl_name(base_name, ctl, sizeof(ctl)) < 0) {
			err("cannot compute the default segment name");
			return EXIT_RUNTIME;
		}
		set_target(&t, o.dir, ctl);
	}

	rc = at_open(&t, &a, &e);
	if (rc == -ENOENT) {
		err("no server: %s does not exist (is kvringd running? try "
		    "--list, --name or --socket)",
		    t.path);
		return EXIT_RUNTIME;
	}
	if (rc < 0) {
		err("attach %s: %s (this " PROG " reads abi %d.%d)", t.path,
		    kvr_err_str(&e, rc), KVR_ABI_MAJOR, KVR_ABI_MINOR);
		return EXIT_RUNTIME;
	}
	if (!a.geom_ok && o.mode != MODE_CHECK) {
		err("attach %s: %s", t.path, a.geom_err);
		at_close(&a);
		return EXIT_RUNTIME;
	}
	if (o.mode == MODE_DUMP && o.dump_channel >= a.g.max_channels) {
		err("--dump: channel %u out of range (the server has %u)",
		    o.dump_channel, a.g.max_channels);
		at_close(&a);
		return EXIT_USAGE;
	}
	if (o.watch) {
		rc = run_watch(&o, &t, &a);
		at_close(&a);
		return rc;
	}
	s.ch = chan_alloc(&a);
	base.ch = chan_alloc(&a);
	if (!s.ch || !base.ch) {
		err("out of memory");
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (o.mode == MODE_CHECK) {
		rc = run_check(&o, &a, &s, &base);
		goto out;
	}
	if (snap_take(&a, &s) < 0) {
		rc = EXIT_RUNTIME;
		goto out;
	}
	rc = EXIT_OK;
	if (o.mode == MODE_PROM)
		emit_prometheus(stdout, o.all, &t, &s);
	else if (o.mode == MODE_DUMP)
		rc = run_dump(&o, &a, &s);
	else
		emit_overview(stdout, o.json, o.all, &t, &s, NULL);
out:
	free(s.ch);
	free(base.ch);
	at_close(&a);
	return rc;
}
