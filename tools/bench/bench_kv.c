/* SPDX-License-Identifier: MIT */
/*
 * bench_kv.c - the kv scenario of kvring-bench: paged-KV gather (engine
 * blocks -> chunk slots) and scatter (chunk slots -> engine blocks) with
 * libkvring's kvr_kv_gather/kvr_kv_scatter, for a Llama-3-8B-shaped cache
 * by default (32 layers, 8 kv heads, 128 dims, fp16, block_size 16,
 * 256-token chunks), beside two baselines measured in the same run:
 *   memcpy  the same bytes copied as one contiguous run (the ceiling);
 *   torch   the same copy with torch's own indexing (index_select + copy_
 *           into the slot view; index_copy_ back), measured by
 *           tools/bench_kv.py --no-e2e, which this program runs with the
 *           same shape when /usr/bin/python3 imports torch: there the
 *           same C copy (through kvring.kv) and torch alternate run by
 *           run in one process, and ratio_to_torch is that run's.
 * JSON lines carry ratio_to_memcpy (the median of same-run pairs) and
 * ratio_to_torch (null without torch). Block ids are a random permutation of a
 * cache twice the size needed, so blocks are scattered as in a busy engine. NHD
 * and HND blocks are measured; each figure is the median of --iters runs,
 * subjects interleaved run by run so that a noisy neighbour hits all of them.
 *
 * With checksums (the cells docs/tensors.md's checksum section quotes):
 *   gather_sum     kvr_kv_gather_sum, each chunk's XXH3-64 computed while
 *                  it is gathered;
 *   scatter_check  kvr_kv_scatter_check, each chunk checked while it is
 *                  scattered;
 * each beside its two-pass form (gather then kvr_sum64 of every chunk;
 * kvr_sum64 of every chunk then scatter) and with ratio_to_plain, the
 * median same-run ratio to the plain gather (scatter) of that run.
 *
 * kvring.sglang (the SGLang HiCache backend):
 *   sglang_set     batch_set_v1 of 64 pages of a page_first host pool,
 *   sglang_get     batch_get_v1 of them into other pages,
 * measured by tools/bench_sglang.py against a kvringd it starts, for
 * 256 KiB and 2 MiB pages at this shape (2 and 16 tokens), in pages/s
 * and GB/s beside a memcpy of the same bytes in the same run
 * (ratio_to_memcpy); --no-sglang skips them, and without python3 and
 * torch they are reported as not run.
 *
 * The data is checked: every gathered byte is compared with the cache
 * once, a scatter into a second cache is gathered back and compared, the
 * gather's sums are compared with kvr_sum64 of the chunks, and the check
 * must pass every chunk. Wrong data exits 1; slow figures never do.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <kvring/kv.h>
#include <kvring/sum.h>

#include "bench_common.h"

#ifndef KVR_SRC_DIR
#define KVR_SRC_DIR "."
#endif

#define MAX_ITERS 101

struct kvb {
	uint32_t layers, heads, head_size, block_size, chunk_tokens, chunks;
	uint32_t iters;
	bool json, no_torch, no_sglang, hnd;
	int cpu;
	uint32_t nblocks, num_blocks; /* used, in the cache */
	uint64_t chunk_bytes, total;
	uint8_t *layer_mem[2][256]; /* two caches (gather src, scatter dst) */
	void *base[2][512];
	struct kvr_kv_cache kv[2];
	uint32_t *ids;
	uint8_t *chunks_mem, *check_mem, *flat_src;
	void *chunk_ptr[64], *check_ptr[64];
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvring-bench kv [options]\n"
		"  paged-KV gather/scatter (kvr_kv_gather/kvr_kv_scatter) vs "
		"memcpy and torch\n"
		"  --layers N        model layers (32)\n"
		"  --kv-heads N      kv heads per rank (8)\n"
		"  --head-size N     dims per head, fp16 (128)\n"
		"  --block-size N    tokens per engine block (16)\n"
		"  --chunk-tokens N  tokens per chunk, a multiple of the block "
		"size (256)\n"
		"  --chunks N        chunks per copy, 1..64 (4)\n"
		"  --iters N         runs per figure, median reported (9)\n"
		"  --cpu N           pin to CPU N (-1: no pinning)\n"
		"  --no-torch        skip the torch baseline (python3)\n"
		"  --no-sglang       skip the sglang_set/sglang_get rows "
		"(python3)\n"
		"  --json            JSON lines instead of a table\n");
}

