"""The fleet queries as functions: store + filters in, JSON-able documents out.

The CLI, the HTTP routes and the dashboard call these. Each reads one manifest snapshot,
so compactors and collectors may keep writing meanwhile, and sees every upload
acknowledged before it started: the uploads not compacted yet are read beside the tables,
in memory (`snapshot`). No query writes: compaction is the compactor's (the collector's
background one, or `jsprof serve compact`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import JsprofError, UsageError
from ..words import plural, printable
from .engine import DaskEngine, DuckEngine, Snapshot, open_engine
from .filters import Filters, glob_regex
from .release import identity, one_sided_maps

Engine = DuckEngine | DaskEngine

def open_store(path: str | os.PathLike) -> Any:
    """The raw store at `path` (jsprof.store.Store); a clear error when it is not one."""
    from ..extras import require

    require("field", "the fleet API")
    from ..store import Store, StoreError, is_url

    if is_url(path):
        return _object_store(os.fspath(path))
    if not os.path.isdir(os.path.join(path, "segments")):
        raise UsageError(f"--store {path}: not a store (a directory `jsprof serve` writes)")
    try:
        return Store(path)
    except StoreError as e:
        raise JsprofError(f"--store {path}: {e}") from None


def _object_store(url: str, locked: bool = False) -> Any:
    """A store on an object store, as a query reads it: its manifest, parts and the
    segments past the cursor copied into this machine's query mirror (`store.objstore`:
    reads the bucket, writes nothing there), read as a local store; each upload id once.
    `locked`: the caller holds the mirror's `query_lock` (else it is taken for the pull)."""
    from ..extras import require

    require("s3", "a store on s3://")
    from ..store import Store, StoreError
    from ..store.objstore import Deduped, query_lock, query_mirror

    try:
        if locked:
            root = query_mirror(url)
        else:
            with query_lock(url):
                root = query_mirror(url)
        store = Deduped(Store(root), None)
        store.remote_url = url
        return store
    except StoreError as e:
        from ..store.errors import about_store

        raise JsprofError(about_store(url, e)) from None


def snapshot(store: Any, tail_limit: int | None = None, keep_tail: bool = False,
             tail_new: int | None = None) -> Snapshot:
    """The committed tables read once, plus the uploads not compacted yet (the *tail*, at
    most `tail_limit`, default `tables.view.TAIL_MAX`) read from the raw store into memory
    (`store.tables.view.read_tail`). A query only reads: it compacts nothing, merges nothing,
    takes no lock and writes no file, not even a temporary one, so it answers the same as
    a user who may only read the store; what is over the cap is counted (`pending`).
    `keep_tail`: the tail read is kept in this process, the next snapshot of the store
    reads only the uploads stored since, at most `tail_new` of them (default
    `TAIL_NEW_MAX`; a collector worker; a local store only)."""
    from ..store.tables.view import TAIL_MAX, TAIL_NEW_MAX, read_manifest, read_tail

    # A store on S3 (a collector's, or `open_store`'s of an s3:// URL): its mirror is
    # refreshed and its tail read under the mirror's lock (shared: see query_lock)
    url = getattr(store, "remote_url", None)
    if url is None and getattr(store, "objects", None) is not None:
        url = store.url
    lock: Any = nullcontext()
    if url is not None:
        from ..store.objstore import query_lock

        lock = query_lock(url)
    with lock:
        if url is not None:
            store = _object_store(url, locked=True)
        man = read_manifest(store.path)
        keep = keep_tail and url is None
        # a kept tail reads at most TAIL_NEW_MAX new uploads a query: a bounded wait, the
        # rest counted (`pending`) and read by the next queries
        tail = read_tail(store, man, TAIL_MAX if tail_limit is None else tail_limit,
                         keep=keep,
                         new_max=(tail_new or TAIL_NEW_MAX) if keep else None)
    # After the manifest: an upload pruned since it was compacted is left out.
    snap = Snapshot(store.path, tail.manifest, store.__contains__, store.pruned_before())
    snap.remote = getattr(store, "remote_url", None)
    snap.damaged += tail.damaged
    snap.pending = tail.pending
    return snap


@dataclass
class Session:
    """A store snapshot and an engine: several queries may share them."""

    snap: Snapshot
    engine: Engine

    def close(self) -> None:
        self.engine.close()


@contextmanager
def session(store: Any, engine: str | Engine = "duckdb", scheduler: str | None = None,
            local_workers: int | None = None, tail_limit: int | None = None,
            keep_tail: bool = False, tail_new: int | None = None) -> Iterator[Session]:
    """A snapshot (`snapshot`: the tables and the tail, read only) and an engine."""
    if engine == "dask":  # before reading the tail, which may take a while
        from ..extras import require

        require("dask", "fleet's dask engine")
    snap = snapshot(store, tail_limit, keep_tail, tail_new)
    eng = open_engine(engine, scheduler, local_workers) if isinstance(engine, str) else engine
    if snap.remote is not None and isinstance(eng, DaskEngine):
        eng.remote = (snap.remote, snap.tdir)
    try:
        yield Session(snap, eng)
    finally:
        if isinstance(engine, str):
            eng.close()


