/* SPDX-License-Identifier: MIT */
/* c.h - fixture for scripts/deps.py: unit c, misnamed on purpose. */
int kvr__other_thing(void);
