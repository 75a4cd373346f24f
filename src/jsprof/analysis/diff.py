"""Compare two profiles: per-function change in self and total time, in ms and in share.

Two rankings. A local diff compares two runs of one program, so it ranks by the change in
self *milliseconds* (`rank="ms"`): when one function gets slower every other function's
share falls, and ranking by share would bury the real change among them. A field diff
(`fleet diff`) compares populations of page loads of different lengths and ranks by the
change in share (`rank="share"`, percent of all samples, with and without JavaScript).
Both numbers are on every row.

Named functions are matched by name and resource only — not line or column — so an edit
elsewhere in a file, which moves every function below it, does not break the match (the
cost: two same-named functions of one resource are compared as one). Anonymous functions
are matched by their line too, so the module code, a `map` callback and a timer arrow of one
file stay three rows, `(anonymous work.js:8)` and so on. Resources are compared by a match
key (`ResourceMatcher`): without their query string and fragment (cache busters such as
`app.js?v=41` change from build to build while the code stays put), local files by path
however spelled, optionally relative to a stripped root so that two checkouts match.
"""

from __future__ import annotations

import difflib
import math
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

import numpy as np

from ..errors import UsageError
from ..trace import NONE, URL_SCHEME, ProfilerTrace, Recording, anonymous_label
from ..words import printable
from .calltree import CallTree
from .placepair import Anchors, Place, pair_places
from .profile import (
    KeyTable,
    _accumulate_track,
    _empty,
    as_recording,
    no_js_rows,
    sample_weights,
)


class NameKey(NamedTuple):
    """What a function is matched by across two profiles: name and resource; for an
    anonymous function (empty name) its line too; and for a name several functions of one
    script share (`KeyRule`) its line, and its column where the line does not tell them
    apart (None where not part of the match)."""

    name: str
    resource: str | None
    line: int | None = None
    column: int | None = None

    def label(self) -> str:
        if not self.name:
            label = anonymous_label(self.resource, self.line)
            return label if self.column is None else f"{label[:-1]}:{self.column})"
        if self.line is None:
            return self.name
        # A shared name matched by place: `e@app.min.js:1:4750`, as Firefox writes a
        # stack frame, so that the rows of the many `e`s of a minified script differ.
        where = anonymous_label(self.resource, self.line)[len("(anonymous ") : -1]
        if where.startswith("line "):
            where = where[len("line ") :]
        return f"{self.name}@{where}" + ("" if self.column is None else f":{self.column}")


def name_key(
    name: str, resource: str | None, line: int | None, anonymous_by_line: bool = True
) -> NameKey:
    """The match key of a frame: its line counts only when it has no name (and
    `anonymous_by_line`: False merges a resource's anonymous functions, as before issue 20)."""
    return NameKey(name, resource, line if anonymous_by_line and not name else None)


