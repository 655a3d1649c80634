/* SPDX-License-Identifier: MIT */
/*
 * test_ring.c - unit tests of the SPSC record ring (rings/ring.c), both
 * sides in one thread: empty and full, capacity boundaries, padding at the
 * wrap, positions starting just below 2^64, batch commit and release,
 * zero-length records, every kind of damage a hostile peer can do to the
 * shared state (each with its own errno), the inspector's check, and a
 * randomized comparison against a simple queue model. Concurrency lives in
 * tests/stress/test_ring_2proc.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/ring.h>

#define MAX_CAP 4096u

static _Alignas(128) unsigned char mem[KVR_RING_DATA_OFF + MAX_CAP];
static struct kvr_ring prod, cons;
static struct kvr_ring_shm *shm;

/* Formats a ring of @cap bytes starting at @start and attaches both sides. */
static void setup_at(uint32_t cap, uint64_t start)
{
	memset(mem, 0, sizeof(mem));
	shm = (struct kvr_ring_shm *)(void *)mem;
	cr_assert_eq(kvr_ring_format_at(mem, sizeof(mem), cap, start), 0);
	cr_assert_eq(kvr_ring_attach_producer(&prod, mem, sizeof(mem), cap), 0);
	cr_assert_eq(kvr_ring_attach_consumer(&cons, mem, sizeof(mem), cap), 0);
}

static void setup(uint32_t cap)
{
	setup_at(cap, 0);
}

/* Claims, fills with a pattern derived from @seed, but does not commit. */
static int put(uint32_t type, uint32_t len, uint8_t seed)
{
	void *p = NULL;
	int rc = kvr_ring_claim(&prod, type, len, &p);

	if (rc == 0)
		for (uint32_t i = 0; i < len; i++)
			((uint8_t *)p)[i] = (uint8_t)(seed + i);
	return rc;
}

/* Peeks and checks the record against put()'s pattern. */
static void get_expect(uint32_t type, uint32_t len, uint8_t seed)
{
	struct kvr_ring_rec rec;
	int rc = kvr_ring_peek(&cons, &rec);

	cr_assert_eq(rc, 0, "peek: %d", rc);
	cr_assert_eq(rec.type, type, "type %u, expected %u", rec.type, type);
	cr_assert_eq(rec.len, len, "len %u, expected %u", rec.len, len);
	cr_assert_eq((uintptr_t)rec.data % 8, 0, "payload not 8-aligned");
	for (uint32_t i = 0; i < len; i++)
		cr_assert_eq(((const uint8_t *)rec.data)[i],
			     (uint8_t)(seed + i), "byte %u", i);
}

static void put_commit(uint32_t type, uint32_t len, uint8_t seed)
{
	cr_assert_eq(put(type, len, seed), 0);
	kvr_ring_commit(&prod);
}

/* Writes a raw header word at position @pos (test-only tampering). */
static void poke_hdr(uint64_t pos, uint64_t word)
{
	uint64_t off = pos & prod.mask;

	memcpy(shm->data + off, &word, sizeof(word));
}

static void set_tail(uint64_t t)
{
	atomic_store_explicit(&shm->tail, t, memory_order_relaxed);
}

static void set_head(uint64_t h)
{
	atomic_store_explicit(&shm->head, h, memory_order_relaxed);
}

TestSuite(ring, .timeout = 10);

/* ---- format and attach ------------------------------------------------ */

Test(ring, format_fails_einval_when_capacity_is_not_a_power_of_two)
{
	cr_expect_eq(kvr_ring_format(mem, sizeof(mem), 96), -EINVAL);
	cr_expect_eq(kvr_ring_format(mem, sizeof(mem), 32), -EINVAL);
	cr_expect_eq(kvr_ring_format(mem, sizeof(mem), 0), -EINVAL);
	cr_expect_eq(kvr_ring_format(mem, sizeof(mem), 64), 0);
}

Test(ring, format_fails_einval_when_memory_is_short_or_misaligned)
{
	cr_expect_eq(kvr_ring_format(mem, kvr_ring_shm_bytes(128) - 1, 128),
		     -EINVAL);
	cr_expect_eq(kvr_ring_format(mem + 4, sizeof(mem) - 4, 128), -EINVAL);
	cr_expect_eq(kvr_ring_format(NULL, sizeof(mem), 128), -EINVAL);
	cr_expect_eq(kvr_ring_format_at(mem, sizeof(mem), 128, 12), -EINVAL);
	cr_expect_eq(kvr_ring_shm_bytes(128), KVR_RING_DATA_OFF + 128);
}

Test(ring, attach_fails_eproto_when_capacity_differs_from_formatted)
{
	struct kvr_ring r;

	cr_assert_eq(kvr_ring_format(mem, sizeof(mem), 1024), 0);
	cr_expect_eq(kvr_ring_attach_consumer(&r, mem, sizeof(mem), 2048),
		     -EPROTO);
	cr_expect_eq(kvr_ring_attach_producer(&r, mem, sizeof(mem), 512),
		     -EPROTO);
}

