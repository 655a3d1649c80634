/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of kvring-inspect, run as the built binary
 * (KVR_BIN_DIR/tools/kvring-inspect) with its stdout, stderr and exit
 * status captured. Two kinds of targets:
 *  - fake control segments this file formats itself with the library
 *    (kvr_ctl_geom_compute, kvr_seg_hdr_format, kvr_ring_format): every
 *    value is known, and corrupting one never touches a real server;
 *  - a real kvringd with real workers (suite inspect_live), when the
 *    server binary and tests/support/t_server.h exist.
 * JSON goes through a real parser (python3's json module, via
 * tests/support/t_json.h) and values are looked up by path, never by
 * scanning the text; Prometheus text goes through the validator below and,
 * when it is installed, through promtool check metrics (t_prom.h).
 * This file does not test the ring or the segment code themselves.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <limits.h>

#include <kvring/clock.h>
#include <kvring/doorbell.h>
#include <kvring/layout.h>
#include <kvring/proc.h>
#include <kvring/proto.h>
#include <kvring/ring.h>
#include <kvring/segment.h>

#include "t_json.h"
#include "t_prom.h"

#define TOOL KVR_BIN_DIR "/tools/kvring-inspect"

/* ==== Running the tool ==== */

/* What one run produced; owned by the test, freed by run_free(). */
struct run {
	char *out, *err;
	int status; /* exit code, or 128 + signal */
};

static char *read_all(int fd)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	ssize_t r;

	cr_assert(buf);
	while ((r = read(fd, buf + n, cap - n - 1)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		n += (size_t)r;
		if (cap - n < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert(buf);
		}
	}
	buf[n] = '\0';
	return buf;
}

/* When not 0, spawn() runs the tool as this uid and gid (root only). */
static uid_t spawn_uid;

/* Starts the tool with argv (NULL-terminated, argv[0] excluded); the
 * child's stdout/stderr are pipes returned in *out_fd and *err_fd. */
