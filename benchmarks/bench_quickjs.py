"""QuickJS sampler overhead and capture latency.

Runs one JavaScript workload (calls, allocation, strings, sort, JSON, regex) without
profiling and with the sampler at 1 ms and 0.1 ms, interleaved (none, 1 ms, 0.1 ms, none,
...) so drift on a shared machine hits every mode alike. Each run gets a fresh runtime.
Reports median process CPU time (which includes the timer thread's own CPU) and wall time
per mode, overhead ratios against no profiling, and the capture latency (tick due ->
stack captured at the interpreter's next poll or when a built-in returns) pooled over all
profiled runs. "captured" is the share of samples stamped at their capture time; the
others came due during a built-in call (stamped at their due time, charged to its
caller) or while the runtime was idle.

"0.1 self" is the opt-in self-sampling mode (jsprof._quickjs.set_tuning): the interpreter
samples itself and the timer thread wakes every 1 ms; cheaper, but ticks due inside short
built-in calls are charged to what runs next, so it is off by default.

    .venv/bin/python benchmarks/bench_quickjs.py [--repeats 11] [--size 6]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from jsprof import _quickjs
from jsprof.engines.quickjs import QuickJS

WORKLOAD = """
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
class Vec {
  constructor(x, y) { this.x = x; this.y = y; }
  add(o) { return new Vec(this.x + o.x, this.y + o.y); }
  get len() { return Math.hypot(this.x, this.y); }
}
function vectors(n) {
  let v = new Vec(0, 0);
  for (let i = 0; i < n; i++) v = v.add(new Vec(i, 1));
  return v.len;
}
function strings(n) {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(97 + i % 26);
  return s.split('a').length;
}
function sorting(n) {
  const a = [];
  for (let i = 0; i < n; i++) a.push((i * 7919) % 10007);
  return a.sort((x, y) => x - y)[0];
}
function json(n) {
  const o = Array.from({length: n}, (_, i) => ({i, s: 'v' + i}));
  return JSON.parse(JSON.stringify(o)).length;
}
function regex(n) {
  const re = /(\\d+)-(\\w+)/g;
  let c = 0;
  for (const m of 'x 12-ab y 34-cd '.repeat(n).matchAll(re)) c++;
  return c;
}
function main(k) {
  let r = 0;
  for (let i = 0; i < k; i++) {
    r += fib(22) + vectors(60000) + strings(60000) + sorting(40000) + json(20000);
    r += regex(5000);
  }
  return r;
}
main(SIZE);
"""


def run_once(
    interval: float | None, size: int, self_sampling: bool = False
) -> tuple[float, float, np.ndarray, int]:
    rt = QuickJS()
    src = WORKLOAD.replace("SIZE", str(size))
    # opt-in mode: the interpreter samples itself, the timer thread wakes every 1 ms
    _quickjs.set_tuning(1.0 if self_sampling else 0.0, 1.0)
    session = rt.profiler(sample_interval=interval) if interval is not None else None
    _quickjs.set_tuning(0.0, 1.0)
    c0, w0 = time.process_time(), time.perf_counter()
    rt.eval(src, "bench.js")
    c1, w1 = time.process_time(), time.perf_counter()
    lat, n = np.zeros(0), 0
    if session is not None:
        n = session.stop().num_samples
        lat = session.capture_latencies_ms
    return c1 - c0, w1 - w0, lat, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--size", type=int, default=6, help="workload repetitions per run")
    args = ap.parse_args()
    modes: list[tuple[str, float | None]] = [
        ("none", None), ("1 ms", 1.0), ("0.1 ms", 0.1), ("0.1 self", 0.1)
    ]
    cpu: dict[str, list[float]] = {m: [] for m, _ in modes}
    wall: dict[str, list[float]] = {m: [] for m, _ in modes}
    lats: dict[str, list[np.ndarray]] = {m: [] for m, _ in modes}
    counts: dict[str, list[int]] = {m: [] for m, _ in modes}
    run_once(None, 1)  # warm up (page faults, caches)
    for _ in range(args.repeats):
        for name, interval in modes:
            c, w, lat, n = run_once(interval, args.size, name.endswith("self"))
            counts[name].append(n)
            cpu[name].append(c)
            wall[name].append(w)
            lats[name].append(lat)
    base_cpu, base_wall = statistics.median(cpu["none"]), statistics.median(wall["none"])
    print(f"QuickJS sampler benchmark: {args.repeats} interleaved repeats, size {args.size}")
    print(f"{'mode':<8} {'cpu s':>8} {'wall s':>8} {'cpu ovh':>8} {'wall ovh':>9}"
          f" {'lat p50 ms':>11} {'lat p99 ms':>11} {'samples/run':>12} {'captured':>9}")
    for name, _ in modes:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        pooled = np.concatenate(lats[name]) if lats[name] else np.zeros(0)
        if len(pooled):
            p50, p99 = np.percentile(pooled, [50, 99])
            lat_s = (f"{p50:>11.3f} {p99:>11.3f} {statistics.median(counts[name]):>12.0f}"
                     f" {100 * len(pooled) / sum(counts[name]):>8.0f}%")
        else:
            lat_s = f"{'-':>11} {'-':>11} {'-':>12} {'-':>9}"
        print(f"{name:<8} {c:>8.3f} {w:>8.3f} {100 * (c / base_cpu - 1):>7.1f}%"
              f" {100 * (w / base_wall - 1):>8.1f}% {lat_s}")


if __name__ == "__main__":
    main()
