/* SPDX-License-Identifier: MIT */
/*
 * Description: libkvring checks who the server is. A real
 * kvringd runs as another uid (nobody, 65534, with --allow-root so that
 * it would accept us); a root worker must refuse it with -EACCES and a
 * message naming both uids, unless the caller trusts that uid through
 * opts.trust_server_uid or $KVRING_SERVER_UID. Observed on main: run as
 * root, libkvring connected to a kvringd started by an unprivileged user
 * and wrote its chunk into that user's pool. Needs root (to start a
 * server as another uid); skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_raw.h"
#include "t_server.h"

#define OTHER_UID 65534u

static struct kvrd srv;

static void teardown(void)
{
	t_server_down(&srv);
	unsetenv("KVRING_SERVER_UID");
}

TestSuite(trust, .fini = teardown, .timeout = 60);

static bool server_running(void *arg)
{
	struct kvrd *t = arg;

	if (!t->hdr && t_server_map(t) < 0)
		return false;
	return atomic_load(&t->hdr->state) == KVR_SERVER_RUNNING;
}

/* Start kvringd as OTHER_UID; its stderr goes to srv.log_path. Without
 * root that cannot be done: the test is skipped. */
static void start_as_other_uid(void)
{
	const char *argv[] = {
	    t_server_bin(), "--socket",	   srv.sock, "--name",
	    srv.name,	    "--pool-size", "16M",    "--no-prefault",
	    "--allow-root", NULL};

	if (geteuid() != 0)
		cr_skip("needs root to start kvringd as another uid");
	t_server_init(&srv);
	t_server_spawn_as(&srv, argv, OTHER_UID);
	cr_assert(t_wait_until(server_running, &srv, 10000),
		  "kvringd as uid %u did not start (see %s)", OTHER_UID,
		  srv.log_path);
}

static int try_connect(uint32_t trust, char *err, size_t errlen)
{
	struct kvr_client_opts o = {0};
	struct kvr_client *c = NULL;
	int rc;

	o.socket_path = srv.sock;
	t_ns_default(&o.ns);
	o.no_prefault = true;
	o.trust_server_uid = trust;
	rc = kvr_connect(&o, &c, err, errlen);
	if (rc == 0)
		kvr_close(c);
	return rc;
}

Test(trust, worker_refuses_server_of_another_uid)
{
	char err[512] = "", want[32];
	int rc;

	start_as_other_uid();
	rc = try_connect(0, err, sizeof(err));
	cr_expect_eq(rc, -EACCES, "connect to a uid %u server: %d (%s)",
		     OTHER_UID, rc, err);
	snprintf(want, sizeof(want), "uid %u", OTHER_UID);
	cr_expect_not_null(strstr(err, want), "server uid not named: %s", err);
	snprintf(want, sizeof(want), "uid %u", (unsigned)geteuid());
	cr_expect_not_null(strstr(err, want), "our uid not named: %s", err);
	/* A negative number is not a uid, even one strtoul wraps onto the
	 * server's (2^64 - 65534 negated is 65534). */
	setenv("KVRING_SERVER_UID", "-18446744073709486082", 1);
	rc = try_connect(0, err, sizeof(err));
	unsetenv("KVRING_SERVER_UID");
	cr_expect_eq(rc, -EINVAL, "a negative $KVRING_SERVER_UID: %d (%s)", rc,
		     err);
	/* Refused before anything was sent: the server saw no worker. */
	cr_expect_eq(T_GSTAT(&srv, connects), 0u);
}

/* The server counts a connect after it sent the welcome: wait for it. */
static bool two_connects(void *arg)
{
	(void)arg;
	return T_GSTAT(&srv, connects) == 2;
}

Test(trust, worker_accepts_server_of_a_uid_it_trusts_when_told)
{
	char err[512] = "", uid[16];
	int rc;

	start_as_other_uid();
	rc = try_connect(OTHER_UID, err, sizeof(err));
	cr_expect_eq(rc, 0, "opts.trust_server_uid: %d (%s)", rc, err);
	snprintf(uid, sizeof(uid), "%u", OTHER_UID);
	setenv("KVRING_SERVER_UID", uid, 1);
	rc = try_connect(0, err, sizeof(err));
	cr_expect_eq(rc, 0, "$KVRING_SERVER_UID: %d (%s)", rc, err);
	setenv("KVRING_SERVER_UID", "nobody", 1);
	rc = try_connect(0, err, sizeof(err));
	cr_expect_eq(rc, -EINVAL, "a bad $KVRING_SERVER_UID: %d (%s)", rc, err);
	cr_expect_not_null(strstr(err, "KVRING_SERVER_UID"), "%s", err);
	unsetenv("KVRING_SERVER_UID");
	cr_expect(t_wait_until(two_connects, NULL, 5000), "connects %llu",
		  (unsigned long long)T_GSTAT(&srv, connects));
}
