/* SPDX-License-Identifier: MIT */
/* a.h - fixture for scripts/deps.py: unit a, which calls b. */
int kvr__a_one(void);
