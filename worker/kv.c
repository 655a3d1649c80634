/* SPDX-License-Identifier: MIT */
/*
 * kv.c - paged-KV gather and scatter between an engine's paged cache and
 * chunk slots (<kvring/kv.h>). Owns the descriptor validation and the copy
 * loops; it does not own slots, keys or the server (the caller gets slots
 * from kvr_prepare_store/kvr_prepare_retrieve, and the Python wrapper in
 * worker/python/kvring/kv.py builds descriptors from torch tensors).
 *
 * Every argument is checked before the first byte moves, so an error
 * copies nothing. The copy loops walk the chunk in its own order (kv,
 * layer, token), so the chunk side is written or read strictly
 * sequentially and the engine side jumps once per block; a dense block
 * (NHD) is one run, an HND block one run per (token, head). A gather
 * writes its chunk with non-temporal stores on x86 (the chunk is read by
 * other processes later, not by this one), a scatter of 4 MiB or more
 * writes the engine's blocks that way too, and each fences once at the
 * end.
 *
 * The _sum and _check variants feed each chunk's XXH3-64 (<kvring/sum.h>,
 * in pieces) while they copy: the gather computes the sum of each chunk
 * it writes, the scatter compares each chunk with the sum it was stored
 * with and stops after the first chunk that differs. Each piece is
 * hashed from the side the copy read, right after the copy, while it is
 * still in cache, so the streaming stores stay (and the destination is
 * never read back). The gather reads the engine's blocks, this process's
 * own memory. The scatter reads the slot, which other processes could
 * write: a write before the copy is seen by the copy and the hash alike
 * (caught), one after the copy only by the hash (a false alarm, never a
 * miss); only a write undone again within those microseconds could pass,
 * which no stray write does (docs/tensors.md). worker/kv_xfer.c ties both
 * to a transfer's slots and sums.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <kvring/kv.h>
#include <kvring/sum.h>

#include "client.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Writes the reason for an -EINVAL; errbuf may be NULL. */
__attribute__((format(printf, 3, 4))) static int
bad(char *errbuf, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errbuf && errlen) {
		va_start(ap, fmt);
		vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* a * b + c, false on overflow of 64 bits. */
static bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
	uint64_t m;

	if (__builtin_mul_overflow(a, b, &m))
		return false;
	return !__builtin_add_overflow(m, c, out);
}

static uint64_t row_bytes(const struct kvr_kv_cache *kv)
{
	return (uint64_t)kv->heads * kv->head_bytes;
}

/* The chunk size, false if it does not fit 64 bits (nor a size_t). */
static bool chunk_size(const struct kvr_kv_cache *kv, uint64_t *out)
{
	uint64_t n = row_bytes(kv);

	if (!mul_add(n, kv->chunk_tokens, 0, &n) ||
	    !mul_add(n, kv->layers, 0, &n) || !mul_add(n, kv->nkv, 0, &n) ||
	    n > SIZE_MAX)
		return false;
	*out = n;
	return true;
}

uint64_t kvr_kv_chunk_bytes(const struct kvr_kv_cache *kv)
{
	uint64_t n;

	if (!kv || !chunk_size(kv, &n))
		return 0;
	return n;
}

