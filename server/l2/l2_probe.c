/* SPDX-License-Identifier: MIT */
/*
 * l2_probe.c - the start-up probe of the L2 tier (<kvring/l2.h>,
 * kvr_l2_probe): before kvringd says ready, every configured Redis node is
 * connected, authenticated and PINGed, and a cluster's slot map read, so a
 * missing password, a mistyped address or an unresolvable name is said at
 * start with its reason instead of being counted silently at the first
 * commit.
 *
 * Each node is probed by a thread of its own, all at once, and the caller
 * waits for them until one deadline (--l2-io-ms): a black-holed address or
 * a resolver that does not answer costs that deadline once, whatever the
 * number of nodes. A thread still running then is left to finish on its
 * own (it owns its memory and frees it) and its node reads "timeout".
 * The probe uses connections of its own, closed before it returns; the
 * lanes connect later as they always do.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <kvring/l2.h>
#include <kvring/log.h>

/* Bytes of a reply the probe reads: CLUSTER SLOTS of a large cluster. */
#define PROBE_BUF (64u << 10)
/* Ranges of a slot map the probe decodes. */
#define PROBE_RANGES 1024u

/*
 * One node's probe, owned by its thread until the caller takes the
 * result (done) or gives up on it (abandoned, the thread frees it).
 */
struct job {
	pthread_mutex_t lock;
	bool done, abandoned;
	struct kvr_l2_addr a;
	uint32_t io_ms;
	bool cluster; /* read CLUSTER SLOTS too */
	char user[128], pass[256];
	struct kvr_l2_probe_node res;
	struct kvr_l2_range *ranges; /* cluster: the map read */
	int nranges;
	char buf[PROBE_BUF];
};

/* Milliseconds on the monotonic clock: what a node's probe took. */
static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Record a node's outcome: a KVR_L2_PROBE_* state and the sentence behind
 * it (@fmt takes @detail as its one %s; NULL reads as ""). The last call
 * wins, so each step sets the state it knows best. */
static void set_state(struct kvr_l2_probe_node *r, int state, const char *fmt,
		      const char *detail)
{
	r->state = state;
	snprintf(r->detail, sizeof(r->detail), fmt, detail ? detail : "");
}

/*
 * Connect to the job's address within its io_ms; the fd, or <0 with the
 * state set. A Unix path is used as it is; a host name is resolved here,
 * in the probe's own thread, because getaddrinfo() has no timeout of its
 * own: a resolver that never answers costs the caller only its deadline.
 * The connect is non-blocking and polled, so a black-holed address reads
 * "timeout", ECONNREFUSED (or a missing socket file) "refused", and
 * anything else "error" with the kernel's words. The socket is then
 * blocking with SO_RCVTIMEO/SO_SNDTIMEO of io_ms, so every later send and
 * recv is bounded the same way.
 */
