"""The `jsprof` command: argument parsing and wiring only."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .argtypes import nonneg_float, path, positive_int
from .errors import JSError, JsprofError, TraceFormatError, UsageError

# Start-up is what users of short scripts feel: `jsprof --help` must not pay for numpy, rich,
# the formats or the engines, so every command imports what it uses when it runs.
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from rich.console import Console

    from .engines.registry import EngineSpec
    from .trace import Recording


def _print_js_error(e: JSError) -> None:
    from .render.summary import print_js_error

    print_js_error(e)


def _console() -> Console:
    from .render.summary import stdout_console

    return stdout_console()


def _streams_gone() -> None:
    """After a BrokenPipeError: stdout and stderr go to /dev/null from here on, so later
    messages and the flush at exit do not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _tell(say: Callable[..., object], *args: object, **kwargs: object) -> None:
    """Print what `say(*args, **kwargs)` prints for the user. If the reader went away
    (`2>&1 | head`) the rest is lost, but record/run/instrument still exit with the
    script's status."""
    try:
        say(*args, **kwargs)
    except BrokenPipeError:
        _streams_gone()


# ---- shared filters ----------------------------------------------------------------------


def _add_filter_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters (source maps first, then in the order listed)")
    g.add_argument(
        "--during",
        choices=("interaction", "long-frame"),
        help="only samples inside the page's interactions or long animation frames "
        "(spans of a `record --engine chromium` recording, or an upload's timeline); a "
        "handler is charged only inside its own script entries",
    )
    g.add_argument(
        "--slower-than",
        type=nonneg_float,
        metavar="MS",
        help="--during: only windows at least this slow (default: interactions 200 ms, "
        "long frames 50 ms of blocking)",
    )
    g.add_argument(
        "--time-range",
        metavar="START:END",
        help="only samples with START <= timestamp < END (ms; either side may be empty)",
    )
    g.add_argument(
        "--focus",
        metavar="NAME",
        action="append",
        default=[],
        help="only stacks through a function named NAME (wildcards allowed)",
    )
    g.add_argument(
        "--exclude",
        metavar="NAME",
        action="append",
        default=[],
        help="drop stacks through a function named NAME (wildcards allowed)",
    )
    g.add_argument(
        "--sourcemap",
        metavar="DIR|FILE",
        nargs="?",
        const="",
        help="map positions and names back to original sources (a .map file or a folder; "
        "without a value: the sourceMappingURL comment or .map beside each local script)",
    )
    g.add_argument(
        "--hide-internal",
        action="store_true",
        help="hide the runtime's own frames (node: modules, natives); their time goes to "
        "the caller",
    )
    g.add_argument(
        "--transform",
        metavar="SPEC",
        action="append",
        default=[],
        type=_transform_spec,
        help="reshape the call tree after the filters, in the order given: merge:NAME, "
        "merge-node:A>B>C, focus-subtree:A>B, focus:NAME, collapse:NAME, "
        "collapse-resource:URL, collapse-recursion:NAME, drop:NAME, focus-resource:URL "
        "(docs/local-profiling.md)",
    )


def _transform_spec(text: str) -> Any:
    from .analysis.transforms import parse_spec

    try:
        return parse_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _load(
    path: str,
    args: argparse.Namespace,
    unmatched: list[str] | None = None,
    texts: dict[str, str] | None = None,
) -> Recording:
    """Load a trace and apply the shared filters the command was given (`texts` gets the
    original sources the source maps carry)."""
    from . import io
    from .analysis import filters, transforms
    from .analysis.busy import attribute

    # Busy time first (stack-less samples inside long animation frames: never `(idle)`),
    # by the page's own names, before source maps rename the frames it matches them to.
    # With source maps, an entry point is placed by its offset into the script found where
    # its map is (the map then names it as the original function).
    maps = getattr(args, "sourcemap", None)
    lines = None
    if maps is not None:
        from .sourcemap_files import script_lines_for

        lines = script_lines_for(maps or None)
    rec, args.busy_result = attribute(io.load(path), lines=lines)
    if maps is not None:
        from . import sourcemap_files

        notes: list[str] = []
        rec = sourcemap_files.apply(rec, args.sourcemap or None, texts, notes)
        for note in notes:  # a map of another build: said, not applied
            print(f"jsprof: {note}", file=sys.stderr)
    rec = _during(rec, path, args)
    rec = filters.apply(
        rec,
        path,
        getattr(args, "time_range", None),
        getattr(args, "focus", ()),
        getattr(args, "exclude", ()),
        getattr(args, "hide_internal", False),
        unmatched,
    )
    return transforms.apply(rec, path, getattr(args, "transform", ()), unmatched)


def _transforms_json(args: argparse.Namespace) -> dict:
    specs = getattr(args, "transform", ())
    return {"transforms": [str(t) for t in specs]} if specs else {}


def _tell_transforms(args: argparse.Namespace) -> None:
    specs = getattr(args, "transform", ())
    if specs:
        print(f"jsprof: transforms, in order: {', '.join(map(str, specs))}", file=sys.stderr)


def _during(rec: Recording, path: str, args: argparse.Namespace) -> Recording:
    """--during / --slower-than: only the samples inside the page's windows; what was kept
    is left on `args.during_result` for the note `report` prints."""
    kind = getattr(args, "during", None)
    slower = getattr(args, "slower_than", None)
    if kind is None:
        if slower is not None:
            raise UsageError("--slower-than needs --during interaction|long-frame")
        return rec
    if slower is not None and not 0 <= slower < float("inf"):
        raise UsageError(f"--slower-than {slower}: expected a number of ms, 0 or more")
    from .analysis.during import during

    got = during(rec, kind, slower)
    what = "interaction" if kind == "interaction" else "long animation frame"
    if not got.windows_any:
        if any(t.engine == "chromium" and t.spans is not None and len(t.spans)
               for t in rec.tracks):
            # A Chromium recording whose page windows were observed but hold none of this
            # kind: telling its user to record on Chromium (what they did) sends them
            # round in a circle; say why the page had none.
            why = (
                "the browser counts only real input, not a page's own el.click()"
                if kind == "interaction"
                else "no task ran 50 ms or more"
            )
            raise UsageError(f"--during {kind}: the page in {path} had no {what} ({why})")
        raise UsageError(
            f"--during {kind}: {path} holds no {what} (a page's interactions and long "
            "animation frames come from `jsprof record --engine chromium`, or with an "
            "upload from `jsprof serve`: GET /v1/traces/ID)"
        )
    if not got.windows:
        from .timeline import DEFAULT_SLOWER_THAN

        limit = DEFAULT_SLOWER_THAN[kind] if slower is None else slower
        by = "of blocking " if kind == "long-frame" else ""
        raise UsageError(
            f"--during {kind}: none of the {got.windows_any} {what}(s) in {path} took "
            f"{limit:g} ms {by}or more; lower --slower-than"
        )
    args.during_result = got
    return got.recording


def _during_note(args: argparse.Namespace) -> str | None:
    got = getattr(args, "during_result", None)
    if got is None:
        return None
    from .words import plural

    what = "interaction" if args.during == "interaction" else "long animation frame"
    note = f"jsprof: only samples during {plural(got.windows, what)}"
    if got.attributed_ms:
        note += (
            f"; {got.attributed_ms:.1f} ms of samples whose stack the browser did not "
            "capture charged to the long animation frame's script entry point, under "
            "(stack not captured)"
        )
    return note


# ---- report ------------------------------------------------------------------------------


def _top(args: argparse.Namespace, default: int | None = 20) -> int | None:
    """--top N / --all / neither, refusing both."""
    if args.all and args.top is not None:
        raise UsageError("--top and --all contradict each other; give one")
    if args.all:
        return None
    return default if args.top is None else args.top


def _check_report_args(args: argparse.Namespace) -> None:
    """Refuse options that would be silently ignored, before any work."""
    _check_wide(args)
    if args.tree:
        if args.by not in (None, "function"):
            raise UsageError(f"--tree shows functions; --by {args.by} does not apply to it")
        for flag, given in (("--top", args.top), ("--all", args.all), ("--sort", args.sort)):
            if given:
                raise UsageError(f"{flag} does not apply to --tree (prune it with --threshold)")
    elif args.threshold is not None:
        raise UsageError("--threshold goes with --tree (it prunes the call tree)")


