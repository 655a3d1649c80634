/* SPDX-License-Identifier: MIT */
/*
 * test_kv.c - paged-KV gather and scatter (worker/kv.c, <kvring/kv.h>).
 * Each layout is built as a real array in its physical order (vLLM merged
 * NHD and HND, separate K and V, cross-layer, MLA) and the copies are
 * checked against a from-the-definition reference that indexes the
 * logical [kv][layer][token][head][byte] position of the chunk format, so
 * a bug in the stride walk can't hide behind itself. Also: scatter into
 * other block ids gives back the same bytes, skip_blocks leaves shared
 * blocks alone, and every bad argument is refused with nothing copied.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kv.h>
#include <kvring/sum.h>

TestSuite(kv, .timeout = 20);

enum phys { MERGED_NHD, MERGED_HND, SEPARATE_NHD, CROSS_NHD, MLA };

/* A test cache: L layers, H heads of D bytes, NB blocks of BS tokens. */
struct tcache {
	enum phys p;
	uint32_t L, H, D, NB, BS, C, nkv;
	uint8_t *mem; /* all of it, one allocation */
	size_t mem_bytes;
	void *base[64];
	struct kvr_kv_cache kv;
};

/* Byte offset in mem of (layer l, kv k, block b, token t, head h, byte i),
 * written from each layout's definition, independently of the strides. */
static size_t ref_off(const struct tcache *c, uint32_t l, uint32_t k,
		      uint32_t b, uint32_t t, uint32_t h, uint32_t i)
{
	size_t blk = (size_t)c->BS * c->H * c->D;
	size_t layer = (size_t)c->nkv * c->NB * blk;

	switch (c->p) {
	case MERGED_NHD:   /* per layer [2][NB][BS][H][D] */
	case CROSS_NHD:	   /* [L][2][NB][BS][H][D] */
	case SEPARATE_NHD: /* per layer K [NB][BS][H][D], then V */
		return l * layer + k * c->NB * blk + b * blk +
		       ((size_t)t * c->H + h) * c->D + i;
	case MERGED_HND: /* per layer [2][NB][H][BS][D] */
		return l * layer + k * c->NB * blk + b * blk +
		       ((size_t)h * c->BS + t) * c->D + i;
	case MLA: /* per layer [NB][BS][D] */
		return l * layer + b * blk + (size_t)t * c->D + i;
	}
	return 0;
}

static void tcache_init(struct tcache *c, enum phys p, uint32_t L, uint32_t H,
			uint32_t D, uint32_t NB, uint32_t BS, uint32_t C)
{
	size_t blk;

	memset(c, 0, sizeof(*c));
	c->p = p;
	c->L = L, c->H = p == MLA ? 1 : H, c->D = D, c->NB = NB, c->BS = BS;
	c->C = C, c->nkv = p == MLA ? 1 : 2;
	blk = (size_t)BS * c->H * D;
	c->mem_bytes = (size_t)L * c->nkv * NB * blk;
	c->mem = malloc(c->mem_bytes);
	cr_assert(c->mem);
	for (size_t i = 0; i < c->mem_bytes; i++)
		c->mem[i] = (uint8_t)(i * 2654435761u >> 13);
	cr_assert(L * c->nkv <= 64);
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t k = 0; k < c->nkv; k++)
			c->base[l * c->nkv + k] =
			    c->mem + ref_off(c, l, k, 0, 0, 0, 0);
	c->kv = (struct kvr_kv_cache){
	    .layers = L,
	    .nkv = c->nkv,
	    .heads = c->H,
	    .head_bytes = D,
	    .elem_bytes = 2,
	    .block_size = BS,
	    .num_blocks = NB,
	    .chunk_tokens = C,
	    .block_stride = blk,
	    .token_stride = p == MERGED_HND ? D : (uint64_t)c->H * D,
	    .head_stride = p == MERGED_HND ? (uint64_t)BS * D : D,
	    .layer_bytes = (size_t)NB * blk,
	    .base = c->base,
	};
}

/* Chunk byte offset of (kv k, layer l, token t, head h, byte i). */
static size_t chunk_off(const struct tcache *c, uint32_t k, uint32_t l,
			uint32_t t, uint32_t h, uint32_t i)
{
	return ((((size_t)k * c->L + l) * c->C + t) * c->H + h) * c->D + i;
}

