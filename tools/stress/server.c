/* SPDX-License-Identifier: MIT */
/*
 * server.c - the kvringd under test, from the parent's side: its names (a
 * private socket, segment base and log per run, or those of a running
 * server with --socket), the arguments our own server gets, SIGKILLing and
 * restarting it the way a supervisor would, and stopping it with SIGTERM
 * at the end (its exit status is an invariant).
 *
 * Starting, waiting for RUNNING, stopping, the control segment mapping the
 * audit reads and the clean-up of what the server left are the one private-
 * kvringd helper's (tools/kvrd/kvrd.h), shared with the test suites and
 * kvring-bench. Nothing here is used in attach mode (--socket) except the
 * names: a server we did not start is never killed, stopped or cleaned up.
 * It does not decide when to kill the server (killer.c) and does not reap
 * it when it dies on its own (fleet.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <kvring/paths.h>

#include "stress.h"

/*
 * Start our kvringd on its private names and wait (10 s) until the control
 * segment it created says RUNNING. --max-workers leaves room for the
 * replacements that connect while the server is still cleaning up their
 * killed predecessors, plus the audit. On failure the reason is printed
 * with the log's tail and srv.pid is 0.
 */
static int start_server(struct st_run *r)
{
	char pool[32], maxw[16], xfer[16], stall[16], dsize[32], dchunk[32];
	const char *argv[28 + MAX_SRV_ARGS];
	unsigned n = 0;

	snprintf(pool, sizeof(pool), "%" PRIu64, r->o.pool_bytes);
	snprintf(maxw, sizeof(maxw), "%u", r->o.workers * 2 + 8);
	argv[n++] = "--pool-size";
	argv[n++] = pool;
	argv[n++] = "--max-workers";
	argv[n++] = maxw;
	if (r->o.stop_every) {
		/* Transfers of a stopped worker must be reclaimed while it is
		 * stopped (--stall-ms must stay below --xfer-ms). */
		snprintf(xfer, sizeof(xfer), "%u", r->o.xfer_ms);
		snprintf(stall, sizeof(stall), "%u", r->o.xfer_ms / 2);
		argv[n++] = "--xfer-ms";
		argv[n++] = xfer;
		argv[n++] = "--stall-ms";
		argv[n++] = stall;
	}
	if (r->o.disk) {
		/* Room for the whole keyspace: every chunk the pool evicts
		 * can come back from disk, byte for byte. */
		snprintf(dsize, sizeof(dsize), "%" PRIu64,
			 r->o.keyspace_bytes + r->o.pool_bytes + (16u << 20));
		snprintf(dchunk, sizeof(dchunk), "%" PRIu64,
			 (r->o.chunk_max + 4095) & ~(uint64_t)4095);
		argv[n++] = "--disk";
		argv[n++] = r->o.disk;
		argv[n++] = "--disk-size";
		argv[n++] = dsize;
		argv[n++] = "--disk-chunk";
		argv[n++] = dchunk;
	}
	for (unsigned i = 0; i < r->o.nsrv_args; i++)
		argv[n++] = r->o.srv_args[i];
	argv[n] = NULL;
	return kvrd_start(&r->srv, argv);
}

/*
 * Names: in attach mode the given socket, and --name (else the default
 * base kvring-<uid>) for the audit. Otherwise a private socket, segment
 * base and log named after our pid (/tmp/kvring-stress-<pid>.sock), so
 * that runs side by side (ctest) do not meet, and start our server on
 * them, in its own process group: a terminal's Ctrl-C stops the run in
 * order, it does not kill the server before the audit.
 */
int st_server_setup(struct st_run *r)
{
	struct kvrd_opts ko = {
	    .prog = PROG,
	    .bin = r->o.kvringd,
	    .tag = "kvring-stress",
	    .log_path = r->o.log_path,
	    .ready = KVRD_READY_CTL,
	    .start_timeout_ms = 10000,
	    .own_pgrp = true,
	};
	char pool_base[64];

	if (r->o.socket) {
		memset(&r->srv, 0, sizeof(r->srv));
		if (r->o.name)
			snprintf(r->srv.name, sizeof(r->srv.name), "%s",
				 r->o.name);
		else if (kvr_seg_default_base(pool_base, sizeof(pool_base)) ==
			 0)
			snprintf(r->srv.name, sizeof(r->srv.name), "%s",
				 pool_base);
		snprintf(r->srv.ctl_name, sizeof(r->srv.ctl_name),
			 "%s" KVR_SEG_CTL_SUFFIX, r->srv.name);
		snprintf(r->srv.sock, sizeof(r->srv.sock), "%s", r->o.socket);
		return 0;
	}
	kvrd_init(&r->srv, &ko);
	/* Workers (and the audit) connect to whatever o.socket says. */
	r->o.socket = r->srv.sock;
	return start_server(r);
}

void st_server_kill_restart(struct st_run *r)
{
	/* Restarted at once, the way a supervisor would: the new server
	 * must cope with the dead one's socket and segments itself. It is
	 * reaped here, so fleet.c never mistakes this death for a crash. */
	kvrd_kill(&r->srv);
	r->srv_kills++;
	kvrd_unmap(&r->srv);
	if (start_server(r) == 0)
		r->srv_restarts++;
	else
		r->srv_crashed = true; /* cannot restart: ends the run */
}

/*
 * Our server must also stop cleanly: SIGTERM, then up to 10 s for it to
 * exit. srv_exit gets its exit status (128 + signal if it died of one),
 * or 255 if it had to be SIGKILLed. Nothing to do if it is not ours or
 * already gone.
 */
void st_server_stop(struct st_run *r)
{
	int rc;

	if (r->srv.pid <= 0)
		return;
	rc = kvrd_stop(&r->srv, 10000);
	r->srv_exit = rc < 0 ? 255 : rc;
}
