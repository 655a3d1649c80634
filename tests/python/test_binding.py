#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tests of the Python binding (worker/python/kvring) against a real kvringd.

Runs with the system Python and the standard library only:
    KVRING_LIB=<build>/worker/libkvring.so KVRINGD=<build>/server/kvringd \
        /usr/bin/python3 tests/python/test_binding.py
Without KVRINGD, the kvringd of a build directory of this checkout is used.
Each test class starts its own kvringd on a private socket and segment name
and stops it at the end. Covers: store in one process and retrieve in
another with identical bytes, memoryviews straight over the pool (no copy),
commit on leaving the with-block and abort on an exception, idempotent
store, prefix lookup, leases, copy transport, close twice.
"""

import glob
import hashlib
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "worker", "python"))

import kvring  # noqa: E402

LAYOUT = dict(model="py-test-model", layers=2, kv_heads=2, head_size=64,
              dtype_bytes=2, chunk_tokens=16)
CHUNK = 2 * 2 * 2 * 64 * 2 * 16  # 2 (K,V) x layers x heads x size x dtype x tokens


def kvringd_path():
    p = os.environ.get("KVRINGD")
    if p:
        return p
    for cand in sorted(glob.glob(os.path.join(REPO, "..", "build*", "server",
                                              "kvringd")) +
                       glob.glob(os.path.join(REPO, "build*", "server",
                                              "kvringd"))):
        return cand
    raise unittest.SkipTest("kvringd not found (set KVRINGD)")


def _die_with_parent():
    """In the kvringd child: get SIGTERM when the test process dies.

    A test killed mid-run (a timeout, a Ctrl-C, SIGKILL) must not leave
    its kvringd running; the C suites' t_server does the same.
    """
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG,
                                            int(signal.SIGTERM), 0, 0, 0)


class Server(object):
    def __init__(self):
        tag = "kvring-py%d-%d" % (os.getpid(), int(time.time() * 1000) % 100000)
        self.sock = "/tmp/%s.sock" % tag
        self.name = tag
        self.proc = None
        self.pool = "32M"
        self.extra = []  # more kvringd arguments

    def start(self):
        # The death signal follows the thread that forks, not the process:
        # a server started from a short-lived thread (a Timer) would get
        # SIGTERM as soon as that thread ends, so only the main thread
        # asks for it.
        import threading
        on_death = (_die_with_parent
                    if threading.current_thread() is threading.main_thread()
                    else None)
        self.proc = subprocess.Popen(
            [kvringd_path(), "--socket", self.sock, "--name", self.name,
             "--pool-size", self.pool, "--allow-root", "--no-prefault",
             # Small pages: with huge pages reserved on the host, auto
             # would move the pool off the named /dev/shm backend that
             # these tests check (tests/huge/ covers huge pages).
             "--huge-pages", "off",
             "--log-level", "warn"] + self.extra, stderr=subprocess.DEVNULL,
            preexec_fn=on_death)
        for _ in range(1000):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.sock)
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("kvringd exited at start-up")
                time.sleep(0.01)
            finally:
                s.close()
        raise RuntimeError("kvringd did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for p in (self.sock, self.sock + ".lock",
                  "/dev/shm/%s.ctl" % self.name,
                  "/dev/shm/%s.pool" % self.name):
            try:
                os.unlink(p)
            except OSError:
                pass


def chunk_bytes(key, n=CHUNK):
    """Deterministic bytes for a key (any process can recompute them)."""
    lo, hi = key
    seed = lo.to_bytes(8, "little") + hi.to_bytes(8, "little")
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.blake2b(seed + i.to_bytes(4, "little")).digest()
        i += 1
    return bytes(out[:n])


def tokens(r, nchunks):
    return [(r * 1000003 + j * 2654435761) % (1 << 32)
            for j in range(nchunks * LAYOUT["chunk_tokens"])]


def store_all(c, keys):
    with c.store(keys, [CHUNK] * len(keys)) as tx:
        n = 0
        for (st, view), k in zip(tx.slots, keys):
            if st == kvring.SLOT_OK:
                view[:] = chunk_bytes(k)
                n += 1
    return n


def child_retrieve(sock, keys, transport, q):
    """Runs in another process: connect, retrieve, compare digests."""
    try:
        with kvring.connect(socket=sock, transport=transport,
                            **LAYOUT) as c:
            with c.retrieve(keys) as tx:
                got = [hashlib.sha256(v).hexdigest() for _, v in tx.slots]
        want = [hashlib.sha256(chunk_bytes(k)).hexdigest() for k in keys]
        q.put(("ok" if got == want else "mismatch", len(got)))
    except Exception as e:  # reported to the parent, not swallowed
        q.put(("error", repr(e)))


def child_flip(sock, keys, chunk, q):
    """Runs in another process, without checksums: find chunk's slot, let
    go of it, flip one byte of it in the pool behind the server's back."""
    import ctypes
    try:
        with kvring.connect(socket=sock, checksum="off", **LAYOUT) as c:
            with c.retrieve(keys) as tx:
                ptr = tx._x.slots[chunk].ptr
            b = ctypes.c_char.from_address(ptr + 100)
            b.value = bytes([b.value[0] ^ 0x44])
        q.put("ok")
    except Exception as e:
        q.put(repr(e))


