# SPDX-License-Identifier: MIT
"""kvring.device: the lines of kvring that know about device runtimes.

A KV cache on a device (CUDA, ROCm's CUDA API, XPU, ...) reaches the pool
through torch: kvring.kv.StagedCopies gathers a chunk on the device into
a staging tensor and copies it into its slot view in one transfer, and
loads the reverse way. Everything that differs between a CUDA device and
any other lives here, so that the rest of that path is plain torch and
runs unchanged in CI on CPU tensors standing in for a device:

- CopyStream: where the copies run. On CUDA a dedicated stream, ordered
  after the compute stream's work, with an event per batch of copies that
  the compute stream or the host can wait for. Elsewhere (the CPU, and
  devices without a stream API kvring uses) copies run in order on the
  caller's thread and every event is complete when it is recorded.
- PoolRegistration, register_pool(): the pool mapping registered for DMA
  (cudaHostRegister, in pieces of at most 64 GiB, from a background
  thread after the pool's pre-fault), so that device copies into slots
  run at the link's speed. A failure is one warning and copies stay
  correct, only slower (pageable memory). libkvring maps a pool once per
  process, whatever the number of clients; register_pool() registers
  that mapping once too, and unregisters it when its last user closes.

Nothing here touches torch.cuda unless a cache is on a CUDA device: a
torch build without CUDA imports and runs all of kvring.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Iterator, List, Optional

from kvring import _lib as _kvr_lib

torch = _kvr_lib.need_torch("kvring.device")

log = logging.getLogger("kvring.device")

__all__ = ["CopyStream", "PoolRegistration", "register_pool",
           "DMA_PIECE_BYTES"]

# cudaHostRegister takes at most this much in one call on some drivers.
DMA_PIECE_BYTES = 64 << 30


class CopyStream(object):
    """The stream device copies run on, and events to wait for them."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._s = torch.cuda.Stream(device) if self.cuda else None

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        """Issue copies inside this block: on CUDA they go to the copy
        stream, after everything the compute stream issued so far (the
        KV a layer just wrote)."""
        if not self.cuda:
            yield
            return
        self._s.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self._s):
            yield

    @property
    def non_blocking(self) -> bool:
        return self.cuda

    def record(self) -> Any:
        """An event that completes when the copies issued so far do
        (None: they have)."""
        if not self.cuda:
            return None
        ev = torch.cuda.Event()
        ev.record(self._s)
        return ev

    def compute_waits(self, ev: Any) -> None:
        """The compute stream waits for ev before its next kernel (a
        layer's attention reads the blocks a load just wrote); the host
        does not block."""
        if ev is not None:
            torch.cuda.current_stream(self.device).wait_event(ev)

    def host_waits(self, ev: Any) -> None:
        """Block until ev completed (before a commit publishes slots the
        copies wrote, or unpins slots they read)."""
        if ev is not None:
            ev.synchronize()


class PoolRegistration(object):
    """The pool mapping [base, base + nbytes) registered for DMA with the
    CUDA runtime, from a background thread that first waits for the
    pool's pre-fault (wait_prefault, a callable). close() waits for the
    thread and unregisters. On any device but CUDA it does nothing."""

    def __init__(self, device: torch.device, base: int, nbytes: int,
                 wait_prefault: Any = None) -> None:
        self.base, self.nbytes = base, nbytes
        self.registered = False
        self._pieces: List[int] = []
        self._thread: Optional[threading.Thread] = None
        if device.type != "cuda" or not base or not nbytes:
            return
        self._thread = threading.Thread(
            target=self._register, args=(wait_prefault,),
            name="kvring-dma-register", daemon=True)
        self._thread.start()

    def _register(self, wait_prefault: Any) -> None:
        try:
            if wait_prefault is not None:
                wait_prefault()
            rt = torch.cuda.cudart()
            off = 0
            while off < self.nbytes:
                n = min(DMA_PIECE_BYTES, self.nbytes - off)
                rc = rt.cudaHostRegister(self.base + off, n, 0)
                if int(rc) != 0:
                    raise RuntimeError("cudaHostRegister(%#x, %d) returned "
                                       "%s" % (self.base + off, n, rc))
                self._pieces.append(self.base + off)
                off += n
            self.registered = True
            log.info("kvring: pool mapping registered for DMA (%d bytes, "
                     "%d piece%s)", self.nbytes, len(self._pieces),
                     "" if len(self._pieces) == 1 else "s")
        except Exception as e:
            log.warning("kvring: the pool mapping could not be registered "
                        "for DMA (%s); device copies stay correct but run "
                        "at pageable-memory speed", e)
            self._unregister()

    def _unregister(self) -> None:
        pieces, self._pieces = self._pieces, []
        self.registered = False
        if not pieces:
            return
        rt = torch.cuda.cudart()
        for p in pieces:
            rt.cudaHostUnregister(p)

    def close(self) -> None:
        """Wait for the registering thread and unregister. Harmless twice.
        Device copies into the pool must have completed."""
        t, self._thread = self._thread, None
        if t is not None:
            t.join()
        self._unregister()


def slot_base(tx: Any) -> int:
    """The pool mapping's base address, from a transfer's first slot:
    its address less its offset in the pool (0 when unknown)."""
    try:
        offs = tx.offsets
        for i in range(tx._x.nslots):
            s = tx._x.slots[i]
            if s.ptr and i < len(offs):
                return int(s.ptr) - int(offs[i])
    except Exception:
        pass
    return 0


class SharedRegistration(object):
    """One user's hold on the process's registration of a pool mapping
    (register_pool()). close() lets go; the registration is undone when
    the last holder closes. Harmless twice."""

    def __init__(self, base: int, reg: PoolRegistration) -> None:
        self.base = base
        self.reg = reg
        self._closed = False

    @property
    def registered(self) -> bool:
        return self.reg.registered

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _regs_lock:
            ent = _regs.get(self.base)
            if ent is None or ent[0] is not self.reg:
                return
            ent[1] -= 1
            if ent[1] > 0:
                return
            del _regs[self.base]
        self.reg.close()


_regs: dict = {}  # mapping base -> [PoolRegistration, holders]
_regs_lock = threading.Lock()


def register_pool(device: torch.device, base: int, nbytes: int,
                  wait_prefault: Any = None) -> SharedRegistration:
    """The process's one DMA registration of the pool mapping at base:
    made by the first caller (PoolRegistration, in the background), held
    by every later one. Close what it returns when done."""
    with _regs_lock:
        ent = _regs.get(base)
        if ent is None or ent[0].nbytes != nbytes:
            ent = _regs[base] = [PoolRegistration(device, base, nbytes,
                                                  wait_prefault), 0]
        ent[1] += 1
        return SharedRegistration(base, ent[0])