/* Checks that chunk holds blocks ids[0..C/BS) of the cache. */
static void expect_chunk(const struct tcache *c, const uint8_t *chunk,
			 const uint32_t *ids)
{
	for (uint32_t k = 0; k < c->nkv; k++)
		for (uint32_t l = 0; l < c->L; l++)
			for (uint32_t t = 0; t < c->C; t++)
				for (uint32_t h = 0; h < c->H; h++)
					for (uint32_t i = 0; i < c->D; i++) {
						uint8_t want = c->mem[ref_off(
						    c, l, k, ids[t / c->BS],
						    t % c->BS, h, i)];
						uint8_t got = chunk[chunk_off(
						    c, k, l, t, h, i)];
						if (got != want)
							cr_assert_fail(
							    "kv %u layer %u "
							    "token %u head %u "
							    "byte %u: got %u, "
							    "want %u",
							    k, l, t, h, i, got,
							    want);
					}
}

static void gather_matches_reference(enum phys p)
{
	struct tcache c;
	const uint32_t ids[] = {5, 2, 7, 0, 3, 1}; /* 2 chunks of 3 */
	uint64_t cb;
	uint8_t *ch[2];
	char err[256] = "";

	tcache_init(&c, p, 3, 2, 8, 8, 4, 12);
	cb = kvr_kv_chunk_bytes(&c.kv);
	cr_assert_eq(cb, (uint64_t)c.nkv * 3 * 12 * c.H * 8);
	ch[0] = malloc(cb), ch[1] = malloc(cb);
	cr_assert_eq(kvr_kv_gather(&c.kv, ids, 6, (void *const *)ch, 2, cb, err,
				   sizeof(err)),
		     0, "%s", err);
	expect_chunk(&c, ch[0], ids);
	expect_chunk(&c, ch[1], ids + 3);
	free(ch[0]), free(ch[1]), free(c.mem);
}

Test(kv, gather_matches_reference_when_layout_is_merged_nhd)
{
	gather_matches_reference(MERGED_NHD);
}

Test(kv, gather_matches_reference_when_layout_is_merged_hnd)
{
	gather_matches_reference(MERGED_HND);
}

Test(kv, gather_matches_reference_when_k_and_v_are_separate)
{
	gather_matches_reference(SEPARATE_NHD);
}

Test(kv, gather_matches_reference_when_cache_is_cross_layer)
{
	gather_matches_reference(CROSS_NHD);
}

Test(kv, gather_matches_reference_when_layout_is_mla)
{
	gather_matches_reference(MLA);
}

/* The fixed-size head copies (128, 256, 512 bytes) of the HND path. */
Test(kv, gather_matches_reference_when_hnd_heads_have_common_sizes)
{
	const uint32_t sizes[] = {128, 256, 512, 96};
	const uint32_t ids[] = {3, 0};

	for (unsigned s = 0; s < 4; s++) {
		struct tcache c;
		uint64_t cb;
		uint8_t *ch;
		char err[256] = "";

		tcache_init(&c, MERGED_HND, 2, 3, sizes[s], 4, 2, 4);
		cb = kvr_kv_chunk_bytes(&c.kv);
		ch = malloc(cb);
		cr_assert_eq(kvr_kv_gather(&c.kv, ids, 2, (void *const *)&ch, 1,
					   cb, err, sizeof(err)),
			     0, "%s", err);
		expect_chunk(&c, ch, ids);
		/* And back, into a zeroed cache, through the same path. */
		struct tcache d;

		tcache_init(&d, MERGED_HND, 2, 3, sizes[s], 4, 2, 4);
		memset(d.mem, 0, d.mem_bytes);
		cr_assert_eq(kvr_kv_scatter(&d.kv, ids, 2,
					    (const void *const *)&ch, 1, cb, 0,
					    err, sizeof(err)),
			     0, "%s", err);
		for (uint32_t l = 0; l < 2; l++)
			for (uint32_t k = 0; k < 2; k++)
				for (uint32_t j = 0; j < 2; j++) {
					size_t o =
					    ref_off(&c, l, k, ids[j], 0, 0, 0);

					cr_expect_eq(
					    memcmp(d.mem + o, c.mem + o,
						   (size_t)2 * 3 * sizes[s]),
					    0, "head size %u block %u",
					    sizes[s], ids[j]);
				}
		free(ch), free(c.mem), free(d.mem);
	}
}

/* The streaming-store path of a gather: large dense blocks, into chunks
 * that are 64-byte aligned, 8 bytes off, and of a size with a tail. */
