/* SPDX-License-Identifier: MIT */
/*
 * kvringd start-up and teardown. In order: the single-instance lock and
 * the listening socket (listen.c), the stale-segment sweep, the control segment
 * (created first, removed last: the sweep pairs a pool with its .ctl by name),
 * the pool (shm, then memfd, then private, each attempt logged), the storage
 * engine, io_uring, the signal and timer fds.
 *
 * Every failure logs what went wrong and what to do, and unwinds only what
 * this process created. This file does not run the loop (loop.c) nor talk
 * to workers (hello.c, disp.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/error.h>
#include <kvring/chanmap.h>
#include <kvring/log.h>
#include <kvring/parse.h>

#include "chan.h"
#include "listen.h"
#include "nofile.h"
#include "notify.h"
#include "pool.h"
#include "prefault.h"
#include "kvringd.h"

/* Log one sweep's outcome. */
static void log_sweep(const char *prefix, int rc,
		      const struct kvr_sweep_report *r)
{
	if (rc < 0) {
		kvr_log_warn("sweep %s* in %s: %s", prefix, KVR_SEG_DEFAULT_DIR,
			     kvr_strerror(rc));
		return;
	}
	for (unsigned i = 0; i < r->nr_removed_names; i++)
		kvr_log_info("sweep: removed stale segment %s/%s",
			     KVR_SEG_DEFAULT_DIR, r->removed_names[i]);
	for (unsigned i = 0; i < r->nr_bad_names; i++)
		kvr_log_warn("sweep: left %s/%s alone: no valid header",
			     KVR_SEG_DEFAULT_DIR, r->bad_names[i]);
	if (r->removed || r->kept_live || r->errors)
		kvr_log_info("sweep %s*: %u removed, %u of live servers kept, "
			     "%u errors",
			     prefix, r->removed, r->kept_live, r->errors);
}

/* Stale pools on the hugetlbfs mount, before their .ctl in /dev/shm (the
 * pool-first order the sweep's pairing relies on). */
static void sweep_huge(const struct kvr_srv *s)
{
	struct kvr_sweep_report r;
	char dbuf[KVR_SEG_DIR_MAX], prefix[80];
	const char *dir = kvr__pool_huge_dir(s, dbuf, sizeof(dbuf));
	int rc;

	if (!dir[0])
		return;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0)
			snprintf(prefix, sizeof(prefix), "%s", KVR_SEG_PREFIX);
		else if (strncmp(s->cfg.name, KVR_SEG_PREFIX,
				 strlen(KVR_SEG_PREFIX)) != 0)
			snprintf(prefix, sizeof(prefix), "%s.", s->cfg.name);
		else
			break;
		memset(&r, 0, sizeof(r));
		rc = kvr_seg_sweep_pools(dir, NULL, prefix, &r);
		if (rc < 0) {
			kvr_log_warn("sweep %s* in %s: %s", prefix, dir,
				     kvr_strerror(rc));
			continue;
		}
		for (unsigned i = 0; i < r.nr_removed_names; i++)
			kvr_log_info("sweep: removed stale segment %s/%s", dir,
				     r.removed_names[i]);
	}
}

/* DESIGN rule 8: remove stale segments of dead servers, only ours. */
static void sweep(const struct kvr_srv *s)
{
	struct kvr_sweep_report r;
	char prefix[80];
	int rc;

	sweep_huge(s);
	memset(&r, 0, sizeof(r));
	rc = kvr_seg_sweep(NULL, KVR_SEG_PREFIX, &r);
	log_sweep(KVR_SEG_PREFIX, rc, &r);
	/* A --name outside the kvring- prefix gets its own pair swept. */
	if (strncmp(s->cfg.name, KVR_SEG_PREFIX, strlen(KVR_SEG_PREFIX)) != 0) {
		snprintf(prefix, sizeof(prefix), "%s.", s->cfg.name);
		memset(&r, 0, sizeof(r));
		rc = kvr_seg_sweep(NULL, prefix, &r);
		log_sweep(prefix, rc, &r);
	}
}