def cmd_report(args: argparse.Namespace) -> int:
    from . import views
    from .render import console as render
    from .render.base import emit, print_json

    _check_report_args(args)
    top = _top(args)
    by = args.by or "function"
    sort = args.sort or "self"
    threshold = 1.0 if args.threshold is None else args.threshold
    rec = _load(args.trace, args)
    if args.track is not None:
        rec.track(args.track)  # a clear error for an unknown name, before any work
    lost = _lost_stacks(rec, args.track)
    if args.json:
        from .analysis.calltree import build_call_tree
        from .analysis.profile import hot_lines, summarize

        if args.tree:
            doc = {"tree": render.tree_json(build_call_tree(rec, args.track), threshold)}
        else:
            summary = (hot_lines(rec, args.track) if by == "line"
                       else summarize(rec, by=by, track=args.track))
            if summary is None:
                raise UsageError(views.no_line_data(args.trace))
            doc = render.summary_json(summary, top, by, sort)
        print_json({**doc, **_lost_json(lost), **_during_json(args), **_busy_json(args),
                    **_transforms_json(args)})
    else:
        # The same text as jsprof.report(rec) (views.py), printed on stdout.
        view = views.report_view(
            rec, _console(), top=top, by=by, sort=sort, tree=args.tree, threshold=threshold,
            track=args.track, wide=args.wide, transforms=() if args.tree else args.transform,
            source=args.trace,
        )
        if view is None:
            print(views.nothing_above(threshold), file=sys.stderr)
        else:
            emit(*view)
    _warn_lost(lost)
    _tell_during(args)
    _tell_busy(args)
    _tell_transforms(args)
    return 0


def _during_json(args: argparse.Namespace) -> dict:
    got = getattr(args, "during_result", None)
    if got is None:
        return {}
    return {"during": args.during, "windows": got.windows,
            "attributed_ms": round(got.attributed_ms, 6)}


def _tell_during(args: argparse.Namespace) -> None:
    note = _during_note(args)
    if note is not None:
        print(note, file=sys.stderr)


# Stack-less samples inside long animation frames (analysis/busy.py), charged when loaded:
# `report` says how much in one line on stderr and in `busy` of --json.
def _busy_json(args: argparse.Namespace) -> dict:
    b = getattr(args, "busy_result", None)
    if b is None or not b.samples:
        return {}
    return {"busy": {"script_ms": round(b.script_ms, 6), "script_samples": b.script_samples,
                     "frame_ms": round(b.frame_ms, 6), "frame_samples": b.frame_samples}}


def _tell_busy(args: argparse.Namespace) -> None:
    from .views import busy_note

    note = busy_note(getattr(args, "busy_result", None))
    if note is not None:
        print(note, file=sys.stderr)


# Stack-less samples between samples of one function (analysis/lost_stacks.py): `report`
# says so in one line on stderr, after its output, and in the `lostStacks` field of --json.
def _lost_stacks(rec: Recording, track: str | None) -> Any:
    from .analysis.lost_stacks import lost_stacks

    return lost_stacks(rec, track)


def _lost_json(lost: Any) -> dict:
    return {} if lost is None else {"lostStacks": lost.as_json()}


def _warn_lost(lost: Any) -> None:
    if lost is not None:
        from .analysis.lost_stacks import warning

        print(warning(lost), file=sys.stderr)


def _title(rec: Recording, track: str | None) -> str:
    from .render.summary import trace_title

    return trace_title(rec, track)


# ---- validate, convert, formats ----------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    from . import io
    from .render.summary import validate_lines

    try:
        rec = io.load(args.trace)
    except TraceFormatError as e:
        # The answer is "not a valid trace" (exit 1); a missing file is an error (2).
        print(f"jsprof: error: {e}", file=sys.stderr)
        return 1
    for line in validate_lines(rec, args.trace):
        print(line)
    return 0


def cmd_upload(args: argparse.Namespace) -> int:
    from .upload import read_key, upload_files
    from .words import printable

    key = read_key(args.key_file)
    labels = {"app": args.app, "release": args.release, "route": args.route, "env": args.env}

    def done(source: str, ups: list) -> None:
        n = sum(u.samples for u in ups)
        print(f"{printable(source)}: {len(ups)} upload{'s' if len(ups) != 1 else ''} "
              f"({n} samples): {' '.join(u.id for u in ups)}")

    def refused(line: str) -> None:
        print(f"jsprof: error: {printable(line)}", file=sys.stderr)

    res = upload_files(args.files, args.url, key, labels, on_done=done, on_refused=refused)
    return 2 if res.refused else 0


def _progress(what: str, path: str) -> Any:
    """A spinner on stderr for big inputs when a person is watching; silent otherwise."""
    import contextlib

    try:
        big = path != "-" and os.path.getsize(path) > 20 << 20
    except OSError:
        big = False
    if not (big and sys.stderr.isatty()):
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(f"{what} {path} ...")


# Output formats that keep each sample's weight (docs/formats.md).
WEIGHTED_FORMATS = frozenset(
    {"jsprof", "speedscope", "pprof", "chrome-trace", "perfetto", "otlp", "otlp-json"}
)


def _same_file(a: str, b: str) -> bool:
    try:
        return a != "-" and os.path.samefile(a, b)
    except OSError:  # either does not exist (yet)
        return False


def _check_format_matches_name(path: str, fmt: Any) -> None:
    """--format and an output name another format owns (gzipped pprof in `out.folded`)
    contradict each other: refused, as other ignored options are. A plain `.json` takes any
    JSON format; a name no format claims takes any."""
    from .formats import writer_for

    try:
        by_name = writer_for(path, None)
    except UsageError:
        return
    if by_name.name == fmt.name:
        return
    name = path.lower().removesuffix(".gz")
    json_format = fmt.name == "cpuprofile" or any(e.endswith(".json") for e in fmt.extensions)
    if json_format and name.endswith(".json") and not any(
        name.endswith(e) for e in by_name.extensions if e != ".json"
    ):
        return
    raise UsageError(
        f"{path}: the name says {by_name.name} ({' '.join(by_name.extensions)}) but --format "
        f"is {fmt.name}; name it with {' or '.join(fmt.extensions)}, or drop --format"
    )


def cmd_convert(args: argparse.Namespace) -> int:
    from . import io
    from .formats import writer_for
    from .trace import Recording
    from .words import plural

    # A bad output fails before a long read.
    if args.output != "-":
        io.check_output(args.output)
        if _same_file(args.input, args.output):
            raise UsageError(
                f"{args.output}: is the input file; write the conversion to another name"
            )
    fmt = writer_for(args.output, args.format)
    if args.format is not None and args.output != "-":
        _check_format_matches_name(args.output, fmt)
    with _progress("reading", args.input):
        rec = _load(args.input, args)
    if args.track is not None:
        rec = Recording([rec.track(args.track)])
    with _progress("writing", args.input):
        io.save(rec, args.output, format=args.format)
    if args.output != "-":
        print(
            f"wrote {args.output} ({plural(rec.num_samples, 'sample')}, "
            f"{plural(len(rec.tracks), 'track')})",
            file=sys.stderr,
        )
    if fmt.name == "folded":
        _say_counts_not_times(rec, args.output)
    elif fmt.name not in WEIGHTED_FORMATS and any(
        t.trace.sample_weight is not None for t in rec.tracks
    ):
        from .meta import CPU, clock_of

        if any(clock_of(t.meta) == CPU for t in rec.tracks):
            print(
                f"note: {fmt.name} has no per-sample weights: the CPU-clock samples read "
                "back as wall-clock time (each charged the gap to the next one); write "
                ".jsprof.json, .speedscope.json, .pb.gz, .otlp.pb, .trace.json or .pftrace to "
                "keep the CPU times",
                file=sys.stderr,
            )
        else:
            print(
                f"note: {fmt.name} has no per-sample weights: read back, each kept sample is "
                "charged the gap to the next kept one; write .jsprof.json, .speedscope.json, "
                ".pb.gz, .otlp.pb, .trace.json or .pftrace to keep the filtered times",
                file=sys.stderr,
            )
    return 0


# Below this (in percentage points of self time) counting samples changes no share a
# report shows (one decimal).
SHARE_SHIFT_PP = 0.05


def _say_counts_not_times(rec: Recording, output: str) -> None:
    """Folded stacks keep sample counts: where the samples did not weigh alike (gaps of
    a loaded machine, the CPU clock, a filter's weights), one line says how far that moves
    the shares (read back, every sample weighs 1 ms)."""
    from .analysis.profile import count_share_shift, key_text, summarize

    got = count_share_shift(summarize(rec))
    if got is None or got[0] < SHARE_SHIFT_PP:
        return
    pp, key = got
    name = key if isinstance(key, str) else key_text(key)[0]
    print(
        f"note: folded stacks keep sample counts, not times: this recording's samples do "
        f"not weigh alike, so read back from {output} a function's share of self time "
        f"moves by up to {pp:.1f} percentage points ({name}); write .jsprof.json, "
        ".pb.gz or .speedscope.json to keep the times",
        file=sys.stderr,
    )


def cmd_formats(args: argparse.Namespace) -> int:
    from .formats import FORMATS

    for f in FORMATS.values():
        rw = (
            ("read" if f.read else "")
            + ("/" if f.read and f.write else "")
            + ("write" if f.write else "")
        )
        print(f"{f.name:12} {rw:11} {' '.join(f.extensions):24} {f.description}")
    return 0


