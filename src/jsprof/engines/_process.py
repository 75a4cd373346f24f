"""The engines' child processes (Node, Chromium): they die with jsprof, and end with
everything they started; and the signals that end a recording, turned into a flag."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (before Node starts)
if TYPE_CHECKING:
    from typing import Any


# jsprof was started with SIGINT ignored and ends on it all the same (cli's
# _sigint_ends_the_run): the engine's process is given the SIGINT jsprof was given.
SIGINT_IGNORED = False


def die_with_parent(parent: int) -> None:
    """In the child before exec: SIGKILL it if jsprof (pid `parent`) dies (even by
    SIGKILL), so no engine process is ever left behind. Linux only (prctl
    PR_SET_PDEATHSIG); a no-op elsewhere. The signal follows the thread that started the
    child, so start it from a thread that lives as long as the recording. (ctypes is
    imported here, in the child: in the parent it costs start-up tens of ms.) SIGINT is
    ignored again when jsprof inherited it so (SIGINT_IGNORED)."""
    if SIGINT_IGNORED:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # jsprof died between the fork and the prctl
        os._exit(1)


def end_group(proc: subprocess.Popen, grace: float = 2.0, kill_wait: float = 5.0) -> int | None:
    """End a child started in its own process group: SIGTERM, then SIGKILL after `grace` s;
    whatever else is left in the group (Node's workers and children, Chromium's renderers
    and helpers) is killed too. Returns the child's exit status."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.poll()


class SignalFlag:
    """Turn Ctrl-C (and SIGTERM/SIGHUP: being told to end) into a flag while recording, so
    that the profilers are stopped and the engine ended before jsprof goes. Only on the
    main thread, where Python runs signal handlers."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.hit = False
        self.signum: int | None = None  # the first signal that came
        self._old: dict[int, Any] = {}

    def __enter__(self) -> SignalFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._on)
        return self

    def _on(self, signum: int, frame: Any) -> None:
        self.hit = True
        if self.signum is None:
            self.signum = signum

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
