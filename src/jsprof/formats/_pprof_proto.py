"""pprof's profile.proto messages as classes of the `protobuf` package (upb, a core
dependency), built at run time from a descriptor of the fields jsprof reads and writes (no
protoc step, no generated file). Fields not listed here (mappings, drop/keep frames, ...)
are kept by the package as unknown fields and ignored.

Why the package and not our own codec (`_protobuf.py`, which perfetto.py and pprof's
sniffer still use): on one Profile message of 1.9 MB (18,824 samples, 4,912 locations and
functions) the codec took 10.2x the package's time to decode and 7.6x to encode
(benchmarks/bench_protobuf.py; benchmarks/RESULTS.md, "pprof wire codec").
"""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
# (name, number, type or message name, repeated), as github.com/google/pprof's
# proto/profile.proto numbers them. string_table is read as bytes: jsprof checks the UTF-8
# itself, to name the string that is not.
MESSAGES: dict[str, list[tuple[str, int, Any, bool]]] = {
    "ValueType": [("type", 1, _F.TYPE_INT64, False), ("unit", 2, _F.TYPE_INT64, False)],
    "Label": [("key", 1, _F.TYPE_INT64, False), ("str", 2, _F.TYPE_INT64, False)],
    "Sample": [("location_id", 1, _F.TYPE_UINT64, True), ("value", 2, _F.TYPE_INT64, True),
               ("label", 3, "Label", True)],
    "Line": [("function_id", 1, _F.TYPE_UINT64, False), ("line", 2, _F.TYPE_INT64, False),
             ("column", 3, _F.TYPE_INT64, False)],
    "Location": [("id", 1, _F.TYPE_UINT64, False), ("line", 4, "Line", True)],
    "Function": [("id", 1, _F.TYPE_UINT64, False), ("name", 2, _F.TYPE_INT64, False),
                 ("system_name", 3, _F.TYPE_INT64, False),
                 ("filename", 4, _F.TYPE_INT64, False), ("start_line", 5, _F.TYPE_INT64, False)],
    "Profile": [("sample_type", 1, "ValueType", True), ("sample", 2, "Sample", True),
                ("location", 4, "Location", True), ("function", 5, "Function", True),
                ("string_table", 6, _F.TYPE_BYTES, True),
                ("time_nanos", 9, _F.TYPE_INT64, False),
                ("duration_nanos", 10, _F.TYPE_INT64, False),
                ("period_type", 11, "ValueType", False), ("period", 12, _F.TYPE_INT64, False),
                ("comment", 13, _F.TYPE_INT64, True)],
}
PACKAGE = "jsprof.pprof"


@functools.cache
def classes() -> dict[str, type]:
    """Message name -> class (Profile, Sample, Location, Function, ...)."""
    fd = descriptor_pb2.FileDescriptorProto(
        name="jsprof_pprof_profile.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in MESSAGES.items():
        m = fd.message_type.add(name=name)
        for fname, num, typ, repeated in fields:
            f = m.field.add(name=fname, number=num,
                            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if isinstance(typ, str):
                f.type, f.type_name = _F.TYPE_MESSAGE, f".{PACKAGE}.{typ}"
            else:
                f.type = typ
    # A pool of our own: the default one may hold another profile.proto under its name.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name in MESSAGES
    }