Test(ring, attach_fails_eproto_when_magic_is_missing)
{
	struct kvr_ring r;

	memset(mem, 0, sizeof(mem));
	cr_expect_eq(kvr_ring_attach_consumer(&r, mem, sizeof(mem), 1024),
		     -EPROTO);
}

Test(ring, attach_fails_when_positions_are_corrupt)
{
	struct kvr_ring r;

	setup(1024);
	set_tail(1024 + 8);
	cr_expect_eq(kvr_ring_attach_consumer(&r, mem, sizeof(mem), 1024),
		     -ERANGE);
	set_tail(4);
	cr_expect_eq(kvr_ring_attach_producer(&r, mem, sizeof(mem), 1024),
		     -EILSEQ);
}

Test(ring, capacity_is_never_reread_when_peer_changes_it)
{
	setup(64);
	atomic_store(&shm->capacity, 4096);
	put_commit(1, 56, 3);
	cr_expect_eq(put(1, 0, 0), -EAGAIN);
	cr_expect_eq(put(1, 57, 0), -EMSGSIZE);
	get_expect(1, 56, 3);
}

/* ---- empty, full, boundaries ------------------------------------------ */

Test(ring, peek_returns_eagain_when_empty)
{
	struct kvr_ring_rec rec;

	setup(64);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
	cr_expect(kvr_ring_empty(&cons));
	cr_expect_eq(kvr_ring_used(&cons), 0);
	cr_expect_eq(kvr_ring_used(&prod), 0);
}

Test(ring, claim_returns_eagain_when_full_of_smallest_records)
{
	setup(64);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(put(1, 0, 0), 0, "claim #%d", i);
	cr_expect_eq(put(1, 0, 0), -EAGAIN);
	cr_expect_eq(kvr_ring_used(&prod), 64);
	cr_expect_eq(atomic_load(&shm->high_water), 0, "nothing published");
	kvr_ring_commit(&prod);
	cr_expect_eq(put(1, 0, 0), -EAGAIN);
	cr_expect_eq(atomic_load(&shm->high_water), 64, "sampled when full");
	get_expect(1, 0, 0);
	kvr_ring_release(&cons);
	cr_expect_eq(put(2, 0, 0), 0, "one record freed, one fits");
	cr_expect_eq(put(2, 0, 0), -EAGAIN);
}

Test(ring, claim_fills_ring_exactly_when_record_is_capacity_minus_header)
{
	setup(64);
	cr_expect_eq(put(1, 57, 0), -EMSGSIZE);
	cr_expect_eq(put(1, UINT32_MAX, 0), -EMSGSIZE);
	put_commit(7, 56, 9);
	cr_expect_eq(kvr_ring_used(&prod), 64);
	cr_expect_eq(put(1, 0, 0), -EAGAIN);
	get_expect(7, 56, 9);
	kvr_ring_release(&cons);
	cr_expect(kvr_ring_empty(&cons));
}

Test(ring, claim_fails_emsgsize_when_one_byte_too_big_for_large_capacity)
{
	setup(MAX_CAP);
	cr_expect_eq(put(1, MAX_CAP - 7, 0), -EMSGSIZE);
	cr_expect_eq(put(1, MAX_CAP - 8, 0), 0);
}

Test(ring, claim_places_max_record_when_it_needs_padding_first)
{
	struct kvr_ring_rec rec;

	setup(64);
	put_commit(1, 0, 0);
	get_expect(1, 0, 0);
	kvr_ring_release(&cons);
	/* At offset 8 a 64-byte record needs the 56 bytes of padding first. */
	cr_expect_eq(put(2, 56, 5), -EAGAIN);
	kvr_ring_commit(&prod);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN, "padding skipped");
	kvr_ring_release(&cons);
	cr_assert_eq(put(2, 56, 5), 0, "fits once the padding is released");
	kvr_ring_commit(&prod);
	get_expect(2, 56, 5);
}

Test(ring, claim_fails_einval_when_type_is_reserved_or_side_is_wrong)
{
	void *p;

	setup(64);
	cr_expect_eq(kvr_ring_claim(&prod, 0, 8, &p), -EINVAL);
	cr_expect_eq(kvr_ring_claim(&prod, KVR_RING_TYPE_PAD, 8, &p), -EINVAL);
	cr_expect_eq(kvr_ring_claim(&cons, 1, 8, &p), -EINVAL);
	cr_expect_eq(kvr_ring_claim(&prod, KVR_RING_TYPE_MAX, 8, &p), 0);
}

