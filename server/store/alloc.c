/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - kvringd's pool allocator (see alloc.h for the contract).
 *
 * Three structures describe the pool, all in private memory:
 *  - the extent list: every extent, free or used, in address order, with
 *    prev/next links. These are boundary tags kept outside the pool, so a
 *    put finds its neighbours in O(1) and merges with the free ones;
 *  - a treap of free extents keyed by (units, start): the lower bound of a
 *    size is the exact best fit, its rightmost node the largest extent,
 *    both in O(log n) expected. Best fit keeps big extents whole for big
 *    requests and, unlike size-class free lists, never answers "no room"
 *    while a large-enough extent exists;
 *  - a hash map start -> node of the used extents, which is how a put is
 *    validated: an offset that is not the start of a live allocation, or a
 *    length that does not match it, is refused before anything changes.
 * While a huge-page pool is still being zeroed, a get prefers the free
 * extents below the zeroed line to a best fit above it (prefer_below).
 * Nodes live in one array (indices, not pointers, so it can grow by
 * realloc) with a free list, so steady-state get/put never call malloc.
 * This file does not know about objects, keys or eviction (store.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

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
		e[i].is_free = 0;
		a->spare = (uint32_t)i;
	}
	a->cap = (uint32_t)ncap;
	return 0;
}

/* Take a node from the spare list; the caller reserved it beforehand. */
static uint32_t node_take(struct kvr_alloc *a)
{
	uint32_t x = a->spare;

	a->spare = a->ext[x].next;
	a->ext[x].prev = a->ext[x].next = NIL;
	a->ext[x].left = a->ext[x].right = NIL;
	a->ext[x].prio = next_prio(a);
	return x;
}

