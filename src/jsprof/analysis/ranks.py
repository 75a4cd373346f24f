"""The shift between two samples by ranks: the Hodges-Lehmann estimate and its Mann-Whitney
(Moses) confidence interval, distribution-free. `jsprof budget` uses it on the runs'
logarithms, where one run stretched 10x by load moves the interval no more than any other
run above the rest does (a t interval's width grows with that run's square).

The assumption is the shift model: NEW's values are BASE's moved by one constant (on
logarithms: every run of NEW takes a constant factor of a BASE run's time, the load's
stretch falling on both alike), and the runs are exchangeable within a side. Then the
interval covers the shift with at least the stated probability whatever the shape of the
runs' distribution, heavy tails included. Pure functions on numpy arrays; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

# Up to this many values a side the null distribution of U is counted exactly (a DP over
# m * n * (m n + 1) cells: 6 M at 50 a side, 0.1 s, cached); beyond, the normal
# approximation with continuity correction, a little wider than exact at that size (k 802
# against the exact 806 of 2,500 differences at 50 a side and level 0.002).
EXACT_MAX = 50


@lru_cache(maxsize=64)
def u_null_counts(m: int, n: int) -> np.ndarray:
    """How many of the C(m + n, m) orderings of m BASE and n NEW values (no ties) give
    U = #{(i, j): NEW_j > BASE_i} = 0, 1, ..., m n: the exact null distribution of the
    Mann-Whitney statistic, times C(m + n, m). Counted in float64 (exact below 2^53: to
    about 27 a side; beyond, relative error 1e-16, what a tail probability needs).

    f(a, b, u) = f(a, b - 1, u - a) + f(a - 1, b, u): the largest of the pooled values is
    a NEW one (above all a BASE values) or a BASE one (above none of the NEW values)."""
    if m < 0 or n < 0:
        raise ValueError("sample sizes must be >= 0")
    size = m * n + 1
    prev: list[np.ndarray] = []
    for a in range(m + 1):
        cur: list[np.ndarray] = []
        for b in range(n + 1):
            row = np.zeros(size)
            if a == 0 or b == 0:
                row[0] = 1.0
            else:
                row[a:] += cur[b - 1][:size - a]
                row += prev[b]
            cur.append(row)
        prev = cur
    out = prev[n]
    out.flags.writeable = False
    return out


def _k_exact(m: int, n: int, alpha: float) -> int:
    """The largest k with P(U <= k - 1) <= alpha / 2 (0: none, the interval unbounded)."""
    counts = u_null_counts(m, n)
    cdf = np.cumsum(counts) / math.comb(m + n, m)
    return int(np.count_nonzero(cdf <= alpha / 2.0 * (1.0 + 1e-12)))


def _tie_term(v: np.ndarray) -> float:
    """sum(t^3 - t) over the groups of t equal values in `v`."""
    _, t = np.unique(v, return_counts=True)
    t = t.astype(np.float64)
    return float((t * t * t - t).sum())


def _k_normal(x: np.ndarray, y: np.ndarray, alpha: float) -> int:
    """k as `_k_exact` by the normal approximation with continuity correction, U's variance
    corrected for ties. Ties within a side are there at every shift (across the sides
    only at the pairwise differences themselves, the interval's ends), so they are the ones
    counted."""
    m, n = len(x), len(y)
    big_n = m + n
    ties = _tie_term(x) + _tie_term(y)
    var = m * n / 12.0 * ((big_n + 1) - ties / (big_n * (big_n - 1)))
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    return max(0, math.floor(m * n / 2.0 - 0.5 - z * math.sqrt(max(var, 0.0))) + 1)


@dataclass
class Shift:
    """NEW - BASE: the Hodges-Lehmann estimate (the median of the m n pairwise differences)
    and its 1 - `level` interval (None: an end the samples do not bound at that level)."""

    estimate: float
    lo: float | None
    hi: float | None
    exact: bool  # the interval from U's exact null distribution (else normal)


def shift_interval(base: np.ndarray, new: np.ndarray, level: float) -> Shift | None:
    """The shift of `new` against `base` and its Moses interval at 1 - `level`: the
    differences new_j - base_i sorted, from the k-th to the (m n + 1 - k)-th, k from U's
    null distribution (exact up to EXACT_MAX values a side). The ends are closed, which
    keeps the coverage at least 1 - `level` when values tie. None without a value a side."""
    x = np.asarray(base, np.float64).ravel()
    y = np.asarray(new, np.float64).ravel()
    m, n = len(x), len(y)
    if m < 1 or n < 1:
        return None
    d = np.sort((y[:, None] - x[None, :]).ravel())
    mn = len(d)
    est = float(np.median(d))
    exact = m <= EXACT_MAX and n <= EXACT_MAX
    k = _k_exact(m, n, level) if exact else _k_normal(x, y, level)
    if k < 1:
        return Shift(est, None, None, exact)
    return Shift(est, float(d[k - 1]), float(d[mn - k]), exact)
