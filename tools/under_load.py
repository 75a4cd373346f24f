"""Run a command beside busy loops: the machine loaded as CI's often is, for a bounded time.

    python tools/under_load.py [--per-cpu 3] [--limit 900] -- COMMAND [ARGS...]

`make test-load` runs the engines' sampling tests (pytest -m under_load) this way, so a
bound that holds only on a quiet machine (a sample count that assumes the sampler always
ran, a share that assumes no preemption) fails on every run of `make test`, not only on
the day CI happens to share its cores.

The loops are bounded whatever happens: each spins at most --limit seconds and ends when
this process ends (the kernel's parent-death signal, and a check of its parent as well);
this process kills them and the command's process group on its way out, on an error,
SIGTERM or Ctrl-C as well. The command is killed after --limit seconds (exit 124, as
timeout(1)). Exit status: the command's.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

# A loop at the default priority, as another job's process would be: it checks its
# deadline and its parent between short bursts of work.
SPIN = """\
import os, signal, sys, time
sys.path.insert(0, sys.argv[3])
from under_load import _die_with_parent
_die_with_parent(signal.SIGKILL)
signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C ends it without a traceback
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < end and os.getppid() == parent:
    for _ in range(100_000):
        pass
"""


def _die_with_parent(sig: int) -> None:
    """Linux: `sig` to this process when its parent dies, whatever kills the parent
    (prctl PR_SET_PDEATHSIG); elsewhere nothing (the loops check their parent too)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, sig)
    except (AttributeError, OSError):
        pass


def _load() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "?"


def _end_group(child: subprocess.Popen) -> None:
    """The command's process group ended: asked first (Ctrl-C, so pytest tears its fixtures
    down: browsers, servers) when the command still runs, then killed, leftovers too."""
    if child.poll() is None:
        try:
            os.killpg(child.pid, signal.SIGINT)
            child.wait(timeout=20)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-cpu", type=int, default=3, metavar="N",
                    help="busy loops per CPU (default 3)")
    ap.add_argument("--limit", type=float, default=900.0, metavar="S",
                    help="seconds at most, for the loops and the command (default 900)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd or a.per_cpu < 0 or a.limit <= 0:
        ap.error("give a command after --, --per-cpu >= 0 and --limit > 0")
    n = a.per_cpu * (os.cpu_count() or 1)

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    loops: list[subprocess.Popen] = []
    child: subprocess.Popen | None = None
    start = time.monotonic()
    try:
        for _ in range(n):
            loops.append(subprocess.Popen(
                [sys.executable, "-c", SPIN, str(os.getpid()), str(a.limit),
                 os.path.dirname(os.path.abspath(__file__))],
                stdin=subprocess.DEVNULL))
        print(f"under_load: {n} busy loops beside `{' '.join(cmd)}` (load {_load()}; "
              f"{a.limit:.0f} s at most)", file=sys.stderr, flush=True)
        # its own process group, so what it leaves running is ended with it; and asked to
        # stop (Ctrl-C: pytest tears its fixtures down) if this process is killed
        child = subprocess.Popen(cmd, start_new_session=True,
                                 preexec_fn=lambda: _die_with_parent(signal.SIGINT))
        try:
            rc = child.wait(timeout=a.limit)
        except subprocess.TimeoutExpired:
            print(f"under_load: `{cmd[0]}` still running after {a.limit:.0f} s: killed",
                  file=sys.stderr, flush=True)
            rc = 124
        print(f"under_load: done in {time.monotonic() - start:.0f} s, exit {rc} "
              f"(load {_load()})", file=sys.stderr, flush=True)
        return rc
    finally:
        if child is not None:
            _end_group(child)
        for p in loops:
            p.kill()
        for p in loops:
            p.wait()


if __name__ == "__main__":
    sys.exit(main())
