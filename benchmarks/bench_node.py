"""Overhead of `jsprof record --engine node` against plain node and `node --cpu-prof`.

Conditions, run interleaved in each round (order rotated per round, so drift and
neighbours' noise fall on every condition alike):
  plain          node workload.js
  cpu-prof I     node --cpu-prof --cpu-prof-interval I workload.js
  jsprof I       jsprof record --engine node --interval I -o OUT workload.js
                 (through `jsprof.record.record(..., engine="node")`, the same function
                 the CLI calls, in a fresh Python process as the CLI would be)
for I in 1 ms and 0.1 ms. Measured per run: wall time, and CPU time (user+sys) of the
whole process tree (os.wait4 on the direct child: it includes the descendants it waited
for, i.e. Node under jsprof). The workload does a fixed amount of work (~1.5 s), so a
slower run shows as more time, not fewer iterations.

Printed: median wall and CPU per condition, and the median of per-round ratios
(each condition / plain, jsprof / cpu-prof at the same interval).
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

WORKLOAD = r"""
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
class Vec {
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

# Also writes Node's own CPU seconds (RUSAGE_CHILDREN of the Python process) to argv[4],
# to tell the profiler's cost inside Node from Python's start-up and conversion.
JSPROF = (
    "import sys, resource; from jsprof.record import record; "
    "record(sys.argv[1], engine='node', sample_interval=float(sys.argv[2]), output=sys.argv[3]); "
    "ru = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "open(sys.argv[4], 'w').write(str(ru.ru_utime + ru.ru_stime))"
)


def run(cmd: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return wall, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15, help="rounds (default 15)")
    ap.add_argument("--rounds", type=int, default=6, help="workload repeats (default 6)")
    ap.add_argument("--node", default="node")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_node_"))
    script = tmp / "workload.js"
    script.write_text(WORKLOAD.replace("ROUNDS", str(a.rounds)))
    py = sys.executable
    conds: dict[str, list[str]] = {"plain": [a.node, str(script)]}
    for ms in (1.0, 0.1):
        us = str(round(ms * 1000))
        conds[f"cpu-prof {ms:g}"] = [
            a.node, "--cpu-prof", "--cpu-prof-interval", us, "--cpu-prof-dir", str(tmp / "cpuprof"),
            str(script),
        ]  # fmt: skip
        conds[f"jsprof {ms:g}"] = [
            py, "-c", JSPROF, str(script), str(ms), str(tmp / "out.json"), str(tmp / "node_cpu"),
        ]  # fmt: skip
    names = list(conds)
    res: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    # "node in jsprof I": Node's CPU alone under jsprof (wall: not separable, repeated).
    node_only: dict[str, list[tuple[float, float]]] = {}
    run(conds["plain"])  # warm the file cache and Node's code cache
    for r in range(a.pairs):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order:
            res[n].append(run(conds[n]))
            if n.startswith("jsprof"):
                cpu = float((tmp / "node_cpu").read_text())
                node_only.setdefault("node in " + n, []).append((res[n][-1][0], cpu))
        print(f"round {r + 1}/{a.pairs} done", file=sys.stderr)

    def med(n: str, i: int) -> float:
        return statistics.median(x[i] for x in res[n])

    def ratio(n: str, base: str, i: int) -> float:
        return statistics.median(x[i] / y[i] for x, y in zip(res[n], res[base], strict=True))

    print(f"{a.pairs} interleaved rounds; workload {a.rounds} repeats; node {a.node}")
    print(f"{'condition':22} {'wall s':>7} {'cpu s':>7} {'wall/plain':>11} {'cpu/plain':>10}"
          f" {'wall/cpu-prof':>14} {'cpu/cpu-prof':>13}")  # fmt: skip
    res.update(node_only)
    for n in [*names, *node_only]:
        line = (
            f"{n:22} {med(n, 0):7.3f} {med(n, 1):7.3f} "
            f"{ratio(n, 'plain', 0):11.3f} {ratio(n, 'plain', 1):10.3f}"
        )
        if "jsprof" in n:
            base = "cpu-prof " + n.split()[-1]
            line += f" {ratio(n, base, 0):14.3f} {ratio(n, base, 1):13.3f}"
        print(line)


if __name__ == "__main__":
    main()
