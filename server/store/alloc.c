/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - kvringd's pool allocator (see alloc.h for the contract).
 *
 * Three structures describe the pool, all in private memory:
 *  - the boundary bitmap: bit u is set when an extent, free or used,
 *    starts at unit u, so every extent runs to the next set bit. These are
 *    boundary tags kept outside the pool, one bit per unit; a used extent
 *    needs nothing more, because its owner holds its offset and length;
 *  - a treap of free extents keyed by (units, start): the lower bound of a
 *    size is the exact best fit, its rightmost node the largest extent,
 *    both in O(log n) expected. Best fit keeps big extents whole for big
 *    requests and, unlike size-class free lists, never answers "no room"
 *    while a large-enough extent exists;
 *  - two hash maps of the free extents, start -> node and end -> node,
 *    through which a put finds the free neighbours it merges with in O(1).
 * A put is validated against the bitmap: an offset that is not the start
 * of a used extent (a free one is in the start map), or a length that does
 * not end exactly at the next boundary, is refused before anything
 * changes. While a huge-page pool is still being zeroed, a get prefers the
 * free extents below the zeroed line to a best fit above it.
 * Nodes live in one array (indices, not pointers, so it can grow by
 * realloc) with a free list, so steady-state get/put never call malloc.
 * This file does not know about objects, keys or eviction (store.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hugemem.h"

#define NIL UINT32_MAX
/* Largest node count: indices must stay below NIL. */
#define MAX_NODES (UINT32_MAX - 1u)

/* xorshift32: treap priorities only need to look random, not be secret. */
static uint32_t next_prio(struct kvr_alloc *a)
{
	uint32_t x = a->rng;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	a->rng = x;
	return x;
}

/* Units covering @bytes, or 0 when @bytes is 0 or the sum overflows. */
static uint64_t units_of(const struct kvr_alloc *a, uint64_t bytes)
{
	uint64_t mask = ((uint64_t)1 << a->shift) - 1;

	return (bytes >> a->shift) + ((bytes & mask) != 0);
}

/* ==== Boundary bitmap ==== */

static inline bool bit_get(const struct kvr_alloc *a, uint64_t u)
{
	return (a->bound[u >> 6] >> (u & 63)) & 1;
}

static inline void bit_set(struct kvr_alloc *a, uint64_t u)
{
	if (u < a->units)
		a->bound[u >> 6] |= 1ull << (u & 63);
}

static inline void bit_clear(struct kvr_alloc *a, uint64_t u)
{
	if (u < a->units)
		a->bound[u >> 6] &= ~(1ull << (u & 63));
}

/* The first boundary in [@from, @limit), or @limit if none; a word at a
 * time, so an extent of n units costs n / 64 loads. */
static uint64_t next_bound(const struct kvr_alloc *a, uint64_t from,
			   uint64_t limit)
{
	uint64_t w, word;

	if (from >= limit)
		return limit;
	w = from >> 6;
	word = a->bound[w] & (~0ull << (from & 63));
	for (;;) {
		if (word) {
			uint64_t u = (w << 6) + (uint64_t)__builtin_ctzll(word);

			return u < limit ? u : limit;
		}
		if (++w << 6 >= limit)
			return limit;
		word = a->bound[w];
	}
}

/*
 * Whether [@start, @start + @units) is exactly one used extent: a boundary
 * at its start that is not a free extent's, none inside, and one at its end
 * (or the end of the pool).
 */
static bool used_extent(const struct kvr_alloc *a, uint64_t start,
			uint64_t units)
{
	uint64_t end = start + units;

	if (units == 0 || start >= a->units || units > a->units - start)
		return false;
	if (!bit_get(a, start) ||
	    kvr_index_u64_find(&a->fstart, start) != KVR_INDEX_NONE)
		return false;
	if (end < a->units && !bit_get(a, end))
		return false;
	return next_bound(a, start + 1, end) == end;
}

/* ==== Node pool ==== */

/* Grow ext[] so that @need nodes fit; new nodes go on the spare list. */
static int nodes_reserve(struct kvr_alloc *a, uint64_t need)
{
	uint64_t ncap;
	struct kvr_alloc_ext *e;

	if (need <= a->cap)
		return 0;
	if (need > MAX_NODES)
		return -ENOMEM;
	ncap = (uint64_t)a->cap * 2;
	if (ncap < need)
		ncap = need;
	if (ncap < 16)
		ncap = 16;
	if (ncap > MAX_NODES)
		ncap = MAX_NODES;
	if (ncap > SIZE_MAX / sizeof(*e))
		return -ENOMEM;
	e = realloc(a->ext, (size_t)ncap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	a->ext = e;
	/* Chain the new nodes onto the spare list, lowest index first. */
	for (uint64_t i = ncap; i-- > a->cap;) {
		e[i].next = a->spare;
		a->spare = (uint32_t)i;
	}
	a->cap = (uint32_t)ncap;
	return 0;
}

/*
 * Room for one more free extent: a spare node and a slot in each map.
 * Return: 0, or -ENOMEM with whatever grew kept as spare capacity.
 */
static int headroom(struct kvr_alloc *a)
{
	int rc = nodes_reserve(a, a->nr_free + 1);

	if (rc == 0)
		rc = kvr_index_u64_reserve(&a->fstart, 1);
	if (rc == 0)
		rc = kvr_index_u64_reserve(&a->fend, 1);
	return rc;
}

/* Take a node from the spare list; headroom() made sure there is one. */
static uint32_t node_take(struct kvr_alloc *a)
{
	uint32_t x = a->spare;

	a->spare = a->ext[x].next;
	a->ext[x].next = NIL;
	a->ext[x].left = a->ext[x].right = NIL;
	a->ext[x].prio = next_prio(a);
	return x;
}

static void node_give(struct kvr_alloc *a, uint32_t x)
{
	a->ext[x].next = a->spare;
	a->ext[x].units = 0;
	a->spare = x;
}

/* Enter node @x (start and units set) as a free extent: maps and treap. */
static void free_enter(struct kvr_alloc *a, uint32_t x)
{
	(void)kvr_index_u64_insert(&a->fstart, a->ext[x].start, x);
	(void)kvr_index_u64_insert(&a->fend, a->ext[x].start + a->ext[x].units,
				   x);
}

/* Take free extent @x out of both maps (the treap is the caller's). */
static void free_leave(struct kvr_alloc *a, uint32_t x)
{
	(void)kvr_index_u64_remove(&a->fstart, a->ext[x].start);
	(void)kvr_index_u64_remove(&a->fend, a->ext[x].start + a->ext[x].units);
}

/* ==== Treap of free extents, keyed by (units, start) ==== */

static inline int key_less(const struct kvr_alloc_ext *x,
			   const struct kvr_alloc_ext *y)
{
	return x->units < y->units ||
	       (x->units == y->units && x->start < y->start);
}

/*
 * Split the subtree @t into keys below node @x (into *l) and keys above
 * (into *r). Iterative: l and r always point at the link to fill next.
 */
static void treap_split(struct kvr_alloc *a, uint32_t t, uint32_t x,
			uint32_t *l, uint32_t *r)
{
	struct kvr_alloc_ext *e = a->ext;

	while (t != NIL) {
		if (key_less(&e[t], &e[x])) {
			*l = t;
			l = &e[t].right;
			t = e[t].right;
		} else {
			*r = t;
			r = &e[t].left;
			t = e[t].left;
		}
	}
	*l = NIL;
	*r = NIL;
}

/* Merge @l and @r (every key of l below every key of r) into *link. */
static void treap_merge(struct kvr_alloc *a, uint32_t l, uint32_t r,
			uint32_t *link)
{
	struct kvr_alloc_ext *e = a->ext;

	while (l != NIL && r != NIL) {
		if (e[l].prio > e[r].prio) {
			*link = l;
			link = &e[l].right;
			l = e[l].right;
		} else {
			*link = r;
			link = &e[r].left;
			r = e[r].left;
		}
	}
	*link = l != NIL ? l : r;
}

/* Insert node @x (its key fields set, not in the treap). */
static void treap_insert(struct kvr_alloc *a, uint32_t x)
{
	struct kvr_alloc_ext *e = a->ext;
	uint32_t *link = &a->root;

	/* Descend while the existing node outranks x, then split there. */
	while (*link != NIL && e[*link].prio >= e[x].prio)
		link = key_less(&e[x], &e[*link]) ? &e[*link].left
						  : &e[*link].right;
	treap_split(a, *link, x, &e[x].left, &e[x].right);
	*link = x;
}

/* Remove node @x, which is in the treap (keys are unique). */
static void treap_remove(struct kvr_alloc *a, uint32_t x)
{
	struct kvr_alloc_ext *e = a->ext;
	uint32_t *link = &a->root;

	while (*link != x)
		link = key_less(&e[x], &e[*link]) ? &e[*link].left
						  : &e[*link].right;
	treap_merge(a, e[x].left, e[x].right, link);
	e[x].left = e[x].right = NIL;
}

/* Best fit: the smallest (units, start) with units >= @units, or NIL. */
static uint32_t treap_lower_bound(const struct kvr_alloc *a, uint64_t units)
{
	const struct kvr_alloc_ext *e = a->ext;
	uint32_t t = a->root, best = NIL;

	while (t != NIL) {
		if (e[t].units >= units) {
			best = t;
			t = e[t].left;
		} else {
			t = e[t].right;
		}
	}
	return best;
}

/*
 * Most extents a below-the-line search looks at before it gives up and
 * keeps the best fit: bounds a prepare's cost while the zeroing runs
 * (the walk is in address order, and a young pool has few extents below
 * its zeroed line).
 */
#define BELOW_WALK_MAX 4096u

/*
 * The lowest free extent of at least @units that ends at or below the
 * preferred line, or @fallback (the best fit) when there is none within
 * BELOW_WALK_MAX extents of the start. Walks the boundaries in address
 * order; the start map tells a free extent from a used one.
 */
static uint32_t below_fit(const struct kvr_alloc *a, uint64_t units,
			  uint32_t fallback)
{
	unsigned steps = 0;

	for (uint64_t u = 0; u < a->units && steps < BELOW_WALK_MAX;
	     u = next_bound(a, u + 1, a->units), steps++) {
		uint32_t x;

		if (u + units > a->below_units)
			break; /* every later extent starts higher still */
		x = kvr_index_u64_find(&a->fstart, u);
		if (x != KVR_INDEX_NONE && a->ext[x].units >= units)
			return x;
	}
	return fallback;
}

/* ==== Public API ==== */

int kvr_alloc_init(struct kvr_alloc *a, uint64_t pool_bytes, uint32_t align)
{
	uint32_t shift = 0, x;
	uint64_t words;
	int rc;

	if (!a)
		return -EINVAL;
	if (align == 0)
		align = KVR_ALLOC_ALIGN_DEFAULT;
	if (align < KVR_ALLOC_ALIGN_MIN || (align & (align - 1)))
		return -EINVAL;
	while ((1u << shift) != align)
		shift++;
	if ((pool_bytes >> shift) == 0)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->spare = NIL;
	a->root = NIL;
	a->rng = 0x9E3779B9u;
	a->shift = shift;
	a->units = pool_bytes >> shift;
	words = (a->units + 63) / 64;
	if (words > SIZE_MAX / sizeof(uint64_t))
		return -ENOMEM;
	a->bound = calloc((size_t)words, sizeof(uint64_t));
	if (!a->bound)
		return -ENOMEM;
	kvr_hugemem_advise(a->bound, (size_t)words * sizeof(uint64_t));
	rc = kvr_index_u64_init(&a->fstart, 64, 0x6b7672616c6c6f63ull);
	if (rc == 0)
		rc = kvr_index_u64_init(&a->fend, 64, 0x6b7672656e647321ull);
	if (rc == 0)
		rc = nodes_reserve(a, 64);
	if (rc < 0) {
		kvr_alloc_fini(a);
		return rc;
	}
	/* One free extent covers everything. */
	x = node_take(a);
	a->ext[x].start = 0;
	a->ext[x].units = a->units;
	bit_set(a, 0);
	free_enter(a, x);
	treap_insert(a, x);
	a->free_units = a->units;
	a->nr_free = 1;
	return 0;
}

void kvr_alloc_fini(struct kvr_alloc *a)
{
	if (!a)
		return;
	free(a->ext);
	free(a->bound);
	kvr_index_u64_fini(&a->fstart);
	kvr_index_u64_fini(&a->fend);
	memset(a, 0, sizeof(*a));
}

int kvr_alloc_reserve(struct kvr_alloc *a, uint32_t n)
{
	return n ? headroom(a) : 0;
}

int kvr_alloc_get(struct kvr_alloc *a, uint64_t bytes, uint64_t *off_out)
{
	uint64_t units, start;
	uint32_t x;
	struct kvr_alloc_ext *e;

	if (!a || !off_out || bytes == 0)
		return -EINVAL;
	units = units_of(a, bytes);
	if (units > a->free_units)
		return -ENOSPC;
	x = treap_lower_bound(a, units);
	if (x == NIL)
		return -ENOSPC;
	/* While the pool is zeroed: below the line if there is room. */
	if (a->below_units && a->ext[x].start + units > a->below_units)
		x = below_fit(a, units, x);
	/* Nothing below can fail: a split moves one start-map entry (a
	 * remove, then an insert into the room it left). */
	e = a->ext;
	start = e[x].start;
	treap_remove(a, x);
	free_leave(a, x);
	if (e[x].units > units) {
		/* Split: the low end is handed out, x keeps the rest. */
		e[x].start += units;
		e[x].units -= units;
		bit_set(a, e[x].start);
		free_enter(a, x);
		treap_insert(a, x);
	} else {
		node_give(a, x);
		a->nr_free--;
	}
	a->free_units -= units;
	a->nr_used++;
	*off_out = start << a->shift;
	return 0;
}

void kvr_alloc_prefer_below(struct kvr_alloc *a, uint64_t bytes)
{
	uint64_t u = bytes >> a->shift; /* whole units below the line */

	a->below_units = u >= a->units ? 0 : u;
}

int kvr_alloc_put(struct kvr_alloc *a, uint64_t off, uint64_t bytes)
{
	uint64_t mask, start, units, end;
	uint32_t l = KVR_INDEX_NONE, r = KVR_INDEX_NONE, x;
	struct kvr_alloc_ext *e;

	if (!a || bytes == 0)
		return -EINVAL;
	mask = ((uint64_t)1 << a->shift) - 1;
	if (off & mask)
		return -EINVAL;
	start = off >> a->shift;
	units = units_of(a, bytes);
	if (!used_extent(a, start, units))
		return -EINVAL; /* double put, never allocated, wrong length */
	end = start + units;
	if (start > 0)
		l = kvr_index_u64_find(&a->fend, start);
	if (end < a->units)
		r = kvr_index_u64_find(&a->fstart, end);
	/* Between two used extents: the one case that needs a node. */
	if (l == KVR_INDEX_NONE && r == KVR_INDEX_NONE && headroom(a) < 0)
		return -ENOMEM;
	e = a->ext;
	a->nr_used--;
	a->free_units += units;
	if (l != KVR_INDEX_NONE) {
		/* The free left neighbour absorbs the extent (and r). */
		treap_remove(a, l);
		free_leave(a, l);
		e[l].units += units;
		bit_clear(a, start);
		if (r != KVR_INDEX_NONE) {
			treap_remove(a, r);
			free_leave(a, r);
			e[l].units += e[r].units;
			bit_clear(a, end);
			node_give(a, r);
			a->nr_free--;
		}
		x = l;
	} else if (r != KVR_INDEX_NONE) {
		/* The free right neighbour grows down over it. */
		treap_remove(a, r);
		free_leave(a, r);
		e[r].start = start;
		e[r].units += units;
		bit_clear(a, end);
		x = r;
	} else {
		x = node_take(a);
		e[x].start = start;
		e[x].units = units;
		a->nr_free++;
	}
	free_enter(a, x);
	treap_insert(a, x);
	/* Keep the next such put's node ready; a failure here is retried
	 * there, and by kvr_alloc_reserve(). */
	(void)headroom(a);
	return 0;
}

bool kvr_alloc_owns(const struct kvr_alloc *a, uint64_t off, uint64_t bytes)
{
	uint64_t mask = ((uint64_t)1 << a->shift) - 1;

	if (off & mask || bytes == 0)
		return false;
	return used_extent(a, off >> a->shift, units_of(a, bytes));
}

uint64_t kvr_alloc_round(const struct kvr_alloc *a, uint64_t bytes)
{
	uint64_t u = units_of(a, bytes);

	if (u > (UINT64_MAX >> a->shift))
		return 0;
	return u << a->shift;
}

uint32_t kvr_alloc_align(const struct kvr_alloc *a)
{
	return 1u << a->shift;
}

uint64_t kvr_alloc_free_bytes(const struct kvr_alloc *a)
{
	return a->free_units << a->shift;
}

uint64_t kvr_alloc_largest_free(const struct kvr_alloc *a)
{
	uint32_t t = a->root;

	if (t == NIL)
		return 0;
	while (a->ext[t].right != NIL)
		t = a->ext[t].right;
	return a->ext[t].units << a->shift;
}

void kvr_alloc_stats(const struct kvr_alloc *a, struct kvr_alloc_stats *out)
{
	struct kvr_alloc_stats st = {0};

	st.total_bytes = a->units << a->shift;
	st.free_bytes = a->free_units << a->shift;
	st.used_bytes = st.total_bytes - st.free_bytes;
	st.largest_free_bytes = kvr_alloc_largest_free(a);
	st.free_extents = a->nr_free;
	st.used_extents = a->nr_used;
	st.fragmentation = st.free_bytes ? 1.0 - (double)st.largest_free_bytes /
						     (double)st.free_bytes
					 : 0.0;
	*out = st;
}

/* ==== Audit ==== */

#define FAIL KVR_AUDIT_FAIL /* alloc.h */

/*
 * Check the treap under @t: BST order within (lo, hi) bounds, heap order
 * on priorities, only nodes the start map names as free extents. Counts
 * nodes into *n. The depth bound stops a corrupt (cyclic) tree from
 * recursing forever.
 */
static int audit_treap(const struct kvr_alloc *a, uint32_t t,
		       const struct kvr_alloc_ext *lo,
		       const struct kvr_alloc_ext *hi, unsigned depth,
		       uint64_t *n, char *msg, size_t msg_len)
{
	const struct kvr_alloc_ext *e;
	int rc;

	if (t == NIL)
		return 0;
	if (t >= a->cap || depth > 4096 || *n > a->nr_free)
		FAIL("alloc: treap node %u out of range or cycle", t);
	e = &a->ext[t];
	if (kvr_index_u64_find(&a->fstart, e->start) != t)
		FAIL("alloc: treap node %u is not a free extent", t);
	if ((lo && !key_less(lo, e)) || (hi && !key_less(e, hi)))
		FAIL("alloc: treap order broken at node %u", t);
	if ((e->left != NIL && a->ext[e->left].prio > e->prio) ||
	    (e->right != NIL && a->ext[e->right].prio > e->prio))
		FAIL("alloc: treap heap order broken at node %u", t);
	(*n)++;
	rc = audit_treap(a, e->left, lo, e, depth + 1, n, msg, msg_len);
	if (rc < 0)
		return rc;
	return audit_treap(a, e->right, e, hi, depth + 1, n, msg, msg_len);
}

int kvr_alloc_audit(const struct kvr_alloc *a, char *msg, size_t msg_len)
{
	uint64_t nfree = 0, nused = 0, ufree = 0, ntreap = 0;
	bool prev_free = false;
	int rc;

	/* The boundaries tile [0, units): every extent runs to the next. */
	if (!bit_get(a, 0))
		FAIL("alloc: no extent starts at unit 0");
	for (uint64_t u = 0, v; u < a->units; u = v) {
		uint32_t x = kvr_index_u64_find(&a->fstart, u);

		v = next_bound(a, u + 1, a->units);
		if (x == KVR_INDEX_NONE) {
			nused++;
			prev_free = false;
			continue;
		}
		if (x >= a->cap || a->ext[x].start != u ||
		    a->ext[x].units != v - u)
			FAIL("alloc: free extent at unit %llu+%llu, its node "
			     "%u says %llu+%llu",
			     (unsigned long long)u, (unsigned long long)(v - u),
			     x,
			     (unsigned long long)(x < a->cap ? a->ext[x].start
							     : 0),
			     (unsigned long long)(x < a->cap ? a->ext[x].units
							     : 0));
		if (kvr_index_u64_find(&a->fend, v) != x)
			FAIL("alloc: free extent at unit %llu not in the end "
			     "map under %llu",
			     (unsigned long long)u, (unsigned long long)v);
		if (prev_free)
			FAIL("alloc: free extent at unit %llu follows a free "
			     "one: not merged",
			     (unsigned long long)u);
		prev_free = true;
		nfree++;
		ufree += v - u;
	}
	if (nfree != a->nr_free || nused != a->nr_used ||
	    ufree != a->free_units)
		FAIL("alloc: counters free=%llu/%llu used=%llu/%llu "
		     "free_units=%llu/%llu (walked/recorded)",
		     (unsigned long long)nfree, (unsigned long long)a->nr_free,
		     (unsigned long long)nused, (unsigned long long)a->nr_used,
		     (unsigned long long)ufree,
		     (unsigned long long)a->free_units);
	if (kvr_index_u64_count(&a->fstart) != nfree ||
	    kvr_index_u64_count(&a->fend) != nfree)
		FAIL("alloc: maps hold %llu and %llu entries, %llu free "
		     "extents",
		     (unsigned long long)kvr_index_u64_count(&a->fstart),
		     (unsigned long long)kvr_index_u64_count(&a->fend),
		     (unsigned long long)nfree);
	rc = audit_treap(a, a->root, NULL, NULL, 0, &ntreap, msg, msg_len);
	if (rc < 0)
		return rc;
	if (ntreap != nfree)
		FAIL("alloc: treap holds %llu extents, bitmap %llu free",
		     (unsigned long long)ntreap, (unsigned long long)nfree);
	return 0;
}
