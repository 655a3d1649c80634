/* SPDX-License-Identifier: MIT */
/*
 * server.c - the kvringd under test, from the parent's side: its names
 * (a private socket, segment base and log per run, or those of a running
 * server with --socket), starting it and waiting until its control segment
 * says RUNNING, SIGKILLing and restarting it the way a supervisor would,
 * stopping it with SIGTERM at the end (its exit status is an invariant),
 * removing what it left on disk, and the read-only mapping of its control
 * segment that the audit reads (the same view kvring-inspect has).
 *
 * Nothing here is used in attach mode (--socket) except the names and the
 * control segment mapping: a server we did not start is never killed,
 * stopped or cleaned up. It does not decide when to kill the server
 * (killer.c) and does not reap it when it dies on its own (fleet.c).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kvring/paths.h>

#include "stress.h"

/* Find kvringd: --kvringd, else the one beside this binary (installed
 * tree) or ../server/kvringd (build tree), else "kvringd" from PATH
 * (execvp). */
static const char *find_kvringd(const struct st_opts *o, char *buf, size_t n)
{
	if (o->kvringd)
		return o->kvringd;
	if (kvr_find_kvringd(buf, n) == 0)
		return buf;
	return "kvringd";
}

/*
 * Fork and exec our kvringd with its stdout/stderr appended to the log.
 * --max-workers leaves room for the replacements that connect while the
 * server is still cleaning up their killed predecessors, plus the audit.
 * Return: the child's pid, or -errno if fork failed (an exec failure is
 * seen as the child exiting 127 during start-up).
 */
