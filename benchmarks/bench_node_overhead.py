"""What `jsprof record --engine node` costs a real program, side by side with `node
--cpu-prof`: tsc (typescript 5.9.3 from tests/js) type-checking a real project (ajv 8's 106
TypeScript sources, as installed in tests/js: `tsc-ajv`, ~3 s of CPU), a 4-line project
(`tsc`: tsc's start-up, ~0.8 s) and an empty script (the fixed cost alone).

Conditions, interleaved in each round (order rotated per round, so the machine's noise
falls on every condition alike):
  plain tsc        node tsc.js PROJECT (tsc-ajv: the same on ajv's sources)
  cpu-prof tsc     node --cpu-prof --cpu-prof-interval 1000 tsc.js PROJECT
  jsprof tsc       jsprof record --engine node --interval 1 -o OUT tsc.js PROJECT (the
                   CLI in a fresh Python process, as a user runs it)
  plain/cpu-prof/jsprof empty   the same on an empty script
  before tsc/empty with --before-src DIR: the jsprof CLI from another checkout's src/
--interval MS sets both profilers' interval (default 1 ms, both tools' default).
--floor adds `floor tsc/empty`: the least a record path without numpy could cost (FLOOR).
Measured per run: wall time, and CPU time (user+sys) of the command and every process it
waited for (os.wait4's rusage: Python and Node under jsprof).

Printed: medians per condition and, median of per-round ratios, each command's CPU and wall
against plain node of the same script, and jsprof against `--cpu-prof` (the goals: jsprof
tsc CPU <= 1.10x plain and within 5 points of cpu-prof's, said for both projects; jsprof
empty wall <= 2.5x cpu-prof empty). With --split, each jsprof run also says its own Python
process's CPU apart from Node's (a wrapper reads both rusages as the CLI returns).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import rotated, run_wall_cpu

ROOT = Path(__file__).resolve().parent.parent
TYPESCRIPT = ROOT / "tests" / "js" / "node_modules" / "typescript"

PROJECT_TS = """\
export interface P { x: number; y: number }
export function add(a: P, b: P): P { return { x: a.x + b.x, y: a.y + b.y }; }
export class Bag<T> { items: T[] = []; push(t: T): this { this.items.push(t); return this; } }
export const n: number = new Bag<P>().push(add({ x: 1, y: 2 }, { x: 3, y: 4 })).items.length;
"""
# ajv's sources type-check cleanly under strict with these few ambient declarations (ajv
# itself compiles against @types/node, which tests/js does not install).
AJV_AMBIENT = """\
declare var module: any;
declare var exports: any;
declare var console: { warn(...a: any[]): void; log(...a: any[]): void; error(...a: any[]): void };
declare module "re2";
declare module "require-from-string";
"""
AJV = ROOT / "tests" / "js" / "node_modules" / "ajv" / "lib"
TSCONFIG = (
    '{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs",'
    ' "noEmit": true, "lib": ["es2020"]}, "files": ["a.ts"]}'
)
AJV_TSCONFIG = (
    '{"compilerOptions": {"strict": true, "target": "es2018", "module": "commonjs",'
    ' "moduleResolution": "node", "noEmit": true, "lib": ["es2018"], "resolveJsonModule": true,'
    ' "skipLibCheck": true, "types": []}, "include": ["ambient.d.ts", %s]}'
)
# tsc as its command line runs it (it ends with process.exit())
TSC = """\
const [project, typescript] = process.argv.slice(2);
process.argv = [process.argv[0], 'tsc', '-p', project];
require(typescript + '/lib/tsc.js');
"""

# --split: the CLI run in-process by a wrapper that appends "python_cpu node_cpu" to a file
SPLIT = """\
import resource, sys
out = sys.argv.pop(1)
from jsprof.cli import main
try:
    code = main(sys.argv[1:])
finally:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "a") as f:
        f.write(f"{s.ru_utime + s.ru_stime} {c.ru_utime + c.ru_stime}\\n")
