/* SPDX-License-Identifier: MIT */
/* c.c - fixture for scripts/deps.py (never compiled): an internal name
 * that does not say its file, and a README whose listing is stale. */
#include "c.h"

int kvr__other_thing(void)
{
	return 1;
}
