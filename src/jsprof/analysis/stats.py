"""The statistics of two samples compared function by function: Welch's t judged against its
permutation distribution (or Student's t), Fieller's interval of a ratio of means, and
Benjamini-Hochberg over many such tests. `jsprof fleet regressions` (page loads a side) and
`jsprof budget` (runs a side) share them. Pure functions on numpy arrays; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


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
    return _changes(nb, na, mb, ma, vb, va, t, null)


def _changes(nb: int, na: int, mb: np.ndarray, ma: np.ndarray, vb: np.ndarray,
             va: np.ndarray, t: np.ndarray, null: np.ndarray | None) -> list[Change]:
    """Per column its Change, Welch-Satterthwaite's degrees of freedom."""
    out = []
    for j in range(len(mb)):
        var = vb[j] + va[j]
        df = (var * var / ((vb[j] ** 2 / (nb - 1)) + (va[j] ** 2 / (na - 1)))
              if var > 0 else float(nb + na - 2))
        out.append(Change(float(mb[j]), float(ma[j]), float(vb[j]), float(va[j]),
                          max(float(df), 1.0), float(t[j]),
                          None if null is None else null[:, j]))
    return out


# The power at which `min_rise` states the smallest rise a query can see: 1/2, the rise
# whose estimate lands on the test's critical value (a smaller one is more often missed
# than found). Modelled as NEW's spread growing with the rise (below), which on skewed
# per-page-load times errs on the side of a larger rise: on the page loads of issue 34
# (summarizeTree, 24 -> 25 page loads, 12 tests) it says +496 %, where 5x planted in
# resampled page loads was found 79 of 100 times and 3x 30 of 100.
POWER = 0.5


def min_rise(mean: float, var: float, nb: int, na: int, t_crit: float,
             power: float = POWER) -> float | None:
    """The smallest relative rise r (0.5: +50 %) of a function's self ms per page load
    that a test at critical |t| `t_crit` finds with probability `power`, for BASE's mean
    `mean` and per-page-load variance `var` (BASE's sample variance, not its mean's), `nb`
    and `na` page loads a side. The rise is modelled as every page load of NEW taking
    1 + r times as long, so NEW's variance is (1 + r)^2 `var`: r solves
    r mean = (t_crit + z_power) sqrt(var / nb + (1 + r)^2 var / na) (normal
    approximation of the power; `t_crit` is the test's own, permutation or Student's).
    inf when no rise of any size would be found that often (NEW's spread grows with the
    rise as fast as the rise), None when BASE's mean is not positive (no relative rise)."""
    if not mean > 0:
        return None
    if not math.isfinite(t_crit):
        return math.inf
    k2c2 = ((t_crit + NormalDist().inv_cdf(power)) ** 2) * max(var, 0.0) / (mean * mean)
    a = 1.0 - k2c2 / na
    if a <= 0:
        return math.inf
    b = -2.0 * k2c2 / na
    c = -k2c2 * (1.0 / nb + 1.0 / na)
    return (-b + math.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)


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


def changes_from_sums(nb: int, sb: np.ndarray, qb: np.ndarray, na: int, sa: np.ndarray,
                      qa: np.ndarray) -> list[Change] | None:
    """`changes` from each side's page loads, sums and sums of squares per column (what
    the rollups keep), for a pair of more than PERM_MAX_LOADS page loads (Student's t:
    no permutation, which needs each page load's value); None without two page loads on
    each side."""
    if nb < 2 or na < 2:
        return None
    n = nb + na
    assert n > PERM_MAX_LOADS, "a permutation null needs the page loads' values"
    sb, qb = np.asarray(sb, np.float64), np.asarray(qb, np.float64)
    s, q = sb + np.asarray(sa, np.float64), qb + np.asarray(qa, np.float64)
    return _changes(nb, na, *_welch(sb, qb, nb, s, q, n), None)
