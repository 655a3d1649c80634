/* SPDX-License-Identifier: MIT */
/*
 * ring.c - the SPSC record ring: format, attach, the out-of-line (slow)
 * halves of the producer's claim and the consumer's peek, and the read-only
 * check used by the inspector. The inline fast paths, commit and release
 * live in <kvring/ring.h>. Positions are free-running uint64 byte
 * counters compared only by unsigned difference; the data offset of
 * position p is p & mask.
 * Every value read from the peer's side of the shared memory is validated
 * before it is used: the peer may be another, hostile process. This file
 * makes no system call, allocates nothing and prints nothing; it does not
 * know about doorbells (the caller's fences F1/F2 wrap kvr_ring_empty()).
 * The ordering argument for each labelled access is in docs/ring.md.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <kvring/ring.h>

/* The layout is an ABI shared between processes: pin it. */
_Static_assert(offsetof(struct kvr_ring_shm, magic) == 0, "ABI: docs/ring.md");
_Static_assert(offsetof(struct kvr_ring_shm, capacity) == 4, "ABI");
_Static_assert(offsetof(struct kvr_ring_shm, high_water) == 16, "ABI");
_Static_assert(offsetof(struct kvr_ring_shm, tail) == 128,
	       "tail on its own 128-byte block");
_Static_assert(offsetof(struct kvr_ring_shm, head) == 256,
	       "head on its own 128-byte block");
_Static_assert(offsetof(struct kvr_ring_shm, consumer_flags) == 264,
	       "consumer_flags in the consumer's block, beside head");
_Static_assert(offsetof(struct kvr_ring_shm, data) == KVR_RING_DATA_OFF,
	       "data after the three blocks");
_Static_assert(sizeof(struct kvr_ring_shm) == KVR_RING_DATA_OFF, "ABI");
_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
	       "shm atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shm atomics must be lock-free");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && _Alignof(_Atomic uint64_t) == 8,
	       "a header word is a plain aligned 64-bit word");

static inline uint64_t round8(uint64_t n)
{
	return (n + (KVR_RING_ALIGN - 1)) & ~(uint64_t)(KVR_RING_ALIGN - 1);
}

/*
 * The record header is accessed as one atomic word (kvr__ring_hdr() in
 * ring.h) so that a hostile or racing peer can never make us read it twice
 * with different results (the compiler may not split or repeat an atomic
 * load), and so that ThreadSanitizer sees no race on it. The word is
 * 8-aligned because data[] is at offset 384 of an 8-aligned mapping and
 * every record is 8-aligned.
 */
static inline const _Atomic uint64_t *chdr_at(const unsigned char *data,
					      uint64_t off)
{
	return (const _Atomic uint64_t *)(const void *)(data + off);
}

size_t kvr_ring_shm_bytes(uint32_t capacity)
{
	return (size_t)KVR_RING_DATA_OFF + capacity;
}

/* Checks shared by format, attach and check; nothing is touched. */
static int check_args(const void *mem, size_t mem_bytes, uint32_t capacity)
{
	if (!mem || ((uintptr_t)mem & 7u) != 0)
		return -EINVAL;
	if (capacity < KVR_RING_MIN_CAP || capacity > KVR_RING_MAX_CAP ||
	    (capacity & (capacity - 1)) != 0)
		return -EINVAL;
	if (mem_bytes < kvr_ring_shm_bytes(capacity))
		return -EINVAL;
	return 0;
}

