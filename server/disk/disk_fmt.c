/* SPDX-License-Identifier: MIT */
/*
 * disk_fmt.c - the disk tier's record header (docs/layout.md, "Disk
 * records"): built before a write, checked after every read. Pure: the
 * unit suite (tests/unit/test_disk_fmt.c) drives it with torn and
 * flipped headers.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <xxhash.h>

#include <kvring/disk.h>

_Static_assert(sizeof(struct kvr_disk_hdr) == KVR_DISK_HDR_BYTES,
	       "the record header is 64 bytes on disk");

/* XXH3-64, as workers sum a chunk: a worker's sum can be reused. */
uint64_t kvr_disk_sum(const void *p, uint64_t len)
{
	return XXH3_64bits(p, (size_t)len);
}

/* The header sum comes last and covers every byte before it, so a torn
 * or stale header fails its check. */
void kvr_disk_hdr_make(uint64_t ns_fp, const struct kvr_key *k, uint64_t len,
		       uint64_t sum, uint64_t seq, struct kvr_disk_hdr *out)
{
	memset(out, 0, sizeof(*out));
	out->magic = KVR_DISK_MAGIC;
	out->version = KVR_DISK_VERSION;
	out->hdr_bytes = KVR_DISK_HDR_BYTES;
	out->ns_fp = ns_fp;
	out->key_lo = k->lo;
	out->key_hi = k->hi;
	out->len = len;
	out->sum = sum;
	out->seq = seq;
	out->hdr_sum = XXH3_64bits(out, offsetof(struct kvr_disk_hdr, hdr_sum));
}

/* All zeros is a record never written (a formatted file reads as
 * zeros): -ENODATA, so the scan frees it without counting it corrupt.
 * A length or fingerprint kvr_disk_write() never writes is damage. */
int kvr_disk_hdr_check(const struct kvr_disk_hdr *h, uint64_t max_len)
{
	static const struct kvr_disk_hdr zero;

	if (memcmp(h, &zero, sizeof(zero)) == 0)
		return -ENODATA;
	if (h->magic != KVR_DISK_MAGIC || h->version != KVR_DISK_VERSION ||
	    h->hdr_bytes != KVR_DISK_HDR_BYTES ||
	    h->hdr_sum !=
		XXH3_64bits(h, offsetof(struct kvr_disk_hdr, hdr_sum)) ||
	    h->len == 0 || h->len > max_len || h->ns_fp == 0)
		return -EBADMSG;
	return 0;
}