class KeyRule:
    """The match key of each frame of two profiles (issue 32: anonkey, keyorder).

    A name is matched by name and resource alone, not by place, so that a function
    survives an edit that moves it. That holds only where the name is one function: in a
    minified bundle dozens of functions are `e` or `t`, and every anonymous function of a
    one-line bundle is on line 1, so name (and line) would add up different functions into
    one row. The rule: a (name, resource) that has one place (line, column) among the
    frames of each profile matches as `name_key` does (it may have moved); one with
    several places in either profile is decided per name by `placepair.pair_places`
    (two places are two functions: a frame's line and column are where its function
    starts), from the script's functions with a name of their own (where the code moved)
    and the order of the name's places (an edit keeps it). Each of its functions is then
    a row of its own, keyed by its place in NEW (in BASE where NEW did not sample it): by
    line where those lines differ, else by line and column. Where nothing tells the
    functions apart (places that disagree, in different numbers on each side, no anchor),
    the name matches by name as before anonkey, its functions adding up in one row, so
    that a move alone never pairs a function with a stranger (review12, keyorder's
    review13: an edit below an unmoved `run` moved two `render` methods by a line, and
    by place B's old render was paired with A's new one).

    The key of a frame depends on its side when a function moved: call with `side` (0:
    the first of `sides`, BASE; 1: NEW). Without it (the form before keyorder) a name
    whose functions moved matches by name on every side; one whose functions all stayed
    by place."""

    def __init__(self, sides: Iterable[Iterable[tuple[str, str | None, int | None, int | None]]],
                 anonymous_by_line: bool = True) -> None:
        # anonymous_by_line=False (`fleet diff`): the anonymous functions of a script that
        # has one (in each profile) match by script alone, not by line
        self._by_line = anonymous_by_line
        shared: set[tuple[str, str | None]] = set()
        per_side: list[dict[tuple[str, str | None], set[Place]]] = []
        for side in sides:
            seen: dict[tuple[str, str | None], set[Place]] = {}
            for name, resource, line, column in side:
                seen.setdefault((name, resource), set()).add((line, column))
            # Several places on one side: one place on each side is one function that
            # may have moved, and matches by name.
            shared.update(k for k, v in seen.items() if len(v) > 1)
            per_side.append(seen)
        # per shared (name, resource): its key per side and place; and whether any of its
        # functions moved (then the side-less form matches it by name)
        self._keys: dict[tuple[str, str | None], list[dict[Place, NameKey]]] = {}
        self._moved: set[tuple[str, str | None]] = set()
        anchors: dict[str | None, Anchors] = {}
        if len(per_side) == 2 and shared:
            # Each script's anchors: its names with one place on each side.
            moves: dict[str | None, list[tuple[Place, Place]]] = {}
            for a in (per_side[0].keys() & per_side[1].keys()) - shared:
                moves.setdefault(a[1], []).append(
                    (next(iter(per_side[0][a])), next(iter(per_side[1][a]))))
            anchors = {r: Anchors(m) for r, m in moves.items()}
        for k in shared:
            functions = self._functions(k, per_side, anchors.get(k[1], Anchors(())))
            if functions is not None:
                self._place(k, functions, len(per_side))

    @staticmethod
    def _functions(k: tuple[str, str | None], per_side: list[dict], anchors: Anchors
                   ) -> list[list[Place | None]] | None:
        """The functions of shared name `k`, each its place per side (None: not there), or
        None: match by name."""
        if len(per_side) == 2:
            base, new = (sd.get(k, set()) for sd in per_side)
            pairs = pair_places(base, new, anchors)
            return None if pairs is None else [list(p) for p in pairs]
        # Other than two profiles: by place when one side's places are all among another's.
        sets = sorted((sd[k] for sd in per_side if k in sd), key=len)
        if not all(a <= b for a, b in zip(sets, sets[1:], strict=False)):
            return None
        return [[p if p in sd.get(k, ()) else None for sd in per_side]
                for p in set().union(*sets)]

    def _place(self, k: tuple[str, str | None], functions: list[list[Place | None]],
               n_sides: int) -> None:
        # Each function keyed by its place on the last side that has it (NEW's).
        at = [next(p for p in reversed(f) if p is not None) for f in functions]
        if len(set(at)) < len(at):
            return  # two functions at one place: nothing sound to key them by; by name
        by_column = len({line for line, _ in at}) < len(at)
        keys: list[dict[Place, NameKey]] = [{} for _ in range(n_sides)]
        for f, (line, column) in zip(functions, at, strict=True):
            key = NameKey(k[0], k[1], line, column if by_column else None)
            for side, p in enumerate(f):
                if p is not None:
                    keys[side][p] = key
                    if p != (line, column):
                        self._moved.add(k)
        self._keys[k] = keys

    def __call__(self, name: str, resource: str | None, line: int | None,
                 column: int | None, side: int | None = None) -> NameKey:
        keys = self._keys.get((name, resource))
        # The fleet's form (anonymous_by_line=False) matches a name whose functions moved
        # by name on every side too: its resampling and rollups map each stored frame onto
        # a key by the frame's own place (`key_index`), which no move can follow.
        if keys is None or ((side is None or not self._by_line)
                            and (name, resource) in self._moved):
            return name_key(name, resource, line, self._by_line)
        if side is None:  # nothing moved: each side keys a place alike
            side = next((i for i, ks in enumerate(keys) if (line, column) in ks), -1)
        key = keys[side].get((line, column)) if 0 <= side < len(keys) else None
        return key if key is not None else name_key(name, resource, line, self._by_line)


