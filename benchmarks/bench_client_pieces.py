"""What profiling in pieces costs a page (issue 33): the browser client restarts its
Profiler after 0.25, 0.5, 1, 2, 4 s and then every 5 s, and after each piece joins the chunk
so far, gzips it and writes it to localStorage, so that a page that goes away has it ready.

    .venv/bin/python benchmarks/bench_client_pieces.py [--rounds 4] [--seconds 8]

One page (served on loopback with `Document-Policy: js-profiling` in every condition) runs
the shared JavaScript workload in small tasks for --seconds and counts the tasks done, under
three conditions, each load in a fresh browser context, rotated per round:
  none    the client is not started (the header's cost alone: the baseline)
  chunk   the client with one Profiler per 60 s chunk (firstPieceMs = pieceMs = chunkMs:
          nothing prepared before the chunk ends; the cost before this change)
  pieces  the client as shipped
Printed: tasks done per condition (medians), the median of per-round ratios to `none` and
pieces/chunk, and the client's own count of main-thread ms spent keeping chunks ready
(`stats.prepareMs`). The first seconds hold the most restarts (five in 7.75 s), so a short run
is the worst case per second. Uploads go to a real `jsprof serve` on loopback.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _common import WORKLOAD_FUNCTIONS, median_ratio, rotated

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from browser_util import HTML, Response, page_server, playwright_chromium  # noqa: E402
from serve_util import Collector  # noqa: E402

PAGE = """<!doctype html>
<meta charset="utf-8"><title>pieces</title>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
%(workload)s
const mode = new URLSearchParams(location.search).get("mode");
const opts = {endpoint: "%(collector)s", app: "shop", key: "k1", sampleRate: 1};
if (mode === "chunk") Object.assign(opts, {firstPieceMs: 60000, pieceMs: 60000, chunkMs: 60000});
window.profiling = mode === "none" ? null : startProfiling(opts);
const tick = () => new Promise((r) => { const c = new MessageChannel(); c.port1.onmessage = r;
                                        c.port2.postMessage(0); });
window.run = async (ms) => {
  const end = performance.now() + ms;
  let tasks = 0;
  while (performance.now() < end) {
    fib(16); strings(2000); objects(300); json(200);
    tasks++;
    await tick();  // a task boundary: the client's timers run between tasks, as in a page
  }
  return {tasks, stats: window.profiling ? window.profiling.stats : null};
};
window.ready = true;
</script>
"""
MODES = ("none", "chunk", "pieces")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    store = Path(tempfile.mkdtemp(prefix="bench-pieces-")) / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", "shop=*")
    page_text = PAGE % {"collector": col.url, "workload": WORKLOAD_FUNCTIONS}

    def respond(path: str) -> Response:
        return page_text.encode(), HTML, {"Document-Policy": "js-profiling"}

    got: dict[str, list[float]] = {m: [] for m in MODES}
    prep: list[float] = []
    try:
        with page_server(respond) as origin, playwright_chromium() as b:
            for r in range(args.rounds):
                for mode in rotated(MODES, r):
                    ctx = b.new_context()
                    page = ctx.new_page()
                    page.goto(f"{origin}/?mode={mode}")
                    page.wait_for_function("window.ready === true", timeout=60000)
                    res = page.evaluate(f"run({args.seconds * 1000})")
                    got[mode].append(res["tasks"])
                    if mode == "pieces":
                        prep.append(res["stats"]["prepareMs"])
                    ctx.close()
                print(f"round {r + 1}: " + ", ".join(f"{m} {got[m][-1]}" for m in MODES),
                      flush=True)
    finally:
        col.stop()
    print(f"tasks in {args.seconds:g} s (median of {args.rounds} rounds): "
          + ", ".join(f"{m} {statistics.median(got[m]):.0f}" for m in MODES))
    for m in ("chunk", "pieces"):
        print(f"{m}/none: {median_ratio(got[m], got['none']):.3f}")
    print(f"pieces/chunk: {median_ratio(got['pieces'], got['chunk']):.3f} (per round: "
          + " ".join(f"{p / c:.2f}" for p, c in zip(got["pieces"], got["chunk"], strict=True))
          + ")")
    med = statistics.median(prep)
    print(f"pieces: the client's prepareMs (joining, JSON, localStorage; gzip not counted) "
          f"{med:.1f} ms in {args.seconds:g} s ({100 * med / (args.seconds * 1000):.2f} %)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
