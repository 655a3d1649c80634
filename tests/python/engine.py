# SPDX-License-Identifier: MIT
"""A small engine driver that calls a vLLM v1 KV connector in vLLM's real
order, against a real kvringd, with CPU paged KV caches in torch.

The scheduler connector lives in the calling process; the worker connector
lives in its own process (vLLM's multiproc executor), and the metadata
crosses between them pickled, as in vLLM. Per request:

  scheduler: get_num_new_matched_tokens -> allocate blocks ->
             update_state_after_alloc -> build_connector_meta
  worker:    bind_connector_metadata -> start_load_kv -> per layer
             (wait_for_layer_load, "attention" writes the new tokens' KV,
             save_kv_layer) -> wait_for_save -> get_block_ids_with_load_errors
             -> clear_connector_metadata
  finish:    request_finished, then finished_req_ids in the next
             build_connector_meta, get_finished on the worker

Blocks that failed to load are recomputed in a second step, which is what
vLLM does with get_block_ids_with_load_errors(). The "model" writes KV
values that are a pure function of (token, position, layer, k/v, head, dim)
and exactly representable in fp16 and bf16, so any two engines compute
bit-identical KV for the same prompt and a loaded block can be compared
bit for bit with what the model would have written.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import pickle
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch

from vllm.config import (CacheConfig, KVTransferConfig, ModelConfig,
                         ParallelConfig, VllmConfig)
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
from vllm.forward_context import ForwardContext
from vllm.v1.core.kv_cache_manager import KVCacheBlocks
from vllm.v1.core.kv_cache_utils import KVCacheBlock
from vllm.v1.core.sched.output import (CachedRequestData,
                                       LegacyCachedRequestData,
                                       NewRequestData, SchedulerOutput)
from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig,
                                        KVCacheGroupSpec, MLAAttentionSpec)
from vllm.v1.request import Request

from vllm.v1.attention.backends import utils as backend_utils
from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
from vllm.v1.attention.backends.flashinfer import FlashInferBackend
from vllm.v1.attention.backends.mla.common import MLACommonBackend

BACKENDS = {"CPU_ATTN": CPUAttentionBackend,
            "FLASH_ATTN": FlashAttentionBackend,
            "FLASHINFER": FlashInferBackend, "TRITON_MLA": MLACommonBackend}
# How each backend's logical cache shape maps to [2, blocks, tokens, heads,
# dim] (what an attention kernel of that backend knows; MLA has no K/V).
TO_NHD = {"CPU_ATTN": (0, 1, 3, 2, 4), "FLASH_ATTN": (0, 1, 2, 3, 4),
          "FLASHINFER": (1, 0, 2, 3, 4)}

LOCAL_MARK = 100.0  # never a model value (those are < 32)
TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class EngineSpec:
    socket: str
    model: str = "driver/llama-mini"
    layers: int = 2
    kv_heads: int = 2
    head_size: int = 64
    dtype: str = "float16"
    mla: bool = False
    hnd: bool = False          # physical HND blocks, NHD-shaped view
    # An attention backend of the stand-in (CPU_ATTN, FLASH_ATTN,
    # FLASHINFER, TRITON_MLA): the caches are then allocated the way
    # vLLM's model runner does it for that backend (its shape, its stride
    # order under kv_cache_layout), and the backend is in the forward
    # context where connectors look for it. None: plain tensors and no
    # backend to be found (hnd picks the physical order).
    backend: Optional[str] = None
    kv_cache_layout: str = "NHD"
    kv_load_failure_policy: str = "recompute"
    extra: Optional[Dict[str, Any]] = None  # more kv_connector_extra_config
    # None: a cross-layer cache when the connector prefers one (vLLM's
    # use_uniform_kv_cache()), False: per-layer caches regardless.
    cross_layer: Optional[bool] = None
    kv_cache_groups: Optional[List[Any]] = None  # default: one group
    # Where the worker's caches live ("cuda" for scripts/device-check.py;
    # a worker with a device cache is spawned, not forked).
    device: str = "cpu"

    def kv_cache_config(self) -> KVCacheConfig:
        """What vLLM builds the connectors with: one full-attention (or
        MLA) group over every layer, unless kv_cache_groups says."""
        groups = self.kv_cache_groups
        if groups is None:
            dt = TORCH_DTYPES[self.dtype]
            spec = (MLAAttentionSpec(self.block_size, 1, self.head_size, dt)
                    if self.mla else FullAttentionSpec(
                        self.block_size, self.kv_heads, self.head_size, dt))
            groups = [KVCacheGroupSpec(layer_names(self), spec)]
        return KVCacheConfig(self.num_blocks, kv_cache_groups=groups)
    block_size: int = 16
    chunk_tokens: int = 64
    num_blocks: int = 64
    block_offset: int = 0      # where this engine's allocator starts
    timeout_ms: int = 3000
    l2: bool = False           # kvring_l2: read through kvringd's L2

    def kv_transfer_config(self) -> KVTransferConfig:
        # Exactly what --kv-transfer-config '<json>' parses to.
        extra = {"kvring_socket": self.socket,
                 "kvring_chunk_tokens": self.chunk_tokens,
                 "kvring_timeout_ms": self.timeout_ms,
                 "kvring_l2": self.l2}
        extra.update(self.extra or {})
        return KVTransferConfig.from_cli(json.dumps({
            "kv_connector": "KvringConnector",
            "kv_connector_module_path": "kvring.vllm",
            "kv_role": "kv_both",
            "kv_load_failure_policy": self.kv_load_failure_policy,
            "kv_connector_extra_config": extra}))

    def backend_class(self) -> Any:
        if self.backend is None:
            return None
        return BACKENDS[self.backend]

    def vllm_config(self) -> VllmConfig:
        cfg = self._vllm_config()
        if self.backend is not None:
            be = self.backend_class()
            cfg.compilation_config.static_forward_context = {
                name: AttentionLayer(be) for name in layer_names(self)}
        return cfg

    def _vllm_config(self) -> VllmConfig:
        return VllmConfig(
            model_config=ModelConfig(model=self.model, dtype=self.dtype,
                                     use_mla=self.mla,
                                     num_layers=self.layers,
                                     num_kv_heads=1 if self.mla
                                     else self.kv_heads,
                                     head_size=self.head_size),
            cache_config=CacheConfig(block_size=self.block_size),
            parallel_config=ParallelConfig(),
            kv_transfer_config=self.kv_transfer_config())


def sched_output(**fields: Any) -> SchedulerOutput:
    """A SchedulerOutput as vLLM's scheduler builds one: the empty one
    with the given fields set."""
    so = SchedulerOutput.make_empty()
    for k, v in fields.items():
        setattr(so, k, v)
    return so


def new_req(req_id: str, tokens: List[int], block_ids: List[int],
            num_computed_tokens: int) -> NewRequestData:
    return NewRequestData(req_id=req_id, prompt_token_ids=list(tokens),
                          mm_features=[], sampling_params=None,
                          pooling_params=None, block_ids=(list(block_ids),),
                          num_computed_tokens=num_computed_tokens,
                          lora_request=None)


def cached_reqs(req_ids: List[str], new_block_ids: List[Any],
                num_computed_tokens: List[int], resumed: Any = (),
                legacy: bool = False) -> Any:
    """The cached requests of one step. resumed: the ids that resumed
    after preemption (their new_block_ids replace their blocks). legacy:
    vLLM 0.10's form, a resumed_from_preemption flag per request."""
    n = len(req_ids)
    if legacy:
        return LegacyCachedRequestData(
            req_ids=list(req_ids),
            resumed_from_preemption=[r in resumed for r in req_ids],
            new_token_ids=[[] for _ in req_ids],
            new_block_ids=list(new_block_ids),
            num_computed_tokens=list(num_computed_tokens))
    return CachedRequestData(
        req_ids=list(req_ids), resumed_req_ids=set(resumed),
        new_token_ids=[[] for _ in req_ids], all_token_ids={},
        new_block_ids=list(new_block_ids),
        num_computed_tokens=list(num_computed_tokens),
        num_output_tokens=[0] * n)