Test(ring, peek_returns_record_when_len_is_zero)
{
	struct kvr_ring_rec rec;

	setup(64);
	put_commit(0x1234, 0, 0);
	cr_assert_eq(kvr_ring_peek(&cons, &rec), 0);
	cr_expect_eq(rec.len, 0);
	cr_expect_eq(rec.type, 0x1234);
	cr_expect_not_null(rec.data);
	cr_expect_eq(kvr_ring_used(&prod), 8);
}

Test(ring, records_round_up_to_8_bytes_when_len_is_odd)
{
	setup(64);
	put_commit(1, 1, 1);
	cr_expect_eq(kvr_ring_used(&prod), 16);
	put_commit(1, 9, 1);
	cr_expect_eq(kvr_ring_used(&prod), 40);
	get_expect(1, 1, 1);
	get_expect(1, 9, 1);
}

/* ---- wrap ------------------------------------------------------------- */

Test(ring, wrap_inserts_padding_record_when_record_crosses_end)
{
	struct kvr_ring_snapshot s;

	setup(256);
	/* Five 48-byte records leave 16 bytes before the end. */
	for (int i = 0; i < 5; i++)
		put_commit(1, 40, (uint8_t)i);
	for (int i = 0; i < 5; i++)
		get_expect(1, 40, (uint8_t)i);
	kvr_ring_release(&cons);
	put_commit(2, 40, 77);
	cr_assert_eq(kvr_ring_check(mem, sizeof(mem), 256, &s), 0);
	cr_expect_eq(s.nr_pad, 1);
	cr_expect_eq(s.nr_records, 1);
	cr_expect_eq(s.used_bytes, 16 + 48);
	get_expect(2, 40, 77);
}

Test(ring, positions_wrap_when_started_just_below_2_pow_64)
{
	uint64_t start = (uint64_t)0 - 136u; /* 8-aligned, just below 2^64 */
	uint32_t n = 0;

	setup_at(512, start);
	for (int round = 0; round < 50; round++) {
		uint32_t len = (uint32_t)(round * 13) % 100;

		put_commit((uint32_t)round + 1, len, (uint8_t)round);
		put_commit((uint32_t)round + 1, len, (uint8_t)(round + 1));
		get_expect((uint32_t)round + 1, len, (uint8_t)round);
		get_expect((uint32_t)round + 1, len, (uint8_t)(round + 1));
		kvr_ring_release(&cons);
		n += 2;
	}
	cr_expect_lt(atomic_load(&shm->tail), start, "tail wrapped past 0");
	cr_expect_eq(atomic_load(&shm->tail), atomic_load(&shm->head));
	cr_expect_eq(n, 100);
	cr_expect_eq(kvr_ring_error(&prod), 0);
	cr_expect_eq(kvr_ring_error(&cons), 0);
}

Test(ring, full_is_detected_when_positions_straddle_2_pow_64)
{
	setup_at(64, (uint64_t)0 - 40u); /* wraps after 40 bytes */
	for (int i = 0; i < 8; i++)
		cr_assert_eq(put(1, 0, 0), 0, "claim #%d", i);
	cr_expect_eq(put(1, 0, 0), -EAGAIN);
	kvr_ring_commit(&prod);
	for (int i = 0; i < 8; i++)
		get_expect(1, 0, 0);
	kvr_ring_release(&cons);
	cr_expect(kvr_ring_empty(&cons));
	cr_expect_eq(put(1, 56, 0), -EAGAIN, "needs padding first");
}

/* ---- batches ---------------------------------------------------------- */

Test(ring, claimed_records_stay_invisible_when_not_committed)
{
	struct kvr_ring_rec rec;

	setup(256);
	cr_assert_eq(put(1, 8, 1), 0);
	cr_assert_eq(put(2, 16, 2), 0);
	cr_assert_eq(put(3, 24, 3), 0);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
	cr_expect(kvr_ring_empty(&cons));
	cr_expect_eq(atomic_load(&shm->tail), 0, "no store before commit");
	kvr_ring_commit(&prod);
	cr_expect_eq(atomic_load(&shm->tail), 16 + 24 + 32);
	cr_expect_not(kvr_ring_empty(&cons));
	get_expect(1, 8, 1);
	get_expect(2, 16, 2);
	get_expect(3, 24, 3);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
}

Test(ring, head_moves_once_when_batch_is_released)
{
	setup(256);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(put(1, 8, (uint8_t)i), 0);
	kvr_ring_commit(&prod);
	for (int i = 0; i < 4; i++) {
		get_expect(1, 8, (uint8_t)i);
		cr_expect_eq(atomic_load(&shm->head), 0, "head moved early");
	}
	kvr_ring_release(&cons);
	cr_expect_eq(atomic_load(&shm->head), 64);
	cr_expect_eq(kvr_ring_used(&cons), 0);
}

/* ---- the consumer polls the next record's header ---------------------- */

