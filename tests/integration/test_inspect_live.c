/* SPDX-License-Identifier: MIT */
/*
 * Description: kvring-inspect against a real kvringd with real workers: the
 * overview matches what the worker did, --prometheus, --dump and --watch
 * on a live channel, --list after a SIGKILL, --check of a healthy
 * server.
 */
#include "inspect_suite.h"

/* ==== Against a real kvringd with real workers ==== */

#if __has_include(<kvring/kvring.h>) && __has_include("t_server.h")
#include <kvring/kvring.h>

#include "t_raw.h"
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

	t_ns_small(&o.ns, "inspect-live");
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
	expect_overview_dead(dir, srv.name);
	r = RUN("--dir", dir, "--name", srv.name, "--check");
	cr_expect_eq(r.status, 3, "%s%s", r.out, r.err);
	run_free(&r);
}

/* Both sides take line padding: each ping and each answer (40 bytes)
 * starts a cache line of its own, so both rings' tails move 64 bytes a
 * round trip. The worker's response ring is attached after kvringd's
 * producer view: kvringd must read its flag again, or it packs. */
Test(inspect_live, each_ping_and_answer_take_a_line_of_their_own)
{
	struct kvr_client *c = live_connect();
	long long req0, resp0;
	struct t_json *j;
	struct run r;

	cr_assert_eq(kvr_ping(c, NULL), 0);
	r = RUN("--name", srv.name, "--json");
	j = jparse_run(&r);
	req0 = JN(j, "channels.0.req_ring.tail");
	resp0 = JN(j, "channels.0.resp_ring.tail");
	t_json_free(j);
	run_free(&r);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(kvr_ping(c, NULL), 0);
	r = RUN("--name", srv.name, "--json");
	j = jparse_run(&r);
	cr_expect_eq(JN(j, "channels.0.req_ring.tail") - req0, 3 * 64, "%s",
		     r.out);
	cr_expect_eq(JN(j, "channels.0.resp_ring.tail") - resp0, 3 * 64, "%s",
		     r.out);
	cr_expect_eq(JN(j, "channels.0.resp_ring.tail") % 64, 0);
	t_json_free(j);
	run_free(&r);
	kvr_close(c);
}

Test(inspect_live, check_passes_when_server_is_healthy)
{
	struct run r = RUN("--name", srv.name, "--check");

	cr_expect_eq(r.status, 0, "%s", r.out);
	cr_expect(strstr(r.out, "check=ok"), "%s", r.out);
	run_free(&r);
}
/*
 * --list finds a kvringd whatever its --name (the shipped unit's is
 * "kvring", which has no "kvring-" prefix), but not another program's
 * .ctl/.pool files in the same directory.
 */
static struct kvrd named;
static char stranger[2][128];

static void named_rm(void)
{
	t_server_cleanup(&named);
	for (int i = 0; i < 2; i++)
		if (stranger[i][0])
			unlink(stranger[i]);
}

Test(inspect_live, list_finds_a_server_whatever_its_name, .fini = named_rm)
{
	char want[128], *line;
	struct run r;
	int fd;

	t_server_init(&named);
	/* kvring-t-<id> -> kvrt-<id>: a name without the "kvring-" prefix. */
	snprintf(want, sizeof(want), "kvrt%.40s",
		 named.name + strlen("kvring-t"));
	snprintf(named.name, sizeof(named.name), "%.40s", want);
	snprintf(named.ctl_name, sizeof(named.ctl_name), "%.40s.ctl",
		 named.name);
	t_server_start(&named, NULL);
	/* Another program's files with the same suffixes: never listed. */
	for (int i = 0; i < 2; i++) {
		snprintf(stranger[i], sizeof(stranger[i]),
			 "/dev/shm/kvrt-stranger-%d.%s", (int)getpid(),
			 i ? "pool" : "ctl");
		fd = open(stranger[i], O_CREAT | O_WRONLY | O_TRUNC, 0600);
		cr_assert_geq(fd, 0, "%s: %s", stranger[i], strerror(errno));
		cr_assert_eq(write(fd, "not a kvring segment\n", 21), 21);
		close(fd);
	}
	r = RUN("--list");
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "name=%s.ctl role=ctl state=live ",
		 named.name);
	cr_expect(strstr(r.out, want), "%s not listed:\n%s", want, r.out);
	snprintf(want, sizeof(want), "name=%s.pool role=pool state=live ",
		 named.name);
	cr_expect(strstr(r.out, want), "%s not listed:\n%s", want, r.out);
	/* The suite's own kvring-t-* server is still listed too. */
	snprintf(want, sizeof(want), "name=%s.ctl role=ctl state=live ",
		 srv.name);
	cr_expect(strstr(r.out, want), "%s not listed:\n%s", want, r.out);
	line = strstr(r.out, "kvrt-stranger-");
	cr_expect(!line, "another program's file listed: %.120s", line);
	run_free(&r);
}

#endif /* live tests */
