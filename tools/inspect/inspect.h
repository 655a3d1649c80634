/* SPDX-License-Identifier: MIT */
/*
 * inspect.h - the private interface between kvring-inspect's modules.
 *
 * kvring-inspect is one program split by responsibility: main
 * (tools/kvring-inspect.c) parses options and dispatches; attach.c and
 * socket.c find and map the control segment; snapshot.c copies what is
 * shown out of the mapping, and view.c derives values from that copy;
 * promtext.c writes the Prometheus text format's primitives;
 * overview.c, prom.c, list.c, dump.c and
 * check.c render (through tools/common/emit.h); watch.c loops; obs.c copies and
 * renders the cache counters and latency histograms (--latency, and its part of
 * the overview and of --prometheus); serve.c serves --prometheus over HTTP
 * (--serve); sys.c holds the process plumbing (errors, clocks, signals) and
 * names.c turns untrusted values into printable text. This header declares what
 * crosses those files and nothing else: helpers used by one file stay static
 * there. Nothing here is a public API; the names carry the ins_ prefix (INS_
 * for macros) so that they can never collide with libkvr's kvr_ names the tool
 * links against.
 */
#ifndef KVR_TOOLS_INSPECT_H
#define KVR_TOOLS_INSPECT_H

#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/hist.h>
#include <kvring/layout.h>
#include <kvring/proto.h>
#include <kvring/ring.h>
#include <kvring/segment.h>

#include "emit.h"

#define INS_PROG   "kvring-inspect"
#define INS_SCHEMA 1 /* the "schema" of every JSON object we print */

/* Exit codes (STYLE.md section 12). */
#define INS_EXIT_OK	 0
#define INS_EXIT_RUNTIME 1
#define INS_EXIT_USAGE	 2
#define INS_EXIT_CHECK	 3

#define INS_NSEC 1000000000ull

/* ==== Options (tools/kvring-inspect.c) ==== */

enum ins_mode {
	INS_MODE_OVERVIEW,
	INS_MODE_PROM,
	INS_MODE_LIST,
	INS_MODE_DUMP,
	INS_MODE_CHECK,
	INS_MODE_LATENCY, /* --latency [--channel N] (obs.c) */
	INS_MODE_SERVE,	  /* --serve ADDR:PORT (serve.c) */
};

/* Parsed command line; lives in main()'s frame for the whole run, and the
 * strings point into argv. */
struct ins_opts {
	enum ins_mode mode;
	const char *name;   /* --name: base, base.ctl, or a path */
	const char *socket; /* --socket */
	const char *dir;    /* --dir, NULL = /dev/shm */
	bool json, all, watch;
	uint32_t watch_ms;
	long count; /* --count: frames in --watch, 0 = forever */
	uint32_t dump_channel;
	bool have_channel; /* --channel N (with --latency) */
	uint32_t channel;
	const char *serve; /* --serve ADDR:PORT */
};

/* ==== Process plumbing (sys.c) ==== */

/*
 * The SIGBUS guard. Code about to read the mapping sets ins_bus_armed and
 * calls sigsetjmp(ins_bus_jmp, 1) itself (sigsetjmp cannot be wrapped in a
 * function that returns), and clears ins_bus_armed when the reads are
 * done. While armed, a SIGBUS jumps back there; while not, it kills the
 * process as usual, so a genuine bug is never swallowed.
 */
extern sigjmp_buf ins_bus_jmp;
extern volatile sig_atomic_t ins_bus_armed;
/* Set by SIGINT and SIGTERM: --watch finishes its frame and exits 0. */
extern volatile sig_atomic_t ins_stop;

/* Installs the SIGBUS guard and the SIGINT/SIGTERM stop flag. */
void ins_signals_install(void);
/* "kvring-inspect: <message>\n" on stderr (STYLE.md 12). */
void ins_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sleeps @ms; a signal (SIGINT under --watch) ends the sleep early. */
void ins_sleep_ms(uint32_t ms);

