/* SPDX-License-Identifier: MIT */
/*
 * emit.h - the one output emitter of kvring's tools: one vocabulary of
 * keys, printed either as a single-line JSON object or as grep-friendly
 * "path=value" lines (STYLE.md 12). kvring-inspect, kvring-bench and
 * kvring-stress describe each object once through kvr_em_*() and get
 * valid, escaped JSON whatever their strings hold.
 *
 * This module owns escaping, nesting and separators, and writes either to
 * a FILE or into a caller's buffer. It does not choose keys (those are
 * each tool's contract, docs/inspect.md, docs/performance.md) and knows
 * nothing about kvring. The Prometheus format has its own rules and its
 * own file (tools/inspect/prom.c).
 */
#ifndef KVR_TOOLS_EMIT_H
#define KVR_TOOLS_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Deepest nesting kept apart; our output nests at most five levels, and
 * deeper nesting would only merge levels, never write out of bounds. */
#define KVR_EM_DEPTH 8

/*
 * One emitter per printed object, on the caller's stack; the fields are
 * the emitter's own. In JSON mode it writes one line; in text mode every
 * scalar becomes "<path>=<value>\n" where path joins the keys of the
 * enclosing objects with dots (channels.3.req_ring.head=128), so the two
 * modes share one vocabulary and text lines grep well.
 */
struct kvr_em {
	FILE *f;	 /* output; NULL: into buf */
	char *buf;	 /* kvr_em_init_buf(): the caller's buffer */
	size_t cap, len; /* its size, and bytes written (NUL excluded) */
	bool cut;	 /* buf: some output did not fit and was dropped */
	int ghost;	 /* buf: levels opened after the cut */
	bool json;
	int depth;
	bool comma[KVR_EM_DEPTH]; /* JSON: a member was written at depth */
	char close[KVR_EM_DEPTH]; /* JSON: '}' or ']' closing depth */
	char prefix[256];	  /* text: "channels.3.req_ring." */
};

/* Starts an object on @f; JSON mode opens the brace at once. */
void kvr_em_init(struct kvr_em *e, FILE *f, bool json);

/*
 * Starts an object in @buf (@cap bytes, at least 16), kept NUL-terminated.
 * A member that does not fit is dropped whole (e->cut says so), and room
 * for the closing brackets is always kept, so the text stays valid JSON.
 */
void kvr_em_init_buf(struct kvr_em *e, char *buf, size_t cap, bool json);

/*
 * Ends the object: JSON writes the closing brackets of every level still
 * open and a newline, so under --watch each frame is exactly one line. A
 * FILE is flushed, so a reader at the other end of a pipe sees whole
 * objects, never half of one.
 */
void kvr_em_finish(struct kvr_em *e);

/* Opens a nested object / array named @k (text: appends "k." to the path
 * prefix). */
void kvr_em_obj(struct kvr_em *e, const char *k);
void kvr_em_arr(struct kvr_em *e, const char *k);
/* An object element of an array: anonymous in JSON; text mode names it
 * by @idx so each line stays self-describing. */
void kvr_em_item(struct kvr_em *e, uint32_t idx);
/* Closes the innermost object or array. */
void kvr_em_end(struct kvr_em *e);

/*
 * Scalars: one member in JSON, one "path.k=value" line in text. A NULL @k
 * is an array element. Keys and string values are JSON-escaped: '"' and
 * '\\' get a backslash, control bytes and non-ASCII become \u00XX (each
 * byte of a UTF-8 sequence separately: lossy, but always valid JSON).
 * Text mode prints strings raw. Doubles that are not finite are null in
 * JSON (JSON has no NaN or infinity).
 */
void kvr_em_u64(struct kvr_em *e, const char *k, uint64_t v);
void kvr_em_i64(struct kvr_em *e, const char *k, int64_t v);
void kvr_em_bool(struct kvr_em *e, const char *k, bool v);
void kvr_em_str(struct kvr_em *e, const char *k, const char *v);
/* @decimals digits after the point ("%.*f"). */
void kvr_em_fixed(struct kvr_em *e, const char *k, double v, int decimals);
/* Four decimals: the inspector's ratios and rates, never exact counts. */
void kvr_em_dbl(struct kvr_em *e, const char *k, double v);
/* Six significant digits ("%.6g"): the bench's measurements. */
void kvr_em_g(struct kvr_em *e, const char *k, double v);

#endif /* KVR_TOOLS_EMIT_H */
