/* SPDX-License-Identifier: MIT */
/*
 * test_disk_fmt.c - the disk tier's record header (server/disk/disk_fmt.c,
 * docs/layout.md "Disk records"): what a made header holds, that it
 * checks, that every single flipped bit of it fails the check, that a
 * never-written (all-zero) header is told apart from a torn one, and the
 * limits on length and namespace; and the --disk* options.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <criterion/criterion.h>

#include <kvring/disk.h>

static const struct kvr_key key = {.lo = 0x1122334455667788ull,
				   .hi = 0x99aabbccddeeff00ull};

Test(disk_fmt, a_made_header_holds_its_fields_and_checks)
{
	struct kvr_disk_hdr h;

	kvr_disk_hdr_make(0xabcdef, &key, 4096, 0x5151, 77, &h);
	cr_expect_eq(h.magic, KVR_DISK_MAGIC);
	cr_expect_eq(h.version, KVR_DISK_VERSION);
	cr_expect_eq(h.hdr_bytes, 64);
	cr_expect_eq(h.ns_fp, 0xabcdef);
	cr_expect_eq(h.key_lo, key.lo);
	cr_expect_eq(h.key_hi, key.hi);
	cr_expect_eq(h.len, 4096);
	cr_expect_eq(h.sum, 0x5151);
	cr_expect_eq(h.seq, 77);
	cr_expect_eq(offsetof(struct kvr_disk_hdr, hdr_sum), 56);
	cr_expect_eq(kvr_disk_hdr_check(&h, 1 << 20), 0);
	/* Little-endian "KVDK" at offset 0. */
	cr_expect_eq(memcmp(&h, "KVDK", 4), 0);
}

Test(disk_fmt, every_flipped_bit_fails_the_check)
{
	struct kvr_disk_hdr h, x;

	kvr_disk_hdr_make(0xabcdef, &key, 4096, 0x5151, 77, &h);
	for (size_t bit = 0; bit < sizeof(h) * 8; bit++) {
		memcpy(&x, &h, sizeof(h));
		((unsigned char *)&x)[bit / 8] ^=
		    (unsigned char)(1u << (bit % 8));
		cr_expect_eq(kvr_disk_hdr_check(&x, 1 << 20), -EBADMSG,
			     "bit %zu", bit);
	}
}

Test(disk_fmt, never_written_is_not_torn)
{
	struct kvr_disk_hdr z, h;

	memset(&z, 0, sizeof(z));
	cr_expect_eq(kvr_disk_hdr_check(&z, 1 << 20), -ENODATA);
	/* Half a header (a torn write of its block) is corrupt. */
	kvr_disk_hdr_make(0xabcdef, &key, 4096, 0x5151, 77, &h);
	memset((char *)&h + 32, 0, 32);
	cr_expect_eq(kvr_disk_hdr_check(&h, 1 << 20), -EBADMSG);
}

Test(disk_fmt, length_and_namespace_limits)
{
	struct kvr_disk_hdr h;

	kvr_disk_hdr_make(0xabcdef, &key, (1 << 20) + 1, 1, 1, &h);
	cr_expect_eq(kvr_disk_hdr_check(&h, 1 << 20), -EBADMSG,
		     "longer than a record");
	kvr_disk_hdr_make(0xabcdef, &key, 0, 1, 1, &h);
	cr_expect_eq(kvr_disk_hdr_check(&h, 1 << 20), -EBADMSG, "empty");
	kvr_disk_hdr_make(0, &key, 10, 1, 1, &h);
	cr_expect_eq(kvr_disk_hdr_check(&h, 1 << 20), -EBADMSG, "no namespace");
}

Test(disk_fmt, the_payload_sum_is_xxh3_64)
{
	/* XXH3-64 of the empty input and of "a" (xxHash's test vectors). */
	cr_expect_eq(kvr_disk_sum("", 0), 0x2d06800538d394c2ull);
	cr_expect_neq(kvr_disk_sum("a", 1), kvr_disk_sum("b", 1));
}

Test(disk_fmt, options)
{
	struct kvr_disk_conf c;
	char err[256];

	kvr_disk_conf_defaults(&c);
	cr_expect_eq(c.dir[0], '\0');
	cr_expect_eq(c.mode, KVR_DISK_EVICT);
	cr_expect_eq(c.size_bytes, 1ull << 30);
	cr_expect_eq(c.chunk_bytes, 2ull << 20);
	cr_expect_eq(kvr_disk_conf_opt(&c, "disk", "/var/cache/kvring", err,
				       sizeof(err)),
		     0);
	cr_expect_str_eq(c.dir, "/var/cache/kvring");
	cr_expect_eq(
	    kvr_disk_conf_opt(&c, "disk-size", "64G", err, sizeof(err)), 0);
	cr_expect_eq(c.size_bytes, 64ull << 30);
	cr_expect_eq(
	    kvr_disk_conf_opt(&c, "disk-mode", "commit", err, sizeof(err)), 0);
	cr_expect_eq(c.mode, KVR_DISK_COMMIT);
	cr_expect_eq(
	    kvr_disk_conf_opt(&c, "disk-chunk", "1M", err, sizeof(err)), 0);
	cr_expect_eq(c.chunk_bytes, 1u << 20);
	cr_expect_eq(kvr_disk_conf_check(&c, err, sizeof(err)), 0);

	cr_expect_eq(kvr_disk_conf_opt(&c, "disk", "rel/dir", err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "absolute"), "%s", err);
	cr_expect_eq(
	    kvr_disk_conf_opt(&c, "disk-mode", "later", err, sizeof(err)),
	    -EINVAL);
	cr_expect(strstr(err, "evict"), "%s", err);
	cr_expect_eq(
	    kvr_disk_conf_opt(&c, "disk-chunk", "1000", err, sizeof(err)),
	    -EINVAL, "not a multiple of 4K");
	cr_expect_eq(kvr_disk_conf_opt(&c, "disk-size", "1M", err, sizeof(err)),
		     -EINVAL, "under 16M");
	cr_expect_eq(c.size_bytes, 64ull << 30, "unchanged on error");
	kvr_disk_conf_opt(&c, "disk-size", "16M", err, sizeof(err));
	kvr_disk_conf_opt(&c, "disk-chunk", "8M", err, sizeof(err));
	cr_expect_eq(kvr_disk_conf_check(&c, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "fewer than 4 records"), "%s", err);
}
