/* SPDX-License-Identifier: MIT */
/*
 * dump.c - --dump CHANNEL: decodes the records sitting between head and
 * tail in one channel's request and response rings, and prints each with
 * its protocol fields. It owns getting a self-consistent private copy of
 * a ring that its producer and consumer keep changing, and walking that
 * copy. It does not validate records by its own rules: the copy is walked
 * with the ring's own consumer code (kvr_ring_peek()) and each record is
 * checked with the protocol's parsers (kvr_req_parse(), kvr_resp_parse()),
 * so the dump shows exactly what the server or the worker would accept.
 * A damaged ring is shown up to its first bad record and is not an error
 * here: judging damage is --check's job.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"

/* Copy attempts before settling for the intact window of the last one. */
#define RING_COPY_TRIES 16

/*
 * Copies the ring at @mem into @buf and sets the copy's positions so that
 * they describe only records that were intact during the copy.
 *
 * Why that window is safe: the producer may overwrite a byte only after
 * the consumer has released it (moved head past it). A head read AFTER
 * the copy is complete is therefore a point below which bytes may have
 * been reused while we copied, and at or above which nothing can have
 * been: every record from that head up to the tail seen by
 * kvr_ring_check() (read before the copy) was already published and not
 * yet released for the whole copy. If the head did not move during the
 * copy, the whole snapshot window is intact; otherwise we retry, and
 * after RING_COPY_TRIES keep the shrunk window of the last attempt.
 *
 * Return: kvr_ring_check()'s result for the live ring, or -EBUSY if the
 * consumer overtook our tail (the window is empty and meaningless). On
 * -EINVAL, -EPROTO and -EBUSY from the check, @buf is not filled.
 */
static int ring_copy(const void *mem, uint32_t cap, unsigned char *buf,
		     struct kvr_ring_snapshot *snap)
{
	const struct kvr_ring_shm *live = mem;
	struct kvr_ring_shm *cp = (struct kvr_ring_shm *)buf;
	size_t bytes = kvr_ring_shm_bytes(cap);
	uint64_t h2 = 0;
	int rc = -EBUSY;

	for (int tries = 0; tries < RING_COPY_TRIES; tries++) {
		rc = kvr_ring_check(mem, bytes, cap, snap);
		if (rc == -EINVAL || rc == -EPROTO || rc == -EBUSY)
			return rc;
		memcpy(buf, mem, bytes);
		/* A-INS2: the seqlock rule. The fence keeps the memcpy's
		 * loads before the re-read of head, so a head still equal
		 * to the one kvr_ring_check() saw proves the consumer freed
		 * nothing while we copied (pairs with R2 in
		 * kvr_ring_release). An acquire load alone would order only
		 * what follows it. The const is cast away only because older
		 * compilers reject atomic loads through a pointer to const. */
		atomic_thread_fence(memory_order_acquire);
		h2 = atomic_load_explicit(
		    (_Atomic uint64_t *)(uintptr_t)&live->head,
		    memory_order_relaxed);
		if (h2 == snap->head)
			break;
	}
	/* Unsigned distances from the old head: h2 past the tail means the
	 * consumer released records we never saw whole. */
	if (h2 - snap->head > snap->tail - snap->head)
		return -EBUSY;
	snap->head = h2;
	snap->used_bytes = snap->tail - h2;
	/* Our private copy: point it at the intact window. Relaxed is
	 * enough, no other thread ever sees this memory. */
	atomic_store_explicit(&cp->head, h2, memory_order_relaxed);
	atomic_store_explicit(&cp->tail, snap->tail, memory_order_relaxed);
	/* The consumer takes a non-zero header word past the tail for a
	 * record (docs/ring.md): zero the copy's free space, so the walk
	 * stops at the tail we saw and not in a record copied half-made. */
	if (snap->tail - h2 <= cap) {
		uint64_t off = snap->tail & (cap - 1),
			 n = cap - (snap->tail - h2);
		uint64_t first = n < cap - off ? n : cap - off;

		memset(cp->data + off, 0, first);
		memset(cp->data, 0, n - first);
	}
	return rc;
}

