"""One renderer shape (issue 25): every renderer in render.base.RENDERERS is a Renderer
(`kind`, `extension`, `render(data) -> str | bytes`) and renders real data; `report`,
`diff`, `flame`, `fleet` and the collector's query routes draw through them."""

from __future__ import annotations

import importlib
import io as stdio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from rich.console import Console

from fleet_util import make_trace, upload
from jsprof import io
from jsprof.analysis.calltree import build_call_tree
from jsprof.analysis.diff import diff_profiles
from jsprof.analysis.profile import summarize
from jsprof.cli import main
from jsprof.render.base import MEDIA_TYPES, RENDERERS, Renderer
from jsprof.store import Store

EXTENSIONS = {"text": ".txt", "json": ".json", "html": ".html", "svg": ".svg"}
READ = "r" * 32


def _classes() -> dict[str, type]:
    out = {}
    for where in RENDERERS:
        module, name = where.split(":")
        out[name] = getattr(importlib.import_module(module), name)
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    st = Store(tmp_path_factory.mktemp("renderers") / "store")
    rng = np.random.default_rng(3)
    for rel, hot in (("1.0", None), ("1.1", "slowThing")):
        for i in range(5):
            upload(st, f"{rel}-{i}", make_trace(rng, 300, hot=hot, hot_share=0.2),
                   app="shop", release=rel, route="/cart", env="prod",
                   receivedAt=1.7e12 + i * 3600e3)
    yield st
    st.close()


def _console() -> Console:
    return Console(file=stdio.StringIO(), width=80, highlight=False)


def _instances(data: Path, store: Store) -> list[tuple[Renderer, Any]]:
    """Each renderer with its options and real data of the kind it draws."""
    from jsprof.budget import budget
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters
    from jsprof.fleet.regressions import regressions
    from jsprof.instrument import run_instrumented

    c = _classes()
    rec = io.load(data / "chromium" / "trace-basic.json")
    tree = build_call_tree(rec)
    methods = run_instrumented(data / "instrument" / "shapes.js", ["*"])
    f = Filters(app="shop")
    with api.session(store) as s:
        top = api.top(s, f, 10)
        vitals = api.vitals(s, f)
        inter = api.interactions(s, f)
        diff, _ = api.diff(s, f.with_side("release=1.0", "--base"),
                           f.with_side("release=1.1", "--new"), 10, [], 5, 1000)
        found = regressions(s, f, 2.0, 5, 1000)
    return [
        (c["JsonRenderer"](), {"a": [1, 2]}),
        (c["JsonRenderer"](indent=False), {"a": [1, 2]}),
        (c["FlameRenderer"]("html", title="t"), tree),
        (c["FlameRenderer"]("svg"), tree),
        (c["SummaryTable"](_console(), 5, "function", "t"), summarize(rec)),
        (c["DiffTable"](_console(), 5, "t"), diff_profiles(rec, rec)),
        (c["TreeText"](_console(), rec, None), tree),
        (c["MethodsTable"](_console(), "t"), [r.to_json() for r in methods.rows]),
        (c["HtmlTablePage"]("t", [("name", "function"), ("selfMs", "self ms")]), top["rows"]),
        (c["FleetTopTable"](_console(), "t"), top),
        (c["FleetDiffTable"](_console()), diff),
        (c["VitalsTable"](_console()), vitals),
        (c["InteractionsTable"](_console()), inter),
        (c["RegressionsText"](), found),
        (c["BudgetText"](), budget(data / "instrument" / "shapes.js", data / "instrument" /
                                   "shapes.js", min_rounds=2, max_rounds=2).json()),
    ]