/* Say who holds a control segment name we could not create. */
static void log_name_taken(const char *ctl_name)
{
	struct kvr_seg seg = {.fd = -1};
	const struct kvr_seg_hdr_shm *h;
	int pid = 0;

	if (kvr_seg_open_name(NULL, ctl_name, true, &seg, NULL) == 0) {
		h = seg.base;
		if (seg.bytes >= sizeof(*h))
			pid = h->creator_pid;
		kvr_seg_detach(&seg);
	}
	/* The pid is only what the header says: workers can write it. */
	kvr_log_err("segment %s/%s belongs to a live kvringd (it holds the "
		    "segment's lock; its header names pid %d): stop it, or "
		    "start this one with another --name",
		    KVR_SEG_DEFAULT_DIR, ctl_name, pid);
}

/*
 * Whether /dev/shm/@name exists and belongs to another uid: someone took
 * our segment name first. Said once, clearly, with what it
 * means; the caller falls back to unnamed segments.
 */
static bool name_squatted(const char *name)
{
	char path[KVR_SEG_DIR_MAX + KVR_SEG_NAME_MAX + 2];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", KVR_SEG_DEFAULT_DIR, name);
	if (lstat(path, &st) < 0 || st.st_uid == geteuid())
		return false;
	kvr_log_warn("segment name %s is held by uid %u, not by us (uid %u): "
		     "another user created it first, and it is not ours to "
		     "remove; using unnamed (memfd) segments instead, so "
		     "kvring-inspect cannot find this server by --name (use "
		     "--socket), or start kvringd with another --name",
		     path, (unsigned)st.st_uid, (unsigned)geteuid());
	return true;
}

/* The control segment: named under /dev/shm so the inspector finds it;
 * a memfd when /dev/shm cannot hold it (logged). No write permission bit
 * (abi 3.0): it is written only through the mapping made here, and what
 * workers get is a read-only descriptor (make_ctl_ro). A memfd is sealed
 * against writes once formatted, so it keeps F_SEAL_SEAL for that. */
static int create_ctl(struct kvr_srv *s, char *ctl_name, size_t n)
{
	mode_t mode = s->cfg.have_group ? 0440 : 0400;
	gid_t gid = s->cfg.have_group ? s->cfg.gid : (gid_t)-1;
	struct kvr_err e = {0};
	int rc;

	rc = kvr_seg_ctl_name(s->cfg.name, ctl_name, n);
	if (rc < 0) {
		kvr_log_err("segment name %s: invalid; pick another --name",
			    s->cfg.name);
		return rc;
	}
	rc = kvr_seg_create_shm(NULL, ctl_name, s->geom.ctl_bytes, mode, gid,
				&s->ctl, &e);
	if (rc == -EEXIST && name_squatted(ctl_name)) {
		/* Another uid holds our name: the sweep may not remove it,
		 * and refusing to start would let any local user keep us
		 * down. An unnamed segment serves the workers just the same. */
		rc = kvr_seg_create_memfd(ctl_name, s->geom.ctl_bytes,
					  KVR_SEG_SEAL_LATER, &s->ctl, &e);
		if (rc < 0)
			kvr_log_err("create control segment (memfd): %s",
				    kvr_err_str(&e, rc));
		return rc;
	}
	if (rc == -EEXIST) {
		log_name_taken(ctl_name);
		return rc;
	}
	if (rc == 0) {
		kvr_log_info("control segment %s/%s: %llu bytes, %u channels",
			     KVR_SEG_DEFAULT_DIR, ctl_name,
			     (unsigned long long)s->geom.ctl_bytes,
			     s->geom.max_channels);
		return 0;
	}
	kvr_log_warn("create control segment %s/%s: %s; using a memfd "
		     "(kvring-inspect cannot find it by name)",
		     KVR_SEG_DEFAULT_DIR, ctl_name, kvr_err_str(&e, rc));
	rc = kvr_seg_create_memfd(ctl_name, s->geom.ctl_bytes,
				  KVR_SEG_SEAL_LATER, &s->ctl, &e);
	if (rc < 0)
		kvr_log_err("create control segment (memfd): %s",
			    kvr_err_str(&e, rc));
	return rc;
}

