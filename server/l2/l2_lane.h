/* SPDX-License-Identifier: MIT */
/*
 * l2_lane.h - private to server/l2/: what the files of an L2 lane share.
 * A lane is one thread with its own connections to Redis (one node, or
 * every master of a Redis Cluster), its own copy of the cluster slot map
 * and a job queue the event loop fills (docs/l2.md, "Design"):
 *
 *   l2_lane.c   the thread, its queue, create/submit/destroy
 *   l2_conn.c   nodes, sockets, AUTH, the reply reader, the pipeline writer
 *   l2_route.c  the cluster slot map and redirects
 *   l2_batch.c  one batch of commands: build, send per node, read replies
 *   l2_up.c     upload jobs (write-behind)
 *   l2_down.c   probe and load jobs (read-through)
 *
 * Calls point one way: lane -> up/down -> batch -> route -> conn.
 */
#ifndef KVR_SERVER_L2_LANE_H
#define KVR_SERVER_L2_LANE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <kvring/l2.h>
#include <kvring/sum.h>

#define RB_INIT	       (256u << 10)
#define RB_MAX	       (16u << 20)
#define ROUNDS_MAX     5
#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 5000u
/* Payload bytes are hashed in pieces this large: each piece is hashed
 * while it is still in cache, and between pieces the socket is fed. */
#define PIECE (256u << 10)
/* A value uploaded under its temporary key lives this long (ms) unless
 * the publish script behind it makes it the real key's value. */
#define TMP_TTL_MS "60000"

/*
 * The publish script of an upload through the temporary key (docs/l2.md,
 * "The upload sequence"): KEYS[1] the temporary key, KEYS[2] K, ARGV[1]
 * the real header, ARGV[2] the whole value's length. It publishes only a
 * temporary value of exactly that length, which only a SET that went
 * through can have left: a refused SET leaves no temporary key (or
 * another length), and then nothing is written, nothing is created and
 * the script answers 0. Atomic, as every script: no reader sees K half
 * made. 3.4 us of Redis CPU per call (warm, pipelined; measured with
 * INFO commandstats on 7.0), beside ~1 ms per 2 MiB chunk.
 */
#define PUBLISH_LUA                                                            \
	"local n=redis.call('STRLEN',KEYS[1]) "                                \
	"if n~=tonumber(ARGV[2]) then "                                        \
	"if n>0 then redis.call('DEL',KEYS[1]) end return 0 end "              \
	"redis.call('SETRANGE',KEYS[1],0,ARGV[1]) "                            \
	"redis.call('RENAME',KEYS[1],KEYS[2]) "                                \
	"redis.call('PERSIST',KEYS[2]) return 1"

enum cmd_op { C_EXISTS, C_SET, C_GETHDR, C_GET, C_DEL, C_SLOTS };

/* One command of a batch. Lives in the lane's scratch array. */
struct cmd {
	int op;
	struct kvr_l2_item *it;
	const char *key;
	size_t klen;
	struct kvr_l2_hdr hdr; /* SET: sent; GET/GETHDR: received */
	uint64_t sum;	       /* GET: XXH3-64 of what landed in the slot */
	size_t pre_len;
	int node; /* ASK target, else -1 */
	bool asking;
	bool done;
	bool hdr_ready; /* SET: hdr made (hashed once, even if resent) */
	bool tmp;	/* SET: through the temporary key (upload_tmp) */
	bool del_tmp;	/* SET: resent plain, DEL the temporary key after */
	int res;	/* enum kvr_l2_res once done */
	int64_t ival;
	size_t tklen, post_len, post2_len;
	char pre[224]; /* cmd_init clears everything before it */
	char tkey[KVR_L2_KEY_MAX + 24];
	char post[1024];
	char post2[64];
};

/* Buffered reader of one connection. */
struct rbuf {
	char *b;
	size_t cap, r, w;
};

struct node {
	int id; /* in the tier's node table */
	struct kvr_l2_addr a;
	int fd;
	bool was_up;
	uint64_t retry_ns;
	uint32_t backoff_ms;
	struct rbuf rb;
	struct cmd **q; /* this round's share of the batch */
	uint32_t nq;
};

