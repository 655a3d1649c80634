/* SPDX-License-Identifier: MIT */
/*
 * bench_ring_peer.c - the measurement loops of the `ring` scenario of
 * kvring-bench, both sides: the child ("B", pinned to the consumer CPU)
 * answers each phase, the parent ("A", producer CPU) drives it and takes
 * the samples. Phases: the cache-line floor, the two-line floor, the ring
 * round trip, one-way throughput. Every record is stamped with its sequence
 * number and checked; wrong data fails the run. Options, orchestration and
 * reporting are in bench_ring.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <kvring/ring.h>

#include "bench_common.h"
#include "bench_ring.h"

/* ---- small helpers ---------------------------------------------------- */

static uint64_t load_word(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void store_word(void *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/*
 * Copies a payload. The common small size is a compile-time constant, as
 * it would be for a fixed-size message: the copy is then inlined and its
 * loads do not wait for the length read from the record header.
 */
static inline void copy_payload(void *dst, const void *src, uint32_t bytes)
{
	if (bytes == 64)
		memcpy(dst, src, 64);
	else
		memcpy(dst, src, bytes);
}

/* Stamps a payload: seq in the first word, ~seq in the last. */
static void stamp(unsigned char *p, uint32_t bytes, uint64_t seq)
{
	store_word(p, seq);
	store_word(p + bytes - 8, ~seq);
}

/*
 * Parent: true if the child died (checked every 2^20 spins of a wait, so a
 * dead child fails the run instead of hanging it).
 */
static bool child_gone(struct bench_ring_side *s, unsigned *spins)
{
	if (s->reaped)
		return true;
	if ((++*spins & 0xfffffu) != 0)
		return false;
	if (waitpid(s->child, NULL, WNOHANG) == 0)
		return false;
	s->reaped = true;
	fprintf(stderr, "kvring-bench: ring: child died\n");
	return true;
}

/* ---- child (B, consumer CPU) ------------------------------------------ */

/* Records what went wrong for the parent to print; returns -1. */
static int child_fail(struct bench_ring_ctl_shm *c, int err, uint64_t seq,
		      uint64_t exp, uint64_t found)
{
	c->err = err;
	c->bad_seq = seq;
	c->bad_expected = exp;
	c->bad_found = found;
	return -1;
}

static void child_floor(struct bench_ring_ctl_shm *c, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		/* The floor does what a ring hand-off does. A-BR3: pairs
		 * with R-BR3 in bench_ring_floor(). */
		while (atomic_load_explicit(&c->line, memory_order_acquire) !=
		       2 * i + 1)
			kvr_clock_relax();
		/* R-BR4: pairs with A-BR4 in bench_ring_floor(). */
		atomic_store_explicit(&c->line, 2 * i + 2,
				      memory_order_release);
	}
}

/* Copies one 64-byte message line (relaxed word by word). */
static uint64_t msg_copy(_Atomic uint64_t *dst, _Atomic uint64_t *src)
{
	uint64_t first = 0;

	for (int k = 0; k < 8; k++) {
		/* Relaxed: ordered by the flag pair around the copy
		 * (A-BR5 before it, R-BR6 after it). */
		uint64_t v =
		    atomic_load_explicit(&src[k], memory_order_relaxed);

		if (k == 0)
			first = v;
		atomic_store_explicit(&dst[k], v, memory_order_relaxed);
	}
	return first;
}

/* The two-line floor (@msg: a message line beside each flag) and the
 * placement probe (no message: one line each way). */
static int child_floor2(struct bench_ring_ctl_shm *c, uint64_t count, bool msg)
{
	for (uint64_t i = 1; i <= count; i++) {
		/* A-BR5: pairs with R-BR5 in flag_rtt(). */
		while (atomic_load_explicit(&c->flag_a, memory_order_acquire) !=
		       i)
			kvr_clock_relax();
		if (msg)
			msg_copy(c->msg_b, c->msg_a);
		/* R-BR6: pairs with A-BR6 in flag_rtt(). */
		atomic_store_explicit(&c->flag_b, i, memory_order_release);
	}
	return 0;
}

/* Echoes every ping record back on the pong ring. */
static int child_rtt(struct bench_ring_side *s, uint64_t count, uint32_t bytes)
{
	/* The parent attached its consumer before the first phase. */
	kvr_ring_producer_sync(&s->pong);
	for (uint64_t i = 0; i < count; i++) {
		struct kvr_ring_rec rec;
		void *q;
		int rc;

		while ((rc = kvr_ring_peek(&s->ping, &rec)) == -EAGAIN)
			kvr_clock_relax();
		if (rc < 0)
			return child_fail(s->ctl, rc, i, 0, 0);
		if (rec.len != bytes)
			return child_fail(s->ctl, -EBADMSG, i, bytes, rec.len);
		rc = kvr_ring_claim(&s->pong, 1, rec.len, &q);
		if (rc < 0)
			return child_fail(s->ctl, rc, i, 0, 0);
		copy_payload(q, rec.data, bytes);
		kvr_ring_commit(&s->pong);
		kvr_ring_release(&s->ping);
	}
	return 0;
}

/* Drains @count records, checks seq, copies each payload out. */
static int child_tput(struct bench_ring_side *s, uint64_t count, uint32_t bytes,
		      uint32_t batch)
{
	uint32_t in_batch = 0;

	for (uint64_t i = 0; i < count; i++) {
		struct kvr_ring_rec rec;
		int rc;

		while ((rc = kvr_ring_peek(&s->bulk, &rec)) == -EAGAIN) {
			kvr_ring_release(&s->bulk);
			in_batch = 0;
			kvr_clock_relax();
		}
		if (rc < 0)
			return child_fail(s->ctl, rc, i, 0, 0);
		if (rec.len != bytes)
			return child_fail(s->ctl, -EBADMSG, i, bytes, rec.len);
		copy_payload(s->sink, rec.data, bytes);
		if (load_word(s->sink) != i)
			return child_fail(s->ctl, -EBADMSG, i, i,
					  load_word(s->sink));
		if (load_word(s->sink + bytes - 8) != ~i)
			return child_fail(s->ctl, -EBADMSG, i, ~i,
					  load_word(s->sink + bytes - 8));
		if (++in_batch == batch) {
			kvr_ring_release(&s->bulk);
			in_batch = 0;
		}
	}
	kvr_ring_release(&s->bulk);
	return 0;
}

int bench_ring_child_main(struct bench_ring_side *s,
			  const struct bench_ring_opts *o)
{
	struct bench_ring_ctl_shm *c = s->ctl;
	uint32_t last = 0, cmd;

	/* Die with the parent: nobody else would stop our spinning. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (bench_pin_cpu(o->cpu_c) < 0)
		return BENCH_EXIT_ERR;
	for (;;) {
		/* A-BR1: the parameters were written before cmd; pairs
		 * with R-BR1 in bench_ring_phase_start(). */
		while ((cmd = atomic_load_explicit(
			    &c->cmd, memory_order_acquire)) == last)
			kvr_clock_relax();
		last = cmd;
		switch (c->kind) {
		case PH_FLOOR:
			child_floor(c, c->count);
			break;
		case PH_FLOOR2:
		case PH_PROBE:
			child_floor2(c, c->count, c->kind == PH_FLOOR2);
			break;
		case PH_RTT:
			child_rtt(s, c->count, c->bytes);
			break;
		case PH_TPUT:
			child_tput(s, c->count, c->bytes, o->batch);
			c->t_end_ns = kvr_clock_now_ns();
			break;
		default:
			break;
		}
		/* R-BR2: results are written before ack; pairs with A-BR2
		 * in phase_wait(). */
		atomic_store_explicit(&c->ack, cmd, memory_order_release);
		if (c->kind == PH_EXIT || c->err)
			return c->err ? BENCH_EXIT_ERR : BENCH_EXIT_OK;
	}
}