Test(ring, format_zeroes_data_when_memory_held_garbage)
{
	struct kvr_ring_rec rec;

	memset(mem, 0xab, sizeof(mem));
	shm = (struct kvr_ring_shm *)(void *)mem;
	cr_assert_eq(kvr_ring_format(mem, sizeof(mem), 256), 0);
	for (uint32_t i = 0; i < 256; i++)
		cr_assert_eq(shm->data[i], 0, "data[%u] not zeroed", i);
	cr_assert_eq(kvr_ring_attach_consumer(&cons, mem, sizeof(mem), 256), 0);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
	cr_expect(kvr_ring_empty(&cons));
	cr_expect_not(kvr_ring_maybe_data(&cons));
}

Test(ring, release_zeroes_the_records_when_they_wrap_the_end)
{
	setup(256);
	/* Four 56-byte records, then one that pads the last 32 bytes and
	 * lands at offset 0: every byte of data[] is written once. */
	for (int i = 0; i < 4; i++)
		put_commit(1, 48, (uint8_t)(i + 1));
	for (int i = 0; i < 4; i++)
		get_expect(1, 48, (uint8_t)(i + 1));
	kvr_ring_release(&cons);
	for (uint32_t i = 0; i < 224; i++)
		cr_assert_eq(shm->data[i], 0, "data[%u] after release", i);
	put_commit(2, 48, 9);
	get_expect(2, 48, 9);
	kvr_ring_release(&cons);
	for (uint32_t i = 0; i < 256; i++)
		cr_assert_eq(shm->data[i], 0, "data[%u] after the wrap", i);
	cr_expect_eq(atomic_load(&shm->head), 256 + 56);
}

Test(ring, peek_finds_record_by_header_when_tail_store_is_not_seen_yet)
{
	struct kvr_ring_rec rec;
	struct kvr_ring_snapshot sn;

	setup(256);
	put_commit(1, 8, 3);
	put_commit(2, 8, 4);
	/* As if the producer's tail store (just after the header) had not
	 * reached us: the records are found by their header words. */
	set_tail(0);
	cr_expect(kvr_ring_maybe_data(&cons));
	cr_expect_not(kvr_ring_empty(&cons));
	get_expect(1, 8, 3);
	get_expect(2, 8, 4);
	cr_expect_eq(kvr_ring_used(&cons), 32);
	kvr_ring_release(&cons);
	/* A head past the tail is a ring in motion, not damage. */
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
	cr_expect_eq(kvr_ring_error(&cons), 0);
	cr_expect(kvr_ring_empty(&cons));
	cr_expect_eq(kvr_ring_check(mem, sizeof(mem), 256, &sn), -EBUSY);
	set_tail(32);
	cr_expect_eq(kvr_ring_check(mem, sizeof(mem), 256, &sn), 0);
	cr_expect_eq(sn.used_bytes, 0);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
}

Test(ring, only_the_first_header_of_a_batch_is_stored_by_commit)
{
	uint64_t w;

	setup(256);
	cr_assert_eq(put(1, 8, 1), 0);
	cr_assert_eq(put(2, 8, 2), 0);
	memcpy(&w, shm->data, sizeof(w));
	cr_expect_eq(w, 0, "the polled word is stored by the commit only");
	memcpy(&w, shm->data + 16, sizeof(w));
	cr_expect_eq(w, kvr_ring_rec_word(2, 8), "later headers at claim");
	cr_expect_not(kvr_ring_maybe_data(&cons));
	kvr_ring_commit(&prod);
	memcpy(&w, shm->data, sizeof(w));
	cr_expect_eq(w, kvr_ring_rec_word(1, 8));
	cr_expect(kvr_ring_maybe_data(&cons));
}

/* ---- line padding ------------------------------------------------------ */

/* Like setup(), with the producer told that the consumer takes line
 * padding (the consumer attached after it, as kvringd's worker does). */
static void setup_lines_at(uint32_t cap, uint64_t start)
{
	setup_at(cap, start);
	cr_assert_eq(atomic_load(&shm->consumer_flags), KVR_RING_CF_LINE_PAD,
		     "the consumer's attach says it takes line padding");
	kvr_ring_producer_sync(&prod);
}

/* Offset in data[] of a record's header, from its payload pointer. */
static uint64_t rec_off(const struct kvr_ring_rec *rec)
{
	return (uint64_t)((const unsigned char *)rec->data - shm->data) -
	       KVR_RING_HDR_BYTES;
}

