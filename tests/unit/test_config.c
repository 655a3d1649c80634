/* SPDX-License-Identifier: MIT */
/*
 * Description: kvringd's option parsing (server/config.c) and the default
 * socket path (lib/paths.c), in-process: defaults with no flags, size
 * suffixes and their limits, every usage error, and names derived from
 * the uid.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/layout.h>
#include <kvring/log.h>
#include <kvring/paths.h>

#include "config_suite.h"

TestSuite(config, .timeout = 10);

/* Parse a NULL-terminated argument list; usage text goes to /dev/null. */
static int parse(struct kvr_config *c, const char *const *args)
{
	return cfg_parse(c, args, NULL);
}

Test(config, defaults_apply_when_no_flags_given)
{
	struct kvr_config c;
	char want[64];

	unsetenv("KVRING_SOCKET");
	cr_assert_eq(parse(&c, NULL), KVR_CONFIG_RUN);
	cr_expect_eq(c.pool_bytes, 1ull << 30);
	cr_expect_eq(c.align, 4096);
	cr_expect_eq(c.max_workers, 64);
	cr_expect_eq(c.spin_us, 50);
	cr_expect_eq(c.lease_ms, 30000);
	cr_expect_eq(c.pool_backend, 0);
	cr_expect_eq(c.log_level, KVR_LOG_INFO);
	cr_expect_not(c.have_group);
	snprintf(want, sizeof(want), "kvring-%u", (unsigned)geteuid());
	cr_expect_str_eq(c.name, want);
	cr_expect_not_null(strstr(c.socket_path, ".sock"), "%s", c.socket_path);
	cr_expect_lt(strlen(c.socket_path), KVR_SOCKET_PATH_MAX);
}

Test(config, socket_comes_from_environment_when_no_flag_given)
{
	const char *args[] = {"--pool-size", "2M", NULL};
	struct kvr_config c;

	setenv("KVRING_SOCKET", "/tmp/env.sock", 1);
	cr_assert_eq(parse(&c, args), KVR_CONFIG_RUN);
	cr_expect_str_eq(c.socket_path, "/tmp/env.sock");
	unsetenv("KVRING_SOCKET");
}

Test(config, every_flag_is_applied_when_valid)
{
	const char *args[] = {"--socket",
			      "/tmp/x.sock",
			      "--name",
			      "kvring-x",
			      "--pool-size",
			      "256M",
			      "--align",
			      "64",
			      "--max-workers",
			      "3",
			      "--spin-us",
			      "0",
			      "--lease-ms",
			      "5",
			      "--pool-backend",
			      "memfd",
			      "--log-level",
			      "debug",
			      "--max-keys",
			      "16",
			      "--ring-bytes",
			      "64K",
			      "--heartbeat-ms",
			      "10",
			      "--handshake-ms",
			      "50",
			      "--stall-ms",
			      "20",
			      "--allow-root",
			      "--no-prefault",
			      NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, args), KVR_CONFIG_RUN);
	cr_expect_str_eq(c.socket_path, "/tmp/x.sock");
	cr_expect_str_eq(c.name, "kvring-x");
	cr_expect_eq(c.pool_bytes, 256ull << 20);
	cr_expect_eq(c.align, 64);
	cr_expect_eq(c.max_workers, 3);
	cr_expect_eq(c.spin_us, 0);
	cr_expect_eq(c.lease_ms, 5);
	cr_expect_eq(c.pool_backend, KVR_POOL_MEMFD);
	cr_expect_eq(c.log_level, KVR_LOG_DEBUG);
	cr_expect_eq(c.max_keys, 16);
	cr_expect_eq(c.ring_bytes, 64u << 10);
	cr_expect_eq(c.heartbeat_ms, 10);
	cr_expect_eq(c.handshake_ms, 50);
	cr_expect_eq(c.stall_ms, 20);
	cr_expect(c.allow_root && c.no_prefault);
}

Test(config, prefault_undoes_no_prefault_when_given_after_it)
{
	const char *on[] = {"--no-prefault", "--prefault", NULL};
	const char *off[] = {"--prefault", "--no-prefault", NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, on), KVR_CONFIG_RUN);
	cr_expect_not(c.no_prefault, "--prefault after --no-prefault");
	cr_assert_eq(parse(&c, off), KVR_CONFIG_RUN);
	cr_expect(c.no_prefault, "--no-prefault after --prefault");
}

Test(config, group_is_resolved_when_given_by_name_or_number)
{
	const char *a1[] = {"--group", "root", NULL};
	const char *a2[] = {"--group", "4242", NULL};
	const char *a3[] = {"--group", "no-such-group-kvr", NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, a1), KVR_CONFIG_RUN);
	cr_expect(c.have_group);
	cr_expect_eq(c.gid, 0);
	cr_assert_eq(parse(&c, a2), KVR_CONFIG_RUN);
	cr_expect_eq(c.gid, 4242);
	cr_expect_eq(parse(&c, a3), -EINVAL);
}

