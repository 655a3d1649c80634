/* SPDX-License-Identifier: MIT */
/*
 * ns.h - kvringd's namespace table (ns.c): the model layouts of connected
 * workers, by id (index + 1). Event-loop thread only.
 */
#ifndef KVR_SERVER_NS_H
#define KVR_SERVER_NS_H

#include <stdint.h>

#include "kvringd.h"

/*
 * kvr__ns_register - the id of namespace @in, registered if new (ids
 * start at 1 and name entry id - 1). Takes a reference for the
 * connection, which kvr__ns_put() gives back. Returns 0 when every entry
 * is held by a channel or by pinned objects.
 */
uint32_t kvr__ns_register(struct kvr_srv *s, const struct kvr_ns_desc *in);

/* A connection that registered namespace @ns_id closes: drop its
 * reference; the entry is freed once no channel and no object uses it. */
void kvr__ns_put(struct kvr_srv *s, uint32_t ns_id);

#endif /* KVR_SERVER_NS_H */
