#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The device check's measurements (run by scripts/device-check.sh, which
built libkvring, started kvringd and set $KVRING_LIB and $KVRING_SOCKET).

Prints one JSON line per figure:

- {"check": "bit_exact", ...} per layout (NHD, HND, FlashInfer HND, MLA;
  per layer and cross-layer) and dtype (fp16, bf16), layer by layer, and
  NHD whole-request per dtype: engine A stores a CUDA paged cache through
  the connector, engine B (other processes, other block ids) loads it;
  B's blocks must
  equal the model's KV and the stored chunks must equal LMCache's format
  built by hand.
- {"figure": "d2h_gbps"} and {"figure": "h2d_gbps"}: chunk copies between
  a CUDA tensor and slot views of the DMA-registered pool, beside torch's
  own copy of the same bytes to and from pinned memory, in the same run.
- {"check": "chunks_from_device"}: KvringContext.store_chunks() and
  retrieve_chunks() with CUDA tensors.
- {"figure": "step_s"}: a step of a 16-layer model on the GPU without the
  connector, with it layer by layer, and with it whole-request.

Exit status: 0 all checks passed, 1 a check failed, 2 no CUDA device.
"""

import ctypes
import dataclasses
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))  # stand-in vllm
sys.path.insert(0, os.path.join(REPO, "worker", "python"))

import torch  # noqa: E402

import kvring  # noqa: E402


# "cuda"; "cpu" under --dry-run (the same steps on CPU tensors, to check
# the script itself on a machine without a GPU; no bandwidth figures).
DEVICE = "cuda"


def emit(**kw):
    print(json.dumps(kw), flush=True)


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def bit_exact(sock):
    import engine
    from kvring.torch import KvringContext
    from kvring.vllm import _layout
    cases = [("NHD", dict(backend="FLASH_ATTN", kv_cache_layout="NHD",
                          cross_layer=False)),
             ("NHD-cross", dict(backend="FLASH_ATTN", kv_cache_layout="NHD")),
             ("HND", dict(backend="FLASH_ATTN", kv_cache_layout="HND",
                          cross_layer=False)),
             ("HND-flashinfer", dict(backend="FLASHINFER",
                                     kv_cache_layout="HND",
                                     cross_layer=False)),
             ("MLA", dict(backend="TRITON_MLA", mla=True, head_size=576))]
    failed = 0
    n = 0
    # Every layout and dtype layer by layer (the default on a device),
    # and whole requests once per dtype.
    runs = [(d, name, kw, True) for d in ("float16", "bfloat16")
            for name, kw in cases]
    runs += [(d, "NHD", cases[0][1], False) for d in ("float16", "bfloat16")]
    for dtype, name, kw, lw in runs:
        n += 1
        args = dict(kw)
        hs = args.pop("head_size", 128)
        spec = engine.EngineSpec(
            socket=sock, model="device-check/%d-%d" % (os.getpid(),
                                                       n),
            device=DEVICE, layers=4, kv_heads=8, head_size=hs,
            block_size=16, chunk_tokens=256, num_blocks=128,
            dtype=dtype, extra={"kvring_layerwise": lw}, **args)
        p = [(n * 7919 + j * 104729) % 50000 for j in range(2 * 256
                                                            + 17)]
        t0 = time.monotonic()
        try:
            e1 = engine.Engine(spec)
            try:
                r1 = e1.run("a", p)
            finally:
                e1.stop()
            spec2 = dataclasses.replace(spec, block_offset=61)
            e2 = engine.Engine(spec2)
            try:
                r2 = e2.run("b", p)
                got = e2.kv_of(r2["block_ids"], 512)
            finally:
                e2.stop()
            want = engine.model_kv(spec2, p, list(range(512)))
            lt = _layout(spec.vllm_config(), spec.chunk_tokens)
            out = torch.empty((2,) + lt.shape, dtype=lt.torch_dtype)
            with KvringContext(lt, model=spec.model,
                               socket=sock) as c:
                nret = c.retrieve_chunks(p[:512], out)
            ok = (r2["external_tokens"] == 512 and not r2["errors"]
                  and torch.equal(got, want) and nret == 2 and
                  torch.equal(out, engine.lmcache_chunks(spec, p,
                                                  2)))
            err = None
        except Exception as e:  # reported, and counted
            ok, err, r1, r2 = False, repr(e), {}, {}
        failed += not ok
        emit(check="bit_exact", layout=name, dtype=dtype,
             layerwise=lw, ok=ok, error=err,
             save_s=r1.get("save_s"), load_s=r2.get("load_s"),
             wall_s=round(time.monotonic() - t0, 3))
    return failed


def gbps(nbytes, fn, reps=5):
    best = None
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return round(nbytes / best / 1e9, 2)


def bandwidth(sock):
    from kvring.device import register_pool, slot_base
    from kvring.torch import ChunkLayout, KvringContext
    lt = ChunkLayout(layers=32, kv_heads=8, head_size=128, dtype="bf16",
                     chunk_tokens=256)  # Llama-3-8B: 32 MiB chunks
    nch = 8
    failed = 0
    with KvringContext(lt, model="device-check/bw", socket=sock) as ctx:
        tokens = [(j * 104729) % 50000 for j in range(nch * 256)]
        views = ctx.prepare_store(tokens, "bw")
        if not views or len(views) != nch:
            emit(figure="d2h_gbps", error="prepare_store gave %r" %
                 (None if views is None else len(views)))
            return 1
        c = ctx.client
        lib = kvring._lib_handle()
        h = c._handle()
        reg = register_pool(
            torch.device("cuda"), slot_base(views._transfer().tx),
            c.pool_bytes,
            lambda: lib.kvr_prefault_status(ctypes.c_void_p(h), True, None))
        if reg.reg._thread is not None:
            reg.reg._thread.join()
        src = torch.randn((nch,) + lt.shape, device="cuda").to(
            torch.bfloat16)
        pinned = torch.empty(src.shape, dtype=src.dtype, pin_memory=True)
        nbytes = src.numel() * src.element_size()

        def d2h_pool():
            for j, v in enumerate(views):
                v.copy_(src[j], non_blocking=True)

        def d2h_torch():
            pinned.copy_(src, non_blocking=True)
        pool = gbps(nbytes, d2h_pool)
        ref = gbps(nbytes, d2h_torch)
        ok = all(torch.equal(views[j], src[j].cpu()) for j in range(nch))
        failed += not ok
        emit(figure="d2h_gbps", pool=pool, torch_pinned=ref,
             registered=reg.registered, bytes=nbytes, ok=ok)
        ctx.commit_store(tokens, "bw", views)
        rviews = ctx.prepare_retrieve(tokens, "bw-r")
        dst = torch.empty_like(src)

        def h2d_pool():
            for j, v in enumerate(rviews):
                dst[j].copy_(v, non_blocking=True)

        def h2d_torch():
            dst.copy_(pinned, non_blocking=True)
        ref = gbps(nbytes, h2d_torch)
        pool = gbps(nbytes, h2d_pool)
        ok = torch.equal(dst, src)
        failed += not ok
        emit(figure="h2d_gbps", pool=pool, torch_pinned=ref,
             registered=reg.registered, bytes=nbytes, ok=ok)
        ctx.commit_retrieve(tokens, "bw-r")
        # KvringContext's whole-chunk copies from and to CUDA tensors.
        t2 = [(j * 7919 + 13) % 50000 for j in range(nch * 256)]
        stored = ctx.store_chunks(t2, src)
        back = torch.zeros_like(src)
        got = ctx.retrieve_chunks(t2, back)
        ok = stored == nch and got == nch and torch.equal(back, src)
        failed += not ok
        emit(check="chunks_from_device", ok=ok, stored=stored, loaded=got)
        reg.close()
    return failed


def overlap(sock):
    import engine
    from kvring.vllm import KvringConnectorMetadata, SaveSpec
    out = {}
    for mode in ("without", "layerwise", "whole"):
        spec = engine.EngineSpec(
            socket=sock, model="device-check/overlap-%d" % os.getpid(),
            device=DEVICE,
            layers=16, kv_heads=8, head_size=128, block_size=16,
            chunk_tokens=256, num_blocks=1024, dtype="bfloat16",
            backend="FLASH_ATTN", cross_layer=False,
            extra={"kvring_layerwise": mode == "layerwise"})
        engine.backend_utils.set_kv_cache_layout("NHD")
        cfg = spec.vllm_config()
        w = engine.connector_class(cfg)(
            cfg, engine.KVConnectorRole.WORKER, spec.kv_cache_config())
        caches = engine.make_caches(spec)
        w.register_kv_caches(caches)
        dim = 4096 if DEVICE == "cuda" else 256
        x = torch.randn(2048, dim, device=DEVICE).to(torch.bfloat16)
        wts = [torch.randn(dim, dim, device=DEVICE).to(torch.bfloat16)
               for _ in range(spec.layers)]
        times = []
        for it in range(6):
            tokens = [(it * 1000003 + j * 7919) % 50000 + 1
                      for j in range(2048)]
            blocks = list(range(128 * (it % 4), 128 * (it % 4) + 128))
            sync()
            t0 = time.perf_counter()
            if mode != "without":
                w.bind_connector_metadata(KvringConnectorMetadata(saves=[
                    SaveSpec("r%d" % it, tokens, None, blocks, 8)]))
                w.start_load_kv(None)
            h = x
            for l, name in enumerate(caches):
                if mode != "without":
                    w.wait_for_layer_load(name)
                h = torch.tanh(h @ wts[l])
                if mode != "without":
                    w.save_kv_layer(name, caches[name], None)
            if mode != "without":
                w.wait_for_save()
                w.clear_connector_metadata()
            sync()
            times.append(time.perf_counter() - t0)
        w.shutdown()
        out[mode] = round(sorted(times[1:])[len(times[1:]) // 2], 4)
    emit(figure="step_s", chunks=8, chunk_mib=16, layers=16, **out)
    return 0


def main():
    global DEVICE
    if sys.argv[1:] == ["--dry-run"]:
        DEVICE = "cpu"
        sock = os.environ["KVRING_SOCKET"]
        failed = bit_exact(sock) + overlap(sock)
        return 1 if failed else 0
    if not torch.cuda.is_available():
        print("device-check: this torch has no CUDA device (torch %s, "
              "cuda %s): run it on a machine with an NVIDIA GPU and a CUDA "
              "build of torch" % (torch.__version__, torch.version.cuda),
              file=sys.stderr)
        return 2
    sock = os.environ["KVRING_SOCKET"]
    emit(figure="device", name=torch.cuda.get_device_name(0),
         torch=torch.__version__, cuda=torch.version.cuda)
    failed = bit_exact(sock)
    failed += bandwidth(sock)
    failed += overlap(sock)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
