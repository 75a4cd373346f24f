"""Console renderings of analysis results (rich tables and trees) and their JSON twins."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..analysis.calltree import CallTree
from ..analysis.diff import ProfileDiff
from ..analysis.profile import Summary
from ..meta import COUNTS_NOTE
from ..trace import NO_STACK_NAMES, GapCapping, Recording
from ..words import plural, printable
from .plain import TextOut, TextRenderer, plain_table
from .rows import (
    LOCATION_END,
    _pct,
    cell_len,
    elastic_widths,
    elide_cells,
    elide_location,
    elide_middle,
    fit_widths,
    lost_note,
    name_and_location,
    output_width,
    room_left,
    short_location,
    summary_rows,
    wrap_to,
)


def row_count(summary: Summary) -> int:
    """All rows a summary has: its keys and its no-JavaScript rows."""
    return len(summary.stats.keys) + len(summary.no_js)


def summary_json(summary: Summary, top: int | None, by: str, sort: str) -> dict:
    return {
        "by": by,
        "total_ms": round(summary.total_ms, 3),
        "total_samples": summary.total_samples,
        "lost_ms": round(summary.lost_ms, 3),
        **({"lost": capping_json(summary.capping)} if summary.capping else {}),
        # read from folded stacks: every *_ms is a sample count (1 ms a sample)
        **({"ms_are_sample_counts": True} if summary.counts_only else {}),
        "rows": summary_rows(summary, top, sort),
    }


def capping_json(capping: Sequence[GapCapping]) -> list[dict]:
    """`report --json`'s "lost": per track that lost time, the cap and what it cut."""
    return [
        {"gaps": c.gaps, "lost_ms": round(c.lost_ms, 3), "cap_ms": round(c.cap_ms, 3),
         "interval_ms": round(c.base_ms, 4), "floor": c.floor}
        for c in capping
    ]


def table_width(console: Console, wide: bool = False) -> int | None:
    """The width this console's tables are fitted to (`rows.output_width`)."""
    return output_width(console.width if console.is_terminal else None, wide)


class SummaryTable(TextRenderer):
    """`report`'s table of a Summary: self %, total %, self ms, total ms, function,
    location; plain numbers. Names and locations are elided in the middle to fit the
    terminal (`wide`: whole)."""

    def __init__(
        self,
        console: Console,
        top: int | None,
        by: str,
        title: str,
        sort: str = "self",
        wide: bool = False,
    ) -> None:
        super().__init__(console)
        self.top, self.by, self.title, self.sort, self.wide = top, by, title, sort, wide

    def draw(self, out: TextOut, summary: Summary) -> None:
        by = self.by
        rows = summary_rows(summary, self.top, self.sort)
        cwd = os.getcwd()
        headers = ["self %", "total %", "self ms", "total ms"]
        headers.append({"function": "function", "resource": "resource", "line": "function"}[by])
        if by != "resource":
            headers.append("location" if by == "function" else "line")
        cells = []
        for r in rows:
            name = short_location(r["name"], cwd) if by == "resource" else r["name"]
            line = [
                f"{r['self_pct']:.1f}",
                f"{r['total_pct']:.1f}",
                f"{r['self_ms']:.1f}",
                f"{r['total_ms']:.1f}",
                printable(name),
            ]
            if by != "resource":
                line.append(printable(short_location(r["location"], cwd)))
            cells.append(line)
        width = table_width(self.console, self.wide)
        table = plain_table()
        if by == "resource":
            # a --by resource row's name is a location
            fit = elastic_widths(cells, headers, (4,), width)
            texts = [(elide_cells(line, fit, {4: LOCATION_END})[4], "") for line in cells]
        else:
            # one column, so a row with no location gives its name that room too
            head, texts = name_and_location(
                [(line[4], line[5]) for line in cells], (headers[4], headers[5]),
                room_left([line[:4] for line in cells], headers[:4], width, 1),
            )
            headers = [*headers[:4], head]
        for i, h in enumerate(headers):
            table.add_column(h, justify="right" if i < 4 else "left", no_wrap=True)
        for r, line, (name, where) in zip(rows, cells, texts, strict=True):
            shown = Text(name)
            shown.append(where, style="dim")
            style = "italic dim" if r["name"] in NO_STACK_NAMES and not r["location"] else None
            table.add_row(*line[:4], shown, style=style)
        out.table(self.title, table)
        n = row_count(summary)
        hint = "" if len(rows) == n else " (--all shows every row)"
        samples = plural(summary.total_samples, "sample")
        lost = lost_note(summary.lost_ms, summary.capping)
        total = f"{summary.total_ms:.1f} ms"
        if summary.counts_only:
            total = COUNTS_NOTE
        out.print(
            f"[dim]{samples}, {escape(total)}{escape(lost)}; showing "
            f"{len(rows)} of {n} {escape(by)} rows{hint}[/dim]"
        )


