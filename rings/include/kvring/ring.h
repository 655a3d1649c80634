/* SPDX-License-Identifier: MIT */
/*
 * kvring/ring.h - lock-free single-producer single-consumer ring of
 * variable-length, 8-byte-aligned records over caller-supplied memory.
 *
 * This header owns the ring's shared-memory format (struct kvr_ring_shm and
 * the record header), the process-local view (struct kvr_ring) and the API
 * of both sides. It knows bytes and records, nothing about kvring messages,
 * doorbells or segments: the memory may be a private buffer, a shared
 * mapping between two threads or between two processes. The ring stores no
 * pointers in that memory, never makes a system call, never allocates and
 * never prints. Each side treats everything the other side writes (its
 * position, the record headers) as untrusted input and reports damage as a
 * negative errno instead of reading out of bounds or looping. The format,
 * the memory-ordering proof and the error list are in docs/ring.md.
 */
#ifndef KVRING_RING_H
#define KVRING_RING_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "KVRR" little-endian; stored last by format (R0). */
#define KVR_RING_MAGIC 0x5252564bu
/* Smallest and largest capacity in bytes (both powers of two). */
#define KVR_RING_MIN_CAP 64u
#define KVR_RING_MAX_CAP 0x80000000u
/* Every record starts on an 8-byte boundary with an 8-byte header. */
#define KVR_RING_ALIGN	   8u
#define KVR_RING_HDR_BYTES 8u
/* User record types are 1..KVR_RING_TYPE_MAX; 0 is invalid. */
#define KVR_RING_TYPE_MAX 0xfffeu
/* Reserved type of a padding record: it fills the ring's tail end, or
 * the rest of a cache line after a batch (line padding, below). */
#define KVR_RING_TYPE_PAD 0xffffu
/* The cache line line padding aligns to. */
#define KVR_RING_LINE 64u
/* consumer_flags bits: what the consumer accepts (set at its attach). */
#define KVR_RING_CF_LINE_PAD 0x1u /* padding that ends a cache line */
/* Byte offset of data[] in struct kvr_ring_shm. */
#define KVR_RING_DATA_OFF 384u
/* struct kvr_ring.role values. */
#define KVR_RING_ROLE_PRODUCER 1u
#define KVR_RING_ROLE_CONSUMER 2u

/*
 * struct kvr_ring_shm - the ring in shared memory: three 128-byte blocks
 * (header, producer, consumer) followed by data[capacity]. Owned by whoever
 * owns the memory (usually a segment); it lives as long as that mapping.
 * kvr_ring_format() initialises it; after that the producer writes only
 * tail, high_water and the bytes it claimed, and the consumer writes only
 * head. Everything is plain data: no pointers.
 */
struct kvr_ring_shm {
	/* Block 0: written once by format (capacity read once by attach). */
	_Atomic uint32_t magic;	     /* 0: KVR_RING_MAGIC, stored last (R0) */
	_Atomic uint32_t capacity;   /* 4: data bytes, a power of two */
	uint32_t hdr_bytes;	     /* 8: KVR_RING_DATA_OFF, informational */
	uint32_t rec_align;	     /* 12: KVR_RING_ALIGN, informational */
	_Atomic uint64_t high_water; /* 16: sampled max in flight */
	uint8_t pad0[104];	     /* 24..127 */
	/* Block 1: the producer's block. */
	_Atomic uint64_t tail; /* 128: bytes ever published (R1) */
	uint8_t pad1[120];     /* 136..255 */
	/* Block 2: the consumer's block. */
	_Atomic uint64_t head;		 /* 256: bytes ever released (R2) */
	_Atomic uint32_t consumer_flags; /* 264: KVR_RING_CF_*, set at attach */
	uint8_t pad2[116];		 /* 268..383 */
	/* 384: data[capacity]; position p sits at p & (capacity - 1). */
	unsigned char data[];
};

/*
 * The record header, one 64-bit word read and written atomically (relaxed)
 * at the record's start: bits 0..31 len (payload bytes), 32..47 type,
 * 48..63 check = kvr_ring_rec_check(type, len). On little-endian hosts that
 * is the byte layout { u32 len; u16 type; u16 check }. The record occupies
 * KVR_RING_HDR_BYTES + len rounded up to 8 bytes. A padding record
 * (KVR_RING_TYPE_PAD) runs exactly to the end of data[] from a non-zero
 * offset, or is a line padding: under KVR_RING_LINE bytes from inside a
 * line to its end (docs/ring.md, "Line padding").
 */
