/* SPDX-License-Identifier: MIT */
/*
 * store.h - kvringd's storage engine: objects and their states, owned pins,
 * leases, store/retrieve transfers, LRU eviction and accounting, on top of
 * the pool allocator (alloc.h) and the key index (index.h).
 *
 * Pure in-process logic: no I/O, no system calls, no clock reads (every
 * call takes the caller's now_ns), no logging. It never touches the pool's
 * bytes; it only decides who may write or read which (off, len).
 *
 * Threading (DESIGN.md rule 3): a struct kvr_store is owned by ONE thread,
 * kvringd's event loop, which is the only caller of every function below.
 * There is no lock because there is no second thread; the pending-transfer
 * tables therefore cannot race. Do not call it from a helper thread: every
 * entry point asserts (kvr_assert, on in release builds) that it runs on
 * the thread that called kvr_store_create(), and aborts otherwise.
 *
 * Conventions: every call validates its arguments and is all-or-nothing:
 * on a negative return nothing changed and outputs are untouched. Per-key
 * statuses of prepare_store (exists, busy, no room, invalid size) are
 * normal outcomes, not errors. Channel ids are < cfg.max_channels (the
 * event loop uses its channel index). Ids of transfers and leases are
 * server-issued, never 0, never reused; 0 means "none".
 * The state machine, limits and error codes are in docs/storage.md.
 *
 * Implementation: server/store/store.c (the requests below) with store_mem.c
 * (create/destroy, memory reservation), store_owner.c (leases, transfers,
 * pins), store_chan.c (channels), store_quar.c (the quarantine),
 * store_lru.c (eviction) and store_audit.c, sharing the private header
 * store_int.h. Include only this header from outside them.
 */
#ifndef KVR_SERVER_STORE_H
#define KVR_SERVER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvring/proto.h> /* struct kvr_key, struct kvr_slot_desc */

/* Defaults for fields of struct kvr_store_config left at 0. */
#define KVR_STORE_DEF_ALIGN	    4096u
#define KVR_STORE_DEF_LEASE_MS	    10000u
#define KVR_STORE_DEF_MAX_CHANNELS  256u
#define KVR_STORE_DEF_MAX_KEYS	    KVR_MAX_KEYS_LIMIT
#define KVR_STORE_DEF_MAX_XFERS	    64u
#define KVR_STORE_DEF_MAX_LEASES    256u
#define KVR_STORE_DEF_EVICT_PER_KEY 1024u
#define KVR_STORE_DEF_XFER_MS	    30000u
#define KVR_STORE_DEF_MAX_NS	    1024u
/* Transfer ids a channel remembers after their deadline reclaimed them,
 * so that a late commit answers KVR_ERR_EXPIRED instead of -ENOENT. */
#define KVR_STORE_EXPIRED_MEMORY 16u

/* Creation parameters. Zero fields take the defaults above. */
struct kvr_store_config {
	uint64_t pool_bytes;	      /* required: size of the pool */
	uint32_t align;		      /* slot alignment, power of two >= 64 */
	uint32_t lease_ms;	      /* lease lifetime */
	uint32_t max_channels;	      /* channel ids are 0..max_channels-1 */
	uint32_t max_keys;	      /* per request; -E2BIG above */
	uint32_t max_xfers_per_chan;  /* open transfers; -EBUSY above */
	uint32_t max_leases_per_chan; /* live leases; -EBUSY above */
	uint32_t max_evict_per_key;   /* eviction work bound, see docs */
	uint32_t reserved;	      /* must be 0 */
	uint64_t objects_hint;	      /* expected object count, pre-sizes */
	uint64_t hash_seed;	      /* per-server secret (getrandom) */
	/* Isolation (docs/storage.md, "Quotas and deadlines"). */
	uint64_t quota_reserved_bytes; /* per channel, rounded; 0 = none */
	uint64_t quota_pinned_bytes;   /* per channel, rounded; 0 = none */
	uint64_t max_key_bytes;	       /* per key; 0 = the pool */
	/* Per uid, summed over every opened channel of that uid (channels
	 * never opened, and trusted ones, are exempt); 0 = none. */
	uint64_t quota_uid_reserved_bytes;
	uint64_t quota_uid_pinned_bytes;
	uint32_t xfer_ms;   /* open transfer's lifetime */
	uint32_t max_ns;    /* namespace ids are < max_ns */
	uint32_t id_key[4]; /* id cipher key (getrandom); 0 =
			       derived from hash_seed (tests) */
};