def key_index(pos: dict[NameKey, int], name: str, resource: str | None, line: int | None,
              column: int | None, default: int = -1) -> int:
    """The index in `pos` (a diff's rows' keys) of the row a frame adds to, its resource
    already matched: by place where the diff's KeyRule matched its name by place (by line
    and column, or by line), else by name (and line, for an anonymous one by line), as
    `KeyRule` keys it. For callers that map stored frames onto a diff's rows (`fleet`'s
    resampling and rollups) without the rule itself."""
    for k in (NameKey(name, resource, line, column), NameKey(name, resource, line),
              NameKey(name, resource)):
        j = pos.get(k)
        if j is not None:
            return j
    return default


def match_resource(url: str | None) -> str | None:
    """The part of a resource URL that identifies the code: no `?query`, no `#fragment`."""
    if url is None:
        return None
    return url.split("#", 1)[0].split("?", 1)[0] or url


_HEX = r"(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}"
_B64 = r"(?=\w*[0-9]|\w+[A-Z])(?=\w*[a-z]|[0-9A-Z_]*[0-9])\w{8,12}"
# `.HEX` (webpack) anywhere before the extension; `-HASH` (Vite, Rollup, esbuild) last.
_FILE_HEX = re.compile(rf"\.{_HEX}(?=\.)")
_FILE_DASH = re.compile(rf"[-.](?:{_HEX}|{_B64})(?=\.[A-Za-z0-9]+$)")
_VERSION_DIR = re.compile(rf"^(?:v?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.-]+)?|{_HEX})$")


def strip_build_marks(url: str) -> str:
    """`url` with the content hash of its file name and its version folders taken out."""
    head, sep, path = _split_origin(url)
    parts = path.split("/")
    name = parts[-1]
    bare = _FILE_HEX.sub("", name)
    bare = _FILE_DASH.sub("", bare)
    dirs = [p for p in parts[:-1] if not _VERSION_DIR.match(p)]
    return head + sep + "/".join([*dirs, bare or name])


_BLOB_UUID = re.compile(r"/[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")


