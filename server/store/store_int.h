/* SPDX-License-Identifier: MIT */
/*
 * store_int.h - private to server/store/store*.c: the storage engine's state
 * (struct kvr_store and the object, owner and channel records it holds),
 * the one-owner-thread check, the tiny list helpers every file of the engine
 * needs on its hot path (static inline, so splitting the engine into files
 * cost no calls), and the kvr__store_* functions the files lend each other.
 *
 * Who does what:
 *   store.c        the public requests (lookup, store, retrieve, close,
 *                  expire, stats): argument checks, the reservation step,
 *                  then the state change;
 *   store_mem.c    create/destroy and every heap allocation: growing the
 *                  object and owner arrays, the lease heap and the id map;
 *   store_owner.c  owners (leases, store and retrieve transfers): ids,
 *                  channel lists, pins, the lease heap, ending an owner;
 *   store_lru.c    the LRU order and eviction;
 *   store_chan.c   channels: open, close, detach, what one holds;
 *   store_quar.c   the quarantine of transfers a deadline reclaimed;
 *   store_audit.c  kvr_store_audit(), the invariant walker.
 * Nothing outside server/store*.c may include this header: the rest of
 * kvringd sees only the opaque handle of store.h.
 */
#ifndef KVR_SERVER_STORE_INT_H
#define KVR_SERVER_STORE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <kvring/error.h>
#include <kvring/store.h>

#include "alloc.h"
#include "index.h"
#include "store_id.h"

#define NIL UINT32_MAX
/* Largest array index we hand out (NIL is the "none" marker). */
#define MAX_SLOTS (UINT32_MAX - 1u)
/* An owner's object list above this many entries is freed on release, so a
 * few huge requests do not pin memory in every recycled owner. */
#define OWNER_KEEP_CAP 256u

/* OBJ_DOOMED: was committed, then found corrupt (a checksum report the
 * server confirmed, store_sum.c). Still indexed and still pinned by
 * someone, off the LRU; no lookup, retrieve or store sees it as stored,
 * and the unpin that drops its last pin frees it. */
enum obj_state {
	OBJ_FREE = 0,
	OBJ_RESERVED = 1,
	OBJ_COMMITTED = 2,
	OBJ_DOOMED = 3,
};
/* OWN_QUAR: a store or retrieve transfer its deadline reclaimed while its
 * worker may still be copying into or out of its slots (store_quar.c).
 * It keeps its objects, its id and its place on the channel's list, and
 * leaves the deadline queue; `qkind` says what it was. */
enum own_kind {
	OWN_FREE = 0,
	OWN_STORE = 1,
	OWN_RETRIEVE = 2,
	OWN_LEASE = 3,
	OWN_QUAR = 4,
};

/* Largest object, bytes: what obj.len can hold (256 GiB - 1). */
#define OBJ_LEN_MAX (UINT64_MAX >> 26)
/* Largest namespace obj.ns can hold (max_ns is at most 2^20). */
#define OBJ_NS_MAX ((1u << 20) - 1)

/*
 * One stored or reserved chunk, 52 bytes (4-byte aligned, so an array of
 * them has no padding). Owned by the store; dies when evicted, aborted or
 * when the store is destroyed. Invariants (audited): a RESERVED object is
 * listed by exactly its store transfer (`owner`), no owner pins it and it
 * is on no list; a COMMITTED one is held by no store transfer and is on
 * the LRU list exactly while pins == 0. A FREE slot is on the spare list
 * (via next). A reserved object cannot be pinned and a pinned one has no
 * store transfer, so `owner` and `pins` share their word, told apart by
 * the state. The key is kept here only: the key index holds a tag and the
 * object's number, and checks the key against this record
 * (kvr__store_key_match()).
 */
