/* SPDX-License-Identifier: MIT */
/*
 * Shared segments: the common header at offset 0 of the CONTROL segment,
 * segment names, the three backends (named file under /dev/shm, anonymous
 * memfd, private anonymous memory), attach by fd or by name, page
 * prefaulting, and the start-up sweep of stale segments (DESIGN rule 8).
 * docs/segments.md explains the choices; the header's byte table is there.
 *
 * Pool segments carry payload only, no header: a pool is paired with its
 * control segment by name ("<base>.pool" with "<base>.ctl") or, for memfd,
 * by arriving on the same socket.
 *
 * This file does not own the control layout after byte 256 (layout.h), the
 * kind values (layout.h: KVR_SEG_KIND_CONTROL) or any policy about which
 * backend to try first (the server decides and logs it). Nothing here
 * prints; failures come back as -errno plus a message in struct kvr_err.
 */
#ifndef KVRING_SEGMENT_H
#define KVRING_SEGMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kvring/error.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shm atomics must be lock-free");

/* ==== Segment header (ABI) ==== */

/* "KVRNGCT1" read as a big-endian u64 (stored little-endian on x86). */
#define KVR_SEG_MAGIC 0x4b56524e47435431ULL
#define KVR_ABI_MAJOR 5 /* 5: namespace slots out of workers' reach */
#define KVR_ABI_MINOR 7 /* 5.7: rings' consumer_flags (line padding) */
#define KVR_ABI	      ((uint32_t)(KVR_ABI_MAJOR << 16 | KVR_ABI_MINOR))
/* Value of kvr_seg_hdr_shm.ready once the creator published the segment. */
#define KVR_SEG_READY 1u
/* Longest segment name, without the NUL. */
#define KVR_SEG_NAME_MAX 63

/*
 * The first 256 bytes of a control segment. Written by the creator (the
 * server) between kvr_seg_hdr_format() and kvr_seg_hdr_publish(), read-only
 * for everyone afterwards. Everything a reader finds here is untrusted until
 * kvr_seg_hdr_check() accepted it.
 *
 * magic, creator_pid and creator_start keep their offsets in every ABI
 * version: the stale-segment sweep reads them from headers of any version.
 */
struct kvr_seg_hdr_shm {
	uint64_t magic;		/*   0: KVR_SEG_MAGIC */
	uint32_t abi;		/*   8: major << 16 | minor */
	uint32_t kind;		/*  12: KVR_SEG_KIND_* (layout.h) */
	uint64_t layout_hash;	/*  16: creator's layout hash */
	uint64_t seg_bytes;	/*  24: total size of the mapping */
	int32_t creator_pid;	/*  32: server pid (its pid namespace) */
	uint32_t hdr_bytes;	/*  36: sizeof(struct kvr_seg_hdr_shm) */
	uint64_t creator_start; /*  40: /proc/PID/stat field 22, ticks */
	uint8_t boot_id[16];	/*  48: random per server start */
	char name[64];		/*  64: segment name, NUL-terminated */
	/*
	 * 128: KVR_SEG_READY once every other byte of the segment header and
	 * of the layout that follows it is written. Stored last, with release
	 * (R-SEG1 in kvr_seg_hdr_publish); pairs with the acquire load
	 * (A-SEG1) in kvr_seg_hdr_check().
	 */
	_Atomic uint32_t ready;
	uint32_t pad0;	       /* 132: zero */
	uint64_t reserved[15]; /* 136..255: zero, for minor versions */
};
_Static_assert(sizeof(struct kvr_seg_hdr_shm) == 256,
	       "ABI: update docs/segments.md and bump KVR_ABI_MAJOR");
_Static_assert(offsetof(struct kvr_seg_hdr_shm, creator_pid) == 32, "ABI");
_Static_assert(offsetof(struct kvr_seg_hdr_shm, creator_start) == 40, "ABI");
_Static_assert(offsetof(struct kvr_seg_hdr_shm, name) == 64, "ABI");
_Static_assert(offsetof(struct kvr_seg_hdr_shm, ready) == 128, "ABI");

/*
 * kvr_seg_hdr_format - fill a header in a freshly created segment.
 * Records magic, KVR_ABI, @kind, @layout_hash, @seg_bytes, @name (cut to
 * 63 bytes), @boot_id (NULL = zeros), this process's pid and start time;
 * zeroes the padding; leaves ready at 0. Only the creator calls it, before
 * anyone else can see the segment's contents as valid.
 */
