"""The viewer's transforms and tables (issue 35) on a big synthetic profile, in headless
Chromium.

    .venv/bin/python benchmarks/bench_viewer_transforms.py [--samples 3000000]
        [--stacks 500000] [--repeat 3] [--before DIR]

For one synthetic recording (bench_trace's generator: deep varied stacks), opens the page
`jsprof flame` writes and applies each transform kind in turn (through the link's `tf=`,
as the menu does), printing per kind the best of --repeat of:

- apply: the page's own measure of applying it to the whole call tree (`jsprof-transform`);
- view: applying it, laying the Flame view out again and drawing it
  (`jsprof-transform-view`; goal <= 200 ms at 3M samples); the visit's first step (which
  also compiles the page's code) is timed apart, before the table;
- cpu: the page's main thread's CPU time over the same (DevTools' `ThreadTime` metric read
  before and after one call that sets the link and waits for the page to show it): on a
  shared machine the wall times above include the time the thread waited for a core, this
  does not;

then, per keystroke of a search typed one character at a time ("f", "fn", "fn1", "fn12":
the first keys match most of the graph), the page's own work (`jsprof-search`) and its
main thread's CPU ms, in both pages with --before; the open to the first view drawn
(the page's `jsprof-drawn` mark); each transform's `view` also as a ratio to the page's
own search over the same tree (`jsprof-search`, one
keystroke), measured in the same run: the machine is shared, and ratios move less than
times. Then the time to switch to the Bottom-up and Call tree tables, untransformed.

`--before DIR`: another version's viewer scripts (flame.js and viewer_*.js, e.g.
`git archive REV src/jsprof/render | tar -x -C /tmp/b` and DIR /tmp/b/src/jsprof/render):
the same page with those scripts in place of this version's (and its Content-Security-
Policy's hashes for them) is opened beside it, each kind applied in both pages in turn,
and `view` is given for both and as a ratio now / before.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
import tempfile
import time
from urllib.parse import quote

import numpy as np

from bench_trace import synthetic
from jsprof.analysis.calltree import build_call_tree
from jsprof.render.flame import render_flame

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from browser_util import playwright_chromium  # noqa: E402

_LAST = """(name) => { const m = performance.getEntriesByName(name);
  return m.length ? m[m.length - 1].duration : -1; }"""

_VIEW = """async (v) => {
  const t0 = performance.now();
  location.hash = "view=" + v + "&tf=";
  while (document.body.dataset.view !== v) await new Promise(r => setTimeout(r, 1));
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  return performance.now() - t0;
}"""


def _wait(page: object, expr: str) -> None:
    deadline = time.monotonic() + 300
    while not page.evaluate(expr):  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, expr
        time.sleep(0.005)


def _sha(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _with_scripts(page_html: str, before_dir: str) -> str:
    """The page with another version's viewer scripts inlined in place of this version's
    (each <script> is one file's text, pinned by its hash in the page's CSP)."""
    from jsprof.render import flame

    names = (*flame.VIEWER_MODULES, "flame.js")
    mine = (*flame.viewer_modules(), flame.flame_script())
    for name, text in zip(names, mine, strict=True):
        with open(os.path.join(before_dir, name), encoding="utf-8") as fh:
            old = fh.read()
        tag = f"<script>{text}</script>"
        assert page_html.count(tag) == 1, name
        page_html = page_html.replace(tag, f"<script>{old}</script>")
        page_html = page_html.replace(f"'sha256-{_sha(text)}'", f"'sha256-{_sha(old)}'")
    return page_html


def _open(b: object, path: str) -> object:
    page = b.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page.goto("file://" + path, wait_until="commit", timeout=300_000)
    _wait(page, "document.readyState === 'complete' && !!document.body.dataset.ready")
    return page


# Types a query (the input event the box listens to) and resolves once the status line
# names it.
_TYPE = """(q) => new Promise(done => {
  const input = document.getElementById("fg-search"), status = document.getElementById("fg-status");
  const seen = new MutationObserver(() => {
    if (status.textContent.indexOf("\u201c" + q + "\u201d") >= 0) { seen.disconnect(); done(); }
  });
  seen.observe(status, {childList: true, characterData: true, subtree: true});
  input.value = q;
  input.dispatchEvent(new Event("input"));
})"""


def _keys(page: object, cdp: object, query: str) -> list[tuple[float, float]]:
    """(the page's own work, main-thread CPU ms) per keystroke of `query`, from empty."""
    out = []
    for k in range(1, len(query) + 1):
        t0 = _thread_ms(cdp)
        page.evaluate(_TYPE, query[:k])  # type: ignore[attr-defined]
        out.append((page.evaluate(_LAST, "jsprof-search"), _thread_ms(cdp) - t0))  # type: ignore[attr-defined]
    page.evaluate("document.getElementById('fg-search').value = ''")  # type: ignore[attr-defined]
    page.evaluate("document.getElementById('fg-search').dispatchEvent(new Event('input'))")  # type: ignore[attr-defined]
    return out


# Sets the link's transforms and resolves once the page shows them (one call: no polling
# on the page's thread while it works).
_SET = """(tf) => new Promise(done => {
  const want = tf ? "1" : "0";
  if (document.body.dataset.transforms === want && location.hash.endsWith(tf)) return done();
  const seen = new MutationObserver(() => {
    if (document.body.dataset.transforms === want) { seen.disconnect(); done(); }
  });
  seen.observe(document.body, {attributes: true});
  location.hash = "view=flame&tf=" + tf;
})"""


def _thread_ms(cdp: object) -> float:
    got = cdp.send("Performance.getMetrics")["metrics"]  # type: ignore[attr-defined]
    return 1000.0 * next(m["value"] for m in got if m["name"] == "ThreadTime")


def _apply(page: object, tf: str, cdp: object | None = None) -> float:
    """Apply `tf` by the link; the main thread's CPU ms it took (with `cdp`)."""
    t0 = _thread_ms(cdp) if cdp else 0.0
    page.evaluate(_SET, quote(tf))  # type: ignore[attr-defined]
    _wait(page, f"document.body.dataset.transforms === '{1 if tf else 0}'")
    return _thread_ms(cdp) - t0 if cdp else 0.0


def _cdp(page: object) -> object:
    cdp = page.context.new_cdp_session(page)  # type: ignore[attr-defined]
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
    return cdp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=3_000_000)
    ap.add_argument("--stacks", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", metavar="DIR", help="another version's viewer scripts")
    a = ap.parse_args()

    rec = synthetic(a.samples, a.stacks)
    tree = build_call_tree(rec)
    # A function on many paths, and the widest path three deep.
    f = int(np.argmax(np.bincount(tree.function, weights=tree.total_ms)))
    name = tree.functions[f].label()
    node = max(tree.roots(), key=lambda r: tree.total_ms[r])
    path = [node]
    for _ in range(2):
        kids = np.nonzero(tree.parent == path[-1])[0]
        path.append(int(max(kids, key=lambda k: tree.total_ms[k])))
    p3 = ">".join(tree.functions[int(tree.function[n])].label() for n in path)
    res = tree.functions[f].resource or ""
    specs = [f"merge:{name}", f"merge-node:{p3}", f"focus-subtree:{p3}", f"focus:{name}",
             f"collapse:{name}", f"collapse-resource:{res}", f"collapse-recursion:{name}",
             f"drop:{name}", f"collapse-direct-recursion:{name}", f"hide-repeating:{p3}",
             f"ignore:{res.rsplit('/', 1)[-1]}$", f"focus-resource:{res}"]
    t0 = time.perf_counter()
    page_html = render_flame(tree, "html", title="synthetic", rec=rec)
    print(f"{a.samples} samples, {a.stacks} stacks: {len(tree.parent)} tree nodes, "
          f"{len(tree.functions)} functions; page {len(page_html) / 1e6:.1f} MB in "
          f"{time.perf_counter() - t0:.1f} s; load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        path_html = os.path.join(tmp, "viewer.html")
        with open(path_html, "w", encoding="utf-8") as fh:
            fh.write(page_html)
        old_html = None
        if a.before:
            old_html = os.path.join(tmp, "before.html")
            with open(old_html, "w", encoding="utf-8") as fh:
                fh.write(_with_scripts(page_html, a.before))
        with playwright_chromium() as b:
            page = _open(b, path_html)
            old = _open(b, old_html) if old_html else None
            cdps = {"now": _cdp(page), "before": _cdp(old) if old else None}
            for p, who in ((page, "now"), (old, "before")):
                if p is not None:
                    drawn = p.evaluate("performance.getEntriesByName('jsprof-drawn')[0].startTime")
                    print(f"open to first view drawn, {who}: {drawn:.0f} ms (goal <= 1500 at 10M)")
            keys: dict[str, list[list[tuple[float, float]]]] = {"now": [], "before": []}
            for _ in range(a.repeat):
                for p, who in ((page, "now"), (old, "before")):
                    if p is not None:
                        keys[who].append(_keys(p, cdps[who], "fn12"))
            for who in ("now", "before"):
                if keys[who]:
                    best = [min(r[k] for r in keys[who]) for k in range(4)]
                    print(f"search keystrokes f fn fn1 fn12, {who}: work "
                          f"{' '.join(f'{w:.0f}' for w, _ in best)} ms; main-thread CPU "
                          f"{' '.join(f'{c:.0f}' for _, c in best)} ms (best of {a.repeat})")
            if keys["before"]:
                def cpu(who: str, k: int) -> float:
                    return min(r[k][1] for r in keys[who])
                print("  ratio now/before per key, CPU: " + " ".join(
                    f"{cpu('now', k) / cpu('before', k):.2f}" for k in range(4)))
            # the baseline: one search keystroke's own work over the same tree
            page.fill("#fg-search", name)
            _wait(page, "document.getElementById('fg-status').textContent"
                        f".indexOf({json.dumps(name)}) >= 0")
            base = page.evaluate(_LAST, "jsprof-search")
            page.fill("#fg-search", "")
            print(f"baseline: a search's own work {base:.0f} ms")
            # the first step of a visit also compiles the page's code: timed apart
            for p, who in ((page, "now"), (old, "before")):
                if p is None:
                    continue
                for tf in (specs[0], ""):
                    _apply(p, tf)
                    if tf:
                        print(f"first step of the visit ({tf.split(':')[0]}), applied and drawn, "
                              f"{who}: {p.evaluate(_LAST, 'jsprof-transform-view'):.0f} ms")
            cols = (f"{'transform':<26} {'apply ms':>9} {'view ms':>8} {'ratio':>6} {'cpu ms':>7} "
                    f"{'frames':>7}")
            if old:
                cols += (f" {'before apply':>13} {'before view':>12} {'before cpu':>11} "
                         f"{'view now/before':>16} {'cpu now/before':>15}")
            print(cols)
            worst = 0.0
            for spec in specs:
                got: dict[str, tuple[list[float], ...]] = {"now": ([], [], []),
                                                           "before": ([], [], [])}
                for _ in range(a.repeat):
                    # the two pages in turn, each from the complete profile to the step
                    for p, who in ((page, "now"), (old, "before")):
                        if p is None:
                            continue
                        _apply(p, "")
                        got[who][2].append(_apply(p, spec, cdps[who]))
                        got[who][0].append(p.evaluate(_LAST, "jsprof-transform"))
                        got[who][1].append(p.evaluate(_LAST, "jsprof-transform-view"))
                applied, viewed, cpu = got["now"]
                frames = page.evaluate("jsprofFrames().length")
                worst = max(worst, min(viewed))
                line = (f"{spec.split(':')[0]:<26} {min(applied):>9.0f} {min(viewed):>8.0f} "
                        f"{min(viewed) / base:>6.1f} {min(cpu):>7.0f} {frames:>7}")
                if old:
                    oa, ov, oc = got["before"]
                    line += (f" {min(oa):>13.0f} {min(ov):>12.0f} {min(oc):>11.0f} "
                             f"{min(viewed) / min(ov):>16.2f} {min(cpu) / min(oc):>15.2f}")
                print(line)
            print(f"slowest transform, applied and drawn: {worst:.0f} ms (goal <= 200)")
            for v in ("bottomup", "calltree"):
                print(f"switch to {v}: {page.evaluate(_VIEW, v):.0f} ms")
    print(f"load average after: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
