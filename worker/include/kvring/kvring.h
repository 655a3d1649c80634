/* SPDX-License-Identifier: MIT */
/*
 * libkvring: the API an LLM inference worker links to store KV-cache chunks
 * in, and retrieve them from, a kvringd cache server on the same host.
 *
 * One struct kvr_client is one connection (one channel on the server). It
 * owns its mappings of the control segment and the pool, its doorbell fds
 * and its socket; kvr_close() releases all of it, and the server releases
 * everything the channel held (reservations, pins, leases) the moment the
 * socket hangs up, whether the worker closed cleanly or crashed.
 *
 * Every function returns 0 (or a count >= 0) on success and a negative
 * errno on failure (docs/errors.md); kvr_client_errmsg() gives the
 * failed call's full sentence. No function prints, exits or aborts.
 *
 * Threads: a client may be used from several threads; calls are serialised
 * by a mutex inside the client (docs/worker-guide.md), and a synchronous
 * call holds it while it waits. For parallel pipelines open one client
 * per thread, or use the asynchronous calls. A client must not be used in
 * a child created by fork(); the child may kvr_close() its copy (that
 * only drops the child's mappings and fds) and connect anew.
 *
 * Errors every call may return besides its own (docs/errors.md):
 *   -ETIMEDOUT   no answer within timeout_ms. The connection stays usable:
 *                the request stays in flight and whatever its late answer
 *                creates (a reservation, pin or lease) is undone by the
 *                library. If the server's heartbeat in the control segment
 *                is older than max(3 periods, 1 s) instead, the message
 *                says so and the client is broken (below).
 *   -EOWNERDEAD  kvringd closed the connection, died or restarted.
 *   -EPROTO/-EBADMSG  kvringd answered something this client never asked,
 *                or an answer failed validation (e.g. a slot outside the
 *                pool).
 *   -E2BIG       more keys than kvr_client_info()->max_keys.
 *   -EINVAL      NULL client/xfer/keys, or a transfer of the wrong kind.
 * After a fatal error (the last three groups, and the stale heartbeat) the
 * client is broken: every later call returns the same error at once,
 * pending asynchronous requests complete with it, and only kvr_close()
 * remains useful. Reconnect with kvr_close() + kvr_connect().
 */
#ifndef KVRING_KVRING_H
#define KVRING_KVRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvring/keys.h>
#include <kvring/proto.h>
#include <kvring/version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KVR_BUILDING_LIB)
#define KVR_API __attribute__((visibility("default")))
#else
#define KVR_API
#endif

struct kvr_client; /* opaque */

/* Connection options; zero-initialise and set what you need. */
struct kvr_client_opts {
	const char *socket_path; /* NULL: $KVRING_SOCKET, else the default */
	struct kvr_ns_desc ns;	 /* the model layout this worker registers */
	int transport;		 /* 0 auto (shm, else copy), or
				    KVR_TRANSPORT_COPY; $KVRING_TRANSPORT=copy
				    forces copy */
	uint32_t spin_us;	 /* spin before sleeping; 0: default 50 */
	uint32_t timeout_ms;	 /* bound on every blocking call; 0: 5000 */
	bool no_prefault;	 /* skip the pool pre-fault (tests only) */
	/* Additions (v0.2); the struct only ever grows at its end, see
	 * kvr_connect() and docs/compat.md. */
	uint32_t connect_wait_ms; /* wait up to this long for kvringd to
				     appear (socket missing or refusing);
				     0: $KVRING_CONNECT_WAIT_MS, else 0 */
	/* Pre-fault the pool in a background thread: kvr_connect returns
	 * at once, and stores into pages not yet touched take their page
	 * faults themselves meanwhile ($KVRING_PREFAULT=background sets
	 * it too; docs/config.md). No effect on huge pages: their attach
	 * is short, so it stays synchronous (except below a server that
	 * still zeroes its pool: then a thread follows its zeroing). */
	bool prefault_background;
	uint32_t trust_server_uid; /* also accept a kvringd running as this
				      uid (0: only our own uid and root);
				      $KVRING_SERVER_UID does the same */
	/* Additions (v0.3): per-chunk checksums, KVR_CHECKSUM_*. 0 takes
	 * $KVRING_CHECKSUM (off, on or verify), else off. */
	uint32_t checksum;
	/* Store-ahead (docs/storage.md), KVR_STORE_AHEAD_OFF or _ON; 0
	 * takes $KVRING_STORE_AHEAD (0 or 1), else off. Ring transport
	 * only: under the copy transport it stays off. */
	uint32_t store_ahead;
};

