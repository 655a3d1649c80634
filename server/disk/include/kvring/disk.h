/* SPDX-License-Identifier: MIT */
/*
 * <kvring/disk.h> - kvringd's local disk tier, the static library
 * kvr_disk (server/disk/, docs/storage.md "The disk tier", the record
 * format in docs/layout.md): one preallocated data file of fixed-size
 * records under --disk DIR, an index and an LRU of its records in memory,
 * and an io_uring of its own that moves payload straight between pool
 * slots and the file (O_DIRECT; buffered where the file system refuses
 * it). kvringd's loop side is server/disk_srv.c.
 *
 * Threading: one owner thread (kvringd's event loop) calls everything
 * here; nothing blocks except kvr_disk_open() and kvr_disk_close(). The
 * payload sums run on a hashing thread the tier starts and joins itself,
 * which reads only the slots named and rings the tier's eventfd. The
 * library never touches the store: the caller pins or reserves the pool
 * slots it names, and learns when their I/O ended from kvr_disk_poll().
 */
#ifndef KVRING_DISK_H
#define KVRING_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvring/proto.h> /* struct kvr_key */

/* ---- Options (disk_conf.c) ---- */

enum kvr_disk_mode {
	KVR_DISK_EVICT = 0, /* write a chunk when the pool is about to
			       evict it (write-back; the default) */
	KVR_DISK_COMMIT,    /* write every committed chunk (write-through) */
};

/* Defaults and limits of the --disk* options. */
#define KVR_DISK_DEF_SIZE  (1ull << 30)
#define KVR_DISK_MIN_SIZE  (16ull << 20)
#define KVR_DISK_DEF_CHUNK (2ull << 20)
#define KVR_DISK_MAX_CHUNK (256ull << 20)
#define KVR_DISK_BLOCK	   4096u /* record alignment, header block */
#define KVR_DISK_FILE	   "kvring-disk.dat"

/*
 * struct kvr_disk_conf - the --disk* options. Owned by kvringd's config
 * (struct kvr_config, on main's stack); copied by kvr_disk_open().
 */
struct kvr_disk_conf {
	char dir[4096];	      /* --disk DIR; "" = the tier is off */
	uint64_t size_bytes;  /* --disk-size: the data file's size */
	uint64_t chunk_bytes; /* --disk-chunk: largest chunk kept (record
				 payload), a multiple of 4 KiB */
	int mode;	      /* --disk-mode: enum kvr_disk_mode */
};

/* kvr_disk_conf_defaults - the tier off, and every default. */
void kvr_disk_conf_defaults(struct kvr_disk_conf *c);

/*
 * kvr_disk_conf_opt - apply long option @name ("disk", "disk-size",
 * "disk-mode", "disk-chunk") with value @val.
 * Return: 0, or -EINVAL with one sentence in @err (what was wrong and
 * what is accepted).
 */
int kvr_disk_conf_opt(struct kvr_disk_conf *c, const char *name,
		      const char *val, char *err, size_t errlen);

/*
 * kvr_disk_conf_check - the options together: size at least
 * KVR_DISK_MIN_SIZE and room for a few records, an absolute DIR.
 * Return: 0, or -EINVAL with one sentence in @err.
 */
int kvr_disk_conf_check(const struct kvr_disk_conf *c, char *err,
			size_t errlen);

/* ---- The record format (disk_fmt.c, docs/layout.md) ---- */

#define KVR_DISK_MAGIC	   0x4b44564bu /* "KVDK" little-endian */
#define KVR_DISK_SB_MAGIC  0x5344564bu /* "KVDS": the superblock */
#define KVR_DISK_VERSION   1u
#define KVR_DISK_HDR_BYTES 64u

/*
 * struct kvr_disk_hdr - the first 64 bytes of a record's 4 KiB header
 * block (the rest of the block is zero). Little-endian on disk, as in
 * memory on every host kvring builds for.
 */
struct kvr_disk_hdr {
	uint32_t magic;	    /* KVR_DISK_MAGIC */
	uint16_t version;   /* KVR_DISK_VERSION */
	uint16_t hdr_bytes; /* KVR_DISK_HDR_BYTES */
	uint64_t ns_fp;	    /* namespace fingerprint */
	uint64_t key_lo, key_hi;
	uint64_t len;	  /* payload bytes */
	uint64_t sum;	  /* XXH3-64 of the payload */
	uint64_t seq;	  /* write sequence: the newest copy of a key wins */
	uint64_t hdr_sum; /* XXH3-64 of bytes 0..55 */
};

