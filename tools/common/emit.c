/* SPDX-License-Identifier: MIT */
/*
 * emit.c - the output emitter: one vocabulary of keys, printed either as
 * a single-line JSON object or as grep-friendly "path=value" lines
 * (STYLE.md 12). Renderers (overview.c, list.c, dump.c, check.c) describe
 * their object once through kvr_em_*() and get both formats. This file
 * knows nothing about kvring: it does not choose keys, and it does not
 * clean strings from the segment (names.c does, before they get here);
 * it only escapes JSON strings, because paths from the command line may
 * hold anything. The Prometheus format has its own rules and its own
 * file (prom.c).
 */
#include <inttypes.h>
#include <string.h>

#include "emit.h"

/* Starts an object on @f; JSON mode opens the brace at once. */
void kvr_em_init(struct kvr_em *e, FILE *f, bool json)
{
	memset(e, 0, sizeof(*e));
	e->f = f;
	e->json = json;
	if (json)
		fputc('{', f);
}

/*
 * Ends the object. JSON objects end with a newline, so under --watch each
 * frame is exactly one line. Flushes, so a reader at the other end of a
 * pipe sees whole frames, never half of one.
 */
void kvr_em_finish(struct kvr_em *e)
{
	if (e->json)
		fputs("}\n", e->f);
	fflush(e->f);
}

/*
 * A JSON string literal. Control bytes and non-ASCII are escaped as
 * \u00XX: strings from the segment were already cleaned, but paths given
 * on the command line may hold anything. Escaping each byte of a UTF-8
 * sequence separately is lossy but keeps the output valid JSON.
 */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Writes the separator and key of the next member (JSON) or the path. A
 * NULL key is an array element: JSON writes no key for it. */
static void em_key(struct kvr_em *e, const char *k)
{
	if (e->json) {
		if (e->comma[e->depth])
			fputc(',', e->f);
		e->comma[e->depth] = true;
		if (k) {
			json_str(e->f, k);
			fputc(':', e->f);
		}
	} else {
		fprintf(e->f, "%s%s=", e->prefix, k ? k : "");
	}
}

/*
 * Opens a nested object or array named @k: JSON writes the key and the
 * bracket, text mode appends "k." to the path prefix. Depth is bounded by
 * KVR_EM_DEPTH; our output nests at most five levels, and deeper nesting
 * would only merge levels, never write out of bounds.
 */
static void em_push(struct kvr_em *e, const char *k, char open, char close)
{
	if (e->json) {
		em_key(e, k);
		fputc(open, e->f);
	} else {
		size_t n = strlen(e->prefix);

		snprintf(e->prefix + n, sizeof(e->prefix) - n, "%s.", k);
	}
	if (e->depth + 1 < KVR_EM_DEPTH)
		e->depth++;
	e->comma[e->depth] = false;
	e->close[e->depth] = close;
}

void kvr_em_obj(struct kvr_em *e, const char *k)
{
	em_push(e, k, '{', '}');
}

void kvr_em_arr(struct kvr_em *e, const char *k)
{
	em_push(e, k, '[', ']');
}

/*
 * An object element of an array. JSON elements are anonymous; text mode
 * names the element by @idx so that each line stays self-describing
 * (channels are named by their channel number, not their position among
 * the channels shown).
 */
void kvr_em_item(struct kvr_em *e, uint32_t idx)
{
	char k[16];

	if (e->json) {
		em_push(e, NULL, '{', '}');
		return;
	}
	snprintf(k, sizeof(k), "%" PRIu32, idx);
	em_push(e, k, '{', '}');
}

/* Closes the innermost object or array (text: drops its path component). */
void kvr_em_end(struct kvr_em *e)
{
	if (e->json)
		fputc(e->close[e->depth], e->f);
	if (e->depth > 0)
		e->depth--;
	if (!e->json) {
		/* Drop the last path component: back past "k." to the
		 * previous dot, or to the start. */
		size_t n = strlen(e->prefix);

		if (n > 0)
			n--;
		while (n > 0 && e->prefix[n - 1] != '.')
			n--;
		e->prefix[n] = '\0';
	}
}

/* Scalars: one member in JSON, one "path.k=value" line in text. */
void kvr_em_u64(struct kvr_em *e, const char *k, uint64_t v)
{
	em_key(e, k);
	fprintf(e->f, "%" PRIu64 "%s", v, e->json ? "" : "\n");
}

void kvr_em_i64(struct kvr_em *e, const char *k, int64_t v)
{
	em_key(e, k);
	fprintf(e->f, "%" PRId64 "%s", v, e->json ? "" : "\n");
}

/* Four decimals in both modes: ratios and rates, never exact counts. */
void kvr_em_dbl(struct kvr_em *e, const char *k, double v)
{
	em_key(e, k);
	fprintf(e->f, "%.4f%s", v, e->json ? "" : "\n");
}

void kvr_em_bool(struct kvr_em *e, const char *k, bool v)
{
	em_key(e, k);
	fprintf(e->f, "%s%s", v ? "true" : "false", e->json ? "" : "\n");
}

/* Text mode prints the string raw: strings from the segment were cleaned
 * by ins_copy_clean(), and the rest come from this program or argv. */
void kvr_em_str(struct kvr_em *e, const char *k, const char *v)
{
	em_key(e, k);
	if (e->json)
		json_str(e->f, v);
	else
		fprintf(e->f, "%s\n", v);
}
