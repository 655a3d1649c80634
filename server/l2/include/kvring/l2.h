/* SPDX-License-Identifier: MIT */
/*
 * l2.h - kvringd's L2 tier: chunks shared between hosts through Redis or
 * Redis Cluster (docs/l2.md). The one public header of server/l2/ (the
 * library kvr_l2), private to kvringd: one section per file behind it:
 *
 *   l2_conf.c  the --l2* options, the URL grammar, the auth secret
 *   l2_fmt.c   the L2 key (namespace fingerprint + chunk key), the value
 *              header (encode and check, XXH3-64), CRC16 hash slots
 *   l2_resp.c  the small RESP decoder (reply lines, reply spans, CLUSTER
 *              SLOTS); pure, fuzzed (tests/fuzz/fuzz_l2_resp.c)
 *   l2_tier.c  the tier both sides share: node table, done queue
 *   l2_probe.c the start-up probe of every configured node
 *
 * and the jobs, the tier's struct and the lanes: an L2 lane is one
 * thread with its own connections, slot map and job queue (pipelines,
 * redirects, reconnects); its files share the private l2_lane.h, which
 * lists them. The event loop's side is server/l2_srv.c (l2_srv.h):
 * write-behind after commit, the read-through state machine,
 * completions, counters. Calls point one way: l2_srv -> lanes -> tier.
 *
 * Threading (DESIGN rule 3): the store belongs to the loop thread. A lane
 * thread never calls the store; it gets jobs that name pool spans the loop
 * already pinned (uploads) or reserved (loads), moves bytes between those
 * spans and the network, and hands each finished job back on the done
 * queue, ringing an eventfd the loop polls. The loop then commits, aborts
 * or unpins. The only state both sides touch are the two queues (mutex),
 * the counters (relaxed atomics, single meaning each) and node states.
 */
#ifndef KVR_SERVER_L2_H
#define KVR_SERVER_L2_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <kvring/proto.h>

/* ==== l2_conf.c: options ==== */

#define KVR_L2_DEF_PREFIX      "kvr:"
#define KVR_L2_DEF_DEADLINE_MS 200u
#define KVR_L2_DEF_QUEUE       32u
#define KVR_L2_DEF_IO_MS       2000u
#define KVR_L2_MAX_SEEDS       16u
#define KVR_L2_AUTH_ENV	       "KVRING_L2_PASSWORD"

enum kvr_l2_kind {
	KVR_L2_OFF = 0,
	KVR_L2_REDIS = 1,   /* redis://host:port */
	KVR_L2_UNIX = 2,    /* unix:///path */
	KVR_L2_CLUSTER = 3, /* redis-cluster://h1:p1,h2:p2,... */
};

/* Upload policy (--l2-upload). */
enum kvr_l2_upload {
	KVR_L2_UP_COMMIT = 0, /* write-behind at every commit (default) */
	KVR_L2_UP_NONE = 1,   /* read-only: never upload */
	KVR_L2_UP_EVICT = 2,  /* only chunks about to be evicted */
};

/* One address: a TCP host and port, or a Unix socket path. */
struct kvr_l2_addr {
	char host[256]; /* "" for a Unix socket */
	uint16_t port;
	char path[108];
};

/*
 * struct kvr_l2_conf - the --l2* options, part of struct kvr_config
 * (owned by main.c). The secret is not here: it is read at start-up from
 * --l2-auth-file or $KVRING_L2_PASSWORD, never from the command line.
 */
struct kvr_l2_conf {
	int kind;      /* enum kvr_l2_kind */
	char url[512]; /* --l2, for the log line */
	struct kvr_l2_addr seeds[KVR_L2_MAX_SEEDS];
	uint32_t nseeds;
	char auth_file[256];  /* --l2-auth-file */
	char prefix[64];      /* --l2-prefix */
	char salt[64];	      /* --l2-salt: tenant salt */
	uint32_t deadline_ms; /* --l2-deadline-ms */
	uint32_t queue_jobs;  /* --l2-queue */
	uint32_t io_ms;	      /* --l2-io-ms: socket timeout */
	int upload;	      /* enum kvr_l2_upload */
	bool required;	      /* --l2-required: a failed probe stops start */
};

