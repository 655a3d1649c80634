# SPDX-License-Identifier: MIT
"""ctypes declarations of libkvring (worker/include/kvring/kvring.h).

This module owns finding and loading libkvring.so and the ctypes mirrors of
the public structs; it has no behaviour of its own (kvring/__init__.py
builds the Python API on top). The struct layouts must match kvring.h and
proto.h exactly; test_binding.py checks their sizes against the library's
expectations indirectly by round-tripping real data.
"""

import ctypes
import ctypes.util
import glob
import os

c_u8 = ctypes.c_uint8
c_u32 = ctypes.c_uint32
c_u64 = ctypes.c_uint64


class NsDesc(ctypes.Structure):
    """struct kvr_ns_desc (96 bytes): the model layout = key namespace."""
    _fields_ = [
        ("model", ctypes.c_char * 64),
        ("layers", c_u32),
        ("kv_heads", c_u32),
        ("head_size", c_u32),
        ("dtype_bytes", c_u32),
        ("tp_rank", c_u32),
        ("tp_size", c_u32),
        ("chunk_tokens", c_u32),
        ("reserved", c_u32),
    ]


class ClientOpts(ctypes.Structure):
    """struct kvr_client_opts."""
    _fields_ = [
        ("socket_path", ctypes.c_char_p),
        ("ns", NsDesc),
        ("transport", ctypes.c_int),
        ("spin_us", c_u32),
        ("timeout_ms", c_u32),
        ("no_prefault", ctypes.c_bool),
        # Additions (v0.2); passed with kvr_connect_sized(sizeof), so a
        # library that predates a field reads it as 0.
        ("connect_wait_ms", c_u32),
        ("prefault_background", ctypes.c_bool),
        ("trust_server_uid", c_u32),
        # v0.3: per-chunk checksums (KVR_CHECKSUM_*; 0: $KVRING_CHECKSUM).
        ("checksum", c_u32),
        # store-ahead (KVR_STORE_AHEAD_*; 0: $KVRING_STORE_AHEAD).
        ("store_ahead", c_u32),
    ]


class ClientInfo(ctypes.Structure):
    """struct kvr_client_info."""
    _fields_ = [
        ("transport", c_u32),
        ("channel", c_u32),
        ("pool_bytes", c_u64),
        ("align", c_u32),
        ("max_keys", c_u32),
        ("boot_id", c_u8 * 16),
        ("pool_name", ctypes.c_char * 64),
        ("attach_ns", c_u64),
        ("server_pid", ctypes.c_int32),
        ("heartbeat_ms", c_u32),
        ("prefault_ns", c_u64),
        ("debug", ctypes.c_char * 256),
        ("checksum", c_u32),  # v0.3: KVR_CHECKSUM_* in effect
        ("store_ahead", ctypes.c_bool),  # store-ahead in effect
    ]


class Key(ctypes.Structure):
    """struct kvr_key: 128 bits as two little-endian halves."""
    _fields_ = [("lo", c_u64), ("hi", c_u64)]


class Slot(ctypes.Structure):
    """struct kvr_slot."""
    _fields_ = [
        ("ptr", ctypes.c_void_p),
        ("len", c_u64),
        ("off", c_u64),
        ("status", ctypes.c_int),
    ]


class Xfer(ctypes.Structure):
    """struct kvr_xfer."""
    _fields_ = [
        ("id", c_u64),
        ("nslots", c_u32),
        ("op", c_u32),
        ("slots", ctypes.POINTER(Slot)),
        ("priv", ctypes.c_void_p),
    ]


class Completion(ctypes.Structure):
    """struct kvr_completion."""
    _fields_ = [
        ("user", ctypes.c_void_p),
        ("op", c_u32),
        ("status", ctypes.c_int),
        ("value", ctypes.c_long),
        ("handle", c_u64),
        ("xfer", ctypes.POINTER(Xfer)),
        ("flags", c_u32),  # KVR_COMPLETION_* (L2_PENDING = 1)
    ]


