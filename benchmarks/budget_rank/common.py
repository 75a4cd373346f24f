"""Shared by an.py / fpr.py: the old (t on logs) and new (rank) intervals' verdicts."""
import math
import numpy as np
from jsprof.analysis.ranks import shift_interval
from jsprof.analysis.stats import PERM_SEED, changes
from jsprof.budget import ALPHA, looks


def verdict(lo, hi, budget):
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "unsure"
    lo, hi = 100 * (math.exp(lo) - 1), 100 * (math.exp(hi) - 1)
    if lo > budget:
        return "slower"
    if hi < -budget:
        return "faster"
    if lo >= -budget and hi <= budget:
        return "same"
    return "unsure"


def old_iv(lb, ln, level, rounds):
    c = changes(lb[:, None], ln[:, None], PERM_SEED + rounds)[0]
    return c.ms_interval(level)


def rank_iv(lb, ln, level, rounds=None):
    s = shift_interval(lb, ln, level)
    return s.lo, s.hi


def run(lb, ln, budget, min_rounds, iv, max_rounds=300):
    """The sequential procedure on given per-round log values: (verdict, rounds)."""
    plan = looks(min_rounds, max_rounds)
    level = ALPHA / (len(plan) + 1)
    v, at = "unsure", len(lb)
    for L in plan:
        if L > len(lb):
            break
        v = verdict(*iv(lb[:L], ln[:L], level, L), budget)
        at = L
        if v != "unsure":
            return v, L
    return v, at
