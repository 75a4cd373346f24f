"""The collector's compactor: one per store, in a process of its own, whatever the workers.

Every collector worker runs a `BackgroundCompactor` (a thread). The one that takes the
store's lease (`tables/_compactor.lock`, an exclusive flock) starts the compactor process,
`python -m jsprof.store.background STORE`: a loop that compacts every few seconds. The
lease fd is inherited by that process, so the lock is held while either of them lives.
The others try the lease again every few seconds: when the holder is killed (even by
SIGKILL) the kernel drops its lock, its compactor dies with it (the parent-death signal),
and another worker's thread takes over within one retry.

Why a process and not a thread of the worker: compaction is parse-and-intern Python work.
On a thread it would hold the GIL against the worker's event loop, and ingest fell from
291 to 88 uploads/s on one worker while a compaction ran (issue 21); in its own process
it uses another core, at a lower priority (nice), so uploads come first on a busy machine.
Queries never compact: they read the tables plus the uncompacted tail
(`tables/view.py`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .health import FAILING_AFTER, disk_use, disk_use_due, read_status, record_run

log = logging.getLogger("jsprof.store")

LEASE = "_compactor.lock"
INTERVAL_S = 5.0  # between runs that found the store caught up
RETRY_S = 2.0  # a worker without the lease tries again this often
# A compactor process that died is started again after RESTART_S, doubled for each death in
# a row (at most 60 s): a process that dies at once does not spin (`jsprof serve
# --compactor-restart`).
RESTART_S = 2.0
NICE = 10
# Uploads per committed batch here (tables.compact.BATCH is 2,000): while catching up on a backlog
# the committed tables move on every ~10 s, so the tail queries read stays short.
BATCH = 500


class BackgroundCompactor:
    """A worker's part in "one compactor per store": take the lease when it is free, run
    the compactor process while holding it, restart that process if it dies, stop both."""

    def __init__(self, store_path: str | os.PathLike, interval: float = INTERVAL_S,
                 retry: float = RETRY_S, keep_raw: float | None = None,
                 restart: float = RESTART_S) -> None:
        self.store_path = Path(store_path)
        self.interval = interval
        self.keep_raw = keep_raw  # seconds; None: raw segments are kept for ever
        self.retry = retry
        self.restart = restart
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="jsprof-compactor-lease",
                                        daemon=True)
        self.holds_lease = False

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            # A compaction killed at any instant leaves only unlisted files, which the next
            # run overwrites (tables/compact.py): no need to wait for its batch.
            proc.terminate()
        self._thread.join(timeout)

    @property
    def pid(self) -> int | None:
        """The compactor process this worker runs (None: another worker holds the lease)."""
        with self._lock:
            p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    def _run(self) -> None:
        tdir = self.store_path / "tables"
        fd = -1
        try:
            while not self._stop.is_set():
                if fd < 0:
                    try:
                        tdir.mkdir(parents=True, exist_ok=True)
                        fd = os.open(tdir / LEASE, os.O_RDWR | os.O_CREAT, 0o644)
                    except OSError as e:
                        _log_once(f"cannot open the compactor's lease in {tdir}: {e}")
                        self._stop.wait(self.retry * 5)
                        continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self._stop.wait(self.retry)  # another worker compacts
                    continue
                self.holds_lease = True
                self._hold(fd)
                return
        finally:
            if fd >= 0:
                os.close(fd)  # drops the lease (its compactor process is gone by then)
            self.holds_lease = False

    def _hold(self, fd: int) -> None:
        """Run the compactor process until stopped; restart it when it dies on its own."""
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)  # who holds it, for people
        except OSError:
            pass
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            cmd = [sys.executable, "-m", "jsprof.store.background", str(self.store_path),
                   "--interval", str(self.interval), "--parent", str(os.getpid())]
            if self.keep_raw is not None:
                cmd += ["--keep-raw", str(self.keep_raw)]
            try:
                proc = subprocess.Popen(
                    cmd, pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    # Its own session: a terminal's ctrl-c reaches the collector, which
                    # stops it; its stderr is the collector's.
                    start_new_session=True,
                )
            except OSError as e:
                _log_once(f"cannot start the compactor: {e}")
                self._stop.wait(self.retry * 5)
                continue
            with self._lock:
                self._proc = proc
            while proc.poll() is None and not self._stop.wait(0.5):
                pass
            if self._stop.is_set():
                if proc.poll() is None:
                    proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                return
            # It died on its own (a bug, OOM): say so every time (its traceback, if any,
            # went to our stderr just before), count it in the store's compactor report
            # (metrics, readyz, `serve check`), and start it again, backing off.
            failures = failures + 1 if time.monotonic() - started < 60 else 1
            wait = min(60.0, self.restart * 2 ** min(failures, 5))
            error = f"the compactor process exited ({_exit_status(proc.returncode)})"
            status = record_run(self.store_path, error)
            print(
                f"jsprof serve: {error}; restarting it in {wait:g} s "
                f"({status.get('consecutiveFailures', failures)} failed runs in a row)",
                file=sys.stderr, flush=True,
            )
            self._stop.wait(wait)


_said: set[str] = set()


def _log_once(msg: str) -> None:
    if msg not in _said:
        _said.add(msg)
        print(f"jsprof serve: {msg}", file=sys.stderr, flush=True)


def die_with(parent: int) -> None:
    """Go when the worker that started us goes (even by SIGKILL), so the lease it shares
    with us is free for another worker at once."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the loop checks its parent instead
        pass
    if os.getppid() != parent:
        os._exit(0)


