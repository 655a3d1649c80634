/* SPDX-License-Identifier: MIT */
/*
 * t_server.c - the tests' side of a private kvringd (see t_server.h): the
 * tests' defaults and aborts around tools/kvrd/kvrd.c, which owns the
 * names, the fork and exec, the waits and the clean-up.
 */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kvring/chanmap.h>
#include <kvring/segment.h>

#include "t_server.h"

/* Most arguments a test passes to t_server_start(). */
#define T_SERVER_ARGS_MAX 48

static void die(const char *what)
{
	fprintf(stderr, "t_server: %s\n", what);
	abort();
}

int t_timeout_ms(int ms)
{
	const char *m = getenv("KVR_TEST_TIMEOUT_MULT");
	int mult = m ? atoi(m) : 1;

	return ms * (mult > 0 ? mult : 1);
}

const char *t_server_bin(void)
{
	const char *env = getenv("KVRINGD");

	return env && *env ? env : KVR_BIN_DIR "/server/kvringd";
}

void t_server_init(struct kvrd *t)
{
	struct kvrd_opts o = {
	    .prog = "t_server",
	    .bin = t_server_bin(),
	    .tag = "kvring-t",
	    .ready = KVRD_READY_CTL,
	    .start_timeout_ms = t_timeout_ms(10000),
	};

	kvrd_init(t, &o);
}

pid_t t_server_spawn(struct kvrd *t, const char *const *argv)
{
	pid_t pid = kvrd_spawn(t, argv);

	if (pid < 0)
		die("fork failed");
	return pid;
}

pid_t t_server_spawn_as(struct kvrd *t, const char *const *argv, uid_t uid)
{
	gid_t g = (gid_t)uid;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork failed");
	if (pid == 0) {
		int fd = open(t->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);

		if (fd >= 0)
			dup2(fd, 2);
		if (setgroups(1, &g) < 0 || setgid(g) < 0 || setuid(uid) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	t->pid = pid;
	return pid;
}

void t_kill_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

pid_t t_fork_ready(void (*child)(void *arg), void *arg)
{
	int p[2];
	pid_t pid;
	char b;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		child(arg);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (pid > 0 && read(p[0], &b, 1) != 1) {
		t_kill_reap(pid);
		pid = -1;
	}
	close(p[0]);
	return pid < 0 ? -1 : pid;
}

int t_server_map(struct kvrd *t)
{
	return kvrd_map(t, 0);
}

void t_server_start(struct kvrd *t, const char *const *args)
{
	const char *argv[T_SERVER_ARGS_MAX + 8];
	int n = 0;
	bool has_pool = false;

	if (!t->sock[0])
		t_server_init(t);
	argv[n++] = "--no-prefault";
	/*
	 * Small pages unless a test asks otherwise (a later --huge-pages
	 * wins): with huge pages reserved on the host, auto would put the
	 * pool on an unnamed hugetlb memfd, and the tests that check the
	 * named /dev/shm backend would depend on the machine. tests/huge/
	 * covers the huge-page path.
	 */
	argv[n++] = "--huge-pages";
	argv[n++] = "off";
	for (int i = 0; args && args[i]; i++) {
		if (i == T_SERVER_ARGS_MAX)
			die("more than 48 kvringd arguments");
		if (strcmp(args[i], "--pool-size") == 0)
			has_pool = true;
		argv[n++] = args[i];
	}
	if (!has_pool) {
		argv[n++] = "--pool-size";
		argv[n++] = "64M";
	}
	argv[n] = NULL;
	if (kvrd_start(t, argv) < 0)
		die("kvringd did not come up (reason and log above)");
}

int t_server_wait_exit(pid_t pid, int timeout_ms)
{
	return kvrd_wait_exit(pid, timeout_ms);
}

int t_server_stop(struct kvrd *t)
{
	return kvrd_stop(t, t_timeout_ms(10000));
}

void t_server_kill(struct kvrd *t)
{
	kvrd_kill(t);
}

void t_server_cleanup(struct kvrd *t)
{
	kvrd_cleanup(t, !getenv("KVR_KEEP_LOGS"));
}

void t_server_down(struct kvrd *t)
{
	if (t->pid > 0)
		t_server_stop(t);
	t_server_cleanup(t);
}

/* Channel blocks mapped by t_server_chan(), one per channel index, kept
 * while the server and the channel's generation stay the same. */
#define T_CHAN_CACHE 256
static struct {
	pid_t pid;
	uint32_t gen;
	struct kvr_seg seg;
} chan_cache[T_CHAN_CACHE];

/* What a free (or unreadable) channel reads as: all zero, state FREE. */
static union {
	struct kvr_channel_shm ch;
	char bytes[sizeof(struct kvr_channel_shm) +
		   sizeof(struct kvr_chan_obs_shm)];
} chan_zero;

const struct kvr_channel_shm *t_server_chan(const struct kvrd *t, uint32_t i)
{
	struct kvr_ctl_geom g;
	const struct kvr_chan_dir_shm *d;
	uint32_t st, gen;

	if (!t->hdr || !t->dir || i >= T_CHAN_CACHE ||
	    kvr_ctl_geom_compute(t->hdr->max_channels, t->hdr->req_ring_cap,
				 t->hdr->resp_ring_cap, &g) < 0 ||
	    i >= g.max_channels)
		return &chan_zero.ch;
	d = kvr_chan_dir(t->dir, i);
	st = atomic_load_explicit(&d->state, memory_order_acquire);
	gen = atomic_load_explicit(&d->generation, memory_order_relaxed);
	if (st == KVR_CHAN_FREE || d->fd < 0)
		return &chan_zero.ch;
	if (chan_cache[i].seg.base && chan_cache[i].pid == t->pid &&
	    chan_cache[i].gen == gen)
		return chan_cache[i].seg.base;
	if (chan_cache[i].seg.base)
		kvr_seg_detach(&chan_cache[i].seg);
	/* The inspector's way in: /proc/<server>/fd/<fd>, read-only. */
	if (kvr_chanmap_open_block(t->hdr->seg.creator_pid, d->fd,
				   g.channel_bytes, &chan_cache[i].seg,
				   NULL) < 0)
		return &chan_zero.ch;
	chan_cache[i].pid = t->pid;
	chan_cache[i].gen = gen;
	return chan_cache[i].seg.base;
}

bool t_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
	int limit = t_timeout_ms(timeout_ms);
	struct timespec ts = {0, 5000000L};

	for (int waited = 0; waited < limit; waited += 5) {
		if (cond(arg))
			return true;
		nanosleep(&ts, NULL);
	}
	return cond(arg);
}

bool t_server_log_has(const struct kvrd *t, const char *needle)
{
	return kvrd_log_has(t, needle);
}
