/* SPDX-License-Identifier: MIT */
/*
 * Description: kvring-inspect's other outputs against fake control segments:
 * --prometheus validated (and the validator made to fail), --dump of ring
 * records (the tail, malformed payloads), --socket finding the segment
 * of a listening process, and --watch frames, interrupts and restarts.
 */
#include "inspect_suite.h"

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
