/* SPDX-License-Identifier: MIT */
/*
 * Description: kvringd --config FILE and --print-config (server/cfile.c,
 * server/config.c, server/config_show.c), in-process, with real files on
 * disk: keys are the long option table's names, flags override the file,
 * every refusal (unknown key, wrong value, flag with a value, duplicate,
 * loose permissions, link, other owner) names the file and line and what
 * to do, and --print-config shows every setting with its source.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "config_suite.h"
#include "config_show.h"

TestSuite(config_file, .timeout = 10);

/* A private directory on the test's disk, and the last error text. */
static char dir[64];
static char errbuf[4096];

static void setup_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kvr-cfgtest-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	unsetenv("KVRING_SOCKET");
}

static void rm_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

/* Write @text to DIR/@name with @mode; the path into @path. */
static void write_file(const char *name, const char *text, mode_t mode,
		       char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(path, mode), 0);
}

/* Parse "kvringd ARGS..."; usage errors land in errbuf. */
static int parse(struct kvr_config *c, const char *const *args)
{
	FILE *err;
	int rc;

	memset(errbuf, 0, sizeof(errbuf));
	err = fmemopen(errbuf, sizeof(errbuf), "w");
	rc = cfg_parse(c, args, err);
	fclose(err);
	return rc;
}

/* The index of @key in the option table. */
static unsigned key_index(const char *key)
{
	const char *k;

	for (unsigned i = 0; (k = kvr_config_key(i, NULL)); i++)
		if (strcmp(k, key) == 0)
			return i;
	cr_assert_fail("no option %s", key);
	return 0;
}

/* Parse a file holding @text alone; the error text in errbuf. */
static int parse_text(struct kvr_config *c, const char *text, char *path)
{
	const char *args[] = {"--config", path, NULL};

	write_file("k.conf", text, 0644, path, 256);
	return parse(c, args);
}

Test(config_file, settings_apply_and_flags_override_them, .init = setup_dir,
     .fini = rm_dir)
{
	char path[256];
	const char *args[] = {"--max-workers", "4", "--config", path, NULL};
	struct kvr_config c;

	write_file("a.conf",
		   "# a comment\n"
		   "\n"
		   "pool-size = 64M\n"
		   "  max-workers=8  \n"
		   "allow-root\n"
		   "no-histograms = false\n"
		   "l2-prefix = team:\n",
		   0644, path, sizeof(path));
	cr_assert_eq(parse(&c, args), KVR_CONFIG_RUN, "%s", errbuf);
	cr_expect_eq(c.pool_bytes, 64ull << 20);
	cr_expect_eq(c.max_workers, 4, "the flag wins over the file");
	cr_expect(c.allow_root);
	cr_expect_eq(c.histograms, KVR_HISTS_PER_CHANNEL,
		     "'= false' leaves the default");
	cr_expect_str_eq(c.l2.prefix, "team:");
	cr_expect_eq(c.from[key_index("pool-size")], KVR_FROM_FILE);
	cr_expect_eq(c.from_line[key_index("pool-size")], 3);
	cr_expect_eq(c.from[key_index("max-workers")], KVR_FROM_FLAG);
	cr_expect_eq(c.from[key_index("allow-root")], KVR_FROM_FILE);
	cr_expect_eq(c.from_line[key_index("allow-root")], 5);
	cr_expect_eq(c.from[key_index("no-histograms")], KVR_FROM_DEFAULT);
	cr_expect_eq(c.from[key_index("align")], KVR_FROM_DEFAULT);
}

/* Every long option but the four meta ones is a key of the file: the
 * file is driven by the same table as getopt_long. */
