# SPDX-License-Identifier: MIT
"""kvring.kv: paged-KV gather and scatter between an engine's paged KV
cache (torch tensors) and chunk slots, done by libkvring in C
(<kvring/kv.h>) with no intermediate tensor.

    kv = PagedKV.merged(kv_caches, layout)        # vLLM [2, NB, BS, H, D]
    kv.gather(block_ids, views)                   # blocks -> chunk slots
    kv.scatter(block_ids, views, skip_blocks=n)   # chunk slots -> blocks

Layouts: vLLM "merged" [2, num_blocks, block_size, kv_heads, head_size]
per layer; separate K and V [num_blocks, block_size, kv_heads, head_size];
cross-layer (one tensor, layers first); MLA [num_blocks, block_size, dim];
NHD or HND inside a block. Only strides are used, so a tensor whose
strides are permuted (vLLM allocates a backend's stride order and hands
out the logical shape) works as it is.

from_vllm() reads the layout from the tensor: its shape (and the
attention backend's get_kv_cache_shape() and get_kv_cache_stride_order()
when the caller has the backend) against the layout's heads and head size
and the engine's block size. It takes vLLM's FlashAttention-style
[2, blocks, tokens, heads, dim], the CPU backend's [2, blocks, heads,
tokens, dim], FlashInfer's [blocks, 2, tokens, heads, dim], MLA, and
from_vllm_cross_layer() the one tensor of a cross-layer cache in its
physical order. A tensor that fits two of them (16 heads and 16-token
blocks, with nothing else to tell them apart) is refused with a sentence
saying what settles it (kv_layout, or the backend); nothing is guessed.
block_ids are in token order, len(block_ids) = chunks * chunk_tokens /
block_size. Bad arguments raise ValueError and copy nothing: a block id out
of range, a tensor that does not match the layout, a misaligned or
non-contiguous tensor, a chunk of the wrong size.
"""

from __future__ import annotations

import ctypes
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from kvring import _lib as _kvr_lib

torch = _kvr_lib.need_torch("kvring.kv")

import kvring

from . import _lib
from .torch import ChunkLayout, ChunkViews

__all__ = ["PagedKV"]

_BLOCK_DIMS = {"NHD": ("blocks", "tokens", "heads", "dim"),
               "HND": ("blocks", "heads", "tokens", "dim")}

# The per-layer cache shapes vLLM's attention backends hand out, by what
# each dimension holds: FlashAttention and most CUDA backends; the CPU
# backend (HND); FlashInfer (blocks first); and blocks first with HND.
_VLLM_SHAPES = (("kv", "blocks", "tokens", "heads", "dim"),
                ("kv", "blocks", "heads", "tokens", "dim"),
                ("blocks", "kv", "tokens", "heads", "dim"),
                ("blocks", "kv", "heads", "tokens", "dim"))
_MLA_SHAPE = ("blocks", "tokens", "dim")
# A number of blocks no real cache has: the dimension of the backend's
# shape that equals it is the blocks dimension (vLLM finds it this way).
_PROBE_BLOCKS = 1234567


def _tensor_words(t: torch.Tensor) -> str:
    return "shape %s, strides %s, dtype %s" % (tuple(t.shape),
                                               tuple(t.stride()), t.dtype)


def _needed(layout: ChunkLayout) -> set:
    return {"blocks", "tokens", "dim"} | (set() if layout.mla
                                          else {"kv", "heads"})