struct kvr_l2_lane {
	struct kvr_l2 *l2;
	unsigned idx;
	pthread_t th;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct kvr_l2_job *head, *tail;
	bool stop;
	uint8_t *pool;
	struct node nodes[KVR_L2_MAX_NODES];
	uint32_t nnodes;
	int16_t slot_node[KVR_L2_SLOTS]; /* lane node index, -1 unknown */
	bool need_refresh;
	uint64_t refreshed_ns;
	struct cmd *cmds;
	uint32_t cmd_cap;
	char *keys; /* KVR_L2_KEY_MAX per command */
	struct iovec *iov;
	uint32_t iov_cap;
	struct kvr_sum_state *sum; /* payload sums in pieces */
	uint64_t tag;		   /* this lane's part of temporary keys */
	bool no_eval;		   /* a node refused EVAL: plain SETs only */
	bool told_refused;	   /* a refused command was logged */
};

/*
 * The unsent part of a pipeline: iov[at..k). Entries before @at are
 * gone; the one at @at may be partly sent (its base and length moved).
 */
struct outq {
	struct iovec *iov;
	uint32_t at, k;
};

/* Independent counters for the inspector: relaxed. */
static inline void count_err(struct kvr_l2_lane *ln, int kind)
{
	atomic_fetch_add_explicit(&ln->l2->st.errors[kind], 1,
				  memory_order_relaxed);
}

static inline void bump(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* ==== l2_conn.c ==== */

/* Connected, or -EAGAIN while the node's backoff runs. */
int kvr__l2_ensure_conn(struct kvr_l2_lane *ln, struct node *n);

int kvr__l2_lane_node(struct kvr_l2_lane *ln, const struct kvr_l2_addr *a);

void kvr__l2_node_down(struct kvr_l2_lane *ln, struct node *n, const char *why);

/* Send the whole queue; blocks (bounded by SO_SNDTIMEO). */
int kvr__l2_outq_flush(int fd, struct outq *q);

/* Send what the socket takes now, never waiting. <0: broken. */
int kvr__l2_outq_pump(int fd, struct outq *q);

int kvr__l2_rb_fill(struct node *n);

/* The next reply line; its text stays valid until the next read. */
int kvr__l2_rb_line(struct node *n, struct kvr_l2_rline *l);

/* Exactly @len bytes into @dst (NULL: discard), buffered bytes first,
 * then straight from the socket: a payload lands in its pool slot. */
int kvr__l2_rb_read(struct node *n, void *dst, size_t len);

/*
 * Exactly @len payload bytes into the pool at @dst, as rb_read(), hashed
 * piece by piece as they land: each piece is hashed while it is in cache
 * and while Redis is already sending the next one. *sum: XXH3-64 of the
 * bytes as they sit in the slot.
 */
int kvr__l2_rb_read_sum(struct kvr_l2_lane *ln, struct node *n, uint8_t *dst,
			size_t len, uint64_t *sum);

/* A whole reply of any shape, skipped. */
int kvr__l2_rb_skip_rest(struct node *n, const struct kvr_l2_rline *l);

int kvr__l2_write_all(int fd, struct iovec *iov, int cnt);

/* ==== l2_route.c ==== */

/*
 * A chunk whose publish script was not run (TRYAGAIN while its slot
 * migrates, or a node that refuses scripts) is sent again, in the next
 * round, as one plain SET of K with the header its first send computed,
 * to the node that answered (ASKING again if it was asked to), followed
 * by a DEL of the temporary key its first SET left there.
 */
void kvr__l2_cmd_resend_plain(struct cmd *c, bool ask);

int kvr__l2_pick_node(struct kvr_l2_lane *ln, struct cmd *c);

/* CLUSTER SLOTS from the first node that answers; rebuilds the map. */
void kvr__l2_refresh_slots(struct kvr_l2_lane *ln);

/* ==== l2_batch.c ==== */

/* A command for item @it of job @j. */
void kvr__l2_cmd_init(struct kvr_l2_lane *ln, struct cmd *c, int op,
		      const struct kvr_l2_job *j, struct kvr_l2_item *it,
		      uint32_t i);

/* Room for @n commands (and their iovecs and per-node queues). */
int kvr__l2_reserve(struct kvr_l2_lane *ln, uint32_t n);

/*
 * Run cmds[0..nc) to completion: each ends done with a result. Rounds
 * repeat only for redirected commands.
 */
void kvr__l2_run_batch(struct kvr_l2_lane *ln, struct cmd *cmds, uint32_t nc);

/* ==== l2_up.c ==== */

void kvr__l2_run_put(struct kvr_l2_lane *ln, struct kvr_l2_job *j);

/* ==== l2_down.c ==== */

void kvr__l2_run_load(struct kvr_l2_lane *ln, struct kvr_l2_job *j);

void kvr__l2_run_probe(struct kvr_l2_lane *ln, struct kvr_l2_job *j);

#endif /* KVR_SERVER_L2_LANE_H */