Test(kv, gather_matches_reference_when_chunk_alignment_varies)
{
	const uint32_t ids[] = {2, 0, 3};
	const size_t offs[] = {0, 8, 16, 40};

	for (unsigned o = 0; o < 4; o++)
		for (int p = 0; p < 2; p++) {
			struct tcache c;
			uint64_t cb;
			uint8_t *mem, *ch;
			char err[256] = "";

			tcache_init(&c, p ? MERGED_HND : MERGED_NHD, 2, 4, 72,
				    4, 4, 12);
			cb = kvr_kv_chunk_bytes(&c.kv);
			mem = aligned_alloc(64, cb + 128);
			cr_assert(mem);
			ch = mem + offs[o];
			memset(mem, 0xEE, cb + 128);
			cr_assert_eq(kvr_kv_gather(&c.kv, ids, 3,
						   (void *const *)&ch, 1, cb,
						   err, sizeof(err)),
				     0, "%s", err);
			expect_chunk(&c, ch, ids);
			/* Not one byte past the chunk. */
			for (size_t i = offs[o] + cb; i < cb + 128; i++)
				cr_assert_eq(mem[i], 0xEE,
					     "byte %zu past the "
					     "chunk written",
					     i - offs[o] - cb);
			free(mem), free(c.mem);
		}
}

/* A scatter of 4 MiB or more takes the streaming path: same bytes. */
Test(kv, scatter_round_trips_when_large_enough_to_stream)
{
	for (int p = 0; p < 2; p++) {
		struct tcache src, dst;
		uint32_t ids[32];
		uint8_t *ch[8];
		uint64_t cb;
		char err[256] = "";

		for (uint32_t i = 0; i < 32; i++)
			ids[i] = (i * 7 + 3) % 32; /* a permutation */
		tcache_init(&src, p ? MERGED_HND : MERGED_NHD, 2, 8, 256, 32,
			    16, 64);
		tcache_init(&dst, p ? MERGED_HND : MERGED_NHD, 2, 8, 256, 32,
			    16, 64);
		memset(dst.mem, 0, dst.mem_bytes);
		cb = kvr_kv_chunk_bytes(&src.kv);
		cr_assert_geq(cb * 8, 4u << 20, "too small to stream");
		for (int c = 0; c < 8; c++)
			ch[c] = aligned_alloc(4096, cb);
		cr_assert_eq(kvr_kv_gather(&src.kv, ids, 32, (void *const *)ch,
					   8, cb, err, sizeof(err)),
			     0, "%s", err);
		cr_assert_eq(kvr_kv_scatter(&dst.kv, ids, 32,
					    (const void *const *)ch, 8, cb, 0,
					    err, sizeof(err)),
			     0, "%s", err);
		/* Every block was a target: the caches are equal. */
		cr_expect_eq(memcmp(src.mem, dst.mem, src.mem_bytes), 0,
			     "streamed scatter (%s) differs",
			     p ? "HND" : "NHD");
		for (int c = 0; c < 8; c++)
			free(ch[c]);
		free(src.mem), free(dst.mem);
	}
}

