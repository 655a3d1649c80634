#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench_e2e.py - prefix reuse end to end: a Llama-style model, two engine
processes, the vLLM connector and a real kvringd (docs/performance.md,
"End to end"; run by kvring-bench e2e).

The model is a Llama-style decoder in plain torch (RMSNorm, grouped-query
attention with rotary embeddings, SwiGLU) with seeded random weights
(nothing can be downloaded here), on the CPU, single-threaded; its KV
cache is paged in vLLM's layout (per layer [2, blocks, block_size,
kv_heads, head_size], bf16, FlashAttention's backend in the stand-in
vllm package) and every attention reads its keys and values from that
cache. For each N (1024, 2048, 4096 tokens by default):

- engine A (its own process) prefills N tokens and saves them through
  the connector, in vLLM's order (lookup, allocate, build_connector_meta,
  start_load_kv, per layer wait_for_layer_load / attention /
  save_kv_layer, wait_for_save);
- engine B (another process, other block ids) computes N + S tokens in
  full (the prefix as one chunk, then the suffix: ttft_full_s), then, in
  fresh blocks, looks the prompt up, loads the prefix through the
  connector (load_s) and computes only the suffix (ttft_kvring_s). Its
  logits over the suffix must equal the full computation's bit for bit
  (max_abs_diff 0; the bench exits 1 otherwise).

Baselines for the load, timed in B beside every load (--reps of them):
one memcpy of the same bytes (ratio_to_memcpy), torch copying the same
blocks in from a host tensor in the same process (ratio_to_host_copy),
and the chunk tensors pickled over a UNIX socket from a server process
and copied into the blocks (ratio_to_pickle, the transport kvring
replaces). A ratio is kvring's time over the baseline's (below 1:
kvring is faster), the median of same-moment pairs; *_p90 the 90th
percentile. One JSON line per N.

  KVRING_LIB=build/worker/libkvring.so KVRINGD=build/server/kvringd \\
      tools/bench_e2e.py [--tokens 1024,2048,4096] [--reps 7]