def _split_origin(url: str) -> tuple[str, str, str]:
    """(`https://host`, ``, `/path`) for a URL; ("", "", path) for a path."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/]*)(.*)$", url)
    if m:
        return m[1], "", m[2]
    return "", "", url


def script_identity(url: str | None) -> str | None:
    """A script URL as the default identity rule names it across releases
    (`fleet.releases`: no query or fragment, no content hash or version folder)."""
    if url is None:
        return None
    return strip_build_marks(match_resource(url) or url) or url


def _local_path(url: str) -> str | None:
    """The path of a local-file resource (`file://` URL or plain path), else None."""
    if url.startswith("file://"):
        return unquote(urlsplit(url).path) or None
    if URL_SCHEME.match(url) or not url:
        return None
    return posixpath.normpath(url)


class ResourceMatcher:
    """What each resource is matched by across two profiles (its *match key*).

    - no `?query` or `#fragment` (cache busters change from build to build);
    - a `blob:` URL is its origin (`blob:https://app.example`): the UUID after it is new
      on every page load, so the same worker code would never match (the cost: two blob
      scripts of one origin are one resource here);
    - a local file is its path, however it was spelled: `file:///x/app.js` and `/x/app.js`
      are `file:///x/app.js`, `./lib/../app.js` is `app.js`;
    - `strip_prefixes` (paths, `file://` or other URLs) are cut off the front, leaving a
      path relative to that root: `--strip-prefix /ci/build --strip-prefix /home/me/proj`
      matches two checkouts' `src/app.js`;
    - a relative path left unmatched matches the one unmatched local file of the other
      profile whose path ends with it (`app.js` recorded relative by an old jsprof matches
      `file:///home/me/proj/app.js`); with two such candidates it stays unmatched.
    """

    def __init__(self, strip_prefixes: Sequence[str] = ()) -> None:
        self._paths: list[str] = []
        self._urls: list[str] = []
        for p in strip_prefixes:
            path = _local_path(p)
            if path is not None:
                self._paths.append(path.rstrip("/") or "/")
            else:
                self._urls.append(p)
        self.aliases: dict[str, str] = {}

    def own_key(self, url: str) -> str:
        u = match_resource(url) or url
        if u.startswith("blob:"):
            # A blob URL's last part is a random UUID, new each time the page makes it
            # (a worker from a Blob): its code is the page origin's blob, matched as one.
            return _BLOB_UUID.sub("", u)
        path = _local_path(u)
        if path is None:
            for p in self._urls:
                if u.startswith(p) and len(u) > len(p):
                    return u[len(p) :].lstrip("/")
            return u
        for p in self._paths:
            if p == "/" or path.startswith(p + "/"):
                return path[len(p) :].lstrip("/")
        return Path(path).as_uri() if path.startswith("/") else path

    def __call__(self, url: str | None) -> str | None:
        if url is None:
            return None
        k = self.own_key(url)
        return self.aliases.get(k, k)

    @classmethod
    def for_pair(
        cls, base: Iterable[str], new: Iterable[str], strip_prefixes: Sequence[str] = ()
    ) -> ResourceMatcher:
        """A matcher for two profiles' resources, relative paths paired where unambiguous."""
        m = cls(strip_prefixes)
        b = {m.own_key(r) for r in base}
        n = {m.own_key(r) for r in new}

        def local(k: str) -> bool:
            return k.startswith("file://") or not URL_SCHEME.match(k)

        def relative(k: str) -> bool:
            return local(k) and not k.startswith("file://") and not k.startswith("/")

        claims: dict[str, list[str]] = {}
        for mine, theirs in ((b - n, n - b), (n - b, b - n)):
            for k in sorted(filter(relative, mine)):
                hits = [o for o in theirs if local(o) and o.endswith("/" + k)]
                if len(hits) == 1:
                    claims.setdefault(hits[0], []).append(k)
        # A path claimed by two relative names, or itself renamed, stays as it is.
        for target, names in claims.items():
            if len(names) == 1 and target not in {x for v in claims.values() for x in v}:
                m.aliases[names[0]] = target
        return m


def _resources(rec: Recording, track: str | None) -> set[str]:
    tracks = [rec.track(track)] if track is not None else rec.tracks
    return {r for t in tracks for r in t.trace.resources}


def _tracks(rec: Recording, track: str | None) -> list:
    return [rec.track(track)] if track is not None else list(rec.tracks)


def key_rule(recs: Iterable[Recording], track: str | None, match: ResourceMatcher,
             by_line: bool = True) -> KeyRule:
    """The KeyRule of the frames of `recs` (both sides of a diff), resources under `match`."""
    sides = []
    for rec in recs:
        places = []
        for t in _tracks(rec, track):
            res = [match(r) for r in t.trace.resources]
            places.extend(
                (f.name, None if f.resource_id is None else res[f.resource_id], f.line,
                 f.column)
                for f in t.trace.frames
            )
        sides.append(places)
    return KeyRule(sides, by_line)


def _frame_name_keys(
    trace: ProfilerTrace, table: KeyTable, match: ResourceMatcher, rule: KeyRule,
    side: int | None = None,
) -> np.ndarray:
    res = [match(r) for r in trace.resources]
    ids = [
        table.intern(
            rule(f.name, None if f.resource_id is None else res[f.resource_id], f.line, f.column,
                 side)
        )
        for f in trace.frames
    ]
    return np.asarray(ids, dtype=np.int64)


