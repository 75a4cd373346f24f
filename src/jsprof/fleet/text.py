"""Console tables for the fleet documents (the same documents `--json` prints): the text
renderers of `fleet top`, `fleet diff` and `fleet vitals`, drawn on the house console
(render.summary.stdout_console: no wrapping when piped), fitted to
`render.rows.output_width` themselves as `jsprof report`'s tables are."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..render.base import Renderer
from ..render.console import lost_note, table_width
from ..render.plain import TextOut, TextRenderer, plain_table
from ..render.rows import (
    elastic_widths,
    elide_cells,
    elide_location,
    elide_middle,
    name_and_location,
    room_left,
    wrap_to,
)
from ..trace import NO_STACK_NAMES, anonymous_label
from ..words import plural, printable


def _title(title: str, width: int | None) -> str:
    return "\n".join(wrap_to(title, width))


def _note(out: TextOut, text: str, width: int | None) -> None:
    """A dim footer line, wrapped to the table's width; client data, so never markup."""
    for line in wrap_to(text, width):
        out.print(Text(line, style="dim"), soft_wrap=True)


def _loc(r: dict) -> str:
    parts = [r["resource"] or "(unknown)"]
    if r.get("line") is not None:
        parts.append(str(r["line"]))
        if r.get("column") is not None:
            parts.append(str(r["column"]))
    return ":".join(parts)


def _where(r: dict) -> str:
    """A row's location; the rows of busy time without a stack have none, and say so: the
    entry points `(stack not captured)` is charged to (shares of its self time), the long
    frame for the others (what each means: the note under the table)."""
    if not r.get("why"):
        return _loc(r)
    eps = r.get("entryPoints")
    if eps is None:
        return "(no stack: in long animation frames)"
    own = r["selfMs"] or 0.0
    parts = [f"{e['label']} {100.0 * e['ms'] / own:.0f}%" if own > 0 else e["label"]
             for e in eps]
    if r.get("otherEntryPointsMs"):
        parts.append(f"others {100.0 * r['otherEntryPointsMs'] / own:.0f}%" if own > 0
                     else "others")
    return "(no stack) under " + ", ".join(parts) if parts else "(no stack)"


def _name(r: dict) -> str:
    # The one label every output gives a function (FunctionKey.label): an anonymous one is
    # `(anonymous page.html:445)`, as `jsprof report` and `fleet flame` print it.
    return r.get("label") or r["name"] or anonymous_label(r.get("resource"), r.get("line"))


def _ms(v: float | None) -> str:
    return "" if v is None else f"{v:.1f}"


class FleetTopTable(TextRenderer):
    """`fleet top`'s table of a top document (what `--json` prints)."""

    def __init__(self, console: Console, title: str, wide: bool = False) -> None:
        super().__init__(console)
        self.title, self.wide = title, wide

    def draw(self, out: TextOut, doc: dict) -> None:
        width = table_width(self.console, self.wide)
        headers = ["self %", "total %", "self ms", "total ms", "traces", "p50 self",
                   "p95 self"]
        cells = []
        pairs = []
        for r in doc["rows"]:
            idle = r["resource"] is None and r["name"] in NO_STACK_NAMES
            cells.append([
                f"{r['selfPct']:.1f}", f"{r['totalPct']:.1f}", _ms(r["selfMs"]),
                _ms(r["totalMs"]), str(r["traces"]), _ms(r["p50SelfMs"]), _ms(r["p95SelfMs"]),
            ])
            pairs.append((printable(_name(r)), "" if idle else printable(_where(r))))
        # function and location as `jsprof report` lays them out: one column, so a row with
        # no location gives its name that room too (`(garbage collector)` was cut to half)
        head, names = name_and_location(pairs, ("function", "location"),
                                        room_left(cells, headers, width, 1))
        t = plain_table()
        for i, h in enumerate([*headers, head]):
            t.add_column(h, justify="right" if i < 7 else "left", no_wrap=True)
        for r, line, (name, where) in zip(doc["rows"], cells, names, strict=True):
            idle = r["resource"] is None and r["name"] in NO_STACK_NAMES
            shown = Text(name)
            shown.append(where, style="dim")
            t.add_row(*line, shown, style="italic dim" if idle else None)
        out.table(_title(self.title, width), t)
        _note(out, f"{plural(doc['traces'], 'trace')}, {plural(doc['samples'], 'sample')}, "
              f"{doc['totalMs']:.1f} ms{lost_note(doc.get('lostMs') or 0.0)}; "
              f"{page_loads(doc)}", width)
        if "excludedIdleMs" in doc:
            _note(out, idle_note(doc["excludedIdleMs"], doc["excludedIdleSamples"]), width)
        for r in doc["rows"]:
            if r.get("why"):
                _note(out, f"{r['name']}: {r['why']}", width)
        if doc.get("during"):
            _note(out, f"only samples during {doc['during']} windows; "
                  f"{doc.get('attributedMs') or 0.0:.1f} ms of samples whose stack the browser "
                  "did not capture charged to the long animation frame's script entry point, "
                  "under (stack not captured)", width)


