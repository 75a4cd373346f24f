"""The Chromium engine on real headless Chromium: V8's profiler over the debugging pipe.

One browser is shared by the tests that can share it (each gets its own tab); the
tests of endings that end the browser start their own.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from browser_util import cdp_chromium, engine_browser
from jsprof.engines.chromium import Browser, find_chromium, record_chromium
from jsprof.trace import ProfilerTrace

DATA = Path(__file__).parent / "data" / "chromium_engine"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Chromium is installed by `make test` (make chromium); missing, it must fail loudly.
    with engine_browser() as b:
        yield b


def inclusive_share(trace: ProfilerTrace, names: tuple[str, ...]) -> dict[str, float]:
    """Each name's share of the samples on a stack through it. (Counting, not weighting
    by the gap to the next sample: measured, gap weights vary far more run to run on a
    loaded machine, where a starved sampler leaves a few long gaps.)"""
    frame_names = [f.name for f in trace.frames]
    counts = dict.fromkeys(names, 0.0)
    for s in trace.sample_stack.tolist():
        if s < 0:
            continue
        on = {frame_names[f] for f in trace.stack_frames(s)}
        for n in names:
            if n in on:
                counts[n] += 1
    total = sum(counts.values()) or 1
    return {n: 100.0 * c / total for n, c in counts.items()}


def self_counts(trace: ProfilerTrace) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in trace.sample_stack.tolist():
        if s >= 0:
            n = trace.frames[trace.stack_frame[s]].name
            out[n] = out.get(n, 0) + 1
    return out


def _times_through(trace: ProfilerTrace, name: str) -> np.ndarray:
    """The times of the samples on a stack through a function named `name`."""
    names = [f.name for f in trace.frames]
    on = [
        s >= 0 and name in {names[f] for f in trace.stack_frames(s)}
        for s in trace.sample_stack.tolist()
    ]
    return trace.sample_time[np.array(on, dtype=bool)]


@pytest.mark.under_load
def test_split_within_3_points(browser: Browser) -> None:
    # Busy loops timed by the wall clock: on a loaded 2-core machine a burst of
    # descheduling can skew one run, so two retries are allowed (all runs are reported).
    shares = []
    for _ in range(3):
        out = io.StringIO()
        rec = record_chromium(str(DATA / "split.js"), 1.0, browser=browser, stdout=out)
        assert out.getvalue() == "split done\n"
        main = rec.tracks[0]
        assert main.name == "main" and main.engine == "chromium"
        assert main.meta["exit"] == "ok"
        assert main.sample_interval == 1.0
        share = inclusive_share(main.trace, ("fifty", "thirty", "twenty"))
        shares.append(share)
        if all(abs(share[n] - w) <= 3 for n, w in (("fifty", 50), ("thirty", 30), ("twenty", 20))):
            return
    pytest.fail(f"split off by more than 3 points: {shares}")


@pytest.mark.under_load
def test_worker_is_its_own_track(browser: Browser) -> None:
    out = io.StringIO()
    rec = record_chromium(str(DATA / "worker.html"), 0.5, browser=browser, stdout=out)
    assert out.getvalue() == "worker said done\n"
    assert [t.name for t in rec.tracks][0] == "main"
    assert len(rec.tracks) == 2
    worker = rec.tracks[1]
    # A served local file is named by its file:// URL (the server's port is random).
    assert worker.name == (DATA / "worker_hot.js").resolve().as_uri()
    main_self, worker_self = self_counts(rec.tracks[0].trace), self_counts(worker.trace)
    # Each thread's hot function is on its own track only.
    assert "workerSpin" in worker_self and "workerSpin" not in main_self
    assert "spin" in main_self and "spin" not in worker_self
    # Each sampled through its spin: the samples on a stack through it span the spin's
    # wall-clock time (performance.now()) less a gap at each end, the largest between
    # them. Not `>= 50` of each: how many ticks V8 gets in 300-400 ms is the machine's.
    for t, fn, ms in ((worker, "workerSpin", 400), (rec.tracks[0], "spin", 300)):
        st = _times_through(t.trace, fn)
        worst = float(np.diff(st).max()) if len(st) > 1 else 0.0
        span = float(st[-1] - st[0]) if len(st) else 0.0
        n = len(st)
        assert n >= 2 and span >= ms - 2 * worst - 2, (fn, n, span, worst)
    names = {f.name for f in worker.trace.frames}
    assert "workerHot" in names and "pageHot" not in names
    # Our helper's frames never show.
    for t in rec.tracks:
        assert not any("jsprof-internal" in r for r in t.trace.resources)
        assert t.time_origin > 1.5e12
    # The worker started after the page: its time origin is later.
    assert worker.time_origin > rec.tracks[0].time_origin


def test_no_browser_left_behind() -> None:
    b = Browser()
    pid = b.proc.pid
    b.close()
    assert b.proc.poll() is not None
    assert not os.path.exists(b.user_data)
    # SIGKILL is delivered at once but a process takes a moment to die.
    deadline = time.monotonic() + 10
    while live_in_group(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_in_group(pid) == []


def live_in_group(pgid: int) -> list[int]:
    """Processes of a process group that still run (zombies are dead: this machine's
    pid 1 does not reap the orphans it inherits)."""
    live = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(d))
    return live


def test_chromium_found() -> None:
    assert shutil.which(find_chromium())


@pytest.mark.under_load
def test_cli_record_js_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jsprof.cli import main
    from jsprof.io import load

    out = tmp_path / "split.jsprof.json"
    code = main(
        [
            "record",
            "--engine",
            "chromium",
            "--interval",
            "0.1",
            "-o",
            str(out),
            str(DATA / "split.js"),
        ]
    )
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert cap.out == "split done\n"
    assert "main:" in cap.err and "interval 0.1 ms" in cap.err
    rec = load(str(out))
    trace = rec.tracks[0].trace
    assert rec.tracks[0].sample_interval == 0.1
    assert "fifty" in {f.name for f in trace.frames}
    # 0.1 ms works: samples come well under 1 ms apart. A quarter of the gaps at least,
    # not the median (the achieved interval): a loaded machine keeps the sampler from a
    # core now and then, and lengthens that many gaps (0.18-0.19 ms medians beside 6 busy
    # loops at load 20, 9-13 % of the gaps over 0.5 ms); it shortens none, and a 1 ms
    # sampler spaces three quarters of its samples 1.06-1.09 ms apart or more there.
    gaps = np.diff(trace.sample_time)
    q25 = float(np.percentile(gaps, 25))
    assert q25 < 0.5, (q25, rec.tracks[0].meta["medianIntervalMs"], len(gaps))


# ---- names, lines and columns: the same as Chromium's own Profiler -----------------------


def _frames_of(trace_frames: list, resources: list[str], script: str) -> dict[str, tuple]:
    return {
        name: (line, col)
        for name, rid, line, col in trace_frames
        if rid is not None and resources[rid].endswith(script)
    }


def test_names_lines_columns_equal_the_native_profiler(browser: Browser, tmp_path: Path) -> None:
    from jsprof.engines.chromium import run_chromium
    from jsprof.formats import read_any

    out = io.StringIO()
    code = run_chromium(str(DATA / "names_native.html"), browser=browser, stdout=out)
    assert code == 0
    native_file = tmp_path / "native.json"
    native_file.write_text(out.getvalue())
    native = read_any(native_file.read_bytes(), str(native_file)).tracks[0].trace
    rec = record_chromium(str(DATA / "names_record.html"), 0.5, browser=browser)
    ours = rec.tracks[0].trace
    n = _frames_of([tuple(f) for f in native.frames], native.resources, "names_workload.js")
    o = _frames_of([tuple(f) for f in ours.frames], ours.resources, "names_workload.js")
    kinds = [
        "spin",
        "declared",
        "inferred",
        "arrow",
        "Shape",
        "area",
        "get size",
        "set size",
        "make",
        "workload",
    ]
    for name in kinds:
        assert name in n, (name, sorted(n))
        assert o.get(name) == n[name], (name, o.get(name), n[name])
    # The one known difference: a function the language leaves unnamed is '' natively,
    # while V8's CPU profile shows the name V8 infers from the assignment (docs/engines.md).
    assert n[""] == (13, 29) and o["anonymous"] == (13, 29)
    # Same conventions for resources: absolute URLs, the page and the external script.
    assert any(r.endswith("/names_workload.js") for r in ours.resources)


def test_native_trace_from_run_validates_and_reports(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = DATA / "names_native.html"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "run", "--engine", "chromium", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    f = tmp_path / "native.json"
    f.write_text(p.stdout)
    v = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "validate", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert v.returncode == 0 and v.stdout.startswith("OK "), v.stderr
    r = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", str(f), "--top", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "spin" in r.stdout


# ---- endings -----------------------------------------------------------------------------


def test_duration_caps_a_page_that_never_settles(browser: Browser) -> None:
    rec = record_chromium(str(DATA / "forever.html"), 1.0, duration=1.5, browser=browser)
    main = rec.tracks[0]
    assert main.meta["exit"] == "duration"
    assert "tickWork" in {f.name for f in main.trace.frames}
    span = main.trace.sample_time[-1] - main.trace.sample_time[0]
    assert 1000 < span < 4000


def test_a_hold_up_of_jsprofs_own_is_not_the_page_going_quiet(
    browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    # jsprof's own loop held up for 1 s (on a loaded machine: descheduled, or reading a big
    # slice) at a moment no idle probe was out. The page's interval runs on all the while, so
    # the `--until load` rule must not call it quiet: it did (3 of 16 runs at load 11-19
    # ended "ok" with no more samples, and Ctrl-C then found jsprof already saving). The
    # hold-up is made here once, right after a probe's answer was read with no request in
    # flight; page and browser are real.
    from jsprof.engines.chromium.page import PageSession

    tick = PageSession.tick
    held: list[float] = []

    def held_up_once(self: PageSession) -> None:
        tick(self)
        m = self.main
        idle_wait = m.probed_after_load and m.probe_mid is None and not self.inflight
        if self.loaded and idle_wait and not held:
            held.append(time.monotonic())
            time.sleep(1.0)

    monkeypatch.setattr(PageSession, "tick", held_up_once)
    rec = record_chromium(str(DATA / "forever.html"), 1.0, duration=4.0, browser=browser)
    assert held, "the hold-up never came"
    assert rec.tracks[0].meta["exit"] == "duration"


def test_until_js_expression(browser: Browser) -> None:
    rec = record_chromium(
        str(DATA / "forever.html"),
        1.0,
        until="js:window.ready === true",
        duration=20,
        browser=browser,
    )
    main = rec.tracks[0]
    assert main.meta["exit"] == "ok"
    span = main.trace.sample_time[-1] - main.trace.sample_time[0]
    assert 250 < span < 5000


# A page whose whole work is its first task: one script, run as the document parses.
_FIRST_TASK_PAGE = """<!DOCTYPE html><html><body><script>
function firstTaskWork() {
  let s = 0;
  for (let i = 0; i < 3e6; i++) s = (s + Math.sqrt(i)) % 1e9;
  return s;
}
for (let k = 0; k < 8; k++) firstTaskWork();
</script></body></html>
"""


def test_the_pages_first_task_is_profiled_when_the_blank_tab_was_slow(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page lands in a new document, whose inspector restarts the profiler from the
    state the blank tab's renderer had confirmed. Each blank tab here is kept busy for
    400 ms as jsprof starts its profiler (as a renderer still starting is on a loaded
    machine): if jsprof navigates without waiting for the start's reply, the new document
    runs the start as a plain message after its first task, and that task has no samples
    (CI of 5e6d00a; measured without the wait: 5 of 30 loads, with it 0 of 30)."""
    page = tmp_path / "first.html"
    page.write_text(_FIRST_TASK_PAGE)
    new_page = browser.new_page

    def slow_blank_tab():  # the blank renderer busy when the profiler's start reaches it
        session, target = new_page()
        session.send_nowait(
            "Runtime.evaluate",
            {"expression": "{ const t = Date.now() + 400; while (Date.now() < t) {} }"},
            reply=False,
        )
        return session, target

    monkeypatch.setattr(browser, "new_page", slow_blank_tab)
    missed = []
    for k in range(12):
        rec = record_chromium(str(page), 1.0, browser=browser)
        main = rec.tracks[0]
        assert main.name == "main" and main.meta["exit"] == "ok"
        n = self_counts(main.trace).get("firstTaskWork", 0)
        if n == 0:
            missed.append((k, self_counts(main.trace)))
    assert missed == [], f"loads whose first task has no samples: {missed}"


