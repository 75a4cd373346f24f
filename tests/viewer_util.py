"""What the viewer's browser tests share: a real recording to open (QuickJS running acorn,
npm-pinned, on its own source; or a script of the test's on any engine), the page of a
trace, and polling the page (its
Content-Security-Policy forbids the `eval` behind Playwright's wait_for_function)."""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jsprof import io
from jsprof.cli import main

JS = Path(__file__).parent / "js" / "node_modules"
DRIVER = """import * as acorn from "./acorn.mjs";
var SOURCE = {source};
var end = Date.now() + 700, n = 0;
while (Date.now() < end || n < 4) {{
  acorn.parse(SOURCE, {{ ecmaVersion: "latest", sourceType: "module", locations: true }});
  n++;
}}
"""


_acorn: list[Path] = []  # the process's one recording of acorn (record_acorn)


def record_acorn(d: Path) -> Path:
    """A CPU-clock QuickJS recording of acorn parsing its own source, saved in `d` (with
    the two scripts it ran). Recorded once per process, in a folder of its own, and copied:
    the tests that use it (viewer tables and transforms, the tail's memory) only read it,
    and each recording costs a QuickJS run of seconds on a busy machine."""
    if not _acorn:
        _acorn.append(_record_acorn(Path(tempfile.mkdtemp(prefix="jsprof-acorn-"))))
        atexit.register(shutil.rmtree, _acorn[0].parent, True)
    src = _acorn[0]
    for f in ("acorn.mjs", "driver.mjs", src.name):
        shutil.copy(src.parent / f, d / f)
    return d / src.name


def _record_acorn(d: Path) -> Path:
    from jsprof.record import record

    src = JS / "acorn" / "dist" / "acorn.mjs"
    assert src.exists(), "tests/js missing: `make test` installs it"
    shutil.copy(src, d / "acorn.mjs")
    (d / "driver.mjs").write_text(DRIVER.format(source=json.dumps(src.read_text())))
    out = d / "acorn.jsprof.json"
    io.save(record(d / "driver.mjs", sample_interval=1.0, clock="cpu"), out)
    return out


def record_app(d: Path, source: str, engine: str) -> Path:
    """`source` written to d/app.js and recorded by `jsprof record --engine ENGINE` (for
    Chromium, a page that loads it); the trace's path."""
    app = d / "app.js"
    app.write_text(source)
    target = app
    if engine == "chromium":
        target = d / "page.html"
        target.write_text('<!DOCTYPE html><html><body><script src="app.js"></script></body></html>')
    out = d / f"app.{engine}.json"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--engine", engine, "-o", str(out),
         str(target)],
        capture_output=True, text=True, timeout=180, cwd=d,
    )
    assert p.returncode == 0, p.stderr
    # What record said (its summary, notes of lost or partial tracks): a test that finds
    # the trace wrong prints it (record_log), the recording itself is gone with tmp_path.
    out.with_suffix(".log").write_text(p.stdout + p.stderr)
    return out


def record_log(trace: Path) -> str:
    """What `jsprof record` printed when it wrote `trace` (record_app)."""
    log = trace.with_suffix(".log")
    return log.read_text() if log.exists() else "(no record log)"


def write_page(trace: Path, out: Path, *extra: str) -> Path:
    assert main(["flame", str(trace), "-o", str(out), *extra]) == 0
    return out


def wait(page: Any, expr: str, timeout: float = 30.0) -> None:
    """Poll a JS expression until true."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expr):
        assert time.monotonic() < deadline, f"timed out waiting for {expr}"
        time.sleep(0.05)


def open_page(browser: Any, url: str, view: str | None = None, width: int = 1400,
              height: int = 900) -> Any:
    """`url` in a new page, once its view `view` shows (None: once any view does);
    page.errors collects its errors."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    wait(page, "document.body.dataset.view !== undefined" if view is None
         else f"document.body.dataset.view === '{view}'")
    page.errors = errors
    return page


# Whether a point of the window reaches the flame graph's canvas (not the sticky header
# over it, not outside the window).
_ON_CANVAS = ("([x, y]) => document.elementFromPoint(x, y) === "
              "document.getElementById('fg-canvas')")


def on_screen(page: Any, frame: dict, timeout: float = 30.0) -> dict:
    """`frame` (of jsprofFrames) with its box scrolled into view, as a user would before
    pointing at it: a graph taller than the window opens at its roots, so a deep frame may
    be above the window or under the sticky header, where a click reaches no frame (a
    recording whose widest pp.readWord was 51 deep: cy 63 under a 107 px header, no menu).
    Returned re-read, once its middle reaches the canvas (moved on the scroll's paint)."""
    if page.evaluate(_ON_CANVAS, [frame["cx"], frame["cy"]]):
        return frame
    page.evaluate("y => window.scrollBy(0, y - window.innerHeight / 2)", frame["cy"])
    deadline = time.monotonic() + timeout
    while True:
        now = next(f for f in page.evaluate("jsprofFrames()") if f["i"] == frame["i"])
        if page.evaluate(_ON_CANVAS, [now["cx"], now["cy"]]):
            return now
        assert time.monotonic() < deadline, f"frame {frame['name']} never came on screen: {now}"
        time.sleep(0.05)