def backend_labels(backend: Any, layout: ChunkLayout, block_size: int,
                   layers: bool = False) -> Optional[Tuple[str, ...]]:
    """What each dimension of an attention backend's cache holds, asked
    of the backend itself: get_kv_cache_shape() once with a number of
    blocks no cache has (that dimension is the blocks), then with the
    block size, the head count and the head size changed one at a time
    (the dimension that changes is that one); a size the backend would
    not take a probe for is matched by value when only one dimension
    has it. layers=True: the physical order of the backend's cross-layer
    tensor, a layers dimension added and get_kv_cache_stride_order(
    include_num_layers_dimension=True) applied. None when the backend
    cannot say (then the caller goes by the tensor's shape alone)."""
    heads, d, bs = layout.kv_heads, layout.head_size, block_size
    try:
        base = tuple(int(x) for x in backend.get_kv_cache_shape(
            _PROBE_BLOCKS, bs, heads, d))
    except Exception:
        return None
    if base.count(_PROBE_BLOCKS) != 1:
        return None
    labels: List[Optional[str]] = [None] * len(base)
    labels[base.index(_PROBE_BLOCKS)] = "blocks"
    for name, args in (("tokens", (_PROBE_BLOCKS, 2 * bs, heads, d)),
                       ("heads", (_PROBE_BLOCKS, bs, heads + 1, d)),
                       ("dim", (_PROBE_BLOCKS, bs, heads, 2 * d))):
        try:
            probe = tuple(int(x) for x in backend.get_kv_cache_shape(*args))
        except Exception:
            continue  # an assert on sizes it does not take
        diff = [i for i in range(len(base))
                if len(probe) == len(base) and probe[i] != base[i]]
        if len(diff) == 1 and labels[diff[0]] is None:
            labels[diff[0]] = name
    for name, v in (("tokens", bs), ("heads", heads), ("dim", d),
                    ("kv", 2)):
        if name in labels or name not in _needed(layout):
            continue
        free = [i for i, l in enumerate(labels) if l is None and base[i] == v]
        if len(free) == 1:
            labels[free[0]] = name
    if None in labels or set(labels) != _needed(layout):
        return None
    out = tuple(str(l) for l in labels)
    if not layers:
        return out
    out = ("layers",) + out
    try:
        order = tuple(backend.get_kv_cache_stride_order(
            include_num_layers_dimension=True))
    except (AttributeError, NotImplementedError):
        order = tuple(range(len(out)))
    if sorted(order) != list(range(len(out))):
        return None
    return tuple(out[i] for i in order)


def _fits(t: torch.Tensor, labels: Sequence[str], layout: ChunkLayout,
          block_size: Optional[int]) -> bool:
    sizes = {"kv": 2, "heads": layout.kv_heads, "dim": layout.head_size,
             "tokens": block_size, "layers": layout.layers}
    return len(labels) == t.dim() and all(
        sizes.get(l) in (None, n) for l, n in zip(labels, t.shape))


def _resolve(t: torch.Tensor, layout: ChunkLayout, kv_layout: Optional[str],
             backend: Any, block_size: Optional[int], what: str,
             cross: bool = False) -> Tuple[str, ...]:
    """The labels of t's dimensions (see from_vllm), or ValueError."""
    shapes: Sequence[Tuple[str, ...]] = \
        (_MLA_SHAPE,) if layout.mla else _VLLM_SHAPES
    if cross:
        shapes = [("layers",) + s for s in shapes]
    if kv_layout is not None:
        _dims(kv_layout)
        first, second = (("tokens", "heads") if kv_layout == "NHD"
                         else ("heads", "tokens"))
        shapes = [s for s in shapes if "heads" not in s or
                  s.index(first) < s.index(second)]
    elif backend is not None:
        if block_size is None:
            raise ValueError("%s: pass block_size with backend (the "
                             "engine's tokens per block)" % what)
        labels = backend_labels(backend, layout, block_size, layers=cross)
        name = _backend_name(backend)
        if labels is not None:
            if not _fits(t, labels, layout, block_size):
                raise ValueError(
                    "%s: %s is not the cache attention backend %s makes "
                    "for %d layers, %d kv heads of %d and %d-token blocks "
                    "(its dimensions: %s): the cache does not match the "
                    "model's namespace, or vLLM split the blocks into "
                    "smaller kernel blocks (not supported)"
                    % (what, _tensor_words(t), name, layout.layers,
                       layout.kv_heads, layout.head_size, block_size,
                       ", ".join(labels)))
            return labels
    cands = [s for s in shapes if _fits(t, s, layout, block_size)]
    if len(cands) == 1:
        return cands[0]
    bs = "%d-token" % block_size if block_size is not None else "any-size"
    if not cands:
        raise ValueError(
            "%s: %s is none of the layouts kvring reads for %d kv heads of "
            "%d and %s blocks%s: %s; or pass the attention backend so "
            "kvring can ask it" % (
                what, _tensor_words(t), layout.kv_heads, layout.head_size,
                bs, "" if kv_layout is None else
                " with kv_layout %r" % kv_layout,
                "; ".join("[%s]" % ", ".join(c) for c in shapes)))
    raise ValueError(
        "%s: %s can be read two ways, as [%s] or as [%s], and nothing "
        "settles which (reading it the wrong way stores each head's values "
        "under the wrong token): set kv_layout to 'NHD' (tokens before "
        "heads, as FlashAttention and FlashInfer) or 'HND' (heads before "
        "tokens, as vLLM's CPU backend) (the vLLM connector: "
        "kv_connector_extra_config.kvring_kv_layout), or pass the "
        "attention backend, which says it" % (
            what, _tensor_words(t), ", ".join(cands[0]),
            ", ".join(cands[1])))


