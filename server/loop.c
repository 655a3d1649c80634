/* SPDX-License-Identifier: MIT */
/*
 * kvringd's event loop: one thread, one io_uring. It waits on a multishot
 * accept of the listening socket, a poll on every worker socket (hang-up,
 * and frames under the copy transport), a pidfd poll per worker (death the
 * moment it happens), a multishot poll on every request doorbell, a timerfd
 * for housekeeping and a signalfd for SIGTERM/SIGINT.
 *
 * Spin-then-sleep. After any work the loop keeps polling every active
 * channel's request ring (a read of a line the worker writes) and the
 * completion queue (a read of memory the kernel writes) for --spin-us,
 * without a system call. Then it sets every channel's req_bell.sleeping
 * flag (F2 inside kvr_bell_prepare_sleep), re-checks every ring, and only
 * if all are empty enters io_uring_submit_and_wait. A worker that
 * publishes after our re-check sees the flag (its F1) and writes the
 * eventfd, whose poll completion wakes us: no request is left unseen
 * (docs/doorbell.md has the proof). In the busy steady state the loop
 * makes no system call per message: rings are drained in batches, one
 * release and one doorbell check per batch.
 *
 * The cost of a pass is one cached-line read per idle channel plus the
 * work itself, so an operation does not get slower as workers connect.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/doorbell.h>
#include <kvring/error.h>
#include <kvring/log.h>

#include "chan.h"
#include "tport_ring.h"
#include "hello.h"
#include "loop.h"
#include "notify.h"
#include "prefault.h"
#include "uring.h"

/* Idle passes between two reads of the clock while spinning. */
#define CLOCK_EVERY 32u

/* Longest idle pass kept as the estimate: a longer one was preempted. */
#define PASS_NS_MAX 2000u

/*
 * Reads the clock into now_ns. After a run of idle passes (@idle), the
 * time they took also gives the length of one pass, so that the
 * dispatcher can place a request found k passes after this reading at
 * about now_ns + (k - 1) passes (kvr__disp_ring_drain's latency start)
 * instead of at the stale now_ns: without it the server's histogram
 * counted up to CLOCK_EVERY passes of spinning (about 2 us here) into a
 * ping that took a tenth of that.
 */
static void read_clock(struct kvr_srv *s, bool idle)
{
	uint64_t t = kvr_clock_now_ns();

	if (idle && t > s->now_ns) {
		uint64_t pass = (t - s->now_ns) / (s->stale_passes + 1u);

		if (pass <= PASS_NS_MAX)
			s->pass_ns = pass;
	}
	s->now_ns = t;
	s->stale_passes = 0;
}

/* Completions taken per peek. */
#define REAP_BATCH 64u

/* Consecutive idle passes (about a microsecond) after which the channel
 * counters marked due are published: off the path of a request that
 * follows its predecessor's answer closely (a pipeline, a hot round
 * trip), yet long before anyone could look. */
#define COUNTERS_QUIET 32u

static void arm_accept(struct kvr_srv *s)
{
	struct io_uring_sqe *sqe = kvr__uring_sqe(s);

	io_uring_prep_multishot_accept(sqe, s->listen_fd, NULL, NULL,
				       SOCK_NONBLOCK | SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, kvr_tag_make(KVR_TAG_ACCEPT, 0, 0));
}

/* Drain the signalfd; the first SIGTERM/SIGINT ends the loop after the
 * current pass (stop() then answers what is in the rings). */
static void on_signal(struct kvr_srv *s)
{
	struct signalfd_siginfo si;

	while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (s->stopping)
			continue;
		kvr_log_info("received %s from pid %u: stopping",
			     si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM",
			     si.ssi_pid);
		s->stopping = true;
	}
}

/*
 * One line per channel whose transfers a deadline just reclaimed: the
 * operator learns which worker stopped answering, and what it holds in
 * quarantine until it answers or exits (rate-limited per pid).
 */
static void log_reclaims(struct kvr_srv *s, struct kvr_conn *c)
{
	struct kvr_store_chan_stats cs;

	if (kvr_store_chan_stats(s->store, (uint32_t)c->chan, &cs) < 0 ||
	    cs.xfers_expired == c->expired_seen)
		return;
	kvr_log_peer(KVR_LOG_WARN, c->pid,
		     "channel %d pid %d: %llu transfers reclaimed at their "
		     "deadline (--xfer-ms %u); %llu bytes in %u transfers stay "
		     "in quarantine until the worker answers for them or exits",
		     c->chan, (int)c->pid,
		     (unsigned long long)(cs.xfers_expired - c->expired_seen),
		     s->cfg.xfer_ms, (unsigned long long)cs.quar_bytes,
		     cs.quar_xfers);
	c->expired_seen = cs.xfers_expired;
}

