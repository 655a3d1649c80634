/* SPDX-License-Identifier: MIT */
/*
 * The control layout: one control segment (segment identity, pool
 * geometry, heartbeat, global counters) that every worker maps read-only,
 * one channel directory (who holds each channel, each uid's use, each
 * namespace's description and counters) that only the server and the
 * inspector map (abi 4.0, 4.1, 5.0), and one channel block per connected worker
 * (its counters, two doorbell blocks and its two rings), each a memfd of
 * its own that only that worker and the server map (abi 3.0). Everything
 * here is an ABI shared by kvringd, libkvring and kvring-inspect;
 * docs/layout.md repeats it as a byte table.
 *
 * Who writes what (everything a worker can write is untrusted input to the
 * server, which never reads back its own counters to decide anything):
 *   control segment   server only (workers and the inspector read)
 *   channel directory server only: identity, generation, state, block fd,
 *                     per-uid use, per-namespace slots; a memfd of its
 *                     own that no worker is given
 *   channel counters  server only (in the worker's own block: a worker
 *                     can mislead the inspector about itself, no more)
 *   req ring          worker produces (tail), server consumes (head)
 *   resp ring         server produces, worker consumes
 *   req_bell.sleeping server (it is the side that sleeps on requests)
 *   resp_bell.sleeping worker
 *
 * This file does not own the ring format (rings/), the doorbell protocol
 * (<kvring/doorbell.h>), the segment header (<kvring/segment.h>) or how
 * the mappings are made read-only (<kvring/chanmap.h>).
 */
#ifndef KVRING_LAYOUT_H
#define KVRING_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <kvring/doorbell.h>
#include <kvring/hist.h>
#include <kvring/proto.h>
#include <kvring/segment.h>

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shm atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shm atomics must be lock-free");

#define KVR_SEG_KIND_CONTROL 1u
#define KVR_CACHELINE	     64u

/* Server run state in kvr_ctl_hdr_shm.state. */
enum kvr_server_state {
	KVR_SERVER_STARTING = 0,
	KVR_SERVER_RUNNING = 1,
	KVR_SERVER_STOPPING = 2, /* SIGTERM seen: no new work accepted */
};

/* Pool backend recorded in the header (the inspector shows it). */
enum kvr_pool_backend {
	KVR_POOL_SHM = 1,     /* named file under /dev/shm */
	KVR_POOL_MEMFD = 2,   /* anonymous memfd, passed over the socket */
	KVR_POOL_PRIVATE = 3, /* server-private: copy transport only */
};

/* Global counters, written by the server's loop thread only (relaxed
 * stores: a single writer, readers only need each value untorn). */
struct kvr_gstats_shm {
	_Atomic uint64_t used_bytes; /* reserved + committed */
	_Atomic uint64_t committed_bytes;
	_Atomic uint64_t reserved_bytes;
	_Atomic uint64_t objects; /* committed objects */
	_Atomic uint64_t reserved_objects;
	_Atomic uint64_t pins; /* (object, owner) pin pairs */
	_Atomic uint64_t pinned_bytes;
	_Atomic uint64_t leases;
	_Atomic uint64_t transfers; /* open store + retrieve transfers */
	_Atomic uint64_t evictions;
	_Atomic uint64_t evicted_bytes;
	_Atomic uint64_t stores_skipped; /* keys already stored */
	_Atomic uint64_t no_room;	 /* keys answered KVR_SLOT_NOROOM */
	_Atomic uint64_t workers;	 /* channels in use */
	_Atomic uint64_t connects;
	_Atomic uint64_t disconnect_cleanups;
	_Atomic uint64_t protocol_errors; /* workers cut off for bad input */
	_Atomic uint64_t handshake_refused;
	_Atomic uint64_t requests;
	_Atomic uint64_t leases_expired;
	_Atomic uint64_t free_extents;
	_Atomic uint64_t largest_free;
	_Atomic uint64_t frag_ppm;	  /* 1e6 * (1 - largest_free / free) */
	_Atomic uint64_t loop_wakeups;	  /* times the loop slept and woke */
	_Atomic uint64_t quota_denied;	  /* 192: keys/pins a quota refused */
	_Atomic uint64_t xfers_expired;	  /* 200: transfers reclaimed at their
					     deadline (--xfer-ms) */
	_Atomic uint64_t corrupt_dropped; /* 208: objects a worker found
					     failing their checksum and the
					     server confirmed: dropped */
	_Atomic uint64_t corrupt_unconfirmed; /* 216: reported corrupt, but
						 the bytes matched the sum
						 (or the report was ignored) */
	_Atomic uint64_t reserved[4];
};
_Static_assert(sizeof(struct kvr_gstats_shm) == 256, "ABI: docs/layout.md");