static inline uint16_t kvr_ring_rec_check(uint32_t type, uint32_t len)
{
	return (uint16_t)(0xa5a5u ^ type ^ (len & 0xffffu) ^ (len >> 16));
}

/* Encodes a record header word (exposed for tests and the inspector). */
static inline uint64_t kvr_ring_rec_word(uint32_t type, uint32_t len)
{
	return (uint64_t)len | (uint64_t)(type & 0xffffu) << 32 |
	       (uint64_t)kvr_ring_rec_check(type, len) << 48;
}

/*
 * struct kvr_ring - one side's process-local view of a ring. Owned by the
 * caller (embed it anywhere, no fini needed); valid while the mapping is.
 * Exactly one producer view and one consumer view may be attached to a
 * ring at any time. All fields are private except where marked read-only.
 */
struct kvr_ring {
	/* Read-only after attach. */
	struct kvr_ring_shm *shm;
	unsigned char *data; /* shm->data */
	uint64_t mask;	     /* cap - 1, from the caller, never re-read */
	uint32_t cap;	     /* data bytes, from the caller */
	uint32_t role;	     /* KVR_RING_ROLE_PRODUCER or _CONSUMER */
	/* Private. */
	uint64_t pos;	/* producer: claimed end; consumer: read cursor */
	uint64_t own;	/* producer: published tail; consumer: released */
	uint64_t peer;	/* cached peer position (head or tail) */
	uint64_t hw;	/* producer: last value stored in shm->high_water */
	uint64_t first; /* producer: header word of the first record claimed
			   since the last commit, stored by the commit (R3) */
	int err;	/* latched error, 0 while healthy */
	bool line_pad;	/* producer: the consumer takes line padding */
	uint32_t last;	/* producer: bytes of the last record claimed */
};

/*
 * struct kvr_ring_rec - one record as seen by the consumer: data points into
 * the ring and stays valid until the next kvr_ring_release().
 */
struct kvr_ring_rec {
	const void *data; /* len payload bytes, 8-byte aligned */
	uint32_t len;	  /* payload bytes as claimed */
	uint16_t type;	  /* 1..KVR_RING_TYPE_MAX */
};

/* struct kvr_ring_snapshot - what kvr_ring_check() saw (caller-owned). */
struct kvr_ring_snapshot {
	uint32_t capacity;   /* as recorded in the shm header */
	uint32_t nr_records; /* user records in [head, tail) */
	uint32_t nr_pad;     /* padding records in [head, tail) */
	uint32_t retries;    /* extra reads needed for head/tail to agree */
	uint64_t head;
	uint64_t tail;
	uint64_t used_bytes; /* tail - head */
	uint64_t high_water;
	uint64_t bad_pos; /* position of the first bad record, if any */
};

/*
 * kvr_ring_shm_bytes - bytes of memory a ring of @capacity data bytes needs
 * (KVR_RING_DATA_OFF + capacity). Does not validate @capacity.
 */
size_t kvr_ring_shm_bytes(uint32_t capacity);

/*
 * kvr_ring_format - initialise an empty ring in @mem: head = tail = 0,
 * high_water 0, capacity recorded, data[] zeroed (the consumer finds the
 * next record by its non-zero header word, docs/ring.md), magic stored
 * last with release (R0). Call once, before either side attaches.
 * Return: 0, or -EINVAL if @mem is NULL or not 8-byte aligned, @capacity
 * is not a power of two in [KVR_RING_MIN_CAP, KVR_RING_MAX_CAP], or
 * @mem_bytes < kvr_ring_shm_bytes(@capacity). On error @mem is unchanged.
 */
int kvr_ring_format(void *mem, size_t mem_bytes, uint32_t capacity);

/*
 * kvr_ring_format_at - like kvr_ring_format() but both positions start at
 * @start_pos instead of 0. Meant for tests of the uint64 wrap (start just
 * below 2^64). Return: as kvr_ring_format(), and -EINVAL if @start_pos is
 * not a multiple of 8.
 */
int kvr_ring_format_at(void *mem, size_t mem_bytes, uint32_t capacity,
		       uint64_t start_pos);

