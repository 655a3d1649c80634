/* SPDX-License-Identifier: MIT */
/*
 * --print-config (config_show.h): one row per setting saying where its
 * effective value lives in struct kvr_config and how to spell it. Sizes
 * print in bytes and shares ("25%") as the bytes they resolved to, so what
 * is printed is exactly what the server uses.
 */
#include <stddef.h>
#include <string.h>

#include <kvring/layout.h>
#include <kvring/proto.h>

#include "config_show.h"

/* How a row's field is spelled. */
enum kind {
	K_STR,	 /* char[]; "" prints as (none) */
	K_U32,	 /* uint32_t */
	K_U64,	 /* uint64_t (bytes) */
	K_BOOL,	 /* bool: true/false */
	K_NBOOL, /* bool, inverted (--prefault beside --no-prefault) */
	K_ENUM,	 /* int, one of names[] */
	K_SPECIAL,
};

/* One setting: the long option's name, the field and its spelling. */
struct row {
	const char *key;
	enum kind kind;
	size_t off;
	const char *const *names; /* K_ENUM: by value; NULL ends */
};

static const char *const backends[] = {"auto", "shm", "memfd", "private", NULL};
static const char *const levels[] = {"err", "warn", "info", "debug", NULL};
static const char *const huge[] = {"auto", "require", "off", NULL};
static const char *const uploads[] = {"commit", "none", "evict", NULL};
static const char *const hists[] = {"per-channel", "global", "off", NULL};
static const char *const dmodes[] = {"evict", "commit", NULL};

#define F(field) offsetof(struct kvr_config, field)

static const struct row rows[] = {
    {"socket", K_STR, F(socket_path), NULL},
    {"name", K_STR, F(name), NULL},
    {"pool-size", K_U64, F(pool_bytes), NULL},
    {"align", K_U32, F(align), NULL},
    {"objects", K_U32, F(objects), NULL},
    {"max-workers", K_U32, F(max_workers), NULL},
    {"spin-us", K_U32, F(spin_us), NULL},
    {"lease-ms", K_U32, F(lease_ms), NULL},
    {"group", K_STR, F(group), NULL},
    {"pool-backend", K_ENUM, F(pool_backend), backends},
    {"log-level", K_ENUM, F(log_level), levels},
    {"max-keys", K_U32, F(max_keys), NULL},
    {"ring-bytes", K_U32, F(ring_bytes), NULL},
    {"heartbeat-ms", K_U32, F(heartbeat_ms), NULL},
    {"handshake-ms", K_U32, F(handshake_ms), NULL},
    {"stall-ms", K_U32, F(stall_ms), NULL},
    {"allow-root", K_BOOL, F(allow_root), NULL},
    {"no-prefault", K_BOOL, F(no_prefault), NULL},
    {"prefault", K_NBOOL, F(no_prefault), NULL},
    {"huge-pages", K_ENUM, F(huge_pages), huge},
    {"huge-dir", K_STR, F(huge_dir), NULL},
    {"l2", K_STR, F(l2.url), NULL},
    {"l2-auth-file", K_STR, F(l2.auth_file), NULL},
    {"l2-prefix", K_STR, F(l2.prefix), NULL},
    {"l2-salt", K_STR, F(l2.salt), NULL},
    {"l2-deadline-ms", K_U32, F(l2.deadline_ms), NULL},
    {"l2-queue", K_U32, F(l2.queue_jobs), NULL},
    {"l2-io-ms", K_U32, F(l2.io_ms), NULL},
    {"l2-upload", K_ENUM, F(l2.upload), uploads},
    {"l2-required", K_BOOL, F(l2.required), NULL},
    {"quota-reserved", K_U64, F(quota_reserved_bytes), NULL},
    {"quota-pinned", K_U64, F(quota_pinned_bytes), NULL},
    {"max-key-bytes", K_U64, F(max_key_bytes), NULL},
    {"quota-uid-reserved", K_U64, F(quota_uid_reserved_bytes), NULL},
    {"quota-uid-pinned", K_U64, F(quota_uid_pinned_bytes), NULL},
    {"xfer-ms", K_U32, F(xfer_ms), NULL},
    {"histograms", K_ENUM, F(histograms), hists},
    {"disk", K_STR, F(disk.dir), NULL},
    {"disk-size", K_U64, F(disk.size_bytes), NULL},
    {"disk-mode", K_ENUM, F(disk.mode), dmodes},
    {"disk-chunk", K_U64, F(disk.chunk_bytes), NULL},
    {"no-histograms", K_SPECIAL, 0, NULL},
    {"test-delay", K_SPECIAL, 0, NULL},
};

/* The spelling of an enum value, or "?" outside the names. */
static const char *enum_name(const char *const *names, int v)
{
	for (int i = 0; names[i]; i++)
		if (i == v)
			return names[i];
	return "?";
}

bool kvr_config_show_value(const struct kvr_config *cfg, const char *key,
			   char *buf, size_t len)
{
	const char *base = (const char *)cfg;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		const void *p = base + r->off;

		if (strcmp(r->key, key) != 0)
			continue;
		switch (r->kind) {
		case K_STR:
			snprintf(buf, len, "%s",
				 *(const char *)p ? (const char *)p : "(none)");
			break;
		case K_U32:
			snprintf(buf, len, "%u", *(const uint32_t *)p);
			break;
		case K_U64:
			snprintf(buf, len, "%llu",
				 (unsigned long long)*(const uint64_t *)p);
			break;
		case K_BOOL:
		case K_NBOOL:
			snprintf(buf, len, "%s",
				 *(const bool *)p != (r->kind == K_NBOOL)
				     ? "true"
				     : "false");
			break;
		case K_ENUM:
			snprintf(buf, len, "%s",
				 enum_name(r->names, *(const int *)p));
			break;
		case K_SPECIAL: /* no-histograms, test-delay OP:US */
			if (r->key[0] == 'n')
				snprintf(buf, len, "%s",
					 cfg->histograms == KVR_HISTS_OFF
					     ? "true"
					     : "false");
			else if (cfg->test_delay_op)
				snprintf(buf, len, "%s:%u",
					 kvr_op_name(cfg->test_delay_op),
					 cfg->test_delay_us);
			else
				snprintf(buf, len, "(none)");
			break;
		}
		return true;
	}
	return false;
}

void kvr_config_print(const struct kvr_config *cfg, FILE *out)
{
	char val[600], from[300];
	const char *key;

	fprintf(out, "# kvringd effective settings; config file: %s\n",
		cfg->config_path[0] ? cfg->config_path : "(none)");
	for (unsigned i = 0; (key = kvr_config_key(i, NULL)); i++) {
		if (!kvr_config_key_settable(i))
			continue;
		if (!kvr_config_show_value(cfg, key, val, sizeof(val)))
			snprintf(val, sizeof(val), "(not shown)");
		switch (cfg->from[i]) {
		case KVR_FROM_FILE:
			snprintf(from, sizeof(from), "%s:%u", cfg->config_path,
				 cfg->from_line[i]);
			break;
		case KVR_FROM_FLAG:
			snprintf(from, sizeof(from), "flag");
			break;
		case KVR_FROM_ENV:
			snprintf(from, sizeof(from), "environment");
			break;
		default:
			snprintf(from, sizeof(from), "default");
			break;
		}
		fprintf(out, "%-18s = %-24s  # %s\n", key, val, from);
	}
}
