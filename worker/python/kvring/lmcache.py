# SPDX-License-Identifier: MIT
"""kvring.lmcache: LMCache's engine-driven transfer context on kvringd.

In LMCache's multiprocess mode a worker moves KV chunks through an
engine-driven transfer context (lmcache/v1/multiprocess/transfer_context):
prepare_store / commit_store / prepare_retrieve / commit_retrieve /
close. Its SHM implementation attaches to a segment whose name LMCache's
server hands out; this module is the same context on kvringd instead,
with LMCache's return values exactly::

    from kvring.lmcache import create_engine_driven_context
    ctx = create_engine_driven_context(metadata, mq_client, mq_timeout,
                                       shm_name="/run/kvring/0/kvringd.sock",
                                       pool_size=1)
    res = ctx.prepare_store(key, instance_id)   # None | ([], []) | (views, idx)
    ...
    ctx.close()                                 # twice is harmless

Where LMCache's server gives a segment name (shm_name), kvring takes
kvringd's socket: "kvring:<path>" or an absolute path; any other name
(LMCache's own segment names included) means $KVRING_SOCKET, else the
per-uid default (socket_of()). Chunks are kvring's chunk format,
which is LMCache's (KV_2LTD [2, layers, tokens, hidden]; MLA
[layers, tokens, hidden]), in the shape of metadata.layout_desc.shapes[0]
and dtype layout_desc.dtypes[0]. The chunk token count comes from that
shape (LMCache's metadata has no field for it). Keys are kvring's chunk
keys of the key's token ids (XXH3-128 chained, cache_salt folded in as
kvring.vllm folds vLLM's), in a namespace of the key's model, world size
and worker rank: with kv_heads and head_size given to the constructor a
chunk is the very object kvring.vllm stores for the same tokens.

What this module owns: the pending-transfer tables (one lock, keyed by
(instance_id, the range's last chunk key), never token lists), views over
kvring slots, their end at commit, and the sweep that aborts a transfer
its worker never committed. It does not own LMCache's scheduler-side
lookup, which still asks LMCache's server (docs/tensors.md, "LMCache").
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple

from kvring import _lib as _kvr_lib

torch = _kvr_lib.need_torch("kvring.lmcache")

import kvring
from kvring import KvringError, Keys, SlotStatus
from kvring.torch import ChunkLayout, salted_keys

try:
    from lmcache.v1.multiprocess.transfer_context.base import (
        EngineDrivenContext, EngineDrivenContextMetadata)
    LMCACHE_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as _e:  # LMCache absent: the module still imports
    LMCACHE_IMPORT_ERROR = _e

    class EngineDrivenContext(object):  # type: ignore[no-redef]
        """Stands for LMCache's EngineDrivenContext when LMCache is not
        importable: the kvring context then works on its own, with the
        same calls and return values."""

        def __init__(self, metadata: Any, mq_client: Any,
                     mq_timeout: float) -> None:
            self.metadata = metadata
            self.mq_client = mq_client
            self.mq_timeout = mq_timeout

        @property
        def layout_desc(self) -> Any:
            return self.metadata.layout_desc

    EngineDrivenContextMetadata = Any  # type: ignore[misc,assignment]

__all__ = ["KvringEngineDrivenContext", "create_engine_driven_context",
           "socket_of"]

log = logging.getLogger("kvring.lmcache")

_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF,
         errno.ESHUTDOWN, errno.EOWNERDEAD, errno.ECONNREFUSED,
         errno.ENOENT)


def socket_of(shm_name: str) -> str:
    """kvringd's socket for what LMCache calls shm_name: "kvring:<path>"
    or an absolute path is that path; anything else ("", "kvring:", or
    the segment name LMCache's server hands out, which names LMCache's
    own pool) means $KVRING_SOCKET, else the per-uid default."""
    s = shm_name or ""
    if s.startswith("kvring:"):
        s = s[len("kvring:"):]
    elif not s.startswith("/"):
        s = ""
    return s or os.environ.get("KVRING_SOCKET") or kvring.default_socket()


class _Pending(object):
    """One prepared transfer: the kvring transfer, the views handed out,
    and when it was prepared (for the sweep)."""

    __slots__ = ("tx", "views", "t0", "client")

    def __init__(self, tx: Any, views: List[torch.Tensor],
                 client: kvring.Client) -> None:
        self.tx = tx
        self.views = views
        self.client = client
        self.t0 = time.monotonic()

    def end(self) -> None:
        # The views become empty tensors: a use after the transfer raises
        # instead of reading or writing a slot the pool may reuse.
        for v in self.views:
            v.set_(torch.empty(0, dtype=v.dtype))
        self.views = []


class KvringEngineDrivenContext(EngineDrivenContext):
    """LMCache's EngineDrivenContext on kvringd (see the module's text).

    metadata, mq_client, mq_timeout: LMCache's. mq_client is kept for
    LMCache's own calls and never used: data and control go to kvringd.
    mq_timeout (seconds) bounds every kvringd call.
    socket: kvringd's socket (default socket_of("")).
    kv_heads, head_size: how the chunk's hidden size splits (default 1
    and hidden), for a namespace shared with kvring.vllm.
    by_value: LMCache's pickle semantics: prepare_store returns None and
    commit_store copies the caller's chunks in; prepare_retrieve returns
    copies, already unpinned.
    pending_timeout: a transfer prepared and not committed for this long
    (seconds; default max(10 * mq_timeout, 60)) is aborted (a store:
    nothing published) or unpinned (a retrieve) at the next call.
    checksum: kvring checksums ('off', 'on', 'verify'; default
    $KVRING_CHECKSUM).

    Raises FileNotFoundError when the socket does not exist (as LMCache's
    SHM context does for a missing segment; create_engine_driven_context
    then falls back to by_value), ValueError for metadata kvring cannot
    serve."""

    def __init__(self, metadata: "EngineDrivenContextMetadata",
                 mq_client: Any, mq_timeout: float,
                 socket: Optional[str] = None, *,
                 kv_heads: Optional[int] = None,
                 head_size: Optional[int] = None,
                 by_value: bool = False,
                 pending_timeout: Optional[float] = None,
                 checksum: Optional[str] = None,
                 require_socket: bool = True) -> None:
        super().__init__(metadata, mq_client, mq_timeout)
        if getattr(metadata, "is_multi_group", False):
            raise ValueError("the metadata describes %d KV groups (a hybrid "
                             "model): kvring serves single-group layouts; "
                             "use LMCache's own transport for hybrid models"
                             % len(metadata.group_layout_descs))
        if not isinstance(mq_timeout, (int, float)) or mq_timeout <= 0:
            raise ValueError("mq_timeout is %r: it must be a positive number "
                             "of seconds" % (mq_timeout,))
        self.layout = self._layout(metadata, kv_heads, head_size)
        self.socket = socket_of(socket or "")
        if require_socket and not os.path.exists(self.socket):
            raise FileNotFoundError(errno.ENOENT, "kvringd socket: No such "
                                    "file or directory", self.socket)
        self.by_value = bool(by_value)
        self.pending_timeout = float(pending_timeout) if pending_timeout \
            else max(10.0 * mq_timeout, 60.0)
        self.checksum = checksum
        self._timeout_ms = max(1, int(mq_timeout * 1000))
        self._lock = threading.Lock()
        self._clients: Dict[Tuple[str, int, int], kvring.Client] = {}
        self._stores: Dict[Tuple[Any, Tuple[int, int]], _Pending] = {}
        self._retrieves: Dict[Tuple[Any, Tuple[int, int]], _Pending] = {}
        self._closed = False
        self._down = False
        self._next_try = 0.0
        log.info("kvring LMCache context: kvringd at %s, chunk %s %s (%d "
                 "bytes), %s", self.socket, list(self.layout.shape),
                 self.layout.dtype, self.layout.chunk_bytes,
                 "by value (LMCache's pickle semantics)" if self.by_value
                 else "zero-copy views over kvring slots")

    # -- layout and namespace --
    @staticmethod
    def _layout(metadata: Any, kv_heads: Optional[int],
                head_size: Optional[int]) -> ChunkLayout:
        ld = getattr(metadata, "layout_desc", None)
        shapes = getattr(ld, "shapes", None)
        dtypes = getattr(ld, "dtypes", None)
        if not shapes or not dtypes or len(shapes) != 1:
            raise ValueError("metadata.layout_desc must describe one chunk "
                             "tensor (shapes and dtypes of length 1), got "
                             "%r" % (ld,))
        shape = tuple(int(d) for d in shapes[0])
        mla = bool(getattr(metadata, "use_mla", False))
        if mla and len(shape) == 3:
            L, T, hidden = shape
        elif not mla and len(shape) == 4 and shape[0] == 2:
            _, L, T, hidden = shape
        else:
            raise ValueError(
                "layout_desc shape %s with use_mla=%s: kvring chunks are "
                "LMCache's KV_2LTD [2, layers, tokens, hidden] or, for MLA, "
                "[layers, tokens, hidden]" % (list(shape), mla))
        H = kv_heads or 1
        D = head_size or hidden // H
        if H * D != hidden:
            raise ValueError("kv_heads %d x head_size %d is not the chunk's "
                             "hidden size %d" % (H, D, hidden))
        block = int(getattr(metadata, "block_size", 0) or 0)
        if block <= 0 or T % block:
            raise ValueError("block_size %r does not divide the chunk's %d "
                             "tokens" % (block, T))
        try:
            return ChunkLayout(layers=L, kv_heads=H, head_size=D,
                               dtype=dtypes[0], chunk_tokens=T, mla=mla)
        except ValueError as e:
            raise ValueError("layout_desc %s %s: %s" % (list(shape),
                                                        dtypes[0], e)) from None

    def _client(self, key: Any) -> Optional[kvring.Client]:
        """The connection for key's namespace, connecting when needed;
        None while kvringd is unreachable (one log line an outage)."""
        ns = (key.model_name, int(key.world_size), int(key.worker_id))
        with self._lock:
            if self._closed:
                return None
            c = self._clients.get(ns)
            if c is not None and not c.closed:
                return c
            now = time.monotonic()
            if now < self._next_try:
                return None
            kw: Dict[str, Any] = {"timeout_ms": self._timeout_ms}
            if self.checksum:
                kw["checksum"] = self.checksum
            try:
                c = self.layout.connect(ns[0], socket=self.socket,
                                        tp_rank=ns[2], tp_size=ns[1], **kw)
            except KvringError as e:
                self._next_try = now + min(1.0, self.mq_timeout)
                if not self._down:
                    log.warning("kvring: cannot reach kvringd at %s (%s): "
                                "stores return None/False and retrieves None "
                                "until it answers", self.socket, e)
                self._down = True
                return None
            self._down = False
            self._clients[ns] = c
            return c

    def _dead(self, c: kvring.Client, what: str, e: KvringError) -> None:
        """kvringd failed a call: drop the connection if it is gone (its
        transfers die with it), log once an outage."""
        gone = e.errno in _GONE
        if not gone:
            try:
                c.ping()
            except KvringError:
                gone = True
        if not gone:
            log.warning("kvring: %s failed at kvringd %s: %s", what,
                        self.socket, e)
            return
        with self._lock:
            for ns, cc in list(self._clients.items()):
                if cc is c:
                    del self._clients[ns]
            for table in (self._stores, self._retrieves):
                for tid, p in list(table.items()):
                    if p.client is c:
                        p.end()
                        del table[tid]
            first = not self._down
            self._down = True
        c.close()
        if first:
            log.warning("kvring: %s failed, kvringd at %s is gone (%s)",
                        what, self.socket, e)

    def _chunk_keys(self, c: kvring.Client, key: Any) -> Keys:
        """The kvring keys of the full chunks in [key.start, key.end)."""
        T = self.layout.chunk_tokens
        toks = list(key.token_ids)
        start, end = int(key.start), int(key.end)
        if not 0 <= start <= end <= len(toks):
            raise ValueError("key range [%d, %d) is outside its %d token ids"
                             % (start, end, len(toks)))
        if start % T:
            raise ValueError("key range starts at token %d, not at a chunk "
                             "boundary (chunks are %d tokens)" % (start, T))
        allk = salted_keys(c, toks[:end], T, key.cache_salt or None)
        return allk[start // T:]

    @staticmethod
    def _check_key(key: Any, instance_id: Any) -> None:
        for f in ("model_name", "world_size", "worker_id", "token_ids",
                  "start", "end", "cache_salt"):
            if not hasattr(key, f):
                raise ValueError("key is a %s without %r: pass LMCache's "
                                 "IPCCacheServerKey" % (type(key).__name__,
                                                        f))
        if key.worker_id is None:
            raise ValueError("key.worker_id is None: a transfer key names "
                             "its worker rank")
        try:
            hash(instance_id)
        except TypeError:
            raise ValueError("instance_id %r is not hashable"
                             % (instance_id,)) from None

    def _views(self, tx: Any, idx: List[int], readonly: bool
               ) -> List[torch.Tensor]:
        lt = self.layout
        out = []
        with warnings.catch_warnings():
            # Retrieve slots are read-only memory; torch has no read-only
            # tensors and says so.
            warnings.simplefilter("ignore", UserWarning)
            for i in idx:
                mv = tx.slots[i][1]
                t = torch.frombuffer(mv, dtype=lt.torch_dtype)
                # set_() rather than view(): end() empties the very tensor
                # the caller holds.
                out.append(torch.empty(0, dtype=lt.torch_dtype).set_(
                    t.storage(), 0, lt.shape))
                del t
        return out

    def _sweep(self) -> None:
        """Abort stores and unpin retrieves prepared more than
        pending_timeout ago and never committed (their worker timed out
        or forgot): nothing is published, nothing stays pinned."""
        now = time.monotonic()
        stale: List[Tuple[bool, _Pending]] = []
        with self._lock:
            for store, table in ((True, self._stores),
                                 (False, self._retrieves)):
                for tid, p in list(table.items()):
                    if now - p.t0 > self.pending_timeout:
                        del table[tid]
                        stale.append((store, p))
        for store, p in stale:
            log.warning("kvring: a %s prepared %.1f s ago was never "
                        "committed: %s", "store" if store else "retrieve",
                        now - p.t0, "aborted, nothing published" if store
                        else "unpinned")
            self._finish(p, store, abort=store)

    def _finish(self, p: _Pending, store: bool, abort: bool = False) -> bool:
        p.end()
        try:
            if store and abort:
                p.tx.abort()
            else:
                p.tx.commit()
            return True
        except KvringError as e:
            self._dead(p.client, "commit" if not abort else "abort", e)
            return False

    @staticmethod
    def _tid(instance_id: Any, keys: Keys) -> Tuple[Any, Tuple[int, int]]:
        return (instance_id, keys[len(keys) - 1])

    # -- store --
    def prepare_store(self, key: Any, instance_id: int
                      ) -> "Optional[Tuple[List[torch.Tensor], List[int]]]":
        """LMCache's prepare_store: None (send the chunks by value with
        commit_store: the by_value mode, or kvringd unreachable or
        without room for any chunk), ([], []) (every full chunk of the
        range is stored already, or being stored by another worker: skip
        gather and commit), or (views, chunk_indices): views[i] is a
        writable chunk-shaped tensor over the kvring slot of chunk
        chunk_indices[i] of the range. Raises TimeoutError when kvringd
        does not answer within mq_timeout (as LMCache's SHM context)."""
        self._check_key(key, instance_id)
        self._sweep()
        if self.by_value:
            return None
        c = self._client(key)
        if c is None:
            return None
        keys = self._chunk_keys(c, key)
        if not len(keys):
            return [], []
        tid = self._tid(instance_id, keys)
        with self._lock:
            old = self._stores.pop(tid, None)
        if old is not None:
            # The same store prepared again (a retry after a timeout):
            # the first reservation is freed, never published.
            self._finish(old, True, abort=True)
        try:
            tx = c.store(keys, [self.layout.chunk_bytes] * len(keys))
        except KvringError as e:
            if e.errno == errno.ETIMEDOUT:
                raise TimeoutError("PREPARE_STORE timed out for instance_id="
                                   "%s after %ss" % (instance_id,
                                                     self.mq_timeout)) from e
            self._dead(c, "prepare_store", e)
            return None
        sts = [st for st, _ in tx.slots]
        idx = [i for i, st in enumerate(sts) if st == SlotStatus.OK]
        if not idx:
            try:
                tx.abort()
            except KvringError:
                pass
            if all(st in (SlotStatus.EXISTS, SlotStatus.BUSY) for st in sts):
                return [], []
            return None  # no room: LMCache's by-value path, then False
        views = self._views(tx, idx, readonly=False)
        with self._lock:
            self._stores[tid] = _Pending(tx, views, c)
        return list(views), idx

    def commit_store(self, key: Any, instance_id: int,
                     chunks: "List[torch.Tensor]") -> bool:
        """LMCache's commit_store. After (views, chunk_indices): publish
        the chunks written into the views (chunks is ignored, as LMCache's
        SHM context ignores it), then the views are emptied. After None:
        chunks are the range's chunks by value (chunk i of the range at
        chunks[i], a trailing partial chunk ignored), copied in and
        published; chunks already stored are skipped. True once
        published; False when nothing was prepared and no chunks given
        (LMCache's server answers a commit without prepare so), or kvringd
        refused or is gone."""
        self._check_key(key, instance_id)
        self._sweep()
        c = self._client(key)
        if c is None:
            return False
        keys = self._chunk_keys(c, key)
        if len(keys):
            with self._lock:
                p = self._stores.pop(self._tid(instance_id, keys), None)
            if p is not None:
                return self._finish(p, True)
        if not chunks:
            return False
        return self._store_by_value(c, keys, chunks)

    def _store_by_value(self, c: kvring.Client, keys: Keys,
                        chunks: "List[torch.Tensor]") -> bool:
        lt = self.layout
        n = len(keys)
        if len(chunks) < n:
            raise ValueError("%d chunks for a range of %d full chunks: give "
                             "every chunk of the range" % (len(chunks), n))
        for i in range(n):
            t = chunks[i]
            if not isinstance(t, torch.Tensor) or \
                    tuple(t.shape) != lt.shape or t.dtype != lt.torch_dtype:
                raise ValueError(
                    "chunk %d is %s; this context's chunk is a %s tensor of "
                    "shape %s" % (i, "a %s tensor of shape %s" % (
                        t.dtype, list(t.shape)) if isinstance(
                            t, torch.Tensor) else "a %s" % type(t).__name__,
                        lt.torch_dtype, list(lt.shape)))
        if not n:
            return True
        try:
            tx = c.store(keys, [lt.chunk_bytes] * n)
        except KvringError as e:
            self._dead(c, "store", e)
            return False
        sts = [st for st, _ in tx.slots]
        try:
            for i, st in enumerate(sts):
                if st == SlotStatus.OK:
                    src = chunks[i].detach()
                    if src.device.type != "cpu" or not src.is_contiguous():
                        src = src.to("cpu").contiguous()
                    # As bytes: numpy has no bfloat16.
                    tx.fill(i, src.reshape(-1).view(torch.uint8).numpy())
            tx.commit()
        except KvringError as e:
            self._dead(c, "commit_store", e)
            return False
        except BaseException:
            try:
                tx.abort()
            except KvringError:
                pass
            raise
        return all(st in (SlotStatus.OK, SlotStatus.EXISTS, SlotStatus.BUSY)
                   for st in sts)

    # -- retrieve --
    def prepare_retrieve(self, key: Any, instance_id: int
                         ) -> "Optional[List[torch.Tensor]]":
        """LMCache's prepare_retrieve: a list with one chunk-shaped tensor
        per full chunk of the range (read-only views over the pinned kvring
        slots; in by_value mode copies, already unpinned), or None when
        any of them is not stored, kvringd is unreachable or a chunk fails
        its checksum (LMCache does not tell a miss from a failure)."""
        self._check_key(key, instance_id)
        self._sweep()
        c = self._client(key)
        if c is None:
            return None
        keys = self._chunk_keys(c, key)
        if not len(keys):
            return None
        tid = self._tid(instance_id, keys)
        with self._lock:
            old = self._retrieves.pop(tid, None)
        if old is not None:
            self._finish(old, False)
        try:
            tx = c.retrieve(keys)
            if c.checksum == "on" and len(tx):
                tx.verify()
        except KvringError as e:
            self._dead(c, "prepare_retrieve", e)
            return None
        if len(tx) < len(keys) or any(st != SlotStatus.OK
                                      for st, _ in tx.slots):
            try:
                tx.commit()  # unpin the partial prefix
            except KvringError as e:
                self._dead(c, "commit_retrieve", e)
            return None
        views = self._views(tx, list(range(len(keys))), readonly=True)
        if self.by_value:
            out = [v.clone() for v in views]
            self._finish(_Pending(tx, views, c), False)
            return out
        with self._lock:
            self._retrieves[tid] = _Pending(tx, views, c)
        return list(views)

    def commit_retrieve(self, key: Any, instance_id: int) -> bool:
        """LMCache's commit_retrieve: unpin what prepare_retrieve pinned
        (the views are emptied). False when no retrieve of this key is
        pending for instance_id (in by_value mode, True: nothing is
        pinned)."""
        self._check_key(key, instance_id)
        if self.by_value:
            return True
        c = self._client(key)
        if c is None:
            return False
        keys = self._chunk_keys(c, key)
        if not len(keys):
            return False
        with self._lock:
            p = self._retrieves.pop(self._tid(instance_id, keys), None)
        if p is None:
            return False
        return self._finish(p, False)

    # -- lifetime --
    @property
    def pending(self) -> Tuple[int, int]:
        """(stores, retrieves) prepared and not committed yet."""
        with self._lock:
            return len(self._stores), len(self._retrieves)

    def close(self) -> None:
        """Abort pending stores (nothing published), unpin pending
        retrieves, close the connections. Harmless twice and after
        kvringd died."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            stores, self._stores = list(self._stores.values()), {}
            retrieves, self._retrieves = list(self._retrieves.values()), {}
            clients, self._clients = list(self._clients.values()), {}
        for store, ps in ((True, stores), (False, retrieves)):
            for p in ps:
                p.end()
                try:
                    p.tx.abort() if store else p.tx.commit()
                except KvringError:
                    pass  # kvringd frees them when the connection closes
        for c in clients:
            c.close()

    def __enter__(self) -> "KvringEngineDrivenContext":
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        self.close()
        return False


def create_engine_driven_context(metadata: "EngineDrivenContextMetadata",
                                 mq_client: Any, mq_timeout: float,
                                 shm_name: str, pool_size: int, *,
                                 use_pickle: bool = False,
                                 **kw: Any) -> KvringEngineDrivenContext:
    """LMCache's factory, on kvringd: the zero-copy context when shm_name
    (kvringd's socket, see socket_of) and pool_size are usable, else the
    by-value one (LMCache's pickle semantics); use_pickle=True asks for
    by value. If the zero-copy context cannot start (no socket yet), the
    by-value one is returned, which connects when kvringd appears.
    pool_size is not used beyond LMCache's "<= 0 means by value"
    (kvringd reports its pool size when a worker connects). Extra
    keyword arguments go to KvringEngineDrivenContext. Multi-group
    (hybrid) metadata raises ValueError: kvring serves one layout."""
    if not shm_name or pool_size <= 0:
        use_pickle = True
    if not use_pickle:
        try:
            return KvringEngineDrivenContext(metadata, mq_client, mq_timeout,
                                             shm_name, **kw)
        except FileNotFoundError as e:
            log.warning("kvring: %s: falling back to the by-value context",
                        e)
    kw.pop("by_value", None)
    kw.pop("require_socket", None)
    return KvringEngineDrivenContext(metadata, mq_client, mq_timeout,
                                     shm_name, by_value=True,
                                     require_socket=False, **kw)
