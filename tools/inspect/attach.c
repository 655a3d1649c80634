/* SPDX-License-Identifier: MIT */
/*
 * attach.c - naming and mapping the control segment: turning --name (or
 * the default) into a path, mapping that file read-only, and deciding
 * whether its header is one this build can interpret. It owns the
 * struct ins_attach lifetime, and maps the channel directory and each
 * channel's block, read-only, from the server's descriptor table
 * (open_dir, ins_chan_block). It does not read
 * channels or counters (snapshot.c copies those) and does not resolve
 * --socket (socket.c).
 *
 * Why read-only: the inspector must never perturb the server it looks at,
 * so the file is opened O_RDONLY and mapped PROT_READ by
 * kvr_seg_open_name(); a stray write through the mapping faults in this
 * process instead of corrupting the server's state. Nothing is locked and
 * the segment is never unlinked or resized by us.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <kvring/chanmap.h>

#include "inspect.h"

/* Fills a target from a directory (NULL: /dev/shm) and a file name. A
 * directory longer than KVR_SEG_DIR_MAX - 1 bytes is silently cut. */
void ins_target_set(struct ins_target *t, const char *dir, const char *name)
{
	snprintf(t->dir, sizeof(t->dir), "%s", dir ? dir : KVR_SEG_DEFAULT_DIR);
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->path, sizeof(t->path), "%s/%s", t->dir, t->name);
}

/*
 * Turns --name into a target: a path (contains '/') names the file itself
 * and overrides @dir; otherwise "X.ctl" is taken as is and anything else
 * is a base name, as given to kvringd --name. The final file name must
 * pass kvr_seg_name_valid(), the rule segments are named by: the open
 * would refuse anything else anyway, and refusing it here makes a typo a
 * usage error (exit 2) rather than a failed attach (exit 1).
 * Return: 0, or -EINVAL (message printed) for a name that cannot be one;
 * on failure *t is left untouched.
 */
int ins_target_from_name(struct ins_target *t, const char *dir,
			 const char *name)
{
	char buf[KVR_SEG_NAME_MAX + 1], dbuf[KVR_SEG_DIR_MAX];
	const char *slash = strrchr(name, '/');
	size_t n;

	if (slash) {
		n = (size_t)(slash - name);
		if (n >= sizeof(dbuf))
			goto bad;
		memcpy(dbuf, name, n);
		dbuf[n] = '\0';
		if (n == 0) /* "/x.ctl": the file is in the root */
			snprintf(dbuf, sizeof(dbuf), "/");
		dir = dbuf;
		name = slash + 1;
	}
	n = strlen(name);
	if (n > 4 && strcmp(name + n - 4, KVR_SEG_CTL_SUFFIX) == 0) {
		if (n >= sizeof(buf))
			goto bad;
		memcpy(buf, name, n + 1);
	} else if (kvr_seg_ctl_name(name, buf, sizeof(buf)) < 0) {
		goto bad;
	}
	if (!kvr_seg_name_valid(buf))
		goto bad;
	ins_target_set(t, dir, buf);
	return 0;
bad:
	/* Names only the file part when a directory was given with it. */
	ins_err("invalid segment name \"%s\"", name);
	return -EINVAL;
}

/*
 * The geometry (where each channel and ring lies) is recomputed from the
 * header's capacities, never taken from the header's offset fields: a
 * header that disagrees with the arithmetic is damaged, and the computed
 * geometry must fit in the mapping before any channel is read through
 * it. Sets a->geom_ok and a->g, or a->geom_err. Runs under the SIGBUS
 * guard armed by the caller.
 */
static void check_geometry(struct ins_attach *a,
			   const struct kvr_ctl_hdr_shm *h)
{
	struct kvr_ctl_geom g;
	int rc;

	rc = kvr_ctl_geom_compute(h->max_channels, h->req_ring_cap,
				  h->resp_ring_cap, &g);
	a->geom_ok = true;
	if (rc < 0) {
		snprintf(a->geom_err, sizeof(a->geom_err),
			 "header geometry invalid: max_channels %u, rings "
			 "%u/%u bytes",
			 h->max_channels, h->req_ring_cap, h->resp_ring_cap);
		a->geom_ok = false;
	} else if (g.dir_bytes != h->dir_bytes ||
		   g.channel_bytes != h->channel_bytes ||
		   g.ctl_bytes > a->seg.bytes) {
		snprintf(a->geom_err, sizeof(a->geom_err),
			 "header geometry inconsistent: dir_bytes %u "
			 "(expected %u), channel_bytes %u "
			 "(expected %u), needs %" PRIu64 " bytes, file has %zu",
			 h->dir_bytes, g.dir_bytes, h->channel_bytes,
			 g.channel_bytes, g.ctl_bytes, a->seg.bytes);
		a->geom_ok = false;
	}
	if (a->geom_ok)
		a->g = g;
}

/*
 * The channel directory (abi 4.0) is a memfd the server gives to nobody:
 * we open it through /proc/<creator_pid>/fd/<dir_fd>, as the blocks, and
 * map it PROT_READ. Not being allowed (not root nor the server's uid) is
 * not an error of the attach: the header and the global counters are
 * still shown, the channels, the per-uid table and the namespace slots
 * (abi 5.0) are not, and dir_rc says why (one warning).
 */
static void open_dir(struct ins_attach *a)
{
	struct kvr_err e = {0};

	a->dir.fd = a->dir.live_fd = -1;
	a->dir_rc = kvr_chanmap_open_dir(a->h->seg.creator_pid, a->h->dir_fd,
					 a->g.dir_bytes, &a->dir, &e);
	if (a->dir_rc < 0) {
		memset(&a->dir, 0, sizeof(a->dir));
		a->dir.fd = a->dir.live_fd = -1;
		ins_err("warning: channels, uids and per-namespace counters "
			"not shown (they need root or kvringd's uid %d; the "
			"global counters are): %s",
			(int)a->h->server_uid, kvr_err_str(&e, a->dir_rc));
	}
}

