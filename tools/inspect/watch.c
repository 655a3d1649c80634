/* SPDX-License-Identifier: MIT */
/*
 * watch.c - --watch: the overview redrawn every interval, with rates from
 * the difference of two consecutive snapshots, until SIGINT/SIGTERM
 * (exit 0) or --count frames. It owns the frame loop and noticing that
 * the server behind the name went away or was replaced. Rendering is
 * overview.c's, reading is snapshot.c's.
 *
 * Why a restart has to be noticed here: the tool keeps its mapping for
 * the whole run. A stopped server unlinks its segment, but the mapping of
 * an unlinked file stays valid and simply stops changing, so without a
 * look at the name the tool would show a frozen, dead server forever
 * while a new one runs under the same name.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inspect.h"

/* The two snapshot buffers the loop alternates between. */
struct frames {
	struct ins_snap sn[2];
	struct ins_snap *cur, *prev; /* prev NULL: no rates this frame */
};

/*
 * The name now points at another file: attach to it and, if that works,
 * replace *a and the frame buffers (sized from the new geometry) and
 * start the rates over, since the new server's counters start from zero.
 * If the new segment cannot be attached yet (still being formatted, or
 * damaged), the old mapping is kept and the next frame tries again.
 * Return: true if *a is now the new segment.
 */
static bool reattach(const struct ins_target *t, struct ins_attach *a,
		     struct frames *fr)
{
	struct ins_attach na;
	struct kvr_err e = {0};
	struct ins_chan_snap *c0, *c1;
	char ob[33], nb[33];

	if (ins_attach_open(t, &na, &e) < 0)
		return false; /* nothing mapped */
	c0 = na.geom_ok ? ins_chan_alloc(&na) : NULL;
	c1 = c0 ? ins_chan_alloc(&na) : NULL;
	if (!c1) {
		free(c0);
		ins_attach_close(&na);
		return false;
	}
	ins_hex16(ob, a->h->seg.boot_id);
	ins_hex16(nb, na.h->seg.boot_id);
	/* The old pid comes from the old mapping's header, which stays
	 * valid after the unlink: a snapshot may still be empty on the
	 * second frame. */
	ins_err("server restarted: pid %d -> %d, boot id %s -> %s",
		a->h->seg.creator_pid, na.h->seg.creator_pid, ob, nb);
	ins_attach_close(a);
	*a = na;
	free(fr->sn[0].ch);
	free(fr->sn[1].ch);
	fr->sn[0].ch = c0;
	fr->sn[1].ch = c1;
	fr->prev = NULL;
	fr->cur = &fr->sn[0];
	return true;
}

/*
 * Redraws the overview every o->watch_ms. Each frame first stats the
 * file name: gone means the server stopped (said once on stderr; frames
 * go on from the old mapping, where the server now reads dead, until a
 * new segment appears); another inode means a restart (reattach()).
 * Return: INS_EXIT_OK when interrupted or after --count frames,
 * INS_EXIT_RUNTIME on SIGBUS or out of memory.
 */
int ins_watch_run(const struct ins_opts *o, const struct ins_target *t,
		  struct ins_attach *a)
{
	struct frames fr = {0};
	/* Clear the screen only for a human: a pipe gets a plain stream. */
	bool tty = isatty(STDOUT_FILENO), gone = false;
	int rc = INS_EXIT_OK;

	fr.cur = &fr.sn[0];
	fr.sn[0].ch = ins_chan_alloc(a);
	fr.sn[1].ch = ins_chan_alloc(a);
	if (!fr.sn[0].ch || !fr.sn[1].ch) {
		ins_err("out of memory");
		rc = INS_EXIT_RUNTIME;
		goto out;
	}
	for (long frame = 0; !ins_stop; frame++) {
		struct stat st;

		if (stat(t->path, &st) < 0) {
			if (!gone)
				ins_err("segment %s removed: the server "
					"stopped; waiting for it to come back",
					t->path);
			gone = true;
		} else if (st.st_ino != a->ino || st.st_dev != a->dev) {
			/* Re-armed so that the new server's stop is said
			 * too; a failed reattach is retried next frame. */
			if (reattach(t, a, &fr))
				gone = false;
		}
		if (ins_snap_take(a, fr.cur) < 0) {
			rc = INS_EXIT_RUNTIME;
			break;
		}
		if (tty && !o->json)
			fputs("\033[H\033[2J", stdout);
		if (o->mode == INS_MODE_LATENCY)
			ins_latency_emit(stdout, o, fr.cur, fr.prev);
		else
			ins_overview_emit(stdout, o->json, o->all, t, fr.cur,
					  fr.prev);
		fr.prev = fr.cur;
		fr.cur = fr.cur == &fr.sn[0] ? &fr.sn[1] : &fr.sn[0];
		if (o->count > 0 && frame + 1 >= o->count)
			break;
		ins_sleep_ms(o->watch_ms);
	}
out:
	free(fr.sn[0].ch);
	free(fr.sn[1].ch);
	return rc;
}
