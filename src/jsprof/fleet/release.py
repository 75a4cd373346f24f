"""One release's frames and stacks as the merged views read them: named as the release's
source maps name them, and its scripts as a query's identity rule names them.

Its own module so that the plans that build a release's tables (fleet/query.py from the
tables' parts, fleet/during.py from the windows) share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import script_lines
from ..analysis.profile import FunctionKey
from ..trace import ProfilerFrame, ProfilerTrace
from . import sourcemaps
from .engine import Snapshot
from .filters import Filters
from .releases import ScriptIdentity


@dataclass
class Release:
    """One release's tables as read from the store, after source maps."""

    rkey: str
    app: str
    release: str
    trace: ProfilerTrace  # frames and stacks only (no samples), source-mapped
    frame_key: list[FunctionKey]  # per stored frame id, the (mapped) function
    stack_map: np.ndarray | None  # stored stack id -> id in `trace` (None: the same)
    maps: dict = field(default_factory=dict)  # script URL -> its SourceMap (the store's)
    # a line per uploaded map that does not match its script (not applied: shown as
    # recorded), as `jsprof record/report` say it
    warnings: list[str] = field(default_factory=list)
    # per stored stack id, its stored frame id (the tables' stacks, before maps): what a
    # view of the tables' stack ids needs with `frame_key`, without reading them again
    stack_frame: np.ndarray | None = None
    # script URL -> the release whose uploaded map names it here (`shared_maps`: the same
    # bundle, the map uploaded for that release only)
    borrowed: dict[str, str] = field(default_factory=dict)
    # the frames and stacks as stored (before maps): what `unmapped_release` maps again
    # without some scripts' maps
    stored: ProfilerTrace | None = None

    @property
    def mapped(self) -> set[str]:
        """The script URLs a map names here (a map refused as another build's names none:
        its line is in `warnings`)."""
        return {u for u in self.maps if not any(w.startswith(f"{u}: ") for w in self.warnings)}


def mapped_release(snap: Snapshot, rkey: str, app: str, release: str,
                   trace: ProfilerTrace) -> Release:
    """A release's Release from its frames and stacks: the functions named as the
    release's source maps name them (or another release's, for the same bundle:
    `shared_maps`), and the stacks mapped, when it has maps."""
    maps = sourcemaps.maps_for(snap.tdir.parent, rkey, trace.resources)
    shared = shared_maps(snap, rkey, app, trace, maps)
    maps.update({url: sm for url, (sm, _) in shared.items()})
    return _with_maps(rkey, app, release, trace, maps,
                      {url: other for url, (_, other) in shared.items()})


def _with_maps(rkey: str, app: str, release: str, trace: ProfilerTrace, maps: dict,
               borrowed: dict[str, str]) -> Release:
    notes: list[str] = []
    frame_key = sourcemaps.frame_functions(trace, maps, notes,
                                           sourcemaps.mismatch_hint(app, release))
    stack_map = None
    stored = trace
    if maps:
        trace, stack_map = sourcemaps.apply(trace, maps)
    return Release(rkey, app, release, trace, frame_key, stack_map, maps, notes,
                   stored.stack_frame, borrowed, stored)


def unmapped_release(rel: Release, ident: ScriptIdentity, scripts: frozenset[str]) -> Release:
    """`rel` without the maps of the scripts `ident` names as one of `scripts`: what a
    comparison with a release that has no map for that script reads (`one_sided_maps`)."""
    drop = [u for u in rel.maps if ident(u) in scripts]
    if not drop or rel.stored is None:
        return rel
    keep = {u: sm for u, sm in rel.maps.items() if u not in drop}
    out = _with_maps(rel.rkey, rel.app, rel.release, rel.stored, keep,
                     {u: r for u, r in rel.borrowed.items() if u in keep})
    # a dropped map that does not match its script still does not: still said
    out.warnings = [w for w in rel.warnings if w not in out.warnings
                    and any(w.startswith(f"{u}: ") for u in drop)] + out.warnings
    return out


