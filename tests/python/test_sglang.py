#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tests of kvring.sglang, the SGLang HiCache storage backend, against
real kvringd processes and real torch host pools, through the stand-in
sglang package (tests/python/sglang/) and the SGLang driver
(tests/python/sglang_engine.py), which loads the backend the way SGLang's
dynamic backend factory does.

    KVRING_LIB=<build>/worker/libkvring.so KVRINGD=<build>/server/kvringd \\
        /usr/bin/python3 tests/python/test_sglang.py
"""

import logging
import os
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the stand-in sglang and vllm packages

from test_binding import (REPO, Server, ServerTestCase,  # noqa: E402
                          run_without_stand_ins)

sys.path.insert(0, os.path.join(REPO, "worker", "python"))

import torch  # noqa: E402

import kvring.sglang as ksg  # noqa: E402
from sglang.srt.mem_cache.hicache_storage import HiCacheStorage  # noqa: E402
from sglang.srt.metrics.collector import StorageMetrics  # noqa: E402

import sglang_engine as se  # noqa: E402
from sglang_engine import Instance, InstanceSpec, host_indices  # noqa: E402

torch.set_num_threads(1)
PS = 16


def toks(r, n):
    return [(r * 7919 + j * 104729) % 50000 for j in range(n)]


class ServerCase(ServerTestCase):
    server_pool = "64M"

    def spec(self, **kw):
        kw.setdefault("page_size", PS)
        return InstanceSpec(socket=self.srv.sock, **kw)

    def inst(self, **kw):
        i = Instance(self.spec(**kw))
        self.addCleanup(i.close)
        return i

    def backed_up(self, r, **kw):
        """An instance (spec from kw) that computed and backed up the two
        pages of request r's tokens; returns it and the tokens."""
        t = toks(r, PS * 2)
        a = self.inst(**kw)
        a.compute(t, [0, 1])
        self.assertEqual(a.backup(t, [0, 1]), [True, True])
        return a, t


# Runs in a forked child: one SGLang instance computes and backs up a
# prompt's pages.
def _store_instance(spec, tokens, pids):
    i = Instance(spec)
    i.compute(tokens, pids)
    res = i.backup(tokens, pids)
    i.close()
    return res


# Runs in a forked child: another instance prefetches them into its own
# pages and checks them against the model, bit for bit.
def _load_instance(spec, tokens, pids):
    i = Instance(spec)
    got = i.prefetch(tokens, pids)
    eq = i.pages_equal_model(tokens, pids)
    i.close()
    return got, eq


