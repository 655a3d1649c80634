/* SPDX-License-Identifier: MIT */
/*
 * store_audit.c - kvr_store_audit(): walks every object, owner, channel,
 * the LRU list, the lease heap and the allocator of a store, recomputes
 * every count from scratch and compares it with what the engine recorded.
 * Tests call it after every step, so an invariant broken by any request is
 * caught at the request that broke it, not at the crash it causes later.
 *
 * It only reads: it never repairs anything (a store that fails its audit
 * is a bug, and hiding it would lose the evidence), and it writes only its
 * own scratch tallies, kept with the store between audits (grown when the
 * object array grew) so that auditing after every step allocates nothing. It
 * costs O(everything), so the event loop never calls it on a request path. The
 * invariants are the ones listed in docs/storage.md, "What the audit checks":
 *  A1 the allocator's own audit passes;
 *  A2 every live object but a staged slot's is in the index under its
 *     key (a staged one is not: store_stage.c), and the index holds
 *     nothing else; its slot is exactly one live allocation; sum of rounded
 *     sizes == allocator used bytes == committed + reserved gauges;
 *  A3 a RESERVED object has no pin, is on no list but its store transfer's
 *     (open or in quarantine), and is listed by exactly that one owner; an
 *     object of a quarantined store transfer is not in the index;
 *  A4 every pin is owned: an object's pin count == the number of retrieve
 *     transfers and leases listing it; an owner lists an object at most
 *     once and only COMMITTED objects;
 *  A5 the LRU list holds exactly the COMMITTED objects with no pin, and its
 *     links are consistent;
 *  A6 every owner is reachable by its id and on its channel's list, leases
 *     are in the heap at their recorded position, the heap is ordered;
 *  A7 per-channel and global gauges equal the recomputed values;
 *  A8 the transfer queue holds exactly the open transfers, oldest first
 *     (deadlines never decrease), with consistent links; the per-namespace
 *     object counts equal the objects of each namespace;
 *  A9 quarantine: the per-channel and global counts of quarantined
 *     transfers, objects and bytes equal the recomputed ones, and only a
 *     channel with quarantine left is detached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

/*
 * Record the first violation in msg and stop (alloc.h). Every check below
 * reads as "if (broken) FAIL(what was found, what was expected)".
 */
#define FAIL KVR_AUDIT_FAIL

/*
 * Scratch of the audit: what the owner walk found, for the object walk to
 * compare with, and the per-channel counters recomputed from the lists.
 */
struct audit_tally {
	uint32_t *pins;	    /* per object: owners listing it */
	uint32_t *seen;	    /* per object: last owner + 1 that listed it */
	uint32_t *holders;  /* per object: store transfers listing it */
	struct chan *chans; /* recomputed per-channel counters */
	uint64_t lru_want;  /* committed objects without a pin */
	uint64_t *per_ns;   /* per namespace: objects walked */
};

/*
 * A3, A4 for one owner's object list: each entry a real object, listed
 * once; a store transfer lists only its own RESERVED objects and its byte
 * count is their rounded sum; others pin only COMMITTED objects.
 */