# ---- flame --------------------------------------------------------------------------------


def cmd_flame(args: argparse.Namespace) -> int:
    from . import io, views
    from .render.base import flame_kind

    out = args.output
    if out is None:
        if args.trace == "-":
            raise UsageError("reading stdin: give the flame graph's name with -o OUT.html")
        out = args.trace + ".html"
    flame_kind(out)  # before loading: a bad name should not cost a parse
    io.check_output(out)
    texts: dict[str, str] = {}
    read = None
    if not args.no_source:
        from .sourcemap_files import source_reader

        # checks DIR before any work; local scripts only from the trace's folder and here
        read = source_reader(args.embed_source, texts, _source_roots(args.trace))
    rec = _load(args.trace, args, texts=texts)
    doc = views.flame_document(  # the same page as jsprof.flame(rec, path) (views.py)
        rec, flame_kind(out), title=os.path.basename(args.trace), track=args.track,
        icicle=args.icicle, color_by=args.color_by, read=read, transforms=args.transform,
        source=args.trace,
    )
    io.atomic_write(out, doc.encode("utf-8"))
    print(f"wrote {out}", file=sys.stderr)
    _say_embedded(read)
    if args.open:
        _open_in_browser(out)
    return 0


def _source_roots(trace: str) -> list[str]:
    """Where the viewer may read local scripts from: the trace's folder and the current one
    (what the command points at), never wherever a trace says; of these, / and the home
    folder count only when given with --embed-source (sourcemap_files.too_broad)."""
    roots = [os.getcwd()]
    if trace != "-":
        roots.append(os.path.dirname(os.path.abspath(trace)))
    return roots


def _source_reader(trace: str) -> Any:
    from .sourcemap_files import source_reader

    return source_reader(roots=_source_roots(trace))


def _say_embedded(read: Any) -> None:
    """One line naming the local files whose text went into the page (it may be shared),
    and one for each folder too broad to read scripts from by default that held some."""
    from .words import plural, printable

    for root in getattr(read, "broad_refused", []):
        shown = printable(str(root))
        print(
            f"jsprof: note: the page holds no source text from scripts under {shown}: the "
            "current or the trace's folder, too broad to read scripts from unless named; "
            f"give --embed-source {shown} to include them",
            file=sys.stderr,
        )
    files = list(dict.fromkeys(getattr(read, "embedded", [])))
    if files:
        more = f" and {plural(len(files) - 1, 'other')}" if len(files) > 1 else ""
        print(
            f"the page holds source text of {printable(files[0])}{more} "
            "(--no-source leaves it out)",
            file=sys.stderr,
        )


def _open_in_browser(path: str) -> None:
    import pathlib
    import webbrowser

    if not webbrowser.open(pathlib.Path(path).resolve().as_uri()):
        print(f"jsprof: could not open a browser; open {path} yourself", file=sys.stderr)


# ---- diff ---------------------------------------------------------------------------------


def _check_wide(args: argparse.Namespace) -> None:
    if args.wide and args.json:
        raise UsageError("--wide shapes the text table; --json always gives names whole")


def cmd_diff(args: argparse.Namespace) -> int:
    from . import io
    from .analysis import filters, transforms
    from .analysis.calltree import build_call_tree
    from .analysis.diff import (
        ALL_UNITS,
        check_gates,
        check_rule_names,
        diff_profiles,
        parse_gate,
        tree_changes,
    )
    from .render import console as render
    from .render.base import emit, print_json
    from .render.flame import FlameRenderer

    top = _top(args)
    _check_wide(args)
    if args.icicle and not args.flame:
        raise UsageError("--icicle shapes the --flame graph; give --flame OUT.html too")
    # Bad rules and output names fail before any parsing work.
    gates = [parse_gate(spec, ALL_UNITS) for spec in args.fail_if]
    flame = FlameRenderer.for_path(args.flame) if args.flame else None
    if args.flame:
        io.check_output(args.flame)
    # A --focus/--exclude name may be in one profile only (a function added or removed).
    missing_b: list[str] = []
    missing_n: list[str] = []
    base, new = _load(args.base, args, missing_b), _load(args.new, args, missing_n)
    for both in sorted(set(missing_b) & set(missing_n)):
        option, name = both.split("\0")
        if option == "--transform":
            raise transforms.no_match_error(transforms.parse_spec(name),
                                            f"{args.base} or {args.new}")
        raise filters.no_match_error(option, name, f"{args.base} or {args.new}")
    if args.track is not None:
        base.track(args.track)
        new.track(args.track)
    # Two runs of one program: ranked by the change in self ms (a share falls whenever
    # another function gets slower).
    d = diff_profiles(base, new, args.track, args.strip_prefix, rank="ms", anonymous_by_line=True)
    check_rule_names(d, gates)  # a rule naming no function: exit 2 before any output
    from .meta import COUNTS_NOTE

    counted = _counts_only_sides(args, base, new)
    failures = check_gates(d, gates)
    if args.json:
        # the rules and what broke them, as on stderr: the JSON is what a CI job keeps
        rules = {"fail_if": list(args.fail_if), "broken": failures} if gates else {}
        print_json({**render.diff_json(d, top), **_transforms_json(args),
                    **({"ms_are_sample_counts": counted} if counted else {}), **rules})
    else:
        title = f"{args.new} vs {args.base} (change in self ms and in share of all time)"
        if counted:
            title += f"; {' and '.join(counted)}: {COUNTS_NOTE}"
        emit(render.DiffTable(_console(), top, title, args.wide), d)
    _warn_unmatched(d, base, new, args.track)  # after the table, where one is looking
    _tell_transforms(args)
    _warn_clocks(args, base, new)
    if len(counted) == 1:
        other = args.new if counted == [args.base] else args.base
        print(
            f"jsprof: diff: warning: {counted[0]} holds sample counts, not times (folded "
            f"stacks): its ms do not compare with {other}'s; compare the shares (pp), or "
            "diff the recording it was written from",
            file=sys.stderr,
        )
    if flame is not None:
        new_tree = build_call_tree(new, args.track)
        change = tree_changes(
            build_call_tree(base, args.track), new_tree, args.strip_prefix, unit="ms"
        )
        flame.options.update(
            title=f"{os.path.basename(args.new)} vs {os.path.basename(args.base)}",
            subtitle="shape of NEW; red: more self time than BASE, blue: less",
            icicle=args.icicle,
            change=change,
            rec=new,  # the same viewer: Time, Sandwich and Source show NEW
            track=args.track,
            source=(read := _source_reader(args.new)),
        )
        doc = flame.render(new_tree)
        io.atomic_write(args.flame, doc.encode("utf-8"))
        print(f"wrote {args.flame}", file=sys.stderr)
        _say_embedded(read)
    for line in failures:
        print(f"jsprof: diff: {line}", file=sys.stderr)
    return 1 if failures else 0


def _percent(s: str) -> float:
    """`5%` or `5`: a percentage, 0 or more."""
    v = _nonneg_float(s[:-1] if s.endswith("%") else s)
    return v


def cmd_budget(args: argparse.Namespace) -> int:
    from . import io
    from .budget import budget, flame_diff
    from .render.base import print_json

    if args.flame:
        from .render.base import flame_kind

        if flame_kind(args.flame) != "html":
            raise UsageError(f"--flame {args.flame}: budget writes the flame diff as .html")
        io.check_output(args.flame)
    tty = sys.stderr.isatty() and not args.json

    def progress(i: int, b: Any, n: Any) -> None:
        if tty:
            print(f"\rjsprof: budget: round {i}: BASE {b.ms:.1f} ms, NEW {n.ms:.1f} ms",
                  end="", file=sys.stderr, flush=True)

    res = budget(
        args.base, args.new, engine=args.engine, max_slower=args.max_slower,
        max_slower_ms=args.max_slower_ms, min_rounds=args.min_rounds,
        max_rounds=args.max_rounds, time_cap=args.time_cap, sample_interval=args.interval,
        clock=args.clock, until=args.until, measure=args.measure, on_round=progress,
    )
    if tty:
        print(file=sys.stderr)
    doc = res.json()
    if args.flame:
        io.atomic_write(args.flame, flame_diff(res).encode("utf-8"))
        doc["flame"] = args.flame
        print(f"wrote {args.flame}", file=sys.stderr)
    if args.json:
        print_json(doc)
    else:
        from .render.base import emit
        from .render.budget import BudgetText

        emit(BudgetText(), doc)
    return res.exit_code


def _counts_only_sides(args: argparse.Namespace, base: Recording, new: Recording) -> list[str]:
    """The sides (their file names) read from folded stacks, whose ms are sample counts."""
    from .meta import counts_only

    def counted(rec: Recording) -> bool:
        tracks = [rec.track(args.track)] if args.track is not None else rec.tracks
        return any(counts_only(t.meta) for t in tracks)

    return [path for path, rec in ((args.base, base), (args.new, new)) if counted(rec)]


