#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench_kv.py - paged-KV copies and the vLLM connector, measured from
Python with torch (docs/performance.md, "Paged KV").

For a Llama-3-8B-shaped cache by default (32 layers, 8 kv heads, 128 dims,
fp16, block_size 16, 256-token chunks), in one run:

  gather/scatter  kvring.kv (libkvring's C copy) against torch's own
                  indexing (index_select + copy_ into the slot view for a
                  gather, index_copy_ for a scatter) and against one
                  contiguous memcpy of the same bytes (ctypes.memmove);
  e2e             store and retrieve of a --e2e-tokens request (4096)
                  through the connector harness (tests/python/engine.py,
                  the stand-in vllm package, a real kvringd), in ms per
                  request, beside the raw copy time of the same bytes;
  --ctx-checksums (alone) whole chunks stored from and retrieved into
                  tensors through KvringContext, a real kvringd: without
                  checksums (ctx_*_plain, the baseline), with checksums
                  'on' and the tensor copied by torch (ctx_*_sum: the
                  commit hashes the slot / verify_retrieve before the
                  copy), and 'on' with the copies that sum while they
                  copy (ctx_store_fill: store_chunks, ctx_retrieve_copy:
                  retrieve_chunks), and those calls without checksums
                  (ctx_store_fill_off, ctx_retrieve_copy_off: a memcpy,
                  which is what separates the checksum's cost from
                  torch's copy_); ratio_to_plain per subject.

Every run times all subjects in turn (torch, kvring, memcpy), and each
ratio is the median of same-run pairs. kvring-bench kv runs this script
with --no-e2e to put ratio_to_torch in its own JSON lines;
--baseline-only prints only the torch figures. JSON lines with --json.
torch runs single-threaded (torch.set_num_threads(1)), as the C copy
does.
Exits 1 if any copy gives wrong data, never because a figure is slow.

  KVRING_LIB=build/worker/libkvring.so KVRINGD=build/server/kvringd \\
      tools/bench_kv.py [--json] [--chunks N] [--e2e-tokens N]
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "worker", "python"))

import torch  # noqa: E402

torch.set_num_threads(1)


def emit(args, subject, **kw):
    row = dict(schema=1, scenario="kv", subject=subject, **kw)
    if args.json:
        print(json.dumps(row, separators=(",", ":")), flush=True)
    else:
        rest = "  ".join("%s=%s" % (k, ("%.3f" % v) if isinstance(v, float)
                                    else v)
                         for k, v in kw.items())
        print("%-16s %s" % (subject, rest), flush=True)


def timeit(fn, iters):
    fn()  # warm up
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts)


