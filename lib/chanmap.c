/* SPDX-License-Identifier: MIT */
/*
 * chanmap.c - the mappings that confine a worker to its own channel
 * (<kvring/chanmap.h>): the read-only descriptor of the control segment
 * the server hands out, the worker's check of its two control mappings
 * against the welcome, and the inspector's read-only way into the channel
 * directory and a channel block through the server's descriptor table.
 *
 * Why a descriptor and not a mapping flag: a worker that got a writable
 * descriptor, or a read-only mapping of one, could mprotect() or mmap()
 * its way back to writing. The kernel refuses both only when the open
 * file description itself is read-only (EACCES, root included) or the
 * memfd is sealed against future writes (EPERM), so those are what the
 * server gives out. This file does not create segments (segment_map.c)
 * or lay them out (layout.c); it never prints.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvring/chanmap.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */
#endif

/* Reopen @fd through /proc/self/fd with O_RDONLY: a new open file
 * description whose access mode no later fcntl can widen. */
static int reopen_rdonly(int fd)
{
	char path[64];
	int ro;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	return ro < 0 ? -errno : ro;
}

int kvr_chanmap_ro_fd(struct kvr_seg *ctl, bool *sealed, struct kvr_err *e)
{
	struct stat a, b;
	int fd, ro, flags;

	*sealed = false;
	fd = kvr_seg_fd(ctl);
	if (fd < 0)
		return kvr_err_set(e, -EBADF,
				   "read-only control descriptor: the control "
				   "segment has no descriptor");
	if (ctl->backend == KVR_SEG_BACKEND_MEMFD) {
		/* Our mapping exists already and stays writable; every
		 * mapping made from now on, by anyone, is read-only. */
		if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) ==
		    0)
			*sealed = true;
		else if (errno != EINVAL)
			return kvr_err_set(e, -errno,
					   "seal control memfd against "
					   "writes: %s",
					   strerror(errno));
		/* EINVAL: a kernel before 5.1, or a memfd sealed without
		 * SEAL_LATER; the O_RDONLY description below still holds
		 * against mmap and mprotect. */
	}
	/* Without write bits, no one but root can reopen it for writing by
	 * name or through /proc/<pid>/fd (a named file has none already). */
	if (fstat(fd, &a) < 0 || fchmod(fd, a.st_mode & 0444) < 0)
		return kvr_err_set(e, -errno,
				   "read-only control descriptor: chmod: %s",
				   strerror(errno));
	ro = reopen_rdonly(fd);
	if (ro < 0)
		return kvr_err_set(e, ro,
				   "reopen the control segment read-only "
				   "through /proc/self/fd/%d: %s (is /proc "
				   "mounted?)",
				   fd, strerror(-ro));
	flags = fcntl(ro, F_GETFL);
	if (flags < 0 || (flags & O_ACCMODE) != O_RDONLY || fstat(ro, &b) < 0 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(ro);
		return kvr_err_set(e, -EIO,
				   "reopen the control segment read-only: got "
				   "another file or a writable descriptor");
	}
	return ro;
}

/* 32 hex digits of a 16-byte id, for messages. */
static void hex16(char out[33], const uint8_t id[16])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

int kvr_chanmap_check(const struct kvr_welcome *w, const void *ctl,
		      size_t ctl_bytes, const void *blk, size_t blk_bytes,
		      struct kvr_ctl_geom *g, uint32_t *generation,
		      struct kvr_err *e)
{
	const struct kvr_ctl_hdr_shm *h = ctl;
	const struct kvr_channel_shm *ch = blk;
	struct kvr_ctl_geom mine;
	char want[33], got[33];
	uint32_t st, gen;
	int rc;