void kvr_seg_hdr_format(struct kvr_seg_hdr_shm *h, uint32_t kind,
			uint64_t layout_hash, uint64_t seg_bytes,
			const char *name, const uint8_t boot_id[16]);

/*
 * kvr_seg_hdr_publish - mark the segment ready (release store, R-SEG1).
 * Call it after the header AND the layout behind it are fully written:
 * everything written before is visible to a reader whose
 * kvr_seg_hdr_check() returned 0.
 */
void kvr_seg_hdr_publish(struct kvr_seg_hdr_shm *h);

/*
 * kvr_seg_hdr_check - validate a header found at the start of a mapping.
 * @h: start of the mapping (may be read-only).
 * @mapped_bytes: size of the mapping.
 * @kind, @layout_hash: what the caller expects.
 * @e: detail buffer or NULL; on failure says what was expected and found.
 * Order: size of the mapping, ready (acquire, A-SEG1), magic, ABI major,
 * kind, layout hash, hdr_bytes and seg_bytes. A newer minor is accepted.
 * Return: 0 if the segment can be used;
 *  -ERANGE  the mapping is smaller than a header, or seg_bytes differs from
 *           @mapped_bytes;
 *  -EAGAIN  not ready yet (the creator is still formatting it): retry;
 *  -EPROTO  bad magic, ABI major, kind, layout hash or hdr_bytes
 *           (e.g. "abi 3.1, expected 1.x").
 */
int kvr_seg_hdr_check(const struct kvr_seg_hdr_shm *h, size_t mapped_bytes,
		      uint32_t kind, uint64_t layout_hash, struct kvr_err *e);

/* ==== Names ==== */

/* Prefix of every segment kvr creates, and the pair's suffixes. */
#define KVR_SEG_PREFIX	    "kvring-"
#define KVR_SEG_CTL_SUFFIX  ".ctl"
#define KVR_SEG_POOL_SUFFIX ".pool"
/* Directory used when a dir argument is NULL. */
#define KVR_SEG_DEFAULT_DIR "/dev/shm"

/*
 * kvr_seg_name_valid - whether @name may name a segment: 1..63 bytes of
 * [A-Za-z0-9._-], not "." or "..", no ".." anywhere, no '/'.
 */
bool kvr_seg_name_valid(const char *name);

/*
 * kvr_seg_default_base - write the default base name, "kvring-<uid>" for
 * the effective uid, into @buf of @n bytes.
 * Return: the length (> 0), or -EINVAL if it does not fit.
 */
int kvr_seg_default_base(char *buf, size_t n);

/*
 * kvr_seg_ctl_name / kvr_seg_pool_name - write "<base>.ctl" or
 * "<base>.pool" into @buf of @n bytes.
 * Return: the length (> 0), or -EINVAL if @base is not a valid name, the
 * result is not a valid name, or it does not fit in @n.
 */
int kvr_seg_ctl_name(const char *base, char *buf, size_t n);
int kvr_seg_pool_name(const char *base, char *buf, size_t n);

/* ==== Process-local segment handle ==== */

enum kvr_seg_backend {
	KVR_SEG_BACKEND_NONE = 0,    /* not mapped (after destroy/detach) */
	KVR_SEG_BACKEND_SHM = 1,     /* named file in a tmpfs directory */
	KVR_SEG_BACKEND_MEMFD = 2,   /* anonymous memfd */
	KVR_SEG_BACKEND_PRIVATE = 3, /* private anonymous memory */
	KVR_SEG_BACKEND_FD = 4,	     /* mapped from a received fd */
};

/* Creation flags. */
#define KVR_SEG_TRY_HUGETLB  0x1u /* memfd: use MFD_HUGETLB if pages suffice */
#define KVR_SEG_NEED_HUGETLB 0x2u /* memfd: MFD_HUGETLB or fail */
/* memfd: leave out F_SEAL_SEAL, so that kvr_chanmap_ro_fd() can add
 * F_SEAL_FUTURE_WRITE once the creator has its own writable mapping. */
#define KVR_SEG_SEAL_LATER 0x4u

/* Longest directory path kept in struct kvr_seg (NUL included). */
#define KVR_SEG_DIR_MAX 256

