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
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..errors import UsageError

BY = ("release", "day")
DAY_MS = 86400e3
MAX_DAYS = 90  # pairs of days compared in one query: each is a diff with resampling


FDR = 0.05  # the false discovery rate of a query's findings (and false coverage rate)
MIN_CHANGE_PCT = 10.0
MIN_SHARE_PCT = 0.5
# Samples with no JavaScript that are the page waiting, not code that can regress.
NOT_CODE = ("(idle)", "(program)")


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (df > 0, not whole too)."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The `p` quantile (0.5 <= p < 1) of Student's t, by bisection on `t_cdf`."""
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


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
    order = version_order(first_seen) or first_seen
    return [(r, replace(f, release=r)) for r in order]


def _day_units(s: Any, f: Any) -> list[tuple[str, Any]]:
    at = s.engine.uploads(s.snap, f).received_at
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




# ---- the test of one function in one pair ----------------------------------------------------


# How a change's t is judged. Per-page-load times are skewed (a function runs in some page
# loads and not in others) and a pair has a dozen page loads a side: Student's t then
# rests on a normal approximation exactly in the far tail where a query's corrected level
# sits. So with up to PERM_MAX_LOADS page loads in a pair the t's null distribution is
# that of the same t with the page loads dealt out between the two sides at random
# (PERMUTATIONS times, a fixed seed: the same answer every time, on every engine): exact
# when nothing changed, whatever the shape. (On page loads resampled in blocks from real
# Chromium traces both report something in 3-4 of 40 clean queries: alike there, but only
# the permutation one is exact by construction.) Beyond that, Student's t (the central
# limit then holds).
PERMUTATIONS = 9999
PERM_MAX_LOADS = 400
PERM_SEED = 20261126


@dataclass
class Change:
    """One function's self ms per page load on the two sides of a pair, and the test of
    the difference: Welch's t (each side's variance of its mean), judged against its
    permutation distribution (`null`, |t| largest first) or, without one, Student's t
    with Welch-Satterthwaite's degrees of freedom."""

    before: float  # mean self ms per page load, BASE
    after: float  # ... NEW
    var_b: float  # variance of `before` (sample variance / page loads)
    var_a: float
    df: float
    t_obs: float  # |t|
    null: np.ndarray | None  # |t| of the permutations, largest first (None: Student's)

    @property
    def diff(self) -> float:
        return self.after - self.before

    @property
    def p(self) -> float:
        """The two-sided p-value of after - before = 0."""
        if self.null is None:
            return min(max(2.0 * (1.0 - t_cdf(self.t_obs, self.df)), 0.0), 1.0)
        # (1 + permutations at least as extreme) / (1 + permutations): never 0
        beyond = int(np.searchsorted(-self.null, -self.t_obs, side="right"))
        return (1 + beyond) / (1 + len(self.null))

    def t(self, level: float) -> float:
        """The two-sided 1 - `level` critical value of this change's |t|: the interval
        built on it excludes 0 exactly when p <= level."""
        if self.null is None:
            return t_quantile(1.0 - level / 2.0, self.df)
        k = math.floor(level * (len(self.null) + 1) + 1e-9) - 1
        return math.inf if k < 0 else float(self.null[min(k, len(self.null) - 1)])

    def ms_interval(self, level: float) -> tuple[float, float]:
        half = self.t(level) * math.sqrt(self.var_b + self.var_a)
        return self.diff - half, self.diff + half

    def ratio_interval(self, level: float) -> tuple[float | None, float | None]:
        """Fieller's 1 - `level` interval of after / before: the ratios r with
        (after - r before)^2 <= t^2 (var_a + r^2 var_b), the same t as the difference's,
        so it excludes 1 exactly when `ms_interval` excludes 0. None for an end that is
        unbounded (BASE's mean not told from 0 at that level)."""
        t = self.t(level)
        if not math.isfinite(t):
            return None, None
        t2 = t * t
        a, b = self.before, self.after
        q = a * a - t2 * self.var_b
        rad = b * b * self.var_b + a * a * self.var_a - t2 * self.var_a * self.var_b
        root = math.sqrt(max(rad, 0.0)) * t
        if q > 0:
            return (a * b - root) / q, (a * b + root) / q
        if q < 0 and rad > 0:
            # The excluded ratios lie between the roots; a rise's set is [larger root, inf)
            return max((a * b - root) / q, 0.0), None
        return None, None