/* Global counters; the control segment's stats block mirrors them. */
struct kvr_store_stats {
	uint64_t pool_bytes;	  /* managed bytes (rounded down to align) */
	uint64_t used_bytes;	  /* reserved + committed (rounded) */
	uint64_t committed_bytes; /* rounded sizes of committed objects */
	uint64_t reserved_bytes;  /* rounded sizes of reserved objects */
	uint64_t free_bytes;
	uint64_t largest_free_bytes;
	uint64_t free_extents;
	double fragmentation; /* 1 - largest_free / free */
	uint64_t objects;     /* committed objects */
	uint64_t reserved_objects;
	uint64_t pinned_objects; /* committed objects with >= 1 pin */
	uint64_t pinned_bytes;	 /* their rounded sizes */
	uint64_t pins;		 /* sum of pin counts = (owner, object) pairs */
	uint64_t leases;	 /* live leases */
	uint64_t transfers;	 /* open store + retrieve transfers */
	/* Monotonic event counters. */
	uint64_t lookups, lookup_keys, lookup_hits;
	uint64_t lookup_hit_bytes;	  /* requested bytes of the hits */
	uint64_t stores_reserved;	  /* keys answered KVR_SLOT_OK */
	uint64_t stores_skipped_existing; /* keys answered KVR_SLOT_EXISTS */
	uint64_t stores_busy;		  /* keys answered KVR_SLOT_BUSY */
	uint64_t no_room;		  /* keys answered KVR_SLOT_NOROOM */
	uint64_t invalid_sizes;		  /* keys answered KVR_SLOT_INVALID */
	uint64_t commits, aborts;	  /* store transfers */
	uint64_t retrieves, retrieve_commits;
	uint64_t evictions, evicted_bytes;
	/* Of those, objects without a copy in L2 (only the L2 tier's
	 * --l2-upload evict mode marks copies: store_l2.c). */
	uint64_t l2_unsaved_evictions;
	/* Of those, objects without a copy on the disk tier (marked by
	 * store_disk.c). */
	uint64_t disk_unsaved_evictions;
	/* Keys answered KVR_SLOT_NOROOM by the disk guard: every victim
	 * eviction could take had no copy on disk yet (kvr_store_disk_guard;
	 * counted in no_room too). */
	uint64_t disk_held;
	/* Of those, the objects of a namespace freed for another model. */
	uint64_t ns_evictions, ns_evicted_bytes;
	uint64_t leases_created, leases_released, leases_redeemed;
	uint64_t leases_expired;
	uint64_t channel_closes;
	uint64_t quota_denied;	      /* keys answered KVR_SLOT_QUOTA, and
					 pins refused by the pin quota */
	uint64_t xfers_expired;	      /* transfers reclaimed at deadline */
	uint64_t store_xfers_expired; /* of which store transfers */
	uint64_t corrupt_dropped;     /* objects kvr_store_drop_corrupt()
					 took out of the cache */
	/* Store-ahead (store_stage.c): slots staged (each also counts in
	 * stores_reserved), binds that re-keyed one, and binds whose key
	 * was stored already (the staged slot stayed staged). */
	uint64_t stages, binds, binds_existing;
	uint64_t staged; /* staged slots held now, all channels */
	/* Quarantine (docs/storage.md, "Quarantine"): transfers whose
	 * deadline reclaimed them while their worker may still copy, with
	 * their objects (reservations and pins) and rounded bytes, now;
	 * transfers put there since start; and how many left it, by why:
	 * [0] the worker answered (a late commit or abort), [1] its process
	 * was gone when its channel closed, [2] it closed its channel and its
	 * process exited later. Channels detached now: closed, their process
	 * alive, holding only quarantine. */
	uint64_t quar_xfers, quar_slots, quar_bytes;
	uint64_t quar_reclaimed;
	uint64_t quar_released[3];
	uint64_t detached;
};

/* What one channel holds right now. */
struct kvr_store_chan_stats {
	uint64_t reserved_bytes; /* rounded, in its open store transfers */
	uint64_t reserved_objects;
	uint64_t pins_held; /* pins of its leases + retrieve transfers */
	uint32_t leases_owned;
	uint32_t transfers_open; /* store + retrieve */
	uint64_t pinned_bytes;	 /* rounded bytes its pins hold (a pin per
				    owner and object, as pins_held) */
	uint64_t oldest_ns;	 /* creation time of its oldest open
				    transfer or lease; 0 when none */
	uint64_t quota_denied;	 /* keys and pins its quotas refused */
	uint64_t xfers_expired;	 /* its transfers reclaimed at deadline */
	/* Store-ahead, since the channel opened: staged slots held now,
	 * slots staged, binds, binds that found the key stored. */
	uint64_t staged, stages, binds, binds_existing;
	/* Quarantine held now: transfers, objects, rounded bytes (the
	 * objects and bytes also count in reserved_* and pins_held /
	 * pinned_bytes above, against the channel's quotas). */
	uint32_t quar_xfers;
	uint64_t quar_slots, quar_bytes;
};