/* Scatter into other blocks of a zeroed cache, gather those back. */
static void scatter_round_trips(enum phys p)
{
	struct tcache src, dst;
	const uint32_t from[] = {1, 6, 3}, to[] = {7, 0, 4};
	uint64_t cb;
	uint8_t *a, *b;
	char err[256] = "";

	tcache_init(&src, p, 2, 2, 4, 8, 2, 6);
	tcache_init(&dst, p, 2, 2, 4, 8, 2, 6);
	memset(dst.mem, 0, dst.mem_bytes);
	cb = kvr_kv_chunk_bytes(&src.kv);
	a = malloc(cb), b = malloc(cb);
	cr_assert_eq(kvr_kv_gather(&src.kv, from, 3, (void *const *)&a, 1, cb,
				   err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(kvr_kv_scatter(&dst.kv, to, 3, (const void *const *)&a, 1,
				    cb, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(kvr_kv_gather(&dst.kv, to, 3, (void *const *)&b, 1, cb,
				   err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(memcmp(a, b, cb), 0, "round trip differs");
	/* Block 2 was not a target: still zero. */
	for (uint32_t l = 0; l < 2; l++)
		cr_expect_eq(dst.mem[ref_off(&dst, l, 0, 2, 1, 0, 3)], 0);
	free(a), free(b), free(src.mem), free(dst.mem);
}

Test(kv, scatter_round_trips_when_block_ids_differ)
{
	scatter_round_trips(MERGED_NHD);
	scatter_round_trips(MERGED_HND);
	scatter_round_trips(MLA);
}

Test(kv, scatter_leaves_shared_blocks_when_skip_is_given)
{
	struct tcache c;
	const uint32_t ids[] = {0, 1, 2, 3}; /* 2 chunks of 2 blocks */
	uint64_t cb;
	uint8_t *ch[2], *before;
	char err[256] = "";

	tcache_init(&c, MERGED_NHD, 2, 1, 4, 4, 2, 4);
	cb = kvr_kv_chunk_bytes(&c.kv);
	ch[0] = malloc(cb), ch[1] = malloc(cb);
	memset(ch[0], 0xAA, cb), memset(ch[1], 0xBB, cb);
	before = malloc(c.mem_bytes);
	memcpy(before, c.mem, c.mem_bytes);
	/* Skip 3 blocks: chunk 0 entirely, and chunk 1's first block. */
	cr_assert_eq(kvr_kv_scatter(&c.kv, ids, 4, (const void *const *)ch, 2,
				    cb, 3, err, sizeof(err)),
		     0, "%s", err);
	for (uint32_t l = 0; l < 2; l++)
		for (uint32_t k = 0; k < 2; k++)
			for (uint32_t b = 0; b < 4; b++) {
				size_t o = ref_off(&c, l, k, b, 1, 0, 2);

				if (b < 3)
					cr_expect_eq(c.mem[o], before[o],
						     "shared block %u written",
						     b);
				else
					cr_expect_eq(c.mem[o], 0xBB,
						     "block %u not written", b);
			}
	/* skip = all blocks writes nothing; more is refused. */
	cr_expect_eq(kvr_kv_scatter(&c.kv, ids, 4, (const void *const *)ch, 2,
				    cb, 4, err, sizeof(err)),
		     0);
	cr_expect_eq(kvr_kv_scatter(&c.kv, ids, 4, (const void *const *)ch, 2,
				    cb, 5, err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "skip_blocks"), "%s", err);
	free(ch[0]), free(ch[1]), free(before), free(c.mem);
}

/* Each refused call must leave the destination untouched. */
static void expect_refused(const struct tcache *c, const uint32_t *ids,
			   size_t n, uint64_t cb, const char *needle)
{
	uint8_t *ch = malloc(kvr_kv_chunk_bytes(&c->kv) + 64);
	char err[256] = "";

	memset(ch, 0x5A, kvr_kv_chunk_bytes(&c->kv) + 64);
	cr_expect_eq(kvr_kv_gather(&c->kv, ids, n, (void *const *)&ch, 1, cb,
				   err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, needle), "error \"%s\" lacks \"%s\"", err,
		  needle);
	for (uint64_t i = 0; i < kvr_kv_chunk_bytes(&c->kv) + 64; i++)
		if (ch[i] != 0x5A)
			cr_assert_fail("byte %llu copied by a refused call",
				       (unsigned long long)i);
	free(ch);
}

Test(kv, refuses_block_id_when_out_of_range)
{
	struct tcache c;
	const uint32_t last[] = {7, 6, 7}, past[] = {0, 8, 1};
	uint64_t cb;
	uint8_t *ch;

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 2, 6);
	cb = kvr_kv_chunk_bytes(&c.kv);
	ch = malloc(cb);
	/* The last block is fine, one past it is not. */
	cr_expect_eq(
	    kvr_kv_gather(&c.kv, last, 3, (void *const *)&ch, 1, cb, NULL, 0),
	    0);
	expect_refused(&c, past, 3, cb, "block id 8");
	free(ch), free(c.mem);
}

Test(kv, refuses_chunk_when_size_does_not_match_layout)
{
	struct tcache c;
	const uint32_t ids[] = {0, 1, 2};

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 2, 6);
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv) + 2,
		       "does not match");
	expect_refused(&c, ids, 2, kvr_kv_chunk_bytes(&c.kv), "needs 3");
	free(c.mem);
}

Test(kv, refuses_descriptor_when_block_size_does_not_divide_chunk)
{
	struct tcache c;
	const uint32_t ids[] = {0, 1, 2};

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 4, 6);
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv),
		       "does not divide");
	free(c.mem);
}

