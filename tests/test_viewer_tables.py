"""The viewer's Bottom-up and Call tree tables, driven in headless Chromium on a real
recording: QuickJS running acorn (npm, pinned) on its own source. Their numbers are checked
against `jsprof report --json` and against the call tree jsprof builds in Python."""

import json
from pathlib import Path

import numpy as np
import pytest

from browser_util import playwright_chromium
from jsprof import io
from jsprof.analysis.calltree import build_call_tree
from jsprof.cli import main
from jsprof.trace import NO_STACK_NAMES
from viewer_util import open_page, record_acorn, wait, write_page


@pytest.fixture(scope="module")
def acorn_trace(tmp_path_factory) -> Path:
    return record_acorn(tmp_path_factory.mktemp("acorn"))


@pytest.fixture(scope="module")
def browser():
    with playwright_chromium() as b:
        yield b


_wait = wait
_open = open_page


def _report(trace: Path, capsys, *extra: str) -> dict[tuple[str, str], dict]:
    capsys.readouterr()
    assert main(["report", str(trace), "--json", "--all", *extra]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    return {(r["name"], r["location"]): r for r in rows}


def _page_file(trace: Path, tmp_path: Path, *extra: str) -> Path:
    return write_page(trace, tmp_path / "acorn.html", *extra)


def _rows(page) -> list[dict]:
    return page.evaluate("jsprofTableRows()")


def _ms(v: float) -> float:
    return float(f"{v:.1f}") if v >= 0.1 or v == 0 else float(f"{v:.3f}")


def _self_by_caller(tree, row: dict) -> dict[str, float]:
    """The self time of the page's row's function, per caller (the Python call tree's)."""
    f = [i for i, k in enumerate(tree.functions)
         if k.label() == row["name"] and k.location() == row["loc"]][0]
    by_caller: dict[str, float] = {}
    for n in np.nonzero(tree.function == f)[0].tolist():
        p = int(tree.parent[n])
        if p >= 0:
            name = tree.functions[int(tree.function[p])].label()
            by_caller[name] = by_caller.get(name, 0.0) + float(tree.self_ms[n])
    return by_caller


def test_bottom_up_is_report_and_opens_to_the_callers(browser, acorn_trace, tmp_path, capsys):
    want = _report(acorn_trace, capsys)
    page = _open(browser, _page_file(acorn_trace, tmp_path).as_uri() + "#view=bottomup", "bottomup")
    assert page.locator("nav.tabs a").all_text_contents() == [
        "Flame", "Time", "Sandwich", "Bottom-up", "Call tree", "Source"]
    rows = _rows(page)
    # Every function with time is a row; each row's self and total are report's (to the
    # table's 0.1 ms), sorted by self.
    assert len(rows) == len([r for r in want.values() if r["total_ms"] > 0])
    for r in rows:
        w = want[(r["name"], r["loc"])]
        assert float(r["self"]) == pytest.approx(w["self_ms"], abs=0.0505), (r, w)
        assert float(r["total"]) == pytest.approx(w["total_ms"], abs=0.0505), (r, w)
    selfs = [float(r["self"]) for r in rows]
    assert selfs == sorted(selfs, reverse=True) and selfs[0] > 0
    page.locator("#v-bottomup th[data-sort='total']").click()
    totals = [float(r["total"]) for r in _rows(page)]
    assert totals == sorted(totals, reverse=True)
    assert totals[0] == pytest.approx(max(w["total_ms"] for w in want.values()), abs=0.0505)

    # The hottest function by self time that has callers, opened: a row per caller holding
    # the part of its self time called through that caller, as the call tree (Python) has
    # it. A row of samples with no stack ('(garbage collector)': QuickJS's collector, issue
    # 32) is a root of the tree: no caller, nothing to open in the page either.
    page.locator("#v-bottomup th[data-sort='self']").click()
    tree = build_call_tree(io.load(acorn_trace))
    top, by_caller = None, {}
    for row in _rows(page):
        by_caller = _self_by_caller(tree, row)
        if by_caller:
            top = row
            break
        assert row["name"] in NO_STACK_NAMES and row["loc"] == "", row
        assert row["open"] is None, row  # a leaf: no opener
    assert top is not None, "no function has callers"
    page.locator(f"#v-bottomup tr[data-key='{top['key']}']").click()
    _wait(page, "jsprofTableRows().some(r => r.depth === 1)")
    callers = [r for r in _rows(page) if r["depth"] == 1]
    got = {r["name"]: float(r["self"]) for r in callers}
    assert set(got) == {k for k, v in by_caller.items() if v > 0}
    for name, v in by_caller.items():
        if v > 0:
            assert got[name] == pytest.approx(v, abs=0.0505), name
    assert [float(r["self"]) for r in callers] == sorted(got.values(), reverse=True)
    # Keyboard: the opened row's first caller, opened with the Right arrow, shows its own
    # callers a level deeper.
    page.locator("#v-bottomup table.tt").focus()
    page.keyboard.press("ArrowDown")
    first = [r for r in _rows(page) if r["depth"] == 1][0]
    page.keyboard.press("ArrowRight")
    _wait(page, "jsprofTableRows().some(r => r.depth === 2)")
    assert [r for r in _rows(page) if r["depth"] == 1][0]["open"] == "true", first
    assert page.errors == []


def test_call_tree_is_the_tree_and_search_opens_the_paths(browser, acorn_trace, tmp_path):
    page = _open(browser, _page_file(acorn_trace, tmp_path).as_uri() + "#view=calltree", "calltree")
    tree = build_call_tree(io.load(acorn_trace))
    roots = tree.roots()
    rows = _rows(page)
    # The roots, widest first, each with the Python tree's self and total.
    assert len(rows) == len([r for r in roots if tree.total_ms[r] > 0])
    want = sorted(((float(tree.total_ms[r]), float(tree.self_ms[r]),
                    tree.functions[int(tree.function[r])].label()) for r in roots), reverse=True)
    for r, (tot, own, name) in zip(rows, want, strict=False):
        assert r["name"] == name and float(r["total"]) == pytest.approx(tot, abs=0.0505)
        assert float(r["self"]) == pytest.approx(own, abs=0.0505)
    # Opening the widest root lists its children as the tree has them.
    page.locator(f"#v-calltree tr[data-key='{rows[0]['key']}']").click()
    _wait(page, "jsprofTableRows().some(r => r.depth === 1)")
    kids = [r for r in _rows(page) if r["depth"] == 1]
    node = int(rows[0]["key"])
    want_kids = sorted((float(tree.total_ms[c]) for c in np.nonzero(tree.parent == node)[0]),
                       reverse=True)
    assert [float(r["total"]) for r in kids] == pytest.approx(
        [v for v in want_kids if v > 0][:len(kids)], abs=0.0505)
    # A search shows the paths to every call of the matching functions, opened, the calls
    # marked; the status line counts them as the tree does.
    q = "parseStatement"
    page.fill("#fg-search", q)
    _wait(page, "document.getElementById('fg-status').textContent.indexOf('calls') >= 0")
    hits = [n for n in range(len(tree.parent))
            if q.lower() in tree.functions[int(tree.function[n])].label().lower()
            and tree.total_ms[n] > 0]
    assert hits
    status = page.locator("#fg-status").text_content()
    assert f": {len(hits)} calls" in status, status
    rows = _rows(page)
    marked = [r for r in rows if r["hit"]]
    assert marked and all(q.lower() in r["name"].lower() for r in marked)
    # the first match is reached through open rows, one level deeper each
    first = rows.index(marked[0])
    assert [r["depth"] for r in rows[: first + 1]] == list(range(first + 1))
    assert all(r["open"] == "true" for r in rows[:first])
    assert page.errors == []
