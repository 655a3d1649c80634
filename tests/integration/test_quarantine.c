/* SPDX-License-Identifier: MIT */
/*
 * Description: the slot quarantine against a real kvringd and real worker
 * processes (libkvring in forked children) stopped with real SIGSTOP. A
 * worker prepares a transfer, is stopped past its deadline (--xfer-ms),
 * and the test stores, evicts and reads with other workers meanwhile;
 * then the stopped worker resumes and finishes what it was doing (a copy
 * into its old slot, or a read out of it) before it answers. Every reader
 * must see exactly the bytes that were committed, with checksums off, and
 * the quarantined bytes must come back by each of the three ways: the
 * worker answers (late commit or abort), its process dies, or it closes
 * its channel and then exits. A stopped worker holds no more than its
 * quota.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/error.h>
#include <kvring/kvring.h>

#include "t_json.h"
#include "t_raw.h"
#include "t_server.h"
#include "t_shm.h"

#define CHUNK (1u << 20)

static struct kvrd srv;
/* The stopped worker, killed by kill_sleeper() if a test fails first. */
static pid_t sleeper_pid;

/* What the stopped worker does once it is continued. */
enum resume_mode {
	RESUME_COMMIT = 1, /* finish the copy, then the late commit */
	RESUME_ABORT = 2,  /* finish the copy, then abort */
	RESUME_CLOSE = 3,  /* finish the copy, close, wait to be told */
	RESUME_READ = 4,   /* read its retrieve slot, then commit it */
	RESUME_MORE = 5,   /* try one more store before answering */
};

/*
 * Shared between the test and its stopped worker (t_shm_anon survives the
 * fork). The worker writes everything but `go`; the test reads it after
 * the waits below, which order the accesses (the worker is stopped, or
 * has published `phase` with a seq_cst store).
 */
struct sleeper {
	_Atomic int phase; /* 1: holds its transfer, 2: answered, 3: closed */
	_Atomic int go;	   /* test -> worker: exit now (RESUME_CLOSE) */
	int mode, nkeys;
	uint32_t chan;
	uint64_t off[4];
	int prepare_rc, answer_rc, more_status, more_rc;
	uint64_t bad_bytes; /* RESUME_READ: bytes that differed */
	char msg[200];
};

static const char *const base_args[] = {
    "--xfer-ms", "300", "--heartbeat-ms", "20", "--stall-ms", "200", NULL,
};

static void start(const char *const *more)
{
	const char *args[24];
	int n = 0;

	for (int i = 0; base_args[i]; i++)
		args[n++] = base_args[i];
	for (int i = 0; more && more[i]; i++)
		args[n++] = more[i];
	args[n] = NULL;
	t_server_init(&srv);
	t_server_start(&srv, args);
}

static void finish(void)
{
	cr_expect_eq(t_server_stop(&srv), 0, "kvringd did not exit cleanly");
	t_server_cleanup(&srv);
}

static struct kvr_key key(uint64_t tag, uint32_t i)
{
	return (struct kvr_key){.lo = 0x9a7a000000000000ull | i, .hi = tag};
}

static struct kvr_client *client(char *err, size_t len)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;

	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	if (kvr_connect(&o, &c, err, len) < 0)
		return NULL;
	return c;
}

/* Store @n keys of @tag, each filled with @byte; abort the test on error.
 * The offsets go to @off (may be NULL). */
static void store(struct kvr_client *c, uint64_t tag, uint32_t n,
		  unsigned char byte, uint64_t *off)
{
	struct kvr_key k[64];
	uint64_t sz[64];
	struct kvr_xfer x = {0};
	long rc;

	cr_assert_leq(n, 64u);
	for (uint32_t i = 0; i < n; i++) {
		k[i] = key(tag, i);
		sz[i] = CHUNK;
	}
	rc = kvr_prepare_store(c, k, sz, n, &x);
	cr_assert_geq(rc, 0, "prepare_store: %s", kvr_client_errmsg(c));
	for (uint32_t i = 0; i < x.nslots; i++) {
		if (x.slots[i].status != KVR_SLOT_OK)
			continue;
		memset(x.slots[i].ptr, byte, x.slots[i].len);
		if (off)
			off[i] = x.slots[i].off;
	}
	rc = kvr_commit_store(c, &x);
	cr_assert_eq(rc, 0, "commit_store: %s", kvr_client_errmsg(c));
}

