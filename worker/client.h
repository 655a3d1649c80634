/* SPDX-License-Identifier: MIT */
/*
 * client.h - libkvring's private view of one connection (struct kvr_client)
 * and the internal calls its files share, one section per file, each
 * file's functions named kvr__<file>_<verb>. Nothing here is installed or
 * exported. The files, callers first (README.md lists who calls whom):
 *
 *   ops.c, async.c  the public calls: sync (submit, wait for the answer)
 *                   and async (submit, reap completions)
 *   connect.c       kvr_connect*(): the options that can grow, the wait
 *                   for a kvringd that is still starting
 *   conn.c          one connection attempt: hello, welcome and its fds,
 *                   attach the control segment and the pool; kvr_close
 *   submit.c        how a request leaves: checks, pending entry, encoding
 *   wait.c          bounded waiting and liveness checks
 *   tport_ring.c    the ring transport (claim/commit/doorbell, the pool)
 *   tport_sock.c    the socket transport (frames, private buffers)
 *   frame.c         the socket's wire: frames read whole, the hello,
 *                   BYE; used by both transports and the handshake
 *   answer.c        validating, matching and applying answers
 *   errmsg.c        the wording of kvringd's refusals
 *   client.c        the client object and its sticky error
 *   pend.c          the pending table, the completion queue, xfers
 *   touch.c         the pool pre-fault, in line or in the background
 *   xfer_sum.c           per-chunk checksums: summed at commit, checked at
 *                   retrieve
 *   kv.c            paged-KV gather/scatter (no client; <kvring/kv.h>)
 *
 * The transport is chosen once, at connect: c->tp is one of two operations
 * tables (claim, commit, receive, wait, slots, close), and no other path asks
 * which transport is in use.
 *
 * Ownership: a kvr_client is created by kvr_connect() and dies in
 * kvr_close(). It owns the socket, the two doorbell eventfds, the control
 * segment and pool mappings (their fds were closed right after mmap), the
 * pending-request table and the completion queue. Caller xfers are only
 * borrowed: the library allocates their slot arrays (and copy buffers) when
 * an answer arrives and frees them on commit/abort or kvr_xfer_free().
 */
#ifndef KVR_WORKER_CLIENT_H
#define KVR_WORKER_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvring/clock.h>
#include <kvring/kvring.h>
#include <kvring/layout.h>
#include <kvring/ring.h>
#include <kvring/segment.h>

/* Default of $KVRING_RTT_SAMPLE: one op in N is timed (docs/inspect.md;
 * the cost, measured, in docs/performance.md). */
#define KVR_RTT_SAMPLE_DEF 64
/* Longest wait in one poll(2): liveness is re-checked at least this often. */
#define KVR_SLICE_MS 100
/* Heartbeat older than max(3 periods, this) means the server stopped. */
#define KVR_HB_MIN_STALE_MS 1000

/* State of one pending-table entry. */
enum kvr__pend_state {
	KVR_PEND_FREE = 0,
	KVR_PEND_WAIT = 1, /* sent, answer not yet seen */
	KVR_PEND_DONE = 2, /* sync: answered, result below */
	KVR_PEND_ORPHAN =
	    3, /* sync caller gave up (timeout): undo the answer */
	KVR_PEND_SENDING = 4, /* being committed (a socket send in progress) */
};

/*
 * One request in flight. Lives in the client's pending table from submit
 * until its answer is matched (async: moved to the completion queue;
 * sync: read back by the waiting call, then freed).
 */
struct kvr__pend {
	uint64_t req_id; /* chosen by us; slot = req_id & pend_mask */
	uint32_t op;
	uint32_t nkeys; /* keys sent: bounds the answer's slot count */
	uint8_t state;	/* enum kvr__pend_state */
	bool sync;
	bool internal;	  /* an undo sent by the library: no completion */
	bool pin;	  /* lookup asked for a lease */
	bool l2;	  /* lookup asked to read through L2 */
	bool sums;	  /* retrieve asked for checksums (KVR_REQ_SUMS) */
	bool timed;	  /* its round trip goes into worker_rtt */
	bool bind;	  /* a bind of a staged slot (stage.c) */
	bool stage_ask;	  /* commit_store asking for a staged slot */
	uint64_t sent_ns; /* timed: clock read when it was submitted */
	void *user;
	struct kvr_xfer *x;	      /* borrowed; NULL when orphaned */
	struct kvr_stats_wire *stats; /* sync stats: where the body goes */
	/* Result (sync entries, and the completion of async ones). */
	int status;
	long value;
	uint64_t handle;
};