Test(kv, refuses_descriptor_when_tensor_is_misaligned)
{
	struct tcache c;
	const uint32_t ids[] = {0, 1, 2};

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 2, 6);
	c.base[1] = (uint8_t *)c.base[1] + 1;
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv), "not aligned");
	c.base[1] = (uint8_t *)c.base[1] - 1;
	c.kv.token_stride += 1;
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv), "misaligned");
	free(c.mem);
}

Test(kv, refuses_strides_when_they_reach_past_the_tensor)
{
	struct tcache c;
	const uint32_t ids[] = {0, 1, 2};

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 2, 6);
	/* Exactly the extent is fine; one byte short is not. */
	cr_expect_eq(kvr_kv_check(&c.kv, NULL, 0), 0);
	c.kv.layer_bytes -= 1;
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv), "reach past");
	c.kv.layer_bytes += 1;
	c.kv.block_stride = UINT64_MAX / 2 - 1; /* overflow, not a wrap */
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv), "reach past");
	free(c.mem);
}

Test(kv, refuses_descriptor_when_a_dimension_is_zero)
{
	struct tcache c;
	const uint32_t ids[] = {0, 1, 2};

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 2, 6);
	c.kv.heads = 0;
	expect_refused(&c, ids, 3, 0, "zero dimension");
	c.kv.heads = 2;
	c.kv.nkv = 3;
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv), "nkv");
	c.kv.nkv = 2;
	c.kv.elem_bytes = 3;
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv), "elem_bytes");
	c.kv.elem_bytes = 2;
	c.base[2] = NULL;
	expect_refused(&c, ids, 3, kvr_kv_chunk_bytes(&c.kv), "NULL");
	free(c.mem);
}

/*
 * A chunk whose size does not fit 64 bits (2^16 layers x 2^16 tokens x
 * 2^16 heads x 2^16 bytes) used to wrap to 0 bytes, match a chunk_bytes
 * of 0 and copy 2^64 bytes into a 64-byte chunk.
 */
Test(kv, refuses_descriptor_when_chunk_size_overflows)
{
	const uint32_t n = 1u << 16;
	void **base = calloc(n, sizeof(*base));
	uint8_t *mem = calloc(1, n), *ch = malloc(64);
	const uint32_t ids[] = {0};
	char err[256] = "";
	struct kvr_kv_cache kv = {
	    .layers = n,
	    .nkv = 1,
	    .heads = n,
	    .head_bytes = n,
	    .elem_bytes = 1,
	    .block_size = n,
	    .num_blocks = 1,
	    .chunk_tokens = n,
	    .block_stride = n,
	    .token_stride = 0,
	    .head_stride = 0,
	    .layer_bytes = n,
	    .base = base,
	};

	cr_assert(base && mem && ch);
	for (uint32_t i = 0; i < n; i++)
		base[i] = mem;
	memset(ch, 0x5A, 64);
	cr_expect_eq(kvr_kv_chunk_bytes(&kv), 0);
	cr_expect_eq(kvr_kv_check(&kv, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "overflows"), "errbuf: %s", err);
	cr_expect_eq(kvr_kv_gather(&kv, ids, 1, (void *const *)&ch, 1, 0, err,
				   sizeof(err)),
		     -EINVAL);
	for (int i = 0; i < 64; i++)
		cr_expect_eq(ch[i], 0x5A, "byte %d copied by a refused call",
			     i);
	free(ch), free(mem), free(base);
}

/*
 * nchunks * blocks-per-chunk wrapping to nblocks used to pass the count
 * check and walk the chunks array far past its end: here the array ends
 * at a PROT_NONE page, so reading past it faults.
 */
Test(kv, refuses_chunk_count_when_it_overflows)
{
	struct tcache c;
	const uint32_t ids[] = {0, 1};
	long pg = sysconf(_SC_PAGESIZE);
	char *map, err[256] = "";
	void **chunks;
	uint8_t *ch;

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 2, 4); /* 2 blocks a chunk */
	ch = malloc(kvr_kv_chunk_bytes(&c.kv));
	map = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(map != MAP_FAILED && ch);
	cr_assert_eq(mprotect(map + pg, (size_t)pg, PROT_NONE), 0);
	chunks = (void **)(map + pg) - 1;
	chunks[0] = ch;
	/* (2^63 + 1) * 2 wraps to 2 = nblocks. */
	cr_expect_eq(kvr_kv_gather(&c.kv, ids, 2, chunks, SIZE_MAX / 2 + 2,
				   kvr_kv_chunk_bytes(&c.kv), err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "block ids for"), "errbuf: %s", err);
	munmap(map, 2 * (size_t)pg);
	free(ch), free(c.mem);
}

