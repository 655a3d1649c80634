/* SPDX-License-Identifier: MIT */
/*
 * emit.h - the tools' output emitter, moved here from tools/inspect/ so
 * that every tool can print through it: one vocabulary of keys, printed
 * either as a single-line JSON object or as grep-friendly "path=value"
 * lines (STYLE.md 12). It owns escaping and nesting, not the keys.
 */
#ifndef KVR_TOOLS_EMIT_H
#define KVR_TOOLS_EMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define KVR_EM_DEPTH 8

/*
 * One emitter per printed object, on the caller's stack. In JSON mode it
 * writes one line; in text mode every scalar becomes "<path>=<value>\n"
 * where path joins the keys of the enclosing objects with dots
 * (channels.3.req_ring.head=128), so the two modes share one vocabulary
 * and text lines grep well. The fields are the emitter's own.
 */
struct kvr_em {
	FILE *f;
	bool json;
	int depth;
	bool comma[KVR_EM_DEPTH]; /* JSON: a member was written at depth */
	char close[KVR_EM_DEPTH]; /* JSON: '}' or ']' closing depth */
	char prefix[256];	  /* text: "channels.3.req_ring." */
};

void kvr_em_init(struct kvr_em *e, FILE *f, bool json);
void kvr_em_finish(struct kvr_em *e);
void kvr_em_obj(struct kvr_em *e, const char *k);
void kvr_em_arr(struct kvr_em *e, const char *k);
void kvr_em_item(struct kvr_em *e, uint32_t idx);
void kvr_em_end(struct kvr_em *e);
void kvr_em_u64(struct kvr_em *e, const char *k, uint64_t v);
void kvr_em_i64(struct kvr_em *e, const char *k, int64_t v);
void kvr_em_dbl(struct kvr_em *e, const char *k, double v);
void kvr_em_bool(struct kvr_em *e, const char *k, bool v);
void kvr_em_str(struct kvr_em *e, const char *k, const char *v);

#endif /* KVR_TOOLS_EMIT_H */
