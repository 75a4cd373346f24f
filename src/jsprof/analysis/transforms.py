"""Call-tree transforms: pure Recording -> Recording steps, applied in the order given.

The command line's `--transform SPEC` (report, flame, diff, convert). The semantics are the
Firefox Profiler's transforms of the same names; a NAME matches a function's name as the
filters match it (`filters.name_matcher`: whole name, `*` and `?` wildcards), a path
`A>B>C` is function names from a root of the call tree down.

- `merge:NAME`: NAME leaves every stack; its self time goes to its callers.
- `merge-node:A>B>C`: only the call node at that path leaves (its children move up to B).
- `focus-subtree:A>B`: only samples under that call path, rooted at its last node.
- `focus:NAME`: only samples through NAME, each rooted at its outermost NAME; recursive
  calls of NAME below it merge into that root (the issue's grammar says so; Firefox's
  focus-function keeps them as nodes, i.e. this is its focus-function then
  collapse-recursion).
- `collapse:NAME`: NAME's callees fold into NAME (their time becomes NAME's self time).
- `collapse-resource:URL`: the frames of one script become one frame named after its file;
  consecutive ones merge (a script calling back into itself through another stays two).
- `focus-resource:URL`: only the frames of one script stay (the Firefox Profiler's
  focus-category, with a script for the category): every other frame leaves the stack,
  its self time going to its nearest caller in the script; samples with no frame of the
  script are dropped.
- `collapse-recursion:NAME`: a call of NAME inside NAME (directly or through others) joins
  the outermost one; the frames in between leave that stack.
- `drop:NAME`: drop the samples whose stack contains NAME.

Transforms keep samples' times and weights: a step that drops samples (focus,
focus-subtree, drop) computes the weights over the recording first, as the filters do
(`filters.keep_samples`), so a kept sample is never charged the gap to the next kept one.
A sample whose every frame is merged away keeps its time under one `(merged)` frame, so
merges never shrink totals. Per-stack work is a Python pass over the stacks table (stacks
are far fewer than samples); samples are remapped by a lookup array.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from urllib.parse import unquote, urlparse

import numpy as np

from ..errors import UsageError
from ..trace import (
    NO_LINE,
    NONE,
    ProfilerTrace,
    Recording,
    TraceBuilder,
    Track,
    sample_weights,
    samples_dropped,
    spans_without_calls,
)
from . import filters

NAME_KINDS = ("merge", "focus", "collapse", "collapse-recursion", "drop")
PATH_KINDS = ("merge-node", "focus-subtree")
KINDS = ("merge", "merge-node", "focus-subtree", "focus", "collapse", "collapse-resource",
         "collapse-recursion", "drop", "focus-resource")
RESOURCE_KINDS = ("collapse-resource", "focus-resource")  # their argument is a script URL
MERGED = "(merged)"  # what a sample whose every frame was merged away is charged to
MAX_SPEC = 4096  # a spec is typed or scripted; beyond this it is not one


@dataclass(frozen=True)
class Transform:
    kind: str
    arg: str  # NAME, URL, or the path as given
    path: tuple[str, ...] = ()  # PATH_KINDS: the names from the root down

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}"


def parse_spec(text: str) -> Transform:
    """`KIND:ARG` as the command line gives it. Raises ValueError with the reason."""
    kinds = ", ".join(KINDS)
    if len(text) > MAX_SPEC:
        raise ValueError(f"a transform of {len(text):,} characters is not one")
    kind, sep, arg = text.partition(":")
    kind = kind.strip()
    if not sep:
        raise ValueError(f"{text!r}: expected KIND:NAME, KIND one of {kinds}")
    if kind not in KINDS:
        raise ValueError(f"{text!r}: unknown transform {kind!r}; one of {kinds}")
    what = ("URL" if kind in RESOURCE_KINDS
            else "call path A>B>C" if kind in PATH_KINDS else "NAME")
    if not arg.strip():
        raise ValueError(f"{text!r}: {kind} needs a {what} after the colon")
    if kind in PATH_KINDS:
        path = tuple(p.strip() for p in arg.split(">"))
        if not all(path):
            raise ValueError(f"{text!r}: an empty name in the call path; write {kind}:A>B>C")
        return Transform(kind, arg, path)
    return Transform(kind, arg)


# ---- per-stack walks ---------------------------------------------------------------------


class _Rebuild:
    """A new frame and stack table for one trace; frames are interned when a stack uses
    them, so a frame every stack lost (a merged function) is gone from the table."""

    def __init__(self, tr: ProfilerTrace) -> None:
        self.tr = tr
        self.b = TraceBuilder()
        self._fid: list[int | None] = [None] * len(tr.frames)
        n = tr.num_stacks
        # new[s] per old stack, one more entry NONE: new[NONE] is "no stack", so a root's
        # parent and a stack-less sample index it alike.
        self.new: list[int] = [NONE] * (n + 1)

    def frame(self, f: int) -> int:
        fid = self._fid[f]
        if fid is None:
            fr = self.tr.frames[f]
            rid = None if fr.resource_id is None else self.b.resource_id(
                self.tr.resources[fr.resource_id])
            fid = self._fid[f] = self.b.frame_id(fr.name, rid, fr.line, fr.column)
        return fid

    def push(self, parent: int, f: int) -> int:
        return self.b.stack_id_from(parent, self.frame(f))

    def walk(self) -> zip:
        tr = self.tr
        return zip(range(tr.num_stacks), tr.stack_parent.tolist(), tr.stack_frame.tolist(),
                   strict=True)

    def finish(self, interval: float | None, drop_lost: bool) -> ProfilerTrace:
        """The trace over the new tables. A sample whose stack is gone is dropped
        (`drop_lost`: focus) or charged to `(merged)`."""
        tr = self.tr
        new = np.asarray(self.new, np.int64)
        old = tr.sample_stack
        sid = new[old]
        lost = (sid == NONE) & (old != NONE)
        if lost.any() and not drop_lost:
            sid[lost] = self.b.stack_id([self.b.frame_id(MERGED)])
        tables = self.b.build()
        line = None
        if tr.sample_line is not None:
            # the executing line belongs to the old leaf: kept where it is still the leaf
            fid = np.asarray([NONE if x is None else x for x in self._fid], np.int64)
            has = (old != NONE) & (sid != NONE)
            same = np.zeros(len(old), bool)
            if has.any():
                same[has] = (tables.stack_frame[sid[has]] == fid[tr.stack_frame[old[has]]])
            line = np.where(same, tr.sample_line, NO_LINE)
        out = tr.with_tables(tables, sample_stack=sid, sample_line=line)
        if drop_lost:
            keep = old != NONE
            keep[keep] = sid[keep] != NONE
            out = filters.keep_samples(out, keep, sample_weights(tr, interval))
        return out


def _hits(tr: ProfilerTrace, name: str) -> list[bool]:
    return filters._frame_mask(tr, filters.name_matcher(name)).tolist()


def _merge(r: _Rebuild, hit: list[bool]) -> None:
    new = r.new
    for s, p, f in r.walk():
        new[s] = new[p] if hit[f] else r.push(new[p], f)


def _path_depths(r: _Rebuild, path: Sequence[str]) -> list[int]:
    """Per stack: how many names of `path` it matches from the root, -1 once it leaves
    the path (and for every stack below the path's last node). One more entry, 0: the
    roots' parent."""
    masks = [_hits(r.tr, name) for name in path]
    n = len(path)
    k = [0] * (r.tr.num_stacks + 1)
    for s, p, f in r.walk():
        kp = k[p]
        k[s] = kp + 1 if 0 <= kp < n and masks[kp][f] else -1
    return k


def _merge_node(r: _Rebuild, path: Sequence[str]) -> bool:
    k, n, new = _path_depths(r, path), len(path), r.new
    for s, p, f in r.walk():
        new[s] = new[p] if k[s] == n else r.push(new[p], f)
    return n in k


def _focus_subtree(r: _Rebuild, path: Sequence[str]) -> bool:
    k, n, new = _path_depths(r, path), len(path), r.new
    under = [False] * len(new)
    for s, p, f in r.walk():
        if under[p]:
            new[s], under[s] = r.push(new[p], f), True
        elif k[s] == n:
            new[s], under[s] = r.push(NONE, f), True
    return n in k


def _recursion(r: _Rebuild, hit: list[bool], focus: bool) -> None:
    """collapse-recursion, and focus (which also cuts each stack above its outermost hit).

    Per stack, the new stacks of the matching functions on its path (function -> its
    outermost call's new stack): a deeper call of one of them is that stack again."""
    new = r.new
    outside: dict[int, int] = {}
    seen: list[dict[int, int] | None] = [None] * len(new)
    seen[NONE] = None if focus else outside
    for s, p, f in r.walk():
        up = seen[p]
        if up is None:  # focus, above the first hit: nothing kept yet
            if hit[f]:
                new[s] = r.push(NONE, f)
                seen[s] = {r.frame(f): new[s]}
            continue
        if not hit[f]:
            new[s], seen[s] = r.push(new[p], f), up
            continue
        g = r.frame(f)
        outer = up.get(g)
        if outer is not None:
            new[s], seen[s] = outer, up
        else:
            new[s] = r.push(new[p], f)
            seen[s] = {**up, g: new[s]}


def _collapse(r: _Rebuild, hit: list[bool]) -> None:
    new = r.new
    inside = [False] * len(new)
    for s, p, f in r.walk():
        if inside[p]:
            new[s], inside[s] = new[p], True
        else:
            new[s], inside[s] = r.push(new[p], f), hit[f]


def script_label(url: str) -> str:
    """A collapsed script's frame name: its file name (the full URL is its resource)."""
    path = url.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    return path.rsplit("/", 1)[-1] or url


def resource_matches(url: str, pattern: str) -> bool:
    """`pattern` (wildcards allowed) is the URL, or, for a `file:` URL, its path or the
    path relative to the current folder: what the tables show for it."""
    return any(fnmatchcase(u, pattern) for u in resource_spellings(url))


def resource_spellings(url: str) -> list[str]:
    """The spellings a collapse-resource pattern is matched against (the viewer's page
    carries them too, so its transforms match as these do)."""
    out = [url]
    if url.startswith("file://"):
        path = unquote(urlparse(url).path)
        out.append(path)
        prefix = os.getcwd().rstrip("/") + "/"
        if path.startswith(prefix):
            out.append(path[len(prefix):])
    return out


def _collapse_resource(r: _Rebuild, pattern: str) -> bool:
    tr, b, new = r.tr, r.b, r.new
    hit_res = [resource_matches(u, pattern) for u in tr.resources]
    collapsed: dict[int, int] = {}

    def script_frame(rid: int) -> int:
        g = collapsed.get(rid)
        if g is None:
            url = tr.resources[rid]
            g = collapsed[rid] = b.frame_id(script_label(url), b.resource_id(url))
        return g

    leaf = [NONE] * len(new)  # each new stack's frame
    for s, p, f in r.walk():
        rid = tr.frames[f].resource_id
        if rid is not None and hit_res[rid]:
            g = script_frame(rid)
            if leaf[p] == g:
                new[s], leaf[s] = new[p], g
                continue
            new[s], leaf[s] = b.stack_id_from(new[p], g), g
        else:
            new[s] = r.push(new[p], f)
            leaf[s] = r.frame(f)
    return any(hit_res)


def _focus_resource(r: _Rebuild, pattern: str) -> bool:
    tr = r.tr
    hit_res = [resource_matches(u, pattern) for u in tr.resources]
    keep = [fr.resource_id is not None and hit_res[fr.resource_id] for fr in tr.frames]
    _merge(r, [not k for k in keep])  # a stack left with no frame of the script: dropped
    return any(keep)


# ---- one transform over a recording ------------------------------------------------------


# The transforms that keep only some samples (the others drop none).
DROPPING = frozenset({"focus", "focus-subtree", "focus-resource"})


def _one_track(track: Track, t: Transform) -> tuple[ProfilerTrace, bool]:
    tr = track.trace
    r = _Rebuild(tr)
    if t.kind in PATH_KINDS:
        step = _merge_node if t.kind == "merge-node" else _focus_subtree
        matched = step(r, t.path)
    elif t.kind == "collapse-resource":
        matched = _collapse_resource(r, t.arg)
    elif t.kind == "focus-resource":
        matched = _focus_resource(r, t.arg)
    else:
        hit = _hits(tr, t.arg)
        matched = any(hit)
        if t.kind == "merge":
            _merge(r, hit)
        elif t.kind == "collapse":
            _collapse(r, hit)
        else:
            _recursion(r, hit, focus=t.kind == "focus")
    return r.finish(track.sample_interval, drop_lost=t.kind in DROPPING), matched


def transform(rec: Recording, t: Transform) -> tuple[Recording, bool]:
    """`rec` with `t` applied to every track, and whether anything in it matched."""
    if t.kind == "drop":  # the filters' --exclude: frames and spans stay as they are
        return filters.exclude(rec, t.arg), filters.matches_any(rec, t.arg)
    tracks, matched = [], False
    for track in rec.tracks:
        trace, hit = _one_track(track, t)
        matched |= hit
        if t.kind in DROPPING:  # a selection of the samples: the recording's lost time not
            track = samples_dropped(track, trace)
        # spans point into the frames table, which a transform rebuilds
        tracks.append(replace(track, trace=trace, spans=spans_without_calls(track.spans)))
    return Recording(tracks), matched


def no_match_error(t: Transform, source: str) -> UsageError:
    if t.kind in RESOURCE_KINDS:
        what = "no script URL in"
        how = "give a URL as `report --by resource` lists it (* and ? as wildcards)"
    elif t.kind in PATH_KINDS:
        what = "no call path in"
        how = ("give function names from a root of `report --tree` down, joined by > "
               "(* and ? as wildcards)")
    else:
        what = "no function in"
        how = "names match whole, with * and ? as wildcards (e.g. 'fib', 'get *', '*Loop')"
    return UsageError(f"--transform {str(t)!r}: {what} {source} matches; {how}")


def apply(
    rec: Recording,
    source: str,
    specs: Sequence[Transform],
    unmatched: list[str] | None = None,
) -> Recording:
    """The command line's transforms, in order. One that matches nothing in what the
    steps before it left is a UsageError (a CI script's typo must not pass as a result);
    with `unmatched` given, its spec is appended there instead (`diff`: refused only when
    neither side has it)."""
    for t in specs:
        rec, matched = transform(rec, t)
        if not matched:
            if unmatched is None:
                raise no_match_error(t, source)
            unmatched.append(f"--transform\0{t}")
    return rec

