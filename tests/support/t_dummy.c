/* SPDX-License-Identifier: MIT */
/* Keeps kvr_tsupport non-empty before any helper exists. */
int t__support_linked;
int t__support_linked = 1;