def _times(
    rec: Recording, track: str | None, match: ResourceMatcher, rule: KeyRule,
    side: int | None = None,
) -> tuple[dict[NameKey, tuple[float, float]], float]:
    """Self and total ms per NameKey, and the total time in ms."""
    tracks = _tracks(rec, track)
    table = KeyTable()
    frame_keys = [_frame_name_keys(t.trace, table, match, rule, side) for t in tracks]
    weights = [sample_weights(t.trace, t.sample_interval) for t in tracks]
    acc = _empty(len(table))
    # The same accumulation `summarize` uses, keyed by NameKey, so recursion (and two
    # same-named functions calling each other) counts once per sample in the total.
    for t, fk, w in zip(tracks, frame_keys, weights, strict=True):
        _accumulate_track(t, fk, len(table), acc, w)
    total = float(sum(w.sum() for w in weights))
    self_ms, total_ms, total_n = acc[0], acc[1], acc[3]
    # Only functions some sample passed through: one that a filter removed (or an engine
    # listed unsampled) is not "removed" from the profile.
    times = {
        k: (float(self_ms[i]), float(total_ms[i]))
        for i, k in enumerate(table.keys)
        if total_n[i] > 0
    }
    # The samples with no JavaScript stack are rows too, named as `report` names them
    # ((idle), (garbage collector), ...): the shares then add up to 100 %, and a rule such
    # as '(garbage collector):self>+5pp' can be written.
    for r in no_js_rows(tracks, weights):
        key = NameKey(r.label, None)
        s, t = times.get(key, (0.0, 0.0))
        times[key] = (s + r.ms, t + r.ms)
    return times, total


def function_times(
    rec: Recording, track: str | None, match: ResourceMatcher, by_line: bool = True
) -> tuple[dict[NameKey, tuple[float, float]], float]:
    """Self and total ms per function (its NameKey under `match`; samples without
    JavaScript as their report rows, `(idle)` ...), and the recording's total ms: one side of
    a diff, for callers that compare many runs (`jsprof budget`). The keys are `name_key`'s
    (a KeyRule of no places): every run keyed alike, whatever else was sampled."""
    return _times(as_recording(rec), track, match, KeyRule((), by_line))


@dataclass
class FunctionChange:
    """One function in BASE and NEW: share (percent of all time; `base_self`, ...) and time
    (ms; `base_self_ms`, ...), and the changes in points and in ms."""

    key: NameKey
    base_self: float
    base_total: float
    new_self: float
    new_total: float
    status: str  # "new" (only in NEW), "removed" (only in BASE) or "" (in both)
    base_self_ms: float = 0.0
    base_total_ms: float = 0.0
    new_self_ms: float = 0.0
    new_total_ms: float = 0.0

    @property
    def d_self_ms(self) -> float:
        """Change in self time, ms."""
        return self.new_self_ms - self.base_self_ms

    @property
    def d_total_ms(self) -> float:
        return self.new_total_ms - self.base_total_ms

    @property
    def d_self(self) -> float:
        """Change in self share, percentage points."""
        return self.new_self - self.base_self

    @property
    def d_total(self) -> float:
        return self.new_total - self.base_total

    def relative(self, metric: str) -> float:
        """Relative change of the share in percent (inf when it appeared from nothing)."""
        base = self.base_self if metric == "self" else self.base_total
        new = self.new_self if metric == "self" else self.new_total
        if base > 0:
            return 100.0 * (new - base) / base
        return math.inf if new > 0 else 0.0

    @property
    def impact(self) -> float:
        """Sort key of a share ranking: the larger of the two absolute changes in points."""
        return max(abs(self.d_self), abs(self.d_total))

    @property
    def changed(self) -> bool:
        return self.impact > 1e-9 or max(abs(self.d_self_ms), abs(self.d_total_ms)) > 1e-9


