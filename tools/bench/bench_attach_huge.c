/* SPDX-License-Identifier: MIT */
/*
 * bench_attach_huge.c - the attach scenario's huge-page reservation
 * (--reserve-huge): vm.nr_hugepages raised for the huge-page cells and
 * always given back, at exit and on a signal; and MemAvailable, which caps
 * the pool sizes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <kvring/segment.h>

#include "bench_attach.h"

/* ---- the huge-page reservation, always given back ---- */

static int saved_fd = -1;  /* NR_PATH, open for the restore */
static char saved_val[32]; /* the old value, formatted */
static size_t saved_len;
static volatile sig_atomic_t reserved;

/* Async-signal-safe: write(2) of a preformatted string. */
void bench_attach_restore_huge(void)
{
	if (!reserved || saved_fd < 0)
		return;
	if (pwrite(saved_fd, saved_val, saved_len, 0) == (ssize_t)saved_len)
		reserved = 0;
}

static void restore_on_signal(int sig)
{
	bench_attach_restore_huge();
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t read_u64_file(const char *path)
{
	unsigned long long v = 0;
	FILE *f = fopen(path, "re");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* Raise nr_hugepages so that @pages are free; 0 or -errno. */
int bench_attach_reserve_huge(uint64_t pages)
{
	struct kvr_hugetlb_info hi;
	uint64_t old = read_u64_file(NR_PATH);
	char buf[32];
	int n;

	if (kvr_seg_hugetlb_info(&hi) < 0)
		return -ENOENT;
	if (hi.free_pages >= pages)
		return 0;
	/* The first raise remembers the value to give back; later ones
	 * (before each huge cell) only raise further. */
	if (saved_fd < 0) {
		saved_fd = open(NR_PATH, O_WRONLY | O_CLOEXEC);
		if (saved_fd < 0)
			return -errno;
		saved_len = (size_t)snprintf(saved_val, sizeof(saved_val),
					     "%llu\n", (unsigned long long)old);
		reserved = 1;
		atexit(bench_attach_restore_huge);
		signal(SIGINT, restore_on_signal);
		signal(SIGTERM, restore_on_signal);
		signal(SIGHUP, restore_on_signal);
	}
	n = snprintf(buf, sizeof(buf), "%llu\n",
		     (unsigned long long)(old + pages - hi.free_pages));
	if (pwrite(saved_fd, buf, (size_t)n, 0) != n)
		return -errno;
	fprintf(stderr,
		"kvring-bench: attach: nr_hugepages %llu -> %llu for the "
		"huge-page cells (restored at exit)\n",
		(unsigned long long)old,
		(unsigned long long)(old + pages - hi.free_pages));
	return 0;
}

/* ---- helpers ---- */

uint64_t bench_attach_mem_available(void)
{
	unsigned long long kb = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}
