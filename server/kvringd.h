/* SPDX-License-Identifier: MIT */
/*
 * kvringd.h - kvringd's process-local state: the server (sockets, io_uring,
 * segments, storage engine, channel table) and one connection per accepted
 * socket. Every field here is private to the event-loop thread, which is
 * the only thread kvringd runs (DESIGN rule 3): nothing in this file is
 * shared memory, and nothing a worker writes is ever stored here without
 * having been validated first.
 *
 * Files of server/ and what each owns (README.md has who calls whom):
 *   srv.c        start-up and teardown: stale-segment sweep, control
 *                segment, store, io_uring
 *   pool.c       the pool's placement: backend, huge pages, pre-fault
 *   listen.c     the single-instance lock file and the listening socket
 *   loop.c       the event loop: completions, spin-then-sleep,
 *                housekeeping, signals, graceful shutdown
 *   uring.c      queueing io_uring operations (polls, poll removals)
 *   hello.c      the handshake: hello, credentials, channel claim,
 *                welcome+fds
 *   ns.c         the namespace table (model layouts of connected workers)
 *   chan.c       connections and channels: alloc, active list, cleanup,
 *                detached channels, counters published to the block
 *   disp.c       requests: dispatch to the store, answers
 *   tport_ring.c the ring transport: the request ring's drain, answers
 *   tport_sock.c the copy transport's socket framing
 *   l2_srv.c     the L2 tier's event-loop side
 *   disk_srv.c   the disk tier's event-loop side
 * The storage engine (server/store/, <kvring/store.h>) is documented in
 * docs/storage.md, the L2 tier (server/l2/, <kvring/l2.h>) in docs/l2.md;
 * this layer only calls them.
 */
#ifndef KVR_SERVER_KVRINGD_H
#define KVR_SERVER_KVRINGD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <poll.h>

#include <liburing.h>

#include <kvring/layout.h>
#include <kvring/proto.h>
#include <kvring/ring.h>
#include <kvring/segment.h>
#include <kvring/store.h>

#include "config.h"
#include "disk_srv.h"
#include "l2_srv.h"

/* Sockets allowed in the handshake at once (beyond max_workers); when
 * full, a new socket makes the oldest pending one go (hello.c). */
#define KVR_SRV_PENDING_MAX 32u
/* Of those, at most this many per peer uid: one local user cannot hold
 * the handshake table against the others. */
#define KVR_SRV_PENDING_PER_UID 8u
/* A peer that has sent no byte this long after accept is dropped (the
 * whole hello still has --handshake-ms). libkvring sends at once. */
#define KVR_SRV_FIRST_BYTE_MS 250u
/* Requests taken from one channel per pass, so that one busy worker
 * cannot starve the others. */
#define KVR_SRV_BATCH 64u
/* A channel that sent a request within the last KVR_SRV_HOT_NS (or waits
 * for room to answer) is on the hot list (kvr_srv.hot) and polled on every
 * loop pass; each pass also polls the next KVR_SRV_COLD_SLICE of the
 * others, round robin, and the pass after a sleep polls all. So a pass
 * costs the hot channels and a fixed few idle ones, not all connected
 * workers (DESIGN: cost per operation must not grow with the number of
 * workers), and a cold channel's first request waits at most (connected
 * / KVR_SRV_COLD_SLICE) passes of the loop. */
#define KVR_SRV_HOT_NS	   2000000ull
#define KVR_SRV_COLD_SLICE 4u
/* kvr_conn.hot_pos of a channel not on the hot list. */
#define KVR_SRV_NOT_HOT UINT32_MAX
/* Channel counters handled in batches wait at most this long for the loop
 * to idle before they are published anyway (loop.c, chan.c). */
#define KVR_SRV_COUNTERS_NS 1000000ull
/* Distinct namespaces (model layouts) the server registers. */
#define KVR_SRV_NS_MAX 256u
/* Largest handshake frame body accepted (a hello is 112 bytes). */
#define KVR_SRV_HELLO_MAX 4096u

/*
 * io_uring user_data: kind (8 bits) | connection index (24) | generation
 * (32). The generation is bumped whenever a connection slot is freed, so a
 * completion that arrives for a slot's previous user is recognised and
 * ignored instead of acting on the new one.
 */
