"""`jsprof budget BASE NEW`: is NEW slower than BASE by more than the budget allows?

One run against one run is noise on a shared machine, so the two sides run in interleaved
rounds (BASE then NEW, NEW then BASE, ...: drift and load fall on both alike), each run
recorded by the engine's ordinary `record` entry point. A run's number is its CPU ms on
QuickJS (`--clock cpu`: the runtime's CPU time, what load and waiting do not inflate), its
busy ms (all samples but `(idle)`) on Node and Chromium, whose V8 samples wall time only,
or a page's `performance.measure` duration (`measure=`).

The test is on the logarithms of the runs' numbers (load stretches a run by a factor: see
`_judge`): the Hodges-Lehmann shift of NEW's against BASE's with its Mann-Whitney (Moses)
interval (analysis/ranks.py), distribution-free under the shift model, so the change is a
ratio, read as a relative change in percent. After `min_rounds` and then whenever the
rounds have grown by a fifth, the interval is looked at; each look is at level
1 - 0.05 / L for the L looks the round limit allows (Bonferroni), so the interval reported
is a 95 % interval whichever look stopped the run (stopping when it looks decided would
otherwise make a false "slower" likelier with every look). With the allowed slowdown B
percent (`max_slower`, or `max_slower_ms` of BASE's time, the larger of the two when both
are given):

    slower   the whole interval above +B      NEW is slower than the budget allows
    faster   the whole interval below -B      NEW is faster by more than B
    same     the whole interval inside [-B, +B]
    unsure   none of these when the rounds or the time ran out

When a verdict is reached the rounds stop. Then every function's self ms per run is tested
as `fleet regressions` tests it, Welch's t against its permutation distribution (a p-value
per function, which Benjamini-Hochberg needs), on log(ms + one sample interval) (a run may
not sample a function at all), functions with at least 0.5 % of either side's time;
Benjamini-Hochberg at a 5 % false discovery rate picks the ones that changed, and their
intervals are at the level that keeps the false coverage rate at 5 % (Benjamini-Yekutieli);
they are listed with the one that explains most of the change first.

BASE and NEW are usually two files (two builds, two checkouts): functions match by name
and by their script's path relative to its side's folder, and BASE's script itself matches
NEW's whatever the two are called.

A run whose number is 0 (no sample outside waiting: the work was shorter than the sampling
interval, or on a loaded machine the engine hardly ran while it was recorded) measured
nothing, so it is left out of the tests, and the summary says how many were; before, one
such run among hundreds left every look "unsure" and named no function.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .analysis.diff import NameKey, ResourceMatcher, function_times
from .analysis.ranks import shift_interval
from .analysis.stats import Change, bh_picked, changes
from .errors import EngineError, JSError, UsageError
from .trace import Recording, Track

VERDICTS = ("faster", "slower", "same", "unsure")
# The exit status of `jsprof budget` per verdict (2 is jsprof's own error, as everywhere).
EXIT_CODES = {"same": 0, "faster": 0, "slower": 1, "unsure": 3}
ALPHA = 0.05  # 95 % intervals: the verdict's (over all its looks) and the functions' FCR
MIN_SHARE_PCT = 0.5  # a function tested has at least this share of either side's time
GROWTH = 1.2  # the rounds grow by a fifth between looks
DEFAULT_MAX_SLOWER = 5.0
DEFAULT_MIN_ROUNDS = 10
DEFAULT_MAX_ROUNDS = 300
DEFAULT_TIME_CAP = 120.0  # seconds
IDLE = "(idle)"  # waiting, not work: not in a run's number on the wall clock


def looks(min_rounds: int, max_rounds: int) -> list[int]:
    """The rounds after which the interval is looked at: `min_rounds`, then each time a
    fifth more (at least one), and `max_rounds` last."""
    out = [min_rounds]
    while out[-1] < max_rounds:
        out.append(min(max_rounds, max(out[-1] + 1, math.ceil(out[-1] * GROWTH))))
    return out


def look_level(min_rounds: int, max_rounds: int) -> float:
    """Each look's level: ALPHA over the planned looks and one more, the one the time cap
    may force between planned looks (Bonferroni: 95 % whichever look stops the run)."""
    return ALPHA / (len(looks(min_rounds, max_rounds)) + 1)


@dataclass
class Run:
    """One run of one side: its number (ms) and its functions' self ms."""

    ms: float
    self_ms: dict[NameKey, float]
    rec: Recording