/* What all channels of one uid hold together (kvr_store_uid_stats). */
struct kvr_store_uid_stats {
	uint32_t slot; /* 0..max_channels-1, stable while used */
	uint32_t uid;
	uint32_t channels; /* opened channels of this uid; 0: unused */
	uint32_t pad;
	uint64_t reserved_bytes; /* rounded, against quota_uid_reserved */
	uint64_t pinned_bytes;	 /* rounded, against quota_uid_pinned */
	uint64_t quota_denied;	 /* keys and pins the uid quotas refused */
};

/* What kvr_store_channel_close() released. */
struct kvr_store_released {
	uint64_t store_xfers;	 /* aborted store transfers */
	uint64_t retrieve_xfers; /* dropped retrieve transfers */
	uint64_t leases;	 /* dropped leases */
	uint64_t objects_freed;	 /* reservations freed, never published */
	uint64_t bytes_freed;	 /* their rounded bytes */
	uint64_t pins_dropped;
	uint64_t quar_xfers; /* quarantined transfers released */
	uint64_t quar_bytes; /* their rounded bytes */
	uint64_t quar_kept;  /* detach: quarantined transfers kept */
};

/* Opaque: created and destroyed here, owned by the event-loop thread. */
struct kvr_store;

/*
 * kvr_store_create - an empty store over a pool of cfg->pool_bytes.
 * Return: 0 and *out, -EINVAL (NULL args, pool_bytes smaller than one unit,
 * align not a power of two >= 64, a limit above what ids can express, a
 * pool of more than 2^32 units of align, reserved != 0), -ENOMEM. *out is
 * untouched on error.
 */
int kvr_store_create(const struct kvr_store_config *cfg,
		     struct kvr_store **out);

/* kvr_store_destroy - free everything; accepts NULL. */
void kvr_store_destroy(struct kvr_store *s);

/*
 * kvr_store_lookup - length of the longest prefix of keys[0..n) that is
 * committed in namespace @ns. Touches the hits in the LRU (keys[0] ends up
 * most recent: a prefix is worthless without its head). With @pin and at
 * least one hit, a lease owned by @ch pins the hit objects (each once) until
 * now_ns + lease_ms, and its id goes to *lease_out; otherwise *lease_out = 0.
 * @lease_out may be NULL when !pin.
 * With @pin the prefix is cut where pinning it would take @ch past its
 * pin quota (hits is then the pinned length); when not even the first hit
 * fits, the answer is -EDQUOT and nothing is pinned.
 * Return: hits >= 0, or -EINVAL (bad ch or ns, NULL keys with n > 0, pin
 * without lease_out), -E2BIG (n > max_keys), -EBUSY (pin and ch already
 * owns max_leases_per_chan leases), -EDQUOT (pin quota), -ENOMEM.
 */
int kvr_store_lookup(struct kvr_store *s, uint32_t ch, uint32_t ns,
		     const struct kvr_key *keys, uint32_t n, bool pin,
		     uint64_t now_ns, uint64_t *lease_out);

/*
 * kvr_store_release_lease - drop a lease's pins. Only the channel that made
 * the lease may release it (anyone may redeem it, see below).
 * Return: 0, -EINVAL (bad ch), -ENOENT (no such lease: unknown, already
 * released/redeemed, expired — even if expire() has not swept it yet — the
 * id of a transfer, or a lease of another uid or namespace), -EPERM (the
 * lease belongs to another channel of the same uid and namespace).
 */
int kvr_store_release_lease(struct kvr_store *s, uint32_t ch, uint64_t lease_id,
			    uint64_t now_ns);

/*
 * kvr_store_prepare_store - reserve a slot for each key not yet stored.
 * For key i, out[i] gets (status, off, len):
 *   KVR_SLOT_OK      off/len: write len bytes there, then commit_store
 *   KVR_SLOT_EXISTS  committed already (idempotent store, rule 1); the key
 *                    is touched in the LRU; off = len = 0
 *   KVR_SLOT_BUSY    another open store transfer (of any channel) reserved
 *                    it, or an earlier occurrence in this same request did;
 *                    not an error: do not write it
 *   KVR_SLOT_NOROOM  even after evicting LRU unpinned committed objects
 *                    (bounded, see docs) no extent is large enough
 *   KVR_SLOT_INVALID sizes[i] is 0 or larger than the pool (or than
 *                    256 GiB - 1, the largest object)
 *   KVR_SLOT_QUOTA   sizes[i] is above max_key_bytes, or reserving it would
 *                    take @ch past quota_reserved_bytes; checked before
 *                    any eviction, so nothing is evicted for it
 * Eviction never takes a reserved or pinned object, nor one this request
 * answered EXISTS. The transfer dies at now_ns + xfer_ms if it is still
 * open then (kvr_store_expire). len = sizes[i] (not rounded); off is aligned.
 * If at least one key got KVR_SLOT_OK, a store transfer owned by @ch holds
 * the reservations and *xfer_out is its id; otherwise *xfer_out = 0 and
 * nothing needs committing (commit_store/abort_store accept 0 as a no-op).
 * Return: number of KVR_SLOT_OK keys (>= 0), or -EINVAL (bad ch, NULL
 * arrays with n > 0), -E2BIG (n > max_keys), -EBUSY (ch has
 * max_xfers_per_chan transfers open), -ENOMEM.
 */