#define KVR_STORE_AHEAD_OFF                                                    \
	1u		      /* explicitly off ($KVRING_STORE_AHEAD ignored) */
#define KVR_STORE_AHEAD_ON 2u /* one round trip per one-key store */

/*
 * Per-chunk checksums (docs/reliability.md, "Checksums"). Off by default.
 * With ON, the library computes the XXH3-64 of every slot it commits and
 * sends it in the commit; kvringd keeps it with the object and hands it
 * back in retrieve answers, and kvr_verify_retrieve() checks a retrieve's
 * bytes against it. VERIFY also runs that check on every retrieve answer
 * before the caller sees the slots. A slot that fails gets the status
 * KVR_SLOT_CORRUPT; kvr_commit_retrieve() reports it and kvringd, after
 * checking the bytes itself, drops the object and counts it. The same
 * holds under the copy transport (protocol 5): the sums are of the
 * worker's private buffers and travel in the commit frame, and the bytes
 * read back into them are checked (the server's pool may still be shared
 * with ring workers that can write it).
 */
#define KVR_CHECKSUM_OFF    1u /* explicitly off ($KVRING_CHECKSUM ignored) */
#define KVR_CHECKSUM_ON	    2u /* sum at commit; verify on request */
#define KVR_CHECKSUM_VERIFY 3u /* sum at commit; verify every retrieve */

/* Filled in by kvr_connect(); stable for the client's life. */
struct kvr_client_info {
	uint32_t transport; /* enum kvr_transport */
	uint32_t channel;
	uint64_t pool_bytes;
	uint32_t align;
	uint32_t max_keys;
	uint8_t boot_id[16];
	char pool_name[64];
	uint64_t attach_ns; /* time to map and pre-fault the pool */
	/* Additions (v0.1): */
	int32_t server_pid;    /* kvringd's pid (SO_PEERCRED at connect) */
	uint32_t heartbeat_ms; /* server heartbeat period */
	uint64_t prefault_ns;  /* of attach_ns: the pool pre-fault alone */
	/* One line for the worker's own log, e.g. "transport shm, pool
	 * kvring-0.pool 1073741824 bytes, channel 2, attach 85.1 ms (prefault
	 * 84.7 ms), kvringd pid 4242". The library never prints it. */
	char debug[256];
	/* Additions (v0.3): KVR_CHECKSUM_OFF, _ON or _VERIFY, the mode in
	 * effect (opts.checksum, else $KVRING_CHECKSUM), so that a layer on
	 * top (the Python torch context, the vLLM connector) can verify
	 * under _ON without parsing the environment again. */
	uint32_t checksum;
	/* Whether store-ahead is in effect (opts.store_ahead, else
	 * $KVRING_STORE_AHEAD, and the ring transport). */
	bool store_ahead;
};

/*
 * kvr_prefault_status - whether the pool pre-fault has finished. With
 * @wait, blocks until it has (a background pre-fault, or the thread that
 * follows a huge-page pool the server is still zeroing; otherwise it
 * finished inside kvr_connect). *@prefault_ns (may be NULL) gets its time.
 * Return: 0 finished (or never ran: copy transport, no_prefault);
 * -EINPROGRESS still running (only without @wait); -EINVAL NULL client.
 */
KVR_API int kvr_prefault_status(struct kvr_client *c, bool wait,
				uint64_t *prefault_ns);

/* The default socket path for this uid: kvringd.sock in the runtime
 * directory, $XDG_RUNTIME_DIR/kvring, else /run/kvring/<uid>, else
 * /tmp/kvring-<uid> (docs/config.md). */
KVR_API int kvr_default_socket(char *buf, size_t n);

