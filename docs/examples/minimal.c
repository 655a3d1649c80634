/* SPDX-License-Identifier: MIT */
/*
 * minimal.c - the smallest complete libkvring worker (docs/worker-guide.md):
 * connect, derive keys from token ids, store two chunks, look them up,
 * retrieve and check them, close. Build against an installed kvring:
 *   cc -o minimal minimal.c $(pkg-config --cflags --libs kvring)
 * Run with kvringd started (kvringd &), or pass the socket: ./minimal PATH
 */
#include <stdio.h>
#include <string.h>

#include <kvring/kvring.h>

#define CHUNK_TOKENS 256
#define NCHUNKS	     2

int main(int argc, char **argv)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c;
	struct kvr_key keys[NCHUNKS];
	uint32_t tokens[NCHUNKS * CHUNK_TOKENS];
	uint64_t sizes[NCHUNKS];
	struct kvr_xfer x;
	char err[256];
	size_t chunk_bytes;
	long hits;
	int rc, ok = 1;

	/* The model layout fixes the key namespace. */
	strcpy(o.ns.model, "meta-llama/Meta-Llama-3-8B");
	o.ns.layers = 4; /* a reduced layer count, to keep it small */
	o.ns.kv_heads = 8;
	o.ns.head_size = 128;
	o.ns.dtype_bytes = 2; /* fp16 */
	o.ns.tp_rank = 0;
	o.ns.tp_size = 1;
	o.ns.chunk_tokens = CHUNK_TOKENS;
	o.socket_path = argc > 1 ? argv[1] : NULL; /* NULL: the default */
	chunk_bytes = (size_t)2 * o.ns.layers * o.ns.kv_heads * o.ns.head_size *
		      o.ns.dtype_bytes * o.ns.chunk_tokens;

	rc = kvr_connect(&o, &c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "connect: %s\n", err);
		return 1;
	}
	printf("%s\n", kvr_client_info(c)->debug); /* transport, pool, ... */

	for (int i = 0; i < NCHUNKS * CHUNK_TOKENS; i++)
		tokens[i] = (uint32_t)(1000 + i); /* your prompt's token ids */
	if (kvr_client_keys(c, tokens, NCHUNKS * CHUNK_TOKENS, keys, NCHUNKS) !=
	    NCHUNKS)
		goto fail;

	/* Store: reserve, write into the pool, commit. */
	for (int i = 0; i < NCHUNKS; i++)
		sizes[i] = chunk_bytes;
	if (kvr_prepare_store(c, keys, sizes, NCHUNKS, &x) < 0)
		goto fail;
	for (uint32_t i = 0; i < x.nslots; i++)
		if (x.slots[i].status == KVR_SLOT_OK) /* else EXISTS etc. */
			memset(x.slots[i].ptr, 'A' + (int)i, x.slots[i].len);
	if (kvr_commit_store(c, &x) < 0)
		goto fail;

	/* Lookup: how many leading chunks are cached. */
	hits = kvr_lookup(c, keys, NCHUNKS, NULL);
	printf("lookup: %ld of %d chunks cached\n", hits, NCHUNKS);

	/* Retrieve: pin, read, unpin. */
	if (kvr_prepare_retrieve(c, keys, NCHUNKS, &x) < 0)
		goto fail;
	for (uint32_t i = 0; i < x.nslots; i++) {
		const unsigned char *p = x.slots[i].ptr;

		ok &= x.slots[i].len == chunk_bytes && p[0] == 'A' + i &&
		      p[chunk_bytes - 1] == 'A' + i;
	}
	if (kvr_commit_retrieve(c, &x) < 0)
		goto fail;
	printf("retrieve: %s\n", ok ? "bytes match" : "MISMATCH");
	kvr_close(c);
	return ok ? 0 : 1;
fail:
	fprintf(stderr, "kvring: %s\n", kvr_client_errmsg(c));
	kvr_close(c);
	return 1;
}
