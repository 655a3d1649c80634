/* SPDX-License-Identifier: MIT */
/*
 * emit.c - the tools' one output emitter (emit.h): JSON objects on one
 * line, or "path=value" text lines, written to a FILE or into a caller's
 * buffer. Renderers describe their object once through kvr_em_*() and get
 * both formats. This file knows nothing about kvring: it does not choose
 * keys, and it does not clean strings from the segment (the inspector's
 * names.c does, before they get here); it escapes every JSON key and
 * string, because paths from the command line, errno names and failure
 * texts may hold anything.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "emit.h"

/*
 * Bytes a buffer must keep free after the current text: one closing
 * bracket per open level (the root's included) and the final newline.
 */
static size_t reserve(const struct kvr_em *e)
{
	return e->json ? (size_t)e->depth + 2 : 1;
}

/*
 * Formatted output. Into a buffer, a piece that would eat into the
 * reserve sets cut and is not written; after that nothing more is (the
 * members that fitted stay whole, see member_end()).
 */
static void out(struct kvr_em *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void out(struct kvr_em *e, const char *fmt, ...)
{
	va_list ap;
	size_t avail;
	int n;

	va_start(ap, fmt);
	if (e->f) {
		vfprintf(e->f, fmt, ap);
		va_end(ap);
		return;
	}
	if (e->cut) {
		va_end(ap);
		return;
	}
	avail = e->cap - e->len; /* NUL included */
	n = vsnprintf(e->buf + e->len, avail, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + reserve(e) >= avail) {
		e->cut = true;
		e->buf[e->len] = '\0';
		return;
	}
	e->len += (size_t)n;
}

static void outc(struct kvr_em *e, char c)
{
	if (e->f)
		fputc(c, e->f);
	else
		out(e, "%c", c);
}

/* Writes that must happen even when cut: the closers the reserve kept. */
static void out_closer(struct kvr_em *e, char c)
{
	if (e->f) {
		fputc(c, e->f);
		return;
	}
	if (e->len + 1 < e->cap) {
		e->buf[e->len++] = c;
		e->buf[e->len] = '\0';
	}
}

void kvr_em_init(struct kvr_em *e, FILE *f, bool json)
{
	memset(e, 0, sizeof(*e));
	e->f = f;
	e->json = json;
	if (json)
		fputc('{', f);
}

void kvr_em_init_buf(struct kvr_em *e, char *buf, size_t cap, bool json)
{
	memset(e, 0, sizeof(*e));
	e->buf = buf;
	e->cap = cap;
	e->json = json;
	buf[0] = '\0';
	if (json)
		out(e, "{");
}

void kvr_em_finish(struct kvr_em *e)
{
	if (e->json) {
		/* Levels a caller left open are closed, so the line is
		 * always one valid object. */
		while (e->depth > 0) {
			out_closer(e, e->close[e->depth]);
			e->depth--;
		}
		out_closer(e, '}');
		out_closer(e, '\n');
	}
	if (e->f)
		fflush(e->f);
}

/*
 * A JSON string literal. Control bytes and non-ASCII are escaped as
 * \u00XX: strings from the segment were already cleaned, but paths given
 * on the command line may hold anything. Escaping each byte of a UTF-8
 * sequence separately is lossy but keeps the output valid JSON.
 */
static void json_str(struct kvr_em *e, const char *s)
{
	outc(e, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			out(e, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			out(e, "\\u%04x", c);
		else
			outc(e, (char)c);
	}
	outc(e, '"');
}

/* Where a member started, so a buffer can drop it whole if it is cut. */
struct mark {
	size_t len;
	bool comma;
};

static struct mark member_begin(const struct kvr_em *e)
{
	return (struct mark){e->len, e->comma[e->depth]};
}

static void member_end(struct kvr_em *e, struct mark m)
{
	if (e->f || !e->cut)
		return;
	e->len = m.len;
	e->buf[m.len] = '\0';
	e->comma[e->depth] = m.comma;
}

/* Writes the separator and key of the next member (JSON) or the path. A
 * NULL key is an array element: JSON writes no key for it. */
static void em_key(struct kvr_em *e, const char *k)
{
	if (e->json) {
		if (e->comma[e->depth])
			outc(e, ',');
		e->comma[e->depth] = true;
		if (k) {
			json_str(e, k);
			outc(e, ':');
		}
	} else {
		out(e, "%s%s=", e->prefix, k ? k : "");
	}
}

/*
 * Opens a nested object or array named @k: JSON writes the key and the
 * bracket, text mode appends "k." to the path prefix. A level that cannot
 * be opened in a full buffer is a ghost: kvr_em_end() of it closes
 * nothing.
 */
static void em_push(struct kvr_em *e, const char *k, char open, char close)
{
	struct mark m = member_begin(e);

	if (!e->f && e->cut) {
		e->ghost++;
		return;
	}
	if (e->json) {
		em_key(e, k);
	} else {
		size_t n = strlen(e->prefix);

		snprintf(e->prefix + n, sizeof(e->prefix) - n, "%s.", k);
	}
	if (e->depth + 1 < KVR_EM_DEPTH)
		e->depth++;
	e->comma[e->depth] = false;
	e->close[e->depth] = close;
	/* The bracket goes last: its check counts the new level's closer. */
	if (e->json)
		outc(e, open);
	if (!e->f && e->cut) {
		e->depth--;
		member_end(e, m);
		e->ghost++;
	}
}

void kvr_em_obj(struct kvr_em *e, const char *k)
{
	em_push(e, k, '{', '}');
}

void kvr_em_arr(struct kvr_em *e, const char *k)
{
	em_push(e, k, '[', ']');
}

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

void kvr_em_end(struct kvr_em *e)
{
	if (e->ghost > 0) {
		e->ghost--;
		return;
	}
	if (e->json)
		out_closer(e, e->close[e->depth]);
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

void kvr_em_u64(struct kvr_em *e, const char *k, uint64_t v)
{
	struct mark m = member_begin(e);

	em_key(e, k);
	out(e, "%" PRIu64 "%s", v, e->json ? "" : "\n");
	member_end(e, m);
}

void kvr_em_i64(struct kvr_em *e, const char *k, int64_t v)
{
	struct mark m = member_begin(e);

	em_key(e, k);
	out(e, "%" PRId64 "%s", v, e->json ? "" : "\n");
	member_end(e, m);
}

void kvr_em_bool(struct kvr_em *e, const char *k, bool v)
{
	struct mark m = member_begin(e);

	em_key(e, k);
	out(e, "%s%s", v ? "true" : "false", e->json ? "" : "\n");
	member_end(e, m);
}

/* Text mode prints the string raw: strings from the segment were cleaned
 * by the inspector, and the rest come from the program or argv. */
void kvr_em_str(struct kvr_em *e, const char *k, const char *v)
{
	struct mark m = member_begin(e);

	em_key(e, k);
	if (e->json)
		json_str(e, v);
	else
		out(e, "%s\n", v);
	member_end(e, m);
}

/* A double in @fmt's form (one %.*f or %.*g), null when not finite. */
static void em_double(struct kvr_em *e, const char *k, double v, int prec,
		      bool general)
{
	struct mark m = member_begin(e);

	em_key(e, k);
	if (e->json && !isfinite(v))
		out(e, "null");
	else if (general)
		out(e, "%.*g", prec, v);
	else
		out(e, "%.*f", prec, v);
	if (!e->json)
		outc(e, '\n');
	member_end(e, m);
}

void kvr_em_fixed(struct kvr_em *e, const char *k, double v, int decimals)
{
	em_double(e, k, v, decimals, false);
}

void kvr_em_dbl(struct kvr_em *e, const char *k, double v)
{
	em_double(e, k, v, 4, false);
}

void kvr_em_g(struct kvr_em *e, const char *k, double v)
{
	em_double(e, k, v, 6, true);
}
