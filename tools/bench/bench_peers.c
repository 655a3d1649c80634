/* SPDX-License-Identifier: MIT */
/*
 * bench_peers.c - floors and peers of kvring-bench (see bench_peers.h):
 * a cache-line ping-pong, an eventfd ping-pong waited for in io_uring, a
 * Unix stream socket and ZeroMQ REQ/REP over ipc://, each as a forked echo
 * child pinned to the server CPU. The child dies with the parent
 * (PR_SET_PDEATHSIG), and the parent bounds every wait, so a dead child
 * fails the run instead of hanging it. Nothing here prints figures.
 */
#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(KVR_HAVE_ZMQ) && KVR_HAVE_ZMQ
#include <zmq.h>
#define HAVE_ZMQ 1
#else
#define HAVE_ZMQ 0
#endif

#include "bench_common.h"
#include "bench_peers.h"
#include "bench_stamp.h"

/* eventfd value that tells the eventfd child to exit (seqs stay below). */
#define EFD_EXIT (1ull << 50)

/*
 * Shared block of the cache-line and eventfd floors, each hot line on its
 * own 128-byte block. A message is three payload words and a sequence
 * word, 32 bytes; the sequence word is written last with release and read
 * first with acquire (the payload words are relaxed: ordered by it).
 */
struct msg_line_shm {
	_Atomic uint64_t w[3];
	_Atomic uint64_t seq;
	uint8_t pad[96];
};

struct floor_shm {
	struct msg_line_shm a; /* client -> child */
	struct msg_line_shm b; /* child -> client */
	/* Cache-line child: iterations of the next round and its first seq,
	 * written before the command eventfd is written (the syscall orders
	 * them). */
	uint64_t round_n;
	uint64_t round_first;
};

struct bench_peer {
	enum bench_peer_kind kind;
	pid_t child;
	bool reaped;
	uint64_t seq;	       /* last sequence number used */
	struct floor_shm *shm; /* floors */
	int efd_cmd;	       /* cache line: round commands to the child */
	int efd_a, efd_b;      /* eventfd floor: to child, to client */
	struct io_uring ring;  /* eventfd floor: the client's waiter */
	bool ring_ok;
	int sock;	    /* uds */
	void *zctx, *zsock; /* zeromq */
	char zpath[96];
};

bool bench_peer_built(enum bench_peer_kind k)
{
	return k != BENCH_PEER_ZMQ || HAVE_ZMQ;
}

const char *bench_peer_subject(enum bench_peer_kind k)
{
	switch (k) {
	case BENCH_PEER_CACHELINE:
		return "floor_cacheline";
	case BENCH_PEER_EVENTFD_URING:
		return "floor_eventfd_uring";
	case BENCH_PEER_UDS:
		return "uds";
	case BENCH_PEER_ZMQ:
		return "zeromq";
	}
	return "?";
}

/* Parent: true once the child is gone (checked cheaply every 2^20 calls). */
static bool child_gone(struct bench_peer *p, unsigned *spins)
{
	if (p->reaped)
		return true;
	if ((++*spins & 0xfffffu) != 0)
		return false;
	if (waitpid(p->child, NULL, WNOHANG) == 0)
		return false;
	p->reaped = true;
	fprintf(stderr, "kvring-bench: %s: echo child died\n",
		bench_peer_subject(p->kind));
	return true;
}