@dataclass
class ProfileDiff:
    base_total_ms: float
    new_total_ms: float
    rows: list[FunctionChange]  # largest change first, by `rank`
    rank: str = "share"  # "ms": by change in self ms; "share": by change in share

    def unmatched_share(self) -> tuple[float, float]:
        """The share (percent) of BASE's time in rows only BASE has, and of NEW's in rows
        only NEW has: most of either means the two sides did not match (another script, a
        checkout elsewhere, another build), not that the code changed. Only the scripts'
        functions count: an engine's own rows (`(garbage collector)`: QuickJS's collector
        and V8's take different shares of the same code, V8's up to half of a run) say
        nothing of whether the code matched."""
        removed = sum(r.base_self for r in self.rows if r.status == "removed" and r.key.resource)
        added = sum(r.new_self for r in self.rows if r.status == "new" and r.key.resource)
        return removed, added

    def unmatched_resources(self, status: str) -> list[str]:
        """The resources of the rows only one side has ("removed": BASE's, "new": NEW's),
        most time first."""
        ms: dict[str, float] = {}
        for r in self.rows:
            if r.status == status and r.key.resource:
                t = r.base_self_ms if status == "removed" else r.new_self_ms
                ms[r.key.resource] = ms.get(r.key.resource, 0.0) + t
        return sorted(ms, key=lambda k: -ms[k])

    def find(self, name: str) -> list[FunctionChange]:
        """Rows whose function is called `name` (any resource; `(anonymous)` names every
        anonymous function, `(anonymous app.js:8)` those of line 8, `(anonymous
        app.js:1:40)` one; `e` every `e`, `e@app.js:1:40` one); `*` matches every row."""
        if name == "*":
            return list(self.rows)
        return [
            r
            for r in self.rows
            if r.key.name == name
            or r.key.label() == name
            or (not r.key.name and name == "(anonymous)")
            or (not r.key.name and name == anonymous_label(r.key.resource, r.key.line))
        ]


def diff_profiles(
    base: Recording | ProfilerTrace,
    new: Recording | ProfilerTrace,
    track: str | None = None,
    strip_prefixes: Sequence[str] = (),
    rank: str = "share",
    anonymous_by_line: bool = False,
    match: ResourceMatcher | None = None,
) -> ProfileDiff:
    """Per-function change in self and total time (ms and share) from BASE to NEW, largest
    change first: by self ms (`rank="ms"`, two runs of one program: `jsprof diff`) or by
    share (`rank="share"`, populations of page loads: `fleet diff`).

    Functions match by `name_key` and resource match key (`ResourceMatcher`; `match` gives
    the matcher to use, so a caller that resamples the same rows keys them alike);
    `anonymous_by_line` tells anonymous functions apart by line, and the functions that
    share a name in one script apart by place (`KeyRule`; `jsprof diff` does; the default
    keeps the keys `fleet diff`'s own per-trace tables are built with)."""
    if rank not in ("ms", "share"):
        raise ValueError(f"rank must be 'ms' or 'share', not {rank!r}")
    base, new = as_recording(base), as_recording(new)
    if match is None:
        match = ResourceMatcher.for_pair(
            _resources(base, track), _resources(new, track), strip_prefixes
        )
    rule = key_rule((base, new), track, match, anonymous_by_line)
    b, b_total = _times(base, track, match, rule, 0)
    n, n_total = _times(new, track, match, rule, 1)
    b_scale = 100.0 / b_total if b_total > 0 else 0.0
    n_scale = 100.0 / n_total if n_total > 0 else 0.0
    rows = []
    for key in list(n) + [k for k in b if k not in n]:
        bs, bt = b.get(key, (0.0, 0.0))
        ns, nt = n.get(key, (0.0, 0.0))
        status = "new" if key not in b else "removed" if key not in n else ""
        rows.append(
            FunctionChange(
                key, bs * b_scale, bt * b_scale, ns * n_scale, nt * n_scale, status, bs, bt, ns, nt
            )
        )
    # Ties (often exact zeros) fall back to name so the order is stable across runs.
    tie = lambda r: (  # noqa: E731
        r.key.name, r.key.resource or "", r.key.line or 0, r.key.column or 0
    )
    if rank == "ms":
        # Self ms first: a caller's total grows with any callee's, so ranking by total
        # would put `main` (the whole change) on top of every diff.
        rows.sort(key=lambda r: (-abs(r.d_self_ms), -abs(r.d_total_ms), *tie(r)))
    else:
        rows.sort(key=lambda r: (-r.impact, -abs(r.d_self), *tie(r)))
    return ProfileDiff(b_total, n_total, rows, rank)


# ---- per call path, for the differential flame graph --------------------------------------