struct kvr__tport;
struct kvr__submit_req;
struct kvr__frame_rx;

struct kvr_client {
	pthread_mutex_t lock; /* serialises every call (kvring.h: Threads) */

	struct kvr_client_info info; /* copied out by kvr_client_info() */
	struct kvr_ns_desc ns;
	int sock;     /* Unix stream socket to kvringd */
	int req_efd;  /* we write it when the server sleeps */
	int resp_efd; /* we sleep on it */
	/* The transport decision, made once at the welcome (conn.c): every
	 * path that differs between ring and socket calls through it. NULL
	 * before the welcome. */
	const struct kvr__tport *tp;
	pid_t server_pid;
	pid_t
	    owner_pid; /* getpid() at connect: a forked child never says BYE */

	/*
	 * Our channel, as conn.c attached it: the mappings, our private copy
	 * of the geometry (never re-read from the header), the header and
	 * our channel block in them, and the two rings in the block. The
	 * liveness checks (wait.c) read hdr and ch under both transports;
	 * only the ring transport uses req, resp and pool. ctl is mapped
	 * read-only from a descriptor that cannot map it writable; blk, our
	 * channel's block, is a memfd of its own, ours alone (abi 3.0).
	 */
	struct kvr_seg ctl;
	struct kvr_seg blk;
	/* A copy of this process's one mapping of the pool (poolmap.c owns
	 * it); unmapped (base NULL) under the socket. pool_shared: another
	 * client mapped (and pre-faulted) it, this one only joined. */
	struct kvr_seg pool;
	bool pool_shared;
	struct kvr_ctl_geom geom;
	struct kvr_ctl_hdr_shm *hdr;
	struct kvr_channel_shm *ch;
	uint32_t generation;  /* the channel's generation when we attached */
	struct kvr_ring req;  /* producer */
	struct kvr_ring resp; /* consumer */
	uint32_t heartbeat_ms;
	uint32_t spin_us;
	uint32_t timeout_ms;

	/* KVR_CHECKSUM_* in effect (xfer_sum.c): decided once at connect, the
	 * same under both transports. sum_buf holds one commit's words. */
	uint32_t checksum;
	uint64_t *sum_buf;
	uint32_t sum_cap;

	/* kvr_submit_hold() is in effect: async requests are written but
	 * not published until kvr_submit_flush() or anything that waits for
	 * answers (kvr__wait_drain). held counts those written since the
	 * last publish. */
	bool hold;
	uint32_t held;

	/* A fatal error latches here: every later call returns it at once. */
	int broken;
	char errmsg[256];

	/* Pending requests: open addressing by req_id & pend_mask. */
	struct kvr__pend *pend;
	uint32_t pend_cap;
	uint32_t pend_mask;
	uint32_t pend_count;
	uint32_t pend_async; /* async entries not yet reaped */
	uint64_t next_id;

	/* Completions of async requests, FIFO, awaiting kvr_reap(). */
	struct kvr_completion *cq;
	uint32_t cq_cap; /* power of two */
	uint32_t cq_head;
	uint32_t cq_tail;

	/* The socket transport's (tport_sock.c, frame.c): its one send
	 * buffer and the record claimed in it; the answer frames read whole
	 * and not yet received (FIFO: frames read while a send waited for
	 * room wait here), and the one received last, whose payload the slots
	 * operation may take. */
	void *tx;
	size_t tx_bytes;
	size_t tx_len;
	uint32_t tx_op;
	struct kvr__frame_rx *rx_head, *rx_tail, *rx_cur;