static int audit_owner_objs(const struct kvr_store *s, struct audit_tally *t,
			    uint32_t c, uint32_t o, char *msg, size_t msg_len)
{
	const struct owner *w = &s->own[o];

	for (uint32_t i = 0; i < w->nr; i++) {
		uint32_t b = w->objs[i];

		if (b >= s->obj_fresh)
			FAIL("owner %llu lists bad object %u",
			     (unsigned long long)w->id, b);
		/* seen[] holds o + 1 so that 0 means "nobody yet". */
		if (t->seen[b] == o + 1)
			FAIL("owner %llu lists object %u twice",
			     (unsigned long long)w->id, b);
		t->seen[b] = o + 1;
		if (owner_reserves(w)) {
			if (s->obj[b].state != OBJ_RESERVED ||
			    s->obj[b].owner != o)
				FAIL("store %llu lists object %u in state %u "
				     "owner %u",
				     (unsigned long long)w->id, b,
				     s->obj[b].state, s->obj[b].owner);
			t->holders[b]++;
			t->chans[c].reserved_objects++;
		} else {
			if (s->obj[b].state != OBJ_COMMITTED &&
			    s->obj[b].state != OBJ_DOOMED)
				FAIL("owner %llu pins object %u in state %u",
				     (unsigned long long)w->id, b,
				     s->obj[b].state);
			t->pins[b]++;
			t->chans[c].pins++;
			t->chans[c].pinned_bytes += obj_bytes(s, &s->obj[b]);
		}
	}
	if (w->kind == OWN_QUAR) {
		t->chans[c].quar_slots += w->nr;
		t->chans[c].quar_bytes += w->bytes;
	}
	if (owner_reserves(w)) {
		uint64_t sum = 0;

		for (uint32_t i = 0; i < w->nr; i++)
			sum += obj_bytes(s, &s->obj[w->objs[i]]);
		if (sum != w->bytes)
			FAIL("store %llu: bytes %llu, objects sum to %llu",
			     (unsigned long long)w->id,
			     (unsigned long long)w->bytes,
			     (unsigned long long)sum);
		t->chans[c].reserved_bytes += w->bytes;
	} else {
		uint64_t sum = 0;

		for (uint32_t i = 0; i < w->nr; i++)
			sum += obj_bytes(s, &s->obj[w->objs[i]]);
		if (sum != w->bytes)
			FAIL("owner %llu: pinned bytes %llu, objects sum to "
			     "%llu",
			     (unsigned long long)w->id,
			     (unsigned long long)w->bytes,
			     (unsigned long long)sum);
	}
	return 0;
}

/* A8: the transfer queue, oldest first, against the owner walk's count. */
static int audit_xq(const struct kvr_store *s, uint64_t xfers, char *msg,
		    size_t msg_len)
{
	uint64_t n = 0, last = 0;
	uint32_t o, prev = NIL;

	/* A trusted channel's transfers have no deadline: not queued. */
	for (uint32_t c = 0; c < s->cfg.max_channels; c++)
		if (s->chan[c].trusted)
			xfers -= s->chan[c].nr_xfers;

	for (o = s->xq_head; o != NIL; prev = o, o = s->own[o].xnext) {
		const struct owner *w = &s->own[o];

		if (o >= s->own_cap || n >= xfers)
			FAIL("transfer queue too long or corrupt at %u", o);
		if (w->xprev != prev ||
		    (w->kind != OWN_STORE && w->kind != OWN_RETRIEVE))
			FAIL("transfer queue entry %u: prev %u kind %u", o,
			     w->xprev, w->kind);
		if (w->deadline_ns < last)
			FAIL("transfer queue out of deadline order at %u", o);
		last = w->deadline_ns;
		n++;
	}
	if (prev != s->xq_tail || n != xfers)
		FAIL("transfer queue holds %llu, %llu transfers open",
		     (unsigned long long)n, (unsigned long long)xfers);
	return 0;
}

/*
 * A6, A3, A4, A7 from the owners' side: walk each channel's owner list and
 * tally what the owners claim. The length guard (owners > own_live) stops a
 * cycle in a corrupt list from looping forever.
 */
