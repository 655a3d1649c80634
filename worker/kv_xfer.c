/* SPDX-License-Identifier: MIT */
/*
 * kv_xfer.c - paged-KV gather and scatter straight between an engine's
 * blocks and a transfer's slots, with the per-chunk checksums computed
 * (store) or checked (retrieve) while copying: kvr_kv_gather_xfer and
 * kvr_kv_scatter_xfer (<kvring/kv.h>, docs/tensors.md).
 *
 * This file owns the mapping of chunks to slots and what the checksum
 * mode asks for; the copy loops are kv.c's and the sums' storage in the
 * transfer is xfer_sum.c's. A gather's sums are kept exactly where
 * kvr_xfer_fill() keeps them, so kvr_commit_store() sends them without
 * reading the slots again. A scatter under KVR_CHECKSUM_ON hashes each
 * block of the slot right after copying it out (kv.c says why a write
 * into the slot meanwhile cannot pass unnoticed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <kvring/kv.h>

#include "client.h"

/* The sentence of a refused call: into errbuf and the client's errmsg. */
static void refuse(struct kvr_client *c, int rc, const char *fn,
		   const char *msg, char *errbuf, size_t errlen)
{
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", msg);
	(void)kvr__client_fail(c, rc, "%s: %s", fn, msg);
}

/*
 * The slot pointers of @slots (chunk c is slot slots[c]) into ptrs[], after
 * checking that x is a prepared @op transfer and that each slot is in
 * range, listed once, of the chunk's length and OK (a retrieve's may be
 * CORRUPT too: the scatter stops there). Return 0 or -EINVAL (msg set).
 */
static int slot_ptrs(const struct kvr_kv_cache *kv, const struct kvr_xfer *x,
		     uint32_t op, const uint32_t *slots, size_t n, void **ptrs,
		     char *msg, size_t msglen)
{
	uint64_t want = kvr_kv_chunk_bytes(kv);

	if (x->op != op) {
		snprintf(msg, msglen,
			 "a %s transfer: this call needs a prepared %s",
			 kvr_op_name(x->op), kvr_op_name(op));
		return -EINVAL;
	}
	if (n && (!slots || !x->slots)) {
		snprintf(msg, msglen,
			 "slots is NULL, or the transfer has none");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct kvr_slot *sl;

		if (slots[i] >= x->nslots) {
			snprintf(msg, msglen,
				 "slot index %u (chunk %zu) is out of range: "
				 "the transfer has %u slots",
				 slots[i], i, x->nslots);
			return -EINVAL;
		}
		for (size_t j = 0; j < i; j++)
			if (slots[j] == slots[i]) {
				snprintf(msg, msglen,
					 "slot %u is listed twice (chunks %zu "
					 "and %zu): give each chunk its own "
					 "slot",
					 slots[i], j, i);
				return -EINVAL;
			}
		sl = &x->slots[slots[i]];
		if (sl->status != KVR_SLOT_OK &&
		    !(op == KVR_OP_PREPARE_RETRIEVE &&
		      sl->status == KVR_SLOT_CORRUPT)) {
			snprintf(msg, msglen,
				 "slot %u (chunk %zu) has status %d, not OK: "
				 "there is nothing to copy there",
				 slots[i], i, sl->status);
			return -EINVAL;
		}
		if (sl->len != want) {
			snprintf(msg, msglen,
				 "slot %u is %llu bytes, the cache's chunk is "
				 "%llu: the namespace does not match this "
				 "cache",
				 slots[i], (unsigned long long)sl->len,
				 (unsigned long long)want);
			return -EINVAL;
		}
		ptrs[i] = sl->ptr;
	}
	return 0;
}

static int do_gather(struct kvr_client *c, const struct kvr_kv_cache *kv,
		     const uint32_t *block_ids, size_t nblocks,
		     struct kvr_xfer *x, const uint32_t *slots, size_t n,
		     char *errbuf, size_t errlen)
{
	char msg[256] = "";
	size_t msglen = sizeof(msg);
	void **ptrs = malloc((n ? n : 1) * sizeof(*ptrs));
	uint64_t *sums = malloc((n ? n : 1) * sizeof(*sums));
	int rc = -ENOMEM;

	if (!ptrs || !sums) {
		snprintf(msg, msglen, "out of memory for %zu chunks", n);
		goto out;
	}
	rc =
	    slot_ptrs(kv, x, KVR_OP_PREPARE_STORE, slots, n, ptrs, msg, msglen);
	if (rc < 0)
		goto out;
	if (c->checksum == KVR_CHECKSUM_OFF) {
		rc = kvr_kv_gather(kv, block_ids, nblocks, ptrs, n,
				   kvr_kv_chunk_bytes(kv), msg, msglen);
		goto out;
	}
	rc = kvr_kv_gather_sum(kv, block_ids, nblocks, ptrs, n,
			       kvr_kv_chunk_bytes(kv), sums, msg, msglen);
	if (rc < 0)
		goto out;
	/* Only the first can fail (the block of sums is allocated then);
	 * the commit then sums those slots itself, as for a slot written by
	 * hand: slower, never wrong. */
	for (size_t i = 0; i < n; i++)
		if (kvr__xfer_sum_slot_set(c, x, slots[i], sums[i]) < 0)
			break;
out:
	free(ptrs);
	free(sums);
	if (rc < 0)
		refuse(c, rc, "kvr_kv_gather_xfer", msg, errbuf, errlen);
	return rc;
}

