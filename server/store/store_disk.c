/* SPDX-License-Identifier: MIT */
/*
 * store_disk.c - the storage-engine entry points of the disk tier
 * (server/disk/, server/disk_srv.c, docs/storage.md "The disk tier"): the
 * L2 tier's cold pins, saved marks and partial commit (store_l2.c holds
 * their shared bodies), choosing and marking the copy on disk (obj.disk)
 * instead of the copy in L2, forgetting that mark when the disk drops
 * its copy, and the write-back guard that eviction obeys (store_lru.c). Same
 * rules as store.c: owner thread only, arguments checked first, all-or-nothing;
 * never touches a pool byte.
 */
#include <errno.h>

#include "store_int.h"

int kvr_store_disk_cold(struct kvr_store *s, uint32_t ch, uint32_t max,
			uint64_t zone_bytes, uint64_t now_ns,
			struct kvr_key *keys, struct kvr_slot_desc *slots,
			uint32_t *ns_out, uint64_t *xfer_out)
{
	return kvr__store_cold_pin(s, ch, max, zone_bytes, now_ns, keys, slots,
				   ns_out, xfer_out, true);
}

int kvr_store_disk_saved(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			 const uint8_t *saved, uint32_t n, bool cold)
{
	return kvr__store_cold_saved(s, ch, xfer, saved, n, true, cold);
}

int kvr_store_disk_commit_mask(struct kvr_store *s, uint32_t ch, uint64_t xfer,
			       const uint8_t *keep, uint32_t n, uint64_t now_ns)
{
	return kvr__store_commit_mask(s, ch, xfer, keep, n, now_ns, true);
}

void kvr_store_disk_guard(struct kvr_store *s, bool on)
{
	OWNER_ONLY(s);
	s->disk_guard = on;
}

int kvr_store_disk_forget(struct kvr_store *s, uint32_t ns,
			  const struct kvr_key *k)
{
	uint32_t x;

	OWNER_ONLY(s);
	if (!k || ns >= s->cfg.max_ns)
		return -EINVAL;
	x = kvr_index_find(&s->index, ns, k);
	if (x == KVR_INDEX_NONE || !s->obj[x].disk)
		return 0;
	s->obj[x].disk = 0;
	return 1;
}
