/* SPDX-License-Identifier: MIT */
/*
 * kvringd's command line: defaults, the long-option table, getopt_long
 * parsing, size suffixes and group lookup. The same table drives the
 * --config file (cfile.c reads it; every key is looked up here), so an
 * option added to the table is a key of the file with no other code.
 * Every option is validated here so that the rest of the server can trust
 * struct kvr_config; a usage error is reported on one line naming the
 * option (and, from the file, the file and line) and the accepted range.
 * The --help text is config_help.c, --print-config config_show.c.
 *
 * This file does not decide anything at run time (which backend actually
 * works, whether the socket is free): the server does, and logs it.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <kvring/layout.h>
#include <kvring/log.h>
#include <kvring/parse.h>
#include <kvring/proto.h>
#include <kvring/segment.h>

#include "cfile.h"
#include "config.h"
#include "config_help.h"

#include <kvring/version.h> /* KVR_VERSION_STRING */

/* Long-only options get values above the ASCII range. */
enum {
	OPT_MAX_KEYS = 0x100,
	OPT_RING_BYTES,
	OPT_HEARTBEAT_MS,
	OPT_HANDSHAKE_MS,
	OPT_STALL_MS,
	OPT_POOL_BACKEND,
	OPT_LOG_LEVEL,
	OPT_ALLOW_ROOT,
	OPT_NO_PREFAULT,
	OPT_PREFAULT,
	OPT_NO_HISTOGRAMS,
	OPT_TEST_DELAY,
	OPT_ALIGN,
	OPT_SPIN_US,
	OPT_LEASE_MS,
	OPT_GROUP,
	OPT_HUGE_PAGES,
	OPT_HUGE_DIR,
	OPT_L2, /* every --l2* option: kvr_l2_conf_opt() sorts them */
	OPT_QUOTA_RESERVED,
	OPT_QUOTA_PINNED,
	OPT_MAX_KEY_BYTES,
	OPT_QUOTA_UID_RESERVED,
	OPT_QUOTA_UID_PINNED,
	OPT_XFER_MS,
	OPT_OBJECTS,
	OPT_CONFIG,
	OPT_PRINT_CONFIG,
	OPT_HISTOGRAMS,
	OPT_DISK, /* every --disk* option: kvr_disk_conf_opt() sorts them */
};

static const struct option longopts[] = {
    {"socket", required_argument, NULL, 's'},
    {"name", required_argument, NULL, 'n'},
    {"pool-size", required_argument, NULL, 'p'},
    {"align", required_argument, NULL, OPT_ALIGN},
    {"max-workers", required_argument, NULL, 'w'},
    {"spin-us", required_argument, NULL, OPT_SPIN_US},
    {"lease-ms", required_argument, NULL, OPT_LEASE_MS},
    {"group", required_argument, NULL, OPT_GROUP},
    {"pool-backend", required_argument, NULL, OPT_POOL_BACKEND},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"max-keys", required_argument, NULL, OPT_MAX_KEYS},
    {"ring-bytes", required_argument, NULL, OPT_RING_BYTES},
    {"heartbeat-ms", required_argument, NULL, OPT_HEARTBEAT_MS},
    {"handshake-ms", required_argument, NULL, OPT_HANDSHAKE_MS},
    {"stall-ms", required_argument, NULL, OPT_STALL_MS},
    {"allow-root", no_argument, NULL, OPT_ALLOW_ROOT},
    {"no-prefault", no_argument, NULL, OPT_NO_PREFAULT},
    {"prefault", no_argument, NULL, OPT_PREFAULT},
    {"huge-pages", required_argument, NULL, OPT_HUGE_PAGES},
    {"huge-dir", required_argument, NULL, OPT_HUGE_DIR},
    {"l2", required_argument, NULL, OPT_L2},
    {"l2-auth-file", required_argument, NULL, OPT_L2},
    {"l2-prefix", required_argument, NULL, OPT_L2},
    {"l2-salt", required_argument, NULL, OPT_L2},
    {"l2-deadline-ms", required_argument, NULL, OPT_L2},
    {"l2-queue", required_argument, NULL, OPT_L2},
    {"l2-io-ms", required_argument, NULL, OPT_L2},
    {"l2-upload", required_argument, NULL, OPT_L2},
    {"l2-required", no_argument, NULL, OPT_L2},
    {"disk", required_argument, NULL, OPT_DISK},
    {"disk-size", required_argument, NULL, OPT_DISK},
    {"disk-mode", required_argument, NULL, OPT_DISK},
    {"disk-chunk", required_argument, NULL, OPT_DISK},
    {"quota-reserved", required_argument, NULL, OPT_QUOTA_RESERVED},
    {"quota-pinned", required_argument, NULL, OPT_QUOTA_PINNED},
    {"max-key-bytes", required_argument, NULL, OPT_MAX_KEY_BYTES},
    {"quota-uid-reserved", required_argument, NULL, OPT_QUOTA_UID_RESERVED},
    {"quota-uid-pinned", required_argument, NULL, OPT_QUOTA_UID_PINNED},
    {"xfer-ms", required_argument, NULL, OPT_XFER_MS},
    {"objects", required_argument, NULL, OPT_OBJECTS},
    {"histograms", required_argument, NULL, OPT_HISTOGRAMS},
    {"no-histograms", no_argument, NULL, OPT_NO_HISTOGRAMS},
    {"test-delay", required_argument, NULL, OPT_TEST_DELAY},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* Every option has a slot in struct kvr_config's from[]. */
