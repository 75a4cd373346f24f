"""Record per-round numbers of budget pairs: PYTHONPATH=../../src python rec.py KIND OUT ROUNDS
(KIND: page1 page4 node_1 node_2 quickjs_1 quickjs_2; the last number of a round is the
load average when it ended)"""
import json, os, sys, time, re
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_budget import _pair, PAGE
import jsprof
from jsprof.budget import budget
kind, out, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
tmp = Path(f"/tmp/br/{kind}"); tmp.mkdir(exist_ok=True)
rows = []
def on_round(i, b, n):
    rows.append([b.ms, n.ms, time.time(), os.getloadavg()[0]])
    Path(out).write_text(json.dumps({"kind": kind, "rounds": rows}))
    print(i, round(b.ms, 2), round(n.ms, 2), flush=True)
if kind.startswith("page"):
    factor = 4 if kind == "page4" else 1
    base, new = _pair(tmp, factor=factor, scale=20)
    for p in (base, new):
        p.with_suffix(".html").write_text(PAGE.replace("APP", p.read_text()))
    if factor == 1:
        new = base
    budget(base.with_suffix(".html"), new.with_suffix(".html"), engine="chromium",
           measure="work", max_slower=10.0, min_rounds=rounds, max_rounds=rounds,
           time_cap=900, on_round=on_round)
else:
    eng, factor = kind.split("_")
    factor = int(factor)
    base, new = _pair(tmp, factor=max(factor, 1), scale=20 if eng == "node" else 4)
    if factor == 1:
        new = base
    budget(base, new, engine=eng, max_slower=10.0, min_rounds=rounds, max_rounds=rounds,
           time_cap=900, on_round=on_round)
print("jsprof", jsprof.__file__)
