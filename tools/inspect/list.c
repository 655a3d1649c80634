/* SPDX-License-Identifier: MIT */
/*
 * list.c - --list: every kvring segment in a directory with its role,
 * state and owner, read by kvr_seg_list() from each file's header without
 * mapping anything, so it also works on segments of another ABI and on
 * files too damaged to attach. Stale and orphan segments are counted and
 * marked; deciding to remove them is kvringd's sweep's job, not ours: the
 * inspector never unlinks.
 */
#include <inttypes.h>
#include <stdio.h>

#include "inspect.h"

static const char *role_name(enum kvr_seg_role r)
{
	return r == KVR_SEG_ROLE_CTL	? "ctl"
	       : r == KVR_SEG_ROLE_POOL ? "pool"
					: "other";
}

static const char *seg_state_name(enum kvr_seg_state s)
{
	static const char *const n[] = {"unknown", "live", "stale", "orphan"};

	return (unsigned)s < 4 ? n[s] : "invalid";
}

/* What the kvr_seg_list() callback accumulates; on main's stack. */
struct list_ctx {
	struct kvr_em e; /* JSON only: the "segments" array is open in it */
	bool json;
	uint32_t n, stale;
};

/*
 * Prints one segment (kvr_seg_list() callback); never fails, so one odd
 * file does not hide the rest. Text mode writes its own line rather than
 * going through the emitter: one line per segment, so that
 * `grep state=stale` finds whole segments.
 */
static int list_cb(void *arg, const struct kvr_seg_info *in)
{
	struct list_ctx *l = arg;
	char name[KVR_SEG_NAME_MAX + 1], abi[24] = "";
	bool stale = in->state == KVR_SEG_STATE_STALE ||
		     in->state == KVR_SEG_STATE_ORPHAN;

	/* File names are chosen by whoever created the file: clean them. */
	ins_copy_clean(name, sizeof(name), in->name, sizeof(in->name));
	if (in->has_hdr)
		snprintf(abi, sizeof(abi), "%u.%u", in->abi >> 16,
			 in->abi & 0xffffu);
	if (stale)
		l->stale++;
	if (!l->json) {
		printf("name=%s role=%s state=%s bytes=%" PRIu64
		       " owner_pid=%" PRId32 " uid=%u mode=%04o abi=%s\n",
		       name, role_name(in->role), seg_state_name(in->state),
		       in->bytes, in->owner_pid, (unsigned)in->uid,
		       (unsigned)in->mode & 07777, in->has_hdr ? abi : "-");
	} else {
		kvr_em_item(&l->e, l->n);
		kvr_em_str(&l->e, "name", name);
		kvr_em_str(&l->e, "role", role_name(in->role));
		kvr_em_str(&l->e, "state", seg_state_name(in->state));
		kvr_em_bool(&l->e, "stale", stale);
		kvr_em_u64(&l->e, "bytes", in->bytes);
		kvr_em_i64(&l->e, "owner_pid", in->owner_pid);
		kvr_em_u64(&l->e, "uid", (uint64_t)in->uid);
		kvr_em_u64(&l->e, "mode", (uint64_t)in->mode & 07777);
		kvr_em_bool(&l->e, "ready", in->ready);
		kvr_em_str(&l->e, "abi", abi);
		kvr_em_end(&l->e);
	}
	l->n++;
	return 0;
}

/*
 * --list on o->dir (NULL: /dev/shm): the segments, then a summary (the
 * last text line, or nr_segments/nr_stale in JSON). Every kvring
 * segment this caller can tell is one, whatever its name (kvringd --name
 * is free: the shipped unit's server is "kvring"): names starting with
 * "kvring-", and any other .ctl whose header is kvring's, with its .pool
 * (kvr_seg_list with no prefix). Return: INS_EXIT_OK, or
 * INS_EXIT_RUNTIME if the directory cannot be read (in JSON mode the
 * partial object already printed is then ended with a newline, and is
 * not valid JSON: the exit status says so).
 */
int ins_list_run(const struct ins_opts *o)
{
	const char *dir = o->dir ? o->dir : KVR_SEG_DEFAULT_DIR;
	struct list_ctx l = {.json = o->json};
	int rc;

	if (o->json) {
		kvr_em_init(&l.e, stdout, true);
		kvr_em_u64(&l.e, "schema", INS_SCHEMA);
		kvr_em_str(&l.e, "dir", dir);
		kvr_em_arr(&l.e, "segments");
	}
	rc = kvr_seg_list(dir, NULL, list_cb, &l);
	if (rc < 0) {
		if (o->json)
			putchar('\n');
		ins_err("list %s: %s", dir, kvr_strerror(rc));
		return INS_EXIT_RUNTIME;
	}
	if (o->json) {
		kvr_em_end(&l.e);
		kvr_em_u64(&l.e, "nr_segments", l.n);
		kvr_em_u64(&l.e, "nr_stale", l.stale);
		kvr_em_finish(&l.e);
	} else {
		printf("segments=%u stale=%u dir=%s\n", l.n, l.stale, dir);
	}
	return INS_EXIT_OK;
}