def _warn_clocks(args: argparse.Namespace, base: Recording, new: Recording) -> None:
    """One line on stderr when the two sides sampled different clocks (wall vs CPU
    time): their times differ by whatever waiting and machine load there was."""
    from .meta import CPU, clock_of

    def clocks(rec: Recording) -> set[str]:
        tracks = [rec.track(args.track)] if args.track is not None else rec.tracks
        return {clock_of(t.meta) for t in tracks}

    b, n = clocks(base), clocks(new)
    if b != n:
        def word(c: set[str]) -> str:
            return " and ".join("CPU time" if x == CPU else "wall-clock time" for x in sorted(c))

        print(
            f"jsprof: diff: warning: {args.base} samples {word(b)} and {args.new} "
            f"{word(n)}: their times do not compare (record both with the same --clock)",
            file=sys.stderr,
        )


def _warn_unmatched(d: Any, base: Recording, new: Recording, track: str | None) -> None:
    """One line on stderr when most of either side's time is in functions the other lacks:
    two copies of a script (`app.js` and `app2.js`, two checkouts) match nothing, and the
    table alone (every row `[new]` or `[removed]`) did not say why. When the functions
    each side lacks are in one and the same script, the scripts did match: the line says
    what differs (the engines: one inlines what the other shows), not to strip a prefix."""
    from .render.rows import short_location

    removed, added = d.unmatched_share()
    if max(removed, added) <= 50.0:
        return
    base_res, new_res = d.unmatched_resources("removed"), d.unmatched_resources("new")
    head = (f"jsprof: warning: {added:.0f}% of NEW's time is in functions BASE does not have "
            f"and {removed:.0f}% of BASE's in functions NEW does not have")
    if base_res and new_res and base_res[0] == new_res[0]:
        def engines(rec: Recording) -> str:
            tracks = [rec.track(track)] if track is not None else rec.tracks
            return "/".join(sorted({t.engine or "?" for t in tracks}))

        b, n = engines(base), engines(new)
        why = (f"BASE ran on {b} and NEW on {n}, and engines differ in the functions they "
               "show (V8 inlines small ones into their callers)" if b != n else
               "the code there changed (renamed or moved functions)")
        print(f"{head}, both in {short_location(base_res[0])}: the scripts match; {why}",
              file=sys.stderr)
        return
    where = ""
    if base_res and new_res:
        where = (f" (BASE's in {short_location(base_res[0])}, NEW's in "
                 f"{short_location(new_res[0])})")
    print(
        f"{head}{where}: functions match by "
        "name and script, so two copies of a script or two checkouts match nothing; "
        "--strip-prefix ROOT (once per side) compares checkouts",
        file=sys.stderr,
    )


# ---- record, run ---------------------------------------------------------------------------


def _summarize_recording(rec: Recording, out: str | None) -> None:
    from .render.summary import print_recording_summary

    print_recording_summary(rec, out, mapped=_through_maps(rec))
    note = rec.tracks[0].meta.get("childProcesses") if rec.tracks else None
    if note:
        print(f"jsprof: note: the script started child processes; {note}", file=sys.stderr)


def _through_maps(rec: Recording) -> Recording | None:
    """The recording through the source maps beside its local scripts (their
    sourceMappingURL comments, a .map beside them), for the summary's top functions; None
    when no script has one. A map that cannot be read or does not match is said in one
    line and the summary shows what was recorded: the file is written either way."""
    from . import sourcemap_files
    from .recorded import LightRecording

    if isinstance(rec, LightRecording):
        # what `apply` would find, without reading a map: none, no model (numpy) either
        if not any(sourcemap_files.local_map_named(t.trace.resources) for t in rec.tracks):
            return None
        rec = rec.recording()

    notes: list[str] = []
    try:
        mapped = sourcemap_files.apply(rec, None, None, notes)
    except JsprofError as e:
        print(f"jsprof: note: the summary shows the recorded names: {e}", file=sys.stderr)
        return None
    for note in notes:
        print(f"jsprof: {note}", file=sys.stderr)
    same = all(
        set(a.trace.resources) == set(b.trace.resources)
        for a, b in zip(rec.tracks, mapped.tracks, strict=True)
    )
    return None if same else mapped


def _finish_partial(e: BaseException, out: str | None) -> int:
    from .record import exit_status

    rec = getattr(e, "recording", None)
    interrupted = isinstance(e, KeyboardInterrupt)
    status = exit_status(rec) if rec is not None else 130 if interrupted else 1

    def say() -> None:
        if rec is not None:
            _summarize_recording(rec, out)
        if interrupted:
            print("jsprof: interrupted; the samples taken so far were kept", file=sys.stderr)
        elif not getattr(e, "printed", False):  # Node prints its own uncaught errors
            _print_js_error(e)  # type: ignore[arg-type]

    _tell(say)
    return status


def _record_output(args: argparse.Namespace, default_stem: str) -> str:
    from .outputs import recording_output

    return recording_output(args.output, default_stem)


def _save_recording(rec: Recording, out: str) -> str:
    from .outputs import save_recording

    return save_recording(rec, out)


class _Preparing:
    """`jsprof record`'s start-up work that need not wait in line: `check` (the output
    check: light, no numpy, so the script is held for it only briefly), then the imports
    the end needs (the output's format with the trace model and numpy, the summary's
    analysis), in a thread of their own while the main thread starts Node's profiler and
    the script runs."""

    # The summary's analysis; the trace model and numpy come with the output's format.
    # rich's console only for a terminal: piped, the summary is printed without it.
    IMPORTS = (
        "jsprof.analysis.profile", "jsprof.analysis.sampling", "jsprof.render.rows",
        "rich._emoji_replace",
    )
    RICH = ("rich.console", "rich.markup")
    # A LightRecording written as jsprof's JSON (`record --engine node`): no numpy at all.
    LIGHT = (
        "jsprof.recorded", "jsprof.engines._v8join", "jsprof.formats._jsprof_write",
        "jsprof.analysis.sampling", "jsprof.render.rows", "rich._emoji_replace",
    )

    def __init__(self, check: Callable[[], str], light: bool = False) -> None:
        import threading

        self._light = light
        self._check = check
        self._out: str | None = None
        self._error: BaseException | None = None
        self._checked = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jsprof-prepare", daemon=True)

    def start(self) -> None:
        # The main thread's work meanwhile is short (connect, start the profiler) but waits
        # on Node between its steps: at Python's default 5 ms switch interval each wake-up
        # waited for the GIL behind these imports (~50 ms in all, measured).
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._out = self._check()
        except BaseException as e:  # handed to the main thread by output()
            self._error = e
        finally:
            self._checked.set()
        try:
            if self._error is None:
                import importlib

                from .formats import writer_name
                from .render.summary import rich_console_needed

                assert self._out is not None
                if self._light and writer_name(self._out, None, option=None) == "jsprof":
                    imports = self.LIGHT
                else:
                    imports = self.IMPORTS
                    self._import_format()
                rich = self.RICH if rich_console_needed() else ()
                for name in (*imports, *rich):
                    importlib.import_module(name)
        finally:
            sys.setswitchinterval(self._switch)

    def _import_format(self) -> None:
        """The output format's module (numpy, the model, the writer)."""
        from .formats import writer_for

        assert self._out is not None
        # numpy's OpenBLAS starts a thread pool as it loads (~17 ms of CPU here, measured)
        # that jsprof never uses: one thread, unless the user chose. Node was started
        # before, so the script does not see the variable.
        blas = "OPENBLAS_NUM_THREADS"
        ours = blas not in os.environ
        if ours:
            os.environ[blas] = "1"
        try:
            writer_for(self._out, None)  # its module: numpy, the model, the writer
        finally:
            if ours:
                os.environ.pop(blas, None)

    def output(self) -> str:
        """The checked output path; raises what the check raised."""
        self._checked.wait()
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out

    def join(self) -> None:
        self._thread.join()


def _engine_of(args: argparse.Namespace) -> tuple[EngineSpec, Any]:
    """The engine a `record` or `run` goes through, and what it attaches to (None: it starts
    what it records). An attach flag (--pid, --cdp: the spec's `attach_flag`) names its
    engine as --engine does; given both, they must agree."""
    from .engines.registry import SPECS, engine_spec

    found = [
        (spec, where)
        for spec in SPECS.values()
        if spec.attach_option
        and (where := getattr(args, spec.attach_option[2:], None)) not in (None, "")
    ]
    if len(found) > 1:
        raise UsageError(f"give one of {' or '.join(s.attach_flag for s, _ in found)}")
    if not found:
        return engine_spec(args.engine or "quickjs"), None
    spec, where = found[0]
    if args.engine not in (None, spec.name):
        raise UsageError(
            f"{spec.attach_option} attaches to {spec.label}; --engine {args.engine} does not "
            "apply"
        )
    return spec, where