/* ---- parent (A, producer CPU) ----------------------------------------- */

/* Starts a phase in the child; parameters first, then cmd (release). */
uint32_t bench_ring_phase_start(struct bench_ring_side *s, uint32_t kind,
				uint32_t bytes, uint64_t count)
{
	struct bench_ring_ctl_shm *c = s->ctl;
	/* Relaxed: only the parent writes cmd. */
	uint32_t cmd = atomic_load_explicit(&c->cmd, memory_order_relaxed) + 1;

	c->kind = kind;
	c->bytes = bytes;
	c->count = count;
	/* R-BR1: pairs with A-BR1 in bench_ring_child_main(). */
	atomic_store_explicit(&c->cmd, cmd, memory_order_release);
	return cmd;
}

/* Waits for the child to finish phase @cmd; 0, or -1 if it failed. */
static int phase_wait(struct bench_ring_side *s, uint32_t cmd)
{
	struct bench_ring_ctl_shm *c = s->ctl;
	unsigned spins = 0;

	/* A-BR2: pairs with R-BR2 in bench_ring_child_main() (then err and the
	 * results are read). */
	while (atomic_load_explicit(&c->ack, memory_order_acquire) != cmd) {
		if (child_gone(s, &spins))
			return -1;
		kvr_clock_relax();
	}
	if (c->err) {
		fprintf(stderr,
			"kvring-bench: ring: consumer: %s at record %" PRIu64
			": expected %#" PRIx64 ", found %#" PRIx64 "\n",
			strerror(-c->err), c->bad_seq, c->bad_expected,
			c->bad_found);
		return -1;
	}
	return 0;
}

