/* SPDX-License-Identifier: MIT */
/*
 * Description: workers that try to hold what is not theirs: a pool-sized key,
 * a worker stopped past its deadline, leases of another model or uid.
 * Each against a real kvringd, beside a well-behaved worker
 * (hostile_suite.h).
 */
#include "hostile_suite.h"

/*
 * Observed on main: one prepare_store of a pool-sized key was accepted,
 * evicted every other worker's objects, and every other store got NOROOM
 * while the reservation lived. Now the per-key limit answers "quota", and
 * many large keys stop at the channel's reserve quota; the good worker
 * never notices.
 */
Test(hostile, pool_sized_key_is_refused_by_quota_and_evicts_nobody)
{
	union ans *a = malloc(sizeof(*a));
	struct kvr_key k[8];
	uint64_t sz[8], quota, ok = 0, quota_n = 0;
	struct t_raw r;

	cr_assert_not_null(a);
	expect_good_progress(10, "before");
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0, "%s", r.w.reason);
	k[0] = bad_key(4000);
	sz[0] = r.w.pool_bytes;
	t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 1, a, sizeof(*a));
	cr_assert_eq(a->h.status, 0, "status %d", a->h.status);
	cr_assert_eq(a->h.count, 1);
	cr_expect_eq(ans_slots(a)[0].status, KVR_SLOT_QUOTA,
		     "a pool-sized key got status %d", ans_slots(a)[0].status);
	if (a->h.handle) /* main: it holds the whole pool; let it go */
		t_raw_call(&r, KVR_OP_ABORT_STORE, a->h.handle, 0, NULL, NULL,
			   0, a, sizeof(*a));
	expect_good_progress(20, "after the pool-sized key");
	/* Eight keys of an eighth of the pool each (the default per-key
	 * limit): only what fits in the 25% reserve quota is reserved. */
	quota = srv.hdr->quota_reserved_bytes;
	for (uint32_t i = 0; i < 8; i++) {
		k[i] = bad_key(4100 + i);
		sz[i] = r.w.pool_bytes / 8;
	}
	t_raw_call(&r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 8, a, sizeof(*a));
	cr_assert_eq(a->h.status, 0, "status %d", a->h.status);
	for (uint32_t i = 0; i < a->h.count; i++) {
		ok += ans_slots(a)[i].status == KVR_SLOT_OK;
		quota_n += ans_slots(a)[i].status == KVR_SLOT_QUOTA;
	}
	cr_expect_gt(quota, 0u, "no reserve quota in the header");
	cr_expect_leq(ok * (r.w.pool_bytes / 8), quota,
		      "%llu keys of %llu bytes reserved, quota %llu",
		      (unsigned long long)ok,
		      (unsigned long long)(r.w.pool_bytes / 8),
		      (unsigned long long)quota);
	cr_expect_eq(ok + quota_n, 8u);
	cr_expect_gt(T_CSTAT(&srv, r.w.channel, quota_denied) +
			 T_GSTAT(&srv, quota_denied),
		     0u, "quota refusals not counted");
	expect_good_progress(20, "while the hostile worker holds its quota");
	t_raw_call(&r, KVR_OP_ABORT_STORE, a->h.handle, 0, NULL, NULL, 0, a,
		   sizeof(*a));
	t_raw_close(&r);
	free(a);
	expect_no_leak("after the quota test");
	finish();
}

/* What a worker that stops itself reports back (t_shm_anon). */
struct stopper_shm {
	_Atomic uint32_t ready;
	uint32_t chan;
	int commit_store_rc;
	int commit_retrieve_rc;
	int connect_rc;
	char store_msg[200];
};

static struct kvr_key stop_key(uint32_t i)
{
	struct kvr_key k = {.lo = 0x5709000000000000ull | i, .hi = 77};

	return k;
}

/*
 * A worker that holds everything a worker can hold (a lease, an open
 * retrieve with pins, an open store with a reservation) and then stops
 * itself with SIGSTOP. After SIGCONT it commits both transfers.
 */
