"""examples/notebook.ipynb runs in a real Jupyter kernel (ipykernel, the venv's python) and
shows what it promises: the report's text with the hot function, the flame graph viewer as
an HTML output, the rows as a table, the page written."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def _texts(cell: nbformat.NotebookNode, mime: str) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            out.append(o.text if mime == "text/plain" else "")
        elif o.output_type in ("execute_result", "display_data"):
            out.append(o.data.get(mime, ""))
        elif o.output_type == "error":
            raise AssertionError("\n".join(o.traceback))
    return "".join(out)


def test_the_example_notebook_runs_and_shows_report_and_viewer(tmp_path):
    # A copy beside a copy of app.js: the notebook records "app.js" from its own folder and
    # writes a page there.
    shutil.copy(ROOT / "examples" / "notebook.ipynb", tmp_path)
    shutil.copy(ROOT / "examples" / "app.js", tmp_path)
    nb = nbformat.read(tmp_path / "notebook.ipynb", as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")  # kept clean
    NotebookClient(nb, timeout=300, startup_timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_source = {c.source.strip(): c for c in code}

    first = _texts(code[0], "text/plain").strip()
    assert first.startswith("Recording(1 track(s): 'main' · quickjs")
    report = _texts(by_source["jsprof.report(rec, top=8)"], "text/plain")
    assert report.startswith("main · quickjs · 1 ms interval\nself %  total %")
    assert "tokenize" in report and "app.js" in report
    assert "showing 8 of" in report
    tree = _texts(by_source["jsprof.report(rec, tree=True, threshold=2)"], "text/plain")
    assert "tokenize" in tree

    viewer = _texts(by_source["rec"], "text/html")
    assert viewer.startswith('<iframe sandbox="allow-scripts"') and "srcdoc=" in viewer
    assert "fg-canvas" in viewer and "tokenize" in viewer
    assert _texts(by_source["rec"], "text/plain").startswith("Recording(")

    rows = by_source["summarize(rec).top(5)"]
    assert "<table>" in _texts(rows, "text/html")
    assert _texts(rows, "text/plain").split("\n")[0].split()[:2] == ["self", "%"]

    last = _texts(code[-1], "text/plain").splitlines()
    assert last[0] == "app-2-rounds.html" and len(last) == 7
    assert (tmp_path / "app-2-rounds.html").read_text().startswith("<!DOCTYPE html>")
