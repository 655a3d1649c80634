/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the server's request decoding. The first two bytes
 * choose the record type, the rest is the record body exactly as a hostile
 * worker could leave it in its request ring. kvr_req_parse() must either
 * refuse it or hand back a view whose every array lies inside the input;
 * the target reads every key and size to let ASan prove it, and a
 * store-ahead bind it passes must carry exactly its words.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/proto.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvr_req_view v;
	uint64_t sink = 0;
	uint8_t *rec;
	uint16_t type;

	if (size < 2)
		return 0;
	memcpy(&type, data, 2);
	/* The ring hands out 8-byte aligned records: copy to get that. */
	rec = __builtin_alloca(size - 2 + 8);
	rec = (uint8_t *)(((uintptr_t)rec + 7) & ~(uintptr_t)7);
	memcpy(rec, data + 2, size - 2);
	if (kvr_req_parse(type, rec, size - 2, 512, &v) != 0)
		return 0;
	/* A bind's words are read as key lo, key hi, size (and the sum):
	 * the decoder must never pass one with another count. */
	if (v.op == KVR_OP_COMMIT_STORE && (v.hdr.flags & KVR_REQ_BIND) &&
	    (v.hdr.count !=
		 KVR_BIND_WORDS + ((v.hdr.flags & KVR_REQ_SUMS) ? 1u : 0u) ||
	     !v.words))
		abort();
	for (uint32_t i = 0; i < v.hdr.count; i++) {
		/* Keys, or the u64 words of a commit (checksums). */
		if (v.keys)
			sink += v.keys[i].lo ^ v.keys[i].hi;
		if (v.words)
			sink += v.words[i];
		if (v.sizes)
			sink += v.sizes[i];
	}
	__asm__ volatile("" : : "r"(sink));
	return 0;
}
