/* SPDX-License-Identifier: MIT */
/*
 * The segment header (format, publish, check), segment names, and page
 * prefaulting. The backends that create and map segments are in
 * segment_map.c, the stale-segment sweep in segment_sweep.c, process
 * liveness in proc.c.
 *
 * Nothing here prints or allocates; every failure returns -errno and
 * explains itself in struct kvr_err. The header is an ABI: its byte table
 * is in docs/segments.md and changes with KVR_ABI_MAJOR.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvring/clock.h>
#include <kvring/proc.h>
#include <kvring/segment.h>

/* Prefault stride: the smallest page size we meet (x86-64, arm64 4K). */
#define PREFAULT_STRIDE 4096u

void kvr_seg_hdr_format(struct kvr_seg_hdr_shm *h, uint32_t kind,
			uint64_t layout_hash, uint64_t seg_bytes,
			const char *name, const uint8_t boot_id[16])
{
	uint64_t start = 0;

	/*
	 * Plain stores: nobody may trust these bytes before ready is set,
	 * and ready is 0 until kvr_seg_hdr_publish(). The atomic_init is not
	 * a publication either: ready stays 0.
	 */
	memset(h, 0, sizeof(*h));
	atomic_init(&h->ready, 0);
	h->magic = KVR_SEG_MAGIC;
	h->abi = KVR_ABI;
	h->kind = kind;
	h->layout_hash = layout_hash;
	h->seg_bytes = seg_bytes;
	h->creator_pid = (int32_t)getpid();
	h->hdr_bytes = (uint32_t)sizeof(*h);
	/* 0 ("unknown") if /proc is missing: liveness then checks the pid. */
	(void)kvr_proc_start_time(getpid(), &start);
	h->creator_start = start;
	if (boot_id)
		memcpy(h->boot_id, boot_id, sizeof(h->boot_id));
	if (name)
		snprintf(h->name, sizeof(h->name), "%s", name);
}

void kvr_seg_hdr_publish(struct kvr_seg_hdr_shm *h)
{
	/*
	 * R-SEG1: publish the header and every layout byte written before;
	 * pairs with A-SEG1 in kvr_seg_hdr_check().
	 */
	atomic_store_explicit(&h->ready, KVR_SEG_READY, memory_order_release);
}

int kvr_seg_hdr_check(const struct kvr_seg_hdr_shm *h, size_t mapped_bytes,
		      uint32_t kind, uint64_t layout_hash, struct kvr_err *e)
{
	uint32_t ready, major, minor;

	if (mapped_bytes < sizeof(*h))
		return kvr_err_set(e, -ERANGE,
				   "check segment header: mapping has %zu "
				   "bytes, a header needs %zu",
				   mapped_bytes, sizeof(*h));
	/*
	 * A-SEG1: once ready is seen, every byte the creator wrote before
	 * R-SEG1 (kvr_seg_hdr_publish) is visible. The const cast is only
	 * for the C11 generic: the load does not write.
	 */
	ready = atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&h->ready,
				     memory_order_acquire);
	if (ready != KVR_SEG_READY)
		return kvr_err_set(e, -EAGAIN,
				   "check segment header: not ready yet (the "
				   "creator is still formatting it)");
	if (h->magic != KVR_SEG_MAGIC)
		return kvr_err_set(
		    e, -EPROTO,
		    "check segment header: magic 0x%016" PRIx64
		    ", expected 0x%016llx (not a kvring segment)",
		    h->magic, KVR_SEG_MAGIC);
	major = h->abi >> 16;
	minor = h->abi & 0xffffu;
	if (major != KVR_ABI_MAJOR)
		return kvr_err_set(e, -EPROTO,
				   "check segment header: abi %" PRIu32
				   ".%" PRIu32 ", expected %d.x (server and "
				   "library come from different releases)",
				   major, minor, KVR_ABI_MAJOR);
	if (h->kind != kind)
		return kvr_err_set(e, -EPROTO,
				   "check segment header: kind %" PRIu32
				   ", expected %" PRIu32,
				   h->kind, kind);
	if (h->layout_hash != layout_hash)
		return kvr_err_set(e, -EPROTO,
				   "check segment header: layout hash "
				   "0x%016" PRIx64 ", expected 0x%016" PRIx64
				   " (built from a different layout)",
				   h->layout_hash, layout_hash);
	if (h->hdr_bytes < sizeof(*h) || h->hdr_bytes > mapped_bytes)
		return kvr_err_set(e, -EPROTO,
				   "check segment header: hdr_bytes %" PRIu32
				   ", expected %zu..%zu",
				   h->hdr_bytes, sizeof(*h), mapped_bytes);
	if (h->seg_bytes != (uint64_t)mapped_bytes)
		return kvr_err_set(e, -ERANGE,
				   "check segment header: segment says %" PRIu64
				   " bytes, mapping has %zu",
				   h->seg_bytes, mapped_bytes);
	return 0;
}