def _backend_name(backend: Any) -> str:
    try:
        return str(backend.get_name())
    except Exception:
        return getattr(backend, "__name__", repr(backend))


def _split(ts: Sequence[torch.Tensor], labels: Sequence[str],
           layout: ChunkLayout) -> Tuple[List[torch.Tensor], Tuple[str, ...]]:
    """Views [l * nkv + k] of the per-layer tensors ts (or of the one
    cross-layer tensor, whose labels include "layers"), and the labels
    of what is left of their dimensions."""
    views = []
    nl = layout.layers if "layers" in labels else 1
    nk = layout.nkv if "kv" in labels else 1
    for t in ts:
        for l in range(nl):
            for k in range(nk):
                fixed = {"layers": l, "kv": k}
                v = t
                for i in sorted((i for i, x in enumerate(labels)
                                 if x in fixed), reverse=True):
                    v = v.select(i, fixed[labels[i]])
                views.append(v)
    return views, tuple(x for x in labels if x not in ("layers", "kv"))


def _dense(t: torch.Tensor) -> bool:
    """True if t covers its memory without gaps or overlap, in some order
    of its dimensions (vLLM's HND caches are permuted views)."""
    dims = [d for d in range(t.dim()) if t.size(d) != 1]
    dims.sort(key=lambda d: t.stride(d), reverse=True)
    expect = 1
    for d in reversed(dims):
        if t.stride(d) != expect:
            return False
        expect *= t.size(d)
    return True


