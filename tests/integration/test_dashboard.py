#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ctest test_dashboard: docs/grafana/kvring.json against a live kvringd.

  1. the dashboard loads as JSON, panels have unique ids, fit the 24-column
     grid, and every panel but a row has a query;
  2. every query is valid PromQL (`promtool check rules` on them as
     recording rules, Grafana's $__rate_interval and $job filled in);
  3. a real redis-server and a kvringd with --l2 on it are put under load
     through the Python binding (stores uploaded to L2, lookups, retrieves,
     every round trip timed), and in kvring-inspect --prometheus of that
     server every metric a query names exists, every label a matcher or a
     `by (...)` names is on it, and every matched label value occurs.
Processes are stopped by pid, also on failure.

Usage: test_dashboard.py KVRINGD KVRING_INSPECT LIBKVRING SOURCE_DIR
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from procs import free_port, start_kvringd, stop, store_filled

KVRINGD, INSPECT, LIB, SRC = sys.argv[1:5]
DASH = os.path.join(SRC, "docs", "grafana", "kvring.json")
sys.path.insert(0, os.path.join(SRC, "worker", "python"))
os.environ["KVRING_LIB"] = LIB
os.environ["KVRING_RTT_SAMPLE"] = "1"  # every round trip in the histograms
import kvring  # noqa: E402

METRIC = re.compile(r"\bkvring_[a-z0-9_]+")
SELECTOR = re.compile(r"(kvring_[a-z0-9_]+)\{([^}]*)\}")
MATCHER = re.compile(r'([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
IMPLICIT = {"le", "instance", "job"}  # added by Prometheus or histograms


def fail(msg):
    print("test_dashboard: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def queries(dash):
    """(panel title, expr) of every target; checks the layout on the way."""
    out, ids = [], set()
    for p in dash["panels"]:
        if p["id"] in ids:
            fail("panel id %d twice" % p["id"])
        ids.add(p["id"])
        g = p["gridPos"]
        if g["x"] < 0 or g["x"] + g["w"] > 24:
            fail("panel %r leaves the 24-column grid: %s" % (p["title"], g))
        if p["type"] == "row":
            continue
        if not p.get("targets"):
            fail("panel %r has no query" % p["title"])
        for t in p["targets"]:
            out.append((p["title"], t["expr"]))
    return out


def concrete(expr):
    """The query as Prometheus sees it once Grafana fills its variables."""
    return expr.replace("$__rate_interval", "1m").replace("$job", ".+")


def promtool_check(exprs, tmp):
    path = os.path.join(tmp, "dashboard-rules.yml")
    with open(path, "w") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, (_title, e) in enumerate(exprs):
            f.write("      - record: kvring_dashboard_%d\n" % i)
            f.write("        expr: %s\n" % json.dumps(concrete(e)))
    r = subprocess.run(["promtool", "check", "rules", path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        fail("promtool check rules on the dashboard's queries:\n"
             + r.stdout.decode())


def exposition_series(text):
    """{metric name: [label dict, ...]} of every sample line."""
    series = {}
    for line in text.split("\n"):
        if not line or line.startswith("#"):
            continue
        m = SERIES.match(line)
        if not m:
            fail("unparsable exposition line: %r" % line)
        labels = dict(LABEL.findall(m.group(2) or ""))
        series.setdefault(m.group(1), []).append(labels)
    return series


def group_labels(expr):
    """(labels, the expression they group) of every `by (...)` clause."""
    out = []
    for m in re.finditer(r"\bby\s*\(([^)]*)\)\s*\(", expr):
        depth, i = 1, m.end()
        while i < len(expr) and depth:
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            i += 1
        labels = [x.strip() for x in m.group(1).split(",") if x.strip()]
        out.append((labels, expr[m.end():i]))
    return out


def check_against(exprs, series):
    errors = []
    for title, expr in exprs:
        e = concrete(expr)
        for name in set(METRIC.findall(e)):
            if name not in series:
                errors.append("%s: %s is not in the exposition" % (title, name))
        for name, body in SELECTOR.findall(e):
            for label, op, value in MATCHER.findall(body):
                if label in IMPLICIT or name not in series:
                    continue
                have = [s.get(label) for s in series[name]]
                if all(h is None for h in have):
                    errors.append("%s: %s has no label %s" % (title, name,
                                                             label))
                elif op == "=" and value not in have:
                    errors.append('%s: no %s{%s="%s"} in the exposition'
                                  % (title, name, label, value))
        for labels, inner in group_labels(e):
            names = [n for n in set(METRIC.findall(inner)) if n in series]
            for label in labels:
                if label in IMPLICIT:
                    continue
                if not any(label in s for n in names for s in series[n]):
                    errors.append("%s: by (%s): none of %s has that label"
                                  % (title, label, names))
    return errors


def exposition(name):
    r = subprocess.run([INSPECT, "--name", name, "--prometheus"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        fail("kvring-inspect --prometheus: " + r.stderr.decode())
    return exposition_series(r.stdout.decode())


def load_and_look(sock, name):
    """Load kvringd through a connected worker and read the exposition
    while it is still connected: per-channel and per-uid series exist
    only then."""
    with kvring.connect(socket=sock, model="dash-test", layers=2,
                        kv_heads=2, head_size=64, dtype_bytes=2,
                        chunk_tokens=16) as c:
        keys = c.keys(list(range(8 * 16)))
        store_filled(c, keys[:4], b"\x05")
        for _ in range(200):
            c.lookup(keys)
            with c.retrieve(keys[:4]):
                pass
            c.ping()
        return exposition(name)


def main():
    with open(DASH) as f:
        dash = json.load(f)
    if dash.get("uid") != "kvring" or not dash.get("title"):
        fail("the dashboard has no uid 'kvring' or no title")
    exprs = queries(dash)
    tmp = tempfile.mkdtemp(prefix="kvring-dash-", dir="/tmp")
    redis = srv = None
    try:
        promtool_check(exprs, tmp)
        port = free_port()
        redis = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=open(os.path.join(tmp, "redis.log"), "w"),
            stderr=subprocess.STDOUT)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            fail("redis-server did not listen on %d" % port)
        name = "kvring-dash-%d" % os.getpid()
        srv, sock = start_kvringd(KVRINGD, tmp, name, fail,
                                  ["--l2", "redis://127.0.0.1:%d" % port])
        series = load_and_look(sock, name)
        errors = check_against(exprs, series)
        for e in errors:
            print("test_dashboard: MISSING: " + e, file=sys.stderr)
        if errors:
            fail("%d of the dashboard's references are not in a live "
                 "exposition" % len(errors))
        print("test_dashboard: %d queries, %d distinct metrics checked"
              % (len(exprs), len({n for _t, e in exprs
                                  for n in METRIC.findall(e)})))
    finally:
        stop(srv)
        stop(redis)
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_dashboard: ok")


if __name__ == "__main__":
    main()
