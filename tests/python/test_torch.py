#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tests of kvring.torch (layouts, tensor views, the four-call context),
kvring.kv (paged-KV gather/scatter from torch) and kvring.vllm (the vLLM
connector, driven by tests/python/engine.py through the stand-in vllm
package in tests/python/vllm/) against real kvringd processes.

One process runs everything, so torch is imported once:
    KVRING_LIB=<build>/worker/libkvring.so KVRINGD=<build>/server/kvringd \\
        /usr/bin/python3 tests/python/test_torch.py
"""

import contextlib
import gc
import os
import signal
import sys
import time
import unittest
from unittest import mock
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the stand-in vllm package, engine.py

from test_binding import REPO, Server, ServerTestCase  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "worker", "python"))

import torch  # noqa: E402

import kvring  # noqa: E402
from kvring.kv import PagedKV  # noqa: E402
from kvring.torch import ChunkLayout, KvringContext  # noqa: E402

import engine  # noqa: E402

torch.set_num_threads(1)
LAYOUT = ChunkLayout(layers=2, kv_heads=2, head_size=64, dtype="fp16",
                     chunk_tokens=16)


def toks(r, n):
    return [(r * 7919 + j * 104729) % 50000 for j in range(n)]


def flip_in_child(case, sock, layout, model, keys, chunk):
    """A second process, connected without checksums in @model's namespace,
    finds chunk @chunk's slot, lets go of it, and flips one byte of it in
    the pool behind the server's back (the pool is shared memory)."""
    import ctypes
    import multiprocessing

    def child(q):
        try:
            with layout.connect(model, socket=sock, checksum="off") as c:
                with c.retrieve(keys) as tx:
                    ptr = tx._x.slots[chunk].ptr
                b = ctypes.c_char.from_address(ptr + 256)
                b.value = bytes([b.value[0] ^ 0x10])
            q.put("ok")
        except Exception as e:  # reported, not swallowed
            q.put(repr(e))

    mp = multiprocessing.get_context("fork")
    q = mp.Queue()
    p = mp.Process(target=child, args=(q,))
    p.start()
    res = q.get(timeout=30)
    p.join(30)
    case.assertEqual(res, "ok")


def _layout_of(spec):
    from kvring.vllm import _layout
    return _layout(spec.vllm_config(), spec.chunk_tokens)


def store_then_retrieve(ctx, seed, value):
    """One chunk, toks(seed, 16), stored through ctx filled with value and
    prepared for retrieve: (its tokens, the retrieve's views)."""
    t = toks(seed, 16)
    with ctx.storing(t) as views:
        views[0].fill_(value)
    return t, ctx.prepare_retrieve(t)


def wait_lookup(case, ctx, key, want):
    """Wait up to 5 s for kvringd to find want chunks of key (a chunk that
    failed its re-check at a commit is dropped soon after), then assert
    that it does."""
    deadline = time.time() + 5
    while ctx.client.lookup(ctx.keys(key)) != want and \
            time.time() < deadline:
        time.sleep(0.01)
    case.assertEqual(ctx.client.lookup(ctx.keys(key)), want)


class ServerCase(ServerTestCase):
    pool = "64M"

    def ctx(self, layout=LAYOUT, model="torch-test", **kw):
        return KvringContext(layout, model=model, socket=self.srv.sock, **kw)


class LayoutTest(unittest.TestCase):
    def test_shape_is_lmcache_format_when_kv_or_mla(self):
        lt = ChunkLayout(layers=32, kv_heads=8, head_size=128, dtype="bf16",
                         chunk_tokens=256)
        self.assertEqual(lt.shape, (2, 32, 256, 1024))
        self.assertEqual(lt.chunk_bytes, 2 * 32 * 256 * 1024 * 2)
        self.assertEqual(lt.torch_dtype, torch.bfloat16)
        mla = ChunkLayout(layers=4, kv_heads=1, head_size=576, dtype="fp8",
                          chunk_tokens=64, mla=True)
        self.assertEqual(mla.shape, (4, 64, 576))
        self.assertEqual(mla.torch_dtype, torch.uint8)  # raw fp8 bytes
        self.assertEqual(mla.chunk_bytes, 4 * 64 * 576)

    def test_layout_raises_when_values_are_bad(self):
        with self.assertRaises(ValueError):
            ChunkLayout(layers=-1, kv_heads=8, head_size=128)
        with self.assertRaises(ValueError):
            ChunkLayout(layers=2, kv_heads=8, head_size=128, dtype="int4")
        with self.assertRaises(ValueError):
            ChunkLayout(layers=2, kv_heads=8, head_size=128, mla=True)


# Every member of vLLM's KVConnectorBase_V1 as read from the real
# vllm/distributed/kv_transfer/kv_connector/v1/base.py (docs/tensors.md
# names the commit): the stand-in must keep them all.
REAL_BASE_MEMBERS = {
    "prefer_cross_layer_blocks", "supports_eagle_prefix_cache_hashing",
    "requires_kv_delivery", "__init__", "set_eagle_prefix_cache_hashing",
    "role", "bind_connector_metadata", "clear_connector_metadata",
    "_get_connector_metadata", "has_connector_metadata",
    "register_kv_caches", "register_cross_layers_kv_cache",
    "set_host_xfer_buffer_ops", "handle_preemptions", "start_load_kv",
    "wait_for_layer_load", "save_kv_layer", "wait_for_save", "get_finished",
    "get_block_ids_with_load_errors", "shutdown", "get_kv_connector_stats",
    "get_kv_connector_kv_cache_events", "get_handshake_metadata",
    "build_connector_worker_meta", "bind_gpu_block_pool",
    "get_num_new_matched_tokens", "update_state_after_alloc",
    "build_connector_meta", "on_new_request", "update_connector_output",
    "request_finished", "take_events", "has_pending_push_work",
    "get_required_kvcache_layout", "requires_piecewise_for_cudagraph",
    "get_finished_count", "build_kv_connector_stats",
    "set_xfer_handshake_metadata", "set_xfer_handshake_metadata_pp_aware",
    "build_prom_metrics", "reset_cache",
}


def _members(cls):
    return {n for n in vars(cls) if n != "_abc_impl" and
            (not n.startswith("__") or n == "__init__")}


class StandInTest(unittest.TestCase):
    """The connector against the stand-in's copy of vLLM's base class."""

    def test_stand_in_has_every_member_of_the_real_base_class(self):
        from vllm.distributed.kv_transfer.kv_connector.v1.base import \
            KVConnectorBase_V1
        self.assertEqual(_members(KVConnectorBase_V1), REAL_BASE_MEMBERS)

    def test_connector_overrides_match_the_base_signatures(self):
        # Same parameter names and kinds, and every default the base
        # declares kept (an override may add defaults: vLLM calls it the
        # base's way). A property stays a property, a classmethod a
        # classmethod.
        import inspect
        from vllm.distributed.kv_transfer.kv_connector.v1.base import \
            KVConnectorBase_V1
        from kvring.vllm import KvringConnector
        checked = 0
        for name in sorted(_members(KvringConnector) &
                           _members(KVConnectorBase_V1)):
            mine = inspect.getattr_static(KvringConnector, name)
            base = inspect.getattr_static(KVConnectorBase_V1, name)
            self.assertIs(type(mine), type(base), name)
            if isinstance(base, property):
                checked += 1
                continue
            fm = mine.__func__ if isinstance(mine, classmethod) else mine
            fb = base.__func__ if isinstance(base, classmethod) else base
            pm = list(inspect.signature(fm).parameters.values())
            pb = list(inspect.signature(fb).parameters.values())
            self.assertEqual([(p.name, p.kind) for p in pm],
                             [(p.name, p.kind) for p in pb], name)
            for a, b in zip(pm, pb):
                if b.default is not inspect.Parameter.empty:
                    self.assertEqual(a.default, b.default,
                                     "%s(%s)" % (name, a.name))
            checked += 1
        self.assertGreaterEqual(checked, 14)
        self.assertEqual(KvringConnector.__abstractmethods__, frozenset())


class DeviceTest(unittest.TestCase):
    """kvring.device without a device: what can be checked here."""

    def fake_cudart(self, fail_at=None):
        calls = []

        class Rt(object):
            def cudaHostRegister(self, ptr, n, flags):
                calls.append(("reg", ptr, n))
                return 1 if len(calls) == fail_at else 0

            def cudaHostUnregister(self, ptr):
                calls.append(("unreg", ptr))
                return 0
        return Rt(), calls

    def test_pool_is_registered_in_pieces_and_unregistered_on_close(self):
        from unittest import mock
        from kvring.device import DMA_PIECE_BYTES, PoolRegistration
        rt, calls = self.fake_cudart()
        base, n = 1 << 40, 2 * DMA_PIECE_BYTES + 4096
        waited = []
        with mock.patch.object(torch.cuda, "cudart", lambda: rt):
            r = PoolRegistration(torch.device("cuda"), base, n,
                                 lambda: waited.append(1))
            r._thread.join()
            self.assertTrue(r.registered)
            self.assertEqual(waited, [1])  # after the pre-fault
            self.assertEqual(calls, [
                ("reg", base, DMA_PIECE_BYTES),
                ("reg", base + DMA_PIECE_BYTES, DMA_PIECE_BYTES),
                ("reg", base + 2 * DMA_PIECE_BYTES, 4096)])
            r.close()
            r.close()
        self.assertEqual(calls[3:], [("unreg", base),
                                     ("unreg", base + DMA_PIECE_BYTES),
                                     ("unreg", base + 2 * DMA_PIECE_BYTES)])

    def test_failed_registration_is_one_warning_and_undone(self):
        from unittest import mock
        from kvring.device import DMA_PIECE_BYTES, PoolRegistration
        rt, calls = self.fake_cudart(fail_at=2)
        base = 1 << 40
        with mock.patch.object(torch.cuda, "cudart", lambda: rt), \
                self.assertLogs("kvring.device", "WARNING") as logs:
            r = PoolRegistration(torch.device("cuda"), base,
                                 3 * DMA_PIECE_BYTES)
            r._thread.join()
            r.close()
        self.assertFalse(r.registered)
        self.assertEqual(len(logs.output), 1)
        self.assertIn("stay correct", logs.output[0])
        self.assertEqual(calls[-1], ("unreg", base))

    def test_one_registration_per_pool_mapping_in_a_process(self):
        # Every client of a process shares one mapping of the pool
        # (libkvring); so every connector shares one registration of it.
        from unittest import mock
        from kvring.device import register_pool
        rt, calls = self.fake_cudart()
        base = 1 << 41
        with mock.patch.object(torch.cuda, "cudart", lambda: rt):
            a = register_pool(torch.device("cuda"), base, 1 << 30)
            b = register_pool(torch.device("cuda"), base, 1 << 30)
            self.assertIs(a.reg, b.reg)
            a.reg._thread.join()
            self.assertEqual(calls, [("reg", base, 1 << 30)])
            a.close()
            a.close()
            self.assertEqual(len(calls), 1, "unregistered while b holds it")
            b.close()
            self.assertEqual(calls[1:], [("unreg", base)])
            c = register_pool(torch.device("cuda"), base, 1 << 30)
            c.reg._thread.join()
            c.close()
        self.assertEqual(len(calls), 4)

    def test_cpu_needs_no_cuda(self):
        from kvring.device import CopyStream, PoolRegistration
        s = CopyStream(torch.device("cpu"))
        with s.run():
            ev = s.record()
        self.assertIsNone(ev)
        s.host_waits(ev)
        s.compute_waits(ev)
        PoolRegistration(torch.device("cpu"), 1 << 40, 1 << 30).close()