def _welch(sb: np.ndarray, qb: np.ndarray, nb: int, s: np.ndarray, q: np.ndarray, n: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Welch's |t| from per-side sums and sums of squares (BASE's, and both sides'):
    mean of each side, variance of each mean, |t|."""
    na = n - nb
    sa, qa = s - sb, q - qb
    mb, ma = sb / nb, sa / na
    vb = np.maximum(qb - sb * mb, 0.0) / (nb - 1) / nb
    va = np.maximum(qa - sa * ma, 0.0) / (na - 1) / na
    se = np.sqrt(vb + va)
    d = np.abs(ma - mb)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, d / np.where(se > 0, se, 1.0), np.where(d > 0, np.inf, 0.0))
    return mb, ma, vb, va, t


def changes(before: np.ndarray, after: np.ndarray, seed: int = PERM_SEED
            ) -> list[Change] | None:
    """The test of each column's self ms per page load (page loads x functions, a side);
    None without two page loads on each side."""
    nb, na = len(before), len(after)
    if nb < 2 or na < 2:
        return None
    x = np.concatenate([before, after]).astype(np.float64)
    n, k = x.shape
    x2 = x * x
    s, q = x.sum(axis=0), x2.sum(axis=0)
    mb, ma, vb, va, t = _welch(before.sum(axis=0), (before * before).sum(axis=0), nb, s, q, n)
    null = None
    if n <= PERM_MAX_LOADS and k:
        rng = np.random.default_rng(seed)
        null = np.empty((PERMUTATIONS, k))
        block = max(1, (1 << 22) // max(n * k, n))
        for lo in range(0, PERMUTATIONS, block):
            m = min(block, PERMUTATIONS - lo)
            pick = np.argsort(rng.random((m, n)), axis=1)[:, :nb]
            onb = np.zeros((m, n))
            np.put_along_axis(onb, pick, 1.0, axis=1)
            null[lo:lo + m] = _welch(onb @ x, onb @ x2, nb, s, q, n)[4]
        null = -np.sort(-null, axis=0)
    out = []
    for j in range(k):
        var = vb[j] + va[j]
        df = (var * var / ((vb[j] ** 2 / (nb - 1)) + (va[j] ** 2 / (na - 1)))
              if var > 0 else float(n - 2))
        out.append(Change(float(mb[j]), float(ma[j]), float(vb[j]), float(va[j]),
                          max(float(df), 1.0), float(t[j]),
                          None if null is None else null[:, j]))
    return out


def bh_picked(p: list[float], alpha: float) -> tuple[list[bool], list[float]]:
    """Benjamini-Hochberg at false discovery rate `alpha` over the p-values `p`: which
    are picked, and each one's adjusted p-value (q-value)."""
    m = len(p)
    if not m:
        return [], []
    order = sorted(range(m), key=lambda i: p[i])
    k = 0
    for rank, i in enumerate(order, 1):
        if p[i] <= rank * alpha / m:
            k = rank
    picked = [False] * m
    for i in order[:k]:
        picked[i] = True
    q = [1.0] * m
    run = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        run = min(run, p[i] * m / rank)
        q[i] = min(run, 1.0)
    return picked, q


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


def regressions(s: Any, f: Any, min_change: float = MIN_CHANGE_PCT, min_traces: int = 5,
                min_samples: int = 1000, examples: int = 3, by: str = "release",
                alpha: float = FDR, min_share: float = MIN_SHARE_PCT) -> dict:
    """The `fleet regressions --json` document: `regressions` found (each once, at the
    first release or day it happened; largest sure rise in ms first), `skipped` pairs
    without enough evidence, the releases (`releases`) or days (`days`) in the order
    compared, `tests` (how many (function, pair) changes were judged) and `ciLevel` (the
    level of the reported intervals)."""
    from . import api, query

    if by not in BY:
        raise UsageError(f"--by {str(by)[:20]!r}: use release or day")
    if not 0 <= min_change < math.inf:
        raise UsageError(f"--min-change {min_change}: expected a percentage, 0 or more")
    if not 0 <= min_share <= 100:
        raise UsageError(f"--min-share {min_share}: expected a percentage from 0 to 100")
    # The rule of every query: a filter (--route, --env, --since, --where) that matches no
    # upload is a mistake, not "no regressions".
    api.require_match(s, f, len(s.engine.uploads(s.snap, f)))
    units = _release_units(s, f) if by == "release" else _day_units(s, f)
    base_key = "baseRelease" if by == "release" else "baseDay"
    skipped: list[dict] = []
    tests: list[tuple[int, int, Change]] = []  # (pair, row, its test)
    pairs = []
    for (before, base_f), (after, new_f) in zip(units, units[1:], strict=False):
        try:
            # reps=0: no bootstrap; every row of the diff, its keys and matcher
            parts = api.diff_parts(s, base_f, new_f, None, (), min_traces, min_samples, None, 0)
        except UsageError as e:
            skipped.append({by: after, base_key: before, "reason": str(e)})
            continue
        sb, _, ab = query.trace_shares(s.engine, s.snap, parts.base, parts.keys, parts.match)
        sa, _, aa = query.trace_shares(s.engine, s.snap, parts.new, parts.keys, parts.match)
        # The unit is the page load (its chunks summed): one value per load a side.
        lb, lab = per_page_load(parts.base.uploads, sb, ab)
        la, laa = per_page_load(parts.new.uploads, sa, aa)
        all_b, all_a = float(lab.sum()), float(laa.sum())
        k = len(pairs)
        pairs.append((before, after, parts, sa, lb, la, lab, laa))
        cols = []
        for i, r in enumerate(parts.doc["rows"]):
            if r["resource"] is None and r["name"] in NOT_CODE:
                continue
            # Minimum support: a function with a sliver of either side's time would spend
            # the query's error budget on changes no one could act on.
            share = max(lb[:, i].sum() / all_b if all_b > 0 else 0.0,
                        la[:, i].sum() / all_a if all_a > 0 else 0.0)
            if 100.0 * share >= min_share:
                cols.append(i)
        got = changes(lb[:, cols], la[:, cols], PERM_SEED + k) if cols else None
        for i, c in zip(cols, got or (), strict=False):
            tests.append((k, i, c))
    picked, qvals = bh_picked([c.p for _, _, c in tests], alpha)
    m = len(tests)
    level = alpha * sum(picked) / m if m else alpha  # Benjamini-Yekutieli's FCR level
    found: list[dict] = []
    seen: set[tuple[str, str | None, int | None]] = set()
    for (k, i, c), pick, qv in sorted(zip(tests, picked, qvals, strict=True),
                                      key=lambda x: (x[0][0], x[0][1])):
        before, after, parts, sa, lb, la, lab, laa = pairs[k]
        r = parts.doc["rows"][i]
        key = (r["name"], r["resource"], r["line"] if not r["name"] else None)
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
            "line": r.get("line"), by: after, base_key: before,
            "beforeMsPerLoad": round(c.before, 3), "afterMsPerLoad": round(c.after, 3),
            "changeMsPerLoad": round(c.diff, 3), "changeMsCi": [round(lo, 3), round(hi, 3)],
            "changePct": round(rel, 1) if math.isfinite(rel) else None,
            "changePctCi": [None if rlo is None else round(100.0 * (rlo - 1.0), 1),
                            None if rhi is None else round(100.0 * (rhi - 1.0), 1)],
            "pValue": float(f"{c.p:.3g}"), "qValue": float(f"{qv:.3g}"),
            "beforeSelfPct": r["baseSelfPct"], "afterSelfPct": r["newSelfPct"],
            "selfPp": r["selfPp"],
            "beforePageLoads": len(lab), "afterPageLoads": len(laa),
            **_per_interaction(parts, c, len(lab), len(laa)),
            "exampleIds": example_ids(parts, sa[:, i], examples),
        })
    # Largest sure rise first: the interval's lower end, not the estimate.
    found.sort(key=lambda x: -x["changeMsCi"][0])
    return {"by": by, f"{by}s": [u for u, _ in units], "metric": "self ms per page load",
            "minChangePct": min_change, "minSharePct": min_share, "fdr": alpha, "tests": m,
            "ciLevel": round(1.0 - level, 6), "regressions": found, "skipped": skipped}