static pid_t spawn(char *const args[], int *out_fd, int *err_fd)
{
	char *argv[32];
	int po[2], pe[2], n = 0;
	pid_t pid;

	argv[n++] = (char *)TOOL;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	cr_assert_eq(pipe(po), 0);
	cr_assert_eq(pipe(pe), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		close(po[1]);
		close(pe[1]);
		if (spawn_uid &&
		    (setgroups(0, NULL) < 0 || setgid((gid_t)spawn_uid) < 0 ||
		     setuid(spawn_uid) < 0))
			_exit(126);
		execv(TOOL, argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	*out_fd = po[0];
	*err_fd = pe[0];
	return pid;
}

static int wait_status(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		cr_assert_eq(errno, EINTR);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static struct run run_v(char *const args[])
{
	struct run r;
	int of, ef;
	pid_t pid = spawn(args, &of, &ef);

	/* stderr is small: read stdout fully first, then stderr. A pipe
	 * buffer (64 KiB) holds any stderr this tool writes. */
	r.out = read_all(of);
	r.err = read_all(ef);
	close(of);
	close(ef);
	r.status = wait_status(pid);
	return r;
}

#define RUN(...) run_v((char *const[]){__VA_ARGS__, NULL})

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* ==== JSON, through a real parser ==== */

/* Parse @text; the test fails (with python's reason) when it is invalid. */
static struct t_json *jparse(const char *text)
{
	char why[256] = "";
	struct t_json *j = t_json_parse(text, why, sizeof(why));

	cr_assert(j, "invalid JSON (%s): %.2000s", why, text);
	return j;
}

/* The same for a run's stdout; the failure shows its exit status and
 * stderr too (an inspector that died prints nothing on stdout). */
static struct t_json *jparse_run(const struct run *r)
{
	char why[256] = "";
	struct t_json *j = t_json_parse(r->out, why, sizeof(why));

	cr_assert(j, "invalid JSON (%s), exit %d: %.2000s\nstderr: %.2000s",
		  why, r->status, r->out, r->err);
	return j;
}

/* The integer at @path, LLONG_MIN when absent (never a real value). */
#define JN(j, path) t_json_int((j), (path), LLONG_MIN)

/* The string at @path, "" when absent. */
static const char *JS(const struct t_json *j, const char *path)
{
	const char *v = t_json_str(j, path);

	return v ? v : "";
}

/* Whether --check --json reported a violation whose code starts with
 * @prefix ("ring:1:req_ring"). */
static bool jviolation(const struct t_json *j, const char *prefix)
{
	char p[64];

	for (long i = 0; i < t_json_count(j, "violations"); i++) {
		snprintf(p, sizeof(p), "violations.%ld.code", i);
		if (!strncmp(JS(j, p), prefix, strlen(prefix)))
			return true;
	}
	return false;
}

/* Prometheus text through promtool too, when it is installed. */
static void expect_promtool_ok(const char *text)
{
	char out[4096];
	int rc = t_promtool_check(text, out, sizeof(out));

	if (rc >= 0)
		cr_expect_eq(rc, 0, "promtool check metrics: %s", out);
}

static bool prom_name_ok(const char *s, size_t n)
{
	if (n == 0 ||
	    !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' ||
		      s[i] == ':'))
			return false;
	return true;
}

struct prom_seen {
	char name[128];
	bool typed, sampled, closed;
};

/*
 * Validates exposition text: every sample line is name{labels} value,
 * names and label names valid, label values properly escaped, the value
 * a number; exactly one TYPE per metric name, before its samples; the
 * samples of one metric contiguous. Returns the number of samples, or
 * -1 with *why set.
 */
static int prom_validate(const char *text, char *why, size_t whyn)
{
	static struct prom_seen seen[512];
	int nseen = 0, samples = 0, last = -1, lineno = 0;
	const char *line = text;

	memset(seen, 0, sizeof(seen));
	while (*line) {
		const char *end = strchr(line, '\n');
		char buf[1024];
		size_t len;

		lineno++;
		if (!end) {
			snprintf(why, whyn, "line %d: no final newline",
				 lineno);
			return -1;
		}
		len = (size_t)(end - line);
		if (len >= sizeof(buf)) {
			snprintf(why, whyn, "line %d too long", lineno);
			return -1;
		}
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = end + 1;
		if (len == 0)
			continue;
		if (buf[0] == '#') {
			char kw[8], name[128], rest[512] = "";
			int idx = -1;

			if (sscanf(buf, "# %7s %127s %511[^\n]", kw, name,
				   rest) < 2 ||
			    (strcmp(kw, "HELP") && strcmp(kw, "TYPE")))
				continue; /* a plain comment */
			if (!prom_name_ok(name, strlen(name))) {
				snprintf(why, whyn, "line %d: bad name %s",
					 lineno, name);
				return -1;
			}
			for (int i = 0; i < nseen; i++)
				if (!strcmp(seen[i].name, name))
					idx = i;
			if (idx < 0) {
				idx = nseen++;
				snprintf(seen[idx].name, sizeof(seen[idx].name),
					 "%s", name);
			}
			if (!strcmp(kw, "TYPE")) {
				if (seen[idx].typed) {
					snprintf(why, whyn,
						 "line %d: second TYPE for %s",
						 lineno, name);
					return -1;
				}
				if (seen[idx].sampled) {
					snprintf(why, whyn,
						 "line %d: TYPE after samples "
						 "of %s",
						 lineno, name);
					return -1;
				}
				if (strcmp(rest, "counter") &&
				    strcmp(rest, "gauge") &&
				    strcmp(rest, "untyped") &&
				    strcmp(rest, "summary") &&
				    strcmp(rest, "histogram")) {
					snprintf(why, whyn,
						 "line %d: bad type \"%s\"",
						 lineno, rest);
					return -1;
				}
				seen[idx].typed = true;
			}
			continue;
		}
		/* A sample: name, optional {labels}, value. */
		{
			const char *p = buf;
			char *vend;
			size_t n = strcspn(p, "{ ");
			int idx = -1;

			if (!prom_name_ok(p, n)) {
				snprintf(why, whyn, "line %d: bad metric name",
					 lineno);
				return -1;
			}
			for (int i = 0; i < nseen; i++)
				if (strlen(seen[i].name) == n &&
				    !strncmp(seen[i].name, p, n))
					idx = i;
			/* A histogram's samples are <name>_bucket, _sum and
			 * _count of its family. */
			for (int i = 0; idx < 0 && i < nseen; i++) {
				size_t fl = strlen(seen[i].name);

				const char *sfx = p + fl;

				if (fl < n && !strncmp(seen[i].name, p, fl) &&
				    ((n - fl == 7 &&
				      !strncmp(sfx, "_bucket", 7)) ||
				     (n - fl == 4 &&
				      !strncmp(sfx, "_sum", 4)) ||
				     (n - fl == 6 &&
				      !strncmp(sfx, "_count", 6))))
					idx = i;
			}
			if (idx < 0 || !seen[idx].typed) {
				snprintf(why, whyn,
					 "line %d: sample without TYPE: %.100s",
					 lineno, buf);
				return -1;
			}
			if (seen[idx].closed) {
				snprintf(why, whyn,
					 "line %d: samples of %s not "
					 "contiguous",
					 lineno, seen[idx].name);
				return -1;
			}
			if (last >= 0 && last != idx)
				seen[last].closed = true;
			last = idx;
			seen[idx].sampled = true;
			p += n;
			if (*p == '{') {
				p++;
				while (*p != '}') {
					size_t ln = strcspn(p, "=");

					if (!prom_name_ok(p, ln) ||
					    strchr(p, '=') == NULL ||
					    p[ln + 1] != '"') {
						snprintf(why, whyn,
							 "line %d: bad label",
							 lineno);
						return -1;
					}
					p += ln + 2;
					while (*p && *p != '"') {
						if (*p == '\\') {
							p++;
							if (*p != '\\' &&
							    *p != '"' &&
							    *p != 'n') {
								snprintf(
								    why, whyn,
								    "line %d: "
								    "bad "
								    "escape",
								    lineno);
								return -1;
							}
						}
						p++;
					}
					if (*p != '"') {
						snprintf(why, whyn,
							 "line %d: open label",
							 lineno);
						return -1;
					}
					p++;
					if (*p == ',')
						p++;
					else if (*p != '}') {
						snprintf(why, whyn,
							 "line %d: bad label "
							 "list",
							 lineno);
						return -1;
					}
				}
				p++;
			}
			if (*p != ' ') {
				snprintf(why, whyn, "line %d: no value",
					 lineno);
				return -1;
			}
			p++;
			strtod(p, &vend);
			if (vend == p || (*vend && *vend != ' ')) {
				snprintf(why, whyn,
					 "line %d: bad value \"%.60s\"", lineno,
					 p);
				return -1;
			}
			samples++;
		}
	}
	return samples;
}

/* ==== Fake control segments ==== */

static char tmpdir[64];
/* First byte of the boot id fake_create() writes (a "new server" differs). */
static uint8_t fake_boot0 = 0xb0;

/* A control segment formatted by this process (its creator), mapped
 * read-write here so that tests can change or corrupt it. */
struct fake {
	struct kvr_seg seg;
	struct kvr_seg blk[4]; /* FAKE_CHANNELS blocks: memfds held here */
	struct kvr_seg dir;    /* the channel directory, a memfd too */
	struct kvr_ctl_hdr_shm *h;
	struct kvr_ctl_geom g;
	char name[64];
	char path[256];
};

#define FAKE_CHANNELS 4
#define FAKE_RING     4096u
#define FAKE_POOL     (1u << 20)

/* abi 3.0: each channel's block is a memfd its creator (this process)
 * holds; the inspector opens it through /proc/<pid>/fd. */
static struct kvr_channel_shm *fake_chan(struct fake *f, uint32_t i)
{
	return f->blk[i].base;
}

static void *fake_ring(struct fake *f, uint32_t i, bool resp)
{
	return (char *)fake_chan(f, i) +
	       (resp ? f->g.resp_ring_off : f->g.req_ring_off);
}

static void ring_put(void *mem, uint32_t type, const void *rec, uint32_t len)
{
	struct kvr_ring r;
	void *p;

	cr_assert_eq(kvr_ring_attach_producer(
			 &r, mem, kvr_ring_shm_bytes(FAKE_RING), FAKE_RING),
		     0);
	cr_assert_eq(kvr_ring_claim(&r, type, len, &p), 0);
	memcpy(p, rec, len);
	kvr_ring_commit(&r);
}

#define RLX memory_order_relaxed

/* A fresh heartbeat, as the server's timer would write it: --check flags
 * a heartbeat older than 3 s, and a slow (sanitized) run may get there. */
static void fake_beat(struct fake *f)
{
	atomic_store_explicit(&f->h->heartbeat_ns, kvr_clock_now_ns(), RLX);
}

/*
 * Formats @name in tmpdir: 4 channels, 1 MiB pool, channel 1 ACTIVE with
 * this process as its worker, one lookup request and one prepare_store
 * answer in its rings, consistent counters. @abi 0 means KVR_ABI.
 */
static void fake_create(struct fake *f, const char *name, uint32_t abi)
{
	struct kvr_err e = {0};
	const uint8_t boot[16] = {fake_boot0, 0x07, 1, 2,  3,  4,  5,  6,
				  7,	      8,    9, 10, 11, 12, 13, 14};
	struct kvr_channel_shm *c;
	struct kvr_gstats_shm *g;
	uint64_t start = 0;
	int rc;

	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	snprintf(f->path, sizeof(f->path), "%s/%s", tmpdir, name);
	cr_assert_eq(
	    kvr_ctl_geom_compute(FAKE_CHANNELS, FAKE_RING, FAKE_RING, &f->g),
	    0);
	rc = kvr_seg_create_shm(tmpdir, name, f->g.ctl_bytes, 0600, (gid_t)-1,
				&f->seg, &e);
	cr_assert_eq(rc, 0, "create %s: %s", name, e.msg);
	f->h = f->seg.base;
	kvr_seg_hdr_format(&f->h->seg, KVR_SEG_KIND_CONTROL, kvr_layout_hash(),
			   f->g.ctl_bytes, name, boot);
	if (abi)
		f->h->seg.abi = abi;
	f->h->pool_bytes = FAKE_POOL;
	f->h->align = 4096;
	f->h->pool_backend = KVR_POOL_SHM;
	snprintf(f->h->pool_name, sizeof(f->h->pool_name), "fake.pool");
	f->h->max_channels = FAKE_CHANNELS;
	f->h->channel_bytes = f->g.channel_bytes;
	rc = kvr_seg_create_memfd("fake-dir", f->g.dir_bytes, 0, &f->dir, &e);
	cr_assert_eq(rc, 0, "directory: %s", e.msg);
	f->h->dir_fd = f->dir.fd;
	f->h->dir_bytes = f->g.dir_bytes;
	f->h->req_ring_cap = FAKE_RING;
	f->h->resp_ring_cap = FAKE_RING;
	f->h->max_keys = 1024;
	f->h->lease_ms = 30000;
	f->h->heartbeat_ms = 100;
	f->h->server_uid = (int32_t)geteuid();
	f->h->start_realtime_ns = (uint64_t)time(NULL) * 1000000000ull;
	fake_beat(f);
	atomic_store_explicit(&f->h->state, KVR_SERVER_RUNNING, RLX);
	g = &f->h->stats;
	atomic_store_explicit(&g->used_bytes, 12288, RLX);
	atomic_store_explicit(&g->committed_bytes, 8192, RLX);
	atomic_store_explicit(&g->reserved_bytes, 4096, RLX);
	atomic_store_explicit(&g->objects, 2, RLX);
	atomic_store_explicit(&g->reserved_objects, 1, RLX);
	atomic_store_explicit(&g->pins, 1, RLX);
	atomic_store_explicit(&g->pinned_bytes, 4096, RLX);
	atomic_store_explicit(&g->leases, 1, RLX);
	atomic_store_explicit(&g->transfers, 1, RLX);
	atomic_store_explicit(&g->evictions, 3, RLX);
	atomic_store_explicit(&g->workers, 1, RLX);
	atomic_store_explicit(&g->connects, 1, RLX);
	atomic_store_explicit(&g->requests, 12, RLX);
	atomic_store_explicit(&g->free_extents, 1, RLX);
	atomic_store_explicit(&g->largest_free, FAKE_POOL - 12288, RLX);
	for (uint32_t i = 0; i < FAKE_CHANNELS; i++) {
		rc = kvr_seg_create_memfd("fake-ch", f->g.channel_bytes, 0,
					  &f->blk[i], &e);
		cr_assert_eq(rc, 0, "block %u: %s", i, e.msg);
		/* Free channels too: their directory names no block. */
		kvr_chan_dir(f->dir.base, i)->fd = -1;
		c = fake_chan(f, i);
		c->req_ring_off = f->g.req_ring_off;
		c->resp_ring_off = f->g.resp_ring_off;
		kvr_bell_init(&c->req_bell);
		kvr_bell_init(&c->resp_bell);
		cr_assert_eq(kvr_ring_format(fake_ring(f, i, false),
					     kvr_ring_shm_bytes(FAKE_RING),
					     FAKE_RING),
			     0);
		cr_assert_eq(kvr_ring_format(fake_ring(f, i, true),
					     kvr_ring_shm_bytes(FAKE_RING),
					     FAKE_RING),
			     0);
	}
	/* Channel 1: this process, a model, some traffic. */
	c = fake_chan(f, 1);
	cr_assert_eq(kvr_proc_start_time(getpid(), &start), 0);
	c->generation = 1;
	c->pid = getpid();
	c->uid = geteuid();
	c->pid_start = start;
	c->ns_id = 7;
	c->transport = KVR_TRANSPORT_SHM;
	snprintf(c->ns.model, sizeof(c->ns.model), "llama-test-7b");
	c->ns.layers = 32;
	c->ns.kv_heads = 8;
	c->ns.head_size = 128;
	c->ns.dtype_bytes = 2;
	c->ns.tp_rank = 0;
	c->ns.tp_size = 1;
	c->ns.chunk_tokens = 256;
	atomic_store_explicit(&c->stats.requests[KVR_OP_LOOKUP], 10, RLX);
	atomic_store_explicit(&c->stats.requests[KVR_OP_PREPARE_STORE], 2, RLX);
	atomic_store_explicit(&c->stats.errors[kvr_err_slot(-ENOENT)], 1, RLX);
	atomic_store_explicit(&c->stats.reserved_bytes, 4096, RLX);
	atomic_store_explicit(&c->stats.pins, 1, RLX);
	atomic_store_explicit(&c->stats.leases, 1, RLX);
	atomic_store_explicit(&c->stats.transfers, 1, RLX);
	atomic_store_explicit(&c->stats.req_high_water, 72, RLX);
	atomic_store_explicit(&c->stats.resp_high_water, 88, RLX);
	atomic_store_explicit(&c->req_bell.rung, 5, RLX);
	atomic_store_explicit(&c->req_bell.suppressed, 95, RLX);
	{
		const struct kvr_key k[2] = {{0x1111, 0x2222},
					     {0x3333, 0x4444}};
		const struct kvr_slot_desc sl[2] = {
		    {0, 4096, KVR_SLOT_OK, 0},
		    {4096, 4096, KVR_SLOT_EXISTS, 0}};
		struct kvr_req_view req = {.op = KVR_OP_LOOKUP,
					   .hdr = {.req_id = 77, .count = 2},
					   .keys = k};
		struct kvr_resp_view resp = {
		    .op = KVR_OP_PREPARE_STORE,
		    .hdr = {.req_id = 78, .handle = 5, .count = 2},
		    .slots = sl};
		_Alignas(8) char buf[128];
		int len;

		len = kvr_req_encode(&req, buf, sizeof(buf));
		cr_assert_gt(len, 0);
		ring_put(fake_ring(f, 1, false), KVR_OP_LOOKUP, buf,
			 (uint32_t)len);
		len = kvr_resp_encode(&resp, buf, sizeof(buf));
		cr_assert_gt(len, 0);
		ring_put(fake_ring(f, 1, true),
			 KVR_RESP_BIT | KVR_OP_PREPARE_STORE, buf,
			 (uint32_t)len);
	}
	/* Published last, as the server does: the block's copy, then the
	 * directory entry the inspector trusts. */
	atomic_store_explicit(&c->state, KVR_CHAN_ACTIVE, memory_order_release);
	{
		struct kvr_chan_dir_shm *d = kvr_chan_dir(f->dir.base, 1);

		atomic_store_explicit(&d->generation, 1, RLX);
		d->fd = f->blk[1].fd;
		d->pid = c->pid;
		d->uid = c->uid;
		d->pid_start = c->pid_start;
		d->ns_id = c->ns_id;
		d->transport = c->transport;
		atomic_store_explicit(&d->state, KVR_CHAN_ACTIVE,
				      memory_order_release);
	}
	kvr_seg_hdr_publish(&f->h->seg);
}

static void fake_close(struct fake *f)
{
	for (uint32_t i = 0; i < FAKE_CHANNELS; i++)
		kvr_seg_destroy(&f->blk[i]);
	kvr_seg_destroy(&f->dir);
	kvr_seg_detach(&f->seg);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/kvr-inspect-XXXXXX");
	cr_assert(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static void teardown(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	rmdir(tmpdir);
}

TestSuite(inspect, .init = setup, .fini = teardown, .timeout = 30);

/* ==== Command line ==== */

Test(inspect, help_goes_to_stdout_with_exit_0_when_asked)
{
	struct run r = RUN("--help");

	cr_expect_eq(r.status, 0, "status %d", r.status);
	cr_expect(strstr(r.out, "--prometheus"), "help: %s", r.out);
	cr_expect_str_empty(r.err);
	run_free(&r);
}

Test(inspect, version_names_the_abi_when_asked)
{
	struct run r = RUN("-V");
	char want[32];

	snprintf(want, sizeof(want), "abi %d.%d", KVR_ABI_MAJOR, KVR_ABI_MINOR);
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, want), "version: %s", r.out);
	run_free(&r);
}

Test(inspect, usage_error_exits_2_when_options_conflict)
{
	struct run r1 = RUN("--check", "--prometheus");
	struct run r2 = RUN("--bogus");
	struct run r3 = RUN("--dump", "x");
	struct run r4 = RUN("--count", "3");

	cr_expect_eq(r1.status, 2, "conflict: %d %s", r1.status, r1.err);
	cr_expect_eq(r2.status, 2, "unknown: %d", r2.status);
	cr_expect_eq(r3.status, 2, "bad channel: %d", r3.status);
	cr_expect_eq(r4.status, 2, "count without watch: %d", r4.status);
	cr_expect(strstr(r1.err, "kvring-inspect:"), "prefix: %s", r1.err);
	run_free(&r1);
	run_free(&r2);
	run_free(&r3);
	run_free(&r4);
}

Test(inspect, attach_fails_with_exit_1_when_no_segment)
{
	struct run r = RUN("--dir", tmpdir, "--name", "kvring-none");

	cr_expect_eq(r.status, 1, "status %d", r.status);
	cr_expect(strstr(r.err, "no server"), "stderr: %s", r.err);
	cr_expect_str_empty(r.out);
	run_free(&r);
}

/* ==== Overview ==== */

Test(inspect, json_overview_matches_the_segment_when_fake)
{
	struct fake f;
	struct run r;
	struct t_json *j;

	fake_create(&f, "kvring-t.ctl", 0);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--json");
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "schema"), 1);
	cr_expect_eq(JN(j, "server_pid"), getpid());
	cr_expect(t_json_true(j, "server_alive"));
	cr_expect_eq(JN(j, "pool_bytes"), FAKE_POOL);
	cr_expect_eq(JN(j, "pool_used_bytes"), 12288);
	cr_expect_eq(JN(j, "objects"), 2);
	cr_expect_eq(JN(j, "reserved_bytes"), 4096);
	cr_expect_eq(JN(j, "pins"), 1);
	cr_expect_eq(JN(j, "leases"), 1);
	cr_expect_eq(JN(j, "evictions"), 3);
	cr_expect_eq(JN(j, "workers"), 1);
	cr_expect(!strncmp(JS(j, "boot_id"), "b0070102", 8), "%s",
		  JS(j, "boot_id"));
	/* Only the active channel by default. */
	cr_assert_eq(t_json_count(j, "channels"), 1, "%s", r.out);
	cr_expect_eq(JN(j, "channels.0.index"), 1);
	cr_expect_eq(JN(j, "channels.0.pid"), getpid());
	cr_expect_str_eq(JS(j, "channels.0.state"), "active");
	cr_expect_str_eq(JS(j, "channels.0.namespace.model"), "llama-test-7b");
	cr_expect_eq(JN(j, "channels.0.namespace.chunk_tokens"), 256);
	cr_expect_eq(JN(j, "channels.0.req_ring.capacity"), FAKE_RING);
	cr_expect_eq(JN(j, "channels.0.req_ring.head"), 0);
	cr_expect_eq(JN(j, "channels.0.req_ring.tail"),
		     8 + sizeof(struct kvr_req_hdr) + 32);
	cr_expect_eq(JN(j, "channels.0.req_ring.high_water"), 72);
	/* The ring samples its high-water mark only when the producer
	 * re-reads head (a lower bound, docs/ring.md): never above what is
	 * in flight. */
	cr_expect_leq(JN(j, "channels.0.req_ring.ring_high_water"),
		      (long long)(8 + sizeof(struct kvr_req_hdr) + 32));
	cr_expect_geq(JN(j, "channels.0.req_ring.ring_high_water"), 0);
	cr_expect_eq(JN(j, "channels.0.resp_ring.tail"),
		     8 + sizeof(struct kvr_resp_hdr) + 48);
	cr_expect_eq(JN(j, "channels.0.requests_by_op.lookup"), 10);
	cr_expect_eq(JN(j, "channels.0.errors_by_code.enoent"), 1);
	cr_expect_eq(JN(j, "channels.0.doorbells.req.rung"), 5);
	cr_expect_eq(JN(j, "channels.0.doorbells.req.suppressed"), 95);
	t_json_free(j);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, all_shows_free_channels_when_asked)
{
	struct fake f;
	struct run r;
	struct t_json *j;
	char p[64];

	fake_create(&f, "kvring-t.ctl", 0);
	r = RUN("--dir", tmpdir, "--name", "kvring-t.ctl", "--json", "--all");
	cr_assert_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect_eq(t_json_count(j, "channels"), FAKE_CHANNELS);
	for (int i = 0; i < FAKE_CHANNELS; i++) {
		snprintf(p, sizeof(p), "channels.%d.index", i);
		cr_expect_eq(JN(j, p), i, "%s", p);
	}
	t_json_free(j);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, text_overview_is_key_value_lines_when_default)
{
	struct fake f;
	struct run r;
	char path[300];
	int lines = 0;

	fake_create(&f, "kvring-t.ctl", 0);
	/* --name with a path to the file works too. */
	snprintf(path, sizeof(path), "%s/kvring-t.ctl", tmpdir);
	r = RUN("--name", path);
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n")) {
		size_t k = strspn(l, "abcdefghijklmnopqrstuvwxyz0123456789_.");

		cr_expect(k > 0 && l[k] == '=', "not key=value: \"%s\"", l);
		lines++;
	}
	cr_expect_gt(lines, 40);
	run_free(&r);
	r = RUN("--name", path);
	cr_expect(strstr(r.out, "\nchannels.1.req_ring.capacity=4096\n"), "%s",
		  r.out);
	cr_expect(strstr(r.out, "\nserver_alive=true\n"));
	cr_expect(
	    strstr(r.out, "\nchannels.1.namespace.model=llama-test-7b\n"));
	run_free(&r);
	fake_close(&f);
}

