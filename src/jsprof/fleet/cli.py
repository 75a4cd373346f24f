"""`jsprof fleet ...`: argument parsing and wiring only (imports nothing heavy at load)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..argtypes import nonneg_float, nonneg_int, path, positive_int
from ..render.base import emit, flame_kind, print_json  # stdlib only: the light entry
from ..words import plural, printable

DEFAULT_STORE = "./jsprof-store"
T = TypeVar("T")


def _source_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("where the data is")
    g.add_argument(
        "--store", type=path, metavar="PATH", help=f"the store (default {DEFAULT_STORE})")
    g.add_argument(
        "--url", metavar="http://HOST:PORT",
        help="ask a running `jsprof serve` instead (read token from JSPROF_READ_TOKEN)",
    )
    g.add_argument("--engine", choices=("duckdb", "dask"), default="duckdb",
                   help="query engine (default duckdb, in process)")
    g.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="--engine dask: a cluster")
    g.add_argument("--local-workers", type=positive_int, metavar="N",
                   help="--engine dask: start a local cluster of N worker processes")


def _filter_args(p: argparse.ArgumentParser, app_required: bool = True) -> None:
    g = p.add_argument_group("which uploads")
    g.add_argument("--app", required=app_required, metavar="NAME", help="the app (required)")
    g.add_argument("--release", metavar="R", help="only this release")
    g.add_argument("--route", metavar="GLOB", help="route pattern: * any run, ? one character")
    g.add_argument("--env", metavar="E", help="only this environment (e.g. prod)")
    g.add_argument("--since", metavar="TIME", help="receivedAt from: ISO time or 7d/12h/30m ago")
    g.add_argument("--until", metavar="TIME", help="receivedAt before: ISO time or age")
    g.add_argument("--where", metavar="KEY=VALUE", action="append", default=[],
                   help="any meta key; repeatable")
    g.add_argument("--during", choices=("interaction", "long-frame", "load"),
                   help="only samples inside these windows of the browser client's timeline")
    g.add_argument("--slower-than", type=nonneg_float, metavar="MS",
                   help="--during: only windows at least this slow (default: interactions "
                   "200 ms, long frames 50 ms of blocking, load 0)")
    g.add_argument("--url-rule", metavar="REGEX=REPL", action="append", default=[],
                   help="how script URLs are named across releases: a substitution applied "
                   "after the default rule (content hashes, version folders and ?query "
                   "taken out); 'none' drops the rules before it; repeatable")
    g.add_argument("--target", metavar="SELECTOR",
                   help="--during interaction: only the interactions on this target (its "
                   "selector as `fleet interactions` lists it, e.g. button#pay)")
    g.add_argument("--exclude-idle", action="store_true",
                   help="leave out samples with no JavaScript that are (idle) or (program) "
                   "(the dashboard's 'exclude idle'): a mostly idle page load no longer "
                   "fills the merged views; what was left out is said")


def _wide_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help="print names and locations whole on a terminal too (there they are "
                   "elided in the middle to fit its width; piped output always has them whole)")


def add_parser(sub: Any) -> None:
    """Register `jsprof fleet` on the top-level subparsers."""
    fp = sub.add_parser(
        "fleet", help="query the field store: top functions, merged flame graph, release diff",
        description="Queries over every upload `jsprof serve` stored (read only: the "
        "compacted tables plus, in memory, what is not compacted yet).",
    )
    fs = fp.add_subparsers(dest="fleet_command", metavar="QUERY", required=True)

    t = fs.add_parser("top", help="functions by self time over all matching samples")
    _source_args(t)
    _filter_args(t)
    t.add_argument("--top", type=positive_int, default=20, help="rows (default 20)")
    t.add_argument("--all", dest="top", action="store_const", const=None, help="every row")
    t.add_argument("--json", action="store_true", help="print the rows as JSON")
    _wide_arg(t)
    t.set_defaults(func=cmd_top)

    f = fs.add_parser("flame", help="one flame graph over all matching samples")
    _source_args(f)
    _filter_args(f)
    f.add_argument("-o", "--output", type=path, required=True, help="merged.html or merged.svg")
    f.add_argument("--max-nodes", type=positive_int, default=2000,
                   help="widest N call-tree nodes; the rest folded into 'other' (default 2000)")
    f.add_argument("--icicle", action="store_true", help="roots at the top, growing down")
    f.add_argument("--color-by", choices=("resource", "function"), default="resource",
                   help="colour frames by resource (default) or by function")
    f.set_defaults(func=cmd_flame)

    d = fs.add_parser("diff", help="compare two sets of uploads (e.g. two releases)")
    _source_args(d)
    _filter_args(d)
    d.add_argument("--base", required=True, metavar="KEY=VALUE",
                   help="the baseline, e.g. release=1.4.1 (also route=, env=, any meta key)")
    d.add_argument("--new", required=True, metavar="KEY=VALUE", help="e.g. release=1.4.2")
    d.add_argument("--top", type=positive_int, default=20, help="rows (default 20)")
    d.add_argument("--all", dest="top", action="store_const", const=None, help="every row")
    d.add_argument("--json", action="store_true", help="print the rows as JSON")
    _wide_arg(d)
    d.add_argument(
        "--flame", type=path, metavar="OUT.html", help="also write the differential flame graph")
    d.add_argument("--fail-if", metavar="RULE", action="append", default=[],
                   help="as `jsprof diff`: NAME:self|total>+Npp or >+N%%; fires when the change "
                   "passes the rule and its 95%% interval excludes zero; repeatable")
    d.add_argument("--min-traces", type=positive_int, default=5, metavar="N",
                   help="page loads per side (default 5; the chunks of one page load count "
                   "once)")
    d.add_argument("--min-samples", type=positive_int, default=1000,
                   help="per side (default 1000)")
    d.add_argument("--exact-resources", action="store_true",
                   help="match scripts by their exact URL (default: content hashes and "
                   "version folders taken out, e.g. main.3f2a1c9b.js = main.9e8d7c6b.js)")
    d.add_argument("--resamples", type=nonneg_int, default=200,
                   help="bootstrap resamples of traces for the intervals (default 200)")
    d.set_defaults(func=cmd_diff)

    e = fs.add_parser("export", help="the merged profile in any writable format")
    _source_args(e)
    _filter_args(e)
    e.add_argument("-o", "--output", type=path, required=True,
                   help="OUT.jsprof.json, .pftrace, .pprof, .speedscope.json, ... (by extension)")
    e.add_argument("--format", help="output format (see `jsprof formats`)")
    e.set_defaults(func=cmd_export)

    v = fs.add_parser("vitals", help="INP, LCP and long-frame blocking p75 per route and release")
    _source_args(v)
    _filter_args(v)
    v.add_argument("--json", action="store_true", help="print the rows as JSON")
    _wide_arg(v)
    v.set_defaults(func=cmd_vitals)

    it = fs.add_parser("interactions",
                       help="per interaction target and type: p75 duration, long-frame time "
                       "and the functions that ran during them")
    _source_args(it)
    _filter_args(it)
    it.add_argument("--top", type=positive_int, default=20, help="rows (default 20)")
    it.add_argument("--all", dest="top", action="store_const", const=None, help="every row")
    it.add_argument("--functions", type=nonneg_int, default=5, metavar="N",
                    help="functions listed per row (of the first 10 rows; default 5)")
    it.add_argument("--json", action="store_true", help="print the rows as JSON")
    _wide_arg(it)
    it.set_defaults(func=cmd_interactions)

    rg = fs.add_parser("regressions",
                       help="functions whose self ms per page load rose from one release (or "
                       "day) to the next; exit 1 when any did")
    _source_args(rg)
    _filter_args(rg)
    rg.add_argument("--by", choices=("release", "day"), default="release",
                    help="compare consecutive releases (default; in version order) or "
                    "consecutive UTC days with uploads")
    rg.add_argument("--min-change", type=nonneg_float, default=10.0, metavar="PCT",
                    help="report a rise of self ms per page load of more than this many "
                    "percent (default 10)")
    rg.add_argument("--min-share", type=nonneg_float, default=0.5, metavar="PCT",
                    help="test only functions with at least this share of either side's time "
                    "(default 0.5 percent; fewer tests, more power)")
    rg.add_argument("--min-traces", type=positive_int, default=5, metavar="N",
                    help="page loads per release or day (default 5; the chunks of one page "
                    "load count once)")
    rg.add_argument("--min-samples", type=positive_int, default=1000,
                    help="per release (default 1000)")
    rg.add_argument("--json", action="store_true", help="print the document as JSON")
    rg.set_defaults(func=cmd_regressions)

    sm = fs.add_parser("sourcemaps", help="per-release source maps")
    sms = sm.add_subparsers(dest="sourcemaps_command", metavar="ACTION", required=True)
    up = sms.add_parser("upload", help="keep .map files for a release (applied at query time)")
    up.add_argument(
        "--store", type=path, metavar="PATH", help=f"the store (default {DEFAULT_STORE})")
    up.add_argument("--url", metavar="http://HOST:PORT",
                    help="upload to a running `jsprof serve` (admin token: JSPROF_ADMIN_TOKEN)")
    up.add_argument("--app", required=True, help="the app the maps belong to")
    up.add_argument("--release", required=True, help="the release they were built for")
    up.add_argument("maps", nargs="+", type=path, metavar="DIR|FILE.map",
                    help=".map files, or folders searched for them")
    up.set_defaults(func=cmd_sourcemaps_upload)


# ---- shared ----------------------------------------------------------------------------------


# The queries --exclude-idle does not apply to yet: their intervals are resampled from the
# stored per-upload weights, which would still count the idle samples.
_KEEPS_IDLE = {"diff": "fleet diff", "regressions": "fleet regressions"}


def filters_from(args: argparse.Namespace) -> Any:
    from ..errors import UsageError
    from .filters import Filters, parse_time, parse_where

    cmd = getattr(args, "fleet_command", None)
    if getattr(args, "exclude_idle", False) and cmd in _KEEPS_IDLE:
        raise UsageError(f"{_KEEPS_IDLE[cmd]}: --exclude-idle is for top, flame and export "
                         "(the intervals here are resampled over every sample); leave it out")

    return Filters(
        app=args.app, release=args.release, route=args.route, env=args.env,
        since=parse_time(args.since, "--since") if args.since else None,
        until=parse_time(args.until, "--until") if args.until else None,
        where=parse_where(args.where),
        during=getattr(args, "during", None),
        slower_than=_slower_than(args),
        target=_target(args),
        exclude_idle=bool(getattr(args, "exclude_idle", False)),
        url_rules=_url_rules(getattr(args, "url_rule", None) or [], "--url-rule"),
    )


def _url_rules(items: list[str], option: str) -> tuple[str, ...]:
    """--url-rule's rules, checked now (a bad regex is a one-line mistake, exit 2)."""
    from .releases import ScriptIdentity

    ScriptIdentity(items, option)
    return tuple(items)