int kvr_kv_check(const struct kvr_kv_cache *kv, char *errbuf, size_t errlen)
{
	uint64_t reach = 0;
	uint32_t e;

	if (!kv)
		return bad(errbuf, errlen, "kv cache descriptor is NULL");
	if (!kv->layers || !kv->heads || !kv->head_bytes || !kv->block_size ||
	    !kv->num_blocks || !kv->chunk_tokens)
		return bad(
		    errbuf, errlen,
		    "kv cache has a zero dimension (layers %u, heads %u, "
		    "head_bytes %u, block_size %u, num_blocks %u, "
		    "chunk_tokens %u): give every one",
		    kv->layers, kv->heads, kv->head_bytes, kv->block_size,
		    kv->num_blocks, kv->chunk_tokens);
	if (kv->nkv != 1 && kv->nkv != 2)
		return bad(errbuf, errlen,
			   "nkv is %u: use 2 for K and V, 1 for MLA", kv->nkv);
	if (kv->chunk_tokens % kv->block_size)
		return bad(errbuf, errlen,
			   "block_size %u does not divide chunk_tokens %u: "
			   "choose a chunk size that is a multiple of the "
			   "engine's block size",
			   kv->block_size, kv->chunk_tokens);
	if (!chunk_size(kv, &reach))
		return bad(errbuf, errlen,
			   "chunk size overflows (%u x %u layers x %u tokens x "
			   "%u heads x %u bytes): the descriptor's dimensions "
			   "are not a real cache's",
			   kv->nkv, kv->layers, kv->chunk_tokens, kv->heads,
			   kv->head_bytes);
	e = kv->elem_bytes;
	if (e != 1 && e != 2 && e != 4)
		return bad(errbuf, errlen,
			   "elem_bytes is %u: use 1 (fp8 as bytes), 2 or 4", e);
	if (kv->head_bytes % e || kv->block_stride % e ||
	    kv->token_stride % e || kv->head_stride % e)
		return bad(errbuf, errlen,
			   "head_bytes %u or a stride (block %llu, token %llu, "
			   "head %llu) is not a multiple of the %u-byte "
			   "element: the tensor is misaligned",
			   kv->head_bytes, (unsigned long long)kv->block_stride,
			   (unsigned long long)kv->token_stride,
			   (unsigned long long)kv->head_stride, e);
	if (!kv->base)
		return bad(errbuf, errlen, "kv cache base array is NULL");
	for (uint64_t i = 0; i < (uint64_t)kv->layers * kv->nkv; i++) {
		if (!kv->base[i])
			return bad(errbuf, errlen,
				   "base pointer %llu (layer %llu, %s) is NULL",
				   (unsigned long long)i,
				   (unsigned long long)(i / kv->nkv),
				   kv->nkv == 1 ? "latent"
				   : i % 2	? "V"
						: "K");
		if ((uintptr_t)kv->base[i] % e)
			return bad(errbuf, errlen,
				   "base pointer %llu (layer %llu) is not "
				   "aligned to its %u-byte elements",
				   (unsigned long long)i,
				   (unsigned long long)(i / kv->nkv), e);
	}
	/* The farthest byte any (block, token, head) can touch. */
	if (!mul_add(kv->num_blocks - 1, kv->block_stride, kv->head_bytes,
		     &reach) ||
	    !mul_add(kv->block_size - 1, kv->token_stride, reach, &reach) ||
	    !mul_add(kv->heads - 1, kv->head_stride, reach, &reach) ||
	    reach > kv->layer_bytes)
		return bad(errbuf, errlen,
			   "strides reach past the %llu bytes of a layer "
			   "(block %llu, token %llu, head %llu for %u blocks "
			   "of %u tokens): the descriptor does not match the "
			   "tensor",
			   (unsigned long long)kv->layer_bytes,
			   (unsigned long long)kv->block_stride,
			   (unsigned long long)kv->token_stride,
			   (unsigned long long)kv->head_stride, kv->num_blocks,
			   kv->block_size);
	return 0;
}

/* The checks both directions share; on success *bpc is blocks per chunk. */
static int check_run(const struct kvr_kv_cache *kv, const uint32_t *block_ids,
		     size_t nblocks, const void *const *chunks, size_t nchunks,
		     uint64_t chunk_bytes, char *errbuf, size_t errlen,
		     size_t *bpc)
{
	int rc = kvr_kv_check(kv, errbuf, errlen);
	size_t want;

	if (rc < 0)
		return rc;
	*bpc = kv->chunk_tokens / kv->block_size;
	if (chunk_bytes != kvr_kv_chunk_bytes(kv))
		return bad(errbuf, errlen,
			   "chunk is %llu bytes, the layout needs %llu "
			   "(%u x %u layers x %u tokens x %u heads x %u "
			   "bytes): the namespace does not match this cache",
			   (unsigned long long)chunk_bytes,
			   (unsigned long long)kvr_kv_chunk_bytes(kv), kv->nkv,
			   kv->layers, kv->chunk_tokens, kv->heads,
			   kv->head_bytes);
	if (nchunks && (!chunks || !block_ids))
		return bad(errbuf, errlen, "chunks or block_ids is NULL");
	if (__builtin_mul_overflow(nchunks, *bpc, &want) || nblocks != want)
		return bad(errbuf, errlen,
			   "%zu block ids for %zu chunks: each chunk of %u "
			   "tokens needs %zu blocks of %u",
			   nblocks, nchunks, kv->chunk_tokens, *bpc,
			   kv->block_size);
	for (size_t c = 0; c < nchunks; c++)
		if (!chunks[c])
			return bad(errbuf, errlen, "chunk %zu is NULL", c);
	for (size_t j = 0; j < nblocks; j++)
		if (block_ids[j] >= kv->num_blocks)
			return bad(
			    errbuf, errlen,
			    "block id %u (position %zu) is out of range: "
			    "the cache has %u blocks",
			    block_ids[j], j, kv->num_blocks);
	return 0;
}