Test(inspect, inspector_never_writes_when_running_every_mode)
{
	struct fake f;
	struct run r;
	void *before;
	struct stat st0, st1;

	fake_create(&f, "kvring-t.ctl", 0);
	fake_beat(&f);
	before = malloc(f.seg.bytes);
	cr_assert(before);
	memcpy(before, f.seg.base, f.seg.bytes);
	cr_assert_eq(stat(f.path, &st0), 0);
	const char *modes[] = {"--json", "--prometheus", "--check", "--all"};
	for (int i = 0; i < 4; i++) {
		r = RUN("--dir", tmpdir, "--name", "kvring-t",
			(char *)modes[i]);
		cr_expect(r.status == 0, "%s: %d %s", modes[i], r.status,
			  r.err);
		run_free(&r);
	}
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--dump", "1");
	cr_expect_eq(r.status, 0);
	run_free(&r);
	cr_expect_eq(memcmp(before, f.seg.base, f.seg.bytes), 0,
		     "the segment changed");
	cr_assert_eq(stat(f.path, &st1), 0);
	cr_expect_eq(st0.st_mtim.tv_sec, st1.st_mtim.tv_sec);
	cr_expect_eq(st0.st_mtim.tv_nsec, st1.st_mtim.tv_nsec);
	free(before);
	fake_close(&f);
}

