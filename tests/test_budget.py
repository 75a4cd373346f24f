"""`jsprof budget BASE NEW` (#38) on real engines: interleaved rounds, the verdict decided
by the interval of NEW's relative change, the functions that changed named with the fleet's
statistics. What the tests assert holds under load: an A/A pair may be "same" or "unsure"
(both honest) but never "slower"; a planted 2x slowdown of one function (most of the time)
is "slower" with that function first, on QuickJS's CPU clock and on Node's wall clock."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jsprof.analysis.diff import NameKey
from jsprof.analysis.ranks import shift_interval
from jsprof.budget import (
    EXIT_CODES,
    Run,
    _judge,
    budget,
    functions_changed,
    look_level,
    looks,
)
from jsprof.render.budget import BudgetText

pytest_plugins = ("pytester",)

JSPROF = [sys.executable, "-m", "jsprof.cli"]

# Three functions with their own loops (self time each); `render` is the most of it.
APP = """
function tokenize(n) { let s = 0; for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003; return s; }
function render(n) {
  let s = 1; for (let i = 0; i < n * RENDER; i++) s = (s * 31 + i) % 1000033; return s;
}
function layout(n) { let s = 2; for (let i = 0; i < n; i++) s = (s + (i ^ s)) % 999983; return s; }
function main() {
  let t = tokenize(20000);
  t += render(60000);
  t += layout(20000);
  return t;
}
globalThis.result = main();
"""

TOP_KEYS = {
    "verdict", "base", "new", "engine", "clock", "metric", "beforeMsPerRun", "afterMsPerRun",
    "changePct", "interval", "changeMsPerRun", "changeMsCi", "ciLevel", "budgetPct",
    "maxSlowerPct", "maxSlowerMs", "rounds", "minRounds", "maxRounds", "timeCapS", "elapsedS",
    "stoppedBy", "changed",
}
CHANGED_KEYS = {
    "name", "resource", "line", "beforeMsPerRun", "afterMsPerRun", "changeMsPerRun",
    "changeMsCi", "changePct", "changePctCi", "explainsPct", "pValue", "qValue",
}


def _pair(tmp_path: Path, factor: int = 2, scale: int = 1) -> tuple[Path, Path]:
    """BASE and NEW in two folders (two checkouts), NEW's `render` `factor` times the work."""
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    # one pass: replaced in turn, 20000 * 3 became a "60000" the second replace scaled again
    text = re.sub(r"\b(20000|60000)\b", lambda m: str(int(m.group()) * scale), APP)
    base = tmp_path / "a" / "app.js"
    new = tmp_path / "b" / "app.js"
    base.write_text(text.replace("RENDER", "1"))
    new.write_text(text.replace("RENDER", str(factor)))
    return base, new


def _cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*JSPROF, "budget", *map(str, args)], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


def _check_schema(doc: dict) -> None:
    assert TOP_KEYS <= set(doc), set(doc) ^ TOP_KEYS
    assert doc["verdict"] in ("faster", "slower", "same", "unsure")
    assert doc["ciLevel"] == 0.95
    assert isinstance(doc["rounds"], int) and doc["rounds"] >= 1
    assert len(doc["interval"]) == 2
    for c in doc["changed"]:
        assert set(c) == CHANGED_KEYS
        lo, hi = c["changeMsCi"]
        assert lo <= c["changeMsPerRun"] <= hi
        assert c["beforeMsPerRun"] >= 0 and c["afterMsPerRun"] >= 0


