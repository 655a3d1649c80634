# SPDX-License-Identifier: MIT
"""kvring.vllm: a vLLM v1 KV connector backed by kvringd (docs/tensors.md).

Load it with::

    vllm serve MODEL --kv-transfer-config '{"kv_connector":"KvringConnector",
        "kv_connector_module_path":"kvring.vllm","kv_role":"kv_both",
        "kv_load_failure_policy":"recompute",
        "kv_connector_extra_config":{"kvring_socket":"/run/kvring/0/kvringd.sock"}}'

"recompute" makes vLLM recompute blocks kvring could not load; under its
default, "fail", they fail the request (the connector warns once).
Extra config keys (CONFIG_KEYS; docs/tensors.md has the table), all
optional: kvring_socket, kvring_chunk_tokens (256; a multiple of the
block size), kvring_model, kvring_timeout_ms (5000), kvring_kv_layout
(left out: the layout is read from the cache tensors and vLLM's
attention backend; 'NHD' or 'HND' overrides it for a cache that could be
read two ways), kvring_checksum ('off', 'fill' (also 'on': sums made at
store, checked on request), 'verify'), kvring_prefault
('background', 'inline'), kvring_store_ahead, kvring_server_uid (each
left out: its environment variable decides), kvring_l2 and
kvring_l2_asks (read through kvringd's L2 tier, answering vLLM "ask
again" while chunks still load from Redis), kvring_layerwise (layer by
layer; default on for a cache on a device, off on the CPU). Unknown
kvring_* keys are refused.

Scheduler side: get_num_new_matched_tokens() derives the request's chunk
keys with its cache_salt folded in, looks up the longest stored prefix of
full chunks and pins it under a lease (the call's only effect: a pin
never taken up is released by the next lookup of the request,
update_state_after_alloc with nothing to load, request_finished, or the
lease's expiry); update_state_after_alloc() and build_connector_meta()
carry the lease and the block ids to the workers (a request resumed after
preemption gets its new block ids, from resumed_req_ids or vLLM 0.10's
resumed_from_preemption); request_finished() releases what is left.

Worker side: register_kv_caches() (or register_cross_layers_kv_cache(),
where prefer_cross_layer_blocks is True) reads the cache's layout from
the tensors and vLLM's attention backend (kvring.kv.PagedKV.from_vllm)
and refuses, with a sentence, a cache it cannot read or could read two
ways; a model with several KV cache groups is refused when the connector
is built. start_load_kv() redeems the lease in the worker process and
copies the chunks into the allocated blocks (skipping blocks vLLM's own
prefix cache already holds); wait_for_save() stores every full prompt
chunk computed so far. Whole requests (the default for a CPU cache) go
through libkvring's C gather and scatter. Layer by layer (kvring_layerwise,
the default for a cache on a device) start_load_kv() issues each layer's
load copies and reserves the saves' slots, wait_for_layer_load() waits
for one layer's copies, save_kv_layer() issues one layer's save copies,
and wait_for_save() commits only the chunks whose every layer landed.
A device cache's copies go through staging tensors on the device and a
copy stream (kvring.kv.StagedCopies, kvring.device; not run on a device
yet: scripts/device-check.sh). Only full chunks are stored. Any kvring
failure makes a load report its blocks through
get_block_ids_with_load_errors() (vLLM recomputes them under
kv_load_failure_policy "recompute") and a save publish nothing, with a
log line: the engine never fails or hangs because of the cache.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

from kvring import _lib as _kvr_lib

torch = _kvr_lib.need_torch("kvring.vllm")

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole)

import kvring
from kvring.device import SharedRegistration, register_pool, slot_base
from kvring.kv import PagedKV, StagedCopies, backend_labels, checked_prefix
from kvring.torch import ChunkLayout, KvringContext, salted_keys

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

log = logging.getLogger("kvring.vllm")

__all__ = ["KvringConnector", "KvringConnectorMetadata", "LoadSpec",
           "SaveSpec"]


@dataclass
class LoadSpec:
    """Load nchunks chunks of a request into block_ids (token order),
    skipping the first skip_blocks (vLLM's own prefix-cache hits)."""
    req_id: str
    lease: int
    tokens: List[int]       # the chunks' tokens, for ranks without lease
    salt: Optional[str]
    block_ids: List[int]
    skip_blocks: int
    nchunks: int


@dataclass
class SaveSpec:
    """Store the first nchunks full chunks of a request's prompt."""
    req_id: str
    tokens: List[int]
    salt: Optional[str]
    block_ids: List[int]
    nchunks: int


@dataclass
class KvringConnectorMetadata(KVConnectorMetadata):
    loads: List[LoadSpec] = field(default_factory=list)
    saves: List[SaveSpec] = field(default_factory=list)


@dataclass
class _Req:
    """Scheduler-side state of one request."""
    tokens: List[int]
    salt: Optional[str]
    lease: int = 0
    hit_chunks: int = 0
    external: int = 0        # tokens vLLM agreed to load
    block_ids: List[int] = field(default_factory=list)
    saved_chunks: int = 0
    load_pending: bool = False
    l2_asks: int = 0         # "ask again" answers given (kvring_l2)


@dataclass
class _InLoad:
    """Worker side, layer by layer: a load retrieved at start_load_kv."""
    ld: LoadSpec
    views: Any
    use_lease: bool
    good: int = 0            # chunks that passed the checksum check
    failed: bool = False     # a layer's copy failed: blocks reported

    @property
    def iid(self) -> Tuple[str, str]:
        return ("load", self.ld.req_id)


@dataclass
class _InSave:
    """Worker side, layer by layer: a store reserved at start_load_kv,
    filled by save_kv_layer, committed by wait_for_save only when every
    layer landed."""
    sv: SaveSpec
    views: Any
    ids: List[int] = field(default_factory=list)
    layers: Set[int] = field(default_factory=set)
    ev: Any = None
    failed: bool = False


def _layout(vllm_config: "VllmConfig", chunk_tokens: int) -> ChunkLayout:
    mc, pc, cc = (vllm_config.model_config, vllm_config.parallel_config,
                  vllm_config.cache_config)
    dtype: Any = getattr(cc, "cache_dtype", "auto")
    if dtype in (None, "auto"):
        dtype = mc.dtype
    if isinstance(dtype, str) and dtype.startswith("fp8"):
        dtype = "fp8"
    mla = bool(getattr(mc, "use_mla", False))
    return ChunkLayout(layers=mc.get_num_layers(pc),
                       kv_heads=1 if mla else mc.get_num_kv_heads(pc),
                       head_size=mc.get_head_size(), dtype=dtype,
                       chunk_tokens=chunk_tokens, mla=mla)


def _resumed(cached: Any) -> Any:
    """resumed(i, req_id): whether cached request i resumed after
    preemption, when its new_block_ids replace its blocks instead of
    extending them. Today's vLLM lists those requests in
    resumed_req_ids (a set); vLLM 0.10 had a flag per request,
    resumed_from_preemption (a list parallel to req_ids)."""
    ids = getattr(cached, "resumed_req_ids", None)
    if ids is not None:
        return lambda i, rid: rid in ids
    flags = getattr(cached, "resumed_from_preemption", None)
    if flags is not None:
        return lambda i, rid: bool(flags[i])
    return lambda i, rid: False


# kv_connector_extra_config keys: name -> (what it takes, default, the
# environment variable that sets it when the key is left out).
_BOOL = ("a bool", (True, False))
CONFIG_KEYS: Dict[str, Tuple[Any, Any, Optional[str]]] = {
    "kvring_socket": (str, None, "KVRING_SOCKET"),
    "kvring_chunk_tokens": (int, 256, None),
    "kvring_model": (str, None, None),
    "kvring_timeout_ms": (int, 0, None),
    "kvring_kv_layout": (("'NHD' or 'HND'", ("NHD", "HND")), None, None),
    "kvring_l2": (_BOOL, False, None),
    "kvring_l2_asks": (int, 20, None),
    "kvring_checksum": (("'off', 'fill' (or 'on') or 'verify'",
                         ("off", "fill", "on", "verify")),
                        None, "KVRING_CHECKSUM"),
    "kvring_prefault": (("'background' or 'inline'",
                         ("background", "inline")), None, "KVRING_PREFAULT"),
    "kvring_store_ahead": (_BOOL, None, "KVRING_STORE_AHEAD"),
    "kvring_server_uid": (int, None, "KVRING_SERVER_UID"),
    "kvring_layerwise": (_BOOL, None, None),
}


def read_config(extra: Any) -> Dict[str, Any]:
    """The connector's settings from kv_connector_extra_config: every
    kvring_* key checked (ValueError naming the key, what it takes, and
    for an unknown key the known ones), defaults for the rest; None
    leaves a setting to its environment variable. Keys without the
    kvring_ prefix belong to others and are ignored."""
    extra = dict(extra or {})
    unknown = sorted(k for k in extra if str(k).startswith("kvring_")
                     and k not in CONFIG_KEYS)
    if unknown:
        raise ValueError("kv_connector_extra_config: unknown key%s %s; the "
                         "kvring connector knows %s" % (
                             "" if len(unknown) == 1 else "s",
                             ", ".join(unknown), ", ".join(CONFIG_KEYS)))
    out: Dict[str, Any] = {}
    for key, (kind, default, env) in CONFIG_KEYS.items():
        v = extra.get(key)
        if v is None:
            out[key] = default
            continue
        if kind is int:
            ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
            want = "a non-negative integer"
        elif kind is str:
            ok, want = isinstance(v, str) and v != "", "a non-empty string"
        else:
            want, allowed = kind
            ok = v in allowed and type(v) is type(allowed[0])
        if not ok:
            raise ValueError("kv_connector_extra_config.%s is %r: it must be "
                             "%s%s" % (key, v, want,
                                       " (or left out: $%s decides)" % env
                                       if env else ""))
        out[key] = v
    return out


_said_policy = False


def _say_failure_policy(kc: Any) -> None:
    """Under vLLM's kv_load_failure_policy 'fail' (its default) a chunk
    kvring cannot deliver fails the request; say so once, at start."""
    global _said_policy
    policy = getattr(kc, "kv_load_failure_policy", None)
    if policy != "fail" or _said_policy:
        return
    _said_policy = True
    log.warning("kvring: vLLM's kv_load_failure_policy is 'fail': a chunk "
                "kvring loses (evicted, the server restarted) or finds "
                "corrupt will fail the request with an error instead of "
                "being recomputed. 'recompute' is the policy for a cache: "
                "set \"kv_load_failure_policy\":\"recompute\" in "
                "--kv-transfer-config")


def _refuse_hybrid(kv_cache_config: Any) -> None:
    """A model with several KV cache groups (vLLM's hybrid memory
    allocator: full attention beside sliding-window or Mamba layers) has
    block ids per group and layers whose blocks mean different tokens;
    kvring's chunks hold one group. Refused at start, naming the groups."""
    groups = list(getattr(kv_cache_config, "kv_cache_groups", None) or [])
    if len(groups) <= 1:
        return
    words = []
    for i, g in enumerate(groups):
        names = list(getattr(g, "layer_names", []))
        words.append("group %d: %s, %d layer%s (%s%s)" % (
            i, type(getattr(g, "kv_cache_spec", None)).__name__,
            len(names), "" if len(names) == 1 else "s",
            ", ".join(names[:2]), ", ..." if len(names) > 2 else ""))
    raise ValueError(
        "kvring: this model has %d KV cache groups (%s); the kvring "
        "connector stores models with one group only (all layers full "
        "attention, or all MLA). Serve it without the kvring connector, "
        "or with vLLM's hybrid KV cache manager disabled "
        "(--disable-hybrid-kv-cache-manager) if the model allows it"
        % (len(groups), "; ".join(words)))


class KvringConnector(KVConnectorBase_V1):
    """vLLM KVConnectorBase_V1 over kvring (see the module docstring)."""

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: Dict[str, Any]
                                         ) -> bool:
        # Layer by layer (the default on a device) the connector runs
        # Python between layers, which a full CUDA graph would skip.
        return (extra_config or {}).get("kvring_layerwise") is not False

    @property
    def requires_kv_delivery(self) -> bool:
        # A cache: a save that is dropped (a request preempted while its
        # chunks are stored, a full pool) is a future miss, not a loss.
        return False

    @property
    def prefer_cross_layer_blocks(self) -> bool:
        """True when vLLM can give kvring one tensor for all layers with
        the blocks outermost (the backend's stride order with a layers
        dimension does not keep the layers first, vLLM's own condition),
        and kvring reads it (the backend says what each dimension is,
        and kvring_kv_layout does not override the per-layer layout)."""
        if self._kv_layout is not None:
            return False
        be = self._attn_backend(None)
        if be is None:
            return False
        labels = backend_labels(be, self.layout, self._block_size,
                                layers=True)
        return labels is not None and labels[0] != "layers"

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole,
                 kv_cache_config: Optional["KVCacheConfig"] = None) -> None:
        super().__init__(vllm_config=vllm_config, role=role,
                         kv_cache_config=kv_cache_config)
        kc = self._kv_transfer_config
        cfg = read_config(getattr(kc, "kv_connector_extra_config", None))
        self._socket: Optional[str] = cfg["kvring_socket"]
        self._chunk_tokens = cfg["kvring_chunk_tokens"]
        self._timeout_ms = cfg["kvring_timeout_ms"]
        self._kv_layout: Optional[str] = cfg["kvring_kv_layout"]
        self._model = str(cfg["kvring_model"]
                          or vllm_config.model_config.model)
        # Read through kvringd's L2 tier (docs/l2.md): a lookup that hits
        # the server's L2 deadline with loads in flight answers "ask
        # again" (None) up to kvring_l2_asks times per request.
        self._l2 = cfg["kvring_l2"]
        self._l2_asks = cfg["kvring_l2_asks"]
        self._connect_kw: Dict[str, Any] = {
            # 'fill' is the library's 'on': sums made at every store.
            "checksum": ("on" if cfg["kvring_checksum"] == "fill"
                         else cfg["kvring_checksum"]),
            "prefault_background": cfg["kvring_prefault"] == "background",
            "store_ahead": cfg["kvring_store_ahead"],
            "trust_server_uid": cfg["kvring_server_uid"]}
        if role == KVConnectorRole.SCHEDULER:
            _say_failure_policy(kc)
        self._block_size = int(vllm_config.cache_config.block_size)
        if self._chunk_tokens % self._block_size:
            raise ValueError(
                "kvring_chunk_tokens %d is not a multiple of the block size "
                "%d: set kv_connector_extra_config.kvring_chunk_tokens"
                % (self._chunk_tokens, self._block_size))
        self._bpc = self._chunk_tokens // self._block_size
        _refuse_hybrid(kv_cache_config)
        self.layout = _layout(vllm_config, self._chunk_tokens)
        pc = vllm_config.parallel_config
        self._tp_size = int(getattr(pc, "tensor_parallel_size", 1) or 1)
        rank = int(getattr(pc, "rank", 0) or 0)
        self._tp_rank = rank % self._tp_size
        # Pipeline stages hold different layers with the same shape: each
        # stage gets its own namespace, or one would load another's KV.
        self._pp_size = int(getattr(pc, "pipeline_parallel_size", 1) or 1)
        self._pp_rank = (rank // self._tp_size) % self._pp_size
        # Scheduler side.
        self._client: Optional[kvring.Client] = None
        self._reqs: Dict[str, _Req] = {}
        # Worker side.
        self._ctx: Optional[KvringContext] = None
        self._kv: Optional[PagedKV] = None
        self._load_errors: Set[int] = set()
        self._said_copy = False
        self._cfg_layerwise: Optional[bool] = cfg["kvring_layerwise"]
        self._layerwise = False
        self._staged: Optional[StagedCopies] = None
        self._reg: Optional[SharedRegistration] = None
        self._layer_ids: Dict[str, int] = {}
        self._inloads: List[_InLoad] = []
        self._insaves: List[_InSave] = []
        self._layer_ev: Dict[int, Any] = {}
        if role == KVConnectorRole.SCHEDULER:
            # The scheduler looks up with rank 0's namespace; with tensor
            # parallelism every rank stores its own shard under its own
            # namespace, and ranks other than 0 retrieve by key.
            self._client = self._connect(tp_rank=0, pp_rank=0)

    def _connect(self, tp_rank: int, pp_rank: int
                 ) -> Optional[kvring.Client]:
        model = self._model
        if self._pp_size > 1:
            model = "%s/pp%d" % (model, pp_rank)
        try:
            c = self.layout.connect(model, socket=self._socket,
                                    tp_rank=tp_rank, tp_size=self._tp_size,
                                    timeout_ms=self._timeout_ms,
                                    **self._connect_kw)
        except kvring.KvringError as e:
            log.warning("kvring: cannot connect (%s); the cache is off", e)
            return None
        log.info("kvring %s connector: %s", self.role.name.lower(), c.debug)
        if c.transport == "copy" and not self._said_copy:
            # Once per connector: loads and saves still work, through the
            # library's private buffers and the socket, only slower.
            self._said_copy = True
            log.warning("kvring: no shared pool could be mapped, using the "
                        "copy transport: chunks travel over the socket "
                        "(slower than shared memory; see kvringd's log "
                        "for why)")
        return c

    # ==============================
    # Scheduler-side methods
    # ==============================

    def get_num_new_matched_tokens(self, request: "Request",
                                   num_computed_tokens: int
                                   ) -> Tuple[Optional[int], bool]:
        rid = request.request_id
        tokens = list(request.prompt_token_ids or [])
        salt = getattr(request, "cache_salt", None)
        st = self._reqs.get(rid)
        if st is None:
            st = self._reqs[rid] = _Req(tokens=tokens, salt=salt)
        # Called again for the same request: the previous pin goes first.
        self._release(st)
        c = self._client
        if c is None or len(tokens) < self._chunk_tokens:
            return 0, False
        try:
            keys = salted_keys(c, tokens, self._chunk_tokens, salt)
            if self._l2:
                hits, lease, pending = c.lookup(keys, pin=True, l2=True)
            else:
                (hits, lease), pending = c.lookup(keys, pin=True), False
        except kvring.KvringError as e:
            log.warning("kvring lookup failed, recomputing %s: %s", rid, e)
            return 0, False
        if pending and hits < len(keys) and st.l2_asks < self._l2_asks:
            # Chunks are still coming from L2: vLLM asks again next step.
            st.l2_asks += 1
            if lease:
                st.lease = lease
                self._release(st)
            return None, False
        st.lease, st.hit_chunks = lease, hits
        hit_tokens = hits * self._chunk_tokens
        # vLLM must compute at least the last token itself.
        if hit_tokens >= len(tokens):
            hit_tokens = len(tokens) - 1
        if hit_tokens <= num_computed_tokens:
            self._release(st)
            return 0, False
        return hit_tokens - num_computed_tokens, False

    def update_state_after_alloc(self, request: "Request",
                                 blocks: "KVCacheBlocks",
                                 num_external_tokens: int) -> None:
        st = self._reqs.get(request.request_id)
        if st is None:
            return
        if num_external_tokens == 0:
            self._release(st)
            return
        st.external = num_external_tokens
        st.load_pending = True

    def build_connector_meta(self, scheduler_output: "SchedulerOutput"
                             ) -> KVConnectorMetadata:
        meta = KvringConnectorMetadata()
        so = scheduler_output
        for nr in so.scheduled_new_reqs:
            st = self._reqs.get(nr.req_id)
            if st is None:
                # Never looked up, so its cache_salt is unknown (it is not
                # in NewRequestData): storing it unsalted could hand one
                # tenant's KV to another. Skip it.
                log.debug("kvring: %s was not looked up; not saved",
                          nr.req_id)
                continue
            st.block_ids = list(nr.block_ids[0])
            self._plan_load(meta, nr.req_id, st, nr.num_computed_tokens)
            self._plan_save(meta, nr.req_id, st, nr.num_computed_tokens
                            + so.num_scheduled_tokens.get(nr.req_id, 0))
        cached = so.scheduled_cached_reqs
        resumed = _resumed(cached)
        for i, rid in enumerate(cached.req_ids):
            st = self._reqs.get(rid)
            if st is None:
                continue
            new = cached.new_block_ids[i]
            if new is not None:
                if resumed(i, rid):
                    st.block_ids = list(new[0])
                else:
                    st.block_ids.extend(new[0])
            # A request resumed after preemption was looked up and
            # allocated again (get_num_new_matched_tokens,
            # update_state_after_alloc) but comes back here, not as new.
            self._plan_load(meta, rid, st, cached.num_computed_tokens[i])
            self._plan_save(meta, rid, st, cached.num_computed_tokens[i]
                            + so.num_scheduled_tokens.get(rid, 0))
        for rid in so.finished_req_ids:
            st = self._reqs.pop(rid, None)
            if st is not None:
                self._release(st)
        return meta

    def _plan_load(self, meta: KvringConnectorMetadata, rid: str, st: _Req,
                   num_computed_tokens: int) -> None:
        """Hand the pinned hit to the workers, once blocks are known.
        num_computed_tokens counts vLLM's own prefix hits plus the
        external tokens it agreed to load."""
        if not st.load_pending:
            return
        local = num_computed_tokens - st.external
        n = st.hit_chunks
        meta.loads.append(LoadSpec(
            req_id=rid, lease=st.lease,
            tokens=st.tokens[:n * self._chunk_tokens], salt=st.salt,
            block_ids=st.block_ids[:n * self._bpc],
            skip_blocks=max(local, 0) // self._block_size, nchunks=n))
        # The lease now belongs to the worker that redeems it.
        st.lease, st.load_pending = 0, False
        st.saved_chunks = max(st.saved_chunks, n)

    def _plan_save(self, meta: KvringConnectorMetadata, rid: str, st: _Req,
                   computed: int) -> None:
        """Save the prompt's full chunks computed by the end of this step
        (only full chunks: a partial last chunk is never stored)."""
        n = min(computed, len(st.tokens)) // self._chunk_tokens
        n = min(n, len(st.block_ids) // self._bpc)
        if n <= st.saved_chunks:
            return
        meta.saves.append(SaveSpec(
            req_id=rid, tokens=st.tokens[:n * self._chunk_tokens],
            salt=st.salt, block_ids=st.block_ids[:n * self._bpc], nchunks=n))
        st.saved_chunks = n

    def request_finished(self, request: "Request", block_ids: List[int]
                         ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        st = self._reqs.pop(request.request_id, None)
        if st is not None:
            self._release(st)
        return False, None

    def _release(self, st: _Req) -> None:
        lease, st.lease = st.lease, 0
        if lease and self._client is not None:
            try:
                self._client.release(lease)
            except kvring.KvringError:
                pass  # redeemed by a worker, expired, or the server gone

    # ==============================
    # Worker-side methods
    # ==============================

    def _worker_ctx(self) -> Optional[KvringContext]:
        if self._ctx is None:
            c = self._connect(tp_rank=self._tp_rank, pp_rank=self._pp_rank)
            if c is None:
                return None
            self._ctx = KvringContext(self.layout, client=c)
            self._ctx._own = True
        return self._ctx

    def _attn_backend(self, layer_names: Optional[List[str]]) -> Any:
        """vLLM's attention backend of these layers, or None when this
        vLLM cannot say (then the layout is read from the shape alone)."""
        try:
            from vllm.distributed.kv_transfer.kv_connector.utils import \
                get_current_attn_backend
            return get_current_attn_backend(self._vllm_config, layer_names)
        except Exception as e:  # older vLLM, or no layers in the context
            log.debug("kvring: no attention backend from vLLM (%s)", e)
            return None

    def register_kv_caches(self, kv_caches: Dict[str, torch.Tensor]) -> None:
        backend = self._attn_backend(list(kv_caches))
        self._kv = PagedKV.from_vllm(kv_caches, self.layout,
                                     kv_layout=self._kv_layout,
                                     backend=backend,
                                     block_size=self._block_size)
        self._layer_ids = {n: i for i, n in enumerate(kv_caches)}
        self._registered(backend)

    def register_cross_layers_kv_cache(self, kv_cache: torch.Tensor,
                                       attn_backend: Any) -> None:
        self._kv = PagedKV.from_vllm_cross_layer(
            kv_cache, self.layout, backend=attn_backend,
            block_size=self._block_size, kv_layout=self._kv_layout)
        self._registered(attn_backend)

    def _registered(self, backend: Any) -> None:
        kv = self._kv
        assert kv is not None
        # Layer by layer by default for a device cache (the copies overlap
        # the model's compute); whole requests by default on the CPU,
        # where libkvring's C gather and scatter copy every layer in one
        # pass.
        lw = self._cfg_layerwise
        self._layerwise = (not kv.on_cpu) if lw is None else bool(lw)
        if self._layerwise or not kv.on_cpu:
            self._staged = kv.staged()
        log.info("kvring: %s on %s of %d blocks read as %s (backend %s%s); "
                 "%s", kv.what, kv.device, kv.num_blocks, kv.describe(),
                 getattr(backend, "__name__", None),
                 ", kvring_kv_layout %s" % self._kv_layout
                 if self._kv_layout else "",
                 "layer by layer" if self._layerwise else "whole requests")
        self._worker_ctx()

    def start_load_kv(self, forward_context: "ForwardContext",
                      **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        assert isinstance(meta, KvringConnectorMetadata)
        self._end_step()  # anything an interrupted step left
        if not self._layerwise:
            for ld in meta.loads:
                if not self._load(ld):
                    self._load_errors.update(ld.block_ids[ld.skip_blocks:])
            return
        # Layer by layer: retrieve every load now and issue each layer's
        # copies (on a device they run on the copy stream while the
        # model computes; wait_for_layer_load waits for one layer's);
        # reserve every save's slots for save_kv_layer to fill.
        for ld in meta.loads:
            self._begin_load(ld)
        if self._inloads:
            for l in range(self.layout.layers):
                self._layer_ev[l] = self._issue_load_layer(l)
        for sv in meta.saves:
            self._begin_save(sv)

    # -- retrieving: shared by the whole-request and layer-wise paths --
    def _retrieve(self, ld: LoadSpec) -> Optional["_InLoad"]:
        """Pin ld's chunks in this worker (redeeming the scheduler's lease
        where it holds this rank's chunks). None: nothing to load (the
        failure is logged); then vLLM recomputes."""
        ctx, kv = self._worker_ctx(), self._kv
        if ctx is None or kv is None:
            return None
        # The scheduler's lease holds rank (tp 0, pp 0)'s chunks only.
        use_lease = bool(ld.lease) and self._tp_rank == 0 and \
            self._pp_rank == 0
        il = _InLoad(ld, None, use_lease)
        try:
            if use_lease:
                views = ctx.prepare_retrieve(None, il.iid, lease=ld.lease)
            else:
                views = ctx.prepare_retrieve(ld.tokens, il.iid, salt=ld.salt)
        except (kvring.KvringError, ValueError) as e:
            log.warning("kvring load of %s failed: %s", ld.req_id, e)
            return None
        if views is None:
            log.warning("kvring load of %s failed: the cache is "
                        "unavailable; vLLM recomputes", ld.req_id)
            return None
        il.views = views
        if len(views) < ld.nchunks:
            log.warning("kvring load of %s: %d of %d chunks left (evicted"
                        "?); vLLM recomputes", ld.req_id, len(views),
                        ld.nchunks)
            self._unpin(il)
            return None
        self._register_pool(views)
        return il

    def _unpin(self, il: "_InLoad") -> None:
        ctx = self._ctx
        il.views = None
        if ctx is None:
            return
        if il.use_lease:
            ctx.commit_retrieve(None, il.iid, lease=il.ld.lease)
        else:
            ctx.commit_retrieve(il.ld.tokens, il.iid, salt=il.ld.salt)

    def _load(self, ld: LoadSpec) -> bool:
        """The whole request at once (libkvring's C scatter on the CPU,
        the staged torch path on a device)."""
        il = self._retrieve(ld)
        if il is None:
            return False
        kv = self._kv
        assert kv is not None and il.views is not None
        ok = False
        try:
            # checksum='on': the scatter checks each chunk while it copies
            # it into the blocks ('verify' checked on arrival; a device
            # load checks first). A chunk that fails ends the copy and
            # cuts the views; the load then falls short and vLLM
            # recomputes every block of it, the failed chunk's included,
            # as for an evicted chunk.
            got = kv.scatter(ld.block_ids, il.views[:ld.nchunks],
                             skip_blocks=ld.skip_blocks)
            ok = got >= ld.nchunks
            if not ok:
                log.warning("kvring load of %s: chunk %d of %d fails its "
                            "checksum; vLLM recomputes", ld.req_id, got,
                            ld.nchunks)
        except Exception as e:
            log.warning("kvring load of %s failed: %s", ld.req_id, e)
        finally:
            self._unpin(il)
        return ok

    # -- layer by layer --
    def _begin_load(self, ld: LoadSpec) -> None:
        il = self._retrieve(ld)
        if il is None:
            self._load_errors.update(ld.block_ids[ld.skip_blocks:])
            return
        try:
            # Checked once, before any layer's copy (checksum 'on').
            il.good = checked_prefix(il.views[:ld.nchunks])
        except Exception as e:
            log.warning("kvring load of %s failed: %s", ld.req_id, e)
            il.good = 0
        if il.good < ld.nchunks:
            log.warning("kvring load of %s: chunk %d of %d fails its "
                        "checksum; vLLM recomputes", ld.req_id, il.good,
                        ld.nchunks)
            self._load_errors.update(ld.block_ids[ld.skip_blocks:])
            self._unpin(il)
            return
        self._inloads.append(il)

    def _issue_load_layer(self, l: int) -> Any:
        """Issue layer l's copies of every load of the step; a load whose
        copy fails is dropped (its blocks reported, nothing more of it
        copied). Returns the layer's event."""
        st = self._staged
        assert st is not None
        ev = None
        for il in self._inloads:
            if il.failed:
                continue
            ld = il.ld
            try:
                _, ev = st.scatter(ld.block_ids, il.views[:ld.nchunks],
                                   ld.skip_blocks, [l], good=il.good)
            except Exception as e:
                log.warning("kvring load of %s failed at layer %d: %s; vLLM "
                            "recomputes", ld.req_id, l, e)
                il.failed = True
                self._load_errors.update(ld.block_ids[ld.skip_blocks:])
        return ev

    def _begin_save(self, sv: SaveSpec) -> None:
        ctx = self._worker_ctx()
        if ctx is None or self._kv is None:
            return
        ins = _InSave(sv, ctx.prepare_store(sv.tokens, ("save", sv.req_id),
                                            salt=sv.salt))
        if ins.views is None:
            log.warning("kvring save of %s skipped: the server is gone, or "
                        "no chunk found room (the pool is full of pinned "
                        "or reserved chunks)", sv.req_id)
            return
        if not ins.views:  # []: all stored already
            return
        for i in ins.views.indices:
            ins.ids.extend(sv.block_ids[i * self._bpc:(i + 1) * self._bpc])
        self._register_pool(ins.views)
        self._insaves.append(ins)

    def _layer(self, layer_name: str) -> int:
        """A layer's index: its place in register_kv_caches()'s dict, or
        (a cross-layer cache) the order the layers are first seen in."""
        i = self._layer_ids.get(layer_name)
        if i is None:
            i = self._layer_ids[layer_name] = len(self._layer_ids)
        return i

    def wait_for_layer_load(self, layer_name: str) -> None:
        if not self._layerwise or not self._inloads:
            return  # loaded in start_load_kv
        st = self._staged
        assert st is not None
        st.stream.compute_waits(self._layer_ev.get(self._layer(layer_name)))

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor,
                      attn_metadata: "AttentionMetadata",
                      **kwargs: Any) -> None:
        if not self._layerwise or not self._insaves:
            return  # whole requests are saved in wait_for_save
        st = self._staged
        assert st is not None
        l = self._layer(layer_name)
        for ins in self._insaves:
            if ins.failed:
                continue
            try:
                ins.ev = st.gather(ins.ids, ins.views, [l])
                ins.layers.add(l)
            except Exception as e:
                log.warning("kvring save of %s failed at layer %d, nothing "
                            "published: %s", ins.sv.req_id, l, e)
                ins.failed = True

    def wait_for_save(self) -> None:
        meta = self._get_connector_metadata()
        assert isinstance(meta, KvringConnectorMetadata)
        if self._layerwise:
            self._end_step()
            return
        for sv in meta.saves:
            self._save(sv)

    def _end_step(self) -> None:
        """Layer by layer: wait for the step's copies; commit each store
        whose every layer landed and abort the others (nothing
        half-written is published); unpin the loads."""
        st = self._staged
        insaves, self._insaves = self._insaves, []
        inloads, self._inloads = self._inloads, []
        layer_ev, self._layer_ev = self._layer_ev, {}
        ctx = self._ctx
        for ins in insaves:
            sv, iid = ins.sv, ("save", ins.sv.req_id)
            try:
                if st is not None:
                    st.stream.host_waits(ins.ev)
            except Exception as e:
                log.warning("kvring save of %s: a copy failed: %s",
                            sv.req_id, e)
                ins.failed = True
            if ctx is None:
                continue
            if ins.failed or len(ins.layers) != self.layout.layers:
                if not ins.failed:
                    log.warning("kvring save of %s: %d of %d layers saved "
                                "in the step; nothing published",
                                sv.req_id, len(ins.layers),
                                self.layout.layers)
                ctx.abort_store(sv.tokens, iid, ins.views, sv.salt)
            elif not ctx.commit_store(sv.tokens, iid, ins.views, sv.salt):
                log.warning("kvring save of %s was not published", sv.req_id)
        for ev in layer_ev.values():
            try:
                if st is not None:
                    st.stream.host_waits(ev)
            except Exception as e:
                log.warning("kvring load: a copy failed: %s", e)
                for il in inloads:
                    il.failed = True
                    self._load_errors.update(
                        il.ld.block_ids[il.ld.skip_blocks:])
        for il in inloads:
            self._unpin(il)

    def _save(self, sv: SaveSpec) -> None:
        ctx, kv = self._worker_ctx(), self._kv
        if ctx is None or kv is None:
            return
        iid = ("save", sv.req_id)
        views = ctx.prepare_store(sv.tokens, iid, salt=sv.salt)
        if views is None:
            log.warning("kvring save of %s skipped: the server is gone, or "
                        "no chunk found room (the pool is full of pinned "
                        "or reserved chunks)", sv.req_id)
            return
        if not views:  # []: all stored already
            return
        self._register_pool(views)
        try:
            ids: List[int] = []
            for i in views.indices:
                ids.extend(sv.block_ids[i * self._bpc:(i + 1) * self._bpc])
            kv.gather(ids, views)
        except Exception as e:
            log.warning("kvring save of %s failed, nothing published: %s",
                        sv.req_id, e)
            ctx.abort_store(sv.tokens, iid, views, sv.salt)
            return
        if not ctx.commit_store(sv.tokens, iid, views, sv.salt):
            log.warning("kvring save of %s was not published", sv.req_id)

    def _register_pool(self, views: Any) -> None:
        """For a cache on a device: register the pool mapping for DMA,
        once per process (kvring.device.register_pool: libkvring maps the
        pool once per process, and every connector of the process shares
        the registration), its base found from the first transfer's
        slots."""
        kv, ctx = self._kv, self._ctx
        if self._reg is not None or kv is None or kv.on_cpu or \
                ctx is None or ctx.client is None or \
                ctx.client.transport == "copy":
            return
        t = views._transfer() if getattr(views, "_transfer", None) else None
        if t is None:
            return
        c = ctx.client
        lib = kvring._lib_handle()
        h = c._handle()

        def wait_prefault() -> None:
            lib.kvr_prefault_status(ctypes.c_void_p(h), True, None)
        self._reg = register_pool(kv.device, slot_base(t.tx), c.pool_bytes,
                                  wait_prefault)

    def get_block_ids_with_load_errors(self) -> Set[int]:
        errs, self._load_errors = self._load_errors, set()
        return errs

    def get_finished(self, finished_req_ids: Set[str]
                     ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        return None, None

    def shutdown(self) -> None:
        try:
            self._end_step()
        except Exception as e:  # the server gone: nothing was published
            log.debug("kvring: end of the last step at shutdown: %s", e)
        if self._reg is not None:
            self._reg.close()
            self._reg = None
        if self._ctx is not None:
            self._ctx.close()
            self._ctx = None
        if self._client is not None:
            self._client.close()
            self._client = None