class KvCache(ctypes.Structure):
    """struct kvr_kv_cache (<kvring/kv.h>)."""
    _fields_ = [
        ("layers", c_u32),
        ("nkv", c_u32),
        ("heads", c_u32),
        ("head_bytes", c_u32),
        ("elem_bytes", c_u32),
        ("block_size", c_u32),
        ("num_blocks", c_u32),
        ("chunk_tokens", c_u32),
        ("block_stride", c_u64),
        ("token_stride", c_u64),
        ("head_stride", c_u64),
        ("layer_bytes", c_u64),
        ("base", ctypes.POINTER(ctypes.c_void_p)),
    ]


class StatsWire(ctypes.Structure):
    """struct kvr_stats_wire."""
    _fields_ = [(n, c_u64) for n in (
        "pool_bytes", "used_bytes", "reserved_bytes", "objects", "pins",
        "leases", "evictions", "workers", "chan_reserved_bytes",
        "chan_pins", "chan_leases", "chan_transfers")]


def need_torch(module):
    """Import and return torch for `module` (kvring.torch, kvring.kv, ...).

    The package itself is standard library only; the modules built on
    torch call this at their top instead of a bare `import torch`, so a
    venv or interpreter without PyTorch gets an ImportError that names
    the module, the interpreter and what to install."""
    try:
        import torch
    except ImportError as e:
        import sys
        raise ImportError(
            "%s needs PyTorch, which %s cannot import (%s): install it "
            "with 'pip install torch' (or 'pip install kvring[torch]') in "
            "this environment, or use Debian's python3-torch from the "
            "system python3 or a venv made with "
            "'python3 -m venv --system-site-packages'; the plain kvring "
            "module works without it" % (module, sys.executable, e),
            name="torch") from e
    return torch


