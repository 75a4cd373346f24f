"""Start-up cost of the `jsprof` command: `--help` against `python -c pass` (issue 16), and
`record --engine node` of an empty script against `node --cpu-prof` of it (issues 16, 25).

Conditions, interleaved in each round (order rotated per round, so a neighbour's noise
falls on every condition alike), each a fresh process:
  python -c pass           the baseline of the --help lines: the interpreter's own start-up
  jsprof --help            the console script pip installed, as a user runs it
  jsprof --version
  jsprof report --help
  node --cpu-prof empty    the baseline of the record line: Node profiling an empty script
  jsprof record node empty `jsprof record --engine node -o OUT empty.js`
With --before-src DIR (a checkout's src/ with its built .so files), each jsprof condition
runs a second time as `before ...` with PYTHONPATH=DIR: the same installed dependencies,
the other checkout's jsprof.
Printed: the median wall time per condition and the median of the per-round ratios to its
baseline (goals: `jsprof --help` <= 5x, record <= 3x, aimed at 2.5x), and `python -X
importtime` totals: the cumulative time of `jsprof.cli` and of the top-level modules it
pulled in (one run; importtime's own overhead inflates them, compare them with each other).
Bytecode caching is on in the children, as after a pip install, even when
PYTHONDONTWRITEBYTECODE is set here.

    .venv/bin/python benchmarks/bench_startup.py [--rounds 21] [--before-src DIR] [--no-node]
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

from _common import median_ratio, rotated

PY = sys.executable
JSPROF = str(Path(sys.executable).parent / "jsprof")

CONDITIONS: dict[str, list[str]] = {
    "python -c pass": [PY, "-c", "pass"],
    "jsprof --help": [PY, JSPROF, "--help"],
    "jsprof --version": [PY, JSPROF, "--version"],
    "jsprof report --help": [PY, JSPROF, "report", "--help"],
}
BASE = "python -c pass"
NODE_BASE = "node --cpu-prof empty"
# As installed by pip, modules run from cached bytecode; a PYTHONDONTWRITEBYTECODE in the
# environment would make every run compile jsprof's sources again and measure that instead.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str], env: dict[str, str] = ENV) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=env
    )
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()[-800:]}")
    return took


def importtime(args: list[str]) -> tuple[float, list[tuple[str, float]]]:
    """(cumulative ms of jsprof.cli, [(top-level module, cumulative ms)] largest first)."""
    p = subprocess.run(
        [PY, "-X", "importtime", JSPROF, *args], capture_output=True,
        text=True,
        check=True,
        env=ENV,
    )
    top: list[tuple[str, float]] = []
    cli_ms = 0.0
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum, name = line[len("import time:") :].split("|")
        ms = int(cum) / 1000
        if not name.startswith("  "):  # depth 0: imported directly by the script
            top.append((name.strip(), ms))
        if name.strip() == "jsprof.cli":
            cli_ms = ms
    return cli_ms, sorted(top, key=lambda t: -t[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--before-src", help="a checkout's src/ to compare against (PYTHONPATH)")
    ap.add_argument("--no-node", action="store_true", help="leave out the record conditions")
    ap.add_argument("--node", default="node")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_startup_"))
    empty = tmp / "empty.js"
    empty.write_text("")
    conds = dict(CONDITIONS)
    if not a.no_node:
        conds[NODE_BASE] = [a.node, "--cpu-prof", "--cpu-prof-dir", str(tmp / "cpuprof"),
                            str(empty)]
        conds["jsprof record node empty"] = [
            PY, JSPROF, "record", "--engine", "node", "-o", str(tmp / "out.jsprof.json"),
            str(empty),
        ]
    envs = {n: ENV for n in conds}
    if a.before_src:
        for n, cmd in list(conds.items()):
            if n.startswith("jsprof "):
                before = "before " + n[len("jsprof "):]
                conds[before] = cmd
                envs[before] = {**ENV, "PYTHONPATH": a.before_src}
    names = list(conds)
    times: dict[str, list[float]] = {n: [] for n in names}
    for n in names:  # warm the page cache and write the .pyc files first
        wall(conds[n], envs[n])
    for r in range(a.rounds):
        for n in rotated(names, r):
            times[n].append(wall(conds[n], envs[n]))
    print(f"{a.rounds} rounds, medians; ratio = median of per-round ratios to the baseline "
          f"({BASE!r}; {NODE_BASE!r} for the record lines)")
    print(f"{'condition':28} {'wall ms':>9} {'ratio':>7}")
    for n in names:
        base = NODE_BASE if ("node" in n and NODE_BASE in times) else BASE
        print(
            f"{n:28} {statistics.median(times[n]) * 1000:9.1f} "
            f"{median_ratio(times[n], times[base]):7.2f}"
        )
    cli_ms, top = importtime(["--help"])
    print(f"\npython -X importtime jsprof --help: jsprof.cli cumulative {cli_ms:.1f} ms")
    for name, ms in top[:8]:
        print(f"  {name:30} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