def _slower_than(args: argparse.Namespace) -> float | None:
    from ..errors import UsageError

    v = getattr(args, "slower_than", None)
    if v is None:
        return None
    if getattr(args, "during", None) is None:
        raise UsageError("--slower-than needs --during interaction|long-frame|load")
    if not v >= 0 or v == float("inf"):
        raise UsageError(f"--slower-than {v}: expected a number of ms, 0 or more")
    return v


def _target(args: argparse.Namespace) -> str | None:
    from ..errors import UsageError

    v = getattr(args, "target", None)
    if v is not None and getattr(args, "during", None) != "interaction":
        raise UsageError("--target picks interactions: it needs --during interaction")
    return v


def _check_source(args: argparse.Namespace) -> None:
    from ..errors import UsageError

    if args.url and args.store:
        raise UsageError("give --store PATH or --url URL, not both")
    if args.url and (args.engine != "duckdb" or args.scheduler or args.local_workers):
        raise UsageError("--engine/--scheduler/--local-workers choose the local engine; "
                         "with --url the server's engine runs the query")
    if getattr(args, "wide", False) and getattr(args, "json", False):
        raise UsageError("--wide shapes the text table; --json always gives names whole")


class _NoStatus:
    def __enter__(self) -> _NoStatus:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, text: str) -> None:
        pass