@dataclass
class TreeChange:
    """Per node of NEW's call tree: change of its call path's shares vs BASE, in points,
    and of its time, in ms. `unit` is what the differential flame graph colours by: "ms"
    for two runs of one program (`jsprof diff`), "pp" for populations (`fleet diff`).

    A path is the chain of `name_key`s from the root, so nodes are matched the same way
    functions are. `in_base` is False for paths BASE never took.
    """

    d_self: np.ndarray
    d_total: np.ndarray
    in_base: np.ndarray
    d_self_ms: np.ndarray | None = None
    d_total_ms: np.ndarray | None = None
    unit: str = "pp"

    @property
    def colour(self) -> np.ndarray:
        """The change the flame graph colours each node by (self, in `unit`)."""
        if self.unit == "ms" and self.d_self_ms is not None:
            return self.d_self_ms
        return self.d_self


def _path_shares(
    tree: CallTree, paths: dict, match: ResourceMatcher, rule: KeyRule, side: int
) -> tuple[np.ndarray, dict[int, list[float]]]:
    """Path id per node (interning into `paths`) and self/total share and self/total ms
    per path id; `side`: the tree's in `rule` (0 BASE, 1 NEW)."""
    fkeys = [rule(f.name, match(f.resource), f.line, f.column, side) for f in tree.functions]
    n = len(tree.parent)
    path_of = np.empty(n, dtype=np.int64)
    scale = 100.0 / tree.total_time if tree.total_time > 0 else 0.0
    sums: dict[int, list[float]] = {}
    parents = tree.parent.tolist()
    funcs = tree.function.tolist()
    self_ms = tree.self_ms.tolist()
    total_ms = tree.total_ms.tolist()
    # build_call_tree creates nodes level by level, so a parent always precedes its children.
    for i in range(n):
        p = parents[i]
        key = (NONE if p == NONE else int(path_of[p]), fkeys[funcs[i]])
        pid = paths.setdefault(key, len(paths))
        path_of[i] = pid
        acc = sums.setdefault(pid, [0.0, 0.0, 0.0, 0.0])
        # Sibling nodes on one path (same name and resource, different line) add up.
        acc[0] += self_ms[i] * scale
        acc[1] += total_ms[i] * scale
        acc[2] += self_ms[i]
        acc[3] += total_ms[i]
    return path_of, sums


def tree_changes(base: CallTree, new: CallTree, strip_prefixes: Sequence[str] = (),
                 match: ResourceMatcher | None = None, unit: str = "pp") -> TreeChange:
    """For each node of NEW's tree, how its call path's self and total share (and ms)
    changed (resources keyed by `match` when given, as `diff_profiles` takes it); `unit`:
    what a flame graph colours by, "pp" or "ms"."""
    if unit not in ("ms", "pp"):
        raise ValueError(f"unit must be 'ms' or 'pp', not {unit!r}")
    if match is None:
        match = ResourceMatcher.for_pair(
            (f.resource for f in base.functions if f.resource is not None),
            (f.resource for f in new.functions if f.resource is not None),
            strip_prefixes,
        )
    rule = KeyRule(
        [(f.name, match(f.resource), f.line, f.column) for f in t.functions] for t in (base, new)
    )
    paths: dict = {}
    _, b_sums = _path_shares(base, paths, match, rule, 0)
    n_path, n_sums = _path_shares(new, paths, match, rule, 1)
    d = np.zeros((4, len(n_path)))
    in_base = np.zeros(len(n_path), dtype=bool)
    none = [0.0, 0.0, 0.0, 0.0]
    for i, pid in enumerate(n_path.tolist()):
        d[:, i] = np.subtract(n_sums[pid], b_sums.get(pid, none))
        in_base[i] = pid in b_sums
    return TreeChange(d[0], d[1], in_base, d[2], d[3], unit)


# ---- CI gate: --fail-if 'fib:self>+5pp' ---------------------------------------------------

_GATE = re.compile(
    r"^(?P<name>.+):(?P<metric>self|total)\s*(?P<op>[<>])\s*"
    r"(?P<value>[+-]?\d+(?:\.\d+)?)\s*(?P<unit>pp|%|ms)$"
)
SHARE_UNITS = ("pp", "%")
ALL_UNITS = ("pp", "%", "ms")