def page_loads(doc: dict) -> str:
    """A document's page loads, marked as the estimate they are when a rollup cell past
    4,096 page loads gave them (a HyperLogLog sketch, `store/tables/rollup.py`)."""
    n = plural(doc.get("pageLoads", doc["traces"]), "page load")
    if not doc.get("pageLoadsEstimated"):
        return n
    from ..store.tables.view import HLL_ERROR

    return f"~{n} (estimated: standard error {100 * HLL_ERROR:.1f} %)"


def idle_note(ms: float, samples: int) -> str:
    """What --exclude-idle left out, in one phrase (the top table's note)."""
    return (f"--exclude-idle: {ms:.1f} ms of (idle) and (program) samples left out "
            f"({plural(samples, 'sample')}; not in the totals or shares)")


def _pp(v: float | None) -> Text:
    if v is None:
        return Text("")
    style = "red" if v > 0.005 else "blue" if v < -0.005 else "dim"
    return Text(f"{v:+.2f}", style=style)


def _ci(iv: list | None) -> str:
    return "" if iv is None else f"[{iv[0]:+.2f}, {iv[1]:+.2f}]"


def rel_change(r: dict) -> str:
    """A diff row's relative change of its self share: `+47%`, `new`, `-100%`."""
    if r["status"] == "new":
        return "new"
    if not (r["baseSelfPct"] or r["newSelfPct"]):
        return ""  # no self time on either side: no change to speak of
    v = r.get("selfRelPct")
    return "" if v is None else f"{v:+.0f}%"