def test_looks_grow_by_a_fifth_to_the_limit():
    assert looks(10, 10) == [10]
    got = looks(10, 60)
    assert got[0] == 10 and got[-1] == 60 and got == sorted(set(got))
    assert all(b <= max(a + 1, -(-a * 6 // 5)) for a, b in zip(got, got[1:], strict=False))


def test_planted_slowdown_is_slower_and_named_first_quickjs_cpu(tmp_path):
    base, new = _pair(tmp_path, factor=2)
    flame = tmp_path / "diff.html"
    p = _cli("--json", "--flame", flame, "--max-slower", "10%", base, new)
    assert p.returncode == EXIT_CODES["slower"] == 1, p.stderr
    doc = json.loads(p.stdout)
    _check_schema(doc)
    assert doc["verdict"] == "slower" and doc["clock"] == "cpu" and doc["engine"] == "quickjs"
    lo, hi = doc["interval"]
    assert lo > doc["budgetPct"] == 10.0  # the whole interval above the budget
    assert doc["stoppedBy"] == "decided" and doc["rounds"] >= 10  # --min-rounds' default
    first = doc["changed"][0]
    # render is ~60 % of BASE's time and does twice the work in NEW: it explains the change
    assert first["name"] == "render" and first["resource"] == "app.js", doc["changed"]
    assert first["changeMsCi"][0] > 0 and first["afterMsPerRun"] > first["beforeMsPerRun"]
    assert first["explainsPct"] > 50
    # tokenize and layout did not change; if one is picked by chance it is not first
    assert [c["name"] for c in doc["changed"]].count("render") == 1
    page = flame.read_text()
    assert 'id="fg-facts"' in page and "slower" in page and "render" in page


def test_a_a_pair_is_never_slower_quickjs(tmp_path):
    # Runs of ~13 ms of CPU (scale 4), ~13 samples at 1 ms: at scale 1 (~2.3 ms, 2 or 3
    # samples a run) the runs' numbers were mostly quantization, no look could ever say
    # "same" within 5 %, and every run went to the 300-round limit "unsure" (33-42 s).
    # Now "same" is decided in 22-33 rounds (4-5 s) on a quiet machine. On a loaded one
    # the runs' spread is wider and the rounds may run out first (CI of fa082eb: 300
    # rounds in 50 s, +1.2 %, interval -2.5 to +5.0 %): "unsure" is then the right answer,
    # so the test asserts what it can know, that the runs are not quantized (each run's
    # number is made of enough samples) and that no look found a change either way.
    base, _ = _pair(tmp_path, scale=4)
    res = budget(base, base, max_slower=5.0, time_cap=60)
    assert res.verdict != "slower", res.summary()
    assert res.verdict in ("same", "unsure")  # "faster" would be as false as "slower"
    doc = res.json()
    _check_schema(doc)
    per_run = sorted(len(t.trace.sample_time) for r in res.base_runs + res.new_runs
                     for t in r.rec.tracks)
    assert per_run[len(per_run) // 2] >= 8, (per_run[:10], res.summary())
    lo, hi = doc["interval"]
    if res.verdict == "same":
        assert -5.0 <= lo <= hi <= 5.0
    else:  # the rounds or the time ran out: nothing was found to differ
        assert lo is not None and hi is not None and lo <= 0.0 <= hi, res.summary()
    # nothing changed, so nothing that changed leads the list (BH at 5 % FDR may pick a
    # function by chance, rarely; it must then be one that exists on both sides)
    assert all(c["name"] in ("tokenize", "render", "layout", "main", "") for c in doc["changed"])


def test_text_summary_and_exit_code_by_verdict(tmp_path):
    base, new = _pair(tmp_path, factor=2)
    p = _cli("--max-slower", "10", base, new)
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("SLOWER: NEW is slower than the budget allows (+10%)"), p.stdout
    assert "CPU ms per run:" in lines[1] and "95% interval" in lines[1]
    assert "rounds a side on quickjs (cpu clock)" in lines[2]
    i = next(i for i, x in enumerate(lines) if x.startswith("functions that changed"))
    assert lines[i + 1].lstrip().startswith("render (app.js): "), p.stdout
    # No time for a second round: too few runs to compare, "unsure", exit 3.
    p = _cli("--json", "--time-cap", "0.001", base, new)
    assert p.returncode == EXIT_CODES["unsure"] == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "unsure" and doc["rounds"] == 1 and doc["stoppedBy"] == "time cap"
    assert doc["interval"] == [None, None] and doc["changed"] == []


def test_bad_input_is_one_line_exit_2(tmp_path):
    base, new = _pair(tmp_path)
    for args, words in (
        (("--measure", "x", base, new), "--measure reads a page's performance.measure"),
        ((base, tmp_path / "nope.js"), "nope.js: no such file"),
        (("--min-rounds", "20", "--max-rounds", "5", base, new), "need 2 <= min <= max"),
        (("--engine", "node", "--clock", "cpu", base, new), "--clock cpu is not supported"),
        (("--flame", tmp_path / "x.svg", base, new), "flame diff as .html"),
    ):
        p = _cli(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and words in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


def test_a_script_that_throws_is_one_line(tmp_path):
    base, _ = _pair(tmp_path)
    bad = tmp_path / "bad.js"
    bad.write_text("function f() { throw new Error('boom'); }\nf();\n")
    p = _cli(base, bad)
    assert p.returncode == 2, p.stderr
    assert "NEW failed in round 1: Error: boom" in p.stderr and p.stderr.count("\n") == 1


def test_a_run_that_measured_nothing_is_left_out_not_fatal():
    """One run of 0 busy ms (no sample outside waiting: Node hardly ran while recorded, as
    CI saw at load 16 beside a second pytest worker) is no measurement: the others still
    decide and name the function. Before, it left all 168 rounds 'unsure', no function."""
    rng = np.random.default_rng(7)
    render, other = NameKey("render", "app.js"), NameKey("layout", "app.js")

    def runs(render_ms: float) -> list[Run]:
        out = []
        for _ in range(30):
            stretch = float(rng.uniform(1.0, 1.3))  # load stretches a run by a factor
            r, o = render_ms * stretch, 10.0 * stretch
            out.append(Run(r + o, {render: r, other: o}, None))
        return out

    base, new = runs(20.0), runs(40.0)
    base[3] = Run(0.0, {}, None)  # all its samples were (idle), or there were none
    test, _, verdict = _judge(base, new, 10.0, None, 0.05 / 6)
    assert verdict == "slower" and test is not None and 1.4 < test.ratio < 1.8, test
    changed = functions_changed(base, new)
    assert changed and changed[0].key == render, changed
    doc = {"ciLevel": 0.95, "verdict": "slower", "budgetPct": 10.0, "maxSlowerMs": None,
           "changePct": 60.0, "metric": "busy wall ms per run", "beforeMsPerRun": 33.0,
           "afterMsPerRun": 53.0, "interval": [40.0, 80.0], "stoppedBy": "decided",
           "rounds": 30, "engine": "node", "clock": "wall", "elapsedS": 9.0,
           "timeCapS": 60.0, "maxRounds": 100, "unmeasuredRuns": 1, "changed": []}
    assert "1 runs left out: no sample outside waiting" in BudgetText().render(doc)


# Real runs' numbers per round recorded at load ~18-25 (see the file's "about").
LOADED = json.loads((Path(__file__).parent / "data" / "budget" / "rounds_load.json")
                    .read_text())["sets"]


def _replay(rounds: list, max_slower: float, min_rounds: int = 5,
            max_rounds: int = 300) -> tuple[str, int]:
    """budget()'s looks over recorded (BASE ms, NEW ms) rounds: the verdict and the rounds
    at the look that gave it (the last look the rounds reach when none did)."""
    level = look_level(min_rounds, max_rounds)
    verdict, at = "unsure", 0
    for k in looks(min_rounds, max_rounds):
        if k > len(rounds):
            break
        b = [Run(float(x[0]), {}, None) for x in rounds[:k]]
        n = [Run(float(x[1]), {}, None) for x in rounds[:k]]
        verdict, at = _judge(b, n, max_slower, None, level)[2], k
        if verdict != "unsure":
            break
    return verdict, at


def test_a_heavy_tailed_slowdown_recorded_under_load_is_decided():
    """Issue 37: the page test's 4x slowdown in Chromium at load ~20 has runs from 8 to
    368 ms; Welch's t on their logarithms stayed "unsure" through the look at 22 rounds
    (decided at 27; CI's was still unsure at 29, its time cap). The rank interval is not
    widened by the far runs: decided "slower" within the first 22 rounds."""
    verdict, at = _replay(LOADED["page4"], 10.0)
    assert verdict == "slower" and at <= 22, (verdict, at)


def test_a_a_rounds_resampled_are_seldom_slower_or_faster():
    """Real A/A rounds (a page's measure, Node's busy ms, at load ~20; heavy tailed)
    resampled: rounds drawn with replacement, pairing and order kept, NEW moved by minus the
    set's own estimated shift (nothing changed), a 1e-9 jitter breaking the copies' ties;
    and the pooled runs dealt out at random. With budget 0 (the interval excluding no
    change at all: its coverage) the verdict is "slower" or "faster" at most 5 % of the
    time over all the looks. Measured 0.3-1.1 % (benchmarks/RESULTS.md, budget_rank)."""
    rng = np.random.default_rng(37)
    reps = 300
    for name in ("page1", "node1"):
        logs = np.log(np.array(LOADED[name]))
        k = len(logs)
        shift = shift_interval(logs[:, 0], logs[:, 1], 0.05).estimate
        false = {"boot": 0, "deal": 0}
        for how in false:
            for _ in range(reps):
                if how == "boot":
                    pick = rng.integers(0, k, k)
                    b = logs[pick, 0] + rng.normal(0.0, 1e-9, k)
                    n = logs[pick, 1] - shift + rng.normal(0.0, 1e-9, k)
                else:
                    pool = rng.permutation(logs.ravel())
                    b, n = pool[:k], pool[k:]
                verdict, _ = _replay(np.exp(np.stack([b, n], axis=1)).tolist(), 0.0)
                false[how] += verdict in ("slower", "faster")
        assert all(f <= 0.05 * reps for f in false.values()), (name, false)


def test_planted_slowdown_on_node_wall_clock(tmp_path):
    base, new = _pair(tmp_path, factor=2, scale=20)
    res = budget(base, new, engine="node", max_slower=10.0, min_rounds=5, time_cap=240)
    assert res.clock == "wall"
    assert res.verdict == "slower", res.summary()
    assert res.changed and res.changed[0].key.name == "render", res.summary()


PAGE = """<!doctype html><title>budget</title><script>
APP
performance.mark("start");
main();
performance.measure("work", "start");
</script>"""


@pytest.mark.chromium
def test_planted_slowdown_in_a_page_by_its_performance_measure(tmp_path):
    # Wall time in a browser under load 20-30 spreads runs by factors (a 2x slowdown came
    # out at +0.5 % to +232 % after 36 rounds here), so the planted slowdown is 4x.
    base, new = _pair(tmp_path, factor=4, scale=20)
    for p in (base, new):
        p.with_suffix(".html").write_text(PAGE.replace("APP", p.read_text()))
    res = budget(base.with_suffix(".html"), new.with_suffix(".html"), engine="chromium",
                 measure="work", max_slower=10.0, min_rounds=5, time_cap=300)
    assert res.metric == "performance.measure 'work' ms" and res.clock == "wall"
    assert res.verdict == "slower", res.summary()
    # the measure's duration is each run's number
    assert all(r.ms > 0 for r in res.base_runs + res.new_runs)
    # render is named first when a function is named; whether one is is not asserted: at
    # load 20-30 the wall-clock profiles of a dozen page loads a side spread so far that a
    # decided verdict (+13 % to +1220 %) came with no function picked at 5 % FDR (QuickJS's
    # CPU clock and Node name render first above)
    if res.changed:
        assert res.changed[0].key.name == "render", res.summary()
        assert res.changed[0].key.resource == "app.html"
    # a name the page never measures: one line, the run ended by the cap, exit 2 (a short
    # cap: the page's one run records until it, and what it lacks is the same at any length)
    p = _cli("--engine", "chromium", "--measure", "nope", "--time-cap", "3",
             base.with_suffix(".html"), new.with_suffix(".html"))
    assert p.returncode == 2 and "no performance.measure named 'nope'" in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1


@pytest.mark.parametrize("factor", [1, 2])
def test_the_pytest_fixture_from_a_pytester_file(pytester, tmp_path, factor):
    base, new = _pair(tmp_path, factor=factor)
    pytester.makepyfile(f"""
        def test_render_budget(jsprof):
            res = jsprof.budget({str(base)!r}, {str(new)!r}, max_slower=10)
            res.check()
    """)
    art = tmp_path / "artifacts"
    # (Hypothesis's plugin left out: its import is most of a pytest's start.)
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                                        f"--jsprof-artifacts={art}")
    page = art / "test_render_budget.budget.html"
    assert 'id="fg-facts"' in page.read_text()  # the flame diff, kept whatever the verdict
    if factor == 1:
        out.assert_outcomes(passed=1)  # A/A: same, or unsure, which check() lets pass
    else:
        out.assert_outcomes(failed=1)
        out.stdout.fnmatch_lines(["*SLOWER: NEW is slower than the budget allows*",
                                  "*render (app.js)*", f"*flame diff: {page}*"])


def test_the_docs_page_names_every_json_field():
    page = (Path(__file__).parent.parent / "docs" / "budget.md").read_text()
    for key in sorted(TOP_KEYS | CHANGED_KEYS):
        assert f'"{key}"' in page, key


def test_a_function_explains_its_share_of_the_change_the_verdict_shows():
    # review12: the verdict's change is BASE's geometric mean times the rank (Hodges-
    # Lehmann) ratio, but a function's explainsPct divided by NEW's geometric mean minus
    # BASE's: with two NEW runs stretched 10x by load, f's +53 ms was "69 % of the change"
    # shown as +21 ms. Now the share is of the change shown.
    from jsprof.analysis.diff import NameKey

    rng = np.random.default_rng(3)
    f, g = NameKey("f", "a.js"), NameKey("g", "a.js")

    def run(fms: float, gms: float) -> Run:
        return Run(fms + gms, {f: fms, g: gms}, None)

    b = [run(50 * rng.uniform(.97, 1.03), 50 * rng.uniform(.97, 1.03)) for _ in range(12)]
    n = [run(70 * rng.uniform(.97, 1.03), 50 * rng.uniform(.97, 1.03)) for _ in range(12)]
    for i in (0, 1):  # load stretches two NEW runs 10x, both functions alike
        n[i] = run(n[i].self_ms[f] * 10, n[i].self_ms[g] * 10)
    test, _, _ = _judge(b, n, 5.0, None, 0.0025)
    (first, *_) = functions_changed(b, n)
    assert first.key == f
    shown = test.after - test.before
    assert first.explains * shown == pytest.approx(first.after - first.before, rel=1e-9)