struct __attribute__((packed, aligned(4))) obj {
	uint64_t lo, hi;     /* key */
	uint64_t sum;	     /* opaque to the store: what the worker sent */
	uint64_t len : 38;   /* requested bytes (the allocation is rounded) */
	uint64_t ns : 20;    /* < max_ns <= 2^20 */
	uint64_t state : 2;  /* enum obj_state */
	uint64_t l2 : 1;     /* 1: a copy is in L2 (store_l2.c) */
	uint64_t disk : 1;   /* 1: a copy is on the disk tier (store_disk.c) */
	uint64_t summed : 1; /* sum holds the storer's XXH3-64 */
	/* 1: the disk failed to write it: eviction may take it while
	 * disk_guard is on */
	uint64_t disk_refused : 1;
	uint32_t unit;	     /* slot: offset in units of cfg.align */
	uint32_t stamp;	     /* request that touched it last (see s->stamp) */
	uint32_t prev, next; /* LRU links; spare list via next */
	union {
		uint32_t pins;	/* COMMITTED, DOOMED: owners listing it */
		uint32_t owner; /* RESERVED: its store transfer */
	};
};
_Static_assert(sizeof(struct obj) == 52, "struct obj grew: see kvring-bench "
					 "capacity's metadata target");

/*
 * A store transfer, retrieve transfer or lease. Owned by the store on
 * behalf of channel `ch`; dies on commit/abort/release/redeem/expiry/close
 * (a redeemed lease is re-typed into a retrieve transfer, not freed).
 * While published it has a nonzero id found in s->ids, sits on its
 * channel's list and, if a lease, in the heap at heap_pos. objs[] keeps
 * its allocation across recycling (up to OWNER_KEEP_CAP entries), which is
 * why steady-state requests find an owner's list already there.
 */
struct owner {
	uint64_t id;	      /* 0 while on the spare list */
	uint64_t deadline_ns; /* lease: expiry */
	uint64_t created_ns;
	uint64_t bytes; /* store: rounded bytes reserved */
	uint32_t *objs; /* reserved or pinned objects, each once */
	uint32_t nr, cap;
	uint32_t ch;
	uint32_t prev, next; /* channel's owner list; spare list via next */
	uint32_t heap_pos;   /* lease: index in s->heap; else NIL */
	uint32_t kind;	     /* enum own_kind */
	/* Transfers: s->xq, oldest first (all share one lifetime, so
	 * creation order is deadline order and the queue needs no heap). */
	uint32_t xprev, xnext;
	uint32_t ns, uid; /* lease: its maker's namespace and uid */
	/* Store-ahead (store_stage.c): 1 while this store transfer is a
	 * staged slot, its one object RESERVED under a placeholder key.
	 * commit_store refuses it; only kvr_store_bind() re-keys it. */
	uint32_t staged;
	uint32_t qkind; /* OWN_QUAR: OWN_STORE or OWN_RETRIEVE */
};

/*
 * What one channel holds. The counters are kept in step with its owners
 * so kvr_store_chan_stats() and the -EBUSY limits are O(1); the audit
 * recomputes them from the owner list.
 */
struct chan {
	uint32_t head; /* owner list, newest first */
	uint32_t tail; /* its oldest owner (for the inspector's age) */
	uint32_t nr_xfers;
	uint32_t nr_leases;
	uint32_t nr_staged; /* of nr_xfers, staged slots (store_stage.c) */
	uint64_t reserved_bytes;
	uint64_t reserved_objects;
	uint64_t pins;
	uint64_t pinned_bytes; /* rounded bytes of its pins (quota) */
	uint32_t ns, uid;      /* kvr_store_channel_open() */
	uint32_t uidx;	       /* its uid's entry in s->uacct; 0: none */
	bool trusted;	       /* kvr_store_channel_trust(): the server's own
				  (L2) channel: no quota, no deadline */
	uint64_t quota_denied, xfers_expired;
	uint64_t stages, binds, binds_existing; /* store_stage.c */
	/* Quarantine (store_quar.c): owners, their objects and rounded
	 * bytes (a subset of the reserved and pinned counts above, which
	 * the quotas read), and whether the channel was detached: closed
	 * while its worker's process lives on, holding only quarantine. */
	uint32_t nr_quar;
	bool detached;
	uint64_t quar_slots, quar_bytes;
	/* Ids its deadline reclaimed, newest at expired_pos - 1. */
	uint64_t expired_ids[KVR_STORE_EXPIRED_MEMORY];
	uint32_t expired_pos;
};

