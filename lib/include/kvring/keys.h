/* SPDX-License-Identifier: MIT */
/*
 * Chunk keys: how a worker turns token ids into 128-bit keys, scoped by the
 * model layout it registered. The server treats keys as opaque.
 *
 * Derivation (docs/keys.md has it with test vectors, so other languages can
 * reproduce it):
 *   ns      = XXH3_128bits(canonical bytes of struct kvr_ns_desc)   (seed 0)
 *   k[-1]   = ns
 *   k[i]    = XXH3_128bits(k[i-1] as 16 bytes (lo LE, hi LE) ||
 *                          tokens[i*C .. (i+1)*C) as C little-endian u32)
 * where C = ns.chunk_tokens. Chaining makes k[i] cover tokens
 * [0, (i+1)*C): a prefix of a request maps to a prefix of keys, and the
 * same chunk of tokens after a different prefix gets a different key.
 * Only full chunks get keys; a trailing partial chunk is not cached.
 */
#ifndef KVRING_KEYS_H
#define KVRING_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include <kvring/proto.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Both functions below are exported by libkvring.so: a worker may derive
 * keys without a connection (kvr_client_keys() needs one). */
#define KVR__KEYS_API __attribute__((visibility("default")))

/*
 * kvr_ns_key - the namespace hash of a model layout (k[-1] above).
 * The canonical bytes are the struct as laid out in proto.h with model
 * zero-padded to 64 bytes and reserved 0. Return 0, or -EINVAL when model is
 * empty or not NUL-terminated within 64 bytes, chunk_tokens is 0, or
 * reserved is not 0.
 */
KVR__KEYS_API int kvr_ns_key(const struct kvr_ns_desc *ns, struct kvr_key *out);

/*
 * kvr_keys_from_tokens - derive the keys of every full chunk of tokens.
 * Writes min(ntokens / chunk_tokens, max_keys) keys to out.
 * Return: the number of keys written (>= 0), or -EINVAL (bad namespace, or
 * tokens NULL with ntokens > 0).
 */
KVR__KEYS_API long kvr_keys_from_tokens(const struct kvr_ns_desc *ns,
					const uint32_t *tokens, size_t ntokens,
					struct kvr_key *out, size_t max_keys);

#ifdef __cplusplus
}
#endif

#endif /* KVRING_KEYS_H */
