"""`jsprof budget` (#38) against its measured goals, on QuickJS's CPU clock, on the machine as
it is (say the load when quoting):

  A/A     the same script on both sides: how often the verdict is (falsely) "slower"
          (goal <= 5 % over 40 runs);
  25 %    one function (`render`, most of the time) 25 % slower in NEW: how often the
          verdict is "slower" with `render` named first (goal >= 95 %), each decided
          within 2 minutes;
  10 %    the same function 10 % slower: decided (any verdict but "unsure") within
          3 minutes.

Each run is one `jsprof.budget.budget(...)` call (the library `jsprof budget` runs),
`--max-slower 5`, the default rounds and a 120 s (A/A, 25 %) or 180 s (10 %) time cap;
the time to decision is its own elapsed time.

    .venv/bin/python benchmarks/bench_budget.py [--runs 40] [--only aa,25,10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jsprof.budget import budget

# `render` is about 70 % of the time and has its own loop; `tokenize` and `layout` the rest.
APP = """
function tokenize(n) { let s = 0; for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003; return s; }
function render(n) {
  let s = 1; for (let i = 0; i < Math.round(n * FACTOR); i++) s = (s * 31 + i) % 1000033;
  return s;
}
function layout(n) { let s = 2; for (let i = 0; i < n; i++) s = (s + (i ^ s)) % 999983; return s; }
let t = 0;
for (let k = 0; k < 4; k++) { t += tokenize(40000); t += render(220000); t += layout(40000); }
globalThis.result = t;
"""


def pair(root: Path, factor: float) -> tuple[Path, Path]:
    (root / "base").mkdir(exist_ok=True)
    (root / "new").mkdir(exist_ok=True)
    base, new = root / "base" / "app.js", root / "new" / "app.js"
    base.write_text(APP.replace("FACTOR", "1"))
    new.write_text(APP.replace("FACTOR", repr(factor)))
    return base, new


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def trial(name: str, base: Path, new: Path, runs: int, cap: float) -> list[dict]:
    out = []
    for i in range(runs):
        res = budget(base, new, max_slower=5.0, time_cap=cap)
        first = res.changed[0].key.name if res.changed else None
        lo, hi = res.interval
        row = {"verdict": res.verdict, "rounds": res.rounds, "s": res.elapsed,
               "first": first, "lo": lo, "hi": hi, "change": res.change_pct}
        out.append(row)
        print(f"{name} {i + 1}/{runs}: {res.verdict:7} rounds {res.rounds:3} "
              f"{res.elapsed:6.1f} s  change {row['change'] or 0:+6.1f}% [{lo}, {hi}]  "
              f"first {first}  load {load()}", flush=True)
    return out


def summary(name: str, rows: list[dict], cap: float) -> None:
    n = len(rows)
    by = {v: sum(r["verdict"] == v for r in rows) for v in ("slower", "same", "faster", "unsure")}
    secs = sorted(r["s"] for r in rows)
    decided = [r for r in rows if r["verdict"] != "unsure"]
    named = sum(r["verdict"] == "slower" and r["first"] == "render" for r in rows)
    print(f"== {name}: {n} runs: " + ", ".join(f"{v} {k}" for v, k in by.items()))
    print(f"   time to decision s: median {statistics.median(secs):.1f}, max {secs[-1]:.1f} "
          f"(cap {cap:g}); decided {len(decided)}/{n}; rounds median "
          f"{statistics.median(r['rounds'] for r in rows):g}")
    if name == "A/A":
        print(f"   false slower: {by['slower']}/{n} ({100.0 * by['slower'] / n:.1f} %)")
    else:
        print(f"   slower with render named first: {named}/{n} ({100.0 * named / n:.1f} %)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--only", default="aa,25,10")
    a = ap.parse_args()
    only = set(a.only.split(","))
    print(f"load at start {load()}", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = []
        if "aa" in only:
            (root / "aa").mkdir()
            base, _ = pair(root / "aa", 1.0)
            results.append(("A/A", trial("A/A", base, base, a.runs, 120.0), 120.0))
        if "25" in only:
            (root / "p25").mkdir()
            base, new = pair(root / "p25", 1.25)
            results.append(("25%", trial("25%", base, new, a.runs, 120.0), 120.0))
        if "10" in only:
            (root / "p10").mkdir()
            base, new = pair(root / "p10", 1.10)
            results.append(("10%", trial("10%", base, new, a.runs, 180.0), 180.0))
    for name, rows, cap in results:
        summary(name, rows, cap)
    print(f"load at end {load()}; {time.monotonic() - t0:.0f} s in all", flush=True)


if __name__ == "__main__":
    sys.exit(main())
