/* SPDX-License-Identifier: MIT */
/*
 * t_server.c - start, observe and stop a real kvringd for integration
 * tests (see t_server.h). Every name is unique per test process, so tests
 * never see each other's server; leftovers are removed by cleanup.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kvring/chanmap.h>
#include <kvring/segment.h>

#include "t_server.h"

static void die(const char *what, const struct t_server *t)
{
	char cmd[300];

	fprintf(stderr, "t_server: %s\n", what);
	if (t && t->log_path[0]) {
		snprintf(cmd, sizeof(cmd), "tail -n 30 %s >&2", t->log_path);
		if (system(cmd) < 0)
			perror("system");
	}
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

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

void t_server_init(struct t_server *t)
{
	static unsigned seq;

	memset(t, 0, sizeof(*t));
	seq++;
	snprintf(t->sock, sizeof(t->sock), "/tmp/kvr-t%d-%u.sock",
		 (int)getpid(), seq);
	snprintf(t->name, sizeof(t->name), "kvring-t%d-%u", (int)getpid(), seq);
	snprintf(t->ctl_name, sizeof(t->ctl_name), "%s.ctl", t->name);
	snprintf(t->log_path, sizeof(t->log_path), "/tmp/kvr-t%d-%u.log",
		 (int)getpid(), seq);
}

pid_t t_server_spawn(struct t_server *t, const char *const *argv)
{
	pid_t pid, parent;
	int fd;

	fflush(NULL);
	parent = getpid();
	pid = fork();
	if (pid < 0)
		die("fork failed", t);
	if (pid == 0) {
		sigset_t none;

		/* A test that crashes must not leave its server running:
		 * SIGTERM (a graceful stop) when the test process dies. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(126);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		fd = open(t->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(t_server_bin(), (char *const *)argv);
		perror("execv kvringd");
		_exit(127);
	}
	return pid;
}

int t_server_map(struct t_server *t)
{
	struct kvr_seg seg = {.fd = -1};
	int rc;

	if (t->ctl) {
		munmap(t->ctl, t->ctl_bytes);
		t->ctl = NULL;
		t->hdr = NULL;
	}
	rc = kvr_seg_open_name(NULL, t->ctl_name, true, &seg, NULL);
	if (rc < 0)
		return rc;
	rc = kvr_seg_hdr_check(seg.base, seg.bytes, KVR_SEG_KIND_CONTROL,
			       kvr_layout_hash(), NULL);
	if (rc < 0) {
		kvr_seg_detach(&seg);
		return rc;
	}
	/* Keep the mapping; the struct kvr_seg itself is not needed. */
	t->ctl = seg.base;
	t->ctl_bytes = seg.bytes;
	t->hdr = t->ctl;
	return 0;
}

void t_server_start(struct t_server *t, const char *const *args)
{
	const char *argv[64];
	int n = 0, waited = 0, limit = t_timeout_ms(10000), st;
	bool has_pool = false;

	if (!t->sock[0])
		t_server_init(t);
	if (t->ctl) {
		/* A mapping of a previous server's segment says nothing. */
		munmap(t->ctl, t->ctl_bytes);
		t->ctl = NULL;
		t->hdr = NULL;
	}
	argv[n++] = "kvringd";
	argv[n++] = "--socket";
	argv[n++] = t->sock;
	argv[n++] = "--name";
	argv[n++] = t->name;
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
	for (int i = 0; args && args[i] && n < 58; i++) {
		if (strcmp(args[i], "--pool-size") == 0)
			has_pool = true;
		argv[n++] = args[i];
	}
	if (!has_pool) {
		argv[n++] = "--pool-size";
		argv[n++] = "64M";
	}
	argv[n] = NULL;
	t->pid = t_server_spawn(t, argv);

	for (;;) {
		if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
			t->pid = 0;
			die("kvringd exited during start-up", t);
		}
		if (t->hdr || t_server_map(t) == 0) {
			/* Only the segment our child created counts: a
			 * killed predecessor's may still be there. */
			if (t->hdr->seg.creator_pid != t->pid) {
				munmap(t->ctl, t->ctl_bytes);
				t->ctl = NULL;
				t->hdr = NULL;
			} else if (atomic_load_explicit(&t->hdr->state,
							memory_order_acquire) ==
				   KVR_SERVER_RUNNING) {
				return;
			}
		}
		if (waited >= limit) {
			kill(t->pid, SIGKILL);
			die("kvringd did not come up", t);
		}
		sleep_ms(5);
		waited += 5;
	}
}

int t_server_wait_exit(pid_t pid, int timeout_ms)
{
	int st, waited = 0;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (r < 0)
			return -1;
		if (waited >= timeout_ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		sleep_ms(5);
		waited += 5;
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

int t_server_stop(struct t_server *t)
{
	int rc;

	if (!t->pid)
		return -1;
	kill(t->pid, SIGTERM);
	rc = t_server_wait_exit(t->pid, t_timeout_ms(10000));
	t->pid = 0;
	return rc;
}

void t_server_kill(struct t_server *t)
{
	if (!t->pid)
		return;
	kill(t->pid, SIGKILL);
	waitpid(t->pid, NULL, 0);
	t->pid = 0;
}

void t_server_cleanup(struct t_server *t)
{
	char path[160];

	if (t->pid)
		t_server_kill(t);
	if (t->ctl) {
		munmap(t->ctl, t->ctl_bytes);
		t->ctl = NULL;
		t->hdr = NULL;
	}
	if (!t->sock[0])
		return;
	unlink(t->sock);
	snprintf(path, sizeof(path), "%s.lock", t->sock);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s.ctl", t->name);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s.pool", t->name);
	unlink(path);
	if (!getenv("KVR_KEEP_LOGS"))
		unlink(t->log_path);
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

const struct kvr_channel_shm *t_server_chan(const struct t_server *t,
					    uint32_t i)
{
	struct kvr_ctl_geom g;
	const struct kvr_chan_dir_shm *d;
	uint32_t st, gen;

	if (!t->hdr || i >= T_CHAN_CACHE ||
	    kvr_ctl_geom_compute(t->hdr->max_channels, t->hdr->req_ring_cap,
				 t->hdr->resp_ring_cap, &g) < 0 ||
	    i >= g.max_channels)
		return &chan_zero.ch;
	d = kvr_ctl_dir((void *)t->ctl, &g, i);
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

	for (int waited = 0; waited < limit; waited += 5) {
		if (cond(arg))
			return true;
		sleep_ms(5);
	}
	return cond(arg);
}

bool t_server_log_has(const struct t_server *t, const char *needle)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(t->log_path, "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}