def notes(s: Session) -> dict:
    """What every query document says of the store beside its rows: raw records no query
    can count (damaged on disk: `jsprof serve check` lists them), and uploads stored but
    in no result yet (the collector's compactor is behind by more than a query reads, or
    a collector's query has not read them yet: each reads at most `TAIL_NEW_MAX` new
    ones, the next query more)."""
    return {"damagedRecords": s.snap.damaged, "pendingUploads": s.snap.pending}


def top(s: Session, f: Filters, n: int | None = 20) -> dict:
    from . import query, rollups

    # From the rollups when they can say it (their rows grow with days and distinct
    # stacks), else from the per-upload tables: the same document either way
    sel = rollups.select(s.engine, s.snap, f) or query.select(s.engine, s.snap, f)
    require_match(s, f, sel.traces)
    require_windows(sel)
    return {**query.top(s.engine, s.snap, sel, n), **notes(s)}


def recording(s: Session, f: Filters) -> Any:
    from . import query

    sel = query.select(s.engine, s.snap, f)
    require_match(s, f, sel.traces)
    require_windows(sel)
    return sel.recording


def flame(s: Session, f: Filters, fmt: str = "html", max_nodes: int = 2000,
          icicle: bool = False, color_by: str = "resource", title: str | None = None,
          example_url: str | None = None, time_url: str | None = None) -> str:
    """The merged flame graph page. `example_url` ("/v1/traces/{id}/flame", the
    collector's) makes the Time view's example uploads links; without it they are ids.
    `time_url` (the collector's dashboard) leaves the Time view out of the page: its
    script reads it from that URL (`flame_time`'s document) when the tab is first opened;
    the URL should carry `pin=` `data_pin(s)`, so that view counts this graph's uploads
    (this adds `drawn=`, how many it counts: `flame_time` says when a prune took some).
    Without it the page holds it, as a file must (it works with no server)."""
    from ..analysis.calltree import build_call_tree
    from ..render.flame import FlameRenderer
    from . import query

    sel, per_upload = _flame_selection(s, f)
    tree = build_call_tree(sel.recording)
    if not tree.total_time > 0:
        raise UsageError(f"fleet flame: no samples match {describe(f)}; nothing to draw")
    tree = query.fold_tree(tree, max_nodes)
    lost = ""
    if f.exclude_idle:
        lost += f" · (idle) and (program) left out: {sel.idle_ms:.1f} ms"
    if f.during is not None:
        lost += (f" · {sel.attributed_ms:.1f} ms of lost stacks charged to long-frame entry "
                 "points")
    views: dict[str, Any] = {}
    if fmt == "html" and time_url is not None and f.during is None:
        # (the Time view's own reads, its uploads' among them, wait for its tab)
        views = _views(s, sel, None, time_view=False)
        views["fleet_time"] = {"url": f"{time_url}&drawn={sel.traces}"}
        views["fetches"] = True
    elif fmt == "html":
        views = _views(s, _time_selection(s, f, sel, per_upload), example_url)
    return FlameRenderer(
        fmt, title=title or f"{f.app} · {describe(f)}",
        subtitle=f"{tree.total_time:.1f} ms · {plural(sel.samples, 'sample')} · "
        f"{plural(sel.traces, 'trace')}{lost}",
        icicle=icicle, color_by=color_by, **views,
    ).render(tree)


def flame_time(s: Session, f: Filters, example_url: str | None = None,
               pin: int | None = None, drawn: int | None = None) -> dict:
    """The Time view of `flame`'s page for the same filters, read on its own (the
    dashboard's page asks for it when its tab is opened): the `fleetTime` block the page
    would have held, `pin`, and the store's notes.

    `pin`: the page's `data_pin` (its snapshot's `nextUk`): the view counts only the
    uploads the page's graph counted, whatever arrived since (upload keys stay theirs
    through compaction). When this snapshot does not reach it (another worker's tail
    behind, the tables made anew), the view is of the uploads read now, and `pin` says
    so (`same` false, `note`) for the page to show: never two answers passed off as one.
    `drawn`: how many uploads the graph counted (`flame` adds it to the URL): a retention
    prune since may have taken some of the pinned ones, which the view then cannot count;
    `pin.pruned` and the note say how many.

    It reads what the view needs (the uploads, then the spread's samples or the Time
    rollups): no call tree, which the page has already drawn."""
    from .timecourse import TimeSelection

    if f.during is not None:
        raise UsageError("fleet flame: no Time view with during= (those samples' times are "
                         "gone); leave during out")
    held = data_pin(s)
    same = pin is None or pin <= held
    if pin is not None and same:
        s.snap.pin(pin)
    up = s.engine.uploads(s.snap, f)
    require_match(s, f, len(up))
    views = _views(s, TimeSelection(f, up), example_url, sources=False)
    doc: dict[str, Any] = {"fleetTime": views["fleet_time"]}
    if pin is not None:
        doc["pin"] = {"asked": pin, "read": pin if same else held, "same": same}
        if not same:
            doc["pin"]["note"] = (
                "This Time view is of the uploads the collector holds now, not of those "
                "the graph above was drawn from (it was drawn from a later read of the "
                "store): the two may count different uploads. Reload the page for both "
                "of one read.")
        elif drawn is not None and len(up) < drawn:
            # The pin keeps out what came since, not what a prune took (keep_live): the
            # pinned set shrank, which the view says rather than pass it off as the graph's
            gone = drawn - len(up)
            doc["pin"]["pruned"] = gone
            doc["pin"]["note"] = (
                f"{plural(gone, 'upload')} of the {drawn:,} the graph above was drawn from "
                f"{'was' if gone == 1 else 'were'} pruned (retention) since it was drawn: "
                f"this Time view counts the {len(up):,} left. Reload the page for both of "
                "one read.")
    return {**doc, **notes(s)}


