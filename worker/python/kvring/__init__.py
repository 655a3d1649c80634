# SPDX-License-Identifier: MIT
"""kvring: store and retrieve KV-cache chunks in a kvringd cache server.

A thin ctypes binding over libkvring (the standard library only). Slots are
memoryviews straight over the shared pool, so numpy.frombuffer() or
torch.frombuffer() wrap them without a copy. With kvringd running and
$KVRING_SOCKET pointing at it, this runs as pasted (the README's "Use it
from Python" has the same example; a test runs both)::

    import kvring

    tokens = list(range(1000, 1000 + 2 * 256))      # two full chunks
    with kvring.connect(model="doc-example", layers=2, kv_heads=2,
                        head_size=64, dtype_bytes=2) as c:
        keys = c.keys(tokens)                       # one key per chunk
        with c.store(keys, [c.chunk_bytes] * len(keys)) as tx:
            for status, view in tx.slots:
                if status == kvring.SlotStatus.OK:  # EXISTS: cached
                    view[:] = bytes([1]) * len(view)  # into the pool
        with c.retrieve(keys) as tx:                # the cached prefix
            assert all(v[0] == 1 for _, v in tx.slots)

Torch tensor views, the seed's four-call contract and paged-KV gather and
scatter live in kvring.torch and kvring.kv (they need torch; this module
does not). The vLLM connector is kvring.vllm.

This module owns the Python-facing API; it does not own the protocol or
the waiting rules (libkvring does). A Client may be shared by threads: the
library serialises calls with a mutex (docs/worker-guide.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import errno as _errno
import itertools
import os
import threading
import warnings
from dataclasses import dataclass
from typing import (Any, Dict, Iterable, Iterator, List, Optional, Sequence,
                    Tuple, Union)

from . import _lib

__version__ = "0.3.0"

__all__ = ["connect", "Client", "KvringError", "Keys", "default_socket",
           "lib_version",
           "SlotStatus", "Transport", "Op", "Completion", "StoreTx",
           "RetrieveTx", "__version__",
           "SLOT_OK", "SLOT_EXISTS", "SLOT_NOROOM", "SLOT_BUSY",
           "SLOT_INVALID", "TRANSPORT_SHM", "TRANSPORT_MEMFD",
           "TRANSPORT_COPY"]

_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1


class SlotStatus(enum.IntEnum):
    """What prepare_store answered for one key (enum kvr_slot_status)."""
    OK = 0        # a slot was reserved (store) or pinned (retrieve)
    EXISTS = 1    # already stored: nothing to write, a success
    NOROOM = 2    # the pool is full of pinned/reserved chunks
    BUSY = 3      # another transfer is storing this key right now
    INVALID = 4   # the size was refused (0, or larger than the pool)
    QUOTA = 5     # this connection's quota or the per-key limit forbids it
    CORRUPT = 6   # retrieve: the bytes fail their checksum (do not use)


class Transport(enum.IntEnum):
    """How payload bytes travel (enum kvr_transport)."""
    SHM = 1       # named pool under /dev/shm, mapped by the worker
    MEMFD = 2     # anonymous pool passed over the socket, mapped
    COPY = 3      # no shared pool: bytes over the socket (slow, logged)


class Op(enum.IntEnum):
    """Request kinds, as completions report them (enum kvr_op)."""
    LOOKUP = 1
    RELEASE = 2
    PREPARE_STORE = 3
    COMMIT_STORE = 4
    ABORT_STORE = 5
    PREPARE_RETRIEVE = 6
    COMMIT_RETRIEVE = 7
    PING = 8
    STATS = 9


# The flat names of version 0.1, kept: they compare equal to the enums.
SLOT_OK, SLOT_EXISTS, SLOT_NOROOM, SLOT_BUSY, SLOT_INVALID = list(SlotStatus)[:5]
TRANSPORT_SHM, TRANSPORT_MEMFD, TRANSPORT_COPY = list(Transport)
_TRANSPORT_NAMES = {Transport.SHM: "shm", Transport.MEMFD: "memfd",
                    Transport.COPY: "copy"}
# connect(checksum=...): KVR_CHECKSUM_OFF/_ON/_VERIFY of kvring.h.
_CHECKSUM_MODES = {"off": 1, "on": 2, "verify": 3}
_CHECKSUM_NAMES = {v: k for k, v in _CHECKSUM_MODES.items()}

_LIB: Any = None


def _lib_handle() -> Any:
    global _LIB
    if _LIB is None:
        _LIB = _lib.load()
    return _LIB


class KvringError(OSError):
    """A libkvring call failed: .errno is the (positive) errno, the message
    is the library's sentence (kvr_client_errmsg)."""


def _raise(rc: int, msg: str) -> None:
    code = -rc if rc < 0 else rc
    text = msg or os.strerror(code)
    raise KvringError(code, "%s (%s)" % (text, _errno.errorcode.get(code,
                                                                     code)))


