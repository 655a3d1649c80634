/* SPDX-License-Identifier: MIT */
/*
 * l2_fmt.c - what an L2 key and value look like (docs/l2.md): the
 * namespace fingerprint, the key string, the value header with its
 * checks, and the Redis Cluster hash slot of a key. Pure functions: no
 * I/O, no allocation, no state; the encoder and the checker sit side by
 * side and test_l2_fmt round-trips them.
 *
 * Payload sums are kvr_sum64's (<kvring/sum.h>, lib/sum_xxh3.c), the chunk
 * checksum workers compute too, through xxHash's x86 dispatch (AVX2 or
 * AVX-512: 10.8 against 6.6 GB/s for the plain entry points here); the
 * lanes feed it in pieces. The small fixed-size hashes here (fingerprint,
 * header) use the plain entry point: same values, nothing to gain.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include <kvring/l2.h>

/* Little-endian appends for the fingerprint's canonical encoding. */
static size_t put_u32(uint8_t *b, size_t at, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
	return at + 4;
}

/* The namespace's fingerprint in every L2 key and header: XXH3-64 of a
 * fixed encoding of its description and the deployment's salt, so two
 * servers of one model share keys and two models never do. */
uint64_t kvr_l2_ns_fp(const struct kvr_ns_desc *ns, const char *salt)
{
	/* "kvr-l2-ns-v1" | model (NUL-terminated) | 7 u32 | salt: a fixed
	 * encoding, so padding bytes or a longer model buffer never change
	 * the fingerprint. */
	uint8_t b[16 + 65 + 28 + 64];
	size_t at = 0, ml = strnlen(ns->model, sizeof(ns->model));
	size_t sl = salt ? strnlen(salt, 63) : 0;

	memcpy(b, "kvr-l2-ns-v1", 12);
	at = 12;
	memcpy(b + at, ns->model, ml);
	at += ml;
	b[at++] = 0;
	at = put_u32(b, at, ns->layers);
	at = put_u32(b, at, ns->kv_heads);
	at = put_u32(b, at, ns->head_size);
	at = put_u32(b, at, ns->dtype_bytes);
	at = put_u32(b, at, ns->tp_rank);
	at = put_u32(b, at, ns->tp_size);
	at = put_u32(b, at, ns->chunk_tokens);
	memcpy(b + at, salt ? salt : "", sl);
	at += sl;
	return XXH3_64bits(b, at);
}

/* "<prefix><ns_fp>:<key hi><key lo>" in fixed-width hex: one name per
 * (namespace, chunk), the same on every server. */
int kvr_l2_key(const char *prefix, uint64_t ns_fp, const struct kvr_key *k,
	       char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s%016llx:%016llx%016llx", prefix,
			   (unsigned long long)ns_fp, (unsigned long long)k->hi,
			   (unsigned long long)k->lo);

	if (len < 0 || (size_t)len >= n)
		return -ENAMETOOLONG;
	return len;
}

/* The 64-byte header in front of a value: what it is (namespace and key),
 * its length, the payload's sum, and a sum of the header itself. */
void kvr_l2_hdr_make(uint64_t ns_fp, const struct kvr_key *k, uint64_t len,
		     uint64_t sum, struct kvr_l2_hdr *out)
{
	memset(out, 0, sizeof(*out));
	out->magic = KVR_L2_MAGIC;
	out->version = KVR_L2_VERSION;
	out->hdr_bytes = KVR_L2_HDR_BYTES;
	out->ns_fp = ns_fp;
	out->key_lo = k->lo;
	out->key_hi = k->hi;
	out->len = len;
	out->sum = sum;
	out->hdr_sum = XXH3_64bits(out, offsetof(struct kvr_l2_hdr, hdr_sum));
}

/* A header is believed only whole: magic, version, size, its own sum, and
 * the namespace and key it was fetched for (a value stored under the
 * wrong name reads as corrupt, never as another chunk). */
int kvr_l2_hdr_check(const struct kvr_l2_hdr *h, uint64_t ns_fp,
		     const struct kvr_key *k)
{
	if (h->magic != KVR_L2_MAGIC || h->version != KVR_L2_VERSION ||
	    h->hdr_bytes != KVR_L2_HDR_BYTES || h->reserved != 0)
		return -EBADMSG;
	if (h->hdr_sum != XXH3_64bits(h, offsetof(struct kvr_l2_hdr, hdr_sum)))
		return -EBADMSG;
	if (h->ns_fp != ns_fp || h->key_lo != k->lo || h->key_hi != k->hi)
		return -EBADMSG;
	return 0;
}

/* Redis Cluster's key hash (the CRC16 its specification gives). */
uint16_t kvr_l2_crc16(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint16_t crc = 0;

	/* Bitwise CRC16-CCITT, polynomial 0x1021, init 0, no reflection:
	 * the variant the cluster spec names XMODEM. Keys are short, so a
	 * table buys nothing measurable here. */
	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)(b[i] << 8);
		for (int j = 0; j < 8; j++)
			crc = (crc & 0x8000) ? (uint16_t)(crc << 1 ^ 0x1021)
					     : (uint16_t)(crc << 1);
	}
	return crc;
}

/* The hash slot of @key, {hash tags} honoured, as every cluster node
 * computes it. */
uint32_t kvr_l2_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	/* The spec: hash only what sits between the first '{' and the
	 * first '}' after it, if that is non-empty. */
	if (open) {
		size_t rest = len - (size_t)(open - key) - 1;
		const char *close = memchr(open + 1, '}', rest);

		if (close && close > open + 1)
			return kvr_l2_crc16(open + 1,
					    (size_t)(close - open - 1)) &
			       (KVR_L2_SLOTS - 1);
	}
	return kvr_l2_crc16(key, len) & (KVR_L2_SLOTS - 1);
}
