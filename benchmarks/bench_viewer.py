"""The offline viewer (`jsprof flame` HTML) on a big synthetic profile, in headless Chromium.

    .venv/bin/python benchmarks/bench_viewer.py [--samples 1200000] [--stacks 200000]
        [--repeat 3] [--before OLD/render/flame]

Prints, for one synthetic recording (bench_trace's generator: deep varied stacks):

- write: seconds to build the call tree and write the page (`render_flame` with the
  Recording, all views), and the file's size;
- open: ms from navigation start to the first view drawn (the page's `jsprof-drawn`
  performance mark), best of --repeat (goal <= 1000);
- search: ms from a keystroke (an `input` event) to the status line answering, debounce
  included, per character of an 11-character query typed one at a time (goal <= 100 each);
- share: the search's share of all time against `report --focus` (the exact share of
  samples whose stack has a matching function);
- sandwich and time: ms to switch to each view and draw it;
- range: ms from a `#range=` link to every view counting it (the first inflates the
  page's samples), and the search's status under it.

`--before` takes another version's `render/flame` package (or, before issue 37 split it,
its `render/flame.py`), its `flame.js` in render/ (e.g. from
`git archive REV src | tar -x -C /tmp/before`): its page is opened and searched in the same
run, interleaved, and the figures are given as ratios to it too (the machine is shared:
absolute times move with its load, ratios much less).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from bench_trace import synthetic
from jsprof.analysis.calltree import build_call_tree
from jsprof.analysis.filters import apply as apply_filters
from jsprof.render.flame import layout, render_flame

# Chromium is started as the tests start it (tests/browser_util.py: one way for both).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from browser_util import playwright_chromium  # noqa: E402

# Types one character, then polls the status line until it names the query typed so far.
_TYPE = """async (q) => {
  const input = document.getElementById("fg-search");
  const status = document.getElementById("fg-status");
  const t0 = performance.now();
  input.value = q;
  input.dispatchEvent(new Event("input"));
  while (status.textContent.indexOf("\\u201c" + q + "\\u201d") < 0) {
    await new Promise(r => setTimeout(r, 2));
    if (performance.now() - t0 > 20000) return -1;
  }
  return performance.now() - t0;
}"""

# The page's own measure of its last search's work (the canvas page marks it; 0 before).
_WORK = """() => { const m = performance.getEntriesByName("jsprof-search");
  return m.length ? m[m.length - 1].duration : 0; }"""

_VIEW = """async (v) => {
  const t0 = performance.now();
  location.hash = "view=" + v;
  while (document.body.dataset.view !== v) await new Promise(r => setTimeout(r, 1));
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  return performance.now() - t0;
}"""


# Sets a range by the link and waits until every view counts it (the page marks <body>).
_RANGE = """async (r) => {
  const t0 = performance.now();
  location.hash = "view=flame&range=" + r;
  while (document.body.dataset.range !== r) {
    await new Promise(res => setTimeout(res, 2));
    if (performance.now() - t0 > 60000) return -1;
  }
  await new Promise(res => requestAnimationFrame(() => setTimeout(res, 0)));
  return performance.now() - t0;
}"""


def _before_module(path: str) -> object:
    """Another version's render/flame package (a folder) or flame.py, imported in this
    package (its relative imports resolve here; it reads the flame.js in its render/)."""
    import importlib.util

    name = "jsprof.render._flame_before"
    if os.path.isdir(path):
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(path, "__init__.py"), submodule_search_locations=[path])
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = mod  # type: ignore[union-attr]  # dataclasses look it up
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _open_ms(browser: object, url: str) -> float:
    page = browser.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page.goto(url, wait_until="commit", timeout=300_000)
    # (the canvas page marks <body>; the SVG page before it marked its <svg>)
    while not page.evaluate("!!(document.body && document.body.dataset.ready) || "
                            "!!(document.getElementById('fg-svg') || {getAttribute() {}})"
                            ".getAttribute('data-ready')"):
        time.sleep(0.01)
    # The old page has no mark: the script's end is when it marked the graph ready.
    ms = page.evaluate(
        "(performance.getEntriesByName('jsprof-drawn')[0] || {}).startTime || "
        "performance.now()")
    # And the first paint with the graph in it, and the whole file read (the views' data
    # follows the script).
    while page.evaluate("document.readyState") == "loading":
        time.sleep(0.01)
    paint = page.evaluate(
        "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || 0")
    loaded = page.evaluate(
        "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")
    page.close()
    _open_ms.extra.append((paint, loaded))  # type: ignore[attr-defined]
    return ms


_open_ms.extra = []  # type: ignore[attr-defined]


def _loaded(page: object) -> None:
    """Until the whole file is read (the views' data follows the page script) and the page
    is idle: keystrokes are timed on a page that has finished opening."""
    while page.evaluate("document.readyState") != "complete":  # type: ignore[attr-defined]
        time.sleep(0.01)
    page.evaluate("new Promise(r => setTimeout(() => requestAnimationFrame(() => r()), 50))")  # type: ignore[attr-defined]


def _keystrokes(browser: object, url: str, q: str) -> list[float]:
    page = browser.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page.goto(url, wait_until="commit", timeout=300_000)
    _loaded(page)
    out = [page.evaluate(_TYPE, q[: k + 1]) for k in range(len(q))]
    page.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1_200_000)
    ap.add_argument("--stacks", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--query", default="fn1234")
    ap.add_argument("--before", metavar="FLAME",
                    help="another version's render/flame folder (or render/flame.py)")
    a = ap.parse_args()

    rec = synthetic(a.samples, a.stacks)
    t0 = time.perf_counter()
    tree = build_call_tree(rec)
    page_html = render_flame(tree, "html", title="synthetic", rec=rec)
    write_s = time.perf_counter() - t0
    # The exact share: samples whose stack passes through a function matching the query.
    focused = apply_filters(rec, "synthetic", None, [f"*{a.query}*"], [], False, None)
    exact = 100 * build_call_tree(focused).total_time / tree.total_time
    before_html = None
    if a.before:
        import inspect

        before = _before_module(a.before).render_flame  # type: ignore[attr-defined]
        # The same views when the old page had them (a Recording gives the time view).
        kw = {"rec": rec} if "rec" in inspect.signature(before).parameters else {}
        before_html = before(tree, "html", title="synthetic", **kw)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "viewer.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page_html)
        old = os.path.join(tmp, "before.html")
        if before_html is not None:
            with open(old, "w", encoding="utf-8") as f:
                f.write(before_html)
            print(f"before: {len(before_html) / 1e6:.1f} MB; file size ratio "
                  f"{len(page_html) / len(before_html):.2f}")
        print(f"{a.samples} samples, {a.stacks} stacks: {len(tree.parent)} tree nodes, "
              f"{len(layout(tree))} drawn frames")
        print(f"write: {write_s:.2f} s, {len(page_html) / 1e6:.1f} MB; load average "
              f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}")
        with playwright_chromium() as b:
            opens, olds = [], []
            for _ in range(a.repeat):
                opens.append(_open_ms(b, "file://" + path))
                if before_html is not None:
                    olds.append(_open_ms(b, "file://" + old))
            print(f"open to first view drawn: best {min(opens):.0f} ms "
                  f"(all {', '.join(f'{v:.0f}' for v in opens)}; goal <= 1000)")
            print("  first paint, whole file read (ms): " + ", ".join(
                f"{p:.0f}/{d:.0f}" for p, d in _open_ms.extra))  # type: ignore[attr-defined]
            if olds:
                print(f"  before: best {min(olds):.0f} ms; ratio {min(opens) / min(olds):.2f}")
            q = (a.query + "zzzzzzzzzzz")[:11]
            if before_html is not None:
                new_k = _keystrokes(b, "file://" + path, q)
                old_k = _keystrokes(b, "file://" + old, q)
                print(f"keystrokes now:    {' '.join(f'{v:.0f}' for v in new_k)} ms "
                      f"(total {sum(new_k) / 1000:.1f} s)")
                print(f"keystrokes before: {' '.join(f'{v:.0f}' for v in old_k)} ms "
                      f"(total {sum(old_k) / 1000:.1f} s); ratio of totals "
                      f"{sum(new_k) / sum(old_k):.2f}")
            page = b.new_page(viewport={"width": 1280, "height": 800})
            page.goto("file://" + path, wait_until="commit", timeout=300_000)
            _loaded(page)
            per_key, work = [], []
            for k in range(len(q)):
                per_key.append(page.evaluate(_TYPE, q[: k + 1]))
                work.append(page.evaluate(_WORK))
            print(f"search, {len(q)} keystrokes: max {max(per_key):.0f} ms, median "
                  f"{sorted(per_key)[len(per_key) // 2]:.0f} ms (debounce included; "
                  f"goal <= 100): {' '.join(f'{v:.0f}' for v in per_key)}")
            print(f"  the page's own work per keystroke (search and repaint): "
                  f"{' '.join(f'{v:.0f}' for v in work)} ms")
            page.evaluate(_TYPE, a.query)
            status = page.evaluate("document.getElementById('fg-status').textContent")
            print(f"search share of {a.query!r}: {status!r}; report --focus: {exact:.1f}%")
            for v in ("sandwich", "time", "flame"):
                print(f"switch to {v}: {page.evaluate(_VIEW, v):.0f} ms")
            # A range (the middle third) applied to every view: the samples inflated and
            # counted on the first, then another range over the same samples.
            span = float(rec.tracks[0].trace.sample_time[-1] - rec.tracks[0].trace.sample_time[0])
            for k, (a0, a1) in enumerate(((span / 3, 2 * span / 3), (span / 4, span / 2))):
                got = page.evaluate(_RANGE, f"{a0:.0f}-{a1:.0f}")
                print(f"range {a0:.0f}-{a1:.0f} ms applied to every view "
                      f"({'first: samples inflated' if k == 0 else 'again'}): {got:.0f} ms")
            page.evaluate(_TYPE, "fn123")
            status = page.evaluate("document.getElementById('fg-status').textContent")
            print(f"  search under the range: {status!r}")
        print(f"load average after: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