	/* Our own geometry, from the welcome; the header must agree. */
	if (w->channel >= 4096 ||
	    kvr_ctl_geom_compute(w->channel + 1, w->req_ring_cap,
				 w->resp_ring_cap, &mine) < 0)
		return kvr_err_set(e, -EPROTO,
				   "welcome: bad ring geometry (channel %u, "
				   "rings %u/%u)",
				   w->channel, w->req_ring_cap,
				   w->resp_ring_cap);
	if (w->ctl_bytes != ctl_bytes || ctl_bytes != mine.ctl_bytes)
		return kvr_err_set(e, -EPROTO,
				   "welcome: control segment of %" PRIu64
				   " bytes (%zu mapped), expected %" PRIu64,
				   w->ctl_bytes, ctl_bytes, mine.ctl_bytes);
	if (w->channel_bytes != mine.channel_bytes ||
	    blk_bytes != mine.channel_bytes)
		return kvr_err_set(e, -EPROTO,
				   "welcome: channel block of %" PRIu64
				   " bytes (%zu mapped), expected %u for "
				   "rings %u/%u",
				   w->channel_bytes, blk_bytes,
				   mine.channel_bytes, w->req_ring_cap,
				   w->resp_ring_cap);
	rc = kvr_seg_hdr_check(&h->seg, ctl_bytes, KVR_SEG_KIND_CONTROL,
			       kvr_layout_hash(), e);
	if (rc < 0)
		return rc;
	/* Each repeated field on its own, so the message names it. */
	if (memcmp(h->seg.boot_id, w->boot_id, sizeof(w->boot_id)) != 0) {
		hex16(want, w->boot_id);
		hex16(got, h->seg.boot_id);
		return kvr_err_set(e, -EPROTO,
				   "control segment boot id %s, the welcome "
				   "says %s: this segment is not the one of "
				   "the kvringd we talk to; restart kvringd",
				   got, want);
	}
	if (h->pool_bytes != w->pool_bytes)
		return kvr_err_set(e, -EPROTO,
				   "control segment: pool %" PRIu64
				   " bytes, the welcome says %" PRIu64,
				   h->pool_bytes, w->pool_bytes);
	if (h->req_ring_cap != w->req_ring_cap ||
	    h->resp_ring_cap != w->resp_ring_cap)
		return kvr_err_set(e, -EPROTO,
				   "control segment: rings %u/%u bytes, the "
				   "welcome says %u/%u",
				   h->req_ring_cap, h->resp_ring_cap,
				   w->req_ring_cap, w->resp_ring_cap);
	if (h->max_channels <= w->channel ||
	    h->channel_bytes != mine.channel_bytes)
		return kvr_err_set(e, -EPROTO,
				   "control segment: %u channels, blocks of "
				   "%u bytes; expected channel %u, %u",
				   h->max_channels, h->channel_bytes,
				   w->channel, mine.channel_bytes);
	/* The directory is not ours to see (abi 4.0): the block the server
	 * made for this claim says it is claimed, under a generation. R-CH1
	 * (server/chan.c) stores state last, with release; the block is
	 * ours alone, so a worker that rewrites it misleads only itself. */
	st = atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&ch->state,
				  memory_order_acquire);
	gen = ch->generation;
	if ((st != KVR_CHAN_HANDSHAKE && st != KVR_CHAN_ACTIVE) || gen == 0)
		return kvr_err_set(e, -EPROTO,
				   "channel %u: block state %u generation "
				   "%u; expected a claimed channel",
				   w->channel, st, gen);
	if (ch->req_ring_off != mine.req_ring_off ||
	    ch->resp_ring_off != mine.resp_ring_off)
		return kvr_err_set(e, -EPROTO,
				   "channel %u: ring offsets %u/%u, expected "
				   "%u/%u",
				   w->channel, ch->req_ring_off,
				   ch->resp_ring_off, mine.req_ring_off,
				   mine.resp_ring_off);
	*g = mine;
	*generation = gen;
	return 0;
}

/* Maps read-only what @server_pid holds as @fd; @what names it. */
static int open_server_fd(const char *what, pid_t server_pid, int fd,
			  size_t bytes, struct kvr_seg *out, struct kvr_err *e)
{
	char path[64];
	int bfd;

	if (server_pid <= 0 || fd < 0 || bytes == 0)
		return kvr_err_set(e, -EINVAL,
				   "open %s: pid %d fd %d, %zu bytes", what,
				   (int)server_pid, fd, bytes);
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)server_pid, fd);
	bfd = open(path, O_RDONLY | O_CLOEXEC);
	if (bfd < 0)
		return kvr_err_set(e, -errno, "open %s %s: %s%s", what, path,
				   strerror(errno),
				   errno == EACCES || errno == EPERM
				       ? " (run as root or as kvringd's uid)"
				       : "");
	/* Takes bfd: closed whatever happens. */
	return kvr_seg_attach_fd(bfd, bytes, PROT_READ, out, e);
}

int kvr_chanmap_open_disk_hist(pid_t server_pid, int fd, size_t bytes,
			       struct kvr_seg *out, struct kvr_err *e)
{
	return open_server_fd("disk histograms", server_pid, fd, bytes, out, e);
}

int kvr_chanmap_open_block(pid_t server_pid, int fd, size_t bytes,
			   struct kvr_seg *out, struct kvr_err *e)
{
	return open_server_fd("channel block", server_pid, fd, bytes, out, e);
}

int kvr_chanmap_open_dir(pid_t server_pid, int fd, size_t bytes,
			 struct kvr_seg *out, struct kvr_err *e)
{
	return open_server_fd("channel directory", server_pid, fd, bytes, out,
			      e);
}
