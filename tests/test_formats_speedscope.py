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
