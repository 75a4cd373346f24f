"""The trace formats. Input is sniffed from content, never from the extension alone.

Each format converts to or from the Recording; there is no format-to-format converter.
`READERS` is the order sniffing tries: first every reader's cheap look at the first bytes
(`sniff_head`), then, in the same order, the sniffers that may parse the input. The jsprof
format comes first (it is the native one); pprof before Perfetto, since both are protobuf
and pprof's check is the stricter; folded stacks, plain text, last.
"""

from __future__ import annotations

from ..errors import TraceFormatError, UsageError
from ..trace import Recording
from . import chrometrace, cpuprofile, firefox, folded, jsprof, perfetto, pprof, speedscope
from ._format import Format, Probe
from ._json import gc_paused

READERS: tuple[Format, ...] = (
    jsprof.FORMAT,
    cpuprofile.FORMAT,
    chrometrace.FORMAT,
    speedscope.FORMAT,
    pprof.FORMAT,
    perfetto.FORMAT,
    folded.FORMAT,
)
WRITE_ONLY: tuple[Format, ...] = (firefox.FORMAT,)
FORMATS: dict[str, Format] = {f.name: f for f in (*READERS, *WRITE_ONLY)}

__all__ = ["FORMATS", "READERS", "Format", "Probe", "detect", "read_any", "writer_for"]


def _detect(probe: Probe) -> Format | None:
    for fmt in READERS:
        if fmt.sniff_head is not None and fmt.sniff_head(probe):
            return fmt
    for fmt in READERS:
        if fmt.sniff is not None and fmt.sniff(probe):
            return fmt
    return None


def detect(data: bytes, source: str) -> Format | None:
    """The format whose reader would read `data` (sniffed as `read_any` does), or None."""
    with gc_paused():
        return _detect(Probe(data, source))


def read_any(data: bytes, source: str) -> Recording:
    probe = Probe(data, source)
    with gc_paused():
        fmt = _detect(probe)
        if fmt is not None:
            rec = fmt.read(probe)  # type: ignore[misc]
            del probe  # a parsed document is freed while the GC is still paused
            return rec
    readable = ", ".join(f.name for f in READERS)
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
    # Extensions compare case-insensitively: `.CPUPROFILE` is a .cpuprofile.
    lower = path.lower()
    name = lower[:-3] if lower.endswith(".gz") else lower
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
