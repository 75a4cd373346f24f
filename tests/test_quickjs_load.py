"""QuickJS recordings of a machine under CPU contention (issue 32): a `sort` comparator's
time stays the comparator's when the script's process is descheduled by busy processes
or stopped and continued the way `cpulimit` throttles (SIGSTOP 50 ms / SIGCONT 50 ms),
on the wall clock and on the CPU clock.

Before, a stall's ticks were all charged to the stack at the interpreter's next poll
after the timer thread had made them pending: when the thread stopped in the comparator's
last stretch (after its last poll) or in the native sort, that poll is the next
comparator call's entry, before the callee's frame exists, so the caller's stack. Quiet,
the interpreter takes its ticks itself where the comparator's stack is current (the
built-in's return), so the caller had ~1 % of the comparator's time; throttled, it had
70-100 % (3,267 ticks against cmpSync's 3,877): a false `[new]` hot function in `diff`.
Ticks due while the thread could not run have no known stack: they are counted as lost
(`offCpuDroppedTicks`) but the first, stamped where the stall began: the wall clock's gap
is the stack's where the thread resumed, where it stood still.

Two of the comparators call nothing (no loop, no call: they poll nowhere of their own).
On the wall clock they had no sample at all, quiet or loaded: their ticks went to the
next call's entry poll, the caller. The wall clock now closes in on each due time as the
CPU clock does, and a frame exit looks at the clock when the thread was descheduled since
its last look (rseq), so a tick that came due meanwhile is taken where the thread was.
The copies sorted are made by `main`: `slice` allocates, and the thread's stops land at
its page faults, a caller's time that is no comparator's (one stop: 63 samples).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from jsprof import load
from jsprof.trace import NONE, ProfilerTrace, sample_weights

# Two comparators, one sorting from a plain function, one after an `await` (the caller's
# frame is then an async function's, resumed by a job). Each compares names with a
# built-in, then scores both items with plain arithmetic: no poll from that built-in's
# return to the next comparator call's entry, where the caller's stack is current (the
# callee's frame does not exist yet). ~400 ms of CPU (ROUNDS): seconds under the loads below.
SCRIPT = """\
function makeData(n, seed) {
  const a = [];
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    a.push({ name: 'n' + (x % 97), x: x & 1023, y: (x >> 10) & 1023, z: (x >> 20) & 1023 });
  }
  return a;
}
function cmpSync(a, b) {
  const c = a.name.localeCompare(b.name);
  const sa = ((a.x * 31 + a.y) * 17 + a.z) % 1009 + ((a.x ^ a.z) * 13 + (a.y | 7)) % 101;
  const sb = ((b.x * 31 + b.y) * 17 + b.z) % 1009 + ((b.x ^ b.z) * 13 + (b.y | 7)) % 101;
  return c * 100000 + (sa - sb);
}
function cmpAfterAwait(a, b) {
  const c = a.name.localeCompare(b.name);
  const sa = ((a.x * 31 + a.y) * 17 + a.z) % 1009 + ((a.x ^ a.z) * 13 + (a.y | 7)) % 101;
  const sb = ((b.x * 31 + b.y) * 17 + b.z) % 1009 + ((b.x ^ b.z) * 13 + (b.y | 7)) % 101;
  return c * 100000 + (sa - sb);
}
function leafSync(a, b) {
  const sa = ((a.x * 31 + a.y) * 17 + a.z) % 1009 + ((a.x ^ a.z) * 13 + (a.y | 7)) % 101;
  const sb = ((b.x * 31 + b.y) * 17 + b.z) % 1009 + ((b.x ^ b.z) * 13 + (b.y | 7)) % 101;
  const ta = ((a.z * 29 + a.x) * 19 + a.y) % 1013 + ((a.y ^ a.x) * 11 + (a.z | 3)) % 103;
  const tb = ((b.z * 29 + b.x) * 19 + b.y) % 1013 + ((b.y ^ b.x) * 11 + (b.z | 3)) % 103;
  return (sa - sb) * 1000 + (ta - tb);
}
function leafAfterAwait(a, b) {
  const sa = ((a.x * 31 + a.y) * 17 + a.z) % 1009 + ((a.x ^ a.z) * 13 + (a.y | 7)) % 101;
  const sb = ((b.x * 31 + b.y) * 17 + b.z) % 1009 + ((b.x ^ b.z) * 13 + (b.y | 7)) % 101;
  const ta = ((a.z * 29 + a.x) * 19 + a.y) % 1013 + ((a.y ^ a.x) * 11 + (a.z | 3)) % 103;
  const tb = ((b.z * 29 + b.x) * 19 + b.y) % 1013 + ((b.y ^ b.x) * 11 + (b.z | 3)) % 103;
  return (sa - sb) * 1000 + (ta - tb);
}
function sortSync(data) {
  return data.sort(cmpSync);
}
async function sortAfterAwait(data) {
  await null;
  return data.sort(cmpAfterAwait);
}
function sortLeafSync(data) {
  return data.sort(leafSync);
}
async function sortLeafAfterAwait(data) {
  await null;
  return data.sort(leafAfterAwait);
}
async function main() {
  const data = makeData(3000, 7);
  for (let r = 0; r < ROUNDS; r++) {
    sortSync(data.slice());
    await sortAfterAwait(data.slice());
    sortLeafSync(data.slice());
    await sortLeafAfterAwait(data.slice());
  }
}
main();
"""
PAIRS = (("sortSync", "cmpSync"), ("sortAfterAwait", "cmpAfterAwait"),
         ("sortLeafSync", "leafSync"), ("sortLeafAfterAwait", "leafAfterAwait"))
RUNS = 3
# Sorts per comparator: ~35 samples of each comparator at 3 (~100 ms of CPU), where a
# caller's share is a binomial draw (CPU clock, beside busy loops: 8.5 % on average,
# leaf comparators 10-14 %): 9 of 35 (CI, 1 pair in 188 at load 11-16) crossed the third
# with nothing wrong. At 12, ~140-200 samples each: the same bound is ~8 sd away (6 runs:
# the largest share 0.168), and the failures it is for are shares of 1 or more.
ROUNDS = 12


def self_ms(trace: ProfilerTrace, interval: float, origin: float = 0.0,
            stops: Sequence[tuple[float, float]] = ()
            ) -> tuple[dict[str, float], dict[str, int]]:
    """Self milliseconds per function name, as `report` weighs samples (the gap to the
    next sample on the wall clock, the CPU ms on the CPU clock), less the time each
    sample's span spent in `stops` (epoch ms windows while the test had the process
    stopped; `origin`: the track's time origin), and self samples."""
    ms: dict[str, float] = {}
    n: dict[str, int] = {}
    weights = sample_weights(trace, interval).copy()
    if stops:
        start = origin + trace.sample_time
        end = start + weights
        for a, b in stops:
            weights -= np.clip(np.minimum(end, b) - np.maximum(start, a), 0.0, None)
    for s, w in zip(trace.sample_stack.tolist(), weights.tolist(), strict=True):
        if s != NONE:
            name = trace.frames[trace.stack_frame[s]].name
            ms[name] = ms.get(name, 0.0) + w
            n[name] = n.get(name, 0) + 1
    return ms, n