def connector_class(cfg: VllmConfig) -> Any:
    """What vLLM's KVConnectorFactory.get_connector_class() does for a
    connector that is not registered: import kv_connector_module_path and
    take kv_connector from it."""
    kc = cfg.kv_transfer_config
    return getattr(importlib.import_module(kc.kv_connector_module_path),
                   kc.kv_connector)


# ---- the model: KV as a pure function of the tokens ----

def model_kv(spec: EngineSpec, tokens: List[int], pos: List[int]
             ) -> torch.Tensor:
    """[layers, nkv, len(pos), heads, dim] KV values for tokens at pos;
    multiples of 1/8 below 32, exact in fp16 and bf16."""
    nkv, heads = (1, 1) if spec.mla else (2, spec.kv_heads)
    t = torch.tensor([tokens[p] for p in pos], dtype=torch.int64)
    p = torch.tensor(pos, dtype=torch.int64)
    base = ((t * 31 + p * 7) % 251)[None, :, None, None]
    k = torch.arange(nkv)[:, None, None, None] * 5
    h = torch.arange(heads)[None, None, :, None] * 1009
    d = torch.arange(spec.head_size)[None, None, None, :]
    # One layer at a time keeps a 4k-token Llama request's temporaries
    # small.
    out = torch.empty((spec.layers, nkv, len(pos), heads, spec.head_size),
                      dtype=TORCH_DTYPES[spec.dtype])
    for l in range(spec.layers):
        v = ((base + k + h + d + l * 13) % 251).to(torch.int16)
        out[l] = v.to(torch.float32).div_(8)
    return out