/*
 * The L2 tier's section (server/l2*.c, docs/l2.md), 512 bytes at 1536 in
 * the header. Written by kvringd's loop thread only, from the tier's own
 * counters, every few ms and at shutdown (relaxed: each value stands
 * alone, readers only display them). mode 0 means no --l2.
 */
#define KVR_L2_SHM_NODES 4u
struct kvr_l2node_shm {
	char addr[48];		/* "host:port" or the socket path */
	_Atomic uint32_t state; /* 0 unused, 1 up, 2 down */
	uint32_t pad;
	_Atomic uint64_t errors; /* connection and I/O errors */
};
_Static_assert(sizeof(struct kvr_l2node_shm) == 64, "ABI: docs/layout.md");

struct kvr_l2stats_shm {
	_Atomic uint32_t mode;	      /* 0 off, 1 redis, 2 unix, 3 cluster */
	_Atomic uint32_t nodes;	      /* nodes known (node[] shows 4) */
	_Atomic uint64_t queue_depth; /* jobs queued or running */
	_Atomic uint64_t drops;	      /* chunks not uploaded: queue full */
	_Atomic uint64_t up_chunks;   /* uploaded (SET ok) */
	_Atomic uint64_t up_bytes;
	_Atomic uint64_t up_exists;   /* skipped: EXISTS said present */
	_Atomic uint64_t up_failed;   /* SET or EXISTS failed */
	_Atomic uint64_t down_chunks; /* loaded and verified */
	_Atomic uint64_t down_bytes;
	_Atomic uint64_t hits;	       /* read-through: probed present */
	_Atomic uint64_t misses;       /* read-through ended on a miss */
	_Atomic uint64_t holes;	       /* ... on a miss with hits after it */
	_Atomic uint64_t corrupt;      /* values that failed a check */
	_Atomic uint64_t deleted;      /* of those, deleted from Redis */
	_Atomic uint64_t rt_lookups;   /* lookups that waited on L2 */
	_Atomic uint64_t rt_deadline;  /* answered at the deadline */
	_Atomic uint64_t moved;	       /* MOVED redirects followed */
	_Atomic uint64_t ask;	       /* ASK redirects followed */
	_Atomic uint64_t slot_refresh; /* CLUSTER SLOTS reloads */
	_Atomic uint64_t errors[6]; /* connect io proto oom server redirect */
	_Atomic uint64_t state_changes; /* node up/down transitions */
	_Atomic uint64_t tryagain;	/* abi 5.1: uploads resent as one
					   SET (TRYAGAIN, script refused) */
	_Atomic uint64_t reserved[5];
	struct kvr_l2node_shm node[KVR_L2_SHM_NODES]; /* 256 */
};
_Static_assert(sizeof(struct kvr_l2stats_shm) == 512, "ABI: docs/layout.md");
_Static_assert(offsetof(struct kvr_l2stats_shm, tryagain) == 208, "ABI");

/*
 * The quarantine, all channels (abi 5.3, docs/storage.md "Quarantine"):
 * transfers a deadline reclaimed while their worker may still copy, and
 * how they came back. 64 bytes at 1152 in the header; server-written
 * (relaxed, single writer), published with the global counters.
 */
struct kvr_quar_shm {
	_Atomic uint64_t xfers;	    /* 0: transfers in quarantine now */
	_Atomic uint64_t slots;	    /* 8: their reservations and pins */
	_Atomic uint64_t bytes;	    /* 16: their rounded bytes */
	_Atomic uint64_t reclaimed; /* 24: transfers put there, since start */
	/* 32: released because the worker answered (a late commit or
	 * abort), because its process was gone when its channel closed,
	 * and because it closed its channel and then exited. */
	_Atomic uint64_t released[3];
	_Atomic uint64_t detached; /* 56: closed channels still held for a
				      live process's quarantine */
};
_Static_assert(sizeof(struct kvr_quar_shm) == 64, "ABI: docs/layout.md");

/*
 * The disk tier (abi 5.4, server/disk/, docs/storage.md "The disk tier"):
 * 200 bytes at 1216 in the header (192 until abi 5.6); server-written (relaxed,
 * single writer) after I/O completes and every few ms. mode 0 means no --disk.
 */