_Static_assert(sizeof(longopts) / sizeof(longopts[0]) <= KVR_CONFIG_MAX_KEYS,
	       "raise KVR_CONFIG_MAX_KEYS");

#define NR_OPTS (sizeof(longopts) / sizeof(longopts[0]) - 1)

const char *kvr_config_key(unsigned i, bool *has_arg)
{
	if (i >= NR_OPTS)
		return NULL;
	if (has_arg)
		*has_arg = longopts[i].has_arg != no_argument;
	return longopts[i].name;
}

bool kvr_config_key_settable(unsigned i)
{
	if (i >= NR_OPTS)
		return false;
	switch (longopts[i].val) {
	case OPT_CONFIG:
	case OPT_PRINT_CONFIG:
	case 'h':
	case 'V':
		return false;
	default:
		return true;
	}
}

/* Parse a decimal u32 within [lo, hi]. */
/* A number in [lo, hi] in the shared grammar (lib/parse.c). */
static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	return kvr_parse_u32(s, lo, hi, out) < 0 ? -EINVAL : 0;
}

/* A group given by name or by number. */
static int parse_group(const char *s, gid_t *out)
{
	struct group *g = getgrnam(s);
	uint32_t v;

	if (g) {
		*out = g->gr_gid;
		return 0;
	}
	if (parse_u32(s, 0, INT32_MAX, &v) == 0) {
		*out = (gid_t)v;
		return 0;
	}
	return -ENOENT;
}

static bool is_pow2(uint64_t v)
{
	return v && (v & (v - 1)) == 0;
}

static void set_defaults(struct kvr_config *c)
{
	memset(c, 0, sizeof(*c));
	c->pool_bytes = KVR_CONFIG_DEF_POOL_BYTES;
	c->align = KVR_CONFIG_DEF_ALIGN;
	c->max_workers = KVR_CONFIG_DEF_MAX_WORKERS;
	c->spin_us = KVR_CONFIG_DEF_SPIN_US;
	c->lease_ms = KVR_CONFIG_DEF_LEASE_MS;
	c->max_keys = KVR_CONFIG_DEF_MAX_KEYS;
	c->ring_bytes = KVR_CONFIG_DEF_RING_BYTES;
	c->heartbeat_ms = KVR_CONFIG_DEF_HEARTBEAT_MS;
	c->handshake_ms = KVR_CONFIG_DEF_HANDSHAKE_MS;
	c->stall_ms = KVR_CONFIG_DEF_STALL_MS;
	c->quota_bp[0] = KVR_CONFIG_DEF_QUOTA_RESERVED_BP;
	c->quota_bp[1] = KVR_CONFIG_DEF_QUOTA_PINNED_BP;
	c->quota_bp[2] = KVR_CONFIG_DEF_MAX_KEY_BP;
	c->quota_bp[3] = KVR_CONFIG_DEF_QUOTA_UID_RESERVED_BP;
	c->quota_bp[4] = KVR_CONFIG_DEF_QUOTA_UID_PINNED_BP;
	c->xfer_ms = KVR_CONFIG_DEF_XFER_MS;
	c->log_level = KVR_LOG_INFO;
	kvr_l2_conf_defaults(&c->l2);
	kvr_disk_conf_defaults(&c->disk);
}