static pid_t spawn_server(struct st_run *r)
{
	char pool[32], maxw[16], binbuf[PATH_MAX], xfer[16], stall[16];
	const char *argv[20 + MAX_SRV_ARGS];
	const char *bin = find_kvringd(&r->o, binbuf, sizeof(binbuf));
	unsigned n = 0;
	pid_t pid;

	snprintf(pool, sizeof(pool), "%" PRIu64, r->o.pool_bytes);
	snprintf(maxw, sizeof(maxw), "%u", r->o.workers * 2 + 8);
	argv[n++] = "kvringd";
	argv[n++] = "--socket";
	argv[n++] = r->sock;
	argv[n++] = "--name";
	argv[n++] = r->name;
	argv[n++] = "--pool-size";
	argv[n++] = pool;
	argv[n++] = "--max-workers";
	argv[n++] = maxw;
	if (r->o.stop_every) {
		/* Transfers of a stopped worker must be reclaimed while it is
		 * stopped (--stall-ms must stay below --xfer-ms). */
		snprintf(xfer, sizeof(xfer), "%u", r->o.xfer_ms);
		snprintf(stall, sizeof(stall), "%u", r->o.xfer_ms / 2);
		argv[n++] = "--xfer-ms";
		argv[n++] = xfer;
		argv[n++] = "--stall-ms";
		argv[n++] = stall;
	}
	for (unsigned i = 0; i < r->o.nsrv_args; i++)
		argv[n++] = r->o.srv_args[i];
	argv[n] = NULL;
	/* No buffered output may be duplicated into the child. */
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(r->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);

		/* Own process group: a terminal's Ctrl-C stops the run in
		 * order, it does not kill the server before the audit. */
		setpgid(0, 0);
		signal(SIGINT, SIG_DFL);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		if (strchr(bin, '/'))
			execv(bin, (char *const *)argv);
		else
			execvp(bin, (char *const *)argv);
		fprintf(stderr, PROG ": exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	return pid;
}

void st_server_ctl_unmap(struct st_run *r)
{
	if (r->ctl.base)
		kvr_seg_detach(&r->ctl);
	memset(&r->ctl, 0, sizeof(r->ctl));
	r->ctl.fd = -1;
	r->hdr = NULL;
}

/*
 * Map the control segment read-only. kvr_seg_hdr_check() validates magic,
 * ABI and layout hash, and its acquire on `ready` (A-SEG1, lib/segment.c)
 * orders the geometry fields we read later (pool_bytes, heartbeat_ms).
 * With @creator, a segment left by a previous (killed) server, or one not
 * RUNNING yet, counts as "not yet": -EAGAIN.
 */
int st_server_ctl_map(struct st_run *r, pid_t creator)
{
	char ctl_name[96];
	int rc;

	st_server_ctl_unmap(r);
	snprintf(ctl_name, sizeof(ctl_name), "%s" KVR_SEG_CTL_SUFFIX, r->name);
	rc = kvr_seg_open_name(NULL, ctl_name, true, &r->ctl, NULL);
	if (rc < 0)
		return rc;
	rc = kvr_seg_hdr_check(r->ctl.base, r->ctl.bytes, KVR_SEG_KIND_CONTROL,
			       kvr_layout_hash(), NULL);
	if (rc == 0) {
		r->hdr = r->ctl.base;
		/*
		 * A-ST3: acquire on state, but it has no release partner:
		 * kvringd stores RUNNING relaxed (server/loop.c
		 * kvr_loop_run()). That is enough here, because we only
		 * wait for it; the socket's readiness is not a memory
		 * ordering matter, and the header fields were ordered by
		 * A-SEG1 above.
		 */
		if ((creator && r->hdr->seg.creator_pid != creator) ||
		    atomic_load_explicit(&r->hdr->state,
					 memory_order_acquire) !=
			KVR_SERVER_RUNNING)
			rc = -EAGAIN;
	}
	if (rc < 0)
		st_server_ctl_unmap(r);
	return rc;
}

void st_server_log_tail(const struct st_run *r)
{
	char cmd[256];

	if (!r->log_path[0])
		return;
	fprintf(stderr, PROG ": last lines of the server log %s:\n",
		r->log_path);
	snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", r->log_path);
	if (system(cmd) < 0)
		perror(PROG ": system");
}

/* Start our server and wait (10 s) until its segment says RUNNING. On
 * failure the reason is printed with the log's tail and srv_pid is 0. */
static int start_server(struct st_run *r)
{
	int st;

	r->srv_pid = spawn_server(r);
	if (r->srv_pid < 0)
		return r->srv_pid;
	for (int waited = 0; waited < 10000; waited += 5) {
		if (waitpid(r->srv_pid, &st, WNOHANG) == r->srv_pid) {
			fprintf(stderr,
				PROG ": kvringd exited during start-up "
				     "(status %d)\n",
				st);
			r->srv_pid = 0;
			st_server_log_tail(r);
			return -ECHILD;
		}
		if (st_server_ctl_map(r, r->srv_pid) == 0)
			return 0;
		st_sleep_us(5000);
	}
	fprintf(stderr, PROG ": kvringd did not come up within 10 s\n");
	st_server_log_tail(r);
	kill(r->srv_pid, SIGKILL);
	waitpid(r->srv_pid, NULL, 0);
	r->srv_pid = 0;
	return -ETIMEDOUT;
}

/*
 * Names: in attach mode the given socket, and --name (else the default
 * base kvring-<uid>) for the audit. Otherwise a private socket, segment
 * base and log named after our pid, so that runs side by side (ctest) do
 * not meet, and start our server on them.
 */
int st_server_setup(struct st_run *r)
{
	char pool_base[64];

	if (r->o.socket) {
		if (r->o.name)
			snprintf(r->name, sizeof(r->name), "%s", r->o.name);
		else if (kvr_seg_default_base(pool_base, sizeof(pool_base)) ==
			 0)
			snprintf(r->name, sizeof(r->name), "%s", pool_base);
		snprintf(r->sock, sizeof(r->sock), "%s", r->o.socket);
		return 0;
	}
	snprintf(r->sock, sizeof(r->sock), "/tmp/kvring-stress-%d.sock",
		 (int)getpid());
	snprintf(r->name, sizeof(r->name), "kvring-stress-%d", (int)getpid());
	if (r->o.log_path)
		snprintf(r->log_path, sizeof(r->log_path), "%s", r->o.log_path);
	else
		snprintf(r->log_path, sizeof(r->log_path),
			 "/tmp/kvring-stress-%d.log", (int)getpid());
	unlink(r->log_path);
	/* Workers (and the audit) connect to whatever o.socket says. */
	r->o.socket = r->sock;
	return start_server(r);
}

void st_server_kill_restart(struct st_run *r)
{
	/* Restarted at once, the way a supervisor would: the new server
	 * must cope with the dead one's socket and segments itself. It is
	 * reaped here, so fleet.c never mistakes this death for a crash. */
	kill(r->srv_pid, SIGKILL);
	waitpid(r->srv_pid, NULL, 0);
	r->srv_kills++;
	r->srv_pid = 0;
	st_server_ctl_unmap(r);
	if (start_server(r) == 0)
		r->srv_restarts++;
	else
		r->srv_crashed = true; /* cannot restart: ends the run */
}

/*
 * Our server must also stop cleanly: SIGTERM, then up to 10 s for it to
 * exit. srv_exit gets its exit status (128 + signal if it died of one),
 * or 255 if it had to be SIGKILLed. Nothing to do if it is not ours or
 * already gone.
 */
void st_server_stop(struct st_run *r)
{
	int st;

	if (r->srv_pid <= 0)
		return;
	kill(r->srv_pid, SIGTERM);
	r->srv_exit = -1;
	for (int waited = 0; waited < 10000; waited += 5) {
		if (waitpid(r->srv_pid, &st, WNOHANG) == r->srv_pid) {
			r->srv_exit = WIFEXITED(st) ? WEXITSTATUS(st)
						    : 128 + WTERMSIG(st);
			break;
		}
		st_sleep_us(5000);
	}
	if (r->srv_exit < 0) {
		kill(r->srv_pid, SIGKILL);
		waitpid(r->srv_pid, NULL, 0);
		r->srv_exit = 255;
	}
	r->srv_pid = 0;
}

/*
 * Our private server is gone (stopped, or crashed): remove what it may
 * have left under its private names -- the socket, the lock file kvringd
 * keeps by design, and after a crash its segments. Never used in attach
 * mode, where nothing here is ours.
 */
void st_server_remove_files(const struct st_run *r)
{
	char path[192];

	unlink(r->sock);
	snprintf(path, sizeof(path), "%s.lock", r->sock);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s" KVR_SEG_CTL_SUFFIX, r->name);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s" KVR_SEG_POOL_SUFFIX,
		 r->name);
	unlink(path);
}
