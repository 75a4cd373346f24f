"""The viewer's Source view of a minified bundle (issue 32, srccol): its functions share a
few lines of tens of kB, so a row cut at the line's start showed other functions' text
(newuser13: prettier by esbuild --minify, `#view=source&fn=Ku` showed the start of a 30 kB
line, Ku at its column 339). Each function's long line is now a window around its column,
marked, with a "\u2026" at each cut. Real acorn (npm, pinned) bundled and minified by
esbuild, recorded on QuickJS (CPU clock), the page opened in headless Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from browser_util import playwright_chromium
from jsprof import io
from jsprof.cli import main
from jsprof.record import record
from jsprof.render.flame.source import SOURCE_LINE_CHARS
from viewer_util import open_page

pytestmark = pytest.mark.npm

JS = Path(__file__).parent / "js" / "node_modules"
ENTRY = """import {{ parse }} from {acorn};
const src = "function f(a, b) {{ return [a, b].map((x) => x * 2); }}\\n".repeat(3000);
for (let i = 0; i < 3; i++) parse(src, {{ ecmaVersion: 2022 }});
"""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with playwright_chromium() as b:
        yield b


def _cells(page: Any) -> dict[int, dict]:
    """Per source row shown: its code cell's text, its first column and the marked text."""
    got = page.eval_on_selector_all(
        "[data-table='source'] tbody tr[data-line]",
        "trs => trs.map(tr => { const c = tr.querySelector('.code'), m = c.querySelector('mark');"
        " return [+tr.dataset.line, c.textContent, c.dataset.from || null,"
        " m ? m.textContent : null, c.querySelectorAll(':not(span.cut):not(mark)').length]; })",
    )
    return {ln: {"text": t, "from": f, "mark": m, "tags": n} for ln, t, f, m, n in got}


def test_source_view_of_a_minified_bundle_shows_the_function(chromium, tmp_path: Path) -> None:
    esbuild = JS / ".bin" / "esbuild"
    assert esbuild.exists() and (JS / "acorn").is_dir(), "tests/js missing: `make test`"
    (tmp_path / "entry.mjs").write_text(
        ENTRY.format(acorn=json.dumps(str(JS / "acorn" / "dist" / "acorn.mjs"))))
    subprocess.run([str(esbuild), "entry.mjs", "--bundle", "--minify", "--outfile=app.min.js",
                    "--log-level=warning"], cwd=tmp_path, check=True, timeout=120)
    bundle = tmp_path / "app.min.js"
    text = bundle.read_text().split("\n")
    trace = tmp_path / "app.jsprof.json"
    io.save(record(bundle, sample_interval=1.0, clock="cpu"), trace)
    page_file = tmp_path / "app.html"
    assert main(["flame", str(trace), "-o", str(page_file)]) == 0

    # The bundle's named functions sampled on a long line, past its first window: the
    # ones a row cut at the line's start showed no text of.
    rows = [r for r in json.loads(_report(trace))["rows"]
            if r.get("resource") == bundle.as_uri() and r["name"] and r.get("column")
            and len(text[r["line"] - 1]) > SOURCE_LINE_CHARS
            and r["column"] > SOURCE_LINE_CHARS]
    assert len(rows) >= 3, rows
    for r in rows[:5]:
        line, col = text[r["line"] - 1], r["column"]
        page = open_page(chromium, page_file.as_uri() + "#view=source&fn=" + quote(r["name"])
                         + "&loc=" + quote(r["location"]))
        cells = _cells(page)
        assert r["line"] in cells, (r, sorted(cells))
        got = cells[r["line"]]
        own = line[col - 1 : col - 1 + 30]  # the function's own text, from its column
        assert own in got["text"], (r, got["text"][:120], own)
        assert got["mark"] == line[col - 1], (r, got)
        first = int(got["from"])
        # cut at both ends, each cut a "\u2026", the text between exactly the line's
        assert got["text"].startswith("\u2026") and first > 1
        inner = got["text"][1:]
        if first - 1 + SOURCE_LINE_CHARS < len(line):
            assert inner.endswith("\u2026")
            inner = inner[:-1]
        assert inner == line[first - 1 : first - 1 + len(inner)]
        # never the whole line in the page's rows: each a window of SOURCE_LINE_CHARS
        assert all(len(c["text"]) <= SOURCE_LINE_CHARS + 2 for c in cells.values())
        assert all(c["tags"] == 0 for c in cells.values())  # text, not markup
        assert page.errors == []
        page.close()


def _report(trace: Path) -> str:
    p = subprocess.run([sys.executable, "-m", "jsprof.cli", "report", str(trace), "--json",
                        "--all"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout
