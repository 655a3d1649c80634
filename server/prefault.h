/* SPDX-License-Identifier: MIT */
/*
 * prefault.h - kvringd's background pre-fault of a huge-page pool: one
 * thread that touches every huge page once, so the kernel zeroes them
 * while the loop already serves (docs/config.md "Huge pages", "Server
 * start"). Owned by struct kvr_srv; only the loop thread calls these.
 */
#ifndef KVR_SERVER_PREFAULT_H
#define KVR_SERVER_PREFAULT_H

#include <stdbool.h>

struct kvr_srv;

/*
 * kvr__prefault_start - start the thread over s->pool (hugetlb pools only;
 * the pages are already reserved, so the thread only zeroes and maps).
 * Return: 0; -errno if no thread could be made (then the caller touches
 * in line, as before).
 */
int kvr__prefault_start(struct kvr_srv *s);

/*
 * kvr__prefault_poll - from housekeeping: while the thread runs, a STATUS=
 * line with its progress at most once a second; once it is done, join it
 * and log the figure once. Cheap when there is no thread.
 */
void kvr__prefault_poll(struct kvr_srv *s);

/*
 * kvr__prefault_place - before a prepare_store, while the thread runs:
 * tell the allocator how far the pool is zeroed, so that new slots go
 * below that line when there is room (a store there never waits for the
 * zeroing). The caller tests s->prefault first, so that a finished
 * zeroing costs a prepare nothing but that test.
 */
void kvr__prefault_place(struct kvr_srv *s);

/* Whether the thread is still touching pages. */
bool kvr__prefault_running(const struct kvr_srv *s);

/* kvr__prefault_stop - stop and join the thread (before the pool is
 * unmapped); harmless when none runs. */
void kvr__prefault_stop(struct kvr_srv *s);

#endif /* KVR_SERVER_PREFAULT_H */
