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
NHD or HND inside a block (kv_layout names the order of the tensor's
dimensions; a tensor whose strides are permuted, as vLLM hands out HND
caches in NHD shape, works either way, because only strides are used).
block_ids are in token order, len(block_ids) = chunks * chunk_tokens /
block_size. Bad arguments raise ValueError and copy nothing: a block id out
of range, a tensor that does not match the layout, a misaligned or
non-contiguous tensor, a chunk of the wrong size.
"""

from __future__ import annotations

import ctypes
from typing import Any, List, Mapping, Sequence, Tuple, Union

import torch

import kvring

from . import _lib
from .torch import ChunkLayout, ChunkViews

__all__ = ["PagedKV"]

_BLOCK_DIMS = {"NHD": ("blocks", "tokens", "heads", "dim"),
               "HND": ("blocks", "heads", "tokens", "dim")}


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
        self._owners = list(owners)
        lt = layout
        if len(views) != lt.layers * lt.nkv:
            raise ValueError("%s: %d tensors for %d layers x %d, the layout "
                             "needs %d: the cache does not match the "
                             "namespace" % (what, len(views), lt.layers,
                                            lt.nkv, lt.layers * lt.nkv))
        for o in self._owners:
            if o.device.type != "cpu":
                raise ValueError("%s: the tensor is on %s; kvring copies CPU "
                                 "tensors (a GPU cache needs DMA into the "
                                 "pinned pool: docs/tensors.md)"
                                 % (what, o.device))
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
                                tuple(v0.shape)))
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
        if self._lib.kvr_kv_check(ctypes.byref(self._d), err, len(err)) < 0:
            raise ValueError("%s: %s" % (what, err.value.decode()))

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
    def from_vllm(cls, kv_caches: Mapping[str, torch.Tensor],
                  layout: ChunkLayout, kv_layout: str = "NHD") -> "PagedKV":
        """What vLLM's register_kv_caches() passes: MLA caches (3 dims) or
        merged ones (5 dims), in the dict's (layer) order."""
        if layout.mla:
            return cls.mla(kv_caches, layout)
        return cls.merged(kv_caches, layout, kv_layout)

    # -- the copies --
    @property
    def chunk_bytes(self) -> int:
        return self.layout.chunk_bytes

    def _args(self, block_ids: Any, chunks: Sequence[torch.Tensor]
              ) -> Tuple[Any, int, Any, int]:
        if isinstance(block_ids, torch.Tensor):
            block_ids = block_ids.tolist()
        ids = list(block_ids)
        for i, b in enumerate(ids):
            if isinstance(b, bool) or not isinstance(b, int) or \
                    not 0 <= b < self.num_blocks:
                raise ValueError("block id %r (position %d) is out of range: "
                                 "the cache has %d blocks"
                                 % (b, i, self.num_blocks))
        if len(ids) != len(chunks) * self.blocks_per_chunk:
            raise ValueError("%d block ids for %d chunks: each chunk of %d "
                             "tokens needs %d blocks of %d"
                             % (len(ids), len(chunks),
                                self.layout.chunk_tokens,
                                self.blocks_per_chunk, self.block_size))
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