int kvr_ring_format_at(void *mem, size_t mem_bytes, uint32_t capacity,
		       uint64_t start_pos)
{
	struct kvr_ring_shm *shm = mem;
	int rc;

	rc = check_args(mem, mem_bytes, capacity);
	if (rc < 0)
		return rc;
	if (start_pos & (KVR_RING_ALIGN - 1))
		return -EINVAL;
	/*
	 * Relaxed: nobody may attach before the magic below is stored; the
	 * release on it (R0) publishes all of these stores together.
	 */
	atomic_store_explicit(&shm->magic, 0, memory_order_relaxed);
	atomic_store_explicit(&shm->capacity, capacity, memory_order_relaxed);
	shm->hdr_bytes = KVR_RING_DATA_OFF;
	shm->rec_align = KVR_RING_ALIGN;
	atomic_store_explicit(&shm->high_water, 0, memory_order_relaxed);
	atomic_store_explicit(&shm->tail, start_pos, memory_order_relaxed);
	atomic_store_explicit(&shm->head, start_pos, memory_order_relaxed);
	atomic_store_explicit(&shm->consumer_flags, 0, memory_order_relaxed);
	/* Free space is all zero: the consumer takes a non-zero header
	 * word at its cursor for a record (docs/ring.md). Published by R0
	 * like the rest. */
	memset(shm->data, 0, capacity);
	/* R0: publish the header; pairs with A0 in attach() and check(). */
	atomic_store_explicit(&shm->magic, KVR_RING_MAGIC,
			      memory_order_release);
	return 0;
}

int kvr_ring_format(void *mem, size_t mem_bytes, uint32_t capacity)
{
	return kvr_ring_format_at(mem, mem_bytes, capacity, 0);
}

/*
 * Validates a header and both positions read at attach time. The caller's
 * capacity is authoritative; the recorded one is read once, only to compare.
 */
static int attach(struct kvr_ring *r, void *mem, size_t mem_bytes,
		  uint32_t capacity, uint32_t role)
{
	struct kvr_ring_shm *shm = mem;
	uint64_t head, tail;
	int rc;

	rc = check_args(mem, mem_bytes, capacity);
	if (rc < 0)
		return rc;
	if (!r)
		return -EINVAL;
	/* A0: see the whole formatted header; pairs with R0 in format_at(). */
	if (atomic_load_explicit(&shm->magic, memory_order_acquire) !=
	    KVR_RING_MAGIC)
		return -EPROTO;
	/* Relaxed: written once before R0, which A0 ordered us after. */
	if (atomic_load_explicit(&shm->capacity, memory_order_relaxed) !=
	    capacity)
		return -EPROTO;
	/*
	 * A3: positions left by a previous incarnation of either side; pairs
	 * with R1 (tail) and R2 (head), so the bytes they cover are ordered
	 * before our first use of them.
	 */
	tail = atomic_load_explicit(&shm->tail, memory_order_acquire);
	head = atomic_load_explicit(&shm->head, memory_order_acquire);
	if ((head | tail) & (KVR_RING_ALIGN - 1))
		return -EILSEQ;
	if (tail - head > capacity)
		return -ERANGE;

	r->shm = shm;
	r->data = shm->data;
	r->mask = (uint64_t)capacity - 1;
	r->cap = capacity;
	r->role = role;
	/* Relaxed: informational; only a producer writes it afterwards. */
	r->hw = atomic_load_explicit(&shm->high_water, memory_order_relaxed);
	r->err = 0;
	r->first = 0;
	r->line_pad = false;
	r->last = 0;
	if (role == KVR_RING_ROLE_PRODUCER) {
		r->pos = tail;
		r->own = tail;
		r->peer = head;
		kvr_ring_producer_sync(r);
	} else {
		r->pos = head;
		r->own = head;
		r->peer = tail;
		/* Relaxed: a hint for the producer's choice of layout; this
		 * consumer takes line padding whether or not it is seen. */
		atomic_store_explicit(&shm->consumer_flags,
				      KVR_RING_CF_LINE_PAD,
				      memory_order_relaxed);
	}
	return 0;
}

void kvr_ring_producer_sync(struct kvr_ring *r)
{
	/* Relaxed: the flag only chooses the layout of later batches; the
	 * records themselves are ordered by R3/R1 as always. Written by the
	 * consumer, so untrusted: a consumer that sets it without taking
	 * line padding only damages its own ring. */
	if (r->role == KVR_RING_ROLE_PRODUCER)
		r->line_pad = (atomic_load_explicit(&r->shm->consumer_flags,
						    memory_order_relaxed) &
			       KVR_RING_CF_LINE_PAD) != 0;
}

int kvr_ring_attach_producer(struct kvr_ring *r, void *mem, size_t mem_bytes,
			     uint32_t capacity)
{
	return attach(r, mem, mem_bytes, capacity, KVR_RING_ROLE_PRODUCER);
}