def lmcache_chunks(spec: EngineSpec, tokens: List[int], n: int
                   ) -> torch.Tensor:
    """The first n chunks of tokens built by hand from the model's logical
    K and V: [2, layers, tokens, heads * head_size], K first (MLA:
    [layers, tokens, dim]), as LMCache's format has them."""
    T = spec.chunk_tokens
    kv = model_kv(spec, tokens, list(range(n * T)))
    L, _, _, H, D = kv.shape
    if spec.mla:
        return kv[:, 0, :, 0].reshape(L, n, T, D).permute(1, 0, 2, 3)
    return kv.reshape(L, 2, n, T, H * D).permute(2, 1, 0, 3, 4)


class AttentionLayer(object):
    """An attention layer in vLLM's forward context: it answers
    get_attn_backend()."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def get_attn_backend(self) -> Any:
        return self.backend


def layer_names(spec: EngineSpec) -> List[str]:
    return ["model.layers.%d.self_attn.attn" % l for l in range(spec.layers)]


def _backend_shape(spec: EngineSpec, layers_dim: bool
                   ) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """(logical shape, stride order) of the backend's cache, as vLLM's
    model runner computes them."""
    be = spec.backend_class()
    old = backend_utils._KV_CACHE_LAYOUT_OVERRIDE
    backend_utils.set_kv_cache_layout(spec.kv_cache_layout)
    try:
        shape = tuple(be.get_kv_cache_shape(
            spec.num_blocks, spec.block_size,
            1 if spec.mla else spec.kv_heads, spec.head_size))
        if layers_dim:
            shape = (spec.layers,) + shape
        try:
            order = tuple(be.get_kv_cache_stride_order(
                include_num_layers_dimension=layers_dim))
        except (AttributeError, NotImplementedError):
            order = tuple(range(len(shape)))
    finally:
        backend_utils.set_kv_cache_layout(old)
    return shape, order


def make_cross_layer_cache(spec: EngineSpec
                           ) -> Tuple[Dict[str, torch.Tensor], torch.Tensor]:
    """vLLM's allocate_uniform_kv_caches(): one buffer in the backend's
    physical order (layers dimension included), per-layer logical views
    of it, and the physical tensor register_cross_layers_kv_cache gets."""
    shape, order = _backend_shape(spec, True)
    phys = torch.full(tuple(shape[i] for i in order), -1.0,
                      dtype=TORCH_DTYPES[spec.dtype], device=spec.device)
    inv = [order.index(i) for i in range(len(order))]
    logical = phys.permute(*inv)
    return ({n: logical[i] for i, n in enumerate(layer_names(spec))}, phys)


def make_caches(spec: EngineSpec) -> Dict[str, torch.Tensor]:
    """vLLM's per-layer caches, filled with -1 (the model never writes a
    negative value, so an unloaded block shows)."""
    dt = TORCH_DTYPES[spec.dtype]
    out = {}
    if spec.backend is not None:
        # vLLM's _reshape_kv_cache_tensors(): allocate in the stride
        # order, hand out the logical shape.
        shape, order = _backend_shape(spec, False)
        inv = [order.index(i) for i in range(len(order))]
        for name in layer_names(spec):
            out[name] = torch.full(tuple(shape[i] for i in order), -1.0,
                                   dtype=dt, device=spec.device
                                   ).permute(*inv)
        return out
    for l in range(spec.layers):
        if spec.mla:
            t = torch.full((spec.num_blocks, spec.block_size,
                            spec.head_size), -1.0, dtype=dt,
                           device=spec.device)
        elif spec.hnd:
            # HND in memory, handed out NHD-shaped (vLLM's stride order).
            t = torch.full((2, spec.num_blocks, spec.kv_heads,
                            spec.block_size, spec.head_size), -1.0,
                           dtype=dt, device=spec.device
                           ).permute(0, 1, 3, 2, 4)
        else:
            t = torch.full((2, spec.num_blocks, spec.block_size,
                            spec.kv_heads, spec.head_size), -1.0, dtype=dt,
                           device=spec.device)
        out["model.layers.%d.self_attn.attn" % l] = t
    return out


def _slots(spec: EngineSpec, block_ids: List[int], pos: List[int]):
    bs = spec.block_size
    return (torch.tensor([block_ids[p // bs] for p in pos],
                         device=spec.device),
            torch.tensor([p % bs for p in pos], device=spec.device))


def _nhd(spec: EngineSpec, t: torch.Tensor) -> torch.Tensor:
    """A layer's cache as [2, blocks, tokens, heads, dim] (MLA: as is)."""
    if spec.backend is None or spec.mla:
        return t
    return t.permute(*TO_NHD[spec.backend])