/* kvr_disk_hdr_make - fill @out for one record. */
void kvr_disk_hdr_make(uint64_t ns_fp, const struct kvr_key *k, uint64_t len,
		       uint64_t sum, uint64_t seq, struct kvr_disk_hdr *out);

/*
 * kvr_disk_hdr_check - is @h a well-formed header (magic, version, size,
 * header sum), with a payload of at most @max_len bytes?
 * Return: 0; -ENODATA for an all-zero header (a record never written);
 * -EBADMSG for anything else (torn or corrupt).
 */
int kvr_disk_hdr_check(const struct kvr_disk_hdr *h, uint64_t max_len);

/* kvr_disk_sum - XXH3-64 of @len bytes at @p (the payload sum). */
uint64_t kvr_disk_sum(const void *p, uint64_t len);

/* ---- The tier (disk_file.c, disk_index.c, disk_io.c) ---- */

struct kvr_disk;

/*
 * struct kvr_disk_stats - what the tier counted since kvr_disk_open().
 * A snapshot, filled by kvr_disk_stats().
 */
struct kvr_disk_stats {
	uint64_t capacity_bytes;      /* records * payload bytes per record */
	uint64_t used_bytes;	      /* payload bytes of the indexed records */
	uint64_t objects;	      /* indexed records */
	uint64_t records;	      /* record slots in the file */
	uint64_t hits, misses;	      /* kvr_disk_find() */
	uint64_t reads, read_bytes;   /* read-throughs that verified */
	uint64_t writes, write_bytes; /* records written */
	uint64_t queue_depth;	      /* I/Os in flight now */
	uint64_t corrupt;   /* records that failed a check (scan or read) */
	uint64_t dropped;   /* writes not done: queue full, too large,
			       I/O error, full disk */
	uint64_t io_errors; /* reads or writes the kernel failed */
	uint64_t no_space;  /* writes refused with ENOSPC */
	uint64_t evictions; /* records replaced by the disk's LRU */
	uint64_t scanned, scan_total; /* rebuild progress, in records */
	uint64_t rebuild_ns;	      /* the scan's time, once it ended */
	uint64_t deleted; /* 1 once the data file was found deleted */
	bool direct;
	bool fixed;
	/* registered buffers in use (kvr_disk_register) */ /* O_DIRECT in
							       use */
	bool rebuilt; /* the rebuild scan has ended */
};

/*
 * kvr_disk_open - check @cf->dir (owned by the caller's uid, not
 * writable by group or others, no symlink in the path; made 0700 if
 * missing), take the lock against a second server, open or create the
 * data file (0600, preallocated), read its superblock (a file of another
 * geometry is reformatted, logged), and start the rebuild scan, which
 * kvr_disk_poll() drives. @qd: I/Os in flight at most.
 * Return: 0 and the tier in *@out, or -errno with one sentence in @err.
 */
int kvr_disk_open(const struct kvr_disk_conf *cf, unsigned qd,
		  struct kvr_disk **out, char *err, size_t errlen);

/* kvr_disk_close - wait for the I/O in flight, close the file, free the
 * tier. NULL-safe. */
void kvr_disk_close(struct kvr_disk *d);

/* kvr_disk_efd - the eventfd that becomes readable when I/O completes
 * or a payload's sum is ready (poll it; kvr_disk_bell() reads it). */
int kvr_disk_efd(const struct kvr_disk *d);

/* kvr_disk_bell - read the eventfd after it polled readable. */
void kvr_disk_bell(struct kvr_disk *d);

/*
 * kvr_disk_find - is the chunk (@ns_fp, @k) on disk and readable now?
 * Counts a hit or a miss. Return: true and its length in *@len_out.
 */
bool kvr_disk_find(struct kvr_disk *d, uint64_t ns_fp, const struct kvr_key *k,
		   uint64_t *len_out);

/* kvr_disk_has - like kvr_disk_find, counting nothing. */
bool kvr_disk_has(const struct kvr_disk *d, uint64_t ns_fp,
		  const struct kvr_key *k);

/* What a finished I/O was (struct kvr_disk_done.kind). */
enum { KVR_DISK_IO_WRITE = 1, KVR_DISK_IO_READ };

/* struct kvr_disk_done - one finished read or write (kvr_disk_reap). */
struct kvr_disk_done {
	uint64_t tag; /* the caller's, as given */
	int kind;     /* KVR_DISK_IO_* */
	int rc;	      /* 0, -EBADMSG (failed a check: not served),
			 -ENOSPC, -EIO or another -errno */
	uint64_t sum; /* read: XXH3-64 of the payload */
	uint64_t ns;  /* time from submit to completion */
};

