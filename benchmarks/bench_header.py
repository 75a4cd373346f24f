"""What `Document-Policy: js-profiling` costs a page that does not profile, in headless
Chromium: why jsprof.field sends it to sampled sessions only.

    .venv/bin/python benchmarks/bench_header.py [--rounds 40] [--seconds 90]
        [--functions 1500] [--elements 1000]

One page (an external script of --functions generated functions, all compiled and run at
load, and --elements elements to lay out and paint) is served on loopback at two URLs that
differ only in the header. Each round loads it once per URL, in rotated order, each load in
a fresh browser context (empty HTTP and code caches), and reads the page's own navigation
timing: loadEventEnd, first-contentful-paint, and the script's run (a mark before and after
it). No page makes a Profiler: this is the cost of the header alone. Printed per figure:
the medians, the median of per-round ratios with/without and its 95 % bootstrap interval
(rounds resampled): an interval above 1 is a cost the noise does not explain. Bounded:
stops after --rounds rounds or --seconds seconds, whichever comes first.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

from _common import median_ratio, rotated

# Chromium is started as the tests start it (tests/browser_util.py: one way for both).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from browser_util import (  # noqa: E402
    HTML,
    Response,
    chromium_path,
    page_server,
    playwright_chromium,
)
from jsprof.errors import EngineError  # noqa: E402

FIGURES = ("loadEventEnd", "fcp", "script")


def _script(functions: int) -> bytes:
    # Distinct functions, so V8 compiles each (no shared code), each called once at load as
    # a site's bundle runs its modules' top levels.
    parts = []
    for i in range(functions):
        parts.append(
            f"function f{i}(a) {{ let s = {i}; for (let k = 0; k < 20; k++) "
            f"{{ s = (s * 31 + k + a.length) % 1000003; }} "
            f"const o = {{id: {i}, name: 'n{i}', v: s}}; return JSON.stringify(o).length + s; }}"
        )
    calls = "let total = 0;\n" + "".join(f"total += f{i}('x{i}');\n" for i in range(functions))
    return (
        "performance.mark('script-start');\n"
        + "\n".join(parts)
        + "\n"
        + calls
        + "window.total = total;\nperformance.mark('script-end');\n"
    ).encode()


def _page(elements: int) -> bytes:
    rows = "".join(f"<li class='r{i % 7}'>item {i} <b>{i * 7}</b></li>" for i in range(elements))
    return (
        "<!doctype html><meta charset='utf-8'><title>header cost</title>"
        "<style>li{font:14px sans-serif;padding:2px}.r3{color:#a33}</style>"
        f"<h1>Page</h1><ul>{rows}</ul><script src='/app.js'></script>"
    ).encode()


_READ = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const fcp = performance.getEntriesByName("first-contentful-paint")[0];
  const s = performance.getEntriesByName("script-start")[0];
  const e = performance.getEntriesByName("script-end")[0];
  return {loadEventEnd: nav.loadEventEnd, fcp: fcp ? fcp.startTime : null,
          script: s && e ? e.startTime - s.startTime : null, total: window.total};
}"""

_PROBE = """() => { try { new Profiler({sampleInterval: 10, maxBufferSize: 10}); return "ok"; }
                   catch (e) { return e.name; } }"""


def _load(browser: object, url: str) -> dict[str, float | None]:
    context = browser.new_context()  # type: ignore[attr-defined]
    try:
        page = context.new_page()
        page.goto(url, wait_until="load")
        page.wait_for_function(
            "performance.getEntriesByType('navigation')[0].loadEventEnd > 0", timeout=30000
        )
        # FCP is reported after the paint; give it a moment if it is not in yet.
        page.wait_for_function(
            "performance.getEntriesByName('first-contentful-paint').length > 0", timeout=5000
        )
        return page.evaluate(_READ)
    finally:
        context.close()


def _probe(browser: object, url: str) -> str:
    context = browser.new_context()  # type: ignore[attr-defined]
    try:
        page = context.new_page()
        page.goto(url)
        return page.evaluate(_PROBE)
    finally:
        context.close()


def _median_ci(ratios: list[float], draws: int = 2000) -> tuple[float, float]:
    """A 95 % bootstrap interval of the median of per-round ratios (rounds resampled)."""
    rng = random.Random(23)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return meds[int(0.025 * draws)], meds[int(0.975 * draws) - 1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=90.0, help="stop after this long")
    ap.add_argument("--functions", type=int, default=1500)
    ap.add_argument("--elements", type=int, default=1000)
    args = ap.parse_args(argv)
    try:
        chromium_path()
    except EngineError as e:
        print(f"bench_header: {e}", file=sys.stderr)
        return 2

    page, script = _page(args.elements), _script(args.functions)

    def respond(path: str) -> Response:
        if path.startswith("/app.js"):
            return script, "text/javascript", {}
        return page, HTML, {"Document-Policy": "js-profiling"} if path == "/with" else {}

    results: dict[str, list[dict[str, float | None]]] = {"without": [], "with": []}
    t0 = time.monotonic()
    with page_server(respond) as base, playwright_chromium() as browser:
        urls = {"without": f"{base}/without", "with": f"{base}/with"}
        # The header does what it says: only its page may make a Profiler.
        probes = {name: _probe(browser, url) for name, url in urls.items()}
        assert probes == {"without": "NotAllowedError", "with": "ok"}, probes
        for name in urls:  # warm-up: the browser's own first-load costs, not counted
            _load(browser, urls[name])
        rounds = 0
        while rounds < args.rounds and time.monotonic() - t0 < args.seconds:
            for name in rotated(list(urls), rounds):
                results[name].append(_load(browser, urls[name]))
            rounds += 1
        version = browser.version
    print(
        f"Chromium {version}; page: {len(page) // 1024} KB HTML ({args.elements} "
        f"elements), {len(script) // 1024} KB script ({args.functions} functions run "
        f"at load); {rounds} interleaved rounds, fresh context per load, "
        f"{time.monotonic() - t0:.0f} s"
    )
    print(f"{'figure':<14}{'without ms':>12}{'with ms':>10}{'ratio':>8}   95 % interval")
    for fig in FIGURES:
        pairs = [
            (w[fig], wo[fig])
            for w, wo in zip(results["with"], results["without"], strict=True)
            if w[fig] and wo[fig]
        ]
        if len(pairs) < 2:
            print(f"{fig:<14}{'(not reported)':>30}")
            continue
        with_ms = [a for a, _ in pairs]
        without_ms = [b for _, b in pairs]
        ratios = [a / b for a, b in pairs]
        lo, hi = _median_ci(ratios)
        print(
            f"{fig:<14}{statistics.median(without_ms):>12.1f}{statistics.median(with_ms):>10.1f}"
            f"{median_ratio(with_ms, without_ms):>8.3f}   {lo:.3f}-{hi:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