def data_pin(s: Session) -> int:
    """What identifies the uploads `s` reads: its tables' `nextUk` (the committed tables
    plus the tail read), every upload below it and none at or past it. `flame_time`'s
    `pin`."""
    return int(s.snap.manifest["nextUk"])


def _flame_selection(s: Session, f: Filters) -> tuple[Any, bool]:
    """The flame page's Selection of `f` and whether it was read per upload (no rollups)."""
    from . import query, rollups

    # The call tree from the rollups when they can say it, as `top` (rows per distinct
    # stack and day, not per upload); the Time view then reads the uploads table for its
    # per-upload choices (the spread, the timelines), not the weights
    sel = rollups.select(s.engine, s.snap, f) if f.during is None else None
    per_upload = sel is None
    if sel is None:
        sel = query.select(s.engine, s.snap, f)
    require_match(s, f, sel.traces)
    require_windows(sel)
    return sel, per_upload


def _time_selection(s: Session, f: Filters, sel: Any, per_upload: bool) -> Any:
    """`sel` with its uploads, which a rollups' Selection leaves out, for the Time view."""
    return sel if per_upload else replace(sel, uploads=s.engine.uploads(s.snap, f))


def _views(s: Session, sel: Any, example_url: str | None, time_view: bool = True,
           sources: bool = True) -> dict[str, Any]:
    """The flame page's options for its Time and Source views of a selection: the page
    loads' time since their start (none with --during: those samples' times are gone),
    and the functions' text where the releases' source maps carry it."""
    from .timecourse import StoreSources, time_course

    f = sel.filters
    ft = (time_course(s.engine, s.snap, sel, f.app)
          if time_view and f.during is None else None)
    if ft is not None and example_url is not None:
        from urllib.parse import quote

        for ex in ft["examples"]:
            ex["href"] = example_url.replace("{id}", quote(ex["id"], safe=""))
    from .release import identity

    out: dict[str, Any] = {"fleet_time": ft}
    if sources:
        out["rec"] = sel.recording
        out["source"] = StoreSources(sel.releases, identity(f))
    return out


def require_match(s: Session, f: Filters, traces: int, prefix: str = "") -> None:
    """One rule for every query: a filter that matches no upload is a mistake (exit 2, HTTP
    400) that says what exists: apps, the app's releases, routes and envs, the closest."""
    if traces:
        return
    opts = options(s, f.app, received=True)

    def listed(what: str, items: list[str], given: str | None = None) -> str:
        import difflib

        shown = ", ".join(printable(x) for x in items[:10])
        more = f" ({len(items)} in all)" if len(items) > 10 else ""
        close = difflib.get_close_matches(given, items, n=3, cutoff=0.5) if given else []
        hint = f"; closest: {', '.join(printable(c) for c in close)}" if close else ""
        return f"{what}: {shown or '(none)'}{more}{hint}"

    if f.app not in opts["apps"]:
        why = f"no uploads of app {printable(f.app)!r}; {listed('apps', opts['apps'], f.app)}"
    elif f.release is not None and f.release not in opts["releases"]:
        why = (f"app {printable(f.app)} has no release {printable(f.release)!r}; "
               f"{listed('releases (newest first)', opts['releases'], f.release)}")
    elif f.route is not None and not any(
            re.fullmatch(glob_regex(f.route), r, re.S) for r in opts["routes"]):
        why = (f"route {printable(f.route)!r} matches no route of app {printable(f.app)}; "
               f"{listed('routes', opts['routes'], f.route)}")
    elif f.env is not None and f.env not in opts["envs"]:
        why = (f"app {printable(f.app)} has no env {printable(f.env)!r}; "
               f"{listed('envs', opts['envs'], f.env)}")
    else:
        why = (f"no uploads match {describe(f)}{_time_window(f)}; app {printable(f.app)} has "
               f"{listed('releases', opts['releases'])}; {listed('routes', opts['routes'])}")
        got = opts.get("_received")
        if (f.since is not None or f.until is not None) and got:
            # A time window is the likeliest filter to have emptied the query: say when
            # the app's uploads were received, so the window can be moved onto them.
            why += f"; its uploads were received from {_utc(got[0])} to {_utc(got[1])}"
    raise UsageError(f"{prefix}{why}")


def _utc(ms: float) -> str:
    import datetime

    t = datetime.datetime.fromtimestamp(ms / 1000.0, datetime.UTC)
    return t.strftime("%Y-%m-%dT%H:%MZ")


def _time_window(f: Filters) -> str:
    """--since/--until as the refusal names them (describe() titles pages and leaves the
    time out)."""
    bits = []
    if f.since is not None:
        bits.append(f"since={_utc(f.since)}")
    if f.until is not None:
        bits.append(f"until={_utc(f.until)}")
    return "".join(", " + b for b in bits)


