"""QuickJS: a function with no loop and no call keeps its time (issue 32).

Such a function polls nowhere of its own (QuickJS polls its interrupt counter at function
entries, before the new frame exists, and at backward jumps), so the sampler never found
it on top: acorn's finishNodeAt had 0-1 samples where V8 gives it 4-7 % of the parse, and
the time went to where polls are dense (skipSpace's loop: 28-32 % against V8's 6-9 % for
nextToken, into which V8 inlines it). Real code: acorn (npm, pinned) parsing its own
dist/acorn.js, recorded on QuickJS with the CPU clock and by node --cpu-prof. Bounds
follow from each recording: its own sample count and V8's shares of the same parse."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import jsprof
from jsprof.analysis.profile import summarize
from jsprof.record import record
from jsprof.trace import NONE
from quickjs_util import MAKE_DATA

ACORN = Path(__file__).parent / "js" / "node_modules" / "acorn" / "dist"
DRIVER = """import {{ parse }} from "./acorn.mjs";
const SOURCE = {source};
let n = 0;
const end = Date.now() + {ms};
while (Date.now() < end || n < {runs}) {{
  parse(SOURCE, {{ ecmaVersion: "latest", sourceType: "script", locations: true }});
  n++;
}}
console.log(n > 0);
"""
# No loop and no call on the paths acorn takes (finishNodeAt: four stores and a return;
# isNewLine: four compares)
LEAVES = ("finishNodeAt", "isNewLine")
INTERVAL = 0.25  # ms, CPU clock


def _shares(rec) -> tuple[dict[str, float], int]:
    """Each function name's share of the JS self time, and the sample count."""
    s = summarize(rec)
    total = float(s.stats.self_ms.sum())
    out: dict[str, float] = {}
    for k, ms in zip(s.stats.keys, s.stats.self_ms.tolist(), strict=True):
        if k.resource:  # JavaScript, not (garbage collector), (program)
            out[k.name] = out.get(k.name, 0.0) + ms
    js = sum(out.values())
    assert js > 0.5 * total, (js, total)
    return {k: v / js for k, v in out.items()}, sum(
        len(t.trace.sample_time) for t in rec.tracks)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("leaves")
    assert (ACORN / "acorn.mjs").exists(), "tests/js missing: `make test` installs it"
    shutil.copy(ACORN / "acorn.mjs", d / "acorn.mjs")
    source = json.dumps((ACORN / "acorn.js").read_text())
    (d / "quickjs.mjs").write_text(DRIVER.format(source=source, ms=0, runs=4))
    (d / "node.mjs").write_text(DRIVER.format(source=source, ms=1500, runs=20))
    if shutil.which("node") is None:
        pytest.fail("node is not installed; these tests need Node.js 20")
    subprocess.run(["node", "--cpu-prof", "--cpu-prof-dir=v8", "--cpu-prof-interval", "250",
                    "node.mjs"], cwd=d, check=True, timeout=300, capture_output=True)
    (profile,) = (d / "v8").glob("*.cpuprofile")
    v8, _ = _shares(jsprof.load(profile))
    return d, v8


@pytest.mark.npm
def test_leaf_functions_keep_their_time_on_quickjs(work):
    d, v8 = work
    q, n = _shares(record(d / "quickjs.mjs", sample_interval=INTERVAL, clock="cpu"))
    # V8 may inline isNewLine into its callers (then it has no samples of its own): a
    # floor under the group's true share, never above it
    assert v8.get("finishNodeAt", 0) > 0, sorted(v8, key=v8.get)[-15:]
    # A sensible factor of V8's share: QuickJS's calls cost more against its property
    # stores than V8's do (its own measurements: finishNodeAt 1-2 % for V8's 4-7 %), so a
    # tenth. The recording holds enough samples for that tenth to be 10 or more, so 0
    # (before: finishNodeAt 0-1 samples of ~8,000) cannot pass by chance.
    want = sum(v8.get(name, 0) for name in LEAVES) / 10
    assert want * n >= 10, (want, n)
    got = sum(q.get(name, 0) for name in LEAVES)
    assert got >= want, ({k: round(100 * q.get(k, 0), 2) for k in LEAVES},
                         {k: round(100 * v8.get(k, 0), 2) for k in LEAVES}, n)
    assert q.get("finishNodeAt", 0) >= v8["finishNodeAt"] / 10, (q.get("finishNodeAt"), v8)
    # ... and the time is no longer charged where polls are dense: skipSpace's loop (a
    # backward jump per character; before: 28-32 % of the JS time). V8 inlines skipSpace
    # into nextToken and, in some runs, nextToken into next: their shares move between
    # the three run to run (4 runs here: nextToken 0.9-7.0 %, next 4.4-8.7 %; the CI of
    # fa082eb had skipSpace + nextToken at 2.0 %, which failed a bound on those two), the
    # three together 9.7-12.6 %. So the three are compared as one on both sides: QuickJS
    # 13.9-14.3 % (3 runs), with the bug >= 35 %; within 2x of V8's.
    group = ("pp.skipSpace", "pp.nextToken", "pp.next")
    q_group, v8_group = (sum(s.get(k, 0) for k in group) for s in (q, v8))
    assert q_group <= 2 * v8_group, ({k: q.get(k) for k in group}, {k: v8.get(k) for k in group})


