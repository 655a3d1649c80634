#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ctest test_prometheus: a real Prometheus scrapes kvring-inspect --serve.

Starts a private kvringd, `kvring-inspect --serve 127.0.0.1:0` on its
segments, and Debian's prometheus on a free loopback port with a private
data directory and scrape_interval 1s; puts load on kvringd through the
Python binding (every lookup asks 4 keys of which the first 2 are
stored); then asks Prometheus's HTTP API for the hit ratio (must be 0.5)
and for histogram_quantile of the lookup latency (a positive number of
seconds). Every process is stopped by its pid, also on failure.

Usage: test_prometheus.py KVRINGD KVRING_INSPECT LIBKVRING SOURCE_DIR
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from procs import free_port, start_kvringd, stop, store_filled

KVRINGD, INSPECT, LIB, SRC = sys.argv[1:5]
sys.path.insert(0, os.path.join(SRC, "worker", "python"))
os.environ["KVRING_LIB"] = LIB
import kvring  # noqa: E402  (after sys.path)

HIT_RATIO = ("sum(rate(kvring_lookup_hit_keys_total[15s])) / "
             "sum(rate(kvring_lookup_keys_total[15s]))")
P99 = ("histogram_quantile(0.99, sum by (le) "
       "(rate(kvring_op_latency_seconds_bucket{op=\"lookup\"}[15s])))")


def fail(msg):
    print("test_prometheus: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(port, expr):
    """One instant query; the sample value as a float, or None."""
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (
        port, urllib.parse.urlencode({"query": expr}))
    doc = json.loads(get(url))
    if doc.get("status") != "success":
        fail("query %s: %s" % (expr, doc))
    res = doc["data"]["result"]
    if not res:
        return None
    v = float(res[0]["value"][1])
    return None if v != v else v  # NaN: not enough samples yet


def load(sock, seconds):
    """Store 2 chunks, then ask 4 keys (the 2 stored first) until done."""
    with kvring.connect(socket=sock, model="prom-test", layers=2,
                        kv_heads=2, head_size=64, dtype_bytes=2,
                        chunk_tokens=16) as c:
        keys = c.keys(list(range(4 * 16)))
        store_filled(c, keys[:2], b"\x07")
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            got = c.lookup(keys)
            if got != 2:
                fail("lookup found %d of the 2 stored chunks" % got)
            n += 1
        return n


def main():
    tmp = tempfile.mkdtemp(prefix="kvring-prom-", dir="/tmp")
    srv = ins = prom = None
    name = "kvring-prom-%d" % os.getpid()
    try:
        srv, sock = start_kvringd(KVRINGD, tmp, name, fail)
        ins = subprocess.Popen([INSPECT, "--name", name, "--serve",
                                "127.0.0.1:0"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
        line = ins.stdout.readline().decode().strip()
        if not line.startswith("serving http://127.0.0.1:"):
            fail("kvring-inspect --serve said: %r" % line)
        metrics_port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        prom_port = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n"
                    "  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: kvring\n"
                    "    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % metrics_port)
        prom = subprocess.Popen(
            ["prometheus", "--config.file=" + cfg,
             "--storage.tsdb.path=" + os.path.join(tmp, "data"),
             "--web.listen-address=127.0.0.1:%d" % prom_port,
             "--log.level=warn"],
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(tmp, "prometheus.log"), "w"))
        for _ in range(300):
            if prom.poll() is not None:
                fail("prometheus exited: " + open(
                    os.path.join(tmp, "prometheus.log")).read()[-2000:])
            try:
                if "Ready" in get("http://127.0.0.1:%d/-/ready" % prom_port):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            fail("prometheus not ready on port %d" % prom_port)
        # Prometheus scrapes its first target only after its discovery
        # settles (about 5 s): load once a scrape has been seen, so the
        # counters rise between scrapes.
        for _ in range(300):
            if query(prom_port, 'up{job="kvring"}') == 1:
                break
            time.sleep(0.1)
        else:
            fail("Prometheus never scraped kvring-inspect on port %d"
                 % metrics_port)
        n = load(sock, 4.0)
        ratio = p99 = None
        for _ in range(40):  # scrapes land every second
            ratio, p99 = query(prom_port, HIT_RATIO), query(prom_port, P99)
            if ratio is not None and p99 is not None:
                break
            time.sleep(0.5)
        up = query(prom_port, 'up{job="kvring"}')
        print("test_prometheus: %d lookups; up=%s hit ratio=%s p99=%s s"
              % (n, up, ratio, p99))
        if up != 1:
            fail("Prometheus does not see the kvring-inspect target up")
        if ratio is None or abs(ratio - 0.5) > 0.01:
            fail("hit ratio %s, expected 0.5 (2 of 4 keys hit)" % ratio)
        if p99 is None or not 0 < p99 < 10:
            fail("histogram_quantile of lookup latency gave %s" % p99)
    finally:
        stop(prom)
        stop(ins)
        stop(srv)
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_prometheus: ok")


if __name__ == "__main__":
    main()
