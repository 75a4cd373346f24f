"""QuickJS sampler: what the frame-exit check and the approach to each due time cost
(issue 32: a function with no loop and no call keeps its time).

Two workloads, each evaluated in-process (`QuickJS().eval`) in a fresh child process per
measurement, its CPU time (`time.process_time`: the sampler's thread included) around the
eval only: fib (calls and returns, nothing else: the worst case for a check at every
frame exit) and acorn (npm, pinned) parsing its own dist/acorn.js. Modes, interleaved
round by round so drift on a shared machine hits each alike:

- none: no sampler;
- before: the sampler at --interval with the approach off (`_quickjs.set_approach(0)`:
  a look every 1,000 polls, frame exits not looking, as before the change); with
  `--clock wall`, the wall clock without the rseq watch (`_quickjs.set_watch(0)`: no
  approach either, as before the wall clock had them);
- after: the sampler as shipped (the approach; frame exits look near each due time, and
  on the wall clock after each deschedule);
- main (with --baseline PYTHON, e.g. /work/main/.venv/bin/python): no sampler, on a
  build without the frame-exit check (or the rseq watch's): its loads per frame exit,
  unprofiled; main-after: that build's sampler as it ships (a change of the checks,
  side by side: after/main-after).

--workloads callbacks: `forEach` of a tiny function, C calling bytecode and nothing
else: the worst case for a check where a built-in calls back into JavaScript.
--workloads replace: a regexp `replace` with a callback building a 6.9 MB string (4
passes of tests/test_quickjs_native_callbacks.py's script): where a big buffer's growth
looks at the clock.
--workloads gc: a `map` with a tiny callback whose result is left in a cycle, beside a
live graph of 200,000 objects (tests/test_quickjs_gc.py's cyclic half): ~15 garbage
collections, where each one's start and end look at the clock.

Prints medians and the ratios of the medians of per-round ratios.

    .venv/bin/python benchmarks/bench_quickjs_leaves.py [--rounds 7] [--interval 1] [--clock wall]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ACORN = Path(__file__).resolve().parent.parent / "tests" / "js" / "node_modules" / "acorn"
FIB = "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\nfib(31);\n"
# C calling bytecode, nothing else: what a check where a built-in calls back costs
CALLBACKS = ("var a = new Array(1000).fill(1), t = 0;\nfunction f(x) { t += x; }\n"
             "for (var i = 0; i < 2000; i++) a.forEach(f);\n")
# a built-in's own work between callbacks, its result string grown by big reallocations
REPLACE = (
    "var pad = 'abcdefghij'.repeat(230), out = [];\n"
    "for (var i = 0; i < 3000; i++) { var at = (i * 7919) % 2292;\n"
    "  out.push(pad.slice(0, at) + 'ABCDE' + (i % 10) + pad.slice(0, 2294 - at)); }\n"
    "var text = out.join('\\n'), n = 0;\n"
    "function lower(m) { return m.toLowerCase(); }\n"
    "for (var p = 0; p < 4; p++) n += text.replace(/[A-Z]{5}\\d/g, lower).length;\n")
# garbage collections: cycles only the collector frees, a live graph each one walks
GC = (
    "var live = [];\nfor (var i = 0; i < 100000; i++) { var a = { i: i }, b = { a: a };\n"
    "  a.b = b; live.push(a); }\nvar words = [];\n"
    "for (var i = 0; i < 20; i++) words.push('word' + i);\n"
    "function up(w) { return w.toUpperCase(); }\n"
    "function upAll(ws) { var r = ws.map(up); r.self = r; return r.length; }\n"
    "for (var k = 0, n = 0; k < 60000; k++) n += upAll(words);\n")


def acorn_setup() -> tuple[str, str]:
    """acorn's UMD build (sets globalThis.acorn), and the parse of its own source."""
    lib = (ACORN / "dist" / "acorn.js").read_text()
    import json

    run = (f"var SOURCE = {json.dumps(lib)};\nfor (var i = 0; i < 1; i++) "
           'acorn.parse(SOURCE, { ecmaVersion: "latest", locations: true });\n')
    return lib, run


def child(workload: str, mode: str, interval: float, clock: str) -> float:
    from jsprof.engines.quickjs import QuickJS

    if mode == "before":
        from jsprof import _quickjs

        if clock == "wall":
            _quickjs.set_watch(0)
        else:
            _quickjs.set_approach(0)
    rt = QuickJS()
    if workload == "acorn":
        lib, src = acorn_setup()
        rt.eval(lib, "acorn.js")
    else:
        src = {"callbacks": CALLBACKS, "replace": REPLACE, "gc": GC}.get(workload, FIB)
    s = None if mode in ("none", "main") else rt.profiler(sample_interval=interval,
                                                          clock=clock)
    t0 = time.process_time()
    rt.eval(src, "bench.js")
    cpu = time.process_time() - t0
    if s is not None:
        s.stop()
    return cpu


def measure(python: str, workload: str, mode: str, interval: float, clock: str) -> float:
    out = subprocess.run(
        [python, __file__, "--child", workload, mode, "--interval", str(interval),
         "--clock", clock],
        check=True, capture_output=True, text=True, timeout=600,
    ).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--interval", type=float, default=1.0, help="ms")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="the sampler's clock (wall: before = no rseq watch, no approach)")
    ap.add_argument("--baseline", help="a Python whose jsprof lacks the frame-exit check")
    ap.add_argument("--workloads", default="fib,acorn",
                    help="comma-separated: fib, acorn, callbacks (forEach of a tiny function), "
                         "replace (a regexp replace with a callback), gc (garbage "
                         "collections)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(child(a.child[0], a.child[1], a.interval, a.clock))
        return
    modes = ["none", "before", "after"] + (["main", "main-after"] if a.baseline else [])
    print(f"load average {os.getloadavg()[0]:.1f}; interval {a.interval} ms ({a.clock} clock); "
          f"{a.rounds} rounds")
    for workload in a.workloads.split(","):
        got: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(a.rounds):
            for m in modes[r % len(modes):] + modes[:r % len(modes)]:
                py = a.baseline if m.startswith("main") else sys.executable
                got[m].append(measure(py, workload, m.removeprefix("main-"), a.interval,
                                      a.clock))

        def ratio(x: str, y: str, got: dict[str, list[float]] = got) -> float:
            return statistics.median(p / q for p, q in zip(got[x], got[y], strict=True))

        med = {m: statistics.median(v) for m, v in got.items()}
        print(f"{workload}: CPU s (median) " + ", ".join(f"{m} {med[m]:.3f}" for m in modes))
        print(f"  before/none {ratio('before', 'none'):.3f}"
              f"  after/none {ratio('after', 'none'):.3f}"
              f"  after/before {ratio('after', 'before'):.3f}"
              + (f"  none/main {ratio('none', 'main'):.3f}"
                 f"  after/main-after {ratio('after', 'main-after'):.3f}" if a.baseline else ""))
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