/*
 * What all opened channels of one uid hold (store_uid.c). Entry 0 of
 * s->uacct is a sink for channels never opened (unit tests) and is never
 * checked against a quota; entries 1..max_channels are uids in use (a uid
 * has at least one channel, so they never run out).
 */
struct uacct {
	uint32_t uid;
	uint32_t chans; /* opened channels bound to it; 0: entry unused */
	uint64_t reserved_bytes;
	uint64_t pinned_bytes;
	uint64_t quota_denied;
};

/*
 * The engine. Created by kvr_store_create() (store_mem.c), owned by the
 * thread that created it, freed by kvr_store_destroy(). Every array here is
 * indexed by uint32_t and uses NIL for "none", so links are 4 bytes and
 * survive a realloc of the array they point into.
 */
struct kvr_store {
	struct kvr_store_config cfg; /* with defaults filled in */
	pthread_t owner;	     /* the only thread that may call us */
	uint64_t lease_ns;
	uint64_t pool_total; /* managed bytes: largest valid object size */
	struct kvr_alloc alloc;
	struct kvr_index index;	  /* (ns, key) -> object */
	struct kvr_index_u64 ids; /* transfer/lease id -> owner */
	struct obj *obj;
	uint32_t obj_cap, obj_spare, obj_live;
	/* Objects [0, obj_fresh) have been handed out at least once (each is
	 * live or on the spare list); [obj_fresh, obj_cap) never were: FREE
	 * by definition and not yet written, so growing the array touches
	 * none of its new memory (obj_reserve). */
	uint32_t obj_fresh;
	/* The object table's own mapping (store_mem.c, obj_table_map):
	 * room reserved for obj_va_max entries in obj_va_bytes, or 0 for a
	 * malloc'd table. */
	uint32_t obj_va_max;
	size_t obj_va_bytes;
	struct owner *own;
	uint32_t own_cap, own_spare, own_live;
	struct chan *chan;
	struct uacct *uacct; /* max_channels + 1 entries (store_uid.c) */
	uint32_t *heap;	     /* leases, min-heap on deadline_ns */
	uint32_t heap_nr, heap_cap;
	uint32_t lru_head, lru_tail; /* head = most recently used */
	uint32_t *scratch;	     /* max_keys object numbers, per request */
	struct kvr_store_id ids_gen; /* lease and transfer ids */
	uint64_t xfer_ns;	     /* cfg.xfer_ms in ns */
	uint32_t xq_head, xq_tail;   /* open transfers, oldest at head */
	uint64_t *ns_objs;	     /* per namespace: live objects */
	/*
	 * Bumped once per keyed request. obj.stamp == stamp means "touched by
	 * the request in progress": used to pin an object once per owner even
	 * when a key repeats, and to keep eviction off the keys this very
	 * request answered EXISTS. Never 0 while a request runs: when it
	 * wraps, every object's stamp is cleared first (stamp_bump()).
	 */
	uint32_t stamp;
	uint32_t unit_shift; /* log2(cfg.align): obj.unit to bytes */
	/* kvr_store_disk_guard(): eviction takes only objects with a copy
	 * on disk (or that the disk refused), else answers NOROOM. */
	bool disk_guard;
	struct kvr_store_stats st; /* counters and gauges (alloc's on read) */
	uint64_t last_hit_bytes;   /* of the last lookup's hits */
	uint32_t last_stored;	   /* the last prepare_retrieve's stored
				      prefix, before the pin quota cut it */
	uint64_t *last_sums;	   /* max_keys: sums of the slots the last
				      prepare_retrieve(_lease) wrote */
	uint64_t stage_seq;	   /* placeholder keys of staged slots */
	/* kvr_store_audit()'s tallies, kept between audits so that a
	 * caller auditing after every step (tests, fuzz_dispatch) does not
	 * allocate five arrays each time. Scratch, not state: the audit
	 * (const on the store) writes only through this pointer. */
	struct kvr__audit_scratch *audit;
};

