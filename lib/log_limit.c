/* SPDX-License-Identifier: MIT */
/*
 * The rate limit of the log lines a peer can cause (<kvring/log.h>,
 * kvr_log_peer). A flood of bad handshakes once wrote about 2,500 lines a
 * second; here each (peer, call site) pair has a token bucket (a burst,
 * then one line per interval) and all peers together have another, so a
 * flood writes a bounded number of lines whatever its rate, and a summary
 * line counts what it did not write.
 *
 * The pairs live in a small open-addressed table: a pair not seen for a
 * while is forgotten (after its summary), and when the table is full the
 * quietest pair of the probe window makes room, so the table never grows.
 * A suppressed line is never formatted: it costs a lock and a lookup.
 *
 * What it does not do: limit lines nobody else causes (start-up, shutdown,
 * the server's own faults), which stay plain kvr_log().
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <kvring/log.h>

#define SLOTS  256u /* pairs remembered */
#define PROBES 8u   /* slots looked at per lookup */
/* A pair whose bucket is full and has nothing to report is forgotten
 * after this long without a line. */
#define FORGET_NS (60ull * 1000000000ull)

struct pair {
	long peer;
	const char *site; /* the call site's format string; NULL: free */
	uint64_t last_ns; /* last refill */
	uint64_t seen_ns; /* last line, written or not */
	uint32_t tokens;
	int level;		 /* of the suppressed lines */
	unsigned long long held; /* lines not written since the last
				    summary */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pair pairs[SLOTS];
/* The bucket of all peers together, and what it did not write. */
static uint32_t all_tokens = KVR_LOG_PEERS_BURST;
static uint64_t all_last_ns;
static unsigned long long all_held, total_held;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Add the tokens earned since *last (one per @per_ns), up to @cap. */
static void refill(uint32_t *tokens, uint64_t *last, uint64_t per_ns,
		   uint32_t cap, uint64_t now)
{
	uint64_t earned;

	if (*tokens >= cap || now < *last) {
		*last = now;
		return;
	}
	earned = (now - *last) / per_ns;
	if (earned == 0)
		return;
	*tokens = earned >= cap - *tokens ? cap : *tokens + (uint32_t)earned;
	*last += earned * per_ns;
	if (*tokens == cap)
		*last = now;
}

static uint64_t hash(long peer, const char *site)
{
	uint64_t h = (uint64_t)peer * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)(uintptr_t)site * 0xc2b2ae3d27d4eb4full;

	return h ^ h >> 29;
}

/* Write the summary of @p's held lines (lock held). */
static void summarize(struct pair *p)
{
	if (!p->held)
		return;
	if (p->peer < 0) /* a kind of event, not a process */
		kvr_log(p->level,
			"suppressed %llu similar lines (log rate limit; they "
			"began \"%.40s\")",
			p->held, p->site);
	else
		kvr_log(p->level,
			"suppressed %llu similar lines from pid %ld (log rate "
			"limit; they began \"%.40s\")",
			p->held, p->peer, p->site);
	p->held = 0;
}

/* The pair of (@peer, @site), made if new (lock held). */
static struct pair *find(long peer, const char *site, uint64_t now)
{
	uint64_t h = hash(peer, site);
	struct pair *victim = NULL;

	for (uint32_t i = 0; i < PROBES; i++) {
		struct pair *p = &pairs[(h + i) % SLOTS];

		if (p->site == site && p->peer == peer)
			return p;
		if (!p->site) {
			if (!victim || victim->site)
				victim = p;
		} else if (!victim ||
			   (victim->site && p->seen_ns < victim->seen_ns)) {
			victim = p;
		}
	}
	if (victim->site)
		summarize(victim);
	victim->peer = peer;
	victim->site = site;
	victim->last_ns = victim->seen_ns = now;
	victim->tokens = KVR_LOG_PEER_BURST;
	victim->held = 0;
	return victim;
}

void kvr_log_peer(int level, long peer, const char *fmt, ...)
{
	const uint64_t per = KVR_LOG_PEER_MS * 1000000ull;
	uint64_t now;
	struct pair *p;
	bool write;
	va_list ap;

	if (!kvr_log_enabled(level))
		return;
	now = now_ns();
	pthread_mutex_lock(&lock);
	refill(&all_tokens, &all_last_ns, 1000000000ull / KVR_LOG_PEERS_PER_S,
	       KVR_LOG_PEERS_BURST, now);
	p = find(peer, fmt, now);
	p->seen_ns = now;
	refill(&p->tokens, &p->last_ns, per, KVR_LOG_PEER_BURST, now);
	write = p->tokens > 0 && all_tokens > 0;
	if (write) {
		p->tokens--;
		all_tokens--;
		summarize(p);
		if (all_held) {
			kvr_log(KVR_LOG_WARN,
				"suppressed %llu lines from peers (log rate "
				"limit of all peers)",
				all_held);
			all_held = 0;
		}
		va_start(ap, fmt);
		kvr_logv(level, fmt, ap);
		va_end(ap);
	} else if (p->tokens > 0) {
		all_held++; /* the pair may, all peers together may not */
		total_held++;
	} else {
		if (!p->held || level < p->level)
			p->level = level;
		p->held++;
		total_held++;
	}
	pthread_mutex_unlock(&lock);
}

void kvr_log_peer_flush(void)
{
	const uint64_t per = KVR_LOG_PEER_MS * 1000000ull;
	uint64_t now = now_ns();

	pthread_mutex_lock(&lock);
	for (uint32_t i = 0; i < SLOTS; i++) {
		struct pair *p = &pairs[i];

		if (!p->site)
			continue;
		refill(&p->tokens, &p->last_ns, per, KVR_LOG_PEER_BURST, now);
		if (p->held && p->tokens > 0) {
			p->tokens--;
			summarize(p);
		} else if (!p->held && p->tokens == KVR_LOG_PEER_BURST &&
			   now - p->seen_ns >= FORGET_NS) {
			p->site = NULL;
		}
	}
	pthread_mutex_unlock(&lock);
}

unsigned long long kvr_log_peer_suppressed(void)
{
	unsigned long long n;

	pthread_mutex_lock(&lock);
	n = total_held;
	pthread_mutex_unlock(&lock);
	return n;
}