static void stopper_main(struct stopper_shm *st)
{
	struct kvr_client_opts o = {0};
	struct kvr_key k[3] = {stop_key(0), stop_key(1), stop_key(2)};
	uint64_t sz[3] = {8192, 8192, 8192}, lease = 0;
	struct kvr_xfer xs = {0}, xr = {0};
	struct kvr_client *c;
	char err[200];

	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	st->connect_rc = kvr_connect(&o, &c, err, sizeof(err));
	if (st->connect_rc < 0)
		_exit(1);
	if (kvr_prepare_store(c, k, sz, 2, &xs) < 0 || xs.nslots != 2)
		_exit(2);
	for (uint32_t i = 0; i < 2; i++)
		memset(xs.slots[i].ptr, 0x5a, xs.slots[i].len);
	if (kvr_commit_store(c, &xs) < 0)
		_exit(3);
	if (kvr_lookup(c, k, 2, &lease) != 2 || !lease)
		_exit(4);
	if (kvr_prepare_retrieve(c, k, 2, &xr) < 0 || xr.nslots != 2)
		_exit(5);
	if (kvr_prepare_store(c, &k[2], &sz[2], 1, &xs) < 0 || xs.nslots != 1)
		_exit(6);
	memset(xs.slots[0].ptr, 0x5b, xs.slots[0].len);
	st->chan = kvr_client_info(c)->channel;
	atomic_store(&st->ready, 1);
	raise(SIGSTOP);
	st->commit_store_rc = kvr_commit_store(c, &xs);
	snprintf(st->store_msg, sizeof(st->store_msg), "%s",
		 kvr_client_errmsg(c));
	st->commit_retrieve_rc = kvr_commit_retrieve(c, &xr);
	kvr_close(c);
	_exit(0);
}

static bool stopper_ready(void *arg)
{
	return atomic_load(&((struct stopper_shm *)arg)->ready) != 0;
}

/* Its transfers reclaimed and its lease expired: what is left is its
 * quarantine, the reservation and the two pins it may still be using. */
static bool stopped_chan_holds_only_quarantine(void *arg)
{
	uint32_t ch = ((struct stopper_shm *)arg)->chan;

	return T_CSTAT(&srv, ch, leases) == 0 &&
	       T_CSTAT(&srv, ch, transfers) == 0 &&
	       T_CSTAT(&srv, ch, quar_slots) == 3 &&
	       T_CSTAT(&srv, ch, reserved_bytes) ==
		   T_CSTAT(&srv, ch, quar_bytes) - 2 * 8192u;
}

/* kvring-inspect's text output names the age of a holding and the quota. */
static void expect_inspector_shows_age(void)
{
	const char *out = hostile_inspect(), *q = out;
	bool age = false, quota;
	unsigned long long v;

	while ((q = strstr(q, "oldest_holding_age_ms=")) != NULL) {
		if (sscanf(q, "oldest_holding_age_ms=%llu", &v) == 1 && v > 0)
			age = true;
		q++;
	}
	quota = strstr(out, "quota.reserved_quota_bytes=") != NULL;
	cr_expect(age, "kvring-inspect shows no holding age");
	cr_expect(quota, "kvring-inspect shows no quota");
}

/*
 * A worker stopped with SIGSTOP while it holds a reservation, a retrieve
 * and a lease: every open transfer has a deadline (--xfer-ms 2000 here,
 * --lease-ms 2000 for the lease). Past it the lease is gone and the
 * transfers are no longer open; their slots stay in quarantine, since the
 * worker may still be copying, until its late commits (which say the
 * transfers expired) answer for them.
 */