Test(config, usage_error_is_returned_when_an_option_is_bad)
{
	const char *bad[][3] = {
	    {"--pool-size", "512K"},   {"--align", "100"},
	    {"--align", "32"},	       {"--max-workers", "0"},
	    {"--max-workers", "5000"}, {"--spin-us", "-1"},
	    {"--lease-ms", "0"},       {"--pool-backend", "disk"},
	    {"--log-level", "loud"},   {"--max-keys", "4097"},
	    {"--ring-bytes", "100K"},  {"--ring-bytes", "32K"},
	    {"--heartbeat-ms", "1"},   {"--name", "a/b"},
	    {"--name", ".hidden"},     {"--bogus", "1"},
	};
	struct kvr_config c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(parse(&c, bad[i]), -EINVAL, "%s %s accepted",
			     bad[i][0], bad[i][1]);
	const char *extra[] = {"stray", NULL};

	cr_expect_eq(parse(&c, extra), -EINVAL);
	/* 2^33 slots of 64 bytes: more than a slot offset can count. */
	const char *units[] = {"--pool-size", "512G", "--align", "64", NULL};

	cr_expect_eq(parse(&c, units), -EINVAL, "2^33 slots accepted");
	char longpath[200];

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	const char *lp[] = {"--socket", longpath, NULL};

	cr_expect_eq(parse(&c, lp), -EINVAL);
}

/* One grammar for every number (lib/parse.c, docs/config.md): kvringd's
 * counts take the binary multiples the bench always took. */
Test(config, counts_take_binary_multiples_when_suffixed)
{
	const char *args[] = {"--max-keys",    "2K", "--lease-ms", "64K",
			      "--max-workers", "1k", NULL};
	const char *neg[] = {"--spin-us", " 5", NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, args), KVR_CONFIG_RUN);
	cr_expect_eq(c.max_keys, 2048);
	cr_expect_eq(c.lease_ms, 65536);
	cr_expect_eq(c.max_workers, 1024);
	cr_expect_eq(parse(&c, neg), -EINVAL, "a leading blank accepted");
}

Test(config, help_and_version_are_reported_when_asked)
{
	const char *h[] = {"--help", NULL};
	const char *v[] = {"-V", NULL};
	struct kvr_config c;

	cr_expect_eq(parse(&c, h), KVR_CONFIG_HELP);
	cr_expect_eq(parse(&c, v), KVR_CONFIG_VERSION);
}

Test(paths, default_socket_is_per_uid_when_computed)
{
	char buf[KVR_SOCKET_PATH_MAX], want[64], small[8] = "keep";

	char xdg[] = "/tmp/kvr-xdg-XXXXXX", want2[128];

	unsetenv("XDG_RUNTIME_DIR");
	cr_assert_eq(kvr_default_socket_path(buf, sizeof(buf)), 0);
	if (strncmp(buf, KVR_RUN_DIR "/", strlen(KVR_RUN_DIR) + 1) == 0)
		snprintf(want, sizeof(want), "%s/%u/kvringd.sock", KVR_RUN_DIR,
			 (unsigned)geteuid());
	else
		snprintf(want, sizeof(want), "/tmp/kvring-%u/kvringd.sock",
			 (unsigned)geteuid());
	cr_expect_str_eq(buf, want);
	/* A login session's runtime directory comes first. */
	cr_assert_not_null(mkdtemp(xdg));
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	cr_assert_eq(kvr_default_socket_path(buf, sizeof(buf)), 0);
	snprintf(want2, sizeof(want2), "%s/kvring/kvringd.sock", xdg);
	cr_expect_str_eq(buf, want2);
	/* ... but not one we do not own, nor a relative one. */
	setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
	cr_assert_eq(kvr_default_socket_path(buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, want);
	unsetenv("XDG_RUNTIME_DIR");
	rmdir(xdg);
	cr_expect_eq(kvr_default_socket_path(small, sizeof(small)),
		     -ENAMETOOLONG);
	cr_expect_str_eq(small, "keep", "output changed on failure");
	cr_expect_eq(kvr_default_socket_path(NULL, 10), -EINVAL);
}

Test(config, huge_pages_is_auto_when_not_given_and_parses_each_mode)
{
	const char *req[] = {"--huge-pages", "require", "--huge-dir",
			     "/dev/hugepages", NULL};
	const char *off[] = {"--huge-pages", "off", NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, NULL), KVR_CONFIG_RUN);
	cr_expect_eq(c.huge_pages, KVR_HUGE_AUTO);
	cr_expect_str_eq(c.huge_dir, "");
	cr_assert_eq(parse(&c, req), KVR_CONFIG_RUN);
	cr_expect_eq(c.huge_pages, KVR_HUGE_REQUIRE);
	cr_expect_str_eq(c.huge_dir, "/dev/hugepages");
	cr_assert_eq(parse(&c, off), KVR_CONFIG_RUN);
	cr_expect_eq(c.huge_pages, KVR_HUGE_OFF);
}

