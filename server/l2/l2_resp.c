/* SPDX-License-Identifier: MIT */
/*
 * l2_resp.c - the RESP2 decoding kvringd needs from Redis, kept small and
 * pure so it can be fuzzed (tests/fuzz/fuzz_l2_resp.c): one reply line,
 * the length of a complete reply, a CLUSTER SLOTS reply, and MOVED/ASK
 * error text. Bulk payloads are not copied here: l2_batch.c reads a GET's
 * payload straight into its pool slot after kvr_l2_resp_line() has told
 * it the length. Requests are encoded in l2_batch.c (they are iovecs that
 * point at pool bytes). Every input is untrusted: lengths are bounded,
 * numbers checked, nesting limited.
 */
#include <errno.h>
#include <string.h>

#include <kvring/l2.h>

#define LINE_MAX_BYTES (64u << 10)
#define DEPTH_MAX      8

/* A decimal integer, optionally negative, exactly filling s[0..n). */
static int parse_i64(const char *s, size_t n, int64_t *out)
{
	bool neg = false;
	int64_t v = 0;
	size_t i = 0;

	if (n && s[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == n || n - i > 18)
		return -EBADMSG;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EBADMSG;
		v = v * 10 + (s[i] - '0');
	}
	*out = neg ? -v : v;
	return 0;
}

/* One reply line: its type byte, and its number (bulk length, array
 * count, integer) or its text; -EAGAIN until the CRLF is in the buffer,
 * -EBADMSG for a line longer than any Redis sends. */
long kvr_l2_resp_line(const char *p, size_t n, struct kvr_l2_rline *out)
{
	const char *cr;
	size_t body, lim = n < LINE_MAX_BYTES ? n : LINE_MAX_BYTES;
	struct kvr_l2_rline r = {0};

	if (n == 0)
		return -EAGAIN;
	cr = memchr(p, '\r', lim);
	if (!cr) {
		if (n >= LINE_MAX_BYTES)
			return -EBADMSG;
		return -EAGAIN;
	}
	if ((size_t)(cr - p) + 1 >= n)
		return -EAGAIN; /* the LF has not arrived */
	if (cr[1] != '\n')
		return -EBADMSG;
	body = (size_t)(cr - p) - 1;
	r.type = p[0];
	switch (r.type) {
	case '+':
	case '-':
		r.str = p + 1;
		r.str_len = body;
		break;
	case ':':
		if (parse_i64(p + 1, body, &r.num) < 0)
			return -EBADMSG;
		break;
	case '$':
	case '*':
		if (parse_i64(p + 1, body, &r.num) < 0 || r.num < -1)
			return -EBADMSG;
		break;
	default:
		return -EBADMSG;
	}
	*out = r;
	return (long)(body + 3);
}

/* The bytes of one whole reply, nested arrays included (@depth bounds
 * the nesting, so a hostile reply cannot recurse without end). */
static long span(const char *p, size_t n, int depth)
{
	struct kvr_l2_rline r;
	long used = kvr_l2_resp_line(p, n, &r), sub;
	size_t at;

	if (used < 0)
		return used;
	at = (size_t)used;
	if (r.type == '$' && r.num >= 0) {
		/* Bounded above by Redis' own 512 MB proto-max-bulk-len. */
		if (r.num > (1ll << 30))
			return -EBADMSG;
		if (n - at < (size_t)r.num + 2)
			return -EAGAIN;
		if (p[at + (size_t)r.num] != '\r' ||
		    p[at + (size_t)r.num + 1] != '\n')
			return -EBADMSG;
		return (long)(at + (size_t)r.num + 2);
	}
	if (r.type == '*' && r.num > 0) {
		if (depth >= DEPTH_MAX || r.num > (1 << 20))
			return -EBADMSG;
		for (int64_t i = 0; i < r.num; i++) {
			sub = span(p + at, n - at, depth + 1);
			if (sub < 0)
				return sub;
			at += (size_t)sub;
		}
	}
	return (long)at;
}

long kvr_l2_resp_span(const char *p, size_t n)
{
	return span(p, n, 0);
}

/* Read one line of an expected type from a complete reply. */
static int expect(const char *p, size_t n, size_t *at, char type,
		  struct kvr_l2_rline *r)
{
	long u = kvr_l2_resp_line(p + *at, n - *at, r);