def _uint(name: str, v: Any, hi: int = _U32, lo: int = 0) -> int:
    """v as an int in [lo, hi], or ValueError before ctypes can wrap it
    (ctypes turns -1 into 4294967295 silently)."""
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            v = v.__index__()
        except AttributeError:
            raise TypeError("%s must be an int, not %s"
                            % (name, type(v).__name__)) from None
    if not lo <= v <= hi:
        raise ValueError("%s is %d: it must be in %d..%d" % (name, v, lo, hi))
    return v


def lib_version() -> str:
    """The version of the libkvring.so that is loaded (kvr_version()),
    which may differ from this package's __version__."""
    return _lib_handle().kvr_version().decode()


def default_socket() -> str:
    """The default socket path for this uid (kvr_default_socket)."""
    buf = ctypes.create_string_buffer(128)
    rc = _lib_handle().kvr_default_socket(buf, len(buf))
    if rc < 0:
        _raise(rc, "default socket path")
    return buf.value.decode()


KeyLike = Union[Tuple[int, int], bytes, bytearray]


class Keys(Sequence[Tuple[int, int]]):
    """An immutable sequence of 128-bit chunk keys (kept as a C array, so
    passing it back to the library costs nothing). Items are (lo, hi)
    tuples; slicing gives Keys."""

    def __init__(self, arr: Any, n: Optional[int] = None) -> None:
        self._arr = arr
        self._n = len(arr) if n is None else n

    @classmethod
    def from_list(cls, items: Union["Keys", Iterable[KeyLike]]) -> "Keys":
        """Keys from (lo, hi) tuples, 16-byte bytes objects or Keys."""
        if isinstance(items, Keys):
            return items
        items = list(items)
        arr = (_lib.Key * max(len(items), 1))()
        for i, k in enumerate(items):
            if isinstance(k, (bytes, bytearray)):
                if len(k) != 16:
                    raise ValueError("key %d is %d bytes: a key is 16"
                                     % (i, len(k)))
                lo = int.from_bytes(k[:8], "little")
                hi = int.from_bytes(k[8:], "little")
            else:
                lo, hi = k
            arr[i].lo = _uint("key %d low half" % i, lo, _U64)
            arr[i].hi = _uint("key %d high half" % i, hi, _U64)
        return cls(arr, len(items))

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return Keys.from_list([self[j] for j in range(*i.indices(
                self._n))])
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return (self._arr[i].lo, self._arr[i].hi)

    def __iter__(self) -> Iterator[Tuple[int, int]]:
        for i in range(self._n):
            yield (self._arr[i].lo, self._arr[i].hi)

    def to_bytes(self, i: int) -> bytes:
        lo, hi = self[i]
        return lo.to_bytes(8, "little") + hi.to_bytes(8, "little")

    def __repr__(self) -> str:
        return "Keys(%d)" % self._n

    def _ptr(self) -> Any:
        return ctypes.cast(self._arr, ctypes.POINTER(_lib.Key))


def _view(ptr: int, n: int, readonly: bool) -> Tuple[memoryview, memoryview]:
    """A memoryview of n bytes at ptr (in the pool or a copy buffer), and
    the base view that must be released with it."""
    if n == 0 or not ptr:
        base = memoryview(b"") if readonly else memoryview(bytearray())
        return base, base
    buf = (ctypes.c_char * n).from_address(ptr)
    base = memoryview(buf)
    view = base.cast("B")
    if readonly:
        view = view.toreadonly()
    return base, view


