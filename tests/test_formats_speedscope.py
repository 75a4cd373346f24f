"""speedscope: schema-valid output, exact round trips through the `jsprof` key, foreign files."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

import jsprof
from formats_util import (
    CHROMIUM,
    assert_same_samples,
    jsprof_cli,
    mixed_recording,
    node,
    one_line_error,
    paths,
    totals,
)
from jsprof.analysis.profile import sample_weights
from jsprof.errors import TraceFormatError
from jsprof.formats import read_any, speedscope
from jsprof.trace import MARKER_CODE, NONE


@pytest.mark.npm
@pytest.mark.parametrize("fixture", CHROMIUM, ids=lambda p: p.stem)
def test_cli_convert_is_schema_valid_and_round_trips(fixture, tmp_path):
    out = tmp_path / "out.speedscope.json"
    r = jsprof_cli("convert", str(fixture), str(out))
    assert r.returncode == 0, r.stderr
    v = node("validate-speedscope.js", str(out))
    assert v.returncode == 0, v.stdout + v.stderr
    doc = orjson.loads(out.read_bytes())
    original = jsprof.load(fixture).tracks[0]
    prof = doc["profiles"][0]
    # Consecutive identical stacks are merged; weights are the time they stood for.
    assert len(prof["samples"]) < original.trace.num_samples
    assert prof["unit"] == "milliseconds"
    w = sample_weights(original.trace, original.sample_interval)
    assert sum(prof["weights"]) == pytest.approx(float(w.sum()))
    back = jsprof.load(out).tracks[0]
    assert_same_samples(original.trace, back.trace)


def test_round_trip_keeps_tracks_markers_lines_and_origins():
    rec = mixed_recording()
    back = read_any(speedscope.write(rec), "x.speedscope.json")
    assert [t.name for t in back.tracks] == [t.name for t in rec.tracks]
    for a, b in zip(rec.tracks, back.tracks, strict=True):
        assert_same_samples(a.trace, b.trace)
        assert (b.time_origin, b.engine, b.sample_interval) == (
            a.time_origin,
            a.engine,
            a.sample_interval,
        )


@pytest.mark.npm
def test_written_file_is_valid_with_pseudo_frames(tmp_path):
    out = tmp_path / "mixed.speedscope.json"
    out.write_bytes(speedscope.write(mixed_recording()))
    v = node("validate-speedscope.js", str(out))
    assert v.returncode == 0, v.stdout + v.stderr
    doc = orjson.loads(out.read_bytes())
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert {"(garbage collector)", "(idle)", "(program)"} <= names
    # Empty (anonymous) names are shown as such, and read back empty (see round trips).
    assert "" not in names and "(anonymous)" in names
    assert len(doc["profiles"]) == 2


def _foreign(profile: dict, frames=None) -> bytes:
    return orjson.dumps(
        {
            "$schema": speedscope.SCHEMA_URL,
            "shared": {
                "frames": frames or [{"name": "main", "file": "a.js", "line": 1}, {"name": "f"}]
            },
            "profiles": [profile],
        }
    )


def test_foreign_sampled_file_falls_back_to_weights():
    data = _foreign(
        {
            "type": "sampled",
            "name": "p",
            "unit": "microseconds",
            "startValue": 1000,
            "endValue": 5000,
            "samples": [[0], [0, 1], [0]],
            "weights": [1000, 2000, 1000],
        }
    )
    t = read_any(data, "f.json").tracks[0].trace
    assert t.sample_time.tolist() == [1.0, 2.0, 4.0]
    assert [len(p) for p in paths(t)] == [1, 2, 1]
    assert paths(t)[1][1] == ("f", None, None, None)
    # A broken `jsprof` key is ignored, not trusted.
    doc = orjson.loads(data)
    doc["profiles"][0]["jsprof"] = {"version": 1, "counts": [1, 1], "timestamps": [0, 1]}
    t2 = read_any(orjson.dumps(doc), "f.json").tracks[0].trace
    assert t2.sample_time.tolist() == [1.0, 2.0, 4.0]


def test_unit_none_counts_and_empty_stacks():
    data = _foreign(
        {
            "type": "sampled",
            "name": "p",
            "unit": "none",
            "startValue": 0,
            "endValue": 5,
            "samples": [[0, 1], []],
            "weights": [3, 2],
        }
    )
    t = read_any(data, "f.json").tracks[0].trace
    assert t.num_samples == 5
    assert t.sample_stack.tolist()[3:] == [NONE, NONE]


def test_evented_profile():
    data = _foreign(
        {
            "type": "evented",
            "name": "ev",
            "unit": "milliseconds",
            "startValue": 0,
            "endValue": 10,
            "events": [
                {"type": "O", "at": 0, "frame": 0},
                {"type": "O", "at": 2, "frame": 1},
                {"type": "C", "at": 5, "frame": 1},
                {"type": "C", "at": 10, "frame": 0},
            ],
        }
    )
    t = read_any(data, "e.json").tracks[0].trace
    assert t.sample_time.tolist() == [0.0, 2.0, 5.0]
    assert [len(p) for p in paths(t)] == [1, 2, 1]


def _walk_events(depth: int, n: int) -> list[dict]:
    """main > rec x d > leaf, the sampled depth d walking down to `depth` and back up in
    `n` steps: each step opens and closes the recursion's frames to d at one time (no
    sample there), then the leaf for 1 ms (one sample of a stack of its own depth)."""
    ev = [{"type": "O", "at": 0, "frame": 0}]
    cur = t = 0
    for k in range(n):
        d = int(depth * (1 - abs(2 * k / n - 1)))
        for _ in range(cur, d):
            ev.append({"type": "O", "at": t, "frame": 1})
        for _ in range(d, cur):
            ev.append({"type": "C", "at": t, "frame": 1})
        cur = d
        ev += [{"type": "O", "at": t, "frame": 2}, {"type": "C", "at": t + 1, "frame": 2}]
        t += 1
    ev += [{"type": "C", "at": t, "frame": 1}] * cur + [{"type": "C", "at": t, "frame": 0}]
    return ev


WALK_FRAMES = [{"name": "main", "file": "a.js", "line": 1}, {"name": "rec", "file": "a.js",
               "line": 2}, {"name": "leaf", "file": "a.js", "line": 3}]


def test_a_deep_evented_profile_is_read_per_node(monkeypatch):
    """An evented profile's stacks were each made from the whole open stack (a tuple of
    it per sample, then every frame of every distinct stack interned): a recursion 30,000
    deep took 40 s to read 3,000 samples (tests/test_viewer_range.py's deep export, at
    load 24). Now each open frame is a node of a tree, interned once: the builder is asked
    once per node, not once per frame of every stack (here 2,000 deep, 400 samples:
    ~200,000 asks before, under 2,400 now)."""
    from jsprof.trace import TraceBuilder

    depth, n = 2000, 400
    data = _foreign({"type": "evented", "name": "deep", "unit": "milliseconds",
                     "startValue": 0, "endValue": n, "events": _walk_events(depth, n)},
                    frames=WALK_FRAMES)
    asks = [0]
    real = TraceBuilder.stack_id_from

    def counted(self, parent, frame_id):
        asks[0] += 1
        return real(self, parent, frame_id)

    monkeypatch.setattr(TraceBuilder, "stack_id_from", counted)
    t = read_any(data, "deep.speedscope.json").tracks[0].trace
    assert t.num_samples == n
    assert max(len(p) for p in paths(t)) == depth + 2
    assert asks[0] <= 2 * (depth + n), asks[0]


def test_evented_stacks_read_as_their_frame_lists_build():
    """The tree the evented reader keeps gives the trace `build_trace` makes of each
    sample's open frames as a list (the reader before), numbered the same: random opens
    and closes, two frame entries with one key (one frame), a pseudo frame alone (a
    marker) and under others (a frame), frames opened and closed at one time (no
    sample)."""
    from jsprof.formats._common import build_trace

    frames = [{"name": "main", "file": "a.js", "line": 1}, {"name": "f", "file": "a.js",
              "line": 5}, {"name": "f", "file": "a.js", "line": 5}, {"name": "g"},
              {"name": "(garbage collector)"}]
    keys = [(f["name"], f.get("file"), f.get("line"), None) for f in frames]
    rng = np.random.default_rng(4)
    markers = merged = 0
    for _ in range(20):
        ev, open_, t = [], [], 0
        for _ in range(300):
            t += int(rng.integers(0, 3))
            if open_ and rng.random() < 0.45:
                ev.append({"type": "C", "at": t, "frame": open_.pop()})
            else:
                fr = int(rng.integers(0, len(frames)))
                open_.append(fr)
                ev.append({"type": "O", "at": t, "frame": fr})
        ev += [{"type": "C", "at": t + 1, "frame": fr} for fr in reversed(open_)]
        # the reader before: each sample's open frames as a tuple, unique in first-use order
        index: dict[tuple, int] = {}
        skeys, times, cur, prev = [], [], [], None
        for e in ev:
            if prev is not None and e["at"] > prev and cur:
                skeys.append(index.setdefault(tuple(cur), len(index)))
                times.append(float(prev))
            prev = e["at"]
            if e["type"] == "O":
                cur.append(e["frame"])
            else:
                cur.pop()
        want = build_trace([[keys[i] for i in s] for s in index], np.array(skeys, np.int64),
                           np.array(times))
        got = read_any(_foreign({"type": "evented", "name": "r", "unit": "milliseconds",
                                 "startValue": 0, "endValue": t + 1, "events": ev},
                                frames=frames), "r.json").tracks[0].trace
        assert got.frames == want.frames and got.resources == want.resources
        for c in ("stack_parent", "stack_frame", "sample_stack", "sample_time"):
            assert getattr(got, c).tolist() == getattr(want, c).tolist(), c
        assert (got.sample_marker is None) == (want.sample_marker is None)
        if want.sample_marker is not None:
            assert got.sample_marker.tolist() == want.sample_marker.tolist()
            markers += 1
        merged += len(index) - len({tuple(keys[i] for i in s) for s in index})  # f and f
    assert markers and merged > 0, (markers, merged)  # the cases named were met


def test_gc_pseudo_frame_reads_as_marker():
    data = _foreign(
        {
            "type": "sampled",
            "name": "p",
            "unit": "milliseconds",
            "startValue": 0,
            "endValue": 2,
            "samples": [[0], [1]],
            "weights": [1, 1],
        },
        frames=[{"name": "main", "file": "a.js"}, {"name": "(garbage collector)"}],
    )
    t = read_any(data, "g.json").tracks[0].trace
    assert t.sample_stack.tolist()[1] == NONE
    assert t.sample_marker.tolist()[1] == MARKER_CODE["gc"]


GOOD = {
    "type": "sampled",
    "name": "p",
    "unit": "milliseconds",
    "startValue": 0,
    "endValue": 2,
    "samples": [[0], [0, 1]],
    "weights": [1, 1],
}


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda d: d.pop("shared"), "shared: missing"),
        (lambda d: d["shared"]["frames"][1].update(name=3), "shared.frames[1].name"),
        (lambda d: d["shared"]["frames"][0].update(line="x"), "shared.frames[0].line"),
        (lambda d: d["profiles"][0]["samples"].append([7]), "profiles[0].weights: has 2 entries"),
        (lambda d: d["profiles"][0]["samples"].__setitem__(1, [0, 9]), "profiles[0].samples[1]"),
        (lambda d: d["profiles"][0]["weights"].__setitem__(1, -1), "profiles[0].weights[1]"),
        (lambda d: d["profiles"][0]["weights"].__setitem__(0, "1"), "profiles[0].weights[0]"),
        (lambda d: d["profiles"][0].update(unit="bytes"), "profiles[0].unit: is bytes"),
        (lambda d: d["profiles"][0].update(unit="parsecs"), "profiles[0].unit"),
        (lambda d: d["profiles"][0].update(type="flat"), "profiles[0].type"),
        (lambda d: d.update(profiles=[]), "profiles: missing or empty"),
        (
            lambda d: d["profiles"].__setitem__(
                0,
                {
                    "type": "evented",
                    "name": "e",
                    "unit": "milliseconds",
                    "startValue": 0,
                    "endValue": 1,
                    "events": [
                        {"type": "O", "at": 0, "frame": 0},
                        {"type": "C", "at": 1, "frame": 1},
                    ],
                },
            ),
            "profiles[0].events[1]: closes frame 1",
        ),
    ],
)
def test_malformed_input_is_one_clear_line(change, expect):
    doc = orjson.loads(_foreign(dict(GOOD, samples=[[0], [0, 1]], weights=[1, 1])))
    change(doc)
    with pytest.raises(TraceFormatError) as e:
        read_any(orjson.dumps(doc), "bad.speedscope.json")
    msg = str(e.value)
    assert msg.startswith("bad.speedscope.json: ") and "\n" not in msg
    assert expect in msg


def test_cli_rejects_broken_file_with_one_line(tmp_path):
    bad = tmp_path / "bad.speedscope.json"
    doc = orjson.loads(_foreign(dict(GOOD)))
    doc["profiles"][0]["samples"][0] = "main"
    bad.write_bytes(orjson.dumps(doc))
    r = jsprof_cli("convert", str(bad), str(tmp_path / "out.folded"))
    assert r.returncode != 0
    assert "profiles[0].samples[0]" in one_line_error(r.stderr)


def test_totals_survive_merging():
    rec = jsprof.load(CHROMIUM[0])
    back = read_any(speedscope.write(rec), "x")
    assert totals(back.tracks[0].trace) == totals(rec.tracks[0].trace)
    assert np.array_equal(back.tracks[0].trace.sample_time, rec.tracks[0].trace.sample_time)