class ContextTest(ServerCase):
    """The seed's four-call contract over a real kvringd."""

    def test_store_then_retrieve_gives_same_tensors_when_views_filled(self):
        with self.ctx() as ctx:
            t = toks(1, 40)  # 2 full chunks and a partial one
            views = ctx.prepare_store(t, 7)
            self.assertIsInstance(views, list)
            self.assertEqual(views.indices, [0, 1])
            self.assertEqual(views[0].shape, LAYOUT.shape)
            self.assertEqual(views[0].dtype, torch.float16)
            data = [torch.randn(LAYOUT.shape).half() for _ in views]
            for v, d in zip(views, data):
                v.copy_(d)  # writes straight into the pool
            self.assertTrue(ctx.commit_store(t, 7, views))
            got = ctx.prepare_retrieve(t, 7)
            self.assertEqual(len(got), 2)
            for v, d in zip(got, data):
                self.assertTrue(torch.equal(v, d))
            self.assertTrue(ctx.commit_retrieve(t, 7))

    def test_retrieve_views_stop_at_a_chunk_that_fails_its_checksum(self):
        # Checksums through the torch layer: checksum="verify"
        # checks every retrieve; a neighbour's write into chunk 1 cuts
        # the usable prefix there, and the chunk is dropped on commit.
        import ctypes
        with self.ctx(checksum="verify") as ctx:
            t = toks(60, 48)  # 3 chunks
            with ctx.storing(t) as views:
                for i, v in enumerate(views):
                    v.fill_(i + 1)
            with ctx.client.retrieve(ctx.keys(t)) as tx:
                ptr = tx._x.slots[1].ptr
            b = ctypes.c_char.from_address(ptr + 64)
            b.value = bytes([b.value[0] ^ 0x01])  # behind the server's back
            got = ctx.prepare_retrieve(t)
            self.assertEqual(len(got), 1)
            self.assertEqual(got.indices, [0])
            self.assertTrue(torch.equal(got[0], torch.full(LAYOUT.shape, 1,
                                                           dtype=torch.half)))
            del got
            self.assertTrue(ctx.commit_retrieve(t))
            self.assertEqual(ctx.client.lookup(ctx.keys(t)), 1)

    def flip_in_child(self, keys, chunk):
        flip_in_child(self, self.srv.sock, LAYOUT, "torch-test", keys, chunk)

    def test_verify_retrieve_cuts_the_views_when_checksum_is_on(self):
        # 'on' sums every store and verifies when asked, as in C: the
        # views are handed out unchecked, verify_retrieve() checks them
        # and cuts the list at the first corrupt chunk, in place.
        with self.ctx(checksum="on") as ctx:
            self.assertEqual(ctx.client.checksum, "on")
            t = toks(61, 48)  # 3 chunks
            with ctx.storing(t) as views:
                for i, v in enumerate(views):
                    v.fill_(i + 1)
            self.flip_in_child(list(ctx.keys(t)), 1)
            got = ctx.prepare_retrieve(t)
            self.assertEqual(len(got), 3)  # not checked yet
            cut = got[2]
            self.assertEqual(ctx.verify_retrieve(t), 1)
            self.assertEqual(len(got), 1)
            self.assertEqual(got.indices, [0])
            self.assertEqual(cut.numel(), 0, "a cut view must be emptied")
            self.assertTrue(torch.equal(got[0], torch.full(LAYOUT.shape, 1,
                                                           dtype=torch.half)))
            self.assertEqual(ctx.verify_retrieve(chunks=got), 1)  # again
            del got, cut
            self.assertTrue(ctx.commit_retrieve(t))
            # Reported at commit: kvringd re-checked and dropped chunk 1.
            wait_lookup(self, ctx, t, 1)
            # A clean retrieve: nothing cut.
            with ctx.storing(t) as views:
                for v in views:
                    v.fill_(7)
            got = ctx.prepare_retrieve(t)
            self.assertEqual(ctx.verify_retrieve(t), 0)
            self.assertEqual(len(got), 3)
            del got
            self.assertTrue(ctx.commit_retrieve(t))
            with self.assertRaises(ValueError):
                ctx.verify_retrieve(t)  # nothing prepared

    def test_verify_retrieve_raises_when_checksums_are_off(self):
        with self.ctx(checksum="off") as ctx:
            self.assertEqual(ctx.client.checksum, "off")
            t, got = store_then_retrieve(ctx, 62, 1)
            with self.assertRaises(kvring.KvringError) as cm:
                ctx.verify_retrieve(t)
            self.assertIn("no checksums", str(cm.exception))
            self.assertEqual(len(got), 1)
            del got
            self.assertTrue(ctx.commit_retrieve(t))

    def test_retrieve_views_stop_when_a_second_process_flipped_a_byte(self):
        # 'verify' mode, the byte flipped by another process, by lease.
        with self.ctx(checksum="verify") as ctx:
            self.assertEqual(ctx.client.checksum, "verify")
            t = toks(63, 48)
            with ctx.storing(t) as views:
                for i, v in enumerate(views):
                    v.fill_(i + 1)
            self.flip_in_child(list(ctx.keys(t)), 2)
            hits, lease = ctx.client.lookup(ctx.keys(t), pin=True)
            self.assertEqual(hits, 3)
            got = ctx.prepare_retrieve(None, lease=lease)
            self.assertEqual(got.indices, [0, 1])
            self.assertEqual(ctx.verify_retrieve(None, lease=lease), 1)
            self.assertEqual(len(got), 2)
            del got
            self.assertTrue(ctx.commit_retrieve(None, lease=lease))

    def test_prepare_store_returns_empty_when_everything_is_stored(self):
        with self.ctx() as ctx:
            t = toks(2, 32)
            with ctx.storing(t) as views:
                for v in views:
                    v.fill_(1)
            again = ctx.prepare_store(t)
            self.assertEqual(again, [])          # a success, nothing to do
            self.assertTrue(ctx.commit_store(t, 0, again))

    def test_views_work_when_transport_is_copy(self):
        # No shared pool: the views are the library's private buffers,
        # sent at commit (store) or filled by the answer (retrieve). The
        # same calls and return values as over shared memory, and the
        # bytes are the same whichever transport stored or retrieved.
        data = [torch.randn(LAYOUT.shape).half() for _ in range(3)]
        with self.ctx(transport="copy") as cp, self.ctx() as sh:
            self.assertEqual(cp.client.transport, "copy")
            t = toks(3, 48)
            views = cp.prepare_store(t, 1)
            self.assertEqual(views.indices, [0, 1, 2])
            for v, d in zip(views, data):
                v.copy_(d)
            self.assertTrue(cp.commit_store(t, 1, views))
            self.assertEqual(cp.prepare_store(t), [])  # stored: a success
            got = sh.prepare_retrieve(t)
            self.assertEqual(len(got), 3)
            for v, d in zip(got, data):
                self.assertTrue(torch.equal(v, d))
            del got
            self.assertTrue(sh.commit_retrieve(t))
            got = cp.prepare_retrieve(t)
            for v, d in zip(got, data):
                self.assertTrue(torch.equal(v, d))
            del got
            self.assertTrue(cp.commit_retrieve(t))
            # Stored over shared memory, redeemed by lease over copy.
            t2 = toks(30, 32)
            self.assertEqual(sh.store_chunks(t2, data[:2]), 2)
            hits, lease = sh.client.lookup(sh.keys(t2), pin=True)
            out = torch.zeros((2,) + LAYOUT.shape, dtype=torch.half)
            self.assertEqual(cp.retrieve_chunks(None, out, lease=lease), 2)
            self.assertTrue(torch.equal(out[1], data[1]))
            self.assertEqual(cp.client.stats()["chan_pins"], 0)

    def test_fill_sums_while_copying_when_checksum_is_on(self):
        # ChunkViews.fill() is kvr_xfer_fill(): the sum is taken as the
        # chunk is copied in and the commit sends it without reading the
        # slot again. A write into the view after its fill (the misuse
        # the docstring warns of) therefore makes the chunk fail every
        # check; with v.copy_() plus the commit's own hash it would pass.
        data = [torch.randn(LAYOUT.shape).half() for _ in range(2)]
        for transport in (None, "copy"):
            with self.ctx(checksum="on", transport=transport) as ctx:
                t = toks(70 if transport else 71, 32)
                views = ctx.prepare_store(t)
                views.fill(0, data[0])
                views.fill(1, data[1].view(-1))  # any shape of the size
                views[1][0, 0, 0] += 1  # after the fill: a stale sum
                self.assertTrue(ctx.commit_store(t, 0, views))
                got = ctx.prepare_retrieve(t)
                self.assertEqual(ctx.verify_retrieve(t), 1, transport)
                self.assertEqual(got.indices, [0])
                self.assertTrue(torch.equal(got[0], data[0]))
                del got
                self.assertTrue(ctx.commit_retrieve(t))

    def test_retrieve_chunks_stop_at_a_byte_another_process_flipped(self):
        # retrieve_chunks() copies with kvr_retrieve_copy(): under 'on'
        # each chunk is checked while it is copied out, so the byte a
        # second process flipped in chunk 1 ends the copy there, without
        # a separate verify pass, and kvringd drops the chunk.
        data = torch.randn((3,) + LAYOUT.shape).half()
        with self.ctx(checksum="on") as ctx:
            t = toks(72, 48)
            self.assertEqual(ctx.store_chunks(t, data), 3)
            self.assertEqual(ctx.store_chunks(t, data), 0)  # all stored
            self.flip_in_child(list(ctx.keys(t)), 1)
            out = torch.zeros_like(data)
            self.assertEqual(ctx.retrieve_chunks(t, out), 1)
            self.assertTrue(torch.equal(out[0], data[0]))
            self.assertEqual(ctx.client.stats()["chan_pins"], 0)
            wait_lookup(self, ctx, t, 1)
            # The four-call form: copy_to() cuts the views as verify does.
            self.assertEqual(ctx.store_chunks(t, data), 1)  # chunk 1 anew
            self.flip_in_child(list(ctx.keys(t)), 2)
            views = ctx.prepare_retrieve(t)
            self.assertTrue(views.copy_to(0, out[0]))
            self.assertTrue(views.copy_to(1, out[1]))
            self.assertFalse(views.copy_to(2, out[2]))
            self.assertEqual(views.indices, [0, 1])
            self.assertTrue(torch.equal(out[1], data[1]))
            del views
            self.assertTrue(ctx.commit_retrieve(t))

    def test_chunk_copies_raise_and_store_nothing_when_tensors_are_bad(self):
        with self.ctx(checksum="on") as ctx:
            t = toks(73, 32)
            good = torch.zeros((2,) + LAYOUT.shape, dtype=torch.half)
            for bad, what in (
                    (good.float(), "torch.float32"),
                    (good[:1], "holds 1 chunks"),
                    ([good[0], good[1].transpose(1, 2)], "non-contiguous"),
                    ([good[0], good[1][:, :, :8]],
                     "contiguous torch.float16 tensor"),
                    ("nope", "must be a list")):
                with self.assertRaisesRegex(ValueError, what):
                    ctx.store_chunks(t, bad)
                self.assertEqual(ctx.client.lookup(ctx.keys(t)), 0)
            self.assertEqual(ctx.client.stats()["chan_reserved_bytes"], 0)
            views = ctx.prepare_store(t)
            with self.assertRaisesRegex(ValueError, "view index 2"):
                views.fill(2, good[0])
            views.fill(0, good[0])
            views.fill(1, good[1])
            self.assertTrue(ctx.commit_store(t, 0, views))
            with self.assertRaisesRegex(ValueError, "transfer is over"):
                views.fill(0, good[0])
            got = ctx.prepare_retrieve(t)
            with self.assertRaisesRegex(ValueError, "retrieve's views"):
                got.fill(0, good[0])
            with self.assertRaisesRegex(ValueError,
                                        "contiguous torch.float16 tensor"):
                got.copy_to(0, torch.zeros(3, dtype=torch.half))
            del got
            self.assertTrue(ctx.commit_retrieve(t))

    def test_store_is_aborted_when_with_block_raises(self):
        with self.ctx() as ctx:
            t = toks(4, 32)
            with self.assertRaises(RuntimeError):
                with ctx.storing(t) as views:
                    views[0].fill_(3)
                    raise RuntimeError("engine failed mid-store")
            self.assertEqual(ctx.client.lookup(ctx.keys(t)), 0)
            self.assertEqual(ctx.prepare_retrieve(t), [])

    def test_view_raises_when_used_after_its_transfer_ended(self):
        with self.ctx() as ctx:
            t = toks(5, 16)
            views = ctx.prepare_store(t)
            v = views[0]
            v.fill_(2)
            ctx.commit_store(t, 0, views)
            # Emptied in place: no silent read of pool memory.
            self.assertEqual(v.numel(), 0)
            with self.assertRaises((RuntimeError, IndexError)):
                v.view(LAYOUT.shape)
            with self.assertRaises(IndexError):
                v[0, 0, 0, 0].item()
            got = ctx.prepare_retrieve(t)
            r = got[0]
            self.assertEqual(float(r[0, 0, 0, 0]), 2.0)
            ctx.commit_retrieve(t)
            self.assertEqual(r.numel(), 0)

    def test_pin_is_kept_when_a_derived_view_outlives_the_retrieve(self):
        with self.ctx() as ctx:
            t, got = store_then_retrieve(ctx, 6, 5)
            derived = got[0][1]        # a view of the V half
            pins = ctx.client.stats()["chan_pins"]
            self.assertGreater(pins, 0)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                self.assertTrue(ctx.commit_retrieve(t))
            self.assertTrue(any(issubclass(x.category, ResourceWarning)
                                for x in w), [str(x.message) for x in w])
            # The derived view still reads the pinned chunk...
            self.assertEqual(float(derived[0, 0, 0]), 5.0)
            self.assertEqual(ctx.client.stats()["chan_pins"], pins)
            del derived
            gc.collect()
            ctx.prepare_store(toks(7, 0))  # any call flushes deferred unpins
            self.assertEqual(ctx.client.stats()["chan_pins"], pins - 1)

    def test_commit_warns_when_a_retrieve_view_was_written(self):
        with self.ctx() as ctx:
            t, got = store_then_retrieve(ctx, 8, 1)
            got[0][0, 0, 0, 0] = 9  # contract violation: detected
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                ctx.commit_retrieve(t)
            self.assertTrue(any("written in place" in str(x.message)
                                for x in w))

    def test_clients_of_one_process_share_one_pool_mapping(self):
        # The second connect maps and pre-faults nothing: it joins the
        # first client's mapping, so slots have one address in the
        # process (and one DMA registration covers them).
        with self.ctx() as a, self.ctx() as b:
            self.assertIn(", shared", b.client.debug)
            t = toks(170, 16)
            views = a.prepare_store(t)
            pa = views[0].data_ptr()
            views[0].fill_(3)
            self.assertTrue(a.commit_store(t, 0, views))
            got = b.prepare_retrieve(t)
            self.assertEqual(got[0].data_ptr(), pa)
            self.assertTrue(bool((got[0] == 3).all()))
            b.commit_retrieve(t)

    def test_salt_separates_tenants_when_tokens_are_equal(self):
        with self.ctx() as ctx:
            t = toks(9, 32)
            with ctx.storing(t, salt="tenant-a") as views:
                for v in views:
                    v.fill_(4)
            self.assertEqual(ctx.prepare_retrieve(t, salt="tenant-b"), [])
            self.assertEqual(ctx.prepare_retrieve(t), [])
            got = ctx.prepare_retrieve(t, salt="tenant-a")
            self.assertEqual(len(got), 2)
            ctx.commit_retrieve(t, salt="tenant-a")

    def test_close_is_harmless_when_called_twice_or_server_dead(self):
        ctx = self.ctx()
        views = ctx.prepare_store(toks(10, 16))
        self.assertEqual(len(views), 1)
        ctx.close()
        ctx.close()
        self.assertIsNone(ctx.prepare_store(toks(10, 16)))
        # Closing aborted the pending store: nothing was published.
        with self.ctx() as c2:
            self.assertEqual(c2.client.lookup(c2.keys(toks(10, 16))), 0)

    def test_dtypes_get_separate_keys_when_sizes_are_equal(self):
        bf = ChunkLayout(layers=2, kv_heads=2, head_size=64, dtype="bf16",
                         chunk_tokens=16)
        with self.ctx() as a, self.ctx(layout=bf) as b:
            t = toks(11, 16)
            with a.storing(t) as views:
                views[0].fill_(1)
            self.assertEqual(b.prepare_retrieve(t), [])