class PagedKV(object):
    """One rank's paged KV cache, described once for gather/scatter. Holds
    references to the tensors (the engine owns them)."""

    def __init__(self, layout: ChunkLayout, views: Sequence[torch.Tensor],
                 owners: Sequence[torch.Tensor], dims: Tuple[str, ...],
                 what: str) -> None:
        """views: layers * nkv tensors, [l * nkv + k], each with the named
        dims (blocks, tokens, heads, dim in some order; MLA: no heads).
        owners: the tensors the caller passed (checked for density)."""
        self.layout = layout
        self.what = what
        self.dims = tuple(dims)
        self._owners = list(owners)
        lt = layout
        if len(views) != lt.layers * lt.nkv:
            raise ValueError("%s: %d tensors for %d layers x %d, the layout "
                             "needs %d: the cache does not match the "
                             "namespace" % (what, len(views), lt.layers,
                                            lt.nkv, lt.layers * lt.nkv))
        devices = sorted({str(o.device) for o in self._owners})
        if len(devices) != 1:
            raise ValueError("%s: the tensors are on %s: every layer must "
                             "be on one device" % (what, ", ".join(devices)))
        # The CPU: libkvring's C gather and scatter. Any other device:
        # StagedCopies (torch ops on the device, one transfer per chunk).
        self.device = self._owners[0].device
        for o in self._owners:
            if o.element_size() != lt.elem_bytes or (
                    lt.elem_bytes != 1 and o.dtype != lt.torch_dtype):
                raise ValueError("%s: dtype %s, the layout is %s: the cache "
                                 "does not match the namespace"
                                 % (what, o.dtype, lt.dtype))
            if not _dense(o):
                raise ValueError("%s: the tensor is not contiguous (strides "
                                 "%s for shape %s): pass the engine's whole "
                                 "cache tensor, not a strided slice"
                                 % (what, tuple(o.stride()),
                                    tuple(o.shape)))
        v0 = views[0]
        size = dict(zip(dims, v0.shape))
        stride = dict(zip(dims, v0.stride()))
        for v in views:
            if tuple(v.shape) != tuple(v0.shape) or \
                    tuple(v.stride()) != tuple(v0.stride()):
                raise ValueError("%s: layers differ in shape or strides "
                                 "(%s vs %s): every layer must be alike"
                                 % (what, tuple(v.shape), tuple(v0.shape)))
        heads = size.get("heads", 1)
        if heads != lt.kv_heads or size["dim"] != lt.head_size:
            raise ValueError("%s: %d heads of %d, the layout has %d heads of "
                             "%d: the cache does not match the namespace, "
                             "or kv_layout %r is not the order of the "
                             "tensor's dimensions (shape %s)"
                             % (what, heads, size["dim"], lt.kv_heads,
                                lt.head_size, _layout_name(dims),
                                tuple(owners[0].shape)))
        if stride["dim"] != 1:
            raise ValueError("%s: the head dimension has stride %d: it must "
                             "be contiguous" % (what, stride["dim"]))
        bs = size["tokens"]
        if lt.chunk_tokens % bs:
            raise ValueError("%s: block_size %d does not divide "
                             "chunk_tokens %d: choose a chunk size that is "
                             "a multiple of the block size"
                             % (what, bs, lt.chunk_tokens))
        e = lt.elem_bytes
        for v in views:
            if v.data_ptr() % e:
                raise ValueError("%s: the tensor's data is not aligned to "
                                 "its %d-byte elements" % (what, e))
        self.block_size = bs
        self.num_blocks = size["blocks"]
        self.blocks_per_chunk = lt.chunk_tokens // bs
        nb = self.num_blocks
        self._base = (ctypes.c_void_p * len(views))(
            *[v.data_ptr() for v in views])
        reach = ((nb - 1) * stride["blocks"] + (bs - 1) * stride["tokens"]
                 + (heads - 1) * stride.get("heads", 0) + size["dim"])
        self._d = _lib.KvCache(
            layers=lt.layers, nkv=lt.nkv, heads=heads,
            head_bytes=size["dim"] * e, elem_bytes=e, block_size=bs,
            num_blocks=nb, chunk_tokens=lt.chunk_tokens,
            block_stride=stride["blocks"] * e,
            token_stride=stride["tokens"] * e,
            head_stride=stride.get("heads", size["dim"]) * e,
            layer_bytes=reach * e,
            base=ctypes.cast(self._base, ctypes.POINTER(ctypes.c_void_p)))
        self._lib = _lib_handle()
        err = ctypes.create_string_buffer(256)
        # The check reads the descriptor, never the memory: it holds for
        # a device cache too.
        if self._lib.kvr_kv_check(ctypes.byref(self._d), err, len(err)) < 0:
            raise ValueError("%s: %s" % (what, err.value.decode()))
        # The same views in (blocks, tokens, heads, dim) order (MLA:
        # (blocks, tokens, dim)), as raw bytes for 1-byte dtypes, for the
        # torch path.
        order = [dims.index(d) for d in ("blocks", "tokens", "heads", "dim")
                 if d in dims]
        self._bviews = [v.permute(*order) for v in views]
        if e == 1:
            self._bviews = [v.view(torch.uint8) for v in self._bviews]
        self._staged: Optional["StagedCopies"] = None

    @property
    def on_cpu(self) -> bool:
        return self.device.type == "cpu"

    def staged(self) -> "StagedCopies":
        """The torch path over this cache (made once, reused: it owns the
        staging tensors and the copy stream)."""
        if self._staged is None:
            from .device import CopyStream
            self._staged = StagedCopies(self, CopyStream(self.device))
        return self._staged

    # -- constructors, one per engine layout --
    @classmethod
    def merged(cls, kv_caches: Union[Sequence[torch.Tensor],
                                     Mapping[str, torch.Tensor]],
               layout: ChunkLayout, kv_layout: str = "NHD") -> "PagedKV":
        """vLLM's per-layer [2, num_blocks, block_size, heads, head_size]
        (kv_layout 'NHD') or [2, num_blocks, heads, block_size, head_size]
        ('HND'), in layer order."""
        ts = _layers(kv_caches)
        dims = _dims(kv_layout)
        for t in ts:
            _ndim(t, 5, "merged cache [2, blocks, ...]")
            if t.shape[0] != 2:
                raise ValueError("merged cache: the first dimension is %d, "
                                 "not 2 (K, V)" % t.shape[0])
        return cls(layout, [t[k] for t in ts for k in (0, 1)], ts, dims,
                   "merged cache")

    @classmethod
    def separate(cls, k_caches: Sequence[torch.Tensor],
                 v_caches: Sequence[torch.Tensor], layout: ChunkLayout,
                 kv_layout: str = "NHD") -> "PagedKV":
        """Separate K and V tensors per layer, each [num_blocks,
        block_size, heads, head_size] (or HND)."""
        ks, vs = _layers(k_caches), _layers(v_caches)
        if len(ks) != len(vs):
            raise ValueError("%d K tensors and %d V tensors" % (len(ks),
                                                                 len(vs)))
        for t in ks + vs:
            _ndim(t, 4, "separate cache [blocks, ...]")
        return cls(layout, [x for kv in zip(ks, vs) for x in kv], ks + vs,
                   _dims(kv_layout), "separate cache")

    @classmethod
    def cross_layer(cls, t: torch.Tensor, layout: ChunkLayout,
                    kv_layout: str = "NHD") -> "PagedKV":
        """One tensor for all layers, layers first: [layers, 2, num_blocks,
        block_size, heads, head_size] (or HND), or for MLA [layers,
        num_blocks, block_size, dim]."""
        if layout.mla:
            _ndim(t, 4, "cross-layer MLA cache [layers, blocks, tokens, dim]")
            return cls(layout, [t[l] for l in range(t.shape[0])], [t],
                       ("blocks", "tokens", "dim"), "cross-layer MLA cache")
        _ndim(t, 6, "cross-layer cache [layers, 2, blocks, ...]")
        if t.shape[1] != 2:
            raise ValueError("cross-layer cache: dimension 1 is %d, not 2 "
                             "(K, V)" % t.shape[1])
        return cls(layout, [t[l, k] for l in range(t.shape[0])
                            for k in (0, 1)], [t], _dims(kv_layout),
                   "cross-layer cache")

    @classmethod
    def mla(cls, caches: Union[Sequence[torch.Tensor],
                               Mapping[str, torch.Tensor]],
            layout: ChunkLayout) -> "PagedKV":
        """MLA: per layer [num_blocks, block_size, dim]."""
        if not layout.mla:
            raise ValueError("an MLA cache needs an MLA layout (mla=True)")
        ts = _layers(caches)
        for t in ts:
            _ndim(t, 3, "MLA cache [blocks, tokens, dim]")
        return cls(layout, ts, ts, ("blocks", "tokens", "dim"), "MLA cache")

    @classmethod
    def from_vllm(cls, kv_caches: Union[Sequence[torch.Tensor],
                                        Mapping[str, torch.Tensor]],
                  layout: ChunkLayout, kv_layout: Optional[str] = None,
                  backend: Any = None, block_size: Optional[int] = None
                  ) -> "PagedKV":
        """What vLLM's register_kv_caches() passes, one tensor per layer
        in the dict's (layer) order, with the layout read from the
        tensors (module docstring): backend (vLLM's attention backend
        class, when known) and block_size (vLLM's cache block size) say
        what each dimension is; kv_layout ('NHD' or 'HND') overrides
        that, naming the order of the tensor's token and head
        dimensions. Refused with ValueError when the tensor fits no
        layout, or two."""
        ts = _layers(kv_caches)
        if not ts:
            raise ValueError("register_kv_caches: no tensors")
        for t in ts:
            _ndim(t, 3 if layout.mla else 5, "vLLM %s cache" % (
                "MLA" if layout.mla else "paged"))
        what = "vLLM cache"
        labels = _resolve(ts[0], layout, None if layout.mla else kv_layout,
                          backend, block_size, what)
        views, dims = _split(ts, labels, layout)
        return cls(layout, views, ts, dims, what)

    @classmethod
    def from_vllm_cross_layer(cls, t: torch.Tensor, layout: ChunkLayout,
                              backend: Any = None,
                              block_size: Optional[int] = None,
                              kv_layout: Optional[str] = None) -> "PagedKV":
        """What vLLM's register_cross_layers_kv_cache() passes: one
        tensor for all layers in the backend's physical order (for
        FlashAttention [blocks, layers, 2, tokens, heads, dim]); the
        backend's shape and stride order say what each dimension is.
        Without a backend the tensor must be layers first and is read as
        from_vllm() reads one layer."""
        _ndim(t, 4 if layout.mla else 6, "vLLM cross-layer cache")
        what = "vLLM cross-layer cache"
        labels = _resolve(t, layout, None if layout.mla else kv_layout,
                          backend, block_size, what, cross=True)
        views, dims = _split([t], labels, layout)
        return cls(layout, views, [t], dims, what)

    def describe(self) -> str:
        """The cache as kvring reads it: the first tensor's shape and
        strides, and what each dimension of a layer's view holds."""
        o = self._owners[0]
        return "shape %s, strides %s, %s [%s] per layer" % (
            tuple(o.shape), tuple(o.stride()), o.dtype,
            ", ".join(self.dims))

    # -- the copies --
    @property
    def chunk_bytes(self) -> int:
        return self.layout.chunk_bytes

    def _block_ids(self, block_ids: Any, nchunks: int) -> List[int]:
        """block_ids (a sequence or a tensor) as a list of ints, each a
        block of this cache, blocks_per_chunk of them for each of the
        nchunks chunks; ValueError naming the first that is not."""
        if isinstance(block_ids, torch.Tensor):
            block_ids = block_ids.tolist()
        ids = list(block_ids)
        for i, b in enumerate(ids):
            if isinstance(b, bool) or not isinstance(b, int) or \
                    not 0 <= b < self.num_blocks:
                raise ValueError("block id %r (position %d) is out of range: "
                                 "the cache has %d blocks"
                                 % (b, i, self.num_blocks))
        if len(ids) != nchunks * self.blocks_per_chunk:
            raise ValueError("%d block ids for %d chunks: each chunk of %d "
                             "tokens needs %d blocks of %d"
                             % (len(ids), nchunks,
                                self.layout.chunk_tokens,
                                self.blocks_per_chunk, self.block_size))
        return ids

    def _args(self, block_ids: Any, chunks: Sequence[torch.Tensor]
              ) -> Tuple[Any, int, Any, int]:
        ids = self._block_ids(block_ids, len(chunks))
        ptrs = []
        for i, c in enumerate(chunks):
            if not isinstance(c, torch.Tensor):
                raise ValueError("chunk %d is a %s, not a tensor"
                                 % (i, type(c).__name__))
            nbytes = c.numel() * c.element_size()
            if not c.is_contiguous() or nbytes != self.chunk_bytes \
                    or c.device.type != "cpu":
                raise ValueError("chunk %d: %d bytes%s on %s, the layout's "
                                 "chunk is %d contiguous bytes"
                                 % (i, nbytes, "" if c.is_contiguous()
                                    else " (not contiguous)", c.device,
                                    self.chunk_bytes))
            ptrs.append(c.data_ptr())
        arr = (ctypes.c_uint32 * max(len(ids), 1))(*ids)
        cp = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
        return arr, len(ids), cp, len(ptrs)

    def gather(self, block_ids: Any, chunks: Sequence[torch.Tensor]) -> None:
        """Copy the blocks (token order) into the chunks (slot views of a
        store: ChunkViews or any contiguous chunk-sized tensors).

        Into a prepared store's ChunkViews, the copy goes straight to the
        transfer's slots (kvr_kv_gather_xfer): with checksums on, each
        chunk's XXH3-64 is computed from the blocks while they are copied
        and commit_store sends it without reading the slots again. Do not
        write the views afterwards (their sums would be stale)."""
        t = _bound(chunks, readonly=False)
        if not self.on_cpu:
            st = self.staged()
            st.stream.host_waits(st.gather(block_ids, chunks))
            return
        arr, n, cp, nc = self._args(block_ids, chunks)
        err = ctypes.create_string_buffer(256)
        if t is not None:
            slots = (ctypes.c_uint32 * max(nc, 1))(*chunks.indices)
            rc = self._lib.kvr_kv_gather_xfer(
                t.tx._c._handle(), ctypes.byref(self._d), arr, n,
                ctypes.byref(t.tx._x), slots, nc, err, len(err))
        else:
            rc = self._lib.kvr_kv_gather(ctypes.byref(self._d), arr, n, cp,
                                         nc, self.chunk_bytes, err, len(err))
        if rc < 0:
            raise ValueError(err.value.decode())

    def scatter(self, block_ids: Any, chunks: Sequence[torch.Tensor],
                skip_blocks: int = 0) -> int:
        """Copy the chunks into the blocks; the first skip_blocks blocks
        (the engine's own prefix-cache hits) are left alone. Returns how
        many chunks were copied and are good (len(chunks): all).

        From a prepared retrieve's ChunkViews, the copy reads the
        transfer's slots (kvr_kv_scatter_xfer): under checksum='on' each
        chunk is checked while it is copied, hashing the bytes as they
        land in the blocks, and the copy stops after the first chunk that
        fails. Then the return value r is less than len(chunks): the
        blocks of chunks r.. must be treated as not loaded (chunk r's hold
        its failed bytes; vLLM: report them as load errors), the views are
        cut in place at the failed chunk as verify_retrieve() cuts them,
        and commit_retrieve reports it so that kvringd drops it."""
        t = _bound(chunks, readonly=True)
        if not self.on_cpu:
            st = self.staged()
            good, ev = st.scatter(block_ids, chunks, skip_blocks)
            st.stream.host_waits(ev)
            return good
        arr, n, cp, nc = self._args(block_ids, chunks)
        if not isinstance(skip_blocks, int) or not 0 <= skip_blocks <= n:
            raise ValueError("skip_blocks is %r: it must be 0..%d"
                             % (skip_blocks, n))
        err = ctypes.create_string_buffer(256)
        if t is None:
            rc = self._lib.kvr_kv_scatter(ctypes.byref(self._d), arr, n, cp,
                                          nc, self.chunk_bytes, skip_blocks,
                                          err, len(err))
            if rc < 0:
                raise ValueError(err.value.decode())
            return nc
        slots = (ctypes.c_uint32 * max(nc, 1))(*chunks.indices)
        rc = self._lib.kvr_kv_scatter_xfer(
            t.tx._c._handle(), ctypes.byref(self._d), arr, n,
            ctypes.byref(t.tx._x), slots, nc, skip_blocks, err, len(err))
        if rc < 0:
            raise ValueError(err.value.decode())
        if rc < nc:
            t.tx.slots[chunks.indices[rc]] = (kvring.SlotStatus.CORRUPT,
                                              None)
            t._cut()
        return rc