/* ==== Printable forms of untrusted values (names.c) ==== */

/* Each returns a static string; a value out of range reads "invalid"
 * ("unknown" for slot statuses, where "invalid" is a status) rather than
 * indexing past a table. */
const char *ins_server_state_name(uint32_t s);
const char *ins_chan_state_name(uint32_t s);
const char *ins_backend_name(uint32_t b);
const char *ins_transport_name(uint32_t t);
const char *ins_slot_status_name(int32_t s);
/* Copies at most @srcn bytes of a shared string into @dst (size @n > 0),
 * NUL-terminated, with every byte that is not printable ASCII, and '"'
 * and '\\', replaced by '?'. */
void ins_copy_clean(char *dst, size_t n, const char *src, size_t srcn);
/* The 16-byte boot id as 32 lowercase hex digits. */
void ins_hex16(char out[33], const uint8_t id[16]);

/* ==== Output emitter: tools/common/emit.h (struct kvr_em) ==== */

/* ==== Finding and mapping the segment (attach.c, socket.c) ==== */

/* Where the control segment is: @dir/@name, and the joined path. */
struct ins_target {
	char dir[KVR_SEG_DIR_MAX];
	char name[KVR_SEG_NAME_MAX + 1];
	char path[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];
};

/*
 * A read-only attachment: owned by the caller, ended by
 * ins_attach_close(). h points into a PROT_READ mapping, so a stray write
 * faults instead of corrupting the server. g is recomputed privately from
 * the header's capacities; when it disagrees with the header, geom_ok is
 * false and geom_err says why (only --check goes on with such a segment).
 */
/* One channel block as the inspector mapped it (attach.c): read-only,
 * from the server's descriptor, for one generation of the channel. */
struct ins_blk {
	struct kvr_seg seg; /* base NULL: not mapped */
	uint32_t gen;	    /* the directory generation it was mapped for */
};

struct ins_attach {
	struct kvr_seg seg;
	struct kvr_ctl_hdr_shm *h; /* seg.base: never written (PROT_READ) */
	struct ins_blk *blk;	   /* max_channels entries, or NULL */
	struct kvr_seg dir;	   /* the channel directory (abi 4.0),
				      PROT_READ; base NULL if not opened */
	int dir_rc;		   /* why not: -EACCES not root nor the
				      server's uid, -ENOENT server gone */
	struct kvr_ctl_geom g;	   /* recomputed privately from the caps */
	dev_t dev;		   /* identity of the file we mapped, so */
	ino_t ino;		   /* --watch can tell a restart */
	bool geom_ok;
	char geom_err[256];
};

void ins_target_set(struct ins_target *t, const char *dir, const char *name);
int ins_target_from_name(struct ins_target *t, const char *dir,
			 const char *name);
int ins_target_from_socket(struct ins_target *t, const char *dir,
			   const char *path);
int ins_attach_open(const struct ins_target *t, struct ins_attach *a,
		    struct kvr_err *e);
void ins_attach_close(struct ins_attach *a);
/*
 * ins_chan_block - channel @i's block for directory generation @gen,
 * mapped read-only through /proc/<server>/fd (abi 3.0; docs/inspect.md),
 * kept mapped while the generation stays. Return: the block, or NULL
 * with *rc set (-EACCES: not root nor the server's uid; -ESTALE: the
 * channel changed hands while we looked; -ENOENT: no block).
 */
const struct kvr_channel_shm *ins_chan_block(const struct ins_attach *a,
					     uint32_t i, uint32_t gen, int *rc);

/* ==== Snapshot: a private copy of everything rendered (snapshot.c) ==== */

/* One uid's aggregate over its channels (abi 4.1, the directory's table). */
struct ins_uid_snap {
	uint32_t uid, channels;
	uint64_t reserved_bytes, pinned_bytes, quota_denied;
};
#define INS_UIDS_MAX 256 /* shown; more are counted in uids_omitted */