@dataclass
class Ratio:
    """NEW's runs against BASE's: BASE's geometric mean (ms per run), it times the estimated
    ratio (the Hodges-Lehmann shift of the logarithms: see `_judge`), and the ratio's
    interval at one look's level (None: an end the runs do not bound)."""

    before: float
    after: float
    lo: float | None
    hi: float | None

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before > 0 else math.inf


@dataclass
class FunctionChanged:
    """One function's self ms per run on each side: the test is on log(ms + `eps`), one
    sample interval added so that a run where it was not sampled counts (see `_judge` on
    why logarithms); before/after are the matching geometric means (ms per run)."""

    key: NameKey
    test: Change  # on the logarithms
    eps: float
    q: float
    level: float
    explains: float = 0.0  # its change over the whole change (both in ms per run)

    @property
    def before(self) -> float:
        return math.exp(self.test.before) - self.eps

    @property
    def after(self) -> float:
        return math.exp(self.test.after) - self.eps

    def json(self) -> dict:
        c = self.test
        base = self.before + self.eps
        lo, hi = c.ms_interval(self.level)  # of the logarithms' difference
        r_lo = math.exp(lo) if math.isfinite(lo) else None
        r_hi = math.exp(hi) if math.isfinite(hi) else None
        return {
            "name": self.key.label(), "resource": self.key.resource, "line": self.key.line,
            "beforeMsPerRun": round(self.before, 3), "afterMsPerRun": round(self.after, 3),
            "changeMsPerRun": round(self.after - self.before, 3),
            "changeMsCi": [None if r is None else round(base * (r - 1.0), 3)
                           for r in (r_lo, r_hi)],
            "changePct": round(100.0 * (math.exp(c.diff) - 1.0), 1),
            "changePctCi": [_pct(r_lo), _pct(r_hi)],
            "explainsPct": round(100.0 * self.explains, 1),
            "pValue": float(f"{c.p:.3g}"), "qValue": float(f"{self.q:.3g}"),
        }


def _pct(r: float | None) -> float | None:
    return None if r is None else round(100.0 * (r - 1.0), 2)


