# SPDX-License-Identifier: MIT
"""Plays the SGLang side of a HiCache storage backend, against the
stand-in sglang package (tests/python/sglang/): the dynamic backend
factory (import module_path, take class_name, refuse a class that does
not subclass HiCacheStorage, construct it as cls(storage_config, kwargs)),
host KV pools allocated with SGLang's kv_buffer shapes for each layout,
page keys chained over the prompt's pages as HiCache's are, and the
controller's calls (register_mem_pool_host, batch_exists, batch_set_v1
with host token indices, batch_get_v1).

Page contents come from a pure function of (token, position, layer, k/v,
head, dim), exactly representable in fp16 and bf16 (the vLLM driver's,
tests/python/engine.py), so any instance can check any page bit for bit.
The page views here use plain torch indexing, independent of the
backend's strided copies, so a copy that lands in the wrong place shows.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass, field
from typing import Any, Dict, List

import torch

from sglang.srt.mem_cache.hicache_storage import (HiCacheStorage,
                                                  HiCacheStorageConfig)
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16,
          "float32": torch.float32}
UNWRITTEN = -1.0  # never a model value (those are >= 0)


@dataclass
class InstanceSpec:
    socket: str
    model: str = "sgl/llama-mini"
    layers: int = 2
    heads: int = 2
    head_dim: int = 64
    dtype: str = "float16"
    mla: bool = False
    layout: str = "page_first"
    page_size: int = 16
    pages: int = 16
    tp_rank: int = 0
    tp_size: int = 1
    pp_rank: int = 0
    pp_size: int = 1
    extra: Dict[str, Any] = field(default_factory=dict)

    def storage_config(self) -> HiCacheStorageConfig:
        extra = {"backend_name": "kvring", "module_path": "kvring.sglang",
                 "class_name": "KvringHiCacheStorage",
                 "kvring_socket": self.socket, "kvring_timeout_ms": 3000}
        extra.update(self.extra)
        return HiCacheStorageConfig(
            tp_rank=self.tp_rank, tp_size=self.tp_size,
            pp_rank=self.pp_rank, pp_size=self.pp_size, attn_cp_rank=0,
            attn_cp_size=1, is_mla_model=self.mla,
            enable_storage_metrics=True,
            is_page_first_layout=self.layout.startswith("page_first"),
            model_name=self.model, extra_config=extra)


def create_backend(storage_config: HiCacheStorageConfig,
                   **kwargs: Any) -> HiCacheStorage:
    """SGLang's StorageBackendFactory.create_backend("dynamic", ...)."""
    extra = storage_config.extra_config
    for f in ("backend_name", "module_path", "class_name"):
        if f not in extra:
            raise ValueError("Missing required field '%s' in backend config "
                             "for 'dynamic' backend" % f)
    cls = getattr(importlib.import_module(extra["module_path"]),
                  extra["class_name"])
    if not issubclass(cls, HiCacheStorage):
        raise TypeError("Backend class %s must inherit from HiCacheStorage"
                        % extra["class_name"])
    return cls(storage_config, kwargs)


class _PoolMixin(object):
    """The attributes a HiCache host pool carries, set as SGLang's
    constructor sets them, and kv_buffer in SGLang's shape."""

    def _setup(self, spec: InstanceSpec) -> None:
        self.page_size = spec.page_size
        self.layout = spec.layout
        self.dtype = DTYPES[spec.dtype]
        self.layer_num = spec.layers
        self.page_num = spec.pages
        self.size = spec.pages * spec.page_size
        self.device = "cpu"
        self.pin_memory = False
        L, T, P, S = spec.layers, spec.page_size, spec.pages, self.size
        if spec.mla:
            self.kv_cache_dim = spec.head_dim
            D = spec.head_dim
            dims = {"layer_first": (L, S, 1, D), "page_first": (S, L, 1, D),
                    "page_first_direct": (P, L, T, 1, D)}[spec.layout]
        else:
            self.head_num, self.head_dim = spec.heads, spec.head_dim
            H, D = spec.heads, spec.head_dim
            dims = {"layer_first": (2, L, S, H, D),
                    "page_first": (2, S, L, H, D),
                    "page_first_direct": (2, P, L, T, H, D),
                    "page_head": (2, P, H, T, L, D)}[spec.layout]
        self.kv_buffer = torch.full(dims, UNWRITTEN, dtype=self.dtype)


class MHAPool(_PoolMixin, MHATokenToKVPoolHost):
    def __init__(self, spec: InstanceSpec) -> None:  # noqa: D107
        self._setup(spec)


class MLAPool(_PoolMixin, MLATokenToKVPoolHost):
    def __init__(self, spec: InstanceSpec) -> None:  # noqa: D107
        self._setup(spec)


def page_view(pool: Any, pid: int, mla: bool) -> torch.Tensor:
    """Host pool page pid in kvring's chunk order: MHA [2, L, T, H, D],
    MLA [L, T, 1, D] (a view, by torch indexing)."""
    kv, T = pool.kv_buffer, pool.page_size
    a, b = pid * T, (pid + 1) * T
    if mla:
        return {"layer_first": lambda: kv[:, a:b],
                "page_first": lambda: kv[a:b].permute(1, 0, 2, 3),
                "page_first_direct": lambda: kv[pid]}[pool.layout]()
    return {"layer_first": lambda: kv[:, :, a:b],
            "page_first": lambda: kv[:, a:b].permute(0, 2, 1, 3, 4),
            "page_first_direct": lambda: kv[:, pid]}[pool.layout]()