struct kvr_disk_shm {
	uint32_t mode;			 /* 0: 0 off, 1 evict, 2 commit */
	uint32_t direct;		 /* 4: 1 O_DIRECT, 0 buffered */
	_Atomic uint64_t capacity_bytes; /* 8: records x payload bytes */
	_Atomic uint64_t used_bytes;	 /* 16: payload bytes indexed */
	_Atomic uint64_t objects;	 /* 24: chunks on disk */
	_Atomic uint64_t records;	 /* 32: record slots in the file */
	_Atomic uint64_t hits;		 /* 40: read-through lookups found */
	_Atomic uint64_t misses;	 /* 48: and not found */
	_Atomic uint64_t reads;		 /* 56: chunks read and verified */
	_Atomic uint64_t read_bytes;	 /* 64 */
	_Atomic uint64_t writes;	 /* 72: chunks written */
	_Atomic uint64_t write_bytes;	 /* 80 */
	_Atomic uint64_t queue_depth;	 /* 88: I/Os in flight now */
	_Atomic uint64_t corrupt;	 /* 96: records that failed a check */
	_Atomic uint64_t dropped;	 /* 104: writes not done */
	_Atomic uint64_t io_errors;	 /* 112 */
	_Atomic uint64_t no_space;	 /* 120: writes that found it full */
	_Atomic uint64_t evictions;	 /* 128: records the disk LRU reused */
	_Atomic uint64_t scanned;	 /* 136: rebuild progress, records */
	_Atomic uint64_t scan_total;	 /* 144: records to scan */
	_Atomic uint32_t rebuilt;	 /* 152: 1 once the scan ended */
	uint32_t fixed;			 /* 156: 1 registered buffers
					    (abi 5.5), once */
	_Atomic uint64_t unsaved;	 /* 160: pool evictions without a
					    copy on disk (evict mode) */
	_Atomic uint64_t rebuild_ns;	 /* 168: the rebuild scan's time */
	/* abi 5.5: the latency histograms of disk writes and reads, in a
	 * memfd of their own (the control segment cannot grow without
	 * breaking older workers' size check): the server's descriptor
	 * number, opened as /proc/<creator_pid>/fd/<hist_fd> like the
	 * channel directory. hist_fd is stored first, then hist_bytes with
	 * release (R-DHIST1); 0 bytes: none (an older server, no --disk,
	 * or kvringd --histograms off). See struct kvr_disk_hist_shm. */
	int32_t hist_fd;	     /* 176 */
	_Atomic uint32_t hist_bytes; /* 180 */
	/* 184 (abi 5.5): 1 once the data file was found deleted (its
	 * directory removed) under the running server; writes are then
	 * dropped (counted) until a restart makes a new one. */
	_Atomic uint64_t deleted;
	/* 192 (abi 5.6, from the header's pad): stores held back by the
	 * write-back guard (--disk-mode evict): keys answered NOROOM
	 * because every victim eviction could take had no copy on disk
	 * yet (the store's disk_held). */
	_Atomic uint64_t held;
};
_Static_assert(sizeof(struct kvr_disk_shm) == 200, "ABI: docs/layout.md");
_Static_assert(offsetof(struct kvr_disk_shm, held) == 192, "ABI");
_Static_assert(offsetof(struct kvr_disk_shm, hist_fd) == 176, "ABI");

/* The disk histograms' memfd (abi 5.5): written by kvringd's loop thread
 * alone (one writer per histogram, <kvring/hist.h>), read by
 * kvring-inspect. Time from submitting an I/O to reaping its completion. */
enum { KVR_DISK_HIST_WRITE = 0, KVR_DISK_HIST_READ = 1, KVR_DISK_HISTS = 2 };
struct kvr_disk_hist_shm {
	struct kvr_hist_shm lat[KVR_DISK_HISTS]; /* 0: by KVR_DISK_HIST_* */
};
_Static_assert(sizeof(struct kvr_disk_hist_shm) == 4224, "ABI: docs/layout.md");

struct kvr_ctl_hdr_shm {
	struct kvr_seg_hdr_shm seg; /* 0: magic, abi, ready, creator ... */

