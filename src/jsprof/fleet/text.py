"""Console tables for the fleet documents (the same documents `--json` prints)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from ..render.plain import plain_table, print_plain_table
from ..render.summary import pipe_errors_raise
from ..trace import NO_STACK_NAMES
from ..words import plural, printable


def _console() -> Console:
    return pipe_errors_raise(
        Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    )


def _loc(r: dict) -> str:
    parts = [r["resource"] or "(unknown)"]
    if r.get("line") is not None:
        parts.append(str(r["line"]))
        if r.get("column") is not None:
            parts.append(str(r["column"]))
    return ":".join(parts)


def _ms(v: float | None) -> str:
    return "" if v is None else f"{v:.1f}"


def print_top(doc: dict, title: str) -> None:
    c = _console()
    t = plain_table()
    for col in ("self %", "total %", "self ms", "total ms", "traces", "p50 self", "p95 self"):
        t.add_column(col, justify="right")
    t.add_column("function")
    t.add_column("location", overflow="fold")
    for r in doc["rows"]:
        idle = r["resource"] is None and r["name"] in NO_STACK_NAMES
        t.add_row(
            f"{r['selfPct']:.1f}", f"{r['totalPct']:.1f}", _ms(r["selfMs"]), _ms(r["totalMs"]),
            str(r["traces"]), _ms(r["p50SelfMs"]), _ms(r["p95SelfMs"]),
            Text(printable(r["name"] or "(anonymous)")),
            Text("" if idle else printable(_loc(r)), style="dim"),
            style="italic dim" if idle else None,
        )
    print_plain_table(c, title, t)
    from ..render.console import lost_note

    c.print(f"[dim]{plural(doc['traces'], 'trace')}, {plural(doc['samples'], 'sample')}, "
            f"{doc['totalMs']:.1f} ms{lost_note(doc.get('lostMs') or 0.0)}; "
            f"{plural(doc.get('pageLoads', doc['traces']), 'page load')}[/dim]")
    if doc.get("during"):
        c.print(f"[dim]only samples during {doc['during']} windows; "
                f"{doc.get('attributedMs') or 0.0:.1f} ms of samples whose stack the browser "
                "did not capture charged to the long animation frame's script entry point, "
                "under (stack not captured)[/dim]")


def _pp(v: float | None) -> Text:
    if v is None:
        return Text("")
    style = "red" if v > 0.005 else "blue" if v < -0.005 else "dim"
    return Text(f"{v:+.2f}", style=style)


def _ci(iv: list | None) -> str:
    return "" if iv is None else f"[{iv[0]:+.2f}, {iv[1]:+.2f}]"


def print_diff(doc: dict) -> None:
    c = _console()
    new, base = doc["new"], doc["base"]
    title = (f"{new['filters']} ({plural(new['traces'], 'trace')}) vs "
             f"{base['filters']} ({plural(base['traces'], 'trace')}): change in share of "
             "all time, percentage points, with 95% intervals from resampling traces")
    t = plain_table()
    for col in ("Δ self pp", "95% interval", "Δ total pp", "95% interval", "self %", "total %"):
        t.add_column(col, justify="right")
    t.add_column("function")
    t.add_column("resource", overflow="fold")
    for r in doc["rows"]:
        name = Text(printable(r["name"] or "(anonymous)"))
        if r["status"] in ("new", "removed"):
            name.append(f"  [{r['status']}]", style="bold red" if r["status"] == "new"
                        else "bold blue")
        t.add_row(
            _pp(r["selfPp"]), _ci(r["selfPpCi"]), _pp(r["totalPp"]), _ci(r["totalPpCi"]),
            f"{r['baseSelfPct']:.1f} → {r['newSelfPct']:.1f}",
            f"{r['baseTotalPct']:.1f} → {r['newTotalPct']:.1f}",
            name, Text(printable(r["resource"] or "(unknown)"), style="dim"),
        )
    print_plain_table(c, title, t)
    c.print(f"[dim]showing {len(doc['rows'])} of {plural(doc['functions'], 'function')}, "
            "largest change first[/dim]")