@contextmanager
def busy_processes() -> Iterator[None]:
    """Each core busy with two processes that spin for 60 s at most, killed on the way out."""
    n = 2 * (os.cpu_count() or 2)
    code = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def throttle(p: subprocess.Popen, done: threading.Event, stops: list[tuple[float, float]],
             limit_s: float = 60.0) -> None:
    """What `cpulimit` does: stop the process 50 ms, continue it 50 ms, until it ends (or
    `limit_s` passed); always leaves it continued. Each stop's window (epoch ms, from
    before the SIGSTOP to after the SIGCONT) is appended to `stops`."""
    end = time.monotonic() + limit_s
    try:
        while not done.is_set() and time.monotonic() < end and p.poll() is None:
            a = time.time() * 1e3
            os.kill(p.pid, signal.SIGSTOP)
            done.wait(0.05)
            os.kill(p.pid, signal.SIGCONT)
            stops.append((a, time.time() * 1e3))
            done.wait(0.05)
    except ProcessLookupError:
        pass
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)


def record_loaded(tmp_path: Path, run: int, load_kind: str, clock: str) -> dict:
    script = tmp_path / "sorts.js"
    script.write_text(SCRIPT.replace("ROUNDS", str(ROUNDS)))
    out = tmp_path / f"{load_kind}-{clock}-{run}.jsprof.json"
    stops: list[tuple[float, float]] = []
    cmd = [sys.executable, "-m", "jsprof.cli", "record", "--clock", clock, "-o", str(out),
           str(script)]
    if load_kind == "busy":
        with busy_processes():
            subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    else:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        done = threading.Event()
        t = threading.Thread(target=throttle, args=(p, done, stops))
        t.start()
        try:
            _, err = p.communicate(timeout=120)
        finally:
            done.set()
            t.join()
        assert p.returncode == 0, err
    track = load(out).tracks[0]
    ms, n = self_ms(track.trace, track.sample_interval)
    # the wall clock's milliseconds while the process ran: a stop's 50 ms weigh on the
    # sample where the thread resumed (the caller's when it stopped in the native sort):
    # the test's own stops are not a function's time
    # (the CPU clock's weights are CPU ms, its stops no one's already)
    run_ms, _ = self_ms(track.trace, track.sample_interval, track.time_origin,
                        stops if clock == "wall" else ())
    return {"self": ms, "run": run_ms, "samples": n, "meta": track.meta}


