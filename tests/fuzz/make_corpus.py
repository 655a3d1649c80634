#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the seed corpus of each fuzz target (tests/fuzz/corpus/<target>/).

Seeds are small valid messages, so the fuzzer starts from inputs that pass
the first checks and mutates from there. Run again after a protocol change:
the layouts below mirror lib/include/kvring/proto.h and rings/ring.h.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def req(op, n, flags=0, handle=0):
    body = struct.pack("<QQIIQ", 7, handle, n, flags, 0)
    body += b"".join(struct.pack("<QQ", i, i * 3) for i in range(n))
    if op == 3:
        body += b"".join(struct.pack("<Q", 4096 * (i + 1)) for i in range(n))
    return struct.pack("<H", op) + body


write("fuzz_req", "lookup", req(1, 3, flags=1))
write("fuzz_req", "store", req(3, 4))
write("fuzz_req", "commit", req(4, 0, handle=9))
write("fuzz_req", "retrieve_lease", req(6, 0, flags=2, handle=5))
write("fuzz_req", "ping", req(8, 0))


def commit_words(flags, handle, words):
    body = struct.pack("<QQIIQ", 7, handle, len(words), flags, 0)
    return struct.pack("<H", 4) + body + b"".join(struct.pack("<Q", w) for w in words)


# Store-ahead (protocol 7): a bind (key lo, key hi, size), a bind with its
# sum, a commit that only asks for a staged slot.
write("fuzz_req", "bind", commit_words(0x20, 9, [5, 7, 65536]))
write("fuzz_req", "bind_sum", commit_words(0x20 | 0x40 | 0x8, 9, [5, 7, 65536, 0x5EED]))
write("fuzz_req", "stage", commit_words(0x40, 9, []))

ns = b"llama-3-8b".ljust(64, b"\0") + struct.pack("<8I", 32, 8, 128, 2, 0, 1, 256, 0)
hello = struct.pack("<IIIi", 0x4B565250, 1, 0, 1234) + ns
write("fuzz_hello", "hello", b"\x01" + hello)
welcome = struct.pack("<IIiIII", 0x4B565250, 1, 0, 1, 0, 1)
welcome += struct.pack("<QQQ", 1 << 30, 4 << 20, 4096)
welcome += struct.pack("<6I", 4096, 256, 65536, 65536, 100, 30000)
welcome += bytes(16) + b"kvring-0.pool".ljust(64, b"\0") + bytes(128)
write("fuzz_hello", "welcome", b"\x00" + welcome)


def rec(typ, payload):
    ln = len(payload)
    check = (0xA5A5 ^ typ ^ (ln & 0xFFFF) ^ (ln >> 16)) & 0xFFFF
    pad = (-ln) % 8
    return struct.pack("<IHH", ln, typ, check) + payload + bytes(pad)


recs = rec(1, b"x" * 40) + rec(3, b"y" * 13) + rec(2, b"")
write("fuzz_ring", "three", struct.pack("<QQ", len(recs), 0) + recs)
write("fuzz_ring", "wrapped", struct.pack("<QQ", (2**64 - 16 + len(recs)) % 2**64, 2**64 - 16) + recs)
# A 40-byte record, the line padding after it (24 bytes, to offset 64),
# and a record starting the next line.
recs = rec(1, b"p" * 32) + rec(0xFFFF, bytes(16)) + rec(2, b"q" * 8)
write("fuzz_ring", "line_pad", struct.pack("<QQ", len(recs), 0) + recs)

# fuzz_l2_resp: byte 0 picks the decoder (0 line, 1 span, 2 CLUSTER SLOTS,
# 3 redirect text), the rest is a Redis reply (server/l2_resp.c).
write("fuzz_l2_resp", "line_ok", b"\x00+OK\r\n")
write("fuzz_l2_resp", "span_arr", b"\x01*2\r\n$3\r\nabc\r\n:5\r\n")
write("fuzz_l2_resp", "bulk", b"\x01$4\r\nKVL2\r\n")
write("fuzz_l2_resp", "slots", b"\x02*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n"
      b"$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n")
