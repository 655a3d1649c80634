/* SPDX-License-Identifier: MIT */
/*
 * Control-segment geometry and the layout hash. Owns the arithmetic that
 * sizes the control segment and the channel directory, and places the
 * rings inside a channel block; does not
 * own the structs' contents
 * (<kvring/layout.h>) or the ring format (rings/).
 */
#include <errno.h>
#include <stddef.h>

#include <xxhash.h>

#include <kvring/layout.h>
#include <kvring/ring.h>

#define PAGE 4096u

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static bool cap_ok(uint32_t cap)
{
	return cap >= 4096 && cap <= (16u << 20) && (cap & (cap - 1)) == 0;
}

int kvr_ctl_geom_compute(uint32_t max_channels, uint32_t req_ring_cap,
			 uint32_t resp_ring_cap, struct kvr_ctl_geom *out)
{
	struct kvr_ctl_geom g = {0};
	uint64_t req_off, resp_off, stride;

	if (max_channels == 0 || max_channels > 4096 || !cap_ok(req_ring_cap) ||
	    !cap_ok(resp_ring_cap) || !out)
		return -EINVAL;
	/* The channel's observability block sits between its struct and
	 * the request ring. */
	req_off =
	    sizeof(struct kvr_channel_shm) + sizeof(struct kvr_chan_obs_shm);
	/* Each ring starts on a 128-byte boundary (its own cache lines). */
	resp_off = round_up(req_off + kvr_ring_shm_bytes(req_ring_cap), 128);
	stride = round_up(resp_off + kvr_ring_shm_bytes(resp_ring_cap), PAGE);
	/* A block is a memfd of its own (abi 3.0), one per claim. */
	if (stride > UINT32_MAX)
		return -EINVAL;

	g.max_channels = max_channels;
	g.req_ring_cap = req_ring_cap;
	g.resp_ring_cap = resp_ring_cap;
	g.channel_bytes = (uint32_t)stride;
	/* The header and the global observability region; the directory is
	 * a segment of its own (abi 4.0), never given to workers. */
	g.ctl_bytes =
	    round_up(KVR_CTL_OBS_OFF + sizeof(struct kvr_ctl_obs_shm), PAGE);
	/* The channel entries, then the per-uid table (abi 4.1), then the
	 * namespace slots (abi 5.0). */
	g.uid_off = max_channels * (uint32_t)sizeof(struct kvr_chan_dir_shm);
	g.ns_off =
	    g.uid_off + max_channels * (uint32_t)sizeof(struct kvr_uid_use_shm);
	g.dir_bytes = (uint32_t)round_up(
	    g.ns_off + (uint64_t)KVR_NS_OBS_MAX * sizeof(struct kvr_ns_obs_shm),
	    PAGE);
	g.req_ring_off = (uint32_t)req_off;
	g.resp_ring_off = (uint32_t)resp_off;
	*out = g;
	return 0;
}

uint64_t kvr_layout_hash(void)
{
	/* Every size and offset a peer relies on. Adding a field to this
	 * list changes the hash: do it together with the ABI bump. */
	const uint64_t facts[] = {
	    sizeof(struct kvr_seg_hdr_shm),
	    sizeof(struct kvr_ctl_hdr_shm),
	    offsetof(struct kvr_ctl_hdr_shm, pool_bytes),
	    offsetof(struct kvr_ctl_hdr_shm, heartbeat_ns),
	    offsetof(struct kvr_ctl_hdr_shm, stats),
	    sizeof(struct kvr_gstats_shm),
	    sizeof(struct kvr_channel_shm),
	    offsetof(struct kvr_channel_shm, ns),
	    offsetof(struct kvr_channel_shm, stats),
	    offsetof(struct kvr_channel_shm, req_bell),
	    offsetof(struct kvr_channel_shm, resp_bell),
	    sizeof(struct kvr_cstats_shm),
	    sizeof(struct kvr_bell_shm),
	    kvr_ring_shm_bytes(4096),
	    sizeof(struct kvr_req_hdr),
	    sizeof(struct kvr_resp_hdr),
	    sizeof(struct kvr_slot_desc),
	    KVR_CACHELINE,
	    KVR_ERR_SLOTS,
	    sizeof(struct kvr_hist_shm),
	    KVR_HIST_BUCKETS,
	    KVR_HIST_SUB,
	    sizeof(struct kvr_cache_shm),
	    sizeof(struct kvr_ns_obs_shm),
	    sizeof(struct kvr_ctl_obs_shm),
	    KVR_CTL_OBS_OFF,
	    offsetof(struct kvr_ctl_obs_shm, lat),
	    sizeof(struct kvr_chan_obs_shm),
	    offsetof(struct kvr_chan_obs_shm, server_lat),
	    offsetof(struct kvr_chan_obs_shm, worker_rtt),
	    sizeof(struct kvr_chan_dir_shm),
	    offsetof(struct kvr_chan_dir_shm, fd),
	    offsetof(struct kvr_chan_dir_shm, connected_ns),
	    offsetof(struct kvr_ctl_hdr_shm, dir_fd),
	    offsetof(struct kvr_ctl_hdr_shm, dir_bytes),
	    offsetof(struct kvr_ctl_hdr_shm, quota_uid_reserved_bytes),
	    sizeof(struct kvr_uid_use_shm),
	    KVR_NS_OBS_MAX,
	};

	return XXH3_64bits(facts, sizeof(facts));
}

/* Error buckets: the codes kvring answers with, in the order the inspector
 * prints them. The last bucket takes everything else. */
static const struct {
	int code;
	const char *name;
} err_slots[KVR_ERR_SLOTS] = {
    {0, "ok"},
    {-EINVAL, "einval"},
    {-ENOENT, "enoent"},
    {-EPERM, "eperm"},
    {-ENOSPC, "enospc"},
    {-ENOMEM, "enomem"},
    {-EBADMSG, "ebadmsg"},
    {-E2BIG, "e2big"},
    {-EBUSY, "ebusy"},
    {-ERANGE, "erange"},
    {-EPROTO, "eproto"},
    {-ESHUTDOWN, "eshutdown"},
    {-EAGAIN, "eagain"},
    {-ETIMEDOUT, "etimedout"},
    {-EOWNERDEAD, "eownerdead"},
    {1, "other"},
};

unsigned kvr_err_slot(int code)
{
	for (unsigned i = 0; i < KVR_ERR_SLOTS - 1; i++)
		if (err_slots[i].code == code)
			return i;
	return KVR_ERR_SLOTS - 1;
}

const char *kvr_err_slot_name(unsigned slot)
{
	return slot < KVR_ERR_SLOTS ? err_slots[slot].name : "?";
}