def tree_title(rec: Recording, track: str | None) -> list[str]:
    """The lines above `report --tree`: the tracks it covers, as the table's title, and
    whether their trees were merged into one."""
    from .summary import trace_title

    lines = [trace_title(rec, track)]
    if track is None and len(rec.tracks) > 1:
        lines.append(
            f"{len(rec.tracks)} tracks merged into one tree (same call paths add up); "
            "--track NAME shows one"
        )
    return lines


def tree_lines(
    tree: CallTree, threshold_pct: float = 1.0, max_depth: int = 200, width: int | None = None
) -> list[str]:
    """pyinstrument-style text tree, pruned below threshold_pct of all time; what was
    pruned is counted at every level, roots included. With a `width`, each line's name and
    location are elided in the middle to fit it (`rows.fit_widths`)."""
    kids = tree.children()
    total = tree.total_time
    cut = total * threshold_pct / 100.0
    out: list[str] = []
    cwd = os.getcwd()

    def visit(node: int, prefix: str, last: bool, depth: int) -> None:
        fn = tree.functions[int(tree.function[node])]
        ms = float(tree.total_ms[node])
        branch = "└─ " if last else "├─ "
        head = f"{prefix}{branch}{_pct(ms, total):5.1f}% {ms:9.1f} ms  "
        name = printable(fn.label())
        # locations as the table shows them (file:// under the current directory, relative)
        loc = printable(short_location(fn.location(), cwd))
        if width is not None:
            room = width - cell_len(head) - (2 if loc else 0)
            wn, wl = fit_widths([cell_len(name), cell_len(loc)], room)
            name, loc = elide_middle(name, wn), elide_location(loc, wl)
        out.append(f"{head}{name}  {loc}".rstrip())
        if depth >= max_depth:
            return
        shown = [k for k in kids[node] if tree.total_ms[k] >= cut]
        shown.sort(key=lambda k: -tree.total_ms[k])
        # Paths with no time at all (a --focus or --exclude took all their samples) are not
        # rows, not even counted ones.
        hidden = sum(1 for k in kids[node] if 0 < tree.total_ms[k] < cut)
        child_prefix = prefix + ("   " if last else "│  ")
        for j, k in enumerate(shown):
            visit(k, child_prefix, j == len(shown) - 1 and not hidden, depth + 1)
        if hidden:
            hidden_ms = float(sum(tree.total_ms[k] for k in kids[node] if tree.total_ms[k] < cut))
            out.append(
                f"{child_prefix}└─ ({hidden} more below {threshold_pct:g}%: {hidden_ms:.1f} ms)"
            )

    all_roots = tree.roots()
    roots = [r for r in all_roots if tree.total_ms[r] >= cut]
    roots.sort(key=lambda r: -tree.total_ms[r])
    hidden = sum(1 for r in all_roots if 0 < tree.total_ms[r] < cut)
    for j, r in enumerate(roots):
        visit(r, "", j == len(roots) - 1 and not hidden, 1)
    if hidden:
        hidden_ms = float(sum(tree.total_ms[r] for r in all_roots if tree.total_ms[r] < cut))
        out.append(f"└─ ({hidden} more below {threshold_pct:g}%: {hidden_ms:.1f} ms)")
    return out


