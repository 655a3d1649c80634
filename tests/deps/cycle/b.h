/* SPDX-License-Identifier: MIT */
/* b.h - fixture for scripts/deps.py: unit b, which calls a. */
int kvr__b_two(void);