/* The audit's tallies (store_audit.c), grown to the store's sizes. */
struct kvr__audit_scratch {
	uint32_t *pins, *seen, *holders;
	uint32_t obj_cap; /* entries of the three arrays above, minus one */
	struct chan *chans;
	uint64_t *per_ns;
};

/* Free the audit's scratch (store_audit.c); accepts NULL. */
void kvr__store_audit_free(struct kvr__audit_scratch *a);

/*
 * DESIGN.md rule 3 says the pending-transfer tables cannot race because one
 * thread owns them. This makes the rule checked, not just stated: every
 * public entry point (but create, which sets the owner, and destroy)
 * asserts it runs on the thread that created the store, so a future helper
 * thread calling in aborts at once instead of corrupting the tables
 * silently (test_store proves it). pthread_self() is a TLS read.
 * The kvr__store_* helpers below do not repeat it: only entry points call
 * them, after the check.
 */
#define OWNER_ONLY(s) kvr_assert(pthread_equal(pthread_self(), (s)->owner))

/*
 * kvr__store_chan_ok - the start of an entry point on channel @ch: the
 * owner-thread check above (when @s is set), then whether @s is set and
 * @ch in range. false: the caller answers -EINVAL.
 */
static inline bool kvr__store_chan_ok(const struct kvr_store *s, uint32_t ch)
{
	if (!s)
		return false;
	OWNER_ONLY(s);
	return ch < s->cfg.max_channels;
}

/* ==== store_mem.c: heap memory, reserved before any state changes ==== */

/*
 * kvr__store_mem_reserve - the reservation step every request that may
 * create something runs before it changes anything: make sure @nr_objs new
 * objects (with their index entries and allocator nodes) and one owner
 * able to list @owner_objs objects (with an id-map slot and a lease-heap
 * slot) can be taken without allocating. Steady state: all already there.
 * Return: 0, or -ENOMEM with nothing visible changed (arrays may have
 * grown, which no invariant and no answer can see).
 */
int kvr__store_mem_reserve(struct kvr_store *s, uint32_t nr_objs,
			   uint32_t owner_objs);

/* The key index's check of a tag match (store_mem.c): is object @val
 * stored under (ns, *key)? */
bool kvr__store_key_match(const void *ctx, uint32_t val, uint32_t ns,
			  const struct kvr_key *key);

/* ==== store_uid.c: per-uid aggregates ==== */

/* The aggregate channel @ch is charged to (entry 0 if never opened). */
static inline struct uacct *kvr__store_ua(struct kvr_store *s, uint32_t ch)
{
	return &s->uacct[s->chan[ch].uidx];
}

/* Bind @ch to @uid's entry (taking a free one for a new uid). */
void kvr__store_uid_bind(struct kvr_store *s, uint32_t ch, uint32_t uid);

/* Unbind @ch, which holds nothing any more; frees an entry left unused. */
void kvr__store_uid_unbind(struct kvr_store *s, uint32_t ch);

/* ==== store_owner.c: owners, pins and the lease heap ==== */

/* Publish owner @o: new id, on its channel's list, counted. */
void kvr__store_owner_publish(struct kvr_store *s, uint32_t o, uint64_t now_ns);

/* Unpublish and recycle owner @o, whose objects were already dealt with. */
void kvr__store_owner_free(struct kvr_store *s, uint32_t o);

/*
 * kvr__store_owner_pin_new - a new owner of @kind (OWN_LEASE or
 * OWN_RETRIEVE) for @ch pins s->scratch[0..hits), each object once, and is
 * published (a lease also gets its deadline and heap slot). Needs
 * kvr__store_mem_reserve(s, 0, >= hits) first; cannot fail.
 * Return: the owner.
 */
uint32_t kvr__store_owner_pin_new(struct kvr_store *s, uint32_t kind,
				  uint32_t ch, uint32_t hits, uint64_t now_ns);

/* Drop every pin of owner @o; return how many (it stays published). */
uint64_t kvr__store_owner_unpin_all(struct kvr_store *s, uint32_t o);

/* The same, but each object it unpins last goes to the LRU tail (the
 * first to be evicted) instead of the head: store_l2.c's cold uploads. */