/*
 * This process's view of one segment. Owned by the caller (embed it or put
 * it on the stack); filled by a create/attach/open call, emptied by
 * kvr_seg_destroy() or kvr_seg_detach(). Fields are read-only for callers.
 * The mapping lives until destroy/detach, whatever happens to the fd or
 * the file name.
 */
struct kvr_seg {
	void *base;   /* start of the mapping, NULL if none */
	size_t bytes; /* length of the mapping */
	int fd;	      /* open fd, -1 once closed/never had */
	enum kvr_seg_backend backend;
	bool owner;			 /* we created it: destroy unlinks */
	bool writable;			 /* mapped PROT_READ|PROT_WRITE */
	bool huge;			 /* huge pages requested and allowed */
	bool hugetlb;			 /* backed by hugetlbfs (guaranteed) */
	size_t page_bytes;		 /* page size backing it: 4096, 2M.. */
	char name[KVR_SEG_NAME_MAX + 1]; /* "" for private memory */
	char dir[KVR_SEG_DIR_MAX];	 /* directory for SHM, else "" */
	/* Named segments we created (owner, SHM): a second open of the
	 * file, never passed to anyone, holding an OFD read lock for our
	 * whole life. The sweep judges liveness by that lock, which a
	 * worker cannot take away (docs/segments.md, "Liveness"). Only
	 * meaningful when owner && backend == SHM; -1 when none. */
	int live_fd;
};

/*
 * kvr_seg_live_locked - whether some process holds the liveness lock of
 * the open file @fd (an OFD read lock, see struct kvr_seg.live_fd). A
 * probe: F_OFD_GETLK takes nothing, so it disturbs no one.
 * Return: 1 held, 0 not held, or -errno.
 */
int kvr_seg_live_locked(int fd);

/*
 * kvr_seg_backend_name - "shm", "memfd", "private", "fd" or "none", for
 * logs (DESIGN rule 9: each side logs the transport it uses).
 */
const char *kvr_seg_backend_name(enum kvr_seg_backend b);

/*
 * kvr_seg_create_shm - create a new named segment @dir/@name.
 * @dir: a tmpfs directory, NULL for /dev/shm.
 * @name: kvr_seg_name_valid() name; the file must not exist (O_EXCL).
 * @bytes: size (> 0). Every page is reserved with posix_fallocate, so a
 *         full filesystem fails here, never as a SIGBUS later.
 * @mode: permission bits; 0 means 0600; 0660 when a group shares it.
 *        Applied with fchmod, so the umask does not change it.
 * @gid: group to give the file, or (gid_t)-1 to leave it.
 * @out: filled on success, untouched on failure.
 * Keeps the fd open (kvr_seg_fd()) so the server can pass it over
 * SCM_RIGHTS. For mappings of 2 MiB and more, asks for transparent huge
 * pages with madvise (effective only if the tmpfs mount allows them).
 * On any failure the file is unlinked and nothing stays mapped or open.
 * Return: 0;
 *  -EINVAL  bad name, dir, bytes or mode;
 *  -EEXIST  the name exists (left untouched: sweep first, or another
 *           server owns it);
 *  -ENOSPC  not enough room on the filesystem (message: bytes needed and
 *           available, and what to do);
 *  -EPERM/-EACCES  directory or chown not allowed; other -errno.
 */
int kvr_seg_create_shm(const char *dir, const char *name, size_t bytes,
		       mode_t mode, gid_t gid, struct kvr_seg *out,
		       struct kvr_err *e);

/*
 * kvr__seg_create_hook - tests only: when set, called with the new file's
 * path right after a named segment was created (O_EXCL) and before the
 * steps that can still fail, so a test can replace the name there and
 * check that the failure path leaves the replacement alone.
 */
extern void (*kvr__seg_create_hook)(const char *path);

/*
 * kvr_seg_create_memfd - create an anonymous shared segment.
 * @name: shown in /proc/PID/fd and maps ("memfd:<name>"); any valid name.
 * @bytes: size (> 0). With KVR_SEG_TRY_HUGETLB and enough free huge pages
 *         (HugePages_Free - HugePages_Rsvd) the memfd is MFD_HUGETLB and
 *         out->bytes is @bytes rounded up to the huge page size; otherwise
 *         (or if the hugetlb attempt fails) normal pages are used.
 * Pages are reserved (fallocate; a hugetlb memfd by its shared mmap, which
 * leaves the zeroing to the first touch), and the fd is sealed with
 * F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, so no process holding it can
 * resize it into a SIGBUS. Keeps the fd open for SCM_RIGHTS. Return: 0; -EINVAL
 * bad arguments; -ENOSPC/-ENOMEM no memory to reserve; other -errno.
 */