def _candidates():
    env = os.environ.get("KVRING_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(glob.glob(os.path.join(here, "libkvring.so*"))):
        yield name
    # Installed by cmake --install: the library installed with this package.
    try:
        from . import _install
        yield os.path.normpath(os.path.join(here, _install.LIBDIR,
                                            _install.SONAME))
    except ImportError:
        pass
    # A source checkout: <repo>/worker/python/kvring -> <repo>/build*/...
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    for name in sorted(glob.glob(os.path.join(repo, "build*", "worker",
                                              "libkvring.so"))):
        yield name
    for name in sorted(glob.glob(os.path.join(os.path.dirname(repo),
                                              "build*", "worker",
                                              "libkvring.so"))):
        yield name
    found = ctypes.util.find_library("kvring")
    if found:
        yield found
    yield "libkvring.so.0"


def load():
    """Load libkvring: $KVRING_LIB, next to this module, a build directory
    of this checkout, then the system's library path."""
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            continue
        _declare(lib)
        lib.kvring_path = path
        return lib
    raise OSError("libkvring.so not found (set KVRING_LIB); tried: "
                  + "; ".join(errors))


def _declare(lib):
    P = ctypes.POINTER
    vp = ctypes.c_void_p
    sig = {
        "kvr_connect_sized": (ctypes.c_int, [P(ClientOpts), ctypes.c_size_t,
                                             P(vp), ctypes.c_char_p,
                                             ctypes.c_size_t]),
        "kvr_version": (ctypes.c_char_p, []),
        "kvr_close": (None, [vp]),
        "kvr_client_info": (P(ClientInfo), [vp]),
        "kvr_client_errmsg": (ctypes.c_char_p, [vp]),
        "kvr_client_keys": (ctypes.c_long, [vp, P(c_u32), ctypes.c_size_t,
                                            P(Key), ctypes.c_size_t]),
        "kvr_lookup": (ctypes.c_long, [vp, P(Key), c_u32, P(c_u64)]),
        "kvr_lookup_l2": (ctypes.c_long, [vp, P(Key), c_u32, P(c_u64),
                                          P(ctypes.c_bool)]),
        "kvr_release": (ctypes.c_int, [vp, c_u64]),
        "kvr_prepare_store": (ctypes.c_int, [vp, P(Key), P(c_u64), c_u32,
                                             P(Xfer)]),
        "kvr_commit_store": (ctypes.c_int, [vp, P(Xfer)]),
        "kvr_abort_store": (ctypes.c_int, [vp, P(Xfer)]),
        "kvr_prepare_retrieve": (ctypes.c_int, [vp, P(Key), c_u32, P(Xfer)]),
        "kvr_prepare_retrieve_lease": (ctypes.c_int, [vp, c_u64, P(Xfer)]),
        "kvr_commit_retrieve": (ctypes.c_int, [vp, P(Xfer)]),
        "kvr_verify_retrieve": (ctypes.c_long, [vp, P(Xfer), P(c_u32)]),
        "kvr_xfer_free": (None, [P(Xfer)]),
        # Copies that sum while they copy (checksums at copy speed).
        "kvr_xfer_fill": (ctypes.c_int, [vp, P(Xfer), c_u32, vp]),
        "kvr_retrieve_copy": (ctypes.c_int, [vp, P(Xfer), c_u32, vp]),
        "kvr_ping": (ctypes.c_int, [vp, P(c_u64)]),
        "kvr_stats": (ctypes.c_int, [vp, P(StatsWire)]),
        "kvr_default_socket": (ctypes.c_int, [ctypes.c_char_p,
                                              ctypes.c_size_t]),
        # Asynchronous calls (kvring.h, "submit several, then reap").
        "kvr_submit_lookup": (ctypes.c_int, [vp, P(Key), c_u32,
                                             ctypes.c_bool, vp]),
        "kvr_submit_lookup_l2": (ctypes.c_int, [vp, P(Key), c_u32,
                                                ctypes.c_bool, vp]),
        "kvr_submit_prepare_store": (ctypes.c_int, [vp, P(Key), P(c_u64),
                                                    c_u32, P(Xfer), vp]),
        "kvr_submit_commit_store": (ctypes.c_int, [vp, P(Xfer), vp]),
        "kvr_submit_abort_store": (ctypes.c_int, [vp, P(Xfer), vp]),
        "kvr_submit_prepare_retrieve": (ctypes.c_int, [vp, P(Key), c_u32,
                                                       P(Xfer), vp]),
        "kvr_submit_commit_retrieve": (ctypes.c_int, [vp, P(Xfer), vp]),
        "kvr_submit_ping": (ctypes.c_int, [vp, vp]),
        "kvr_reap": (ctypes.c_int, [vp, P(Completion), ctypes.c_uint,
                                    ctypes.c_uint, ctypes.c_int]),
        "kvr_inflight": (ctypes.c_uint, [vp]),
        "kvr_submit_hold": (ctypes.c_int, [vp]),
        "kvr_submit_flush": (ctypes.c_int, [vp]),
        # Paged-KV gather/scatter (<kvring/kv.h>).
        "kvr_kv_chunk_bytes": (c_u64, [P(KvCache)]),
        "kvr_kv_check": (ctypes.c_int, [P(KvCache), ctypes.c_char_p,
                                        ctypes.c_size_t]),
        "kvr_kv_gather": (ctypes.c_int, [P(KvCache), P(c_u32),
                                         ctypes.c_size_t, P(vp),
                                         ctypes.c_size_t, c_u64,
                                         ctypes.c_char_p, ctypes.c_size_t]),
        "kvr_kv_scatter": (ctypes.c_int, [P(KvCache), P(c_u32),
                                          ctypes.c_size_t, P(vp),
                                          ctypes.c_size_t, c_u64,
                                          ctypes.c_size_t, ctypes.c_char_p,
                                          ctypes.c_size_t]),
        # The same into / out of a transfer's slots, summed while copying.
        "kvr_kv_gather_xfer": (ctypes.c_int, [vp, P(KvCache), P(c_u32),
                                              ctypes.c_size_t, P(Xfer),
                                              P(c_u32), ctypes.c_size_t,
                                              ctypes.c_char_p,
                                              ctypes.c_size_t]),
        "kvr_kv_scatter_xfer": (ctypes.c_long, [vp, P(KvCache), P(c_u32),
                                                ctypes.c_size_t, P(Xfer),
                                                P(c_u32), ctypes.c_size_t,
                                                ctypes.c_size_t,
                                                ctypes.c_char_p,
                                                ctypes.c_size_t]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
