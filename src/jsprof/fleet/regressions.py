"""`jsprof fleet regressions`: which functions got slower from one release (or day) to the next.

`by="release"`: releases in version order when every one parses as a version (1.9.0 <
1.10.0), else in the order of their first upload. `by="day"`: the UTC days (of
`receivedAt`) that have uploads, oldest first. Each consecutive pair is compared on each
function's **self time per page load** (ms; the page load is the unit: its chunks summed),
not on its share of all time: a function that gets 1.5x slower rises 50 % in ms per page
load whatever the rest of the page does, while its share moves by a point or two.

Per pair and function: the mean self ms per page load on each side, the difference
(Welch's t, page loads as the independent samples) and the relative change new/old with
Fieller's interval (the same t: it excludes 1 exactly when the difference's interval
excludes 0). Every (function, pair) that has at least `min_share` % of either side's time
is one test; over all tests of the query, Benjamini-Hochberg at `alpha` (the false
discovery rate) picks the changes, and the picked ones' intervals are at the level that
keeps the false coverage rate at `alpha` too (Benjamini-Yekutieli: 1 - R alpha / M, R
picked of M). A function regressed at the first release (day) where it was picked, rose,
and rose by more than `min_change` percent; it is reported once, with ms per page load
before -> after, the change in ms and %, both intervals, and a few upload ids of that
release (day) that hold it: those where it had the most self time. The list is ranked by
the lower bound of the ms interval (the least the change can be), not by the estimate.

Over whole UTC days (no `--where`, `--during`) the releases or days come from the rollups,
and a pair of more than PERM_MAX_LOADS page loads is tested from their per-load sums
(`rollups.perload_side`: Welch's t and Fieller's interval need the page loads, the sum
and the sum of squares of each function's self ms per page load), its examples from
rollup_examples: no per-upload row. A pair of at most PERM_MAX_LOADS page loads is
judged by permutations of its page loads' values, which it reads per upload.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..analysis import stats
from ..analysis.stats import PERM_SEED, Change, bh_picked, changes
from ..analysis.stats import t_cdf as t_cdf
from ..analysis.stats import t_quantile as t_quantile
from ..errors import UsageError
from ..store.tables.view import EXAMPLES_KEPT

BY = ("release", "day")
DAY_MS = 86400e3
MAX_DAYS = 90  # pairs of days compared in one query: each is a diff with resampling


FDR = 0.05  # the false discovery rate of a query's findings (and false coverage rate)
MIN_CHANGE_PCT = 10.0
MIN_SHARE_PCT = 0.5
# Samples with no JavaScript that are the page waiting, not code that can regress.
NOT_CODE = ("(idle)", "(program)")


def per_page_load(up: Any, self_ms: np.ndarray, all_ms: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """`trace_shares`' rows (one per upload of `up`) summed per page load: the chunks of one
    page load (one `pageLoad` id) are one sample of its self time, not several independent
    ones (five chunks would narrow the interval as five page loads do)."""
    ix = up.page_load_index()
    n = int(ix.max()) + 1 if len(ix) else 0
    s = np.zeros((n, self_ms.shape[1]))
    np.add.at(s, ix, self_ms)
    return s, np.bincount(ix, weights=all_ms, minlength=n)


def version_order(releases: list[str]) -> list[str] | None:
    """`releases` in version order when every one parses as a version, else None."""
    pat = re.compile(r"v?\d+(\.\d+)*")
    if not releases or not all(pat.fullmatch(r) for r in releases):
        return None
    return sorted(releases, key=lambda r: tuple(int(x) for x in r.lstrip("v").split(".")))


def _release_units(s: Any, f: Any) -> list[tuple[str, Any]]:
    from . import api

    if f.release is not None:
        raise UsageError("fleet regressions compares every release in order; drop --release")
    first_seen = list(reversed(api.options(s, f.app)["releases"]))  # newest first -> oldest
    return _in_order(first_seen, f)


def _in_order(first_seen: list[str], f: Any) -> list[tuple[str, Any]]:
    order = version_order(first_seen) or first_seen
    return [(r, replace(f, release=r)) for r in order]


def _rolled_units(s: Any, f: Any, by: str) -> list[tuple[str, Any]] | None:
    """`_release_units` or `_day_units` from the rollups (rollup_cells' parts), with the
    check that `f` matches an upload; None when the rollups cannot say (`rollups.plan`)."""
    from . import api, rollups

    if by == "release" and f.release is not None:
        raise UsageError("fleet regressions compares every release in order; drop --release")
    days = rollups.uploads_by_day(s.engine, s.snap, f)
    if days is None:
        return None
    if by == "day":
        # the days of `f`'s uploads, as `_day_units` finds them in the uploads table
        at = np.asarray([datetime.strptime(d, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
                         * 1e3 for d in days], np.float64)
        units = _days(f, at)
    else:
        # every release of the app, whatever the other filters (`api.options`), in the
        # order of their first upload
        p = rollups.plan(s.snap, replace(f, release=None, route=None, env=None, since=None,
                                         until=None), ("rollup_cells",))
        if p is None:
            return None
        first = {rkey: min(e["minAt"] for e in keep)
                 for rkey, keep in zip(p.rkeys, (p.entries or {})["rollup_cells"],
                                       strict=True) if keep}
        at = {s.snap.manifest["releases"][k]["release"]: t for k, t in first.items()}
        # `api.options`' order (newest first, ties by name), oldest first
        units = _in_order(list(reversed(sorted(at, key=lambda r: (-at[r], r)))), f)
    if not days:
        api.require_match(s, f, 0)
    return units


def _day_units(s: Any, f: Any) -> list[tuple[str, Any]]:
    return _days(f, s.engine.uploads(s.snap, f).received_at)


def _days(f: Any, at: np.ndarray) -> list[tuple[str, Any]]:
    """Per UTC day of the receivedAt times `at` (ms): its label and `f` within it."""
    at = at[np.isfinite(at)]
    days = sorted({int(d) for d in np.floor(at / DAY_MS).tolist()})
    if len(days) > MAX_DAYS:
        first = datetime.fromtimestamp(days[0] * 86400, UTC).strftime("%Y-%m-%d")
        raise UsageError(
            f"fleet regressions --by day: the uploads span {len(days)} days from {first}; "
            f"at most {MAX_DAYS} at once: narrow them with --since/--until"
        )
    out = []
    for d in days:
        lo, hi = d * DAY_MS, (d + 1) * DAY_MS
        since = lo if f.since is None else max(lo, f.since)
        until = hi if f.until is None else min(hi, f.until)
        label = datetime.fromtimestamp(d * 86400, UTC).strftime("%Y-%m-%d")
        out.append((label, replace(f, since=since, until=until)))
    return out


def example_ids(parts: Any, self_ms: np.ndarray, n: int) -> list[str]:
    """Up to `n` ids of NEW's uploads in which the function has self time (`self_ms`, per
    upload of NEW), the most first (then the newest): uploads that show the regression."""
    if n <= 0:
        return []
    up = parts.new.uploads
    hold = np.nonzero(self_ms > 0)[0]
    order = hold[np.lexsort((-up.uk[hold], -self_ms[hold]))][:n]
    return [up.id[i] for i in order.tolist()]




def _per_interaction(parts: Any, c: Change, loads_b: int, loads_a: int) -> dict:
    """With `--during interaction`: the function's self ms per interaction each side (the
    self ms inside interactions over the interactions kept), and how many there were, so
    a rise from users interacting more is told from code getting slower."""
    if parts.base.filters.during != "interaction":
        return {}
    nb, na = parts.base.windows or 0, parts.new.windows or 0

    def per(ms: float, n: int) -> float | None:
        return round(ms / n, 3) if n else None

    return {"beforeInteractions": nb, "afterInteractions": na,
            "beforeMsPerInteraction": per(c.before * loads_b, nb),
            "afterMsPerInteraction": per(c.after * loads_a, na)}


@dataclass
class _Pair:
    """One compared pair: its diff (rows, keys, selections), the columns tested and their
    tests, the page loads a side, and `examples(rows, n)`: per row, NEW's uploads that
    show it."""

    before: str
    after: str
    parts: Any
    cols: list[int]
    changes: list[Change] | None
    loads_b: int
    loads_a: int
    examples: Callable[[list[int], int], dict[int, list[str]]]


def _supported(parts: Any, self_b: np.ndarray, all_b: float, self_a: np.ndarray,
               all_a: float, min_share: float) -> list[int]:
    """The diff rows tested: code (not idle), with at least `min_share` % of either side's
    time (`self_*`: per row, its self ms summed over the side's page loads)."""
    cols = []
    for i, r in enumerate(parts.doc["rows"]):
        if r["resource"] is None and r["name"] in NOT_CODE:
            continue
        # Minimum support: a function with a sliver of either side's time would spend
        # the query's error budget on changes no one could act on.
        share = max(self_b[i] / all_b if all_b > 0 else 0.0,
                    self_a[i] / all_a if all_a > 0 else 0.0)
        if 100.0 * share >= min_share:
            cols.append(i)
    return cols


def _pair(s: Any, before: str, after: str, base_f: Any, new_f: Any, k: int, min_traces: int,
          min_samples: int, min_share: float, units: Any, at: int, hashes: dict,
          by: str) -> _Pair:
    """The tests of one pair (`units`' `at` and `at` + 1, read from the rollups:
    `rollups.Units`; None: per upload; `k`: the pair's number, its permutations' seed):
    from the rollups' per-load sums (`rollups.perload_side`) when both sides can be read
    so and the pair has more than PERM_MAX_LOADS page loads (Student's t), else from the
    page loads' own values (the per-upload rows of these few page loads: a permutation
    null needs each one's value)."""
    from . import api, query, rollups

    plans = None
    if units is not None:
        plans = [units.perload[at], units.perload[at + 1]]
        if any(p is None for p in plans) or sum(
                rollups.page_loads_of(s.engine, p, g, rows)
                for (p, rows), g in zip(plans, (base_f, new_f), strict=True)
        ) <= stats.PERM_MAX_LOADS:
            plans = None
    # A pair too thin to test is named in this command's words ("release 1.0.1"), not
    # diff's ("fleet diff: --base (...)": options `regressions` does not have).
    names = (f"{by} {before}", f"{by} {after}")
    # reps=0: no bootstrap; every row of the diff, its keys and matcher
    parts = api.diff_parts(s, base_f, new_f, None, (), min_traces, min_samples, None, 0,
                           named_as=names, rolled=plans is not None,
                           units=None if plans is None else (units.select(at),
                                                             units.select(at + 1)))
    if plans is not None:
        sides = [rollups.perload_side(s.engine, sel, p, parts.keys, parts.match, rows, hashes)
                 for sel, (p, rows) in zip((parts.base, parts.new), plans, strict=True)]
        b, a = sides
        if b is not None and a is not None:
            cols = _supported(parts, b.s, b.all_ms, a.s, a.all_ms, min_share)
            got = (stats.changes_from_sums(b.loads, b.s[cols], b.q[cols], a.loads, a.s[cols],
                                           a.q[cols]) if cols else None)
            return _Pair(before, after, parts, cols, got, b.loads, a.loads,
                         lambda rows, n: rollups.perload_examples(s.engine, a, new_f, rows, n))
        parts = api.diff_parts(s, base_f, new_f, None, (), min_traces, min_samples, None, 0,
                               named_as=names)
    sb, _, ab = query.trace_shares(s.engine, s.snap, parts.base, parts.keys, parts.match)
    sa, _, aa = query.trace_shares(s.engine, s.snap, parts.new, parts.keys, parts.match)
    # The unit is the page load (its chunks summed): one value per load a side.
    lb, lab = per_page_load(parts.base.uploads, sb, ab)
    la, laa = per_page_load(parts.new.uploads, sa, aa)
    cols = _supported(parts, lb.sum(axis=0), float(lab.sum()), la.sum(axis=0),
                      float(laa.sum()), min_share)
    got = changes(lb[:, cols], la[:, cols], PERM_SEED + k) if cols else None
    return _Pair(before, after, parts, cols, got, len(lab), len(laa),
                 lambda rows, n: {i: example_ids(parts, sa[:, i], n) for i in rows})


def _unseen(pair: _Pair, by: str, base_key: str, level: float, min_change: float) -> dict:
    """What the pair could not see: per function tested, the smallest rise (%) the query
    finds at least half the time (`stats.min_rise`, at `level`: alpha over the tests, the
    p-value BH needs to pick a change that is the query's only one; never under
    `min_change`, which no report goes below). A "no regressions" over 25 page loads is
    then read as what it is: a function whose ms per page load spread as much as its mean
    could have doubled unseen (issue 34). Functions BASE did not run have no relative rise
    and are left out; `minRisePct` null: no rise of any size would."""
    rows = pair.parts.doc["rows"]
    fns = []
    for i, c in zip(pair.cols, pair.changes or (), strict=False):
        r = stats.min_rise(c.before, c.var_b * pair.loads_b, pair.loads_b, pair.loads_a,
                           c.t(level))
        if r is None:
            continue
        row = rows[i]
        fns.append({"name": row["name"], "label": row["label"], "resource": row["resource"],
                    "line": row.get("line"), "column": row.get("column"),
                    "beforeMsPerLoad": round(c.before, 3),
                    "minRisePct": (round(max(100.0 * r, min_change), 1) if math.isfinite(r)
                                   else None)})
    fns.sort(key=lambda x: -x["beforeMsPerLoad"])
    return {by: pair.after, base_key: pair.before, "beforePageLoads": pair.loads_b,
            "afterPageLoads": pair.loads_a, "functions": fns}


def regressions(s: Any, f: Any, min_change: float = MIN_CHANGE_PCT, min_traces: int = 5,
                min_samples: int = 1000, examples: int = 3, by: str = "release",
                alpha: float = FDR, min_share: float = MIN_SHARE_PCT) -> dict:
    """The `fleet regressions --json` document: `regressions` found (each once, at the
    first release or day it happened; largest sure rise in ms first), `skipped` pairs
    without enough evidence, the releases (`releases`) or days (`days`) in the order
    compared, `tests` (how many (function, pair) changes were judged) and `ciLevel` (the
    level of the reported intervals)."""
    from . import api, query, rollups

    if by not in BY:
        raise UsageError(f"--by {str(by)[:20]!r}: use release or day")
    if not 0 <= min_change < math.inf:
        raise UsageError(f"--min-change {min_change}: expected a percentage, 0 or more")
    if not 0 <= min_share <= 100:
        raise UsageError(f"--min-share {min_share}: expected a percentage from 0 to 100")
    rolled = _rolled_units(s, f, by) if examples <= EXAMPLES_KEPT else None
    if rolled is not None:
        units = rolled
    else:
        # The rule of every query: a filter (--route, --env, --since, --where) that matches
        # no upload is a mistake, not "no regressions".
        api.require_match(s, f, len(s.engine.uploads(s.snap, f)))
        units = _release_units(s, f) if by == "release" else _day_units(s, f)
    base_key = "baseRelease" if by == "release" else "baseDay"
    skipped: list[dict] = []
    tests: list[tuple[int, int, Change]] = []  # (pair, row, its test)
    pairs: list[_Pair] = []
    # every unit's rollup rows read at once (one scan per table, not two per pair)
    read = None if rolled is None else rollups.Units(s.engine, s.snap, f,
                                                      [g for _, g in units])
    hashes: dict = {}
    for u, ((before, base_f), (after, new_f)) in enumerate(zip(units, units[1:],
                                                               strict=False)):
        try:
            pair = _pair(s, before, after, base_f, new_f, len(pairs), min_traces,
                         min_samples, min_share, read, u, hashes, by)
        except UsageError as e:
            skipped.append({by: after, base_key: before, "reason": str(e)})
            continue
        for i, c in zip(pair.cols, pair.changes or (), strict=False):
            tests.append((len(pairs), i, c))
        pairs.append(pair)
    picked, qvals = bh_picked([c.p for _, _, c in tests], alpha)
    m = len(tests)
    level = alpha * sum(picked) / m if m else alpha  # Benjamini-Yekutieli's FCR level
    found: list[dict] = []
    seen: set[tuple[str, str | None, int | None, int | None]] = set()
    for (k, i, c), pick, qv in sorted(zip(tests, picked, qvals, strict=True),
                                      key=lambda x: (x[0][0], x[0][1])):
        pair = pairs[k]
        before, after, parts = pair.before, pair.after, pair.parts
        r = parts.doc["rows"][i]
        key = (r["name"], r["resource"], r.get("line"), r.get("column"))  # the diff's key
        if not pick or c.diff <= 0 or key in seen:
            continue
        rel = 100.0 * (c.after / c.before - 1.0) if c.before > 0 else math.inf
        if not rel > min_change:
            continue
        seen.add(key)
        lo, hi = c.ms_interval(level)
        rlo, rhi = c.ratio_interval(level)
        found.append({
            "name": r["name"], "label": r["label"], "resource": r["resource"],
            "line": r.get("line"), "column": r.get("column"), by: after, base_key: before,
            "beforeMsPerLoad": round(c.before, 3), "afterMsPerLoad": round(c.after, 3),
            "changeMsPerLoad": round(c.diff, 3), "changeMsCi": [round(lo, 3), round(hi, 3)],
            "changePct": round(rel, 1) if math.isfinite(rel) else None,
            "changePctCi": [None if rlo is None else round(100.0 * (rlo - 1.0), 1),
                            None if rhi is None else round(100.0 * (rhi - 1.0), 1)],
            "pValue": float(f"{c.p:.3g}"), "qValue": float(f"{qv:.3g}"),
            "beforeSelfPct": r["baseSelfPct"], "afterSelfPct": r["newSelfPct"],
            "selfPp": r["selfPp"],
            "beforePageLoads": pair.loads_b, "afterPageLoads": pair.loads_a,
            **_per_interaction(parts, c, pair.loads_b, pair.loads_a),
            "exampleIds": (k, i),
        })
    # each pair's examples read at once (from the rollups: one scan for all its rows)
    want: dict[int, list[int]] = {}
    for x in found:
        want.setdefault(x["exampleIds"][0], []).append(x["exampleIds"][1])
    ids = {k: pairs[k].examples(rows, examples) for k, rows in want.items()}
    for x in found:
        k, i = x["exampleIds"]
        x["exampleIds"] = ids[k][i]
    # Largest sure rise first: the interval's lower end, not the estimate.
    found.sort(key=lambda x: -x["changeMsCi"][0])
    unseen = [_unseen(p, by, base_key, alpha / m, min_change) for p in pairs] if m else []
    # A function reported at a pair rose by more than that pair could miss: `found` says
    # so, and the text and dashboard leave it out of "more often missed than found".
    flagged = {(x[by], x["name"], x["resource"], x["line"], x["column"]) for x in found}
    for u in unseen:
        for fn in u["functions"]:
            fn["found"] = (u[by], fn["name"], fn["resource"], fn["line"],
                           fn["column"]) in flagged
    # the compared releases' source maps that do not match their scripts (not applied)
    warnings = list(dict.fromkeys(
        query.map_warnings(*(p.parts.base for p in pairs), *(p.parts.new for p in pairs))
        # scripts a map names on one side of a pair only: compared as recorded
        + [line for p in pairs for line in p.parts.map_notes]))
    return {"by": by, f"{by}s": [u for u, _ in units], "metric": "self ms per page load",
            "minChangePct": min_change, "minSharePct": min_share, "fdr": alpha, "tests": m,
            "ciLevel": round(1.0 - level, 6), "regressions": found,
            "unseenPower": stats.POWER, "unseen": unseen, "skipped": skipped,
            "warnings": warnings}
