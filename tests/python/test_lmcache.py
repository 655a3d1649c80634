#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tests of kvring.lmcache, LMCache's engine-driven transfer context on
kvringd, against real kvringd processes, through the stand-in lmcache
package (tests/python/lmcache/).

LMCache's own worker-side tests of its SHM context
(tests/v1/multiprocess: the tensor view over a slot, the store/retrieve
flow, a missing segment, the factory's fallbacks, idempotent close) and
the server-side contract its worker relies on (all chunks cached gives
([], []) and no pending entry, a commit without prepare fails,
chunk_indices name the chunks to write, unregistering releases pending
reservations) are re-expressed here for kvring, plus the seed review's
bugs: idempotent store of existing keys, double close, race-free pending
tables, no leak when a worker times out between prepare and commit.

    KVRING_LIB=<build>/worker/libkvring.so KVRINGD=<build>/server/kvringd \\
        /usr/bin/python3 tests/python/test_lmcache.py
"""

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from unittest import mock
from unittest.mock import MagicMock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the stand-in lmcache package

from test_binding import (REPO, Server, ServerTestCase,  # noqa: E402
                          run_without_stand_ins)

sys.path.insert(0, os.path.join(REPO, "worker", "python"))

import torch  # noqa: E402

import kvring.lmcache as klm  # noqa: E402
from kvring.lmcache import (KvringEngineDrivenContext,  # noqa: E402
                            create_engine_driven_context)
from kvring.torch import ChunkLayout, KvringContext  # noqa: E402
from lmcache.v1.distributed.api import MemoryLayoutDesc  # noqa: E402
from lmcache.v1.multiprocess.custom_types import (  # noqa: E402
    IPCCacheServerKey)
from lmcache.v1.multiprocess.transfer_context.base import (  # noqa: E402
    EngineDrivenContext, EngineDrivenContextMetadata)

torch.set_num_threads(1)
L, T, HID = 2, 16, 128          # layers, chunk tokens, hidden (2 x 64)
SHAPE = [2, L, T, HID]


def metadata(shape=SHAPE, dtype=torch.float16, mla=False, block=4):
    return EngineDrivenContextMetadata(
        layout_desc=MemoryLayoutDesc(shapes=[torch.Size(shape)],
                                     dtypes=[dtype]),
        block_size=block, use_mla=mla)


def key(r, chunks=2, start=0, salt="", worker=0, world=1, model="m",
        end=None):
    toks = [(r * 7919 + j * 104729) % 50000 for j in range(chunks * T)]
    return IPCCacheServerKey.from_token_ids(
        model, world, worker, toks, start=start,
        end=len(toks) if end is None else end, request_id="req",
        cache_salt=salt)


def chunk(r, i, shape=SHAPE, dtype=torch.float16):
    g = torch.Generator().manual_seed(r * 1000 + i)
    return torch.randn(shape, generator=g).to(dtype)


class ServerCase(ServerTestCase):
    server_pool = "64M"

    def ctx(self, md=None, **kw):
        c = KvringEngineDrivenContext(md or metadata(), MagicMock(), 3.0,
                                      self.srv.sock, **kw)
        self.addCleanup(c.close)
        return c

    def store(self, ctx, k, r):
        res = ctx.prepare_store(k, 1)
        self.assertIsNotNone(res)
        views, idx = res
        for v, i in zip(views, idx):
            v.copy_(chunk(r, i))
        if views:
            self.assertTrue(ctx.commit_store(k, 1, views))
        return idx


class ShmContextTest(ServerCase):
    """LMCache's worker-side SHM context tests, for kvring."""

    def test_context_is_lmcache_engine_driven_context(self):
        self.assertIsInstance(self.ctx(), EngineDrivenContext)
        self.assertEqual(self.ctx().layout_desc, metadata().layout_desc)

    def test_tensor_view_is_the_slot_in_the_layouts_shape(self):
        ctx = self.ctx()
        k = key(1, chunks=1)
        views, idx = ctx.prepare_store(k, 1)
        self.assertEqual(idx, [0])
        self.assertEqual(list(views[0].shape), SHAPE)
        self.assertEqual(views[0].dtype, torch.float16)
        views[0].copy_(chunk(1, 0))
        self.assertTrue(ctx.commit_store(k, 1, views))
        got = ctx.prepare_retrieve(k, 1)
        self.assertTrue(torch.equal(got[0], chunk(1, 0)))
        self.assertTrue(ctx.commit_retrieve(k, 1))

    def test_store_retrieve_flow_across_contexts_and_processes(self):
        a = self.ctx()
        k = key(2, chunks=3)
        self.assertEqual(self.store(a, k, 2), [0, 1, 2])
        # Another worker process reads it.
        code = ("import sys, torch; sys.path[:0] = [%r, %r]\n"
                "import test_lmcache as t\n"
                "from unittest.mock import MagicMock\n"
                "c = t.KvringEngineDrivenContext(t.metadata(), MagicMock(), "
                "3.0, %r)\n"
                "v = c.prepare_retrieve(t.key(2, chunks=3), 9)\n"
                "ok = v is not None and all(torch.equal(x, t.chunk(2, i)) "
                "for i, x in enumerate(v))\n"
                "print(ok and c.commit_retrieve(t.key(2, chunks=3), 9))\n"
                "c.close()\n" % (HERE, os.path.join(REPO, "worker", "python"),
                                 self.srv.sock))
        out = subprocess.run([sys.executable, "-c", code], env=os.environ,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout.strip(), "True", out.stderr)

    def test_init_raises_when_the_socket_is_missing(self):
        with self.assertRaisesRegex(FileNotFoundError,
                                    "No such file or directory"):
            KvringEngineDrivenContext(metadata(), MagicMock(), 1.0,
                                      "/tmp/kvring-missing-%d.sock"
                                      % os.getpid())

    def test_factory_falls_back_to_by_value_without_socket_info(self):
        c = create_engine_driven_context(metadata(), MagicMock(), 1.0,
                                         shm_name="", pool_size=0)
        self.addCleanup(c.close)
        self.assertTrue(c.by_value)
        self.assertIsNone(c.prepare_store(key(3), 1))

    def test_factory_use_pickle_ignores_a_valid_socket(self):
        c = create_engine_driven_context(metadata(), MagicMock(), 1.0,
                                         shm_name=self.srv.sock,
                                         pool_size=4096, use_pickle=True)
        self.addCleanup(c.close)
        self.assertTrue(c.by_value)
        c2 = create_engine_driven_context(metadata(), MagicMock(), 1.0,
                                          shm_name="kvring:" + self.srv.sock,
                                          pool_size=4096)
        self.addCleanup(c2.close)
        self.assertFalse(c2.by_value)

    def test_factory_falls_back_to_by_value_when_the_socket_is_missing(self):
        c = create_engine_driven_context(
            metadata(), MagicMock(), 1.0,
            shm_name="/tmp/kvring-missing-%d.sock" % os.getpid(),
            pool_size=4096)
        self.addCleanup(c.close)
        self.assertTrue(c.by_value)
        self.assertFalse(c.commit_store(key(4), 1, [chunk(4, 0),
                                                    chunk(4, 1)]))

    def test_socket_of_maps_lmcache_segment_names_to_kvringd(self):
        with mock.patch.dict(os.environ, {"KVRING_SOCKET": "/run/k.sock"}):
            self.assertEqual(klm.socket_of("/tmp/x.sock"), "/tmp/x.sock")
            self.assertEqual(klm.socket_of("kvring:/tmp/y.sock"),
                             "/tmp/y.sock")
            for name in ("", "kvring:", "lmcache_l1_pool_x"):
                self.assertEqual(klm.socket_of(name), "/run/k.sock")

    def test_a_with_block_closes_the_context(self):
        with KvringEngineDrivenContext(metadata(), MagicMock(), 3.0,
                                       self.srv.sock) as c:
            views, idx = c.prepare_store(key(6), 1)
        self.assertTrue(all(v.numel() == 0 for v in views))
        self.assertIsNone(c.prepare_store(key(6), 1))
        self.assertIsNone(self.ctx().prepare_retrieve(key(6), 1))

    def test_close_is_idempotent(self):
        c = self.ctx()
        self.store(c, key(5), 5)
        c.close()
        c.close()
        self.assertIsNone(c.prepare_retrieve(key(5), 1))


class ContractTest(ServerCase):
    """The server-side contract LMCache's worker relies on."""

    def test_all_chunks_cached_gives_empty_lists_and_no_pending(self):
        ctx = self.ctx()
        k = key(10)
        self.store(ctx, k, 10)
        # A restarted worker sending the same prompt again: a success.
        ctx2 = self.ctx()
        self.assertEqual(ctx2.prepare_store(k, 1), ([], []))
        self.assertEqual(ctx2.pending, (0, 0))
        # A commit without a matching prepare fails, as LMCache's.
        self.assertFalse(ctx2.commit_store(k, 1, []))

    def test_chunk_indices_name_only_the_chunks_to_write(self):
        ctx = self.ctx()
        # Chunk 1 alone first (a key whose range is chunk 1).
        k1 = key(11, chunks=2, start=T, end=2 * T)
        v1, idx1 = ctx.prepare_store(k1, 1)
        self.assertEqual(idx1, [0])            # chunk 0 of the range
        v1[0].copy_(chunk(11, 1))              # is the prompt's chunk 1
        self.assertTrue(ctx.commit_store(k1, 1, v1))
        k = key(11, chunks=3)
        views, idx = ctx.prepare_store(k, 2)
        self.assertEqual(idx, [0, 2])
        for v, i in zip(views, idx):
            v.copy_(chunk(11, i))
        self.assertTrue(ctx.commit_store(k, 2, views))
        got = ctx.prepare_retrieve(k, 2)
        self.assertEqual(len(got), 3)
        self.assertTrue(torch.equal(got[0], chunk(11, 0)))
        self.assertTrue(torch.equal(got[1], chunk(11, 1)))
        self.assertTrue(torch.equal(got[2], chunk(11, 2)))
        self.assertTrue(ctx.commit_retrieve(k, 2))

    def test_close_releases_pending_reservations_and_pins(self):
        a = self.ctx()
        k = key(12)
        self.store(a, key(13), 13)
        views, idx = a.prepare_store(k, 1)        # reserved, not committed
        self.assertIsNotNone(a.prepare_retrieve(key(13), 1))  # pinned
        self.assertEqual(a.pending, (1, 1))
        a.close()
        self.assertTrue(all(v.numel() == 0 for v in views))  # emptied
        b = self.ctx()
        self.assertIsNone(b.prepare_retrieve(k, 1))  # nothing published
        views, idx = b.prepare_store(k, 1)         # and not BUSY
        self.assertEqual(idx, [0, 1])

    def test_a_partial_hit_is_a_miss_and_unpins(self):
        ctx = self.ctx()
        self.store(ctx, key(14, chunks=1), 14)
        self.assertIsNone(ctx.prepare_retrieve(key(14, chunks=2), 1))
        self.assertEqual(ctx.pending, (0, 0))
        self.assertIsNone(ctx.prepare_retrieve(key(15), 1))

    def test_commit_retrieve_without_prepare_is_false(self):
        self.assertFalse(self.ctx().commit_retrieve(key(16), 1))

    def test_by_value_store_and_retrieve(self):
        c = self.ctx(by_value=True)
        k = key(17)
        self.assertIsNone(c.prepare_store(k, 1))
        self.assertTrue(c.commit_store(k, 1, [chunk(17, 0), chunk(17, 1)]))
        # Again: already stored, a success.
        self.assertTrue(c.commit_store(k, 1, [chunk(17, 0), chunk(17, 1)]))
        got = c.prepare_retrieve(k, 1)
        self.assertEqual(c.pending, (0, 0))        # copies, unpinned
        self.assertTrue(torch.equal(got[1], chunk(17, 1)))
        self.assertTrue(c.commit_retrieve(k, 1))
        # The zero-copy context of the same namespace sees the chunks.
        z = self.ctx()
        self.assertEqual(z.prepare_store(k, 1), ([], []))

    def test_by_value_bf16_chunks_round_trip(self):
        md = metadata(dtype=torch.bfloat16)
        c = self.ctx(md, by_value=True)
        k = key(22)
        data = [chunk(22, i, dtype=torch.bfloat16) for i in range(2)]
        self.assertTrue(c.commit_store(k, 1, data))
        got = self.ctx(md).prepare_retrieve(k, 1)
        self.assertEqual(got[0].dtype, torch.bfloat16)
        self.assertTrue(torch.equal(got[0], data[0]))
        self.assertTrue(torch.equal(got[1], data[1]))

    def test_salted_keys_miss_other_tenants(self):
        ctx = self.ctx()
        self.store(ctx, key(18, salt="alice"), 18)
        self.assertIsNone(ctx.prepare_retrieve(key(18, salt="bob"), 1))
        self.assertIsNone(ctx.prepare_retrieve(key(18), 1))
        got = ctx.prepare_retrieve(key(18, salt="alice"), 1)
        self.assertIsNotNone(got)
        self.assertTrue(ctx.commit_retrieve(key(18, salt="alice"), 1))

    def test_worker_ranks_have_their_own_chunks(self):
        ctx = self.ctx()
        self.store(ctx, key(19, worker=0, world=2), 19)
        self.assertIsNone(ctx.prepare_retrieve(key(19, worker=1, world=2),
                                               1))

    def test_mla_chunks(self):
        md = metadata(shape=[L, T, 96], mla=True)
        ctx = self.ctx(md)
        k = key(20)
        views, idx = ctx.prepare_store(k, 1)
        self.assertEqual(list(views[0].shape), [L, T, 96])
        for v, i in zip(views, idx):
            v.copy_(chunk(20, i, shape=[L, T, 96]))
        self.assertTrue(ctx.commit_store(k, 1, views))
        got = ctx.prepare_retrieve(k, 1)
        self.assertTrue(torch.equal(got[1], chunk(20, 1, shape=[L, T, 96])))
        self.assertTrue(ctx.commit_retrieve(k, 1))

    def test_chunks_are_kvring_vllm_chunks_when_heads_are_given(self):
        # kvring.vllm's layout and key derivation: the same object.
        lt = ChunkLayout(layers=L, kv_heads=2, head_size=64, dtype="fp16",
                         chunk_tokens=T)
        k = key(21)
        with KvringContext(lt, model="m", socket=self.srv.sock) as kc:
            n = kc.store_chunks(list(k.token_ids), [chunk(21, 0),
                                                    chunk(21, 1)])
            self.assertEqual(n, 2)
        ctx = self.ctx(kv_heads=2, head_size=64)
        got = ctx.prepare_retrieve(k, 1)
        self.assertIsNotNone(got)
        self.assertTrue(torch.equal(got[0], chunk(21, 0)))
        self.assertTrue(ctx.commit_retrieve(k, 1))


class ReviewBugTest(ServerCase):
    """The seed review's bugs, each impossible."""

    def test_store_of_existing_keys_is_an_idempotent_success(self):
        k = key(30)
        self.store(self.ctx(), k, 30)
        for _ in range(3):
            c = self.ctx()
            self.assertEqual(c.prepare_store(k, 1), ([], []))
        self.assertTrue(self.ctx(by_value=True).commit_store(
            k, 1, [chunk(30, 0), chunk(30, 1)]))

    def test_double_close_and_close_after_kvringd_died(self):
        srv = Server()
        srv.start()
        self.addCleanup(srv.stop)
        c = KvringEngineDrivenContext(metadata(), MagicMock(), 1.0, srv.sock)
        res = c.prepare_store(key(31), 1)
        self.assertIsNotNone(res)
        srv.proc.kill()
        srv.proc.wait()
        with self.assertLogs("kvring.lmcache", logging.WARNING) as cm:
            self.assertFalse(c.commit_store(key(31), 1, res[0]))
            self.assertIsNone(c.prepare_retrieve(key(31), 1))
            self.assertIsNone(c.prepare_store(key(32), 1))
        self.assertTrue(any(srv.sock in m for m in cm.output), cm.output)
        c.close()
        c.close()

    def test_prepare_store_times_out_as_lmcaches_and_retrieve_misses(self):
        srv = Server()
        srv.start()
        self.addCleanup(srv.stop)
        c = KvringEngineDrivenContext(metadata(), MagicMock(), 0.3, srv.sock)
        self.addCleanup(c.close)
        self.assertIsNotNone(c.prepare_store(key(37), 1))
        os.kill(srv.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with self.assertRaisesRegex(TimeoutError,
                                        "PREPARE_STORE timed out"):
                c.prepare_store(key(38), 1)
            with self.assertLogs("kvring.lmcache", logging.WARNING):
                self.assertIsNone(c.prepare_retrieve(key(37), 1))
            self.assertLess(time.monotonic() - t0, 5)
        finally:
            os.kill(srv.proc.pid, signal.SIGCONT)

    def test_pending_tables_are_race_free_under_threads(self):
        ctx = self.ctx()
        errors = []

        def worker(w):
            try:
                for r in range(15):
                    k = key(1000 + w * 100 + r)
                    views, idx = ctx.prepare_store(k, w)
                    for v, i in zip(views, idx):
                        v.fill_(w)
                    if not ctx.commit_store(k, w, views):
                        errors.append("commit %d %d" % (w, r))
                    got = ctx.prepare_retrieve(k, w)
                    if got is None or not all(bool((g == w).all())
                                              for g in got):
                        errors.append("retrieve %d %d" % (w, r))
                    if not ctx.commit_retrieve(k, w):
                        errors.append("commit_retrieve %d %d" % (w, r))
            except Exception as e:  # reported, not swallowed
                errors.append(repr(e))

        ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(ctx.pending, (0, 0))

    def test_a_worker_that_times_out_between_prepare_and_commit_leaks_nothing(
            self):
        a = self.ctx(pending_timeout=0.2)
        k = key(33)
        views, idx = a.prepare_store(k, 1)
        views[0].fill_(1)
        b = self.ctx()
        self.assertEqual(b.prepare_store(k, 2), ([], []))  # BUSY: a has them
        time.sleep(0.3)
        with self.assertLogs("kvring.lmcache", logging.WARNING):
            self.assertIsNone(a.prepare_retrieve(key(34), 1))  # sweeps
        self.assertEqual(a.pending, (0, 0))
        self.assertTrue(all(v.numel() == 0 for v in views))
        self.assertFalse(a.commit_store(k, 1, []))  # too late: nothing
        self.assertIsNone(b.prepare_retrieve(k, 2))  # nothing published
        views, idx = b.prepare_store(k, 2)           # the slots are free
        self.assertEqual(idx, [0, 1])

    def test_the_same_store_prepared_again_frees_the_first(self):
        a = self.ctx()
        k = key(35)
        v1, _ = a.prepare_store(k, 1)
        v2, idx = a.prepare_store(k, 1)    # a retry after a timeout
        self.assertTrue(all(v.numel() == 0 for v in v1))  # emptied
        self.assertEqual(idx, [0, 1])
        self.assertEqual(a.pending, (1, 0))
        for v, i in zip(v2, idx):
            v.copy_(chunk(35, i))
        self.assertTrue(a.commit_store(k, 1, v2))

    def test_kill9_between_prepare_and_commit_publishes_nothing(self):
        code = ("import os, signal, sys; sys.path[:0] = [%r, %r]\n"
                "import test_lmcache as t\n"
                "from unittest.mock import MagicMock\n"
                "c = t.KvringEngineDrivenContext(t.metadata(), MagicMock(), "
                "3.0, %r)\n"
                "v, i = c.prepare_store(t.key(36), 1)\n"
                "[x.fill_(7) for x in v]\n"
                "os.kill(os.getpid(), signal.SIGKILL)\n"
                % (HERE, os.path.join(REPO, "worker", "python"),
                   self.srv.sock))
        p = subprocess.run([sys.executable, "-c", code], env=os.environ,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        b = self.ctx()
        self.assertIsNone(b.prepare_retrieve(key(36), 1))
        deadline = time.monotonic() + 10
        while True:
            res = b.prepare_store(key(36), 1)
            if res and res[1] == [0, 1]:
                break
            self.assertLess(time.monotonic(), deadline,
                            "the dead worker's reservations are held")
            time.sleep(0.05)


class BadInputTest(ServerCase):
    def test_metadata_kvring_cannot_serve_is_refused(self):
        for md, msg in ((metadata(shape=[2, 4]), "KV_2LTD"),
                        (metadata(shape=SHAPE, mla=True), "use_mla=True"),
                        (metadata(block=5), "block_size 5"),
                        (metadata(dtype=torch.int32), "dtype")):
            with self.assertRaisesRegex(ValueError, msg):
                KvringEngineDrivenContext(md, MagicMock(), 1.0, self.srv.sock)
        md = metadata()
        md.group_layout_descs = [md.layout_desc, md.layout_desc]
        with self.assertRaisesRegex(ValueError, "hybrid"):
            KvringEngineDrivenContext(md, MagicMock(), 1.0, self.srv.sock)
        with self.assertRaisesRegex(ValueError, "kv_heads 3"):
            KvringEngineDrivenContext(metadata(), MagicMock(), 1.0,
                                      self.srv.sock, kv_heads=3)

    def test_bad_keys_and_chunks_raise_and_store_nothing(self):
        ctx = self.ctx()
        with self.assertRaisesRegex(ValueError, "IPCCacheServerKey"):
            ctx.prepare_store(("not", "a", "key"), 1)
        with self.assertRaisesRegex(ValueError, "chunk boundary"):
            ctx.prepare_store(key(40, chunks=3, start=5), 1)
        with self.assertRaisesRegex(ValueError, "outside"):
            ctx.prepare_store(key(40, end=10 * T), 1)
        with self.assertRaisesRegex(ValueError, "worker rank"):
            ctx.prepare_store(key(40, worker=None), 1)
        bv = self.ctx(by_value=True)
        with self.assertRaisesRegex(ValueError, r"torch.float32 tensor of "
                                    r"shape \[2, 2, 16, 128\].*float16"):
            bv.commit_store(key(40), 1, [chunk(40, 0).float(),
                                         chunk(40, 1)])
        with self.assertRaisesRegex(ValueError, "1 chunks for a range of 2"):
            bv.commit_store(key(40), 1, [chunk(40, 0)])
        self.assertEqual(ctx.pending, (0, 0))
        self.assertIsNone(ctx.prepare_retrieve(key(40), 1))

    def test_module_imports_without_lmcache(self):
        out = run_without_stand_ins(
            "import kvring.lmcache as m\n"
            "print(m.LMCACHE_IMPORT_ERROR is not None)\n")
        self.assertEqual(out.stdout.strip(), "True", out.stderr)
        self.assertTrue(klm.LMCACHE_IMPORT_ERROR is None)


if __name__ == "__main__":
    unittest.main(verbosity=2)