/*
 * Streaming (non-temporal) stores, on x86. A gathered chunk is read later
 * by other processes (workers, the L2 uploader), not by this one; a big
 * scatter is larger than the cache anyway. Streaming its bytes skips the
 * read-for-ownership of every destination line and leaves the engine's
 * working set in the cache: what glibc's memcpy does for one large copy
 * but not for the 32 KiB (or 256-byte) pieces a paged copy is made of.
 * The caller fences once at the end (sfence), before anything publishes
 * the bytes.
 */
#if defined(__x86_64__)
#define STREAMS 1
/* n a multiple of 64, dst 16-byte aligned. */
static inline __attribute__((always_inline)) void
stream64(char *dst, const char *src, size_t n)
{
	for (; n >= 64; n -= 64, dst += 64, src += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

		_mm_stream_si128((__m128i *)dst, a);
		_mm_stream_si128((__m128i *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(dst + 48), d);
	}
}

static inline void stream_fence(void)
{
	_mm_sfence();
}
#else
#define STREAMS 0
static inline void stream64(char *dst, const char *src, size_t n)
{
	memcpy(dst, src, n);
}

static inline void stream_fence(void)
{
}
#endif

/* Scatters smaller than this stay in the cache: the engine reads them. */
#define SCATTER_STREAM_MIN (4u << 20)

/*
 * Copies n bytes; with stream, the 16-byte aligned middle of a run of at
 * least 256 bytes goes through streaming stores and the unaligned head
 * and tail through memcpy. Inlined so that a constant n gives fixed-size
 * moves.
 */
static inline __attribute__((always_inline)) void
copy_run(char *dst, const char *src, size_t n, bool stream)
{
	size_t head = (16 - ((uintptr_t)dst & 15)) & 15, body;

	if (!STREAMS || !stream || n < 256 + head) {
		memcpy(dst, src, n);
		return;
	}
	memcpy(dst, src, head);
	dst += head, src += head, n -= head;
	body = n & ~(size_t)63;
	stream64(dst, src, body);
	memcpy(dst + body, src + body, n - body);
}

/* Per (token, head) copies of n bytes (HND); st (may be NULL) is fed
 * each engine-side run in chunk order. */
static inline __attribute__((always_inline)) void
heads_loop(const struct kvr_kv_cache *kv, char *eng, char *chk, bool to_chunk,
	   bool stream, size_t n, struct kvr_sum_state *st)
{
	for (uint32_t t = 0; t < kv->block_size; t++) {
		char *e = eng + t * kv->token_stride;

		for (uint32_t h = 0; h < kv->heads; h++) {
			if (to_chunk)
				copy_run(chk, e, n, stream);
			else
				copy_run(e, chk, n, stream);
			if (st)
				kvr_sum_update(st, e, n);
			e += kv->head_stride;
			chk += n;
		}
	}
}

/*
 * Copies one block (block_size tokens of one layer, one of K/V) between
 * the engine at eng and the chunk at chk (block_size dense rows).
 * to_chunk picks the direction. With st (a gather's), the block's bytes
 * are fed to it in chunk order, read from the engine's side right after
 * each run moved.
 */
static void copy_block(const struct kvr_kv_cache *kv, char *eng, char *chk,
		       bool to_chunk, bool stream, struct kvr_sum_state *st)
{
	uint64_t row = row_bytes(kv);

	if (kv->token_stride == row && kv->head_stride == kv->head_bytes) {
		/* NHD, dense: the block is one run. */
		if (to_chunk)
			copy_run(chk, eng, row * kv->block_size, stream);
		else
			copy_run(eng, chk, row * kv->block_size, stream);
		if (st)
			kvr_sum_update(st, eng, row * kv->block_size);
		return;
	}
	/* HND: one head's run per (token, head). The common head sizes get
	 * a copy of constant size, which the compiler inlines as vector
	 * moves: a libc call per 256 bytes would cost as much as the copy. */
	switch (kv->head_bytes) {
	case 128:
		heads_loop(kv, eng, chk, to_chunk, stream, 128, st);
		break;
	case 256:
		heads_loop(kv, eng, chk, to_chunk, stream, 256, st);
		break;
	case 512:
		heads_loop(kv, eng, chk, to_chunk, stream, 512, st);
		break;
	default:
		heads_loop(kv, eng, chk, to_chunk, stream, kv->head_bytes, st);
	}
}

/*
 * Sums while copying: st is the piecewise state, sums[] one per chunk.
 * A gather writes sums[c]; a scatter compares with it and stops after
 * the first chunk that differs (*first_bad gets its index, else
 * nchunks). NULL st: plain copies.
 */
struct sums {
	struct kvr_sum_state *st;
	uint64_t *sums;
	size_t first_bad;
};

/*
 * Walks chunks in their own order: kv, layer, block (token rows). A
 * skipped block is not copied; with sums it is hashed from the chunk
 * (the chunk's sum covers it, and nothing of it is handed out).
 */
static void run(const struct kvr_kv_cache *kv, const uint32_t *block_ids,
		size_t bpc, char *const *chunks, size_t nchunks, size_t skip,
		bool to_chunk, bool stream, struct sums *sm)
{
	uint64_t row = row_bytes(kv);
	uint64_t blk = row * kv->block_size;
	uint64_t per_layer = blk * bpc; /* one layer's tokens in a chunk */
	struct kvr_sum_state *st = sm ? sm->st : NULL;

	if (sm)
		sm->first_bad = nchunks;
	for (size_t c = 0; c < nchunks; c++) {
		const uint32_t *ids = block_ids + c * bpc;
		size_t first = 0;

		/* Skipped blocks are the run's first ones. */
		if (skip > c * bpc)
			first = skip - c * bpc < bpc ? skip - c * bpc : bpc;
		if (st)
			kvr_sum_reset(st);
		for (uint32_t k = 0; k < kv->nkv; k++)
			for (uint32_t l = 0; l < kv->layers; l++) {
				char *eng = kv->base[(uint64_t)l * kv->nkv + k];
				char *chk =
				    chunks[c] +
				    ((uint64_t)k * kv->layers + l) * per_layer;

				if (st && first)
					kvr_sum_update(st, chk, first * blk);
				for (size_t j = first; j < bpc; j++) {
					copy_block(
					    kv, eng + ids[j] * kv->block_stride,
					    chk + j * blk, to_chunk, stream,
					    to_chunk ? st : NULL);
					/* A scatter hashes the block it just
					 * read, dense in the chunk. */
					if (st && !to_chunk)
						kvr_sum_update(
						    st, chk + j * blk, blk);
				}
			}
		if (!st)
			continue;
		if (to_chunk) {
			sm->sums[c] = kvr_sum_digest(st);
		} else if (kvr_sum_digest(st) != sm->sums[c]) {
			sm->first_bad = c;
			return; /* later chunks are no use to a prefix */
		}
	}
}

/* check_run() and @skip_blocks: what a scatter checks before a byte. */
static int check_skip_run(const struct kvr_kv_cache *kv,
			  const uint32_t *block_ids, size_t nblocks,
			  const void *const *chunks, size_t nchunks,
			  uint64_t chunk_bytes, size_t skip_blocks,
			  char *errbuf, size_t errlen, size_t *bpc)
{
	int rc = check_run(kv, block_ids, nblocks, chunks, nchunks, chunk_bytes,
			   errbuf, errlen, bpc);

	if (rc < 0)
		return rc;
	if (skip_blocks > nblocks)
		return bad(errbuf, errlen,
			   "skip_blocks %zu is more than the %zu blocks given",
			   skip_blocks, nblocks);
	return 0;
}

int kvr__kv_check_args(const struct kvr_kv_cache *kv, const uint32_t *block_ids,
		       size_t nblocks, const void *const *chunks,
		       size_t nchunks, uint64_t chunk_bytes, size_t skip_blocks,
		       char *errbuf, size_t errlen)
{
	size_t bpc;

	return check_skip_run(kv, block_ids, nblocks, chunks, nchunks,
			      chunk_bytes, skip_blocks, errbuf, errlen, &bpc);
}

int kvr_kv_gather(const struct kvr_kv_cache *kv, const uint32_t *block_ids,
		  size_t nblocks, void *const *chunks, size_t nchunks,
		  uint64_t chunk_bytes, char *errbuf, size_t errlen)
{
	size_t bpc;
	int rc = check_run(kv, block_ids, nblocks, (const void *const *)chunks,
			   nchunks, chunk_bytes, errbuf, errlen, &bpc);

	if (rc < 0)
		return rc;
	/* Always streamed: this process does not read the chunk again. */
	run(kv, block_ids, bpc, (char *const *)chunks, nchunks, 0, true, true,
	    NULL);
	/* Orders the streaming stores before whatever publishes the chunk
	 * (kvr_commit_store's ring publish). */
	stream_fence();
	return 0;
}

int kvr_kv_scatter(const struct kvr_kv_cache *kv, const uint32_t *block_ids,
		   size_t nblocks, const void *const *chunks, size_t nchunks,
		   uint64_t chunk_bytes, size_t skip_blocks, char *errbuf,
		   size_t errlen)
{
	size_t bpc;
	bool stream;
	int rc = check_skip_run(kv, block_ids, nblocks, chunks, nchunks,
				chunk_bytes, skip_blocks, errbuf, errlen, &bpc);

	if (rc < 0)
		return rc;
	/* The chunks are only read; run() shares one walker for both. */
	/* Streamed only when bigger than the cache would keep anyway. */
	stream = (uint64_t)nchunks * chunk_bytes >= SCATTER_STREAM_MIN;
	run(kv, block_ids, bpc, (char *const *)chunks, nchunks, skip_blocks,
	    false, stream, NULL);
	/* The engine (or a GPU copy) reads the blocks after this returns. */
	stream_fence();
	return 0;
}

/* The hash state of a summing gather or checking scatter; @sm->sums was
 * set by the caller (NULL only for no chunks). */
static int sums_open(struct sums *sm, size_t nchunks, char *errbuf,
		     size_t errlen)
{
	if (nchunks && !sm->sums)
		return bad(errbuf, errlen, "sums is NULL");
	sm->st = kvr_sum_create();
	if (!sm->st) {
		bad(errbuf, errlen, "out of memory for a checksum state");
		return -ENOMEM;
	}
	return 0;
}

int kvr_kv_gather_sum(const struct kvr_kv_cache *kv, const uint32_t *block_ids,
		      size_t nblocks, void *const *chunks, size_t nchunks,
		      uint64_t chunk_bytes, uint64_t *sums, char *errbuf,
		      size_t errlen)
{
	struct sums sm = {.sums = sums};
	size_t bpc;
	int rc = check_run(kv, block_ids, nblocks, (const void *const *)chunks,
			   nchunks, chunk_bytes, errbuf, errlen, &bpc);

	if (rc == 0)
		rc = sums_open(&sm, nchunks, errbuf, errlen);
	if (rc < 0)
		return rc;
	/* Streamed still: the sum reads the engine's side, in cache. */
	run(kv, block_ids, bpc, (char *const *)chunks, nchunks, 0, true, true,
	    &sm);
	stream_fence();
	kvr_sum_destroy(sm.st);
	return 0;
}

long kvr_kv_scatter_check(const struct kvr_kv_cache *kv,
			  const uint32_t *block_ids, size_t nblocks,
			  const void *const *chunks, size_t nchunks,
			  uint64_t chunk_bytes, size_t skip_blocks,
			  const uint64_t *sums, char *errbuf, size_t errlen)
{
	struct sums sm = {.sums = (uint64_t *)sums};
	size_t bpc;
	int rc = check_skip_run(kv, block_ids, nblocks, chunks, nchunks,
				chunk_bytes, skip_blocks, errbuf, errlen, &bpc);

	if (rc == 0)
		rc = sums_open(&sm, nchunks, errbuf, errlen);
	if (rc < 0)
		return rc;
	/* Streamed as the plain scatter is: the hash reads the chunk's
	 * block just copied, from the cache. The chunks are only read (sums
	 * too); run() shares one walker. */
	run(kv, block_ids, bpc, (char *const *)chunks, nchunks, skip_blocks,
	    false, (uint64_t)nchunks * chunk_bytes >= SCATTER_STREAM_MIN, &sm);
	stream_fence();
	kvr_sum_destroy(sm.st);
	return (long)sm.first_bad;
}
