/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a worker's per-channel attach,
 * through libkvring's own kvr_chanmap_check() and ring attach. Every
 * value there comes from the server, so each is fuzzed: the input is a
 * list of patches (3 bytes each: a 16-bit position and a byte XORed in)
 * over one consistent set laid end to end: the WELCOME, the control
 * segment (header) and the channel's block (a worker has no directory
 * since abi 4.0). The set starts valid, so patches reach every check in
 * turn. Whatever the bytes, the check must not read outside the two
 * mappings, and when it accepts, the rings it found must lie inside the
 * block; a ring attach over them must not fault.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/chanmap.h>
#include <kvring/ring.h>

#include "fuzz.h"

#define CH    3u
#define RINGS 4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t boot[16] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct kvr_welcome w;
	struct kvr_ctl_geom g0, g;
	struct kvr_ctl_hdr_shm *h;
	struct kvr_channel_shm *ch;
	struct kvr_ring req, resp;
	uint8_t *ctl, *blk;
	uint32_t gen = 0;
	size_t total;

	if (kvr_ctl_geom_compute(8, RINGS, RINGS, &g0) < 0)
		__builtin_trap();
	/* Exactly the mapped sizes: ASan flags any read past them. */
	ctl = calloc(1, g0.ctl_bytes);
	blk = calloc(1, g0.channel_bytes);
	fuzz_check(ctl && blk);
	h = (struct kvr_ctl_hdr_shm *)ctl;
	ch = (struct kvr_channel_shm *)blk;
	kvr_seg_hdr_format(&h->seg, KVR_SEG_KIND_CONTROL, kvr_layout_hash(),
			   g0.ctl_bytes, "f.ctl", boot);
	h->pool_bytes = 1u << 24;
	h->max_channels = 8;
	h->channel_bytes = g0.channel_bytes;
	h->dir_fd = 3;
	h->dir_bytes = g0.dir_bytes;
	h->req_ring_cap = h->resp_ring_cap = RINGS;
	kvr_seg_hdr_publish(&h->seg);
	atomic_store(&ch->state, KVR_CHAN_ACTIVE);
	ch->generation = 5;
	ch->req_ring_off = g0.req_ring_off;
	ch->resp_ring_off = g0.resp_ring_off;
	fuzz_check(kvr_ring_format(blk + g0.req_ring_off,
				   kvr_ring_shm_bytes(RINGS), RINGS) == 0);
	fuzz_check(kvr_ring_format(blk + g0.resp_ring_off,
				   kvr_ring_shm_bytes(RINGS), RINGS) == 0);
	memset(&w, 0, sizeof(w));
	w.channel = CH;
	w.req_ring_cap = w.resp_ring_cap = RINGS;
	w.ctl_bytes = g0.ctl_bytes;
	w.channel_bytes = g0.channel_bytes;
	w.pool_bytes = 1u << 24;
	memcpy(w.boot_id, boot, 16);

	/* Patches: the first 4 KiB of each part is where the fields are. */
	total = sizeof(w) + 4096 + 4096;
	for (size_t i = 0; i + 3 <= size && i < 3 * 512; i += 3) {
		size_t pos =
		    ((size_t)data[i] | (size_t)data[i + 1] << 8) % total;
		uint8_t x = data[i + 2];

		if (pos < sizeof(w))
			((uint8_t *)&w)[pos] ^= x;
		else if (pos < sizeof(w) + 4096)
			ctl[pos - sizeof(w)] ^= x;
		else
			blk[pos - sizeof(w) - 4096] ^= x;
	}

	if (kvr_chanmap_check(&w, ctl, g0.ctl_bytes, blk, g0.channel_bytes, &g,
			      &gen, NULL) == 0) {
		fuzz_check(gen != 0);
		fuzz_check(g.ctl_bytes == g0.ctl_bytes);
		fuzz_check(g.req_ring_off +
			       kvr_ring_shm_bytes(w.req_ring_cap) <=
			   g0.channel_bytes);
		fuzz_check(g.resp_ring_off +
			       kvr_ring_shm_bytes(w.resp_ring_cap) <=
			   g0.channel_bytes);
		/* The rings' own headers are untrusted too: attach may
		 * refuse them, never fault. */
		(void)kvr_ring_attach_producer(
		    &req, blk + g.req_ring_off,
		    kvr_ring_shm_bytes(w.req_ring_cap), w.req_ring_cap);
		(void)kvr_ring_attach_consumer(
		    &resp, blk + g.resp_ring_off,
		    kvr_ring_shm_bytes(w.resp_ring_cap), w.resp_ring_cap);
	}
	free(ctl);
	free(blk);
	return 0;
}