/* ==== l2_probe.c: the start-up probe ==== */

/* Nodes one probe reports: the seeds and a cluster's other masters. */
#define KVR_L2_PROBE_MAX 64u

/* What the probe found at a node. */
enum kvr_l2_probe_state {
	KVR_L2_PROBE_UP = 0,	       /* connected, AUTH (if any), PONG */
	KVR_L2_PROBE_NOAUTH = 1,       /* a password is needed, none given */
	KVR_L2_PROBE_WRONGPASS = 2,    /* the user or password was refused */
	KVR_L2_PROBE_REFUSED = 3,      /* connection refused (or no socket) */
	KVR_L2_PROBE_UNRESOLVABLE = 4, /* the host name does not resolve */
	KVR_L2_PROBE_TIMEOUT = 5,      /* nothing within --l2-io-ms */
	KVR_L2_PROBE_ERROR = 6,	       /* another error (detail says) */
};

/* One node's result: "host:port" or "unix:PATH", state, the reply or
 * error behind it, and how long its probe took. */
struct kvr_l2_probe_node {
	char addr[300];
	int state; /* enum kvr_l2_probe_state */
	char detail[200];
	uint32_t ms;
};

/*
 * struct kvr_l2_probe - what kvr_l2_probe() found (caller's memory).
 * slots: for a cluster whose map was read, the hash slots it assigns
 * (16384 when whole).
 */
struct kvr_l2_probe {
	struct kvr_l2_probe_node node[KVR_L2_PROBE_MAX];
	uint32_t nnodes, nup;
	bool have_map;
	uint32_t slots;
};

/*
 * kvr_l2_probe - connect to every seed of @c at once, AUTH with
 * @user/@pass when @pass is not empty, PING, and for a cluster read
 * CLUSTER SLOTS and probe every master it names the same way. Each round
 * waits at most @c->io_ms (a cluster's two rounds, twice that); a node
 * still silent then is KVR_L2_PROBE_TIMEOUT. Blocks the caller; uses
 * connections of its own and closes them.
 */
void kvr_l2_probe(const struct kvr_l2_conf *c, const char *user,
		  const char *pass, struct kvr_l2_probe *out);

/*
 * kvr_l2_probe_log - kvr_l2_probe(), then one log line per node (info
 * when up, a warning with the reason and what to do when not) and, for a
 * cluster, how much of the slot space its map assigns.
 * Return: 0, or -EHOSTDOWN when a node is not usable (or a cluster's map
 * not whole) and @c->required is set: the error line says which and what
 * to do. -ENOMEM.
 */
int kvr_l2_probe_log(const struct kvr_l2_conf *c, const char *user,
		     const char *pass);

/* The state's name as log lines print it ("NOAUTH", "refused", ...). */
const char *kvr_l2_probe_state_name(int state);

/* What to do about a node in @state, one sentence ("" when up). */
const char *kvr_l2_probe_hint(int state);

/*
 * kvr_l2_conf_defaults - L2 off, default prefix and limits.
 */
void kvr_l2_conf_defaults(struct kvr_l2_conf *c);

/*
 * kvr_l2_conf_opt - apply one --l2* option (@name without the dashes).
 * Return: 0, 1 when @name is not an L2 option, or -EINVAL after printing
 * what was wrong and what to do to @err.
 */
int kvr_l2_conf_opt(struct kvr_l2_conf *c, const char *name, const char *arg,
		    FILE *err);

/*
 * kvr_l2_parse_url - redis://host:port, unix:///path or
 * redis-cluster://h1:p1,h2:p2,... into c->kind and c->seeds.
 * Return: 0, or -EINVAL with a reason in @why.
 */
int kvr_l2_parse_url(struct kvr_l2_conf *c, const char *url, const char **why);

/*
 * kvr_l2_read_secret - the password (and optional user: "user password" on
 * one line) from c->auth_file, else from $KVRING_L2_PASSWORD, else none.
 * Return: 0 (user/pass "" when none), or -errno with a reason logged.
 */
int kvr_l2_read_secret(const struct kvr_l2_conf *c, char *user, size_t ulen,
		       char *pass, size_t plen);

/* ==== l2_fmt.c: keys, values, hash slots ==== */