int kvr_store_prepare_store(struct kvr_store *s, uint32_t ch, uint32_t ns,
			    const struct kvr_key *keys, const uint64_t *sizes,
			    uint32_t n, uint64_t now_ns,
			    struct kvr_slot_desc *out, uint64_t *xfer_out);

/*
 * kvr_store_commit_store - publish a store transfer: its reserved objects
 * become committed, readable and evictable; the transfer is gone.
 * xfer 0 is a no-op success (prepare_store reserved nothing).
 * Return: 0, -EINVAL (bad ch), -ENOENT (no open store transfer with this
 * id), -EPERM (it belongs to another channel), KVR_ERR_EXPIRED (it was
 * this channel's, and its deadline reclaimed it: nothing was published).
 */
int kvr_store_commit_store(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   uint64_t now_ns);

/* ---- Store-ahead (store_stage.c, docs/storage.md "Store-ahead") ---- */

/* Staged slots one channel may hold at once (kvringd uses two: the
 * worker's and a spare). They do not count against max_xfers_per_chan. */
#define KVR_STORE_MAX_STAGED 2u

/*
 * kvr_store_stage - reserve one slot of @len bytes for @ch before its key
 * is known: a store transfer whose one object is RESERVED under a
 * placeholder key. Counted, placed, evicted for and expired exactly as a
 * one-key prepare_store; commit_store refuses it (-EINVAL) until
 * kvr_store_bind() names it, and abort_store or channel close free it.
 * Return: 1 and *out (KVR_SLOT_OK, off, len), *xfer_out its id; 0 when
 * nothing was staged (*out->status says why: NOROOM, QUOTA, INVALID);
 * -EBUSY when @ch holds KVR_STORE_MAX_STAGED staged slots already (or its
 * limit of transfers); or the errors of prepare_store (-ENOMEM, ...). On
 * 0 or error nothing changed.
 */
int kvr_store_stage(struct kvr_store *s, uint32_t ch, uint32_t ns, uint64_t len,
		    uint64_t now_ns, struct kvr_slot_desc *out,
		    uint64_t *xfer_out);

/*
 * kvr_store_bind - give staged slot @xfer of @ch the key @key and the
 * length @len (at most the staged length, the same once rounded). After
 * KVR_SLOT_OK the transfer is a plain one-key store transfer: commit it
 * (kvr_store_commit_store) or abort it.
 * Return: KVR_SLOT_OK; KVR_SLOT_EXISTS (the key is committed: rule 1, a
 * no-op, the key is touched) or KVR_SLOT_BUSY (another transfer reserves
 * it), with the slot still staged and unchanged; -EINVAL (not a staged
 * transfer, or @len does not fit it), -ENOENT, KVR_ERR_EXPIRED (as
 * commit_store), -ENOMEM. On anything but KVR_SLOT_OK nothing changed.
 */
int kvr_store_bind(struct kvr_store *s, uint32_t ch, uint64_t xfer,
		   const struct kvr_key *key, uint64_t len);

/*
 * kvr_store_stage_desc - the slot and deadline of staged slot @xfer of
 * @ch. Return 0, -EINVAL (not staged) or the errors of commit_store.
 */
int kvr_store_stage_desc(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
			 struct kvr_slot_desc *out, uint64_t *deadline_out);

/* The length of the first object of open store transfer @xfer of @ch,
 * or 0 (none, or not such a transfer). */
uint64_t kvr_store_xfer_len(const struct kvr_store *s, uint32_t ch,
			    uint64_t xfer);

/*
 * kvr_store_check_store - whether @xfer is an open store transfer of @ch,
 * without changing anything: what commit_store would answer if it fails.
 * The copy transport asks before it writes payload into a slot. O(1).
 * Return: 0, or the errors of commit_store (xfer 0 is -ENOENT here).
 */
int kvr_store_check_store(const struct kvr_store *s, uint32_t ch,
			  uint64_t xfer);

/*
 * kvr_store_abort_store - free a store transfer's reservations; they are
 * never published. xfer 0 is a no-op success. Errors as commit_store.
 */
int kvr_store_abort_store(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			  uint64_t now_ns);