/* Copy a string option into a fixed buffer; too long is a usage error. */
static int copy_str(char *dst, size_t n, const char *src)
{
	size_t len = strlen(src);

	if (len == 0 || len >= n)
		return -ENAMETOOLONG;
	memcpy(dst, src, len + 1);
	return 0;
}

/* "OP:US" for --test-delay: an op name as kvr_op_name() spells it. */
static int parse_test_delay(const char *a, struct kvr_config *c)
{
	const char *colon = strchr(a, ':');
	uint32_t us;

	if (!colon || parse_u32(colon + 1, 1, 1000000, &us) < 0)
		return -EINVAL;
	for (uint32_t op = 1; op < KVR_OP__MAX; op++) {
		const char *n = kvr_op_name(op);

		if (strlen(n) == (size_t)(colon - a) &&
		    strncmp(n, a, (size_t)(colon - a)) == 0) {
			c->test_delay_op = op;
			c->test_delay_us = us;
			return 0;
		}
	}
	return -EINVAL;
}

/* Report a usage error for option @opt with value @val and a hint. */
static int bad(FILE *err, const char *opt, const char *val, const char *hint)
{
	fprintf(err, "kvringd: invalid %s '%s': %s\n", opt, val ? val : "",
		hint);
	fprintf(err, "Try 'kvringd --help' for more information.\n");
	return -EINVAL;
}

/*
 * A quota: "N%" (up to two decimals, 0.01%-100%) of the pool, resolved
 * later, or a size. Exactly one of *bp and *bytes ends nonzero.
 */
static int parse_share(const char *a, uint32_t *bp, uint64_t *bytes)
{
	size_t n = strlen(a);
	char num[16], *end;
	double v;

	if (n >= 2 && a[n - 1] == '%') {
		if (n - 1 >= sizeof(num))
			return -EINVAL;
		memcpy(num, a, n - 1);
		num[n - 1] = '\0';
		if (num[0] < '0' || num[0] > '9')
			return -EINVAL;
		errno = 0;
		v = strtod(num, &end);
		if (errno || *end || v < 0.01 || v > 100.0)
			return -EINVAL;
		*bp = (uint32_t)(v * 100.0 + 0.5);
		*bytes = 0;
		return 0;
	}
	if (kvr_parse_size(a, bytes) < 0 || *bytes < 64)
		return -EINVAL;
	*bp = 0;
	return 0;
}