enum kvr_tag_kind {
	KVR_TAG_NONE = 0, /* poll_remove and other fire-and-forget ops */
	KVR_TAG_ACCEPT = 1,
	KVR_TAG_SIGNAL = 2,
	KVR_TAG_TIMER = 3,
	KVR_TAG_SOCK = 4,     /* worker socket readable / hung up */
	KVR_TAG_SOCK_OUT = 5, /* worker socket writable (copy sends) */
	KVR_TAG_PIDFD = 6,    /* worker process exited */
	KVR_TAG_BELL = 7,     /* request doorbell rung */
	KVR_TAG_L2 = 8,	      /* L2 done queue rung (l2_srv.c) */
	KVR_TAG_DETACHED = 9, /* a detached channel's process exited; the
				 index is the channel (chan.c) */
	KVR_TAG_DISK = 10,    /* disk tier I/O completed (disk_srv.c) */
};

static inline uint64_t kvr_tag_make(unsigned kind, uint32_t idx, uint32_t gen)
{
	return (uint64_t)kind << 56 | (uint64_t)(idx & 0xffffffu) << 32 | gen;
}

static inline unsigned kvr_tag_kind(uint64_t t)
{
	return (unsigned)(t >> 56);
}

static inline uint32_t kvr_tag_idx(uint64_t t)
{
	return (uint32_t)(t >> 32) & 0xffffffu;
}

static inline uint32_t kvr_tag_gen(uint64_t t)
{
	return (uint32_t)t;
}

enum kvr_conn_state {
	KVR_CONN_FREE = 0,
	KVR_CONN_HELLO = 1,  /* accepted, waiting for the hello */
	KVR_CONN_ACTIVE = 2, /* welcome sent, channel claimed */
};

/* Private mirror of struct kvr_cache_shm, same order and size, so that
 * chan.c publishes it word by word (never read back from shared memory). */
struct kvr_cache_cnt {
	uint64_t lookups, lookup_keys, lookup_hit_keys, lookup_hit_bytes;
	uint64_t retrieves, retrieve_keys, retrieve_hit_keys, retrieve_bytes;
	uint64_t store_keys_new, store_bytes_new;
	uint64_t store_keys_stored, store_bytes_stored;
	uint64_t store_keys_no_room, store_keys_busy;
	uint64_t reserved[2];
};
_Static_assert(sizeof(struct kvr_cache_cnt) == sizeof(struct kvr_cache_shm),
	       "mirror of kvr_cache_shm");

/* A store transfer the copy transport must receive payload for. */
struct kvr_cp_xfer {
	uint64_t id;		     /* 0: entry unused */
	uint32_t n;		     /* slots */
	uint64_t total;		     /* payload bytes expected */
	struct kvr_slot_desc *slots; /* n entries (OK ones only), owned */
};

/* Copy transport receive states. */
enum kvr_cp_rx {
	KVR_CP_RX_FRAME = 0,   /* reading a struct kvr_frame */
	KVR_CP_RX_BODY = 1,    /* reading the request record */
	KVR_CP_RX_PAYLOAD = 2, /* reading commit_store payload into the pool */
};

/*
 * struct kvr_copy - per-connection state of the copy transport. Owned by
 * its connection; created at the handshake, freed at cleanup.
 */
struct kvr_copy {
	/* Receive side. */
	int rx;		     /* enum kvr_cp_rx */
	struct kvr_frame fr; /* current frame header */
	size_t got;	     /* bytes of the current part received */
	uint8_t *body;	     /* request record, body_cap bytes */
	size_t body_cap;
	struct kvr_cp_xfer *px; /* RX_PAYLOAD: the transfer being filled */
	uint32_t pslot;		/* slot being filled */
	uint64_t poff;		/* bytes of that slot received */
	struct kvr_cp_xfer *xf; /* open store transfers, nxf entries */
	uint32_t nxf;
	/* Send side: one message at a time (frame + record, then slots). */
	uint8_t *tx; /* frame + answer record */
	size_t tx_cap;
	struct iovec *iov; /* iov[0] = tx, then pool spans */
	uint32_t iov_cap;
	uint32_t niov, iov_pos; /* iovs queued, first not fully sent */
	size_t iov_off;		/* bytes of iov[iov_pos] already sent */
	bool tx_wait;		/* a POLLOUT is armed */
	uint64_t tx_since_ns;	/* when the socket last filled up */
};