/* Retrieve @n keys of @tag and count the bytes that are not @byte. */
static uint64_t bad_bytes(struct kvr_client *c, uint64_t tag, uint32_t n,
			  unsigned char byte)
{
	struct kvr_key k[64];
	struct kvr_xfer x = {0};
	uint64_t bad = 0;
	long rc;

	for (uint32_t i = 0; i < n; i++)
		k[i] = key(tag, i);
	rc = kvr_prepare_retrieve(c, k, n, &x);
	cr_assert(rc == 0 && x.nslots == n, "retrieve: %ld, %u of %u: %s", rc,
		  x.nslots, n, kvr_client_errmsg(c));
	for (uint32_t i = 0; i < x.nslots; i++) {
		const unsigned char *p = x.slots[i].ptr;

		for (uint64_t j = 0; j < x.slots[i].len; j++)
			bad += p[j] != byte;
	}
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);
	return bad;
}

/* ---- the worker that is stopped ---- */

static void sleeper_store(struct sleeper *sl, struct kvr_client *c)
{
	struct kvr_key k[4];
	uint64_t sz[4];
	struct kvr_xfer x = {0};

	for (int i = 0; i < sl->nkeys; i++) {
		k[i] = key(0x51, (uint32_t)i);
		sz[i] = CHUNK;
	}
	sl->prepare_rc = kvr_prepare_store(c, k, sz, (uint32_t)sl->nkeys, &x);
	if (sl->prepare_rc < 0 || x.nslots != (uint32_t)sl->nkeys ||
	    x.slots[sl->nkeys - 1].status != KVR_SLOT_OK) {
		snprintf(sl->msg, sizeof(sl->msg), "%s", kvr_client_errmsg(c));
		_exit(3);
	}
	for (int i = 0; i < sl->nkeys; i++)
		sl->off[i] = x.slots[i].off;
	sl->chan = kvr_client_info(c)->channel;
	atomic_store(&sl->phase, 1);
	raise(SIGSTOP);
	/* Resumed: the copy that was under way when it stopped completes
	 * over whatever the slot holds now. */
	for (uint32_t i = 0; i < x.nslots; i++)
		memset(x.slots[i].ptr, 0xAA, x.slots[i].len);
	if (sl->mode == RESUME_MORE) {
		struct kvr_key mk = key(0x52, 0);
		uint64_t msz = CHUNK;
		struct kvr_xfer mx = {0};

		sl->more_rc = kvr_prepare_store(c, &mk, &msz, 1, &mx);
		sl->more_status = mx.nslots ? mx.slots[0].status : -1;
		if (mx.id)
			(void)kvr_abort_store(c, &mx);
		else
			kvr_xfer_free(&mx);
	}
	if (sl->mode == RESUME_CLOSE) {
		kvr_xfer_free(&x);
		kvr_close(c);
		atomic_store(&sl->phase, 3);
		while (!atomic_load(&sl->go))
			usleep(1000);
		_exit(0);
	}
	if (sl->mode == RESUME_ABORT)
		sl->answer_rc = kvr_abort_store(c, &x);
	else
		sl->answer_rc = kvr_commit_store(c, &x);
	snprintf(sl->msg, sizeof(sl->msg), "%s", kvr_client_errmsg(c));
	atomic_store(&sl->phase, 2);
}

static void sleeper_read(struct sleeper *sl, struct kvr_client *c)
{
	struct kvr_key k = key(0x53, 0);
	struct kvr_xfer x = {0};

	store(c, 0x53, 1, 0x77, NULL);
	sl->prepare_rc = kvr_prepare_retrieve(c, &k, 1, &x);
	if (sl->prepare_rc < 0 || x.nslots != 1)
		_exit(3);
	sl->off[0] = x.slots[0].off;
	sl->chan = kvr_client_info(c)->channel;
	atomic_store(&sl->phase, 1);
	raise(SIGSTOP);
	/* Resumed in the middle of its read: the rest of the read. */
	for (uint64_t j = 0; j < x.slots[0].len; j++)
		sl->bad_bytes +=
		    ((const unsigned char *)x.slots[0].ptr)[j] != 0x77;
	sl->answer_rc = kvr_commit_retrieve(c, &x);
	snprintf(sl->msg, sizeof(sl->msg), "%s", kvr_client_errmsg(c));
	atomic_store(&sl->phase, 2);
}

static void sleeper_main(struct sleeper *sl)
{
	char err[200];
	struct kvr_client *c = client(err, sizeof(err));

	if (!c)
		_exit(2);
	if (sl->mode == RESUME_READ)
		sleeper_read(sl, c);
	else
		sleeper_store(sl, c);
	kvr_close(c);
	_exit(0);
}

/* Fork a worker that takes its transfer and stops; return once it is
 * stopped. */
