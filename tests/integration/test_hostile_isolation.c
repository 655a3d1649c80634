/* SPDX-License-Identifier: MIT */
/*
 * Description: a worker reaches only its own channel: it cannot write the
 * header, another channel or the control descriptor, cannot read another
 * channel's identity or another namespace's model, and all channels of a
 * uid share its quota.
 * Each against a real kvringd, beside a well-behaved worker
 * (hostile_suite.h).
 */
#include "hostile_suite.h"

/*
 * Runs @fn in a forked child and returns its wait status. A write through
 * a read-only mapping kills the child with SIGSEGV, not the test.
 */
static int in_child(void (*fn)(struct t_raw *), struct t_raw *r)
{
	pid_t pid;
	int st = 0;

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		fn(r);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return st;
}

static void xor_boot_id(struct t_raw *r)
{
	struct kvr_seg_hdr_shm *h = r->ctl;

	h->boot_id[0] ^= 0x5a;
}

/*
 * Observed on main: one byte XORed into the shared header's boot id broke
 * every connected worker, and every later kvr_connect failed with -EPROTO
 * (saying "pool 67108864, expected 67108864 bytes") until the server
 * restarted. Now the control segment is mapped read-only from a
 * read-only descriptor: the write faults in the hostile worker alone, the
 * header is unchanged, the good worker goes on, and a new worker
 * connects.
 */
Test(hostile, worker_cannot_write_the_header)
{
	uint8_t boot[16];
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	char err[256] = "";
	struct t_raw r;
	int st, rc;

	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0, "%s", r.w.reason);
	memcpy(boot, srv.hdr->seg.boot_id, sizeof(boot));
	st = in_child(xor_boot_id, &r);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		  "a worker wrote the header's boot id (status 0x%x)", st);
	cr_expect(memcmp(boot, srv.hdr->seg.boot_id, sizeof(boot)) == 0,
		  "the header's boot id changed");
	expect_good_progress(20, "after the header write");
	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	rc = kvr_connect(&o, &c, err, sizeof(err));
	cr_expect_eq(rc, 0, "a new worker cannot connect: %d %s", rc, err);
	kvr_close(c);
	t_raw_close(&r);
	expect_no_leak("after the header write");
	finish();
}

/* Writes garbage over every byte of the control mapping past the segment
 * header: on main that held every channel's block, rings included. */
static void scribble_control(struct t_raw *r)
{
	char *p = (char *)r->ctl + sizeof(struct kvr_ctl_hdr_shm);

	for (size_t i = 0; i + sizeof(struct kvr_ctl_hdr_shm) < r->ctl_bytes;
	     i++)
		p[i] = (char)(0xa5 ^ i);
}

/*
 * Observed on main: every worker mapped the whole control segment
 * read-write, so one could write into any other worker's request ring;
 * garbage there got the victim disconnected, and a forged ABORT_STORE
 * was executed as the neighbour. Now the only control memory a worker can
 * write is its own channel block: writing anywhere else it has mapped
 * faults in the hostile worker, and the good worker (the neighbour) never
 * notices. The hostile worker also holds real things, which stay its own.
 */
Test(hostile, worker_cannot_write_another_channel)
{
	struct t_raw r;
	int st;

	expect_good_progress(10, "before");
	hostile_connect_and_hold(&r, 1200);
	st = in_child(scribble_control, &r);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		  "a worker wrote over the control segment past its header "
		  "(status 0x%x)",
		  st);
	expect_good_progress(20, "after the scribble");
	cr_expect(!t_server_log_has(&srv, "protocol error"),
		  "someone was cut off for bytes it did not write");
	/* The hostile worker's own channel still serves it. */
	cr_expect(chan_holds(&r), "the hostile worker's holdings moved");
	t_raw_close(&r);
	expect_no_leak("after the scribble");
	finish();
}

/*
 * The control descriptor itself cannot give a writable mapping: neither
 * mmap(PROT_WRITE, MAP_SHARED) of it nor mprotect(PROT_WRITE) of a
 * read-only mapping made from it (EACCES; EPERM from a sealed memfd),
 * even for root, who bypasses file modes. On main it was read-write.
 */
