/* SPDX-License-Identifier: MIT */
/*
 * kvringd's configuration: every command-line option, its default and its
 * parsing (sizes with K/M/G suffixes, group names, backends), and the
 * --help text. docs/config.md repeats the table for operators.
 *
 * This file owns nothing at run time: it fills a struct that main.c passes
 * to the server. It never opens files or sockets.
 */
#ifndef KVR_SERVER_CONFIG_H
#define KVR_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <kvring/paths.h>

#include <kvring/disk.h>
#include <kvring/l2.h>

/* Defaults (docs/config.md). */
#define KVR_CONFIG_DEF_POOL_BYTES   (1ull << 30)
#define KVR_CONFIG_DEF_ALIGN	    4096u
#define KVR_CONFIG_DEF_MAX_WORKERS  64u
#define KVR_CONFIG_DEF_SPIN_US	    50u
#define KVR_CONFIG_DEF_LEASE_MS	    30000u
#define KVR_CONFIG_DEF_MAX_KEYS	    1024u
#define KVR_CONFIG_DEF_RING_BYTES   (128u << 10)
#define KVR_CONFIG_DEF_HEARTBEAT_MS 100u
#define KVR_CONFIG_DEF_HANDSHAKE_MS 2000u
#define KVR_CONFIG_DEF_STALL_MS	    5000u
/* Isolation defaults (docs/config.md, docs/reliability.md): per channel,
 * in hundredths of a percent of the pool, and the transfer deadline. */
#define KVR_CONFIG_DEF_QUOTA_RESERVED_BP 2500u /* 25% */
#define KVR_CONFIG_DEF_QUOTA_PINNED_BP	 5000u /* 50% */
#define KVR_CONFIG_DEF_MAX_KEY_BP	 1250u /* 12.5% */
/* Per uid, across all its channels (what about two channels may hold). */
#define KVR_CONFIG_DEF_QUOTA_UID_RESERVED_BP 5000u /* 50% */
#define KVR_CONFIG_DEF_QUOTA_UID_PINNED_BP   7500u /* 75% */
#define KVR_CONFIG_DEF_XFER_MS		     30000u

/* Room for every long option's source (config.c asserts it fits). */
#define KVR_CONFIG_MAX_KEYS 96

/*
 * struct kvr_config - the parsed options. Owned by main.c (on its stack);
 * the server copies what it needs and never keeps a pointer to it.
 */
struct kvr_config {
	char socket_path[KVR_SOCKET_PATH_MAX]; /* --socket */
	char name[64];			       /* --name: segment base */
	uint64_t pool_bytes;		       /* --pool-size */
	uint32_t align;			       /* --align */
	uint32_t objects;		       /* --objects (0: a guess) */
	uint32_t max_workers;		       /* --max-workers */
	uint32_t spin_us;		       /* --spin-us */
	uint32_t lease_ms;		       /* --lease-ms */
	uint32_t max_keys;		       /* --max-keys */
	uint32_t ring_bytes;		       /* --ring-bytes (each ring) */
	uint32_t heartbeat_ms;		       /* --heartbeat-ms */
	uint32_t handshake_ms;		       /* --handshake-ms */
	uint32_t stall_ms;		       /* --stall-ms */
	int pool_backend;		       /* 0 auto, else KVR_POOL_* */
	int log_level;			       /* KVR_LOG_* */
	bool have_group;		       /* --group given */
	gid_t gid;			       /* its gid */
	char group[64];			       /* as given, for logs */
	bool allow_root;		       /* --allow-root */
	bool no_prefault;		       /* --no-prefault (tests) */
	int histograms;			       /* --histograms: KVR_HISTS_* */
	uint32_t test_delay_op;		       /* --test-delay OP:US (tests) */
	uint32_t test_delay_us;
	int huge_pages;		   /* --huge-pages: KVR_HUGE_* */
	char huge_dir[256];	   /* --huge-dir ("" = find) */
	struct kvr_l2_conf l2;	   /* --l2* (l2_conf.c) */
	struct kvr_disk_conf disk; /* --disk* (disk_conf.c) */
	/* Per-channel limits, in bytes once parsed (a "N%" option is
	 * resolved against --pool-size after every option was read). */
	uint64_t quota_reserved_bytes; /* --quota-reserved */
	uint64_t quota_pinned_bytes;   /* --quota-pinned */
	uint64_t max_key_bytes;	       /* --max-key-bytes */
	/* Per-uid aggregates over all of a uid's channels. */
	uint64_t quota_uid_reserved_bytes; /* --quota-uid-reserved */
	uint64_t quota_uid_pinned_bytes;   /* --quota-uid-pinned */
	uint32_t quota_bp[5];		   /* parse-time: basis points, or 0 */
	uint32_t xfer_ms;		   /* --xfer-ms */
	bool socket_default; /* socket_path is the runtime default */
	/* Where each setting came from, by index in the long-option table
	 * (kvr_config_key()): enum kvr_config_from and, for a file, its
	 * line. --print-config shows them. */
	char config_path[256]; /* --config FILE, "" without one */
	bool print_config;     /* --print-config */
	uint8_t from[KVR_CONFIG_MAX_KEYS];
	uint32_t from_line[KVR_CONFIG_MAX_KEYS];
};