/*
 * kvr_store_prepare_retrieve - pin the longest committed prefix of
 * keys[0..n) under a new retrieve transfer owned by @ch; out[i] for
 * i < hits gets (KVR_SLOT_OK, off, len). Entries from hits on are not
 * written. Hits are touched in the LRU. With 0 hits no transfer is made
 * and *xfer_out = 0. The prefix is cut at the pin quota as in lookup.
 * Return: hits >= 0, or -EINVAL, -E2BIG, -EBUSY (as prepare_store),
 * -EDQUOT (not even the first hit fits the pin quota), -ENOMEM.
 */
int kvr_store_prepare_retrieve(struct kvr_store *s, uint32_t ch, uint32_t ns,
			       const struct kvr_key *keys, uint32_t n,
			       uint64_t now_ns, struct kvr_slot_desc *out,
			       uint64_t *xfer_out);

/*
 * kvr_store_prepare_retrieve_lease - redeem a lease: its pins move, as they
 * are, to a new retrieve transfer owned by @ch (the lease may have been
 * made by another channel of the same uid and namespace; it is consumed).
 * out[] gets one slot per pinned object, in lookup order (duplicated keys
 * appear once).
 * Return: number of slots (>= 1), or -EINVAL (bad ch, NULL out/xfer_out,
 * @max smaller than the lease's object count), -ENOENT (no live lease with
 * this id, or one made by another uid or in another namespace: the same
 * answer, so a stranger cannot tell that the lease exists), -EBUSY (ch has
 * max_xfers_per_chan open), -EDQUOT (the pins would take ch past its pin
 * quota; the lease stays).
 */
int kvr_store_prepare_retrieve_lease(struct kvr_store *s, uint32_t ch,
				     uint64_t lease_id, uint64_t now_ns,
				     struct kvr_slot_desc *out, uint32_t max,
				     uint64_t *xfer_out);

/*
 * kvr_store_commit_retrieve - the reads are done: drop this transfer's pins
 * (and nobody else's). xfer 0 is a no-op success.
 * Return: 0, -EINVAL (bad ch), -ENOENT (no open retrieve transfer with this
 * id), -EPERM (another channel's), KVR_ERR_EXPIRED (its deadline dropped
 * the pins: what was read through it may have been overwritten since).
 */
int kvr_store_commit_retrieve(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			      uint64_t now_ns);

/*
 * kvr_store_channel_close - release everything @ch holds: store transfers
 * aborted (reservations freed, never published), retrieve transfers' pins
 * dropped, leases it owns dropped (a lease it made that another channel
 * already redeemed is that channel's transfer now, and stays), and its
 * quarantine released: call it only when the worker can no longer write
 * the pool (its process is gone; else kvr_store_channel_detach first).
 * Idempotent: a second call releases nothing. @rel_out (may be NULL) says
 * what was released, for the log line and counters.
 * Return: 0, or -EINVAL (bad ch).
 */
int kvr_store_channel_close(struct kvr_store *s, uint32_t ch, uint64_t now_ns,
			    struct kvr_store_released *rel_out);

/*
 * kvr_store_channel_detach - the worker's socket closed, but its process
 * may still write the slots of transfers in quarantine (store_quar.c):
 * release everything else, as kvr_store_channel_close(), and keep those.
 * With none in quarantine this is kvr_store_channel_close() and returns
 * 0. Otherwise it returns how many it kept (rel_out->quar_kept): the
 * channel is detached, still charged to its uid, and must not be opened
 * again before kvr_store_channel_close(), which the caller calls once the
 * process is gone (its release counts as quar_released[2]).
 * Return: >= 0, or -EINVAL (bad ch).
 */
int kvr_store_channel_detach(struct kvr_store *s, uint32_t ch, uint64_t now_ns,
			     struct kvr_store_released *rel_out);

/*
 * kvr_store_settle - the worker of @ch answered for transfer @xfer (a
 * commit or abort arrived) in a form the store did not see itself (a
 * commit whose sums or bind failed first): if @xfer is in quarantine,
 * release it (quar_released[0]). commit_store, abort_store and
 * commit_retrieve settle on their own.
 * Return: 1 released, 0 not in quarantine, -EINVAL (bad ch).
 */
int kvr_store_settle(struct kvr_store *s, uint32_t ch, uint64_t xfer);

/*
 * kvr_store_channel_open - a worker took channel @ch: record who it is
 * (namespace @ns, @uid, as the server established them) so that leases
 * bind to them. Call before its first request; channel_close forgets it.
 * A channel never opened has ns 0 and uid 0 (unit tests).
 * Return: 0, -EINVAL (bad ch or ns), -EBUSY (@ch is detached).
 */
int kvr_store_channel_open(struct kvr_store *s, uint32_t ch, uint32_t ns,
			   uint32_t uid);