/* ==== ABI and header refusal ==== */

Test(inspect, attach_refused_with_both_versions_when_abi_differs)
{
	struct fake f;
	struct run r;

	char found[32], expected[32];

	/* One major version ahead of ours, whatever ours is. */
	fake_create(&f, "kvring-t.ctl", (uint32_t)(KVR_ABI_MAJOR + 1) << 16);
	snprintf(found, sizeof(found), "abi %d.0", KVR_ABI_MAJOR + 1);
	snprintf(expected, sizeof(expected), "expected %d.", KVR_ABI_MAJOR);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--json");
	cr_expect_eq(r.status, 1, "status %d", r.status);
	cr_expect(strstr(r.err, found), "found version: %s", r.err);
	cr_expect(strstr(r.err, expected), "expected version: %s", r.err);
	cr_expect_str_empty(r.out);
	run_free(&r);
	/* --check refuses the same way: it cannot read another layout. */
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 1, "check status %d", r.status);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, attach_refused_when_layout_hash_differs)
{
	struct fake f;
	struct run r;

	fake_create(&f, "kvring-t.ctl", 0);
	f.h->seg.layout_hash ^= 1;
	r = RUN("--dir", tmpdir, "--name", "kvring-t");
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "layout hash"), "%s", r.err);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, attach_refused_when_file_was_truncated)
{
	struct fake f;
	struct run r;

	fake_create(&f, "kvring-t.ctl", 0);
	fake_close(&f);
	cr_assert_eq(truncate(f.path, 8192), 0);
	r = RUN("--dir", tmpdir, "--name", "kvring-t");
	cr_expect_eq(r.status, 1, "status %d", r.status);
	cr_expect(strstr(r.err, "kvring-inspect: attach"), "%s", r.err);
	run_free(&r);
}

/* ==== --check ==== */

Test(inspect, check_passes_when_segment_healthy)
{
	struct fake f;
	struct run r;
	struct t_json *j;

	fake_create(&f, "kvring-t.ctl", 0);
	fake_beat(&f);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 0, "status %d: %s", r.status, r.out);
	cr_expect(strstr(r.out, "check=ok"), "%s", r.out);
	run_free(&r);
	fake_beat(&f);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check", "--json");
	cr_expect_eq(r.status, 0);
	j = jparse_run(&r);
	cr_expect(t_json_true(j, "ok"), "%s", r.out);
	cr_expect_eq(t_json_count(j, "violations"), 0, "%s", r.out);
	t_json_free(j);
	run_free(&r);
	fake_close(&f);
}

/*
 * abi 4.0: the channel directory and the channel blocks are reached
 * through /proc/<server>/fd, which the kernel opens only for root and the
 * server's uid. Another uid that can read the control file (a --group
 * member) sees the header and the global counters, no channel at all,
 * and --check says so instead of judging zeros.
 */