/* A key as 32 hex digits, high half first. */
static void key_hex(char out[40], const struct kvr_key *k)
{
	snprintf(out, 40, "%016" PRIx64 "%016" PRIx64, k->hi, k->lo);
}

/* The fields of a request record that parsed. Keys are copied out with
 * memcpy: the record's payload has no alignment guarantee for them. */
static void dump_req(struct kvr_em *e, bool json, const struct kvr_req_view *rv)
{
	char key[40];

	if (json) {
		kvr_em_u64(e, "req_id", rv->hdr.req_id);
		kvr_em_u64(e, "handle", rv->hdr.handle);
		kvr_em_u64(e, "count", rv->hdr.count);
		kvr_em_u64(e, "flags", rv->hdr.flags);
	} else {
		printf(" req_id=%" PRIu64 " handle=%" PRIu64
		       " count=%u flags=0x%x",
		       rv->hdr.req_id, rv->hdr.handle, rv->hdr.count,
		       rv->hdr.flags);
	}
	if (rv->hdr.count > 0) {
		struct kvr_key k0;

		memcpy(&k0, rv->keys, sizeof(k0));
		key_hex(key, &k0);
		if (json)
			kvr_em_str(e, "first_key", key);
		else
			printf(" first_key=%s", key);
	}
	if (json)
		kvr_em_end(e);
	else
		putchar('\n');
}

/* The fields of a response record that parsed, then one entry (text: one
 * line) per slot descriptor. */
static void dump_resp(struct kvr_em *e, bool json, const char *ring,
		      uint64_t off, const struct kvr_resp_hdr *rh,
		      const struct kvr_slot_desc *slots)
{
	if (json) {
		kvr_em_u64(e, "req_id", rh->req_id);
		kvr_em_u64(e, "handle", rh->handle);
		kvr_em_i64(e, "status", rh->status);
		kvr_em_str(e, "status_name",
			   kvr_err_slot_name(kvr_err_slot(rh->status)));
		kvr_em_u64(e, "count", rh->count);
		kvr_em_u64(e, "value", rh->value);
		kvr_em_arr(e, "slots");
	} else {
		printf(" req_id=%" PRIu64 " handle=%" PRIu64
		       " status=%d status_name=%s count=%u value=%" PRIu64 "\n",
		       rh->req_id, rh->handle, rh->status,
		       kvr_err_slot_name(kvr_err_slot(rh->status)), rh->count,
		       rh->value);
	}
	for (uint32_t i = 0; i < rh->count; i++) {
		struct kvr_slot_desc sd;

		memcpy(&sd, &slots[i], sizeof(sd));
		if (json) {
			kvr_em_item(e, i);
			kvr_em_u64(e, "off", sd.off);
			kvr_em_u64(e, "len", sd.len);
			kvr_em_str(e, "status",
				   ins_slot_status_name(sd.status));
			kvr_em_end(e);
		} else {
			printf("ring=%s offset=%" PRIu64 " slot=%u off=%" PRIu64
			       " len=%" PRIu64 " status=%s\n",
			       ring, off, i, sd.off, sd.len,
			       ins_slot_status_name(sd.status));
		}
	}
	if (json) {
		kvr_em_end(e);
		kvr_em_end(e);
	}
}

/*
 * Decodes record number @nr of the private copy (at byte @off of the
 * ring's data area) and prints it. A record that fails the protocol
 * parser is shown with valid=false and the reason, and its payload is not
 * interpreted further. The parsers check each count against the
 * record's length (and slots against the pool size), so a hostile record
 * cannot make us read past it.
 */