def one_sided_maps(rels: list[Release], ident: ScriptIdentity
                   ) -> tuple[frozenset[str], list[str]]:
    """The scripts (as `ident` names them) a map names in some of `rels` but not in
    another that runs them: another build with no map of its own, so one function would
    have two names (new on one side, removed on the other). Returned with a warning line
    per script and release that lacks a map, saying what to upload. A comparison reads
    those scripts as recorded in every release (`Filters.unmapped`)."""
    mapped: dict[str, list[Release]] = {}
    bare: dict[str, list[tuple[Release, str]]] = {}
    for rel in rels:
        have = rel.mapped
        for u in have:
            mapped.setdefault(ident(u) or u, []).append(rel)
        for u in (rel.stored or rel.trace).resources:
            if u not in have:
                bare.setdefault(ident(u) or u, []).append((rel, u))
    out: dict[str, None] = {}
    lines: dict[str, None] = {}
    for name in sorted(set(mapped) & set(bare)):
        out[name] = None
        with_map = ", ".join(sorted({r.release for r in mapped[name]}))
        for rel, url in bare[name]:
            lines[(f"{url}: no source map names it in {rel.app} {rel.release} (its frames "
                   f"do not show it is the script mapped in {rel.app} {with_map}), so it is "
                   "compared as recorded in every release: "
                   f"{sourcemaps.mismatch_hint(rel.app, rel.release)}")] = None
    return frozenset(out), list(lines)


def shared_maps(snap: Snapshot, rkey: str, app: str, trace: ProfilerTrace, have: dict
                ) -> dict[str, tuple[Any, str]]:
    """Maps uploaded for another release of `app` that name scripts of `trace` which have
    no map of their own: script URL -> (map, that release). A map is about a script's
    bytes, not a release label: two releases serving one bundle (the store keeps no hash
    of it) with a map uploaded for one would otherwise name one function two ways, and
    every comparison across them would report it removed on one side and new on the other.
    The store knows a script by its frames only, so a map is taken when it verifiably
    fits them (`_fits`), else the script stays as recorded (`pair_map_warnings` then
    says so where a comparison meets it)."""
    missing = [u for u in trace.resources if u not in have]
    if not missing:
        return {}
    store = snap.tdir.parent
    out: dict[str, tuple[Any, str]] = {}
    releases = snap.manifest.get("releases", {})
    for other in sorted(releases):
        entry = releases[other]
        if other == rkey or entry.get("app") != app:
            continue
        if not sourcemaps.release_dir(store, other).is_dir():
            continue
        got = sourcemaps.maps_for(store, other, [u for u in missing if u not in out])
        if not got:
            continue
        theirs = _positions(snap, other)
        lines = script_lines.reader(sourcemaps.release_dir(store, other))
        for url, sm in got.items():
            if _fits(trace, url, sm, theirs, lines(url)):
                out[url] = (sm, str(entry.get("release", "")))
    return out


def _positions(snap: Snapshot, rkey: str) -> dict[tuple[str, int, int], str]:
    """(script basename, line, column) -> the function's recorded name, of a release's
    stored frames."""
    from .engine import read_part

    out: dict[tuple[str, int, int], str] = {}
    for p in snap.files("frames", [rkey]):
        t = read_part(p, ["name", "resource", "line", "column"]).to_pydict()
        for n, r, ln, c in zip(t["name"], t["resource"], t["line"], t["column"], strict=True):
            if r is not None and ln is not None and n:
                out[(script_lines.script_base(r), ln, c or 1)] = n
    return out


def _fits(trace: ProfilerTrace, url: str, sm: Any, theirs: dict[tuple[str, int, int], str],
          starts: list[int] | None) -> bool:
    """Another release's map `sm` fits `trace`'s script `url`: its named frames lie in
    the script's lines (when the upload kept its line starts), every one at a position
    where the other release recorded a function has that function's name (the same
    bytes put the same function there), at least one does, no function name both
    releases recorded sits at places of which they share none (`_moved`), and the check
    `jsprof report --sourcemap` refuses another build's map by says nothing."""
    rid = trace.resources.index(url)
    base = script_lines.script_base(url)
    mine = [i for i, f in enumerate(trace.frames)
            if f.resource_id == rid and f.line is not None and f.name
            and not f.name.startswith(("(", "<"))]
    if _moved({(trace.frames[i].name, trace.frames[i].line, trace.frames[i].column or 1)
               for i in mine},
              {(n, ln, c) for (b, ln, c), n in theirs.items() if b == base}):
        return False
    same = 0
    for i in mine:
        f = trace.frames[i]
        col = f.column or 1
        if starts is not None and (f.line > len(starts) or (
                f.line < len(starts) and col > starts[f.line] - starts[f.line - 1])):
            return False
        name = theirs.get((base, f.line, col))
        if name is not None:
            if name != f.name:
                return False
            same += 1
    if not same:
        return False
    probe = ProfilerTrace(trace.resources, [trace.frames[i] for i in mine],
                          np.full(len(mine), -1), np.arange(len(mine)))
    notes: list[str] = []
    sourcemaps.frame_functions(probe, {url: sm}, notes)
    return not notes