/*
 * The storage engine grew its arrays since the last heartbeat. A growth
 * holds no request (the object table grows in place, the key index
 * migrates a slice per insert, removal and idle pass), but a deployment
 * that knows its object count can spare the migration: say so once per
 * growth. The end of its migration is said by idle_step().
 */
static void log_growth(struct kvr_srv *s)
{
	uint64_t cap = kvr_store_capacity(s->store);

	if (cap <= s->store_cap)
		return;
	kvr_log_info("the storage engine grew to room for %llu objects (from "
		     "%llu); while its key index migrates to a larger table, "
		     "lookups may probe two: start kvringd with --objects N "
		     "(the objects you expect, at most %llu) to size it up "
		     "front",
		     (unsigned long long)cap, (unsigned long long)s->store_cap,
		     (unsigned long long)(s->cfg.pool_bytes / s->cfg.align));
	s->store_cap = cap;
}

/*
 * An idle pass while a heartbeat saw the key index migrating: one step of
 * the move (kvr_store_idle_step). Return: whether some is left, so that
 * the loop does not sleep yet. A request that lands meanwhile waits for
 * one step at most. Only the heartbeat asks the engine whether a move
 * runs: an idle pass without one costs a flag test (asking on every pass
 * cost a one-key lookup 3% through kvringd).
 */
static bool idle_step(struct kvr_srv *s)
{
	if (kvr_store_idle_step(s->store))
		return true;
	/* Ended by this step, or by inserts since the heartbeat. */
	kvr_log_info("the storage engine's key index finished moving to its "
		     "larger table: lookups probe one table again");
	s->index_moving = false;
	return false;
}

/* Every heartbeat: heartbeat word, lease expiry, handshake timeouts,
 * unresponsive workers, the global counters and the engine's growth. */
static void housekeeping(struct kvr_srv *s)
{
	uint64_t ticks, stall_ns = (uint64_t)s->cfg.stall_ms * 1000000u;
	int n;

	while (read(s->timer_fd, &ticks, sizeof(ticks)) > 0)
		;
	s->now_ns = kvr_clock_now_ns();
	/* Relaxed: a lone value; workers only compare it with their clock. */
	atomic_store_explicit(&s->hdr->heartbeat_ns, s->now_ns,
			      memory_order_relaxed);
	n = kvr_store_expire(s->store, s->now_ns, 0);
	if (n > 0)
		kvr_log_debug("expired %d leases and transfers", n);
	kvr_log_peer_flush();
	kvr__hello_timeouts(s, s->now_ns);
	kvr__prefault_poll(s);
	for (uint32_t i = s->nactive; i-- > 0;) {
		struct kvr_conn *c = &s->conns[s->active[i]];

		if (c->ops->stalled(c, s->now_ns, stall_ns))
			kvr__chan_proto_error(s, c,
					      "unresponsive: answers not read "
					      "for %u ms",
					      s->cfg.stall_ms);
		else if (n > 0) {
			log_reclaims(s, c);
			kvr__chan_counters(s, c); /* its leases may be gone */
		}
	}
	kvr__chan_gstats(s);
	log_growth(s);
	if (kvr_store_migrating(s->store))
		s->index_moving = true;
}