static void node_give(struct kvr_alloc *a, uint32_t x)
{
	a->ext[x].next = a->spare;
	a->ext[x].is_free = 0;
	a->ext[x].units = 0;
	a->spare = x;
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
 * BELOW_WALK_MAX extents of the start.
 */
static uint32_t below_fit(const struct kvr_alloc *a, uint64_t units,
			  uint32_t fallback)
{
	const struct kvr_alloc_ext *e = a->ext;
	unsigned steps = 0;

	for (uint32_t x = a->head; x != NIL && steps < BELOW_WALK_MAX;
	     x = e[x].next, steps++) {
		if (e[x].start + units > a->below_units)
			break; /* every later extent starts higher still */
		if (e[x].is_free && e[x].units >= units)
			return x;
	}
	return fallback;
}

/* ==== Public API ==== */

int kvr_alloc_init(struct kvr_alloc *a, uint64_t pool_bytes, uint32_t align)
{
	uint32_t shift = 0;
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
	rc = kvr_index_u64_init(&a->used, 1024, 0x6b7672616c6c6f63ull);
	if (rc < 0)
		return rc;
	rc = nodes_reserve(a, 64);
	if (rc < 0) {
		kvr_index_u64_fini(&a->used);
		return rc;
	}
	/* One free extent covers everything. */
	a->head = node_take(a);
	a->ext[a->head].start = 0;
	a->ext[a->head].units = a->units;
	a->ext[a->head].is_free = 1;
	treap_insert(a, a->head);
	a->free_units = a->units;
	a->nr_free = 1;
	return 0;
}

void kvr_alloc_fini(struct kvr_alloc *a)
{
	if (!a)
		return;
	free(a->ext);
	kvr_index_u64_fini(&a->used);
	memset(a, 0, sizeof(*a));
}

int kvr_alloc_reserve(struct kvr_alloc *a, uint32_t n)
{
	int rc = nodes_reserve(a, a->nr_free + a->nr_used + (uint64_t)n);

	if (rc < 0)
		return rc;
	return kvr_index_u64_reserve(&a->used, n);
}

int kvr_alloc_get(struct kvr_alloc *a, uint64_t bytes, uint64_t *off_out)
{
	uint64_t units;
	uint32_t x;
	struct kvr_alloc_ext *e;
	int rc;

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
	/* Everything that can fail happens before the first change. */
	rc = kvr_alloc_reserve(a, 1);
	if (rc < 0)
		return rc;
	e = a->ext;
	treap_remove(a, x);
	if (e[x].units > units) {
		/* Split: x keeps the low end, a new free node the rest. */
		uint32_t y = node_take(a);

		e[y].start = e[x].start + units;
		e[y].units = e[x].units - units;
		e[y].is_free = 1;
		e[y].prev = x;
		e[y].next = e[x].next;
		if (e[x].next != NIL)
			e[e[x].next].prev = y;
		e[x].next = y;
		e[x].units = units;
		treap_insert(a, y);
	} else {
		a->nr_free--;
	}
	e[x].is_free = 0;
	a->free_units -= units;
	a->nr_used++;
	/* Cannot fail: reserved above, and the start is not in the map. */
	(void)kvr_index_u64_insert(&a->used, e[x].start, x);
	*off_out = e[x].start << a->shift;
	return 0;
}

void kvr_alloc_prefer_below(struct kvr_alloc *a, uint64_t bytes)
{
	uint64_t u = bytes >> a->shift; /* whole units below the line */

	a->below_units = u >= a->units ? 0 : u;
}

/* Unlink @x from the address list (its neighbours are already merged). */
static void list_unlink(struct kvr_alloc *a, uint32_t x)
{
	struct kvr_alloc_ext *e = a->ext;

	if (e[x].prev != NIL)
		e[e[x].prev].next = e[x].next;
	if (e[x].next != NIL)
		e[e[x].next].prev = e[x].prev;
}

int kvr_alloc_put(struct kvr_alloc *a, uint64_t off, uint64_t bytes)
{
	uint64_t mask, start;
	uint32_t x, n, p;
	struct kvr_alloc_ext *e;

	if (!a || bytes == 0)
		return -EINVAL;
	mask = ((uint64_t)1 << a->shift) - 1;
	if (off & mask)
		return -EINVAL;
	start = off >> a->shift;
	x = kvr_index_u64_find(&a->used, start);
	if (x == NIL)
		return -EINVAL; /* double put, or never allocated here */
	e = a->ext;
	if (units_of(a, bytes) != e[x].units)
		return -EINVAL; /* not the length that was allocated */
	(void)kvr_index_u64_remove(&a->used, start);
	a->nr_used--;
	a->free_units += e[x].units;
	/* Absorb a free right neighbour into x. */
	n = e[x].next;
	if (n != NIL && e[n].is_free) {
		treap_remove(a, n);
		e[x].units += e[n].units;
		list_unlink(a, n);
		node_give(a, n);
		a->nr_free--;
	}
	/* Let a free left neighbour absorb x (its key changes: re-insert). */
	p = e[x].prev;
	if (p != NIL && e[p].is_free) {
		treap_remove(a, p);
		e[p].units += e[x].units;
		list_unlink(a, x);
		node_give(a, x);
		a->nr_free--;
		x = p;
	}
	e[x].is_free = 1;
	treap_insert(a, x);
	a->nr_free++;
	return 0;
}

bool kvr_alloc_owns(const struct kvr_alloc *a, uint64_t off, uint64_t bytes)
{
	uint64_t mask = ((uint64_t)1 << a->shift) - 1;
	uint32_t x;

	if (off & mask || bytes == 0)
		return false;
	x = kvr_index_u64_find(&a->used, off >> a->shift);
	return x != NIL && a->ext[x].units == units_of(a, bytes);
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
 * on priorities, only free nodes. Counts nodes into *n. The depth bound
 * stops a corrupt (cyclic) tree from recursing forever.
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
	if (!e->is_free)
		FAIL("alloc: used extent %u in free treap", t);
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
	uint64_t pos = 0, nfree = 0, nused = 0, ufree = 0, ntreap = 0;
	uint32_t x, prev = NIL;
	int rc;

	/* The address list tiles [0, units) without gaps or overlaps. */
	for (x = a->head; x != NIL; prev = x, x = a->ext[x].next) {
		const struct kvr_alloc_ext *e = &a->ext[x];

		if (x >= a->cap || nfree + nused > a->nr_free + a->nr_used)
			FAIL("alloc: extent list out of range or cyclic");
		if (e->prev != prev)
			FAIL("alloc: extent %u prev link %u, expected %u", x,
			     e->prev, prev);
		if (e->start != pos || e->units == 0)
			FAIL("alloc: extent %u at unit %llu+%llu, expected "
			     "start %llu",
			     x, (unsigned long long)e->start,
			     (unsigned long long)e->units,
			     (unsigned long long)pos);
		if (e->is_free) {
			if (prev != NIL && a->ext[prev].is_free)
				FAIL("alloc: free extents at units %llu and "
				     "%llu not merged",
				     (unsigned long long)a->ext[prev].start,
				     (unsigned long long)e->start);
			nfree++;
			ufree += e->units;
		} else {
			if (kvr_index_u64_find(&a->used, e->start) != x)
				FAIL("alloc: used extent at unit %llu not in "
				     "map",
				     (unsigned long long)e->start);
			nused++;
		}
		pos += e->units;
	}
	if (pos != a->units)
		FAIL("alloc: extents cover %llu units, pool has %llu",
		     (unsigned long long)pos, (unsigned long long)a->units);
	if (nfree != a->nr_free || nused != a->nr_used ||
	    ufree != a->free_units)
		FAIL("alloc: counters free=%llu/%llu used=%llu/%llu "
		     "free_units=%llu/%llu (walked/recorded)",
		     (unsigned long long)nfree, (unsigned long long)a->nr_free,
		     (unsigned long long)nused, (unsigned long long)a->nr_used,
		     (unsigned long long)ufree,
		     (unsigned long long)a->free_units);
	if (kvr_index_u64_count(&a->used) != nused)
		FAIL("alloc: map holds %llu entries, %llu used extents",
		     (unsigned long long)kvr_index_u64_count(&a->used),
		     (unsigned long long)nused);
	rc = audit_treap(a, a->root, NULL, NULL, 0, &ntreap, msg, msg_len);
	if (rc < 0)
		return rc;
	if (ntreap != nfree)
		FAIL("alloc: treap holds %llu extents, list %llu free",
		     (unsigned long long)ntreap, (unsigned long long)nfree);
	return 0;
}