class FactoryTest(ServerCase):
    def test_a_with_block_closes_the_backend(self):
        i = self.inst()
        with i.backend as b:
            self.assertIs(b, i.backend)
        t = toks(10, PS)
        i.compute(t, [0])
        self.assertEqual(i.backup(t, [0]), [False])  # closed: no store

    def test_dynamic_factory_loads_a_hicache_storage_subclass(self):
        i = self.inst()
        self.assertIsInstance(i.backend, HiCacheStorage)
        self.assertIsInstance(i.backend, ksg.KvringHiCacheStorage)

    def test_module_imports_without_sglang_and_says_what_is_needed(self):
        # No stand-in on the path: kvring.sglang still imports, and the
        # class says it needs SGLang when constructed.
        out = run_without_stand_ins(
            "import kvring.sglang as m\n"
            "assert m.SGLANG_IMPORT_ERROR is not None\n"
            "try:\n    m.KvringHiCacheStorage(None, {})\n"
            "except ImportError as e:\n    print('needs:', e)\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("needs SGLang", out.stdout)


class ShareTest(ServerCase):
    """Two SGLang instances, in separate processes, share pages."""

    def _share(self, a, b, r):
        t = toks(r, PS * 4)
        res = se.run_in_child(_store_instance, self.spec(**a), t,
                              [3, 5, 7, 9])
        self.assertEqual(res, [True] * 4)
        got, eq = se.run_in_child(_load_instance, self.spec(**b), t,
                                  [0, 1, 2, 3])
        self.assertEqual(got, [True] * 4)
        self.assertEqual(eq, [True] * 4)

    def test_pages_are_bit_exact_from_page_first_to_layer_first(self):
        self._share({"layout": "page_first"}, {"layout": "layer_first"}, 1)

    def test_pages_are_bit_exact_from_layer_first_to_page_first_direct_bf16(
            self):
        self._share({"layout": "layer_first", "dtype": "bfloat16"},
                    {"layout": "page_first_direct", "dtype": "bfloat16"}, 2)

    def test_mla_pages_are_shared_across_tp_ranks(self):
        # MLA: every rank holds the same latent cache, so the namespace
        # has no tp rank and rank 1 reads what rank 0 stored.
        self._share({"mla": True, "head_dim": 96, "layout": "page_first",
                     "tp_rank": 0, "tp_size": 2},
                    {"mla": True, "head_dim": 96, "layout": "layer_first",
                     "tp_rank": 1, "tp_size": 2}, 3)

    def test_mha_pages_are_not_shared_across_tp_ranks(self):
        _, t = self.backed_up(4, tp_rank=0, tp_size=2)
        b = self.inst(tp_rank=1, tp_size=2)
        self.assertEqual(b.prefetch(t, [0, 1]), [False, False])
        self.assertTrue(b.untouched([0, 1]))

    def test_pp_stages_do_not_share_pages(self):
        _, t = self.backed_up(5, pp_rank=0, pp_size=2)
        b = self.inst(pp_rank=1, pp_size=2)
        self.assertEqual(b.backend.batch_exists(
            se.page_hashes(t, PS)), 0)

    def test_batch_exists_counts_the_leading_run_of_stored_pages(self):
        t = toks(6, PS * 4)
        keys = se.page_hashes(t, PS)
        a = self.inst()
        a.compute(t, [0, 1, 2, 3])
        b = a.backend
        self.assertEqual(b.batch_set_v1([keys[0], keys[1], keys[3]],
                                        host_indices([0, 1, 3], PS)),
                         [True] * 3)
        self.assertEqual(b.batch_exists(keys), 2)
        self.assertTrue(b.exists(keys[3]))
        self.assertFalse(b.exists(keys[2]))
        # A read stops at the gap: page 3 is stored but not read.
        c = self.inst()
        self.assertEqual(c.backend.batch_get_v1(keys, host_indices(
            [4, 5, 6, 7], PS)), [True, True, False, False])
        self.assertTrue(c.untouched([6, 7]))

    def test_storing_pages_again_succeeds_and_writes_nothing(self):
        a, t = self.backed_up(7)
        n = a.backend.counters["pages_stored"]
        self.assertEqual(a.backup(t, [0, 1]), [True, True])
        self.assertEqual(a.backend.counters["pages_stored"], n)
        self.assertEqual(a.backend.counters["pages_existing"], 2)

    def test_set_and_get_pages_as_tensors_meet_the_zero_copy_path(self):
        # set() takes SGLang's flat page (get_data_page order of a
        # page_first pool); batch_get_v1 of a layer_first instance reads
        # it; get() gives it back in page_first_direct's order.
        t = toks(8, PS * 2)
        keys = se.page_hashes(t, PS)
        a = self.inst(layout="page_first")
        a.compute(t, [2, 4])
        for i, p in enumerate([2, 4]):
            self.assertTrue(a.backend.set(keys[i],
                                          se.flat_page(a.pool, p, False)))
        b = self.inst(layout="layer_first")
        self.assertEqual(b.backend.batch_get_v1(keys, host_indices(
            [0, 1], PS)), [True, True])
        self.assertEqual(b.pages_equal_model(t, [0, 1]), [True, True])
        c = self.inst(layout="page_first_direct")
        got = c.backend.get(keys[1])
        self.assertIsNotNone(got)
        want = se.model_page(c.spec, t, 1)  # direct's flat order is it
        self.assertTrue(torch.equal(got.view(want.shape), want))
        self.assertIsNone(c.backend.get("never-stored"))
        self.assertTrue(c.backend.batch_set([], []))

    def test_backup_and_prefetch_threads_share_one_backend(self):
        # HiCache's backup and prefetch threads call one backend at once.
        import threading
        a = self.inst(pages=32)
        errors = []

        def backup(r):
            t = toks(300 + r, PS * 2)
            a.compute(t, [2 * r, 2 * r + 1])
            if a.backup(t, [2 * r, 2 * r + 1]) != [True, True]:
                errors.append("backup %d" % r)

        def prefetch(r):
            t = toks(300 + r, PS * 2)
            deadline = time.monotonic() + 20
            while a.backend.batch_exists(se.page_hashes(t, PS)) < 2:
                if time.monotonic() > deadline:
                    errors.append("never stored %d" % r)
                    return
                time.sleep(0.001)
            dst = [16 + 2 * r, 17 + 2 * r]
            if a.prefetch(t, dst) != [True, True] or \
                    a.pages_equal_model(t, dst) != [True, True]:
                errors.append("prefetch %d" % r)

        ts = [threading.Thread(target=f, args=(r,)) for r in range(8)
              for f in (backup, prefetch)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        self.assertEqual(errors, [])

    def test_get_stats_gives_sglang_storage_metrics(self):
        t = toks(9, PS * 3)
        a = self.inst()
        a.compute(t, [0, 1, 2])
        a.backup(t, [0, 1, 2])
        a.prefetch(t, [3, 4, 5])
        m = a.backend.get_stats()
        self.assertIsInstance(m, StorageMetrics)
        self.assertEqual(m.backup_pgs, [3])
        self.assertEqual(m.prefetch_pgs, [3])
        self.assertEqual(len(m.backup_bandwidth), 1)
        self.assertEqual(a.backend.get_stats().backup_pgs, [])
        a.backend.clear()
        self.assertEqual(a.backend.counters["pages_stored"], 0)
        # clear() leaves the shared pages in kvringd.
        self.assertEqual(a.backend.batch_exists(se.page_hashes(t, PS)), 3)


class TenantTest(ServerCase):
    def test_a_salted_tenant_misses_another_tenants_pages(self):
        t = toks(20, PS * 3)
        a = self.inst(extra={"kvring_salt": "tenant-a"})
        a.compute(t, [0, 1, 2])
        self.assertEqual(a.backup(t, [0, 1, 2]), [True] * 3)
        for extra in ({"kvring_salt": "tenant-b"}, {}):
            b = self.inst(extra=extra)
            self.assertEqual(b.prefetch(t, [0, 1, 2]), [False] * 3)
            self.assertTrue(b.untouched([0, 1, 2]))
        c = self.inst(extra={"kvring_salt": "tenant-a"})
        self.assertEqual(c.prefetch(t, [0, 1, 2]), [True] * 3)
        self.assertEqual(c.pages_equal_model(t, [0, 1, 2]), [True] * 3)

    def test_page_key_depends_on_the_salt_only_when_there_is_one(self):
        self.assertEqual(ksg.page_key("abc"), ksg.page_key("abc", ""))
        self.assertNotEqual(ksg.page_key("abc"), ksg.page_key("abc", "s"))
        self.assertNotEqual(ksg.page_key("abc", "s"),
                            ksg.page_key("abc", "t"))
        self.assertEqual(len(ksg.page_key("abc")), 16)


# Runs in a forked child: an instance dies by SIGKILL inside
# batch_set_v1, after its pages were copied into the reserved slots and
# before the commit.
def _die_mid_set(spec, tokens, pids):
    i = Instance(spec)
    i.compute(tokens, pids)
    kv = i.backend._geo.kv
    real = kv.gather

    def gather_then_die(*a, **kw):
        real(*a, **kw)
        os.kill(os.getpid(), signal.SIGKILL)

    kv.gather = gather_then_die
    i.backup(tokens, pids)
    return "survived"


class KillTest(ServerCase):
    def test_kill9_mid_batch_set_v1_publishes_nothing(self):
        import multiprocessing
        t = toks(30, PS * 4)
        spec = self.spec()
        p = multiprocessing.get_context("fork").Process(
            target=_die_mid_set, args=(spec, t, [0, 1, 2, 3]))
        p.start()
        p.join(60)
        self.assertEqual(p.exitcode, -signal.SIGKILL)
        b = self.inst()
        keys = se.page_hashes(t, PS)
        self.assertEqual(b.backend.batch_exists(keys), 0)
        self.assertEqual(b.backend.batch_get_v1(keys, host_indices(
            [4, 5, 6, 7], PS)), [False] * 4)
        self.assertTrue(b.untouched([4, 5, 6, 7]))
        # The dead instance's reservations were freed: the same pages
        # store (not BUSY) once kvringd has seen the hang-up.
        b.compute(t, [0, 1, 2, 3])
        deadline = time.monotonic() + 10
        while True:
            self.assertEqual(b.backup(t, [0, 1, 2, 3]), [True] * 4)
            if b.backend.counters["pages_stored"] == 4:
                break
            self.assertLess(time.monotonic(), deadline,
                            "the dead instance's reservations are held")
            time.sleep(0.05)
        c = self.inst()
        self.assertEqual(c.prefetch(t, [8, 9, 10, 11]), [True] * 4)
        self.assertEqual(c.pages_equal_model(t, [8, 9, 10, 11]), [True] * 4)


class VllmTest(ServerCase):
    """A vLLM engine (kvring.vllm through tests/python/engine.py) and an
    SGLang instance of the same model, same dtype and same geometry, with
    SGLang's page size equal to vLLM's chunk size: they share kvringd,
    its pool and even the namespace, and not one object, because vLLM's
    keys are derived from token ids and SGLang's from SGLang's page
    keys."""

    def test_vllm_stores_and_sglang_reads_nothing_and_back(self):
        import engine
        t = toks(40, 64 * 2)
        vspec = engine.EngineSpec(socket=self.srv.sock,
                                  model="shared/llama-mini", chunk_tokens=64)
        e1 = engine.Engine(vspec)
        try:
            r = e1.run("r1", t)
            self.assertEqual(r["external_tokens"], 0)
        finally:
            e1.stop()
        s = self.inst(model="shared/llama-mini", page_size=64, pages=4)
        self.assertEqual(s.backend.batch_exists(se.page_hashes(t, 64)), 0)
        self.assertEqual(s.prefetch(t, [0, 1]), [False, False])
        self.assertTrue(s.untouched([0, 1]))
        # The other way: SGLang stores another prompt, vLLM misses it.
        t2 = toks(41, 64 * 2)
        s.compute(t2, [2, 3])
        self.assertEqual(s.backup(t2, [2, 3]), [True, True])
        e2 = engine.Engine(vspec)
        try:
            self.assertEqual(e2.run("r2", t2)["external_tokens"], 0)
            # ...while vLLM's own chunks of the first prompt still hit.
            self.assertGreater(e2.run("r3", t)["external_tokens"], 0)
        finally:
            e2.stop()


class DeadServerTest(unittest.TestCase):
    def test_dead_kvringd_misses_and_refuses_stores_with_a_log_line(self):
        srv = Server()
        srv.start()
        self.addCleanup(srv.stop)
        spec = InstanceSpec(socket=srv.sock, page_size=PS,
                            extra={"kvring_retry_ms": 50})
        a = Instance(spec)
        self.addCleanup(a.close)
        t = toks(50, PS * 2)
        a.compute(t, [0, 1])
        self.assertEqual(a.backup(t, [0, 1]), [True, True])
        srv.proc.kill()
        srv.proc.wait()
        keys = se.page_hashes(t, PS)
        with self.assertLogs("kvring.sglang", logging.WARNING) as cm:
            self.assertEqual(a.backend.batch_exists(keys), 0)
            self.assertEqual(a.backup(t, [0, 1]), [False, False])
            self.assertEqual(a.backend.batch_get_v1(
                keys, host_indices([2, 3], PS)), [False, False])
            self.assertFalse(a.backend.set(keys[0], se.flat_page(
                a.pool, 0, False)))
            self.assertIsNone(a.backend.get(keys[0]))
        self.assertTrue(any(srv.sock in m for m in cm.output), cm.output)
        self.assertLessEqual(len(cm.output), 2, cm.output)  # once an outage
        self.assertTrue(a.untouched([2, 3]))
        # kvringd comes back on the same socket: the backend reconnects.
        srv.stop()
        srv.start()
        time.sleep(0.1)
        self.assertEqual(a.backup(t, [0, 1]), [True, True])
        self.assertEqual(a.backend.batch_exists(keys), 2)

    def test_kvringd_absent_at_start_is_a_miss_not_an_error(self):
        spec = InstanceSpec(socket="/tmp/kvring-absent-%d.sock" % os.getpid(),
                            page_size=PS, extra={"kvring_retry_ms": 50})
        with self.assertLogs("kvring.sglang", logging.WARNING) as cm:
            a = Instance(spec)
        self.addCleanup(a.close)
        self.assertIn(spec.socket, cm.output[0])
        t = toks(51, PS)
        self.assertEqual(a.backend.batch_exists(se.page_hashes(t, PS)), 0)
        self.assertEqual(a.backup(t, [0]), [False])


class BadInputTest(ServerCase):
    seq = 60

    def setUp(self):
        self.a = self.inst()
        BadInputTest.seq += 1  # each test its own pages
        self.t = toks(BadInputTest.seq, PS * 2)
        self.keys = se.page_hashes(self.t, PS)
        self.a.compute(self.t, [0, 1])

    def assertNothingStored(self):
        self.assertEqual(self.a.backend.batch_exists(self.keys), 0)

    def test_keys_that_are_not_strings_raise_and_store_nothing(self):
        for bad in ([self.keys[0], 7], [b"bytes", self.keys[1]], "a-str"):
            with self.assertRaisesRegex(ValueError, "string"):
                self.a.backend.batch_set_v1(bad, host_indices([0, 1], PS))
        with self.assertRaisesRegex(ValueError, "string"):
            self.a.backend.batch_exists([1, 2])
        self.assertNothingStored()

    def test_host_indices_of_the_wrong_length_raise_and_store_nothing(self):
        b = self.a.backend
        with self.assertRaisesRegex(ValueError, "needs 32"):
            b.batch_set_v1(self.keys, host_indices([0], PS))
        with self.assertRaisesRegex(ValueError, "needs 32"):
            b.batch_get_v1(self.keys, host_indices([0, 1, 2], PS))
        with self.assertRaisesRegex(ValueError, "page-aligned"):
            b.batch_set_v1(self.keys, host_indices([0, 1], PS) + 1)
        with self.assertRaisesRegex(ValueError, "host pool has 16 pages"):
            b.batch_set_v1(self.keys, host_indices([0, 99], PS))
        with self.assertRaisesRegex(ValueError, "integer"):
            b.batch_set_v1(self.keys, host_indices([0, 1], PS).float())
        self.assertNothingStored()

    def test_calls_before_the_pool_is_registered_raise(self):
        b = se.create_backend(self.spec().storage_config())
        self.addCleanup(b.close)
        with self.assertRaisesRegex(ValueError, "register_mem_pool_host"):
            b.batch_set_v1(self.keys, host_indices([0, 1], PS))
        with self.assertRaisesRegex(ValueError, "register_mem_pool_host"):
            b.batch_get_v1(self.keys, host_indices([0, 1], PS))
        self.assertNothingStored()

    def test_a_page_of_the_wrong_dtype_or_size_names_both(self):
        b = self.a.backend
        with self.assertRaisesRegex(ValueError, "torch.bfloat16.*float16"):
            b.set(self.keys[0], se.flat_page(self.a.pool, 0, False).to(
                torch.bfloat16))
        with self.assertRaisesRegex(ValueError, "4096 elements.*8192"):
            b.set(self.keys[0], se.flat_page(self.a.pool, 0, False)[:4096])
        self.assertNothingStored()

    def test_a_pool_that_does_not_match_raises_naming_both(self):
        b = self.a.backend
        other = se.MHAPool(self.spec(page_size=32, pages=8))
        with self.assertRaisesRegex(ValueError, "page 16.*page 32"):
            b.register_mem_pool_host(other)
        mla = se.MLAPool(self.spec(mla=True))
        with self.assertRaisesRegex(ValueError, "is_mla_model=False"):
            b.register_mem_pool_host(mla)
        ph = se.MHAPool(self.spec(layout="page_head"))
        with self.assertRaisesRegex(ValueError, "'page_head' is not"):
            b.register_mem_pool_host(ph)
        # The first pool is still the registered one, and it works.
        self.assertEqual(self.a.backup(self.t, [0, 1]), [True, True])

    def test_an_unknown_kvring_setting_is_refused(self):
        with self.assertRaisesRegex(ValueError, "kvring_sockt"):
            se.create_backend(self.spec(
                extra={"kvring_sockt": "/x"}).storage_config())

    def test_v2_multi_pool_calls_raise_with_a_sentence(self):
        b = self.a.backend
        for call in (lambda: b.batch_exists_v2(self.keys),
                     lambda: b.batch_get_v2([]),
                     lambda: b.batch_set_v2([])):
            with self.assertRaisesRegex(NotImplementedError, "hybrid"):
                call()


if __name__ == "__main__":
    unittest.main(verbosity=2)
