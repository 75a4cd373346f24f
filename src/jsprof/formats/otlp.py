"""OpenTelemetry profiles, OTLP protobuf (`ProfilesData`, `.otlp.pb`): read and write. The
mapping is `_otlp`'s (shared with OTLP/JSON); the messages come from the
`opentelemetry-proto` package (the `otlp` extra).

Sniffing: a ProfilesData has only fields 1 (`resource_profiles`) and 2 (`dictionary`) at
the top, both length-delimited, and the first ResourceProfiles starts with one of its own
length-delimited fields (1-3). pprof's Profile (fields 1-14) starts with `sample_type`, a
ValueType of varints, so the two never meet; this sniffer goes before pprof's.
"""

from __future__ import annotations

from typing import Any

from ..trace import Recording
from . import _otlp
from . import _protobuf as pb
from ._format import Format, Probe

SNIFF_FIELDS = 64
SNIFF_BYTES = 4096


def sniff(data: bytes) -> bool:
    """A ProfilesData, also one cut short (read() then says where it breaks)."""
    if not data or data[:2] == b"\x1f\x8b":
        return False
    buf = memoryview(data)
    end = min(len(buf), SNIFF_BYTES)
    try:
        # The first field: resource_profiles, whose own first field is length-delimited
        # (resource, scope_profiles or schema_url). Looked into as far as the bytes go.
        tag, pos = pb.read_varint(buf, 0, end)
        if tag != (1 << 3) | pb.LEN:
            return False
        _n, pos = pb.read_varint(buf, pos, end)
        inner, _ = pb.read_varint(buf, pos, end)
        if inner & 7 != pb.LEN or inner >> 3 not in (1, 2, 3):
            return False
    except pb.WireError:
        return False
    try:
        for i, (field, wire, _v, _at) in enumerate(pb.fields(buf, stop=SNIFF_BYTES)):
            if field not in (1, 2) or wire != pb.LEN:
                return False
            if i >= SNIFF_FIELDS:
                break
    except pb.WireError:
        pass  # cut short after a good start
    return True


def _parse(data: bytes, source: str) -> Any:
    from google.protobuf.message import DecodeError

    m = _otlp.messages()
    try:
        return m.ProfilesData.FromString(data)
    except DecodeError:
        pass
    kinds = {1: ("resource_profiles", m.ResourceProfiles.FromString),
             2: ("dictionary", m.ProfilesDictionary.FromString)}
    raise pb.where_it_breaks(data, source, kinds, singular=(2,),
                             hint="; is the file complete?") from None


def read(probe: Probe) -> Recording:
    return _otlp.from_message(_parse(probe.data, probe.source), probe.source)


def write(rec: Recording) -> bytes:
    return _otlp.to_message(rec).SerializeToString()


FORMAT = Format(
    name="otlp",
    description="OpenTelemetry profiles, OTLP protobuf ProfilesData (Pyroscope, Elastic)",
    extensions=(".otlp.pb",),
    # not `not p.is_json`: a ProfilesData starts with 0x0a, a newline, and its length may
    # be a `{`
    sniff_head=lambda p: sniff(p.data),
    read=read,
    write=write,
)
