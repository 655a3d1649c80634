# SPDX-License-Identifier: MIT
"""kvring: store and retrieve KV-cache chunks in a kvringd cache server.

A thin ctypes binding over libkvring (no third-party dependency). Slots are
memoryviews straight over the shared pool, so numpy.frombuffer() or
torch.frombuffer() wrap them without a copy::

    import kvring
    with kvring.connect(model="meta-llama/Meta-Llama-3-8B", layers=32,
                        kv_heads=8, head_size=128, dtype_bytes=2) as c:
        keys = c.keys(token_ids)                # one key per full chunk
        with c.store(keys, [chunk_bytes] * len(keys)) as tx:
            for (status, view), data in zip(tx.slots, chunks):
                if status == kvring.SLOT_OK:
                    view[:] = data              # writes into the pool
        # leaving the block commits (an exception aborts instead)
        with c.retrieve(keys) as tx:            # the longest stored prefix
            for status, view in tx.slots:
                use(view)                       # readonly, no copy
        # leaving the block unpins: the views are released and must not
        # be used afterwards

This module owns the Python-facing API; it does not own the protocol or
the waiting rules (libkvring does). A Client may be shared by threads: the
library serialises calls with a mutex (docs/worker-guide.md).
"""

import ctypes
import errno as _errno
import os

from . import _lib

__all__ = ["connect", "Client", "KvringError", "Keys", "default_socket",
           "SLOT_OK", "SLOT_EXISTS", "SLOT_NOROOM", "SLOT_BUSY",
           "SLOT_INVALID", "TRANSPORT_SHM", "TRANSPORT_MEMFD",
           "TRANSPORT_COPY"]

SLOT_OK, SLOT_EXISTS, SLOT_NOROOM, SLOT_BUSY, SLOT_INVALID = range(5)
TRANSPORT_SHM, TRANSPORT_MEMFD, TRANSPORT_COPY = 1, 2, 3
_TRANSPORT_NAMES = {TRANSPORT_SHM: "shm", TRANSPORT_MEMFD: "memfd",
                    TRANSPORT_COPY: "copy"}
_OP_PREPARE_STORE, _OP_PREPARE_RETRIEVE = 3, 6

_LIB = None


def _lib_handle():
    global _LIB
    if _LIB is None:
        _LIB = _lib.load()
    return _LIB


class KvringError(OSError):
    """A libkvring call failed: .errno is the (positive) errno, the message
    is the library's sentence (kvr_client_errmsg)."""


def _raise(rc, msg):
    code = -rc if rc < 0 else rc
    text = msg or os.strerror(code)
    raise KvringError(code, "%s (%s)" % (text, _errno.errorcode.get(code,
                                                                     code)))


def default_socket():
    """The default socket path for this uid (kvr_default_socket)."""
    buf = ctypes.create_string_buffer(128)
    rc = _lib_handle().kvr_default_socket(buf, len(buf))
    if rc < 0:
        _raise(rc, "default socket path")
    return buf.value.decode()


class Keys(object):
    """An immutable sequence of 128-bit chunk keys (kept as a C array, so
    passing it back to the library costs nothing). Items are (lo, hi)
    tuples; slicing gives Keys."""

    def __init__(self, arr, n=None):
        self._arr = arr
        self._n = len(arr) if n is None else n

    @classmethod
    def from_list(cls, items):
        """Keys from (lo, hi) tuples, 16-byte bytes objects or Keys."""
        if isinstance(items, Keys):
            return items
        items = list(items)
        arr = (_lib.Key * max(len(items), 1))()
        for i, k in enumerate(items):
            if isinstance(k, (bytes, bytearray)):
                if len(k) != 16:
                    raise ValueError("a key is 16 bytes")
                lo = int.from_bytes(k[:8], "little")
                hi = int.from_bytes(k[8:], "little")
            else:
                lo, hi = k
            arr[i].lo, arr[i].hi = lo, hi
        return cls(arr, len(items))

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Keys.from_list([self[j] for j in range(*i.indices(
                self._n))])
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return (self._arr[i].lo, self._arr[i].hi)

    def to_bytes(self, i):
        lo, hi = self[i]
        return lo.to_bytes(8, "little") + hi.to_bytes(8, "little")

    def __repr__(self):
        return "Keys(%d)" % self._n

    def _ptr(self):
        return ctypes.cast(self._arr, ctypes.POINTER(_lib.Key))


def _view(ptr, n, readonly):
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


