"""QuickJS's CPU clock (`record --clock cpu`) against the wall clock: how much the totals of
N identical runs spread under machine load, and what the CPU clock costs.

Spread: the same script recorded N times with each clock (interleaved: wall, cpu, cpu,
wall, ...) while 2 x cores + 1 busy processes load the machine (bounded, killed at the
end; `--no-load` for the machine as it is). For each clock: the JS samples' total (what
`report` sums), its max/min over the runs, and its median ratio to the recording thread's
own CPU time (`time.thread_time`: the runtime evaluates on the calling thread).

Overhead: the same script evaluated in-process with no sampler, with the sampler at
`--interval` on the wall clock and on the CPU clock, interleaved rounds, the whole
process's CPU (`time.process_time`: the sampler's thread included); medians of the
per-round ratios to the no-sampler baseline of the same round.

    .venv/bin/python benchmarks/bench_cpuclock.py [--runs 5] [--size 3] [--no-load]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import WORKLOAD_FUNCTIONS, median_ratio, rotated  # noqa: E402
from jsprof.engines.quickjs import QuickJS  # noqa: E402
from jsprof.record import record  # noqa: E402
from jsprof.trace import NONE, sample_weights  # noqa: E402


def workload(size: int) -> str:
    return WORKLOAD_FUNCTIONS + f"""
for (let r = 0; r < {size}; r++) {{
  fib(22); strings(20000); objects(8000); json(4000);
}}
"""


def busy(n: int) -> list[subprocess.Popen]:
    code = "import time\nend = time.monotonic() + 300\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def one_recording(path: str, clock: str, interval: float) -> tuple[float, float]:
    """(JS samples' total ms, the recording thread's CPU ms)."""
    t0 = time.thread_time()
    rec = record(path, sample_interval=interval, clock=clock)
    cpu = (time.thread_time() - t0) * 1000
    t = rec.tracks[0]
    w = sample_weights(t.trace, t.sample_interval)
    return float(w[t.trace.sample_stack != NONE].sum()), cpu


def spread(path: str, runs: int, interval: float) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {"wall": [], "cpu": []}
    for r in range(runs):
        for clock in rotated(["wall", "cpu"], r):
            out[clock].append(one_recording(path, clock, interval))
    return out


def overhead(src: str, rounds: int, interval: float) -> dict[str, float]:
    def once(clock: str | None) -> float:
        rt = QuickJS()
        s = None if clock is None else rt.profiler(sample_interval=interval, clock=clock)
        t0 = time.process_time()
        rt.eval(src, "bench.js")
        if s is not None:
            s.stop()
        return time.process_time() - t0

    got: dict[str, list[float]] = {"none": [], "wall": [], "cpu": []}
    for r in range(rounds):
        for mode in rotated(list(got), r):
            got[mode].append(once(None if mode == "none" else mode))
    return {m: median_ratio(got[m], got["none"]) for m in ("wall", "cpu")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--no-load", action="store_true")
    a = ap.parse_args()
    src = workload(a.size)
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "work.js")
        Path(path).write_text(src)
        procs = [] if a.no_load else busy(2 * (os.cpu_count() or 2) + 1)
        try:
            time.sleep(0.3)
            res = spread(path, a.runs, a.interval)
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
    print(f"spread over {a.runs} runs at {a.interval:g} ms, "
          f"{'no extra load' if a.no_load else f'{len(procs)} busy processes'}:")
    for clock, rows in res.items():
        totals = [t for t, _ in rows]
        ratio = statistics.median(t / c for t, c in rows)
        print(f"  {clock:4}  totals {', '.join(f'{t:.0f}' for t in totals)} ms; "
              f"max/min {max(totals) / min(totals):.3f}; total / thread CPU {ratio:.3f}")
    ov = overhead(src, max(3, a.runs), a.interval)
    print(f"overhead at {a.interval:g} ms (process CPU over no sampler, median of "
          f"{max(3, a.runs)} rounds): wall {ov['wall']:.3f}, cpu {ov['cpu']:.3f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
