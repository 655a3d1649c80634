/* SPDX-License-Identifier: MIT */
/*
 * kvring-demo - a demo LLM worker: stores one realistic request's KV cache
 * in kvringd, looks it up, retrieves it and verifies every byte.
 *
 * The default layout is Llama-3-8B's (8 KV heads, head size 128, fp16,
 * 256-token chunks) cut to 4 of its 32 layers so that 16 chunks (4 MiB
 * each, 64 MiB) fit a small pool. Token ids and chunk bytes are
 * deterministic (bytes are a function of the chunk's key), so two runs, or
 * a run with another transport, store identical data. The demo prints the
 * transport with the pool's name and size (DESIGN rule 9), the attach
 * time, each step's time and the store/retrieve throughput, then stores
 * the same request again to show the idempotent path. With --l2-peer it
 * then plays a second host: it reads the request back through another
 * kvringd that shares the first one's L2 tier (docs/l2.md) and verifies
 * every byte again. Exit status: 0 when
 * every byte verified, 1 on any failure, 2 on a usage error.
 * This file only drives the public API of libkvring (<kvring/kvring.h>).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvring/clock.h>
#include <kvring/error.h>
#include <kvring/kvring.h>
#include <kvring/parse.h>
#include <kvring/segment.h>

#define PROG "kvring-demo"

struct demo_opts {
	const char *socket;
	const char *model;
	const char *l2_peer; /* --l2-peer: a second host's kvringd socket */
	uint32_t chunks, layers, kv_heads, head_size, dtype_bytes;
	uint32_t chunk_tokens, timeout_ms;
	int transport;
};

static const struct option longopts[] = {
    {"socket", required_argument, NULL, 's'},
    {"chunks", required_argument, NULL, 'n'},
    {"layers", required_argument, NULL, 'l'},
    {"kv-heads", required_argument, NULL, 'k'},
    {"head-size", required_argument, NULL, 'H'},
    {"dtype-bytes", required_argument, NULL, 'd'},
    {"chunk-tokens", required_argument, NULL, 'c'},
    {"model", required_argument, NULL, 'm'},
    {"transport", required_argument, NULL, 't'},
    {"timeout-ms", required_argument, NULL, 'T'},
    {"l2-peer", required_argument, NULL, 'P'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The --help text; every option also in kvring-demo(1), which the
 * man_complete test holds to this text. */
static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG " [options]\n"
	    "Store, look up, retrieve and verify one request's KV cache.\n"
	    "  -s, --socket PATH      kvringd socket (default: "
	    "$KVRING_SOCKET,\n"
	    "                         else the per-uid default)\n"
	    "  -n, --chunks N         chunks in the request (16)\n"
	    "  -l, --layers N         layers (4; Llama-3-8B has 32)\n"
	    "  -k, --kv-heads N       KV heads (8)\n"
	    "  -H, --head-size N      head size (128)\n"
	    "  -d, --dtype-bytes N    bytes per element: 1, 2 or 4 (2)\n"
	    "  -c, --chunk-tokens N   tokens per chunk (256)\n"
	    "  -m, --model NAME       model name in the key namespace\n"
	    "                         (meta-llama/Meta-Llama-3-8B)\n"
	    "  -t, --transport T      auto or copy (auto; KVRING_TRANSPORT\n"
	    "                         overrides)\n"
	    "  -T, --timeout-ms N     bound on every call (5000)\n"
	    "  -P, --l2-peer PATH     then act as a second host: look the\n"
	    "                         request up through the kvringd at PATH\n"
	    "                         (both started with the same --l2), get\n"
	    "                         every chunk through L2, verify every "
	    "byte\n"
	    "  -h, --help             this text\n"
	    "  -V, --version          version and segment ABI\n"
	    "Exit: 0 every byte verified, 1 failure, 2 usage error.\n");
}

/* A number in [lo, hi] in the shared grammar (lib/parse.c); -1 if not. */
static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	return kvr_parse_u32(s, lo, hi, out) < 0 ? -1 : 0;
}