/* One ring as kvr_ring_check() saw it. */
struct ins_ring_snap {
	int rc; /* kvr_ring_check() result */
	uint32_t cap;
	struct kvr_ring_snapshot s;
	uint64_t server_high_water; /* from the channel counters */
};

/* A copy of struct kvr_cache_shm, in its field order (obs.c reads it). */
struct ins_cache {
	uint64_t lookups, lookup_keys, lookup_hit_keys, lookup_hit_bytes;
	uint64_t retrieves, retrieve_keys, retrieve_hit_keys, retrieve_bytes;
	uint64_t store_keys_new, store_bytes_new;
	uint64_t store_keys_stored, store_bytes_stored;
	uint64_t store_keys_no_room, store_keys_busy, reserved[2];
};

/* A copy of struct kvr_stage_shm: store-ahead (abi 5.2; zero from an
 * older kvringd, whose padding this was). */
struct ins_stage {
	uint64_t staged, stages, binds, binds_existing;
};

/* A copy of struct kvr_quar_shm: the quarantine (abi 5.3; zero from an
 * older kvringd, whose padding this was). */
struct ins_quar {
	uint64_t xfers, slots, bytes, reclaimed, released[3], detached;
};

/* One namespace's counters (id 0: slot unused). */
struct ins_ns_snap {
	uint32_t id;
	struct kvr_ns_desc desc; /* model cleaned by ins_copy_clean() */
	struct ins_cache cache;
};

/* One channel, copied out of its kvr_channel_shm. */
struct ins_chan_snap {
	uint32_t idx, state, generation, transport, ns_id, uid, gid;
	uint32_t req_ring_off, resp_ring_off;
	int32_t pid;
	int blk_rc; /* 0, or why the block could not be read (abi 3.0) */
	bool alive;
	uint64_t pid_start, connected_ns;
	struct kvr_ns_desc ns; /* model cleaned by ins_copy_clean() */
	uint64_t requests[16], errors[KVR_ERR_SLOTS];
	uint64_t reserved_bytes, pins, leases, transfers, last_activity_ns;
	uint64_t bytes_in, bytes_out, resp_ring_full;
	/* abi 1.1: use against the quotas, and the oldest holding. */
	uint64_t pinned_bytes, oldest_ns, quota_denied, xfers_expired;
	uint64_t quar_bytes, quar_slots; /* abi 5.3 */
	struct kvr_bell_stats req_bell, resp_bell;
	struct ins_ring_snap req, resp;
	/* Observability block (obs.c): cache counters, the server's
	 * latencies and the worker's round trips, by histogram op slot. */
	struct ins_cache cache;
	uint32_t rtt_every; /* the worker's sampling, 0 = not recording */
	struct ins_stage stage;
	struct kvr_hist_snap srv[KVR_HIST_OPS], wrk[KVR_HIST_OPS];
};

/*
 * Everything one frame shows, in process-private memory: renderers read
 * only this, never the mapping. Owned by the caller; ch is a heap array
 * from ins_chan_alloc() that the caller frees (ins_snap_take() keeps the
 * pointer and overwrites the rest).
 */
/* The control header's disk section (disk.c, abi 5.4), mode 0 without
 * --disk: the fields of struct kvr_disk_shm, in its order. Its latency
 * histograms (abi 5.5) go into ins_snap.lat[INS_HIST_DISK_*]. */
/* Slots of ins_snap.lat after the server's KVR_HIST_GOPS global ones. */
#define INS_HIST_DISK_WRITE (KVR_HIST_GOPS + 0u)
#define INS_HIST_DISK_READ  (KVR_HIST_GOPS + 1u)
#define INS_HIST_N	    (KVR_HIST_GOPS + 2u)
struct ins_disk_snap {
	uint32_t mode, direct, rebuilt, fixed;
	uint64_t capacity_bytes, used_bytes, objects, records, hits, misses;
	uint64_t reads, read_bytes, writes, write_bytes, queue_depth, corrupt;
	uint64_t dropped, io_errors, no_space, evictions, scanned, scan_total;
	uint64_t unsaved, rebuild_ns, deleted, held;
};