class _PyBuffer(ctypes.Structure):
    """Py_buffer (Include/pybuffer.h), for the address of any object that
    exports a contiguous buffer, read-only ones (bytes) included."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p)]


_GetBuffer = ctypes.pythonapi.PyObject_GetBuffer
_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer),
                       ctypes.c_int]
_GetBuffer.restype = ctypes.c_int
_ReleaseBuffer = ctypes.pythonapi.PyBuffer_Release
_ReleaseBuffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_ReleaseBuffer.restype = None


class _Buffer(object):
    """with _Buffer(obj, n, writable, what) as ptr: the address of obj's
    n contiguous bytes, held (the exporter cannot resize or free them)
    for the length of the block. A wrong length, a non-contiguous or a
    read-only buffer where one is written raises ValueError or
    TypeError, before any byte moves."""

    def __init__(self, obj: Any, n: int, writable: bool, what: str) -> None:
        self._b = _PyBuffer()
        flags = 1 if writable else 0  # PyBUF_WRITABLE / PyBUF_SIMPLE
        try:
            _GetBuffer(obj, ctypes.byref(self._b), flags)
        except (BufferError, TypeError) as e:
            raise TypeError(
                "%s must be a contiguous%s buffer (bytes, bytearray, "
                "memoryview, array, numpy array), not %s: %s"
                % (what, " writable" if writable else "",
                   type(obj).__name__, e)) from None
        if self._b.len != n:
            _ReleaseBuffer(ctypes.byref(self._b))
            raise ValueError("%s is %d bytes, the slot is %d: pass a buffer "
                             "of exactly the slot's length"
                             % (what, self._b.len, n))

    def __enter__(self) -> int:
        return self._b.buf or 0

    def __exit__(self, et, ev, tb) -> bool:
        _ReleaseBuffer(ctypes.byref(self._b))
        return False


Slot = Tuple[SlotStatus, Optional[memoryview]]


class _Tx(object):
    """A transfer: slots is a list of (SlotStatus, memoryview or None)."""

    def __init__(self, client: "Client", readonly: bool) -> None:
        self._c = client
        self._x = _lib.Xfer()
        self._views: List[Tuple[memoryview, memoryview]] = []
        self._open = True
        self._filled = False
        self.slots: List[Slot] = []
        self._readonly = readonly
        # What the library said about a call that succeeded (retrieve:
        # the pin quota cut the prefix), else "".
        self.note = ""

    def _fill(self) -> None:
        self._filled = True
        for i in range(self._x.nslots):
            s = self._x.slots[i]
            st = SlotStatus(s.status) if 0 <= s.status <= 6 else s.status
            if s.status == SlotStatus.OK:
                base, view = _view(s.ptr, s.len, self._readonly)
                self._views.append((base, view))
                self.slots.append((st, view))
            else:
                self.slots.append((st, None))

    @property
    def id(self) -> int:
        """The server's transfer id (0: nothing to commit)."""
        return self._x.id

    @property
    def offsets(self) -> List[int]:
        """Each slot's offset in the pool (for GPU DMA registration)."""
        return [self._x.slots[i].off for i in range(self._x.nslots)]

    def __len__(self) -> int:
        return len(self.slots)

    def _slot_index(self, i: Any) -> int:
        if not self._open or not self._filled:
            raise ValueError("the transfer is %s: its slots cannot be "
                             "copied" % ("over" if not self._open
                                         else "not answered yet (reap it)"))
        if not self._x.nslots:
            raise ValueError("slot %r: the transfer has no slots" % (i,))
        return _uint("slot index", i, self._x.nslots - 1)

    def _ok_slot(self, i: Any) -> Tuple[int, int]:
        """(slot index, its length) of OK slot i, else ValueError."""
        i = self._slot_index(i)
        s = self._x.slots[i]
        if s.status != SlotStatus.OK:
            st = SlotStatus(s.status) if 0 <= s.status <= 6 else s.status
            raise ValueError("slot %d is %s, not OK: %s" % (
                i, getattr(st, "name", st),
                "it failed its checksum, do not use its bytes"
                if st == SlotStatus.CORRUPT else "there is nothing to copy"))
        return i, s.len

    def _copy_ptr(self, i: int, ptr: int, out: bool) -> int:
        """kvr_xfer_fill (out False) or kvr_retrieve_copy (out True) of
        OK slot i from/to the len(slot) bytes at ptr, which the caller
        holds; the library's return code (1: corrupt)."""
        lib = _lib_handle()
        fn = lib.kvr_retrieve_copy if out else lib.kvr_xfer_fill
        rc = fn(self._c._handle(), ctypes.byref(self._x), i, ptr)
        if rc < 0:
            _raise(rc, self._c._errmsg())
        return rc

    def _fill_or_copy(self, i: Any, buf: Any, out: bool) -> int:
        i, n = self._ok_slot(i)
        with _Buffer(buf, n, out, "dst" if out else "src") as ptr:
            return self._copy_ptr(i, ptr, out)

    def _release_views(self) -> None:
        # After this the views raise ValueError on use. A view that is
        # still exported (a numpy array or torch tensor over it is alive)
        # can't be released: its bytes belong to the pool again once the
        # transfer ends, so say so loudly instead of swallowing it.
        busy = []
        for i, (base, view) in enumerate(self._views):
            for v in (view, base):
                try:
                    v.release()
                except BufferError:
                    busy.append(i)
                    break
        self._views = []
        self.slots = [(st, None) for st, _ in self.slots]
        if busy:
            warnings.warn(
                "kvring: %d slot view(s) (slots %s) still exported when the "
                "transfer ended: a numpy/torch wrapper is alive, and the "
                "pool may reuse those bytes; drop wrappers before leaving "
                "the with-block" % (len(set(busy)), sorted(set(busy))),
                ResourceWarning, stacklevel=4)

    def _finish(self, fn: Any) -> None:
        if not self._open:
            return
        self._open = False
        self._release_views()
        try:
            handle = self._c._handle()
        except OSError:
            # The client is closed: the server already released what the
            # transfer held; only its local memory is left to free.
            _lib_handle().kvr_xfer_free(ctypes.byref(self._x))
            raise
        rc = fn(handle, ctypes.byref(self._x))
        if rc < 0:
            _raise(rc, self._c._errmsg())

    def __enter__(self):
        return self

    def __del__(self) -> None:
        # A transfer dropped without commit: free its memory only (the
        # server frees reservations and pins when the client closes).
        if getattr(self, "_open", False) and _LIB is not None:
            self._views = []
            _LIB.kvr_xfer_free(ctypes.byref(self._x))