static void dump_rec(struct kvr_em *e, bool json, const char *ring, bool resp,
		     uint64_t off, const struct kvr_ring_rec *rec,
		     const struct ins_snap *s, uint32_t nr)
{
	struct kvr_req_view rv;
	struct kvr_resp_hdr rh;
	const struct kvr_slot_desc *slots = NULL;
	uint32_t op = resp ? rec->type & ~KVR_RESP_BIT : rec->type;
	/* The server's limit when the header gives a sane one, else the
	 * protocol's own ceiling. */
	uint32_t max_keys = s->max_keys && s->max_keys < KVR_MAX_KEYS_LIMIT
				? s->max_keys
				: KVR_MAX_KEYS_LIMIT;
	int rc;

	rc = resp
		 ? kvr_resp_parse(rec->type, rec->data, rec->len, s->pool_bytes,
				  &rh, &slots)
		 : kvr_req_parse(rec->type, rec->data, rec->len, max_keys, &rv);
	if (json) {
		kvr_em_item(e, nr);
		kvr_em_u64(e, "offset", off);
		kvr_em_u64(e, "type", rec->type);
		kvr_em_str(e, "op", kvr_op_name(op));
		kvr_em_u64(e, "len", rec->len);
		kvr_em_bool(e, "valid", rc == 0);
		if (rc < 0)
			kvr_em_str(e, "error", kvr_strerror(rc));
	} else {
		printf("ring=%s offset=%" PRIu64 " type=0x%x op=%s len=%u",
		       ring, off, rec->type, kvr_op_name(op), rec->len);
		if (rc < 0)
			printf(" valid=false error=\"%s\"\n", kvr_strerror(rc));
	}
	if (rc < 0) {
		if (json)
			kvr_em_end(e);
		return;
	}
	if (resp)
		dump_resp(e, json, ring, off, &rh, slots);
	else
		dump_req(e, json, &rv);
}

/* The ring's header line (text) or the opening of its object (JSON). */
static void dump_ring_head(struct kvr_em *e, bool json, const char *name,
			   bool resp, uint32_t cap,
			   const struct kvr_ring_snapshot *snap, int rc)
{
	if (json) {
		kvr_em_obj(e, resp ? "resp_ring" : "req_ring");
		kvr_em_u64(e, "capacity", cap);
		kvr_em_u64(e, "head", snap->head);
		kvr_em_u64(e, "tail", snap->tail);
		kvr_em_u64(e, "used_bytes", snap->used_bytes);
		kvr_em_u64(e, "ring_high_water", snap->high_water);
		kvr_em_str(e, "check", rc == 0 ? "ok" : kvr_strerror(rc));
		kvr_em_arr(e, "records");
	} else {
		printf("ring=%s capacity=%u head=%" PRIu64 " tail=%" PRIu64
		       " used_bytes=%" PRIu64 " check=\"%s\"\n",
		       name, cap, snap->head, snap->tail, snap->used_bytes,
		       rc == 0 ? "ok" : kvr_strerror(rc));
	}
}

/*
 * Dumps one ring at @mem (in the mapping) of capacity @cap. Only the copy
 * runs under the SIGBUS guard; decoding reads private memory.
 * Return: 0; -ENOMEM or -EFAULT (SIGBUS), both printed; or the ring's
 * check or walk error, which is part of the dump, not printed as one.
 */
static int dump_ring(struct kvr_em *e, bool json, const char *name, bool resp,
		     const void *mem, uint32_t cap, const struct ins_snap *s)
{
	size_t bytes = kvr_ring_shm_bytes(cap);
	/* Aligned like the ring in the segment (128 bytes), so the copy
	 * has the alignment the ring code was written for; aligned_alloc
	 * needs the size rounded up to a multiple of the alignment. */
	unsigned char *buf = aligned_alloc(128, (bytes + 127) / 128 * 128);
	struct kvr_ring_snapshot snap;
	struct kvr_ring_rec rec;
	struct kvr_ring r;
	uint32_t nr = 0;
	int rc, prc = 0;

	if (!buf) {
		ins_err("dump: out of memory");
		return -ENOMEM;
	}
	memset(&snap, 0, sizeof(snap));
	ins_bus_armed = 1;
	if (sigsetjmp(ins_bus_jmp, 1)) {
		ins_bus_armed = 0;
		free(buf);
		ins_err("dump: SIGBUS reading the ring (file truncated)");
		return -EFAULT;
	}
	rc = ring_copy(mem, cap, buf, &snap);
	ins_bus_armed = 0;
	dump_ring_head(e, json, name, resp, cap, &snap, rc);
	/* Walk the private copy with the ring's own consumer code; a damaged
	 * ring is walked up to the first bad record. A ring that was not
	 * copied (see ring_copy()) is not walked at all. */
	if (rc != -EINVAL && rc != -EPROTO && rc != -EBUSY)
		prc = kvr_ring_attach_consumer(&r, buf, bytes, cap);
	else
		prc = rc;
	while (prc == 0) {
		prc = kvr_ring_peek(&r, &rec);
		if (prc < 0)
			break;
		dump_rec(e, json, name, resp,
			 (uint64_t)((const unsigned char *)rec.data - r.data -
				    KVR_RING_HDR_BYTES),
			 &rec, s, nr++);
	}
	/* -EAGAIN is the peek's "empty": the walk reached the tail. */
	if (prc == -EAGAIN)
		prc = 0;
	if (json) {
		kvr_em_end(e);
		kvr_em_u64(e, "nr_records", nr);
		if (prc < 0)
			kvr_em_str(e, "walk_error", kvr_strerror(prc));
		kvr_em_end(e);
	} else if (prc < 0) {
		printf("ring=%s walk_error=\"%s\"\n", name, kvr_strerror(prc));
	}
	free(buf);
	return rc < 0 ? rc : prc;
}