/*
 * The descriptor every welcome carries for the control segment: the
 * segment reopened O_RDONLY (and a memfd sealed against future writes),
 * so that no worker can map it writable or mprotect its mapping to write
 * (docs/layout.md, "Mappings"). Made once, after the header is formatted:
 * our own mapping was made before the seal and stays writable.
 */
static int make_ctl_ro(struct kvr_srv *s)
{
	struct kvr_err e = {0};
	bool sealed = false;
	int fd;

	fd = kvr_chanmap_ro_fd(&s->ctl, &sealed, &e);
	if (fd < 0) {
		kvr_log_err("control segment: %s", kvr_err_str(&e, fd));
		return fd;
	}
	s->ctl_ro_fd = fd;
	if (s->ctl.backend == KVR_SEG_BACKEND_MEMFD && !sealed)
		kvr_log_warn("control memfd: this kernel cannot seal it "
			     "against writes (F_SEAL_FUTURE_WRITE, Linux 5.1); "
			     "workers still get a read-only descriptor");
	return 0;
}

/*
 * The channel directory (abi 4.0): who holds each channel, and the fd of
 * its block. A memfd of its own that no worker is ever given, so that a
 * worker sees nothing of other channels; the inspector reaches it through
 * /proc/<pid>/fd/<dir_fd> (root or our uid). Without write bits, so not
 * even our uid can reopen it for writing. Every entry starts free.
 */
static int create_dir(struct kvr_srv *s)
{
	struct kvr_err e = {0};
	int rc;

	rc = kvr_seg_create_memfd("kvring-dir", s->geom.dir_bytes, 0,
				  &s->chan_dir, &e);
	if (rc < 0) {
		kvr_log_err("create channel directory (memfd, %u bytes): %s",
			    s->geom.dir_bytes, kvr_err_str(&e, rc));
		return rc;
	}
	if (fchmod(s->chan_dir.fd, 0400) < 0)
		kvr_log_warn("channel directory: chmod 0400: %s",
			     strerror(errno));
	kvr_seg_prefault(s->chan_dir.base, s->chan_dir.bytes, true, NULL);
	for (uint32_t i = 0; i < s->geom.max_channels; i++)
		kvr_chan_dir(s->chan_dir.base, i)->fd = -1;
	return 0;
}