class StoreTx(_Tx):
    """prepare_store's result. slots[i] = (SlotStatus, writable memoryview);
    write exactly len(view) bytes into each OK view, then commit() (the
    with-block does it, or abort() on an exception)."""

    def commit(self) -> None:
        self._finish(_lib_handle().kvr_commit_store)

    def abort(self) -> None:
        self._finish(_lib_handle().kvr_abort_store)

    def fill(self, i: int, src: Any) -> None:
        """Copy src into OK slot i: any object exporting exactly
        len(slot) contiguous bytes (bytes, bytearray, memoryview, array,
        numpy array). kvr_xfer_fill(): with checksums on, the XXH3-64
        is computed while copying, 128 KiB at a time, and commit() sends
        it without reading the slot again (one pass over memory instead
        of a copy and a hash). Do not write the slot after filling it:
        its sum is of the filled bytes, and every checking reader would
        find the chunk corrupt. Raises ValueError (slot not OK, wrong
        length) before any byte moves.

        >>> with client.store(keys, sizes) as tx:     # doctest: +SKIP
        ...     for i, (st, _) in enumerate(tx.slots):
        ...         if st == kvring.SlotStatus.OK:
        ...             tx.fill(i, chunk_bytes[i])
        """
        self._fill_or_copy(i, src, False)

    @property
    def stored(self) -> int:
        """How many keys need writing (SlotStatus.OK)."""
        return sum(1 for st, _ in self.slots if st == SlotStatus.OK)

    def __exit__(self, et, ev, tb) -> bool:
        if et is None:
            self.commit()
        else:
            try:
                self.abort()
            except KvringError:
                pass
        return False


class RetrieveTx(_Tx):
    """prepare_retrieve's result: slots for the longest stored prefix, as
    (SlotStatus.OK, readonly memoryview). Pinned until commit() (the end of
    the with-block); the views are released then and must not be used."""

    def commit(self) -> None:
        """Unpin; slots found CORRUPT are reported, and kvringd drops
        those chunks once it has checked their bytes itself."""
        self._finish(_lib_handle().kvr_commit_retrieve)

    def verify(self) -> int:
        """Check every OK slot against the XXH3-64 its storer sent
        (kvr_verify_retrieve; the client needs checksum='on' or
        'verify'). A slot that fails becomes (SlotStatus.CORRUPT, None):
        do not use its bytes. Returns how many slots are corrupt; calling
        it again gives the same answer. Under checksum='verify' the
        library already did it when the retrieve arrived.

        >>> tx = client.retrieve(keys)          # doctest: +SKIP
        >>> tx.verify(), tx.corrupt             # doctest: +SKIP
        (1, [2])
        """
        if not self._open:
            raise KvringError(_errno.EINVAL, "verify() after commit(): "
                              "the slots are no longer pinned")
        unchecked = ctypes.c_uint32(0)
        rc = _lib_handle().kvr_verify_retrieve(
            self._c._handle(), ctypes.byref(self._x), ctypes.byref(unchecked))
        if rc < 0:
            _raise(rc, self._c._errmsg())
        self.unchecked = unchecked.value
        for i in range(self._x.nslots):
            if self._x.slots[i].status == SlotStatus.CORRUPT:
                self.slots[i] = (SlotStatus.CORRUPT, None)
        return rc

    def copy_out(self, i: int, dst: Any) -> bool:
        """Copy OK slot i into dst (any object exporting exactly len(slot)
        writable contiguous bytes: bytearray, memoryview, array, numpy
        array). kvr_retrieve_copy(): under checksum='on' the slot's
        XXH3-64 is checked while copying, 128 KiB at a time (one pass
        instead of verify() and then a copy); under 'verify' it was
        checked on arrival. Returns True when dst holds the chunk (checked
        if it had a sum), False when the bytes failed their checksum: the
        slot becomes (SlotStatus.CORRUPT, None), dst must not be used,
        and commit() reports it. A slot already CORRUPT gives False again.
        Raises ValueError (slot not OK, wrong length) before copying."""
        i = self._slot_index(i)
        if self._x.slots[i].status == SlotStatus.CORRUPT:
            return False
        if self._fill_or_copy(i, dst, True) == 1:
            self.slots[i] = (SlotStatus.CORRUPT, None)
            return False
        return True

    @property
    def corrupt(self) -> List[int]:
        """Indices of the slots found corrupt (by verify(), or on arrival
        under checksum='verify')."""
        return [i for i, (st, _) in enumerate(self.slots)
                if st == SlotStatus.CORRUPT]

    #: slots verify() could not check: stored by a client without
    #: checksums (set by verify())
    unchecked: int = 0

    def __exit__(self, et, ev, tb) -> bool:
        try:
            self.commit()
        except KvringError:
            if et is None:
                raise
        return False