int kvr_ring_attach_consumer(struct kvr_ring *r, void *mem, size_t mem_bytes,
			     uint32_t capacity)
{
	return attach(r, mem, mem_bytes, capacity, KVR_RING_ROLE_CONSUMER);
}

int kvr_ring_error(const struct kvr_ring *r)
{
	return r->err;
}

uint64_t kvr_ring_used(const struct kvr_ring *r)
{
	if (r->role == KVR_RING_ROLE_PRODUCER)
		return r->pos - r->peer;
	/* Records found by their header may run ahead of the cached tail. */
	if ((int64_t)(r->pos - r->peer) > 0)
		return r->pos - r->own;
	return r->peer - r->own;
}

uint64_t kvr_ring_high_water(const struct kvr_ring *r)
{
	return r->role == KVR_RING_ROLE_PRODUCER ? r->hw : 0;
}

/* ---- producer --------------------------------------------------------- */

/*
 * Re-reads the consumer's head and validates it against what we know: it
 * may only move forward, never past what we published (own), and only to
 * 8-aligned positions. On damage the error is latched. Unsigned differences
 * keep all of this correct across the uint64 wrap.
 */
static int producer_refresh(struct kvr_ring *r)
{
	uint64_t h;

	/*
	 * A2: the consumer is done with every byte below h; pairs with R2 in
	 * kvr_ring_release(), so its reads of those bytes happen before the
	 * writes we are about to make there.
	 */
	h = atomic_load_explicit(&r->shm->head, memory_order_acquire);
	if ((int64_t)(h - r->peer) < 0)
		return r->err = -EPROTO;
	if (h - r->peer > r->own - r->peer)
		return r->err = -ERANGE;
	if (h & (KVR_RING_ALIGN - 1))
		return r->err = -EILSEQ;
	r->peer = h;
	/*
	 * high_water: the bytes in flight (published, not yet released) seen
	 * now, a sample taken whenever the cached head says full, so at least
	 * once per lap. Never on the per-record path. Relaxed: informational,
	 * for the inspector; the producer is its single writer.
	 */
	if (r->own - h > r->hw) {
		r->hw = r->own - h;
		atomic_store_explicit(&r->shm->high_water, r->hw,
				      memory_order_relaxed);
	}
	return 0;
}

/* Free bytes from the claim position, by the cached head. */
static inline uint64_t free_bytes(const struct kvr_ring *r)
{
	return (uint64_t)r->cap - (r->pos - r->peer);
}

/*
 * Writes the header word @w of the record claimed at @off. The first
 * record claimed since the last commit keeps its word in r->first, for
 * the commit to store with release (R3): that word is what the consumer
 * polls. Relaxed for the others: published by R3 with the batch.
 */
static inline void put_hdr(struct kvr_ring *r, uint64_t off, uint64_t w)
{
	if (r->pos == r->own)
		r->first = w;
	else
		atomic_store_explicit(kvr__ring_hdr(r->data, off), w,
				      memory_order_relaxed);
}

/*
 * Claims the rest of data[] after pos as a padding record. The caller has
 * checked that those bytes are free. A padding header is written with the
 * same atomic word as any other, so its len always says "to the end".
 */
static void claim_pad(struct kvr_ring *r, uint64_t to_end)
{
	uint64_t off = r->pos & r->mask;
	uint32_t len = (uint32_t)(to_end - KVR_RING_HDR_BYTES);

	put_hdr(r, off, kvr_ring_rec_word(KVR_RING_TYPE_PAD, len));
	r->pos += to_end;
}

/*
 * Everything the inline fast path of kvr_ring_claim() does not handle:
 * errors, bad arguments, a full ring by the cached head, and the wrap.
 */
