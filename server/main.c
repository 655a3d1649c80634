/* SPDX-License-Identifier: MIT */
/*
 * kvringd's entry point: parse the options, start the server, run its
 * loop, tear it down. Nothing else lives here (STYLE.md section 1): the
 * options are config.c, start-up and teardown srv.c, the loop loop.c.
 *
 * Exit status: 0 after SIGTERM/SIGINT with segments and socket removed,
 * 1 when start-up failed (the log says what to do), 2 on a usage error
 * (a config file's bad line included), 1 when the config file cannot be
 * used as it is (unreadable, or others may write it).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvring/log.h>
#include <kvring/paths.h>

#include "config.h"
#include "config_show.h"
#include "loop.h"
#include "kvringd.h"

int main(int argc, char **argv)
{
	struct kvr_config cfg;
	struct kvr_srv *s = NULL;
	int rc;

	kvr_log_set_ident("kvringd");
	/* root gets the system-wide socket directory (docs/config.md);
	 * created before the default socket path is computed. */
	if (geteuid() == 0 && mkdir(KVR_RUN_DIR, 0755) < 0 && errno != EEXIST)
		kvr_log_debug("mkdir %s: failed, using /tmp", KVR_RUN_DIR);
	rc = kvr_config_parse(argc, argv, &cfg, stdout, stderr);
	if (rc == KVR_CONFIG_HELP || rc == KVR_CONFIG_VERSION)
		return 0;
	if (rc == KVR_CONFIG_PRINT) {
		kvr_config_print(&cfg, stdout);
		return 0;
	}
	if (rc < 0)
		return rc == -EINVAL ? 2 : 1;
	kvr_log_set_level(cfg.log_level);

	rc = kvr_srv_create(&cfg, &s);
	if (rc < 0) {
		kvr_log_err("kvringd not started");
		return 1;
	}
	rc = kvr_loop_run(s);
	kvr_srv_destroy(s);
	if (rc == -ENOTRECOVERABLE) {
		kvr_log_err("kvringd stopped, but its shutdown self-check "
			    "failed (see above)");
		return 3;
	}
	if (rc < 0) {
		kvr_log_err("event loop failed: %d", rc);
		return 1;
	}
	kvr_log_info("kvringd stopped");
	return 0;
}
