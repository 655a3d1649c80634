/* SPDX-License-Identifier: MIT */
/*
 * view.c - what the renderers derive from a snapshot: ages and uptime
 * from its clocks, a channel's request total, and which channels are
 * shown. Pure functions of the private copy (snapshot.c makes it).
 */
#include "inspect.h"

/* now - then, or 0 when "then" is unset (0) or in the future (a clock read
 * in another process a moment after ours). */
uint64_t ins_age_ns(uint64_t now, uint64_t then)
{
	return then && now > then ? now - then : 0;
}

/* Whole seconds since the server started, by the wall clock (the header
 * records the start as CLOCK_REALTIME); 0 if unknown or in the future. */
uint64_t ins_uptime_s(const struct ins_snap *s)
{
	return s->start_real_ns && s->real_ns > s->start_real_ns
		   ? (s->real_ns - s->start_real_ns) / INS_NSEC
		   : 0;
}

/* All requests of a channel: the sum of its per-operation counters. */
uint64_t ins_chan_requests(const struct ins_chan_snap *c)
{
	uint64_t n = 0;

	for (int k = 0; k < 16; k++)
		n += c->requests[k];
	return n;
}

/* Which channels the outputs include: in use, or all with --all. */
bool ins_chan_shown(const struct ins_chan_snap *c, bool all)
{
	return all || c->state != KVR_CHAN_FREE;
}
