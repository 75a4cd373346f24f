"""Sample times a recording cannot have (beyond 2**53 ms, or running backwards by more
than V8's jitter) are refused in one line naming file, field and index, by every reader
path of the jsprof format (C scanner, msgspec pieces, validating) alike; the `.cpuprofile`
reader bounds startTime plus its deltas the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from jsprof.errors import TraceFormatError
from jsprof.formats import _jsprof_typed, cpuprofile, detect, read_any
from jsprof.formats import jsprof as jsprof_format

DATA = Path(__file__).parent / "data"


def _text(times: list, ext: str = '{"formatVersion":1,"track":"main"}') -> bytes:
    samples = b",".join(
        orjson.dumps({"timestamp": t, "stackId": i % 2})
        if not isinstance(t, bytes)
        else b'{"timestamp":' + t + b',"stackId":0}'
        for i, t in enumerate(times)
    )
    return (
        b'{"resources":["a.js"],"frames":[{"name":"f","resourceId":0,"line":1}],'
        b'"stacks":[{"frameId":0},{"parentId":0,"frameId":0}],"samples":['
        + samples
        + b'],"jsprof":'
        + ext.encode()
        + b"}"
    )


def _paths(data: bytes, source: str, monkeypatch: pytest.MonkeyPatch) -> list:
    """What each reader path makes of `data`: an error message, or the sample times."""

    def run(read):
        try:
            return read().tracks[0].trace.sample_time.tolist()
        except TraceFormatError as e:
            return str(e)

    out = [run(lambda: jsprof_format.read_bytes(data, source))]  # C scanner first
    with monkeypatch.context() as m:
        m.setattr(_jsprof_typed, "_columns_at", lambda buf, start: None)  # msgspec pieces
        out.append(run(lambda: jsprof_format.read_bytes(data, source)))
    out.append(run(lambda: jsprof_format.recording_from_doc(orjson.loads(data), source)))
    return out


@pytest.mark.parametrize("big", [b"1e300", b"-1e300", b"9007199254740992", b"1e16"])
def test_a_sample_time_beyond_2_53_ms_is_refused_by_every_path(
    big: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    times = [0.5, 1.0, 2.0, 3.0, 4.0, big, 6.0]
    got = _paths(_text(times), "big.json", monkeypatch)
    assert got[0] == got[1] == got[2], got
    msg = got[0]
    assert isinstance(msg, str) and "\n" not in msg
    assert msg.startswith("big.json: samples[5].timestamp") and "2**53" in msg, msg
    # the same in a further track, named by its place
    sub = _text(times).decode()
    sub = sub[: sub.index(',"jsprof"')] + "}"
    ext = '{"formatVersion":1,"track":"main","tracks":[{"track":"two","trace":' + sub + "}]}"
    got = _paths(_text([0.0, 1.0], ext), "t.json", monkeypatch)
    assert got[0] == got[1] == got[2], got
    assert "jsprof.tracks[0].trace.samples[5].timestamp" in got[0], got[0]


def test_samples_out_of_time_order_are_refused_by_every_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forward = [float(i) for i in range(40)]
    got = _paths(_text(forward[::-1]), "rev.json", monkeypatch)
    assert got[0] == got[1] == got[2], got
    msg = got[0]
    assert isinstance(msg, str) and "\n" not in msg
    # 39, 38, ... : samples[11] is the first more than 10 ms before the latest (samples[0])
    assert msg.startswith("rev.json: samples[11].timestamp: is 28.0, 11 ms before samples[0]")
    assert "time order" in msg
    # one jump back well past the jitter, later in the file
    jump = forward[:20] + [3.0] + forward[21:]
    got = _paths(_text(jump), "jump.json", monkeypatch)
    assert got[0] == got[1] == got[2] and "samples[20].timestamp" in got[0], got


def test_jitter_backwards_within_the_tolerance_still_reads_on_every_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    times = [0.0, 1.0, 2.0, 1.5, 12.0, 2.5, 13.0]  # 12.0 -> 2.5: 9.5 ms back, kept
    got = _paths(_text(times), "j.json", monkeypatch)
    assert got == [times, times, times]


@pytest.mark.parametrize(
    ("key", "value"),
    [("timeOrigin", "1e300"), ("sampleInterval", "1e17"), ("requestedInterval", "-1e300")],
)
def test_other_time_fields_beyond_2_53_ms_are_refused_by_every_path(
    key: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ext = '{"formatVersion":1,"track":"main","' + key + '":' + value + "}"
    got = _paths(_text([0.0, 1.0], ext), "o.json", monkeypatch)
    assert got[0] == got[1] == got[2], got
    assert got[0].startswith(f"o.json: jsprof.{key}") and "2**53" in got[0], got[0]


@pytest.mark.parametrize(
    "ext",
    [
        '"sampleWeights":[1.0,1e300]',
        '"spans":{"start":[0],"end":[1e300],"frameId":[0],"parentId":[-1]}',
    ],
)
def test_weights_and_spans_beyond_2_53_ms_are_refused_by_every_path(
    ext: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = _paths(_text([0.0, 1.0], '{"formatVersion":1,' + ext + "}"), "w.json", monkeypatch)
    assert got[0] == got[1] == got[2], got
    assert got[0].startswith("w.json: jsprof.") and "2**53" in got[0], got[0]


def test_real_jsprof_and_chromium_files_still_read() -> None:
    files = [*DATA.glob("chromium/*.json"), *Path("/work/shared/fixtures").rglob("*.json")]
    read = 0
    for path in files:
        data = path.read_bytes()
        if detect(data, str(path)) is not jsprof_format.FORMAT:
            continue
        assert jsprof_format.read_bytes(data, str(path)).tracks, path
        read += 1
    assert read >= 3


def test_cpuprofile_deltas_summing_beyond_2_53_us_are_refused(tmp_path: Path) -> None:
    profile = {
        "nodes": [
            {
                "id": 1,
                "callFrame": {
                    "functionName": "(root)",
                    "scriptId": "0",
                    "url": "",
                    "lineNumber": -1,
                    "columnNumber": -1,
                },
                "children": [2],
            },
            {
                "id": 2,
                "callFrame": {
                    "functionName": "f",
                    "scriptId": "1",
                    "url": "a.js",
                    "lineNumber": 0,
                    "columnNumber": 0,
                },
            },
        ],
        "startTime": 0,
        "endTime": 10,
        "samples": [2, 2, 2, 2],
        "timeDeltas": [1, 2**62, 2**62, 2**62],  # the int64 sum wraps around to negative
    }
    data = orjson.dumps(profile)
    with pytest.raises(TraceFormatError) as e:
        read_any(data, "p.cpuprofile")  # the typed path
    assert str(e.value).startswith("p.cpuprofile: timeDeltas[1]") and "2**53" in str(e.value)
    with pytest.raises(TraceFormatError) as e2:
        cpuprofile.read(data, profile, "p.cpuprofile")  # the parsed-document path
    assert str(e2.value) == str(e.value)
    path = tmp_path / "p.cpuprofile"
    path.write_bytes(data)
    run = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", str(path)], capture_output=True, text=True
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and "timeDeltas[1]" in run.stderr, run.stderr


def test_report_refuses_a_reversed_file_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "rev.json"
    path.write_bytes(_text([float(i) for i in range(40)][::-1]))
    run = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", str(path)], capture_output=True, text=True
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and "samples[11].timestamp" in run.stderr, run.stderr


# ---- one rule for steps back, in every reader (issue 20) ---------------------------------

# 21 -> 8: 13 ms back, beyond V8's jitter; 21 -> 12: 9 ms back, within it.
STEP_BACK = [0.0, 1.0, 2.0, 20.0, 21.0, 8.0, 22.0]
JITTER = [0.0, 1.0, 2.0, 20.0, 21.0, 12.0, 22.0]
_ROOT = {"functionName": "(root)", "scriptId": "0", "url": "", "lineNumber": -1}
_F = {"functionName": "f", "scriptId": "1", "url": "file:///a.js", "lineNumber": 0}


def _deltas_us(times: list[float]) -> list[int]:
    us = [round(t * 1000) for t in times]
    return [b - a for a, b in zip([0, *us], us, strict=False)]


def _cpuprofile(times: list[float]) -> bytes:
    nodes = [
        {"id": 1, "callFrame": _ROOT, "children": [2]},
        {"id": 2, "callFrame": _F, "hitCount": len(times)},
    ]
    return orjson.dumps(
        {
            "nodes": nodes,
            "startTime": 0,
            "endTime": round(max(times) * 1000),
            "samples": [2] * len(times),
            "timeDeltas": _deltas_us(times),
        }
    )


def _chrome_trace(times: list[float]) -> bytes:
    base = {"ph": "P", "cat": "disabled-by-default-v8.cpu_profiler", "id": "0x1", "pid": 1}
    nodes = [{"id": 1, "callFrame": _ROOT}, {"id": 2, "callFrame": _F, "parent": 1}]
    data = {
        "cpuProfile": {"nodes": nodes, "samples": [2] * len(times)},
        "timeDeltas": _deltas_us(times),
    }
    return orjson.dumps(
        {
            "traceEvents": [
                {"name": "Profile", **base, "tid": 1, "ts": 0, "args": {"data": {"startTime": 0}}},
                {"name": "ProfileChunk", **base, "tid": 1, "ts": 0, "args": {"data": data}},
            ]
        }
    )


def _perfetto(times: list[float]) -> bytes:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2

    msg = pb2.Trace()
    first = msg.packet.add()
    first.trusted_packet_sequence_id = 1
    first.sequence_flags = 1
    first.thread_descriptor.pid, first.thread_descriptor.tid = 1, 1
    first.interned_data.function_names.add(iid=1, str=b"f")
    first.interned_data.frames.add(iid=1, function_name_id=1)
    first.interned_data.callstacks.add(iid=1, frame_ids=[1])
    pkt = msg.packet.add()
    pkt.trusted_packet_sequence_id = 1
    pkt.sequence_flags = 2
    pkt.streaming_profile_packet.callstack_iid.extend([1] * len(times))
    pkt.streaming_profile_packet.timestamp_delta_us.extend(_deltas_us(times))
    return msg.SerializeToString()


def _speedscope(times: list[float]) -> bytes:
    """jsprof's own key carries the times (speedscope's weights cannot go back)."""
    n = len(times)
    profile = {
        "type": "sampled",
        "name": "main",
        "unit": "milliseconds",
        "startValue": 0,
        "endValue": n,
        "samples": [[0]] * n,
        "weights": [1.0] * n,
        "jsprof": {"version": 1, "counts": [1] * n, "timestamps": times},
    }
    return orjson.dumps(
        {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": [{"name": "f", "file": "file:///a.js", "line": 1}]},
            "profiles": [profile],
        }
    )


READERS_WITH_TIMES = {
    "jsprof": lambda times: _text(times),
    "cpuprofile": _cpuprofile,
    "chrome-trace": _chrome_trace,
    "perfetto": _perfetto,
    "speedscope": _speedscope,
}


@pytest.mark.parametrize("fmt", list(READERS_WITH_TIMES))
def test_a_step_back_beyond_the_jitter_is_refused_by_every_reader(fmt: str) -> None:
    """`.cpuprofile` took it, then its jsprof JSON did not read back (issue 20)."""
    data = READERS_WITH_TIMES[fmt](STEP_BACK)
    assert detect(data, "x").name == fmt  # type: ignore[union-attr]
    if fmt == "speedscope":
        # The key is jsprof's only when it is consistent; out of order it is not, and the
        # file reads by its weights, in order, as from any other producer.
        rec = read_any(data, "back.speedscope.json")
        assert rec.tracks[0].trace.sample_time.tolist() == [float(i) for i in range(7)]
    else:
        with pytest.raises(TraceFormatError) as e:
            read_any(data, "back")
        msg = str(e.value)
        assert "\n" not in msg and "time order" in msg, msg
        where = {
            "jsprof": "back: samples[5].timestamp: is 8.0, 13 ms before samples[4]",
            "cpuprofile": "back: timeDeltas[5]: puts sample 5 13 ms before sample 4",
            "chrome-trace": "back: profile 1: timeDeltas[5]: puts sample 5 13 ms before sample 4",
            "perfetto": "back: sequence 1.timestamp_delta_us: puts sample 5 13 ms before sample 4",
        }[fmt]
        assert msg.startswith(where), msg
        return
    # What did read converts to jsprof JSON that reads back.
    again = read_any(jsprof_format.dumps(rec), "again.json")
    assert again.tracks[0].trace == rec.tracks[0].trace


@pytest.mark.parametrize("fmt", list(READERS_WITH_TIMES))
def test_jitter_back_reads_in_every_reader_and_its_jsprof_json_reads_back(fmt: str) -> None:
    rec = read_any(READERS_WITH_TIMES[fmt](JITTER), "jitter")
    trace = rec.tracks[0].trace
    assert trace.sample_time.tolist() == JITTER, fmt
    again = read_any(jsprof_format.dumps(rec), "again.json")
    assert again.tracks[0].trace == trace


def test_convert_refuses_a_cpuprofile_stepping_back_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "back.cpuprofile"
    src.write_bytes(_cpuprofile(STEP_BACK))
    run = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "convert", str(src), str(tmp_path / "out.json")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.count("\n") == 1 and "timeDeltas[5]" in run.stderr, run.stderr
    assert not (tmp_path / "out.json").exists()