def write_kv(spec: EngineSpec, caches: Dict[str, torch.Tensor],
             block_ids: List[int], tokens: List[int], pos: List[int],
             layers: Optional[List[int]] = None,
             vals: Optional[torch.Tensor] = None) -> None:
    """The attention layers (all, or those in layers) writing the new
    tokens' KV into their slots. vals: model_kv() of these tokens, when
    the caller has it already."""
    if not pos:
        return
    if vals is None:
        vals = model_kv(spec, tokens, pos)
    b, o = _slots(spec, block_ids, pos)
    vals = vals.to(spec.device)
    for l, t in enumerate(caches.values()):
        if layers is not None and l not in layers:
            continue
        t = _nhd(spec, t)
        if spec.mla:
            t[b, o] = vals[l, 0, :, 0]
        else:
            for k in (0, 1):
                t[k][b, o] = vals[l, k]


def read_kv(spec: EngineSpec, caches: Dict[str, torch.Tensor],
            block_ids: List[int], pos: List[int]) -> torch.Tensor:
    b, o = _slots(spec, block_ids, pos)
    parts = []
    for t in caches.values():
        t = _nhd(spec, t)
        if spec.mla:
            parts.append(t[b, o][None, :, None])
        else:
            parts.append(torch.stack([t[k][b, o] for k in (0, 1)]))
    return torch.stack(parts)


# ---- the worker process ----

def _worker_main(spec: EngineSpec, conn: Any) -> None:
    torch.set_num_threads(1)
    # The process-wide layout backends' stride orders follow (vLLM sets
    # it once per process).
    backend_utils.set_kv_cache_layout(spec.kv_cache_layout)
    try:
        cfg = spec.vllm_config()
        worker = connector_class(cfg)(cfg, KVConnectorRole.WORKER,
                                      spec.kv_cache_config())
        if spec.backend is not None and spec.cross_layer is not False \
                and worker.prefer_cross_layer_blocks:
            # vLLM's allocate_uniform_kv_caches() path.
            caches, phys = make_cross_layer_cache(spec)
            worker.register_cross_layers_kv_cache(phys, spec.backend_class())
        else:
            caches = make_caches(spec)
            worker.register_kv_caches(caches)
        conn.send(("ready", None))
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    hooks: Dict[str, Any] = {}
    while True:
        cmd, arg = conn.recv()
        try:
            if cmd == "step":
                conn.send(("ok", _worker_step(spec, worker, caches, arg,
                                              hooks)))
            elif cmd == "mark":
                block_ids, pos = arg
                b, o = _slots(spec, block_ids, pos)
                for t in caches.values():
                    t = _nhd(spec, t)
                    if spec.mla:
                        t[b, o] = LOCAL_MARK
                    else:
                        t[0][b, o] = LOCAL_MARK
                        t[1][b, o] = LOCAL_MARK
                conn.send(("ok", None))
            elif cmd == "read":
                block_ids, pos = arg
                conn.send(("ok", read_kv(spec, caches, block_ids,
                                         pos).cpu()))
            elif cmd == "kill_in_commit_store":
                # Die (SIGKILL, no cleanup) at the moment a store would be
                # published, after its bytes were gathered into the pool.
                from kvring.torch import KvringContext

                def die(self, *a, **kw):
                    os.kill(os.getpid(), signal.SIGKILL)
                KvringContext.commit_store = die
                conn.send(("ok", None))
            elif cmd == "fail_copies":
                # arg (what, layer): the staged gather or scatter of that
                # layer raises, as a failed device copy would; None:
                # copies work again.
                from kvring.kv import StagedCopies
                for what in ("gather", "scatter"):
                    if what not in hooks:
                        hooks[what] = getattr(StagedCopies, what)
                    setattr(StagedCopies, what, hooks[what])
                if arg is not None:
                    what, layer = arg
                    orig = hooks[what]

                    def failing(self, *a, **kw):
                        layers = kw.get("layers", a[3 if what == "scatter"
                                                     else 2]
                                        if len(a) > (3 if what == "scatter"
                                                     else 2) else None)
                        if layers is not None and layer in layers:
                            raise RuntimeError("device copy failed (test)")
                        return orig(self, *a, **kw)
                    setattr(StagedCopies, what, failing)
                conn.send(("ok", None))
            elif cmd == "kill_at_layer":
                # SIGKILL pid (kvringd) when layer arg[1]'s save is issued.
                from kvring.kv import StagedCopies
                pid, layer = arg
                orig_gather = StagedCopies.gather

                def killing(self, block_ids, chunks, layers=None):
                    if layers is not None and layer in layers:
                        os.kill(pid, signal.SIGKILL)
                    return orig_gather(self, block_ids, chunks, layers)
                StagedCopies.gather = killing
                conn.send(("ok", None))
            elif cmd == "describe":
                kv = worker._kv
                conn.send(("ok", (kv.what, kv.describe(),
                                  worker._layerwise)))
            elif cmd == "finish":
                conn.send(("ok", worker.get_finished(set(arg))))
            elif cmd == "exit":
                worker.shutdown()
                worker.shutdown()  # twice: harmless
                conn.send(("ok", None))
                return
        except Exception:
            conn.send(("error", traceback.format_exc()))


