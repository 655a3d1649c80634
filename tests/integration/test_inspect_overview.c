/* SPDX-License-Identifier: MIT */
/*
 * Description: kvring-inspect's command line and overview against fake control
 * segments: help, version and usage errors, the JSON and text overviews
 * matched value by value, the inspector never writing, and an attach
 * refused for another ABI, layout or a truncated file.
 */
#include "inspect_suite.h"

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