	/* Geometry: written once before seg.ready, constant afterwards. */
	uint64_t pool_bytes;	    /* 256 */
	uint32_t align;		    /* 264 */
	uint32_t pool_backend;	    /* 268: enum kvr_pool_backend */
	char pool_name[64];	    /* 272: "" unless KVR_POOL_SHM */
	uint32_t max_channels;	    /* 336 */
	uint32_t channel_bytes;	    /* 340: size of each channel block */
	int32_t dir_fd;		    /* 344: server's fd of the directory
				       memfd (abi 4.0; was dir_off) */
	uint32_t dir_bytes;	    /* 348: its size, page-rounded */
	uint32_t req_ring_cap;	    /* 352 */
	uint32_t resp_ring_cap;	    /* 356 */
	uint32_t max_keys;	    /* 360 */
	uint32_t lease_ms;	    /* 364 */
	uint32_t heartbeat_ms;	    /* 368 */
	int32_t server_uid;	    /* 372 */
	uint64_t start_realtime_ns; /* 376: wall clock at start */
	/* Isolation limits per channel (abi 1.2; 0 = none). */
	uint64_t quota_reserved_bytes; /* 384: --quota-reserved */
	uint64_t quota_pinned_bytes;   /* 392: --quota-pinned */
	uint64_t max_key_bytes;	       /* 400: --max-key-bytes */
	uint32_t xfer_ms;	       /* 408: --xfer-ms */
	uint32_t pad_q;		       /* 412 */
	/* Per-uid aggregate limits (abi 4.1; 0 = none). */
	uint64_t quota_uid_reserved_bytes; /* 416: --quota-uid-reserved */
	uint64_t quota_uid_pinned_bytes;   /* 424: --quota-uid-pinned */
	uint8_t pad0[336];		   /* 432 .. 768 */

	/* Live (768): on their own cache lines, server-written. */
	_Atomic uint64_t heartbeat_ns; /* CLOCK_MONOTONIC, every heartbeat_ms */
	_Atomic uint32_t state;	       /* enum kvr_server_state */
	/* Background zeroing of a huge-page pool (abi 3.2, server/
	 * prefault.c): pool_zeroing is 1 when it was started (set once,
	 * before seg.ready; 0 from older servers, or when the pool was
	 * pre-faulted in line or not at all), and pool_zeroed_bytes then
	 * says how much of the pool, from offset 0, is zeroed and mapped:
	 * a touch below it only maps a page, one above it zeroes the page
	 * itself. It grows to the mapping's size. A hint only: any page may
	 * be touched by anyone at any time, at most slower. */
	uint32_t pool_zeroing;		    /* 780 */
	_Atomic uint64_t pool_zeroed_bytes; /* 784 */
	uint8_t pad2[104];
	struct kvr_gstats_shm stats; /* 896 */
	struct kvr_quar_shm quar;    /* 1152: abi 5.3 */
	struct kvr_disk_shm disk;    /* 1216: abi 5.4 */
	uint8_t pad3[120];	     /* 1416 .. 1536 */
	struct kvr_l2stats_shm l2;   /* 1536 .. 2048: the L2 tier */
};
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, pool_bytes) == 256, "ABI");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, heartbeat_ns) == 768, "ABI");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, pool_zeroed_bytes) == 784,
	       "ABI: docs/layout.md");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, stats) == 896, "ABI");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, l2) == 1536, "ABI");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, quar) == 1152, "ABI");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, disk) == 1216, "ABI");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, dir_fd) == 344, "ABI");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, quota_uid_reserved_bytes) ==
		   416,
	       "ABI: docs/layout.md");
_Static_assert(offsetof(struct kvr_ctl_hdr_shm, quota_reserved_bytes) == 384,
	       "ABI: docs/layout.md");
_Static_assert(offsetof(struct kvr_gstats_shm, quota_denied) == 192, "ABI");
_Static_assert(offsetof(struct kvr_gstats_shm, corrupt_dropped) == 208,
	       "ABI: docs/layout.md");
_Static_assert(sizeof(struct kvr_ctl_hdr_shm) == 2048, "ABI: docs/layout.md");

/* Channel states (in the directory entry and, as a copy, in the block). */
enum kvr_chan_state {
	KVR_CHAN_FREE = 0,
	KVR_CHAN_HANDSHAKE = 1, /* fds sent, worker not seen yet */
	KVR_CHAN_ACTIVE = 2,
	KVR_CHAN_CLOSING = 3, /* cleanup in progress */
};

#define KVR_ERR_SLOTS 16 /* errors by code: see kvr_err_slot() */