int kvr__ring_claim_slow(struct kvr_ring *r, uint32_t type, uint32_t len,
			 void **out)
{
	uint64_t need, off, to_end, pad;
	int rc;

	if (r->err)
		return r->err;
	if (r->role != KVR_RING_ROLE_PRODUCER || type == 0 ||
	    type > KVR_RING_TYPE_MAX)
		return -EINVAL;
	/* A record larger than the ring could never fit: refuse, never wait. */
	if (len > r->cap - KVR_RING_HDR_BYTES)
		return -EMSGSIZE;
	need = KVR_RING_HDR_BYTES + round8(len);
	off = r->pos & r->mask;
	to_end = (uint64_t)r->cap - off;
	/* A record never straddles the end of data[]: pad to the end first. */
	pad = need > to_end ? to_end : 0;

	if (pad + need > free_bytes(r)) {
		/* The cached head says full: only now touch the shared one. */
		rc = producer_refresh(r);
		if (rc < 0)
			return rc;
		if (pad + need > free_bytes(r)) {
			/*
			 * Claim the padding alone when it fits, so that the
			 * next commit lets the consumer move past the end of
			 * data[]. Without this a record larger than the
			 * space before the end and also larger than the
			 * space after it could never be placed.
			 */
			if (pad && pad <= free_bytes(r))
				claim_pad(r, pad);
			return -EAGAIN;
		}
	}
	if (pad) {
		claim_pad(r, pad);
		off = 0;
	}
	put_hdr(r, off, kvr_ring_rec_word(type, len));
	*out = r->data + off + KVR_RING_HDR_BYTES;
	r->pos += need;
	r->last = (uint32_t)need;
	return 0;
}

/* ---- consumer --------------------------------------------------------- */

/*
 * Re-reads the producer's tail and validates it: it may only move forward,
 * at most capacity bytes ahead of our released head, to 8-aligned
 * positions. On damage the error is latched.
 */
static int consumer_refresh(struct kvr_ring *r)
{
	uint64_t t;

	/*
	 * A1: every header and payload byte below t is written; pairs with R1
	 * in kvr_ring_commit().
	 */
	t = atomic_load_explicit(&r->shm->tail, memory_order_acquire);
	if ((int64_t)(t - r->peer) < 0)
		return r->err = -EPROTO;
	/*
	 * Signed: the tail may still be behind what we read and released.
	 * The producer stores it just after the first record's header (R3
	 * then R1), and we find records by that header.
	 */
	if ((int64_t)(t - r->own) > (int64_t)r->cap)
		return r->err = -ERANGE;
	if (t & (KVR_RING_ALIGN - 1))
		return r->err = -EILSEQ;
	r->peer = t;
	return 0;
}

/*
 * Decodes and validates the header word @w of the record at position @pos
 * (offset @off), with @avail published bytes from @pos. Returns the bytes
 * the record occupies (> 0), or a negative errno. Pure: shared by peek and
 * check, so the inspector applies exactly the consumer's rules.
 */
static int64_t rec_validate(uint64_t w, uint64_t off, uint64_t avail,
			    uint32_t cap, uint32_t *type_out, uint32_t *len_out)
{
	uint32_t len = (uint32_t)w;
	uint32_t type = (uint32_t)(w >> 32) & 0xffffu;
	uint32_t check = (uint32_t)(w >> 48);
	uint64_t to_end = (uint64_t)cap - off;
	uint64_t bytes;

	if (check != kvr_ring_rec_check(type, len))
		return -EBADMSG;
	if (type == 0)
		return -ENOMSG;
	/* 64-bit sum: len up to 2^32-1 cannot overflow it. */
	bytes = KVR_RING_HDR_BYTES + round8(len);
	if (bytes > avail || bytes > to_end)
		return -EOVERFLOW;
	/*
	 * The producer pads from a non-zero offset exactly to the end, or
	 * from inside a cache line to its end (line padding); anything else
	 * is not ours. Neither kind starts at offset 0, and a line padding
	 * never starts on a line, so at most two padding records follow
	 * each other (a line's, then the end's) and a hostile producer
	 * cannot keep us skipping.
	 */
	if (type == KVR_RING_TYPE_PAD && !(bytes == to_end && off != 0) &&
	    !(bytes < KVR_RING_LINE && (off & (KVR_RING_LINE - 1)) != 0 &&
	      ((off + bytes) & (KVR_RING_LINE - 1)) == 0))
		return -EBADMSG;
	*type_out = type;
	*len_out = len;
	return (int64_t)bytes;
}

