/* SPDX-License-Identifier: MIT */
/*
 * names.c - printable forms of values that come out of the segment: the
 * names of enum values, cleaned copies of shared strings, and the boot id
 * in hex. Every such value was written by another process and may be
 * garbage, so each function here is total: it maps any input to safe text
 * and never indexes past a table. Deciding whether a value is *valid* is
 * --check's job (check.c); this file only makes sure printing it is
 * harmless.
 */
#include <ctype.h>
#include <stdio.h>

#include "inspect.h"

/* The tables follow the enums in <kvring/layout.h> and <kvring/proto.h>;
 * an out-of-range value reads "invalid" and --check reports it. */
const char *ins_server_state_name(uint32_t s)
{
	static const char *const n[] = {"starting", "running", "stopping"};

	return s < 3 ? n[s] : "invalid";
}

const char *ins_chan_state_name(uint32_t s)
{
	static const char *const n[] = {"free", "handshake", "active",
					"closing"};

	return s < 4 ? n[s] : "invalid";
}

const char *ins_backend_name(uint32_t b)
{
	static const char *const n[] = {"none", "shm", "memfd", "private"};

	return b < 4 ? n[b] : "invalid";
}

const char *ins_transport_name(uint32_t t)
{
	static const char *const n[] = {"none", "shm", "memfd", "copy"};

	return t < 4 ? n[t] : "invalid";
}

/* "invalid" is a real slot status here (KVR_SLOT_INVALID, a store of a
 * bad size), so an out-of-range value reads "unknown" instead. */
const char *ins_slot_status_name(int32_t s)
{
	static const char *const n[] = {"ok",	"exists",  "noroom",
					"busy", "invalid", "quota"};

	return s >= 0 && s < 6 ? n[s] : "unknown";
}

/*
 * The shared field need not be NUL-terminated, so the copy stops at
 * @srcn. Replacing '"' and '\\' as well as control bytes means a peer
 * cannot inject escapes or newlines into any output format: text lines,
 * JSON strings and Prometheus label values can all print the result raw.
 */
void ins_copy_clean(char *dst, size_t n, const char *src, size_t srcn)
{
	size_t i;

	for (i = 0; i + 1 < n && i < srcn && src[i]; i++)
		dst[i] = isprint((unsigned char)src[i]) && src[i] != '"' &&
				 src[i] != '\\'
			     ? src[i]
			     : '?';
	dst[i] = '\0';
}

void ins_hex16(char out[33], const uint8_t id[16])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}