Test(hostile, stopped_worker_holds_only_quarantine_past_its_deadline)
{
	struct stopper_shm *st = t_shm_anon(sizeof(*st));
	struct kvr_key k2 = stop_key(2);
	union ans *a = malloc(sizeof(*a));
	struct t_raw r;
	pid_t pid;
	int wst = 0;

	cr_assert_not_null(a);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		stopper_main(st);
	if (!t_wait_until(stopper_ready, st, 10000)) {
		kill(pid, SIGKILL);
		waitpid(pid, &wst, 0);
		cr_assert_fail("stopper did not get its holdings (connect %d, "
			       "exit %d)",
			       st->connect_rc,
			       WIFEXITED(wst) ? WEXITSTATUS(wst) : -1);
	}
	cr_assert_eq(waitpid(pid, &wst, WUNTRACED), pid);
	cr_assert(WIFSTOPPED(wst), "stopper did not stop: %d", wst);
	/* What it holds is visible, with its age (the inspector's view). */
	cr_expect_gt(T_CSTAT(&srv, st->chan, oldest_ns), 0u,
		     "no age for the holdings");
	expect_inspector_shows_age();
	cr_expect(t_wait_until(stopped_chan_holds_only_quarantine, st, 10000),
		  "stopped worker holds: reserved %llu pins %llu leases %llu "
		  "transfers %llu quarantine %llu slots, %llu bytes",
		  (unsigned long long)T_CSTAT(&srv, st->chan, reserved_bytes),
		  (unsigned long long)T_CSTAT(&srv, st->chan, pins),
		  (unsigned long long)T_CSTAT(&srv, st->chan, leases),
		  (unsigned long long)T_CSTAT(&srv, st->chan, transfers),
		  (unsigned long long)T_CSTAT(&srv, st->chan, quar_slots),
		  (unsigned long long)T_CSTAT(&srv, st->chan, quar_bytes));
	cr_expect_eq(T_GSTAT(&srv, workers), 2u, "reclaimed by disconnecting");
	cr_expect_eq(T_CSTAT(&srv, st->chan, xfers_expired), 2u);
	cr_expect_eq(T_CSTAT(&srv, st->chan, pins), 2u);
	cr_expect_eq(atomic_load(&srv.hdr->quar.xfers), 2u);
	expect_good_progress(20, "while a worker is stopped");
	/* Its reservation was freed, never published. */
	cr_assert_eq(t_raw_connect(srv.sock, 0, &r), 0);
	t_raw_call(&r, KVR_OP_LOOKUP, 0, 0, &k2, NULL, 1, a, sizeof(*a));
	cr_expect_eq(a->h.value, 0u, "an expired reservation was published");
	t_raw_close(&r);
	kill(pid, SIGCONT);
	cr_assert_eq(waitpid(pid, &wst, 0), pid);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "stopper: %d", wst);
	cr_expect_eq(st->commit_store_rc, KVR_ERR_EXPIRED, "commit_store: %d",
		     st->commit_store_rc);
	cr_expect_not_null(strstr(st->store_msg, "expired"),
			   "the sentence does not say it expired: %s",
			   st->store_msg);
	cr_expect_not_null(strstr(kvr_strerror(KVR_ERR_EXPIRED), "expired"));
	cr_expect_eq(st->commit_retrieve_rc, KVR_ERR_EXPIRED,
		     "commit_retrieve: %d", st->commit_retrieve_rc);
	free(a);
	t_shm_unmap(st, sizeof(*st));
	expect_no_leak("after the stopped worker");
	finish();
}

/* Store two chunks of 0x42 on @r and pin them under a lease. */
static uint64_t hold_lease(struct t_raw *r, uint64_t salt)
{
	struct kvr_key k[2] = {bad_key(salt), bad_key(salt + 1)};
	uint64_t sz[2] = {4096, 4096};
	union ans a;

	t_raw_call(r, KVR_OP_PREPARE_STORE, 0, 0, k, sz, 2, &a, sizeof(a));
	cr_assert_eq(a.h.status, 0);
	for (int i = 0; i < 2; i++)
		memset((char *)r->pool + ans_slots(&a)[i].off, 0x42, 4096);
	t_raw_call(r, KVR_OP_COMMIT_STORE, a.h.handle, 0, NULL, NULL, 0, &a,
		   sizeof(a));
	cr_assert_eq(a.h.status, 0);
	t_raw_call(r, KVR_OP_LOOKUP, 0, KVR_REQ_PIN, k, NULL, 2, &a, sizeof(a));
	cr_assert_eq(a.h.value, 2);
	cr_assert_neq(a.h.handle, 0u);
	return a.h.handle;
}

/* The lease's maker redeems it and finds its bytes. */
static void redeem_own(struct t_raw *r, uint64_t lease)
{
	union ans a;

	t_raw_call(r, KVR_OP_PREPARE_RETRIEVE, lease, KVR_REQ_BY_LEASE, NULL,
		   NULL, 0, &a, sizeof(a));
	cr_expect_eq(a.h.status, 0, "the maker cannot redeem: %d", a.h.status);
	cr_expect_eq(a.h.count, 2);
	for (uint32_t i = 0; a.h.status == 0 && i < a.h.count; i++) {
		const unsigned char *p =
		    (const unsigned char *)r->pool + ans_slots(&a)[i].off;

		for (uint32_t j = 0; j < 4096; j++)
			if (p[j] != 0x42) {
				cr_expect_fail("byte %u of slot %u is %#x", j,
					       i, p[j]);
				break;
			}
	}
	t_raw_call(r, KVR_OP_COMMIT_RETRIEVE, a.h.handle, 0, NULL, NULL, 0, &a,
		   sizeof(a));
}

/*
 * Observed on main: lease ids were sequential, and a worker of another
 * model redeemed a lease on its second guess. Now ids are 64 unguessable
 * bits, and a lease of another namespace is unknown even to a worker that
 * holds its id: the same -ENOENT as an id never issued.
 */