class PagedSumTest(ServerCase):
    """PagedKV.gather/scatter straight into and out of a transfer's slots
    (kvr_kv_gather_xfer / kvr_kv_scatter_xfer): checksums computed and
    checked while the blocks are copied, against a real kvringd."""

    # LAYOUT's chunk (2 layers, 2 heads of 64, 16 tokens) in blocks of 4.
    def caches(self, zero=False, hnd=False):
        mk = torch.zeros if zero else torch.randn
        cs = [mk(2, 16, 4, 2, 64).half() for _ in range(2)]
        if hnd:  # physical HND, NHD-shaped view, as vLLM hands them out
            cs = [c.permute(0, 1, 3, 2, 4).contiguous().permute(0, 1, 3, 2, 4)
                  for c in cs]
        return cs, PagedKV.merged(cs, LAYOUT)

    def test_gather_sums_while_copying_when_views_are_a_stores(self):
        # The sum is taken from the blocks as they are gathered, and the
        # commit sends it without reading the slots: a write into a view
        # after the gather makes that chunk fail every check. With a plain
        # gather and the commit's own hash the write would go unnoticed.
        for transport, hnd in ((None, False), (None, True), ("copy", False)):
            caches, kv = self.caches(hnd=hnd)
            ids = [3, 9, 1, 14, 0, 7, 2, 11]
            with self.ctx(checksum="on", transport=transport) as ctx:
                t = toks(80 + hnd + 2 * bool(transport), 32)
                views = ctx.prepare_store(t)
                kv.gather(ids, views)
                ref = [torch.empty(LAYOUT.shape, dtype=torch.half)
                       for _ in range(2)]
                kv.gather(ids, ref)  # plain tensors: the plain gather
                views[1][1, 0, 3, 5] += 1  # after the gather: stale sum
                self.assertTrue(ctx.commit_store(t, 0, views))
                got = ctx.prepare_retrieve(t)
                self.assertEqual(ctx.verify_retrieve(t), 1,
                                 (transport, hnd))
                self.assertTrue(torch.equal(got[0], ref[0]))
                del got
                self.assertTrue(ctx.commit_retrieve(t))

    def test_scatter_stops_at_a_chunk_another_process_flipped(self):
        # checksum='on': the scatter checks each chunk as it lands in the
        # blocks; chunk 1, flipped by a second process, ends the copy
        # (its blocks are to be recomputed), chunk 2 is not touched, the
        # views are cut there and kvringd drops chunk 1 at commit.
        src, kv = self.caches()
        dst, kv2 = self.caches(zero=True, hnd=True)
        ids, ids2 = list(range(12)), [15, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7]
        with self.ctx(checksum="on") as ctx:
            t = toks(84, 48)
            views = ctx.prepare_store(t)
            kv.gather(ids, views)
            self.assertTrue(ctx.commit_store(t, 0, views))
            self.flip_in_child(list(ctx.keys(t)), 1)
            views = ctx.prepare_retrieve(t)
            self.assertEqual(kv2.scatter(ids2, views, skip_blocks=1), 1)
            self.assertEqual(views.indices, [0])
            for s, d in zip(src, dst):
                for a, b in zip(ids[1:4], ids2[1:4]):
                    self.assertTrue(torch.equal(d[:, b], s[:, a]))
                self.assertEqual(float(d[:, ids2[0]].abs().sum()), 0.0,
                                 "a skipped block was written")
                for b in ids2[8:]:
                    self.assertEqual(float(d[:, b].abs().sum()), 0.0,
                                     "chunk 2 copied past a failed chunk")
            del views
            self.assertTrue(ctx.commit_retrieve(t))
            wait_lookup(self, ctx, t, 1)
            # Good chunks: everything scattered, bit for bit.
            views = ctx.prepare_store(t)
            kv.gather(ids[4:8], views)
            self.assertTrue(ctx.commit_store(t, 0, views))
            views = ctx.prepare_retrieve(t)
            self.assertEqual(kv2.scatter(ids2, views), 3)
            del views
            self.assertTrue(ctx.commit_retrieve(t))
            for s, d in zip(src, dst):
                for a, b in zip(ids, ids2):
                    self.assertTrue(torch.equal(d[:, b], s[:, a]))

    def test_bound_views_raise_when_used_the_wrong_way(self):
        caches, kv = self.caches()
        with self.ctx(checksum="on") as ctx:
            t = toks(85, 16)
            views = ctx.prepare_store(t)
            with self.assertRaisesRegex(ValueError, "store views passed "
                                        "to scatter"):
                kv.scatter([0, 1, 2, 3], views)
            with self.assertRaisesRegex(ValueError, "out of range"):
                kv.gather([0, 1, 2, 99], views)
            kv.gather([0, 1, 2, 3], views[:1])  # a slice stays bound
            self.assertTrue(ctx.commit_store(t, 0, views))
            with self.assertRaisesRegex(ValueError, "transfer is over"):
                kv.gather([0, 1, 2, 3], views)

    def flip_in_child(self, keys, chunk):
        flip_in_child(self, self.srv.sock, LAYOUT, "torch-test", keys, chunk)