/*
 * kvr_ring_attach_producer - make @r the producer view of the ring in @mem.
 * @capacity is what the formatter used; the recorded capacity must match
 * and is never read again, so a peer cannot change it under us. Reads both
 * positions (A3) and checks them.
 * Reads the consumer's flags (as kvr_ring_producer_sync()).
 * Return: 0; -EINVAL bad arguments (as format); -EPROTO the magic or the
 * recorded capacity does not match; -EILSEQ a position is not 8-aligned;
 * -ERANGE tail - head exceeds the capacity. On error @r is unchanged.
 */
int kvr_ring_attach_producer(struct kvr_ring *r, void *mem, size_t mem_bytes,
			     uint32_t capacity);

/*
 * kvr_ring_attach_consumer - make @r the consumer view of the ring in @mem.
 * Same checks and errors as kvr_ring_attach_producer(). On success it
 * stores KVR_RING_CF_LINE_PAD in consumer_flags: this consumer takes line
 * padding.
 */
int kvr_ring_attach_consumer(struct kvr_ring *r, void *mem, size_t mem_bytes,
			     uint32_t capacity);

/*
 * kvr_ring_producer_sync - producer: read the consumer's flags again (one
 * relaxed load of the consumer's block) and pad lines from the next commit
 * on when the consumer takes line padding. attach reads them once; call
 * this when the consumer attached after the producer, once it is known to
 * have attached (its first record arrived). A producer that never sees the
 * flag packs its records, as for a consumer that predates line padding.
 * No-op on a view that is not a producer.
 */
void kvr_ring_producer_sync(struct kvr_ring *r);

/*
 * kvr_ring_claim - producer: reserve room for one record of @len payload
 * bytes and @type, write its header, and return its payload in *@out
 * (8-byte aligned, @len bytes, to be written in place). Nothing is visible
 * to the consumer until kvr_ring_commit(). Several claims may precede one
 * commit. Bytes claimed but not committed count as used, so a producer
 * that gets -EAGAIN must commit before it waits for the consumer.
 * If the record does not fit before the end of data[], a padding record is
 * claimed first; it may stay claimed even when -EAGAIN is returned.
 * Return: 0; -EAGAIN not enough free space (retry after the consumer
 * releases); -EMSGSIZE @len > capacity - 8, the record can never fit;
 * -EINVAL @type is 0 or above KVR_RING_TYPE_MAX, or @r is not a producer;
 * -EPROTO the consumer's head moved backwards; -ERANGE the head is ahead
 * of the published tail; -EILSEQ the head is not 8-aligned. The last three
 * are latched: every later call returns the same error. On error *@out is
 * unchanged.
 */
static inline int kvr_ring_claim(struct kvr_ring *r, uint32_t type,
				 uint32_t len, void **out);

/*
 * kvr_ring_commit - producer: publish every record claimed since the last
 * commit with a release store of the first claimed record's header (R3),
 * which the consumer polls, then of tail (R1). When the consumer takes
 * line padding, the batch ends inside a cache line, and a record as large
 * as the batch's last one would touch more lines from there than from the
 * next line, a padding record first fills the rest of that line (if the
 * cached head says it is free): the next batch starts on a line of its
 * own, and a record of up to 64 bytes reaches the consumer in one cache
 * line. Cheap no-op when nothing is claimed, and on a view that is not a
 * producer. Publishes what was claimed even after an error was latched
 * (those claims were made before it). Cannot fail.
 */
static inline void kvr_ring_commit(struct kvr_ring *r);

/*
 * kvr_ring_peek - consumer: return the next unread record in *@rec and
 * advance the private read cursor past it; successive peeks walk through
 * the published records. The records stay in place (and their data valid)
 * until kvr_ring_release(). Padding records are skipped silently, but the
 * bytes they occupy are freed only by kvr_ring_release(), so call release
 * after a batch even when the batch ended with -EAGAIN.
 * Past the cached tail the next record is found by its header word (A5,
 * zero until the producer's commit). Peek never reads the tail (a line
 * the producer writes): a zero word is -EAGAIN, and a tail published
 * without its header is found by kvr_ring_empty(), which reads it.
 * Return: 0; -EAGAIN nothing to read. Damage done by the producer, all
 * latched (every later call returns the same error): -EPROTO the tail moved
 * backwards; -ERANGE the tail is more than capacity ahead of the head;
 * -EILSEQ the tail is not 8-aligned (these three once kvr_ring_empty()
 * read the tail); -EBADMSG a header's check does not
 * match (garbage) or a padding record does not end at the end of data[]
 * (or sits at offset 0);
 * -ENOMSG a well-formed header of reserved type 0; -EOVERFLOW a record
 * runs past the tail read (when one was), past capacity bytes from the
 * released head, or past the end of data[]. -EINVAL if @r is
 * not a consumer. On error *@rec is unchanged.
 */
