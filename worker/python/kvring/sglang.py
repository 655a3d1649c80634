# SPDX-License-Identifier: MIT
"""kvring.sglang: an SGLang HiCache storage backend on kvring.

SGLang keeps a host (CPU) copy of its KV cache, the HiCache host pool,
and can spill pages from it to an "L3" storage backend. This module is
such a backend: every SGLang instance on a host (and every vLLM engine,
through kvring.vllm) shares one kvringd pool instead of keeping a private
host tier each. SGLang loads it as a "dynamic" backend::

    python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B \\
        --enable-hierarchical-cache --hicache-storage-backend dynamic \\
        --hicache-storage-backend-extra-config \\
        '{"backend_name": "kvring", "module_path": "kvring.sglang",
          "class_name": "KvringHiCacheStorage",
          "kvring_socket": "/run/kvring/0/kvringd.sock"}'

SGLang's factory imports module_path, checks that class_name subclasses
HiCacheStorage, and constructs it as cls(storage_config, kwargs); HiCache
then calls register_mem_pool_host(host_pool), and from there on
batch_exists / batch_get_v1 / batch_set_v1 with page keys and host pool
token indices.

What this module owns: mapping SGLang page keys (strings) to kvring keys,
the namespace, copying pages between the host pool and kvring slots (by
libkvring's strided gather and scatter, no intermediate tensor), and
turning every kvring failure into a miss or a False. It does not own the
host pool (SGLang's) nor eviction (kvringd's LRU).

Each SGLang page is one kvring object of page_size tokens in kvring's
chunk format ([2, layers, page_size, heads * head_dim], K first; MLA
[layers, page_size, kv_cache_dim]), whatever the host pool's layout, so
instances with layer_first and page_first pools share pages. kvringd
keeps objects of any size per namespace; this backend registers its
namespace with chunk_tokens = page_size, so a page is exactly one of the
namespace's chunks. docs/tensors.md, "SGLang HiCache storage", has the
configuration keys and what is shared with vLLM and what is not.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import threading
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kvring import _lib as _kvr_lib

torch = _kvr_lib.need_torch("kvring.sglang")

import kvring
from kvring import KvringError, Keys, SlotStatus, _lib
from kvring.kv import PagedKV
from kvring.torch import ChunkLayout, namespace_model

try:
    from sglang.srt.mem_cache.hicache_storage import (
        HiCacheStorage, HiCacheStorageConfig, HiCacheStorageExtraInfo)
    SGLANG_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as _e:  # SGLang absent: the module still imports
    SGLANG_IMPORT_ERROR = _e

    class HiCacheStorage(object):  # type: ignore[no-redef]
        """Stands for sglang.srt.mem_cache.hicache_storage.HiCacheStorage
        when SGLang is not importable; KvringHiCacheStorage cannot be
        constructed then (SGLang's factory would refuse a class that does
        not subclass the real one)."""

    HiCacheStorageConfig = Any  # type: ignore[misc,assignment]
    HiCacheStorageExtraInfo = Any  # type: ignore[misc,assignment]

try:
    from sglang.srt.metrics.collector import StorageMetrics
except ImportError:
    StorageMetrics = None  # type: ignore[misc,assignment]

__all__ = ["KvringHiCacheStorage", "page_key", "CONFIG_KEYS"]

log = logging.getLogger("kvring.sglang")

#: extra_config keys this backend reads (SGLang's dynamic factory also
#: requires backend_name, module_path and class_name there).
CONFIG_KEYS = {
    "kvring_socket": "kvringd's socket (default $KVRING_SOCKET, else the "
                     "per-uid default)",
    "kvring_model": "the model name in the namespace (default SGLang's "
                    "model_name)",
    "kvring_salt": "tenant salt: mixed into every key, so instances with "
                   "different salts never share a page",
    "kvring_timeout_ms": "bound on every kvring call (default 5000)",
    "kvring_retry_ms": "how long to wait before reconnecting to a kvringd "
                       "that failed (default 1000)",
    "kvring_checksum": "'off', 'on' or 'verify' (default $KVRING_CHECKSUM, "
                       "else off)",
}
_FACTORY_KEYS = ("backend_name", "module_path", "class_name")

_LAYOUTS = ("layer_first", "page_first", "page_first_direct")
_TORCH_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16",
                 torch.float32: "fp32", torch.uint8: "fp8"}


def page_key(page_hash: str, salt: Optional[str] = None) -> bytes:
    """The 16-byte kvring key of an SGLang page key (a string, SGLang's
    page hash). BLAKE2b-128 in its own domain ("kvring-sglang"), keyed
    with a hash of the tenant salt when there is one, so a salted key
    never equals an unsalted one or another salt's. The model, ranks and
    layout are not in the key: they are the namespace's."""
    k = hashlib.blake2b(salt.encode(), digest_size=32).digest() \
        if salt else b""
    return hashlib.blake2b(page_hash.encode(), digest_size=16, key=k,
                           person=b"kvring-sglang").digest()


