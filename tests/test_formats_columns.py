"""The C column reader/writer (`jsprof.formats._columns`) against the Python paths it
replaces (issue 16): floats written as orjson writes them and read as orjson reads them;
`dumps` byte-identical to orjson of `recording_to_doc` on real fixtures; every hostile or
unusual text read by the fast path gives exactly what the validating path gives (the same
Recording or the same one-line error)."""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

import jsprof
from jsprof.errors import JsprofError, TraceFormatError
from jsprof.formats import _columns, _jsprof_typed
from jsprof.formats import jsprof as jsprof_format
from jsprof.trace import MARKERS, ProfilerTrace, Recording, Track

DATA = Path(__file__).parent / "data"
FIXTURES = Path("/work/shared/fixtures")
sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from bench_trace import synthetic  # noqa: E402


def _float_sets(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {
        "random bits": np.frombuffer(rng.bytes(8 * n), np.float64),
        "sampling times": np.cumsum(rng.uniform(0.9, 1.1, n)),
        "whole microseconds": np.round(rng.uniform(0, 1e7, n) * 1000) / 1000,
        "whole nanoseconds": np.round(rng.uniform(0, 1e5, n) * 1e6) / 1e6,
        "tiny": rng.uniform(1e-7, 1e-3, n),
        "big integers": np.floor(rng.uniform(0, 1e17, n)),
        "powers of two": np.ldexp(1.0, rng.integers(-60, 60, n)) * rng.choice([1, 3, 0.5], n),
        "edges": np.array(
            [0.0, -0.0, 1e-5, 1e-4, 9.999999999999999e-6, 1e16, 9999999999999998.0, 5e-324,
             2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 0.3, 2**53, 2**53 + 2.0]
        ),
    }


def test_floats_are_written_as_orjson_writes_them_and_read_back_exactly() -> None:
    rng = np.random.default_rng(16)
    for name, values in _float_sets(rng, 100_000).items():
        values = values[np.isfinite(values)]
        values = np.concatenate([values, -values[:100]])
        ours = _columns.write_floats(values)
        assert ours == orjson.dumps(values.tolist()), name
        got = _columns.read_floats(ours, 1)
        assert got is not None and got[1] == len(ours) - 1, name
        back = np.frombuffer(got[0], np.float64)
        assert np.array_equal(back, values), name
        assert np.array_equal(np.signbit(back), np.signbit(values)), name


def test_numbers_are_read_as_orjson_reads_them() -> None:
    rnd = random.Random(11)
    texts = ["0", "-0", "0.0", "-0.0", "1e5", "1E+5", "2.5e-3", "123456789.123456789",
             "9007199254740993", "0.1e1", "1e-400", "4.9e-324", "1.7976931348623157e308"]
    for _ in range(30_000):
        digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 24)))
        text = digits.lstrip("0") or "0"
        if rnd.random() < 0.7:
            cut = rnd.randint(1, len(text))
            text = text[:cut] + "." + (text[cut:] or "0")
        if rnd.random() < 0.3:
            text += rnd.choice("eE") + rnd.choice(["", "+", "-"]) + str(rnd.randint(0, 30))
        texts.append(rnd.choice(["", "-"]) + text)
    for text in texts:
        want = float(orjson.loads(text))
        got = _columns.parse_float(text.encode() + b",")
        if got is None:
            # only integers beyond int64 are left to the other paths
            assert text.lstrip("-").isdigit() and abs(int(text)) >= 2**63, text
            continue
        assert got == want and (got != 0 or "." not in text or str(got) == str(want)), text
    for bad in ["01", "1.", ".5", "-", "1e", "1e+", "+1", "NaN", "Infinity", "0x10", "1"]:
        assert _columns.parse_float(bad.encode()) is None, bad  # "1": no delimiter follows


def _old_dumps(rec: Recording) -> bytes:
    return orjson.dumps(jsprof_format.recording_to_doc(rec), option=orjson.OPT_SERIALIZE_NUMPY)


def _real_recordings() -> list[tuple[str, Recording]]:
    out = []
    paths = sorted(p for p in [*DATA.rglob("*"), *FIXTURES.rglob("*")] if p.is_file())
    for p in paths:
        try:
            out.append((str(p), jsprof.load(p)))
        except JsprofError:
            continue  # not a trace (a page, a script, a broken test input)
    assert len(out) >= 10, "the real fixtures are missing"
    return out