class StagedCopies(object):
    """Chunks between a paged cache and chunk slots through torch, for a
    cache on a device (and, layer by layer, on any device, the CPU
    included, which is how CI runs this path).

    A store gathers each chunk's blocks on the cache's device into a
    contiguous staging tensor (index_select per layer and K/V) and copies
    it into its slot view in one transfer; layer by layer, a layer's K
    and V parts go in two. A load copies the slot into staging, then
    index_copy_ puts the blocks in place on the device, leaving the
    first skip_blocks blocks (the engine's own prefix-cache hits) alone.
    Staging tensors are reused: one per chunk in flight, allocated when
    first needed. The copies run on a kvring.device.CopyStream; every
    call returns the event that completes with its copies, and the
    caller waits for it before a commit publishes or unpins the slots.

    Checksums: a store's slots are summed by the commit (the bytes are
    read once more, in host memory). A load under checksum 'on' checks
    the chunks first (verify_retrieve: a second pass over host memory,
    before anything reaches the device) and loads only the good prefix;
    under 'verify' they were checked on arrival."""

    def __init__(self, kv: PagedKV, stream: Any) -> None:
        self.kv = kv
        self.stream = stream
        self._stage: List[torch.Tensor] = []
        lt = kv.layout
        self._sdtype = torch.uint8 if lt.elem_bytes == 1 else lt.torch_dtype
        # One block of one (layer, K/V) in staging: (tokens, heads, dim),
        # or (tokens, dim) for MLA.
        self._block_shape = tuple(kv._bviews[0].shape[1:])

    def staging(self, j: int) -> torch.Tensor:
        while len(self._stage) <= j:
            self._stage.append(torch.empty(self.kv.layout.shape,
                                           dtype=self._sdtype,
                                           device=self.kv.device))
        return self._stage[j]

    def _part(self, t: torch.Tensor, l: int, k: int) -> torch.Tensor:
        """Layer l's K (k 0) or V (k 1) of a chunk-shaped tensor."""
        return t[l] if self.kv.layout.mla else t[k, l]

    def _checked(self, block_ids: Any, chunks: Sequence[torch.Tensor]
                 ) -> List[List[int]]:
        kv = self.kv
        ids = kv._block_ids(block_ids, len(chunks))
        bpc = kv.blocks_per_chunk
        for i, c in enumerate(chunks):
            if not isinstance(c, torch.Tensor) or not c.is_contiguous() or \
                    c.numel() * c.element_size() != kv.chunk_bytes:
                raise ValueError("chunk %d is not a contiguous tensor of %d "
                                 "bytes (the layout's chunk)"
                                 % (i, kv.chunk_bytes))
        return [ids[j * bpc:(j + 1) * bpc] for j in range(len(chunks))]

    def _slot(self, c: torch.Tensor) -> torch.Tensor:
        lt = self.kv.layout
        if c.dtype != self._sdtype:
            c = c.view(self._sdtype)
        return c.view(lt.shape)

    def gather(self, block_ids: Any, chunks: Sequence[torch.Tensor],
               layers: Optional[Sequence[int]] = None) -> Any:
        """Copy the blocks (token order) of the given layers (all: the
        whole chunk in one transfer) into the chunks (slot views).
        Returns the event of the copies. ValueError before anything is
        issued when the arguments do not fit."""
        per = self._checked(block_ids, chunks)
        kv, lt = self.kv, self.kv.layout
        whole = layers is None
        ls = range(lt.layers) if whole else list(layers)
        nb = self.stream.non_blocking
        with self.stream.run():
            for j, (ids, c) in enumerate(zip(per, chunks)):
                s = self.staging(j)
                idx = torch.tensor(ids, dtype=torch.long).to(
                    kv.device, non_blocking=nb)
                dst = self._slot(c)
                for l in ls:
                    for k in range(lt.nkv):
                        part = self._part(s, l, k)
                        torch.index_select(
                            kv._bviews[l * lt.nkv + k], 0, idx,
                            out=part.view((len(ids),) + self._block_shape))
                        if not whole:
                            self._part(dst, l, k).copy_(part,
                                                        non_blocking=nb)
                if whole:
                    dst.copy_(s, non_blocking=nb)
            return self.stream.record()

    def scatter(self, block_ids: Any, chunks: Sequence[torch.Tensor],
                skip_blocks: int = 0, layers: Optional[Sequence[int]] = None,
                good: Optional[int] = None) -> Tuple[int, Any]:
        """Copy the chunks (slot views) into the blocks of the given
        layers (all: each chunk in one transfer), leaving the first
        skip_blocks blocks alone. Returns (good, event): good is how many
        chunks were copied (under checksum 'on', the prefix that passed
        its check; the views are cut as verify_retrieve() cuts them).
        A caller that loads layer by layer checks once, with
        checked_prefix(chunks), and passes the result as good."""
        per = self._checked(block_ids, chunks)
        kv, lt = self.kv, self.kv.layout
        n = len(per) * kv.blocks_per_chunk
        if not isinstance(skip_blocks, int) or not 0 <= skip_blocks <= n:
            raise ValueError("skip_blocks is %r: it must be 0..%d"
                             % (skip_blocks, n))
        if good is None:
            good = checked_prefix(chunks)
        whole = layers is None
        ls = range(lt.layers) if whole else list(layers)
        nb = self.stream.non_blocking
        bpc = kv.blocks_per_chunk
        with self.stream.run():
            for j in range(good):
                ids, c = per[j], chunks[j]
                skip = min(max(skip_blocks - j * bpc, 0), bpc)
                if skip == bpc:
                    continue
                s = self.staging(j)
                src = self._slot(c)
                idx = torch.tensor(ids[skip:], dtype=torch.long).to(
                    kv.device, non_blocking=nb)
                if whole:
                    s.copy_(src, non_blocking=nb)
                for l in ls:
                    for k in range(lt.nkv):
                        part = self._part(s, l, k)
                        if not whole:
                            part.copy_(self._part(src, l, k),
                                       non_blocking=nb)
                        blocks = part.view((bpc,) + self._block_shape)
                        kv._bviews[l * lt.nkv + k].index_copy_(
                            0, idx, blocks[skip:])
            return good, self.stream.record()