static inline int kvr_ring_peek(struct kvr_ring *r, struct kvr_ring_rec *rec);

/*
 * kvr_ring_release - consumer: give back to the producer every byte peeked
 * so far: zero them (free space is all zero, so a header word left from an
 * earlier lap is never taken for a new record), then one release store of
 * head (R2). The data pointers of those records must not be used
 * afterwards. No-op when nothing was peeked, and on a view that is not a
 * consumer. Cannot fail.
 */
static inline void kvr_ring_release(struct kvr_ring *r);

/*
 * kvr_ring_used - bytes in flight as this side knows them, without reading
 * shared memory: producer, claimed end minus cached head; consumer, cached
 * tail minus released head.
 */
uint64_t kvr_ring_used(const struct kvr_ring *r);

/*
 * kvr_ring_high_water - producer: the largest number of bytes in flight it
 * has seen, sampled whenever it re-reads the consumer's head (so a lower
 * bound, and 0 until the first re-read). Unlike kvr_ring_used() on the
 * producer side, whose cached head may be a lap old, this never
 * overstates. Consumer: 0. Reads no shared memory.
 */
uint64_t kvr_ring_high_water(const struct kvr_ring *r);

/*
 * kvr_ring_empty - consumer: true if no unread record is published. It
 * first steps over padding records at the cursor, as peek would (a batch's
 * line padding is not a record), then loads the header word at the cursor
 * (A5) and, when that is zero, the
 * tail (A1), unless unread bytes are already known, so it is the re-check
 * of the doorbell handshake (after the sleeper's seq_cst fence) and the
 * one place a tail published without its header is judged.
 * Returns false when an error is latched or detected, so that the caller's next
 * peek reports it instead of sleeping.
 */
bool kvr_ring_empty(struct kvr_ring *r);

/*
 * kvr_ring_maybe_data - consumer: a cheap hint that a record may wait, for
 * a poller that watches many rings. True when unread bytes are already
 * known, the header word at the read cursor is not zero (the line the
 * record itself arrives in, not the tail's) or an error is latched. A tail
 * published without its header is seen only by peek and kvr_ring_empty(). It
 * validates nothing and orders nothing: act on it only through kvr_ring_peek(),
 * whose acquire (A5) orders the record's bytes. A stale "no" only delays
 * the record to the next poll; it is not the doorbell re-check (that is
 * kvr_ring_empty()). Inline, no function call, one relaxed load.
 */
static inline bool kvr_ring_maybe_data(const struct kvr_ring *r);

/*
 * kvr_ring_error - the latched error of @r, or 0.
 */
int kvr_ring_error(const struct kvr_ring *r);

/*
 * kvr_ring_check - read-only validation for the inspector. Reads head and
 * tail (A4) until two successive reads agree (up to 64 tries), then checks
 * both positions and walks every record header in [head, tail) with the
 * consumer's rules. On a live ring the walk is best effort: a release that
 * races with it may make a freed header look bad, so a bad result is
 * reported only if head and tail are unchanged after the walk (retried
 * otherwise). Never writes to @mem.
 * Return: 0 and *@out filled; -EINVAL bad arguments; -EPROTO bad magic or
 * recorded capacity differs from @capacity; -EBUSY positions kept moving;
 * -EILSEQ, -ERANGE, -EBADMSG, -ENOMSG, -EOVERFLOW as kvr_ring_peek(),
 * with *@out still filled (bad_pos says where): the one exception to
 * "outputs untouched on failure", because the inspector shows them.
 * -EPROTO is never used for "backwards" here: a snapshot has no history.
 */
int kvr_ring_check(const void *mem, size_t mem_bytes, uint32_t capacity,
		   struct kvr_ring_snapshot *out);