def _split_tokens(t: torch.Tensor, page_size: int) -> torch.Tensor:
    """t's first dimension (tokens) as [pages, page_size]: a view."""
    st = t.stride()
    return t.as_strided((t.shape[0] // page_size, page_size)
                        + tuple(t.shape[1:]),
                        (st[0] * page_size,) + tuple(st),
                        t.storage_offset())


class _PoolGeometry(object):
    """What this backend needs of a registered host pool, checked once:
    the chunk layout (namespace), the per-layer page views for
    libkvring's gather and scatter, and the flat page order of SGLang's
    get_data_page() for get/set."""

    def __init__(self, pool: Any, mla: bool) -> None:
        for a in ("layout", "page_size", "dtype", "layer_num", "kv_buffer"):
            if not hasattr(pool, a):
                raise ValueError("the host pool (%s) has no %r: register "
                                 "SGLang's HostKVCache (MHATokenToKVPoolHost"
                                 " or MLATokenToKVPoolHost)"
                                 % (type(pool).__name__, a))
        self.layout = pool.layout
        if self.layout not in _LAYOUTS:
            raise ValueError("host pool layout %r is not supported by kvring:"
                             " use --hicache-mem-layout layer_first, "
                             "page_first or page_first_direct"
                             % (self.layout,))
        if mla != hasattr(pool, "kv_cache_dim"):
            raise ValueError(
                "the storage config says is_mla_model=%s but the host pool "
                "is %s (%s): they must agree" % (
                    mla, "an MLA pool" if hasattr(pool, "kv_cache_dim")
                    else "an MHA pool", type(pool).__name__))
        dt = pool.dtype
        name = _TORCH_DTYPES.get(dt)
        if name is None and str(dt).startswith("torch.float8"):
            name = "fp8"  # raw bytes, as kvring stores fp8
        if name is None:
            raise ValueError("host pool dtype %s is not supported: kvring "
                             "stores fp16, bf16, fp32 and fp8" % (dt,))
        self.dtype = dt
        ps = int(pool.page_size)
        L = int(pool.layer_num)
        kv = pool.kv_buffer
        if not isinstance(kv, torch.Tensor):
            raise ValueError("the host pool's kv_buffer is a %s, not one "
                             "tensor: kvring supports SGLang's single-buffer "
                             "MHA and MLA host pools (not split K/V buffers)"
                             % type(kv).__name__)
        if mla:
            H, D = 1, int(pool.kv_cache_dim)
        else:
            if not hasattr(pool, "head_num") or not hasattr(pool, "head_dim"):
                raise ValueError("the MHA host pool has no head_num/head_dim")
            H, D = int(pool.head_num), int(pool.head_dim)
        size = int(pool.size) if self.layout != "page_first_direct" else 0
        pages = int(getattr(pool, "page_num", 0))
        expect = {
            (False, "layer_first"): (2, L, size, H, D),
            (False, "page_first"): (2, size, L, H, D),
            (False, "page_first_direct"): (2, pages, L, ps, H, D),
            (True, "layer_first"): (L, size, 1, D),
            (True, "page_first"): (size, L, 1, D),
            (True, "page_first_direct"): (pages, L, ps, 1, D),
        }[(mla, self.layout)]
        if tuple(kv.shape) != expect:
            raise ValueError("the host pool's kv_buffer has shape %s; a %s "
                             "%s pool of %d layers, page_size %d needs %s"
                             % (tuple(kv.shape), self.layout,
                                "MLA" if mla else "MHA", L, ps, expect))
        if ps <= 0 or (size and size % ps):
            raise ValueError("the host pool holds %d tokens, not a whole "
                             "number of %d-token pages" % (size, ps))
        self.lt = ChunkLayout(layers=L, kv_heads=H, head_size=D,
                              dtype=name, chunk_tokens=ps, mla=mla)
        self.page_size = ps
        self.num_pages = size // ps if size else pages
        self.shape_desc = "%s %s [layers %d, heads %d, dim %d, page %d, %s]" \
            % ("MLA" if mla else "MHA", self.layout, L, H, D, ps, name)
        # Per (layer, K/V) views [pages, page_size, heads, dim] (MLA
        # [pages, page_size, dim]) over the pool, for libkvring.
        raw = kv.view(torch.uint8) if name == "fp8" and \
            kv.dtype != torch.uint8 else kv
        views = []
        for layer in range(L):
            for k in ((0,) if mla else (0, 1)):
                if mla:
                    v = {"layer_first": lambda: raw[layer, :, 0],
                         "page_first": lambda: raw[:, layer, 0],
                         "page_first_direct": lambda: raw[:, layer, :, 0],
                         }[self.layout]()
                else:
                    v = {"layer_first": lambda: raw[k, layer],
                         "page_first": lambda: raw[k, :, layer],
                         "page_first_direct": lambda: raw[k, :, layer],
                         }[self.layout]()
                if self.layout != "page_first_direct":
                    v = _split_tokens(v, ps)
                views.append(v)
        dims = ("blocks", "tokens", "dim") if mla else \
            ("blocks", "tokens", "heads", "dim")
        self.kv = PagedKV(self.lt, views, [raw], dims, "SGLang host pool")
        # get_data_page(flat=True) order and its permutation to kvring's
        # chunk order (only page_first differs: tokens before layers).
        T = ps
        if mla:
            self.flat_shape = {"layer_first": (L, T, 1, D),
                               "page_first": (T, L, 1, D),
                               "page_first_direct": (L, T, 1, D)}[self.layout]
            self.perm = (1, 0, 2, 3) if self.layout == "page_first" else None
            self.canon_shape: Tuple[int, ...] = (L, T, 1, D)
        else:
            self.flat_shape = {"layer_first": (2, L, T, H, D),
                               "page_first": (2, T, L, H, D),
                               "page_first_direct": (2, L, T, H, D)
                               }[self.layout]
            self.perm = (0, 2, 1, 3, 4) if self.layout == "page_first" \
                else None
            self.canon_shape = (2, L, T, H, D)
        self.page_bytes = self.lt.chunk_bytes
        self.page_elems = self.page_bytes // self.lt.elem_bytes

    def page_ids(self, keys: Sequence[str], host_indices: Any) -> List[int]:
        """The host pool page of each key, from SGLang's token indices
        (len(keys) * page_size of them, each page's run contiguous and
        page-aligned). ValueError on anything else, before any copy."""
        if not isinstance(host_indices, torch.Tensor):
            raise ValueError("host_indices is a %s: it must be a tensor of "
                             "host pool token indices"
                             % type(host_indices).__name__)
        if host_indices.dtype.is_floating_point or \
                host_indices.dtype == torch.bool or host_indices.dim() != 1:
            raise ValueError("host_indices is a %d-dimensional %s tensor: it "
                             "must be 1-dimensional integer indices"
                             % (host_indices.dim(), host_indices.dtype))
        ps = self.page_size
        n = host_indices.numel()
        if n != len(keys) * ps:
            raise ValueError("host_indices has %d entries for %d keys: with "
                             "page_size %d it needs %d (one token index per "
                             "token of each page)"
                             % (n, len(keys), ps, len(keys) * ps))
        if n == 0:
            return []
        idx = host_indices.to("cpu", torch.int64).view(-1, ps)
        starts = idx[:, 0]
        if bool((starts % ps != 0).any()) or bool(
                (idx != starts[:, None] + torch.arange(ps)).any()):
            bad = int(next(i for i in range(len(keys))
                           if int(starts[i]) % ps or
                           not torch.equal(idx[i], starts[i] +
                                           torch.arange(ps))))
            raise ValueError("host_indices of page %d (key %r) are not one "
                             "page-aligned run of %d token indices: HiCache "
                             "hands whole pages" % (bad, keys[bad], ps))
        pids = (starts // ps).tolist()
        lo, hi = min(pids), max(pids)
        if lo < 0 or hi >= self.num_pages:
            raise ValueError("host_indices reach page %d: the host pool has "
                             "%d pages" % (hi if hi >= self.num_pages else lo,
                                           self.num_pages))
        return pids

    def check_page_tensor(self, t: Any, what: str) -> torch.Tensor:
        """t as a tensor in the pool's flat page order, or ValueError
        naming what t is and what a page is."""
        if not isinstance(t, torch.Tensor):
            raise ValueError("%s is a %s, not a tensor" % (what,
                                                           type(t).__name__))
        if t.dtype != self.dtype or t.numel() != self.page_elems or \
                t.device.type != "cpu":
            raise ValueError("%s is a %s tensor of %d elements on %s; this "
                             "namespace's page (%s) is %d %s elements on the "
                             "CPU" % (what, t.dtype, t.numel(), t.device,
                                      self.shape_desc, self.page_elems,
                                      self.dtype))
        return t


def _check_keys(keys: Any) -> List[str]:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        raise ValueError("keys is a %s: it must be a list of SGLang page "
                         "keys (strings)" % type(keys).__name__)
    for i, k in enumerate(keys):
        if not isinstance(k, str):
            raise ValueError("key %d is a %s (%r): SGLang page keys are "
                             "strings (page hashes)"
                             % (i, type(k).__name__, k))
    return list(keys)


class KvringHiCacheStorage(HiCacheStorage):
    """SGLang HiCache storage (L3) in a shared kvringd pool.

    Constructed by SGLang's dynamic factory as cls(storage_config,
    kwargs); kvring settings come from storage_config.extra_config
    (CONFIG_KEYS). Pages are stored and read only once HiCache has
    registered its host pool (register_mem_pool_host), which fixes the
    namespace: the model (plus pp and attention-cp ranks when there are
    several), the page geometry and dtype, tp rank and size (MLA: 0 of
    1, since every rank holds the same latent cache and shares pages).

    Failures never break SGLang: with kvringd gone, lookups miss, reads
    return False and stores return False, with one log line naming the
    socket; the backend reconnects on its own. Bad input (keys that are
    not strings, host_indices of the wrong length or not whole pages, no
    registered pool, a page tensor of the wrong size or dtype) raises
    ValueError with nothing stored."""

    def __init__(self, storage_config: "HiCacheStorageConfig",
                 kwargs: Optional[Dict[str, Any]] = None) -> None:
        if SGLANG_IMPORT_ERROR is not None:
            raise ImportError(
                "kvring.sglang.KvringHiCacheStorage needs SGLang: "
                "sglang.srt.mem_cache.hicache_storage could not be imported "
                "(%s); install sglang in this Python" % SGLANG_IMPORT_ERROR)
        cfg = storage_config
        extra = dict(getattr(cfg, "extra_config", None) or {})
        for k in extra:
            if k.startswith("kvring_") and k not in CONFIG_KEYS:
                raise ValueError("extra_config key %r is not a kvring "
                                 "setting: the kvring keys are %s"
                                 % (k, ", ".join(sorted(CONFIG_KEYS))))
        if getattr(cfg, "should_split_heads", False):
            raise ValueError("should_split_heads is set (heterogeneous TP "
                             "split pages): kvring stores each rank's whole "
                             "pages; run every instance with the same TP size")
        self.socket = extra.get("kvring_socket") or \
            os.environ.get("KVRING_SOCKET") or kvring.default_socket()
        model = extra.get("kvring_model") or cfg.model_name
        if not model or not isinstance(model, str):
            raise ValueError("no model name: SGLang's model_name is empty; "
                             "set kvring_model in the extra config")
        salt = extra.get("kvring_salt")
        if salt is not None and not isinstance(salt, str):
            raise ValueError("kvring_salt is a %s: it must be a string"
                             % type(salt).__name__)
        self.salt = salt or None
        self.timeout_ms = self._int(extra, "kvring_timeout_ms", 5000)
        self.retry_s = self._int(extra, "kvring_retry_ms", 1000) / 1000.0
        self.checksum = extra.get("kvring_checksum")
        if self.checksum not in (None, "off", "on", "verify"):
            raise ValueError("kvring_checksum is %r: it must be 'off', 'on' "
                             "or 'verify'" % (self.checksum,))
        self.mla = bool(cfg.is_mla_model)
        ns = model
        if cfg.pp_size > 1:
            ns += "/pp%d" % cfg.pp_rank  # stages hold different layers
        if getattr(cfg, "attn_cp_size", 1) > 1:
            ns += "/cp%dof%d" % (cfg.attn_cp_rank, cfg.attn_cp_size)
        self.ns_model = ns
        self.tp_rank, self.tp_size = (0, 1) if self.mla else \
            (cfg.tp_rank, cfg.tp_size)
        self.page_first_config = bool(getattr(cfg, "is_page_first_layout",
                                              False))
        self.mem_pool_host: Any = None
        self._geo: Optional[_PoolGeometry] = None
        self._client: Optional[kvring.Client] = None
        self._next_try = 0.0
        self._down = False
        self._lock = threading.Lock()
        self._metrics = {"prefetch_pgs": [], "backup_pgs": [],
                         "prefetch_bandwidth": [], "backup_bandwidth": []}
        self.counters = {"pages_stored": 0, "pages_existing": 0,
                         "pages_not_stored": 0, "pages_read": 0,
                         "pages_missed": 0, "failures": 0}

    @staticmethod
    def _int(extra: Dict[str, Any], name: str, default: int) -> int:
        v = extra.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError("%s is %r: it must be a positive integer"
                             % (name, v))
        return v

    # -- the host pool and the connection --
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Check the host pool once (layout, dtype, geometry; ValueError
        naming what was found and what is needed), build the page views,
        and connect. A kvringd that is not there yet is not an error: the
        backend misses until it answers."""
        geo = _PoolGeometry(mem_pool_host, self.mla)
        if self.page_first_config and geo.layout == "layer_first":
            raise ValueError("the storage config says is_page_first_layout "
                             "but the host pool's layout is layer_first: "
                             "they must agree")
        with self._lock:
            old = self._geo
            if old is not None and old.lt != geo.lt:
                raise ValueError("a host pool of %s was registered already; "
                                 "this one is %s: one backend serves one "
                                 "namespace" % (old.shape_desc,
                                                geo.shape_desc))
            self._geo = geo
            self.mem_pool_host = mem_pool_host
        self._conn()

    def _conn(self) -> Optional[kvring.Client]:
        """The live client, connecting if it is time to try; None while
        kvringd is unreachable."""
        c = self._client
        if c is not None and not c.closed:
            return c
        geo = self._geo
        if geo is None:
            return None
        with self._lock:
            if self._client is not None and not self._client.closed:
                return self._client
            now = time.monotonic()
            if now < self._next_try:
                return None
            kw: Dict[str, Any] = {"timeout_ms": self.timeout_ms}
            if self.checksum:
                kw["checksum"] = self.checksum
            try:
                c = geo.lt.connect(self.ns_model, socket=self.socket,
                                   tp_rank=self.tp_rank,
                                   tp_size=self.tp_size, **kw)
            except KvringError as e:
                self._next_try = now + self.retry_s
                if not self._down:
                    log.warning("kvring: cannot reach kvringd at %s (%s): "
                                "HiCache storage misses and skips stores "
                                "until it answers", self.socket, e)
                self._down = True
                return None
            if self._down:
                log.info("kvring: kvringd at %s answers again", self.socket)
            else:
                log.info("kvring: SGLang HiCache storage on kvringd at %s, "
                         "namespace %s tp %d/%d, pages of %d bytes (%s), %s",
                         self.socket, namespace_model(
                             self.ns_model, str(geo.lt.dtype), self.mla),
                         self.tp_rank,
                         self.tp_size, geo.page_bytes, geo.shape_desc,
                         c.debug)
            self._down = False
            self._client = c
            return c

    def _failed(self, c: kvring.Client, what: str, e: Exception) -> None:
        """A kvring call failed: count it, log once per outage, and drop
        the connection if kvringd is gone (the next call reconnects after
        kvring_retry_ms)."""
        with self._lock:
            self.counters["failures"] += 1
        gone = True
        if isinstance(e, KvringError) and e.errno not in (
                errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF,
                errno.ETIMEDOUT, errno.ESHUTDOWN, errno.EOWNERDEAD):
            try:
                c.ping()
                gone = False
            except KvringError:
                pass
        if not gone:
            log.warning("kvring: %s failed at kvringd %s: %s", what,
                        self.socket, e)
            return
        with self._lock:
            if self._client is c:
                self._client = None
                self._next_try = time.monotonic() + self.retry_s
            first = not self._down
            self._down = True
        c.close()
        if first:
            log.warning("kvring: %s failed, kvringd at %s is gone (%s): "
                        "HiCache storage misses and skips stores until it "
                        "answers", what, self.socket, e)

    def _need_pool(self, what: str) -> _PoolGeometry:
        geo = self._geo
        if geo is None:
            raise ValueError("%s before register_mem_pool_host(): the "
                             "backend copies pages from and to the host "
                             "pool, register it first" % what)
        return geo

    def _keys(self, keys: Sequence[str]) -> Keys:
        # The digests are the keys' bytes (lo, hi little-endian): one
        # copy into the C array instead of Keys.from_list's per-key
        # checks, which cost as much as the page copies at small pages.
        n = len(keys)
        arr = (_lib.Key * max(n, 1)).from_buffer_copy(
            b"".join(page_key(k, self.salt) for k in keys) or bytes(16))
        return Keys(arr, n)

    # -- lookups --
    def batch_exists(self, keys: List[str],
                     extra_info: Optional["HiCacheStorageExtraInfo"] = None
                     ) -> int:
        """How many of keys, from the first, are stored (kvringd's
        longest stored prefix). 0 while kvringd is unreachable."""
        keys = _check_keys(keys)
        if not keys:
            return 0
        c = self._conn()
        if c is None:
            return 0
        try:
            return c.lookup(self._keys(keys))
        except KvringError as e:
            self._failed(c, "lookup", e)
            return 0

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    def _abort_store(self, c: Any, tx: Any, e: BaseException) -> bool:
        """After e broke a store in tx before its commit ended: abort tx
        (an error there changes nothing). True when e was kvringd's (said;
        the caller answers "not stored"), False when e must propagate."""
        try:
            tx.abort()
        except KvringError:
            pass
        if isinstance(e, KvringError):
            self._failed(c, "store commit", e)
            return True
        return False

    # -- zero-copy page transfers against the host pool --
    def _page_batch(self, who: str, keys: List[str],
                    host_indices: torch.Tensor) -> Tuple[Any, ...]:
        """How a page batch (who) starts: keys checked, the host pool's
        geometry and the keys' page ids, the connection and the clock at
        the start of the transfer. The last item is the answer to give at
        once, or None to go on: [] for no keys, all False while kvringd is
        unreachable."""
        keys = _check_keys(keys)
        geo = self._need_pool(who)
        pids = geo.page_ids(keys, host_indices)
        if not keys:
            return keys, geo, pids, None, 0.0, []
        c = self._conn()
        if c is None:
            return keys, geo, pids, None, 0.0, [False] * len(keys)
        return keys, geo, pids, c, time.perf_counter(), None

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional["HiCacheStorageExtraInfo"] = None
                     ) -> List[bool]:
        """Store the host pool pages at host_indices under keys: each page
        goes from the pool straight into its kvring slot (libkvring's
        strided gather) and is published at commit. Per key: True when
        the page is stored (now, or already, or being stored by another
        writer of the same bytes), False when kvringd refused it (full,
        quota) or is unreachable. Nothing is published by a process that
        dies before its commit."""
        keys, geo, pids, c, t0, now = self._page_batch("batch_set_v1", keys,
                                                       host_indices)
        if now is not None:
            return now
        try:
            tx = c.store(self._keys(keys), [geo.page_bytes] * len(keys))
        except KvringError as e:
            self._failed(c, "store", e)
            return [False] * len(keys)
        sts = [st for st, _ in tx.slots]
        ok = [i for i, st in enumerate(sts) if st == SlotStatus.OK]
        try:
            if ok:
                chunks = [torch.frombuffer(tx.slots[i][1],
                                           dtype=geo.lt.torch_dtype)
                          for i in ok]
                geo.kv.gather([pids[i] for i in ok], chunks)
                del chunks  # the views must be free before the commit
            tx.commit()
        except BaseException as e:
            if not self._abort_store(c, tx, e):
                raise
            return [False] * len(keys)
        res = [st in (SlotStatus.OK, SlotStatus.EXISTS, SlotStatus.BUSY)
               for st in sts]
        refused = len(keys) - sum(res)
        dt = time.perf_counter() - t0
        with self._lock:
            self.counters["pages_stored"] += len(ok)
            self.counters["pages_existing"] += len(keys) - len(ok) - refused
            self.counters["pages_not_stored"] += refused
            self._metrics["backup_pgs"].append(len(keys))
            if ok and dt > 0:
                self._metrics["backup_bandwidth"].append(
                    len(ok) * geo.page_bytes / dt / 1e9)
        if refused:
            log.debug("kvring: %d of %d pages not stored (%s)", refused,
                      len(keys), ", ".join(sorted({
                          getattr(st, "name", str(st)) for st in sts
                          if st not in (SlotStatus.OK, SlotStatus.EXISTS,
                                        SlotStatus.BUSY)})))
        return res

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional["HiCacheStorageExtraInfo"] = None
                     ) -> List[bool]:
        """Read the longest stored prefix of keys into the host pool pages
        at host_indices, straight from the pinned kvring slots (libkvring's
        strided scatter). Per key: True for the pages read, False from the
        first page that is missing (or fails its checksum) on; all False
        while kvringd is unreachable. Pages after the prefix are not
        touched."""
        keys, geo, pids, c, t0, now = self._page_batch("batch_get_v1", keys,
                                                       host_indices)
        if now is not None:
            return now
        try:
            tx = c.retrieve(self._keys(keys))
        except KvringError as e:
            self._failed(c, "retrieve", e)
            return [False] * len(keys)
        n = 0
        try:
            if c.checksum == "on" and len(tx):
                tx.verify()  # 'verify' checked them on arrival
            for st, _ in tx.slots:
                if st != SlotStatus.OK:
                    break
                n += 1
            if n:
                with warnings.catch_warnings():
                    # The slot views are read-only; torch has no read-only
                    # tensors and says so. Nothing writes through these.
                    warnings.simplefilter("ignore", UserWarning)
                    chunks = [torch.frombuffer(tx.slots[i][1],
                                               dtype=geo.lt.torch_dtype)
                              for i in range(n)]
                geo.kv.scatter(pids[:n], chunks)
                del chunks
            tx.commit()
        except KvringError as e:
            self._failed(c, "retrieve", e)
            return [False] * len(keys)
        dt = time.perf_counter() - t0
        with self._lock:
            self.counters["pages_read"] += n
            self.counters["pages_missed"] += len(keys) - n
            self._metrics["prefetch_pgs"].append(n)
            if n and dt > 0:
                self._metrics["prefetch_bandwidth"].append(
                    n * geo.page_bytes / dt / 1e9)
        return [True] * n + [False] * (len(keys) - n)

    # -- the copying interface (whole page tensors) --
    def set(self, key: str, value: Optional[Any] = None,
            target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        """Store one page given as a tensor in the host pool's flat page
        order (what SGLang's get_data_page(index, flat=True) returns)."""
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Optional[Any] = None,
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        """Store pages given as tensors (see set()). True when every page
        is stored (or was already)."""
        keys = _check_keys(keys)
        geo = self._need_pool("batch_set")
        if values is None or len(values) != len(keys):
            raise ValueError("%s values for %d keys: give one page tensor "
                             "per key" % ("no" if values is None
                                          else len(values), len(keys)))
        vals = [geo.check_page_tensor(v, "value %d" % i)
                for i, v in enumerate(values)]
        if not keys:
            return True
        c = self._conn()
        if c is None:
            return False
        try:
            tx = c.store(self._keys(keys), [geo.page_bytes] * len(keys))
        except KvringError as e:
            self._failed(c, "store", e)
            return False
        sts = [st for st, _ in tx.slots]
        try:
            for i, (st, mv) in enumerate(tx.slots):
                if st != SlotStatus.OK:
                    continue
                dst = torch.frombuffer(mv, dtype=geo.lt.torch_dtype).view(
                    geo.canon_shape)
                src = vals[i].reshape(geo.flat_shape)
                dst.copy_(src.permute(geo.perm) if geo.perm else src)
                del dst
            tx.commit()
        except BaseException as e:
            if not self._abort_store(c, tx, e):
                raise
            return False
        return all(st in (SlotStatus.OK, SlotStatus.EXISTS, SlotStatus.BUSY)
                   for st in sts)

    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Optional[torch.Tensor]:
        """Read one page into target_location (a tensor in the host pool's
        flat page order, e.g. get_dummy_flat_data_page(); a new one when
        None). None when the page is not stored."""
        r = self.batch_get([key], [target_location])
        return r[0] if isinstance(r, list) else None

    def batch_get(self, keys: List[str],
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None
                  ) -> List[Optional[torch.Tensor]]:
        """Read pages (see get()): a tensor per key, None from the first
        page that is not stored on."""
        keys = _check_keys(keys)
        geo = self._need_pool("batch_get")
        outs = list(target_locations) if target_locations is not None \
            else [None] * len(keys)
        if len(outs) != len(keys):
            raise ValueError("%d target locations for %d keys: give one "
                             "page tensor (or None) per key"
                             % (len(outs), len(keys)))
        outs = [torch.empty(geo.page_elems, dtype=geo.dtype) if t is None
                else geo.check_page_tensor(t, "target location %d" % i)
                for i, t in enumerate(outs)]
        res: List[Optional[torch.Tensor]] = [None] * len(keys)
        if not keys:
            return res
        c = self._conn()
        if c is None:
            return res
        try:
            tx = c.retrieve(self._keys(keys))
        except KvringError as e:
            self._failed(c, "retrieve", e)
            return res
        try:
            if c.checksum == "on" and len(tx):
                tx.verify()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                for i, (st, mv) in enumerate(tx.slots):
                    if st != SlotStatus.OK:
                        break
                    src = torch.frombuffer(mv, dtype=geo.lt.torch_dtype
                                           ).view(geo.canon_shape)
                    dst = outs[i].view(geo.flat_shape)
                    (dst.permute(geo.perm) if geo.perm else dst).copy_(src)
                    del src
                    res[i] = outs[i]
            tx.commit()
        except KvringError as e:
            self._failed(c, "retrieve", e)
            return [None] * len(keys)
        return res

    # -- the multi-pool (hybrid model) interface --
    def batch_exists_v2(self, keys: List[str], pool_transfers: Any = None,
                        extra_info: Any = None) -> Any:
        raise NotImplementedError(
            "kvring's SGLang backend stores the KV pool only; hybrid models "
            "(Mamba, SWA, indexer pools: the v2 multi-pool calls) are not "
            "supported, run them with another HiCache storage backend")

    def batch_get_v2(self, transfers: Any, extra_info: Any = None) -> Any:
        return self.batch_exists_v2([], transfers, extra_info)

    def batch_set_v2(self, transfers: Any, extra_info: Any = None) -> Any:
        return self.batch_exists_v2([], transfers, extra_info)

    # -- housekeeping --
    def clear(self) -> None:
        """SGLang's flush: this instance's counters start again. The pages
        stay in kvringd: they are shared with every other instance of the
        namespace and age out by kvringd's LRU (an instance cannot delete
        pages another one may be reading)."""
        with self._lock:
            for k in self.counters:
                self.counters[k] = 0
            for v in self._metrics.values():
                v.clear()
        log.info("kvring: clear(): pages in kvringd at %s are shared and "
                 "stay until its LRU evicts them", self.socket)

    def get_stats(self) -> Any:
        """SGLang's StorageMetrics of the calls since the last get_stats()
        (pages per batch and GB/s of reads and writes), or, without
        SGLang's metrics module, the same lists in a dict. The running
        totals are in self.counters."""
        with self._lock:
            m = {k: list(v) for k, v in self._metrics.items()}
            for v in self._metrics.values():
                v.clear()
        if StorageMetrics is not None:
            return StorageMetrics(**m)
        return m

    def close(self) -> None:
        """Drop the connection (kvringd frees whatever it held). Harmless
        twice."""
        with self._lock:
            c, self._client = self._client, None
            self._next_try = float("inf")
        if c is not None:
            c.close()

    def __enter__(self) -> "KvringHiCacheStorage":
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        g = self._geo
        return "<KvringHiCacheStorage %s at %s: %s>" % (
            self.ns_model, self.socket,
            g.shape_desc if g else "no host pool yet")
