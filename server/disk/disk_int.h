/* SPDX-License-Identifier: MIT */
/*
 * disk_int.h - the disk tier's private state, shared by disk_file.c (the
 * directory, the lock, the data file), disk_index.c (records, hash index,
 * LRU), disk_io.c (the io_uring: writes, reads, the rebuild scan) and
 * disk_hash.c (the hashing thread). Loop thread only, except io->sum of
 * an I/O slot handed to the hashing thread (kvr__disk_hash_push) until
 * kvr__disk_hash_pop returns it.
 */
#ifndef KVR_DISK_INT_H
#define KVR_DISK_INT_H

#include <liburing.h>

#include <kvring/disk.h>

#define NIL UINT32_MAX

/* A record slot's state. */
enum rec_state {
	REC_UNKNOWN = 0, /* not scanned yet since start */
	REC_FREE,	 /* on the free list */
	REC_WRITING,	 /* a write is in flight; not in the index */
	REC_VALID,	 /* indexed, on the LRU */
	REC_DEAD,	 /* out of the index; freed when its reads end */
};

/*
 * struct rec - one record slot of the data file, in memory. Owned by the
 * tier (array d->rec); slot i sits at file offset KVR_DISK_BLOCK + i *
 * d->rec_bytes.
 */
struct rec {
	uint64_t ns_fp, lo, hi;
	uint64_t len, seq;
	uint32_t prev, next; /* LRU (VALID) or free list (FREE, via next) */
	uint32_t hnext;	     /* hash chain (VALID) */
	uint16_t readers;    /* reads in flight */
	uint8_t state;	     /* enum rec_state */
};

/* One I/O in flight: its header block and what to report. Owned by the
 * tier (array d->io), free ones on a stack. */
struct io {
	void *hdr; /* KVR_DISK_BLOCK bytes, 4 KiB aligned */
	uint64_t tag, start_ns, want;
	uint64_t sum; /* the payload's XXH3-64, set by the hashing thread */
	uint32_t rec;
	int kind; /* KVR_DISK_IO_* or IO_SCAN */
	struct iovec iov[2];
	/* Completions still to come (2: a fixed header and payload pair,
	 * kvr_disk_register), the bytes they moved, their first error. */
	uint32_t parts;
	int err;
	uint64_t got;
};

#define IO_SCAN 3

struct kvr_disk {
	struct kvr_disk_conf cf;
	char path[4200]; /* the data file */
	int fd, dirfd, efd;
	bool direct;
	struct io_uring ring;
	bool ring_ok;
	uint64_t rec_bytes; /* header block + payload */
	uint32_t nrec;
	struct rec *rec;
	uint32_t *hash; /* buckets: first record of each chain */
	uint32_t hmask;
	uint32_t lru_head, lru_tail, free_head;
	uint64_t seq; /* the last sequence number used or seen */
	uint32_t scan_next, scan_busy;
	uint64_t open_ns; /* when the tier was opened: the scan's start */
	struct io *io;
	uint32_t *io_free, nio_free, qd;
	struct kvr_disk_stats st;
	/* Rate limits of the error lines, one per kind. */
	uint64_t log_ns[4];
	bool gone; /* the data file was deleted under us (kvr_disk_check) */
	/* Registered buffers (kvr_disk_register): the I/O slots' header
	 * blocks at indexes 0..qd-1, then the caller's region in pieces of
	 * FIXED_PIECE bytes from index qd. */
	bool fixed;
	const char *fixed_base;
	uint64_t fixed_bytes;
	struct kvr__disk_hash *hasher; /* disk_hash.c; NULL until started */
	/* Told of every chunk dropped (kvr_disk_on_drop); NULL: nobody. */
	kvr_disk_drop_fn on_drop;
	void *drop_arg;
};

/* The kernel's limit for one registered buffer: 1 GiB. */
#define FIXED_PIECE (1ull << 30)

/* disk_file.c */
int kvr__disk_file_open(struct kvr_disk *d, char *err, size_t errlen);
void kvr__disk_file_close(struct kvr_disk *d);
/* Log one line per @kind (0-3) at most every few seconds. */
void kvr__disk_log_err(struct kvr_disk *d, int kind, const char *what, int rc);

/* disk_hash.c: the hashing thread, started by kvr_disk_open() after the
 * eventfd, stopped by kvr_disk_close() once no I/O slot is out. */
int kvr__disk_hash_start(struct kvr_disk *d);
void kvr__disk_hash_stop(struct kvr_disk *d);
/* Hand @io to the thread: io->sum = XXH3-64 of @len bytes at @p. */
void kvr__disk_hash_push(struct kvr_disk *d, struct io *io, const void *p,
			 uint64_t len);
/* An I/O slot whose sum is set, or NULL: the loop owns it again. */
struct io *kvr__disk_hash_pop(struct kvr_disk *d);
/* Whether kvr__disk_hash_pop() has a slot to return now. */
bool kvr__disk_hash_ready(const struct kvr_disk *d);

/* disk_index.c */
int kvr__disk_index_init(struct kvr_disk *d);
void kvr__disk_index_fini(struct kvr_disk *d);
uint32_t kvr__disk_index_find(const struct kvr_disk *d, uint64_t ns_fp,
			      uint64_t lo, uint64_t hi);
/* Record @r (its fields set) becomes VALID: indexed, at the LRU head (at
 * the tail if @cold: found by the scan); an older copy of its key becomes
 * dead. */
void kvr__disk_index_add(struct kvr_disk *d, uint32_t r, bool cold);
/* Take VALID record @r out of index and LRU: DEAD, or FREE if unread. */
void kvr__disk_index_drop(struct kvr_disk *d, uint32_t r);
/* The same for a record whose key leaves the disk (no newer copy): the
 * caller's kvr_disk_on_drop() function is told. */
void kvr__disk_index_lose(struct kvr_disk *d, uint32_t r);
void kvr__disk_lru_touch(struct kvr_disk *d, uint32_t r);
void kvr__disk_free_push(struct kvr_disk *d, uint32_t r);
/* A record to write into: free, else the LRU tail's (evicted). NIL if
 * none can be taken now. */
uint32_t kvr__disk_take(struct kvr_disk *d);

static inline uint64_t kvr__disk_rec_off(const struct kvr_disk *d, uint32_t r)
{
	return KVR_DISK_BLOCK + (uint64_t)r * d->rec_bytes;
}

#endif /* KVR_DISK_INT_H */