/* ---- inline fast paths ---------------------------------------------------
 * claim/commit/peek/release run once per record or batch, so their common
 * case is inline; anything unusual (full, empty, wrap, bad input, damage)
 * goes to the out-of-line kvr__ring_*_slow() in ring.c, which re-reads and
 * re-validates everything itself. The labels are explained in docs/ring.md.
 */

/* Internal: out-of-line halves of the functions below (ring.c). */
int kvr__ring_claim_slow(struct kvr_ring *r, uint32_t type, uint32_t len,
			 void **out);
int kvr__ring_peek_slow(struct kvr_ring *r, struct kvr_ring_rec *rec);
void kvr__ring_wipe(struct kvr_ring *r);

/* Internal: the header word at data offset @off (8-aligned). */
static inline _Atomic uint64_t *kvr__ring_hdr(unsigned char *data, uint64_t off)
{
	return (_Atomic uint64_t *)(void *)(data + off);
}

/*
 * Internal: claims the rest of the cache line at pos as a line padding
 * record (commit, before R3) when a record as large as the last one would
 * touch more lines from pos than from the next line's start (round trips
 * repeat their sizes: a 40-byte ping is padded, a 72-byte answer, in two
 * lines either way, is not) and the cached head says the bytes are free.
 */
static inline void kvr__ring_pad_line(struct kvr_ring *r)
{
	uint64_t in = r->pos & (KVR_RING_LINE - 1), gap = KVR_RING_LINE - in;
	uint64_t line = KVR_RING_LINE - 1;

	/* gap is 8..56 (positions are 8-aligned), and a line never runs
	 * past the end of data[] (capacity is a power of two >= 64). */
	if ((in + r->last + line) / KVR_RING_LINE ==
		(r->last + line) / KVR_RING_LINE ||
	    r->pos + gap - r->peer > r->cap)
		return;
	/* Relaxed: not the batch's first record; R3 publishes it. */
	atomic_store_explicit(
	    kvr__ring_hdr(r->data, r->pos & r->mask),
	    kvr_ring_rec_word(KVR_RING_TYPE_PAD,
			      (uint32_t)(gap - KVR_RING_HDR_BYTES)),
	    memory_order_relaxed);
	r->pos += gap;
}

static inline int kvr_ring_claim(struct kvr_ring *r, uint32_t type,
				 uint32_t len, void **out)
{
	/* 64-bit arithmetic: no len can overflow it. */
	uint64_t need = KVR_RING_HDR_BYTES + (((uint64_t)len + 7) & ~7ull);
	uint64_t off = r->pos & r->mask;

	/*
	 * Fast path: healthy producer, user type, the record fits before the
	 * end of data[] and in the free space the cached head promises (the
	 * cached head is never ahead of the real one, so this cannot
	 * overwrite unreleased bytes).
	 */
	if (r->err == 0 && r->role == KVR_RING_ROLE_PRODUCER &&
	    type - 1u < KVR_RING_TYPE_MAX && need <= r->cap - off &&
	    r->pos + need - r->peer <= r->cap) {
		uint64_t w = kvr_ring_rec_word(type, len);

		/* The first record's header is the consumer's signal: the
		 * commit stores it (R3). Relaxed for the others: the
		 * consumer reads them only after it acquired the first. */
		if (r->pos == r->own)
			r->first = w;
		else
			atomic_store_explicit(kvr__ring_hdr(r->data, off), w,
					      memory_order_relaxed);
		*out = r->data + off + KVR_RING_HDR_BYTES;
		r->pos += need;
		r->last = (uint32_t)need;
		return 0;
	}
	return kvr__ring_claim_slow(r, type, len, out);
}

static inline void kvr_ring_commit(struct kvr_ring *r)
{
	if (r->pos == r->own || r->role != KVR_RING_ROLE_PRODUCER)
		return;
	if (r->line_pad && (r->pos & (KVR_RING_LINE - 1)) != 0)
		kvr__ring_pad_line(r);
	/*
	 * R3: the first claimed record's header, after every other header
	 * and payload byte of the batch; pairs with A5 (the consumer polls
	 * this word, kvr_ring_peek), so a round trip moves the record's
	 * line and not also the tail's.
	 */
	atomic_store_explicit(kvr__ring_hdr(r->data, r->own & r->mask),
			      r->first, memory_order_release);
	/*
	 * R1: publish every header and payload byte claimed since the last
	 * commit; pairs with A1 (consumer's tail load in ring.c), A3 (attach)
	 * and A4 (kvr_ring_check).
	 */
	atomic_store_explicit(&r->shm->tail, r->pos, memory_order_release);
	r->own = r->pos;
}