@dataclass
class BudgetResult:
    """What `budget` found: the verdict, the interval of NEW's relative change (percent)
    and the rounds, the functions that changed, and every run's recording (for the flame
    diff)."""

    verdict: str
    base: str
    new: str
    engine: str
    clock: str
    metric: str
    budget_pct: float
    max_slower: float | None
    max_slower_ms: float | None
    rounds: int
    min_rounds: int
    max_rounds: int
    time_cap: float
    elapsed: float
    stopped_by: str
    test: Ratio | None
    level: float  # each look's level (alpha / looks)
    base_runs: list[Run] = field(repr=False, default_factory=list)
    new_runs: list[Run] = field(repr=False, default_factory=list)
    changed: list[FunctionChanged] = field(default_factory=list)
    match: ResourceMatcher | None = field(repr=False, default=None)
    flame_path: str | None = None  # where the pytest fixture wrote the flame diff
    unmeasured: int = 0  # runs left out of the tests: their number was 0 (see the module)

    def check(self, unsure_ok: bool = True) -> None:
        """Raise AssertionError with the summary when NEW is slower than the budget allows
        (and when the verdict is unsure, with `unsure_ok=False`)."""
        if self.verdict == "slower" or (self.verdict == "unsure" and not unsure_ok):
            where = f"\nflame diff: {self.flame_path}" if self.flame_path else ""
            raise AssertionError(self.summary() + where)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def interval(self) -> tuple[float | None, float | None]:
        """The 95 % interval of NEW's change relative to BASE, in percent (None: an end
        the runs do not bound)."""
        if self.test is None:
            return None, None
        return _pct(self.test.lo), _pct(self.test.hi)

    @property
    def change_pct(self) -> float | None:
        t = self.test
        return None if t is None or t.before <= 0 else 100.0 * (t.ratio - 1.0)

    def json(self) -> dict:
        t = self.test
        lo, hi = self.interval
        ms_ci: list[float | None] = [None, None]
        if t is not None:
            ms_ci = [None if r is None else round(t.before * (r - 1.0), 3) for r in (t.lo, t.hi)]
        cp = self.change_pct
        return {
            "verdict": self.verdict,
            "base": self.base, "new": self.new, "engine": self.engine, "clock": self.clock,
            "metric": self.metric,
            "beforeMsPerRun": None if t is None else round(t.before, 3),
            "afterMsPerRun": None if t is None else round(t.after, 3),
            "changePct": None if cp is None else round(cp, 2),
            "interval": [lo, hi],
            "changeMsPerRun": None if t is None else round(t.after - t.before, 3),
            "changeMsCi": ms_ci,
            "ciLevel": 1.0 - ALPHA,
            "budgetPct": round(self.budget_pct, 3),
            "maxSlowerPct": self.max_slower, "maxSlowerMs": self.max_slower_ms,
            "rounds": self.rounds, "minRounds": self.min_rounds, "maxRounds": self.max_rounds,
            "timeCapS": self.time_cap, "elapsedS": round(self.elapsed, 1),
            "stoppedBy": self.stopped_by,
            "unmeasuredRuns": self.unmeasured,
            "changed": [c.json() for c in self.changed],
        }

    def summary(self) -> str:
        """The readable text: the verdict and why, then the functions that changed."""
        from .render.budget import summary_text

        return summary_text(self)

    def recordings(self) -> tuple[Recording, Recording]:
        """BASE's and NEW's runs, each side's as one Recording (a track per round)."""
        def merged(runs: list[Run]) -> Recording:
            tracks = []
            for i, r in enumerate(runs, 1):
                for t in r.rec.tracks:
                    name = f"round {i}" if len(r.rec.tracks) == 1 else f"round {i} {t.name}"
                    tracks.append(Track(name, t.trace, t.time_origin, t.engine,
                                        t.sample_interval, t.requested_interval, t.spans,
                                        t.meta))
            return Recording(tracks)

        return merged(self.base_runs), merged(self.new_runs)


def side_matcher(base: str, new: str) -> ResourceMatcher:
    """Resources matched across two sides: paths relative to each side's folder (pages
    and URLs as they are), and BASE's script is NEW's whatever their names."""
    dirs = {d for d in (_folder(base), _folder(new)) if d}
    m = ResourceMatcher(sorted(dirs, key=len, reverse=True))
    if "://" not in base and "://" not in new:
        b = m.own_key(os.path.abspath(base))
        n = m.own_key(os.path.abspath(new))
        if b != n:
            m.aliases[b] = n
    return m


def _folder(p: str) -> str | None:
    return None if "://" in p else os.path.dirname(os.path.abspath(p))


def measure_until(name: str) -> str:
    """The page's ending for a `performance.measure` metric: once the page has made it."""
    import json

    return f"js:performance.getEntriesByName({json.dumps(name)}, 'measure').length > 0"


def run_number(rec: Recording, times: dict[NameKey, tuple[float, float]], total: float,
               measure: str | None) -> float:
    """A run's number in ms: its `performance.measure` duration (`measure`, summed over
    the entries of that name), else all its samples' time but waiting's (on the CPU clock
    there is none)."""
    if measure is not None:
        got = [float(m["duration"]) for t in rec.tracks for m in t.meta.get("measures") or ()
               if isinstance(m, dict) and m.get("name") == measure]
        if not got:
            raise EngineError(
                f"the page made no performance.measure named {measure!r} (check the name; "
                "the page ends once it made one)"
            )
        return sum(got)  # a measure made more than once: all of them
    return total - times.get(NameKey(IDLE, None), (0.0, 0.0))[0]