Test(config_file, every_long_option_is_a_key_of_the_file, .init = setup_dir,
     .fini = rm_dir)
{
	char path[256], text[256];
	struct kvr_config c;
	const char *key;
	bool has_arg;
	int settable = 0;

	for (unsigned i = 0; (key = kvr_config_key(i, &has_arg)); i++) {
		if (!kvr_config_key_settable(i)) {
			snprintf(text, sizeof(text), "%s = x\n", key);
			cr_expect_lt(parse_text(&c, text, path), 0, "%s", key);
			cr_expect_not_null(strstr(errbuf, "is not a setting"),
					   "%s: %s", key, errbuf);
			continue;
		}
		settable++;
		/* A value few options accept: taken (a free-form path) or
		 * refused by the option itself, never as an unknown key. */
		snprintf(text, sizeof(text), "%s = \x01\n", key);
		if (parse_text(&c, text, path) < 0)
			cr_expect_not_null(strstr(errbuf, "k.conf:1:"),
					   "%s: %s", key, errbuf);
		cr_expect_null(strstr(errbuf, "unknown key"), "%s: %s", key,
			       errbuf);
		if (!has_arg) {
			snprintf(text, sizeof(text), "%s\n", key);
			cr_expect_eq(parse_text(&c, text, path), KVR_CONFIG_RUN,
				     "%s: %s", key, errbuf);
			cr_expect_eq(c.from[i], KVR_FROM_FILE, "%s", key);
		}
	}
	cr_expect_gt(settable, 30);
}

Test(config_file, every_setting_has_a_print_config_row)
{
	struct kvr_config c;
	char val[600];
	const char *key;

	memset(&c, 0, sizeof(c));
	for (unsigned i = 0; (key = kvr_config_key(i, NULL)); i++)
		if (kvr_config_key_settable(i))
			cr_expect(
			    kvr_config_show_value(&c, key, val, sizeof(val)),
			    "--print-config has no row for '%s' "
			    "(server/config_show.c)",
			    key);
}

Test(config_file, unknown_key_is_refused_naming_the_line, .init = setup_dir,
     .fini = rm_dir)
{
	char path[256];
	struct kvr_config c;

	cr_expect_eq(
	    parse_text(&c, "pool-size = 64M\n\npool-sise = 1G\n", path),
	    -EINVAL);
	cr_expect_not_null(strstr(errbuf, "k.conf:3: unknown key 'pool-sise'"),
			   "%s", errbuf);
	cr_expect_not_null(strstr(errbuf, "kvringd --help"), "%s", errbuf);
}

Test(config_file, wrong_value_is_refused_naming_line_and_option,
     .init = setup_dir, .fini = rm_dir)
{
	char path[256];
	struct kvr_config c;

	cr_expect_eq(parse_text(&c, "max-workers = lots\n", path), -EINVAL);
	cr_expect_not_null(strstr(errbuf, "k.conf:1: invalid --max-workers "
					  "'lots': use 1-4096"),
			   "%s", errbuf);
	cr_expect_eq(parse_text(&c, "allow-root = yes please\n", path),
		     -EINVAL);
	cr_expect_not_null(strstr(errbuf, "'allow-root' is a flag"), "%s",
			   errbuf);
	cr_expect_eq(parse_text(&c, "pool-size\n", path), -EINVAL);
	cr_expect_not_null(strstr(errbuf, "'pool-size' needs a value"), "%s",
			   errbuf);
	cr_expect_eq(parse_text(&c, "[kvringd]\n", path), -EINVAL);
	cr_expect_not_null(strstr(errbuf, "k.conf:1:"), "%s", errbuf);
}

Test(config_file, duplicate_key_is_refused_naming_both_lines, .init = setup_dir,
     .fini = rm_dir)
{
	char path[256];
	struct kvr_config c;

	cr_expect_eq(parse_text(&c,
				"spin-us = 1\n# x\nspin-us = 2\nmax-workers = "
				"lots\n",
				path),
		     -EINVAL);
	cr_expect_not_null(strstr(errbuf, "k.conf:3: 'spin-us' is given twice "
					  "(first on line 1)"),
			   "%s", errbuf);
	cr_expect_null(strstr(errbuf, "max-workers"),
		       "nothing is applied from a file that did not parse");
}

