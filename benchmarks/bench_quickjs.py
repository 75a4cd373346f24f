"""QuickJS sampler cost, sample counts and attribution, as `jsprof` users run it.

CPU: `jsprof record --interval X` over `jsprof run` of the same script, each command's
CPU on an empty script subtracted (so Python's start-up and imports cancel out), all
children's user+system CPU (the sampler's timer thread included). Runs are interleaved
(run, record 1 ms, record 0.1 ms, the timer-thread mode at 0.1 ms, ...) so drift on a
shared machine hits every mode alike; medians are reported. "timer 0.1" is the older
default (a timer thread wakes at every tick: JSPROF_QUICKJS_SAMPLER=timer); the default
now self-samples (the interpreter compares a cheap clock with the next due time at
polls and where built-ins return).

Samples: each trace's sample count against what its interval implies over the sampled
span, and the median gap between samples (the achieved interval).

Attribution: short JSON.parse calls (f) alternating with a busy loop (g), profiled at
0.1 ms in-process: f's share of f+g samples against its share of time measured inside the
script with performance.now().

The last lines check issue 16's goals for the default (self-sampling) modes: CPU ratio
<= 1.03 at 1 ms and <= 1.15 at 0.1 ms (medians); every single trace holds at least half
the samples its interval implies (the minimum over all runs); the alternation within
3 pp of its true split at 0.1 ms (the largest difference of its runs). The load average
is printed before and after: the ratios mean little on a loaded machine.

    .venv/bin/python benchmarks/bench_quickjs.py [--repeats 5] [--size 6]
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

JSPROF = str(Path(sys.executable).parent / "jsprof")

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

ALTERNATION = """
const s = JSON.stringify(Array.from({length: 1000}, (_, i) => ({a: i, b: 'x' + i})));
function f() { JSON.parse(s); }
function g() { const t = performance.now(); while (performance.now() - t < 0.3) {} }
let tf = 0, tg = 0;
for (let i = 0; i < 1500; i++) {
  let t = performance.now(); f(); tf += performance.now() - t;
  t = performance.now(); g(); tg += performance.now() - t;
}
globalThis.share = tf / (tf + tg);
"""

# name, extra jsprof arguments (None: `jsprof run`), environment
MODES: list[tuple[str, list[str] | None, dict[str, str]]] = [
    ("run", None, {}),
    ("record 1 ms", ["--interval", "1"], {}),
    ("record 0.1 ms", ["--interval", "0.1"], {}),
    ("timer 1 ms", ["--interval", "1"], {"JSPROF_QUICKJS_SAMPLER": "timer"}),
    ("timer 0.1 ms", ["--interval", "0.1"], {"JSPROF_QUICKJS_SAMPLER": "timer"}),
]


def child_cpu(cmd: list[str], env: dict[str, str]) -> float:
    """User+system CPU seconds of one command (and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def command(extra: list[str] | None, script: Path, out: Path) -> list[str]:
    if extra is None:
        return [JSPROF, "run", str(script)]
    return [JSPROF, "record", *extra, "-o", str(out), str(script)]


def alternation(mode_env: dict[str, str]) -> tuple[float, float]:
    """(sampled share of f, true share of f) in a fresh interpreter."""
    code = (
        "import collections, sys\n"
        "from jsprof.engines.quickjs import QuickJS\n"
        "rt = QuickJS(); s = rt.profiler(sample_interval=0.1)\n"
        "rt.eval(sys.stdin.read(), 'alt.js'); tr = s.stop()\n"
        "c = collections.Counter(tr.frames[tr.stack_frame[x]].name for x in tr.sample_stack "
        "if x >= 0)\n"
        "print(c['f'] / (c['f'] + c['g']), rt.eval('share'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], input=ALTERNATION, text=True,
                       capture_output=True, check=True, env={**os.environ, **mode_env})
    sampled, true = map(float, r.stdout.split())
    return sampled, true


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--size", type=int, default=6, help="workload repetitions per run")
    ap.add_argument("--alt-runs", type=int, default=3, help="alternation runs per mode")
    args = ap.parse_args()
    from jsprof import load

    load_before = _load()

    cpu: dict[str, list[float]] = collections.defaultdict(list)
    empty: dict[str, list[float]] = collections.defaultdict(list)
    samples: dict[str, list[tuple[int, float, float]]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as d:
        work, nothing, out = Path(d) / "work.js", Path(d) / "empty.js", Path(d) / "o.json"
        work.write_text(WORKLOAD.replace("SIZE", str(args.size)))
        nothing.write_text("")
        child_cpu(command(None, work, out), {})  # warm the page cache
        for _ in range(args.repeats):
            for name, extra, env in MODES:
                cpu[name].append(child_cpu(command(extra, work, out), env))
                if extra is not None:
                    t = load(out).tracks[0].trace
                    interval = float(extra[1])
                    span = float(t.sample_time[-1] - t.sample_time[0])
                    gap = float(np.median(np.diff(t.sample_time)))
                    samples[name].append((t.num_samples, span / interval, gap))
                empty[name].append(child_cpu(command(extra, nothing, out), env))
        alt = {name: [alternation(env) for _ in range(args.alt_runs)]
               for name, env in (("self 0.1 ms", {}),
                                 ("timer 0.1 ms", {"JSPROF_QUICKJS_SAMPLER": "timer"}))}
    base = statistics.median(cpu["run"]) - statistics.median(empty["run"])
    print(f"QuickJS sampler: {args.repeats} interleaved repeats, workload size {args.size}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load_before} -> {_load()}")
    print(f"{'mode':<14} {'cpu s':>7} {'empty s':>8} {'net s':>7} {'ratio':>6} "
          f"{'samples':>8} {'implied':>8} {'kept':>5} {'gap ms':>7}")
    for name, extra, _ in MODES:
        c, e = statistics.median(cpu[name]), statistics.median(empty[name])
        line = f"{name:<14} {c:>7.3f} {e:>8.3f} {c - e:>7.3f} {(c - e) / base:>6.3f}"
        if extra is not None:
            n = statistics.median(x[0] for x in samples[name])
            implied = statistics.median(x[1] for x in samples[name])
            gap = statistics.median(x[2] for x in samples[name])
            line += f" {n:>8.0f} {implied:>8.0f} {n / implied:>5.2f} {gap:>7.3f}"
        print(line)
    print(f"alternation at 0.1 ms: f's share of f+g samples vs of time ({args.alt_runs} runs each)")
    for name, runs in alt.items():
        diffs = [100 * (s - t) for s, t in runs]
        print(f"  {name:<13} " + "  ".join(f"{100 * s:.1f}% vs {100 * t:.1f}%" for s, t in runs)
              + f"  (max |diff| {max(abs(x) for x in diffs):.1f} pp)")
    print("goals (issue 16, default self-sampling):")
    for name, goal in (("record 1 ms", 1.03), ("record 0.1 ms", 1.15)):
        c, e = statistics.median(cpu[name]), statistics.median(empty[name])
        ratio = (c - e) / base
        print(f"  {name} CPU {ratio:.3f}x of run (goal <= {goal}): "
              f"{'met' if ratio <= goal else 'MISSED'}")
        least = min(n / implied for n, implied, _ in samples[name])
        print(f"  {name} fewest samples in one trace: {least:.2f} of what the interval "
              f"implies (goal >= 0.5): {'met' if least >= 0.5 else 'MISSED'}")
    worst = max(abs(100 * (s - t)) for s, t in alt["self 0.1 ms"])
    print(f"  alternation at 0.1 ms: largest |sampled - true| {worst:.1f} pp (goal <= 3): "
          f"{'met' if worst <= 3 else 'MISSED'}")


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
