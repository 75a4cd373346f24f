"""`attach_node`: profile a running Node process (SIGUSR1 opens its inspector), then
close that inspector again and leave the process running."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import urllib.request

import orjson

from ...errors import EngineError, UsageError
from ...trace import Recording
from .._process import SignalFlag
from ..base import DEFAULT_INTERVAL_MS
from ..cdp import CDPClient, CDPClosed, CDPError
from .isolate import _Isolate, internal
from .process import effective_interval, find_node, interval_us

INSPECTOR_PORT = 9229  # Node's default; a process started with --inspect-port may use another
_NODE_NAME = re.compile(r"^node(js)?[-\d.]*$")
_LOOPBACK = ("0100007F", "00000000000000000000000001000000")  # 127.0.0.1, ::1 in /proc/net


# Evaluated in the target before we disconnect: close its inspector once no connection to
# its port is left (Linux /proc: server-side sockets ESTABLISHED, CLOSE_WAIT or LAST_ACK),
# checked every 20 ms for at most 10 s.
_CLOSE_WHEN_ALONE = internal(r"""((r) => {
  const fs = r('node:fs'), inspector = r('node:inspector');
  const port = ':' + Number(new URL(inspector.url()).port).toString(16).toUpperCase()
    .padStart(4, '0');
  const busy = () => ['tcp', 'tcp6'].some((t) => {
    let text = '';
    try { text = fs.readFileSync('/proc/self/net/' + t, 'latin1'); } catch { return false; }
    return text.split('\n').some((line) => {
      const f = line.trim().split(/\s+/);
      return f.length > 3 && f[1].endsWith(port) && ['01', '08', '09'].includes(f[3]);
    });
  });
  const until = Date.now() + 10000;
  const check = () => {
    if (!busy()) setTimeout(() => inspector.close(), 20).unref();
    else if (Date.now() < until) setTimeout(check, 20).unref();
  };
  setTimeout(check, 20).unref();
  return 0;
})(require)""")


def _inspector_targets(port: int) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=1.0) as r:
        return orjson.loads(r.read())


def check_is_node(pid: int) -> None:
    """Refuse (one line, nothing sent) unless `pid` is a running Node.js process: SIGUSR1
    opens Node's inspector, but ends most other programs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise UsageError(f"--pid {pid}: no such process") from None
    except PermissionError:
        raise UsageError(f"--pid {pid}: not allowed to signal that process") from None
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        raise UsageError(
            f"--pid {pid}: cannot tell what program it runs (/proc/{pid} unreadable); "
            "jsprof signals only Node.js processes"
        ) from None
    names = {os.path.basename(exe), os.path.basename(argv0)}
    try:
        ours = os.path.realpath(find_node())
    except EngineError:
        ours = None
    if exe != ours and not any(_NODE_NAME.match(n) for n in names):
        raise UsageError(
            f"--pid {pid}: is {os.path.basename(exe) or argv0!r}, not Node.js; jsprof attaches "
            "only to Node (it would have sent SIGUSR1, which ends most programs)"
        )


def _listening_ports(pid: int) -> set[int]:
    """TCP ports the process listens on at a loopback or wildcard address (Linux /proc)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                # local address, state 0A = LISTEN, inode
                if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:
                    addr, port = fields[1].split(":")
                    if addr in _LOOPBACK or set(addr) == {"0"}:
                        ports.add(int(port, 16))
    return ports


def _find_inspector(pid: int, before: set[int], port: int | None, timeout: float) -> str | None:
    """The WebSocket URL of the inspector `pid` opened: on `port` if given, else on a port
    it started listening on after SIGUSR1 (or Node's default, if it listened there already)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port is not None:
            candidates = {port}
        else:
            now = _listening_ports(pid)
            candidates = (now - before) | ({INSPECTOR_PORT} & now)
        for p in sorted(candidates):
            with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError):
                targets = _inspector_targets(p)
                if targets:
                    return str(targets[0]["webSocketDebuggerUrl"])
        time.sleep(0.05)
    return None


def attach_node(
    pid: int,
    duration: float | None = None,
    sample_interval: float = DEFAULT_INTERVAL_MS,
    port: int | None = None,
    open_timeout: float = 10.0,
) -> Recording:
    """Profile the running Node process `pid` for `duration` s (None: until Ctrl-C or its
    exit), then close its inspector again and leave it running.

    `pid` must be Node (checked in /proc before any signal). Its inspector is found on the
    loopback port it opens (Node's default 127.0.0.1:9229, or what --inspect-port set);
    `port` pins it."""
    us = interval_us(sample_interval)
    check_is_node(pid)
    before = _listening_ports(pid)
    os.kill(pid, signal.SIGUSR1)
    url = _find_inspector(pid, before, port, open_timeout)
    if url is None:
        raise EngineError(
            f"process {pid} did not open an inspector on a loopback port within "
            f"{open_timeout:g} s after SIGUSR1 (was it run with --disable-sigusr1, or is "
            f"127.0.0.1:{port or INSPECTOR_PORT} taken by another program?)"
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
        with SignalFlag() as sigint:
            while not sigint.hit and (end is None or time.monotonic() < end):
                if not client.pump(0.05):
                    how = "exited"
                    break
                while client.session.events:
                    e = client.session.events.popleft()
                    if e["method"] == "NodeRuntime.waitingForDisconnect":
                        how = "exited"
                iso.take_slices()
                if how == "exited":
                    break
                if time.monotonic() >= iso.next_slice:
                    iso.rotate()
            if sigint.hit:
                how = "interrupted"
        iso.collect(iso.stop_nowait())
        # Close the inspector it opened for us, so the process is as it was. Node 20 dies
        # of SIGSEGV when the inspector is closed while a session is still connected
        # (reproduced: 1 of 4 attach runs under load when close() ran right after our
        # request): so close() waits, on an unref'd timer that keeps no process alive,
        # until the inspector's port holds no connection at all (ours is gone, also on
        # Node's side), then one more turn of the loop for Node to drop the session. A
        # debugger someone else keeps connected is left alone (the inspector stays
        # open). (Not for a process that is ending: its context is gone.)
        with contextlib.suppress(CDPClosed, CDPError, EngineError):
            if how == "exited":
                raise CDPClosed("ending")
            client.session.send(
                "Runtime.evaluate",
                # `require` of the console's command line API is gone once the evaluation
                # ends: captured for the deferred calls.
                {"expression": _CLOSE_WHEN_ALONE, "includeCommandLineAPI": True},
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
        if iso.lost_window is not None:
            track.meta["lostWindowMs"] = [round(x, 1) for x in iso.lost_window]
    return Recording([track])
