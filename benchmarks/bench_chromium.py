"""Overhead of `jsprof record --engine chromium` against the same page unprofiled and
against plain DevTools-style CDP profiling (Profiler.start/stop, nothing else).

Conditions, interleaved in each round (order rotated per round) in one shared headless
Chromium, each in a fresh tab of its own browser context:
  unprofiled     the page opened by jsprof's page machinery with no profiler
                 (`run_chromium(..., allow_profiling=False)`)
  cdp I          Profiler.setSamplingInterval(I) + start before navigation, stop after;
                 the profile is fetched and dropped (what DevTools does, no jsprof work)
  jsprof I       `record_chromium(page, I)`: slices, helper, conversion to a Recording
for I in 1 ms and 0.1 ms. Measured per run: the workload's own wall time, taken by the
page with performance.now() around a fixed amount of work (so a slower run shows as more
time), and CPU time (user+sys) of the browser's processes plus jsprof's own process from
navigation to the end of the run (including fetching and converting the profile).

Printed: median workload wall and run CPU per condition, and the medians of per-round
ratios (each condition / unprofiled, jsprof / cdp at the same interval).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import CLOCK_TICK, WORKLOAD_FUNCTIONS, median_ratio, proc_stat, rotated
from jsprof.engines.chromium import Browser, record_chromium, run_chromium
from jsprof.engines.chromium.serve import serve_target

WORKLOAD = WORKLOAD_FUNCTIONS + r"""const t0 = performance.now();
let r = 0;
for (let k = 0; k < ROUNDS; k++) { r += fib(24) + strings(2e4) + objects(2e4) + json(1e4); }
console.log('elapsed', (performance.now() - t0).toFixed(3), r);
window.close();
"""


def group_cpu(pgid: int) -> float:
    """User+sys seconds of a process group (the browser's): its live processes plus the
    children they reaped (a closed tab's renderer is reaped by Chromium's zygote, so its
    time moves into the zygote's cutime/cstime instead of vanishing)."""
    total = 0
    for d in os.listdir("/proc"):
        fields = proc_stat(d) if d.isdigit() else None
        if fields is not None and int(fields[2]) == pgid:
            total += sum(int(x) for x in fields[11:15])
    return total / CLOCK_TICK


def elapsed_of(out: str) -> float:
    for line in out.splitlines():
        if line.startswith("elapsed "):
            return float(line.split()[1])
    raise RuntimeError(f"the page printed no elapsed line: {out!r}")


def cdp_plain(browser: Browser, page: str, interval_ms: float) -> str:
    """DevTools-style: start before navigation, stop at the end, drop the profile."""
    server, url = serve_target(page)
    try:
        s, tid = browser.new_page()
        s.send("Runtime.enable")
        s.send("Profiler.enable")
        s.send("Profiler.setSamplingInterval", {"interval": round(interval_ms * 1000)})
        s.send("Profiler.start")
        s.send("Page.navigate", {"url": url})
        out = ""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            e = s.next_event("Runtime.consoleAPICalled", timeout=1.0)
            if e is None:
                continue
            args = e["params"].get("args", [])
            if args and args[0].get("value") == "elapsed":
                out = "elapsed " + str(args[1].get("value"))
                break
        s.send("Profiler.stop", timeout=300)
        browser.close_page(tid)
        return out
    finally:
        server.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--work", type=int, default=40, help="workload repetitions (~1-2 s)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        page = str(Path(tmp) / "workload.js")
        Path(page).write_text(WORKLOAD.replace("ROUNDS", str(a.work)))
        conds = ["unprofiled", "cdp 1", "jsprof 1", "cdp 0.1", "jsprof 0.1"]
        wall: dict[str, list[float]] = {c: [] for c in conds}
        cpu: dict[str, list[float]] = {c: [] for c in conds}
        with Browser() as browser:
            pgid = browser.proc.pid
            run_chromium(page, allow_profiling=False, browser=browser, stdout=io.StringIO())
            for r in range(a.rounds):
                for c in rotated(conds, r):
                    c0 = group_cpu(pgid) + time.process_time()
                    if c == "unprofiled":
                        buf = io.StringIO()
                        run_chromium(page, allow_profiling=False, browser=browser, stdout=buf)
                        out = buf.getvalue()
                    elif c.startswith("cdp"):
                        out = cdp_plain(browser, page, float(c.split()[1]))
                    else:
                        buf = io.StringIO()
                        record_chromium(page, float(c.split()[1]), browser=browser, stdout=buf)
                        out = buf.getvalue()
                    cpu[c].append(group_cpu(pgid) + time.process_time() - c0)
                    wall[c].append(elapsed_of(out))
                print(
                    f"round {r + 1}: " + ", ".join(f"{c} {wall[c][-1]:.0f} ms" for c in conds),
                    file=sys.stderr,
                )
    med = statistics.median
    print(
        f"{'condition':<12} {'workload wall ms':>17} {'run CPU s':>10} {'wall/unprof':>12} "
        f"{'CPU/unprof':>11} {'wall/cdp':>9} {'CPU/cdp':>8}"
    )
    for c in conds:
        rw = median_ratio(wall[c], wall["unprofiled"])
        rc = median_ratio(cpu[c], cpu["unprofiled"])
        vs = ""
        if c.startswith("jsprof"):
            base = "cdp " + c.split()[1]
            vw = median_ratio(wall[c], wall[base])
            vc = median_ratio(cpu[c], cpu[base])
            vs = f"{vw:9.3f} {vc:8.3f}"
        print(f"{c:<12} {med(wall[c]):17.1f} {med(cpu[c]):10.2f} {rw:12.3f} {rc:11.3f} {vs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
