/* SPDX-License-Identifier: MIT */
/*
 * l2_route.c - cluster routing of a lane: the slot map (CLUSTER SLOTS), the
 * node a command goes to, and a command resent after a MOVED or an ASK.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <kvring/clock.h>

#include "l2_lane.h"

/* CLUSTER SLOTS from the first node that answers; rebuilds the map. */
void kvr__l2_refresh_slots(struct kvr_l2_lane *ln)
{
	static const char q[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
	struct kvr_l2_range r[256];
	uint64_t now = kvr_clock_now_ns();

	if (now - ln->refreshed_ns < 50000000ull && ln->refreshed_ns)
		return; /* at most 20 refreshes a second */
	ln->refreshed_ns = now;
	for (uint32_t i = 0; i < ln->nnodes; i++) {
		struct node *n = &ln->nodes[i];
		struct iovec iov = {(void *)q, sizeof(q) - 1};
		long span;
		int nr, rc;

		if (kvr__l2_ensure_conn(ln, n) < 0)
			continue;
		rc = kvr__l2_write_all(n->fd, &iov, 1);
		for (span = -EAGAIN; rc == 0 && span == -EAGAIN;) {
			span = kvr_l2_resp_span(n->rb.b + n->rb.r,
						n->rb.w - n->rb.r);
			if (span == -EAGAIN)
				rc = kvr__l2_rb_fill(n);
		}
		if (rc < 0 || span < 0) {
			count_err(ln,
				  rc < 0 ? KVR_L2_ERR_IO : KVR_L2_ERR_PROTO);
			kvr__l2_node_down(ln, n, "CLUSTER SLOTS failed");
			continue;
		}
		nr = kvr_l2_resp_slots(n->rb.b + n->rb.r, (size_t)span, r, 256);
		n->rb.r += (size_t)span;
		if (nr <= 0) {
			count_err(ln, KVR_L2_ERR_PROTO);
			continue;
		}
		for (uint32_t s = 0; s < KVR_L2_SLOTS; s++)
			ln->slot_node[s] = -1;
		for (int k = 0; k < nr; k++) {
			struct kvr_l2_addr a = {.port = r[k].port};
			int id;

			/* An empty host means "the address you reached me
			 * at" (cluster-announce default). */
			strcpy(a.host, r[k].host[0] ? r[k].host : n->a.host);
			id = kvr__l2_lane_node(ln, &a);
			if (id < 0)
				continue;
			for (uint32_t s = r[k].lo; s <= r[k].hi; s++)
				ln->slot_node[s] = (int16_t)id;
		}
		bump(&ln->l2->st.slot_refresh, 1);
		ln->need_refresh = false;
		return;
	}
}

/* The lane node a command goes to: the only one outside a cluster; an
 * ASK target while the command is being resent there; else the owner of
 * its key's hash slot, or the first seed while the map is unknown (a
 * MOVED answer then teaches it). */
int kvr__l2_pick_node(struct kvr_l2_lane *ln, struct cmd *c)
{
	int16_t id;

	if (ln->l2->cfg.kind != KVR_L2_CLUSTER)
		return 0;
	if (c->asking && c->node >= 0)
		return c->node;
	id = ln->slot_node[kvr_l2_slot(c->key, c->klen)];
	return id >= 0 ? id : 0;
}

/*
 * A chunk whose publish script was not run (TRYAGAIN while its slot
 * migrates, or a node that refuses scripts) is sent again, in the next
 * round, as one plain SET of K with the header its first send computed,
 * to the node that answered (ASKING again if it was asked to), followed
 * by a DEL of the temporary key its first SET left there.
 */
void kvr__l2_cmd_resend_plain(struct cmd *c, bool ask)
{
	int pl = snprintf(c->pre, sizeof(c->pre),
			  "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%llu\r\n", c->klen,
			  c->key,
			  (unsigned long long)(KVR_L2_HDR_BYTES + c->it->len));

	c->pre_len = (size_t)pl;
	pl = snprintf(c->post, sizeof(c->post),
		      "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", c->tklen, c->tkey);
	c->post_len = (size_t)pl;
	c->del_tmp = true;
	c->tmp = false;
	c->done = false;
	c->asking = ask;
}