def _status(what: str) -> Any:
    """A spinner with progress on stderr while a person watches; nothing when piped."""
    if not sys.stderr.isatty():
        return _NoStatus()
    from rich.console import Console

    return Console(stderr=True).status(what)


def _session(args: argparse.Namespace, status: Any = None) -> Any:
    from ..errors import UsageError
    from . import api

    path = args.store or DEFAULT_STORE
    if "://" not in path and not os.path.isdir(path):
        raise UsageError(f"--store {path}: no such store (a directory `jsprof serve` writes)")
    store = api.open_store(path)
    return api.session(store, args.engine, args.scheduler, args.local_workers)


def _remote(args: argparse.Namespace) -> Any:
    from .remote import Remote

    return Remote(args.url)


def _query(args: argparse.Namespace, remote: Callable[[Any], T], local: Callable[[Any], T]) -> T:
    """`remote(Remote)` with --url, else `local(session)` on the local store; under the
    status spinner either way."""
    with _status("querying the store ...") as st:
        if args.url:
            r = _remote(args)
            got = remote(r)
            doc = got[0] if isinstance(got, tuple) else got
            if not isinstance(doc, dict):  # a flame page, an export: the answer's headers
                doc = r.notes
            from .remote import note_count

            _store_notes(args, note_count(doc.get("damagedRecords", 0)),
                         note_count(doc.get("pendingUploads", 0)))
            return got
        with _session(args, st) as s:
            got = local(s)
            _store_notes(args, s.snap.damaged, s.snap.pending)
            return got