static int parse(int argc, char **argv, struct kvb *b)
{
	static const struct option longopts[] = {
	    {"layers", required_argument, NULL, 'l'},
	    {"kv-heads", required_argument, NULL, 'k'},
	    {"head-size", required_argument, NULL, 'd'},
	    {"block-size", required_argument, NULL, 'b'},
	    {"chunk-tokens", required_argument, NULL, 't'},
	    {"chunks", required_argument, NULL, 'c'},
	    {"iters", required_argument, NULL, 'i'},
	    {"cpu", required_argument, NULL, 'p'},
	    {"no-torch", no_argument, NULL, 'n'},
	    {"no-sglang", no_argument, NULL, 's'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t v;
	int ch;

	*b = (struct kvb){.layers = 32,
			  .heads = 8,
			  .head_size = 128,
			  .block_size = 16,
			  .chunk_tokens = 256,
			  .chunks = 4,
			  .iters = 9,
			  .cpu = -1};
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		uint32_t *dst = NULL;
		uint64_t lo = 1, hi = 1u << 20;

		switch (ch) {
		case 'l':
			dst = &b->layers, hi = 256;
			break;
		case 'k':
			dst = &b->heads, hi = 256;
			break;
		case 'd':
			dst = &b->head_size, hi = 4096;
			break;
		case 'b':
			dst = &b->block_size, hi = 4096;
			break;
		case 't':
			dst = &b->chunk_tokens, hi = 1u << 16;
			break;
		case 'c':
			dst = &b->chunks, hi = 64;
			break;
		case 'i':
			dst = &b->iters, hi = MAX_ITERS;
			break;
		case 'p':
			if (!bench_parse_cpu(optarg, &b->cpu)) {
				fprintf(stderr,
					"kvring-bench kv: bad --cpu "
					"'%s'\n",
					optarg);
				return 2;
			}
			continue;
		case 'n':
			b->no_torch = true;
			continue;
		case 's':
			b->no_sglang = true;
			continue;
		case 'j':
			b->json = true;
			continue;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
		if (!bench_parse_u64(optarg, lo, hi, &v)) {
			fprintf(stderr,
				"kvring-bench kv: bad value '%s' (expected "
				"%" PRIu64 "..%" PRIu64 ")\n",
				optarg, lo, hi);
			return 2;
		}
		*dst = (uint32_t)v;
	}
	if (optind < argc) {
		fprintf(stderr, "kvring-bench kv: unexpected '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	if (b->chunk_tokens % b->block_size) {
		fprintf(stderr,
			"kvring-bench kv: --block-size %u does not divide "
			"--chunk-tokens %u\n",
			b->block_size, b->chunk_tokens);
		return 2;
	}
	return 0;
}

/* Builds both caches in the layout of b->hnd, touching every page. */
static int setup(struct kvb *b)
{
	uint64_t row = (uint64_t)b->heads * b->head_size * 2;
	uint64_t blk = row * b->block_size;
	uint64_t layer = 2 * blk * b->num_blocks;

	for (int c = 0; c < 2; c++) {
		for (uint32_t l = 0; l < b->layers; l++) {
			uint8_t *m = b->layer_mem[c][l];

			if (!m) {
				m = aligned_alloc(4096, layer);
				if (!m)
					return -ENOMEM;
				b->layer_mem[c][l] = m;
			}
			/* A pattern that differs per byte position. */
			for (uint64_t i = 0; i < layer; i += 8) {
				uint64_t w =
				    c ? 0
				      : (i + l * 0x9e3779b97f4a7c15ull) *
					    0xff51afd7ed558ccdull;

				memcpy(m + i, &w, 8);
			}
			b->base[c][2 * l] = m;
			b->base[c][2 * l + 1] = m + blk * b->num_blocks;
		}
		b->kv[c] = (struct kvr_kv_cache){
		    .layers = b->layers,
		    .nkv = 2,
		    .heads = b->heads,
		    .head_bytes = b->head_size * 2,
		    .elem_bytes = 2,
		    .block_size = b->block_size,
		    .num_blocks = b->num_blocks,
		    .chunk_tokens = b->chunk_tokens,
		    .block_stride = blk,
		    .token_stride = b->hnd ? (uint64_t)b->head_size * 2 : row,
		    .head_stride =
			b->hnd ? (uint64_t)b->block_size * b->head_size * 2
			       : (uint64_t)b->head_size * 2,
		    .layer_bytes = blk * b->num_blocks,
		    .base = b->base[c],
		};
	}
	return 0;
}

static double gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0;
}

/* What tools/bench_kv.py measured for one direction, in one process,
 * kvring.kv (this library's copy, through ctypes) interleaved run by run
 * with torch's indexing: torch's GB/s and the median same-run ratio. */
struct torch_fig {
	double gbps, ratio;
};

static double json_num(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(line, pat);
	return p ? strtod(p + strlen(pat), NULL) : 0;
}

/* One python3 run of tools/bench_kv.py --no-e2e for this shape; leaves
 * the figures 0 when python3 or torch is missing. */
static void torch_baseline(const struct kvb *b, struct torch_fig *g,
			   struct torch_fig *s)
{
	char cmd[1024], line[2048];
	FILE *p;

	*g = *s = (struct torch_fig){0, 0};
	if (b->no_torch)
		return;
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 '%s/tools/bench_kv.py' --no-e2e --json "
		 "--layers %u --kv-heads %u --head-size %u --block-size %u "
		 "--chunk-tokens %u --chunks %u --iters %u%s 2>/dev/null",
		 KVR_SRC_DIR, b->layers, b->heads, b->head_size, b->block_size,
		 b->chunk_tokens, b->chunks, b->iters, b->hnd ? " --hnd" : "");
	p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p)) {
		struct torch_fig *dst = NULL;

		if (strstr(line, "\"subject\":\"gather\""))
			dst = g;
		else if (strstr(line, "\"subject\":\"scatter\""))
			dst = s;
		if (dst) {
			dst->gbps = json_num(line, "torch_gbps");
			dst->ratio = json_num(line, "ratio_to_torch");
		}
	}
	pclose(p);
}

