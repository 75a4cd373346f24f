"""Conversion speed: a big `.cpuprofile` into every output format, against orjson.loads.

    .venv/bin/python benchmarks/bench_convert.py [--target-mb 100] [--repeat 2]
        [--formats jsprof,cpuprofile,...]   (default: every writable format)

Builds a synthetic `.cpuprofile` of about --target-mb (deep, varied stacks from
bench_trace.synthetic), then times, in one process on the same bytes: the baseline
`orjson.loads` of the input, reading it, and writing each format (plus reading back the
formats jsprof reads). Every figure is printed as a ratio to the baseline, since the
machines are shared and only ratios taken in one run compare.
"""

from __future__ import annotations

import argparse
import gzip

import orjson

from _common import best_of
from bench_trace import synthetic
from jsprof.errors import JsprofError
from jsprof.formats import FORMATS, read_any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target-mb", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--formats", help="comma-separated output formats (default: all)")
    a = ap.parse_args()
    only = set(a.formats.split(",")) if a.formats else None

    # A .cpuprofile costs ~10 B per sample plus its nodes; size the sample count to match.
    stacks = 100_000
    probe = FORMATS["cpuprofile"].write(synthetic(200_000, stacks))
    per_sample = (len(probe) - len(FORMATS["cpuprofile"].write(synthetic(1, stacks)))) / 200_000
    fixed = len(probe) - per_sample * 200_000
    n = max(1000, int((a.target_mb * 1e6 - fixed) / per_sample))
    data = FORMATS["cpuprofile"].write(synthetic(n, stacks))
    print(f"input: .cpuprofile, {len(data) / 1e6:.0f} MB, {n:,} samples, {stacks:,} stacks")

    # Baseline and read interleaved, best of --repeat each: noise hits both alike.
    base = t = float("inf")
    for _ in range(a.repeat):
        base = min(base, best_of(lambda: orjson.loads(data), 1))
        t = min(t, best_of(lambda: read_any(data, "bench.cpuprofile"), 1))
    print(f"{'orjson.loads (baseline)':32} {base:7.2f} s   1.00x")
    rec = read_any(data, "bench.cpuprofile")
    print(f"{'read .cpuprofile':32} {t:7.2f} s  {t / base:5.2f}x   (goal <= 1.0)")
    for name, fmt in FORMATS.items():
        if fmt.write is None or (only is not None and name not in only):
            continue
        out = fmt.write(rec)
        t = best_of(lambda fmt=fmt: fmt.write(rec), a.repeat)
        line = f"{'write ' + name:32} {t:7.2f} s  {t / base:5.2f}x  {len(out) / 1e6:8.1f} MB"
        if fmt.read is not None:
            raw = gzip.decompress(out) if out[:2] == b"\x1f\x8b" else out
            del out
            try:
                r = best_of(lambda raw=raw: read_any(raw, "again"), a.repeat)
                line += f"   read back {r:6.2f} s  {r / base:5.2f}x"
            except (MemoryError, JsprofError) as e:
                # speedscope repeats each sample's whole stack: a deep 8M-sample file
                # can exceed this machine's memory once parsed. Say so; don't hide it.
                line += f"   read back FAILED: {str(e)[:60]}"
            del raw
        print(line, flush=True)


if __name__ == "__main__":
    main()
