# SPDX-License-Identifier: MIT
"""kvring.torch: chunk layouts, torch tensor views over pool slots, and the
seed's four-call context (docs/tensors.md).

A chunk in the pool is LMCache's format, row-major, K first::

    K/V:  [2, layers, chunk_tokens, kv_heads * head_size]
    MLA:  [layers, chunk_tokens, head_size]          (head_size = latent dim)

so the bytes kvring stores are what an LMCache L1 or L2 holds for the same
layout. Views are torch.frombuffer() over the slot: no copy. Store views
are writable (writing changes the pool); retrieve views are built from a
read-only buffer (torch 1.13 has no read-only tensor, so an in-place write
is detected at commit_retrieve and reported, not prevented). When a
transfer ends, every tensor it handed out is emptied in place (set_() to a
zero-element storage), so using it raises instead of reading memory the
pool may reuse; a tensor derived from it (t.view(), t[0], numpy) that is
still alive at that moment gets a ResourceWarning, and for a retrieve the
pin is kept until that derived tensor dies, so it never reads reused
bytes.

Needs torch (python3-torch); plain kvring does not.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from kvring import _lib as _kvr_lib

torch = _kvr_lib.need_torch("kvring.torch")

import kvring
from kvring import Client, Keys, KvringError, SlotStatus

__all__ = ["ChunkLayout", "ChunkViews", "KvringContext", "DTYPES",
           "salted_keys", "namespace_model"]

log = logging.getLogger("kvring.torch")

# Names the layout accepts; fp8 has no torch 1.13 dtype: raw bytes.
DTYPES: Dict[str, Tuple[torch.dtype, int]] = {
    "fp16": (torch.float16, 2), "float16": (torch.float16, 2),
    "half": (torch.float16, 2),
    "bf16": (torch.bfloat16, 2), "bfloat16": (torch.bfloat16, 2),
    "fp32": (torch.float32, 4), "float32": (torch.float32, 4),
    "float": (torch.float32, 4),
    "fp8": (torch.uint8, 1), "fp8_e4m3": (torch.uint8, 1),
    "fp8_e5m2": (torch.uint8, 1), "uint8": (torch.uint8, 1),
}
_CANON = {torch.float16: "fp16", torch.bfloat16: "bf16",
          torch.float32: "fp32", torch.uint8: "fp8"}


def _dtype_name(dtype: Union[str, torch.dtype]) -> str:
    if isinstance(dtype, torch.dtype):
        if dtype not in _CANON:
            raise ValueError("dtype %s is not supported: use fp16, bf16, "
                             "fp32 or fp8 (uint8 bytes)" % dtype)
        return _CANON[dtype]
    name = str(dtype).lower().replace("torch.", "")
    if name not in DTYPES:
        raise ValueError("dtype %r is not supported: use fp16, bf16, fp32 "
                         "or fp8 (stored as raw uint8 bytes)" % (dtype,))
    return _CANON[DTYPES[name][0]] if not name.startswith("fp8") else name


def namespace_model(model: str, dtype: str, mla: bool) -> str:
    """The model string registered with kvringd: the model name plus the
    dtype and MLA flag, so an fp16 and a bf16 cache of one model (same
    byte size) never share keys. Names too long for the 63-byte field are
    shortened with a hash of the whole name."""
    suffix = "@%s%s" % (dtype, "+mla" if mla else "")
    if len((model + suffix).encode()) <= 63:
        return model + suffix
    h = hashlib.blake2b(model.encode(), digest_size=6).hexdigest()
    head = model.encode()[:63 - len(suffix) - 13].decode(errors="ignore")
    return "%s~%s%s" % (head, h, suffix)


@dataclass(frozen=True)
class ChunkLayout:
    """One rank's chunk layout: the key namespace and the tensor shape.

    layers, kv_heads (per rank), head_size (MLA: the latent dim, and
    kv_heads 1), dtype ('fp16', 'bf16', 'fp32', 'fp8*' as raw bytes, or a
    torch dtype), chunk_tokens, mla."""
    layers: int
    kv_heads: int
    head_size: int
    dtype: Union[str, torch.dtype] = "fp16"
    chunk_tokens: int = 256
    mla: bool = False

    def __post_init__(self) -> None:
        for n in ("layers", "kv_heads", "head_size", "chunk_tokens"):
            v = getattr(self, n)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0 \
                    or v >= 1 << 32:
                raise ValueError("%s is %r: it must be an int in "
                                 "1..4294967295" % (n, v))
        object.__setattr__(self, "dtype", _dtype_name(self.dtype))
        if self.mla and self.kv_heads != 1:
            raise ValueError("an MLA layout has one latent per token: "
                             "kv_heads must be 1, not %d" % self.kv_heads)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype][0]

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def nkv(self) -> int:
        return 1 if self.mla else 2

    @property
    def shape(self) -> Tuple[int, ...]:
        """A chunk's tensor shape (LMCache's KV_2LTD, or MLA's LTD)."""
        if self.mla:
            return (self.layers, self.chunk_tokens, self.head_size)
        return (2, self.layers, self.chunk_tokens,
                self.kv_heads * self.head_size)

    @property
    def chunk_bytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * self.elem_bytes

    def connect(self, model: str, socket: Optional[str] = None,
                tp_rank: int = 0, tp_size: int = 1,
                **kw: Any) -> Client:
        """kvring.connect() with this layout's namespace."""
        return kvring.connect(
            socket=socket, model=namespace_model(model, str(self.dtype),
                                                 self.mla),
            layers=self.layers, kv_heads=self.kv_heads,
            head_size=self.head_size, dtype_bytes=self.elem_bytes,
            tp_rank=tp_rank, tp_size=tp_size,
            chunk_tokens=self.chunk_tokens, **kw)