def _moved(mine: set[tuple[str, int, int]], theirs: set[tuple[str, int, int]]) -> bool:
    """A function name (name, line, column) both releases recorded, at places of which
    they share none: the function moved, so the bytes differ. Positions alone miss that
    when an edit moves functions to places the other release never recorded (a statement
    added mid-line: every later function on that line a few columns on), and that map
    would name them by whatever its mappings put there. One bundle recorded twice shares
    a place for every name both record (on acorn bundled by esbuild, 6 runs a side: all
    112-126 shared names; a statement added mid-line: 28 of 123 moved). Were two nested
    functions given one minified name, each release recording only another of them, the
    map is refused: a warning and minified names, never wrong ones."""
    at: dict[str, list[set[tuple[int, int]]]] = {}
    for k, side in enumerate((mine, theirs)):
        for n, ln, c in side:
            at.setdefault(n, [set(), set()])[k].add((ln, c))
    return any(a and b and not a & b for a, b in at.values())


def merges_frames(rel: Release) -> bool:
    """Two stored frames of `rel` are one function: its source maps map them to one, or
    the identity rule names their scripts alike (`page.html?exp=a` and `?exp=b` are one
    `page.html`), so one trace may hold that function twice and counts it once."""
    return len(set(rel.frame_key)) < len(rel.frame_key)


def merges_in_an_upload(rel: Release, committed: int | None) -> bool:
    """Two stored frames of `rel` that one upload may hold together are one function
    (`merges_frames`, narrowed): an upload's frames are either all committed ones (ids
    below `committed`) or all of the uncompacted tail's, which interns them apart, so a
    committed frame and its tail copy of the same function are never in one upload.
    `committed` None: no tail."""
    keys = rel.frame_key
    if committed is None or committed >= len(keys):
        return merges_frames(rel)
    return (len(set(keys[:committed])) < committed
            or len(set(keys[committed:])) < len(keys) - committed)


def identity(f: Filters) -> ScriptIdentity:
    """The script identity across releases a query's filters ask for (`fleet.releases`)."""
    return ScriptIdentity(f.url_rules)


def named(releases: dict[str, Release], f: Filters) -> dict[str, Release]:
    """Each release with its scripts named as `f`'s identity rule names them, so that one
    function is one function in every release (every merged view reads releases so), and
    without the maps of `f.unmapped` (a comparison with a release that has none)."""
    ident = identity(f)
    return {k: named_release(unmapped_release(r, ident, f.unmapped), ident)
            for k, r in releases.items()}


def named_release(rel: Release, ident: ScriptIdentity) -> Release:
    """`rel` with every script URL of its trace and functions as `ident` names it; scripts
    that name alike become one resource (frames and stacks keep their ids)."""
    if ident.exact:
        return rel
    trace = rel.trace
    names = [ident(r) for r in trace.resources]
    if names != list(trace.resources):
        pos: dict[str, int] = {}
        rid = [pos.setdefault(u, len(pos)) for u in names]
        frames = [ProfilerFrame(fr.name, None if fr.resource_id is None else rid[fr.resource_id],
                                fr.line, fr.column) for fr in trace.frames]
        trace = trace.replace(resources=list(pos), frames=frames)
    keys = [k if k.resource is None else FunctionKey(k.name, ident(k.resource), k.line, k.column)
            for k in rel.frame_key]
    return replace(rel, trace=trace, frame_key=keys)


def stored_trace(snap: Snapshot, rkey: str) -> ProfilerTrace:
    """A release's frames and stacks as the tables store them (ids as in the weights and
    samples tables, before source maps), as a ProfilerTrace without samples."""
    from .engine import read_part

    names, res, lines, cols = [], [], [], []
    for p in snap.files("frames", [rkey]):
        t = read_part(p).to_pydict()
        names += t["name"]
        res += t["resource"]
        lines += t["line"]
        cols += t["column"]
    par, fr = [], []
    for p in snap.files("stacks", [rkey]):
        t = read_part(p, ["parent_id", "frame_id"])
        par.append(t.column("parent_id").to_numpy())
        fr.append(t.column("frame_id").to_numpy())
    resources: dict[str, int] = {}
    frames = []
    for n, r, ln, c in zip(names, res, lines, cols, strict=True):
        rid = None if r is None else resources.setdefault(r, len(resources))
        frames.append(ProfilerFrame(n, rid, ln, c))
    return ProfilerTrace(
        list(resources), frames,
        np.concatenate(par) if par else np.zeros(0, np.int32),
        np.concatenate(fr) if fr else np.zeros(0, np.int32),
    )