#define KVR_L2_MAGIC	 0x324c564bu /* "KVL2" little-endian */
#define KVR_L2_VERSION	 1u
#define KVR_L2_HDR_BYTES 64u
#define KVR_L2_KEY_MAX	 128u
#define KVR_L2_SLOTS	 16384u

/*
 * The value header, little-endian, KVR_L2_HDR_BYTES before the payload:
 *   0 magic, 4 version (u16), 6 header bytes (u16), 8 namespace
 *   fingerprint, 16 key.lo, 24 key.hi, 32 payload length, 40 XXH3-64 of
 *   the payload, 48 reserved (0), 56 XXH3-64 of bytes 0..56.
 */
struct kvr_l2_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t hdr_bytes;
	uint64_t ns_fp;
	uint64_t key_lo;
	uint64_t key_hi;
	uint64_t len;
	uint64_t sum;
	uint64_t reserved;
	uint64_t hdr_sum;
};
_Static_assert(sizeof(struct kvr_l2_hdr) == KVR_L2_HDR_BYTES, "docs/l2.md");

/*
 * kvr_l2_ns_fp - the namespace fingerprint: XXH3-64 over the namespace's
 * identity (model, layers, kv heads, head size, dtype, tp rank and size,
 * chunk tokens) and the tenant salt. No per-server id enters it, so every
 * kvringd serving the same model agrees.
 */
uint64_t kvr_l2_ns_fp(const struct kvr_ns_desc *ns, const char *salt);

/*
 * kvr_l2_key - "<prefix><fp:16 hex>:<key.hi:16 hex><key.lo:16 hex>" into
 * buf (NUL-terminated). Return: its length, or -ENAMETOOLONG.
 */
int kvr_l2_key(const char *prefix, uint64_t ns_fp, const struct kvr_key *k,
	       char *buf, size_t n);

/* kvr_l2_hdr_make - the header of a value holding @len payload bytes. */
void kvr_l2_hdr_make(uint64_t ns_fp, const struct kvr_key *k, uint64_t len,
		     uint64_t sum, struct kvr_l2_hdr *out);

/*
 * kvr_l2_hdr_check - is @h (as read from Redis) the header of a value for
 * (ns_fp, k)? Checks magic, version, size, reserved, header checksum,
 * fingerprint and key; the payload checksum is the caller's (it needs the
 * bytes). Return: 0, or -EBADMSG.
 */
int kvr_l2_hdr_check(const struct kvr_l2_hdr *h, uint64_t ns_fp,
		     const struct kvr_key *k);

/* kvr_l2_slot - Redis Cluster hash slot: CRC16 (XMODEM) of the key, or of
 * the first non-empty {hash tag}, mod 16384. */
uint32_t kvr_l2_slot(const char *key, size_t len);

/* kvr_l2_crc16 - CRC16-CCITT (XMODEM), as the cluster spec defines it. */
uint16_t kvr_l2_crc16(const void *p, size_t len);

/* ==== l2_resp.c: RESP decoding (pure) ==== */

/* The first line of a reply. */
struct kvr_l2_rline {
	char type;	 /* '+', '-', ':', '$' or '*' */
	int64_t num;	 /* ':' value, '$' length, '*' count (-1: null) */
	const char *str; /* '+'/'-': text (not NUL-terminated) */
	size_t str_len;
};

/*
 * kvr_l2_resp_line - parse one reply line at p[0..n).
 * Return: bytes used (through CRLF), -EAGAIN if the line is incomplete, or
 * -EBADMSG (unknown type, bad number, line longer than 64 KiB).
 */
long kvr_l2_resp_line(const char *p, size_t n, struct kvr_l2_rline *out);

/*
 * kvr_l2_resp_span - length of the complete reply at p[0..n), nested
 * arrays included (depth <= 8). Return: bytes, -EAGAIN, or -EBADMSG.
 */
long kvr_l2_resp_span(const char *p, size_t n);

/* One CLUSTER SLOTS range: slots [lo, hi] served by master addr. */
struct kvr_l2_range {
	uint32_t lo, hi;
	char host[64];
	uint16_t port;
};