def _worker_step(spec: EngineSpec, worker: Any, caches: Dict[str, Any],
                 arg: Any, hooks: Dict[str, Any]) -> Dict[str, Any]:
    meta_bytes, compute = arg
    meta = pickle.loads(meta_bytes)  # crossed a process boundary
    worker.bind_connector_metadata(meta)
    t0 = time.monotonic()
    worker.start_load_kv(ForwardContext(no_compile_layers={}))
    t_load = time.monotonic() - t0
    vals = [model_kv(spec, tokens, pos) if pos else None
            for block_ids, tokens, pos in compute]
    # The forward pass, layer by layer as vLLM runs it: each attention
    # layer waits for its load, writes the step's new KV, and hands its
    # layer to save_kv_layer.
    for l, (name, layer) in enumerate(caches.items()):
        worker.wait_for_layer_load(name)
        for (block_ids, tokens, pos), v in zip(compute, vals):
            write_kv(spec, caches, block_ids, tokens, pos, [l], v)
        worker.save_kv_layer(name, layer, None)
    t1 = time.monotonic()
    worker.wait_for_save()
    t_save = time.monotonic() - t1
    errors = worker.get_block_ids_with_load_errors()
    worker.clear_connector_metadata()
    return {"errors": sorted(errors), "load_s": t_load, "save_s": t_save}


class WorkerProcess(object):
    def __init__(self, spec: EngineSpec) -> None:
        # CUDA cannot be used in a forked child of a process that used
        # it: a device worker is spawned.
        ctx = multiprocessing.get_context("fork" if spec.device == "cpu"
                                          else "spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(spec, child),
                                daemon=True)
        self.proc.start()
        self._expect("ready")

    def _expect(self, what: str, timeout: float = 60) -> Any:
        if not self.conn.poll(timeout):
            raise TimeoutError("worker process did not answer in %ds" %
                               timeout)
        tag, val = self.conn.recv()
        if tag == "error":
            raise RuntimeError("worker process failed:\n" + val)
        if tag != what:
            raise RuntimeError("worker said %r, expected %r" % (tag, what))
        return val

    def call(self, cmd: str, arg: Any = None, timeout: float = 60) -> Any:
        self.conn.send((cmd, arg))
        return self._expect("ok", timeout)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def stop(self) -> None:
        if self.proc.is_alive():
            try:
                self.call("exit", timeout=20)
            except (EOFError, OSError, RuntimeError, TimeoutError):
                pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


