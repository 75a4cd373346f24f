"""analysis/busy.py's rule on a trace whose every sample's place is known: stack-less samples
inside a long frame's script entry go to its entry point, elsewhere in the frame to the
frame's own rows, outside every frame they stay (idle); markers other than `script` and
samples with stacks keep theirs; times and weights never change; a second pass changes
nothing; another thread's samples are not the page's."""

from __future__ import annotations

import numpy as np
import pytest

from jsprof.analysis.busy import (
    NOT_CAPTURED,
    NOT_IN_SCRIPT,
    RENDERING,
    attribute,
    attribute_trace,
)
from jsprof.trace import MARKER_CODE, NONE, ProfilerFrame, ProfilerTrace, Recording, Track

URL = "https://shop.example/app.js"


def _trace(markers: bool = False) -> ProfilerTrace:
    # 0: onBuy (stack), 1..: times below; no stack unless said
    times = [100.0, 120.0, 130.0, 95.0, 180.0, 250.0, 140.0, 145.0]
    stacks = [0, NONE, NONE, NONE, NONE, NONE, NONE, NONE]
    mk = [MARKER_CODE["script"], MARKER_CODE["script"], NONE, NONE, NONE, NONE,
          MARKER_CODE["gc"], MARKER_CODE["script"]]
    order = np.argsort(times)
    return ProfilerTrace(
        resources=[URL],
        frames=[ProfilerFrame("onBuy", 0, 3, 10)],
        stack_parent=[NONE],
        stack_frame=[0],
        sample_time=np.array(times)[order],
        sample_stack=np.array(stacks)[order],
        sample_marker=np.array(mk)[order] if markers else None,
    )


FRAMES = [{
    "start": 90.0, "duration": 110.0, "renderStart": 170.0,
    "scripts": [{"invoker": "BUTTON#buy.onclick", "sourceURL": URL, "sourceFunctionName":
                 "onBuy", "start": 100.0, "duration": 50.0}],
}]


def _names(tr: ProfilerTrace) -> dict[float, list[str]]:
    out = {}
    for t, s in zip(tr.sample_time.tolist(), tr.sample_stack.tolist(), strict=True):
        path = []
        while s != NONE:
            path.append(tr.frames[tr.stack_frame[s]].name)
            s = int(tr.stack_parent[s])
        out[t] = path[::-1]
    return out


@pytest.mark.parametrize("markers", [False, True])
def test_the_rule(markers: bool) -> None:
    tr = _trace(markers)
    w = np.full(tr.num_samples, 5.0)
    got, busy = attribute_trace(tr, FRAMES, w)
    names = _names(got)
    assert names[100.0] == ["onBuy"]  # a stack is kept
    assert names[120.0] == names[145.0] == ["onBuy", NOT_CAPTURED]
    assert names[250.0] == []  # (idle): outside every frame
    # The entry point is the sampled function of that name in that script (one frame).
    assert sum(f.name == "onBuy" for f in got.frames) == 1
    if markers:
        # A producer that marks samples says by an unmarked one that V8 was idle, and gc
        # is gc: both keep their reading.
        assert names[130.0] == names[95.0] == names[180.0] == names[140.0] == []
        assert got.sample_marker[got.sample_time == 140.0][0] == MARKER_CODE["gc"]
        assert got.sample_marker[got.sample_time == 145.0][0] == NONE
        assert busy.script_samples == 2 and busy.frame_samples == 0
    else:
        assert names[130.0] == names[140.0] == ["onBuy", NOT_CAPTURED]
        assert names[95.0] == [NOT_IN_SCRIPT] and names[180.0] == [RENDERING]
        assert busy.script_samples == 4
        assert busy.frame_samples == 2 and busy.frame_ms == 10.0
    np.testing.assert_array_equal(got.sample_time, tr.sample_time)
    # Idempotent: what is left without a stack lies outside every frame.
    again, more = attribute_trace(got, FRAMES, w)
    assert more.samples == 0 and again is got


def test_entry_named_by_invoker_and_only_its_own_track() -> None:
    tr = _trace()
    frames = [dict(FRAMES[0], scripts=[dict(FRAMES[0]["scripts"][0], sourceFunctionName="")])]
    page = Track("main", tr, meta={"timeline": {"longFrames": frames}})
    worker = Track("worker 1", tr)
    rec, busy = attribute(Recording([page, worker]))
    assert _names(rec.tracks[0].trace)[120.0] == ["BUTTON#buy.onclick", NOT_CAPTURED]
    assert rec.tracks[1].trace is tr  # a worker's samples are not the page's frames
    assert busy.script_samples == 4


def test_a_bad_meta_timeline_is_not_read() -> None:
    tr = _trace()
    bad = Track("main", tr, meta={"timeline": {"longFrames": [{"start": "soon"}]}})
    rec, busy = attribute(Recording([bad]))
    assert busy.samples == 0 and rec.tracks[0].trace is tr


def test_an_entry_points_offset_is_placed_by_its_scripts_line_starts() -> None:
    """LoAF's `sourceCharPosition` is an offset: with the script's line starts (UTF-16
    units, V8's line ends) the entry point gets a line and column; the sampled frame at
    that place is it whatever its name (a minified script's names repeat), another place
    is a frame of its own, and without line starts the frame has no line."""
    from jsprof.script_lines import line_starts, position

    text = "a\nbc\r\nd\re\u2028\U0001f600f\ng"
    starts = line_starts(text)
    assert starts == [0, 2, 6, 8, 10, 14]  # the emoji is two UTF-16 units, as in V8
    assert [position(starts, o) for o in (0, 3, 9, 12, 14)] == [
        (1, 1), (2, 2), (4, 2), (5, 3), (6, 1)]
    assert position(starts, -1) is None and position(starts, None) is None

    def frames_with(pos: int, lines) -> ProfilerFrame:
        tr = ProfilerTrace(
            resources=[URL], frames=[ProfilerFrame("t", 0, 3, 10)], stack_parent=[NONE],
            stack_frame=[0], sample_time=np.array([100.0, 110.0, 120.0]),
            sample_stack=np.array([0, NONE, NONE]))
        loaf = [{"start": 105.0, "duration": 60.0, "renderStart": 160.0, "scripts": [
            {"start": 106.0, "duration": 50.0, "invoker": "BUTTON#buy.onclick",
             "sourceURL": URL, "sourceFunctionName": "", "sourceCharPosition": pos}]}]
        out, busy = attribute_trace(tr, loaf, None, lines)
        assert busy.script_samples == 2
        leaf = out.stack_frame[out.sample_stack[1]]
        entry = out.frames[out.stack_frame[out.stack_parent[out.sample_stack[1]]]]
        assert out.frames[leaf].name == NOT_CAPTURED
        return entry

    def three(url: str) -> list[int]:
        return [0, 40, 100]  # line 3 starts at offset 100
    assert frames_with(109, three) == ProfilerFrame("t", 0, 3, 10)
    assert frames_with(104, three) == ProfilerFrame("BUTTON#buy.onclick", 0, 3, 5)
    assert frames_with(104, lambda url: None) == ProfilerFrame("BUTTON#buy.onclick", 0, None,
                                                               None)
    assert frames_with(-1, three) == ProfilerFrame("BUTTON#buy.onclick", 0, None, None)
