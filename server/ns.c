/* SPDX-License-Identifier: MIT */
/*
 * The namespace table: one entry per model layout a connected worker
 * registered at its handshake (hello.c), kept while a channel or an
 * object of the store uses it, and reused for a new model when neither
 * does (evicting an idle model's objects if the table is full).
 * Event-loop thread only.
 */
#include <string.h>

#include <kvring/log.h>

#include "ns.h"

/* Forget entry @e: nothing refers to its id any more. */
static void ns_free(struct kvr_srv *s, struct kvr_ns_ent *e)
{
	kvr_log_info("namespace %u (model '%.64s') freed: no worker and no "
		     "object uses it",
		     e->id, e->desc.model);
	memset(&e->desc, 0, sizeof(e->desc));
	e->used = false;
	e->refs = 0;
	/* The next model in this entry starts its own counters, and its
	 * inspector slot is republished under a new generation (chan.c). */
	memset(&e->cache, 0, sizeof(e->cache));
	e->published = false;
	e->dirty = false;
	s->nns--;
}

/*
 * A free entry for a new namespace: an unused one; else one no channel
 * uses whose objects are all gone (evicted since its last worker left);
 * else, least recently left first, one no channel uses whose cached
 * objects can all be evicted now (pinned or reserved ones keep it).
 * NULL when every entry is held by a channel or by pinned objects.
 */
static struct kvr_ns_ent *ns_find_free(struct kvr_srv *s)
{
	struct kvr_ns_ent *idle = NULL;

	for (uint32_t i = 0; i < KVR_SRV_NS_MAX; i++) {
		struct kvr_ns_ent *e = &s->ns[i];

		if (!e->used)
			return e;
		if (e->refs)
			continue;
		if (kvr_store_ns_objects(s->store, e->id) == 0) {
			ns_free(s, e);
			return e;
		}
		if (!idle || e->last_put_ns < idle->last_put_ns)
			idle = e;
	}
	if (!idle)
		return NULL;
	if (kvr_store_ns_evict(s->store, idle->id) != 0)
		return NULL;
	kvr_log_warn("namespace table full: evicted the cached objects of "
		     "namespace %u (model '%.64s', no worker connected) to "
		     "make room for a new model",
		     idle->id, idle->desc.model);
	ns_free(s, idle);
	return idle;
}

/*
 * Same description, same id; ids start at 1 and name a table entry
 * (id - 1). Takes a reference for the connection, which kvr__ns_put()
 * gives back when it closes. Returns 0 when the table is full.
 */
uint32_t kvr__ns_register(struct kvr_srv *s, const struct kvr_ns_desc *in)
{
	struct kvr_ns_desc d = *in;
	size_t mlen = strnlen(d.model, sizeof(d.model));
	struct kvr_ns_ent *e;

	/* Bytes after the model's NUL do not make another namespace. */
	memset(d.model + mlen, 0, sizeof(d.model) - mlen);
	for (uint32_t i = 0; i < KVR_SRV_NS_MAX; i++) {
		e = &s->ns[i];
		if (e->used && memcmp(&e->desc, &d, sizeof(d)) == 0) {
			e->refs++;
			return e->id;
		}
	}
	e = ns_find_free(s);
	if (!e)
		return 0;
	e->desc = d;
	e->id = (uint32_t)(e - s->ns) + 1;
	e->used = true;
	e->refs = 1;
	/* Its cache counters start from zero, and its slot in the
	 * directory memfd is rewritten (chan.c put_ns). */
	memset(&e->cache, 0, sizeof(e->cache));
	e->published = false;
	e->dirty = true;
	s->nns++;
	kvr_log_info("namespace %u registered: model '%s', %u layers, %u kv "
		     "heads x %u, %u-byte elements, tp %u/%u, %u tokens per "
		     "chunk",
		     e->id, d.model, d.layers, d.kv_heads, d.head_size,
		     d.dtype_bytes, d.tp_rank, d.tp_size, d.chunk_tokens);
	return e->id;
}

void kvr__ns_put(struct kvr_srv *s, uint32_t ns_id)
{
	struct kvr_ns_ent *e;

	if (ns_id == 0 || ns_id > KVR_SRV_NS_MAX)
		return;
	e = &s->ns[ns_id - 1];
	if (!e->used || e->refs == 0)
		return;
	if (--e->refs)
		return;
	e->last_put_ns = s->now_ns;
	/* Objects keep it: a worker of the model may come back for them. */
	if (kvr_store_ns_objects(s->store, ns_id) == 0)
		ns_free(s, e);
}