/*
 * Fill @o from the command line, defaults first (the Llama-3-8B-shaped
 * layout the header describes). Every refusal names the option and its
 * value. Return: 0, or -1 after printing why (the caller exits 2).
 */
static int parse_args(int argc, char **argv, struct demo_opts *o)
{
	int ch;

	*o = (struct demo_opts){.model = "meta-llama/Meta-Llama-3-8B",
				.chunks = 16,
				.layers = 4,
				.kv_heads = 8,
				.head_size = 128,
				.dtype_bytes = 2,
				.chunk_tokens = 256};
	while ((ch = getopt_long(argc, argv, "s:n:l:k:H:d:c:m:t:T:P:hV",
				 longopts, NULL)) != -1) {
		int bad = 0;

		switch (ch) {
		case 's':
			o->socket = optarg;
			break;
		case 'P':
			o->l2_peer = optarg;
			break;
		case 'm':
			o->model = optarg;
			break;
		case 'n':
			bad = parse_u32(optarg, 1, 4096, &o->chunks);
			break;
		case 'l':
			bad = parse_u32(optarg, 1, 1024, &o->layers);
			break;
		case 'k':
			bad = parse_u32(optarg, 1, 1024, &o->kv_heads);
			break;
		case 'H':
			bad = parse_u32(optarg, 1, 65536, &o->head_size);
			break;
		case 'd':
			bad = parse_u32(optarg, 1, 4, &o->dtype_bytes);
			bad |= o->dtype_bytes == 3;
			break;
		case 'c':
			bad = parse_u32(optarg, 1, 1u << 20, &o->chunk_tokens);
			break;
		case 'T':
			bad = parse_u32(optarg, 1, 3600000, &o->timeout_ms);
			break;
		case 't':
			if (!strcmp(optarg, "copy"))
				o->transport = KVR_TRANSPORT_COPY;
			else if (strcmp(optarg, "auto"))
				bad = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf(PROG " %s (segment ABI %d.%d, protocol %u)\n",
			       KVR_VERSION_STRING, KVR_ABI_MAJOR, KVR_ABI_MINOR,
			       KVR_PROTO_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
		if (bad) {
			fprintf(stderr, PROG ": bad value for -%c: %s\n", ch,
				optarg);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, PROG ": unexpected argument %s\n",
			argv[optind]);
		return -1;
	}
	if (strlen(o->model) == 0 || strlen(o->model) > 63) {
		fprintf(stderr, PROG ": --model must be 1..63 characters\n");
		return -1;
	}
	return 0;
}

/* Seconds on the one monotonic clock, for the step times printed. */
static double now_s(void)
{
	return (double)kvr_clock_now_ns() / 1e9;
}

/* splitmix64: the chunk's bytes are a pure function of its key. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * The chunk's bytes as a function of its key alone (splitmix64 of the key
 * and the byte's offset): what a real engine would copy out of its KV
 * cache. Any two runs with the same layout and model store the same bytes,
 * so the second host of --l2-peer can check what the first one stored.
 */
static void fill_chunk(const struct kvr_key *k, unsigned char *dst, size_t n)
{
	uint64_t seed = k->lo ^ mix(k->hi);
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		uint64_t v = mix(seed + i);

		memcpy(dst + i, &v, 8);
	}
	for (; i < n; i++)
		dst[i] = (unsigned char)mix(seed + i);
}

/* Bytes over seconds in GB/s (10^9), 0 for an interval too short to
 * measure. */
static double gbps(double bytes, double s)
{
	return s > 0 ? bytes / s / 1e9 : 0;
}

/*
 * The second host: connect to the peer kvringd (same layout), look the
 * request up through L2 until every chunk is there (the first host's
 * uploads are write-behind, so they may still be on their way), retrieve
 * and compare every byte. Return 0 when all match.
 */
static int peer_check(const struct demo_opts *o, struct kvr_client_opts co,
		      const struct kvr_key *keys, const unsigned char *expect,
		      size_t chunk_bytes)
{
	struct kvr_client *c = NULL;
	struct kvr_xfer x = {0};
	char err[256];
	double t0, t1, first_ms = 0;
	bool pending = false;
	long hits = -1, l1;
	int rc, tries = 0, ret = 1;

	co.socket_path = o->l2_peer;
	rc = kvr_connect(&co, &c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, PROG ": connect to --l2-peer %s: %s\n",
			o->l2_peer, err);
		return 1;
	}
	/* What the second host has of its own, then lookups that may read
	 * through from L2: a "pending" answer means kvringd is fetching the
	 * chunks into its pool, so ask again until all are there. */
	l1 = kvr_lookup(c, keys, o->chunks, NULL);
	t0 = now_s();
	for (; tries < 100; tries++) {
		double a = now_s();

		hits = kvr_lookup_l2(c, keys, o->chunks, NULL, &pending);
		if (tries == 0)
			first_ms = (now_s() - a) * 1e3;
		if (hits < 0 || hits == (long)o->chunks)
			break;
		nanosleep(&(struct timespec){0, 50000000}, NULL);
	}
	t1 = now_s();
	if (hits != (long)o->chunks) {
		fprintf(
		    stderr,
		    PROG
		    ": second host found %ld of %u chunks "
		    "through L2 (%s): are both servers started with the same "
		    "--l2, and is Redis up? kvring-inspect shows l2.*\n",
		    hits, o->chunks,
		    hits < 0 ? kvr_client_errmsg(c) : "after 5 s");
		goto out;
	}
	printf("second host (%s): %ld of %u chunks in its L1 before, %ld "
	       "through L2; first read-through lookup %.2f ms, all in %.1f ms "
	       "(%d lookups)\n",
	       o->l2_peer, l1, o->chunks, hits - (l1 > 0 ? l1 : 0), first_ms,
	       (t1 - t0) * 1e3, tries + 1);
	/* The chunks now sit in this host's own pool: an ordinary retrieve,
	 * each byte compared with what the first host stored. */
	rc = kvr_prepare_retrieve(c, keys, o->chunks, &x);
	if (rc < 0 || x.nslots != o->chunks) {
		fprintf(stderr, PROG ": second host retrieve: %s\n",
			rc < 0 ? kvr_client_errmsg(c) : "short prefix");
		goto out;
	}
	for (uint32_t i = 0; i < x.nslots; i++)
		if (x.slots[i].len != chunk_bytes ||
		    memcmp(x.slots[i].ptr, expect + (size_t)i * chunk_bytes,
			   chunk_bytes) != 0) {
			fprintf(stderr,
				PROG ": second host: chunk %u differs "
				     "from what the first host stored\n",
				i);
			goto out;
		}
	printf("second host verify: all %zu bytes of %u chunks match\n",
	       chunk_bytes * o->chunks, o->chunks);
	ret = 0;
out:
	if (x.id)
		kvr_commit_retrieve(c, &x);
	kvr_xfer_free(&x);
	kvr_close(c);
	return ret;
}

