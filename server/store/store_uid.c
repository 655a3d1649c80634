/* SPDX-License-Identifier: MIT */
/*
 * store_uid.c - per-uid aggregates: what all opened channels of one uid
 * hold together (reserved and pinned bytes), so that the uid quotas
 * (--quota-uid-reserved, --quota-uid-pinned) bind a uid however many
 * channels it opens. Owns the binding of channels to uid entries and the
 * O(1) stats readers; the quota checks themselves sit beside the channel
 * checks in store.c, and the charges beside each change of a channel's
 * holdings (store.c, store_owner.c, store_l2.c).
 *
 * A uid entry lives while at least one opened channel is bound to it, so
 * at most max_channels entries are ever in use: finding or taking one at
 * channel open is O(max_channels), once per connect; every charge and
 * check afterwards is O(1) through chan.uidx.
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"

void kvr__store_uid_bind(struct kvr_store *s, uint32_t ch, uint32_t uid)
{
	uint32_t free_i = 0;

	if (s->chan[ch].uidx)
		kvr__store_uid_unbind(s, ch);
	for (uint32_t i = 1; i <= s->cfg.max_channels; i++) {
		if (s->uacct[i].chans && s->uacct[i].uid == uid) {
			free_i = i;
			break;
		}
		if (!s->uacct[i].chans && !free_i)
			free_i = i;
	}
	/* A free entry always exists: each entry in use has a channel. */
	kvr_assert(free_i != 0);
	if (!s->uacct[free_i].chans) {
		memset(&s->uacct[free_i], 0, sizeof(s->uacct[free_i]));
		s->uacct[free_i].uid = uid;
	}
	s->uacct[free_i].chans++;
	s->chan[ch].uidx = free_i;
}

void kvr__store_uid_unbind(struct kvr_store *s, uint32_t ch)
{
	struct uacct *u = kvr__store_ua(s, ch);

	if (!s->chan[ch].uidx)
		return;
	s->chan[ch].uidx = 0;
	if (--u->chans == 0)
		memset(u, 0, sizeof(*u));
}

static void fill(const struct kvr_store *s, uint32_t i,
		 struct kvr_store_uid_stats *out)
{
	const struct uacct *u = &s->uacct[i];
	struct kvr_store_uid_stats us = {0};

	us.slot = i - 1;
	us.uid = u->uid;
	us.channels = u->chans;
	us.reserved_bytes = u->reserved_bytes;
	us.pinned_bytes = u->pinned_bytes;
	us.quota_denied = u->quota_denied;
	*out = us;
}

/* The checks both stats calls share: the owner thread (OWNER_ONLY, when
 * @s is set), then @s, @out and a channel or slot @i in range. 0 or
 * -EINVAL. */
static int check_args(const struct kvr_store *s, uint32_t i, const void *out)
{
	if (s)
		OWNER_ONLY(s);
	return !s || !out || i >= s->cfg.max_channels ? -EINVAL : 0;
}

int kvr_store_uid_stats(const struct kvr_store *s, uint32_t ch,
			struct kvr_store_uid_stats *out)
{
	int rc = check_args(s, ch, out);

	if (rc < 0)
		return rc;
	if (!s->chan[ch].uidx)
		return -ENOENT;
	fill(s, s->chan[ch].uidx, out);
	return 0;
}

int kvr_store_uid_slot_stats(const struct kvr_store *s, uint32_t slot,
			     struct kvr_store_uid_stats *out)
{
	int rc = check_args(s, slot, out);

	if (rc < 0)
		return rc;
	fill(s, slot + 1, out);
	return 0;
}
