/* SPDX-License-Identifier: MIT */
/*
 * test_shm_sizing.c - the shared-memory sizing formulas of docs/config.md
 * ("Sizing /dev/shm") against the sizes of a real kvringd's segments:
 * /dev/shm/NAME.ctl and NAME.pool as stat(2) sees them, and the channel
 * directory and a connected worker's channel block, both memfds, through
 * the server's /proc/PID/fd. Two geometries, so a formula that ignores
 * --max-workers or --ring-bytes fails.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <kvring/kvring.h>
#include <kvring/layout.h>

#include "worker_srv.h"

static struct kvrd srv;

static void teardown(void)
{
	t_server_down(&srv);
}

TestSuite(shm_sizing, .fini = teardown, .timeout = 60);

/* The formulas as docs/config.md writes them. */
#define KIB	      (1024ull)
#define CTL_BYTES     (28 * KIB)
#define CHAN_BYTES(r) (2 * (uint64_t)(r) + 40 * KIB)
#define DIR_BYTES(w)  ((128 * (uint64_t)(w) + 64 * KIB + 4095) / 4096 * 4096)

static uint64_t file_size(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "stat %s", path);
	return (uint64_t)st.st_size;
}

/* Size of the server's memfd whose name starts "/memfd:@prefix". */
static uint64_t memfd_size(const char *prefix)
{
	char dir[64], path[320], link[256], want[64];
	struct dirent *d;
	uint64_t size = 0;
	DIR *dp;
	ssize_t n;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)srv.pid);
	snprintf(want, sizeof(want), "/memfd:%s", prefix);
	dp = opendir(dir);
	cr_assert_not_null(dp);
	while ((d = readdir(dp))) {
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strncmp(link, want, strlen(want)) == 0) {
			size = file_size(path);
			break;
		}
	}
	closedir(dp);
	cr_assert_gt(size, 0, "no memfd %s in %s", prefix, dir);
	return size;
}

static void check(const char *workers, uint32_t w, const char *ring, uint32_t r)
{
	const char *args[] = {"--allow-root", "--max-workers",
			      workers,	      "--ring-bytes",
			      ring,	      "--pool-size",
			      "16M",	      "--pool-backend",
			      "shm",	      NULL};
	struct kvr_client *c;
	char path[160];

	t_server_init(&srv);
	t_server_start(&srv, args);
	snprintf(path, sizeof(path), "/dev/shm/%s.ctl", srv.name);
	cr_expect_eq(file_size(path), CTL_BYTES, "%s", path);
	snprintf(path, sizeof(path), "/dev/shm/%s.pool", srv.name);
	cr_expect_eq(file_size(path), 16ull << 20, "%s", path);
	cr_expect_eq(memfd_size("kvring-dir"), DIR_BYTES(w),
		     "channel directory, %u workers", w);
	cr_expect_eq(srv.hdr->channel_bytes, CHAN_BYTES(r));
	c = t_connect_1x1(&srv, "kvring-sizing");
	cr_expect_eq(memfd_size("kvring-ch"), CHAN_BYTES(r),
		     "channel block, ring %u", r);
	kvr_close(c);
}

Test(shm_sizing, defaults_match_the_documented_formula)
{
	check("64", 64, "128K", 128u << 10);
}

Test(shm_sizing, other_geometry_matches_the_documented_formula)
{
	check("700", 700, "1M", 1u << 20);
}