class PagedKVTest(unittest.TestCase):
    """kvring.kv against torch's own indexing, and its refusals."""

    def setUp(self):
        self.lt = ChunkLayout(layers=3, kv_heads=2, head_size=16,
                              dtype="bf16", chunk_tokens=8)
        self.caches = [torch.randn(2, 12, 4, 2, 16).to(torch.bfloat16)
                       for _ in range(3)]

    def ref(self, caches, ids):
        return torch.stack([torch.stack([
            c[k].index_select(0, torch.tensor(ids)).reshape(8, 32)
            for c in caches]) for k in (0, 1)])

    def test_gather_equals_torch_indexing_when_merged_nhd(self):
        kv = PagedKV.merged(self.caches, self.lt)
        out = [torch.empty(self.lt.shape, dtype=torch.bfloat16)
               for _ in range(2)]
        kv.gather([5, 1, 11, 0], out)
        self.assertTrue(torch.equal(out[0], self.ref(self.caches, [5, 1])))
        self.assertTrue(torch.equal(out[1], self.ref(self.caches, [11, 0])))

    def test_layouts_agree_when_same_data_is_laid_out_differently(self):
        ids = [3, 9]
        want = torch.empty(self.lt.shape, dtype=torch.bfloat16)
        PagedKV.merged(self.caches, self.lt).gather(ids, [want])
        layouts = {
            "separate": PagedKV.separate([c[0] for c in self.caches],
                                         [c[1] for c in self.caches],
                                         self.lt),
            "cross": PagedKV.cross_layer(torch.stack(self.caches), self.lt),
            "hnd": PagedKV.merged([c.permute(0, 1, 3, 2, 4).contiguous()
                                   for c in self.caches], self.lt, "HND"),
            "hnd-strided": PagedKV.merged(
                [c.permute(0, 1, 3, 2, 4).contiguous().permute(0, 1, 3, 2, 4)
                 for c in self.caches], self.lt),
        }
        for name, kv in layouts.items():
            got = torch.empty(self.lt.shape, dtype=torch.bfloat16)
            kv.gather(ids, [got])
            self.assertTrue(torch.equal(got, want), name)

    def test_scatter_skips_blocks_when_engine_shares_them(self):
        kv = PagedKV.merged(self.caches, self.lt)
        chunk = torch.full(self.lt.shape, 7.0, dtype=torch.bfloat16)
        before = [c.clone() for c in self.caches]
        kv.scatter([4, 6], [chunk], skip_blocks=1)
        for c, b in zip(self.caches, before):
            self.assertTrue(torch.equal(c[:, 4], b[:, 4]))  # shared: kept
            self.assertTrue(bool((c[:, 6] == 7).all()))
            self.assertTrue(torch.equal(c[:, 5], b[:, 5]))

    def test_mla_round_trips_when_block_ids_differ(self):
        lt = ChunkLayout(layers=2, kv_heads=1, head_size=24, dtype="fp8",
                         chunk_tokens=8, mla=True)
        src = [torch.randint(0, 255, (6, 4, 24), dtype=torch.uint8)
               for _ in range(2)]
        dst = [torch.zeros(6, 4, 24, dtype=torch.uint8) for _ in range(2)]
        chunk = torch.empty(lt.shape, dtype=torch.uint8)
        PagedKV.mla(src, lt).gather([1, 2], [chunk])
        PagedKV.mla(dst, lt).scatter([5, 0], [chunk])
        for s, d in zip(src, dst):
            self.assertTrue(torch.equal(s[1], d[5]))
            self.assertTrue(torch.equal(s[2], d[0]))

    def test_bad_arguments_raise_value_error_and_copy_nothing(self):
        kv = PagedKV.merged(self.caches, self.lt)
        out = torch.full(self.lt.shape, 3.0, dtype=torch.bfloat16)
        cases = [
            (lambda: kv.gather([0, 12], [out]), "out of range"),
            (lambda: kv.gather([0, -1], [out]), "out of range"),
            (lambda: kv.gather([0, True], [out]), "block id True"),
            (lambda: kv.gather([0], [out]), "needs 2 blocks"),
            (lambda: kv.gather([0, 1], [out[:, :, :4]]), "bytes"),
            (lambda: kv.gather([0, 1], [out.transpose(2, 3)]),
             "not contiguous"),
            (lambda: kv.scatter([0, 1], [out], skip_blocks=3), "skip"),
            (lambda: PagedKV.merged([c[:, ::2] for c in self.caches],
                                    self.lt), "not contiguous"),
            (lambda: PagedKV.merged([c.half() for c in self.caches],
                                    self.lt), "dtype"),
            (lambda: PagedKV.merged(self.caches[:2], self.lt),
             "does not match"),
            (lambda: PagedKV.merged([torch.zeros(2, 12, 3, 2, 16,
                                                 dtype=torch.bfloat16)] * 3,
                                    self.lt), "does not divide"),
            (lambda: PagedKV.merged(self.caches, ChunkLayout(
                layers=3, kv_heads=4, head_size=16, dtype="bf16",
                chunk_tokens=8)), "heads"),
            # HND memory declared NHD: the message points at kv_layout.
            (lambda: PagedKV.merged([c.permute(0, 1, 3, 2, 4).contiguous()
                                     for c in self.caches], self.lt),
             "kv_layout 'NHD'"),
        ]
        for fn, needle in cases:
            with self.assertRaises(ValueError) as cm:
                fn()
            self.assertIn(needle, str(cm.exception))
        self.assertTrue(bool((out == 3).all()), "a refused call copied")

    def test_every_vllm_layout_writes_lmcache_chunks_bit_for_bit(self):
        # Each cache allocated as vLLM's model runner allocates it for
        # that backend and stride order, written through the backend's
        # logical view, gathered by kvring: the chunks must equal the
        # ones built by hand from the logical K and V, and scatter must
        # put every value back where the backend reads it.
        cases = [(None, "NHD", False, False), (None, "HND", False, False)]
        for be in ("CPU_ATTN", "FLASH_ATTN", "FLASHINFER"):
            for cl in ("NHD", "HND"):
                for cross in (False, True):
                    if be != "CPU_ATTN" or not cross:
                        cases.append((be, cl, cross, False))
        cases += [(None, "NHD", False, True), ("TRITON_MLA", "NHD", False,
                                               True),
                  ("TRITON_MLA", "NHD", True, True)]
        ids = [4, 1, 5, 0]
        for be, cl, cross, mla in cases:
            name = "%s/%s%s%s" % (be, cl, "/cross" if cross else "",
                                  "/mla" if mla else "")
            spec = engine.EngineSpec(
                socket="", backend=be, kv_cache_layout=cl, hnd=cl == "HND",
                layers=3, kv_heads=4, head_size=24 if mla else 8,
                mla=mla, block_size=16, chunk_tokens=32, num_blocks=6,
                dtype="bfloat16")
            lt = ChunkLayout(layers=3, kv_heads=1 if mla else 4,
                             head_size=spec.head_size, dtype="bf16",
                             chunk_tokens=32, mla=mla)
            cls = spec.backend_class()
            p = toks(40, 64)

            def build():
                if cross:
                    caches, phys = engine.make_cross_layer_cache(spec)
                    return caches, PagedKV.from_vllm_cross_layer(
                        phys, lt, backend=cls, block_size=16)
                caches = engine.make_caches(spec)
                return caches, PagedKV.from_vllm(caches, lt, backend=cls,
                                                 block_size=16)
            # vLLM's layout is process-wide: the backend's stride order
            # follows it when kvring asks, as when vLLM allocated.
            engine.backend_utils.set_kv_cache_layout(cl)
            try:
                caches, kv = build()
                caches2, kv2 = build()
            finally:
                engine.backend_utils.set_kv_cache_layout(None)
            engine.write_kv(spec, caches, ids, p, list(range(64)))
            want = engine.lmcache_chunks(spec, p, 2)
            out = torch.empty((2,) + lt.shape, dtype=torch.bfloat16)
            kv.gather(ids, list(out))
            self.assertTrue(torch.equal(out, want), name)
            # The device path (torch ops, staging, one transfer per chunk
            # or per layer's K and V), with the CPU standing in.
            st = kv.staged()
            for layers in (None, [0], [1, 2]):
                got = torch.zeros_like(out)
                for ls in ([None] if layers is None else [[0], [1], [2]]):
                    st.stream.host_waits(st.gather(ids, list(got), ls))
                self.assertTrue(torch.equal(got, want), name)
            kv2.scatter([3, 2, 0, 5], list(out))
            self.assertTrue(torch.equal(
                engine.read_kv(spec, caches2, [3, 2, 0, 5], list(range(64))),
                engine.model_kv(spec, p, list(range(64)))), name)
            for by_layer in (False, True):
                engine.backend_utils.set_kv_cache_layout(cl)
                try:
                    caches3, kv3 = build()
                finally:
                    engine.backend_utils.set_kv_cache_layout(None)
                st3 = kv3.staged()
                for ls in ([[0], [1], [2]] if by_layer else [None]):
                    good, ev = st3.scatter([3, 2, 0, 5], list(out), 1, ls)
                    self.assertEqual(good, 2)
                # The engine's view of the same memory.
                got = engine.read_kv(spec, caches3, [3, 2, 0, 5],
                                     list(range(16, 64)))
                self.assertTrue(torch.equal(got, engine.model_kv(
                    spec, p, list(range(16, 64)))), name)

    def test_cache_that_reads_two_ways_is_refused_with_a_sentence(self):
        # (2, blocks, 16, 16, dim), dense, no backend: heads and tokens
        # could be either of the two 16s. Reading it one way when it is
        # the other would store every head's values under the wrong
        # token, so it is refused, saying what would settle it.
        lt = ChunkLayout(layers=2, kv_heads=16, head_size=8, dtype="bf16",
                         chunk_tokens=16)
        caches = [torch.zeros(2, 4, 16, 16, 8, dtype=torch.bfloat16)
                  for _ in range(2)]
        with self.assertRaises(ValueError) as cm:
            PagedKV.from_vllm(caches, lt)
        msg = str(cm.exception)
        for needle in ("(2, 4, 16, 16, 8)", "strides (8192, 2048, 128, 8, 1)",
                       "torch.bfloat16", "two ways", "'HND'", "'NHD'",
                       "backend"):
            self.assertIn(needle, msg)
        # The override settles it.
        kv = PagedKV.from_vllm(caches, lt, kv_layout="HND")
        self.assertEqual(kv.block_size, 16)

    def test_misaligned_tensor_raises_when_data_is_offset(self):
        raw = torch.zeros(2 * 12 * 4 * 2 * 16 * 2 + 1, dtype=torch.uint8)
        bad = raw[1:].view(torch.uint8)
        import ctypes
        buf = (ctypes.c_char * (raw.numel() - 1)).from_address(
            bad.data_ptr())
        t = torch.frombuffer(buf, dtype=torch.bfloat16).view(2, 12, 4, 2, 16)
        with self.assertRaises(ValueError) as cm:
            PagedKV.merged([t] * 3, self.lt)
        self.assertIn("aligned", str(cm.exception))


