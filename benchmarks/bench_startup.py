"""Start-up cost of the `jsprof` command against `python -c pass` (issue 16).

Conditions, interleaved in each round (order rotated per round, so a neighbour's noise
falls on every condition alike), each a fresh process:
  python -c pass           the baseline: the interpreter's own start-up
  jsprof --help            the console script pip installed, as a user runs it
  jsprof --version
  jsprof report --help
Printed: the median wall time per condition, the median of the per-round ratios to the
baseline (goal: `jsprof --help` <= 5x), and `python -X importtime` totals: the cumulative
time of `jsprof.cli` and of the top-level modules it pulled in (one run; importtime's own
overhead inflates them, compare them with each other). Bytecode caching is on in the
children, as after a pip install, even when PYTHONDONTWRITEBYTECODE is set here.

    .venv/bin/python benchmarks/bench_startup.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
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
# As installed by pip, modules run from cached bytecode; a PYTHONDONTWRITEBYTECODE in the
# environment would make every run compile jsprof's sources again and measure that instead.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=ENV
    )
    return time.perf_counter() - t0


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
    a = ap.parse_args()
    names = list(CONDITIONS)
    times: dict[str, list[float]] = {n: [] for n in names}
    for n in names:  # warm the page cache and write the .pyc files first
        wall(CONDITIONS[n])
    for r in range(a.rounds):
        for n in rotated(names, r):
            times[n].append(wall(CONDITIONS[n]))
    print(f"{a.rounds} rounds, medians; ratio = median of per-round ratios to {BASE!r}")
    print(f"{'condition':24} {'wall ms':>9} {'ratio':>7}")
    for n in names:
        print(
            f"{n:24} {statistics.median(times[n]) * 1000:9.1f} "
            f"{median_ratio(times[n], times[BASE]):7.2f}"
        )
    cli_ms, top = importtime(["--help"])
    print(f"\npython -X importtime jsprof --help: jsprof.cli cumulative {cli_ms:.1f} ms")
    for name, ms in top[:8]:
        print(f"  {name:30} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
