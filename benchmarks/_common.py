"""What the benchmark scripts share: timing, the order of interleaved rounds, ratios to a
baseline of the same run, CPU time from /proc, and the JavaScript workload's functions.
Imported by the scripts as `_common` (each runs with benchmarks/ on sys.path)."""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

# The workload's functions (strings, objects, JSON, recursion), shared by the Node and
# Chromium overhead benchmarks; each adds its own loop over them.
WORKLOAD_FUNCTIONS = r"""
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function strings(n) {
  let s = ''; for (let i = 0; i < n; i++) s += String.fromCharCode(97 + i % 26); return s.length;
}
function objects(n) {
  const a = []; for (let i = 0; i < n; i++) a.push({ k: i % 97, v: 'x' + i });
  a.sort((x, y) => x.k - y.k || (x.v < y.v ? -1 : 1)); return a.length;
}
function json(n) {
  const o = []; for (let i = 0; i < n; i++) o.push({ i, s: 'v' + i, a: [i, i + 1] });
  return JSON.parse(JSON.stringify(o)).length;
}
"""


def timed(fn: Callable[[], object], collect: bool = True) -> float:
    """Seconds of one call of `fn` (after a garbage collection, so that one call does not
    pay for the garbage of the one before)."""
    if collect:
        gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best_of(fn: Callable[[], object], repeat: int, collect: bool = True) -> float:
    """The fastest of `repeat` timed calls: the one least disturbed by the machine."""
    return min(timed(fn, collect) for _ in range(repeat))


def rotated(names: Sequence[T], r: int) -> list[T]:
    """Round `r`'s order of the conditions: each round starts one further along, so a
    noisy stretch of the machine hits every condition alike."""
    k = r % len(names)
    return [*names[k:], *names[:k]]


def median_ratio(values: Iterable[float], base: Iterable[float]) -> float:
    """The median of per-round ratios to the baseline measured in the same rounds."""
    return statistics.median(v / b for v, b in zip(values, base, strict=True))


def run_wall_cpu(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, user+system CPU seconds) of a command and the children it waited
    for; exits the benchmark when the command fails."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return wall, ru.ru_utime + ru.ru_stime


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (index 0 is the state, 1 the
    parent, 2 the process group, 11-14 utime, stime, cutime, cstime in clock ticks), or
    None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (a server's workers); none when it is gone."""
    pids: list[int] = []
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/children") as f:
                pids += [int(c) for c in f.read().split()]
    except FileNotFoundError:
        pass
    return pids


CLOCK_TICK = os.sysconf("SC_CLK_TCK")
