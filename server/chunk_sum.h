/* SPDX-License-Identifier: MIT */
/*
 * chunk_sum.h - per-chunk checksums on the server side (chunk_sum.c,
 * docs/reliability.md): the sums a commit_store carries, and the re-check
 * of a corruption report. Event-loop thread only.
 */
#ifndef KVR_SERVER_CHUNK_SUM_H
#define KVR_SERVER_CHUNK_SUM_H

#include <stdint.h>

#include "kvringd.h"

/* Reports of one connection whose bytes matched are re-checked up to
 * this many times; later ones are counted and ignored, so a lying
 * worker cannot make the loop hash the pool for it without end. */
#define KVR_SUM_FALSE_MAX 8u

/*
 * kvr__chunk_sum_store - a commit_store carrying sums (KVR_REQ_SUMS): give the
 * transfer's reservations their sums (words already copied into s->sizes).
 * Return 0, or the store's -errno (-EINVAL: count is not the transfer's
 * reservation count; -ENOENT/-EPERM/KVR_ERR_EXPIRED as commit_store), and
 * then nothing changed.
 */
int kvr__chunk_sum_store(struct kvr_srv *s, struct kvr_conn *c, uint64_t xfer,
			 uint32_t n);

/*
 * kvr__chunk_sum_report - a commit_retrieve naming corrupt slots (offsets in
 * s->sizes, n of them): re-check each against the sum the store keeps by
 * hashing the pool bytes (the one place the loop reads a slot, and only
 * on a report), and drop the objects that fail. Before the commit itself.
 * Return: the number of objects dropped.
 */
uint32_t kvr__chunk_sum_report(struct kvr_srv *s, struct kvr_conn *c,
			       uint64_t xfer, uint32_t n);

#endif /* KVR_SERVER_CHUNK_SUM_H */