/* Handle one parsed option; 0 or a usage error. */
static int apply_opt(struct kvr_config *c, int ch, const char *a, FILE *err)
{
	uint64_t sz;
	int lvl;

	switch (ch) {
	case 's':
		if (copy_str(c->socket_path, sizeof(c->socket_path), a) < 0)
			return bad(err, "--socket", a,
				   "must be 1-107 bytes (sun_path limit)");
		return 0;
	case 'n':
		if (strlen(a) > 48 || a[0] == '.' || !kvr_seg_name_valid(a))
			return bad(err, "--name", a,
				   "use 1-48 characters of [A-Za-z0-9._-]");
		strcpy(c->name, a);
		return 0;
	case 'p':
		if (kvr_parse_size(a, &sz) < 0 || sz < (1u << 20))
			return bad(
			    err, "--pool-size", a,
			    "use a size of at least 1M, e.g. 512M or 4G");
		c->pool_bytes = sz;
		return 0;
	case OPT_ALIGN:
		if (kvr_parse_size(a, &sz) < 0 || !is_pow2(sz) || sz < 64 ||
		    sz > (1u << 21))
			return bad(err, "--align", a,
				   "use a power of two from 64 to 2M");
		c->align = (uint32_t)sz;
		return 0;
	case 'w':
		if (parse_u32(a, 1, 4096, &c->max_workers) < 0)
			return bad(err, "--max-workers", a, "use 1-4096");
		return 0;
	case OPT_SPIN_US:
		if (parse_u32(a, 0, 1000000, &c->spin_us) < 0)
			return bad(err, "--spin-us", a, "use 0-1000000");
		return 0;
	case OPT_LEASE_MS:
		if (parse_u32(a, 1, 86400000, &c->lease_ms) < 0)
			return bad(err, "--lease-ms", a, "use 1-86400000");
		return 0;
	case OPT_GROUP:
		if (copy_str(c->group, sizeof(c->group), a) < 0 ||
		    parse_group(a, &c->gid) < 0)
			return bad(err, "--group", a,
				   "no such group (name or number)");
		c->have_group = true;
		return 0;
	case OPT_POOL_BACKEND:
		if (strcmp(a, "shm") == 0)
			c->pool_backend = KVR_POOL_SHM;
		else if (strcmp(a, "memfd") == 0)
			c->pool_backend = KVR_POOL_MEMFD;
		else if (strcmp(a, "private") == 0 || strcmp(a, "copy") == 0)
			c->pool_backend = KVR_POOL_PRIVATE;
		else
			return bad(err, "--pool-backend", a,
				   "use shm, memfd or private");
		return 0;
	case OPT_LOG_LEVEL:
		lvl = kvr_log_parse_level(a);
		if (lvl < 0)
			return bad(err, "--log-level", a,
				   "use err, warn, info or debug");
		c->log_level = lvl;
		return 0;
	case OPT_MAX_KEYS:
		if (parse_u32(a, 1, KVR_MAX_KEYS_LIMIT, &c->max_keys) < 0)
			return bad(err, "--max-keys", a, "use 1-4096");
		return 0;
	case OPT_RING_BYTES:
		if (kvr_parse_size(a, &sz) < 0 || !is_pow2(sz) ||
		    sz < (64u << 10) || sz > (16u << 20))
			return bad(err, "--ring-bytes", a,
				   "use a power of two from 64K to 16M");
		c->ring_bytes = (uint32_t)sz;
		return 0;
	case OPT_HEARTBEAT_MS:
		if (parse_u32(a, 10, 10000, &c->heartbeat_ms) < 0)
			return bad(err, "--heartbeat-ms", a, "use 10-10000");
		return 0;
	case OPT_HANDSHAKE_MS:
		if (parse_u32(a, 10, 600000, &c->handshake_ms) < 0)
			return bad(err, "--handshake-ms", a, "use 10-600000");
		return 0;
	case OPT_STALL_MS:
		if (parse_u32(a, 10, 3600000, &c->stall_ms) < 0)
			return bad(err, "--stall-ms", a, "use 10-3600000");
		return 0;
	case OPT_ALLOW_ROOT:
		c->allow_root = true;
		return 0;
	case OPT_QUOTA_RESERVED:
		if (parse_share(a, &c->quota_bp[0], &c->quota_reserved_bytes))
			return bad(err, "--quota-reserved", a,
				   "use a size of at least 64 (e.g. 256M) or a "
				   "share of the pool from 0.01% to 100%");
		return 0;
	case OPT_QUOTA_PINNED:
		if (parse_share(a, &c->quota_bp[1], &c->quota_pinned_bytes))
			return bad(err, "--quota-pinned", a,
				   "use a size of at least 64 (e.g. 512M) or a "
				   "share of the pool from 0.01% to 100%");
		return 0;
	case OPT_MAX_KEY_BYTES:
		if (parse_share(a, &c->quota_bp[2], &c->max_key_bytes))
			return bad(err, "--max-key-bytes", a,
				   "use a size of at least 64 (e.g. 64M) or a "
				   "share of the pool from 0.01% to 100%");
		return 0;
	case OPT_QUOTA_UID_RESERVED:
		if (parse_share(a, &c->quota_bp[3],
				&c->quota_uid_reserved_bytes))
			return bad(err, "--quota-uid-reserved", a,
				   "use a size of at least 64 (e.g. 512M) or a "
				   "share of the pool from 0.01% to 100%");
		return 0;
	case OPT_QUOTA_UID_PINNED:
		if (parse_share(a, &c->quota_bp[4], &c->quota_uid_pinned_bytes))
			return bad(err, "--quota-uid-pinned", a,
				   "use a size of at least 64 (e.g. 768M) or a "
				   "share of the pool from 0.01% to 100%");
		return 0;
	case OPT_XFER_MS:
		if (parse_u32(a, 10, 86400000, &c->xfer_ms) < 0)
			return bad(err, "--xfer-ms", a, "use 10-86400000");
		return 0;
	case OPT_OBJECTS:
		/* At most the pool's slots: checked once both are known. */
		if (parse_u32(a, 0, UINT32_MAX - 1, &c->objects) < 0)
			return bad(err, "--objects", a,
				   "use a count of objects, 0-4294967294");
		return 0;
	case OPT_NO_PREFAULT:
		c->no_prefault = true;
		return 0;
	case OPT_PREFAULT:
		c->no_prefault = false;
		return 0;
	case OPT_HUGE_PAGES:
		if (strcmp(a, "auto") == 0)
			c->huge_pages = KVR_HUGE_AUTO;
		else if (strcmp(a, "require") == 0)
			c->huge_pages = KVR_HUGE_REQUIRE;
		else if (strcmp(a, "off") == 0)
			c->huge_pages = KVR_HUGE_OFF;
		else
			return bad(err, "--huge-pages", a,
				   "use auto, require or off");
		return 0;
	case OPT_HUGE_DIR:
		if (copy_str(c->huge_dir, sizeof(c->huge_dir), a) < 0 ||
		    a[0] != '/')
			return bad(err, "--huge-dir", a,
				   "use an absolute path shorter than 256 "
				   "bytes");
		return 0;
	case OPT_NO_HISTOGRAMS:
		c->histograms = KVR_HISTS_OFF;
		return 0;
	case OPT_HISTOGRAMS:
		if (strcmp(a, "per-channel") == 0)
			c->histograms = KVR_HISTS_PER_CHANNEL;
		else if (strcmp(a, "global") == 0)
			c->histograms = KVR_HISTS_GLOBAL;
		else if (strcmp(a, "off") == 0)
			c->histograms = KVR_HISTS_OFF;
		else
			return bad(err, "--histograms", a,
				   "use per-channel, global or off");
		return 0;
	case OPT_TEST_DELAY:
		if (parse_test_delay(a, c) < 0)
			return bad(err, "--test-delay", a,
				   "use OP:US, e.g. ping:50 (op name as in "
				   "docs/protocol.md, 1-1000000 us)");
		return 0;
	default:
		fprintf(err, "kvringd: unknown option or missing argument\n");
		fprintf(err, "Try 'kvringd --help' for more information.\n");
		return -EINVAL;
	}
}