/* Store: prepare, write into the pool, commit; the counts and times
 * printed. 0, or -1 (said) when a chunk could not be stored. */
static int demo_store(struct kvr_client *c, const struct demo_opts *o,
		      struct kvr_xfer *x, struct kvr_key *keys, uint64_t *sizes,
		      const unsigned char *expect, size_t chunk_bytes)
{
	uint32_t stored = 0, exists = 0, noroom = 0, other = 0;
	double t0, t1, t2, t3;
	int rc;

	t0 = now_s();
	rc = kvr_prepare_store(c, keys, sizes, o->chunks, x);
	if (rc < 0) {
		fprintf(stderr, PROG ": prepare_store: %s\n",
			kvr_client_errmsg(c));
		return -1;
	}
	t1 = now_s();
	/* Each key's answer: OK hands a reserved slot in the pool to fill
	 * (the copy is the worker's; no byte crosses the socket), EXISTS
	 * means another worker stored it first, NOROOM that the pool could
	 * not make room (everything pinned, or the disk tier holding back
	 * unwritten chunks). Only filled OK slots are published at commit. */
	for (uint32_t i = 0; i < x->nslots; i++) {
		struct kvr_slot *s = &x->slots[i];

		switch (s->status) {
		case KVR_SLOT_OK:
			memcpy(s->ptr, expect + (size_t)i * chunk_bytes,
			       chunk_bytes);
			stored++;
			break;
		case KVR_SLOT_EXISTS:
			exists++;
			break;
		case KVR_SLOT_NOROOM:
			noroom++;
			break;
		default:
			other++;
			break;
		}
	}
	t2 = now_s();
	rc = kvr_commit_store(c, x);
	t3 = now_s();
	if (rc < 0) {
		fprintf(stderr, PROG ": commit_store: %s\n",
			kvr_client_errmsg(c));
		return -1;
	}
	printf("store: %u new, %u already stored, %u no room, %u other; "
	       "prepare %.2f ms, write %.2f ms, commit %.2f ms; "
	       "%.2f GB/s (write only %.2f GB/s)\n",
	       stored, exists, noroom, other, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
	       (t3 - t2) * 1e3,
	       gbps((double)stored * (double)chunk_bytes, t3 - t0),
	       gbps((double)stored * (double)chunk_bytes, t2 - t1));
	if (noroom || other) {
		fprintf(stderr,
			PROG ": %u chunks could not be stored (pool too "
			     "small? try --chunks or --layers lower)\n",
			noroom + other);
		return -1;
	}
	return 0;
}

