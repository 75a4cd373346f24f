"""Per-sample weights and counts through Chrome trace and Perfetto (which dropped them: a
reader charged each sample the gap to the next one). Real recordings (a `jsprof
instrument` run and a `--focus` cut recording on QuickJS, a `jsprof fleet export`)
converted by the real CLI keep their weights and counts exactly, write back byte for
byte, and the Perfetto file decodes with the `perfetto` package's own schema into what
its UI sums: per call stack, the weights jsprof counts."""

from __future__ import annotations

import collections
import copy
from pathlib import Path

import numpy as np
import orjson
import pytest

import jsprof
from formats_util import jsprof_cli, node, one_line_error, weighted_recordings
from jsprof.analysis.profile import summarize
from jsprof.formats import read_any
from jsprof.trace import NONE, sample_counts, sample_weights

EXTS = [".trace.json", ".pftrace"]


@pytest.fixture(scope="module")
def weighted(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("weighted")
    out = {}
    for what, data in weighted_recordings(d).items():
        out[what] = d / f"{what}-in.jsprof.json"
        out[what].write_bytes(data)
    return out


@pytest.mark.parametrize("ext", EXTS)
@pytest.mark.parametrize("what", ["instrument", "focus", "fleet"])
def test_weights_and_counts_survive_convert(weighted, what, ext, tmp_path):
    src = weighted[what]
    out = tmp_path / f"{what}{ext}"
    r = jsprof_cli("convert", str(src), str(out))
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr  # nothing lost to say
    a, b = jsprof.load(src), jsprof.load(out)
    assert len(a.tracks) == len(b.tracks) >= 1
    for ta, tb in zip(a.tracks, b.tracks, strict=True):
        assert ta.trace.sample_weight is not None
        # not what the times imply: the weights were needed
        bare = copy.copy(ta.trace)
        bare.sample_weight = None
        assert not np.allclose(sample_weights(bare, ta.sample_interval), ta.trace.sample_weight)
        assert tb.trace.sample_weight is not None
        assert tb.trace.sample_weight.tolist() == ta.trace.sample_weight.tolist()
        assert sample_counts(tb.trace).tolist() == sample_counts(ta.trace).tolist()
        if what == "fleet":
            assert tb.trace.sample_count is not None and (tb.trace.sample_count > 1).any()
    # report counts the same time, function by function, from either file
    sa, sb = summarize(a).stats, summarize(b).stats
    assert dict(zip(sb.keys, sb.self_ms.tolist(), strict=True)) == pytest.approx(
        dict(zip(sa.keys, sa.self_ms.tolist(), strict=True)), abs=1e-9)
    # what reads back writes back the same, byte for byte
    again = tmp_path / f"again{ext}"
    jsprof.save(jsprof.load(out), again)
    assert again.read_bytes() == out.read_bytes()


def test_chrome_trace_chunks_carry_the_weights_beside_the_samples(weighted, tmp_path):
    out = tmp_path / "w.trace.json"
    jsprof.save(jsprof.load(weighted["fleet"]), out)
    events = orjson.loads(out.read_bytes())["traceEvents"]
    chunks = [e["args"]["data"] for e in events
              if e["name"] == "ProfileChunk" and "cpuProfile" in e["args"]["data"]]
    assert chunks
    for c in chunks:
        n = len(c["cpuProfile"]["samples"])
        assert len(c["timeDeltas"]) == len(c["jsprofWeights"]) == len(c["jsprofCounts"]) == n


def test_perfetto_weights_are_what_its_flame_graph_sums(weighted, tmp_path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2

    rec = jsprof.load(weighted["instrument"])
    out = tmp_path / "w.pftrace"
    jsprof.save(rec, out)
    msg = pb2.Trace.FromString(out.read_bytes())
    lanes = {p.track_descriptor.uuid: p.track_descriptor.parent_uuid for p in msg.packet
             if p.HasField("track_descriptor") and p.track_descriptor.name == "sample weights"}
    threads = {p.track_descriptor.uuid for p in msg.packet
               if p.HasField("track_descriptor") and p.track_descriptor.HasField("thread")}
    assert len(lanes) == 1 and set(lanes.values()) <= threads
    names: dict[int, str] = {}
    frames: dict[int, int] = {}
    stacks: dict[int, list[int]] = {}
    by_stack: collections.Counter = collections.Counter()
    for p in msg.packet:
        d = p.interned_data
        names.update({e.iid: e.str.decode() for e in d.function_names})
        frames.update({f.iid: f.function_name_id for f in d.frames})
        stacks.update({c.iid: list(c.frame_ids) for c in d.callstacks})
        ev = p.track_event
        if p.HasField("track_event") and ev.track_uuid in lanes:
            assert ev.type == pb2.TrackEvent.TYPE_INSTANT and ev.HasField("callstack_weight")
            path = tuple(names[frames[f]] for f in stacks[ev.callstack_iid])
            by_stack[path] += ev.callstack_weight
    tr = rec.tracks[0].trace
    want: collections.Counter = collections.Counter()
    for s, w in zip(tr.sample_stack.tolist(), tr.sample_weight.tolist(), strict=True):
        if s != NONE:
            want[tuple(tr.frames[f].name for f in tr.stack_frames(s))] += w
    js = {k: v for k, v in by_stack.items() if not (len(k) == 1 and k[0].startswith("("))}
    assert js.keys() == want.keys()
    for k, ms in want.items():
        assert js[k] == pytest.approx(ms, abs=1e-9), k


def _chrome(weighted) -> dict:
    return orjson.loads(jsprof.formats.FORMATS["chrome-trace"].write(
        jsprof.load(weighted["fleet"])))


@pytest.mark.parametrize(("key", "bad", "expect"), [
    ("jsprofWeights", -1.0, r"jsprofWeights\[0\]: -1\.0 is not a weight"),
    ("jsprofWeights", "x", r"jsprofWeights\[0\]: 'x' is not a weight"),
    ("jsprofCounts", 0, r"jsprofCounts\[0\]: 0 is not a count"),
    ("jsprofCounts", 1.5, r"jsprofCounts\[0\]: 1\.5 is not a count"),
])
def test_chrome_trace_bad_weights_are_refused_in_one_line(weighted, key, bad, expect, tmp_path):
    doc = _chrome(weighted)
    chunk = next(e for e in doc["traceEvents"] if e["name"] == "ProfileChunk")
    chunk["args"]["data"][key][0] = bad
    path = tmp_path / "bad.trace.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(jsprof.errors.TraceFormatError, match=expect) as e:
        jsprof.load(path)
    one_line_error(str(e.value))
    r = jsprof_cli("report", str(path))
    assert r.returncode == 2 and "Traceback" not in r.stderr and key in r.stderr


def test_perfetto_weights_that_do_not_match_the_samples_are_refused(weighted):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2

    data = jsprof.formats.FORMATS["perfetto"].write(jsprof.load(weighted["focus"]))
    msg = pb2.Trace.FromString(data)
    last = max(i for i, p in enumerate(msg.packet) if p.track_event.HasField("callstack_weight"))
    del msg.packet[last]
    with pytest.raises(jsprof.errors.TraceFormatError, match=r"'sample weights' track_event: "
                       r"\d+ weights for \d+ samples"):
        read_any(msg.SerializeToString(), "cut.pftrace")


@pytest.mark.npm
@pytest.mark.parametrize("what", ["instrument", "fleet"])
def test_chrome_devtools_trace_engine_reads_the_weighted_chrome_trace(weighted, what,
                                                                      tmp_path):
    # The keys beside timeDeltas are ours; DevTools' own trace engine must still read
    # every profile, sample for sample, as jsprof does.
    out = tmp_path / f"{what}.trace.json"
    r = jsprof_cli("convert", str(weighted[what]), str(out))
    assert r.returncode == 0, r.stderr
    got = node("read-chrome-trace.mjs", str(out))
    assert got.returncode == 0, got.stderr
    profiles = {(p["pid"], p["tid"]): p for p in orjson.loads(got.stdout)}
    rec = jsprof.load(out)
    assert len(profiles) == len(rec.tracks)
    for t in rec.tracks:
        p = profiles[(t.meta["pid"], t.meta["tid"])]
        tr = t.trace
        assert len(p["stacks"]) == tr.num_samples
        for s, stack in zip(tr.sample_stack.tolist(), p["stacks"], strict=True):
            if s != NONE:
                assert stack == [tr.frames[f].name for f in tr.stack_frames(s)]
        steps = np.diff(np.asarray(p["timestamps"], np.float64))
        assert np.abs(steps - np.diff(tr.sample_time)).max() < 2e-3  # whole µs each
