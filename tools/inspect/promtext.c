/* SPDX-License-Identifier: MIT */
/*
 * promtext.c - the Prometheus text exposition's primitives: a family's
 * HELP and TYPE lines, a single sample, an escaped label value and the
 * labels of a per-channel sample. prom.c, obs.c and l2.c write their
 * families with them; it knows no family itself.
 */
#include <inttypes.h>
#include <stdio.h>

#include "inspect.h"

/* Label values escape backslash, double quote and newline. */
void ins_prom_lv(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* One HELP and one TYPE line per metric name, before its samples. */
void ins_prom_head(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family with a single unlabelled sample. */
void ins_prom_u64(FILE *f, const char *name, const char *type, const char *help,
		  uint64_t v)
{
	ins_prom_head(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/*
 * The labels every per-channel sample carries: the channel, and the model
 * and tensor-parallel rank of the worker on it. Not the pid: a worker
 * restarted on the same channel continues the same series (its counters
 * start again from zero, which rate() reads as a counter reset), rather
 * than opening new series at every restart. The pid is on
 * kvring_channel_info only, to join on when needed.
 */
static void prom_chan_labels(FILE *f, const struct ins_chan_snap *c)
{
	fprintf(f, "channel=\"%" PRIu32 "\",model=\"", c->idx);
	ins_prom_lv(f, c->ns.model);
	fprintf(f, "\",rank=\"%u\"", c->ns.tp_rank);
}

void ins_prom_chan_open(FILE *f, const char *name,
			const struct ins_chan_snap *c)
{
	fprintf(f, "%s{", name);
	prom_chan_labels(f, c);
}

void ins_prom_chan_u64(FILE *f, const char *name, const struct ins_chan_snap *c,
		       uint64_t v)
{
	ins_prom_chan_open(f, name, c);
	fprintf(f, "} %" PRIu64 "\n", v);
}
