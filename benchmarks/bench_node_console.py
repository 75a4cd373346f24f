"""What a script's console output costs under `jsprof record --engine node`.

A logging loop (20,000 console.log calls, output to /dev/null) times itself with
performance.now() and prints its loop time on stderr. Conditions, interleaved per round
(order rotated, so neighbours' noise falls on every condition alike):
  plain            node logs.js
  jsprof           jsprof record --engine node -o OUT logs.js
  jsprof+Runtime   the same with Runtime.enable sent after the profiler starts (what
                   jsprof did once: every console call became a protocol message)
Printed: the median loop time per condition and the median per-round ratio to plain.
The test suite checks the cause directly (tests/test_node.py::
test_console_output_is_not_a_protocol_message: no Runtime.enable, few messages read);
this measures the effect, which a loaded machine blurs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import median_ratio, rotated

LOGS = r"""const t = performance.now();
for (let i = 0; i < LINES; i++) console.log('line', i, { a: i });
console.error('loop ms', (performance.now() - t).toFixed(1));
"""

# The CLI, optionally with Runtime.enable sent once the profiler runs (argv[1]: "1" or "0").
JSPROF = (
    "import sys\n"
    "if sys.argv.pop(1) == '1':\n"
    "    from jsprof.engines.node import isolate\n"
    "    start = isolate._Isolate.start\n"
    "    def enabled(self, us, reoptimize=False):\n"
    "        start(self, us, reoptimize)\n"
    "        self.session.send('Runtime.enable')\n"
    "    isolate._Isolate.start = enabled\n"
    "from jsprof.cli import main; sys.exit(main(sys.argv[1:]))"
)


def loop_ms(cmd: list[str]) -> float:
    """The script's own loop time (its `loop ms` line on stderr, before jsprof's summary);
    exits when the command fails."""
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return float(next(x for x in p.stderr.splitlines() if x.startswith("loop ms")).split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--lines", type=int, default=20000, help="console.log calls (default 20000)")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_node_console_"))
    script = tmp / "logs.js"
    script.write_text(LOGS.replace("LINES", str(a.lines)))
    record = ["record", "--engine", "node", "-o", str(tmp / "out.json")]
    conds = {
        "plain": ["node", str(script)],
        "jsprof": [sys.executable, "-c", JSPROF, "0", *record, str(script)],
        "jsprof+Runtime": [sys.executable, "-c", JSPROF, "1", *record, str(script)],
    }
    res: dict[str, list[float]] = {n: [] for n in conds}
    for cmd in conds.values():  # warm the caches (files, Node's code, Python's bytecode)
        loop_ms(cmd)
    for r in range(a.rounds):
        for n in rotated(list(conds), r):
            res[n].append(loop_ms(conds[n]))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"{a.rounds} interleaved rounds; {a.lines} console.log calls")
    print(f"{'condition':16} {'loop ms':>8} {'x plain':>8}")
    for n in conds:
        ratio = median_ratio(res[n], res["plain"])
        print(f"{n:16} {statistics.median(res[n]):8.1f} {ratio:8.2f}")


if __name__ == "__main__":
    main()
