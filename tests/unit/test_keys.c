/* SPDX-License-Identifier: MIT */
/*
 * test_keys.c - the chunk key derivation (lib/keys.c, <kvring/keys.h>) and
 * its committed test vectors (tests/data/key_vectors.txt, docs/keys.md).
 * Every vector is re-derived twice: with kvr_keys_from_tokens(), and with
 * a from-the-spec reimplementation below that hashes one contiguous buffer
 * with one-shot XXH3_128bits, so a bug in the library's streaming code or
 * in its byte encoding can't hide behind itself. Also checks the prefix
 * property and the namespace validation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <xxhash.h>

#include <kvring/keys.h>

TestSuite(keys, .timeout = 10);

/* ---- the spec, written independently of lib/keys.c ---- */

static void le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void le64(uint8_t *p, uint64_t v)
{
	le32(p, (uint32_t)v);
	le32(p + 4, (uint32_t)(v >> 32));
}

static struct kvr_key spec_ns(const struct kvr_ns_desc *ns)
{
	uint8_t b[96] = {0};
	const uint32_t f[8] = {
	    ns->layers,	 ns->kv_heads, ns->head_size,	 ns->dtype_bytes,
	    ns->tp_rank, ns->tp_size,  ns->chunk_tokens, 0};
	XXH128_hash_t h;

	memcpy(b, ns->model, strlen(ns->model));
	for (int i = 0; i < 8; i++)
		le32(b + 64 + 4 * i, f[i]);
	h = XXH3_128bits(b, sizeof(b));
	return (struct kvr_key){h.low64, h.high64};
}

static size_t spec_keys(const struct kvr_ns_desc *ns, const uint32_t *t,
			size_t n, struct kvr_key *out)
{
	size_t c = ns->chunk_tokens, nk = n / c;
	uint8_t *buf = malloc(16 + 4 * c);
	struct kvr_key prev = spec_ns(ns);

	cr_assert(buf);
	for (size_t i = 0; i < nk; i++) {
		XXH128_hash_t h;

		le64(buf, prev.lo);
		le64(buf + 8, prev.hi);
		for (size_t j = 0; j < c; j++)
			le32(buf + 16 + 4 * j, t[i * c + j]);
		h = XXH3_128bits(buf, 16 + 4 * c);
		prev = (struct kvr_key){h.low64, h.high64};
		out[i] = prev;
	}
	free(buf);
	return nk;
}

/* ---- the vector file ---- */

struct vcase {
	char name[64];
	struct kvr_ns_desc ns;
	struct kvr_key nskey;
	size_t ntok;
	uint32_t a, b;
	size_t nkeys;
	struct kvr_key keys[64];
};

static int load_cases(struct vcase *cs, int max)
{
	char path[512], line[512];
	int n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/data/key_vectors.txt",
		 KVR_SRC_DIR);
	f = fopen(path, "r");
	cr_assert(f, "open %s", path);
	while (fgets(line, sizeof(line), f)) {
		struct vcase *v = n >= 0 ? &cs[n] : NULL;
		unsigned long long lo, hi;
		unsigned idx;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (!strncmp(line, "case ", 5)) {
			cr_assert(n + 1 < max);
			v = &cs[++n];
			memset(v, 0, sizeof(*v));
			sscanf(line + 5, "%63s", v->name);
		} else if (!strncmp(line, "ns ", 3)) {
			cr_assert(v);
			cr_assert_eq(
			    sscanf(line,
				   "ns model=%63s layers=%u kv_heads=%u "
				   "head_size=%u dtype_bytes=%u "
				   "tp_rank=%u tp_size=%u chunk_tokens=%u",
				   v->ns.model, &v->ns.layers, &v->ns.kv_heads,
				   &v->ns.head_size, &v->ns.dtype_bytes,
				   &v->ns.tp_rank, &v->ns.tp_size,
				   &v->ns.chunk_tokens),
			    8, "bad ns line: %s", line);
		} else if (sscanf(line, "ns_key lo=%llx hi=%llx", &lo, &hi) ==
			   2) {
			v->nskey = (struct kvr_key){lo, hi};
		} else if (!strncmp(line, "tokens ", 7)) {
			cr_assert_eq(sscanf(line, "tokens n=%zu a=%u b=%u",
					    &v->ntok, &v->a, &v->b),
				     3);
		} else if (sscanf(line, "key %u lo=%llx hi=%llx", &idx, &lo,
				  &hi) == 3) {
			cr_assert_eq(idx, v->nkeys, "keys out of order");
			cr_assert(idx < 64);
			v->keys[v->nkeys++] = (struct kvr_key){lo, hi};
		}
	}
	fclose(f);
	return n + 1;
}

static uint32_t *make_tokens(const struct vcase *v)
{
	uint32_t *t = malloc(v->ntok * sizeof(*t) + 4);

	cr_assert(t);
	for (size_t j = 0; j < v->ntok; j++)
		t[j] = (uint32_t)((uint64_t)v->a * j + v->b);
	return t;
}