class FleetDiffTable(TextRenderer):
    """`fleet diff`'s table of a diff document (what `--json` prints)."""

    def __init__(self, console: Console, wide: bool = False) -> None:
        super().__init__(console)
        self.wide = wide

    def draw(self, out: TextOut, doc: dict) -> None:
        width = table_width(self.console, self.wide)
        new, base = doc["new"], doc["base"]
        title = (f"{new['filters']} ({plural(new['traces'], 'trace')}) vs "
                 f"{base['filters']} ({plural(base['traces'], 'trace')}): change in share of "
                 "all time, percentage points, with 95% intervals from resampling traces")
        headers = ["Δ self pp", "95% interval", "Δ self", "Δ total pp", "95% interval",
                   "self %", "total %", "function", "resource"]
        # Within a width limit the total-share columns and the total's interval (in --json
        # and --wide) make room for the names: with them a 100-column table left a function
        # 2-3 characters beside its `[new]` tag (`slo…ng  [new]`: the very row a gate is about).
        keep = list(range(9)) if width is None else [0, 1, 2, 5, 7, 8]
        cells = []
        for r in doc["rows"]:
            tag = f"  [{r['status']}]" if r["status"] in ("new", "removed") else ""
            line = [
                _pp(r["selfPp"]).plain, _ci(r["selfPpCi"]), rel_change(r), _pp(r["totalPp"]).plain,
                _ci(r["totalPpCi"]), f"{r['baseSelfPct']:.1f} → {r['newSelfPct']:.1f}",
                f"{r['baseTotalPct']:.1f} → {r['newTotalPct']:.1f}",
                # time with no JavaScript has no script: blank, as in `fleet top` and
                # `jsprof diff` (it said "(unknown)", as a native function does)
                printable(_name(r)) + tag,
                "" if r["resource"] is None and r["name"] in NO_STACK_NAMES
                else printable(r["resource"] or "(unknown)"),
            ]
            cells.append([line[i] for i in keep])
        shown = [headers[i] for i in keep]
        n = len(shown)
        fit = elastic_widths(cells, shown, (n - 2, n - 1), width)
        t = plain_table()
        for i, h in enumerate(shown):
            t.add_column(h, justify="right" if i < n - 2 else "left", no_wrap=True)
        for r, line in zip(doc["rows"], cells, strict=True):
            tag = f"  [{r['status']}]" if r["status"] in ("new", "removed") else ""
            label, where = line[n - 2][: len(line[n - 2]) - len(tag)], line[n - 1]
            if fit:
                label = elide_middle(label, max(fit[n - 2] - len(tag), 1))
                where = elide_location(where, fit[n - 1])
            name = Text(label)
            if tag:
                name.append(tag, style="bold red" if r["status"] == "new" else "bold blue")
            styled = {0: _pp(r["selfPp"]), 3: _pp(r["totalPp"])}
            nums = [styled.get(i, cell) for i, cell in zip(keep, line[: n - 2], strict=False)]
            t.add_row(*nums, name, Text(where, style="dim"))
        out.table(_title(title, width), t)
        _note(out, f"showing {len(doc['rows'])} of {plural(doc['functions'], 'function')}; "
              "first the changes whose interval excludes 0, the surest (the interval's end "
              "nearer 0) first; Δ self: the self share's relative change"
              + ("" if width is None else "; --wide adds the total's change and interval"),
              width)


class VitalsTable(TextRenderer):
    """`fleet vitals`' table: the house table, fitted to the terminal (whole when piped)
    as `jsprof report`'s is; `wide` prints every cell whole."""

    def __init__(self, console: Console, wide: bool = False) -> None:
        super().__init__(console)
        self.wide = wide

    def draw(self, out: TextOut, doc: dict) -> None:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:,.0f} ms"

        width = table_width(self.console, self.wide)
        # Short headers, explained in the footer: the long ones alone took 100 columns.
        headers = ["page loads", "interactions", "INP", "blocking", "LCP", "CLS",
                   "slowest type p75", "release", "route"]
        cells = []
        for r in doc["rows"]:
            worst = max(r["interactionTypes"].items(), key=lambda kv: kv[1]["p75Ms"] or 0.0,
                        default=None)
            part = "-"
            if worst:
                k, v = worst
                part = (f"{k} {ms(v['p75Ms'])} ({ms(v['inputDelayP75Ms'])} / "
                        f"{ms(v['processingP75Ms'])} / {ms(v['presentationP75Ms'])})")
            # route, release and type are client data: Text, never read as markup
            cells.append([f"{r['pageLoads']:,}", f"{r['interactions']:,}", ms(r["inpP75Ms"]),
                          ms(r["longFrameBlockingP75Ms"]), ms(r["lcpP75Ms"]),
                          "-" if r.get("clsP75") is None else f"{r['clsP75']:.3f}",
                          printable(part),
                          printable(r["release"]), printable(r["route"] or "(none)")])
        fit = elastic_widths(cells, headers, (6, 7, 8), width)
        t = plain_table()
        for i, h in enumerate(headers):
            t.add_column(h, justify="right" if i < 6 else "left", no_wrap=True)
        for line in cells:
            line = elide_cells(line, fit)
            t.add_row(*line[:6], *(Text(x) for x in line[6:]))
        out.table("web vitals per route and release, p75", t)
        from .vitals import left_out_note

        left = left_out_note(doc)
        if left:
            _note(out, left, width)
        _note(out, "blocking: long-animation-frame blocking time; CLS: cumulative layout "
              "shift (web-vitals' session windows); slowest type p75: the "
              "interaction type with the slowest p75, its input delay / processing / "
              "presentation", width)


