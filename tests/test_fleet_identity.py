"""One function across releases (#33): scripts served as `/static/<version>/page.html`,
`page.<hash>.html` or `page.html?v=...` are one script in every fleet view (top, flame,
the collector's routes the dashboard reads, regressions), by the rule of
`jsprof.fleet.releases`; `--url-rule` adds to it or turns it off."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import orjson
import pytest

from fleet_util import jittered_store
from jsprof.cli import main
from serve_util import READ_TOKEN, Collector

SLOWER = {"1.9.0": 1.0, "1.10.0": 1.5, "1.11.0": 1.5}


def _served(rel: str, url: str) -> str:
    """Where each release serves a script: a version folder, a content hash, a buster."""
    path, q, query = url.partition("?")  # the recorded page's own ?exp=... kept
    head, _, name = path.rpartition("/")
    stem, _, ext = name.rpartition(".")
    return {"1.9.0": f"{head}/static/1.9.0/{name}{q}{query}",
            "1.10.0": f"{head}/static/{stem}.3f2a1c9b.{ext}{q}{query}",
            "1.11.0": f"{head}/static/{name}?v=1.11.0"}[rel]


def _dated(rel: str, url: str) -> str:
    """A scheme the default rule does not know: a dated build folder."""
    head, _, name = url.rpartition("/")
    return f"{head}/build-2026-11-{ {'1.9.0': 24, '1.10.0': 25, '1.11.0': 26}[rel]}/{name}"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("identity")
    return (jittered_store(root / "served", 1, SLOWER, url=_served),
            jittered_store(root / "dated", 1, SLOWER, url=_dated))


def _json(capsys, argv: list[str], code: int = 0) -> dict:
    assert main(argv) == code, capsys.readouterr().err
    return orjson.loads(capsys.readouterr().out)


def _rows(doc: dict, name: str) -> list[dict]:
    return [r for r in doc["rows"] if r["name"] == name]


def test_all_releases_top_lists_a_function_once(stores, capsys) -> None:
    served, _ = stores
    top = ["fleet", "top", "--store", str(served), "--app", "shop", "--top", "100", "--json"]
    doc = _json(capsys, top)
    (row,) = _rows(doc, "jsonWork")
    assert row["resource"] == "http://127.0.0.1:8000/static/page.html", row
    assert row["traces"] == 36  # every page load (12 a release) runs it
    # Each release alone names it alike, and the three add up to the merged row.
    per = [_rows(_json(capsys, [*top, "--release", r]), "jsonWork")[0] for r in SLOWER]
    assert {r["resource"] for r in per} == {row["resource"]}
    assert abs(sum(r["selfMs"] for r in per) - row["selfMs"]) < 1e-2
    # As recorded (--url-rule none): once per release, as the issue saw it.
    raw = _json(capsys, [*top, "--url-rule", "none"])
    assert len(_rows(raw, "jsonWork")) == 3
    assert {r["resource"] for r in _rows(raw, "jsonWork")} == {
        "http://127.0.0.1:8000/static/1.9.0/page.html?exp=builtins",
        "http://127.0.0.1:8000/static/page.3f2a1c9b.html?exp=builtins",
        "http://127.0.0.1:8000/static/page.html?v=1.11.0"}


def test_a_rule_of_ones_own_for_another_scheme(stores, capsys) -> None:
    _, dated = stores
    top = ["fleet", "top", "--store", str(dated), "--app", "shop", "--top", "100", "--json"]
    assert len(_rows(_json(capsys, top), "jsonWork")) == 3  # the default does not know it
    doc = _json(capsys, [*top, "--url-rule", "/build-[0-9-]+/=/"])
    (row,) = _rows(doc, "jsonWork")
    assert row["resource"] == "http://127.0.0.1:8000/page.html"
    # A rule that is not one: one line, exit 2.
    assert main([*top, "--url-rule", "([a-z]=x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jsprof: error: --url-rule '([a-z]=x' (number 1): ") and "\n" not in err


def test_flame_and_regressions_see_one_function(stores, capsys, tmp_path: Path) -> None:
    from jsprof.analysis.calltree import build_call_tree
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters
    from jsprof.fleet.regressions import regressions

    served, _ = stores
    with api.session(api.open_store(served)) as s:
        tree = build_call_tree(api.recording(s, Filters(app="shop")))
        fns = [k for k in tree.functions if k.name == "jsonWork"]
        assert len(fns) == 1 and fns[0].resource == "http://127.0.0.1:8000/static/page.html"
        raw = build_call_tree(api.recording(s, Filters(app="shop", url_rules=("none",))))
        assert len([k for k in raw.functions if k.name == "jsonWork"]) == 3
        doc = regressions(s, Filters(app="shop"))
    (reg,) = doc["regressions"]
    assert (reg["name"], reg["resource"], reg["release"]) == (
        "jsonWork", "http://127.0.0.1:8000/static/page.html", "1.10.0")
    # The flame page draws one jsonWork too.
    out = tmp_path / "f.html"
    assert main(["fleet", "flame", "--store", str(served), "--app", "shop", "-o",
                 str(out)]) == 0
    assert out.read_text().count("static/1.9.0/page.html") == 0


def test_the_collectors_routes_name_scripts_alike(stores) -> None:
    # What the dashboard reads: the top route gives one row; url_rule= is the CLI's rule.
    served, _ = stores
    col = Collector(served, "--app", "shop:k1")
    try:
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}

        def get(**q: str) -> tuple[int, dict]:
            status, _, body = col.request("GET", f"/v1/query/top?{urlencode(q)}",
                                          headers=auth)
            return status, orjson.loads(body)

        status, doc = get(app="shop", top="100")
        assert status == 200 and len(_rows(doc, "jsonWork")) == 1
        status, doc = get(app="shop", top="100", url_rule="none")
        assert status == 200 and len(_rows(doc, "jsonWork")) == 3
        status, doc = get(app="shop", url_rule="(=x")
        assert status == 400 and "query parameter url_rule" in doc["error"], doc
    finally:
        col.stop()
