/* SPDX-License-Identifier: MIT */
/*
 * alloc.h - kvringd's pool allocator: hands out aligned extents of the
 * range [0, pool_bytes) and takes them back, merging free neighbours.
 *
 * Every piece of metadata lives in the server's private heap; the pool's
 * bytes are never read or written (a worker can scribble anything into the
 * pool without corrupting the allocator). Offsets are multiples of `align`.
 *
 * Algorithm (docs/storage.md): a bitmap with one bit per unit marks where
 * every extent, free or used, starts (the boundary tags, kept privately),
 * so an extent runs to the next set bit. Only free extents have a node:
 * they sit in a treap ordered by (size, offset), which gives an exact best
 * fit and the largest free extent in O(log n), and in two hash maps, by
 * start and by end, through which a put finds the free neighbours it
 * merges with. A used extent costs its bits and nothing else: the caller
 * already holds its offset and length, and a put checks them against the
 * bitmap (start bit set, no boundary inside, one at the end) before it
 * changes anything. Memory: one bit per unit of the pool, plus 32 bytes
 * and two map slots per free extent.
 *
 * Ownership: the caller owns struct kvr_alloc (init/fini). Not thread-safe:
 * kvringd's event-loop thread is the only user (DESIGN.md rule 3).
 */
#ifndef KVR_SERVER_ALLOC_H
#define KVR_SERVER_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"

#define KVR_ALLOC_ALIGN_DEFAULT 4096u
#define KVR_ALLOC_ALIGN_MIN	64u

/* Private: one free extent. 32 bytes. */
struct kvr_alloc_ext {
	uint64_t start; /* in units of align */
	uint64_t units;
	uint32_t left, right; /* treap children */
	uint32_t prio;	      /* treap priority */
	uint32_t next;	      /* spare-node list; UINT32_MAX = none */
};

/* struct kvr_alloc - an allocator. Caller's memory; all fields private. */
struct kvr_alloc {
	struct kvr_alloc_ext *ext; /* free-extent nodes, grows by doubling */
	uint32_t cap;		   /* nodes in ext[] */
	uint32_t spare;		   /* free-node list head */
	uint32_t root;		   /* treap of free extents */
	uint32_t rng;		   /* treap priority generator */
	uint32_t shift;		   /* log2(align) */
	uint64_t units;		   /* managed units: pool_bytes / align */
	uint64_t free_units;
	uint64_t nr_free;	     /* free extents */
	uint64_t nr_used;	     /* used extents */
	uint64_t *bound;	     /* bit u set: an extent starts at unit u */
	struct kvr_index_u64 fstart; /* start unit -> node of a free extent */
	struct kvr_index_u64 fend;   /* end unit (exclusive) -> the same */
	uint64_t below_units;	     /* kvr_alloc_prefer_below(); 0: off */
};

/* Snapshot of an allocator's state; all sizes in bytes. */
struct kvr_alloc_stats {
	uint64_t total_bytes; /* managed: pool_bytes rounded down to align */
	uint64_t free_bytes;
	uint64_t used_bytes;
	uint64_t largest_free_bytes; /* biggest single free extent */
	uint64_t free_extents;
	uint64_t used_extents;
	/*
	 * 1 - largest_free / free: 0 when all free space is one extent (or
	 * there is none), close to 1 when it is scattered in small pieces.
	 */
	double fragmentation;
};

/*
 * kvr_alloc_init - manage [0, pool_bytes) in units of @align.
 * @align: a power of two >= KVR_ALLOC_ALIGN_MIN, or 0 for 4096. A tail of
 *         pool_bytes that is not a whole unit is never handed out.
 * Return: 0, -EINVAL (NULL @a, bad align, pool smaller than one unit),
 * -ENOMEM.
 */
int kvr_alloc_init(struct kvr_alloc *a, uint64_t pool_bytes, uint32_t align);

/* kvr_alloc_fini - free the metadata; accepts NULL and a zeroed struct. */
void kvr_alloc_fini(struct kvr_alloc *a);

/*
 * kvr_alloc_reserve - make sure the next put cannot fail with -ENOMEM (a
 * put between used neighbours makes a free extent: one node and a slot in
 * each map). A get never needs memory; @n is kept for the callers that
 * reserve per object and only has to be nonzero for the check.
 * Return: 0 or -ENOMEM (nothing changed).
 */
