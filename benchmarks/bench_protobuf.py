"""pprof's wire format: jsprof's own codec (`formats/_protobuf.py`) against the `protobuf`
package (upb, a dependency already), on the same Profile message.

    .venv/bin/python benchmarks/bench_protobuf.py [--samples 200000] [--repeat 3]

The Profile message is what `jsprof convert x.pprof` writes for a synthetic recording
(bench_trace.synthetic: deep, varied stacks). Decoding means every field as Python values
(sample location ids and values, locations and their lines, functions, strings), what the
pprof reader goes on to build its tables from; encoding means the same values to bytes.
The package's message classes are built at run time from a descriptor of profile.proto's
fields (no protoc step). Ratios are codec / package time in one run (> 1: the codec is
slower); only ratios compare on a shared machine.
"""

from __future__ import annotations

import argparse

from _common import best_of
from bench_trace import synthetic
from jsprof.formats import _protobuf as pb
from jsprof.formats import pprof
from jsprof.formats._pprof_proto import classes


def profile_class() -> type:
    # The classes the pprof reader and writer use (profile.proto's fields, built at run
    # time from a descriptor); string_table is bytes there.
    return classes()["Profile"]


def decode_codec(data: bytes) -> tuple:
    buf = memoryview(data)
    samples, locations, functions, strings = [], [], [], []
    for field, _wire, v, _ in pb.fields(buf):
        if field == 2:
            locs: list[int] = []
            vals: list[int] = []
            for f, w, x, _ in pb.fields(buf, *v):
                if f == 1:
                    pb.repeated_ints(buf, w, x, locs)
                elif f == 2:
                    pb.repeated_ints(buf, w, x, vals)
            samples.append((locs, vals))
        elif field == 4:
            lid, lines = 0, []
            for f, _w, x, _ in pb.fields(buf, *v):
                if f == 1:
                    lid = x
                elif f == 4:
                    ln = dict((g, y) for g, _w2, y, _ in pb.fields(buf, *x))
                    lines.append((ln.get(1, 0), ln.get(2, 0)))
            locations.append((lid, lines))
        elif field == 5:
            fn = {f: x for f, _w, x, _ in pb.fields(buf, *v)}
            functions.append(tuple(fn.get(k, 0) for k in (1, 2, 3, 4, 5)))
        elif field == 6:
            strings.append(bytes(buf[v[0]:v[1]]).decode("utf-8"))
    return samples, locations, functions, strings


def decode_package(cls: type, data: bytes) -> tuple:
    p = cls.FromString(data)
    samples = [(list(s.location_id), list(s.value)) for s in p.sample]
    locations = [(loc.id, [(ln.function_id, ln.line) for ln in loc.line]) for loc in p.location]
    functions = [(f.id, f.name, f.system_name, f.filename, f.start_line) for f in p.function]
    return samples, locations, functions, [b.decode("utf-8") for b in p.string_table]


def encode_codec(parts: tuple) -> bytes:
    samples, locations, functions, strings = parts
    out = bytearray()
    for locs, vals in samples:
        out += pb.bytes_field(2, pb.packed(1, locs) + pb.packed(2, vals))
    for lid, lines in locations:
        msg = pb.uint_field(1, lid)
        for fid, ln in lines:
            msg += pb.bytes_field(4, pb.uint_field(1, fid) + pb.uint_field(2, ln))
        out += pb.bytes_field(4, msg)
    for fid, name, system, filename, start in functions:
        out += pb.bytes_field(5, pb.uint_field(1, fid) + pb.uint_field(2, name)
                              + pb.uint_field(3, system) + pb.uint_field(4, filename)
                              + pb.uint_field(5, start))
    for s in strings:
        out += pb.bytes_field(6, s.encode("utf-8"))
    return bytes(out)


def encode_package(cls: type, parts: tuple) -> bytes:
    samples, locations, functions, strings = parts
    p = cls()
    for locs, vals in samples:
        s = p.sample.add()
        s.location_id.extend(locs)
        s.value.extend(vals)
    for lid, lines in locations:
        loc = p.location.add(id=lid)
        for fid, ln in lines:
            loc.line.add(function_id=fid, line=ln)
    for fid, name, system, filename, start in functions:
        p.function.add(id=fid, name=name, system_name=system, filename=filename,
                       start_line=start)
    p.string_table.extend(x.encode("utf-8") for x in strings)
    return p.SerializeToString()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--stacks", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    data = pprof.encode_profile(synthetic(a.samples, a.stacks))
    cls = profile_class()
    ours, theirs = decode_codec(data), decode_package(cls, data)
    assert ours[1:] == theirs[1:] and [s for s, _ in ours[0]] == [s for s, _ in theirs[0]]
    assert encode_codec(ours) == encode_package(cls, theirs)  # same bytes both ways
    rows = {
        "decode": (best_of(lambda: decode_codec(data), a.repeat),
                   best_of(lambda: decode_package(cls, data), a.repeat)),
        "encode": (best_of(lambda: encode_codec(ours), a.repeat),
                   best_of(lambda: encode_package(cls, ours), a.repeat)),
    }
    print(f"Profile message: {len(data) / 1e6:.1f} MB, {len(ours[0])} samples, "
          f"{len(ours[1])} locations, {len(ours[2])} functions")
    print("| step | codec s | protobuf (upb) s | codec / protobuf |")
    print("| --- | --- | --- | --- |")
    for step, (c, p) in rows.items():
        print(f"| {step} | {c:.3f} | {p:.3f} | {c / p:.2f} |")


if __name__ == "__main__":
    main()