def rerun_note(tree: CallTree, threshold_pct: float = 1.0, max_depth: int = 200) -> str | None:
    """A line saying why a function the tree shows as a root is also shown under another
    root (`main` before and after an `await`: two separate runs of it), or None. Each root
    is one run of JavaScript the engine started (the script, then timers, callbacks and
    continuations after an await, from the event loop); a reader sees `main` twice and
    takes one for a mistake."""
    kids = tree.children()
    cut = tree.total_time * threshold_pct / 100.0
    where: dict[int, set[int]] = {}  # function -> the shown roots it is shown under
    at_root: set[int] = set()
    for r in tree.roots():
        if tree.total_ms[r] < cut:
            continue
        at_root.add(int(tree.function[r]))
        todo = [(r, 1)]
        while todo:
            node, depth = todo.pop()
            where.setdefault(int(tree.function[node]), set()).add(r)
            if depth < max_depth:
                todo.extend((k, depth + 1) for k in kids[node] if tree.total_ms[k] >= cut)
    again = sorted(
        (f for f in at_root if len(where[f]) > 1), key=lambda f: tree.functions[f].label()
    )
    if not again:
        return None
    names = ", ".join(
        f"{printable(tree.functions[f].label())} (under {len(where[f])} roots)" for f in again[:5]
    )
    return (
        f"note: {names}: each root is a separate run of JavaScript: the script's own, then "
        "each one the event loop starts later (a timer, a callback, the rest of an async "
        "function after an await)"
    )


class TreeText(TextRenderer):
    """`report --tree`: the title lines, then the pruned call tree (tree_lines), each line
    elided to the output's width."""

    def __init__(
        self,
        console: Console,
        rec: Recording,
        track: str | None,
        threshold_pct: float = 1.0,
        wide: bool = False,
    ) -> None:
        super().__init__(console)
        self.rec, self.track, self.threshold_pct, self.wide = rec, track, threshold_pct, wide

    def draw(self, out: TextOut, tree: CallTree) -> None:
        width = table_width(self.console, self.wide)
        lines = tree_title(self.rec, self.track) + tree_lines(
            tree, self.threshold_pct, width=width
        )
        note = rerun_note(tree, self.threshold_pct)
        if note is not None:
            lines += wrap_to(note, width)
        for i, line in enumerate(lines):
            bold = "bold" if i == 0 else None  # the title, as the tables have it
            # emoji=False: `app.js:1234:56` is not the emoji code `:1234:`
            out.print(
                line, markup=False, highlight=False, emoji=False, soft_wrap=True, style=bold
            )


def tree_json(tree: CallTree, threshold_pct: float = 0.0, max_depth: int = 200) -> list[dict]:
    kids = tree.children()
    cut = tree.total_time * threshold_pct / 100.0

    def node(i: int, depth: int) -> dict:
        fn = tree.functions[int(tree.function[i])]
        return {
            "name": fn.label(),  # as the table and the folded export name it
            "resource": fn.resource,
            "line": fn.line,
            "column": fn.column,
            "self_ms": round(float(tree.self_ms[i]), 3),
            "total_ms": round(float(tree.total_ms[i]), 3),
            "self_samples": int(tree.self_samples[i]),
            "total_samples": int(tree.total_samples[i]),
            "children": [
                node(k, depth + 1)
                for k in sorted(kids[i], key=lambda k: -tree.total_ms[k])
                if tree.total_ms[k] >= cut and depth < max_depth
            ],
        }

    roots = sorted(tree.roots(), key=lambda r: -tree.total_ms[r])
    return [node(r, 1) for r in roots if tree.total_ms[r] >= cut]


# ---- diff --------------------------------------------------------------------------------


def diff_rows(diff: ProfileDiff, top: int | None) -> list[dict]:
    """Rows for the diff table and for --json: times in ms and shares in percent, side by
    side, with their changes (ms and percentage points)."""
    rows = diff.rows if top is None else diff.rows[:top]
    out = []
    for r in rows:
        rel_self, rel_total = r.relative("self"), r.relative("total")
        row = {
            "name": r.key.label(),
            "resource": r.key.resource,
            "status": r.status or ("changed" if r.changed else "same"),
            "base_self_ms": round(r.base_self_ms, 3),
            "new_self_ms": round(r.new_self_ms, 3),
            "base_total_ms": round(r.base_total_ms, 3),
            "new_total_ms": round(r.new_total_ms, 3),
            "self_delta_ms": round(r.d_self_ms, 3),
            "total_delta_ms": round(r.d_total_ms, 3),
            "base_self_pct": round(r.base_self, 3),
            "new_self_pct": round(r.new_self, 3),
            "base_total_pct": round(r.base_total, 3),
            "new_total_pct": round(r.new_total, 3),
            "self_pp": round(r.d_self, 3),
            "total_pp": round(r.d_total, 3),
            # JSON has no infinity: a share that grew from nothing has no ratio.
            "self_rel_pct": None if math.isinf(rel_self) else round(rel_self, 2),
            "total_rel_pct": None if math.isinf(rel_total) else round(rel_total, 2),
        }
        if r.key.line is not None:
            # anonymous functions, and a name several functions of a script share, are
            # matched by their place too (analysis.diff.KeyRule)
            row["line"] = r.key.line
        if r.key.column is not None:
            row["column"] = r.key.column
        out.append(row)
    return out


