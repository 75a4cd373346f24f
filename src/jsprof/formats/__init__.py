"""The trace formats. Input is sniffed from content, never from the extension alone.

Each format converts to or from the Recording; there is no format-to-format converter.
`READERS` is the order sniffing tries: first every reader's cheap look at the first bytes
(`sniff_head`), then, in the same order, the sniffers that may parse the input. The jsprof
format comes first (it is the native one); OTLP before pprof and pprof before Perfetto (all
protobuf; OTLP's check is the strictest, then pprof's); folded stacks, plain text, last.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import TraceFormatError, UsageError

if TYPE_CHECKING:
    from ..trace import Recording
    from ._format import Format, Probe

# Format name -> (module, output extensions). Importing every format costs `jsprof record`
# ~0.1 s of start-up just to check `-o`, so the extension decides first and only that
# format's module is imported; test_format_table holds this table to the real formats.
TABLE: dict[str, tuple[str, tuple[str, ...]]] = {
    "jsprof": ("jsprof", (".json", ".jsprof.json")),
    "cpuprofile": ("cpuprofile", (".cpuprofile",)),
    "chrome-trace": ("chrometrace", (".trace.json", ".chrome.json")),
    "speedscope": ("speedscope", (".speedscope.json",)),
    "otlp-json": ("otlpjson", (".otlp.json",)),
    "otlp": ("otlp", (".otlp.pb",)),
    "pprof": ("pprof", (".pprof", ".pb", ".pb.gz")),
    "perfetto": ("perfetto", (".pftrace", ".perfetto-trace", ".perfetto")),
    "folded": ("folded", (".folded", ".collapsed")),
    "firefox": ("firefox", (".firefox.json",)),
}
_READER_NAMES = (
    "jsprof",
    "cpuprofile",
    "chrome-trace",
    "speedscope",
    "otlp-json",
    "otlp",
    "pprof",
    "perfetto",
    "folded",
)
_WRITE_ONLY_NAMES = ("firefox",)


def _load(name: str) -> Format:
    return importlib.import_module(f".{TABLE[name][0]}", __name__).FORMAT


def _readers() -> tuple[Format, ...]:
    readers = globals().get("READERS")
    return readers if readers is not None else __getattr__("READERS")


def __getattr__(name: str) -> Any:
    # READERS, WRITE_ONLY and FORMATS import every format, so only when asked for.
    if name in ("READERS", "WRITE_ONLY", "FORMATS"):
        readers = tuple(_load(n) for n in _READER_NAMES)
        write_only = tuple(_load(n) for n in _WRITE_ONLY_NAMES)
        globals().update(
            READERS=readers,
            WRITE_ONLY=write_only,
            FORMATS={f.name: f for f in (*readers, *write_only)},
        )
        return globals()[name]
    if name in ("Format", "Probe"):
        from . import _format as module

        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMATS", "READERS", "Format", "Probe", "detect", "read_any", "writer_for", "writer_name"
]


def _detect(probe: Probe) -> Format | None:
    # The heads are tried in the readers' order, each reader imported only when its turn
    # comes: a jsprof file (the first) is told without importing the other eight, whose
    # protobuf, pprof and OTLP modules took 480-620 ms of `jsprof report`'s 1.4 s at load
    # 22. The whole sniffs below need every reader, as before.
    for name in _READER_NAMES:
        fmt = _load(name)
        if fmt.sniff_head is not None and fmt.sniff_head(probe):
            return fmt
    readers = _readers()
    for fmt in readers:
        if fmt.sniff is not None and fmt.sniff(probe):
            return fmt
    return None


def detect(data: bytes, source: str) -> Format | None:
    """The format whose reader would read `data` (sniffed as `read_any` does), or None."""
    from ._format import Probe
    from ._json import gc_paused

    with gc_paused():
        return _detect(Probe(data, source))


def read_any(data: bytes, source: str) -> Recording:
    from ._format import Probe
    from ._json import gc_paused

    probe = Probe(data, source)
    with gc_paused():
        fmt = _detect(probe)
        if fmt is not None:
            rec = fmt.read(probe)  # type: ignore[misc]
            del probe  # a parsed document is freed while the GC is still paused
            return rec
    readable = ", ".join(_READER_NAMES)
    raise TraceFormatError(
        f"{source}: not a trace format jsprof reads ({readable}); see `jsprof formats`"
    )


def writer_name(path: str, format: str | None, option: str | None = "--format") -> str:
    """The name of the format `path` is written in (`format` if given), or a UsageError;
    imports no format module, so `record` checks its `-o` without numpy (start-up).
    `option`: the command's option that names a format, offered when the name does not
    tell (None: the command has none, and only the endings are offered)."""
    if format is not None:
        if format not in TABLE:
            names = ", ".join(TABLE)
            raise UsageError(f"unknown output format {format!r}; choose one of: {names}")
        return format
    # Extensions compare case-insensitively: `.CPUPROFILE` is a .cpuprofile.
    lower = path.lower()
    name = lower[:-3] if lower.endswith(".gz") else lower
    # Longest extension first, so `.jsprof.json` beats `.json`.
    best = None
    for fmt_name, (_, extensions) in TABLE.items():
        for ext in extensions:
            if name.endswith(ext) and (best is None or len(ext) > len(best[1])):
                best = (fmt_name, ext)
    if best is None:
        if path == "-":
            return "jsprof"
        endings = ", ".join(dict.fromkeys(e for _, exts in TABLE.values() for e in exts))
        also = f", or pass {option}" if option else ""
        raise UsageError(
            f"cannot tell the output format from {path!r}; end the name in one of "
            f"{endings} (see `jsprof formats`){also}"
        )
    return best[0]


def writer_for(path: str, format: str | None, option: str | None = "--format") -> Format:
    return _load(writer_name(path, format, option))