/*
 * kvr_connect - connect to kvringd, register the model layout, attach.
 * Before it sends anything it checks who the server is (SO_PEERCRED): a
 * kvringd of another uid could read every chunk and hand back any bytes,
 * so only our own uid, root, and opts->trust_server_uid or
 * $KVRING_SERVER_UID are accepted.
 * Return: 0 and *out set, or
 *   -ENOENT/-ECONNREFUSED  no server at the socket path
 *   -EPROTO                the server speaks another protocol version
 *   -EACCES                the server refused this uid/gid, or the server
 *                          runs as a uid we do not trust (the message
 *                          names both uids)
 *   -EBUSY                 the server has no free channel
 *   -EINVAL                bad options (namespace)
 * kvr_client_errmsg(NULL) is not available on failure: pass errbuf to get
 * the reason.
 */
KVR_API int kvr_connect(const struct kvr_client_opts *o,
			struct kvr_client **out, char *errbuf, size_t errlen);

/*
 * kvr_connect_sized - kvr_connect() for a caller that says how big its
 * struct kvr_client_opts is (opts_size = sizeof(struct kvr_client_opts) as
 * that caller's header defined it). The options struct grows only at its
 * end, so the library reads the first opts_size bytes and takes every field
 * past them as 0; a caller compiled against a newer header may pass a larger
 * struct as long as the fields this library does not know are all 0 (else
 * -E2BIG, and errbuf names the library version). kvr_connect() itself reads
 * the v0.1 prefix (every field up to no_prefault), which is what binaries
 * built against 0.1 pass. The macro below makes every kvr_connect() call
 * compiled against this header pass its own sizeof, so new fields work
 * without any change to callers (zlib's deflateInit() does the same).
 * Bindings that cannot use the macro (Python's ctypes) call this directly.
 */
KVR_API int kvr_connect_sized(const struct kvr_client_opts *o, size_t opts_size,
			      struct kvr_client **out, char *errbuf,
			      size_t errlen);
#define kvr_connect(o, out, errbuf, errlen)                                    \
	kvr_connect_sized((o), sizeof(struct kvr_client_opts), (out),          \
			  (errbuf), (errlen))

/*
 * kvr_version / kvr_version_number - the version of the libkvring that is
 * loaded ("0.2.0" / 0x000200), which may be newer than the KVR_VERSION_*
 * macros of the header the program was compiled with. Never fail.
 */
KVR_API const char *kvr_version(void);
KVR_API int kvr_version_number(void);

/*
 * kvr_strerror - kvr's wording for a return code (docs/errors.md), e.g.
 * kvr_strerror(-ENOSPC) is "chunk pool is full"; codes kvr gives no meaning
 * fall back to the C library's text. Thread-safe, never NULL. For the
 * sentence about one failed call (which lease, which limit), use
 * kvr_client_errmsg().
 */
KVR_API const char *kvr_strerror(int rc);

/*
 * kvr_close - release the connection and everything the server holds for
 * it. Idempotent on the same pointer value is impossible in C, so:
 * kvr_close(NULL) is a no-op, and kvr_close() works (returns) whether the
 * server is alive, dead or gone. It sends BYE without blocking (best
 * effort), closes the socket and doorbell fds and unmaps both segments;
 * it never waits for the server. Pointers handed out by slots die here;
 * the slot arrays of transfers not yet committed stay allocated until the
 * caller passes each such xfer to kvr_xfer_free().
 */
KVR_API void kvr_close(struct kvr_client *c);

KVR_API const struct kvr_client_info *
kvr_client_info(const struct kvr_client *c);

/*
 * kvr_client_errmsg - the sentence about the call on this client that just
 * returned an error ("lease 123 is unknown or expired: ..."), or "" when
 * that call succeeded: every call clears it first. Once the client is
 * broken it keeps the sentence of the fatal error that every later call
 * returns. Several threads sharing one client share this text too: read
 * it before another thread makes a call, or use kvr_strerror(rc).
 * The text stays valid until the next call on this client.
 */
KVR_API const char *kvr_client_errmsg(const struct kvr_client *c);

/* Keys for this client's namespace (see <kvring/keys.h>): one per full
 * chunk of tokens, at most max_keys. Needs no lock and no server. */
KVR_API long kvr_client_keys(const struct kvr_client *c, const uint32_t *tokens,
			     size_t ntokens, struct kvr_key *out,
			     size_t max_keys);

/* A slot handed back by prepare_store / prepare_retrieve. */
struct kvr_slot {
	void *ptr;    /* store: write len bytes here; retrieve: read them */
	uint64_t len; /* bytes */
	uint64_t off; /* offset in the pool (for GPU DMA registration) */
	int status;   /* enum kvr_slot_status */
};