/* Compares chunk c of the gathered buffer with the cache, byte for byte. */
static bool verify_gather(const struct kvb *b, uint8_t *const *chunks)
{
	const struct kvr_kv_cache *kv = &b->kv[0];
	uint32_t bpc = b->chunk_tokens / b->block_size;
	uint64_t hb = kv->head_bytes;

	for (uint32_t c = 0; c < b->chunks; c++) {
		const uint8_t *p = chunks[c];

		for (uint32_t k = 0; k < 2; k++)
			for (uint32_t l = 0; l < b->layers; l++)
				for (uint32_t t = 0; t < b->chunk_tokens; t++)
					for (uint32_t h = 0; h < b->heads;
					     h++, p += hb) {
						const uint8_t *e =
						    (const uint8_t *)
							kv->base[2 * l + k] +
						    b->ids[c * bpc +
							   t / b->block_size] *
							kv->block_stride +
						    (t % b->block_size) *
							kv->token_stride +
						    h * kv->head_stride;

						if (memcmp(p, e, hb)) {
							fprintf(
							    stderr,
							    "kvring-bench kv: "
							    "gathered chunk %u "
							    "kv %u layer %u "
							    "token %u head %u "
							    "differs from the "
							    "cache\n",
							    c, k, l, t, h);
							return false;
						}
					}
	}
	return true;
}

/* The checksum cells of one layout: the summing copies, their two-pass
 * forms and the same run's plain copies, interleaved run by run. */