static pid_t sleeper_start(struct sleeper *sl, int mode, int nkeys)
{
	int wst = 0;
	pid_t pid;

	sl->mode = mode;
	sl->nkeys = nkeys;
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		sleeper_main(sl);
	sleeper_pid = pid;
	cr_assert_eq(waitpid(pid, &wst, WUNTRACED), pid);
	cr_assert(WIFSTOPPED(wst),
		  "the worker did not stop: status %#x, prepare %d: %s", wst,
		  sl->prepare_rc, sl->msg);
	cr_assert_eq(atomic_load(&sl->phase), 1);
	return pid;
}

static int sleeper_finish(pid_t pid)
{
	int wst = 0;

	cr_assert_eq(waitpid(pid, &wst, 0), pid);
	sleeper_pid = 0;
	return WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
}

/* Criterion's .fini: a failed assertion must not leave a stopped child
 * (it would hold ctest's output pipe open). */
static void kill_sleeper(void)
{
	if (sleeper_pid > 0) {
		kill(sleeper_pid, SIGKILL);
		(void)waitpid(sleeper_pid, NULL, 0);
		sleeper_pid = 0;
	}
	t_server_cleanup(&srv);
}

static bool reclaimed(void *arg)
{
	uint32_t ch = *(uint32_t *)arg;

	return T_CSTAT(&srv, ch, xfers_expired) >= 1 &&
	       T_CSTAT(&srv, ch, transfers) == 0;
}

/* Wait until the stopped worker's deadline reclaimed its transfer. */
static void wait_reclaimed(struct sleeper *sl)
{
	cr_assert(t_wait_until(reclaimed, &sl->chan, 10000),
		  "the stopped worker's transfer was never reclaimed");
}

/*
 * The corruption this file exists for: the stopped worker's slot is
 * reclaimed, another worker's chunk lands there, the stopped worker
 * resumes and its copy completes. The other chunk must read back exactly.
 */
Test(quarantine, resumed_copy_never_reaches_another_workers_chunk,
     .fini = kill_sleeper, .timeout = 60)
{
	struct sleeper *sl = t_shm_anon(sizeof(*sl));
	char err[200];
	struct kvr_client *b;
	uint64_t boff[2] = {0};
	pid_t pid;

	start(NULL);
	pid = sleeper_start(sl, RESUME_COMMIT, 2);
	wait_reclaimed(sl);
	b = client(err, sizeof(err));
	cr_assert_not_null(b, "connect: %s", err);
	store(b, 0xb, 2, 0xBB, boff);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			cr_expect(boff[i] + CHUNK <= sl->off[j] ||
				      sl->off[j] + CHUNK <= boff[i],
				  "a slot of the stopped worker [%llu] was "
				  "given to another at %llu",
				  (unsigned long long)sl->off[j],
				  (unsigned long long)boff[i]);
	kill(pid, SIGCONT);
	cr_assert_eq(sleeper_finish(pid), 0);
	cr_expect_eq(sl->answer_rc, KVR_ERR_EXPIRED, "late commit: %d (%s)",
		     sl->answer_rc, sl->msg);
	cr_expect_eq(bad_bytes(b, 0xb, 2, 0xBB), 0u,
		     "the resumed copy overwrote another worker's chunk");
	kvr_close(b);
	t_shm_unmap(sl, sizeof(*sl));
	finish();
}

/* Whether [off, off + CHUNK) overlaps any of @n slots at @offs. */
static bool overlaps(uint64_t off, const uint64_t *offs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (offs[i] < off + CHUNK && off < offs[i] + CHUNK)
			return true;
	return false;
}

/*
 * Connect another worker (returned in *out) and store @rounds batches of
 * 8 chunks of @byte through it, tags from @tag0: whether any of them got
 * one of the first @held slots the sleeper @sl still holds.
 */
static bool others_take_held_slot(const struct sleeper *sl, int held,
				  uint64_t tag0, uint64_t rounds,
				  unsigned char byte, struct kvr_client **out)
{
	char err[200];
	uint64_t off[8];
	bool hit = false;

	*out = client(err, sizeof(err));
	cr_assert_not_null(*out, "connect: %s", err);
	for (uint64_t round = 0; round < rounds; round++) {
		store(*out, tag0 + round, 8, byte, off);
		for (int j = 0; j < held; j++)
			hit |= overlaps(sl->off[j], off, 8);
	}
	return hit;
}

/*
 * A reader stopped in the middle of its read past its deadline: the chunk
 * it reads must stay where it is, however hard other workers push the
 * pool into eviction, until the reader answered.
 */
