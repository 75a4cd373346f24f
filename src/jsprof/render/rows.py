"""The rows of the function table as plain data (no rich): `jsprof record`'s short summary
prints them without importing rich when stderr is not a terminal."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlparse

from ..analysis.profile import FunctionKey, LineKey, Summary


def _pct(x: float, total: float) -> float:
    return 100.0 * x / total if total > 0 else 0.0


def key_label(key: Any) -> tuple[str, str]:
    """(what, where) for a function, resource or line key."""
    if isinstance(key, LineKey):
        where = key.function.resource or "(unknown)"
        if not key.line:
            return key.function.label(), f"{where} (line unknown)"
        return key.function.label(), f"{where}:{key.line}"
    if isinstance(key, FunctionKey):
        return key.label(), key.location()
    return (key or "(no resource)"), ""


def short_location(where: str, cwd: str | None = None) -> str:
    """A `file://` URL or absolute path under the current directory, relative to it
    (`file:///home/me/app/src/a.js:3:5` -> `src/a.js:3:5` in /home/me/app); else as is."""
    path = where
    if where.startswith("file://"):
        path = unquote(urlparse(where).path)
    if not path.startswith("/"):
        return where
    cwd = cwd if cwd is not None else os.getcwd()
    prefix = cwd.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def summary_rows(summary: Summary, top: int | None, sort: str = "self") -> list[dict]:
    """Rows for the table and for --json, largest first by `sort`: the keys and the
    no-JavaScript rows together (idle time is ranked and counted like any function)."""
    st = summary.stats
    total = summary.total_ms
    rows = []
    for i in st.order(sort).tolist():
        what, where = key_label(st.keys[i])
        row = {
            "name": what,
            "location": where,
            "self_ms": round(float(st.self_ms[i]), 3),
            "total_ms": round(float(st.total_ms[i]), 3),
            "self_pct": round(_pct(float(st.self_ms[i]), total), 2),
            "total_pct": round(_pct(float(st.total_ms[i]), total), 2),
            "self_samples": int(st.self_samples[i]),
            "total_samples": int(st.total_samples[i]),
        }
        key = st.keys[i]
        if isinstance(key, FunctionKey):
            row.update(resource=key.resource, line=key.line, column=key.column)
        elif isinstance(key, LineKey):
            row.update(resource=key.function.resource, line=key.line or None)
        rows.append(row)
    for r in summary.no_js:
        rows.append(
            {
                "name": r.label,
                "location": "",
                "self_ms": round(r.ms, 3),
                "total_ms": round(r.ms, 3),
                "self_pct": round(_pct(r.ms, total), 2),
                "total_pct": round(_pct(r.ms, total), 2),
                "self_samples": r.samples,
                "total_samples": r.samples,
            }
        )
    key = "self_ms" if sort == "self" else "total_ms"
    rows.sort(key=lambda r: -r[key])  # stable: equal shares keep the analysis's order
    return rows if top is None else rows[:top]
