/* SPDX-License-Identifier: MIT */
/*
 * disk_srv_ns.c - the disk tier's namespace fingerprints (docs/layout.md,
 * "Disk records"): the 64-bit value a record carries for its namespace,
 * made once per namespace from its 128-bit namespace key. Loop thread
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