@dataclass
class Gate:
    """`NAME:METRIC>VALUE(pp|%|ms)`: fail when NAME's change exceeds VALUE (or is below, `<`)."""

    spec: str
    name: str
    metric: str  # "self" or "total"
    op: str  # ">" or "<"
    value: float
    # "pp" (percentage points of share), "%" (relative change of the share) or "ms"
    # (change in time: only where both sides are runs of one program)
    unit: str

    def change(self, row: FunctionChange) -> float:
        if self.unit == "pp":
            return row.d_self if self.metric == "self" else row.d_total
        if self.unit == "ms":
            return row.d_self_ms if self.metric == "self" else row.d_total_ms
        return row.relative(self.metric)

    def violated_by(self, row: FunctionChange) -> bool:
        c = self.change(row)
        return c > self.value if self.op == ">" else c < self.value


def parse_gate(spec: str, units: Sequence[str] = SHARE_UNITS) -> Gate:
    """Parse a --fail-if rule; a malformed one is a UsageError that shows the syntax.

    `units`: the changes a rule may be given in; `jsprof diff` allows ALL_UNITS, `fleet
    diff` (page loads of different lengths, where milliseconds are not comparable) the
    shares only."""
    m = _GATE.match(spec.strip())
    if not m or m["unit"] not in units:
        words = " or ".join(units)
        eg = "'fib:self>+5pp', 'render:total>+20%'" + (
            " or 'fib:self>+50ms'" if "ms" in units else ""
        )
        why = (
            f" ({m['unit']} is not comparable here)" if m and m["unit"] not in units else ""
        )
        raise UsageError(
            f"--fail-if {spec!r}: expected NAME:self|total>CHANGE with CHANGE in {words}{why}, "
            f"e.g. {eg}"
        )
    return Gate(spec, m["name"].strip(), m["metric"], m["op"], float(m["value"]), m["unit"])


def check_rule_names(diff: ProfileDiff, gates: Sequence[Gate]) -> None:
    """Refuse a rule that names no function of either profile: a typo in a CI rule would
    otherwise pass forever. One line, naming the closest function names (UsageError)."""
    if not diff.rows:
        return  # nothing was compared: no name can be checked
    for g in gates:
        if diff.find(g.name):
            continue
        labels = list(dict.fromkeys(r.key.label() for r in diff.rows))
        close = difflib.get_close_matches(g.name, labels, n=3, cutoff=0.5)
        if close:
            hint = "the closest: " + ", ".join(printable(c) for c in close)
        else:
            hint = "none is close; the largest changes: " + ", ".join(
                printable(c) for c in labels[:3]
            )
        raise UsageError(
            f"--fail-if {g.spec!r}: no function named {printable(g.name)!r} in either "
            f"profile ({hint})"
        )


def _fmt_change(gate: Gate, row: FunctionChange) -> str:
    c = gate.change(row)
    if math.isinf(c):
        return "new"
    return f"{c:+.1f}ms" if gate.unit == "ms" else f"{c:+.2f}{gate.unit}"


def check_gates(diff: ProfileDiff, gates: list[Gate]) -> list[str]:
    """One line per rule a function broke, naming the function, its change and the rule.

    A rule that matches no function is a UsageError (`check_rule_names`)."""
    check_rule_names(diff, gates)
    out = []
    for g in gates:
        for row in diff.find(g.name):
            if g.violated_by(row):
                where = f" ({printable(row.key.resource)})" if row.key.resource else ""
                if g.unit == "ms":
                    before, after = (
                        (row.base_self_ms, row.new_self_ms)
                        if g.metric == "self"
                        else (row.base_total_ms, row.new_total_ms)
                    )
                    what = f"{g.metric} time {before:.1f} ms -> {after:.1f} ms"
                else:
                    before, after = (
                        (row.base_self, row.new_self)
                        if g.metric == "self"
                        else (row.base_total, row.new_total)
                    )
                    what = f"{g.metric} share {before:.2f}% -> {after:.2f}%"
                name = printable(row.key.label())
                out.append(
                    f"{name}{where}: {what} ({_fmt_change(g, row)}) breaks --fail-if {g.spec!r}"
                )
    return out
