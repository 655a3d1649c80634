/* SPDX-License-Identifier: MIT */
/* a.c - fixture for scripts/deps.py (never compiled): a calls b. */
#include "a.h"
#include "b.h"

int kvr__a_one(void)
{
	return kvr__b_two() - 1;
}
