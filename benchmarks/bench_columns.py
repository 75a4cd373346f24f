"""Is our C column reader/writer (`jsprof.formats._columns`) needed, or would orjson or
msgspec do? Issue 37: "measure before keeping what a library does".

    .venv/bin/python benchmarks/bench_columns.py [--samples 1000000] [--rounds 5]

The C extension does one job: the per-sample JSON arrays (a jsprof file's `samples`, a
`.cpuprofile`'s `samples`/`timeDeltas`) to and from numpy columns. Each library alternative
does the same job in the same run, on the same bytes, and must give the same columns (or
the same bytes, for writing); every figure is a median over interleaved rounds (the order
rotates each round) of the ratio to ours, in process CPU time for the reads (one thread)
and wall time for the writes (ours formats on up to 4 threads: what a user waits for):

- samples array -> columns: ours (`_columns.read_samples`) against `orjson.loads` + numpy
  columns (`np.fromiter` over the dicts) and against msgspec typed decoding (a Struct per
  sample, as `_jsprof_typed` does in pieces when the C scanner declines) + numpy columns;
- integer array -> int64 column (`.cpuprofile` samples/timeDeltas): ours (`read_ints`)
  against `np.array(orjson.loads(...))` and msgspec `list[int]`;
- whole load, `jsprof.load` of the file's bytes: ours against the same reader with the C
  scanner turned off (the msgspec path it falls back to, what would be left without it);
- whole save, `formats.jsprof.dumps`: ours against `orjson.dumps(recording_to_doc(rec))`
  (the document as dicts, then orjson: the library way), asserting equal bytes.

Inputs: the real fixtures in /work/shared/fixtures (small), and generated big ones: a
jsprof file of --samples samples (benchmarks/bench_trace.synthetic) and the same recording
written as a .cpuprofile.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path

import msgspec
import numpy as np
import orjson

import jsprof
from _common import median_ratio, rotated
from bench_trace import synthetic
from jsprof.formats import _columns
from jsprof.formats import jsprof as tracefile
from jsprof.formats.cpuprofile import FORMAT as CPUPROFILE

FIXTURES = Path("/work/shared/fixtures")


class _Sample(msgspec.Struct, omit_defaults=True):
    timestamp: float
    stackId: int = -1  # noqa: N815 - the spec's spelling
    marker: str | None = None


_SAMPLES = msgspec.json.Decoder(list[_Sample])
_INTS = msgspec.json.Decoder(list[int])
_MARKER_JSON = tuple(orjson.dumps(m) for m in jsprof.trace.MARKERS)


def cpu(fn: Callable[[], object]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def wall(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def race(cases: dict[str, Callable[[], object]], rounds: int, clock=cpu) -> dict[str, float]:
    """Median ratio of each case's time to the first case's ("ours"), interleaved."""
    times: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(rounds):
        for k in rotated(list(cases), r):
            times[k].append(clock(cases[k]))
    base = next(iter(cases))
    return {k: median_ratio(v, times[base]) for k, v in times.items()} | {
        "ours_s": float(np.median(times[base]))
    }


def samples_text(data: bytes) -> tuple[bytes, int]:
    """The top-level samples array's text and where its first element starts."""
    start = data.index(b'"samples"')
    start = data.index(b"[", start) + 1
    got = _columns.read_samples(data, start, 2**31 - 1, _MARKER_JSON)
    assert got is not None, "the C scanner declined: not a plain samples array"
    return data[start - 1 : got[3] + 1], start


def ours_samples(data: bytes, start: int):
    times, stack, markers, _ = _columns.read_samples(data, start, 2**31 - 1, _MARKER_JSON)
    return np.frombuffer(times, np.float64), np.frombuffer(stack, np.int32)


def orjson_samples(text: bytes):
    rows = orjson.loads(text)
    n = len(rows)
    times = np.fromiter(map(itemgetter("timestamp"), rows), np.float64, n)
    stack = np.fromiter((s.get("stackId", -1) for s in rows), np.int32, n)
    return times, stack


def msgspec_samples(text: bytes):
    rows = _SAMPLES.decode(text)
    n = len(rows)
    times = np.fromiter((s.timestamp for s in rows), np.float64, n)
    stack = np.fromiter((s.stackId for s in rows), np.int32, n)
    return times, stack


@contextmanager
def c_scanner_off():
    """The readers as they would be without the C scanner: every call declines, so the
    typed path decodes with msgspec (jsprof) or the validating path reads (cpuprofile)."""
    saved = {k: getattr(_columns, k) for k in ("read_samples", "read_ints", "read_floats")}
    try:
        for k in saved:
            setattr(_columns, k, lambda *a, **kw: None)
        yield
    finally:
        for k, v in saved.items():
            setattr(_columns, k, v)


