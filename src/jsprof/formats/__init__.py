"""Registry of trace formats. Input is sniffed from content, never from the extension alone.

Each format converts to or from the Recording; there is no format-to-format converter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import tracefile
from ..errors import TraceFormatError, UsageError
from ..trace import Recording


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    extensions: tuple[str, ...]
    # sniff(data, doc): doc is the parsed JSON, or None when the input is not JSON.
    sniff: Callable[[bytes, Any], bool] | None = None
    read: Callable[[bytes, Any, str], Recording] | None = None
    write: Callable[[Recording], bytes] | None = None


def _read_jsprof(data: bytes, doc: Any, source: str) -> Recording:
    return tracefile.recording_from_doc(doc, source, has_markers=b'"marker"' in data)


FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> None:
    FORMATS[fmt.name] = fmt


register(
    Format(
        name="jsprof",
        description="W3C JS Self-Profiling ProfilerTrace, with jsprof's extra track data",
        extensions=(".json", ".jsprof.json"),
        sniff=lambda data, doc: tracefile.is_profiler_trace(doc),
        read=_read_jsprof,
        write=tracefile.dumps,
    )
)


def _looks_like_json(data: bytes) -> bool:
    head = data[:64].lstrip()
    return head[:1] in (b"{", b"[")


def read_any(data: bytes, source: str) -> Recording:
    with tracefile.gc_paused():
        doc = tracefile.parse_json(data, source) if _looks_like_json(data) else None
        for fmt in FORMATS.values():
            if fmt.read is not None and fmt.sniff is not None and fmt.sniff(data, doc):
                rec = fmt.read(data, doc, source)
                del doc  # freed while the GC is still paused
                return rec
    readable = ", ".join(n for n, f in FORMATS.items() if f.read)
    raise TraceFormatError(
        f"{source}: not a trace format jsprof reads ({readable}); see `jsprof formats`"
    )


def writer_for(path: str, format: str | None) -> Format:
    if format is not None:
        fmt = FORMATS.get(format)
        if fmt is None or fmt.write is None:
            names = ", ".join(n for n, f in FORMATS.items() if f.write)
            raise UsageError(f"unknown output format {format!r}; choose one of: {names}")
        return fmt
    name = path[:-3] if path.endswith(".gz") else path
    # Longest extension first, so `.jsprof.json` beats `.json`.
    best = None
    for fmt in FORMATS.values():
        for ext in fmt.extensions:
            if fmt.write and name.endswith(ext) and (best is None or len(ext) > len(best[1])):
                best = (fmt, ext)
    if best is None:
        if path == "-":
            return FORMATS["jsprof"]
        raise UsageError(f"cannot tell the output format from {path!r}; pass --format")
    return best[0]


# Format modules register themselves on import; imported last because they use register().
from . import (  # noqa: E402,F401
    chrometrace,
    cpuprofile,
    firefox,
    folded,
    perfetto,
    pprof,
    speedscope,
)