int kvr_kv_gather_xfer(struct kvr_client *c, const struct kvr_kv_cache *kv,
		       const uint32_t *block_ids, size_t nblocks,
		       struct kvr_xfer *x, const uint32_t *slots,
		       size_t nchunks, char *errbuf, size_t errlen)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(c, do_gather(c, kv, block_ids, nblocks, x,
					      slots, nchunks, errbuf, errlen));
}

static long do_scatter(struct kvr_client *c, const struct kvr_kv_cache *kv,
		       const uint32_t *block_ids, size_t nblocks,
		       struct kvr_xfer *x, const uint32_t *slots, size_t n,
		       size_t skip, char *errbuf, size_t errlen)
{
	char msg[256] = "";
	size_t msglen = sizeof(msg);
	void **ptrs = malloc((n ? n : 1) * sizeof(*ptrs));
	size_t lim = n, bpc;
	long rc = -ENOMEM;

	if (!ptrs) {
		snprintf(msg, msglen, "out of memory for %zu chunks", n);
		goto out;
	}
	rc = slot_ptrs(kv, x, KVR_OP_PREPARE_RETRIEVE, slots, n, ptrs, msg,
		       msglen);
	if (rc < 0)
		goto out;
	/* Everything is checked once here, so that the pieces below cannot
	 * fail half-way: nothing is copied on error. */
	rc = kvr__kv_check_args(kv, block_ids, nblocks,
				(const void *const *)ptrs, n,
				kvr_kv_chunk_bytes(kv), skip, msg, msglen);
	if (rc < 0)
		goto out;
	bpc = kv->chunk_tokens / kv->block_size;
	/* The usable prefix ends at a slot already found corrupt. */
	for (size_t i = 0; i < n; i++)
		if (x->slots[slots[i]].status == KVR_SLOT_CORRUPT) {
			lim = i;
			break;
		}
	if (c->checksum != KVR_CHECKSUM_ON) {
		/* VERIFY checked the slots on arrival; off has no sums. */
		rc = lim ? kvr_kv_scatter(kv, block_ids, lim * bpc,
					  (const void *const *)ptrs, lim,
					  kvr_kv_chunk_bytes(kv),
					  skip < lim * bpc ? skip : lim * bpc,
					  msg, msglen)
			 : 0;
		if (rc == 0)
			rc = (long)lim;
		goto out;
	}
	/* One chunk at a time: each has its own sum, or none. */
	for (size_t i = 0; i < lim; i++) {
		size_t sk = skip > i * bpc ? skip - i * bpc : 0;
		uint64_t sum;

		if (sk > bpc)
			sk = bpc;
		if (!kvr__xfer_sum_slot_get(x, slots[i], &sum)) {
			/* Stored without a sum: copied unchecked. */
			rc = kvr_kv_scatter(kv, block_ids + i * bpc, bpc,
					    (const void *const *)&ptrs[i], 1,
					    kvr_kv_chunk_bytes(kv), sk, msg,
					    msglen);
			if (rc < 0)
				goto out;
			continue;
		}
		rc = kvr_kv_scatter_check(
		    kv, block_ids + i * bpc, bpc, (const void *const *)&ptrs[i],
		    1, kvr_kv_chunk_bytes(kv), sk, &sum, msg, msglen);
		if (rc < 0)
			goto out;
		if (rc == 0) {
			/* As kvr_verify_retrieve() marks it: the commit
			 * reports it and kvringd drops the object. */
			x->slots[slots[i]].status = KVR_SLOT_CORRUPT;
			rc = (long)i;
			goto out;
		}
	}
	rc = (long)lim;
out:
	free(ptrs);
	if (rc < 0)
		refuse(c, (int)rc, "kvr_kv_scatter_xfer", msg, errbuf, errlen);
	return rc;
}

long kvr_kv_scatter_xfer(struct kvr_client *c, const struct kvr_kv_cache *kv,
			 const uint32_t *block_ids, size_t nblocks,
			 struct kvr_xfer *x, const uint32_t *slots,
			 size_t nchunks, size_t skip_blocks, char *errbuf,
			 size_t errlen)
{
	if (!c)
		return -EINVAL;
	if (!x)
		return KVR_CLIENT_ARG_FAIL(c, "xfer is NULL");
	return KVR_CLIENT_LOCKED(c, do_scatter(c, kv, block_ids, nblocks, x,
					       slots, nchunks, skip_blocks,
					       errbuf, errlen));
}