static int audit_owners(const struct kvr_store *s, struct audit_tally *t,
			char *msg, size_t msg_len)
{
	uint64_t owners = 0, leases = 0, xfers = 0, quar = 0, detached = 0;
	uint64_t quar_slots = 0, quar_bytes = 0;
	int rc;

	for (uint32_t c = 0; c < s->cfg.max_channels; c++) {
		const struct chan *rec = &s->chan[c], *got = &t->chans[c];
		uint32_t prev = NIL;

		for (uint32_t o = rec->head; o != NIL;
		     prev = o, o = s->own[o].next) {
			const struct owner *w = &s->own[o];

			if (o >= s->own_cap || owners > s->own_live)
				FAIL("owner list of ch %u corrupt", c);
			owners++;
			if (w->prev != prev || w->ch != c)
				FAIL("owner %u: links/ch %u on ch %u list", o,
				     w->ch, c);
			if (w->kind == OWN_FREE || w->id == 0 ||
			    kvr_index_u64_find(&s->ids, w->id) != o)
				FAIL("owner %u (id %llu kind %u) not findable",
				     o, (unsigned long long)w->id, w->kind);
			if (w->kind == OWN_QUAR) {
				quar++;
				t->chans[c].nr_quar++;
				if (w->heap_pos != NIL || w->staged ||
				    (w->qkind != OWN_STORE &&
				     w->qkind != OWN_RETRIEVE))
					FAIL("quarantined %llu: heap %u staged "
					     "%u was %u",
					     (unsigned long long)w->id,
					     w->heap_pos, w->staged, w->qkind);
			} else if (w->kind == OWN_LEASE) {
				leases++;
				t->chans[c].nr_leases++;
				if (w->heap_pos >= s->heap_nr ||
				    s->heap[w->heap_pos] != o)
					FAIL("lease %llu not in heap",
					     (unsigned long long)w->id);
			} else {
				xfers++;
				t->chans[c].nr_xfers++;
				/* A staged slot: a store transfer of one. */
				if (w->staged) {
					t->chans[c].nr_staged++;
					if (w->kind != OWN_STORE || w->nr != 1)
						FAIL("staged owner %llu kind "
						     "%u lists %u",
						     (unsigned long long)w->id,
						     w->kind, w->nr);
				}
				if (w->heap_pos != NIL)
					FAIL("transfer %llu in lease heap",
					     (unsigned long long)w->id);
			}
			/* An empty owner is never published (seed bug 1). */
			if (w->nr == 0 || w->nr > w->cap)
				FAIL("owner %llu lists %u objects (cap %u)",
				     (unsigned long long)w->id, w->nr, w->cap);
			rc = audit_owner_objs(s, t, c, o, msg, msg_len);
			if (rc < 0)
				return rc;
		}
		if (got->nr_staged != rec->nr_staged)
			FAIL("ch %u staged %u/%u (walked/recorded)", c,
			     got->nr_staged, rec->nr_staged);
		if (got->nr_quar != rec->nr_quar ||
		    got->quar_slots != rec->quar_slots ||
		    got->quar_bytes != rec->quar_bytes ||
		    (rec->detached && !rec->nr_quar))
			FAIL("ch %u quarantine %u/%u slots %llu/%llu bytes "
			     "%llu/%llu detached %d (walked/recorded)",
			     c, got->nr_quar, rec->nr_quar,
			     (unsigned long long)got->quar_slots,
			     (unsigned long long)rec->quar_slots,
			     (unsigned long long)got->quar_bytes,
			     (unsigned long long)rec->quar_bytes,
			     (int)rec->detached);
		quar_slots += rec->quar_slots;
		quar_bytes += rec->quar_bytes;
		detached += rec->detached;
		if (got->nr_xfers != rec->nr_xfers ||
		    got->nr_leases != rec->nr_leases ||
		    got->pins != rec->pins ||
		    got->reserved_objects != rec->reserved_objects ||
		    got->reserved_bytes != rec->reserved_bytes ||
		    got->pinned_bytes != rec->pinned_bytes)
			FAIL("ch %u counters xfers %u/%u leases %u/%u pins "
			     "%llu/%llu reserved %llu/%llu (walked/recorded)",
			     c, got->nr_xfers, rec->nr_xfers, got->nr_leases,
			     rec->nr_leases, (unsigned long long)got->pins,
			     (unsigned long long)rec->pins,
			     (unsigned long long)got->reserved_bytes,
			     (unsigned long long)rec->reserved_bytes);
	}
	/* Each uid aggregate is the sum of its channels (store_uid.c):
	 * O(channels^2), fine for an audit. Entry 0 is the sink of channels
	 * never opened and is not checked. */
	for (uint32_t u = 1; u <= s->cfg.max_channels; u++) {
		uint64_t res = 0, pin = 0;
		uint32_t n = 0;

		for (uint32_t c = 0; c < s->cfg.max_channels; c++) {
			if (s->chan[c].uidx != u)
				continue;
			n++;
			res += s->chan[c].reserved_bytes;
			pin += s->chan[c].pinned_bytes;
			if (s->chan[c].uid != s->uacct[u].uid)
				FAIL("ch %u of uid %u bound to the entry of "
				     "uid %u",
				     c, s->chan[c].uid, s->uacct[u].uid);
		}
		if (n != s->uacct[u].chans ||
		    res != s->uacct[u].reserved_bytes ||
		    pin != s->uacct[u].pinned_bytes)
			FAIL("uid entry %u: channels %u/%u reserved %llu/%llu "
			     "pinned %llu/%llu (walked/recorded)",
			     u, n, s->uacct[u].chans, (unsigned long long)res,
			     (unsigned long long)s->uacct[u].reserved_bytes,
			     (unsigned long long)pin,
			     (unsigned long long)s->uacct[u].pinned_bytes);
	}
	/* Every live owner was on some list, and only those have ids. */
	if (owners != s->own_live || owners != kvr_index_u64_count(&s->ids))
		FAIL("owners: %llu on channel lists, %u live, %llu ids",
		     (unsigned long long)owners, s->own_live,
		     (unsigned long long)kvr_index_u64_count(&s->ids));
	if (quar != s->st.quar_xfers || quar_slots != s->st.quar_slots ||
	    quar_bytes != s->st.quar_bytes || detached != s->st.detached)
		FAIL("quarantine %llu/%llu slots %llu/%llu bytes %llu/%llu "
		     "detached %llu/%llu (walked/recorded)",
		     (unsigned long long)quar,
		     (unsigned long long)s->st.quar_xfers,
		     (unsigned long long)quar_slots,
		     (unsigned long long)s->st.quar_slots,
		     (unsigned long long)quar_bytes,
		     (unsigned long long)s->st.quar_bytes,
		     (unsigned long long)detached,
		     (unsigned long long)s->st.detached);
	if (leases != s->heap_nr || leases != s->st.leases ||
	    xfers != s->st.transfers)
		FAIL("leases %llu heap %u gauge %llu, transfers %llu gauge "
		     "%llu",
		     (unsigned long long)leases, s->heap_nr,
		     (unsigned long long)s->st.leases,
		     (unsigned long long)xfers,
		     (unsigned long long)s->st.transfers);
	for (uint32_t i = 1; i < s->heap_nr; i++)
		if (s->own[s->heap[(i - 1) / 2]].deadline_ns >
		    s->own[s->heap[i]].deadline_ns)
			FAIL("lease heap out of order at %u", i);
	return audit_xq(s, xfers, msg, msg_len);
}