/* The control header's l2 section (l2.c), mode 0 without --l2. */
#define INS_L2_ERRS 6
struct ins_l2_snap {
	uint32_t mode, nodes;
	uint64_t queue_depth, drops, up_chunks, up_bytes, up_exists, up_failed;
	uint64_t down_chunks, down_bytes, hits, misses, holes, corrupt, deleted;
	uint64_t rt_lookups, rt_deadline, moved, ask, slot_refresh, tryagain;
	uint64_t state_changes, errors[INS_L2_ERRS];
	struct {
		char addr[49];
		uint32_t state;
		uint64_t errors;
	} node[KVR_L2_SHM_NODES];
};

struct ins_snap {
	uint64_t mono_ns, real_ns; /* when it was taken */
	int32_t pid;
	bool alive;
	uint64_t pid_start;
	uint8_t boot_id[16];
	char seg_name[64], pool_name[64];
	uint32_t abi, align, backend, max_channels, req_cap, resp_cap;
	uint32_t max_keys, lease_ms, heartbeat_ms, state;
	int32_t uid;
	uint64_t pool_bytes, start_real_ns, heartbeat_ns;
	/* Global counters, in struct kvr_gstats_shm order. */
	uint64_t used, committed, reserved, objects, reserved_objects, pins;
	uint64_t pinned_bytes, leases, transfers, evictions, evicted_bytes;
	uint64_t stores_skipped, no_room, workers, connects, cleanups;
	uint64_t protocol_errors, handshake_refused, requests, leases_expired;
	uint64_t free_extents, largest_free, frag_ppm, loop_wakeups;
	uint64_t quota_denied, xfers_expired;
	uint64_t corrupt_dropped, corrupt_unconfirmed; /* abi 3.1 */
	struct ins_quar quar;			       /* abi 5.3 */
	/* Per-channel limits from the header (abi 1.1; 0: none). */
	uint64_t quota_reserved, quota_pinned, max_key_bytes;
	uint32_t xfer_ms;
	uint32_t nchan; /* entries in ch (max_channels when geometry ok
			   and the directory could be opened) */
	int dir_rc;	/* 0, or why the channel directory is unreadable */
	/* Per-uid aggregates and their limits (abi 4.1; 0: none). */
	uint64_t quota_uid_reserved, quota_uid_pinned;
	uint32_t nuid, uids_omitted;
	struct ins_uid_snap uids[INS_UIDS_MAX];
	struct ins_chan_snap *ch;
	/* Observability region (obs.c). obs_ok: its geometry matched. */
	bool obs_ok;
	uint32_t obs_flags;
	struct ins_cache cache;
	uint64_t evictions_by[KVR_EVICT_REASONS];
	uint64_t evicted_bytes_by[KVR_EVICT_REASONS];
	struct ins_stage stage;
	/* The global histograms, then the disk tier's two (disk.c). */
	struct kvr_hist_snap lat[INS_HIST_N];
	uint32_t nns; /* entries of ns[] in use */
	struct ins_ns_snap ns[KVR_NS_OBS_MAX];
	struct ins_l2_snap l2;
	struct ins_disk_snap disk;
};

struct ins_chan_snap *ins_chan_alloc(const struct ins_attach *a);
int ins_snap_take(const struct ins_attach *a, struct ins_snap *s);
/* view.c: values derived from a snapshot. */
uint64_t ins_age_ns(uint64_t now, uint64_t then);
uint64_t ins_uptime_s(const struct ins_snap *s);
uint64_t ins_chan_requests(const struct ins_chan_snap *c);
bool ins_chan_shown(const struct ins_chan_snap *c, bool all);

/* ==== Observability: cache counters and latencies (obs.c, serve.c) ==== */

/* Copies the observability region and the channels' blocks into @s; called
 * by ins_snap_take() inside its SIGBUS guard. */