	if (u < 0 || r->type != type)
		return -EBADMSG;
	*at += (size_t)u;
	return 0;
}

/* Skip one element (any type) of a complete reply. */
static int skip(const char *p, size_t n, size_t *at)
{
	long u = kvr_l2_resp_span(p + *at, n - *at);

	if (u < 0)
		return -EBADMSG;
	*at += (size_t)u;
	return 0;
}

/* A CLUSTER SLOTS reply as ranges of slots and their master's address
 * (replicas are skipped: reads and writes go to masters). */
int kvr_l2_resp_slots(const char *p, size_t n, struct kvr_l2_range *out,
		      uint32_t max)
{
	struct kvr_l2_rline r, e, m, h, port;
	size_t at = 0;
	uint32_t nr = 0;

	if (kvr_l2_resp_span(p, n) < 0 || expect(p, n, &at, '*', &r) < 0)
		return -EBADMSG;
	for (int64_t i = 0; i < r.num; i++) {
		struct kvr_l2_rline lo, hi;

		/* [lo, hi, [host, port, id...], replicas...] */
		if (expect(p, n, &at, '*', &e) < 0 || e.num < 3 ||
		    expect(p, n, &at, ':', &lo) < 0 ||
		    expect(p, n, &at, ':', &hi) < 0 ||
		    expect(p, n, &at, '*', &m) < 0 || m.num < 2 ||
		    expect(p, n, &at, '$', &h) < 0 || h.num < 0)
			return -EBADMSG;
		if (lo.num < 0 || hi.num < lo.num || hi.num >= KVR_L2_SLOTS)
			return -EBADMSG;
		if ((size_t)h.num >= sizeof(out->host) ||
		    n - at < (size_t)h.num + 2)
			return -EBADMSG;
		if (nr == max)
			return -E2BIG;
		memcpy(out[nr].host, p + at, (size_t)h.num);
		out[nr].host[h.num] = '\0';
		at += (size_t)h.num + 2;
		if (expect(p, n, &at, ':', &port) < 0 || port.num <= 0 ||
		    port.num > 65535)
			return -EBADMSG;
		out[nr].lo = (uint32_t)lo.num;
		out[nr].hi = (uint32_t)hi.num;
		out[nr].port = (uint16_t)port.num;
		nr++;
		for (int64_t k = 2; k < m.num; k++)
			if (skip(p, n, &at) < 0)
				return -EBADMSG;
		for (int64_t k = 3; k < e.num; k++)
			if (skip(p, n, &at) < 0)
				return -EBADMSG;
	}
	return (int)nr;
}

/* An error reply's redirect: "MOVED <slot> <host>:<port>" (1) or
 * "ASK ..." (2), with the slot and the node; 0 for any other error. */
int kvr_l2_resp_redirect(const char *s, size_t n, uint32_t *slot,
			 struct kvr_l2_addr *to)
{
	const char *sp1, *sp2, *colon = NULL;
	int kind;
	int64_t v, sv;
	size_t hl;

	if (n > 5 && memcmp(s, "MOVED ", 6) == 0)
		kind = 1;
	else if (n > 3 && memcmp(s, "ASK ", 4) == 0)
		kind = 2;
	else
		return 0;
	sp1 = memchr(s, ' ', n);
	sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s));
	if (!sp2)
		return -EBADMSG;
	if (parse_i64(sp1 + 1, (size_t)(sp2 - sp1 - 1), &sv) < 0 || sv < 0 ||
	    sv >= KVR_L2_SLOTS)
		return -EBADMSG;
	for (const char *q = s + n; q-- > sp2;)
		if (*q == ':') {
			colon = q;
			break;
		}
	if (!colon)
		return -EBADMSG;
	hl = (size_t)(colon - sp2 - 1);
	memset(to, 0, sizeof(*to));
	if (hl == 0 || hl >= sizeof(to->host))
		return -EBADMSG;
	memcpy(to->host, sp2 + 1, hl);
	if (parse_i64(colon + 1, (size_t)(s + n - colon - 1), &v) < 0 ||
	    v <= 0 || v > 65535)
		return -EBADMSG;
	to->port = (uint16_t)v;
	*slot = (uint32_t)sv;
	return kind;
}