/*
 * Maps the target read-only and validates its header. The header check
 * (magic, ABI, layout hash, size; kvr_seg_hdr_check()) is final: a
 * mismatch is refused, since nothing past the header can be interpreted
 * under another layout. The geometry check is only recorded (geom_ok), so
 * that --check can report it as a violation while the other modes refuse
 * it. A segment whose `ready` flag is not yet set is being formatted by a
 * starting server: it is re-opened every 20 ms for up to a second.
 * Return: 0 with *a filled (release it with ins_attach_close()), or
 * -errno with the reason in *e and nothing left mapped.
 */
int ins_attach_open(const struct ins_target *t, struct ins_attach *a,
		    struct kvr_err *e)
{
	const struct kvr_ctl_hdr_shm *h;
	struct stat st;
	/* volatile: it lives across sigsetjmp and is changed after it. */
	volatile int tries = 0;
	int rc;

	memset(a, 0, sizeof(*a));
retry:
	rc = kvr_seg_open_name(t->dir, t->name, true, &a->seg, e);
	if (rc < 0)
		return rc;
	/* The file's identity, for --watch to notice a replaced segment. A
	 * failed stat leaves 0/0, which any later file differs from. */
	if (stat(t->path, &st) == 0) {
		a->dev = st.st_dev;
		a->ino = st.st_ino;
	}
	h = a->seg.base;
	ins_bus_armed = 1;
	if (sigsetjmp(ins_bus_jmp, 1)) {
		ins_bus_armed = 0;
		kvr_seg_detach(&a->seg);
		return kvr_err_set(e, -EFAULT,
				   "read %s: SIGBUS (the file shrank under "
				   "us: truncated by someone)",
				   t->path);
	}
	rc = kvr_seg_hdr_check(&h->seg, a->seg.bytes, KVR_SEG_KIND_CONTROL,
			       kvr_layout_hash(), e);
	if (rc == -EAGAIN && ++tries < 50) {
		/* The server is still formatting it: give it a second. */
		ins_bus_armed = 0;
		kvr_seg_detach(&a->seg);
		ins_sleep_ms(20);
		goto retry;
	}
	if (rc < 0) {
		ins_bus_armed = 0;
		kvr_seg_detach(&a->seg);
		return rc;
	}
	a->h = a->seg.base;
	check_geometry(a, h);
	ins_bus_armed = 0;
	if (a->geom_ok) {
		a->blk = calloc(a->g.max_channels, sizeof(*a->blk));
		if (!a->blk) {
			kvr_seg_detach(&a->seg);
			return kvr_err_set(e, -ENOMEM, "out of memory");
		}
		for (uint32_t i = 0; i < a->g.max_channels; i++)
			a->blk[i].seg.fd = a->blk[i].seg.live_fd = -1;
		open_dir(a);
	}
	return 0;
}

/*
 * Each channel block is a memfd the server holds (abi 3.0), named in the
 * directory (itself opened the same way, abi 4.0) by the server's fd
 * number. We open it through
 * /proc/<creator_pid>/fd/<fd>, which the kernel allows only to root and
 * to the server's uid, and map it PROT_READ. The fd number may be reused
 * for the next claim between our read of the directory and the open, so
 * the block is kept only if the directory still shows the generation we
 * read (A-DIR1 pairs with R-DIR1/R-DIR2 in server/chan.c) and the block
 * itself carries it.
 */
const struct kvr_channel_shm *ins_chan_block(const struct ins_attach *a,
					     uint32_t i, uint32_t gen, int *rc)
{
	struct kvr_chan_dir_shm *d;
	struct ins_blk *b;
	struct kvr_err e = {0};
	const struct kvr_channel_shm *ch;
	uint32_t st, now;
	int fd;

	*rc = -ENOENT;
	if (!a->blk || i >= a->g.max_channels)
		return NULL;
	b = &a->blk[i];
	if (b->seg.base && b->gen == gen) {
		*rc = 0;
		return b->seg.base;
	}
	kvr_seg_detach(&b->seg);
	if (!a->dir.base)
		return NULL;
	d = kvr_chan_dir(a->dir.base, i);
	fd = d->fd;
	if (fd < 0)
		return NULL;
	*rc = kvr_chanmap_open_block(a->h->seg.creator_pid, fd,
				     a->g.channel_bytes, &b->seg, &e);
	if (*rc < 0)
		return NULL;
	ch = b->seg.base;
	/* A-DIR1: acquire on state; pairs with R-DIR1/R-DIR2. */
	st = atomic_load_explicit(&d->state, memory_order_acquire);
	now = atomic_load_explicit(&d->generation, memory_order_relaxed);
	if (st == KVR_CHAN_FREE || now != gen || ch->generation != gen) {
		kvr_seg_detach(&b->seg);
		*rc = -ESTALE;
		return NULL;
	}
	b->gen = gen;
	*rc = 0;
	return ch;
}

/* Unmaps; the segment itself is never touched (we do not own it). Only
 * for an attachment ins_attach_open() filled: a failed open may leave a
 * zeroed handle whose fd field reads 0, and detaching it would close
 * stdin. */
void ins_attach_close(struct ins_attach *a)
{
	for (uint32_t i = 0; a->blk && i < a->g.max_channels; i++)
		kvr_seg_detach(&a->blk[i].seg);
	free(a->blk);
	a->blk = NULL;
	if (a->dir.base)
		kvr_seg_detach(&a->dir);
	kvr_seg_detach(&a->seg);
	a->h = NULL;
}
