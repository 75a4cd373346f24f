"""Cost of `jsprof record --engine node -- npm test` against a self-profiling preload in
every process (what `--cpu-prof` does, but `--cpu-prof` is not allowed in NODE_OPTIONS on
Node 20: "node: --cpu-prof is not allowed in NODE_OPTIONS", exit 9) and plain `npm test`.

The package's `test` script runs `node parent.js`, which forks CHILDREN children one after
another (child_process.fork), each doing a fixed amount of work (the workload functions of
bench_node.py), then does the same work itself. So the command starts 2 + CHILDREN Node
processes (npm's own, the parent, the children). With `--empty` every process does nothing:
the fixed cost per process.

Conditions, interleaved per round (order rotated each round):
  plain      npm test
  preload    NODE_OPTIONS="--require selfprof.js" npm test: each main thread runs V8's
             profiler from an in-process inspector.Session and writes its profile at exit
             (1 ms; measured as costly as --cpu-prof, docs/engines.md)
  jsprof     jsprof record --engine node -o OUT -- npm test             (1 ms, the CLI)
Measured per run: wall time and CPU time (user+sys) of the whole tree (os.wait4: jsprof,
npm and every Node process were waited for). Printed: the medians, and per round then
median the cost ratio (CPU jsprof - CPU plain) / (CPU preload - CPU plain), and the wall
ratios to plain. Read ratios, not seconds, on a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import WORKLOAD_FUNCTIONS, rotated, run_wall_cpu

WORK = WORKLOAD_FUNCTIONS + r"""
function work() {
  let acc = 0;
  for (let r = 0; r < ROUNDS; r++) acc += fib(23) + strings(100000) + objects(30000) + json(20000);
  if (acc === 42) console.log(acc);
}
"""

PARENT = WORK + r"""
const { fork } = require('node:child_process');
const n = Number(process.argv[2]);
if (process.argv[3] === 'child') work();
else {
  let left = n;
  const next = () => {
    if (left-- <= 0) { work(); return; }
    fork(__filename, [String(n), 'child']).on('exit', next);
  };
  next();
}
"""


SELFPROF = r"""
const { isMainThread } = require('node:worker_threads');
if (isMainThread) {
  const inspector = require('node:inspector');
  const fs = require('node:fs');
  const s = new inspector.Session();
  s.connect();
  s.post('Profiler.enable');
  s.post('Profiler.setSamplingInterval', { interval: 1000 });
  s.post('Profiler.start');
  process.on('exit', () => s.post('Profiler.stop', (err, r) => {
    if (!err) fs.writeFileSync(`DIR/${process.pid}.cpuprofile`, JSON.stringify(r.profile));
  }));
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--children", type=int, default=3)
    ap.add_argument("--work-rounds", type=int, default=3, help="ROUNDS of the workload")
    ap.add_argument("--empty", action="store_true", help="processes that do nothing")
    a = ap.parse_args()
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="bench-node-command-"))
    pkg = tmp / "pkg"
    pkg.mkdir()
    rounds = 0 if a.empty else a.work_rounds
    (pkg / "parent.js").write_text(PARENT.replace("ROUNDS", str(rounds)))
    (pkg / "package.json").write_text(
        '{"name": "bench", "version": "1.0.0", "private": true,'
        f' "scripts": {{"test": "node parent.js {a.children}"}}}}'
    )
    jsprof = [sys.executable, "-m", "jsprof.cli", "record", "--engine", "node", "-o",
              str(tmp / "out.jsprof.json"), "--", "npm", "test"]
    profdir = tmp / "cpuprof"
    profdir.mkdir()
    (tmp / "selfprof.js").write_text(SELFPROF.replace("DIR", str(profdir)))
    cpuprof_env = dict(os.environ, NODE_OPTIONS=f"--require {tmp / 'selfprof.js'}")
    conditions = {
        "plain": (["npm", "test"], None),
        "preload": (["npm", "test"], cpuprof_env),
        "jsprof": (jsprof, None),
    }
    wall: dict[str, list[float]] = {k: [] for k in conditions}
    cpu: dict[str, list[float]] = {k: [] for k in conditions}
    here = os.getcwd()
    os.chdir(pkg)
    try:
        for r in range(a.rounds):
            for name in rotated(list(conditions), r):
                cmd, env = conditions[name]
                w, c = run_wall_cpu(cmd, env)
                wall[name].append(w)
                cpu[name].append(c)
            made = len(list(profdir.iterdir()))
            if made != 2 + a.children:
                raise SystemExit(f"the preload wrote {made} profiles, not {2 + a.children}")
            for f in profdir.iterdir():
                f.unlink()
    finally:
        os.chdir(here)
    import jsprof as jp

    rec = jp.load(tmp / "out.jsprof.json")
    shutil.rmtree(tmp, ignore_errors=True)
    kind = "empty processes" if a.empty else f"workload ROUNDS={rounds}"
    print(f"npm test: npm + parent + {a.children} forked children ({kind}); "
          f"{a.rounds} rounds; load {os.getloadavg()[0]:.1f}")
    print(f"last jsprof recording: {len(rec.tracks)} tracks: "
          + ", ".join(t.name.split(" ", 2)[2] for t in rec.tracks))
    print("| condition | wall s | CPU s | wall / plain |")
    print("| --- | --- | --- | --- |")
    for name in conditions:
        ratio = statistics.median(w / p for w, p in zip(wall[name], wall["plain"], strict=True))
        print(f"| {name} | {statistics.median(wall[name]):.3f} | "
              f"{statistics.median(cpu[name]):.3f} | {ratio:.3f} |")
    costs = [
        (j - p) / (c - p) if c > p else float("nan")
        for j, c, p in zip(cpu["jsprof"], cpu["preload"], cpu["plain"], strict=True)
    ]
    print(f"CPU cost ratio (jsprof - plain) / (preload - plain), median of rounds: "
          f"{statistics.median(costs):.2f} (rounds: {', '.join(f'{x:.2f}' for x in costs)})")


if __name__ == "__main__":
    main()