Test(inspect, check_says_the_directory_is_unreadable_when_run_as_another_uid)
{
	struct fake f;
	struct run r;

	if (geteuid() != 0)
		cr_skip("needs root to run the inspector as another uid");
	fake_create(&f, "kvring-t.ctl", 0);
	cr_assert_eq(chmod(tmpdir, 0755), 0);
	cr_assert_eq(chmod(f.path, 0444), 0);
	spawn_uid = 65534;
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 3, "status %d: %s %s", r.status, r.out, r.err);
	cr_expect(strstr(r.out, "violation=directory"), "%s", r.out);
	cr_expect(strstr(r.out, "directory cannot be read"), "%s", r.out);
	cr_expect(strstr(r.err, "channels, uids and per-namespace counters "
				"not shown"),
		  "%s", r.err);
	run_free(&r);
	/* Without --check: the header is shown, no channel's pid. */
	r = RUN("--dir", tmpdir, "--name", "kvring-t");
	cr_expect_eq(r.status, 0, "status %d: %s %s", r.status, r.out, r.err);
	cr_expect(!strstr(r.out, "channels.1."), "%s", r.out);
	run_free(&r);
	/* --dump says why, not "channel is free". */
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--dump", "1");
	spawn_uid = 0;
	cr_expect_eq(r.status, 1, "status %d: %s %s", r.status, r.out, r.err);
	cr_expect(strstr(r.err, "directory cannot be read"), "%s", r.err);
	run_free(&r);
	/* As this process's uid (the creator's), the block is there. */
	fake_beat(&f);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 0, "status %d: %s", r.status, r.out);
	run_free(&r);
	fake_close(&f);
}

/*
 * abi 5.0: the namespace slots (each tenant's model and counters) live in
 * the channel directory, not in the control segment every worker maps.
 * The fake publishes one slot there, and global counters in the control
 * segment. As root the inspector shows both; as another uid that can read
 * the control file it shows the global counters and no namespace, and
 * says in one line on stderr what it left out and who may see it.
 */
Test(inspect, namespaces_need_the_directory_when_run_as_another_uid)
{
	struct kvr_ctl_obs_shm *o;
	struct kvr_ns_obs_shm *n;
	struct t_json *j;
	struct fake f;
	struct run r;
	const char *nl;

	if (geteuid() != 0)
		cr_skip("needs root to run the inspector as another uid");
	fake_create(&f, "kvring-t.ctl", 0);
	o = kvr_ctl_obs(f.h);
	o->hist_ops = KVR_HIST_GOPS;
	o->hist_buckets = KVR_HIST_BUCKETS;
	o->ns_slots = KVR_NS_OBS_MAX;
	atomic_store_explicit(&o->cache.lookup_keys, 41, RLX);
	n = kvr_ns_obs(f.dir.base, &f.g, 6);
	snprintf(n->desc.model, sizeof(n->desc.model), "tenant-secret-13b");
	n->desc.tp_size = 1;
	atomic_store_explicit(&n->cache.lookup_keys, 17, RLX);
	atomic_store_explicit(&n->id, 7, RLX);
	atomic_store_explicit(&n->gen, 2, memory_order_release);
	cr_assert_eq(chmod(tmpdir, 0755), 0);
	cr_assert_eq(chmod(f.path, 0444), 0);

	/* As the creator's uid: the slot is there, from the directory. */
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--json");
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "cache.lookup_keys"), 41, "%s", r.out);
	cr_assert_eq(t_json_count(j, "namespaces"), 1, "%s", r.out);
	cr_expect_eq(JN(j, "namespaces.0.id"), 7);
	cr_expect_str_eq(JS(j, "namespaces.0.model"), "tenant-secret-13b");
	cr_expect_eq(JN(j, "namespaces.0.cache.lookup_keys"), 17);
	cr_expect(t_json_true(j, "directory_readable"), "%s", r.out);
	cr_expect(!strstr(r.out, "directory_error"), "%s", r.out);
	t_json_free(j);
	run_free(&r);

	/* As another uid: global counters, no namespace, one note. */
	spawn_uid = 65534;
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--json");
	spawn_uid = 0;
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "cache.lookup_keys"), 41, "%s", r.out);
	cr_expect_eq(t_json_count(j, "namespaces"), 0, "%s", r.out);
	cr_expect(!strstr(r.out, "tenant-secret-13b"), "%s", r.out);
	/* ... and the JSON itself says they are hidden, not absent. */
	cr_expect(!t_json_true(j, "directory_readable"), "%s", r.out);
	cr_expect(JS(j, "directory_error") &&
		      strstr(JS(j, "directory_error"), "namespaces hidden") &&
		      strstr(JS(j, "directory_error"), "as root"),
		  "%s", r.out);
	t_json_free(j);
	cr_expect(strstr(r.err, "per-namespace counters not shown"), "%s",
		  r.err);
	cr_expect(strstr(r.err, "need root or kvringd's uid"), "%s", r.err);
	nl = strchr(r.err, '\n');
	cr_expect(nl && !strchr(nl + 1, '\n'), "more than one line: %s", r.err);
	run_free(&r);

	/* Prometheus too: global families, no namespace series. */
	spawn_uid = 65534;
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--prometheus");
	spawn_uid = 0;
	cr_expect_eq(r.status, 0, "status %d: %s", r.status, r.err);
	cr_expect(strstr(r.out, "\nkvring_lookup_keys_total 41\n"), "%s",
		  r.out);
	cr_expect(!strstr(r.out, "tenant-secret-13b"), "%s", r.out);
	cr_expect(strstr(r.out, "\nkvring_inspect_directory_readable 0\n"),
		  "%s", r.out);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, check_fails_with_exit_3_when_ring_positions_corrupted)
{
	struct fake f;
	struct run r;
	struct t_json *j;
	struct kvr_ring_shm *ring;

	fake_create(&f, "kvring-t.ctl", 0);
	ring = fake_ring(&f, 1, false);
	/* Tail more than a capacity ahead of head. */
	atomic_store_explicit(&ring->tail, 3 * FAKE_RING, RLX);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 3, "status %d: %s", r.status, r.out);
	cr_expect(strstr(r.out, "violation=ring:1:req_ring"), "%s", r.out);
	cr_expect(strstr(r.out, "check=failed"), "%s", r.out);
	run_free(&r);
	/* A misaligned head in the other ring is reported as well. */
	ring = fake_ring(&f, 1, true);
	atomic_store_explicit(&ring->head, 3, RLX);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check", "--json");
	cr_expect_eq(r.status, 3);
	j = jparse_run(&r);
	cr_expect(!t_json_true(j, "ok"), "%s", r.out);
	cr_expect(jviolation(j, "ring:1:resp_ring"), "%s", r.out);
	cr_expect(jviolation(j, "ring:1:req_ring"), "%s", r.out);
	t_json_free(j);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, check_fails_when_record_header_is_garbage)
{
	struct fake f;
	struct run r;
	struct kvr_ring_shm *ring;

	fake_create(&f, "kvring-t.ctl", 0);
	ring = fake_ring(&f, 1, false);
	memset(ring->data, 0x5a, 8); /* the record header's check word */
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 3, "status %d: %s", r.status, r.out);
	cr_expect(strstr(r.out, "req_ring"), "%s", r.out);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, check_fails_when_counters_are_inconsistent)
{
	struct fake f;
	struct run r;

	fake_create(&f, "kvring-t.ctl", 0);
	atomic_store_explicit(&f.h->stats.workers, 3, RLX);
	atomic_store_explicit(&f.h->stats.reserved_bytes, 20000, RLX);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 3, "status %d", r.status);
	cr_expect(strstr(r.out, "violation=workers"), "%s", r.out);
	cr_expect(strstr(r.out, "violation=reserved_le_used"), "%s", r.out);
	/* abi 3.0: a free channel has no block, so nothing of it can hold
	 * pins (its block died with its claim). */
	run_free(&r);
	fake_close(&f);
}

Test(inspect, check_fails_when_channel_sums_exceed_globals)
{
	struct fake f;
	struct run r;

	fake_create(&f, "kvring-t.ctl", 0);
	atomic_store_explicit(&fake_chan(&f, 1)->stats.leases, 9, RLX);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--check");
	cr_expect_eq(r.status, 3);
	cr_expect(strstr(r.out, "violation=sum_leases"), "%s", r.out);
	run_free(&r);
	fake_close(&f);
}

