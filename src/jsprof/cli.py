"""The `jsprof` command: argument parsing and wiring only."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

from .errors import JSError, JsprofError, UsageError

# Start-up is what users of short scripts feel: `jsprof --help` must not pay for numpy, rich,
# the formats or the engines, so every command imports what it uses when it runs.
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console

    from .trace import Recording


def _console() -> Console:
    from rich.console import Console

    # Piped output (CI logs, files) should not wrap at rich's 80-column default.
    width = None if sys.stdout.isatty() else 200
    return Console(highlight=False, width=width)


def _print_json(obj: object) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


# ---- shared filters ----------------------------------------------------------------------


def _add_filter_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters (source maps first, then in the order listed)")
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
        help="hide node:internal frames (their time goes to the caller)",
    )


def _load(path: str, args: argparse.Namespace) -> Recording:
    """Load a trace and apply the shared filters the command was given."""
    from . import io
    from .analysis import filters

    rec = io.load(path)
    if getattr(args, "sourcemap", None) is not None:
        from .analysis import sourcemap

        rec = sourcemap.apply(rec, args.sourcemap or None)
    if getattr(args, "time_range", None):
        try:
            start, end = filters.parse_time_range(args.time_range)
        except ValueError as e:
            raise UsageError(f"--time-range: {e}") from None
        rec = filters.time_range(rec, start, end)
    for name in getattr(args, "focus", ()):
        rec = filters.focus(rec, name)
    for name in getattr(args, "exclude", ()):
        rec = filters.exclude(rec, name)
    if getattr(args, "hide_internal", False):
        rec = filters.hide_internal(rec)
    return rec


# ---- report ------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    from .analysis.calltree import build_call_tree
    from .analysis.profile import hot_lines, summarize
    from .render import console as render

    rec = _load(args.trace, args)
    if args.track is not None:
        rec.track(args.track)  # a clear error for an unknown name, before any work
    if args.tree:
        tree = build_call_tree(rec, args.track)
        if args.json:
            _print_json({"tree": render.tree_json(tree, args.threshold)})
        else:
            c = _console()
            for line in render.tree_lines(tree, args.threshold):
                c.print(line, markup=False, highlight=False, soft_wrap=True)
        return 0
    if args.by == "line":
        summary = hot_lines(rec, args.track)
        if summary is None:
            raise UsageError(
                f"{args.trace}: has no per-sample line data (the engine did not record it); "
                "use --by function"
            )
    else:
        summary = summarize(rec, by=args.by, track=args.track)
    if args.json:
        _print_json(render.summary_json(summary, args.top, args.by, args.sort))
    else:
        title = _title(rec, args.track)
        render.print_summary(_console(), summary, args.top, args.by, title, args.sort)
    return 0


def _title(rec: Recording, track: str | None) -> str:
    tracks = [rec.track(track)] if track else rec.tracks
    parts = []
    for t in tracks:
        bits = [t.name]
        if t.engine:
            bits.append(t.engine)
        if t.sample_interval:
            bits.append(f"{t.sample_interval:g} ms interval")
        parts.append(" · ".join(bits))
    return "; ".join(parts)


# ---- validate, convert, formats ----------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    import numpy as np

    from . import io

    rec = io.load(args.trace)
    for t in rec.tracks:
        tr = t.trace
        d = np.diff(tr.sample_time)
        back = int((d < 0).sum())
        note = ""
        if back:
            note = f"; note: {back} timestamps go backwards (kept in order, counted as 0 ms)"
        print(
            f"OK {args.trace} track {t.name!r}: {len(tr.resources)} resources, "
            f"{len(tr.frames)} frames, {tr.num_stacks} stacks, {tr.num_samples} samples"
            f"{note}"
        )
    return 0


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


# Output formats that keep each sample's weight (README, "Formats").
WEIGHTED_FORMATS = frozenset({"jsprof", "speedscope", "pprof"})


def cmd_convert(args: argparse.Namespace) -> int:
    from . import io
    from .formats import writer_for
    from .trace import Recording

    fmt = writer_for(args.output, args.format)  # a bad output name fails before a long read
    with _progress("reading", args.input):
        rec = _load(args.input, args)
    if args.track is not None:
        rec = Recording([rec.track(args.track)])
    with _progress("writing", args.input):
        io.save(rec, args.output, format=args.format)
    if args.output != "-":
        print(
            f"wrote {args.output} ({rec.num_samples} samples, {len(rec.tracks)} track(s))",
            file=sys.stderr,
        )
    if fmt.name not in WEIGHTED_FORMATS and any(
        t.trace.sample_weight is not None for t in rec.tracks
    ):
        print(
            f"note: {fmt.name} has no per-sample weights: read back, each kept sample is "
            "charged the gap to the next kept one; write .jsprof.json, .speedscope.json or "
            ".pb.gz to keep the filtered times",
            file=sys.stderr,
        )
    return 0


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


def _flame_format(path: str) -> str:
    low = path.lower()
    if low.endswith(".svg"):
        return "svg"
    if low.endswith((".html", ".htm")):
        return "html"
    raise UsageError(f"{path}: a flame graph is written as .html or .svg; use one of those")


def cmd_flame(args: argparse.Namespace) -> int:
    from . import io
    from .analysis.calltree import build_call_tree
    from .render.flame import render_flame

    fmt = _flame_format(args.output)  # before loading: a bad name should not cost a parse
    rec = _load(args.trace, args)
    if args.track is not None:
        rec.track(args.track)
    tree = build_call_tree(rec, args.track)
    if not tree.total_time > 0:
        raise UsageError(f"{args.trace}: has no samples; there is nothing to draw")
    tracks = [rec.track(args.track)] if args.track else rec.tracks
    samples = sum(t.trace.num_samples for t in tracks)
    doc = render_flame(
        tree,
        fmt,
        title=os.path.basename(args.trace),
        subtitle=f"{tree.total_time:.1f} ms · {samples} samples · {_title(rec, args.track)}",
        icicle=args.icicle,
        color_by=args.color_by,
    )
    io.atomic_write(args.output, doc.encode("utf-8"))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


# ---- diff ---------------------------------------------------------------------------------


def cmd_diff(args: argparse.Namespace) -> int:
    from . import io
    from .analysis.calltree import build_call_tree
    from .analysis.diff import check_gates, diff_profiles, parse_gate, tree_changes
    from .render import console as render
    from .render.flame import render_flame

    # Bad rules and output names fail before any parsing work.
    gates = [parse_gate(spec) for spec in args.fail_if]
    fmt = _flame_format(args.flame) if args.flame else None
    base, new = _load(args.base, args), _load(args.new, args)
    if args.track is not None:
        base.track(args.track)
        new.track(args.track)
    d = diff_profiles(base, new, args.track)
    if args.json:
        _print_json(render.diff_json(d, args.top))
    else:
        title = f"{args.new} vs {args.base} (change in share of all time, percentage points)"
        render.print_diff(_console(), d, args.top, title)
    if fmt is not None:
        new_tree = build_call_tree(new, args.track)
        change = tree_changes(build_call_tree(base, args.track), new_tree)
        doc = render_flame(
            new_tree,
            fmt,
            title=f"{os.path.basename(args.new)} vs {os.path.basename(args.base)}",
            subtitle="shape of NEW; red: larger self share than BASE, blue: smaller",
            icicle=args.icicle,
            change=change,
        )
        io.atomic_write(args.flame, doc.encode("utf-8"))
        print(f"wrote {args.flame}", file=sys.stderr)
    for g in gates:
        if not d.find(g.name):
            # A typo in a CI rule would otherwise pass silently forever.
            print(f"jsprof: warning: --fail-if {g.spec!r} matches no function", file=sys.stderr)
    failures = check_gates(d, gates)
    for line in failures:
        print(f"jsprof: diff: {line}", file=sys.stderr)
    return 1 if failures else 0


# ---- record, run ---------------------------------------------------------------------------


def _err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def _summarize_recording(rec: Recording, out: str | None) -> None:
    """A short summary on stderr (stdout belongs to the profiled program)."""
    from rich.markup import escape

    c = _err_console()
    for t in rec.tracks:
        tr = t.trace
        span = float(tr.sample_time[-1] - tr.sample_time[0]) if tr.num_samples > 1 else 0.0
        interval = f", {t.sample_interval:g} ms interval" if t.sample_interval else ""
        lat = t.meta.get("capture_latency_ms") or {}
        latency = (
            f", capture latency p50 {lat['p50'] * 1000:.0f} µs / p99 {lat['p99'] * 1000:.0f} µs"
            if lat.get("p50") is not None and lat.get("p99") is not None
            else ""
        )
        c.print(
            f"[bold]{escape(t.name)}[/bold]: {tr.num_samples} samples over {span:.1f} ms"
            f"{interval}{latency}"
        )
        if t.meta.get("buffer_full"):
            c.print(
                f"[bold red]WARNING: the sample buffer of {escape(t.name)} filled up after "
                f"{tr.num_samples} samples; later samples were dropped. Raise --max-buffer-size "
                "or the --interval.[/bold red]"
            )
    if out:
        c.print(f"wrote {escape(out)}; see it with: jsprof report {escape(out)}")


def _finish_partial(e: BaseException, out: str | None) -> int:
    rec = getattr(e, "recording", None)
    if rec is not None:
        _summarize_recording(rec, out)
    if isinstance(e, KeyboardInterrupt):
        print("jsprof: interrupted; the samples taken so far were kept", file=sys.stderr)
        return 130
    _print_js_error(e)  # type: ignore[arg-type]
    return 1


def _print_js_error(e: JSError) -> None:
    msg = str(e)
    # Node's text already starts with its own "TypeError: ..."; don't prefix it again.
    head = msg if re.match(r"^[A-Za-z_$][\w$]*: ", msg) else f"{e.name}: {msg}"
    print(f"jsprof: uncaught JavaScript exception: {head}", file=sys.stderr)
    stack = (e.js_stack or "").rstrip()
    if stack:
        print(stack, file=sys.stderr)


def cmd_record(args: argparse.Namespace) -> int:
    from . import io
    from .record import default_output, record

    if args.pid is not None:
        if args.script:
            raise UsageError("give either --pid PID or a script, not both")
        from .engines.node import attach_node

        out = args.output or f"node-{args.pid}.jsprof.json"
        rec = attach_node(args.pid, duration=args.duration, sample_interval=args.interval)
        io.save(rec, out)
        _summarize_recording(rec, out)
        return 0
    if not args.script:
        raise UsageError("give the script to record (or --pid PID to attach to Node)")
    if args.duration is not None:
        raise UsageError("--duration goes with --pid")
    out = args.output or default_output(args.script)
    try:
        rec = record(
            args.script,
            engine=args.engine,
            sample_interval=args.interval,
            max_buffer_size=args.max_buffer_size,
            args=args.args,
            output=out,
            workers=args.workers,
        )
    except (JSError, KeyboardInterrupt) as e:
        return _finish_partial(e, out if getattr(e, "recording", None) is not None else None)
    _summarize_recording(rec, out)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .record import run

    try:
        code = run(
            args.script, args.args, engine=args.engine, allow_profiling=not args.no_profiling
        )
    except JSError as e:
        _print_js_error(e)
        return 1
    return int(code or 0)


# ---- instrument ---------------------------------------------------------------------------


def cmd_instrument(args: argparse.Namespace) -> int:
    import orjson
    from rich.console import Console

    from . import io
    from .instrument import parse_watch, run_instrumented
    from .render.methods import print_methods

    watch = parse_watch(args.watch)
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
    # The program owns stdout: the report and notes go to stderr.
    err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)
    if args.output:
        io.atomic_write(args.output, orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2))
        print(f"wrote {args.output}", file=sys.stderr)
    if args.trace:
        io.save(result.recording, args.trace)
        print(f"wrote {args.trace}", file=sys.stderr)
    title = f"{args.script} · {args.engine} · watching {', '.join(watch)}"
    print_methods(err, [r.to_json() for r in result.rows], title, args.top)
    if error is not None:
        raise error
    return 0


# ---- parser ------------------------------------------------------------------------------


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def _nonneg_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {s}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jsprof",
        description="Profile JavaScript on real engines; read and write JS Self-Profiling traces.",
    )
    from . import __version__

    p.add_argument("--version", action="version", version=f"jsprof {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser("report", help="print self/total time per function, resource or line")
    r.add_argument("trace", help="a trace file (any format jsprof reads; - for stdin)")
    r.add_argument("--top", type=_positive_int, default=20, help="rows to show (default 20)")
    r.add_argument("--all", dest="top", action="store_const", const=None, help="show every row")
    r.add_argument("--by", choices=("function", "resource", "line"), default="function")
    r.add_argument("--sort", choices=("self", "total"), default="self")
    r.add_argument("--tree", action="store_true", help="print the call tree")
    r.add_argument(
        "--threshold",
        type=_nonneg_float,
        default=1.0,
        help="--tree: hide nodes below this %% of all time (default 1)",
    )
    r.add_argument("--track", help="only this track (default: all tracks together)")
    r.add_argument("--json", action="store_true", help="print the numbers as JSON")
    _add_filter_args(r)
    r.set_defaults(func=cmd_report)

    v = sub.add_parser("validate", help="check a trace file; print counts or the first problem")
    v.add_argument("trace")
    v.set_defaults(func=cmd_validate)

    c = sub.add_parser("convert", help="convert between trace formats (input sniffed from content)")
    c.add_argument("input")
    c.add_argument("output", help="output path (- for stdout); the extension picks the format")
    c.add_argument("--format", help="output format (see `jsprof formats`)")
    c.add_argument("--track", help="only this track (e.g. for a one-thread .cpuprofile)")
    _add_filter_args(c)
    c.set_defaults(func=cmd_convert)

    f = sub.add_parser("formats", help="list the trace formats jsprof reads and writes")
    f.set_defaults(func=cmd_formats)

    fl = sub.add_parser("flame", help="write a flame graph (self-contained .html or .svg)")
    fl.add_argument("trace", help="a trace file (any format jsprof reads; - for stdin)")
    fl.add_argument("-o", "--output", required=True, help="flame.html or flame.svg")
    fl.add_argument("--icicle", action="store_true", help="roots at the top, growing down")
    fl.add_argument("--color-by", choices=("resource", "function"), default="resource")
    fl.add_argument("--track", help="only this track (default: all tracks together)")
    _add_filter_args(fl)
    fl.set_defaults(func=cmd_flame)

    df = sub.add_parser("diff", help="compare two profiles by each function's share of time")
    df.add_argument("base", help="the baseline trace")
    df.add_argument("new", help="the trace to compare against it")
    df.add_argument("--top", type=_positive_int, default=20, help="rows to show (default 20)")
    df.add_argument("--all", dest="top", action="store_const", const=None, help="every row")
    df.add_argument("--json", action="store_true", help="print the numbers as JSON")
    df.add_argument("--flame", metavar="OUT", help="also write a differential flame graph")
    df.add_argument("--icicle", action="store_true", help="--flame: roots at the top")
    df.add_argument("--track", help="only this track, in both profiles")
    df.add_argument(
        "--fail-if",
        metavar="RULE",
        action="append",
        default=[],
        help="exit 1 when a function got worse than RULE: NAME:self|total>+Npp (points of "
        "share) or >+N%% (relative); NAME * means any function; repeatable",
    )
    _add_filter_args(df)
    df.set_defaults(func=cmd_diff)

    rc = sub.add_parser(
        "record",
        help="run a script under the sampling profiler and write its trace",
        description="Profile a script (QuickJS by default, or Node), or attach to a running "
        "Node process with --pid. The trace keeps the samples taken so far when the script "
        "throws or is interrupted.",
    )
    rc.add_argument("--engine", choices=("quickjs", "node"), default="quickjs")
    rc.add_argument(
        "--interval",
        type=_nonneg_float,
        default=1.0,
        metavar="MS",
        help="sampling interval in ms (default 1; 0 = the engine's minimum)",
    )
    rc.add_argument(
        "--max-buffer-size",
        type=_positive_int,
        metavar="N",
        help="most samples to keep (default: an hour at 1 ms)",
    )
    rc.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="output file; the extension picks the format (default APP.jsprof.json)",
    )
    rc.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="QuickJS: run N copies on N threads (each sees jsprof.worker)",
    )
    rc.add_argument("--pid", type=_positive_int, help="attach to a running Node process")
    rc.add_argument(
        "--duration",
        type=_nonneg_float,
        metavar="S",
        help="with --pid: seconds to record (default: until Ctrl-C)",
    )
    rc.add_argument("script", nargs="?", help="the .js or .mjs script to run")
    rc.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    rc.set_defaults(func=cmd_record)

    rn = sub.add_parser("run", help="run a script with the spec's Profiler global available")
    rn.add_argument("--engine", choices=("quickjs", "node"), default="quickjs")
    rn.add_argument(
        "--no-profiling",
        action="store_true",
        help="forbid profiling: `new Profiler(...)` throws NotAllowedError",
    )
    rn.add_argument("script", help="the .js or .mjs script to run")
    rn.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    rn.set_defaults(func=cmd_run)

    ins = sub.add_parser(
        "instrument", help="run a script with classes' methods wrapped: exact calls and times"
    )
    ins.add_argument(
        "--watch", required=True, metavar="NAMES", help="classes to watch: Shape,Store or '*'"
    )
    ins.add_argument("--engine", choices=("quickjs", "node"), default="quickjs")
    ins.add_argument("-o", "--output", metavar="OUT.json", help="write the rows as JSON")
    ins.add_argument(
        "--trace", metavar="OUT", help="write the calls as spans (format by extension)"
    )
    ins.add_argument("--by-instance", action="store_true", help="one row per instance")
    ins.add_argument("--top", type=_positive_int, default=None, help="rows to show (default all)")
    ins.add_argument("script", help="the .js or .mjs script to run")
    ins.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    ins.set_defaults(func=cmd_instrument)

    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except JSError as e:  # the profiled program's error: its JS stack helps, ours would not
        _print_js_error(e)
        return 1
    except JsprofError as e:
        print(f"jsprof: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1
    except KeyboardInterrupt:
        print("jsprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
