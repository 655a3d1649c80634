/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the L2 tier's RESP decoder (server/l2_resp.c) on
 * whatever a hostile or broken Redis could send. The first byte picks the
 * decoder (line, span, CLUSTER SLOTS, redirect text); the rest is the
 * reply, copied into an exact-size heap buffer so ASan catches any read
 * past it. A span or line length must never exceed the input, and every
 * decoded CLUSTER SLOTS range must be inside 0..16383.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kvring/l2.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvr_l2_range r[8];
	struct kvr_l2_rline l;
	struct kvr_l2_addr a;
	uint32_t slot;
	char *p;
	long n;
	int k;

	if (size < 1)
		return 0;
	p = malloc(size - 1 ? size - 1 : 1);
	if (!p)
		return 0;
	memcpy(p, data + 1, size - 1);
	switch (data[0] & 3) {
	case 0:
		n = kvr_l2_resp_line(p, size - 1, &l);
		if (n > (long)(size - 1))
			abort();
		if (n > 0 && (l.type == '+' || l.type == '-') &&
		    l.str + l.str_len > p + size - 1)
			abort();
		break;
	case 1:
		n = kvr_l2_resp_span(p, size - 1);
		if (n > (long)(size - 1))
			abort();
		break;
	case 2:
		k = kvr_l2_resp_slots(p, size - 1, r, 8);
		for (int i = 0; i < k; i++)
			if (r[i].lo > r[i].hi || r[i].hi >= KVR_L2_SLOTS ||
			    strlen(r[i].host) >= sizeof(r[i].host))
				abort();
		break;
	default:
		k = kvr_l2_resp_redirect(p, size - 1, &slot, &a);
		if (k > 0 && (slot >= KVR_L2_SLOTS || a.port == 0))
			abort();
		break;
	}
	free(p);
	return 0;
}