/* A share given in basis points becomes bytes of the pool (at least 64). */
static void resolve_share(uint32_t bp, uint64_t pool_bytes, uint64_t *bytes)
{
	if (!bp)
		return;
	*bytes = pool_bytes / 10000u * bp + pool_bytes % 10000u * bp / 10000u;
	if (*bytes < 64)
		*bytes = 64;
}

/* The table index of the option getopt_long returned as @ch (@li is set
 * only for a long option). */
static unsigned opt_index(int ch, int li)
{
	if (li >= 0)
		return (unsigned)li;
	for (unsigned i = 0; i < NR_OPTS; i++)
		if (longopts[i].val == ch)
			return i;
	return NR_OPTS;
}

/* Apply option @i of the table with value @a (NULL for a flag). */
static int apply_index(struct kvr_config *c, unsigned i, const char *a,
		       FILE *err)
{
	if (longopts[i].val == OPT_L2)
		return kvr_l2_conf_opt(&c->l2, longopts[i].name, a, err) != 0
			   ? -EINVAL
			   : 0;
	if (longopts[i].val == OPT_DISK) {
		char msg[256];

		if (kvr_disk_conf_opt(&c->disk, longopts[i].name, a, msg,
				      sizeof(msg)) != 0) {
			fprintf(err, "kvringd: %s\n", msg);
			return -EINVAL;
		}
		return 0;
	}
	return apply_opt(c, longopts[i].val, a, err);
}

/* The config file being applied (cfile.h callback argument). */
struct file_ctx {
	struct kvr_config *c;
	FILE *err;
};