def require_windows(sel: Any, prefix: str = "") -> None:
    """`--during KIND` over uploads none of whose timelines has a KIND window selects
    nothing, whatever the threshold: a mistake (exit 2, HTTP 400) as a filter matching no
    upload is, not "0 samples"."""
    f = sel.filters
    if f.during is None or sel.with_window or not sel.traces:
        return
    which = describe(replace(f, during=None, slower_than=None, target=None))
    if f.target is not None:
        raise UsageError(
            f"{prefix}--target {printable(f.target)!r}: no interaction on that target in the "
            f"{plural(sel.traces, 'matching upload')} ({which}); `jsprof fleet interactions` "
            "lists the targets (selectors) there are")
    window = f"{'an' if f.during == 'interaction' else 'a'} {f.during} window"
    said = (f"the one matching upload ({which}) has no {f.during} window" if sel.traces == 1
            else f"none of the {sel.traces} matching uploads ({which}) has {window}")
    raise UsageError(
        f"{prefix}--during {f.during}: {said} in its timeline; drop --during, or upload "
        "timelines with the traces"
    )


def describe(f: Filters) -> str:
    bits = [f"app={f.app}"]
    for k in ("release", "route", "env"):
        v = getattr(f, k)
        if v is not None:
            bits.append(f"{k}={v}")
    bits += [f"{k}={v}" for k, v in f.where]
    if f.during is not None:
        bits.append(f"during={f.during}")
        if f.slower_than is not None:
            bits.append(f"slower_than={f.slower_than:g}")
        if f.target is not None:
            bits.append(f"target={f.target}")
    return ", ".join(bits)


def list_uploads(s: Session, f: Filters, limit: int = 50, cursor: str | None = None,
                 function: str | None = None, resource: str | None = None) -> dict:
    """`GET /v1/traces`: the matching uploads, newest compacted first, with their meta
    (the timeline summarised as counts), `limit` a page; `nextCursor` asks for the next
    page (None: no more). A cursor is the upload key the page ended at. `function` (with
    `resource`, its script, as `top` rows give them; "" for none): only uploads whose
    samples run that function (self or total time), e.g. a top row's examples."""
    import numpy as np

    from .vitals import upload_rows

    after = None
    if cursor is not None:
        if not cursor.isdigit() or len(cursor) > 18:
            raise UsageError(f"cursor {cursor[:40]!r}: not one this listing gave")
        after = int(cursor)
    up = s.engine.uploads(s.snap, f)
    if function is not None and len(up):
        up = up.subset(_running(s, f, function, resource, up.uk))
    order = np.argsort(-up.uk, kind="stable")
    if after is not None:
        order = order[up.uk[order] < after]
    page = order[:limit]
    rows = upload_rows(s.snap, f, up.subset(np.isin(np.arange(len(up)), page)))
    out = []
    for i in page.tolist():
        uk = int(up.uk[i])
        route, meta = rows.get(uk, (None, {}))
        t = meta.pop("timeline", None) or {}
        out.append({
            "id": up.id[i], "app": f.app, "release": up.release[i], "route": route,
            "receivedAt": meta.get("receivedAt"), "samples": int(up.samples[i]),
            "totalMs": round(float(up.total_ms[i]), 3), "pageLoad": up.page_load[i],
            "longFrames": len(t.get("longFrames") or []),
            "interactions": len(t.get("interactions") or []),
            "meta": meta,
        })
    more = len(order) > limit
    return {"uploads": out, "nextCursor": str(int(up.uk[page[-1]])) if more else None,
            **notes(s)}


def _running(s: Session, f: Filters, function: str, resource: str | None, uk: Any) -> Any:
    """Per upload of `f`, in the engine's order: does any sample run `function` (of
    `resource`)? By the keys `fleet diff` matches functions with (name and script; an
    anonymous function's line is not in them)."""
    import numpy as np

    from ..analysis.diff import NameKey, ResourceMatcher
    from . import query

    sel = query.select(s.engine, s.snap, f)
    res = {r for t in sel.recording.tracks for r in t.trace.resources}
    match = ResourceMatcher.for_pair(res, res)
    # Without a resource, the name in any script (or none)
    keys = ([NameKey(function, match(resource))] if resource else
            list({NameKey(function, match(r)): None for r in [*sorted(res), None]}))
    self_m, total_m, _ = query.trace_shares(s.engine, s.snap, sel, keys, match)
    ran = (self_m > 0).any(axis=1) | (total_m > 0).any(axis=1)
    # per upload of `sel` (sorted by key): in the order of `uk`, the listing's uploads
    return ran[np.searchsorted(sel.uploads.uk, uk)]


def vitals(s: Session, f: Filters) -> dict:
    """The `fleet vitals --json` document: per route and release, from the timelines."""
    from .vitals import vitals as compute

    doc = compute(s.engine, s.snap, f)
    require_match(s, f, len(doc["rows"]))
    return {**doc, **notes(s)}


def interactions(s: Session, f: Filters, top: int | None = 20, functions: int = 5) -> dict:
    """The `fleet interactions --json` document: per interaction target and type, its
    durations, long-frame time and the functions that ran (fleet/interactions.py)."""
    from .interactions import interactions as compute

    doc = compute(s.engine, s.snap, f, top, functions)
    require_match(s, f, len(s.engine.uploads(s.snap, f)))
    return {**doc, **notes(s)}