/* Retrieve: prepare (pins), read out of the pool into @got, commit
 * (unpins); every byte compared with @expect. 0 or -1 (said). */
static int demo_retrieve(struct kvr_client *c, const struct demo_opts *o,
			 struct kvr_xfer *x, struct kvr_key *keys,
			 const unsigned char *expect, unsigned char *got,
			 size_t chunk_bytes, size_t total)
{
	double t0, t1, t2, t3;
	int rc;

	/* The slots stay pinned from prepare to commit: eviction cannot
	 * reuse them while they are read, however full the pool gets. */
	memset(got, 0xa5, total); /* fault the pages in before timing */
	t0 = now_s();
	rc = kvr_prepare_retrieve(c, keys, o->chunks, x);
	if (rc < 0) {
		fprintf(stderr, PROG ": prepare_retrieve: %s\n",
			kvr_client_errmsg(c));
		return -1;
	}
	t1 = now_s();
	if (x->nslots != o->chunks) {
		fprintf(stderr, PROG ": retrieve gave %u slots, expected %u\n",
			x->nslots, o->chunks);
		kvr_commit_retrieve(c, x);
		return -1;
	}
	for (uint32_t i = 0; i < x->nslots; i++) {
		if (x->slots[i].len != chunk_bytes) {
			fprintf(stderr,
				PROG ": slot %u has %llu bytes, "
				     "expected %zu\n",
				i, (unsigned long long)x->slots[i].len,
				chunk_bytes);
			kvr_commit_retrieve(c, x);
			return -1;
		}
		memcpy(got + (size_t)i * chunk_bytes, x->slots[i].ptr,
		       chunk_bytes);
	}
	t2 = now_s();
	rc = kvr_commit_retrieve(c, x);
	t3 = now_s();
	if (rc < 0) {
		fprintf(stderr, PROG ": commit_retrieve: %s\n",
			kvr_client_errmsg(c));
		return -1;
	}
	printf("retrieve: %u chunks; prepare %.2f ms, read %.2f ms, commit "
	       "%.2f ms; %.2f GB/s (read only %.2f GB/s)\n",
	       o->chunks, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3,
	       gbps((double)total, t3 - t0), gbps((double)total, t2 - t1));

	for (uint32_t i = 0; i < o->chunks; i++) {
		size_t off = (size_t)i * chunk_bytes;

		if (memcmp(got + off, expect + off, chunk_bytes) != 0) {
			size_t b = 0;

			while (got[off + b] == expect[off + b])
				b++;
			fprintf(stderr,
				PROG ": chunk %u differs at byte %zu "
				     "(0x%02x, expected 0x%02x)\n",
				i, b, got[off + b], expect[off + b]);
			return -1;
		}
	}
	printf("verify: all %zu bytes of %u chunks match\n", total, o->chunks);
	return 0;
}

