/* SPDX-License-Identifier: MIT */
/*
 * test_l2_fmt.c - the L2 tier's pure parts (server/l2_fmt.c, l2_resp.c,
 * l2_conf.c): namespace fingerprints and keys, the value header round
 * trip and every check, CRC16 and hash slots against the cluster spec's
 * vectors, the RESP decoder on complete, partial and hostile input, and
 * the --l2 URL grammar.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/l2.h>

TestSuite(l2_fmt, .timeout = 10);

static struct kvr_ns_desc ns_a(void)
{
	struct kvr_ns_desc d = {0};

	strcpy(d.model, "llama");
	d.layers = 32;
	d.kv_heads = 8;
	d.head_size = 128;
	d.dtype_bytes = 2;
	d.tp_size = 1;
	d.chunk_tokens = 256;
	return d;
}

Test(l2_fmt, fingerprint_depends_on_identity_and_salt_only)
{
	struct kvr_ns_desc a = ns_a(), b = ns_a();

	/* Bytes after the model's NUL do not count. */
	b.model[40] = 'x';
	cr_expect_eq(kvr_l2_ns_fp(&a, ""), kvr_l2_ns_fp(&b, ""));
	b = ns_a();
	b.tp_rank = 1;
	cr_expect_neq(kvr_l2_ns_fp(&a, ""), kvr_l2_ns_fp(&b, ""));
	cr_expect_neq(kvr_l2_ns_fp(&a, ""), kvr_l2_ns_fp(&a, "tenant-1"));
	b = ns_a();
	b.dtype_bytes = 4;
	cr_expect_neq(kvr_l2_ns_fp(&a, ""), kvr_l2_ns_fp(&b, ""));
}

Test(l2_fmt, key_is_prefix_fingerprint_and_chunk_key_in_hex)
{
	struct kvr_key k = {.lo = 0x1122334455667788ull,
			    .hi = 0x99aabbccddeeff00ull};
	char buf[KVR_L2_KEY_MAX], tiny[20];

	cr_assert_eq(kvr_l2_key("kvr:", 0xabcull, &k, buf, sizeof(buf)), 53);
	cr_expect_str_eq(buf, "kvr:0000000000000abc:"
			      "99aabbccddeeff001122334455667788");
	cr_expect_eq(kvr_l2_key("kvr:", 1, &k, tiny, sizeof(tiny)),
		     -ENAMETOOLONG);
}

Test(l2_fmt, header_round_trips_and_every_field_is_checked)
{
	struct kvr_key k = {1, 2}, other = {1, 3};
	struct kvr_l2_hdr h, bad;

	kvr_l2_hdr_make(42, &k, 4096, 0x5555, &h);
	cr_expect_eq(kvr_l2_hdr_check(&h, 42, &k), 0);
	cr_expect_eq(h.len, 4096);
	cr_expect_eq(kvr_l2_hdr_check(&h, 43, &k), -EBADMSG, "namespace");
	cr_expect_eq(kvr_l2_hdr_check(&h, 42, &other), -EBADMSG, "key");
	for (size_t i = 0; i < sizeof(h); i++) {
		bad = h;
		((unsigned char *)&bad)[i] ^= 0x10;
		cr_expect_eq(kvr_l2_hdr_check(&bad, 42, &k), -EBADMSG,
			     "byte %zu flipped", i);
	}
}

Test(l2_fmt, crc16_and_slots_match_the_cluster_spec)
{
	cr_expect_eq(kvr_l2_crc16("123456789", 9), 0x31c3);
	cr_expect_eq(kvr_l2_slot("foo", 3), 12182);
	cr_expect_eq(kvr_l2_slot("{user1000}.following", 20),
		     kvr_l2_slot("{user1000}.followers", 20));
	cr_expect_eq(kvr_l2_slot("{user1000}.following", 20),
		     kvr_l2_slot("user1000", 8));
	/* Empty tag: the whole key. First '}' after the first '{'. */
	cr_expect_eq(kvr_l2_slot("foo{}{bar}", 10),
		     kvr_l2_crc16("foo{}{bar}", 10) & 16383);
	cr_expect_eq(kvr_l2_slot("foo{{bar}}zap", 13),
		     kvr_l2_crc16("{bar", 4) & 16383);
	cr_expect_eq(kvr_l2_slot("foo{bar}{zap}", 13),
		     kvr_l2_crc16("bar", 3) & 16383);
	cr_expect_eq(kvr_l2_slot("foo{bar", 7),
		     kvr_l2_crc16("foo{bar", 7) & 16383);
}

