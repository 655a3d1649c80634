/* SPDX-License-Identifier: MIT */
/*
 * chanmap.h - how a worker reaches exactly its own channel (abi 3.0).
 *
 * A worker maps two control things besides the pool: the control segment
 * (header, counters) read-only, through a descriptor
 * that cannot be turned into a writable mapping, and its own channel block
 * read-write, a memfd the server created for this claim alone. This header
 * owns the three steps around those mappings: the server making the
 * read-only descriptor, the worker checking what it mapped against the
 * welcome (pure, fuzzed), and the inspector opening the channel directory
 * (abi 4.0: a memfd no worker is given) and a channel block from the
 * server's descriptor table. It does not own the layout (layout.h),
 * the segment backends (segment.h) or the handshake (proto.h).
 * docs/layout.md ("Mappings") and docs/reliability.md ("Threat model")
 * explain the choice.
 */
#ifndef KVRING_CHANMAP_H
#define KVRING_CHANMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kvring/error.h>
#include <kvring/layout.h>
#include <kvring/proto.h>
#include <kvring/segment.h>

/*
 * kvr_chanmap_ro_fd - a descriptor of the server's control segment @ctl
 * that maps only read-only, for the welcome. A memfd (created with
 * KVR_SEG_SEAL_LATER) is sealed F_SEAL_FUTURE_WRITE | F_SEAL_SEAL, so no
 * descriptor of it, however reopened, gives a writable mapping again; the
 * server's own mapping, made before, stays writable. Either backend loses
 * its write permission bits (a named file is created without them) and is
 * reopened O_RDONLY through /proc/self/fd, so mmap(PROT_WRITE, MAP_SHARED)
 * and mprotect(PROT_WRITE) fail with EACCES even for root.
 * On success *sealed says whether the memfd seal is in place.
 * Return: the new fd (close-on-exec), or -errno with the reason in @e.
 */
int kvr_chanmap_ro_fd(struct kvr_seg *ctl, bool *sealed, struct kvr_err *e);

/*
 * kvr_chanmap_check - a worker's check of its two control mappings
 * against the welcome @w that announced them: @ctl (@ctl_bytes, mapped
 * read-only) and its channel block @blk (@blk_bytes). Everything checked
 * here comes from the server and is also validated as untrusted input:
 * the ring geometry, the mapping sizes, the segment header (magic, ABI,
 * layout hash, ready), each header field the welcome repeats (a mismatch
 * names the field), and the block's own state (claimed) and generation
 * (not 0). The channel directory is not consulted: a worker has none. On
 * success *g receives the geometry (from the welcome's capacities) and
 * *generation the channel's. Return: 0; -EAGAIN header not ready; -EPROTO any
 * mismatch (message in
 * @e). Nothing is written through @ctl or @blk.
 */
int kvr_chanmap_check(const struct kvr_welcome *w, const void *ctl,
		      size_t ctl_bytes, const void *blk, size_t blk_bytes,
		      struct kvr_ctl_geom *g, uint32_t *generation,
		      struct kvr_err *e);

/*
 * kvr_chanmap_open_dir - map read-only the channel directory that process
 * @server_pid holds as descriptor @fd (the header's dir_fd), @bytes long
 * (the header's dir_bytes), through /proc/<pid>/fd/<fd>; the same rules
 * and errors as kvr_chanmap_open_block().
 */
int kvr_chanmap_open_dir(pid_t server_pid, int fd, size_t bytes,
			 struct kvr_seg *out, struct kvr_err *e);

/*
 * kvr_chanmap_open_block - map read-only the channel block that process
 * @server_pid holds as descriptor @fd (a directory entry's fd), through
 * /proc/<pid>/fd/<fd>: the inspector's way in (docs/inspect.md). The
 * kernel allows it to root and to the server's own uid (ptrace read
 * access), to no one else. The block is @bytes long at least.
 * Return: 0 with *out filled (kvr_seg_detach() it); -EACCES/-EPERM not
 * allowed; -ENOENT no such process or fd; -ERANGE too small; -errno.
 */
int kvr_chanmap_open_block(pid_t server_pid, int fd, size_t bytes,
			   struct kvr_seg *out, struct kvr_err *e);

/*
 * kvr_chanmap_open_disk_hist - map read-only the disk tier's histograms
 * (abi 5.5: struct kvr_disk_hist_shm) that process @server_pid holds as
 * descriptor @fd (the header's disk.hist_fd), @bytes long (its
 * disk.hist_bytes); the same rules and errors as kvr_chanmap_open_block().
 */
int kvr_chanmap_open_disk_hist(pid_t server_pid, int fd, size_t bytes,
			       struct kvr_seg *out, struct kvr_err *e);

#endif /* KVRING_CHANMAP_H */
