"""jsprof's own CPU time recording a Node script that starts a worker thread, against the
same CLI from another checkout (--before-src): since a worker's replies are kept as text
and its pause wrapper is spliced over lists (engines/_v8join.py), such a recording is
written and summarised without numpy, as a single thread's was already.

Measured per run: the CPU time (user+sys) of the jsprof process itself (getrusage of
RUSAGE_SELF at the end of main: Node's time is not in it), and whether numpy was
imported. Rounds interleave the two checkouts, in turn first. Printed: each checkout's
median, and the median of the per-round ratios this / before.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import rotated

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "data" / "nodejs" / "worker.js"
CODE = (
    "import resource, sys\nfrom jsprof.cli import main\nrc = main(sys.argv[1:])\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(u.ru_utime + u.ru_stime, 'numpy' in sys.modules)\n"
)


def run(src: str, out: str) -> tuple[float, bool]:
    r = subprocess.run(
        [sys.executable, "-c", CODE, "record", "--engine", "node", "-o", out, str(WORKER)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src}, check=True,
    )
    cpu, numpy = r.stdout.split()[-2:]
    return float(cpu), numpy == "True"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-src", required=True, help="another checkout's src/")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    srcs = {"this": str(ROOT / "src"), "before": a.before_src}
    got: dict[str, list[tuple[float, bool]]] = {k: [] for k in srcs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for name in rotated(list(srcs), r):
                got[name].append(run(srcs[name], f"{tmp}/{name}.jsprof.json"))
    for name, runs in got.items():
        cpu = [c for c, _ in runs]
        print(f"{name:7s} median {statistics.median(cpu) * 1000:.0f} ms CPU "
              f"(min {min(cpu) * 1000:.0f}, max {max(cpu) * 1000:.0f}); "
              f"numpy imported in {sum(n for _, n in runs)} of {len(runs)} runs")
    ratios = [t[0] / b[0] for t, b in zip(got["this"], got["before"], strict=True)]
    print(f"this / before, median of {len(ratios)} rounds: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
