/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: kvringd's handshake table policy (issue 12), through
 * the server's own kvr__hello_victim(). The input is a script over a
 * table of 64 connection slots: accept a socket of one of 6 uids (the
 * server first drops the victim it names, as make_pending_room() does,
 * then takes a free slot), finish or abandon a pending handshake, or let
 * time pass. After every step the policy's promises must hold: a uid
 * never has more than KVR_SRV_PENDING_PER_UID pending handshakes and the
 * table never more than KVR_SRV_PENDING_MAX, a new socket always finds a
 * slot (with at most max_workers of them active, as in the server), and a
 * victim is always a pending handshake, the oldest of those a reference
 * model of the policy says it must be chosen among.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSLOT 64u
#define NUID  6u

static void check(bool ok)
{
	if (!ok)
		__builtin_trap();
}

static uint32_t pending(const struct kvr_conn *c, uint32_t n, bool any,
			uid_t uid)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++)
		k += c[i].state == KVR_CONN_HELLO && (any || c[i].uid == uid);
	return k;
}

static uint32_t active(const struct kvr_conn *c)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < NSLOT; i++)
		k += c[i].state == KVR_CONN_ACTIVE;
	return k;
}

/*
 * The reference the policy is checked against, written the obvious way:
 * accepted_ns of the handshake that must go (0: none must).
 */
static uint64_t expected(const struct kvr_conn *c, uint32_t npending, uid_t uid)
{
	bool per_uid = pending(c, NSLOT, false, uid) >= KVR_SRV_PENDING_PER_UID;
	uint64_t best = 0;

	if (!per_uid && npending < KVR_SRV_PENDING_MAX)
		return 0;
	for (uint32_t i = 0; i < NSLOT; i++) {
		if (c[i].state != KVR_CONN_HELLO ||
		    (per_uid && c[i].uid != uid))
			continue;
		if (!best || c[i].accepted_ns < best)
			best = c[i].accepted_ns;
	}
	return best;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct kvr_conn conns[NSLOT];
	uint64_t now = 1;
	uint32_t npending = 0;

	memset(conns, 0, sizeof(conns));
	for (size_t step = 0; step + 1 < size && step < 2048; step += 2) {
		uint8_t op = data[step], arg = data[step + 1];
		uid_t uid = (uid_t)(arg % NUID);
		struct kvr_conn *v, *slot = NULL;

		now += 1 + (op >> 4);
		switch (op & 3) {
		case 0: /* accept, as kvr__hello_accepted() */
		case 1:
			for (int pass = 0; pass <= 64; pass++) {
				uint32_t before = npending;

				v = kvr__hello_victim(conns, NSLOT, npending,
						      uid);
				if (!v) {
					check(expected(conns, npending, uid) ==
					      0);
					break;
				}
				check(v->state == KVR_CONN_HELLO);
				check(v->accepted_ns ==
				      expected(conns, npending, uid));
				v->state = KVR_CONN_FREE;
				npending--;
				check(npending < before);
			}
			check(pending(conns, NSLOT, false, uid) <
			      KVR_SRV_PENDING_PER_UID);
			check(npending < KVR_SRV_PENDING_MAX);
			for (uint32_t i = 0; !slot && i < NSLOT; i++)
				if (conns[i].state == KVR_CONN_FREE)
					slot = &conns[i];
			/* The server has max_workers + KVR_SRV_PENDING_MAX
			 * slots and at most max_workers workers: after the
			 * room is made, a new socket always finds one. */
			check(slot != NULL);
			slot->state = KVR_CONN_HELLO;
			slot->uid = uid;
			slot->accepted_ns = now;
			npending++;
			break;
		case 2: /* a pending handshake finishes (or hangs up) */
			slot = &conns[arg % NSLOT];
			if (slot->state == KVR_CONN_HELLO) {
				/* A channel, if one of max_workers is free. */
				bool room =
				    active(conns) < NSLOT - KVR_SRV_PENDING_MAX;

				slot->state = (op & 4) && room ? KVR_CONN_ACTIVE
							       : KVR_CONN_FREE;
				npending--;
			}
			break;
		default: /* an active worker leaves */
			slot = &conns[arg % NSLOT];
			if (slot->state == KVR_CONN_ACTIVE)
				slot->state = KVR_CONN_FREE;
			break;
		}
		check(npending == pending(conns, NSLOT, true, 0));
		check(npending <= KVR_SRV_PENDING_MAX);
		for (uid_t u = 0; u < NUID; u++)
			check(pending(conns, NSLOT, false, u) <=
			      KVR_SRV_PENDING_PER_UID);
	}
	return 0;
}