uint64_t kvr__store_owner_unpin_all_cold(struct kvr_store *s, uint32_t o);

/* Drop lease @o: off the heap, pins gone, recycled. Return pins dropped. */
uint64_t kvr__store_owner_drop_lease(struct kvr_store *s, uint32_t o);

/*
 * kvr__store_owner_abort - free store transfer @o's reservations (never
 * published), recycle it. Return the objects freed; *bytes = their rounded
 * bytes.
 */
uint64_t kvr__store_owner_abort(struct kvr_store *s, uint32_t o,
				uint64_t *bytes);

/*
 * kvr__store_owner_redeem - re-type live lease @o into a retrieve transfer
 * of @ch with a fresh id; its pins stay exactly as they are. Cannot fail.
 */
void kvr__store_owner_redeem(struct kvr_store *s, uint32_t o, uint32_t ch,
			     uint64_t now_ns);

/* ==== store_lru.c: LRU order and eviction ==== */

/* Evict unpinned committed object @x (on the LRU list): it is gone. */
void kvr__store_lru_evict(struct kvr_store *s, uint32_t x);

/* The L2 and disk tiers' shared bodies (store_l2.c): @disk says which copy
 * (obj.disk or obj.l2) is chosen by or marked; @cold, whether unpinned
 * objects go to the LRU tail. */
int kvr__store_commit_mask(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   const uint8_t *keep, uint32_t n, uint64_t now_ns,
			   bool disk);
int kvr__store_cold_pin(struct kvr_store *s, uint32_t ch, uint32_t max,
			uint64_t zone_bytes, uint64_t now_ns,
			struct kvr_key *keys, struct kvr_slot_desc *slots,
			uint32_t *ns_out, uint64_t *xfer_out, bool disk);
int kvr__store_cold_saved(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			  const uint8_t *saved, uint32_t n, bool disk,
			  bool cold);

/* Touch s->scratch[0..hits) last to first, so keys[0] is the most recent. */
void kvr__store_lru_touch_prefix(struct kvr_store *s, uint32_t hits);

/*
 * kvr__store_lru_make_room - the slow path of place(): evict from the LRU
 * tail until @len bytes (@need once rounded) can be allocated.
 * Return: 0 and *off, or -ENOSPC.
 */
int kvr__store_lru_make_room(struct kvr_store *s, uint64_t len, uint64_t need,
			     uint64_t *off);

/* ==== Inline helpers: hot in several files, too small to call ==== */

/* Object @o's offset in the pool, bytes. */
static inline uint64_t obj_off(const struct kvr_store *s, const struct obj *o)
{
	return (uint64_t)o->unit << s->unit_shift;
}

/*
 * A new request's stamp. After 2^32 requests the counter wraps: every
 * object's stamp is cleared then (store_mem.c), so that none can equal a
 * stamp handed out again.
 */
void kvr__store_stamp_wrap(struct kvr_store *s);

static inline void stamp_bump(struct kvr_store *s)
{
	if (++s->stamp == 0)
		kvr__store_stamp_wrap(s);
}

/* The bytes object @o really occupies in the pool (rounded to align). */
static inline uint64_t obj_bytes(const struct kvr_store *s, const struct obj *o)
{
	return kvr_alloc_round(&s->alloc, o->len);
}

/* Open transfers that count against max_xfers_per_chan: staged slots do
 * not (a worker using store-ahead keeps its full limit); they have their
 * own, KVR_STORE_MAX_STAGED. */
static inline uint32_t chan_xfers(const struct chan *c)
{
	return c->nr_xfers - c->nr_staged;
}

/* Take a spare object, else the first never used (zeroed here, its first
 * write); kvr__store_mem_reserve() made sure one exists. */
static inline uint32_t obj_take(struct kvr_store *s)
{
	uint32_t x = s->obj_spare;

	if (x != NIL) {
		s->obj_spare = s->obj[x].next;
	} else {
		x = s->obj_fresh++;
		memset(&s->obj[x], 0, sizeof(s->obj[x]));
	}
	s->obj_live++;
	return x;
}

