/* SPDX-License-Identifier: MIT */
/*
 * l2_up.c - the upload side of a lane (write-behind): a put job's chunks,
 * EXISTS first, then SET (through the temporary key and the publish script when
 * the lane hashes the payload).
 */
#include "l2_lane.h"

/*
 * A put job: EXISTS for every key first (a chunk another server uploaded
 * is not sent again), then one SET per missing key, its payload written
 * from the pinned slot. Each item ends OK, EXISTS or FAIL for the loop,
 * which then unpins the slots.
 */
void kvr__l2_run_put(struct kvr_l2_lane *ln, struct kvr_l2_job *j)
{
	uint32_t nc = 0;
	uint64_t bytes = 0, done = 0, exist = 0, fail = 0;

	for (uint32_t i = 0; i < j->n; i++)
		kvr__l2_cmd_init(ln, &ln->cmds[i], C_EXISTS, j, &j->it[i], i);
	kvr__l2_run_batch(ln, ln->cmds, j->n);
	for (uint32_t i = 0; i < j->n; i++) {
		struct cmd *c = &ln->cmds[i];

		if (c->res != KVR_L2_RES_OK)
			j->it[i].res = KVR_L2_RES_FAIL;
		else if (c->ival > 0)
			j->it[i].res = KVR_L2_RES_EXISTS;
		else
			j->it[i].res = -1; /* to send */
	}
	for (uint32_t i = 0; i < j->n; i++)
		if (j->it[i].res == -1)
			kvr__l2_cmd_init(ln, &ln->cmds[nc++], C_SET, j,
					 &j->it[i], i);
	kvr__l2_run_batch(ln, ln->cmds, nc);
	for (uint32_t i = 0; i < nc; i++) {
		struct cmd *c = &ln->cmds[i];

		c->it->res =
		    c->res == KVR_L2_RES_OK ? KVR_L2_RES_OK : KVR_L2_RES_FAIL;
	}
	for (uint32_t i = 0; i < j->n; i++) {
		if (j->it[i].res == KVR_L2_RES_OK) {
			done++;
			bytes += j->it[i].len;
		} else if (j->it[i].res == KVR_L2_RES_EXISTS) {
			exist++;
		} else {
			fail++;
		}
	}
	bump(&ln->l2->st.up_chunks, done);
	bump(&ln->l2->st.up_bytes, bytes);
	bump(&ln->l2->st.up_exists, exist);
	bump(&ln->l2->st.up_failed, fail);
}