	/* The ring transport's (tport_ring.c): answers taken since response
	 * ring room was last given back, and what the socket said during a
	 * wait (poll revents; only BYE or EOF may come under the ring),
	 * reported once the ring is drained. */
	uint32_t resp_taken;
	short sock_event;
	/* Requests claimed in the request ring and answers taken from the
	 * response ring, ever (free-running): equal, no answer is due, so
	 * the server cannot be waiting for response ring room and the give
	 * back may wait for the next request (ring_receive). */
	uint32_t ring_asked, ring_answered;
	bool resp_deferred; /* a drain left answers unreleased */

	/* Round trips published into our channel block (worker_rtt): one
	 * op in rtt_every is timed ($KVRING_RTT_SAMPLE; 0 = none) and counts
	 * as rtt_every samples. obs is NULL when not recording. */
	struct kvr_chan_obs_shm *obs;
	uint32_t rtt_every;
	uint32_t rtt_left; /* ops until the next timed one */

	/* Undo requests (abort/commit_retrieve/release) owed for answers to
	 * abandoned calls. Queued, never sent from inside answer handling
	 * (which may run in the middle of a copy-transport send), and sent
	 * at the start of the next submit; kept while the ring is full. */
	struct kvr__pend_undo {
		uint32_t op;
		uint64_t handle;
	} * undo;
	uint32_t undo_n, undo_cap;
	bool undo_flushing;

	/* Scratch for one answer record copied out of the ring (so nothing
	 * is parsed in memory the server can still change). */
	void *scratch;
	size_t scratch_bytes;

	/* Store-ahead (stage.c): the one staged slot kvringd gave this
	 * channel, and the mode, decided once at connect. */
	struct kvr__stage {
		bool on;     /* $KVRING_STORE_AHEAD=1 under the ring */
		bool skip;   /* a bind found its key stored: ask first */
		bool taken;  /* a staged prepare answered with it */
		bool asked;  /* a commit in flight asks for one */
		uint64_t id; /* its transfer id; 0: none held */
		uint64_t off, len;
		uint64_t use_before_ns; /* coarse clock: half its life */
		uint64_t bind_req;	/* taken: its early bind's request id */
		uint64_t hits, wasted;	/* staged prepares, wasted copies */
		/* taken: in stage.c's list of staged xfers the caller holds,
		 * by their slots array, so that kvr_xfer_free() of one can
		 * say so (dropped) and the next call gives the slot back. */
		struct kvr__stage *reg_next;
		const struct kvr_slot *reg_slots; /* NULL: not listed */
		_Atomic bool dropped;
	} stage;

	/* Background pre-fault (touch.c): one thread that touches the pool
	 * once; joined before the pool is unmapped. */
	struct kvr__touch {
		pthread_t thread;
		bool started;	   /* thread created (and not joined yet) */
		_Atomic bool stop; /* teardown asks it to end early */
		_Atomic bool done; /* R-TOUCH1: ns below is valid */
		uint64_t ns;	   /* its duration, written before done */
		size_t from;	   /* follower: where it starts (touch.c) */
		/* The 4 KiB background thread was started (set before
		 * kvr_connect returns, never changed after): prepare_store
		 * answers touch their slots first (kvr__touch_slots). */
		bool bg;
		_Atomic size_t reached; /* bytes from 0 it touched (a hint) */
	} touch;
};

/* ---- client.c: the client object and its sticky error ---- */

/* A zeroed client with @o's defaults (no fds, nothing mapped). Return 0,
 * or -ENOMEM (*out untouched). */
int kvr__client_create(const struct kvr_client_opts *o,
		       struct kvr_client **out);
/* Release everything @c holds, however far its connect got (no BYE: the
 * server sees the hang-up). Accepts NULL. */