Test(ring, each_batch_starts_a_line_when_the_consumer_takes_line_padding)
{
	struct kvr_ring_snapshot s;
	struct kvr_ring_rec rec;

	setup_lines_at(1024, 0);
	put_commit(1, 32, 1);	       /* 40 bytes, then 24 of padding */
	put_commit(2, 40, 2);	       /* 48 bytes at 64, then 16 of padding */
	cr_assert_eq(put(3, 8, 3), 0); /* a batch of two: packed inside */
	put_commit(4, 96, 4);	       /* ...and its end padded */
	cr_expect_eq(atomic_load(&shm->tail), 128 + 16 + 104 + 8);
	cr_assert_eq(kvr_ring_check(mem, sizeof(mem), 1024, &s), 0);
	cr_expect_eq(s.nr_records, 4);
	cr_expect_eq(s.nr_pad, 3);

	get_expect(1, 32, 1);
	cr_assert_eq(kvr_ring_peek(&cons, &rec), 0);
	cr_expect_eq(rec_off(&rec), 64, "the second batch starts a line");
	cr_assert_eq(kvr_ring_peek(&cons, &rec), 0);
	cr_expect_eq(rec_off(&rec), 128);
	cr_assert_eq(kvr_ring_peek(&cons, &rec), 0);
	cr_expect_eq(rec_off(&rec), 144, "records of one batch are packed");
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
	kvr_ring_release(&cons);
	cr_expect_eq(atomic_load(&shm->head), 256);
}

Test(ring, batch_is_packed_when_a_repeat_of_its_last_record_would_fit_as_well)
{
	setup_lines_at(1024, 0);
	put_commit(1, 64, 1); /* 72 bytes: two lines from 72 as from 128 */
	cr_expect_eq(atomic_load(&shm->tail), 72);
	put_commit(2, 16, 2); /* 24 bytes from 72: one line, as from 128 */
	cr_expect_eq(atomic_load(&shm->tail), 96);
	put_commit(3, 32, 3); /* to 136: 40 bytes more fit in its line */
	cr_expect_eq(atomic_load(&shm->tail), 136);
	put_commit(4, 32, 4); /* to 176: 40 more would straddle 192 */
	cr_expect_eq(atomic_load(&shm->tail), 192);
	get_expect(1, 64, 1);
	get_expect(2, 16, 2);
	get_expect(3, 32, 3);
	get_expect(4, 32, 4);
}

Test(ring, batches_are_packed_when_the_consumer_never_said_it_takes_padding)
{
	setup(1024);
	atomic_store(&shm->consumer_flags, 0); /* a consumer of before */
	kvr_ring_producer_sync(&prod);
	put_commit(1, 32, 1);
	put_commit(2, 40, 2);
	cr_expect_eq(atomic_load(&shm->tail), 40 + 48);
	get_expect(1, 32, 1);
	get_expect(2, 40, 2);
}

Test(ring, producer_pads_from_its_sync_when_the_consumer_attached_later)
{
	memset(mem, 0, sizeof(mem));
	shm = (struct kvr_ring_shm *)(void *)mem;
	cr_assert_eq(kvr_ring_format(mem, sizeof(mem), 1024), 0);
	cr_assert_eq(kvr_ring_attach_producer(&prod, mem, sizeof(mem), 1024),
		     0);
	cr_assert_eq(kvr_ring_attach_consumer(&cons, mem, sizeof(mem), 1024),
		     0);
	put_commit(1, 16, 1);
	cr_expect_eq(atomic_load(&shm->tail), 24, "not synced: packed");
	kvr_ring_producer_sync(&prod);
	put_commit(2, 16, 2);
	cr_expect_eq(atomic_load(&shm->tail), 64, "synced: to the line");
	/* Attached after the consumer: no sync needed. */
	cr_assert_eq(kvr_ring_attach_producer(&prod, mem, sizeof(mem), 1024),
		     0);
	put_commit(3, 40, 3);
	cr_expect_eq(atomic_load(&shm->tail), 128);
	get_expect(1, 16, 1);
	get_expect(2, 16, 2);
	get_expect(3, 40, 3);
}

Test(ring, commit_leaves_out_the_line_padding_when_the_line_is_not_free)
{
	struct kvr_ring_snapshot s;

	/* head 40 and 128 bytes: free space ends at 168, inside a line. */
	setup_lines_at(128, 40);
	put_commit(1, 80, 1); /* 40..128, ends on a line */
	put_commit(2, 32, 2); /* 128..168: its line runs past 168 */
	cr_expect_eq(atomic_load(&shm->tail), 168);
	cr_assert_eq(kvr_ring_check(mem, sizeof(mem), 128, &s), 0);
	cr_expect_eq(s.nr_pad, 0);
	get_expect(1, 80, 1);
	get_expect(2, 32, 2);
}

Test(ring, peek_skips_a_line_padding_then_the_end_padding)
{
	struct kvr_ring_rec rec;

	setup_lines_at(256, 0);
	put_commit(1, 176, 1); /* 0..184, padding to 192 */
	get_expect(1, 176, 1);
	kvr_ring_release(&cons); /* head 184: the padding is not peeked */
	put_commit(2, 80, 2);	 /* 88 bytes: end padding 192..256 first */
	cr_expect_eq(atomic_load(&shm->tail), 256 + 88);
	cr_assert_eq(kvr_ring_peek(&cons, &rec), 0);
	cr_expect_eq(rec_off(&rec), 0, "two paddings skipped in one peek");
	cr_expect_eq(rec.type, 2);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
}