def _with_columns(rec: Recording) -> Recording:
    """A further track carrying weights and lines: every column the writer has."""
    t = rec.tracks[0]
    tr = copy.copy(t.trace)
    n = tr.num_samples
    tr.sample_weight = np.linspace(0.1, 3.3, n)
    tr.sample_line = (np.arange(n, dtype=np.int32) % 7).astype(np.int32)
    origin = (t.time_origin or 1.7e12) + 0.25  # unknown (None) for files with no epoch clock
    more = Track(t.name + " again", tr, time_origin=origin, engine="quickjs")
    return Recording([*rec.tracks, more])


def test_dumps_is_byte_identical_to_orjson_of_the_dicts_on_real_traces() -> None:
    recs = _real_recordings()
    recs += [(f"{name} + weights", _with_columns(r)) for name, r in recs[:8]]
    for kw in (dict(idle=0.0), dict(idle=0.4), dict(idle=0.02, markers=True)):
        recs.append((f"synthetic {kw}", synthetic(20_000, 500, **kw)))
    for name, rec in recs:
        new = jsprof_format.dumps(rec)
        assert new == _old_dumps(rec), name
        back = jsprof_format.read_bytes(new, name)
        assert [t.trace for t in back.tracks] == [t.trace for t in rec.tracks], name
        for a, b in zip(back.tracks, rec.tracks, strict=True):
            for col in ("sample_weight", "sample_line", "sample_marker"):
                x, y = getattr(a.trace, col), getattr(b.trace, col)
                assert (x is None) == (y is None) and (x is None or np.array_equal(x, y)), name


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_time_or_weight_is_refused_in_one_line(bad: float) -> None:
    trace = ProfilerTrace(["a.js"], [("f", 0, 1, 1)], [-1], [0], [0.0, 1.0, 2.0], [0, -1, 0])
    broken = copy.copy(trace)
    broken.sample_time = np.array([0.0, bad, 2.0])
    with pytest.raises(TraceFormatError) as e:
        jsprof_format.dumps(Recording.of(broken))
    msg = str(e.value)
    assert "\n" not in msg and "samples[1].timestamp" in msg and "finite" in msg
    weighted = copy.copy(trace)
    weighted.sample_weight = np.array([1.0, 1.0, bad])
    rec = Recording([Track("main", trace), Track("two", weighted)])
    with pytest.raises(TraceFormatError) as e:
        jsprof_format.dumps(rec)
    msg = str(e.value)
    assert "\n" not in msg and "jsprof.tracks[0].sampleWeights[2]" in msg