/* Floor: @warm + @n bounces of one cache line; samples in ticks. */
int bench_ring_floor(struct bench_ring_side *s, uint64_t warm, uint64_t n,
		     uint64_t *out)
{
	struct bench_ring_ctl_shm *c = s->ctl;
	uint32_t cmd;
	unsigned spins = 0;

	/* Relaxed: published to the child by R-BR1 of the phase start. */
	atomic_store_explicit(&c->line, 0, memory_order_relaxed);
	cmd = bench_ring_phase_start(s, PH_FLOOR, 8, warm + n);
	for (uint64_t i = 0; i < warm + n; i++) {
		uint64_t t0 = bench_ticks();

		/* R-BR3: pairs with A-BR3 in child_floor(). */
		atomic_store_explicit(&c->line, 2 * i + 1,
				      memory_order_release);
		/* A-BR4: pairs with R-BR4 in child_floor(). */
		while (atomic_load_explicit(&c->line, memory_order_acquire) !=
		       2 * i + 2) {
			kvr_clock_relax();
			if (child_gone(s, &spins))
				return -1;
		}
		if (i >= warm)
			out[i - warm] = bench_ticks() - t0;
	}
	return phase_wait(s, cmd);
}

/*
 * A flag line each way, the child echoing flag_a's value into flag_b:
 * with @msg a message line is written before the flag and checked in the
 * echo (the two-line floor), without it nothing else moves (the placement
 * probe, the pattern of every scenario's probe peer).
 */
static int flag_rtt(struct bench_ring_side *s, uint32_t kind, bool msg,
		    uint64_t warm, uint64_t n, uint64_t *out)
{
	struct bench_ring_ctl_shm *c = s->ctl;
	uint32_t cmd;
	unsigned spins = 0;

	/* Relaxed: published to the child by R-BR1 of the phase start. */
	atomic_store_explicit(&c->flag_a, 0, memory_order_relaxed);
	atomic_store_explicit(&c->flag_b, 0, memory_order_relaxed);
	cmd = bench_ring_phase_start(s, kind, msg ? 64 : 8, warm + n);
	for (uint64_t i = 1; i <= warm + n; i++) {
		uint64_t t0 = bench_ticks();

		for (int k = 0; msg && k < 8; k++)
			/* Relaxed: published by R-BR5. */
			atomic_store_explicit(&c->msg_a[k], i + (uint64_t)k,
					      memory_order_relaxed);
		/* R-BR5: pairs with A-BR5 in child_floor2(). */
		atomic_store_explicit(&c->flag_a, i, memory_order_release);
		/* A-BR6: pairs with R-BR6 in child_floor2(). */
		while (atomic_load_explicit(&c->flag_b, memory_order_acquire) !=
		       i) {
			kvr_clock_relax();
			if (child_gone(s, &spins))
				return -1;
		}
		/* Relaxed: ordered after R-BR6 by A-BR6. */
		if (msg && atomic_load_explicit(
			       &c->msg_b[7], memory_order_relaxed) != i + 7) {
			fprintf(stderr, "kvring-bench: ring: bad floor echo\n");
			return -1;
		}
		if (i > warm)
			out[i - 1 - warm] = bench_ticks() - t0;
	}
	return phase_wait(s, cmd);
}