Test(l2_fmt, resp_line_parses_each_type_and_waits_for_crlf)
{
	struct kvr_l2_rline l;

	cr_expect_eq(kvr_l2_resp_line("+OK\r\n", 5, &l), 5);
	cr_expect_eq(l.type, '+');
	cr_expect_eq(l.str_len, 2);
	cr_expect_eq(kvr_l2_resp_line(":-12\r\n", 6, &l), 6);
	cr_expect_eq(l.num, -12);
	cr_expect_eq(kvr_l2_resp_line("$-1\r\n", 5, &l), 5);
	cr_expect_eq(l.num, -1);
	cr_expect_eq(kvr_l2_resp_line("$10\r", 4, &l), -EAGAIN);
	cr_expect_eq(kvr_l2_resp_line("$10", 3, &l), -EAGAIN);
	cr_expect_eq(kvr_l2_resp_line("$1x\r\n", 5, &l), -EBADMSG);
	cr_expect_eq(kvr_l2_resp_line("$-2\r\n", 5, &l), -EBADMSG);
	cr_expect_eq(kvr_l2_resp_line("?x\r\n", 4, &l), -EBADMSG);
	cr_expect_eq(kvr_l2_resp_line("+a\rb\n", 5, &l), -EBADMSG);
	cr_expect_eq(kvr_l2_resp_line(":99999999999999999999\r\n", 23, &l),
		     -EBADMSG, "overflow");
}

Test(l2_fmt, resp_span_covers_nested_replies_and_bounds_them)
{
	static const char r[] = "*2\r\n$3\r\nabc\r\n*1\r\n:5\r\n";
	char deep[64] = "";

	cr_expect_eq(kvr_l2_resp_span(r, sizeof(r) - 1), (long)sizeof(r) - 1);
	for (size_t n = 0; n < sizeof(r) - 1; n++)
		cr_expect_eq(kvr_l2_resp_span(r, n), -EAGAIN, "cut at %zu", n);
	cr_expect_eq(kvr_l2_resp_span("$3\r\nabcXY", 9), -EBADMSG);
	for (int i = 0; i < 10; i++)
		strcat(deep, "*1\r\n");
	strcat(deep, ":1\r\n");
	cr_expect_eq(kvr_l2_resp_span(deep, strlen(deep)), -EBADMSG, "depth");
}

Test(l2_fmt, cluster_slots_reply_decodes_into_ranges)
{
	static const char r[] =
	    "*2\r\n"
	    "*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n"
	    "$4\r\nid-a\r\n"
	    "*4\r\n:5461\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n"
	    "*2\r\n$9\r\n127.0.0.1\r\n:7004\r\n";
	static const char bad[] =
	    "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n";
	struct kvr_l2_range g[4];

	cr_assert_eq(kvr_l2_resp_slots(r, sizeof(r) - 1, g, 4), 2);
	cr_expect_eq(g[0].lo, 0);
	cr_expect_eq(g[0].hi, 5460);
	cr_expect_str_eq(g[0].host, "127.0.0.1");
	cr_expect_eq(g[0].port, 7000);
	cr_expect_str_eq(g[1].host, "");
	cr_expect_eq(g[1].port, 7001);
	cr_expect_eq(kvr_l2_resp_slots(r, sizeof(r) - 1, g, 1), -E2BIG);
	cr_expect_eq(kvr_l2_resp_slots(bad, sizeof(bad) - 1, g, 4), -EBADMSG);
}

Test(l2_fmt, redirect_text_names_slot_and_node)
{
	struct kvr_l2_addr a;
	uint32_t slot = 0;
	const char *m = "MOVED 3999 127.0.0.1:6381";
	const char *k = "ASK 12 10.0.0.2:7000";

	cr_expect_eq(kvr_l2_resp_redirect(m, strlen(m), &slot, &a), 1);
	cr_expect_eq(slot, 3999);
	cr_expect_str_eq(a.host, "127.0.0.1");
	cr_expect_eq(a.port, 6381);
	cr_expect_eq(kvr_l2_resp_redirect(k, strlen(k), &slot, &a), 2);
	cr_expect_eq(slot, 12);
	cr_expect_eq(kvr_l2_resp_redirect("ERR x", 5, &slot, &a), 0);
	cr_expect_eq(kvr_l2_resp_redirect("MOVED 99999 h:1", 15, &slot, &a),
		     -EBADMSG);
	cr_expect_eq(kvr_l2_resp_redirect("MOVED 1 h", 9, &slot, &a), -EBADMSG);
}