/* ==== Dead server, --list ==== */

/* Forks a child that formats @name and dies by SIGKILL. */
static void fake_by_killed_child(const char *name)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct fake f;

		fake_create(&f, name, 0);
		raise(SIGKILL);
		_exit(0);
	}
	cr_assert_eq(wait_status(pid), 128 + SIGKILL);
}

Test(inspect, list_marks_stale_when_owner_was_killed)
{
	struct fake live;
	struct run r;
	struct t_json *j;
	char *line;

	fake_create(&live, "kvring-live.ctl", 0);
	fake_by_killed_child("kvring-dead.ctl");
	r = RUN("--list", "--dir", tmpdir);
	cr_assert_eq(r.status, 0, "%s", r.err);
	line = strstr(r.out, "name=kvring-dead.ctl");
	cr_assert(line, "%s", r.out);
	cr_expect(!strncmp(strchr(line, ' '), " role=ctl state=stale", 21),
		  "%s", line);
	line = strstr(r.out, "name=kvring-live.ctl");
	cr_assert(line, "%s", r.out);
	cr_expect(!strncmp(strchr(line, ' '), " role=ctl state=live", 20), "%s",
		  line);
	cr_expect(strstr(r.out, "segments=2 stale=1"), "%s", r.out);
	run_free(&r);
	r = RUN("--list", "--dir", tmpdir, "--json");
	cr_expect_eq(r.status, 0);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "nr_stale"), 1, "%s", r.out);
	for (long i = 0; i < t_json_count(j, "segments"); i++) {
		char p[64];

		snprintf(p, sizeof(p), "segments.%ld.name", i);
		if (!strcmp(JS(j, p), "kvring-dead.ctl")) {
			snprintf(p, sizeof(p), "segments.%ld.state", i);
			cr_expect_str_eq(JS(j, p), "stale");
		}
	}
	t_json_free(j);
	run_free(&r);
	fake_close(&live);
}

Test(inspect, overview_says_dead_and_check_fails_when_server_killed)
{
	struct t_json *j;
	struct run r;

	fake_by_killed_child("kvring-dead.ctl");
	r = RUN("--dir", tmpdir, "--name", "kvring-dead", "--json");
	cr_expect_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect(t_json_has(j, "server_alive") &&
		      !t_json_true(j, "server_alive"),
		  "%s", r.out);
	t_json_free(j);
	run_free(&r);
	r = RUN("--dir", tmpdir, "--name", "kvring-dead", "--check");
	cr_expect_eq(r.status, 3);
	cr_expect(strstr(r.out, "violation=server_dead"), "%s", r.out);
	run_free(&r);
}

/* ==== --prometheus ==== */

Test(inspect, prometheus_output_parses_when_fake_segment)
{
	struct fake f;
	struct run r;
	char why[256] = "";
	int n;

	fake_create(&f, "kvring-t.ctl", 0);
	/* A model name that needs escaping in a label value. */
	snprintf(fake_chan(&f, 1)->ns.model, 64, "a\"b\\c");
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--prometheus", "--all");
	cr_assert_eq(r.status, 0, "%s", r.err);
	n = prom_validate(r.out, why, sizeof(why));
	cr_expect_gt(n, 50, "invalid exposition (%s):\n%s", why, r.out);
	expect_promtool_ok(r.out);
	cr_expect(strstr(r.out, "\nkvring_pool_used_bytes 12288\n"), "%s",
		  r.out);
	cr_expect(strstr(r.out, "kvring_channel_requests_total{channel=\"1\""),
		  "%s", r.out);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, prom_validator_rejects_bad_text_when_given_some)
{
	char why[256];

	cr_expect_eq(prom_validate("a_b 1\n", why, sizeof(why)), -1);
	cr_expect_eq(prom_validate("# TYPE x gauge\n# TYPE x gauge\nx 1\n", why,
				   sizeof(why)),
		     -1);
	cr_expect_eq(prom_validate("# TYPE 1x gauge\n", why, sizeof(why)), -1);
	cr_expect_eq(
	    prom_validate("# TYPE x gauge\nx{a=\"1} 2\n", why, sizeof(why)),
	    -1);
	cr_expect_eq(prom_validate("# TYPE x gauge\nx 1\n# TYPE y gauge\n"
				   "y 1\nx 2\n",
				   why, sizeof(why)),
		     -1);
	cr_expect_eq(prom_validate("# TYPE x gauge\nx{a=\"q\\\"\"} 1.5\n", why,
				   sizeof(why)),
		     1, "%s", why);
	/* The JSON parser of these tests is strict, too. */
	cr_expect(!t_json_valid("{\"a\":1,}"));
	cr_expect(!t_json_valid("{\"a\":01}"));
	cr_expect(!t_json_valid("{\"a\":NaN}"));
	cr_expect(!t_json_valid("{\"a\":1} x"));
	cr_expect(t_json_valid("{\"a\":[1,{\"b\":\"c\\u0001\"}],\"d\":-1.5}"));
}

/* ==== --dump ==== */

Test(inspect, dump_decodes_records_when_rings_hold_messages)
{
	struct fake f;
	struct run r;
	struct t_json *j;

	fake_create(&f, "kvring-t.ctl", 0);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--dump", "1");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "op=lookup len=64 req_id=77 handle=0 count=2"),
		  "%s", r.out);
	cr_expect(strstr(r.out, "first_key=00000000000022220000000000001111"),
		  "%s", r.out);
	cr_expect(strstr(r.out, "op=prepare_store"), "%s", r.out);
	cr_expect(strstr(r.out, "req_id=78 handle=5 status=0"), "%s", r.out);
	cr_expect(strstr(r.out, "slot=1 off=4096 len=4096 status=exists"), "%s",
		  r.out);
	run_free(&r);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--dump", "1", "--json");
	cr_expect_eq(r.status, 0);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "channel"), 1);
	cr_expect_eq(JN(j, "req_ring.nr_records"), 1, "%s", r.out);
	cr_expect_eq(JN(j, "resp_ring.nr_records"), 1, "%s", r.out);
	t_json_free(j);
	run_free(&r);
	/* Channel out of range: a usage error. */
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--dump", "99");
	cr_expect_eq(r.status, 2);
	run_free(&r);
	fake_close(&f);
}

/*
 * A producer stores the batch's first header (R3), then the tail (R1):
 * the dump must show what the tail it read covers, not a record it finds
 * by its header past that tail (docs/ring.md, protocol 6).
 */
Test(inspect, dump_stops_at_the_tail_when_a_record_is_past_it)
{
	struct kvr_key k = {0x3333, 0x4444};
	struct kvr_req_view req = {
	    .op = KVR_OP_LOOKUP, .hdr = {.req_id = 79, .count = 1}, .keys = &k};
	_Alignas(8) char buf[128];
	struct kvr_ring_shm *rs;
	struct t_json *j;
	struct fake f;
	struct run r;
	uint64_t tail;
	int len;

	fake_create(&f, "kvring-t.ctl", 0);
	rs = fake_ring(&f, 1, false);
	tail = atomic_load(&rs->tail);
	len = kvr_req_encode(&req, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	ring_put(rs, KVR_OP_LOOKUP, buf, (uint32_t)len);
	/* As if the tail store had not landed yet. */
	atomic_store(&rs->tail, tail);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--dump", "1", "--json");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_null(strstr(r.out, "\"req_id\":79"), "%s", r.out);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "req_ring.nr_records"), 1, "%s", r.out);
	t_json_free(j);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, dump_reports_bad_record_when_payload_is_malformed)
{
	struct fake f;
	struct run r;
	struct kvr_req_hdr *h;

	fake_create(&f, "kvring-t.ctl", 0);
	/* The ring record stays well-formed; the request inside does not. */
	h = (struct kvr_req_hdr
		 *)(((struct kvr_ring_shm *)fake_ring(&f, 1, false))->data +
		    KVR_RING_HDR_BYTES);
	h->reserved = 1;
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--dump", "1");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "valid=false"), "%s", r.out);
	run_free(&r);
	fake_close(&f);
}