int kvr_seg_create_memfd(const char *name, size_t bytes, unsigned flags,
			 struct kvr_seg *out, struct kvr_err *e);

/*
 * kvr_seg_create_private - private anonymous memory of @bytes (> 0): the
 * copy transport's server-side pool. No fd, no name, nothing to share.
 * Return: 0; -EINVAL; -ENOMEM.
 */
int kvr_seg_create_private(size_t bytes, struct kvr_seg *out,
			   struct kvr_err *e);

/*
 * kvr_seg_attach_fd - map a segment received as an fd.
 * TAKES OWNERSHIP of @fd: it is closed before return, on success and on
 * every failure, so no descriptor outlives the attach (the seed's lesson).
 * @bytes: length to map; 0 maps the whole file. Must not exceed the file.
 * @prot: PROT_READ or PROT_READ | PROT_WRITE.
 * Return: 0 (out->fd is -1); -EINVAL bad fd, prot or not a regular
 * file; -ERANGE the file is smaller than @bytes, or empty; other -errno.
 */
int kvr_seg_attach_fd(int fd, size_t bytes, int prot, struct kvr_seg *out,
		      struct kvr_err *e);

/*
 * kvr_seg_open_name - map the whole named segment @dir/@name (NULL dir =
 * /dev/shm), read-only if @rdonly (the inspector), else read-write.
 * Opens with O_NOFOLLOW, refuses non-regular files, closes the fd after
 * mmap. The result is not owned: destroy never unlinks it.
 * Return: 0; -EINVAL bad name or not a regular file; -ENOENT; -ERANGE
 * empty file; -ELOOP a symlink; other -errno.
 */
int kvr_seg_open_name(const char *dir, const char *name, bool rdonly,
		      struct kvr_seg *out, struct kvr_err *e);

/*
 * kvr_seg_prefault - touch every page of [@base, @base + @bytes) so later
 * accesses take no page fault (DESIGN: "No page faults in the steady
 * state"). With @write, does an atomic add of zero on one 8-byte word per
 * 4 KiB: the page is write-faulted but no byte changes, even one another
 * process is writing at that moment. Without @write, one relaxed atomic
 * load per page. @write needs a writable mapping (else SIGSEGV).
 * @elapsed_ns: receives the time taken (may be NULL).
 * The server calls it with write=true on creation; workers on attach.
 * Return: 0, or -EINVAL if @base is NULL with @bytes > 0 or @base is not
 * 8-byte aligned.
 */
int kvr_seg_prefault(void *base, size_t bytes, bool write,
		     uint64_t *elapsed_ns);

/*
 * kvr_seg_prefault_pages - kvr_seg_prefault() with one touch per
 * @page_bytes (a power of two >= 4096: the mapping's page size, e.g.
 * struct kvr_seg.page_bytes). On a 2 MiB hugetlb mapping that is 512
 * touches per GiB instead of 262144. A @page_bytes larger than the real
 * page size would leave pages untouched: pass what the segment reports.
 * Return: 0, or -EINVAL as kvr_seg_prefault(), or for a bad @page_bytes.
 */
int kvr_seg_prefault_pages(void *base, size_t bytes, size_t page_bytes,
			   bool write, uint64_t *elapsed_ns);

/*
 * kvr_seg_destroy - unmap, close the fd if open, and unlink the file if we
 * created it (owner, SHM backend). NULL-safe and idempotent: a second call
 * does nothing. Errors (an already removed file) are ignored.
 * The server destroys the pool before the control segment (docs/segments.md,
 * ordering contract).
 */
void kvr_seg_destroy(struct kvr_seg *s);

/*
 * kvr_seg_detach - unmap and close the fd if open, but never unlink: this
 * process stops using the segment, the named file (if any) stays.
 * NULL-safe and idempotent.
 */
void kvr_seg_detach(struct kvr_seg *s);

/* kvr_seg_fd - the open fd, or -EBADF if the segment has none. */
int kvr_seg_fd(const struct kvr_seg *s);

/* ==== Stale segments (DESIGN rule 8) ==== */

/* How many names a sweep report keeps per list. */
#define KVR_SWEEP_MAX_NAMES 16

/*
 * Result of one kvr_seg_sweep(). Owned by the caller; counts are per
 * directory entry whose name starts with the prefix.
 */
