/* SPDX-License-Identifier: MIT */
/*
 * disk_io.c - the disk tier's I/O on an io_uring of its own: opening and
 * closing the tier, record writes and reads straight between pool slots
 * and the data file (a header block and the slot, one writev or readv),
 * the checks of every record read (header, key, sequence, XXH3-64 of the
 * payload as it landed in the slot) before the caller may publish it,
 * and the rebuild scan that indexes the records of a previous run while
 * the server already serves. The payload sums are computed on the tier's
 * hashing thread (disk_hash.c). The ring's completions and the hashing
 * thread ring one eventfd the loop polls; the loop calls kvr_disk_poll()
 * to collect them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/error.h>
#include <kvring/log.h>

#include "disk_int.h"

/* O_DIRECT moves whole blocks: a short chunk's slot is this long. */
static uint64_t round_blk(uint64_t n)
{
	return (n + KVR_DISK_BLOCK - 1) & ~(uint64_t)(KVR_DISK_BLOCK - 1);
}

/* ---- I/O slots ---- */

/* A slot's index is its requests' user_data: no lookup at completion. */
static struct io *io_get(struct kvr_disk *d)
{
	return d->nio_free ? &d->io[d->io_free[--d->nio_free]] : NULL;
}

static void io_put(struct kvr_disk *d, struct io *io)
{
	d->io_free[d->nio_free++] = (uint32_t)(io - d->io);
}

/* The registered piece that holds the payload of @io (iov[1]) whole, or
 * -1: not registered, or outside the region, or across two pieces. */
static int fixed_piece(const struct kvr_disk *d, const struct io *io)
{
	const char *p = io->iov[1].iov_base;
	uint64_t lo, hi;

	if (!d->fixed || p < d->fixed_base ||
	    p + io->iov[1].iov_len > d->fixed_base + d->fixed_bytes)
		return -1;
	lo = (uint64_t)(p - d->fixed_base);
	hi = lo + io->iov[1].iov_len - 1;
	return lo / FIXED_PIECE == hi / FIXED_PIECE ? (int)(lo / FIXED_PIECE)
						    : -1;
}

/* Queue a header and a payload on registered buffers: two requests at
 * the record's offset and past its header block; both complete before
 * the I/O counts as done (kvr_disk_poll). */
static void submit_fixed(struct kvr_disk *d, struct io *io, int piece,
			 uint64_t off, bool write)
{
	struct io_uring_sqe *h = io_uring_get_sqe(&d->ring);
	struct io_uring_sqe *p = io_uring_get_sqe(&d->ring);
	int hidx = (int)(io - d->io), pidx = (int)d->qd + piece;

	if (write) {
		io_uring_prep_write_fixed(h, d->fd, io->hdr, KVR_DISK_BLOCK,
					  off, hidx);
		io_uring_prep_write_fixed(p, d->fd, io->iov[1].iov_base,
					  (unsigned)io->iov[1].iov_len,
					  off + KVR_DISK_BLOCK, pidx);
	} else {
		io_uring_prep_read_fixed(h, d->fd, io->hdr, KVR_DISK_BLOCK, off,
					 hidx);
		io_uring_prep_read_fixed(p, d->fd, io->iov[1].iov_base,
					 (unsigned)io->iov[1].iov_len,
					 off + KVR_DISK_BLOCK, pidx);
	}
	io_uring_sqe_set_data64(h, (uint64_t)(io - d->io));
	io_uring_sqe_set_data64(p, (uint64_t)(io - d->io));
	io->parts = 2;
}

/* Queue @io: a vectored read or write of its iovecs at record @io->rec's
 * offset (or, on registered buffers, the pair of fixed ones), submitted
 * at once (one syscall per record: records are large). */
static void io_submit(struct kvr_disk *d, struct io *io, unsigned niov,
		      bool write)
{
	uint64_t off = kvr__disk_rec_off(d, io->rec);
	int piece = niov == 2 ? fixed_piece(d, io) : -1;

	io->want = 0;
	for (unsigned i = 0; i < niov; i++)
		io->want += io->iov[i].iov_len;
	io->err = 0;
	io->got = 0;
	/* The ring has two entries per I/O slot: room for either way. */
	if (piece >= 0) {
		submit_fixed(d, io, piece, off, write);
	} else {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);

		if (write)
			io_uring_prep_writev(sqe, d->fd, io->iov, niov, off);
		else
			io_uring_prep_readv(sqe, d->fd, io->iov, niov, off);
		io_uring_sqe_set_data64(sqe, (uint64_t)(io - d->io));
		io->parts = 1;
	}
	io_uring_submit(&d->ring);
}