def _salt_tokens(salt: str, n: int) -> List[int]:
    """A full chunk of pseudo tokens standing for a cache salt. Every one
    has its top bit set, which no real vocabulary reaches, so a salted
    prefix can never equal an unsalted one."""
    out: List[int] = []
    i = 0
    while len(out) < n:
        d = hashlib.blake2b(b"kvring cache_salt\0" + salt.encode() +
                            i.to_bytes(4, "little")).digest()
        out.extend(int.from_bytes(d[j:j + 4], "little") | 0x80000000
                   for j in range(0, len(d), 4))
        i += 1
    return out[:n]


def salted_keys(client: Client, tokens: Any, chunk_tokens: int,
                salt: Optional[str] = None) -> Keys:
    """Chunk keys of tokens, with vLLM's cache_salt folded in: with a salt
    the chain starts from one extra chunk derived from the salt (and that
    chunk's key is dropped), so two tenants never share a key and a
    prefix still maps to a prefix of keys. No salt: client.keys()."""
    if isinstance(tokens, torch.Tensor):
        tokens = tokens.tolist()
    if not salt:
        return client.keys(tokens)
    k = client.keys(_salt_tokens(salt, chunk_tokens) + list(tokens))
    return k[1:]


class ChunkViews(list):
    """The views prepare_store/prepare_retrieve return: a list of tensors
    (so code written for the seed's list[torch.Tensor] works unchanged),
    plus .indices, the chunk index of each view in the request (views
    skip chunks that are already stored), and .transfer_id.

    fill(j, src) and copy_to(j, dst) copy a whole chunk between a user
    tensor and view j with the checksum computed (store) or checked
    (retrieve) while copying: one pass over memory where v.copy_(src)
    followed by the commit's hash (or verify_retrieve() and then
    dst.copy_(v)) takes two."""

    def __init__(self, tensors: Sequence[torch.Tensor] = (),
                 indices: Sequence[int] = (), transfer_id: int = 0) -> None:
        super().__init__(tensors)
        self.indices: List[int] = list(indices)
        self.transfer_id = transfer_id
        self._transfer: Optional[weakref.ref] = None

    def items(self) -> List[Tuple[int, torch.Tensor]]:
        """(chunk index, view) pairs."""
        return list(zip(self.indices, self))

    def __getitem__(self, i):  # type: ignore[override]
        # A slice stays bound to the transfer (with its indices), so that
        # views[:n] can still be gathered into or scattered from.
        if isinstance(i, slice):
            out = ChunkViews(list.__getitem__(self, i), self.indices[i],
                             self.transfer_id)
            out._transfer = self._transfer
            return out
        return list.__getitem__(self, i)

    def _live(self, what: str) -> "_Transfer":
        t = self._transfer() if self._transfer is not None else None
        if t is None or t.ended:
            raise ValueError("%s: these views' transfer is over (or they "
                             "are not a prepared transfer's views)" % what)
        return t

    def fill(self, j: int, src: torch.Tensor) -> None:
        """Copy src (a contiguous tensor of the layout's dtype and chunk
        size, any shape) into store view j. From a CPU tensor with
        kvr_xfer_fill: with checksums on the XXH3-64 is computed while
        copying and the commit sends it without reading the slot again,
        so do not write view j afterwards: its sum would be of the old
        bytes and every checking reader would find the chunk corrupt.
        From a tensor on a device: one copy into the slot, summed by the
        commit. Raises ValueError before any byte moves when src does not
        fit."""
        self._live("fill").fill(j, src)

    def copy_to(self, j: int, dst: torch.Tensor) -> bool:
        """Copy retrieve view j into dst (a contiguous tensor of the
        layout's dtype and chunk size, any shape; on the CPU with
        kvr_retrieve_copy). Under checksum='on' the chunk's sum is checked
        while copying (into a device tensor: the transfer's chunks are
        checked once, before the first copy; 'verify' checked them on
        arrival). True: dst holds the chunk.
        False: it failed its checksum; dst must not be used, and the
        views are cut in place at view j exactly as verify_retrieve()
        cuts them (that chunk and every later one are no use to a
        prefix); commit_retrieve reports it."""
        return self._live("copy_to").copy_to(j, dst)