Test(config_file, writable_by_others_link_and_other_owner_are_refused,
     .init = setup_dir, .fini = rm_dir)
{
	char path[256], link[300];
	const char *args[] = {"--config", path, NULL};
	const char *largs[] = {"--config", link, NULL};
	struct kvr_config c;

	write_file("w.conf", "spin-us = 1\n", 0664, path, sizeof(path));
	cr_expect_eq(parse(&c, args), -EPERM);
	cr_expect_not_null(strstr(errbuf, "chmod go-w"), "%s", errbuf);
	cr_expect_eq(chmod(path, 0646), 0);
	cr_expect_eq(parse(&c, args), -EPERM);
	cr_expect_eq(chmod(path, 0644), 0);
	cr_expect_eq(parse(&c, args), KVR_CONFIG_RUN, "%s", errbuf);

	snprintf(link, sizeof(link), "%s/l.conf", dir);
	cr_assert_eq(symlink(path, link), 0);
	cr_expect_eq(parse(&c, largs), -EPERM);
	cr_expect_not_null(strstr(errbuf, "is a symbolic link"), "%s", errbuf);

	/* A directory others may write (not sticky): the file could be
	 * replaced; sticky, as /tmp is, it could not. */
	cr_assert_eq(chmod(dir, 0777), 0);
	cr_expect_eq(parse(&c, args), -EPERM);
	cr_expect_not_null(strstr(errbuf, "its directory"), "%s", errbuf);
	cr_assert_eq(chmod(dir, 01777), 0);
	cr_expect_eq(parse(&c, args), KVR_CONFIG_RUN, "%s", errbuf);
	cr_assert_eq(chmod(dir, 0700), 0);

	if (geteuid() != 0)
		cr_skip_test("chown to another uid needs root");
	cr_assert_eq(chown(path, 65534, 65534), 0);
	cr_expect_eq(parse(&c, args), -EPERM);
	cr_expect_not_null(strstr(errbuf, "owned by another user (uid 65534)"),
			   "%s", errbuf);
}

Test(config_file, missing_file_names_the_path, .init = setup_dir,
     .fini = rm_dir)
{
	const char *args[] = {"--config", "/nonexistent/kvringd.conf", NULL};
	struct kvr_config c;

	cr_expect_eq(parse(&c, args), -ENOENT);
	cr_expect_not_null(strstr(errbuf, "/nonexistent/kvringd.conf"), "%s",
			   errbuf);
}

Test(config_file, help_is_printed_even_when_the_file_is_bad, .init = setup_dir,
     .fini = rm_dir)
{
	char path[256];
	const char *args[] = {"--config", path, "--help", NULL};
	struct kvr_config c;

	write_file("bad.conf", "bogus = 1\n", 0644, path, sizeof(path));
	cr_expect_eq(parse(&c, args), KVR_CONFIG_HELP);
}

Test(config_file, print_config_shows_every_setting_and_its_source,
     .init = setup_dir, .fini = rm_dir)
{
	char path[256], want[400], *text = NULL;
	const char *args[] = {"--config",	path, "--spin-us", "7",
			      "--print-config", NULL};
	struct kvr_config c;
	const char *key;
	size_t len = 0;
	FILE *mem;

	setenv("KVRING_SOCKET", "/tmp/kvr-cfgtest.sock", 1);
	write_file("p.conf", "\npool-size = 64M\n", 0644, path, sizeof(path));
	cr_assert_eq(parse(&c, args), KVR_CONFIG_PRINT, "%s", errbuf);
	unsetenv("KVRING_SOCKET");
	mem = open_memstream(&text, &len);
	kvr_config_print(&c, mem);
	fclose(mem);
	snprintf(want, sizeof(want), "# %s:2", path);
	cr_expect_not_null(strstr(text, "pool-size          = 67108864"), "%s",
			   text);
	cr_expect_not_null(strstr(text, want), "%s", text);
	cr_expect_not_null(strstr(text, "spin-us            = 7 "), "%s", text);
	cr_expect_not_null(strstr(text,
				  "socket             = "
				  "/tmp/kvr-cfgtest.sock     # environment"),
			   "%s", text);
	cr_expect_not_null(strstr(text, "align              = 4096 "), "%s",
			   text);
	for (unsigned i = 0; (key = kvr_config_key(i, NULL)); i++) {
		snprintf(want, sizeof(want), "\n%s ", key);
		if (kvr_config_key_settable(i))
			cr_expect_not_null(strstr(text, want), "%s", key);
		else
			cr_expect_null(strstr(text, want), "%s", key);
	}
	free(text);
}