/*
 * A2, A3, A4, A7 from the objects' side: every slot of the object array,
 * checked against the index, the allocator and the owner walk's tallies,
 * then the totals against the allocator and the global gauges.
 */
static int audit_objects(const struct kvr_store *s, struct audit_tally *t,
			 char *msg, size_t msg_len)
{
	uint64_t committed_b = 0, reserved_b = 0, committed_n = 0;
	uint64_t reserved_n = 0, pinned_n = 0, pins_n = 0, spare = 0;
	uint64_t pinned_b = 0, staged_n = 0;
	struct kvr_alloc_stats as;

	/* Above obj_fresh nothing was ever handed out: FREE unwritten. */
	if (s->obj_fresh > s->obj_cap)
		FAIL("objects: %u handed out of %u", s->obj_fresh, s->obj_cap);
	spare = s->obj_cap - s->obj_fresh;
	for (uint32_t x = 0; x < s->obj_fresh; x++) {
		const struct obj *b = &s->obj[x];
		struct kvr_key k = {b->lo, b->hi};

		if (b->state == OBJ_FREE) {
			spare++;
			continue;
		}
		if (b->state != OBJ_RESERVED && b->state != OBJ_COMMITTED &&
		    b->state != OBJ_DOOMED)
			FAIL("object %u in state %u", x, b->state);
		/* Doomed: committed until its last pin frees it. */
		if (b->state == OBJ_DOOMED && b->pins == 0)
			FAIL("doomed object %u has no pin left", x);
		/* A staged slot's object is out of the index until its
		 * bind names it (store_stage.c), and a quarantined one for
		 * good (store_quar.c); every other is in it. */
		if (b->state == OBJ_RESERVED && b->owner < s->own_cap &&
		    (s->own[b->owner].staged ||
		     s->own[b->owner].kind == OWN_QUAR)) {
			staged_n++;
			if (kvr_index_find(&s->index, b->ns, &k) == x)
				FAIL("unnamed object %u is indexed", x);
		} else if (kvr_index_find(&s->index, b->ns, &k) != x) {
			FAIL("object %u (ns %u key %016llx%016llx) not indexed",
			     x, b->ns, (unsigned long long)b->hi,
			     (unsigned long long)b->lo);
		}
		if (!kvr_alloc_owns(&s->alloc, obj_off(s, b), b->len) ||
		    obj_off(s, b) % s->cfg.align)
			FAIL("object %u slot %llu+%llu is not one allocation",
			     x, (unsigned long long)obj_off(s, b),
			     (unsigned long long)b->len);
		if (b->state == OBJ_RESERVED) {
			/* Its word is its owner (checked above, from the
			 * owner's side): no pin may be counted for it. */
			if (t->pins[x] || t->holders[x] != 1)
				FAIL("reserved object %u: %u owners pin it, %u "
				     "transfers",
				     x, t->pins[x], t->holders[x]);
			reserved_n++;
			reserved_b += obj_bytes(s, b);
		} else {
			if (b->pins != t->pins[x])
				FAIL("object %u: pin count %u, %u owners pin "
				     "it",
				     x, b->pins, t->pins[x]);
			pins_n += b->pins;
			if (t->holders[x])
				FAIL("committed object %u held by a store "
				     "transfer",
				     x);
			committed_n++;
			committed_b += obj_bytes(s, b);
			if (b->pins) {
				pinned_n++;
				pinned_b += obj_bytes(s, b);
			} else
				t->lru_want++;
		}
	}
	/* Live objects are exactly the indexed ones; the rest are spare. */
	if (committed_n + reserved_n != s->obj_live ||
	    spare != s->obj_cap - s->obj_live ||
	    kvr_index_count(&s->index) + staged_n != s->obj_live)
		FAIL("objects: %llu live walked, %u recorded, %llu indexed",
		     (unsigned long long)(committed_n + reserved_n),
		     s->obj_live,
		     (unsigned long long)kvr_index_count(&s->index));
	kvr_alloc_stats(&s->alloc, &as);
	if (committed_b + reserved_b != as.used_bytes)
		FAIL("objects hold %llu bytes, allocator used %llu",
		     (unsigned long long)(committed_b + reserved_b),
		     (unsigned long long)as.used_bytes);
	if (committed_n != s->st.objects ||
	    reserved_n != s->st.reserved_objects ||
	    committed_b != s->st.committed_bytes ||
	    reserved_b != s->st.reserved_bytes ||
	    pinned_n != s->st.pinned_objects || pins_n != s->st.pins ||
	    pinned_b != s->st.pinned_bytes)
		FAIL("gauges: objects %llu/%llu reserved %llu/%llu bytes "
		     "%llu/%llu+%llu/%llu pinned %llu/%llu (%llu/%llu bytes) "
		     "pins %llu/%llu",
		     (unsigned long long)committed_n,
		     (unsigned long long)s->st.objects,
		     (unsigned long long)reserved_n,
		     (unsigned long long)s->st.reserved_objects,
		     (unsigned long long)committed_b,
		     (unsigned long long)s->st.committed_bytes,
		     (unsigned long long)reserved_b,
		     (unsigned long long)s->st.reserved_bytes,
		     (unsigned long long)pinned_n,
		     (unsigned long long)s->st.pinned_objects,
		     (unsigned long long)pinned_b,
		     (unsigned long long)s->st.pinned_bytes,
		     (unsigned long long)pins_n,
		     (unsigned long long)s->st.pins);
	return 0;
}

