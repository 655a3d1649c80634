/* SPDX-License-Identifier: MIT */
/*
 * Error reporting shared by every kvr module: kvr's wording for the
 * negative errno codes the API returns (the meanings are fixed project-wide
 * in docs/errors.md), a small detail buffer through which library code says
 * *what* was wrong and what to do about it without printing anything, and
 * kvr_assert() for our own invariants.
 *
 * This file does not log (<kvring/log.h> does, for binaries only) and does
 * not define any error code of its own: kvr speaks plain negative errno.
 */
#ifndef KVRING_ERROR_H
#define KVRING_ERROR_H

#include <stddef.h>

/* Size of kvr_err.msg, terminating NUL included. */
#define KVR_ERR_MSG_MAX 256

/*
 * A detail buffer for one failure. Owned by the caller (usually on its
 * stack), borrowed by the library call that fills it; it holds no pointers
 * and needs no cleanup. After a failed call, code is the same negative errno
 * the call returned and msg says, in the style "<action> <object>: <reason>",
 * what went wrong ("create /dev/shm/kvring-0.pool: needs 1 GiB (1073741824
 * bytes), 50 MiB available on /dev/shm; ..."). After a successful call the
 * buffer is left as it was, so initialise it (or call kvr_err_clear()) first if
 * you want to tell the two apart by looking at it.
 */
struct kvr_err {
	int code;		   /* negative errno, 0 if nothing recorded */
	char msg[KVR_ERR_MSG_MAX]; /* NUL-terminated, "" if nothing recorded */
};

/*
 * kvr_strerror - kvr's wording for a return code.
 * @rc: 0 or a negative errno (a positive value is treated as its negation).
 * Codes listed in docs/errors.md get kvr's meaning ("chunk pool is full");
 * any other code falls back to the C library's strerror wording.
 * Thread-safe: the result is either a string constant or a thread-local
 * buffer that stays valid until the same thread calls kvr_strerror again.
 * Return: a NUL-terminated string, never NULL.
 * Exported by libkvring.so (declared for its users in <kvring/kvring.h>),
 * whatever visibility the rest of lib/ is built with.
 */
__attribute__((visibility("default"))) const char *kvr_strerror(int rc);

/*
 * kvr_err_set - record a failure in a detail buffer.
 * @e: the buffer, or NULL (then nothing is recorded; the call still
 *     returns @code, so library code can always write
 *     "return kvr_err_set(e, -EINVAL, ...)").
 * @code: the negative errno the caller is about to return.
 * @fmt: printf format of the message; a message longer than
 *       KVR_ERR_MSG_MAX - 1 bytes is cut and ends in "...".
 * Never allocates, never prints, preserves errno.
 * Return: @code.
 */
int kvr_err_set(struct kvr_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * kvr_err_clear - reset a detail buffer to "nothing recorded".
 * @e: the buffer, or NULL (no-op).
 */
void kvr_err_clear(struct kvr_err *e);

/*
 * kvr_err_str - the best text for a failure: the detail message when @e
 * holds one for this same code, else kvr_strerror(@rc).
 * Handy for binaries: kvr_log_err("%s", kvr_err_str(&e, rc)).
 * Return: a NUL-terminated string, never NULL (borrowed from @e or from
 * kvr_strerror()).
 */
const char *kvr_err_str(const struct kvr_err *e, int rc);

/*
 * kvr_assert - check one of *our own* invariants; stays on in release builds.
 * On failure writes "kvr assertion failed: <expr> at <file>:<line>" to
 * stderr with a single write() and aborts. Never use it on data that came
 * from a peer or from shared memory: validate that and return -EBADMSG or
 * -ERANGE instead (STYLE.md section 7).
 */
#define kvr_assert(expr)                                                       \
	((expr) ? (void)0 : kvr__assert_fail(#expr, __FILE__, __LINE__))

/* Internal: the failure path of kvr_assert(); does not return. */
void kvr__assert_fail(const char *expr, const char *file, int line)
    __attribute__((noreturn, cold));

#endif /* KVRING_ERROR_H */
