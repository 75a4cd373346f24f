"""jsprof from Python: `jsprof.report(rec)` and `jsprof.flame(rec, path)` make what the
commands make for the same recording; a Recording shows inline in Jupyter as the viewer;
summary rows print readably. On a real QuickJS recording of examples/app.js."""

from __future__ import annotations

import html
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

import jsprof
from jsprof.analysis.profile import summarize
from jsprof.errors import UsageError
from jsprof.trace import TraceBuilder

ROOT = Path(__file__).resolve().parents[1]
JSPROF = str(Path(sys.executable).parent / "jsprof")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("app")
    out = d / "app.jsprof.json"
    p = subprocess.run([JSPROF, "record", "-o", str(out), str(ROOT / "examples" / "app.js"), "1"],
                       capture_output=True, text=True, timeout=180, cwd=d)
    assert p.returncode == 0, p.stderr
    return out


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    p = subprocess.run([JSPROF, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return p


@pytest.mark.parametrize(("argv", "kw"), [
    ((), {}),
    (("--top", "5", "--sort", "total"), {"top": 5, "sort": "total"}),
    (("--all", "--by", "resource"), {"top": None, "by": "resource"}),
    (("--by", "line", "--top", "4", "--wide"), {"by": "line", "top": 4, "wide": True}),
    (("--tree", "--threshold", "2"), {"tree": True, "threshold": 2.0}),
])
def test_report_is_the_commands_text(app, argv, kw, monkeypatch):
    want = _cli("report", app.name, *argv, cwd=app.parent).stdout
    monkeypatch.chdir(app.parent)  # locations are shown relative to the current folder
    got = jsprof.report(jsprof.load(app), **kw)
    assert str(got) == want
    # the hot function (its script, by resource) is there: the comparison is of something
    # by line, the top 4 lines are wherever the recording's samples fell (CI once had none
    # of tokenize's among them): any line of app.js says the rows are the app's
    assert ("app.js" if kw.get("by") in ("resource", "line") else "tokenize") in want
    assert repr(got).startswith(want.rstrip("\n"))


def test_report_refuses_what_the_command_refuses(app):
    rec = jsprof.load(app)
    with pytest.raises(UsageError, match="threshold goes with tree"):
        jsprof.report(rec, threshold=5)
    with pytest.raises(UsageError, match="by='line'"):
        jsprof.report(rec, tree=True, by="line")
    with pytest.raises(UsageError, match="no track named 'nope'"):
        jsprof.report(rec, track="nope")


def test_flame_writes_the_commands_page(app, tmp_path, monkeypatch):
    _cli("flame", app.name, "-o", str(tmp_path / "cli.html"), cwd=app.parent)
    monkeypatch.chdir(app.parent)  # the source view reads local scripts from here, as the CLI
    got = jsprof.flame(jsprof.load(app), tmp_path / "api.html", title=app.name)
    assert got == str(tmp_path / "api.html")
    assert (tmp_path / "api.html").read_bytes() == (tmp_path / "cli.html").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["api.html", "cli.html"]  # no temp left
    with pytest.raises(UsageError, match=r"\.html or \.svg"):
        jsprof.flame(jsprof.load(app), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


class _Top(HTMLParser):
    """The top-level elements of an HTML fragment, with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.top: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if self.depth == 0:
            self.top.append((tag, dict(attrs)))
        self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        self.depth -= 1


def _hostile() -> jsprof.Recording:
    b = TraceBuilder()
    evil = '"></iframe><script>alert(1)</script>'
    stack = b.stack_id([b.frame_id(evil, b.resource_id("https://x.test/a.js"), 1, 1)])
    for t in (0.0, 1.0, 2.0):
        b.add_sample(t, stack)
    return jsprof.Recording.of(b.build(), engine="quickjs", sample_interval=1.0)


def test_an_ipython_shell_shows_a_recording_as_the_viewer(app):
    """jsprof imported inside IPython registers the viewer with the shell's HTML formatter
    (trace.py has no `_repr_html_`: the model imports no view above it); a shell started
    after jsprof was imported gets it from `_show_in_ipython()`; no shell, nothing."""
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "import jsprof\n"
        f"rec = jsprof.load({str(app)!r})\n"
        "assert 'jsprof.views' not in sys.modules\n"  # imported when first shown
        "data, _ = shell.display_formatter.format(rec)\n"
        "assert data['text/plain'] == repr(rec)\n"
        "assert data['text/html'] == jsprof.views.inline_viewer(rec)\n"
        "print('shown')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout == "shown\n", p.stderr
    late = (
        "import jsprof\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        f"rec = jsprof.load({str(app)!r})\n"
        "assert 'text/html' not in shell.display_formatter.format(rec)[0]\n"
        "assert jsprof._show_in_ipython()\n"
        "assert 'fg-canvas' in shell.display_formatter.format(rec)[0]['text/html']\n"
        "print('late')\n"
    )
    p = subprocess.run([sys.executable, "-c", late], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout == "late\n", p.stderr
    assert jsprof._show_in_ipython() is False  # no shell runs in this process


def test_jsprof_imports_beside_a_half_imported_ipython():
    """`import jsprof` while IPython's package is still importing (it is in sys.modules
    without `get_ipython` yet) neither fails nor registers anything: there is no shell."""
    code = (
        "import sys, types\n"
        "sys.modules['IPython'] = types.ModuleType('IPython')\n"  # what a partial import leaves
        "import jsprof\n"
        "assert jsprof._show_in_ipython() is False\n"
        "print('imported')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout == "imported\n", p.stderr


def test_a_recording_shows_as_the_viewer_in_a_sandboxed_frame(app):
    rec = jsprof.load(app)
    out = jsprof.views.inline_viewer(rec)
    p = _Top()
    p.feed(out)
    assert [t for t, _ in p.top] == ["iframe"], p.top  # one element: the frame
    attrs = p.top[0][1]
    assert attrs["sandbox"] == "allow-scripts"  # scripts in an opaque origin, not the notebook's
    doc = attrs["srcdoc"]
    assert doc.startswith("<!DOCTYPE html>") and 'id="fg-canvas"' in doc and "tokenize" in doc
    assert '<base href="about:srcdoc">' in doc
    # the document is the page jsprof flame writes, with only the base added
    page = jsprof.views.flame_document(rec, title="recording")
    assert doc.replace('<base href="about:srcdoc">\n', "", 1) == page
    assert repr(rec).startswith("Recording(1 track(s): 'main' · quickjs · ")


def test_trace_content_stays_data_in_the_inline_viewer():
    out = jsprof.views.inline_viewer(_hostile())
    p = _Top()
    p.feed(out)
    assert [t for t, _ in p.top] == ["iframe"]
    doc = p.top[0][1]["srcdoc"]
    assert "<script>alert(1)" not in doc  # escaped inside the page too, not only in srcdoc
    assert "alert(1)" in html.unescape(doc) or "alert(1)" in doc


def test_a_page_over_the_limit_shows_the_report_and_says_so(app):
    rec = jsprof.load(app)
    out = jsprof.views.inline_viewer(rec, limit=10_000)
    assert "<iframe" not in out
    assert "over the 0.01 MB shown inline" in out and "jsprof.flame(rec" in out
    assert "tokenize" in out and "<pre>" in out


def test_summary_rows_print_like_the_report(app):
    rows = summarize(jsprof.load(app)).top(2)
    assert len(rows) == 2 and rows[0].self_ms >= rows[1].self_ms
    r = rows[0]
    assert repr(r) == (
        f"TopRow({r.key.label()} · {r.key.location()} · self {r.self_ms:.1f} ms "
        f"{r.self_pct:.1f}% · total {r.total_ms:.1f} ms {r.total_pct:.1f}%)"
    )
    assert 0 < r.self_pct <= 100
    table = repr(rows).splitlines()
    assert table[0].split() == ["self", "%", "total", "%", "self", "ms", "total", "ms",
                                "function", "location"]
    assert f"{r.self_ms:.1f}" in table[1] and r.key.label() in table[1]
    assert "<table>" in rows._repr_html_()
    s = summarize(jsprof.load(app))
    assert repr(s).splitlines()[1:] == repr(s.top(10)).splitlines()


def test_the_inline_limit_is_read_when_shown(app, monkeypatch):
    rec = jsprof.load(app)
    monkeypatch.setattr(jsprof.views, "INLINE_LIMIT", 10_000)
    out = jsprof.views.inline_viewer(rec)
    assert "<iframe" not in out and "over the 0.01 MB shown inline" in out


@pytest.mark.chromium
def test_the_inline_viewer_runs_in_chromium_inside_a_notebook_like_page(app):
    """The output as a notebook page holds it (served over HTTP, as Jupyter is): the viewer
    draws in its frame, a tab's fragment link stays in the frame (against the notebook's
    address it would load the notebook there), and the frame cannot reach the page."""
    import time

    from browser_util import page_server, playwright_chromium

    out = jsprof.views.inline_viewer(jsprof.load(app))
    outer = f"<!DOCTYPE html><html><body><h1>notebook</h1>{out}</body></html>".encode()
    with page_server(lambda _: (outer, "text/html; charset=utf-8", {})) as origin, \
            playwright_chromium() as b:
        page = b.new_page(viewport={"width": 1200, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(origin + "/notebooks/x.ipynb")

        def frame_when(expr: str):
            deadline = time.monotonic() + 30
            while True:
                fr = next((f for f in page.frames if f.url.startswith("about:srcdoc")), None)
                if fr is not None and fr.evaluate(expr):
                    return fr
                assert time.monotonic() < deadline, (expr, [f.url for f in page.frames])
                page.wait_for_timeout(50)  # lets Playwright take in the frame's navigation

        fr = frame_when("document.body.dataset.view === 'flame'")
        frame_when("document.getElementById('fg-canvas').dataset.frames > 0")
        assert "tokenize" in fr.evaluate("document.getElementById('fg-data').textContent")
        # opaque origin: the notebook's page, cookies and storage are out of reach
        assert fr.evaluate("(() => { try { return parent.document.title, 'reached' }"
                           " catch (e) { return 'blocked' } })()") == "blocked"
        fr.locator("nav.tabs a[data-tab='sandwich']").click()
        fr = frame_when("document.body.dataset.view === 'sandwich'")
        assert fr.url == "about:srcdoc#view=sandwich"
        assert page.url == origin + "/notebooks/x.ipynb"
        assert errors == []
