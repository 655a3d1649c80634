/* SPDX-License-Identifier: MIT */
/*
 * store_id.h - the ids kvringd hands out for leases and transfers: a
 * never-wrapping 64-bit counter encrypted with Speck64/128 under a key
 * the server draws from getrandom at start. Encryption is a permutation
 * of the 64-bit values, so two counter values never give the same id
 * (never reused, never colliding in the id map), and without the key the
 * next id cannot be told from the previous ones (unguessable). A lease
 * id is therefore 64 bits an attacker cannot predict, and a stale id can
 * never name a newer owner.
 *
 * Pure computation: no state besides the caller's struct, no system call.
 * The key comes from the caller (server/srv.c reads getrandom).
 */
#ifndef KVR_SERVER_STORE_ID_H
#define KVR_SERVER_STORE_ID_H

#include <stdint.h>

#define KVR_STORE_ID_ROUNDS 27u

/* The expanded key and the counter. Owned by its store. */
struct kvr_store_id {
	uint32_t rk[KVR_STORE_ID_ROUNDS]; /* Speck64/128 round keys */
	uint64_t next;			  /* next counter value */
};

/*
 * kvr_store_id_init - expand the 128-bit @key (key[0] low word first, as
 * Speck's K0..K3) and start the counter at 1.
 */
void kvr_store_id_init(struct kvr_store_id *g, const uint32_t key[4]);

/*
 * kvr_store_id_encrypt - one Speck64/128 block: @block's high 32 bits are
 * the cipher's x word, its low 32 bits y (the published test vectors'
 * order). A permutation of uint64_t for a fixed key.
 */
uint64_t kvr_store_id_encrypt(const struct kvr_store_id *g, uint64_t block);

/* kvr_store_id_next - a fresh id: never 0, never returned before. */
uint64_t kvr_store_id_next(struct kvr_store_id *g);

#endif /* KVR_SERVER_STORE_ID_H */
