/* SPDX-License-Identifier: MIT */
/*
 * serve.c - --serve ADDR:PORT: the Prometheus exposition of prom.c over
 * HTTP, one fresh snapshot per scrape of /metrics, with libmicrohttpd
 * (Debian's libmicrohttpd-dev, optional at build time: KVR_HAVE_MHD).
 *
 * It stays what the inspector is: read-only towards the server (the same
 * PROT_READ mapping; it never connects to the server's socket or writes
 * the segment). It binds loopback unless told otherwise: "PORT" or
 * ":PORT" mean 127.0.0.1; exposing the metrics to other hosts takes an
 * explicit address ("0.0.0.0:9464", "[::]:9464"), and docs/inspect.md
 * says to put it behind the usual firewall or a reverse proxy, since the
 * endpoint has no authentication. Only GET and HEAD of /metrics (and a
 * small text at /) are answered; anything else is 404 or 405.
 *
 * Threads: libmicrohttpd's one internal polling thread runs every request
 * handler, so snapshots never run concurrently (the SIGBUS guard and the
 * snapshot buffers are single-user). The main thread only waits for
 * SIGINT/SIGTERM. A restarted server (the name now points at another
 * file) is re-attached by the handler before it takes the snapshot, as
 * --watch does.
 */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <kvring/parse.h>

#include "inspect.h"

#ifdef KVR_HAVE_MHD
#include <pthread.h>

#include <microhttpd.h>

#include <kvring/log.h>

/* Everything the handler needs; owned by ins_serve_run()'s frame. */
struct serve {
	const struct ins_opts *o;
	const struct ins_target *t;
	struct ins_attach *a;
	struct ins_snap s;
	uint64_t scrapes;
};

/* The name points at another file: the server restarted. Attach to the
 * new one; on failure keep the old mapping (it reads "server dead"). */
static void maybe_reattach(struct serve *sv)
{
	struct ins_attach na;
	struct ins_chan_snap *ch;
	struct kvr_err e = {0};
	struct stat st;

	if (stat(sv->t->path, &st) < 0 ||
	    (st.st_ino == sv->a->ino && st.st_dev == sv->a->dev))
		return;
	if (ins_attach_open(sv->t, &na, &e) < 0)
		return;
	ch = na.geom_ok ? ins_chan_alloc(&na) : NULL;
	if (!ch) {
		ins_attach_close(&na);
		return;
	}
	ins_err("server restarted: now serving %s (pid %d)", sv->t->path,
		na.h->seg.creator_pid);
	ins_attach_close(sv->a);
	*sv->a = na;
	free(sv->s.ch);
	sv->s.ch = ch;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status,
			     const char *type, char *body, size_t len,
			     bool free_it)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    len, body,
	    free_it ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc;

	if (!r) {
		if (free_it)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	rc = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_len, void **ctx)
{
	static char index[] =
	    "kvring-inspect --serve: Prometheus metrics at /metrics\n";
	static char not_found[] = "not found: try /metrics\n";
	static char not_allowed[] = "only GET and HEAD\n";
	static char failed[] =
	    "snapshot failed (see kvring-inspect's stderr)\n";
	const char *plain = "text/plain; charset=utf-8";
	struct serve *sv = cls;
	char *body = NULL;
	size_t len = 0;
	FILE *m;

	(void)version;
	(void)upload;
	(void)upload_len;
	(void)ctx;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, plain,
			     not_allowed, sizeof(not_allowed) - 1, false);
	if (strcmp(url, "/") == 0)
		return reply(conn, MHD_HTTP_OK, plain, index, sizeof(index) - 1,
			     false);
	if (strcmp(url, "/metrics"))
		return reply(conn, MHD_HTTP_NOT_FOUND, plain, not_found,
			     sizeof(not_found) - 1, false);
	maybe_reattach(sv);
	if (ins_snap_take(sv->a, &sv->s) < 0)
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, plain,
			     failed, sizeof(failed) - 1, false);
	m = open_memstream(&body, &len);
	if (!m)
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, plain,
			     failed, sizeof(failed) - 1, false);
	ins_prom_emit(m, sv->o->all, sv->t, &sv->s);
	fclose(m);
	sv->scrapes++;
	return reply(conn, MHD_HTTP_OK,
		     "text/plain; version=0.0.4; charset=utf-8", body, len,
		     true);
}

/*
 * "PORT", ":PORT", "HOST:PORT" or "[V6]:PORT" into a socket address.
 * An empty host means 127.0.0.1. Return 0, or -EINVAL (message printed).
 */
