"""Rounds to a verdict on recorded per-round runs, old (Welch t + permutation on logs) and
new (Hodges-Lehmann / Moses rank interval on logs): python an.py FILE.json..."""
import json, sys
import numpy as np
from common import old_iv, rank_iv, run
for f in sys.argv[1:]:
    r = np.array([x[:2] for x in json.load(open(f))["rounds"]])
    r = r[(r > 0).all(axis=1)]
    lb, ln = np.log(r[:, 0]), np.log(r[:, 1])
    out = []
    for mn, b in ((5, 10.0), (10, 10.0), (10, 5.0)):
        o = run(lb, ln, b, mn, old_iv); n = run(lb, ln, b, mn, rank_iv)
        out.append(f"min{mn}/B{b:g}: old {o[0]}@{o[1]} rank {n[0]}@{n[1]}")
    print(f"{f.split('/')[-1]:18s} n={len(r):3d} ", " | ".join(out))
