/* SPDX-License-Identifier: MIT */
/* b.c - fixture for scripts/deps.py (never compiled): b calls a back,
 * the cycle the check must refuse. */
#include "b.h"

int kvr__b_two(void)
{
	return kvr__a_one() + 1;
}
