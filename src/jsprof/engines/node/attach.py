"""`attach_node`: profile a running Node process (SIGUSR1 opens its inspector), then
close that inspector again and leave the process running."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import urllib.request

import orjson

from ...errors import EngineError, UsageError
from ...trace import Recording
from ..base import DEFAULT_INTERVAL_MS
from ..cdp import CDPClient, CDPClosed, CDPError
from .isolate import _Isolate
from .process import _SigintFlag, effective_interval, interval_us

INSPECTOR_PORT = 9229


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _inspector_targets(port: int) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=1.0) as r:
        return orjson.loads(r.read())


def attach_node(
    pid: int,
    duration: float | None = None,
    sample_interval: float = DEFAULT_INTERVAL_MS,
    port: int = INSPECTOR_PORT,
    open_timeout: float = 10.0,
) -> Recording:
    """Profile the running Node process `pid` for `duration` s (None: until Ctrl-C or its
    exit), then close its inspector again and leave it running."""
    us = interval_us(sample_interval)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise UsageError(f"--pid {pid}: no such process") from None
    except PermissionError:
        raise UsageError(f"--pid {pid}: not allowed to signal that process") from None
    if _port_open(port):
        raise EngineError(
            f"127.0.0.1:{port} is already in use; the inspector of process {pid} cannot open "
            "there (close whatever listens on it, or a debugger attached to that process)"
        )
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + open_timeout
    url = None
    while time.monotonic() < deadline:
        try:
            targets = _inspector_targets(port)
            if targets:
                url = targets[0]["webSocketDebuggerUrl"]
                break
        except (OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.05)
    if url is None:
        raise EngineError(
            f"process {pid} did not open an inspector on 127.0.0.1:{port} within "
            f"{open_timeout:g} s after SIGUSR1; is it Node.js (and not run with "
            "--disable-sigusr1)?"
        )
    client = CDPClient(url)
    iso = _Isolate(client.session, "main")
    how = "duration"
    try:
        iso.read_origin()
        # A process that ends while we are connected waits for us to disconnect: ask to
        # be told, then take the profile before letting it go.
        with contextlib.suppress(CDPError):
            client.session.send("NodeRuntime.notifyWhenWaitingForDisconnect", {"enabled": True})
        iso.start(us, reoptimize=True)
        iso.begin_slices()  # insurance if the process dies while we watch
        end = None if duration is None else time.monotonic() + duration
        with _SigintFlag() as sigint:
            while not sigint.hit and (end is None or time.monotonic() < end):
                if not client.pump(0.05):
                    how = "exited"
                    break
                while client.session.events:
                    e = client.session.events.popleft()
                    if e["method"] == "NodeRuntime.waitingForDisconnect":
                        how = "exited"
                    iso.take_slice(e)
                if how == "exited":
                    break
                if time.monotonic() >= iso.next_slice:
                    iso.rotate()
            if sigint.hit:
                how = "interrupted"
        iso.collect(iso.stop_nowait())
        while client.session.events:
            iso.take_slice(client.session.events.popleft())
        iso.fall_back_to_slices()
        # Close the inspector it opened for us, so the process is as it was. close() waits
        # for sessions to end, so it runs after we disconnect. (Not for a process that is
        # ending: its context is gone.)
        with contextlib.suppress(CDPClosed, CDPError, EngineError):
            if how == "exited":
                raise CDPClosed("ending")
            client.session.send(
                "Runtime.evaluate",
                {
                    # `require` of the console's command line API is gone once the
                    # evaluation ends: capture it for the deferred call.
                    "expression": "((r) => { setImmediate(() => r('node:inspector').close());"
                    " return 0; })(require)",
                    "includeCommandLineAPI": True,
                },
                timeout=5.0,
            )
    finally:
        client.close()
    if iso.profile is None:
        raise EngineError(f"process {pid}: {iso.lost or 'no profile delivered'}")
    track = iso.track(effective_interval(sample_interval), f"pid {pid}")
    assert track is not None
    track.meta.update(pid=pid, exit=how)
    if iso.partial:
        track.meta["partial"] = iso.lost
    return Recording([track])
