/* SPDX-License-Identifier: MIT */
/*
 * connect.c - libkvring's public entry points that do not need a client:
 * kvr_connect() and kvr_connect_sized() (the options struct that can grow,
 * the wait for a kvringd that is still starting, and the environment
 * variables that stand in for options: $KVRING_CONNECT_WAIT_MS,
 * $KVRING_PREFAULT), kvr_version() and the exported kvr_strerror() wording.
 *
 * Growth rule (docs/compat.md): struct kvr_client_opts only ever gains
 * fields at its end. The caller says how many bytes it has; what lies past
 * them is taken as 0, and a newer caller's extra fields must be 0 here.
 * This file does not speak the protocol (conn.c does, one attempt at a
 * time).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvring/error.h>
#include <kvring/parse.h>

#include "client.h"

/* What a binary built against 0.1 passes: every field up to no_prefault. */
#define OPTS_V1_BYTES offsetof(struct kvr_client_opts, connect_wait_ms)

/* Pause between attempts while waiting for kvringd's socket to appear. */
#define WAIT_STEP_MS 20
/* Attempts for a handshake kvringd dropped before its welcome. */
#define DROP_TRIES 5u

const char *kvr_version(void)
{
	return KVR_VERSION_STRING;
}

int kvr_version_number(void)
{
	return KVR_VERSION_NUMBER;
}

/* $KVRING_CONNECT_WAIT_MS into *ms (0 when unset). Return 0, or -EINVAL
 * with the reason in errbuf: a typo must not silently mean "no wait". */
static int env_wait_ms(uint32_t *ms, char *errbuf, size_t errlen)
{
	const char *e = getenv("KVRING_CONNECT_WAIT_MS");

	*ms = 0;
	if (!e || !*e || kvr_parse_u32(e, 0, UINT32_MAX, ms) == 0)
		return 0;
	if (errbuf && errlen)
		snprintf(errbuf, errlen,
			 "$KVRING_CONNECT_WAIT_MS '%s' is not a number of "
			 "milliseconds; set it to 0-%u or unset it",
			 e, UINT32_MAX);
	return -EINVAL;
}

/*
 * $KVRING_PREFAULT into *background: unset or empty leaves it alone,
 * "background" sets it, "inline" (the default, spelt out) leaves it
 * alone, so opts.prefault_background = true still wins as with
 * connect_wait_ms. Return 0, or -EINVAL with the reason in errbuf: a typo
 * ("backgound", "BACKGROUND") must not silently mean "in line".
 */