def cmd_record(args: argparse.Namespace) -> int:
    """`record`: every engine through its registry spec, the same way for a script and a
    page; attaching (--pid, --cdp) through the spec's attach."""
    from .record import check_script, record, start_engine

    spec, where = _engine_of(args)
    spec.check_clock(args.clock)  # one line, before anything starts (Node boots early)
    spec.check_page_options(
        [o for o in ("until", "target", "allow_remote") if getattr(args, o, None)],
        attaching=where is not None,
    )
    if where is not None:
        return _cmd_attach(args, spec, where)
    spec.check_workers(args.workers)
    if not args.script:
        attacher = spec if spec.attach_flag else next(
            s for s in _specs() if s.attach_flag and s.runs == spec.runs
        )
        raise UsageError(
            f"give {'the script' if spec.runs == 'scripts' else 'the URL, .html, .js or .mjs file'}"
            f" to record (or {attacher.attach_flag} to attach to {attacher.label})"
        )
    engine = spec.name
    if (
        getattr(args, "dashdash", False)
        and spec.runs == "scripts"
        and not _is_script_file(args.script)
    ):
        return _cmd_record_command(args, engine)
    if args.node_arg and not spec.takes("node_args"):
        raise UsageError("--node-arg goes with --engine node")
    spec.check_args(args.script, args.args)
    try:
        check_script(args.script, engine)  # before the output: the likelier mistake
    except UsageError:
        _hint_command(args)
        raise
    started = None if args.workers else start_engine(args.script, engine, args.args, args.node_arg)
    stem = spec.default_stem(args.script)
    from .record import Progress
    from .render.summary import StatusLine

    prep: _Preparing | None = None
    if started is None:
        out = _record_output(args, stem)
    else:
        # Node boots (held before the script) and the profiler starts while another thread
        # checks the output (numpy and the formats come with it) and imports what the end
        # needs; the script waits only for the check. Started after this thread's own
        # imports above, so the two never import one module at once.
        prep = _Preparing(lambda: _record_output(args, stem), light=spec.takes("light"))
        prep.start()

    error: BaseException | None = None
    progress = Progress()
    if started is not None:
        # An engine in its own process: what this one allocates is imports and the
        # profile's JSON (trees of dicts, no cycles), which Python's cyclic GC scanned
        # again and again (~10 % of the imports' CPU, more of the profile's conversion).
        import gc

        gc.disable()
    try:
        with StatusLine(lambda: progress.poll() if progress.poll else None):
            rec = record(
                args.script,
                engine=engine,
                sample_interval=args.interval,
                max_buffer_size=args.max_buffer_size,
                args=args.args,
                workers=args.workers,
                progress=progress,
                node_args=args.node_arg,
                duration=args.duration,
                started=started,
                gate=None if prep is None else prep.output,
                until=args.until,
                clock=args.clock,
                # Node: written and summarised without numpy when it can be (recorded.py)
                light=prep is not None and spec.takes("light"),
            )
    except (JSError, KeyboardInterrupt, JsprofError) as e:
        rec = getattr(e, "recording", None)
        # An engine's own failure with samples (a page that crashed) is its notes' to say;
        # elsewhere it is jsprof's error, as before.
        if rec is None or not (isinstance(e, (JSError, KeyboardInterrupt)) or spec.part("notes")):
            raise
        error = e
    if prep is not None:
        out = prep.output()
    out = _save_recording(rec, out)
    if prep is not None:
        prep.join()  # its imports done (the summary's): this thread may import them now
    return _finish_record(spec, rec, out, error)


def _specs() -> tuple[EngineSpec, ...]:
    from .engines.registry import SPECS

    return tuple(SPECS.values())


def _cmd_attach(args: argparse.Namespace, spec: EngineSpec, where: Any) -> int:
    """`record --pid PID` / `--cdp ENDPOINT`: what already runs, through the spec's attach."""
    if args.script:
        what = "a script" if spec.runs == "scripts" else "a target to open"
        raise UsageError(f"give either {spec.attach_flag} or {what}, not both")
    for flag, given in (
        ("--workers", args.workers),
        ("--max-buffer-size", args.max_buffer_size),
    ):
        if given is not None:
            raise UsageError(
                f"{flag} does not apply to {spec.attach_option} ({spec.label} keeps every "
                "sample)"
            )
    out = _record_output(args, spec.attach_stem.format(where=where))  # before attaching
    rec = spec.attach(
        where,
        duration=args.duration,
        sample_interval=args.interval,
        **{o: getattr(args, o) for o in sorted(spec.attach_options)},
    )
    out = _save_recording(rec, out)
    return _finish_record(spec, rec, out, None, attached=True)


def _finish_record(
    spec: EngineSpec, rec: Recording, out: str, error: BaseException | None,
    attached: bool = False,
) -> int:
    """The summary and the exit status. An engine with its own ending (`notes`: a page's
    errors and crashes) says it after the summary, with the page's status; otherwise the
    script's error, or its own status (0 for a program attached to)."""
    from .record import exit_status

    notes = spec.part("notes")
    if notes is not None:
        from .render.summary import print_recording_summary

        lines, status = notes(rec, exit_status(rec))

        def say() -> None:
            # through the page's scripts' maps, as on the other engines
            print_recording_summary(rec, out, mapped=_through_maps(rec))
            for line in lines:
                print(line, file=sys.stderr)

        _tell(say)  # the reader gone (`2>&1 | head`): the status stays the page's
        return status
    if error is not None:
        return _finish_partial(error, out)
    _tell(_summarize_recording, rec, out)
    return 0 if attached else exit_status(rec)


def _hint_command(args: argparse.Namespace) -> None:
    """`record --engine node npm test`: no file `npm`, but a command on PATH; say how to
    record a command instead of only that there is no such file."""
    import shlex
    import shutil

    word = args.script
    if os.path.exists(word) or "/" in word or shutil.which(word) is None:
        return
    cmd = shlex.join([word, *args.args])
    raise UsageError(
        f"{word}: no such script file, but a command on PATH; to record every Node process "
        f"a command starts, put it after --: jsprof record --engine node -- {cmd}"
    )


def _is_script_file(word: str) -> bool:
    """`record -- app.js`: an existing .js/.mjs/.cjs file after `--` is still the script."""
    from .engines.registry import SCRIPT_EXTENSIONS

    return os.path.isfile(word) and word.lower().endswith(SCRIPT_EXTENSIONS)


def _cmd_record_command(args: argparse.Namespace, engine: str) -> int:
    """`record --engine node -- COMMAND ARGS`: every Node process the command starts, a
    track each; exits with the command's status."""
    from .engines.registry import engine_spec
    from .record import Progress, exit_status, record_command
    from .render.summary import StatusLine

    spec = engine_spec(engine)
    spec.check_command(args.script)  # before the options and the output: likelier mistakes
    if args.node_arg:
        raise UsageError(
            "--node-arg goes with a script; a command's Node processes take their flags from "
            "NODE_OPTIONS (jsprof adds its own to yours)"
        )
    if args.workers is not None:
        raise UsageError("--workers runs QuickJS runtimes; use --engine quickjs with a script")
    spec.check_max_buffer_size(args.max_buffer_size)
    stem = os.path.basename(args.script) or "command"
    out = _record_output(args, f"{stem}.{engine}")
    error: BaseException | None = None
    progress = Progress()
    try:
        with StatusLine(lambda: progress.poll() if progress.poll else None):
            rec = record_command(
                [args.script, *args.args],
                engine=engine,
                sample_interval=args.interval,
                duration=args.duration,
                progress=progress,
            )
    except KeyboardInterrupt as e:
        rec = getattr(e, "recording", None)
        if rec is None:
            raise
        error = e
    out = _save_recording(rec, out)
    if error is not None:
        return _finish_partial(error, out)
    _tell(_summarize_recording, rec, out)
    return exit_status(rec)


def cmd_run(args: argparse.Namespace) -> int:
    from .engines.registry import engine_spec
    from .record import not_parsed, not_parsed_here, run

    engine_spec(args.engine or "quickjs").check_clock(args.clock)
    if engine_spec(args.engine).runs == "pages":
        # A page's run: the browser's own Profiler; its errors are the page's to print,
        # but for a script that does not parse (nothing ran), said in one line as below.
        try:
            return int(engine_spec(args.engine).run(
                args.script,
                args.args,
                allow_profiling=not args.no_profiling,
                until=getattr(args, "until", None),
                duration=getattr(args, "duration", None),
            ) or 0)
        except JSError as e:
            if not_parsed_here(args.script, e):
                raise not_parsed(args.script, e, "run") from None
            raise
    try:
        code = run(
            args.script,
            args.args,
            engine=args.engine,
            allow_profiling=not args.no_profiling,
            node_args=args.node_arg,
            clock=args.clock,
        )
    except JSError as e:
        if not_parsed_here(args.script, e):
            # Nothing of it ran: the user's mistake, said in one line (exit 2), as record.
            raise not_parsed(args.script, e, "run") from None
        _tell(_print_js_error, e)
        return 1
    except KeyboardInterrupt as e:
        _tell(print, "jsprof: interrupted", file=sys.stderr)
        return 128 + getattr(e, "signum", 2)
    code = int(code or 0)
    # Node killed by a signal: the shell's status for it, as `node` itself would give.
    return 128 - code if code < 0 else code


