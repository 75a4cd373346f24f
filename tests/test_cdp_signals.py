"""Signals while the CDP client waits: a Ctrl-C or SIGTERM must never hang jsprof.

CPython 3.11's SimpleQueue.get(timeout), inside the `websockets` package's recv, waited
forever when a signal handler ran during the wait near its deadline; `jsprof record
--engine node` hung on a SIGTERM that way. The client now waits in `select` on its own
socket (engines/websocket.py), which retries after a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PROGRAM = """
import signal, time
from jsprof.engines.node import NodeRuntime
hits = 0
def on(signum, frame):
    global hits
    hits += 1
signal.signal(signal.SIGUSR1, on)
with NodeRuntime() as rt:
    print("ready", flush=True)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        rt.client.pump(0.002)
    assert rt.eval("6 * 7") == 42
print("done", hits, flush=True)
"""


def test_signals_during_pump_neither_hang_nor_get_lost() -> None:
    p = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        sent = 0
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            os.kill(p.pid, signal.SIGUSR1)
            sent += 1
            time.sleep(0.002)
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError("the CDP client hung after a signal") from None
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out
    word, hits = out.split()
    assert word == "done"
    # Linux merges a signal that is already pending, so fewer may arrive; most do.
    assert 0 < int(hits) <= sent