class _Transfer(object):
    """One kvring transfer and the tensors it handed out."""

    def __init__(self, tx: Any, layout: ChunkLayout,
                 readonly: bool) -> None:
        self.tx = tx
        self.readonly = readonly
        self.layout = layout
        self.ended = False
        self._verified = False
        self.views = ChunkViews(transfer_id=tx.id)
        self.views._transfer = weakref.ref(self)
        self._bufs: List[weakref.ref] = []
        self._versions: List[int] = []
        x = tx._x
        with warnings.catch_warnings():
            # torch warns that it has no read-only tensors; the context
            # checks for in-place writes at commit instead.
            warnings.simplefilter("ignore", UserWarning)
            for i in range(x.nslots):
                s = x.slots[i]
                if s.status == SlotStatus.CORRUPT:
                    # Failed its checksum: this chunk and every later one
                    # are no use to a prefix (commit reports it).
                    log.warning("kvring: chunk %d of transfer %d fails its "
                                "checksum; %d of %d chunks usable", i,
                                tx.id, i, x.nslots)
                    break
                if s.status != SlotStatus.OK:
                    continue
                if s.len != layout.chunk_bytes:
                    raise KvringError(
                        22, "slot %d is %d bytes, the layout's chunk is %d: "
                        "the namespace does not match the stored chunks"
                        % (i, s.len, layout.chunk_bytes))
                arr = (ctypes.c_char * s.len).from_address(s.ptr)
                mv = memoryview(arr).cast("B")
                if readonly:
                    mv = mv.toreadonly()
                flat = torch.frombuffer(mv, dtype=layout.torch_dtype)
                # set_() rather than view(): a view keeps flat as its
                # _base, which end() could not empty.
                t = torch.empty(0, dtype=layout.torch_dtype).set_(
                    flat.storage(), 0, layout.shape)
                del flat
                self._bufs.append(weakref.ref(mv))
                self._versions.append(t._version)
                self.views.append(t)
                self.views.indices.append(i)  # slot i is chunk i
                del mv, arr

    def verify(self) -> int:
        """RetrieveTx.verify() (kvr_verify_retrieve), then cut the views
        at the first corrupt chunk, as checksum='verify' does on arrival:
        that chunk and every later one are no use to a prefix. The views
        cut off are emptied in place and leave self.views (the very list
        the caller holds). Returns the number of corrupt chunks."""
        bad = self.tx.verify()
        self._cut()
        return bad

    def _cut(self) -> None:
        """Cut the views at the first slot the library marked CORRUPT:
        the views cut off are emptied in place and leave self.views."""
        first = next((i for i, (st, _) in enumerate(self.tx.slots)
                      if st == SlotStatus.CORRUPT), None)
        if first is None:
            return
        keep = sum(1 for i in self.views.indices if i < first)
        if keep == len(self.views):
            return  # cut already (on arrival, or an earlier verify)
        log.warning("kvring: chunk %d of transfer %d fails its checksum; "
                    "%d of %d chunks usable", first, self.tx.id, first,
                    len(self.tx.slots))
        for t in self.views[keep:]:
            t.set_(torch.empty(0, dtype=t.dtype))
        del self.views[keep:]
        del self.views.indices[keep:]
        del self._versions[keep:]

    def _user_tensor(self, j: Any, t: Any, what: str) -> int:
        """The slot index of view j, after checking that user tensor t
        can take or give a whole chunk (ValueError otherwise)."""
        if isinstance(j, bool) or not isinstance(j, int) or \
                not 0 <= j < len(self.views):
            raise ValueError("view index %r is out of range: there are %d "
                             "views" % (j, len(self.views)))
        _Transfer._check_tensor(self.layout, t, what)
        return self.views.indices[j]

    @staticmethod
    def _check_tensor(lt: ChunkLayout, t: Any, what: str) -> None:
        if not isinstance(t, torch.Tensor):
            raise ValueError("%s is a %s, not a tensor"
                             % (what, type(t).__name__))
        if not t.is_contiguous() or t.dtype != lt.torch_dtype or \
                t.numel() * t.element_size() != lt.chunk_bytes:
            raise ValueError(
                "%s is a %s%s tensor of %s on %s; a chunk is a contiguous "
                "%s tensor of %d elements (shape %s), on any device: use "
                ".contiguous() or .to(dtype) first"
                % (what, "" if t.is_contiguous() else "non-contiguous ",
                   t.dtype, tuple(t.shape), t.device, lt.torch_dtype,
                   lt.chunk_bytes // lt.elem_bytes, list(lt.shape)))

    def fill(self, j: int, src: torch.Tensor) -> None:
        """ChunkViews.fill()."""
        if self.readonly:
            raise ValueError("fill: these are a retrieve's views (read "
                             "them, or copy_to() a tensor of your own)")
        i = self._user_tensor(j, src, "src")
        if src.device.type != "cpu":
            # One copy from the device into the slot; the commit sums it.
            self.views[j].copy_(src.view(self.layout.shape))
            return
        self.tx._copy_ptr(i, src.data_ptr(), False)

    def copy_to(self, j: int, dst: torch.Tensor) -> bool:
        """ChunkViews.copy_to()."""
        if not self.readonly:
            raise ValueError("copy_to: these are a store's views (fill() "
                             "them)")
        i = self._user_tensor(j, dst, "dst")
        if dst.device.type != "cpu":
            # Checked before any byte goes to the device (checksum 'on';
            # 'verify' checked on arrival), then one copy.
            if self.tx._c.checksum == "on" and not self._verified:
                self.verify()
                self._verified = True
            if i not in self.views.indices:
                return False
            dst.view(self.layout.shape).copy_(
                self.views[self.views.indices.index(i)])
            return True
        if self.tx._copy_ptr(i, dst.data_ptr(), True) == 0:
            return True
        self.tx.slots[i] = (SlotStatus.CORRUPT, None)
        self._cut()
        return False

    def end(self) -> bool:
        """Empty every tensor handed out; True if no derived tensor still
        holds the slot memory (safe to unpin now)."""
        self.ended = True
        written = []
        for i, t in enumerate(self.views):
            if self.readonly and t._version != self._versions[i]:
                written.append(self.views.indices[i])
            t.set_(torch.empty(0, dtype=t.dtype))
        self.views.clear()
        alive = [b for b in self._bufs if b() is not None]
        if written:
            # Under the copy transport the views are private buffers:
            # only this copy was changed.
            warnings.warn("kvring: retrieve view(s) of chunk(s) %s were "
                          "written in place: %s" % (
                              written, "the stored chunks are damaged for "
                              "every reader" if self.tx._c.transport
                              != "copy" else "this process's copy of "
                              "them is wrong (the stored chunks are not)"),
                          RuntimeWarning, stacklevel=4)
        if alive:
            warnings.warn(
                "kvring: %d tensor(s) derived from transfer %d's views "
                "(a .view(), a slice or a numpy array) are still alive at "
                "its end%s" % (len(alive), self.tx.id,
                               "; the pin is kept until they are freed"
                               if self.readonly else
                               ": writes through them change a published "
                               "chunk"), ResourceWarning, stacklevel=4)
        return not alive

    def live_buffers(self) -> List[Any]:
        return [b() for b in self._bufs if b() is not None]


def _key_id(keys: Keys) -> Tuple[int, int]:
    """The small id of a request: its last chunk key (covers every token
    of its full chunks). Never the token list (the seed's review, #7)."""
    return keys[len(keys) - 1] if len(keys) else (0, 0)


def _end_tx(t: "_Transfer", op: str) -> bool:
    """End t's transfer as op says: "abort_store" aborts it, "commit_store"
    and "commit_retrieve" commit it. False, with a warning naming op, when
    kvringd refused."""
    try:
        (t.tx.abort if op == "abort_store" else t.tx.commit)()
        return True
    except KvringError as e:
        log.warning("kvring %s failed: %s", op, e)
        return False


class KvringContext(object):
    """The seed's four-call contract over kvring (docs/tensors.md has the
    mapping to LMCache's NonGpuContext).

    prepare_store(key, instance_id) / prepare_retrieve(key, instance_id)
    return None when the cache cannot take part (the server gone, or no
    room for any chunk), [] when there is nothing to do
    (everything already stored: a success; or, for a retrieve, nothing
    stored), else a ChunkViews list of tensors with .indices.
    commit_store, abort_store and commit_retrieve return bool. close() is
    idempotent. key is token ids (list, tensor, array) or kvring.Keys.

    with ctx.storing(key) as views: ... commits on a clean exit and aborts
    (never publishes) on an exception.

    Under the copy transport (no shared pool could be mapped) the views
    are over the library's private buffers: a store's bytes travel to
    kvringd at commit_store, a retrieve's arrived with its answer. The
    calls and their return values are the same; only the speed differs
    (docs/tensors.md, "Under the copy transport").

    store_chunks(key, chunks) and retrieve_chunks(key, out) copy whole
    chunks from and to tensors of the caller's, summing or checking
    while they copy when checksums are on (ChunkViews.fill/copy_to).
    """

    def __init__(self, layout: ChunkLayout, client: Optional[Client] = None,
                 model: Optional[str] = None, socket: Optional[str] = None,
                 tp_rank: int = 0, tp_size: int = 1, salt: Optional[str] = None,
                 **connect_kw: Any) -> None:
        self.layout = layout
        self.salt = salt
        self._own = client is None
        if client is None:
            if model is None:
                raise TypeError("KvringContext needs a client or a model")
            client = layout.connect(model, socket=socket, tp_rank=tp_rank,
                                    tp_size=tp_size, **connect_kw)
        self.client: Optional[Client] = client
        self._shm = client.transport != "copy"
        log.info("kvring context: %s, chunk %s = %d bytes%s", client.debug,
                 list(layout.shape), layout.chunk_bytes,
                 "" if self._shm else " (copy transport: views are private "
                 "buffers, sent at commit_store; slower than shared "
                 "memory)")
        self._stores: Dict[Tuple[Any, Tuple[int, int]], _Transfer] = {}
        self._retrieves: Dict[Tuple[Any, Tuple[int, int]], _Transfer] = {}
        self._deferred: List[Tuple[_Transfer, List[Any]]] = []
        self._lock = threading.Lock()

    # -- keys --
    def keys(self, key: Any, salt: Optional[str] = None) -> Keys:
        if isinstance(key, Keys):
            return key
        if self.client is None:
            raise KvringError(9, "kvring context is closed")
        return salted_keys(self.client, key, self.layout.chunk_tokens,
                           salt if salt is not None else self.salt)

    def _usable(self) -> bool:
        self._flush_deferred()
        return self.client is not None

    # -- store --
    def prepare_store(self, key: Any, instance_id: Any = 0,
                      salt: Optional[str] = None) -> Optional[ChunkViews]:
        """Reserve a slot for every full chunk of key not yet stored."""
        if not self._usable():
            return None
        keys = self.keys(key, salt)
        tid = (instance_id, _key_id(keys))
        if tid in self._stores:
            raise ValueError("a store of this key for instance %r is already "
                             "prepared: commit or abort it first"
                             % (instance_id,))
        if not len(keys):
            return ChunkViews()
        try:
            tx = self.client.store(keys, [self.layout.chunk_bytes]
                                   * len(keys))
        except KvringError as e:
            log.warning("kvring prepare_store failed, skipping: %s", e)
            return None
        sts = [st for st, _ in tx.slots]
        if all(st == SlotStatus.EXISTS for st in sts):
            tx.commit()  # x->id 0: completes locally
            return ChunkViews()
        if not any(st == SlotStatus.OK for st in sts):
            tx.abort()
            return None
        t = _Transfer(tx, self.layout, readonly=False)
        tx._views = []  # the context owns the memory views
        tx.slots = [(st, None) for st, _ in tx.slots]
        self._stores[tid] = t
        return t.views

    def _find(self, table: Dict, key: Any, instance_id: Any,
              chunks: Any = None, salt: Optional[str] = None) -> Any:
        """The table id of a pending transfer, or None."""
        if isinstance(chunks, ChunkViews) and chunks.transfer_id:
            for tid, t in table.items():
                if t.tx.id == chunks.transfer_id:
                    return tid
        if key is None or self.client is None:
            return None
        tid = (instance_id, _key_id(self.keys(key, salt)))
        return tid if tid in table else None

    def _take(self, table: Dict, key: Any, instance_id: Any,
              chunks: Any = None, salt: Optional[str] = None
              ) -> Optional[_Transfer]:
        tid = self._find(table, key, instance_id, chunks, salt)
        return table.pop(tid) if tid is not None else None

    def commit_store(self, key: Any, instance_id: Any = 0,
                     chunks: Any = None, salt: Optional[str] = None) -> bool:
        """Publish what prepare_store reserved. True also when there was
        nothing to store (the idempotent case)."""
        self._flush_deferred()
        t = self._take(self._stores, key, instance_id, chunks, salt)
        if t is None:
            # Nothing pending: [] from prepare_store, a success.
            return isinstance(chunks, list) and len(chunks) == 0
        t.end()
        return _end_tx(t, "commit_store")

    def abort_store(self, key: Any, instance_id: Any = 0,
                    chunks: Any = None, salt: Optional[str] = None) -> bool:
        """Free what prepare_store reserved; nothing is published."""
        t = self._take(self._stores, key, instance_id, chunks, salt)
        if t is None:
            return False
        t.end()
        return _end_tx(t, "abort_store")

    def storing(self, key: Any, instance_id: Any = 0,
                salt: Optional[str] = None) -> "_StoreBlock":
        """with ctx.storing(key) as views: fill views; commit on exit,
        abort on an exception. views is None or [] as prepare_store."""
        return _StoreBlock(self, key, instance_id, salt)

    def _chunk_list(self, key: Any, chunks: Any, salt: Optional[str],
                    what: str) -> Keys:
        keys = self.keys(key, salt)
        n = len(chunks) if isinstance(chunks, (list, tuple)) else \
            chunks.shape[0] if isinstance(chunks, torch.Tensor) and \
            chunks.dim() > len(self.layout.shape) else -1
        if n < 0:
            raise ValueError("%s must be a list of chunk tensors or one "
                             "tensor [n, %s], not %s" % (
                                 what, ", ".join(map(str, self.layout.shape)),
                                 type(chunks).__name__))
        if n < len(keys):
            raise ValueError("%s holds %d chunks, the key has %d full "
                             "chunks: give one tensor per full chunk"
                             % (what, n, len(keys)))
        return keys

    def store_chunks(self, key: Any, chunks: Any, instance_id: Any = 0,
                     salt: Optional[str] = None) -> Optional[int]:
        """Store whole chunks from tensors of the caller's: chunks[i] (a
        list of tensors, or one tensor [n, *layout.shape]) is chunk i of
        key. Only chunks not yet stored are copied, with kvr_xfer_fill
        (the checksum computed while copying), then committed. Returns
        how many chunks were written (0: all were stored already), or
        None as prepare_store (the cache cannot take them); a commit the
        server refuses gives None too, and nothing is published. Raises
        ValueError (a tensor that is not a chunk) with nothing stored."""
        keys = self._chunk_list(key, chunks, salt, "chunks")
        for i in range(len(keys)):  # all of them, before reserving
            _Transfer._check_tensor(self.layout, chunks[i], "chunk %d" % i)
        views = self.prepare_store(keys, instance_id)
        if not views:
            return None if views is None else 0
        try:
            for j, i in enumerate(views.indices):
                views.fill(j, chunks[i])
        except BaseException:
            self.abort_store(keys, instance_id, views)
            raise
        n = len(views)  # the commit empties the list
        return n if self.commit_store(keys, instance_id, views) else None

    # -- retrieve --
    def prepare_retrieve(self, key: Any, instance_id: Any = 0,
                         salt: Optional[str] = None,
                         lease: Optional[int] = None) -> Optional[ChunkViews]:
        """Pin the longest stored prefix of key's chunks (or redeem a
        lease made by any process of this uid) and return its views."""
        if not self._usable():
            return None
        keys = self.keys(key, salt) if key is not None else None
        tid = (instance_id, _key_id(keys) if keys is not None
               else ("lease", lease))
        if tid in self._retrieves:
            raise ValueError("a retrieve of this key for instance %r is "
                             "already prepared: commit it first"
                             % (instance_id,))
        try:
            if lease is not None:
                tx = self.client.retrieve(lease=lease)
            else:
                if not len(keys):
                    return ChunkViews()
                tx = self.client.retrieve(keys)
        except KvringError as e:
            log.warning("kvring prepare_retrieve failed: %s", e)
            return None
        if len(tx) == 0:
            tx.commit()
            return ChunkViews()
        t = _Transfer(tx, self.layout, readonly=True)
        tx._views = []
        tx.slots = [(st, None) for st, _ in tx.slots]
        self._retrieves[tid] = t
        return t.views

    def retrieve_chunks(self, key: Any, out: Any, instance_id: Any = 0,
                        salt: Optional[str] = None,
                        lease: Optional[int] = None) -> Optional[int]:
        """Copy the longest stored prefix of key's chunks into tensors of
        the caller's, out[i] for chunk i (a list, or one tensor
        [n, *layout.shape]), then unpin. With kvr_retrieve_copy: under
        checksum='on' each chunk is checked while it is copied, and the
        copy stops before the first chunk that fails (out[i] from there
        on must not be used; kvringd drops the chunk). Returns the number
        of chunks copied and good, or None as prepare_retrieve (the cache
        cannot answer). With lease=, key may be None; out must then have
        room for every chunk the lease pins."""
        if key is not None:
            self._chunk_list(key, out, salt, "out")
        elif not isinstance(out, (list, tuple, torch.Tensor)):
            raise ValueError("out must be a list of chunk tensors or one "
                             "tensor [n, %s], not %s" % (
                                 ", ".join(map(str, self.layout.shape)),
                                 type(out).__name__))
        views = self.prepare_retrieve(key, instance_id, salt, lease)
        if views is None:
            return None
        nout = len(out) if isinstance(out, (list, tuple)) else out.shape[0]
        n = 0
        try:
            for j in range(len(views)):
                if views.indices[j] >= nout:
                    raise ValueError("out holds %d chunks, the lease pins "
                                     "%d: give one tensor per pinned chunk"
                                     % (nout, len(views)))
                if not views.copy_to(j, out[views.indices[j]]):
                    break
                n += 1
        finally:
            # [] (nothing stored) is already unpinned; a transfer whose
            # views were all cut still holds its pins.
            if views.transfer_id:
                del views
                self.commit_retrieve(key, instance_id, lease=lease,
                                     salt=salt)
        return n

    def verify_retrieve(self, key: Any = None, instance_id: Any = 0,
                        chunks: Any = None, lease: Optional[int] = None,
                        salt: Optional[str] = None) -> int:
        """Check a prepared retrieve's chunks against the XXH3-64 their
        storer sent (the client needs checksum='on' or 'verify'; 'verify'
        already did it when the retrieve arrived). The views are cut in
        place at the first corrupt chunk, exactly as under 'verify': the
        ChunkViews list shrinks, the tensors cut off are emptied, and
        commit_retrieve reports the corrupt chunks so that kvringd drops
        them. Returns the number of corrupt chunks (0: every view is
        good). The transfer is found as by commit_retrieve. Raises
        KvringError(ENODATA) on a client without checksums, ValueError
        when no such retrieve is prepared.

        >>> views = ctx.prepare_retrieve(tokens)     # doctest: +SKIP
        >>> ctx.verify_retrieve(tokens), len(views)  # doctest: +SKIP
        (1, 2)
        """
        if key is None and lease is not None and not isinstance(chunks,
                                                                ChunkViews):
            tid: Any = (instance_id, ("lease", lease))
            tid = tid if tid in self._retrieves else None
        else:
            tid = self._find(self._retrieves, key, instance_id, chunks, salt)
        if tid is None:
            raise ValueError("verify_retrieve: no retrieve of this key for "
                             "instance %r is prepared (call prepare_retrieve "
                             "first)" % (instance_id,))
        return self._retrieves[tid].verify()

    def commit_retrieve(self, key: Any = None, instance_id: Any = 0,
                        chunks: Any = None, lease: Optional[int] = None,
                        salt: Optional[str] = None) -> bool:
        """Unpin. The views are emptied; a tensor derived from them that is
        still alive keeps the pin until it is freed (ResourceWarning)."""
        self._flush_deferred()
        if key is None and lease is not None and not isinstance(chunks,
                                                                ChunkViews):
            t = self._retrieves.pop((instance_id, ("lease", lease)), None)
        else:
            t = self._take(self._retrieves, key, instance_id, chunks, salt)
        if t is None:
            return False
        if not t.end():
            with self._lock:
                self._deferred.append((t, [weakref.ref(b) for b in
                                           t.live_buffers()]))
            return True
        return self._unpin(t)

    def _unpin(self, t: _Transfer) -> bool:
        return _end_tx(t, "commit_retrieve")

    def _flush_deferred(self) -> None:
        if not self._deferred:
            return
        with self._lock:
            ready = [d for d in self._deferred
                     if all(r() is None for r in d[1])]
            self._deferred = [d for d in self._deferred if d not in ready]
        for t, _ in ready:
            self._unpin(t)

    # -- lifetime --
    def close(self) -> None:
        """Abort pending stores, unpin pending retrieves, close the
        connection if the context opened it. Harmless twice, and after
        the server died."""
        c = self.client
        if c is None:
            return
        for table, abort in ((self._stores, True), (self._retrieves, False)):
            for tid in list(table):
                t = table.pop(tid)
                t.end()
                try:
                    (t.tx.abort if abort else t.tx.commit)()
                except KvringError:
                    pass
        self._deferred = []  # closing the connection drops those pins
        self.client = None
        if self._own:
            c.close()

    def __enter__(self) -> "KvringContext":
        return self

    def __exit__(self, et, ev, tb) -> bool:
        self.close()
        return False


class _StoreBlock(object):
    def __init__(self, ctx: KvringContext, key: Any, instance_id: Any,
                 salt: Optional[str]) -> None:
        self.ctx, self.key, self.iid, self.salt = ctx, key, instance_id, salt
        self.views: Optional[ChunkViews] = None

    def __enter__(self) -> Optional[ChunkViews]:
        self.views = self.ctx.prepare_store(self.key, self.iid, self.salt)
        return self.views

    def __exit__(self, et, ev, tb) -> bool:
        if not self.views:
            return False
        if et is None:
            if not self.ctx.commit_store(self.key, self.iid, self.views,
                                         self.salt):
                raise KvringError(5, "kvring commit_store failed: the chunks "
                                  "were not published")
        else:
            self.ctx.abort_store(self.key, self.iid, self.views, self.salt)
        return False