static int run_sums(struct kvb *b, const char *lay)
{
	uint64_t ns[6][MAX_ITERS], sums[64], t0;
	double r[6][MAX_ITERS], gb[6][MAX_ITERS];
	static const char *const names[6] = {
	    "gather",  "gather_sum",	"gather_then_sum",
	    "scatter", "scatter_check", "sum_then_scatter"};
	char err[256] = "";
	long got;

	if (kvr_kv_gather_sum(&b->kv[0], b->ids, b->nblocks, b->chunk_ptr,
			      b->chunks, b->chunk_bytes, sums, err,
			      sizeof(err)) < 0) {
		fprintf(stderr, "kvring-bench kv: %s\n", err);
		return BENCH_EXIT_ERR;
	}
	for (uint32_t c = 0; c < b->chunks; c++)
		if (sums[c] != kvr_sum64(b->chunk_ptr[c], b->chunk_bytes)) {
			fprintf(stderr,
				"kvring-bench kv: gather_sum of chunk %u is "
				"not the chunk's XXH3-64\n",
				c);
			return BENCH_EXIT_ERR;
		}
	for (uint32_t i = 0; i < b->iters; i++) {
		t0 = kvr_clock_now_ns();
		kvr_kv_gather(&b->kv[0], b->ids, b->nblocks, b->chunk_ptr,
			      b->chunks, b->chunk_bytes, NULL, 0);
		ns[0][i] = kvr_clock_now_ns() - t0;
		t0 = kvr_clock_now_ns();
		kvr_kv_gather_sum(&b->kv[0], b->ids, b->nblocks, b->chunk_ptr,
				  b->chunks, b->chunk_bytes, sums, NULL, 0);
		ns[1][i] = kvr_clock_now_ns() - t0;
		t0 = kvr_clock_now_ns();
		kvr_kv_gather(&b->kv[0], b->ids, b->nblocks, b->chunk_ptr,
			      b->chunks, b->chunk_bytes, NULL, 0);
		for (uint32_t c = 0; c < b->chunks; c++)
			sums[c] = kvr_sum64(b->chunk_ptr[c], b->chunk_bytes);
		ns[2][i] = kvr_clock_now_ns() - t0;
		t0 = kvr_clock_now_ns();
		kvr_kv_scatter(&b->kv[1], b->ids, b->nblocks,
			       (const void *const *)b->chunk_ptr, b->chunks,
			       b->chunk_bytes, 0, NULL, 0);
		ns[3][i] = kvr_clock_now_ns() - t0;
		t0 = kvr_clock_now_ns();
		got = kvr_kv_scatter_check(&b->kv[1], b->ids, b->nblocks,
					   (const void *const *)b->chunk_ptr,
					   b->chunks, b->chunk_bytes, 0, sums,
					   NULL, 0);
		ns[4][i] = kvr_clock_now_ns() - t0;
		if (got != (long)b->chunks) {
			fprintf(stderr,
				"kvring-bench kv: scatter_check passed %ld of "
				"%u good chunks\n",
				got, b->chunks);
			return BENCH_EXIT_ERR;
		}
		t0 = kvr_clock_now_ns();
		for (uint32_t c = 0; c < b->chunks; c++)
			if (kvr_sum64(b->chunk_ptr[c], b->chunk_bytes) !=
			    sums[c])
				return BENCH_EXIT_ERR;
		kvr_kv_scatter(&b->kv[1], b->ids, b->nblocks,
			       (const void *const *)b->chunk_ptr, b->chunks,
			       b->chunk_bytes, 0, NULL, 0);
		ns[5][i] = kvr_clock_now_ns() - t0;
		for (int k = 0; k < 6; k++) {
			uint64_t plain = ns[k < 3 ? 0 : 3][i];

			gb[k][i] = gbps(b->total, ns[k][i]);
			/* Same-run pairs: a noisy neighbour hits both. */
			r[k][i] =
			    ns[k][i] ? (double)plain / (double)ns[k][i] : 0;
		}
	}
	for (int k = 0; k < 6; k++) {
		double g = bench_median_f64(gb[k], b->iters);
		double ratio = bench_median_f64(r[k], b->iters);

		bench_sort_u64(ns[k], b->iters);
		if (k == 0 || k == 3)
			continue; /* the plain rows are printed above */
		if (b->json) {
			struct bench_json j;

			bench_json_begin(&j, "kv", names[k]);
			bench_json_str(&j, "layout", lay);
			bench_json_str(&j, "dtype", "fp16");
			bench_json_u64(&j, "chunks", b->chunks);
			bench_json_u64(&j, "bytes", b->total);
			bench_json_f64(&j, "gbps", g);
			bench_json_f64(
			    &j, "p50_ms",
			    (double)bench_percentile(ns[k], b->iters, 50) /
				1e6);
			bench_json_f64(
			    &j, "p99_ms",
			    (double)bench_percentile(ns[k], b->iters, 99) /
				1e6);
			bench_json_str(&j, "plain", names[k < 3 ? 0 : 3]);
			bench_json_f64(&j, "ratio_to_plain", ratio);
			bench_json_print(&j, stdout);
		} else {
			printf("  %-16s %6.2f GB/s  %.2fx plain %s\n", names[k],
			       g, ratio, names[k < 3 ? 0 : 3]);
		}
	}
	return BENCH_EXIT_OK;
}

