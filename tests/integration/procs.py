# SPDX-License-Identifier: MIT
"""procs.py: the processes the Python integration tests run.

test_prometheus.py and test_dashboard.py import it (it sits beside them):
a free loopback port, a process stopped by its pid, a private kvringd
waited for, and chunks stored through a connected worker. Never stops
anything by name.
"""

import os
import signal
import socket
import subprocess
import time


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    """SIGTERM by pid, then SIGKILL if it lingers; never by name."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_kvringd(kvringd, tmp, name, fail, extra=()):
    """kvringd on socket TMP/k.sock and segment NAME (32 MiB pool, not
    pre-faulted) plus EXTRA flags, its stderr in TMP/kvringd.log; waits
    up to 10 s for the socket. Calls FAIL with the log if kvringd exits
    first. Returns (the process, the socket path)."""
    sock = os.path.join(tmp, "k.sock")
    log = os.path.join(tmp, "kvringd.log")
    srv = subprocess.Popen(
        [kvringd, "--socket", sock, "--name",
         name, "--pool-size", "32M", "--no-prefault", "--allow-root"]
        + list(extra), stderr=open(log, "w"))
    for _ in range(200):
        if os.path.exists(sock):
            break
        if srv.poll() is not None:
            fail("kvringd exited: " + open(log).read())
        time.sleep(0.05)
    return srv, sock


def store_filled(c, keys, byte):
    """Store KEYS through client C, every chunk filled with BYTE."""
    with c.store(keys, [c.chunk_bytes] * len(keys)) as tx:
        for _st, view in tx.slots:
            view[:] = byte * len(view)