/* Fill and publish the control header (everything before ready). */
static void format_ctl(struct kvr_srv *s, const char *ctl_name)
{
	struct kvr_ctl_hdr_shm *h = s->ctl.base;

	s->hdr = h;
	kvr_seg_hdr_format(&h->seg, KVR_SEG_KIND_CONTROL, kvr_layout_hash(),
			   s->ctl.bytes, ctl_name, s->boot_id);
	h->pool_bytes = s->cfg.pool_bytes;
	h->align = s->cfg.align;
	h->pool_backend = (uint32_t)s->backend;
	if (s->backend == KVR_POOL_SHM)
		snprintf(h->pool_name, sizeof(h->pool_name), "%s",
			 s->pool.name);
	h->max_channels = s->geom.max_channels;
	h->channel_bytes = s->geom.channel_bytes;
	/* Only a number: meaningful to whoever may open our fds. */
	h->dir_fd = s->chan_dir.fd;
	h->dir_bytes = s->geom.dir_bytes;
	h->req_ring_cap = s->geom.req_ring_cap;
	h->resp_ring_cap = s->geom.resp_ring_cap;
	h->max_keys = s->max_keys;
	h->lease_ms = s->cfg.lease_ms;
	h->heartbeat_ms = s->cfg.heartbeat_ms;
	h->server_uid = (int32_t)s->uid;
	h->quota_reserved_bytes = s->cfg.quota_reserved_bytes;
	h->quota_pinned_bytes = s->cfg.quota_pinned_bytes;
	h->max_key_bytes = s->cfg.max_key_bytes;
	h->quota_uid_reserved_bytes = s->cfg.quota_uid_reserved_bytes;
	h->quota_uid_pinned_bytes = s->cfg.quota_uid_pinned_bytes;
	h->xfer_ms = s->cfg.xfer_ms;
	h->start_realtime_ns = kvr_clock_wall_ns();
	/* Relaxed: published by the release in kvr_seg_hdr_publish(). */
	atomic_store_explicit(&h->heartbeat_ns, kvr_clock_now_ns(),
			      memory_order_relaxed);
	atomic_store_explicit(&h->state, KVR_SERVER_STARTING,
			      memory_order_relaxed);
	/* Workers follow pool_zeroed_bytes, which the thread (started by
	 * create_pool, before this) already writes, only when this says
	 * so; published by R-SEG1 like the geometry. */
	h->pool_zeroing = kvr__prefault_running(s) ? 1u : 0u;
	atomic_store_explicit(&h->stats.workers, 0, memory_order_relaxed);
	/* The observability region's geometry, also published by R-SEG1. */
	s->obs = kvr_ctl_obs(h);
	s->hist_on = s->cfg.histograms != KVR_HISTS_OFF;
	s->chan_hist_on = s->cfg.histograms == KVR_HISTS_PER_CHANNEL;
	s->obs->hist_ops = KVR_HIST_GOPS;
	s->obs->hist_buckets = KVR_HIST_BUCKETS;
	s->obs->flags = (s->hist_on ? KVR_OBS_SERVER_HIST : 0) |
			(s->chan_hist_on ? 0 : KVR_OBS_NO_CHAN_HIST);
	s->obs->ns_slots = KVR_NS_OBS_MAX;
	if (s->cfg.test_delay_us)
		kvr_log_warn(
		    "--test-delay: every %s request sleeps %u us before "
		    "its answer (a test knob; never use it in "
		    "production)",
		    kvr_op_name(s->cfg.test_delay_op), s->cfg.test_delay_us);
	kvr_seg_hdr_publish(&h->seg);
}

/*
 * The storage engine. Its hash seed is a per-server secret: keys come from
 * workers, and a predictable seed would let one worker pile its keys into
 * one probe run. The effective key limit (the store may lower it) is what
 * the rings are sized against and what the WELCOME announces.
 */
static int create_store(struct kvr_srv *s)
{
	struct kvr_store_config sc = {0};
	int rc;

	sc.pool_bytes = s->cfg.pool_bytes;
	sc.align = s->cfg.align;
	sc.objects_hint = s->cfg.objects;
	sc.lease_ms = s->cfg.lease_ms;
	/* With --l2, and with --disk, one more channel each owns the
	 * tier's pins and loads. */
	sc.max_channels = s->cfg.max_workers + (s->cfg.l2.kind ? 1u : 0u) +
			  (s->cfg.disk.dir[0] ? 1u : 0u);
	sc.max_keys = s->cfg.max_keys;
	sc.quota_reserved_bytes = s->cfg.quota_reserved_bytes;
	sc.quota_pinned_bytes = s->cfg.quota_pinned_bytes;
	sc.max_key_bytes = s->cfg.max_key_bytes;
	sc.quota_uid_reserved_bytes = s->cfg.quota_uid_reserved_bytes;
	sc.quota_uid_pinned_bytes = s->cfg.quota_uid_pinned_bytes;
	sc.xfer_ms = s->cfg.xfer_ms;
	sc.max_ns = KVR_SRV_NS_MAX + 1; /* ids 1..KVR_SRV_NS_MAX */
	if (getrandom(&sc.hash_seed, sizeof(sc.hash_seed), 0) < 0)
		sc.hash_seed = kvr_clock_now_ns() ^ (uint64_t)getpid() << 32;
	/* The lease and transfer id key (store_id.h): without it ids are
	 * guessable, so there is no fallback. */
	if (getrandom(sc.id_key, sizeof(sc.id_key), 0) !=
	    (ssize_t)sizeof(sc.id_key)) {
		rc = -errno;
		kvr_log_err("getrandom for the lease id key: %s; kvringd needs "
			    "the kernel's random source",
			    kvr_strerror(rc));
		return rc;
	}
	rc = kvr_store_create(&sc, &s->store);
	if (rc < 0) {
		kvr_log_err("create storage engine: %s", kvr_strerror(rc));
		return rc;
	}
	s->max_keys = kvr_store_max_keys(s->store);
	s->store_cap = kvr_store_capacity(s->store);
	return 0;
}

