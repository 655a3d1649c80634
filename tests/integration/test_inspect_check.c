/* SPDX-License-Identifier: MIT */
/*
 * Description: kvring-inspect --check and --list against fake control segments:
 * a healthy segment passes, the channel directory of another uid is said
 * to be unreadable, corrupted ring positions, records and counters fail,
 * and a killed owner reads as stale or dead.
 */
#include "inspect_suite.h"

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
	struct run r;

	fake_by_killed_child("kvring-dead.ctl");
	expect_overview_dead(tmpdir, "kvring-dead");
	r = RUN("--dir", tmpdir, "--name", "kvring-dead", "--check");
	cr_expect_eq(r.status, 3);
	cr_expect(strstr(r.out, "violation=server_dead"), "%s", r.out);
	run_free(&r);
}