/* Warm up: one gather, scatter and gather back, every byte checked.
 * 0 or -1 (said on stderr). */
static int warm_check(struct kvb *b)
{
	char err[256];

	if (kvr_kv_gather(&b->kv[0], b->ids, b->nblocks, b->chunk_ptr,
			  b->chunks, b->chunk_bytes, err, sizeof(err)) < 0 ||
	    kvr_kv_scatter(&b->kv[1], b->ids, b->nblocks,
			   (const void *const *)b->chunk_ptr, b->chunks,
			   b->chunk_bytes, 0, err, sizeof(err)) < 0 ||
	    kvr_kv_gather(&b->kv[1], b->ids, b->nblocks, b->check_ptr,
			  b->chunks, b->chunk_bytes, err, sizeof(err)) < 0) {
		fprintf(stderr, "kvring-bench kv: %s\n", err);
		return -1;
	}
	if (!verify_gather(b, (uint8_t *const *)b->chunk_ptr))
		return -1;
	if (memcmp(b->chunks_mem, b->check_mem, b->total)) {
		fprintf(stderr, "kvring-bench kv: scatter then gather did not "
				"give the chunks back\n");
		return -1;
	}
	return 0;
}

static int run_layout(struct kvb *b)
{
	uint64_t g_ns[MAX_ITERS], s_ns[MAX_ITERS], m_ns[MAX_ITERS];
	double g[MAX_ITERS], s[MAX_ITERS], m[MAX_ITERS];
	double gr[MAX_ITERS], sr[MAX_ITERS], gm, sm, mm, grm, srm;
	struct torch_fig tg, ts;
	int rc;

	rc = setup(b);
	if (rc < 0) {
		fprintf(stderr, "kvring-bench kv: %s\n", strerror(-rc));
		return BENCH_EXIT_ERR;
	}
	if (warm_check(b) < 0)
		return BENCH_EXIT_ERR;
	for (uint32_t i = 0; i < b->iters; i++) {
		uint64_t t0 = kvr_clock_now_ns();

		kvr_kv_gather(&b->kv[0], b->ids, b->nblocks, b->chunk_ptr,
			      b->chunks, b->chunk_bytes, NULL, 0);
		g_ns[i] = kvr_clock_now_ns() - t0;
		t0 = kvr_clock_now_ns();
		kvr_kv_scatter(&b->kv[1], b->ids, b->nblocks,
			       (const void *const *)b->chunk_ptr, b->chunks,
			       b->chunk_bytes, 0, NULL, 0);
		s_ns[i] = kvr_clock_now_ns() - t0;
		t0 = kvr_clock_now_ns();
		memcpy(b->chunks_mem, b->flat_src, b->total);
		m_ns[i] = kvr_clock_now_ns() - t0;
		g[i] = gbps(b->total, g_ns[i]);
		s[i] = gbps(b->total, s_ns[i]);
		m[i] = gbps(b->total, m_ns[i]);
		/* Same-run pairs: a noisy neighbour hits both sides. */
		gr[i] = g_ns[i] ? (double)m_ns[i] / (double)g_ns[i] : 0;
		sr[i] = s_ns[i] ? (double)m_ns[i] / (double)s_ns[i] : 0;
	}
	gm = bench_median_f64(g, b->iters);
	sm = bench_median_f64(s, b->iters);
	mm = bench_median_f64(m, b->iters);
	grm = bench_median_f64(gr, b->iters);
	srm = bench_median_f64(sr, b->iters);
	bench_sort_u64(g_ns, b->iters);
	bench_sort_u64(s_ns, b->iters);
	torch_baseline(b, &tg, &ts);

	const char *lay = b->hnd ? "hnd" : "nhd";
	const struct {
		const char *subj;
		double gbps, ratio;
		struct torch_fig t;
		const uint64_t *ns;
	} rows[] = {{"gather", gm, grm, tg, g_ns},
		    {"scatter", sm, srm, ts, s_ns}};

	if (!b->json)
		printf("kv %s: %u layers x %u heads x %u dims fp16, block %u, "
		       "chunk %u tokens, %u chunks = %.1f MiB per copy\n"
		       "  memcpy (one contiguous run)  %6.2f GB/s\n",
		       lay, b->layers, b->heads, b->head_size, b->block_size,
		       b->chunk_tokens, b->chunks, (double)b->total / (1 << 20),
		       mm);
	for (unsigned r = 0; r < 2; r++) {
		if (b->json) {
			struct bench_json j;

			bench_json_begin(&j, "kv", rows[r].subj);
			bench_json_str(&j, "layout", lay);
			bench_json_str(&j, "dtype", "fp16");
			bench_json_u64(&j, "layers", b->layers);
			bench_json_u64(&j, "kv_heads", b->heads);
			bench_json_u64(&j, "head_size", b->head_size);
			bench_json_u64(&j, "block_size", b->block_size);
			bench_json_u64(&j, "chunk_tokens", b->chunk_tokens);
			bench_json_u64(&j, "chunks", b->chunks);
			bench_json_u64(&j, "bytes", b->total);
			bench_json_f64(&j, "gbps", rows[r].gbps);
			bench_json_f64(
			    &j, "p50_ms",
			    (double)bench_percentile(rows[r].ns, b->iters, 50) /
				1e6);
			bench_json_f64(
			    &j, "p99_ms",
			    (double)bench_percentile(rows[r].ns, b->iters, 99) /
				1e6);
			bench_json_f64(&j, "memcpy_gbps", mm);
			bench_json_f64(&j, "ratio_to_memcpy", rows[r].ratio);
			if (rows[r].t.ratio > 0) {
				/* From tools/bench_kv.py: the same C copy
				 * through kvring.kv, interleaved with torch
				 * in one process (the ratio is its own). */
				bench_json_str(&j, "torch_from", "bench_kv.py");
				bench_json_f64(&j, "torch_gbps",
					       rows[r].t.gbps);
				bench_json_f64(&j, "ratio_to_torch",
					       rows[r].t.ratio);
			} else {
				/* No python3/torch: null, not invented. */
				bench_json_f64(&j, "torch_gbps", NAN);
				bench_json_f64(&j, "ratio_to_torch", NAN);
			}
			bench_json_print(&j, stdout);
		} else {
			printf("  %-7s (kvr_kv_%s)       %6.2f GB/s  %.2fx "
			       "memcpy",
			       rows[r].subj, rows[r].subj, rows[r].gbps,
			       rows[r].ratio);
			if (rows[r].t.ratio > 0)
				printf(
				    "  %.2fx torch (%.2f GB/s, bench_kv.py)\n",
				    rows[r].t.ratio, rows[r].t.gbps);
			else
				printf("  (torch baseline not run)\n");
		}
	}
	return run_sums(b, lay);
}

