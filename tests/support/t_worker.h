/* SPDX-License-Identifier: MIT */
/*
 * t_worker.h - test helper: a libkvring worker attached to a test kvringd
 * (t_server.h) with the tests' usual options. Header-only, so that only the
 * tests that include it link libkvring; the support library does not.
 */
#ifndef KVR_T_WORKER_H
#define KVR_T_WORKER_H

#include <criterion/criterion.h>

#include <kvring/kvring.h>

#include "t_raw.h"
#include "t_server.h"

/*
 * t_worker_opts - fill @o (zeroed first) with what most tests connect
 * with: @srv's socket, the default namespace and a 5 s timeout scaled by
 * $KVR_TEST_TIMEOUT_MULT. The caller sets anything else afterwards.
 */
static inline void t_worker_opts(struct kvr_client_opts *o,
				 const struct kvrd *srv)
{
	*o = (struct kvr_client_opts){0};
	o->socket_path = srv->sock;
	t_ns_default(&o->ns);
	o->timeout_ms = (uint32_t)t_timeout_ms(5000);
}

/*
 * t_worker_connect - kvr_connect() with @o; the test fails at once, with
 * the library's reason, unless the worker attaches.
 */
static inline struct kvr_client *
t_worker_connect(const struct kvr_client_opts *o)
{
	struct kvr_client *c = NULL;
	char err[256] = "";
	int rc = kvr_connect(o, &c, err, sizeof(err));

	cr_assert_eq(rc, 0, "kvr_connect: %d %s", rc, err);
	return c;
}

#endif