/*
 * kvr_l2_resp_slots - decode a complete CLUSTER SLOTS reply into at most
 * @max ranges. Return: number of ranges, or -EBADMSG (shape, a range out
 * of 0..16383, a bad port), -E2BIG (more than @max).
 */
int kvr_l2_resp_slots(const char *p, size_t n, struct kvr_l2_range *out,
		      uint32_t max);

/*
 * kvr_l2_resp_redirect - parse "MOVED <slot> <host>:<port>" or "ASK ..."
 * error text. Return: 1 MOVED, 2 ASK, 0 not a redirect, -EBADMSG.
 */
int kvr_l2_resp_redirect(const char *s, size_t n, uint32_t *slot,
			 struct kvr_l2_addr *to);

/* ==== Counters (written by lanes and loop, relaxed; read by the loop) ==== */

enum kvr_l2_err {
	KVR_L2_ERR_CONNECT = 0,	 /* connect / auth failed, node down */
	KVR_L2_ERR_IO = 1,	 /* send/recv failed or timed out */
	KVR_L2_ERR_PROTO = 2,	 /* a reply we could not parse */
	KVR_L2_ERR_OOM = 3,	 /* -OOM: maxmemory with noeviction */
	KVR_L2_ERR_SERVER = 4,	 /* any other error reply */
	KVR_L2_ERR_REDIRECT = 5, /* too many MOVED/ASK for one command */
	KVR_L2_ERR__N = 6,
};

struct kvr_l2_stats {
	_Atomic uint64_t queue_depth; /* jobs queued or running, all lanes */
	_Atomic uint64_t drops;	      /* chunks not uploaded: queue full */
	_Atomic uint64_t up_chunks, up_bytes, up_exists, up_failed;
	_Atomic uint64_t down_chunks, down_bytes;
	_Atomic uint64_t hits, misses, holes, corrupt, deleted;
	_Atomic uint64_t rt_lookups, rt_answered_late, rt_deadline;
	_Atomic uint64_t moved, ask, slot_refresh;
	_Atomic uint64_t tryagain; /* publish scripts not run: resent as SET */
	_Atomic uint64_t errors[KVR_L2_ERR__N];
	_Atomic uint64_t state_changes;
};

/* ==== Jobs: l2_srv.c makes them, a lane (l2_net.c) runs them ==== */

#define KVR_L2_MAX_NODES 32u

enum kvr_l2_job_kind {
	KVR_L2_JOB_PUT = 1,   /* EXISTS, then SET of the missing ones */
	KVR_L2_JOB_PROBE = 2, /* GETRANGE 0..63: header and size */
	KVR_L2_JOB_LOAD = 3,  /* GET into the reserved span, verify */
};

/* Per-item outcome. */
enum kvr_l2_res {
	KVR_L2_RES_OK = 0,	/* put: stored; probe: hit; load: verified */
	KVR_L2_RES_EXISTS = 1,	/* put: already in L2 */
	KVR_L2_RES_MISS = 2,	/* probe/load: no such key */
	KVR_L2_RES_CORRUPT = 3, /* probe/load: failed a check (deleted) */
	KVR_L2_RES_FAIL = 4,	/* network or server error */
};

struct kvr_l2_item {
	struct kvr_key key;
	uint64_t off; /* put/load: span in the pool */
	uint64_t len; /* put/load: its length; probe: out, payload bytes */
	int32_t res;  /* enum kvr_l2_res */
	/* put: in, the storer's sum of the chunk (docs/l2.md, "Checksums"),
	 * sent as the header's sum without hashing the bytes again; load:
	 * out, the verified payload sum, which becomes the L1 object's. */
	uint32_t has_sum;
	uint64_t sum;
};

/*
 * struct kvr_l2_job - one unit of work for a lane. Allocated by the loop,
 * owned by the lane from submit until it is put on the done queue, then
 * by the loop again, which frees it. @owner is the store transfer (pins
 * of a PUT, reservations of a LOAD) the loop ends when the job returns.
 */
struct kvr_l2_job {
	struct kvr_l2_job *next;
	int kind;    /* enum kvr_l2_job_kind */
	uint32_t ns; /* server namespace id */
	uint64_t ns_fp;
	uint64_t owner; /* store transfer id, 0 for probes */
	uint32_t rt;	/* read-through record, probes and loads */
	uint32_t rt_gen;
	uint32_t n;
	uint32_t evict;	    /* PUT of --l2-upload evict (kvr_store_l2_saved) */
	uint64_t submit_ns; /* loop clock at submit: the l2_* histograms */
	struct kvr_l2_item it[];
};