int kvr_alloc_reserve(struct kvr_alloc *a, uint32_t n);

/*
 * kvr_alloc_get - allocate @bytes (rounded up to align), best fit: the
 * smallest free extent that is large enough, lowest offset among equals.
 * Return: 0 and *off_out set, -EINVAL (@bytes 0, NULL args), -ENOSPC (no
 * free extent is large enough). On error nothing is changed and *off_out
 * is untouched. Never allocates.
 */
int kvr_alloc_get(struct kvr_alloc *a, uint64_t bytes, uint64_t *off_out);

/*
 * kvr_alloc_prefer_below - while a huge-page pool is still being zeroed
 * (server/prefault.c), place new extents so that they end at or below
 * @bytes, the zeroed line, whenever a free extent there is large enough:
 * kvr_alloc_get() then takes the lowest such extent (first fit in address
 * order) when its best fit would cross the line, and the best fit
 * otherwise. 0, or a line at or past the end of the pool, turns it off;
 * kvr_alloc_get() is then exactly best fit again, with one test of a
 * field as its only cost. Never fails and changes no extent.
 */
void kvr_alloc_prefer_below(struct kvr_alloc *a, uint64_t bytes);

/*
 * kvr_alloc_put - free the extent that kvr_alloc_get() returned at @off for
 * the same @bytes. A put of anything else — an offset that is not the
 * start of a live allocation (double put, never allocated, middle of an
 * extent) or a size that rounds to a different length — is refused.
 * Checking the length walks the extent's bits: O(units / 64).
 * Return: 0, or -EINVAL (nothing changed). A put that leaves a free extent
 * between two used ones takes the node kvr_alloc_reserve() (or the last
 * such put) kept ready and then tries to keep the next one ready; only
 * when that failed too does it answer -ENOMEM, with nothing changed.
 */
int kvr_alloc_put(struct kvr_alloc *a, uint64_t off, uint64_t bytes);

/* kvr_alloc_owns - true if [off, off+round(bytes)) is exactly one live
 * allocation. */
bool kvr_alloc_owns(const struct kvr_alloc *a, uint64_t off, uint64_t bytes);

/* kvr_alloc_round - @bytes rounded up to the unit (0 on overflow). */
uint64_t kvr_alloc_round(const struct kvr_alloc *a, uint64_t bytes);

/* kvr_alloc_align - the unit, in bytes. */
uint32_t kvr_alloc_align(const struct kvr_alloc *a);

/* kvr_alloc_free_bytes - free bytes in total (O(1)). */
uint64_t kvr_alloc_free_bytes(const struct kvr_alloc *a);

/* kvr_alloc_largest_free - size in bytes of the largest free extent. */
uint64_t kvr_alloc_largest_free(const struct kvr_alloc *a);

/* kvr_alloc_stats - fill *out (O(log n)). */
void kvr_alloc_stats(const struct kvr_alloc *a, struct kvr_alloc_stats *out);

/*
 * kvr_alloc_audit - walk every extent and check the allocator's invariants
 * (the bitmap's extents tile the range, no two free neighbours, counters,
 * treap order and heap property, both maps <-> free extents). O(units / 64
 * + extents); for tests and debugging.
 * Return: 0, or -ENOTRECOVERABLE with a description of the first
 * violation in @msg (when @msg_len > 0).
 */
int kvr_alloc_audit(const struct kvr_alloc *a, char *msg, size_t msg_len);

/*
 * KVR_AUDIT_FAIL - the way out of an audit (kvr_alloc_audit and the
 * storage engine's, store_audit.c): record the first violation, a printf
 * format and its arguments, in msg (msg_len bytes, in scope) and return
 * -ENOTRECOVERABLE. The walkers own no memory, so a plain return is all.
 */
#define KVR_AUDIT_FAIL(...)                                                    \
	do {                                                                   \
		if (msg_len)                                                   \
			snprintf(msg, msg_len, __VA_ARGS__);                   \
		return -ENOTRECOVERABLE;                                       \
	} while (0)

#endif /* KVR_SERVER_ALLOC_H */