/*
 * kvr_store_uid_stats - what the uid of channel @ch holds over all its
 * channels, and its slot; kvr_store_uid_slot_stats - the same by slot
 * (channels 0: the slot is unused, e.g. after the uid's last channel
 * closed). O(1); kvringd publishes them after each batch.
 * Return: 0; -ENOENT @ch was never opened; -EINVAL bad @ch or @slot.
 */
int kvr_store_uid_stats(const struct kvr_store *s, uint32_t ch,
			struct kvr_store_uid_stats *out);
int kvr_store_uid_slot_stats(const struct kvr_store *s, uint32_t slot,
			     struct kvr_store_uid_stats *out);

/*
 * kvr_store_expire - drop leases whose deadline is <= now_ns, earliest
 * first, at most @budget of them (0 = no limit), O(log L) each; then
 * reclaim open transfers whose deadline (creation + xfer_ms) is <= now_ns,
 * oldest first, O(what they hold) each, into quarantine: nothing of a
 * store transfer is ever published and its keys are free for others,
 * but its slots, and the pins of a retrieve transfer, stay held (and
 * charged to the channel's quotas) until its worker answers (a late
 * commit or abort, answered KVR_ERR_EXPIRED) or its channel closes
 * (kvr_store_channel_close, or _detach then _close). Its id is also
 * remembered by its channel (KVR_ERR_EXPIRED on any later call).
 * Return: number of leases and transfers dropped.
 */
int kvr_store_expire(struct kvr_store *s, uint64_t now_ns, uint32_t budget);

/*
 * kvr_store_ns_objects - objects (reserved or committed) stored under
 * namespace @ns; 0 for a bad ns. O(1). The server frees a namespace entry
 * only when no channel uses it and this is 0.
 */
uint64_t kvr_store_ns_objects(const struct kvr_store *s, uint32_t ns);

/*
 * kvr_store_ns_evict - evict every unpinned committed object of @ns, to
 * free a namespace nobody is connected to. O(objects).
 * Return: objects still left in @ns (pinned or reserved ones stay).
 */
uint64_t kvr_store_ns_evict(struct kvr_store *s, uint32_t ns);

/*
 * kvr_store_next_expiry - deadline (ns) of the earliest live lease or open
 * transfer, or UINT64_MAX when there is none; lets the loop arm its timer.
 */
uint64_t kvr_store_next_expiry(const struct kvr_store *s);

/* kvr_store_last_hit_bytes - bytes (as stored) of the hits of the last
 * successful kvr_store_lookup(); O(1). */
uint64_t kvr_store_last_hit_bytes(const struct kvr_store *s);

/*
 * kvr_store_prefer_below - while the pool is still being zeroed, place new
 * slots below @zeroed_bytes when there is room there (the allocator's
 * kvr_alloc_prefer_below()); 0 turns it off. O(1).
 */
void kvr_store_prefer_below(struct kvr_store *s, uint64_t zeroed_bytes);

/* kvr_store_last_stored - the length of the stored prefix the last
 * kvr_store_prepare_retrieve() found, before the pin quota cut it: more
 * than its hits when the channel's pins (its leases included) reached
 * --quota-pinned. O(1). */
uint32_t kvr_store_last_stored(const struct kvr_store *s);

/* kvr_store_stats - snapshot of the global counters (O(log n)). */
void kvr_store_stats(const struct kvr_store *s, struct kvr_store_stats *out);

/*
 * kvr_store_chan_stats - what @ch holds (O(transfers of ch)).
 * Return: 0, or -EINVAL (bad ch).
 */
int kvr_store_chan_stats(const struct kvr_store *s, uint32_t ch,
			 struct kvr_store_chan_stats *out);

/* kvr_store_align / kvr_store_max_keys - effective configuration. */
uint32_t kvr_store_align(const struct kvr_store *s);
uint32_t kvr_store_max_keys(const struct kvr_store *s);

/*
 * kvr_store_capacity - objects the engine's arrays (object table, key
 * index) hold before they must grow: kvr_store_config.objects_hint at
 * creation, doubled by each growth. A growth runs inside the request that
 * needed it, so its caller waits for it (docs/config.md, --objects).
 */
uint64_t kvr_store_capacity(const struct kvr_store *s);

/*
 * kvr_store_idle_step - work a growth left for later, done in one bounded
 * step (a few entries of the key index moved to its larger table, about
 * what an insert adds): for the caller's idle time, so that a cache that
 * is only looked up in after a growth stops probing two tables. Changes
 * no object, no answer and no counter.
 * Return: true while such work remains (call again when idle).
 */
bool kvr_store_idle_step(struct kvr_store *s);

/* kvr_store_migrating - whether the key index still has entries in the
 * table it outgrew (lookups may probe two tables). */