/*
 * --dump o->dump_channel (main checked it is below max_channels): a
 * header line for the channel from the snapshot @s, then both rings, read
 * live from the mapping at the offsets of our own geometry.
 * Return: INS_EXIT_OK, also for a damaged ring; INS_EXIT_RUNTIME on
 * SIGBUS or when out of memory.
 */
int ins_dump_run(const struct ins_opts *o, const struct ins_attach *a,
		 const struct ins_snap *s)
{
	const struct ins_chan_snap *c = &s->ch[o->dump_channel];
	const char *base;
	struct kvr_em e;
	int rc1, rc2, brc = -ENOENT;

	/* No directory (abi 4.0: not root nor kvringd's uid): no channel
	 * is known, which must not read as "free". */
	if (s->dir_rc < 0) {
		ins_err("dump channel %u: the channel directory cannot be read "
			"(%s); run kvring-inspect as root or as kvringd's uid",
			o->dump_channel, kvr_strerror(s->dir_rc));
		return INS_EXIT_RUNTIME;
	}
	/* Its own block, mapped for the generation the snapshot shows. */
	base = c->state == KVR_CHAN_FREE
		   ? NULL
		   : (const char *)ins_chan_block(a, o->dump_channel,
						  c->generation, &brc);
	if (!base) {
		ins_err("dump channel %u: %s: %s", o->dump_channel,
			c->state == KVR_CHAN_FREE ? "channel is free"
						  : "cannot read its block",
			c->state == KVR_CHAN_FREE
			    ? "no worker holds it, so it has no rings"
			    : kvr_strerror(brc));
		return INS_EXIT_RUNTIME;
	}

	kvr_em_init(&e, stdout, o->json);
	if (o->json) {
		kvr_em_u64(&e, "schema", INS_SCHEMA);
		kvr_em_u64(&e, "channel", c->idx);
		kvr_em_str(&e, "state", ins_chan_state_name(c->state));
		kvr_em_i64(&e, "pid", c->pid);
		kvr_em_bool(&e, "pid_alive", c->alive);
	} else {
		printf("channel=%u state=%s pid=%d pid_alive=%s\n", c->idx,
		       ins_chan_state_name(c->state), c->pid,
		       c->alive ? "true" : "false");
	}
	rc1 = dump_ring(&e, o->json, "req", false, base + a->g.req_ring_off,
			a->g.req_ring_cap, s);
	rc2 = dump_ring(&e, o->json, "resp", true, base + a->g.resp_ring_off,
			a->g.resp_ring_cap, s);
	if (o->json)
		kvr_em_finish(&e);
	/* An out-of-memory on the response ring alone still exits 0: a
	 * long-standing asymmetry, left for a separate behaviour fix. */
	return rc1 == -EFAULT || rc2 == -EFAULT || rc1 == -ENOMEM
		   ? INS_EXIT_RUNTIME
		   : INS_EXIT_OK;
}
