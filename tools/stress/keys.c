/* SPDX-License-Identifier: MIT */
/*
 * keys.c - the stress run's key space. A key id i (0 .. nkeys-1) fixes
 * everything about its chunk: the 128-bit key XXH3_128(i, seed), the size
 * chunk_min + XXH3_64(i, ~seed) % (chunk_max - chunk_min + 1) (one id in
 * ST_FIXED_EVERY: the middle of that range, for store-ahead), and the
 * bytes (the 16 key bytes, then a splitmix64 stream seeded from the key).
 * Because contents are a pure function of the id, any worker can check a
 * chunk any other worker stored, without sharing what was written, and a
 * chunk from the wrong key, a stale generation, poison or a torn write
 * cannot hash right by accident. Also here: the namespace every stress
 * client registers, so that all of them share one key space.
 *
 * It does not check anything (verify.c does) and holds no per-process
 * state besides the three values st_keys_setup() fixes before the first
 * fork, which every worker then inherits unchanged.
 */
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "stress.h"

/* Seed of the key space and the chunk size range; set once, in the parent,
 * before any fork, and read-only afterwards in every process. */
static uint64_t g_key_seed;
static uint64_t g_chunk_min, g_chunk_max;

void st_keys_setup(uint64_t seed, uint64_t chunk_min, uint64_t chunk_max)
{
	g_key_seed = seed;
	g_chunk_min = chunk_min;
	g_chunk_max = chunk_max;
}

struct kvr_key st_keys_key(uint64_t id)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(&id, sizeof(id), g_key_seed);
	struct kvr_key k = {.lo = h.low64, .hi = h.high64};

	return k;
}

uint64_t st_keys_size(uint64_t id)
{
	/* A different seed than the key's, so size and key are unrelated. */
	uint64_t h = XXH3_64bits_withSeed(&id, sizeof(id), ~g_key_seed);

	/* A staged slot fits one size: the keys store-ahead workers store
	 * one at a time share it (st_op_pick_ahead). */
	if (id % ST_FIXED_EVERY == 0)
		return g_chunk_min + (g_chunk_max - g_chunk_min) / 2;
	return g_chunk_min + h % (g_chunk_max - g_chunk_min + 1);
}

/*
 * The key bytes come first so that a chunk that landed under the wrong key
 * is obviously so in a hex dump; the stream after them is seeded from the
 * key (not the id), so even the first 8 bytes differ between keys. Sizes
 * need not be multiples of 8: the last word is cut to fit.
 */
void st_keys_fill(void *p, uint64_t len, uint64_t id)
{
	struct kvr_key k = st_keys_key(id);
	uint64_t s = k.lo ^ (k.hi << 17 | k.hi >> 47);
	unsigned char *b = p;
	uint64_t i = 0, w;

	memcpy(b, &k, len < sizeof(k) ? len : sizeof(k));
	i = len < sizeof(k) ? len : sizeof(k);
	for (; i + 8 <= len; i += 8) {
		w = st_rnd(&s);
		memcpy(b + i, &w, 8);
	}
	if (i < len) {
		w = st_rnd(&s);
		memcpy(b + i, &w, len - i);
	}
}

void st_keys_window(uint64_t base, uint32_t n, struct kvr_key *k, uint64_t *sz)
{
	for (uint32_t i = 0; i < n; i++) {
		k[i] = st_keys_key(base + i);
		if (sz)
			sz[i] = st_keys_size(base + i);
	}
}

/*
 * One small fixed model layout for every client of the run, workers and
 * the audit's stats connection alike: keys are looked up per namespace, so
 * all of them must register the same one to see each other's chunks.
 */
void st_keys_client_opts(struct kvr_client_opts *co, const char *socket)
{
	co->socket_path = socket;
	snprintf(co->ns.model, sizeof(co->ns.model), "kvring-stress");
	co->ns.layers = 2;
	co->ns.kv_heads = 2;
	co->ns.head_size = 64;
	co->ns.dtype_bytes = 2;
	co->ns.tp_size = 1;
	co->ns.chunk_tokens = 256;
}