def test_every_renderer_satisfies_the_protocol(data: Path, store: Store) -> None:
    made = _instances(data, store)
    assert {type(r).__name__ for r, _ in made} == set(_classes())  # none left out
    for renderer, doc in made:
        name = type(renderer).__name__
        assert isinstance(renderer, Renderer), name
        assert renderer.kind in MEDIA_TYPES, name
        assert renderer.extension == EXTENSIONS[renderer.kind], name
        assert renderer.media_type == MEDIA_TYPES[renderer.kind]
        out = renderer.render(doc)
        assert isinstance(out, (str, bytes)) and len(out) > 10, name
        if renderer.kind == "json":
            assert orjson.loads(out) == doc
        if renderer.kind in ("html", "svg"):
            assert out.lstrip().startswith(("<!doctype html", "<!DOCTYPE html", "<svg", "<?xml"))
        # Pure: rendering writes nothing, even for a console's renderer.
        console = getattr(renderer, "console", None)
        if console is not None:
            assert console.file.getvalue() == "", name


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the renderers whose render ran, in order."""
    seen: list[str] = []
    for name, cls in _classes().items():
        def spy(self: Any, data: Any, _real: Callable = cls.render, _name: str = name) -> Any:
            seen.append(_name)
            return _real(self, data)

        monkeypatch.setattr(cls, "render", spy)
    return seen


def test_report_diff_and_flame_draw_through_renderers(
    data: Path, tmp_path: Path, drawn: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(data / "chromium" / "trace-basic.json")
    for argv, want in (
        (["report", trace], ["SummaryTable"]),
        (["report", "--json", trace], ["JsonRenderer"]),
        (["report", "--tree", trace], ["TreeText"]),
        (["diff", trace, trace, "--flame", str(tmp_path / "d.html")],
         ["DiffTable", "FlameRenderer"]),
        (["diff", "--json", trace, trace], ["JsonRenderer"]),
        (["flame", trace, "-o", str(tmp_path / "f.svg")], ["FlameRenderer"]),
    ):
        drawn.clear()
        assert main(argv) == 0, argv
        assert drawn == want, argv
        assert capsys.readouterr().out or argv[0] == "flame"


def test_fleet_draws_through_renderers(
    store: Store, tmp_path: Path, drawn: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--store", str(store.path), "--app", "shop"]
    for argv, want in (
        (["fleet", "top", *where], ["FleetTopTable"]),
        (["fleet", "top", "--json", *where], ["JsonRenderer"]),
        (["fleet", "vitals", *where], ["VitalsTable"]),
        (["fleet", "interactions", *where], ["InteractionsTable"]),
        (["fleet", "diff", *where, "--base", "release=1.0", "--new", "release=1.1",
          "--flame", str(tmp_path / "d.svg")], ["FlameRenderer", "FleetDiffTable"]),
        (["fleet", "flame", *where, "-o", str(tmp_path / "f.html")], ["FlameRenderer"]),
        (["fleet", "regressions", *where], ["RegressionsText"]),
    ):
        drawn.clear()
        assert main(argv) == (1 if argv[1] == "regressions" else 0), argv  # 1: one found
        assert drawn == want, argv
    capsys.readouterr()


def test_the_collector_draws_through_renderers(store: Store, drawn: list[str]) -> None:
    from jsprof.serve.app import create_app
    from jsprof.serve.config import ServeConfig
    from serve_util import asgi_call

    app = create_app(ServeConfig(store=str(store.path), read_token=READ), store)
    auth = {"authorization": f"Bearer {READ}"}
    for path, want, media in (
        ("/v1/query/top?app=shop&format=html", ["HtmlTablePage"], "text/html"),
        ("/v1/query/top?app=shop", ["JsonRenderer"], "application/json"),
        ("/v1/query/vitals?app=shop&format=html", ["HtmlTablePage"], "text/html"),
        ("/v1/query/diff?app=shop&base=release=1.0&new=release=1.1&format=html",
         ["HtmlTablePage"], "text/html"),
        ("/v1/query/flame?app=shop&format=svg", ["FlameRenderer"], "image/svg+xml"),
    ):
        drawn.clear()
        status, headers, body = asgi_call(app, "GET", path, headers=auth)
        assert status == 200, (path, body[:200])
        assert headers["content-type"].startswith(media), path
        assert drawn == want, path
        if "diff" in path:  # by how much, relatively too (#33): slowThing is new in 1.1
            assert ">\u0394 self</th>".encode() in body and b">new</td>" in body, body[:2000]


def test_the_html_table_shows_bidi_controls_as_escapes() -> None:
    """The collector's ?format=html table: a name holding U+202E is shown as "\\u202e"
    (it drew reversed: 'admin\\u202enimda' read 'adminadmin'), beside the page's other
    escaping; the flame pages' views are checked in Chromium (test_flame.py)."""
    from jsprof.render.html import HtmlTablePage

    out = HtmlTablePage("t", [("name", "function")]).render(
        [{"name": "admin\u202enimda<b>"}, {"name": "\u2066x\u2069"}])
    assert "admin\\u202enimda&lt;b&gt;" in out and "\\u2066x\\u2069" in out
    assert not any(c in out for c in "\u202e\u2066\u2069")
