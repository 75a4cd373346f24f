"""Cost of `jsprof record --engine node` against `node --cpu-prof`, and its start-up.

Conditions, run interleaved in each round (order rotated per round, so drift and
neighbours' noise fall on every condition alike):
  plain            node workload.js
  cpu-prof I       node --cpu-prof --cpu-prof-interval I workload.js        (I = 1, 0.1 ms)
  jsprof I         jsprof record --engine node --interval I -o OUT workload.js (the CLI, in a
                   fresh Python process, as a user runs it)
  cpu-prof empty   node --cpu-prof of an empty script
  jsprof empty     jsprof record --engine node of an empty script
  jsprof 1 <opt>   options tried for the slices that keep samples if Node is killed:
                   `1s-slices` (one slice a second, the old period), `no-slices` (only
                   the profile at the end: no insurance, the floor of the design)
  before I/empty   with --before-src DIR: the same CLI from another checkout's src/
                   (e.g. the nested once-a-second console.profile slices it replaced)
Measured per run: wall time, and CPU time (user+sys) of the whole process tree (os.wait4 on
the direct child: it includes the descendants it waited for, i.e. Node under jsprof). The
workload does a fixed amount of work, so a slower run shows as more time.

Printed: median wall and CPU per condition; the cost ratio of the goal, per round then
median: (CPU of jsprof I - CPU of jsprof empty) / (CPU of cpu-prof I - CPU of cpu-prof
empty); the samples per interval-implied samples; the start-up ratio jsprof empty /
cpu-prof empty (wall).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _common import WORKLOAD_FUNCTIONS, median_ratio, rotated, run_wall_cpu

WORKLOAD = WORKLOAD_FUNCTIONS + r"""class Vec {
  constructor(x, y) { this.x = x; this.y = y; }
  add(o) { return new Vec(this.x + o.x, this.y + o.y); }
}
function vectors(n) {
  let v = new Vec(0, 0); for (let i = 0; i < n; i++) v = v.add(new Vec(i & 7, 1)); return v.x;
}
let acc = 0;
for (let r = 0; r < ROUNDS; r++) {
  acc += fib(25) + strings(200000) + objects(60000) + json(40000) + vectors(2000000);
}
if (acc === 42) console.log(acc);
"""

# The CLI with module constants set first (the slice options), then sys.argv as given.
JSPROF = (
    "import sys, importlib; sets = sys.argv.pop(1)\n"
    "for kv in filter(None, sets.split(',')):\n"
    "    k, v = kv.split('=')\n"
    "    setattr(importlib.import_module('jsprof.engines.node.isolate'), k, float(v))\n"
    "from jsprof.cli import main; sys.exit(main(sys.argv[1:]))"
)
OPTIONS = {
    "1s-slices": "FIRST_SLICE=1.0,SLICE_PERIOD=1.0",
    "no-slices": "FIRST_SLICE=1e9,SLICE_PERIOD=1e9",
}


# As installed by pip, jsprof runs from cached bytecode: a PYTHONDONTWRITEBYTECODE here
# would make every run compile jsprof's modules again (~0.1 s more CPU per start).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(cmd: list[str]) -> tuple[float, float]:
    return run_wall_cpu(cmd, env=ENV)


def samples_in(path: Path) -> int:
    import jsprof

    return jsprof.load(path).tracks[0].trace.num_samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=8, help="rounds (default 8)")
    ap.add_argument("--rounds", type=int, default=6, help="workload repeats (default 6)")
    ap.add_argument("--node", default="node")
    ap.add_argument("--before-src", help="a checkout's src/ to compare against (PYTHONPATH)")
    ap.add_argument(
        "--startup", action="store_true", help="only the empty-script conditions (start-up)"
    )
    ap.add_argument(
        "--no-options", action="store_true", help="leave out the slice options (1s/no slices)"
    )
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_node_"))
    script = tmp / "workload.js"
    script.write_text(WORKLOAD.replace("ROUNDS", str(a.rounds)))
    empty = tmp / "empty.js"
    empty.write_text("")
    py = sys.executable
    cpuprof = [a.node, "--cpu-prof", "--cpu-prof-dir", str(tmp / "cpuprof")]
    conds: dict[str, list[str]] = {"plain": [a.node, str(script)]}
    outs: dict[str, Path] = {}

    def jsprof(name: str, ms: float, target: Path, sets: str = "", env: str = "") -> None:
        out = tmp / f"{name.replace(' ', '_')}.jsprof.json"
        outs[name] = out
        cmd = [py, "-c", JSPROF, sets, "record", "--engine", "node", "--interval", f"{ms:g}"]
        conds[name] = [*cmd, "-o", str(out), str(target)]
        if env:
            conds[name] = ["env", f"PYTHONPATH={env}", *conds[name]]

    if a.startup:
        del conds["plain"]
    for ms in () if a.startup else (1.0, 0.1):
        conds[f"cpu-prof {ms:g}"] = [
            *cpuprof, "--cpu-prof-interval", str(round(ms * 1000)), str(script)
        ]  # fmt: skip
        jsprof(f"jsprof {ms:g}", ms, script)
    conds["cpu-prof empty"] = [*cpuprof, str(empty)]
    jsprof("jsprof empty", 1.0, empty)
    for opt, sets in () if a.startup or a.no_options else OPTIONS.items():
        jsprof(f"jsprof 1 {opt}", 1.0, script, sets)
    if a.before_src:
        for ms in () if a.startup else (1.0, 0.1):
            jsprof(f"before {ms:g}", ms, script, env=a.before_src)
        jsprof("before empty", 1.0, empty, env=a.before_src)
    names = list(conds)
    res: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    nsamples: dict[str, list[int]] = {n: [] for n in outs}
    for n in names:  # warm the file cache, Node's code cache and Python's bytecode cache
        if not n.startswith("cpu-prof"):
            run(conds[n])
    for r in range(a.pairs):
        for n in rotated(names, r):
            res[n].append(run(conds[n]))
            if n in outs:
                nsamples[n].append(samples_in(outs[n]))
            elif n.startswith("cpu-prof"):
                newest = max((tmp / "cpuprof").iterdir(), key=lambda f: f.stat().st_mtime)
                nsamples.setdefault(n, []).append(len(json.loads(newest.read_text())["samples"]))
                newest.unlink()
        print(f"round {r + 1}/{a.pairs} done", file=sys.stderr)

    def med(n: str, i: int) -> float:
        return statistics.median(x[i] for x in res[n])

    def cost(n: str, base: str, n0: str, base0: str) -> float:
        return statistics.median(
            (x[1] - x0[1]) / (y[1] - y0[1])
            for x, y, x0, y0 in zip(res[n], res[base], res[n0], res[base0], strict=True)
        )

    print(f"{a.pairs} interleaved rounds; workload {a.rounds} repeats; node {a.node}")
    print(f"{'condition':24} {'wall s':>7} {'cpu s':>7} {'samples':>8} {'cost/cpu-prof':>14}")
    for n in names:
        line = f"{n:24} {med(n, 0):7.3f} {med(n, 1):7.3f}"
        if n in nsamples:
            line += f" {statistics.median(nsamples[n]):8.0f}"
        else:
            line += " " * 9
        ms = n.split()[1] if n.split()[0] in ("jsprof", "before") else ""
        if ms in ("1", "0.1"):
            empty0 = "before empty" if n.startswith("before") else "jsprof empty"
            line += f" {cost(n, f'cpu-prof {ms}', empty0, 'cpu-prof empty'):14.3f}"
        print(line)
    if "plain" in res:
        plain_cpu = med("plain", 1)
        print(f"(plain node: {plain_cpu:.3f} s CPU, so an interval implies "
              f"{plain_cpu * 1000:.0f} samples at 1 ms and {plain_cpu * 10000:.0f} at 0.1 ms; "
              "V8 spaces 0.1 ms requests ~0.15-0.2 ms apart)")  # fmt: skip
    for n0 in ("jsprof empty", "before empty"):
        if n0 in res:
            ratio = median_ratio((x[0] for x in res[n0]), (y[0] for y in res["cpu-prof empty"]))
            print(f"start-up: {n0} / cpu-prof empty (wall) = {ratio:.2f}x")


if __name__ == "__main__":
    main()