Test(hostile, lease_of_another_model_is_unknown_when_guessed)
{
	struct kvr_ns_desc other;
	struct t_raw ra, rb;
	union ans *a = malloc(sizeof(*a));
	struct kvr_key kb = bad_key(5100);
	uint64_t sz = 4096, lease, mine, won = 0;
	int st_real, st_unknown;

	cr_assert_not_null(a);
	cr_assert_eq(t_raw_connect(srv.sock, 0, &ra), 0);
	lease = hold_lease(&ra, 5000);
	t_ns_default(&other);
	snprintf(other.model, sizeof(other.model), "other-model");
	cr_assert_eq(t_raw_connect_ns(srv.sock, 0, &other, &rb), 0);
	/* Its own latest id is where a sequential guesser starts. */
	t_raw_call(&rb, KVR_OP_PREPARE_STORE, 0, 0, &kb, &sz, 1, a, sizeof(*a));
	cr_assert_eq(a->h.status, 0);
	mine = a->h.handle;
	for (uint64_t d = 1; d <= 2000; d++) {
		uint64_t guess[2] = {mine - d, mine + d};

		for (int i = 0; i < 2; i++) {
			t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, guess[i],
				   KVR_REQ_BY_LEASE, NULL, NULL, 0, a,
				   sizeof(*a));
			if (a->h.status == 0)
				won++;
		}
	}
	cr_expect_eq(won, 0u, "%llu guessed ids redeemed",
		     (unsigned long long)won);
	/* Even the real id: the answer of an unknown lease. */
	t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, lease, KVR_REQ_BY_LEASE, NULL,
		   NULL, 0, a, sizeof(*a));
	st_real = a->h.status;
	t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, lease ^ 0x8000000000000000ull,
		   KVR_REQ_BY_LEASE, NULL, NULL, 0, a, sizeof(*a));
	st_unknown = a->h.status;
	cr_expect_eq(st_real, -ENOENT, "another model's lease: %d", st_real);
	cr_expect_eq(st_real, st_unknown, "the answer tells the lease exists");
	t_raw_call(&rb, KVR_OP_RELEASE, lease, 0, NULL, NULL, 0, a, sizeof(*a));
	cr_expect_eq(a->h.status, -ENOENT, "release by a stranger: %d",
		     a->h.status);
	redeem_own(&ra, lease);
	t_raw_close(&rb);
	t_raw_close(&ra);
	free(a);
	expect_good_progress(20, "after the lease guessing");
	expect_no_leak("after the lease guessing");
	finish();
}

/* What the worker of another uid saw. */
struct stranger_shm {
	int connect_rc;
	int redeem_rc;
	int release_rc;
};

/*
 * Observed on main: under --group, another uid redeemed a lease and read
 * its bytes, and the owner then got -ENOENT. The --group policy
 * (docs/reliability.md): members share the cache by key, but a lease is
 * redeemable only by channels of the uid that made it.
 */
Test(hostile, lease_of_another_uid_is_unknown_under_group)
{
	static const char *const extra[] = {"--group", "65534", NULL};
	struct stranger_shm *st;
	struct t_raw ra;
	uint64_t lease;
	pid_t pid;
	int wst = 0;

	if (geteuid() != 0)
		cr_skip("needs root to run a worker as another uid");
	restart_with(extra);
	st = t_shm_anon(sizeof(*st));
	cr_assert_eq(t_raw_connect(srv.sock, 0, &ra), 0, "%s", ra.w.reason);
	lease = hold_lease(&ra, 6000);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		gid_t g = 65534;
		struct t_raw rb;
		union ans a;

		if (setgroups(1, &g) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(10);
		st->connect_rc = t_raw_connect(srv.sock, 0, &rb);
		if (st->connect_rc < 0)
			_exit(0);
		t_raw_call(&rb, KVR_OP_PREPARE_RETRIEVE, lease,
			   KVR_REQ_BY_LEASE, NULL, NULL, 0, &a, sizeof(a));
		st->redeem_rc = a.h.status;
		t_raw_call(&rb, KVR_OP_RELEASE, lease, 0, NULL, NULL, 0, &a,
			   sizeof(a));
		st->release_rc = a.h.status;
		t_raw_close(&rb);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &wst, 0), pid);
	cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "stranger: %d", wst);
	cr_assert_eq(st->connect_rc, 0, "the group member was refused: %d",
		     st->connect_rc);
	cr_expect_eq(st->redeem_rc, -ENOENT, "another uid redeemed: %d",
		     st->redeem_rc);
	cr_expect_eq(st->release_rc, -ENOENT, "another uid released: %d",
		     st->release_rc);
	redeem_own(&ra, lease);
	t_raw_close(&ra);
	t_shm_unmap(st, sizeof(*st));
	expect_good_progress(20, "after the stranger");
	expect_no_leak("after the stranger");
	finish();
}

/*
 * Observed on main: 32 sockets that connect and say nothing filled the
 * handshake table; no legitimate connect succeeded until they timed out.
 * Now a uid has few pending handshakes and the oldest goes first: with
 * 100 silent sockets open, a connect with a 100 ms bound succeeds.
 */
