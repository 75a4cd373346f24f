"""Which function of BASE is which of NEW among the functions that share one name in one
script (issue 32; `diff.KeyRule` asks it), given where they start (line, column).

An edit moves the functions below it and keeps the ones above it in place, so neither "the
same place is the same function" (it pairs a function with another that moved onto its
place) nor "the same name is the same function" (one row for dozens of minified `e`s) holds
across an edit. What tells: the script's functions with a name of their own (one place in
each profile, the *anchors*) show where the code moved, and an edit keeps the order of the
functions. In order of trust:

1. a place between two anchors that moved alike (no edit between them) moved as they did;
2. of the places no anchor brackets: one side's all among the other's is the same code
   (a function not sampled on one side); places both sides have that pairing in order
   leaves on themselves are the same functions (two runs of one build sampling A+B and
   A+C); else, as many places on each side, moved by one edit (pairing in order: no shift,
   then one shift), pair in order;
3. else the anchored places stay paired and the rest is told apart by place when anchors
   resolved part of the name; with nothing to go by, `pair_places` returns None: the
   caller matches the name by name (one row), as for a script that moved before issue
   32's keyorder.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

Place = tuple[int | None, int | None]  # (line, column), either unknown in some traces


def _order(p: Place) -> tuple[int, int]:
    return (-1 if p[0] is None else p[0], -1 if p[1] is None else p[1])


def _shift(b: Place, n: Place) -> tuple[int, int]:
    """(lines, columns) from b to n; 0 columns where a trace has none."""
    dc = 0 if b[1] is None or n[1] is None else n[1] - b[1]
    return (n[0] or 0) - (b[0] or 0), dc


class Anchors:
    """Where a script's functions of a name of their own went, BASE place -> NEW place."""

    def __init__(self, moves: Iterable[tuple[Place, Place]]) -> None:
        moves = [(b, n) for b, n in moves if b[0] is not None and n[0] is not None]
        self._fwd = sorted(moves, key=lambda m: _order(m[0]))
        self._fwd_keys = [_order(b) for b, _ in self._fwd]
        self._back = sorted(((n, b) for b, n in moves), key=lambda m: _order(m[0]))
        self._back_keys = [_order(n) for n, _ in self._back]

    @staticmethod
    def _carry(p: Place, seq: list[tuple[Place, Place]], keys: list[tuple[int, int]]
               ) -> tuple[bool, list[Place]]:
        """(sure, where p went): sure when the anchors around it moved alike; else the
        places each of the two moved it to (an edit between them: p moved as the one
        above it or as the one below); nothing above the first anchor or below the last
        (an edit may be anywhere there)."""
        if p[0] is None:
            return False, []
        k = _order(p)
        i, j = bisect_right(keys, k), bisect_left(keys, k)
        if i == 0 or j == len(seq):
            return False, []
        out = []
        for upper, a in ((True, seq[i - 1]), (False, seq[j])):
            dl, dc = _shift(*a)
            # A column shift is an edit earlier on the anchor's line: it moves p's column
            # only on that line. Above p's line (the upper anchor's), p's line is after the
            # edit: its lines moved, not its column; below it, the edit may be after p.
            if dc and a[0][0] != p[0]:
                if not upper:
                    continue
                dc = 0
            out.append((p[0] + dl, None if p[1] is None else p[1] + dc))
        return len(out) == 2 and out[0] == out[1], list(dict.fromkeys(out))

    def forward(self, p: Place) -> tuple[bool, list[Place]]:
        """Where BASE's place `p` is in NEW: (sure, candidates), as `_carry`."""
        return self._carry(p, self._fwd, self._fwd_keys)

    def back(self, q: Place) -> tuple[bool, list[Place]]:
        """Where NEW's place `q` was in BASE, likewise."""
        return self._carry(q, self._back, self._back_keys)