def become_background(parent: int) -> None:
    """What a compactor process does first, on a local store or a bucket: go when the
    worker that started it goes (`parent`, 0 for none), yield the CPU to the collectors
    (nice), and end at once on SIGTERM (a run cut short leaves nothing committed)."""
    if parent:
        die_with(parent)
    try:
        os.nice(NICE)
    except OSError:
        pass
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m jsprof.store.background")
    p.add_argument("store")
    p.add_argument("--interval", type=float, default=INTERVAL_S)
    p.add_argument("--parent", type=int, default=0)
    p.add_argument("--keep-raw", type=float, default=None,
                   help="seconds raw segments are kept once compacted (default: for ever)")
    args = p.parse_args(argv)
    become_background(args.parent)
    from . import retention
    from .store import Store
    from .tables.compact import compact
    from .tables.merge import merge_parts

    store = Store(args.store)
    said = Reporter()
    swept = False
    while not (args.parent and os.getppid() != args.parent):
        error = None
        try:
            if not swept:  # claims a killed run retired but left behind
                retention.sweep_claims(store)
                swept = True
            compact(store, batch=BATCH)
            # Off the query path: small parts merged here, after the new ones are in.
            merge_parts(store.path)
            # The store's files stay few: claims into the claim index, old raw segments
            # (compacted and retired) deleted.
            retention.retire_claims(store)
            if args.keep_raw is not None:
                retention.remove_raw(store, args.keep_raw)
        except Exception as e:  # noqa: BLE001 - the loop must outlive one bad run
            error = f"{e}" or type(e).__name__
        # The store's disk use for scrapes (they never walk it themselves while this is
        # fresh): walked here, off the request path, every few runs.
        disk = None
        if disk_use_due(read_status(store.path)):
            try:
                disk = disk_use(store.path)
            except OSError:
                disk = None
        said.run(record_run(store.path, error, disk=disk), error)
        # A run compacts everything stored when it reached the end: wait before the next,
        # so a steady trickle makes parts of a few seconds' uploads, not one each.
        time.sleep(args.interval)
    return 0


class Reporter:
    """The compactor's stderr lines: the first failure of a streak with its error, when
    the streak makes it count as failing (readyz not ready), then once a minute while it
    lasts (with the error: it may change), and the recovery. Never silent, never a line
    per run."""

    EVERY_S = 60.0

    def __init__(self) -> None:
        self.last_said = 0.0

    def run(self, status: dict, error: str | None) -> None:
        n = int(status.get("consecutiveFailures", 0))
        now = time.monotonic()
        if error is None:
            if self.last_said:
                _say("compaction works again")
                self.last_said = 0.0
            return
        if n == 1 or n == FAILING_AFTER or now - self.last_said >= self.EVERY_S:
            state = "failing" if n >= FAILING_AFTER else "failed"
            runs = "1 run" if n == 1 else f"{n} runs"
            _say(f"compaction {state} ({runs} in a row): {error}")
            self.last_said = now


def _say(msg: str) -> None:
    print(f"jsprof serve: {msg}", file=sys.stderr, flush=True)


def _exit_status(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


if __name__ == "__main__":
    sys.exit(main())