struct kvr_srv;
struct kvr_conn;

/*
 * struct kvr_conn_ops - how a connection is served: the handshake
 * (kvr__hello_ops, hello.c) until it is admitted, then the transport the
 * handshake chose, once: the shared-memory ring (kvr__tport_ring_ops,
 * tport_ring.c) or the copy transport over the socket (kvr__tport_sock_ops,
 * tport_sock.c).
 * Every place where the transport matters calls through c->ops, so no
 * path after the handshake asks which transport a connection uses
 * (DESIGN rule 4). The tables are constant; a transport's per-connection
 * state lives in struct kvr_conn (c->cp for copy), which is also where
 * further per-channel state belongs. Every member is set in every table.
 */
struct kvr_conn_ops {
	/* At admission, before the welcome: set up the transport's state.
	 * Return 0 or -errno (the handshake is then refused). */
	int (*init)(struct kvr_srv *s, struct kvr_conn *c);
	/* The connection just became ACTIVE (the welcome was sent). */
	void (*start)(struct kvr_srv *s, struct kvr_conn *c);
	/* Its socket is readable or hung up (multishot POLLIN|POLLRDHUP). */
	void (*readable)(struct kvr_srv *s, struct kvr_conn *c);
	/* Its socket is writable (a one-shot POLLOUT the transport armed). */
	void (*writable)(struct kvr_srv *s, struct kvr_conn *c);
	/* True when its worker has left answers untaken for over @stall_ns
	 * (housekeeping disconnects it). */
	bool (*stalled)(const struct kvr_conn *c, uint64_t now_ns,
			uint64_t stall_ns);
	/* Graceful stop: answer what the worker queued with -ESHUTDOWN. */
	void (*shutdown)(struct kvr_srv *s, struct kvr_conn *c);
	/* Cleanup (kvr__chan_close), after the store released the channel
	 * and before the fds close: leave the loop's lists, remove the
	 * transport's polls, free its state. Safe to call twice. */
	void (*fini)(struct kvr_srv *s, struct kvr_conn *c);
	/* An answer may be written after kvr__disp_exec() returned without
	 * one (an L2 read-through, l2_srv.c): the ring can take it later. */
	bool late_answers;
};

/*
 * struct kvr_conn - one accepted socket and, once the handshake succeeded,
 * the channel it owns. Lives in kvr_srv.conns[]; a slot is reused after
 * cleanup with its generation bumped. All fds are owned and closed by
 * kvr__chan_close().
 */
