/* SPDX-License-Identifier: MIT */
/*
 * disk_srv_ns.c - the disk tier's namespace fingerprints (docs/layout.md,
 * "Disk records"): the 64-bit value a record carries for its namespace,
 * made once per namespace from its 128-bit namespace key; and, through
 * them back to the namespace, the pool's marks of a copy on disk
 * forgotten when the disk drops that copy (its LRU, a failed check), so
 * that the write-back guard and the unsaved count stay true. Loop thread
 * only, as disk_srv.c, whose struct kvr_dsrv holds the table.
 */
#include <errno.h>
#include <stdlib.h>

#include <kvring/keys.h>

#include "kvringd.h"

int kvr_dsrv_ns_init(struct kvr_dsrv_ns *n, struct kvr_srv *s)
{
	n->s = s;
	n->fp = calloc(KVR_SRV_NS_MAX, sizeof(*n->fp));
	return n->fp ? 0 : -ENOMEM;
}

void kvr_dsrv_ns_fini(struct kvr_dsrv_ns *n)
{
	free(n->fp);
	n->fp = NULL;
}

/* The namespace key folded (docs/keys.md), never 0; cached. */
uint64_t kvr_dsrv_ns_fp(struct kvr_dsrv_ns *n, uint32_t ns)
{
	struct kvr_srv *s = n->s;
	struct kvr_key k;

	if (ns == 0 || ns > s->nns)
		return 0;
	if (!n->fp[ns - 1] && kvr_ns_key(&s->ns[ns - 1].desc, &k) == 0)
		n->fp[ns - 1] = (k.lo ^ k.hi) | 1;
	return n->fp[ns - 1];
}

/* Every namespace of fingerprint @fp (one, but nothing relies on it):
 * O(namespaces) compares, then one index find in the store. */
void kvr_dsrv_ns_dropped(void *arg, uint64_t fp, const struct kvr_key *k)
{
	struct kvr_dsrv_ns *n = arg;

	for (uint32_t i = 0; i < n->s->nns; i++)
		if (n->fp[i] == fp)
			(void)kvr_store_disk_forget(n->s->store, i + 1, k);
}

void kvr_dsrv_ns_recheck(struct kvr_dsrv_ns *n, const struct kvr_disk *d,
			 uint64_t fp, const struct kvr_key *keys,
			 const uint8_t *keep, uint32_t cnt)
{
	for (uint32_t i = 0; i < cnt; i++)
		if (keep[i] == KVR_STORE_DISK_SAVED &&
		    !kvr_disk_has(d, fp, &keys[i]))
			kvr_dsrv_ns_dropped(n, fp, &keys[i]);
}
