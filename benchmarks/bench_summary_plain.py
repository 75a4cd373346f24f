"""Is `render/summary.py`'s `_Plain` (our copy of what rich prints to a pipe, used for
`jsprof record`'s summary when stderr is not a terminal) needed, or would rich itself do?
Issue 37: "measure before keeping what a library does".

    .venv/bin/python benchmarks/bench_summary_plain.py [--rounds 11]

Two conditions, interleaved in each round (order rotated), each a fresh process with
stderr to a pipe, as in a CI log:
  plain   jsprof as it is: the summary without rich's console
  rich    the same with `summary.rich_console_needed` returning True: rich's console
          prints the summary (and `record` imports rich.console while the script runs)
Both run `python -c` with the same wrapper around `jsprof.cli.main`, so they pay the same.
Measured: `jsprof record -o OUT tiny.js` (QuickJS, and Node with --node), wall and CPU
(the child's user+sys), as the median of per-round ratios rich / plain. First the
outputs: each condition's summary of every real fixture in /work/shared/fixtures must be
the same bytes.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import median_ratio, rotated

FIXTURES = Path("/work/shared/fixtures")
WRAP = (
    "import sys\n"
    "if sys.argv[1] == 'rich':\n"
    "    from jsprof.render import summary\n"
    "    summary.rich_console_needed = lambda: True\n"
    "from jsprof.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)
SUMMARY = (
    "import sys\n"
    "from jsprof.render import summary\n"
    "if sys.argv[1] == 'rich':\n"
    "    summary.rich_console_needed = lambda: True\n"
    "import jsprof\n"
    "summary.print_recording_summary(jsprof.load(sys.argv[2]), sys.argv[2])\n"
)
ENV = {k: v for k, v in os.environ.items()
       if k not in ("PYTHONDONTWRITEBYTECODE", "FORCE_COLOR", "TTY_COMPATIBLE",
                    "TTY_INTERACTIVE", "COLUMNS")}


def run(argv: list[str]) -> tuple[float, float, bytes]:
    """Wall seconds, the child's CPU seconds, its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV,
                       check=False, timeout=300)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{argv}: exit {p.returncode}\n{p.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu, p.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--node", action="store_true", help="also `record --engine node`")
    a = ap.parse_args()
    py = sys.executable

    print("== the summary's bytes, plain against rich, on the real fixtures")
    for p in sorted(FIXTURES.glob("*/*")):
        if p.suffix not in (".json", ".cpuprofile") or p.name.endswith(".meta.json"):
            continue
        got = {c: run([py, "-c", SUMMARY, c, str(p)])[2] for c in ("plain", "rich")}
        same = got["plain"] == got["rich"]
        print(f"  {p.parent.name}/{p.name}: {'same' if same else 'DIFFERENT'} "
              f"({len(got['plain'])} bytes)")
        if not same:
            raise SystemExit(f"plain:\n{got['plain'].decode()}\nrich:\n{got['rich'].decode()}")

    with tempfile.TemporaryDirectory() as d:
        script = Path(d, "tiny.js")
        script.write_text("function f(n) { return n < 2 ? n : f(n - 1) + f(n - 2) }\nf(22);\n")
        engines = ["quickjs", *(["node"] if a.node else [])]
        for engine in engines:
            def argv(cond: str, engine: str = engine) -> list[str]:
                return [py, "-c", WRAP, cond, "record", "--engine", engine, "-o",
                        str(Path(d, f"{cond}.json")), str(script)]

            for cond in ("plain", "rich"):  # warm the page cache and the bytecode
                run(argv(cond))
            walls: dict[str, list[float]] = {"plain": [], "rich": []}
            cpus: dict[str, list[float]] = {"plain": [], "rich": []}
            for r in range(a.rounds):
                for cond in rotated(["plain", "rich"], r):
                    w, c, _ = run(argv(cond))
                    walls[cond].append(w)
                    cpus[cond].append(c)
            print(f"== jsprof record --engine {engine} (stderr piped), {a.rounds} rounds")
            for cond in ("plain", "rich"):
                print(f"  {cond}: wall {statistics.median(walls[cond]) * 1000:.0f} ms, "
                      f"CPU {statistics.median(cpus[cond]) * 1000:.0f} ms")
            print(f"  rich / plain: wall {median_ratio(walls['rich'], walls['plain']):.3f}x, "
                  f"CPU {median_ratio(cpus['rich'], cpus['plain']):.3f}x; median difference "
                  f"CPU {statistics.median(r - p for r, p in zip(cpus['rich'], cpus['plain'], strict=True)) * 1000:+.0f} ms")  # noqa: E501


if __name__ == "__main__":
    main()
