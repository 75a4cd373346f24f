"""The offline viewer (`jsprof flame` HTML) on a big synthetic profile, in headless Chromium.

    .venv/bin/python benchmarks/bench_viewer.py [--samples 1200000] [--stacks 200000]
        [--repeat 3]

Prints, for one synthetic recording (bench_trace's generator: deep varied stacks):

- write: seconds to build the call tree and write the page (`render_flame` with the
  Recording, all views), and the file's size;
- open: ms from navigation start to the first view drawn (the page's `jsprof-drawn`
  performance mark), best of --repeat (goal <= 1000);
- search: ms from a keystroke (an `input` event) to the status line answering, debounce
  included, per character of an 11-character query typed one at a time (goal <= 100 each);
- share: the search's share of all time against `report --focus` (the exact share of
  samples whose stack has a matching function);
- sandwich and time: ms to switch to each view and draw it.
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
from jsprof.render.flame import render_flame

CHROMIUM = "/usr/bin/chromium"

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

_VIEW = """async (v) => {
  const t0 = performance.now();
  location.hash = "view=" + v;
  while (document.body.dataset.view !== v) await new Promise(r => setTimeout(r, 1));
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  return performance.now() - t0;
}"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1_200_000)
    ap.add_argument("--stacks", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--query", default="fn1234")
    a = ap.parse_args()
    os.environ["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    from playwright.sync_api import sync_playwright

    rec = synthetic(a.samples, a.stacks)
    t0 = time.perf_counter()
    tree = build_call_tree(rec)
    page_html = render_flame(tree, "html", title="synthetic", rec=rec)
    write_s = time.perf_counter() - t0
    # The exact share: samples whose stack passes through a function matching the query.
    focused = apply_filters(rec, "synthetic", None, [f"*{a.query}*"], [], False, None)
    exact = 100 * build_call_tree(focused).total_time / tree.total_time
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "viewer.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page_html)
        print(f"{a.samples} samples, {a.stacks} stacks: {len(tree.parent)} tree nodes, "
              f"{page_html.count('<g data-i=')} drawn frames")
        print(f"write: {write_s:.2f} s, {len(page_html) / 1e6:.1f} MB")
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                  args=["--no-sandbox", "--disable-gpu"])
            opens = []
            for _ in range(a.repeat):
                page = b.new_page(viewport={"width": 1280, "height": 800})
                page.goto("file://" + path)
                while not page.evaluate("performance.getEntriesByName('jsprof-drawn').length"):
                    time.sleep(0.01)
                opens.append(page.evaluate(
                    "performance.getEntriesByName('jsprof-drawn')[0].startTime"))
                page.close()
            print(f"open to first view drawn: best {min(opens):.0f} ms "
                  f"(all {', '.join(f'{v:.0f}' for v in opens)}; goal <= 1000)")
            page = b.new_page(viewport={"width": 1280, "height": 800})
            page.goto("file://" + path)
            while not page.evaluate("document.body.dataset.view"):
                time.sleep(0.01)
            q = (a.query + "zzzzzzzzzzz")[:11]
            per_key = [page.evaluate(_TYPE, q[: k + 1]) for k in range(len(q))]
            print(f"search, {len(q)} keystrokes: max {max(per_key):.0f} ms, median "
                  f"{sorted(per_key)[len(per_key) // 2]:.0f} ms (debounce included; "
                  f"goal <= 100)")
            page.evaluate(_TYPE, a.query)
            status = page.evaluate("document.getElementById('fg-status').textContent")
            print(f"search share of {a.query!r}: {status!r}; report --focus: {exact:.1f}%")
            for v in ("sandwich", "time", "flame"):
                print(f"switch to {v}: {page.evaluate(_VIEW, v):.0f} ms")
            b.close()


if __name__ == "__main__":
    sys.exit(main())