/* Per channel counters, server-written (relaxed, single writer). */
struct kvr_cstats_shm {
	_Atomic uint64_t requests[16];		/* by op (index = op) */
	_Atomic uint64_t errors[KVR_ERR_SLOTS]; /* by kvr_err_slot(code) */
	_Atomic uint64_t reserved_bytes;
	_Atomic uint64_t pins;
	_Atomic uint64_t leases;
	_Atomic uint64_t transfers;
	_Atomic uint64_t req_high_water;   /* bytes used in the request ring */
	_Atomic uint64_t resp_high_water;  /* bytes used in the response ring */
	_Atomic uint64_t last_activity_ns; /* CLOCK_MONOTONIC */
	_Atomic uint64_t bytes_in;	   /* copy transport payload */
	_Atomic uint64_t bytes_out;
	_Atomic uint64_t resp_ring_full; /* times an answer had to wait */
	/* abi 1.2: what the channel holds against its quotas, and its age. */
	_Atomic uint64_t pinned_bytes;	/* 336: rounded, its pins */
	_Atomic uint64_t oldest_ns;	/* 344: CLOCK_MONOTONIC creation of
					   its oldest transfer or lease;
					   0 when it holds none */
	_Atomic uint64_t quota_denied;	/* 352: keys/pins refused */
	_Atomic uint64_t xfers_expired; /* 360: reclaimed at deadline */
	/* abi 5.3: what of the above its deadline put in quarantine (the
	 * worker may still copy; docs/storage.md "Quarantine"). */
	_Atomic uint64_t quar_bytes; /* 368: rounded bytes */
	_Atomic uint64_t quar_slots; /* 376: reservations and pins */
};
_Static_assert(sizeof(struct kvr_cstats_shm) == 384, "ABI: docs/layout.md");
_Static_assert(offsetof(struct kvr_cstats_shm, pinned_bytes) == 336, "ABI");
_Static_assert(offsetof(struct kvr_cstats_shm, quar_bytes) == 368, "ABI");

struct kvr_channel_shm {
	/* Identity (server-written while the channel is claimed). */
	_Atomic uint32_t state;	     /* 0: enum kvr_chan_state */
	uint32_t generation;	     /* 4: bumped at every claim */
	int32_t pid;		     /* 8: SO_PEERCRED pid */
	uint32_t uid;		     /* 12 */
	uint64_t pid_start;	     /* 16: start time (clock ticks) */
	uint32_t ns_id;		     /* 24 */
	uint32_t transport;	     /* 28: enum kvr_transport */
	uint64_t connected_ns;	     /* 32: CLOCK_MONOTONIC */
	uint32_t req_ring_off;	     /* 40: from the channel block start */
	uint32_t resp_ring_off;	     /* 44 */
	uint32_t gid;		     /* 48 */
	uint32_t pad0;		     /* 52 */
	uint8_t pad1[8];	     /* 56 */
	struct kvr_ns_desc ns;	     /* 64: 96 bytes */
	uint8_t pad2[96];	     /* 160 .. 256 */
	struct kvr_cstats_shm stats; /* 256 .. 640 */
	uint8_t pad3[128];	     /* 640 .. 768 */
	/* 768: doorbells, each on its own 128-byte block. */
	struct kvr_bell_shm req_bell; /* server sleeps, worker rings */
	uint8_t pad4[128 - sizeof(struct kvr_bell_shm)];
	struct kvr_bell_shm resp_bell; /* worker sleeps, server rings */
	uint8_t pad5[128 - sizeof(struct kvr_bell_shm)];
	/* 1024: the request ring, then the response ring (offsets above). */
};
_Static_assert(offsetof(struct kvr_channel_shm, ns) == 64, "ABI");
_Static_assert(offsetof(struct kvr_channel_shm, stats) == 256, "ABI");
_Static_assert(offsetof(struct kvr_channel_shm, req_bell) == 768, "ABI");
_Static_assert(sizeof(struct kvr_channel_shm) == 1024, "ABI: docs/layout.md");

/* ---- Observability: cache counters and latency histograms ----
 *
 * Three more regions, each written by one process and read lock-free
 * by kvring-inspect (docs/layout.md names every writer):
 *   struct kvr_ctl_obs_shm   right after the header (offset
 *                            KVR_CTL_OBS_OFF): global cache counters,
 *                            evictions by reason and the server's global
 *                            latency histograms.
 *   struct kvr_ns_obs_shm    KVR_NS_OBS_MAX slots in the channel
 *                            directory memfd at ns_off (abi 5.0; until
 *                            4.1 in kvr_ctl_obs_shm, where every worker
 *                            read every tenant's model and counters):
 *                            each namespace's description and counters.
 *   struct kvr_chan_obs_shm  in each channel block, between the 1024-byte
 *                            struct kvr_channel_shm and the request ring:
 *                            the channel's cache counters and the
 *                            server's latency histograms (server-written),
 *                            and the worker's round trips (worker-written).
 */