void ins_obs_snap(const struct ins_attach *a, struct ins_snap *s);
/* Overview additions: server-wide objects, the --watch rates, and the
 * per-channel objects (@pc: the same channel one frame earlier or NULL). */
void ins_obs_emit_server(struct kvr_em *e, const struct ins_snap *s,
			 const struct ins_snap *prev);
void ins_obs_emit_rates(struct kvr_em *e, const struct ins_snap *s,
			const struct ins_snap *prev);
void ins_obs_emit_chan(struct kvr_em *e, const struct ins_chan_snap *c,
		       const struct ins_chan_snap *pc);
/* --latency: a per-op table (or one JSON object), over the interval too
 * when @prev is given (--watch). */
void ins_latency_emit(FILE *f, const struct ins_opts *o,
		      const struct ins_snap *s, const struct ins_snap *prev);
/* prom.c's additions: cache counter and histogram families. */
void ins_prom_obs(FILE *f, bool all, const struct ins_snap *s);
/* promtext.c: the text format's primitives (prom.c, obs.c, l2.c). */
void ins_prom_head(FILE *f, const char *name, const char *type,
		   const char *help);
/* A family with a single unlabelled sample (also l2.c's). */
void ins_prom_u64(FILE *f, const char *name, const char *type, const char *help,
		  uint64_t v);
void ins_prom_lv(FILE *f, const char *v);
/* The start of a per-channel sample, "@name{" and @c's labels (channel,
 * model, rank; promtext.c says why those): the caller adds its own
 * labels, "}" and the value. */
void ins_prom_chan_open(FILE *f, const char *name,
			const struct ins_chan_snap *c);
/* A whole per-channel sample: @name{@c's labels} @v. */
void ins_prom_chan_u64(FILE *f, const char *name, const struct ins_chan_snap *c,
		       uint64_t v);
/* serve.c: --serve ADDR:PORT, /metrics over HTTP until SIGINT/SIGTERM. */
int ins_serve_run(const struct ins_opts *o, const struct ins_target *t,
		  struct ins_attach *a);

/* ==== Renderers and modes ==== */

/* overview.c: the default output, also each --watch frame. */
void ins_overview_emit(FILE *f, bool json, bool all, const struct ins_target *t,
		       const struct ins_snap *s, const struct ins_snap *prev);
/* disk.c: the disk section: snapshot, overview object, Prometheus. */
void ins_disk_snap(const struct kvr_ctl_hdr_shm *h, struct ins_disk_snap *out);
/* ins_disk_hist - copy the disk tier's latency histograms (their memfd,
 * through /proc like the directory) into s->lat[INS_HIST_DISK_*]; empty
 * when the server keeps none or they cannot be opened (not root nor
 * kvringd's uid). */
void ins_disk_hist(const struct ins_attach *a, struct ins_snap *s);
void ins_disk_emit(struct kvr_em *e, const struct ins_disk_snap *d,
		   const struct ins_disk_snap *prev, double dt);
void ins_disk_prom(FILE *f, const struct ins_disk_snap *d);

/* l2.c: the L2 section: snapshot, overview object, Prometheus families. */
void ins_l2_snap(const struct kvr_ctl_hdr_shm *h, struct ins_l2_snap *out);
void ins_l2_emit(struct kvr_em *e, const struct ins_l2_snap *l);
void ins_l2_prom(FILE *f, const struct ins_l2_snap *l);
/* prom.c: --prometheus. */
void ins_prom_emit(FILE *f, bool all, const struct ins_target *t,
		   const struct ins_snap *s);
/* The mode runners return an exit status (INS_EXIT_*). */
int ins_list_run(const struct ins_opts *o);
int ins_dump_run(const struct ins_opts *o, const struct ins_attach *a,
		 const struct ins_snap *s);
int ins_check_run(const struct ins_opts *o, const struct ins_attach *a,
		  struct ins_snap *s, struct ins_snap *base);
int ins_watch_run(const struct ins_opts *o, const struct ins_target *t,
		  struct ins_attach *a);

#endif /* KVR_TOOLS_INSPECT_H */