/* A8: per-namespace object counts, from an object walk into @per_ns. */
static int audit_ns(const struct kvr_store *s, uint64_t *per_ns, char *msg,
		    size_t msg_len)
{
	for (uint32_t x = 0; x < s->obj_fresh; x++)
		if (s->obj[x].state != OBJ_FREE) {
			if (s->obj[x].ns >= s->cfg.max_ns)
				FAIL("object %u in namespace %u", x,
				     s->obj[x].ns);
			per_ns[s->obj[x].ns]++;
		}
	for (uint32_t n = 0; n < s->cfg.max_ns; n++)
		if (per_ns[n] != s->ns_objs[n])
			FAIL("namespace %u: %llu objects, recorded %llu", n,
			     (unsigned long long)per_ns[n],
			     (unsigned long long)s->ns_objs[n]);
	return 0;
}

/*
 * A5: the LRU list, head to tail. Its length is bounded by the number of
 * committed unpinned objects the object walk counted, which also stops a
 * cycle; then both ends and the count must match.
 */
static int audit_lru(const struct kvr_store *s, const struct audit_tally *t,
		     char *msg, size_t msg_len)
{
	uint64_t lru_n = 0;
	uint32_t x, prev = NIL;

	for (x = s->lru_head; x != NIL; prev = x, x = s->obj[x].next) {
		if (x >= s->obj_fresh || lru_n >= t->lru_want)
			FAIL("lru list too long or corrupt at %u", x);
		if (s->obj[x].prev != prev)
			FAIL("lru object %u prev %u, expected %u", x,
			     s->obj[x].prev, prev);
		if (s->obj[x].state != OBJ_COMMITTED || s->obj[x].pins)
			FAIL("lru object %u: state %u pins %u", x,
			     s->obj[x].state, s->obj[x].pins);
		lru_n++;
	}
	if (prev != s->lru_tail || lru_n != t->lru_want)
		FAIL("lru holds %llu objects, %llu committed unpinned",
		     (unsigned long long)lru_n,
		     (unsigned long long)t->lru_want);
	return 0;
}

