/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the ring consumer facing a corrupt producer. The input
 * is split into a tail position (8 bytes), a head start (8 bytes) and the
 * ring's data bytes; the consumer then drains with peek/release. It must
 * return records that lie inside the ring, or an error, and must stop: the
 * loop is bounded by the capacity (every accepted record consumes at least
 * 8 bytes) and the target traps if it ever runs longer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/ring.h>

#include "fuzz.h"

#define CAP 1024u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static _Alignas(128) unsigned char mem[KVR_RING_DATA_OFF + CAP];
	struct kvr_ring_shm *shm = (struct kvr_ring_shm *)mem;
	struct kvr_ring r;
	struct kvr_ring_rec rec;
	uint64_t tail, head, sink = 0;
	unsigned steps = 0;
	int rc;

	if (size < 16)
		return 0;
	memcpy(&tail, data, 8);
	memcpy(&head, data + 8, 8);
	/* Start from a consistent ring at a fuzzer-chosen position (so the
	 * counter wrap is explored), then let the "producer" scribble. */
	if (kvr_ring_format_at(mem, sizeof(mem), CAP, head & ~7ull) != 0)
		__builtin_trap();
	if (kvr_ring_attach_consumer(&r, mem, sizeof(mem), CAP) != 0)
		__builtin_trap();
	/* The producer's bytes start where the consumer will look first. */
	memset(shm->data, 0, CAP);
	for (size_t i = 0; i < size - 16 && i < CAP; i++)
		shm->data[((head & ~7ull) + i) & (CAP - 1)] = data[16 + i];
	atomic_store_explicit(&shm->tail, tail, memory_order_release);

	for (;;) {
		rc = kvr_ring_peek(&r, &rec);
		if (rc != 0)
			break;
		if ((const unsigned char *)rec.data < shm->data ||
		    (const unsigned char *)rec.data + rec.len > shm->data + CAP)
			__builtin_trap(); /* record outside the ring */
		for (uint32_t i = 0; i < rec.len; i++)
			sink += ((const unsigned char *)rec.data)[i];
		if (++steps % 4 == 0)
			kvr_ring_release(&r);
		if (steps > CAP / 8 + 1)
			__builtin_trap(); /* more records than could fit */
	}
	kvr_ring_release(&r);
	/* The doorbell re-check walks the same bytes (it skips paddings). */
	(void)kvr_ring_empty(&r);
	__asm__ volatile("" : : "r"(sink));
	return 0;
}
