"""False 'slower'/'faster' verdicts on resampled real A/A rounds:
python fpr.py REPS METHOD(rank|old) FILE.json...
Each replicate is the budget's sequential procedure (looks from min_rounds 5, Bonferroni
level over looks(5, 300)) on len(file) rounds made from the file's A/A rounds two ways:
  perm   the pooled runs dealt out to BASE/NEW at random (exchangeable by construction)
  boot   rounds (BASE, NEW pairs, as recorded: order and pairing kept) drawn with
         replacement, NEW's logs moved by minus the file's own Hodges-Lehmann shift (the
         null imposed), a 1e-9 jitter breaking the copies' ties at random
A verdict 'slower' or 'faster' is false (nothing changed); nominal: <= 5 % per budget.
Budget 0: the interval excluding 0, i.e. its 95 % coverage itself."""
import json, math, sys
import numpy as np
from common import old_iv, rank_iv, run
from jsprof.analysis.ranks import shift_interval
from jsprof.analysis.stats import _betainc


def cp(k, n, a=0.05):
    """Clopper-Pearson interval of k of n, by bisection on the binomial tail."""
    def tail_ge(p, k):  # P(X >= k), X ~ Binomial(n, p)
        return 1.0 if k <= 0 else _betainc(k, n - k + 1, p)
    def bis(f):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) else (lo, mid)
        return (lo + hi) / 2
    lo = 0.0 if k == 0 else bis(lambda p: tail_ge(p, k) < a / 2)
    hi = 1.0 if k == n else bis(lambda p: 1 - tail_ge(p, k + 1) >= a / 2)
    return lo, hi


reps, method = int(sys.argv[1]), sys.argv[2]
iv = rank_iv if method == "rank" else old_iv
for f in sys.argv[3:]:
    r = np.array([x[:2] for x in json.load(open(f))["rounds"]])
    r = r[(r > 0).all(axis=1)]
    lr = np.log(r)
    k = len(lr)
    hl = shift_interval(lr[:, 0], lr[:, 1], 0.05).estimate
    rng = np.random.default_rng(37)
    for how in ("perm", "boot"):
        bad = {0.0: 0, 5.0: 0, 10.0: 0}
        same = {0.0: 0, 5.0: 0, 10.0: 0}
        for _ in range(reps):
            if how == "perm":
                pool = rng.permutation(lr.ravel())
                lb, ln = pool[:k], pool[k:]
            else:
                pick = rng.integers(0, k, k)
                lb = lr[pick, 0] + rng.normal(0, 1e-9, k)
                ln = lr[pick, 1] - hl + rng.normal(0, 1e-9, k)
            for b in bad:
                v, _ = run(lb, ln, b, 5, iv)
                bad[b] += v in ("slower", "faster")
                same[b] += v == "same"
        cells = []
        for b, c in bad.items():
            lo, hi = cp(c, reps)
            cells.append(f"B{b:g}%: {c}/{reps} = {100*c/reps:.2f}% [{100*lo:.2f}, {100*hi:.2f}]"
                         f" same {same[b]}")
        print(f"{f.split('/')[-1]:16s} {method} {how} k={k} hl={100*(math.exp(hl)-1):+.1f}%  "
              + " | ".join(cells), flush=True)