def test_until_load_waits_for_timers_not_for_promises(browser: Browser) -> None:
    out = io.StringIO()
    rec = record_chromium(str(DATA / "pending.js"), 1.0, browser=browser, stdout=out)
    assert out.getvalue() == "timer fired\n"
    assert rec.tracks[0].meta["exit"] == "ok"


def test_a_workers_timers_run_and_hold_the_load_rule(browser: Browser, tmp_path: Path) -> None:
    # jsprof's helper is evaluated in a worker while it waits for the debugger, and there
    # Chromium (156) has no setTimeout or setInterval on the global yet: the helper kept
    # undefined as the originals, so the worker's first timer threw a TypeError from
    # jsprof's wrapper in the worker's own code, and the probe of its pending timers threw
    # too (the load rule took the worker for idle, and ended before its timer fell due).
    (tmp_path / "w.js").write_text(
        "function workerLate(ms) { const end = performance.now() + ms;"
        " while (performance.now() < end); }\n"
        "const never = setTimeout(() => postMessage('cleared timer fired'), 100);\n"
        "clearTimeout(never);\n"
        "const tick = setInterval(() => {}, 20);\n"
        "setTimeout(() => { clearInterval(tick); workerLate(200); postMessage('late'); }, 1200);\n"
    )
    page = tmp_path / "p.html"
    page.write_text(
        "<!doctype html><script>const w = new Worker('w.js');\n"
        "w.onmessage = (e) => console.log('worker said ' + e.data);\n"
        # the helper makes each Worker through its constructor (chromium_page.js): a
        # Worker is still what the page's own checks take it for
        "class Sub extends Worker {}\n"
        "console.log('a Worker: ' + (w instanceof Worker && w.constructor === Worker\n"
        "  && Object.getPrototypeOf(w) === Worker.prototype && Worker.name === 'Worker'\n"
        "  && new Sub('data:text/javascript,') instanceof Sub));</script>\n"
    )
    out, err = io.StringIO(), io.StringIO()
    rec = record_chromium(str(page), 1.0, browser=browser, stdout=out, stderr=err)
    main = rec.tracks[0]
    assert err.getvalue() == "" and "errors" not in main.meta, (err.getvalue(), main.meta)
    # the load rule waited for the worker's pending timer, which ran
    assert out.getvalue() == "a Worker: true\nworker said late\n", out.getvalue()
    assert main.meta["exit"] == "ok", main.meta
    wt = next(t for t in rec.tracks if t.name.endswith("/w.js")).trace
    assert "workerLate" in {f.name for f in wt.frames}, sorted({f.name for f in wt.frames})


