/* SPDX-License-Identifier: MIT */
/*
 * inspect_suite.h - what the kvring-inspect suites (test_inspect_*.c)
 * share: the built binary run with its stdout, stderr and exit status
 * captured (KVR_BIN_DIR/tools/kvring-inspect), JSON through a real parser
 * (python3's json module, tests/support/t_json.h) looked up by path, a
 * validator of Prometheus text (and promtool when installed, t_prom.h),
 * and fake control segments formatted with the library
 * (kvr_ctl_geom_compute, kvr_seg_hdr_format, kvr_ring_format), whose
 * every value is known and whose corruption never touches a real server.
 * Header-only with static inline functions, so each suite stays one file
 * for the CMake glob.
 */
#ifndef KVR_INSPECT_SUITE_H
#define KVR_INSPECT_SUITE_H

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
#include "t_raw.h"

#define TOOL KVR_BIN_DIR "/tools/kvring-inspect"

/* ==== Running the tool ==== */

/* What one run produced; owned by the test, freed by run_free(). */
struct run {
	char *out, *err;
	int status; /* exit code, or 128 + signal */
};

static inline char *read_all(int fd)
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
static inline pid_t spawn(char *const args[], int *out_fd, int *err_fd)
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

static inline int wait_status(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		cr_assert_eq(errno, EINTR);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline struct run run_v(char *const args[])
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

static inline void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* ==== JSON, through a real parser ==== */

/* Parse @text; the test fails (with python's reason) when it is invalid. */
static inline struct t_json *jparse(const char *text)
{
	char why[256] = "";
	struct t_json *j = t_json_parse(text, why, sizeof(why));

	cr_assert(j, "invalid JSON (%s): %.2000s", why, text);
	return j;
}

/* The same for a run's stdout; the failure shows its exit status and
 * stderr too (an inspector that died prints nothing on stdout). */
static inline struct t_json *jparse_run(const struct run *r)
{
	char why[256] = "";
	struct t_json *j = t_json_parse(r->out, why, sizeof(why));

	cr_assert(j, "invalid JSON (%s), exit %d: %.2000s\nstderr: %.2000s",
		  why, r->status, r->out, r->err);
	return j;
}

/* The overview (--json) of segment base @name in @dir exits 0 and says
 * the server is not alive. */
static inline void expect_overview_dead(char *dir, char *name)
{
	struct run r = RUN("--dir", dir, "--name", name, "--json");
	struct t_json *j;

	cr_expect_eq(r.status, 0, "%s", r.err);
	j = jparse_run(&r);
	cr_expect(t_json_has(j, "server_alive") &&
		      !t_json_true(j, "server_alive"),
		  "%s", r.out);
	t_json_free(j);
	run_free(&r);
}

/* The integer at @path, LLONG_MIN when absent (never a real value). */
#define JN(j, path) t_json_int((j), (path), LLONG_MIN)

/* The string at @path, "" when absent. */
static inline const char *JS(const struct t_json *j, const char *path)
{
	const char *v = t_json_str(j, path);

	return v ? v : "";
}

/* Whether --check --json reported a violation whose code starts with
 * @prefix ("ring:1:req_ring"). */
static inline bool jviolation(const struct t_json *j, const char *prefix)
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
static inline void expect_promtool_ok(const char *text)
{
	char out[4096];
	int rc = t_promtool_check(text, out, sizeof(out));

	/* -1: promtool missing, a failure too (out says what to install). */
	cr_expect_eq(rc, 0, "promtool check metrics: %s", out);
}

static inline bool prom_name_ok(const char *s, size_t n)
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
static inline int prom_validate(const char *text, char *why, size_t whyn)
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
static inline struct kvr_channel_shm *fake_chan(struct fake *f, uint32_t i)
{
	return f->blk[i].base;
}

static inline void *fake_ring(struct fake *f, uint32_t i, bool resp)
{
	return (char *)fake_chan(f, i) +
	       (resp ? f->g.resp_ring_off : f->g.req_ring_off);
}

static inline void ring_put(void *mem, uint32_t type, const void *rec,
			    uint32_t len)
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
static inline void fake_beat(struct fake *f)
{
	atomic_store_explicit(&f->h->heartbeat_ns, kvr_clock_now_ns(), RLX);
}

/*
 * Formats @name in tmpdir: 4 channels, 1 MiB pool, channel 1 ACTIVE with
 * this process as its worker, one lookup request and one prepare_store
 * answer in its rings, consistent counters. @abi 0 means KVR_ABI.
 */
static inline void fake_create(struct fake *f, const char *name, uint32_t abi)
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
	t_ns_model(&c->ns, "llama-test-7b", 32, 8, 128, 256);
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

static inline void fake_close(struct fake *f)
{
	for (uint32_t i = 0; i < FAKE_CHANNELS; i++)
		kvr_seg_destroy(&f->blk[i]);
	kvr_seg_destroy(&f->dir);
	kvr_seg_detach(&f->seg);
}

static inline void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/kvr-inspect-XXXXXX");
	cr_assert(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static inline void teardown(void)
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

#endif /* KVR_INSPECT_SUITE_H */
