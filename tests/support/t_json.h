/* SPDX-License-Identifier: MIT */
/*
 * t_json.h - test helper: parse JSON with a real parser (python3's json
 * module, already a test dependency) and look values up by path, so tests
 * never find keys by scanning strings. One python3 run per document: it
 * parses strictly (no NaN or Infinity, no trailing garbage) and flattens
 * the tree into one line per node; the C side only matches exact paths.
 *
 * Paths join object keys and array indices with dots: "schema",
 * "channels.0.req_ring.head", "channels.1" (the second element). "" is the
 * root. Set-up failures (no python3) print why and abort (tests/support
 * convention).
 */
#ifndef KVR_T_JSON_H
#define KVR_T_JSON_H

#include <stdbool.h>
#include <stddef.h>

struct t_json; /* opaque: the flattened document */

/*
 * t_json_parse - parse @text. Returns the document, or NULL when it is not
 * valid JSON; then @why (may be NULL) gets python's message ("Expecting
 * ',' delimiter: line 1 column 8 (char 7)").
 */
struct t_json *t_json_parse(const char *text, char *why, size_t whylen);

/* Whether @text is one valid JSON value (strict, as above). */
bool t_json_valid(const char *text);

void t_json_free(struct t_json *j);

/* Whether @path names a node (of any type, null included). */
bool t_json_has(const struct t_json *j, const char *path);

/* The integer at @path, or @dflt when absent or not an integer. */
long long t_json_int(const struct t_json *j, const char *path, long long dflt);

/* The number (integer or float) at @path, or @dflt when absent or not a
 * number. */
double t_json_num(const struct t_json *j, const char *path, double dflt);

/* The string at @path (decoded, ASCII only), or NULL when absent or not a
 * string. Borrowed from @j. */
const char *t_json_str(const struct t_json *j, const char *path);

/* Whether the node at @path is true / false; false when absent. */
bool t_json_true(const struct t_json *j, const char *path);

/* Members of the object or elements of the array at @path; -1 when
 * absent or a scalar. */
long t_json_count(const struct t_json *j, const char *path);

#endif /* KVR_T_JSON_H */