/* ==== --socket ==== */

Test(inspect, socket_finds_the_segment_of_the_listening_process)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct fake f;
	struct run r;
	int fd;

	/* This process plays the server: it owns the segment and listens. */
	fake_create(&f, "kvring-sock.ctl", 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s.sock", tmpdir);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 1), 0);
	r = RUN("--dir", tmpdir, "--socket", sa.sun_path, "--json");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "kvring-sock.ctl"), "%s", r.out);
	run_free(&r);
	/* Nobody listens on another path. */
	r = RUN("--dir", tmpdir, "--socket", "/nonexistent/x.sock");
	cr_expect_eq(r.status, 1);
	run_free(&r);
	close(fd);
	fake_close(&f);
}

/* ==== --watch ==== */

Test(inspect, watch_prints_one_json_object_per_frame_with_rates)
{
	struct fake f;
	struct run r;
	int lines = 0;

	fake_create(&f, "kvring-t.ctl", 0);
	r = RUN("--dir", tmpdir, "--name", "kvring-t", "--json", "--watch=20",
		"--count", "3");
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n")) {
		struct t_json *j = jparse(l);

		if (lines > 0)
			cr_expect(t_json_has(j, "rates.requests_per_s"),
				  "rates: %s", l);
		else
			cr_expect(!t_json_has(j, "rates"),
				  "no rates in frame 0");
		t_json_free(j);
		lines++;
	}
	cr_expect_eq(lines, 3);
	run_free(&r);
	fake_close(&f);
}

Test(inspect, watch_exits_0_when_interrupted)
{
	struct fake f;
	char buf[256];
	int of, ef;
	pid_t pid;

	fake_create(&f, "kvring-t.ctl", 0);
	pid = spawn((char *const[]){"--dir", tmpdir, "--name", "kvring-t",
				    "--watch=20", NULL},
		    &of, &ef);
	/* The first frame is out: the tool is in its loop. */
	cr_assert_gt(read(of, buf, sizeof(buf)), 0);
	kill(pid, SIGINT);
	while (read(of, buf, sizeof(buf)) > 0)
		;
	cr_expect_eq(wait_status(pid), 0);
	close(of);
	close(ef);
	fake_close(&f);
}

Test(inspect, watch_reports_restart_when_segment_is_replaced)
{
	struct fake f, g;
	char *err;
	FILE *out;
	char line[65536];
	int of, ef, st;
	pid_t pid;

	fake_create(&f, "kvring-t.ctl", 0);
	pid = spawn((char *const[]){"--dir", tmpdir, "--name", "kvring-t",
				    "--json", "--watch=20", "--count", "40",
				    NULL},
		    &of, &ef);
	out = fdopen(of, "r");
	cr_assert(out);
	cr_assert(fgets(line, sizeof(line), out), "first frame");
	/* A "new server": remove the file and format another. */
	fake_close(&f);
	cr_assert_eq(unlink(f.path), 0);
	fake_boot0 = 0xee;
	fake_create(&g, "kvring-t.ctl", 0);
	while (fgets(line, sizeof(line), out))
		cr_expect(t_json_valid(line), "%s", line);
	err = read_all(ef);
	st = wait_status(pid);
	cr_expect_eq(st, 0, "status %d: %s", st, err);
	cr_expect(strstr(err, "server restarted"), "stderr: %s", err);
	cr_expect(strstr(err, "-> ee07"), "new boot id: %s", err);
	free(err);
	fclose(out);
	close(ef);
	fake_close(&g);
}

/* ==== Against a real kvringd with real workers ==== */

#if __has_include(<kvring/kvring.h>) && __has_include("t_server.h")
#include <kvring/kvring.h>

#include "t_server.h"

#define CHUNK (64u << 10)

static struct kvrd srv;

static void live_setup(void)
{
	t_server_init(&srv);
	t_server_start(&srv, NULL);
}

static void live_teardown(void)
{
	t_server_cleanup(&srv);
}

TestSuite(inspect_live, .init = live_setup, .fini = live_teardown,
	  .timeout = 60);

static struct kvr_client *live_connect(void)
{
	struct kvr_client_opts o = {.socket_path = srv.sock,
				    .no_prefault = true};
	struct kvr_client *c = NULL;
	char why[256] = "";
	int rc;

	snprintf(o.ns.model, sizeof(o.ns.model), "inspect-live");
	o.ns.layers = 2;
	o.ns.kv_heads = 2;
	o.ns.head_size = 64;
	o.ns.dtype_bytes = 2;
	o.ns.tp_size = 1;
	o.ns.chunk_tokens = 16;
	rc = kvr_connect(&o, &c, why, sizeof(why));
	cr_assert_eq(rc, 0, "connect: %d %s", rc, why);
	return c;
}

static void live_keys(struct kvr_key *k, uint64_t *sizes, uint32_t n,
		      uint64_t salt)
{
	for (uint32_t i = 0; i < n; i++) {
		k[i].lo = salt + i + 1;
		k[i].hi = 0x1a5bec7u;
		sizes[i] = CHUNK;
	}
}

/* What the server's counters must reach before the tool is run: the
 * counters may be updated just after the answer is published. */
struct want {
	uint64_t used, reserved, objects, pins, leases, workers;
};

static bool counters_are(void *arg)
{
	const struct want *w = arg;

	return T_GSTAT(&srv, used_bytes) == w->used &&
	       T_GSTAT(&srv, reserved_bytes) == w->reserved &&
	       T_GSTAT(&srv, objects) == w->objects &&
	       T_GSTAT(&srv, pins) == w->pins &&
	       T_GSTAT(&srv, leases) == w->leases &&
	       T_GSTAT(&srv, workers) == w->workers;
}

/* Runs --json and compares the tool's numbers with @w; runs --check too. */
static void expect_json(const struct want *w, const char *when)
{
	struct t_json *j;
	struct run r;

	cr_assert(t_wait_until(counters_are, (void *)w, 5000),
		  "%s: server counters never reached the expected values",
		  when);
	r = RUN("--name", srv.name, "--json");
	cr_assert_eq(r.status, 0, "%s: %s", when, r.err);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "server_pid"), srv.pid, "%s", when);
	cr_expect_eq(JN(j, "pool_used_bytes"), (long long)w->used, "%s", when);
	cr_expect_eq(JN(j, "reserved_bytes"), (long long)w->reserved, "%s",
		     when);
	cr_expect_eq(JN(j, "objects"), (long long)w->objects, "%s", when);
	cr_expect_eq(JN(j, "pins"), (long long)w->pins, "%s", when);
	cr_expect_eq(JN(j, "leases"), (long long)w->leases, "%s", when);
	cr_expect_eq(JN(j, "workers"), (long long)w->workers, "%s", when);
	t_json_free(j);
	run_free(&r);
	r = RUN("--name", srv.name, "--check");
	cr_expect_eq(r.status, 0, "%s: check: %s%s", when, r.out, r.err);
	run_free(&r);
}