def test_window_close_ends_record_and_run(browser: Browser) -> None:
    from jsprof.engines.chromium import run_chromium

    out = io.StringIO()
    rec = record_chromium(str(DATA / "close.js"), 1.0, duration=30, browser=browser, stdout=out)
    assert out.getvalue() == "closing\n"
    assert rec.tracks[0].meta["exit"] == "closed"
    assert "beforeClose" in {f.name for f in rec.tracks[0].trace.frames}
    out = io.StringIO()
    assert run_chromium(str(DATA / "close.js"), browser=browser, stdout=out, duration=30) == 0
    assert out.getvalue() == "closing\n"


def test_run_uncaught_error_prints_stack_exits_1(browser: Browser) -> None:
    from jsprof.engines.chromium import run_chromium

    out, err = io.StringIO(), io.StringIO()
    code = run_chromium(str(DATA / "error.js"), browser=browser, stdout=out, stderr=err)
    assert code == 1
    assert out.getvalue() == "before\n"
    lines = err.getvalue().splitlines()
    assert lines[0] == "to stderr 42"
    assert lines[1] == "TypeError: bad thing"
    # The stack names the file as the recording does, not the loopback server's port.
    want = (DATA / "error.js").resolve().as_uri()
    assert "at failing" in lines[2] and f"{want}:2:" in lines[2], lines[2]
    assert "127.0.0.1" not in err.getvalue()


