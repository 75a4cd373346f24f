"""`jsprof instrument --engine node`: Node with instrument/'s preload (its loader hooks
transform every module), the books saved to a file when the script ends or when jsprof is
told to end. The transform and the books are instrument/'s; this module only runs Node."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from ...errors import EngineError, JSError
from .._ending import interruption
from .._process import dies_with_jsprof
from ..base import Instrumentation
from .preload import not_compiled

# How long Node has to save its counts, and then to end, once jsprof is told to end.
NODE_GRACE_S = 5.0


def run_instrumented(
    p: str, source: str, args: Sequence[str], how: Instrumentation
) -> tuple[dict[str, Any], BaseException | None, float | None]:
    """Run `p` under Node with the methods wrapped: (the books' dump, the script's error
    or None, None: Node's dump carries its own time origin)."""
    with tempfile.TemporaryDirectory(prefix="jsprof-instrument-") as tmp:
        out = os.path.join(tmp, "result.json")
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        not_parsed = os.path.join(tmp, "not-parsed.json")
        env["JSPROF_INSTRUMENT"] = json.dumps(
            {
                "config": how.config,
                "out": out,
                "notParsed": not_parsed,  # where the preload says the script did not compile
                "ctl": theirs.fileno(),
                "python": sys.executable,
                # The entry, already transformed: saves one Python start-up in the run.
                "pre": {os.path.realpath(p): [source, how.transform(source)]},
            }
        )
        try:
            # Its own session, as `record` runs Node: a terminal's Ctrl-C reaches jsprof
            # only, which has Node save its counts before it ends it.
            proc = subprocess.Popen(
                ["node", "--import", how.preload, p, *args],
                env=env,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                preexec_fn=dies_with_jsprof(),
            )
        except FileNotFoundError:
            ours.close()
            raise EngineError("node: not found on PATH; install Node.js >= 20") from None
        finally:
            theirs.close()
        with ours:
            told = _wait_ending_on_signals(proc, ours)
        code = proc.returncode
        error: BaseException | None = None
        if told is not None:
            error = interruption(told)
        elif code == -signal.SIGINT:
            error = KeyboardInterrupt()
        elif code != 0:
            error = not_compiled(not_parsed, p) or JSError(f"{p}: node exited with status {code}")
            error.exit_code = code  # type: ignore[attr-defined]
        try:
            with open(out, encoding="utf-8") as f:
                dump = json.load(f)
        except OSError:
            if told is not None:
                err = EngineError(
                    f"{p}: node did not save its counts within {NODE_GRACE_S:g} s of "
                    f"{signal.Signals(told).name} (its JavaScript never returned to the "
                    "event loop); nothing to report"
                )
                err.exit_code = -told  # type: ignore[attr-defined]
                raise err from None
            err = EngineError(f"{p}: node ended (status {code}) without writing results")
            err.exit_code = code  # type: ignore[attr-defined]
            raise err from None
    return dump, error, None


def _wait_ending_on_signals(proc: subprocess.Popen, ctl: socket.socket) -> int | None:
    """Wait for Node. When jsprof is told to end (SIGINT, SIGTERM, SIGHUP) meanwhile: ask
    Node's preload over `ctl` to save its counts, then send Node's process group that
    signal once it has answered (or NODE_GRACE_S s passed), then SIGKILL if it has not
    ended NODE_GRACE_S s later. Returns the first such signal, or None."""
    told: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        if not told:
            told.append(signum)

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {sig: signal.signal(sig, on_signal) for sig in sigs}
    ctl.setblocking(False)
    asked = signalled = None
    try:
        while True:
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if told and asked is None:
                asked = now
                with contextlib.suppress(OSError):
                    ctl.send(b"save\n")
            if asked is not None and signalled is None:
                answered = False
                with contextlib.suppress(BlockingIOError, OSError):
                    answered = bool(ctl.recv(64))
                if answered or now - asked >= NODE_GRACE_S:
                    signalled = now
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, told[0])
            if signalled is not None and now - signalled >= NODE_GRACE_S:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return told[0] if told else None