struct kvr_sweep_report {
	unsigned removed;    /* unlinked: stale .ctl, its .pool, orphans */
	unsigned kept_live;  /* .ctl of a live owner, and its .pool */
	unsigned skipped;    /* not ours to judge: other uid, symlink, ... */
	unsigned bad_header; /* .ctl too small or bad magic: left alone */
	unsigned errors;     /* unlink or read failed (entry left) */
	unsigned nr_removed_names; /* entries used in removed_names */
	char removed_names[KVR_SWEEP_MAX_NAMES][KVR_SEG_NAME_MAX + 1];
	unsigned nr_bad_names; /* entries used in bad_names */
	char bad_names[KVR_SWEEP_MAX_NAMES][KVR_SEG_NAME_MAX + 1];
};

/*
 * kvr_sweep_note_name - append @name (a valid segment name) to a report's
 * list @names of *@nr entries (removed_names or bad_names); past
 * KVR_SWEEP_MAX_NAMES the name is counted elsewhere but not kept.
 */
void kvr_sweep_note_name(char names[][KVR_SEG_NAME_MAX + 1], unsigned *nr,
			 const char *name);

/*
 * kvr_seg_sweep - remove stale segments of dead owners from @dir.
 * @dir: NULL for /dev/shm.
 * @prefix: e.g. "kvring-" or "kvring-0"; must be non-empty and valid name
 *          characters: nothing without the prefix is ever touched.
 * @rep: filled with counts and names (may be NULL).
 * Removes only REGULAR files (never follows symlinks) owned by our
 * effective uid, with valid names, that are either
 *  - "<base>.ctl" whose header's creator (pid, start time) is not alive,
 *    together with its "<base>.pool" (the pool first, the .ctl last), or
 *  - "<base>.pool" with no "<base>.ctl" at all (an orphan).
 * A .ctl with a live owner, too small, or with a bad magic is left alone
 * (a bad one is listed in rep->bad_names: the creator may be mid-format).
 * Every unlink is relative to a directory fd and preceded by a fresh
 * fstatat(AT_SYMLINK_NOFOLLOW) that must still see the same file.
 * Return: the number of entries removed (>= 0), or -errno if @dir cannot
 * be read (-EINVAL for a bad prefix).
 */
int kvr_seg_sweep(const char *dir, const char *prefix,
		  struct kvr_sweep_report *rep);

/* What kvr_seg_list() knows about one entry. */
enum kvr_seg_role {
	KVR_SEG_ROLE_OTHER = 0, /* neither .ctl nor .pool */
	KVR_SEG_ROLE_CTL = 1,
	KVR_SEG_ROLE_POOL = 2,
};

enum kvr_seg_state {
	KVR_SEG_STATE_UNKNOWN = 0, /* no readable header, not ours, ... */
	KVR_SEG_STATE_LIVE = 1,	   /* owner (pid, start time) alive */
	KVR_SEG_STATE_STALE = 2,   /* owner dead: a sweep removes it */
	KVR_SEG_STATE_ORPHAN = 3,  /* .pool without .ctl: a sweep removes it */
};

struct kvr_seg_info {
	char name[KVR_SEG_NAME_MAX + 1];
	enum kvr_seg_role role;
	enum kvr_seg_state state;
	uint64_t bytes; /* file size */
	uid_t uid;	/* file owner */
	mode_t mode;	/* permission bits */
	bool has_hdr;	/* .ctl with magic and a full header */
	bool ready;	/* header published (has_hdr only) */
	uint32_t abi;	/* header fields, has_hdr only */
	uint32_t kind;
	int32_t owner_pid; /* .ctl: its creator; .pool: its .ctl's */
	uint64_t owner_start;
	bool live_locked; /* the .ctl's liveness lock is held (a live server) */
};

/*
 * Called once per entry; return 0 to go on, a negative value to stop (that
 * value is then returned by kvr_seg_list()).
 */
typedef int kvr_seg_list_cb(void *arg, const struct kvr_seg_info *info);

/*
 * kvr_seg_list - report every regular file in @dir (NULL = /dev/shm) whose
 * name starts with @prefix and is valid, in name order, with its size,
 * owner and alive/stale state. Reads only (O_RDONLY, no mapping).
 * @prefix NULL: whatever the name (kvringd --name is free), but a name
 * without KVR_SEG_PREFIX only when the file proves to be kvring's: a
 * .ctl whose header this caller can read (has_hdr), or a .pool whose
 * .ctl is such a file. Other software's files are never reported.
 * Return: the number of entries reported, the callback's negative value,
 * or -errno (-EINVAL bad prefix, -ENOMEM, or opening @dir failed).
 */