/* Two-line floor: message line then flag, echoed back the same way. */
int bench_ring_floor2(struct bench_ring_side *s, uint64_t warm, uint64_t n,
		      uint64_t *out)
{
	return flag_rtt(s, PH_FLOOR2, true, warm, n, out);
}

/* Probe: @warm + @n round trips of one line each way; samples in ticks. */
int bench_ring_probe(struct bench_ring_side *s, uint64_t warm, uint64_t n,
		     uint64_t *out)
{
	return flag_rtt(s, PH_PROBE, false, warm, n, out);
}

/* Ring round trip: claim, fill, commit; wait for the echo; check it. */
int bench_ring_rtt(struct bench_ring_side *s, uint32_t bytes, uint64_t warm,
		   uint64_t n, uint64_t *out)
{
	uint32_t cmd;
	unsigned spins = 0;

	/* The child attached its consumer before it answered a phase. */
	kvr_ring_producer_sync(&s->ping);
	cmd = bench_ring_phase_start(s, PH_RTT, bytes, warm + n);

	for (uint64_t i = 0; i < warm + n; i++) {
		struct kvr_ring_rec rec;
		uint64_t t0 = bench_ticks();
		void *p;
		int rc = kvr_ring_claim(&s->ping, 1, bytes, &p);

		if (rc < 0) {
			fprintf(stderr, "kvring-bench: ring: claim: %s\n",
				strerror(-rc));
			return -1;
		}
		copy_payload(p, s->src, bytes);
		stamp(p, bytes, i);
		kvr_ring_commit(&s->ping);
		while ((rc = kvr_ring_peek(&s->pong, &rec)) == -EAGAIN) {
			kvr_clock_relax();
			if (child_gone(s, &spins))
				return -1;
		}
		if (rc < 0 || rec.len != bytes || load_word(rec.data) != i ||
		    load_word((const unsigned char *)rec.data + bytes - 8) !=
			~i) {
			fprintf(
			    stderr,
			    "kvring-bench: ring: bad echo of record %" PRIu64
			    " (rc %d, len %u, seq %#" PRIx64 ")\n",
			    i, rc, rc < 0 ? 0 : rec.len,
			    rc < 0 ? 0 : load_word(rec.data));
			return -1;
		}
		kvr_ring_release(&s->pong);
		if (i >= warm)
			out[i - warm] = bench_ticks() - t0;
	}
	return phase_wait(s, cmd);
}

/* One-way throughput; *ns gets first claim to last record consumed. */
int bench_ring_tput(struct bench_ring_side *s, uint32_t bytes, uint64_t n,
		    uint32_t batch, uint64_t *ns)
{
	uint64_t t0;
	uint32_t cmd, in_batch = 0;
	unsigned spins = 0;

	kvr_ring_producer_sync(&s->bulk);
	t0 = kvr_clock_now_ns();
	cmd = bench_ring_phase_start(s, PH_TPUT, bytes, n);

	for (uint64_t i = 0; i < n;) {
		void *p;
		int rc = kvr_ring_claim(&s->bulk, 1, bytes, &p);

		if (rc == -EAGAIN) {
			kvr_ring_commit(&s->bulk);
			in_batch = 0;
			kvr_clock_relax();
			if (child_gone(s, &spins))
				return -1;
			continue;
		}
		if (rc < 0) {
			fprintf(stderr, "kvring-bench: ring: claim: %s\n",
				strerror(-rc));
			return -1;
		}
		copy_payload(p, s->src, bytes);
		stamp(p, bytes, i);
		i++;
		if (++in_batch == batch) {
			kvr_ring_commit(&s->bulk);
			in_batch = 0;
		}
	}
	kvr_ring_commit(&s->bulk);
	if (phase_wait(s, cmd) < 0)
		return -1;
	*ns = s->ctl->t_end_ns - t0;
	return 0;
}