struct kvr_conn {
	uint32_t idx;	     /* position in kvr_srv.conns */
	uint32_t gen;	     /* bumped at every free */
	int state;	     /* enum kvr_conn_state */
	int sock;	     /* the worker's socket */
	int pidfd;	     /* -1 if pidfd_open is unsupported */
	int req_efd;	     /* request doorbell (the server sleeps on it) */
	int resp_efd;	     /* response doorbell (the server rings it) */
	int32_t chan;	     /* channel index, -1 until claimed */
	uint32_t active_pos; /* position in kvr_srv.active */
	uint32_t polled_pos; /* position in kvr_srv.polled (ring only) */
	uint32_t hot_pos;    /* position in kvr_srv.hot, or KVR_SRV_NOT_HOT */
	pid_t pid;	     /* SO_PEERCRED */
	uid_t uid;
	gid_t gid;
	uint64_t pid_start;
	uint64_t deadline_ns; /* HELLO: drop the socket after this */
	uint64_t accepted_ns; /* HELLO: when accepted (oldest goes first) */
	uint8_t hbuf[sizeof(struct kvr_frame) + KVR_SRV_HELLO_MAX];
	size_t hlen; /* hello bytes received */
	uint32_t ns_id;
	const struct kvr_conn_ops *ops; /* how it is served (see above) */
	uint32_t transport;		/* KVR_TRANSPORT_*, set at admission */
	struct kvr_channel_shm *shm;	/* the channel block (untrusted) */
	struct kvr_seg blk; /* its memfd, this claim's alone (abi 3.0) */
	struct kvr_chan_dir_shm *dir; /* its directory entry (ours only) */
	struct kvr_ring req;	      /* consumer view */
	struct kvr_ring resp;	      /* producer view */
	/* The worker attaches its response ring after ours: its flags
	 * (line padding) are read again at its first request. */
	bool resp_synced;
	/* An answer that did not fit in the response ring: the channel
	 * consumes no further request until it is written. */
	uint8_t *pend;
	size_t pend_len;
	uint32_t pend_type;
	bool blocked;
	uint64_t blocked_since_ns;
	/* Local mirrors of the channel counters (never read back from shm). */
	uint64_t n_req[16];
	uint64_t n_err[KVR_ERR_SLOTS];
	uint64_t req_hw, resp_hw, resp_full, bytes_in, bytes_out;
	uint64_t last_req_ns; /* when a request was last handled (hot set) */
	struct kvr_copy *cp;  /* copy transport only */
	/* Observability block of the channel (untrusted: the worker maps
	 * it) and the private mirror of its cache counters. */
	struct kvr_chan_obs_shm *obs;
	struct kvr_cache_cnt cache;
	bool cache_dirty;
	/* Requests handled since kvr__chan_counters() last published this
	 * channel's counters (the loop publishes them when it idles). */
	bool counters_due;
	/* Corruption reports of this connection whose bytes matched their
	 * sum (chunk_sum.c): past KVR_SUM_FALSE_MAX its reports are not
	 * checked. */
	uint32_t false_reports;
	/* Store-ahead (disp.c): a staged slot of this channel not handed
	 * out yet (0: none), and the size of the one to stage after this
	 * batch's answers are published (0: none), so that staging is off
	 * the commit's round trip. The store frees the spare at close. */
	uint64_t stage_spare;
	uint64_t stage_len;
	/* Set by the close when the store kept quarantine for a live
	 * process: the pidfd moves to kvr_srv.detached (chan.c). */
	bool detach;
	/* The store's count of this channel's transfers reclaimed at their
	 * deadline that the log has reported (loop.c). */
	uint64_t expired_seen;
};

/* A closed channel whose live process may still write the slots of its
 * quarantine (chan.c): its channel stays claimed until the process
 * exits, watched through the pidfd that came with the connection. */
struct kvr_detached {
	int pidfd;    /* -1: the channel is not detached */
	pid_t pid;    /* for the log */
	uint32_t gen; /* the poll's tag generation */
};
/* kvr_srv.chan_conn of a detached channel: not free, nobody's. */
#define KVR_CHAN_DETACHED (-2)

/*
 * One registered namespace: same description, same id. Counted by the
 * channels using it (refs) and, in the store, by its objects; an entry
 * with neither is free for another model (hello.c).
 */
struct kvr_ns_ent {
	struct kvr_ns_desc desc;
	uint32_t id;   /* index + 1 */
	uint32_t refs; /* channels (and handshakes past registration) */
	bool used;
	uint64_t last_put_ns; /* when refs last dropped to 0 */
	bool dirty;	      /* cache changed since it was last published */
	bool published;	      /* its slot in the directory is written */
	uint32_t obs_gen;     /* that slot's generation (even: stable) */
	struct kvr_cache_cnt cache;
};

/* Global counters the server keeps itself (the store keeps the rest). */
struct kvr_gcount {
	uint64_t connects, disconnect_cleanups, protocol_errors;
	uint64_t handshake_refused, requests, leases_expired, loop_wakeups;
	uint64_t corrupt_unconfirmed; /* reports whose bytes matched */
};

/*
 * struct kvr_srv - the whole server. Created by kvr_srv_create(), run by
 * kvr_loop_run(), destroyed by kvr_srv_destroy(); owned by main().
 */
