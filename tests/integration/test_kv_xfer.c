/* SPDX-License-Identifier: MIT */
/*
 * test_kv_xfer.c - paged-KV gather and scatter straight into and out of a
 * transfer's slots (kvr_kv_gather_xfer, kvr_kv_scatter_xfer; worker/
 * kv_xfer.c) against a real kvringd. The gather keeps each slot's sum,
 * computed from the blocks while copying, so a write into a slot after
 * the gather makes the chunk fail every check (the commit does not hash
 * the slot again); the scatter under KVR_CHECKSUM_ON checks each chunk
 * while copying and stops at the one a neighbour process flipped a byte
 * of, leaving the later chunks' blocks untouched, and kvringd drops it.
 * Both transports. Bad arguments are refused with nothing copied.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kv.h>
#include <kvring/kvring.h>

#include "worker_srv.h"

#define NCHUNK 3u
#define BS     4u  /* tokens per engine block */
#define NB     16u /* blocks in the cache */
#define BPC    (16u / BS)

static struct wsrv srv;

static void setup(void)
{
	wsrv_up(&srv);
}

static void teardown(void)
{
	wsrv_down(&srv);
}

TestSuite(kv_xfer, .init = setup, .fini = teardown, .timeout = 60);

/* A merged NHD cache of wsrv_opts's layout: 2 layers, 2 heads of 64
 * fp16, NB blocks of BS tokens (chunks of 16 tokens are 16 KiB). */
struct cache {
	uint8_t *mem;
	size_t bytes;
	void *base[4];
	struct kvr_kv_cache kv;
};

static void cache_init(struct cache *c, uint8_t seed)
{
	size_t blk = (size_t)BS * 2 * 128;

	c->bytes = 2 * 2 * NB * blk;
	c->mem = malloc(c->bytes);
	cr_assert(c->mem);
	for (size_t i = 0; i < c->bytes; i++)
		c->mem[i] = seed ? (uint8_t)(i * 2654435761u >> 11) ^ seed : 0;
	for (int i = 0; i < 4; i++)
		c->base[i] = c->mem + (size_t)i * NB * blk;
	c->kv = (struct kvr_kv_cache){
	    .layers = 2,
	    .nkv = 2,
	    .heads = 2,
	    .head_bytes = 128,
	    .elem_bytes = 2,
	    .block_size = BS,
	    .num_blocks = NB,
	    .chunk_tokens = 16,
	    .block_stride = blk,
	    .token_stride = 256,
	    .head_stride = 128,
	    .layer_bytes = NB * blk,
	    .base = c->base,
	};
}

static struct kvr_client *connect_mode(uint32_t mode, int transport)
{
	struct kvr_client_opts o = wsrv_opts(&srv, transport, 5000);
	struct kvr_client *c = NULL;
	char err[256];