/* The same request again: the idempotent path (DESIGN rule 1), every
 * chunk must answer "already stored". 0 or -1 (said). */
static int demo_store_again(struct kvr_client *c, const struct demo_opts *o,
			    struct kvr_xfer *x, struct kvr_key *keys,
			    uint64_t *sizes, const unsigned char *expect,
			    size_t chunk_bytes)
{
	uint32_t stored = 0, exists = 0;
	int rc;

	rc = kvr_prepare_store(c, keys, sizes, o->chunks, x);
	if (rc < 0) {
		fprintf(stderr, PROG ": prepare_store again: %s\n",
			kvr_client_errmsg(c));
		return -1;
	}
	for (uint32_t i = 0; i < x->nslots; i++) {
		if (x->slots[i].status == KVR_SLOT_EXISTS) {
			exists++;
		} else if (x->slots[i].status == KVR_SLOT_OK) {
			/* Evicted meanwhile: a reserved slot must be filled
			 * before commit, never published half-written. */
			memcpy(x->slots[i].ptr,
			       expect + (size_t)i * chunk_bytes, chunk_bytes);
			stored++;
		}
	}
	rc = kvr_commit_store(c, x);
	if (rc < 0) {
		fprintf(stderr, PROG ": commit_store again: %s\n",
			kvr_client_errmsg(c));
		return -1;
	}
	printf("store again: %u already stored, %u new (expected %u and 0)\n",
	       exists, stored, o->chunks);
	if (exists != o->chunks) {
		/* Written chunks were still committed: the data is fine, but
		 * the idempotent path did not answer as expected. */
		fprintf(stderr, PROG ": the repeated store was not a no-op\n");
		return -1;
	}
	return 0;
}

/*
 * Connect with the layout of @o as the namespace and print what the
 * handshake gave (transport, pool, attach time). Return: 0 and *c, or -1
 * after printing why.
 */
static int demo_connect(const struct demo_opts *o, struct kvr_client_opts *co,
			struct kvr_client **c)
{
	char err[256];
	double t0;
	int rc;

	/* The namespace: every field is part of the keys' fingerprint, so a
	 * chunk is never served to an engine with another layout. */
	strcpy(co->ns.model, o->model);
	co->ns.layers = o->layers;
	co->ns.kv_heads = o->kv_heads;
	co->ns.head_size = o->head_size;
	co->ns.dtype_bytes = o->dtype_bytes;
	co->ns.tp_size = 1;
	co->ns.chunk_tokens = o->chunk_tokens;
	co->socket_path = o->socket;
	co->transport = o->transport;
	co->timeout_ms = o->timeout_ms;

	/* Attach: the handshake over kvringd's socket hands over the pool
	 * and this worker's rings; from here on requests go through shared
	 * memory (or the socket, with --transport copy). */
	t0 = now_s();
	rc = kvr_connect(co, c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, PROG ": connect: %s\n", err);
		return -1;
	}
	{
		const struct kvr_client_info *i = kvr_client_info(*c);

		printf("connected in %.1f ms: %s\n", (now_s() - t0) * 1e3,
		       i->debug);
		printf("transport=%s pool=%s pool_bytes=%llu attach_ms=%.1f\n",
		       i->transport == KVR_TRANSPORT_COPY    ? "copy"
		       : i->transport == KVR_TRANSPORT_MEMFD ? "memfd"
							     : "shm",
		       i->pool_name[0] ? i->pool_name : "(anonymous)",
		       (unsigned long long)i->pool_bytes,
		       (double)i->attach_ns / 1e6);
	}
	return 0;
}

/*
 * One request's life as an engine lives it: connect (the layout is the
 * namespace: two workers share chunks only with the same one), hash the
 * token ids into chunk keys, store, look up, retrieve and verify, store
 * again, then optionally read it all back as a second host.
 */