int kvr_seg_list(const char *dir, const char *prefix, kvr_seg_list_cb *cb,
		 void *arg);

/* ==== Huge pages (segment_huge.c) ==== */

/* The host's default hugetlb pool, from /proc/meminfo. */
struct kvr_hugetlb_info {
	size_t page_bytes;    /* Hugepagesize; 0 if the kernel has none */
	uint64_t total_pages; /* HugePages_Total */
	uint64_t free_pages;  /* HugePages_Free - HugePages_Rsvd */
};

/*
 * kvr_seg_hugetlb_info - read the default huge page size and how many
 * pages are free for a new reservation (free minus already reserved).
 * Return: 0; -ENOENT if /proc/meminfo has no hugetlb lines (kernel built
 * without it); other -errno if it cannot be read. @out untouched on error.
 */
int kvr_seg_hugetlb_info(struct kvr_hugetlb_info *out);

/*
 * kvr_seg_huge_pages_for - huge pages of @page_bytes needed for @bytes
 * (rounded up); 0 if @page_bytes is 0.
 */
uint64_t kvr_seg_huge_pages_for(uint64_t bytes, size_t page_bytes);

/*
 * kvr_seg_hugetlbfs_page - whether @dir is a hugetlbfs mount (statfs
 * magic), and its page size in *page_bytes.
 * Return: 0; -EINVAL if @dir is not on hugetlbfs; other -errno (statfs).
 */
int kvr_seg_hugetlbfs_page(const char *dir, size_t *page_bytes);

/*
 * kvr_seg_huge_dir_find - the first hugetlbfs mount in /proc/self/mounts
 * whose page size is @page_bytes (0: the default size) and which this
 * process may create files in (access W_OK | X_OK). Written to @buf.
 * Return: the length (> 0); -ENOENT if none; -EINVAL if @buf is too small.
 */
int kvr_seg_huge_dir_find(size_t page_bytes, char *buf, size_t n);

/*
 * kvr_seg_create_hugetlbfs - kvr_seg_create_shm() on a hugetlbfs mount:
 * the same name rules (valid name, O_EXCL | O_NOFOLLOW, exact mode with
 * fchmod, optional gid), so the pool is a named, inspectable file.
 * @bytes is rounded up to the mount's page size (out->bytes says how
 * much), every huge page is reserved by the shared mmap (so a shortage is
 * -ENOSPC here, never a SIGBUS later) but not yet zeroed: the kernel
 * zeroes each page at its first touch (kvringd does that in a background
 * thread), and out->hugetlb is true.
 * The caller should check free pages first (kvr_seg_hugetlb_info).
 * Return: 0; -EINVAL bad name/size/mode, or @dir is not hugetlbfs;
 * -EEXIST the name exists; -ENOSPC not enough free huge pages (message
 * says how many are needed and free); other -errno. On failure the file
 * is unlinked and nothing stays mapped or open.
 */
int kvr_seg_create_hugetlbfs(const char *dir, const char *name, size_t bytes,
			     mode_t mode, gid_t gid, struct kvr_seg *out,
			     struct kvr_err *e);

/*
 * kvr_seg_sweep_pools - remove stale "<base>.pool" files from @pool_dir
 * (a hugetlbfs mount) whose control segment lives in @ctl_dir (NULL =
 * /dev/shm). The same rules as kvr_seg_sweep(): only regular files of our
 * uid with valid names starting with @prefix; a pool is removed when its
 * "<base>.ctl" in @ctl_dir is absent (orphan: the server creates the .ctl
 * first and removes it last) or judged STALE by kvr_seg_list(); every
 * unlink follows a fresh fstatat that still sees the same file. Run it
 * before kvr_seg_sweep(@ctl_dir): that one removes the stale .ctl.
 * Return: the number removed (>= 0) or -errno (@pool_dir unreadable,
 * -EINVAL bad prefix).
 */
int kvr_seg_sweep_pools(const char *pool_dir, const char *ctl_dir,
			const char *prefix, struct kvr_sweep_report *rep);

#endif /* KVRING_SEGMENT_H */
