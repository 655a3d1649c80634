/* SPDX-License-Identifier: MIT */
/*
 * Tests for tools/common/emit.c, the one JSON / key=value emitter of
 * kvring-inspect, kvring-bench and kvring-stress: strings and keys come
 * out escaped, nesting and separators are right in both modes, and a
 * full buffer drops whole members but still closes the object.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "emit.h"

TestSuite(emit, .timeout = 10);

/* The bench's emitter printed strings raw: a quote or a newline in a
 * value broke the line and the JSON. */
Test(emit, escapes_quote_and_control_char_when_in_a_string)
{
	char buf[256];
	struct kvr_em e;

	kvr_em_init_buf(&e, buf, sizeof(buf), true);
	kvr_em_str(&e, "pool", "a\"b\x01\n\\c");
	kvr_em_str(&e, "k\"ey", "\xc3\xa9");
	kvr_em_finish(&e);
	cr_expect_str_eq(buf, "{\"pool\":\"a\\\"b\\u0001\\u000a\\\\c\","
			      "\"k\\\"ey\":\"\\u00c3\\u00a9\"}\n");
	cr_expect_not(e.cut);
}

Test(emit, nests_objects_and_arrays_when_json)
{
	char buf[256];
	struct kvr_em e;

	kvr_em_init_buf(&e, buf, sizeof(buf), true);
	kvr_em_i64(&e, "schema", 1);
	kvr_em_obj(&e, "pool");
	kvr_em_u64(&e, "bytes", 4096);
	kvr_em_bool(&e, "ok", true);
	kvr_em_end(&e);
	kvr_em_arr(&e, "channels");
	kvr_em_item(&e, 3);
	kvr_em_i64(&e, "pid", -1);
	kvr_em_end(&e);
	kvr_em_item(&e, 5);
	kvr_em_end(&e);
	kvr_em_end(&e);
	kvr_em_arr(&e, "failures");
	kvr_em_str(&e, NULL, "x");
	kvr_em_str(&e, NULL, "y");
	kvr_em_end(&e);
	kvr_em_finish(&e);
	cr_expect_str_eq(buf, "{\"schema\":1,\"pool\":{\"bytes\":4096,\"ok\":"
			      "true},\"channels\":[{\"pid\":-1},{}],"
			      "\"failures\":[\"x\",\"y\"]}\n");
}

Test(emit, writes_paths_when_text)
{
	char buf[256];
	struct kvr_em e;

	kvr_em_init_buf(&e, buf, sizeof(buf), false);
	kvr_em_u64(&e, "abi", 65536);
	kvr_em_arr(&e, "channels");
	kvr_em_item(&e, 3);
	kvr_em_obj(&e, "req_ring");
	kvr_em_u64(&e, "head", 128);
	kvr_em_end(&e);
	kvr_em_str(&e, "model", "m\"1");
	kvr_em_end(&e);
	kvr_em_end(&e);
	kvr_em_dbl(&e, "ratio", 0.5);
	kvr_em_finish(&e);
	cr_expect_str_eq(buf, "abi=65536\nchannels.3.req_ring.head=128\n"
			      "channels.3.model=m\"1\nratio=0.5000\n");
}

Test(emit, formats_doubles_and_gives_null_when_not_finite)
{
	char buf[256];
	struct kvr_em e;

	kvr_em_init_buf(&e, buf, sizeof(buf), true);
	kvr_em_dbl(&e, "a", 1.0 / 3);
	kvr_em_g(&e, "b", 1234567.0);
	kvr_em_fixed(&e, "c", 2.25, 1);
	kvr_em_g(&e, "d", NAN);
	kvr_em_dbl(&e, "e", INFINITY);
	kvr_em_finish(&e);
	cr_expect_str_eq(buf, "{\"a\":0.3333,\"b\":1.23457e+06,\"c\":2.2,"
			      "\"d\":null,\"e\":null}\n");
}

/* A member that does not fit is dropped whole; the object still closes,
 * so the line stays valid JSON. */
Test(emit, drops_whole_members_and_closes_when_buffer_is_full)
{
	char buf[40];
	struct kvr_em e;

	kvr_em_init_buf(&e, buf, sizeof(buf), true);
	kvr_em_u64(&e, "a", 1);
	kvr_em_obj(&e, "o");
	kvr_em_str(&e, "long", "0123456789012345678901234567890123456789");
	kvr_em_u64(&e, "b", 2);
	kvr_em_obj(&e, "ghost");
	kvr_em_u64(&e, "c", 3);
	kvr_em_end(&e);
	kvr_em_end(&e);
	kvr_em_u64(&e, "d", 4);
	kvr_em_finish(&e);
	cr_expect(e.cut, "cut not reported");
	cr_expect_str_eq(buf, "{\"a\":1,\"o\":{}}\n");
	cr_expect_lt(strlen(buf), sizeof(buf));
}

Test(emit, writes_the_same_bytes_when_to_a_file)
{
	char fbuf[256] = {0}, bbuf[256];
	FILE *f = fmemopen(fbuf, sizeof(fbuf) - 1, "w");
	struct kvr_em e;

	cr_assert_not_null(f);
	kvr_em_init(&e, f, true);
	kvr_em_str(&e, "s", "q\"");
	kvr_em_arr(&e, "v");
	kvr_em_u64(&e, NULL, 7);
	kvr_em_end(&e);
	kvr_em_finish(&e);
	fclose(f);
	kvr_em_init_buf(&e, bbuf, sizeof(bbuf), true);
	kvr_em_str(&e, "s", "q\"");
	kvr_em_arr(&e, "v");
	kvr_em_u64(&e, NULL, 7);
	kvr_em_end(&e);
	kvr_em_finish(&e);
	cr_expect_str_eq(fbuf, bbuf);
	cr_expect_str_eq(bbuf, "{\"s\":\"q\\\"\",\"v\":[7]}\n");
}