def diff(s: Session, base_f: Filters, new_f: Filters, top_n: int | None = 20,
         rules: list[str] = (), min_traces: int = 5, min_samples: int = 1000,
         flame_fmt: str | None = None, reps: int = 200, exact_resources: bool = False
         ) -> tuple[dict, str | None]:
    """The diff document (with `failures` and `warnings`) and, when asked, the
    differential flame graph. Resources match across releases with content hashes and
    version folders taken out (`fleet.releases`), unless `exact_resources`."""
    got = diff_parts(s, base_f, new_f, top_n, rules, min_traces, min_samples, flame_fmt,
                     reps, exact_resources)
    return got.doc, got.page


@dataclass
class DiffParts:
    """A diff's document and what it was made of, for callers that look further
    (`fleet regressions` finds the uploads that hold a regressed function)."""

    doc: dict
    page: str | None
    keys: list  # per doc row: the diff's match key of its function (analysis.diff.NameKey)
    base: Any  # query.Selection of each side (`query.trace_shares` reads it per trace)
    new: Any
    match: Any  # the ResourceMatcher both sides were keyed with
    # a line per script a map names on one side only (compared as recorded on both:
    # `release.one_sided_maps`)
    map_notes: list[str] = field(default_factory=list)


def diff_parts(s: Session, base_f: Filters, new_f: Filters, top_n: int | None = 20,
               rules: list[str] = (), min_traces: int = 5, min_samples: int = 1000,
               flame_fmt: str | None = None, reps: int = 200, exact_resources: bool = False,
               rolled: bool = False, units: Any = None,
               named_as: tuple[str, str] | None = None) -> DiffParts:
    """`diff`, keeping the selections, the row keys and the matcher. `rolled` (with reps
    0: no intervals): both sides from the rollups whatever their size, when they can be
    (`fleet regressions`, which reads their per-load sums next); `units`: those two
    sides' `rollups.select`, already made (`rollups.Units`). `named_as`: how a refusal names
    the two sides in the caller's words (`regressions`: "release 1.0.1"), else diff's
    own: `fleet diff: --base (FILTERS)`."""
    import math

    from ..analysis.calltree import build_call_tree
    from ..analysis.diff import check_rule_names, parse_gate, tree_changes
    from ..render.flame import FlameRenderer
    from . import query

    gates = [parse_gate(r) for r in rules]
    if exact_resources:  # scripts as recorded: no identity rule before the matching either
        base_f = replace(base_f, url_rules=(*base_f.url_rules, "none"))
        new_f = replace(new_f, url_rules=(*new_f.url_rules, "none"))
    from . import rollups

    # From the rollups when both sides can be (their rows grow with days and distinct
    # stacks; the intervals from their moments: rollups.diff_intervals), else per upload.
    # Not for the flame page (its Time view reads uploads) nor without intervals (reps 0)
    # unless `rolled` says the caller reads the rollups next.
    def select_sides(base_f: Filters, new_f: Filters, units: Any) -> tuple[Any, Any]:
        sides = list(units) if units is not None else [
            rollups.select(s.engine, s.snap, f) if (reps or rolled) and flame_fmt is None
            else None for f in (base_f, new_f)]
        if all(x is not None and (rolled or x.traces >= rollups.MOMENTS_MIN_UPLOADS)
               for x in sides):
            return sides[0], sides[1]
        return query.select(s.engine, s.snap, base_f), query.select(s.engine, s.snap, new_f)

    base, new = select_sides(base_f, new_f, units)
    # A script a source map names in some compared release but not in another that runs
    # it (another build, no map of its own) is compared as recorded on both sides: named
    # two ways, each of its functions would be removed on one side and new on the other.
    scripts, map_notes = one_sided_maps(
        [sel.releases[k] for sel in (base, new) for k in sel.uploads.rkeys
         if k in sel.releases], identity(base_f))
    if scripts:
        base_f = replace(base_f, unmapped=base_f.unmapped | scripts)
        new_f = replace(new_f, unmapped=new_f.unmapped | scripts)
        base, new = select_sides(base_f, new_f, None)
    named = named_as or (f"--base ({describe(base_f)})", f"--new ({describe(new_f)})")
    require_match(s, base_f, base.traces, f"{named[0]}: ")
    require_match(s, new_f, new.traces, f"{named[1]}: ")
    require_windows(base, f"{named[0]}: ")
    require_windows(new, f"{named[1]}: ")
    # diff's own refusal names the command (its stderr line has no other context); a
    # caller's sides are said inside that caller's sentence
    said = named if named_as else tuple(f"fleet diff: {n}" for n in named)
    query.check_evidence(base, said[0], min_traces, min_samples)
    query.check_evidence(new, said[1], min_traces, min_samples)

    def keys_for(d: Any) -> list:
        # A rule naming no function is a typo that would pass CI forever: exit 2 with the
        # closest names, before any resampling (the rule `jsprof diff` follows).
        check_rule_names(d, gates)
        keys = {r.key: None for r in _candidates(d.rows, top_n)}
        for g in gates:
            for r in d.find(g.name):
                keys[r.key] = None
        return list(keys)

    def moments(keys: list, match: Any) -> dict | None:
        return rollups.diff_intervals(s.engine, base, new, keys, match)

    try:
        d, keys, ci, match = query.diff(s.engine, s.snap, base, new, keys_for, reps,
                                        exact_resources,
                                        moments if base.rollup is not None else None)
    except query.NeedRows:
        base = query.select(s.engine, s.snap, base_f)
        new = query.select(s.engine, s.snap, new_f)
        d, keys, ci, match = query.diff(s.engine, s.snap, base, new, keys_for, reps,
                                        exact_resources)
    col = {k: i for i, k in enumerate(keys)}

    def interval(row: Any, name: str) -> list[float] | None:
        if not ci or row.key not in col:
            return None
        lo, hi = ci[name][:, col[row.key]]
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return None
        # Percentiles of a skewed resampling distribution can sit a hair beside the
        # estimate (a ratio of sums); an interval always contains its own estimate.
        metric, unit = name.split("_")
        est = (row.d_self if metric == "self" else row.d_total) if unit == "pp" \
            else row.relative(metric)
        if math.isfinite(est):
            lo, hi = min(lo, est), max(hi, est)
        return [round(float(lo), 3), round(float(hi), 3)]

    def r3(x: float) -> float | None:
        return round(x, 3) if math.isfinite(x) else None

    # By the change its interval is sure of, not by the estimate alone: a row whose
    # interval excludes 0 first, the one whose nearer end is farther from 0 first.
    ranked = sorted(enumerate(_candidates(d.rows, top_n)),
                    key=lambda x: (-_sure_change(interval, x[1]), x[0]))
    shown = [r for _, r in ranked]
    if top_n is not None:
        shown = shown[:top_n]
    rows = []
    for r in shown:
        rows.append({
            "name": r.key.name, "label": r.key.label(), "resource": r.key.resource,
            "line": r.key.line, "column": r.key.column,
            "status": r.status or ("changed" if r.impact > 1e-9 else "same"),
            "baseSelfPct": r3(r.base_self), "newSelfPct": r3(r.new_self),
            "baseTotalPct": r3(r.base_total), "newTotalPct": r3(r.new_total),
            "selfPp": r3(r.d_self), "totalPp": r3(r.d_total),
            "selfPpCi": interval(r, "self_pp"), "totalPpCi": interval(r, "total_pp"),
            "selfRelPct": r3(r.relative("self")), "totalRelPct": r3(r.relative("total")),
            "selfRelCi": interval(r, "self_rel"), "totalRelCi": interval(r, "total_rel"),
        })
    failures = []
    for g in gates:
        matched = d.find(g.name)
        for r in matched:
            if not g.violated_by(r):
                continue
            unit = "pp" if g.unit == "pp" or math.isinf(r.relative(g.metric)) else "rel"
            iv = interval(r, f"{g.metric}_{unit}")
            # Fire only when the change is more than resampling noise: the interval of the
            # change lies wholly on one side of zero.
            if iv is None or not (iv[0] > 0 or iv[1] < 0):
                continue
            where = f" ({printable(r.key.resource)})" if r.key.resource else ""
            before, after = ((r.base_self, r.new_self) if g.metric == "self"
                             else (r.base_total, r.new_total))
            name = printable(r.key.label())
            failures.append(
                f"{name}{where}: {g.metric} share {before:.2f}% -> {after:.2f}% "
                f"(95% interval of the change {iv[0]:+.2f} to {iv[1]:+.2f}"
                f"{'pp' if unit == 'pp' else '%'}) breaks --fail-if {g.spec!r}"
            )
    doc = {
        "base": {"filters": describe(base_f), "traces": base.traces,
                 "pageLoads": base.uploads.page_loads(),
                 "pageLoadsEstimated": base.uploads.page_loads_estimated(),
                 "samples": base.samples,
                 "totalMs": r3(base.total_ms)},
        "new": {"filters": describe(new_f), "traces": new.traces,
                "pageLoads": new.uploads.page_loads(),
                "pageLoadsEstimated": new.uploads.page_loads_estimated(),
                "samples": new.samples,
                "totalMs": r3(new.total_ms)},
        "functions": len(d.rows),
        "rows": rows,
        "failures": failures,
        "warnings": query.map_warnings(base, new) + map_notes + _match_warnings(d),
        **notes(s),
    }
    page = None
    if flame_fmt is not None:
        new_tree = build_call_tree(new.recording)
        change = tree_changes(build_call_tree(base.recording), new_tree, match=match)
        page = FlameRenderer(
            flame_fmt, title=f"{describe(new_f)} vs {describe(base_f)}",
            subtitle="shape of NEW; red: larger self share than BASE, blue: smaller",
            change=change,
            # Time, Sandwich and Source of NEW, as `jsprof diff --flame` gives them.
            **(_views(s, new, None) if flame_fmt == "html" else {}),
        ).render(new_tree)
    return DiffParts(doc, page, [r.key for r in shown], base, new, match, map_notes)