class InteractionsTable(TextRenderer):
    """`fleet interactions`' table: a row per (target, type), then under it the functions
    that ran during those interactions (self ms, of the first rows)."""

    def __init__(self, console: Console, wide: bool = False) -> None:
        super().__init__(console)
        self.wide = wide

    def draw(self, out: TextOut, doc: dict) -> None:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:,.0f} ms"

        width = table_width(self.console, self.wide)
        headers = ["count", "INP of", "p75", "max", "long frames", "type", "target"]
        cells = []
        for r in doc["rows"]:
            cells.append([f"{r['count']:,}", f"{r['inpPageLoads']:,}", ms(r["p75Ms"]),
                          ms(r["maxMs"]), ms(r["longFrameMs"]), printable(r["type"]),
                          printable(r["target"])])
        fit = elastic_widths(cells, headers, (6,), width)
        t = plain_table()
        for i, h in enumerate(headers):
            t.add_column(h, justify="right" if i < 5 else "left", no_wrap=True)
        for line in cells:
            line = elide_cells(line, fit)
            t.add_row(*line[:5], *(Text(x) for x in line[5:]))
        out.table(f"interactions per target ({plural(doc['interactions'], 'interaction')} in "
                  f"{plural(doc['pageLoads'], 'page load')}), slowest INP first", t)
        if not doc["rows"]:
            _note(out, "no interactions in these uploads' timelines (the client observes "
                  "those of 16 ms and more)", width)
        for r in doc["rows"]:
            fns = r.get("functions")
            if not fns:
                continue
            head = f"{printable(r['type'])} on {printable(r['target'])}: " \
                   f"{_ms(r['sampledMs'])} ms sampled in its windows"
            out.print(Text(elide_middle(head, width) if width else head), soft_wrap=True)
            for fn in fns:
                line = (f"  {fn['selfMs']:>9.1f} ms self {fn['selfPct']:>6.1f} %  "
                        f"{printable(_name(fn))}  {printable(_loc(fn))}")
                out.print(Text(elide_middle(line, width) if width else line), soft_wrap=True)
        from .vitals import left_out_words

        left = left_out_words(doc.get("leftOut") or {}, "these rows")
        if left:
            _note(out, left, width)
        _note(out, "INP of: how many page loads had this target's interaction as their INP "
              "(the web-vitals rule); p75/max: its interactions' durations; long frames: ms of "
              "long animation frames inside its interactions", width)