/* Where a setting's value came from (--print-config). */
enum kvr_config_from {
	KVR_FROM_DEFAULT = 0,
	KVR_FROM_FILE = 1, /* --config FILE, line from_line[] */
	KVR_FROM_FLAG = 2, /* the command line */
	KVR_FROM_ENV = 3,  /* an environment variable (KVRING_SOCKET) */
};

/* --histograms: which latency histograms kvringd keeps (docs/inspect.md). */
enum kvr_hists_mode {
	KVR_HISTS_PER_CHANNEL = 0, /* default: global and per channel */
	KVR_HISTS_GLOBAL = 1,	   /* the global ones only */
	KVR_HISTS_OFF = 2,	   /* none (--no-histograms) */
};

/* --huge-pages: use huge pages when enough are free, always, or never. */
enum kvr_huge_mode {
	KVR_HUGE_AUTO = 0, /* default: huge if free, else 4 KiB + a hint */
	KVR_HUGE_REQUIRE = 1,
	KVR_HUGE_OFF = 2,
};

/* Outcome of kvr_config_parse() besides errors. */
#define KVR_CONFIG_RUN	   0
#define KVR_CONFIG_HELP	   1 /* --help printed: exit 0 */
#define KVR_CONFIG_VERSION 2 /* --version printed: exit 0 */
#define KVR_CONFIG_PRINT   3 /* --print-config: caller prints, exits 0 */

/*
 * kvr_config_parse - fill @cfg from the command line. Defaults first,
 * then the --config file (cfile.h; any key is a long option's name), then
 * the options, which override the file; $KVRING_SOCKET is the socket
 * path when neither gives one. Records where each setting came from in
 * cfg->from[]. Prints --help and
 * --version to @out and usage errors (one line naming the option, then a
 * hint) to @err.
 * Return: KVR_CONFIG_RUN, _HELP, _VERSION or _PRINT, or -EINVAL on a usage
 * error (the caller exits 2), -EPERM for a config file others may write,
 * another negative errno if the file cannot be read or no default path
 * fits.
 */
int kvr_config_parse(int argc, char **argv, struct kvr_config *cfg, FILE *out,
		     FILE *err);

/*
 * kvr_config_key - the name (without dashes) of long option @i, in the
 * table getopt_long and the config file share, or NULL past its end.
 * @has_arg, when not NULL, says whether it takes a value.
 */
const char *kvr_config_key(unsigned i, bool *has_arg);

/*
 * kvr_config_key_settable - whether long option @i names a setting (every
 * option but --config, --print-config, --help and --version): what the
 * config file accepts and --print-config shows.
 */
bool kvr_config_key_settable(unsigned i);

#endif /* KVR_SERVER_CONFIG_H */
