/* SPDX-License-Identifier: MIT */
/*
 * disk_index.c - the disk tier's records in memory: a chained hash index
 * from (namespace fingerprint, key) to record, the LRU of indexed records
 * (head: most recently used), the free list, and taking a record for a
 * write (free first, else the LRU tail's, evicted). Records are all one
 * size, so the LRU by records is the LRU by bytes of the file. No I/O.
 */
#include <errno.h>
#include <stdlib.h>

#include "disk_int.h"

/* The namespace is mixed in, so one key in two namespaces lands apart. */
static uint32_t bucket(const struct kvr_disk *d, uint64_t fp, uint64_t lo)
{
	return (uint32_t)((lo ^ (fp * 0x9e3779b97f4a7c15ull)) & d->hmask);
}

/* A power of two of buckets, at least one per record: chains stay about
 * one long and bucket() masks. Records start REC_UNKNOWN (calloc).
 * Return: 0 or -ENOMEM (kvr__disk_index_fini() frees what was made). */
int kvr__disk_index_init(struct kvr_disk *d)
{
	uint32_t nb = 1;

	while (nb < d->nrec)
		nb <<= 1;
	d->rec = calloc(d->nrec, sizeof(*d->rec));
	d->hash = malloc((size_t)nb * sizeof(*d->hash));
	if (!d->rec || !d->hash)
		return -ENOMEM;
	for (uint32_t i = 0; i < nb; i++)
		d->hash[i] = NIL;
	d->hmask = nb - 1;
	d->lru_head = d->lru_tail = d->free_head = NIL;
	return 0;
}

void kvr__disk_index_fini(struct kvr_disk *d)
{
	free(d->rec);
	free(d->hash);
	d->rec = NULL;
	d->hash = NULL;
}

/* Only VALID records are on a chain: one being written is not found. */
uint32_t kvr__disk_index_find(const struct kvr_disk *d, uint64_t ns_fp,
			      uint64_t lo, uint64_t hi)
{
	for (uint32_t r = d->hash[bucket(d, ns_fp, lo)]; r != NIL;
	     r = d->rec[r].hnext) {
		const struct rec *x = &d->rec[r];

		if (x->lo == lo && x->hi == hi && x->ns_fp == ns_fp)
			return r;
	}
	return NIL;
}

static void lru_unlink(struct kvr_disk *d, uint32_t r)
{
	struct rec *x = &d->rec[r];

	if (x->prev != NIL)
		d->rec[x->prev].next = x->next;
	else
		d->lru_head = x->next;
	if (x->next != NIL)
		d->rec[x->next].prev = x->prev;
	else
		d->lru_tail = x->prev;
	x->prev = x->next = NIL;
}

/* The tail: a record found by the rebuild scan, of unknown recency, is
 * colder than any written or read since the start. */
static void lru_push_tail(struct kvr_disk *d, uint32_t r)
{
	struct rec *x = &d->rec[r];

	x->next = NIL;
	x->prev = d->lru_tail;
	if (d->lru_tail != NIL)
		d->rec[d->lru_tail].next = r;
	d->lru_tail = r;
	if (d->lru_head == NIL)
		d->lru_head = r;
}

static void lru_push_head(struct kvr_disk *d, uint32_t r)
{
	struct rec *x = &d->rec[r];

	x->prev = NIL;
	x->next = d->lru_head;
	if (d->lru_head != NIL)
		d->rec[d->lru_head].prev = r;
	d->lru_head = r;
	if (d->lru_tail == NIL)
		d->lru_tail = r;
}

/* A read makes @r the most recently used: the LRU orders records by
 * their last write or read. */
void kvr__disk_lru_touch(struct kvr_disk *d, uint32_t r)
{
	if (d->lru_head == r)
		return;
	lru_unlink(d, r);
	lru_push_head(d, r);
}

/* Singly linked through next; taken before anything is evicted. */
void kvr__disk_free_push(struct kvr_disk *d, uint32_t r)
{
	d->rec[r].state = REC_FREE;
	d->rec[r].next = d->free_head;
	d->free_head = r;
}

void kvr__disk_index_add(struct kvr_disk *d, uint32_t r, bool cold)
{
	struct rec *x = &d->rec[r];
	uint32_t old = kvr__disk_index_find(d, x->ns_fp, x->lo, x->hi);
	uint32_t b;

	if (old != NIL) {
		/* Two copies of one key: the newer wins (same bytes, as a
		 * key names its content, but only one may be indexed). */
		if (d->rec[old].seq > x->seq) {
			kvr__disk_free_push(d, r);
			return;
		}
		kvr__disk_index_drop(d, old);
	}
	b = bucket(d, x->ns_fp, x->lo);
	x->hnext = d->hash[b];
	d->hash[b] = r;
	x->state = REC_VALID;
	if (cold)
		lru_push_tail(d, r);
	else
		lru_push_head(d, r);
	d->st.objects++;
	d->st.used_bytes += x->len;
}

void kvr__disk_index_drop(struct kvr_disk *d, uint32_t r)
{
	struct rec *x = &d->rec[r];
	uint32_t *p = &d->hash[bucket(d, x->ns_fp, x->lo)];

	while (*p != r)
		p = &d->rec[*p].hnext;
	*p = x->hnext;
	lru_unlink(d, r);
	d->st.objects--;
	d->st.used_bytes -= x->len;
	/* A read still moves its bytes into a slot: not rewritten until it
	 * ends, it waits as DEAD and read_done() frees it. */
	if (x->readers)
		x->state = REC_DEAD;
	else
		kvr__disk_free_push(d, r);
}

void kvr__disk_index_lose(struct kvr_disk *d, uint32_t r)
{
	const struct rec *x = &d->rec[r];
	const struct kvr_key k = {.lo = x->lo, .hi = x->hi};

	kvr__disk_index_drop(d, r);
	if (d->on_drop)
		d->on_drop(d->drop_arg, x->ns_fp, &k);
}

void kvr_disk_on_drop(struct kvr_disk *d, kvr_disk_drop_fn fn, void *arg)
{
	d->on_drop = fn;
	d->drop_arg = arg;
}

/* Nothing is evicted while a record is free. A record a read holds is
 * skipped: its bytes are on their way into a pool slot. */
uint32_t kvr__disk_take(struct kvr_disk *d)
{
	uint32_t r = d->free_head;

	if (r != NIL) {
		d->free_head = d->rec[r].next;
		return r;
	}
	/* The coldest record no read holds. */
	for (r = d->lru_tail; r != NIL && d->rec[r].readers; r = d->rec[r].prev)
		;
	if (r == NIL)
		return NIL;
	kvr__disk_index_lose(d, r);
	d->st.evictions++;
	r = d->free_head; /* index_drop pushed it */
	d->free_head = d->rec[r].next;
	return r;
}
