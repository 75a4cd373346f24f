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
    from collections.abc import Callable
    from typing import Any


# jsprof was started with SIGINT ignored and ends on it all the same (cli's
# _sigint_ends_the_run): the engine's process is given the SIGINT jsprof was given.
SIGINT_IGNORED = False


def dies_with_jsprof() -> Callable[[], None]:
    """A preexec_fn for an engine's process: in the child before exec, SIGKILL it if jsprof
    dies (even by SIGKILL), so no engine process is ever left behind. Linux only (prctl
    PR_SET_PDEATHSIG); elsewhere the child only gets SIGINT_IGNORED's disposition. The
    signal follows the thread that started the child, so start it from a thread that lives
    as long as the recording.

    Call it in jsprof, just before the spawn: prctl is looked up here (ctypes, ~1.5 ms of
    CPU once), so the forked child imports nothing. Importing ctypes in the child cost it
    ~4 ms of CPU per start (5-6 against 2 ms to exec, counted as Node's: it touches
    copy-on-write pages of jsprof's heap), and an import after a fork can deadlock on a
    lock another of jsprof's threads held then."""
    prctl = _pdeathsig_prctl()
    parent = os.getpid()
    ignore_sigint = SIGINT_IGNORED

    def in_child() -> None:
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if prctl is None:
            return
        prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # jsprof died between the fork and the prctl
            os._exit(1)

    return in_child


_PRCTL: list[Any] = []  # libc's prctl, or None where there is none; looked up once


def _pdeathsig_prctl() -> Any:
    if not _PRCTL:
        prctl = None
        if sys.platform == "linux":
            try:
                import ctypes

                prctl = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError):
                pass
        _PRCTL.append(prctl)
    return _PRCTL[0]


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