/* A transfer in progress: filled by the prepare calls, consumed by
 * commit/abort. Owns the slot array (and copy-transport buffers). The
 * prepare calls initialise it (its old contents are overwritten, so free a
 * previous transfer first). Under the shared-memory transports slot ptrs
 * point into the mapped pool; under the copy transport into a private
 * buffer whose bytes travel on commit (store) or arrived with the answer
 * (retrieve). */
struct kvr_xfer {
	uint64_t id; /* server transfer id (0: nothing to commit) */
	uint32_t nslots;
	uint32_t op;		/* KVR_OP_PREPARE_STORE or _RETRIEVE */
	struct kvr_slot *slots; /* nslots entries, owned by the library */
	void *priv;		/* library-private */
};

/* ---- Synchronous calls (each waits for its answer, bounded) ---- */

/*
 * kvr_lookup - how many leading keys are stored.
 * @lease_out: non-NULL pins the hit prefix under a new lease (0 if no hit).
 * Return: hits (>= 0) or -errno.
 */
KVR_API long kvr_lookup(struct kvr_client *c, const struct kvr_key *keys,
			uint32_t n, uint64_t *lease_out);

/*
 * kvr_lookup_l2 - kvr_lookup() that reads through kvringd's L2 tier
 * (docs/l2.md): keys missing locally but present in Redis are loaded into
 * the pool, verified and published, and the answer counts them. The call
 * waits at most the server's --l2-deadline-ms (plus the round trip); past
 * it the answer is what is loaded so far and *pending_out (may be NULL)
 * is true: loads are still running, asking again soon may find more.
 * Without --l2 on the server it is exactly kvr_lookup().
 * Return: hits (>= 0) or -errno, as kvr_lookup().
 */
KVR_API long kvr_lookup_l2(struct kvr_client *c, const struct kvr_key *keys,
			   uint32_t n, uint64_t *lease_out, bool *pending_out);

/* kvr_release - drop a lease. -ENOENT if unknown or expired. */
KVR_API int kvr_release(struct kvr_client *c, uint64_t lease);

/*
 * kvr_prepare_store - reserve a slot for every key not yet stored.
 * sizes[i] is the byte size of chunk i. On success x->slots[i] tells per
 * key: KVR_SLOT_OK (write x->slots[i].len bytes at ptr), KVR_SLOT_EXISTS,
 * KVR_SLOT_NOROOM, KVR_SLOT_BUSY, KVR_SLOT_INVALID. Then call
 * kvr_commit_store() (or kvr_abort_store()) exactly once.
 */
KVR_API int kvr_prepare_store(struct kvr_client *c, const struct kvr_key *keys,
			      const uint64_t *sizes, uint32_t n,
			      struct kvr_xfer *x);
/*
 * kvr_commit_store / kvr_abort_store - publish (or free) the transfer's
 * reservations. The xfer's memory is released whatever the outcome. A
 * transfer with nothing reserved (x->id 0: every key EXISTS) completes at
 * once without talking to the server, so storing a prompt twice always
 * succeeds. Under store-ahead a one-key prepare is answered before the
 * library knows whether the key is stored; when it was, the commit
 * returns 0, stores nothing, and kvr_client_errmsg() says "stored
 * already". Return 0, or -ENOENT if the server no longer knows the
 * transfer, or the errors listed at the top.
 */
KVR_API int kvr_commit_store(struct kvr_client *c, struct kvr_xfer *x);
KVR_API int kvr_abort_store(struct kvr_client *c, struct kvr_xfer *x);

/*
 * kvr_prepare_retrieve - pin the longest stored prefix of keys; slots for
 * that prefix are readable until kvr_commit_retrieve(). x->nslots is the
 * prefix length (0: nothing stored). kvr_prepare_retrieve_lease() redeems a
 * lease made by any connection of the same uid.
 * The pinned prefix is cut where this connection's pins would pass
 * kvringd's --quota-pinned. Pins count per owner: chunks it already holds
 * under a lease (a lookup with pin) count again when retrieved by keys,
 * so redeem the lease instead. When the quota cut the prefix the call
 * still succeeds with fewer slots, and kvr_client_errmsg() says so (this
 * synchronous call; an async completion gets only the fewer slots).
 */