def child_redeem(sock, lease, keys, q):
    try:
        with kvring.connect(socket=sock, **LAYOUT) as c:
            with c.retrieve(lease=lease) as tx:
                ok = all(bytes(v) == chunk_bytes(k)
                         for (_, v), k in zip(tx.slots, keys))
                q.put(("ok" if ok else "mismatch", len(tx)))
    except Exception as e:
        q.put(("error", repr(e)))


def run_without_stand_ins(code):
    """Run code in a fresh python3 that finds worker/python but, with
    PYTHONPATH unset, none of the stand-in engine packages: how kvring
    imports where vLLM, SGLang or LMCache is not installed."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            % os.path.join(REPO, "worker", "python")) + code
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)


class ServerTestCase(unittest.TestCase):
    """Tests that share one kvringd per class (cls.srv): server_pool is
    its --pool-size (None: Server's default), server_extra more
    arguments."""
    server_pool = None
    server_extra = ()

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        if cls.server_pool:
            cls.srv.pool = cls.server_pool
        cls.srv.extra = list(cls.server_extra)
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()


class BindingTest(ServerTestCase):
    def connect(self, **kw):
        return kvring.connect(socket=self.srv.sock, **dict(LAYOUT, **kw))

    def run_child(self, target, *args):
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=target, args=args + (q,))
        p.start()
        res = q.get(timeout=30)
        p.join(30)
        return res

    def test_bytes_match_when_another_process_retrieves(self):
        with self.connect() as c:
            keys = c.keys(tokens(1, 16))
            self.assertEqual(len(keys), 16)
            self.assertEqual(store_all(c, keys), 16)
            self.assertEqual(c.lookup(keys), 16)
            self.assertEqual(c.transport, "shm")
        # A second process, connecting on its own, reads the same bytes.
        self.assertEqual(self.run_child(child_retrieve, self.srv.sock,
                                        list(keys), None), ("ok", 16))

    def test_corrupt_chunk_is_reported_when_a_neighbour_wrote_it(self):
        # A process writes into a committed chunk's pool
        # bytes behind the server's back; checksums catch it.
        import ctypes
        with self.connect(checksum="on") as c:
            keys = c.keys(tokens(40, 3))
            self.assertEqual(store_all(c, keys), 3)
            with self.connect(checksum="off") as evil:
                with evil.retrieve(keys) as tx:
                    ptr = tx._x.slots[1].ptr
                # The neighbour's write, after it let go of the slot.
                b = ctypes.c_char.from_address(ptr + 100)
                b.value = bytes([b.value[0] ^ 0xFF])
            with c.retrieve(keys) as tx:
                self.assertEqual(tx.corrupt, [])  # 'on' checks on request
                self.assertEqual(tx.verify(), 1)
                self.assertEqual(tx.verify(), 1)  # a second verify agrees
                self.assertEqual(tx.corrupt, [1])
                self.assertEqual(tx.slots[1], (kvring.SlotStatus.CORRUPT,
                                               None))
                self.assertEqual(bytes(tx.slots[0][1]), chunk_bytes(keys[0]))
            # Reported at commit: the server checked and dropped it.
            deadline = time.time() + 5
            while c.lookup(keys) != 1 and time.time() < deadline:
                time.sleep(0.01)
            self.assertEqual(c.lookup(keys), 1)
        with self.connect(checksum="verify") as c:
            self.assertEqual(store_all(c, keys), 1)  # stored anew
            with c.retrieve(keys) as tx:
                self.assertEqual(tx.corrupt, [])
        with self.assertRaises(ValueError):
            self.connect(checksum="yes")
        with self.connect() as c, c.retrieve(keys) as tx:
            with self.assertRaises(kvring.KvringError) as cm:
                tx.verify()  # no checksums on this client
            self.assertIn("no checksums", str(cm.exception))

    def test_corrupt_chunk_is_reported_over_the_copy_transport(self):
        # The copy transport sums too: a copy client's stored chunk, damaged
        # in the shared pool by another process, fails verify() in the
        # bytes the socket brought back; 'verify' marks it on arrival.
        with self.connect(transport="copy", checksum="on") as c:
            self.assertEqual((c.transport, c.checksum), ("copy", "on"))
            keys = c.keys(tokens(41, 3))
            self.assertEqual(store_all(c, keys), 3)
            self.assertEqual(self.run_child(child_flip, self.srv.sock,
                                            list(keys), 2), "ok")
            with c.retrieve(keys) as tx:
                self.assertEqual(tx.corrupt, [])  # 'on' checks on request
                self.assertEqual(tx.verify(), 1)
                self.assertEqual(tx.unchecked, 0)
                self.assertEqual(tx.corrupt, [2])
                self.assertEqual(bytes(tx.slots[0][1]), chunk_bytes(keys[0]))
        with self.connect(transport="copy", checksum="verify") as c:
            deadline = time.time() + 5
            while c.lookup(keys) != 2 and time.time() < deadline:
                time.sleep(0.01)
            self.assertEqual(c.lookup(keys), 2, "the server dropped it")
            self.assertEqual(store_all(c, keys), 1)
            self.assertEqual(self.run_child(child_flip, self.srv.sock,
                                            list(keys), 0), "ok")
            with c.retrieve(keys) as tx:
                self.assertEqual(tx.corrupt, [0])

    def test_fill_sums_while_copying_when_checksum_is_on(self):
        # StoreTx.fill() is kvr_xfer_fill(): the sum is taken of the bytes
        # as they are copied, and commit() sends that sum without reading
        # the slot again. So a write into the slot after the fill (the
        # documented misuse) makes the chunk fail every check, which a
        # plain copy followed by the commit's own hash would not notice.
        # Both transports: the copy transport sums its private buffers.
        for transport in (None, "copy"):
            with self.connect(transport=transport, checksum="on") as c:
                keys = c.keys(tokens(50 if transport else 51, 2))
                with c.store(keys, [CHUNK] * 2) as tx:
                    tx.fill(0, chunk_bytes(keys[0]))
                    tx.fill(1, bytearray(chunk_bytes(keys[1])))
                    view = tx.slots[1][1]
                    view[7] ^= 0x20  # after the fill: the sum is stale
                    del view
                with c.retrieve(keys) as tx:
                    self.assertEqual(tx.verify(), 1, transport)
                    self.assertEqual(tx.corrupt, [1])
                    self.assertEqual(bytes(tx.slots[0][1]),
                                     chunk_bytes(keys[0]))

    def test_copy_out_catches_a_byte_another_process_flipped(self):
        # RetrieveTx.copy_out() is kvr_retrieve_copy(): under 'on' it
        # checks while copying and marks the slot CORRUPT; commit reports
        # it and kvringd drops the chunk.
        with self.connect(checksum="on") as c:
            keys = c.keys(tokens(52, 3))
            self.assertEqual(store_all(c, keys), 3)
            self.assertEqual(self.run_child(child_flip, self.srv.sock,
                                            list(keys), 1), "ok")
            with c.retrieve(keys) as tx:
                out = bytearray(CHUNK)
                self.assertTrue(tx.copy_out(0, out))
                self.assertEqual(bytes(out), chunk_bytes(keys[0]))
                self.assertFalse(tx.copy_out(1, memoryview(out)))
                self.assertEqual(tx.corrupt, [1])
                self.assertEqual(tx.slots[1], (kvring.SlotStatus.CORRUPT,
                                               None))
                self.assertFalse(tx.copy_out(1, out))  # sticky
                self.assertTrue(tx.copy_out(2, out))
                self.assertEqual(bytes(out), chunk_bytes(keys[2]))
            deadline = time.time() + 5
            while c.lookup(keys) != 1 and time.time() < deadline:
                time.sleep(0.01)
            self.assertEqual(c.lookup(keys), 1, "kvringd dropped chunk 1")
        # Off: nothing to check against, a plain copy.
        with self.connect(checksum="off") as c, c.retrieve(keys) as tx:
            out = bytearray(CHUNK)
            self.assertTrue(tx.copy_out(0, out))
            self.assertEqual(bytes(out), chunk_bytes(keys[0]))

    def test_fill_and_copy_out_raise_when_arguments_are_bad(self):
        with self.connect(checksum="on") as c:
            keys = c.keys(tokens(53, 2))
            store_all(c, keys[:1])
            with c.store(keys, [CHUNK] * 2) as tx:
                self.assertEqual(tx.slots[0][0], kvring.SlotStatus.EXISTS)
                with self.assertRaisesRegex(ValueError, "EXISTS, not OK"):
                    tx.fill(0, chunk_bytes(keys[0]))
                with self.assertRaisesRegex(ValueError, "is 10 bytes, the "
                                            "slot is %d" % CHUNK):
                    tx.fill(1, b"0123456789")
                with self.assertRaisesRegex(ValueError, "slot index is 2"):
                    tx.fill(2, chunk_bytes(keys[1]))
                with self.assertRaises(TypeError):
                    tx.fill(1, "not a buffer")
                tx.fill(1, chunk_bytes(keys[1]))
            with self.assertRaisesRegex(ValueError, "transfer is over"):
                tx.fill(1, chunk_bytes(keys[1]))
            with c.retrieve(keys) as tx:
                with self.assertRaisesRegex(TypeError, "writable"):
                    tx.copy_out(0, bytes(CHUNK))  # read-only
                with self.assertRaisesRegex(ValueError, "the slot is"):
                    tx.copy_out(0, bytearray(CHUNK + 1))
                out = bytearray(CHUNK)
                self.assertTrue(tx.copy_out(1, out))
                self.assertEqual(bytes(out), chunk_bytes(keys[1]))

    def test_bytes_match_when_retrieved_through_copy(self):
        with self.connect() as c:
            keys = c.keys(tokens(2, 4))
            store_all(c, keys)
        self.assertEqual(self.run_child(child_retrieve, self.srv.sock,
                                        list(keys), "copy"), ("ok", 4))
        with self.connect(transport="copy") as c:
            self.assertEqual(c.transport, "copy")
            keys = c.keys(tokens(3, 4))
            self.assertEqual(store_all(c, keys), 4)
        self.assertEqual(self.run_child(child_retrieve, self.srv.sock,
                                        list(keys), None), ("ok", 4))

    def test_views_are_zero_copy_when_slots_are_returned(self):
        with self.connect() as c:
            keys = c.keys(tokens(4, 1))
            with c.store(keys, [CHUNK]) as tx:
                st, v = tx.slots[0]
                self.assertEqual(st, kvring.SLOT_OK)
                self.assertFalse(v.readonly)
                self.assertEqual(len(v), CHUNK)
                self.assertEqual(v.format, "B")
                v[:] = chunk_bytes(keys[0])
            with c.retrieve(keys) as tx:
                st, v = tx.slots[0]
                self.assertTrue(v.readonly)
                self.assertEqual(bytes(v), chunk_bytes(keys[0]))
            # After the block the views are released.
            with self.assertRaises(ValueError):
                bytes(v)

    def test_store_is_aborted_when_block_raises(self):
        with self.connect() as c:
            keys = c.keys(tokens(5, 2))
            with self.assertRaises(RuntimeError):
                with c.store(keys, [CHUNK, CHUNK]) as tx:
                    tx.slots[0][1][:] = b"\x01" * CHUNK
                    raise RuntimeError("worker failed mid-store")
            self.assertEqual(c.lookup(keys), 0)

    def test_store_is_a_noop_when_keys_exist(self):
        with self.connect() as c:
            keys = c.keys(tokens(6, 3))
            self.assertEqual(store_all(c, keys), 3)
            with c.store(keys, [CHUNK] * 3) as tx:
                self.assertEqual([s for s, _ in tx.slots],
                                 [kvring.SLOT_EXISTS] * 3)
                self.assertEqual(tx.stored, 0)

    def test_lookup_returns_prefix_when_more_keys_asked(self):
        with self.connect() as c:
            keys = c.keys(tokens(7, 12))
            store_all(c, keys[:10])
            self.assertEqual(c.lookup(keys), 10)
            with c.retrieve(keys) as tx:
                self.assertEqual(len(tx), 10)

    def test_lookup_l2_answers_l1_prefix_when_server_has_no_l2(self):
        # The keyword reaches the server (KVR_REQ_L2); without --l2 it is
        # a plain lookup, never "ask again" (tests/integration/test_l2.c
        # covers the tier itself against real Redis).
        with self.connect() as c:
            keys = c.keys(tokens(17, 6))
            store_all(c, keys[:4])
            self.assertEqual(c.lookup(keys, l2=True), (4, 0, False))
            hits, lease, pending = c.lookup(keys, pin=True, l2=True)
            self.assertEqual((hits, pending), (4, False))
            self.assertNotEqual(lease, 0)
            c.release(lease)
            c.submit_lookup(keys, l2=True, user="x")
            done = c.reap(1, 1)
            self.assertEqual((done[0].value, done[0].l2_pending), (4, False))

    def test_lease_is_redeemed_when_another_process_retrieves(self):
        with self.connect() as c:
            keys = c.keys(tokens(8, 3))
            store_all(c, keys)
            hits, lease = c.lookup(keys, pin=True)
            self.assertEqual(hits, 3)
            self.assertNotEqual(lease, 0)
            self.assertEqual(self.run_child(child_redeem, self.srv.sock,
                                            lease, list(keys)), ("ok", 3))

    def test_close_is_harmless_when_called_twice(self):
        c = self.connect()
        c.ping()
        c.close()
        c.close()
        self.assertTrue(c.closed)
        with self.assertRaises(kvring.KvringError):
            c.ping()

    def test_keys_accept_buffers_when_given_array(self):
        import array
        with self.connect() as c:
            t = tokens(9, 2)
            self.assertEqual(list(c.keys(array.array("I", t))),
                             list(c.keys(t)))
            self.assertEqual(len(c.keys(t[:20])), 1)

    def test_connect_raises_when_no_server(self):
        with self.assertRaises(kvring.KvringError) as cm:
            kvring.connect(socket="/tmp/kvring-py-nonexistent.sock",
                           **LAYOUT)
        self.assertIn(cm.exception.errno, (2, 111))

    def test_stats_report_pool_when_asked(self):
        with self.connect() as c:
            self.assertEqual(c.stats()["pool_bytes"], c.pool_bytes)
            self.assertIn("transport shm", c.debug)


class PythonApiTest(BindingTest):
    """What a Python user expects of the package."""

    def test_package_is_typed_and_versioned(self):
        pkg = os.path.dirname(kvring.__file__)
        self.assertTrue(os.path.exists(os.path.join(pkg, "py.typed")))
        self.assertRegex(kvring.__version__, r"^\d+\.\d+\.\d+")
        self.assertIn("return", kvring.connect.__annotations__)
        # The package and the library it loaded are one release.
        self.assertEqual(kvring.__version__, kvring.lib_version())

    def test_connect_waits_when_server_appears_later(self):
        import threading
        srv = Server()
        t = threading.Timer(0.4, srv.start)
        t.start()
        try:
            t0 = time.monotonic()
            with kvring.connect(socket=srv.sock, connect_wait_ms=10000,
                                **LAYOUT) as c:
                c.ping()
            self.assertGreater(time.monotonic() - t0, 0.3)
        finally:
            t.join()
            srv.stop()
        with self.assertRaises(kvring.KvringError):
            kvring.connect(socket=srv.sock, connect_wait_ms=200, **LAYOUT)
        with self.assertRaises(ValueError):
            kvring.connect(socket=srv.sock, connect_wait_ms=-1, **LAYOUT)

    def test_statuses_are_intenums_when_slots_return(self):
        with self.connect() as c:
            keys = c.keys(tokens(20, 2))
            store_all(c, keys[:1])
            with c.store(keys, [CHUNK] * 2) as tx:
                st = [s for s, _ in tx.slots]
                for (s, v) in tx.slots:
                    if v is not None:
                        v[:] = chunk_bytes(keys[1])
            self.assertIs(st[0], kvring.SlotStatus.EXISTS)
            self.assertIs(st[1], kvring.SlotStatus.OK)
            self.assertEqual(st[1], kvring.SLOT_OK)  # old names still work
            self.assertEqual(repr(st[0]), "<SlotStatus.EXISTS: 1>")

    def test_value_error_when_integers_are_out_of_range(self):
        bad = [dict(layers=-1), dict(kv_heads=0), dict(head_size=1 << 32),
               dict(dtype_bytes=3), dict(tp_rank=1, tp_size=1),
               dict(chunk_tokens=0), dict(timeout_ms=-5)]
        for kw in bad:
            with self.assertRaises(ValueError, msg=str(kw)) as cm:
                self.connect(**kw)
            name = list(kw)[-1] if "tp_rank" not in kw else "tp_rank"
            self.assertIn(name, str(cm.exception))
        with self.connect() as c:
            with self.assertRaises(ValueError):
                c.release(-1)
            with self.assertRaises(ValueError):
                c.keys([1, 2, -3])
            with self.assertRaises(ValueError):
                c.keys([1 << 32])
            keys = c.keys(tokens(21, 1))
            with self.assertRaises(ValueError):
                c.store(keys, [-1])
            with self.assertRaises(ValueError):
                c.store(keys, [CHUNK, CHUNK])
            self.assertEqual(c.lookup(keys), 0)  # nothing half-done

    def test_resource_warning_when_view_is_exported_at_unpin(self):
        import warnings
        with self.connect() as c:
            import pickle
            keys = c.keys(tokens(22, 1))
            tx = c.store(keys, [CHUNK])
            v = tx.slots[0][1]
            v[:] = chunk_bytes(keys[0])
            # Holds an export of the view, as numpy.frombuffer would.
            wrapper = pickle.PickleBuffer(v)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                tx.commit()
            self.assertEqual([x.category for x in w], [ResourceWarning])
            self.assertIn("still exported", str(w[0].message))
            del wrapper, v
            # And none when the caller dropped its wrappers.
            tx = c.retrieve(keys)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                tx.commit()
            self.assertEqual(w, [])

    def test_submit_and_reap_when_requests_overlap(self):
        with self.connect() as c:
            ka, kb = c.keys(tokens(23, 2)), c.keys(tokens(24, 3))
            ta = c.submit_store(ka, [CHUNK] * 2, user="a")
            tb = c.submit_store(kb, [CHUNK] * 3, user="b")
            c.submit_ping(user="p")
            self.assertEqual(c.inflight, 3)
            got = {}
            while len(got) < 3:
                for e in c.reap(min_wait=1):
                    got[e.user] = e.check()
            self.assertEqual(got["a"].op, kvring.Op.PREPARE_STORE)
            self.assertIs(got["a"].tx, ta)
            self.assertEqual(got["p"].op, kvring.Op.PING)
            for tx, keys in ((ta, ka), (tb, kb)):
                for (st, v), k in zip(tx.slots, keys):
                    self.assertEqual(st, kvring.SlotStatus.OK)
                    v[:] = chunk_bytes(k)
                c.submit_commit(tx, user=id(tx))
            done = [e.check().op for e in c.reap(min_wait=2)]
            while len(done) < 2:
                done += [e.check().op for e in c.reap(min_wait=1)]
            self.assertEqual(done, [kvring.Op.COMMIT_STORE] * 2)
            c.submit_lookup(kb, pin=True, user="l")
            (e,) = c.reap(min_wait=1)
            self.assertEqual((e.op, e.value), (kvring.Op.LOOKUP, 3))
            self.assertNotEqual(e.lease, 0)
            c.release(e.lease)
            tr = c.submit_retrieve(ka)
            (e,) = c.reap(min_wait=1)
            self.assertEqual([bytes(v) for _, v in tr.slots],
                             [chunk_bytes(k) for k in ka])
            c.submit_commit(tr)
            (e,) = c.reap(min_wait=1)
            self.assertEqual(e.op, kvring.Op.COMMIT_RETRIEVE)
            with self.assertRaises(ValueError):
                c.submit_commit(tr)  # twice
            self.assertEqual(c.reap(min_wait=0, timeout_ms=0), [])

    def test_held_commit_stays_unseen_until_the_hold_ends(self):
        # A second client's lookup is the witness: kvringd spins on the
        # ring, so 50 ms is ample to serve a commit that was published.
        with self.connect() as c, self.connect() as w:
            k = c.keys(tokens(31, 1))
            tx = c.store(k, [CHUNK])
            tx.slots[0][1][:] = chunk_bytes(k[0])
            with c.held():
                c.submit_commit(tx, user="held")
                time.sleep(0.05)
                self.assertEqual(w.lookup(k), 0,
                                 "kvringd served a held commit")
            (e,) = c.reap(min_wait=1)
            self.assertEqual((e.user, e.check().op),
                             ("held", kvring.Op.COMMIT_STORE))
            self.assertEqual(w.lookup(k), 1)
            # A reap publishes a hold that was never flushed.
            c.submit_hold()
            for i in range(3):
                c.submit_ping(user=i)
            got = []
            while len(got) < 3:
                got += [e.check().user for e in c.reap(min_wait=1)]
            self.assertEqual(sorted(got), [0, 1, 2])
            c.submit_flush()
            c.submit_flush()  # harmless without a hold

    def test_store_ahead_follows_connect_over_the_variable(self):
        with self.connect(store_ahead=True) as c:
            self.assertTrue(c.store_ahead)
            # One-key stores: the path store-ahead serves.
            k = c.keys(tokens(9051, 3))
            for i in range(3):
                self.assertEqual(store_all(c, k[i:i + 1]), 1)
            self.assertEqual(c.lookup(k), 3)
            self.assertEqual(self.run_child(child_retrieve, self.srv.sock,
                                            list(k), None), ("ok", 3))
        os.environ["KVRING_STORE_AHEAD"] = "1"
        try:
            with self.connect(store_ahead=False) as c:
                self.assertFalse(c.store_ahead)
            with self.connect() as c:
                self.assertTrue(c.store_ahead)
        finally:
            del os.environ["KVRING_STORE_AHEAD"]
        with self.assertRaises(ValueError):
            self.connect(store_ahead="yes")

    def test_reap_reports_error_when_request_fails(self):
        with self.connect() as c:
            keys = c.keys(tokens(25, 1))
            tx = c.submit_store(keys, [1 << 40])  # larger than the pool
            (e,) = c.reap(min_wait=1)
            # A per-key refusal is a status, the request itself succeeds.
            self.assertTrue(e.ok)
            self.assertEqual(tx.slots[0][0], kvring.SlotStatus.INVALID)
            c.submit_commit(tx)
            (e,) = c.reap(min_wait=1)
            self.assertTrue(e.ok, e.error)


def readme_python_block():
    """The first python code block under README's "Use it from Python"."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    sec = text.split("## Use it from Python", 1)[1]
    return sec.split("```python\n", 1)[1].split("```", 1)[0]


def docstring_example():
    """The indented example after the first '::' of kvring's docstring."""
    doc = kvring.__doc__.split("::\n\n", 1)[1]
    lines = []
    for ln in doc.split("\n"):
        if ln and not ln.startswith("    "):
            break
        lines.append(ln[4:])
    return "\n".join(lines)


class ServerLifetimeTest(unittest.TestCase):
    def test_server_stops_when_the_test_process_is_killed(self):
        child = ("import sys, time; sys.path.insert(0, %r); "
                 "import test_binding as t; s = t.Server(); s.start(); "
                 "print(s.proc.pid, s.sock, s.name, flush=True); "
                 "time.sleep(60)" % HERE)
        p = subprocess.Popen([sys.executable, "-c", child],
                             stdout=subprocess.PIPE)
        pid, sock, name = p.stdout.readline().decode().split()
        pid = int(pid)
        p.kill()
        p.wait()
        gone = False
        for _ in range(500):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                gone = True
                break
            time.sleep(0.01)
        if not gone:
            os.kill(pid, signal.SIGKILL)
        for f in (sock, sock + ".lock", "/dev/shm/%s.ctl" % name,
                  "/dev/shm/%s.pool" % name):
            try:
                os.unlink(f)
            except OSError:
                pass
        self.assertTrue(gone, "kvringd %d outlived the killed test "
                        "process that started it" % pid)


class PinQuotaTest(unittest.TestCase):
    def test_retrieve_cut_by_the_pin_quota_says_why(self):
        # Pins count per owner: a lookup's lease and a retrieve by keys
        # each pin the 4 chunks, and 6 chunks of quota cut the retrieve
        # at 2. The call succeeds; the sentence must not be lost.
        srv = Server()
        srv.extra = ["--quota-pinned", str(6 * CHUNK)]
        srv.start()
        try:
            with kvring.connect(socket=srv.sock, **LAYOUT) as c:
                keys = c.keys(tokens(41, 4))
                self.assertEqual(store_all(c, keys), 4)
                hits, lease = c.lookup(keys, pin=True)
                self.assertEqual(hits, 4)
                with self.assertWarns(RuntimeWarning) as w:
                    tx = c.retrieve(keys)
                self.assertEqual(len(tx.slots), 2)
                self.assertIn("--quota-pinned", tx.note)
                self.assertIn("--quota-pinned", str(w.warning))
                tx.commit()
                tx = c.retrieve(lease=lease)  # the lease's own pins
                self.assertEqual((len(tx.slots), tx.note), (4, ""))
                tx.commit()
        finally:
            srv.stop()


class ReadmeQuickStartTest(unittest.TestCase):
    def test_docstring_example_runs_verbatim_against_a_server(self):
        srv = Server()
        srv.start()
        try:
            env = dict(os.environ, KVRING_SOCKET=srv.sock,
                       PYTHONPATH=os.path.join(REPO, "worker", "python"))
            r = subprocess.run([sys.executable, "-c", docstring_example()],
                               env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout.decode())
        finally:
            srv.stop()

    def test_readme_quick_start_runs_verbatim_against_a_server(self):
        srv = Server()
        srv.pool = "160M"
        # The quick start stores 3 chunks of 32 MiB in one request, 60%
        # of this small pool; kvringd's default quotas (a quarter of the
        # pool per channel, an eighth per chunk) allow it on the default
        # 1 GiB pool.
        srv.extra = ["--quota-reserved", "100%", "--quota-pinned", "100%",
                     "--max-key-bytes", "100%",
                     "--quota-uid-reserved", "100%",
                     "--quota-uid-pinned", "100%"]
        srv.start()
        try:
            code = readme_python_block()
            env = dict(os.environ, KVRING_SOCKET=srv.sock,
                       PYTHONPATH=os.path.join(REPO, "worker", "python"))
            r = subprocess.run([sys.executable, "-c", code], env=env,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            out = r.stdout.decode(errors="replace")
            self.assertEqual(r.returncode, 0, out)
            self.assertIn("cached: 3 of 3 chunks", out)
            self.assertIn("transport shm", out)
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
