/* SPDX-License-Identifier: MIT */
/*
 * Description: the worker's background pre-fault (worker/touch.c) against
 * a real kvringd on 4 KiB pages: kvr_connect returns before the pool is
 * touched, stores made meanwhile land byte for byte, kvr_prefault_status
 * reports the run and its time, a close while the thread still runs joins
 * it (nothing touches the unmapped pool), a forked child can close its
 * copy without the parent's thread, the in-line default reports
 * status 0 at once, $KVRING_PREFAULT takes only the modes it names, and
 * a store's slots are mapped when its prepare returns during the run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_raw.h"
#include "t_server.h"
#include "t_worker.h"

static struct kvrd srv;

static void setup(void)
{
	const char *args[] = {"--huge-pages", "off", "--pool-size", "256M",
			      NULL};

	t_server_init(&srv);
	t_server_start(&srv, args);
}

static void teardown(void)
{
	t_server_cleanup(&srv);
}

TestSuite(worker_touch, .init = setup, .fini = teardown, .timeout = 60);

static struct kvr_client_opts opts_bg(bool background)
{
	struct kvr_client_opts o;

	t_worker_opts(&o, &srv);
	o.prefault_background = background;
	return o;
}

static struct kvr_client *connect_bg(bool background)
{
	struct kvr_client_opts o = opts_bg(background);

	return t_worker_connect(&o);
}

/*
 * Retrieve @n chunks of @keys through @c and check that chunk i reads
 * @first + i (sampled every 4093 bytes, so every page is looked at).
 */
static void expect_chunks(struct kvr_client *c, const struct kvr_key *keys,
			  uint32_t n, unsigned first)
{
	struct kvr_xfer x = {0};

	cr_assert_eq(kvr_prepare_retrieve(c, keys, n, &x), 0);
	cr_assert_eq(x.nslots, n);
	for (uint32_t i = 0; i < x.nslots; i++) {
		const unsigned char *p = x.slots[i].ptr;

		for (uint64_t j = 0; j < x.slots[i].len; j += 4093)
			cr_assert_eq(p[j], first + i, "chunk %u byte %llu", i,
				     (unsigned long long)j);
	}
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);
}

Test(worker_touch, stores_land_while_background_prefault_runs)
{
	struct kvr_client *c = connect_bg(true);
	struct kvr_key keys[8];
	uint64_t sizes[8], ns = 0;
	struct kvr_xfer x = {0};
	int running;

	for (int i = 0; i < 8; i++) {
		keys[i] = (struct kvr_key){(uint64_t)i + 1, 99};
		sizes[i] = 8u << 20; /* 64 MiB in all: pages far ahead */
	}
	running = kvr_prefault_status(c, false, NULL) == -EINPROGRESS;
	cr_assert_eq(kvr_prepare_store(c, keys, sizes, 8, &x), 0);
	for (uint32_t i = 0; i < x.nslots; i++)
		memset(x.slots[i].ptr, (int)(0x40 + i), x.slots[i].len);
	cr_assert_eq(kvr_commit_store(c, &x), 0);
	cr_assert_eq(kvr_prefault_status(c, true, &ns), 0);
	cr_expect_gt(ns, 0, "no pre-fault time reported");
	cr_expect_eq(kvr_prefault_status(c, false, NULL), 0);
	expect_chunks(c, keys, 8, 0x40);
	kvr_close(c);
	/* Not an assertion on speed: only a note of what this run saw. */
	cr_log_info("pre-fault was %s at the first store",
		    running ? "still running" : "already done");
}

Test(worker_touch, close_joins_thread_when_prefault_still_runs)
{
	for (int i = 0; i < 3; i++) {
		struct kvr_client *c = connect_bg(true);

		kvr_close(c); /* joins; ASan would see a touch after unmap */
	}
	cr_expect_eq(t_server_stop(&srv), 0);
}

Test(worker_touch, forked_child_closes_copy_without_parent_thread)
{
	struct kvr_client *c = connect_bg(true);
	int st;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		kvr_close(c); /* must not join a thread it does not have */
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	cr_expect_eq(kvr_prefault_status(c, true, NULL), 0);
	kvr_close(c);
}

Test(worker_touch, status_is_done_at_once_when_prefault_is_in_line)
{
	struct kvr_client *c = connect_bg(false);
	uint64_t ns = 0;

	cr_expect_eq(kvr_prefault_status(c, false, &ns), 0);
	cr_expect_gt(ns, 0);
	cr_expect_eq(kvr_prefault_status(NULL, false, NULL), -EINVAL);
	kvr_close(c);
}

/* A typo in the mode must not silently mean "in line" (the worker would
 * pay the whole pre-fault in kvr_connect without knowing why): it is
 * refused, and the sentence names the variable, the value and the modes
 * it takes. The known modes still connect and do what they say: in line
 * reports its pre-fault time at connect, background leaves it to the
 * thread (info.prefault_ns stays 0). */