sys.exit(code)
"""

# --floor: the least a record path without numpy could cost, measured: the CLI as a user
# runs it up to the recording's end (Node started, the output checked, the profile taken in
# slices, Node's exit awaited), every slice then read into columns by the C reader (which
# any path has to do), and nothing after: no trace model, no file, no summary. numpy cannot
# be imported (None in sys.modules): a step that needs it fails the run. The end's other
# imports (the summary's analysis, the output's format) are not made. Internals patched
# here: _Preparing (its imports after the check), _Isolate.track (the conversion).
FLOOR = """\
import resource, sys
out = sys.argv.pop(1)
sys.modules["numpy"] = None
from jsprof import cli
from jsprof.engines.node import isolate
from jsprof.formats import _columns


class Floor(Exception):
    pass


def check_only(self):
    try:
        self._out = self._check()
    except BaseException as e:
        self._error = e
    finally:
        self._checked.set()
        sys.setswitchinterval(self._switch)


def read_only(self, requested, source, light=False):
    for p in self.profile or ():
        if _columns.read_profile(p.raw, p.start) is None:
            raise SystemExit("a slice the C reader leaves to the dict path: no floor")
    raise Floor


cli._Preparing._run = check_only
isolate._Isolate.track = read_only
code = 0
try:
    code = cli.main(sys.argv[1:])
except Floor:
    pass
finally:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "a") as f:
        f.write(f"{s.ru_utime + s.ru_stime} {c.ru_utime + c.ru_stime}\\n")
