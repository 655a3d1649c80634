/* SPDX-License-Identifier: MIT */
/*
 * Tests for lib/layout.c: control-segment geometry and the layout hash.
 */
#include <errno.h>

#include <criterion/criterion.h>

#include <kvring/layout.h>
#include <kvring/ring.h>

TestSuite(layout, .timeout = 10);

Test(layout, geom_places_rings_inside_block_when_valid)
{
	struct kvr_ctl_geom g;

	cr_assert_eq(kvr_ctl_geom_compute(64, 65536, 65536, &g), 0);
	cr_expect_eq(g.ctl_bytes % 4096, 0);
	cr_expect_eq(g.channel_bytes % 4096, 0);
	cr_expect_geq(g.req_ring_off, sizeof(struct kvr_channel_shm));
	cr_expect_eq(g.req_ring_off % 128, 0);
	cr_expect_eq(g.resp_ring_off % 128, 0);
	cr_expect_geq(g.resp_ring_off,
		      g.req_ring_off + kvr_ring_shm_bytes(65536));
	cr_expect_leq(g.resp_ring_off + kvr_ring_shm_bytes(65536),
		      g.channel_bytes);
	/* abi 4.0: the directory is a segment of its own, a 64-byte entry
	 * per channel; the control segment does not grow with channels. */
	cr_expect_eq(g.dir_bytes, 8192 + 65536,
		     "64 entries, 64 uid entries (abi 4.1), 256 namespace "
		     "slots (abi 5.0)");
	cr_expect_eq(g.uid_off, 64u * 64u);
	cr_expect_eq(g.ns_off, 64u * 128u);
}

Test(layout, namespace_slots_sit_in_the_directory_when_indexed)
{
	struct kvr_ctl_geom g;
	char *base = (char *)0x100000;

	/* abi 5.0: the control segment every worker maps holds no
	 * namespace slot; the directory nobody is given holds all. */
	cr_assert_eq(kvr_ctl_geom_compute(64, 65536, 65536, &g), 0);
	cr_expect_eq(sizeof(struct kvr_ctl_obs_shm), 23488);
	for (uint32_t i = 0; i < KVR_NS_OBS_MAX; i += 85) {
		char *n = (char *)kvr_ns_obs(base, &g, i);

		cr_expect_geq(n, (char *)kvr_uid_use(base, &g, 64), "slot %u",
			      i);
		cr_expect_eq(n, base + g.ns_off + i * 256ull);
	}
	cr_expect_leq((char *)kvr_ns_obs(base, &g, KVR_NS_OBS_MAX),
		      base + g.dir_bytes, "the last slot ends inside");
}

Test(layout, geom_refuses_bad_capacity_when_not_power_of_two)
{
	struct kvr_ctl_geom g = {.max_channels = 7};

	cr_expect_eq(kvr_ctl_geom_compute(64, 65535, 65536, &g), -EINVAL);
	cr_expect_eq(kvr_ctl_geom_compute(64, 2048, 65536, &g), -EINVAL);
	cr_expect_eq(kvr_ctl_geom_compute(0, 65536, 65536, &g), -EINVAL);
	cr_expect_eq(kvr_ctl_geom_compute(5000, 65536, 65536, &g), -EINVAL);
	cr_expect_eq(g.max_channels, 7, "output changed on failure");
}

Test(layout, directory_entries_do_not_overlap_when_indexed)
{
	struct kvr_ctl_geom g, one;
	char *base = (char *)0x100000;

	cr_assert_eq(kvr_ctl_geom_compute(4096, 4096, 8192, &g), 0);
	cr_assert_eq(kvr_ctl_geom_compute(1, 4096, 8192, &one), 0);
	cr_expect_eq(g.ctl_bytes, one.ctl_bytes,
		     "the control segment grew with channels");
	cr_expect_eq(g.dir_bytes, 4096u * 128u + 65536u);
	for (uint32_t i = 0; i < 4096; i += 1365) {
		char *c = (char *)kvr_chan_dir(base, i);

		cr_expect_eq(c, base + i * 64ull);
		cr_expect_leq(c + 64, base + g.dir_bytes, "entry %u", i);
	}
}

Test(layout, hash_is_stable_when_called_twice)
{
	cr_expect_eq(kvr_layout_hash(), kvr_layout_hash());
	cr_expect_neq(kvr_layout_hash(), 0);
}

Test(layout, err_slot_maps_known_codes_and_buckets_others)
{
	cr_expect_str_eq(kvr_err_slot_name(kvr_err_slot(0)), "ok");
	cr_expect_str_eq(kvr_err_slot_name(kvr_err_slot(-ENOSPC)), "enospc");
	cr_expect_str_eq(kvr_err_slot_name(kvr_err_slot(-EBADMSG)), "ebadmsg");
	cr_expect_str_eq(kvr_err_slot_name(kvr_err_slot(-EXDEV)), "other");
	cr_expect_str_eq(kvr_err_slot_name(KVR_ERR_SLOTS), "?");
}

Test(layout, geom_leaves_room_for_observability_when_computed)
{
	struct kvr_ctl_geom g;

	cr_assert_eq(kvr_ctl_geom_compute(4, 65536, 65536, &g), 0);
	cr_expect_geq(g.ctl_bytes,
		      KVR_CTL_OBS_OFF + sizeof(struct kvr_ctl_obs_shm));
	cr_expect_eq(g.ctl_bytes, 28672, "docs/layout.md says 28672 (abi 5.0)");
	cr_expect_eq(g.req_ring_off, sizeof(struct kvr_channel_shm) +
					 sizeof(struct kvr_chan_obs_shm));
	cr_expect_eq(g.req_ring_off % 128, 0);
}
