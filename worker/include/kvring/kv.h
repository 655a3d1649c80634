/* SPDX-License-Identifier: MIT */
/*
 * Paged-KV gather and scatter: copies between an inference engine's paged
 * KV cache (vLLM's blocks of block_size tokens) and kvring chunk slots,
 * with no intermediate buffer. Pure memory copies: no server, no client,
 * no lock, no allocation; safe to call from any thread on disjoint
 * destinations.
 *
 * The chunk format in a slot is LMCache's (docs/tensors.md), row-major:
 *   K/V:  [2][layers][chunk_tokens][heads * head_size]   (K first)
 *   MLA:  [layers][chunk_tokens][dim]                    (nkv = 1)
 * so a chunk kvring stores is byte for byte what an LMCache L1 or L2
 * holds for the same layout.
 *
 * The engine side is described by strides, which covers every paged
 * layout without a special case: vLLM "merged" [2, num_blocks, block_size,
 * heads, head_size] per layer, separate K and V tensors, one cross-layer
 * tensor (layers first), MLA [num_blocks, block_size, dim], and NHD or HND
 * inside a block. base[l * nkv + k] points at block 0 of layer l, K (k 0)
 * or V (k 1); within it, element (block b, token t, head h, byte i) is at
 *   b * block_stride + t * token_stride + h * head_stride + i
 * for i < head_bytes (the head's elements are contiguous). When a whole
 * block is one dense run (NHD, token_stride = heads * head_bytes) each
 * block moves with one memcpy.
 *
 * Errors: -EINVAL with a sentence in errbuf (which may be NULL) for a
 * descriptor that is inconsistent, a block id out of range, a chunk of the
 * wrong size, or a misaligned pointer or stride. On error nothing has been
 * copied: every argument is checked before the first byte moves.
 */
#ifndef KVRING_KV_H
#define KVRING_KV_H

#include <stddef.h>
#include <stdint.h>

#include <kvring/kvring.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * struct kvr_kv_cache - the caller's view of one rank's paged KV cache.
 * Borrowed: the library keeps no pointer after a call returns. The caller
 * promises that each base[i] has layer_bytes readable (gather) or
 * writable (scatter) bytes; kvr_kv_check() proves that every block,
 * token and head the strides can reach lies inside them.
 */
struct kvr_kv_cache {
	uint32_t layers;       /* model layers on this rank */
	uint32_t nkv;	       /* 2 (K and V), or 1 (MLA: one latent) */
	uint32_t heads;	       /* kv heads per rank (1 for MLA) */
	uint32_t head_bytes;   /* head_size * elem_bytes (MLA: dim * elem) */
	uint32_t elem_bytes;   /* 1 (fp8 as raw bytes), 2 or 4 */
	uint32_t block_size;   /* tokens per engine block */
	uint32_t num_blocks;   /* blocks in the cache: ids are < this */
	uint32_t chunk_tokens; /* tokens per kvring chunk, a multiple of
				  block_size */
	uint64_t block_stride; /* bytes from block b to b + 1 */
	uint64_t token_stride; /* bytes from token t to t + 1 in a block */
	uint64_t head_stride;  /* bytes from head h to h + 1 */
	uint64_t layer_bytes;  /* extent of each base region */
	void *const *base;     /* layers * nkv pointers, [l * nkv + k] */
};

/*
 * kvr_kv_chunk_bytes - the size of one chunk of this cache's layout:
 * nkv * layers * chunk_tokens * heads * head_bytes. 0 if kv is NULL or
 * the product does not fit a size_t (kvr_kv_check() refuses that).
 */
KVR_API uint64_t kvr_kv_chunk_bytes(const struct kvr_kv_cache *kv);

/*
 * kvr_kv_check - validate a descriptor once (the copy calls do it too).
 * Return: 0, or -EINVAL with the reason in errbuf: a zero dimension,
 * chunk_tokens not a multiple of block_size, a chunk size that overflows,
 * elem_bytes not 1, 2 or 4, head_bytes, a stride or a base pointer not a
 * multiple of elem_bytes, a NULL base, or strides that reach past layer_bytes.
 */
KVR_API int kvr_kv_check(const struct kvr_kv_cache *kv, char *errbuf,
			 size_t errlen);

/*
 * kvr_kv_gather - copy blocks of the paged cache into chunks.
 * @block_ids: nblocks engine block ids, in token order; block j holds
 *   tokens [j * block_size, (j + 1) * block_size) of the run.
 * @chunks: nchunks destinations of chunk_bytes each; chunk c receives
 *   blocks [c * bpc, (c + 1) * bpc), bpc = chunk_tokens / block_size.
 * nblocks must equal nchunks * bpc and chunk_bytes kvr_kv_chunk_bytes().
 * Return: 0, or -EINVAL (the descriptor, nblocks, chunk_bytes, a NULL
 * chunk, or a block id >= num_blocks; errbuf names which). Nothing is
 * copied on error.
 */
KVR_API int kvr_kv_gather(const struct kvr_kv_cache *kv,
			  const uint32_t *block_ids, size_t nblocks,
			  void *const *chunks, size_t nchunks,
			  uint64_t chunk_bytes, char *errbuf, size_t errlen);

/*
 * kvr_kv_scatter - copy chunks into blocks of the paged cache.
 * Same arguments as kvr_kv_gather(), in the other direction, plus
 * @skip_blocks: the first skip_blocks blocks of the run are not written
 *   (they are shared through the engine's own prefix cache and must not be
 *   overwritten); skip_blocks may be up to nblocks.
 * Return: 0, or -EINVAL as for kvr_kv_gather(), also when skip_blocks >
 * nblocks. Nothing is copied on error.
 */
KVR_API int kvr_kv_scatter(const struct kvr_kv_cache *kv,
			   const uint32_t *block_ids, size_t nblocks,
			   const void *const *chunks, size_t nchunks,
			   uint64_t chunk_bytes, size_t skip_blocks,
			   char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* KVRING_KV_H */