/* Histogram slots by operation: op 1..9 (lookup .. stats) at op - 1. */
#define KVR_HIST_OPS 9u
/* Global only: the L2 tier's directions, after the KVR_HIST_OPS slots. */
#define KVR_HIST_L2_WRITE (KVR_HIST_OPS + 0u) /* write-behind upload */
#define KVR_HIST_L2_READ  (KVR_HIST_OPS + 1u) /* read-through fetch */
#define KVR_HIST_GOPS	  (KVR_HIST_OPS + 2u)
/* Namespaces with their own counters (ids 1..KVR_NS_OBS_MAX). */
#define KVR_NS_OBS_MAX 256u

/* Why an object left the cache (index of evictions[]). */
enum kvr_evict_reason {
	KVR_EVICT_ROOM = 0,	 /* LRU victim: a store needed the room */
	KVR_EVICT_QUOTA = 1,	 /* its namespace or channel was over quota */
	KVR_EVICT_NAMESPACE = 2, /* its namespace was freed for another model */
	KVR_EVICT_OTHER = 3,
	KVR_EVICT_REASONS = 4,
};

/* Flags in kvr_ctl_obs_shm.flags (written once before ready). */
#define KVR_OBS_SERVER_HIST 0x1u /* the server records its histograms */
/* (0.3, kvringd --histograms global or off) no per-channel histograms:
 * the server times into the global ones only, and libkvring records no
 * round trips unless $KVRING_RTT_SAMPLE asks. Never set by an older
 * server, whose channels always had theirs. */
#define KVR_OBS_NO_CHAN_HIST 0x2u

/* Hit-ratio counters, server-written (relaxed, single writer), monotonic
 * while the server runs. Keys and bytes as the worker asked for them. */
struct kvr_cache_shm {
	_Atomic uint64_t lookups;	     /* 0: lookups answered ok */
	_Atomic uint64_t lookup_keys;	     /* 8: keys asked */
	_Atomic uint64_t lookup_hit_keys;    /* 16: keys in the hit prefix */
	_Atomic uint64_t lookup_hit_bytes;   /* 24: their stored bytes */
	_Atomic uint64_t retrieves;	     /* 32: prepare_retrieve ok */
	_Atomic uint64_t retrieve_keys;	     /* 40: keys asked (0 by lease) */
	_Atomic uint64_t retrieve_hit_keys;  /* 48: slots handed out */
	_Atomic uint64_t retrieve_bytes;     /* 56: their bytes */
	_Atomic uint64_t store_keys_new;     /* 64: answered a slot */
	_Atomic uint64_t store_bytes_new;    /* 72 */
	_Atomic uint64_t store_keys_stored;  /* 80: already stored */
	_Atomic uint64_t store_bytes_stored; /* 88 */
	_Atomic uint64_t store_keys_no_room; /* 96 */
	_Atomic uint64_t store_keys_busy;    /* 104: reserved by another */
	_Atomic uint64_t reserved[2];	     /* 112 */
};
_Static_assert(sizeof(struct kvr_cache_shm) == 128, "ABI: docs/layout.md");

/* One namespace's counters, in the directory memfd (abi 5.0: only the
 * server and the inspector map it). A namespace id freed by kvringd can be
 * given to another model, so the slot is rewritten under a generation: odd
 * while the server rewrites desc and id, even (stored with release,
 * R-OBS1) once it is done; a reader acquires gen, copies, and keeps the
 * copy only if gen is the same even value afterwards (A-OBS1). */
struct kvr_ns_obs_shm {
	_Atomic uint32_t id;	    /* 0: 0 = slot unused, else ns id */
	_Atomic uint32_t gen;	    /* 4: even: stable; odd: rewriting */
	uint8_t pad1[24];	    /* 8 */
	struct kvr_ns_desc desc;    /* 32: 96 bytes */
	struct kvr_cache_shm cache; /* 128 */
};
_Static_assert(sizeof(struct kvr_ns_obs_shm) == 256, "ABI: docs/layout.md");

/* Store-ahead's counters (abi 5.2; docs/storage.md "Store-ahead"), for a
 * channel in its block's observability area and for all channels in the
 * control segment's. Server-written (relaxed, single writer), published
 * with the other counters (lazily: after a batch, on every sleep). */
struct kvr_stage_shm {
	_Atomic uint64_t staged;	 /* 0: staged slots held now */
	_Atomic uint64_t stages;	 /* 8: slots staged, since start */
	_Atomic uint64_t binds;		 /* 16: binds that keyed one */
	_Atomic uint64_t binds_existing; /* 24: binds whose key was stored
					    already (the slot stayed) */
};
_Static_assert(sizeof(struct kvr_stage_shm) == 32, "ABI: docs/layout.md");