/*
 * The header word at the cursor, and in *@avail the bytes a record there
 * may span. Below the cached tail: relaxed, since A1 (or an earlier A1
 * that covered this position) ordered the producer's header store before
 * it, and up to that tail. Past it: A5, pairing with R3 in
 * kvr_ring_commit(), and up to capacity bytes from the released head (the
 * producer cannot have written further; with all of it peeked, the word
 * is our own first record's).
 */
static uint64_t cursor_hdr(const struct kvr_ring *r, uint64_t *avail)
{
	_Atomic uint64_t *h = kvr__ring_hdr(r->data, r->pos & r->mask);

	if ((int64_t)(r->peer - r->pos) > 0) {
		*avail = r->peer - r->pos;
		return atomic_load_explicit(h, memory_order_relaxed);
	}
	*avail = r->own + r->cap - r->pos;
	return atomic_load_explicit(h, memory_order_acquire);
}

/*
 * Everything the inline fast path of kvr_ring_peek() does not handle:
 * an empty ring (the header word at the cursor is zero), padding records,
 * errors and damage. It re-reads the header itself.
 */
int kvr__ring_peek_slow(struct kvr_ring *r, struct kvr_ring_rec *rec)
{
	uint32_t type, len;
	uint64_t off, w, avail;
	int64_t bytes;
	int pass;

	if (r->err)
		return r->err;
	if (r->role != KVR_RING_ROLE_CONSUMER)
		return -EINVAL;
	/*
	 * At most: skip a line padding, skip the end's padding, read a
	 * record. A line padding ends on a line, where only the end's
	 * padding may start; that one is followed by offset 0, where no
	 * padding is valid: three passes bound the loop whatever the
	 * producer writes.
	 */
	for (pass = 0; pass < 3; pass++) {
		off = r->pos & r->mask;
		w = cursor_hdr(r, &avail);
		/*
		 * Nothing yet past the cached tail. The tail is not read
		 * here: its line is the producer's, and a load of it would
		 * cost a cross-core transfer on every batch's last peek
		 * (for kvringd, between a request and its answer's
		 * publish). A tail published without its header is damage
		 * that kvr_ring_empty() finds, the re-check every sleeper
		 * makes.
		 */
		if ((int64_t)(r->peer - r->pos) <= 0 && (w == 0 || avail == 0))
			return -EAGAIN;
		bytes = rec_validate(w, off, avail, r->cap, &type, &len);
		if (bytes < 0)
			return r->err = (int)bytes;
		r->pos += (uint64_t)bytes;
		if (type == KVR_RING_TYPE_PAD)
			continue;
		rec->data = r->data + off + KVR_RING_HDR_BYTES;
		rec->len = len;
		rec->type = (uint16_t)type;
		return 0;
	}
	/* Unreachable: pass 2 starts at offset 0, where padding is refused. */
	return r->err = -EBADMSG;
}

void kvr__ring_wipe(struct kvr_ring *r)
{
	uint64_t off = r->own & r->mask, n = r->pos - r->own;
	uint64_t first = n < r->cap - off ? n : r->cap - off;

	/*
	 * Plain stores: the producer writes these bytes again only after it
	 * acquired (A2) the head we release next (R2). A header word read
	 * here later is one the producer stored after that.
	 */
	memset(r->data + off, 0, first);
	memset(r->data, 0, n - first);
}

/*
 * Skips the padding records at the cursor, as peek would (at most a line's
 * and the end's), so that the line padding after a batch's last record is
 * not taken for an unread record. Anything that is not a valid padding is
 * left where it is, for peek to return or to report.
 */
static void skip_pads(struct kvr_ring *r)
{
	for (int pass = 0; pass < 2; pass++) {
		uint64_t avail, w = cursor_hdr(r, &avail);
		uint32_t type, len;
		int64_t bytes;

		if (((w >> 32) & 0xffffu) != KVR_RING_TYPE_PAD || avail == 0)
			return;
		bytes = rec_validate(w, r->pos & r->mask, avail, r->cap, &type,
				     &len);
		if (bytes < 0)
			return;
		r->pos += (uint64_t)bytes;
	}
}