write("fuzz_l2_resp", "moved", b"\x03MOVED 3999 127.0.0.1:6381")
write("fuzz_l2_resp", "ask", b"\x03ASK 1 h:2")

# fuzz_chanmap: 3-byte patches (little-endian 16-bit position, XOR byte)
# over [WELCOME 280 | first 4 KiB of the control segment | first 4 KiB of
# the channel block], starting from a consistent set (lib/chanmap.c).
def patch(pos, x):
    return struct.pack("<HB", pos, x)


write("fuzz_chanmap", "valid", b"")
write("fuzz_chanmap", "boot_id", patch(280 + 48, 1))
write("fuzz_chanmap", "block_gen", patch(280 + 4096 + 4, 2))
write("fuzz_chanmap", "channel", patch(16, 9) + patch(40, 0x10))
write("fuzz_chanmap", "dir_state", patch(280 + 344, 1) + b"\x01")

# fuzz_dispatch: a script of steps (tests/fuzz/fuzz_dispatch.c). A step's
# first byte is channel | kind << 2 (kind = (byte >> 2) % 14): 9 is a
# prepare_store (count, flags byte, keys, sizes: byte < 128 picks an edge,
# 6 = 64 KiB), 10 a hang-up, 12 a bind/stage commit (flags byte: 1 BIND,
# 2 STAGE, 4 SUMS, 8 forged handle, 16 the last staged size, 32 a count one
# off; then the handle's index among recorded ids, the key, the sum), 13
# the end of a batch (the spare is staged).
def step(ch, kind):
    return bytes([ch | kind << 2])


ahead = (step(0, 9) + bytes([1, 0, 5, 6])      # store key 5, 64 KiB
         + step(0, 12) + bytes([2, 0])         # commit it, ask a slot
         + step(0, 13)                         # the spare
         + step(0, 12) + bytes([19, 1, 9])     # bind key 9, ask again
         + step(1, 12) + bytes([17, 3, 11])    # channel 1 binds 0's slot
         + step(0, 12) + bytes([21, 3, 10]) + struct.pack("<Q", 0x5eed)
         + step(0, 10))                        # hang up holding slots
write("fuzz_dispatch", "store_ahead", ahead)
write("fuzz_dispatch", "bind_forged",
      step(0, 9) + bytes([1, 0, 3, 6]) + step(0, 12) + bytes([2, 0])
      + step(2, 12) + bytes([25]) + struct.pack("<Q", 1 << 40) + bytes([4])
      + step(0, 12) + bytes([51, 1, 4]))
# A retrieve asked with KVR_REQ_SUMS is answered in the sums form (a u64
# after each slot): store key 5 (64 KiB), commit it, then retrieve it with
# the flags byte 0x80 (more flag bits follow: 2 << 2 = SUMS) and 0x40 (a
# handle follows: 0).
write("fuzz_dispatch", "retrieve_sums",
      step(0, 9) + bytes([1, 0, 5, 6]) + step(0, 4) + bytes([0, 0, 0])
      + step(0, 6) + bytes([1, 0xC0, 2]) + struct.pack("<Q", 0) + bytes([5]))
# The largest answer: 24 keys stored (4 KiB each), then a retrieve of 32
# keys (the 24 and the first 8 again) with SUMS, 32 slots and 32 sums.
write("fuzz_dispatch", "retrieve_sums_max",
      step(0, 9) + bytes([24, 0]) + bytes(range(24)) + bytes([4] * 24)
      + step(0, 4) + bytes([0, 0, 0])
      + step(0, 6) + bytes([32, 0xC0, 2]) + struct.pack("<Q", 0)
      + bytes(list(range(24)) + list(range(8))))