def _candidates(rows: list, top_n: int | None) -> list:
    """The rows a diff resamples and ranks: every row, or the 3 x `top_n` (at least 60)
    with the largest changes in share (a row's interval is built around its estimate, so
    one further down is sure of less than these are likely to be)."""
    return rows if top_n is None else rows[:max(3 * top_n, 60)]


def _sure_change(interval: Any, row: Any) -> float:
    """The share change (points) a row's intervals are sure of: the larger, over self and
    total, of the interval's end nearer 0 when the interval excludes 0; else -1 + the
    estimate's size as a fraction of 100 points (behind every sure one, by estimate)."""
    sure = []
    for name in ("self_pp", "total_pp"):
        iv = interval(row, name)
        if iv is not None and (iv[0] > 0 or iv[1] < 0):
            sure.append(min(abs(iv[0]), abs(iv[1])))
    if sure:
        return max(sure)
    return -1.0 + min(row.impact, 100.0) / 1000.0


def _match_warnings(d: Any) -> list[str]:
    """Most of a side's time in rows the other side lacks: the sides did not match."""
    from . import query

    removed, added = query.unmatched_share(d)
    if max(removed, added) <= 50.0:
        return []
    return [
        f"{added:.0f}% of NEW's time is in functions BASE does not have and {removed:.0f}% "
        "of BASE's in functions NEW does not have: the releases' scripts did not match "
        "(different builds without source maps?); upload source maps (`fleet sourcemaps "
        "upload`) or compare the resources shown"
    ]