Test(quarantine, resumed_read_finds_its_chunk_whatever_was_evicted,
     .fini = kill_sleeper, .timeout = 60)
{
	struct sleeper *sl = t_shm_anon(sizeof(*sl));
	struct kvr_client *b;
	pid_t pid;

	start(NULL);
	pid = sleeper_start(sl, RESUME_READ, 1);
	wait_reclaimed(sl);
	/* 96 chunks through a 64-chunk pool: every unpinned chunk goes. */
	cr_expect(!others_take_held_slot(sl, 1, 0x1000, 12, 0xCC, &b),
		  "the stopped reader's slot was given to another");
	kill(pid, SIGCONT);
	cr_assert_eq(sleeper_finish(pid), 0);
	cr_expect_eq(sl->bad_bytes, 0u,
		     "the resumed read found other bytes than it retrieved");
	cr_expect_eq(sl->answer_rc, KVR_ERR_EXPIRED, "late commit: %d (%s)",
		     sl->answer_rc, sl->msg);
	kvr_close(b);
	t_shm_unmap(sl, sizeof(*sl));
	finish();
}

/* kvring-inspect's whole output with @flag, in a malloc'd string. */
static char *inspect(const char *flag)
{
	char cmd[512], *out = calloc(1, 1 << 20);
	size_t n = 0, got;
	FILE *p;

	cr_assert_not_null(out);
	snprintf(cmd, sizeof(cmd), "%s/tools/kvring-inspect --name %s %s",
		 KVR_BIN_DIR, srv.name, flag);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (n < (1u << 20) - 1 &&
	       (got = fread(out + n, 1, (1u << 20) - 1 - n, p)) > 0)
		n += got;
	cr_expect_eq(pclose(p), 0, "%s failed", cmd);
	return out;
}

/* What the inspector shows of a quarantine of @bytes, in every format. */
static void expect_inspector_shows(uint64_t bytes, uint64_t detached)
{
	char *text = inspect("--json"), *prom, want[128];
	struct t_json *j = t_json_parse(text, NULL, 0);

	cr_assert_not_null(j, "--json: not JSON");
	cr_expect_eq(t_json_int(j, "quarantine.bytes", -1), (long long)bytes);
	cr_expect_eq(t_json_int(j, "quarantine.slots", -1), 2);
	cr_expect_eq(t_json_int(j, "quarantine.detached_channels", -1),
		     (long long)detached);
	cr_expect(t_json_has(j, "quarantine.released_answered"));
	t_json_free(j);
	free(text);
	prom = inspect("--prometheus");
	snprintf(want, sizeof(want), "\nkvring_quarantine_bytes %llu\n",
		 (unsigned long long)bytes);
	cr_expect_not_null(strstr(prom, want), "no %s", want + 1);
	cr_expect_not_null(
	    strstr(prom, "kvring_quarantine_released_total{way=\"answered\"}"));
	free(prom);
	text = inspect("");
	cr_expect_not_null(strstr(text, "quarantine"), "text: no quarantine");
	free(text);
}

#define QUAR(field) atomic_load(&srv.hdr->quar.field)

static bool quarantine_empty(void *arg)
{
	(void)arg;
	return QUAR(xfers) == 0 && QUAR(bytes) == 0 && QUAR(detached) == 0 &&
	       T_GSTAT(&srv, reserved_bytes) == 0;
}

/* The worker answers with a late abort: its slots come back at once. */
Test(quarantine, released_when_the_worker_aborts, .fini = kill_sleeper,
     .timeout = 60)
{
	struct sleeper *sl = t_shm_anon(sizeof(*sl));

	start(NULL);
	sleeper_start(sl, RESUME_ABORT, 2);
	wait_reclaimed(sl);
	cr_expect_eq(T_CSTAT(&srv, sl->chan, quar_slots), 2u);
	cr_expect_eq(T_CSTAT(&srv, sl->chan, quar_bytes), 2u * CHUNK);
	cr_expect_eq(QUAR(xfers), 1u);
	cr_expect_eq(QUAR(bytes), 2u * CHUNK);
	cr_expect_eq(QUAR(reclaimed), 1u);
	expect_inspector_shows(2u * CHUNK, 0);
	kill(sleeper_pid, SIGCONT);
	cr_assert_eq(sleeper_finish(sleeper_pid), 0);
	cr_expect_eq(sl->answer_rc, KVR_ERR_EXPIRED, "late abort: %d (%s)",
		     sl->answer_rc, sl->msg);
	cr_expect(t_wait_until(quarantine_empty, NULL, 5000),
		  "quarantine left: %llu bytes",
		  (unsigned long long)QUAR(bytes));
	cr_expect_eq(QUAR(released[0]), 1u, "not counted as answered");
	cr_expect(t_server_log_has(&srv, "reclaimed at their deadline"),
		  "no log line for the reclaim");
	t_shm_unmap(sl, sizeof(*sl));
	finish();
}

