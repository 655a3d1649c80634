/* SPDX-License-Identifier: MIT */
/*
 * bench_l2_redis.c - the l2 scenario's Redis side: private redis-server
 * processes (one, or a 3-master cluster) on free loopback ports, and the
 * plain pipelined client it compares kvringd's L2 tier with (written here,
 * no hiredis on purpose, see docs/l2.md): one pipeline per batch and node,
 * every node's written before any reply is read, keys routed by hash slot
 * from CLUSTER SLOTS on a cluster: the shape of kvringd's lanes.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kvring/l2.h>

#include "bench_l2.h"

/* ---- a private redis-server ---- */

static bool port_free(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

static int tcp_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -ECONNREFUSED;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* A redis-server on the first free loopback port from @from (a cluster
 * node needs its bus port, +10000, free too), files in a private dir. */
int bench_l2_redis_start(struct redis *r, int from, bool cluster)
{
	char port[16];

	snprintf(r->dir, sizeof(r->dir), "/tmp/kvrb-redis-XXXXXX");
	if (!mkdtemp(r->dir))
		return -errno;
	for (r->port = from;
	     !port_free(r->port) || (cluster && !port_free(r->port + 10000));)
		r->port++;
	snprintf(port, sizeof(port), "%d", r->port);
	r->pid = fork();
	if (r->pid == 0) {
		int dn = open("/dev/null", O_WRONLY);

		dup2(dn, 1);
		execlp("redis-server", "redis-server", "--port", port, "--bind",
		       "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
		       r->dir, "--protected-mode", "no", "--cluster-enabled",
		       cluster ? "yes" : "no", "--cluster-config-file",
		       "nodes.conf", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		int fd = tcp_connect(r->port);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		sleep_ms(10);
	}
	fprintf(stderr, "kvring-bench l2: redis-server did not start (is "
			"redis-server installed? scripts/setup.sh deps)\n");
	return -ENOENT;
}

void bench_l2_redis_stop(struct redis *r)
{
	char cmd[128];
	int st;

	if (!r->dir[0])
		return; /* never started */
	if (r->pid > 0) {
		kill(r->pid, SIGTERM);
		waitpid(r->pid, &st, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "kvring-bench l2: could not remove %s\n",
			r->dir);
}

/* ---- the plain pipelined client ---- */

static int plain_fill(struct plain *p)
{
	ssize_t n;

	if (p->r == p->w)
		p->r = p->w = 0;
	if (p->w == p->cap) {
		memmove(p->buf, p->buf + p->r, p->w - p->r);
		p->w -= p->r;
		p->r = 0;
	}
	n = recv(p->fd, p->buf + p->w, p->cap - p->w, 0);
	if (n <= 0)
		return -EIO;
	p->w += (size_t)n;
	return 0;
}

static int plain_line(struct plain *p, struct kvr_l2_rline *l)
{
	for (;;) {
		long u = kvr_l2_resp_line(p->buf + p->r, p->w - p->r, l);

		if (u > 0) {
			p->r += (size_t)u;
			return 0;
		}
		if (u != -EAGAIN || plain_fill(p) < 0)
			return -EIO;
	}
}

static int plain_read(struct plain *p, char *dst, size_t n)
{
	size_t take = p->w - p->r < n ? p->w - p->r : n;

	memcpy(dst, p->buf + p->r, take);
	p->r += take;
	for (size_t got = take; got < n;) {
		ssize_t k = recv(p->fd, dst + got, n - got, MSG_WAITALL);

		if (k <= 0)
			return -EIO;
		got += (size_t)k;
	}
	return 0;
}

static int write_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt > 0) {
		ssize_t w = writev(fd, iov, cnt > 512 ? 512 : cnt);

		if (w < 0)
			return -errno;
		while (cnt > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

enum plain_op { P_EXISTS, P_SET, P_GET };

/*
 * Write one node's share of a batch, the keys idx[0..m), as one pipeline:
 * EXISTS, SET of value i (at @val + i * @bytes) or GET. @iov and @pre are
 * the share's scratch (3 iovecs and one prefix per key).
 */
static int share_send(struct plain *p, int op, char (*keys)[KVR_L2_KEY_MAX],
		      const uint32_t *idx, uint32_t m, const char *val,
		      size_t bytes, struct iovec *iov, char (*pre)[192])
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < m; i++) {
		const char *key = keys[idx[i]];
		size_t kl = strlen(key);
		int len =
		    op == P_EXISTS
			? snprintf(pre[i], sizeof(pre[i]),
				   "*2\r\n$6\r\nEXISTS\r\n$%zu\r\n%s\r\n", kl,
				   key)
		    : op == P_GET
			? snprintf(pre[i], sizeof(pre[i]),
				   "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", kl, key)
			: snprintf(pre[i], sizeof(pre[i]),
				   "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu"
				   "\r\n",
				   kl, key, bytes);

		iov[k++] = (struct iovec){pre[i], (size_t)len};
		if (op == P_SET) {
			iov[k++] = (struct iovec){
			    (void *)(val + (size_t)idx[i] * bytes), bytes};
			iov[k++] = (struct iovec){(void *)"\r\n", 2};
		}
	}
	return write_all(p->fd, iov, (int)k);
}

/* Read the replies of a share share_send() wrote; a GET's value i into
 * @dst + i * @bytes. */
static int share_read(struct plain *p, int op, const uint32_t *idx, uint32_t m,
		      char *dst, size_t bytes)
{
	struct kvr_l2_rline l;
	char crlf[2];

	for (uint32_t i = 0; i < m; i++) {
		if (plain_line(p, &l) < 0)
			return -EIO;
		if (op == P_SET && l.type != '+')
			return -EIO;
		if (op == P_GET &&
		    (l.type != '$' || (size_t)l.num != bytes ||
		     plain_read(p, dst + (size_t)idx[i] * bytes, bytes) < 0 ||
		     plain_read(p, crlf, 2) < 0))
			return -EIO;
	}
	return 0;
}

static int plain_cmd(struct plain *p, const char *cmd)
{
	struct iovec iov = {(void *)cmd, strlen(cmd)};
	struct kvr_l2_rline l;

	if (write_all(p->fd, &iov, 1) < 0 || plain_line(p, &l) < 0)
		return -EIO;
	return 0;
}

/* A complete reply into p's buffer; its span in *span. */
static int plain_reply(struct plain *p, long *span)
{
	for (;;) {
		*span = kvr_l2_resp_span(p->buf + p->r, p->w - p->r);
		if (*span > 0)
			return 0;
		if (*span != -EAGAIN || plain_fill(p) < 0)
			return -EIO;
	}
}

static int pclient_slots(struct pclient *pc, const struct redis *rd)
{
	static const char q[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
	struct kvr_l2_range r[16];
	struct iovec iov = {(void *)q, sizeof(q) - 1};
	struct plain *p = &pc->n[0];
	long span;
	int nr;

	if (write_all(p->fd, &iov, 1) < 0 || plain_reply(p, &span) < 0)
		return -EIO;
	nr = kvr_l2_resp_slots(p->buf + p->r, (size_t)span, r, 16);
	p->r += (size_t)span;
	if (nr <= 0)
		return -EBADMSG;
	for (int k = 0; k < nr; k++)
		for (uint32_t i = 0; i < pc->nn; i++)
			if (r[k].port == rd[i].port)
				for (uint32_t sl = r[k].lo; sl <= r[k].hi; sl++)
					pc->slot_node[sl] = (uint8_t)i;
	return 0;
}

int bench_l2_pclient_open(struct pclient *pc, const struct redis *rd,
			  uint32_t nn, bool cluster, uint32_t max_keys)
{
	pc->nn = nn;
	pc->cluster = cluster;
	pc->idx = calloc(max_keys, sizeof(*pc->idx));
	for (uint32_t i = 0; i < nn; i++) {
		pc->n[i].fd = tcp_connect(rd[i].port);
		pc->n[i].cap = 1u << 20;
		pc->n[i].buf = malloc(pc->n[i].cap);
		if (pc->n[i].fd < 0 || !pc->n[i].buf || !pc->idx)
			return -EIO;
	}
	return cluster ? pclient_slots(pc, rd) : 0;
}

void bench_l2_pclient_close(struct pclient *pc)
{
	for (uint32_t i = 0; i < pc->nn; i++) {
		if (pc->n[i].fd >= 0)
			close(pc->n[i].fd);
		free(pc->n[i].buf);
	}
	free(pc->idx);
	memset(pc, 0, sizeof(*pc));
}

/* Keys of node @node among keys[0..n) into @idx; their count. */
static uint32_t pclient_share(struct pclient *pc, char (*keys)[KVR_L2_KEY_MAX],
			      uint32_t n, uint32_t node, uint32_t *idx)
{
	uint32_t m = 0;

	for (uint32_t i = 0; i < n; i++)
		if (!pc->cluster ||
		    pc->slot_node[kvr_l2_slot(keys[i], strlen(keys[i]))] ==
			node)
			idx[m++] = i;
	return m;
}

/*
 * One batch of @op over keys[0..n), kvringd's lane shape: split by node,
 * every node's share written as one pipeline before any reply is read,
 * then each node's replies in order.
 */
static int pclient_batch(struct pclient *pc, int op,
			 char (*keys)[KVR_L2_KEY_MAX], uint32_t n,
			 const char *val, char *dst, size_t bytes)
{
	struct iovec *iov = calloc((size_t)n * 3, sizeof(*iov));
	char(*pre)[192] = calloc(n, sizeof(*pre));
	uint32_t at[CLUSTER_N], m[CLUSTER_N], used = 0;
	int rc = iov && pre ? 0 : -ENOMEM;

	for (uint32_t i = 0; rc == 0 && i < pc->nn; i++) {
		at[i] = used;
		m[i] = pclient_share(pc, keys, n, i, pc->idx + used);
		if (m[i])
			rc = share_send(&pc->n[i], op, keys, pc->idx + used,
					m[i], val, bytes, iov + 3 * used,
					pre + used);
		used += m[i];
	}
	for (uint32_t i = 0; rc == 0 && i < pc->nn; i++)
		rc = share_read(&pc->n[i], op, pc->idx + at[i], m[i], dst,
				bytes);
	free(iov);
	free(pre);
	return rc < 0 ? -EIO : 0;
}

int bench_l2_pclient_put(struct pclient *pc, char (*keys)[KVR_L2_KEY_MAX],
			 uint32_t n, const char *val, size_t bytes)
{
	if (pclient_batch(pc, P_EXISTS, keys, n, NULL, NULL, bytes) < 0)
		return -EIO;
	return pclient_batch(pc, P_SET, keys, n, val, NULL, bytes);
}

int bench_l2_pclient_get(struct pclient *pc, char (*keys)[KVR_L2_KEY_MAX],
			 uint32_t n, char *dst, size_t bytes)
{
	return pclient_batch(pc, P_GET, keys, n, NULL, dst, bytes);
}

void bench_l2_pclient_flush(struct pclient *pc)
{
	for (uint32_t i = 0; i < pc->nn; i++)
		plain_cmd(&pc->n[i], "*1\r\n$8\r\nFLUSHALL\r\n");
}

/* Whether every node answers CLUSTER INFO with cluster_state:ok. */
static bool cluster_ok(const struct redis *rd)
{
	static const char q[] = "*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n";

	for (int i = 0; i < CLUSTER_N; i++) {
		struct plain p = {.fd = tcp_connect(rd[i].port),
				  .cap = 1u << 16};
		struct iovec iov = {(void *)q, sizeof(q) - 1};
		long span = 0;
		bool ok;

		p.buf = malloc(p.cap);
		ok = p.fd >= 0 && p.buf && write_all(p.fd, &iov, 1) == 0 &&
		     plain_reply(&p, &span) == 0 &&
		     memmem(p.buf, (size_t)span, "cluster_state:ok", 16);
		if (p.fd >= 0)
			close(p.fd);
		free(p.buf);
		if (!ok)
			return false;
	}
	return true;
}

/* Three masters on free ports, slots spread by redis-cli --cluster
 * create, every node agreeing that the cluster is ok. */
int bench_l2_cluster_start(struct redis *rd)
{
	char cmd[256];
	int at, from = 27000 + (int)(getpid() % 2000);

	for (int i = 0; i < CLUSTER_N; i++) {
		if (bench_l2_redis_start(&rd[i], from, true) < 0)
			return -ENOENT;
		from = rd[i].port + 1;
	}
	at = snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
	for (int i = 0; i < CLUSTER_N; i++)
		at += snprintf(cmd + at, sizeof(cmd) - (size_t)at,
			       " 127.0.0.1:%d", rd[i].port);
	snprintf(cmd + at, sizeof(cmd) - (size_t)at,
		 " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1");
	if (system(cmd) != 0) {
		fprintf(stderr, "kvring-bench l2: redis-cli --cluster create "
				"failed (is redis-tools installed? "
				"scripts/setup.sh deps)\n");
		return -EIO;
	}
	for (int i = 0; i < 1000; i++) {
		if (cluster_ok(rd))
			return 0;
		sleep_ms(10);
	}
	fprintf(stderr,
		"kvring-bench l2: the cluster was not ok within 10 s\n");
	return -ETIMEDOUT;
}