class _Tx(object):
    """A transfer: slots is a list of (status, memoryview or None)."""

    def __init__(self, client, readonly):
        self._c = client
        self._x = _lib.Xfer()
        self._views = []
        self._open = True
        self.slots = []
        self._readonly = readonly

    def _fill(self):
        for i in range(self._x.nslots):
            s = self._x.slots[i]
            if s.status == SLOT_OK:
                base, view = _view(s.ptr, s.len, self._readonly)
                self._views.append((base, view))
                self.slots.append((s.status, view))
            else:
                self.slots.append((s.status, None))

    @property
    def id(self):
        return self._x.id

    def __len__(self):
        return len(self.slots)

    def _release_views(self):
        # After this the views raise ValueError on use. A view still
        # exported (wrapped by numpy/torch) can't be released: the caller
        # must drop those wrappers first (docs/worker-guide.md).
        for base, view in self._views:
            for v in (view, base):
                try:
                    v.release()
                except BufferError:
                    pass
        self._views = []
        self.slots = [(st, None) for st, _ in self.slots]

    def _finish(self, fn):
        if not self._open:
            return
        self._open = False
        self._release_views()
        try:
            handle = self._c._handle()
        except OSError:
            # The client is closed: the server already released what the
            # transfer held; only its local memory is left to free.
            _LIB.kvr_xfer_free(ctypes.byref(self._x))
            raise
        rc = fn(handle, ctypes.byref(self._x))
        if rc < 0:
            _raise(rc, self._c._errmsg())

    def __enter__(self):
        return self

    def __del__(self):
        # A transfer dropped without commit: free its memory only (the
        # server frees reservations and pins when the client closes).
        if getattr(self, "_open", False) and _LIB is not None:
            self._release_views()
            _LIB.kvr_xfer_free(ctypes.byref(self._x))


class StoreTx(_Tx):
    """prepare_store's result. slots[i] = (status, writable memoryview);
    write exactly len(view) bytes into each SLOT_OK view, then commit()
    (the with-block does it, or abort() on an exception)."""

    def commit(self):
        self._finish(_lib_handle().kvr_commit_store)

    def abort(self):
        self._finish(_lib_handle().kvr_abort_store)

    @property
    def stored(self):
        """How many keys need writing (SLOT_OK)."""
        return sum(1 for st, _ in self.slots if st == SLOT_OK)

    def __exit__(self, et, ev, tb):
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
    (SLOT_OK, readonly memoryview). Pinned until commit() (the end of the
    with-block); the views are released then and must not be used."""

    def commit(self):
        self._finish(_lib_handle().kvr_commit_retrieve)

    def __exit__(self, et, ev, tb):
        try:
            self.commit()
        except KvringError:
            if et is None:
                raise
        return False


class Client(object):
    """One connection to kvringd (one channel). Use as a context manager,
    or call close(), which is idempotent and safe after the server died."""

    def __init__(self, handle):
        self._h = handle
        self._pid = os.getpid()
        info = _lib_handle().kvr_client_info(handle).contents
        self.transport = _TRANSPORT_NAMES.get(info.transport, "?")
        self.channel = info.channel
        self.pool_bytes = info.pool_bytes
        self.pool_name = info.pool_name.decode()
        self.max_keys = info.max_keys
        self.attach_ms = info.attach_ns / 1e6
        self.server_pid = info.server_pid
        self.debug = info.debug.decode()

    # -- lifetime --
    def close(self):
        h, self._h = self._h, None
        if h:
            # kvr_close() in a forked child only drops the child's copies
            # (no BYE), so the parent's connection carries on.
            _lib_handle().kvr_close(h)

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_h", None) and _LIB is not None:
            self.close()

    def _handle(self):
        if not self._h:
            raise KvringError(_errno.EBADF, "kvring client is closed")
        return self._h

    def _errmsg(self):
        if not self._h:
            return ""
        m = _lib_handle().kvr_client_errmsg(self._h)
        return m.decode(errors="replace") if m else ""

    def _check(self, rc):
        if rc < 0:
            _raise(rc, self._errmsg())
        return rc

    # -- keys --
    def keys(self, tokens):
        """Keys of every full chunk of tokens (a sequence of ints, or any
        object exporting 32-bit unsigned ints through the buffer protocol,
        e.g. array.array('I'))."""
        try:
            mv = memoryview(tokens)
            if mv.format not in ("I", "=I", "<I") or mv.itemsize != 4:
                raise TypeError
            arr = (ctypes.c_uint32 * len(mv)).from_buffer_copy(mv)
        except TypeError:
            tokens = list(tokens)
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
    def lookup(self, keys, pin=False):
        """Length of the longest stored prefix of keys; with pin=True,
        (hits, lease) where the lease pins that prefix (0: no hit)."""
        k = Keys.from_list(keys)
        lease = ctypes.c_uint64(0)
        rc = _lib_handle().kvr_lookup(self._handle(), k._ptr(), len(k),
                                      ctypes.byref(lease) if pin else None)
        self._check(rc)
        return (rc, lease.value) if pin else rc

    def release(self, lease):
        """Drop a lease made by lookup(pin=True)."""
        self._check(_lib_handle().kvr_release(self._handle(), lease))

    def store(self, keys, sizes):
        """Reserve a slot per key not yet stored: a StoreTx whose slots
        are (status, writable memoryview over the pool)."""
        k = Keys.from_list(keys)
        sizes = list(sizes)
        if len(sizes) != len(k):
            raise ValueError("one size per key")
        sz = (ctypes.c_uint64 * max(len(sizes), 1))(*sizes)
        tx = StoreTx(self, readonly=False)
        rc = _lib_handle().kvr_prepare_store(
            self._handle(), k._ptr(), ctypes.cast(sz, ctypes.POINTER(
                ctypes.c_uint64)), len(k), ctypes.byref(tx._x))
        self._check(rc)
        tx._fill()
        return tx

    def retrieve(self, keys=None, lease=None):
        """Pin the longest stored prefix of keys (or what a lease holds,
        made by any connection of this uid): a RetrieveTx of readonly
        views. len(tx) is the prefix length."""
        tx = RetrieveTx(self, readonly=True)
        if lease is not None:
            rc = _lib_handle().kvr_prepare_retrieve_lease(
                self._handle(), lease, ctypes.byref(tx._x))
        else:
            k = Keys.from_list(keys)
            rc = _lib_handle().kvr_prepare_retrieve(
                self._handle(), k._ptr(), len(k), ctypes.byref(tx._x))
        self._check(rc)
        tx._fill()
        return tx

    def ping(self):
        """Round trip; returns the server's CLOCK_MONOTONIC in ns."""
        ns = ctypes.c_uint64(0)
        self._check(_lib_handle().kvr_ping(self._handle(), ctypes.byref(ns)))
        return ns.value

    def stats(self):
        """The server's counters as a dict."""
        st = _lib.StatsWire()
        self._check(_lib_handle().kvr_stats(self._handle(), ctypes.byref(st)))
        return {n: getattr(st, n) for n, _ in _lib.StatsWire._fields_}

    def __repr__(self):
        return "<kvring.Client %s>" % (self.debug if self._h else "closed")


