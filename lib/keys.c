/* SPDX-License-Identifier: MIT */
/*
 * Chunk key derivation (see <kvring/keys.h> for the exact definition). Owns
 * the canonical encoding of a namespace and the XXH3-128 chain; does not own
 * what keys mean to the server (nothing: they are opaque there).
 */
#include <errno.h>
#include <string.h>

/* XXH3_state_t on the stack needs the static-linking-only definitions. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <kvring/keys.h>

/* Tokens hashed per XXH3 update call: bounded stack use, few calls. */
#define TOK_BATCH 1024

static void key_from_hash(XXH128_hash_t h, struct kvr_key *k)
{
	k->lo = h.low64;
	k->hi = h.high64;
}

/* Little-endian encodings, spelled out so a big-endian port stays right. */
static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int kvr_ns_key(const struct kvr_ns_desc *ns, struct kvr_key *out)
{
	uint8_t buf[sizeof(*ns)];
	const uint32_t *fields[] = {
	    &ns->layers,  &ns->kv_heads, &ns->head_size,    &ns->dtype_bytes,
	    &ns->tp_rank, &ns->tp_size,	 &ns->chunk_tokens, &ns->reserved};
	size_t mlen;

	if (!ns || !out)
		return -EINVAL;
	mlen = strnlen(ns->model, sizeof(ns->model));
	if (mlen == 0 || mlen == sizeof(ns->model) || ns->chunk_tokens == 0 ||
	    ns->reserved != 0)
		return -EINVAL;
	/* Canonical bytes: model NUL-padded to 64, then 8 LE u32 fields.
	 * Bytes after the model's NUL are ignored (zeroed here), so two
	 * callers whose buffers differ only in garbage agree. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, ns->model, mlen);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		put_le32(buf + 64 + 4 * i, *fields[i]);
	key_from_hash(XXH3_128bits(buf, sizeof(buf)), out);
	return 0;
}

long kvr_keys_from_tokens(const struct kvr_ns_desc *ns, const uint32_t *tokens,
			  size_t ntokens, struct kvr_key *out, size_t max_keys)
{
	struct kvr_key prev;
	XXH3_state_t st;
	size_t nchunks, c;
	int rc;

	rc = kvr_ns_key(ns, &prev);
	if (rc < 0)
		return rc;
	if (!tokens && ntokens > 0)
		return -EINVAL;
	if (max_keys > 0 && !out)
		return -EINVAL;
	c = ns->chunk_tokens;
	nchunks = ntokens / c;
	if (nchunks > max_keys)
		nchunks = max_keys;

	for (size_t i = 0; i < nchunks; i++) {
		uint8_t pk[16];
		uint8_t tb[TOK_BATCH * 4];
		const uint32_t *t = tokens + i * c;

		XXH3_128bits_reset(&st);
		put_le64(pk, prev.lo);
		put_le64(pk + 8, prev.hi);
		XXH3_128bits_update(&st, pk, sizeof(pk));
		for (size_t done = 0; done < c;) {
			size_t n = c - done < TOK_BATCH ? c - done : TOK_BATCH;

			for (size_t j = 0; j < n; j++)
				put_le32(tb + 4 * j, t[done + j]);
			XXH3_128bits_update(&st, tb, 4 * n);
			done += n;
		}
		key_from_hash(XXH3_128bits_digest(&st), &prev);
		out[i] = prev;
	}
	return (long)nchunks;
}