bool kvr_store_migrating(const struct kvr_store *s);

/*
 * kvr_store_table_bytes - bytes of the object table the engine keeps in a
 * mapping of its own rather than on the heap (so malloc statistics do not
 * see them), counting the entries written so far; 0 when the table is on
 * the heap. Heap in use plus this is the engine's metadata.
 */
uint64_t kvr_store_table_bytes(const struct kvr_store *s);

/*
 * kvr_store_audit - walk every object, owner, channel and the allocator and
 * check all invariants (docs/storage.md lists them). O(everything); for
 * tests, debugging and an optional inspector command.
 * Return: 0, or -ENOTRECOVERABLE with the first violation described in
 * @msg (NUL-terminated, when msg_len > 0), or -ENOMEM when the audit's
 * scratch (about 12 bytes per object of capacity) could not be allocated,
 * also said in @msg; only the allocator was checked then.
 */
int kvr_store_audit(const struct kvr_store *s, char *msg, size_t msg_len);

/* ---- For the L2 tier (store_l2.c, docs/l2.md) ---- */

/*
 * kvr_store_channel_trust - channel @ch is the server's own (the L2
 * tier's): no quota binds it and its transfers have no deadline, because
 * an L2 thread may be moving bytes of their slots and a reclaimed slot
 * must never be written. Never call it for a worker's channel.
 * Return: 0, or -EINVAL (bad ch).
 */
int kvr_store_channel_trust(struct kvr_store *s, uint32_t ch);

/*
 * kvr_store_xfer_keys - the keys of open store transfer @xfer of @ch (its
 * reserved objects, in reservation order) and their namespace, read before
 * the transfer is committed. Changes nothing.
 * Return: the number of keys (>= 0), or -EINVAL (bad ch, NULL outputs,
 * @max below the count), -ENOENT (no such store transfer of @ch: another
 * channel's reads as absent).
 */
int kvr_store_xfer_keys(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
			struct kvr_key *keys, uint32_t max, uint32_t *ns_out);

/*
 * kvr_store_commit_store_mask - end store transfer @xfer of @ch: its i-th
 * reservation (order of kvr_store_xfer_keys) is committed if keep[i] and
 * freed, never published, otherwise. @n must equal its reservation count.
 * Return: the number committed (>= 0), or -EINVAL (bad ch, NULL keep, n
 * mismatch), -ENOENT (as commit_store: another channel's transfer reads
 * as absent). On error nothing changed.
 */
int kvr_store_commit_store_mask(struct kvr_store *s, uint32_t ch, uint64_t xfer,
				const uint8_t *keep, uint32_t n,
				uint64_t now_ns);

/*
 * kvr_store_l2_cold - for --l2-upload evict: pin, under a new retrieve
 * transfer of @ch, up to @max of the least recently used committed
 * objects that have no copy in L2, among the unpinned objects that make
 * up the coldest @zone_bytes of the LRU (the next to be evicted). All are
 * of one namespace (the coldest one's). Their recency is not touched. keys[i]
 * and slots[i] describe the i-th pinned object (the order kvr_store_l2_saved
 * expects); an object stored with a sum has KVR_SLOT_F_SUM in
 * slots[i].reserved and its sum in kvr_store_last_sums()[i]. Return: how many
 * were pinned (0: none without a copy in reach, and *xfer_out is 0), or -EINVAL
 * (bad ch, NULL outputs, max 0), -EBUSY (the channel's transfer limit), -ENOMEM
 * (nothing changed).
 */
int kvr_store_l2_cold(struct kvr_store *s, uint32_t ch, uint32_t max,
		      uint64_t zone_bytes, uint64_t now_ns,
		      struct kvr_key *keys, struct kvr_slot_desc *slots,
		      uint32_t *ns_out, uint64_t *xfer_out);

/*
 * kvr_store_l2_saved - end retrieve transfer @xfer of @ch made by
 * kvr_store_l2_cold: objects with saved[i] set now have a copy in L2;
 * every object whose last pin this was goes back to the LRU tail, so
 * eviction takes it before anything else (a saved copy makes it the
 * cheapest to lose). @n must equal the transfer's object count.
 * Return: 0, or -EINVAL (bad ch, NULL saved, n mismatch), -ENOENT (no
 * such retrieve transfer of @ch: another channel's reads as absent); on error
 * nothing changed.
 */
int kvr_store_l2_saved(struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       const uint8_t *saved, uint32_t n);

/* ---- For the disk tier (store_disk.c, docs/storage.md) ---- */

/*
 * kvr_store_disk_cold - kvr_store_l2_cold for the disk tier's
 * --disk-mode evict: the same pins of the coldest objects, choosing those
 * without a copy on disk.
 */
