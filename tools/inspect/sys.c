/* SPDX-License-Identifier: MIT */
/*
 * sys.c - the process plumbing every kvring-inspect mode shares: the
 * stderr error convention, the clocks, the interruptible sleep, and the
 * two signal handlers (the SIGBUS guard that turns a truncated segment
 * into an error message, and the SIGINT/SIGTERM flag that ends --watch
 * cleanly). It does not decide when reads are guarded: the code that
 * reads the mapping arms the guard and sets its own jump point, because
 * only that code knows what to unwind.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "inspect.h"

/*
 * A tmpfs file that is unlinked but still mapped stays readable, and the
 * server never truncates its segments, so SIGBUS should not happen. If
 * something truncates the file anyway, reading past its new end raises
 * SIGBUS; the handler jumps back to the reader, which reports it instead
 * of dumping core. Only reads of the mapping run while armed.
 */
sigjmp_buf ins_bus_jmp;
volatile sig_atomic_t ins_bus_armed;
volatile sig_atomic_t ins_stop;

static void on_sigbus(int sig)
{
	if (ins_bus_armed)
		siglongjmp(ins_bus_jmp, 1);
	/* Not ours to handle: die of the signal, as without a handler. */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_sigint(int sig)
{
	(void)sig;
	ins_stop = 1;
}

void ins_signals_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	/* No SA_RESTART: SIGINT must interrupt the --watch sleep. */
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Errors go to stderr prefixed with the tool's name (STYLE.md 12). */
void ins_err(const char *fmt, ...)
{
	va_list ap;

	fputs(INS_PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void ins_sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	/* EINTR ends the sleep early on purpose: SIGINT stops --watch. */
	nanosleep(&ts, NULL);
}