static int connect_node(struct job *j)
{
	struct timeval tv = {.tv_sec = j->io_ms / 1000,
			     .tv_usec = (j->io_ms % 1000) * 1000};
	struct kvr_l2_probe_node *r = &j->res;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	const struct sockaddr *sa;
	socklen_t salen, el = sizeof(int);
	struct pollfd pfd;
	int fd, rc, err = 0, one = 1, family;
	char port[8];

	if (j->a.path[0]) {
		strcpy(un.sun_path, j->a.path);
		sa = (const struct sockaddr *)&un;
		salen = sizeof(un);
		family = AF_UNIX;
	} else {
		snprintf(port, sizeof(port), "%u", j->a.port);
		rc = getaddrinfo(j->a.host, port, &hints, &res);
		if (rc != 0) {
			set_state(r, KVR_L2_PROBE_UNRESOLVABLE, "%s",
				  rc == EAI_SYSTEM ? strerror(errno)
						   : gai_strerror(rc));
			return -1;
		}
		sa = res->ai_addr;
		salen = res->ai_addrlen;
		family = res->ai_family;
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		set_state(r, KVR_L2_PROBE_ERROR, "socket: %s", strerror(errno));
		freeaddrinfo(res);
		return -1;
	}
	rc = connect(fd, sa, salen);
	freeaddrinfo(res);
	if (rc < 0 && errno == EINPROGRESS) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		rc = poll(&pfd, 1, (int)j->io_ms);
		if (rc == 0) {
			close(fd);
			set_state(r, KVR_L2_PROBE_TIMEOUT,
				  "no connection within --l2-io-ms%s", NULL);
			return -1;
		}
		if (rc < 0 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		errno = err;
		rc = err ? -1 : 0;
	}
	if (rc < 0) {
		err = errno;
		close(fd);
		set_state(r,
			  err == ECONNREFUSED || err == ENOENT
			      ? KVR_L2_PROBE_REFUSED
			  : err == ETIMEDOUT ? KVR_L2_PROBE_TIMEOUT
					     : KVR_L2_PROBE_ERROR,
			  "connect: %s", strerror(err));
		return -1;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		close(fd);
		set_state(r, KVR_L2_PROBE_ERROR, "fcntl: %s", strerror(errno));
		return -1;
	}
	if (family != AF_UNIX)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/*
 * Send @cmd and read one whole reply into j->buf; its length, or <0 with
 * the state set. "Whole" is kvr_l2_resp_span()'s judgement, the same RESP
 * decoder the lanes use: it answers -EAGAIN while the reply is still
 * incomplete and anything else negative when the bytes cannot be RESP,
 * which is how a probe of a port where something other than Redis listens
 * fails with a sentence instead of waiting for its deadline. A socket
 * timeout (EAGAIN from recv) means the node accepted the connection but
 * never answered.
 */
static long ask(struct job *j, int fd, const char *cmd, size_t len)
{
	size_t have = 0;
	ssize_t n;
	long span;

	while (len) {
		n = send(fd, cmd, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto io;
		cmd += n;
		len -= (size_t)n;
	}
	for (;;) {
		span = kvr_l2_resp_span(j->buf, have);
		if (span >= 0)
			return span;
		if (span != -EAGAIN || have == sizeof(j->buf)) {
			set_state(
			    &j->res, KVR_L2_PROBE_ERROR,
			    "a reply that is not RESP (is it a Redis port?)%s",
			    NULL);
			return -1;
		}
		n = recv(fd, j->buf + have, sizeof(j->buf) - have, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto io;
		have += (size_t)n;
	}
io:
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		set_state(&j->res, KVR_L2_PROBE_TIMEOUT,
			  "no answer within --l2-io-ms%s", NULL);
	else
		set_state(&j->res, KVR_L2_PROBE_ERROR, "connection lost: %s",
			  n < 0 ? strerror(errno) : "closed by the server");
	return -1;
}

/* An error reply in j->buf[0..len): its state by its first word. Redis
 * answers NOAUTH to a command sent without the password it requires and
 * WRONGPASS (older servers: "invalid password") to an AUTH it refuses;
 * every other error is kept word for word for the log line. */
static int error_state(struct job *j, long len)
{
	char msg[160];
	long n = len;

	while (n > 0 && (j->buf[n - 1] == '\r' || j->buf[n - 1] == '\n'))
		n--;
	snprintf(msg, sizeof(msg), "%.*s", (int)(n - 1), j->buf + 1);
	if (strncmp(msg, "NOAUTH", 6) == 0)
		set_state(&j->res, KVR_L2_PROBE_NOAUTH, "%s", msg);
	else if (strncmp(msg, "WRONGPASS", 9) == 0 ||
		 strstr(msg, "invalid password"))
		set_state(&j->res, KVR_L2_PROBE_WRONGPASS, "%s", msg);
	else
		set_state(&j->res, KVR_L2_PROBE_ERROR, "%s", msg);
	return j->res.state;
}

/* A RESP array of bulk strings (the form every Redis command takes);
 * its length, or 0 when it does not fit @cap (a password too long for
 * the probe's buffer fails as an error, never truncated). */
static size_t resp_cmd(char *out, size_t cap, int argc, const char **argv)
{
	size_t n = (size_t)snprintf(out, cap, "*%d\r\n", argc);

	for (int i = 0; i < argc && n < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "$%zu\r\n%s\r\n",
				      strlen(argv[i]), argv[i]);
	return n < cap ? n : 0;
}

/*
 * Connect, AUTH when there is a password, PING, CLUSTER SLOTS: the same
 * sequence a lane runs on a new connection, so a node the probe calls up
 * is one the lanes can use. The AUTH command holds the password and is
 * wiped from the stack once sent. A PING refused only by an ACL rule
 * (NOPERM) still proves the node answers and took our credentials, and
 * the lanes never PING under an ACL that forbids it.
 */
static void probe_one(struct job *j)
{
	const char *argv[3] = {"AUTH"};
	uint64_t t0 = mono_ms();
	char cmd[512];
	size_t cl;
	long len;
	int fd = connect_node(j);

	if (fd < 0)
		goto out;
	if (j->pass[0]) {
		int argc = 1;

		if (j->user[0])
			argv[argc++] = j->user;
		argv[argc++] = j->pass;
		cl = resp_cmd(cmd, sizeof(cmd), argc, argv);
		len = cl ? ask(j, fd, cmd, cl) : -1;
		explicit_bzero(cmd, sizeof(cmd));
		if (len < 0)
			goto out;
		if (j->buf[0] == '-' && error_state(j, len) >= 0)
			goto out;
	}
	len = ask(j, fd, "*1\r\n$4\r\nPING\r\n", 14);
	if (len < 0)
		goto out;
	/* An ACL without PING: the node answers, so it serves us. */
	if (j->buf[0] == '-' && strncmp(j->buf + 1, "NOPERM", 6) != 0) {
		error_state(j, len);
		goto out;
	}
	if (j->cluster) {
		len = ask(j, fd, "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n", 28);
		if (len < 0)
			goto out;
		if (j->buf[0] == '-') {
			error_state(j, len);
			strncat(j->res.detail, " (is it a cluster node?)",
				sizeof(j->res.detail) - strlen(j->res.detail) -
				    1);
			goto out;
		}
		j->ranges = calloc(PROBE_RANGES, sizeof(*j->ranges));
		j->nranges = j->ranges
				 ? kvr_l2_resp_slots(j->buf, (size_t)len,
						     j->ranges, PROBE_RANGES)
				 : -ENOMEM;
		if (j->nranges < 0) {
			set_state(&j->res, KVR_L2_PROBE_ERROR,
				  "CLUSTER SLOTS: a reply kvringd cannot "
				  "read%s",
				  NULL);
			goto out;
		}
	}
	set_state(&j->res, KVR_L2_PROBE_UP, "PING answered%s", NULL);
out:
	if (fd >= 0)
		close(fd);
	j->res.ms = (uint32_t)(mono_ms() - t0);
}

/* Free a finished or abandoned job, its password wiped first. */
static void job_free(struct job *j)
{
	explicit_bzero(j->pass, sizeof(j->pass));
	pthread_mutex_destroy(&j->lock);
	free(j->ranges);
	free(j);
}

/* A probe thread: probe, then hand the job over. If the caller gave up
 * waiting (abandoned, under the lock), nobody will read the result and
 * the thread frees the job itself; otherwise the caller does. */
static void *job_main(void *arg)
{
	struct job *j = arg;
	bool drop;

	probe_one(j);
	pthread_mutex_lock(&j->lock);
	j->done = true;
	drop = j->abandoned;
	pthread_mutex_unlock(&j->lock);
	if (drop)
		job_free(j);
	return NULL;
}

/* The address as log lines spell it. */
static void addr_name(const struct kvr_l2_addr *a, char *buf, size_t len)
{
	if (a->path[0])
		snprintf(buf, len, "unix:%s", a->path);
	else
		snprintf(buf, len, "%s:%u", a->host, a->port);
}

/*
 * Probe @n addresses at once; results into out->node[out->nnodes...].
 * @map, when not NULL, receives the first slot map read (a cluster).
 */
static void probe_round(const struct kvr_l2_conf *c, const char *user,
			const char *pass, const struct kvr_l2_addr *a,
			uint32_t n, struct kvr_l2_probe *out, struct job **map)
{
	struct job *jobs[KVR_L2_PROBE_MAX] = {0};
	pthread_t th[KVR_L2_PROBE_MAX];
	bool started[KVR_L2_PROBE_MAX] = {0};
	struct timespec dl;
	uint32_t base = out->nnodes;

	/* One absolute deadline for every join (pthread_timedjoin_np takes
	 * CLOCK_REALTIME): io_ms plus 100 ms, so a thread whose own socket
	 * timeout fires at io_ms still reports its reason. */
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += c->io_ms / 1000;
	dl.tv_nsec += (long)(c->io_ms % 1000) * 1000000L + 100000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	for (uint32_t i = 0; i < n && base + i < KVR_L2_PROBE_MAX; i++) {
		struct kvr_l2_probe_node *r = &out->node[base + i];
		struct job *j = calloc(1, sizeof(*j));

		addr_name(&a[i], r->addr, sizeof(r->addr));
		r->state = KVR_L2_PROBE_ERROR;
		snprintf(r->detail, sizeof(r->detail), "out of memory");
		out->nnodes++;
		if (!j)
			continue;
		pthread_mutex_init(&j->lock, NULL);
		j->a = a[i];
		j->io_ms = c->io_ms;
		j->cluster = c->kind == KVR_L2_CLUSTER;
		snprintf(j->user, sizeof(j->user), "%s", user);
		snprintf(j->pass, sizeof(j->pass), "%s", pass);
		jobs[i] = j;
		started[i] = pthread_create(&th[i], NULL, job_main, j) == 0;
		if (!started[i]) {
			snprintf(r->detail, sizeof(r->detail),
				 "cannot start a probe thread");
			job_free(j);
			jobs[i] = NULL;
		}
	}
	for (uint32_t i = 0; i < n && base + i < KVR_L2_PROBE_MAX; i++) {
		struct kvr_l2_probe_node *r = &out->node[base + i];
		struct job *j = jobs[i];
		bool done;

		if (!started[i])
			continue;
		if (pthread_timedjoin_np(th[i], NULL, &dl) == 0) {
			done = true;
		} else {
			pthread_detach(th[i]);
			pthread_mutex_lock(&j->lock);
			done = j->done;
			j->abandoned = !done;
			pthread_mutex_unlock(&j->lock);
		}
		if (!done) { /* the thread frees its job */
			r->state = KVR_L2_PROBE_TIMEOUT;
			r->ms = c->io_ms;
			snprintf(r->detail, sizeof(r->detail),
				 "no answer within --l2-io-ms (%u ms); the "
				 "name may not resolve in time, or the "
				 "address drops packets",
				 c->io_ms);
			continue;
		}
		snprintf(j->res.addr, sizeof(j->res.addr), "%s", r->addr);
		*r = j->res;
		if (map && !*map && r->state == KVR_L2_PROBE_UP &&
		    j->nranges > 0) {
			*map = j;
			continue;
		}
		job_free(j);
	}
}

/* Whether @a is already among out->node[] (by the name it prints as): a
 * seed the slot map names again is not probed twice. */
static bool probed(const struct kvr_l2_probe *out, const struct kvr_l2_addr *a)
{
	char name[sizeof(out->node[0].addr)];

	addr_name(a, name, sizeof(name));
	for (uint32_t i = 0; i < out->nnodes; i++)
		if (strcmp(out->node[i].addr, name) == 0)
			return true;
	return false;
}

/* Two rounds for a cluster: the seeds, then every master the first slot
 * map read names that is not a seed (a cluster is reached through its
 * seeds but served by all of its masters). A single node: one round. */
void kvr_l2_probe(const struct kvr_l2_conf *c, const char *user,
		  const char *pass, struct kvr_l2_probe *out)
{
	struct kvr_l2_addr more[KVR_L2_PROBE_MAX];
	struct job *map = NULL;
	uint32_t nmore = 0;

	memset(out, 0, sizeof(*out));
	probe_round(c, user, pass, c->seeds, c->nseeds, out,
		    c->kind == KVR_L2_CLUSTER ? &map : NULL);
	if (map) {
		/* Every master the map names, beyond the seeds. */
		for (int k = 0; k < map->nranges; k++) {
			struct kvr_l2_addr a = {.port = map->ranges[k].port};

			out->slots += map->ranges[k].hi - map->ranges[k].lo + 1;
			snprintf(a.host, sizeof(a.host), "%s",
				 map->ranges[k].host[0] ? map->ranges[k].host
							: map->a.host);
			if (probed(out, &a) || nmore == KVR_L2_PROBE_MAX)
				continue;
			bool dup = false;

			for (uint32_t m = 0; m < nmore; m++)
				dup =
				    dup || (strcmp(more[m].host, a.host) == 0 &&
					    more[m].port == a.port);
			if (!dup)
				more[nmore++] = a;
		}
		out->have_map = true;
		job_free(map);
		probe_round(c, user, pass, more, nmore, out, NULL);
	}
	for (uint32_t i = 0; i < out->nnodes; i++)
		out->nup += out->node[i].state == KVR_L2_PROBE_UP;
}

const char *kvr_l2_probe_state_name(int state)
{
	switch (state) {
	case KVR_L2_PROBE_UP:
		return "up";
	case KVR_L2_PROBE_NOAUTH:
		return "NOAUTH";
	case KVR_L2_PROBE_WRONGPASS:
		return "WRONGPASS";
	case KVR_L2_PROBE_REFUSED:
		return "refused";
	case KVR_L2_PROBE_UNRESOLVABLE:
		return "unresolvable";
	case KVR_L2_PROBE_TIMEOUT:
		return "timeout";
	default:
		return "error";
	}
}

const char *kvr_l2_probe_hint(int state)
{
	switch (state) {
	case KVR_L2_PROBE_NOAUTH:
		return "the node needs a password and none was given: put it "
		       "in --l2-auth-file or $" KVR_L2_AUTH_ENV;
	case KVR_L2_PROBE_WRONGPASS:
		return "the node refused the user or password: check "
		       "--l2-auth-file or $" KVR_L2_AUTH_ENV;
	case KVR_L2_PROBE_REFUSED:
		return "nothing listens there: check the address in --l2 and "
		       "that redis-server runs";
	case KVR_L2_PROBE_UNRESOLVABLE:
		return "the host name does not resolve: check --l2 and the "
		       "resolver";
	case KVR_L2_PROBE_TIMEOUT:
		return "check the address in --l2 and that a firewall lets "
		       "kvringd reach it";
	case KVR_L2_PROBE_UP:
		return "";
	default:
		return "see the node's reply above and docs/l2.md";
	}
}

/* Probe, log every node's state with its reason, decide (l2.h). */
int kvr_l2_probe_log(const struct kvr_l2_conf *cf, const char *user,
		     const char *pass)
{
	struct kvr_l2_probe *p = malloc(sizeof(*p));
	const struct kvr_l2_probe_node *bad = NULL;
	bool whole;

	if (!p)
		return -ENOMEM;
	kvr_l2_probe(cf, user, pass, p);
	for (uint32_t i = 0; i < p->nnodes; i++) {
		const struct kvr_l2_probe_node *n = &p->node[i];

		if (n->state == KVR_L2_PROBE_UP) {
			kvr_log_info("l2: probe %s: up (%s%s, %u ms)", n->addr,
				     pass[0] ? "AUTH accepted, " : "",
				     n->detail, n->ms);
			continue;
		}
		bad = bad ? bad : n;
		kvr_log_warn("l2: probe %s: %s (%s): %s", n->addr,
			     kvr_l2_probe_state_name(n->state), n->detail,
			     kvr_l2_probe_hint(n->state));
	}
	whole = cf->kind != KVR_L2_CLUSTER ||
		(p->have_map && p->slots == KVR_L2_SLOTS);
	if (cf->kind == KVR_L2_CLUSTER && p->have_map)
		kvr_log(whole ? KVR_LOG_INFO : KVR_LOG_WARN,
			"l2: probe: the cluster's slot map assigns %u of %u "
			"slots%s",
			p->slots, KVR_L2_SLOTS,
			whole ? ""
			      : "; keys in the others fail until it is "
				"whole (redis-cli --cluster check)");
	else if (cf->kind == KVR_L2_CLUSTER)
		kvr_log_warn("l2: probe: no seed answered CLUSTER SLOTS: "
			     "check that --l2 names nodes of a cluster");
	if (!bad && whole) {
		free(p);
		return 0;
	}
	if (cf->required) {
		kvr_log_err(
		    "l2: %u of %u nodes usable at start%s and "
		    "--l2-required is set: not starting. %s%s%s, or "
		    "drop --l2-required to start and serve from L1",
		    p->nup, p->nnodes, whole ? "" : ", the slot map not whole",
		    bad ? "Fix " : "Make the cluster whole",
		    bad ? bad->addr : "",
		    bad ? bad->state == KVR_L2_PROBE_UP ? "" : " first" : "");
		free(p);
		return -EHOSTDOWN;
	}
	kvr_log_warn("l2: %u of %u nodes usable at start: kvringd starts "
		     "anyway (no --l2-required), serves what L2 cannot reach "
		     "from L1 only, and retries with backoff",
		     p->nup, p->nnodes);
	free(p);
	return 0;
}
