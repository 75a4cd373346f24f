"""One shape for every renderer (as pyinstrument's): an object with `render(data) -> str |
bytes`, the `kind` of output it makes and that output's file `extension`. `report`, `diff`,
`instrument`, `fleet` and `serve` draw through renderers and only decide where the output
goes (`emit` for stdout, a file, an HTTP response).

The renderers (`RENDERERS`, named "module:Class" and imported on use, as the engine
registry does; tests/test_renderers.py holds each to the protocol):
  JsonRenderer        any JSON document (CLI: indented, one line ending; HTTP: compact)
  FlameRenderer       a call tree as a flame graph page (html) or picture (svg)
  SummaryTable, DiffTable, TreeText     report's and diff's text (render/console.py)
  MethodsTable        instrument's rows and per-class subtotals (render/methods.py)
  FleetTopTable, FleetDiffTable, VitalsTable, InteractionsTable, RegressionsText
                      fleet's text (fleet/text.py)
  BudgetText          budget's verdict and the functions that changed (render/budget.py)
  HtmlTablePage       a query's rows as a small HTML page (render/html.py, for serve)
The text renderers fit their tables by one rule (render/rows.py: width, elision).

Stdlib only at import: `jsprof --help` and the JSON paths load nothing else.
"""

from __future__ import annotations

import sys

from ..errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any, TextIO

# Bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE, the embeddings, the isolates
# U+2066-2069, the marks) reorder the text after them: a name holding one is drawn reversed
# and can pass for another. Trace content is hostile, so what a page or picture shows writes
# them as escapes ("\u202e"); flame.js's `vis` and dashboard.js's are the same rule, and the
# data (JSON, search) keeps the exact names.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"


def visible(s: str) -> str:
    """`s` with each bidirectional control written as its escape (\\u202e)."""
    import re

    return re.sub(f"[{BIDI_CONTROLS}]", lambda m: f"\\u{ord(m.group()):04x}", s)


# What a renderer's `kind` may be, and the media type each is served as.
MEDIA_TYPES = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
    "html": "text/html; charset=utf-8",
    "svg": "image/svg+xml",
}

RENDERERS = (
    "jsprof.render.base:JsonRenderer",
    "jsprof.render.flame:FlameRenderer",
    "jsprof.render.console:SummaryTable",
    "jsprof.render.console:DiffTable",
    "jsprof.render.console:TreeText",
    "jsprof.render.methods:MethodsTable",
    "jsprof.render.html:HtmlTablePage",
    "jsprof.fleet.text:FleetTopTable",
    "jsprof.fleet.text:FleetDiffTable",
    "jsprof.fleet.text:VitalsTable",
    "jsprof.fleet.text:InteractionsTable",
    "jsprof.fleet.text:RegressionsText",
    "jsprof.render.budget:BudgetText",
)


class Renderer:
    """The protocol, written as the base every renderer derives from (so the test can find
    them all): `kind` (a MEDIA_TYPES key), `extension` (".json", ".html", ...) and
    `render(data)`. A renderer holds its options; `render` is pure (no output written)."""

    kind: str = ""
    extension: str = ""

    def render(self, data: Any) -> str | bytes:
        raise NotImplementedError

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.kind]


class JsonRenderer(Renderer):
    """A JSON document: indented with one line ending for people (the CLI's --json), or
    compact for machines (the HTTP API)."""

    kind = "json"
    extension = ".json"

    def __init__(self, indent: bool = True) -> None:
        self.indent = indent

    def render(self, data: Any) -> bytes:
        import orjson

        if not self.indent:
            return orjson.dumps(data)
        return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def flame_kind(path: str) -> str:
    """The flame graph's kind for an output name ("svg" or "html"), or a UsageError: the
    one check `jsprof flame`, `diff --flame` and `fleet flame/diff` make before any work."""
    low = path.lower()
    if low.endswith(".svg"):
        return "svg"
    if low.endswith((".html", ".htm")):
        return "html"
    raise UsageError(f"{path}: a flame graph is written as .html or .svg; use one of those")


def emit(renderer: Renderer, data: Any, file: TextIO | None = None) -> None:
    """Render `data` to stdout (or `file`; a text renderer's own console's file by default,
    which is stdout unless the console was made for another stream)."""
    out = renderer.render(data)
    if file is None:
        console = getattr(renderer, "console", None)
        file = console.file if console is not None else sys.stdout
    if isinstance(out, bytes):
        file.flush()
        file.buffer.write(out)  # type: ignore[union-attr]
        file.buffer.flush()  # type: ignore[union-attr]
    else:
        file.write(out)
        file.flush()


def print_json(obj: Any) -> None:
    """`--json` of every command: indented, one line ending, on stdout."""
    emit(JsonRenderer(), obj)