void kvr__store_audit_free(struct kvr__audit_scratch *a)
{
	if (!a)
		return;
	free(a->pins);
	free(a->seen);
	free(a->holders);
	free(a->chans);
	free(a->per_ns);
	free(a);
}

/* Bytes of the tallies' scratch at the store's sizes (tally_get). */
static size_t tally_bytes(const struct kvr_store *s)
{
	return ((size_t)s->obj_cap + 1u) * 3u * sizeof(uint32_t) +
	       s->cfg.max_channels * sizeof(struct chan) +
	       s->cfg.max_ns * sizeof(uint64_t);
}

/*
 * The tallies, zeroed: the scratch kept in the store, grown when the
 * object array grew since the last audit (channels and namespaces are
 * fixed at create). One memset per array instead of five callocs.
 */
static int tally_get(const struct kvr_store *s, struct audit_tally *t)
{
	struct kvr__audit_scratch *a = s->audit;
	size_t n = (size_t)s->obj_cap + 1u;

	if (!a->chans) {
		a->chans = calloc(s->cfg.max_channels, sizeof(*a->chans));
		a->per_ns = calloc(s->cfg.max_ns, sizeof(*a->per_ns));
		if (!a->chans || !a->per_ns)
			return -ENOMEM;
	}
	if (!a->pins || a->obj_cap < s->obj_cap) {
		uint32_t *p = realloc(a->pins, n * sizeof(*p));

		if (p)
			a->pins = p;
		p = p ? realloc(a->seen, n * sizeof(*p)) : NULL;
		if (p)
			a->seen = p;
		p = p ? realloc(a->holders, n * sizeof(*p)) : NULL;
		if (!p)
			return -ENOMEM;
		a->holders = p;
		a->obj_cap = s->obj_cap;
	}
	memset(a->pins, 0, n * sizeof(*a->pins));
	memset(a->seen, 0, n * sizeof(*a->seen));
	memset(a->holders, 0, n * sizeof(*a->holders));
	memset(a->chans, 0, s->cfg.max_channels * sizeof(*a->chans));
	memset(a->per_ns, 0, s->cfg.max_ns * sizeof(*a->per_ns));
	*t = (struct audit_tally){.pins = a->pins,
				  .seen = a->seen,
				  .holders = a->holders,
				  .chans = a->chans,
				  .per_ns = a->per_ns};
	return 0;
}

/*
 * The walks run in a fixed order, owners before objects (the object walk
 * compares against the owners' tallies) and objects before the LRU (which
 * needs their count), so the first violation reported is deterministic.
 */
int kvr_store_audit(const struct kvr_store *s, char *msg, size_t msg_len)
{
	if (s)
		OWNER_ONLY(s);
	struct audit_tally t = {0};
	int rc;

	if (!s)
		return -EINVAL;
	if (msg_len)
		msg[0] = '\0';
	rc = kvr_alloc_audit(&s->alloc, msg, msg_len); /* A1 */
	if (rc < 0)
		return rc;
	rc = tally_get(s, &t);
	if (rc < 0) {
		snprintf(msg, msg_len,
			 "no memory for the audit's scratch: %zu bytes for "
			 "%u objects of capacity",
			 tally_bytes(s), s->obj_cap);
		return rc;
	}
	rc = audit_owners(s, &t, msg, msg_len);
	if (rc == 0)
		rc = audit_objects(s, &t, msg, msg_len);
	if (rc == 0)
		rc = audit_lru(s, &t, msg, msg_len);
	if (rc == 0)
		rc = audit_ns(s, t.per_ns, msg, msg_len);
	return rc;
}