Test(worker_touch, connect_refuses_a_prefault_mode_it_does_not_know)
{
	static const char *const bad[] = {"backgound", "BACKGROUND", "1",
					  " background", "inline,background"};
	static const struct {
		const char *env;
		bool in_line;
	} good[] = {{"background", false}, {"inline", true}, {"", true}};
	struct kvr_client_opts o = opts_bg(false);
	struct kvr_client *c = NULL;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c = NULL;
		err[0] = '\0';
		setenv("KVRING_PREFAULT", bad[i], 1);
		cr_expect_eq(kvr_connect(&o, &c, err, sizeof(err)), -EINVAL,
			     "'%s' accepted", bad[i]);
		cr_expect_null(c, "'%s' connected", bad[i]);
		cr_expect_neq(strstr(err, "$KVRING_PREFAULT"), NULL, "'%s': %s",
			      bad[i], err);
		cr_expect_neq(strstr(err, bad[i]), NULL, "'%s': %s", bad[i],
			      err);
		cr_expect_neq(strstr(err, "'background'"), NULL, "'%s': %s",
			      bad[i], err);
		cr_expect_neq(strstr(err, "'inline'"), NULL, "'%s': %s", bad[i],
			      err);
		kvr_close(c);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t ns;

		c = NULL;
		setenv("KVRING_PREFAULT", good[i].env, 1);
		cr_assert_eq(kvr_connect(&o, &c, err, sizeof(err)), 0,
			     "'%s': %s", good[i].env, err);
		ns = kvr_client_info(c)->prefault_ns;
		cr_expect_eq(ns > 0, good[i].in_line,
			     "'%s': in-line pre-fault %llu ns at connect",
			     good[i].env, (unsigned long long)ns);
		kvr_close(c);
	}
	unsetenv("KVRING_PREFAULT");
}

/* Whether every 4 KiB page of [p, p + len) is mapped in this process
 * (/proc/self/pagemap bit 63: present; no privilege needed for it). */
static bool all_mapped(const void *p, size_t len)
{
	uint64_t e;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	bool ok = true;

	cr_assert_geq(fd, 0, "open pagemap: %s", strerror(errno));
	for (uintptr_t a = (uintptr_t)p; a < (uintptr_t)p + len; a += 4096) {
		off_t at = (off_t)(a / 4096 * sizeof(e));

		cr_assert_eq(pread(fd, &e, sizeof(e), at), (ssize_t)sizeof(e));
		if (!(e >> 63)) {
			ok = false;
			break;
		}
	}
	close(fd);
	return ok;
}

/*
 * A store made while the background pre-fault still runs must not take
 * its page faults inside the caller's copy: the
 * prepare_store answer maps its slots first. The slots are put far
 * ahead of the thread: another worker has filled the low 192 MiB, which
 * the thread reaches only after ~80 ms here, while the check follows the
 * prepare at once. Before, none of those pages was mapped when prepare
 * returned. Then the bytes come back exact.
 */
Test(worker_touch, store_slots_are_mapped_when_prepare_returns_during_prefault)
{
	enum { CH = 8u << 20, N = 4 };
	struct kvr_client *fill = connect_bg(false), *c;
	struct kvr_key keys[N];
	uint64_t sizes[N];
	struct kvr_xfer x = {0};

	for (uint64_t k = 0; k < 24; k += N) { /* 192 MiB, quota-sized */
		for (int i = 0; i < N; i++) {
			keys[i] = (struct kvr_key){0xf111 + k + (uint64_t)i, 7};
			sizes[i] = CH;
		}
		cr_assert_eq(kvr_prepare_store(fill, keys, sizes, N, &x), 0,
			     "%s", kvr_client_errmsg(fill));
		cr_assert_eq(kvr_commit_store(fill, &x), 0);
	}
	c = connect_bg(true);
	for (int i = 0; i < N; i++) {
		keys[i] = (struct kvr_key){0x5107 + (uint64_t)i, 9};
		sizes[i] = CH;
	}
	cr_assert_eq(kvr_prepare_store(c, keys, sizes, N, &x), 0, "%s",
		     kvr_client_errmsg(c));
	for (uint32_t i = 0; i < x.nslots; i++) {
		cr_assert_eq(x.slots[i].status, KVR_SLOT_OK);
		cr_expect(all_mapped(x.slots[i].ptr, x.slots[i].len),
			  "slot %u at %llu MiB is not mapped when prepare "
			  "returns: the copy would take its page faults",
			  i, (unsigned long long)(x.slots[i].off >> 20));
	}
	for (uint32_t i = 0; i < x.nslots; i++)
		memset(x.slots[i].ptr, (int)(0x61 + i), x.slots[i].len);
	cr_assert_eq(kvr_commit_store(c, &x), 0);
	expect_chunks(c, keys, N, 0x61);
	kvr_close(c);
	kvr_close(fill);
}