/*
 * The summing copies (kvr_kv_gather_sum, kvr_kv_scatter_check): the
 * gather's sums are kvr_sum64 of the chunks it wrote, whatever the layout
 * (NHD hashes one run per block, HND one per head), and its bytes are the
 * plain gather's; the scatter writes what the plain scatter writes when
 * every sum matches, and stops after the first chunk that does not.
 */
static void gather_sum_matches(enum phys p, uint32_t D)
{
	struct tcache c;
	const uint32_t ids[] = {5, 2, 7, 0, 3, 1}; /* 2 chunks of 3 */
	uint64_t cb, sums[2] = {0, 0};
	uint8_t *ch[2], *plain[2];
	char err[256] = "";

	tcache_init(&c, p, 3, 2, D, 8, 4, 12);
	cb = kvr_kv_chunk_bytes(&c.kv);
	for (int i = 0; i < 2; i++)
		ch[i] = malloc(cb), plain[i] = malloc(cb);
	cr_assert_eq(kvr_kv_gather_sum(&c.kv, ids, 6, (void *const *)ch, 2, cb,
				       sums, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(kvr_kv_gather(&c.kv, ids, 6, (void *const *)plain, 2, cb,
				   err, sizeof(err)),
		     0, "%s", err);
	for (int i = 0; i < 2; i++) {
		cr_expect_eq(memcmp(ch[i], plain[i], cb), 0,
			     "phys %d: chunk %d differs from the plain gather",
			     p, i);
		cr_expect_eq(sums[i], kvr_sum64(ch[i], cb),
			     "phys %d D %u: sum of chunk %d is %016llx, the "
			     "chunk's is %016llx",
			     p, D, i, (unsigned long long)sums[i],
			     (unsigned long long)kvr_sum64(ch[i], cb));
		free(ch[i]), free(plain[i]);
	}
	free(c.mem);
}

Test(kv, gather_sum_is_the_chunks_sum_when_layouts_differ)
{
	gather_sum_matches(MERGED_NHD, 8);
	gather_sum_matches(MERGED_HND, 8);
	gather_sum_matches(MERGED_HND, 256); /* the fixed-size head copy */
	gather_sum_matches(SEPARATE_NHD, 8);
	gather_sum_matches(CROSS_NHD, 8);
	gather_sum_matches(MLA, 8);
}

/* Chunks big enough for several 128 KiB pieces of the piecewise sum. */
Test(kv, gather_sum_is_the_chunks_sum_when_chunks_are_large)
{
	struct tcache c;
	uint32_t ids[32];
	uint64_t cb, sum = 0;
	uint8_t *ch;
	char err[256] = "";

	for (uint32_t i = 0; i < 32; i++)
		ids[i] = (i * 7) % 32;
	tcache_init(&c, MERGED_HND, 4, 4, 256, 32, 8, 256);
	cb = kvr_kv_chunk_bytes(&c.kv);
	cr_assert_gt(cb, 4 * KVR_SUM_PIECE);
	ch = malloc(cb);
	cr_assert_eq(kvr_kv_gather_sum(&c.kv, ids, 32, (void *const *)&ch, 1,
				       cb, &sum, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(sum, kvr_sum64(ch, cb));
	free(ch), free(c.mem);
}

static void scatter_check_stops(enum phys p)
{
	struct tcache src, dst;
	const uint32_t from[] = {1, 6, 3, 5, 0, 2}, to[] = {7, 0, 4, 2, 5, 1};
	uint64_t cb, sums[3];
	uint8_t *ch[3];
	char err[256] = "";

	tcache_init(&src, p, 2, 2, 4, 8, 2, 4);
	tcache_init(&dst, p, 2, 2, 4, 8, 2, 4);
	memset(dst.mem, 0, dst.mem_bytes);
	cb = kvr_kv_chunk_bytes(&src.kv);
	for (int i = 0; i < 3; i++)
		ch[i] = malloc(cb);
	cr_assert_eq(kvr_kv_gather_sum(&src.kv, from, 6, (void *const *)ch, 3,
				       cb, sums, err, sizeof(err)),
		     0, "%s", err);
	/* All good: everything copied, as the plain scatter would. */
	cr_assert_eq(kvr_kv_scatter_check(&dst.kv, to, 6,
					  (const void *const *)ch, 3, cb, 0,
					  sums, err, sizeof(err)),
		     3, "%s", err);
	for (uint32_t l = 0; l < 2; l++)
		cr_expect_eq(dst.mem[ref_off(&dst, l, 1, 5, 1, 0, 3)],
			     src.mem[ref_off(&src, l, 1, 0, 1, 0, 3)]);
	/* Chunk 1 damaged: chunk 0 copied, 1 failed, 2 untouched. */
	memset(dst.mem, 0, dst.mem_bytes);
	ch[1][cb / 2] ^= 0x08;
	cr_assert_eq(kvr_kv_scatter_check(&dst.kv, to, 6,
					  (const void *const *)ch, 3, cb, 0,
					  sums, err, sizeof(err)),
		     1, "phys %d: the damaged chunk 1 was not caught", p);
	for (uint32_t l = 0; l < 2; l++) {
		cr_expect_eq(dst.mem[ref_off(&dst, l, 0, 0, 1, 0, 2)],
			     src.mem[ref_off(&src, l, 0, 6, 1, 0, 2)],
			     "chunk 0 not copied");
		cr_expect_eq(dst.mem[ref_off(&dst, l, 0, 5, 1, 0, 2)], 0,
			     "chunk 2 copied past a failed chunk");
	}
	/* Skipped blocks count in the sum but are not written. */
	ch[1][cb / 2] ^= 0x08;
	memset(dst.mem, 0, dst.mem_bytes);
	cr_assert_eq(kvr_kv_scatter_check(&dst.kv, to, 6,
					  (const void *const *)ch, 3, cb, 3,
					  sums, err, sizeof(err)),
		     3, "%s", err);
	for (uint32_t l = 0; l < 2; l++) {
		cr_expect_eq(dst.mem[ref_off(&dst, l, 0, 4, 1, 0, 1)], 0,
			     "skipped block 4 written");
		cr_expect_eq(dst.mem[ref_off(&dst, l, 0, 2, 1, 0, 1)],
			     src.mem[ref_off(&src, l, 0, 5, 1, 0, 1)],
			     "block 2 after the skipped ones not written");
	}
	/* The first chunk's skipped bytes are checked too. */
	ch[0][1] ^= 0x01;
	cr_expect_eq(kvr_kv_scatter_check(&dst.kv, to, 6,
					  (const void *const *)ch, 3, cb, 2,
					  sums, err, sizeof(err)),
		     0);
	cr_expect_eq(kvr_kv_scatter_check(&dst.kv, to, 6,
					  (const void *const *)ch, 3, cb, 0,
					  NULL, err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "sums is NULL"), "%s", err);
	for (int i = 0; i < 3; i++)
		free(ch[i]);
	free(src.mem), free(dst.mem);
}

Test(kv, scatter_check_stops_after_the_chunk_whose_sum_differs)
{
	scatter_check_stops(MERGED_NHD);
	scatter_check_stops(MERGED_HND);
	scatter_check_stops(MLA);
}

Test(kv, summing_copies_refuse_what_the_plain_ones_refuse)
{
	struct tcache c;
	const uint32_t ids[] = {0, 9, 2};
	uint64_t cb, sum = 0;
	uint8_t *ch;
	char err[256] = "";

	tcache_init(&c, MERGED_NHD, 2, 2, 4, 8, 2, 6);
	cb = kvr_kv_chunk_bytes(&c.kv);
	ch = calloc(1, cb);
	cr_expect_eq(kvr_kv_gather_sum(&c.kv, ids, 3, (void *const *)&ch, 1, cb,
				       &sum, err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "block id 9"), "%s", err);
	cr_expect_eq(kvr_kv_scatter_check(&c.kv, ids, 3,
					  (const void *const *)&ch, 1, cb, 0,
					  &sum, err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "block id 9"), "%s", err);
	cr_expect_eq(kvr_kv_gather_sum(&c.kv, ids, 3, (void *const *)&ch, 1, cb,
				       NULL, err, sizeof(err)),
		     -EINVAL);
	for (size_t i = 0; i < cb; i++)
		cr_assert_eq(ch[i], 0, "a refused gather wrote byte %zu", i);
	free(ch), free(c.mem);
}