# ---- instrument ---------------------------------------------------------------------------


def cmd_instrument(args: argparse.Namespace) -> int:
    import orjson

    from . import io
    from .instrument import parse_watch, run_instrumented
    from .record import check_script, not_parsed, not_parsed_here
    from .render.base import emit
    from .render.methods import MethodsTable, nothing_ran
    from .render.summary import stderr_console
    from .words import printable

    top = _top(args, default=None)
    check_script(args.script, args.engine)
    watch = parse_watch(args.watch)
    # Outputs are checked before the run: a bad name must not cost the program's work.
    for out in (args.output, args.trace):
        if out == "-":
            raise UsageError("-o/--trace -: stdout belongs to the program; give a file name")
        if out is not None:
            io.check_output(out)
    if args.trace is not None:
        from .formats import writer_for

        writer_for(args.trace, None, option=None)  # instrument has no --format
    error: BaseException | None = None
    try:
        result = run_instrumented(
            args.script,
            watch,
            engine=args.engine,
            args=args.args,
            by_instance=args.by_instance,
            spans=args.trace is not None,
        )
    except (JSError, KeyboardInterrupt) as e:
        result = getattr(e, "result", None)
        if result is None:
            raise
        error = e
        if not_parsed_here(args.script, e):
            # Nothing of it ran: the user's mistake, said in one line (exit 2), as record.
            raise not_parsed(args.script, e, "instrument") from None
    except JsprofError as e:
        code = getattr(e, "exit_code", None)
        if not isinstance(code, int) or code >= 0:
            raise
        # Node died of a signal before it could report: its status, as `record` exits.
        _tell(print, f"jsprof: {e}", file=sys.stderr)
        return 128 - code
    created = {c.get("name") for c in result.classes}
    unmatched = [n for n in watch if n != "*" and n not in created]
    if unmatched and len(unmatched) == len(watch) and error is None:
        # Nothing was watched: a misspelt name, not an answer ("no method ran").
        names = printable(", ".join(sorted(n for n in created if n)[:20])) or "none"
        raise UsageError(
            f"--watch {','.join(unmatched)}: {args.script} created no class of that name "
            f"(classes it created: {names}); give one of those, or '*' for every class"
        )
    # The outputs first: a reader that went away must not cost them.
    if args.output:
        io.atomic_write(args.output, orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2))
    if args.trace:
        io.save(result.recording, args.trace)

    def say() -> None:
        # The program owns stdout: the report and notes go to stderr.
        # With no rows at all, the report's one line says it (with the classes created).
        for name in unmatched if result.rows or len(unmatched) < len(watch) else ():
            print(f"jsprof: warning: --watch {name}: no class of that name was created",
                  file=sys.stderr)
        for out in (args.output, args.trace):
            if out:
                print(f"wrote {out}", file=sys.stderr)
        title = f"{args.script} · {args.engine} · watching {', '.join(watch)}"
        empty = nothing_ran(args.script, watch, result.classes)
        emit(MethodsTable(stderr_console(), title, top, empty), [r.to_json() for r in result.rows])
        if isinstance(error, KeyboardInterrupt):
            print("jsprof: interrupted; the calls counted so far were kept", file=sys.stderr)

    _tell(say)
    if isinstance(error, KeyboardInterrupt):
        return 128 + getattr(error, "signum", 2)
    code = getattr(error, "exit_code", None)
    if isinstance(code, int):
        # Node's own status (it printed its own error, if any), as `record` exits.
        return 128 - code if code < 0 else code
    if error is not None:
        raise error
    return 0


# ---- parser ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the problem and where to read more, not the usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if message.startswith("the following arguments are required: COMMAND"):
            message = "give a command (report, record, flame, diff, convert, ...)"
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")


MAX_INTERVAL_MS = 1000.0  # coarser than a sample a second says little about where time goes


_nonneg_float = nonneg_float


def _positive_float(s: str) -> float:
    v = _nonneg_float(s)
    if v == 0:
        raise argparse.ArgumentTypeError("must be more than 0 (leave the option out for no limit)")
    return v


def _interval(s: str) -> float:
    v = _nonneg_float(s)
    if v > MAX_INTERVAL_MS:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_INTERVAL_MS:g} ms, got {s} (the interval is in milliseconds)"
        )
    return v


def _add_top_args(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--top", type=positive_int, metavar="N", help=f"rows to show ({default})")
    p.add_argument("--all", action="store_true", help="show every row")


def _add_wide_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wide",
        action="store_true",
        help="print names and locations whole on a terminal too (there they are elided in the "
        "middle to fit its width; piped output always has them whole)",
    )


def _add_track_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--track", metavar="NAME",
                   help=what + "; NAME or its unique start (a command's process: its "
                   "script or the script's file name, e.g. tsc)")


_ENGINE_HELP = "the engine that runs the script (default quickjs)"
_SCRIPT_HELP = "the .js or .mjs script to run"
_ARGS_HELP = "arguments for the script (everything after it)"
_CLOCK_ARG: dict[str, Any] = {
    "choices": ("wall", "cpu"),  # meta.CLOCKS, spelled here: --help imports nothing
    "default": "wall",
    "help": "what a sample stands for: wall (default: an interval of elapsed time, "
    "waiting and other processes' load included) or cpu (QuickJS: an interval of the "
    "script's CPU time, so load and timers add none: the clock for CI gates on shared "
    "machines); node and chromium sample wall time only",
}

_DIFF_EPILOG = """\
--fail-if rules (repeatable; `jsprof diff` exits 1 when one breaks, 2 on an error):
  NAME:self>+Nms    NAME's self time grew by more than N milliseconds
  NAME:self>+Npp    NAME's share of self time grew by more than N percentage points
  NAME:total>+N%    NAME's share of total time grew by more than N percent of itself
  NAME:self<-Npp    `<` fails when the change is below the value (e.g. a fast path lost)
  *:self>+Npp       `*` as NAME: any function
NAME is a function name as the report shows it (any resource); `(anonymous app.js:8)` one
anonymous function, `(anonymous)` all of them. A rule that names no function is an error
(exit 2). Examples:
  jsprof diff base.json new.json --fail-if 'fib:self>+50ms'
  jsprof diff base.json new.json --fail-if 'render:total>+20%' --fail-if '*:self>+10pp'
"""


_NODE_ARG: dict[str, Any] = {
    "metavar": "FLAG",
    "action": "append",
    "default": [],
    "help": "a flag for Node itself, e.g. --node-arg=--max-old-space-size=4096 (repeatable; "
    "the node binary is $JSPROF_NODE, else node on PATH)",
}

# name -> (module with add_parser(subparsers), the help its add_parser gives)
PACKAGE_COMMANDS = {
    "serve": (
        "jsprof.serve.cli",
        "collect ProfilerTraces from browsers (HTTP collector with an embedded store)",
    ),
    "fleet": (
        "jsprof.fleet.cli",
        "query the field store: top functions, merged flame graph, release diff",
    ),
}
ALL_COMMANDS = "*"