/*
 * The sglang_set and sglang_get rows: one python3 run of
 * tools/bench_sglang.py at this shape, its JSON lines passed through
 * (--json) or shown as a table. It exits 77 when torch is missing (the
 * rows are then reported as not run) and 1 on wrong data.
 */
static int sglang_rows(const struct kvb *b)
{
	char cmd[1024], line[2048];
	FILE *p;
	int st;

	if (b->no_sglang)
		return BENCH_EXIT_OK;
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 '%s/tools/bench_sglang.py' --json "
		 "--layers %u --kv-heads %u --head-size %u --iters %u",
		 KVR_SRC_DIR, b->layers, b->heads, b->head_size,
		 b->iters < 5 ? 5 : b->iters);
	fflush(stdout);
	p = popen(cmd, "r");
	if (!p) {
		fprintf(stderr, "kvring-bench kv: cannot run python3 for the "
				"sglang rows\n");
		return BENCH_EXIT_OK;
	}
	if (!b->json)
		printf("kvring.sglang (tools/bench_sglang.py, page_first host "
		       "pool, 64 pages):\n");
	while (fgets(line, sizeof(line), p)) {
		if (b->json) {
			fputs(line, stdout);
			continue;
		}
		if (!strstr(line, "\"subject\":\"sglang_"))
			continue;
		printf("  %-10s %5.0f KiB pages  %8.0f pages/s  %6.2f GB/s  "
		       "%.2fx memcpy (%.2f GB/s)\n",
		       strstr(line, "sglang_set") ? "sglang_set" : "sglang_get",
		       json_num(line, "page_bytes") / 1024,
		       json_num(line, "pages_s"), json_num(line, "gbps"),
		       json_num(line, "ratio_to_memcpy"),
		       json_num(line, "memcpy_gbps"));
	}
	st = pclose(p);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		if (!b->json)
			printf("  (not run: /usr/bin/python3 cannot import "
			       "torch)\n");
		return BENCH_EXIT_OK;
	}
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr,
			"kvring-bench kv: the sglang rows failed (wrong "
			"data, or kvringd could not start)\n");
		return BENCH_EXIT_ERR;
	}
	return BENCH_EXIT_OK;
}