Test(hostile, control_descriptor_cannot_be_made_writable)
{
	struct kvr_hello h = {0};
	struct kvr_welcome w;
	int fd, fds[T_RAW_FDS], nfds = 0;
	void *p;

	h.magic = KVR_PROTO_MAGIC;
	h.version = KVR_PROTO_VERSION;
	h.pid = (int32_t)getpid();
	t_ns_default(&h.ns);
	fd = t_raw_hello(srv.sock, &h, &w, fds, &nfds);
	cr_assert_geq(fd, 0, "handshake: %d", fd);
	cr_assert_eq(w.status, 0, "%s", w.reason);
	cr_assert_geq(nfds, 1);
	p = mmap(NULL, (size_t)w.ctl_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fds[0], 0);
	cr_expect(p == MAP_FAILED && (errno == EACCES || errno == EPERM),
		  "the control descriptor mapped writable (%s)",
		  p == MAP_FAILED ? strerror(errno) : "mapped");
	if (p != MAP_FAILED)
		munmap(p, (size_t)w.ctl_bytes);
	p = mmap(NULL, (size_t)w.ctl_bytes, PROT_READ, MAP_SHARED, fds[0], 0);
	cr_assert_neq(p, MAP_FAILED, "read-only map: %s", strerror(errno));
	cr_expect(mprotect(p, (size_t)w.ctl_bytes, PROT_READ | PROT_WRITE) <
			  0 &&
		      errno == EACCES,
		  "mprotect made the control mapping writable");
	munmap(p, (size_t)w.ctl_bytes);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	close(fd);
	expect_good_progress(20, "after the attempts");
	expect_no_leak("after the attempts");
	finish();
}

/* ---- what a worker can read ---- */

/* One shared mapping of this process, from /proc/self/maps. */
struct shmap {
	uintptr_t lo, hi;
	char name[128];
};

/* Every shared mapping this process holds now; returns how many. */
static int shared_maps(struct shmap *out, int max)
{
	char line[512], perms[8];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	cr_assert_not_null(f, "open /proc/self/maps: %s", strerror(errno));
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int off = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms,
			   &off) < 3 ||
		    perms[3] != 's' || perms[0] != 'r')
			continue;
		out[n].lo = lo;
		out[n].hi = hi;
		snprintf(out[n].name, sizeof(out[n].name), "%s",
			 off ? line + off : "");
		out[n].name[strcspn(out[n].name, "\n")] = '\0';
		n++;
	}
	fclose(f);
	return n;
}

/* Whether @m (same range) is among the @nb mappings of @before. */
static bool mapped_before(const struct shmap *before, int nb,
			  const struct shmap *m)
{
	for (int j = 0; j < nb; j++)
		if (before[j].lo == m->lo && before[j].hi == m->hi)
			return true;
	return false;
}

/* The shared mappings of this process now that are not among the @nb of
 * @before (what a kvr_connect since mapped), into @fresh (room for 256);
 * return how many. A connect maps two at least (its block, the pool). */
static int maps_since(const struct shmap *before, int nb, struct shmap *fresh)
{
	struct shmap now[256];
	int n = shared_maps(now, 256), k = 0;

	for (int i = 0; i < n; i++)
		if (!mapped_before(before, nb, &now[i]))
			fresh[k++] = now[i];
	cr_expect_geq(k, 2, "kvr_connect mapped %d new shared regions", k);
	return k;
}

/* Offset of the first @len-byte, @align-aligned copy of @pat in [lo, hi),
 * or -1. */
static long find_pattern(uintptr_t lo, uintptr_t hi, const void *pat,
			 size_t len, size_t align)
{
	for (uintptr_t p = lo; p + len <= hi; p += align)
		if (memcmp((const void *)p, pat, len) == 0)
			return (long)(p - lo);
	return -1;
}

/* Expect the @len bytes at @pat (@align-aligned) in none of the @n
 * mappings @m; @what ("X is") names them in the failure. */
static void expect_unreadable(const struct shmap *m, int n, const void *pat,
			      size_t len, size_t align, const char *what)
{
	for (int i = 0; i < n; i++) {
		long at = find_pattern(m[i].lo, m[i].hi, pat, len, align);

		cr_expect_eq(at, -1, "%s readable at +%ld of %s", what, at,
			     m[i].name);
	}
}

/* Whether the @len bytes at @pat (@align-aligned) are in one of the @n
 * mappings @m: the scan can see them at all. */