def build_parser(command: str | None = ALL_COMMANDS) -> argparse.ArgumentParser:
    """The parser; `command` (the subcommand about to run) spares building the parsers of
    the package commands (serve, fleet) that will not run; the default builds them all."""
    from . import __version__
    from .engines.registry import INSTRUMENT_NAMES as INSTRUMENT_ENGINES
    from .engines.registry import NAMES as ENGINE_NAMES  # stdlib only: no engine is imported

    p = _Parser(
        prog="jsprof",
        description="Profile JavaScript on real engines; read and write JS Self-Profiling traces.",
    )
    p.add_argument("--version", action="version", version=f"jsprof {__version__}")
    sub = _CommandParsers(
        p.add_subparsers(dest="command", metavar="COMMAND", required=True), command
    )

    r = sub.add_parser(
        "report",
        help="print self/total time per function, resource or line",
        description="Self and total time per function (or resource, or line), or the call "
        "tree. Columns: self %, total %, self ms, total ms, function, location.",
    )
    r.add_argument("trace", type=path, help="a trace file (any format jsprof reads; - for stdin)")
    _add_top_args(r, "default 20")
    r.add_argument(
        "--by",
        choices=("function", "resource", "line"),
        help="what a row is (default function; line: the line executing in the leaf frame)",
    )
    r.add_argument(
        "--sort", choices=("self", "total"), help="order rows by self or total time (default self)"
    )
    r.add_argument("--tree", action="store_true", help="print the call tree instead of a table")
    r.add_argument(
        "--threshold",
        type=_nonneg_float,
        metavar="PCT",
        help="with --tree: hide nodes below this %% of all time (default 1)",
    )
    _add_track_arg(r, "only this track (default: all tracks together)")
    r.add_argument("--json", action="store_true", help="print the numbers as JSON")
    _add_wide_arg(r)
    _add_filter_args(r)
    r.set_defaults(func=cmd_report)

    v = sub.add_parser("validate", help="check a trace file; print counts or the first problem")
    v.add_argument("trace", type=path, help="a trace file (any format jsprof reads; - for stdin)")
    v.set_defaults(func=cmd_validate)

    c = sub.add_parser("convert", help="convert between trace formats (input sniffed from content)")
    c.add_argument("input", type=path, help="a trace file (any format jsprof reads; - for stdin)")
    c.add_argument(
        "output", type=path, help="output path (- for stdout); the extension picks the format")
    c.add_argument(
        "--format", metavar="NAME", help="output format, when the extension does not say "
        "(see `jsprof formats`)"
    )
    _add_track_arg(c, "only this track (e.g. for a one-thread .cpuprofile)")
    _add_filter_args(c)
    c.set_defaults(func=cmd_convert)

    f = sub.add_parser("formats", help="list the trace formats jsprof reads and writes")
    f.set_defaults(func=cmd_formats)

    up = sub.add_parser(
        "upload", help="send recordings (any format jsprof reads) to a jsprof serve collector"
    )
    up.add_argument("files", nargs="+", type=path, metavar="FILE",
                    help="recordings (any engine, any format jsprof reads); each track one upload")
    up.add_argument("--url", required=True, help="the collector, http(s)://HOST:PORT")
    up.add_argument("--app", required=True, help="the app the uploads are for")
    up.add_argument("--key-file", required=True, type=path, metavar="F",
                    help="a file holding the app's ingest key (first line); never the key itself")
    up.add_argument("--release", help="the release label of the uploads")
    up.add_argument("--route", help="the route label of the uploads")
    up.add_argument("--env", help="the env label of the uploads")
    up.set_defaults(func=cmd_upload)

    fl = sub.add_parser("flame", help="write a flame graph (self-contained .html or .svg)")
    fl.add_argument("trace", type=path, help="a trace file (any format jsprof reads; - for stdin)")
    fl.add_argument(
        "-o", "--output", type=path,
        metavar="OUT", help="flame.html or flame.svg (default TRACE.html)"
    )
    fl.add_argument("--open", action="store_true", help="open the flame graph in a browser")
    fl.add_argument("--icicle", action="store_true", help="roots at the top, growing down")
    fl.add_argument(
        "--color-by",
        choices=("resource", "function"),
        default="resource",
        help="one colour per resource (script) or per function (default resource)",
    )
    src = fl.add_mutually_exclusive_group()
    src.add_argument(
        "--embed-source",
        type=path,
        metavar="DIR",
        help="the source view shows local scripts in the trace's folder or the current one "
        "(not / or your home folder: name those here) and a source map's sources, never "
        "other files a trace names; also scripts in DIR: "
        "local ones, and http:// pages' by URL path or file name",
    )
    src.add_argument(
        "--no-source",
        action="store_true",
        help="put no source text in the page (its source view keeps the per-line numbers)",
    )
    _add_track_arg(fl, "only this track (default: all tracks together)")
    _add_filter_args(fl)
    fl.set_defaults(func=cmd_flame)

    df = sub.add_parser(
        "diff",
        help="compare two runs by each function's time (a CI gate)",
        description="Compare NEW against BASE function by function: the change in self and "
        "total ms and in share of all time, largest change in self ms first. Exits 0, 1 when "
        "a --fail-if rule breaks, 2 on an error.",
        epilog=_DIFF_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    df.add_argument("base", type=path, help="the baseline trace")
    df.add_argument("new", type=path, help="the trace to compare against it")
    _add_top_args(df, "default 20")
    df.add_argument("--json", action="store_true", help="print the numbers as JSON")
    _add_wide_arg(df)
    df.add_argument(
        "--flame", type=path,
        metavar="OUT", help="also write a differential flame graph (.html or .svg)"
    )
    df.add_argument("--icicle", action="store_true", help="with --flame: roots at the top")
    _add_track_arg(df, "only this track, in both profiles")
    df.add_argument(
        "--fail-if",
        metavar="RULE",
        action="append",
        default=[],
        help="exit 1 when a function got worse than RULE, e.g. 'fib:self>+50ms', "
        "'fib:self>+5pp' or 'render:total>+20%%' (syntax below); repeatable",
    )
    df.add_argument(
        "--strip-prefix",
        metavar="PREFIX",
        action="append",
        default=[],
        help="match resources relative to PREFIX (a path or URL cut off the front), e.g. "
        "each checkout's root, to compare profiles made in two places; repeatable",
    )
    _add_filter_args(df)
    df.set_defaults(func=cmd_diff)

    bu = sub.add_parser(
        "budget",
        help="is NEW slower than BASE beyond a budget? (interleaved runs, statistics; CI)",
        description="Run BASE and NEW in interleaved rounds on the engine until the 95% "
        "interval of NEW's relative change is decided against the budget: slower (the whole "
        "interval above +B%), faster (below -B%), same (inside), else unsure when the "
        "rounds or time run out. When it changed, the functions that changed are named "
        "(self ms per run, intervals), the one that explains most first. Exits 0 (same, "
        "faster), 1 (slower), 3 (unsure), 2 on an error.",
    )
    bu.add_argument("base", type=path, help="the baseline script (chromium: page or URL)")
    bu.add_argument("new", type=path, help="the script to hold to the budget")
    bu.add_argument("--engine", choices=ENGINE_NAMES, default="quickjs", help=_ENGINE_HELP)
    bu.add_argument("--max-slower", type=_percent, metavar="P",
                    help="the slowdown allowed, in percent (default 5%% unless "
                    "--max-slower-ms is given)")
    bu.add_argument("--max-slower-ms", type=_nonneg_float, metavar="MS",
                    help="the slowdown allowed in ms per run (with --max-slower: the larger "
                    "of the two)")
    bu.add_argument("--min-rounds", type=positive_int, default=10, metavar="N",
                    help="rounds before the first look (default 10)")
    bu.add_argument("--max-rounds", type=positive_int, default=300, metavar="N",
                    help="rounds at most (default 300)")
    bu.add_argument("--time-cap", type=_positive_float, default=120.0, metavar="S",
                    help="seconds at most; unsure when it runs out (default 120)")
    bu.add_argument("--interval", type=_interval, default=1.0, metavar="MS",
                    help="sampling interval in ms (default 1)")
    bu.add_argument("--clock", choices=("wall", "cpu"),
                    help="what a run's time is: cpu (default on quickjs: its CPU time, what "
                    "load does not inflate) or wall (node and chromium)")
    bu.add_argument("--measure", metavar="NAME",
                    help="chromium: the page's performance.measure NAME is the number "
                    "(the page ends once it made it)")
    bu.add_argument("--until", metavar="WHEN", help="chromium: when the page ends (see record)")
    bu.add_argument("--json", action="store_true", help="print the verdict as JSON")
    bu.add_argument("--flame", type=path, metavar="OUT.html",
                    help="also write the rounds' differential flame graph (an artifact)")
    bu.set_defaults(func=cmd_budget)

    rc = sub.add_parser(
        "record",
        help="run a script under the sampling profiler and write its trace",
        description="Profile a script (QuickJS by default, or Node), every Node process a "
        "command starts (--engine node -- npm test), or attach to a running "
        "Node process with --pid. The trace keeps the samples taken so far when the script "
        "throws or is interrupted.",
    )
    rc.add_argument("--engine", choices=ENGINE_NAMES, help=_ENGINE_HELP)
    rc.add_argument(
        "--interval",
        type=_interval,
        default=1.0,
        metavar="MS",
        help=f"sampling interval in ms (default 1; 0 = the engine's minimum; at most "
        f"{MAX_INTERVAL_MS:g})",
    )
    rc.add_argument("--clock", **_CLOCK_ARG)
    rc.add_argument(
        "--max-buffer-size",
        type=positive_int,
        metavar="N",
        help="QuickJS: most samples to keep (default: an hour at 1 ms)",
    )
    rc.add_argument(
        "-o",
        "--output",
        type=path,
        metavar="OUT",
        help="output file, replaced if it exists; the extension picks the format (default: "
        "APP.ENGINE.jsprof.json in the current directory, or the next free APP.ENGINE.N.jsprof."
        "json: never an earlier recording)",
    )
    rc.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="QuickJS: run N copies on N threads (each sees jsprof.worker)",
    )
    rc.add_argument("--pid", type=positive_int, help="attach to a running Node process")
    rc.add_argument(
        "--duration",
        type=_positive_float,
        metavar="S",
        help="seconds to record at most, then end the script (or detach from --pid/--cdp) "
        "and keep the trace; exits 0 (default: until the script ends or Ctrl-C; chromium: "
        "until the --until rule)",
    )
    rc.add_argument("--node-arg", **_NODE_ARG)
    rc.add_argument(
        "--until",
        metavar="WHEN",
        help="chromium: `load` (default: the load event, then nothing pending for 500 ms) "
        "or js:EXPR (until EXPR is truthy in the page)",
    )
    rc.add_argument(
        "--cdp",
        metavar="ENDPOINT",
        help="attach to a running browser's remote debugging (http://127.0.0.1:9222)",
    )
    rc.add_argument("--target", metavar="SUBSTRING", help="with --cdp: the tab whose URL has it")
    rc.add_argument(
        "--allow-remote", action="store_true", help="with --cdp: allow a non-loopback endpoint"
    )
    rc.add_argument(
        "script", nargs="?", type=path,
        help="the .js or .mjs script to run (chromium: also .html or a URL); node: `-- "
        "COMMAND ARGS` runs a command found on PATH (npm test) and records every Node "
        "process it starts, a track each"
    )
    rc.add_argument("args", nargs=argparse.REMAINDER, help=_ARGS_HELP)
    rc.set_defaults(func=cmd_record)

    rn = sub.add_parser("run", help="run a script with the spec's Profiler global available")
    rn.add_argument(
        "--engine", choices=ENGINE_NAMES, default="quickjs", help=_ENGINE_HELP
    )
    rn.add_argument(
        "--no-profiling",
        action="store_true",
        help="forbid profiling: `new Profiler(...)` throws NotAllowedError",
    )
    rn.add_argument("--clock", **{**_CLOCK_ARG, "help": "quickjs: what the script's Profilers "
                    "sample on: wall (default) or cpu (its CPU time; see record --clock)"})
    rn.add_argument("--node-arg", **_NODE_ARG)
    rn.add_argument("script", type=path, help=_SCRIPT_HELP)
    rn.add_argument("args", nargs=argparse.REMAINDER, help=_ARGS_HELP)
    rn.set_defaults(func=cmd_run)

    ins = sub.add_parser(
        "instrument", help="run a script with classes' methods wrapped: exact calls and times"
    )
    ins.add_argument(
        "--watch", required=True, metavar="NAMES", help="classes to watch: Shape,Store or '*'"
    )
    ins.add_argument(
        "--engine", choices=INSTRUMENT_ENGINES, default="quickjs", help=_ENGINE_HELP
    )
    ins.add_argument("-o", "--output", type=path, metavar="OUT.json", help="write the rows as JSON")
    ins.add_argument(
        "--trace", type=path, metavar="OUT", help="write the calls as spans (format by extension)"
    )
    ins.add_argument("--by-instance", action="store_true", help="one row per instance")
    _add_top_args(ins, "default all")
    ins.add_argument("script", type=path, help=_SCRIPT_HELP)
    ins.add_argument("args", nargs=argparse.REMAINDER, help=_ARGS_HELP)
    ins.set_defaults(func=cmd_instrument)

    # Commands that parse their own options in their own package. Their parsers are built
    # only when that command runs (or for the full parser): `jsprof --help` and every other
    # command list them by name and help without importing them (start-up, issue 16).
    import importlib

    for name, (module, help_text) in PACKAGE_COMMANDS.items():
        if command in (ALL_COMMANDS, name):
            importlib.import_module(module).add_parser(sub.action)
        else:
            sub.action.add_parser(name, help=help_text, add_help=False)

    return p