static int env_prefault(bool *background, char *errbuf, size_t errlen)
{
	const char *e = getenv("KVRING_PREFAULT");

	if (!e || !*e || strcmp(e, "inline") == 0)
		return 0;
	if (strcmp(e, "background") == 0) {
		*background = true;
		return 0;
	}
	if (errbuf && errlen)
		snprintf(
		    errbuf, errlen,
		    "$KVRING_PREFAULT '%s' is not a pre-fault mode; set it "
		    "to 'background' (kvr_connect returns at once, a "
		    "thread touches the pool) or 'inline' (the default), "
		    "or unset it",
		    e);
	return -EINVAL;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * The wait for a server that is not there yet: kvringd creates its socket
 * only once the pool is pre-faulted (docs/config.md), so "no socket" and
 * "refused" mean "not yet" for up to wait_ms. Any other outcome, success
 * or a real refusal, ends the wait at once.
 *
 * A handshake the server dropped before its welcome (-ECONNABORTED from
 * the attempt) is tried again DROP_TRIES times in all, wait or not:
 * kvringd drops the oldest handshake that has sent nothing when a uid has
 * KVR_SRV_PENDING_PER_UID pending (docs/reliability.md), which under load
 * can be a real worker started beside 63 others, descheduled between its
 * connect and its hello. A retry is the newest handshake, so it is kept.
 */
static int connect_waiting(const struct kvr_client_opts *o, uint32_t wait_ms,
			   struct kvr_client **out, char *errbuf, size_t errlen)
{
	uint64_t deadline = kvr_clock_now_ns() + (uint64_t)wait_ms * 1000000ull;
	uint32_t dropped = 0;
	size_t used;
	int rc;

	for (;;) {
		rc = kvr__conn_attempt(o, out, errbuf, errlen);
		if (rc == -ECONNABORTED && ++dropped < DROP_TRIES) {
			/* 1, 2, 4, 8 ms, plus up to 1 ms by pid so that
			 * workers dropped together do not return together. */
			struct timespec ts = {
			    0, (long)((1u << (dropped - 1)) * 1000000u +
				      (unsigned)getpid() % 1000u * 1000u)};

			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
			continue;
		}
		if (rc == -ECONNABORTED) {
			used = errbuf && errlen ? strlen(errbuf) : errlen;
			if (used < errlen)
				snprintf(errbuf + used, errlen - used,
					 " (dropped in the handshake %u times: "
					 "kvringd's log says why; a flood of "
					 "silent sockets from one uid, or its "
					 "loop stalled)",
					 dropped);
			return -EPROTO; /* the code callers always got */
		}
		if (rc != -ENOENT && rc != -ECONNREFUSED)
			return rc;
		if (wait_ms == 0 || kvr_clock_now_ns() >= deadline)
			break;
		sleep_ms(WAIT_STEP_MS);
	}
	if (wait_ms && errbuf && errlen) {
		used = strlen(errbuf);
		if (used < errlen)
			snprintf(errbuf + used, errlen - used,
				 "; waited %u ms for kvringd to appear",
				 wait_ms);
	}
	return rc;
}

int kvr_connect_sized(const struct kvr_client_opts *o, size_t opts_size,
		      struct kvr_client **out, char *errbuf, size_t errlen)
{
	struct kvr_client_opts mine;
	uint32_t wait_ms;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!o || !out) {
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "opts and out are required");
		return -EINVAL;
	}
	if (opts_size < OPTS_V1_BYTES) {
		if (errbuf && errlen)
			snprintf(errbuf, errlen,
				 "struct kvr_client_opts of %zu bytes: smaller "
				 "than the oldest layout (%zu bytes)",
				 opts_size, (size_t)OPTS_V1_BYTES);
		return -EINVAL;
	}
	memset(&mine, 0, sizeof(mine));
	memcpy(&mine, o, opts_size < sizeof(mine) ? opts_size : sizeof(mine));
	/* A newer caller's fields we do not know must be unset: ignoring a
	 * set one would silently change what the caller asked for. */
	for (size_t i = sizeof(mine); i < opts_size; i++) {
		if (((const unsigned char *)o)[i] != 0) {
			if (errbuf && errlen)
				snprintf(errbuf, errlen,
					 "struct kvr_client_opts of %zu bytes "
					 "sets a field at byte %zu that "
					 "libkvring %s (%zu bytes) does not "
					 "know: upgrade libkvring",
					 opts_size, i, KVR_VERSION_STRING,
					 sizeof(mine));
			return -E2BIG;
		}
	}
	wait_ms = mine.connect_wait_ms;
	if (!wait_ms && env_wait_ms(&wait_ms, errbuf, errlen) < 0)
		return -EINVAL;
	/* Read once here, so that touch.c sees only the option. */
	if (env_prefault(&mine.prefault_background, errbuf, errlen) < 0)
		return -EINVAL;
	return connect_waiting(&mine, wait_ms, out, errbuf, errlen);
}

/* The exported symbol old binaries (and ctypes) call: the v0.1 layout.
 * The parentheses keep the kvr_connect() macro of kvring.h out. */
int(kvr_connect)(const struct kvr_client_opts *o, struct kvr_client **out,
		 char *errbuf, size_t errlen)
{
	return kvr_connect_sized(o, OPTS_V1_BYTES, out, errbuf, errlen);
}
