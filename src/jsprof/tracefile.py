"""jsprof's own JSON format: kept as a name for callers; it lives in `formats.jsprof`."""

from .formats._json import gc_paused, parse_json, type_name
from .formats.jsprof import (
    FORMAT_KEY,
    FORMAT_VERSION,
    dumps,
    is_profiler_trace,
    read_bytes,
    recording_from_doc,
    recording_to_doc,
    trace_to_doc,
)

__all__ = [
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "dumps",
    "gc_paused",
    "is_profiler_trace",
    "parse_json",
    "read_bytes",
    "recording_from_doc",
    "recording_to_doc",
    "trace_to_doc",
    "type_name",
]