/* A completion for a connection slot: check the generation first. */
static void on_conn_event(struct kvr_srv *s, unsigned kind, uint64_t ud,
			  int res, unsigned flags)
{
	uint32_t idx = kvr_tag_idx(ud);
	struct kvr_conn *c;

	if (idx >= s->nconns)
		return;
	c = &s->conns[idx];
	if (c->gen != kvr_tag_gen(ud) || c->state == KVR_CONN_FREE)
		return; /* for a previous user of the slot */
	switch (kind) {
	case KVR_TAG_SOCK:
		c->ops->readable(s, c);
		break;
	case KVR_TAG_SOCK_OUT:
		c->ops->writable(s, c);
		return; /* one-shot; the transport re-arms when needed */
	case KVR_TAG_PIDFD:
		if (res >= 0)
			kvr__chan_close(s, c, "process exited", false);
		return;
	case KVR_TAG_BELL: {
		uint64_t v;

		/* Empty the eventfd; the ring itself is drained by the
		 * loop's pass over active channels. */
		if (read(c->req_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			kvr_log_debug("read doorbell of channel %d: %s",
				      c->chan, strerror(errno));
		break;
	}
	default:
		return;
	}
	/* A multishot poll that ended (no F_MORE) is re-armed while the
	 * connection lives on. */
	if (!(flags & IORING_CQE_F_MORE) && c->gen == kvr_tag_gen(ud) &&
	    c->state != KVR_CONN_FREE && res != -ECANCELED) {
		if (kind == KVR_TAG_SOCK)
			kvr__uring_poll(s, c->sock, POLLIN | POLLRDHUP, ud,
					true);
		else if (kind == KVR_TAG_BELL)
			kvr__uring_poll(s, c->req_efd, POLLIN, ud, true);
	}
}

/* Re-arm the multishot poll @ud on @fd when its completion (@flags) says
 * it ended (no F_MORE). */
static void rearm_poll(struct kvr_srv *s, int fd, uint64_t ud, unsigned flags)
{
	if (!(flags & IORING_CQE_F_MORE))
		kvr__uring_poll(s, fd, POLLIN, ud, true);
}

/* Route a completion by the kind in its user data. Server-wide sources
 * (accept, signal, timer) are re-armed here when their multishot ends. */
static void on_cqe(struct kvr_srv *s, uint64_t ud, int res, unsigned flags)
{
	unsigned kind = kvr_tag_kind(ud);

	switch (kind) {
	case KVR_TAG_NONE:
		return;
	case KVR_TAG_ACCEPT:
		if (res >= 0)
			kvr__hello_accepted(s, res);
		else if (res != -ECANCELED)
			kvr_log_peer(KVR_LOG_WARN, 0, "accept: %s",
				     kvr_strerror(res));
		if (!(flags & IORING_CQE_F_MORE) && s->accepting)
			arm_accept(s);
		return;
	case KVR_TAG_SIGNAL:
		on_signal(s);
		rearm_poll(s, s->sig_fd, ud, flags);
		return;
	case KVR_TAG_L2:
		kvr_l2_bell(s);
		if (s->l2)
			rearm_poll(s, s->l2->efd, ud, flags);
		return;
	case KVR_TAG_DISK:
		kvr_dsrv_bell(s);
		if (s->disk)
			rearm_poll(s, kvr_dsrv_efd(s->disk), ud, flags);
		return;
	case KVR_TAG_DETACHED:
		if (res >= 0)
			kvr__chan_detached_exit(s, kvr_tag_idx(ud),
						kvr_tag_gen(ud));
		return;
	case KVR_TAG_TIMER:
		housekeeping(s);
		rearm_poll(s, s->timer_fd, ud, flags);
		return;
	default:
		on_conn_event(s, kind, ud, res, flags);
		return;
	}
}

/* Handle every completion already posted; never enters the kernel
 * (unless the completion queue overflowed). Returns how many. */
static unsigned reap(struct kvr_srv *s)
{
	struct io_uring_cqe *cqes[REAP_BATCH];
	struct {
		uint64_t ud;
		int res;
		unsigned flags;
	} ev[REAP_BATCH];
	unsigned n = io_uring_peek_batch_cqe(&s->ring, cqes, REAP_BATCH);

	/* Copy out and advance first: handlers may submit. */
	for (unsigned i = 0; i < n; i++) {
		ev[i].ud = io_uring_cqe_get_data64(cqes[i]);
		ev[i].res = cqes[i]->res;
		ev[i].flags = cqes[i]->flags;
	}
	io_uring_cq_advance(&s->ring, n);
	for (unsigned i = 0; i < n; i++)
		on_cqe(s, ev[i].ud, ev[i].res, ev[i].flags);
	return n;
}

/* Drain channel @c if its request ring may hold something (one relaxed
 * load decides for an idle ring, without the calls a peek costs) or it
 * waits for room to answer. Returns the requests handled. */
static unsigned drain_one(struct kvr_srv *s, struct kvr_conn *c)
{
	unsigned n;

	if (!c->blocked && !kvr_ring_maybe_data(&c->req))
		return 0;
	n = kvr__tport_ring_drain(s, c);
	if (n)
		c->last_req_ns = s->now_ns;
	return n;
}

/*
 * After a drain of @c, which sat at position @i of the polled list and
 * handled @n requests: a channel that had a request or waits for room to
 * answer goes on the hot list, unless it is there already or its drain
 * closed it (then another entry, or none, is at @i).
 */
static void heat_if_busy(struct kvr_srv *s, struct kvr_conn *c, uint32_t i,
			 unsigned n)
{
	if ((n || c->blocked) && c->hot_pos == KVR_SRV_NOT_HOT &&
	    i < s->npolled && s->polled[i] == c->idx)
		kvr__tport_ring_heat(s, c);
}

/*
 * A full scan: every polled channel, a busy one put on the hot list.
 * Backwards: a channel closed during its drain is replaced by the last
 * entry, which this scan has already visited.
 */
static unsigned drain_full(struct kvr_srv *s)
{
	unsigned work = 0, n;

	for (uint32_t i = s->npolled; i-- > 0;) {
		struct kvr_conn *c = &s->conns[s->polled[i]];

		n = drain_one(s, c);
		work += n;
		heat_if_busy(s, c, i, n);
	}
	return work;
}

/*
 * KVR_SRV_COLD_SLICE channels off the hot list, round robin over the
 * polled list from where the last pass stopped; one with a request (or
 * waiting for room to answer) goes on the hot list. A channel closed
 * during its drain moves the list under the cursor: one channel may be
 * looked at twice or once less in that lap, never lost for longer.
 */
static unsigned drain_cold(struct kvr_srv *s)
{
	unsigned work = 0, n;

	for (uint32_t k = 0; k < KVR_SRV_COLD_SLICE && k < s->npolled; k++) {
		uint32_t i = s->cold_next < s->npolled ? s->cold_next : 0;
		struct kvr_conn *c = &s->conns[s->polled[i]];

		s->cold_next = i + 1;
		if (c->hot_pos != KVR_SRV_NOT_HOT)
			continue; /* this pass's hot loop polled it */
		n = drain_one(s, c);
		work += n;
		heat_if_busy(s, c, i, n);
	}
	return work;
}

/*
 * One pass over the channels of the ring transport: after a sleep a full
 * scan; otherwise the hot list, where a channel quiet for KVR_SRV_HOT_NS
 * that answers no one goes cold, then a slice of the cold ones. A pass
 * thus costs the hot channels and KVR_SRV_COLD_SLICE others whatever the
 * number connected, and a cold channel's first request waits at most
 * npolled / KVR_SRV_COLD_SLICE passes. Backwards, as drain_full.
 */
static unsigned drain_all(struct kvr_srv *s)
{
	unsigned work = 0;

	if (s->full_scan) {
		s->full_scan = false;
		return drain_full(s);
	}
	for (uint32_t i = s->nhot; i-- > 0;) {
		struct kvr_conn *c = &s->conns[s->hot[i]];

		if (!c->blocked && s->now_ns - c->last_req_ns > KVR_SRV_HOT_NS)
			kvr__tport_ring_cool(s, c);
		else
			work += drain_one(s, c);
	}
	return work + drain_cold(s);
}

/*
 * Announce sleep on every channel, re-check, and block in the kernel only
 * if nothing arrived. Returns after at least one completion (or 1 ms when
 * a channel waits for room in its response ring, which no doorbell
 * announces).
 */
static void sleep_once(struct kvr_srv *s)
{
	struct __kernel_timespec ts = {.tv_nsec = 1000000};
	struct io_uring_cqe *cqe;
	bool found = false, blocked = false;
	uint64_t l2_ns = kvr_l2_sleep_ns(s), disk_ns = kvr_dsrv_sleep_ns(s);

	if (s->counters_due)
		kvr__chan_counters_flush(s);
	kvr__chan_gstats(s);
	for (uint32_t i = 0; i < s->npolled; i++) {
		struct kvr_conn *c = &s->conns[s->polled[i]];

		if (c->blocked)
			blocked = true;
		/* F2 inside: pairs with F1 in the worker's notify. */
		kvr_bell_prepare_sleep(&c->shm->req_bell);
	}
	for (uint32_t i = 0; i < s->npolled && !found; i++) {
		struct kvr_conn *c = &s->conns[s->polled[i]];

		if (!c->blocked && !kvr_ring_empty(&c->req))
			found = true;
	}
	if (disk_ns < l2_ns)
		l2_ns = disk_ns; /* the nearest read-through deadline */
	if (!blocked && l2_ns != UINT64_MAX) {
		/* A read-through deadline: wake for it, not before. */
		blocked = true;
		ts.tv_sec = (long long)(l2_ns / 1000000000u);
		ts.tv_nsec = (long long)(l2_ns % 1000000000u);
	}
	if (!found && io_uring_cq_ready(&s->ring))
		found = true; /* a completion arrived: handle it first */
	if (!found) {
		if (blocked)
			io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, &ts,
							 NULL);
		else
			io_uring_submit_and_wait(&s->ring, 1);
		s->g.loop_wakeups++;
	}
	for (uint32_t i = 0; i < s->npolled; i++) {
		struct kvr_conn *c = &s->conns[s->polled[i]];

		if (found)
			kvr_bell_cancel_sleep(&c->shm->req_bell);
		else
			(void)kvr_bell_woken(&c->shm->req_bell, -1);
	}
}

/*
 * The shutdown self-check. Every worker is gone by now, so the store must
 * hold no reservation, pin, lease or transfer, and its full audit (every
 * object, owner and extent) must pass. Any failure is a kvringd bug; it
 * turns the exit status into KVR_EXIT_SELFCHECK, so every test and CI run
 * that stops a server with SIGTERM also checks that nothing leaked. A walk
 * that finds no memory for its scratch is skipped, not failed: that is
 * the machine's state, not kvringd's (the counters are still checked).
 */
static int self_check(struct kvr_srv *s)
{
	struct kvr_store_stats st;
	char msg[256];
	int rc;

	rc = kvr_store_audit(s->store, msg, sizeof(msg));
	if (rc == -ENOMEM) {
		/* The walk's scratch grows with the object table: a process
		 * short of memory at exit is not a kvringd bug. */
		kvr_log_warn("self-check at shutdown: the object walk is "
			     "skipped, %s; the leak counters are still "
			     "checked. Nothing is known to be wrong; for the "
			     "full check leave kvringd that much memory (its "
			     "cgroup's limit, RLIMIT_AS)",
			     msg);
	} else if (rc < 0) {
		kvr_log_err("self-check at shutdown: store audit failed: %s; "
			    "this is a kvringd bug, please report it with "
			    "this log",
			    msg);
		return -ENOTRECOVERABLE;
	}
	kvr_store_stats(s->store, &st);
	if (st.reserved_bytes || st.pins || st.leases || st.transfers) {
		kvr_log_err("self-check at shutdown: with every worker gone "
			    "the store still holds %llu reserved bytes, %llu "
			    "pins, %llu leases, %llu transfers; this is a "
			    "kvringd bug, please report it with this log",
			    (unsigned long long)st.reserved_bytes,
			    (unsigned long long)st.pins,
			    (unsigned long long)st.leases,
			    (unsigned long long)st.transfers);
		return -ENOTRECOVERABLE;
	}
	kvr_log_info("self-check at shutdown: ok (%llu objects, %llu bytes "
		     "committed, nothing reserved or pinned%s)",
		     (unsigned long long)st.objects,
		     (unsigned long long)st.committed_bytes,
		     rc == -ENOMEM ? "; object walk skipped" : "");
	return 0;
}

/* Graceful stop: no new worker, in-flight requests answered -ESHUTDOWN,
 * every worker closed. The caller removes segments and socket. */
static void stop(struct kvr_srv *s)
{
	struct io_uring_sqe *sqe;

	kvr__notify_stopping();
	atomic_store_explicit(&s->hdr->state, KVR_SERVER_STOPPING,
			      memory_order_relaxed);
	s->accepting = false;
	sqe = kvr__uring_sqe(s);
	io_uring_prep_cancel64(sqe, kvr_tag_make(KVR_TAG_ACCEPT, 0, 0), 0);
	io_uring_sqe_set_data64(sqe, kvr_tag_make(KVR_TAG_NONE, 0, 0));
	s->now_ns = kvr_clock_now_ns();
	for (uint32_t i = s->nactive; i-- > 0;) {
		struct kvr_conn *c = &s->conns[s->active[i]];

		c->ops->shutdown(s, c);
	}
	for (uint32_t i = 0; i < s->nconns; i++)
		kvr__chan_close(s, &s->conns[i], "server stopping", false);
	kvr_l2_stop(s);	  /* its pins and reservations end before the check */
	kvr_dsrv_stop(s); /* and the disk tier's */
	io_uring_submit(&s->ring);
	kvr__chan_gstats(s);
}

/*
 * The loop proper. Each pass: handle posted completions, drain every
 * active channel, submit only if something was queued. With work, go
 * round again at once; without, spin for --spin-us (memory reads only),
 * then sleep_once(). now_ns is read once per pass (vDSO, no system call).
 */
int kvr_loop_run(struct kvr_srv *s)
{
	uint64_t spin_ns = (uint64_t)s->cfg.spin_us * 1000u, last_work;
	unsigned work, idle_passes = 0, quiet = 0;

	s->accepting = true;
	arm_accept(s);
	kvr__uring_poll(s, s->sig_fd, POLLIN,
			kvr_tag_make(KVR_TAG_SIGNAL, 0, 0), true);
	kvr__uring_poll(s, s->timer_fd, POLLIN,
			kvr_tag_make(KVR_TAG_TIMER, 0, 0), true);
	if (s->l2)
		kvr__uring_poll(s, s->l2->efd, POLLIN,
				kvr_tag_make(KVR_TAG_L2, 0, 0), true);
	if (s->disk)
		kvr__uring_poll(s, kvr_dsrv_efd(s->disk), POLLIN,
				kvr_tag_make(KVR_TAG_DISK, 0, 0), true);
	io_uring_submit(&s->ring);
	/* R-LOOP1: everything start-up wrote to the header (geometry,
	 * counters) before RUNNING; pairs with A-ST3 in kvring-stress and
	 * any reader that acquires state. */
	atomic_store_explicit(&s->hdr->state, KVR_SERVER_RUNNING,
			      memory_order_release);
	kvr_log_info("kvringd ready: pid %d, socket %s, segments %s.ctl/.pool, "
		     "%u channels, spin %u us",
		     (int)getpid(), s->cfg.socket_path, s->cfg.name,
		     s->geom.max_channels, s->cfg.spin_us);
	/* The socket listens and the accept is armed: a worker connecting
	 * now is served, so the service manager may start its dependants. */
	kvr__notify_ready(s->cfg.socket_path);
	last_work = s->now_ns = kvr_clock_now_ns();
	work = 1;

	while (!s->stopping) {
		/*
		 * The clock (a vDSO call: 35-40% of an idle pass on a VM,
		 * measured) is read after a pass that did work and on every
		 * CLOCK_EVERY-th idle pass, so a request that lands while we
		 * spin is seen without waiting for it. now_ns is then at most
		 * CLOCK_EVERY idle passes (about a microsecond) old, which
		 * nothing that reads it (lease and stall deadlines in ms, the
		 * 2 ms hot window, the spin time) can tell.
		 */
		if (work || ++idle_passes % CLOCK_EVERY == 0)
			read_clock(s, !work);
		else
			s->stale_passes++;
		work = reap(s);
		work += drain_all(s);
		if (s->l2)
			work += kvr_l2_poll(s);
		if (s->disk)
			work += kvr_dsrv_poll(s);
		/* Enter the kernel only when something was queued. */
		if (io_uring_sq_ready(&s->ring))
			io_uring_submit(&s->ring);
		/* Due channel counters: after COUNTERS_QUIET idle passes in
		 * a row, or KVR_SRV_COUNTERS_NS into constant work. */
		if (s->counters_due &&
		    ((!work && ++quiet >= COUNTERS_QUIET) ||
		     s->now_ns - s->counters_ns >= KVR_SRV_COUNTERS_NS))
			kvr__chan_counters_flush(s);
		if (work) {
			quiet = 0;
			last_work = s->now_ns;
			continue;
		}
		if (s->index_moving && idle_step(s)) {
			last_work = s->now_ns;
			continue;
		}
		if (s->now_ns - last_work < spin_ns) {
			kvr_clock_relax();
			continue;
		}
		sleep_once(s);
		/* Whoever rang may be a cold channel: look at all of them. */
		s->full_scan = true;
		last_work = s->now_ns = kvr_clock_now_ns();
		s->stale_passes = 0;
	}
	stop(s);
	return self_check(s);
}