class ConnectorTest(ServerCase):
    """kvring.vllm driven in vLLM's order by engine.py."""

    def spec(self, **kw):
        # One namespace per test (long names are shortened with a hash).
        kw.setdefault("model", "driver/%s" % self.id().split(".")[-1])
        return engine.EngineSpec(socket=self.srv.sock, **kw)

    def prompt(self, seed, n):
        return toks(seed, n)

    @contextlib.contextmanager
    def engine_on(self, seed, n, run_a=False, **kw):
        """An engine on this test's spec (with kw) and prompt(seed, n);
        with run_a, request "a" has run on the prompt, so that its chunks
        are stored. Yields (engine, spec, prompt); stops the engine after."""
        spec = self.spec(**kw)
        p = self.prompt(seed, n)
        e = engine.Engine(spec)
        try:
            if run_a:
                e.run("a", p)
            yield e, spec, p
        finally:
            e.stop()

    def stored_then_flipped(self, spec, seed):
        """Request "req-1" on prompt(seed, 2 * 64 + 40) stored by an engine
        on spec (stopped after), then a byte of its chunk 1 flipped in the
        pool by a second process. Returns the prompt."""
        from kvring.torch import salted_keys
        from kvring.vllm import _layout
        p = self.prompt(seed, 2 * 64 + 40)
        e = engine.Engine(spec)
        try:
            self.assertEqual(e.run("req-1", p)["errors"], [])
        finally:
            e.stop()
        lt = _layout(spec.vllm_config(), spec.chunk_tokens)
        with lt.connect(spec.model, socket=self.srv.sock,
                        checksum="off") as c:
            keys = list(salted_keys(c, p[:128], 64, None))
        self.assertEqual(len(keys), 2)
        flip_in_child(self, self.srv.sock, lt, spec.model, keys, 1)
        return p

    def check_loaded(self, eng, spec, res, tokens, n):
        got = eng.kv_of(res["block_ids"], n)
        want = engine.model_kv(spec, tokens, list(range(n)))
        self.assertEqual(got.dtype, want.dtype)
        self.assertTrue(torch.equal(got, want),
                        "loaded KV differs from the model's")

    def roundtrip(self, what="vLLM cache", **kw):
        spec1 = self.spec(**kw)
        p1 = self.prompt(1, 2 * 64 + 40)        # 2 full chunks + partial
        e1 = engine.Engine(spec1)
        try:
            d = e1.worker.call("describe")
            self.assertEqual(d[0], what)
            self.assertEqual(d[2], bool((kw.get("extra") or {}).get(
                "kvring_layerwise")))
            r1 = e1.run("req-1", p1)
            self.assertEqual(r1["external_tokens"], 0)
            self.assertEqual(r1["errors"], [])
        finally:
            e1.stop()
        # Another engine, other processes, other block ids.
        spec2 = self.spec(block_offset=29, **kw)
        p2 = p1[:2 * 64 + 40] + self.prompt(2, 100)
        e2 = engine.Engine(spec2)
        try:
            r2 = e2.run("req-2", p2)
            # Only the 2 full chunks were stored: the partial one not.
            self.assertEqual(r2["external_tokens"], 128)
            self.assertEqual(r2["errors"], [])
            self.assertNotEqual(r2["block_ids"][:8], r1["block_ids"][:8])
            self.check_loaded(e2, spec2, r2, p2, 128)
        finally:
            e2.stop()
        # What kvringd holds is LMCache's format, whatever the layout.
        self.assertTrue(torch.equal(self.stored_chunks(spec1, p1, 2),
                                    engine.lmcache_chunks(spec1, p1, 2)))
        return spec1

    def test_request_2_loads_bit_exact_when_another_process_stored(self):
        self.roundtrip(dtype="float16")

    def test_bf16_cache_loads_bit_exact_when_prefix_matches(self):
        self.roundtrip(dtype="bfloat16")

    def test_hnd_cache_loads_bit_exact_when_blocks_are_hnd(self):
        self.roundtrip(hnd=True)

    def test_mla_cache_loads_bit_exact_when_model_is_mla(self):
        self.roundtrip(mla=True, head_size=96)

    def test_mla_backend_cache_loads_bit_exact(self):
        self.roundtrip(mla=True, head_size=96, backend="TRITON_MLA",
                       cross_layer=False)

    def test_mla_cross_layer_cache_loads_bit_exact(self):
        self.roundtrip("vLLM cross-layer cache", mla=True, head_size=96,
                       backend="TRITON_MLA")

    def test_cross_layer_cache_loads_bit_exact_when_the_backend_allows_it(
            self):
        # FlashAttention has a blocks-first cross-layer layout: the
        # connector prefers it and vLLM registers one tensor.
        self.roundtrip("vLLM cross-layer cache", backend="FLASH_ATTN")

    def test_connector_prefers_cross_layer_blocks_only_where_it_reads_them(
            self):
        def prefers(**kw):
            spec = self.spec(**kw)
            cfg = spec.vllm_config()
            w = engine.connector_class(cfg)(
                cfg, engine.KVConnectorRole.WORKER, spec.kv_cache_config())
            return w.prefer_cross_layer_blocks
        self.assertTrue(prefers(backend="FLASH_ATTN"))
        self.assertTrue(prefers(backend="FLASHINFER", kv_cache_layout="HND"))
        self.assertTrue(prefers(backend="TRITON_MLA", mla=True))
        # The CPU backend has no stride order; no backend, nothing to ask;
        # kvring_kv_layout overrides what the backend says.
        self.assertFalse(prefers(backend="CPU_ATTN"))
        self.assertFalse(prefers())
        self.assertFalse(prefers(backend="FLASH_ATTN",
                                 extra={"kvring_kv_layout": "NHD"}))

    def test_connector_is_a_best_effort_cache_for_vllm(self):
        spec = self.spec()
        cfg = spec.vllm_config()
        w = engine.connector_class(cfg)(cfg, engine.KVConnectorRole.WORKER,
                                        spec.kv_cache_config())
        # kv_both would make the base class say True: vLLM would then
        # recompute a request preempted while its save is pending.
        self.assertFalse(w.requires_kv_delivery)

    def test_hybrid_model_is_refused_at_start_naming_its_groups(self):
        import torch as t
        from vllm.v1.kv_cache_interface import (FullAttentionSpec,
                                                KVCacheGroupSpec,
                                                SlidingWindowSpec)
        groups = [KVCacheGroupSpec(["model.layers.0.self_attn.attn"],
                                   FullAttentionSpec(16, 2, 64, t.float16)),
                  KVCacheGroupSpec(["model.layers.1.self_attn.attn"],
                                   SlidingWindowSpec(16, 2, 64, t.float16,
                                                     sliding_window=128))]
        with self.assertRaises(ValueError) as cm:
            engine.Engine(self.spec(kv_cache_groups=groups))
        msg = str(cm.exception)
        for needle in ("2 KV cache groups", "group 0: FullAttentionSpec",
                       "group 1: SlidingWindowSpec", "model.layers.1."):
            self.assertIn(needle, msg)

    def test_cpu_backend_cache_loads_bit_exact_when_it_is_hnd(self):
        self.roundtrip(backend="CPU_ATTN")

    def test_flashinfer_cache_loads_bit_exact_when_blocks_come_first(self):
        self.roundtrip(backend="FLASHINFER", cross_layer=False)

    def test_stride_permuted_cache_loads_bit_exact_when_layout_is_hnd(self):
        self.roundtrip(backend="FLASH_ATTN", kv_cache_layout="HND",
                       cross_layer=False)

    def test_flashinfer_hnd_cache_loads_bit_exact(self):
        self.roundtrip(backend="FLASHINFER", kv_cache_layout="HND",
                       cross_layer=False)

    def test_hnd_cross_layer_caches_load_bit_exact(self):
        self.roundtrip("vLLM cross-layer cache", backend="FLASH_ATTN",
                       kv_cache_layout="HND")

    def test_flashinfer_hnd_cross_layer_cache_loads_bit_exact(self):
        self.roundtrip("vLLM cross-layer cache", backend="FLASHINFER",
                       kv_cache_layout="HND")

    # Layer by layer: the device path (staging, copy stream, events,
    # a commit only after every layer landed) with the CPU standing in
    # for the device.
    LW = {"kvring_layerwise": True}

    def test_layerwise_loads_and_saves_bit_exact(self):
        self.roundtrip(extra=self.LW)

    def test_layerwise_loads_and_saves_bit_exact_for_each_backend(self):
        cross = "vLLM cross-layer cache"
        for i, (what, kw) in enumerate([
                ("vLLM cache", dict(backend="CPU_ATTN")),
                ("vLLM cache", dict(backend="FLASHINFER",
                                    kv_cache_layout="HND",
                                    cross_layer=False)),
                (cross, dict(backend="FLASH_ATTN", kv_cache_layout="HND")),
                (cross, dict(backend="TRITON_MLA", mla=True, head_size=96)),
                ("vLLM cache", dict(dtype="bfloat16", hnd=True))]):
            self.roundtrip(what, extra=self.LW, model="driver/lw-%d" % i,
                           **kw)

    def test_layerwise_corrupt_chunk_is_recomputed_when_checksum_is_on(self):
        # 'fill', the name the configuration gives the library's 'on'.
        p1 = self.stored_then_flipped(
            self.spec(extra=dict(self.LW, kvring_checksum="fill")), 60)
        spec2 = self.spec(block_offset=29, extra=dict(self.LW,
                                                      kvring_checksum="on"))
        e2 = engine.Engine(spec2)
        try:
            r2 = e2.run("req-2", p1)
            self.assertEqual(r2["external_tokens"], 128)
            self.assertNotEqual(r2["errors"], [], "a corrupt chunk was "
                                "loaded")
            self.check_loaded(e2, spec2, r2, p1, 128)
        finally:
            e2.stop()

    def test_layerwise_copy_failing_at_a_layer_publishes_nothing(self):
        with self.engine_on(61, 2 * 64 + 3, extra=self.LW) as (e, spec, p):
            e.worker.call("fail_copies", ("gather", 1))
            r = e.run("a", p)
            self.assertEqual(r["errors"], [])
            e.worker.call("fail_copies", None)
            # Layers 0 was copied, layer 1 failed: nothing was published.
            self.assertEqual(e.run("b", p)["external_tokens"], 0)
            # The next step saves (the chunks were never stored).
            self.assertEqual(e.run("c", p)["external_tokens"], 128)
            with KvringContext(_layout_of(spec), model=spec.model,
                               socket=self.srv.sock) as c:
                self.assertEqual(c.client.stats()["reserved_bytes"], 0)

    def test_layerwise_copy_failing_at_a_layer_reports_the_load(self):
        with self.engine_on(62, 2 * 64 + 3, extra=self.LW) as (e, spec, p):
            e.run("a", p)
            e.worker.call("fail_copies", ("scatter", 1))
            r = e.run("b", p)
            self.assertEqual(r["external_tokens"], 128)
            self.assertEqual(r["errors"], sorted(r["block_ids"][:8]))
            self.assertGreater(r["recomputed"], 0)
            self.check_loaded(e, spec, r, p, len(p))

    def test_cache_that_reads_two_ways_is_refused_at_register(self):
        # No backend to ask and 16 heads in 16-token blocks: vLLM's
        # worker start fails with the sentence, unless kvring_kv_layout
        # says which it is.
        spec = self.spec(kv_heads=16, head_size=8, block_size=16,
                         chunk_tokens=32)
        with self.assertRaisesRegex(RuntimeError, "can be read two ways"):
            engine.Engine(spec)
        spec = self.spec(kv_heads=16, head_size=8, block_size=16,
                         chunk_tokens=32, extra={"kvring_kv_layout": "NHD"})
        p = self.prompt(33, 40)
        e = engine.Engine(spec)
        try:
            e.run("a", p)
        finally:
            e.stop()
        self.assertTrue(torch.equal(self.stored_chunks(spec, p, 1),
                                    engine.lmcache_chunks(spec, p, 1)))

    def stored_chunks(self, spec, tokens, n):
        """The first n chunks of tokens as kvringd holds them."""
        from kvring.vllm import _layout
        lt = _layout(spec.vllm_config(), spec.chunk_tokens)
        out = torch.empty((n,) + lt.shape, dtype=lt.torch_dtype)
        with KvringContext(lt, model=spec.model, socket=self.srv.sock) as c:
            self.assertEqual(c.retrieve_chunks(tokens[:n * spec.chunk_tokens],
                                               out), n)
        return out

    def lmcache_chunks(self, spec, tokens, n):
        return engine.lmcache_chunks(spec, tokens, n)

    def test_cpu_backend_chunks_are_lmcache_format_when_heads_equal_block(
            self):
        # vLLM's CPU backend keeps (2, blocks, heads, block_size, dim):
        # with 16 heads and 16-token blocks nothing in the shape says
        # which is which; the backend does.
        spec = self.spec(backend="CPU_ATTN", kv_heads=16, head_size=8,
                         block_size=16, chunk_tokens=32)
        p = self.prompt(31, 2 * 32 + 3)
        e = engine.Engine(spec)
        try:
            self.assertEqual(e.run("a", p)["errors"], [])
        finally:
            e.stop()
        got = self.stored_chunks(spec, p, 2)
        self.assertTrue(torch.equal(got, self.lmcache_chunks(spec, p, 2)),
                        "the stored chunks are not in LMCache's format")

    def test_loads_bit_exact_when_every_connector_uses_copy_transport(self):
        # No shared pool anywhere ($KVRING_TRANSPORT=copy, inherited by
        # the worker processes): the connector saves and loads through
        # the context's private-buffer views, and each scheduler-side
        # connector says once in its log that it runs on the copy
        # transport. (Before, prepare_store returned None and the saves
        # were dropped without a word.)
        with mock.patch.dict(os.environ, {"KVRING_TRANSPORT": "copy"}):
            with self.assertLogs("kvring.vllm", "WARNING") as logs:
                self.roundtrip(dtype="float16")
        said = [m for m in logs.output if "copy transport" in m]
        self.assertEqual(len(said), 2, logs.output)  # two engines

    def test_corrupt_chunk_is_recomputed_when_checksum_is_on(self):
        # KVRING_CHECKSUM=on for the whole deployment: stores are summed,
        # and the connector verifies what it loads (with 'on' nothing
        # else would). A second process flips a byte of chunk 1: the
        # load is cut there, vLLM recomputes, and the KV is right.
        with mock.patch.dict(os.environ, {"KVRING_CHECKSUM": "on"}):
            p1 = self.stored_then_flipped(self.spec(), 9)
            spec2 = self.spec(block_offset=29)
            e2 = engine.Engine(spec2)
            try:
                r2 = e2.run("req-2", p1)
                self.assertEqual(r2["external_tokens"], 128)
                self.assertNotEqual(r2["errors"], [],
                                    "a corrupt chunk was loaded")
                self.assertGreater(r2["recomputed"], 0)
                self.check_loaded(e2, spec2, r2, p1, 128)
            finally:
                e2.stop()

    def test_partial_last_chunk_is_not_stored(self):
        with self.engine_on(3, 64 + 63, run_a=True) as (e, spec, p):
            # The prompt grown to 2 full chunks hits only the first one.
            r = e.run("b", p + [1])
            self.assertEqual(r["external_tokens"], 64)

    def test_other_cache_salt_gets_no_hit(self):
        spec = self.spec()
        e = engine.Engine(spec)
        try:
            p = self.prompt(4, 3 * 64)
            e.run("a", p, cache_salt="tenant-a")
            self.assertEqual(e.run("b", p + [5], cache_salt="tenant-b")
                             ["external_tokens"], 0)
            self.assertEqual(e.run("c", p + [5])["external_tokens"], 0)
            r = e.run("d", p + [5], cache_salt="tenant-a")
            self.assertEqual(r["external_tokens"], 192)
            self.check_loaded(e, spec, r, p, 192)
        finally:
            e.stop()

    def test_local_prefix_blocks_are_kept_when_engine_has_them(self):
        with self.engine_on(5, 2 * 64 + 1, run_a=True) as (e, spec, p):
            r = e.run("b", p, local_hit_tokens=32)  # 2 blocks local
            self.assertEqual(r["external_tokens"], 128 - 32)
            got = e.kv_of(r["block_ids"], 128)
            self.assertTrue(bool((got[:, :, :32] == engine.LOCAL_MARK)
                                 .all()), "a shared block was overwritten")
            want = engine.model_kv(spec, p, list(range(32, 128)))
            self.assertTrue(torch.equal(got[:, :, 32:], want))

    def test_resumed_request_loads_when_it_was_preempted(self):
        # vLLM looks a preempted request up again when it resumes, then
        # schedules it as a cached request (resumed_req_ids) with all its
        # blocks new: the hit must be loaded there too, or vLLM computes
        # on blocks nobody wrote.
        with self.engine_on(8, 2 * 64 + 10, run_a=True) as (e, spec, p):
            req = engine.Request("b", list(p))
            ext, _ = e.sched.get_num_new_matched_tokens(req, 0)
            self.assertEqual(ext, 128)
            ids = e.alloc(-(-len(p) // spec.block_size))
            e.sched.update_state_after_alloc(req, engine.KVCacheBlocks(
                (tuple(engine.KVCacheBlock(b) for b in ids),)), ext)
            so = engine.sched_output(
                scheduled_cached_reqs=engine.cached_reqs(
                    ["b"], [(list(ids),)], [ext], resumed={"b"}),
                num_scheduled_tokens={"b": len(p) - ext})
            res = e._run_step(so, [(ids, list(p),
                                    list(range(ext, len(p))))])
            self.assertEqual(res["errors"], [])
            self.check_loaded(e, spec, {"block_ids": ids}, p, 128)
            e.sched.request_finished(req, ids)

    def sched_leases(self, e):
        return e.sched._client.stats()["chan_leases"]

    def test_lookup_is_undone_when_allocation_fails_and_vllm_asks_again(self):
        # vLLM documents the lookup as free of side effects: when it
        # cannot allocate blocks it skips update_state_after_alloc and
        # asks again at a later step. The first lookup's pin must not
        # outlive the second, and the load must still work.
        with self.engine_on(40, 2 * 64 + 7, run_a=True) as (e, spec, p):
            req = engine.Request("b", list(p))
            ext, _ = e.sched.get_num_new_matched_tokens(req, 0)
            self.assertEqual(ext, 128)
            self.assertEqual(self.sched_leases(e), 1)
            # The step goes on without b (no blocks for it).
            meta = e.sched.build_connector_meta(engine.sched_output())
            self.assertEqual((meta.loads, meta.saves), ([], []))
            ext, _ = e.sched.get_num_new_matched_tokens(req, 0)
            self.assertEqual(self.sched_leases(e), 1, "a lease leaked")
            # Asked a third time by run(), then allocated and loaded.
            r = e.run("b", p)
            self.assertEqual(r["external_tokens"], 128)
            self.assertEqual(r["errors"], [])
            self.check_loaded(e, spec, r, p, 128)
            self.assertEqual(self.sched_leases(e), 0)

    def test_driver_runs_a_request_whose_allocation_failed_twice(self):
        # The same path as above, driven by the engine: looked up three
        # times, two steps without it, then loaded bit-exact, and no
        # lease left on the scheduler's channel.
        with self.engine_on(44, 2 * 64 + 9, run_a=True) as (e, spec, p):
            r = e.run("b", p, alloc_failures=2)
            self.assertEqual(e.looked_up, 3)
            self.assertEqual((r["external_tokens"], r["errors"]), (128, []))
            self.check_loaded(e, spec, r, p, 128)
            self.assertEqual(self.sched_leases(e), 0)

    def test_lookup_never_taken_up_is_released_by_request_finished(self):
        # Looked up, then aborted while waiting for blocks: vLLM calls
        # request_finished, never update_state_after_alloc.
        e = engine.Engine(self.spec())
        try:
            p = self.prompt(41, 64 + 1)
            e.run("a", p)
            req = engine.Request("b", list(p))
            self.assertEqual(e.sched.get_num_new_matched_tokens(req, 0)[0],
                             64)
            self.assertEqual(self.sched_leases(e), 1)
            self.assertEqual(e.sched.request_finished(req, []),
                             (False, None))
            self.assertEqual(self.sched_leases(e), 0)
            # Allocated but told to load nothing: released at once too.
            req = engine.Request("c", list(p))
            e.sched.get_num_new_matched_tokens(req, 0)
            e.sched.update_state_after_alloc(req, engine.KVCacheBlocks(
                ((),)), 0)
            self.assertEqual(self.sched_leases(e), 0)
            e.sched.request_finished(req, [])
        finally:
            e.stop()

    def preempt_and_resume(self, legacy):
        # b loads its hit into blocks ids1 and prefills part of its
        # prompt; vLLM preempts it (its blocks are freed), and when it
        # resumes looks it up again, gives it all-new blocks ids2 and
        # schedules it as a cached request marked resumed, whose
        # new_block_ids replace its blocks. Today's vLLM marks it in
        # resumed_req_ids, vLLM 0.10 in resumed_from_preemption.
        with self.engine_on(43 + legacy, 2 * 64 + 10, run_a=True) as (e, spec, p):
            req = engine.Request("b", list(p))
            nb = -(-len(p) // spec.block_size)
            ext, _ = e.sched.get_num_new_matched_tokens(req, 0)
            ids1 = e.alloc(nb)
            e.sched.update_state_after_alloc(req, engine.KVCacheBlocks(
                (tuple(engine.KVCacheBlock(b) for b in ids1),)), ext)
            res = e._run_step(engine.sched_output(
                scheduled_new_reqs=[engine.new_req("b", p, ids1, ext)],
                num_scheduled_tokens={"b": 4}),
                [(ids1, list(p), list(range(ext, ext + 4)))])
            self.assertEqual(res["errors"], [])
            # Preempted; resumed.
            ext, _ = e.sched.get_num_new_matched_tokens(req, 0)
            self.assertEqual(ext, 128)
            ids2 = e.alloc(nb)
            e.sched.update_state_after_alloc(req, engine.KVCacheBlocks(
                (tuple(engine.KVCacheBlock(b) for b in ids2),)), ext)
            res = e._run_step(engine.sched_output(
                scheduled_cached_reqs=engine.cached_reqs(
                    ["b"], [(list(ids2),)], [ext], resumed={"b"},
                    legacy=legacy),
                num_scheduled_tokens={"b": len(p) - ext}),
                [(ids2, list(p), list(range(ext, len(p))))])
            self.assertEqual(res["errors"], [])
            self.check_loaded(e, spec, {"block_ids": ids2}, p, len(p))
            e.sched.request_finished(req, ids2)

    def test_resumed_request_gets_new_blocks_when_marked_in_resumed_req_ids(
            self):
        self.preempt_and_resume(legacy=False)

    def test_resumed_request_gets_new_blocks_when_marked_the_vllm_0_10_way(
            self):
        self.preempt_and_resume(legacy=True)

    def test_config_keys_set_what_their_environment_variables_set(self):
        spec = self.spec(extra={"kvring_checksum": "verify",
                                "kvring_store_ahead": True,
                                "kvring_prefault": "background",
                                "kvring_server_uid": os.getuid() + 1})
        e = engine.Engine(spec)
        try:
            c = e.sched._client
            self.assertEqual(c.checksum, "verify")
            self.assertTrue(c.store_ahead)
            self.assertEqual(e.sched._connect_kw["trust_server_uid"],
                             os.getuid() + 1)
            self.assertTrue(e.sched._connect_kw["prefault_background"])
            p = self.prompt(50, 64 + 3)
            e.run("a", p)
            r = e.run("b", p)
            self.assertEqual((r["external_tokens"], r["errors"]), (64, []))
            self.check_loaded(e, spec, r, p, 64)
        finally:
            e.stop()

    def test_bad_or_unknown_config_key_is_refused_naming_what_works(self):
        cases = [({"kvring_chekcsum": "on"},
                  ["unknown key kvring_chekcsum", "kvring_checksum",
                   "kvring_layerwise", "kvring_socket"]),
                 ({"kvring_checksum": "sometimes"},
                  ["'off', 'fill' (or 'on') or 'verify'",
                   "$KVRING_CHECKSUM"]),
                 ({"kvring_prefault": "backgound"},
                  ["'background' or 'inline'"]),
                 ({"kvring_store_ahead": "yes"}, ["a bool"]),
                 ({"kvring_server_uid": -1}, ["non-negative integer"]),
                 ({"kvring_kv_layout": "nhd"}, ["'NHD' or 'HND'"]),
                 ({"kvring_layerwise": 1}, ["a bool"])]
        for extra, needles in cases:
            with self.assertRaises(ValueError) as cm:
                engine.Engine(self.spec(extra=extra))
            for needle in needles:
                self.assertIn(needle, str(cm.exception), extra)
        # Other connectors' keys (no kvring_ prefix) are not ours.
        engine.Engine(self.spec(extra={"lmcache.chunk_size": 256})).stop()

    def test_fail_policy_is_called_out_once_at_start(self):
        import kvring.vllm as kv_vllm
        kv_vllm._said_policy = False
        with self.assertLogs("kvring.vllm", "WARNING") as logs:
            for _ in range(2):
                engine.Engine(self.spec(kv_load_failure_policy="fail")).stop()
        said = [m for m in logs.output if "kv_load_failure_policy" in m]
        self.assertEqual(len(said), 1, logs.output)
        self.assertIn("will fail the request", said[0])
        self.assertIn("'recompute' is the policy for a cache", said[0])
        kv_vllm._said_policy = False
        with self.assertNoLogs("kvring.vllm", "WARNING"):
            engine.Engine(self.spec()).stop()  # recompute: nothing to say

    def test_unknown_request_is_not_saved_when_its_salt_is_unknown(self):
        # NewRequestData has no cache_salt: a request the connector never
        # looked up must not be stored under unsalted keys.
        e = engine.Engine(self.spec())
        try:
            p = self.prompt(9, 2 * 64)
            ids = e.alloc(8)
            meta = e.sched.build_connector_meta(engine.sched_output(
                scheduled_new_reqs=[engine.new_req("x", p, ids, 0)],
                num_scheduled_tokens={"x": len(p)}))
            self.assertEqual(meta.saves, [])
            self.assertEqual(meta.loads, [])
        finally:
            e.stop()

    def test_pipeline_stages_do_not_share_chunks_when_shapes_match(self):
        # Two pipeline stages hold different layers of the same shape: a
        # chunk stage 1 stored must not load into stage 0.
        import dataclasses
        from kvring.vllm import KvringConnectorMetadata, LoadSpec, SaveSpec
        spec = self.spec(layers=2)
        stage = dataclasses.replace(spec, layers=1)
        p = self.prompt(10, 64)
        ws = []
        try:
            for rank in (0, 1):
                cfg = spec.vllm_config()
                cfg.parallel_config = engine.ParallelConfig(
                    pipeline_parallel_size=2, rank=rank)
                w = engine.connector_class(cfg)(
                    cfg, engine.KVConnectorRole.WORKER,
                    engine.KVCacheConfig(spec.num_blocks))
                caches = engine.make_caches(stage)
                engine.write_kv(stage, caches, list(range(4)), p,
                                list(range(64)))
                w.register_kv_caches(caches)
                ws.append(w)
            ws[1].bind_connector_metadata(KvringConnectorMetadata(saves=[
                SaveSpec("r", list(p), None, [0, 1, 2, 3], 1)]))
            ws[1].wait_for_save()
            ws[0].bind_connector_metadata(KvringConnectorMetadata(loads=[
                LoadSpec("r", 0, list(p), None, [4, 5, 6, 7], 0, 1)]))
            ws[0].start_load_kv(None)
            self.assertEqual(ws[0].get_block_ids_with_load_errors(),
                             {4, 5, 6, 7})
            # The save did happen: stage 1 itself loads it.
            ws[1].bind_connector_metadata(KvringConnectorMetadata(loads=[
                LoadSpec("r", 0, list(p), None, [4, 5, 6, 7], 0, 1)]))
            ws[1].start_load_kv(None)
            self.assertEqual(ws[1].get_block_ids_with_load_errors(), set())
        finally:
            for w in ws:
                w.shutdown()

    def test_worker_killed_mid_store_publishes_nothing(self):
        spec = self.spec()
        e = engine.Engine(spec)
        p = self.prompt(6, 3 * 64)
        try:
            e.worker.call("kill_in_commit_store")
            with self.assertRaises((EOFError, OSError, RuntimeError,
                                    TimeoutError)):
                e.run("a", p)
            e.worker.proc.join(10)
            self.assertEqual(e.worker.proc.exitcode, -signal.SIGKILL)
        finally:
            e.stop()
        c = ChunkLayout(layers=2, kv_heads=2, head_size=64, dtype="fp16",
                        chunk_tokens=64).connect(spec.model,
                                                 socket=self.srv.sock)
        with c:
            from kvring.torch import salted_keys
            keys = salted_keys(c, p, 64)
            self.assertEqual(len(keys), 3)
            # Gathered into the pool but never committed: no hit, and the
            # server freed the reservations when the socket hung up.
            for _ in range(100):
                if c.stats()["reserved_bytes"] == 0:
                    break
                time.sleep(0.02)
            self.assertEqual(c.lookup(keys), 0)
            self.assertEqual(c.stats()["reserved_bytes"], 0)


class LeaseExpiryTest(ServerCase):
    server_extra = ("--lease-ms", "200")

    def test_lookup_never_taken_up_is_released_at_lease_expiry(self):
        # Nothing follows the lookup (the engine died, say): kvringd drops
        # the pin when the lease expires, and the connector's later
        # release of it is harmless.
        spec = engine.EngineSpec(socket=self.srv.sock, model="driver/lease")
        e = engine.Engine(spec)
        try:
            p = toks(42, 64 + 1)
            e.run("a", p)
            req = engine.Request("b", list(p))
            self.assertEqual(e.sched.get_num_new_matched_tokens(req, 0)[0],
                             64)
            c = e.sched._client
            self.assertEqual(c.stats()["chan_leases"], 1)
            for _ in range(100):
                if c.stats()["chan_leases"] == 0:
                    break
                time.sleep(0.02)
            self.assertEqual(c.stats()["chan_leases"], 0)
            self.assertEqual(e.sched.request_finished(req, []),
                             (False, None))
            # A load from an expired lease falls back on recomputation.
            self.assertEqual(e.run("c", p)["errors"], [])
        finally:
            e.stop()


class ServerKillTest(ServerCase):
    # Each test kills its server: each gets its own.
    @classmethod
    def setUpClass(cls):
        pass

    @classmethod
    def tearDownClass(cls):
        pass

    def setUp(self):
        self.srv = Server()
        self.srv.start()

    def tearDown(self):
        self.srv.stop()

    def stored_then_second(self, model, seed):
        """Request "a" on toks(seed, 3 * 64 + 10) stored under model by a
        first engine (stopped after), and a second engine on model whose
        blocks lie elsewhere (block_offset 17), both with a 2 s timeout.
        Returns (prompt, second engine)."""
        e1 = engine.Engine(engine.EngineSpec(
            socket=self.srv.sock, model=model, timeout_ms=2000))
        p = toks(seed, 3 * 64 + 10)
        try:
            e1.run("a", p)
        finally:
            e1.stop()
        return p, engine.Engine(engine.EngineSpec(
            socket=self.srv.sock, model=model, block_offset=17,
            timeout_ms=2000))

    def test_server_killed_mid_request_recomputes_without_hanging(self):
        p, e2 = self.stored_then_second("driver/kill", 7)
        try:
            from vllm.v1.request import Request
            req = Request("b", p)
            ext, _ = e2.sched.get_num_new_matched_tokens(req, 0)
            self.assertEqual(ext, 192)
            # Now the server dies between the scheduler's pin and the
            # worker's load.
            self.srv.proc.send_signal(signal.SIGKILL)
            self.srv.proc.wait(10)
            t0 = time.monotonic()
            r = e2.run("b", p)
            took = time.monotonic() - t0
            # The connector asked again: no server, no hit, full compute.
            self.assertEqual(r["external_tokens"], 0)
            self.assertLess(took, 10.0)
        finally:
            e2.stop()

    def test_server_killed_mid_layerwise_save_publishes_nothing(self):
        spec = engine.EngineSpec(socket=self.srv.sock, model="driver/kill3",
                                 timeout_ms=2000,
                                 extra={"kvring_layerwise": True})
        e = engine.Engine(spec)
        try:
            e.worker.call("kill_at_layer", (self.srv.proc.pid, 1))
            t0 = time.monotonic()
            r = e.run("a", toks(9, 2 * 64 + 5))
            self.assertLess(time.monotonic() - t0, 15.0)
            self.assertEqual(r["errors"], [])
            self.assertTrue(e.worker.alive(), "the engine died with kvring")
            self.srv.proc.wait(10)
            # The engine goes on without the cache.
            self.assertEqual(e.run("b", toks(10, 70))["external_tokens"], 0)
        finally:
            e.stop()

    def test_load_fails_cleanly_when_server_dies_after_scheduling(self):
        p, e2 = self.stored_then_second("driver/kill2", 8)
        try:
            orig = e2.sched.build_connector_meta
            srv = self.srv

            def meta_then_kill(so):
                m = orig(so)
                if m.loads:  # the worker gets the lease of a dead server
                    srv.proc.send_signal(signal.SIGKILL)
                    srv.proc.wait(10)
                return m
            e2.sched.build_connector_meta = meta_then_kill
            t0 = time.monotonic()
            r = e2.run("b", p)
            took = time.monotonic() - t0
            self.assertEqual(r["external_tokens"], 192)
            # The load failed, reported its blocks, and vLLM recomputed.
            self.assertEqual(r["errors"], sorted(r["block_ids"][:12]))
            self.assertEqual(r["recomputed"], len(p))
            self.assertLess(took, 15.0)
            got = e2.kv_of(r["block_ids"], len(p))
            self.assertTrue(torch.equal(got, engine.model_kv(
                e2.spec, p, list(range(len(p))))))
        finally:
            e2.stop()


REDIS = "/usr/bin/redis-server"


@unittest.skipUnless(os.access(REDIS, os.X_OK),
                     "redis-server not installed (scripts/setup.sh deps "
                     "installs it)")
class L2ConnectorTest(unittest.TestCase):
    """Two hosts' kvringd share chunks through a real redis-server; the
    connector on the second reads through L2 (kvring_l2) and answers
    vLLM "ask again" while the chunks are loading."""

    @classmethod
    def setUpClass(cls):
        import subprocess
        import tempfile
        cls.dir = tempfile.mkdtemp(prefix="kvring-l2py-")
        cls.rsock = os.path.join(cls.dir, "redis.sock")
        cls.redis = subprocess.Popen(
            [REDIS, "--port", "0", "--unixsocket", cls.rsock,
             "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
             "--dir", cls.dir], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        for _ in range(400):
            if os.path.exists(cls.rsock):
                break
            time.sleep(0.01)
        cls.hosts = []
        for deadline in ("200", "1"):
            srv = Server()
            # Host b answers a read-through lookup after 1 ms, well
            # before 2 MiB chunks can come from Redis: "ask again".
            srv.extra = ["--l2", "unix://" + cls.rsock,
                         "--l2-deadline-ms", deadline]
            srv.start()
            cls.hosts.append(srv)

    @classmethod
    def tearDownClass(cls):
        import shutil
        for srv in cls.hosts:
            srv.stop()
        cls.redis.terminate()
        cls.redis.wait(10)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_other_host_loads_bit_exact_when_chunks_came_through_redis(self):
        import subprocess
        a, b = self.hosts
        p = toks(12, 3 * 64 + 5)
        big = dict(model="driver/l2", layers=8, kv_heads=8, head_size=128)
        ea = engine.Engine(engine.EngineSpec(socket=a.sock, **big))
        try:
            ea.run("a", p)
        finally:
            ea.stop()
        # Uploads are write-behind: wait until Redis holds the 3 chunks.
        for _ in range(500):
            n = subprocess.run(["redis-cli", "-s", self.rsock, "dbsize"],
                               stdout=subprocess.PIPE).stdout.strip()
            if n and int(n) >= 3:
                break
            time.sleep(0.01)
        self.assertGreaterEqual(int(n), 3, "the chunks never reached Redis")
        spec = engine.EngineSpec(socket=b.sock, l2=True, block_offset=21,
                                 **big)
        eb = engine.Engine(spec)
        try:
            r = eb.run("b", p)
            # vLLM was told to ask again while the chunks loaded.
            self.assertGreater(eb.asked_again, 0)
            self.assertEqual(r["external_tokens"], 192)
            self.assertEqual(r["errors"], [])
            got = eb.kv_of(r["block_ids"], 192)
            self.assertTrue(torch.equal(got, engine.model_kv(
                spec, p, list(range(192)))))
        finally:
            eb.stop()
        # Without kvring_l2, a third host's engine would not have looked
        # in Redis: host b's L1 now holds the chunks, host a never lost
        # them, so check the flag mattered on a fresh key set instead.
        p2 = toks(13, 2 * 64 + 1)
        ea = engine.Engine(engine.EngineSpec(socket=a.sock, **big))
        try:
            ea.run("a2", p2)
        finally:
            ea.stop()
        time.sleep(0.3)
        eb = engine.Engine(engine.EngineSpec(socket=b.sock, block_offset=7,
                                             **big))
        try:
            self.assertEqual(eb.run("b2", p2)["external_tokens"], 0)
        finally:
            eb.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
