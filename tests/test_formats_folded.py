"""Folded stacks: the line format, per-stack totals through round trips, tracks, errors."""

from __future__ import annotations

import collections

import pytest

import jsprof
from formats_util import CHROMIUM, jsprof_cli, mixed_recording, one_line_error, totals
from jsprof.errors import TraceFormatError
from jsprof.formats import folded, read_any
from jsprof.trace import MARKER_CODE, NONE


def _normalise(t: collections.Counter) -> collections.Counter:
    """What folded keeps: names with `;`/newlines replaced, empty names as (anonymous)
    where the frame has no place (with one, `(anonymous) (url:line:col)` reads back
    empty), markers only on samples without JavaScript."""
    def name(n: str, placed: bool) -> str:
        if placed:
            return "" if n == "(anonymous)" else n
        return n or "(anonymous)"

    out: collections.Counter = collections.Counter()
    for (path, marker), c in t.items():
        if path is not None:
            path = tuple(
                (name(n, rest[0] is not None or rest[1] is not None)
                 .replace(";", ",").replace("\n", " "), *rest)
                for n, *rest in path
            )
            marker = NONE  # folded has no markers; only no-JS pseudo frames carry one
        out[(path, marker)] += c
    return out


@pytest.mark.parametrize("fixture", CHROMIUM, ids=lambda p: p.stem)
def test_cli_convert_and_back_keeps_per_stack_totals(fixture, tmp_path):
    out = tmp_path / "out.folded"
    r = jsprof_cli("convert", str(fixture), str(out))
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert lines == sorted(lines)
    for line in lines:
        stack, count = line.rsplit(" ", 1)
        assert int(count) > 0 and stack
    original = jsprof.load(fixture).tracks[0].trace
    assert sum(int(x.rsplit(" ", 1)[1]) for x in lines) == original.num_samples
    back = jsprof.load(out).tracks[0].trace
    assert totals(back, with_column=True) == _normalise(totals(original, with_column=True))


def test_frame_text_and_escaping():
    rec = mixed_recording()
    text = folded.write(rec).decode()
    assert "\r" not in text and all(ln.count(" ") >= 1 for ln in text.splitlines())
    assert "track:main;main (file:///app/0.js:1:1);f,g h (file:///app/0.js:5:3) " in text
    assert "(anonymous) (file:///app/0.js:9:0);Array.prototype.sort;" not in text
    assert "(anonymous) (file:///app/0.js:9:0);Array.prototype.sort 1" in text
    assert "track:worker 1;(garbage collector) 4" in text
    assert "track:main;(idle) 1" in text
    assert "track:main;(program) 1" in text


def test_tracks_and_no_js_samples_round_trip():
    rec = mixed_recording()
    back = read_any(folded.write(rec), "m.folded")
    assert [t.name for t in back.tracks] == ["main", "worker 1"]
    for a, b in zip(rec.tracks, back.tracks, strict=True):
        assert totals(b.trace, with_column=True) == _normalise(totals(a.trace, with_column=True))
    t = back.tracks[0].trace
    gc = (t.sample_stack == NONE) & (t.sample_marker == MARKER_CODE["gc"])
    assert int(gc.sum()) == 2


def test_single_track_has_no_prefix_and_reads_foreign_lines():
    data = b"main;work;leaf 5\n\nmain;idle 2\nmain 1\n"
    rec = read_any(data, "flamegraph.folded")
    assert [t.name for t in rec.tracks] == ["main"]
    t = rec.tracks[0].trace
    assert t.num_samples == 8
    assert [f.name for f in t.frames] == ["main", "work", "leaf", "idle"]
    assert t.resources == []
    text = folded.write(rec).decode()
    assert text == "main 1\nmain;idle 2\nmain;work;leaf 5\n"


