"""Cost per instrumented call: a near-empty method called millions of times, on QuickJS
and Node, with the uninstrumented run of the same script as baseline in the same run.

    .venv/bin/python benchmarks/bench_instrument.py [--calls-quickjs N] [--calls-node N]

The script times its own hot loop with performance.now() (so start-up, the transform and
the report are not counted) and prints it as JSON; each configuration runs in a fresh
process, interleaved, best of --repeat.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = """\
const N = Number(typeof scriptArgs !== "undefined" ? scriptArgs[1] : process.argv[2]);
class Tiny { m(x) { return x + 1; } }
const t = new Tiny();
let acc = 0;
for (let i = 0; i < 10000; i++) acc = t.m(acc); // warm-up (JIT tiers on Node)
const t0 = performance.now();
for (let i = 0; i < N; i++) acc = t.m(acc);
const ms = performance.now() - t0;
console.log(JSON.stringify({ ms, n: N, acc }));
"""


def run(cmd: list[str]) -> float:
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(json.loads(p.stdout.strip().splitlines()[-1])["ms"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls-quickjs", type=int, default=2_000_000)
    ap.add_argument("--calls-node", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    jsprof = [sys.executable, "-m", "jsprof.cli", "instrument", "--watch", "Tiny"]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "tiny.js")
        Path(path).write_text(SCRIPT)
        trace = str(Path(tmp) / "t.json")
        configs: dict[str, list[tuple[str, list[str]]]] = {
            "quickjs": [
                ("baseline", [sys.executable, "-c", f"from jsprof.record import run; "
                              f"run({path!r}, ['{a.calls_quickjs}'])"]),
                ("instrumented", [*jsprof, path, str(a.calls_quickjs)]),
                ("instrumented + spans", [*jsprof, "--trace", trace, path, str(a.calls_quickjs)]),
            ],
        }
        if shutil.which("node"):
            configs["node"] = [
                ("baseline", ["node", path, str(a.calls_node)]),
                ("instrumented", [*jsprof, "--engine", "node", path, str(a.calls_node)]),
                ("instrumented + spans",
                 [*jsprof, "--engine", "node", "--trace", trace, path, str(a.calls_node)]),
            ]
        print("| engine | run | calls | loop ms (best) | ns per call | added ns per call |")
        print("| --- | --- | --- | --- | --- | --- |")
        for engine, runs in configs.items():
            n = a.calls_quickjs if engine == "quickjs" else a.calls_node
            best = {name: float("inf") for name, _ in runs}
            for _ in range(a.repeat):
                for name, cmd in runs:  # interleaved: machine noise hits all alike
                    best[name] = min(best[name], run(cmd))
            base = best["baseline"] * 1e6 / n
            for name, _ in runs:
                ns = best[name] * 1e6 / n
                added = "" if name == "baseline" else f"{ns - base:.0f}"
                print(f"| {engine} | {name} | {n:,} | {best[name]:.1f} | {ns:.1f} | {added} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
