#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench_sglang.py - kvring.sglang's zero-copy page transfers, measured
against a real kvringd (docs/performance.md; kvring-bench kv prints these
rows after its own).

For each page size, an SGLang host pool (the stand-in sglang package,
page_first, Llama-3-8B-shaped by default: 32 layers, 8 kv heads, 128
dims, fp16) backs up --pages pages with batch_set_v1 (sglang_set: new
keys every run, so each run really stores) and reads them into other
pages of the pool with batch_get_v1 (sglang_get), beside a memcpy of the
same bytes as one contiguous run, timed in the same run, interleaved run
by run. Figures are medians of --iters runs: pages per second, GB/s, and
ratio_to_memcpy (the median of same-run ratios). Every read page is
compared with its source, bit for bit; wrong data exits 1, a slow figure
never does; without torch it exits 77.

  KVRING_LIB=build/worker/libkvring.so KVRINGD=build/server/kvringd \\
      tools/bench_sglang.py [--json] [--page-sizes 2,16] [--pages 64]
"""

import argparse
import ctypes
import json
import logging
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "python"))  # stand-in sglang
sys.path.insert(0, os.path.join(REPO, "worker", "python"))

try:
    import torch  # noqa: E402
except ImportError:
    print("bench_sglang: /usr/bin/python3 cannot import torch",
          file=sys.stderr)
    sys.exit(77)  # kvring-bench kv reports the rows as not run

torch.set_num_threads(1)


def run(args, page_size):
    import sglang_engine as se
    from test_binding import Server

    spec = se.InstanceSpec(socket="", layers=args.layers,
                           heads=args.kv_heads, head_dim=args.head_size,
                           dtype="float16", layout=args.layout,
                           page_size=page_size, pages=2 * args.pages)
    page_bytes = 2 * args.layers * page_size * args.kv_heads * \
        args.head_size * 2
    nbytes = page_bytes * args.pages
    srv = Server()
    # Room for the pages of a few runs; older runs' pages are evicted.
    srv.pool = "%dM" % max(256, (4 * nbytes >> 20) + 64)
    # As kvringd runs by default: the pool pre-faulted, on huge pages
    # when the host has them.
    srv.extra = ["--prefault", "--huge-pages", "auto"]
    srv.start()
    try:
        spec.socket = srv.sock
        inst = se.Instance(spec)
        src = list(range(args.pages))
        dst = list(range(args.pages, 2 * args.pages))
        g = torch.Generator().manual_seed(page_size)
        for p in src:
            v = se.page_view(inst.pool, p, False)
            v.copy_(torch.randn(v.shape, generator=g).half())
        hi_src = se.host_indices(src, page_size)
        hi_dst = se.host_indices(dst, page_size)
        a = torch.empty(nbytes, dtype=torch.uint8)
        b = torch.empty(nbytes, dtype=torch.uint8)
        a.fill_(1)
        b.fill_(2)  # both touched before timing
        t = {"set": [], "get": [], "memcpy": []}
        ratio = {"set": [], "get": []}
        for it in range(args.iters + 1):  # the first run warms up
            keys = ["bench-%d-%d-%d" % (page_size, it, i)
                    for i in range(args.pages)]
            t0 = time.perf_counter_ns()
            res = inst.backend.batch_set_v1(keys, hi_src)
            t1 = time.perf_counter_ns()
            if res != [True] * args.pages:
                print("bench_sglang: batch_set_v1 stored %d of %d pages"
                      % (sum(res), args.pages), file=sys.stderr)
                return 1
            t2 = time.perf_counter_ns()
            res = inst.backend.batch_get_v1(keys, hi_dst)
            t3 = time.perf_counter_ns()
            ctypes.memmove(b.data_ptr(), a.data_ptr(), nbytes)
            t4 = time.perf_counter_ns()
            if res != [True] * args.pages:
                print("bench_sglang: batch_get_v1 read %d of %d pages"
                      % (sum(res), args.pages), file=sys.stderr)
                return 1
            for s, d in zip(src, dst):
                if not torch.equal(
                        se.page_view(inst.pool, s, False).view(torch.int16),
                        se.page_view(inst.pool, d, False).view(torch.int16)):
                    print("bench_sglang: page %d read back differs from "
                          "page %d stored" % (d, s), file=sys.stderr)
                    return 1
                se.page_view(inst.pool, d, False).fill_(0)
            if it == 0:
                continue
            t["set"].append(t1 - t0)
            t["get"].append(t3 - t2)
            t["memcpy"].append(t4 - t3)
            ratio["set"].append((t4 - t3) / (t1 - t0))
            ratio["get"].append((t4 - t3) / (t3 - t2))
        inst.close()
    finally:
        srv.stop()
    mc = statistics.median(t["memcpy"])
    for op in ("set", "get"):
        ns = statistics.median(t[op])
        row = dict(schema=1, scenario="kv", subject="sglang_" + op,
                   layout=args.layout, page_tokens=page_size,
                   page_bytes=page_bytes, pages=args.pages,
                   pages_s=round(args.pages / ns * 1e9),
                   gbps=round(nbytes / ns, 3),
                   memcpy_gbps=round(nbytes / mc, 3),
                   ratio_to_memcpy=round(statistics.median(ratio[op]), 3))
        if args.json:
            print(json.dumps(row, separators=(",", ":")), flush=True)
        else:
            print("  sglang_%s %4d KiB pages x %d  %8.0f pages/s  %6.2f "
                  "GB/s  %.2fx memcpy (%.2f GB/s)"
                  % (op, page_bytes >> 10, args.pages, row["pages_s"],
                     row["gbps"], row["ratio_to_memcpy"],
                     row["memcpy_gbps"]), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-size", type=int, default=128)
    ap.add_argument("--page-sizes", default="2,16",
                    help="tokens per page, comma-separated (2,16: 256 KiB "
                    "and 2 MiB pages at the default shape)")
    ap.add_argument("--pages", type=int, default=64)
    ap.add_argument("--layout", default="page_first",
                    choices=("page_first", "layer_first",
                             "page_first_direct"))
    ap.add_argument("--iters", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    sizes = [int(x) for x in args.page_sizes.split(",") if x]
    if not sizes or min(sizes) <= 0 or args.pages <= 0 or args.iters <= 0:
        ap.error("page sizes, --pages and --iters must be positive")
    for ps in sizes:
        rc = run(args, ps)
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
