/* SPDX-License-Identifier: MIT */
/*
 * bench_peers.h - the floors and peers kvring is measured against, each a
 * pair of processes (this one, the client, and a forked echo child on the
 * server CPU):
 *   floor_cacheline      32-byte message and sequence word in one cache
 *                        line per direction, both sides spinning (the
 *                        least a hot round trip can cost)
 *   floor_eventfd_uring  32-byte message in shared memory, then an eventfd
 *                        write; the waiter (both sides) reads the eventfd
 *                        through io_uring (the least a sleeping round trip
 *                        can cost; kvringd waits the same way)
 *   uds                  32-byte request/response over a Unix stream socket
 *   zeromq               32-byte REQ/REP over ipc:// (libzmq), and the
 *                        same socket carrying chunk payloads for the
 *                        store/retrieve comparison
 * Idle children block in the kernel (the cache-line child too, between
 * rounds), so a peer never steals the server CPU from another subject.
 * Every echo is checked; a wrong one is -EBADMSG. This file measures only
 * what the caller asks and prints nothing but errors.
 */
#ifndef KVR_BENCH_PEERS_H
#define KVR_BENCH_PEERS_H

#include <stdbool.h>
#include <stdint.h>

#include <kvring/proto.h>

/* The control message size of every round-trip subject (a kvring PING
 * request and its answer are 32 bytes each, too). */
#define BENCH_MSG_BYTES 32u

enum bench_peer_kind {
	BENCH_PEER_CACHELINE,
	BENCH_PEER_EVENTFD_URING,
	BENCH_PEER_UDS,
	BENCH_PEER_ZMQ,
};

struct bench_peer; /* opaque; owned by the caller until bench_peer_stop() */

/* bench_peer_built - false for zeromq when libzmq was not found. */
bool bench_peer_built(enum bench_peer_kind k);

/* bench_peer_subject - the JSON subject name ("floor_cacheline", ...). */
const char *bench_peer_subject(enum bench_peer_kind k);

/*
 * bench_peer_start - fork the echo child of @k, pinned to @cpu_server
 * (< 0: not pinned). For BENCH_PEER_ZMQ, @pool_bytes > 0 gives the child a
 * pre-faulted private "pool" for bench_peer_zmq_store/retrieve.
 * Return 0 and *out, or -errno (-ENOTSUP: not built).
 */
int bench_peer_start(enum bench_peer_kind k, int cpu_server,
		     uint64_t pool_bytes, struct bench_peer **out);

/*
 * bench_peer_rtt - @n round trips of a BENCH_MSG_BYTES message, each one
 * checked, sleeping @pause_ns before each (0: back to back). out_ns[i]
 * gets the i-th round trip in ns (pause excluded).
 * Return 0, -EBADMSG on a wrong echo, or -errno (child gone, ...).
 */
int bench_peer_rtt(struct bench_peer *p, uint64_t n, uint64_t pause_ns,
		   uint64_t *out_ns);

/*
 * bench_peer_zmq_store - one REQ/REP request carrying @n chunks of @bytes
 * (each a copy of @src stamped with keys[i]); the child copies each part
 * into its pool slot i and answers. Return 0 or -errno.
 */
int bench_peer_zmq_store(struct bench_peer *p, const void *src, uint64_t bytes,
			 const struct kvr_key *keys, uint32_t n);

/*
 * bench_peer_zmq_retrieve - one request for pool slots 0..n-1 of @bytes;
 * each arriving part is copied into @dst (one chunk buffer) and its
 * stamp checked against keys[i]; with @src non-NULL every byte is
 * compared too. Return 0, -EBADMSG on wrong data, or -errno.
 */
int bench_peer_zmq_retrieve(struct bench_peer *p, void *dst, uint64_t bytes,
			    const struct kvr_key *keys, uint32_t n,
			    const void *src);

/* bench_peer_stop - tell the child to exit and reap it; NULL is fine. */
void bench_peer_stop(struct bench_peer *p);

#endif /* KVR_BENCH_PEERS_H */