/* Apply one "key = value" of the file through the option table. */
static int file_setting(void *arg, const char *key, const char *val,
			unsigned line)
{
	struct file_ctx *f = arg;
	const char *path = f->c->config_path;
	char *msg = NULL, *nl;
	size_t len = 0;
	unsigned i;
	FILE *mem;
	int rc;

	for (i = 0; i < NR_OPTS; i++)
		if (strcmp(longopts[i].name, key) == 0)
			break;
	if (i == NR_OPTS) {
		fprintf(f->err,
			"kvringd: %s:%u: unknown key '%s'; keys are "
			"kvringd's long flag names without the dashes "
			"(kvringd --help, docs/config.md)\n",
			path, line, key);
		return -EINVAL;
	}
	if (!kvr_config_key_settable(i)) {
		fprintf(f->err,
			"kvringd: %s:%u: '%s' is not a setting; give it on "
			"the command line, and delete this line\n",
			path, line, key);
		return -EINVAL;
	}
	if (longopts[i].has_arg == no_argument) {
		if (val && strcmp(val, "false") == 0)
			return 0; /* as if not given: the default stays */
		if (val && strcmp(val, "true") != 0) {
			fprintf(f->err,
				"kvringd: %s:%u: '%s' is a flag and takes no "
				"value but true or false; write '%s' or "
				"'%s = true'\n",
				path, line, key, key, key);
			return -EINVAL;
		}
	} else if (!val || !*val) {
		fprintf(f->err,
			"kvringd: %s:%u: '%s' needs a value; write '%s = "
			"VALUE' (kvringd --help says which)\n",
			path, line, key, key);
		return -EINVAL;
	}
	/* The option's own message, said about the file's line. */
	mem = open_memstream(&msg, &len);
	if (!mem)
		return -ENOMEM;
	rc = apply_index(f->c, i, val && *val ? val : NULL, mem);
	fclose(mem);
	if (rc < 0) {
		nl = msg ? strchr(msg, '\n') : NULL;
		if (nl)
			*nl = '\0';
		fprintf(f->err,
			"kvringd: %s:%u: %s; fix the line, or override it "
			"with --%s\n",
			path, line,
			msg && strncmp(msg, "kvringd: ", 9) == 0 ? msg + 9
								 : "bad value",
			key);
	} else {
		f->c->from[i] = KVR_FROM_FILE;
		f->c->from_line[i] = line;
	}
	free(msg);
	return rc;
}

/* First pass over the command line: only --config (read before any flag
 * so that flags override it) and whether --help/--version were asked. */
static int find_config(int argc, char **argv, struct kvr_config *c, bool *meta)
{
	int ch, li = -1;

	optind = 0;
	*meta = false;
	while ((ch = getopt_long(argc, argv, "s:n:p:w:hV", longopts, &li)) !=
	       -1) {
		if (ch == OPT_CONFIG &&
		    copy_str(c->config_path, sizeof(c->config_path), optarg) <
			0)
			return -EINVAL;
		if (ch == 'h' || ch == 'V')
			*meta = true;
		li = -1;
	}
	return 0;
}