int bench_kv_main(int argc, char **argv);

int bench_kv_main(int argc, char **argv)
{
	struct kvb b;
	uint32_t bpc;
	int rc = parse(argc, argv, &b), worst = BENCH_EXIT_OK;

	if (rc)
		return rc == 1 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	bench_clock_init();
	if (bench_pin_cpu(b.cpu) < 0)
		fprintf(stderr, "kvring-bench kv: cannot pin to CPU %d\n",
			b.cpu);
	bpc = b.chunk_tokens / b.block_size;
	b.nblocks = b.chunks * bpc;
	b.num_blocks = 2 * b.nblocks;
	b.chunk_bytes =
	    2ull * b.layers * b.chunk_tokens * b.heads * b.head_size * 2;
	b.total = b.chunk_bytes * b.chunks;
	b.ids = malloc(b.nblocks * sizeof(*b.ids));
	/* The pool side is a shared mapping, pre-touched, like the pool. */
	b.chunks_mem = bench_shm_map(b.total);
	b.check_mem = bench_shm_map(b.total);
	b.flat_src = bench_shm_map(b.total);
	if (!b.ids || !b.chunks_mem || !b.check_mem || !b.flat_src) {
		fprintf(stderr, "kvring-bench kv: out of memory for %.0f MiB\n",
			(double)b.total * 3 / (1 << 20));
		return BENCH_EXIT_ERR;
	}
	memset(b.flat_src, 0x5a, b.total);
	for (uint32_t c = 0; c < b.chunks; c++) {
		b.chunk_ptr[c] = b.chunks_mem + c * b.chunk_bytes;
		b.check_ptr[c] = b.check_mem + c * b.chunk_bytes;
	}
	/* A random permutation of the cache's blocks, first nblocks used. */
	{
		uint32_t *perm = malloc(b.num_blocks * sizeof(*perm));
		uint64_t x = 0x2545f4914f6cdd1dull;

		if (!perm)
			return BENCH_EXIT_ERR;
		for (uint32_t i = 0; i < b.num_blocks; i++)
			perm[i] = i;
		for (uint32_t i = b.num_blocks - 1; i > 0; i--) {
			uint32_t j, t;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			j = (uint32_t)(x % (i + 1));
			t = perm[i], perm[i] = perm[j], perm[j] = t;
		}
		memcpy(b.ids, perm, b.nblocks * sizeof(*b.ids));
		free(perm);
	}
	for (int hnd = 0; hnd < 2; hnd++) {
		b.hnd = hnd;
		rc = run_layout(&b);
		if (rc > worst)
			worst = rc;
	}
	rc = sglang_rows(&b);
	if (rc > worst)
		worst = rc;
	for (int c = 0; c < 2; c++)
		for (uint32_t l = 0; l < b.layers; l++)
			free(b.layer_mem[c][l]);
	bench_shm_unmap(b.chunks_mem, b.total);
	bench_shm_unmap(b.check_mem, b.total);
	bench_shm_unmap(b.flat_src, b.total);
	free(b.ids);
	return worst;
}
