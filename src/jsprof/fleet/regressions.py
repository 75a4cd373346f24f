"""`jsprof fleet regressions`: which functions got slower from one release (or day) to the next.

`by="release"`: releases in version order when every one parses as a version (1.9.0 <
1.10.0), else in the order of their first upload. `by="day"`: the UTC days (of
`receivedAt`) that have uploads, oldest first. Each consecutive pair is a `fleet diff`
(shares of all time); a function regressed at the first release (day) where its self
share rose by more than `min_change` percentage points and the family-wise interval of
that rise (below) excludes zero. It is reported once, with before/after, ms per
page load and a few upload ids of that release (day) that hold the function: those where it
had the most self time.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..errors import UsageError

BY = ("release", "day")
DAY_MS = 86400e3
MAX_DAYS = 90  # pairs of days compared in one query: each is a diff with resampling


# ---- the family-wise interval ----------------------------------------------------------------
#
# `fleet diff`'s intervals resample traces (a percentile bootstrap): right for one function
# looked at once, but `regressions` looks at every function of every pair of releases (or
# days), and with a handful of uploads per side the percentile bootstrap is too narrow
# (measured on page loads resampled from real Chromium traces: 9 of 40 clean queries
# reported something; tests/test_fleet_regressions.py). So the rise of each function is
# judged by Welch's t on the ratio-estimator standard error of each side's share (page
# loads as the unit: the chunks of one page load summed), at a level Bonferroni-corrected
# over every (function, pair) compared in the query: the chance that a store without any
# change reports anything stays under 5 %.

FAMILY_ALPHA = 0.05


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


def share_moments(self_ms: np.ndarray, all_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of `self_ms` (traces x keys): the share of all time in percent (a ratio
    of sums) and the variance of that estimate by linearization (the ratio estimator's
    `var(s - R a) / (n mean(a)^2)`, sample variance over n - 1)."""
    n = len(all_ms)
    tot = float(all_ms.sum())
    if n == 0 or tot <= 0:
        k = self_ms.shape[1]
        return np.zeros(k), np.full(k, np.nan)
    r = self_ms.sum(axis=0) / tot
    resid = self_ms - r[None, :] * all_ms[:, None]
    mean_a = tot / n
    var = (resid.var(axis=0, ddof=1) / (n * mean_a * mean_a)) if n > 1 else np.full_like(r, np.nan)
    return 100.0 * r, 1e4 * var


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


def welch_interval(est: float, var_b: float, n_b: int, var_a: float, n_a: int,
                   alpha: float) -> list[float] | None:
    """The two-sided 1 - alpha interval of a difference with Welch's degrees of freedom;
    None without two uploads on each side."""
    if n_b < 2 or n_a < 2 or not (math.isfinite(var_b) and math.isfinite(var_a)):
        return None
    var = var_b + var_a
    if var <= 0:
        df = float(min(n_b, n_a) - 1)
    else:
        df = var * var / (var_b * var_b / (n_b - 1) + var_a * var_a / (n_a - 1))
    half = t_quantile(1.0 - alpha / 2.0, max(df, 1.0)) * math.sqrt(max(var, 0.0))
    return [round(est - half, 3), round(est + half, 3)]


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


def regressions(s: Any, f: Any, min_change: float = 2.0, min_traces: int = 5,
                min_samples: int = 1000, examples: int = 3, by: str = "release",
                alpha: float = FAMILY_ALPHA) -> dict:
    """The `fleet regressions --json` document: `regressions` found (each once, at the
    first release or day it happened), `skipped` pairs without enough evidence, the
    releases (`releases`) or days (`days`) in the order compared, and `tests`: how many
    (function, pair) rises were judged, the Bonferroni family of the intervals."""
    from . import api, query

    if by not in BY:
        raise UsageError(f"--by {str(by)[:20]!r}: use release or day")
    if not 0 <= min_change < math.inf:
        raise UsageError(f"--min-change {min_change}: expected percentage points, 0 or more")
    # The rule of every query: a filter (--route, --env, --since, --where) that matches no
    # upload is a mistake, not "no regressions".
    api.require_match(s, f, len(s.engine.uploads(s.snap, f)))
    units = _release_units(s, f) if by == "release" else _day_units(s, f)
    base_key = "baseRelease" if by == "release" else "baseDay"
    skipped: list[dict] = []
    compared = []
    for (before, base_f), (after, new_f) in zip(units, units[1:], strict=False):
        try:
            # reps=0: no bootstrap; the intervals are the family-wise ones below
            parts = api.diff_parts(s, base_f, new_f, None, (), min_traces, min_samples, None, 0)
        except UsageError as e:
            skipped.append({by: after, base_key: before, "reason": str(e)})
            continue
        sb, _, ab = query.trace_shares(s.engine, s.snap, parts.base, parts.keys, parts.match)
        sa, _, aa = query.trace_shares(s.engine, s.snap, parts.new, parts.keys, parts.match)
        compared.append((before, after, parts, sb, ab, sa, aa))
    tests = sum(len(c[2].keys) for c in compared)
    level = alpha / max(tests, 1)
    found: list[dict] = []
    seen: set[tuple[str, str | None, int | None]] = set()
    for before, after, parts, sb, ab, sa, aa in compared:
        doc = parts.doc
        # The unit of the test is the page load (its chunks summed), as the ms per load are.
        lb, lab = per_page_load(parts.base.uploads, sb, ab)
        la, laa = per_page_load(parts.new.uploads, sa, aa)
        _, var_b = share_moments(lb, lab)
        _, var_a = share_moments(la, laa)
        loads_b = max(doc["base"]["pageLoads"], 1)
        loads_a = max(doc["new"]["pageLoads"], 1)
        for i, r in enumerate(doc["rows"]):
            key = (r["name"], r["resource"], r["line"] if not r["name"] else None)
            if key in seen or r["selfPp"] is None or r["selfPp"] <= min_change:
                continue
            ci = welch_interval(r["selfPp"], float(var_b[i]), len(lab), float(var_a[i]),
                                len(laa), level)
            if ci is None or not ci[0] > 0:
                continue
            seen.add(key)
            found.append({
                "name": r["name"], "label": r["label"], "resource": r["resource"],
                "line": r.get("line"), by: after, base_key: before,
                "beforeSelfPct": r["baseSelfPct"], "afterSelfPct": r["newSelfPct"],
                "selfPp": r["selfPp"], "selfPpCi": ci,
                "beforeMsPerLoad": round(r["baseSelfPct"] / 100 * doc["base"]["totalMs"]
                                         / loads_b, 3),
                "afterMsPerLoad": round(r["newSelfPct"] / 100 * doc["new"]["totalMs"]
                                        / loads_a, 3),
                "beforePageLoads": len(lab), "afterPageLoads": len(laa),
                "exampleIds": example_ids(parts, sa[:, i], examples),
            })
    return {"by": by, f"{by}s": [u for u, _ in units], "minChangePp": min_change,
            "familyAlpha": alpha, "tests": tests, "regressions": found, "skipped": skipped}