class Sides:
    """Runs one side: `record` with the options fixed once."""

    def __init__(self, engine: str, sample_interval: float, clock: str, args: Sequence[str],
                 until: str | None, measure: str | None, match: ResourceMatcher,
                 duration: float | None) -> None:
        from .record import record

        self._record = record
        self.engine, self.sample_interval, self.clock = engine, sample_interval, clock
        self.args, self.until, self.measure, self.match = args, until, measure, match
        self.duration = duration

    def run(self, path: str, which: str, round_no: int) -> Run:
        kw: dict[str, Any] = {"engine": self.engine, "sample_interval": self.sample_interval,
                              "args": self.args, "clock": self.clock}
        if self.until is not None:
            kw["until"] = self.until
        if self.duration is not None:
            kw["duration"] = self.duration
        try:
            rec = self._record(path, **kw)
        except JSError as e:
            raise EngineError(
                f"{path}: {which} failed in round {round_no}: {e.name}: {e} (budget compares "
                "runs that end well; fix it and run again)"
            ) from None
        problem = rec.tracks[0].meta.get("untilProblem") if rec.tracks else None
        if problem:  # a page's --until that can never end it: every round would be junk
            raise EngineError(f"{path}: {which}, round {round_no}: {problem}")
        times, total = function_times(rec, None, self.match, True)
        ms = run_number(rec, times, total, self.measure)
        return Run(ms, {k: s for k, (s, _) in times.items()}, rec)


def budget(
    base: str | os.PathLike[str],
    new: str | os.PathLike[str],
    engine: str = "quickjs",
    max_slower: float | None = None,
    max_slower_ms: float | None = None,
    min_rounds: int = DEFAULT_MIN_ROUNDS,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    time_cap: float = DEFAULT_TIME_CAP,
    sample_interval: float = 1.0,
    clock: str | None = None,
    args: Sequence[str] = (),
    until: str | None = None,
    measure: str | None = None,
    duration: float | None = None,
    on_round: Callable[[int, Run, Run], None] | None = None,
) -> BudgetResult:
    """Run BASE and NEW in interleaved rounds until the verdict is decided (see the
    module's rule) or `max_rounds` / `time_cap` seconds run out. `max_slower`: the allowed
    slowdown in percent (5 when neither it nor `max_slower_ms` is given); `max_slower_ms`:
    an allowed slowdown in ms per run (the larger of the two applies). `clock`: "cpu" on
    QuickJS by default (its CPU time), "wall" elsewhere. `measure` (Chromium): a
    `performance.measure` name whose duration is the page's number. `on_round(i, base_run,
    new_run)` is called after each round (a progress line)."""
    from .engines.registry import engine_spec

    base, new = os.fspath(base), os.fspath(new)
    spec = engine_spec(engine)
    if clock is None:
        clock = "cpu" if spec.takes("clock") else "wall"
    spec.check_clock(clock)
    for p in (base, new):
        spec.check(p)
    if max_slower is None and max_slower_ms is None:
        max_slower = DEFAULT_MAX_SLOWER
    if max_slower is not None and not 0 <= max_slower < 1000:
        raise UsageError(f"--max-slower {max_slower}: expected a percentage from 0 to 1000")
    if max_slower_ms is not None and not 0 <= max_slower_ms < math.inf:
        raise UsageError(f"--max-slower-ms {max_slower_ms}: expected ms, 0 or more")
    if not 2 <= min_rounds <= max_rounds:
        raise UsageError(
            f"--min-rounds {min_rounds} --max-rounds {max_rounds}: need 2 <= min <= max"
        )
    if not time_cap > 0:
        raise UsageError(f"--time-cap {time_cap}: expected seconds, more than 0")
    if measure is not None:
        if not spec.takes("until"):
            raise UsageError(f"--measure reads a page's performance.measure; use --engine "
                             f"chromium (--engine {engine} runs {spec.runs})")
        if until is None:
            until = measure_until(measure)
        if duration is None:
            duration = time_cap  # a page that never makes the measure ends, and says so
    match = side_matcher(base, new)
    sides = Sides(engine, sample_interval, clock, args, until, measure, match, duration)
    plan = looks(min_rounds, max_rounds)
    level = look_level(min_rounds, max_rounds)
    b_runs: list[Run] = []
    n_runs: list[Run] = []
    started = time.monotonic()
    verdict, stopped_by, test, budget_pct = "unsure", "max rounds", None, 0.0
    next_look, looked_at = 0, 0
    while len(b_runs) < max_rounds:
        i = len(b_runs) + 1
        if i > 1:
            spent = time.monotonic() - started
            if spent + spent / (i - 1) > time_cap:  # another round would pass the cap
                stopped_by = "time cap"
                break
        # Alternate which side goes first, so a round's drift falls on both alike.
        if i % 2:
            b = sides.run(base, "BASE", i)
            n = sides.run(new, "NEW", i)
        else:
            n = sides.run(new, "NEW", i)
            b = sides.run(base, "BASE", i)
        b_runs.append(b)
        n_runs.append(n)
        if on_round is not None:
            on_round(i, b, n)
        if next_look < len(plan) and i >= plan[next_look]:
            next_look += 1
            looked_at = i
            test, budget_pct, verdict = _judge(b_runs, n_runs, max_slower, max_slower_ms, level)
            if verdict != "unsure":
                stopped_by = "decided"
                break
    if stopped_by != "decided" and looked_at != len(b_runs):
        # The time cap came between planned looks: the one look more (planned for).
        test, budget_pct, verdict = _judge(b_runs, n_runs, max_slower, max_slower_ms, level)
        if verdict != "unsure":
            stopped_by = "decided"
    elapsed = time.monotonic() - started
    if not budget_pct:
        budget_pct = max_slower or 0.0
    res = BudgetResult(
        verdict, base, new, engine, clock,
        _metric(engine, clock, measure), budget_pct, max_slower, max_slower_ms,
        len(b_runs), min_rounds, max_rounds, time_cap, elapsed, stopped_by, test, level,
        b_runs, n_runs, match=match,
        unmeasured=sum(1 for r in (*b_runs, *n_runs) if not r.ms > 0),
    )
    res.changed = functions_changed(b_runs, n_runs, sample_interval)
    return res