class RegressionsText(Renderer):
    """`fleet regressions`' text: one line per regression (the `--json` document), or one
    line saying there were none. What was not compared is `not_compared`'s, for stderr."""

    kind = "text"
    extension = ".txt"

    def render(self, doc: dict) -> str:
        by = doc["by"]
        base_key = "baseRelease" if by == "release" else "baseDay"
        lines = []
        level = f"{100.0 * doc.get('ciLevel', 0.95):.4g}%"
        for r in doc["regressions"]:
            lo, hi = r["changeMsCi"]
            name = (r.get("label") or r["name"]
                    or anonymous_label(r["resource"], r.get("line")))
            eg = ", ".join(printable(i) for i in r["exampleIds"]) or "(none)"
            lines.append(
                f"{printable(name)} ({printable(r['resource'] or '')}): "
                f"{r['beforeMsPerLoad']:.1f} -> {r['afterMsPerLoad']:.1f} ms per page load "
                f"({r['changeMsPerLoad']:+.1f} ms, {pct_change(r)}; {level} interval "
                f"{lo:+.1f} to {hi:+.1f} ms, {pct_interval(r['changePctCi'])}) at {by} "
                f"{printable(r[by])} (after {printable(r[base_key])}); self share "
                f"{r['beforeSelfPct']:.2f}% -> {r['afterSelfPct']:.2f}%; "
                f"{r['beforePageLoads']} -> {r['afterPageLoads']} page loads"
                f"{_per_interaction(r)}; e.g. {eg}"
            )
        units = doc[by + "s"]
        if len(units) < 2:
            # one release (day) is nothing to compare, not a clean bill of health
            lines.append(
                f"nothing to compare: regressions compare each {by} with the one before, "
                f"and these uploads are of {plural(len(units), by)}"
                + (f" ({printable(units[0])})" if units else "")
            )
        elif not doc["regressions"]:
            over = f"{plural(len(units), by)} ({printable(units[0])} to {printable(units[-1])})"
            pairs, skipped = len(units) - 1, len(doc.get("skipped") or ())
            if skipped >= pairs:
                # Every pair lacked the evidence: nothing was judged, so "no regressions"
                # read as a clean bill of health (the dashboard says "Nothing compared").
                lines.append(f"nothing compared over {over}: no {by} had enough evidence "
                             "beside the one before (why: the lines on stderr)")
            else:
                lines.append(f"no regressions over {over}" + (
                    f"; {skipped} of {pairs} pairs not compared (stderr)" if skipped else ""))
        lines += [_unseen_line(u, by, base_key) for u in doc.get("unseen") or ()]
        return "".join(line + "\n" for line in lines)


UNSEEN_SHOWN = 5  # functions named per pair in the text (--json: every one tested)


def _unseen_line(u: dict, by: str, base_key: str) -> str:
    """One pair's `unseen` as a line: the rise each of its largest functions could have
    taken unseen. Named functions of a script only (the code one can act on; the
    pseudo-frames stay in --json), and not those reported at this pair (they rose by more
    than it could miss); "no regressions" over a few page loads is no all-clear."""
    fns = [f for f in u["functions"]
           if f["resource"] and f["name"] and not f.get("found")][:UNSEEN_SHOWN]

    def rise(f: dict) -> str:
        x = f["minRisePct"]
        return f"{printable(f['name'])} {'of any size' if x is None else f'under +{x:.0f}%'}"

    what = ", ".join(rise(f) for f in fns) if fns else "(no named function tested)"
    return (f"unseen at {by} {printable(u[by])} (after {printable(u[base_key])}; "
            f"{u['beforePageLoads']} -> {u['afterPageLoads']} page loads): rises in {what} "
            "are more often missed than found (more page loads see smaller ones)")


def _per_interaction(r: dict) -> str:
    """`--during interaction`'s ms per interaction, as a clause (else nothing)."""
    if "beforeInteractions" not in r:
        return ""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    return (f"; {ms(r['beforeMsPerInteraction'])} -> {ms(r['afterMsPerInteraction'])} ms per "
            f"interaction ({r['beforeInteractions']} -> {r['afterInteractions']} "
            "interactions)")


def pct_change(r: dict) -> str:
    """A regression's relative change: `+47%`, or `new` where BASE had none of it."""
    return "new" if r["changePct"] is None else f"{r['changePct']:+.0f}%"


def pct_interval(ci: list) -> str:
    """The interval of a relative change; an open end (BASE's mean not told from 0) is
    said as such."""
    lo, hi = ci
    if lo is None:
        return "% unbounded"
    return f"{lo:+.0f}% to {'+inf' if hi is None else f'{hi:+.0f}%'}"


def not_compared(doc: dict) -> list[str]:
    """The release (or day) pairs `fleet regressions` did not compare, and why."""
    by = doc["by"]
    base_key = "baseRelease" if by == "release" else "baseDay"
    return [
        f"not compared: {printable(sk[base_key])} -> {printable(sk[by])}: {sk['reason']}"
        for sk in doc["skipped"]
    ]