def copies(args):
    L, H, D, BS, C = (args.layers, args.kv_heads, args.head_size,
                      args.block_size, args.chunk_tokens)
    bpc = C // BS
    nb = args.chunks * bpc
    NB = 2 * nb
    g = torch.Generator().manual_seed(1)
    ids = torch.randperm(NB, generator=g)[:nb]
    if args.hnd:
        raw = [torch.randn(2, NB, H, BS, D, generator=g).half()
               for _ in range(L)]
        caches = [r.permute(0, 1, 3, 2, 4) for r in raw]  # vLLM's view
    else:
        caches = [torch.randn(2, NB, BS, H, D, generator=g).half()
                  for _ in range(L)]
    shape = (2, L, C, H * D)
    chunks = [torch.empty(shape, dtype=torch.float16)
              for _ in range(args.chunks)]
    nbytes = sum(c.numel() * 2 for c in chunks)
    cids = [ids[c * bpc:(c + 1) * bpc] for c in range(args.chunks)]

    def torch_gather():
        for c, ch in enumerate(chunks):
            for k in (0, 1):
                for l in range(L):
                    ch[k, l].view(bpc, BS, H, D).copy_(
                        caches[l][k].index_select(0, cids[c]))

    def torch_scatter():
        for c, ch in enumerate(chunks):
            for k in (0, 1):
                for l in range(L):
                    caches[l][k].index_copy_(0, cids[c],
                                             ch[k, l].view(bpc, BS, H, D))

    lay = "hnd" if args.hnd else "nhd"
    common = dict(layout=lay, dtype="fp16", layers=L, kv_heads=H,
                  head_size=D, block_size=BS, chunk_tokens=C,
                  chunks=args.chunks, bytes=nbytes)
    if args.baseline_only:
        tg = timeit(torch_gather, args.iters)
        ts = timeit(torch_scatter, args.iters)
        emit(args, "torch_gather", gbps=nbytes / tg, **common)
        emit(args, "torch_scatter", gbps=nbytes / ts, **common)
        return 0

    from kvring.kv import PagedKV
    from kvring.torch import ChunkLayout
    lt = ChunkLayout(layers=L, kv_heads=H, head_size=D, dtype="fp16",
                     chunk_tokens=C)
    kv = PagedKV.merged(caches, lt)
    idl = ids.tolist()
    torch_gather()
    ref = [c.clone() for c in chunks]
    for c in chunks:
        c.zero_()
    kv.gather(idl, chunks)
    if not all(torch.equal(a, b) for a, b in zip(chunks, ref)):
        print("bench_kv: kvring gather differs from torch's", file=sys.stderr)
        return 1
    src = torch.empty(nbytes, dtype=torch.uint8).fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8).fill_(2)
    subjects = {
        "torch_gather": torch_gather,
        "gather": lambda: kv.gather(idl, chunks),
        "torch_scatter": torch_scatter,
        "scatter": lambda: kv.scatter(idl, chunks),
        "memcpy": lambda: ctypes.memmove(dst.data_ptr(), src.data_ptr(),
                                         nbytes),
    }
    ns = {k: [] for k in subjects}
    # Interleaved run by run, so a noisy neighbour hits every subject.
    for _ in range(args.iters + 1):
        for k, fn in subjects.items():
            t0 = time.perf_counter_ns()
            fn()
            ns[k].append(time.perf_counter_ns() - t0)
    ns = {k: v[1:] for k, v in ns.items()}  # the first run warms up
    med = {k: statistics.median(v) for k, v in ns.items()}
    emit(args, "memcpy", gbps=nbytes / med["memcpy"], **common)
    for subj in ("gather", "scatter"):
        emit(args, "torch_" + subj, gbps=nbytes / med["torch_" + subj],
             **common)
        emit(args, subj, gbps=nbytes / med[subj],
             memcpy_gbps=nbytes / med["memcpy"],
             ratio_to_memcpy=statistics.median(
                 m / x for m, x in zip(ns["memcpy"], ns[subj])),
             torch_gbps=nbytes / med["torch_" + subj],
             ratio_to_torch=statistics.median(
                 t / x for t, x in zip(ns["torch_" + subj], ns[subj])),
             **common)
    return 0