@pytest.mark.parametrize("clock", ["wall", "cpu"])
@pytest.mark.parametrize("load_kind", ["busy", "stopped"])
def test_comparators_keep_their_time_under_load(tmp_path: Path, load_kind: str,
                                                clock: str) -> None:
    for run in range(RUNS):
        got = record_loaded(tmp_path, run, load_kind, clock)
        counts, samples, meta = got["self"], got["samples"], got["meta"]
        # stopped for 50 ms at a time: on the wall clock those ticks are counted as lost;
        # the CPU clock makes none then
        if clock == "cpu":
            assert meta["offCpuDroppedTicks"] == 0, meta
        elif load_kind == "stopped":
            # the 50 ms stops show as ticks taken late: lost where the thread resumed at a
            # poll, kept (deferred) where it resumed at a built-in's return, whose stack
            # the whole stop had; which of the two a run's stops met varies (6 runs here:
            # 0-148 lost, 0-147 deferred), never neither
            assert meta["offCpuDroppedTicks"] + meta["deferredSamples"] > 0, meta
        for caller, comparator in PAIRS:
            # The ticks: quiet (and on the CPU clock) a caller has 2-9 % of its
            # comparator's samples (the native sort between the calls). Before, the
            # comparators with a built-in call lost theirs to the caller under load
            # (stopped: sortSync 1,145 ms against cmpSync's 1,019; busy: 1,998 against
            # 211), and on the wall clock the leaf comparators (no loop, no call) had none
            # at all, loaded or not (leafSync 0 of ~60 samples). A third is far from both.
            assert counts.get(comparator, 0) >= 20, (run, counts, meta)
            assert samples.get(caller, 0) * 3 <= samples.get(comparator, 0), (
                run, caller, comparator, samples, counts, meta)
            # The report's milliseconds. The CPU clock's are the ticks': a third. On the
            # wall clock a stop (50 ms) weighs on one sample, a caller's when it stopped
            # in the native sort (until issue 32's last pass: the sample before it, a
            # caller's as often as its share of the samples; 10 runs: 2 of 40 pairs had
            # one on the caller, 64 ms of sortSync's 3 samples beside cmpSync's 153 ms in
            # 72; CI once: a caller 102 ms against its comparator's 87): the test's
            # stops, not the script's. So the wall clock's are compared as the time the process
            # ran: each sample's span less the test's own stops. Below the comparator's
            # (the symptom: sortAfterAwait 172 ms against 103).
            if clock == "cpu":
                assert counts.get(caller, 0) * 3 <= counts[comparator], (
                    run, caller, comparator, counts, samples, meta)
            else:
                ran = got["run"]
                assert ran.get(caller, 0) < ran[comparator], (
                    run, caller, comparator, ran, counts, samples, meta)