def diff_json(diff: ProfileDiff, top: int | None) -> dict:
    return {
        "base_total_ms": round(diff.base_total_ms, 3),
        "new_total_ms": round(diff.new_total_ms, 3),
        "ranked_by": "self_delta_ms" if diff.rank == "ms" else "share",
        "functions": len(diff.rows),
        "rows": diff_rows(diff, top),
    }


def _change(v: float, text: str, eps: float) -> Text:
    # Slower (more time, a larger share) in red, faster in blue, as in the differential
    # flame graph.
    style = "red" if v > eps else "blue" if v < -eps else "dim"
    return Text(text, style=style)


def _no_stack(key: Any) -> bool:
    return key.resource is None and key.name in NO_STACK_NAMES


class DiffTable(TextRenderer):
    """`diff`'s table of a ProfileDiff: changes in ms and pp side by side, self ms in BASE
    and NEW, the function and its resource (elided in the middle to fit the terminal;
    `wide`: whole)."""

    def __init__(
        self, console: Console, top: int | None, title: str, wide: bool = False
    ) -> None:
        super().__init__(console)
        self.top, self.title, self.wide = top, title, wide

    def draw(self, out: TextOut, diff: ProfileDiff) -> None:
        cwd = os.getcwd()
        width = table_width(self.console, self.wide)
        headers = ["Δ self ms", "Δ self pp", "Δ total ms", "Δ total pp", "self ms", "function",
                   "resource"]
        rows = diff.rows if self.top is None else diff.rows[: self.top]
        cells = []
        for r in rows:
            tag = f"  [{r.status}]" if r.status else ""
            cells.append([
                f"{r.d_self_ms:+.1f}",
                f"{r.d_self:+.2f}",
                f"{r.d_total_ms:+.1f}",
                f"{r.d_total:+.2f}",
                f"{r.base_self_ms:.1f} → {r.new_self_ms:.1f}",
                printable(r.key.label()) + tag,
                "" if _no_stack(r.key) else printable(
                    short_location(r.key.resource or "(unknown)", cwd)
                ),
            ])
        fit = elastic_widths(cells, headers, (5, 6), width)
        table = plain_table()
        for i, h in enumerate(headers):
            table.add_column(h, justify="right" if i < 5 else "left", no_wrap=True)
        for r, line in zip(rows, cells, strict=True):
            tag = f"  [{r.status}]" if r.status else ""
            label = line[5][: len(line[5]) - len(tag)]
            where = line[6]
            if fit:
                label = elide_middle(label, max(fit[5] - cell_len(tag), 1))
                where = elide_location(where, fit[6])
            name = Text(label)
            if r.status:
                name.append(tag, style="bold red" if r.status == "new" else "bold blue")
            table.add_row(
                _change(r.d_self_ms, line[0], 0.05),
                _change(r.d_self, line[1], 0.005),
                _change(r.d_total_ms, line[2], 0.05),
                _change(r.d_total, line[3], 0.005),
                line[4],
                name,
                Text(where, style="dim"),
                style="italic dim" if _no_stack(r.key) else None,
            )
        out.table(self.title, table)
        order = "largest change in self ms first" if diff.rank == "ms" else "largest change first"
        # Wrapped to the table's width like the table itself (124 columns in one line).
        footer = (
            f"base {diff.base_total_ms:.1f} ms, new {diff.new_total_ms:.1f} ms (pp: "
            f"percentage points of all time); showing {len(rows)} of "
            f"{plural(len(diff.rows), 'function')}, {order}"
        )
        for line in wrap_to(footer, width):
            out.print(Text(line, style="dim"), soft_wrap=True)
