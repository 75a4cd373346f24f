"""A query's rows as a small HTML page (the collector's `?format=html`): one table, its
cells escaped (trace content is data; bidirectional controls shown as escapes), names and
resources left-aligned, notes below."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from .base import Renderer, visible

# Columns of text, left-aligned; the rest are numbers.
TEXT_COLUMNS = frozenset({"name", "resource"})


class HtmlTablePage(Renderer):
    """`render(rows)`: a page titled `title` with one table of `cols` ((key, header) pairs)
    over the row mappings, then `notes` as paragraphs."""

    kind = "html"
    extension = ".html"

    def __init__(
        self, title: str, cols: Sequence[tuple[str, str]], notes: Sequence[str] = ()
    ) -> None:
        self.title, self.cols, self.notes = title, list(cols), list(notes)

    def _table(self, rows: Sequence[dict[str, Any]]) -> str:
        def cls(k: str) -> str:
            return "l" if k in TEXT_COLUMNS else ""

        head = "".join(f"<th class='{cls(k)}'>{html.escape(t)}</th>" for k, t in self.cols)
        out = [f"<table><tr>{head}</tr>"]
        for r in rows:
            cells = []
            for k, _ in self.cols:
                v = r.get(k)
                cells.append(
                    f"<td class='{cls(k)}'>{html.escape(visible('' if v is None else str(v)))}</td>"
                )
            out.append(f"<tr>{''.join(cells)}</tr>")
        out.append("</table>")
        return "".join(out)

    def render(self, rows: Sequence[dict[str, Any]]) -> str:
        body = self._table(rows) + "".join(f"<p>{html.escape(x)}</p>" for x in self.notes)
        return (
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(self.title)}</title><style>body{{font:13px system-ui,"
            "sans-serif}td,th{padding:2px 8px;text-align:right}td.l,th.l{text-align:left}"
            f"</style></head><body><h3>{html.escape(self.title)}</h3>{body}</body></html>"
        )
