/* SPDX-License-Identifier: MIT */
/*
 * Description: floods against a real kvringd cost a bounded log. A peer
 * that opens connection after connection with a bad handshake makes the
 * server write a burst of lines, then about one a second, and a summary
 * that counts the rest (the rate limit of <kvring/log.h>), however fast
 * it floods. A log that grows with the flood fails the test.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/clock.h>
#include <kvring/log.h>

#include "t_raw.h"
#include "t_server.h"

static struct kvrd srv;

static void start(void)
{
	const char *const args[] = {"--heartbeat-ms", "20", NULL};

	t_server_init(&srv);
	t_server_start(&srv, args);
}

static void finish(void)
{
	cr_expect_eq(t_server_stop(&srv), 0, "kvringd did not exit cleanly");
	t_server_cleanup(&srv);
}

/* Lines of the server's log that contain @needle. */
static unsigned log_lines(const char *needle)
{
	char line[4096];
	unsigned n = 0;
	FILE *f = fopen(srv.log_path, "r");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static bool all_refused(void *arg)
{
	return T_GSTAT(&srv, handshake_refused) == *(const unsigned *)arg;
}

/*
 * A flood of bad handshakes from one process writes a bounded number of
 * log lines: a burst, then about one a second, and summaries that count
 * the rest.
 */
Test(flood, bad_handshakes_write_a_bounded_log, .timeout = 120)
{
	struct kvr_hello hello = {.magic = KVR_PROTO_MAGIC,
				  .version = KVR_PROTO_VERSION + 1};
	struct kvr_welcome w;
	int fds[T_RAW_FDS], nfds, fd;
	uint64_t t0 = kvr_clock_now_ns(), secs;
	const unsigned floods = 1500;
	unsigned refused;

	start();
	hello.pid = (int32_t)getpid();
	t_ns_default(&hello.ns);
	for (unsigned i = 0; i < floods; i++) {
		fd = t_raw_hello(srv.sock, &hello, &w, fds, &nfds);
		cr_assert_geq(fd, 0, "handshake %u: %d", i, fd);
		close(fd);
	}
	secs = (kvr_clock_now_ns() - t0) / 1000000000u + 1;
	cr_expect(t_wait_until(all_refused, (void *)&floods, 5000),
		  "refused %llu of %u",
		  (unsigned long long)T_GSTAT(&srv, handshake_refused), floods);
	refused = log_lines("refused worker pid");
	cr_expect_leq(refused, KVR_LOG_PEER_BURST + secs + 1,
		      "%u refusal lines in %llu s", refused,
		      (unsigned long long)secs);
	cr_expect_geq(refused, 1u);
	/* What was not written is counted, once the pair may write again
	 * (at the latest one interval later, at a heartbeat's flush). */
	usleep(1300 * 1000);
	cr_expect_geq(log_lines("suppressed"), 1u, "no summary line");
	finish();
}