@dataclass
class Completion:
    """One reaped answer of an asynchronous request (struct
    kvr_completion). status is 0 or -errno; error is the KvringError it
    stands for (None on success); value is a lookup's hits, lease a
    pinning lookup's lease, tx the transfer of prepare/commit ops."""
    op: Op
    status: int
    user: Any = None
    value: int = 0
    lease: int = 0
    tx: Optional[_Tx] = None
    error: Optional[KvringError] = None
    #: a lookup(l2=True) answered at kvringd's L2 deadline with loads
    #: still in flight: ask again soon (vLLM's "ask again", docs/l2.md)
    l2_pending: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 0

    def check(self) -> "Completion":
        """Raise the completion's error, if any; return self."""
        if self.error is not None:
            raise self.error
        return self


class Client(object):
    """One connection to kvringd (one channel). Use as a context manager,
    or call close(), which is idempotent and safe after the server died.

    Attributes: transport ('shm', 'memfd' or 'copy'), channel, pool_bytes,
    pool_name, max_keys, attach_ms, server_pid, debug (one log line),
    checksum ('off', 'on' or 'verify': the mode in effect, from
    connect(checksum=...) or $KVRING_CHECKSUM), store_ahead (in effect,
    from connect(store_ahead=...) or $KVRING_STORE_AHEAD),
    chunk_bytes (one chunk of the registered layout: 2 x layers x
    chunk_tokens x kv_heads x head_size x dtype_bytes)."""

    def __init__(self, handle: int, chunk_bytes: int = 0) -> None:
        self._h: Optional[int] = handle
        self._pid = os.getpid()
        info = _lib_handle().kvr_client_info(handle).contents
        self.transport: str = _TRANSPORT_NAMES.get(info.transport, "?")
        self.channel: int = info.channel
        self.pool_bytes: int = info.pool_bytes
        self.pool_name: str = info.pool_name.decode()
        self.max_keys: int = info.max_keys
        self.attach_ms: float = info.attach_ns / 1e6
        self.server_pid: int = info.server_pid
        self.debug: str = info.debug.decode()
        self.checksum: str = _CHECKSUM_NAMES.get(info.checksum, "off")
        self.store_ahead: bool = bool(info.store_ahead)
        self.chunk_bytes: int = chunk_bytes
        self._async: Dict[int, Tuple[Any, Optional[_Tx]]] = {}
        self._tokens = itertools.count(1)
        self._async_lock = threading.Lock()

    # -- lifetime --
    def close(self) -> None:
        h, self._h = self._h, None
        if h:
            # kvr_close() in a forked child only drops the child's copies
            # (no BYE), so the parent's connection carries on.
            _lib_handle().kvr_close(h)

    @property
    def closed(self) -> bool:
        return self._h is None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, et, ev, tb) -> bool:
        self.close()
        return False

    def __del__(self) -> None:
        if getattr(self, "_h", None) and _LIB is not None:
            self.close()

    def _handle(self) -> int:
        if not self._h:
            raise KvringError(_errno.EBADF, "kvring client is closed")
        return self._h

    def _errmsg(self) -> str:
        if not self._h:
            return ""
        m = _lib_handle().kvr_client_errmsg(self._h)
        return m.decode(errors="replace") if m else ""

    def _check(self, rc: int) -> int:
        if rc < 0:
            _raise(rc, self._errmsg())
        return rc

    # -- keys --
    def keys(self, tokens: Any) -> Keys:
        """Keys of every full chunk of tokens (a sequence of ints in
        0..2**32-1, or any object exporting 32-bit unsigned ints through
        the buffer protocol, e.g. array.array('I') or a numpy uint32
        array). A trailing partial chunk gets no key."""
        try:
            mv = memoryview(tokens)
            if mv.format not in ("I", "=I", "<I") or mv.itemsize != 4:
                raise TypeError
            arr = (ctypes.c_uint32 * max(len(mv), 1)).from_buffer_copy(
                mv if len(mv) else b"\0\0\0\0")
        except TypeError:
            tokens = list(tokens)
            if tokens and (min(tokens) < 0 or max(tokens) > _U32):
                bad = next(t for t in tokens if not 0 <= t <= _U32)
                raise ValueError("token id %d is out of range: token ids "
                                 "are 0..4294967295" % bad) from None
            arr = (ctypes.c_uint32 * max(len(tokens), 1))(*tokens)
            n = len(tokens)
        else:
            n = len(mv)
        cap = max(n, 1)
        out = (_lib.Key * cap)()
        rc = _lib_handle().kvr_client_keys(
            self._handle(), ctypes.cast(arr, ctypes.POINTER(ctypes.c_uint32)),
            n, ctypes.cast(out, ctypes.POINTER(_lib.Key)), cap)
        self._check(rc)
        return Keys(out, rc)

    # -- operations --
    def lookup(self, keys: Any, pin: bool = False, l2: bool = False) -> Any:
        """Length of the longest stored prefix of keys; with pin=True,
        (hits, lease) where the lease pins that prefix (0: no hit).

        With l2=True kvringd also reads through its L2 tier (docs/l2.md)
        and the answer is (hits, lease, l2_pending): l2_pending True means
        the server's deadline passed with loads in flight, so asking
        again soon may find more (lease is 0 unless pin=True)."""
        k = Keys.from_list(keys)
        lease = ctypes.c_uint64(0)
        if l2:
            pending = ctypes.c_bool(False)
            rc = _lib_handle().kvr_lookup_l2(
                self._handle(), k._ptr(), len(k),
                ctypes.byref(lease) if pin else None, ctypes.byref(pending))
            self._check(rc)
            return (rc, lease.value, bool(pending.value))
        rc = _lib_handle().kvr_lookup(self._handle(), k._ptr(), len(k),
                                      ctypes.byref(lease) if pin else None)
        self._check(rc)
        return (rc, lease.value) if pin else rc

    def release(self, lease: int) -> None:
        """Drop a lease made by lookup(pin=True)."""
        lease = _uint("lease", lease, _U64)
        self._check(_lib_handle().kvr_release(self._handle(), lease))

    def _sizes(self, k: Keys, sizes: Any) -> Any:
        sizes = [_uint("size %d" % i, s, _U64) for i, s in enumerate(sizes)]
        if len(sizes) != len(k):
            raise ValueError("%d sizes for %d keys: give one size per key"
                             % (len(sizes), len(k)))
        return (ctypes.c_uint64 * max(len(sizes), 1))(*sizes)

    def store(self, keys: Any, sizes: Iterable[int]) -> StoreTx:
        """Reserve a slot per key not yet stored: a StoreTx whose slots
        are (SlotStatus, writable memoryview over the pool)."""
        k = Keys.from_list(keys)
        sz = self._sizes(k, sizes)
        tx = StoreTx(self, readonly=False)
        rc = _lib_handle().kvr_prepare_store(
            self._handle(), k._ptr(), ctypes.cast(sz, ctypes.POINTER(
                ctypes.c_uint64)), len(k), ctypes.byref(tx._x))
        self._check(rc)
        tx._fill()
        return tx

    def retrieve(self, keys: Any = None,
                 lease: Optional[int] = None) -> RetrieveTx:
        """Pin the longest stored prefix of keys (or what a lease holds,
        made by any connection of this uid): a RetrieveTx of readonly
        views. len(tx) is the prefix length."""
        tx = RetrieveTx(self, readonly=True)
        if lease is not None:
            rc = _lib_handle().kvr_prepare_retrieve_lease(
                self._handle(), _uint("lease", lease, _U64),
                ctypes.byref(tx._x))
        else:
            k = Keys.from_list(keys)
            rc = _lib_handle().kvr_prepare_retrieve(
                self._handle(), k._ptr(), len(k), ctypes.byref(tx._x))
        self._check(rc)
        tx._fill()
        # A success can carry a sentence: the pin quota cut the prefix
        # (fewer slots than a lookup reported, and why). Kept as tx.note
        # and warned once per call site, never silent.
        tx.note = self._errmsg()
        if tx.note:
            warnings.warn("kvring: " + tx.note, RuntimeWarning, stacklevel=2)
        return tx

    def ping(self) -> int:
        """Round trip; returns the server's CLOCK_MONOTONIC in ns."""
        ns = ctypes.c_uint64(0)
        self._check(_lib_handle().kvr_ping(self._handle(), ctypes.byref(ns)))
        return ns.value

    def stats(self) -> Dict[str, int]:
        """The server's counters as a dict."""
        st = _lib.StatsWire()
        self._check(_lib_handle().kvr_stats(self._handle(), ctypes.byref(st)))
        return {n: getattr(st, n) for n, _ in _lib.StatsWire._fields_}

    # -- asynchronous calls: submit several, then reap --
    #
    # Each submit_* queues one request and returns at once; reap() returns
    # Completion objects carrying the user value given at submit. A
    # submit raises KvringError(EAGAIN) when the request ring is full:
    # reap, then submit again. Transactions from submit_store /
    # submit_retrieve get their slots when their completion is reaped.

    def _submit(self, fn: Any, args: Tuple[Any, ...], user: Any,
                tx: Optional[_Tx]) -> None:
        with self._async_lock:
            token = next(self._tokens)
            self._async[token] = (user, tx)
        rc = fn(self._handle(), *args, ctypes.c_void_p(token))
        if rc < 0:
            with self._async_lock:
                del self._async[token]
            self._check(rc)

    def submit_lookup(self, keys: Any, pin: bool = False,
                      user: Any = None, l2: bool = False) -> None:
        """Queue a lookup; its completion's value is the hits, lease the
        lease when pin=True. l2=True reads through kvringd's L2 tier; the
        completion's l2_pending then says "ask again" (see lookup)."""
        k = Keys.from_list(keys)
        fn = (_lib_handle().kvr_submit_lookup_l2 if l2
              else _lib_handle().kvr_submit_lookup)
        self._submit(fn, (k._ptr(), len(k), bool(pin)), user, None)

    def submit_store(self, keys: Any, sizes: Iterable[int],
                     user: Any = None) -> StoreTx:
        """Queue a prepare_store; returns its StoreTx, whose slots are
        filled when the completion is reaped. Commit it with
        submit_commit() (or commit())."""
        k = Keys.from_list(keys)
        sz = self._sizes(k, sizes)
        tx = StoreTx(self, readonly=False)
        self._submit(_lib_handle().kvr_submit_prepare_store,
                     (k._ptr(), ctypes.cast(sz, ctypes.POINTER(
                         ctypes.c_uint64)), len(k), ctypes.byref(tx._x)),
                     user, tx)
        return tx

    def submit_retrieve(self, keys: Any, user: Any = None) -> RetrieveTx:
        """Queue a prepare_retrieve; slots are filled when reaped."""
        k = Keys.from_list(keys)
        tx = RetrieveTx(self, readonly=True)
        self._submit(_lib_handle().kvr_submit_prepare_retrieve,
                     (k._ptr(), len(k), ctypes.byref(tx._x)), user, tx)
        return tx

    def submit_commit(self, tx: _Tx, user: Any = None) -> None:
        """Queue the commit of a reaped store or retrieve transfer."""
        self._submit_finish(tx, "kvr_submit_commit_store"
                            if isinstance(tx, StoreTx)
                            else "kvr_submit_commit_retrieve", user)

    def submit_abort(self, tx: StoreTx, user: Any = None) -> None:
        """Queue the abort of a reaped store transfer."""
        if not isinstance(tx, StoreTx):
            raise TypeError("only a store transfer can be aborted")
        self._submit_finish(tx, "kvr_submit_abort_store", user)

    def _submit_finish(self, tx: _Tx, name: str, user: Any) -> None:
        if not tx._filled:
            raise ValueError("reap the transfer's prepare completion before "
                             "committing it")
        if not tx._open:
            raise ValueError("the transfer was already committed or aborted")
        tx._release_views()
        tx._open = False
        self._submit(getattr(_lib_handle(), name), (ctypes.byref(tx._x),),
                     user, tx)

    def submit_ping(self, user: Any = None) -> None:
        """Queue a round trip with no effect."""
        self._submit(_lib_handle().kvr_submit_ping, (), user, None)

    def submit_hold(self) -> None:
        """Write the next submit_* requests into the ring without making
        them visible to kvringd, until submit_flush(): a batch is then
        published with one release store and at most one doorbell
        (kvr_submit_hold). reap() and every synchronous call publish what
        is held too, so a hold never makes a caller wait for itself."""
        self._check(_lib_handle().kvr_submit_hold(self._handle()))

    def submit_flush(self) -> None:
        """Publish every held request and end the hold (harmless without
        one)."""
        self._check(_lib_handle().kvr_submit_flush(self._handle()))

    @contextlib.contextmanager
    def held(self) -> Iterator["Client"]:
        """with client.held(): submit several ... -- published at once
        when the block ends, on an exception too (they were submitted and
        their completions still come from reap())."""
        self.submit_hold()
        try:
            yield self
        finally:
            self.submit_flush()

    @property
    def inflight(self) -> int:
        """Requests submitted and not yet reaped."""
        return _lib_handle().kvr_inflight(self._handle())

    def reap(self, min_wait: int = 1, max: int = 64,
             timeout_ms: int = -1) -> List[Completion]:
        """Collect up to max completions, waiting until min_wait are in
        (capped at what is in flight) or timeout_ms passes (0: don't wait,
        -1: the client's timeout). A failed request is a Completion whose
        error is set, not an exception; a broken connection raises once
        every pending request has been reaped."""
        max = _uint("max", max, 1 << 16, 1)
        min_wait = _uint("min_wait", min_wait, max)
        if timeout_ms != -1:
            timeout_ms = _uint("timeout_ms", timeout_ms, (1 << 31) - 1)
        out = (_lib.Completion * max)()
        rc = _lib_handle().kvr_reap(self._handle(), out, max, min_wait,
                                    timeout_ms)
        if rc == -_errno.ETIMEDOUT:
            return []
        self._check(rc)
        res = []
        for i in range(rc):
            e = out[i]
            with self._async_lock:
                user, tx = self._async.pop(e.user or 0, (None, None))
            op = Op(e.op) if e.op in Op._value2member_map_ else e.op
            err = None
            if e.status < 0:
                code = -e.status
                err = KvringError(code, "%s failed: %s (%s)" % (
                    getattr(op, "name", op), os.strerror(code),
                    _errno.errorcode.get(code, code)))
            if tx is not None and op in (Op.PREPARE_STORE,
                                         Op.PREPARE_RETRIEVE):
                if e.status == 0:
                    tx._fill()
                else:
                    tx._open = False
            res.append(Completion(op=op, status=e.status, user=user,
                                  value=e.value, lease=e.handle, tx=tx,
                                  error=err,
                                  l2_pending=bool(e.flags & 1)))
        return res

    def __repr__(self) -> str:
        return "<kvring.Client %s>" % (self.debug if self._h else "closed")


