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

/*
 * kvr_kv_gather_sum - kvr_kv_gather() that also computes each chunk's
 * XXH3-64 (kvr_sum64 of its chunk_bytes, <kvring/sum.h>) while copying:
 * sums[c] gets chunk c's. Each run is hashed from the engine's blocks
 * right after it is read, while it is in cache, so the sum costs a pass
 * over the cache, not over memory, and the chunk is still written with
 * streaming stores. @sums: nchunks entries.
 * Return: 0, -EINVAL as kvr_kv_gather() (also a NULL sums), -ENOMEM.
 * Nothing is copied on error.
 */
KVR_API int kvr_kv_gather_sum(const struct kvr_kv_cache *kv,
			      const uint32_t *block_ids, size_t nblocks,
			      void *const *chunks, size_t nchunks,
			      uint64_t chunk_bytes, uint64_t *sums,
			      char *errbuf, size_t errlen);

/*
 * kvr_kv_scatter_check - kvr_kv_scatter() that checks each chunk against
 * sums[c] (the XXH3-64 it was stored with) while copying: each block is
 * hashed from the chunk right after it is copied out, while it is in
 * cache (a skipped block is hashed without being copied). A write into
 * the slot by another process before the copy is caught; one after it
 * can only make a good chunk fail. The copy stops after the first chunk
 * whose sum differs.
 * Return: the number of chunks copied and good (nchunks: all). A return
 * r < nchunks means chunk r failed: its blocks now hold bytes that fail
 * their check and chunks after it were not touched, so the caller must
 * treat the blocks of chunks r.. as not loaded (vLLM: report them as
 * load errors; it recomputes them). -EINVAL as kvr_kv_scatter() (also a
 * NULL sums), -ENOMEM; nothing is copied on error.
 */
KVR_API long kvr_kv_scatter_check(const struct kvr_kv_cache *kv,
				  const uint32_t *block_ids, size_t nblocks,
				  const void *const *chunks, size_t nchunks,
				  uint64_t chunk_bytes, size_t skip_blocks,
				  const uint64_t *sums, char *errbuf,
				  size_t errlen);

/*
 * kvr_kv_gather_xfer - kvr_kv_gather() into slots of a prepared store.
 * @slots: nchunks slot indices of @x, each KVR_SLOT_OK with len
 *   kvr_kv_chunk_bytes(); chunk c goes to slot slots[c].
 * With checksums on, each slot's sum is computed while copying
 * (kvr_kv_gather_sum) and kept for kvr_commit_store(), which sends it
 * without reading the slot again, as after kvr_xfer_fill(): do not
 * write the slots afterwards. With checksums off it is kvr_kv_gather().
 * Return: 0, or -EINVAL (as kvr_kv_gather(); x not a prepared store; a
 * slot index out of range, repeated, not OK, or of the wrong length),
 * -ENOMEM. The sentence is in errbuf and kvr_client_errmsg(). Nothing
 * is copied on error.
 */
KVR_API int kvr_kv_gather_xfer(struct kvr_client *c,
			       const struct kvr_kv_cache *kv,
			       const uint32_t *block_ids, size_t nblocks,
			       struct kvr_xfer *x, const uint32_t *slots,
			       size_t nchunks, char *errbuf, size_t errlen);

/*
 * kvr_kv_scatter_xfer - kvr_kv_scatter() from slots of a prepared
 * retrieve, checking while copying. @slots as for kvr_kv_gather_xfer().
 * Under KVR_CHECKSUM_ON each chunk is checked as kvr_kv_scatter_check()
 * does; the first that fails becomes KVR_SLOT_CORRUPT (kvr_commit_retrieve
 * reports it) and the copy stops there. A slot stored without a sum is
 * copied unchecked. Under KVR_CHECKSUM_VERIFY the slots were checked on
 * arrival, and off there is nothing to check: a plain scatter, which
 * stops before a slot already CORRUPT.
 * Return: the number of chunks copied and good (nchunks: all); for
 * r < nchunks the blocks of chunks r.. must be treated as not loaded
 * (those of chunk r may hold its failed bytes). -EINVAL as for
 * kvr_kv_gather_xfer() (x not a prepared retrieve), also skip_blocks >
 * nblocks; -ENOMEM. Nothing is copied on error.
 */
KVR_API long kvr_kv_scatter_xfer(struct kvr_client *c,
				 const struct kvr_kv_cache *kv,
				 const uint32_t *block_ids, size_t nblocks,
				 struct kvr_xfer *x, const uint32_t *slots,
				 size_t nchunks, size_t skip_blocks,
				 char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* KVRING_KV_H */
