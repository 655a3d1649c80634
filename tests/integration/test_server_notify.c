/* SPDX-License-Identifier: MIT */
/*
 * test_server_notify.c - kvringd as a Type=notify service: a real
 * $NOTIFY_SOCKET datagram socket, as systemd makes one, receives STATUS=
 * while the pool is pre-faulted, READY=1 only once the listening socket
 * accepts, and STOPPING=1 at SIGTERM. Registered only when kvringd is built
 * with libsystemd (tests/CMakeLists.txt).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "t_server.h"

static struct kvrd srv;
static int nfd = -1;
static char npath[108];

static void setup(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	t_server_init(&srv);
	snprintf(npath, sizeof(npath), "/tmp/kvr-notify-%d.sock",
		 (int)getpid());
	unlink(npath);
	nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(nfd, 0, "socket: %s", strerror(errno));
	strcpy(sa.sun_path, npath);
	cr_assert_eq(bind(nfd, (struct sockaddr *)&sa, sizeof(sa)), 0,
		     "bind %s: %s", npath, strerror(errno));
	setenv("NOTIFY_SOCKET", npath, 1);
}

static void teardown(void)
{
	unsetenv("NOTIFY_SOCKET");
	if (srv.pid)
		t_server_stop(&srv);
	t_server_cleanup(&srv);
	if (nfd >= 0)
		close(nfd);
	unlink(npath);
}

TestSuite(notify, .init = setup, .fini = teardown, .timeout = 60);

/* One datagram into buf, waiting up to ms; false on timeout. */
static bool recv_msg(char *buf, size_t n, int ms)
{
	struct pollfd p = {nfd, POLLIN, 0};
	ssize_t r;

	if (poll(&p, 1, t_timeout_ms(ms)) != 1)
		return false;
	r = recv(nfd, buf, n - 1, 0);
	if (r < 0)
		return false;
	buf[r] = '\0';
	return true;
}

static bool socket_accepts(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	strcpy(sa.sun_path, path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Start kvringd with a pool it really pre-faults (no --no-prefault), in
 * line on 4 KiB pages: with huge pages free (another test, or a bench,
 * may have reserved some) it would zero them in the background after
 * READY=1 and never send the in-line "pre-faulting pool" lines. The
 * background path has its own test (tests/huge). */
static void spawn(const char *pool)
{
	const char *argv[] = {
	    "kvringd",	    "--socket",	   srv.sock, "--name",
	    srv.name,	    "--pool-size", pool,     "--allow-root",
	    "--huge-pages", "off",	   NULL};

	srv.pid = t_server_spawn(&srv, argv);
}

Test(notify, sends_ready_only_when_the_socket_accepts)
{
	char m[512];
	int statuses = 0;
	bool ready = false;

	spawn("256M");
	while (!ready && recv_msg(m, sizeof(m), 20000)) {
		if (strstr(m, "READY=1")) {
			ready = true;
			/* The moment READY=1 is sent, a worker must be
			 * served: the socket exists and accepts. */
			cr_expect(socket_accepts(srv.sock),
				  "READY=1 before %s accepts", srv.sock);
			cr_expect_neq(strstr(m, "MAINPID="), NULL, "%s", m);
		} else {
			/*
			 * Whether the socket exists when a STATUS= line is
			 * read says nothing: the server may have sent it just
			 * before binding, and we read it later. The order the
			 * server promises is checked at READY=1 above.
			 */
			cr_expect_neq(strstr(m, "STATUS="), NULL, "%s", m);
			statuses++;
		}
	}
	cr_assert(ready, "no READY=1 within 20 s");
	cr_expect_geq(statuses, 1, "no STATUS= during the pre-fault");
}

Test(notify, reports_prefault_progress_when_the_pool_is_faulted)
{
	char m[512];
	bool seen = false;

	spawn("64M");
	while (recv_msg(m, sizeof(m), 20000) && !strstr(m, "READY=1"))
		seen |= strstr(m, "STATUS=pre-faulting pool") != NULL;
	cr_expect(seen, "no 'STATUS=pre-faulting pool' line");
}

Test(notify, sends_stopping_when_sigterm_arrives)
{
	char m[512];
	bool stopping = false;

	spawn("64M");
	while (recv_msg(m, sizeof(m), 20000) && !strstr(m, "READY=1"))
		;
	kill(srv.pid, SIGTERM);
	while (!stopping && recv_msg(m, sizeof(m), 10000))
		stopping = strstr(m, "STOPPING=1") != NULL;
	cr_expect(stopping, "no STOPPING=1 after SIGTERM");
	cr_expect_eq(t_server_wait_exit(srv.pid, t_timeout_ms(10000)), 0);
	srv.pid = 0;
}