Test(ring, empty_is_true_when_only_a_line_padding_is_left)
{
	setup_lines_at(256, 0);
	put_commit(1, 32, 1); /* 40 bytes, 24 of padding */
	cr_expect_not(kvr_ring_empty(&cons));
	get_expect(1, 32, 1);
	cr_expect(kvr_ring_empty(&cons), "a padding is not a record");
	kvr_ring_release(&cons);
	cr_expect_eq(atomic_load(&shm->head), 64, "the padding is released");
	cr_expect(kvr_ring_empty(&cons));
}

Test(ring, peek_fails_ebadmsg_when_padding_fills_a_whole_line)
{
	struct kvr_ring_rec rec;

	setup(256);
	poke_hdr(64, kvr_ring_rec_word(KVR_RING_TYPE_PAD, 56));
	set_tail(0);	      /* reached by its header, at the cursor */
	put_commit(1, 48, 1); /* 0..56 */
	poke_hdr(56, kvr_ring_rec_word(KVR_RING_TYPE_PAD, 0)); /* to 64 */
	set_tail(128);
	get_expect(1, 48, 1);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG,
		     "a padding starting on a line is not a line padding");
}

Test(ring, peek_returns_eagain_when_every_byte_is_peeked_but_not_released)
{
	struct kvr_ring_rec rec;

	setup(64);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(put(1, 0, 0), 0);
	kvr_ring_commit(&prod);
	set_tail(0); /* only the headers tell the consumer */
	for (int i = 0; i < 8; i++)
		get_expect(1, 0, 0);
	/* The word at the cursor is the first record's, not a new one. */
	cr_expect_not(kvr_ring_maybe_data(&cons));
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN);
	cr_expect_eq(kvr_ring_error(&cons), 0);
	kvr_ring_release(&cons);
	cr_expect_eq(atomic_load(&shm->head), 64);
}

Test(ring, peek_fails_eoverflow_when_header_runs_past_capacity_from_head)
{
	struct kvr_ring_rec rec;

	setup(256);
	/* No tail: 8 + 256 bytes from head 0 can't be in a 256-byte ring. */
	poke_hdr(0, kvr_ring_rec_word(1, 256));
	cr_expect(kvr_ring_maybe_data(&cons));
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EOVERFLOW);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EOVERFLOW, "latched");
}

Test(ring, peek_fails_ebadmsg_when_header_past_tail_is_garbage)
{
	struct kvr_ring_rec rec;

	setup(256);
	poke_hdr(0, 0x0123456789abcdefull); /* tail stays 0 */
	cr_expect_not(kvr_ring_empty(&cons), "a word there is not empty");
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG);
}

/* ---- a hostile producer, seen by the consumer ------------------------- */

Test(ring, peek_fails_eproto_when_tail_moves_backwards)
{
	struct kvr_ring_rec rec;

	setup(256);
	put_commit(1, 8, 0);
	put_commit(1, 8, 0);
	get_expect(1, 8, 0);
	get_expect(1, 8, 0);
	/* Records are found by their headers; the tail is read (32) when
	 * the word at the cursor is zero. */
	cr_assert(kvr_ring_empty(&cons));
	set_tail(16);
	cr_expect_not(kvr_ring_empty(&cons), "the tail is judged here");
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EPROTO);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EPROTO, "latched");
	cr_expect_eq(kvr_ring_error(&cons), -EPROTO);
	cr_expect_not(kvr_ring_empty(&cons), "an error never looks empty");
}

Test(ring, peek_fails_erange_when_tail_is_more_than_capacity_ahead)
{
	struct kvr_ring_rec rec;

	setup(256);
	set_tail(256 + 8);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EAGAIN, "peek reads no tail");
	cr_expect_not(kvr_ring_empty(&cons), "the tail is judged here");
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -ERANGE);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -ERANGE, "latched");
}

Test(ring, peek_fails_eilseq_when_tail_is_misaligned)
{
	struct kvr_ring_rec rec;

	setup(256);
	set_tail(12);
	cr_expect_not(kvr_ring_empty(&cons), "the tail is judged here");
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EILSEQ);
}

Test(ring, peek_fails_eoverflow_when_len_overruns_published_bytes)
{
	struct kvr_ring_rec rec;

	setup(256);
	set_tail(16);
	/* The consumer reads tail 16 while the word at its cursor is zero;
	 * then a header longer than those 16 bytes appears. */
	cr_assert_not(kvr_ring_empty(&cons));
	poke_hdr(0, kvr_ring_rec_word(1, 100));
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EOVERFLOW);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EOVERFLOW, "latched");
}

Test(ring, peek_fails_eoverflow_when_len_overruns_ring_end)
{
	struct kvr_ring_rec rec;

	setup_at(64, 48);
	/* 32 bytes from offset 48 would run 16 past the end of data[]. */
	poke_hdr(48, kvr_ring_rec_word(1, 24));
	set_tail(48 + 32);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EOVERFLOW);
}