def _store_notes(args: argparse.Namespace, damaged: int, pending: int) -> None:
    """One line each on stderr (text output; --json has damagedRecords and pendingUploads):
    records the store holds but no query can count, and uploads not in this result yet."""
    if getattr(args, "json", False):
        return
    where = "the collector's store" if args.url else f"the store {args.store or DEFAULT_STORE}"
    check = ("jsprof serve check --store PATH" if args.url
             else f"jsprof serve check --store {args.store or DEFAULT_STORE}")
    if damaged:
        print(f"jsprof: note: {plural(damaged, 'damaged record')} in {where} failed "
              f"{'its' if damaged == 1 else 'their'} checksum and {'is' if damaged == 1 else 'are'}"
              f" in no result (`{check}` lists them)", file=sys.stderr)
    if pending:
        why = ("the collector's compactor is behind, and each query reads a bounded number "
               "of the uploads it has not compacted; ask again later" if args.url else
               "a collector's compactor is behind, or none compacts this store: "
               f"`jsprof serve compact --store {args.store or DEFAULT_STORE}` compacts it")
        print(f"jsprof: note: {plural(pending, 'upload')} stored but not compacted yet "
              f"{'is' if pending == 1 else 'are'} not in this result ({why})", file=sys.stderr)


# ---- commands --------------------------------------------------------------------------------


def cmd_top(args: argparse.Namespace) -> int:
    from . import api

    _check_source(args)
    f = filters_from(args)
    doc = _query(args, lambda r: r.top(f, args.top), lambda s: api.top(s, f, args.top))
    if args.json:
        print_json(doc)
    else:
        from ..render.summary import stdout_console
        from .text import FleetTopTable

        emit(FleetTopTable(stdout_console(), api.describe(f), args.wide), doc)
        _warn(doc)
    return 0


def _warn(doc: dict) -> None:
    """A query document's warnings (an uploaded source map that does not match its
    script, ...), one line each on stderr, as `jsprof report` says them (--json: its
    `warnings`)."""
    for line in doc.get("warnings", []):
        print(f"jsprof: warning: {printable(line)}", file=sys.stderr)


def cmd_flame(args: argparse.Namespace) -> int:
    from ..io import atomic_write
    from . import api

    _check_source(args)
    fmt = flame_kind(args.output)
    f = filters_from(args)
    page = _query(
        args,
        lambda r: r.flame(f, fmt, args.max_nodes),
        lambda s: api.flame(s, f, fmt, args.max_nodes, args.icicle, args.color_by),
    )
    atomic_write(args.output, page.encode("utf-8"))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from ..analysis.diff import parse_gate
    from ..io import atomic_write
    from . import api

    _check_source(args)
    for r in args.fail_if:
        parse_gate(r)  # a bad rule fails before any query
    fmt = flame_kind(args.flame) if args.flame else None
    f = filters_from(args)
    base_f = f.with_side(args.base, "--base")
    new_f = f.with_side(args.new, "--new")
    doc, page = _query(
        args,
        lambda r: r.diff(args, f, fmt),
        lambda s: api.diff(
            s, base_f, new_f, args.top, args.fail_if, args.min_traces,
            args.min_samples, fmt, args.resamples, args.exact_resources,
        ),
    )
    if args.json:
        print_json(doc)
    else:
        from ..render.summary import stdout_console
        from .text import FleetDiffTable

        emit(FleetDiffTable(stdout_console(), args.wide), doc)
    if page is not None:
        atomic_write(args.flame, page.encode("utf-8"))
        print(f"wrote {args.flame}", file=sys.stderr)
    for line in doc.get("warnings", []):
        print(f"jsprof: warning: {line}", file=sys.stderr)
    for line in doc["failures"]:
        print(f"jsprof: fleet diff: {line}", file=sys.stderr)
    return 1 if doc["failures"] else 0