	o.checksum = mode;
	cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

static void make_keys(struct kvr_key *k, uint32_t n, uint64_t salt)
{
	for (uint32_t i = 0; i < n; i++)
		k[i] = (struct kvr_key){.lo = wsrv_mix(salt + i),
					.hi = wsrv_mix(~salt - i)};
}

static const uint32_t ids[NCHUNK * BPC] = {3, 9,  1, 14, 0, 7,
					   2, 11, 5, 15, 8, 4};
static const uint32_t slots[NCHUNK] = {0, 1, 2};

/* Prepare and gather NCHUNK chunks of @src through @w into @x. */
static void gather_into(struct kvr_client *w, const struct cache *src,
			const struct kvr_key *k, struct kvr_xfer *x)
{
	uint64_t cb = kvr_kv_chunk_bytes(&src->kv), sizes[NCHUNK];
	char err[256] = "";

	for (uint32_t i = 0; i < NCHUNK; i++)
		sizes[i] = cb;
	cr_assert_eq(kvr_prepare_store(w, k, sizes, NCHUNK, x), 0, "%s",
		     kvr_client_errmsg(w));
	cr_assert_eq(kvr_kv_gather_xfer(w, &src->kv, ids, NCHUNK * BPC, x,
					slots, NCHUNK, err, sizeof(err)),
		     0, "%s", err);
}

Test(kv_xfer, gather_keeps_the_sums_it_took_when_the_slot_changes_after)
{
	int tps[2] = {0, KVR_TRANSPORT_COPY};
	struct cache src;

	cache_init(&src, 0x5a);
	for (int t = 0; t < 2; t++) {
		struct kvr_client *w = connect_mode(KVR_CHECKSUM_ON, tps[t]);
		struct kvr_client *r = connect_mode(KVR_CHECKSUM_VERIFY, 0);
		uint64_t cb = kvr_kv_chunk_bytes(&src.kv);
		uint8_t *ref = malloc(cb);
		struct kvr_key k[NCHUNK];
		struct kvr_xfer x;

		make_keys(k, NCHUNK, 100 + 10 * (uint64_t)t);
		gather_into(w, &src, k, &x);
		/* After the gather: its sum is of the old bytes. */
		((uint8_t *)x.slots[1].ptr)[cb / 3] ^= 0x40;
		cr_assert_eq(kvr_commit_store(w, &x), 0, "%s",
			     kvr_client_errmsg(w));
		cr_assert_eq(kvr_prepare_retrieve(r, k, NCHUNK, &x), 0);
		cr_expect_eq(x.slots[0].status, KVR_SLOT_OK, "transport %d",
			     tps[t]);
		cr_expect_eq(x.slots[1].status, KVR_SLOT_CORRUPT,
			     "transport %d: the gather's sum was not sent",
			     tps[t]);
		cr_expect_eq(x.slots[2].status, KVR_SLOT_OK);
		cr_assert_eq(kvr_kv_gather(&src.kv, ids + 2 * BPC, BPC,
					   (void *const *)&ref, 1, cb, NULL, 0),
			     0);
		cr_expect_eq(memcmp(x.slots[2].ptr, ref, cb), 0);
		cr_assert_eq(kvr_commit_retrieve(r, &x), 0);
		free(ref);
		kvr_close(r);
		kvr_close(w);
	}
	free(src.mem);
}

static struct kvr_client *lookup_client;
static const struct kvr_key *lookup_keys;

static bool lookup_is_one(void *arg)
{
	(void)arg;
	return kvr_lookup(lookup_client, lookup_keys, NCHUNK, NULL) == 1;
}

/* A neighbour process flips one byte of chunk @victim in the pool. */
static void corrupt_in_child(const struct kvr_key *keys, uint32_t victim)
{
	wsrv_corrupt_in_child(&srv, keys, victim, 100, 0x21);
}

Test(kv_xfer, scatter_stops_at_the_chunk_a_neighbour_flipped)
{
	static const uint32_t mode[2] = {KVR_CHECKSUM_ON, KVR_CHECKSUM_VERIFY};
	struct cache src, dst;
	struct kvr_client *w = connect_mode(KVR_CHECKSUM_ON, 0);
	struct kvr_key k[NCHUNK];
	struct kvr_xfer x;
	char err[256] = "";

	cache_init(&src, 0x33);
	cache_init(&dst, 0);
	for (int m = 0; m < 2; m++) {
		struct kvr_client *r = connect_mode(mode[m], 0);

		make_keys(k, NCHUNK, 200 + 10 * (uint64_t)m);
		memset(dst.mem, 0, dst.bytes);
		gather_into(w, &src, k, &x);
		cr_assert_eq(kvr_commit_store(w, &x), 0);
		corrupt_in_child(k, 1);
		cr_assert_eq(kvr_prepare_retrieve(r, k, NCHUNK, &x), 0);
		cr_assert_eq(x.nslots, NCHUNK);
		cr_expect_eq(kvr_kv_scatter_xfer(r, &dst.kv, ids, NCHUNK * BPC,
						 &x, slots, NCHUNK, 1, err,
						 sizeof(err)),
			     1, "mode %u: %s", mode[m], err);
		cr_expect_eq(x.slots[1].status, KVR_SLOT_CORRUPT);
		/* Chunk 0 is in the blocks (but the skipped block 3);
		 * chunk 2's blocks are untouched. */
		for (uint32_t b = 0; b < NCHUNK * BPC; b++) {
			size_t o = (size_t)ids[b] * BS * 256 + 7;
			uint8_t want = b >= 1 && b < BPC ? src.mem[o] : 0;

			if (b >= BPC && b < 2 * BPC)
				continue; /* the failed chunk's: undefined */
			cr_expect_eq(dst.mem[o], want,
				     "mode %u block %u (id %u): %u, want %u",
				     mode[m], b, ids[b], dst.mem[o], want);
		}
		cr_assert_eq(kvr_commit_retrieve(r, &x), 0);
		lookup_client = r, lookup_keys = k;
		cr_expect(t_wait_until(lookup_is_one, NULL, t_timeout_ms(3000)),
			  "kvringd did not drop the reported chunk");
		kvr_close(r);
	}
	/* Good chunks: all of them land, bit for bit, over copy too, and
	 * without checksums (the plain copies) as with them. */
	for (int m = 0; m < 2; m++) {
		uint32_t mo = m ? KVR_CHECKSUM_OFF : KVR_CHECKSUM_ON;
		struct kvr_client *r = connect_mode(mo, KVR_TRANSPORT_COPY);
		struct kvr_client *s = connect_mode(mo, 0);

		make_keys(k, NCHUNK, 300 + 10 * (uint64_t)m);
		memset(dst.mem, 0, dst.bytes);
		gather_into(s, &src, k, &x);
		cr_assert_eq(kvr_commit_store(s, &x), 0);
		kvr_close(s);
		cr_assert_eq(kvr_prepare_retrieve(r, k, NCHUNK, &x), 0);
		cr_expect_eq(kvr_kv_scatter_xfer(r, &dst.kv, ids, NCHUNK * BPC,
						 &x, slots, NCHUNK, 0, err,
						 sizeof(err)),
			     (long)NCHUNK, "%s", err);
		cr_assert_eq(kvr_commit_retrieve(r, &x), 0);
		for (uint32_t b = 0; b < NCHUNK * BPC; b++)
			cr_expect_eq(memcmp(dst.mem + (size_t)ids[b] * BS * 256,
					    src.mem + (size_t)ids[b] * BS * 256,
					    BS * 256),
				     0, "block %u", ids[b]);
		kvr_close(r);
	}
	kvr_close(w);
	free(src.mem), free(dst.mem);
}

Test(kv_xfer, refuses_bad_arguments_and_copies_nothing)
{
	struct kvr_client *w = connect_mode(KVR_CHECKSUM_ON, 0);
	struct cache src;
	struct kvr_key k[NCHUNK + 1];
	struct kvr_xfer x, rx;
	const uint32_t twice[2] = {1, 1}, far[1] = {7};
	uint64_t cb, sizes[NCHUNK + 1];
	char err[256] = "";

	cache_init(&src, 0x11);
	cb = kvr_kv_chunk_bytes(&src.kv);
	make_keys(k, NCHUNK + 1, 400);
	cr_assert_eq(wsrv_store(w, k, 1, cb), 1u);
	for (uint32_t i = 0; i < NCHUNK + 1; i++)
		sizes[i] = cb;
	cr_assert_eq(kvr_prepare_store(w, k, sizes, NCHUNK + 1, &x), 0);
	cr_assert_eq(x.slots[0].status, KVR_SLOT_EXISTS);
	memset(x.slots[1].ptr, 0xee, cb);
	cr_expect_eq(kvr_kv_gather_xfer(w, &src.kv, ids, BPC, &x, slots, 1, err,
					sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "not OK"), "%s", err);
	cr_expect_eq(kvr_kv_gather_xfer(w, &src.kv, ids, 2 * BPC, &x, twice, 2,
					err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "listed twice"), "%s", err);
	cr_expect_eq(kvr_kv_gather_xfer(w, &src.kv, ids, BPC, &x, far, 1, err,
					sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "out of range"), "%s", err);
	cr_expect(strstr(kvr_client_errmsg(w), "kvr_kv_gather_xfer"), "%s",
		  kvr_client_errmsg(w));
	cr_expect_eq(kvr_kv_gather_xfer(w, &src.kv, ids, BPC, NULL, slots, 1,
					err, sizeof(err)),
		     -EINVAL);
	for (size_t i = 0; i < cb; i++)
		cr_assert_eq(((uint8_t *)x.slots[1].ptr)[i], 0xee,
			     "a refused gather wrote byte %zu", i);
	/* A store's xfer to a scatter, a retrieve's to a gather. */
	cr_expect_eq(kvr_kv_scatter_xfer(w, &src.kv, ids, BPC, &x, slots + 1, 1,
					 0, err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "prepared"), "%s", err);
	cr_assert_eq(kvr_abort_store(w, &x), 0);
	cr_assert_eq(kvr_prepare_retrieve(w, k, 1, &rx), 0);
	cr_expect_eq(kvr_kv_gather_xfer(w, &src.kv, ids, BPC, &rx, slots, 1,
					err, sizeof(err)),
		     -EINVAL);
	cr_expect_eq(kvr_kv_scatter_xfer(w, &src.kv, ids, BPC, &rx, slots, 1,
					 BPC + 1, err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "skip_blocks"), "%s", err);
	cr_assert_eq(kvr_commit_retrieve(w, &rx), 0);
	kvr_close(w);
	free(src.mem);
}