struct kvr_l2_lane;

/* ==== l2_tier.c: the tier, which the lanes and the loop share ==== */

/* A node as the inspector shows it (one table for all lanes). */
struct kvr_l2_node_pub {
	char addr[272];
	_Atomic uint32_t state; /* 0 never used, 1 up, 2 down */
	_Atomic uint64_t errors;
};

/*
 * struct kvr_l2 - the tier. Created by kvr_l2_start() and destroyed by
 * kvr_l2_destroy(), owned by struct kvr_srv. The lanes borrow it.
 */
struct kvr_l2 {
	struct kvr_l2_conf cfg;
	char user[128], pass[256];
	const void *pool; /* the pool mapping, for lanes */
	uint64_t pool_bytes;
	int efd;	      /* done-queue doorbell, polled by the loop */
	pthread_mutex_t lock; /* done queue and the node table */
	struct kvr_l2_job *done_head, *done_tail;
	_Atomic uint32_t done_n;
	struct kvr_l2_lane *up, *down; /* upload lane, read-through lane */
	struct kvr_l2_stats st;
	struct kvr_l2_node_pub nodes[KVR_L2_MAX_NODES];
	uint32_t nnodes; /* under lock */
	/* Loop-thread only: */
	uint32_t chan;	       /* the store channel L2 owners belong to */
	uint32_t up_jobs;      /* upload jobs out */
	uint64_t cold_bytes;   /* evict mode: bytes pinned by uploads out */
	uint64_t cold_ns;      /* evict mode: last look at the pool */
	uint64_t cold_hold_ns; /* evict mode: no uploads before (failures) */
	uint64_t unsaved_seen; /* evict mode: store's unsaved evictions */
	struct kvr_l2_rt *rt;
	uint32_t nrt;
	uint32_t rt_busy; /* records in use */
	uint64_t *fp;	  /* per server namespace id: fingerprint */
	uint32_t nfp;
	struct kvr_key *keys; /* scratch */
	uint64_t *sizes;
	struct kvr_slot_desc *slots;
	uint8_t *keep;
};

/* Put a finished job on the done queue and wake the loop (lanes call it). */
void kvr__l2_done(struct kvr_l2 *l2, struct kvr_l2_job *j);

/* kvr__l2_node_id - the node table index of an address (added when new);
 * -ENOSPC when the table is full. Any thread. */
int kvr__l2_node_id(struct kvr_l2 *l2, const struct kvr_l2_addr *a);

/* kvr__l2_node_state - record a node going up (1) or down (2); logs the
 * change once per change. */
void kvr__l2_node_state(struct kvr_l2 *l2, int id, uint32_t state,
			const char *why);

/* ---- Lanes (l2_lane.c, l2_conn.c, l2_route.c, l2_batch.c, l2_up.c,
 * l2_down.c): one thread each with its own connections to Redis, its own
 * cluster slot map and a job queue the event loop fills (docs/l2.md,
 * "Design"). Only l2_srv.c starts, feeds and stops lanes; a lane hands
 * each job back through kvr__l2_done(). ---- */

struct kvr_l2_lane;

/*
 * kvr__l2_lane_create - a lane thread with its own connections to the
 * configured nodes. Connects lazily. Return: 0 and *out, or -errno.
 */
int kvr__l2_lane_create(struct kvr_l2 *l2, unsigned idx,
			struct kvr_l2_lane **out);

/* Queue a job (never blocks: the loop bounded the count already). */
void kvr__l2_lane_submit(struct kvr_l2_lane *ln, struct kvr_l2_job *j);

/*
 * kvr__l2_lane_destroy - stop the thread after the job it is running (a
 * bounded socket timeout at worst), then hand every job still queued to
 * the done queue unrun (items KVR_L2_RES_FAIL), close its sockets.
 */
void kvr__l2_lane_destroy(struct kvr_l2_lane *ln);

#endif /* KVR_SERVER_L2_H */
