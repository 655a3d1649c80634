/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the handshake parsers. Byte 0 chooses hello (server
 * side) or welcome (worker side); the rest is the message body as it came
 * off the socket. Both must accept or refuse without reading past the
 * input, and a refusal must leave a terminated message in the error buffer.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <kvring/error.h>
#include <kvring/proto.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvr_err e;
	int rc;

	if (size < 1)
		return 0;
	memset(&e, 0, sizeof(e));
	if (data[0] & 1)
		rc = kvr_hello_check(data + 1, size - 1, &e);
	else
		rc = kvr_welcome_check(data + 1, size - 1, &e);
	if (rc < 0 && strnlen(e.msg, sizeof(e.msg)) == sizeof(e.msg))
		__builtin_trap(); /* unterminated error message */
	return 0;
}
