"""OpenTelemetry profiles, OTLP/JSON (`ProfilesData` as JSON, `.otlp.json`): read and write.
The mapping is `_otlp`'s (shared with the protobuf encoding).

OTLP/JSON is the protobuf JSON mapping with the OTLP spec's rules: lowerCamelCase field
names, 64-bit integers as decimal strings, enums as integers, fields at their default left
out; receivers ignore unknown fields (so does this reader). jsprof writes no trace or span
ids (the only bytes fields the spec writes in hex rather than base64): its link table holds
only the zero Link.
"""

from __future__ import annotations

from ..errors import TraceFormatError
from ..trace import Recording
from . import _otlp
from ._format import Format, Probe

KEYS = ("resourceProfiles", "dictionary", "resource_profiles")


def read(probe: Probe) -> Recording:
    from google.protobuf import json_format

    m = _otlp.messages()
    try:
        msg = json_format.Parse(probe.data, m.ProfilesData(), ignore_unknown_fields=True)
    except (json_format.ParseError, UnicodeDecodeError, ValueError) as e:
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TraceFormatError(
            f"{probe.source}: not OTLP/JSON profiles ({text[:200]})"
        ) from None
    return _otlp.from_message(msg, probe.source)


def write(rec: Recording) -> bytes:
    from google.protobuf import json_format

    msg = _otlp.to_message(rec)
    text = json_format.MessageToJson(msg, use_integers_for_enums=True, indent=None)
    return text.encode("utf-8")


FORMAT = Format(
    name="otlp-json",
    description="OpenTelemetry profiles, OTLP/JSON ProfilesData",
    extensions=(".otlp.json",),
    sniff_head=lambda p: p.first_key in KEYS,
    read=read,
    write=write,
)