/* Right after struct kvr_ctl_hdr_shm; everything server-written. */
struct kvr_ctl_obs_shm {
	struct kvr_cache_shm cache;			   /* 0 */
	_Atomic uint64_t evictions[KVR_EVICT_REASONS];	   /* 128 */
	_Atomic uint64_t evicted_bytes[KVR_EVICT_REASONS]; /* 160 */
	uint32_t hist_ops;	    /* 192: KVR_HIST_GOPS, once */
	uint32_t hist_buckets;	    /* 196: KVR_HIST_BUCKETS, once */
	uint32_t flags;		    /* 200: KVR_OBS_*, once */
	uint32_t ns_slots;	    /* 204: KVR_NS_OBS_MAX slots in the
				       directory (abi 5.0), once */
	struct kvr_stage_shm stage; /* 208: all channels (abi 5.2) */
	uint8_t pad[16];	    /* 240 .. 256 */
	struct kvr_hist_shm lat[KVR_HIST_GOPS]; /* 256: by op slot */
	/* 23488: the end (abi 5.0; ns[] moved to the directory memfd) */
};
#define KVR_CTL_OBS_OFF ((uint64_t)sizeof(struct kvr_ctl_hdr_shm))
_Static_assert(offsetof(struct kvr_ctl_obs_shm, lat) == 256, "ABI");
_Static_assert(offsetof(struct kvr_ctl_obs_shm, stage) == 208, "ABI");
_Static_assert(sizeof(struct kvr_ctl_obs_shm) == 23488, "ABI: docs/layout.md");

/* In each channel block at offset sizeof(struct kvr_channel_shm). The
 * server zeroes all of it when it claims the channel, before the worker
 * is told the channel exists; afterwards cache and server_lat are the
 * server's, worker_rtt and rtt_every the worker's. */
struct kvr_chan_obs_shm {
	struct kvr_cache_shm cache; /* 0: server */
	_Atomic uint32_t rtt_every; /* 128: worker: 1 in N ops timed */
	uint32_t pad0;		    /* 132 */
	struct kvr_stage_shm stage; /* 136: server (abi 5.2) */
	uint8_t pad1[88];	    /* 168 .. 256 */
	struct kvr_hist_shm server_lat[KVR_HIST_OPS]; /* 256: server */
	struct kvr_hist_shm worker_rtt[KVR_HIST_OPS]; /* 19264: worker */
};
_Static_assert(offsetof(struct kvr_chan_obs_shm, rtt_every) == 128, "ABI");
_Static_assert(offsetof(struct kvr_chan_obs_shm, stage) == 136, "ABI");
_Static_assert(offsetof(struct kvr_chan_obs_shm, server_lat) == 256, "ABI");
_Static_assert(offsetof(struct kvr_chan_obs_shm, worker_rtt) == 19264, "ABI");
_Static_assert(sizeof(struct kvr_chan_obs_shm) == 38272, "ABI: docs/layout.md");

/* The histogram slot of an op, or -1 for an op without one. */
static inline int kvr_hist_op_slot(uint32_t op)
{
	return op >= 1 && op <= KVR_HIST_OPS ? (int)op - 1 : -1;
}

/* The global observability region of a control segment at @ctl_base. */
static inline struct kvr_ctl_obs_shm *kvr_ctl_obs(void *ctl_base)
{
	return (struct kvr_ctl_obs_shm *)((char *)ctl_base + KVR_CTL_OBS_OFF);
}

/* The observability block of channel block @ch. */
static inline struct kvr_chan_obs_shm *kvr_chan_obs(struct kvr_channel_shm *ch)
{
	return (struct kvr_chan_obs_shm *)(ch + 1);
}

/*
 * The channel directory (abi 4.0): one 64-byte entry per channel, in a
 * memfd of its own that the server creates and never sends to anyone
 * (until abi 3.1 it sat in the control segment, where every worker could
 * read every other channel's pid, uid and namespace). The header names it
 * only by the server's descriptor number, dir_fd: the inspector opens
 * /proc/<creator_pid>/fd/<dir_fd>, which the kernel allows to root and to
 * the server's uid (docs/inspect.md), maps it read-only, and finds in each
 * entry the server's fd of that channel's block. The channel block itself
 * is a memfd of its own per claim, mapped read-write by its one worker and
 * by nobody else; the server never reads identity back from it.
 * Written by the server's loop thread only. R-DIR1: every field before
 * state (release) when the channel turns ACTIVE; A-DIR1: readers acquire
 * state, copy, and keep the copy only if state and generation read the
 * same afterwards.
 */