# Two functions in turn, a timer's wait, a callback: each function's time measured from
# inside by performance.now() (`took`). f is a built-in's work (indexOf on 128 KB: no poll,
# no allocation, so no collection or freeing charged elsewhere), g plain bytecode (it
# polls at its loop's jumps) shorter than the interval, so the sample before a stop in g
# is often f's.
TWO_AND_A_TIMER = """\
const s = 'abcdefgh'.repeat(1 << 14);
function f() { return s.indexOf('abcdefgi'); }
function g() { let x = 0; for (let i = 0; i < 40000; i++) x += i * i; return x; }
function h() { const t = performance.now(); while (performance.now() - t < 20) {} }
globalThis.took = {f: 0, g: 0, h: 0, set: 0, woke: 0};
function rounds(n) {
  for (let i = 0; i < n; i++) {
    let t = performance.now(); f(); took.f += performance.now() - t;
    t = performance.now(); g(); took.g += performance.now() - t;
  }
}
rounds(600);
took.set = performance.now();
setTimeout(() => {
  took.woke = performance.now();
  h(); took.h = performance.now() - took.woke;
  rounds(600);
}, 100);
"""


@pytest.mark.under_load
def test_a_stop_is_charged_where_the_thread_stood(tmp_path: Path) -> None:
    """The wall clock beside busy loops: the report's milliseconds (each sample weighs the
    gap to the next) follow performance.now()'s. A sample is taken at the first poll after
    its due time, so after a stop where the thread resumed, which is where it stood still;
    its ticks due meanwhile are lost (offCpuDroppedTicks). The sampler dropped the earliest
    of them, so the gap was the sample's before, often the other function's: f's share
    0.045-0.052 over performance.now()'s at load ~25 (the bound 0.017-0.022: 2 of 2 runs
    fail; with a 64 KB indexOf 0.085-0.177 over at load ~22); now it keeps the first and
    drops those after: within -0.028..+0.022 (the noise of gap weights, both signs). The
    timer's wait stays the idle samples' (the event loop records one per tick while it
    sleeps), not the callback's after it."""
    import json

    from jsprof.engines.quickjs import QuickJS

    interval = 1.0
    with busy_processes():
        rt = QuickJS()
        session = rt.profiler(sample_interval=interval)
        rt.eval(TWO_AND_A_TIMER, "two.js")
        trace = session.stop()
    took = json.loads(rt.eval("JSON.stringify(took)"))
    # Each sample weighs the gap to the next, as the report weighs it, but without its cap
    # (a gap past 20 intervals, at least 100 ms, is lost time there, no one's): beside busy
    # loops at load ~28 a run had 2.5 s of such gaps in 28 s, time performance.now()
    # counts in f or g. Where the sampler puts a stop is what is tested, whatever its length.
    t = trace.sample_time
    weights = np.diff(t, append=t[-1] + interval)
    idle = trace.sample_stack == NONE
    if trace.sample_marker is not None:
        idle &= trace.sample_marker == NONE
    ms: dict[str, float] = {}
    n: dict[str, int] = {}
    for s, w in zip(trace.sample_stack.tolist(), weights.tolist(), strict=True):
        if s != NONE:
            name = trace.frames[trace.stack_frame[s]].name
            ms[name] = ms.get(name, 0.0) + w
            n[name] = n.get(name, 0) + 1
    k = n.get("f", 0) + n.get("g", 0)
    assert k >= 200, (n, session.meta)
    # Each sample of f or g a draw of which one ran, weighing its gap: 3 sd of that share
    # with Kish's effective sample size (sum w)^2 / sum w^2 of those weights, not k. The
    # gaps beside busy loops are 1 ms to tens of ms, so a share of milliseconds is noisier
    # than a share of samples: k_eff ~ k/3 at load ~10-20, where errors of -0.028..+0.022
    # came with a binomial bound of k (0.025-0.034) and failed 1 run of ~10 (stop 48's
    # test-load). 600 rounds a phase, not 300, keep the bound (~0.035) under the old bug's
    # +0.045..+0.177.
    fg = np.array([s != NONE and trace.frames[trace.stack_frame[s]].name in ("f", "g")
                   for s in trace.sample_stack.tolist()], dtype=bool)
    w = weights[fg]
    k_eff = float(w.sum()) ** 2 / float((w * w).sum())
    want = took["f"] / (took["f"] + took["g"])
    tol = 3 * (want * (1 - want) / k_eff) ** 0.5
    got = ms.get("f", 0.0) / (ms.get("f", 0.0) + ms.get("g", 0.0))
    assert abs(got - want) <= tol, (got, want, tol, k, k_eff, ms, took, session.meta)
    # The wait: between setTimeout and the callback's first line the samples are idle but
    # for an interval at each end (the script's last statement, the callback's entry),
    # and the callback's h weighs its own time, within an interval at each end.
    wait = (t >= took["set"]) & (t < took["woke"])
    busy_ms = float(weights[wait & ~idle].sum())
    idle_ms = float(weights[wait & idle].sum())
    assert busy_ms <= 2 * interval, (busy_ms, idle_ms, took)
    assert idle_ms >= took["woke"] - took["set"] - 2 * interval, (idle_ms, took)
    assert abs(ms.get("h", 0.0) - took["h"]) <= 2 * interval, (ms, took)