def series(s: Session, f: Filters, name: str, by: str = "release",
           resource: str | None = None, line: int | None = None,
           column: int | None = None) -> dict:
    """A function's self and total share per release or per UTC day: percent of the time
    `top` counts for that release (day) alone, so a release's point is the `top` row's
    `selfPct` with `--release` it (`exclude_idle`: of the time left, as `top`'s). With
    `resource`, the one function a `top` row names (name, script, line, column); without,
    every function of that name. Each release is named by its own maps; where that hides
    the function (`_unnamed_points`) a release's point is null, and a day's share leaves
    that release's uploads out (`leftOutTraces`), with a note."""
    from ..analysis.profile import summarize
    from ..trace import Recording
    from . import query

    def shares(rec: Recording) -> tuple[float, float, float, bool]:
        sm = summarize(rec)
        total = sm.total_ms
        hit = [i for i, k in enumerate(sm.stats.keys) if k.name == name and (
            resource is None or (k.resource, k.line, k.column) == (resource, line, column))]
        self_ms = float(sum(sm.stats.self_ms[i] for i in hit))
        # Two functions of one name on one path would be counted twice in a plain sum of
        # totals; take the widest as the share the name has at least.
        total_ms = float(max((sm.stats.total_ms[i] for i in hit), default=0.0))
        pct = 100.0 / total if total > 0 else 0.0
        return self_ms * pct, total_ms * pct, total, bool(hit)

    points = []
    warnings: list[str] = []
    if by == "release":
        # Each release as its own maps (or a map rightly lent: `release.shared_maps`) name
        # it, as `top --release` does: a point is one release's share, not a comparison,
        # so reading a script mapped in some releases only as recorded in all
        # (`release.one_sided_maps`, as `diff` reads two sides) would lose the function in
        # every release, mapped ones too.
        sel = query.select(s.engine, s.snap, f)
        first: dict[str, float] = {}
        for r, t in zip(sel.uploads.release, sel.uploads.received_at.tolist(), strict=True):
            first[r] = min(first.get(r, t), t)
        found: dict[str, tuple[float, float, float, bool]] = {}
        by_release = {t.meta["release"]: t for t in sel.recording.tracks}
        for rel in by_release:
            found[rel] = shares(Recording([by_release[rel]]))
        unknown, warnings = _unnamed_points(
            [sel.releases[k] for k in sel.uploads.rkeys if k in sel.releases], identity(f),
            name, {rel: v[3] for rel, v in found.items()})
        for rel in sorted(by_release, key=lambda r: (first.get(r, 0.0), r)):
            sp, tp, total, _ = found[rel]
            gone = rel in unknown
            points.append({"label": rel, "selfPct": None if gone else round(sp, 3),
                           "totalPct": None if gone else round(tp, 3),
                           "traces": by_release[rel].meta["traces"],
                           "totalMs": round(total, 3)})
    else:
        from datetime import UTC, datetime

        import numpy as np

        # One read for every day: the uploads once, then their weights summed per
        # (day, release, stack) in one scan (`query.select_groups`).
        up = s.engine.uploads(s.snap, f)
        at = up.received_at
        fin = np.isfinite(at)
        day = np.zeros(len(up), np.int64)
        day[fin] = np.floor(at[fin] / 86400e3).astype(np.int64)
        if fin.any():
            d0 = int(day[fin].min())
            # UTC days from the first, up to 90 (a chart, not a report); -1: left out
            day = np.where(fin & (day - d0 <= 90), day - d0, -1)
            days = sorted(query.select_groups(s.engine, s.snap, f, up, day).items())
            # Each release named as its own maps name it, as in the per-release chart. A
            # release where the function cannot be named (another build of a script a map
            # names elsewhere: `_unnamed_points`) may hold it under another name: counted,
            # its time would sink the day's share (0 % on a day with only it), so the
            # day's share is of its other releases' uploads, and unknown (null) on a day
            # with none.
            rels: dict[str, Any] = {}
            for _, sel in days:
                rels.update((k, sel.releases[k]) for k in sel.uploads.rkeys
                            if k in sel.releases)
            unknown: set[str] = set()
            if one_sided_maps(list(rels.values()), identity(f))[0]:
                hit: dict[str, bool] = {}
                for _, sel in days:
                    for t in sel.recording.tracks:
                        r = t.meta["release"]
                        hit[r] = hit.get(r, False) or shares(Recording([t]))[3]
                unknown, warnings = _unnamed_points(
                    list(rels.values()), identity(f), name, hit,
                    "its share in {rel} is unknown, so {rel}'s uploads are left out of "
                    "each day's share (a day with no others: null), not counted as 0")
            for d, sel in days:
                kept = [t for t in sel.recording.tracks if t.meta["release"] not in unknown]
                out = sum(t.meta["traces"] for t in sel.recording.tracks
                          if t.meta["release"] in unknown)
                gone = not kept
                sp, tp, total, _ = (0.0, 0.0, 0.0, False) if gone else shares(Recording(kept))
                points.append({
                    "label": datetime.fromtimestamp((d0 + d) * 86400, UTC).strftime("%Y-%m-%d"),
                    "selfPct": None if gone else round(sp, 3),
                    "totalPct": None if gone else round(tp, 3), "traces": sel.traces,
                    "leftOutTraces": out, "totalMs": round(total, 3)})
    return {"function": name, "resource": resource, "line": line, "column": column,
            "by": by, "points": points, "warnings": warnings, **notes(s)}