"""

import argparse
import ctypes
import json
import math
import multiprocessing
import os
import pickle
import socket
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "python"))  # stand-in vllm
sys.path.insert(0, os.path.join(REPO, "worker", "python"))

import torch  # noqa: E402

DT = torch.float32  # weights and activations; the KV cache is bf16


class Model(object):
    """A Llama-style decoder with seeded random weights. forward() runs
    tokens [start, start + len(ids)) of one sequence: each layer writes
    the new tokens' K and V into the paged cache (through `layer_hook`
    before and after, for the connector) and attends over everything the
    cache holds for positions [0, start + len(ids))."""

    def __init__(self, a: argparse.Namespace) -> None:
        g = torch.Generator().manual_seed(a.seed)
        d, h, kvh, hd = a.dim, a.heads, a.kv_heads, a.dim // a.heads
        self.a, self.d, self.h, self.kvh, self.hd = a, d, h, kvh, hd

        def w(*shape):
            return (torch.randn(*shape, generator=g) /
                    math.sqrt(shape[-1])).to(DT)
        self.embed = w(a.vocab, d)
        self.layers = [dict(wq=w(h * hd, d), wk=w(kvh * hd, d),
                            wv=w(kvh * hd, d), wo=w(d, h * hd),
                            w1=w(a.ffn, d), w3=w(a.ffn, d), w2=w(d, a.ffn),
                            n1=torch.ones(d, dtype=DT),
                            n2=torch.ones(d, dtype=DT))
                       for _ in range(a.layers)]
        self.norm = torch.ones(d, dtype=DT)
        self.head = w(a.vocab, d)
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        t = torch.arange(a.max_tokens).float()
        f = torch.outer(t, inv)
        self.cos, self.sin = f.cos(), f.sin()

    @staticmethod
    def rms(x, wt):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
                ).to(DT) * wt

    def rope(self, x, pos):
        x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
        c, s = self.cos[pos][:, None, :], self.sin[pos][:, None, :]
        out = torch.empty_like(x, dtype=torch.float32)
        out[..., 0::2] = x1 * c - x2 * s
        out[..., 1::2] = x1 * s + x2 * c
        return out.to(DT)

    def forward(self, ids, start, caches, block_ids, bs, layer_hook=None):
        n = len(ids)
        pos = torch.arange(start, start + n)
        end = start + n
        x = self.embed[torch.tensor(ids)]
        b = torch.tensor([block_ids[p // bs] for p in range(start, end)])
        o = pos % bs
        nb = -(-end // bs)
        ctx_blocks = torch.tensor(block_ids[:nb])
        for l, (name, cache) in enumerate(caches.items()):
            if layer_hook:
                layer_hook("before", name, cache)
            L = self.layers[l]
            hx = self.rms(x, L["n1"])
            q = self.rope((hx @ L["wq"].T).view(n, self.h, self.hd), pos)
            k = self.rope((hx @ L["wk"].T).view(n, self.kvh, self.hd), pos)
            v = (hx @ L["wv"].T).view(n, self.kvh, self.hd)
            cache[0][b, o] = k.to(cache.dtype)
            cache[1][b, o] = v.to(cache.dtype)
            K = cache[0][ctx_blocks].reshape(-1, self.kvh, self.hd)[:end]
            V = cache[1][ctx_blocks].reshape(-1, self.kvh, self.hd)[:end]
            rep = self.h // self.kvh
            K = K.repeat_interleave(rep, 1).transpose(0, 1).float()
            V = V.repeat_interleave(rep, 1).transpose(0, 1).float()
            qh = q.transpose(0, 1).float()
            att = torch.empty(self.h, n, self.hd)
            for t0 in range(0, n, 512):  # query tiles keep scores small
                t1 = min(n, t0 + 512)
                s = qh[:, t0:t1] @ K.transpose(1, 2) / math.sqrt(self.hd)
                qpos = torch.arange(start + t0, start + t1)[:, None]
                s.masked_fill_(torch.arange(end)[None, :] > qpos,
                               float("-inf"))
                att[:, t0:t1] = torch.softmax(s, -1) @ V
            x = x + (att.transpose(0, 1).reshape(n, -1).to(DT) @ L["wo"].T)
            hx = self.rms(x, L["n2"])
            x = x + (torch.nn.functional.silu(hx @ L["w1"].T) *
                     (hx @ L["w3"].T)) @ L["w2"].T
            if layer_hook:
                layer_hook("after", name, cache)
        return (self.rms(x, self.norm) @ self.head.T).float()


def spec_for(a, sock, block_offset=0):
    import engine
    extra = {"kvring_checksum": a.checksum} if a.checksum else None
    return engine.EngineSpec(
        socket=sock, model="bench/e2e-%d" % a.seed, layers=a.layers,
        kv_heads=a.kv_heads, head_size=a.dim // a.heads, dtype="bfloat16",
        block_size=a.block_size, chunk_tokens=a.chunk_tokens,
        num_blocks=2 * (a.max_tokens // a.block_size) + 8,
        block_offset=block_offset, backend="FLASH_ATTN", cross_layer=False,
        timeout_ms=30000, extra=extra)


class Engine(object):
    """One engine: the scheduler-side and worker-side connectors (in one
    process here) and the model over vLLM-layout paged caches."""

    def __init__(self, a, sock, block_offset):
        import engine
        self.E = engine
        self.a = a
        self.spec = spec_for(a, sock, block_offset)
        engine.backend_utils.set_kv_cache_layout("NHD")
        cfg = self.spec.vllm_config()
        cls = engine.connector_class(cfg)
        self.sched = cls(cfg, engine.KVConnectorRole.SCHEDULER,
                         self.spec.kv_cache_config())
        self.worker = cls(cfg, engine.KVConnectorRole.WORKER,
                          self.spec.kv_cache_config())
        self.caches = engine.make_caches(self.spec)
        self.worker.register_kv_caches(self.caches)
        self.model = Model(a)
        self.next = block_offset

    def alloc(self, ntok):
        n = -(-ntok // self.a.block_size)
        ids = [(self.next + i) % self.spec.num_blocks for i in range(n)]
        self.next += n
        return ids

    def step(self, rid, tokens, start, ids, computed, sched_tokens,
             ext=0, new=True):
        """One vLLM step of request rid: the metadata, the worker's load,
        the forward pass over tokens[start:start + sched_tokens] with
        the per-layer hooks, the save. Returns (logits, load_s)."""
        E = self.E
        nr = E.new_req(rid, tokens, ids, computed)
        so = E.sched_output(scheduled_new_reqs=[nr],
                            num_scheduled_tokens={rid: sched_tokens},
                            total_num_scheduled_tokens=sched_tokens)
        meta = self.sched.build_connector_meta(so)
        w = self.worker
        w.bind_connector_metadata(meta)
        t0 = time.perf_counter()
        w.start_load_kv(None)
        load_s = time.perf_counter() - t0

        def hook(when, name, cache):
            if when == "before":
                w.wait_for_layer_load(name)
            else:
                w.save_kv_layer(name, cache, None)
        logits = self.model.forward(tokens[start:start + sched_tokens],
                                    start, self.caches, ids,
                                    self.a.block_size, hook)
        w.wait_for_save()
        errors = w.get_block_ids_with_load_errors()
        w.clear_connector_metadata()
        if errors:
            raise RuntimeError("load errors in blocks %s" % sorted(errors))
        return logits, load_s

    def finish(self, rid, req, ids):
        self.sched.request_finished(req, ids)
        self.sched.build_connector_meta(self.E.sched_output(
            finished_req_ids={rid}))

    def close(self):
        self.worker.shutdown()
        self.sched.shutdown()


def run_a(a, sock, n, q):
    """Engine A: prefill n tokens, saved through the connector."""
    try:
        torch.set_num_threads(1)
        e = Engine(a, sock, 0)
        p = prompt(a, n)[:n]
        req = e.E.Request("a%d" % n, list(p))
        ext, _ = e.sched.get_num_new_matched_tokens(req, 0)
        ids = e.alloc(n)
        e.sched.update_state_after_alloc(req, e.E.KVCacheBlocks(
            (tuple(e.E.KVCacheBlock(b) for b in ids),)), ext)
        t0 = time.perf_counter()
        e.step("a%d" % n, p, 0, ids, 0, n)
        q.put(("ok", time.perf_counter() - t0))
        e.finish("a%d" % n, req, ids)
        e.close()
    except Exception as ex:
        import traceback
        q.put(("error", "%r\n%s" % (ex, traceback.format_exc())))


def prompt(a, n):
    return [(n * 7919 + j * 104729) % (a.vocab - 1) + 1
            for j in range(n + a.suffix)]


def pickle_server(path, chunks):
    """The baseline transport: chunks, pickled, over a UNIX socket."""
    torch.set_num_threads(1)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    c, _ = srv.accept()
    while True:
        req = c.recv(1)
        if not req:
            break
        blob = pickle.dumps(chunks, protocol=pickle.HIGHEST_PROTOCOL)
        c.sendall(struct.pack("<Q", len(blob)) + blob)
    c.close()
    srv.close()


def recv_exact(s, n):
    buf = bytearray(n)
    mv = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(mv[got:], n - got)
        if not k:
            raise EOFError("pickle server closed")
        got += k
    return buf


def run_b(a, sock, n, q):
    """Engine B: full computation, then prefix reuse through kvring, and
    the load's baselines."""
    try:
        torch.set_num_threads(1)
        if a.gc_off:
            import gc
            gc.disable()
        from kvring.kv import PagedKV
        e = Engine(a, sock, 7)
        p = prompt(a, n)
        T = n + a.suffix
        # Full: the prefix as one chunk (as engine A did), then the suffix.
        ids = e.alloc(T)
        t0 = time.perf_counter()
        e.model.forward(p[:n], 0, e.caches, ids, a.block_size)
        full = e.model.forward(p[n:], n, e.caches, ids, a.block_size)
        ttft_full = time.perf_counter() - t0
        loads, ttfts, diffs, memcpys, hosts, pickles = [], [], [], [], [], []
        kv = e.worker._kv
        lt = kv.layout
        nch = n // a.chunk_tokens
        kv_bytes = nch * lt.chunk_bytes
        src = torch.empty(kv_bytes, dtype=torch.uint8).fill_(1)
        dst = torch.empty(kv_bytes, dtype=torch.uint8).fill_(2)
        host = torch.empty((nch,) + lt.shape, dtype=lt.torch_dtype)
        # The pickle server holds the chunks as A stored them.
        kv.gather(ids[:nch * kv.blocks_per_chunk], list(host))
        path = "/tmp/kvring-e2e-%d.sock" % os.getpid()
        ctx = multiprocessing.get_context("fork")
        ps = ctx.Process(target=pickle_server, args=(path, list(host)),
                         daemon=True)
        ps.start()
        for _ in range(200):
            if os.path.exists(path):
                break
            time.sleep(0.01)
        cs = socket.socket(socket.AF_UNIX)
        cs.connect(path)
        for r in range(a.reps):
            rid = "b%d-%d" % (n, r)
            req = e.E.Request(rid, list(p))
            t0 = time.perf_counter()
            ext, _ = e.sched.get_num_new_matched_tokens(req, 0)
            if ext != n:
                raise RuntimeError("lookup hit %d of %d tokens" % (ext, n))
            ids2 = e.alloc(T)
            e.sched.update_state_after_alloc(req, e.E.KVCacheBlocks(
                (tuple(e.E.KVCacheBlock(b) for b in ids2),)), ext)
            logits, load_s = e.step(rid, p, n, ids2, ext, a.suffix)
            ttfts.append(time.perf_counter() - t0)
            loads.append(load_s)
            diffs.append(float((logits - full).abs().max()))
            e.finish(rid, req, ids2)
            # Baselines, at the same moment.
            t1 = time.perf_counter()
            ctypes.memmove(dst.data_ptr(), src.data_ptr(), kv_bytes)
            memcpys.append(time.perf_counter() - t1)
            blk = ids2[:nch * kv.blocks_per_chunk]
            t1 = time.perf_counter()
            host_to_blocks(kv, host, blk)
            hosts.append(time.perf_counter() - t1)
            t1 = time.perf_counter()
            cs.sendall(b"g")
            ln = struct.unpack("<Q", recv_exact(cs, 8))[0]
            chunks = pickle.loads(recv_exact(cs, ln))
            PagedKV.scatter(kv, blk, chunks)
            pickles.append(time.perf_counter() - t1)
        cs.close()
        ps.join(10)
        e.close()
        q.put(("ok", dict(ttft_full=ttft_full, ttfts=ttfts, loads=loads,
                          diffs=diffs, memcpys=memcpys, hosts=hosts,
                          pickles=pickles, kv_bytes=kv_bytes)))
    except Exception as ex:
        import traceback
        q.put(("error", "%r\n%s" % (ex, traceback.format_exc())))