sys.exit(code)
"""

# As installed by pip, jsprof runs from cached bytecode (no PYTHONDONTWRITEBYTECODE).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    ap.add_argument("--node", default="node")
    ap.add_argument("--before-src", help="a checkout's src/ to compare against (PYTHONPATH)")
    ap.add_argument("--split", action="store_true",
                    help="also say jsprof's Python CPU apart from Node's (a thin wrapper)")
    ap.add_argument("--only", help="comma-separated scripts to run (tsc-ajv,tsc,empty)")
    ap.add_argument("--floor", action="store_true",
                    help="also run the floor of a record path without numpy (see FLOOR)")
    ap.add_argument("--interval", type=float, default=1.0,
                    help="sampling interval in ms of both profilers (default 1: jsprof's and "
                         "--cpu-prof's default)")
    a = ap.parse_args()
    if not (TYPESCRIPT / "lib" / "tsc.js").is_file():
        raise SystemExit("tests/js/node_modules lacks typescript: run `make` (npm ci there)")

    tmp = Path(tempfile.mkdtemp(prefix="bench_node_overhead_"))
    project = tmp / "project"
    project.mkdir()
    (project / "a.ts").write_text(PROJECT_TS)
    (project / "tsconfig.json").write_text(TSCONFIG)
    tsc = tmp / "tsc.js"
    tsc.write_text(TSC)
    empty = tmp / "empty.js"
    empty.write_text("")
    ajv = tmp / "ajv"
    ajv.mkdir()
    (ajv / "ambient.d.ts").write_text(AJV_AMBIENT)
    (ajv / "tsconfig.json").write_text(AJV_TSCONFIG % json.dumps(str(AJV / "**" / "*.ts")))
    scripts = {
        "tsc-ajv": [str(tsc), str(ajv), str(TYPESCRIPT)],
        "tsc": [str(tsc), str(project), str(TYPESCRIPT)],
        "empty": [str(empty)],
    }
    if a.only:
        scripts = {k: v for k, v in scripts.items() if k in a.only.split(",")}
    us = round(a.interval * 1000)
    cpuprof = [a.node, "--cpu-prof", "--cpu-prof-interval", str(us), "--cpu-prof-dir",
               str(tmp / "cpuprof")]
    if a.split:
        (tmp / "split.py").write_text(SPLIT)
    (tmp / "floor.py").write_text(FLOOR)

    def jsprof(who: str, what: str) -> list[str]:
        cli = [sys.executable, "-m", "jsprof.cli"]
        if a.split or who == "floor":
            wrapper = "floor.py" if who == "floor" else "split.py"
            cli = [sys.executable, str(tmp / wrapper), str(tmp / f"split {who} {what}")]
        out = str(tmp / f"{who}-{what}.jsprof.json")
        return [*cli, "record", "--engine", "node", "--interval", f"{a.interval:g}", "-o", out]

    conds: dict[str, tuple[list[str], dict[str, str]]] = {}
    for what, argv in scripts.items():
        conds[f"plain {what}"] = ([a.node, *argv], ENV)
        conds[f"cpu-prof {what}"] = ([*cpuprof, *argv], ENV)
        conds[f"jsprof {what}"] = ([*jsprof("jsprof", what), *argv], ENV)
        if a.floor:
            conds[f"floor {what}"] = ([*jsprof("floor", what), *argv], ENV)
        if a.before_src:
            conds[f"before {what}"] = (
                [*jsprof("before", what), *argv], {**ENV, "PYTHONPATH": a.before_src}
            )
    names = list(conds)
    res: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for n in names:  # warm the file cache, Node's code cache and Python's bytecode cache
        run_wall_cpu(*conds[n])
    for n in names:  # the warm-up's split lines are not counted
        (tmp / f"split {n}").unlink(missing_ok=True)
    try:
        for r in range(a.rounds):
            for n in rotated(names, r):
                res[n].append(run_wall_cpu(*conds[n]))
            shutil.rmtree(tmp / "cpuprof", ignore_errors=True)
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
        splits = {
            n: [tuple(map(float, x.split())) for x in (tmp / f"split {n}").read_text().split("\n")
                if x]
            for n in names if (tmp / f"split {n}").is_file()
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(n: str, i: int) -> float:
        return statistics.median(x[i] for x in res[n])

    def ratio(n: str, base: str, i: int) -> float:
        return statistics.median(x[i] / y[i] for x, y in zip(res[n], res[base], strict=True))

    load = os.getloadavg()[0]
    print(f"{a.rounds} interleaved rounds; node {a.node}; interval {a.interval:g} ms; "
          f"load average {load:.1f}")
    print(f"{'condition':16} {'wall s':>7} {'cpu s':>7} {'cpu/plain':>10} {'wall/plain':>11}"
          f" {'wall/cpu-prof':>14}")
    for n in names:
        what = n.split()[1]
        line = (f"{n:16} {med(n, 0):7.3f} {med(n, 1):7.3f} {ratio(n, f'plain {what}', 1):9.2f}x"
                f" {ratio(n, f'plain {what}', 0):10.2f}x")
        if not n.startswith(("plain", "cpu-prof")):
            line += f" {ratio(n, f'cpu-prof {what}', 0):13.2f}x"
        print(line)
    for n, xs in splits.items():
        print(f"{n:16} Python {statistics.median(x[0] for x in xs):.3f} s CPU, Node "
              f"{statistics.median(x[1] for x in xs):.3f} s (medians)")
    for who in ("jsprof", "before", "floor"):
        for what in ("tsc-ajv", "tsc"):
            if f"{who} {what}" not in res:
                continue
            over = ratio(f"{who} {what}", f"plain {what}", 1)
            cp = ratio(f"cpu-prof {what}", f"plain {what}", 1)
            print(f"{who}: {what} CPU {over:.2f}x plain (goal <= 1.10x), cpu-prof {cp:.2f}x: "
                  f"{(over - cp) * 100:+.0f} points (goal <= +5)")
        if f"{who} empty" in res:
            print(f"{who}: empty wall {ratio(f'{who} empty', 'cpu-prof empty', 0):.2f}x "
                  "cpu-prof (goal <= 2.5x)")

if __name__ == "__main__":
    main()