Test(ring, peek_fails_eoverflow_when_len_is_huge)
{
	struct kvr_ring_rec rec;

	setup(256);
	poke_hdr(0, kvr_ring_rec_word(1, UINT32_MAX));
	set_tail(256);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EOVERFLOW);
}

Test(ring, peek_fails_enomsg_when_type_is_zero)
{
	struct kvr_ring_rec rec;

	setup(256);
	poke_hdr(0, kvr_ring_rec_word(0, 8));
	set_tail(16);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -ENOMSG);
}

Test(ring, peek_fails_ebadmsg_when_header_is_garbage)
{
	struct kvr_ring_rec rec;

	setup(256);
	poke_hdr(0, 0x0123456789abcdefull);
	set_tail(64);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG);
}

Test(ring, peek_fails_ebadmsg_when_header_is_zero)
{
	struct kvr_ring_rec rec;

	setup(256);
	set_tail(64); /* published bytes the producer never wrote */
	cr_expect_not(kvr_ring_empty(&cons), "the tail is read here");
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG);
}

Test(ring, peek_fails_ebadmsg_when_padding_stops_before_end)
{
	struct kvr_ring_rec rec;

	setup_at(64, 32);
	poke_hdr(32, kvr_ring_rec_word(KVR_RING_TYPE_PAD, 8));
	set_tail(32 + 32);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG);
}

Test(ring, peek_fails_ebadmsg_when_padding_is_at_offset_zero)
{
	struct kvr_ring_rec rec;

	setup(64);
	poke_hdr(0, kvr_ring_rec_word(KVR_RING_TYPE_PAD, 56));
	set_tail(64);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG);
}

Test(ring, peek_fails_ebadmsg_when_header_below_cached_tail_is_corrupt)
{
	struct kvr_ring_rec rec;

	setup(256);
	for (int i = 0; i < 3; i++)
		put_commit(1, 8, (uint8_t)i);
	get_expect(1, 8, 0); /* the bad word sends it to the tail: 48 */
	poke_hdr(16, kvr_ring_rec_word(1, 8) ^ (1ull << 40));
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG);
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EBADMSG, "latched");
}

Test(ring, commit_and_release_do_nothing_when_called_on_the_wrong_side)
{
	setup(256);
	put_commit(1, 8, 0);
	get_expect(1, 8, 0);
	kvr_ring_commit(&cons);
	cr_expect_eq(atomic_load(&shm->tail), 16);
	cr_assert_eq(put(1, 8, 0), 0);
	kvr_ring_release(&prod);
	cr_expect_eq(atomic_load(&shm->head), 0);
	kvr_ring_release(&cons);
	cr_expect_eq(atomic_load(&shm->head), 16);
}

Test(ring, empty_reports_false_when_tail_is_corrupt)
{
	struct kvr_ring_rec rec;

	setup(256);
	set_tail(4);
	cr_expect_not(kvr_ring_empty(&cons));
	cr_expect_eq(kvr_ring_peek(&cons, &rec), -EILSEQ);
}

/* ---- a hostile consumer, seen by the producer ------------------------- */

/* Fills a 64-byte ring, frees half, and lets the producer see head 32. */
static void fill_and_free_half(void)
{
	setup(64);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(put(1, 0, 0), 0);
	kvr_ring_commit(&prod);
	for (int i = 0; i < 4; i++)
		get_expect(1, 0, 0);
	kvr_ring_release(&cons);
	cr_assert_eq(put(1, 0, 0), 0, "refresh sees head 32");
	cr_assert_eq(kvr_ring_used(&prod), 64 - 24);
}

Test(ring, claim_fails_eproto_when_head_moves_backwards)
{
	fill_and_free_half();
	for (int i = 0; i < 3; i++)
		cr_assert_eq(put(1, 0, 0), 0);
	set_head(24);
	cr_expect_eq(put(1, 0, 0), -EPROTO);
	cr_expect_eq(put(1, 0, 0), -EPROTO, "latched");
	cr_expect_eq(kvr_ring_error(&prod), -EPROTO);
}

Test(ring, claim_fails_erange_when_head_passes_published_tail)
{
	fill_and_free_half();
	for (int i = 0; i < 3; i++)
		cr_assert_eq(put(1, 0, 0), 0);
	/* Published tail is 64; claimed-but-unpublished bytes don't count. */
	set_head(72);
	cr_expect_eq(put(1, 0, 0), -ERANGE);
}

Test(ring, claim_fails_eilseq_when_head_is_misaligned)
{
	fill_and_free_half();
	for (int i = 0; i < 3; i++)
		cr_assert_eq(put(1, 0, 0), 0);
	set_head(36);
	cr_expect_eq(put(1, 0, 0), -EILSEQ);
}