class _CommandParsers:
    """The subcommands' parsers as `build_parser` adds them: with a `command` to run, only
    its own is built; each other command is listed by name and help (what `jsprof --help`
    and an unknown command's error say) and its options are not added: ~5 ms of every
    `jsprof record`'s start-up spent on nine parsers that would not run (issue 32)."""

    def __init__(self, action: Any, command: str | None) -> None:
        self.action = action
        self.command = command

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if self.command in (ALL_COMMANDS, None, name):
            return self.action.add_parser(name, **kwargs)
        self.action.add_parser(name, help=kwargs.get("help"), add_help=False)
        return _UNBUILT


class _Unbuilt:
    """A parser not built: every call on it (add_argument, set_defaults...) does nothing."""

    def __getattr__(self, name: str) -> Callable[..., _Unbuilt]:
        return lambda *args, **kwargs: self


_UNBUILT = _Unbuilt()


def _require_extras(args: argparse.Namespace) -> None:
    """serve and fleet run on the field extra, `fleet --engine dask` on the dask extra: a
    core install says which to pip install before the command starts (exit 2, one line)."""
    if args.command not in PACKAGE_COMMANDS:
        return
    from .extras import require

    if getattr(args, "engine", None) == "dask":
        require("dask", f"jsprof {args.command} --engine dask")
    require("field", f"jsprof {args.command}")


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _innermost_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the (sub)subcommand that ran (`jsprof fleet top`'s for that one)."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if name is None or name not in subs[0].choices:
            return parser
        parser = subs[0].choices[name]


def _note_options_after_the_script(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str]
) -> None:
    """`jsprof record app.js -o out.json`: everything after the script is the script's,
    so -o never reaches jsprof. Say so, once, rather than leave the user to wonder.
    Words after a `--` were given to the script on purpose (`record --engine node -- tsc
    --target es2020`: tsc's own --target): no note for those."""
    words = list(getattr(args, "args", None) or [])
    if "--" in argv:  # the script's arguments end argv: drop those after the `--`
        after = len(argv) - argv.index("--") - 1
        words = words[: max(0, len(words) - after)]
    ours = [
        a for a in words
        if a.startswith("-") and a.split("=", 1)[0] in parser._option_string_actions
        and a not in ("-h", "--help")
    ]
    if ours and getattr(args, "script", None):
        print(
            f"jsprof: note: {' '.join(ours)} after the script goes to the script; put "
            f"{parser.prog}'s own options before {args.script}",
            file=sys.stderr,
        )


def _script_after_dashdash(argv: list[str], args: argparse.Namespace) -> bool:
    """Whether the script word came right after the first `--` (`record -- npm test`: a
    command), not before it (`record app.js -- x`: argparse drops that `--` alike)."""
    script = getattr(args, "script", None)
    if script is None or "--" not in argv:
        return False
    i = argv.index("--")
    return argv[i + 1 : i + 2] == [script] and list(args.args or ()) == argv[i + 2 :]


_RUNS_SCRIPTS = ("record", "run", "instrument")


def _sigint_ends_the_run() -> None:
    """Ctrl-C (SIGINT) ends every engine's run the same way, samples kept (exit 130), also
    when jsprof inherited SIGINT ignored (started in the background by a shell script, or
    by a parent that ignores it): Python keeps an inherited SIG_IGN, so QuickJS, whose run
    stops through Python's KeyboardInterrupt, ran on until killed (10 minutes, until a
    SIGTERM), while Node and Chromium, which set their own handler, stopped. The engine's
    process keeps the disposition jsprof was given (`_process.dies_with_jsprof`)."""
    import signal
    import threading

    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) == signal.SIG_IGN):
        from .engines import _process

        _process.SIGINT_IGNORED = True
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command_word(argv)
    parser = build_parser(command)
    stray = [a for a in argv if a.startswith("-") and a not in ("-h", "--help", "--version")]
    if command is None and stray:
        # argparse would only say a command is missing; the stray option is the news.
        parser.error(
            f"unrecognized arguments: {' '.join(stray)}; give a command first (report, "
            "record, flame, diff, convert, ...)"
        )
    args, extra = parser.parse_known_args(argv)
    if extra:
        # An option the subcommand does not know: point to that subcommand's help.
        _innermost_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    _note_options_after_the_script(_innermost_parser(parser, args), args, argv)
    args.dashdash = _script_after_dashdash(argv, args)
    # The exit-code rule: 2 for every error of jsprof's (a wrong option, a missing,
    # unreadable or broken input, an engine that would not run); 1 is an answer ("a
    # --fail-if rule broke", "this file is not a valid trace") or the script's own error;
    # record/run/instrument otherwise exit with the script's status.
    if command in _RUNS_SCRIPTS:
        _sigint_ends_the_run()
    try:
        _require_extras(args)
        return int(args.func(args) or 0)
    except JSError as e:  # the profiled program's error: its JS stack helps, ours would not
        _tell(_print_js_error, e)
        return 1
    except JsprofError as e:
        _tell(print, f"jsprof: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jsprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `report | head`): not an error worth a traceback.
        _streams_gone()
        return 0


if __name__ == "__main__":
    sys.exit(main())