def host_to_blocks(kv, host, blk):
    """torch copying chunk tensors (LMCache's format, in host memory)
    into the blocks: what an engine keeping its own host copy does."""
    lt = kv.layout
    bpc = kv.blocks_per_chunk
    for j in range(host.shape[0]):
        idx = torch.tensor(blk[j * bpc:(j + 1) * bpc])
        for l in range(lt.layers):
            for k in range(2):
                v = kv._bviews[l * 2 + k]
                v.index_copy_(0, idx, host[j, k, l].view(
                    (bpc,) + tuple(v.shape[1:])))


def wait_for(pr, q):
    """The engine process's answer, or ("error", why) if it died without
    one (a crash, a signal) instead of waiting forever."""
    import queue
    while True:
        try:
            return q.get(timeout=1)
        except queue.Empty:
            if not pr.is_alive():
                try:
                    return q.get(timeout=1)
                except queue.Empty:
                    return ("error", "the process died (exit code %s)"
                            % pr.exitcode)


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


def ratio(ts, bs, p=0.5):
    return round(pct([t / b for t, b in zip(ts, bs)], p), 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="1024,2048,4096")
    ap.add_argument("--suffix", type=int, default=64)
    ap.add_argument("--reps", type=int, default=7)
    # Small enough to prefill 4096 tokens in about a minute on a 2-vCPU
    # VM whose torch has a generic BLAS; the KV (8 layers, 4 heads of 64,
    # bf16) is 8 KiB per token, 32 MiB at 4096 tokens.
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--chunk-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--checksum", choices=("off", "on", "verify"),
                    help="kvring_checksum for both engines (default: "
                         "$KVRING_CHECKSUM, else off)")
    ap.add_argument("--gc-off", action="store_true",
                    help="disable Python's garbage collector in the engines "
                         "(to see what its pauses do to the load's spread)")
    a = ap.parse_args()
    ns = [int(x) for x in a.tokens.split(",")]
    for n in ns:
        if n <= 0 or n % a.chunk_tokens:
            ap.error("--tokens: %d is not a positive multiple of "
                     "--chunk-tokens %d" % (n, a.chunk_tokens))
    a.max_tokens = max(ns) + a.suffix
    from test_binding import Server
    srv = Server()
    srv.pool = "%dM" % (2 * a.max_tokens * a.layers * a.kv_heads *
                        (a.dim // a.heads) * 2 * 2 * len(ns) //
                        (1 << 20) + 256)
    srv.start()
    bad = 0
    ctx = multiprocessing.get_context("fork")
    try:
        for n in ns:
            out = {}
            for name, fn in (("a", run_a), ("b", run_b)):
                q = ctx.Queue()
                pr = ctx.Process(target=fn, args=(a, srv.sock, n, q))
                pr.start()
                tag, val = wait_for(pr, q)
                pr.join(60)
                if tag != "ok":
                    print("bench_e2e: engine %s at %d tokens failed: %s"
                          % (name, n, val), file=sys.stderr)
                    return 1
                out[name] = val
            b = out["b"]
            load = statistics.median(b["loads"])
            diff = max(b["diffs"])
            bad += diff != 0
            print(json.dumps(dict(
                schema=1, scenario="e2e", tokens=n, suffix_tokens=a.suffix,
                checksum=a.checksum or os.environ.get("KVRING_CHECKSUM",
                                                      "off"),
                reps=a.reps, kv_bytes=b["kv_bytes"],
                prefill_a_s=round(out["a"], 4),
                ttft_full_s=round(b["ttft_full"], 4),
                ttft_kvring_s=round(statistics.median(b["ttfts"]), 4),
                load_s=round(load, 5),
                load_p90_s=round(pct(b["loads"], 0.9), 5),
                load_gbps=round(b["kv_bytes"] / load / 1e9, 2),
                memcpy_s=round(statistics.median(b["memcpys"]), 5),
                max_abs_diff=diff,
                ratio_to_memcpy=ratio(b["loads"], b["memcpys"]),
                ratio_to_memcpy_p90=ratio(b["loads"], b["memcpys"], 0.9),
                ratio_to_host_copy=ratio(b["loads"], b["hosts"]),
                ratio_to_pickle=ratio(b["loads"], b["pickles"]))),
                flush=True)
    finally:
        srv.stop()
    if bad:
        print("bench_e2e: logits after a load differ from the full "
              "computation's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