/* Put object @x back on the spare list; the caller unlinked it first. */
static inline void obj_give(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];

	s->ns_objs[o->ns]--;
	o->state = OBJ_FREE;
	o->l2 = 0;
	o->disk = 0;
	o->disk_refused = 0;
	o->summed = 0;
	o->pins = 0;
	o->prev = NIL;
	o->next = s->obj_spare;
	s->obj_spare = x;
	s->obj_live--;
}

/*
 * Remove a dead object (evicted, or a reservation aborted) from the index
 * and the pool and recycle it. Neither removal can fail for a live object:
 * it is indexed under its key and its slot is one allocation (audit A2).
 */
static inline void obj_destroy(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];
	struct kvr_key k = {o->lo, o->hi};

	(void)kvr_index_remove(&s->index, o->ns, &k);
	(void)kvr_alloc_put(&s->alloc, obj_off(s, o), o->len);
	obj_give(s, x);
}

/* Unlink object @x from the LRU list (it must be on it). */
static inline void lru_unlink(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];

	if (o->prev != NIL)
		s->obj[o->prev].next = o->next;
	else
		s->lru_head = o->next;
	if (o->next != NIL)
		s->obj[o->next].prev = o->prev;
	else
		s->lru_tail = o->prev;
	o->prev = o->next = NIL;
}

/* Make object @x (not on the list) the most recently used. */
static inline void lru_push_head(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];

	o->prev = NIL;
	o->next = s->lru_head;
	if (s->lru_head != NIL)
		s->obj[s->lru_head].prev = x;
	else
		s->lru_tail = x;
	s->lru_head = x;
}

/* Keys a request prefetches at a time: enough to overlap the misses of a
 * batch, few enough that the lines are still in L1 when they are used. */
#define PREFETCH_KEYS 16u

/*
 * prefetch_keys - start loading what finding keys[from..from+16) (at most
 * @n) will read: first every key's index slot, then, once those arrive,
 * the object each first tag match names. A request of many keys then waits
 * on memory about twice per window instead of twice per key. The keys are
 * read here and again by the find (a worker may change them in between:
 * then only a prefetch was wasted; every decision uses the find's read).
 */
static inline void prefetch_keys(const struct kvr_store *s, uint32_t ns,
				 const struct kvr_key *keys, uint32_t from,
				 uint32_t n)
{
	uint32_t end = n - from > PREFETCH_KEYS ? from + PREFETCH_KEYS : n;

	if (end - from < 2)
		return; /* one key: nothing to overlap */
	for (uint32_t i = from; i < end; i++) {
		struct kvr_key k = keys[i];

		kvr_index_prefetch(&s->index, ns, &k);
	}
	for (uint32_t i = from; i < end; i++) {
		struct kvr_key k = keys[i];
		uint32_t x = kvr_index_peek(&s->index, ns, &k);

		if (x != KVR_INDEX_NONE)
			__builtin_prefetch(&s->obj[x]);
	}
}

/* Make object @x (not on the list) the least recently used. */
static inline void lru_push_tail(struct kvr_store *s, uint32_t x)
{
	struct obj *o = &s->obj[x];

	o->next = NIL;
	o->prev = s->lru_tail;
	if (s->lru_tail != NIL)
		s->obj[s->lru_tail].next = x;
	else
		s->lru_head = x;
	s->lru_tail = x;
}

/*
 * Mark a use of committed object @x: to the LRU head if it is unpinned. A
 * pinned object is off the list and goes to the head when its last pin
 * drops, so it needs nothing now.
 */
static inline void touch(struct kvr_store *s, uint32_t x)
{
	if (s->obj[x].pins == 0 && s->lru_head != x) {
		lru_unlink(s, x);
		lru_push_head(s, x);
	}
}

/*
 * Find room for @len bytes. The common case, where the allocator places it
 * without evicting, stays inline in prepare_store's loop; only a full pool
 * pays a call into store_lru.c. Return: 0 and *off, or -ENOSPC.
 */