int kvr_config_parse(int argc, char **argv, struct kvr_config *cfg, FILE *out,
		     FILE *err)
{
	struct file_ctx fc = {.c = cfg, .err = err};
	const char *env;
	unsigned idx;
	bool meta;
	int ch, rc;

	set_defaults(cfg);
	/* getopt keeps state in globals: reset it so tests can parse twice. */
	opterr = 0; /* errors are reported to @err by apply_opt() */
	if (find_config(argc, argv, cfg, &meta) < 0)
		return bad(err, "--config", "(too long)",
			   "use a path of 1-255 bytes");
	if (cfg->config_path[0] && !meta) {
		rc = kvr__cfile_read(cfg->config_path, file_setting, &fc, err);
		if (rc < 0)
			return rc;
	}
	optind = 0;
	int li = -1;

	while ((ch = getopt_long(argc, argv, "s:n:p:w:hV", longopts, &li)) !=
	       -1) {
		idx = opt_index(ch, li);
		li = -1;
		if (idx < NR_OPTS && kvr_config_key_settable(idx))
			cfg->from[idx] = KVR_FROM_FLAG;
		if (ch == OPT_CONFIG)
			continue; /* read above */
		if (ch == OPT_PRINT_CONFIG) {
			cfg->print_config = true;
			continue;
		}
		if (ch == OPT_L2 || ch == OPT_DISK) {
			if (apply_index(cfg, idx, optarg, err) != 0)
				return -EINVAL;
			continue;
		}
		if (ch == 'h') {
			kvr__config_usage(out);
			return KVR_CONFIG_HELP;
		}
		if (ch == 'V') {
			fprintf(out,
				"kvringd %s (protocol %u, segment abi %u.%u)\n",
				KVR_VERSION_STRING, KVR_PROTO_VERSION,
				KVR_ABI_MAJOR, KVR_ABI_MINOR);
			return KVR_CONFIG_VERSION;
		}
		if (ch == '?' || ch == ':') {
			fprintf(err,
				"kvringd: unknown option or missing "
				"argument: '%s'\n",
				argv[optind - 1]);
			fprintf(err, "Try 'kvringd --help' for more "
				     "information.\n");
			return -EINVAL;
		}
		rc = apply_opt(cfg, ch, optarg, err);
		if (rc < 0)
			return rc;
	}
	if (optind < argc) {
		fprintf(err, "kvringd: unexpected argument '%s'\n",
			argv[optind]);
		fprintf(err, "Try 'kvringd --help' for more information.\n");
		return -EINVAL;
	}
	if (cfg->align > cfg->pool_bytes)
		return bad(err, "--align", "", "larger than --pool-size");
	/* The storage engine keeps a slot's offset in 32 bits of units. */
	if (cfg->pool_bytes / cfg->align > UINT32_MAX)
		return bad(err, "--pool-size", "",
			   "more than 2^32 slots of --align: raise --align "
			   "(4096 allows up to 16T)");
	if (cfg->objects > cfg->pool_bytes / cfg->align) {
		fprintf(err,
			"kvringd: invalid --objects %u: the pool holds at most "
			"%llu objects (--pool-size / --align); lower --objects "
			"or raise --pool-size\n",
			cfg->objects,
			(unsigned long long)(cfg->pool_bytes / cfg->align));
		return -EINVAL;
	}
	if (cfg->disk.dir[0]) {
		char msg[256];

		if (kvr_disk_conf_check(&cfg->disk, msg, sizeof(msg)) < 0) {
			fprintf(err, "kvringd: %s\n", msg);
			return -EINVAL;
		}
		/* Records move straight between slots and the file with
		 * O_DIRECT: slots must start on 4 KiB. */
		if (cfg->align < KVR_DISK_BLOCK)
			return bad(err, "--align", "",
				   "--disk needs slots aligned to at least "
				   "4096 bytes");
	}
	if (cfg->huge_pages == KVR_HUGE_REQUIRE &&
	    cfg->pool_backend == KVR_POOL_PRIVATE)
		return bad(err, "--huge-pages", "require",
			   "the private pool (copy transport) never uses huge "
			   "pages; drop --pool-backend private");
	/* The copy transport sends a retrieve's bytes from pinned slots; a
	 * stalled socket is cut at --stall-ms, which must come first. */
	if (cfg->xfer_ms <= cfg->stall_ms) {
		fprintf(err,
			"kvringd: invalid --xfer-ms %u: must be larger "
			"than --stall-ms %u (a stalled copy send must be "
			"cut before its pins expire)\n",
			cfg->xfer_ms, cfg->stall_ms);
		fprintf(err, "Try 'kvringd --help' for more information.\n");
		return -EINVAL;
	}
	resolve_share(cfg->quota_bp[0], cfg->pool_bytes,
		      &cfg->quota_reserved_bytes);
	resolve_share(cfg->quota_bp[1], cfg->pool_bytes,
		      &cfg->quota_pinned_bytes);
	resolve_share(cfg->quota_bp[2], cfg->pool_bytes, &cfg->max_key_bytes);
	resolve_share(cfg->quota_bp[3], cfg->pool_bytes,
		      &cfg->quota_uid_reserved_bytes);
	resolve_share(cfg->quota_bp[4], cfg->pool_bytes,
		      &cfg->quota_uid_pinned_bytes);

	/* Names not given on the command line come from the environment or
	 * from the uid (so two users never collide). */
	if (!cfg->socket_path[0]) {
		env = getenv("KVRING_SOCKET");
		if (env && *env) {
			if (copy_str(cfg->socket_path, sizeof(cfg->socket_path),
				     env) < 0)
				return bad(err, "$KVRING_SOCKET", env,
					   "must be 1-107 bytes");
			idx = opt_index('s', -1);
			cfg->from[idx] = KVR_FROM_ENV;
		} else {
			rc = kvr_default_socket_path(cfg->socket_path,
						     sizeof(cfg->socket_path));
			cfg->socket_default = rc == 0;
			if (rc < 0) {
				fprintf(err,
					"kvringd: default socket path: %s\n",
					strerror(-rc));
				return rc;
			}
		}
	}
	if (!cfg->name[0] &&
	    kvr_seg_default_base(cfg->name, sizeof(cfg->name)) < 0) {
		fprintf(err, "kvringd: default segment name does not fit\n");
		return -ENAMETOOLONG;
	}
	return cfg->print_config ? KVR_CONFIG_PRINT : KVR_CONFIG_RUN;
}
