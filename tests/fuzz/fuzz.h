/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what every libFuzzer target here shares: the entry point's
 * prototype (each fuzz_<name>.c defines it; -Wmissing-prototypes wants it
 * declared) and fuzz_check(), the invariant check that stops the run
 * with a crash libFuzzer keeps the input of.
 */
#ifndef KVR_FUZZ_H
#define KVR_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the target: trap (a crash libFuzzer reports) if not. */
static inline void fuzz_check(bool ok)
{
	if (!ok)
		__builtin_trap();
}

#endif /* KVR_FUZZ_H */