def checked_prefix(chunks: Any) -> int:
    """How many of a retrieve's chunks may be loaded: under checksum
    'on' they are checked here first (verify_retrieve: the views are
    cut in place at the first corrupt chunk and the commit reports it);
    plain tensors and other modes: all."""
    t = _bound(chunks, readonly=True)
    if t is None or t.tx._c.checksum != "on":
        return len(chunks)
    t.verify()
    keep = set(t.views.indices)
    good = 0
    for i in chunks.indices:
        if i not in keep:
            break
        good += 1
    return good


def _lib_handle() -> Any:
    return kvring._lib_handle()


def _bound(chunks: Any, readonly: bool) -> Any:
    """The live transfer whose slots chunks are the views of (a
    ChunkViews from prepare_store, or prepare_retrieve when readonly),
    else None: then chunks are plain tensors."""
    if not isinstance(chunks, ChunkViews) or chunks._transfer is None:
        return None
    t = chunks._transfer()
    if t is None or t.ended:
        raise ValueError("these views' transfer is over: prepare a new "
                         "one")
    if t.readonly != readonly:
        raise ValueError("%s views passed to %s: gather into a store's "
                         "views, scatter from a retrieve's"
                         % ("retrieve" if t.readonly else "store",
                            "scatter" if readonly else "gather"))
    return t


def _layers(x: Union[Sequence[torch.Tensor], Mapping[str, torch.Tensor]]
            ) -> List[torch.Tensor]:
    if isinstance(x, Mapping):
        return list(x.values())
    if isinstance(x, torch.Tensor):
        raise ValueError("pass one tensor per layer (a list or vLLM's "
                         "dict), or use PagedKV.cross_layer()")
    return list(x)


def _layout_name(dims: Tuple[str, ...]) -> str:
    for name, d in _BLOCK_DIMS.items():
        if d == dims:
            return name
    return "MLA"


def _dims(kv_layout: str) -> Tuple[str, ...]:
    if kv_layout not in _BLOCK_DIMS:
        raise ValueError("kv_layout is %r: it must be 'NHD' or 'HND'"
                         % (kv_layout,))
    return _BLOCK_DIMS[kv_layout]


def _ndim(t: Any, n: int, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError("%s: got a %s, not a tensor" % (what,
                                                         type(t).__name__))
    if t.dim() != n:
        raise ValueError("%s: the tensor has %d dimensions (shape %s), not "
                         "%d" % (what, t.dim(), tuple(t.shape), n))


