/* SPDX-License-Identifier: MIT */
/*
 * kvrd.c - start, watch and stop a private kvringd (see kvrd.h) for the
 * test suites, kvring-bench and kvring-stress.
 *
 * The child is ours alone: it is signalled only by its pid, never by name
 * or group, and only while we have not reaped it. Waiting polls every 5 ms
 * with waitpid(WNOHANG) so that a server dying during start-up is seen at
 * once, with its log, rather than after the timeout. Nothing here measures
 * anything; the clock only bounds the waits.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kvring/chanmap.h>
#include <kvring/clock.h>
#include <kvring/paths.h>
#include <kvring/segment.h>

#include "kvrd.h"

/* Most arguments kvrd_start() passes, NULL included. */
#define KVRD_ARGS_MAX 64

static const char *prog(const struct kvrd *d)
{
	return d->o.prog ? d->o.prog : "kvrd";
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* The binary: as kvrd.h says for kvrd_opts.bin. */
static void find_bin(struct kvrd *d)
{
	const char *env = getenv("KVRINGD");

	if (d->o.bin && *d->o.bin)
		snprintf(d->bin, sizeof(d->bin), "%s", d->o.bin);
	else if (env && *env)
		snprintf(d->bin, sizeof(d->bin), "%s", env);
	else if (kvr_find_kvringd(d->bin, sizeof(d->bin)) != 0)
		snprintf(d->bin, sizeof(d->bin), "kvringd"); /* from $PATH */
}

void kvrd_init(struct kvrd *d, const struct kvrd_opts *o)
{
	static unsigned seq;
	const char *tag;
	char id[48];

	memset(d, 0, sizeof(*d));
	if (o)
		d->o = *o;
	tag = d->o.tag ? d->o.tag : "kvrd";
	/* The process's first server keeps the short names the docs show
	 * (/tmp/kvring-stress-<pid>.sock); later ones add a counter. */
	if (seq++ == 0)
		snprintf(id, sizeof(id), "%d", (int)getpid());
	else
		snprintf(id, sizeof(id), "%d-%u", (int)getpid(), seq);
	snprintf(d->sock, sizeof(d->sock), "/tmp/%s-%s.sock", tag, id);
	snprintf(d->name, sizeof(d->name), "%s-%s", tag, id);
	snprintf(d->ctl_name, sizeof(d->ctl_name), "%s" KVR_SEG_CTL_SUFFIX,
		 d->name);
	if (d->o.log_path)
		snprintf(d->log_path, sizeof(d->log_path), "%s", d->o.log_path);
	else
		snprintf(d->log_path, sizeof(d->log_path), "/tmp/%s-%s.log",
			 tag, id);
	/* A log of an earlier process with our pid says nothing about us. */
	unlink(d->log_path);
	find_bin(d);
}

pid_t kvrd_spawn(struct kvrd *d, const char *const *argv)
{
	pid_t pid, parent = getpid();

	if (!d->bin[0])
		find_bin(d);
	/* No buffered output may be written twice, by us and the child. */
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		sigset_t none;
		int fd;

		/* SIGTERM, a clean stop, when we die first; it survives
		 * execve(). If we died before prctl(), nobody would stop
		 * this server: give up instead. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(126);
		if (d->o.own_pgrp)
			setpgid(0, 0);
		/* A test runner may block signals or set SIGINT to ignore;
		 * the server must see both as kvringd documents them. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		if (strchr(d->bin, '/'))
			execv(d->bin, (char *const *)argv);
		else
			execvp(d->bin, (char *const *)argv);
		fprintf(stderr, "%s: exec %s: %s\n", prog(d), d->bin,
			strerror(errno));
		_exit(127);
	}
	return pid;
}

void kvrd_unmap(struct kvrd *d)
{
	if (d->ctl)
		munmap(d->ctl, d->ctl_bytes);
	if (d->dir)
		munmap(d->dir, d->dir_bytes);
	d->ctl = d->dir = NULL;
	d->ctl_bytes = d->dir_bytes = 0;
	d->hdr = NULL;
}

int kvrd_map(struct kvrd *d, pid_t creator)
{
	struct kvr_seg seg = {.fd = -1};
	int rc;

	kvrd_unmap(d);
	rc = kvr_seg_open_name(NULL, d->ctl_name, true, &seg, NULL);
	if (rc < 0)
		return rc;
	/* The check's acquire on `ready` (A-SEG1, lib/segment.c) orders the
	 * geometry fields read later. */
	rc = kvr_seg_hdr_check(seg.base, seg.bytes, KVR_SEG_KIND_CONTROL,
			       kvr_layout_hash(), NULL);
	if (rc < 0) {
		kvr_seg_detach(&seg);
		return rc;
	}
	/* Keep the mapping; kvr_seg_open_name() closed the fd already. */
	d->ctl = seg.base;
	d->ctl_bytes = seg.bytes;
	d->hdr = d->ctl;
	/*
	 * A-KVRD1: acquire on state, with no release partner: kvringd
	 * stores RUNNING relaxed (server/loop.c). Enough here, since we only
	 * wait for the value; the header fields were ordered by A-SEG1.
	 */
	if (creator &&
	    (d->hdr->seg.creator_pid != creator ||
	     atomic_load_explicit(&d->hdr->state, memory_order_acquire) !=
		 KVR_SERVER_RUNNING)) {
		kvrd_unmap(d);
		return -EAGAIN;
	}
	/* The channel directory, through the server's fd table as the
	 * inspector does; without it (not our uid) channels read as free. */
	if (kvr_chanmap_open_dir(d->hdr->seg.creator_pid, d->hdr->dir_fd,
				 d->hdr->dir_bytes, &seg, NULL) == 0) {
		d->dir = seg.base;
		d->dir_bytes = seg.bytes;
	}
	return 0;
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Whether the log holds @needle after byte @from. */
static bool log_has_from(const struct kvrd *d, long from, const char *needle)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(d->log_path, "r");

	if (!f)
		return false;
	if (from > 0 && fseek(f, from, SEEK_SET) != 0) {
		fclose(f);
		return false;
	}
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

bool kvrd_log_has(const struct kvrd *d, const char *needle)
{
	return log_has_from(d, 0, needle);
}

void kvrd_log_tail(const struct kvrd *d, unsigned lines)
{
	char buf[16384];
	size_t n, start;
	unsigned seen = 0;
	long size = file_size(d->log_path);
	FILE *f;

	if (!d->log_path[0] || !(f = fopen(d->log_path, "r")))
		return;
	/* The last 16 KiB hold the last lines of any log worth reading. */
	if (size > (long)sizeof(buf) - 1)
		fseek(f, size - (long)sizeof(buf) + 1, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	start = n;
	while (start > 0) {
		if (buf[start - 1] == '\n' && start != n && ++seen == lines)
			break;
		start--;
	}
	fprintf(stderr, "%s: last lines of the kvringd log %s:\n", prog(d),
		d->log_path);
	fputs(buf + start, stderr);
}

int kvrd_wait_exit(pid_t pid, int timeout_ms)
{
	uint64_t t0 = kvr_clock_now_ns();
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -1;
		if (kvr_clock_now_ns() - t0 >=
		    (uint64_t)timeout_ms * 1000000u) {
			kill(pid, SIGKILL); /* our own child, by pid */
			waitpid(pid, &st, 0);
			return -1;
		}
		sleep_ms(5);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

/* Whether our child is ready, as d->o.ready says. */
static bool is_ready(struct kvrd *d)
{
	if (d->o.ready == KVRD_READY_LOG)
		return log_has_from(d, d->log_off, "kvringd ready");
	return d->hdr || kvrd_map(d, d->pid) == 0;
}

int kvrd_start(struct kvrd *d, const char *const *args)
{
	const char *argv[KVRD_ARGS_MAX];
	int n = 0,
	    limit = d->o.start_timeout_ms ? d->o.start_timeout_ms : 10000;
	uint64_t t0;
	pid_t pid;

	/* A mapping of a previous server's segment says nothing. */
	kvrd_unmap(d);
	argv[n++] = "kvringd";
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--name";
	argv[n++] = d->name;
	for (int i = 0; args && args[i]; i++) {
		if (n == KVRD_ARGS_MAX - 1) {
			fprintf(stderr,
				"%s: start kvringd: more than %d arguments; "
				"pass fewer\n",
				prog(d), KVRD_ARGS_MAX - 6);
			return -E2BIG;
		}
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	d->log_off = file_size(d->log_path);
	pid = kvrd_spawn(d, argv);
	if (pid < 0) {
		fprintf(stderr, "%s: start kvringd: fork: %s\n", prog(d),
			strerror((int)-pid));
		return (int)pid;
	}
	d->pid = pid;
	t0 = kvr_clock_now_ns();
	for (;;) {
		int st;

		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			fprintf(stderr,
				"%s: kvringd (%s) exited during start-up "
				"(%s %d); its log follows\n",
				prog(d), d->bin,
				WIFEXITED(st) ? "status" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			kvrd_log_tail(d, 30);
			return -ECHILD;
		}
		if (is_ready(d))
			return 0;
		if (kvr_clock_now_ns() - t0 >= (uint64_t)limit * 1000000u) {
			fprintf(stderr,
				"%s: kvringd (%s) not ready after %d ms; "
				"killed it, its log follows\n",
				prog(d), d->bin, limit);
			kvrd_kill(d);
			kvrd_log_tail(d, 30);
			return -ETIMEDOUT;
		}
		sleep_ms(5);
	}
}

int kvrd_stop(struct kvrd *d, int timeout_ms)
{
	int rc;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM); /* our own child, by pid */
	rc = kvrd_wait_exit(d->pid, timeout_ms);
	d->pid = 0;
	return rc;
}

void kvrd_kill(struct kvrd *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL); /* our own child, by pid */
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
}

void kvrd_cleanup(struct kvrd *d, bool remove_log)
{
	char path[192];

	kvrd_kill(d);
	kvrd_unmap(d);
	if (!d->sock[0])
		return;
	unlink(d->sock);
	snprintf(path, sizeof(path), "%s.lock", d->sock);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s" KVR_SEG_CTL_SUFFIX, d->name);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/%s" KVR_SEG_POOL_SUFFIX,
		 d->name);
	unlink(path);
	if (remove_log)
		unlink(d->log_path);
}