static int read_full(int fd, void *buf, size_t n)
{
	unsigned char *b = buf;

	while (n) {
		ssize_t r = read(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -EPIPE : -errno;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
	const unsigned char *b = buf;

	while (n) {
		ssize_t r = write(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The message of round trip @seq: three payload words derived from it. */
static void msg_words(uint64_t seq, uint64_t w[3])
{
	w[0] = seq * 0x9e3779b97f4a7c15ull;
	w[1] = ~seq;
	w[2] = seq ^ 0x5555aaaa5555aaaaull;
}

/* ---- children --------------------------------------------------------- */

static void child_cacheline(struct bench_peer *p)
{
	struct floor_shm *s = p->shm;

	for (;;) {
		uint64_t cmd, n, first;

		/* Block between rounds: never spin while others measure. */
		if (read_full(p->efd_cmd, &cmd, 8) < 0)
			_exit(1);
		n = s->round_n;
		first = s->round_first;
		if (n == 0)
			_exit(0);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t want = first + i, w[3];

			/* A-BP1: pairs with R-BP1 in cacheline_rtt(). */
			while (atomic_load_explicit(
				   &s->a.seq, memory_order_acquire) != want)
				kvr_clock_relax();
			for (int k = 0; k < 3; k++)
				/* Relaxed: ordered after R-BP1 by A-BP1. */
				w[k] = atomic_load_explicit(
				    &s->a.w[k], memory_order_relaxed);
			for (int k = 0; k < 3; k++)
				/* Relaxed: published by R-BP2. */
				atomic_store_explicit(&s->b.w[k], w[k],
						      memory_order_relaxed);
			/* R-BP2: pairs with A-BP2 in cacheline_rtt(). */
			atomic_store_explicit(&s->b.seq, want,
					      memory_order_release);
		}
	}
}

static void child_eventfd(struct bench_peer *p)
{
	struct floor_shm *s = p->shm;
	struct io_uring ring;

	if (io_uring_queue_init(4, &ring, 0) < 0)
		_exit(1);
	for (;;) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct io_uring_cqe *cqe;
		uint64_t val = 0, one;
		int rc;

		/* The waiter: an io_uring read of the request eventfd. */
		io_uring_prep_read(sqe, p->efd_a, &val, 8, 0);
		rc = io_uring_submit_and_wait(&ring, 1);
		if (rc < 0 && rc != -EINTR)
			_exit(1);
		if (io_uring_peek_cqe(&ring, &cqe) < 0)
			continue;
		rc = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		if (rc != 8 || val >= EFD_EXIT)
			_exit(rc == 8 ? 0 : 1);
		/* The eventfd read ordered the message; echo it back.
		 * Relaxed throughout: the kernel's eventfd write/read pair
		 * (efd_a here, efd_b back) orders the words both ways, as a
		 * futex or pipe would; atomics only keep them untorn. */
		for (int k = 0; k < 3; k++)
			atomic_store_explicit(
			    &s->b.w[k],
			    atomic_load_explicit(&s->a.w[k],
						 memory_order_relaxed),
			    memory_order_relaxed);
		atomic_store_explicit(
		    &s->b.seq,
		    atomic_load_explicit(&s->a.seq, memory_order_relaxed),
		    memory_order_relaxed);
		one = val;
		if (write_full(p->efd_b, &one, 8) < 0)
			_exit(1);
	}
}

static void child_uds(struct bench_peer *p)
{
	unsigned char buf[BENCH_MSG_BYTES];

	for (;;) {
		if (read_full(p->sock, buf, sizeof(buf)) < 0)
			_exit(0); /* EOF: the client is done */
		if (write_full(p->sock, buf, sizeof(buf)) < 0)
			_exit(1);
	}
}

/* Header of every zeromq request (the first part; 32 bytes). */
enum { ZOP_ECHO = 1, ZOP_STORE, ZOP_RETRIEVE, ZOP_EXIT };
struct zhdr {
	uint32_t op;
	uint32_t n;
	uint64_t bytes;
	uint64_t seq;
	uint64_t pad;
};
_Static_assert(sizeof(struct zhdr) == BENCH_MSG_BYTES, "32-byte message");

#if HAVE_ZMQ
static void child_zmq(struct bench_peer *p, uint64_t pool_bytes)
{
	unsigned char *pool = NULL;
	void *ctx = zmq_ctx_new(), *sock;
	struct zhdr h;

	if (pool_bytes) {
		pool = mmap(NULL, pool_bytes, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (pool == MAP_FAILED)
			_exit(1);
		/* Pre-faulted like kvring's pool: no first touch measured. */
		for (uint64_t off = 0; off < pool_bytes; off += 4096)
			pool[off] = 1;
	}
	sock = ctx ? zmq_socket(ctx, ZMQ_REP) : NULL;
	if (!sock || zmq_bind(sock, p->zpath) < 0)
		_exit(1);
	/* Tell the parent the endpoint exists. */
	{
		uint64_t one = 1;

		if (write_full(p->efd_b, &one, 8) < 0)
			_exit(1);
	}
	for (;;) {
		int more = 0;
		size_t ml = sizeof(more);

		if (zmq_recv(sock, &h, sizeof(h), 0) != (int)sizeof(h))
			_exit(1);
		if (h.op == ZOP_ECHO || h.op == ZOP_EXIT) {
			if (zmq_send(sock, &h, sizeof(h), 0) < 0)
				_exit(1);
			if (h.op == ZOP_EXIT)
				break;
			continue;
		}
		if (!pool || h.n == 0 || h.bytes > pool_bytes / h.n)
			_exit(1);
		if (h.op == ZOP_STORE) {
			/* Each part into its slot, as a cache server would. */
			for (uint32_t i = 0; i < h.n; i++) {
				zmq_msg_t m;

				zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
				if (!more)
					_exit(1);
				zmq_msg_init(&m);
				if (zmq_msg_recv(&m, sock, 0) < 0 ||
				    zmq_msg_size(&m) != h.bytes)
					_exit(1);
				memcpy(pool + i * h.bytes, zmq_msg_data(&m),
				       h.bytes);
				zmq_msg_close(&m);
			}
			if (zmq_send(sock, &h, sizeof(h), 0) < 0)
				_exit(1);
		} else if (h.op == ZOP_RETRIEVE) {
			/* zmq_send copies each slot into a message. */
			if (zmq_send(sock, &h, sizeof(h), ZMQ_SNDMORE) < 0)
				_exit(1);
			for (uint32_t i = 0; i < h.n; i++) {
				if (zmq_send(sock, pool + i * h.bytes, h.bytes,
					     i + 1 < h.n ? ZMQ_SNDMORE : 0) < 0)
					_exit(1);
			}
		} else {
			_exit(1);
		}
	}
	zmq_close(sock);
	zmq_ctx_term(ctx);
	_exit(0);
}
#endif

/* ---- start / stop ----------------------------------------------------- */

int bench_peer_start(enum bench_peer_kind k, int cpu_server,
		     uint64_t pool_bytes, struct bench_peer **out)
{
	static unsigned zseq;
	struct bench_peer *p;
	int sv[2] = {-1, -1}, rc;

#ifndef KVR_HAVE_ZMQ
	/* Only the ZeroMQ peer maps a pool of its own. */
	(void)pool_bytes;
#endif
	if (!bench_peer_built(k))
		return -ENOTSUP;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->kind = k;
	p->efd_cmd = p->efd_a = p->efd_b = p->sock = -1;
	if (k == BENCH_PEER_CACHELINE || k == BENCH_PEER_EVENTFD_URING) {
		p->shm = bench_shm_map(sizeof(struct floor_shm));
		if (!p->shm)
			goto fail_errno;
	}
	if (k == BENCH_PEER_CACHELINE) {
		p->efd_cmd = eventfd(0, EFD_CLOEXEC);
		if (p->efd_cmd < 0)
			goto fail_errno;
	}
	if (k == BENCH_PEER_EVENTFD_URING || k == BENCH_PEER_ZMQ) {
		p->efd_a = eventfd(0, EFD_CLOEXEC);
		p->efd_b = eventfd(0, EFD_CLOEXEC);
		if (p->efd_a < 0 || p->efd_b < 0)
			goto fail_errno;
	}
	if (k == BENCH_PEER_EVENTFD_URING) {
		rc = io_uring_queue_init(4, &p->ring, 0);
		if (rc < 0) {
			errno = -rc;
			goto fail_errno;
		}
		p->ring_ok = true;
	}
	if (k == BENCH_PEER_UDS &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		goto fail_errno;
	if (k == BENCH_PEER_ZMQ)
		snprintf(p->zpath, sizeof(p->zpath),
			 "ipc:///tmp/kvrb-zmq-%d-%u.ipc", (int)getpid(),
			 ++zseq);

	fflush(NULL);
	p->child = fork();
	if (p->child < 0)
		goto fail_errno;
	if (p->child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		bench_pin_cpu(cpu_server);
		switch (k) {
		case BENCH_PEER_CACHELINE:
			child_cacheline(p);
			break;
		case BENCH_PEER_EVENTFD_URING:
			child_eventfd(p);
			break;
		case BENCH_PEER_UDS:
			close(sv[0]);
			p->sock = sv[1];
			child_uds(p);
			break;
		case BENCH_PEER_ZMQ:
#if HAVE_ZMQ
			child_zmq(p, pool_bytes);
#endif
			break;
		}
		_exit(1);
	}
	if (k == BENCH_PEER_UDS) {
		close(sv[1]);
		p->sock = sv[0];
	}
#if HAVE_ZMQ
	if (k == BENCH_PEER_ZMQ) {
		uint64_t ready;
		int tmo = 120000, zero = 0;

		/* Wait for the bind (and the pool pre-fault). */
		if (read_full(p->efd_b, &ready, 8) < 0)
			goto fail_errno;
		p->zctx = zmq_ctx_new();
		p->zsock = p->zctx ? zmq_socket(p->zctx, ZMQ_REQ) : NULL;
		if (!p->zsock)
			goto fail_errno;
		zmq_setsockopt(p->zsock, ZMQ_RCVTIMEO, &tmo, sizeof(tmo));
		zmq_setsockopt(p->zsock, ZMQ_SNDTIMEO, &tmo, sizeof(tmo));
		zmq_setsockopt(p->zsock, ZMQ_LINGER, &zero, sizeof(zero));
		if (zmq_connect(p->zsock, p->zpath) < 0)
			goto fail_errno;
	}
#endif
	*out = p;
	return 0;

fail_errno:
	rc = errno ? -errno : -EIO;
	if (sv[0] >= 0 && p->sock != sv[0])
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	bench_peer_stop(p);
	return rc;
}

void bench_peer_stop(struct bench_peer *p)
{
	if (!p)
		return;
	if (p->child > 0 && !p->reaped) {
		uint64_t v;

		switch (p->kind) {
		case BENCH_PEER_CACHELINE:
			p->shm->round_n = 0;
			v = 1;
			(void)!write(p->efd_cmd, &v, 8);
			break;
		case BENCH_PEER_EVENTFD_URING:
			v = EFD_EXIT;
			(void)!write(p->efd_a, &v, 8);
			break;
		case BENCH_PEER_UDS:
			/* EOF for the child even if a later fork()ed child
			 * still holds a copy of our end. */
			shutdown(p->sock, SHUT_RDWR);
			break;
		case BENCH_PEER_ZMQ:
#if HAVE_ZMQ
			if (p->zsock) {
				struct zhdr h = {.op = ZOP_EXIT};

				if (zmq_send(p->zsock, &h, sizeof(h), 0) < 0 ||
				    zmq_recv(p->zsock, &h, sizeof(h), 0) < 0)
					kill(p->child, SIGKILL);
			} else {
				kill(p->child, SIGKILL);
			}
#endif
			break;
		}
		if (bench_wait_child(p->child) != 0)
			fprintf(stderr, "kvring-bench: %s: echo child failed\n",
				bench_peer_subject(p->kind));
	}
#if HAVE_ZMQ
	if (p->zsock)
		zmq_close(p->zsock);
	if (p->zctx)
		zmq_ctx_term(p->zctx);
	if (p->zpath[0])
		unlink(p->zpath + strlen("ipc://"));
#endif
	if (p->ring_ok)
		io_uring_queue_exit(&p->ring);
	if (p->efd_cmd >= 0)
		close(p->efd_cmd);
	if (p->efd_a >= 0)
		close(p->efd_a);
	if (p->efd_b >= 0)
		close(p->efd_b);
	if (p->sock >= 0)
		close(p->sock);
	bench_shm_unmap(p->shm, sizeof(struct floor_shm));
	free(p);
}

/* ---- round trips ------------------------------------------------------ */

static int cacheline_rtt(struct bench_peer *p, uint64_t n, uint64_t pause_ns,
			 uint64_t *out)
{
	struct floor_shm *s = p->shm;
	uint64_t one = 1;
	unsigned spins = 0;

	s->round_n = n;
	s->round_first = p->seq + 1;
	/* The eventfd write orders round_n/round_first for the child. */
	if (write_full(p->efd_cmd, &one, 8) < 0)
		return -EPIPE;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t seq = ++p->seq, w[3], t0;

		if (pause_ns)
			bench_sleep_ns(pause_ns);
		msg_words(seq, w);
		t0 = bench_ticks();
		for (int k = 0; k < 3; k++)
			/* Relaxed: published by R-BP1. */
			atomic_store_explicit(&s->a.w[k], w[k],
					      memory_order_relaxed);
		/* R-BP1: pairs with A-BP1 in child_cacheline(). */
		atomic_store_explicit(&s->a.seq, seq, memory_order_release);
		/* A-BP2: pairs with R-BP2 in child_cacheline(). */
		while (atomic_load_explicit(&s->b.seq, memory_order_acquire) !=
		       seq) {
			kvr_clock_relax();
			if (child_gone(p, &spins))
				return -ECHILD;
		}
		out[i] = bench_ticks() - t0;
		for (int k = 0; k < 3; k++)
			/* Relaxed: ordered after R-BP2 by A-BP2. */
			if (atomic_load_explicit(&s->b.w[k],
						 memory_order_relaxed) != w[k])
				return -EBADMSG;
	}
	return 0;
}

static int eventfd_rtt(struct bench_peer *p, uint64_t n, uint64_t pause_ns,
		       uint64_t *out)
{
	struct floor_shm *s = p->shm;

	for (uint64_t i = 0; i < n; i++) {
		struct __kernel_timespec tmo = {.tv_sec = 10};
		struct io_uring_cqe *cqe = NULL;
		struct io_uring_sqe *sqe;
		uint64_t seq = ++p->seq, w[3], val = 0, t0;
		int rc;

		if (pause_ns)
			bench_sleep_ns(pause_ns);
		msg_words(seq, w);
		t0 = bench_ticks();
		/* Relaxed: the eventfd write/read pair (efd_a, then efd_b
		 * back) orders the message both ways, see child_eventfd(). */
		for (int k = 0; k < 3; k++)
			atomic_store_explicit(&s->a.w[k], w[k],
					      memory_order_relaxed);
		atomic_store_explicit(&s->a.seq, seq, memory_order_relaxed);
		if (write_full(p->efd_a, &seq, 8) < 0)
			return -EPIPE;
		sqe = io_uring_get_sqe(&p->ring);
		io_uring_prep_read(sqe, p->efd_b, &val, 8, 0);
		rc = io_uring_submit_and_wait_timeout(&p->ring, &cqe, 1, &tmo,
						      NULL);
		if (rc < 0 || !cqe) {
			fprintf(stderr, "kvring-bench: floor_eventfd_uring: "
					"no echo within 10 s\n");
			return rc < 0 ? rc : -ETIMEDOUT;
		}
		rc = cqe->res;
		io_uring_cqe_seen(&p->ring, cqe);
		out[i] = bench_ticks() - t0;
		if (rc != 8 || val != seq)
			return rc < 0 ? rc : -EBADMSG;
		/* Relaxed: the efd_b read above ordered the echo. */
		if (atomic_load_explicit(&s->b.seq, memory_order_relaxed) !=
		    seq)
			return -EBADMSG;
		for (int k = 0; k < 3; k++)
			if (atomic_load_explicit(&s->b.w[k],
						 memory_order_relaxed) != w[k])
				return -EBADMSG;
	}
	return 0;
}

static int uds_rtt(struct bench_peer *p, uint64_t n, uint64_t pause_ns,
		   uint64_t *out)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t seq = ++p->seq, m[4], r[4], t0;
		int rc;

		if (pause_ns)
			bench_sleep_ns(pause_ns);
		msg_words(seq, m);
		m[3] = seq;
		t0 = bench_ticks();
		rc = write_full(p->sock, m, sizeof(m));
		if (rc == 0)
			rc = read_full(p->sock, r, sizeof(r));
		out[i] = bench_ticks() - t0;
		if (rc < 0)
			return rc;
		if (memcmp(m, r, sizeof(m)) != 0)
			return -EBADMSG;
	}
	return 0;
}

#if HAVE_ZMQ
static int zmq_rtt(struct bench_peer *p, uint64_t n, uint64_t pause_ns,
		   uint64_t *out)
{
	for (uint64_t i = 0; i < n; i++) {
		struct zhdr h = {.op = ZOP_ECHO, .seq = ++p->seq}, r;
		uint64_t t0;
		int rc;

		if (pause_ns)
			bench_sleep_ns(pause_ns);
		h.bytes = h.seq * 3;
		t0 = bench_ticks();
		rc = zmq_send(p->zsock, &h, sizeof(h), 0);
		if (rc >= 0)
			rc = zmq_recv(p->zsock, &r, sizeof(r), 0);
		out[i] = bench_ticks() - t0;
		if (rc < 0)
			return -zmq_errno();
		if (rc != (int)sizeof(r) || memcmp(&h, &r, sizeof(h)) != 0)
			return -EBADMSG;
	}
	return 0;
}
#endif

int bench_peer_rtt(struct bench_peer *p, uint64_t n, uint64_t pause_ns,
		   uint64_t *out_ns)
{
	int rc = -ENOTSUP;

	switch (p->kind) {
	case BENCH_PEER_CACHELINE:
		rc = cacheline_rtt(p, n, pause_ns, out_ns);
		break;
	case BENCH_PEER_EVENTFD_URING:
		rc = eventfd_rtt(p, n, pause_ns, out_ns);
		break;
	case BENCH_PEER_UDS:
		rc = uds_rtt(p, n, pause_ns, out_ns);
		break;
	case BENCH_PEER_ZMQ:
#if HAVE_ZMQ
		rc = zmq_rtt(p, n, pause_ns, out_ns);
#endif
		break;
	}
	if (rc < 0) {
		fprintf(stderr, "kvring-bench: %s: round trip failed: %s\n",
			bench_peer_subject(p->kind), strerror(-rc));
		return rc;
	}
	/* Ticks to ns once, outside the timed loop. */
	for (uint64_t i = 0; i < n; i++)
		out_ns[i] = (uint64_t)bench_ticks_to_ns(out_ns[i]);
	return 0;
}

/* ---- zeromq payloads -------------------------------------------------- */

int bench_peer_zmq_store(struct bench_peer *p, const void *src, uint64_t bytes,
			 const struct kvr_key *keys, uint32_t n)
{
#if HAVE_ZMQ
	struct zhdr h = {.op = ZOP_STORE, .n = n, .bytes = bytes};

	if (p->kind != BENCH_PEER_ZMQ)
		return -EINVAL;
	if (zmq_send(p->zsock, &h, sizeof(h), ZMQ_SNDMORE) < 0)
		return -zmq_errno();
	for (uint32_t i = 0; i < n; i++) {
		zmq_msg_t m;

		/* What zmq_send() does (allocate, copy), plus the stamp. */
		if (zmq_msg_init_size(&m, bytes) < 0)
			return -zmq_errno();
		memcpy(zmq_msg_data(&m), src, bytes);
		bench_stamp(zmq_msg_data(&m), bytes, keys[i]);
		if (zmq_msg_send(&m, p->zsock, i + 1 < n ? ZMQ_SNDMORE : 0) <
		    0) {
			zmq_msg_close(&m);
			return -zmq_errno();
		}
	}
	if (zmq_recv(p->zsock, &h, sizeof(h), 0) != (int)sizeof(h))
		return -EPROTO;
	return 0;
#else
	(void)p, (void)src, (void)bytes, (void)keys, (void)n;
	return -ENOTSUP;
#endif
}

int bench_peer_zmq_retrieve(struct bench_peer *p, void *dst, uint64_t bytes,
			    const struct kvr_key *keys, uint32_t n,
			    const void *src)
{
#if HAVE_ZMQ
	struct zhdr h = {.op = ZOP_RETRIEVE, .n = n, .bytes = bytes};
	int rc = 0;

	if (p->kind != BENCH_PEER_ZMQ)
		return -EINVAL;
	if (zmq_send(p->zsock, &h, sizeof(h), 0) < 0 ||
	    zmq_recv(p->zsock, &h, sizeof(h), 0) != (int)sizeof(h))
		return -zmq_errno();
	for (uint32_t i = 0; i < n; i++) {
		int r = zmq_recv(p->zsock, dst, bytes, 0);

		if (r < 0)
			return -zmq_errno();
		if ((uint64_t)r != bytes)
			return -EPROTO;
		if (rc == 0)
			rc = bench_check(dst, bytes, keys[i], src,
					 "zeromq retrieve");
	}
	return rc;
#else
	(void)p, (void)dst, (void)bytes, (void)keys, (void)n, (void)src;
	return -ENOTSUP;
#endif
}