/* The stopped worker is killed: its process is gone, so are its slots. */
Test(quarantine, released_when_the_stopped_worker_is_killed,
     .fini = kill_sleeper, .timeout = 60)
{
	struct sleeper *sl = t_shm_anon(sizeof(*sl));

	start(NULL);
	sleeper_start(sl, RESUME_COMMIT, 2);
	wait_reclaimed(sl);
	cr_expect_eq(QUAR(bytes), 2u * CHUNK);
	kill(sleeper_pid, SIGKILL);
	cr_expect_eq(sleeper_finish(sleeper_pid), 128 + SIGKILL);
	cr_expect(t_wait_until(quarantine_empty, NULL, 5000),
		  "quarantine left: %llu bytes",
		  (unsigned long long)QUAR(bytes));
	/* Counted as gone at the close, or (its socket usually closes a
	 * moment before its exit completes) as exited after the close. */
	cr_expect_eq(QUAR(released[1]) + QUAR(released[2]), 1u,
		     "not counted as exited");
	cr_expect_eq(QUAR(released[0]), 0u);
	t_shm_unmap(sl, sizeof(*sl));
	finish();
}

static bool detached_one(void *arg)
{
	(void)arg;
	return QUAR(detached) == 1;
}

/*
 * The worker resumes, finishes its copy and closes its client without
 * answering, but its process lives on (another thread could still be
 * copying): the channel's quarantine stays until the process exits.
 */
Test(quarantine, released_when_the_worker_closes_and_then_exits,
     .fini = kill_sleeper, .timeout = 60)
{
	struct sleeper *sl = t_shm_anon(sizeof(*sl));
	struct kvr_client *b;

	start(NULL);
	sleeper_start(sl, RESUME_CLOSE, 2);
	wait_reclaimed(sl);
	kill(sleeper_pid, SIGCONT);
	cr_assert(t_wait_until(detached_one, NULL, 5000),
		  "the closed channel was not kept for its live process");
	cr_expect_eq(atomic_load(&sl->phase), 3);
	cr_expect_eq(QUAR(bytes), 2u * CHUNK);
	cr_expect_eq(T_GSTAT(&srv, workers), 0u);
	expect_inspector_shows(2u * CHUNK, 1);
	/* Others store meanwhile, never into those slots. */
	cr_expect(!others_take_held_slot(sl, 2, 0x2000, 10, 0xDD, &b),
		  "a detached channel's slot was given to another");
	cr_expect_eq(bad_bytes(b, 0x2009, 8, 0xDD), 0u);
	kvr_close(b);
	atomic_store(&sl->go, 1);
	cr_assert_eq(sleeper_finish(sleeper_pid), 0);
	cr_expect(t_wait_until(quarantine_empty, NULL, 5000),
		  "quarantine left: %llu bytes, %llu detached",
		  (unsigned long long)QUAR(bytes),
		  (unsigned long long)QUAR(detached));
	cr_expect_eq(QUAR(released[2]), 1u, "not counted as closed");
	t_shm_unmap(sl, sizeof(*sl));
	finish();
}

/* A stopped worker holds no more than its quota: its quarantine counts
 * against --quota-reserved, and a store past it is refused. */
Test(quarantine, stopped_worker_holds_no_more_than_its_quota,
     .fini = kill_sleeper, .timeout = 60)
{
	const char *const more[] = {"--quota-reserved", "2M", NULL};
	struct sleeper *sl = t_shm_anon(sizeof(*sl));

	start(more);
	sleeper_start(sl, RESUME_MORE, 2);
	wait_reclaimed(sl);
	cr_expect_eq(T_CSTAT(&srv, sl->chan, reserved_bytes), 2u * CHUNK);
	cr_expect_eq(T_CSTAT(&srv, sl->chan, quar_bytes), 2u * CHUNK);
	kill(sleeper_pid, SIGCONT);
	cr_assert_eq(sleeper_finish(sleeper_pid), 0);
	cr_expect_eq(sl->more_status, KVR_SLOT_QUOTA,
		     "a store past the quota with quarantine held: status %d "
		     "(rc %d)",
		     sl->more_status, sl->more_rc);
	cr_expect_eq(sl->answer_rc, KVR_ERR_EXPIRED);
	cr_expect(t_wait_until(quarantine_empty, NULL, 5000));
	t_shm_unmap(sl, sizeof(*sl));
	finish();
}