class Engine(object):
    """One vLLM engine: a scheduler-side connector here, a worker-side one
    in a worker process, a block allocator, and requests."""

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec
        cfg = spec.vllm_config()
        self.sched = connector_class(cfg)(cfg, KVConnectorRole.SCHEDULER,
                                          spec.kv_cache_config())
        self.worker = WorkerProcess(spec)
        self._next_block = spec.block_offset
        self._finished: set = set()
        self._step = 0

    def alloc(self, n: int) -> List[int]:
        ids = [(self._next_block + i) % self.spec.num_blocks
               for i in range(n)]
        self._next_block += n
        return ids

    def _run_step(self, so: SchedulerOutput, compute: List[Any]
                  ) -> Dict[str, Any]:
        so.finished_req_ids = self._finished
        self._finished = set()
        meta = self.sched.build_connector_meta(so)
        so.kv_connector_metadata = meta
        return self.worker.call("step", (pickle.dumps(meta), compute))

    def run(self, req_id: str, tokens: List[int],
            cache_salt: Optional[str] = None, local_hit_tokens: int = 0,
            alloc_failures: int = 0) -> Dict[str, Any]:
        """Prefill one request in one step (recomputing failed loads in a
        second step), then finish it. local_hit_tokens plays vLLM's own
        prefix cache (block-aligned tokens already in the engine's
        blocks). alloc_failures: that many times the blocks cannot be
        allocated after the lookup, as when vLLM's pool is full: vLLM
        then skips update_state_after_alloc, runs a step without the
        request, and looks it up again at the next one. Returns what
        happened."""
        bs = self.spec.block_size
        req = Request(req_id, list(tokens), cache_salt=cache_salt)
        # None is "ask again" (vLLM asks at its next scheduler step).
        self.asked_again = 0
        self.looked_up = 0
        while True:
            ext, is_async = self.sched.get_num_new_matched_tokens(
                req, local_hit_tokens)
            self.looked_up += 1
            if ext is None:
                self.asked_again += 1
                assert self.asked_again < 1000, "connector never answered"
                time.sleep(0.01)
                continue
            if alloc_failures > 0:
                alloc_failures -= 1
                self._run_step(sched_output(), [])  # a step without it
                continue
            break
        assert not is_async
        nblocks = -(-len(tokens) // bs)
        block_ids = self.alloc(nblocks)
        blocks = KVCacheBlocks((tuple(KVCacheBlock(b) for b in block_ids),))
        self.sched.update_state_after_alloc(req, blocks, ext)
        computed = local_hit_tokens + ext
        if local_hit_tokens:
            # The engine's own prefix cache already holds these tokens;
            # they are marked with LOCAL_MARK so an overwrite shows.
            self.worker.call("mark", (block_ids, list(range(
                local_hit_tokens))))
        new = len(tokens) - computed
        so = sched_output(
            scheduled_new_reqs=[new_req(req_id, tokens, block_ids,
                                        computed)],
            num_scheduled_tokens={req_id: new},
            total_num_scheduled_tokens=new)
        t0 = time.monotonic()
        res = self._run_step(so, [(block_ids, list(tokens),
                                   list(range(computed, len(tokens))))])
        res["recomputed"] = 0
        if res["errors"]:
            # vLLM's answer to load errors: recompute from the first
            # failed block (a cached request, no new blocks).
            first = min(block_ids.index(b) for b in res["errors"]) * bs
            first = max(first, local_hit_tokens)
            so2 = sched_output(
                scheduled_cached_reqs=cached_reqs([req_id], [None], [first]),
                num_scheduled_tokens={req_id: len(tokens) - first},
                total_num_scheduled_tokens=len(tokens) - first)
            r2 = self._run_step(so2, [(block_ids, list(tokens),
                                       list(range(first, len(tokens))))])
            res["recomputed"] = len(tokens) - first
            res["save_s"] += r2["save_s"]
        res["wall_s"] = time.monotonic() - t0
        res["external_tokens"] = ext
        res["block_ids"] = block_ids
        self.sched.request_finished(req, block_ids)
        self._finished.add(req_id)
        self.worker.call("finish", [req_id])
        return res

    def kv_of(self, block_ids: List[int], n: int) -> torch.Tensor:
        """The worker's cache content for the first n token positions."""
        return self.worker.call("read", (block_ids, list(range(n))))

    def stop(self) -> None:
        # Deliver the last finished ids, as the next step would.
        try:
            self.sched.build_connector_meta(
                sched_output(finished_req_ids=self._finished))
        except Exception:
            pass
        self.worker.stop()
        self.sched.shutdown()
        self.sched.shutdown()
