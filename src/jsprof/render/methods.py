"""The instrumenting profiler's report: rows by self time, then per-class subtotals.

Takes the rows as plain mappings (the `-o` JSON row objects: class, method, calls,
total_ms, self_ms, mean_ms, max_ms, optional instance/sync_ms), so rendering needs
nothing from the instrumenting machinery.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console

from ..words import plural, printable
from .plain import TextOut, TextRenderer, plain_table


def _ms(x: float) -> str:
    return f"{x:.3f}"


def row_label(row: Mapping[str, Any]) -> str:
    inst = row.get("instance")
    cls = row["class"] if inst is None else f"{row['class']}#{inst}"
    return printable(f"{cls}.{row['method']}")


def class_subtotals(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per class: calls and self time summed (self times add up without double counting;
    totals do not, since one method's total contains another's), by self time."""
    acc: dict[str, dict[str, Any]] = {}
    for r in rows:
        a = acc.setdefault(
            r["class"], {"class": r["class"], "methods": 0, "calls": 0, "self_ms": 0.0}
        )
        a["methods"] += 1
        a["calls"] += r["calls"]
        a["self_ms"] += r["self_ms"]
    return sorted(acc.values(), key=lambda a: -a["self_ms"])


def nothing_ran(
    script: str, watch: Sequence[str], classes: Sequence[Mapping[str, Any]]
) -> str:
    """The one line when no watched method ran, saying why from what the run created
    (`classes`: the runtime's {name, watched}): no class at all, none of the names given,
    or watched classes whose methods were not called."""
    names = sorted({str(c.get("name")) for c in classes if c.get("name")})
    shown = printable(", ".join(names[:20])) + (", ..." if len(names) > 20 else "")
    if not classes:
        return (
            f"no watched method ran: {printable(script)} created no class (instrument "
            "watches the methods of classes; jsprof record profiles any function)"
        )
    watched = sorted({str(c.get("name")) for c in classes if c.get("watched")})
    if not watched:
        return (
            f"no watched method ran: no class named {printable(', '.join(watch))} was "
            f"created (classes created: {shown}); check the --watch names"
        )
    return (
        f"no watched method ran: no method of {printable(', '.join(watched[:20]))} was "
        "called while the script ran"
    )


class MethodsTable(TextRenderer):
    """`instrument`'s report: the rows (sorted by self time), then the per-class
    subtotals. `empty` is the line said when there are no rows."""

    def __init__(
        self,
        console: Console,
        title: str,
        top: int | None = None,
        empty: str = "no watched method ran (check the --watch names)",
    ) -> None:
        super().__init__(console)
        self.title, self.top, self.empty = title, top, empty

    def draw(self, out: TextOut, rows: Sequence[Mapping[str, Any]]) -> None:
        top = self.top
        ordered = sorted(rows, key=lambda r: -r["self_ms"])
        shown = ordered if top is None else ordered[:top]
        t = plain_table()
        t.add_column("Class.method", overflow="fold")
        t.add_column("kind")
        for name in ("calls", "self ms", "total ms", "mean ms", "max ms"):
            t.add_column(name, justify="right")
        for r in shown:
            t.add_row(
                row_label(r),
                r.get("kind", ""),
                str(r["calls"]),
                _ms(r["self_ms"]),
                _ms(r["total_ms"]),
                _ms(r["mean_ms"]),
                _ms(r["max_ms"]),
            )
        if not rows:
            out.print(self.empty, markup=False)
            return
        out.table(self.title, t)
        if len(shown) < len(ordered):
            more = plural(len(ordered) - len(shown), "more row")
            out.print(f"... {more} (--all shows them)", markup=False)
        s = plain_table()
        s.add_column("class")
        for name in ("methods", "calls", "self ms"):
            s.add_column(name, justify="right")
        for a in class_subtotals(rows):
            s.add_row(printable(a["class"]), str(a["methods"]), str(a["calls"]), _ms(a["self_ms"]))
        out.print()
        out.table("per class", s)
        if any(r.get("sync_ms") is not None for r in rows):
            out.print(
                "async methods: total/mean/max run until the promise settles; self is the "
                "synchronous part",
                markup=False,
            )