static bool found_in(const struct shmap *m, int n, const void *pat, size_t len,
		     size_t align)
{
	for (int i = 0; i < n; i++)
		if (find_pattern(m[i].lo, m[i].hi, pat, len, align) >= 0)
			return true;
	return false;
}

/*
 * Observed on main: every worker could read the whole channel directory
 * in its read-only control mapping: every other channel's pid, uid,
 * pid start time, namespace and transport. The rule is that a worker
 * never sees what is not its own. A worker connected with libkvring
 * scans every shared mapping kvr_connect gave it (control segment, its
 * block, the pool) for the good worker's (pid, uid) pair and its start
 * time, and finds neither; its own pair, in its own block, it does find
 * (so the scan can see a pair at all).
 */
Test(hostile, worker_cannot_read_another_channels_identity)
{
	struct shmap before[256], after[256];
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	int32_t theirs[2] = {(int32_t)good_pid, (int32_t)getuid()};
	int32_t mine[2] = {(int32_t)getpid(), (int32_t)getuid()};
	uint64_t their_start = 0;
	char err[256] = "";
	int nb, na;
	char what[160];

	expect_good_progress(10, "before");
	cr_assert_eq(kvr_proc_start_time(good_pid, &their_start), 0);
	/* Only what kvr_connect maps counts: the test's own harness maps
	 * the directory and other blocks on purpose (t_server_chan). */
	nb = shared_maps(before, 256);
	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	na = maps_since(before, nb, after);
	snprintf(what, sizeof(what), "the good worker's pid %d and uid %d are",
		 theirs[0], theirs[1]);
	expect_unreadable(after, na, theirs, sizeof(theirs), 4, what);
	snprintf(what, sizeof(what), "the good worker's start time %llu is",
		 (unsigned long long)their_start);
	expect_unreadable(after, na, &their_start, sizeof(their_start), 8,
			  what);
	cr_expect(found_in(after, na, mine, sizeof(mine), 4),
		  "the scan did not find our own pid and uid");
	kvr_close(c);
	expect_good_progress(20, "after the scan");
	expect_no_leak("after the scan");
	finish();
}

/* kvring-inspect --prometheus has a per-namespace line (kvring_namespace_*)
 * for model @model: the server published that namespace's slot. */
static bool inspector_has_namespace(void *model)
{
	char cmd[512], line[1024], want[160];
	bool found = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "%s/tools/kvring-inspect --name %s --prometheus 2>/dev/null",
		 KVR_BIN_DIR, srv.name);
	snprintf(want, sizeof(want), "model=\"%s\"", (const char *)model);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p))
		if (strncmp(line, "kvring_namespace_", 17) == 0 &&
		    strstr(line, want))
			found = true;
	pclose(p);
	return found;
}

/*
 * Observed on main (abi 4.1): the control segment every worker maps
 * read-only held every namespace's slot: each tenant's model name,
 * layout, tp rank and cache counters. The rule is that a worker never
 * sees what is not its own. Tenant B connects with a model of its own
 * and the server publishes B's namespace (the inspector, as root, shows
 * it); then a worker of tenant A connects with libkvring and scans every
 * shared mapping kvr_connect gave it (control segment, its block, the
 * pool) for B's model name, and does not find it. Its own model name,
 * in its own block, it does find (so the scan can see a name at all).
 */
Test(hostile, worker_cannot_read_another_namespaces_model)
{
	static char theirs[] = "tenant-b-secret-model";
	static const char mine[] = "tenant-a-own-model";
	struct shmap before[256], after[256];
	struct kvr_client_opts o = {0};
	struct kvr_client *a = NULL, *b = NULL;
	char err[256] = "";
	int nb, na;
	char what[160];

	expect_good_progress(10, "before");
	o.socket_path = srv.sock;
	o.no_prefault = true;
	t_ns_default(&o.ns);
	snprintf(o.ns.model, sizeof(o.ns.model), "%s", theirs);
	cr_assert_eq(kvr_connect(&o, &b, err, sizeof(err)), 0, "B: %s", err);
	cr_assert(t_wait_until(inspector_has_namespace, theirs, 5000),
		  "the inspector never showed namespace %s", theirs);
	/* Only what A's kvr_connect maps counts: B's own mappings, and
	 * the harness's, are before. */
	nb = shared_maps(before, 256);
	snprintf(o.ns.model, sizeof(o.ns.model), "%s", mine);
	cr_assert_eq(kvr_connect(&o, &a, err, sizeof(err)), 0, "A: %s", err);
	na = maps_since(before, nb, after);
	snprintf(what, sizeof(what), "tenant B's model name \"%s\" is", theirs);
	expect_unreadable(after, na, theirs, sizeof(theirs), 1, what);
	cr_expect(found_in(after, na, mine, sizeof(mine), 1),
		  "the scan did not find our own model name");
	kvr_close(a);
	kvr_close(b);
	expect_good_progress(20, "after the scan");
	expect_no_leak("after the scan");
	finish();
}