def _metric(engine: str, clock: str, measure: str | None) -> str:
    if measure is not None:
        return f"performance.measure {measure!r} ms"
    return "CPU ms per run" if clock == "cpu" else "busy wall ms per run (samples not idle)"


def _measured(runs: list[Run]) -> list[Run]:
    """The runs that measured something: a 0 (no sample outside waiting) is no number of
    the work's time, and its logarithm none at all (see the module)."""
    return [r for r in runs if r.ms > 0]


def _judge(b_runs: list[Run], n_runs: list[Run], max_slower: float | None,
           max_slower_ms: float | None, level: float) -> tuple[Ratio | None, float, str]:
    """The ratio of the runs' numbers, the allowed slowdown (percent) and the verdict.

    The test is on the runs' logarithms: a slowdown is a factor, and on a loaded machine
    a run's time is stretched by one (a run 3x as long as the rest is common under load,
    one 1/3 as long never). The interval is the rank one (analysis/ranks.py): the
    Hodges-Lehmann shift of NEW's logarithms against BASE's with its Mann-Whitney (Moses)
    interval, exponentiated to a ratio. Its assumption is the shift model: NEW's runs are
    BASE's times one factor, the load's stretch falling on both alike. It replaced Welch's
    t on the logarithms (issue 37): under load the runs are heavy tailed (8 ms and 151 ms
    in one A/A pair of page runs), and a t interval's width grows with such a run's
    square, so a page slowed 4x was still "unsure" after 27 rounds where the rank interval
    decided at 6 (benchmarks/RESULTS.md, budget_rank). BASE's geometric mean is `before`;
    `after` is it times the estimated ratio."""
    b = np.log([r.ms for r in _measured(b_runs)])
    n = np.log([r.ms for r in _measured(n_runs)])
    if len(b) < 2 or len(n) < 2:
        return None, 0.0, "unsure"
    s = shift_interval(b, n, level)
    if s is None:
        return None, 0.0, "unsure"
    before = math.exp(float(b.mean()))
    r = Ratio(before, before * math.exp(s.estimate),
              None if s.lo is None else math.exp(s.lo),
              None if s.hi is None else math.exp(s.hi))
    allowed = max_slower or 0.0
    if max_slower_ms is not None and before > 0:
        allowed = max(allowed, 100.0 * max_slower_ms / before)
    if r.lo is None or r.hi is None:
        return r, allowed, "unsure"
    lo_pct, hi_pct = 100.0 * (r.lo - 1.0), 100.0 * (r.hi - 1.0)
    if lo_pct > allowed:
        return r, allowed, "slower"
    if hi_pct < -allowed:
        return r, allowed, "faster"
    if lo_pct >= -allowed and hi_pct <= allowed:
        return r, allowed, "same"
    return r, allowed, "unsure"