int main(int argc, char **argv)
{
	struct kvr_client_opts co = {0};
	struct kvr_client *c = NULL;
	struct demo_opts o;
	struct kvr_xfer x = {0};
	struct kvr_key *keys = NULL;
	uint64_t *sizes = NULL;
	uint32_t *tokens = NULL;
	unsigned char *expect = NULL, *got = NULL;
	size_t chunk_bytes, total;
	double t0, t1;
	long nk, hits;
	int ret = 1;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	chunk_bytes = (size_t)2 * o.layers * o.kv_heads * o.head_size *
		      o.dtype_bytes * o.chunk_tokens;
	total = chunk_bytes * o.chunks;

	if (demo_connect(&o, &co, &c) < 0)
		return 1;
	printf("request: %u chunks x %u tokens, %u layers x %u kv heads x %u "
	       "x %u bytes: %.2f MiB per chunk, %.1f MiB in all\n",
	       o.chunks, o.chunk_tokens, o.layers, o.kv_heads, o.head_size,
	       o.dtype_bytes, (double)chunk_bytes / 1048576.0,
	       (double)total / 1048576.0);

	tokens = malloc((size_t)o.chunks * o.chunk_tokens * sizeof(*tokens));
	keys = calloc(o.chunks, sizeof(*keys));
	sizes = calloc(o.chunks, sizeof(*sizes));
	expect = malloc(total);
	got = malloc(total);
	if (!tokens || !keys || !sizes || !expect || !got) {
		fprintf(stderr, PROG ": out of memory for %zu bytes\n", total);
		goto out;
	}
	/* Token ids of a made-up prompt (Llama-3's vocabulary is 128 256),
	 * hashed chunk by chunk into prefix keys: chunk i's key covers every
	 * token up to its end, as an engine's prefix cache does. */
	for (size_t j = 0; j < (size_t)o.chunks * o.chunk_tokens; j++)
		tokens[j] = (uint32_t)((j * 2654435761ull + 12345) % 128256);
	nk = kvr_client_keys(c, tokens, (size_t)o.chunks * o.chunk_tokens, keys,
			     o.chunks);
	if (nk != (long)o.chunks) {
		fprintf(stderr, PROG ": keys: %ld, expected %u\n", nk,
			o.chunks);
		goto out;
	}
	for (uint32_t i = 0; i < o.chunks; i++) {
		sizes[i] = chunk_bytes;
		fill_chunk(&keys[i], expect + (size_t)i * chunk_bytes,
			   chunk_bytes);
	}

	if (demo_store(c, &o, &x, keys, sizes, expect, chunk_bytes) < 0)
		goto out;

	/* Lookup: how many chunks, from the first, are stored; what an
	 * engine asks before it decides how much prefill to skip. */
	t0 = now_s();
	hits = kvr_lookup(c, keys, o.chunks, NULL);
	t1 = now_s();
	if (hits < 0) {
		fprintf(stderr, PROG ": lookup: %s\n", kvr_client_errmsg(c));
		goto out;
	}
	printf("lookup: %ld of %u chunks stored (%.1f us)\n", hits, o.chunks,
	       (t1 - t0) * 1e6);
	if (hits != (long)o.chunks) {
		fprintf(stderr, PROG ": lookup found %ld chunks, expected %u\n",
			hits, o.chunks);
		goto out;
	}

	/* Read it all back and compare, then store it again: the second
	 * store must find every chunk already there and copy nothing. */
	if (demo_retrieve(c, &o, &x, keys, expect, got, chunk_bytes, total) <
		0 ||
	    demo_store_again(c, &o, &x, keys, sizes, expect, chunk_bytes) < 0)
		goto out;
	if (o.l2_peer && peer_check(&o, co, keys, expect, chunk_bytes) != 0)
		goto out;
	printf("ok\n");
	ret = 0;
out:
	kvr_xfer_free(&x);
	kvr_close(c);
	free(tokens);
	free(keys);
	free(sizes);
	free(expect);
	free(got);
	return ret;
}