# A comparator with no loop and no call: its only checks are its callers' (the entry poll
# of each call, where the caller's frame is the top one) and its own frame exit. ~0.2 s of
# CPU. The copies are made at the top level, not in sortAll: on the wall clock a loaded
# machine deschedules the thread where it page-faults, in the built-ins that allocate,
# and such a stall's ticks are kept on the built-in's caller (sortAll 171 against
# byScore's 295 in one of 6 runs beside 4 busy loops, 143 of them from one stall).
COMPARATOR = MAKE_DATA + """\
function byScore(a, b) {
  const sa = ((a.x * 31 + a.y) * 17 + a.z) % 1009 + ((a.x ^ a.z) * 13 + (a.y | 7)) % 101;
  const sb = ((b.x * 31 + b.y) * 17 + b.z) % 1009 + ((b.x ^ b.z) * 13 + (b.y | 7)) % 101;
  const ta = ((a.z * 29 + a.x) * 19 + a.y) % 1013 + ((a.y ^ a.x) * 11 + (a.z | 3)) % 103;
  const tb = ((b.z * 29 + b.x) * 19 + b.y) % 1013 + ((b.y ^ b.x) * 11 + (b.z | 3)) % 103;
  return (sa - sb) * 1000 + (ta - tb);
}
function sortAll(data) {
  return data.sort(byScore);
}
const data = makeData(3000, 7);
for (let r = 0; r < 6; r++) sortAll(data.slice());
"""


def test_a_leaf_comparator_keeps_its_time_on_the_cpu_clock(tmp_path: Path) -> None:
    """The CPU clock's deadline is placed after its own reading (a system call, 1-3 us):
    placed before it, half the looks found the tick not yet due by less than the read
    took and it went to the next check, which after the comparator's frame exit is the
    next call's entry poll, the caller's stack (sortAll 37-75 % of byScore's samples in
    6 runs; perf's count of the native sort outside the comparator: 4.5 %)."""
    script = tmp_path / "sort.js"
    script.write_text(COMPARATOR)
    for run in range(3):
        trace = record(script, sample_interval=INTERVAL, clock="cpu").tracks[0].trace
        counts: dict[str, int] = {}
        for s in trace.sample_stack.tolist():
            if s != NONE:
                name = trace.frames[trace.stack_frame[s]].name
                counts[name] = counts.get(name, 0) + 1
        # ~0.2 s of CPU at 0.25 ms: ~250 comparator samples; the caller's true share
        # (4.5 %) a seventh of the bound
        assert counts.get("byScore", 0) >= 100, (run, counts)
        assert counts.get("sortAll", 0) * 3 <= counts["byScore"], (run, counts)


@pytest.mark.under_load
def test_a_leaf_comparator_keeps_its_time_on_the_wall_clock(tmp_path: Path) -> None:
    """The default clock. Before, the wall clock looked at its deadline every 1,000 polls
    only and a frame exit only when the timer thread had poked (every 20 ms, for ticks
    left overdue), so every tick went to a poll, in this sort the next comparator call's
    entry: byScore had 0 of ~110 samples, sortAll all of them. Now it closes in on each
    due time as the CPU clock does (every poll and frame exit looks in the last 10 us),
    and a frame exit also looks when the thread was descheduled since its last look."""
    from jsprof import _quickjs

    # rseq is how a deschedule shows (glibc >= 2.35 registers it); without it the wall
    # clock samples as before and this test has nothing to check: it fails, never skips
    assert _quickjs.watch_available(), "rseq is not available: glibc >= 2.35 registers it"
    script = tmp_path / "sort.js"
    script.write_text(COMPARATOR)
    for run in range(3):
        trace = record(script, sample_interval=INTERVAL).tracks[0].trace
        counts: dict[str, int] = {}
        for s in trace.sample_stack.tolist():
            if s != NONE:
                name = trace.frames[trace.stack_frame[s]].name
                counts[name] = counts.get(name, 0) + 1
        # the samples' ratio, not their number (the wall clock's count is the machine's):
        # byScore is most of the script's time (makeData a few %, sortAll's native sort
        # 4.5 % by perf), so it has most of its samples
        total = sum(counts.values())
        assert counts.get("byScore", 0) >= total / 2, (run, counts)
        assert counts.get("sortAll", 0) * 3 <= counts["byScore"], (run, counts)