def _one_edit(pairs: list[tuple[Place, Place]]) -> bool:
    """Whether pairs (in BASE order) moved as one edit moves code: not at all, then (from
    the edit on) by one number of lines (by one number of columns where no line moved)."""
    shifts = [_shift(b, n) for b, n in pairs]
    moved = [s for s in shifts if s != (0, 0)]
    if not moved:
        return True
    first = shifts.index(moved[0])
    if any(s == (0, 0) for s in shifts[first:]):
        return False
    if len({dl for dl, _ in moved}) > 1:
        return False
    if moved[0][0] == 0:
        return len({dc for _, dc in moved}) == 1
    # Lines moved: an edit changes columns on its own line only (the functions after it
    # there), so a column shift is the first moved line's, one shift for all of them; a
    # function of a later line keeps its column (review14: shifts (-1,-124) and (-1,+4)
    # passed as one edit and paired two runs' functions with strangers).
    line = pairs[first][0][0]
    cols = {dc for (b, _n), (_dl, dc) in zip(pairs[first:], shifts[first:], strict=True)
            if dc and b[0] == line}
    return len(cols) <= 1 and all(
        dc == 0 for (b, _n), (_dl, dc) in zip(pairs[first:], shifts[first:], strict=True)
        if b[0] != line)


def pair_places(base: set[Place], new: set[Place], anchors: Anchors
                ) -> list[tuple[Place | None, Place | None]] | None:
    """The functions of one shared name: (BASE place, NEW place), None on the side that did
    not sample it; None when nothing tells them apart (match by name)."""
    pairs: list[tuple[Place | None, Place | None]] = []
    taken: set[Place] = set()
    left_b: set[Place] = set()
    maybe: dict[Place, list[Place]] = {}
    for p in sorted(base, key=_order):
        sure, where = anchors.forward(p)
        if not sure:
            maybe[p] = where
        elif where[0] in taken:
            return None  # two places carried onto one: the anchors contradict each other
        else:
            pairs.append((p, where[0] if where[0] in new else None))
            taken.add(where[0])
    # Across an edit between two anchors: the one candidate NEW has (and no sure place of
    # another function's) is where it went.
    owned = {q for q in new - taken if anchors.back(q)[0]}
    claims: dict[Place, list[Place]] = {}
    for p, where in maybe.items():
        hits = [q for q in where if q in new and q not in taken and q not in owned]
        if len(hits) == 1:
            claims.setdefault(hits[0], []).append(p)
    for q, ps in claims.items():
        if len(ps) == 1:
            pairs.append((ps[0], q))
            taken.add(q)
            del maybe[ps[0]]
    left_b = set(maybe)
    left_n: set[Place] = set()
    for q in sorted(new - taken, key=_order):
        sure, where = anchors.back(q)
        if not sure:
            left_n.add(q)
        elif where[0] in base:
            return None  # carried one way and not back: the anchors contradict each other
        else:
            pairs.append((None, q))
    resolved = bool(pairs)
    if left_b <= left_n or left_n <= left_b:
        return pairs + _same(left_b, left_n)
    if len(left_b) == len(left_n):
        in_order = list(zip(sorted(left_b, key=_order), sorted(left_n, key=_order),
                            strict=True))
        common = left_b & left_n
        if common and all(b == n for b, n in in_order if b in common or n in common):
            return pairs + _same(left_b, left_n)
        if _one_edit(in_order) and (common or not resolved):
            return [*pairs, *in_order]
    # Nothing tells them apart: by name. (By place where both sides have one would be
    # right for two runs of one build, but splits functions an edit below the last anchor
    # moved onto another's place: 1,100 more of 25,000 random cases in review14's model.)
    return pairs + _same(left_b, left_n) if resolved else None


def _same(left_b: set[Place], left_n: set[Place]) -> list[tuple[Place | None, Place | None]]:
    """Each place one function: itself on each side that has it."""
    return [(p if p in left_b else None, p if p in left_n else None)
            for p in sorted(left_b | left_n, key=_order)]
