/* SPDX-License-Identifier: MIT */
/*
 * store_id.c - Speck64/128 (Beaulieu et al., "The SIMON and SPECK
 * Families of Lightweight Block Ciphers", 2013) over a counter: the id
 * generator of kvringd's storage engine (store_id.h says why a block
 * cipher and not raw random numbers: a permutation never repeats).
 * 27 rounds of add, rotate and xor on two 32-bit words; about 30 ns per id,
 * paid once per published owner.
 *
 * It does not decide what ids are for or check them (store_owner.c).
 */
#include "store_id.h"

static inline uint32_t ror32(uint32_t v, unsigned r)
{
	return v >> r | v << (32 - r);
}

static inline uint32_t rol32(uint32_t v, unsigned r)
{
	return v << r | v >> (32 - r);
}

/* The key schedule reuses the round function on (l, k) with the round
 * number as the key, as the paper specifies. */
void kvr_store_id_init(struct kvr_store_id *g, const uint32_t key[4])
{
	uint32_t l[KVR_STORE_ID_ROUNDS + 2];

	g->rk[0] = key[0];
	l[0] = key[1];
	l[1] = key[2];
	l[2] = key[3];
	for (uint32_t i = 0; i < KVR_STORE_ID_ROUNDS - 1; i++) {
		l[i + 3] = (g->rk[i] + ror32(l[i], 8)) ^ i;
		g->rk[i + 1] = rol32(g->rk[i], 3) ^ l[i + 3];
	}
	g->next = 1;
}

uint64_t kvr_store_id_encrypt(const struct kvr_store_id *g, uint64_t block)
{
	uint32_t x = (uint32_t)(block >> 32), y = (uint32_t)block;

	for (uint32_t i = 0; i < KVR_STORE_ID_ROUNDS; i++) {
		x = (ror32(x, 8) + y) ^ g->rk[i];
		y = rol32(y, 3) ^ x;
	}
	return (uint64_t)x << 32 | y;
}

/*
 * The counter does not wrap in a server's life (2^64 ids at a billion a
 * second is 584 years). Exactly one counter value encrypts to 0, which
 * means "none" on the wire: it is skipped, and the next value cannot
 * encrypt to 0 as well.
 */
uint64_t kvr_store_id_next(struct kvr_store_id *g)
{
	uint64_t id = kvr_store_id_encrypt(g, g->next++);

	if (id == 0)
		id = kvr_store_id_encrypt(g, g->next++);
	return id;
}