Test(config, huge_pages_is_usage_error_when_value_or_combination_is_bad)
{
	const char *bad_mode[] = {"--huge-pages", "yes", NULL};
	const char *rel_dir[] = {"--huge-dir", "hugepages", NULL};
	const char *priv[] = {"--huge-pages", "require", "--pool-backend",
			      "private", NULL};
	struct kvr_config c;

	cr_expect_eq(parse(&c, bad_mode), -EINVAL);
	cr_expect_eq(parse(&c, rel_dir), -EINVAL);
	cr_expect_eq(parse(&c, priv), -EINVAL);
}

Test(config, quotas_default_to_shares_of_the_pool_when_not_given)
{
	const char *a[] = {"--pool-size", "1G", NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, a), KVR_CONFIG_RUN);
	cr_expect_eq(c.quota_reserved_bytes, 256ull << 20);
	cr_expect_eq(c.quota_pinned_bytes, 512ull << 20);
	cr_expect_eq(c.max_key_bytes, 128ull << 20);
	cr_expect_eq(c.quota_uid_reserved_bytes, 512ull << 20);
	cr_expect_eq(c.quota_uid_pinned_bytes, 768ull << 20);
	cr_expect_eq(c.xfer_ms, 30000u);
}

Test(config, uid_quotas_take_sizes_or_percentages_when_given)
{
	const char *a[] = {"--pool-size",
			   "64M",
			   "--quota-uid-reserved",
			   "50%",
			   "--quota-uid-pinned",
			   "32M",
			   NULL};
	const char *bad[] = {"--quota-uid-pinned", "0%", NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, a), KVR_CONFIG_RUN);
	cr_expect_eq(c.quota_uid_reserved_bytes, 32ull << 20);
	cr_expect_eq(c.quota_uid_pinned_bytes, 32ull << 20);
	cr_expect_neq(parse(&c, bad), KVR_CONFIG_RUN);
}

Test(config, quotas_take_sizes_or_percentages_when_given)
{
	const char *a[] = {"--pool-size",
			   "64M",
			   "--quota-reserved",
			   "12.5%",
			   "--quota-pinned",
			   "48M",
			   "--max-key-bytes",
			   "100%",
			   "--xfer-ms",
			   "6000",
			   NULL};
	struct kvr_config c;

	cr_assert_eq(parse(&c, a), KVR_CONFIG_RUN);
	cr_expect_eq(c.quota_reserved_bytes, 8ull << 20);
	cr_expect_eq(c.quota_pinned_bytes, 48ull << 20);
	cr_expect_eq(c.max_key_bytes, 64ull << 20);
	cr_expect_eq(c.xfer_ms, 6000u);
}

Test(config, quota_and_deadline_errors_are_usage_errors_when_out_of_range)
{
	const char *bad[][3] = {
	    {"--quota-reserved", "0%", NULL},
	    {"--quota-reserved", "101%", NULL},
	    {"--quota-pinned", "%", NULL},
	    {"--quota-pinned", "-5%", NULL},
	    {"--max-key-bytes", "12", NULL},
	    {"--max-key-bytes", "lots", NULL},
	    {"--xfer-ms", "5", NULL},
	    /* Not above the default --stall-ms 5000. */
	    {"--xfer-ms", "5000", NULL},
	};
	struct kvr_config c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(parse(&c, bad[i]), -EINVAL, "%s %s accepted",
			     bad[i][0], bad[i][1]);
}

Test(config, objects_sizes_the_cache_up_to_the_pool_slots)
{
	const char *none[] = {"--pool-size", "1G", NULL};
	const char *a[] = {"--pool-size", "1G", "--objects", "262144", NULL};
	const char *bad[][7] = {
	    /* 1G of 4096-byte slots holds 262144 objects. */
	    {"--pool-size", "1G", "--objects", "262145", NULL},
	    {"--pool-size", "1G", "--align", "1M", "--objects", "1025", NULL},
	    {"--objects", "1e7", NULL},
	    {"--objects", "-1", NULL},
	    {"--objects", "4294967295", NULL},
	};
	struct kvr_config c;

	cr_assert_eq(parse(&c, none), KVR_CONFIG_RUN);
	cr_expect_eq(c.objects, 0u);
	cr_assert_eq(parse(&c, a), KVR_CONFIG_RUN);
	cr_expect_eq(c.objects, 262144u);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(parse(&c, bad[i]), -EINVAL, "case %zu accepted",
			     i);
}