def test_location_parsing_with_ports_in_urls():
    rec = read_any(b"f (http://h:8000/x.js:12:0) 2\ng (http://h:8000/x.js) 1\n", "u.folded")
    frames = rec.tracks[0].trace.frames
    res = rec.tracks[0].trace.resources
    assert [(f.name, res[f.resource_id], f.line, f.column) for f in frames] == [
        ("f", "http://h:8000/x.js", 12, None),
        ("g", "http://h:8000/x.js", None, None),
    ]


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (b"main;f\n", "line 1: expected `frame;frame;... COUNT`"),
        (b"main;f 3\nmain;g x\n", "line 2: expected"),
        (b"main;f 3\nmain;g -2\n", "line 2: expected"),
        (b"main;;f 3\n", "line 1: empty frame name"),
        (b"main 1\n\xff\xfe 3\n", "not UTF-8"),
        (b"\n  \n", "no stack lines"),
    ],
)
def test_malformed_input_is_one_clear_line(data, expect):
    with pytest.raises(TraceFormatError) as e:
        folded.read(data, None, "bad.folded")
    msg = str(e.value)
    assert msg.startswith("bad.folded: ") and "\n" not in msg
    assert expect in msg


def test_sniff_and_cli_error(tmp_path):
    assert folded.sniff(b"a;b 1\n", None)
    assert not folded.sniff(b"a;b\n", None)
    assert not folded.sniff(b"\n\x04\x08\x01 1\n", None)  # binary
    bad = tmp_path / "bad.folded"
    bad.write_bytes(b"main;f 3\nmain;g 4.5x 2 y\n")
    r = jsprof_cli("convert", str(bad), str(tmp_path / "o.speedscope.json"))
    assert r.returncode != 0
    assert "line 2" in one_line_error(r.stderr)


def test_sniffs_files_with_very_long_lines():
    deep = ";".join(f"fn{i} (file:///a/very/long/path/to/a/module.js:{i}:1)" for i in range(400))
    data = f"{deep} 3\nmain 1\n".encode()
    assert len(deep) > 4096 and folded.sniff(data, None)
    t = read_any(data, "deep.folded").tracks[0].trace
    assert t.num_samples == 4 and int(t.stack_depths().max()) == 400


def test_frame_with_url_and_line_only():
    # py-spy writes `name (file:line)`; a URL with a port but no line stays a URL.
    assert folded._parse_frame("busy_loop (busy.py:9)") == ("busy_loop", "busy.py", 9, None)
    assert folded._parse_frame("f (<frozen zipimport>:94)") == ("f", "<frozen zipimport>", 94, None)
    assert folded._parse_frame("g (a.js:3:7)") == ("g", "a.js", 3, 7)
    assert folded._parse_frame("h (http://x:8/a.js)") == ("h", "http://x:8/a.js", None, None)


def test_a_recording_with_no_samples_is_refused_in_one_line(tmp_path):
    # It was written as an empty file, which every reader, jsprof's too, refuses.
    from jsprof.trace import ProfilerTrace, Recording

    with pytest.raises(TraceFormatError, match="no samples"):
        folded.write(Recording.of(ProfilerTrace()))
    src = tmp_path / "empty.json"
    jsprof.save(Recording.of(ProfilerTrace()), src)
    out = tmp_path / "empty.folded"
    r = jsprof_cli("convert", str(src), str(out))
    assert r.returncode == 2 and "no samples" in one_line_error(r.stderr)
    assert not out.exists()


def test_a_merged_profile_keeps_its_counts_and_reads_back_beyond_the_expansion_limit(
    monkeypatch,
):
    # Folded stacks counted a merged profile's rows, not the samples they stand for; and
    # counts adding up beyond what jsprof expands were refused on reading.
    import numpy as np

    from jsprof import trace as model

    monkeypatch.setattr(model, "MAX_SAMPLES", 1000)
    b = model.TraceBuilder()
    r = b.resource_id("file:///a.js")
    main, f = b.frame_id("main", r, 1, 1), b.frame_id("f", r, 4, 1)
    for i in range(3):
        b.add_sample(float(i), b.stack_id([main, f] if i == 1 else [main]))
    trace = b.build()
    trace.sample_count = np.array([600, 500, 300], np.int64)
    out = folded.write(model.Recording.of(trace))
    assert out.decode().splitlines() == [
        "main (file:///a.js:1:1) 900",
        "main (file:///a.js:1:1);f (file:///a.js:4:1) 500",
    ]
    back = read_any(out, "m.folded").tracks[0].trace
    assert model.recorded_samples(back) == 1400 and back.num_samples == 2
    assert folded.write(model.Recording.of(back)) == out
    with pytest.raises(TraceFormatError, match=r"m\.folded: line 2: counts 1001 samples"):
        read_any(b"main 3\nmain;f 1001\n", "m.folded")