KVR_API int kvr_prepare_retrieve(struct kvr_client *c,
				 const struct kvr_key *keys, uint32_t n,
				 struct kvr_xfer *x);
KVR_API int kvr_prepare_retrieve_lease(struct kvr_client *c, uint64_t lease,
				       struct kvr_xfer *x);
/* kvr_commit_retrieve - unpin; the slots must not be read afterwards. The
 * xfer's memory is released whatever the outcome; x->id 0 is a no-op. */
KVR_API int kvr_commit_retrieve(struct kvr_client *c, struct kvr_xfer *x);

/*
 * kvr_verify_retrieve - check each KVR_SLOT_OK slot of a prepared retrieve
 * against the XXH3-64 sum its storer sent at commit. A slot whose bytes
 * differ gets status KVR_SLOT_CORRUPT (do not use its bytes; the slot is
 * still pinned until commit), and kvr_commit_retrieve() reports it so
 * that kvringd drops the object: later lookups miss it and it can be
 * stored anew. A slot already CORRUPT stays so and is counted again
 * without being re-read, so a second call gives the same answer and the
 * report is sent once. Slots whose object was stored without a sum (by a
 * client without checksums) cannot be checked and stay OK; *@unchecked
 * (may be NULL) gets their number. Under KVR_CHECKSUM_VERIFY the library
 * has already run it when the retrieve answer arrived.
 * Return: the number of corrupt slots (>= 0), or -EINVAL (NULL args, not
 * a retrieve transfer), -ENODATA (this client was connected without
 * checksums: no sums to check against).
 */
KVR_API long kvr_verify_retrieve(struct kvr_client *c, struct kvr_xfer *x,
				 uint32_t *unchecked);

/*
 * kvr_xfer_fill - copy slot @i's len bytes from @src into it (a prepared
 * store's KVR_SLOT_OK slot), the way to fill a whole slot from one
 * buffer. With checksums on, the XXH3-64 is computed while copying, in
 * cache-sized pieces (one pass over memory instead of a copy and then a
 * hash at commit), and kvr_commit_store() sends it without reading the
 * slot again: do not write the slot after filling it, or its sum is of
 * the old bytes and every checking reader finds the chunk corrupt. With
 * checksums off it is a memcpy. @src must not overlap the slot.
 * Return: 0, or -EINVAL (NULL args, not a prepared store, @i out of
 * range or not an OK slot; nothing written).
 */
KVR_API int kvr_xfer_fill(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
			  const void *src);
/* The name kvr_xfer_fill had before 0.3.0, kept for programs built
 * against it: the same call. */
KVR_API int kvr_store_fill(struct kvr_client *c, struct kvr_xfer *x, uint32_t i,
			   const void *src);

/*
 * kvr_retrieve_copy - copy slot @i of a prepared retrieve (len bytes) to
 * @dst, the way to read a whole slot out. Under KVR_CHECKSUM_ON it checks
 * the slot's sum while copying, in cache-sized pieces (one pass over
 * memory instead of a kvr_verify_retrieve() pass and then the copy): a
 * slot whose bytes differ becomes KVR_SLOT_CORRUPT, exactly as verify
 * would mark it (do not use @dst then; kvr_commit_retrieve() reports it).
 * Under KVR_CHECKSUM_VERIFY the slot was checked on arrival, and with
 * checksums off there is nothing to check: a memcpy either way. A slot
 * stored without a sum is copied unchecked. @dst must not overlap it.
 * Return: 0 (copied; checked when it had a sum), 1 (copied, and found
 * corrupt now), or -EINVAL (NULL args, not a prepared retrieve, @i out
 * of range, or the slot is already KVR_SLOT_CORRUPT; nothing copied).
 */
KVR_API int kvr_retrieve_copy(struct kvr_client *c, struct kvr_xfer *x,
			      uint32_t i, void *dst);

/* Frees what a kvr_xfer holds without talking to the server (after
 * commit/abort it is already freed; safe to call twice). A store-ahead
 * xfer freed so is given back at the client's next store call. */
KVR_API void kvr_xfer_free(struct kvr_xfer *x);

/* Round trip with no effect; *server_ns gets the server's clock. */
KVR_API int kvr_ping(struct kvr_client *c, uint64_t *server_ns);
KVR_API int kvr_stats(struct kvr_client *c, struct kvr_stats_wire *out);