/* Header blocks at indexes 0..qd-1 (a slot's index is its header's),
 * then @base in pieces; 16384 buffers is the kernel's limit. Once, before
 * any I/O: the table must not change under requests in flight. */
int kvr_disk_register(struct kvr_disk *d, void *base, uint64_t bytes, char *err,
		      size_t errlen)
{
	uint64_t pieces = (bytes + FIXED_PIECE - 1) / FIXED_PIECE;
	struct iovec *iov;
	int rc;

	if (!d || !base || !bytes || d->fixed || pieces > 16384 - d->qd)
		return -EINVAL;
	iov = calloc(d->qd + pieces, sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	for (unsigned i = 0; i < d->qd; i++) {
		iov[i].iov_base = d->io[i].hdr;
		iov[i].iov_len = KVR_DISK_BLOCK;
	}
	for (uint64_t p = 0; p < pieces; p++) {
		iov[d->qd + p].iov_base = (char *)base + p * FIXED_PIECE;
		iov[d->qd + p].iov_len = bytes - p * FIXED_PIECE < FIXED_PIECE
					     ? bytes - p * FIXED_PIECE
					     : FIXED_PIECE;
	}
	rc = io_uring_register_buffers(&d->ring, iov,
				       (unsigned)(d->qd + pieces));
	free(iov);
	if (rc < 0) {
		snprintf(err, errlen,
			 "io_uring_register_buffers of %llu bytes in %llu "
			 "pieces: %s",
			 (unsigned long long)bytes, (unsigned long long)pieces,
			 strerror(-rc));
		return rc;
	}
	d->fixed = true;
	d->fixed_base = base;
	d->fixed_bytes = bytes;
	d->st.fixed = true;
	return 0;
}

/* ---- the rebuild scan ---- */

/* Read the header blocks of the next records, keeping half the I/O slots
 * for writes and read-throughs. Only the header block is read: that is
 * why a header has a block of its own (a file of 2 MiB records is
 * scanned at 512 times its reading speed). */
static void scan_submit(struct kvr_disk *d)
{
	while (d->scan_next < d->st.scan_total && d->nio_free > d->qd / 2) {
		struct io *io = io_get(d);

		io->kind = IO_SCAN;
		io->rec = d->scan_next++;
		io->iov[0].iov_base = io->hdr;
		io->iov[0].iov_len = KVR_DISK_BLOCK;
		d->scan_busy++;
		io_submit(d, io, 1, false);
	}
}

/* The scan has ended once every record was read or taken: say so once. */
static void scan_check_end(struct kvr_disk *d)
{
	if (!d->st.rebuilt && d->scan_next == d->st.scan_total &&
	    !d->scan_busy) {
		d->st.rebuilt = true;
		d->st.rebuild_ns = kvr_clock_now_ns() - d->open_ns;
		kvr_log_info("disk: index of %s rebuilt in %llu ms: %llu "
			     "chunks (%llu bytes), %llu records skipped as "
			     "torn or corrupt",
			     d->path,
			     (unsigned long long)(d->st.rebuild_ns / 1000000),
			     (unsigned long long)d->st.objects,
			     (unsigned long long)d->st.used_bytes,
			     (unsigned long long)d->st.corrupt);
	}
}

/* A scanned record enters the LRU at its cold end: its recency before
 * the restart is unknown, while what was written or read since is known
 * to be in use. Empty, torn or unreadable records are freed. The
 * newest sequence seen moves d->seq, so that new writes are newer. */
static void scan_done(struct kvr_disk *d, struct io *io, int res)
{
	const struct kvr_disk_hdr *h = io->hdr;
	struct rec *x = &d->rec[io->rec];
	int rc;

	d->scan_busy--;
	d->st.scanned++;
	if (x->state != REC_UNKNOWN)
		; /* taken for a write while its header was read */
	else if (res != (int)KVR_DISK_BLOCK) {
		d->st.io_errors++;
		kvr__disk_log_err(d, 0, "rebuild: read a header of",
				  res < 0 ? res : -EIO);
		kvr__disk_free_push(d, io->rec);
	} else if ((rc = kvr_disk_hdr_check(h, d->cf.chunk_bytes)) < 0) {
		if (rc == -EBADMSG)
			d->st.corrupt++; /* torn or damaged: skipped */
		kvr__disk_free_push(d, io->rec);
	} else {
		x->ns_fp = h->ns_fp;
		x->lo = h->key_lo;
		x->hi = h->key_hi;
		x->len = h->len;
		x->seq = h->seq;
		if (h->seq > d->seq)
			d->seq = h->seq;
		kvr__disk_index_add(d, io->rec, true);
	}
	scan_check_end(d);
}

/* ---- open and close ---- */

/* Open the tier: the file, the index, qd I/O slots with a 4 KiB aligned
 * header block each, and a ring whose completions ring an eventfd. A kept
 * file starts the scan, which kvr_disk_poll() drives. On error
 * kvr_disk_close() frees a tier half built (fds start at -1). */
int kvr_disk_open(const struct kvr_disk_conf *cf, unsigned qd,
		  struct kvr_disk **out, char *err, size_t errlen)
{
	struct kvr_disk *d;
	struct timespec now;
	uint64_t nrec;
	int rc, fresh;

	if (!cf || !out || !cf->dir[0] || qd == 0 || qd > 1024)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cf = *cf;
	d->fd = d->dirfd = d->efd = -1;
	d->open_ns = kvr_clock_now_ns();
	d->qd = qd;
	d->rec_bytes = KVR_DISK_BLOCK + cf->chunk_bytes;
	nrec = (cf->size_bytes - KVR_DISK_BLOCK) / d->rec_bytes;
	/* NIL ends every list of records, so it cannot be a record. */
	d->nrec = nrec >= NIL ? NIL - 1 : (uint32_t)nrec;
	fresh = kvr__disk_file_open(d, err, errlen);
	if (fresh < 0) {
		rc = fresh;
		goto fail;
	}
	rc = kvr__disk_index_init(d);
	d->io = calloc(qd, sizeof(*d->io));
	d->io_free = calloc(qd, sizeof(*d->io_free));
	if (rc < 0 || !d->io || !d->io_free)
		goto fail_nomem;
	for (unsigned i = 0; i < qd; i++) {
		if (posix_memalign(&d->io[i].hdr, KVR_DISK_BLOCK,
				   KVR_DISK_BLOCK))
			goto fail_nomem;
		/* A write sends the whole block; the header fills 64 bytes. */
		memset(d->io[i].hdr, 0, KVR_DISK_BLOCK);
		d->io_free[d->nio_free++] = qd - 1 - i;
	}
	/* Two entries per I/O slot: a registered pair takes two. */
	rc = io_uring_queue_init(2 * qd, &d->ring, 0);
	if (rc < 0) {
		snprintf(err, errlen, "--disk: io_uring for %s: %s", d->path,
			 strerror(-rc));
		goto fail;
	}
	d->ring_ok = true;
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->efd < 0 || io_uring_register_eventfd(&d->ring, d->efd) < 0) {
		rc = -errno;
		snprintf(err, errlen, "--disk: eventfd: %s", strerror(errno));
		goto fail;
	}
	rc = kvr__disk_hash_start(d);
	if (rc < 0) {
		snprintf(err, errlen, "--disk: the hashing thread: %s",
			 strerror(-rc));
		goto fail;
	}
	d->st.records = d->nrec;
	d->st.capacity_bytes = (uint64_t)d->nrec * cf->chunk_bytes;
	d->st.direct = d->direct;
	if (fresh) {
		/* In reverse, so that writes fill the file from its start. */
		for (uint32_t r = d->nrec; r-- > 0;)
			kvr__disk_free_push(d, r);
		d->st.rebuilt = true;
	} else {
		d->st.scan_total = d->nrec;
	}
	/* Sequence numbers go on from the wall clock's nanoseconds, so a
	 * record written after a restart is newer than any before it. */
	if (clock_gettime(CLOCK_REALTIME, &now) == 0 &&
	    (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec > d->seq)
		d->seq =
		    (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	*out = d;
	return 0;
fail_nomem:
	rc = -ENOMEM;
	snprintf(err, errlen, "--disk: out of memory for %u records", d->nrec);
fail:
	kvr_disk_close(d);
	return rc;
}

unsigned kvr_disk_room(const struct kvr_disk *d)
{
	return d->nio_free;
}

void kvr_disk_close(struct kvr_disk *d)
{
	struct kvr_disk_done dd[16];

	if (!d)
		return;
	/* The pool outlives the tier: wait for what moves or sums its
	 * bytes (an I/O slot stays out while its payload is hashed). */
	while (d->ring_ok && d->hasher && d->nio_free < d->qd) {
		kvr_disk_wait(d);
		(void)kvr_disk_poll(d, dd, 16);
	}
	kvr__disk_hash_stop(d);
	if (d->ring_ok)
		io_uring_queue_exit(&d->ring);
	if (d->efd >= 0)
		close(d->efd);
	kvr__disk_file_close(d);
	for (unsigned i = 0; d->io && i < d->qd; i++)
		free(d->io[i].hdr);
	free(d->io);
	free(d->io_free);
	kvr__disk_index_fini(d);
	free(d);
}

int kvr_disk_efd(const struct kvr_disk *d)
{
	return d->efd;
}

void kvr_disk_bell(struct kvr_disk *d)
{
	uint64_t v;

	/* EAGAIN: the count was already read; nothing is lost. */
	if (read(d->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		kvr_log_debug("disk: read eventfd: %s", strerror(errno));
}

const char *kvr_disk_path(const struct kvr_disk *d)
{
	return d->path;
}

/* ---- lookups, writes, reads ---- */

bool kvr_disk_has(const struct kvr_disk *d, uint64_t ns_fp,
		  const struct kvr_key *k)
{
	return kvr__disk_index_find(d, ns_fp, k->lo, k->hi) != NIL;
}

bool kvr_disk_find(struct kvr_disk *d, uint64_t ns_fp, const struct kvr_key *k,
		   uint64_t *len_out)
{
	uint32_t r = kvr__disk_index_find(d, ns_fp, k->lo, k->hi);

	if (r == NIL) {
		d->st.misses++;
		return false;
	}
	d->st.hits++;
	*len_out = d->rec[r].len;
	return true;
}

/* Take a record for a write: a free one, else (while the scan runs) the
 * last unscanned one, else the LRU tail's. */
static uint32_t take(struct kvr_disk *d)
{
	/* An unscanned record may hold nothing; the LRU tail is a chunk
	 * known good. Taken from the end, out of the scan's way. */
	if (d->free_head == NIL && d->scan_next < d->st.scan_total) {
		uint32_t r = (uint32_t)--d->st.scan_total;

		d->st.scanned++; /* not scanned: its old record is lost */
		scan_check_end(d);
		return r;
	}
	return kvr__disk_take(d);
}

/* The header, with the payload's sum, and the payload: one write. */
static void write_submit(struct kvr_disk *d, struct io *io)
{
	const struct rec *x = &d->rec[io->rec];
	struct kvr_key k = {.lo = x->lo, .hi = x->hi};

	kvr_disk_hdr_make(x->ns_fp, &k, x->len, io->sum, x->seq, io->hdr);
	io_submit(d, io, 2, true);
}

/*
 * Bounded: a chunk larger than a record is refused, and with the queue
 * full the write is dropped (counted), never waited for, so no worker
 * waits on the disk. The record stays out of the index (REC_WRITING)
 * until the whole write completes: no lookup can find it half written.
 */
int kvr_disk_write(struct kvr_disk *d, uint64_t ns_fp, const struct kvr_key *k,
		   const void *buf, uint64_t len, uint64_t sum, bool has_sum,
		   uint64_t tag)
{
	struct io *io;
	struct rec *x;
	uint32_t r;

	if (len == 0 || len > d->cf.chunk_bytes) {
		d->st.dropped++;
		return -EFBIG;
	}
	if (kvr__disk_index_find(d, ns_fp, k->lo, k->hi) != NIL)
		return -EEXIST;
	/* The file lost its name (kvr_disk_check): nothing more into it. */
	if (d->gone) {
		d->st.dropped++;
		return -ENOENT;
	}
	if (!d->nio_free) {
		d->st.dropped++;
		return -EAGAIN;
	}
	r = take(d);
	if (r == NIL) {
		d->st.dropped++;
		return -ENOSPC;
	}
	io = io_get(d);
	io->start_ns = kvr_clock_now_ns();
	x = &d->rec[r];
	x->ns_fp = ns_fp;
	x->lo = k->lo;
	x->hi = k->hi;
	x->len = len;
	x->seq = ++d->seq;
	x->state = REC_WRITING;
	x->readers = 0;
	io->kind = KVR_DISK_IO_WRITE;
	io->rec = r;
	io->tag = tag;
	io->iov[0].iov_base = io->hdr;
	io->iov[0].iov_len = KVR_DISK_BLOCK;
	/* Not copied: the kernel reads the pinned pool slot itself. */
	io->iov[1].iov_base = (void *)(uintptr_t)buf;
	io->iov[1].iov_len = round_blk(len);
	if (!has_sum) {
		/* Summed on the hashing thread; write_submit() follows. */
		kvr__disk_hash_push(d, io, buf, len);
		return 0;
	}
	io->sum = sum;
	write_submit(d, io);
	return 0;
}

/* Another length than the caller's is a miss: its slot was reserved for
 * that length. The reader count keeps the record from being taken for a
 * write (kvr__disk_take skips it) until the read ends. */
int kvr_disk_read(struct kvr_disk *d, uint64_t ns_fp, const struct kvr_key *k,
		  void *buf, uint64_t len, uint64_t tag)
{
	uint32_t r = kvr__disk_index_find(d, ns_fp, k->lo, k->hi);
	struct io *io;

	if (r == NIL || d->rec[r].len != len)
		return -ENOENT;
	io = io_get(d);
	if (!io)
		return -EAGAIN;
	io->start_ns = kvr_clock_now_ns();
	d->rec[r].readers++;
	kvr__disk_lru_touch(d, r);
	io->kind = KVR_DISK_IO_READ;
	io->rec = r;
	io->tag = tag;
	io->iov[0].iov_base = io->hdr;
	io->iov[0].iov_len = KVR_DISK_BLOCK;
	io->iov[1].iov_base = buf;
	io->iov[1].iov_len = round_blk(len);
	io_submit(d, io, 2, false);
	return 0;
}

/* ---- completions ---- */

/* Only a write that moved every byte is indexed; a failure is counted,
 * logged at most once per kind every 5 s, and frees the record. */
static int write_done(struct kvr_disk *d, struct io *io, int res)
{
	struct rec *x = &d->rec[io->rec];

	if (res == (int)io->want) {
		d->st.writes++;
		d->st.write_bytes += x->len;
		kvr__disk_index_add(d, io->rec, false);
		return 0;
	}
	res = res < 0 ? res : -ENOSPC; /* short: the file system is full */
	d->st.dropped++;
	if (res == -ENOSPC) {
		d->st.no_space++;
		kvr__disk_log_err(d, 1, "write to", res);
	} else {
		d->st.io_errors++;
		kvr__disk_log_err(d, 2, "write to", res);
	}
	kvr__disk_free_push(d, io->rec);
	return res;
}

/* Everything a read must agree on, but the payload's sum: the bytes all
 * moved, and a header that is this record's. */
static int read_check(struct kvr_disk *d, struct io *io, int res)
{
	const struct kvr_disk_hdr *h = io->hdr;
	const struct rec *x = &d->rec[io->rec];

	if (res != (int)io->want) {
		d->st.io_errors++;
		kvr__disk_log_err(d, 3, "read from", res < 0 ? res : -EIO);
		return res < 0 ? res : -EIO;
	}
	if (kvr_disk_hdr_check(h, d->cf.chunk_bytes) < 0 ||
	    h->ns_fp != x->ns_fp || h->key_lo != x->lo || h->key_hi != x->hi ||
	    h->len != x->len || h->seq != x->seq)
		return -EBADMSG;
	return 0;
}

/* A read ends with @rc: 0 once its header checked and the payload's sum
 * (over the bytes as they landed, so what is checked is served) agreed
 * with it. A record that failed a check leaves the index, never to be
 * read again; one dropped while read (DEAD) is freed by its last
 * reader. */
static void read_done(struct kvr_disk *d, struct io *io, int rc,
		      struct kvr_disk_done *out)
{
	struct rec *x = &d->rec[io->rec];

	out->rc = rc;
	if (rc == 0) {
		out->sum = io->sum;
		d->st.reads++;
		d->st.read_bytes += x->len;
	}
	x->readers--;
	if (out->rc == -EBADMSG) {
		d->st.corrupt++;
		if (x->state == REC_VALID)
			kvr__disk_index_lose(d, io->rec); /* never again */
	}
	if (x->state == REC_DEAD && !x->readers)
		kvr__disk_free_push(d, io->rec);
}

/* Fill @out for a read or write of @io that ended. */
static void report(struct kvr_disk_done *out, const struct io *io)
{
	memset(out, 0, sizeof(*out));
	out->tag = io->tag;
	out->kind = io->kind;
	out->ns = kvr_clock_now_ns() - io->start_ns;
}

/* Slots back from the hashing thread: a write goes to the disk with its
 * sum in the header; a read whose header checked ends, served only if the
 * sum of the bytes it landed agrees with the header's. */
static unsigned hashed(struct kvr_disk *d, struct kvr_disk_done *out,
		       unsigned max)
{
	unsigned n = 0;
	struct io *io;

	while (n < max && (io = kvr__disk_hash_pop(d))) {
		const struct kvr_disk_hdr *h = io->hdr;

		if (io->kind == KVR_DISK_IO_WRITE) {
			write_submit(d, io);
			continue;
		}
		report(&out[n], io);
		read_done(d, io, io->sum == h->sum ? 0 : -EBADMSG, &out[n]);
		io_put(d, io);
		n++;
	}
	return n;
}

/* Scan completions are handled here, not reported; the scan is topped
 * up again after them, since they freed I/O slots. A read whose header
 * checked goes on to the hashing thread and ends in hashed(). */
unsigned kvr_disk_poll(struct kvr_disk *d, struct kvr_disk_done *out,
		       unsigned max)
{
	struct io_uring_cqe *cqe;
	unsigned n = hashed(d, out, max);

	scan_submit(d);
	while (n < max && io_uring_peek_cqe(&d->ring, &cqe) == 0) {
		struct io *io = &d->io[cqe->user_data];
		int res = cqe->res;

		io_uring_cqe_seen(&d->ring, cqe);
		/* An I/O is done with its last completion (a fixed pair has
		 * two), with the bytes all moved or the first error. */
		if (res < 0 && !io->err)
			io->err = res;
		else if (res >= 0)
			io->got += (uint64_t)res;
		if (io->parts > 1) {
			io->parts--;
			continue;
		}
		res = io->err ? io->err : (int)io->got;
		if (io->kind == IO_SCAN) {
			scan_done(d, io, res);
			io_put(d, io);
			continue;
		}
		if (io->kind == KVR_DISK_IO_READ &&
		    (res = read_check(d, io, res)) == 0) {
			kvr__disk_hash_push(d, io, io->iov[1].iov_base,
					    d->rec[io->rec].len);
			continue;
		}
		report(&out[n], io);
		if (io->kind == KVR_DISK_IO_WRITE)
			out[n].rc = write_done(d, io, res);
		else
			read_done(d, io, res, &out[n]);
		io_put(d, io);
		n++;
	}
	scan_submit(d);
	return n;
}

/* Both the ring and the hashing thread ring the eventfd: read it first
 * (a count left from work already collected), then look for work ready
 * now, and only then sleep on it, so no wake-up is lost. */
void kvr_disk_wait(struct kvr_disk *d)
{
	struct pollfd pfd = {.fd = d->efd, .events = POLLIN};
	struct io_uring_cqe *cqe;
	uint64_t v;

	if (d->nio_free == d->qd)
		return;
	if (read(d->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		kvr_log_debug("disk: read eventfd: %s", strerror(errno));
	if (io_uring_peek_cqe(&d->ring, &cqe) == 0 || kvr__disk_hash_ready(d))
		return;
	(void)poll(&pfd, 1, -1);
}

void kvr_disk_stats(const struct kvr_disk *d, struct kvr_disk_stats *out)
{
	*out = d->st;
	out->queue_depth = d->qd - d->nio_free;
}