def _unnamed_points(rels: list, ident: Any, name: str, hit: dict[str, bool],
                    said: str = "its share in {rel} is unknown (null), not 0"
                    ) -> tuple[set[str], list[str]]:
    """The releases (labels) of `hit` (release -> whether function `name` was found in
    it) where `name` cannot be told apart from absent: none of its functions is `name`,
    and a script a map names in some releases (`rels`) only (`one_sided_maps`: another
    build without a map of its own) is named otherwise there than in a release where
    `name` was found, so the function may be there under another name (minified, or the
    map's). Their share is unknown, not 0: with a line each saying which script, what the
    chart does (`said`, with `{rel}`) and what to upload."""
    from . import sourcemaps

    scripts, _ = one_sided_maps(rels, ident)
    if not scripts:
        return set(), []
    side: dict[str, frozenset[str]] = {}  # release -> the one-sided scripts a map names
    app: dict[str, str] = {}
    for r in rels:
        side[r.release] = side.get(r.release, frozenset()) | (
            {ident(u) or u for u in r.mapped} & scripts)
        app[r.release] = r.app
    found = sorted(r for r, v in hit.items() if v)
    out: set[str] = set()
    lines: list[str] = []
    for rel in sorted(hit):
        there = [h for h in found if h in side and side[h] != side.get(rel, side[h])]
        if hit[rel] or not there:
            continue
        out.add(rel)
        differ = sorted(side[rel] ^ side[there[0]])
        bare = sorted(r for r in side if not side[r] >= set(differ))
        lines.append(
            f"{app[rel]} {rel}: no function named {name}, and {', '.join(differ)} is named by "
            f"no source map in {app[rel]} {', '.join(bare)} (another build), so {name} may be "
            f"there under another name: {said.format(rel=rel)}: "
            f"{sourcemaps.mismatch_hint(app[rel], bare[0])}")
    return out, lines


def options(s: Session, app: str | None, received: bool = False) -> dict:
    """What the pickers offer: apps, and for `app` its releases (newest first), routes, envs;
    with `received`, also `_received`: its uploads' first and last receivedAt (epoch ms)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .engine import read_part

    files = s.snap.files("uploads")
    apps: set[str] = set()
    rel_first: dict[str, float] = {}
    lo_hi = (float("inf"), float("-inf"))
    routes: set[str] = set()
    envs: set[str] = set()
    for p in files:
        t = read_part(p, ["id", "app", "release", "route", "env", "received_at"])
        at = np.asarray([np.nan if v is None else v for v in t.column("received_at").to_pylist()],
                        np.float64)
        keep = s.snap.alive(t.column("id").to_pylist(), t.column("app").to_pylist(), at)
        if not keep.all():  # what was pruned is offered nowhere
            t = t.filter(pa.array(keep, pa.bool_()))
        apps.update(x for x in t.column("app").to_pylist() if x is not None)
        if app is None:
            continue
        t = t.filter(pc.equal(t.column("app"), app))
        for r, at in zip(t.column("release").to_pylist(), t.column("received_at").to_pylist(),
                         strict=True):
            if at is not None:
                lo_hi = (min(lo_hi[0], at), max(lo_hi[1], at))
            at = at if at is not None else 0.0
            rel_first[r] = min(rel_first.get(r, at), at)
        routes.update(x for x in t.column("route").to_pylist() if x is not None)
        envs.update(x for x in t.column("env").to_pylist() if x is not None)
    releases = sorted(rel_first, key=lambda r: (-rel_first[r], r))
    out: dict = {"apps": sorted(apps), "releases": releases, "routes": sorted(routes),
                 "envs": sorted(envs)}
    if received and lo_hi[0] <= lo_hi[1]:
        out["_received"] = lo_hi  # first and last receivedAt of the app's uploads
    return out