static inline int kvr_ring_peek(struct kvr_ring *r, struct kvr_ring_rec *rec)
{
	/*
	 * Fast path: a header that passes every check, within the bytes
	 * the cached tail says are published or, past it, within the
	 * ring's capacity from the released head (the producer can never
	 * have written further). The word is loaded once; the slow path
	 * loads it again and judges that copy, never mixing the two. A
	 * second pass follows a line padding (the rest of a batch's last
	 * line, after a small round trip's record).
	 */
	for (int pass = 0;
	     pass < 2 && r->err == 0 && r->role == KVR_RING_ROLE_CONSUMER;
	     pass++) {
		uint64_t off = r->pos & r->mask;
		uint64_t gap = KVR_RING_LINE - (off & (KVR_RING_LINE - 1));
		/*
		 * A5: pairs with R3 in kvr_ring_commit() (the first record
		 * of a batch) and orders the rest of the batch after it;
		 * below the cached tail A1 ordered it already.
		 */
		uint64_t w = atomic_load_explicit(kvr__ring_hdr(r->data, off),
						  memory_order_acquire);
		uint32_t len = (uint32_t)w;
		uint32_t type = (uint32_t)(w >> 32) & 0xffffu;
		uint64_t bytes =
		    KVR_RING_HDR_BYTES + (((uint64_t)len + 7) & ~7ull);
		uint64_t avail = (int64_t)(r->peer - r->pos) > 0
				     ? r->peer - r->pos
				     : r->own + r->cap - r->pos;

		if ((uint32_t)(w >> 48) == kvr_ring_rec_check(type, len) &&
		    type - 1u < KVR_RING_TYPE_MAX && bytes <= avail &&
		    bytes <= r->cap - off) {
			rec->data = r->data + off + KVR_RING_HDR_BYTES;
			rec->len = len;
			rec->type = (uint16_t)type;
			r->pos += bytes;
			return 0;
		}
		/* Nothing published past the cached tail: the last peek of
		 * every batch, on both sides' round trip, ends here without
		 * a call (the slow path answers the same). Below the cached
		 * tail a zero word is damage, which the slow path judges. */
		if (w == 0 && (int64_t)(r->peer - r->pos) <= 0)
			return -EAGAIN;
		/* A line padding from inside this line to its end (exactly
		 * the word the producer writes for it): skip it. */
		if (gap == KVR_RING_LINE || gap > avail ||
		    w !=
			kvr_ring_rec_word(KVR_RING_TYPE_PAD,
					  (uint32_t)(gap - KVR_RING_HDR_BYTES)))
			break;
		r->pos += gap;
	}
	return kvr__ring_peek_slow(r, rec);
}

static inline void kvr_ring_release(struct kvr_ring *r)
{
	uint64_t n = r->pos - r->own, off = r->own & r->mask;

	if (n == 0 || r->role != KVR_RING_ROLE_CONSUMER)
		return;
	/* Zero [own, pos): free space stays zero. One memset when the span
	 * does not wrap (always, for a round trip's request or answer);
	 * plain stores, see kvr__ring_wipe(), which handles the wrap. */
	if (n <= r->cap - off)
		memset(r->data + off, 0, n);
	else
		kvr__ring_wipe(r);
	/*
	 * R2: every read and the zeroing of the bytes below pos are done;
	 * pairs with A2 (the producer's head load in ring.c), A3 and A4, so
	 * the producer's reuse of these bytes cannot overtake them.
	 */
	atomic_store_explicit(&r->shm->head, r->pos, memory_order_release);
	r->own = r->pos;
}

#ifdef __cplusplus
}
#endif

static inline bool kvr_ring_maybe_data(const struct kvr_ring *r)
{
	/* Relaxed: a hint (see the declaration); peek re-reads with A5. A
	 * latched error says yes, so that the caller's peek reports it. */
	return r->err != 0 || (int64_t)(r->peer - r->pos) > 0 ||
	       (r->pos - r->own < r->cap &&
		atomic_load_explicit(kvr__ring_hdr(r->data, r->pos & r->mask),
				     memory_order_relaxed) != 0);
}

#endif /* KVRING_RING_H */