def connect(socket: Optional[str] = None, model: Optional[str] = None,
            layers: Optional[int] = None, kv_heads: Optional[int] = None,
            head_size: Optional[int] = None,
            dtype_bytes: Optional[int] = None, tp_rank: int = 0,
            tp_size: int = 1, chunk_tokens: int = 256,
            transport: Optional[str] = None, timeout_ms: int = 0,
            spin_us: int = 0, connect_wait_ms: int = 0,
            prefault_background: bool = False,
            trust_server_uid: Optional[int] = None,
            checksum: Optional[str] = None,
            store_ahead: Optional[bool] = None) -> Client:
    """Connect to kvringd and register the model layout (the key
    namespace). socket: path, default $KVRING_SOCKET or the per-uid
    default. transport: None/'auto' or 'copy' ($KVRING_TRANSPORT=copy
    forces copy). timeout_ms bounds every blocking call (0: 5000).
    connect_wait_ms: wait up to this long for kvringd to appear (socket
    missing or refusing), so a worker started beside the service does not
    race it (0: $KVRING_CONNECT_WAIT_MS, else no wait).
    prefault_background: pre-fault the pool in a background thread and
    return at once (docs/config.md).
    trust_server_uid: also accept a kvringd running as this uid (by
    default only this process's uid and root; $KVRING_SERVER_UID does the
    same).
    checksum: per-chunk XXH3-64 checksums (docs/reliability.md): 'off',
    'on' (sum every stored chunk; RetrieveTx.verify() checks a retrieve)
    or 'verify' (also check every retrieve on arrival: a chunk that fails
    is SlotStatus.CORRUPT). None: $KVRING_CHECKSUM, else 'off'.
    store_ahead: one round trip per one-key store (docs/storage.md,
    "Store-ahead"; ring transport only): True or False, None:
    $KVRING_STORE_AHEAD, else off. Client.store_ahead says whether it is
    in effect.
    Integers out of range raise ValueError before reaching the library.
    Returns a Client."""
    for name, v in (("model", model), ("layers", layers),
                    ("kv_heads", kv_heads), ("head_size", head_size),
                    ("dtype_bytes", dtype_bytes)):
        if v is None:
            raise TypeError("connect() needs %s" % name)
    layers = _uint("layers", layers, lo=1)
    kv_heads = _uint("kv_heads", kv_heads, lo=1)
    head_size = _uint("head_size", head_size, lo=1)
    dtype_bytes = _uint("dtype_bytes", dtype_bytes, 4, 1)
    if dtype_bytes == 3:
        raise ValueError("dtype_bytes is 3: it must be 1, 2 or 4")
    tp_size = _uint("tp_size", tp_size, lo=1)
    tp_rank = _uint("tp_rank", tp_rank, tp_size - 1)
    chunk_tokens = _uint("chunk_tokens", chunk_tokens, lo=1)
    timeout_ms = _uint("timeout_ms", timeout_ms)
    spin_us = _uint("spin_us", spin_us)
    connect_wait_ms = _uint("connect_wait_ms", connect_wait_ms)
    lib = _lib_handle()
    o = _lib.ClientOpts()
    if socket:
        sock_b = os.fsencode(socket)
        o.socket_path = sock_b
    m = model.encode() if isinstance(model, str) else bytes(model)
    if not 0 < len(m) < 64:
        raise ValueError("model name is %d bytes: it must be 1..63"
                         % len(m))
    o.ns.model = m
    o.ns.layers, o.ns.kv_heads, o.ns.head_size = layers, kv_heads, head_size
    o.ns.dtype_bytes, o.ns.tp_rank, o.ns.tp_size = dtype_bytes, tp_rank, \
        tp_size
    o.ns.chunk_tokens = chunk_tokens
    if transport in (None, "auto", "shm"):
        o.transport = 0
    elif transport == "copy":
        o.transport = Transport.COPY
    else:
        raise ValueError("transport is %r: it must be None, 'auto' or "
                         "'copy'" % (transport,))
    o.timeout_ms, o.spin_us = timeout_ms, spin_us
    o.connect_wait_ms = connect_wait_ms
    o.prefault_background = bool(prefault_background)
    if trust_server_uid is not None:
        if not 0 < int(trust_server_uid) < 2**32:
            raise ValueError("trust_server_uid must be a uid above 0")
        o.trust_server_uid = int(trust_server_uid)
    if checksum is not None:
        if checksum not in _CHECKSUM_MODES:
            raise ValueError("checksum is %r: it must be None, 'off', 'on' "
                             "or 'verify'" % (checksum,))
        o.checksum = _CHECKSUM_MODES[checksum]
    if store_ahead is not None:
        if not isinstance(store_ahead, bool):
            raise ValueError("store_ahead is %r: it must be None, True or "
                             "False" % (store_ahead,))
        o.store_ahead = 2 if store_ahead else 1  # KVR_STORE_AHEAD_ON/OFF
    h = ctypes.c_void_p()
    err = ctypes.create_string_buffer(512)
    rc = lib.kvr_connect_sized(ctypes.byref(o), ctypes.sizeof(o),
                               ctypes.byref(h), err, len(err))
    if rc < 0:
        _raise(rc, err.value.decode(errors="replace"))
    return Client(h.value,
                  2 * layers * chunk_tokens * kv_heads * head_size
                  * dtype_bytes)
