/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: kvringd's handshake table policy, through
 * the server's own kvr__hello_victim(). The input is a script over a
 * table of 64 connection slots: accept a socket of one of 6 uids (the
 * server first drops the victim it names, as make_pending_room() does,
 * then takes a free slot), finish or abandon a pending handshake, or let
 * time pass. After every step the policy's promises must hold: a uid
 * never has more than KVR_SRV_PENDING_PER_UID pending handshakes and the
 * table never more than KVR_SRV_PENDING_MAX, a new socket always finds a
 * slot (with at most max_workers of them active, as in the server), and a
 * victim is always a pending handshake, the oldest of those a reference
 * model of the policy says it must be chosen among. The target counts
 * pending and active slots as its script changes them, so a step's checks
 * cost O(1) plus the policy's own walk, and recounts the table at the end
 * of every input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hello.h"
#include "fuzz.h"

#define NSLOT 64u
#define NUID  6u

/*
 * What the script has done to the table, kept step by step so that the
 * per-step checks cost O(1) rather than a walk of the table per uid (the
 * walks cost twenty times the policy under test). recount() walks the
 * table at the end of every input and must find the same numbers, so the
 * counters cannot drift from the table unnoticed.
 */
struct tally {
	uint32_t pending;	    /* HELLO slots */
	uint32_t pending_uid[NUID]; /* HELLO slots of each uid */
	uint32_t active;	    /* ACTIVE slots */
};

static void recount(const struct kvr_conn *c, const struct tally *t)
{
	struct tally r = {0};

	for (uint32_t i = 0; i < NSLOT; i++) {
		if (c[i].state == KVR_CONN_HELLO) {
			fuzz_check(c[i].uid < NUID);
			r.pending++;
			r.pending_uid[c[i].uid]++;
		}
		r.active += c[i].state == KVR_CONN_ACTIVE;
	}
	fuzz_check(memcmp(&r, t, sizeof(r)) == 0);
}

/*
 * The reference the policy is checked against, written the obvious way:
 * accepted_ns of the handshake that must go (0: none must). Below both
 * limits none must, and the table is not walked.
 */
static uint64_t expected(const struct kvr_conn *c, const struct tally *t,
			 uid_t uid)
{
	bool per_uid = t->pending_uid[uid] >= KVR_SRV_PENDING_PER_UID;
	uint64_t best = 0;

	if (!per_uid && t->pending < KVR_SRV_PENDING_MAX)
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
	struct tally t = {0};
	uint64_t now = 1;

	/* The policy reads state, uid and accepted_ns; a free slot's are
	 * set when it is taken. */
	for (uint32_t i = 0; i < NSLOT; i++)
		conns[i].state = KVR_CONN_FREE;
	for (size_t step = 0; step + 1 < size && step < 2048; step += 2) {
		uint8_t op = data[step], arg = data[step + 1];
		uid_t uid = (uid_t)(arg % NUID);
		struct kvr_conn *v, *slot = NULL;

		now += 1 + (op >> 4);
		switch (op & 3) {
		case 0: /* accept, as kvr__hello_accepted() */
		case 1:
			for (int pass = 0; pass <= 64; pass++) {
				v = kvr__hello_victim(conns, NSLOT, t.pending,
						      uid);
				if (!v) {
					fuzz_check(expected(conns, &t, uid) ==
						   0);
					break;
				}
				fuzz_check(v >= conns && v < conns + NSLOT);
				fuzz_check(v->state == KVR_CONN_HELLO);
				fuzz_check(v->accepted_ns ==
					   expected(conns, &t, uid));
				v->state = KVR_CONN_FREE;
				t.pending--;
				t.pending_uid[v->uid]--;
			}
			fuzz_check(t.pending_uid[uid] <
				   KVR_SRV_PENDING_PER_UID);
			fuzz_check(t.pending < KVR_SRV_PENDING_MAX);
			for (uint32_t i = 0; !slot && i < NSLOT; i++)
				if (conns[i].state == KVR_CONN_FREE)
					slot = &conns[i];
			/* The server has max_workers + KVR_SRV_PENDING_MAX
			 * slots and at most max_workers workers: after the
			 * room is made, a new socket always finds one. */
			fuzz_check(slot != NULL);
			slot->state = KVR_CONN_HELLO;
			slot->uid = uid;
			slot->accepted_ns = now;
			t.pending++;
			t.pending_uid[uid]++;
			break;
		case 2: /* a pending handshake finishes (or hangs up) */
			slot = &conns[arg % NSLOT];
			if (slot->state == KVR_CONN_HELLO) {
				/* A channel, if one of max_workers is free. */
				bool room =
				    t.active < NSLOT - KVR_SRV_PENDING_MAX;

				slot->state = (op & 4) && room ? KVR_CONN_ACTIVE
							       : KVR_CONN_FREE;
				t.active += slot->state == KVR_CONN_ACTIVE;
				t.pending--;
				t.pending_uid[slot->uid]--;
			}
			break;
		default: /* an active worker leaves */
			slot = &conns[arg % NSLOT];
			if (slot->state == KVR_CONN_ACTIVE) {
				slot->state = KVR_CONN_FREE;
				t.active--;
			}
			break;
		}
		/* Only the uid of this step can have gained a handshake. */
		fuzz_check(t.pending <= KVR_SRV_PENDING_MAX);
		fuzz_check(t.pending_uid[uid] <= KVR_SRV_PENDING_PER_UID);
	}
	recount(conns, &t);
	return 0;
}