bool kvr_ring_empty(struct kvr_ring *r)
{
	if (r->err || r->role != KVR_RING_ROLE_CONSUMER)
		return false;
	skip_pads(r);
	if ((int64_t)(r->peer - r->pos) > 0)
		return false;
	/* A5: the producer stores this word (R3) before its tail (R1);
	 * either one published before the caller's fence is seen. */
	if (r->pos - r->own < r->cap &&
	    atomic_load_explicit(kvr__ring_hdr(r->data, r->pos & r->mask),
				 memory_order_acquire) != 0)
		return false;
	if (consumer_refresh(r) < 0)
		return false;
	return (int64_t)(r->peer - r->pos) <= 0;
}

/* ---- inspector -------------------------------------------------------- */

int kvr_ring_check(const void *mem, size_t mem_bytes, uint32_t capacity,
		   struct kvr_ring_snapshot *out)
{
	const struct kvr_ring_shm *shm = mem;
	struct kvr_ring_snapshot s = {0};
	uint64_t head, tail, h2, t2, pos, mask = (uint64_t)capacity - 1;
	uint32_t type, len, attempt;
	int64_t bytes;
	int rc;

	rc = check_args(mem, mem_bytes, capacity);
	if (rc < 0 || !out)
		return -EINVAL;
	/* A0: pairs with R0 in format_at(). */
	if (atomic_load_explicit(&shm->magic, memory_order_acquire) !=
	    KVR_RING_MAGIC)
		return -EPROTO;
	s.capacity = atomic_load_explicit(&shm->capacity, memory_order_relaxed);
	if (s.capacity != capacity)
		return -EPROTO;

	for (attempt = 0; attempt < 64; attempt++) {
		/*
		 * A4: pairs with R1 (tail) and R2 (head). Tail is read
		 * first; then head is re-read until both reads agree.
		 */
		tail = atomic_load_explicit(&shm->tail, memory_order_acquire);
		head = atomic_load_explicit(&shm->head, memory_order_acquire);
		t2 = atomic_load_explicit(&shm->tail, memory_order_acquire);
		h2 = atomic_load_explicit(&shm->head, memory_order_acquire);
		/* A head past the tail: the consumer took a record by its
		 * header before the producer's tail store (just after it)
		 * reached us. Moving, not damage: read again. */
		if (tail != t2 || head != h2 || (int64_t)(tail - head) < 0)
			continue;
		s.retries = attempt;
		s.head = head;
		s.tail = tail;
		s.used_bytes = tail - head;
		/* Relaxed: informational counter, single writer. */
		s.high_water = atomic_load_explicit(&shm->high_water,
						    memory_order_relaxed);
		s.nr_records = 0;
		s.nr_pad = 0;
		rc = 0;
		if ((head | tail) & (KVR_RING_ALIGN - 1)) {
			rc = -EILSEQ;
		} else if (tail - head > capacity) {
			rc = -ERANGE;
		} else {
			/*
			 * The walk advances by at least 8 bytes a step and
			 * stops at tail, at most capacity bytes away.
			 */
			for (pos = head; pos != tail; pos += (uint64_t)bytes) {
				/* Relaxed: ordered after R1 by A4. */
				uint64_t w = atomic_load_explicit(
				    chdr_at(shm->data, pos & mask),
				    memory_order_relaxed);
				bytes = rec_validate(w, pos & mask, tail - pos,
						     capacity, &type, &len);
				if (bytes < 0) {
					rc = (int)bytes;
					s.bad_pos = pos;
					break;
				}
				if (type == KVR_RING_TYPE_PAD)
					s.nr_pad++;
				else
					s.nr_records++;
			}
		}
		/*
		 * A4 again: if the consumer released while we walked, the
		 * bytes we judged may have been reused; judge again.
		 */
		if (rc < 0 && atomic_load_explicit(
				  &shm->head, memory_order_acquire) != head)
			continue;
		*out = s;
		return rc;
	}
	return -EBUSY;
}