struct kvr_chan_dir_shm {
	_Atomic uint32_t state;	     /* 0: enum kvr_chan_state */
	_Atomic uint32_t generation; /* 4: new at every claim, never 0 */
	int32_t fd;		     /* 8: server's fd of the block, -1 */
	int32_t pid;		     /* 12: SO_PEERCRED pid */
	uint32_t uid;		     /* 16 */
	uint32_t gid;		     /* 20 */
	uint64_t pid_start;	     /* 24: start time (clock ticks) */
	uint32_t ns_id;		     /* 32 */
	uint32_t transport;	     /* 36: enum kvr_transport */
	uint64_t connected_ns;	     /* 40: CLOCK_MONOTONIC */
	uint8_t pad[16];	     /* 48 .. 64 */
};
_Static_assert(offsetof(struct kvr_chan_dir_shm, pid_start) == 24, "ABI");
_Static_assert(offsetof(struct kvr_chan_dir_shm, connected_ns) == 40, "ABI");
_Static_assert(sizeof(struct kvr_chan_dir_shm) == 64, "ABI: docs/layout.md");

/*
 * The per-uid table (abi 4.1): max_channels 64-byte entries in the
 * directory memfd at uid_off, right after the channel entries, so that
 * only the server and the inspector see which uids hold what. Entry i is
 * the store's uid slot i. Written by the server's loop thread only, with
 * relaxed stores: each value stands alone and is only displayed. An
 * entry with channels 0 is unused; a reused entry may show one frame
 * mixing two uids.
 */
struct kvr_uid_use_shm {
	_Atomic uint32_t channels;	 /* 0: channels of this uid; 0 unused */
	_Atomic uint32_t uid;		 /* 4 */
	_Atomic uint64_t reserved_bytes; /* 8: rounded, all its channels */
	_Atomic uint64_t pinned_bytes;	 /* 16 */
	_Atomic uint64_t quota_denied;	 /* 24: the uid quotas refused */
	uint8_t pad[32];		 /* 32 .. 64 */
};
_Static_assert(sizeof(struct kvr_uid_use_shm) == 64, "ABI: docs/layout.md");

/* Geometry computed from the ring capacities (both powers of two). */
struct kvr_ctl_geom {
	uint32_t max_channels;
	uint32_t req_ring_cap;
	uint32_t resp_ring_cap;
	uint32_t channel_bytes; /* page-rounded size of one channel block */
	uint32_t dir_bytes;	/* the directory memfd, page-rounded */
	uint32_t uid_off;	/* its per-uid table (abi 4.1) */
	uint32_t ns_off;	/* its namespace slots (abi 5.0) */
	uint32_t pad;
	uint64_t ctl_bytes;    /* header + observability, page-rounded */
	uint32_t req_ring_off; /* within a channel block */
	uint32_t resp_ring_off;
};

/*
 * kvr_ctl_geom_compute - lay out a control segment and its channel blocks.
 * Return: 0, or -EINVAL if a capacity is not a power of two in
 * [4096, 16 MiB] or max_channels is 0 or above 4096.
 */
int kvr_ctl_geom_compute(uint32_t max_channels, uint32_t req_ring_cap,
			 uint32_t resp_ring_cap, struct kvr_ctl_geom *out);

/* A hash of every size and offset above plus the ring and bell layouts;
 * recorded in the segment header and checked at attach. */
uint64_t kvr_layout_hash(void);

/* Directory entry i of the directory mapped at @dir_base (no bounds
 * check: callers validated i < max_channels against their own private
 * copy of the geometry, never the header's). */
static inline struct kvr_chan_dir_shm *kvr_chan_dir(void *dir_base, uint32_t i)
{
	return (struct kvr_chan_dir_shm *)dir_base + i;
}

/* Per-uid entry i of the directory at @dir_base (same rule as above). */
static inline struct kvr_uid_use_shm *
kvr_uid_use(void *dir_base, const struct kvr_ctl_geom *g, uint32_t i)
{
	return (struct kvr_uid_use_shm *)((char *)dir_base + g->uid_off) + i;
}

/* Namespace slot i (id i + 1, i < KVR_NS_OBS_MAX) of the directory at
 * @dir_base. */
static inline struct kvr_ns_obs_shm *
kvr_ns_obs(void *dir_base, const struct kvr_ctl_geom *g, uint32_t i)
{
	return (struct kvr_ns_obs_shm *)((char *)dir_base + g->ns_off) + i;
}

/* Errors-by-code bucket for an error (0..KVR_ERR_SLOTS-1); the inspector
 * names buckets with kvr_err_slot_name(). */
unsigned kvr_err_slot(int code);
const char *kvr_err_slot_name(unsigned slot);

#endif /* KVRING_LAYOUT_H */