Test(inspect_live, json_overview_matches_what_the_worker_did)
{
	struct kvr_client *c = live_connect();
	struct kvr_key k[6];
	uint64_t sizes[6], lease = 0;
	struct kvr_xfer x = {0};
	struct want w = {.workers = 1};
	struct t_json *j;
	struct run r;

	expect_json(&w, "connected");
	r = RUN("--name", srv.name, "--json");
	j = jparse_run(&r);
	cr_assert_eq(t_json_count(j, "channels"), 1, "%s", r.out);
	cr_expect_eq(JN(j, "channels.0.index"), kvr_client_info(c)->channel);
	cr_expect_eq(JN(j, "channels.0.pid"), getpid());
	cr_expect_str_eq(JS(j, "channels.0.state"), "active");
	cr_expect_str_eq(JS(j, "channels.0.namespace.model"), "inspect-live");
	cr_expect_eq(JN(j, "channels.0.req_ring.capacity"),
		     (long long)srv.hdr->req_ring_cap);
	t_json_free(j);
	run_free(&r);

	/* Four chunks stored and committed. */
	live_keys(k, sizes, 6, 0);
	cr_assert_eq(kvr_prepare_store(c, k, sizes, 4, &x), 0);
	for (uint32_t i = 0; i < x.nslots; i++) {
		cr_assert_eq(x.slots[i].status, KVR_SLOT_OK);
		memset(x.slots[i].ptr, (int)i, x.slots[i].len);
	}
	cr_assert_eq(kvr_commit_store(c, &x), 0);
	w.used = 4 * CHUNK;
	w.objects = 4;
	expect_json(&w, "4 committed");

	/* Two more prepared, not committed: reserved. */
	cr_assert_eq(kvr_prepare_store(c, k + 4, sizes + 4, 2, &x), 0);
	w.used = 6 * CHUNK;
	w.reserved = 2 * CHUNK;
	expect_json(&w, "2 reserved");
	r = RUN("--name", srv.name, "--json");
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "channels.0.reserved_bytes"), 2 * CHUNK, "%s",
		     r.out);
	cr_expect_eq(JN(j, "channels.0.transfers"), 1, "%s", r.out);
	cr_expect_eq(JN(j, "channels.0.requests_by_op.prepare_store"), 2, "%s",
		     r.out);
	t_json_free(j);
	run_free(&r);
	cr_assert_eq(kvr_abort_store(c, &x), 0);
	w.used = 4 * CHUNK;
	w.reserved = 0;
	expect_json(&w, "aborted");

	/* A retrieve prepared: its four objects are pinned. */
	cr_assert_eq(kvr_prepare_retrieve(c, k, 4, &x), 0);
	cr_assert_eq(x.nslots, 4);
	w.pins = 4;
	expect_json(&w, "retrieve prepared");
	r = RUN("--name", srv.name, "--json");
	/* Four pinned chunks, counted by the server and shown as such. */
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "pinned_bytes"), 4 * CHUNK, "%s", r.out);
	cr_expect_eq(JN(j, "pinned_bytes"),
		     (long long)T_GSTAT(&srv, pinned_bytes));
	cr_expect_eq(JN(j, "channels.0.pins"), 4);
	t_json_free(j);
	run_free(&r);
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);
	w.pins = 0;
	expect_json(&w, "retrieve committed");

	/* A lookup with a pin makes a lease. */
	cr_assert_eq(kvr_lookup(c, k, 4, &lease), 4);
	w.leases = 1;
	w.pins = 4;
	expect_json(&w, "leased");
	cr_assert_eq(kvr_release(c, lease), 0);
	w.leases = 0;
	w.pins = 0;
	expect_json(&w, "released");

	kvr_close(c);
	w.workers = 0;
	expect_json(&w, "closed");
}

Test(inspect_live, prometheus_and_dump_work_when_a_worker_is_connected)
{
	struct kvr_client *c = live_connect();
	char why[256] = "", chan[16];
	struct t_json *j;
	uint64_t t_ns;
	struct run r;
	int n;

	cr_assert_eq(kvr_ping(c, &t_ns), 0);
	r = RUN("--name", srv.name, "--prometheus");
	cr_assert_eq(r.status, 0, "%s", r.err);
	n = prom_validate(r.out, why, sizeof(why));
	cr_expect_gt(n, 50, "invalid exposition (%s):\n%s", why, r.out);
	expect_promtool_ok(r.out);
	cr_expect(strstr(r.out, "kvring_channel_requests_total{"), "%s", r.out);
	cr_expect(strstr(r.out, "\nkvring_server_up 1\n"), "%s", r.out);
	run_free(&r);
	snprintf(chan, sizeof(chan), "%u", kvr_client_info(c)->channel);
	r = RUN("--name", srv.name, "--dump", chan, "--json");
	cr_expect_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect_str_eq(JS(j, "req_ring.check"), "ok", "%s", r.out);
	cr_expect_str_eq(JS(j, "resp_ring.check"), "ok", "%s", r.out);
	t_json_free(j);
	run_free(&r);
	r = RUN("--socket", srv.sock, "--json");
	cr_expect_eq(r.status, 0, "--socket: %s", r.err);
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "server_pid"), srv.pid);
	t_json_free(j);
	run_free(&r);
	kvr_close(c);
}

Test(inspect_live, watch_shows_rates_when_a_worker_pings)
{
	struct kvr_client *c = live_connect();
	char line[65536];
	uint64_t t_ns;
	int of, ef, frames = 0;
	FILE *out;
	pid_t pid;

	pid = spawn((char *const[]){"--name", srv.name, "--json", "--watch=50",
				    "--count", "4", NULL},
		    &of, &ef);
	out = fdopen(of, "r");
	cr_assert(out);
	while (fgets(line, sizeof(line), out)) {
		struct t_json *j = jparse(line);

		if (frames++ > 0)
			cr_expect(t_json_has(j, "rates.requests_per_s"), "%s",
				  line);
		t_json_free(j);
		for (int i = 0; i < 20; i++)
			cr_assert_eq(kvr_ping(c, &t_ns), 0);
	}
	cr_expect_eq(frames, 4);
	cr_expect_eq(wait_status(pid), 0);
	fclose(out);
	close(ef);
	kvr_close(c);
}

/* The private directory of list_says_stale_when_server_was_sigkilled,
 * removed with what is in it after the test, whether it passed or not. */
static char dead_dir[64];

static void dead_dir_rm(void)
{
	struct dirent *de;
	DIR *d;

	if (!dead_dir[0] || !(d = opendir(dead_dir)))
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			(void)unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	(void)rmdir(dead_dir);
	dead_dir[0] = '\0';
}

Test(inspect_live, list_says_stale_when_server_was_sigkilled,
     .fini = dead_dir_rm)
{
	char want[128], *dir = dead_dir, from[128], to[160];
	struct t_json *j;
	struct run r;
	char *line;

	/*
	 * Every kvringd that starts sweeps the stale kvring-* segments of its
	 * uid, so one started by a concurrent test run could remove ours
	 * between the kill and the checks below. Hard links in a private
	 * directory on the same tmpfs keep the two files: the liveness lock
	 * is on the inode, so they are judged exactly as the originals.
	 */
	snprintf(dir, sizeof(dead_dir), "/dev/shm/kvr-inspect-dead-XXXXXX");
	cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(from, sizeof(from), "/dev/shm/%s", srv.ctl_name);
	snprintf(to, sizeof(to), "%s/%s", dir, srv.ctl_name);
	cr_assert_eq(link(from, to), 0, "link %s: %s", from, strerror(errno));
	snprintf(from, sizeof(from), "/dev/shm/%s.pool", srv.name);
	snprintf(to, sizeof(to), "%s/%s.pool", dir, srv.name);
	cr_assert_eq(link(from, to), 0, "link %s: %s", from, strerror(errno));
	t_server_kill(&srv);
	r = RUN("--dir", dir, "--list");
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "name=%s.ctl ", srv.name);
	line = strstr(r.out, want);
	cr_assert(line, "%s not listed:\n%s", want, r.out);
	cr_expect(!strncmp(line + strlen(want), "role=ctl state=stale", 20),
		  "%.200s", line);
	snprintf(want, sizeof(want), "name=%s.pool ", srv.name);
	line = strstr(r.out, want);
	cr_assert(line, "%s not listed:\n%s", want, r.out);
	cr_expect(!strncmp(line + strlen(want), "role=pool state=stale", 21),
		  "%.200s", line);
	run_free(&r);
	/* The overview still reads it and says the server is dead. */
	r = RUN("--dir", dir, "--name", srv.name, "--json");
	cr_expect_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect(t_json_has(j, "server_alive") &&
		      !t_json_true(j, "server_alive"),
		  "%s", r.out);
	t_json_free(j);
	run_free(&r);
	r = RUN("--dir", dir, "--name", srv.name, "--check");
	cr_expect_eq(r.status, 3, "%s%s", r.out, r.err);
	run_free(&r);
}

Test(inspect_live, check_passes_when_server_is_healthy)
{
	struct run r = RUN("--name", srv.name, "--check");

	cr_expect_eq(r.status, 0, "%s", r.out);
	cr_expect(strstr(r.out, "check=ok"), "%s", r.out);
	run_free(&r);
}
#endif /* live tests */