def connect(socket=None, model=None, layers=None, kv_heads=None,
            head_size=None, dtype_bytes=None, tp_rank=0, tp_size=1,
            chunk_tokens=256, transport=None, timeout_ms=0, spin_us=0):
    """Connect to kvringd and register the model layout (the key
    namespace). socket: path, default $KVRING_SOCKET or the per-uid
    default. transport: None/'auto' or 'copy' ($KVRING_TRANSPORT=copy
    forces copy). Returns a Client."""
    for name, v in (("model", model), ("layers", layers),
                    ("kv_heads", kv_heads), ("head_size", head_size),
                    ("dtype_bytes", dtype_bytes)):
        if v is None:
            raise TypeError("connect() needs %s" % name)
    lib = _lib_handle()
    o = _lib.ClientOpts()
    if socket:
        sock_b = os.fsencode(socket)
        o.socket_path = sock_b
    m = model.encode() if isinstance(model, str) else bytes(model)
    if not 0 < len(m) < 64:
        raise ValueError("model name must be 1..63 bytes")
    o.ns.model = m
    o.ns.layers, o.ns.kv_heads, o.ns.head_size = layers, kv_heads, head_size
    o.ns.dtype_bytes, o.ns.tp_rank, o.ns.tp_size = dtype_bytes, tp_rank, \
        tp_size
    o.ns.chunk_tokens = chunk_tokens
    if transport in (None, "auto", "shm"):
        o.transport = 0
    elif transport == "copy":
        o.transport = TRANSPORT_COPY
    else:
        raise ValueError("transport must be None, 'auto' or 'copy'")
    o.timeout_ms, o.spin_us = timeout_ms, spin_us
    h = ctypes.c_void_p()
    err = ctypes.create_string_buffer(512)
    rc = lib.kvr_connect(ctypes.byref(o), ctypes.byref(h), err, len(err))
    if rc < 0:
        _raise(rc, err.value.decode(errors="replace"))
    return Client(h.value)