void kvr__client_destroy(struct kvr_client *c);
/* Record a failure sentence in c->errmsg; returns rc. */
int kvr__client_fail(struct kvr_client *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Mark the client broken with rc: pending calls fail with it, later calls
 * return it at once. The first fatal error wins. Returns c->broken. */
int kvr__client_break(struct kvr_client *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Start of a public call: the previous call's sentence is forgotten
 * (kvr_client_errmsg() is "" after a success), unless the client is
 * broken, whose sentence stays with every later call. */
void kvr__client_call_begin(struct kvr_client *c);
/* End of a public call that returned rc: a failure that left no sentence
 * gets kvr_strerror()'s wording, so "" always means success. */
void kvr__client_call_end(struct kvr_client *c, long rc);

/* Run expr with the client's mutex held (every public call does), as one
 * call for kvr_client_errmsg(). */
#define KVR_CLIENT_LOCKED(c, expr)                                             \
	({                                                                     \
		__typeof__(expr) r_;                                           \
		pthread_mutex_lock(&(c)->lock);                                \
		kvr__client_call_begin(c);                                     \
		r_ = (expr);                                                   \
		kvr__client_call_end((c), (long)r_);                           \
		pthread_mutex_unlock(&(c)->lock);                              \
		r_;                                                            \
	})

/* A public call's own argument check failed: say which, as one call. */
#define KVR_CLIENT_ARG_FAIL(c, what)                                           \
	KVR_CLIENT_LOCKED(                                                     \
	    (c), kvr__client_fail((c), -EINVAL, "%s: %s", __func__, (what)))

/* ---- conn.c: connect, handshake, attach, close ---- */

/* One connection attempt (no waiting for the server); connect.c calls it
 * with options already copied and checked for size. Return 0 and *out, or
 * -errno with the reason in errbuf. */
int kvr__conn_attempt(const struct kvr_client_opts *o, struct kvr_client **out,
		      char *errbuf, size_t errlen);

/* ---- poolmap.c: one pool mapping per process ---- */

/* Map the pool file @fd (taken: closed before return) read-write into
 * c->pool, or share the mapping another client of this process made of
 * the same file and length (*@shared true: nothing was mapped, and its
 * pages are this process's already). Return 0, or -errno with @e set as
 * kvr_seg_attach_fd() sets it. */
int kvr__poolmap_attach(struct kvr_client *c, int fd, size_t bytes,
			bool *shared, struct kvr_err *e);
/* Let go of c->pool: unmapped when no other client of this process uses
 * it. After the pre-fault was stopped. NULL mapping: nothing. */
void kvr__poolmap_detach(struct kvr_client *c);

/* ---- touch.c: the pool pre-fault, in line or in the background ---- */

/* Start the pre-fault of c->pool: in line (returns when every page is
 * touched, c->info.prefault_ns set) or, with @background and 4 KiB pages,
 * in a thread; a huge-page pool the server still zeroes is touched in
 * line up to the server's zeroed line and behind it by a thread. Returns
 * 0 or -errno (the thread could not start: then it ran in line instead,
 * and returns 0). Needs c->hdr mapped. */
int kvr__touch_start(struct kvr_client *c, bool background);
/* While the 4 KiB background pre-fault runs: map the pages of @x's OK
 * slots that its thread has not reached yet, in the calling thread (one
 * MADV_POPULATE_WRITE), so that the caller's copy finds them mapped.
 * Nothing once it is done (one relaxed load), under huge pages or the
 * copy transport. */
void kvr__touch_slots(struct kvr_client *c, const struct kvr_xfer *x);
/* Stop and join a background pre-fault; before the pool is unmapped. A
 * forked child (no such thread there) only forgets it. */
void kvr__touch_stop(struct kvr_client *c);

/* For a wait (wait.c, the transports): how long one poll(2) may sleep before
 * @deadline_ns, at most KVR_SLICE_MS, or -ETIMEDOUT when it passed. */
int kvr__client_slice_ms(uint64_t deadline_ns);
/* One liveness check: socket hang-up, heartbeat, boot id, generation.
 * Return 0 or a fatal -errno (client broken). */
int kvr__client_alive(struct kvr_client *c);
/* Bytes a retrieve of @n slots keeps its sums in, at the start of
 * x->priv (a multiple of 64; 0 when @c does not sum or @op is not
 * PREPARE_RETRIEVE). The socket transport reserves them in front of its
 * buffers; under the ring transport x->priv is the sums alone. */
size_t kvr__client_sum_room(const struct kvr_client *c, uint32_t op,
			    uint32_t n);

/* ---- pend.c: the pending table, the completion queue, xfers ---- */

/* The entry of request @id, or NULL (unknown, or 0). */
struct kvr__pend *kvr__pend_find(struct kvr_client *c, uint64_t id);
/* Grow the table so that two more entries fit at most half full. Return
 * 0 or -ENOMEM (the table is unchanged). */
int kvr__pend_reserve(struct kvr_client *c);
/* For kvr__submit(): a WAIT entry with a fresh req_id, filled in for
 * request @s (the fields its answer is checked against, the round-trip
 * sample), or NULL when the table can't grow. */
struct kvr__pend *kvr__pend_open(struct kvr_client *c,
				 const struct kvr__submit_req *s);
void kvr__pend_free(struct kvr_client *c, struct kvr__pend *p);
uint32_t kvr__pend_cq_count(const struct kvr_client *c);
/* Room for a completion of every async request in flight, plus one.
 * Return 0 or -ENOMEM. */
int kvr__pend_cq_reserve(struct kvr_client *c);
/* Store-ahead's staged xfer @slots is out: list @c, so that kvr_xfer_free()
 * of it (any thread) marks c->stage.dropped and unlists it (stage.c gives
 * the slot back at its next store call). _del: unlist (taken back);
 * _fini: the client is going away (also in a forked child). */
void kvr__pend_stage_add(struct kvr_client *c, const struct kvr_slot *slots);
void kvr__pend_stage_del(struct kvr_client *c);
void kvr__pend_stage_fini(struct kvr_client *c);
/* Queue one completion; room was reserved (never fails). */
void kvr__pend_cq_push(struct kvr_client *c, const struct kvr_completion *e);
void kvr__pend_xfer_init(struct kvr_xfer *x, uint32_t op);
/* Fail every pending request with c->broken (kvr__client_break). */
void kvr__pend_fail_all(struct kvr_client *c);

/* Owe an undo for what an answer created on the server that nobody will
 * use: @op is the request that created @handle (a PREPARE_STORE's
 * transfer, a staged slot, a retrieve, a lease). Sent by the next
 * submit, never from here. */
void kvr__pend_owe(struct kvr_client *c, uint32_t op, uint64_t handle);

/* ---- submit.c: how a request leaves ---- */

/* How a request was submitted. */
enum kvr__submit_kind {
	KVR_SUBMIT_SYNC,
	KVR_SUBMIT_ASYNC,
	KVR_SUBMIT_INTERNAL, /* an undo: no completion, never waits */
};

/* One request to send, as the public calls describe it. Borrowed for the
 * duration of kvr__submit() only: keys and sizes are copied out. */
struct kvr__submit_req {
	uint32_t op;
	uint64_t handle;
	uint32_t flags;
	const struct kvr_key *keys;
	uint32_t n;
	const uint64_t *sizes;
	const uint64_t *words; /* commit ops: n sums or offsets (xfer_sum.c) */
	struct kvr_xfer *x;    /* prepare: filled; commit: payload */
	struct kvr_stats_wire *stats; /* sync stats */
	void *user;
	enum kvr__submit_kind kind;
};

/* Send one request (owed undos first). Sync requests wait for room in the
 * request ring until @deadline; async ones drain answers once. Return 0
 * and *id_out, -EAGAIN (async or internal: request ring full), or -errno. */
int kvr__submit(struct kvr_client *c, const struct kvr__submit_req *s,
		uint64_t deadline, uint64_t *id_out);

/* ---- answer.c: validating, matching and applying answers ---- */

/* Handle one answer record (a private copy, never shared memory): parse,
 * match by req_id, check its shape, fill the xfer (through c->tp->slots),
 * complete the request. Return 0 or a fatal -errno (client broken). */
int kvr__answer(struct kvr_client *c, uint32_t type, const void *rec,
		size_t len);

/* ---- stage.c: store-ahead (one staged slot per channel) ---- */

/* opts.store_ahead, else $KVRING_STORE_AHEAD (0 off, unset: off): 1 on,
 * 0 off, or -EINVAL with the sentence in errbuf. */
int kvr__stage_mode(const struct kvr_client_opts *o, char *errbuf,
		    size_t errlen);
/* Set the mode once the transport is chosen: @on only under the ring
 * (the copy transport's payload follows a prepare's slots, which a staged
 * slot never had). */
void kvr__stage_init(struct kvr_client *c, bool on);
/* Answer a prepare_store locally from the staged slot. Return 1 (x
 * filled), or 0: ask kvringd. *give_back: a staged slot too old to use,
 * for the caller to owe an abort of (0: none). */
int kvr__stage_prepare(struct kvr_client *c, const struct kvr_key *keys,
		       const uint64_t *sizes, uint32_t n, struct kvr_xfer *x,
		       uint64_t *give_back);
/* Shape commit_store @s of @x: for a staged @x, collect its early bind
 * (waiting, bounded); ask for the next slot when none is held. Return 0
 * (send @s), 1 (nothing to send: the key was stored already, a success)
 * or -errno (the bind failed; nothing was stored). */
int kvr__stage_commit(struct kvr_client *c, struct kvr_xfer *x,
		      struct kvr__submit_req *s);
/* Abort of a staged @x: collects its early bind and owes kvringd an
 * abort if it bound (x freed). Return true if @x was staged. */
bool kvr__stage_abort(struct kvr_client *c, struct kvr_xfer *x);

/* ---- stage_answer.c: what answers tell store-ahead ---- */

/* Apply what a prepare_store or commit_store answer says to the stage
 * (a validated answer, orphans included). Return a staged slot the
 * answer carried that nobody will use, for the caller to owe an abort of
 * (0: none). */
uint64_t kvr__stage_answer(struct kvr_client *c, const struct kvr__pend *p,
			   const struct kvr_resp_hdr *h,
			   const struct kvr_slot_desc *sd);

/* ---- errmsg.c: the wording of kvringd's refusals ---- */

/* The sentence for an error the server answered to request s (which
 * lease, which transfer, which limit). Returns st. */
int kvr__errmsg_answer(struct kvr_client *c, const struct kvr__submit_req *s,
		       int st);

/* ---- wait.c: bounded waiting and liveness ---- */

/* Publish held requests (kvr_submit_hold), then process every answer
 * available now, without blocking (the transport's drain). Whatever
 * waits for an answer comes through here first, so a held request is
 * never waited for unpublished. Return 0 or a fatal -errno. */
int kvr__wait_drain(struct kvr_client *c);
/* Publish the requests written under kvr_submit_hold() (no-op when none
 * are held). Never fails. */
void kvr__wait_publish(struct kvr_client *c);
/*
 * Wait until done(c, arg) is true, processing answers; bounded by
 * deadline_ns (CLOCK_MONOTONIC) and by the liveness checks. Return 0,
 * -ETIMEDOUT (deadline; not fatal) or a fatal -errno (client broken).
 */
int kvr__wait(struct kvr_client *c, uint64_t deadline_ns,
	      bool (*done)(struct kvr_client *c, void *arg), void *arg);
/* A deadline @timeout_ms from now on the CLOCK_MONOTONIC time line, read
 * from the coarse clock (no TSC read: a few ns instead of tens on a VM);
 * never earlier than kvr_clock_now_ns() + timeout_ms. */
uint64_t kvr__wait_deadline_ns(uint32_t timeout_ms);

/* ---- tport_ring.c, tport_sock.c: the transport's operations ---- */

/* One answer record a transport hands up: private memory (never the
 * shared ring), valid until its next receive. */
struct kvr__rec {
	const void *data;
	uint32_t len;
	uint32_t type;
};

/*
 * A transport: what differs between the ring and the socket, chosen once
 * per connection (c->tp) like Redis's ae backends. It only moves records:
 * submit.c claims room, encodes the request into it and commits it;
 * wait.c receives answers and hands them to answer.c, which asks the
 * transport for the slots' bytes. A transport never calls back up (no
 * encoding, no pending table, no answer handling, no waiting policy).
 * Every operation runs with the client's mutex held; a fatal -errno has
 * broken the client.
 */
struct kvr__tport {
	const char *name; /* "ring" or "socket" */
	/* Whether commit may be deferred (kvr_submit_hold): the ring
	 * publishes every record claimed since its last commit at once. */
	bool batches;
	/* Room for one request record of @op, @len bytes, at *dst. Return 0,
	 * -EAGAIN (no room now: nothing claimed; drain answers and try
	 * again), -E2BIG (it can never fit; not fatal) or a fatal -errno. */
	int (*claim)(struct kvr_client *c, uint32_t op, size_t len, void **dst);
	/* Send what was claimed: the ring publishes every record claimed
	 * since its last commit (one doorbell check for all; never fails);
	 * the socket sends the record as a frame, followed by the bytes of
	 * @payload's OK slots (a commit_store), bounded by the client timeout
	 * restarted by progress. Return 0 or a fatal -errno. */
	int (*commit)(struct kvr_client *c, const struct kvr_xfer *payload);
	/* The next answer, without blocking: 1 (*r filled), 0 (none now) or
	 * a fatal -errno (a damaged ring, kvringd gone or saying BYE). */
	int (*receive)(struct kvr_client *c, struct kvr__rec *r);
	/* Wait, one slice at most, for an answer to arrive. Return 1
	 * (receive now), 0 (the slice ended: check liveness), -ETIMEDOUT
	 * (@deadline_ns passed) or a fatal -errno. */
	int (*wait)(struct kvr_client *c, uint64_t deadline_ns);
	/* Give the OK slots of the prepare answer received last (answer.c
	 * checked it; x->slots filled from it) their bytes: the pool, or
	 * private buffers (a retrieve's payload, which came with the
	 * answer). @x NULL: nobody wants them. Return 0, -ENOMEM (no
	 * buffers; nothing else changed) or a fatal -errno. */
	int (*slots)(struct kvr_client *c, struct kvr_xfer *x, uint32_t op,
		     const struct kvr_resp_hdr *h,
		     const struct kvr_slot_desc *sd);
	/* Release what the transport holds (the pool mapping, the socket's
	 * buffers). Never fails; runs once, from kvr__client_destroy(). */
	void (*close)(struct kvr_client *c);
};

extern const struct kvr__tport kvr__tport_ring;
extern const struct kvr__tport kvr__tport_sock;

/* ---- frame.c: the socket's wire, under both transports ---- */

/* One answer frame read whole: its record, and a retrieve's payload in
 * an arena laid out for the transfer's slots (kvr__frame_arena). */
struct kvr__frame_rx {
	struct kvr__frame_rx *next;
	void *arena;	/* the payload's buffers, NULL when none */
	int arena_rc;	/* -ENOMEM: no arena; the payload was skipped */
	uint32_t type;	/* the frame type (op | KVR_RESP_BIT) */
	uint32_t len;	/* record bytes in rec[] */
	uint64_t rec[]; /* the record (8-byte aligned) */
};

/* Send one frame: header, @len bytes of @rec and, @payload non-NULL,
 * the bytes of its OK slots, bounded by the client timeout (restarted by
 * progress) and the liveness checks. While the socket is full, answer
 * frames kvringd sends are read whole onto c->rx_head's queue, so two
 * full socket buffers cannot deadlock. Any failure breaks the client
 * (the stream would be out of step). Return 0 or a fatal -errno. */
int kvr__frame_send(struct kvr_client *c, uint32_t type, const void *rec,
		    size_t len, const struct kvr_xfer *payload);
/* Read one whole frame, bounded: BYE breaks the client (-EOWNERDEAD, it
 * is shutting down); with @answers, an answer frame is queued at
 * c->rx_tail with its payload; anything else breaks it (-EPROTO).
 * Return 0 or a fatal -errno. */
int kvr__frame_recv(struct kvr_client *c, bool answers);
/* Whether the socket has bytes (or a hang-up) to read now: 1 or 0. */
int kvr__frame_readable(const struct kvr_client *c);
/* An arena for the OK slots of @sd (@n of them), each 64-byte aligned,
 * behind @room zeroed bytes (a transfer's kept checksums). Return it
 * (NULL with *rc 0 when there is nothing to hold), or NULL with *rc
 * -ENOMEM. */
void *kvr__frame_arena(size_t room, const struct kvr_slot_desc *sd, uint32_t n,
		       int *rc);
/* Point @x's OK slots into @arena as kvr__frame_arena laid it out, and
 * give it to @x (x->priv, freed by kvr_xfer_free()). */
void kvr__frame_arena_give(struct kvr_xfer *x, void *arena, size_t room);
/* Free a frame read whole and its arena. */
void kvr__frame_rx_free(struct kvr__frame_rx *f);

/* ---- xfer_sum.c: per-chunk checksums (KVR_CHECKSUM_*) ---- */

/* The mode opts ask for ($KVRING_CHECKSUM when opts->checksum is 0):
 * KVR_CHECKSUM_*, or -EINVAL with the sentence in errbuf. */
int kvr__xfer_sum_mode(const struct kvr_client_opts *o, char *errbuf,
		       size_t errlen);
/* Request flags a prepare_retrieve adds: KVR_REQ_SUMS when summing. */
uint32_t kvr__xfer_sum_retrieve_flags(const struct kvr_client *c);
/* Fill s->words/n/flags of a commit_store (sums of the OK slots) or a
 * commit_retrieve (offsets of the CORRUPT slots); nothing when off.
 * Return 0 or -ENOMEM (message set). */
int kvr__xfer_sum_commit(struct kvr_client *c, struct kvr_xfer *x,
			 struct kvr__submit_req *s);
/* Keep a retrieve answer's sums (count of @sd) at the start of x->priv:
 * in the kvr__client_sum_room() bytes the transport reserved there, or (x->priv
 * NULL, the ring transport) in a block of their own. Return 0 or -ENOMEM
 * (then x keeps no sums). */
int kvr__xfer_sum_keep(struct kvr_xfer *x, const struct kvr_slot_desc *sd,
		       const uint64_t *sums, uint32_t n);
/* Check x's OK slots against the sums kept in x->priv (only call it for
 * an xfer of a checksumming client); returns the corrupt count,
 * *unchecked (may be NULL) the slots without a sum. */
long kvr__xfer_sum_verify(struct kvr_xfer *x, uint32_t *unchecked);
/* Keep @sum as the store sum of slot @i of a prepared store (what
 * kvr_xfer_fill() keeps): kvr_commit_store() sends it without reading
 * the slot. Only for a checksumming client; 0 or -ENOMEM. */
int kvr__xfer_sum_slot_set(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
			   uint64_t sum);
/* The sum slot @i of a retrieve answer came with: false when it has none
 * (stored without one, or a client that does not sum). */
bool kvr__xfer_sum_slot_get(const struct kvr_xfer *x, uint32_t i,
			    uint64_t *sum);

/* ---- kv.c: paged-KV copies (<kvring/kv.h>) ---- */

struct kvr_kv_cache;

/* Every check kvr_kv_scatter() makes before it copies (the descriptor,
 * nblocks, chunk_bytes, the chunks, the block ids, skip_blocks), copying
 * nothing: kv_xfer.c runs it once for a scatter it makes in pieces.
 * Return 0 or -EINVAL with the sentence in errbuf. */
int kvr__kv_check_args(const struct kvr_kv_cache *kv, const uint32_t *block_ids,
		       size_t nblocks, const void *const *chunks,
		       size_t nchunks, uint64_t chunk_bytes, size_t skip_blocks,
		       char *errbuf, size_t errlen);

#endif /* KVR_WORKER_CLIENT_H */
