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
 * errno on failure (docs/errors.md); kvr_client_errmsg() gives the last
 * failure's full sentence. No function prints, exits or aborts.
 *
 * Threads: a client may be used from several threads; calls are serialised
 * by a mutex inside the client (docs/worker-guide.md). For parallel
 * pipelines open one client per thread.
 */
#ifndef KVRING_KVRING_H
#define KVRING_KVRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvring/keys.h>
#include <kvring/proto.h>

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
};

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
};

/* The default socket path for this uid: /run/kvring/<uid>.sock when
 * /run/kvring is writable, else /tmp/kvring-<uid>.sock (docs/config.md). */
KVR_API int kvr_default_socket(char *buf, size_t n);

/*
 * kvr_connect - connect to kvringd, register the model layout, attach.
 * Return: 0 and *out set, or
 *   -ENOENT/-ECONNREFUSED  no server at the socket path
 *   -EPROTO                the server speaks another protocol version
 *   -EACCES                the server refused this uid/gid
 *   -EBUSY                 the server has no free channel
 *   -EINVAL                bad options (namespace)
 * kvr_client_errmsg(NULL) is not available on failure: pass errbuf to get
 * the reason.
 */
KVR_API int kvr_connect(const struct kvr_client_opts *o, struct kvr_client **out,
			char *errbuf, size_t errlen);

/*
 * kvr_close - release the connection and everything the server holds for
 * it. Idempotent on the same pointer value is impossible in C, so:
 * kvr_close(NULL) is a no-op, and kvr_close() works (returns) whether the
 * server is alive, dead or gone. Pointers handed out by slots die here.
 */
KVR_API void kvr_close(struct kvr_client *c);

KVR_API const struct kvr_client_info *kvr_client_info(const struct kvr_client *c);

/* The last failure's sentence for this client ("" if none). */
KVR_API const char *kvr_client_errmsg(const struct kvr_client *c);

/* Keys for this client's namespace (see <kvring/keys.h>). */
KVR_API long kvr_client_keys(const struct kvr_client *c, const uint32_t *tokens,
			     size_t ntokens, struct kvr_key *out, size_t max_keys);

/* A slot handed back by prepare_store / prepare_retrieve. */
struct kvr_slot {
	void *ptr;	/* store: write len bytes here; retrieve: read them */
	uint64_t len;	/* bytes */
	uint64_t off;	/* offset in the pool (for GPU DMA registration) */
	int status;	/* enum kvr_slot_status */
};

/* A transfer in progress: filled by the prepare calls, consumed by
 * commit/abort. Owns the slot array (and copy-transport buffers). */
struct kvr_xfer {
	uint64_t id;		/* server transfer id (0: nothing to commit) */
	uint32_t nslots;
	uint32_t op;		/* KVR_OP_PREPARE_STORE or _RETRIEVE */
	struct kvr_slot *slots;	/* nslots entries, owned by the library */
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
KVR_API int kvr_commit_store(struct kvr_client *c, struct kvr_xfer *x);
KVR_API int kvr_abort_store(struct kvr_client *c, struct kvr_xfer *x);

/*
 * kvr_prepare_retrieve - pin the longest stored prefix of keys; slots for
 * that prefix are readable until kvr_commit_retrieve(). x->nslots is the
 * prefix length (0: nothing stored). kvr_prepare_retrieve_lease() redeems a
 * lease made by any connection of the same uid.
 */
KVR_API int kvr_prepare_retrieve(struct kvr_client *c, const struct kvr_key *keys,
				 uint32_t n, struct kvr_xfer *x);
KVR_API int kvr_prepare_retrieve_lease(struct kvr_client *c, uint64_t lease,
				       struct kvr_xfer *x);
KVR_API int kvr_commit_retrieve(struct kvr_client *c, struct kvr_xfer *x);

/* Frees what a kvr_xfer holds without talking to the server (after
 * commit/abort it is already freed; safe to call twice). */
KVR_API void kvr_xfer_free(struct kvr_xfer *x);

/* Round trip with no effect; *server_ns gets the server's clock. */
KVR_API int kvr_ping(struct kvr_client *c, uint64_t *server_ns);
KVR_API int kvr_stats(struct kvr_client *c, struct kvr_stats_wire *out);

/* ---- Asynchronous calls: submit several, then reap completions ---- */

/* One completion: the answer to one submitted request. */
struct kvr_completion {
	void *user;	  /* the caller data given at submit */
	uint32_t op;	  /* enum kvr_op */
	int status;	  /* 0 or -errno */
	long value;	  /* lookup hits */
	uint64_t handle;  /* lease id (lookup with pin) */
	struct kvr_xfer *xfer; /* prepare/commit ops: the caller's xfer */
};

/*
 * kvr_submit_* - queue a request without waiting. The answer arrives as a
 * completion carrying @user. keys/sizes are copied at submit; x must stay
 * valid until its completion is reaped. Return 0, -EAGAIN when the request
 * ring is full (reap completions and retry), or -errno.
 */
KVR_API int kvr_submit_lookup(struct kvr_client *c, const struct kvr_key *keys,
			      uint32_t n, bool pin, void *user);
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
KVR_API int kvr_submit_commit_retrieve(struct kvr_client *c,
				       struct kvr_xfer *x, void *user);
KVR_API int kvr_submit_ping(struct kvr_client *c, void *user);

/*
 * kvr_reap - collect up to max completions. Waits until at least min_wait
 * are available or timeout_ms passes (0: do not wait; -1: the client's
 * timeout). Return the number reaped (>= 0) or -errno (-ETIMEDOUT,
 * -EOWNERDEAD when the server died).
 */
KVR_API int kvr_reap(struct kvr_client *c, struct kvr_completion *out,
		     unsigned max, unsigned min_wait, int timeout_ms);

/* Requests submitted and not yet reaped. */
KVR_API unsigned kvr_inflight(const struct kvr_client *c);

#ifdef __cplusplus
}
#endif
#endif /* KVRING_KVRING_H */