def flat_page(pool: Any, pid: int, mla: bool) -> torch.Tensor:
    """What SGLang's get_data_page(pid * page_size, flat=True) returns."""
    kv, T = pool.kv_buffer, pool.page_size
    a, b = pid * T, (pid + 1) * T
    if pool.layout == "page_first_direct":
        return kv[pid].flatten() if mla else kv[:, pid].flatten()
    if mla:
        return (kv[:, a:b] if pool.layout == "layer_first"
                else kv[a:b]).flatten()
    return (kv[:, :, a:b] if pool.layout == "layer_first"
            else kv[:, a:b]).flatten()


def model_page(spec: InstanceSpec, tokens: List[int], page: int
               ) -> torch.Tensor:
    """The model's KV of prompt page `page`, in kvring's chunk order."""
    T = spec.page_size
    pos = torch.arange(page * T, (page + 1) * T)
    t = torch.tensor(tokens[page * T:(page + 1) * T], dtype=torch.int64)
    nkv, heads = (1, 1) if spec.mla else (2, spec.heads)
    base = ((t * 31 + pos * 7) % 251)[None, None, :, None, None]
    k = torch.arange(nkv)[None, :, None, None, None] * 5
    h = torch.arange(heads)[None, None, None, :, None] * 1009
    d = torch.arange(spec.head_dim)[None, None, None, None, :]
    lay = torch.arange(spec.layers)[:, None, None, None, None] * 13
    v = ((base + k + h + d + lay) % 251).to(torch.float32).div_(8)
    v = v.to(DTYPES[spec.dtype])  # [L, nkv, T, heads, D]
    if spec.mla:
        return v[:, 0].contiguous()          # [L, T, 1, D]
    return v.permute(1, 0, 2, 3, 4).contiguous()  # [2, L, T, H, D]


def page_hashes(tokens: List[int], page_size: int) -> List[str]:
    """HiCache's page keys: each a hash of its page's tokens chained on
    the previous page's key (a prefix gives a prefix of keys)."""
    out: List[str] = []
    prior = b""
    for i in range(len(tokens) // page_size):
        h = hashlib.sha256(prior)
        for t in tokens[i * page_size:(i + 1) * page_size]:
            h.update(int(t).to_bytes(4, "little"))
        prior = h.hexdigest().encode()
        out.append(prior.decode())
    return out


def host_indices(pids: List[int], page_size: int) -> torch.Tensor:
    """HiCache's host token indices of whole pages pids."""
    if not pids:
        return torch.empty(0, dtype=torch.int64)
    return torch.cat([torch.arange(p * page_size, (p + 1) * page_size)
                      for p in pids])


class Instance(object):
    """One SGLang instance's HiCache: a host pool and the backend the
    dynamic factory made, registered as the controller registers it."""

    def __init__(self, spec: InstanceSpec) -> None:
        self.spec = spec
        self.pool = (MLAPool if spec.mla else MHAPool)(spec)
        self.backend = create_backend(spec.storage_config())
        self.backend.register_mem_pool_host(self.pool)

    def compute(self, tokens: List[int], pids: List[int]) -> None:
        """Prefill: the model writes the prompt's pages into pages pids of
        the host pool (HiCache's write-back from the device)."""
        for i, p in enumerate(pids):
            page_view(self.pool, p, self.spec.mla).copy_(
                model_page(self.spec, tokens, i))

    def backup(self, tokens: List[int], pids: List[int]) -> List[bool]:
        keys = page_hashes(tokens, self.spec.page_size)[:len(pids)]
        return self.backend.batch_set_v1(
            keys, host_indices(pids, self.spec.page_size))

    def prefetch(self, tokens: List[int], pids: List[int]) -> List[bool]:
        """HiCache's prefetch: how many pages storage has (batch_exists),
        then batch_get_v1 of that many into pages pids."""
        keys = page_hashes(tokens, self.spec.page_size)[:len(pids)]
        n = self.backend.batch_exists(keys)
        got = self.backend.batch_get_v1(
            keys[:n], host_indices(pids[:n], self.spec.page_size))
        return got + [False] * (len(keys) - n)

    def pages_equal_model(self, tokens: List[int], pids: List[int]
                          ) -> List[bool]:
        return [torch.equal(page_view(self.pool, p, self.spec.mla),
                            model_page(self.spec, tokens, i))
                for i, p in enumerate(pids)]

    def untouched(self, pids: List[int]) -> bool:
        return all(bool((page_view(self.pool, p, self.spec.mla)
                         == UNWRITTEN).all()) for p in pids)

    def close(self) -> None:
        self.backend.close()


def run_in_child(fn: Any, *args: Any, timeout: float = 60) -> Any:
    """fn(*args) in a forked process (another SGLang instance); returns
    its result, or raises with the child's traceback."""
    import multiprocessing
    import traceback

    def child(q: Any) -> None:
        try:
            q.put(("ok", fn(*args)))
        except BaseException:
            q.put(("err", traceback.format_exc()))

    mp = multiprocessing.get_context("fork")
    q = mp.Queue()
    p = mp.Process(target=child, args=(q,))
    p.start()
    try:
        kind, val = q.get(timeout=timeout)
    finally:
        p.join(timeout)
        if p.is_alive():
            p.kill()
            p.join()
    if kind != "ok":
        raise AssertionError("child instance failed:\n" + val)
    return val