/* io_uring, signalfd (SIGTERM, SIGINT) and the heartbeat timerfd. */
/*
 * The completion queue is sized well above the submission queue: every
 * connection has up to four multishot or pending polls, and a burst of
 * hang-ups must not overflow it (the kernel would buffer, but we would
 * pay a system call to flush).
 */
static int create_fds(struct kvr_srv *s)
{
	struct io_uring_params p = {0};
	struct itimerspec its = {0};
	sigset_t mask;
	int rc;

	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = 4096;
	rc = io_uring_queue_init_params(256, &s->ring, &p);
	if (rc < 0) {
		kvr_log_err("io_uring setup: %s; kvringd needs io_uring "
			    "(kernel >= 5.19, not disabled by "
			    "kernel.io_uring_disabled or a seccomp profile)",
			    strerror(-rc));
		return rc;
	}
	s->ring_ok = true;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	s->sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->sig_fd < 0)
		return -errno;

	s->timer_fd =
	    timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (s->timer_fd < 0)
		return -errno;
	its.it_interval.tv_sec = s->cfg.heartbeat_ms / 1000;
	its.it_interval.tv_nsec = (long)(s->cfg.heartbeat_ms % 1000) * 1000000;
	its.it_value = its.it_interval;
	if (timerfd_settime(s->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	return 0;
}

/* Connection table, channel map, namespaces and dispatch scratch. */
/*
 * Everything is sized at start-up from the options, so that the loop never
 * allocates per request (the copy transport's buffers are per connection,
 * allocated at its handshake). Connections outnumber channels by
 * KVR_SRV_PENDING_MAX: clients still in the handshake hold no channel.
 */
static int alloc_tables(struct kvr_srv *s)
{
	uint32_t nch = s->cfg.max_workers;

	s->nconns = nch + KVR_SRV_PENDING_MAX;
	s->conns = calloc(s->nconns, sizeof(*s->conns));
	s->chan_conn = malloc(nch * sizeof(*s->chan_conn));
	s->detached = malloc(nch * sizeof(*s->detached));
	s->active = calloc(s->nconns, sizeof(*s->active));
	s->polled = calloc(s->nconns, sizeof(*s->polled));
	s->hot = calloc(s->nconns, sizeof(*s->hot));
	s->ns = calloc(KVR_SRV_NS_MAX, sizeof(*s->ns));
	s->keys = calloc(s->max_keys, sizeof(*s->keys));
	s->sizes = calloc(s->max_keys, sizeof(*s->sizes));
	s->ans_cap = kvr_resp_sums_bytes(s->max_keys); /* the largest */
	if (s->ans_cap < kvr_resp_record_bytes(KVR_OP_STATS, 0))
		s->ans_cap = kvr_resp_record_bytes(KVR_OP_STATS, 0);
	s->ans = malloc(s->ans_cap);
	if (!s->conns || !s->chan_conn || !s->detached || !s->active ||
	    !s->polled || !s->hot || !s->ns || !s->keys || !s->sizes || !s->ans)
		return -ENOMEM;
	for (uint32_t i = 0; i < nch; i++) {
		s->chan_conn[i] = -1;
		s->detached[i].pidfd = -1;
	}
	for (uint32_t i = 0; i < s->nconns; i++) {
		struct kvr_conn *c = &s->conns[i];

		c->idx = i;
		c->sock = c->pidfd = c->req_efd = c->resp_efd = -1;
		c->blk.fd = c->blk.live_fd = -1;
		c->chan = -1;
	}
	return 0;
}

/* The rings must hold the largest request and answer with room to spare:
 * a record above half the ring would serialise the channel. */
static int check_rings(const struct kvr_srv *s)
{
	size_t req = kvr_req_bytes(KVR_OP_PREPARE_STORE, s->max_keys) + 16;
	size_t resp = kvr_resp_sums_bytes(s->max_keys) + 16;

	if (req > s->cfg.ring_bytes / 2 || resp > s->cfg.ring_bytes / 2) {
		kvr_log_err("--ring-bytes %u too small for --max-keys %u (a "
			    "request needs %zu bytes, at most half a ring): "
			    "raise --ring-bytes or lower --max-keys",
			    s->cfg.ring_bytes, s->max_keys, req);
		return -EINVAL;
	}
	return 0;
}

/*
 * Start-up order is the safety argument: nothing that might belong to
 * another server is touched before the lock is ours; the socket path is
 * replaced only when its owner is proven dead; segments are created with
 * O_EXCL after the sweep, so a live server's names make us refuse instead
 * of stealing. On failure kvr_srv_destroy() unwinds exactly what we made.
 */
int kvr_srv_create(const struct kvr_config *cfg, struct kvr_srv **out)
{
	char ctl_name[KVR_SEG_NAME_MAX + 1];
	struct kvr_srv *s;
	sigset_t mask;
	int rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->dir_fd = s->lock_fd = s->listen_fd = s->sig_fd = s->timer_fd = -1;
	s->ctl.fd = s->pool.fd = s->chan_dir.fd = -1;
	s->ctl_ro_fd = -1;
	s->uid = geteuid();
	/* From here on SIGTERM/SIGINT wait in the signalfd: one that arrives
	 * during start-up (a long pre-fault) stops the server gracefully as
	 * soon as the loop runs, instead of leaving segments behind. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (getrandom(s->boot_id, sizeof(s->boot_id), 0) < 0)
		memcpy(s->boot_id, &(uint64_t){kvr_clock_now_ns()}, 8);

	/* Before any descriptor is made: a limit too low for --max-workers
	 * is a clear refusal now, not EMFILE at some later connect. */
	rc = kvr__nofile_raise(cfg);
	if (rc < 0)
		goto fail;
	rc = kvr__listen_lock(s);
	if (rc < 0)
		goto fail;
	sweep(s);
	rc = create_store(s);
	if (rc < 0)
		goto fail;
	rc = check_rings(s);
	if (rc < 0)
		goto fail;
	rc = kvr_ctl_geom_compute(cfg->max_workers, cfg->ring_bytes,
				  cfg->ring_bytes, &s->geom);
	if (rc < 0) {
		kvr_log_err("control layout for %u workers, %u-byte rings: "
			    "invalid",
			    cfg->max_workers, cfg->ring_bytes);
		goto fail;
	}
	/* The .ctl first: a .pool without its .ctl is an orphan the next
	 * sweep removes, never the other way round. */
	rc = create_ctl(s, ctl_name, sizeof(ctl_name));
	if (rc < 0)
		goto fail;
	rc = kvr__pool_create(s);
	if (rc < 0)
		goto fail;
	rc = create_dir(s);
	if (rc < 0)
		goto fail;
	kvr_seg_prefault(s->ctl.base, s->ctl.bytes, true, NULL);
	format_ctl(s, ctl_name);
	rc = make_ctl_ro(s);
	if (rc < 0)
		goto fail;
	rc = create_fds(s);
	if (rc < 0) {
		if (rc != -ENOSYS && s->ring_ok)
			kvr_log_err("start-up: %s", kvr_strerror(rc));
		goto fail;
	}
	rc = alloc_tables(s);
	if (rc < 0) {
		kvr_log_err("start-up: %s", kvr_strerror(rc));
		goto fail;
	}
	rc = kvr_l2_start(s);
	if (rc < 0) {
		kvr_log_err("start-up: L2 tier: %s", kvr_strerror(rc));
		goto fail;
	}
	rc = kvr_dsrv_start(s);
	if (rc < 0) {
		kvr_log_err("start-up: disk tier: %s", kvr_strerror(rc));
		goto fail;
	}
	/* The socket appears last: a client (or a script waiting for the
	 * file) that sees it finds a server ready to answer, instead of
	 * waiting out a long pool pre-fault inside its connect timeout. A
	 * second server is kept out by the lock above, not by the socket. */
	rc = kvr__listen_open(s);
	if (rc < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	kvr_srv_destroy(s);
	return rc;
}

/*
 * Teardown mirrors start-up: workers first (their channels released in
 * the store), then the socket, then the pool and the control segment last,
 * the order the sweep relies on; the lock goes with the process.
 */
void kvr_srv_destroy(struct kvr_srv *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; s->conns && i < s->nconns; i++)
		kvr__chan_close(s, &s->conns[i], "server stopping", false);
	/* The pool goes with us: nothing is left to keep from anyone. */
	for (uint32_t i = 0; s->detached && i < s->cfg.max_workers; i++)
		if (s->detached[i].pidfd >= 0)
			close(s->detached[i].pidfd);
	kvr_l2_destroy(s->l2); /* its threads read the pool: before unmap */
	s->l2 = NULL;
	kvr_dsrv_destroy(s->disk); /* its I/O moves pool bytes: before unmap */
	s->disk = NULL;
	if (s->hdr)
		atomic_store_explicit(&s->hdr->state, KVR_SERVER_STOPPING,
				      memory_order_relaxed);
	kvr__listen_remove(s);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->ring_ok)
		io_uring_queue_exit(&s->ring);
	if (s->sig_fd >= 0)
		close(s->sig_fd);
	if (s->timer_fd >= 0)
		close(s->timer_fd);
	kvr__prefault_stop(s); /* it reads the pool: before unmap */
	/* Pool first, control segment last (the sweep's pairing rule). */
	if (s->pool.base) {
		bool named = s->pool.backend == KVR_SEG_BACKEND_SHM;

		if (named)
			kvr_log_info("removing pool segment %s/%s", s->pool.dir,
				     s->pool.name);
		kvr_seg_destroy(&s->pool);
	}
	if (s->ctl_ro_fd >= 0)
		close(s->ctl_ro_fd);
	if (s->ctl.base) {
		bool named = s->ctl.backend == KVR_SEG_BACKEND_SHM;

		if (named)
			kvr_log_info("removing control segment %s/%s",
				     KVR_SEG_DEFAULT_DIR, s->ctl.name);
		kvr_seg_destroy(&s->ctl);
	}
	if (s->chan_dir.base)
		kvr_seg_destroy(&s->chan_dir);
	kvr_store_destroy(s->store);
	kvr__listen_unlock(s);
	free(s->conns);
	free(s->chan_conn);
	free(s->detached);
	free(s->active);
	free(s->polled);
	free(s->hot);
	free(s->ns);
	free(s->keys);
	free(s->sizes);
	free(s->ans);
	free(s);
}