def cmd_export(args: argparse.Namespace) -> int:
    from .. import io
    from ..formats import writer_for
    from . import api

    _check_source(args)
    if args.output != "-":
        io.check_output(args.output)  # a directory, a missing folder: before the query
    writer_for(args.output, args.format)  # a bad name fails before the query
    f = filters_from(args)
    rec = _query(args, lambda r: r.recording(f), lambda s: api.recording(s, f))
    if not rec.tracks:
        from ..errors import UsageError

        raise UsageError(f"fleet export: no uploads match {api.describe(f)}")
    io.save(rec, args.output, format=args.format)
    if args.output != "-":
        print(f"wrote {args.output} ({plural(len(rec.tracks), 'release')})", file=sys.stderr)
    return 0


def cmd_regressions(args: argparse.Namespace) -> int:
    """Exit 1 when a regression is found (for cron and CI), 0 when none."""
    from . import api
    from .regressions import regressions

    _check_source(args)
    f = filters_from(args)
    doc = _query(
        args,
        lambda r: r.regressions(f, args.by, args.min_change, args.min_traces,
                                args.min_samples, args.min_share),
        lambda s: {**regressions(s, f, args.min_change, args.min_traces, args.min_samples,
                                 by=args.by, min_share=args.min_share), **api.notes(s)},
    )
    if args.json:
        print_json(doc)
    else:
        from .text import RegressionsText, not_compared

        emit(RegressionsText(), doc)
        for line in not_compared(doc):
            print(line, file=sys.stderr)
        _warn(doc)
    return 1 if doc["regressions"] else 0


def cmd_vitals(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from . import api

    _check_source(args)
    if getattr(args, "during", None) is not None:
        raise UsageError("fleet vitals: --during selects samples; vitals read no samples")
    if getattr(args, "exclude_idle", False):
        raise UsageError("fleet vitals: --exclude-idle leaves out samples; vitals read no "
                         "samples")
    f = filters_from(args)
    doc = _query(args, lambda r: r.vitals(f), lambda s: api.vitals(s, f))
    if args.json:
        print_json(doc)
    else:
        from ..render.summary import stdout_console
        from .text import VitalsTable

        emit(VitalsTable(stdout_console(), args.wide), doc)
    return 0


def cmd_interactions(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from . import api

    _check_source(args)
    if (getattr(args, "during", None) is not None or getattr(args, "exclude_idle", False)
            or getattr(args, "target", None) is not None):
        raise UsageError("fleet interactions: --during, --target and --exclude-idle select "
                         "samples; this query lists every target, each with its own "
                         "interactions' windows, idle left out")
    f = filters_from(args)
    doc = _query(args, lambda r: r.interactions(f, args.top, args.functions),
                 lambda s: api.interactions(s, f, args.top, args.functions))
    if args.json:
        print_json(doc)
    else:
        from ..render.summary import stdout_console
        from .text import InteractionsTable

        emit(InteractionsTable(stdout_console(), args.wide), doc)
    return 0


def cmd_sourcemaps_upload(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from . import sourcemaps

    if args.url and args.store:
        raise UsageError("give --store PATH or --url URL, not both")
    notes: list[str] = []
    if args.url:
        names = _remote(args).upload_sourcemaps(args.app, args.release, args.maps, notes)
    else:
        store = args.store or DEFAULT_STORE
        if not os.path.isdir(store):
            raise UsageError(f"--store {store}: no such store (a directory `jsprof serve` writes)")
        names = sourcemaps.upload(store, args.app, args.release, args.maps, notes)
    for line in notes:
        print(f"jsprof: warning: {line}", file=sys.stderr)
    for n in names:
        print(f"stored {n} for {args.app} {args.release}", file=sys.stderr)
    return 0
