"""`report` and `flame` of a Recording: what `jsprof report` prints and `jsprof flame`
writes, made once for the commands (cli.py, after its filters) and for Python
(`jsprof.report(rec)`, `jsprof.flame(rec, path)`, a Recording shown in Jupyter).

Imports rich, numpy and the analysis when called, not at import (`import jsprof` stays light).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import JsprofError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from .analysis.calltree import CallTree
    from .render.base import Renderer
    from .trace import Recording

# A notebook keeps every output in the .ipynb and the browser holds it in the page: a viewer
# beyond this many characters (its embedded document) is not put inline; the report table is
# shown instead, with a line saying why and how to write the page (jsprof.flame).
INLINE_LIMIT = 8_000_000


def check_report_options(
    by: str, sort: str, tree: bool, top: int | None, threshold: float | None
) -> None:
    """Refuse options that would be silently ignored (as `jsprof report` does), before work."""
    if by not in ("function", "resource", "line"):
        raise UsageError(f"by={by!r}: expected 'function', 'resource' or 'line'")
    if sort not in ("self", "total"):
        raise UsageError(f"sort={sort!r}: expected 'self' or 'total'")
    if top is not None and not (isinstance(top, int) and top > 0):
        raise UsageError(f"top={top!r}: expected a whole number above 0, or None for every row")
    if threshold is not None and not 0 <= threshold < float("inf"):
        raise UsageError(f"threshold={threshold!r}: expected a % of all time, 0 or more")
    if tree and by != "function":
        raise UsageError(f"the tree shows functions; by={by!r} does not apply to it")


def report_view(
    rec: Recording,
    console: Console,
    *,
    top: int | None = 20,
    by: str = "function",
    sort: str = "self",
    tree: bool = False,
    threshold: float | None = None,
    track: str | None = None,
    wide: bool = False,
    transforms: Sequence[object] = (),
    source: str = "the recording",
) -> tuple[Renderer, Any] | None:
    """The renderer and data of `jsprof report`'s text (`renderer.render(data)`); None for a
    tree with nothing left above `threshold` (% of all time, default 1)."""
    from .analysis.calltree import build_call_tree
    from .analysis.profile import hot_lines, summarize
    from .render import console as render

    if track is not None:
        rec.track(track)  # a clear error for an unknown name, before any work
    if tree:
        threshold = 1.0 if threshold is None else threshold
        calls = build_call_tree(rec, track)
        cut = calls.total_time * threshold / 100.0
        if not any(calls.total_ms[r] >= cut for r in calls.roots()):
            return None
        return render.TreeText(console, rec, track, threshold, wide), calls
    if by == "line":
        summary = hot_lines(rec, track)
        if summary is None:
            raise UsageError(no_line_data(source))
    else:
        summary = summarize(rec, by=by, track=track)
    title = trace_title(rec, track) + "".join(f" · {t}" for t in transforms)
    return render.SummaryTable(console, top, by, title, sort, wide), summary


# Formats with no place for the line a sample executed: a recording written there loses
# what its engine recorded (jsprof, .cpuprofile, pprof, speedscope, Chrome trace and OTLP
# keep it)
_NO_LINE_FORMATS = ("perfetto", "folded")


def no_line_data(source: str) -> str:
    """`--by line`'s refusal for a trace with no per-sample lines: the file's format when
    that is why (a Perfetto or folded file converted from a recording that had them; the
    line blamed the engine), else the engine."""
    why = "the engine did not record it"
    if source != "-" and os.path.isfile(source):
        from . import io
        from .formats import detect

        try:
            fmt = detect(*io.read_input(source))
        except (JsprofError, OSError):
            fmt = None
        if fmt is not None and fmt.name in _NO_LINE_FORMATS:
            why = (f"its format, {fmt.name}, keeps none; report the recording it was "
                   "converted from")
    return f"{source}: has no per-sample line data ({why}); use --by function"


def trace_title(rec: Recording, track: str | None) -> str:
    from .render.summary import trace_title

    return trace_title(rec, track)


def nothing_above(threshold: float | None) -> str:
    t = 1.0 if threshold is None else threshold
    return f"jsprof: nothing is left above --threshold {t:g} (% of all time); lower it"


def busy_note(b: Any) -> str | None:
    """The line `report` prints when stack-less samples lay inside long animation frames
    (analysis/busy.py), or None."""
    if b is None or not b.samples:
        return None
    return (
        f"jsprof: {b.script_ms:.1f} ms of samples without a stack lie in the script entries "
        "of long animation frames: charged to each entry point, under (stack not captured); "
        f"{b.frame_ms:.1f} ms elsewhere in long frames: (long frame: rendering) or (long "
        "frame: not in script); only time outside every long frame is (idle)"
    )


def text_console() -> Console:
    """A console rendering as `jsprof report` does into a pipe: no colour, no terminal, no
    Jupyter (rich would otherwise draw for the notebook), names and locations whole."""
    import io

    from rich.console import Console

    from .render.summary import PIPED_WIDTH

    return Console(file=io.StringIO(), highlight=False, width=PIPED_WIDTH, color_system=None,
                   force_terminal=False, force_jupyter=False, force_interactive=False)


class Report:
    """What `jsprof.report` returns: `text` (what `jsprof report` prints on stdout) and
    `notes` (the lines it prints on stderr). `print(report)` prints the text; a notebook
    shows both."""

    def __init__(self, text: str, notes: list[str]) -> None:
        self.text = text
        self.notes = notes

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return (self.text + "".join(n + "\n" for n in self.notes)).rstrip("\n")

    def _repr_html_(self) -> str:
        notes = "".join(f"<div>{html.escape(n)}</div>" for n in self.notes)
        return (f"<pre>{html.escape(self.text)}</pre>"
                + (f'<div style="opacity:.7">{notes}</div>' if notes else ""))


def report(
    rec: Recording,
    *,
    top: int | None = 20,
    by: str = "function",
    sort: str = "self",
    tree: bool = False,
    threshold: float | None = None,
    track: str | None = None,
    wide: bool = False,
) -> Report:
    """`jsprof report` of a Recording: the table (or with tree=True the call tree) as its
    text, top=None for every row. The same text the command prints for the same recording."""
    from .analysis.busy import attribute
    from .analysis.lost_stacks import lost_stacks, warning

    check_report_options(by, sort, tree, top, threshold)
    if tree and (top != 20 or sort != "self"):
        raise UsageError("top and sort do not apply to the tree (prune it with threshold)")
    if not tree and threshold is not None:
        raise UsageError("threshold goes with tree=True (it prunes the call tree)")
    # As the command, after loading: stack-less samples inside long animation frames are
    # charged to the frame's script entry, never (idle).
    rec, busy = attribute(rec)
    view = report_view(rec, text_console(), top=top, by=by, sort=sort, tree=tree,
                       threshold=threshold, track=track, wide=wide)
    notes = []
    if view is None:
        text = ""
        notes.append(nothing_above(threshold).replace("--threshold", "threshold"))
    else:
        out = view[0].render(view[1])
        text = out if isinstance(out, str) else out.decode()
    lost = lost_stacks(rec, track)
    if lost is not None:
        notes.append(warning(lost))
    note = busy_note(busy)
    if note is not None:
        notes.append(note)
    return Report(text, notes)


def flame_tree(rec: Recording, track: str | None, source: str) -> tuple[CallTree, int]:
    """The call tree a flame graph draws and the samples it covers; a UsageError when there
    is no time to draw."""
    from .analysis.calltree import build_call_tree
    from .words import plural

    if track is not None:
        rec.track(track)
    calls = build_call_tree(rec, track)
    tracks = [rec.track(track)] if track else rec.tracks
    samples = sum(t.trace.num_samples for t in tracks)
    if not calls.total_time > 0:
        # A lone sample with no interval recorded (a .cpuprofile of one sample) has samples
        # and no time: "no samples" sent its user looking for a reading bug.
        why = (
            "has no samples"
            if not samples
            else f"has {plural(samples, 'sample')} and no sampled time (no gap between "
            "samples and no sampling interval to weigh them by)"
        )
        raise UsageError(f"{source}: {why}; there is nothing to draw")
    return calls, samples


def flame_document(
    rec: Recording,
    kind: str = "html",
    *,
    title: str,
    track: str | None = None,
    icicle: bool = False,
    color_by: str = "resource",
    read: Any = None,
    transforms: Sequence[object] = (),
    source: str = "the recording",
) -> str:
    """The flame graph page (kind "html") or picture ("svg") `jsprof flame` writes."""
    from .meta import COUNTS_NOTE, counts_only
    from .render.flame import FlameRenderer
    from .words import plural

    if color_by not in ("resource", "function"):
        raise UsageError(f"color_by={color_by!r}: expected 'resource' or 'function'")
    calls, samples = flame_tree(rec, track, source)
    tracks = [rec.track(track)] if track is not None else rec.tracks
    time = f"{calls.total_time:.1f} ms · "
    if any(counts_only(t.meta) for t in tracks):
        time = ""  # said after the count
    flame = FlameRenderer(
        kind,
        title=title,
        subtitle=f"{time}{plural(samples, 'sample')}"
        + ("" if time else f" {COUNTS_NOTE}") + " · "
        f"{trace_title(rec, track)}" + "".join(f" · {t}" for t in transforms),
        icicle=icicle,
        color_by=color_by,
        rec=rec,
        track=track,
        source=read,
    )
    return flame.render(calls)


def flame(
    rec: Recording,
    path: str | os.PathLike[str],
    *,
    track: str | None = None,
    icicle: bool = False,
    color_by: str = "resource",
    title: str | None = None,
    embed_source: bool = True,
) -> str:
    """`jsprof flame` of a Recording: the viewer page (.html) or picture (.svg) written to
    `path` (a temp file renamed: a failure leaves no half file); returns the path.
    `embed_source`: the source view holds the text of local scripts in the current folder
    (as the command, for a trace in it); False leaves all source text out (--no-source)."""
    from . import io
    from .render.base import flame_kind

    out = os.fspath(path)
    kind = flame_kind(out)  # before any work: a bad name should not cost a tree
    io.check_output(out)
    read = None
    if embed_source:
        from .sourcemap_files import source_reader

        read = source_reader(roots=[os.getcwd()])
    if title is None:
        title = os.path.splitext(os.path.basename(out))[0]
    doc = flame_document(rec, kind, title=title, track=track, icicle=icicle,
                         color_by=color_by, read=read)
    io.atomic_write(out, doc.encode("utf-8"))
    return out


def inline_viewer(rec: Recording, title: str = "recording", limit: int | None = None) -> str:
    """The flame graph viewer as a notebook output: the page in a sandboxed iframe's srcdoc
    (escaped; scripts run in an opaque origin, away from the notebook's). A recording whose
    page is over `limit` characters, or with nothing to draw, shows its report instead, with
    a line saying why."""
    if limit is None:
        limit = INLINE_LIMIT  # read now: a notebook may have set jsprof.views.INLINE_LIMIT
    try:
        doc = flame_document(rec, "html", title=title)
    except UsageError as e:
        return f"<div><em>{html.escape(str(e))}</em></div>"
    if len(doc) > limit:
        shown = report(rec, top=20)
        return (
            f"<div><em>The flame graph page of this recording is {len(doc) / 1e6:.1f} MB, over "
            f"the {limit / 1e6:g} MB shown inline (jsprof.views.INLINE_LIMIT); write it with "
            "jsprof.flame(rec, 'flame.html'). Its report:</em></div>" + shown._repr_html_()
        )
    # The page's own links are fragments (#view=time): resolved against the notebook's
    # address in a srcdoc frame they would load the notebook into it; about:srcdoc keeps
    # them in the page.
    doc = doc.replace("<head>\n", '<head>\n<base href="about:srcdoc">\n', 1)
    return (
        '<iframe sandbox="allow-scripts" style="width:100%;height:560px;border:1px solid #ddd" '
        f'title="{html.escape(title, quote=True)}" srcdoc="{html.escape(doc, quote=True)}">'
        "</iframe>"
    )