Test(l2_fmt, url_grammar_accepts_three_forms_and_refuses_passwords)
{
	struct kvr_l2_conf c;
	const char *why;

	kvr_l2_conf_defaults(&c);
	cr_expect_eq(kvr_l2_parse_url(&c, "redis://127.0.0.1:6379", &why), 0);
	cr_expect_eq(c.kind, KVR_L2_REDIS);
	cr_expect_eq(c.seeds[0].port, 6379);
	cr_expect_eq(kvr_l2_parse_url(&c, "unix:///run/r.sock", &why), 0);
	cr_expect_str_eq(c.seeds[0].path, "/run/r.sock");
	cr_expect_eq(
	    kvr_l2_parse_url(&c, "redis-cluster://a:1,b:2,[::1]:3", &why), 0);
	cr_expect_eq(c.nseeds, 3);
	cr_expect_str_eq(c.seeds[2].host, "::1");
	cr_expect_eq(kvr_l2_parse_url(&c, "redis://u:pw@h:1", &why), -EINVAL);
	cr_expect(strstr(why, "--l2-auth-file") != NULL, "%s", why);
	cr_expect_eq(kvr_l2_parse_url(&c, "redis://h:0", &why), -EINVAL);
	cr_expect_eq(kvr_l2_parse_url(&c, "redis://h", &why), -EINVAL);
	cr_expect_eq(kvr_l2_parse_url(&c, "unix://rel", &why), -EINVAL);
	cr_expect_eq(kvr_l2_parse_url(&c, "http://h:1", &why), -EINVAL);
	cr_expect_eq(kvr_l2_parse_url(&c, "redis-cluster://", &why), -EINVAL);
}

Test(l2_fmt, options_reject_bad_values_with_a_hint)
{
	struct kvr_l2_conf c;
	FILE *err = tmpfile();
	char buf[256] = "";

	cr_assert(err);
	kvr_l2_conf_defaults(&c);
	cr_expect_eq(kvr_l2_conf_opt(&c, "l2-prefix", "a{b}", err), -EINVAL);
	cr_expect_eq(kvr_l2_conf_opt(&c, "l2-queue", "0", err), -EINVAL);
	cr_expect_eq(kvr_l2_conf_opt(&c, "l2-upload", "later", err), -EINVAL);
	cr_expect_eq(c.upload, KVR_L2_UP_COMMIT,
		     "a refused value changes nothing");
	cr_expect_eq(kvr_l2_conf_opt(&c, "l2-upload", "evict", err), 0);
	cr_expect_eq(c.upload, KVR_L2_UP_EVICT);
	cr_expect_eq(kvr_l2_conf_opt(&c, "l2-prefix", "team7:", err), 0);
	cr_expect_str_eq(c.prefix, "team7:");
	cr_expect_eq(kvr_l2_conf_opt(&c, "not-l2", "x", err), 1);
	rewind(err);
	cr_expect(fgets(buf, sizeof(buf), err) != NULL);
	cr_expect(strstr(buf, "--l2-prefix") != NULL, "%s", buf);
	fclose(err);
}

Test(l2_fmt, secret_comes_from_file_or_environment)
{
	struct kvr_l2_conf c;
	char user[64], pass[64], path[] = "/tmp/kvr-l2-secret-XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "alice s3cret\n", 13), 13);
	close(fd);
	kvr_l2_conf_defaults(&c);
	strcpy(c.auth_file, path);
	cr_expect_eq(
	    kvr_l2_read_secret(&c, user, sizeof(user), pass, sizeof(pass)), 0);
	cr_expect_str_eq(user, "alice");
	cr_expect_str_eq(pass, "s3cret");
	unlink(path);
	c.auth_file[0] = '\0';
	setenv(KVR_L2_AUTH_ENV, "envpw", 1);
	cr_expect_eq(
	    kvr_l2_read_secret(&c, user, sizeof(user), pass, sizeof(pass)), 0);
	cr_expect_str_eq(user, "");
	cr_expect_str_eq(pass, "envpw");
	unsetenv(KVR_L2_AUTH_ENV);
	strcpy(c.auth_file, "/nonexistent/kvr-secret");
	cr_expect_eq(
	    kvr_l2_read_secret(&c, user, sizeof(user), pass, sizeof(pass)),
	    -ENOENT);
}