struct kvr_srv {
	struct kvr_config cfg;
	int dir_fd; /* the socket's directory: lock and socket are made in it */
	int lock_fd;
	int listen_fd;
	int sig_fd;
	int timer_fd;
	bool ring_ok; /* io_uring initialised */
	struct io_uring ring;
	bool have_socket; /* we bound the socket path: unlink it at exit */
	ino_t sock_ino;	  /* the socket file we bound */
	dev_t sock_dev;
	struct kvr_seg ctl;
	int ctl_ro_fd;		 /* ctl reopened O_RDONLY: what workers get */
	struct kvr_seg chan_dir; /* the channel directory (abi 4.0): a
				    memfd never sent to anyone */
	uint32_t chan_gen;	 /* last channel generation handed out */
	struct kvr_seg pool;
	int backend; /* enum kvr_pool_backend actually in use */
	struct kvr_ctl_hdr_shm *hdr;
	struct kvr_ctl_geom geom;
	struct kvr_store *store;
	uint32_t max_keys; /* effective per-request key limit */
	uint8_t boot_id[16];
	uid_t uid;
	/* Connections and channels. */
	struct kvr_conn *conns;
	uint32_t nconns;
	int32_t *chan_conn; /* per channel: owning conn index, -1 free,
			       or KVR_CHAN_DETACHED */
	struct kvr_detached *detached; /* per channel */
	uint32_t detached_gen;
	uint32_t *active; /* conn indices of ACTIVE connections */
	uint32_t nactive;
	uint32_t *polled; /* the ACTIVE ones whose request ring the loop
			   * drains: the ring transport's (tport_ring.c) */
	uint32_t npolled;
	/* The polled channels that sent a request within KVR_SRV_HOT_NS (or
	 * wait for room to answer): polled on every pass (loop.c). */
	uint32_t *hot;
	uint32_t nhot;
	uint32_t cold_next; /* polled position drain_cold() looks at next */
	bool full_scan;	    /* poll every channel on the next pass */
	uint32_t npending;  /* connections in HELLO */
	uint64_t store_cap; /* kvr_store_capacity() as last logged */
	bool index_moving;  /* a heartbeat saw the key index migrating; its
			       end not yet logged (idle_step) */
	struct kvr_ns_ent *ns;
	uint32_t nns;
	/* Scratch buffers of the dispatcher (private copies of peer data). */
	struct kvr_key *keys;
	uint64_t *sizes;
	uint8_t *ans; /* one answer record, ans_cap bytes */
	size_t ans_cap;
	/* Loop state. */
	bool accepting;
	bool stopping;
	uint64_t now_ns;
	struct kvr_gcount g;
	struct kvr_l2 *l2;	       /* NULL without --l2 (l2_srv.h) */
	struct kvr_dsrv *disk;	       /* NULL without --disk (disk_srv.h) */
	struct kvr_prefault *prefault; /* huge-page pool zeroing, prefault.h */
	/* Observability (disp.c times, chan.c publishes). */
	struct kvr_ctl_obs_shm *obs; /* in the control segment */
	bool hist_on;		     /* --histograms not off */
	bool chan_hist_on;	     /* --histograms per-channel */
	uint64_t lat_mark_ns;	     /* clock read after the last publish */
	uint32_t stale_passes;	     /* idle loop passes since now_ns */
	uint64_t pass_ns;	     /* an idle pass's length, measured */
	struct kvr_cache_cnt cache;  /* global mirror */
	/* Some polled channel's counters are due (chan.c), and when the
	 * due ones were last published. */
	bool counters_due;
	uint64_t counters_ns;
};

/*
 * kvr_srv_create - everything kvringd does before its loop runs: single
 * instance lock, socket, sweep, segments (logged: transport, pool name and
 * size), store, io_uring, signal and timer fds. Logs the reason of any
 * failure with what to do about it.
 * Return: 0 and *out, or -errno (nothing left behind: no socket, no
 * segment, and never anything belonging to another server).
 */
int kvr_srv_create(const struct kvr_config *cfg, struct kvr_srv **out);

/*
 * kvr_srv_destroy - close every connection, then remove the pool, the
 * control segment (last) and the socket. NULL-safe.
 */
void kvr_srv_destroy(struct kvr_srv *s);

#endif /* KVR_SERVER_KVRINGD_H */
