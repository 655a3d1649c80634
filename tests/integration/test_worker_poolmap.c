/* SPDX-License-Identifier: MIT */
/*
 * Description: one mapping of the pool per process (worker/poolmap.c)
 * against a real kvringd on 4 KiB pages: a second client of the process
 * joins the first one's mapping (same slot addresses, no pre-fault of its
 * own), the mapping outlives the client that made it while another still
 * uses it, the last close unmaps it so that the next client maps anew,
 * and a forked child maps its own rather than joining its parent's.
 */
#include <stdint.h>
#include <stdio.h>
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
	const char *args[] = {"--huge-pages", "off", "--pool-size", "64M",
			      NULL};

	t_server_init(&srv);
	t_server_start(&srv, args);
}

static void teardown(void)
{
	t_server_cleanup(&srv);
}

TestSuite(worker_poolmap, .init = setup, .fini = teardown, .timeout = 60);

static struct kvr_client *connect_one(void)
{
	struct kvr_client_opts o;

	t_worker_opts(&o, &srv);
	return t_worker_connect(&o);
}

static bool shared(struct kvr_client *c)
{
	return strstr(kvr_client_info(c)->debug, ", shared") != NULL;
}

/* Store one 1 MiB chunk of @fill under key @k; returns its slot. */
static void *store(struct kvr_client *c, uint64_t k, int fill)
{
	struct kvr_key key = {k, 7};
	uint64_t size = 1u << 20;
	struct kvr_xfer x = {0};
	void *p;

	cr_assert_eq(kvr_prepare_store(c, &key, &size, 1, &x), 0);
	cr_assert_eq(x.nslots, 1);
	p = x.slots[0].ptr;
	memset(p, fill, size);
	cr_assert_eq(kvr_commit_store(c, &x), 0);
	return p;
}

/* Retrieve key @k: its slot address, after checking every byte is @fill. */
static void *retrieve(struct kvr_client *c, uint64_t k, int fill)
{
	struct kvr_key key = {k, 7};
	struct kvr_xfer x = {0};
	const unsigned char *p;

	cr_assert_eq(kvr_prepare_retrieve(c, &key, 1, &x), 0);
	cr_assert_eq(x.nslots, 1, "key %llu not stored", (unsigned long long)k);
	p = x.slots[0].ptr;
	for (uint64_t j = 0; j < x.slots[0].len; j += 511)
		cr_assert_eq(p[j], fill, "byte %llu", (unsigned long long)j);
	cr_assert_eq(kvr_commit_retrieve(c, &x), 0);
	return (void *)p;
}

Test(worker_poolmap, second_client_joins_the_first_ones_mapping)
{
	struct kvr_client *a = connect_one();
	struct kvr_client *b = connect_one();
	void *pa;

	cr_expect_not(shared(a), "%s", kvr_client_info(a)->debug);
	cr_expect(shared(b), "%s", kvr_client_info(b)->debug);
	cr_expect_gt(kvr_client_info(a)->prefault_ns, 0);
	cr_expect_eq(kvr_client_info(b)->prefault_ns, 0,
		     "the second client pre-faulted again");
	pa = store(a, 1, 0x5a);
	cr_expect_eq(retrieve(b, 1, 0x5a), pa, "two mappings of one pool");
	kvr_close(a);
	kvr_close(b);
}

Test(worker_poolmap, mapping_outlives_the_client_that_made_it)
{
	struct kvr_client *a = connect_one();
	struct kvr_client *b = connect_one();
	struct kvr_client *c;

	store(a, 2, 0x33);
	kvr_close(a);
	/* b still reads and writes through the mapping a made. */
	retrieve(b, 2, 0x33);
	store(b, 3, 0x44);
	c = connect_one();
	cr_expect(shared(c), "%s", kvr_client_info(c)->debug);
	retrieve(c, 3, 0x44);
	kvr_close(b);
	kvr_close(c);
	/* The last close unmapped it: the next client maps anew. */
	c = connect_one();
	cr_expect_not(shared(c), "%s", kvr_client_info(c)->debug);
	cr_expect_gt(kvr_client_info(c)->prefault_ns, 0);
	retrieve(c, 3, 0x44);
	kvr_close(c);
}

Test(worker_poolmap, forked_child_maps_its_own)
{
	struct kvr_client *a = connect_one();
	int st;
	pid_t pid;

	store(a, 4, 0x21);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct kvr_client_opts o = {0};
		struct kvr_client *c = NULL;
		char err[256];
		int ok;

		o.socket_path = srv.sock;
		t_ns_default(&o.ns);
		o.timeout_ms = 5000;
		if (kvr_connect(&o, &c, err, sizeof(err)) < 0)
			_exit(2);
		ok = !shared(c) && kvr_client_info(c)->prefault_ns > 0;
		kvr_close(c);
		kvr_close(a); /* its copy of the parent's client */
		_exit(ok ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	retrieve(a, 4, 0x21); /* the parent's mapping is untouched */
	kvr_close(a);
}