int kvr_store_disk_cold(struct kvr_store *s, uint32_t ch, uint32_t max,
			uint64_t zone_bytes, uint64_t now_ns,
			struct kvr_key *keys, struct kvr_slot_desc *slots,
			uint32_t *ns_out, uint64_t *xfer_out);

/* What kvr_store_disk_saved's saved[i] says of object i. */
enum {
	KVR_STORE_DISK_UNSAVED = 0, /* not written (yet) */
	KVR_STORE_DISK_SAVED = 1,   /* a copy is on disk */
	KVR_STORE_DISK_REFUSED = 2, /* the disk failed to write it: the
				       guard lets eviction take it unsaved */
};

/*
 * kvr_store_disk_saved - kvr_store_l2_saved for transfers of
 * kvr_store_disk_cold (@cold true: the objects whose last pin this was go
 * back to the LRU tail) or of kvr_store_prepare_retrieve (a commit's
 * write-through; @cold false: their recency stays). saved[i] is one of
 * KVR_STORE_DISK_*. Same returns.
 */
int kvr_store_disk_saved(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			 const uint8_t *saved, uint32_t n, bool cold);

/*
 * kvr_store_disk_commit_mask - kvr_store_commit_store_mask for a disk
 * read-through's load: the kept objects are marked as having a copy on
 * disk (not in L2). Same returns.
 */
int kvr_store_disk_commit_mask(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			       const uint8_t *keep, uint32_t n,
			       uint64_t now_ns);

/*
 * kvr_store_disk_guard - --disk-mode evict's write-back guard, @on while
 * the disk takes writes: eviction then takes only objects with a copy on
 * disk (or that the disk refused), the coldest of the LRU's last 64, and
 * a key that finds none answers KVR_SLOT_NOROOM (stats.disk_held) until
 * the write-back has written the cold end. Off (the default): plain LRU.
 */
void kvr_store_disk_guard(struct kvr_store *s, bool on);

/*
 * kvr_store_disk_forget - the disk tier dropped its copy of (@ns, @k) (its
 * LRU took the record, or the record failed a check): a resident object
 * of that key loses its mark of a copy on disk, so the write-back guard
 * does not let eviction take it as saved and its eviction is counted in
 * disk_unsaved_evictions. O(1): one index find. Any state of the object
 * is fine (a RESERVED one has no mark yet).
 * Return: 1 a mark was cleared, 0 no resident object had one, -EINVAL
 * bad @ns or NULL @k.
 */
int kvr_store_disk_forget(struct kvr_store *s, uint32_t ns,
			  const struct kvr_key *k);

/* ---- Per-chunk checksums (store_sum.c, docs/reliability.md) ---- */

/*
 * kvr_store_set_sums - give the @n reservations of open store transfer
 * @xfer of @ch (in reservation order, which is the order of the
 * KVR_SLOT_OK answers of its prepare_store) the checksums @sums, before
 * it is committed. The store keeps them as opaque values.
 * Return: 0, -EINVAL (bad ch, NULL sums, or @n is not the transfer's
 * reservation count), -ENOENT, KVR_ERR_EXPIRED (as commit_store). On
 * error nothing changed and the transfer stays open.
 */
int kvr_store_set_sums(struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       const uint64_t *sums, uint32_t n);

/*
 * kvr_store_last_sums - the sums of the slots the last successful
 * kvr_store_prepare_retrieve(_lease) or kvr_store_l2_cold wrote, one per slot
 * (a slot whose object has no sum carries 0, and its out[].reserved lacks
 * KVR_SLOT_F_SUM). Valid until the next call into the store.
 */
const uint64_t *kvr_store_last_sums(const struct kvr_store *s);

/*
 * kvr_store_xfer_sum - the object at pool offset @off that open retrieve
 * transfer @xfer of @ch pins: its length and sum. O(objects of xfer).
 * Return: 0, -EINVAL (bad ch or NULL outputs), -ENOENT (no such transfer,
 * or it pins nothing at @off), -ENODATA (stored without a sum).
 */
int kvr_store_xfer_sum(const struct kvr_store *s, uint32_t ch, uint64_t xfer,
		       uint64_t off, uint64_t *len_out, uint64_t *sum_out);

/*
 * kvr_store_drop_corrupt - the object at @off pinned by retrieve transfer
 * @xfer of @ch failed its sum (the caller checked the bytes): from now on
 * no lookup or retrieve finds it and a store of its key answers BUSY;
 * its slot is freed when its last pin drops (at the latest when @xfer is
 * committed). Counted in stats.corrupt_dropped.
 * Return: 0, -EINVAL, -ENOENT (as kvr_store_xfer_sum), -EALREADY (it was
 * dropped already).
 */
int kvr_store_drop_corrupt(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   uint64_t off);

#endif /* KVR_SERVER_STORE_H */