static bool name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool kvr_seg_name_valid(const char *name)
{
	size_t len;

	if (!name || name[0] == '\0')
		return false;
	len = strnlen(name, KVR_SEG_NAME_MAX + 1);
	if (len > KVR_SEG_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!name_char_ok(name[i]))
			return false;
	/* ".." anywhere also rules out ".." itself; "." is the directory. */
	return strcmp(name, ".") != 0 && strstr(name, "..") == NULL;
}

int kvr_seg_default_base(char *buf, size_t n)
{
	char tmp[KVR_SEG_NAME_MAX + 1];
	int len = snprintf(tmp, sizeof(tmp), KVR_SEG_PREFIX "%lu",
			   (unsigned long)geteuid());

	/* Via tmp: buf stays untouched when it is too small. */
	if (len < 0 || (size_t)len >= n)
		return -EINVAL;
	memcpy(buf, tmp, (size_t)len + 1);
	return len;
}

static int name_with_suffix(const char *base, const char *suffix, char *buf,
			    size_t n)
{
	char tmp[KVR_SEG_NAME_MAX + 2];
	int len;

	if (!kvr_seg_name_valid(base))
		return -EINVAL;
	len = snprintf(tmp, sizeof(tmp), "%s%s", base, suffix);
	if (len < 0 || (size_t)len >= n || !kvr_seg_name_valid(tmp))
		return -EINVAL;
	memcpy(buf, tmp, (size_t)len + 1);
	return len;
}

int kvr_seg_ctl_name(const char *base, char *buf, size_t n)
{
	return name_with_suffix(base, KVR_SEG_CTL_SUFFIX, buf, n);
}

int kvr_seg_pool_name(const char *base, char *buf, size_t n)
{
	return name_with_suffix(base, KVR_SEG_POOL_SUFFIX, buf, n);
}

int kvr_seg_prefault(void *base, size_t bytes, bool write, uint64_t *elapsed_ns)
{
	return kvr_seg_prefault_pages(base, bytes, PREFAULT_STRIDE, write,
				      elapsed_ns);
}

int kvr_seg_prefault_pages(void *base, size_t bytes, size_t page_bytes,
			   bool write, uint64_t *elapsed_ns)
{
	unsigned char *p = base;
	uint64_t t0 = kvr_clock_now_ns(), zero = 0, sink = 0;

	if (bytes > 0 && (!base || ((uintptr_t)base & 7u)))
		return -EINVAL;
	if (page_bytes < PREFAULT_STRIDE || (page_bytes & (page_bytes - 1)))
		return -EINVAL;
	/*
	 * Hide the zero from the optimiser: an add of a *known* zero is an
	 * idempotent RMW that a compiler may lower to a fenced load, which
	 * would take only a read fault and leave the write fault for later.
	 */
	__asm__ volatile("" : "+r"(zero));
	for (size_t off = 0; off < bytes; off += page_bytes) {
		/*
		 * The word at off is inside the mapping's page even when fewer
		 * than 8 bytes of the file remain: mappings cover whole pages.
		 * One fault maps the whole page, whatever its size, so one
		 * word per page is enough (512 per GiB on 2 MiB pages).
		 */
		_Atomic uint64_t *w = (_Atomic uint64_t *)(void *)(p + off);

		if (write) {
			/*
			 * Relaxed: we want the page fault, not ordering. The
			 * RMW never changes the value, so a concurrent writer
			 * of this word (another process) loses nothing.
			 */
			atomic_fetch_add_explicit(w, zero,
						  memory_order_relaxed);
		} else {
			/* Relaxed: a plain untorn read is all we need. */
			sink += atomic_load_explicit(w, memory_order_relaxed);
		}
	}
	/* Keep the loads: their results must look used. */
	__asm__ volatile("" : : "r"(sink));
	if (elapsed_ns)
		*elapsed_ns = kvr_clock_now_ns() - t0;
	return 0;
}
