"""Fuzzing every reader (issue 11): mutated real files raise nothing but a one-line
JsprofError, within the time limit; what reads back writes back the same.

Seeds are real files: Chromium's own ProfilerTrace files, `node --cpu-prof` and PrimJS
profiles, py-spy's speedscope and folded output, @datadog/pprof's pprof, a source map made
by terser, and jsprof's own output for the formats only jsprof writes here (Chrome trace,
Perfetto), also of a real `jsprof instrument` run (QuickJS) for the spans. Mutations:
truncation, byte flips, byte runs inserted or deleted, and for JSON a key deleted, a value
swapped for another type, a huge or negative number, deep nesting.

Profiles (environment variable JSPROF_FUZZ): `short` (default, part of `make test`: a few
dozen cases per reader) and `fuzz` (`make fuzz`: 10,000 cases per reader).
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import re
import subprocess
import warnings
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsprof
from jsprof import sourcemap_files
from jsprof import trace as trace_model
from jsprof.errors import JsprofError
from jsprof.formats import FORMATS, detect
from jsprof.io import read_input

DATA = Path(__file__).parent / "data"
TERSER = Path(__file__).parent / "js" / "node_modules" / ".bin" / "terser"

settings.register_profile(
    "short",
    max_examples=25,
    deadline=10_000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
settings.register_profile(
    "fuzz",
    max_examples=10_000,
    deadline=10_000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile(os.environ.get("JSPROF_FUZZ", "short"))
if os.environ.get("JSPROF_FUZZ_EXAMPLES"):  # e.g. a longer run than `short` while debugging
    PROFILE = settings(PROFILE, max_examples=int(os.environ["JSPROF_FUZZ_EXAMPLES"]))

# Bounded memory: counts in a file (pprof, folded, PrimJS hitCounts, speedscope weights)
# may not expand past this many samples while fuzzing.
FUZZ_MAX_SAMPLES = 2_000_000


@pytest.fixture(autouse=True, scope="module")
def _small_expansion_limit():
    saved = trace_model.MAX_SAMPLES
    trace_model.MAX_SAMPLES = FUZZ_MAX_SAMPLES
    yield
    trace_model.MAX_SAMPLES = saved


def _own(fmt: str, src: Path | bytes) -> bytes:
    """jsprof's output in format `fmt` for a real input (a file, or a file's bytes)."""
    rec = jsprof.load(io.BytesIO(src) if type(src) is bytes else src)
    return FORMATS[fmt].write(rec)  # type: ignore[misc]


# A real `jsprof instrument` run (QuickJS): its calls as spans and its per-sample weights
# (not the gaps between its samples), also as it reads back from Chrome trace.
INSTRUMENTED = DATA / "instrument" / "shapes-instrumented.json"
INSTRUMENTED_CT = _own("chrome-trace", INSTRUMENTED)


SEEDS: dict[str, list[bytes]] = {
    "jsprof": [
        (DATA / "chromium" / "trace-basic.json").read_bytes(),
        (DATA / "chromium" / "trace-idle.json").read_bytes(),
        _own("jsprof", DATA / "node" / "bench.cpuprofile"),
        _own("jsprof", INSTRUMENTED_CT),
        INSTRUMENTED.read_bytes(),  # weighted: every writer's round trip with weights
    ],
    "cpuprofile": [(DATA / "node" / "bench.cpuprofile").read_bytes()],
    "primjs": [(DATA / "primjs" / "profile-interval100.json").read_bytes()],
    "chrome-trace": [
        _own("chrome-trace", DATA / "chromium" / "trace-builtins.json"),
        INSTRUMENTED_CT,
    ],
    "speedscope": [
        (DATA / "speedscope" / "py-spy.speedscope.json").read_bytes(),
        _own("speedscope", DATA / "chromium" / "trace-basic.json"),
    ],
    "folded": [
        (DATA / "folded" / "py-spy-raw.folded").read_bytes(),
        _own("folded", DATA / "chromium" / "trace-basic.json"),
    ],
    "pprof": [
        (DATA / "pprof" / "datadog-pprof-node20.pb.gz").read_bytes(),
        gzip.decompress((DATA / "pprof" / "datadog-pprof-node20.pb.gz").read_bytes()),
        _own("pprof", DATA / "chromium" / "trace-builtins.json"),
        _own("pprof", INSTRUMENTED),  # weights that are not the gaps between samples
    ],
    "perfetto": [
        _own("perfetto", DATA / "chromium" / "trace-builtins.json"),
        _own("perfetto", INSTRUMENTED),
    ],
    "otlp": [
        _own("otlp", DATA / "chromium" / "trace-builtins.json"),
        _own("otlp", INSTRUMENTED),
    ],
    "otlp-json": [
        _own("otlp-json", DATA / "chromium" / "trace-idle.json"),
        _own("otlp-json", INSTRUMENTED),
    ],
}


# ---- mutations ---------------------------------------------------------------------------

SWAPS = [
    None,
    True,
    False,
    "",
    "x",
    0,
    -1,
    1.5,
    2**63,
    -(2**63) - 1,
    2**70,
    1e308,
    -1e308,
    [],
    {},
    [None],
    {"": None},
]


def _paths(doc, prefix=(), out=None, limit=400):
    """Paths to values in a JSON document (sampled breadth, capped)."""
    if out is None:
        out = []
    if len(out) >= limit:
        return out
    out.append(prefix)
    if isinstance(doc, dict):
        for k, v in list(doc.items())[:20]:
            _paths(v, (*prefix, k), out, limit)
    elif isinstance(doc, list):
        for i in sorted({0, 1, len(doc) // 2, len(doc) - 1} & set(range(len(doc)))):
            _paths(doc[i], (*prefix, i), out, limit)
    return out


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def json_mutation(draw, doc):
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    path = draw(st.sampled_from(paths))
    kind = draw(st.sampled_from(["delete", "swap", "nest", "duplicate"]))
    if not path:
        return json.dumps(draw(st.sampled_from(SWAPS))).encode()
    parent, key = _get(doc, path[:-1]), path[-1]
    if kind == "delete":
        del parent[key]
    elif kind == "swap":
        parent[key] = draw(st.sampled_from(SWAPS))
    elif kind == "nest":
        depth = draw(st.sampled_from([3, 40, 1100, 3000]))
        v = parent[key]
        for _ in range(depth):
            v = [v]
        parent[key] = v
    elif isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
    else:
        parent[key] = [parent[key], parent[key]]
    try:
        return json.dumps(doc).encode()
    except (ValueError, RecursionError):
        return b"[" * 5000


@st.composite
def byte_mutation(draw, data: bytes):
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
    n = len(data)
    if kind == "truncate":
        return data[: draw(st.integers(0, max(n - 1, 0)))]
    pos = draw(st.integers(0, max(n - 1, 0)))
    if kind == "flip":
        count = draw(st.integers(1, 8))
        out = bytearray(data)
        for _ in range(count):
            i = draw(st.integers(0, max(n - 1, 0)))
            if out:
                out[i] = draw(st.integers(0, 255))
        return bytes(out)
    if kind == "insert":
        return data[:pos] + draw(st.binary(min_size=1, max_size=16)) + data[pos:]
    return data[:pos] + data[pos + draw(st.integers(1, 64)) :]


def mutated(name: str):
    seeds = SEEDS[name]
    strategies = [byte_mutation(s) for s in seeds]
    for s in seeds:
        raw = gzip.decompress(s) if s[:2] == b"\x1f\x8b" else s
        if raw.lstrip()[:1] in (b"{", b"["):
            strategies.append(json_mutation(orjson.loads(raw)))
        if s[:2] == b"\x1f\x8b":  # the mutation inside the gzip layer
            strategies.append(byte_mutation(raw).map(lambda b: gzip.compress(b, mtime=0)))
    return st.one_of(strategies)


# ---- properties --------------------------------------------------------------------------


def _one_line(e: JsprofError) -> None:
    msg = str(e)
    assert msg and "\n" not in msg and "Traceback" not in msg, repr(msg)


def _reads_or_says_why(data: bytes) -> None:
    """Read as the CLI does (gzip, sniffing, the reader); if it reads, its own format
    writes it, and that output reads back and writes the same bytes again."""
    try:
        rec = jsprof.load(io.BytesIO(data))
    except JsprofError as e:
        _one_line(e)
        return
    # as jsprof reads it (a gzip member's trailing bytes are not a second member to it)
    raw = read_input(io.BytesIO(data))[0]
    fmt = detect(raw, "fuzz")
    if fmt is None or fmt.write is None:
        return
    try:
        out = fmt.write(rec)
    except JsprofError as e:  # e.g. too many tracks for a one-thread format
        _one_line(e)
        return
    again = fmt.write(jsprof.load(io.BytesIO(out)))
    assert again == out, f"{fmt.name}: write(read(x)) is not stable"


def test_a_folded_file_that_parses_as_protobuf_wire_reads_back_as_folded():
    """make fuzz: a folded file starting `":` read as folded, and the folded jsprof wrote of
    it sniffed as pprof (text that happens to parse as wire fields) and failed to read."""
    data = (b'":<module> (py_spy_busy.py:27);main (py_spy_busy.py:21);busy_loop '
            b'(py_spy_busy.py:9) 73\n<module> (py_spy_busy.py:27);main (py_spy_busy.py:22);'
            b'light_work (py_spy_busy.py:14) 1\n')
    assert detect(data, "t").name == "folded"
    _reads_or_says_why(data)
    out = FORMATS["folded"].write(jsprof.load(io.BytesIO(data)))
    assert detect(out, "t").name == "folded"


READERS = list(SEEDS)


@pytest.mark.parametrize("name", READERS)
def test_mutated_files_raise_only_one_line_errors(name):
    @settings(PROFILE)
    @given(mutated(name))
    def run(data):
        _reads_or_says_why(data)

    run()


@pytest.mark.parametrize(
    "name,fmt",
    [
        ("jsprof", "jsprof"),
        ("cpuprofile", "cpuprofile"),
        ("primjs", "cpuprofile"),
        ("chrome-trace", "chrome-trace"),
        ("speedscope", "speedscope"),
        ("folded", "folded"),
        ("pprof", "pprof"),
        ("perfetto", "perfetto"),
        ("otlp", "otlp"),
        ("otlp-json", "otlp-json"),
    ],
)
def test_round_trip_of_each_seed_is_stable_in_every_writable_format(name, fmt):
    for seed in SEEDS[name]:
        rec = jsprof.load(io.BytesIO(seed))
        for out_fmt in FORMATS.values():
            if out_fmt.write is None or out_fmt.read is None:
                continue
            if len(rec.tracks) > 1 and out_fmt.name == "cpuprofile":
                continue
            out = out_fmt.write(rec)
            again = out_fmt.write(jsprof.load(io.BytesIO(out)))
            assert again == out, f"{name} -> {out_fmt.name}: not stable"


# ---- source maps -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_map(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("map")
    (d / "hot.js").write_text((DATA / "quickjs" / "hot.js").read_text())
    assert TERSER.exists(), f"{TERSER} missing: `make test` installs tests/js (npm ci)"
    subprocess.run(
        [str(TERSER), "hot.js", "--compress", "--mangle", "--source-map", "-o", "hot.min.js"],
        cwd=d,
        check=True,
    )
    return (d / "hot.min.js.map").read_bytes()


@pytest.mark.npm
def test_mutated_source_maps_raise_only_one_line_errors(real_map, tmp_path):
    doc = orjson.loads(real_map)
    path = tmp_path / "m.js.map"

    @settings(PROFILE)
    @given(st.one_of(byte_mutation(real_map), json_mutation(doc)))
    def run(data):
        path.write_bytes(data)
        try:
            sm = sourcemap_files.load_map(path)
        except JsprofError as e:
            _one_line(e)
            return
        for line in (0, 1, 2, 10**9):
            for col in (0, 1, 5, 10**9):
                sm.lookup(line, col)
                sm.lookup(line, col, named=False)
                sm.source_index(line, col)
            sm.line_of(line)

    run()


# ---- findings of `make fuzz`, each as a small hand-made file ---------------------------


def _stable(data: bytes) -> bytes:
    """write(read(x)), asserting that reading and writing that again gives the same bytes."""
    fmt = detect(data, "finding")
    assert fmt is not None and fmt.write is not None
    out = fmt.write(jsprof.load(io.BytesIO(data)))
    assert fmt.write(jsprof.load(io.BytesIO(out))) == out, f"{fmt.name}: not stable"
    return out


def _chunked(nodes: list[dict], samples: list[int], start: int = 0) -> bytes:
    base = {"ph": "P", "cat": "disabled-by-default-v8.cpu_profiler", "id": "0x1", "pid": 1}
    data = {"cpuProfile": {"nodes": nodes, "samples": samples}, "timeDeltas": [100] * len(samples)}
    return orjson.dumps(
        {
            "traceEvents": [
                {
                    "name": "Profile",
                    **base,
                    "tid": 1,
                    "ts": start,
                    "args": {"data": {"startTime": start}},
                },
                {"name": "ProfileChunk", **base, "tid": 1, "ts": start, "args": {"data": data}},
            ]
        }
    )


def _cf(name: str, line: int = 0) -> dict:
    return {"functionName": name, "scriptId": 1, "url": "file:///a.js", "lineNumber": line}


def test_chrome_trace_with_a_stack_no_sample_uses_writes_back_stably():
    # Node 2 is never sampled (chunks only carry sampled nodes, so it is not written back)
    # and node 3 lost its parent: the stacks were numbered differently on the way back.
    nodes = [
        {"id": 1, "callFrame": {"functionName": "(root)", "scriptId": 0, "url": ""}},
        {"id": 2, "callFrame": _cf("unused", 4), "parent": 1},
        {"id": 3, "callFrame": _cf("main", 9)},
        {"id": 4, "callFrame": _cf("leaf", 12), "parent": 3},
    ]
    out = _stable(_chunked(nodes, [4, 3, 4]))
    assert b"unused" not in out


SPEEDSCOPE = {
    "$schema": "https://www.speedscope.app/file-format-schema.json",
    "shared": {"frames": [{"name": "main", "file": "a.js", "line": 1}, {"name": "f"}]},
    "profiles": [
        {
            "type": "sampled",
            "name": "main",
            "unit": "milliseconds",
            "startValue": 0,
            "endValue": 3,
            "samples": [[0, 1], [0]],
            "weights": [2, 1],
            "jsprof": {"version": 1, "counts": [2, 1], "timestamps": [0.0, 1.0, 2.0]},
        }
    ],
}


@pytest.mark.parametrize("bad", [2**63, None, True, 1e300])
def test_speedscope_jsprof_timestamps_a_writer_cannot_write_back_are_not_used(bad):
    # 2**63 was written as a startValue its own reader refuses; null became NaN and then
    # null weights. Such a key is not jsprof's: the file reads by its weights.
    doc = copy.deepcopy(SPEEDSCOPE)
    doc["profiles"][0]["jsprof"]["timestamps"][0] = bad
    data = orjson.dumps(doc)
    rec = jsprof.load(io.BytesIO(data))
    assert rec.tracks[0].trace.sample_time.tolist() == [0.0, 2.0]  # the weights' layout
    _stable(data)


def test_speedscope_weights_beyond_2_53_ms_are_refused():
    doc = copy.deepcopy(SPEEDSCOPE)
    del doc["profiles"][0]["jsprof"]
    doc["profiles"][0]["weights"] = [1e300, 1e300]
    with pytest.raises(JsprofError, match=r"profiles\[0\]\.weights: add up to more than 2\*\*53"):
        jsprof.load(io.BytesIO(orjson.dumps(doc)))


def test_speedscope_evented_times_beyond_2_53_ms_are_refused():
    doc = copy.deepcopy(SPEEDSCOPE)
    doc["profiles"][0] = {
        "type": "evented",
        "name": "main",
        "unit": "milliseconds",
        "startValue": 0,
        "endValue": 1e300,
        "events": [{"type": "O", "at": 0, "frame": 0}, {"type": "C", "at": 1e300, "frame": 0}],
    }
    with pytest.raises(JsprofError, match=r"profiles\[0\]\.events\[1\]\.at: is 1e\+300"):
        jsprof.load(io.BytesIO(orjson.dumps(doc)))


def _perfetto(ref_us: int, deltas: list[int]) -> bytes:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2

    msg = pb2.Trace()
    first = msg.packet.add()
    first.trusted_packet_sequence_id = 1
    first.sequence_flags = 1
    first.thread_descriptor.pid, first.thread_descriptor.tid = 1, 1
    first.thread_descriptor.reference_timestamp_us = ref_us
    first.interned_data.function_names.add(iid=1, str=b"main")
    first.interned_data.frames.add(iid=1, function_name_id=1)
    first.interned_data.callstacks.add(iid=1, frame_ids=[1])
    pkt = msg.packet.add()
    pkt.trusted_packet_sequence_id = 1
    pkt.sequence_flags = 2
    pkt.streaming_profile_packet.callstack_iid.extend([1] * len(deltas))
    pkt.streaming_profile_packet.timestamp_delta_us.extend(deltas)
    return msg.SerializeToString()


def test_perfetto_times_beyond_what_a_double_holds_are_refused():
    assert jsprof.load(io.BytesIO(_perfetto(250_000_000_000, [5, 5]))).num_samples == 2
    with pytest.raises(JsprofError, match=r"reference_timestamp_us: -?\d+ is beyond 2\*\*52"):
        jsprof.load(io.BytesIO(_perfetto(-(2**62), [5, 5])))
    # Deltas whose sum wraps int64 were summed silently into nonsense times.
    with pytest.raises(JsprofError, match=r"timestamp_delta_us: sample times run beyond"):
        jsprof.load(io.BytesIO(_perfetto(0, [2**62, 2**62, 2**62])))


def test_folded_control_characters_past_the_first_line_are_refused():
    # Sniffing reads the first line only; the rest was read and then written back sorted,
    # with the NUL line first, which no longer sniffed as folded stacks.
    data = b"main (a.py:1);f (a.py:2) 3\n\x00main;g 1\n"
    with pytest.raises(JsprofError, match=r"line 2: control character '\\x00'"):
        jsprof.load(io.BytesIO(data))


@pytest.mark.parametrize("odd", ["\x0c", "\u2028", "\x1e", "\x00"])
def test_folded_writes_names_with_line_breaking_characters_readably(odd):
    b = trace_model.TraceBuilder()
    r = b.resource_id("file:///a.js")
    main, f = b.frame_id("main", r, 1, 1), b.frame_id(f"we{odd}ird", r, 2, 1)
    for i in range(4):
        b.add_sample(float(i), b.stack_id([main, f] if i % 2 else [main]))
    out = FORMATS["folded"].write(trace_model.Recording.of(b.build()))
    assert out.count(b"\n") == 2  # one line per stack
    assert _stable(out) == out


def test_speedscope_weights_that_overflow_in_their_unit_are_refused_quietly():
    doc = copy.deepcopy(SPEEDSCOPE)
    del doc["profiles"][0]["jsprof"]
    doc["profiles"][0]["unit"] = "seconds"
    doc["profiles"][0]["weights"] = [1e306, 1e306]  # inf once in ms
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning was printed to the user
        with pytest.raises(JsprofError, match=r"profiles\[0\]\.weights: add up to more"):
            jsprof.load(io.BytesIO(orjson.dumps(doc)))


def test_pprof_frame_without_a_line_keeps_none_when_its_samples_have_one():
    # Reading guessed a function's line from its Lines (as @datadog/pprof needs), but in
    # jsprof's files the leaf Line is the line executing: a frame without a line got one
    # on the second trip.
    b = trace_model.TraceBuilder()
    r = b.resource_id("file:///a.js")
    main, f = b.frame_id("main", r, 1, 1), b.frame_id("f", r)  # f: no line
    for i in range(6):
        b.add_sample(float(i), b.stack_id([main, f]) if i % 2 else b.stack_id([main]), line=8)
    out = FORMATS["pprof"].write(trace_model.Recording.of(b.build()))
    back = jsprof.load(io.BytesIO(out)).tracks[0].trace
    assert {fr.name: fr.line for fr in back.frames} == {"main": 1, "f": None}
    assert _stable(out) == out


def _chrome_profile_events(pid_id: str, tid: int, nodes: list, samples: list) -> list[dict]:
    base = {"ph": "P", "cat": "disabled-by-default-v8.cpu_profiler", "id": pid_id, "pid": 1}
    data = {"cpuProfile": {"nodes": nodes, "samples": samples}, "timeDeltas": [100] * len(samples)}
    return [
        {"name": "Profile", **base, "tid": tid, "ts": 0, "args": {"data": {"startTime": 0}}},
        {"name": "ProfileChunk", **base, "tid": tid, "ts": 0, "args": {"data": data}},
    ]


_CT_NODES = [
    {"id": 1, "callFrame": {"functionName": "(root)", "scriptId": 0, "url": ""}},
    {"id": 2, "callFrame": _cf("main", 9), "parent": 1},
]


@pytest.mark.parametrize("bad", [-5, "x", 2**40, None, 1.5, True])
def test_chrome_trace_lines_that_are_not_line_numbers_are_refused(bad):
    # -5 read and then its jsprof JSON did not read back; "x", None and 2**40 raised
    # ValueError, TypeError or OverflowError instead of a one-line error.
    events = _chrome_profile_events("0x1", 1, _CT_NODES, [2, 2])
    events[1]["args"]["data"]["lines"] = [3, bad]
    with pytest.raises(JsprofError, match=r"traceEvents\[1\]\.args\.data\.lines\[1\]: expected"):
        jsprof.load(io.BytesIO(json.dumps({"traceEvents": events}).encode()))


def test_chrome_trace_two_profiles_of_one_thread_write_back_stably():
    # Both tracks were written on one (pid, tid) with two thread_name events; reading
    # named both after the last one, and each round trip added a quote to the names.
    events = [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 7, "args": {"name": "main"}},
        *_chrome_profile_events("0x1", 7, _CT_NODES, [2, 2]),
        *_chrome_profile_events("0x2", 7, _CT_NODES, [2, 2, 2]),
    ]
    out = _stable(orjson.dumps({"traceEvents": events}))
    names = [t.name for t in jsprof.load(io.BytesIO(out)).tracks]
    assert names == ["main", "main'"]


@pytest.mark.parametrize("tid", [2**64 - 1, -(2**40)])
def test_perfetto_writes_a_thread_id_it_cannot_carry_as_its_own(tid):
    # A Chrome trace's tid beyond int32 went into Perfetto's thread_descriptor: ValueError.
    events = [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": "main"}},
        *_chrome_profile_events("0x1", tid, _CT_NODES, [2, 2]),
    ]
    rec = jsprof.load(io.BytesIO(orjson.dumps({"traceEvents": events}, option=0)))
    back = jsprof.load(io.BytesIO(FORMATS["perfetto"].write(rec)))
    assert back.tracks[0].name == "main" and back.num_samples == 2


def test_perfetto_writes_a_time_origin_before_1970():
    b = trace_model.TraceBuilder()
    b.add_sample(0.0, b.stack_id([b.frame_id("main")]))
    rec = trace_model.Recording.of(b.build(), time_origin=-5.0)  # speedscope allows it
    back = jsprof.load(io.BytesIO(FORMATS["perfetto"].write(rec)))
    assert back.num_samples == 1


@pytest.mark.parametrize("key", ["timeOrigin", "sampleInterval", "requestedInterval"])
@pytest.mark.parametrize("bad", [1e300, -1e17, 2**53])
def test_speedscope_jsprof_times_beyond_2_53_ms_are_not_used(key, bad):
    # Read as they were, and then the jsprof JSON (and .cpuprofile...) of the file was
    # refused: "jsprof.timeOrigin: is 1e+300; expected a time below 2**53 ms".
    doc = copy.deepcopy(SPEEDSCOPE)
    doc["profiles"][0]["jsprof"][key] = bad
    rec = jsprof.load(io.BytesIO(orjson.dumps(doc)))
    track = rec.tracks[0]
    assert (track.time_origin, track.sample_interval, track.requested_interval) == (None,) * 3
    assert track.trace.sample_time.tolist() == [0.0, 1.0, 2.0]  # the key is still used
    for fmt in FORMATS.values():
        if fmt.write is not None and fmt.read is not None:
            assert jsprof.load(io.BytesIO(fmt.write(rec))).num_samples == 3, fmt.name
    _stable(orjson.dumps(doc))


def test_speedscope_start_beyond_2_53_ms_once_in_ms_is_refused():
    # -9e15 s is -9e18 ms: read (only the end was checked), then written as a startValue
    # its own reader, and jsprof JSON, refused.
    doc = copy.deepcopy(SPEEDSCOPE)
    del doc["profiles"][0]["jsprof"]
    doc["profiles"][0].update(unit="seconds", startValue=-9e15, weights=[9e15, 1.0])
    with pytest.raises(JsprofError, match=r"profiles\[0\]\.startValue: is -9e\+15 seconds"):
        jsprof.load(io.BytesIO(orjson.dumps(doc)))


@pytest.mark.parametrize("fmt", ["otlp-json", "otlp"])
def test_otlp_times_beyond_int64_ns_are_refused(fmt):
    # A fixed64 holds up to 2**64 - 1. Found by `make fuzz`: a profile's timeUnixNano of
    # 2**63 was an OverflowError traceback (origin minus int64 sample times); a sample's
    # timestamp of 2**64 - 1 was one too.
    from google.protobuf import json_format
    from opentelemetry.proto.profiles.v1development import profiles_pb2

    def broken(edit) -> bytes:
        doc = orjson.loads(_own("otlp-json", INSTRUMENTED))
        edit(doc["resourceProfiles"][0]["scopeProfiles"][0]["profiles"][0])
        data = orjson.dumps(doc)
        if fmt == "otlp":
            msg = json_format.Parse(data, profiles_pb2.ProfilesData())
            data = msg.SerializeToString()
        return data

    def origin(p: dict) -> None:
        p["timeUnixNano"] = str(2**63)

    def stamp(p: dict) -> None:
        p["samples"][0]["timestampsUnixNano"][0] = str(2**64 - 1)

    at = "resource_profiles[0].scope_profiles[0].profiles[0]"
    with pytest.raises(JsprofError, match=re.escape(
            f"{at}.time_unix_nano: {2**63} ns is beyond {2**63 - 1} (the year 2262)")):
        jsprof.load(io.BytesIO(broken(origin)))
    with pytest.raises(JsprofError, match=re.escape(
            f"{at}.samples[0].timestamps_unix_nano: {2**64 - 1} ns is beyond")):
        jsprof.load(io.BytesIO(broken(stamp)))