/* kvring-inspect's text output shows @key=@want for some line. */
static bool inspector_shows(const char *key, unsigned long long want)
{
	return inspect_has(hostile_inspect(), key, want);
}

/*
 * Observed on main: quotas were per channel only, so one uid multiplied
 * its caps by opening channels. Here one uid opens three channels; each
 * asks for a quarter of the pool (two keys of an eighth: within its
 * channel's 25%), together three quarters, past the uid's default 50%.
 * The third gets "quota" for both keys and evicts nobody, while a good
 * worker of another uid (65534, admitted by --group) keeps storing and
 * verifying its bytes; the inspector shows the uid's use against its cap.
 */
Test(hostile, uid_quota_binds_all_channels_of_one_uid)
{
	static const char *const extra[] = {"--group", "65534", NULL};
	union ans *a = malloc(sizeof(*a));
	uint64_t handle[3] = {0}, sz[2], ev, pool, uquota;
	uint32_t ok[3] = {0}, quota[3] = {0};
	struct t_raw r[3];

	cr_assert_not_null(a);
	if (geteuid() != 0)
		cr_skip("needs root to run the good worker as another uid");
	good_uid = 65534;
	restart_with(extra);
	expect_good_progress(10, "before");
	ev = T_GSTAT(&srv, evictions);
	for (int c = 0; c < 3; c++) {
		struct kvr_key k[2] = {bad_key(7000 + 10 * (uint64_t)c),
				       bad_key(7001 + 10 * (uint64_t)c)};

		cr_assert_eq(t_raw_connect(srv.sock, 0, &r[c]), 0, "%s",
			     r[c].w.reason);
		sz[0] = sz[1] = r[c].w.pool_bytes / 8;
		t_raw_call(&r[c], KVR_OP_PREPARE_STORE, 0, 0, k, sz, 2, a,
			   sizeof(*a));
		cr_assert_eq(a->h.status, 0, "channel %d: status %d", c,
			     a->h.status);
		handle[c] = a->h.handle;
		for (uint32_t i = 0; i < a->h.count; i++) {
			ok[c] += ans_slots(a)[i].status == KVR_SLOT_OK;
			quota[c] += ans_slots(a)[i].status == KVR_SLOT_QUOTA;
		}
	}
	pool = r[0].w.pool_bytes;
	uquota = srv.hdr->quota_uid_reserved_bytes;
	cr_expect_eq(ok[0] + ok[1], 4u, "the first two channels: %u + %u OK",
		     ok[0], ok[1]);
	cr_expect_eq(quota[2], 2u,
		     "the third channel of one uid got %u OK and %u quota "
		     "(uid quota %llu of a %llu-byte pool)",
		     ok[2], quota[2], (unsigned long long)uquota,
		     (unsigned long long)pool);
	cr_expect_eq(T_GSTAT(&srv, evictions), ev,
		     "objects were evicted for the refused keys");
	expect_good_progress(20, "while one uid holds its uid quota");
	cr_expect(inspector_shows("uids.0.channels", 3),
		  "kvring-inspect does not show 3 channels for uid 0");
	cr_expect(inspector_shows("uids.0.reserved_bytes", pool / 4 * 2),
		  "kvring-inspect does not show uid 0's reserved bytes");
	cr_expect(inspector_shows("uids.0.reserved_quota_bytes", uquota),
		  "kvring-inspect does not show the uid quota");
	cr_expect(inspector_shows("uids.65534.channels", 1),
		  "kvring-inspect does not show the good worker's uid");
	for (int c = 0; c < 3; c++) {
		if (handle[c])
			t_raw_call(&r[c], KVR_OP_ABORT_STORE, handle[c], 0,
				   NULL, NULL, 0, a, sizeof(*a));
		t_raw_close(&r[c]);
	}
	free(a);
	expect_no_leak("after the uid quota test");
	finish();
}