def test_run_unhandled_rejection_in_a_module_exits_1(browser: Browser) -> None:
    from jsprof.engines.chromium import run_chromium

    out, err = io.StringIO(), io.StringIO()
    code = run_chromium(str(DATA / "rejection.mjs"), browser=browser, stdout=out, stderr=err)
    assert code == 1
    assert out.getvalue() == "module object\n"
    assert err.getvalue().startswith("RangeError: nobody caught me")


def test_record_keeps_trace_when_the_page_throws(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "e.jsprof.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "jsprof.cli",
            "record",
            "--engine",
            "chromium",
            "-o",
            str(out),
            str(DATA / "error.js"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1
    assert p.stdout == "before\n"
    assert "TypeError: bad thing" in p.stderr and "uncaught error" in p.stderr
    # As printed and as kept: the file's own URL (the port was printed, file:// kept).
    want = (DATA / "error.js").resolve().as_uri()
    assert f"{want}:2:" in p.stderr and "127.0.0.1" not in p.stderr, p.stderr
    from jsprof.io import load

    rec = load(str(out))
    assert rec.tracks[0].meta["exit"] == "ok"
    assert f"{want}:2:" in rec.tracks[0].meta["error"]
    # The error's stack names the script by its file, not by the server's random port.
    url = (DATA / "error.js").resolve().as_uri()
    assert f"{url}:" in rec.tracks[0].meta["error"], rec.tracks[0].meta["error"]
    assert "127.0.0.1" not in rec.tracks[0].meta["error"]
    assert "failing" in {f.name for f in rec.tracks[0].trace.frames}


# ---- nothing lost: Ctrl-C, a crashed page, a browser killed from outside -----------------


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def _browser_of(jsprof_pid: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for d in os.listdir("/proc"):
            if d.isdigit() and _ppid(int(d)) == jsprof_pid:
                if "--remote-debugging-pipe" in _cmdline(int(d)):
                    return int(d)
        time.sleep(0.1)
    raise AssertionError("jsprof started no browser")


def _renderers(browser_pid: int) -> list[int]:
    return [p for p in live_in_group(browser_pid) if "--type=renderer" in _cmdline(p)]


def _record_forever(tmp_path: Path, act: str) -> tuple[int, str, Path]:
    """Record forever.html in a jsprof process; after ~2.5 s of recording, `act`."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "forever.jsprof.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jsprof.cli",
            "record",
            "--engine",
            "chromium",
            "-o",
            str(out),
            "--duration",
            "60",
            str(DATA / "forever.html"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        browser = _browser_of(proc.pid)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"  # the page runs (jsprof forwards its console)
        time.sleep(2.5)  # more than one slice period of recording
        if act == "sigint":
            proc.send_signal(signal.SIGINT)
        elif act == "crash":
            for r in _renderers(browser):
                os.kill(r, signal.SIGKILL)
        elif act == "kill-browser":
            os.kill(browser, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10
    while live_in_group(browser) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_in_group(browser) == [], "a browser process was left behind"
    return proc.returncode, err, out


def _tick_cover(out: Path) -> tuple[int, float, float]:
    """The saved main track's samples through tickWork: (how many, the span from the
    first to the last, the worst gap between them), in ms. tickWork runs from the page's
    first 10 ms, before its "ready" (at 300 ms), to the end: kept samples span what was
    kept less a gap at each end, the largest between them. Not a count (`>= 20`): how many
    ticks V8 gets in a few seconds of wall clock is the machine's."""
    from jsprof.io import load

    st = _times_through(load(str(out)).tracks[0].trace, "tickWork")
    worst = float(np.diff(st).max()) if len(st) > 1 else 0.0
    span = float(st[-1] - st[0]) if len(st) else 0.0
    return len(st), span, worst


@pytest.mark.under_load
def test_ctrl_c_keeps_the_samples(tmp_path: Path) -> None:
    code, err, out = _record_forever(tmp_path, "sigint")
    assert code == 130, err
    assert "interrupted; the samples taken so far were kept" in err
    # All of it kept: the 2.5 s from "ready" to the Ctrl-C at least.
    n, span, worst = _tick_cover(out)
    assert n >= 2 and span >= 2500 - 2 * worst - 2, (n, span, worst)


@pytest.mark.under_load
def test_crashed_page_keeps_the_samples(tmp_path: Path) -> None:
    code, err, out = _record_forever(tmp_path, "crash")
    assert code == 1, err
    assert "the page crashed" in err
    _kept_the_slices(out)


def _kept_the_slices(out: Path) -> None:
    """The slices taken while recording were kept: all but the last slice period before
    the end, of the 2.5 s from "ready" (beside 6 busy loops, spans of 1955-2995 ms; a
    slice jsprof cuts late spends the 290 ms tickWork ran before "ready")."""
    from jsprof.engines.chromium.thread import SLICE_PERIOD

    n, span, worst = _tick_cover(out)
    assert n >= 2 and span >= 2500 - 1000 * SLICE_PERIOD - 2 * worst - 2, (n, span, worst)


@pytest.mark.under_load
def test_browser_killed_from_outside_keeps_the_samples(tmp_path: Path) -> None:
    code, err, out = _record_forever(tmp_path, "kill-browser")
    assert code == 1, err
    assert "Chromium exited unexpectedly" in err
    _kept_the_slices(out)


# ---- record --cdp: a browser the user runs ------------------------------------------------


@pytest.mark.under_load
def test_cdp_attach_profiles_the_tab_and_detaches(tmp_path: Path) -> None:
    import json
    import urllib.request

    from jsprof.engines.chromium import attach_cdp
    from jsprof.engines.chromium.serve import serve_target

    server, url = serve_target(str(DATA / "forever.html"))
    try:
        with cdp_chromium(tmp_path / "profile", url) as endpoint:
            time.sleep(1.0)  # let the page start its interval
            rec = attach_cdp(endpoint, target="forever.html", duration=1.5)
            main = rec.tracks[0]
            assert main.meta["exit"] == "duration"
            assert "tickWork" in {f.name for f in main.trace.frames}
            # Sampled through the 1.5 s attach: its samples span it but for a gap at each
            # end, the largest the recording has. Not `> 50`: how many ticks V8 gets in
            # 1.5 s of wall clock is the machine's.
            st = main.trace.sample_time
            worst = float(np.diff(st).max()) if len(st) > 1 else 0.0
            span = float(st[-1] - st[0]) if len(st) else 0.0
            assert len(st) >= 2 and span >= 1500 - 2 * worst - 2, (len(st), span, worst)
            assert main.time_origin > 1.5e12
            # Detached cleanly: the tab is still there, and a second attach works again.
            with urllib.request.urlopen(endpoint + "/json/list", timeout=10) as r:
                assert any("forever.html" in t["url"] for t in json.loads(r.read()))
            again = attach_cdp(endpoint, target="forever.html", duration=0.5)
            assert again.tracks[0].trace.num_samples > 0
    finally:
        server.close()


def test_cdp_refuses_non_loopback_before_connecting() -> None:
    from jsprof.cli import main

    # Refused before any connection or name lookup is tried (.invalid never resolves).
    assert main(["record", "--cdp", "http://browser.invalid:9222", "--duration", "1"]) == 2


# ---- the project's Profiler conformance file on Chromium's native Profiler --------------

# Where Chromium itself differs from the spec or from our engines (docs/profiler-api.md): its
# sampler's floor is 10 ms (requests are rounded up to multiples of 10), so the checks
# that count samples at 1 ms or expect a 5 ms session see a tenth of the samples; it has
# no `onsamplebufferfull` attribute and leaves `stopped` false after a full buffer; and
# on a loaded machine two sessions' traces sometimes hold two samples with the same
# timestamp ("samples[1] not increasing", seen in 1 of 3 runs).
CHROMIUM_DIFFERS = {
    "both well formed",
    "samples taken",
    "samples with no JavaScript have no stackId key",
    "onsamplebufferfull handler called",
    "a full buffer stops the session",
    "maxBufferSize -1 keeps everything (4294967295)",
    "each session reports its own interval",
    "the other session is whole",
    # A known engine limitation, measured (docs/engines.md): samples taken while V8
    # collects garbage come with neither stack nor marker. Shown failed in the table.
    "a loop calling built-ins is sampled with its stack",
}


def test_conformance_file_on_the_native_profiler(browser: Browser) -> None:
    import json

    from jsprof.engines.chromium import run_chromium

    out = io.StringIO()
    path = Path(__file__).parent / "data" / "profiler" / "conformance.js"
    assert run_chromium(str(path), browser=browser, stdout=out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    assert rows and rows[-1] == {"done": True}
    failed = {r["check"] for r in rows[:-1] if not r["ok"]}
    assert failed <= CHROMIUM_DIFFERS, {r["check"]: r["detail"] for r in rows[:-1]
                                        if r["check"] in failed - CHROMIUM_DIFFERS}
    passed = {r["check"] for r in rows[:-1] if r["ok"]}
    assert len(passed) >= 30
    assert "a known function is a frame with resource, line and column" in passed


def test_no_profiling_gives_chromiums_own_error(browser: Browser) -> None:
    from jsprof.engines.chromium import run_chromium

    path = Path(__file__).parent / "data" / "profiler" / "not_allowed.js"
    out = io.StringIO()
    assert run_chromium(str(path), allow_profiling=False, browser=browser, stdout=out) == 0
    assert out.getvalue() == "NotAllowedError\n"
    out = io.StringIO()
    assert run_chromium(str(path), browser=browser, stdout=out) == 0
    assert out.getvalue() == "constructed\n"


def test_console_lines_as_the_console_shows_them(browser: Browser) -> None:
    from jsprof.engines.chromium import run_chromium

    out, err = io.StringIO(), io.StringIO()
    assert run_chromium(str(DATA / "console.js"), browser=browser, stdout=out, stderr=err) == 0
    assert out.getvalue().splitlines() == [
        "text 1 1.5 true null undefined {a: 1, b: 'x'} [1, 'a'] 10n Symbol(q)",
        "Ada is 36 years extra",
        "info line",
        "debug line",
        "",  # console.log(''); V8's inspector drops a console.log() with no arguments
    ]
    assert err.getvalue().splitlines() == ["warn line", "error line shown"]


def test_out_of_process_iframe_is_its_own_track(browser: Browser) -> None:
    out = io.StringIO()
    rec = record_chromium(str(DATA / "oopif.html"), 1.0, browser=browser, stdout=out)
    # Each thread's console reaches us on its own session: lines of two threads come in
    # the order they arrive, not always the order they were logged (seen 1 in 16).
    assert sorted(out.getvalue().splitlines()) == ["frame done", "page done"]
    assert len(rec.tracks) == 2
    frame = rec.tracks[1]
    assert frame.name == (DATA / "frame.html").resolve().as_uri()
    assert frame.meta["kind"] == "iframe"
    main_self, frame_self = self_counts(rec.tracks[0].trace), self_counts(frame.trace)
    assert "spin2" in frame_self and "spin2" not in main_self
    assert "spin" in main_self and "spin" not in frame_self


def test_a_local_page_is_named_by_its_files_in_every_recording(
    browser: Browser, tmp_path: Path
) -> None:
    # Issue 20: local pages were served on a random loopback port and named by it
    # (`http://127.0.0.1:33697/...` vs `:39769`), so two recordings of one page shared no
    # resource and `diff` showed every function new and removed.
    import subprocess
    import sys

    import jsprof

    files = []
    for i in range(2):
        rec = record_chromium(str(DATA / "worker.html"), 0.5, browser=browser, stdout=io.StringIO())
        f = tmp_path / f"run{i}.jsprof.json"
        jsprof.save(rec, f)
        files.append(jsprof.load(f))
    page, worker = (
        (DATA / "worker.html").resolve().as_uri(),
        (DATA / "worker_hot.js").resolve().as_uri(),
    )
    for rec in files:
        assert [t.name for t in rec.tracks] == ["main", worker]
        assert rec.tracks[0].meta["url"] == page and rec.tracks[1].meta["url"] == worker
        assert set(rec.tracks[0].trace.resources) == {page}, rec.tracks[0].trace.resources
        assert set(rec.tracks[1].trace.resources) == {worker}, rec.tracks[1].trace.resources
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "diff", "--json", str(tmp_path / "run0.jsprof.json"),
         str(tmp_path / "run1.jsprof.json")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    import json

    rows = json.loads(p.stdout)["rows"]
    hot = {"spin", "pageHot", "workerSpin", "workerHot"}
    assert hot <= {r["name"] for r in rows}
    # Every hot function is in both (one row each); a row new or removed could only be a
    # function so brief that one run's sampler missed it.
    for r in rows:
        if r["name"] in hot:
            assert r["status"] == "changed", r
        elif r["resource"] is None:
            # V8's pseudo-frames name no script: a GC may happen in one run only (the CI
            # of 630538a: "(garbage collector)" 1.2 % in one run, none in the other)
            assert r["name"].startswith("("), r
        else:
            assert (
                r["status"] == "changed"
                or max(r["base_total_pct"] or 0, r["new_total_pct"] or 0) < 1.0
            ), r


def test_a_served_script_is_named_by_its_file(browser: Browser) -> None:
    # A .js target runs in a generated page: the track is named by the script's file.
    rec = record_chromium(str(DATA / "split.js"), 1.0, browser=browser, stdout=io.StringIO())
    url = (DATA / "split.js").resolve().as_uri()
    main = rec.tracks[0]
    assert main.meta["url"] == url
    assert main.trace.resources == [url], main.trace.resources


def test_file_url_of_a_served_path() -> None:
    # The rule beside the real recordings: only this server's URLs, only inside its root.
    from jsprof.engines.chromium.serve import PageServer

    srv = PageServer(str(DATA))
    try:
        o, port = srv.origin, srv.server_address[1]
        here = DATA.resolve()
        assert srv.file_url(o + "/worker_hot.js?v=2#x") == (here / "worker_hot.js").as_uri()
        assert srv.file_url(f"http://localhost:{port}/a%20b.js") == (here / "a b.js").as_uri()
        assert srv.file_url(o + "/../../etc/passwd") == o + "/../../etc/passwd"
        assert srv.file_url("http://127.0.0.1:1/x.js") == "http://127.0.0.1:1/x.js"
        assert srv.file_url("https://example.com/x.js") == "https://example.com/x.js"
        text = f"TypeError: x\n    at f ({o}/error.js:3:9)\n    at {o}/error.js:5:1"
        want = (here / "error.js").as_uri()
        assert srv.file_urls_in(text) == (f"TypeError: x\n    at f ({want}:3:9)\n    at {want}:5:1")
    finally:
        srv.close()


def test_jsprofs_own_probes_leave_no_frames(browser: Browser) -> None:
    """What jsprof evaluates in the page while the profiler runs (the --until probe, the
    measures read at the end) is not the page's work: its frames are dropped, the page's
    functions it calls keep their samples. Before, a full run named a frame of the measures
    read `(anonymous line 1)`, a script with no URL, with 1.1 ms of self time."""
    rec = record_chromium(str(DATA / "probed.html"), 1.0, until="js:check()", duration=30,
                          browser=browser)
    trace = rec.tracks[0].trace
    assert rec.tracks[0].meta["exit"] == "ok"
    # Both probes ran in the recording and were sampled (the page's code spins 20-40 ms),
    # on a stack through them: their own self samples are chance (1 in 5 runs had one
    # of slowEntries at load 23, the spin it calls has them).
    on = inclusive_share(trace, ("check", "slowEntries", "spin"))
    assert on["slowEntries"] > 0 and on["check"] > 0 and on["spin"] > 0, on
    used = [trace.frames[f] for s in range(trace.num_stacks) for f in trace.stack_frames(s)]
    assert {"check", "slowEntries"} <= {f.name for f in used}, used
    # jsprof's own expressions have no script of the page's: none of their frames is left.
    scriptless = {f for f in used if f.resource_id is None and not f.name.startswith("(")}
    assert scriptless == set(), scriptless


ACORN = Path(__file__).parent / "js" / "node_modules" / "acorn" / "dist" / "acorn.mjs"


@pytest.mark.npm
def test_a_script_of_the_page_that_does_not_load_is_an_error(
    browser: Browser, tmp_path: Path
) -> None:
    # A module whose import 404s runs none of its code and throws nothing: `record` wrote
    # an all-idle recording, said nothing and exited 0 (acorn imported by a path outside
    # the served folder). Now it is said, in the file's own name, and the run exits 1.
    from jsprof.engines.chromium import run_chromium

    app = tmp_path / "app.mjs"
    app.write_text(
        'import { parse } from "./lib/acorn.mjs";\n'
        'console.log(parse("let x = 1 + 2", { ecmaVersion: "latest" }).body[0].type);\n'
    )
    out, err = io.StringIO(), io.StringIO()
    assert run_chromium(str(app), browser=browser, stdout=out, stderr=err) == 1
    missing = (tmp_path / "lib" / "acorn.mjs").as_uri()
    assert out.getvalue() == ""
    assert err.getvalue() == (
        f"{missing}: the page could not load this script (HTTP 404 File not found); only "
        f"files under {tmp_path} are served to the page\n"
    )
    # the same page with acorn in its folder runs, and says nothing of the kind
    (tmp_path / "lib").mkdir()
    shutil.copy(ACORN, tmp_path / "lib" / "acorn.mjs")
    out, err = io.StringIO(), io.StringIO()
    assert run_chromium(str(app), browser=browser, stdout=out, stderr=err) == 0, err.getvalue()
    assert out.getvalue() == "VariableDeclaration\n" and err.getvalue() == ""


def test_record_of_a_page_with_a_missing_script_keeps_the_rest_and_exits_1(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    from jsprof.io import load

    (tmp_path / "p.html").write_text(
        '<script src="gone.js"></script>\n'
        "<script>function spin() { const end = performance.now() + 300;"
        " while (performance.now() < end); } spin(); console.log('ran')</script>\n"
    )
    out = tmp_path / "p.jsprof.json"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--engine", "chromium", "-o", str(out),
         str(tmp_path / "p.html")],
        capture_output=True, text=True, timeout=120,
    )
    gone = (tmp_path / "gone.js").as_uri()
    assert p.returncode == 1, p.stderr
    assert p.stdout == "ran\n"
    first = p.stderr.splitlines()[0]
    assert first.startswith(f"{gone}: the page could not load this script (HTTP 404"), first
    assert "127.0.0.1" not in p.stderr
    assert "the page had 1 error(s)" in p.stderr
    rec = load(str(out))
    assert rec.tracks[0].meta["error"] == first
    assert "spin" in {f.name for f in rec.tracks[0].trace.frames}


def test_the_load_rules_wait_after_the_page_went_quiet_is_dropped(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--until load` waits QUIET_MS after the page's last task, then jsprof stops the
    # profilers: examples/app.js's 320 ms of work came out 72 % idle, 480-600 ms of it
    # that trailing wait. It is dropped (and said), as Node's exit wait is; the page's own
    # idle between its tasks stays.
    from jsprof.render.summary import print_recording_summary

    page = tmp_path / "p.js"
    page.write_text(
        "function spin(ms) { const end = performance.now() + ms;"
        " while (performance.now() < end); }\n"
        "function first() { spin(150); }\nfunction second() { spin(100); }\n"
        "first(); setTimeout(second, 300);\n"
    )
    rec = record_chromium(str(page), 1.0, browser=browser)
    main = rec.tracks[0]
    tr = main.trace
    assert main.meta["exit"] == "ok"
    dropped = main.meta["quietWaitDropped"]
    assert dropped["samples"] > 0 and dropped["ms"] > 0
    on = [{tr.frames[f].name for f in tr.stack_frames(s)} if s >= 0 else set()
          for s in tr.sample_stack.tolist()]
    last_second = max(i for i, names in enumerate(on) if "second" in names)
    # nothing idle (no stack, no marker) after the page's last JavaScript
    after = list(zip(tr.sample_stack[last_second + 1:].tolist(),
                     tr.sample_marker[last_second + 1:].tolist(), strict=True))
    assert all(s >= 0 or m >= 0 for s, m in after), after
    # the timer's 300 ms between first and second is the page's own idle: kept
    first_end = max(i for i, names in enumerate(on) if "first" in names)
    between = tr.sample_time[first_end + 1:last_second]
    assert len(between) and float(between[-1] - between[0]) >= 200
    capsys.readouterr()
    print_recording_summary(rec, None)
    text = capsys.readouterr().err
    assert f"dropped {dropped['samples']} samples" in text and "went quiet" in text, text


def test_a_threads_idle_while_another_worked_is_not_the_quiet_wait(
    browser: Browser, tmp_path: Path
) -> None:
    # The --until load rule waits for every thread to go quiet: the page's main thread,
    # idle while its worker spins, is the page's time up to the worker's last JavaScript
    # (dropped before: each thread was cut at its own last JavaScript, the main thread's
    # whole wait on its worker said "after the page went quiet").
    (tmp_path / "w.js").write_text(
        "function workerSpin(ms) { const end = performance.now() + ms;"
        " while (performance.now() < end); }\nworkerSpin(800);\n"
    )
    page = tmp_path / "p.html"
    page.write_text("<!doctype html><script>const w = new Worker('w.js');</script>\n")
    rec = record_chromium(str(page), 1.0, browser=browser, stdout=io.StringIO())
    main, worker = rec.tracks[0], rec.tracks[1]
    assert main.meta["exit"] == "ok" and worker.name.endswith("/w.js"), worker.name
    wt = worker.trace
    spun = [i for i, s in enumerate(wt.sample_stack.tolist())
            if s >= 0 and "workerSpin" in {wt.frames[f].name for f in wt.stack_frames(s)}]
    assert spun, "the worker's spin was not sampled"
    # the same clock (epoch ms) for both: each track's origin plus its sample times. The
    # main thread keeps its samples up to the worker's last work: its last is past the
    # middle of the spin whatever gaps its sampler had (before: its own last JavaScript,
    # which came before the worker started)
    spin_from, spin_to = (worker.time_origin + float(wt.sample_time[i])
                          for i in (spun[0], spun[-1]))
    main_last = main.time_origin + float(main.trace.sample_time[-1])
    assert spin_to - spin_from > 400, (spin_from, spin_to)
    assert main_last >= (spin_from + spin_to) / 2, (main_last, spin_from, spin_to, main.meta)


def test_a_pages_idle_while_its_request_was_pending_is_not_the_quiet_wait(
    browser: Browser, tmp_path: Path
) -> None:
    # The rule's quiet starts when no request is pending either: a page that asked for an
    # image after its load and ran no JavaScript when it came was idle for the request, its
    # own time, not jsprof's wait (dropped before, 2.1 s said "after the page went quiet"
    # with the image's 1.5 s in it, unless a late GC sample happened to keep it).
    import http.server
    import threading

    served: list[float] = []

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            served.append(time.time())
            time.sleep(1.5)
            body = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
            self.send_response(200)
            self.send_header("Content-Type", "image/gif")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            served.append(time.time())

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        page = tmp_path / "p.html"
        page.write_text(
            "<!doctype html><script>window.onload = function asks() {"
            f" new Image().src = 'http://127.0.0.1:{srv.server_address[1]}/slow.gif'; }};"
            "</script>\n"
        )
        rec = record_chromium(str(page), 1.0, browser=browser, stdout=io.StringIO())
    finally:
        srv.shutdown()
        srv.server_close()
    main = rec.tracks[0]
    assert main.meta["exit"] == "ok" and len(served) == 2, served
    # Kept at least past the middle of the server's 1.5 s (epoch ms on both sides; the
    # request's end is on Chromium's clock, the profile's): before, the samples could end
    # at the page's JavaScript, before the request.
    main_last = main.time_origin + float(main.trace.sample_time[-1])
    asked, answered = served[0] * 1000.0, served[1] * 1000.0
    assert main_last >= (asked + answered) / 2, (main_last - asked, answered - asked, main.meta)
