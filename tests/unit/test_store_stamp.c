/* SPDX-License-Identifier: MIT */
/*
 * White-box unit test of the storage engine's request stamp (store_int.h):
 * a 32-bit counter that marks the objects the request in progress touched.
 * When it wraps, no object may keep a stamp that a later request receives
 * again, or that request would take the object as already pinned by itself
 * and leave it unpinned while a worker reads it.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "store_int.h"
#include "store_suite.h"

TestSuite(store_stamp, .fini = teardown, .timeout = 30);

/* Store and commit key @i (one unit); return its object number. */
static uint32_t put_key(uint64_t i)
{
	struct kvr_key k = K(i);
	struct kvr_slot_desc d;
	uint64_t bytes = U, xfer;

	cr_assert_eq(
	    kvr_store_prepare_store(s, 0, 0, &k, &bytes, 1, 0, &d, &xfer), 1);
	cr_assert_eq(kvr_store_commit_store(s, 0, xfer, 0), 0);
	return kvr_index_find(&s->index, 0, &k);
}

/* Retrieve key @i (one hit), check its object @x holds exactly one pin,
 * then commit the transfer and check the pin is gone. */
static void retrieve_once(uint64_t i, uint32_t x)
{
	struct kvr_key k = K(i);
	struct kvr_slot_desc out[1];
	uint64_t xfer;

	cr_assert_eq(kvr_store_prepare_retrieve(s, 1, 0, &k, 1, 0, out, &xfer),
		     1);
	cr_expect_eq(s->obj[x].pins, 1u,
		     "key %llu at stamp %u: object not pinned",
		     (unsigned long long)i, s->stamp);
	audit();
	cr_assert_eq(kvr_store_commit_retrieve(s, 1, xfer, 0), 0);
	cr_expect_eq(s->obj[x].pins, 0u);
}

Test(store_stamp, retrieve_pins_object_when_stamp_wrapped_to_its_old_stamp)
{
	struct kvr_store_config c = store_config(16);
	uint32_t a, b;

	store_create(&c);
	/* Object a's last stamp is 3: its store request ran as stamp 3. */
	s->stamp = 2;
	a = put_key(7);
	cr_assert_eq(s->obj[a].stamp, 3u);
	b = put_key(8);
	/* Retrieves of b carry the counter over the wrap, up to 2. */
	s->stamp = UINT32_MAX - 1;
	for (int r = 0; r < 8 && s->stamp != 2; r++) {
		retrieve_once(8, b);
		cr_expect_neq(s->stamp, 0u, "stamp 0 handed out");
	}
	cr_assert_eq(s->stamp, 2u);
	/* The next request runs as stamp 3 again: a must still be pinned. */
	retrieve_once(7, a);
	audit();
}
