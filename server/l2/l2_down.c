/* SPDX-License-Identifier: MIT */
/*
 * l2_down.c - the read-through side of a lane: a probe job asks which keys
 * exist (their headers), a load job reads values straight into reserved pool
 * slots and checks header and sum; a value that fails is deleted.
 */
#include "l2_lane.h"

/* Delete the keys of items marked corrupt (a value never served twice). */
static void delete_corrupt(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	uint32_t nc = 0;

	for (uint32_t i = 0; i < j->n; i++)
		if (j->it[i].res == KVR_L2_RES_CORRUPT)
			kvr__l2_cmd_init(ln, &ln->cmds[nc++], C_DEL, j,
					 &j->it[i], i);
	if (!nc)
		return;
	kvr__l2_run_batch(ln, ln->cmds, nc);
	for (uint32_t i = 0; i < nc; i++)
		if (ln->cmds[i].res == KVR_L2_RES_OK && ln->cmds[i].ival > 0)
			bump(&ln->l2->st.deleted, 1);
}

/* One command @op (C_GETHDR or C_GET) for each item of job @j, run as one
 * batch; each item's res is its command's. */
static void run_items(struct kvr_l2_lane *ln, struct kvr_l2_job *j, int op)
{
	for (uint32_t i = 0; i < j->n; i++)
		kvr__l2_cmd_init(ln, &ln->cmds[i], op, j, &j->it[i], i);
	kvr__l2_run_batch(ln, ln->cmds, j->n);
	for (uint32_t i = 0; i < j->n; i++)
		j->it[i].res = ln->cmds[i].res;
}

/*
 * A probe job: the header of every key (GETRANGE of its first 64 bytes).
 * A key whose header names another key or namespace, or an empty value,
 * is corrupt; the others report their length, for the loop to reserve
 * slots of that size before it loads them.
 */
void kvr__l2_run_probe(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	run_items(ln, j, C_GETHDR);
	for (uint32_t i = 0; i < j->n; i++) {
		struct cmd *c = &ln->cmds[i];
		struct kvr_l2_item *it = &j->it[i];

		if (c->res == KVR_L2_RES_OK) {
			if (kvr_l2_hdr_check(&c->hdr, j->ns_fp, &it->key) < 0 ||
			    c->hdr.len == 0)
				it->res = KVR_L2_RES_CORRUPT;
			else
				it->len = c->hdr.len;
		}
	}
	delete_corrupt(ln, j);
}

/*
 * A load job: GET every key straight into its reserved slot (the bytes are
 * hashed in pieces as they land) and check header, length and sum before
 * the loop may publish the slot; what fails is corrupt and deleted.
 */
void kvr__l2_run_load(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	uint64_t bytes = 0, n = 0;

	run_items(ln, j, C_GET);
	for (uint32_t i = 0; i < j->n; i++) {
		struct cmd *c = &ln->cmds[i];
		struct kvr_l2_item *it = &j->it[i];

		if (c->res != KVR_L2_RES_OK)
			continue;
		/* Verified before the loop may publish it: the header must
		 * name this key and namespace, and the bytes that landed in
		 * the slot must hash to the header's sum. */
		if (kvr_l2_hdr_check(&c->hdr, j->ns_fp, &it->key) < 0 ||
		    c->hdr.len != it->len || c->sum != c->hdr.sum) {
			it->res = KVR_L2_RES_CORRUPT;
			continue;
		}
		it->sum = c->sum;
		it->has_sum = 1;
		n++;
		bytes += it->len;
	}
	bump(&ln->l2->st.down_chunks, n);
	bump(&ln->l2->st.down_bytes, bytes);
	delete_corrupt(ln, j);
}