static inline int place(struct kvr_store *s, uint64_t len, uint64_t *off)
{
	uint64_t need = kvr_alloc_round(&s->alloc, len);

	if (kvr_alloc_free_bytes(&s->alloc) >= need &&
	    kvr_alloc_get(&s->alloc, len, off) == 0)
		return 0;
	return kvr__store_lru_make_room(s, len, need, off);
}

/* Take the reserved spare owner; not yet visible (no id, no channel). */
static inline uint32_t owner_take(struct kvr_store *s, uint32_t kind,
				  uint32_t ch)
{
	uint32_t o = s->own_spare;
	struct owner *w = &s->own[o];

	s->own_spare = w->next;
	w->kind = kind;
	w->ch = ch;
	w->nr = 0;
	w->bytes = 0;
	w->id = 0;
	w->deadline_ns = 0;
	w->heap_pos = NIL;
	w->prev = w->next = NIL;
	w->xprev = w->xnext = NIL;
	w->staged = 0;
	w->qkind = 0;
	s->own_live++;
	return o;
}

/* Give an owner that was never published (or was unpublished) back. */
static inline void owner_untake(struct kvr_store *s, uint32_t o)
{
	struct owner *w = &s->own[o];

	w->kind = OWN_FREE;
	w->next = s->own_spare;
	s->own_spare = o;
	s->own_live--;
}

/*
 * Find a published owner of @kind by id; NIL if none. Id 0 is never issued,
 * and checking the kind makes a lease id given to commit_store -ENOENT.
 */
static inline uint32_t owner_find(const struct kvr_store *s, uint64_t id,
				  uint32_t kind)
{
	uint32_t o;

	if (id == 0)
		return NIL;
	o = kvr_index_u64_find(&s->ids, id);
	if (o == NIL || s->own[o].kind != kind)
		return NIL;
	return o;
}

/*
 * The owner of transfer @xfer of @kind for channel @ch's calls: -EINVAL
 * for no store or a channel out of range, -ENOENT when no such transfer
 * is open; else 0 and *o_out, which may be another channel's owner (the
 * caller decides what that answers).
 */
static inline int owner_find_for(const struct kvr_store *s, uint32_t ch,
				 uint64_t xfer, uint32_t kind, uint32_t *o_out)
{
	if (!s || ch >= s->cfg.max_channels)
		return -EINVAL;
	*o_out = owner_find(s, xfer, kind);
	return *o_out == NIL ? -ENOENT : 0;
}

/* ==== store_quar.c: the quarantine ==== */

/* Whether owner @w holds reservations (a store transfer, open or in
 * quarantine) rather than pins. */
static inline bool owner_reserves(const struct owner *w)
{
	return w->kind == OWN_STORE ||
	       (w->kind == OWN_QUAR && w->qkind == OWN_STORE);
}

/* Why a quarantine ended (kvr_store_stats.quar_released[]). */
enum quar_why { QUAR_ANSWERED = 0, QUAR_EXITED = 1, QUAR_CLOSED = 2 };

/* Transfer @o reached its deadline: into quarantine (store_quar.c). */
void kvr__store_quar_take(struct kvr_store *s, uint32_t o);

/* End quarantine owner @o: slots freed or pins dropped, @why counted;
 * *bytes (may be NULL) gets its rounded bytes. Return its objects. */
uint64_t kvr__store_quar_free(struct kvr_store *s, uint32_t o,
			      enum quar_why why, uint64_t *bytes);

/*
 * kvr__store_quar_answer - a commit or abort of @kind for @xfer failed to
 * find an open transfer (@rc): if @xfer is in quarantine on @ch and was a
 * transfer of @kind, this answer is its worker answering for it: release
 * it and return KVR_ERR_EXPIRED; otherwise return @rc.
 */
int kvr__store_quar_answer(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			   uint32_t kind, int rc);

/* Take transfer @o off the deadline queue (store_owner.c). */
void kvr__store_xq_unlink(struct kvr_store *s, uint32_t o);

/* ---- store_sum.c ---- */

/* Free doomed object @x whose last pin just dropped (unpin_all). */
void kvr__store_sum_free(struct kvr_store *s, uint32_t x);

#endif /* KVR_SERVER_STORE_INT_H */
