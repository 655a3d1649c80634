/* SPDX-License-Identifier: MIT */
/*
 * t_prom.c - see t_prom.h. promtool is looked up in $PATH each call (cheap
 * next to running it); its stdout and stderr are collected together. A
 * missing promtool is reported to the caller, which fails the test.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_prom.h"

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4200], dir[4096];

	while (path && *path) {
		size_t k = strcspn(path, ":");

		snprintf(dir, sizeof(dir), "%.*s", (int)k, path);
		snprintf(buf, sizeof(buf), "%s/%s", dir[0] ? dir : ".", prog);
		if (access(buf, X_OK) == 0)
			return true;
		path += k + (path[k] == ':');
	}
	return false;
}

int t_promtool_check(const char *text, char *out, size_t n)
{
	int in[2], o[2], st;
	size_t len = 0;
	ssize_t r;
	pid_t pid;

	if (!in_path("promtool")) {
		snprintf(out, n,
			 "promtool is not installed: apt-get install "
			 "prometheus (or scripts/setup.sh deps)");
		return -1;
	}
	if (pipe(in) || pipe(o)) {
		fprintf(stderr, "t_prom: pipe failed\n");
		abort();
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "t_prom: fork failed\n");
		abort();
	}
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(o[1], 1);
		dup2(o[1], 2);
		close(in[0]);
		close(in[1]);
		close(o[0]);
		close(o[1]);
		execlp("promtool", "promtool", "check", "metrics",
		       (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(o[1]);
	signal(SIGPIPE, SIG_IGN);
	for (size_t off = 0, tl = strlen(text); off < tl; off += (size_t)r) {
		r = write(in[1], text + off, tl - off);
		if (r <= 0)
			break;
	}
	close(in[1]);
	while (n && len < n - 1 && (r = read(o[0], out + len, n - 1 - len)) > 0)
		len += (size_t)r;
	if (n)
		out[len] = '\0';
	close(o[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
