"""Verdicts and rounds to a verdict with a planted factor on real A/A runs:
python power.py REPS METHOD(rank|old) BUDGET MIN_ROUNDS FACTORS FILE.json...
Each replicate draws 120 rounds' runs with replacement from the file's pooled A/A runs
(both sides, all rounds), NEW's times the factor (QuickJS CPU ms re-quantized to the 1 ms
sampling grid with a random phase, as a recording would), a 1e-9 jitter breaking ties;
then the budget's looks (max_rounds 300: the same levels) up to the 120 rounds."""
import json, sys
import numpy as np
from common import old_iv, rank_iv, run

reps, method, budget, mn = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
factors = [float(f) for f in sys.argv[5].split(",")]
iv = rank_iv if method == "rank" else old_iv
K = 120
for f in sys.argv[6:]:
    r = np.array([x[:2] for x in json.load(open(f))["rounds"]])
    pool = r[(r > 0).all(axis=1)].ravel()
    qjs = "qjs" in f
    rng = np.random.default_rng(32)
    for fac in factors:
        got, at = {}, []
        for _ in range(reps):
            b = rng.choice(pool, K)
            n = rng.choice(pool, K) * fac
            if qjs:  # whole samples of 1 ms: floor(t + phase)
                n = np.maximum(np.floor(n + rng.random(K)), 1.0) + 0.002
            v, L = run(np.log(b) + rng.normal(0, 1e-9, K), np.log(n) + rng.normal(0, 1e-9, K),
                       budget, mn, iv)
            got[v] = got.get(v, 0) + 1
            if v != "unsure":
                at.append(L)
        med = int(np.median(at)) if at else None
        print(f"{f.split('/')[-1]:16s} {method:4s} B{budget:g}% min{mn} x{fac:g}: "
              + " ".join(f"{k} {got.get(k, 0)}" for k in ("slower", "same", "faster", "unsure"))
              + f" | median rounds to a verdict {med}", flush=True)