/* ---- inspector -------------------------------------------------------- */

Test(ring, check_counts_records_when_ring_is_healthy)
{
	struct kvr_ring_snapshot s;

	setup(1024);
	put_commit(1, 10, 0);
	put_commit(2, 0, 0);
	put_commit(3, 100, 0);
	get_expect(1, 10, 0);
	kvr_ring_release(&cons);
	cr_assert_eq(kvr_ring_check(mem, sizeof(mem), 1024, &s), 0);
	cr_expect_eq(s.capacity, 1024);
	cr_expect_eq(s.head, 24);
	cr_expect_eq(s.tail, 24 + 8 + 112);
	cr_expect_eq(s.nr_records, 2);
	cr_expect_eq(s.nr_pad, 0);
	cr_expect_eq(s.high_water, 0, "never full, never sampled");
}

Test(ring, check_reports_bad_pos_when_a_header_is_corrupt)
{
	struct kvr_ring_snapshot s;

	setup(1024);
	put_commit(1, 8, 0);
	put_commit(1, 8, 0);
	poke_hdr(16, 0xdeadbeefull);
	cr_expect_eq(kvr_ring_check(mem, sizeof(mem), 1024, &s), -EBADMSG);
	cr_expect_eq(s.bad_pos, 16);
	cr_expect_eq(s.nr_records, 1);
	set_tail(1024 + 8);
	cr_expect_eq(kvr_ring_check(mem, sizeof(mem), 1024, &s), -ERANGE);
	cr_expect_eq(kvr_ring_check(mem, sizeof(mem), 512, &s), -EPROTO);
}

/* ---- randomized model ------------------------------------------------- */

/*
 * A model of the ring's byte accounting and a FIFO of records. Each record
 * is (type, len, seed); the model predicts exactly when claim must succeed
 * or say -EAGAIN (including the padding rule), and the consumer must see
 * the committed records in order with their bytes intact.
 */
struct mrec {
	uint32_t type, len;
	uint8_t seed;
	uint64_t end; /* model position just past the record */
};

#define MQ 4096

Test(ring, matches_queue_model_when_ops_are_random)
{
	static struct mrec q[MQ];
	/* q[rd..committed) published, [committed..wr) claimed. */
	size_t rd = 0, peeked = 0, committed = 0, wr = 0;
	uint32_t cap = 1024;
	uint64_t mpos = 0, mhead = 0, mcursor = 0, mtail = 0;
	unsigned seed = 12345;

	setup(cap);
	srand(seed);
	for (int op = 0; op < 300000; op++) {
		int what = rand() % 8;

		if (what < 3) {
			uint32_t len = (uint32_t)rand() % 300;
			uint32_t type =
			    1 + (uint32_t)rand() % KVR_RING_TYPE_MAX;
			uint64_t need = 8 + ((len + 7) & ~7u);
			uint64_t off = mpos % cap, pad = 0;
			int expect, rc;

			if (need > cap - off)
				pad = cap - off;
			expect =
			    (mpos + pad + need - mhead <= cap) ? 0 : -EAGAIN;
			if (expect && pad && mpos + pad - mhead <= cap)
				mpos += pad; /* padding claimed alone */
			rc = put(type, len, (uint8_t)op);
			cr_assert_eq(rc, expect,
				     "op %d: claim %u -> %d, model %d", op, len,
				     rc, expect);
			if (rc == 0) {
				cr_assert_lt(wr - rd, MQ);
				mpos += pad + need;
				q[wr++ % MQ] =
				    (struct mrec){type, len, (uint8_t)op, mpos};
			}
		} else if (what < 4) {
			kvr_ring_commit(&prod);
			committed = wr;
			mtail = mpos;
		} else if (what < 7) {
			struct kvr_ring_rec rec;
			int rc = kvr_ring_peek(&cons, &rec);

			if (peeked == committed) {
				cr_assert_eq(rc, -EAGAIN, "op %d: peek %d", op,
					     rc);
				mcursor = mtail; /* trailing padding skipped */
				continue;
			}
			cr_assert_eq(rc, 0, "op %d: peek %d", op, rc);
			struct mrec m = q[peeked++ % MQ];

			cr_assert_eq(rec.type, m.type, "op %d", op);
			cr_assert_eq(rec.len, m.len, "op %d", op);
			for (uint32_t i = 0; i < m.len; i++)
				cr_assert_eq(((const uint8_t *)rec.data)[i],
					     (uint8_t)(m.seed + i));
			mcursor = m.end;
		} else {
			kvr_ring_release(&cons);
			rd = peeked;
			mhead = mcursor;
			cr_assert_eq(atomic_load(&shm->head), mhead, "op %d",
				     op);
		}
	}
	cr_expect_eq(kvr_ring_error(&prod), 0);
	cr_expect_eq(kvr_ring_error(&cons), 0);
}