def _validating(data: bytes, source: str):
    """What the validating path alone makes of `data`: a Recording or an error message."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        doc = None
    try:
        if doc is None:
            jsprof_format.parse_json(data, source)
        return jsprof_format.recording_from_doc(doc, source)
    except TraceFormatError as e:
        return str(e)


def _fast(data: bytes, source: str):
    try:
        return jsprof_format.read_bytes(data, source)
    except TraceFormatError as e:
        return str(e)


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if len(a.tracks) != len(b.tracks):
        return False
    for x, y in zip(a.tracks, b.tracks, strict=True):
        if x.trace != y.trace or x.name != y.name or x.time_origin != y.time_origin:
            return False
        for col in ("sample_weight", "sample_line", "sample_marker"):
            u, v = getattr(x.trace, col), getattr(y.trace, col)
            if (u is None) != (v is None) or (u is not None and not np.array_equal(u, v)):
                return False
    return True


SAMPLE_EDITS = [
    b'{"timestamp":true,"stackId":0}',
    b'{"timestamp":null,"stackId":0}',
    b'{"timestamp":"1","stackId":0}',
    b'{"timestamp":NaN,"stackId":0}',
    b'{"timestamp":Infinity}',
    b'{"timestamp":1e400}',
    b'{"timestamp":-1e400,"stackId":0}',
    b'{"timestamp":1,"stackId":true}',
    b'{"timestamp":1,"stackId":false}',
    b'{"timestamp":1,"stackId":null}',
    b'{"timestamp":1,"stackId":1.0}',
    b'{"timestamp":1,"stackId":1e0}',
    b'{"timestamp":1,"stackId":-1}',
    b'{"timestamp":1,"stackId":99999999999999999999999}',
    b'{"timestamp":1,"stackId":9223372036854775808}',
    b'{"timestamp":1,"stackId":2147483648}',
    b'{"timestamp":1,"stackId":[0]}',
    b'{"timestamp":1,"stackId":{"a":0}}',
    b'{"stackId":0}',
    b"{}",
    b"[]",
    b"1",
    b"null",
    b'{"timestamp":1,"marker":"script"}',
    b'{"timestamp":1,"marker":"scripts"}',
    b'{"timestamp":1,"marker":null}',
    b'{"timestamp":1,"marker":1}',
    b'{"timestamp":1,"marker":"gc","stackId":0}',
    b'{"timestamp":1,"other":[1,{"x":"]"}],"stackId":0}',
    b'{"timestamp":1,"timestamp":2}',
    b'{"stackId":0,"stackId":1,"timestamp":2}',
    b'{"time\\u0073tamp":1}',
    b'{ "stackId" : 0 , "timestamp" : 12.5 }',
    b'{"timestamp":01}',
    b'{"timestamp":1.}',
    b'{"timestamp":-0}',
    b'{"timestamp":-0.0}',
    b'{"timestamp":123456789012345678901234567890}',
    b'{"timestamp":0.30000000000000004441}',
    b'{"timestamp":1,"stackId":0,}',
    b'{"timestamp":1 "stackId":0}',
    b'{"timestamp":1,"stackId":0',
    b'{"timestamp":1,"stackId":0}}',
    b"[" * 2000,
]


def _trace_text(samples: list[bytes], idle_gap: bytes = b",") -> bytes:
    return (
        b'{"resources":["a.js"],"frames":[{"name":"f","resourceId":0,"line":1}],'
        b'"stacks":[{"frameId":0},{"parentId":0,"frameId":0}],"samples":['
        + idle_gap.join(samples)
        + b'],"jsprof":{"formatVersion":1,"track":"main","timeOrigin":5.0}}'
    )


def test_every_hostile_sample_reads_as_the_validating_path_reads_it() -> None:
    good = [b'{"timestamp":0.5,"stackId":1}', b'{"timestamp":1.5}', b'{"timestamp":2,"stackId":0}']
    cases = []
    for edit in SAMPLE_EDITS:
        for pos in range(len(good) + 1):
            cases.append(_trace_text(good[:pos] + [edit] + good[pos:]))
    cases.append(_trace_text([]))
    cases.append(_trace_text(good, b" ,\n\t"))
    cases.append(_trace_text(good).replace(b'"samples":[', b'"samples" :\n [ '))
    for i, data in enumerate(cases):
        want, got = _validating(data, f"case{i}.json"), _fast(data, f"case{i}.json")
        assert _same(want, got), (data[-200:], want, got)
        if isinstance(got, str):
            assert "\n" not in got and got.startswith(f"case{i}.json: ")


def test_truncated_and_mutated_real_files_read_as_the_validating_path_reads_them() -> None:
    rnd = random.Random(5)
    seeds = [
        (DATA / "chromium" / "trace-basic.json").read_bytes(),
        (DATA / "chromium" / "trace-idle.json").read_bytes(),
        jsprof_format.dumps(_with_columns(synthetic(300, 40, idle=0.3, markers=True))),
    ]
    tokens = [b"true", b"null", b"1e999", b"-1", b"1.5", b'"x"', b"[", b"]", b"{", b"}", b",",
              b"99999999999999999999", b"NaN", b" ", b'"stackId":', b'"timestamp":']
    checked = 0
    for seed in seeds:
        start = seed.index(b'"samples"')
        for _ in range(150):
            data = bytearray(seed)
            kind = rnd.random()
            pos = rnd.randrange(start, len(data))
            if kind < 0.3:
                del data[pos:]
            elif kind < 0.6:
                data[pos : pos + rnd.randint(1, 4)] = rnd.choice(tokens)
            elif kind < 0.8:
                data[pos:pos] = rnd.choice(tokens)
            else:
                del data[pos : pos + rnd.randint(1, 6)]
            data = bytes(data)
            want, got = _validating(data, "m.json"), _fast(data, "m.json")
            assert _same(want, got), (data[max(0, pos - 80) : pos + 80], want, got)
            checked += 1
    assert checked == 450


def test_the_c_scanner_reads_what_it_is_given_and_nothing_around_it() -> None:
    text = b'xx[{"timestamp":1.25,"stackId":3,"marker":"gc"},{"timestamp":2}]yy'
    got = _columns.read_samples(text, 3, 4, jsprof_format._MARKER_JSON)
    assert got is not None
    times, stacks, markers, end = got
    assert np.frombuffer(times).tolist() == [1.25, 2.0]
    assert np.frombuffer(stacks, np.int32).tolist() == [3, -1]
    assert np.frombuffer(markers, np.int8).tolist() == [1, -1]
    assert text[end : end + 1] == b"]" and end == len(text) - 3
    # ids at or beyond the stacks table, a start outside the buffer, every truncation
    assert _columns.read_samples(text, 3, 3, jsprof_format._MARKER_JSON) is None
    for start in (-1, len(text) + 1, 10**12):
        assert _columns.read_samples(text, start, 4, jsprof_format._MARKER_JSON) is None
    body = text[:-2]
    for cut in range(3, len(body) - 1):
        assert _columns.read_samples(body[:cut], 3, 4, jsprof_format._MARKER_JSON) is None
    ints = b"[1, -2 ,3,9223372036854775807,-9223372036854775808]"
    got = _columns.read_ints(ints, 1)
    assert got is not None and np.frombuffer(got[0], np.int64).tolist() == orjson.loads(ints)
    for bad in (b"[1,2", b"[1,,2]", b"[1.0]", b"[true]", b"[9223372036854775808]", b"[01]"):
        assert _columns.read_ints(bad, 1) is None, bad


def test_files_jsprof_writes_are_read_by_the_c_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The msgspec pieces and the validating path are fallbacks only: a file as jsprof and
    Chromium write it (one track or several, idle samples, markers) never reaches them."""

    def no(*args, **kwargs):
        raise AssertionError("fell back")

    monkeypatch.setattr(_jsprof_typed, "_sample_columns", no)
    monkeypatch.setattr(jsprof_format, "recording_from_doc", no)
    rec = _with_columns(synthetic(5000, 300, idle=0.3, markers=True))
    back = jsprof_format.read_bytes(jsprof_format.dumps(rec), "x.json")
    assert _same(back, rec)
    for name in ("trace-basic.json", "trace-idle.json", "trace-builtins.json"):
        path = DATA / "chromium" / name
        assert jsprof_format.read_bytes(path.read_bytes(), name).tracks[0].trace.num_samples