Test(keys, library_matches_vectors_when_derived_from_the_file)
{
	static struct vcase cs[16];
	int n = load_cases(cs, 16);

	cr_assert_geq(n, 5, "only %d cases in the vector file", n);
	for (int i = 0; i < n; i++) {
		struct vcase *v = &cs[i];
		struct kvr_key nk, got[64];
		uint32_t *t = make_tokens(v);
		long k;

		cr_assert_eq(kvr_ns_key(&v->ns, &nk), 0, "%s", v->name);
		cr_expect(nk.lo == v->nskey.lo && nk.hi == v->nskey.hi,
			  "%s: ns key %016llx%016llx", v->name,
			  (unsigned long long)nk.hi, (unsigned long long)nk.lo);
		k = kvr_keys_from_tokens(&v->ns, t, v->ntok, got, 64);
		cr_assert_eq(k, (long)v->nkeys, "%s: %ld keys, expected %zu",
			     v->name, k, v->nkeys);
		for (size_t j = 0; j < v->nkeys; j++)
			cr_expect(got[j].lo == v->keys[j].lo &&
				      got[j].hi == v->keys[j].hi,
				  "%s key %zu: got %016llx/%016llx", v->name, j,
				  (unsigned long long)got[j].lo,
				  (unsigned long long)got[j].hi);
		free(t);
	}
}

Test(keys, spec_reimplementation_matches_vectors_when_hashed_one_shot)
{
	static struct vcase cs[16];
	int n = load_cases(cs, 16);

	for (int i = 0; i < n; i++) {
		struct vcase *v = &cs[i];
		struct kvr_key nk = spec_ns(&v->ns), got[64];
		uint32_t *t = make_tokens(v);
		size_t k = spec_keys(&v->ns, t, v->ntok, got);

		cr_expect(nk.lo == v->nskey.lo && nk.hi == v->nskey.hi,
			  "%s: spec ns key differs", v->name);
		cr_assert_eq(k, v->nkeys, "%s", v->name);
		for (size_t j = 0; j < k; j++)
			cr_expect(got[j].lo == v->keys[j].lo &&
				      got[j].hi == v->keys[j].hi,
				  "%s key %zu differs from the spec", v->name,
				  j);
		free(t);
	}
}

static struct kvr_ns_desc demo_ns(uint32_t chunk)
{
	struct kvr_ns_desc ns = {.layers = 4,
				 .kv_heads = 8,
				 .head_size = 128,
				 .dtype_bytes = 2,
				 .tp_size = 1,
				 .chunk_tokens = chunk};

	strcpy(ns.model, "m");
	return ns;
}

Test(keys, prefix_of_tokens_gives_prefix_of_keys_when_truncated)
{
	struct kvr_ns_desc ns = demo_ns(8);
	uint32_t t[80];
	struct kvr_key full[10], part[10];

	for (int i = 0; i < 80; i++)
		t[i] = (uint32_t)(i * 7 + 3);
	cr_assert_eq(kvr_keys_from_tokens(&ns, t, 80, full, 10), 10);
	/* 43 tokens: 5 full chunks, the partial sixth gets no key. */
	cr_assert_eq(kvr_keys_from_tokens(&ns, t, 43, part, 10), 5);
	cr_expect_eq(memcmp(full, part, 5 * sizeof(full[0])), 0);
}

Test(keys, same_chunk_gets_other_key_when_prefix_differs)
{
	struct kvr_ns_desc ns = demo_ns(4);
	uint32_t a[8] = {1, 2, 3, 4, 9, 9, 9, 9};
	uint32_t b[8] = {1, 2, 3, 5, 9, 9, 9, 9};
	struct kvr_key ka[2], kb[2];

	kvr_keys_from_tokens(&ns, a, 8, ka, 2);
	kvr_keys_from_tokens(&ns, b, 8, kb, 2);
	cr_expect(ka[1].lo != kb[1].lo || ka[1].hi != kb[1].hi);
}

Test(keys, namespace_changes_every_key_when_tp_rank_differs)
{
	struct kvr_ns_desc n0 = demo_ns(4), n1 = demo_ns(4);
	uint32_t t[4] = {1, 2, 3, 4};
	struct kvr_key k0, k1;

	n1.tp_size = 2;
	n1.tp_rank = 1;
	kvr_keys_from_tokens(&n0, t, 4, &k0, 1);
	kvr_keys_from_tokens(&n1, t, 4, &k1, 1);
	cr_expect(k0.lo != k1.lo || k0.hi != k1.hi);
}

Test(keys, returns_einval_when_namespace_is_bad)
{
	struct kvr_ns_desc ns = demo_ns(4);
	struct kvr_key k;
	uint32_t t[4] = {0};

	ns.chunk_tokens = 0;
	cr_expect_eq(kvr_keys_from_tokens(&ns, t, 4, &k, 1), -EINVAL);
	ns = demo_ns(4);
	ns.model[0] = '\0';
	cr_expect_eq(kvr_ns_key(&ns, &k), -EINVAL);
	ns = demo_ns(4);
	memset(ns.model, 'x', sizeof(ns.model));
	cr_expect_eq(kvr_ns_key(&ns, &k), -EINVAL);
	ns = demo_ns(4);
	ns.reserved = 1;
	cr_expect_eq(kvr_ns_key(&ns, &k), -EINVAL);
}

Test(keys, returns_zero_keys_when_fewer_tokens_than_a_chunk)
{
	struct kvr_ns_desc ns = demo_ns(16);
	uint32_t t[15] = {0};
	struct kvr_key k;

	cr_expect_eq(kvr_keys_from_tokens(&ns, t, 15, &k, 1), 0);
	cr_expect_eq(kvr_keys_from_tokens(&ns, NULL, 0, &k, 1), 0);
}