/* ---- Asynchronous calls: submit several, then reap completions ---- */

/* One completion: the answer to one submitted request. */
struct kvr_completion {
	void *user;	       /* the caller data given at submit */
	uint32_t op;	       /* enum kvr_op */
	int status;	       /* 0 or -errno */
	long value;	       /* lookup hits */
	uint64_t handle;       /* lease id (lookup with pin) */
	struct kvr_xfer *xfer; /* prepare/commit ops: the caller's xfer */
	uint32_t flags;	       /* KVR_COMPLETION_* */
};

/* A lookup read through L2 answered at its deadline while loads for keys
 * past `value` were still in flight: ask again soon (vLLM's "ask again",
 * None from get_num_new_matched_tokens). */
#define KVR_COMPLETION_L2_PENDING 0x1u

/*
 * kvr_submit_* - queue a request without waiting. The answer arrives as a
 * completion carrying @user. keys/sizes are copied at submit; x must stay
 * valid until its completion is reaped. Return 0, -EAGAIN when the request
 * ring is full (reap completions and retry), or -errno.
 */
KVR_API int kvr_submit_lookup(struct kvr_client *c, const struct kvr_key *keys,
			      uint32_t n, bool pin, void *user);
/* kvr_submit_lookup_l2 - kvr_submit_lookup() reading through L2 (see
 * kvr_lookup_l2); the completion's flags carry KVR_COMPLETION_L2_PENDING. */
KVR_API int kvr_submit_lookup_l2(struct kvr_client *c,
				 const struct kvr_key *keys, uint32_t n,
				 bool pin, void *user);
KVR_API int kvr_submit_prepare_store(struct kvr_client *c,
				     const struct kvr_key *keys,
				     const uint64_t *sizes, uint32_t n,
				     struct kvr_xfer *x, void *user);
KVR_API int kvr_submit_commit_store(struct kvr_client *c, struct kvr_xfer *x,
				    void *user);
KVR_API int kvr_submit_abort_store(struct kvr_client *c, struct kvr_xfer *x,
				   void *user);
KVR_API int kvr_submit_prepare_retrieve(struct kvr_client *c,
					const struct kvr_key *keys, uint32_t n,
					struct kvr_xfer *x, void *user);
KVR_API int kvr_submit_commit_retrieve(struct kvr_client *c, struct kvr_xfer *x,
				       void *user);
KVR_API int kvr_submit_ping(struct kvr_client *c, void *user);

/*
 * kvr_reap - collect up to max completions. Waits until at least min_wait
 * are available or timeout_ms passes (0: do not wait; -1: the client's
 * timeout); min_wait is capped at what is in flight, so it never waits
 * for requests that were not submitted. Completions of commit/abort ops
 * carry an xfer whose memory is already released; completions of prepare
 * ops carry the filled xfer. Return the number reaped (>= 0), -ETIMEDOUT
 * if min_wait > 0 and none arrived in time (not fatal), or the client's
 * fatal error once every pending request has been reaped.
 */
KVR_API int kvr_reap(struct kvr_client *c, struct kvr_completion *out,
		     unsigned max, unsigned min_wait, int timeout_ms);

/* Requests submitted and not yet reaped. */
KVR_API unsigned kvr_inflight(const struct kvr_client *c);

/*
 * kvr_submit_hold - batch the publishing of async requests. Until
 * kvr_submit_flush(), each kvr_submit_* call writes its request into the
 * request ring but does not make it visible to kvringd; the next
 * kvr_submit_flush(), kvr_reap() or synchronous call (anything that
 * waits for an answer) publishes every held request at once, with one
 * release store and at most one doorbell write, and a full request ring
 * publishes them too. Under the copy transport requests are sent at once
 * as before. The hold lasts until kvr_submit_flush(). Return 0, or
 * -EINVAL if @c is NULL.
 */
KVR_API int kvr_submit_hold(struct kvr_client *c);
/*
 * kvr_submit_flush - publish every held request now and end the hold
 * (harmless without one). Return 0, -EINVAL if @c is NULL, or the
 * client's fatal error (its requests then complete with it at reap).
 */
KVR_API int kvr_submit_flush(struct kvr_client *c);

#ifdef __cplusplus
}
#endif
#endif /* KVRING_KVRING_H */