def e2e(args):
    sys.path.insert(0, os.path.join(REPO, "tests", "python"))
    from test_binding import Server
    import engine
    tokens = args.e2e_tokens
    chunk_bytes = (2 * args.layers * args.chunk_tokens * args.kv_heads
                   * args.head_size * 2)
    nchunks = tokens // args.chunk_tokens
    req_bytes = nchunks * chunk_bytes
    src = torch.empty(req_bytes, dtype=torch.uint8).fill_(1)
    dst = torch.empty(req_bytes, dtype=torch.uint8).fill_(2)
    raws: list = []

    def raw_copy():
        # Timed beside every request, so both see the same moment.
        t0 = time.perf_counter_ns()
        ctypes.memmove(dst.data_ptr(), src.data_ptr(), req_bytes)
        raws.append((time.perf_counter_ns() - t0) / 1e9)

    srv = Server()
    srv.pool = "%dM" % ((req_bytes * (args.e2e_reps + 2)) // (1 << 20) + 64)
    srv.start()
    try:
        spec = dict(socket=srv.sock, model="bench/llama-3-8b",
                    layers=args.layers, kv_heads=args.kv_heads,
                    head_size=args.head_size, block_size=args.block_size,
                    chunk_tokens=args.chunk_tokens,
                    num_blocks=2 * tokens // args.block_size + 2,
                    timeout_ms=20000)
        prompts = [[(r * 7919 + j * 104729) % 50000 + 1
                    for j in range(tokens)] for r in range(args.e2e_reps)]
        e1 = engine.Engine(engine.EngineSpec(**spec))
        stores = []
        try:
            for i, p in enumerate(prompts):
                r = e1.run("s%d" % i, p + [7])
                stores.append(r["save_s"])
                raw_copy()
        finally:
            e1.stop()
        e2 = engine.Engine(engine.EngineSpec(block_offset=5, **spec))
        loads = []
        try:
            for i, p in enumerate(prompts):
                r = e2.run("l%d" % i, p + [9])
                if r["external_tokens"] != tokens or r["errors"]:
                    print("bench_kv: request %d hit %d tokens, errors %s"
                          % (i, r["external_tokens"], r["errors"][:4]),
                          file=sys.stderr)
                    return 1
                loads.append(r["load_s"])
                raw_copy()
            got = e2.kv_of(r["block_ids"], tokens)
            want = engine.model_kv(e2.spec, prompts[-1] + [9],
                                   list(range(tokens)))
            if not torch.equal(got, want):
                print("bench_kv: retrieved KV differs", file=sys.stderr)
                return 1
        finally:
            e2.stop()
    finally:
        srv.stop()
    n = len(stores)
    for subj, ts, rs in (("e2e_store", stores, raws[:n]),
                         ("e2e_retrieve", loads, raws[n:])):
        # The first request of each engine pays for first touches of
        # fresh pool pages in that worker; the median shows steady state.
        emit(args, subj, tokens=tokens, bytes=req_bytes, reps=len(ts),
             ms_per_request=statistics.median(ts) * 1e3,
             first_ms=ts[0] * 1e3,
             raw_copy_ms=statistics.median(rs) * 1e3,
             ratio_to_raw_copy=statistics.median(
                 r / t for r, t in zip(rs, ts)))
    return 0


def ctx_checksums(args):
    """KvringContext's whole-chunk copies under checksums, beside the same
    run's plain (checksum off) store and retrieve."""
    sys.path.insert(0, os.path.join(REPO, "tests", "python"))
    from test_binding import Server
    from kvring.torch import ChunkLayout, KvringContext
    lt = ChunkLayout(layers=args.layers, kv_heads=args.kv_heads,
                     head_size=args.head_size, dtype="fp16",
                     chunk_tokens=args.chunk_tokens)
    n = args.chunks
    req = n * lt.chunk_bytes
    src = torch.randn((n,) + lt.shape).half()
    out = torch.empty_like(src)
    srv = Server()
    # Room for a few requests; older ones are evicted (LRU) as it fills.
    srv.pool = "%dM" % (8 * req // (1 << 20) + 64)
    srv.start()
    seq = [0]

    def tokens():
        seq[0] += 1
        return [(seq[0] * 7919 + j * 104729) % 50000 + 1
                for j in range(n * lt.chunk_tokens)]

    def store_views(ctx):
        t = tokens()
        views = ctx.prepare_store(t)
        for j, i in enumerate(views.indices):
            views[j].copy_(src[i])
        ok = ctx.commit_store(t, 0, views)
        return t, ok

    def retrieve_views(ctx, t, verify):
        views = ctx.prepare_retrieve(t)
        if verify and ctx.verify_retrieve(t):
            return False
        ok = len(views) == n
        for j, i in enumerate(views.indices):
            out[i].copy_(views[j])
        del views
        return ctx.commit_retrieve(t) and ok

    try:
        off = KvringContext(lt, model="bench/ctx", socket=srv.sock,
                            checksum="off", timeout_ms=20000)
        on = KvringContext(lt, model="bench/ctx", socket=srv.sock,
                           checksum="on", timeout_ms=20000)
        ns = {k: [] for k in ("ctx_store_plain", "ctx_store_sum",
                              "ctx_store_fill", "ctx_store_fill_off",
                              "ctx_retrieve_plain", "ctx_retrieve_sum",
                              "ctx_retrieve_copy", "ctx_retrieve_copy_off")}
        for it in range(args.iters + 1):  # the first is a warm-up
            row = {}
            t0 = time.perf_counter_ns()
            t_plain, ok1 = store_views(off)
            row["ctx_store_plain"] = time.perf_counter_ns() - t0
            t0 = time.perf_counter_ns()
            t_sum, ok2 = store_views(on)
            row["ctx_store_sum"] = time.perf_counter_ns() - t0
            t_fill = tokens()
            t0 = time.perf_counter_ns()
            ok3 = on.store_chunks(t_fill, src) == n
            row["ctx_store_fill"] = time.perf_counter_ns() - t0
            t_off = tokens()
            t0 = time.perf_counter_ns()
            ok3 = off.store_chunks(t_off, src) == n and ok3
            row["ctx_store_fill_off"] = time.perf_counter_ns() - t0
            t0 = time.perf_counter_ns()
            ok4 = retrieve_views(off, t_plain, False)
            row["ctx_retrieve_plain"] = time.perf_counter_ns() - t0
            t0 = time.perf_counter_ns()
            ok5 = retrieve_views(on, t_sum, True)
            row["ctx_retrieve_sum"] = time.perf_counter_ns() - t0
            out.zero_()
            t0 = time.perf_counter_ns()
            ok6 = on.retrieve_chunks(t_fill, out) == n
            row["ctx_retrieve_copy"] = time.perf_counter_ns() - t0
            ok6 = ok6 and torch.equal(out, src)
            out.zero_()
            t0 = time.perf_counter_ns()
            ok6 = off.retrieve_chunks(t_off, out) == n and ok6
            row["ctx_retrieve_copy_off"] = time.perf_counter_ns() - t0
            if not all((ok1, ok2, ok3, ok4, ok5, ok6)) or \
                    not torch.equal(out, src):
                print("bench_kv: a context store or retrieve failed or "
                      "gave wrong data (%s)" % ((ok1, ok2, ok3, ok4, ok5,
                                                 ok6),), file=sys.stderr)
                return 1
            if it:
                for k, v in row.items():
                    ns[k].append(v)
        off.close()
        on.close()
    finally:
        srv.stop()
    for k, ts in ns.items():
        plain = ns["ctx_store_plain" if "store" in k else
                   "ctx_retrieve_plain"]
        emit(args, k, chunks=n, chunk_bytes=lt.chunk_bytes, bytes=req,
             gbps=req / statistics.median(ts),
             p50_ms=statistics.median(ts) / 1e6,
             ratio_to_plain=statistics.median(
                 p / t for p, t in zip(plain, ts)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The cache's shape (kvring-bench kv passes its own) and the run.
    for flag, default in (("--layers", 32), ("--kv-heads", 8),
                          ("--head-size", 128), ("--block-size", 16),
                          ("--chunk-tokens", 256), ("--chunks", 4),
                          ("--iters", 9)):
        ap.add_argument(flag, type=int, default=default)
    ap.add_argument("--hnd", action="store_true",
                    help="HND blocks (vLLM's permuted view)")
    ap.add_argument("--baseline-only", action="store_true",
                    help="only the torch figures (for kvring-bench kv)")
    ap.add_argument("--e2e-tokens", type=int, default=4096)
    ap.add_argument("--e2e-reps", type=int, default=5)
    ap.add_argument("--no-e2e", action="store_true")
    ap.add_argument("--ctx-checksums", action="store_true",
                    help="only KvringContext's copies under checksums")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.chunk_tokens % args.block_size:
        ap.error("--block-size must divide --chunk-tokens")
    if args.ctx_checksums:
        return ctx_checksums(args)
    rc = copies(args)
    if rc or args.baseline_only or args.no_e2e:
        return rc
    return e2e(args)


if __name__ == "__main__":
    sys.exit(main())