static int parse_addr(const char *spec, struct sockaddr_storage *ss,
		      socklen_t *sl)
{
	char host[256] = "127.0.0.1", port[16];
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints = {0}, *ai = NULL;
	uint32_t port_nr;
	int rc;

	if (!colon) {
		snprintf(port, sizeof(port), "%s", spec);
	} else {
		size_t hl = (size_t)(colon - spec);

		if (hl && spec[0] == '[' && spec[hl - 1] == ']') {
			spec++;
			hl -= 2;
		}
		if (hl >= sizeof(host) || strlen(colon + 1) >= sizeof(port))
			goto bad;
		if (hl) {
			memcpy(host, spec, hl);
			host[hl] = '\0';
		}
		snprintf(port, sizeof(port), "%s", colon + 1);
	}
	/* Digits only (getaddrinfo reads the text), within a port's range. */
	if (!port[0] || strspn(port, "0123456789") != strlen(port) ||
	    kvr_parse_u32(port, 0, 65535, &port_nr) < 0)
		goto bad;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc || !ai || ai->ai_addrlen > sizeof(*ss)) {
		ins_err("--serve %s: cannot resolve \"%s\": %s", spec, host,
			rc ? gai_strerror(rc) : "no address");
		if (ai)
			freeaddrinfo(ai);
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
bad:
	ins_err("--serve %s: expected PORT, :PORT, HOST:PORT or [V6]:PORT "
		"(port 0-65535; 0 picks a free one)",
		spec);
	return -EINVAL;
}

/*
 * Idle and slow clients must not keep scrapes out: a connection that sends
 * nothing for SERVE_IDLE_S seconds (headers included) is dropped, and one
 * address holds at most SERVE_CONNS_PER_ADDR of the SERVE_CONNS
 * connections, so a client that hoards connections leaves room for the
 * scraper at another address (docs/inspect.md, "Serving /metrics").
 */
#define SERVE_IDLE_S	     3u
#define SERVE_CONNS	     64u
#define SERVE_CONNS_PER_ADDR 8u

/* libmicrohttpd's messages (a refused connection, a client that went
 * away) are caused by clients: rate-limited like kvringd's peer lines. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	kvr_log_peer(KVR_LOG_WARN, 0, "--serve: %s", msg);
}

int ins_serve_run(const struct ins_opts *o, const struct ins_target *t,
		  struct ins_attach *a)
{
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	struct serve sv = {.o = o, .t = t, .a = a};
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *di;
	char host[NI_MAXHOST] = "?";
	sigset_t block, old;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;

	if (parse_addr(o->serve, &ss, &sl) < 0)
		return INS_EXIT_USAGE;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	sv.s.ch = ins_chan_alloc(a);
	if (!sv.s.ch) {
		ins_err("out of memory");
		return INS_EXIT_RUNTIME;
	}
	/* SIGINT/SIGTERM go to this thread, not the server's. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	/* The logger first, or MHD logs the other options' problems
	 * itself. */
	d = MHD_start_daemon(flags, 0, NULL, NULL, handle, &sv,
			     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
			     MHD_OPTION_CONNECTION_TIMEOUT, SERVE_IDLE_S,
			     MHD_OPTION_CONNECTION_LIMIT, SERVE_CONNS,
			     MHD_OPTION_PER_IP_CONNECTION_LIMIT,
			     SERVE_CONNS_PER_ADDR, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!d) {
		ins_err("--serve %s: cannot listen (address in use, or not "
			"this host's?)",
			o->serve);
		free(sv.s.ch);
		return INS_EXIT_RUNTIME;
	}
	di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), NULL, 0,
		    NI_NUMERICHOST);
	/* One line on stdout, for people and for scripts that asked for
	 * port 0. */
	printf(ss.ss_family == AF_INET6 ? "serving http://[%s]:%u/metrics\n"
					: "serving http://%s:%u/metrics\n",
	       host, di ? (unsigned)di->port : 0u);
	fflush(stdout);
	while (!ins_stop)
		ins_sleep_ms(200);
	MHD_stop_daemon(d);
	free(sv.s.ch);
	return INS_EXIT_OK;
}

#else /* !KVR_HAVE_MHD */

int ins_serve_run(const struct ins_opts *o, const struct ins_target *t,
		  struct ins_attach *a)
{
	(void)t;
	(void)a;
	ins_err("--serve %s: this kvring-inspect was built without "
		"libmicrohttpd (install libmicrohttpd-dev and rebuild), or "
		"use --prometheus with a textfile collector",
		o->serve);
	return INS_EXIT_RUNTIME;
}

#endif