@pytest.mark.under_load
def test_slower_concurrent_sessions_charge_a_stop_where_the_thread_stood() -> None:
    """Sessions at 3 ms and 10 ms beside a 1 ms one on one runtime, beside busy loops:
    each keeps the 1 ms sampler's ticks a sampler at its own interval would have taken,
    so its f share by the report's milliseconds follows performance.now()'s, and the
    1 ms session's, which saw the same stops (and follows performance.now()'s:
    test_a_stop_is_charged_where_the_thread_stood). A stop's first tick stands for the
    stop (restamped where it began, the ticks after it dropped): thinning by times kept
    the tick after it, so the stop weighed on the slower session's sample before it,
    and the slower session's grid restarted where the thread resumed. 600 rounds a side,
    beside 4 + 4 busy loops at load 20-32, f's share minus the 1 ms session's (bound:
    3 sd of each sample a draw of its span, below):
    main 3 ms -0.018 (0.0066), 10 ms -0.044 (0.0125), once -0.002 and +0.0065 (main is
    not always off); minus performance.now()'s (3 Kish sd): main 3 ms -0.074..-0.10
    (0.038), 10 ms -0.043..-0.17 (0.040-0.042); this tree within 0.0031 of the 1 ms
    session's (bounds 0.008-0.015) and 0.007 of performance.now()'s (0.044-0.064)."""
    import json

    from jsprof.engines.quickjs import QuickJS

    with busy_processes():
        rt = QuickJS()
        sessions = {iv: rt.profiler(sample_interval=iv) for iv in (1.0, 3.0, 10.0)}
        # g's rounds of random length (1-3x): rounds of one length (~11 ms beside busy
        # loops) strobed the 10 ms session's grid, its samples erring alike (stop 49: its
        # share 0.04-0.08 off with the 3 ms one's within 0.0001)
        rt.eval(TWO_AND_A_TIMER.replace(
            "let x = 0; for (let i = 0; i < 40000;",
            "let x = 0, n = 20000 + 40000 * Math.random(); for (let i = 0; i < n;"), "two.js")
        # the 1 ms one first: the sampler goes on at 3 ms, then 10 ms
        traces = {iv: s.stop() for iv, s in sessions.items()}
    took = json.loads(rt.eval("JSON.stringify(took)"))
    want = took["f"] / (took["f"] + took["g"])

    def columns(iv: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """times, weights (the gap to the next, without the report's cap, as the test
        above), and which samples are f's and g's"""
        trace = traces[iv]
        t = trace.sample_time
        names = np.array([
            "" if s == NONE else trace.frames[trace.stack_frame[s]].name
            for s in trace.sample_stack.tolist()
        ])
        return t, np.diff(t, append=t[-1] + iv), names == "f", names == "g"

    # the 1 ms session's f and g ms up to any time (each sample's weight spread over its
    # span): how much of each the 1 ms session saw in a slower session's sample's span
    t1, w1, f1, g1 = columns(1.0)
    ends = np.append(t1, t1[-1] + 1.0)
    cum_f = np.append(0.0, np.cumsum(np.where(f1, w1, 0.0)))
    cum_g = np.append(0.0, np.cumsum(np.where(g1, w1, 0.0)))
    share1 = float(w1[f1].sum() / w1[f1 | g1].sum())
    seen = {}
    for iv in (3.0, 10.0):
        t, w, f, g = columns(iv)
        fg = f | g
        both = w[fg]
        got = float(w[f].sum() / both.sum())
        # Against performance.now(): the share of gap-weighted samples is as noisy as
        # sum(w)^2 / sum(w^2) of them drawn alike (Kish's effective sample size), fewer
        # than their count when the gaps differ (a stop's sample weighs the whole stop).
        ess = float(both.sum() ** 2 / (both**2).sum())
        kish = 3 * (want * (1 - want) / ess) ** 0.5
        # Against the 1 ms session: each sample is a draw of its span as the 1 ms one saw
        # it, f with the span's f share p (a span inside one stop or one call: p 0 or 1,
        # no noise); the share's variance sum(w^2 p (1-p)) / sum(w)^2.
        span_f = np.interp(t + w, ends, cum_f) - np.interp(t, ends, cum_f)
        span_g = np.interp(t + w, ends, cum_g) - np.interp(t, ends, cum_g)
        p = (span_f / np.maximum(span_f + span_g, 1e-9))[fg]
        spans = 3 * float((both**2 * p * (1 - p)).sum()) ** 0.5 / float(both.sum())
        seen[iv] = {"vs now": (round(got - want, 4), round(kish, 4)),
                    "vs 1 ms": (round(got - share1, 4), round(spans, 4)),
                    "samples": (len(both), round(ess))}
        assert ess >= 100, (iv, seen, sessions[iv].meta)
    # Not the 10 ms session against the 1 ms one: its spans hold about one f/g round each,
    # so neighbouring samples err alike and the independent-draws bound is too tight for
    # it (random rounds: -0.015..+0.025 against 0.032-0.034 in 5 runs; rounds of one length
    # strobed it: +0.0435 against 0.0395 in stop 49's CI). Main fails the 3 ms session's
    # two checks (-0.018 against 0.0066; -0.074..-0.10 against 0.038), which hold the
    # test's power; the 10 ms one against performance.now() (Kish) stays.
    for iv, key in ((3.0, "vs now"), (3.0, "vs 1 ms"), (10.0, "vs now")):
        off, bound = seen[iv][key]
        assert abs(off) <= bound, (iv, key, seen, round(share1 - want, 4), took,
                                   sessions[iv].meta)
    # A session's samples stay its interval apart less half a tick of the sampler: 1 ms
    # while the 1 ms session runs, then 3 ms (a gap's sample at its due time). Before,
    # the 3 ms session's held ticks 1 ms apart, taken where the thread resumed from a
    # stop, due on the 1 ms grid, once the 1 ms session had stopped.
    for iv, half in ((1.0, 0.5), (3.0, 0.5), (10.0, 1.5)):
        gaps = np.diff(traces[iv].sample_time)
        assert float(gaps.min()) >= iv - half - 1e-6, (iv, np.sort(gaps)[:5])