def test_writer_threads_write_the_same_bytes_and_report_the_first_bad_sample() -> None:
    rng = np.random.default_rng(3)
    n = 450_001  # several shares of SAMPLES_PER_THREAD, the last one longer
    times = np.cumsum(rng.uniform(0.9, 1.1, n))
    times[[7, n // 2, n - 1]] = [5e-324, 1e-7, 2.0**60]  # values dtoa writes, in each share
    stacks = rng.integers(-1, 1000, n).astype(np.int32)
    markers = rng.integers(-1, 6, n).astype(np.int8)
    names = jsprof_format._MARKER_JSON
    one = _columns.write_samples(b"{", times, stacks, markers, names, b"}", 1)
    for threads in (2, 3, 4, 8):
        assert _columns.write_samples(b"{", times, stacks, markers, names, b"}", threads) == one
    doc = orjson.loads(one[1:-1])
    assert len(doc) == n and doc[n // 2] == {
        "timestamp": 1e-7, **({"stackId": int(stacks[n // 2])} if stacks[n // 2] >= 0 else {}),
        **({"marker": MARKERS[markers[n // 2]]} if markers[n // 2] >= 0 else {}),
    }
    broken = times.copy()
    broken[[n - 5, 300_000]] = [np.nan, np.inf]
    with pytest.raises(ValueError) as e:
        _columns.write_samples(b"", broken, stacks, markers, names, b"", 4)
    assert e.value.args == ("timestamp", 300_000)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_save_streams_the_same_bytes_and_refuses_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    """`jsprof.save` writes the samples from the columns to the file in chunks of 65,536
    (threads format while one writes): the file holds exactly `dumps`' bytes."""
    from jsprof.formats import _jsprof_write  # the writer's module (numpy-free)

    monkeypatch.setattr(_jsprof_write, "_WRITERS", threads)
    out = tmp_path / "out.jsprof.json"
    for n in (1, 65_536, 65_537, 200_001):
        rec = _with_columns(synthetic(n, 60, idle=0.3, markers=n > 1))
        jsprof.save(rec, out)
        assert out.read_bytes() == jsprof_format.dumps(rec) == _old_dumps(rec), n
    trace = copy.copy(rec.tracks[0].trace)
    trace.sample_time = trace.sample_time.copy()
    trace.sample_time[[150_000, 70_000]] = [np.nan, np.inf]
    with pytest.raises(TraceFormatError) as e:
        jsprof.save(Recording.of(trace), tmp_path / "bad.json")
    msg = str(e.value)
    assert "\n" not in msg and "samples[70000].timestamp: inf is not a finite number" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsprof.json"]  # no half file
    with pytest.raises(JsprofError) as e:
        jsprof.save(rec, "/dev/full", format="jsprof")
    assert str(e.value) == "/dev/full: cannot write (No space left on device)"


def test_the_c_source_is_clean_under_wall_wextra() -> None:
    import shutil
    import subprocess
    import sysconfig

    from test_build import ROOT, load_setup

    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc is not None, "a C compiler is needed"
    r = subprocess.run(
        [cc, "-fsyntax-only", "-Werror", *load_setup().OWN_CFLAGS,
         "-I", sysconfig.get_paths()["include"],
         str(ROOT / "src" / "jsprof" / "formats" / "_columns.c")],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr[-3000:]