def load_ours(data: bytes):
    return jsprof.load(io.BytesIO(data))


def load_without_c(data: bytes):
    with c_scanner_off():
        return jsprof.load(io.BytesIO(data))


def same_recording(a, b) -> None:
    for ta, tb in zip(a.tracks, b.tracks, strict=True):
        assert np.array_equal(ta.trace.sample_time, tb.trace.sample_time)
        assert np.array_equal(ta.trace.sample_stack, tb.trace.sample_stack)


def int_arrays(data: bytes) -> list[bytes]:
    doc = json.loads(data)
    prof = doc.get("profile", doc)
    return [orjson.dumps(prof["samples"]), orjson.dumps(prof["timeDeltas"])]


def fmt(r: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}x" for k, v in r.items() if k != "ours_s") + (
        f"  (ours {r['ours_s'] * 1000:.1f} ms)"
    )


def measure(name: str, kind: str, data: bytes, rounds: int) -> None:
    print(f"== {name}")
    # whole load, same Recording either way
    same_recording(load_ours(data), load_without_c(data))
    print("  load:", fmt(race({"ours": lambda: load_ours(data),
                               "without C (msgspec path)": lambda: load_without_c(data)},
                              rounds)))
    if kind == "jsprof":
        text, start = samples_text(data)
        o = ours_samples(data, start)
        for alt in (orjson_samples(text), msgspec_samples(text)):
            assert all(np.array_equal(x, y) for x, y in zip(o, alt, strict=True))
        print("  samples -> columns:", fmt(race({
            "ours": lambda: ours_samples(data, start),
            "orjson+numpy": lambda: orjson_samples(text),
            "msgspec+numpy": lambda: msgspec_samples(text),
        }, rounds)))
        r = jsprof.load(io.BytesIO(data))
        ours_out = tracefile.dumps(r)
        assert ours_out == orjson.dumps(tracefile.recording_to_doc(r)), "bytes differ"
        print("  save (equal bytes):", fmt(race({
            "ours": lambda: tracefile.dumps(r),
            "orjson.dumps(doc)": lambda: orjson.dumps(tracefile.recording_to_doc(r)),
        }, rounds, clock=wall)))
    else:
        arrays = int_arrays(data)

        def ours_ints():
            return [np.frombuffer(_columns.read_ints(t, 1)[0], np.int64) for t in arrays]

        for x, y, z in zip(ours_ints(), [np.array(orjson.loads(t), np.int64) for t in arrays],
                           [np.array(_INTS.decode(t), np.int64) for t in arrays],
                           strict=True):
            assert np.array_equal(x, y) and np.array_equal(x, z)
        print("  int arrays -> columns:", fmt(race({
            "ours": ours_ints,
            "orjson+numpy": lambda: [np.array(orjson.loads(t), np.int64) for t in arrays],
            "msgspec+numpy": lambda: [np.array(_INTS.decode(t), np.int64) for t in arrays],
        }, rounds)))



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--stacks", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()

    rec = synthetic(a.samples, a.stacks, idle=0.05)
    big = tracefile.dumps(rec)
    cpuprofile = CPUPROFILE.write(rec)
    inputs: dict[str, tuple[str, bytes]] = {
        f"generated jsprof, {a.samples:,} samples ({len(big) / 1e6:.0f} MB)": ("jsprof", big),
        f"generated .cpuprofile, {a.samples:,} samples ({len(cpuprofile) / 1e6:.0f} MB)":
            ("cpuprofile", cpuprofile),
    }
    for p in sorted(FIXTURES.glob("*/*")):
        if p.suffix in (".json", ".cpuprofile") and not p.name.endswith(".meta.json"):
            kind = "cpuprofile" if b'"timeDeltas"' in p.read_bytes() else "jsprof"
            inputs[f"fixture {p.parent.name}/{p.name} ({p.stat().st_size / 1e3:.0f} kB)"] = (
                kind, p.read_bytes())
    print(f"python {sys.version.split()[0]}, orjson {orjson.__version__}, "
          f"msgspec {msgspec.__version__}, numpy {np.__version__}; {a.rounds} rounds")
    print("ratios: the alternative's time over ours (above 1: ours is faster)\n")
    small_rounds = max(a.rounds, 50)
    for name, (kind, data) in inputs.items():
        measure(name, kind, data, a.rounds if len(data) > 10_000_000 else small_rounds)


if __name__ == "__main__":
    main()