/*
 * kvr_disk_write - queue one record: header and the @len payload bytes at
 * @buf, which must be 4 KiB aligned with round_up(@len, 4 KiB) bytes
 * readable (a pool slot). The caller keeps @buf pinned until the write's
 * kvr_disk_done. @sum: the payload's XXH3-64 if @has_sum, else computed
 * here.
 * Return: 0 queued; -EEXIST the chunk is already on disk (nothing
 * queued); -EAGAIN queue full, -EFBIG larger than a record, -ENOSPC no
 * record can be freed (all busy): nothing queued, counted as dropped.
 */
int kvr_disk_write(struct kvr_disk *d, uint64_t ns_fp, const struct kvr_key *k,
		   const void *buf, uint64_t len, uint64_t sum, bool has_sum,
		   uint64_t tag);

/*
 * kvr_disk_read - queue a read of the chunk (@ns_fp, @k), @len bytes, into
 * @buf (4 KiB aligned, round_up(@len, 4 KiB) bytes writable: a reserved
 * pool slot). Its kvr_disk_done says whether header and payload checked.
 * Return: 0 queued; -ENOENT not on disk (or another length); -EAGAIN
 * queue full.
 */
int kvr_disk_read(struct kvr_disk *d, uint64_t ns_fp, const struct kvr_key *k,
		  void *buf, uint64_t len, uint64_t tag);

/*
 * kvr_disk_register - register the I/O slots' header blocks and the
 * region @base (@bytes long, the pool) with the tier's io_uring, so that
 * a record whose payload lies inside @base moves with READ_FIXED /
 * WRITE_FIXED (two requests: header and payload) and the kernel skips
 * pinning its pages at every I/O. Call once, before any I/O. The region
 * must stay mapped until kvr_disk_close(). Pinning needs memory the
 * kernel lets it pin (a hugetlb mapping; RLIMIT_MEMLOCK without
 * CAP_IPC_LOCK): on failure nothing changes and the plain vectored path
 * stays in use.
 * Return: 0, or -errno with one sentence in @err.
 */
int kvr_disk_register(struct kvr_disk *d, void *base, uint64_t bytes, char *err,
		      size_t errlen);

/* kvr_disk_room - I/Os that can be queued now. */
unsigned kvr_disk_room(const struct kvr_disk *d);

/*
 * kvr_disk_poll - drive the rebuild scan and collect finished I/O: up to
 * @max completions of reads and writes go to @out.
 * Return: how many were written to @out.
 */
unsigned kvr_disk_poll(struct kvr_disk *d, struct kvr_disk_done *out,
		       unsigned max);

/* kvr_disk_wait - block until an I/O in flight completes or a sum is
 * ready (none in flight: return at once); then kvr_disk_poll() collects
 * it. For shutdown. */
void kvr_disk_wait(struct kvr_disk *d);

/* kvr_disk_stats - a snapshot of the counters. */
void kvr_disk_stats(const struct kvr_disk *d, struct kvr_disk_stats *out);

/*
 * kvr_disk_check - whether the data file still has a name (fstat: a link
 * count of 0 means it, or its directory, was deleted under us). The first
 * time it has none: one log line, stats.deleted = 1, and from then on
 * every write is refused (-ENOENT, counted as dropped) so that no more
 * space goes to a file nobody can see; what the index holds is still read
 * from the open file, exact, until a restart makes a new one. Cheap (one
 * fstat): call it every fraction of a second.
 * Return: true while the file is usable for writes.
 */
bool kvr_disk_check(struct kvr_disk *d);

/*
 * kvr_disk_drop_fn - a chunk left the disk with no other copy of its key
 * there: its record was taken by the disk's LRU for a new write, or
 * failed a check on a read. Called on the owner thread from inside
 * kvr_disk_write() or kvr_disk_poll(); it must not call back into the
 * tier. @arg: kvr_disk_on_drop()'s.
 */
typedef void (*kvr_disk_drop_fn)(void *arg, uint64_t ns_fp,
				 const struct kvr_key *k);

/* kvr_disk_on_drop - call @fn(@arg, ...) for every chunk the tier drops
 * from now on (NULL: nobody is told, the default). */
void kvr_disk_on_drop(struct kvr_disk *d, kvr_disk_drop_fn fn, void *arg);

/* kvr_disk_path - the data file's path (for log lines). */
const char *kvr_disk_path(const struct kvr_disk *d);

#endif /* KVRING_DISK_H */