def functions_changed(b_runs: list[Run], n_runs: list[Run], sample_interval: float = 1.0,
                      alpha: float = ALPHA) -> list[FunctionChanged]:
    """The functions whose self ms per run changed (Benjamini-Hochberg at `alpha` over the
    functions tested), the one that explains most of the whole change first."""
    b_runs, n_runs = _measured(b_runs), _measured(n_runs)
    if len(b_runs) < 2 or len(n_runs) < 2:
        return []
    keys: list[NameKey] = []
    seen: set[NameKey] = set()
    for r in (*n_runs, *b_runs):
        for k in r.self_ms:
            if k not in seen and not (k.resource is None and k.name == IDLE):
                seen.add(k)
                keys.append(k)
    if not keys:
        return []
    b = np.array([[r.self_ms.get(k, 0.0) for k in keys] for r in b_runs])
    n = np.array([[r.self_ms.get(k, 0.0) for k in keys] for r in n_runs])
    tb, tn = b.sum(), n.sum()
    share = np.maximum(b.sum(axis=0) / tb if tb > 0 else 0.0,
                       n.sum(axis=0) / tn if tn > 0 else 0.0)
    cols = [j for j in range(len(keys)) if 100.0 * share[j] >= MIN_SHARE_PCT]
    eps = sample_interval if sample_interval > 0 else 0.1
    got = changes(np.log(b[:, cols] + eps), np.log(n[:, cols] + eps)) if cols else None
    if not got:
        return []
    picked, q = bh_picked([c.p for c in got], alpha)
    m = len(got)
    level = alpha * sum(picked) / m  # Benjamini-Yekutieli's false coverage level
    out = [FunctionChanged(keys[j], c, eps, qv, level)
           for j, c, pick, qv in zip(cols, got, picked, q, strict=True) if pick]
    # The whole change as the verdict shows it (`_judge`'s Ratio: BASE's geometric mean
    # times the Hodges-Lehmann ratio), not NEW's geometric mean minus BASE's: a function
    # said to explain 69 % of a change it was 255 % of (review12).
    lb, ln = np.log([r.ms for r in b_runs]), np.log([r.ms for r in n_runs])
    before = math.exp(float(lb.mean()))
    s = shift_interval(lb, ln, ALPHA)
    whole = (before * math.expm1(s.estimate) if s is not None
             else math.exp(float(ln.mean())) - before)
    for f in out:
        f.explains = (f.after - f.before) / whole if whole else 0.0
    sign = 1.0 if whole >= 0 else -1.0
    # The one that explains most first: the largest change in the whole change's direction.
    out.sort(key=lambda f: (-sign * (f.after - f.before), f.key.name))
    return out


def flame_diff(res: BudgetResult, title: str | None = None) -> str:
    """The differential flame graph of all rounds (NEW's shape, red where its call paths
    took more self time per run than BASE's), the verdict in its header."""
    from .analysis.calltree import build_call_tree
    from .analysis.diff import tree_changes
    from .render.budget import facts
    from .render.flame import FlameRenderer

    base_rec, new_rec = res.recordings()
    new_tree = build_call_tree(new_rec)
    change = tree_changes(build_call_tree(base_rec), new_tree, match=res.match, unit="ms")
    # Both sides ran the same number of rounds, so the sums compare as per-run times do.
    flame = FlameRenderer(
        "html",
        title=title or f"{os.path.basename(res.new)} vs {os.path.basename(res.base)}",
        subtitle=(f"jsprof budget, {res.rounds} rounds a side summed: shape of NEW; red: more "
                  "self time than BASE, blue: less"),
        change=change, rec=new_rec, facts=facts(res),
    )
    return flame.render(new_tree)
