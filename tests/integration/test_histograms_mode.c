/* SPDX-License-Identifier: MIT */
/*
 * test_histograms_mode.c - kvringd --histograms per-channel|global|off
 * against a real kvringd, a real worker and the real kvring-inspect: what
 * each mode keeps in the control segment and the channel block, what the
 * worker samples by default, and that kvring-inspect --json and
 * --prometheus show what is kept and no per-channel series that is not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/hist.h>
#include <kvring/kvring.h>
#include <kvring/layout.h>

#include "worker_srv.h"

#define INSPECT KVR_BIN_DIR "/tools/kvring-inspect"
#define PINGS	200u

static struct kvrd srv;
static struct kvr_client *cli;

static void teardown(void)
{
	unsetenv("KVRING_RTT_SAMPLE");
	if (cli)
		kvr_close(cli);
	cli = NULL;
	t_server_down(&srv);
}

TestSuite(histograms_mode, .fini = teardown, .timeout = 60);

/* Start kvringd with --histograms @mode (NULL: the default), connect a
 * worker and send PINGS pings. */
static void run(const char *mode)
{
	const char *args[8] = {"--allow-root", "--heartbeat-ms", "20"};
	int n = 3;

	if (mode) {
		args[n++] = "--histograms";
		args[n++] = mode;
	}
	args[n] = NULL;
	t_server_init(&srv);
	t_server_start(&srv, args);
	cli = t_connect_1x1(&srv, "kvring-hist-mode");
	for (unsigned i = 0; i < PINGS; i++)
		cr_assert_eq(kvr_ping(cli, NULL), 0);
}

static const struct kvr_ctl_obs_shm *gobs(void)
{
	return kvr_ctl_obs((void *)srv.ctl);
}

static const struct kvr_chan_obs_shm *cobs(void)
{
	return kvr_chan_obs((struct kvr_channel_shm *)t_server_chan(
	    &srv, kvr_client_info(cli)->channel));
}

static uint64_t count_of(const struct kvr_hist_shm *h)
{
	return atomic_load_explicit(&h->count, memory_order_relaxed);
}

/* The server records a batch's times just after publishing its answers. */
static bool global_done(void *arg)
{
	(void)arg;
	return count_of(&gobs()->lat[kvr_hist_op_slot(KVR_OP_PING)]) >= PINGS;
}

/* stdout of kvring-inspect --name NAME @what. */
static char *inspect(const char *what)
{
	char cmd[256];
	size_t cap = 1 << 20, len;
	char *buf = malloc(cap);
	FILE *p;

	snprintf(cmd, sizeof(cmd), INSPECT " --name %s %s", srv.name, what);
	p = popen(cmd, "r");
	cr_assert(p && buf, "%s", cmd);
	len = fread(buf, 1, cap - 1, p);
	buf[len] = '\0';
	cr_expect_eq(pclose(p), 0, "%s: %s", cmd, buf);
	return buf;
}

Test(histograms_mode, per_channel_keeps_global_and_channel_histograms)
{
	char *out;

	run(NULL);
	cr_assert(t_wait_until(global_done, NULL, 5000));
	cr_expect_eq(
	    count_of(&cobs()->server_lat[kvr_hist_op_slot(KVR_OP_PING)]),
	    PINGS);
	cr_expect_eq(atomic_load(&cobs()->rtt_every), 64,
		     "the worker samples by default");
	cr_expect_eq(gobs()->flags & KVR_OBS_NO_CHAN_HIST, 0);
	out = inspect("--json");
	cr_expect_not_null(strstr(out, "\"histograms\":\"per-channel\""), "%s",
			   out);
	free(out);
	out = inspect("--prometheus");
	cr_expect_not_null(
	    strstr(out, "kvring_channel_op_latency_seconds_count{"), "%s", out);
	free(out);
}

Test(histograms_mode, global_keeps_no_channel_histograms_and_shows_none)
{
	const int k = kvr_hist_op_slot(KVR_OP_PING);
	char *out;

	run("global");
	cr_assert(t_wait_until(global_done, NULL, 5000));
	cr_expect_eq(count_of(&gobs()->lat[k]), PINGS);
	cr_expect_eq(count_of(&cobs()->server_lat[k]), 0);
	cr_expect_eq(atomic_load(&cobs()->rtt_every), 0,
		     "the worker samples round trips by default");
	cr_expect_eq(count_of(&cobs()->worker_rtt[k]), 0);
	cr_expect_neq(gobs()->flags & KVR_OBS_SERVER_HIST, 0);
	cr_expect_neq(gobs()->flags & KVR_OBS_NO_CHAN_HIST, 0);
	out = inspect("--json");
	cr_expect_not_null(strstr(out, "\"histograms\":\"global\""), "%s", out);
	free(out);
	out = inspect("--prometheus");
	cr_expect_not_null(strstr(out, "kvring_op_latency_seconds_count{op="
				       "\"ping\"} 200\n"),
			   "%s", out);
	cr_expect_null(strstr(out, "kvring_channel_op_latency_seconds_bucket"),
		       "%s", out);
	cr_expect_null(strstr(out, "kvring_channel_rtt_seconds_bucket"), "%s",
		       out);
	free(out);
}

Test(histograms_mode, global_still_times_round_trips_when_the_worker_asks)
{
	const int k = kvr_hist_op_slot(KVR_OP_PING);

	setenv("KVRING_RTT_SAMPLE", "1", 1);
	run("global");
	cr_expect_eq(atomic_load(&cobs()->rtt_every), 1);
	cr_expect_eq(count_of(&cobs()->worker_rtt[k]), PINGS);
}

Test(histograms_mode, off_keeps_none_and_the_inspector_says_so)
{
	const int k = kvr_hist_op_slot(KVR_OP_PING);
	char *out;

	run("off");
	/* Every ping was answered, so every one would have been timed. */
	cr_expect_eq(count_of(&gobs()->lat[k]), 0);
	cr_expect_eq(count_of(&cobs()->server_lat[k]), 0);
	cr_expect_eq(atomic_load(&cobs()->rtt_every), 0);
	cr_expect_eq(gobs()->flags & KVR_OBS_SERVER_HIST, 0);
	out = inspect("--json");
	cr_expect_not_null(strstr(out, "\"histograms\":\"off\""), "%s", out);
	cr_expect_not_null(strstr(out, "\"server_histograms\":false"), "%s",
			   out);
	free(out);
	/* Not kept, so not exported: no zeros that read as "no requests". */
	out = inspect("--prometheus");
	cr_expect_null(strstr(out, "kvring_op_latency_seconds"), "%s", out);
	cr_expect_not_null(strstr(out, "kvring_lookups_total"), "%s", out);
	free(out);
}
