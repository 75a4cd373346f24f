"""How a recording ends, shared by every engine and by `record`/`instrument`: Ctrl-C,
SIGTERM/SIGHUP and `--duration` turned into KeyboardInterrupts that keep the samples
(Terminated, DurationEnded), the watcher that delivers them to an in-process engine, and the
Progress a status line reads. Stdlib only: `record --engine node` imports this before Node
starts."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (before Node starts)
if TYPE_CHECKING:
    from typing import Any


class Progress:
    """Where a live status line reads a recording's progress: the engine sets `poll` to a
    cheap, thread-safe callable returning (samples so far, tracks); None while it has none."""

    def __init__(self) -> None:
        self.poll: Callable[[], tuple[int, int]] | None = None


class DurationEnded(KeyboardInterrupt):
    """`duration` seconds passed: the run ends on purpose (exit "duration", status 0)."""


class Terminated(KeyboardInterrupt):
    """jsprof was told to end by a signal other than Ctrl-C (SIGTERM, SIGHUP): handled like
    Ctrl-C (the samples so far are kept), but exits with that signal's status."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def terminate_as_interrupt(
    interrupt: Callable[[], None], duration: float | None = None
) -> Iterator[None]:
    """While an in-process engine runs on this (main) thread: SIGTERM/SIGHUP, and the end
    of `duration` seconds, stop the script through `interrupt` (the engine's thread-safe
    stop, which raises KeyboardInterrupt in its eval) and turn that KeyboardInterrupt into
    Terminated or DurationEnded, so the trace is saved before jsprof ends. Python's own
    handlers would not run while the engine holds the thread: a watcher thread hears the
    signals through Python's wakeup fd instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import select

    sigs = {signal.SIGTERM, signal.SIGHUP}
    got: list[BaseException] = []
    done = threading.Event()
    r, w = os.pipe()
    os.set_blocking(w, False)
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    old = {sig: signal.signal(sig, lambda signum, frame: None) for sig in sigs}
    deadline = None if duration is None else time.monotonic() + duration

    def watch() -> None:
        while not done.is_set():
            wait = 0.05 if deadline is None else min(0.05, max(deadline - time.monotonic(), 0))
            if select.select([r], [], [], wait)[0]:
                for b in os.read(r, 64):
                    if b in sigs:
                        got.append(Terminated(b))
                        break
            elif deadline is not None and time.monotonic() >= deadline:
                got.append(DurationEnded())
            if got:
                # Again until the block ends: eval() drops an interrupt that came before
                # it started (so one from an earlier run cannot stop it), so a signal heard
                # while no eval ran (the runtime starting, between two evals) would be lost
                # and the script would run on.
                interrupt()
                while not done.wait(0.05):
                    interrupt()
                return

    watcher = threading.Thread(target=watch, name="jsprof-signals", daemon=True)
    watcher.start()
    try:
        yield
    except KeyboardInterrupt as e:
        if got and not isinstance(e, (Terminated, DurationEnded)):
            raise got[0] from None
        raise
    finally:
        done.set()
        watcher.join()
        signal.set_wakeup_fd(old_fd)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        os.close(r)
        os.close(w)
    if got:  # it came as the script ended on its own: end as told all the same
        raise got[0]


def interruption(signum: int) -> KeyboardInterrupt:
    """What a recording that `signum` ended returns as its error: Ctrl-C's own
    KeyboardInterrupt, or Terminated for another signal (exit status 128 + signum)."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def signum_of(name: Any, default: int) -> int:
    try:
        return int(signal.Signals[str(name)])
    except KeyError:
        return default


def signal_name(e: BaseException) -> str:
    return signal.Signals(e.signum).name if isinstance(e, Terminated) else "SIGINT"
